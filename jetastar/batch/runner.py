"""The run loop of a batch run: every input file, chunk by chunk, then merged.

:func:`run_batch` checks the settings and the output paths, starts the executor, and runs each input
file: it opens the input as a :class:`~jetastar.batch.JetSource`, takes the output lock, skips a
finished output, resumes from the part files of an interrupted run (:mod:`jetastar.batch.resume`),
warms up the kernels, clusters the remaining chunks (:func:`~jetastar.batch.work.chunk_task` on the
executor, or in this process) writing one part file each, and merges them
(:func:`~jetastar.batch.merge.merge_parts`). A file-level error ends that file with one line in its
:class:`FileSummary`; the other files go on.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import dataclasses
import errno
import hashlib
import os
import queue as _queue
import shlex
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

import numpy as np

from .. import _progress, io
from .._atomic import remove_stale_temporaries
from .._cuda import gpus_for_workers
from .._jit import one_notice_for_workers
from .._lock import OutputLock
from ..errors import BatchError, BatchInterrupted, JetastarError
from ..io import AlgorithmResults, FileFormatError, file_format
from ..io.particle_files import cluster_options, describe_particle_file
from .config import BatchConfig, check_config, estimated_costs
from .executors import (
    WorkerWatch,
    make_executor,
    progress_queue_of,
    shutdown_executor,
    warm_up_for,
    warm_up_workers,
)
from .merge import JetsCopy, counts_of, merge_parts, output_meta, streams
from .resume import (
    ChunkPlan,
    PartWriter,
    done_parts,
    file_state,
    input_identity,
    manifest_for,
    output_differences,
    parts_dir,
    prepare_parts,
    read_manifest,
    recorded_digest,
    result_of_another_file,
    settled_state,
    write_part,
)
from .sources import JetFileReader, JetSource, ParticleFileSource
from .work import chunk_task, cluster_collection

__all__ = ["FileSummary", "file_stamp", "output_path_for", "run_batch", "timed_chunk_task",
           "timed_file_chunk_task"]

#: bytes a temporary file name adds to its final name (``.<name>.<pid>.<token>.tmp``, part folders
#: ``<name>.parts``)
_TMP_NAME_EXTRA = 1 + 1 + 10 + 1 + 8 + 4


@dataclasses.dataclass
class FileSummary:
    """Outcome of one input file of a batch run."""

    input: str
    output: str
    n_jets: int = 0
    chunks_total: int = 0
    chunks_reused: int = 0
    status_counts: dict[str, dict[str, int]] = dataclasses.field(default_factory=dict)
    #: per algorithm, :func:`jetastar.comparison.status_counts` of the output (gathered by the
    #: merge, or read from an output that was already done; empty where the file failed)
    tree_counts: dict[str, dict[str, int]] = dataclasses.field(default_factory=dict)
    seconds: float = 0.0
    error: str = ""
    already_done: bool = False

    @property
    def ok(self) -> bool:
        """No file-level error."""
        return not self.error


def output_path_for(input_path: str | os.PathLike[str], output_dir: str | os.PathLike[str],
                    fmt: str = "h5") -> Path:
    """``<output_dir>/<input stem>.results.<fmt>``."""
    return Path(output_dir) / f"{Path(input_path).stem}.results.{fmt}"


def run_batch(
    inputs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    config: BatchConfig,
    *,
    output: str | os.PathLike[str] | None = None,
    output_dir: str | os.PathLike[str] | None = None,
    fmt: str = "h5",
    workers: int = 1,
    executor: cf.Executor | None = None,
    scheduler: str | None = None,
    progress: bool = True,
    fresh: bool = False,
    attrs: dict[str, Any] | None = None,
    on_file_done: Callable[[FileSummary], None] | None = None,
    particles: Any = None,
    entry_start: int | None = None,
    entry_stop: int | None = None,
    step_size: int = 10000,
) -> list[FileSummary]:
    """Cluster every jet of every input file with every algorithm; resumable.

    Args:
        inputs: jet files (``.h5``, ``.root``, ``.pkl``), or one file's path.
        config: algorithms, options, limits, chunk size.
        output: the output file (only with a single input; extension ``.h5``/``.root``).
        output_dir: folder for ``<stem>.results.<fmt>`` per input (default: the current folder).
        fmt: ``"h5"`` or ``"root"`` for outputs in ``output_dir``.
        workers: processes of the local pool (1 = run in this process).
        executor: any :class:`concurrent.futures.Executor` (overrides ``workers``), e.g.
            ``dask.distributed.Client(...).get_executor()``.
        scheduler: address of a dask scheduler (``tcp://host:8786``); needs dask.distributed.
        progress: show a tqdm progress bar per file.
        fresh: recompute everything: discard part files of an earlier, interrupted run instead of
            resuming it, and do not skip inputs whose output is already complete.
        attrs: extra provenance attributes for the output files.
        on_file_done: called with each file's :class:`FileSummary`.
        particles: a :class:`~jetastar.io.ParticleSource` (its ``path`` is replaced by each
            input): the inputs are particle files in a foreign layout (ROOT TTrees, HDF5), read
            with :func:`jetastar.io.read_particles` in blocks of ``step_size`` entries. The output
            also holds a table keyed by input entry (ROOT: the ``clusters`` tree, a friend tree of
            the input tree; HDF5: the ``/clusters`` group with an ``entry`` column).
        entry_start, entry_stop: particle files: process only these entries.
        step_size: particle files: entries read at a time.

    Returns:
        One :class:`FileSummary` per input (a file-level problem is recorded in ``error`` and the
        other files go on).

    Raises:
        BatchError: bad settings (unknown algorithm or option, output clash, ...).
    """
    auto_chunks = config.chunk_size is None  # sized by measured cost
    check_config(config)
    if executor is None and not scheduler and (
            isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise BatchError(f"workers must be an integer >= 1, got {workers!r}")
    if fmt not in ("h5", "hdf5", "root"):
        raise BatchError(f"unknown output format {fmt!r}; use h5 or root")
    if isinstance(inputs, (str, os.PathLike)):  # one file (a string is not a list of files)
        inputs = [inputs]
    inputs = [Path(p) for p in inputs]
    if not inputs:
        raise BatchError("no input files")
    if output is not None:
        if len(inputs) != 1:
            raise BatchError("a single output file needs a single input; use an output folder")
        outputs = [Path(output)]
    else:
        folder = Path(output_dir if output_dir is not None else ".")
        outputs = [output_path_for(p, folder, fmt) for p in inputs]
    seen: dict[Path, Path] = {}
    for inp, out in zip(inputs, outputs, strict=True):
        first = seen.setdefault(out.resolve(), inp)
        if first is not inp:
            what = ("the same input given twice" if first.resolve() == inp.resolve()
                    else "the same file name stem")
            raise BatchError(f"{first} and {inp} would write the same output file {out} "
                             f"({what}); give each its own output folder")
    if output is None and any(p.is_file() for p in inputs):  # (no empty folder for no input)
        folder.mkdir(parents=True, exist_ok=True)
    _check_outputs(inputs, outputs)
    with one_notice_for_workers():
        own_executor, client = (None, None)
        if executor is None:
            own_executor, client = make_executor(workers, scheduler, config.plugins,
                                                 gpus_for_workers(config.device))
            executor = own_executor
        if executor is None:
            n_workers = 1
        elif client is not None:
            n_workers = max(2, sum(client.nthreads().values()))
        else:
            n_workers = max(2, workers)

        def open_input(inp: Path) -> JetSource:
            if particles is None:
                return JetFileReader(inp)
            return ParticleFileSource(dataclasses.replace(particles, path=str(inp)),
                                      entry_start=entry_start, entry_stop=entry_stop,
                                      step_size=step_size, progress=progress)

        summaries = []
        try:
            for inp, out in zip(inputs, outputs, strict=True):
                summary = _run_file(inp, out, config, executor, n_workers, progress, fresh,
                                    attrs, open_input, auto_chunks)
                summaries.append(summary)
                if on_file_done is not None:
                    on_file_done(summary)
        except BaseException:
            if own_executor is not None:
                shutdown_executor(own_executor, interrupted=True)
                own_executor = None
            raise
        finally:
            if own_executor is not None:
                shutdown_executor(own_executor)
            if client is not None:
                client.close()
    return summaries


def _check_outputs(inputs: Sequence[Path], outputs: Sequence[Path]) -> None:
    """Problems with the output paths that would otherwise show only after all the clustering:
    an output that is an input, a name too long for its temporary files, a read-only folder."""
    sources = {}
    for p in inputs:
        with contextlib.suppress(OSError):
            sources[p.resolve()] = p
    for out in outputs:
        if out.resolve() in sources:
            raise BatchError(f"{out}: the output would overwrite the input {sources[out.resolve()]}; "
                             "choose another output name")
        if out.suffix.lower() not in (".h5", ".hdf5", ".hdf", ".root"):
            file_format(out, sniff=False)  # raises a one-line error for an unknown extension
        folder = out.parent if str(out.parent) else Path(".")
        try:
            name_max = os.pathconf(folder if folder.is_dir() else ".", "PC_NAME_MAX")
        except (OSError, ValueError):
            name_max = 255
        longest = len(os.fsencode(out.name)) + _TMP_NAME_EXTRA
        if longest > name_max:
            raise BatchError(
                f"{out}: the output file name is too long ({len(os.fsencode(out.name))} bytes; "
                f"its temporary files need {longest}, the file system allows {name_max})"
            )
        if folder.is_dir() and not os.access(folder, os.W_OK | os.X_OK):
            raise BatchError(f"{out}: cannot write into {folder} (permission denied)")


def _run_file(
    inp: Path, out: Path, config: BatchConfig, executor: cf.Executor | None, n_workers: int,
    progress: bool, fresh: bool, attrs: dict[str, Any] | None,
    open_input: Callable[[Path], JetSource], auto_chunks: bool = False,
) -> FileSummary:
    """Cluster one input (read with ``open_input``) into ``out``; every error ends up in the
    summary's ``error``. ``auto_chunks``: the chunk size was not given, chunks are sized by their
    measured cost (:class:`~jetastar.batch.resume.ChunkPlan`)."""
    summary = FileSummary(str(inp), str(out))
    t0 = time.perf_counter()
    reader: JetSource | None = None
    lock: OutputLock | None = None
    copy: JetsCopy | None = None  # the output's jets, written by a thread (until the merge)
    try:
        if not inp.exists():
            raise FileNotFoundError(f"{inp}: no such file")
        if inp.is_dir():
            raise FileFormatError(f"{inp}: is a directory; give the files in it (e.g. "
                                  f"{shlex.quote(str(inp))}/*.root, expanded by the shell)")
        if not out.parent.is_dir():
            raise FileNotFoundError(f"{out}: directory {out.parent} does not exist")
        lock = OutputLock.acquire(out)  # one run per output at a time
        remove_stale_temporaries(out.parent, out.name)  # of a merge that was killed
        try:
            reader = open_input(inp)
        except FileFormatError as exc:
            raise _with_particles_found(exc, inp) from None
        reading = reader.reading()
        n = reader.n_jets
        summary.n_jets = n
        state = file_state(inp)  # before the hash: a write during it changes the state
        settled = settled_state(state)  # (recorded for the next run; as of when it was taken)
        parts = parts_dir(out)
        # a first run into this output (or a fresh one) clusters every jet: the kernels are
        # warmed while the hash is taken (a resume may have nothing left to cluster)
        first = fresh or not (out.exists() or parts.exists())
        if first and n > 0 and _copies_jets(reader):
            # a first run clusters every jet: the output's jets are copied while the hash is
            # taken (the hash joins the output's provenance when it is known)
            copy = JetsCopy(open_input, inp, n, out,
                            output_meta(reader, config, {**reading, **(attrs or {})}),
                            need=3 * inp.stat().st_size)
        # the hash an earlier run into this output recorded, when the input is as it was then
        recorded, out_info = (None, None) if fresh else _recorded(inp, state, out, parts)
        if not fresh:
            _refuse_foreign_output(out, out_info)
        largest = _largest_jet(reader) if n > 0 else None
        identity = input_identity(inp, recorded or _digest_while_warming(
            reader, config, executor, n_workers, warm=n > 0 and first, largest_jet=largest,
            n_jets=n))
        if fresh and parts.exists():
            shutil.rmtree(parts)
        if not fresh:
            other = result_of_another_file(out_info, identity)
            if other is not None:  # (e.g. run1/events.root and run2/events.root into one folder)
                raise BatchError(
                    f"{out} holds the finished result of another input file, {other}; write to "
                    "another output (inputs of the same name need their own output folders), "
                    "or pass --fresh (fresh=True) to replace it"
                )
            diff = output_differences(out, n, config, reading, identity, out_info)
            if diff == []:
                shutil.rmtree(parts, ignore_errors=True)
                summary.already_done = True
                # (the output's rows read once for both counts)
                summary.status_counts, summary.tree_counts = counts_of(out)
                return summary
            if diff:  # a finished result of another run: never replaced silently
                raise BatchError(
                    f"{out} holds the finished result of a run with other settings "
                    f"({'; '.join(diff)}); write to another output, or pass --fresh "
                    "(fresh=True) to replace it"
                )
        done = prepare_parts(parts, manifest_for(inp, n, identity, config, reading, settled),
                             progress=progress)
        plan = ChunkPlan(n, done, config.chunk_size, adaptive=auto_chunks, n_workers=n_workers,
                         costs=_costs(reader, config) if auto_chunks and n else None)
        summary.chunks_reused = len(plan.kept)
        todo_jets = plan.remaining
        if todo_jets:
            # compile (or load) the kernels before the bar starts, so that its rate and ETA are
            # those of the clustering
            warm_up_for(config, executor, n_workers, largest_jet=largest, n_jets=n)
        # looked up on the module, so that one replacement of the progress helper reaches here
        bar = _progress.progress_bar(
            total=n, initial=n - todo_jets, unit="jet", desc=inp.name, show=progress, leave=True,
        )
        recorded_attrs: dict[str, Any] = {"input_identity": identity}
        if settled is not None:
            recorded_attrs["input_state"] = settled
        out_attrs = {**reading, **(attrs or {}), **recorded_attrs}
        if copy is not None:
            copy.writer.update_attrs(recorded_attrs)
        elif todo_jets and _copies_jets(reader):
            # the output's jets are written while the chunks are clustered (an output that is
            # not finished is a temporary file: a run stopped here leaves nothing behind)
            copy = JetsCopy(open_input, inp, n, out, output_meta(reader, config, out_attrs),
                            need=3 * inp.stat().st_size)
        try:
            try:
                with bar:
                    _process_chunks(reader, plan, parts, config, executor, n_workers, bar)
            except KeyboardInterrupt:
                kept = sum(b - a for a, b in done_parts(parts))
                raise BatchInterrupted(str(inp), str(parts), kept, n) from None
            chunks = plan.chunks
            summary.chunks_total = len(chunks)
            counts = merge_parts(reader, out, parts, chunks, config, out_attrs,
                                 progress=progress, input_state=state, jets_copy=copy)
            copy = None  # closed by the merge
        except BaseException as exc:
            if copy is not None:
                copy.abort(exc)
            raise
        summary.status_counts = counts.status
        summary.tree_counts = counts.trees
    except Exception as exc:  # (one bad file must not stop the others)
        summary.error = _error_line(exc, inp)
    finally:
        if copy is not None:  # stopped before the merge: its temporary file is deleted
            copy.abort()
        if reader is not None:
            reader.close()
        if lock is not None:
            lock.release()
        summary.seconds = time.perf_counter() - t0
    return summary


def _costs(reader: JetSource, config: BatchConfig) -> Any:
    """The jets' estimated costs under the run's costly algorithms
    (:func:`~jetastar.batch.config.estimated_costs`, from the source's optional
    ``leaf_counts()``); ``None`` when there is no such algorithm or the source cannot count."""
    counts = getattr(reader, "leaf_counts", None)
    if counts is None or estimated_costs(np.zeros(0, dtype=np.int64), config) is None:
        return None
    return estimated_costs(counts(), config)


def _refuse_foreign_output(out: Path, info: dict[str, Any] | None) -> None:
    """Raise :class:`~jetastar.errors.BatchError` when ``out`` exists but is not the result of a
    batch run (``info``: its ``io.file_info(out, results=False)``, ``None`` when unreadable):
    a file jetastar did not write, or jets without a run's results, is the user's data and is
    replaced only with ``fresh``. A batch result of another input is stale and is replaced."""
    if not out.exists():
        return
    if out.is_dir():
        raise BatchError(f"{out}: is a directory; give a file name, or the folder as the output "
                         "folder (`-o FOLDER/`)")
    if info is None:
        what = "not a file jetastar wrote (or can read)"
    elif "batch" not in info.get("attrs", {}):
        what = ("a jetastar file of jets without a run's results" if not info.get("results")
                else "a jetastar file of results not written by `jetastar cluster`")
    else:
        return
    raise BatchError(f"{out} exists and is {what}; choose another output, or pass --fresh "
                     "(fresh=True) to replace it")


def _with_particles_found(exc: FileFormatError, inp: Path) -> FileFormatError:
    """``exc`` (an input that is not a jetastar file, read as one) with the particles the file
    holds and the options that read them (:func:`jetastar.io.particle_files.cluster_options`),
    when it holds any; otherwise ``exc`` as it is."""
    if "not a jetastar" not in str(exc):
        return exc
    try:
        found = describe_particle_file(inp)
    except (OSError, ValueError):
        return exc
    if not found:
        return exc
    where = " or ".join(f"`{cluster_options(d)}`" for d in found[:3])
    return FileFormatError(f"{exc}; this file holds particles, read with {where} "
                           "(all it holds: `jetastar info FILE`)")


def _copies_jets(reader: JetSource) -> bool:
    """Whether the output's jets are copied by a :class:`~jetastar.batch.merge.JetsCopy` while
    the input is clustered (jetastar files with jets; not legacy pickles, read whole, nor
    particle files, whose jets the merge writes with their tables by input entry)."""
    return isinstance(reader, JetFileReader) and reader.fmt != "legacy" and streams(reader)


def _recorded(inp: Path, state: tuple[int, ...], out: Path,
              parts: Path) -> tuple[str | None, dict[str, Any] | None]:
    """The content hash of ``inp`` that a finished ``out`` or its part folder recorded, when
    the input's state is still the recorded one (:func:`~jetastar.batch.resume.recorded_digest`;
    else ``None``), and ``io.file_info(out, results=False)`` (``None``: no readable output)."""
    info = None
    if out.is_file():
        with contextlib.suppress(OSError, ValueError):
            info = io.file_info(out, results=False)
    if info is not None:
        attrs = info.get("attrs", {})
        digest = recorded_digest(inp, state, attrs.get("input_identity"),
                                 attrs.get("input_state"))
        if digest is not None:
            return digest, info
    manifest = read_manifest(parts)
    if manifest is None:
        return None, info
    return recorded_digest(inp, state, manifest, manifest.get("input_state")), info


def _largest_jet(reader: JetSource) -> int | None:
    """Leaves of the source's largest jet where it knows them cheaply (its optional
    ``largest_jet()``), else ``None`` (the warm-up then uses every warm-up jet)."""
    largest = getattr(reader, "largest_jet", None)
    return None if largest is None else largest()


def _digest_while_warming(reader: JetSource, config: BatchConfig, executor: cf.Executor | None,
                          n_workers: int, warm: bool, largest_jet: int | None,
                          n_jets: int | None = None) -> str:
    """``reader.digest()`` (it reads every jet once: ~1 s per 200 000 jets); with ``warm``, the
    kernels of this process (the hash is taken by a thread meanwhile) or of the executor's workers
    (their warm-up tasks are sent first) are warmed up at the same time, on warm-up jets of at
    most ``largest_jet`` leaves where that is known."""
    if not warm:
        return reader.digest()
    if executor is not None:
        # (waited for before the first chunk)
        warm_up_workers(executor, config, n_workers, largest_jet=largest_jet)
        return reader.digest()
    with cf.ThreadPoolExecutor(1, thread_name_prefix="jetastar-digest") as pool:
        digest = pool.submit(reader.digest)
        warm_up_for(config, None, n_workers, largest_jet=largest_jet, n_jets=n_jets)
        return digest.result()


def _error_line(exc: BaseException, inp: Path) -> str:
    """One line for a file-level error (the summary prints ``FAILED <file>: <line>``)."""
    text = " ".join(str(exc).split())
    if isinstance(exc, MemoryError):
        text = f"out of memory{': ' + text if text else ''} (a corrupt file, or too large a chunk)"
    elif (isinstance(exc, OSError) and exc.errno == errno.ENOSPC
          and exc.strerror == os.strerror(errno.ENOSPC)):  # (the system's, not a space check's)
        where = f" writing {exc.filename}" if exc.filename else ""
        text = (f"no space left on the device{where}; the chunks finished so far are kept: free "
                "some space and rerun the same command to resume")
    elif isinstance(exc, BrokenProcessPool):
        text = ("a worker process died (killed, out of memory, or, in a script, code that is not "
                "under `if __name__ == \"__main__\":`, which worker processes import)")
    elif not isinstance(exc, (JetastarError, OSError)) or not text:
        text = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    prefix = f"{inp}: "
    return text[len(prefix):] if text.startswith(prefix) else text


def _note_problems(reader: JetSource, tables: dict[str, AlgorithmResults], a: int, b: int) -> None:
    """Failed rows of jets the reader knows more about (e.g. which input branch holds a NaN) get
    the reader's message."""
    found = reader.problems(a, b)
    if not found:
        return
    for table in tables.values():
        for row, pos in enumerate(table.jet_index):
            msg = found.get(int(pos))
            if msg is not None and table.status[row] == "failed":
                table.message[row] = msg


class _InterruptLatch:
    """Remembers the interrupt a signal handler raised (Ctrl-C, or SIGTERM as the command line
    turns it into one), so that the run stops even when Python swallowed it: a handler that
    fires while a weakref callback or a ``__del__`` runs raises there, where the exception is
    only printed. The chunk loop calls :meth:`check` after every wait (at most 0.25 s apart)."""

    def __init__(self) -> None:
        self.raised: BaseException | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> _InterruptLatch:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                handler = signal.getsignal(sig)
                if callable(handler):
                    self._previous[sig] = handler
                    signal.signal(sig, self._latched(handler))
        return self

    def _latched(self, handler: Callable[..., Any]) -> Callable[..., Any]:
        def latched(signum: int, frame: Any) -> Any:
            try:
                return handler(signum, frame)
            except BaseException as exc:
                self.raised = exc
                if frame is not None and _swallowed_there(frame):
                    # raised here, Python would only print it (a traceback on the terminal next
                    # to the "interrupted" line); check() raises it at the next wait instead
                    return None
                raise

        return latched

    def check(self) -> None:
        """Raise the interrupt again if a signal handler raised one."""
        if self.raised is not None:
            raise self.raised

    def __exit__(self, *exc_info: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


def _swallowed_there(frame: Any) -> bool:
    """Whether an exception raised in ``frame`` is swallowed (and printed) by Python: a weakref
    callback or a ``__del__`` method."""
    code = frame.f_code
    return code.co_name == "__del__" or os.path.basename(code.co_filename) in (
        "weakref.py", "_weakrefset.py")


def _process_chunks(
    reader: JetSource, plan: ChunkPlan, parts: Path, config: BatchConfig,
    executor: cf.Executor | None, n_workers: int, bar: Any,
) -> None:
    """Cluster the chunks of ``plan`` and write one part file each; the bar moves per jet.

    Interrupted (``KeyboardInterrupt``), it writes the parts of chunks that had finished, cancels
    the rest and re-raises.
    """
    # parts are written by a thread (write_part looked up on this module at each call)
    with PartWriter(lambda *args: write_part(*args)) as writer:
        _cluster_chunks(reader, plan, parts, config, executor, n_workers, bar, writer)


def _cluster_chunks(
    reader: JetSource, plan: ChunkPlan, parts: Path, config: BatchConfig,
    executor: cf.Executor | None, n_workers: int, bar: Any, writer: PartWriter,
) -> None:
    """The chunk loop of :func:`_process_chunks`; finished chunks go to ``writer``."""
    source = str(reader.path)
    if executor is None:
        while (chunk := plan.next()) is not None:
            a, b = chunk
            jets = reader.chunk(a, b, node_data=False)
            watch = time.perf_counter()
            tables = cluster_collection(jets, config, first_index=a, source=source,
                                        on_jet=bar.update)
            plan.record(b - a, time.perf_counter() - watch)
            _note_problems(reader, tables, a, b)
            writer.put(parts, a, b, tables)
            # the kernels hold the interpreter lock: a part still queued when the next chunk's
            # kernel starts would wait for it (and be lost by a kill meanwhile)
            writer.flush()
        return
    progress = progress_queue_of(executor)
    seen: dict[int, int] = {}  # chunk start -> jets the bar already counts
    closed: set[int] = set()  # chunks written (late reports of theirs are ignored)
    pending: dict[cf.Future, tuple[int, int]] = {}
    max_inflight = 2 * n_workers + 1
    watch = WorkerWatch(executor)
    path, stamp = _path_for_workers(reader, watch.client, progress is not None)
    by_path = path is not None
    shipping: Callable[[], Any] = contextlib.nullcontext
    if not by_path and watch.client is not None:
        # the chunks' jets travel in the tasks (so that Dask can compute a lost worker's chunks
        # again elsewhere); each is a few MB by design: no Dask warning about large graphs at
        # every chunk, but one line where the workers could not read a jetastar file themselves
        shipping = _large_tasks_expected
        if isinstance(reader, JetFileReader) and reader.fmt != "legacy":
            print(f"jetastar: the Dask workers cannot read {reader.path} themselves (not on "
                  "their file system, or another file there): this process reads its jets and "
                  "sends them with each chunk", file=sys.stderr, flush=True)

    def finish(fut: cf.Future) -> None:
        a, b = pending.pop(fut)
        _, tables, seconds = fut.result()
        plan.record(b - a, seconds)
        _note_problems(reader, tables, a, b)
        writer.put(parts, a, b, tables)
        closed.add(a)
        bar.update(b - a - seen.pop(a, 0))

    try:
        with _InterruptLatch() as latch:
            while True:
                while len(pending) < max_inflight and (chunk := plan.next()) is not None:
                    a, b = chunk
                    if by_path:  # the worker reads its chunk: decoding is shared out too
                        fut = executor.submit(timed_file_chunk_task, path, a, b, config,
                                              n_workers, stamp, source)
                    else:
                        jets = reader.chunk(a, b, node_data=False)
                        with shipping():
                            fut = executor.submit(timed_chunk_task, jets, config, a, source,
                                                  n_workers)
                    pending[fut] = (a, b)
                if not pending:
                    break
                finished, _ = cf.wait(list(pending), timeout=0.25, return_when=cf.FIRST_COMPLETED)
                latch.check()
                for address in watch.lost():
                    print(f"jetastar: Dask worker {address} was lost; its chunks of {reader.path.name} "
                          "are computed again on the other workers", file=sys.stderr, flush=True)
                _drain_progress(progress, source, seen, closed, bar)
                for fut in finished:
                    finish(fut)
    except KeyboardInterrupt:
        # keep what has finished: a part is small and quick to write
        for fut in [f for f in pending if f.done() and not f.cancelled()]:
            with contextlib.suppress(Exception):
                if fut.exception() is None:
                    finish(fut)
        if isinstance(executor, cf.ProcessPoolExecutor):
            # its pending work dies with its workers (shutdown_executor kills them). Cancelling
            # it here would race with the pool's manager thread, which fails every pending
            # future at once when workers that got the same signal die: on Python < 3.12 a
            # cancelled one raises InvalidStateError there, a traceback next to "terminated"
            pending.clear()
        raise
    finally:
        for fut in pending:
            fut.cancel()


def timed_chunk_task(
    collection: Any, config: BatchConfig, first_index: int, source: str, n_workers: int
) -> tuple[int, dict[str, AlgorithmResults], float]:
    """:func:`~jetastar.batch.work.chunk_task` and the seconds it took in the worker (the cost
    by which later chunks are sized)."""
    watch = time.perf_counter()
    first, tables = chunk_task(collection, config, first_index, source, n_workers)
    return first, tables, time.perf_counter() - watch


#: in a worker: the input it reads its chunks from (one open file at a time), by path and stamp
_WORKER_READER: dict[tuple[str, Any], JetFileReader] = {}
#: a Dask worker runs tasks in several threads; they take turns at the reader
_WORKER_READER_LOCK = threading.Lock()


def timed_file_chunk_task(
    path: str, start: int, stop: int, config: BatchConfig, n_workers: int,
    stamp: tuple[int, str] | None = None, source: str | None = None,
) -> tuple[int, dict[str, AlgorithmResults], float]:
    """:func:`timed_chunk_task` of jets ``start:stop`` of a jetastar file, read in the worker
    (workers of a local pool share the master's file system, Dask workers were checked to see
    the same file; the file stays open, and its chunks are sliced from reads ahead, between
    calls).

    Args:
        path: the input as the worker opens it.
        start, stop, config, n_workers: as for :func:`timed_chunk_task`.
        stamp: the input's :func:`file_stamp` in the main process (Dask workers; ``None``: not
            checked): a worker whose file at ``path`` has another one fails the chunk.
        source: the input's name in messages (default ``path``).
    """
    with _WORKER_READER_LOCK:
        reader = _WORKER_READER.get((path, stamp))
        if reader is None:
            if stamp is not None and file_stamp(path) != stamp:
                raise BatchError(f"{path}: the file this Dask worker sees is not the input of "
                                 "the run (another size or other contents)")
            for old in _WORKER_READER.values():
                old.close()
            _WORKER_READER.clear()
            reader = _WORKER_READER[(path, stamp)] = JetFileReader(path)
        jets = reader.chunk(start, stop, node_data=False)
    return timed_chunk_task(jets, config, start, source or path, n_workers)


def file_stamp(path: str | os.PathLike[str]) -> tuple[int, str] | None:
    """What tells a file from another cheaply: its size and a hash of its first and last 64 KiB
    (``None`` if it cannot be read)."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            digest = hashlib.blake2b(f.read(_STAMP_BYTES), digest_size=16)
            f.seek(max(0, size - _STAMP_BYTES))
            digest.update(f.read(_STAMP_BYTES))
    except OSError:
        return None
    return size, digest.hexdigest()


_STAMP_BYTES = 1 << 16


def _path_for_workers(reader: JetSource, client: Any,
                      local_pool: bool) -> tuple[str | None, tuple[int, str] | None]:
    """Where the workers read a jetastar file's chunks themselves: ``(path, stamp)``, or
    ``(None, None)`` when this process reads them and sends the jets.

    Workers of the local pool share this file system (the path as given, unchecked). Dask
    workers may not: they read the file only if every one finds, at its absolute path, a file
    with this process's :func:`file_stamp` (each task checks it again on a worker that joins
    later)."""
    if not isinstance(reader, JetFileReader) or reader.fmt == "legacy":
        return None, None
    if local_pool:
        return str(reader.path), None
    if client is None:  # (not a Dask run)
        return None, None
    path = str(reader.path.resolve())
    stamp = file_stamp(path)
    try:
        seen = client.run(file_stamp, path)
    except Exception:  # a worker that cannot run it: read here
        return None, None
    if stamp is None or not seen or any(s != stamp for s in seen.values()):
        return None, None
    return path, stamp


@contextlib.contextmanager
def _large_tasks_expected() -> Any:
    """Dask's warning about large task graphs silenced (chunks of jets sent on purpose)."""
    import dask

    with dask.config.set({"distributed.admin.large-graph-warning-threshold": "4GB"}):
        yield


def _drain_progress(progress: Any, source: str, seen: dict[int, int], closed: set[int],
                    bar: Any) -> None:
    """Move the bar by the jets of ``source`` the workers reported since the last call (reports of
    chunks already written, or of another file, are stale)."""
    if progress is None:
        return
    moved = 0
    while True:
        try:
            where, start, count = progress.get_nowait()
        except (_queue.Empty, OSError, ValueError, EOFError):
            break
        if where != source or start in closed:
            continue
        seen[start] = seen.get(start, 0) + count
        moved += count
    if moved:
        bar.update(moved)


