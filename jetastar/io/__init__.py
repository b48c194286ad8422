"""Jet collections and clustering results on disk: HDF5, ROOT and legacy Ginkgo pickles.

:func:`read` and :func:`write` pick the format from the file extension:

* ``.h5`` / ``.hdf5`` — HDF5 via h5py (:mod:`jetastar.io.hdf5`);
* ``.root`` — ROOT TTrees via uproot (:mod:`jetastar.io.root`);
* ``.pkl`` / ``.pickle`` — read-only import of the reference Ginkgo generator's pickles, without
  torch and without executing code (:mod:`jetastar.io.legacy`).

The on-disk layouts are documented in ``jetastar/io/schema.md`` and can be read with plain h5py /
uproot. Writes are atomic (temporary file in the same directory + fsync + rename).

Errors are one line and name the file (and the jet and field for a bad jet):
:class:`FileNotFoundError`, :class:`FileFormatError` (wrong format, corrupt or truncated file,
unknown schema version), :class:`InvalidJetInFileError` (a bad jet inside a good file).

Example:
    >>> import os, tempfile
    >>> import numpy as np
    >>> from jetastar import Jet, JetCollection, Tree
    >>> from jetastar import io
    >>> jet = Jet(np.array([[10.0, 0, 0, 9.0], [10.0, 0, 0, -9.0]]), truth=Tree.from_nested((0, 1)))
    >>> path = os.path.join(tempfile.mkdtemp(), "jets.h5")
    >>> io.write(path, JetCollection.from_jets([jet]))
    >>> len(io.read(path)), io.file_info(path)["n_jets"]
    (1, 1)
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..clustering.result import ClusteringResult
from ..jet import JetCollection
from ._common import (
    SCHEMA_VERSION,
    FileFormatError,
    InvalidJetInFileError,
    check_exists,
    get_extras,
    jet_slice,
    provenance,
    set_extras,
    take_with_extras,
)
from .legacy import UnsafePickleError, import_legacy_pickle
from . import particle_files
from .particle_files import ParticleSource, iterate_particles, particle_entries, read_particles
from .results import AlgorithmResults

__all__ = [
    "SCHEMA_VERSION",
    "AlgorithmResults",
    "FileFormatError",
    "InvalidJetInFileError",
    "ParticleSource",
    "UnsafePickleError",
    "file_format",
    "file_info",
    "get_extras",
    "import_legacy_pickle",
    "iterate",
    "iterate_particles",
    "jet_slice",
    "n_jets",
    "particle_entries",
    "provenance",
    "read",
    "read_particles",
    "read_results",
    "results_table",
    "set_extras",
    "write",
]

# The foreign-file readers were the module ``jetastar.io.particles``: that import path still works.
sys.modules[f"{__name__}.particles"] = particle_files


def __getattr__(name: str) -> Any:
    if name == "particles":  # the old name of particle_files
        return particle_files
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_EXTENSIONS = {
    ".h5": "hdf5", ".hdf5": "hdf5", ".hdf": "hdf5",
    ".root": "root",
    ".pkl": "legacy", ".pickle": "legacy",
}


def file_format(path: str | os.PathLike[str], *, sniff: bool = True) -> str:
    """``"hdf5"``, ``"root"`` or ``"legacy"`` from the extension (else from the first bytes).

    Raises:
        FileFormatError: when neither tells.

    Example:
        >>> file_format("out/results.root", sniff=False)
        'root'
    """
    ext = Path(path).suffix.lower()
    if ext in _EXTENSIONS:
        return _EXTENSIONS[ext]
    if sniff and Path(path).is_file():
        with open(path, "rb") as fh:
            head = fh.read(8)
        if head == b"\x89HDF\r\n\x1a\n":
            return "hdf5"
        if head[:4] == b"root":
            return "root"
        if head[:1] == b"\x80":
            return "legacy"
    raise FileFormatError(
        f"{path}: unknown file type {ext or '(no extension)'!r}; use .h5/.hdf5, .root or .pkl"
    )


def _writable_format(path: str | os.PathLike[str]) -> str:
    fmt = file_format(path, sniff=False)
    if fmt == "legacy":
        raise FileFormatError(
            f"{path}: pickles are read-only (legacy import); write .h5/.hdf5 or .root"
        )
    return fmt


def read(
    path: str | os.PathLike[str], jets: Any = None, *, validate: bool = True
) -> JetCollection:
    """Read a jet collection from an HDF5, ROOT or legacy pickle file.

    Args:
        path: the file (format from the extension).
        jets: ``None`` for all jets, or a slice / index / array of positions; HDF5 and ROOT read only
            the parts of the file that hold them.
        validate: check every selected jet (finite, positive energies, leaf counts, tree sizes)
            and raise :class:`InvalidJetInFileError` for the first bad one.

    Returns:
        A :class:`~jetastar.JetCollection`; extra columns (legacy ``deltas``, cached truth
        log-likelihoods) are in ``collection.node_columns`` / ``collection.jet_columns``.

    Example:
        >>> from jetastar import io
        >>> jets = io.read("tests/data/legacy_ginkgo_W_sample.pkl")  # doctest: +SKIP
    """
    fmt = file_format(check_exists(path))
    if fmt == "hdf5":
        from .hdf5 import read_hdf5

        return read_hdf5(path, jets, validate=validate)
    if fmt == "root":
        from .root import read_root

        return read_root(path, jets, validate=validate)
    collection = import_legacy_pickle(path)
    if jets is not None:
        from .hdf5 import _normalise_selection

        start, stop, take = _normalise_selection(jets, len(collection))
        collection = jet_slice(collection, start, stop)
        if take is not None:
            collection = take_with_extras(collection, take)
    return collection


def n_jets(path: str | os.PathLike[str]) -> int:
    """Number of jets in a file (reads only metadata for HDF5/ROOT)."""
    fmt = file_format(check_exists(path))
    if fmt == "hdf5":
        from .hdf5 import n_jets_hdf5

        return n_jets_hdf5(path)
    if fmt == "root":
        from .root import n_jets_root

        return n_jets_root(path)
    return len(import_legacy_pickle(path))


def iterate(
    path: str | os.PathLike[str], step_size: int = 10000, *, validate: bool = True
) -> Iterator[JetCollection]:
    """Yield the jets of a file in consecutive collections of at most ``step_size`` jets.

    ROOT files are read with ``uproot.iterate``; HDF5 files slice by slice.
    """
    fmt = file_format(check_exists(path))
    if fmt == "hdf5":
        from .hdf5 import iterate_hdf5

        yield from iterate_hdf5(path, step_size, validate=validate)
    elif fmt == "root":
        from .root import iterate_root

        yield from iterate_root(path, step_size, validate=validate)
    else:
        collection = import_legacy_pickle(path)
        for a in range(0, len(collection), step_size):
            yield jet_slice(collection, a, min(len(collection), a + step_size))


def results_table(
    algorithm: str, results: Sequence[ClusteringResult], jet_index: Any = None, **kw: Any
) -> AlgorithmResults:
    """An :class:`AlgorithmResults` from a list of results (row ``k`` = jet ``jet_index[k]``,
    default ``k``)."""
    if jet_index is None:
        jet_index = range(len(results))
    return AlgorithmResults.from_results(algorithm, list(results), jet_index=list(jet_index), **kw)


def _as_tables(
    results: Mapping[str, Any] | None, collection: JetCollection | None
) -> dict[str, AlgorithmResults]:
    out: dict[str, AlgorithmResults] = {}
    for label, value in (results or {}).items():
        if isinstance(value, AlgorithmResults):
            out[label] = value
            continue
        value = list(value)
        if collection is not None and len(value) != len(collection):
            raise ValueError(
                f"results of {label!r}: {len(value)} results for {len(collection)} jets; pass an "
                "AlgorithmResults (with jet_index) for a subset"
            )
        ids = None if collection is None else collection.jet_id
        out[label] = AlgorithmResults.from_results(
            value[0].algorithm if value else label, value, jet_index=range(len(value)), jet_id=ids
        )
    return out


def write(
    path: str | os.PathLike[str],
    collection: JetCollection | None,
    results: Mapping[str, Any] | None = None,
    *,
    attrs: Mapping[str, Any] | None = None,
) -> None:
    """Write jets (and optionally clustering results) to an HDF5 or ROOT file, atomically.

    Args:
        path: ``.h5``/``.hdf5`` or ``.root``; an existing file is replaced only once the new one is
            complete.
        collection: the jets (``None``: results only).
        results: label (usually the algorithm name) -> :class:`AlgorithmResults` or a list of
            :class:`~jetastar.clustering.ClusteringResult`, one per jet in collection order.
        attrs: provenance to record (``seed``, ``command``, ``generator``, ...); jetastar version,
            date and command line are added automatically.

    Example:
        >>> import os, tempfile
        >>> from jetastar import io, JetCollection
        >>> io.write(os.path.join(tempfile.mkdtemp(), "x.root"), JetCollection.from_jets([]))
    """
    fmt = _writable_format(path)
    tables = _as_tables(results, collection)
    parent = Path(path).parent
    if not parent.is_dir():
        raise FileNotFoundError(f"{path}: directory {parent} does not exist")
    if fmt == "hdf5":
        from .hdf5 import write_hdf5

        write_hdf5(path, collection, tables, attrs=attrs)
    else:
        from .root import write_root

        write_root(path, collection, tables, attrs=attrs)


def read_results(
    path: str | os.PathLike[str], algorithms: Any = None, *, jets: Any = None
) -> dict[str, AlgorithmResults]:
    """Clustering results stored in a file: label -> :class:`AlgorithmResults`.

    Use ``table.result(row)`` / ``table.results()`` for :class:`ClusteringResult` objects and
    ``table.jet_index`` to find each row's jet.

    Args:
        path: an HDF5 or ROOT file written by jetastar.
        algorithms: labels to read (default: all).
        jets: only rows of these jet positions (slice or array).
    """
    fmt = file_format(check_exists(path))
    if fmt == "hdf5":
        from .hdf5 import read_hdf5_results

        return read_hdf5_results(path, algorithms, jets)
    if fmt == "root":
        from .root import read_root_results

        return read_root_results(path, algorithms, jets)
    raise FileFormatError(f"{path}: legacy pickles hold no jetastar clustering results")


def file_info(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A summary of a file: format, schema version, provenance, jet counts, leaf counts
    (``n_leaves`` array), jet types, extra columns and, per result label, rows per status."""
    fmt = file_format(check_exists(path))
    if fmt == "hdf5":
        from .hdf5 import hdf5_info

        return hdf5_info(path)
    if fmt == "root":
        from .root import root_info

        return root_info(path)
    collection = import_legacy_pickle(path)
    types = [str(t) for t in collection.jet_type]
    node, jet = get_extras(collection)
    return {
        "path": str(path),
        "format": "legacy",
        "attrs": {"format": "legacy Ginkgo pickle (read-only import)"},
        "n_jets": len(collection),
        "n_leaves": collection.n_leaves,
        "jet_types": {t: types.count(t) for t in sorted(set(types))},
        "has_truth": int((np.diff(collection.node_offsets) > 0).sum()),
        "extra_columns": sorted([*node, *jet]),
        "results": {},
    }
