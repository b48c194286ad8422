"""Baselines for hierarchical-clustering cost models: greedy on the split cost, and average linkage.

Two different "greedy" baselines exist for the costs of :mod:`jetastar.costs`:

* :func:`cost_greedy` (also reached as ``greedy(cost_model)``) agglomerates on the cost itself: at
  every step it merges the pair of current clusters whose merge (the new node's split) costs least.
  Ties go to the first pair in index order: clusters are numbered like tree nodes (points
  ``0 .. n-1``, the cluster made at merge ``k`` is ``n + k``) and the pair ``(i, j)``, ``i < j``,
  that comes first lexicographically wins. This rule is myopic for both costs here: merging two
  dissimilar points is free *now* (HCC: no positive edge is cut; Dasgupta: no weight is cut) but
  their negative edge (HCC) or the weight left for later (Dasgupta) is charged higher up, so its
  trees are usually far from optimal. It is the natural lower-quality bound of the family.
* :func:`average_linkage` is classic average-linkage HAC on the distances ``max(W) − W``
  (:func:`scipy.cluster.hierarchy.linkage`, ``method="average"``): merge the most similar clusters
  first. The public reference code seeds its approximate A* for correlation clustering with an
  average-linkage tree, so this is the "greedy" baseline of the paper's HCC benchmark figure.

Both return a :class:`ClusteringResult` scored with the model (``cost`` = the tree's cost,
``likelihood`` = the cost's name, ``jet_id=None``).

:func:`cost_greedy` runs in O(n²) memory (two cluster-by-cluster matrices of the positive and
|negative| weight between clusters, updated Lance–Williams style on every merge: the row of a merged
cluster is the sum of its parts' rows) and in O(n²) time in the typical case (every cluster keeps its
best partner among the clusters after it; only clusters whose partner was merged rescan).

Example:
    >>> import numpy as np
    >>> from jetastar.costs import HCCCost
    >>> W = np.array([[0, 3, -1, -1], [3, 0, -1, -1], [-1, -1, 0, 2], [-1, -1, 2, 0]])
    >>> average_linkage(HCCCost(W)).tree.to_nested()
    ((0, 1), (2, 3))
    >>> cost_greedy(HCCCost(W)).cost >= average_linkage(HCCCost(W)).cost
    True
"""

from __future__ import annotations

import math
from typing import Any

import numba as nb
import numpy as np

from ..._jit import Stopwatch
from ...costs import CostModel, merge_cost_kernel
from ...errors import InvalidJetError
from ...tree import Tree
from ..result import ClusteringResult

__all__ = ["average_linkage", "cost_greedy"]

_INF = math.inf


def _check_model(model: Any, algorithm: str) -> CostModel:
    if not isinstance(model, CostModel):
        raise InvalidJetError(
            f"{algorithm} needs a cost model (jetastar.costs.HCCCost, DasguptaCost), got "
            f"{type(model).__name__}", field="cost_model",
        )
    return model


@nb.njit(cache=True)
def _pair_cost(code, feat, ids, xp, xn, sa, sb):  # pragma: no cover - numba
    """Merge cost of the clusters in slots ``sa`` and ``sb``."""
    return merge_cost_kernel(code, feat[ids[sa]], feat[ids[sb]], xp[sa, sb], xn[sa, sb])


@nb.njit(cache=True)
def _best_after(code, feat, ids, xp, xn, order, m, p):  # pragma: no cover - numba
    """First minimum over positions ``p+1 .. m-1`` of the merge cost with ``order[p]``."""
    best = _INF
    best_q = -1
    sa = order[p]
    for q in range(p + 1, m):
        v = _pair_cost(code, feat, ids, xp, xn, sa, order[q])
        if v < best:
            best = v
            best_q = q
    return best, best_q


@nb.njit(cache=True)
def _cost_greedy_kernel(code, pos, neg):  # pragma: no cover - numba
    """Greedy agglomeration on the merge cost. Returns (history, merge costs, cost evaluations).

    Slots ``0 .. n-1`` hold the clusters (a merged cluster takes its first part's slot);
    ``order[:m]`` lists the active slots by node id; ``nn_val[p]`` / ``nn_pos[p]`` is the best
    partner of ``order[p]`` among ``order[p+1:m]`` (first minimum).
    """
    n = pos.shape[0]
    xp = pos.copy()
    xn = neg.copy()
    feat = np.zeros((2 * n - 1, 4), dtype=np.float64)
    ids = np.empty(n, dtype=np.int64)  # node id in each slot
    order = np.empty(n, dtype=np.int64)
    nn_val = np.full(n, _INF, dtype=np.float64)
    nn_slot = np.full(n, -1, dtype=np.int64)
    for i in range(n):
        feat[i, 3] = 1.0
        ids[i] = i
        order[i] = i
    evals = 0
    m = n
    for p in range(m - 1):
        v, q = _best_after(code, feat, ids, xp, xn, order, m, p)
        nn_val[p] = v
        nn_slot[p] = order[q]
        evals += m - 1 - p
    history = np.empty((n - 1, 2), dtype=np.int64)
    costs = np.empty(n - 1, dtype=np.float64)
    for step in range(n - 1):
        r = 0
        for p in range(1, m - 1):
            if nn_val[p] < nn_val[r]:
                r = p
        sa = order[r]
        sb = nn_slot[r]
        a = ids[sa]
        b = ids[sb]
        node = n + step
        history[step, 0] = a
        history[step, 1] = b
        costs[step] = nn_val[r]
        pc = xp[sa, sb]
        nc = xn[sa, sb]
        feat[node, 0] = feat[a, 0] + feat[b, 0] + pc
        feat[node, 1] = feat[a, 1] + feat[b, 1] + nc
        feat[node, 2] = feat[a, 2] + feat[b, 2] + (pc - nc)
        feat[node, 3] = feat[a, 3] + feat[b, 3]
        # Lance-Williams: the merged cluster's cross sums are the sums of its parts'
        for k in range(m):
            sk = order[k]
            if sk == sa or sk == sb:
                continue
            xp[sa, sk] += xp[sb, sk]
            xp[sk, sa] = xp[sa, sk]
            xn[sa, sk] += xn[sb, sk]
            xn[sk, sa] = xn[sa, sk]
        ids[sa] = node
        # drop both parts from the order (keeping the others' nn entries), append the new cluster
        w = 0
        for k in range(m):
            sk = order[k]
            if sk == sa or sk == sb:
                continue
            order[w] = sk
            nn_val[w] = nn_val[k]
            nn_slot[w] = nn_slot[k]
            w += 1
        m -= 1
        order[m - 1] = sa
        nn_val[m - 1] = _INF
        nn_slot[m - 1] = -1
        for p in range(m - 1):
            if nn_slot[p] == sa or nn_slot[p] == sb:
                v, q = _best_after(code, feat, ids, xp, xn, order, m, p)
                nn_val[p] = v
                nn_slot[p] = order[q]
                evals += m - 1 - p
            else:
                v = _pair_cost(code, feat, ids, xp, xn, order[p], sa)
                evals += 1
                if v < nn_val[p]:  # strictly: on a tie the earlier partner stays
                    nn_val[p] = v
                    nn_slot[p] = sa
    return history, costs, evals


def _tree_of_history(history: np.ndarray, n: int, label: str) -> Tree:
    children = np.full((2 * n - 1, 2), -1, dtype=np.int64)
    children[n:] = history
    leaf_of_node = np.full(2 * n - 1, -1, dtype=np.int64)
    leaf_of_node[:n] = np.arange(n)
    return Tree(children, leaf_of_node, jet=label)


def cost_greedy(cost_model: CostModel) -> ClusteringResult:
    """Greedy agglomeration on a cost model: merge the cheapest pair first (see the module doc).

    Args:
        cost_model: a :class:`jetastar.costs.HCCCost` or :class:`jetastar.costs.DasguptaCost`.

    Returns:
        :class:`ClusteringResult` with ``algorithm="greedy"``, ``log_likelihood = -cost`` (the
        tree's :meth:`~jetastar.costs.CostModel.tree_cost`), ``likelihood`` = the cost's name, and
        ``stats`` with ``merge_costs_evaluated`` and ``time_s``.

    Raises:
        InvalidJetError: ``cost_model`` is not a cost model.

    Example:
        >>> import numpy as np
        >>> from jetastar.costs import DasguptaCost
        >>> res = cost_greedy(DasguptaCost(np.ones((4, 4))))  # (0,1): 2, (2,3): 2, root: 4·4
        >>> res.algorithm, res.cost
        ('greedy', 20.0)
    """
    watch = Stopwatch()
    model = _check_model(cost_model, "greedy")
    n = model.n_points
    history, _, evals = _cost_greedy_kernel(
        np.int64(model.code), np.ascontiguousarray(model.positive_weights),
        np.ascontiguousarray(model.negative_weights),
    )
    tree = _tree_of_history(history, n, model.label)
    return _result(model, tree, "greedy", {"merge_costs_evaluated": int(evals)}, watch)


def average_linkage(cost_model: CostModel) -> ClusteringResult:
    """Average-linkage HAC on the distances ``max(W) − W``, scored with the cost model.

    The most similar clusters (highest mean affinity between them) merge first; the result does not
    depend on the cost (only on ``W``), the cost only scores the tree. Ties follow
    :func:`scipy.cluster.hierarchy.linkage`.

    Args:
        cost_model: a :class:`jetastar.costs.HCCCost` or :class:`jetastar.costs.DasguptaCost`.

    Returns:
        :class:`ClusteringResult` with ``algorithm="average_linkage"``, ``log_likelihood = -cost``
        and ``likelihood`` = the cost's name.

    Raises:
        InvalidJetError: ``cost_model`` is not a cost model.

    Example:
        >>> import numpy as np
        >>> from jetastar.costs import HCCCost
        >>> W = np.array([[0, 1, -2], [1, 0, -1], [-2, -1, 0]])
        >>> res = average_linkage(HCCCost(W))
        >>> res.tree == Tree.from_nested(((0, 1), 2)), res.cost
        (True, 1.0)
    """
    from scipy.cluster.hierarchy import linkage

    watch = Stopwatch()
    model = _check_model(cost_model, "average_linkage")
    n = model.n_points
    if n == 1:
        tree = Tree.from_nested(0, jet=model.label)
    else:
        w = model.weights
        upper = w[np.triu_indices(n, 1)]
        z = linkage(upper.max() - upper, method="average")
        tree = Tree.from_linkage(z, jet=model.label)
    return _result(model, tree, "average_linkage", {}, watch)


def _result(
    model: CostModel, tree: Tree, algorithm: str, stats: dict[str, Any], watch: Stopwatch
) -> ClusteringResult:
    cost = model.tree_cost(tree)
    stats["time_s"] = watch.seconds()
    return ClusteringResult(
        tree=tree,
        log_likelihood=-cost,
        algorithm=algorithm,
        likelihood=model.name,
        options={},
        stats=stats,
        jet_id=None,
    )
