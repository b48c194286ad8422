"""The Ginkgo splitting likelihood, in its three forms.

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

``likelihood="density"`` — the density of the observed jet: the probability density of the leaves'
4-momenta given the tree (``docs/physics.md`` derives it). Every child's ``t`` is scored by the
density of its draw (a leaf's mass is observed, so its density belongs in the likelihood, not only
the probability that it stopped), each ordering's second draw must be below its truncation, and each
split carries the Jacobian ``8 tP / √K(tP, tL, tR)`` of the map from the draws to the children's
4-momenta (``K`` the Källén function)::

    f(T, t) = N + log λ - log T - λ t / T                       (t < 0.999 T, else −∞)
    ψ = logaddexp(f(tP, tL) + f((√tP-√tL)², tR), f(tP, tR) + f((√tP-√tR)², tL))
        + log ½ - log 4π + log(8 tP) - ½ log K

with the symmetric form's ``−∞`` cases, and ``t = +∞`` for a single leaf above ``t_cut`` (it would
have split). Summed over trees it is the density of the jet, so fits of λ to it are unbiased
(:mod:`jetastar.inference`). No branch-and-bound method has proven bounds for it: the exact MAP
engine, A* and the window search refuse it; the trellis (MAP, log Z), greedy, beam search, MCTS
and the kt family score with it.

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

import numpy as np

from ..errors import InvalidJetError
from ..tree import Tree
from .kernels import (
    N_CONSTANTS,
    TRUNCATION,
    child_bound,
    cluster_t,
    parent_terms,
    split_bound_given_parent,
    split_llh,
    split_llh_bound,
    split_llh_given_parent,
    split_llh_many,
    t_of,
    tree_node_llh,
    truth_llh_kernel,
)

__all__ = [
    "BOUNDED_LIKELIHOODS",
    "LIKELIHOODS",
    "N_CONSTANTS",
    "SPACELIKE_TOLERANCE",
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
    "truth_log_likelihoods",
]

#: Names of the likelihood forms, in the order of their integer codes.
LIKELIHOODS = ("symmetric", "legacy", "density")
#: The forms the branch-and-bound methods (the exact MAP engine, A*, the window search) have proven
#: bounds for.
BOUNDED_LIKELIHOODS = ("symmetric", "legacy")

#: Leaves with ``E² − |p|² < −SPACELIKE_TOLERANCE · E²`` are rejected as spacelike (smaller negative
#: values are rounding of massless particles; see :mod:`jetastar.jet`).
SPACELIKE_TOLERANCE = 1e-6

# the numba primitives live in .kernels; this name is kept for old imports


def check_likelihood(likelihood: str) -> int:
    """Validate a likelihood name and return its integer code (0 symmetric, 1 legacy, 2 density).

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
        likelihood: ``"symmetric"``, ``"legacy"`` or ``"density"``.

    Returns:
        ``(2, 5)`` float64 array ``[t_cut, λ, log λ, N, form code]`` per row.
    """
    code = check_likelihood(likelihood)
    lam_root = lam if lam_root is None else lam_root
    for name, value in (("t_cut", t_cut), ("lam", lam), ("lam_root", lam_root)):
        if not (math.isfinite(value) and value > 0):
            raise InvalidJetError(f"must be finite and > 0, got {value!r}", field=f"params.{name}")
    out = np.empty((2, N_CONSTANTS), dtype=np.float64)
    for row, rate in enumerate((lam, lam_root)):
        a = 1.0 if code == 1 else TRUNCATION
        out[row] = (t_cut, rate, math.log(rate), -math.log(-math.expm1(-a * rate)), float(code))
    return out


# ---------------------------------------------------------------------- public Python API
def _four_vector(p: Any, name: str) -> np.ndarray:
    arr = np.asarray(p, dtype=np.float64)
    if arr.shape != (4,):
        raise ValueError(f"{name} must be a 4-vector (E, px, py, pz), got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} has non-finite components: {arr.tolist()}")
    return arr


def require_jet(jet: Any, what: str) -> None:
    """Refuse anything but a :class:`jetastar.Jet` (duck-typed), pointing to how one is made from
    particles; ``what`` starts the message (``"log_likelihood scores"``)."""
    if not hasattr(jet, "leaves") or not hasattr(jet, "likelihood_constants"):
        raise TypeError(
            f"{what} a jetastar.Jet, got {type(jet).__name__}; for one jet's particles use "
            "jetastar.Jet.from_particles(particles, params), the jet jetastar.cluster clusters "
            "(same parameters and mass policy)")


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
    out = split_llh_many(
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
        tree: as in :func:`log_likelihood` (a tree, a clustering result or nested pairs);
            default the jet's truth tree.
        likelihood: ``"symmetric"`` or ``"legacy"``.
        use_node_momenta: score with the jet's stored per-node 4-vectors (the truth tree's
            ``node_momenta``, as the generator stored them) instead of sums of leaf momenta.

    Returns:
        ``(2n - 1,)`` float64 array; its sum is :func:`log_likelihood`.
    """
    check_likelihood(likelihood)
    require_jet(jet, "log_likelihood scores")
    if tree is None:
        tree = jet.truth
        if tree is None:
            raise InvalidJetError("has no truth tree; pass tree=...", jet=jet.label, field="truth")
    tree = Tree.from_any(tree, jet=jet.label)
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
    return tree_node_llh(tree.children, node_p, tree.root, consts)


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
        tree: the :class:`jetastar.Tree` to score (or a clustering result: its tree; or nested
            pairs of leaf indices such as ``((0, 2), 1)``); default the jet's truth tree.
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


def truth_log_likelihoods(collection: Any, likelihood: str = "symmetric") -> np.ndarray:
    """Truth-tree log-likelihood of every jet of a collection (internal momenta = sums of leaves).

    NaN where a jet has no truth tree, non-finite or non-positive-energy leaves, a malformed tree
    or invalid parameters. Computed for all jets in one compiled loop over the flat columns
    (:func:`~jetastar.ginkgo.kernels.truth_llh_kernel`); the same values as :func:`log_likelihood`
    up to the order of the final summation. A collection read from a file that caches these values
    (extra jet column ``truth_llh_<likelihood>``) returns the cached column.

    Args:
        collection: a :class:`~jetastar.JetCollection`.
        likelihood: ``"symmetric"`` or ``"legacy"``.

    Returns:
        ``(n_jets,)`` float64 array.

    Example:
        >>> from jetastar.ginkgo import ShowerParams, generate, log_likelihood
        >>> jets = generate(2, ShowerParams.qcd(), seed=1)
        >>> values = truth_log_likelihoods(jets)
        >>> bool(abs(values[0] - log_likelihood(jets[0])) < 1e-9)
        True
    """
    cached = collection.jet_columns.get(f"truth_llh_{likelihood}")
    if cached is not None:
        return cached
    n_jets = len(collection)
    table: dict[tuple[float, float, float], int] = {}
    rows: list[np.ndarray] = []
    which = np.full(n_jets, -1, dtype=np.int64)
    prm = collection.params
    for i in range(n_jets):
        key = (float(prm["t_cut"][i]), float(prm["lam"][i]), float(prm["lam_root"][i]))
        k = table.get(key)
        if k is None:
            try:
                rows.append(likelihood_constants(*key, likelihood))
            except ValueError:
                continue
            k = table[key] = len(rows) - 1
        which[i] = k
    consts = np.stack(rows) if rows else np.zeros((1, 2, 5))
    out = np.full(n_jets, np.nan)
    truth_llh_kernel(
        np.ascontiguousarray(collection.leaves), collection.leaf_offsets,
        np.ascontiguousarray(collection.children), collection.leaf_of_node,
        collection.node_offsets, which, consts, SPACELIKE_TOLERANCE, out,
    )
    return out
