"""One writer per output file: an advisory lock held while a run computes and writes an output.

Two runs started on the same output (the same command typed twice, two jobs of a batch system)
would do the same work twice and race on its part files. The second one instead stops at once with
a one-line error naming the process that holds the lock. The lock is an ``flock`` on a small file
``.<output>.lock`` next to the output: the operating system releases it when its process ends, even
by ``kill -9``, so a killed run never leaves a stale lock behind (the file itself is removed by the
next run that takes the lock and finishes).

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> out = Path(tempfile.mkdtemp()) / "r.h5"
    >>> lock = OutputLock.acquire(out)
    >>> lock.release()
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from .errors import OutputLockedError

__all__ = ["OutputLock", "OutputLockedError"]


class OutputLock:
    """The lock of one output file (see the module docstring)."""

    def __init__(self, path: Path, fd: int | None) -> None:
        self.path = path
        self._fd = fd

    @staticmethod
    def lock_path(output: str | os.PathLike[str]) -> Path:
        """``<folder>/.<output name>.lock``."""
        out = Path(output)
        return out.with_name(f".{out.name}.lock")

    @classmethod
    def acquire(cls, output: str | os.PathLike[str]) -> OutputLock:
        """Take the lock of ``output`` without waiting.

        Raises:
            OutputLockedError: another process holds it.
        """
        path = cls.lock_path(output)
        try:
            import fcntl
        except ImportError:  # no flock (Windows): no protection
            return cls(path, None)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            try:
                holder = os.read(fd, 32).decode("ascii", "replace").strip() or "?"
            finally:
                os.close(fd)
            raise OutputLockedError(
                f"{output}: another jetastar run (process {holder}) is writing this output; "
                "wait until it has finished (it resumes where it stopped if it was interrupted)"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        return cls(path, fd)

    def release(self) -> None:
        """Remove the lock file and let go of the lock."""
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            self.path.unlink()
        os.close(self._fd)  # closing the descriptor releases the flock
        self._fd = None
