"""The last step of an input's batch run: its part files merged into the output file.

:func:`merge_parts` follows the protocol of :mod:`jetastar.batch.resume`: every jet exactly once
per algorithm, the input unchanged since its hash was taken, one atomic write, then the part folder
is removed. It streams: the output is written block by block (the input's jets
:data:`MERGE_BLOCK` at a time, then each algorithm's rows one part at a time), so its memory does
not grow with the number of jets. Jets read from particle files (whose output also holds a table
by input entry, made from every jet at once) are merged in memory. :func:`status_counts_of`
reads back what an output holds.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from .. import io
from .._progress import progress_bar
from ..comparison import table_counts
from ..errors import BatchError
from ..io.dispatch import stream_writer
from ..jet import JetCollection
from ..result_tables import AlgorithmResults
from .config import BatchConfig
from .resume import file_state, part_counters, part_name, read_part
from .sources import JetSource

__all__ = ["MERGE_BLOCK", "MergeCounts", "check_unchanged", "merge_parts", "status_counts_of"]

#: jets of the input read and written at a time by the merge (a multiple of the ROOT basket)
MERGE_BLOCK = 10_000


def merge_parts(
    reader: JetSource, out: Path, parts: Path, chunks: list[tuple[int, int]], config: BatchConfig,
    attrs: dict[str, Any] | None, *, progress: bool = False,
    input_state: tuple[int, ...] | None = None,
) -> MergeCounts:
    """Write the output of an input whose chunks are all done, and remove its part folder.

    Args:
        reader: the input.
        out: the output file.
        parts: its part folder.
        chunks: every chunk ``(start, stop)`` of the input, in order.
        config: the run's settings.
        attrs: attributes of the output (``input_identity``: the identity taken at the start).
        progress: a bar over the jets and result rows written, shown when the merge takes over
            2 s (after the clustering bar has reached 100 %, a long merge is then not silent).
        input_state: :func:`~jetastar.batch.resume.file_state` of the input taken before its
            hash: when the input still has it, its hash is not taken again.

    Returns:
        A :class:`MergeCounts`: per algorithm, status -> number of jets (as
        :func:`status_counts_of` the output), and the counts of
        :func:`jetastar.comparison.status_counts` gathered part by part (``None`` where the
        output was written in memory).

    Raises:
        BatchError: a part without an algorithm, jets missing or duplicated, or an input that
            changed while it was clustered.
    """
    meta = {
        "input": str(reader.path),
        "batch": {**config.fingerprint(), "plugins": list(config.plugins)},
        **(attrs or {}),
    }
    n = reader.n_jets
    if n == 0 or "entry" in reader.chunk(0, 1).jet_columns:
        _merge_in_memory(reader, out, parts, chunks, config, meta, progress, input_state)
        counts = MergeCounts(status_counts_of(out), None)
    else:
        counts = _merge_streaming(reader, out, parts, chunks, config, meta, progress, input_state)
    shutil.rmtree(parts, ignore_errors=True)
    return counts


class MergeCounts(NamedTuple):
    """What :func:`merge_parts` counted while writing an output."""

    #: per algorithm, status -> number of jets
    status: dict[str, dict[str, int]]
    #: per algorithm, the counts of :func:`jetastar.comparison.status_counts` (``None``: not
    #: gathered; read them from the output)
    trees: dict[str, dict[str, int]] | None


def _merge_streaming(
    reader: JetSource, out: Path, parts: Path, chunks: list[tuple[int, int]], config: BatchConfig,
    meta: dict[str, Any], progress: bool, input_state: tuple[int, ...] | None,
) -> MergeCounts:
    """The output written block by block: the jets, then each algorithm's rows part by part (the
    layout of :func:`jetastar.io.write`); at most one block of jets or one part's table in
    memory. Returns the status and tree counts of each algorithm."""
    n = reader.n_jets
    files = [parts / part_name(a, b) for a, b in chunks]
    need = _size(reader.path) + sum(_size(f) for f in files)
    writer = stream_writer(out, meta, need=2 * need)
    names = list(config.algorithms)
    statuses: dict[str, dict[str, int]] = {}
    trees: dict[str, dict[str, int]] = {}
    try:
        with progress_bar(total=n * (1 + len(names)), desc=f"merging {out.name}", unit="row",
                          show=progress, delay=2.0) as bar:
            for a in range(0, n, MERGE_BLOCK):
                b = min(n, a + MERGE_BLOCK)
                writer.add_jets(reader.chunk(a, b))
                bar.update(b - a)
            if hasattr(writer, "set_counters"):
                writer.set_counters({k for f in files for k in part_counters(f)})
            for name in names:
                counts = _Coverage(n)
                for (a, b), f in zip(chunks, files, strict=True):
                    table = read_part(f, [name]).get(name)
                    if table is None:
                        raise BatchError(f"{f}: has no results for {name!r}")
                    counts.add(table.jet_index)
                    seen = statuses.setdefault(name, {})
                    values, number = np.unique(np.asarray(table.status, dtype=str),
                                               return_counts=True)
                    for v, c in zip(values.tolist(), number.tolist(), strict=True):
                        seen[v] = seen.get(v, 0) + c
                    total = trees.setdefault(name, {})
                    for k, c in table_counts(table).items():
                        total[k] = total.get(k, 0) + c
                    writer.add_results(name, table)
                    bar.update(b - a)
                counts.check(out, name)
        check_unchanged(reader, None, meta.get("input_identity"), input_state)
    except BaseException as exc:
        writer.abort(exc)
        raise
    writer.close()
    return MergeCounts({name: dict(sorted(c.items())) for name, c in statuses.items()}, trees)


class _Coverage:
    """How often each jet appears in an algorithm's rows, counted part by part."""

    def __init__(self, n: int) -> None:
        self.counts = np.zeros(n, dtype=np.uint8)
        self.outside = 0

    def add(self, idx: np.ndarray) -> None:
        idx = np.asarray(idx, dtype=np.int64)
        inside = (idx >= 0) & (idx < self.counts.shape[0])
        self.outside += int(np.count_nonzero(~inside))
        idx = idx[inside]
        if idx.size:
            lo, hi = int(idx.min()), int(idx.max()) + 1
            window = self.counts[lo:hi]
            window += np.minimum(np.bincount(idx - lo, minlength=hi - lo), 2).astype(np.uint8)
            np.minimum(window, 2, out=window)

    def check(self, out: Path, name: str) -> None:
        missing = int(np.count_nonzero(self.counts == 0))
        duplicated = int(np.count_nonzero(self.counts > 1)) + self.outside
        if missing or duplicated:
            raise BatchError(f"{out}: results of {name!r} are inconsistent: {missing} jets "
                             f"missing, {duplicated} duplicated")


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _merge_in_memory(
    reader: JetSource, out: Path, parts: Path, chunks: list[tuple[int, int]], config: BatchConfig,
    meta: dict[str, Any], progress: bool, input_state: tuple[int, ...] | None,
) -> None:
    """Every part and every jet read, then one write (jets of particle files: the table by input
    entry is made from all of them at once)."""
    tables: dict[str, list[AlgorithmResults]] = {a: [] for a in config.algorithms}
    with progress_bar(total=len(chunks), desc=f"merging {out.name}", unit="part", show=progress,
                      delay=2.0) as bar:
        for a, b in chunks:
            part = read_part(parts / part_name(a, b))
            for name in config.algorithms:
                if name not in part:
                    raise BatchError(f"{parts / part_name(a, b)}: has no results for {name!r}")
                tables[name].append(part[name])
            bar.update(1)
    n = reader.n_jets
    merged = {}
    for name, pieces in tables.items():
        table = AlgorithmResults.concatenate(pieces) if pieces else None
        if table is None:
            table = AlgorithmResults.from_results(name, [], jet_index=[])
        idx = table.jet_index
        if idx.shape[0] != n or not np.array_equal(np.sort(idx), np.arange(n)):
            counts = np.bincount(idx, minlength=n) if idx.size else np.zeros(n, np.int64)
            raise BatchError(
                f"{out}: results of {name!r} are inconsistent: {int(np.sum(counts == 0))} jets "
                f"missing, {int(np.sum(counts > 1))} duplicated"
            )
        merged[name] = table
    collection = reader.whole()
    check_unchanged(reader, collection, meta.get("input_identity"), input_state)
    io.write(out, collection, merged, attrs=meta)


def check_unchanged(reader: JetSource, collection: JetCollection | None,
                    identity: dict[str, Any] | None, state: tuple[int, ...] | None = None) -> None:
    """The jets written with the results are the jets whose hash was taken at the start.

    Args:
        reader: the input.
        collection: its jets when they were read whole (else its hash is taken by reading it
            again, column by column).
        identity: the identity taken at the start (``None``: nothing to check).
        state: :func:`~jetastar.batch.resume.file_state` of the input taken before that hash
            (``None``: unknown); while the input has it, the file was not touched and is not hashed
            again (which costs a read of every jet).

    Raises:
        BatchError: the input's content hash differs from ``identity["sha256"]``.
    """
    if identity is None:
        return
    if state is not None and file_state(reader.path) == state:
        return
    if reader.digest(collection) != identity["sha256"]:
        raise BatchError(
            f"{reader.path}: the input changed while it was being clustered; rerun with --fresh"
        )


def status_counts_of(out: Path) -> dict[str, dict[str, int]]:
    """Per algorithm of a results file: status -> number of jets."""
    info = io.file_info(out)
    return {k: dict(v["status"]) for k, v in info.get("results", {}).items()}
