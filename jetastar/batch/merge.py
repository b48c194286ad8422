"""The last step of an input's batch run: its part files merged into the output file.

:func:`merge_parts` follows the protocol of :mod:`jetastar.batch.resume`: every jet exactly once
per algorithm, the input unchanged since its hash was taken, one atomic write, then the part folder
is removed. It streams: the output is written block by block (the input's jets
:data:`MERGE_BLOCK` at a time, then each algorithm's rows :data:`MERGE_ROWS` or more at a time,
gathered from consecutive parts; the next block is read by a thread while one is written), so its
memory does not grow with the number of jets. Jets read
from particle files get their tables by input entry the same way, a block of consecutive chunks at
a time (an event whose jets span two blocks waits for the second). :func:`counts_of` reads back
what an output holds.
"""

from __future__ import annotations

import concurrent.futures as cf
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from .. import io
from .._progress import progress_bar
from ..comparison import results_summary, table_counts
from ..errors import BatchError
from ..io.dispatch import stream_writer, written_attrs
from ..jet import JetCollection
from ..result_tables import AlgorithmResults
from .config import BatchConfig
from .resume import file_state, part_counters, part_name, read_part
from .sources import JetSource

__all__ = [
    "MERGE_BLOCK", "MERGE_ROWS", "JetsCopy", "MergeCounts", "check_unchanged", "counts_of",
    "merge_parts", "output_meta", "streams",
]

#: jets of the input read and written at a time by the merge (a multiple of the ROOT basket)
MERGE_BLOCK = 10_000
#: result rows gathered from consecutive parts into one write: the writers' cost per call
#: (uproot's string branches, h5py's appends to each dataset) is paid per block, not per part
#: (parts of 2000 jets made the merge of 200 000 jets with four algorithms 2-3 times slower)
MERGE_ROWS = 50_000


def merge_parts(
    reader: JetSource, out: Path, parts: Path, chunks: list[tuple[int, int]], config: BatchConfig,
    attrs: dict[str, Any] | None, *, progress: bool = False,
    input_state: tuple[int, ...] | None = None, jets_copy: JetsCopy | None = None,
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
        jets_copy: the output, opened before the clustering with ``output_meta(reader, config,
            attrs)``, into which a :class:`JetsCopy` writes the jets (the merge waits for it and
            adds the results); ``None``: the merge opens the output and copies the jets itself.

    Returns:
        A :class:`MergeCounts`: per algorithm, status -> number of jets, and the counts of
        :func:`jetastar.comparison.status_counts` (gathered part by part; read back from the
        output where it was written in memory), as :func:`counts_of` the output.

    Raises:
        BatchError: a part without an algorithm, jets missing or duplicated, or an input that
            changed while it was clustered.
    """
    meta = output_meta(reader, config, attrs)
    if jets_copy is not None:
        counts = _merge_streaming(reader, out, parts, chunks, config, meta, progress, input_state,
                                  jets_copy)
    elif not streams(reader):
        _merge_in_memory(reader, out, parts, chunks, config, meta, progress, input_state)
        counts = counts_of(out)
    else:
        counts = _merge_streaming(reader, out, parts, chunks, config, meta, progress, input_state)
    shutil.rmtree(parts, ignore_errors=True)
    return counts


def output_meta(reader: JetSource, config: BatchConfig,
                attrs: dict[str, Any] | None) -> dict[str, Any]:
    """The provenance :func:`merge_parts` records in the output of ``reader`` (with the seed of
    a jetastar input, so that the results file says which generated jets it holds)."""
    return {
        "input": str(reader.path),
        "batch": {**config.fingerprint(), "plugins": list(config.plugins)},
        **_input_seed(reader),
        **(attrs or {}),
    }


def _input_seed(reader: JetSource) -> dict[str, Any]:
    """``{"seed": s}`` for a jetastar HDF5 / ROOT input that records a generator seed ``s``."""
    if getattr(reader, "fmt", None) not in ("hdf5", "root"):
        return {}
    try:  # (the file's attributes only: no column of its jets is read)
        seed = int((written_attrs(reader.path) or {}).get("seed", -1))
    except (OSError, ValueError, TypeError):
        return {}
    return {"seed": seed} if seed >= 0 else {}


def streams(reader: JetSource) -> bool:
    """Whether the output of ``reader`` is written block by block (an input without jets is
    written at once)."""
    return reader.n_jets > 0


class JetsCopy:
    """The jets of an input written into its output's temporary file by a thread while the
    chunks are clustered (the jets tree does not depend on the results; the merge then only adds
    the results). An input of the output's format that holds only jets is copied byte for byte
    (the writer's ``copy_jets_file``); any other is read with a reader of the thread's own,
    :data:`MERGE_BLOCK` jets at a time, and written again (compression releases the interpreter
    lock, so the copy runs beside the clustering).

    Args:
        open_input: opens the input (a second reader; the caller's is not shared across threads).
        path: the input.
        n_jets: its number of jets.
        out: the output file (written atomically: nothing appears there until the merge closes
            it; :meth:`abort` deletes the temporary file).
        meta: the output's provenance (:func:`output_meta`).
        need: an upper estimate of the output's size, checked against the free space.

    Example:
        >>> import tempfile
        >>> from pathlib import Path
        >>> from jetastar import io
        >>> from jetastar.ginkgo import ShowerParams, generate
        >>> from jetastar.batch.sources import JetFileReader
        >>> folder = Path(tempfile.mkdtemp())
        >>> io.write(folder / "in.h5", generate(3, ShowerParams.qcd(), seed=1))
        >>> copy = JetsCopy(JetFileReader, folder / "in.h5", 3, folder / "out.h5", {})
        >>> copy.finish().close()
        >>> io.file_info(folder / "out.h5")["n_jets"]
        3
    """

    def __init__(self, open_input: Callable[[Path], JetSource], path: Path, n_jets: int,
                 out: Path, meta: dict[str, Any], need: int = 0) -> None:
        self.writer = stream_writer(out, meta, need=need)
        self.n_jets = n_jets
        #: jets written so far
        self.written = 0
        self._error: BaseException | None = None
        self._stop = threading.Event()
        self._aborted = False
        self._thread = threading.Thread(target=self._copy, args=(open_input, path), daemon=True,
                                        name=f"jetastar copy of {path.name}")
        self._thread.start()

    def _copy(self, open_input: Callable[[Path], JetSource], path: Path) -> None:
        try:
            copy_file = getattr(self.writer, "copy_jets_file", None)
            if copy_file is not None and copy_file(path, self._stop):  # its format, only jets
                self.written = self.n_jets
                return
            reader = open_input(path)
            try:
                for a in range(0, self.n_jets, MERGE_BLOCK):
                    if self._stop.is_set():
                        return
                    b = min(self.n_jets, a + MERGE_BLOCK)
                    self.writer.add_jets(reader.chunk(a, b))
                    self.written = b
            finally:
                reader.close()
        except BaseException as exc:  # raised again by finish()
            self._error = exc

    def finish(self, bar: Any = None) -> Any:
        """Wait for the copy (moving ``bar`` by the jets written meanwhile) and return the
        writer, into which the results go next. An error of the copy is raised here (the caller
        then calls :meth:`abort`)."""
        shown = 0
        while self._thread.is_alive():
            self._thread.join(timeout=0.25)
            if bar is not None:
                bar.update(self.written - shown)
                shown = self.written
        if self._error is not None:
            raise self._error
        if bar is not None:
            bar.update(self.n_jets - shown)
        return self.writer

    def abort(self, exc: BaseException | None = None) -> None:
        """Stop the copy (at the end of the block being written) and delete the temporary file
        (once; later calls do nothing)."""
        self._stop.set()
        self._thread.join()
        if not self._aborted:
            self._aborted = True
            self.writer.abort(exc)


class MergeCounts(NamedTuple):
    """What :func:`merge_parts` counted while writing an output."""

    #: per algorithm, status -> number of jets
    status: dict[str, dict[str, int]]
    #: per algorithm, the counts of :func:`jetastar.comparison.status_counts`
    trees: dict[str, dict[str, int]]


def _merge_streaming(
    reader: JetSource, out: Path, parts: Path, chunks: list[tuple[int, int]], config: BatchConfig,
    meta: dict[str, Any], progress: bool, input_state: tuple[int, ...] | None,
    jets_copy: JetsCopy | None = None,
) -> MergeCounts:
    """The output written block by block: the jets (or what ``jets_copy`` wrote of them), then
    each algorithm's rows in blocks of consecutive parts (the layout of
    :func:`jetastar.io.write`); at most one block of jets, or two blocks of about
    :data:`MERGE_ROWS` rows (the one written and the next, read meanwhile), in memory. Returns
    the status and tree counts of each algorithm."""
    n = reader.n_jets
    files = [parts / part_name(a, b) for a, b in chunks]
    if jets_copy is None:
        need = _size(reader.path) + sum(_size(f) for f in files)
        writer = stream_writer(out, meta, need=2 * need)
    else:
        writer = jets_copy.writer
    names = list(config.algorithms)
    statuses: dict[str, dict[str, int]] = {}
    trees: dict[str, dict[str, int]] = {}
    # jets of a particle file: the output has tables by input entry, written with the jets
    # (when no copy wrote those) in a last pass over blocks of consecutive chunks
    entries = "entry" in reader.chunk(0, min(n, 1)).jet_columns
    jets_later = entries and jets_copy is None
    try:
        with progress_bar(total=n * (1 + len(names) + (entries and not jets_later)),
                          desc=f"merging {out.name}", unit="row", show=progress,
                          delay=2.0) as bar:
            if jets_copy is not None:
                jets_copy.finish(bar)
            elif not jets_later:
                for a in range(0, n, MERGE_BLOCK):
                    b = min(n, a + MERGE_BLOCK)
                    writer.add_jets(reader.chunk(a, b))
                    bar.update(b - a)
            if hasattr(writer, "set_counters"):
                writer.set_counters({k for f in files for k in part_counters(f)})
            # each block of rows is read from its parts and counted by a thread while the block
            # before it is written (the compression of the writes runs without the interpreter
            # lock, so the two overlap)
            groups = _chunk_groups(chunks, MERGE_ROWS)
            blocks = [(name, group) for name in names for group in groups]
            # a run whose rows of all algorithms make one block reads each part once (a small
            # run's merge: a file open per part instead of one per part and algorithm)
            read = _PartReader(parts, names, n * len(names) <= MERGE_ROWS)
            with cf.ThreadPoolExecutor(1, thread_name_prefix="jetastar-merge-read") as pool:
                ahead = pool.submit(_read_block, read, *blocks[0]) if blocks else None
                coverage: dict[str, _Coverage] = {}
                for i, (name, group) in enumerate(blocks):
                    assert ahead is not None
                    block = ahead.result()
                    ahead = pool.submit(_read_block, read, *blocks[i + 1]) \
                        if i + 1 < len(blocks) else None
                    counts = coverage.setdefault(name, _Coverage(n))
                    counts.add(block.table.jet_index)
                    _add_counts(statuses.setdefault(name, {}), block.statuses)
                    _add_counts(trees.setdefault(name, {}), block.trees)
                    writer.add_results(name, block.table)
                    bar.update(group[-1][1] - group[0][0])
                    if i + 1 == len(blocks) or blocks[i + 1][0] != name:
                        counts.check(out, name)
            if entries:
                _add_by_entry(reader, writer, parts, chunks, names, jets_later, bar)
        check_unchanged(reader, None, meta.get("input_identity"), input_state)
    except BaseException as exc:
        if jets_copy is not None:
            jets_copy.abort(exc)
        else:
            writer.abort(exc)
        raise
    writer.close()
    return MergeCounts({name: dict(sorted(c.items())) for name, c in statuses.items()}, trees)


def _add_by_entry(reader: JetSource, writer: Any, parts: Path, chunks: list[tuple[int, int]],
                  names: list[str], with_jets: bool, bar: Any) -> None:
    """The tables by input entry of jets read from a particle file, block by block: the jets of
    consecutive chunks (:data:`MERGE_BLOCK` or more) with every algorithm's rows of them, read
    from their parts; ``with_jets``: the jets are written too."""
    for group in _chunk_groups(chunks, MERGE_BLOCK):
        a, b = group[0][0], group[-1][1]
        jets = reader.chunk(a, b)
        reader.problems(a, b)  # noted in the parts already
        if with_jets:
            writer.add_jets(jets)
        read = [read_part(parts / part_name(c, d), names) for c, d in group]
        tables = {}
        for name in names:
            table = _joined([part[name] for part in read])
            table.jet_index = table.jet_index - a  # rows of this block's jets
            tables[name] = table
        writer.add_by_entry(jets, tables)
        bar.update(b - a)


def _chunk_groups(chunks: list[tuple[int, int]], size: int) -> list[list[tuple[int, int]]]:
    """Consecutive chunks gathered until they hold ``size`` jets or more."""
    groups: list[list[tuple[int, int]]] = []
    current: list[tuple[int, int]] = []
    for a, b in chunks:
        current.append((a, b))
        if current[-1][1] - current[0][0] >= size:
            groups.append(current)
            current = []
    if current:
        groups.append(current)
    return groups


class _Block(NamedTuple):
    """One algorithm's rows of consecutive parts, joined, with their counts."""

    table: AlgorithmResults
    #: status -> rows
    statuses: dict[str, int]
    #: the counts of :func:`jetastar.comparison.table_counts`
    trees: dict[str, int]


class _PartReader:
    """Reads the tables of part files: each file once for all algorithms (``once``: the run's
    rows of all algorithms make one merge block, and a file's tables stay in memory until each
    has been taken), or once per algorithm."""

    def __init__(self, parts: Path, names: list[str], once: bool) -> None:
        self.parts = parts
        self.names = names
        self.once = once
        self._kept: dict[Path, dict[str, AlgorithmResults]] = {}

    def table(self, a: int, b: int, name: str) -> AlgorithmResults:
        f = self.parts / part_name(a, b)
        if not self.once:
            table = read_part(f, [name]).get(name)
        else:
            if f not in self._kept:
                self._kept[f] = read_part(f, self.names)
            table = self._kept[f].pop(name, None)
        if table is None:
            raise BatchError(f"{f}: has no results for {name!r}")
        return table


def _read_block(read: _PartReader, name: str, group: list[tuple[int, int]]) -> _Block:
    """``name``'s rows of the parts of ``group`` (consecutive chunks), joined and counted."""
    tables = [read.table(a, b, name) for a, b in group]
    table = _joined(tables)
    values, number = np.unique(np.asarray(table.status, dtype=str), return_counts=True)
    return _Block(table, dict(zip(values.tolist(), number.tolist(), strict=True)),
                  table_counts(table))


def _add_counts(total: dict[str, int], counts: dict[str, int]) -> None:
    for k, c in counts.items():
        total[k] = total.get(k, 0) + c


def _joined(tables: list[AlgorithmResults]) -> AlgorithmResults:
    return tables[0] if len(tables) == 1 else AlgorithmResults.concatenate(tables)


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


def counts_of(out: Path) -> MergeCounts:
    """The :class:`MergeCounts` of a results file, read from it (in one pass over its rows)."""
    summary = results_summary(out)
    return MergeCounts({label: s["status"] for label, s in summary.items()},
                       {label: s["counts"] for label, s in summary.items()})
