"""The file formats jetastar reads and writes, and how a path finds its format.

Modelled on uproot's ``_libraries``: each format is a :class:`Format` (name, suffixes, the first bytes
of its files, and ``read`` / ``n_jets`` / ``iterate`` / ``write`` / ``read_results`` / ``info``);
its module registers one instance with :func:`register_format`, and the functions of
:mod:`jetastar.io` look the format up in :data:`FORMATS` (:func:`format_of`) instead of testing
names. jetastar registers ``"hdf5"`` (:mod:`jetastar.io.hdf5`), ``"root"``
(:mod:`jetastar.io.root`) and the read-only ``"legacy"`` Ginkgo pickles (:mod:`jetastar.io.legacy`).

Example:
    >>> from jetastar import io
    >>> from jetastar.io.formats import FORMATS, file_format
    >>> sorted(FORMATS), file_format("out/results.root", sniff=False)
    (['hdf5', 'legacy', 'root'], 'root')
"""

from __future__ import annotations

import abc
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ..errors import FileFormatError
from ..ginkgo.likelihood import truth_log_likelihoods
from ..jet import JetCollection
from ..result_tables import AlgorithmResults

__all__ = [
    "FORMATS",
    "ColumnReader",
    "Format",
    "column_of",
    "file_format",
    "format_of",
    "register_format",
    "writable_format",
]


def column_of(collection: JetCollection, name: str) -> Any:
    """A column of a collection by its :class:`ColumnReader` name: an attribute (``"leaves"``,
    ``"leaf_offsets"``, ``"children"``, ``"jet_type"``, ...), ``"params.<name>"`` or
    ``"truth_llh_<form>"`` (the truth trees' log-likelihoods, NaN without one)."""
    if name.startswith("params."):
        return collection.params[name[len("params."):]]
    if name.startswith("truth_llh_"):
        return truth_log_likelihoods(collection, name[len("truth_llh_"):])
    return getattr(collection, name)


class ColumnReader:
    """Some columns of the jets ``start:stop`` of an open file, without the others (e.g. to hash
    a large file column by column in bounded memory).

    A column has the name and the form it has in a :class:`~jetastar.JetCollection` of those
    jets (:func:`column_of`): ``"leaves"`` ``(m, 4)``, ``"leaf_offsets"`` ``(n + 1,)`` from 0,
    ``"children"`` ``(k, 2)``, ``"leaf_of_node"``, ``"node_offsets"``, ``"jet_id"``, ``"seed"``,
    ``"jet_type"``, ``"params.<name>"`` and ``"truth_llh_symmetric"`` / ``"truth_llh_legacy"``.
    This generic reader reads every column of the jets and picks; formats override :meth:`read`
    to read only what is asked.

    Args:
        fmt: the file's format.
        path: the file.
    """

    def __init__(self, fmt: Format, path: str | os.PathLike[str]) -> None:
        self.fmt = fmt
        self.path = path

    def read(self, names: list[str], start: int, stop: int) -> dict[str, Any]:
        """The columns ``names`` of jets ``start:stop``."""
        collection = self.collection(start, stop)
        return {name: column_of(collection, name) for name in names}

    def collection(self, start: int, stop: int, *, node_data: bool = True) -> JetCollection:
        """Every column of jets ``start:stop`` (not validated), from the open file.

        Args:
            start, stop: the jets.
            node_data: also the truth trees' node momenta and per-node extra columns (with
                ``False``, formats that store them apart may leave them out: clustering reads
                only the leaves, the tree structure and the jets' columns).
        """
        return self.fmt.read(self.path, slice(start, stop), validate=False)

    def close(self) -> None:
        """Release the file."""

    def __enter__(self) -> ColumnReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Format(abc.ABC):
    """One on-disk format of jet collections (and results). Subclass it (``read`` and ``info``
    are required) and register an instance.

    Attributes:
        name: the registry key (``"hdf5"``).
        suffixes: lower-case file extensions (``(".h5", ".hdf5")``).
        magic: the first bytes of its files, to recognise a file without a known extension.
        hint: how error messages name its extensions (``".h5/.hdf5"``).
        read_only: empty for a format jetastar writes, else why not (for the error message).
    """

    name: str = ""
    suffixes: tuple[str, ...] = ()
    magic: bytes = b""
    hint: str = ""
    read_only: str = ""

    @abc.abstractmethod
    def read(self, path: str | os.PathLike[str], jets: Any = None, *,
             validate: bool = True) -> JetCollection:
        """The jets of a file (``jets``: ``None``, a slice, an index or positions)."""

    def n_jets(self, path: str | os.PathLike[str]) -> int:
        """Number of jets in a file."""
        return len(self.read(path, validate=False))

    def iterate(self, path: str | os.PathLike[str], step_size: int, *,
                validate: bool = True) -> Iterator[JetCollection]:
        """Consecutive collections of at most ``step_size`` jets."""
        collection = self.read(path, validate=validate)
        for a in range(0, len(collection), step_size):
            yield collection[a:min(len(collection), a + step_size)]

    def write(self, path: str | os.PathLike[str], collection: JetCollection | None,
              tables: Mapping[str, AlgorithmResults], *,
              attrs: Mapping[str, Any] | None = None) -> None:
        """Write jets and results tables atomically."""
        raise FileFormatError(f"{path}: jetastar does not write {self.name} files")

    def read_results(self, path: str | os.PathLike[str], algorithms: Any = None,
                     jets: Any = None) -> dict[str, AlgorithmResults]:
        """Clustering results stored in a file: label -> table."""
        raise FileFormatError(f"{path}: {self.name} files hold no jetastar clustering results")

    @abc.abstractmethod
    def info(self, path: str | os.PathLike[str], *, results: bool = True) -> dict[str, Any]:
        """A summary of a file (see :func:`jetastar.io.file_info`; ``results=False``: the
        results' rows are not read)."""

    def columns(self, path: str | os.PathLike[str]) -> ColumnReader:
        """A :class:`ColumnReader` of a file (close it when done)."""
        return ColumnReader(self, path)

    def stream_writer(self, path: str | os.PathLike[str], attrs: Mapping[str, Any] | None = None,
                      need: int = 0) -> Any:
        """A writer of jets and results block by block (``add_jets``, ``add_results``,
        ``close``, ``abort``), atomic like :meth:`write`; ``need``: an upper estimate of the
        file's size, checked against the free space."""
        raise FileFormatError(f"{path}: jetastar does not write {self.name} files block by block")

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} {'/'.join(self.suffixes)}>"


#: Registered formats: name -> :class:`Format`, in the order they were registered.
FORMATS: dict[str, Format] = {}


def register_format(fmt: Format) -> Format:
    """Add a format to :data:`FORMATS` (replacing one of the same name); returns it."""
    FORMATS[fmt.name] = fmt
    return fmt


def file_format(path: str | os.PathLike[str], *, sniff: bool = True) -> str:
    """The registered format of a file, from its extension (else from its first bytes).

    Raises:
        FileFormatError: when neither tells.

    Example:
        >>> file_format("out/results.root", sniff=False)
        'root'
    """
    ext = Path(path).suffix.lower()
    for fmt in FORMATS.values():
        if ext in fmt.suffixes:
            return fmt.name
    if sniff and Path(path).is_file():
        with open(path, "rb") as fh:
            head = fh.read(max([1, *(len(f.magic) for f in FORMATS.values())]))
        for fmt in FORMATS.values():
            if fmt.magic and head.startswith(fmt.magic):
                return fmt.name
    # formats jetastar writes first, then read-only ones (each group in registration order)
    hints = [f.hint for f in sorted(FORMATS.values(), key=lambda f: bool(f.read_only)) if f.hint]
    use = f"{', '.join(hints[:-1])} or {hints[-1]}" if len(hints) > 1 else "".join(hints)
    raise FileFormatError(f"{path}: unknown file type {ext or '(no extension)'!r}; use {use}")


def format_of(path: str | os.PathLike[str], *, sniff: bool = True) -> Format:
    """The :class:`Format` instance of a file (:func:`file_format`)."""
    return FORMATS[file_format(path, sniff=sniff)]


def writable_format(path: str | os.PathLike[str]) -> Format:
    """The format to write ``path`` in (from its extension).

    Raises:
        FileFormatError: for an unknown extension or a read-only format.
    """
    fmt = format_of(path, sniff=False)
    if fmt.read_only:
        writable = " or ".join(f.hint for f in FORMATS.values() if not f.read_only and f.hint)
        raise FileFormatError(f"{path}: {fmt.read_only}; write {writable}")
    return fmt
