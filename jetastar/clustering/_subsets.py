"""Bitmask helpers for algorithms that work on subsets of a jet's leaves (trellis, A*).

A *cluster* of an ``n``-leaf jet is a non-empty subset of its leaves, stored as an integer bitmask:
bit ``i`` set means leaf ``i`` is in the cluster, so the ``2**n - 1`` clusters are the integers
``1 .. 2**n - 1`` and the whole jet is ``full_mask(n) = 2**n - 1``. Every proper subset of a mask is
numerically smaller than the mask, so increasing integer order is already a valid bottom-up order.

Enumerating the unordered 2-partitions (splits) of a cluster ``s`` exactly once: keep the lowest set
bit ``low = s & -s`` in the first part ``A`` and let ``sub`` run over the proper subsets of
``rest = s ^ low`` (``sub = (sub - 1) & rest`` walks them in decreasing order)::

    low = s & -s
    rest = s ^ low
    sub = (rest - 1) & rest          # largest proper subset of rest
    while True:
        a = low | sub                # part with the lowest leaf
        b = rest ^ sub               # the other part (never empty)
        ...
        if sub == 0:
            break
        sub = (sub - 1) & rest

That visits ``2**(|s| - 1) - 1`` splits of ``s`` and ``(3**n + 1) / 2 - 2**n`` splits over all
clusters. All functions here are numba kernels (callable from Python too) or small Python helpers;
the kernels take and return int64 masks and float64 arrays so that they never recompile.

Example:
    >>> import numpy as np
    >>> from jetastar.clustering._subsets import enumerate_splits, mask_of, leaves_of, subset_sums
    >>> mask_of([0, 2, 3])
    13
    >>> leaves_of(13)
    (0, 2, 3)
    >>> [leaves_of(int(a)) for a in enumerate_splits(13)]
    [(0, 3), (0, 2), (0,)]
    >>> subset_sums(np.array([[1.0], [2.0], [4.0]]))[:, 0].tolist()
    [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]
"""

from __future__ import annotations

from collections.abc import Iterable

import numba as nb
import numpy as np

from ..ginkgo.likelihood import cluster_t

__all__ = [
    "bit_index",
    "enumerate_splits",
    "fill_subset_t",
    "full_mask",
    "leaves_of",
    "lowest_bit",
    "mask_of",
    "masks_by_size",
    "n_splits",
    "n_splits_total",
    "popcount",
    "subset_sizes",
    "subset_sums",
    "subset_t",
    "unsplittable",
]


# ---------------------------------------------------------------------- scalar kernels
@nb.njit(cache=True)
def popcount(x: int) -> int:
    """Number of set bits of a non-negative int64 (the size of the cluster ``x``).

    The byte counts are summed with shifts, not with the usual ``* 0x0101010101010101``: that
    product overflows int64, and LLVM, which may assume signed arithmetic does not overflow,
    then folds a comparison such as ``popcount(s) >= 5`` into a wrong constant.
    """
    x = x - ((x >> 1) & 0x5555555555555555)
    x = (x & 0x3333333333333333) + ((x >> 2) & 0x3333333333333333)
    x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0F
    x = x + (x >> 8)
    x = x + (x >> 16)
    x = x + (x >> 32)
    return x & 0x7F


@nb.njit(cache=True)
def lowest_bit(x: int) -> int:
    """The lowest set bit of ``x`` as a mask (``x & -x``); 0 for ``x == 0``."""
    return x & -x


@nb.njit(cache=True)
def bit_index(bit: int) -> int:
    """Index ``i`` of a single-bit mask ``bit = 1 << i`` (``popcount(bit - 1)``)."""
    return popcount(bit - 1)


def full_mask(n: int) -> int:
    """Mask of all ``n`` leaves, ``2**n - 1``."""
    return (1 << n) - 1


def n_splits(size: int) -> int:
    """Number of unordered 2-partitions of a cluster of ``size`` leaves: ``2**(size-1) - 1``."""
    return (1 << (size - 1)) - 1 if size >= 1 else 0


def n_splits_total(n: int) -> int:
    """Splits of all clusters of an ``n``-leaf jet: ``(3**n + 1) / 2 - 2**n``."""
    return (3**n + 1) // 2 - (1 << n)


def mask_of(leaves: Iterable[int]) -> int:
    """Bitmask of a collection of leaf indices."""
    out = 0
    for i in leaves:
        out |= 1 << int(i)
    return out


def leaves_of(mask: int) -> tuple[int, ...]:
    """Sorted leaf indices of a bitmask."""
    mask = int(mask)
    out = []
    i = 0
    while mask:
        if mask & 1:
            out.append(i)
        mask >>= 1
        i += 1
    return tuple(out)


# ---------------------------------------------------------------------- array kernels
@nb.njit(cache=True)
def enumerate_splits(mask: int) -> np.ndarray:
    """The part ``A`` (the one holding the lowest leaf) of every split of ``mask``.

    Args:
        mask: a cluster with at least one leaf.

    Returns:
        int64 array of the ``2**(|mask| - 1) - 1`` masks ``A``, in enumeration order (the other
        part is ``mask ^ A``).
    """
    low = mask & -mask
    rest = mask ^ low
    k = popcount(rest)
    out = np.empty((1 << k) - 1, dtype=np.int64)
    if k == 0:
        return out
    sub = (rest - 1) & rest
    j = 0
    while True:
        out[j] = low | sub
        j += 1
        if sub == 0:
            break
        sub = (sub - 1) & rest
    return out


@nb.njit(cache=True)
def read_tree(best, n, children, base, st_mask, st_parent, st_side):
    """The hierarchy over all ``n`` leaves read top-down through arg-max parts ``best[mask]`` (the
    part holding the lowest leaf), written into ``children[base:base + 2n - 1]`` with the numbering
    of :func:`jetastar.clustering._engine.tree_from_best` (leaf ``i`` is node ``i``; internal
    nodes in the order made, depth first, the ``best`` part first). Leaf rows are left as they
    are (``-1`` where the caller filled them so).

    One function for the CPU chunk kernel and the GPU (which compiles it as a device function);
    the stacks ``st_*`` (at least ``2n`` int64 each) come from the caller, as each target makes
    local arrays its own way.
    """
    full = (np.int64(1) << n) - 1
    st_mask[0] = full
    st_parent[0] = -1
    st_side[0] = 0
    top = 1
    next_node = n
    while top > 0:
        top -= 1
        mask = st_mask[top]
        parent = st_parent[top]
        side = st_side[top]
        if mask & (mask - 1) == 0:
            node = 0
            while (np.int64(1) << node) != mask:
                node += 1
        else:
            node = next_node
            next_node += 1
            part = np.int64(best[mask])
            st_mask[top] = mask ^ part
            st_parent[top] = node
            st_side[top] = 1
            st_mask[top + 1] = part
            st_parent[top + 1] = node
            st_side[top + 1] = 0
            top += 2
        if parent >= 0:
            children[base + parent, side] = node


@nb.njit(cache=True)
def subset_sums(values: np.ndarray) -> np.ndarray:
    """Sum of the rows of ``values`` over every subset, by the lowest-bit recurrence (O(2**n k)).

    Args:
        values: ``(n, k)`` float64 array (e.g. leaf 4-momenta, ``k = 4``).

    Returns:
        ``(2**n, k)`` float64 array; row ``s`` is the sum of the rows in mask ``s`` (row 0 is 0).
        Row ``s`` is computed as ``row[s ^ low] + values[index(low)]``, so the summation order is
        fixed by the mask.
    """
    n, k = values.shape
    m = np.int64(1) << n
    out = np.zeros((m, k), dtype=np.float64)
    for s in range(1, m):
        low = s & -s
        i = bit_index(low)
        prev = s ^ low
        for j in range(k):
            out[s, j] = out[prev, j] + values[i, j]
    return out


@nb.njit(cache=True)
def subset_sums_many(values: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """:func:`subset_sums` of rows ``lo:hi`` of each of ``B`` jets in one call.

    Args:
        values: ``(B, n, k)`` float64.
        lo, hi: the rows summed (the same for every jet).

    Returns:
        ``(B, 2**(hi - lo), k)``; entry ``b`` is ``subset_sums(values[b, lo:hi])``, bit for bit.
    """
    out = np.empty((values.shape[0], np.int64(1) << (hi - lo), values.shape[2]),
                   dtype=np.float64)
    for b in range(values.shape[0]):
        out[b] = subset_sums(np.ascontiguousarray(values[b, lo:hi]))
    return out


@nb.njit(cache=True)
def subset_sizes(n: int) -> np.ndarray:
    """Popcount of every mask ``0 .. 2**n - 1`` as int8 (lowest-bit recurrence)."""
    m = np.int64(1) << n
    out = np.zeros(m, dtype=np.int8)
    for s in range(1, m):
        out[s] = out[s & (s - 1)] + 1
    return out


@nb.njit(cache=True)
def masks_by_size(n: int) -> tuple[np.ndarray, np.ndarray]:
    """All masks ``1 .. 2**n - 1`` grouped by cluster size (counting sort, O(2**n)).

    Args:
        n: number of leaves (``n <= 31`` so that masks fit the int32 output).

    Returns:
        ``(order, offsets)``: ``order`` (int32, length ``2**n - 1``) lists the masks of size ``k``
        in increasing order at ``order[offsets[k]:offsets[k + 1]]``; ``offsets`` is int64 of
        length ``n + 2`` (``offsets[1] = 0``; size 0 is empty).
    """
    m = np.int64(1) << n
    sizes = subset_sizes(n)
    counts = np.zeros(n + 2, dtype=np.int64)
    for s in range(1, m):
        counts[sizes[s]] += 1
    offsets = np.zeros(n + 2, dtype=np.int64)
    for k in range(1, n + 1):
        offsets[k + 1] = offsets[k] + counts[k]
    fill = offsets.copy()
    order = np.empty(m - 1, dtype=np.int32)
    for s in range(1, m):
        k = sizes[s]
        order[fill[k]] = s
        fill[k] += 1
    return order, offsets


@nb.njit(cache=True)
def subset_t(leaves: np.ndarray, c: np.ndarray) -> np.ndarray:
    """The likelihood's ``t`` of every cluster (``cluster_t`` of its summed 4-momentum).

    Args:
        leaves: ``(n, 4)`` float64 leaf 4-momenta ``(E, px, py, pz)``.
        c: a row of :func:`jetastar.ginkgo.likelihood_constants` (selects the likelihood form's
            convention for single leaves).

    Returns:
        ``(2**n,)`` float64 array; entry 0 (the empty set) is 0. See :func:`fill_subset_t`.
    """
    out = np.empty(np.int64(1) << leaves.shape[0], dtype=np.float64)
    fill_subset_t(leaves, c, out)
    return out


@nb.njit(cache=True)
def fill_subset_t(leaves: np.ndarray, c: np.ndarray, out: np.ndarray) -> None:
    """Write the ``t`` of every cluster into ``out`` (length ``2**n``, may be a strided column).

    Memory-lean O(2**n): summed 4-momenta are built by :func:`subset_sums` for the low and the
    high half of the leaves separately (``2 * 2**(n/2)`` rows), and cluster ``s`` adds one row of
    each, so no ``(2**n, 4)`` table is ever allocated.
    """
    n = leaves.shape[0]
    h = n // 2
    lo = subset_sums(leaves[:h])
    hi = subset_sums(leaves[h:])
    m = np.int64(1) << n
    sizes = subset_sizes(n)
    out[0] = 0.0
    for s in range(1, m):
        out[s] = _mask_t(s, np.int64(sizes[s]), lo, hi, h, c)


@nb.njit(cache=True, parallel=True)
def fill_subset_t_parallel(leaves: np.ndarray, c: np.ndarray, out: np.ndarray) -> None:
    """:func:`fill_subset_t` on numba's threads (the same values bit for bit): for large jets,
    where the GPU backend makes ``t`` on the host (26 leaves: 0.9-1.4 s on one thread)."""
    n = leaves.shape[0]
    h = n // 2
    lo = subset_sums(leaves[:h])
    hi = subset_sums(leaves[h:])
    m = np.int64(1) << n
    out[0] = 0.0
    for s in nb.prange(1, m):
        out[s] = _mask_t(s, popcount(s), lo, hi, h, c)


@nb.njit(cache=True, inline="always")
def _mask_t(s: int, size: int, lo: np.ndarray, hi: np.ndarray, h: int, c: np.ndarray) -> float:
    """``t`` of cluster ``s`` from one row of the low-half and one of the high-half sums."""
    a = s & ((np.int64(1) << h) - 1)
    b = s >> h
    e = lo[a, 0] + hi[b, 0]
    px = lo[a, 1] + hi[b, 1]
    py = lo[a, 2] + hi[b, 2]
    pz = lo[a, 3] + hi[b, 3]
    return cluster_t(e, px, py, pz, size, c)


@nb.njit(cache=True)
def unsplittable(t_s: float, t_cut: float, legacy: bool) -> bool:
    """True when no split of a cluster with squared mass ``t_s`` has non-zero likelihood (``t_s``
    at or below ``t_cut``; strictly below in the legacy form)."""
    if legacy:
        return not t_s >= t_cut
    return not t_s > t_cut
