from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.colors import to_rgba

from jetastar import InvalidTreeError, Tree
from jetastar.ginkgo import ShowerParams, generate
from jetastar.plotting import (
    OTHER_COLOR,
    SHARED_COLOR,
    compare_trees,
    dendrogram,
    draw_tree,
    ginkgo_label,
    node_heights,
)


@pytest.fixture(scope="module")
def jet():
    return generate(1, ShowerParams.qcd(), seed=11, min_leaves=7, max_leaves=9)[0]


def _png_shape(fig, path):
    fig.savefig(path, dpi=50)
    image = plt.imread(path)
    plt.close(fig)
    return image


def test_draw_tree_segments_heights_and_image(jet, tmp_path):
    ax = draw_tree(jet.truth, jet, title="truth")
    lines = ax.collections[0]
    segments = lines.get_segments()
    assert len(segments) == 4 * (jet.n_leaves - 1)  # two segments per child edge
    h = node_heights(jet.truth, jet)
    root_mass = np.sqrt(jet.params.t_root)
    assert abs(h[jet.truth.root] - root_mass) < 1e-6 * root_mass
    assert max(max(p[1] for p in seg) for seg in segments) == pytest.approx(h.max())
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert sorted(map(int, labels)) == list(range(jet.n_leaves))
    image = _png_shape(ax.figure, tmp_path / "tree.png")
    assert image.shape[0] > 50 and image.shape[1] > 50
    assert image[..., :3].std() > 0.05  # not blank


def test_heights_monotone_and_order_mode(jet):
    for mode in ("mass", "order"):
        h = node_heights(jet.truth, jet, mode)
        par = jet.truth.parents()
        kids = np.flatnonzero(par >= 0)
        assert np.all(h[par[kids]] >= h[kids])
    with pytest.raises(ValueError, match="needs the jet"):
        node_heights(jet.truth, None, "mass")
    with pytest.raises(ValueError, match="unknown heights"):
        node_heights(jet.truth, jet, "energy")


def test_shared_clusters_are_coloured(jet):
    truth = jet.truth
    # a caterpillar shares only the full set with most trees
    n = jet.n_leaves
    other = Tree.from_clusters([set(range(k, n)) for k in range(n - 1)], n)
    ax = draw_tree(truth, jet, compare_to=other)
    colors = ax.collections[0].get_colors()
    n_shared = len(truth.clusters() & other.clusters())
    blue = sum(1 for c in colors if np.allclose(c, to_rgba(SHARED_COLOR)))
    red = sum(1 for c in colors if np.allclose(c, to_rgba(OTHER_COLOR)))
    assert blue == 4 * n_shared and red == 4 * (n - 1 - n_shared)
    plt.close(ax.figure)
    ax = draw_tree(truth, jet, compare_to=truth)
    assert all(np.allclose(c, to_rgba(SHARED_COLOR)) for c in ax.collections[0].get_colors())
    plt.close(ax.figure)


def test_compare_trees_and_dendrogram(jet, tmp_path):
    n = jet.n_leaves
    other = Tree.from_clusters([set(range(k, n)) for k in range(n - 1)], n)
    fig = compare_trees(jet.truth, other, jet)
    assert len(fig.axes) == 2
    assert fig.axes[0].get_title().startswith("truth: log L = ")
    image = _png_shape(fig, tmp_path / "compare.png")
    assert image.shape[1] > image.shape[0]
    with pytest.raises(ValueError, match="different numbers of leaves"):
        compare_trees(jet.truth, Tree.from_nested((0, 1)))
    out = dendrogram(jet.truth, jet)
    assert sorted(int(i) for i in out["ivl"]) == list(range(n))
    ax = plt.gca()
    ginkgo_label(ax)
    assert any("Ginkgo" in t.get_text() for t in ax.texts)
    plt.close("all")


def test_clustering_results_are_drawn_by_their_trees(jet):
    import jetastar

    res = jetastar.cluster(jet, "greedy")
    by_result = draw_tree(res, jet, compare_to=jet.truth)
    by_tree = draw_tree(res.tree, jet, compare_to=jet.truth)
    np.testing.assert_array_equal(by_result.collections[0].get_segments(),
                                  by_tree.collections[0].get_segments())
    fig = compare_trees(jet.truth, res, jet)
    assert fig.axes[0].get_title().startswith("truth: log L = ")
    assert fig.axes[1].get_title().startswith("greedy: log L = ")
    assert sorted(int(i) for i in dendrogram(res)["ivl"]) == list(range(jet.n_leaves))
    plt.close("all")
    from jetastar.clustering import ClusteringResult

    no_tree = ClusteringResult(None, -np.inf, "trellis", status="skipped")
    with pytest.raises(InvalidTreeError, match=r"the trellis result has no tree .status 'skip"):
        draw_tree(no_tree)
    with pytest.raises(InvalidTreeError, match=r"must be a jetastar\.Tree, a clustering result"):
        draw_tree(3.5)
    # nested pairs are a tree too
    assert len(draw_tree(((0, 1), 2)).collections[0].get_segments()) == 8
    # the jet as one jet's particles (what jetastar.cluster took), read the same way
    p4 = np.asarray(jet.leaves)
    from_numbers = jetastar.cluster(p4, "greedy")
    np.testing.assert_array_equal(
        draw_tree(from_numbers, p4).collections[0].get_segments(),
        draw_tree(from_numbers, jetastar.Jet.from_particles(p4)).collections[0].get_segments())
    assert compare_trees(jet.truth, from_numbers, p4.tolist()).axes[1].get_title().startswith(
        "greedy: log L = ")
    # issue 61 point 3: two trees that are neither the truth nor results are not called so
    beam = jetastar.cluster(jet, "beam").tree
    titles = [ax.get_title() for ax in compare_trees(beam, res.tree, jet).axes]
    assert titles[0].startswith("tree A: log L = ") and titles[1].startswith("tree B: log L = ")
    titles = [ax.get_title() for ax in compare_trees(beam, res, jet, titles=("x", "y")).axes]
    assert titles[0].startswith("x: ") and titles[1].startswith("y: ")
    plt.close("all")
