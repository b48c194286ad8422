"""Jets and their trees as flat arrays, with node momenta computed once: the common input of the
tree observables (:mod:`jetastar.observables`) and of the diagnostics (:mod:`jetastar.diagnostics`).

Jets may be given as a :class:`~jetastar.Jet`, a :class:`~jetastar.JetCollection`, a list of jets
or an awkward array of jets; trees as ``None`` (the truth trees), a :class:`~jetastar.Tree`, a list
of trees or :class:`~jetastar.clustering.ClusteringResult` objects, or an
:class:`~jetastar.io.AlgorithmResults` table.

Example:
    >>> from jetastar.ginkgo import ShowerParams, generate
    >>> flat = flat_trees(generate(2, ShowerParams.qcd(), seed=1), None)
    >>> flat.n_jets, bool(flat.has_tree.all())
    (2, True)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numba as nb
import numpy as np

from ._columnar import is_list_of_jet_arrays, offset_ranges
from .clustering.result import ClusteringResult
from .errors import InvalidTreeError
from .jet import Jet, JetCollection
from .result_tables import AlgorithmResults
from .tree import Tree

__all__ = ["FlatTrees", "as_collection", "flat_trees"]


@nb.njit(cache=True)
def _prepare(leaves, leaf_offsets, children, leaf_of_node, node_offsets):  # pragma: no cover
    """Node momenta, root, depth and leaf count of every node of every tree.

    Returns ``(node_p (K, 4), root (J,), depth (K,), size (K,), ok (J,))``; ``root`` is local to the
    jet's nodes, ``-1`` for a jet without a tree; ``ok`` is False for a tree that is not a binary tree
    over the jet's leaves.
    """
    n_jets = leaf_offsets.shape[0] - 1
    k_all = children.shape[0]
    node_p = np.zeros((k_all, 4), dtype=np.float64)
    depth = np.zeros(k_all, dtype=np.int64)
    size = np.zeros(k_all, dtype=np.int64)
    root = np.full(n_jets, -1, dtype=np.int64)
    ok = np.ones(n_jets, dtype=np.bool_)
    for j in range(n_jets):
        a = node_offsets[j]
        m = node_offsets[j + 1] - a
        if m == 0:
            continue
        n = leaf_offsets[j + 1] - leaf_offsets[j]
        if m != 2 * n - 1:
            ok[j] = False
            continue
        is_child = np.zeros(m, dtype=np.bool_)
        for k in range(m):
            c0 = children[a + k, 0]
            if c0 >= 0:
                c1 = children[a + k, 1]
                if c0 >= m or c1 >= m or c1 < 0:
                    ok[j] = False
                else:
                    is_child[c0] = True
                    is_child[c1] = True
        if not ok[j]:
            continue
        r = -1
        for k in range(m):
            if not is_child[k]:
                if r >= 0:
                    ok[j] = False
                r = k
        if r < 0 or not ok[j]:
            ok[j] = False
            continue
        # iterative post-order: parents pushed twice (first visit, then after the children)
        stack = np.empty(2 * m + 2, dtype=np.int64)
        state = np.empty(2 * m + 2, dtype=np.int64)
        top = 0
        stack[0] = r
        state[0] = 0
        depth[a + r] = 0
        seen = 0
        while top >= 0:
            k = stack[top]
            s = state[top]
            top -= 1
            c0 = children[a + k, 0]
            if c0 < 0:
                leaf = leaf_of_node[a + k]
                if leaf < 0 or leaf >= n:
                    ok[j] = False
                    break
                for d in range(4):
                    node_p[a + k, d] = leaves[leaf_offsets[j] + leaf, d]
                size[a + k] = 1
                seen += 1
            elif s == 0:
                c1 = children[a + k, 1]
                if top + 3 >= stack.shape[0]:
                    ok[j] = False
                    break
                top += 1
                stack[top] = k
                state[top] = 1
                top += 1
                stack[top] = c1
                state[top] = 0
                depth[a + c1] = depth[a + k] + 1
                top += 1
                stack[top] = c0
                state[top] = 0
                depth[a + c0] = depth[a + k] + 1
            else:
                c1 = children[a + k, 1]
                for d in range(4):
                    node_p[a + k, d] = node_p[a + c0, d] + node_p[a + c1, d]
                size[a + k] = size[a + c0] + size[a + c1]
                seen += 1
        if not ok[j] or seen != m or size[a + r] != n:
            ok[j] = False
            continue
        root[j] = r
    return node_p, root, depth, size, ok



class FlatTrees:
    """Jets and trees as flat arrays, with node momenta computed once (shared by the observables
    here and by :func:`jetastar.diagnostics.tree_reasons`).

    Args:
        jets: jets in any form :func:`as_collection` accepts.
        trees: their trees (``None``: the truth trees), as :func:`tree_observables` accepts them.
    """

    def __init__(self, jets: Any, trees: Any) -> None:
        collection, self.single = as_collection(jets)
        self.collection = collection
        self.n_jets = len(collection)
        self.leaf_offsets = np.ascontiguousarray(collection.leaf_offsets, dtype=np.int64)
        leaves = np.ascontiguousarray(collection.leaves, dtype=np.float64)
        children, leaf_of_node, node_offsets = _as_trees(trees, collection, self.single)
        self.children = np.ascontiguousarray(children, dtype=np.int64)
        self.node_offsets = np.ascontiguousarray(node_offsets, dtype=np.int64)
        node_p, root, depth, size, ok = _prepare(
            leaves, self.leaf_offsets, self.children,
            np.ascontiguousarray(leaf_of_node, dtype=np.int64), self.node_offsets,
        )
        if not np.all(ok):
            j = int(np.flatnonzero(~ok)[0])
            n = int(self.leaf_offsets[j + 1] - self.leaf_offsets[j])
            m = int(self.node_offsets[j + 1] - self.node_offsets[j])
            raise InvalidTreeError(
                f"is not a binary tree over the jet's {n} leaves ({m} nodes)",
                jet=int(collection.jet_id[j]), field="tree",
            )
        self.node_p, self.root, self.depth, self.size = node_p, root, depth, size
        self.has_tree = root >= 0

    def local(self, flat_nodes: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """Flat global node indices -> node indices within their jet's tree."""
        jet = np.repeat(np.arange(self.n_jets), counts)
        return flat_nodes - self.node_offsets[jet]

    def finish(self, array: Any) -> Any:
        """The jet's entry for a single-jet call, else the array."""
        return array[0] if self.single else array


def flat_trees(jets: Any, trees: Any) -> FlatTrees:
    """:class:`FlatTrees` of jets and trees in any accepted form (a :class:`FlatTrees` is returned
    as it is, so that several observables share one preparation)."""
    return jets if isinstance(jets, FlatTrees) else FlatTrees(jets, trees)


def as_collection(jets: Any) -> tuple[JetCollection, bool]:
    """Jets in any form the observables accept, as a :class:`~jetastar.JetCollection`.

    Args:
        jets: a :class:`~jetastar.Jet`, a :class:`~jetastar.JetCollection`, a list of jets or of
            per-jet ``(n, 4)`` (E, px, py, pz) arrays, or an awkward array of
            jets (records with a ``leaves`` field, or ``n_jets * var * momentum``
            in any coordinates: converted like :meth:`JetCollection.from_momenta
            <jetastar.JetCollection.from_momenta>` with its default mass policy, ``"clamp"``; not
            validated, so that a bad jet is reported per jet).

    Returns:
        ``(collection, single)``: ``single`` is true for one :class:`~jetastar.Jet` (the functions
        then return that jet's entry instead of an array).

    Raises:
        TypeError: for anything else.
    """
    if isinstance(jets, Jet):
        return JetCollection.from_jets([jets]), True
    if isinstance(jets, JetCollection):
        return jets, False
    try:
        import awkward as ak
    except ImportError:  # pragma: no cover - awkward is a dependency
        ak = None
    if ak is not None and isinstance(jets, ak.Array):
        if "leaves" in ak.fields(jets):
            return JetCollection.from_awkward(jets), False
        return JetCollection.from_momenta(jets, validate=False), False
    if isinstance(jets, Sequence) and all(isinstance(j, Jet) for j in jets):
        return JetCollection.from_jets(jets), False
    if is_list_of_jet_arrays(jets):  # (E, px, py, pz) rows per jet, default mass policy
        return JetCollection.from_momenta(jets, validate=False), False
    raise TypeError(
        "jets must be a Jet, a JetCollection, a list of Jets or of per-jet (n, 4) arrays, or an "
        "awkward array of jets, "
        f"got {type(jets).__name__}"
    )


def _as_trees(trees: Any, collection: Any, single: bool) -> tuple[np.ndarray, ...]:
    n = len(collection)
    if trees is None:
        if collection.children.shape[0] == 0 and n:
            raise InvalidTreeError(
                "the jets have no truth trees; pass trees=... (e.g. a clustering result)",
                field="trees",
            )
        return collection.children, collection.leaf_of_node, collection.node_offsets
    if isinstance(trees, AlgorithmResults):
        trees = trees.for_jets(collection)  # (rows by position, or by id after a selection)
        rows = np.full(n, -1, dtype=np.int64)
        rows[trees.jet_index] = np.arange(len(trees))
        sizes = np.zeros(n, dtype=np.int64)
        have = rows >= 0
        sizes[have] = np.diff(trees.node_offsets)[rows[have]]
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        idx = offset_ranges(trees.node_offsets, rows[have])
        return trees.children[idx], trees.leaf_of_node[idx], offsets
    if isinstance(trees, (Tree, ClusteringResult)):
        if not single and n != 1:
            raise TypeError("a single tree goes with a single jet; pass one tree per jet")
        trees = [trees]
    items = list(trees)
    if len(items) != n:
        raise ValueError(f"got {len(items)} trees for {n} jets; pass one tree (or None) per jet")
    got: list[Any] = []
    for i, t in enumerate(items):
        if isinstance(t, ClusteringResult):
            t = t.tree
        if t is not None and not isinstance(t, Tree):
            raise TypeError(
                f"tree {i}: expected a Tree, a ClusteringResult or None, got {type(t).__name__}"
            )
        got.append(t)
    sizes = np.array([0 if t is None else t.n_nodes for t in got], dtype=np.int64)
    if sizes.sum():
        children = np.concatenate([t.children for t in got if t is not None])
        leaf_of_node = np.concatenate([t.leaf_of_node for t in got if t is not None])
    else:
        children, leaf_of_node = np.empty((0, 2), np.int64), np.empty(0, np.int64)
    return children, leaf_of_node, np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
