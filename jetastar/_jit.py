"""numba housekeeping: where compiled kernels are cached, saying when they compile, and run times
that leave compilation out.

Rules for every numba kernel in jetastar (read before adding one):

1. Decorate with ``@nb.njit(cache=True)``; a helper that only other CPU kernels call (never Python,
   never a GPU kernel) with :func:`kernel_helper` instead, which compiles it without the wrappers
   that make it callable from Python (``tests/test_jit.py`` checks every use). ``inline="always"``
   only on a helper called in a hot loop that LLVM does not inline by itself (today the split scores
   ``split_llh_given_parent`` / ``split_bound_given_parent``, the trellis's ``_split_score`` and the
   agglomerative ``pair_llh``, without which beam search is 13 % slower; measure before adding one):
   numba inlines by compiling the helper's bytecode again at every call site, nested helpers
   included, and such copies were most of the compile time of the kernels calling them (each inlined
   copy of ψ, ``split_llh_given_parent``, cost its kernel ~2 CPU-s before numba's flag comparison
   was made fast, :mod:`jetastar._numba_flags`; since, a copy of ``pair_llh`` costs a toy kernel
   ~0.1 CPU-s, late 2026-12-07). Measured 2026-12-07: removing
   every ``inline="always"`` saved only ~5 % of a first run's compile time and made the exact MAP
   ~15 % slower, not inlining ψ alone made greedy's chunk kernel ~60 % slower; calling ψ and its
   bound through non-inlined twins in the exact MAP's warm start (at most three splits per cluster)
   saved 4 of its 11 compile seconds and cost 10-25 % of its run time at 16 leaves. A plain call to
   a *small* helper usually costs no run time (the callee's module is linked into the caller before
   LLVM optimises it, and LLVM inlines it); a larger callee may stay a call, so time the hot loops
   after changing one. An *array* argument is another matter: numba takes and releases a reference
   to it around every such call with atomic instructions that LLVM keeps even after inlining (a
   third of the exact MAP engine's time on small jets, half of MCTS's). A kernel that calls helpers
   per item (cluster, split, merge) hands them views from :func:`jetastar._refcount.borrowed`, made
   once at its top (rules for their lifetime there). A kernel re-optimises everything it calls, so
   keep kernels that are called from many places small. In kernels, copy arrays with loops, not
   slice assignments (``a[:n] = b``): each one compiles a generic broadcasting copy with its own
   error path (string formatting included, about 2 s). Sort with ``jetastar._sorting``
   (``sort_inplace``, ``argsort_stable``), not ``a.sort()`` / ``np.sort`` / ``np.argsort``: numba's
   sorts are not cached on their own and cost a process that compiles a kernel using them 1–2 s per
   type and kind. ``parallel=True`` only on a kernel whose work is a ``prange`` over independent
   items, and a serial twin only where the parallel launch is measurably slower (say so in its
   docstring). No explicit signatures (they compile eagerly at import), no ``nb.jit`` object mode,
   no closures or generated functions (they cannot be cached).
2. One specialisation per kernel: call it with the same argument types everywhere — arrays
   float64 / int64 (int32 only where memory matters, and then always int32), C-contiguous (pass
   ``np.ascontiguousarray``, never a strided view), integers as Python ``int`` / ``np.int64``,
   flags as ``bool``. A second type compiles the whole kernel (and its callees) again. Inside
   kernels, a constant passed to another kernel, or an integer variable that starts as one, is
   written ``np.int64(1)`` / ``np.bool_(True)``, not ``1`` / ``True``: numba types the constant as
   a literal and compiles the callee once more (for ``Literal[int](1)`` besides ``int64``).
   ``python tests/benchmarks/bench_compile.py`` lists every kernel a ``jetastar run`` compiles, its
   number of specialisations and its compile time: check it after adding or changing a kernel.
3. Import kernel modules only where they are used (a command compiles and loads only what it runs);
   no kernel is called at import time.
4. Timings never include compilation: time a call with :class:`Stopwatch` (``time_s`` = wall time
   minus the time this thread spent in numba's compiler, including loading from the cache).
5. No integer arithmetic that can overflow int64 in a kernel (e.g. the classic popcount's multiply):
   LLVM may assume signed arithmetic never overflows and fold later comparisons wrongly.
6. When editing a kernel that others inline or call from *another* file, clear the on-disk cache
   (``find jetastar -name '*.nb[ic]' -delete``): numba invalidates a cached kernel only when its own
   file changes, so callers elsewhere keep the old machine code (fresh installs and CI are not
   affected).

Cache: compiled kernels are cached on disk (numba's ``cache=True``) next to the sources
(``__pycache__``); a read-only installation falls back to numba's user-wide cache
(``~/.cache/numba``) and, when that is not writable either, to a folder in the temporary directory
(``$TMPDIR/jetastar-numba-cache-<user>``, used only while it is this user's own and writable by
nobody else: numba unpickles what it finds there; otherwise a new private folder for the run, removed
at exit); ``NUMBA_CACHE_DIR`` overrides all of these. Worker
processes (process pools, Dask workers on the same machine) inherit the setting and load the kernels
from the cache instead of compiling them again; a kernel that another process is compiling is
waited for, not compiled twice (:mod:`jetastar._compile_lock`). numba's compiler flags compare
faster (:mod:`jetastar._numba_flags`: ~12 % less compile time, the same machine code), numba's
inliner copies a function's scope once per inlining (:mod:`jetastar._numba_inline`: the same LLVM
IR), and Python's garbage collector pauses while a jetastar kernel compiles
(:class:`_CollectorPause`: ~9 % less).

Example:
    >>> from jetastar._jit import Stopwatch
    >>> watch = Stopwatch()
    >>> watch.seconds() >= 0.0
    True
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import gc
import getpass
import os
import shutil
import signal
import stat
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

# Idle OpenMP threads sleep instead of spinning (numba's default threading layer on Linux is
# OpenMP, which reads this when its library loads, i.e. at jetastar's first parallel kernel): on
# a shared node spinning threads burn CPU other jobs want. A value the user set is kept.
# See jetastar/clustering/threads.py for the thread policy as a whole.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def _check_thread_setting() -> None:
    """Refuse ``NUMBA_NUM_THREADS`` of 0 or less in one line (numba's own error is a traceback
    through its thread pool's start-up); other values are numba's to read."""
    value = os.environ.get("NUMBA_NUM_THREADS", "").strip()
    if value.lstrip("+-").isdigit() and int(value) < 1:
        raise ValueError(
            f"NUMBA_NUM_THREADS={value}: the number of threads jetastar's kernels may use must be "
            "1 or more (unset it to use every core)"
        )


_check_thread_setting()

import numba as _numba  # noqa: E402 (after the check above)
from numba.core import config as _numba_config  # noqa: E402
from numba.core import event as _event  # noqa: E402

from . import _compile_lock, _numba_flags, _numba_inline  # noqa: E402
from ._leftovers import notice_folder  # noqa: E402

__all__ = [
    "COMPILE_NOTICE",
    "DeferredSignals",
    "Stopwatch",
    "cache_dir",
    "compile_estimate_for",
    "compile_seconds",
    "expect_compile",
    "kernel_helper",
    "notice_text",
    "one_notice_for_workers",
    "skip_last_collection",
    "skip_numba_extensions",
]

#: what is printed (once per run, on stderr) when jetastar kernels are about to be compiled.
COMPILE_NOTICE = "jetastar: compiling numba kernels, first run only (cached for later runs)"
#: set in the environment once the notice was shown, so that worker processes stay quiet.
_NOTICE_ENV = "_JETASTAR_COMPILE_NOTICE_SHOWN"
#: a file that the first process of a run to compile creates (see :func:`one_notice_for_workers`).
_TOKEN_ENV = "_JETASTAR_COMPILE_NOTICE_TOKEN"
#: roughly how many seconds the compilation of this run takes (see :func:`expect_compile`).
_ESTIMATE_ENV = "_JETASTAR_COMPILE_ESTIMATE"
#: whose kernels this run compiles, comma separated (see :func:`expect_compile`).
_WHAT_ENV = "_JETASTAR_COMPILE_WHAT"
#: the switch of the garbage collector's pause during compilations (:class:`_CollectorPause`)
_GC_PAUSE_ENV = "JETASTAR_GC_PAUSE"

_local = threading.local()
_numba_ready = False
_notice_lock = threading.Lock()


# ---------------------------------------------------------------------- compile time per thread
class _CompilerClock(_event.Listener):
    """Accumulates, per thread, the wall time spent holding numba's compiler lock (compiling a
    kernel, or loading it from the cache); nested acquisitions count once."""

    def on_start(self, ev: _event.Event) -> None:
        depth = getattr(_local, "depth", 0)
        if depth == 0:
            _local.started = time.perf_counter()
        _local.depth = depth + 1

    def on_end(self, ev: _event.Event) -> None:
        depth = getattr(_local, "depth", 0) - 1
        if depth < 0:  # started before the listener was registered
            return
        _local.depth = depth
        if depth == 0:
            _local.total = getattr(_local, "total", 0.0) + time.perf_counter() - _local.started


def _dispatcher_of(ev: _event.Event) -> Any:
    """The dispatcher whose compilation a ``numba:compile`` event announces (``None`` if none)."""
    return ev.data.get("dispatcher") if isinstance(ev.data, dict) else None


class _CollectorPause(_event.Listener):
    """Pauses Python's cyclic garbage collector while numba compiles a jetastar kernel.

    numba's compiler allocates millions of objects, and keeps many: every 25 % that the oldest
    generation grows by triggers a full collection over all of them (the package's imports and
    every kernel compiled so far), ~0.25 s each, a dozen per worker of a first ``jetastar run``.
    The collector is off from the start of the outermost compilation (a cache miss; its callees
    compile inside it) to its end, then back on, and the next collection takes what the
    compilation left as garbage. Only where this listener turned it off: a collector the program
    switched off itself stays off. ``numba:compile`` events come under numba's compiler lock, one
    thread at a time. ``JETASTAR_GC_PAUSE=0`` switches it off.
    """

    def __init__(self) -> None:
        self._depth = 0
        self._paused = False

    def on_start(self, ev: _event.Event) -> None:
        if (self._depth == 0 and gc.isenabled() and _compile_lock.switched_on(_GC_PAUSE_ENV)
                and _compile_lock.jetastar_kernel(_dispatcher_of(ev))):
            gc.disable()
            self._paused = True
        self._depth += 1

    def on_end(self, ev: _event.Event) -> None:
        self._depth = max(self._depth - 1, 0)
        if self._depth == 0 and self._paused:
            self._paused = False
            gc.enable()


class _CompileNotice(_event.Listener):
    """Prints :data:`COMPILE_NOTICE` before the first jetastar kernel compiles (cache miss): once
    per process, or once per group of processes sharing a token (:func:`one_notice_for_workers`)."""

    def on_start(self, ev: _event.Event) -> None:
        if os.environ.get(_NOTICE_ENV):
            return
        if not _compile_lock.jetastar_kernel(_dispatcher_of(ev)):
            return
        with _notice_lock:
            if os.environ.get(_NOTICE_ENV):
                return
            os.environ[_NOTICE_ENV] = "1"
            token = os.environ.get(_TOKEN_ENV)
            if token:
                try:
                    os.close(os.open(token, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
                except FileExistsError:  # another process of this run said it already
                    return
                except OSError:
                    pass
        try:
            print(notice_text(), file=sys.stderr, flush=True)
        except (OSError, ValueError):  # no usable stderr (closed, pythonw)
            pass

    def on_end(self, ev: _event.Event) -> None:
        pass


def expect_compile(seconds: float | None, keep: bool = False, *,
                   what: Sequence[str] = ()) -> None:
    """Say how long a compilation about to start takes, roughly, and whose kernels it compiles
    (shown in the compile notice of this process and of worker processes started afterwards);
    ``None`` forgets both, and ``keep`` leaves an estimate already given (e.g. by the master of a
    worker process) alone.

    Args:
        seconds: the estimate (``None``: forget).
        keep: leave an estimate given before alone.
        what: the algorithms whose kernels compile (named in the notice).

    Example:
        >>> expect_compile(12.0, what=["greedy"]); "of greedy; this takes roughly" in notice_text()
        True
        >>> expect_compile(None)
    """
    if seconds is None:
        os.environ.pop(_ESTIMATE_ENV, None)
        os.environ.pop(_WHAT_ENV, None)
    elif keep and os.environ.get(_ESTIMATE_ENV):
        return
    else:
        os.environ[_ESTIMATE_ENV] = f"{float(seconds):.1f}"
        if what:
            os.environ[_WHAT_ENV] = ", ".join(what)
        else:
            os.environ.pop(_WHAT_ENV, None)


def notice_text() -> str:
    """:data:`COMPILE_NOTICE`, with the expected duration when one was given
    (:func:`expect_compile`)."""
    what = os.environ.get(_WHAT_ENV)
    notice = f"{COMPILE_NOTICE}: those of {what}" if what else COMPILE_NOTICE
    try:
        seconds = float(os.environ.get(_ESTIMATE_ENV, ""))
    except ValueError:
        return notice
    if not seconds > 0:
        return notice
    # compiling runs on one thread: on a machine whose cores are busy with other processes it
    # gets a share of one (the estimates were measured on a quiet one)
    busy = _busy_factor()
    seconds *= busy
    # a range: compile times vary by a factor ~1.5 between machines
    low = max(5, 5 * round(seconds / 5))
    text = f"{notice}; this takes roughly {low}-{int(low * 1.5 + 0.5)} s"
    if busy > 1.2:
        text += f" (other processes keep the CPUs busy: {busy:.1f}x the time on a quiet machine)"
    return text


def _busy_factor() -> float:
    """How much longer a single-threaded job takes now than on a quiet machine, from the load
    average of the last minute: ``(load + 1) / cores`` when every core is taken (1 otherwise, and
    where the load is unknown)."""
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):  # (not on every platform)
        return 1.0
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
        os.cpu_count() or 1)
    return max(1.0, (load + 1.0) / max(cores, 1))


@contextlib.contextmanager
def compile_estimate_for(seconds: float | None, what: Sequence[str] = ()) -> Iterator[None]:
    """:func:`expect_compile` for the block only: a compilation that starts later, for other
    kernels (a ``Trellis`` after a run of other algorithms), is not announced with this run's
    estimate. An estimate already given (by a parent process) is kept."""
    given = os.environ.get(_ESTIMATE_ENV)
    if not given:
        expect_compile(seconds, what=what)
    try:
        yield
    finally:
        if not given:
            expect_compile(None)


@contextlib.contextmanager
def one_notice_for_workers() -> Iterator[None]:
    """Within the block, this process and the worker processes it starts print
    :data:`COMPILE_NOTICE` once between them (a token file in the temporary directory)."""
    if os.environ.get(_NOTICE_ENV) or os.environ.get(_TOKEN_ENV):
        yield
        return
    folder = notice_folder()  # named with this process's id; those of killed runs are removed
    os.environ[_TOKEN_ENV] = os.path.join(folder, "shown")
    try:
        yield
    finally:
        os.environ.pop(_TOKEN_ENV, None)
        os.environ.pop(_ESTIMATE_ENV, None)
        shutil.rmtree(folder, ignore_errors=True)


def _timed_compile_for_args(original: Any) -> Any:
    """Wrap a method of numba's dispatcher that prepares a kernel for new argument types (typing
    the arguments, compiling or loading from the cache) so that its time counts as compile time;
    nested calls (and the compiler-lock clock) are counted once."""

    @functools.wraps(original)
    def wrapper(self: Any, *args: Any, **kws: Any) -> Any:
        depth = getattr(_local, "depth", 0)
        if depth == 0:
            _local.started = time.perf_counter()
        _local.depth = depth + 1
        try:
            return original(self, *args, **kws)
        finally:
            _local.depth -= 1
            if _local.depth == 0:
                _local.total = getattr(_local, "total", 0.0) + time.perf_counter() - _local.started

    wrapper._jetastar_clock = True  # type: ignore[attr-defined]
    return wrapper


def _install_clocks() -> None:
    _event.register("numba:compiler_lock", _CompilerClock())
    _event.register("numba:compile", _CompileNotice())
    _event.register("numba:compile", _CollectorPause())
    try:
        from numba.core.dispatcher import _DispatcherBase
    except ImportError:  # another numba layout: the compiler-lock clock still counts compiling
        return
    # _compile_for_args: no compiled version for these argument types yet; typeof_pyval: an
    # argument type the dispatcher has not seen yet (later calls take its fast path)
    for name in ("_compile_for_args", "typeof_pyval"):
        original = _DispatcherBase.__dict__.get(name)
        if original is not None and not getattr(original, "_jetastar_clock", False):
            setattr(_DispatcherBase, name, _timed_compile_for_args(original))


def compile_seconds() -> float:
    """Seconds this thread has spent getting numba kernels ready so far: typing their arguments at
    a first call, compiling them or loading them from the cache."""
    total = getattr(_local, "total", 0.0)
    if getattr(_local, "depth", 0) > 0:
        total += time.perf_counter() - _local.started
    return total


def _numba_setup() -> None:
    """numba's one-time setup of a process, which it otherwise does at the first kernel call,
    outside its compiler lock: loading other packages' numba extensions (awkward, vector)."""
    global _numba_ready
    if not _numba_ready:
        from numba.core import entrypoints

        entrypoints.init_all()
        _numba_ready = True


def skip_numba_extensions() -> None:
    """Do not load other packages' numba extensions (awkward, vector) in this process.

    jetastar's kernels do not use them, and loading them costs seconds in every process. Only for
    processes that run nothing but jetastar: the command line (without ``--plugin``) and the
    worker processes it starts. awkward still registers itself when an awkward array reaches a
    kernel; code that passes ``vector`` objects to numba there calls ``vector.register_numba()``.
    """
    from numba.core import entrypoints

    if hasattr(entrypoints, "_already_initialized"):
        entrypoints._already_initialized = True


def _no_python_entry(*args: Any, **kws: Any) -> None:
    """A helper's compiled versions stay out of numba's table of Python entry points."""


def _python_call_refused(dispatcher: Any) -> Any:
    def refuse(*args: Any, **kws: Any) -> Any:
        raise TypeError(
            f"{dispatcher.py_func.__module__}.{dispatcher.py_func.__qualname__} is a helper of "
            "jetastar's numba kernels (jetastar._jit.kernel_helper): only numba code can call it"
        )

    return refuse


def kernel_helper(func: Any) -> Any:
    """``@nb.njit(cache=True)`` for a function that only other numba kernels call.

    It is compiled without the two wrappers that let Python call a kernel (numba's
    ``no_cpython_wrapper`` and ``no_cfunc_wrapper``): every kernel's compilation builds them,
    and every kernel that calls the function links them in and optimises them again, ~0.1–0.4
    CPU-s per helper (14 of them compiled alone: 7.1 CPU-s instead of 9.0; the kernels of a first
    ``jetastar run`` in one process: ~2.8 of ~52 CPU-s less, the mean of four alternated runs
    whose noise was ±5; 2026-12-07). A call from Python raises ``TypeError`` (numba
    itself would crash: it has no entry point to call). Not for functions that GPU kernels call
    (numba's CUDA target compiles those from the CPU kernel's settings).

    Example:
        >>> import numpy as np
        >>> from jetastar.ginkgo.generator import _splitmix  # (decorated @kernel_helper)
        >>> _splitmix(np.uint64(1))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        TypeError: jetastar.ginkgo.generator._splitmix is a helper of jetastar's numba kernels ...
    """
    dispatcher = _numba.njit(cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)(func)
    if not _numba_config.DISABLE_JIT:  # (then njit returns the Python function itself)
        # numba calls these two by attribute: Python calls never reach the missing entry point
        dispatcher._insert = _no_python_entry
        dispatcher._compile_for_args = _python_call_refused(dispatcher)
    return dispatcher


def skip_last_collection() -> None:
    """Leave out the garbage collection at the end of this process (``gc.freeze`` at exit).

    Once kernels are compiled or loaded, the numba compiler's objects make the interpreter's last
    collection take ~0.5 s: the command line pays it once, and its pool waits for each worker's.
    Only for processes that end with their work: the command line (not :func:`jetastar.cli.main`
    called from Python) and the worker processes it starts. Files are closed by the code that
    opened them, so nothing waits for that collection.
    """
    atexit.register(gc.freeze)


class Stopwatch:
    """Wall time since creation, without the time spent compiling (or loading) numba kernels.

    numba's one-time setup of the process (see :func:`_numba_setup`) is done before the clock
    starts.

    Attributes:
        start: ``time.perf_counter()`` at creation.
    """

    def __init__(self) -> None:
        _numba_setup()
        self._compile0 = compile_seconds()
        self.start = time.perf_counter()

    def compile_seconds(self) -> float:
        """Seconds spent in numba's compiler (this thread) since creation."""
        return compile_seconds() - self._compile0

    def seconds(self) -> float:
        """Run time: wall time since creation minus :meth:`compile_seconds` (never negative)."""
        return max(0.0, time.perf_counter() - self.start - self.compile_seconds())


# ---------------------------------------------------------------------- signals around kernels
_NUMBA_DIR = os.sep + "numba" + os.sep


def _in_numba(frame: Any) -> bool:
    """Whether ``frame`` (or one of its three callers) runs numba's own Python code."""
    for _ in range(4):
        if frame is None:
            return False
        if _NUMBA_DIR in frame.f_code.co_filename:
            return True
        frame = frame.f_back
    return False


class DeferredSignals:
    """Within the block, Ctrl-C (SIGINT) and SIGTERM are only noted; :meth:`deliver` (between two
    kernel calls) and the end of the block run the handlers they would have run.

    A compiled kernel does not see a signal: Python runs its handler at the next Python code. When
    that is numba boxing a kernel's result (which calls Python code), the handler's
    ``KeyboardInterrupt`` is raised inside the call and comes out as a ``SystemError`` ("returned a
    result with an exception set"), which callers that record errors per jet would take for a
    failure of the algorithm. Code that runs a kernel in slices (beam search) holds its signals
    with this, so that an interrupt reaches Python whole, between slices. Outside the main thread
    (where Python runs no handlers) it does nothing.

    With ``only_in_numba=True`` a signal whose handler runs in Python code of the caller is handled
    at once, as without the block; only one that lands inside numba's own Python code (the
    boxing of a result) is held until :meth:`deliver` or the end of the block. The registry's
    :func:`~jetastar.clustering.cluster` runs every algorithm so.

    Args:
        only_in_numba: hold only the signals that land inside numba.

    Example:
        >>> with DeferredSignals() as held:
        ...     held.deliver()  # no signal came: nothing happens
    """

    _SIGNALS = tuple(s for s in (getattr(signal, "SIGINT", None), getattr(signal, "SIGTERM", None))
                     if s is not None)

    def __init__(self, only_in_numba: bool = False) -> None:
        self._saved: dict[int, Any] = {}
        self._caught: list[tuple[int, Any]] = []
        self._only_in_numba = only_in_numba

    def __enter__(self) -> DeferredSignals:
        if threading.current_thread() is not threading.main_thread():
            return self
        for sig in self._SIGNALS:
            handler = signal.getsignal(sig)
            if handler is None or handler == signal.SIG_IGN:  # set outside Python, or ignored
                continue
            self._saved[sig] = handler
            signal.signal(sig, self._note)
        return self

    def _note(self, signum: int, frame: Any) -> None:
        self._caught.append((signum, frame))
        if self._only_in_numba and not _in_numba(frame):
            self._restore()  # Python code of the caller: the handler runs now

    def _restore(self) -> None:
        saved, self._saved = self._saved, {}
        for sig, handler in saved.items():
            signal.signal(sig, handler)
        caught, self._caught = self._caught, []
        for signum, _ in caught[:1]:
            handler = saved[signum]
            if callable(handler):
                # delivered from here, plain Python code (not where the signal landed, which an
                # enclosing block of only_in_numba would hold again)
                handler(signum, sys._getframe())
            else:  # SIG_DFL: what the signal does without a handler
                signal.raise_signal(signum)

    def deliver(self) -> None:
        """Run the handler of a signal noted so far, if any (it usually raises
        ``KeyboardInterrupt``); the handlers are then those of before the block."""
        if self._caught:
            self._restore()

    def __exit__(self, *exc: Any) -> None:
        self._restore()


# ---------------------------------------------------------------------- the on-disk cache
def _writable(path: str) -> bool:
    try:
        os.makedirs(path, exist_ok=True)
        tempfile.TemporaryFile(dir=path).close()
    except OSError:
        return False
    return True


def _user_cache_dir() -> str:
    from numba.misc.appdirs import AppDirs

    return str(AppDirs(appname="numba", appauthor=False).user_cache_dir)


def _fallback_cache_dir() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (containers)
        user = str(os.getuid()) if hasattr(os, "getuid") else "user"
    return os.path.join(tempfile.gettempdir(), f"jetastar-numba-cache-{user}")


def _private_problem(path: str) -> str:
    """Why the folder ``path`` (created here, mode 0700, when missing) is not safe to load
    compiled kernels from, or ``""``. numba unpickles its cache index files: in a folder that
    another user can write to (the temporary directory is everybody's), a planted file would run
    as this user. So the folder must be a real directory, this user's and writable by nobody
    else."""
    if not hasattr(os, "getuid"):  # (no owners to check)
        return ""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        return f"cannot be created ({exc.strerror})"
    try:
        st = os.lstat(path)
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    if not stat.S_ISDIR(st.st_mode):
        return "is not a folder"
    if st.st_uid != os.getuid():
        return "belongs to another user"
    if st.st_mode & 0o022:
        return "can be written by other users"
    return ""


def _private_temporary_cache() -> str:
    """A new private folder for this run's kernels (compiled again by the next run), removed at
    exit by the process that made it; worker processes inherit it through NUMBA_CACHE_DIR."""
    try:
        path = tempfile.mkdtemp(prefix="jetastar-numba-cache-")
    except OSError as exc:
        raise RuntimeError(
            "jetastar: no writable folder for numba's compiled kernels (the installation, "
            f"{_user_cache_dir()} and the temporary directory {tempfile.gettempdir()!r}: "
            f"{exc.strerror}); set NUMBA_CACHE_DIR to a folder of your own"
        ) from None
    owner = os.getpid()

    def _remove() -> None:
        if os.getpid() == owner:
            shutil.rmtree(path, ignore_errors=True)

    atexit.register(_remove)
    return path


def cache_dir() -> str:
    """Where the compiled kernels of this installation are cached (see the module docstring)."""
    if _numba_config.CACHE_DIR:
        return str(_numba_config.CACHE_DIR)
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "__pycache__")
    if _writable(here):
        return here
    return _user_cache_dir()


def _ensure_cache_dir() -> None:
    """Give numba a writable cache folder when neither the installation nor the user cache is.

    Without one, numba raises at import time (``cannot cache function ...: no locator
    available``). The choice goes into ``NUMBA_CACHE_DIR`` so that worker processes use it too.
    """
    asked = str(_numba_config.CACHE_DIR or "")
    if asked and _writable(asked):
        return
    if asked:
        # numba would look for another folder without a word: every node of a cluster whose
        # shared cache path is mistyped or read-only would compile again, unnoticed
        _numba_config.CACHE_DIR = ""
        os.environ.pop("NUMBA_CACHE_DIR", None)
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "__pycache__")
    chosen = here if _writable(here) else _user_cache_dir()
    if not _writable(chosen):
        chosen = _fallback_cache_dir()
        problem = _private_problem(chosen)
        if not problem and not _writable(chosen):
            problem = "is not writable"
        if problem:
            shared = chosen
            chosen = _private_temporary_cache()
            print(f"jetastar: the kernel cache folder {shared} {problem}; this run compiles its "
                  f"kernels into {chosen} (removed at exit; set NUMBA_CACHE_DIR to a folder of "
                  "your own to keep them)", file=sys.stderr)
        _numba_config.CACHE_DIR = chosen
        os.environ["NUMBA_CACHE_DIR"] = chosen
    if asked:
        print(f"jetastar: NUMBA_CACHE_DIR={asked} is not writable; compiled kernels are cached in "
              f"{chosen} instead", file=sys.stderr)


_ensure_cache_dir()
_install_clocks()
_compile_lock.install()
_numba_flags.install()
_numba_inline.install()
