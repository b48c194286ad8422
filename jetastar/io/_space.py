"""Disk space for the files jetastar writes: an upper estimate, checked before writing.

HDF5 (through h5py) can crash the whole process when the disk fills while it writes compressed
chunks. So the HDF5 writer first checks that the folder has room for an upper estimate of the file
(the uncompressed data plus metadata), and builds files of moderate size in memory and writes them
with one ordinary ``write`` — which fails cleanly with ``ENOSPC`` if the disk fills anyway (for
example because another program wrote at the same time).

Example:
    >>> import numpy as np
    >>> estimate_bytes({"a": np.zeros(1000)}) >= 8000
    True
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["IN_MEMORY_MAX", "check_free_space", "estimate_bytes"]

#: Files up to this estimated size are built in memory and written in one go.
IN_MEMORY_MAX = 256 << 20
_PER_OBJECT = 64 << 10
_FIXED = 1 << 20


def _payload(obj: Any, depth: int = 0) -> int:
    if depth > 4 or obj is None:
        return 0
    if isinstance(obj, np.ndarray):
        if obj.dtype == object:
            return sum(len(str(v).encode("utf-8", "surrogatepass")) + 16 for v in obj.ravel())
        return int(obj.nbytes)
    if isinstance(obj, (str, bytes)):
        return len(obj) + 16
    if isinstance(obj, dict):
        return sum(_payload(v, depth + 1) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        if obj and all(isinstance(v, (str, bytes)) for v in obj[:16]):
            return sum(len(v) + 16 for v in obj)
        return sum(_payload(v, depth + 1) for v in obj)
    if hasattr(obj, "__dict__"):
        return sum(_payload(v, depth + 1) for v in vars(obj).values())
    return 0


def estimate_bytes(*objects: Any) -> int:
    """An upper estimate of the bytes a file holding ``objects`` needs (collections, result
    tables, dicts of arrays): their uncompressed data plus room for metadata."""
    total = sum(_payload(o) for o in objects)
    count = sum(len(o) if isinstance(o, dict) else 1 for o in objects if o is not None)
    return int(total * 1.02) + _PER_OBJECT * (1 + count) + _FIXED


def check_free_space(path: str | os.PathLike[str], need: int) -> None:
    """Raise ``OSError(ENOSPC)`` when the folder of ``path`` has less than ``need`` bytes free.

    Args:
        path: the file to be written.
        need: bytes needed (an upper estimate).
    """
    folder = Path(path).parent
    try:
        free = shutil.disk_usage(folder if str(folder) else ".").free
    except OSError:
        return  # cannot tell (the write reports any problem)
    if free < need:
        exc = OSError(f"{path}: not enough disk space: up to {need / 1e6:.3g} MB needed, "
                      f"{free / 1e6:.3g} MB free in {folder}")
        exc.errno = errno.ENOSPC
        raise exc
