"""Shared pieces of the agglomerative baselines (greedy, beam search, kt family, MCTS).

Every baseline builds a tree bottom-up by merges, recorded as a *history*: row ``k`` of an
``(n - 1, 2)`` int64 array holds the two node ids merged at step ``k``; leaves are nodes ``0 .. n-1``
and the cluster made at step ``k`` is node ``n + k``. The split log-likelihood of every merge comes
from :func:`jetastar.ginkgo.likelihood.split_llh` with ``t`` of a cluster from
:func:`~jetastar.ginkgo.likelihood.cluster_t` and ``t_parent = t_of(p_a + p_b)``; the merge that
makes the whole jet uses the root row (``λ_R``) of the constants. Scoring a history step by step
therefore gives exactly the per-node values of :func:`jetastar.ginkgo.node_log_likelihoods`.
:func:`canonical_results` turns histories into trees in canonical node order and sums those values
in that order, so the totals equal :func:`jetastar.ginkgo.log_likelihood` of the returned trees to
the last bit, and equal trees found by different merge orders get identical totals.

Example:
    >>> import numpy as np
    >>> tree, _ = canonical_result(np.array([[2, 1], [3, 0]]), np.zeros(2), 3)
    >>> tree.to_nested()
    (0, (1, 2))
"""

from __future__ import annotations

import math
from typing import Any

import numba as nb
import numpy as np

from .._sorting import argsort_stable
from ..errors import InvalidJetError
from ..ginkgo.likelihood import check_likelihood, cluster_t, split_llh, t_of
from ..jet import Jet
from ..tree import Tree

__all__ = [
    "canonical_into",
    "canonical_result",
    "canonical_results",
    "check_jet",
    "greedy_kernel",
    "jet_arrays",
    "numpy_sum",
]

_NEG_INF = -math.inf


def check_jet(jet: Any, algorithm: str) -> Jet:
    """Validate the ``jet`` argument of a clustering function.

    Raises:
        InvalidJetError: if ``jet`` is not a :class:`jetastar.Jet`.
    """
    if not isinstance(jet, Jet):
        raise InvalidJetError(
            f"{algorithm} needs a jetastar.Jet, got {type(jet).__name__}", field="jet"
        )
    return jet


def jet_arrays(jet: Jet, likelihood: str) -> tuple[np.ndarray, np.ndarray]:
    """Contiguous float64 leaves ``(n, 4)`` and kernel constants ``(2, 5)`` of a jet.

    Raises:
        ValueError: for an unknown likelihood name (listing the valid ones).
    """
    check_likelihood(likelihood)
    leaves = np.ascontiguousarray(jet.leaves, dtype=np.float64)
    consts = np.ascontiguousarray(jet.likelihood_constants(likelihood), dtype=np.float64)
    return leaves, consts


def canonical_results(
    history: np.ndarray, steps: np.ndarray, n: int, jet: object = None
) -> tuple[list[Tree], np.ndarray]:
    """Trees of merge histories in canonical node order, and their exact log-likelihoods.

    Internal nodes are numbered by (cluster size, smallest leaf) as in :meth:`Tree.canonical`, so the
    same tree reached by different merge orders gets the same node order. The per-step values are
    summed in that order, so the total is bit-identical for equal trees and equals
    :func:`jetastar.ginkgo.log_likelihood` of the returned tree exactly.

    Args:
        history: ``(k, n - 1, 2)`` node ids merged at each step of ``k`` histories (leaves
            ``0..n-1``, step ``j`` makes node ``n + j``).
        steps: ``(k, n - 1)`` split log-likelihood of each step.
        n: number of leaves.
        jet: jet label for error messages.

    Returns:
        ``(trees, log_likelihoods)``.
    """
    children, full = _canonical_kernel(
        np.ascontiguousarray(history, dtype=np.int64), np.ascontiguousarray(steps), n
    )
    totals = full.sum(axis=1)  # numpy's pairwise sum per row, as in log_likelihood
    leaf_of_node = np.full(2 * n - 1, -1, dtype=np.int64)
    leaf_of_node[:n] = np.arange(n)
    # the kernel's children arrays are trees by construction (canonical order: the root is the
    # last node); validating each of a 1000-wide beam's trees took a fifth of beam search's time
    root = 2 * n - 2
    trees = [Tree._trusted(children[q], leaf_of_node, root) for q in range(len(children))]
    return trees, totals


def canonical_result(
    history: np.ndarray, steps: np.ndarray, n: int, jet: object = None
) -> tuple[Tree, float]:
    """:func:`canonical_results` for one history ``(n - 1, 2)``: ``(tree, log_likelihood)``."""
    trees, totals = canonical_results(history[None], np.asarray(steps)[None], n, jet)
    return trees[0], float(totals[0])


# ---------------------------------------------------------------------- numba kernels
@nb.njit(cache=True)
def leaf_ts(leaves: np.ndarray, c: np.ndarray) -> np.ndarray:  # pragma: no cover - numba
    """``t`` of every single leaf for the likelihood form of ``c`` (legacy: 0)."""
    n = leaves.shape[0]
    out = np.empty(n, dtype=np.float64)
    for i in range(n):
        out[i] = cluster_t(leaves[i, 0], leaves[i, 1], leaves[i, 2], leaves[i, 3], np.int64(1), c)
    return out


@nb.njit(cache=True, inline="always")
def pair_llh(p: np.ndarray, t: np.ndarray, a: int, b: int, c: np.ndarray) -> float:
    """Split log-likelihood of merging rows ``a`` and ``b`` of ``p`` / ``t`` (numba kernel)."""
    tp = t_of(p[a, 0] + p[b, 0], p[a, 1] + p[b, 1], p[a, 2] + p[b, 2], p[a, 3] + p[b, 3])
    return split_llh(t[a], t[b], tp, c)


@nb.njit(cache=True)
def score_history(
    leaves: np.ndarray, consts: np.ndarray, history: np.ndarray
) -> np.ndarray:  # pragma: no cover - numba
    """Per-step split log-likelihoods of a merge history (root row for the last step)."""
    n = leaves.shape[0]
    p = np.empty((2 * n - 1, 4), dtype=np.float64)
    t = np.empty(2 * n - 1, dtype=np.float64)
    lt = leaf_ts(leaves, consts[0])
    for i in range(n):  # loops, not slice assignments: much less to compile
        for d in range(4):
            p[i, d] = leaves[i, d]
        t[i] = lt[i]
    steps = np.empty(n - 1, dtype=np.float64)
    for k in range(n - 1):
        a = history[k, 0]
        b = history[k, 1]
        row = 1 if k == n - 2 else 0
        steps[k] = pair_llh(p, t, a, b, consts[row])
        node = n + k
        for d in range(4):
            p[node, d] = p[a, d] + p[b, d]
        t[node] = t_of(p[node, 0], p[node, 1], p[node, 2], p[node, 3])
    return steps


#: greedy keeps the value of every pair of clusters it has scored (a ``(2n - 1)²`` table) for jets
#: up to this size; larger jets score pairs again when needed (the table would be too large)
PAIR_CACHE_MAX = 256


@nb.njit(cache=True, inline="always")
def _pair_value(p, t, a, b, c, cache):  # pragma: no cover - numba
    """``pair_llh`` of nodes ``a`` and ``b`` through the pair table ``cache`` (NaN: not scored
    yet; a ``(0, 0)`` table: none). The value does not depend on the order of ``a`` and ``b``
    (bit for bit), so it is stored for both. Returns ``(value, evaluations made)``."""
    if cache.shape[0] == 0:
        return pair_llh(p, t, a, b, c), 1
    v = cache[a, b]
    if v != v:
        v = pair_llh(p, t, a, b, c)
        cache[a, b] = v
        cache[b, a] = v
        return v, 1
    return v, 0


@nb.njit(cache=True)
def _best_left(p, t, pos, k, node, c, cache):  # pragma: no cover - numba
    """First maximum over positions ``0 .. k-1`` of the merge of ``node`` with ``pos[j]``:
    ``(value, partner, evaluations made)``."""
    best_j = 0
    best, evals = _pair_value(p, t, node, pos[0], c, cache)
    for j in range(1, k):
        v, e = _pair_value(p, t, node, pos[j], c, cache)
        evals += e
        if v > best:
            best = v
            best_j = j
    return best, pos[best_j], evals


@nb.njit(cache=True)
def greedy_kernel(leaves, consts):  # pragma: no cover - numba
    """The greedy merges (:func:`jetastar.clustering.greedy`; beam search starts from them):
    the reference greedy. Returns (history, steps, first step with all candidates -inf or -1, evals).

    ``evals`` counts the split evaluations made: a pair scored once is looked up afterwards
    (jets up to :data:`PAIR_CACHE_MAX` leaves), which changes no choice and no value.
    """
    n = leaves.shape[0]
    c0 = consts[0]
    c1 = consts[1]
    n_nodes = 2 * n - 1
    p = np.empty((n_nodes, 4), dtype=np.float64)
    t = np.empty(n_nodes, dtype=np.float64)
    lt = leaf_ts(leaves, c0)
    for i in range(n):  # loops, not slice assignments: much less to compile
        for d in range(4):
            p[i, d] = leaves[i, d]
        t[i] = lt[i]
    pos = np.empty(n, dtype=np.int64)  # node id at each position of the active list
    nn_val = np.empty(n, dtype=np.float64)  # best merge with a cluster to the left
    nn_part = np.empty(n, dtype=np.int64)  # node id of that partner
    for k in range(n):
        pos[k] = k
    nn_val[0] = _NEG_INF
    nn_part[0] = -1
    if n <= PAIR_CACHE_MAX:
        cache = np.full((n_nodes, n_nodes), np.nan)  # pairs not scored yet
    else:
        cache = np.empty((0, 0), dtype=np.float64)
    evals = 0
    for k in range(1, n):
        nn_val[k], nn_part[k], e = _best_left(p, t, pos, k, pos[k], c0, cache)
        evals += e
    history = np.empty((n - 1, 2), dtype=np.int64)
    steps = np.empty(n - 1, dtype=np.float64)
    all_inf_step = -1
    m = n
    for s in range(n - 1):
        r = 1
        for k in range(2, m):
            if nn_val[k] > nn_val[r]:
                r = k
        if nn_val[r] == _NEG_INF and all_inf_step < 0:
            all_inf_step = s
        a = nn_part[r]  # left child: the stored partner
        b = pos[r]
        left = 0
        while pos[left] != a:
            left += 1
        node = n + s
        history[s, 0] = a
        history[s, 1] = b
        if m == 2:  # the root split: λ_R
            steps[s] = pair_llh(p, t, a, b, c1)
            evals += 1
        else:
            steps[s], e = _pair_value(p, t, a, b, c0, cache)
            evals += e
        for d in range(4):
            p[node, d] = p[a, d] + p[b, d]
        t[node] = t_of(p[node, 0], p[node, 1], p[node, 2], p[node, 3])
        # remove positions r and left (left < r)
        w = 0
        for k in range(m):
            if k == r or k == left:
                continue
            pos[w] = pos[k]
            nn_val[w] = nn_val[k]
            nn_part[w] = nn_part[k]
            w += 1
        m -= 2
        for k in range(m):
            if nn_part[k] == a or nn_part[k] == b:
                if k == 0:
                    nn_val[0] = _NEG_INF
                else:
                    nn_val[k], nn_part[k], e = _best_left(p, t, pos, k, pos[k], c0, cache)
                    evals += e
        pos[m] = node
        if m >= 1:
            nn_val[m], nn_part[m], e = _best_left(p, t, pos, m, node, c0, cache)
            evals += e
        else:
            nn_val[m] = _NEG_INF
            nn_part[m] = -1
        m += 1
    return history, steps, all_inf_step, evals


@nb.njit(cache=True)
def canonical_into(history, steps, n, children, full):  # pragma: no cover - numba
    """One merge history in canonical node order: fills ``children`` ``(2n - 1, 2)`` (leaves
    ``[-1, -1]``) and the per-node split values ``full`` ``(2n - 1,)`` (0 at leaves), as
    :func:`canonical_results` numbers them."""
    m = 2 * n - 1
    size = np.ones(m, dtype=np.int64)
    low = np.arange(m)
    key = np.empty(n - 1, dtype=np.float64)
    new_id = np.arange(m)
    for k in range(n):
        children[k, 0] = -1
        children[k, 1] = -1
        full[k] = 0.0
    for j in range(n - 1):
        a = history[j, 0]
        b = history[j, 1]
        size[n + j] = size[a] + size[b]
        low[n + j] = min(low[a], low[b])
        key[j] = size[n + j] * m + low[n + j]
    order = argsort_stable(key)  # distinct keys: any sort agrees
    for r in range(n - 1):
        new_id[n + order[r]] = n + r
    for j in range(n - 1):
        a = history[j, 0]
        b = history[j, 1]
        if low[a] > low[b]:
            a, b = b, a
        node = new_id[n + j]
        children[node, 0] = new_id[a]
        children[node, 1] = new_id[b]
        full[node] = steps[j]


@nb.njit(cache=True)
def _block_sum(a, start, n):  # pragma: no cover - numba
    """numpy's pairwise sum of at most 128 values (8 interleaved partial sums)."""
    if n < 8:
        res = 0.0
        for i in range(start, start + n):
            res += a[i]
        return res
    r0 = a[start]
    r1 = a[start + 1]
    r2 = a[start + 2]
    r3 = a[start + 3]
    r4 = a[start + 4]
    r5 = a[start + 5]
    r6 = a[start + 6]
    r7 = a[start + 7]
    i = 8
    stop = n - n % 8
    while i < stop:
        q = start + i
        r0 += a[q]
        r1 += a[q + 1]
        r2 += a[q + 2]
        r3 += a[q + 3]
        r4 += a[q + 4]
        r5 += a[q + 5]
        r6 += a[q + 6]
        r7 += a[q + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += a[start + i]
        i += 1
    return res


@nb.njit(cache=True)
def numpy_sum(a, start, n):  # pragma: no cover - numba
    """``a[start:start + n].sum()`` as numpy computes it (its pairwise summation, bit for bit),
    so that a kernel's tree totals equal :func:`jetastar.ginkgo.log_likelihood`'s.

    numpy halves a run of more than 128 values (the first half a multiple of 8 long) and adds the
    halves' sums; the halving is done here with an explicit stack (numba's cached kernels cannot
    call themselves).
    """
    if n <= 128:
        return _block_sum(a, start, n)
    depth = 64
    st_start = np.empty(depth, dtype=np.int64)
    st_n = np.empty(depth, dtype=np.int64)
    st_stage = np.empty(depth, dtype=np.int64)
    st_left = np.empty(depth, dtype=np.float64)
    top = 0
    st_start[0] = start
    st_n[0] = n
    st_stage[0] = 0
    ret = 0.0
    while top >= 0:
        s0 = st_start[top]
        n0 = st_n[top]
        if n0 <= 128:
            ret = _block_sum(a, s0, n0)
            top -= 1
            continue
        half = n0 // 2
        half -= half % 8
        if st_stage[top] == 0:
            st_stage[top] = 1
            top += 1
            st_start[top] = s0
            st_n[top] = half
            st_stage[top] = 0
        elif st_stage[top] == 1:
            st_left[top] = ret
            st_stage[top] = 2
            top += 1
            st_start[top] = s0 + half
            st_n[top] = n0 - half
            st_stage[top] = 0
        else:
            ret = st_left[top] + ret
            top -= 1
    return ret


@nb.njit(cache=True)
def _canonical_kernel(history, steps, n):  # pragma: no cover - numba
    """Canonical children arrays and per-node split values of ``k`` merge histories."""
    k = history.shape[0]
    m = 2 * n - 1
    children = np.full((k, m, 2), -1, dtype=np.int64)
    full = np.zeros((k, m), dtype=np.float64)
    for q in range(k):
        canonical_into(history[q], steps[q], n, children[q], full[q])
    return children, full
