"""Pictures of jet trees with matplotlib.

* :func:`draw_tree` — a tree drawn as a dendrogram whose node heights are the invariant masses of the
  clusters (GeV) when a jet is given, or the split order otherwise; clusters shared with another tree
  can be coloured.
* :func:`compare_trees` — two trees of the same jet side by side (e.g. truth and MAP), shared
  clusters coloured in both.
* :func:`dendrogram` — scipy's dendrogram through :meth:`jetastar.Tree.to_linkage`.
* :func:`ginkgo_label` — the "Ginkgo simulation" label of the analysis figures.
* :func:`plot_comparison` — the algorithm comparison of :mod:`jetastar.comparison`.

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

import math
import os
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .ginkgo.likelihood import log_likelihood
from .jet import Jet
from .tree import Tree

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "compare_trees", "dendrogram", "draw_tree", "ginkgo_label", "node_heights", "plot_comparison",
]

SHARED_COLOR = "tab:blue"
OTHER_COLOR = "tab:red"
PLAIN_COLOR = "0.25"


def _axes(ax: Axes | None) -> Axes:
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    _, ax = plt.subplots(figsize=(6, 4))
    return ax


def _jet_of(jet: Any) -> Any:
    """A :class:`~jetastar.Jet` of one jet's particles in any form (``None`` stays ``None``)."""
    return jet if jet is None or isinstance(jet, Jet) else Jet.from_particles(jet)


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
        p = tree.node_momenta(_jet_of(jet).leaves)
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
        tree: the :class:`jetastar.Tree` to draw (or anything :meth:`Tree.from_any` takes: a
            clustering result, nested pairs).
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

    tree = Tree.from_any(tree)
    jet = _jet_of(jet)
    ax = _axes(ax)
    h = node_heights(tree, jet, heights)
    ch = tree.children
    sets = tree.leaf_sets()
    shared: set[frozenset[int]] | None = None
    if compare_to is not None:
        if hasattr(compare_to, "log_likelihood"):  # a clustering result
            compare_to = Tree.from_any(compare_to)
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
    n_lab = len(order)
    if n_lab > 20:  # many leaves: smaller, vertical labels, and only every k-th beyond ~60
        step = max(1, math.ceil(n_lab / 60))
        ticks = np.arange(0, n_lab, step)
        ax.set_xticks(ticks, [labels[k] for k in ticks], rotation=90,
                      fontsize=max(4.5, min(8.0, 300.0 / len(ticks))))
        if leaf_labels is None and step > 1:
            ax.set_xlabel(f"leaf (one label per {step} leaves)")
    else:
        ax.set_xticks(np.arange(n_lab), labels)
    ax.set_xlim(-0.7, len(order) - 0.3)
    top = float(h.max()) if h.size else 1.0
    # headroom above the root for the legend and labels
    ax.set_ylim(-0.03 * top, 1.25 * top if top > 0 else 1.0)
    if not ax.get_xlabel():
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


def _tree_label(tree: Any, jet: Any, fallback: str) -> str:
    """What a tree given to :func:`compare_trees` is: a result's algorithm, ``"truth"`` for the
    jet's truth tree, else ``fallback``."""
    algorithm = getattr(tree, "algorithm", None)
    if isinstance(algorithm, str):
        return algorithm
    truth = getattr(jet, "truth", None)
    if truth is not None and isinstance(tree, Tree) and tree == truth:
        return "truth"
    return fallback


def compare_trees(
    tree_a: Tree,
    tree_b: Tree,
    jet: Any = None,
    *,
    titles: tuple[str, str] | None = None,
    heights: str = "auto",
    figsize: tuple[float, float] = (11.0, 4.2),
) -> Figure:
    """Two trees of one jet side by side; clusters found in both are blue, the others red.

    Args:
        tree_a, tree_b: trees over the same leaves (or what :meth:`Tree.from_any` takes).
        jet: their jet (heights by cluster mass).
        titles: the two panel titles (default: what each tree is: ``"truth"`` for the jet's
            truth tree, a clustering result's algorithm, else ``"tree A"`` / ``"tree B"``); the
            log-likelihoods are appended when a jet is given.
        heights: see :func:`node_heights`.
        figsize: figure size in inches.

    Returns:
        The matplotlib figure with two axes sharing the y axis.
    """
    import matplotlib.pyplot as plt

    jet = _jet_of(jet)
    if titles is None:
        titles = (_tree_label(tree_a, jet, "tree A"), _tree_label(tree_b, jet, "tree B"))
    tree_a, tree_b = Tree.from_any(tree_a), Tree.from_any(tree_b)
    if tree_a.n_leaves != tree_b.n_leaves:
        raise ValueError(
            f"the trees have different numbers of leaves ({tree_a.n_leaves}, {tree_b.n_leaves})"
        )
    fig, axes = plt.subplots(1, 2, figsize=figsize, sharey=True)
    for ax, tree, other, title in zip(
        axes, (tree_a, tree_b), (tree_b, tree_a), titles, strict=True
    ):
        if jet is not None:
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

    tree = Tree.from_any(tree)
    jet = _jet_of(jet)
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


_MARKERS = "osD^vP*Xph<>"


def _count(n: int) -> str:
    """A count short enough for a tick label: ``950``, ``9500``, ``135k``, ``1.2M``."""
    n = int(n)
    if n < 10_000:
        return str(n)
    for scale, unit in ((1e3, "k"), (1e6, "M")):
        if n < 999.5 * scale:  # (shown with 3 digits, it stays below 1000 of the unit)
            return f"{n / scale:.3g}{unit}"
    return f"{n / 1e9:.3g}G"


def plot_comparison(
    rows: Sequence[dict[str, Any]],
    path: str | os.PathLike[str] | None = None,
    *,
    clip: float = 12.0,
    figsize: tuple[float, float] | None = None,
) -> Figure:
    """Draw :func:`jetastar.comparison.comparison_table` rows: one column of panels per jet type.

    Top: median ``log L − log L(best)`` per leaf band with its ~68 % interval (0 = the best tree;
    −∞ included in the median), markers side by side so that algorithms at the same value stay
    visible. Values below ``−clip`` nats are drawn as arrows at the bottom edge with their value
    written next to them, so that a far-off algorithm does not flatten the differences near 0.
    An exact method stopped by its budget on some jets of a band is marked "k stopped" (those
    trees are incumbents, not MAPs) and its legend entry says on how many jets.
    Middle: fraction of the jets a method ran on (those it did not skip for their size) with a
    tree of non-zero likelihood (filled) and with any tree (open); a band it skipped entirely
    says "skipped" instead of a marker at 0. Bottom: median time per jet. Tick labels give each
    band's compared jet count.

    Args:
        rows: the comparison rows.
        path: save the figure there (PNG, PDF, ...) when given.
        clip: nats below the best tree shown on the ΔlogL axis.
        figsize: figure size (default: 5.5 inches wide per jet type).

    Returns:
        The matplotlib figure.
    """
    import matplotlib.pyplot as plt

    types = list(dict.fromkeys(r["jet_type"] for r in rows))
    algs = list(dict.fromkeys(r["algorithm"] for r in rows))
    ncol = max(1, len(types))
    fig, axes = plt.subplots(3, ncol, figsize=figsize or (5.8 * ncol + 1.6, 9.5), squeeze=False,
                             gridspec_kw={"height_ratios": [2.2, 1.0, 1.0]})
    width = 0.8 / max(1, len(algs))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for col, jt in enumerate(types):
        sub = [r for r in rows if r["jet_type"] == jt]
        bands = [*dict.fromkeys(r["band"] for r in sub if r["band"] != "all"), "all"]
        x = np.arange(len(bands), dtype=float)
        x[-1] += 0.3  # the "all" group a little apart
        ax_d, ax_c, ax_t = axes[0, col], axes[1, col], axes[2, col]
        for k, alg in enumerate(algs):
            by_band = {r["band"]: r for r in sub if r["algorithm"] == alg}
            xs = x + (k - (len(algs) - 1) / 2) * width
            color = "0.35" if alg == "truth" else colors[k % len(colors)]
            marker = _MARKERS[k % len(_MARKERS)]
            med = np.array([by_band.get(b, {}).get("d_median", np.nan) for b in bands], float)
            lo = np.array([by_band.get(b, {}).get("d_lo", np.nan) for b in bands], float)
            hi = np.array([by_band.get(b, {}).get("d_hi", np.nan) for b in bands], float)
            inside = np.isfinite(med) & (med >= -clip)
            lo_c = np.clip(np.where(np.isfinite(lo), lo, -clip), -clip, None)
            hi_c = np.clip(np.where(np.isfinite(hi), hi, -clip), -clip, None)
            ax_d.errorbar(xs[inside], med[inside],
                          yerr=[med[inside] - lo_c[inside], hi_c[inside] - med[inside]],
                          fmt=marker, color=color, ms=5, capsize=2, lw=1, label=alg)
            below = ~np.isnan(med) & ~inside
            for xb, value in zip(xs[below], med[below], strict=True):
                ax_d.annotate("", xy=(xb, -clip * 0.98), xytext=(xb, -clip * 0.80),
                              arrowprops={"arrowstyle": "->", "color": color, "lw": 1.2})
                if value == -np.inf:  # horizontal: a rotated "−∞" does not read
                    ax_d.text(xb, -clip * 0.78, "−∞", color=color, fontsize=7, ha="center",
                              va="bottom")
                else:
                    ax_d.text(xb, -clip * 0.78, f"{value:.0f}", color=color, fontsize=6.5,
                              ha="center", va="bottom", rotation=90)
            # exact runs stopped by the budget: their trees are incumbents, not MAPs: say so
            for xb, b, value in zip(xs, bands, med, strict=True):
                row = by_band.get(b, {})
                if row.get("exact_method") and row.get("budget") and np.isfinite(value):
                    ax_d.annotate(f"{row['budget']} stopped", (xb, max(value, -clip)),
                                  textcoords="offset points", xytext=(0, -7), ha="center",
                                  va="top", fontsize=6, color=color, rotation=90)
            # fractions of the jets the method ran on: a method skipped on a band (its size
            # limit) has no marker there, not one at 0 ("found no tree")
            attempted = [by_band[b]["jets"] - by_band[b].get("skipped", 0) if b in by_band else 0
                         for b in bands]
            fin = [by_band[b]["finite"] / a if a > 0 else np.nan
                   for b, a in zip(bands, attempted, strict=True)]
            ran = [by_band[b]["ran"] / a if a > 0 else np.nan
                   for b, a in zip(bands, attempted, strict=True)]
            ax_c.plot(xs, fin, marker, color=color, ms=5)
            ax_c.plot(xs, ran, marker, color=color, ms=7, mfc="none", alpha=0.6)
            for xb, b, a in zip(xs, bands, attempted, strict=True):
                if b in by_band and by_band[b]["jets"] and a == 0:
                    ax_c.text(xb, 0.5, "skipped", color=color, fontsize=6, rotation=90,
                              ha="center", va="center")
            if alg != "truth":
                tm = [by_band.get(b, {}).get("time_median", np.nan) for b in bands]
                ax_t.plot(xs, tm, marker, color=color, ms=5)
        counts = []
        for b in bands:
            first = next((r for r in sub if r["band"] == b), None)
            counts.append(f"{b}\nn={_count(first['compared'])}/{_count(first['jets'])}"
                          if first else b)
        for ax in (ax_d, ax_c, ax_t):
            ax.set_xticks(x)
            ax.set_xticklabels(counts, fontsize=7.5)
            ax.grid(alpha=0.3, axis="y")
            ax.set_xlim(-0.6, x[-1] + 0.6)
            ax.axvline(x[-1] - 0.65, color="0.6", lw=0.8, ls="--")
        ax_d.axhline(0.0, color="0.5", lw=0.8)
        ax_d.set_ylim(-clip, 0.05 * clip + 0.5)
        ax_d.set_title(f"{jt} jets")
        ax_c.set_ylim(-0.05, 1.08)
        ax_t.set_yscale("log")
        ax_t.set_xlabel("leaves per jet (n = compared / all jets of the band)")
        if col == 0:
            ax_d.set_ylabel("median log L − log L(best) [nats]\n(−∞ included; ~68 % interval)")
            ax_c.set_ylabel("fraction of jets\n● finite tree  ○ any tree")
            ax_t.set_ylabel("median time per jet [s]")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    seen = dict(zip(labels, handles, strict=True))
    stopped = {}  # exact methods stopped by the budget: how often, over every jet type
    for r in rows:
        if r["band"] == "all" and r.get("exact_method") and r.get("budget"):
            done = stopped.get(r["algorithm"], (0, 0))
            stopped[r["algorithm"]] = (done[0] + r["budget"], done[1] + r["jets"] - r["skipped"])
    for k, alg in enumerate(algs):  # algorithms whose every value is off the axis
        if alg not in seen:
            from matplotlib.lines import Line2D

            color = "0.35" if alg == "truth" else colors[k % len(colors)]
            seen[alg] = Line2D([], [], marker=_MARKERS[k % len(_MARKERS)], color=color, ls="")
    names = [f"{alg}\n(stopped by budget on\n{stopped[alg][0]} of {stopped[alg][1]} jets:\nnot exact there)"
             if alg in stopped else alg for alg in seen]
    fig.legend(list(seen.values()), names, loc="center right", fontsize="small", frameon=False)
    fig.suptitle("best = the proven MAP where an exact method finished, else the best tree found; "
                 f"arrows: below −{clip:g} nats", fontsize="small")
    fig.tight_layout(rect=(0, 0, 1 - 1.5 / fig.get_figwidth(), 0.97))
    if path is not None:
        fig.savefig(path, dpi=110)
    return fig
