"""Tests of the cost-model baselines: greedy on the split cost and average linkage.

The numba greedy is compared with a plain O(n^3)-per-step Python greedy written from the definition
(same tie rule: first pair in node-id order), both with exact integer weights (many exact ties) and
with real-valued ones; average linkage with a plain Python average linkage; both are checked to be
no better than the exact trellis.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from helpers.refdata import DATA

from jetastar import Tree
from jetastar.clustering import average_linkage, cluster, cost_greedy, exact_trellis, greedy
from jetastar.costs import DasguptaCost, HCCCost
from jetastar.errors import InvalidJetError


def _random_graph(n: int, seed: int, kind: str) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if kind == "signed":
        w = rng.normal(size=(n, n))
    elif kind == "positive":
        w = rng.random((n, n))
    elif kind == "int_signed":
        w = rng.integers(-2, 3, size=(n, n)).astype(float)
    else:  # int_positive
        w = rng.integers(0, 3, size=(n, n)).astype(float)
    w = np.triu(w, 1)
    return w + w.T


def _direct_cost(name: str, w: np.ndarray, a: list[int], b: list[int]) -> float:
    """Merge cost of clusters a and b from the definitions, pair by pair."""
    if name == "hcc":
        cut = sum(max(w[i, j], 0.0) for i in a for j in b)
        kept = sum(-min(w[i, j], 0.0) for part in (a, b) for i, j in itertools.combinations(part, 2))
        return cut + kept
    return (len(a) + len(b)) * sum(w[i, j] for i in a for j in b)


def _python_greedy(model) -> Tree:
    """Plain greedy: at every step score every pair of current clusters (node-id order), merge the
    first cheapest one."""
    w = model.weights
    n = model.n_points
    clusters = {i: [i] for i in range(n)}
    children = np.full((2 * n - 1, 2), -1, dtype=np.int64)
    for step in range(n - 1):
        ids = sorted(clusters)
        best, pair = np.inf, None
        for i, j in itertools.combinations(ids, 2):
            c = _direct_cost(model.name, w, clusters[i], clusters[j])
            if c < best:
                best, pair = c, (i, j)
        assert pair is not None
        i, j = pair
        children[n + step] = pair
        clusters[n + step] = clusters.pop(i) + clusters.pop(j)
    leaf_of_node = np.full(2 * n - 1, -1, dtype=np.int64)
    leaf_of_node[:n] = np.arange(n)
    return Tree(children, leaf_of_node)


def _python_average_linkage(w: np.ndarray) -> Tree:
    """Merge the pair of clusters with the highest mean affinity (no ties with real weights)."""
    n = w.shape[0]
    clusters = {i: [i] for i in range(n)}
    found = []
    for step in range(n - 1):
        pair = max(itertools.combinations(sorted(clusters), 2),
                   key=lambda p: w[np.ix_(clusters[p[0]], clusters[p[1]])].mean())
        clusters[n + step] = clusters.pop(pair[0]) + clusters.pop(pair[1])
        found.append(clusters[n + step])
    return Tree.from_clusters(found, n)


CASES = [(HCCCost, "signed"), (HCCCost, "int_signed"), (DasguptaCost, "positive"),
         (DasguptaCost, "int_positive")]


@pytest.mark.parametrize(("cls", "kind"), CASES, ids=[f"{c.name}-{k}" for c, k in CASES])
def test_greedy_matches_plain_python_greedy(cls, kind):
    for n, seed in ((3, 0), (5, 1), (8, 2), (13, 3), (25, 4)):
        model = cls(_random_graph(n, seed, kind))
        res = greedy(model)
        assert res.tree == _python_greedy(model), (n, seed)
        assert res.cost == pytest.approx(model.tree_cost(res.tree), rel=1e-12)
        assert (res.algorithm, res.exact, res.likelihood, res.jet_id) == (
            "greedy", False, cls.name, None)
        assert res.stats["merge_costs_evaluated"] >= n - 1 and "time_s" in res.stats
    # all-equal weights: (0,1) and (2,3) cost 2 each, then 4 joins {0,1} (cost 6, tied with {2,3},
    # first in node-id order), and the last merge costs 5 * 6
    flat = cost_greedy(DasguptaCost(np.ones((5, 5))))
    assert flat.tree == Tree.from_nested(((4, (0, 1)), (2, 3)))
    assert flat.cost == 2 + 2 + 6 + 30


def test_greedy_on_aloi_matches_plain_python_greedy():
    with np.load(DATA / "aloi_hcc_samples.npz") as data:
        w = data["n30_s0_weights"]
    model = HCCCost(w)
    assert greedy(model).tree == _python_greedy(model)


def test_average_linkage_matches_plain_python():
    for cls, kind in ((HCCCost, "signed"), (DasguptaCost, "positive")):
        for n, seed in ((4, 0), (9, 1), (20, 2)):
            model = cls(_random_graph(n, seed, kind))
            res = average_linkage(model)
            assert res.tree == _python_average_linkage(model.weights)
            assert res.cost == model.tree_cost(res.tree)
            assert (res.algorithm, res.likelihood, res.exact) == ("average_linkage", cls.name, False)


def test_baselines_are_never_better_than_exact():
    graphs = [HCCCost(_random_graph(n, 10 + n, "signed")) for n in (4, 7, 10)]
    graphs += [DasguptaCost(_random_graph(n, 20 + n, "positive")) for n in (4, 7, 10)]
    with np.load(DATA / "aloi_hcc_samples.npz") as data:
        graphs += [HCCCost(data[f"n{n}_s{s}_weights"]) for n in (11, 12) for s in range(10)]
    for model in graphs:
        exact = exact_trellis(model).cost
        tol = 1e-9 * max(1.0, abs(exact))
        assert greedy(model).cost >= exact - tol
        assert average_linkage(model).cost >= exact - tol


def test_one_and_two_points():
    for fn in (greedy, average_linkage):
        one = fn(HCCCost(np.zeros((1, 1))))
        assert one.tree.n_leaves == 1 and one.cost == 0.0
        two = fn(DasguptaCost(np.array([[0.0, 3.0], [3.0, 0.0]])))
        assert two.tree == Tree.from_nested((0, 1)) and two.cost == 6.0


def test_bad_input():
    model = HCCCost(_random_graph(4, 0, "signed"))
    with pytest.raises(ValueError, match="no likelihood option"):
        greedy(model, likelihood="legacy")
    with pytest.raises(InvalidJetError, match="needs a cost model"):
        average_linkage(np.zeros((3, 3)))  # type: ignore[arg-type]
    with pytest.raises(InvalidJetError, match="needs a cost model"):
        cost_greedy(np.zeros((3, 3)))  # type: ignore[arg-type]
    with pytest.raises(InvalidJetError, match=r"needs a jetastar\.Jet"):
        greedy(np.zeros((3, 3)))  # type: ignore[arg-type]
    # the registry still dispatches jets by name; the cost baselines are not registered
    with pytest.raises(ValueError, match="unknown algorithm"):
        cluster(model, "average_linkage")
