"""What the block-by-block writers of :mod:`jetastar.io.hdf5` and :mod:`jetastar.io.root` share.

:class:`StreamWriter` holds everything but the layout: the temporary file that takes the
destination's name only when the writer closes (atomic; deleted by :meth:`~StreamWriter.abort`),
the free-space check, the provenance, the order of the calls (the jets, or a jets file copied as it
is, before the results; rows by input entry), the count of the jets and their generator
parameters, the close and the context manager. Each format's writer subclasses it with what only
that format knows: how its file is opened (and opened again after a byte copy), which files can
be copied, how jets, results and rows by entry are laid out, and how the metadata is written when
the file closes.
"""

from __future__ import annotations

import abc
import os
from collections.abc import Mapping
from typing import Any, TypeVar

import numpy as np

from .._atomic import atomic_path
from ..jet import JetCollection
from ..result_tables import AlgorithmResults
from ._by_entry import ByEntryStream
from ._common import GeneratorParamsStream, copy_bytes, writer_meta
from ._space import check_free_space

__all__ = ["StreamWriter"]

_W = TypeVar("_W", bound="StreamWriter")


class StreamWriter(abc.ABC):
    """A file of jets and results written block by block (memory bounded by one block),
    atomically: the file appears under its name only when :meth:`close` succeeds.

    Jets come in file order (:meth:`add_jets`), or all at once from a file of this format that
    holds only jets (:meth:`copy_jets_file`); then the rows of the results tables
    (``add_results``) and, for jets of a particle file, the rows by input entry in jet order
    (:meth:`add_by_entry`). Used as a context manager, the writer closes at the end of the block,
    or aborts when the block raises.

    Args:
        path: destination; replaced when the writer closes.
        attrs: provenance entries to record (added to :func:`~jetastar.io._common.provenance`'s).
        need: an upper estimate of the file's size, checked against the free space.
        **first: metadata entries that come before the provenance (:func:`~jetastar.io._common.
            writer_meta`).
    """

    def __init__(self, path: str | os.PathLike[str], attrs: Mapping[str, Any] | None = None,
                 need: int = 0, **first: Any) -> None:
        if need:
            check_free_space(path, need)
        self._meta = writer_meta(attrs, **first)
        self._atomic = atomic_path(path, clean=True)
        self._tmp = tmp = self._atomic.__enter__()
        try:
            self.f = self._open(tmp)
        except BaseException as exc:
            self._atomic.__exit__(type(exc), exc, exc.__traceback__)
            raise
        #: where the jets go, once made (an HDF5 group, a ROOT tree)
        self._jets: Any = None
        #: the jets are those of a file copied as it is (:meth:`copy_jets_file`), with these
        #: generator parameters (as that file stores them)
        self._copied = False
        self._copied_params: Any = None
        self._n_jets = 0
        self._params = GeneratorParamsStream()
        #: where the results go, once made (an HDF5 group, a ROOT tree)
        self._results: Any = None
        self._by_entry: ByEntryStream | None = None
        self._by_entry_rows = 0

    def update_attrs(self, attrs: Mapping[str, Any]) -> None:
        """Add provenance entries known only after the writing began (e.g. the hash of an input
        taken while its jets were copied); written with the rest when the file closes."""
        self._meta.update(dict(attrs))

    # -- jets
    def add_jets(self, collection: JetCollection) -> None:
        """Append the next jets (their extra columns must be those of the first block)."""
        if self._copied:
            raise ValueError("the jets were copied from a file: no more can be added")
        self._write_jets(collection)
        self._params.add(collection)
        self._n_jets += len(collection)

    def copy_jets_file(self, path: str | os.PathLike[str], stop: Any = None) -> bool:
        """Take the jets of ``path`` as they are, if it is a jetastar file of this format and
        schema that holds its jets and nothing else (an HDF5 file may have an empty ``results``
        group): its bytes are copied into this writer's temporary file, which is then opened
        again for the results (no decompressing and compressing again). Call it before anything
        else is added.

        Args:
            path: the file.
            stop: an event that stops the copy when set (:func:`~jetastar.io._common.copy_bytes`:
                ``InterruptedError``; the writer is then to be aborted).

        Returns:
            Whether the jets were copied; ``False`` (the writer as it was) for any other file.
        """
        if self._jets is not None or self._copied or self._results is not None \
                or self._by_entry is not None:
            raise ValueError("copy_jets_file must come before anything else is added")
        meta = self._jets_only_meta(path)
        if meta is None:
            return False
        self.f.close()
        copy_bytes(path, self._tmp, stop)
        self._open_copy(meta)
        self._copied = True
        self._n_jets = int(meta["n_jets"])
        return True

    # -- results
    @abc.abstractmethod
    def add_results(self, label: str, table: AlgorithmResults) -> None:
        """Append rows of the results table ``label`` (its attributes come from its first rows)."""

    # -- results by input entry (jets of a particle file)
    def add_by_entry(self, collection: JetCollection,
                     tables: Mapping[str, AlgorithmResults]) -> None:
        """Append the next jets' rows of the table by input entry (jets of a particle file, in
        order; ``tables``: their results, ``jet_index`` counted from the first of them: HDF5
        ``/clusters``, the ROOT tree ``clusters``) and, for jets found in events, the events
        that are complete (HDF5 ``/clusters/events``, the ROOT tree ``clusters_events``)."""
        if self._by_entry is None:
            self._by_entry = ByEntryStream(self._meta)
        scalars, per_label, events = self._by_entry.add(collection, tables)
        self._write_by_entry(scalars, per_label)
        self._by_entry_rows += len(collection)
        if events is not None:
            self._write_events(events)

    # -- end
    def close(self) -> None:
        """Write the metadata that depends on every block (:meth:`_write_meta`), close and
        rename the file."""
        try:
            last = self._by_entry.finish() if self._by_entry is not None else None
            if last is not None:
                self._write_events(last)
            self._write_meta()
            self.f.close()
        except BaseException as exc:
            self.abort(exc)
            raise
        self._atomic.__exit__(None, None, None)

    def abort(self, exc: BaseException | None = None) -> None:
        """Close and delete the temporary file (the destination is left as it was)."""
        try:
            self.f.close()
        except Exception:  # already closed, or the file is broken: it is deleted anyway
            pass
        exc = exc if exc is not None else RuntimeError("aborted")
        try:
            self._atomic.__exit__(type(exc), exc, exc.__traceback__)
        except BaseException as again:
            if again is not exc:
                raise

    def __enter__(self: _W) -> _W:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc is None:
            self.close()
        else:
            self.abort(exc)

    @property
    def _has_jets(self) -> bool:
        """Whether the file holds jets (added or copied)."""
        return self._jets is not None or self._copied

    # -- what each format does
    @abc.abstractmethod
    def _open(self, tmp: str) -> Any:
        """The temporary file ``tmp``, opened (created) for writing."""

    @abc.abstractmethod
    def _write_jets(self, collection: JetCollection) -> None:
        """Append the columns of the next jets (:meth:`add_jets`)."""

    @abc.abstractmethod
    def _jets_only_meta(self, path: str | os.PathLike[str]) -> Mapping[str, Any] | None:
        """The metadata of ``path`` (with ``n_jets``) if :meth:`copy_jets_file` can take its
        bytes, else ``None``."""

    @abc.abstractmethod
    def _open_copy(self, meta: Mapping[str, Any]) -> None:
        """Open the temporary file again, now a copy of a jets file with the metadata ``meta``,
        to add the results (``self.f``), and take what the writer needs of ``meta`` (the
        generator parameters: ``self._copied_params``)."""

    @abc.abstractmethod
    def _write_by_entry(self, scalars: Mapping[str, np.ndarray],
                        per_label: Mapping[str, Mapping[str, Any]]) -> None:
        """Append the next rows by input entry (:meth:`~jetastar.io._by_entry.ByEntryStream.add`)."""

    @abc.abstractmethod
    def _write_events(self, events: tuple[Any, ...]) -> None:
        """Append complete events (:meth:`~jetastar.io._by_entry.ByEntryStream.add`)."""

    @abc.abstractmethod
    def _write_meta(self) -> None:
        """Write the metadata that depends on every block (before the file is closed)."""
