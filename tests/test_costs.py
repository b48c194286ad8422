from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.sparse as sp
from helpers.bruteforce import all_nested
from helpers.refdata import DATA

from jetastar import Tree
from jetastar.costs import (
    DasguptaCost,
    HCCCost,
    affinities_from_points,
    merge_cost_kernel,
    parent_cost_terms,
    part_value_kernel,
    split_cost_given_parent,
    split_cost_kernel,
)


def _slow_split_cost(kind: str, w: np.ndarray, a: list[int], b: list[int]) -> float:
    """Direct definitions (paper §6 and appendix), pair by pair."""
    if kind == "hcc":
        cut = sum(w[i, j] for i in a for j in b if w[i, j] > 0)
        kept = sum(abs(w[i, j]) for part in (a, b) for i, j in itertools.combinations(part, 2)
                   if w[i, j] < 0)
        return cut + kept
    return (len(a) + len(b)) * sum(w[i, j] for i in a for j in b)


def _random_graph(n: int, seed: int, signed: bool) -> np.ndarray:
    rng = np.random.default_rng(seed)
    w = rng.normal(size=(n, n)) if signed else rng.random((n, n))
    w = np.triu(w, 1)
    return w + w.T


@pytest.mark.parametrize(("cls", "kind", "signed"), [(HCCCost, "hcc", True),
                                                      (DasguptaCost, "dasgupta", False)])
def test_split_and_tree_costs_match_definitions(cls, kind, signed):
    w = _random_graph(7, 1, signed)
    model = cls(w)
    rng = np.random.default_rng(2)
    for _ in range(50):
        perm = rng.permutation(7)
        k = int(rng.integers(1, 7))
        a, b = sorted(perm[:k]), sorted(perm[k:])
        assert model.split_cost(a, b) == pytest.approx(_slow_split_cost(kind, w, a, b), abs=1e-12)
    for nested in itertools.islice(all_nested(tuple(range(7))), 0, 10395, 97):
        tree = Tree.from_nested(nested)
        expected = 0.0
        for k in np.flatnonzero(tree.children[:, 0] >= 0):
            left, right = (sorted(tree.leaf_sets()[c]) for c in tree.children[k])
            expected += _slow_split_cost(kind, w, left, right)
        assert model.tree_cost(tree) == pytest.approx(expected, abs=1e-10)


@pytest.mark.parametrize(("cls", "signed"), [(HCCCost, True), (DasguptaCost, False)])
def test_heuristics_are_admissible_on_every_subset(cls, signed):
    """h(S) <= the cheapest hierarchy over S, by brute force over all hierarchies, n = 6."""
    for seed in range(4):
        w = _random_graph(6, seed, signed)
        model = cls(w)
        for size in range(1, 7):
            for subset in itertools.combinations(range(6), size):
                best = min(
                    _nested_cost(model, nested) for nested in all_nested(tuple(subset))
                )
                assert model.heuristic(subset) <= best + 1e-12


def _nested_cost(model, nested) -> float:
    if isinstance(nested, int):
        return 0.0
    left, right = nested
    return (model.split_cost(list(_leaves(left)), list(_leaves(right)))
            + _nested_cost(model, left) + _nested_cost(model, right))


def _leaves(nested):
    if isinstance(nested, int):
        yield nested
    else:
        for x in nested:
            yield from _leaves(x)


def test_all_subset_features_match_direct_sums():
    w = _random_graph(9, 5, True)
    model = HCCCost(w)
    every = model.all_subset_features()
    masks = np.arange(1 << 9, dtype=np.int64)
    assert np.allclose(every, model.features(masks), atol=1e-12)
    assert every[(1 << 9) - 1, 3] == 9


def test_inputs_sparse_points_and_aloi():
    w = _random_graph(5, 3, True)
    assert np.array_equal(HCCCost(sp.csr_matrix(w)).weights, HCCCost(w).weights)
    with np.load(DATA / "aloi_hcc_samples.npz") as data:
        x = data["n11_s0_features"]
        ref = data["n11_s0_weights"]
    from_points = HCCCost.from_points(x)
    # the shipped weights are cosine similarity minus its mean
    off = ~np.eye(11, dtype=bool)
    assert np.allclose(from_points.weights[off], ref[off], atol=1e-6)  # ref is float32
    a = affinities_from_points(x, subtract_mean=False)
    assert np.allclose(np.diag(a), 0) and a.max() <= 1 + 1e-12


@pytest.mark.parametrize(
    ("w", "match"),
    [
        (np.zeros((3, 2)), "square"),
        (np.array([[0, 1], [2, 0]]), "symmetric"),
        (np.array([[0, np.nan], [np.nan, 0]]), "non-finite"),
        ([["a"]], "numbers"),
    ],
)
def test_bad_matrices(w, match):
    with pytest.raises(ValueError, match=match):
        HCCCost(w)


def test_dasgupta_needs_nonnegative_and_split_checks():
    with pytest.raises(ValueError, match="non-negative"):
        DasguptaCost(np.array([[0, -1], [-1, 0]]))
    model = HCCCost(_random_graph(4, 0, True))
    with pytest.raises(ValueError, match="disjoint"):
        model.split_cost([0, 1], [1, 2])
    with pytest.raises(ValueError, match="out of range"):
        model.split_cost([0, 7], [1])
    with pytest.raises(ValueError, match="3 leaves, expected 4"):
        model.tree_cost(Tree.from_nested(((0, 1), 2)))
    with pytest.raises(ValueError, match="zero"):
        affinities_from_points(np.zeros((3, 2)))


@pytest.mark.parametrize(("cls", "signed"), [(HCCCost, True), (DasguptaCost, False)])
def test_parent_and_cross_forms_equal_the_definition(cls, signed):
    """The trellis' parent form and the greedy's cross form give split_cost_kernel's value."""
    w = _random_graph(9, 8, signed)
    model = cls(w)
    feats = model.all_subset_features()
    rng = np.random.default_rng(3)
    for _ in range(200):
        s = int(rng.integers(3, 1 << 9))
        if bin(s).count("1") < 2:
            continue
        members = [i for i in range(9) if s >> i & 1]
        k = int(rng.integers(1, len(members)))
        a = sum(1 << i for i in members[:k])
        b = s ^ a
        ref = split_cost_kernel(model.code, feats[a], feats[b], feats[s])
        alpha, gamma = parent_cost_terms(model.code, feats[s])
        parent = split_cost_given_parent(
            model.code, part_value_kernel(model.code, feats[a]),
            part_value_kernel(model.code, feats[b]), alpha, gamma,
        )
        ia, ib = members[:k], members[k:]
        cross = w[np.ix_(ia, ib)]
        merge = merge_cost_kernel(model.code, feats[a], feats[b], float(np.maximum(cross, 0).sum()),
                                  float(-np.minimum(cross, 0).sum()))
        assert parent == pytest.approx(ref, rel=1e-12, abs=1e-12)
        assert merge == pytest.approx(ref, rel=1e-12, abs=1e-12)
        assert ref == pytest.approx(_slow_split_cost(model.name, w, ia, ib), rel=1e-12, abs=1e-12)
    # exact zeros stay zero in the cross form (HCC: no positive edge cut, no negative edge inside)
    if cls is HCCCost:
        z = HCCCost(np.array([[0, -1.0, -2.0], [-1.0, 0, -0.5], [-2.0, -0.5, 0]]))
        f = z.features([1, 2])
        assert merge_cost_kernel(z.code, f[0], f[1], 0.0, 1.0) == 0.0


def test_heuristics_vectorised():
    model = DasguptaCost(_random_graph(6, 2, False))
    masks = np.arange(64, dtype=np.int64)
    assert np.array_equal(model.heuristics(masks), [model.heuristic(int(m)) for m in masks])


def test_float32_rounding_asymmetry_is_averaged_away():
    with np.load(DATA / "aloi_hcc_samples.npz") as data:
        w = data["n40_s0_weights"]  # computed in float32: w[i, j] and w[j, i] differ by ~4e-7
    assert 0 < np.abs(w - w.T).max() < 1e-6
    model = HCCCost(w)
    assert np.array_equal(model.weights, model.weights.T)
    assert np.allclose(model.weights, w, atol=1e-6)
    w2 = _random_graph(4, 1, True)
    w2[0, 1] += 1e-5
    with pytest.raises(ValueError, match="symmetric"):
        HCCCost(w2)


@pytest.mark.parametrize(("cls", "signed"), [(HCCCost, True), (DasguptaCost, False)])
def test_tree_cost_beyond_bitmasks(cls, signed):
    """tree_cost works for any n (no 62-point bitmask limit): random merge tree over 80 points."""
    n = 80
    w = _random_graph(n, 6, signed)
    rng = np.random.default_rng(4)
    active = list(range(n))
    children = np.full((2 * n - 1, 2), -1, dtype=np.int64)
    for k in range(n - 1):
        i, j = sorted(rng.choice(len(active), size=2, replace=False), reverse=True)
        children[n + k] = (active.pop(i), active.pop(j))
        active.append(n + k)
    leaf_of_node = np.full(2 * n - 1, -1, dtype=np.int64)
    leaf_of_node[:n] = np.arange(n)
    tree = Tree(children, leaf_of_node)
    sets = tree.leaf_sets()
    expected = sum(
        _slow_split_cost(cls.name, w, sorted(sets[a]), sorted(sets[b]))
        for a, b in children[n:]
    )
    assert cls(w).tree_cost(tree) == pytest.approx(expected, rel=1e-10)
