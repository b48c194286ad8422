"""The numba primitives of the Ginkgo likelihood: what every algorithm's kernels call.

These are the building blocks behind :func:`jetastar.ginkgo.log_likelihood`; users score trees with
the Python functions of :mod:`jetastar.ginkgo.likelihood`, kernel authors call these from their own
``@numba.njit`` code (read the rules at the top of ``jetastar/_jit.py`` first).

* :func:`t_of`, :func:`cluster_t`: the squared mass ``t`` of a 4-vector / of a cluster as a form
  uses it;
* :func:`split_llh`: the split log-likelihood ψ from three ``t`` values and one constants row
  (:func:`jetastar.ginkgo.likelihood_constants`), with :func:`parent_terms` and
  :func:`split_llh_given_parent` for callers scoring many splits of one parent;
* :func:`child_bound`, :func:`split_bound_given_parent`, :func:`split_bound_of_split`,
  :func:`split_llh_bound`: cheap upper bounds on ψ for branch-and-bound search (the exact MAP
  engine uses :func:`split_bound_of_split`, the tightest); :func:`split_llh_above` evaluates ψ only
  where its bound can beat a given value (:func:`bound_below`);
* :func:`split_llh_many`, :func:`tree_node_llh`, :func:`truth_llh_kernel`: many splits, every node
  of one tree, and the truth trees of a whole collection's flat columns.

A constants row is ``[t_cut, λ, log λ, N, form]`` (``N_CONSTANTS`` values; ``form`` is
:data:`FORM_SYMMETRIC`, :data:`FORM_LEGACY` or :data:`FORM_DENSITY`).

Example:
    >>> from jetastar.ginkgo import likelihood_constants
    >>> from jetastar.ginkgo.kernels import split_llh, t_of
    >>> c = likelihood_constants(16.0, 1.5)[0]
    >>> bool(split_llh(t_of(5.0, 0.0, 0.0, 4.0), 0.0, 900.0, c) < 0)
    True
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from .._jit import kernel_helper

__all__ = [
    "BOUND_MARGIN",
    "DENSITY_CONSTANT",
    "FORM_DENSITY",
    "FORM_LEGACY",
    "FORM_SYMMETRIC",
    "N_CONSTANTS",
    "TRUNCATION",
    "bound_below",
    "child_bound",
    "cluster_t",
    "density_geometry",
    "parent_terms",
    "split_bound_given_parent",
    "split_bound_of_split",
    "split_llh",
    "split_llh_above",
    "split_llh_bound",
    "split_llh_given_parent",
    "split_llh_many",
    "t_of",
    "tree_node_llh",
    "tree_postorder",
    "tree_split_terms",
    "truth_llh_kernel",
]

#: Truncation of the exponential draws of the shower (1 - 1e-3).
TRUNCATION = 0.999
_A = TRUNCATION
_LOG_HALF = math.log(0.5)
_LOG_4PI = math.log(4.0 * math.pi)
_NEG_INF = -np.inf

# layout of a constants row (float64 array of length 5)
_C_TCUT, _C_LAM, _C_LOGLAM, _C_NORM, _C_FORM = range(5)
#: Length of a constants row.
N_CONSTANTS = 5
#: the form code in a constants row (its last entry): the generator-consistent symmetric form, the
#: legacy heavier-first form of the 2020-21 papers, and the density of the observed jet
FORM_SYMMETRIC, FORM_LEGACY, FORM_DENSITY = 0.0, 1.0, 2.0
_LOG_8 = math.log(8.0)
#: the constant of the density form's ψ: ``log ½ − log 4π + log 8`` (the direction's density and
#: the Jacobian's ``8``)
DENSITY_CONSTANT = _LOG_HALF - _LOG_4PI + _LOG_8


@nb.njit(cache=True)
def t_of(e: float, px: float, py: float, pz: float) -> float:
    """Squared invariant mass ``E² - |p|²`` (numba kernel; callable from Python too)."""
    return e * e - (px * px + py * py + pz * pz)


@nb.njit(cache=True)
def cluster_t(e: float, px: float, py: float, pz: float, size: int, c: np.ndarray) -> float:
    """The ``t`` a likelihood form uses for a cluster of ``size`` leaves with summed 4-momentum.

    Legacy form: 0 for a single leaf. Density form: a single leaf above ``t_cut`` would have split
    (it cannot be a leaf), so its ``t`` is ``+inf``, which makes every split with it impossible.
    Otherwise ``E² − |p|²``.
    """
    if size == 1 and c[_C_FORM] != FORM_SYMMETRIC:
        if c[_C_FORM] == FORM_LEGACY:
            return 0.0
        t = e * e - (px * px + py * py + pz * pz)
        return t if not t > c[_C_TCUT] else np.inf
    return e * e - (px * px + py * py + pz * pz)


@nb.njit(cache=True)
def parent_terms(t_parent: float, c: np.ndarray) -> tuple[float, float, float]:
    """The parts of ψ that depend only on the parent: ``(√tP, log tP, first-child stop term)``.

    The stop term ``N + log(1 − exp(−λ t_cut / tP))`` is the log-probability that the child drawn
    first from the parent becomes a leaf (both forms; any split with non-zero likelihood has
    ``tP >= t_cut``, so ``min(tP, t_cut) = t_cut``). A caller that scores many splits of one parent
    computes these once and calls :func:`split_llh_given_parent`; for ``tP <= 0`` the values are
    NaN and must not be used (the split is ``-inf``).
    """
    if not t_parent > 0.0:
        return np.nan, np.nan, np.nan
    return math.sqrt(t_parent), math.log(t_parent), _stop_term(t_parent, c)


@nb.njit(cache=True, inline="always")
def _stop_term(t_parent: float, c: np.ndarray) -> float:
    """The first-child stop term ``N + log(1 − exp(−λ t_cut / tP))`` of :func:`parent_terms`."""
    return c[_C_NORM] + math.log(-math.expm1(-c[_C_LAM] * c[_C_TCUT] / t_parent))


@nb.njit(cache=True)
def _second_child(scale: float, t: float, legacy: bool, c: np.ndarray) -> float:
    """log-density (continues) or log-probability (stops) of the child drawn second, scale T."""
    if (t > 0.0) if legacy else (t > c[_C_TCUT]):
        return c[_C_NORM] + c[_C_LOGLAM] - math.log(scale) - c[_C_LAM] * t / scale
    cut = c[_C_TCUT] if legacy else min(scale, c[_C_TCUT])
    return c[_C_NORM] + math.log(-math.expm1(-c[_C_LAM] * cut / scale))


@nb.njit(cache=True, inline="always")
def _second_offset(scale: float, t: float, c: np.ndarray) -> float:
    """Symmetric form: :func:`_second_child` ``= _second_offset + log(_second_factor)``."""
    if t > c[_C_TCUT]:
        return c[_C_NORM] + c[_C_LOGLAM] - c[_C_LAM] * t / scale
    return c[_C_NORM]


@nb.njit(cache=True, inline="always")
def _second_factor(scale: float, t: float, c: np.ndarray) -> float:
    """Symmetric form: the factor whose log completes :func:`_second_offset` (``1/T`` or the stop
    probability ``1 − exp(−λ min(T, t_cut) / T)``)."""
    if t > c[_C_TCUT]:
        return 1.0 / scale
    return -math.expm1(-c[_C_LAM] * min(scale, c[_C_TCUT]) / scale)


@nb.njit(cache=True, inline="always")
def _first_child(t: float, t_parent: float, log_tp: float, stop: float, legacy: bool,
                 c: np.ndarray) -> float:
    """The same for the child drawn first (scale tP), with the parent terms precomputed."""
    if (t > 0.0) if legacy else (t > c[_C_TCUT]):
        return c[_C_NORM] + c[_C_LOGLAM] - log_tp - c[_C_LAM] * t / t_parent
    return stop


@nb.njit(cache=True, inline="always")
def _symmetric_closed(t_left: float, t_right: float, t_parent: float, c: np.ndarray) -> bool:
    """Symmetric form: whether ψ is ``-inf`` from the three ``t`` alone (a parent that cannot
    split, a negative child, or a child at or above the truncation ``A tP``)."""
    if not t_parent > 0.0 or t_left < 0.0 or t_right < 0.0:
        return True
    if t_parent <= c[_C_TCUT]:
        return True
    limit = _A * t_parent
    return t_left >= limit or t_right >= limit


@nb.njit(cache=True, inline="always")
def density_geometry(t_left: float, t_right: float, t_parent: float, s_parent: float,
                     t_cut: float) -> tuple[float, float, float, bool, bool]:
    """The part of the density form's ψ that no rate changes (:func:`_density_split`; the scans
    over rates of :mod:`jetastar.clustering.exact.evidence` reuse it for every grid point).

    Returns:
        ``(K, T_lr, T_rl, ok_lr, ok_rl)``: the Källén function ``K(tP, tL, tR)`` (``0`` when the
        split is impossible at any rate: ``tP <= t_cut``, a negative child or one at or above the
        truncation ``A tP``, ``√tL + √tR > √tP``, ``K <= 0``), the second draw's scale of each
        ordering (left first: ``(√tP − √tL)²``) and whether that ordering's second draw is below
        its truncation.
    """
    if not t_parent > t_cut or t_left < 0.0 or t_right < 0.0:
        return 0.0, 0.0, 0.0, False, False
    limit = _A * t_parent
    if t_left >= limit or t_right >= limit:
        return 0.0, 0.0, 0.0, False, False
    s_left = math.sqrt(t_left)
    s_right = math.sqrt(t_right)
    if s_left + s_right > s_parent:
        return 0.0, 0.0, 0.0, False, False
    # K = (tP − (√tL + √tR)²)(tP − (√tL − √tR)²): no cancellation near the threshold
    k = (t_parent - (s_left + s_right) ** 2) * (t_parent - (s_left - s_right) ** 2)
    if not k > 0.0:
        return 0.0, 0.0, 0.0, False, False
    scale_lr = (s_parent - s_left) * (s_parent - s_left)
    scale_rl = (s_parent - s_right) * (s_parent - s_right)
    return k, scale_lr, scale_rl, t_right < _A * scale_lr, t_left < _A * scale_rl


@nb.njit(cache=True)
def _density_split(t_left: float, t_right: float, t_parent: float, s_parent: float,
                   c: np.ndarray) -> float:
    """ψ in the density form: the log-density of the two children's 4-momenta given the parent's.

    Each child's ``t`` is scored by the density of its draw, leaves included (a leaf's mass is
    observed), and the map from the draws ``(t_first, t_second, direction)`` to the lab 4-momentum of
    a child has the Jacobian ``8 tP / √K(tP, tL, tR)`` (``K`` the Källén function), so::

        ψ = logaddexp(log f(tL | tP) + log f(tR | (√tP − √tL)²),
                      log f(tR | tP) + log f(tL | (√tP − √tR)²)) + log ½ − log 4π
            + log 8 + log tP − ½ log K,
        log f(t | T) = N + log λ − log T − λ t / T     (0 <= t < 0.999 T; −∞ otherwise).

    ``−∞`` as in the symmetric form (``tP <= t_cut``, a negative child, ``√tL + √tR > √tP``), for an
    ordering whose second draw is over its truncation, and for ``K <= 0``. ``docs/physics.md``
    derives it. (The first child's ``−log tP`` and the Jacobian's ``log tP`` cancel.)
    """
    k, scale_lr, scale_rl, ok_lr, ok_rl = density_geometry(t_left, t_right, t_parent, s_parent,
                                                           c[_C_TCUT])
    if not k > 0.0:
        return _NEG_INF
    lam = c[_C_LAM]
    e_lr = _NEG_INF
    if ok_lr:
        e_lr = -lam * t_left / t_parent - math.log(scale_lr) - lam * t_right / scale_lr
    e_rl = _NEG_INF
    if ok_rl:
        e_rl = -lam * t_right / t_parent - math.log(scale_rl) - lam * t_left / scale_rl
    high = max(e_lr, e_rl)
    if high == _NEG_INF:
        return _NEG_INF
    both = high + math.log1p(math.exp(min(e_lr, e_rl) - high))
    value = (2.0 * (c[_C_NORM] + c[_C_LOGLAM]) + both + _LOG_HALF - _LOG_4PI + _LOG_8
             - 0.5 * math.log(k))
    if value != value:
        return _NEG_INF
    return value


@nb.njit(cache=True)
def split_llh_given_parent(
    t_left: float, t_right: float, t_parent: float, s_parent: float, log_tp: float, stop: float,
    c: np.ndarray,
) -> float:
    """:func:`split_llh` with the parent's :func:`parent_terms` precomputed (same result, bit for bit).

    Args:
        t_left, t_right, t_parent: as in :func:`split_llh`.
        s_parent, log_tp, stop: ``parent_terms(t_parent, c)``.
        c: the constants row.
    """
    if c[_C_FORM] != FORM_SYMMETRIC:
        if c[_C_FORM] == FORM_DENSITY:
            return _density_split(t_left, t_right, t_parent, s_parent, c)
        if not t_parent >= c[_C_TCUT]:
            return _NEG_INF
        if t_left >= t_right:
            t_max, t_min = t_left, t_right
        else:
            t_max, t_min = t_right, t_left
        if t_max < 0.0:
            return _NEG_INF
        scale2 = s_parent - math.sqrt(t_max)
        scale2 = scale2 * scale2
        first = _first_child(t_max, t_parent, log_tp, stop, np.bool_(True), c)
        if not scale2 > 0.0:
            if t_min > 0.0 or not scale2 == 0.0:
                return _NEG_INF
            # t_min is a leaf and the scale vanished: the stop probability is 1 (log 0 → 0)
            value = first + c[_C_NORM] - _LOG_4PI
        else:
            value = first + _second_child(scale2, t_min, True, c) - _LOG_4PI
        if value != value:
            return _NEG_INF
        return value
    # symmetric (generator-consistent) form
    if _symmetric_closed(t_left, t_right, t_parent, c):
        return _NEG_INF
    s_left = math.sqrt(t_left)
    s_right = math.sqrt(t_right)
    if s_left + s_right > s_parent:
        return _NEG_INF
    # ordering "left drawn first" = a_lr + log(b_lr), and the reverse (module docstring)
    a_lr = _first_child(t_left, t_parent, log_tp, stop, np.bool_(False), c)
    b_lr = _second_factor((s_parent - s_left) * (s_parent - s_left), t_right, c)
    a_lr += _second_offset((s_parent - s_left) * (s_parent - s_left), t_right, c)
    a_rl = _first_child(t_right, t_parent, log_tp, stop, np.bool_(False), c)
    b_rl = _second_factor((s_parent - s_right) * (s_parent - s_right), t_left, c)
    a_rl += _second_offset((s_parent - s_right) * (s_parent - s_right), t_left, c)
    if a_lr >= a_rl:
        total = b_lr + math.exp(a_rl - a_lr) * b_rl
        a_hi = a_lr
    else:
        total = b_rl + math.exp(a_lr - a_rl) * b_lr
        a_hi = a_rl
    if not total > 0.0 or a_hi == _NEG_INF:
        return _NEG_INF
    value = a_hi + math.log(total) + _LOG_HALF - _LOG_4PI
    if value != value:
        return _NEG_INF
    return value


@nb.njit(cache=True, inline="always")
def _parent_terms_of(t_left: float, t_right: float, t_parent: float,
                     c: np.ndarray) -> tuple[float, float, float]:
    """:func:`parent_terms` for one split, with only the terms its children use (symmetric form:
    ``log tP`` when a child continues, the stop term when a child stops; the others NaN): the
    scores of single splits (greedy, beam search, MCTS) skip a ``log`` or an ``expm1`` and a
    ``log`` per split. The terms computed are those of :func:`parent_terms`, bit for bit."""
    if not t_parent > 0.0 or c[_C_FORM] != FORM_SYMMETRIC:
        return parent_terms(t_parent, c)
    cut = c[_C_TCUT]
    log_tp = math.log(t_parent) if (t_left > cut or t_right > cut) else np.nan
    stop = _stop_term(t_parent, c) if not (t_left > cut and t_right > cut) else np.nan
    return math.sqrt(t_parent), log_tp, stop


@nb.njit(cache=True)
def split_llh(t_left: float, t_right: float, t_parent: float, c: np.ndarray) -> float:
    """Split log-likelihood ψ from the three squared masses (the one kernel every algorithm calls).

    Args:
        t_left, t_right: children's ``t``. Symmetric form: their actual squared masses. Legacy form:
            0 for a single leaf, the squared mass for a cluster of two or more leaves.
        t_parent: ``t(p_left + p_right)``.
        c: one row of :func:`~jetastar.ginkgo.likelihood_constants` (inner or root).

    Returns:
        ψ, finite or ``-inf`` (never NaN).
    """
    if not t_parent >= c[_C_TCUT]:  # impossible in both forms: skip the parent terms
        return _NEG_INF
    s_parent, log_tp, stop = _parent_terms_of(t_left, t_right, t_parent, c)
    return split_llh_given_parent(t_left, t_right, t_parent, s_parent, log_tp, stop, c)


# ---------------------------------------------------------------------- upper bounds on ψ
# Each ordering of a split is  [first-child term, scale tP] + [second-child term, scale T]  (the
# symmetric form adds log ½ and log-add-exps the two orderings; the legacy form takes the heavier
# child first). The second child's term, maximised over its unknown scale T, is at most
#     G(t) = N − 1 − log t                 for a continuing child (maximum at T = λ t),
#     G(t) = N + log(1 − e^−λ)             for a stopping one (symmetric: min(T, t_cut)/T <= 1),
#     G(t) = N                             for a stopping one in the legacy form (t_cut/T unbounded),
# and the first child's term is that term at T = tP, so it is at most G as well. log-add-exp of the
# two orderings is at most their max plus log 2, which cancels the log ½. Hence, for either form,
#     ψ(A, B) <= max(first(tA) + G(tB), first(tB) + G(tA)) − log 4π <= G(tA) + G(tB) − log 4π,
# where first(t) is the exact first-child term (:func:`_first_child`). The exact MAP engine keeps
# W(S) = V(S) + G(S) per cluster and skips a split whose bound cannot beat the best split so far.


@nb.njit(cache=True, inline="always")
def child_bound_of_splittable(log_t: float, c: np.ndarray) -> float:
    """:func:`child_bound` of a cluster that can be split (``t`` above the cut, or at a positive
    legacy cut: the continuing branch in both forms), from ``log t``: :func:`child_bound` calls
    it, and the exact engines pass the ``log t`` they already have (one ``log`` less a cluster)."""
    return c[_C_NORM] - 1.0 - log_t


@nb.njit(cache=True)
def child_bound(t: float, c: np.ndarray) -> float:
    """``G(t)``: an upper bound on the log-term of a child of squared mass ``t`` in any split.

    Bounds both the first-child term (scale ``tP``) and the second-child term maximised over its
    scale, in the form selected by ``c`` (see the comment above; ``t`` follows the form's
    convention, 0 for a legacy single leaf). Split bound: ``G(tA) + G(tB) − log 4π >= ψ``.

    Args:
        t: the child's ``t``.
        c: one row of :func:`~jetastar.ginkgo.likelihood_constants`.
    """
    if c[_C_FORM] != FORM_SYMMETRIC:
        if c[_C_FORM] == FORM_DENSITY:  # (no bound: the density's Jacobian is unbounded)
            return np.inf
        if t > 0.0:
            return child_bound_of_splittable(math.log(t), c)
        return c[_C_NORM]
    if t > c[_C_TCUT]:
        return child_bound_of_splittable(math.log(t), c)
    return c[_C_NORM] + math.log(-math.expm1(-c[_C_LAM]))


@nb.njit(cache=True, inline="always")
def split_bound_given_parent(
    t_left: float, t_right: float, t_parent: float, log_tp: float, stop: float,
    g_left: float, g_right: float, c: np.ndarray,
) -> float:
    """The tighter upper bound ``max(first(tL) + G(tR), first(tR) + G(tL)) − log 4π`` on ψ.

    Args:
        t_left, t_right, t_parent: as in :func:`split_llh` (the parent must be splittable).
        log_tp, stop: from :func:`parent_terms`.
        g_left, g_right: :func:`child_bound` of the two children (or anything larger).
        c: the constants row.

    Returns:
        A value ``>= split_llh(t_left, t_right, t_parent, c)`` (no transcendental function).
    """
    if c[_C_FORM] == FORM_DENSITY:
        return np.inf
    legacy = c[_C_FORM] == FORM_LEGACY
    lr = _first_child(t_left, t_parent, log_tp, stop, legacy, c) + g_right
    rl = _first_child(t_right, t_parent, log_tp, stop, legacy, c) + g_left
    return max(lr, rl) - _LOG_4PI


@nb.njit(cache=True)
def _ordering_bound(t_first: float, t_second: float, s_first: float, s_parent: float,
                    inv_tp: float, log_tp: float, stop: float, g_second: float, continues_first: bool,
                    continues_second: bool, lam: float, lam_term: float) -> float:
    """An upper bound on the log-term of one ordering of a split, ``[first child, scale tP] +
    [second child, scale T]``, with the second child's term bounded at its actual scale
    ``T = (√tP − √t_first)²`` (computed as ψ computes it) and by ``g_second``; no transcendental
    function (``inv_tp = 1 / tP``, ``lam_term = N + log λ``; scalars only, so that numba compiles
    it once and LLVM inlines it).

    With ``d = √tP − √t_first > 0``: ``−log T = −log tP − 2 log(d / √tP) <= −log tP + 2 √t_first /
    d`` (``−log(1 − x) <= x / (1 − x)``), so a continuing second child's ``N + log λ − log T −
    λ t / T`` is at most ``N + log λ − log tP + 2 √t_first / d − λ t / T``. A stopping one's
    ``N + log(1 − exp(−λ min(T, t_cut) / T))`` is at most ``stop + 2 √t_first / d``:
    ``1 − e^{−ky} <= k (1 − e^{−y})`` for ``k = tP / T >= 1`` (concavity), ``stop`` being the
    first-child stop term at scale ``tP``, and ``min(T, t_cut) / T <= t_cut / T``. The first
    child's term is :func:`_first_child`'s, with ``λ t / tP`` as a product.
    """
    first = lam_term - log_tp - lam * t_first * inv_tp if continues_first else stop
    d = s_parent - s_first
    if not (d > 0.0 and s_first >= 0.0):
        return first + g_second
    lift = 2.0 * s_first / d
    if continues_second:
        second = lam_term - log_tp + lift - lam * t_second / (d * d)
    else:
        second = stop + lift
    return first + min(g_second, second)


@nb.njit(cache=True, inline="always")
def split_bound_of_split(
    t_left: float, t_right: float, t_parent: float, s_parent: float, log_tp: float, stop: float,
    g_left: float, g_right: float, c: np.ndarray,
) -> float:
    """A tighter upper bound on ψ than :func:`split_bound_given_parent`, still without any
    transcendental function: the second child's term is bounded at the split's own scale
    ``T = (√tP − √t_first)²`` (:func:`_ordering_bound`) instead of over every scale, and the
    symmetric form's two orderings are combined by ``log((e^a + e^b) / 2) <= max(a, b) +
    min(0, −d/2 + d²/8, 1/(1 + d) − log 2)`` (``d = |a − b|``) instead of ``max(a, b)``.
    Splits that ψ rejects from the ``t`` alone (symmetric form: a child at or above the truncation,
    or ``√tL + √tR > √tP``) get ``-inf``, as ψ does.

    Args:
        t_left, t_right, t_parent: as in :func:`split_llh` (the parent must be splittable).
        s_parent, log_tp, stop: ``parent_terms(t_parent, c)``.
        g_left, g_right: :func:`child_bound` of the two children (or anything larger).
        c: the constants row.

    Returns:
        A value ``>= split_llh(t_left, t_right, t_parent, c)``, never NaN (``inf`` where the
        arithmetic gives no bound).

    Example:
        >>> from jetastar.ginkgo import likelihood_constants
        >>> c = likelihood_constants(16.0, 1.5)[0]
        >>> s, log_t, stop = parent_terms(900.0, c)
        >>> psi = split_llh(20.0, 1.0, 900.0, c)
        >>> tight = split_bound_of_split(20.0, 1.0, 900.0, s, log_t, stop,
        ...                              child_bound(20.0, c), child_bound(1.0, c), c)
        >>> loose = split_bound_given_parent(20.0, 1.0, 900.0, log_t, stop,
        ...                                  child_bound(20.0, c), child_bound(1.0, c), c)
        >>> bool(psi <= tight < loose)
        True
    """
    if c[_C_FORM] == FORM_DENSITY:
        return np.inf
    inv_tp = 1.0 / t_parent
    lam = c[_C_LAM]
    lam_term = c[_C_NORM] + c[_C_LOGLAM]
    if c[_C_FORM] != FORM_SYMMETRIC:
        if t_left >= t_right:
            t_max, t_min, g_min = t_left, t_right, g_right
        else:
            t_max, t_min, g_min = t_right, t_left, g_left
        if t_max < 0.0:
            return _NEG_INF
        value = _ordering_bound(t_max, t_min, math.sqrt(t_max), s_parent, inv_tp, log_tp, stop,
                                g_min, t_max > 0.0, t_min > 0.0, lam, lam_term) - _LOG_4PI
    else:
        # the splits psi rejects from the t alone, tested as split_llh_given_parent tests them
        if _symmetric_closed(t_left, t_right, t_parent, c):
            return _NEG_INF
        s_left = math.sqrt(t_left)
        s_right = math.sqrt(t_right)
        if s_left + s_right > s_parent:
            return _NEG_INF
        cut = c[_C_TCUT]
        lr = _ordering_bound(t_left, t_right, s_left, s_parent, inv_tp, log_tp, stop, g_right,
                             t_left > cut, t_right > cut, lam, lam_term)
        rl = _ordering_bound(t_right, t_left, s_right, s_parent, inv_tp, log_tp, stop, g_left,
                             t_right > cut, t_left > cut, lam, lam_term)
        high = max(lr, rl)
        d = abs(lr - rl)
        # log((1 + e^-d) / 2) = -d/2 + log cosh(d/2) <= -d/2 + d²/8, and <= e^-d − log 2
        correction = 0.0
        if d == d:
            if d < 4.0:
                correction = d * (d / 8.0 - 0.5)
            correction = min(correction, 1.0 / (1.0 + d) + _LOG_HALF)
        value = high + correction - _LOG_4PI
    if value != value:
        return np.inf
    return value


#: relative safety margin of a decision taken on a bound (:func:`split_llh_above`): a split is
#: skipped only when its bound is below the value to beat by more than this times ``1 + |value|``
BOUND_MARGIN = 1e-9


@nb.njit(cache=True)
def split_llh_above(
    t_left: float, t_right: float, t_parent: float, g_left: float, g_right: float, floor: float,
    c: np.ndarray,
) -> tuple[float, bool]:
    """:func:`split_llh`, or a proof that it cannot exceed ``floor`` without evaluating it.

    The parent terms are computed once; the split's :func:`split_bound_given_parent` (with the
    children's :func:`child_bound` ``g_left``, ``g_right``) is compared with ``floor`` first, and ψ
    is evaluated only when the bound does not show ``ψ <= floor``. The skip needs the bound below
    ``floor`` by :data:`BOUND_MARGIN` ``· (1 + |floor|)``: ψ and its bound are each a short sum of
    terms of moderate size (logs of floats, and ratios λt/T that make ψ very negative, far below the
    bound, when they are large) rounded a few times, i.e. within ~1e-13 relative of their exact
    values, 10⁴ times below the margin; so the ψ that would have been computed is ``<= floor``.
    No skip when ``floor = -inf``.

    Returns:
        ``(value, evaluated)``: when ``evaluated``, ``value`` is ``split_llh(t_left, t_right,
        t_parent, c)`` bit for bit; otherwise ``value`` (the bound) is below ``floor`` and so is ψ.
    """
    if not t_parent >= c[_C_TCUT]:  # as split_llh: impossible, no parent terms
        return _NEG_INF, True
    s_parent, log_tp, stop = _parent_terms_of(t_left, t_right, t_parent, c)
    if floor > _NEG_INF:
        bound = split_bound_given_parent(
            t_left, t_right, t_parent, log_tp, stop, g_left, g_right, c
        )
        if bound_below(bound, floor):
            return bound, False
    return split_llh_given_parent(t_left, t_right, t_parent, s_parent, log_tp, stop, c), True


@nb.njit(cache=True, inline="always")
def bound_below(bound: float, floor: float) -> bool:
    """Whether an upper ``bound`` on ψ shows ``ψ <= floor`` with the margin of
    :func:`split_llh_above` (never for ``floor = -inf``; ``False`` for a NaN bound)."""
    return floor > _NEG_INF and bound < floor - BOUND_MARGIN * (1.0 + abs(floor))


@nb.njit(cache=True)
def split_llh_bound(t_left: float, t_right: float, t_parent: float, c: np.ndarray) -> float:
    """Upper bound on :func:`split_llh` (same arguments); ``inf`` where the parent cannot split.

    Example:
        >>> from jetastar.ginkgo import likelihood_constants
        >>> c = likelihood_constants(16.0, 1.5)[0]
        >>> bool(split_llh_bound(20.0, 1.0, 900.0, c) >= split_llh(20.0, 1.0, 900.0, c))
        True
    """
    if not t_parent >= c[_C_TCUT]:
        return np.inf
    _, log_tp, stop = parent_terms(t_parent, c)
    return split_bound_given_parent(
        t_left, t_right, t_parent, log_tp, stop, child_bound(t_left, c), child_bound(t_right, c), c
    )


@nb.njit(cache=True)
def split_llh_many(t_left, t_right, t_parent, consts):  # pragma: no cover - numba
    out = np.empty(t_left.shape[0], dtype=np.float64)
    for i in range(t_left.shape[0]):
        out[i] = split_llh(t_left[i], t_right[i], t_parent[i], consts[i])
    return out


@nb.njit(cache=True)
def tree_node_llh(children, node_p, root, consts):  # pragma: no cover - numba
    """Per-node split log-likelihood of a tree (0 for leaves); consts row 1 at ``root``."""
    m = children.shape[0]
    node_t = np.empty(m, dtype=np.float64)
    for k in range(m):
        size = 1 if children[k, 0] < 0 else 2  # (a leaf, or a cluster of two or more)
        node_t[k] = cluster_t(node_p[k, 0], node_p[k, 1], node_p[k, 2], node_p[k, 3], size,
                              consts[0])
    out = np.zeros(m, dtype=np.float64)
    for k in range(m):
        a = children[k, 0]
        if a < 0:
            continue
        b = children[k, 1]
        # the parent's t is always recomputed from the two children (as the reference does)
        t_parent = t_of(
            node_p[a, 0] + node_p[b, 0],
            node_p[a, 1] + node_p[b, 1],
            node_p[a, 2] + node_p[b, 2],
            node_p[a, 3] + node_p[b, 3],
        )
        row = 1 if k == root else 0
        out[k] = split_llh(node_t[a], node_t[b], t_parent, consts[row])
    return out


@nb.njit(cache=True)
def truth_llh_kernel(leaves, loff, children, leaf_of_node, noff, which, consts, tol,
                     out):  # pragma: no cover - numba
    """Truth-tree log-likelihood of every jet of a collection's flat columns into ``out``.

    Jet ``j`` has leaves ``leaves[loff[j]:loff[j + 1]]`` and tree nodes ``noff[j]:noff[j + 1]``
    (``children``, ``leaf_of_node``); ``consts[which[j]]`` are its constants (``which[j] < 0``:
    invalid parameters). Internal momenta are sums of leaf momenta. ``out[j]`` is left as it is
    (NaN) for a jet without a tree, a malformed tree, or a leaf that is non-finite, has
    ``E <= 0`` or ``E² − |p|² < −tol·E²``.
    """
    for j in range(out.shape[0]):
        a = noff[j]
        m = noff[j + 1] - a
        la = loff[j]
        n = loff[j + 1] - la
        if m == 0 or m != 2 * n - 1 or which[j] < 0:
            continue
        ok = True
        for q in range(la, la + n):
            if not (leaves[q, 0] > 0.0):
                ok = False
            for c in range(4):
                if not np.isfinite(leaves[q, c]):
                    ok = False
            e = leaves[q, 0]
            if ok and t_of(e, leaves[q, 1], leaves[q, 2], leaves[q, 3]) < -tol * e * e:
                ok = False
        if not ok:
            continue
        root, order = tree_postorder(children, leaf_of_node, a, m, n)
        if root < 0:
            continue
        terms = np.zeros(m)
        tree_split_terms(leaves, la, children, leaf_of_node, a, order, root, consts[which[j]],
                         terms)
        total = 0.0
        for idx in range(m):  # post-order, as the nodes were scored
            total += terms[order[idx]]
        out[j] = total


@kernel_helper
def tree_split_terms(leaves, la, children, leaf_of_node, a, order, root, c,
                     terms):  # pragma: no cover - numba
    """ψ of every internal node of one flat tree into ``terms`` (indexed by node; leaves untouched).

    The tree's nodes are ``children[a:a + m]`` / ``leaf_of_node[a:a + m]`` with leaf ``i`` at
    ``leaves[la + i]``; ``order`` / ``root`` are :func:`tree_postorder`'s. Internal momenta are sums
    of leaf momenta, ``t`` as the form uses it (0 for a leaf in the legacy form); the root is
    scored with the ``λ_R`` row of ``c`` (``(2, N_CONSTANTS)``), every other node with row 0.
    """
    m = order.shape[0]
    p = np.empty((m, 4))
    t = np.empty(m)
    for idx in range(m):
        node = order[idx]
        left = children[a + node, 0]
        if left < 0:
            for q in range(4):
                p[node, q] = leaves[la + leaf_of_node[a + node], q]
            t[node] = cluster_t(p[node, 0], p[node, 1], p[node, 2], p[node, 3], np.int64(1), c[0])
        else:
            right = children[a + node, 1]
            for q in range(4):
                p[node, q] = p[left, q] + p[right, q]
            t[node] = t_of(p[node, 0], p[node, 1], p[node, 2], p[node, 3])
            terms[node] = split_llh(t[left], t[right], t[node], c[1 if node == root else 0])


@kernel_helper
def tree_postorder(children, leaf_of_node, a, m, n):  # pragma: no cover - numba
    """Check the tree of nodes ``a .. a + m - 1`` of flat ``children`` / ``leaf_of_node`` (local
    node ids) over ``n`` leaves, and order its nodes children first.

    Returns:
        ``(root, order)``: the root's local id and the ``m`` local node ids in post-order;
        ``root = -1`` when the nodes do not form one binary tree with each leaf ``0 .. n-1`` once.
    """
    order = np.empty(m, dtype=np.int64)
    if m != 2 * n - 1 or m <= 0:
        return -1, order
    parent = np.full(m, -1, dtype=np.int64)
    seen_leaf = np.zeros(n, dtype=np.bool_)
    for k in range(m):
        left = children[a + k, 0]
        right = children[a + k, 1]
        if left < 0 or right < 0:
            lf = leaf_of_node[a + k]
            if left != -1 or right != -1 or lf < 0 or lf >= n or seen_leaf[lf]:
                return -1, order
            seen_leaf[lf] = True
        else:
            if left >= m or right >= m or left == right or left == k or right == k:
                return -1, order
            if parent[left] != -1 or parent[right] != -1:
                return -1, order
            parent[left] = k
            parent[right] = k
    root = -1
    for k in range(m):
        if parent[k] == -1:
            if root != -1:
                return -1, order
            root = k
    if root < 0:
        return -1, order
    # post-order without recursion; a cycle shows up as a wrong visit count
    stack = np.empty(2 * m + 2, dtype=np.int64)
    done = np.zeros(m, dtype=np.bool_)
    top = 0
    stack[0] = root
    count = 0
    while top >= 0 and count <= m:
        node = stack[top]
        top -= 1
        if children[a + node, 0] < 0 or done[node]:
            if count < m:
                order[count] = node
            count += 1
        else:
            done[node] = True
            if top + 3 >= stack.shape[0]:
                count = m + 1
                break
            top += 1
            stack[top] = node
            top += 1
            stack[top] = children[a + node, 1]
            top += 1
            stack[top] = children[a + node, 0]
    if count != m:
        return -1, order
    return root, order
