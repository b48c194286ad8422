"""Where the chunks of a batch run are clustered: executors, worker processes and their warm-up.

:func:`make_executor` starts a local process pool (``spawn``; its workers ignore Ctrl-C, report each
finished jet on a queue and load only jetastar's numba extensions) or connects to a dask scheduler;
:func:`shutdown_executor` stops it (at once after an interrupt). Before the first chunk the kernels
of the algorithms are compiled or loaded from the cache: in this process (:func:`warm_up_here`) or,
with :func:`warm_up_workers`, on the workers — one task per group of algorithms sharing kernels,
so that on a cold cache different workers compile different kernels.

Example:
    >>> from jetastar.batch import make_executor, shutdown_executor
    >>> executor, client = make_executor(1, None)  # one worker: run in this process
    >>> executor is None and client is None
    True
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import functools
import multiprocessing
import os
import signal
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from .._jit import (
    compile_estimate_for,
    skip_last_collection,
    skip_numba_extensions,
)
from ..clustering.warmup import compile_estimate, warm_up, warm_up_sizes, warm_up_tasks
from ..errors import BatchError
from ..result_tables import to_json
from .config import BatchConfig, load_registry, options_for, size_limit

__all__ = [
    "WorkerWatch",
    "jet_reporter",
    "make_executor",
    "progress_queue_of",
    "shutdown_executor",
    "warm_up_estimate",
    "warm_up_for",
    "warm_up_here",
    "warm_up_workers",
]


#: in a worker process of the local pool: where it reports each finished jet (see
#: :func:`_worker_setup`); ``None`` elsewhere
_progress_queue: Any = None

#: the per-jet progress queue of each local process pool
_PROGRESS_QUEUES: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()

#: warm-up tasks submitted per executor and configuration, so that they are sent once
_WARM_TASKS: weakref.WeakKeyDictionary[Any, dict[str, list[cf.Future]]] = weakref.WeakKeyDictionary()


def _worker_setup(plugins: Sequence[str], progress_queue: Any = None,
                  gpus: Sequence[str] = (), counter: Any = None) -> None:
    """Start of a worker process of the local pool.

    Ctrl-C reaches every process of the terminal's process group: workers ignore it and the
    master, which holds the results, decides (it keeps what is finished and stops the workers).
    Finished jets are reported on ``progress_queue``. Without plugins a worker runs jetastar's
    kernels only (and needs no other package's numba extensions). With ``gpus``, the ``i``-th
    worker to start sees only ``gpus[i % len(gpus)]`` (``CUDA_VISIBLE_DEVICES``, set before CUDA
    starts in it): one GPU per worker process.
    """
    global _progress_queue

    if gpus and counter is not None:
        with counter.get_lock():
            index = counter.value
            counter.value += 1
        os.environ["CUDA_VISIBLE_DEVICES"] = str(gpus[index % len(gpus)])
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _progress_queue = progress_queue
    parent = multiprocessing.parent_process()  # the master, known from the spawn itself
    _exit_with_parent(parent.pid if parent is not None and parent.pid else os.getppid())
    if not plugins:
        skip_numba_extensions()
    skip_last_collection()  # (the pool's shutdown waits for each worker's end)


#: how often a pool worker checks that the process that started it is alive (seconds)
_PARENT_POLL_S = 0.5


def _exit_with_parent(parent: int) -> None:
    """End this worker process as soon as ``parent`` (the master) is gone, whatever killed it.

    A master killed with SIGKILL cannot stop its pool: its workers would be reparented and live on
    (one blocked writing a result nobody reads). A daemon thread polls the parent's pid and leaves
    with ``os._exit``, which works while the main thread is inside a kernel or a blocked write.
    ``parent`` comes from the spawn, so a master killed while the worker was still starting is
    noticed too (the worker is then reparented already).
    """

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(_PARENT_POLL_S)
        os._exit(1)

    threading.Thread(target=watch, name="jetastar-parent-watch", daemon=True).start()


def _report_jet(source: str, first_index: int, count: int = 1) -> None:
    """Tell the master that ``count`` more jets of the chunk ``(source, first_index)`` are done."""
    try:
        _progress_queue.put_nowait((source, first_index, count))
    except Exception:  # progress is best effort; the chunk's result counts in the end
        pass


def jet_reporter(source: str, first_index: int) -> Callable[[int], None] | None:
    """In a worker of the local pool: a callable reporting a number of finished jets of the chunk
    ``(source, first_index)`` to the master; ``None`` elsewhere."""
    if _progress_queue is None:
        return None
    return functools.partial(_report_jet, source, first_index)


def progress_queue_of(executor: cf.Executor) -> Any:
    """The queue on which the workers of a local pool (from :func:`make_executor`) report finished
    jets as ``(source, first_index, count)``; ``None`` for other executors."""
    return _PROGRESS_QUEUES.get(executor)


def make_executor(
    workers: int, scheduler: str | None, plugins: Sequence[str] = (), gpus: Sequence[str] = ()
) -> tuple[cf.Executor | None, Any]:
    """An executor for ``workers`` processes, or for a dask scheduler.

    Args:
        workers: processes of a local pool; 1 = no executor (run in this process).
        scheduler: address of a dask scheduler (``tcp://host:8786``); needs dask.distributed.
        plugins: modules the local workers import (they then load other packages' numba
            extensions too).
        gpus: ``CUDA_VISIBLE_DEVICES`` entries to deal to the local workers, one per process
            (:func:`jetastar._cuda.gpus_for_workers`); empty: workers see what this process sees.

    Returns:
        ``(executor, client)``: the executor (``None`` for one local worker) and the dask client
        (``None`` unless ``scheduler``; close it when done).

    Raises:
        BatchError: a scheduler without dask.distributed installed.
    """
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
                                      initargs=(list(plugins), progress_queue, list(gpus),
                                                ctx.Value("i", 0) if gpus else None))
        _PROGRESS_QUEUES[pool] = progress_queue
        return pool, None
    return None, None


def shutdown_executor(executor: cf.Executor, interrupted: bool = False, *,
                      wait: bool = True) -> None:
    """Shut an executor down; after an interrupt, at once.

    A local process pool's workers are killed (they only compute: results are written by the
    master, so nothing is lost that was not finished anyway); other executors get their pending
    work cancelled. Calling it again later (e.g. after ``wait=False``) does no harm.

    Args:
        executor: the executor (e.g. from :func:`make_executor`).
        interrupted: stop now instead of waiting for running work.
        wait: return only once the workers have ended (without: they end while the caller goes
            on, and the interpreter's exit waits for them).
    """
    if interrupted:
        # Futures the caller cancelled are still in the pool's table of pending work; killing the
        # workers makes the pool's manager thread fail every pending future with BrokenProcessPool,
        # and on Python < 3.12 a cancelled one raises InvalidStateError there (a traceback next to
        # "interrupted"). Give those work items a fresh future nobody waits for instead (the table
        # itself belongs to the manager thread, which still reads it).
        table = getattr(executor, "_pending_work_items", None)
        if isinstance(table, dict):
            for item in list(table.values()):
                if getattr(item, "future", None) is not None and item.future.cancelled():
                    item.future = cf.Future()
        processes = getattr(executor, "_processes", None) or {}
        for proc in list(processes.values()):
            try:
                proc.kill()
            except (OSError, ValueError, AttributeError):
                pass
        for proc in list(processes.values()):
            with contextlib.suppress(Exception):
                proc.join(timeout=2)
    # (shutdown forgets the pool's manager thread; it is joined below)
    manager = getattr(executor, "_executor_manager_thread", None) if interrupted else None
    wait = wait and not interrupted
    try:
        executor.shutdown(wait=wait, cancel_futures=True)
    except TypeError:  # dask's ClientExecutor has no cancel_futures
        executor.shutdown(wait=wait)
    if manager is not None:
        # On Python < 3.12 the manager thread closes its wake-up pipe as it ends, while the
        # interpreter's exit hook may be writing to it: "OSError: Bad file descriptor" after
        # "interrupted". With the workers killed it ends at once; waiting for it closes the race.
        with contextlib.suppress(RuntimeError):
            manager.join(timeout=2)
    queue = _PROGRESS_QUEUES.pop(executor, None)
    if queue is not None:
        queue.close()
        queue.cancel_join_thread()


class WorkerWatch:
    """Notices the Dask workers that left a cluster (killed, out of memory, a lost node): Dask
    computes their tasks again on other workers, silently; the chunk loop says so.

    Other executors have no workers to watch (:meth:`lost` is always empty): a local pool that
    loses a worker fails the run's remaining chunks with a one-line error instead.

    Args:
        executor: the executor of the run (a ``distributed`` client's ``get_executor()``).
    """

    def __init__(self, executor: cf.Executor | None) -> None:
        #: the executor's ``distributed.Client`` (``None`` for other executors)
        self.client = getattr(executor, "_client", None)
        self._known = self._workers()

    def _workers(self) -> set[str]:
        if self.client is None:
            return set()
        try:
            return set(self.client.scheduler_info().get("workers", {}))
        except Exception:  # a closing client: nothing to report
            return set()

    def lost(self) -> list[str]:
        """The addresses of the workers gone since the last call (at most every 0.5 s asked)."""
        if self.client is None:
            return []
        now = time.monotonic()
        if now - getattr(self, "_asked", 0.0) < 0.5:
            return []
        self._asked = now
        current = self._workers()
        if not current:
            return []
        gone = sorted(self._known - current)
        self._known = current
        return gone


def _largest_chunk(config: BatchConfig, n_jets: int | None) -> int | None:
    """The most jets a chunk of the run holds: the chunk size, or the run's jets if fewer."""
    if n_jets is None:
        return config.chunk_size
    if config.chunk_size is None:
        return int(n_jets)
    return min(int(config.chunk_size), int(n_jets))


def warm_up_here(config: BatchConfig, opts: dict[str, dict[str, Any]],
                 names: Sequence[str] | None = None, *, n_workers: int = 1,
                 largest_jet: int | None = None, n_jets: int | None = None) -> None:
    """Compile (or load) the kernels of the algorithms, in this process, before the first timed
    jet: those the run will call (the chunk kernels only for chunks that take them, their
    parallel variant only for one worker and chunks that large).

    Args:
        config: the run's settings (size limits, chunk size).
        opts: per algorithm, the options it runs with (:func:`~jetastar.batch.config.options_for`).
        names: the algorithms to warm up (default: all of ``config``).
        n_workers: how many processes cluster at the same time.
        largest_jet: leaves of the run's largest jet, when known (see
            :func:`~jetastar.clustering.warmup.warm_up_sizes`).
        n_jets: jets the run clusters, when known: no chunk holds more (a file of 100 jets does
            not compile the parallel variant of a chunk kernel that takes 256 jets or more).
    """
    names = config.algorithms if names is None else names
    chunk_jets = _largest_chunk(config, n_jets)
    with compile_estimate_for(compile_estimate(names, chunk_jets=chunk_jets,
                                               largest_jet=largest_jet), names):
        warm_up(names, opts, {name: size_limit(name, config) for name in names},
                chunk_jets=chunk_jets, threads=n_workers == 1, largest_jet=largest_jet)


def _warm_task(config: BatchConfig, names: Sequence[str], n_workers: int,
               largest_jet: int | None) -> list[str]:
    """What a worker runs to warm up algorithms that share kernels (a top-level function, for
    pickling)."""
    load_registry(config.plugins)
    warm_up_here(config, {name: options_for(name, config, n_workers) for name in names}, names,
                 n_workers=n_workers, largest_jet=largest_jet)
    return list(names)


def warm_up_estimate(config: BatchConfig, n_workers: int, *,
                     largest_jet: int | None = None) -> contextlib.AbstractContextManager:
    """A block within which the compile notice carries the time that warming up ``config``'s
    algorithms on ``n_workers`` workers takes on a cold cache (an estimate given before is kept).
    (``largest_jet``: as in :func:`warm_up_workers`). Worker processes take it from the
    environment when they start, on a task's submission:
    submit the first tasks within the block. Afterwards this process's environment is as before
    (a later compilation, a ``Trellis`` after the run, is not announced with this run's estimate).
    """
    return compile_estimate_for(
        compile_estimate(config.algorithms, n_workers, chunk_jets=config.chunk_size,
                         largest_jet=largest_jet),
        config.algorithms)


def warm_up_workers(executor: cf.Executor, config: BatchConfig, n_workers: int, *,
                    largest_jet: int | None = None) -> list[cf.Future]:
    """Send one warm-up task per algorithm (per group of algorithms sharing their kernels) to the
    workers of ``executor`` (once per executor, configuration and set of warm-up jets) and return
    their futures.

    On a cold kernel cache the workers compile different algorithms at the same time, and each
    kernel once; afterwards every worker loads them from the cache.

    Args:
        executor: the workers' executor.
        config: the run's settings.
        n_workers: how many processes cluster at the same time.
        largest_jet: leaves of the run's largest jet, when known: kernels that only larger
            warm-up jets call are not compiled (:func:`~jetastar.clustering.warmup.warm_up_sizes`).
    """
    key = to_json({**config.fingerprint(), "plugins": list(config.plugins), "n": n_workers,
                   "jets": list(warm_up_sizes(largest_jet))})
    try:
        sent = _WARM_TASKS.setdefault(executor, {})
    except TypeError:  # an executor without weak references: warm up every time
        sent = {}
    if key not in sent:
        with warm_up_estimate(config, n_workers, largest_jet=largest_jet):
            sent[key] = [executor.submit(_warm_task, config, names, n_workers, largest_jet)
                         for names in warm_up_tasks(config.algorithms)]
    return sent[key]


def warm_up_for(config: BatchConfig, executor: cf.Executor | None, n_workers: int, *,
                largest_jet: int | None = None, n_jets: int | None = None) -> None:
    """Warm up this process (no executor) or the executor's workers, and wait for it; failures
    are left for the chunks to report (``largest_jet``: as in :func:`warm_up_workers`;
    ``n_jets``: as in :func:`warm_up_here`, for this process)."""
    if executor is None:
        load_registry(config.plugins)
        warm_up_here(config, {name: options_for(name, config, 1) for name in config.algorithms},
                     largest_jet=largest_jet, n_jets=n_jets)
        return
    for fut in warm_up_workers(executor, config, n_workers, largest_jet=largest_jet):
        try:
            fut.result()
        except Exception:  # the chunks report what fails
            pass
