"""Tiled CUDA kernels of the exact trellis (see :func:`jetastar.clustering.gpu.solve_on_gpu_tiled`):
the DP of :mod:`jetastar.clustering.exact._gpu_kernels` with each part record read from global
memory once per many splits. Imported only when a GPU (or the CUDA simulator) is used.

Layout and results are those of :mod:`~jetastar.clustering.exact._gpu_kernels` (``node[j, s]`` =
``(t, map, log_z, count)``, ``best[j, s]``, ``count_i[j, s]``); only the order of the work and
where the records are read from differ.

Tiles. A mask ``s`` of ``n`` leaves is cut into its ``l`` low bits (leaves ``0 .. l-1``) and its
``n - l`` high bits: ``s = (s_h << l) | s_l``. The *tile* of a high part ``s_h`` is the ``2**l``
records ``node[j, s_h << l : (s_h + 1) << l]``, contiguous in memory. A split of cluster
``C = (C_h, c_l)`` into ``A = (A_h, a_l)`` and ``B = (C_h \\ A_h, c_l \\ a_l)`` is

* *cross* when ``∅ ≠ A_h ⊊ C_h``: for one pair ``(A_h, B_h)`` of high parts the records of both
  parts over every low part are the two tiles ``A_h`` and ``B_h``, so a thread block loads them into
  shared memory once (``2 · 2**l`` records) and scores from them every split of every cluster of
  high part ``C_h = A_h | B_h`` with this high pair: ``3**l`` splits. Each unordered pair is taken
  once, with ``A_h`` the part that holds the lowest leaf of ``C_h``; :func:`cross` deals the
  ``2**(p-1) - 1`` pairs of a tile (``p = |C_h|``) to ``G`` blocks (*chunks*), each writing a partial
  result per cluster (best value and part, the streaming log-sum-exp's ``(max, sum)``, the count).
* *same-high* when one part has high part ``C_h`` and the other ``∅``: these read the tile of
  ``C_h`` itself (smaller low parts) and the tile of ``∅``. :func:`same` merges the ``G`` partials of
  each cluster of a tile, then runs a DP over the size of the low part inside the block (shared
  memory, a barrier between sizes) and writes the finished tile.

High parts are solved in order of their number of bits ``p`` (one level at a time), so every part
a tile reads is final: cross parts have fewer high bits, same-high parts are the ``∅`` tile (level
0, solved first) or smaller low parts of the tile being solved.

Work inside a block. In :func:`cross` the clusters of the tile are cut into *work items* of at
most ``2**part_bits`` low-bit splits per pair (a cluster of ``s > part_bits`` low bits into
``2**(s - part_bits)`` parts, by fixing its lowest bits, as :mod:`~jetastar.clustering.exact._gpu_kernels`
deals a cluster to threads), dealt to the threads in order of size, so the threads of a warp run
loops of one length; each thread keeps its items' running best, log-sum-exp and count in
registers over all the pairs of its chunk, and the parts of a cluster are merged once at the end
through shared memory (the tile buffers, free by then). In :func:`same` each cluster is owned by one
thread (clusters in order of size). Ties of the best value go to the larger part ``a`` (the part
holding the cluster's lowest leaf) at every comparison and merge, so the result does not depend on
the order of the work and is the CPU trellis's arg-max; the score is evaluated with ``a`` first, as
on the CPU, bit for bit.

Shared memory per block: the two tiles' columns (``t``, MAP, log Z, float and int64 count: 5 arrays
of ``2 * 2**l`` 8-byte values) and an int32 array for the merge: 44 KiB at ``l = 9``, within the
48 KiB a kernel may declare statically.

Traffic counter: with ``count_traffic`` every thread adds the bytes it reads from and writes to
global memory (tile loads, ``t`` of its clusters, partials, final records) to ``traffic[0]``
(atomically), the figure :func:`jetastar.clustering.gpu.tiled_bytes_per_split` predicts.
"""

from __future__ import annotations

import math
from typing import Any

import numba as nb
import numpy as np

from ..._cuda import load_cuda
from ...ginkgo.kernels import FORM_LEGACY, parent_terms, split_llh_given_parent
from .._subsets import popcount, unsplittable
from ._gpu_kernels import deposit, lowest_bits, unrank
from ._trellis_kernels import lse_add, lse_value

cuda = load_cuda()

_NEG_INF = -np.inf
_T, _MAP, _LOG_Z, _COUNT = 0, 1, 2, 3
_ROW_TCUT, _ROW_FORM, _N_CONST = 0, 4, 5

_CACHE: dict[tuple[int, int, int], tuple[Any, Any]] = {}


@cuda.jit(device=True)
def _parent_of(k, whole, t_s, c0, c1, prune, pt0, pt1, pt2, live):  # pragma: no cover
    """Item ``k``'s cluster as a parent: its :func:`parent_terms` (with the whole jet's constants
    row ``c1`` or the others' ``c0``) into ``pt0..2[k]``, and ``live[k] = 1`` when it can split
    (or ``prune`` is off). ``live[k]`` is left as it is otherwise."""
    if whole:
        cut, legacy = c1[_ROW_TCUT], c1[_ROW_FORM] == FORM_LEGACY
        pt = parent_terms(t_s, c1)
    else:
        cut, legacy = c0[_ROW_TCUT], c0[_ROW_FORM] == FORM_LEGACY
        pt = parent_terms(t_s, c0)
    pt0[k] = pt[0]
    pt1[k] = pt[1]
    pt2[k] = pt[2]
    if not (prune and unsplittable(t_s, cut, legacy)):
        live[k] = 1


@cuda.jit(device=True)
def _take_split(
    k, psi, pa, ba, ia, bb, ib, sh_m, sh_z, sh_ci, sh_cf, want_z, exact_count, acc_v, acc_a,
    acc_zm, acc_za, acc_ci, acc_cf,
):  # pragma: no cover - device code
    """Add a scored split (``psi`` finite; parts at ``[ba, ia]`` and ``[bb, ib]`` of the shared
    tiles, ``pa`` the part holding the cluster's lowest leaf) to item ``k``'s running best
    (ties to the larger part), log-sum-exp and count."""
    v = psi + sh_m[ba, ia] + sh_m[bb, ib]
    if v > acc_v[k] or (v == acc_v[k] and pa > acc_a[k]):
        acc_v[k] = v
        acc_a[k] = pa
    if want_z:
        zm, za = lse_add(acc_zm[k], acc_za[k], psi + sh_z[ba, ia] + sh_z[bb, ib])
        acc_zm[k] = zm
        acc_za[k] = za
        if exact_count:
            acc_ci[k] += sh_ci[ba, ia] * sh_ci[bb, ib]
        else:
            acc_cf[k] += sh_cf[ba, ia] * sh_cf[bb, ib]


@cuda.jit(device=True)
def _psi(t_a, t_b, t_s, pt0, pt1, pt2, whole, c0, c1):  # pragma: no cover - device code
    """Split score with the constants row of the whole jet (``whole``) or of any other cluster."""
    if whole:
        return split_llh_given_parent(t_a, t_b, t_s, pt0, pt1, pt2, c1)
    return split_llh_given_parent(t_a, t_b, t_s, pt0, pt1, pt2, c0)


def work_items(low_bits: int, part_bits: int) -> int:
    """Work items of one tile in :func:`cross`: each cluster of ``s`` low bits is cut into
    ``2**max(0, s - part_bits)`` items of at most ``2**part_bits`` low-bit splits."""
    return sum(math.comb(low_bits, s) << max(0, s - part_bits) for s in range(low_bits + 1))


def kernels(low_bits: int, thread_bits: int, min_part_bits: int) -> tuple[Any, Any, int]:
    """The ``(cross, same)`` kernels for tiles of ``2**low_bits`` records and blocks of
    ``2**thread_bits`` threads (compiled once per setting; shared arrays need compile-time sizes).

    Args:
        low_bits: ``l``, the low bits of a tile.
        thread_bits: ``log2`` of the threads per block (at most ``low_bits``).
        min_part_bits: a work item of :func:`cross` scores at most ``2**part_bits`` low-bit splits
            per high pair, ``part_bits`` the smallest value from this one whose items fit the
            block's reduction space (``2 * 2**low_bits`` slots).

    Returns:
        The two kernels (see the module docstring; launch them with ``2**thread_bits`` threads)
        and ``part_bits``.
    """
    return kernel_pair(_make, _CACHE, low_bits, thread_bits, min_part_bits)


def kernel_pair(make: Any, cache: dict[tuple[int, int, int], tuple[Any, Any]], low_bits: int,
                thread_bits: int, min_part_bits: int) -> tuple[Any, Any, int]:
    """A tiled pass's ``(cross, same, part_bits)``: ``part_bits`` the smallest value from
    ``min_part_bits`` whose work items fit a block's reduction space (``2 * 2**low_bits`` slots),
    and the kernels ``make(low_bits, thread_bits, part_bits)`` compiles, kept in ``cache`` (one
    compilation per setting and process). The DP's :func:`kernels` and the marginals'
    (:mod:`~jetastar.clustering.exact._gpu_tiled_marginals`) share it."""
    part_bits = max(0, min_part_bits)
    while work_items(low_bits, part_bits) > 2 << low_bits:
        part_bits += 1
    key = (low_bits, thread_bits, part_bits)
    if key not in cache:
        cache[key] = make(low_bits, thread_bits, part_bits)
    cross, same = cache[key]
    return cross, same, part_bits


@cuda.jit(device=True)
def sorted_cluster(r, nl, binom):  # pragma: no cover - device code
    """The ``r``-th mask of ``nl`` bits in order of size, colex within a size."""
    s = 0
    while r >= binom[nl, s]:
        r -= binom[nl, s]
        s += 1
    return unrank(r, s, nl, binom)


@cuda.jit(device=True)
def work_item(r, nl, part_bits, binom):  # pragma: no cover - device code
    """Work item ``r`` of a tile: ``(cluster's low mask, part, g)``, the cluster's low-bit splits
    dealt to ``2**g`` parts by fixing its ``g`` lowest bits (items in order of cluster size)."""
    s = 0
    g = 0
    while True:
        g = s - part_bits if s > part_bits else 0
        cnt = binom[nl, s] << g
        if r < cnt:
            break
        r -= cnt
        s += 1
    i = r >> g
    return unrank(i, s, nl, binom), r - (i << g), g


@cuda.jit(device=True)
def deal_item(k, w, nl, part_bits, binom, parts, gs, fix, free):  # pragma: no cover
    """Slot ``k`` of a thread takes work item ``w`` (:func:`work_item`): its part and ``g`` into
    ``parts[k]`` / ``gs[k]``, the bits its part fixes (the low mask's ``g`` lowest, set as the
    part's bits say) into ``fix[k]`` and the bits left to walk into ``free[k]``. Returns the
    item's low mask (the cluster's, or in the marginals the complement walked)."""
    m, part, g = work_item(w, nl, part_bits, binom)
    fixed = lowest_bits(m, g)
    parts[k] = part
    gs[k] = g
    fix[k] = deposit(part, fixed)
    free[k] = m ^ fixed
    return m


@cuda.jit(device=True)
def _lse_merge(z_max, z_acc, z_max2, z_acc2):  # pragma: no cover - device code
    """Two streaming log-sum-exps ``(max, sum)`` merged into one."""
    if z_max2 == _NEG_INF:
        return z_max, z_acc
    if z_max2 > z_max:
        return z_max2, z_acc * math.exp(z_max - z_max2) + z_acc2
    return z_max, z_acc + z_acc2 * math.exp(z_max2 - z_max)


def _make(low_bits: int, thread_bits: int, part_bits: int) -> tuple[Any, Any]:
    size = 1 << low_bits
    n_threads = 1 << thread_bits
    per_thread = size // n_threads  # clusters per thread in `same`
    per_item = -(-work_items(low_bits, part_bits) // n_threads)  # work items per thread in `cross`

    @cuda.jit
    def cross(
        p, n, nl, n_work, i0, count, n_chunks, binom, node, count_i, consts, want_z, exact_count,
        prune, part_v, part_a, part_zmax, part_zacc, part_cf, part_ci, count_traffic, traffic,
    ):  # pragma: no cover - device code
        """Cross splits of the tiles ``i0 .. i0 + count - 1`` of level ``p`` (high parts of ``p``
        bits, colex order), pairs dealt to ``n_chunks`` blocks per tile; block ``q`` is chunk
        ``q % n_chunks`` of tile ``i0 + (q // n_chunks) % count`` of jet
        ``q // (count * n_chunks)`` and writes its partials at ``q * 2**nl + c_l``.

        Inside a block the ``n_work`` work items (:func:`work_item`: a cluster, or a part of a
        large one) are dealt to the threads in order of size, so the threads of a warp run loops
        of one length; the parts of a cluster are merged through shared memory at the end.
        """
        sh_t = cuda.shared.array((2, size), nb.float64)
        sh_m = cuda.shared.array((2, size), nb.float64)
        sh_z = cuda.shared.array((2, size), nb.float64)
        sh_cf = cuda.shared.array((2, size), nb.float64)
        sh_ci = cuda.shared.array((2, size), nb.int64)
        sh_a = cuda.shared.array((2, size), nb.int32)
        acc_v = cuda.local.array(per_item, nb.float64)
        acc_a = cuda.local.array(per_item, nb.int64)
        acc_zm = cuda.local.array(per_item, nb.float64)
        acc_za = cuda.local.array(per_item, nb.float64)
        acc_cf = cuda.local.array(per_item, nb.float64)
        acc_ci = cuda.local.array(per_item, nb.int64)
        ts = cuda.local.array(per_item, nb.float64)
        pt0 = cuda.local.array(per_item, nb.float64)
        pt1 = cuda.local.array(per_item, nb.float64)
        pt2 = cuda.local.array(per_item, nb.float64)
        live = cuda.local.array(per_item, nb.int64)
        cls = cuda.local.array(per_item, nb.int64)
        fix = cuda.local.array(per_item, nb.int64)
        free = cuda.local.array(per_item, nb.int64)
        parts = cuda.local.array(per_item, nb.int64)
        gs = cuda.local.array(per_item, nb.int64)
        c0 = cuda.local.array(_N_CONST, nb.float64)
        c1 = cuda.local.array(_N_CONST, nb.float64)
        tid = cuda.threadIdx.x
        n_jets = node.shape[0]
        hb = n - nl
        nlm = np.int64(1) << nl
        full = (np.int64(1) << n) - 1
        n_pairs = (np.int64(1) << (p - 1)) - 1
        per = (n_pairs + n_chunks - 1) // n_chunks
        rec_bytes = 32 if want_z else 16
        n_items = n_jets * count * n_chunks
        for q in range(cuda.blockIdx.x, n_items, cuda.gridDim.x):
            j = q // (count * n_chunks)
            r = q - j * count * n_chunks
            tile = i0 + r // n_chunks
            chunk = r - (r // n_chunks) * n_chunks
            ch = unrank(tile, p, hb, binom)
            hbase = ch << nl
            low_h = ch & -ch
            rest_h = ch ^ low_h
            for x in range(_N_CONST):
                c0[x] = consts[j, 0, x]
                c1[x] = consts[j, 1, x]
            nbytes = np.int64(0)
            cuda.syncthreads()
            for i in range(tid, nlm, n_threads):  # the t of the tile's clusters, once
                sh_t[0, i] = node[j, hbase | i, _T]
                nbytes += 8
            cuda.syncthreads()
            for k in range(per_item):
                w = k * n_threads + tid
                acc_v[k] = _NEG_INF
                acc_zm[k] = _NEG_INF
                acc_za[k] = 0.0
                acc_cf[k] = 0.0
                acc_ci[k] = 0
                live[k] = 0
                if w < n_work:
                    cl = deal_item(k, w, nl, part_bits, binom, parts, gs, fix, free)
                    cls[k] = cl
                    s = hbase | cl
                    acc_a[k] = s & -s
                    t_s = sh_t[0, cl]
                    ts[k] = t_s
                    _parent_of(k, s == full, t_s, c0, c1, prune, pt0, pt1, pt2, live)
            r0 = chunk * per
            r1 = r0 + per if r0 + per < n_pairs else n_pairs
            for pr in range(r0, r1):
                ah = low_h | deposit(pr, rest_h)
                abase = ah << nl
                bbase = (ch ^ ah) << nl
                cuda.syncthreads()
                for i in range(tid, nlm, n_threads):
                    sh_t[0, i] = node[j, abase | i, _T]
                    sh_m[0, i] = node[j, abase | i, _MAP]
                    sh_t[1, i] = node[j, bbase | i, _T]
                    sh_m[1, i] = node[j, bbase | i, _MAP]
                    if want_z:
                        sh_z[0, i] = node[j, abase | i, _LOG_Z]
                        sh_z[1, i] = node[j, bbase | i, _LOG_Z]
                        if exact_count:
                            sh_ci[0, i] = count_i[j, abase | i]
                            sh_ci[1, i] = count_i[j, bbase | i]
                        else:
                            sh_cf[0, i] = node[j, abase | i, _COUNT]
                            sh_cf[1, i] = node[j, bbase | i, _COUNT]
                    nbytes += 2 * rec_bytes
                cuda.syncthreads()
                for k in range(per_item):
                    if live[k] == 0:
                        continue
                    cl = cls[k]
                    whole = (hbase | cl) == full
                    low_c = cl & -cl
                    fr = free[k]
                    h = fr
                    while True:
                        # parts: x = (A_h, al) in buffer 0, y = (B_h, cl \ al) in buffer 1
                        al = fix[k] | h
                        bl = cl ^ al
                        m_x = sh_m[0, al]
                        m_y = sh_m[1, bl]
                        if m_x != _NEG_INF and m_y != _NEG_INF:
                            # a: the part holding the cluster's lowest leaf (scored first)
                            if cl == 0 or (al & low_c) != 0:
                                ia, ib, ba, bb = al, bl, 0, 1
                                pa = abase | al
                            else:
                                ia, ib, ba, bb = bl, al, 1, 0
                                pa = bbase | bl
                            psi = _psi(sh_t[ba, ia], sh_t[bb, ib], ts[k], pt0[k], pt1[k],
                                       pt2[k], whole, c0, c1)
                            if psi != _NEG_INF:
                                _take_split(k, psi, pa, ba, ia, bb, ib, sh_m, sh_z, sh_ci, sh_cf,
                                            want_z, exact_count, acc_v, acc_a, acc_zm, acc_za,
                                            acc_ci, acc_cf)
                        if h == 0:
                            break
                        h = (h - 1) & fr
            # the parts of each cluster, merged through shared memory (slot w = work item)
            cuda.syncthreads()
            for k in range(per_item):
                w = k * n_threads + tid
                if w < n_work:
                    x, y = w // size, w % size
                    sh_m[x, y] = acc_v[k]
                    sh_a[x, y] = acc_a[k]
                    sh_z[x, y] = acc_zm[k]
                    sh_t[x, y] = acc_za[k]
                    sh_cf[x, y] = acc_cf[k]
                    sh_ci[x, y] = acc_ci[k]
            cuda.syncthreads()
            for k in range(per_item):
                w = k * n_threads + tid
                if w >= n_work or parts[k] != 0:
                    continue
                cl = cls[k]
                best_v = acc_v[k]
                best_a = acc_a[k]
                z_max = acc_zm[k]
                z_acc = acc_za[k]
                n_f = acc_cf[k]
                n_i = acc_ci[k]
                for u in range(w + 1, w + (np.int64(1) << gs[k])):  # its other parts
                    x, y = u // size, u % size
                    v = sh_m[x, y]
                    a = np.int64(sh_a[x, y])
                    if v > best_v or (v == best_v and v != _NEG_INF and a > best_a):
                        best_v = v
                        best_a = a
                    z_max, z_acc = _lse_merge(z_max, z_acc, sh_z[x, y], sh_t[x, y])
                    n_f += sh_cf[x, y]
                    n_i += sh_ci[x, y]
                idx = q * nlm + cl
                part_v[idx] = best_v
                part_a[idx] = best_a
                nbytes += 12
                if want_z:
                    part_zmax[idx] = z_max
                    part_zacc[idx] = z_acc
                    if exact_count:
                        part_ci[idx] = n_i
                    else:
                        part_cf[idx] = n_f
                    nbytes += 24
            if count_traffic:
                cuda.atomic.add(traffic, 0, nbytes)

    @cuda.jit
    def same(
        p, n, nl, i0, count, n_chunks, binom, node, count_i, best, consts, want_z, exact_count,
        prune, part_v, part_a, part_zmax, part_zacc, part_cf, part_ci, count_traffic, traffic,
    ):  # pragma: no cover - device code
        """Finish the tiles ``i0 .. i0 + count - 1`` of level ``p``: merge the ``n_chunks``
        partials of :func:`cross` per cluster, score the same-high splits by a DP over the low
        part's size inside the block, write the records. Block ``q`` is tile
        ``i0 + q % count`` of jet ``q // count``."""
        sh_t = cuda.shared.array((2, size), nb.float64)
        sh_m = cuda.shared.array((2, size), nb.float64)
        sh_z = cuda.shared.array((2, size), nb.float64)
        sh_cf = cuda.shared.array((2, size), nb.float64)
        sh_ci = cuda.shared.array((2, size), nb.int64)
        acc_v = cuda.local.array(per_thread, nb.float64)
        acc_a = cuda.local.array(per_thread, nb.int64)
        acc_zm = cuda.local.array(per_thread, nb.float64)
        acc_za = cuda.local.array(per_thread, nb.float64)
        acc_cf = cuda.local.array(per_thread, nb.float64)
        acc_ci = cuda.local.array(per_thread, nb.int64)
        pt0 = cuda.local.array(per_thread, nb.float64)
        pt1 = cuda.local.array(per_thread, nb.float64)
        pt2 = cuda.local.array(per_thread, nb.float64)
        live = cuda.local.array(per_thread, nb.int64)
        cls = cuda.local.array(per_thread, nb.int64)
        c0 = cuda.local.array(_N_CONST, nb.float64)
        c1 = cuda.local.array(_N_CONST, nb.float64)
        tid = cuda.threadIdx.x
        n_jets = node.shape[0]
        hb = n - nl
        nlm = np.int64(1) << nl
        full = (np.int64(1) << n) - 1
        rec_bytes = 32 if want_z else 16
        own = 0 if p == 0 else 1  # buffer of the tile being solved (level 0: the ∅ tile itself)
        n_items = n_jets * count
        for q in range(cuda.blockIdx.x, n_items, cuda.gridDim.x):
            j = q // count
            ch = unrank(i0 + q - j * count, p, hb, binom)
            hbase = ch << nl
            for x in range(_N_CONST):
                c0[x] = consts[j, 0, x]
                c1[x] = consts[j, 1, x]
            nbytes = np.int64(0)
            cuda.syncthreads()
            if p > 0:  # the ∅ tile, final since level 0
                for i in range(tid, nlm, n_threads):
                    sh_t[0, i] = node[j, i, _T]
                    sh_m[0, i] = node[j, i, _MAP]
                    if want_z:
                        sh_z[0, i] = node[j, i, _LOG_Z]
                        if exact_count:
                            sh_ci[0, i] = count_i[j, i]
                        else:
                            sh_cf[0, i] = node[j, i, _COUNT]
                    nbytes += rec_bytes
            for k in range(per_thread):
                w = k * n_threads + tid
                live[k] = 0
                if w >= nlm:
                    continue
                cl = sorted_cluster(w, nl, binom)  # in order of size: a warp's are alike
                cls[k] = cl
                s = hbase | cl
                t_s = node[j, s, _T]
                nbytes += 8
                sh_t[own, cl] = t_s
                if popcount(s) <= 1:  # a leaf, or the empty mask
                    acc_v[k] = 0.0 if s != 0 else _NEG_INF
                    acc_a[k] = 0
                    acc_zm[k] = acc_v[k]
                    acc_za[k] = 1.0 if s != 0 else 0.0
                    acc_cf[k] = 1.0 if s != 0 else 0.0
                    acc_ci[k] = 1 if s != 0 else 0
                    continue
                acc_v[k] = _NEG_INF
                acc_a[k] = s & -s
                acc_zm[k] = _NEG_INF
                acc_za[k] = 0.0
                acc_cf[k] = 0.0
                acc_ci[k] = 0
                for g in range(n_chunks):
                    idx = ((q * n_chunks) + g) * nlm + cl
                    v = part_v[idx]
                    a = np.int64(part_a[idx])
                    nbytes += 12
                    if v > acc_v[k] or (v == acc_v[k] and v != _NEG_INF and a > acc_a[k]):
                        acc_v[k] = v
                        acc_a[k] = a
                    if want_z:
                        zm = part_zmax[idx]
                        if zm != _NEG_INF:
                            if zm > acc_zm[k]:
                                acc_za[k] = acc_za[k] * math.exp(acc_zm[k] - zm) + part_zacc[idx]
                                acc_zm[k] = zm
                            else:
                                acc_za[k] += part_zacc[idx] * math.exp(zm - acc_zm[k])
                        if exact_count:
                            acc_ci[k] += part_ci[idx]
                        else:
                            acc_cf[k] += part_cf[idx]
                        nbytes += 24
                _parent_of(k, s == full, t_s, c0, c1, prune, pt0, pt1, pt2, live)
            for size_l in range(nl + 1):
                cuda.syncthreads()  # every low part smaller than size_l is in the own buffer
                for k in range(per_thread):
                    if k * n_threads + tid >= nlm:
                        continue
                    cl = cls[k]
                    if popcount(cl) != size_l:
                        continue
                    s = hbase | cl
                    t_s = sh_t[own, cl]
                    if live[k] != 0:
                        whole = s == full
                        low_c = cl & -cl
                        rest = np.int64(0)
                        if p == 0:
                            # both parts in the ∅ tile: a = low | sub, sub ⊊ cl \ low
                            rest = cl ^ low_c
                            sub = (rest - 1) & rest
                            n_sub = rest != 0
                        else:
                            # parts (C_h, cl \ bl) (own buffer) and (∅, bl) (buffer 0), bl ≠ ∅
                            sub = cl
                            n_sub = cl != 0
                        while n_sub:
                            if p == 0:
                                ia = low_c | sub
                                ib = rest ^ sub
                                ba, bb = 0, 0
                                pa = ia
                            else:
                                xl = cl ^ sub  # own part's low bits
                                if (sub & low_c) != 0:
                                    ia, ib, ba, bb = sub, xl, 0, 1
                                    pa = sub
                                else:
                                    ia, ib, ba, bb = xl, sub, 1, 0
                                    pa = hbase | xl
                            m_a = sh_m[ba, ia]
                            m_b = sh_m[bb, ib]
                            if m_a != _NEG_INF and m_b != _NEG_INF:
                                psi = _psi(sh_t[ba, ia], sh_t[bb, ib], t_s, pt0[k], pt1[k],
                                           pt2[k], whole, c0, c1)
                                if psi != _NEG_INF:
                                    _take_split(k, psi, pa, ba, ia, bb, ib, sh_m, sh_z, sh_ci,
                                                sh_cf, want_z, exact_count, acc_v, acc_a, acc_zm,
                                                acc_za, acc_ci, acc_cf)
                            if p == 0:
                                if sub == 0:
                                    break
                                sub = (sub - 1) & rest
                            else:
                                sub = (sub - 1) & cl
                                if sub == 0:
                                    break
                    elif popcount(s) > 1:  # pruned: nothing below it counts
                        acc_v[k] = _NEG_INF
                        acc_zm[k] = _NEG_INF
                        acc_za[k] = 0.0
                        acc_cf[k] = 0.0
                        acc_ci[k] = 0
                    z = lse_value(acc_zm[k], acc_za[k])
                    sh_m[own, cl] = acc_v[k]
                    sh_z[own, cl] = z
                    sh_cf[own, cl] = acc_cf[k]
                    sh_ci[own, cl] = acc_ci[k]
                    node[j, s, _MAP] = acc_v[k]
                    best[j, s] = acc_a[k]
                    nbytes += 12
                    if want_z:
                        node[j, s, _LOG_Z] = z
                        if exact_count:
                            count_i[j, s] = acc_ci[k]
                            node[j, s, _COUNT] = 0.0
                        else:
                            node[j, s, _COUNT] = acc_cf[k]
                        nbytes += 16
            if count_traffic:
                cuda.atomic.add(traffic, 0, nbytes)

    return cross, same
