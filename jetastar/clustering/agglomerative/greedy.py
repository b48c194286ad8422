"""Greedy agglomerative clustering with the Ginkgo likelihood.

At every step the pair of current clusters whose merge has the highest split log-likelihood (the
likelihood of the new internal node with those two as children) is merged. The choices, including ties,
are those of the reference implementation (StandardHC ``N2Greedy_invM``):

* every cluster at position ``k`` of the active list keeps its best partner among the clusters to its
  *left* (first maximum scanning from position 0); position 0 keeps a dummy ``-inf`` entry;
* the merged pair is the first maximum over positions ``1 ..``; the partner becomes the left child;
* after a merge both clusters leave the list, clusters whose stored partner was one of them recompute
  it (a cluster that ends up at position 0 is just set to ``-inf``), and the new cluster is appended at
  the end with its best partner over all the others.

The value of every pair scored is kept (a table of N² entries, up to 3000 leaves), so each pair is
evaluated at most once, O(N²) in all, and a pair whose cheap upper bound cannot beat the best partner
found so far is not evaluated at all (jets of 40 leaves or more): an 8-leaf jet takes about 4 µs, a
100-leaf jet under a millisecond, a 2000-leaf jet a quarter of a second. Jets of more than
:data:`SLICED_FROM` leaves (6000 leaves: about 6 s) are merged in slices of about 0.1 s that return
to Python in between, so Ctrl-C stops them at once. The tree is scored with
λ_R at the root split (the last merge is forced, so λ_R never changes a choice). When at some step
every candidate merge is ``-inf``, the tree is still completed (first entry, as the reference does)
and the result is flagged ``status="all_inf"``.

Example:
    >>> import numpy as np
    >>> from jetastar import Jet
    >>> from jetastar.ginkgo import ShowerParams
    >>> leaves = np.array([[40.0, 0, 30, 25], [30.0, 0, 25, 15], [20.0, 5, 15, 10]])
    >>> result = greedy(Jet(leaves, ShowerParams.qcd()))
    >>> result.tree.n_leaves, result.algorithm
    (3, 'greedy')
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..._jit import DeferredSignals, Stopwatch
from ...costs import CostModel
from ...jet import Jet
from .._merges import (
    BOUND_MIN_LEAVES,
    G_ALL_INF,
    G_DONE,
    G_EVALS,
    PAIR_TABLE_MAX,
    canonical_result,
    check_jet,
    greedy_kernel,
    greedy_start,
    greedy_steps,
    jet_arrays,
)
from ..estimates import SPLITS_PER_S
from ..options import likelihood_option
from ..registry import AlgorithmInfo, WarmUp, register
from ..result import ClusteringResult
from ._merge_chunk import ALG_GREEDY, MergeChunks
from .cost_baselines import cost_greedy

__all__ = ["GREEDY", "SLICED_FROM", "greedy", "greedy_status"]

#: jets of more leaves than this are merged in slices of about :data:`_SLICE_S` seconds, with
#: Ctrl-C seen between them (smaller ones take well under a second in one kernel call)
SLICED_FROM = 1000
_SLICE_S = 0.1
#: merges of the first slice (later ones are sized by the rate measured so far)
_FIRST_SLICE_MERGES = 64


def greedy_status(all_inf_step: int, n_leaves: int, log_likelihood: float) -> tuple[str, str]:
    """The status and message of a greedy tree: ``"all_inf"`` when at step ``all_inf_step`` (``-1``:
    none) every merge was ``-inf`` or the tree's value is ``-inf``, else ``("ok", "")``.

    Example:
        >>> greedy_status(-1, 5, -20.0)
        ('ok', '')
    """
    n = n_leaves
    if all_inf_step >= 0:
        return "all_inf", (
            f"at merge {all_inf_step + 1} of {n - 1} ({n - all_inf_step} clusters left) "
            "every possible merge had log-likelihood -inf; the tree was completed by the reference "
            "tie rule and has log-likelihood -inf"
        )
    if not math.isfinite(log_likelihood):
        return "all_inf", "the greedy tree has log-likelihood -inf (its root split is impossible)"
    return "ok", ""


def greedy(jet: Jet | CostModel, likelihood: str = "symmetric") -> ClusteringResult:
    """Greedy maximum-likelihood clustering (the reference StandardHC greedy).

    A cost model (:class:`jetastar.costs.HCCCost`, :class:`~jetastar.costs.DasguptaCost`) is
    clustered by :func:`jetastar.clustering.cost_greedy` instead (merge the cheapest
    pair first; ``likelihood`` must stay at its default).

    Args:
        jet: the :class:`jetastar.Jet` to cluster (or a cost model).
        likelihood: ``"symmetric"`` (default) or ``"legacy"``.

    Returns:
        A :class:`ClusteringResult` (``algorithm="greedy"``) with the tree and its log-likelihood;
        ``stats`` has ``splits_evaluated`` and ``time_s``. ``status="all_inf"`` (with a message) when
        at some step every possible merge had log-likelihood ``-inf``: the tree is then completed by the
        reference's tie rule and has log-likelihood ``-inf``.

    Raises:
        InvalidJetError: if ``jet`` is not a Jet.
        ValueError: for an unknown likelihood name.

    Example:
        >>> from jetastar.ginkgo import ShowerParams, generate
        >>> jet = generate(1, ShowerParams.qcd(), seed=3)[0]
        >>> greedy(jet).log_likelihood <= 0
        True
    """
    if isinstance(jet, CostModel):
        if likelihood != "symmetric":
            raise ValueError(f"{jet.label}: a cost model has no likelihood option (got {likelihood!r})")
        return cost_greedy(jet)
    watch = Stopwatch()
    check_jet(jet, "greedy")
    leaves, consts = jet_arrays(jet, likelihood)
    n = leaves.shape[0]
    if n > SLICED_FROM:
        history, steps, all_inf_step, evals = _greedy_in_slices(leaves, consts)
    else:
        history, steps, all_inf_step, evals = greedy_kernel(leaves, consts)
    tree, ll = canonical_result(history, steps, n, jet=jet.label)
    status, message = greedy_status(int(all_inf_step), n, ll)
    return ClusteringResult(
        tree=tree,
        log_likelihood=ll,
        algorithm="greedy",
        likelihood=likelihood,
        options={},
        stats={"splits_evaluated": int(evals), "time_s": watch.seconds()},
        status=status,
        message=message,
        jet_id=jet.jet_id,
    )


def _greedy_in_slices(leaves: np.ndarray, consts: np.ndarray) -> tuple[np.ndarray, ...]:
    """:func:`~._agglomerative.greedy_kernel`'s merges, in kernel calls of about
    :data:`_SLICE_S` seconds; a Ctrl-C (or SIGTERM) during a call is raised after it."""
    merges = _FIRST_SLICE_MERGES
    with DeferredSignals() as held:
        state = greedy_start(leaves, consts, np.int64(PAIR_TABLE_MAX),
                             np.int64(BOUND_MIN_LEAVES))
        regs = state[-1]
        while not regs[G_DONE]:
            started = time.perf_counter()
            greedy_steps(consts, state, np.int64(merges))
            held.deliver()
            took = time.perf_counter() - started
            # a merge's cost falls as the clusters get fewer: at most 4 times more at a time
            merges = int(min(4 * merges, max(16.0, merges * _SLICE_S / max(took, 1e-6))))
    return state[5], state[6], regs[G_ALL_INF], regs[G_EVALS]


class _GreedyChunks(MergeChunks):
    """Greedy on the columnar path: its statuses, messages and ``splits_evaluated``."""

    def finish(self, opts: dict[str, Any], done: np.ndarray, ll: np.ndarray, info: np.ndarray,
               counts: np.ndarray, work: np.ndarray, status: np.ndarray,
               message: np.ndarray) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        for i in np.flatnonzero(done & ((info >= 0) | ~np.isfinite(ll))):
            status[i], message[i] = greedy_status(int(info[i]), int(counts[i]), float(ll[i]))
        counters = {}
        if done.any():
            counters["splits_evaluated"] = np.where(done, work, np.nan).astype(np.float64)
        return {}, counters


def _estimate(n_leaves: int, options: Mapping[str, Any]) -> float:
    """A lower estimate of the seconds of one jet: at most ~n² split evaluations (each pair
    once), fewer with the bounds, at :data:`~.estimates.SPLITS_PER_S`."""
    return 2 * n_leaves * n_leaves / SPLITS_PER_S


#: greedy in the registry
GREEDY = register(AlgorithmInfo(
    "greedy", greedy, description="greedy agglomeration: merge the most likely pair first "
    "(reference tie rule)",
    declared=(likelihood_option(),), family="agglomerative",
    chunk=_GreedyChunks("greedy", ALG_GREEDY, radius=False), estimate=_estimate,
    # (compile CPU seconds measured 2026-11-27 on a 2-core machine, cold cache: see WarmUp)
    warm_up=WarmUp(compile_s=1.0, order=0.2),
))
