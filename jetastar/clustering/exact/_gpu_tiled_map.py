"""Tiled CUDA kernels of the bound-pruned exact MAP (see
:func:`jetastar.clustering.gpu.solve_map_on_gpu_tiled`): the CPU engine of
:mod:`jetastar.clustering.exact._map_kernels` on the GPU, with the parts of most splits read from
shared memory. Imported only when a GPU (or the CUDA simulator) is used.

Tables are the CPU engine's (``rec[s] = (t, V)``, ``wq[s]`` the fixed-point ``W``, ``best[s]``), set
up on the host and solved in place; tiles and levels are those of the tiled DP
(:mod:`jetastar.clustering.exact._gpu_tiled`): a mask is cut into its ``l`` low and ``n − l`` high
bits, the *tile* of a high part is its ``2**l`` contiguous records, high parts are solved in order
of their number of bits ``p``.

* :func:`cross` scores the *cross* splits (``∅ ≠ A_h ⊊ C_h``): a block loads the tiles of one pair
  of high parts ``(A_h, B_h)`` into shared memory — ``wq`` (2 bytes), ``t`` and ``V`` (8 bytes each)
  of each record, 18 bytes per record, 36 per low part — and scores from them the ``3**l`` low-bit
  splits of every cluster of high part ``C_h = A_h | B_h``. Each split is first the integer W test
  ``wq[A] + wq[B] > cut_q`` on the shared ``wq``; the few that pass go to
  :func:`~jetastar.clustering.exact._map_kernels.score_split` (the CPU scan's decision for one
  split: tighter bound, ψ, running best and bars), with the parts' ``t`` and ``V`` from shared
  memory too. A tile's pairs are dealt to ``G`` blocks (chunks), each writing a partial best
  (value, part) per cluster; a cluster's low-bit splits are cut into work items as in the tiled
  DP. Every work item keeps its own running best and bars over all the pairs of its chunk,
  starting (clusters of 5+ leaves, with ``prune``) from :func:`_seed`: the CPU's warm start
  restricted to the candidates whose parts are final (a few global reads per item; on 10-leaf
  test jets it cut the ψ evaluated threefold, below the CPU engine's own count).
* :func:`same` finishes a tile: merges the ``G`` partials of each cluster (ties to the larger
  part), then, clusters in order of the size of their low part (a barrier between sizes, so the
  own tile's smaller low parts are final), scans the *same-high* splits (one part ``(C_h, ·)``,
  the other ``(∅, ·)``) with the CPU's own
  :func:`~jetastar.clustering.exact._map_kernels.scan_splits` from global memory, starting from the
  merged best, and writes the cluster with
  :func:`~jetastar.clustering.exact._map_kernels.finish_cluster`. Level 0 (the ``∅`` tile, the whole
  jet when ``n <= l``) is the CPU's :func:`~jetastar.clustering.exact._map_kernels.solve_cluster`
  per cluster (warm start included).

A part of a cluster's splits only skips splits whose bound is below its own best minus the
engine's margin, never above the cluster's best, and the merges keep the larger value with ties to
the larger part ``a`` (the part holding the cluster's lowest leaf): every ``V``, ``W`` and arg-max
is the CPU engine's, bit for bit (the same float expression on the same winning split). The
whole jet's ``floor`` (an incumbent) and ``slack`` apply to the root only.

Traffic counter (``count_traffic``): ``traffic[0]`` the plan-determined global-memory bytes (tile
loads, each cluster's ``t``, partials written and read, records written: what
:func:`jetastar.clustering.gpu.tiled_map_bytes_per_split` counts), ``traffic[1]`` the
data-dependent bytes: :func:`same`'s scans from global memory (``wq`` of both parts of every
same-high split of a splittable cluster, 4 bytes; ``(t, V)`` of both parts of a split that passes
the W test, 32 bytes; the warm start's ``best`` and ``wq`` reads, 16 bytes, at level 0) and
:func:`cross`'s starts (:func:`_seed`: ``best`` of ``s1``, ``wq``, ``V`` and ``t`` of the
candidates' parts as read),
``traffic[2]`` the splits that passed the W test with both parts possible and ``traffic[3]`` the
ψ evaluated (both kernels).
"""

from __future__ import annotations

from typing import Any

import numba as nb
import numpy as np

from ..._cuda import load_cuda
from ...ginkgo.kernels import FORM_LEGACY, parent_terms
from .._subsets import popcount, unsplittable
from ._gpu_kernels import deposit, plain, unrank
from ._gpu_tiled import deal_item, kernel_pair, work_items
from ._map_kernels import (
    finish_cluster,
    scan_splits,
    score_split,
    solve_cluster,
    start_bars,
)

cuda = load_cuda()

_NEG_INF = -np.inf
_T, _V = 0, 1
_ROW_TCUT, _ROW_FORM, _N_CONST = 0, 4, 5
#: global-memory bytes per record of a tile (``wq``, ``t``, ``V``), a record written (``V``,
#: ``wq``, ``best``), a partial (value, part) and a cluster's ``t``
TILE_RECORD_BYTES = 2 + 8 + 8
WRITE_BYTES = 8 + 2 + 4
PART_BYTES = 8 + 4
T_BYTES = 8

_CACHE: dict[tuple[int, int, int], tuple[Any, Any]] = {}


def kernels(low_bits: int, thread_bits: int, min_part_bits: int) -> tuple[Any, Any, int]:
    """The ``(cross, same)`` kernels of the tiled MAP for tiles of ``2**low_bits`` records and
    blocks of ``2**thread_bits`` threads, and ``part_bits`` (see
    :func:`jetastar.clustering.exact._gpu_tiled.kernel_pair`; compiled once per setting)."""
    return kernel_pair(_make, _CACHE, low_bits, thread_bits, min_part_bits)


@cuda.jit(device=True)
def _score(whole, a, qa, qb, v_a, v_b, t_a, t_b, t_s, s_p, log_tp, stop, c0, c1, floor, slack,
           prune, scale, inv_scale, cut, cut_q, best_v, best_a):  # pragma: no cover - device code
    """:func:`score_split` with the whole jet's constants row, floor and slack (``whole``) or the
    other clusters' (``-inf``, 0)."""
    if whole:
        return score_split(a, qa, qb, v_a, v_b, t_a, t_b, t_s, s_p, log_tp, stop, c1, floor,
                           slack, prune, scale, inv_scale, cut, cut_q, best_v, best_a)
    return score_split(a, qa, qb, v_a, v_b, t_a, t_b, t_s, s_p, log_tp, stop, c0, _NEG_INF, 0.0,
                       prune, scale, inv_scale, cut, cut_q, best_v, best_a)


@cuda.jit(device=True)
def _seed(s, nl, rec, wq, best, whole, t_s, s_p, log_tp, stop, c0, c1, floor, slack, prune, scale,
          inv_scale):  # pragma: no cover - device code
    """A cross work item's start (cluster ``s``, level ``p >= 2``): the CPU engine's warm start
    (:func:`~jetastar.clustering.exact._map_kernels.warm_start`) restricted to the candidates whose
    parts are final, each scored by :func:`score_split`.

    The candidates are the splits of ``s`` built from the best split of ``s1 = s − x`` (``x`` its
    highest leaf, a high bit): ``(a1 | x, s1 − a1)``, ``(a1, s − a1)`` and ``(s1, x)``, with ``a1 =
    best[s1]``; one with a part of the tile's own high part is left out (that tile is not solved
    yet). A real split's value is a valid start (the merge of a cluster's parts sees it anyway).

    Returns:
        ``(best value, part, cut, cut_q, global bytes read)``.
    """
    xm = s
    while xm & (xm - 1):  # the highest leaf
        xm &= xm - 1
    s1 = s ^ xm
    a1 = np.int64(best[s1])
    own = s >> nl
    best_v = _NEG_INF
    best_a = s & -s
    if whole:
        bars = start_bars(_NEG_INF, floor, slack, prune, scale)
    else:
        bars = start_bars(_NEG_INF, _NEG_INF, 0.0, prune, scale)
    cut = bars[0]
    cut_q = bars[1]
    nbytes = np.int64(4)
    for j in range(3):
        if j == 0:
            a = a1 | xm
        elif j == 1:
            a = a1
        else:
            a = s1
        b = s ^ a
        if (a >> nl) == own or (b >> nl) == own:
            continue
        qa = np.int64(wq[a])
        qb = np.int64(wq[b])
        nbytes += 4
        if qa + qb > cut_q:
            v_a = rec[a, _V]
            v_b = rec[b, _V]
            nbytes += 16
            if v_a != _NEG_INF and v_b != _NEG_INF:
                nbytes += 16
                res = _score(whole, a, qa, qb, v_a, v_b, rec[a, _T], rec[b, _T], t_s, s_p, log_tp,
                             stop, c0, c1, floor, slack, prune, scale, inv_scale, cut, cut_q,
                             best_v, best_a)
                best_v = res[0]
                best_a = res[1]
                cut = res[2]
                cut_q = res[3]
    return best_v, best_a, cut, cut_q, nbytes


def _make(low_bits: int, thread_bits: int, part_bits: int) -> tuple[Any, Any]:
    size = 1 << low_bits
    n_threads = 1 << thread_bits
    per_item = -(-work_items(low_bits, part_bits) // n_threads)  # work items per thread in `cross`

    @cuda.jit
    def cross(
        p, n, nl, n_work, i0, count, n_chunks, binom, rec, wq, best, consts, floor, slack, prune,
        scale, part_v, part_a, count_traffic, traffic,
    ):  # pragma: no cover - device code
        """Cross splits of the tiles ``i0 .. i0 + count - 1`` of level ``p``, pairs dealt to
        ``n_chunks`` blocks per tile: block ``q`` is chunk ``q % n_chunks`` of tile
        ``i0 + q // n_chunks`` and writes its partial bests at ``q * 2**nl + c_l``."""
        sh_q = cuda.shared.array((2, size), nb.int16)
        sh_t = cuda.shared.array((2, size), nb.float64)
        sh_v = cuda.shared.array((2, size), nb.float64)
        sh_a = cuda.shared.array((2, size), nb.int32)
        acc_v = cuda.local.array(per_item, nb.float64)
        acc_a = cuda.local.array(per_item, nb.int64)
        cut = cuda.local.array(per_item, nb.float64)
        cut_q = cuda.local.array(per_item, nb.int64)
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
        for x in range(_N_CONST):
            c0[x] = consts[0, x]
            c1[x] = consts[1, x]
        t_cut = c0[_ROW_TCUT]
        legacy = c0[_ROW_FORM] == FORM_LEGACY
        hb = n - nl
        nlm = np.int64(1) << nl
        full = (np.int64(1) << n) - 1
        n_pairs = (np.int64(1) << (p - 1)) - 1
        per = (n_pairs + n_chunks - 1) // n_chunks
        inv_scale = 1.0 / scale
        passed = np.int64(0)
        evaluated = np.int64(0)
        nbytes = np.int64(0)
        extra = np.int64(0)
        for q in range(cuda.blockIdx.x, count * n_chunks, cuda.gridDim.x):
            tile = i0 + q // n_chunks
            chunk = q - (q // n_chunks) * n_chunks
            ch = unrank(tile, p, hb, binom)
            hbase = ch << nl
            low_h = ch & -ch
            rest_h = ch ^ low_h
            cuda.syncthreads()
            for i in range(tid, nlm, n_threads):  # the t of the tile's clusters, once
                sh_t[0, i] = rec[hbase | i, _T]
                nbytes += T_BYTES
            cuda.syncthreads()
            for k in range(per_item):
                w = k * n_threads + tid
                acc_v[k] = _NEG_INF
                live[k] = 0
                if w < n_work:
                    cl = deal_item(k, w, nl, part_bits, binom, parts, gs, fix, free)
                    cls[k] = cl
                    s = hbase | cl
                    acc_a[k] = s & -s
                    t_s = sh_t[0, cl]
                    ts[k] = t_s
                    whole = s == full
                    if whole:
                        bars = start_bars(_NEG_INF, floor, slack, prune, scale)
                        pt = parent_terms(t_s, c1)
                    else:
                        bars = start_bars(_NEG_INF, _NEG_INF, 0.0, prune, scale)
                        pt = parent_terms(t_s, c0)
                    cut[k] = bars[0]
                    cut_q[k] = bars[1]
                    pt0[k] = pt[0]
                    pt1[k] = pt[1]
                    pt2[k] = pt[2]
                    if not unsplittable(t_s, t_cut, legacy):
                        live[k] = 1
                        if prune and popcount(s) >= 5:  # a start, as the CPU's warm start
                            sd = _seed(s, nl, rec, wq, best, whole, t_s, pt[0], pt[1], pt[2], c0,
                                       c1, floor, slack, prune, scale, inv_scale)
                            acc_v[k] = sd[0]
                            acc_a[k] = sd[1]
                            cut[k] = sd[2]
                            cut_q[k] = sd[3]
                            extra += sd[4]
            r0 = chunk * per
            r1 = r0 + per if r0 + per < n_pairs else n_pairs
            for pr in range(r0, r1):
                ah = low_h | deposit(pr, rest_h)
                abase = ah << nl
                bbase = (ch ^ ah) << nl
                cuda.syncthreads()
                for i in range(tid, nlm, n_threads):
                    sh_q[0, i] = wq[abase | i]
                    sh_t[0, i] = rec[abase | i, _T]
                    sh_v[0, i] = rec[abase | i, _V]
                    sh_q[1, i] = wq[bbase | i]
                    sh_t[1, i] = rec[bbase | i, _T]
                    sh_v[1, i] = rec[bbase | i, _V]
                    nbytes += 2 * TILE_RECORD_BYTES
                cuda.syncthreads()
                for k in range(per_item):
                    if live[k] == 0:
                        continue
                    cl = cls[k]
                    whole = (hbase | cl) == full
                    low_c = cl & -cl
                    fr = free[k]
                    h = fr
                    bar = cut_q[k]
                    while True:
                        # parts: x = (A_h, al) in buffer 0, y = (B_h, cl \ al) in buffer 1
                        al = fix[k] | h
                        bl = cl ^ al
                        q_x = np.int64(sh_q[0, al])
                        q_y = np.int64(sh_q[1, bl])
                        if q_x + q_y > bar:
                            # a: the part holding the cluster's lowest leaf (scored first)
                            if cl == 0 or (al & low_c) != 0:
                                ia, ib, ba, bb = al, bl, 0, 1
                                pa = abase | al
                                qa, qb = q_x, q_y
                            else:
                                ia, ib, ba, bb = bl, al, 1, 0
                                pa = bbase | bl
                                qa, qb = q_y, q_x
                            v_a = sh_v[ba, ia]
                            v_b = sh_v[bb, ib]
                            if v_a != _NEG_INF and v_b != _NEG_INF:
                                passed += 1
                                res = _score(whole, pa, qa, qb, v_a, v_b, sh_t[ba, ia],
                                             sh_t[bb, ib], ts[k], pt0[k], pt1[k], pt2[k], c0, c1,
                                             floor, slack, prune, scale, inv_scale, cut[k], bar,
                                             acc_v[k], acc_a[k])
                                acc_v[k] = res[0]
                                acc_a[k] = res[1]
                                cut[k] = res[2]
                                bar = res[3]
                                evaluated += res[4]
                        if h == 0:
                            break
                        h = (h - 1) & fr
                    cut_q[k] = bar
            # the parts of each cluster, merged through shared memory (slot w = work item)
            cuda.syncthreads()
            for k in range(per_item):
                w = k * n_threads + tid
                if w < n_work:
                    x, y = w // size, w % size
                    sh_v[x, y] = acc_v[k]
                    sh_a[x, y] = acc_a[k]
            cuda.syncthreads()
            for k in range(per_item):
                w = k * n_threads + tid
                if w >= n_work or parts[k] != 0:
                    continue
                best_v = acc_v[k]
                best_a = acc_a[k]
                for u in range(w + 1, w + (np.int64(1) << gs[k])):  # its other parts
                    x, y = u // size, u % size
                    v = sh_v[x, y]
                    a = np.int64(sh_a[x, y])
                    if v > best_v or (v == best_v and v != _NEG_INF and a > best_a):
                        best_v = v
                        best_a = a
                idx = q * nlm + cls[k]
                part_v[idx] = best_v
                part_a[idx] = best_a
                nbytes += PART_BYTES
        if count_traffic:
            cuda.atomic.add(traffic, 0, nbytes)
            cuda.atomic.add(traffic, 1, extra)
            cuda.atomic.add(traffic, 2, passed)
            cuda.atomic.add(traffic, 3, evaluated)

    @cuda.jit
    def same(
        p, n, nl, i0, count, n_chunks, binom, rec, wq, best, consts, floor, slack, prune, scale,
        part_v, part_a, count_traffic, traffic,
    ):  # pragma: no cover - device code
        """Finish the tiles ``i0 .. i0 + count - 1`` of level ``p`` (block ``q``: tile
        ``i0 + q``): merge the ``n_chunks`` partials of :func:`cross` per cluster, scan the
        same-high splits (level 0: every split, :func:`solve_cluster`) in order of the low part's
        size, write the records."""
        c = cuda.local.array(_N_CONST, nb.float64)
        tid = cuda.threadIdx.x
        rec_p, wq_p, best_p = plain(rec), plain(wq), plain(best)
        t_cut = consts[0, _ROW_TCUT]
        legacy = consts[0, _ROW_FORM] == FORM_LEGACY
        hb = n - nl
        nlm = np.int64(1) << nl
        full = (np.int64(1) << n) - 1
        nbytes = np.int64(0)
        extra = np.int64(0)
        passed = np.int64(0)
        evaluated = np.int64(0)
        for q in range(cuda.blockIdx.x, count, cuda.gridDim.x):
            ch = unrank(i0 + q, p, hb, binom)
            hbase = ch << nl
            for size_l in range(nl + 1):
                cuda.syncthreads()  # every smaller low part of the tile is written
                for r in range(tid, binom[nl, size_l], n_threads):
                    cl = unrank(r, size_l, nl, binom)
                    s = hbase | cl
                    if popcount(s) <= 1:  # a leaf (set up on the host), or the empty mask
                        continue
                    whole = s == full
                    row = 1 if whole else 0
                    for x in range(_N_CONST):
                        c[x] = consts[row, x]
                    f = floor if whole else _NEG_INF
                    sl = slack if whole else 0.0
                    nbytes += T_BYTES + WRITE_BYTES
                    if p == 0:  # every split in the ∅ tile: the CPU's own cluster solve
                        res = solve_cluster(s, rec_p, wq_p, best_p, c, t_cut, legacy, f, sl,
                                            prune, scale)
                        passed += res[1]
                        evaluated += res[2]
                        if res[3] == 0:
                            extra += 4 * res[0] + 32 * res[1]
                            if prune and popcount(s) >= 5:
                                extra += 16
                        continue
                    best_v = _NEG_INF
                    best_a = s & -s
                    for g in range(n_chunks):
                        idx = (q * n_chunks + g) * nlm + cl
                        v = part_v[idx]
                        a = np.int64(part_a[idx])
                        nbytes += PART_BYTES
                        if v > best_v or (v == best_v and v != _NEG_INF and a > best_a):
                            best_v = v
                            best_a = a
                    t_s = rec_p[s, _T]
                    if cl != 0 and not unsplittable(t_s, t_cut, legacy):
                        pt = parent_terms(t_s, c)
                        low = cl & -cl
                        # A = (C_h, low | ·), B = (∅, ·) ≠ ∅; then A = (∅, low | ·), B = (C_h, ·)
                        res = scan_splits(s, hbase, cl ^ low, rec_p, wq_p, c, t_s, pt[0], pt[1],
                                          pt[2], f, sl, prune, scale, best_v, best_a)
                        res2 = scan_splits(s, np.int64(0), cl ^ low, rec_p, wq_p, c, t_s, pt[0],
                                           pt[1], pt[2], f, sl, prune, scale, res[0], res[1])
                        best_v = res2[0]
                        best_a = res2[1]
                        passed += res[2] + res2[2]
                        evaluated += res[3] + res2[3]
                        extra += 4 * ((np.int64(1) << popcount(cl)) - 1) + 32 * (res[2] + res2[2])
                    finish_cluster(s, best_v, best_a, rec_p, wq_p, best_p, c, f, scale)
        if count_traffic:
            cuda.atomic.add(traffic, 0, nbytes)
            cuda.atomic.add(traffic, 1, extra)
            cuda.atomic.add(traffic, 2, passed)
            cuda.atomic.add(traffic, 3, evaluated)

    return cross, same
