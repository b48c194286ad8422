"""Cluster many jet files with many algorithms, in parallel, resumably.

:func:`run_batch` processes each input file in chunks of jets. A chunk is clustered by every
requested algorithm in a worker (a process pool, or any :class:`concurrent.futures.Executor` such as
``dask.distributed.Client(...).get_executor()``), and its results are written *atomically* to a part
file ``<output>.parts/part-<start>-<stop>.h5``. When every chunk of a file is done the parts are
merged (checking that every jet appears exactly once) into the output file — the input jets plus one
results table per algorithm — written atomically, and the part folder is removed.

Killed at any moment and restarted with the same arguments, a run skips finished files and finished
chunks and ends with every jet processed exactly once: a part is either complete or absent, the
output file is either complete or absent, and the merge refuses gaps and duplicates. A part file
that cannot be read is computed again; temporary files of killed runs are removed by the next run.

Never stale, never silently wrong: an output records the identity of its input (path, size, time and
a SHA-256 of its jets, see :mod:`jetastar.io._identity`) and is reused only when all of it matches.
Every option is converted to its declared type and checked before any work starts (text booleans
such as ``"false"`` are booleans). Any error of one input file — unreadable, inconsistent columns,
out of memory, a bug — ends that file with a one-line ``error`` (printed as ``FAILED <file>:
<line>``) and the other files go on. One run at a time writes a given output (a lock file
``.<output>.lock``; a second run on the same output stops at once).

Per jet and algorithm the status is recorded, never raised:

* ``"skipped"`` — an exact method on a jet above its size limit (the registry's ``max_leaves`` or a
  ``max_leaves`` override), or a method that raised :class:`~jetastar.TooLargeError`;
* ``"failed"`` — an invalid jet (NaN, negative energy, ...; the message names the file, the entry,
  the jet and the field) or an algorithm error (the message has the exception);
* ``"budget"`` — returned by algorithms that stop at their own time/size budget.

Time limit: with ``time_limit`` set, every algorithm that has a ``max_time`` (or ``time_limit``)
option gets it unless set explicitly, so it stops itself and reports ``"budget"``. Algorithms without
such an option run to completion (Python cannot interrupt a compiled kernel safely); when one takes
longer than the limit its result is kept and its message says so. A jet on which even a lower
estimate of such an algorithm's time (:mod:`jetastar.clustering.estimates`) is over the limit is
not started and recorded as ``"skipped"`` with the estimate. Exact methods on large jets are kept in
check by the size limits instead.

Threads and workers: algorithms with a ``threads`` option (the exact engines) get
``BatchConfig.threads`` when set, else ``threads=1`` when more than one worker runs (the workers
already use the cores); ``progress`` options are switched off. Small jets run on one thread anyway
(see :mod:`jetastar.clustering.threads`).

Interrupts: Ctrl-C (and SIGTERM, which the command line turns into the same) stops a run within a
second or so: the master writes the parts of chunks that had finished, kills the workers of its own
process pool (they ignore Ctrl-C and only compute) and raises :class:`BatchInterrupted`, which says
how many jets are kept. Rerunning resumes. The progress bar moves per jet (workers of the local pool
report each finished jet; other executors per chunk).

Scale-out: pass ``scheduler="tcp://host:8786"`` (needs ``pip install dask distributed``) or any
executor. On HTCondor/SLURM, start a cluster with dask-jobqueue (``SLURMCluster(...).scale(n)``), then
``Client(cluster).get_executor()``. Only the master reads and writes files: workers receive the jets
and return results, so they need no shared file system.

Example:
    >>> from jetastar.batch import run_batch
    >>> run_batch(["jets.h5"], algorithms=["greedy"], workers=2)  # doctest: +SKIP
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import dataclasses
import functools
import importlib
import json
import math
import multiprocessing
import os
import queue as _queue
import shutil
import signal
import time
import weakref
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

import numpy as np

from ._atomic import atomic_write_text, remove_stale_temporaries
from ._jit import Stopwatch, expect_compile, one_notice_for_workers
from ._lock import OutputLock
from ._version import __version__
from .errors import BatchError, BatchInterrupted, InvalidJetError, JetastarError, TooLargeError
from .io._common import jet_slice
from .io._identity import file_digest, input_identity, jets_digest, same_identity
from .io.results import AlgorithmResults, to_json, unit_options

__all__ = [
    "BatchConfig",
    "BatchError",
    "BatchInterrupted",
    "FileSummary",
    "check_config",
    "cluster_collection",
    "output_path_for",
    "parse_limits",
    "parse_option_value",
    "parse_options",
    "run_batch",
    "shutdown_executor",
    "warm_up_workers",
]

_TIME_OPTIONS = ("max_time", "time_limit")
_PART_DIR_SUFFIX = ".parts"
#: bytes a temporary file name adds to its final name (``.<name>.<pid>.<token>.tmp``, part folders
#: ``<name>.parts``)
_TMP_NAME_EXTRA = 1 + 1 + 10 + 1 + 8 + 4


@dataclasses.dataclass
class BatchConfig:
    """What to run on every jet.

    Args:
        algorithms: registry names, in output order.
        options: per algorithm name, keyword options (``{"beam": {"beam_size": 10}}``); the key
            ``"*"`` holds options for every algorithm that accepts them.
        time_limit: seconds per jet and algorithm (see the module docstring), ``None`` = none.
        max_leaves: per algorithm name, a size limit overriding the registry's ``max_leaves``
            (jets with more leaves are recorded as ``"skipped"``).
        plugins: modules to import (in the master and every worker) before running, e.g. modules
            that register extra algorithms.
        chunk_size: jets per work unit (and per part file).
        threads: numba threads per process for the algorithms with a ``threads`` option (the exact
            engines); default: all cores with one worker, one per worker with several. Results do
            not depend on it, so it is not part of the settings a resumed run must repeat.
    """

    algorithms: list[str]
    options: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    time_limit: float | None = None
    max_leaves: dict[str, int] = dataclasses.field(default_factory=dict)
    plugins: list[str] = dataclasses.field(default_factory=list)
    chunk_size: int = 50
    threads: int | None = None

    def fingerprint(self) -> dict[str, Any]:
        """The settings that must match for part files to be reused."""
        return {
            "algorithms": list(self.algorithms),
            "options": unit_options(self.options),
            "time_limit": self.time_limit,
            "max_leaves": dict(self.max_leaves),
            "chunk_size": int(self.chunk_size),
        }


@dataclasses.dataclass
class FileSummary:
    """Outcome of one input file of a batch run."""

    input: str
    output: str
    n_jets: int = 0
    chunks_total: int = 0
    chunks_reused: int = 0
    status_counts: dict[str, dict[str, int]] = dataclasses.field(default_factory=dict)
    seconds: float = 0.0
    error: str = ""
    already_done: bool = False

    @property
    def ok(self) -> bool:
        """No file-level error."""
        return not self.error


# ---------------------------------------------------------------------- per-jet work
def import_plugins(modules: Iterable[str]) -> None:
    """Import modules (that register algorithms); a missing one raises a clear error."""
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise BatchError(f"cannot import plugin module {name!r}: {exc}") from None


def _load_registry(plugins: Iterable[str]) -> None:
    import jetastar.clustering  # noqa: F401  (its __init__ imports and registers the algorithms)

    import_plugins(plugins)


def _options_for(name: str, config: BatchConfig, n_workers: int) -> dict[str, Any]:
    from .clustering.registry import algorithm_info

    info = algorithm_info(name)
    accepted = set(info.options())
    opts = {k: v for k, v in config.options.get("*", {}).items() if k in accepted}
    opts.update(config.options.get(name, {}))
    if config.time_limit is not None:
        for key in _TIME_OPTIONS:
            if key in accepted and key not in opts:
                opts[key] = float(config.time_limit)
                break
    if "threads" in accepted and "threads" not in opts:
        if config.threads is not None:
            opts["threads"] = int(config.threads)
        elif n_workers > 1:
            opts["threads"] = 1
    if "progress" in accepted and "progress" not in opts:
        opts["progress"] = False
    return opts


def check_config(config: BatchConfig) -> None:
    """Validate algorithm names and options against the registry (raises a one-line error)."""
    from .clustering.registry import algorithm_info, algorithms

    _load_registry(config.plugins)
    if not config.algorithms:
        raise BatchError(f"no algorithms given; available: {', '.join(algorithms())}")
    for name in config.algorithms:
        try:
            algorithm_info(name)
        except ValueError as exc:
            raise BatchError(str(exc)) from None
    twice = sorted({a for a in config.algorithms if config.algorithms.count(a) > 1})
    if twice:
        raise BatchError(f"algorithm(s) given more than once: {', '.join(twice)}")
    for name, opts in config.options.items():
        if name == "*":
            for key in opts:
                if not any(key in algorithm_info(a).options() for a in config.algorithms):
                    raise BatchError(
                        f"option {key!r} is not accepted by any of {', '.join(config.algorithms)}"
                    )
            continue
        if name not in config.algorithms:
            raise BatchError(f"options given for {name!r}, which is not among the algorithms run")
        valid = algorithm_info(name).options()
        unknown = sorted(set(opts) - set(valid))
        if unknown:
            raise BatchError(
                f"unknown option(s) {', '.join(unknown)} for algorithm {name!r}; "
                f"valid: {', '.join(valid) or '(none)'}"
            )
    if config.chunk_size < 1:
        raise BatchError("chunk size must be >= 1")
    if config.threads is not None:
        from .clustering.threads import check_threads

        try:
            check_threads(config.threads)
        except ValueError as exc:
            raise BatchError(f"--threads: {exc}") from None
    if config.time_limit is not None and not (
            isinstance(config.time_limit, (int, float)) and 0 < config.time_limit < math.inf):
        raise BatchError(f"the time limit must be a finite number > 0 seconds, got "
                         f"{config.time_limit!r}")
    _check_values(config)


def _check_values(config: BatchConfig) -> None:
    """Option values (converted to their declared types, in place) and size limits are valid
    for every algorithm they reach — before any work starts."""
    from .clustering.options import check_options
    from .clustering.registry import algorithm_info

    for name in config.algorithms:
        info = algorithm_info(name)
        accepted = set(info.options())
        shared = {k: v for k, v in config.options.get("*", {}).items() if k in accepted}
        try:
            checked = check_options(name, info.func, {**shared, **config.options.get(name, {})})
        except ValueError as exc:
            raise BatchError(str(exc)) from None
        if name in config.options:
            config.options[name] = {k: checked[k] for k in config.options[name]}
    for key, value in list(config.options.get("*", {}).items()):
        users = [a for a in config.algorithms if key in algorithm_info(a).options()
                 and key not in config.options.get(a, {})]
        if users:
            info = algorithm_info(users[0])
            config.options["*"][key] = check_options(users[0], info.func, {key: value})[key]
    for name, limit in config.max_leaves.items():
        if name not in config.algorithms:
            raise BatchError(f"size limit given for {name!r}, which is not among the algorithms "
                             f"run ({', '.join(config.algorithms)})")
        if isinstance(limit, bool) or not isinstance(limit, (int, np.integer)) or limit < 0:
            raise BatchError(f"the size limit of {name!r} must be an integer >= 0, got {limit!r}")


def _size_limit(name: str, config: BatchConfig) -> int | None:
    from .clustering.registry import algorithm_info

    if name in config.max_leaves:
        return int(config.max_leaves[name])
    info = algorithm_info(name)
    return info.max_leaves if info.exact else None


def _run_one(jet: Any, name: str, opts: dict[str, Any], config: BatchConfig) -> Any:
    from .clustering.registry import cluster
    from .clustering.result import ClusteringResult

    limit = _size_limit(name, config)
    if limit is not None and jet.n_leaves > limit:
        return ClusteringResult(
            None, -math.inf, name, options=opts, status="skipped", jet_id=jet.jet_id,
            message=f"{jet.n_leaves} leaves is over the size limit {limit} of {name!r}",
        )
    refused = _hopeless(jet, name, opts, config)
    if refused is not None:
        return refused
    watch = Stopwatch()
    try:
        res = cluster(jet, name, **opts)
    except TooLargeError as exc:
        return ClusteringResult(
            None, -math.inf, name, options=opts, status="skipped", jet_id=jet.jet_id,
            message=str(exc), stats={"time_s": watch.seconds()},
        )
    except Exception as exc:  # recorded, the batch goes on
        return ClusteringResult(
            None, -math.inf, name, options=opts, status="failed", jet_id=jet.jet_id,
            message=f"{type(exc).__name__}: {exc}", stats={"time_s": watch.seconds()},
        )
    elapsed = watch.seconds()
    res.stats.setdefault("time_s", elapsed)
    res.options = {**opts, **res.options}
    res.jet_id = jet.jet_id
    if config.time_limit is not None and elapsed > config.time_limit and not (
        set(_accepted(name)) & set(_TIME_OPTIONS)
    ):
        note = (f"took {elapsed:.3g} s, over the time limit of {config.time_limit:g} s "
                f"({name!r} has no time option, so it ran to completion)")
        res.message = f"{res.message}; {note}" if res.message else note
    return res


def _hopeless(jet: Any, name: str, opts: dict[str, Any], config: BatchConfig) -> Any:
    """Under a time limit, a ``"skipped"`` result for an algorithm without a time option whose
    lower time estimate on this jet is over the limit (its kernel could not be stopped)."""
    from .clustering.estimates import estimate_seconds
    from .clustering.result import ClusteringResult

    if config.time_limit is None or set(_accepted(name)) & set(_TIME_OPTIONS):
        return None
    est = estimate_seconds(name, jet.n_leaves, opts)
    if est is None or not est > config.time_limit:
        return None
    return ClusteringResult(
        None, -math.inf, name, options=opts, status="skipped", jet_id=jet.jet_id,
        message=(f"not started: {name!r} is estimated at {est:.3g} s or more for "
                 f"{jet.n_leaves} leaves, over the time limit of {config.time_limit:g} s (it has "
                 "no time option and cannot be stopped once started)"),
    )


def _accepted(name: str) -> list[str]:
    from .clustering.registry import algorithm_info

    return algorithm_info(name).options()


def _jet_for_clustering(collection: Any, i: int) -> Any:
    """Jet ``i`` of a collection without its truth tree (clustering does not need it, and
    building the tree costs more than clustering a small jet)."""
    from .jet import Jet, _validate_leaves

    a, b = collection.leaf_offsets[i], collection.leaf_offsets[i + 1]
    seed = int(collection.seed[i])
    try:
        params = collection.jet_params(i)
    except InvalidJetError:
        # a bad particle also spoils the parameters derived from it (a jet's root 4-vector):
        # name the particle when it is the cause
        _validate_leaves(collection.leaves[a:b], int(collection.jet_id[i]))
        raise
    return Jet(collection.leaves[a:b], params, jet_id=int(collection.jet_id[i]),
               seed=None if seed < 0 else seed, jet_type=str(collection.jet_type[i]))


def cluster_collection(
    collection: Any,
    config: BatchConfig,
    *,
    first_index: int = 0,
    source: str = "",
    n_workers: int = 1,
    on_jet: Callable[[], None] | None = None,
) -> dict[str, AlgorithmResults]:
    """Cluster every jet of a collection with every algorithm of ``config`` (in this process).

    Args:
        collection: a :class:`~jetastar.JetCollection`.
        config: what to run.
        first_index: position of the collection's first jet in its file (for ``jet_index``).
        source: file name used in the messages of invalid jets.
        n_workers: how many such calls run at the same time (sets ``threads=1`` when > 1).
        on_jet: called after each jet (every algorithm done), e.g. to move a progress bar.

    Returns:
        algorithm name -> :class:`AlgorithmResults` with one row per jet.
    """
    from .clustering.registry import algorithm_info
    from .clustering.result import ClusteringResult

    _load_registry(config.plugins)
    per_alg: dict[str, list[Any]] = {name: [] for name in config.algorithms}
    opts = {name: _options_for(name, config, n_workers) for name in config.algorithms}
    if len(collection):
        _warm_up(config, opts)
    for i in range(len(collection)):
        jet_id = int(collection.jet_id[i])
        try:
            jet = _jet_for_clustering(collection, i)
        except InvalidJetError as exc:
            entries = collection.jet_columns.get("entry")
            entry = int(entries[i]) if entries is not None else first_index + i
            where = f"{source}: entry {entry}: " if source else ""
            for name in config.algorithms:
                per_alg[name].append(ClusteringResult(
                    None, -math.inf, name, options=opts[name], status="failed",
                    message=f"{where}{exc}", jet_id=jet_id,
                ))
        else:
            for name in config.algorithms:
                per_alg[name].append(_run_one(jet, name, opts[name], config))
        if on_jet is not None:
            on_jet()
    index = np.arange(first_index, first_index + len(collection))
    return {
        name: AlgorithmResults.from_results(
            name, rows, jet_index=index, jet_id=collection.jet_id,
            likelihood=_likelihood_of(rows, opts[name]),
            exact_method=algorithm_info(name).exact,
        )
        for name, rows in per_alg.items()
    }


def _warm_up(config: BatchConfig, opts: dict[str, dict[str, Any]],
             names: Sequence[str] | None = None) -> None:
    """Compile (or load) the kernels of the algorithms before the first timed jet."""
    from .clustering.warmup import compile_estimate, warm_up

    names = config.algorithms if names is None else names
    expect_compile(compile_estimate(names), keep=True)
    warm_up(names, opts, {name: _size_limit(name, config) for name in names})


def _warm_task(config: BatchConfig, names: Sequence[str], n_workers: int) -> list[str]:
    """What a worker runs to warm up algorithms that share kernels (a top-level function, for
    pickling)."""
    _load_registry(config.plugins)
    _warm_up(config, {name: _options_for(name, config, n_workers) for name in names}, names)
    return list(names)


#: warm-up tasks submitted per executor and configuration, so that they are sent once
_WARM_TASKS: weakref.WeakKeyDictionary[Any, dict[str, list[cf.Future]]] = weakref.WeakKeyDictionary()


def warm_up_workers(executor: cf.Executor, config: BatchConfig, n_workers: int) -> list[cf.Future]:
    """Send one warm-up task per algorithm (per group of algorithms sharing their kernels) to the
    workers of ``executor`` (once per executor and configuration) and return their futures.

    On a cold kernel cache the workers compile different algorithms at the same time, and each
    kernel once; afterwards every worker loads them from the cache.
    """
    key = to_json({**config.fingerprint(), "plugins": list(config.plugins), "n": n_workers})
    try:
        sent = _WARM_TASKS.setdefault(executor, {})
    except TypeError:  # an executor without weak references: warm up every time
        sent = {}
    if key not in sent:
        from .clustering.warmup import compile_estimate, warm_up_tasks

        expect_compile(compile_estimate(config.algorithms, n_workers), keep=True)

        sent[key] = [executor.submit(_warm_task, config, names, n_workers)
                     for names in warm_up_tasks(config.algorithms)]
    return sent[key]


def _likelihood_of(rows: Sequence[Any], opts: dict[str, Any]) -> str:
    for r in rows:
        if r.status not in ("skipped", "failed"):
            return r.likelihood
    return str(opts.get("likelihood", "symmetric"))


#: in a worker process of the local pool: where it reports each finished jet (see
#: :func:`_worker_setup`); ``None`` elsewhere
_progress_queue: Any = None


def _report_jet(source: str, first_index: int) -> None:
    """Tell the master that one more jet of the chunk ``(source, first_index)`` is done."""
    try:
        _progress_queue.put_nowait((source, first_index))
    except Exception:  # progress is best effort; the chunk's result counts in the end
        pass


def _chunk_task(
    collection: Any, config: BatchConfig, first_index: int, source: str, n_workers: int
) -> tuple[int, dict[str, AlgorithmResults]]:
    """What a worker runs (a top-level function, so executors can pickle it)."""
    on_jet = None
    if _progress_queue is not None:
        on_jet = functools.partial(_report_jet, source, first_index)
    return first_index, cluster_collection(
        collection, config, first_index=first_index, source=source, n_workers=n_workers,
        on_jet=on_jet,
    )


# ---------------------------------------------------------------------- files and parts
def output_path_for(input_path: str | os.PathLike[str], output_dir: str | os.PathLike[str],
                    fmt: str = "h5") -> Path:
    """``<output_dir>/<input stem>.results.<fmt>``."""
    return Path(output_dir) / f"{Path(input_path).stem}.results.{fmt}"


def _parts_dir(output: Path) -> Path:
    return output.with_name(output.name + _PART_DIR_SUFFIX)


def _part_name(start: int, stop: int) -> str:
    return f"part-{start:010d}-{stop:010d}.h5"


def _parse_part(name: str) -> tuple[int, int] | None:
    if not (name.startswith("part-") and name.endswith(".h5")):
        return None
    try:
        a, b = name[5:-3].split("-")
        return int(a), int(b)
    except ValueError:
        return None


def _input_fingerprint(path: Path) -> dict[str, Any]:
    st = path.stat()
    return {"input": str(path.resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _content_digest(reader: Any) -> str:
    """Hash of the jets an input holds (particle files: of the file's bytes, as their jets are
    only found while clustering)."""
    if isinstance(reader, _Reader):
        return jets_digest(reader.whole())
    return file_digest(reader.path)


def _check_unchanged(reader: Any, collection: Any, identity: dict[str, Any] | None) -> None:
    """The jets written with the results are the jets whose hash was taken at the start."""
    if identity is None:
        return
    now = jets_digest(collection) if isinstance(reader, _Reader) else file_digest(reader.path)
    if now != identity["sha256"]:
        raise BatchError(
            f"{reader.path}: the input changed while it was being clustered; rerun with --fresh"
        )


def _is_complete_output(output: Path, n_jets: int, config: BatchConfig,
                        reading: dict[str, Any] | None = None,
                        identity: dict[str, Any] | None = None) -> bool:
    """Whether ``output`` is a finished result of this input (same path, size, time and jets)
    with these settings."""
    from . import io

    if not output.is_file():
        return False
    try:
        info = io.file_info(output)
    except (OSError, ValueError):
        return False
    if info.get("n_jets") != n_jets:
        return False
    if identity is not None and not same_identity(
            info.get("attrs", {}).get("input_identity"), identity):
        return False
    batch = info.get("attrs", {}).get("batch")
    if isinstance(batch, str):
        try:
            batch = json.loads(batch)
        except ValueError:
            return False
    if not isinstance(batch, dict):
        return False
    want = config.fingerprint()
    if any(unit_options(batch.get(k)) != unit_options(want[k]) for k in want if k != "chunk_size"):
        return False
    for key, value in (reading or {}).items():
        stored = info.get("attrs", {}).get(key)
        if isinstance(stored, str):
            try:
                stored = json.loads(stored)
            except ValueError:
                return False
        if unit_options(stored) != unit_options(value):
            return False
    res = info.get("results", {})
    return all(a in res and res[a]["rows"] == n_jets for a in config.algorithms)


class _Reader:
    """Reads chunks of an input file (a legacy pickle is imported once and sliced)."""

    def __init__(self, path: Path) -> None:
        from . import io

        self.path = path
        self.fmt = io.file_format(path)
        self._whole = io.read(path, validate=False) if self.fmt == "legacy" else None
        self.n_jets = len(self._whole) if self._whole is not None else io.n_jets(path)

    def chunk(self, start: int, stop: int) -> Any:
        from . import io

        if self._whole is not None:
            return jet_slice(self._whole, start, stop)
        return io.read(self.path, slice(start, stop), validate=False)

    def whole(self) -> Any:
        from . import io

        return self._whole if self._whole is not None else io.read(self.path, validate=False)


def _worker_setup(plugins: Sequence[str], progress_queue: Any = None) -> None:
    """Start of a worker process of the local pool.

    Ctrl-C reaches every process of the terminal's process group: workers ignore it and the
    master, which holds the results, decides (it keeps what is finished and stops the workers).
    Finished jets are reported on ``progress_queue``. Without plugins a worker runs jetastar's
    kernels only (and needs no other package's numba extensions).
    """
    global _progress_queue
    from ._jit import skip_numba_extensions

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _progress_queue = progress_queue
    if not plugins:
        skip_numba_extensions()


#: the per-jet progress queue of each local process pool
_PROGRESS_QUEUES: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def _make_executor(
    workers: int, scheduler: str | None, plugins: Sequence[str] = ()
) -> tuple[cf.Executor | None, Any]:
    if scheduler:
        try:
            from distributed import Client
        except ImportError:
            raise BatchError(
                "--scheduler needs dask.distributed: pip install 'jetastar[dask]' "
                "(or: pip install dask distributed)"
            ) from None
        client = Client(scheduler)
        return client.get_executor(), client
    if workers > 1:
        ctx = multiprocessing.get_context("spawn")
        progress_queue = ctx.Queue()
        pool = cf.ProcessPoolExecutor(max_workers=workers, mp_context=ctx,
                                      initializer=_worker_setup,
                                      initargs=(list(plugins), progress_queue))
        _PROGRESS_QUEUES[pool] = progress_queue
        return pool, None
    return None, None


def shutdown_executor(executor: cf.Executor, interrupted: bool = False) -> None:
    """Shut an executor down; after an interrupt, at once.

    A local process pool's workers are killed (they only compute: results are written by the
    master, so nothing is lost that was not finished anyway); other executors get their pending
    work cancelled.

    Args:
        executor: the executor (e.g. from ``_make_executor``).
        interrupted: stop now instead of waiting for running work.
    """
    if interrupted:
        processes = getattr(executor, "_processes", None) or {}
        for proc in list(processes.values()):
            try:
                proc.kill()
            except (OSError, ValueError, AttributeError):
                pass
        for proc in list(processes.values()):
            with contextlib.suppress(Exception):
                proc.join(timeout=2)
    try:
        executor.shutdown(wait=not interrupted, cancel_futures=True)
    except TypeError:  # dask's ClientExecutor has no cancel_futures
        executor.shutdown(wait=not interrupted)
    queue = _PROGRESS_QUEUES.pop(executor, None)
    if queue is not None:
        queue.close()
        queue.cancel_join_thread()


def run_batch(
    inputs: Sequence[str | os.PathLike[str]],
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
        inputs: jet files (``.h5``, ``.root``, ``.pkl``).
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
    check_config(config)
    if executor is None and not scheduler and (
            isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise BatchError(f"workers must be an integer >= 1, got {workers!r}")
    if fmt not in ("h5", "hdf5", "root"):
        raise BatchError(f"unknown output format {fmt!r}; use h5 or root")
    inputs = [Path(p) for p in inputs]
    if not inputs:
        raise BatchError("no input files")
    if output is not None:
        if len(inputs) != 1:
            raise BatchError("a single output file needs a single input; use an output folder")
        outputs = [Path(output)]
    else:
        folder = Path(output_dir if output_dir is not None else ".")
        folder.mkdir(parents=True, exist_ok=True)
        outputs = [output_path_for(p, folder, fmt) for p in inputs]
    if len({o.resolve() for o in outputs}) != len(outputs):
        raise BatchError("two inputs would write the same output file (same file name stem)")
    _check_outputs(inputs, outputs)
    with one_notice_for_workers():
        own_executor, client = (None, None)
        if executor is None:
            own_executor, client = _make_executor(workers, scheduler, config.plugins)
            executor = own_executor
        if executor is None:
            n_workers = 1
        elif client is not None:
            n_workers = max(2, sum(client.nthreads().values()))
        else:
            n_workers = max(2, workers)
        summaries = []
        try:
            for inp, out in zip(inputs, outputs, strict=True):
                source = None
                if particles is not None:
                    source = (dataclasses.replace(particles, path=str(inp)),
                              {"entry_start": entry_start, "entry_stop": entry_stop,
                               "step_size": step_size})
                summary = _run_file(inp, out, config, executor, n_workers, progress, fresh,
                                    attrs, source)
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
    from .io import file_format

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
    progress: bool, fresh: bool, attrs: dict[str, Any] | None, source: Any = None,
) -> FileSummary:
    from ._progress import progress_bar

    summary = FileSummary(str(inp), str(out))
    t0 = time.perf_counter()
    reader: Any = None
    lock: OutputLock | None = None
    try:
        if not inp.exists():
            raise FileNotFoundError(f"{inp}: no such file")
        if not out.parent.is_dir():
            raise FileNotFoundError(f"{out}: directory {out.parent} does not exist")
        lock = OutputLock.acquire(out)  # one run per output at a time
        remove_stale_temporaries(out.parent, out.name)  # of a merge that was killed
        if source is None:
            reader = _Reader(inp)
            reading: dict[str, Any] = {}
        else:
            from .io.particles import ParticleReader

            reader = ParticleReader(source[0], progress=progress, **source[1])
            reading = {"particles": reader.settings()}
        n = reader.n_jets
        summary.n_jets = n
        identity = input_identity(inp, _content_digest(reader))
        parts = _parts_dir(out)
        if fresh and parts.exists():
            shutil.rmtree(parts)
        if not fresh and _is_complete_output(out, n, config, reading, identity):
            shutil.rmtree(parts, ignore_errors=True)
            summary.already_done = True
            summary.status_counts = _status_counts_of(out)
            return summary
        manifest = {
            "jetastar_version": __version__, **_input_fingerprint(inp), "n_jets": n,
            "sha256": identity["sha256"], **config.fingerprint(), **reading,
        }
        done = _prepare_parts(parts, manifest)
        chunks = [(a, min(n, a + config.chunk_size)) for a in range(0, n, config.chunk_size)]
        summary.chunks_total = len(chunks)
        summary.chunks_reused = sum(1 for c in chunks if c in done)
        todo = [c for c in chunks if c not in done]
        if todo:
            # compile (or load) the kernels before the bar starts, so that its rate and ETA are
            # those of the clustering
            _warm_up_for(config, executor, n_workers)
        bar = progress_bar(
            total=n, initial=n - sum(b - a for a, b in todo), unit="jet", desc=inp.name,
            show=progress, leave=True,
        )
        try:
            with bar:
                _process_chunks(reader, todo, parts, config, executor, n_workers, bar)
        except KeyboardInterrupt:
            kept = sum(b - a for a, b in _done_parts(parts))
            raise BatchInterrupted(str(inp), str(parts), kept, n) from None
        _merge(reader, out, parts, chunks, config,
               {**reading, **(attrs or {}), "input_identity": identity})
        summary.status_counts = _status_counts_of(out)
    except Exception as exc:  # (one bad file must not stop the others)
        summary.error = _error_line(exc, inp)
    finally:
        if reader is not None and hasattr(reader, "close"):
            reader.close()
        if lock is not None:
            lock.release()
        summary.seconds = time.perf_counter() - t0
    return summary


def _error_line(exc: BaseException, inp: Path) -> str:
    """One line for a file-level error (the summary prints ``FAILED <file>: <line>``)."""
    text = " ".join(str(exc).split())
    if isinstance(exc, MemoryError):
        text = f"out of memory{': ' + text if text else ''} (a corrupt file, or too large a chunk)"
    elif isinstance(exc, BrokenProcessPool):
        text = ("a worker process died (killed, out of memory, or, in a script, code that is not "
                "under `if __name__ == \"__main__\":`, which worker processes import)")
    elif not isinstance(exc, (JetastarError, OSError)) or not text:
        text = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    prefix = f"{inp}: "
    return text[len(prefix):] if text.startswith(prefix) else text


def _prepare_parts(parts: Path, manifest: dict[str, Any]) -> set[tuple[int, int]]:
    """Create or check the part folder; return the chunks already done."""
    mpath = parts / "manifest.json"
    if parts.exists():
        remove_stale_temporaries(parts)
        try:
            old = json.loads(mpath.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            old = None
        if old is None:
            # manifest never written completely: nothing in here can be trusted
            shutil.rmtree(parts)
        else:
            keys = [k for k in manifest if k != "jetastar_version"]
            diff = [k for k in keys if unit_options(old.get(k)) != unit_options(manifest[k])]
            if diff:
                raise BatchError(
                    f"{parts}: part files of an interrupted run with different settings "
                    f"({', '.join(diff)}); rerun with the same settings, or pass --fresh to "
                    "discard them"
                )
    if not parts.exists():
        parts.mkdir(parents=True)
        atomic_write_text(mpath, to_json(manifest))
    return _done_parts(parts, manifest.get("algorithms", []))


def _done_parts(parts: Path, algorithms: Sequence[str] | None = None) -> set[tuple[int, int]]:
    """The chunks ``(start, stop)`` whose part file is in the folder; with ``algorithms``, only
    parts that can be read and hold all of them (damaged ones are removed)."""
    done = set()
    if parts.is_dir():
        for p in parts.iterdir():
            rng = _parse_part(p.name)
            if rng is not None and (algorithms is None or _readable_part(p, algorithms)):
                done.add(rng)
    return done


def _readable_part(path: Path, algorithms: Sequence[str]) -> bool:
    """Whether a part file can be read and holds every algorithm; a damaged one (truncated by
    a disk error, edited) is removed so that its chunk is computed again."""
    from .io.hdf5 import read_hdf5_results

    try:
        tables = read_hdf5_results(path)
        ok = all(name in tables for name in algorithms)
    except (JetastarError, OSError, ValueError, KeyError, RuntimeError):
        ok = False
    if not ok:
        with contextlib.suppress(OSError):
            path.unlink()
    return ok


def _write_part(parts: Path, start: int, stop: int, tables: dict[str, AlgorithmResults]) -> None:
    from .io.hdf5 import write_hdf5

    write_hdf5(parts / _part_name(start, stop), None, tables,
               attrs={"chunk_start": start, "chunk_stop": stop})


def _note_problems(reader: Any, tables: dict[str, AlgorithmResults], a: int, b: int) -> None:
    """Failed rows of jets the reader knows more about (e.g. which input branch holds a NaN) get
    the reader's message."""
    get = getattr(reader, "problems", None)
    found = get(a, b) if get is not None else {}
    if not found:
        return
    for table in tables.values():
        for row, pos in enumerate(table.jet_index):
            msg = found.get(int(pos))
            if msg is not None and table.status[row] == "failed":
                table.message[row] = msg


def _process_chunks(
    reader: _Reader, todo: list[tuple[int, int]], parts: Path, config: BatchConfig,
    executor: cf.Executor | None, n_workers: int, bar: Any,
) -> None:
    """Cluster the chunks ``todo`` and write one part file each; the bar moves per jet.

    Interrupted (``KeyboardInterrupt``), it writes the parts of chunks that had finished, cancels
    the rest and re-raises.
    """
    source = str(reader.path)
    if executor is None:
        for a, b in todo:
            tables = cluster_collection(reader.chunk(a, b), config, first_index=a,
                                        source=source, on_jet=lambda: bar.update(1))
            _note_problems(reader, tables, a, b)
            _write_part(parts, a, b, tables)
        return
    progress = _PROGRESS_QUEUES.get(executor)
    seen: dict[int, int] = {}  # chunk start -> jets the bar already counts
    closed: set[int] = set()  # chunks written (late reports of theirs are ignored)
    pending: dict[cf.Future, tuple[int, int]] = {}
    queue = list(todo)
    max_inflight = 2 * n_workers + 1

    def finish(fut: cf.Future) -> None:
        a, b = pending.pop(fut)
        _, tables = fut.result()
        _note_problems(reader, tables, a, b)
        _write_part(parts, a, b, tables)
        closed.add(a)
        bar.update(b - a - seen.pop(a, 0))

    try:
        while queue or pending:
            while queue and len(pending) < max_inflight:
                a, b = queue.pop(0)
                fut = executor.submit(_chunk_task, reader.chunk(a, b), config, a, source,
                                      n_workers)
                pending[fut] = (a, b)
            finished, _ = cf.wait(list(pending), timeout=0.25 if progress is not None else None,
                                  return_when=cf.FIRST_COMPLETED)
            _drain_progress(progress, source, seen, closed, bar)
            for fut in finished:
                finish(fut)
    except KeyboardInterrupt:
        # keep what has finished: a part is small and quick to write
        for fut in [f for f in pending if f.done() and not f.cancelled()]:
            with contextlib.suppress(Exception):
                if fut.exception() is None:
                    finish(fut)
        raise
    finally:
        for fut in pending:
            fut.cancel()


def _warm_up_for(config: BatchConfig, executor: cf.Executor | None, n_workers: int) -> None:
    """Warm up this process (no executor) or the executor's workers, and wait for it."""
    if executor is None:
        _load_registry(config.plugins)
        _warm_up(config, {name: _options_for(name, config, 1) for name in config.algorithms})
        return
    for fut in warm_up_workers(executor, config, n_workers):
        try:
            fut.result()
        except Exception:  # the chunks report what fails
            pass


def _drain_progress(progress: Any, source: str, seen: dict[int, int], closed: set[int],
                    bar: Any) -> None:
    """Move the bar by the jets of ``source`` the workers reported since the last call (reports of
    chunks already written, or of another file, are stale)."""
    if progress is None:
        return
    moved = 0
    while True:
        try:
            where, start = progress.get_nowait()
        except (_queue.Empty, OSError, ValueError, EOFError):
            break
        if where != source or start in closed:
            continue
        seen[start] = seen.get(start, 0) + 1
        moved += 1
    if moved:
        bar.update(moved)


def _merge(
    reader: _Reader, out: Path, parts: Path, chunks: list[tuple[int, int]], config: BatchConfig,
    attrs: dict[str, Any] | None,
) -> None:
    from . import io
    from .io.hdf5 import read_hdf5_results

    tables: dict[str, list[AlgorithmResults]] = {a: [] for a in config.algorithms}
    for a, b in chunks:
        part = read_hdf5_results(parts / _part_name(a, b))
        for name in config.algorithms:
            if name not in part:
                raise BatchError(f"{parts / _part_name(a, b)}: has no results for {name!r}")
            tables[name].append(part[name])
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
    _check_unchanged(reader, collection, (attrs or {}).get("input_identity"))
    meta = {
        "input": str(reader.path),
        "batch": {**config.fingerprint(), "plugins": list(config.plugins)},
        **(attrs or {}),
    }
    io.write(out, collection, merged, attrs=meta)
    shutil.rmtree(parts, ignore_errors=True)


def _status_counts_of(out: Path) -> dict[str, dict[str, int]]:
    from . import io

    info = io.file_info(out)
    return {k: dict(v["status"]) for k, v in info.get("results", {}).items()}


def parse_option_value(text: str) -> Any:
    """A ``--option`` value: JSON when it parses (numbers, true/false/null, lists), else text.

    Example:
        >>> parse_option_value("10"), parse_option_value("true"), parse_option_value("abc")
        (10, True, 'abc')
    """
    try:
        return json.loads(text)
    except ValueError:
        lowered = text.strip().lower()
        if lowered in ("none", "null"):
            return None
        if lowered in ("inf", "+inf", "infinity"):
            return math.inf
        return text


def parse_options(items: Iterable[str]) -> dict[str, dict[str, Any]]:
    """``["beam.beam_size=10", "likelihood=legacy"]`` -> ``{"beam": {...}, "*": {...}}``.

    ``name.key=value`` applies to algorithm ``name``; ``key=value`` to every algorithm that accepts
    ``key``.

    Raises:
        BatchError: for an item without ``=``.
    """
    out: dict[str, dict[str, Any]] = {}
    for item in items:
        if "=" not in item:
            raise BatchError(f"option {item!r} is not of the form key=value or algorithm.key=value")
        key, value = item.split("=", 1)
        key = key.strip()
        alg, _, name = key.rpartition(".")
        if not name:
            raise BatchError(f"option {item!r} has an empty name")
        out.setdefault(alg or "*", {})[name] = parse_option_value(value)
    return out


def parse_limits(items: Iterable[str]) -> dict[str, int]:
    """``["trellis=12"]`` -> ``{"trellis": 12}`` (``--max-leaves``)."""
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        try:
            if not sep:
                raise ValueError
            out[name.strip()] = int(value)
        except ValueError:
            raise BatchError(f"size limit {item!r} is not of the form algorithm=N") from None
    return out

