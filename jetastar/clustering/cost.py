"""What a run will cost before it starts: each algorithm's CPU time per jet, predicted from the
jet's size and shape with a model fitted to measurements on real and Ginkgo jets.

The model (``cost_model.json`` beside this module, written by ``analysis/cost_model.py``) holds,
per algorithm, a least-squares fit of the logarithm of one jet's CPU seconds (all threads, the
algorithm's default options, a warm process) to

* the number of leaves ``n`` (as ``log n``, or as ``n`` for the exact methods whose cost grows
  exponentially), and
* the jet's *shape*: the fraction of its leaf pairs whose invariant mass² is at least the jet's
  ``t_cut`` (:func:`cost_features`). Ginkgo jets have 0.7–0.95 of such pairs, the real Pythia
  jets of ``data/pythia_jets.root`` at the default ``t_cut`` of 16 GeV² 0.01–0.17 (5–95 %); at
  30–60 leaves the window search took a median 2.6 CPU-s on the real jets and 1.5 on the Ginkgo
  jets.

The scatter of the measurements about the fit (``sigma``, in log space) makes the prediction a
distribution: with a time limit ``L`` a jet costs ``E[min(X, L)]`` for a log-normal ``X``, and
``P(X > L)`` is the chance that it hits the limit. Options that an algorithm's cost is
proportional to (``n_rollouts`` of MCTS: the ``cost_scales_with`` of its
:class:`~jetastar.clustering.AlgorithmInfo`) scale the prediction; for the others the default
options' cost is used.

Example:
    >>> from jetastar.ginkgo import ShowerParams, generate
    >>> jets = generate(20, ShowerParams.qcd(), seed=1)
    >>> n, shape = cost_features(jets)
    >>> bool(n.min() >= 1 and 0 <= shape.min() and shape.max() <= 1)
    True
    >>> cost = predicted_cpu("beam", n, shape, {})
    >>> bool(cost.per_jet.shape == (20,) and cost.total > 0 and cost.over_limit == 0)
    True
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from .registry import algorithm_info

__all__ = ["COST_MODEL_FILE", "PredictedCost", "cost_features", "cost_model", "predicted_cpu"]

#: the fitted model (written by ``analysis/cost_model.py fit``)
COST_MODEL_FILE = Path(__file__).with_name("cost_model.json")


@cache
def cost_model() -> dict[str, Any]:
    """The fitted cost model: ``{"algorithms": {name: {"size": "log"|"linear", "coef": [c0,
    c_size, c_shape], "sigma": s, "fitted_on": ...}}, "provenance": {...}}``."""
    return json.loads(COST_MODEL_FILE.read_text())


def _pair_fraction(leaves: np.ndarray, t_cut: float) -> float:
    """The fraction of leaf pairs whose combined invariant mass² is at least ``t_cut``."""
    n = leaves.shape[0]
    if n < 2:
        return 1.0
    e, p = leaves[:, 0], leaves[:, 1:]
    # (p_i + p_j)² = m_i² + m_j² + 2 (E_i E_j − p_i·p_j)
    m2 = e * e - np.einsum("ij,ij->i", p, p)
    t = m2[:, None] + m2[None, :] + 2.0 * (np.outer(e, e) - p @ p.T)
    upper = np.triu_indices(n, 1)
    return float(np.mean(t[upper] >= t_cut))


def cost_features(jets: Iterable[Any]) -> tuple[np.ndarray, np.ndarray]:
    """Each jet's size and shape, the inputs of the cost model.

    Args:
        jets: :class:`~jetastar.Jet` objects (a :class:`~jetastar.JetCollection`, a list).

    Returns:
        ``(n_leaves, pair_fraction)``: int64 and float64 arrays, one entry per jet;
        ``pair_fraction`` is the fraction of leaf pairs with ``(p_i + p_j)² >= t_cut``.
    """
    n, shape = [], []
    for jet in jets:
        leaves = np.asarray(jet.leaves, dtype=np.float64)
        n.append(leaves.shape[0])
        shape.append(_pair_fraction(leaves, float(jet.params.t_cut)))
    return np.asarray(n, dtype=np.int64), np.asarray(shape, dtype=np.float64)


@dataclass(frozen=True)
class PredictedCost:
    """One algorithm's predicted CPU time on some jets.

    Attributes:
        name: registry name.
        per_jet: predicted CPU seconds of each jet (0 for jets it does not run on).
        runs: whether it runs on each jet (within its size limit).
        p_over_limit: each jet's chance of hitting the time limit (0 without one).
        time_limit: the limit the prediction assumed (``None``: none).
        model: ``"fitted"`` (the measured model), or ``"none"`` (an algorithm the model does
            not know, e.g. a plugin: ``per_jet`` is NaN).
    """

    name: str
    per_jet: np.ndarray
    runs: np.ndarray
    p_over_limit: np.ndarray
    time_limit: float | None
    model: str

    @property
    def total(self) -> float:
        """Predicted CPU seconds on all the jets."""
        return float(np.sum(self.per_jet))

    @property
    def over_limit(self) -> float:
        """Expected number of jets that hit the time limit."""
        return float(np.sum(self.p_over_limit))

    @property
    def n_run(self) -> int:
        """Number of jets it runs on."""
        return int(np.count_nonzero(self.runs))


def _scale(name: str, options: Mapping[str, Any]) -> float:
    """How the options change the cost relative to the defaults the model was fitted at."""
    info = algorithm_info(name)
    defaults = {o.name: o.default for o in info.declared or ()}
    scale = 1.0
    for key in info.cost_scales_with:
        given, default = options.get(key), defaults.get(key)
        if given is not None and default:
            scale *= float(given) / float(default)
    return scale


def predicted_cpu(name: str, n_leaves: np.ndarray, pair_fraction: np.ndarray,
                  options: Mapping[str, Any], *, time_limit: float | None = None,
                  max_leaves: int | None = None) -> PredictedCost:
    """Algorithm ``name``'s predicted CPU seconds on jets of these sizes and shapes.

    Args:
        name: registry name.
        n_leaves, pair_fraction: from :func:`cost_features`.
        options: the options it runs with; its time option (``max_time``), when set, is the
            time limit unless ``time_limit`` is given.
        time_limit: seconds after which a jet stops (``None``: the time option, else none).
        max_leaves: the largest jet it runs on (``None``: the registry's limit of an exact
            method, else none).

    Returns:
        A :class:`PredictedCost`.

    Example:
        >>> import numpy as np
        >>> quick = predicted_cpu("greedy", np.array([10, 20]), np.array([0.8, 0.8]), {})
        >>> bool(quick.total < 0.01)
        True
        >>> slow = predicted_cpu("trellis", np.array([14, 24, 40]), np.array([0.8] * 3), {},
        ...                      time_limit=5.0)
        >>> slow.n_run, bool(slow.p_over_limit[1] > 0.5), bool(slow.per_jet[1] <= 5.0)
        (2, True, True)
    """
    info = algorithm_info(name)
    n = np.asarray(n_leaves, dtype=np.float64)
    shape = np.asarray(pair_fraction, dtype=np.float64)
    limit = max_leaves if max_leaves is not None else (info.max_leaves if info.exact else None)
    runs = n >= 2 if limit is None else (n >= 2) & (n <= limit)
    if time_limit is None and info.time_option is not None:
        given = options.get(info.time_option)
        time_limit = None if given is None else float(given)
    if info.time_option is None:
        time_limit = None  # (it cannot stop: a time limit does not cap it)
    fitted = cost_model()["algorithms"].get(info.name)
    zero = np.zeros(n.shape, dtype=np.float64)
    if fitted is None:
        return PredictedCost(info.name, np.where(runs, np.nan, 0.0), runs, zero, time_limit,
                             "none")
    c0, c_size, c_shape = fitted["coef"]
    size = np.log(np.maximum(n, 1.0)) if fitted["size"] == "log" else n
    mu = c0 + c_size * size + c_shape * shape + math.log(_scale(info.name, options))
    sigma = float(fitted["sigma"])
    if time_limit is None:
        per_jet = np.exp(mu + 0.5 * sigma * sigma)
        over = zero
    else:  # E[min(X, L)] and P(X > L) for log X ~ N(mu, sigma²)
        from scipy.special import ndtr  # (0.15 s to import: not in every worker's start)

        log_l = math.log(max(time_limit, 1e-9))
        over = 1.0 - ndtr((log_l - mu) / sigma)
        per_jet = (np.exp(mu + 0.5 * sigma * sigma) * ndtr((log_l - mu - sigma * sigma) / sigma)
                   + time_limit * over)
    return PredictedCost(info.name, np.where(runs, per_jet, 0.0), runs,
                         np.where(runs, over, 0.0), time_limit, "fitted")
