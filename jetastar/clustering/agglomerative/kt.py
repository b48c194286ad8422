"""Generalized-kt clustering (kt, Cambridge/Aachen, anti-kt), scored with the Ginkgo likelihood.

The sequential recombination of hadron-collider jet finding, written as a numba kernel (FastJet is not
needed). With ``p = 1`` (kt), ``0`` (Cambridge/Aachen) and ``-1`` (anti-kt) and the FastJet conventions:

* ``kt² = px² + py²``; rapidity ``y = ½ ln((E + pz) / (E − pz))`` computed as FastJet does (with the
  squared mass clipped at 0, and ``±(10⁵ + |pz|)`` for a particle along the beam);
  azimuth ``φ = atan2(py, px)`` in ``[0, 2π)``;
* ``d_ij = min(s_i, s_j) ΔR²_ij`` with ``ΔR² = Δy² + Δφ²`` (Δφ wrapped to ``[0, π]``) and ``s = kt^{2p}``
  (anti-kt: ``1/kt²``, ``10³⁰⁰`` for ``kt² <= 10⁻³⁰⁰``); ``d_iB = s_i R²``;
* at each step the smallest distance wins; a pair is merged with E-scheme recombination (4-vectors are
  summed), a ``d_iB`` would make ``i`` a final jet.

``R`` defaults to 1000 (FastJet's largest allowed value) so that ``ΔR² < R²`` and a pair always beats
the beam: the whole jet is one cluster and the full merge history is a binary tree over the leaves.
A smaller ``R`` that leaves more than one inclusive jet is an error. The tree is scored with
:func:`jetastar.ginkgo.log_likelihood` (λ_R at the root). These are the trees the physics community
uses; their Ginkgo likelihood is usually far below greedy and beam search.

Example:
    >>> import numpy as np
    >>> from jetastar import Jet
    >>> from jetastar.ginkgo import ShowerParams
    >>> leaves = np.array([[40.0, 0, 30, 25], [30.0, 0, 25, 15], [20.0, 5, 15, 10]])
    >>> kt(Jet(leaves, ShowerParams.qcd()), algorithm="antikt").algorithm
    'antikt'
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..._jit import Stopwatch
from ...errors import InvalidJetError
from ...jet import Jet
from ...momenta import rap_phi_kt2
from .._merges import canonical_result, check_jet, jet_arrays, score_history
from ..estimates import DISTANCES_PER_S
from ..options import likelihood_option, number
from ..registry import AlgorithmInfo, WarmUp, register
from ..result import ClusteringResult
from ._kt_kernels import NN_MIN_LEAVES, history_of, kt_history, rapidity_problem
from ._merge_chunk import ALG_ANTIKT, ALG_CAMBRIDGE, ALG_KT, MergeChunks

__all__ = [
    "ANTIKT", "CAMBRIDGE", "KT", "KT_ALGORITHMS", "antikt", "cambridge", "kt", "kt_history",
    "minus_inf_message", "rapidity_phi", "rapidity_problem",
]

#: kt-family names and their exponent ``p``.
KT_ALGORITHMS = {"kt": 1, "cambridge": 0, "antikt": -1}

def minus_inf_message(algorithm: str) -> str:
    """The message of a kt-family result whose tree has log-likelihood ``-inf`` (status stays
    ``"ok"``: the kt family does not search on the likelihood)."""
    return f"the {algorithm} tree has log-likelihood -inf (a merge impossible in the model)"


def rapidity_phi(p: np.ndarray) -> tuple[float, float]:
    """Rapidity and azimuth (in ``[0, 2π)``) of a 4-vector ``(E, px, py, pz)``, FastJet conventions.

    Example:
        >>> y, phi = rapidity_phi(np.array([10.0, 3.0, 0.0, 0.0]))
        >>> round(y, 12), round(phi, 12)
        (0.0, 0.0)
    """
    arr = np.asarray(p, dtype=np.float64)
    rap, phi, _ = rap_phi_kt2(arr[0], arr[1], arr[2], arr[3])
    return float(rap), float(phi)


def _check_rapidities(leaves: np.ndarray, jet: Jet) -> None:
    """Every leaf has a rapidity (:func:`rapidity_problem`), or an error naming the leaf."""
    k = int(rapidity_problem(leaves, 0, leaves.shape[0]))
    if k >= 0:
        raise InvalidJetError(
            f"leaf {k} (E = {leaves[k, 0]:.3g} GeV) has no computable rapidity: its transverse "
            "mass and E + |pz| underflow (rescale the jet's units)", jet=jet.label, field="leaves",
        )


def _check_algorithm(algorithm: object) -> int:
    if algorithm not in KT_ALGORITHMS:
        raise ValueError(
            f"unknown kt-family algorithm {algorithm!r}; valid: "
            f"{', '.join(map(repr, KT_ALGORITHMS))}"
        )
    return KT_ALGORITHMS[algorithm]  # type: ignore[index]


def kt(
    jet: Jet, algorithm: str = "kt", likelihood: str = "symmetric", R: float = 1000.0
) -> ClusteringResult:
    """Cluster with kt, Cambridge/Aachen or anti-kt and score the tree with the Ginkgo likelihood.

    Args:
        jet: the :class:`jetastar.Jet` to cluster.
        algorithm: ``"kt"`` (p = 1), ``"cambridge"`` (p = 0) or ``"antikt"`` (p = -1).
        likelihood: ``"symmetric"`` (default) or ``"legacy"`` (only used to score the tree).
        R: jet radius; the default 1000 makes every pair distance beat the beam distance, so the whole
            jet is clustered into one tree.

    Returns:
        A :class:`ClusteringResult` with ``algorithm`` set to the algorithm name, the merge tree and
        its log-likelihood; ``stats`` has ``time_s``. kt trees often contain merges that are impossible
        under the shower model: their log-likelihood is then ``-inf`` (``message`` says so; the
        status stays ``"ok"`` since kt does not search on the likelihood).

    Raises:
        InvalidJetError: if ``jet`` is not a Jet.
        ValueError: for an unknown algorithm or likelihood, a non-positive ``R``, or an ``R`` so small
            that more than one jet results.

    Example:
        >>> from jetastar.ginkgo import ShowerParams, generate
        >>> jet = generate(1, ShowerParams.qcd(), seed=3)[0]
        >>> kt(jet, algorithm="cambridge").tree.n_leaves == jet.n_leaves
        True
    """
    watch = Stopwatch()
    check_jet(jet, "kt")
    power = _check_algorithm(algorithm)
    try:
        radius = float(R)
    except (TypeError, ValueError):
        raise ValueError(f"R must be a positive number, got {R!r}") from None
    if not (math.isfinite(radius) and radius > 0.0):
        raise ValueError(f"R must be a positive finite number, got {R!r}")
    leaves, consts = jet_arrays(jet, likelihood)
    n = leaves.shape[0]
    _check_rapidities(leaves, jet)
    history, beams, _ = history_of(leaves, power, radius * radius)
    if beams > 0:
        raise ValueError(
            f"jet {jet.label}: {algorithm} with R={radius:g} leaves {int(beams) + 1} inclusive jets; "
            "use a larger R (default 1000) so that the whole jet is one tree"
        )
    steps = score_history(leaves, consts, history)
    tree, ll = canonical_result(history, steps, n, jet=jet.label)
    message = "" if math.isfinite(ll) else minus_inf_message(algorithm)
    return ClusteringResult(
        tree=tree,
        log_likelihood=ll,
        algorithm=algorithm,
        likelihood=likelihood,
        options={"algorithm": algorithm, "R": radius},
        stats={"time_s": watch.seconds()},
        message=message,
        jet_id=jet.jet_id,
    )


class _KtChunks(MergeChunks):
    """A kt-family algorithm on the columnar path: its options and messages."""

    def finish(self, opts: dict[str, Any], done: np.ndarray, ll: np.ndarray, info: np.ndarray,
               counts: np.ndarray, work: np.ndarray, status: np.ndarray,
               message: np.ndarray) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        message[done & ~np.isfinite(ll)] = minus_inf_message(self.name)
        return {"algorithm": self.name, "R": opts["R"]}, {}


def _estimate(n_leaves: int, options: Mapping[str, Any]) -> float:
    """A lower estimate of the seconds of one jet: the pair distances :func:`kt_history`
    computes at :data:`~.estimates.DISTANCES_PER_S`: every pair at every step below
    :data:`~._kt_kernels.NN_MIN_LEAVES` leaves, ``(n³ - n) / 6``; from there on nearest
    neighbours, ``n²`` (``n (n - 1) / 2`` for the first neighbours, then the new particle against
    the others at each step; measured 1.6–2.2 n² in all)."""
    n = n_leaves
    distances = (n**3 - n) / 6 if n < NN_MIN_LEAVES else float(n * n)
    return distances / DISTANCES_PER_S


def _declare(name: str, func: Any, code: int, p: int, compile_s: float) -> AlgorithmInfo:
    """The registry entry of one kt-family algorithm (``cluster(jet, algorithm, **options)``
    already uses the name ``algorithm`` for the registry name, so the kt-family choice is the
    registry name itself)."""
    return register(AlgorithmInfo(
        name, func, description=f"{_TITLES[name]} (generalized kt, p = {p}), E-scheme, R = 1000",
        declared=(likelihood_option(), number(
            "R", 1000.0, "jet radius (the default makes the whole jet one tree)", low=0.0,
            low_open=True)),
        family="agglomerative", chunk=_KtChunks(name, code, radius=True), estimate=_estimate,
        # (compile CPU seconds measured 2026-12-07 on a 2-core machine: the three share kt's
        # kernels, so they are warmed up by one task: two workers compiled them at once before)
        warm_up=WarmUp(compile_s=compile_s, group="kt"),
    ))


_TITLES = {"kt": "kt clustering", "cambridge": "Cambridge/Aachen", "antikt": "anti-kt"}


def _kt(jet: Jet, likelihood: str = "symmetric", R: float = 1000.0) -> ClusteringResult:
    """kt clustering: ``kt(jet, algorithm="kt", ...)``."""
    return kt(jet, algorithm="kt", likelihood=likelihood, R=R)


def cambridge(jet: Jet, likelihood: str = "symmetric", R: float = 1000.0) -> ClusteringResult:
    """Cambridge/Aachen clustering: ``kt(jet, algorithm="cambridge", ...)``."""
    return kt(jet, algorithm="cambridge", likelihood=likelihood, R=R)


def antikt(jet: Jet, likelihood: str = "symmetric", R: float = 1000.0) -> ClusteringResult:
    """Anti-kt clustering: ``kt(jet, algorithm="antikt", ...)``."""
    return kt(jet, algorithm="antikt", likelihood=likelihood, R=R)


#: kt, Cambridge/Aachen and anti-kt in the registry
KT = _declare("kt", _kt, ALG_KT, 1, 2.0)
CAMBRIDGE = _declare("cambridge", cambridge, ALG_CAMBRIDGE, 0, 0.0)
ANTIKT = _declare("antikt", antikt, ALG_ANTIKT, -1, 0.0)
