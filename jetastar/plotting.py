"""Pictures of jet trees with matplotlib.

* :func:`draw_tree` — a tree drawn as a dendrogram whose node heights are the invariant masses of the
  clusters (GeV) when a jet is given, or the split order otherwise; clusters shared with another tree
  can be coloured.
* :func:`compare_trees` — two trees of the same jet side by side (e.g. truth and MAP), shared
  clusters coloured in both.
* :func:`dendrogram` — scipy's dendrogram through :meth:`jetastar.Tree.to_linkage`.
* :func:`ginkgo_label` — the "Ginkgo simulation" label of the analysis figures.

Example:
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> from jetastar.ginkgo import ShowerParams, generate
    >>> from jetastar.plotting import draw_tree
    >>> jet = generate(1, ShowerParams.qcd(), seed=2)[0]
    >>> ax = draw_tree(jet.truth, jet)
    >>> ax.get_ylabel()
    'cluster mass [GeV]'
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .tree import Tree

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["compare_trees", "dendrogram", "draw_tree", "ginkgo_label", "node_heights"]

SHARED_COLOR = "tab:blue"
OTHER_COLOR = "tab:red"
PLAIN_COLOR = "0.25"


def _axes(ax: Axes | None) -> Axes:
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    _, ax = plt.subplots(figsize=(6, 4))
    return ax


def node_heights(tree: Tree, jet: Any = None, heights: str | Sequence[float] = "auto") -> np.ndarray:
    """Height of every node for drawing.

    Args:
        tree: the tree.
        jet: the :class:`jetastar.Jet` (needed for ``"mass"``).
        heights: ``"mass"`` (invariant mass of each cluster in GeV, leaves at 0), ``"order"``
            (leaves 0, a node one above its higher child), ``"auto"`` (mass when a jet is given),
            or an explicit array indexed by node.

    Returns:
        ``(2n − 1,)`` float64 heights; a parent is never below its children.
    """
    if not isinstance(heights, str):
        h = np.asarray(heights, dtype=np.float64)
        if h.shape != (tree.n_nodes,):
            raise ValueError(f"heights must have shape ({tree.n_nodes},), got {h.shape}")
        return h
    if heights == "auto":
        heights = "mass" if jet is not None else "order"
    ch = tree.children
    h = np.zeros(tree.n_nodes, dtype=np.float64)
    if heights == "mass":
        if jet is None:
            raise ValueError("heights='mass' needs the jet")
        p = tree.node_momenta(jet.leaves)
        t = p[:, 0] ** 2 - np.sum(p[:, 1:] ** 2, axis=1)
        h = np.sqrt(np.clip(t, 0.0, None))
        h[ch[:, 0] < 0] = 0.0
        # rounding can put a parent a hair below a child: keep the picture monotone
        for node in tree.postorder():
            if ch[node, 0] >= 0:
                h[node] = max(h[node], h[ch[node, 0]], h[ch[node, 1]])
        return h
    if heights == "order":
        for node in tree.postorder():
            if ch[node, 0] >= 0:
                h[node] = 1.0 + max(h[ch[node, 0]], h[ch[node, 1]])
        return h
    raise ValueError(f"unknown heights {heights!r}; valid: 'auto', 'mass', 'order' or an array")


def draw_tree(
    tree: Tree,
    jet: Any = None,
    *,
    ax: Axes | None = None,
    heights: str | Sequence[float] = "auto",
    compare_to: Tree | Iterable[Iterable[int]] | None = None,
    leaf_labels: Sequence[str] | None = None,
    title: str | None = None,
    linewidth: float = 1.6,
) -> Axes:
    """Draw a tree as a dendrogram.

    Args:
        tree: the :class:`jetastar.Tree` to draw.
        jet: its jet; node heights are then cluster masses (GeV) and leaves can show energies.
        ax: matplotlib axes to draw into (default: a new figure).
        heights: see :func:`node_heights`.
        compare_to: another tree (or a set of clusters); clusters of ``tree`` that it also has are
            drawn in blue, the others in red.
        leaf_labels: labels of the leaves by leaf index (default: the indices).
        title: axes title.
        linewidth: line width of the branches.

    Returns:
        The axes. The branches are one ``LineCollection`` (``ax.collections[0]``) with two
        segments per child edge.
    """
    from matplotlib.collections import LineCollection

    ax = _axes(ax)
    h = node_heights(tree, jet, heights)
    ch = tree.children
    sets = tree.leaf_sets()
    shared: set[frozenset[int]] | None = None
    if compare_to is not None:
        other = compare_to.clusters() if isinstance(compare_to, Tree) else compare_to
        shared = {frozenset(int(i) for i in c) for c in other}
    # x positions: leaves in drawing order, internal nodes centred over their children
    x = np.zeros(tree.n_nodes, dtype=np.float64)
    order: list[int] = []
    for node in tree.postorder():
        if ch[node, 0] < 0:
            x[node] = len(order)
            order.append(int(tree.leaf_of_node[node]))
        else:
            x[node] = 0.5 * (x[ch[node, 0]] + x[ch[node, 1]])
    segments, colors = [], []
    for node in tree.postorder():
        if ch[node, 0] < 0:
            continue
        if shared is None:
            color = PLAIN_COLOR
        else:
            color = SHARED_COLOR if sets[node] in shared else OTHER_COLOR
        for child in ch[node]:
            segments.append([(x[child], h[child]), (x[child], h[node])])
            segments.append([(x[child], h[node]), (x[node], h[node])])
            colors += [color, color]
    ax.add_collection(LineCollection(segments, colors=colors, linewidths=linewidth))
    ax.scatter(
        x[ch[:, 0] < 0], h[ch[:, 0] < 0], s=12, color=PLAIN_COLOR, zorder=3,
    )
    labels = [str(i) for i in order] if leaf_labels is None else [leaf_labels[i] for i in order]
    ax.set_xticks(np.arange(len(order)), labels)
    ax.set_xlim(-0.7, len(order) - 0.3)
    top = float(h.max()) if h.size else 1.0
    # headroom above the root for the legend and labels
    ax.set_ylim(-0.03 * top, 1.25 * top if top > 0 else 1.0)
    ax.set_xlabel("leaf")
    use_mass = (isinstance(heights, str) and heights in ("mass", "auto") and jet is not None)
    ax.set_ylabel("cluster mass [GeV]" if use_mass else "split order")
    if title is not None:
        ax.set_title(title)
    if shared is not None:
        from matplotlib.lines import Line2D

        n_shared = sum(1 for k in np.flatnonzero(ch[:, 0] >= 0) if sets[k] in shared)
        ax.legend(
            handles=[
                Line2D([], [], color=SHARED_COLOR, label=f"shared clusters ({n_shared})"),
                Line2D([], [], color=OTHER_COLOR,
                       label=f"other clusters ({tree.n_leaves - 1 - n_shared})"),
            ],
            loc="upper right", fontsize="small", frameon=False,
        )
    return ax


def compare_trees(
    tree_a: Tree,
    tree_b: Tree,
    jet: Any = None,
    *,
    titles: tuple[str, str] = ("truth", "MAP"),
    heights: str = "auto",
    figsize: tuple[float, float] = (11.0, 4.2),
) -> Figure:
    """Two trees of one jet side by side; clusters found in both are blue, the others red.

    Args:
        tree_a, tree_b: trees over the same leaves.
        jet: their jet (heights by cluster mass).
        titles: the two panel titles; the log-likelihoods are appended when a jet is given.
        heights: see :func:`node_heights`.
        figsize: figure size in inches.

    Returns:
        The matplotlib figure with two axes sharing the y axis.
    """
    import matplotlib.pyplot as plt

    if tree_a.n_leaves != tree_b.n_leaves:
        raise ValueError(
            f"the trees have different numbers of leaves ({tree_a.n_leaves}, {tree_b.n_leaves})"
        )
    fig, axes = plt.subplots(1, 2, figsize=figsize, sharey=True)
    for ax, tree, other, title in zip(
        axes, (tree_a, tree_b), (tree_b, tree_a), titles, strict=True
    ):
        if jet is not None:
            from .ginkgo.likelihood import log_likelihood

            title = f"{title}: log L = {log_likelihood(jet, tree):.3f}"
        draw_tree(tree, jet, ax=ax, heights=heights, compare_to=other, title=title)
    axes[1].set_ylabel("")
    fig.tight_layout()
    return fig


def dendrogram(tree: Tree, jet: Any = None, *, ax: Axes | None = None, **kwargs: Any) -> dict:
    """scipy's :func:`~scipy.cluster.hierarchy.dendrogram` of a tree.

    Args:
        tree: the tree.
        jet: optional jet: heights are then the cluster masses (GeV).
        ax: axes to draw into (default: a new figure).
        **kwargs: passed to scipy's dendrogram.

    Returns:
        scipy's dendrogram dictionary.
    """
    from scipy.cluster.hierarchy import dendrogram as scipy_dendrogram

    ax = _axes(ax)
    z = tree.to_linkage(node_heights(tree, jet) if jet is not None else None)
    out = scipy_dendrogram(z, ax=ax, **kwargs)
    ax.set_ylabel("cluster mass [GeV]" if jet is not None else "split order")
    return out


def ginkgo_label(ax: Axes, text: str = "simulation", loc: str = "upper left") -> None:
    """The label of jetastar's physics figures: **Ginkgo** *simulation* in the corner of ``ax``."""
    x, ha = (0.02, "left") if "left" in loc else (0.98, "right")
    y, va = (0.97, "top") if "upper" in loc else (0.03, "bottom")
    ax.text(
        x, y, r"$\bf{Ginkgo}$ $\it{" + text.replace(" ", r"\ ") + "}$",
        transform=ax.transAxes, ha=ha, va=va, fontsize="large",
    )
