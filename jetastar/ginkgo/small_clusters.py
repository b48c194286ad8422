"""Exact best Ginkgo hierarchy over every subset of a few leaves (a numba kernel).

One subset DP serves every place that needs exact values of small clusters: ``h0`` on clusters of
at most ``EXACT_MAX_LEAVES`` leaves, A* solving small clusters without a search, the sparse
trellis valuing small parts of its vertices, and the test oracle ``subset_map``. It lives below
both :mod:`jetastar.ginkgo` and :mod:`jetastar.clustering` so that neither imports the other.

Subsets are local bitmasks over ``elems[:k]``. Each subset's summed 4-momentum comes from the
subset without its lowest bit (one addition), and its best split runs over the 2-partitions whose
left part holds that lowest bit (each 2-partition once): ``3^k / 2`` split evaluations in all.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .kernels import cluster_t, split_llh, t_of

_NEG_INF = -np.inf


@nb.njit(cache=True)
def subset_masses(elems, k, p, tl, c_in):  # pragma: no cover - numba
    """Summed 4-momentum, likelihood ``t`` and size of every subset of the leaves ``elems[:k]``.

    Args:
        elems: leaf indices (int64); only the first ``k`` are used.
        k: number of leaves.
        p: leaf 4-vectors ``(n, 4)`` of the whole jet.
        tl: the ``t`` the likelihood uses for each single leaf.
        c_in: likelihood constants row (its form decides ``t`` of clusters).

    Returns:
        ``(rec, t, size)`` indexed by local bitmask: ``rec (2**k, 4)`` summed 4-momenta, ``t`` and
        ``size`` (int64); each subset from the one without its lowest bit (one addition).
    """
    nm = 1 << k
    rec = np.zeros((nm, 4))
    t = np.zeros(nm)
    size = np.zeros(nm, dtype=np.int64)
    for m in range(1, nm):
        low = m & (-m)
        rest = m ^ low
        i = 0
        while (1 << i) != low:
            i += 1
        leaf = elems[i]
        for q in range(4):
            rec[m, q] = rec[rest, q] + p[leaf, q]
        size[m] = size[rest] + 1
        if rest == 0:
            t[m] = tl[leaf]
        else:
            t[m] = cluster_t(rec[m, 0], rec[m, 1], rec[m, 2], rec[m, 3], size[m], c_in)
    return rec, t, size


@nb.njit(cache=True)
def subset_dp(elems, k, p, tl, c_in, c_top, best, arg, max_size):  # pragma: no cover - numba
    """Best log-likelihood of a hierarchy over every subset of the leaves ``elems[:k]``.

    Args:
        elems: leaf indices (int64); only the first ``k`` are used (``k ≤ 30``).
        k: number of leaves.
        p: leaf 4-vectors ``(n, 4)`` of the whole jet.
        tl: the ``t`` the likelihood uses for each single leaf (see ``heuristic_tables``).
        c_in: likelihood constants row for inner splits (rate λ).
        c_top: constants row for the split of the full set ``elems[:k]`` (λ_R when it is the jet).
        best: output ``(2**k,)``: best log-likelihood of each local subset mask (``0`` for one leaf,
            ``−∞`` when no finite hierarchy exists, for the empty set and for subsets of more than
            ``max_size`` leaves).
        arg: output ``(2**k,)`` int64: left part (local mask) of each subset's best split.
        max_size: subsets of more leaves are skipped (pass ``k`` for all of them).

    Returns:
        The number of splits scored.

    Example:
        >>> import numpy as np
        >>> from jetastar.clustering import exact_trellis
        >>> from jetastar.ginkgo import ShowerParams, generate
        >>> from jetastar.ginkgo.heuristics import heuristic_tables
        >>> jet = generate(1, ShowerParams.w(), seed=1, min_leaves=5, max_leaves=5)[0]
        >>> p, tl, _, _, _, consts, _ = heuristic_tables(jet)
        >>> best, arg = np.empty(32), np.empty(32, dtype=np.int64)
        >>> _ = subset_dp(np.arange(5), 5, p, tl, consts[0], consts[1], best, arg, 5)
        >>> bool(abs(best[31] - exact_trellis(jet, progress=False).log_likelihood) < 1e-9)
        True
    """
    nm = 1 << k
    full = nm - 1
    rec, t, size = subset_masses(elems, k, p, tl, c_in)
    best[0] = _NEG_INF  # the empty set
    arg[0] = 0
    n_splits = 0
    for m in range(1, nm):
        arg[m] = 0
        if size[m] == 1:
            best[m] = 0.0
            continue
        if size[m] > max_size:
            best[m] = _NEG_INF
            continue
        c = c_top if m == full else c_in
        low = m & (-m)
        rest = m ^ low
        sub = (rest - 1) & rest
        bv = _NEG_INF
        ba = low
        while True:
            a = low | sub
            b = m ^ a
            if best[a] > _NEG_INF and best[b] > _NEG_INF:
                v = split_llh(t[a], t[b], t_of(rec[a, 0] + rec[b, 0], rec[a, 1] + rec[b, 1],
                                               rec[a, 2] + rec[b, 2], rec[a, 3] + rec[b, 3]), c)
                n_splits += 1
                v += best[a] + best[b]
                if v > bv:
                    bv = v
                    ba = a
            if sub == 0:
                break
            sub = (sub - 1) & rest
        best[m] = bv
        arg[m] = ba
    return n_splits
