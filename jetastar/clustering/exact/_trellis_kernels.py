"""Numba kernels of the exact cluster trellis (see :mod:`jetastar.clustering.trellis`).

Layout: one record of four float64 per cluster bitmask ``s`` (``0 .. 2**n - 1``), ``node[s]`` =
``(t, map, log_z, count)`` — the likelihood's squared mass, the best log-likelihood of a hierarchy
over ``s``, the log of the summed likelihood of all hierarchies over ``s``, and the number of
hierarchies with non-zero likelihood (float64, or int64 bits read through ``node_i``, an int64 view
of the same memory, when the count is exact). One record is 32 bytes, so the DP touches one cache
line per part of a split. ``best[s]`` (int32) is the part ``A`` of the arg-max split. Clusters are
processed by size; clusters of one size are independent, so each size is one parallel loop.

The only model-specific code is :func:`_parent_terms` / :func:`_split_score`, the log-score ``ψ`` of
splitting cluster ``s`` into ``a`` and ``b``; the DP, the marginal pass and the sampler call them and
nothing else of the model. Every kernel takes a model ``code`` and a per-subset feature array
``feat``:

* ``code == GINKGO`` (0): the Ginkgo likelihood kernel called with the ``t`` of the two parts and of
  the parent (column ``T``); ``feat`` is a dummy ``(1, 4)`` array.
* otherwise a hierarchical-clustering cost model of :mod:`jetastar.costs` (its ``code``), with
  ``feat`` the ``(2**n, 4)`` :meth:`~jetastar.costs.CostModel.all_subset_features`:
  ``ψ = −cost(a, b)``, evaluated in the cost's parent form ``γ(s) (α(s) − β(a) − β(b))``
  (:func:`jetastar.costs.split_cost_given_parent`, equal to
  ``split_cost_kernel(code, feat[a], feat[b], feat[s])`` up to rounding): ``β`` of every mask is
  stored in column ``T`` (:func:`fill_part_values`) and ``(α, γ)`` of the parent come from
  ``feat[s]`` once per cluster, so a split reads only the two part records the DP reads anyway
  (twice as fast as reading ``feat[a]`` and ``feat[b]`` at 18 points). The score is minus the cost,
  so the MAP is the minimum-cost hierarchy and ``log Z = log Σ_trees exp(−cost(tree))`` is the
  partition function of the Gibbs distribution over hierarchies at temperature 1. No cluster is
  pruned.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from ..._refcount import borrowed
from ..._sorting import argsort_stable
from ...costs import GINKGO_CODE, parent_cost_terms, part_value_kernel, split_cost_given_parent
from ...ginkgo.kernels import FORM_LEGACY
from ...ginkgo.likelihood import SPACELIKE_TOLERANCE, parent_terms, split_llh_given_parent
from .._chunk_kernels import DONE, NOT_RUN, run_in_slices
from .._subsets import fill_subset_t, popcount, unsplittable
from ._map_kernels import exact_splits, map_tree, small_to_solve

_NEG_INF = -np.inf

#: columns of a node record
T, MAP, LOG_Z, COUNT = 0, 1, 2, 3
N_COLUMNS = 4

#: model code of the Ginkgo likelihood (cost models use their own ``code``, >= 1)
GINKGO = GINKGO_CODE


@nb.njit(cache=True)
def _parent_terms(node, s, c, code, feat):  # pragma: no cover - numba
    """What the split score of every split of ``s`` shares, computed once per cluster.

    Ginkgo: :func:`jetastar.ginkgo.likelihood.parent_terms`; cost model: ``(α(s), γ(s), 0)``.
    """
    if code == GINKGO:
        return parent_terms(node[s, T], c)
    alpha, gamma = parent_cost_terms(code, feat[s])
    return alpha, gamma, 0.0


@nb.njit(cache=True, inline="always")
def _split_score(node, a, b, s, pt, c, code):  # pragma: no cover - numba
    """Log-score ψ of splitting cluster ``s`` into ``a`` and ``b`` (finite or ``-inf``).

    Args:
        node: the per-mask records (column ``T`` holds the likelihood's ``t``, or a cost model's
            part value ``β``).
        a, b, s: the two parts and the parent (bitmasks, ``a | b == s``).
        pt: ``_parent_terms(node, s, c, code, feat)``.
        c: the constants row for this split (the ``λ_R`` row for the whole jet).
        code: :data:`GINKGO` or a cost model's code.
    """
    if code == GINKGO:
        return split_llh_given_parent(node[a, T], node[b, T], node[s, T], pt[0], pt[1], pt[2], c)
    return -split_cost_given_parent(code, node[a, T], node[b, T], pt[0], pt[1])


@nb.njit(cache=True)
def lse_add(z_max, z_acc, z):  # pragma: no cover - numba
    """One term ``z`` added to a streaming log-sum-exp held as ``(z_max, z_acc)``
    (``log Σ = z_max + log z_acc``; start from ``(-inf, 0)``); returns the new pair."""
    if z > z_max:
        return z, z_acc * math.exp(z_max - z) + 1.0
    return z_max, z_acc + math.exp(z - z_max)


@nb.njit(cache=True)
def lse_value(z_max, z_acc):  # pragma: no cover - numba
    """The log of the sum a streaming log-sum-exp ``(z_max, z_acc)`` holds (``-inf`` if empty)."""
    return z_max + math.log(z_acc) if z_max != _NEG_INF else _NEG_INF


@nb.njit(cache=True)
def fill_part_values(code, feat, out):  # pragma: no cover - numba
    """``out[s] = β(s)`` (:func:`jetastar.costs.part_value_kernel`) for every mask ``s``."""
    for s in range(feat.shape[0]):
        out[s] = part_value_kernel(code, feat[s])


@nb.njit(cache=True)
def _solve_cluster(
    s, node, node_i, best, exact_count, c, t_cut, legacy, prune, code, feat
):  # pragma: no cover - numba
    """MAP, arg-max split, log Z and tree count of cluster ``s`` (size >= 2) from its subsets.

    Returns:
        ``(splits evaluated, splits skipped, pruned)``.
    """
    low = s & -s
    rest = s ^ low
    # default arg-max: split off the lowest leaf (kept when every split is impossible)
    best_a = low
    if prune and unsplittable(node[s, T], t_cut, legacy):
        node[s, MAP] = _NEG_INF
        node[s, LOG_Z] = _NEG_INF
        best[s] = best_a
        if exact_count:
            node_i[s, COUNT] = 0
        else:
            node[s, COUNT] = 0.0
        return 0, 0, 1
    pt = _parent_terms(node, s, c, code, feat)
    best_v = _NEG_INF
    z_max = _NEG_INF  # streaming log-sum-exp: sum = z_max + log(z_acc)
    z_acc = 0.0
    n_i = 0
    n_f = 0.0
    evaluated = 0
    skipped = 0
    sub = (rest - 1) & rest
    while True:
        a = low | sub
        b = rest ^ sub
        m_a = node[a, MAP]
        m_b = node[b, MAP]
        if m_a == _NEG_INF or m_b == _NEG_INF:
            skipped += 1
        else:
            evaluated += 1
            psi = _split_score(node, a, b, s, pt, c, code)
            if psi != _NEG_INF:
                v = psi + m_a + m_b
                if v > best_v:
                    best_v = v
                    best_a = a
                z = psi + node[a, LOG_Z] + node[b, LOG_Z]
                z_max, z_acc = lse_add(z_max, z_acc, z)
                if exact_count:
                    n_i += node_i[a, COUNT] * node_i[b, COUNT]
                else:
                    n_f += node[a, COUNT] * node[b, COUNT]
        if sub == 0:
            break
        sub = (sub - 1) & rest
    node[s, MAP] = best_v
    best[s] = best_a
    node[s, LOG_Z] = lse_value(z_max, z_acc)
    if exact_count:
        node_i[s, COUNT] = n_i
    else:
        node[s, COUNT] = n_f
    return evaluated, skipped, 0


@nb.njit(cache=True, parallel=True)
def dp_range(
    order, start, stop, full, node, node_i, best, exact_count, consts, t_cut, legacy, prune, code,
    feat,
):  # pragma: no cover - numba
    """Solve the clusters ``order[start:stop]`` (all of one size) in parallel.

    Args:
        order: int32 masks grouped by size (:func:`masks_by_size`).
        start, stop: the slice of ``order`` to solve; every subset of those clusters must be solved.
        full: mask of the whole jet (its split uses ``consts[1]``, every other split ``consts[0]``).
        node, node_i: the ``(2**n, 4)`` records and their int64 view (see module docstring).
        best: int32 arg-max part per mask.
        exact_count: count in int64 (``node_i``) instead of float64.
        consts: ``(2, 5)`` likelihood constants.
        t_cut, legacy: the cut and form, for skipping clusters that cannot be split.
        prune: skip such clusters (results are identical either way).
        code: :data:`GINKGO` or a cost model's code.
        feat: per-mask cost features (a dummy ``(1, 4)`` array for the Ginkgo likelihood).

    Returns:
        ``(splits evaluated, splits skipped because a part is impossible, clusters pruned)``.
    """
    # views without reference counts for the per-cluster calls (jetastar._refcount; the caller
    # holds the arrays)
    node, node_i, best, consts, feat = borrowed((node, node_i, best, consts, feat))
    evaluated = 0
    skipped = 0
    pruned = 0
    for j in nb.prange(start, stop):
        s = np.int64(order[j])
        row = 1 if s == full else 0
        e, k, p = _solve_cluster(
            s, node, node_i, best, exact_count, consts[row], t_cut, legacy, prune, code, feat
        )
        evaluated += e
        skipped += k
        pruned += p
    return evaluated, skipped, pruned


@nb.njit(cache=True)
def dp_range_serial(
    order, start, stop, full, node, node_i, best, exact_count, consts, t_cut, legacy, prune, code,
    feat,
):  # pragma: no cover - numba
    """:func:`dp_range` on one thread (no parallel launch cost, for small slices)."""
    # views without reference counts for the per-cluster calls (jetastar._refcount; the caller
    # holds the arrays)
    node, node_i, best, consts, feat = borrowed((node, node_i, best, consts, feat))
    evaluated = 0
    skipped = 0
    pruned = 0
    for j in range(start, stop):
        s = np.int64(order[j])
        row = 1 if s == full else 0
        e, k, p = _solve_cluster(
            s, node, node_i, best, exact_count, consts[row], t_cut, legacy, prune, code, feat
        )
        evaluated += e
        skipped += k
        pruned += p
    return evaluated, skipped, pruned


@nb.njit(cache=True)
def dp_all_serial(
    n, node, node_i, best, exact_count, consts, t_cut, legacy, prune, code, feat
):  # pragma: no cover - numba
    """Every cluster of an ``n``-leaf jet on this thread, in increasing mask order (a cluster's
    subsets are smaller masks, so each is solved after them; the values are those of the
    size-by-size :func:`dp_range`, which solves each cluster with the same :func:`_solve_cluster`).
    For many small jets, one per thread (the columnar path); the leaves must be initialised
    (:func:`init_leaves`).

    Returns:
        ``(splits evaluated, splits skipped, clusters pruned)`` as :func:`dp_range`.
    """
    # views without reference counts for the per-cluster calls (jetastar._refcount; the caller
    # holds the arrays)
    node, node_i, best, consts, feat = borrowed((node, node_i, best, consts, feat))
    full = (np.int64(1) << n) - 1
    evaluated = 0
    skipped = 0
    pruned = 0
    for s in range(3, full + 1):
        if s & (s - 1) == 0:  # a leaf
            continue
        row = 1 if s == full else 0
        e, k, p = _solve_cluster(
            np.int64(s), node, node_i, best, exact_count, consts[row], t_cut, legacy, prune, code,
            feat,
        )
        evaluated += e
        skipped += k
        pruned += p
    return evaluated, skipped, pruned


@nb.njit(cache=True)
def init_leaves(n, node, node_i, best, exact_count):  # pragma: no cover - numba
    """Leaf clusters: MAP 0, log Z 0, one tree; the empty mask gets ``-inf``."""
    for i in range(n):
        s = np.int64(1) << i
        node[s, MAP] = 0.0
        node[s, LOG_Z] = 0.0
        best[s] = 0
        if exact_count:
            node_i[s, COUNT] = 1
        else:
            node[s, COUNT] = 1.0
    node[0, MAP] = _NEG_INF
    node[0, LOG_Z] = _NEG_INF
    node[0, COUNT] = 0.0


@nb.njit(cache=True, parallel=True)
def marginals_push(order, start, stop, full, node, marg, acc, consts, code, feat):  # pragma: no cover
    """Outside pass for the parents ``order[start:stop]`` (one size): push their probability down.

    A parent ``p`` that is in the tree with probability ``marg[p]`` passes
    ``marg[p] * exp(psi(a, b) + log_z[a] + log_z[b] - log_z[p])`` to both parts of each split
    ``(a, b)``. Parents are dealt round-robin to the ``R = acc.shape[0]`` rows of ``acc`` (one per
    thread), so writes never collide; :func:`marginals_gather` sums the rows of a size before that
    size is processed as parents.

    Returns:
        Number of split scores evaluated.
    """
    n_rows = acc.shape[0]
    evaluated = 0
    for r in nb.prange(n_rows):
        evaluated += push_row(
            r, n_rows, order, start, stop, full, node, marg, acc, consts, code, feat
        )
    return evaluated


@nb.njit(cache=True)
def push_row(
    r, n_rows, order, start, stop, full, node, marg, acc, consts, code, feat
):  # pragma: no cover - numba
    """The parents ``order[start + r :: n_rows]`` (below ``stop``) of :func:`marginals_push`.

    Called directly (``r = 0, n_rows = 1``) it is the one-thread version for small slices.
    """
    count = 0
    for j in range(start + r, stop, n_rows):
        p = np.int64(order[j])
        w = marg[p]
        lz_p = node[p, LOG_Z]
        if not w > 0.0 or lz_p == _NEG_INF:
            continue
        c = consts[1] if p == full else consts[0]
        pt = _parent_terms(node, p, c, code, feat)
        low = p & -p
        rest = p ^ low
        sub = (rest - 1) & rest
        while True:
            a = low | sub
            b = rest ^ sub
            lz_a = node[a, LOG_Z]
            lz_b = node[b, LOG_Z]
            if lz_a != _NEG_INF and lz_b != _NEG_INF:
                count += 1
                psi = _split_score(node, a, b, p, pt, c, code)
                if psi != _NEG_INF:
                    q = w * math.exp(psi + lz_a + lz_b - lz_p)
                    acc[r, a] += q
                    acc[r, b] += q
            if sub == 0:
                break
            sub = (sub - 1) & rest
    return count


@nb.njit(cache=True, parallel=True)
def marginals_gather(order, start, stop, marg, acc):  # pragma: no cover - numba
    """``marg[s] = min(1, sum of acc[:, s])`` for the clusters ``order[start:stop]``."""
    for j in nb.prange(start, stop):
        _gather_one(np.int64(order[j]), marg, acc)


@nb.njit(cache=True)
def marginals_gather_serial(order, start, stop, marg, acc):  # pragma: no cover - numba
    """:func:`marginals_gather` on one thread."""
    for j in range(start, stop):
        _gather_one(np.int64(order[j]), marg, acc)


@nb.njit(cache=True)
def _gather_one(s, marg, acc):  # pragma: no cover - numba
    total = 0.0
    for r in range(acc.shape[0]):
        total += acc[r, s]
    marg[s] = min(total, 1.0)


@nb.njit(cache=True)
def _split_weights(s, row, node, consts, code, feat, parts, cum):  # pragma: no cover - numba
    """Cumulative posterior weights of the splits of ``s``; fills ``parts``/``cum``, returns count."""
    low = s & -s
    rest = s ^ low
    lz_s = node[s, LOG_Z]
    c = consts[row]
    pt = _parent_terms(node, s, c, code, feat)
    total = 0.0
    k = 0
    sub = (rest - 1) & rest
    while True:
        a = low | sub
        b = rest ^ sub
        lz_a = node[a, LOG_Z]
        lz_b = node[b, LOG_Z]
        if lz_a != _NEG_INF and lz_b != _NEG_INF:
            psi = _split_score(node, a, b, s, pt, c, code)
            if psi != _NEG_INF:
                total += math.exp(psi + lz_a + lz_b - lz_s)
                parts[k] = a
                cum[k] = total
                k += 1
        if sub == 0:
            break
        sub = (sub - 1) & rest
    return k


@nb.njit(cache=True)
def sample_trees(n, full, node, consts, code, feat, uniforms):  # pragma: no cover - numba
    """Exact posterior samples of hierarchies, all samples advanced together.

    Work items ``(cluster, sample, parent node, side)`` are processed largest clusters first; the
    items of one size are sorted by cluster, so the split weights of a cluster are computed once
    per call and shared by every sample that contains it.

    Args:
        n: number of leaves (>= 2).
        full: mask of the whole jet; its ``log_z`` must be finite.
        node: per-mask records of a solved trellis.
        consts: ``(2, 5)`` likelihood constants.
        code, feat: the model (see :func:`_split_score`).
        uniforms: ``(n_samples, n - 1)`` uniform draws in [0, 1), one per internal node.

    Returns:
        ``(n_samples, 2n - 1, 2)`` int64 children arrays; nodes ``0 .. n-1`` are the leaves
        (leaf ``i`` = node ``i``), internal nodes are numbered from ``n`` in creation order.
    """
    n_samples = uniforms.shape[0]
    n_nodes = 2 * n - 1
    children = np.full((n_samples, n_nodes, 2), -1, dtype=np.int64)
    next_node = np.full(n_samples, n, dtype=np.int64)
    # pending items: cluster, sample, parent node, side, cluster size
    cap = n_samples * n
    item_mask = np.empty(cap, dtype=np.int64)
    item_sample = np.empty(cap, dtype=np.int64)
    item_parent = np.empty(cap, dtype=np.int64)
    item_side = np.empty(cap, dtype=np.int64)
    item_size = np.empty(cap, dtype=np.int64)
    n_items = 0
    for i in range(n_samples):
        item_mask[n_items] = full
        item_sample[n_items] = i
        item_parent[n_items] = -1
        item_side[n_items] = 0
        item_size[n_items] = n
        n_items += 1
    max_splits = (np.int64(1) << (n - 1)) - 1
    parts = np.empty(max_splits, dtype=np.int64)
    cum = np.empty(max_splits, dtype=np.float64)
    for size in range(n, 1, -1):
        sel = np.flatnonzero(item_size[:n_items] == size)
        if sel.shape[0] == 0:
            continue
        keys = item_mask[sel]
        idx = sel[argsort_stable(keys.astype(np.float64))]  # masks < 2**53: exact
        j = 0
        while j < idx.shape[0]:
            s = item_mask[idx[j]]
            row = 1 if s == full else 0
            k = _split_weights(s, row, node, consts, code, feat, parts, cum)
            total = cum[k - 1]
            while j < idx.shape[0] and item_mask[idx[j]] == s:
                it = idx[j]
                smp = item_sample[it]
                new = next_node[smp]
                next_node[smp] += 1
                if item_parent[it] >= 0:
                    children[smp, item_parent[it], item_side[it]] = new
                u = uniforms[smp, new - n] * total
                pick = np.searchsorted(cum[:k], u, side="right")
                if pick >= k:
                    pick = k - 1
                a = parts[pick]
                b = s ^ a
                for side in range(2):
                    part = a if side == 0 else b
                    ps = popcount(part)
                    if ps == 1:
                        children[smp, new, side] = popcount(part - 1)
                    else:
                        item_mask[n_items] = part
                        item_sample[n_items] = smp
                        item_parent[n_items] = new
                        item_side[n_items] = side
                        item_size[n_items] = ps
                        n_items += 1
                j += 1
    return children


# ---------------------------------------------------------------------- the chunk kernel
@nb.njit(cache=True)
def _trellis_jet(j, leaves, loff, noff, which, consts, run, children, ll, log_z, n_trees, outcome,
                 counts, tol):  # pragma: no cover - numba
    """The full trellis of jet ``j`` (see :func:`trellis_chunk`)."""
    n = small_to_solve(j, leaves, loff, which, run, outcome, tol)
    if n == 0:
        return
    a = loff[j]
    c = consts[which[j]]
    m = np.int64(1) << n
    full = m - 1
    node = np.empty((m, N_COLUMNS), dtype=np.float64)
    node_i = node.view(np.int64)
    best = np.zeros(m, dtype=np.int32)
    fill_subset_t(leaves[a:a + n], c[0], node[:, T])
    init_leaves(n, node, node_i, best, True)
    e, k, p = dp_all_serial(n, node, node_i, best, True, c, c[0, 0], c[0, 4] == FORM_LEGACY, True,
                            GINKGO, np.zeros((1, 4), dtype=np.float64))
    counts[j, 0] = e
    counts[j, 1] = k
    counts[j, 2] = p
    impossible = 0
    for s in range(1, m):
        if node[s, MAP] == -np.inf:
            impossible += 1
    counts[j, 3] = impossible
    ll[j] = node[full, MAP]
    log_z[j] = node[full, LOG_Z]
    n_trees[j] = node_i[full, COUNT]
    map_tree(best, n, children, noff[j])
    outcome[j] = DONE


@nb.njit(cache=True, parallel=True)
def _trellis_parallel(jobs, toff, leaves, loff, noff, which, consts, run, children, ll, log_z,
                      n_trees, outcome, counts, tol):  # pragma: no cover - numba
    for t in nb.prange(toff.shape[0] - 1):
        for i in range(toff[t], toff[t + 1]):
            _trellis_jet(jobs[i], leaves, loff, noff, which, consts, run, children, ll, log_z,
                         n_trees, outcome, counts, tol)


@nb.njit(cache=True)
def _trellis_serial(jobs, toff, leaves, loff, noff, which, consts, run, children, ll, log_z,
                    n_trees, outcome, counts, tol):  # pragma: no cover - numba
    """The serial twin of :func:`_trellis_parallel`."""
    for i in range(jobs.shape[0]):
        _trellis_jet(jobs[i], leaves, loff, noff, which, consts, run, children, ll, log_z,
                     n_trees, outcome, counts, tol)


#: splits per kernel call of :func:`trellis_chunk`: ~0.1 s at the measured ~45 ns per split
#: (every split is scored: ψ and a log-sum-exp term), so that an interrupt is seen between calls
TRELLIS_SLICE_SPLITS = 2_000_000


def trellis_chunk(
    leaves: np.ndarray, loff: np.ndarray, noff: np.ndarray, which: np.ndarray,
    consts: np.ndarray, run: np.ndarray, parallel: bool,
) -> tuple[np.ndarray, ...]:
    """The full trellis (:func:`~jetastar.clustering.exact_trellis`: MAP, log Z and the exact
    tree count) of every jet of a chunk of up to :data:`EXACT_CHUNK_MAX` leaves, one jet per
    thread, in kernel calls of about :data:`TRELLIS_SLICE_SPLITS` splits each, with Ctrl-C held
    during a call and raised between calls; larger jets and jets of one leaf are
    :data:`PER_JET`. Every cluster is solved by the trellis' own ``_solve_cluster`` (through
    ``dp_all_serial``), so values, trees and counters are those of the per-jet trellis.

    Args:
        leaves, loff, noff, consts, which, run, parallel: as in :func:`map_chunk`.

    Returns:
        ``(children (K, 2), log_likelihood (J,), log_z (J,), n_trees (J,) int64, outcome (J,),
        counts (J, 4))``: ``counts`` are the trellis' splits evaluated, splits skipped, clusters
        pruned and clusters impossible.
    """
    n_jets = loff.shape[0] - 1
    children = np.full((int(noff[-1]), 2), -1, dtype=np.int64)
    ll = np.full(n_jets, np.nan)
    log_z = np.full(n_jets, np.nan)
    n_trees = np.zeros(n_jets, dtype=np.int64)
    outcome = np.full(n_jets, NOT_RUN, dtype=np.int64)
    counts = np.zeros((n_jets, 4), dtype=np.int64)
    kernel = _trellis_parallel if parallel else _trellis_serial
    run_in_slices(kernel, exact_splits(loff, run), TRELLIS_SLICE_SPLITS, parallel, leaves, loff,
                   noff, which, consts, run, children, ll, log_z, n_trees, outcome, counts,
                   SPACELIKE_TOLERANCE)
    return children, ll, log_z, n_trees, outcome, counts
