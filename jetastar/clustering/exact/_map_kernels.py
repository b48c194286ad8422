"""Numba kernels of the bound-pruned exact MAP trellis (see :mod:`jetastar.clustering.exact_map`).

Layout, 22 bytes per cluster bitmask ``s`` (``0 .. 2**n - 1``):

* ``rec[s] = (t, V)`` (16 bytes): the likelihood's squared mass and the best log-likelihood ``V`` of
  a hierarchy over ``s`` (``-inf``: none is possible, or — with an incumbent — none can be part of
  a tree better than the incumbent);
* ``wq[s]`` (int16, 2 bytes): ``W = V + G(t)`` in fixed point, ``ceil(W * scale)`` (rounded *up*;
  values below the int16 range are raised to its bottom, which keeps them upper bounds; ``Q_NONE``
  when ``V = -inf``), where ``G`` is :func:`jetastar.ginkgo.likelihood.child_bound` and ``scale``
  is a power of two chosen per jet so that no ``W`` of a proper subset can exceed the top of the
  range (:func:`jetastar.clustering.exact.exact_map.w_scale`); ``(wq[A] + wq[B]) / scale − log 4π``
  bounds the value of any split into ``A`` and ``B`` of any parent from above. Two bytes keep the
  table that every split reads small (8 MB at 22 leaves, inside the processor's cache);
* ``best[s]`` (int32, 4 bytes): the part ``A`` (holding the lowest leaf) of the arg-max split.

Clusters are solved by size; the clusters of one size are independent and are enumerated in
increasing mask order (colex order of ``k``-subsets) by Gosper's hack from a combinatorially
unranked start, so no table of masks by size is stored. Each parallel piece owns a contiguous run
of ranks.

The split loop of a cluster reads only ``wq`` of both parts (2 bytes each; neighbouring subsets
share cache lines) and compares the integer sum with the best split found so far, in the same fixed
point and rounded down. Only a
split that passes is looked at more closely: first the tighter bound
(:func:`~jetastar.ginkgo.kernels.split_bound_of_split`, no transcendental function), then ψ
itself (:func:`~jetastar.ginkgo.likelihood.split_llh_given_parent`). A split is skipped only when
its bound is below the best value by more than a relative margin of ``1e-9``, far above rounding,
so every cluster's ``V`` and arg-max are those of the unpruned DP (the same float expression on the
same winning split; the first maximum in enumeration order wins, as in the full trellis).

An *incumbent* (a known tree's log-likelihood ``L0``) raises the bar of the whole jet: a split of
the root is kept only if it can reach ``L0``. Nothing below the root is cut by it (no outside bound
is used inside the dense DP); when no root split reaches ``L0`` the incumbent is the MAP.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from ..._refcount import borrowed
from ...ginkgo.kernels import FORM_LEGACY, child_bound_of_splittable, split_bound_of_split
from ...ginkgo.likelihood import (
    SPACELIKE_TOLERANCE,
    child_bound,
    parent_terms,
    split_llh_given_parent,
    t_of,
)
from .._chunk_kernels import DONE, NOT_RUN, PER_JET, run_in_slices, to_solve
from .._subsets import fill_subset_t, popcount, read_tree, unsplittable

_NEG_INF = -np.inf
_LOG_4PI = math.log(4.0 * math.pi)
#: relative safety margin of every pruning decision (rounding of ψ and of the bounds)
MARGIN = 1e-9

#: columns of a record
T, V = 0, 1


#: int16 code of ``W = -inf`` (an impossible cluster); finite values are ``>= Q_BOTTOM``
Q_NONE = -32768
Q_BOTTOM = -32767
Q_TOP = 32767
#: fixed-point scale of W when the jet allows it (1/64 nat; the int16 range is then ±511 nats)
_W_SCALE = 64.0
#: the W test's bar when nothing is known yet (every split passes)
_CUT_Q_NONE = -(1 << 40)


@nb.njit(cache=True)
def _quantize_up(w: float, scale: float) -> np.int16:  # pragma: no cover - numba
    """``W`` as the fixed-point int16 ``ceil(w * scale)``, never below ``w`` (``-inf``: ``Q_NONE``)."""
    if w == _NEG_INF:
        return np.int16(Q_NONE)
    # the relative lift covers the rounding of w = V + G in float64
    q = math.ceil((w + (abs(w) + 1.0) * 1e-12) * scale)
    if q < Q_BOTTOM:
        return np.int16(Q_BOTTOM)
    if q > Q_TOP:  # only the whole jet's W, which no split reads (see exact_map.w_scale)
        return np.int16(Q_TOP)
    return np.int16(q)


@nb.njit(cache=True)
def _cut_q(cut_w: float, scale: float) -> np.int64:  # pragma: no cover - numba
    """The W test's bar in fixed point, rounded down: ``wq[A] + wq[B] > this`` keeps a split."""
    if cut_w == _NEG_INF:
        return np.int64(_CUT_Q_NONE)
    return np.int64(math.floor(cut_w * scale))


@nb.njit(cache=True)
def _cut(best_v: float) -> float:  # pragma: no cover - numba
    """A bound must exceed this to be looked at: the best value minus the safety margin."""
    return best_v - MARGIN * (1.0 + abs(best_v))


@nb.njit(cache=True)
def w_scale_of(leaf_t, c):  # pragma: no cover - numba
    """The fixed-point scale of ``wq`` for leaves (or parts) ``leaf_t`` (see ``exact_map.w_scale``).

    A power of two, ``_W_SCALE`` unless the a-priori bound on ``W`` of every proper subset needs
    less: ``U_1 = 0``, ``U_k = max_j U_j + U_{k−j} + g(j) + g(k−j) − log 4π`` with ``g(1)`` the
    largest ``G`` of the leaves and ``g(j) = G(t_cut⁺)`` otherwise; the top ``max_k U_k + g(k)``
    (``k < n``) must fit below ``Q_TOP``.
    """
    n = leaf_t.shape[0]
    g1 = -np.inf
    for i in range(n):
        g1 = max(g1, child_bound(leaf_t[i], c))
    if n == 0:
        g1 = 0.0
    t_cut = c[0]
    # G of a possible cluster: t > t_cut (symmetric) or t >= t_cut (legacy); covers both forms
    gc = max(child_bound(t_cut, c), child_bound(np.nextafter(t_cut, np.inf), c))
    upper = np.zeros(max(n, 2), dtype=np.float64)  # upper[k]: bound on V of a k-cluster
    top = g1
    for k in range(2, n):
        u = -np.inf
        for j in range(1, k):
            gj = g1 if j == 1 else gc
            gk = g1 if k - j == 1 else gc
            u = max(u, upper[j] + upper[k - j] + gj + gk)
        upper[k] = u - _LOG_4PI
        top = max(top, upper[k] + gc)
    scale = _W_SCALE
    while top * scale > Q_TOP - 2 and scale > 2.0**-40:
        scale /= 2.0
    return scale


@nb.njit(cache=True)
def init_records(n, rec, wq, best, c, scale):  # pragma: no cover - numba
    """Leaves: ``V = 0``, ``W = G(t)``; the empty mask is impossible. ``rec[:, T]`` must be filled."""
    rec[0, V] = _NEG_INF
    wq[0] = np.int16(Q_NONE)
    best[0] = 0
    for i in range(n):
        s = np.int64(1) << i
        rec[s, V] = 0.0
        wq[s] = _quantize_up(child_bound(rec[s, T], c), scale)
        best[s] = 0


@nb.njit(cache=True)
def solve_cluster(s, rec, wq, best, c, t_cut, legacy, floor, slack, prune, scale):  # pragma: no cover
    """``V``, ``W`` and arg-max split of cluster ``s`` (size >= 2) from its solved subsets.

    Args:
        s: the cluster's mask.
        rec, wq, best: the tables (module docstring).
        c: the constants row of this split (the ``λ_R`` row for the whole jet).
        t_cut, legacy: the form's cut, for clusters that cannot split.
        floor: only values ``>= floor`` matter (``-inf``, or the incumbent at the root); the
            cluster's ``V`` is ``-inf`` when no split reaches it.
        slack: added to every bound (``wq`` holds ``G`` of the inner row; the root row's ``G`` is
            larger by at most ``slack / 2`` per child).
        prune: use the bounds (``False`` computes ψ on every split whose parts are possible).
        scale: the fixed-point scale of ``wq``.

    Returns:
        ``(splits enumerated, splits looked at (the warm start's and those passing the W test),
        ψ evaluated, 1 if unsplittable)``.
    """
    low = s & -s
    rest = s ^ low
    t_s = rec[s, T]
    if unsplittable(t_s, t_cut, legacy):
        finish_cluster(s, _NEG_INF, low, rec, wq, best, c, _NEG_INF, scale)
        return 0, 0, 0, 1
    s_p, log_tp, stop = parent_terms(t_s, c)
    best_v, best_a, passed, evaluated = warm_start(
        s, rec, wq, best, c, t_s, s_p, log_tp, stop, floor, slack, prune, scale
    )
    best_v, best_a, p2, e2 = scan_splits(
        s, np.int64(0), rest, rec, wq, c, t_s, s_p, log_tp, stop, floor, slack, prune, scale,
        best_v, best_a,
    )
    _finish_with_bound(s, best_v, best_a, rec, wq, best, child_bound_of_splittable(log_tp, c),
                       floor, scale)
    return (np.int64(1) << (popcount(s) - 1)) - 1, passed + p2, evaluated + e2, 0


@nb.njit(cache=True, inline="always")
def _tight_bound(t_a, t_b, t_s, s_p, log_tp, stop, qa, qb, v_a, v_b, inv_scale, slack,
                 c):  # pragma: no cover - numba
    """The tighter bound on ``ψ + V(A) + V(B)`` of a split that passed the W test (with the
    slack): :func:`~jetastar.ginkgo.kernels.split_bound_of_split` with the parts' ``G`` taken as
    ``qa / scale − V(A)`` (≥ ``G(A)``, so still a bound). One formula for :func:`warm_start` and
    :func:`scan_splits`."""
    return split_bound_of_split(
        t_a, t_b, t_s, s_p, log_tp, stop, qa * inv_scale - v_a, qb * inv_scale - v_b, c
    ) + v_a + v_b + slack


@nb.njit(cache=True, inline="always")
def warm_start(
    s, rec, wq, best, c, t_s, s_p, log_tp, stop, floor, slack, prune, scale
):  # pragma: no cover - numba
    """The best of three likely splits of ``s`` (clusters of 5+ leaves, with ``prune``).

    The best split of ``S`` minus its highest leaf ``x``, with ``x`` added to either side, and
    ``(S − x, x)``, tried in decreasing order of their W-test sums, each only where its bounds
    (the tests of :func:`scan_splits`) can beat the best so far. A high first value makes the
    bounds bite from the first enumerated split on; ties are resolved as the enumeration would
    (largest part ``A`` first), so the arg-max is the same.

    Returns:
        ``(best value, its part A, splits looked at, ψ evaluated)``; ``(-inf, lowest leaf, 0, 0)``
        when nothing is tried.
    """
    low = s & -s
    best_v = _NEG_INF
    best_a = low
    passed = 0
    evaluated = 0
    if prune and popcount(s) >= 5:
        x = s
        while x & (x - 1):  # clear low bits until only the highest leaf is left
            x &= x - 1
        s1 = s ^ x
        a1 = np.int64(best[s1])
        # the candidates' parts A (each holds the lowest leaf), by decreasing W sum
        first, second, third = a1 | x, a1, s1
        q_first = np.int64(wq[first]) + np.int64(wq[s ^ first])
        q_second = np.int64(wq[second]) + np.int64(wq[s ^ second])
        q_third = np.int64(wq[third]) + np.int64(wq[s ^ third])
        if q_second > q_first:
            first, second, q_first, q_second = second, first, q_second, q_first
        if q_third > q_second:
            second, third, q_second, q_third = third, second, q_third, q_second
            if q_second > q_first:
                first, second, q_first, q_second = second, first, q_second, q_first
        cut = floor
        cut_q = _cut_q(cut + _LOG_4PI - slack, scale)
        inv_scale = 1.0 / scale
        for j in range(3):
            a = first if j == 0 else (second if j == 1 else third)
            q_sum = q_first if j == 0 else (q_second if j == 1 else q_third)
            if q_sum <= cut_q:
                break  # the rest have smaller sums
            b = s ^ a
            v_a = rec[a, V]
            v_b = rec[b, V]
            if v_a > _NEG_INF and v_b > _NEG_INF:
                passed += 1
                t_a = rec[a, T]
                t_b = rec[b, T]
                if cut > _NEG_INF and not _tight_bound(
                        t_a, t_b, t_s, s_p, log_tp, stop, np.int64(wq[a]), np.int64(wq[b]), v_a,
                        v_b, inv_scale, slack, c) > cut:
                    continue
                evaluated += 1
                psi = split_llh_given_parent(t_a, t_b, t_s, s_p, log_tp, stop, c)
                if psi != _NEG_INF:
                    v = psi + v_a + v_b
                    if v > best_v or (v == best_v and a > best_a):
                        best_v = v
                        best_a = a
                        cut = max(_cut(best_v), floor)
                        cut_q = _cut_q(cut + _LOG_4PI - slack, scale)
    return best_v, best_a, passed, evaluated


@nb.njit(cache=True, inline="always")
def scan_splits(
    s, fixed, free, rec, wq, c, t_s, s_p, log_tp, stop, floor, slack, prune, scale, best_v, best_a,
):  # pragma: no cover - numba
    """The bound-pruned scan over the splits of ``s`` whose ``sub = A − lowest leaf`` is ``fixed``
    plus a submask of ``free`` (``fixed = 0, free = rest``: every split), ``sub`` decreasing.

    Starts from ``(best_v, best_a)`` (e.g. :func:`warm_start`'s) and returns the improved
    ``(best value, part A, splits looked at, ψ evaluated)``; the first maximum in enumeration order
    wins (ties go to the larger ``A``), as in the full trellis. A caller that splits the scan over
    several ``fixed`` values merges their results by the same rule.
    """
    low = s & -s
    rest = s ^ low
    passed = 0
    evaluated = 0
    cut, cut_q = start_bars(best_v, floor, slack, prune, scale)
    inv_scale = 1.0 / scale
    h = free
    if fixed | free == rest:  # sub = rest (B empty) is no split: start below it
        if free == 0:
            return best_v, best_a, passed, evaluated
        h = (free - 1) & free
    while True:
        sub = fixed | h
        a = low | sub
        b = rest ^ sub
        qa = np.int64(wq[a])
        qb = np.int64(wq[b])
        # the current best split was scored already (by the warm start)
        if qa + qb > cut_q and (a != best_a or best_v == _NEG_INF):
            v_a = rec[a, V]
            v_b = rec[b, V]
            if v_a > _NEG_INF and v_b > _NEG_INF:
                passed += 1
                best_v, best_a, cut, cut_q, e = score_split(
                    a, qa, qb, v_a, v_b, rec[a, T], rec[b, T], t_s, s_p, log_tp, stop, c, floor,
                    slack, prune, scale, inv_scale, cut, cut_q, best_v, best_a,
                )
                evaluated += e
        if h == 0:
            break
        h = (h - 1) & free
    return best_v, best_a, passed, evaluated


@nb.njit(cache=True, inline="always")
def start_bars(best_v, floor, slack, prune, scale):  # pragma: no cover - numba
    """The bars of a scan that starts from the best value ``best_v``: ``(cut, cut_q)``, the value
    a split's tighter bound must exceed and the fixed-point W test's bar (``wq[A] + wq[B] >
    cut_q``: ``W(A) + W(B) > cut + log 4π − slack``, rounded down). Without ``prune`` the bar
    stays at ``-inf``: every split whose parts are possible is scored."""
    cut = max(_cut(best_v), floor) if prune else _NEG_INF
    return cut, _cut_q(cut + _LOG_4PI - slack, scale)


@nb.njit(cache=True, inline="always")
def score_split(
    a, qa, qb, v_a, v_b, t_a, t_b, t_s, s_p, log_tp, stop, c, floor, slack, prune, scale,
    inv_scale, cut, cut_q, best_v, best_a,
):  # pragma: no cover - numba
    """One split that passed the W test (``qa + qb > cut_q``) with both parts possible: the
    tighter bound (with ``prune``), then ψ, and the running best and bars updated.

    The decision of :func:`scan_splits` for one split, written once for every caller: the CPU
    scan reads the parts from the tables, the tiled GPU pass
    (:mod:`jetastar.clustering.exact._gpu_tiled_map`) from shared memory.

    Args:
        a: the part holding the cluster's lowest leaf (ties of the value go to the larger one).
        qa, qb: the parts' fixed-point ``W`` (int64).
        v_a, v_b, t_a, t_b: the parts' ``V`` (finite) and ``t``.
        t_s, s_p, log_tp, stop: the cluster's ``t`` and :func:`parent_terms`.
        c: the constants row of the cluster.
        floor, slack, prune, scale: as for :func:`solve_cluster`; ``inv_scale = 1 / scale``.
        cut, cut_q: the current bars (value and fixed-point W test).
        best_v, best_a: the running best.

    Returns:
        ``(best_v, best_a, cut, cut_q, 1 if ψ was evaluated else 0)``.
    """
    evaluated = 0
    # (the bound is -inf on splits that psi rejects from the t alone: only with prune)
    if not prune or _tight_bound(t_a, t_b, t_s, s_p, log_tp, stop, qa, qb, v_a, v_b,
                                 inv_scale, slack, c) > cut:
        evaluated = 1
        psi = split_llh_given_parent(t_a, t_b, t_s, s_p, log_tp, stop, c)
        if psi != _NEG_INF:
            v = psi + v_a + v_b
            if v > best_v or (v == best_v and a > best_a):
                best_v = v
                best_a = a
                if prune:
                    cut = max(_cut(best_v), floor)
                    cut_q = _cut_q(cut + _LOG_4PI - slack, scale)
    return best_v, best_a, cut, cut_q, evaluated


@nb.njit(cache=True, inline="always")
def finish_cluster(s, best_v, best_a, rec, wq, best, c, floor, scale):  # pragma: no cover - numba
    """Write cluster ``s``'s ``V`` (``-inf`` below ``floor``), arg-max part and fixed-point ``W``."""
    kept = best_v >= floor and best_v > _NEG_INF  # G is needed only for a kept value
    g = child_bound(rec[s, T], c) if kept else 0.0
    _finish_with_bound(s, best_v, best_a, rec, wq, best, g, floor, scale)


@nb.njit(cache=True, inline="always")
def _finish_with_bound(s, best_v, best_a, rec, wq, best, g, floor, scale):  # pragma: no cover
    """:func:`finish_cluster` with the cluster's ``G`` given (:func:`solve_cluster` has its
    ``log t`` already: one ``log`` per cluster less)."""
    if best_v < floor:
        best_v = _NEG_INF
    rec[s, V] = best_v
    best[s] = best_a
    if best_v > _NEG_INF:
        wq[s] = _quantize_up(best_v + g, scale)
    else:
        wq[s] = np.int16(Q_NONE)


@nb.njit(cache=True)
def unrank(k, r, binom):  # pragma: no cover - numba
    """The ``r``-th ``k``-subset in increasing mask order (combinatorial number system)."""
    x = np.int64(0)
    for i in range(k, 0, -1):
        c = i - 1
        while binom[c + 1, i] <= r:
            c += 1
        x |= np.int64(1) << c
        r -= binom[c, i]
    return x


@nb.njit(cache=True)
def _next_same_size(x):  # pragma: no cover - numba
    """Gosper's hack: the next larger integer with the same number of set bits."""
    u = x & -x
    v = x + u
    return v + (((v ^ x) // u) >> 2)


@nb.njit(cache=True, parallel=True)
def solve_size(
    k, r_start, r_stop, n_pieces, binom, rec, wq, best, c, t_cut, legacy, prune, scale
):  # pragma: no cover - numba
    """Solve the ``k``-leaf clusters of ranks ``r_start .. r_stop - 1`` in parallel pieces.

    Returns:
        ``(splits enumerated, passing the W test, ψ evaluated, clusters unsplittable,
        clusters impossible)`` summed over the range.
    """
    total = r_stop - r_start
    enumerated = 0
    passed = 0
    evaluated = 0
    unsplittable = 0
    impossible = 0
    for p in nb.prange(n_pieces):
        lo = r_start + total * p // n_pieces
        hi = r_start + total * (p + 1) // n_pieces
        e, q, v, u, m = solve_ranks(k, lo, hi, binom, rec, wq, best, c, t_cut, legacy, prune, scale)
        enumerated += e
        passed += q
        evaluated += v
        unsplittable += u
        impossible += m
    return enumerated, passed, evaluated, unsplittable, impossible


@nb.njit(cache=True)
def solve_ranks(
    k, lo, hi, binom, rec, wq, best, c, t_cut, legacy, prune, scale
):  # pragma: no cover - numba
    """The ``k``-leaf clusters of ranks ``lo .. hi - 1`` on the calling thread: one piece of
    :func:`solve_size`, and its serial twin for slices too small for a parallel launch."""
    enumerated = 0
    passed = 0
    evaluated = 0
    unsplittable = 0
    impossible = 0
    if lo >= hi:
        return enumerated, passed, evaluated, unsplittable, impossible
    # the per-cluster calls take views without reference counts (jetastar._refcount; the caller
    # holds the arrays): the counts' atomic updates were a third of the run time on small jets
    rec = borrowed(rec)
    wq = borrowed(wq)
    best = borrowed(best)
    c = borrowed(c)
    s = unrank(k, lo, binom)
    for _ in range(lo, hi):
        e, q, v, u = solve_cluster(
            s, rec, wq, best, c, t_cut, legacy, _NEG_INF, 0.0, prune, scale
        )
        enumerated += e
        passed += q
        evaluated += v
        unsplittable += u
        if rec[s, V] == _NEG_INF:
            impossible += 1
        s = _next_same_size(s)
    return enumerated, passed, evaluated, unsplittable, impossible


def binomials(n: int) -> np.ndarray:
    """``(n + 2, n + 2)`` int64 table of binomial coefficients ``C(a, b)``."""
    out = np.zeros((n + 2, n + 2), dtype=np.int64)
    for a in range(n + 2):
        out[a, 0] = 1
        for b in range(1, a + 1):
            out[a, b] = out[a - 1, b - 1] + out[a - 1, b]
    return out


@nb.njit(cache=True)
def solve_parts(part_p, part_t, psum, rec, wq, best, c, c_top, slack_top, floor):  # pragma: no cover
    """The whole DP of a small problem over ``k`` *parts*, serially (one thread, one call).

    The parts play the role of leaves: each is a fixed sub-hierarchy (or a single leaf) with its
    summed 4-momentum; its own log-likelihood is not part of the value. A cluster of parts is
    numbered by its bitmask over the parts and is solved after every proper subset (increasing mask
    order), with :func:`solve_cluster`, so every value and arg-max is that of the exact MAP engine
    on a jet whose leaves are the parts.

    Args:
        part_p: ``(k, 4)`` float64 summed 4-momenta of the parts.
        part_t: ``(k,)`` float64 ``t`` of each part in the form's convention (legacy form: 0 for a
            single leaf, the squared mass for a composite part; symmetric: the squared mass).
        psum: ``(>= 2**k, 4)`` float64 scratch (summed momenta of every cluster of parts).
        rec, wq, best: tables with at least ``2**k`` rows (:mod:`exact_map`'s layout).
        c: the constants row of splits below the top.
        c_top: the constants row of the top split (the root row when the parts cover the jet).
        slack_top: the bound slack of the top split (:meth:`_MapSolver._root_slack` for the root
            row, 0 otherwise).
        floor: only a top value ``>= floor`` is kept; the top's ``V`` is ``-inf`` otherwise.

    Returns:
        ``(splits enumerated, splits looked at, ψ evaluated)``; the value is ``rec[2**k − 1, V]``
        and the hierarchy is read through ``best``.
    """
    k = part_p.shape[0]
    m = np.int64(1) << k
    full = m - 1
    # views without reference counts for the per-cluster calls (see solve_ranks)
    rec = borrowed(rec)
    wq = borrowed(wq)
    best = borrowed(best)
    c = borrowed(c)
    c_top = borrowed(c_top)
    # a bool variable, not the literal True: one specialisation of solve_cluster for every caller
    prune = np.bool_(True)
    scale = w_scale_of(part_t, c)
    t_cut = c[0]
    legacy = c[4] == FORM_LEGACY
    rec[0, T] = 0.0
    psum[0, 0] = 0.0
    psum[0, 1] = 0.0
    psum[0, 2] = 0.0
    psum[0, 3] = 0.0
    for s in range(1, m):
        low = s & -s
        rest = s ^ low
        i = 0
        while (np.int64(1) << i) != low:
            i += 1
        for j in range(4):
            psum[s, j] = psum[rest, j] + part_p[i, j]
        if rest == 0:
            rec[s, T] = part_t[i]
        else:
            rec[s, T] = t_of(psum[s, 0], psum[s, 1], psum[s, 2], psum[s, 3])
    init_records(k, rec, wq, best, c, scale)
    enumerated = 0
    passed = 0
    evaluated = 0
    for s in range(3, full):
        if s & (s - 1) == 0:
            continue
        e, q, v, _ = solve_cluster(s, rec, wq, best, c, t_cut, legacy, _NEG_INF, 0.0, prune, scale)
        enumerated += e
        passed += q
        evaluated += v
    if k >= 2:
        e, q, v, _ = solve_cluster(
            full, rec, wq, best, c_top, t_cut, legacy, floor, slack_top, prune, scale
        )
        enumerated += e
        passed += q
        evaluated += v
    return enumerated, passed, evaluated


# ---------------------------------------------------------------------- the chunk kernel
#: the largest jet whose exact MAP :func:`map_chunk` solves (larger ones: :data:`PER_JET`):
#: ``2**14`` clusters, 360 kB of tables per thread and a few ms per jet
EXACT_CHUNK_MAX = 14

@nb.njit(cache=True)
def small_to_solve(j, leaves, loff, which, run, outcome, tol):  # pragma: no cover - numba
    """The size of jet ``j`` when an exact engine of the chunk is to solve it (:func:`to_solve`,
    2 to :data:`EXACT_CHUNK_MAX` leaves); else 0, with the outcome written (larger jets and jets
    of one leaf: :data:`PER_JET`)."""
    if not to_solve(j, leaves, loff, which, run, outcome, tol):
        return 0
    n = loff[j + 1] - loff[j]
    if n < 2 or n > EXACT_CHUNK_MAX:
        outcome[j] = PER_JET
        return 0
    return n


@nb.njit(cache=True)
def map_tree(best, n, children, base):  # pragma: no cover - numba
    """The MAP tree read top-down through the arg-max parts ``best``, numbered as
    ``tree_from_best`` numbers it, into ``children[base:base + 2n - 1]``."""
    read_tree(best, n, children, base, np.empty(2 * n, dtype=np.int64),
              np.empty(2 * n, dtype=np.int64), np.empty(2 * n, dtype=np.int64))


@nb.njit(cache=True)
def _map_jet(j, leaves, loff, noff, which, consts, slack, run, binom, children, ll, outcome,
             counts, tol):  # pragma: no cover - numba
    """The exact MAP of jet ``j`` (see :func:`map_chunk`)."""
    n = small_to_solve(j, leaves, loff, which, run, outcome, tol)
    if n == 0:
        return
    a = loff[j]
    row = which[j]
    c = consts[row, 0]
    t_cut = c[0]
    legacy = c[4] == FORM_LEGACY
    m = np.int64(1) << n
    full = m - 1
    rec = np.empty((m, 2), dtype=np.float64)
    wq = np.empty(m, dtype=np.int16)
    best = np.zeros(m, dtype=np.int32)
    fill_subset_t(leaves[a:a + n], c, rec[:, 0])
    leaf_t = np.empty(n, dtype=np.float64)
    for i in range(n):
        leaf_t[i] = rec[np.int64(1) << i, 0]
    scale = w_scale_of(leaf_t, c)
    init_records(n, rec, wq, best, c, scale)
    prune = np.bool_(True)
    for k in range(2, n):
        e, q, v, u, imp = solve_ranks(np.int64(k), np.int64(0), binom[n, k], binom, rec, wq, best,
                                      c, t_cut, legacy, prune, scale)
        counts[j, 0] += e
        counts[j, 1] += q
        counts[j, 2] += v
        counts[j, 3] += u
        counts[j, 4] += imp
    e, q, v, u = solve_cluster(full, rec, wq, best, consts[row, 1], t_cut, legacy, -np.inf,
                               slack[row], prune, scale)
    counts[j, 0] += e
    counts[j, 1] += q
    counts[j, 2] += v
    counts[j, 3] += u
    if rec[full, 1] == -np.inf:
        counts[j, 4] += 1
    ll[j] = rec[full, 1]
    map_tree(best, n, children, noff[j])
    outcome[j] = DONE


@nb.njit(cache=True, parallel=True)
def _map_parallel(jobs, toff, leaves, loff, noff, which, consts, slack, run, binom, children, ll,
                  outcome, counts, tol):  # pragma: no cover - numba
    for t in nb.prange(toff.shape[0] - 1):
        for i in range(toff[t], toff[t + 1]):
            _map_jet(jobs[i], leaves, loff, noff, which, consts, slack, run, binom, children, ll,
                     outcome, counts, tol)


@nb.njit(cache=True)
def _map_serial(jobs, toff, leaves, loff, noff, which, consts, slack, run, binom, children, ll,
                outcome, counts, tol):  # pragma: no cover - numba
    """The serial twin of :func:`_map_parallel` (see :func:`_cluster_serial`)."""
    for i in range(jobs.shape[0]):
        _map_jet(jobs[i], leaves, loff, noff, which, consts, slack, run, binom, children, ll,
                 outcome, counts, tol)


#: splits (``(3**n + 1) / 2 - 2**n`` per jet) per kernel call of :func:`map_chunk`: ~0.1 s at
#: the measured ~20 ns per split of small jets, so that an interrupt is seen between calls
MAP_SLICE_SPLITS = 5_000_000


def map_chunk(
    leaves: np.ndarray, loff: np.ndarray, noff: np.ndarray, which: np.ndarray,
    consts: np.ndarray, slack: np.ndarray, run: np.ndarray, binom: np.ndarray, parallel: bool,
) -> tuple[np.ndarray, ...]:
    """The exact MAP of every jet of a chunk of up to :data:`EXACT_CHUNK_MAX` leaves, in kernel
    calls of about :data:`MAP_SLICE_SPLITS` splits each (a run of consecutive jets; at least one
    jet), with Ctrl-C held during a call and raised between calls
    (:class:`~jetastar._jit.DeferredSignals`); larger jets and jets of one leaf are
    :data:`PER_JET`.

    Args:
        leaves, loff, noff, consts: as in the chunk kernel of greedy
            (:func:`~jetastar.clustering.agglomerative._merge_chunk.cluster_chunk`).
        which: ``(J,)`` int64 row of ``consts`` per jet (``-1``: invalid parameters).
        slack: ``(U,)`` float64 root slack of each constants row
            (:func:`~jetastar.clustering.exact.exact_map.root_slack`).
        run: ``(J,)`` bool: jets to solve.
        binom: binomial table of at least :data:`EXACT_CHUNK_MAX` (``_map_kernels.binomials``).
        parallel: jets in parallel (numba's threads) or on this thread.

    Returns:
        ``(children (K, 2), log_likelihood (J,), outcome (J,), counts (J, 5))``: ``counts`` are
        the engine's splits enumerated, splits looked at, ψ evaluated, clusters unsplittable and
        clusters impossible.
    """
    n_jets = loff.shape[0] - 1
    children = np.full((int(noff[-1]), 2), -1, dtype=np.int64)
    ll = np.full(n_jets, np.nan)
    outcome = np.full(n_jets, NOT_RUN, dtype=np.int64)
    counts = np.zeros((n_jets, 5), dtype=np.int64)
    kernel = _map_parallel if parallel else _map_serial
    run_in_slices(kernel, exact_splits(loff, run), MAP_SLICE_SPLITS, parallel, leaves, loff,
                   noff, which, consts, slack, run, binom, children, ll, outcome, counts,
                   SPACELIKE_TOLERANCE)
    return children, ll, outcome, counts


def exact_splits(loff: np.ndarray, run: np.ndarray) -> np.ndarray:
    """The splits of each jet's trellis (``(3^n + 1) / 2 − 2^n``, 0 for the jets an exact engine's
    chunk kernel does not solve: not asked for, or not 2 to :data:`EXACT_CHUNK_MAX` leaves): the
    work measure of the exact engines' kernel calls."""
    sizes = np.diff(loff)
    solved = np.asarray(run, dtype=bool) & (sizes <= EXACT_CHUNK_MAX)
    n = np.where(solved, sizes, 0).astype(np.float64)
    return (3.0**n + 1.0) / 2.0 - 2.0**n
