from __future__ import annotations

import numpy as np
import pytest
from helpers.bruteforce import all_nested, double_factorial_trees
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.cluster.hierarchy import dendrogram, to_tree

from jetastar import InvalidTreeError, Tree


def random_nested(rng: np.random.Generator, leaves: list[int]):
    if len(leaves) == 1:
        return leaves[0]
    rng.shuffle(leaves)
    k = int(rng.integers(1, len(leaves)))
    return (random_nested(rng, leaves[:k]), random_nested(rng, leaves[k:]))


@st.composite
def trees(draw, max_leaves: int = 12) -> Tree:
    n = draw(st.integers(1, max_leaves))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    return Tree.from_nested(random_nested(rng, list(range(n))))


def test_from_nested_clusters_and_equality():
    t = Tree.from_nested(((0, 3), (1, 2)))
    assert t.n_leaves == 4
    assert t.n_nodes == 7
    assert t.clusters() == {frozenset({0, 1, 2, 3}), frozenset({0, 3}), frozenset({1, 2})}
    assert t == Tree.from_nested(((2, 1), (3, 0)))
    assert t != Tree.from_nested(((0, 1), (2, 3)))
    assert hash(t) == hash(Tree.from_nested([[1, 2], [0, 3]]))
    assert t.to_nested() == ((0, 3), (1, 2))


def test_single_leaf_tree():
    t = Tree.from_nested(0)
    assert t.n_leaves == 1 and t.clusters() == frozenset()
    assert t.to_nested() == 0


def test_children_array_with_leaf_map_and_default_leaf_order():
    # pre-order generator layout: root 0 -> (1, 4); 1 -> (2, 3)
    children = [[1, 4], [2, 3], [-1, -1], [-1, -1], [-1, -1]]
    t = Tree.from_children(children)
    assert t.to_nested() == ((0, 1), 2)
    t2 = Tree.from_children(children, [-1, -1, 2, 0, 1])
    assert t2.to_nested() == ((2, 0), 1)
    assert t2.root == 0


def test_any_node_order_and_canonical_form():
    a = Tree.from_children([[-1, -1], [0, 2], [-1, -1], [1, 4], [-1, -1]], [0, -1, 1, -1, 2])
    assert a.root == 3
    c = a.canonical()
    assert c == a
    assert np.array_equal(c.leaf_of_node[:3], [0, 1, 2])
    assert c.root == c.n_nodes - 1
    # canonical is unique: a relabelled copy has the same arrays
    b = Tree.from_nested((2, (1, 0)))
    assert np.array_equal(b.canonical().children, c.children)


@settings(max_examples=60, deadline=None)
@given(trees())
def test_round_trips(tree: Tree):
    assert Tree.from_nested(tree.to_nested()) == tree
    assert Tree.from_parents(tree.parents(), tree.leaf_of_node) == tree
    assert Tree.from_clusters(tree.clusters(), tree.n_leaves) == tree
    canon = tree.canonical()
    assert canon == tree
    assert np.array_equal(canon.canonical().children, canon.children)
    if tree.n_leaves >= 2:
        z = tree.to_linkage()
        assert Tree.from_linkage(z) == tree
        # scipy accepts it as a valid linkage and draws every leaf once
        assert sorted(int(x) for x in dendrogram(z, no_plot=True)["ivl"]) == list(
            range(tree.n_leaves)
        )
        assert to_tree(z).get_count() == tree.n_leaves


@settings(max_examples=40, deadline=None)
@given(trees(max_leaves=10))
def test_node_quantities(tree: Tree):
    n = tree.n_leaves
    rng = np.random.default_rng(n)
    leaves = rng.random((n, 4))
    mom = tree.node_momenta(leaves)
    assert np.allclose(mom[tree.root], leaves.sum(axis=0))
    sets = tree.leaf_sets()
    for k in range(tree.n_nodes):
        assert np.allclose(mom[k], leaves[sorted(sets[k])].sum(axis=0))
    masks = tree.node_masks()
    for k in range(tree.n_nodes):
        assert masks[k] == sum(1 << i for i in sets[k])
    depth = tree.depths()
    par = tree.parents()
    assert depth[tree.root] == 0
    for k in range(tree.n_nodes):
        if par[k] >= 0:
            assert depth[k] == depth[par[k]] + 1
    post = list(tree.postorder())
    assert post[-1] == tree.root
    for k in range(tree.n_nodes):
        if par[k] >= 0:
            assert post.index(k) < post.index(par[k])


def test_number_of_distinct_trees():
    for n in range(1, 7):
        found = {Tree.from_nested(t) for t in all_nested(tuple(range(n)))}
        assert len(found) == double_factorial_trees(n)


def test_linkage_with_heights():
    t = Tree.from_nested(((0, 1), 2))
    heights = np.zeros(t.n_nodes)
    internal = np.flatnonzero(~t.is_leaf())
    for k in internal:
        heights[k] = len(t.leaf_sets()[k])
    z = t.to_linkage(heights)
    assert list(z[:, 2]) == [2.0, 3.0]
    bad = heights.copy()
    bad[t.root] = 0.5
    with pytest.raises(ValueError, match="decrease"):
        t.to_linkage(bad)


@pytest.mark.parametrize(
    ("children", "leaf_of_node", "match"),
    [
        ([[1, 2], [-1, -1]], None, "shape"),
        ([[1, 2], [-1, 5], [-1, -1]], None, "two children or none"),
        ([[1, 1], [-1, -1], [-1, -1]], None, "same child twice"),
        ([[1, 7], [-1, -1], [-1, -1]], None, "out of range"),
        ([[1, 2], [0, 3], [-1, -1], [-1, -1], [-1, -1]], None, "root|parent"),
        ([[1, 2], [3, 4], [-1, -1], [-1, -1], [1, 2]], None, "leaves"),
        ([[1, 2], [-1, -1], [-1, -1]], [-1, 0, 0], "each exactly once"),
        ([[1, 2], [-1, -1], [-1, -1]], [0, 0, 1], "internal nodes"),
        ([[1.5, 2], [-1, -1], [-1, -1]], None, "integers"),
    ],
)
def test_invalid_children(children, leaf_of_node, match):
    with pytest.raises(InvalidTreeError, match=match) as info:
        Tree.from_children(children, leaf_of_node, jet=17)
    assert "jet 17" in str(info.value)
    assert isinstance(info.value, ValueError)


def test_invalid_nested_and_clusters():
    with pytest.raises(InvalidTreeError, match="pairs"):
        Tree.from_nested((0, 1, 2))
    with pytest.raises(InvalidTreeError, match="each exactly once"):
        Tree.from_nested((0, (0, 1)))
    with pytest.raises(InvalidTreeError, match="all leaves"):
        Tree.from_clusters([{0, 1}], 3)
    with pytest.raises(InvalidTreeError, match="not split"):
        Tree.from_clusters([{0, 1, 2, 3}, {0, 1}, {1, 2}], 4)
    with pytest.raises(InvalidTreeError):
        Tree.from_parents([-1, 0, 0, 0])


def test_pickle_round_trip():
    import pickle

    t = Tree.from_nested(((0, 3), (1, (2, 4))))
    assert pickle.loads(pickle.dumps(t)) == t


def test_trusted_constructor_equals_validated():
    t = Tree.from_nested(((0, 3), (1, (2, 4))))
    fast = Tree._trusted(t.children.copy(), t.leaf_of_node.copy(), t.root)
    assert fast == t and fast.to_nested() == t.to_nested()
    assert not fast.children.flags.writeable
