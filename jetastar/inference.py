"""Measure the shower from its jets: the density of each observed jet summed exactly over its trees,
scans of it over the rates ``λ`` and ``λ_R``, and maximum-likelihood fits with profile-likelihood
intervals.

The latent tree of a jet is a nuisance; what a physicist wants to learn is the shower. The exact
marginal likelihood of a jet's particles is the sum over all its trees,
``Z(x | θ) = Σ_trees Π_splits ψ``, which the trellis computes exactly (:mod:`jetastar.clustering`).
With Ginkgo's split term ``ψ`` (the ``"symmetric"`` and ``"legacy"`` forms) that sum is *not* the
density of the observed momenta — a leaf's mass enters only through the probability that it stopped,
and the Jacobian of the map from the shower's draws to the children's momenta is left out — and fits
of ``λ`` to it are biased. The ``"density"`` form (:mod:`jetastar.ginkgo.likelihood`,
``docs/physics.md``) is that density, and this module uses it by default.

* :func:`log_evidence` — ``log Z`` of every jet at one parameter point;
* :func:`scan` — ``Σ_i log Z_i(θ)`` on a grid of one or two rates (and per jet);
* :func:`fit` — the maximum-likelihood estimate of the free rates with 68 % and 95 % intervals
  from the profile likelihood (Wilks), as a :class:`FitResult`.

Three estimators can be scanned and fitted (``estimator=``): ``"marginal"`` (the sum over trees,
the default), ``"truth"`` (the log-likelihood of each jet's truth tree, the oracle that needs
generated jets) and ``"map"`` (the log-likelihood of each jet's MAP tree at each point: what one
gets from trees instead of the posterior).

The rates not given keep each jet's own values; ``t_cut`` and the root are always the jets' own.
A sample selected on its number of leaves (``generate(..., min_leaves=, max_leaves=)``, or the
jets a size limit leaves out) changes the likelihood by ``P(selection | θ)``: declare the window
with ``selection=(lo, hi)`` and the fit accounts for it (``P`` estimated with the generator); a fit
that would silently leave jets out is refused.

Example:
    >>> from jetastar.ginkgo import ShowerParams, generate
    >>> from jetastar.inference import fit
    >>> jets = generate(200, ShowerParams.qcd(lam=2.0, lam_root=2.0), seed=1)
    >>> result = fit(jets, free=("lam",))
    >>> lo, hi = result.interval("lam", 0.95)
    >>> bool(lo < 2.0 < hi), result.n_used
    (True, 200)
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ._cuda import resolve_device
from ._progress import progress_bar
from .clustering.chunks import params_valid, score_columns
from .clustering.exact.evidence import GRID_MAX_LEAVES, log_z_grid
from .errors import InferenceError, InvalidJetError, OptionError
from .ginkgo.generator import generate
from .ginkgo.likelihood import check_likelihood
from .jet import Jet, JetCollection
from .tree_arrays import as_collection

__all__ = [
    "ESTIMATORS",
    "PARAMETERS",
    "Evidence",
    "FitResult",
    "Scan",
    "fit",
    "log_evidence",
    "scan",
    "selection_log_probability",
]

#: the rates that can be scanned and fitted (the rest of each jet's parameters are its own)
PARAMETERS = ("lam", "lam_root")
#: what a scan sums over the jets: the sum over trees, the MAP tree's value, the truth tree's value
ESTIMATORS = ("marginal", "map", "truth")
#: ``Δ(−log L)`` at the edge of a profile-likelihood interval of one parameter (Wilks: half the
#: χ²₁ quantile)
_DELTA = {0.68: 0.5, 0.6827: 0.5, 0.95: 1.920729, 0.9545: 2.0}
#: default range of a fitted rate (the first, coarse scan)
_DEFAULT_RANGE = (0.25, 6.0)
#: points per dimension of each scan of a fit
_FIT_POINTS = 16
#: generated jets (over all reference points) for the selection probability
_SELECTION_JETS = 50_000
#: jets of the coarse scan of a large sample (a subsample: it only locates the maximum)
_COARSE_JETS = 1000
_COARSE_SEED = 20261207
#: most extensions of a fine scan whose profile does not close
_MAX_EXTENSIONS = 3


def _delta_for(cl: float) -> float:
    if cl in _DELTA:
        return _DELTA[cl]
    if not 0.0 < cl < 1.0:
        raise InferenceError(f"a confidence level is between 0 and 1, got {cl!r}")
    from scipy.stats import chi2

    return float(chi2.ppf(cl, 1)) / 2.0


def _jets_of(jets: Any) -> JetCollection:
    """Jets in any form :func:`jetastar.cluster` accepts (one jet's particles included), as a
    collection."""
    if isinstance(jets, np.ndarray) and jets.ndim == 2 and jets.shape[1:] == (4,):
        jets = Jet.from_particles(jets)
    try:
        collection, _ = as_collection(jets)
    except TypeError as exc:
        raise TypeError(f"{exc}; (inference takes what jetastar.cluster takes)") from None
    return collection


def _check_form(likelihood: str) -> str:
    try:
        check_likelihood(likelihood)
    except ValueError as exc:
        raise InferenceError(str(exc)) from None
    return likelihood


def _rate_values(value: Any, name: str) -> np.ndarray | None:
    if value is None:
        return None
    arr = np.atleast_1d(np.asarray(value, dtype=np.float64))
    if arr.ndim != 1 or arr.size == 0:
        raise InferenceError(f"{name}: give a value or a 1-D grid of values, got {value!r}")
    bad = ~np.isfinite(arr) | (arr <= 0.0)
    if bad.any():
        raise InferenceError(f"{name}: every value must be finite and > 0, got "
                             f"{arr[bad][:3].tolist()}")
    return arr


def _jet_problem(collection: JetCollection, i: int) -> str:
    """The message of an invalid jet (its leaves or parameters), as :class:`~jetastar.Jet` words
    it."""
    try:
        collection[i]
    except (InvalidJetError, ValueError) as exc:
        return str(exc)
    return f"jet {int(collection.jet_id[i])}: invalid parameters"


@dataclasses.dataclass(frozen=True, eq=False)
class Evidence:
    """``log Z`` of every jet at one parameter point (:func:`log_evidence`).

    Attributes:
        log_z: ``(J,)`` ``log Z(x_i | θ)``; ``-inf`` where no tree is possible (status
            ``"all_inf"``), NaN where the jet was not solved (``"skipped"``, ``"failed"``).
        status: ``(J,)`` ``"ok"``, ``"all_inf"``, ``"skipped"`` (over ``max_leaves``) or
            ``"failed"`` (invalid leaves or parameters); ``message`` says why.
        message: ``(J,)`` str.
        n_leaves, jet_id: ``(J,)``.
        likelihood: the form.
        parameters: the rates used, ``"lam"`` and ``"lam_root"`` -> ``(J,)``.
    """

    log_z: np.ndarray
    status: np.ndarray
    message: np.ndarray
    n_leaves: np.ndarray
    jet_id: np.ndarray
    likelihood: str
    parameters: dict[str, np.ndarray]

    def __len__(self) -> int:
        return int(self.log_z.shape[0])

    @property
    def total(self) -> float:
        """``Σ log Z`` over the jets that were solved (``-inf`` if one of them is impossible)."""
        solved = np.isin(self.status, ("ok", "all_inf"))
        return float(np.sum(self.log_z[solved]))

    def summary(self) -> dict[str, int]:
        """Jets per status."""
        names, counts = np.unique(self.status.astype(str), return_counts=True)
        return {str(k): int(v) for k, v in zip(names, counts, strict=True)}

    def __repr__(self) -> str:
        return (f"Evidence({len(self)} jets, likelihood={self.likelihood!r}, "
                f"total={self.total:.6g}, {self.summary()})")


def _statuses(collection: JetCollection, log_z: np.ndarray, outcome: np.ndarray,
              max_leaves: int | None) -> tuple[np.ndarray, np.ndarray]:
    n = len(collection)
    status = np.empty(n, dtype=object)
    message = np.full(n, "", dtype=object)
    sizes = np.asarray(collection.n_leaves)
    for i in range(n):
        if outcome[i] == 0:
            if log_z[i] == -np.inf:
                status[i] = "all_inf"
                message[i] = ("no tree of this jet has non-zero likelihood under the model (in the "
                              "density form, for instance, a leaf above t_cut)")
            else:
                status[i] = "ok"
        elif outcome[i] == 1:
            status[i] = "failed"
            message[i] = _jet_problem(collection, i)
        else:
            status[i] = "skipped"
            message[i] = (f"{int(sizes[i])} leaves is over max_leaves={max_leaves} (the sum over "
                          f"trees costs ~3^n / 2 splits)")
    return status, message


def log_evidence(
    jets: Any,
    likelihood: str = "density",
    *,
    lam: float | None = None,
    lam_root: float | None = None,
    max_leaves: int | None = GRID_MAX_LEAVES,
    device: str = "cpu",
) -> Evidence:
    """``log Z(x_i | θ) = log Σ_trees Π ψ``: the exact log marginal likelihood of every jet.

    Args:
        jets: a :class:`~jetastar.Jet`, a :class:`~jetastar.JetCollection`, a list of jets, or
            anything :func:`jetastar.cluster` accepts.
        likelihood: ``"density"`` (default: the density of the observed jet), ``"symmetric"`` or
            ``"legacy"`` (Ginkgo's split term, summed over trees).
        lam, lam_root: the rates (``None``: each jet's own).
        max_leaves: larger jets are ``"skipped"`` (``None``: no limit; the sum over trees costs
            ``~3^n / 2`` splits: 20 leaves take seconds).
        device: ``"cpu"`` (default), ``"gpu"`` (the batched GPU trellis; at most 30 leaves) or
            ``"auto"`` (a GPU when one is usable).

    Returns:
        An :class:`Evidence` with per-jet ``log_z`` and ``status``.

    Raises:
        InferenceError: an unknown likelihood, a rate that is not > 0.
        GpuUnavailableError: ``device="gpu"`` where no GPU can be used.

    Example:
        >>> from jetastar.ginkgo import ShowerParams, generate
        >>> from jetastar.clustering import exact_trellis
        >>> jets = generate(3, ShowerParams.qcd(), seed=1)
        >>> ev = log_evidence(jets, lam=2.0)
        >>> jet = jets[0]
        >>> other = type(jet)(jet.leaves, jet.params.replace(lam=2.0))
        >>> bool(abs(ev.log_z[0] - exact_trellis(other, "density").log_z) < 1e-9)
        True
    """
    _check_form(likelihood)
    collection = _jets_of(jets)
    lam_v = _rate_values(lam, "lam")
    root_v = _rate_values(lam_root, "lam_root")
    for name, v in (("lam", lam_v), ("lam_root", root_v)):
        if v is not None and v.size != 1:
            raise InferenceError(f"log_evidence takes one value of {name}; scan takes a grid")
    grid = log_z_grid(collection, likelihood, lam=lam_v, lam_root=root_v, max_leaves=max_leaves,
                      device=device)
    log_z = grid.log_z[:, 0, 0].copy()
    status, message = _statuses(collection, log_z, grid.outcome, max_leaves)
    n = len(collection)
    params = {
        "lam": np.full(n, float(lam_v[0])) if lam_v is not None else collection.params["lam"],
        "lam_root": (np.full(n, float(root_v[0])) if root_v is not None
                     else collection.params["lam_root"]),
    }
    return Evidence(log_z, status, message, np.asarray(collection.n_leaves), collection.jet_id,
                    likelihood, params)


# ---------------------------------------------------------------------- scans
@dataclasses.dataclass(frozen=True, eq=False)
class Scan:
    """``Σ_i`` of an estimator over the jets on a grid of one or two rates (:func:`scan`).

    Attributes:
        grid: rate name -> its grid values, in the order of the axes.
        total: the sum over the jets used, shaped like the grid (minus ``N log P(selection | θ)``
            when a selection is declared).
        per_jet: ``(J, *grid)`` each jet's value (NaN for jets not used).
        used: ``(J,)`` bool, the jets in the sum; ``status`` / ``message`` say why the others are
            not.
        status, message: ``(J,)`` as :class:`Evidence`'s, and ``"outside_selection"``.
        selection_log_p: the ``log P(selection | θ)`` subtracted per jet, shaped like the grid
            (zero without a selection).
        likelihood, estimator: what was summed.
        selection: the declared leaf-count window, or ``None``.
    """

    grid: dict[str, np.ndarray]
    total: np.ndarray
    per_jet: np.ndarray
    used: np.ndarray
    status: np.ndarray
    message: np.ndarray
    selection_log_p: np.ndarray
    likelihood: str
    estimator: str
    selection: tuple[int, int] | None

    def best(self) -> dict[str, float]:
        """The grid point of the largest total."""
        k = np.unravel_index(int(np.nanargmax(self.total)), self.total.shape)
        return {name: float(values[k[q]]) for q, (name, values) in enumerate(self.grid.items())}

    def __repr__(self) -> str:
        axes = ", ".join(f"{k}: {v.size}" for k, v in self.grid.items())
        return (f"Scan({self.estimator}, {self.likelihood!r}, {axes} points, "
                f"{int(self.used.sum())} of {self.used.size} jets)")


def _truth_values(collection: JetCollection, likelihood: str, lams: np.ndarray | None,
                  roots: np.ndarray | None) -> np.ndarray:
    """``log L(truth_i | θ)`` at every grid point: ``(J, K1, K2)``.

    λ_R enters a tree's log-likelihood only through the root's split and λ only through the
    others, so on a grid of both rates ``log L(λ_a, λ_R,b) = log L(λ_a, λ_R,0) + log L(λ_0,
    λ_R,b) − log L(λ_0, λ_R,0)``: ``K1 + K2 − 1`` scorings of the trees instead of ``K1 · K2``
    (the same values up to rounding, ~1e-13). A jet not finite at the first point is scored at
    every point.
    """
    k1 = 1 if lams is None else lams.size
    k2 = 1 if roots is None else roots.size
    if collection.children.shape[0] == 0:
        raise InferenceError("the truth-tree estimator needs jets with truth trees (generated "
                             "jets); these have none")

    def at(jets: JetCollection, a: int, b: int) -> np.ndarray:
        moved = jets.with_params(**{
            name: values[q] for name, values, q in (("lam", lams, a), ("lam_root", roots, b))
            if values is not None})
        ll, status = score_columns(moved, likelihood=likelihood)
        return np.where(status == "ok", ll, np.nan)

    def every_point(jets: JetCollection) -> np.ndarray:
        out = np.full((len(jets), k1, k2), np.nan)
        for a in range(k1):
            for b in range(k2):
                out[:, a, b] = at(jets, a, b)
        return out

    if k1 == 1 or k2 == 1:
        return every_point(collection)
    by_lam = np.stack([at(collection, a, 0) for a in range(k1)], axis=1)     # (J, K1)
    by_root = np.stack([at(collection, 0, b) for b in range(k2)], axis=1)   # (J, K2)
    with np.errstate(invalid="ignore"):  # (-inf - -inf: the jets scored again below)
        out = by_lam[:, :, None] + (by_root - by_lam[:, :1])[:, None, :]
    out[:, :, 0] = by_lam  # (the scored values themselves where there are some)
    out[:, 0, :] = by_root
    rest = np.flatnonzero(~np.isfinite(by_lam[:, 0]))
    if rest.size:
        out[rest] = every_point(collection.take(rest))
    return out


def selection_log_probability(
    jets: Any, selection: tuple[int, int], *, lam: Any = None, lam_root: Any = None,
    n_generated: int = _SELECTION_JETS, seed: int = 12345,
) -> np.ndarray:
    """``log P(lo <= n_leaves <= hi | θ)`` of the generator, per jet, on a grid of rates.

    Estimated by importance sampling from the generator itself: ``n_generated`` jets (per distinct
    set of the jets' other parameters) are generated, spread evenly over up to
    :data:`_SELECTION_REFERENCES` reference points of the grid, and every grid point reweights all
    of them by the ratio of its density of each generated jet (truth tree and momenta, the density
    form) to the mixture of the references' (the balance heuristic of multiple importance
    sampling). The estimate is unbiased at every point and a smooth function of the rates (no
    jet's leaf count flips between neighbouring points, as with a fresh sample per point, whose
    noise would distort the profile and its intervals).

    Args:
        jets: the jets (their parameters: root, ``t_cut``, and the rates not given).
        selection: ``(lo, hi)``, both inclusive.
        lam, lam_root: grids of rates (``None``: the jets' own).
        n_generated: jets generated per set of parameters, over all reference points.
        seed: the generator's seed.

    Returns:
        ``(J, K1, K2)``.

    Example:
        >>> from jetastar.ginkgo import ShowerParams, generate
        >>> jets = generate(2, ShowerParams.qcd(), seed=1)
        >>> p = selection_log_probability(jets, (1, 10), lam=[1.0, 2.0], n_generated=2000)
        >>> p.shape, bool(p[0, 0, 0] < p[0, 1, 0] < 0)
        ((2, 2, 1), True)
    """
    collection = _jets_of(jets)
    lo, hi = _check_selection(selection)
    lams = _rate_values(lam, "lam")
    roots = _rate_values(lam_root, "lam_root")
    if int(n_generated) < 1:
        raise InferenceError(f"n_generated must be >= 1, got {n_generated!r}")
    n = len(collection)
    k1 = 1 if lams is None else lams.size
    k2 = 1 if roots is None else roots.size
    out = np.zeros((n, k1, k2))
    seen: dict[tuple[Any, ...], np.ndarray] = {}
    for i in range(n):
        params = collection.jet_params(i)
        key = (params.m_hard, params.t_cut, params.t_root, tuple(params.root_momentum),
               params.lam if lams is None else None, params.lam_root if roots is None else None)
        if key not in seen:
            seen[key] = _selection_table(params, lo, hi, lams, roots, int(n_generated), seed)
        out[i] = seen[key]
    return out


#: most reference points of the importance-sampled selection probability (per rate: all of them
#: for one rate, their square root each for two)
_SELECTION_REFERENCES = 8


def _reference_indices(k: int, most: int) -> np.ndarray:
    """Up to ``most`` grid indices spread evenly over ``0 .. k-1``, both ends included."""
    return np.unique(np.round(np.linspace(0, k - 1, min(k, most))).astype(np.int64))


def _selection_table(params: Any, lo: int, hi: int, lams: np.ndarray | None,
                     roots: np.ndarray | None, n_generated: int, seed: int) -> np.ndarray:
    """``log P(selection | θ)`` on the grid for one set of the other parameters: ``(K1, K2)``."""
    k1 = 1 if lams is None else lams.size
    k2 = 1 if roots is None else roots.size
    per_axis = _SELECTION_REFERENCES if (k1 == 1 or k2 == 1) else max(
        2, math.isqrt(_SELECTION_REFERENCES))
    refs = [(a, b) for a in _reference_indices(k1, per_axis)
            for b in _reference_indices(k2, per_axis)]
    n_per = max(1, -(-n_generated // len(refs)))
    log_w_sum = np.full((k1, k2), -np.inf)   # log Σ_x 1{sel}(x) p_θ(x) / q(x)
    total = 0
    for r, (a, b) in enumerate(refs):
        point = params.replace(lam=params.lam if lams is None else float(lams[a]),
                               lam_root=params.lam_root if roots is None else float(roots[b]))
        sample = generate(n_per, point, seed=seed, first_index=r * n_per)
        total += n_per
        sizes = np.asarray(sample.n_leaves)
        inside = (sizes >= lo) & (sizes <= hi)
        if not inside.any():
            continue
        sample = sample[np.flatnonzero(inside)]
        # each selected jet's density at every grid point (the generator's own: density form)
        log_p = _truth_values(sample, "density", lams, roots)
        if not np.all(np.isfinite(log_p)):
            raise InferenceError(  # (the generator's jets are possible under their own model)
                "a generated jet has no finite density at a grid point; the selection "
                "probability cannot be reweighted there")
        ref_p = np.stack([log_p[:, ra, rb] for ra, rb in refs], axis=1)
        log_q = np.logaddexp.reduce(ref_p, axis=1) - math.log(len(refs))
        log_w = log_p - log_q[:, None, None]
        log_w_sum = np.logaddexp(log_w_sum, np.logaddexp.reduce(log_w, axis=0))
    # (a window no generated jet fell into: half a jet, not log 0)
    return np.maximum(log_w_sum, math.log(0.5)) - math.log(total)


def _check_selection(selection: Any) -> tuple[int, int]:
    try:
        lo, hi = (int(x) for x in selection)
    except (TypeError, ValueError):
        raise InferenceError(f"selection is (min_leaves, max_leaves), got {selection!r}") from None
    if not 1 <= lo <= hi:
        raise InferenceError(f"selection needs 1 <= min_leaves <= max_leaves, got {selection!r}")
    return lo, hi


def scan(
    jets: Any,
    *,
    lam: Any = None,
    lam_root: Any = None,
    likelihood: str = "density",
    estimator: str = "marginal",
    selection: tuple[int, int] | None = None,
    max_leaves: int | None = GRID_MAX_LEAVES,
    device: str = "cpu",
) -> Scan:
    """``Σ_i`` of an estimator over the jets, on a grid of one or two rates.

    Args:
        jets: as for :func:`log_evidence`.
        lam, lam_root: a grid (1-D array) of the rates to scan, or one value, or ``None`` (each
            jet's own); at least one of them a grid.
        likelihood: the form (``"density"`` by default).
        estimator: ``"marginal"`` (``log Z``), ``"map"`` (the MAP tree's log-likelihood at each
            point) or ``"truth"`` (the truth tree's).
        selection: ``(min_leaves, max_leaves)``: the jets outside it are left out (status
            ``"outside_selection"``) and the total is the likelihood of the selected jets
            (``− N log P(selection | θ)``), whether the sample was selected so before or here.
        max_leaves: larger jets are not solved; a scan that would leave them out of the sum without
            a declared selection leaving them out is refused.
        device: where the sums over trees run: ``"cpu"`` (default: one pass over each jet's
            clusters for all grid points), ``"gpu"`` (the batched GPU trellis, once per grid
            point) or ``"auto"``.

    Returns:
        A :class:`Scan`.

    Raises:
        InferenceError: an unknown estimator or form, a bad grid, jets left out by the size limit
            without a declared selection, no jet usable.

    Example:
        >>> import numpy as np
        >>> from jetastar.ginkgo import ShowerParams, generate
        >>> s = scan(generate(50, ShowerParams.qcd(), seed=2), lam=np.linspace(1, 2.5, 4))
        >>> s.total.shape, list(s.grid)
        ((4,), ['lam'])
    """
    _check_form(likelihood)
    if estimator not in ESTIMATORS:
        raise InferenceError(f"unknown estimator {estimator!r}; valid: "
                             f"{', '.join(map(repr, ESTIMATORS))}")
    collection = _jets_of(jets)
    lams = _rate_values(lam, "lam")
    roots = _rate_values(lam_root, "lam_root")
    grid = {name: v for name, v in (("lam", lams), ("lam_root", roots))
            if v is not None and v.size > 1}
    if not grid:
        raise InferenceError("scan needs a grid of lam or lam_root (more than one value); "
                             "log_evidence evaluates one point")
    n = len(collection)
    if n == 0:
        raise InferenceError("no jets to scan")
    sizes = np.asarray(collection.n_leaves)
    inside = np.ones(n, dtype=bool)
    if selection is not None:
        lo, hi = _check_selection(selection)
        inside = (sizes >= lo) & (sizes <= hi)
    if max_leaves is not None and np.any(sizes[inside] > max_leaves) and estimator != "truth":
        over = int(np.count_nonzero(sizes[inside] > max_leaves))
        raise InferenceError(
            f"{over} of {n} jets have more than max_leaves={max_leaves} leaves: leaving them out "
            "of the fit selects the sample on its size, which biases it. Declare the selection "
            f"selection=(1, {max_leaves}) (command line: --selection 1:{max_leaves}): the jets "
            "outside it are left out and the fit includes P(selection | θ), estimated with the "
            "generator; or raise max_leaves")
    work = collection if inside.all() else collection.take(np.flatnonzero(inside))
    if estimator == "truth":
        part = _truth_values(work, likelihood, lams, roots)
        part_outcome = np.where(params_valid(work), 0, 1)
    else:
        g = log_z_grid(work, likelihood, lam=lams, lam_root=roots,
                       want_map=estimator == "map", max_leaves=max_leaves, device=device)
        part = g.map_log_likelihood if estimator == "map" else g.log_z
        part_outcome = g.outcome
    values = np.full((n, *part.shape[1:]), np.nan)
    values[inside] = part
    outcome = np.zeros(n, dtype=np.int64)
    outcome[inside] = part_outcome
    first = values[:, 0, 0] if values.shape[0] else np.zeros(0)
    status, message = _statuses(collection, first, outcome, max_leaves)
    if estimator == "truth":
        missing = np.isnan(first) & (status == "ok") & inside
        status[missing] = "failed"
        message[missing] = "no truth tree (or an invalid one)"
    if not inside.all():
        status[~inside] = "outside_selection"
        message[~inside] = [f"{int(k)} leaves, outside the declared selection {lo}..{hi}"
                            for k in sizes[~inside]]
    used = status == "ok"
    if not used.any():
        raise InferenceError(f"none of the {n} jets can be used: " + "; ".join(
            f"{k} {v}" for k, v in zip(*np.unique(status.astype(str), return_counts=True),
                                        strict=True)))
    shape = tuple(v.size for v in grid.values())
    per_jet = values.reshape(n, -1).reshape((n, *shape))
    per_jet = np.where(used.reshape((n,) + (1,) * len(shape)), per_jet, np.nan)
    sel = np.zeros(shape)
    total = np.nansum(per_jet, axis=0)
    if selection is not None:
        in_sum = collection.take(np.flatnonzero(used))
        log_p = selection_log_probability(in_sum, selection, lam=lams, lam_root=roots)
        log_p = log_p.reshape(len(in_sum), -1).reshape((len(in_sum), *shape))
        total = total - np.sum(log_p, axis=0)
        sel = np.mean(log_p, axis=0)
    return Scan(grid, total, per_jet, used, status, message, sel, likelihood, estimator,
                None if selection is None else _check_selection(selection))


# ---------------------------------------------------------------------- fits
@dataclasses.dataclass(frozen=True, eq=False)
class FitResult:
    """A maximum-likelihood fit of one or two rates (:func:`fit`).

    Attributes:
        values: name -> the estimate.
        intervals: name -> confidence level -> ``(low, high)`` (``None`` for an edge the scanned
            range did not reach).
        profiles: name -> ``(grid, Δ(−log L))``: the profile likelihood (the other free rate at
            its best value for each point).
        max_log_likelihood: the summed log-likelihood at the estimate.
        n_jets, n_used: jets given and jets in the fit; ``left_out``: why the others are not
            (reason -> count).
        likelihood, estimator: what was fitted; ``fixed``: the rates that were not free (each
            jet's own unless given); ``selection``: the declared leaf-count window.
        device: where the sums over trees ran; ``wall_s``, ``cpu_s``: the fit's time.
        scans: the scans the fit made (coarse, then around the maximum).
    """

    values: dict[str, float]
    intervals: dict[str, dict[float, tuple[float | None, float | None]]]
    profiles: dict[str, tuple[np.ndarray, np.ndarray]]
    max_log_likelihood: float
    n_jets: int
    n_used: int
    left_out: dict[str, int]
    likelihood: str
    estimator: str
    fixed: dict[str, Any]
    selection: tuple[int, int] | None
    device: str
    wall_s: float
    cpu_s: float
    scans: list[Scan]

    def interval(self, name: str, cl: float = 0.68) -> tuple[float | None, float | None]:
        """The ``cl`` profile-likelihood interval of ``name`` (``Δ(−log L) <=`` half the χ²₁
        quantile: 0.5 at 68 %, 1.92 at 95 %; Wilks' theorem, asymptotic: it holds for an estimate
        well inside the rates' range and a likelihood close to parabolic there, which the
        calibration study checks, not at a boundary such as ``λ → 0``).

        Raises:
            KeyError: ``name`` was not fitted.
        """
        if name not in self.values:
            raise KeyError(f"{name!r} was not fitted; fitted: {', '.join(self.values)}")
        known = self.intervals[name]
        if cl in known:
            return known[cl]
        grid, delta = self.profiles[name]
        return _crossings(grid, delta, self.values[name], _delta_for(cl))

    def profile(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """``(grid, Δ(−log L))`` of ``name``."""
        if name not in self.profiles:
            raise KeyError(f"{name!r} was not fitted; fitted: {', '.join(self.values)}")
        return self.profiles[name]

    def to_dict(self) -> dict[str, Any]:
        """Plain-Python (JSON-serialisable) summary."""
        return {
            "values": dict(self.values),
            "intervals": {k: {str(cl): list(v) for cl, v in iv.items()}
                          for k, iv in self.intervals.items()},
            "profiles": {k: {"grid": g.tolist(), "delta_nll": d.tolist()}
                         for k, (g, d) in self.profiles.items()},
            "max_log_likelihood": self.max_log_likelihood,
            "n_jets": self.n_jets, "n_used": self.n_used, "left_out": dict(self.left_out),
            "likelihood": self.likelihood, "estimator": self.estimator,
            "fixed": {k: (v if isinstance(v, str) else float(v)) for k, v in self.fixed.items()},
            "selection": None if self.selection is None else list(self.selection),
            "device": self.device, "wall_s": self.wall_s, "cpu_s": self.cpu_s,
        }

    def to_json(self) -> str:
        """:meth:`to_dict` as JSON text."""
        return json.dumps(self.to_dict(), indent=1, allow_nan=False, default=float)

    def plot(self, name: str | None = None, ax: Any = None) -> Any:
        """The profile ``Δ(−log L)`` of ``name`` (default: the first fitted rate) with the
        estimate and the 68 % / 95 % levels (matplotlib).

        Returns:
            The matplotlib ``Axes``.
        """
        import matplotlib.pyplot as plt

        name = name or next(iter(self.values))
        grid, delta = self.profile(name)
        if ax is None:
            _, ax = plt.subplots(figsize=(5, 3.5))
        ax.plot(grid, delta, color="black", lw=1.5, label=f"{self.estimator} ({self.likelihood})")
        for cl, style in ((0.68, "--"), (0.95, ":")):
            level = _delta_for(cl)
            ax.axhline(level, color="grey", ls=style, lw=1, label=f"{int(cl * 100)} %")
        value = self.values[name]
        ax.axvline(value, color="tab:blue", lw=1)
        lo, hi = self.interval(name, 0.68)
        label = {"lam": "λ", "lam_root": "λ_R"}.get(name, name)
        ax.set_xlabel(label)
        ax.set_ylabel("Δ(−log L)")
        ax.set_ylim(0, max(4.0, 1.2 * _delta_for(0.95)))
        text = (f"{label} = {value:.4g}" + (f" [{lo:.4g}, {hi:.4g}]" if lo is not None
                                            and hi is not None else ""))
        ax.set_title(f"{text} ({self.n_used} jets)", fontsize=10)
        ax.legend(fontsize=8, frameon=False)
        return ax

    def __str__(self) -> str:
        lines = [f"fit of {', '.join(self.values)}: {self.estimator} likelihood, "
                 f"{self.likelihood!r} form, {self.n_used} of {self.n_jets} jets"]
        for name, value in self.values.items():
            lo68, hi68 = self.interval(name, 0.68)
            lo95, hi95 = self.interval(name, 0.95)
            lines.append(f"  {name} = {value:.5g}   68 %: [{_edge(lo68)}, {_edge(hi68)}]   "
                         f"95 %: [{_edge(lo95)}, {_edge(hi95)}]")
        if self.left_out:
            lines.append("  left out: " + ", ".join(f"{v} {k}" for k, v in self.left_out.items()))
        if self.selection is not None:
            lines.append(f"  selection: {self.selection[0]} <= n_leaves <= {self.selection[1]} "
                         "(P(selection | θ) from the generator)")
        lines.append(f"  max log L = {self.max_log_likelihood:.6g}; {self.wall_s:.3g} s wall, "
                     f"{self.cpu_s:.3g} s CPU ({self.device})")
        return "\n".join(lines)

    def __repr__(self) -> str:
        values = ", ".join(f"{k}={v:.5g}" for k, v in self.values.items())
        return f"FitResult({values}, n_used={self.n_used}, estimator={self.estimator!r})"


def _edge(x: float | None) -> str:
    return "?" if x is None else f"{x:.5g}"


def _smooth(grid: np.ndarray, values: np.ndarray) -> Any:
    """A smooth interpolant of a profile on a grid (a cubic spline where finite)."""
    from scipy.interpolate import CubicSpline

    finite = np.isfinite(values)
    if finite.sum() < 4:
        return None
    return CubicSpline(grid[finite], values[finite])


def _maximum(grid: np.ndarray, values: np.ndarray) -> tuple[float, float]:
    """The maximum of a sampled smooth curve: ``(argmax, max)`` (spline between the points)."""
    k = int(np.nanargmax(values))
    spline = _smooth(grid, values)
    if spline is None:
        return float(grid[k]), float(values[k])
    lo = grid[max(k - 1, 0)]
    hi = grid[min(k + 1, grid.size - 1)]
    fine = np.linspace(lo, hi, 2001)
    y = spline(fine)
    j = int(np.argmax(y))
    return float(fine[j]), float(y[j])


def _crossings(grid: np.ndarray, delta: np.ndarray, best: float,
               level: float) -> tuple[float | None, float | None]:
    """Where the profile ``delta`` crosses ``level`` left and right of ``best`` (``None`` where it
    does not within the grid)."""
    spline = _smooth(grid, delta)
    fine = np.linspace(grid[0], grid[-1], 20001)
    y = spline(fine) if spline is not None else np.interp(fine, grid, delta)
    k = int(np.argmin(np.abs(fine - best)))
    left = np.flatnonzero(y[:k + 1] >= level)
    right = np.flatnonzero(y[k:] >= level)
    lo = None if left.size == 0 else float(_root(fine, y, int(left[-1]), level))
    hi = None if right.size == 0 else float(_root(fine, y, k + int(right[0]) - 1, level))
    return lo, hi


def _root(x: np.ndarray, y: np.ndarray, i: int, level: float) -> float:
    """Linear interpolation of ``y = level`` between ``x[i]`` and ``x[i + 1]``."""
    i = max(0, min(i, x.size - 2))
    y0, y1 = y[i] - level, y[i + 1] - level
    if y1 == y0:
        return float(x[i])
    return float(x[i] - y0 * (x[i + 1] - x[i]) / (y1 - y0))


def _profile(s: Scan) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Each rate's profile ``(grid, max over the other rate of the total)`` of a scan."""
    names = list(s.grid)
    if len(names) == 1:
        return {names[0]: (s.grid[names[0]], s.total)}
    out = {}
    for axis, name in enumerate(names):
        other = 1 - axis
        values = []
        for q in range(s.grid[name].size):
            line = np.take(s.total, q, axis=axis)
            values.append(_maximum(s.grid[names[other]], line)[1])
        out[name] = (s.grid[name], np.array(values))
    return out


def _refine(grid: np.ndarray, total: np.ndarray, low: float, high: float,
            level: float = 4.0) -> np.ndarray:
    """The fine grid around the maximum: the range where ``Δ(−log L)`` of the coarse profile is
    below ``level`` (widened to the next coarse point on each side), inside ``[low, high]``."""
    top = np.nanmax(total)
    spline = _smooth(grid, total)
    if spline is not None:  # (between the coarse points, where the region is narrow)
        dense = np.linspace(grid[0], grid[-1], 4001)
        near = dense[top - spline(dense) <= level]
        if near.size >= 2 and near[-1] - near[0] > 1e-9 * (1.0 + abs(near[0])):
            step = (grid[-1] - grid[0]) / 4000.0
            a = max(low, near[0] - step)
            b = min(high, near[-1] + step)
            return np.linspace(a, b, grid.size)
    inside = np.flatnonzero(top - total <= level)
    if inside.size == 0:
        inside = np.array([int(np.nanargmax(total))])
    a = max(low, grid[max(inside[0] - 1, 0)])
    b = min(high, grid[min(inside[-1] + 1, grid.size - 1)])
    if b <= a:
        a, b = max(low, grid[0]), min(high, grid[-1])
    return np.linspace(a, b, grid.size)


def _extend(fine: Scan, points: dict[str, np.ndarray],
            ranges: dict[str, np.ndarray]) -> dict[str, np.ndarray] | None:
    """A wider fine grid where the fine scan's profile does not reach the 95 % level on a side
    (the maximum at an edge, or the interval open), within the coarse range; ``None`` when every
    profile is closed (or cannot be widened)."""
    out, changed = dict(points), False
    for name, (g, prof) in _profile(fine).items():
        top = np.nanmax(prof)
        width = g[-1] - g[0]
        lo_open = top - prof[0] < _DELTA[0.95] + 0.5
        hi_open = top - prof[-1] < _DELTA[0.95] + 0.5
        a = max(ranges[name][0], g[0] - width) if lo_open else g[0]
        b = min(ranges[name][-1], g[-1] + width) if hi_open else g[-1]
        if (a, b) != (g[0], g[-1]):
            out[name] = np.linspace(a, b, g.size)
            changed = True
    return out if changed else None


def fit(
    jets: Any,
    free: Sequence[str] = ("lam",),
    *,
    likelihood: str = "density",
    estimator: str = "marginal",
    grid: Mapping[str, Any] | None = None,
    lam: float | None = None,
    lam_root: float | None = None,
    selection: tuple[int, int] | None = None,
    max_leaves: int | None = GRID_MAX_LEAVES,
    device: str = "cpu",
    progress: bool | None = None,
) -> FitResult:
    """Maximum-likelihood estimate of the free rates, with profile-likelihood intervals.

    Two scans: a coarse one over each free rate's range (default 0.25 .. 6; on a subsample of 1000
    jets when there are more), then one over all jets in the region within ``Δ(−log L) <= 4`` of
    the coarse maximum (widened where the profile does not reach the 95 % level); the estimate and
    the edges of the 68 % and 95 % intervals are read off a cubic spline through the fine
    profile.

    Args:
        jets: as for :func:`log_evidence`.
        free: the rates to fit, of :data:`PARAMETERS` (one or both).
        likelihood: the form; ``"density"`` (the default) is the density of the observed jets,
            the one whose fits are calibrated (``docs/inference.md``).
        estimator: ``"marginal"`` (default), ``"map"`` or ``"truth"`` (see :func:`scan`).
        grid: rate name -> ``(low, high)`` range or explicit grid for the coarse scan.
        lam, lam_root: the value of a rate that is not free (default: each jet's own).
        selection: the ``(min_leaves, max_leaves)`` window the sample was selected with.
        max_leaves: as for :func:`scan`.
        device: where the sums over trees run: ``"cpu"`` (default, the CPU's threads), ``"gpu"``
            (the batched GPU trellis once per grid point) or ``"auto"`` (a GPU when one is
            usable).
        progress: a progress line per scan (default: for more than 10 000 jets).

    Returns:
        A :class:`FitResult`; ``print(result)`` shows a summary.

    Raises:
        InferenceError: an unknown or repeated parameter name, a free parameter also given a
            value, a bad grid, or what :func:`scan` refuses.

    Example:
        >>> from jetastar.ginkgo import ShowerParams, generate
        >>> jets = generate(100, ShowerParams.w(lam_root=3.0), seed=4, max_leaves=12)
        >>> r = fit(jets, free=("lam_root",), selection=(1, 12))
        >>> sorted(r.values), r.estimator
        (['lam_root'], 'marginal')
    """
    wall0, cpu0 = time.perf_counter(), time.process_time()
    free = tuple(free) if not isinstance(free, str) else tuple(x.strip() for x in free.split(","))
    unknown = [f for f in free if f not in PARAMETERS]
    if unknown or not free or len(set(free)) != len(free):
        raise InferenceError(f"free parameters are one or both of {', '.join(PARAMETERS)}, got "
                             f"{list(free)!r} (t_cut and the root are each jet's own)")
    given = {"lam": lam, "lam_root": lam_root}
    both = [f for f in free if given[f] is not None]
    if both:
        raise InferenceError(f"{both[0]} is free: do not also give it a value")
    try:
        where = resolve_device(device, worth_it=estimator != "truth")
    except OptionError as exc:
        raise InferenceError(str(exc)) from None
    if estimator == "truth":  # scores of given trees: no sums over trees to place
        where = "cpu"
    _check_form(likelihood)
    collection = _jets_of(jets)
    ranges = {}
    for name in free:
        spec = (grid or {}).get(name, _DEFAULT_RANGE)
        values = np.asarray(spec, dtype=np.float64).ravel()
        if values.size == 2:
            lo, hi = float(values[0]), float(values[1])
            if not (0.0 < lo < hi and math.isfinite(hi)):
                raise InferenceError(f"grid of {name}: a range (low, high) with 0 < low < high, "
                                     f"got {spec!r}")
            values = np.linspace(lo, hi, _FIT_POINTS if len(free) == 1 else 12)
        _rate_values(values, name)
        if values.size < 4:
            raise InferenceError(f"grid of {name}: at least 4 points, got {values.size}")
        ranges[name] = np.sort(values)
    for name in (grid or {}):
        if name not in free:
            raise InferenceError(f"grid given for {name!r}, which is not free")
    show = len(collection) > 10_000 if progress is None else bool(progress)

    def run(points: dict[str, np.ndarray], sample: JetCollection) -> Scan:
        kw = {name: points.get(name, given[name]) for name in PARAMETERS}
        with progress_bar(total=1, desc=f"fit scan ({len(sample)} jets)", unit="scan",
                          show=show) as bar:
            out = scan(sample, lam=kw["lam"], lam_root=kw["lam_root"],
                       likelihood=likelihood, estimator=estimator, selection=selection,
                       max_leaves=max_leaves, device=where)
            bar.update(1)
        return out

    # the coarse scan only finds where the maximum is: on a subsample of a large sample, its
    # Δ(−log L) scaled up to the whole sample (a fine scan over the subsample's region within
    # ±3 of its standard deviations holds the whole sample's 95 % interval unless the two maxima
    # are more than ~2.4 of them apart: the edges are then extended)
    n_all = len(collection)
    sub = collection
    if n_all > _COARSE_JETS:
        pick = np.sort(np.random.default_rng(_COARSE_SEED).choice(n_all, _COARSE_JETS,
                                                                   replace=False))
        sub = collection.take(pick)
    coarse = run(ranges, sub)
    level = 4.5 if sub is not collection else 4.0
    fine_points = {}
    for name, (g, prof) in _profile(coarse).items():
        fine_points[name] = _refine(g, prof, ranges[name][0], ranges[name][-1], level)
    scans = [coarse]
    fine = run(fine_points, collection)
    scans.append(fine)
    for _ in range(_MAX_EXTENSIONS):
        wider = _extend(fine, fine_points, ranges)
        if wider is None:
            break
        fine_points = wider
        fine = run(fine_points, collection)
        scans.append(fine)
    profiles = _profile(fine)
    values, intervals, curves = {}, {}, {}
    best_total = -np.inf
    for name, (g, prof) in profiles.items():
        x, top = _maximum(g, prof)
        values[name] = x
        best_total = max(best_total, top)
        delta = top - prof
        curves[name] = (g, delta)
        intervals[name] = {cl: _crossings(g, delta, x, _delta_for(cl)) for cl in (0.68, 0.95)}
    left = fine.status[~fine.used].astype(str)
    left_out = {str(k): int(v) for k, v in zip(*np.unique(left, return_counts=True), strict=True)}
    fixed = {name: ("each jet's own" if given[name] is None else float(given[name]))
             for name in PARAMETERS if name not in free}
    return FitResult(
        values=values, intervals=intervals, profiles=curves, max_log_likelihood=float(best_total),
        n_jets=len(collection), n_used=int(fine.used.sum()), left_out=left_out,
        likelihood=likelihood, estimator=estimator, fixed=fixed,
        selection=fine.selection, device=where, wall_s=time.perf_counter() - wall0,
        cpu_s=time.process_time() - cpu0, scans=scans,
    )


def __dir__() -> list[str]:
    return list(__all__)
