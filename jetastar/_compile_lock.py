"""One compiler per kernel across processes: a worker that needs a kernel another process is
compiling waits for it and loads it from the cache instead of compiling it a second time.

numba caches a compiled kernel on disk only once its compilation has finished. Two processes that
start on the same kernel at the same time (the workers of a batch run warming up different
algorithms that call the same likelihood, tree canonicalisation or array helpers; the test suite's
workers on a fresh clone) both compile it, and the second copy is wasted work on a core the other
algorithms needed: ~6 of the ~63 CPU-s of a cold ``jetastar cluster`` run with two workers
(measured 2026-12-07). Here ``Dispatcher.compile`` (numba's "compile or load this kernel for these
argument types") of every jetastar kernel cached on disk runs under an advisory lock (``flock``)
on a file ``<kernel's cache file name>.lock`` in the kernel's cache folder: the first process to
get there compiles and saves the kernel; the others wait, then find it in the cache.

Why it cannot deadlock: a process holds the locks of a chain of kernels, each called by the one
before (compiling a kernel compiles its callees first). If process A waited for B and B for A,
a kernel of A's chain would call one of B's and the other way round: a cycle of calls, which
numba does not compile. Within a process the locks are taken inside numba's compiler lock (one
thread at a time compiles), and one held already is not taken again (a kernel compiled for a
second argument type while its first compiles). The operating system releases the locks of a
process that dies, however it dies. Still, nobody waits longer than :data:`WAIT_LIMIT_S` for one
kernel; where ``flock`` is missing (Windows) or fails (some network file systems), or the cache
folder is not writable, kernels compile without the lock, as numba does by itself.
``JETASTAR_COMPILE_LOCK=0`` switches it off.

Example:
    >>> from jetastar._compile_lock import kernel_lock
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "k.lock")
    >>> with kernel_lock(path):
    ...     with kernel_lock(path):  # held by this process already: not taken again
    ...         pass
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import time
from collections.abc import Iterator
from typing import Any

__all__ = ["WAIT_LIMIT_S", "install", "jetastar_kernel", "kernel_lock", "lock_path", "switched_on"]

#: the longest a process waits for another one's compilation of one kernel before compiling it
#: itself (the largest kernel chain compiles in ~15 CPU-s; a busy node takes a few times that)
WAIT_LIMIT_S = 300.0
#: how often a waiting process looks again (seconds)
_POLL_S = 0.02
#: the environment switch (``0`` / ``off`` / ``no`` / ``false``: no lock)
_SWITCH_ENV = "JETASTAR_COMPILE_LOCK"

#: lock files this process holds, with their nesting depth (changed under numba's compiler lock)
_held: dict[str, int] = {}


def switched_on(name: str) -> bool:
    """Whether the environment switch ``name`` of one of jetastar's numba patches is on: it is,
    unless set to ``0``, ``off``, ``no`` or ``false``."""
    return os.environ.get(name, "1").strip().lower() not in ("0", "off", "no", "false")


def jetastar_kernel(dispatcher: Any) -> bool:
    """Whether a numba dispatcher compiles a function of the jetastar package."""
    module = getattr(getattr(dispatcher, "py_func", None), "__module__", "") or ""
    return module == "jetastar" or module.startswith("jetastar.")


@contextlib.contextmanager
def kernel_lock(path: str, wait_limit_s: float = WAIT_LIMIT_S) -> Iterator[bool]:
    """Hold the lock file ``path`` (creating it) while the block runs; wait while another process
    holds it, for at most ``wait_limit_s`` seconds.

    Yields:
        Whether the block runs under the lock (``False``: no ``flock`` here, the file could not be
        created, the wait limit passed, or the switch is off; the block runs anyway).
    """
    if path in _held:  # this process holds it already (numba's compiler lock serialises threads)
        _held[path] += 1
        try:
            yield True
        finally:
            _held[path] -= 1
        return
    try:
        import fcntl
    except ImportError:  # no flock (Windows)
        yield False
        return
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:  # a cache folder this process cannot write to
        yield False
        return
    locked = False
    try:
        deadline = time.monotonic() + wait_limit_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                locked = True
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                    break  # flock not supported on this file system: no lock
                if time.monotonic() >= deadline:
                    break
                time.sleep(_POLL_S)
        if locked:
            _held[path] = 1
        try:
            yield locked
        finally:
            if locked:
                del _held[path]
    finally:
        os.close(fd)  # (releases the flock)


def lock_path(dispatcher: Any) -> str | None:
    """The lock file of a numba dispatcher's kernel (next to its cache index), or ``None`` when it
    gets no lock: not a jetastar kernel, not cached on disk, or the switch is off."""
    if not switched_on(_SWITCH_ENV) or not jetastar_kernel(dispatcher):
        return None
    cache = getattr(dispatcher, "_cache", None)
    folder = getattr(cache, "_cache_path", None)
    base = getattr(getattr(cache, "_impl", None), "filename_base", None)
    if not folder or not base:  # numba's NullCache (no cache=True), or another numba layout
        return None
    return os.path.join(folder, f"{base}.lock")


def _locked_compile(original: Any) -> Any:
    """Wrap ``Dispatcher.compile`` so that it runs under the kernel's lock (module docstring)."""

    from numba.core import sigutils
    from numba.core.compiler_lock import global_compiler_lock

    @functools.wraps(original)
    def compile(self: Any, sig: Any) -> Any:
        path = lock_path(self)
        if path is None or tuple(sigutils.normalize_signature(sig)[0]) in self.overloads:
            return original(self, sig)  # (compiled or loaded already: nothing to wait for)
        # inside numba's compiler lock (which the original takes too, re-entrant): one thread of
        # this process at a time holds kernel locks, so threads cannot wait for each other
        with global_compiler_lock, kernel_lock(path):
            return original(self, sig)

    compile._jetastar_lock = True  # type: ignore[attr-defined]
    return compile


def install() -> None:
    """Put numba's ``Dispatcher.compile`` under the kernels' locks (once per process)."""
    try:
        from numba.core.dispatcher import Dispatcher
    except ImportError:  # another numba layout: kernels compile as numba does by itself
        return
    original = Dispatcher.__dict__.get("compile")
    if original is not None and not getattr(original, "_jetastar_lock", False):
        Dispatcher.compile = _locked_compile(original)
