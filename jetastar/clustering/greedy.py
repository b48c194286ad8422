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

That nearest-neighbour bookkeeping makes a step cost O(N) split evaluations in the typical case, so a
100-leaf jet takes about a millisecond. The tree is scored with λ_R at the root split (the last merge is
forced, so λ_R never changes a choice). When at some step every candidate merge is ``-inf``, the tree
is still completed (first entry, as the reference does) and the result is flagged ``status="all_inf"``.

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

import numba as nb
import numpy as np

from .._jit import Stopwatch
from ..costs import CostModel
from ..ginkgo.likelihood import t_of
from ..jet import Jet
from ._agglomerative import canonical_result, check_jet, jet_arrays, leaf_ts, pair_llh
from .cost_baselines import cost_greedy
from .registry import register
from .result import ClusteringResult

__all__ = ["greedy"]

_NEG_INF = -math.inf


@nb.njit(cache=True)
def _best_left(p, t, pos, k, node, c):  # pragma: no cover - numba
    """First maximum over positions ``0 .. k-1`` of the merge of ``node`` with ``pos[j]``."""
    best_j = 0
    best = pair_llh(p, t, node, pos[0], c)
    for j in range(1, k):
        v = pair_llh(p, t, node, pos[j], c)
        if v > best:
            best = v
            best_j = j
    return best, pos[best_j]


@nb.njit(cache=True)
def _greedy_kernel(leaves, consts):  # pragma: no cover - numba
    """Reference greedy. Returns (history, steps, first step with all candidates -inf or -1, evals)."""
    n = leaves.shape[0]
    c0 = consts[0]
    c1 = consts[1]
    n_nodes = 2 * n - 1
    p = np.empty((n_nodes, 4), dtype=np.float64)
    t = np.empty(n_nodes, dtype=np.float64)
    lt = leaf_ts(leaves, c0)
    for i in range(n):  # loops, not slice assignments: much less to compile
        for d in range(4):
            p[i, d] = leaves[i, d]
        t[i] = lt[i]
    pos = np.empty(n, dtype=np.int64)  # node id at each position of the active list
    nn_val = np.empty(n, dtype=np.float64)  # best merge with a cluster to the left
    nn_part = np.empty(n, dtype=np.int64)  # node id of that partner
    for k in range(n):
        pos[k] = k
    nn_val[0] = _NEG_INF
    nn_part[0] = -1
    evals = 0
    for k in range(1, n):
        nn_val[k], nn_part[k] = _best_left(p, t, pos, k, pos[k], c0)
        evals += k
    history = np.empty((n - 1, 2), dtype=np.int64)
    steps = np.empty(n - 1, dtype=np.float64)
    all_inf_step = -1
    m = n
    for s in range(n - 1):
        r = 1
        for k in range(2, m):
            if nn_val[k] > nn_val[r]:
                r = k
        if nn_val[r] == _NEG_INF and all_inf_step < 0:
            all_inf_step = s
        a = nn_part[r]  # left child: the stored partner
        b = pos[r]
        left = 0
        while pos[left] != a:
            left += 1
        node = n + s
        history[s, 0] = a
        history[s, 1] = b
        steps[s] = pair_llh(p, t, a, b, c1 if m == 2 else c0)
        evals += 1
        for d in range(4):
            p[node, d] = p[a, d] + p[b, d]
        t[node] = t_of(p[node, 0], p[node, 1], p[node, 2], p[node, 3])
        # remove positions r and left (left < r)
        w = 0
        for k in range(m):
            if k == r or k == left:
                continue
            pos[w] = pos[k]
            nn_val[w] = nn_val[k]
            nn_part[w] = nn_part[k]
            w += 1
        m -= 2
        for k in range(m):
            if nn_part[k] == a or nn_part[k] == b:
                if k == 0:
                    nn_val[0] = _NEG_INF
                else:
                    nn_val[k], nn_part[k] = _best_left(p, t, pos, k, pos[k], c0)
                    evals += k
        pos[m] = node
        if m >= 1:
            nn_val[m], nn_part[m] = _best_left(p, t, pos, m, node, c0)
            evals += m
        else:
            nn_val[m] = _NEG_INF
            nn_part[m] = -1
        m += 1
    return history, steps, all_inf_step, evals


@register(
    "greedy",
    description="greedy agglomeration: merge the most likely pair first (reference tie rule)",
)
def greedy(jet: Jet | CostModel, likelihood: str = "symmetric") -> ClusteringResult:
    """Greedy maximum-likelihood clustering (the reference StandardHC greedy).

    A cost model (:class:`jetastar.costs.HCCCost`, :class:`~jetastar.costs.DasguptaCost`) is
    clustered by :func:`jetastar.clustering.cost_baselines.cost_greedy` instead (merge the cheapest
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
    history, steps, all_inf_step, evals = _greedy_kernel(leaves, consts)
    tree, ll = canonical_result(history, steps, n, jet=jet.label)
    status, message = "ok", ""
    if all_inf_step >= 0:
        status = "all_inf"
        message = (
            f"at merge {int(all_inf_step) + 1} of {n - 1} ({n - int(all_inf_step)} clusters left) "
            "every possible merge had log-likelihood -inf; the tree was completed by the reference "
            "tie rule and has log-likelihood -inf"
        )
    elif not math.isfinite(ll):
        status = "all_inf"
        message = "the greedy tree has log-likelihood -inf (its root split is impossible)"
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
