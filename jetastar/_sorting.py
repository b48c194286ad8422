"""Sorting kernels shared by the clustering kernels and the heuristics.

numba compiles its own sorts (``np.argsort``, ``ndarray.sort``: quicksort or merge sort) into
every process that uses them, once per key type and kind (a second or more each); these kernels
are compiled once, cached on disk like every jetastar kernel, and give numpy's stable order.

Example:
    >>> import numpy as np
    >>> from jetastar._sorting import argsort_stable, sort_inplace
    >>> argsort_stable(np.array([2.0, 1.0, 2.0, 0.5])).tolist()
    [3, 1, 0, 2]
    >>> a = np.array([2.0, 1.0, 0.5])
    >>> sort_inplace(a)
    >>> a.tolist()
    [0.5, 1.0, 2.0]
"""

from __future__ import annotations

import numba as nb
import numpy as np

__all__ = ["argsort_stable", "sort_inplace"]

_RUN = 16  # runs sorted by insertion before merging


@nb.njit(cache=True)
def argsort_stable(keys: np.ndarray) -> np.ndarray:  # pragma: no cover - numba
    """Indices that sort the float64 array ``keys`` ascending, equal keys in their original order
    and NaN last: ``np.argsort(keys, kind="stable")`` (integer keys: pass them as float64, exact
    below 2**53).

    Args:
        keys: 1-d float64 array.

    Returns:
        int64 array of the indices.
    """
    n = keys.shape[0]
    src = np.arange(n)
    dst = np.empty(n, dtype=np.int64)
    for lo in range(0, n, _RUN):
        hi = min(lo + _RUN, n)
        for i in range(lo + 1, hi):
            x = src[i]
            kx = keys[x]
            j = i - 1
            while j >= lo:
                kj = keys[src[j]]
                # kj after kx: strictly greater, or NaN against a number
                if kj > kx or (kj != kj and kx == kx):
                    src[j + 1] = src[j]
                    j -= 1
                else:
                    break
            src[j + 1] = x
    width = _RUN
    while width < n:
        for lo in range(0, n, 2 * width):
            mid = min(lo + width, n)
            hi = min(lo + 2 * width, n)
            i = lo
            j = mid
            k = lo
            while i < mid and j < hi:
                ki = keys[src[i]]
                kj = keys[src[j]]
                # the right element goes first only when strictly smaller (stable)
                if ki > kj or (ki != ki and kj == kj):
                    dst[k] = src[j]
                    j += 1
                else:
                    dst[k] = src[i]
                    i += 1
                k += 1
            while i < mid:
                dst[k] = src[i]
                i += 1
                k += 1
            while j < hi:
                dst[k] = src[j]
                j += 1
                k += 1
        src, dst = dst, src
        width *= 2
    return src


@nb.njit(cache=True)
def sort_inplace(values: np.ndarray) -> None:  # pragma: no cover - numba
    """Sort the float64 array ``values`` ascending in place, NaN last: ``values.sort()``.

    Args:
        values: 1-d float64 array (C-contiguous, e.g. ``a[:n]`` of a contiguous ``a``).
    """
    n = values.shape[0]
    order = argsort_stable(values)
    tmp = np.empty(n, dtype=np.float64)
    for i in range(n):
        tmp[i] = values[order[i]]
    for i in range(n):
        values[i] = tmp[i]
