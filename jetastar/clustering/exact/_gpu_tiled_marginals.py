"""Tiled CUDA kernels of the posterior marginals (see
:func:`jetastar.clustering.gpu.gpu_marginals_tiled`): the pull formulation of
:func:`~jetastar.clustering.exact._gpu_kernels.pull_marginals` with each record read from global
memory once per many (cluster, parent) pairs. Imported only when a GPU (or the CUDA simulator) is
used.

Pull formulation. For a cluster ``c`` (neither ``∅`` nor the whole jet) with a finite ``log Z``::

    marg[c] = min(1, Σ_{d ⊆ ~c, d ≠ ∅} marg[c|d] · exp(ψ(c, d) + log Z(c) + log Z(d) − log Z(c|d)))

``marg[full] = 1``; the parent ``c|d`` is larger than ``c``, so it is final when ``c`` is solved.

Tiles (as :mod:`~jetastar.clustering.exact._gpu_tiled`): a mask is cut into its ``l`` low bits and
its high bits, ``s = (s_h << l) | s_l``; the tile of ``s_h`` is ``2**l`` contiguous records. The
pairs ``(c, d)`` of a cluster ``c = (c_h, c_l)`` are grouped by the sibling's high part ``d_h``:

* *cross*, ``d_h ≠ ∅`` (``d_h ⊆ ~c_h``): the siblings are in the tile of ``d_h`` and the parents in
  the tile of ``c_h | d_h``, which has more high bits than ``c_h`` (solved before it). A block loads
  the two tiles into shared memory (``t``, ``log Z`` of the siblings; ``t``, ``log Z``, ``marg`` of the
  parents, whose :func:`~jetastar.ginkgo.kernels.parent_terms` it computes once per record) and
  pulls from them every low-bit combination of every cluster of the tile of ``c_h``: ``3**l``
  pairs. :func:`cross` deals the ``2**(h - p) - 1`` sibling high parts of a tile (``h`` high bits,
  ``p = |c_h|``) to ``G`` blocks (chunks), each writing one partial sum per cluster.
* *same-high*, ``d_h = ∅``: the sibling is in the ``∅`` tile and the parent ``(c_h, c_l | d_l)`` in
  ``c``'s own tile, with a larger low part. :func:`same` merges the ``G`` partials of each cluster
  (in chunk order), then runs a pass over the low part's size from large to small inside the block
  (a barrier between sizes), clamps each total to 1 and writes the finished tile.

High parts are solved from the most high bits to the fewest (one level per launch pair), so every
parent a tile reads is final.

Work inside a block. In :func:`cross` a cluster ``c_l`` pulls over the subsets of its low
complement ``e = ~c_l`` (``2**|e|`` per sibling high part); the clusters are cut into *work items* of
at most ``2**part_bits`` of them (:func:`~jetastar.clustering.exact._gpu_tiled.work_item` on the
complement, by fixing its lowest bits), dealt to the threads in order of size, so the threads of a
warp run loops of one length; the parts of a cluster are summed in item order through shared
memory at the end. In :func:`same` each cluster is owned by one thread. Every sum has one fixed
order, so the results do not depend on the launch.

Shared memory per block: 8 arrays of ``2**l`` float64 (the sibling tile's ``t`` and ``log Z``; the
parent tile's ``t``, ``log Z``, marginal and three parent terms): 32 KiB at ``l = 9``.

Input layout: ``tz[j, s] = (t, log Z)`` (16 bytes, the two columns of the solved records the pass
reads, packed by the host so that every byte a tile load moves is used) and ``marg[j, s]``.

Counters: with ``count_traffic`` every thread adds the bytes it reads from and writes to global
memory to ``traffic[0]`` (atomically; the figure
:func:`jetastar.clustering.gpu.tiled_marginal_bytes_per_split` predicts); ``walked[0]`` always
counts the (cluster, parent) pairs walked, as :func:`~jetastar.clustering.exact._gpu_kernels.pull_marginals`
counts them (every pair of a cluster with a finite ``log Z``).
"""

from __future__ import annotations

import math
from typing import Any

import numba as nb
import numpy as np

from ..._cuda import load_cuda
from ...ginkgo.kernels import parent_terms, split_llh_given_parent
from .._subsets import popcount
from ._gpu_kernels import deposit, unrank
from ._gpu_tiled import deal_item, kernel_pair, sorted_cluster, work_items

cuda = load_cuda()

_NEG_INF = -np.inf
_N_CONST = 5
#: rows of the shared parent tile
_P_T, _P_Z, _P_M, _P_S, _P_L, _P_STOP = 0, 1, 2, 3, 4, 5

_CACHE: dict[tuple[int, int, int], tuple[Any, Any]] = {}


def kernels(low_bits: int, thread_bits: int, min_part_bits: int) -> tuple[Any, Any, int]:
    """The ``(cross, same)`` marginal kernels for tiles of ``2**low_bits`` records and blocks of
    ``2**thread_bits`` threads (compiled once per setting; shared arrays need compile-time sizes).

    Args:
        low_bits: ``l``, the low bits of a tile.
        thread_bits: ``log2`` of the threads per block (at most ``low_bits``).
        min_part_bits: a work item of :func:`cross` pulls at most ``2**part_bits`` low-bit pairs
            per sibling high part, ``part_bits`` the smallest value from this one whose items fit
            the block's reduction space (``2 * 2**low_bits`` slots).

    Returns:
        The two kernels (see the module docstring; launch them with ``2**thread_bits`` threads)
        and ``part_bits``.
    """
    return kernel_pair(_make, _CACHE, low_bits, thread_bits, min_part_bits)


@cuda.jit(device=True)
def _load_parent(sh, i, s, t_s, lz_s, m_s, full, c0, c1):  # pragma: no cover - device code
    """Record ``s`` as a parent into column ``i`` of the shared parent tile ``sh``: ``t``,
    ``log Z``, marginal and its :func:`parent_terms` (whole jet's constants row ``c1`` for the
    whole jet, ``c0`` otherwise)."""
    if s == full:
        pt = parent_terms(t_s, c1)
    else:
        pt = parent_terms(t_s, c0)
    sh[_P_T, i] = t_s
    sh[_P_Z, i] = lz_s
    sh[_P_M, i] = m_s
    sh[_P_S, i] = pt[0]
    sh[_P_L, i] = pt[1]
    sh[_P_STOP, i] = pt[2]


@cuda.jit(device=True)
def _pull(t_c, lz_c, t_d, lz_d, sh, ip, whole, c0, c1):  # pragma: no cover - device code
    """One (cluster, parent) pair's term ``marg[P] · exp(ψ(c, d) + log Z(c) + log Z(d) − log Z(P))``
    with the parent at column ``ip`` of the shared parent tile (0 where the parent has no mass or
    a part is impossible), ψ scored as :func:`~jetastar.clustering.exact._gpu_kernels.pull_marginals`
    scores it (cluster first)."""
    w = sh[_P_M, ip]
    lz_p = sh[_P_Z, ip]
    if not (w > 0.0 and lz_p != _NEG_INF and lz_d != _NEG_INF):
        return 0.0
    if whole:
        psi = split_llh_given_parent(t_c, t_d, sh[_P_T, ip], sh[_P_S, ip], sh[_P_L, ip],
                                     sh[_P_STOP, ip], c1)
    else:
        psi = split_llh_given_parent(t_c, t_d, sh[_P_T, ip], sh[_P_S, ip], sh[_P_L, ip],
                                     sh[_P_STOP, ip], c0)
    if psi == _NEG_INF:
        return 0.0
    return w * math.exp(psi + lz_c + lz_d - lz_p)


def _make(low_bits: int, thread_bits: int, part_bits: int) -> tuple[Any, Any]:
    size = 1 << low_bits
    n_threads = 1 << thread_bits
    per_thread = size // n_threads  # clusters per thread in `same`
    per_item = -(-work_items(low_bits, part_bits) // n_threads)  # work items per thread in `cross`

    @cuda.jit
    def cross(
        p, n, nl, n_work, i0, count, n_chunks, binom, tz, marg, consts, part_m, count_traffic,
        traffic, walked,
    ):  # pragma: no cover - device code
        """Cross pairs of the tiles ``i0 .. i0 + count - 1`` of level ``p`` (clusters' high parts
        of ``p`` bits, colex order), the sibling high parts dealt to ``n_chunks`` blocks per tile;
        block ``q`` is chunk ``q % n_chunks`` of tile ``i0 + (q // n_chunks) % count`` of jet
        ``q // (count * n_chunks)`` and writes its partial sums at ``q * 2**nl + c_l``."""
        sh_d = cuda.shared.array((2, size), nb.float64)  # siblings' t, log Z
        sh_p = cuda.shared.array((6, size), nb.float64)  # parents (rows _P_*); then the merge
        acc = cuda.local.array(per_item, nb.float64)
        tc = cuda.local.array(per_item, nb.float64)
        zc = cuda.local.array(per_item, nb.float64)
        live = cuda.local.array(per_item, nb.int64)
        cls = cuda.local.array(per_item, nb.int64)
        fix = cuda.local.array(per_item, nb.int64)
        free = cuda.local.array(per_item, nb.int64)
        parts = cuda.local.array(per_item, nb.int64)
        gs = cuda.local.array(per_item, nb.int64)
        c0 = cuda.local.array(_N_CONST, nb.float64)
        c1 = cuda.local.array(_N_CONST, nb.float64)
        tid = cuda.threadIdx.x
        n_jets = tz.shape[0]
        hb = n - nl
        nlm = np.int64(1) << nl
        full = (np.int64(1) << n) - 1
        n_pairs = (np.int64(1) << (hb - p)) - 1
        per = (n_pairs + n_chunks - 1) // n_chunks
        n_items = n_jets * count * n_chunks
        for q in range(cuda.blockIdx.x, n_items, cuda.gridDim.x):
            j = q // (count * n_chunks)
            r = q - j * count * n_chunks
            tile = i0 + r // n_chunks
            chunk = r - (r // n_chunks) * n_chunks
            ch = unrank(tile, p, hb, binom)
            hbase = ch << nl
            comp_h = ((np.int64(1) << hb) - 1) ^ ch
            for x in range(_N_CONST):
                c0[x] = consts[j, 0, x]
                c1[x] = consts[j, 1, x]
            nbytes = np.int64(0)
            n_walked = np.int64(0)
            cuda.syncthreads()
            for i in range(tid, nlm, n_threads):  # the tile's own clusters, once
                sh_d[0, i] = tz[j, hbase | i, 0]
                sh_d[1, i] = tz[j, hbase | i, 1]
                nbytes += 16
            cuda.syncthreads()
            for k in range(per_item):
                w = k * n_threads + tid
                acc[k] = 0.0
                live[k] = 0
                if w < n_work:
                    # (the item's mask is the low complement the cluster pulls over)
                    e = deal_item(k, w, nl, part_bits, binom, parts, gs, fix, free)
                    cl = e ^ (nlm - 1)
                    cls[k] = cl
                    tc[k] = sh_d[0, cl]
                    zc[k] = sh_d[1, cl]
                    if (hbase | cl) != 0 and zc[k] != _NEG_INF:
                        live[k] = 1
            r0 = chunk * per
            r1 = r0 + per if r0 + per < n_pairs else n_pairs
            for pr in range(r0, r1):
                dh = deposit(pr + 1, comp_h)
                dbase = dh << nl
                pbase = (ch | dh) << nl
                cuda.syncthreads()
                for i in range(tid, nlm, n_threads):
                    sh_d[0, i] = tz[j, dbase | i, 0]
                    sh_d[1, i] = tz[j, dbase | i, 1]
                    _load_parent(sh_p, i, pbase | i, tz[j, pbase | i, 0], tz[j, pbase | i, 1],
                                 marg[j, pbase | i], full, c0, c1)
                    nbytes += 40
                cuda.syncthreads()
                for k in range(per_item):
                    if live[k] == 0:
                        continue
                    cl = cls[k]
                    fr = free[k]
                    total = acc[k]
                    h = fr
                    while True:
                        dl = fix[k] | h
                        pl = cl | dl
                        total += _pull(tc[k], zc[k], sh_d[0, dl], sh_d[1, dl], sh_p, pl,
                                       (pbase | pl) == full, c0, c1)
                        n_walked += 1
                        if h == 0:
                            break
                        h = (h - 1) & fr
                    acc[k] = total
            # the parts of each cluster, summed in item order through shared memory
            cuda.syncthreads()
            for k in range(per_item):
                w = k * n_threads + tid
                if w < n_work:
                    sh_p[w // size, w % size] = acc[k]
            cuda.syncthreads()
            for k in range(per_item):
                w = k * n_threads + tid
                if w >= n_work or parts[k] != 0:
                    continue
                total = acc[k]
                for u in range(w + 1, w + (np.int64(1) << gs[k])):
                    total += sh_p[u // size, u % size]
                part_m[q * nlm + cls[k]] = total
                nbytes += 8
            if count_traffic:
                cuda.atomic.add(traffic, 0, nbytes)
            if n_walked:
                cuda.atomic.add(walked, 0, n_walked)

    @cuda.jit
    def same(
        p, n, nl, i0, count, n_chunks, binom, tz, marg, consts, part_m, count_traffic, traffic,
        walked,
    ):  # pragma: no cover - device code
        """Finish the tiles ``i0 .. i0 + count - 1`` of level ``p``: sum the ``n_chunks`` partials
        of :func:`cross` per cluster, pull the same-high pairs by a pass over the low part's size
        from large to small inside the block, clamp to 1, write the marginals. Block ``q`` is tile
        ``i0 + q % count`` of jet ``q // count``."""
        sh_d = cuda.shared.array((2, size), nb.float64)  # the ∅ tile's t, log Z (siblings)
        sh_p = cuda.shared.array((6, size), nb.float64)  # the own tile (parents, rows _P_*)
        acc = cuda.local.array(per_thread, nb.float64)
        cls = cuda.local.array(per_thread, nb.int64)
        c0 = cuda.local.array(_N_CONST, nb.float64)
        c1 = cuda.local.array(_N_CONST, nb.float64)
        tid = cuda.threadIdx.x
        n_jets = tz.shape[0]
        hb = n - nl
        nlm = np.int64(1) << nl
        full = (np.int64(1) << n) - 1
        n_items = n_jets * count
        for q in range(cuda.blockIdx.x, n_items, cuda.gridDim.x):
            j = q // count
            ch = unrank(i0 + q - j * count, p, hb, binom)
            hbase = ch << nl
            for x in range(_N_CONST):
                c0[x] = consts[j, 0, x]
                c1[x] = consts[j, 1, x]
            nbytes = np.int64(0)
            n_walked = np.int64(0)
            cuda.syncthreads()
            for i in range(tid, nlm, n_threads):
                t_s = tz[j, hbase | i, 0]
                lz_s = tz[j, hbase | i, 1]
                nbytes += 16
                _load_parent(sh_p, i, hbase | i, t_s, lz_s, 0.0, full, c0, c1)
                if p == 0:  # the own tile is the ∅ tile
                    sh_d[0, i] = t_s
                    sh_d[1, i] = lz_s
                else:
                    sh_d[0, i] = tz[j, i, 0]
                    sh_d[1, i] = tz[j, i, 1]
                    nbytes += 16
            for k in range(per_thread):
                w = k * n_threads + tid
                cls[k] = -1
                if w >= nlm:  # a jet smaller than the tile
                    continue
                cl = sorted_cluster(w, nl, binom)  # in order of size: a warp's are alike
                cls[k] = cl
                total = 0.0
                for g in range(n_chunks):
                    total += part_m[(q * n_chunks + g) * nlm + cl]
                    nbytes += 8
                acc[k] = total
            for step in range(nl + 1):
                size_l = nl - step
                cuda.syncthreads()  # every larger low part of the tile is final in sh_p
                for k in range(per_thread):
                    cl = cls[k]
                    if cl < 0 or popcount(cl) != size_l:
                        continue
                    s = hbase | cl
                    t_c = sh_p[_P_T, cl]
                    lz_c = sh_p[_P_Z, cl]
                    if s == full:
                        total = 1.0
                    elif s == 0 or lz_c == _NEG_INF:
                        total = 0.0
                    else:
                        total = acc[k]
                        e = (nlm - 1) ^ cl
                        dl = e
                        while dl != 0:
                            pl = cl | dl
                            total += _pull(t_c, lz_c, sh_d[0, dl], sh_d[1, dl], sh_p, pl,
                                           (hbase | pl) == full, c0, c1)
                            n_walked += 1
                            dl = (dl - 1) & e
                        if total > 1.0:  # (rounding)
                            total = 1.0
                    sh_p[_P_M, cl] = total
                    marg[j, s] = total
                    nbytes += 8
            if count_traffic:
                cuda.atomic.add(traffic, 0, nbytes)
            if n_walked:
                cuda.atomic.add(walked, 0, n_walked)

    return cross, same
