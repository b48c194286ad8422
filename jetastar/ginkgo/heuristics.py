"""A* heuristics for Ginkgo hierarchies: the admissible bound ``h0`` and the paper's ``h1``.

A heuristic value ``h(S)`` for a cluster ``S`` of leaves (``|S| = n``) is an estimate of the best
log-likelihood of a sub-hierarchy over ``S``: the sum of the split log-likelihoods ψ of its
``n − 1`` internal nodes, **S's own split included** and scored with the inner rate λ (``h`` is only
used for proper sub-clusters of a jet; the root split with λ_R is always evaluated exactly by A*).
In A* (cost = −log-likelihood) the heuristic cost is ``−h(S)``; ``h(S) = 0`` for a single leaf and
``h(S) = −∞`` when no finite tree over ``S`` exists. Values are never NaN and never ``+∞``.

``kind="h0"`` is a proven upper bound (admissible). ``kind="h1"`` is the approximate heuristic of
the A* paper (the reference "no-proof" variant): tighter, often violated (see ``docs/heuristics.md``).
``kind="paper"`` is the reference's "proof" variant (sorted masses), with its inner scale clamped to
``t_cut`` so that it stays finite beyond 10 leaves; it is kept only for comparisons.

Why h0 is an upper bound (full derivation in ``docs/heuristics.md``)
------------------------------------------------------------------------
Notation: ``t_S`` squared mass of S, ``W_ij = t(p_i + p_j)`` pair masses, ``d_ij = W_ij − t_i − t_j =
2 p_i·p_j ≥ 0``, ``N``/``λ``/``t_cut`` the inner constants of the likelihood form, ``s(T)`` the
leaf ("stop") term and ``c(T, t) = N + log λ − log T − λ t / T`` the density term of a continuing
child with scale ``T``. Exact for ``n ≤ 3`` (all 1 or 3 trees are scored with the likelihood kernel).
For ``n ≥ 4``, ``h0`` is the smaller of two bounds, each valid for every finite tree over S:

A. *Per-node bound.* (1) the angular terms are exactly ``−(n − 1) log 4π``; (2) in the symmetric form
   ``ψ = log(½e^X + ½e^Y) − log 4π`` with X, Y the two orderings, so each child contributes one
   ``g(T, t)``; (3) an internal child gives ``c(T, t) ≤ C(t) = c(clamp(λt, t, t_S), t)`` (``c`` is
   concave in ``log T`` with its maximum at ``T = λt``; every scale lies in ``[t, t_S]``), ``C``
   decreasing in ``t``; (4) the ``n − 2`` internal non-root masses, sorted, dominate ``t_cut``, the
   sorted minimum-spanning-tree weights of S under ``W`` (each internal node contains a pair crossing
   its children; those pairs span S; a matroid's greedy basis is element-wise minimal) and the
   size bound ``τ(⌈n/(n−k)⌉)`` (a node of m leaves has mass ``Σ t_i + Σ_pairs d_ij`` ≥ the m smallest
   leaf masses plus the m − 1 smallest MST weights under ``d``; the j-th largest internal node has
   at least ``⌈n/j⌉`` leaves); (5) a leaf next to sibling B gives at most
   ``φ_i = log(½ e^{s(β_i)} + ½ e^{s_max})`` with ``β_i = max(t_cut, min_j W_ij)`` (its parent
   contains another leaf; ``s_max ≈ +4e-4`` is the ``min(T, t_cut)`` quirk); a cherry is covered by
   ``φ_i + φ_j`` (AM–GM). Legacy form: heavier child first, a leaf next to an internal sibling gives
   at most ``N``, and the lightest admissible cherry bounds the cherry leaves.
B. *Shape DP.* Every tree has a shape (node sizes). For each size ``k`` a small Pareto front of
   points ``(G, m)`` — "a sub-hierarchy of k leaves has log-likelihood ≤ G when its mass ≥ m" — is
   built from the exact cherries ``(ψ_ij, W_ij)`` upwards: a node of size ``a + b`` has mass at least
   ``max(T(k), (√m_a + √m_b)², m/0.999)`` (superadditivity of masses, the ratio check), with ``T(k)``
   the best of ``(Σ_k smallest √t_i)²``, ``Σ_k t_i + Σ_{C(k,2)} smallest d`` and a per-leaf
   (star) pair bound, and its split is bounded with the first child's scale ≥ the node's mass bound
   (``sup_{T ≥ m} c(T, t)``) and the ½-mixture kept. The split of S uses its exact mass ``t_S``.
   Merging front points into ``(max G, min m)`` keeps it an upper bound.

Masses of sums of future-directed causal 4-vectors are monotone and superadditive; in the symmetric
form a leaf with ``t < 0`` makes every tree containing it −∞, and in the legacy form a jet with such a
leaf falls back to ``t_cut`` for every mass bound (always valid). Infeasible clusters are exact −∞:
``t_S ≤ t_cut`` (legacy ``<``), a leaf with ``t < 0`` or ``t ≥ 0.999 t_S`` (symmetric), no pair above
``t_cut``. A relative slack of ``1e-9`` absorbs summation-order rounding. Cost: O(n² log n) for the
subset's sorted pair data plus the shape DP (10–60 µs for 4–16 leaves).

Example:
    >>> from jetastar.ginkgo import ShowerParams, generate, heuristic
    >>> jet = generate(1, ShowerParams.qcd(), seed=3, min_leaves=6)[0]
    >>> heuristic(jet, [0, 1, 2, 3], kind="h0") >= heuristic(jet, [0, 1, 2, 3], kind="h1") - 50
    True
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numba as nb
import numpy as np

from .._sorting import argsort_stable, sort_inplace
from ..errors import InvalidJetError
from .kernels import FORM_LEGACY
from .likelihood import check_likelihood, cluster_t, require_jet, split_llh, t_of
from .small_clusters import subset_dp

__all__ = ["HEURISTICS", "check_heuristic", "heuristic", "heuristic_tables", "root_rate_slack"]

#: Names of the heuristics, in the order of their integer codes.
HEURISTICS = ("h0", "h1", "paper")

_A = 0.999
_LOG_4PI = math.log(4.0 * math.pi)
_LOG_2 = math.log(2.0)
_SLACK = 1e-9
_NEG_INF = -np.inf


def root_rate_slack(consts: Any) -> float | None:
    """How much more a split can score with the root rate λ_R than with the inner rate λ.

    ``h0`` of a whole jet bounds its trees scored with λ at every split; the jet's own split is
    scored with λ_R. This is an upper bound ``Δ`` on ``ψ_{λ_R}(A, B) − ψ_λ(A, B)`` over every split
    of every parent, so ``h0(jet) + Δ`` bounds the jet's trees (the proven bound exact A* gives when
    it cannot expand the root).

    Why: ψ is ``−log 4π`` plus, per child, a continuing term ``N + log λ − log T − λ t/T`` or a
    stopping term ``N + log(1 − e^{−λ x})`` (``x = cut/T > 0``), combined by the two orderings'
    ½-mixture (symmetric form) or in one ordering (legacy); a mixture or a sum of terms that each
    grow by at most ``δ`` grows by at most ``2δ``. With ``N = −log(1 − e^{−aλ})`` (``a`` = 0.999
    symmetric, 1 legacy), ``ΔN = N(λ_R) − N(λ)``, ``r = log(λ_R/λ)``:

    * continuing child: ``ΔN + r − (λ_R − λ) t/T``, at most ``ΔN + r`` when ``λ_R ≥ λ``, and at
      most ``ΔN + r + (λ − λ_R)`` when ``λ_R < λ`` because ``t < T`` (symmetric form:
      ``t_child < 0.999 t_P`` and ``√t_l + √t_r ≤ √t_P``; the legacy form does not enforce it for
      the second child, so no slack is claimed there for ``λ_R < λ``);
    * stopping child: ``ΔN + log(f(λ_R x)/f(λ x))`` with ``f(y) = 1 − e^{−y}`` concave,
      ``f(0) = 0``, so ``f(y)/y`` decreases and the ratio is at most ``max(1, λ_R/λ)``;
    * the legacy case of a vanished second scale adds one more ``ΔN ≤ δ``.

    So ``Δ = 2 max(0, ΔN + max(cont, stop))``: 0 for QCD jets (λ_R = λ), 0.98 nats for W jets
    (λ = 1.5, λ_R = 3).

    Args:
        consts: ``(2, 5)`` likelihood constants (:func:`jetastar.ginkgo.likelihood_constants`).

    Returns:
        ``Δ`` in nats, or ``None`` where no bound is proven (legacy form with λ_R < λ).

    Example:
        >>> from jetastar.ginkgo import likelihood_constants
        >>> root_rate_slack(likelihood_constants(16.0, 1.5))
        0.0
        >>> round(root_rate_slack(likelihood_constants(16.0, 1.5, 3.0)), 3)
        0.983
    """
    c = np.asarray(consts, dtype=np.float64)
    lam, lam_root = float(c[0, 1]), float(c[1, 1])
    if lam_root == lam:
        return 0.0
    legacy = c[0, 4] == FORM_LEGACY
    if legacy and lam_root < lam:
        return None
    d_norm = float(c[1, 3] - c[0, 3])
    r = math.log(lam_root / lam)
    cont = r + max(0.0, lam - lam_root)
    stop = max(0.0, r)
    return 2.0 * max(0.0, d_norm + max(cont, stop)) + _SLACK * (1.0 + abs(d_norm) + abs(r))


def check_heuristic(kind: str) -> int:
    """Validate a heuristic name and return its integer code (0 h0, 1 h1, 2 paper).

    Raises:
        ValueError: for an unknown name, listing the valid ones.
    """
    try:
        return HEURISTICS.index(kind)
    except ValueError:
        raise ValueError(
            f"unknown heuristic {kind!r}; valid: {', '.join(map(repr, HEURISTICS))}"
        ) from None


def heuristic_tables(jet: Any, likelihood: str = "symmetric") -> tuple[np.ndarray, ...]:
    """Per-jet tables used by the heuristic kernels (O(N²) work).

    Args:
        jet: a :class:`jetastar.Jet`.
        likelihood: ``"symmetric"`` or ``"legacy"``.

    Returns:
        ``(p, tl, mt, W, D, consts, phys)``: leaf 4-vectors ``(n, 4)``, the ``t`` the likelihood uses
        for single leaves, the actual leaf masses², pair masses ``W`` and ``D = W − t_i − t_j`` (both
        ``(n, n)``), the ``(2, 5)`` likelihood constants and ``phys`` (1-element int64: 1 if every
        leaf has ``t ≥ 0``, so mass-monotonicity bounds apply in the legacy form).
    """
    check_likelihood(likelihood)
    require_jet(jet, "the heuristics bound clusters of")
    p = np.ascontiguousarray(jet.leaves, dtype=np.float64)
    consts = np.ascontiguousarray(jet.likelihood_constants(likelihood))
    return _tables(p, consts)


@nb.njit(cache=True)
def _tables(p, consts):  # pragma: no cover - numba
    n = p.shape[0]
    c = consts[0]
    tl = np.empty(n)
    mt = np.empty(n)
    for i in range(n):
        mt[i] = t_of(p[i, 0], p[i, 1], p[i, 2], p[i, 3])
        tl[i] = cluster_t(p[i, 0], p[i, 1], p[i, 2], p[i, 3], np.int64(1), c)
    w = np.empty((n, n))
    d = np.empty((n, n))
    for i in range(n):
        w[i, i] = np.inf
        d[i, i] = np.inf
        for j in range(i + 1, n):
            v = t_of(p[i, 0] + p[j, 0], p[i, 1] + p[j, 1], p[i, 2] + p[j, 2], p[i, 3] + p[j, 3])
            w[i, j] = v
            w[j, i] = v
            dv = v - mt[i] - mt[j]
            if dv < 0.0:
                dv = 0.0
            d[i, j] = dv
            d[j, i] = dv
    phys = np.ones(1, dtype=np.int64)
    for i in range(n):
        if mt[i] < 0.0:
            phys[0] = 0
    return p, tl, mt, w, d, consts, phys


# ---------------------------------------------------------------------- small building blocks
@nb.njit(cache=True)
def _leaf_term(scale, c):  # pragma: no cover - numba
    """Stop term of a leaf child with scale ``scale`` (form-specific)."""
    tcut = c[0]
    lam = c[1]
    if c[4] == FORM_LEGACY:
        if scale <= 0.0:
            return c[3]
        return c[3] + math.log(-math.expm1(-lam * tcut / scale))
    m = scale if scale < tcut else tcut
    return c[3] + math.log(-math.expm1(-lam * m / scale))


@nb.njit(cache=True)
def _c_sup(t, t_top, c, clamp):  # pragma: no cover - numba
    """``sup c(T, t)`` over ``T ∈ [t, t_top]`` (``clamp``) or over all ``T > 0``."""
    lam = c[1]
    scale = lam * t
    if clamp:
        if scale > t_top:
            scale = t_top
        if scale < t:
            scale = t
    return c[3] + c[2] - math.log(scale) - lam * t / scale


@nb.njit(cache=True)
def _mst_sorted(idx, n, w, out):  # pragma: no cover - numba
    """Sorted weights of the minimum spanning tree (Prim) of ``idx[:n]`` under ``w`` into ``out``."""
    best = np.empty(n)
    used = np.zeros(n, dtype=np.bool_)
    used[0] = True
    i0 = idx[0]
    for a in range(1, n):
        best[a] = w[idx[a], i0]
    for it in range(n - 1):
        bi = -1
        bv = np.inf
        for a in range(1, n):
            if not used[a] and (bi < 0 or best[a] < bv):
                bi = a
                bv = best[a]
        used[bi] = True
        out[it] = bv
        ib = idx[bi]
        for a in range(1, n):
            if not used[a]:
                v = w[idx[a], ib]
                if v < best[a]:
                    best[a] = v
    sort_inplace(out[: n - 1])


@nb.njit(cache=True)
def _exact_small(idx, n, p, tl, c):  # pragma: no cover - numba
    """Exact best log-likelihood over 1, 2 or 3 leaves (inner constants)."""
    if n == 1:
        return 0.0
    if n == 2:
        i, j = idx[0], idx[1]
        return split_llh(
            tl[i], tl[j],
            t_of(p[i, 0] + p[j, 0], p[i, 1] + p[j, 1], p[i, 2] + p[j, 2], p[i, 3] + p[j, 3]), c,
        )
    best = _NEG_INF
    for k in range(3):
        a = idx[(k + 1) % 3]
        b = idx[(k + 2) % 3]
        s = idx[k]
        e = p[a, 0] + p[b, 0]
        x = p[a, 1] + p[b, 1]
        y = p[a, 2] + p[b, 2]
        z = p[a, 3] + p[b, 3]
        t_pair = t_of(e, x, y, z)
        inner = split_llh(tl[a], tl[b], t_pair, c)
        if inner == _NEG_INF:
            continue
        t_c = cluster_t(e, x, y, z, np.int64(2), c)
        top = split_llh(
            t_c, tl[s], t_of(e + p[s, 0], x + p[s, 1], y + p[s, 2], z + p[s, 3]), c
        )
        v = inner + top
        if v > best:
            best = v
    return best


EXACT_MAX_LEAVES = 5  # h0 is exact up to this size (h1 and paper up to 3 leaves)


@nb.njit(cache=True)
def _exact_dp(idx, n, p, tl, c):  # pragma: no cover - numba
    """Exact best log-likelihood over ``n ≤ EXACT_MAX_LEAVES`` leaves: DP over the 2^n subsets.

    Costs ``3^n / 2`` split evaluations (121 at ``n = 5``, a few µs), about what ``h0``'s shape DP
    costs; ``h1`` (used by approximate A*, where speed matters more) is exact up to 3 leaves only.
    """
    best = np.empty(1 << n)
    arg = np.empty(1 << n, dtype=np.int64)
    subset_dp(idx, n, p, tl, c, c, best, arg, n)
    return best[(1 << n) - 1]


# ---------------------------------------------------------------------- the bounds
@nb.njit(cache=True)
def _h0(idx, n, t_s, p, tl, mt, w, d, c, phys):  # pragma: no cover - numba
    tcut = c[0]
    lam = c[1]
    legacy = c[4] == FORM_LEGACY
    if legacy:
        if not t_s >= tcut:
            return _NEG_INF
    else:
        if not t_s > tcut:
            return _NEG_INF
        for a in range(n):
            ti = tl[idx[a]]
            if ti < 0.0 or ti >= _A * t_s:
                return _NEG_INF
    use_pairs = (not legacy) or phys
    # internal-mass lower bounds x_1 <= ... <= x_{n-2}
    om = np.empty(n)
    de = np.empty(n)
    if use_pairs:
        _mst_sorted(idx, n, w, om)
        _mst_sorted(idx, n, d, de)
    ts = np.empty(n)
    for a in range(n):
        ts[a] = mt[idx[a]] if mt[idx[a]] > 0.0 else 0.0
    sort_inplace(ts)
    tau = np.zeros(n + 1)
    if use_pairs:
        acc = 0.0
        for m in range(1, n + 1):
            acc += ts[m - 1]
            if m >= 2:
                acc += de[m - 2]
            tau[m] = acc
    total = -(n - 1) * _LOG_4PI
    for k in range(1, n - 1):
        x = tcut
        if use_pairs:
            if om[k - 1] > x:
                x = om[k - 1]
            j = n - k
            size = (n + j - 1) // j
            if tau[size] > x:
                x = tau[size]
        total += _c_sup(x, t_s, c, use_pairs)
    # leaves
    if legacy:
        rho = np.inf
        for a in range(n):
            for b in range(a + 1, n):
                v = w[idx[a], idx[b]]
                if v >= tcut and v < rho:
                    rho = v
        if rho == np.inf:
            return _NEG_INF
        total += (n - 2) * c[3] + 2.0 * _leaf_term(rho, c)
    else:
        s_max = c[3] + math.log(-math.expm1(-lam))
        for a in range(n):
            i = idx[a]
            if tl[i] > tcut:
                total += _c_sup(tl[i], t_s, c, np.bool_(True))
                continue
            mu = np.inf
            for b in range(n):
                if b != a and w[i, idx[b]] < mu:
                    mu = w[i, idx[b]]
            beta = mu if mu > tcut else tcut
            sb = _leaf_term(beta, c)
            hi = sb if sb > s_max else s_max
            lo = sb if sb <= s_max else s_max
            total += hi + math.log1p(math.exp(lo - hi)) - _LOG_2
    return total + _SLACK * (1.0 + abs(total))


_FRONT = 4  # points kept per size in the shape DP (merging keeps it an upper bound)
_NO_FLOOR = np.zeros(0)


@nb.njit(cache=True)
def _lse_half(x, y):  # pragma: no cover - numba
    """log(½ e^x + ½ e^y), −∞-safe."""
    hi = x if x > y else y
    lo = y if x > y else x
    if hi == _NEG_INF:
        return _NEG_INF
    return hi + math.log1p(math.exp(lo - hi)) - _LOG_2


@nb.njit(cache=True)
def _c_first(t, t_par, t_top, c):  # pragma: no cover - numba
    """``sup c(T, t)`` over ``T ∈ [t_par, t_top]`` (first child: its scale is the parent mass)."""
    scale = c[1] * t
    if scale < t_par:
        scale = t_par
    if scale > t_top and t_top >= t_par:
        scale = t_top
    return c[3] + c[2] - math.log(scale) - c[1] * t / scale


@nb.njit(cache=True)
def _compress(gs, ms, n, out_g, out_m):  # pragma: no cover - numba
    """Pareto front (max G, min m) of n points, merged down to ``_FRONT`` dominating points."""
    order = argsort_stable(ms[:n])
    fg = np.empty(n)
    fm = np.empty(n)
    k = 0
    best = _NEG_INF
    for q in range(n):
        a = order[q]
        if gs[a] > best:
            fg[k] = gs[a]
            fm[k] = ms[a]
            best = gs[a]
            k += 1
    if k <= _FRONT:
        for q in range(k):
            out_g[q] = fg[q]
            out_m[q] = fm[q]
        return k
    # merge consecutive runs: (largest G of the run, smallest m of the run) dominates the run
    for j in range(_FRONT):
        lo = (j * k) // _FRONT
        hi = ((j + 1) * k) // _FRONT - 1
        out_g[j] = fg[hi]
        out_m[j] = fm[lo]
    return _FRONT


@nb.njit(cache=True)
def _h0_shapes(idx, n, t_s, p, tl, mt, w, d, c, phys, mass_floor):  # pragma: no cover - numba
    """h0 by a DP over tree shapes (sizes) with mass lower bounds; see the module docstring.

    ``mass_floor`` (empty, or ``n + 1`` values) raises the per-size mass bounds ``T(k)``: any valid
    lower bound on the mass of every ``k``-leaf subset of the cluster (the benchmarks pass the exact
    minimum to measure what better mass bounds would buy).
    """
    tcut = c[0]
    lam = c[1]
    legacy = c[4] == FORM_LEGACY
    use_pairs = (not legacy) or phys
    clamp = use_pairs
    s_max = c[3] + math.log(-math.expm1(-lam))
    # per-size mass lower bounds T(k)
    sq = np.empty(n)
    ts = np.empty(n)
    for a in range(n):
        v = mt[idx[a]]
        v = v if v > 0.0 else 0.0
        ts[a] = v
        sq[a] = math.sqrt(v)
    ts_raw = ts.copy()
    sort_inplace(ts)
    sort_inplace(sq)
    tk = np.full(n + 1, tcut)
    if use_pairs:
        npairs = n * (n - 1) // 2
        pd = np.empty(npairs)
        rows = np.empty((n, n - 1))
        q = 0
        for a in range(n):
            r = 0
            for b in range(n):
                if b != a:
                    rows[a, r] = d[idx[a], idx[b]]
                    r += 1
                    if b > a:
                        pd[q] = d[idx[a], idx[b]]
                        q += 1
            sort_inplace(rows[a])
        sort_inplace(pd)
        rowcs = np.zeros((n, n))
        for a in range(n):
            for r in range(1, n):
                rowcs[a, r] = rowcs[a, r - 1] + rows[a, r - 1]
        col = np.empty(n)
        cs_sq = 0.0
        cs_t = 0.0
        cs_d = 0.0
        nd = 0
        for k in range(1, n + 1):
            cs_sq += sq[k - 1]
            cs_t += ts[k - 1]
            need = k * (k - 1) // 2
            while nd < need:
                cs_d += pd[nd]
                nd += 1
            for a in range(n):
                col[a] = rowcs[a, k - 1]
            sort_inplace(col)
            star = 0.0
            for a in range(k):
                star += col[a]
            star *= 0.5
            v = cs_sq * cs_sq
            if cs_t + cs_d > v:
                v = cs_t + cs_d
            if cs_t + star > v:
                v = cs_t + star
            if v > tk[k]:
                tk[k] = v
    if mass_floor.shape[0] > 0:
        for k in range(n + 1):
            if mass_floor[k] > tk[k]:
                tk[k] = mass_floor[k]
    fg = np.full((n + 1, _FRONT), _NEG_INF)
    fm = np.zeros((n + 1, _FRONT))
    fc = np.zeros(n + 1, dtype=np.int64)
    cap = n * _FRONT * _FRONT + n * n
    bg = np.empty(cap)
    bm = np.empty(cap)
    # cherries: exact pair splits
    nb_ = np.int64(0)  # int64, not a literal: one specialisation of the kernels it is passed to
    for a in range(n):
        for b in range(a + 1, n):
            i = idx[a]
            j = idx[b]
            wij = w[i, j]
            ok = wij >= tcut if legacy else wij > tcut
            if not ok:
                continue
            v = split_llh(tl[i], tl[j], wij, c)
            if v == _NEG_INF:
                continue
            bg[nb_] = v
            bm[nb_] = wij
            nb_ += 1
    if nb_ == 0:
        return _NEG_INF
    fc[2] = _compress(bg, bm, nb_, fg[2], fm[2])
    leaf_sq = sq[0]
    for k in range(3, n):
        nb_ = np.int64(0)
        for a in range(1, k // 2 + 1):
            b = k - a
            if fc[b] == 0 or (a > 1 and fc[a] == 0):
                continue
            na = 1 if a == 1 else fc[a]
            for ia in range(na):
                for ib in range(fc[b]):
                    gb = fg[b, ib]
                    mb = fm[b, ib]
                    if a == 1:
                        sup = leaf_sq + math.sqrt(mb)
                        m = tk[k]
                        if use_pairs and sup * sup > m:
                            m = sup * sup
                        if not legacy and mb / _A > m:
                            m = mb / _A
                        if legacy:
                            val = gb + _c_first(mb, m, t_s, c) + c[3]
                        else:
                            x = _leaf_term(m, c) + _c_sup(mb, t_s, c, clamp)
                            y = _c_first(mb, m, t_s, c) + s_max
                            val = gb + _lse_half(x, y)
                    else:
                        ga = fg[a, ia]
                        ma = fm[a, ia]
                        sup = math.sqrt(ma) + math.sqrt(mb)
                        m = tk[k]
                        if use_pairs and sup * sup > m:
                            m = sup * sup
                        if legacy:
                            hi = ma if ma > mb else mb
                            lo = mb if ma > mb else ma
                            val = ga + gb + _c_first(hi, m, t_s, c) + _c_sup(lo, t_s, c, clamp)
                        else:
                            if ma / _A > m:
                                m = ma / _A
                            if mb / _A > m:
                                m = mb / _A
                            x = _c_first(ma, m, t_s, c) + _c_sup(mb, t_s, c, clamp)
                            y = _c_first(mb, m, t_s, c) + _c_sup(ma, t_s, c, clamp)
                            val = ga + gb + _lse_half(x, y)
                    if val == _NEG_INF:
                        continue
                    bg[nb_] = val - _LOG_4PI
                    bm[nb_] = m
                    nb_ += 1
        fc[k] = _compress(bg, bm, nb_, fg[k], fm[k]) if nb_ > 0 else 0
    # the split of S itself: its mass t_s is known
    # sc2[b]: a lower bound on the scale (√t_S − √t_L)² of a second child R of b leaves, from
    # t_S − t_L = Σ_{i∈R} t_i + (pairs touching R) ≥ Σ_{i∈R} (t_i + ½ D_i), D_i = Σ_{j∈S} d_ij
    # (fact 3: d_ij ≥ 0), i.e. t_L ≤ t_S − (the b smallest t_i + ½ D_i)
    sc2 = np.zeros(n + 1)
    if use_pairs:
        excl = np.empty(n)
        for a in range(n):
            excl[a] = ts_raw[a] + 0.5 * rowcs[a, n - 1]
        sort_inplace(excl)
        acc = 0.0
        for b in range(1, n):
            acc += excl[b - 1]
            u = t_s - acc
            if u < 0.0:
                u = 0.0
            v = math.sqrt(t_s) - math.sqrt(u)
            sc2[b] = v * v
    best = _NEG_INF
    leaf_max = sq[n - 1]
    t2lo = (math.sqrt(t_s) - leaf_max) ** 2
    s_top = _leaf_term(t_s, c)
    for a in range(1, n // 2 + 1):
        b = n - a
        if fc[b] == 0 or (a > 1 and fc[a] == 0):
            continue
        na = 1 if a == 1 else fc[a]
        for ia in range(na):
            for ib in range(fc[b]):
                gb = fg[b, ib]
                mb = fm[b, ib]
                if a == 1:
                    if legacy:
                        val = gb + _c_first(mb, t_s, t_s, c) + c[3]
                    else:
                        lo_scale = t2lo if t2lo > mb else mb
                        x = s_top + _c_first(mb, lo_scale, t_s, c)
                        y = _c_first(mb, t_s, t_s, c) + s_max
                        val = gb + _lse_half(x, y)
                else:
                    ga = fg[a, ia]
                    ma = fm[a, ia]
                    if legacy:
                        hi = ma if ma > mb else mb
                        lo = mb if ma > mb else ma
                        # the lighter child is second: its scale is at least the smaller bound
                        s2 = sc2[a] if sc2[a] < sc2[b] else sc2[b]
                        if use_pairs and s2 > lo:
                            second = _c_first(lo, s2, t_s, c)
                        else:
                            second = _c_sup(lo, t_s, c, clamp)
                        val = ga + gb + _c_first(hi, t_s, t_s, c) + second
                    else:
                        # b second (a first): scale >= sc2[b]; a second: scale >= sc2[a]
                        sb2 = sc2[b] if sc2[b] > mb else mb
                        sa2 = sc2[a] if sc2[a] > ma else ma
                        x = _c_first(ma, t_s, t_s, c) + _c_first(mb, sb2, t_s, c)
                        y = _c_first(mb, t_s, t_s, c) + _c_first(ma, sa2, t_s, c)
                        val = ga + gb + _lse_half(x, y)
                if val > best:
                    best = val
    if best == _NEG_INF:
        return _NEG_INF
    best -= _LOG_4PI
    return best + _SLACK * (1.0 + abs(best))


@nb.njit(cache=True)
def _paper(idx, n, t_s, p, tl, mt, w, c, proof):  # pragma: no cover - numba
    """The reference heuristics (``proof`` = sorted-mass proof variant, else the no-proof h1)."""
    tcut = c[0]
    lam = c[1]
    legacy = c[4] == FORM_LEGACY
    if legacy:
        if not t_s >= tcut:
            return _NEG_INF
    elif not t_s > tcut:
        return _NEG_INF
    tmin = np.empty(n)
    for a in range(n):
        best = np.inf
        for b in range(n):
            if b != a:
                v = w[idx[a], idx[b]]
                if v >= tcut and v < best:
                    best = v
        tmin[a] = best if best < np.inf else tcut
    sort_inplace(tmin)
    tstar = tmin[0]
    m2 = np.empty(n)
    for a in range(n):
        m2[a] = mt[idx[a]] if mt[idx[a]] > 0.0 else 0.0
    sort_inplace(m2)
    # leaves
    total = 0.0
    for a in range(n):
        if proof:
            r = math.sqrt(tmin[a]) - math.sqrt(m2[n - 1])
        else:
            r = math.sqrt(tstar) - math.sqrt(m2[a])
        scale = r * r
        if not proof and a == n - 1:
            scale = tstar
        total += _leaf_term(scale, c)
    # inner nodes
    v = np.empty(n)
    nv = 0
    for a in range(n // 2):
        if nv < n - 2:
            v[nv] = tmin[a]
            nv += 1
    i = 3
    j = n % 2 + n // 2
    while nv < n - 2:
        v[nv] = (m2[0] * (i % 2) + tstar * (i // 2)) * (j // 2)
        nv += 1
        j = j // 2 + j % 2
        i += 1
    for m in range(n - 2):
        if proof:
            vp = v[m] + m2[0] if v[m] > m2[n - 1] else v[m]
            if vp < tcut:
                vp = tcut
        else:
            vp = v[m] + 2.0 * tstar
        total += c[3] + c[2] - math.log(vp) - lam * v[m] / t_s
    total -= (n - 1) * _LOG_4PI
    if total != total:
        return _NEG_INF
    return total


@nb.njit(cache=True)
def bound_value(kind, idx, n, t_s, p, tl, mt, w, d, c, phys):  # pragma: no cover - numba
    """Heuristic value of the cluster ``idx[:n]`` (numba kernel used by A*).

    Args:
        kind: 0 ``h0``, 1 ``h1``, 2 ``paper``.
        idx: leaf indices (only the first ``n`` are used).
        n: cluster size.
        t_s: actual squared mass of the cluster's summed 4-momentum.
        p, tl, mt, w, d, phys: from :func:`heuristic_tables`; ``c`` the inner constants row.

    Returns:
        An upper bound (``h0``) or estimate of the best sub-hierarchy log-likelihood: finite or −∞.
    """
    if n <= 3:
        return _exact_small(idx, n, p, tl, c)
    if kind == 0 and n <= EXACT_MAX_LEAVES:
        return _exact_dp(idx, n, p, tl, c)
    if kind == 0:
        simple = _h0(idx, n, t_s, p, tl, mt, w, d, c, phys[0] != 0)
        if simple == _NEG_INF:
            return simple
        if c[4] == 0.0:
            for a in range(n):
                if tl[idx[a]] > c[0]:
                    return simple
        shapes = _h0_shapes(idx, n, t_s, p, tl, mt, w, d, c, phys[0] != 0, _NO_FLOOR)
        return shapes if shapes < simple else simple
    return _paper(idx, n, t_s, p, tl, mt, w, c, kind == 2)


@nb.njit(cache=True)
def _bound_py(kind, idx, p, tl, mt, w, d, consts, phys):  # pragma: no cover - numba
    n = idx.shape[0]
    e = 0.0
    x = 0.0
    y = 0.0
    z = 0.0
    for a in range(n):
        e += p[idx[a], 0]
        x += p[idx[a], 1]
        y += p[idx[a], 2]
        z += p[idx[a], 3]
    return bound_value(kind, idx, n, t_of(e, x, y, z), p, tl, mt, w, d, consts[0], phys)


def heuristic(
    jet: Any,
    leaf_indices: Iterable[int],
    kind: str = "h0",
    likelihood: str = "symmetric",
) -> float:
    """Heuristic value of one cluster: an upper bound (``h0``) on its best sub-hierarchy.

    The value bounds the sum of the split log-likelihoods of the best hierarchy over the given
    leaves, the cluster's own split included, every split scored with the inner rate λ.

    Args:
        jet: a :class:`jetastar.Jet`.
        leaf_indices: indices of the cluster's leaves (distinct, in ``0 .. n-1``).
        kind: ``"h0"`` (admissible), ``"h1"`` (the paper's approximate heuristic) or ``"paper"``
            (the reference's "proof" variant, for comparisons).
        likelihood: ``"symmetric"`` (default) or ``"legacy"``.

    Returns:
        A float, finite or ``-inf`` (no finite hierarchy over the cluster); ``0.0`` for one leaf.

    Raises:
        ValueError: unknown ``kind``/``likelihood``, or invalid / repeated leaf indices.

    Example:
        >>> from jetastar.ginkgo import ShowerParams, generate, heuristic
        >>> jet = generate(1, ShowerParams.w(), seed=1, min_leaves=5)[0]
        >>> heuristic(jet, [0]) == 0.0
        True
    """
    code = check_heuristic(kind)
    check_likelihood(likelihood)
    require_jet(jet, "heuristic bounds clusters of")
    idx = np.asarray(list(leaf_indices), dtype=np.int64).ravel()
    n = jet.n_leaves
    if idx.size == 0:
        raise InvalidJetError("a cluster needs at least one leaf", jet=jet.label, field="leaf_indices")
    if idx.min() < 0 or idx.max() >= n:
        raise InvalidJetError(
            f"leaf indices must be in 0..{n - 1}, got {idx.tolist()}", jet=jet.label,
            field="leaf_indices",
        )
    if np.unique(idx).size != idx.size:
        raise InvalidJetError(
            f"repeated leaf indices {idx.tolist()}", jet=jet.label, field="leaf_indices"
        )
    p, tl, mt, w, d, consts, phys = heuristic_tables(jet, likelihood)
    return float(_bound_py(code, np.sort(idx), p, tl, mt, w, d, consts, phys))
