"""Cleaning up what killed runs leave behind: temporary files and folders named with a process id.

A run killed with ``kill -9`` (or by the out-of-memory killer, or a power cut) cannot remove its
temporary files. Every temporary name jetastar makes carries the id of the process that made it, so
the next run removes those whose process is gone — and leaves alone those of a process still
running (another run writing into the same folder at the same time).

Example:
    >>> import os
    >>> pid_alive(os.getpid())
    True
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from pathlib import Path

__all__ = ["NOTICE_PREFIX", "notice_folder", "pid_alive", "pid_in_name",
           "remove_dead_notice_folders"]

#: Prefix of the token folders of :func:`jetastar._jit.one_notice_for_workers`.
NOTICE_PREFIX = "jetastar-notice-"
_NOTICE = re.compile(re.escape(NOTICE_PREFIX) + r"(\d+)-")


def pid_alive(pid: int) -> bool:
    """Whether a process with this id exists on this machine (``True`` when it cannot be told)."""
    if pid <= 0:
        return False
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError, ValueError, OverflowError):
        return True  # exists (owned by someone else) or cannot tell: keep
    return True


def pid_in_name(name: str) -> int | None:
    """The process id in a temporary name ``.<file>.<pid>.<token>.tmp`` (None if there is none)."""
    parts = name.split(".")
    if len(parts) >= 4 and parts[-1] == "tmp" and parts[-3].isdigit():
        return int(parts[-3])
    return None


def notice_folder() -> str:
    """A new token folder in the temporary directory named with this process's id (older ones
    of dead processes are removed first)."""
    remove_dead_notice_folders()
    return tempfile.mkdtemp(prefix=f"{NOTICE_PREFIX}{os.getpid()}-")


def remove_dead_notice_folders(directory: str | os.PathLike[str] | None = None) -> int:
    """Remove token folders of processes that no longer run; return how many were removed."""
    removed = 0
    folder = Path(directory if directory is not None else tempfile.gettempdir())
    with contextlib.suppress(OSError):
        for p in folder.iterdir():
            m = _NOTICE.match(p.name)
            if m and p.is_dir() and not pid_alive(int(m.group(1))):
                shutil.rmtree(p, ignore_errors=True)
                removed += not p.exists()
    return removed
