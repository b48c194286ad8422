"""Atomic file writes: write to a temporary file next to the target, fsync, then rename.

A crash (or ``kill -9``) at any moment leaves either the old file or the complete new file under the
final name, never a half-written one. Left-over temporary files are named ``.<name>.<pid>.<token>.tmp``
and are ignored (and cleaned up by :func:`remove_stale_temporaries`).

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> from jetastar._atomic import atomic_path
    >>> d = Path(tempfile.mkdtemp())
    >>> with atomic_path(d / "x.txt") as tmp:
    ...     _ = Path(tmp).write_text("hello")
    >>> (d / "x.txt").read_text()
    'hello'
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path

from ._leftovers import pid_alive, pid_in_name

__all__ = ["atomic_path", "atomic_write_text", "fsync_directory", "remove_stale_temporaries"]

_TMP_SUFFIX = ".tmp"


def fsync_directory(directory: str | os.PathLike[str]) -> None:
    """Flush a directory entry to disk (makes a rename durable); a no-op where unsupported."""
    try:
        fd = os.open(os.fspath(directory), os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _fsync_file(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_path(final: str | os.PathLike[str], *, clean: bool = False) -> Iterator[str]:
    """Context manager giving a temporary path to write; renamed to ``final`` on success.

    The temporary file lives in the same directory as ``final`` (so the rename is atomic), is
    fsynced before the rename, and is removed if the block raises.

    Args:
        final: the destination path (its directory must exist).
        clean: first remove the temporaries of ``final`` that killed writers left behind
            (:func:`remove_stale_temporaries`; it lists the folder, so not for part files).

    Yields:
        The temporary path to write to.

    Example:
        >>> import tempfile
        >>> from pathlib import Path
        >>> p = Path(tempfile.mkdtemp()) / "a.bin"
        >>> with atomic_path(p) as tmp:
        ...     _ = Path(tmp).write_bytes(b"x")
        >>> p.stat().st_size
        1
    """
    final_path = Path(final)
    directory = final_path.parent
    if clean:
        remove_stale_temporaries(directory, final_path.name)
    tmp = directory / f".{final_path.name}.{os.getpid()}.{secrets.token_hex(4)}{_TMP_SUFFIX}"
    try:
        yield str(tmp)
        _fsync_file(str(tmp))
        os.replace(tmp, final_path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    fsync_directory(directory)


def atomic_write_text(final: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` (UTF-8) to ``final`` atomically.

    Example:
        >>> import tempfile
        >>> from pathlib import Path
        >>> p = Path(tempfile.mkdtemp()) / "m.json"
        >>> atomic_write_text(p, "{}")
        >>> p.read_text()
        '{}'
    """
    with atomic_path(final) as tmp, open(tmp, "w", encoding="utf-8") as f:
        f.write(text)


def remove_stale_temporaries(directory: str | os.PathLike[str], name: str | None = None) -> int:
    """Delete left-over temporary files of :func:`atomic_path` in ``directory``.

    Args:
        directory: where to look.
        name: only temporaries of this final file name (default: all).

    Temporaries of a process that is still running (another run writing into the same folder)
    are kept.

    Returns:
        How many files were removed.
    """
    removed = 0
    d = Path(directory)
    if not d.is_dir():
        return 0
    prefix = "." if name is None else f".{name}."
    for p in d.iterdir():
        if p.name.startswith(prefix) and p.name.endswith(_TMP_SUFFIX) and p.is_file():
            pid = pid_in_name(p.name)
            if pid is not None and pid_alive(pid):
                continue
            with contextlib.suppress(OSError):
                p.unlink()
                removed += 1
    return removed
