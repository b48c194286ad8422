"""The Ginkgo splitting likelihood, in its two forms.

A tree's log-likelihood is the sum over internal nodes of a *split* log-likelihood ψ that depends only
on three squared masses: the two children's ``t_left``, ``t_right`` and the parent's
``t_parent = t(p_left + p_right)``, plus ``t_cut`` and the rate (``λ_R`` for the split of the whole
jet, ``λ`` elsewhere). That makes ψ cheap to evaluate from per-cluster precomputed ``t`` values, which is
how every algorithm in jetastar calls it: :func:`split_llh` is the one numba kernel.

``likelihood="symmetric"`` (default) — the generator-consistent form (reference HEAD
``split_logLH_with_stop_nonstop_prob``). With ``a = 0.999`` and ``N = -log(1 - e^{-aλ})``::

    g(T, t) = N + log λ - log T - λ t / T              if t > t_cut   (child continues)
            = N + log(1 - exp(-λ min(T, t_cut) / T))    if t <= t_cut  (child stops)
    ψ = logaddexp(log ½ + g(tP, tL) + g((√tP-√tL)², tR),
                  log ½ + g(tP, tR) + g((√tP-√tR)², tL)) - log 4π

and ψ = −∞ when ``tP <= 0``, ``tL < 0``, ``tR < 0``, ``tP <= t_cut``, ``tL >= a tP``, ``tR >= a tP``
or ``√tL + √tR > √tP`` (tested in that order). Children use their actual masses (leaves included).

``likelihood="legacy"`` — the heavier-first form of the 2020-21 papers (reference
``split_logLH_without_non_stop_prob``). ``t`` of a single leaf is 0 by convention, ``t`` of a cluster of
two or more leaves its invariant mass squared; with ``N = -log(1 - e^{-λ})``::

    h(T, t) = N + log λ - log T - λ t / T    if t > 0
            = N + log(1 - exp(-λ t_cut / T))  otherwise
    ψ = h(tP, t_max) + h((√tP - √t_max)², t_min) - log 4π,    ψ = −∞ if tP < t_cut (strict)

Numerics: ``log(1 - e^{-x})`` is evaluated as ``log(-expm1(-x))`` (no loss for small ``x``), the
two orderings are combined with a stable log-add-exp, and any NaN a degenerate input could produce is
mapped to −∞: the result is always finite or −∞. In the symmetric form each ordering is written
``a + log b`` with ``a`` free of transcendental functions (``b = 1/T`` for a continuing second child,
``1 − exp(−λ cut / T)`` for a stopping one), so that the log-add-exp of the two orderings is
``a_hi + log(b_hi + exp(a_lo − a_hi) b_lo)``: one ``exp`` and one ``log`` per split when both children
continue (instead of two logs, an exp and a log1p), which is what makes the exact trellis fast.

Example:
    >>> from jetastar.ginkgo import split_log_likelihood
    >>> pL = (337.835807368626, 194.00330979726706, 196.75181707055924, 193.3240933614144)
    >>> pR = (63.28760571731154, 36.93679787858327, 34.18829060529111, 37.61601431443592)
    >>> round(split_log_likelihood(pL, pR, t_cut=16.0, lam=1.5), 9)
    -14.629719605
"""

from __future__ import annotations

import math
from typing import Any

import numba as nb
import numpy as np

from ..errors import InvalidJetError

__all__ = [
    "LIKELIHOODS",
    "check_likelihood",
    "child_bound",
    "cluster_t",
    "likelihood_constants",
    "log_likelihood",
    "node_log_likelihoods",
    "parent_terms",
    "split_bound_given_parent",
    "split_llh",
    "split_llh_bound",
    "split_llh_given_parent",
    "split_log_likelihood",
    "split_log_likelihood_t",
    "t_of",
]

#: Names of the likelihood forms, in the order of their integer codes.
LIKELIHOODS = ("symmetric", "legacy")

_A = 0.999  # truncation of the exponential draws (1 - 1e-3)
_LOG_HALF = math.log(0.5)
_LOG_4PI = math.log(4.0 * math.pi)
_NEG_INF = -np.inf

# layout of a constants row (float64 array of length 5)
_C_TCUT, _C_LAM, _C_LOGLAM, _C_NORM, _C_LEGACY = range(5)
N_CONSTANTS = 5


def check_likelihood(likelihood: str) -> int:
    """Validate a likelihood name and return its integer code (0 symmetric, 1 legacy).

    Raises:
        ValueError: for an unknown name, listing the valid ones.
    """
    try:
        return LIKELIHOODS.index(likelihood)
    except ValueError:
        raise ValueError(
            f"unknown likelihood {likelihood!r}; valid: {', '.join(map(repr, LIKELIHOODS))}"
        ) from None


def likelihood_constants(
    t_cut: float, lam: float, lam_root: float | None = None, likelihood: str = "symmetric"
) -> np.ndarray:
    """Precomputed constants for :func:`split_llh`: row 0 for inner splits, row 1 for the root.

    Args:
        t_cut: squared-mass cut in GeV².
        lam: rate λ of inner splits.
        lam_root: rate λ_R of the split of the whole jet (default ``lam``).
        likelihood: ``"symmetric"`` or ``"legacy"``.

    Returns:
        ``(2, 5)`` float64 array ``[t_cut, λ, log λ, N, is_legacy]`` per row.
    """
    code = check_likelihood(likelihood)
    lam_root = lam if lam_root is None else lam_root
    for name, value in (("t_cut", t_cut), ("lam", lam), ("lam_root", lam_root)):
        if not (math.isfinite(value) and value > 0):
            raise InvalidJetError(f"must be finite and > 0, got {value!r}", field=f"params.{name}")
    out = np.empty((2, N_CONSTANTS), dtype=np.float64)
    for row, rate in enumerate((lam, lam_root)):
        a = 1.0 if code == 1 else _A
        out[row] = (t_cut, rate, math.log(rate), -math.log(-math.expm1(-a * rate)), float(code))
    return out


@nb.njit(cache=True)
def t_of(e: float, px: float, py: float, pz: float) -> float:
    """Squared invariant mass ``E² - |p|²`` (numba kernel; callable from Python too)."""
    return e * e - (px * px + py * py + pz * pz)


@nb.njit(cache=True)
def cluster_t(e: float, px: float, py: float, pz: float, size: int, c: np.ndarray) -> float:
    """The ``t`` a likelihood form uses for a cluster of ``size`` leaves with summed 4-momentum.

    Legacy form: 0 for a single leaf; otherwise (and always in the symmetric form) ``E² − |p|²``.
    """
    if size == 1 and c[_C_LEGACY] != 0.0:
        return 0.0
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
    stop = c[_C_NORM] + math.log(-math.expm1(-c[_C_LAM] * c[_C_TCUT] / t_parent))
    return math.sqrt(t_parent), math.log(t_parent), stop


@nb.njit(cache=True)
def _second_child(scale: float, t: float, legacy: bool, c: np.ndarray) -> float:
    """log-density (continues) or log-probability (stops) of the child drawn second, scale T."""
    if (t > 0.0) if legacy else (t > c[_C_TCUT]):
        return c[_C_NORM] + c[_C_LOGLAM] - math.log(scale) - c[_C_LAM] * t / scale
    cut = c[_C_TCUT] if legacy else min(scale, c[_C_TCUT])
    return c[_C_NORM] + math.log(-math.expm1(-c[_C_LAM] * cut / scale))


@nb.njit(cache=True)
def _second_offset(scale: float, t: float, c: np.ndarray) -> float:
    """Symmetric form: :func:`_second_child` ``= _second_offset + log(_second_factor)``."""
    if t > c[_C_TCUT]:
        return c[_C_NORM] + c[_C_LOGLAM] - c[_C_LAM] * t / scale
    return c[_C_NORM]


@nb.njit(cache=True)
def _second_factor(scale: float, t: float, c: np.ndarray) -> float:
    """Symmetric form: the factor whose log completes :func:`_second_offset` (``1/T`` or the stop
    probability ``1 − exp(−λ min(T, t_cut) / T)``)."""
    if t > c[_C_TCUT]:
        return 1.0 / scale
    return -math.expm1(-c[_C_LAM] * min(scale, c[_C_TCUT]) / scale)


@nb.njit(cache=True)
def _first_child(t: float, t_parent: float, log_tp: float, stop: float, legacy: bool,
                 c: np.ndarray) -> float:
    """The same for the child drawn first (scale tP), with the parent terms precomputed."""
    if (t > 0.0) if legacy else (t > c[_C_TCUT]):
        return c[_C_NORM] + c[_C_LOGLAM] - log_tp - c[_C_LAM] * t / t_parent
    return stop


@nb.njit(cache=True, inline="always")
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
    if c[_C_LEGACY] != 0.0:
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
    if not t_parent > 0.0 or t_left < 0.0 or t_right < 0.0:
        return _NEG_INF
    if t_parent <= c[_C_TCUT]:
        return _NEG_INF
    limit = _A * t_parent
    if t_left >= limit or t_right >= limit:
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


@nb.njit(cache=True)
def split_llh(t_left: float, t_right: float, t_parent: float, c: np.ndarray) -> float:
    """Split log-likelihood ψ from the three squared masses (the one kernel every algorithm calls).

    Args:
        t_left, t_right: children's ``t``. Symmetric form: their actual squared masses. Legacy form:
            0 for a single leaf, the squared mass for a cluster of two or more leaves.
        t_parent: ``t(p_left + p_right)``.
        c: one row of :func:`likelihood_constants` (inner or root).

    Returns:
        ψ, finite or ``-inf`` (never NaN).
    """
    if not t_parent >= c[_C_TCUT]:  # impossible in both forms: skip the parent terms
        return _NEG_INF
    s_parent, log_tp, stop = parent_terms(t_parent, c)
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


@nb.njit(cache=True)
def child_bound(t: float, c: np.ndarray) -> float:
    """``G(t)``: an upper bound on the log-term of a child of squared mass ``t`` in any split.

    Bounds both the first-child term (scale ``tP``) and the second-child term maximised over its
    scale, in the form selected by ``c`` (see the comment above; ``t`` follows the form's
    convention, 0 for a legacy single leaf). Split bound: ``G(tA) + G(tB) − log 4π >= ψ``.

    Args:
        t: the child's ``t``.
        c: one row of :func:`likelihood_constants`.
    """
    if c[_C_LEGACY] != 0.0:
        if t > 0.0:
            return c[_C_NORM] - 1.0 - math.log(t)
        return c[_C_NORM]
    if t > c[_C_TCUT]:
        return c[_C_NORM] - 1.0 - math.log(t)
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
    legacy = c[_C_LEGACY] != 0.0
    lr = _first_child(t_left, t_parent, log_tp, stop, legacy, c) + g_right
    rl = _first_child(t_right, t_parent, log_tp, stop, legacy, c) + g_left
    return max(lr, rl) - _LOG_4PI


@nb.njit(cache=True)
def split_llh_bound(t_left: float, t_right: float, t_parent: float, c: np.ndarray) -> float:
    """Upper bound on :func:`split_llh` (same arguments); ``inf`` where the parent cannot split.

    Example:
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
def _split_llh_many(t_left, t_right, t_parent, consts):  # pragma: no cover - numba
    out = np.empty(t_left.shape[0], dtype=np.float64)
    for i in range(t_left.shape[0]):
        out[i] = split_llh(t_left[i], t_right[i], t_parent[i], consts[i])
    return out


@nb.njit(cache=True)
def _tree_node_llh(children, node_p, root, consts):  # pragma: no cover - numba
    """Per-node split log-likelihood of a tree (0 for leaves); consts row 1 at ``root``."""
    m = children.shape[0]
    legacy = consts[0, _C_LEGACY] != 0.0
    node_t = np.empty(m, dtype=np.float64)
    for k in range(m):
        if legacy and children[k, 0] < 0:
            node_t[k] = 0.0
        else:
            node_t[k] = t_of(node_p[k, 0], node_p[k, 1], node_p[k, 2], node_p[k, 3])
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


# ---------------------------------------------------------------------- public Python API
def _four_vector(p: Any, name: str) -> np.ndarray:
    arr = np.asarray(p, dtype=np.float64)
    if arr.shape != (4,):
        raise ValueError(f"{name} must be a 4-vector (E, px, py, pz), got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} has non-finite components: {arr.tolist()}")
    return arr


def split_log_likelihood(
    p_left: Any,
    p_right: Any,
    t_cut: float,
    lam: float,
    likelihood: str = "symmetric",
    *,
    t_left: float | None = None,
    t_right: float | None = None,
) -> float:
    """Log-likelihood of one split of ``p_left + p_right`` into the two given 4-momenta.

    Args:
        p_left, p_right: children 4-vectors ``(E, px, py, pz)`` in GeV.
        t_cut: squared-mass cut in GeV².
        lam: the rate of this split (pass λ_R for the split of the whole jet).
        likelihood: ``"symmetric"`` (default) or ``"legacy"``.
        t_left, t_right: legacy form only — the children's ``t`` (default: their squared masses;
            pass ``0`` for a single leaf, the legacy convention).

    Returns:
        ψ, a float that is finite or ``-inf``.

    Example:
        >>> split_log_likelihood((5, 0, 0, 4), (5, 0, 0, -4), t_cut=16.0, lam=1.5) < 0
        True
    """
    code = check_likelihood(likelihood)
    pl = _four_vector(p_left, "p_left")
    pr = _four_vector(p_right, "p_right")
    if code == 0 and (t_left is not None or t_right is not None):
        raise ValueError("t_left / t_right only apply to likelihood='legacy'")
    tl = t_of(*pl) if t_left is None else float(t_left)
    tr = t_of(*pr) if t_right is None else float(t_right)
    pp = pl + pr
    c = likelihood_constants(float(t_cut), float(lam), likelihood=likelihood)[0]
    return float(split_llh(tl, tr, t_of(*pp), c))


def split_log_likelihood_t(
    t_left: Any,
    t_right: Any,
    t_parent: Any,
    t_cut: float,
    lam: Any,
    likelihood: str = "symmetric",
) -> np.ndarray:
    """Vectorised split log-likelihood from squared masses (broadcasting numpy arrays).

    Args:
        t_left, t_right, t_parent: squared masses (see :func:`split_llh` for the legacy convention).
        t_cut: squared-mass cut in GeV².
        lam: rate(s), broadcast with the ``t`` arrays.
        likelihood: ``"symmetric"`` or ``"legacy"``.

    Returns:
        Array of ψ with the broadcast shape.
    """
    check_likelihood(likelihood)
    tl, tr, tp, lm = np.broadcast_arrays(
        np.asarray(t_left, dtype=np.float64),
        np.asarray(t_right, dtype=np.float64),
        np.asarray(t_parent, dtype=np.float64),
        np.asarray(lam, dtype=np.float64),
    )
    shape = tl.shape
    flat_lam = lm.ravel()
    uniq, inverse = np.unique(flat_lam, return_inverse=True)
    table = np.concatenate(
        [likelihood_constants(float(t_cut), float(x), likelihood=likelihood)[:1] for x in uniq]
    ) if uniq.size else np.empty((0, N_CONSTANTS))
    consts = table[inverse.ravel()] if uniq.size else np.empty((0, N_CONSTANTS))
    out = _split_llh_many(
        np.ascontiguousarray(tl.ravel()),
        np.ascontiguousarray(tr.ravel()),
        np.ascontiguousarray(tp.ravel()),
        np.ascontiguousarray(consts),
    )
    return out.reshape(shape)


def node_log_likelihoods(
    jet: Any,
    tree: Any = None,
    likelihood: str = "symmetric",
    use_node_momenta: bool = False,
) -> np.ndarray:
    """Split log-likelihood of every node of a tree (0 for leaves), indexed by node.

    Args:
        jet: a :class:`jetastar.Jet`.
        tree: the :class:`jetastar.Tree` to score; default the jet's truth tree.
        likelihood: ``"symmetric"`` or ``"legacy"``.
        use_node_momenta: score with the jet's stored per-node 4-vectors (the truth tree's
            ``node_momenta``, as the generator stored them) instead of sums of leaf momenta.

    Returns:
        ``(2n - 1,)`` float64 array; its sum is :func:`log_likelihood`.
    """
    check_likelihood(likelihood)
    if tree is None:
        tree = jet.truth
        if tree is None:
            raise InvalidJetError("has no truth tree; pass tree=...", jet=jet.label, field="truth")
    if tree.n_leaves != jet.n_leaves:
        raise InvalidJetError(
            f"the tree has {tree.n_leaves} leaves, the jet {jet.n_leaves}",
            jet=jet.label,
            field="tree",
        )
    if use_node_momenta:
        if jet.node_momenta is None:
            raise InvalidJetError(
                "use_node_momenta=True needs stored node momenta", jet=jet.label,
                field="node_momenta",
            )
        if jet.truth is None or not (
            tree is jet.truth or np.array_equal(tree.children, jet.truth.children)
        ):
            raise InvalidJetError(
                "stored node momenta belong to the truth tree; score another tree with "
                "use_node_momenta=False",
                jet=jet.label,
                field="node_momenta",
            )
        node_p = jet.node_momenta
    else:
        node_p = tree.node_momenta(jet.leaves)
    consts = jet.likelihood_constants(likelihood)
    return _tree_node_llh(tree.children, node_p, tree.root, consts)


def log_likelihood(
    jet: Any,
    tree: Any = None,
    likelihood: str = "symmetric",
    use_node_momenta: bool = False,
) -> float:
    """Log-likelihood of a tree for a jet: the sum of its split log-likelihoods.

    λ_R is used for the split of the whole jet (the root), λ for all other splits, in both forms.

    Args:
        jet: a :class:`jetastar.Jet`.
        tree: the :class:`jetastar.Tree` to score; default the jet's truth tree.
        likelihood: ``"symmetric"`` (default) or ``"legacy"``.
        use_node_momenta: use the truth tree's stored per-node 4-vectors (reproduces generator
            values) instead of sums of leaf momenta.

    Returns:
        The log-likelihood, finite or ``-inf``.

    Example:
        >>> from jetastar.ginkgo import ShowerParams, generate, log_likelihood
        >>> jet = generate(1, ShowerParams.qcd(), seed=1)[0]
        >>> log_likelihood(jet) < 0
        True
    """
    return float(np.sum(node_log_likelihoods(jet, tree, likelihood, use_node_momenta)))
