"""CUDA kernels of the exact trellis (see :mod:`jetastar.clustering.gpu`): imported only when a GPU
(or the CUDA simulator) is used.

Layout on the device, for ``B`` jets of ``n`` leaves solved together: ``node[j, s]`` is the
four-float64 record ``(t, map, log_z, count)`` of cluster bitmask ``s`` of jet ``j`` (the CPU
trellis's layout, so the solved table is copied back into a :class:`~jetastar.clustering.Trellis`
as it is), ``best[j, s]`` (int32) the part holding the lowest leaf of the arg-max split, and
``count_i[j, s]`` the exact int64 tree count (up to 18 leaves; a ``(1, 1)`` dummy above, where the
count is the float64 column).

The physics is not written here: the split score is
:func:`jetastar.ginkgo.kernels.split_llh_given_parent` with :func:`~jetastar.ginkgo.kernels.parent_terms`,
and the prune test :func:`jetastar.clustering._subsets.unsplittable`, the CPU kernels' own
``@numba.njit`` functions, which numba's CUDA target compiles for the device from the same Python
source (and which the CUDA simulator calls as they are). Their constants row is copied into a
thread-local array, which both targets pass to them as a plain 1-d float64 array.

Work decomposition. Clusters are solved size by size (clusters of one size only read smaller
ones). The ``i``-th cluster of size ``k`` is found by colex unranking (:func:`unrank`, a binomial
table), so no list of masks is stored. A cluster's splits are the submasks ``sub`` of ``rest``
(the cluster minus its lowest leaf), part ``a = lowest | sub``; they are dealt to ``P = 2**g``
threads: thread ``p`` fixes the ``g`` lowest bits of ``rest`` to the bits of ``p`` and walks the
submasks of the remaining bits with ``h = (h - 1) & H``. With ``P = 1`` a thread writes the
cluster's results; otherwise it writes a partial (best value and part, the streaming
log-sum-exp's ``(max, sum)``, the count) that :func:`combine_parts` merges. Ties of the best value
go to the larger part ``a``, which is the split the CPU trellis keeps (it walks ``sub``
downwards and keeps the first best), so both give the same tree.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from ..._cuda import load_cuda, simulator_enabled
from ...ginkgo.kernels import FORM_LEGACY, parent_terms, split_llh_given_parent
from .._subsets import read_tree, unsplittable
from ._map_kernels import finish_cluster, scan_splits, warm_start
from ._trellis_kernels import lse_add, lse_value

cuda = load_cuda()

if simulator_enabled():  # pragma: no branch - one of the two, per process

    def _plain(a):  # pragma: no cover - simulator only
        """In the CUDA simulator: the numpy array behind a kernel's array argument, so that it
        can be handed to an ``@numba.njit`` function (on a GPU this is the array itself)."""
        inner = getattr(a, "_item", a)
        return getattr(inner, "_ary", inner)

else:

    @cuda.jit(device=True)
    def _plain(a):  # pragma: no cover - device code
        """A kernel's array argument as it is (see the simulator twin above)."""
        return a

_NEG_INF = -np.inf
# columns of a node record (as in _trellis_kernels)
_T, _MAP, _LOG_Z, _COUNT = 0, 1, 2, 3
# layout of a constants row (jetastar.ginkgo.likelihood.likelihood_constants)
_ROW_TCUT, _ROW_FORM, _N_CONST = 0, 4, 5


@cuda.jit(device=True)
def unrank(i, k, n, binom):  # pragma: no cover - device code
    """The ``i``-th ``k``-leaf cluster of ``n`` leaves in colex order (``binom[c, j] = C(c, j)``)."""
    s = np.int64(0)
    r = np.int64(i)
    c = n
    for j in range(k, 0, -1):
        c -= 1
        while binom[c, j] > r:
            c -= 1
        s |= np.int64(1) << c
        r -= binom[c, j]
    return s


@cuda.jit(device=True)
def _work_item(tid, n_parts, n_clusters, i0, k, n, binom):  # pragma: no cover - device code
    """Thread ``tid``'s ``(part, jet, cluster mask)``: part ``tid % n_parts`` of cluster
    ``i0 + (tid // n_parts) % n_clusters`` (size ``k``) of jet ``tid // (n_parts * n_clusters)``."""
    q = tid // n_parts
    j = q // n_clusters
    return tid % n_parts, j, unrank(i0 + q - j * n_clusters, k, n, binom)


@cuda.jit(device=True)
def _lowest_bits(rest, g):  # pragma: no cover - device code
    """Mask of the ``g`` lowest set bits of ``rest``."""
    out = np.int64(0)
    r = rest
    for _ in range(g):
        lb = r & -r
        out |= lb
        r ^= lb
    return out


@cuda.jit(device=True)
def _deposit(p, bits):  # pragma: no cover - device code
    """The bits of ``p`` placed on the set bits of ``bits``, lowest first."""
    out = np.int64(0)
    m = bits
    k = 0
    while m != 0:
        lb = m & -m
        if (p >> k) & 1:
            out |= lb
        k += 1
        m ^= lb
    return out


#: :func:`_deposit` and :func:`_lowest_bits` for the tiled kernels
#: (:mod:`jetastar.clustering.exact._gpu_tiled`), and :func:`_plain` for the tiled MAP's
#: (:mod:`jetastar.clustering.exact._gpu_tiled_map`)
deposit = _deposit
lowest_bits = _lowest_bits
plain = _plain


@cuda.jit(cache=True)
def set_t(offset, size, buf, node):  # pragma: no cover - device code
    """``node[j, s, T]`` for the flat indices ``offset .. offset + size - 1`` of ``(j, s)`` from
    ``buf`` (the ``t`` made on the host by :func:`jetastar.clustering.exact.gpu._host_t`, so
    that every cut decision is the CPU's: no fused multiply-add touches ``t``)."""
    m = node.shape[1]
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for i in range(start, size, stride):
        q = offset + i
        j = q // m
        node[j, q - j * m, _T] = buf[i]


@cuda.jit(cache=True)
def init_leaves(n, node, best, count_i, exact_count):  # pragma: no cover - device code
    """Leaf clusters: MAP 0, log Z 0, one tree; the empty mask gets ``-inf`` and count 0."""
    n_jets = node.shape[0]
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for tid in range(start, n_jets * (n + 1), stride):
        j = tid // (n + 1)
        i = tid - j * (n + 1)
        s = np.int64(0) if i == n else np.int64(1) << i
        v = _NEG_INF if i == n else 0.0
        node[j, s, _MAP] = v
        node[j, s, _LOG_Z] = v
        node[j, s, _COUNT] = 0.0 if i == n else 1.0
        best[j, s] = 0
        if exact_count:
            count_i[j, s] = 0 if i == n else 1


@cuda.jit(cache=True)
def map_trees(
    n, node, best, count_i, exact_count, children, root, root_count,
):  # pragma: no cover - device code
    """Per jet (one thread each): the MAP tree read top-down through ``best`` into ``children``
    ``(B, 2n - 1, 2)`` with the numbering of :func:`jetastar.clustering._engine.tree_from_best`
    (leaf ``i`` is node ``i``; internal nodes in the order that function makes them), and the
    whole jet's record into ``root`` ``(B, 4)`` and, when ``exact_count``, its exact count into
    ``root_count`` ``(B,)``. Only these are copied back when a batch needs results, not the
    tables."""
    n_jets = node.shape[0]
    full = (np.int64(1) << n) - 1
    st_mask = cuda.local.array(64, nb.int64)
    st_parent = cuda.local.array(64, nb.int64)
    st_side = cuda.local.array(64, nb.int64)
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for j in range(start, n_jets, stride):
        for c in range(2 * n - 1):
            children[j, c, 0] = -1
            children[j, c, 1] = -1
        for c in range(4):
            root[j, c] = node[j, full, c]
        if exact_count:
            root_count[j] = count_i[j, full]
        read_tree(_plain(best)[j], n, _plain(children)[j], 0, st_mask, st_parent, st_side)


@cuda.jit(cache=True)
def count_impossible(n, node, impossible_out):  # pragma: no cover - device code
    """``impossible_out[j]`` += the clusters of jet ``j`` (mask ≥ 1) whose MAP is ``-inf`` (the
    ``clusters_impossible`` statistic of a trellis, without copying its table back)."""
    n_jets = node.shape[0]
    m = np.int64(1) << n
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for tid in range(start, n_jets * m, stride):
        j = tid // m
        s = tid - j * m
        if s > 0 and node[j, s, _MAP] == _NEG_INF:
            cuda.atomic.add(impossible_out, j, 1)


@cuda.jit(device=True)
def _write_cluster(
    node, count_i, best, j, s, best_v, best_a, z_max, z_acc, n_f, n_i, want_z, exact_count,
):  # pragma: no cover - device code
    """Store cluster ``s`` of jet ``j``: MAP, arg-max part, and with ``want_z`` log Z and the tree
    count (int64 in ``count_i`` when ``exact_count``, else the float64 column)."""
    node[j, s, _MAP] = best_v
    best[j, s] = best_a
    if want_z:
        node[j, s, _LOG_Z] = lse_value(z_max, z_acc)
        if exact_count:
            count_i[j, s] = n_i
            node[j, s, _COUNT] = 0.0
        else:
            node[j, s, _COUNT] = n_f


@cuda.jit(cache=True)
def solve_parts(
    k, n, g, i0, n_clusters, binom, node, count_i, best, consts, want_z, exact_count, prune,
    part_v, part_a, part_zmax, part_zacc, part_cf, part_ci,
):  # pragma: no cover - device code
    """The splits of the clusters ``i0 .. i0 + n_clusters - 1`` of size ``k`` of every jet.

    Thread ``tid`` takes part ``p = tid % P`` of cluster ``i0 + (tid // P) % n_clusters`` of jet
    ``tid // (P * n_clusters)`` (``P = 2**g``; module docstring). ``want_z=False`` computes the MAP
    only. With ``g == 0`` the results go to ``node`` / ``best`` / ``count_i``, otherwise to the
    ``part_*`` arrays at index ``tid`` (merged by :func:`combine_parts`).
    """
    n_parts = np.int64(1) << g
    n_jets = node.shape[0]
    full = (np.int64(1) << n) - 1
    c = cuda.local.array(_N_CONST, nb.float64)
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for tid in range(start, n_jets * n_clusters * n_parts, stride):
        p, j, s = _work_item(tid, n_parts, n_clusters, i0, k, n, binom)
        row = 1 if s == full else 0
        for x in range(_N_CONST):
            c[x] = consts[j, row, x]
        low = s & -s
        rest = s ^ low
        t_s = node[j, s, _T]
        best_v = _NEG_INF
        best_a = low
        z_max = _NEG_INF
        z_acc = 0.0
        n_f = 0.0
        n_i = np.int64(0)
        if not (prune and unsplittable(t_s, c[_ROW_TCUT], c[_ROW_FORM] == FORM_LEGACY)):
            fixed = _lowest_bits(rest, g)
            free = rest ^ fixed
            f = _deposit(p, fixed)
            pt = parent_terms(t_s, c)
            h = free
            while True:
                sub = f | h
                if sub != rest:
                    a = low | sub
                    b = rest ^ sub
                    m_a = node[j, a, _MAP]
                    m_b = node[j, b, _MAP]
                    if m_a != _NEG_INF and m_b != _NEG_INF:
                        psi = split_llh_given_parent(
                            node[j, a, _T], node[j, b, _T], t_s, pt[0], pt[1], pt[2], c
                        )
                        if psi != _NEG_INF:
                            v = psi + m_a + m_b
                            if v > best_v:
                                best_v = v
                                best_a = a
                            if want_z:
                                z_max, z_acc = lse_add(
                                    z_max, z_acc, psi + node[j, a, _LOG_Z] + node[j, b, _LOG_Z]
                                )
                                if exact_count:
                                    n_i += count_i[j, a] * count_i[j, b]
                                else:
                                    n_f += node[j, a, _COUNT] * node[j, b, _COUNT]
                if h == 0:
                    break
                h = (h - 1) & free
        if n_parts == 1:
            _write_cluster(node, count_i, best, j, s, best_v, best_a, z_max, z_acc, n_f, n_i,
                           want_z, exact_count)
        else:
            part_v[tid] = best_v
            part_a[tid] = best_a
            part_zmax[tid] = z_max
            part_zacc[tid] = z_acc
            part_cf[tid] = n_f
            part_ci[tid] = n_i


@cuda.jit(cache=True)
def combine_parts(
    k, n, g, i0, n_clusters, binom, node, count_i, best, want_z, exact_count,
    part_v, part_a, part_zmax, part_zacc, part_cf, part_ci,
):  # pragma: no cover - device code
    """Merge the ``P = 2**g`` partial results of each cluster written by :func:`solve_parts`."""
    n_parts = np.int64(1) << g
    n_jets = node.shape[0]
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for q in range(start, n_jets * n_clusters, stride):
        j = q // n_clusters
        s = unrank(i0 + q - j * n_clusters, k, n, binom)
        best_v = _NEG_INF
        best_a = s & -s
        z_max = _NEG_INF
        for p in range(n_parts):
            idx = q * n_parts + p
            v = part_v[idx]
            a = part_a[idx]
            if v > best_v or (v == best_v and v != _NEG_INF and a > best_a):
                best_v = v
                best_a = a
            if part_zmax[idx] > z_max:
                z_max = part_zmax[idx]
        z_acc = 0.0
        n_f = 0.0
        n_i = np.int64(0)
        if want_z:
            for p in range(n_parts):
                idx = q * n_parts + p
                if part_zmax[idx] != _NEG_INF:
                    z_acc += part_zacc[idx] * math.exp(part_zmax[idx] - z_max)
                n_f += part_cf[idx]
                n_i += part_ci[idx]
        _write_cluster(node, count_i, best, j, s, best_v, best_a, z_max, z_acc, n_f, n_i,
                       want_z, exact_count)


@cuda.jit(cache=True)
def parent_table(n, node, consts):  # pragma: no cover - device code
    """Before the marginals: each cluster's :func:`parent_terms` ``log t`` and stop term, written
    over its MAP and count columns (the marginals pass works on its own copy of the table and
    reads neither), so :func:`pull_marginals` does not recompute them for every split."""
    n_jets = node.shape[0]
    m = np.int64(1) << n
    full = m - 1
    c = cuda.local.array(_N_CONST, nb.float64)
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for tid in range(start, n_jets * m, stride):
        j = tid // m
        s = tid - j * m
        if s == 0:
            continue
        row = 1 if s == full else 0
        for x in range(_N_CONST):
            c[x] = consts[j, row, x]
        pt = parent_terms(node[j, s, _T], c)
        node[j, s, _MAP] = pt[1]
        node[j, s, _COUNT] = pt[2]


@cuda.jit(cache=True)
def pull_marginals(
    k, n, g, i0, n_clusters, binom, node, consts, marg, part_m, visited,
):  # pragma: no cover - device code
    """Posterior marginals of the clusters ``i0 ..`` of size ``k`` (``k < n``), pulled from their
    parents.

    ``marg[c] = Σ_{d ⊆ ~c, d ≠ ∅} marg[c|d] · exp(ψ(c, d) + log Z(c) + log Z(d) − log Z(c|d))``:
    every parent ``c | d`` (a larger cluster, already final) that splits into ``c`` and ``d``. The
    complement's bits are dealt to ``P = 2**g`` threads as in :func:`solve_parts`; with ``g > 0``
    the partial sums go to ``part_m`` (summed by :func:`combine_marginals`). Same total work as the
    CPU's push formulation, and no two threads write one cluster. The parents' ``log t`` and stop
    term come from :func:`parent_table` (computed once per cluster; per split, the pass took 4–13 %
    longer on an H100 for the same marginals bit for bit); ``√t`` is taken here. ``visited[0]``
    counts the (cluster, parent) pairs the threads walked (one atomic add per thread).
    """
    n_parts = np.int64(1) << g
    n_jets = node.shape[0]
    full = (np.int64(1) << n) - 1
    c0 = cuda.local.array(_N_CONST, nb.float64)
    c1 = cuda.local.array(_N_CONST, nb.float64)
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for tid in range(start, n_jets * n_clusters * n_parts, stride):
        p, j, s = _work_item(tid, n_parts, n_clusters, i0, k, n, binom)
        comp = full ^ s
        lz_s = node[j, s, _LOG_Z]
        t_s = node[j, s, _T]
        total = 0.0
        walked = np.int64(0)
        if lz_s != _NEG_INF:
            for x in range(_N_CONST):
                c0[x] = consts[j, 0, x]
                c1[x] = consts[j, 1, x]
            fixed = _lowest_bits(comp, g)
            free = comp ^ fixed
            f = _deposit(p, fixed)
            h = free
            while True:
                d = f | h
                if d != 0:
                    walked += 1
                    par = s | d
                    w = marg[j, par]
                    lz_p = node[j, par, _LOG_Z]
                    lz_d = node[j, d, _LOG_Z]
                    if w > 0.0 and lz_p != _NEG_INF and lz_d != _NEG_INF:
                        t_p = node[j, par, _T]
                        # parent_terms(t_p): √t_p here, the other two from parent_table
                        s_p = math.sqrt(t_p) if t_p > 0.0 else math.nan
                        log_tp = node[j, par, _MAP]
                        stop = node[j, par, _COUNT]
                        if par == full:
                            psi = split_llh_given_parent(t_s, node[j, d, _T], t_p, s_p, log_tp,
                                                         stop, c1)
                        else:
                            psi = split_llh_given_parent(t_s, node[j, d, _T], t_p, s_p, log_tp,
                                                         stop, c0)
                        if psi != _NEG_INF:
                            total += w * math.exp(psi + lz_s + lz_d - lz_p)
                if h == 0:
                    break
                h = (h - 1) & free
        if n_parts == 1:
            marg[j, s] = min(total, 1.0)
        else:
            part_m[tid] = total
        if walked:
            cuda.atomic.add(visited, 0, walked)


@cuda.jit(cache=True)
def combine_marginals(k, n, g, i0, n_clusters, binom, marg, part_m):  # pragma: no cover
    """Sum the partial marginals of :func:`pull_marginals`."""
    n_parts = np.int64(1) << g
    n_jets = marg.shape[0]
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for q in range(start, n_jets * n_clusters, stride):
        j = q // n_clusters
        s = unrank(i0 + q - j * n_clusters, k, n, binom)
        total = 0.0
        for p in range(n_parts):
            total += part_m[q * n_parts + p]
        marg[j, s] = min(total, 1.0)


# ---------------------------------------------------------------------- bound-pruned MAP only
@cuda.jit(cache=True)
def map_bounded_parts(
    k, n, g, i0, n_clusters, binom, rec, wq, best, consts, root_floor, root_slack, prune, scale,
    part_v, part_a,
):  # pragma: no cover - device code
    """The exact MAP engine's bound-pruned scan (:mod:`jetastar.clustering._map_kernels`) of the
    clusters ``i0 ..`` of size ``k`` of one jet, each dealt to ``P = 2**g`` threads.

    Every thread runs the CPU's own functions: :func:`~jetastar.clustering.exact._map_kernels.warm_start`
    (the same three splits in every part), then
    :func:`~jetastar.clustering.exact._map_kernels.scan_splits` over its part of the splits with its own
    bar. A part only skips splits whose bound is below its own best (never above the cluster's),
    so the merged value and arg-max are the CPU engine's. ``g == 0`` writes the cluster through
    :func:`~jetastar.clustering.exact._map_kernels.finish_cluster`; otherwise ``part_v`` / ``part_a`` get
    the partial best (merged by :func:`map_bounded_combine`).
    """
    n_parts = np.int64(1) << g
    full = (np.int64(1) << n) - 1
    c = cuda.local.array(_N_CONST, nb.float64)
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for tid in range(start, n_clusters * n_parts, stride):
        p = tid % n_parts
        s = unrank(i0 + tid // n_parts, k, n, binom)
        row = 1 if s == full else 0
        for x in range(_N_CONST):
            c[x] = consts[row, x]
        floor = root_floor if s == full else _NEG_INF
        slack = root_slack if s == full else 0.0
        low = s & -s
        rest = s ^ low
        t_s = rec[s, 0]
        best_v = _NEG_INF
        best_a = low
        rec_p, wq_p, best_p = _plain(rec), _plain(wq), _plain(best)
        if not unsplittable(t_s, c[_ROW_TCUT], c[_ROW_FORM] == FORM_LEGACY):
            pt = parent_terms(t_s, c)
            ws = warm_start(s, rec_p, wq_p, best_p, c, t_s, pt[0], pt[1], pt[2], floor, slack,
                            prune, scale)
            fixed = _lowest_bits(rest, g)
            res = scan_splits(s, _deposit(p, fixed), rest ^ fixed, rec_p, wq_p, c, t_s, pt[0],
                              pt[1], pt[2], floor, slack, prune, scale, ws[0], ws[1])
            best_v = res[0]
            best_a = res[1]
        if n_parts == 1:
            finish_cluster(s, best_v, best_a, rec_p, wq_p, best_p, c, floor, scale)
        else:
            part_v[tid] = best_v
            part_a[tid] = best_a


@cuda.jit(cache=True)
def map_bounded_combine(
    k, n, g, i0, n_clusters, binom, rec, wq, best, consts, root_floor, scale, part_v, part_a,
):  # pragma: no cover - device code
    """Merge the partial bests of :func:`map_bounded_parts` (ties to the larger part) and write."""
    n_parts = np.int64(1) << g
    full = (np.int64(1) << n) - 1
    c = cuda.local.array(_N_CONST, nb.float64)
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for q in range(start, n_clusters, stride):
        s = unrank(i0 + q, k, n, binom)
        row = 1 if s == full else 0
        for x in range(_N_CONST):
            c[x] = consts[row, x]
        best_v = _NEG_INF
        best_a = s & -s
        for p in range(n_parts):
            v = part_v[q * n_parts + p]
            a = part_a[q * n_parts + p]
            if v > best_v or (v == best_v and v != _NEG_INF and a > best_a):
                best_v = v
                best_a = a
        finish_cluster(s, best_v, best_a, _plain(rec), _plain(wq), _plain(best), c,
                       root_floor if s == full else _NEG_INF, scale)
