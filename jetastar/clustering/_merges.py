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

from .._jit import kernel_helper
from .._refcount import borrowed
from .._sorting import argsort_stable
from ..errors import InvalidJetError
from ..ginkgo.kernels import bound_below, child_bound, split_llh_above
from ..ginkgo.likelihood import check_likelihood, cluster_t, split_llh, t_of
from ..jet import Jet
from ..tree import Tree

__all__ = [
    "G_ALL_INF",
    "G_DONE",
    "G_EVALS",
    "PAIR_TABLE_MAX",
    "canonical_into",
    "canonical_result",
    "canonical_results",
    "check_jet",
    "greedy_kernel",
    "greedy_merges",
    "greedy_start",
    "greedy_steps",
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
@kernel_helper
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
    c0 = borrowed(consts[0])  # without reference counts (see greedy_steps)
    c1 = borrowed(consts[1])
    for k in range(n - 1):
        a = history[k, 0]
        b = history[k, 1]
        steps[k] = pair_llh(p, t, a, b, c1 if k == n - 2 else c0)
        node = n + k
        for d in range(4):
            p[node, d] = p[a, d] + p[b, d]
        t[node] = t_of(p[node, 0], p[node, 1], p[node, 2], p[node, 3])
    return steps


#: greedy keeps the value of every pair it has scored in an ``(n, n)`` table indexed by *slot*
#: (a merged cluster takes the slot of its left child) for jets up to this size (9 bytes per
#: entry: 81 MB at 3000 leaves), so that a pair is evaluated at most once: O(n²) split evaluations.
#: Larger jets score a cluster's pairs again whenever its best partner is merged away.
PAIR_TABLE_MAX = 3000

#: greedy skips pairs whose upper bound cannot beat the best partner found so far on jets of at
#: least this many leaves (on smaller ones computing the bounds costs more than it saves)
BOUND_MIN_LEAVES = 40


@nb.njit(cache=True, inline="always")
def _scan(p, t, g, pos, k, row, c, tab, exact, bounded, fresh,
          target):  # pragma: no cover - numba
    """First maximum over positions ``0 .. k-1`` of the merge of slot ``row`` with slot
    ``pos[j]``: ``(value, partner slot, evaluations made)``.

    ``fresh``: none of these pairs is known (a new row: evaluate them and, with a table, store
    them in ``tab[row]``); otherwise all of them are in ``tab[row]`` (the row was scanned fresh
    when it was appended, and a cluster to its left then is to its left now). With ``bounded``, a
    pair whose upper bound (:func:`~jetastar.ginkgo.kernels.split_llh_above`) shows that it cannot
    beat the best value so far is not evaluated and its bound is stored (``exact`` false): its
    exact value is not above the best, so the first maximum is unchanged. ``tab`` of shape
    ``(0, 0)``: no table, every scan is fresh.

    ``target``: a value no pair of the row exceeds (a row scanned again: its best value before
    its partner left; NaN: none). The scan stops at the first pair whose exact value equals it:
    that pair is the first maximum. (Where every merge is ``-inf`` this makes the scans after a
    merge O(1) instead of O(n).)
    """
    use_tab = tab.shape[0] != 0
    best = _NEG_INF
    best_j = 0
    evals = 0
    for j in range(k):
        b = pos[j]
        floor = best if (bounded and j > 0) else _NEG_INF
        known = False
        if not fresh:
            v = tab[row, b]
            is_exact = exact[row, b] if bounded else True
            known = is_exact or bound_below(v, floor)
        if not known:
            tp = t_of(p[row, 0] + p[b, 0], p[row, 1] + p[b, 1], p[row, 2] + p[b, 2],
                      p[row, 3] + p[b, 3])
            v, is_exact = split_llh_above(t[row], t[b], tp, g[row], g[b], floor, c)
            if is_exact:
                evals += 1
            if use_tab:
                tab[row, b] = v
                if bounded:
                    exact[row, b] = is_exact
        if j == 0 or v > best:
            best = v
            best_j = j
        if is_exact and v == target:
            break
    return best, pos[best_j], evals


@nb.njit(cache=True)
def greedy_kernel(leaves, consts):  # pragma: no cover - numba
    """The greedy merges (:func:`jetastar.clustering.greedy`; beam search starts from them):
    the reference greedy. Returns (history, steps, first step with all candidates -inf or -1, evals).

    :func:`greedy_merges` with the pair table up to :data:`PAIR_TABLE_MAX` leaves and bounds from
    :data:`BOUND_MIN_LEAVES` leaves.
    """
    return greedy_merges(leaves, consts, np.int64(PAIR_TABLE_MAX), np.int64(BOUND_MIN_LEAVES))


@nb.njit(cache=True)
def greedy_merges(leaves, consts, table_max, bound_min):  # pragma: no cover - numba
    """:func:`greedy_kernel` with a pair table when ``n <= table_max`` and bounds when
    ``n >= bound_min`` (every combination gives the same merges and values; the tests run all).

    Clusters live in ``n`` slots (leaf ``i`` in slot ``i``; a merge puts the new cluster in the
    slot of its left child and frees the other). ``evals`` counts the split evaluations made: with
    the table a pair is evaluated at most once (O(n²) evaluations; without it a cluster's pairs are
    evaluated again whenever its best partner is merged away), and with bounds a pair whose upper
    bound (:func:`~jetastar.ginkgo.kernels.split_llh_above`) cannot beat the best partner found so
    far is not evaluated; neither changes a choice or a value. It is :func:`greedy_start` and one
    :func:`greedy_steps` over every merge (callers that must see Ctrl-C call the latter in slices).
    """
    state = greedy_start(leaves, consts, table_max, bound_min)
    greedy_steps(consts, state, np.int64(leaves.shape[0]))
    regs = state[-1]
    return state[5], state[6], regs[G_ALL_INF], regs[G_EVALS]


#: registers of a greedy run between :func:`greedy_steps` calls (the last array of its state)
G_STEP, G_ACTIVE, G_FIRST_NEW, G_LEFT, G_RIGHT, G_EVALS, G_ALL_INF, G_DONE, G_BOUNDED = range(9)


@nb.njit(cache=True)
def greedy_start(leaves, consts, table_max, bound_min):  # pragma: no cover - numba
    """The state of a greedy run before its first merge (see :func:`greedy_merges`):
    ``(p, per_slot, ids, tab, exact, history, steps, regs)``."""
    n = leaves.shape[0]
    c0 = consts[0]
    bounded = n >= bound_min
    p = np.empty((n, 4), dtype=np.float64)  # per slot: momentum
    # per slot: t, child bound G(t) (bounded only); per position: best merge with a cluster to
    # the left (one allocation for three arrays)
    per_slot = np.empty((3, n), dtype=np.float64)
    # per slot: node id; per position: slot, slot of the best partner to the left
    ids = np.empty((3, n), dtype=np.int64)
    for i in range(n):  # loops, not slice assignments: much less to compile
        for d in range(4):
            p[i, d] = leaves[i, d]
        per_slot[0, i] = cluster_t(leaves[i, 0], leaves[i, 1], leaves[i, 2], leaves[i, 3],
                                   np.int64(1), c0)
        per_slot[1, i] = child_bound(per_slot[0, i], c0) if bounded else 0.0
        ids[0, i] = i
        ids[1, i] = i
    # tab[row, slot]: the value (exact) or an upper bound of the merge of a row with a cluster to
    # its left, written when the row is scanned fresh (no initialisation needed)
    side = n if n <= table_max else 0
    tab = np.empty((side, side), dtype=np.float64)
    side_b = side if bounded else 0  # without bounds every value stored is exact
    exact = np.empty((side_b, side_b), dtype=np.bool_)
    history = np.empty((max(n - 1, 0), 2), dtype=np.int64)
    steps = np.empty(max(n - 1, 0), dtype=np.float64)
    regs = np.zeros(9, dtype=np.int64)
    regs[G_ACTIVE] = n  # active positions
    regs[G_FIRST_NEW] = 0  # positions from here on hold new rows (all of them at the start)
    regs[G_LEFT] = -1  # the slots of the last merge (none yet)
    regs[G_RIGHT] = -1
    regs[G_ALL_INF] = -1
    regs[G_DONE] = n < 2
    regs[G_BOUNDED] = bounded
    return p, per_slot, ids, tab, exact, history, steps, regs


@nb.njit(cache=True)
def greedy_steps(consts, state, max_merges):  # pragma: no cover - numba
    """Up to ``max_merges`` merges of a greedy run (:func:`greedy_start`), in place;
    ``regs[G_DONE]`` is set after the last."""
    # the state's arrays and the constants rows as views without reference counts (see
    # jetastar._refcount; the caller holds both): every inlined scan and every split score took
    # and released references to them, a third of greedy's time on small jets
    p, per_slot, ids, tab, exact, history, steps, regs = borrowed(state)
    n = p.shape[0]
    c0 = borrowed(consts[0])
    c1 = borrowed(consts[1])
    t = per_slot[0]
    g = per_slot[1]
    nn_val = per_slot[2]
    node_of = ids[0]
    pos = ids[1]
    nn_part = ids[2]
    bounded = regs[G_BOUNDED] != 0
    use_tab = tab.shape[0] != 0
    m = regs[G_ACTIVE]
    first_new = regs[G_FIRST_NEW]
    sa = regs[G_LEFT]
    sb = regs[G_RIGHT]
    evals = regs[G_EVALS]
    all_inf_step = regs[G_ALL_INF]
    s = regs[G_STEP]
    stop = min(n, s + max_merges)
    while s < stop and regs[G_DONE] == 0:
        # rows to (re)score: new ones, and those whose best partner was just merged; the only
        # call of _scan (one copy of the split likelihood in this kernel)
        for k in range(m):
            new_row = k >= first_new
            if new_row or nn_part[k] == sa or nn_part[k] == sb:
                if k == 0:
                    nn_val[0] = _NEG_INF
                    nn_part[0] = -1
                else:
                    nn_val[k], nn_part[k], e = _scan(p, t, g, pos, k, pos[k], c0, tab, exact,
                                                     bounded, new_row or not use_tab,
                                                     np.nan if new_row else nn_val[k])
                    evals += e
        if m == 1:
            regs[G_DONE] = 1
            break
        r = 1
        for k in range(2, m):
            if nn_val[k] > nn_val[r]:
                r = k
        if nn_val[r] == _NEG_INF and all_inf_step < 0:
            all_inf_step = s
        sa = nn_part[r]  # left child: the stored partner
        sb = pos[r]
        left = 0
        while pos[left] != sa:
            left += 1
        history[s, 0] = node_of[sa]
        history[s, 1] = node_of[sb]
        if m == 2:  # the root split: λ_R
            steps[s] = pair_llh(p, t, sa, sb, c1)
            evals += 1
        elif use_tab:  # row sb's best partner: evaluated, never only bounded
            steps[s] = tab[sb, sa]
        else:
            steps[s] = pair_llh(p, t, sa, sb, c0)
            evals += 1
        for d in range(4):
            p[sa, d] = p[sa, d] + p[sb, d]
        t[sa] = t_of(p[sa, 0], p[sa, 1], p[sa, 2], p[sa, 3])
        if bounded:
            g[sa] = child_bound(t[sa], c0)
        node_of[sa] = n + s
        # remove positions r and left (left < r), append the new cluster at the end
        w = 0
        for k in range(m):
            if k == r or k == left:
                continue
            pos[w] = pos[k]
            nn_val[w] = nn_val[k]
            nn_part[w] = nn_part[k]
            w += 1
        m -= 1
        pos[w] = sa
        first_new = w
        s += 1
        if m == 1:
            regs[G_DONE] = 1
    regs[G_STEP] = s
    regs[G_ACTIVE] = m
    regs[G_FIRST_NEW] = first_new
    regs[G_LEFT] = sa
    regs[G_RIGHT] = sb
    regs[G_EVALS] = evals
    regs[G_ALL_INF] = all_inf_step


#: :func:`canonical_into` orders the internal nodes of trees up to this many by insertion
_INSERTION_MAX = 32


@kernel_helper
def canonical_into(history, steps, n, children, full):  # pragma: no cover - numba
    """One merge history in canonical node order: fills ``children`` ``(2n - 1, 2)`` (leaves
    ``[-1, -1]``) and the per-node split values ``full`` ``(2n - 1,)`` (0 at leaves), as
    :func:`canonical_results` numbers them."""
    m = 2 * n - 1
    work = np.empty((5, m), dtype=np.int64)  # one allocation for five arrays
    size = work[0]
    low = work[1]
    new_id = work[2]
    key = work[3]  # (size, smallest leaf) of each internal node as one integer
    for k in range(n):
        size[k] = 1
        low[k] = k
        new_id[k] = k
        children[k, 0] = -1
        children[k, 1] = -1
        full[k] = 0.0
    for j in range(n - 1):
        a = history[j, 0]
        b = history[j, 1]
        size[n + j] = size[a] + size[b]
        low[n + j] = min(low[a], low[b])
        key[j] = size[n + j] * m + low[n + j]
    # the internal nodes in key order (distinct keys: any sort agrees); small trees by insertion
    # into work[4] (no allocation), larger ones by the merge sort
    if n - 1 <= _INSERTION_MAX:
        order = work[4]
        for r in range(n - 1):
            kx = key[r]
            i = r - 1
            while i >= 0 and key[order[i]] > kx:
                order[i + 1] = order[i]
                i -= 1
            order[i + 1] = r
    else:
        fkey = np.empty(n - 1, dtype=np.float64)
        for j in range(n - 1):
            fkey[j] = key[j]
        order = argsort_stable(fkey)
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


@kernel_helper
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
