"""Binary hierarchies over the leaves of a jet.

A :class:`Tree` over ``n`` leaves has ``2n - 1`` nodes. It is stored as a children array
``(2n - 1, 2)`` (``[-1, -1]`` for leaves) plus ``leaf_of_node``, which maps each leaf node to its leaf
index (``-1`` for internal nodes). Any node order is accepted; :meth:`Tree.canonical` gives a unique
form (leaf ``i`` is node ``i``; internal nodes ordered by cluster size, then smallest leaf; children
ordered by smallest leaf; the root last).

Two trees are equal when they have the same set of clusters (the leaf sets of their internal
nodes); the order of children and of nodes does not matter.

Example:
    >>> from jetastar import Tree
    >>> t = Tree.from_nested(((0, 3), (1, 2)))
    >>> sorted(sorted(c) for c in t.clusters())
    [[0, 1, 2, 3], [0, 3], [1, 2]]
    >>> t == Tree.from_nested(((2, 1), (3, 0)))
    True
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import cached_property
from typing import Any

import numpy as np

from .errors import InvalidTreeError

__all__ = ["Tree"]

Nested = Any  # int | tuple[Nested, Nested]


class Tree:
    """A binary hierarchy over ``n`` leaves.

    Construct with one of the ``from_*`` class methods; the constructor itself validates the same
    way as :meth:`from_children`.

    Args:
        children: ``(2n - 1, 2)`` integer array, row ``k`` = the two child nodes of node ``k``,
            ``[-1, -1]`` for a leaf node.
        leaf_of_node: ``(2n - 1,)`` integer array, the leaf index (``0 .. n-1``) of each leaf node and
            ``-1`` for internal nodes. ``None`` numbers the leaves in increasing node order.
        jet: index or id of the jet the tree belongs to (only used in error messages).
    """

    __slots__ = ("__dict__", "_children", "_leaf_of_node", "_root")

    def __init__(
        self,
        children: Any,
        leaf_of_node: Any = None,
        *,
        jet: object = None,
    ) -> None:
        children_arr, leaf_arr, root = _validate(children, leaf_of_node, jet)
        self._children = children_arr
        self._leaf_of_node = leaf_arr
        self._root = root

    # ------------------------------------------------------------------ constructors
    @classmethod
    def _trusted(cls, children: np.ndarray, leaf_of_node: np.ndarray, root: int) -> Tree:
        """Internal: wrap arrays already known to form a valid tree (no validation).

        For algorithms that build trees in kernels; ``children`` and ``leaf_of_node`` must be int64
        arrays that :meth:`from_children` would accept, ``root`` the root node.
        """
        tree = cls.__new__(cls)
        ch = np.ascontiguousarray(children, dtype=np.int64)
        leaf = np.ascontiguousarray(leaf_of_node, dtype=np.int64)
        ch.setflags(write=False)
        leaf.setflags(write=False)
        tree._children = ch
        tree._leaf_of_node = leaf
        tree._root = int(root)
        return tree

    @classmethod
    def from_children(cls, children: Any, leaf_of_node: Any = None, *, jet: object = None) -> Tree:
        """Tree from a children array (``[-1, -1]`` rows are leaves) and a leaf map.

        Args:
            children: ``(2n - 1, 2)`` integer array.
            leaf_of_node: leaf index of every leaf node, ``-1`` for internal ones; ``None`` numbers
                leaves in increasing node order (the generator's pre-order convention).
            jet: jet index or id for error messages.

        Returns:
            The validated :class:`Tree`.

        Example:
            >>> Tree.from_children([[1, 2], [-1, -1], [-1, -1]]).to_nested()
            (0, 1)
        """
        return cls(children, leaf_of_node, jet=jet)

    @classmethod
    def from_any(cls, tree: Any, *, jet: object = None) -> Tree:
        """A :class:`Tree` given as a tree, a clustering result (its tree) or nested pairs of leaf
        indices: what the functions that score or draw a tree accept.

        Args:
            tree: a :class:`Tree`, a :class:`~jetastar.clustering.ClusteringResult` or nested
                pairs such as ``((0, 2), 1)`` (:meth:`from_nested`).
            jet: jet index or id for error messages.

        Raises:
            InvalidTreeError: a result without a tree (skipped, failed), or anything else (field
                ``tree``).

        Example:
            >>> Tree.from_any(((0, 2), 1)).n_leaves
            3
        """
        if isinstance(tree, Tree):
            return tree
        inner = getattr(tree, "tree", False)
        if (inner is None or isinstance(inner, Tree)) and hasattr(tree, "log_likelihood"):
            # a ClusteringResult (not a results table, whose ``tree`` is a method)
            if inner is None:
                raise InvalidTreeError(
                    f"the {tree.algorithm} result has no tree (status {tree.status!r})",
                    jet=jet, field="tree")
            return inner
        if isinstance(tree, (tuple, list)):
            return cls.from_nested(tree, jet=jet)
        raise InvalidTreeError(
            "must be a jetastar.Tree, a clustering result or nested pairs of leaf indices, got "
            f"{type(tree).__name__}", jet=jet, field="tree")

    @classmethod
    def from_nested(cls, nested: Nested, *, jet: object = None) -> Tree:
        """Tree from nested pairs of leaf indices, e.g. ``((0, 3), (1, 2))``.

        Args:
            nested: an ``int`` (a single leaf) or a 2-sequence of nested items; lists work too.
            jet: jet index or id for error messages.

        Returns:
            The :class:`Tree`; node order is pre-order of ``nested``.
        """
        children: list[list[int]] = []
        leaf_of_node: list[int] = []
        stack: list[tuple[Nested, int, int]] = [(nested, -1, 0)]
        while stack:
            item, parent, side = stack.pop()
            node = len(children)
            if parent >= 0:
                children[parent][side] = node
            if isinstance(item, (int, np.integer)) and not isinstance(item, bool):
                children.append([-1, -1])
                leaf_of_node.append(int(item))
            elif isinstance(item, Sequence) and not isinstance(item, str) and len(item) == 2:
                children.append([-2, -2])
                leaf_of_node.append(-1)
                stack.append((item[1], node, 1))
                stack.append((item[0], node, 0))
            else:
                raise InvalidTreeError(
                    f"nested tree items must be leaf indices (int) or pairs, got {item!r}",
                    jet=jet,
                    field="tree",
                )
        return cls(np.asarray(children, dtype=np.int64), np.asarray(leaf_of_node), jet=jet)

    @classmethod
    def from_parents(cls, parents: Any, leaf_of_node: Any = None, *, jet: object = None) -> Tree:
        """Tree from a parent array (``-1`` for the root).

        Children of a node are taken in increasing node order.

        Args:
            parents: ``(2n - 1,)`` integer array, ``parents[k]`` = parent node of ``k``.
            leaf_of_node: as in :meth:`from_children`.
            jet: jet index or id for error messages.

        Returns:
            The :class:`Tree`.
        """
        par = _as_int_array(parents, "parents", jet, ndim=1)
        m = par.shape[0]
        children = np.full((m, 2), -1, dtype=np.int64)
        fill = np.zeros(m, dtype=np.int64)
        for k in range(m):
            p = int(par[k])
            if p == -1:
                continue
            if not 0 <= p < m or p == k:
                raise InvalidTreeError(
                    f"parents[{k}] = {p} is not a node index", jet=jet, field="parents"
                )
            if fill[p] >= 2:
                raise InvalidTreeError(
                    f"node {p} has more than two children", jet=jet, field="parents"
                )
            children[p, fill[p]] = k
            fill[p] += 1
        if np.any(fill == 1):
            bad = int(np.flatnonzero(fill == 1)[0])
            raise InvalidTreeError(f"node {bad} has exactly one child", jet=jet, field="parents")
        return cls(children, leaf_of_node, jet=jet)

    @classmethod
    def from_linkage(cls, linkage: Any, *, jet: object = None) -> Tree:
        """Tree from a scipy linkage matrix ``Z`` of shape ``(n - 1, 4)``.

        Row ``i`` merges clusters ``Z[i, 0]`` and ``Z[i, 1]`` into cluster ``n + i``; ids below
        ``n`` are leaves.

        Returns:
            The :class:`Tree` with leaf ``i`` as node ``i`` and row ``i`` as node ``n + i``.
        """
        z = np.asarray(linkage, dtype=np.float64)
        if z.ndim != 2 or z.shape[1] != 4:
            raise InvalidTreeError(
                f"a linkage matrix has shape (n-1, 4), got {z.shape}", jet=jet, field="linkage"
            )
        n = z.shape[0] + 1
        ids = z[:, :2]
        if not np.all(np.isfinite(ids)) or np.any(ids != np.round(ids)):
            raise InvalidTreeError("linkage cluster ids must be integers", jet=jet, field="linkage")
        children = np.full((2 * n - 1, 2), -1, dtype=np.int64)
        children[n:] = ids.astype(np.int64)
        leaf_of_node = np.full(2 * n - 1, -1, dtype=np.int64)
        leaf_of_node[:n] = np.arange(n)
        return cls(children, leaf_of_node, jet=jet)

    @classmethod
    def from_clusters(
        cls, clusters: Iterable[Iterable[int]], n_leaves: int, *, jet: object = None
    ) -> Tree:
        """Tree from the leaf sets of its internal nodes.

        Args:
            clusters: the ``n - 1`` internal clusters (any iterables of leaf indices; the full set
                must be one of them). Singletons may be included; they are ignored.
            n_leaves: number of leaves ``n``.
            jet: jet index or id for error messages.

        Returns:
            The :class:`Tree`.

        Raises:
            InvalidTreeError: if the clusters do not form a binary hierarchy over ``0 .. n-1``.
        """
        sets = {frozenset(int(i) for i in c) for c in clusters}
        sets = {c for c in sets if len(c) > 1}
        full = frozenset(range(n_leaves))
        if n_leaves == 1:
            return cls(np.full((1, 2), -1), np.zeros(1, dtype=np.int64), jet=jet)
        if full not in sets:
            raise InvalidTreeError(
                "the clusters do not contain the set of all leaves", jet=jet, field="clusters"
            )
        if len(sets) != n_leaves - 1:
            raise InvalidTreeError(
                f"a binary tree over {n_leaves} leaves has {n_leaves - 1} distinct internal "
                f"clusters, got {len(sets)}",
                jet=jet,
                field="clusters",
            )
        ordered = sorted(sets, key=lambda c: (len(c), min(c)))
        node_of: dict[frozenset[int], int] = {frozenset([i]): i for i in range(n_leaves)}
        children = np.full((2 * n_leaves - 1, 2), -1, dtype=np.int64)
        for k, c in enumerate(ordered):
            node_of[c] = n_leaves + k
        for k, c in enumerate(ordered):
            # the two children are the largest proper sub-clusters that partition c
            subs = sorted(
                (s for s in node_of if s < c), key=lambda s: len(s), reverse=True
            )
            left = subs[0] if subs else None
            right = c - left if left is not None else None
            if left is None or right not in node_of:
                raise InvalidTreeError(
                    f"cluster {sorted(c)} is not split into two clusters of the hierarchy",
                    jet=jet,
                    field="clusters",
                )
            children[n_leaves + k] = (node_of[left], node_of[right])
        leaf_of_node = np.full(2 * n_leaves - 1, -1, dtype=np.int64)
        leaf_of_node[:n_leaves] = np.arange(n_leaves)
        return cls(children, leaf_of_node, jet=jet)

    # ------------------------------------------------------------------ basic properties
    @property
    def children(self) -> np.ndarray:
        """``(2n - 1, 2)`` int64 children array (read-only)."""
        return self._children

    @property
    def leaf_of_node(self) -> np.ndarray:
        """``(2n - 1,)`` int64 leaf index of each leaf node, ``-1`` for internal nodes (read-only)."""
        return self._leaf_of_node

    @property
    def root(self) -> int:
        """Index of the root node."""
        return self._root

    @property
    def n_leaves(self) -> int:
        """Number of leaves ``n``."""
        return (self._children.shape[0] + 1) // 2

    @property
    def n_nodes(self) -> int:
        """Number of nodes ``2n - 1``."""
        return self._children.shape[0]

    def is_leaf(self) -> np.ndarray:
        """Boolean mask of leaf nodes."""
        return self._children[:, 0] < 0

    @cached_property
    def _postorder(self) -> np.ndarray:
        """Nodes in post-order (children before parents), left subtree first."""
        order: list[int] = []
        stack = [(self._root, False)]
        ch = self._children
        while stack:
            node, done = stack.pop()
            if done or ch[node, 0] < 0:
                order.append(node)
            else:
                stack.append((node, True))
                stack.append((int(ch[node, 1]), False))
                stack.append((int(ch[node, 0]), False))
        return np.asarray(order, dtype=np.int64)

    def postorder(self) -> np.ndarray:
        """Node indices in post-order: every node after its two children, the root last."""
        return self._postorder.copy()

    def parents(self) -> np.ndarray:
        """Parent array: ``parents[k]`` is the parent node of ``k``, ``-1`` for the root."""
        par = np.full(self.n_nodes, -1, dtype=np.int64)
        internal = np.flatnonzero(self._children[:, 0] >= 0)
        par[self._children[internal, 0]] = internal
        par[self._children[internal, 1]] = internal
        return par

    @cached_property
    def _leaf_sets(self) -> tuple[frozenset[int], ...]:
        sets: list[frozenset[int] | None] = [None] * self.n_nodes
        ch = self._children
        for node in self._postorder:
            if ch[node, 0] < 0:
                sets[node] = frozenset([int(self._leaf_of_node[node])])
            else:
                sets[node] = sets[ch[node, 0]] | sets[ch[node, 1]]  # type: ignore[operator]
        return tuple(sets)  # type: ignore[arg-type]

    def leaf_sets(self) -> tuple[frozenset[int], ...]:
        """The leaf set (cluster) of every node, indexed by node."""
        return self._leaf_sets

    @cached_property
    def _clusters(self) -> frozenset[frozenset[int]]:
        internal = np.flatnonzero(self._children[:, 0] >= 0)
        return frozenset(self._leaf_sets[k] for k in internal)

    def clusters(self) -> frozenset[frozenset[int]]:
        """The leaf sets of the internal nodes (``n - 1`` clusters, the full set included).

        Example:
            >>> sorted(map(sorted, Tree.from_nested((0, (1, 2))).clusters()))
            [[0, 1, 2], [1, 2]]
        """
        return self._clusters

    def node_masks(self) -> np.ndarray:
        """Leaf bitmask of every node as int64 (bit ``i`` = leaf ``i``); needs ``n <= 62``."""
        if self.n_leaves > 62:
            raise ValueError(f"bitmasks need at most 62 leaves, this tree has {self.n_leaves}")
        masks = np.zeros(self.n_nodes, dtype=np.int64)
        ch = self._children
        for node in self._postorder:
            if ch[node, 0] < 0:
                masks[node] = np.int64(1) << np.int64(self._leaf_of_node[node])
            else:
                masks[node] = masks[ch[node, 0]] | masks[ch[node, 1]]
        return masks

    def depths(self) -> np.ndarray:
        """Depth of every node (number of edges from the root; the root has depth 0)."""
        depth = np.zeros(self.n_nodes, dtype=np.int64)
        ch = self._children
        for node in self._postorder[::-1]:  # reverse post-order: parents before children
            if ch[node, 0] >= 0:
                depth[ch[node]] = depth[node] + 1
        return depth

    def node_momenta(self, leaves: Any) -> np.ndarray:
        """4-momenta of every node as sums of leaf momenta.

        Args:
            leaves: ``(n, 4)`` leaf 4-vectors (E, px, py, pz).

        Returns:
            ``(2n - 1, 4)`` float64 array; internal node = sum of its children.
        """
        p = np.asarray(leaves, dtype=np.float64)
        if p.shape != (self.n_leaves, 4):
            raise ValueError(f"leaves must have shape ({self.n_leaves}, 4), got {p.shape}")
        out = np.zeros((self.n_nodes, 4), dtype=np.float64)
        ch = self._children
        for node in self._postorder:
            if ch[node, 0] < 0:
                out[node] = p[self._leaf_of_node[node]]
            else:
                out[node] = out[ch[node, 0]] + out[ch[node, 1]]
        return out

    # ------------------------------------------------------------------ conversions
    def to_nested(self) -> Nested:
        """Nested tuples of leaf indices, children in stored order.

        Example:
            >>> Tree.from_nested([[0, 3], [1, 2]]).to_nested()
            ((0, 3), (1, 2))
        """
        built: dict[int, Nested] = {}
        ch = self._children
        for node in self._postorder:
            if ch[node, 0] < 0:
                built[int(node)] = int(self._leaf_of_node[node])
            else:
                built[int(node)] = (built.pop(int(ch[node, 0])), built.pop(int(ch[node, 1])))
        return built[self._root]

    def to_parents(self) -> np.ndarray:
        """Alias of :meth:`parents` (the parent array, ``-1`` at the root)."""
        return self.parents()

    def canonical(self) -> Tree:
        """The unique canonical form of this tree (see the module docstring)."""
        return self._canonical

    @cached_property
    def _canonical(self) -> Tree:
        n = self.n_leaves
        sets = self._leaf_sets
        internal = [int(k) for k in np.flatnonzero(self._children[:, 0] >= 0)]
        internal.sort(key=lambda k: (len(sets[k]), min(sets[k])))
        new_id = np.empty(self.n_nodes, dtype=np.int64)
        leaf_nodes = np.flatnonzero(self._children[:, 0] < 0)
        new_id[leaf_nodes] = self._leaf_of_node[leaf_nodes]
        for j, k in enumerate(internal):
            new_id[k] = n + j
        children = np.full((self.n_nodes, 2), -1, dtype=np.int64)
        for k in internal:
            a, b = (int(c) for c in self._children[k])
            if min(sets[a]) > min(sets[b]):
                a, b = b, a
            children[new_id[k]] = (new_id[a], new_id[b])
        leaf_of_node = np.full(self.n_nodes, -1, dtype=np.int64)
        leaf_of_node[:n] = np.arange(n)
        return Tree(children, leaf_of_node)

    def to_linkage(self, heights: Any = None) -> np.ndarray:
        """scipy linkage matrix ``(n - 1, 4)`` for :func:`scipy.cluster.hierarchy.dendrogram`.

        Args:
            heights: optional per-node heights (indexed by this tree's node ids), e.g. invariant
                masses; must not decrease from child to parent. ``None`` uses the height of each
                subtree (leaves 0, a node one more than its higher child).

        Returns:
            ``Z`` with rows ordered by height (then cluster size), so children come first.

        Example:
            >>> from scipy.cluster.hierarchy import dendrogram
            >>> Z = Tree.from_nested(((0, 3), (1, 2))).to_linkage()
            >>> dendrogram(Z, no_plot=True)["ivl"]
            ['0', '3', '1', '2']
        """
        n = self.n_leaves
        ch = self._children
        sets = self._leaf_sets
        if heights is None:
            h = np.zeros(self.n_nodes, dtype=np.float64)
            for node in self._postorder:
                if ch[node, 0] >= 0:
                    h[node] = 1.0 + max(h[ch[node, 0]], h[ch[node, 1]])
        else:
            h = np.asarray(heights, dtype=np.float64)
            if h.shape != (self.n_nodes,):
                raise ValueError(f"heights must have shape ({self.n_nodes},), got {h.shape}")
        internal = [int(k) for k in np.flatnonzero(ch[:, 0] >= 0)]
        internal.sort(key=lambda k: (h[k], len(sets[k]), min(sets[k])))
        zid = np.empty(self.n_nodes, dtype=np.int64)
        leaf_nodes = np.flatnonzero(ch[:, 0] < 0)
        zid[leaf_nodes] = self._leaf_of_node[leaf_nodes]
        z = np.zeros((n - 1, 4), dtype=np.float64)
        for row, k in enumerate(internal):
            zid[k] = n + row
        for row, k in enumerate(internal):
            a, b = (int(c) for c in ch[k])
            if heights is not None and (h[a] > h[k] or h[b] > h[k]):
                raise ValueError(f"heights decrease from a child to its parent at node {k}")
            z[row] = (zid[a], zid[b], h[k], len(sets[k]))
        return z

    # ------------------------------------------------------------------ comparison
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Tree):
            return NotImplemented
        return self.n_leaves == other.n_leaves and self.clusters() == other.clusters()

    def __hash__(self) -> int:
        return hash((self.n_leaves, self.clusters()))

    def __repr__(self) -> str:
        text = repr(self.to_nested())
        if len(text) > 200:
            text = text[:197] + "..."
        return f"Tree({text})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Tree, (self._children, self._leaf_of_node))


# ---------------------------------------------------------------------- validation helpers
def _as_int_array(values: Any, field: str, jet: object, ndim: int) -> np.ndarray:
    try:
        arr = np.asarray(values)
    except Exception as exc:  # ragged nested lists and the like
        raise InvalidTreeError(f"cannot be read as an array: {exc}", jet=jet, field=field) from exc
    if arr.ndim != ndim:
        raise InvalidTreeError(
            f"must be a {ndim}-d integer array, got shape {arr.shape}", jet=jet, field=field
        )
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        if not np.issubdtype(arr.dtype, np.floating) or not np.all(arr == np.round(arr)):
            raise InvalidTreeError(
                f"must hold integers, got dtype {arr.dtype}", jet=jet, field=field
            )
    return arr.astype(np.int64, copy=True)


def _validate(children: Any, leaf_of_node: Any, jet: object) -> tuple[np.ndarray, np.ndarray, int]:
    ch = _as_int_array(children, "tree.children", jet, ndim=2)
    if ch.shape[1] != 2 or ch.shape[0] % 2 != 1:
        raise InvalidTreeError(
            f"must have shape (2n-1, 2), got {ch.shape}", jet=jet, field="tree.children"
        )
    m = ch.shape[0]
    n = (m + 1) // 2
    is_leaf = ch[:, 0] < 0
    if np.any(is_leaf != (ch[:, 1] < 0)) or np.any(ch[is_leaf] != -1):
        bad = int(np.flatnonzero((is_leaf != (ch[:, 1] < 0)) | np.any(ch < -1, axis=1))[0])
        raise InvalidTreeError(
            f"node {bad} has children {ch[bad].tolist()}: a node has two children or none "
            "([-1, -1])",
            jet=jet,
            field="tree.children",
        )
    if int(is_leaf.sum()) != n:
        raise InvalidTreeError(
            f"a binary tree with {m} nodes has {n} leaves, found {int(is_leaf.sum())}",
            jet=jet,
            field="tree.children",
        )
    internal = np.flatnonzero(~is_leaf)
    kids = ch[internal].ravel()
    if np.any(kids >= m):
        raise InvalidTreeError(
            f"child index {int(kids.max())} is out of range for {m} nodes",
            jet=jet,
            field="tree.children",
        )
    if np.any(ch[internal, 0] == ch[internal, 1]) or np.any(ch[internal] == internal[:, None]):
        raise InvalidTreeError(
            "a node lists itself or the same child twice", jet=jet, field="tree.children"
        )
    count = np.bincount(kids, minlength=m)
    if np.any(count > 1):
        bad = int(np.flatnonzero(count > 1)[0])
        raise InvalidTreeError(
            f"node {bad} has more than one parent", jet=jet, field="tree.children"
        )
    roots = np.flatnonzero(count == 0)
    if roots.size != 1:
        raise InvalidTreeError(
            f"a tree has exactly one root, found {roots.size}", jet=jet, field="tree.children"
        )
    root = int(roots[0])
    # reachability from the root (no cycles, connected)
    seen = np.zeros(m, dtype=bool)
    stack = [root]
    n_seen = 0
    while stack:
        node = stack.pop()
        if seen[node]:
            raise InvalidTreeError("the children array has a cycle", jet=jet, field="tree.children")
        seen[node] = True
        n_seen += 1
        if ch[node, 0] >= 0:
            stack.append(int(ch[node, 0]))
            stack.append(int(ch[node, 1]))
    if n_seen != m:
        raise InvalidTreeError(
            "not every node is reachable from the root (cycle or forest)",
            jet=jet,
            field="tree.children",
        )
    if leaf_of_node is None:
        leaf = np.full(m, -1, dtype=np.int64)
        leaf[is_leaf] = np.arange(n)
    else:
        leaf = _as_int_array(leaf_of_node, "tree.leaf_of_node", jet, ndim=1)
        if leaf.shape[0] != m:
            raise InvalidTreeError(
                f"must have length {m}, got {leaf.shape[0]}", jet=jet, field="tree.leaf_of_node"
            )
        if np.any(leaf[~is_leaf] != -1):
            raise InvalidTreeError(
                "internal nodes must map to -1", jet=jet, field="tree.leaf_of_node"
            )
        if not np.array_equal(np.sort(leaf[is_leaf]), np.arange(n)):
            raise InvalidTreeError(
                f"leaf nodes must map to the leaf indices 0..{n - 1}, each exactly once",
                jet=jet,
                field="tree.leaf_of_node",
            )
    ch.setflags(write=False)
    leaf.setflags(write=False)
    return ch, leaf, root
