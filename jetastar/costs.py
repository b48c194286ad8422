"""Hierarchical clustering costs on a weighted graph: hierarchical correlation clustering and Dasgupta.

A cost model scores a binary hierarchy over ``n`` points as the sum, over its internal nodes, of a
*split cost* of the node's two children ``A`` and ``B`` (lower is better). Both costs here are functions
of per-cluster sums of the weight matrix ``W`` (``w_ii`` ignored), so a split costs O(1) once the sums
of the three clusters are known:

* **Hierarchical correlation clustering** (:class:`HCCCost`): positive edges cut by the split plus
  negative edges kept together inside each child (Greenberg et al.; the paper's §6)::

      cost(A, B) = P(A ∪ B) − P(A) − P(B) + N(A) + N(B)

  with ``P(S) = Σ_{i<j∈S} max(w_ij, 0)`` and ``N(S) = Σ_{i<j∈S} |min(w_ij, 0)|``.
  Heuristic ``h(S) = P(S)``: every positive edge inside ``S`` is cut exactly once in any hierarchy
  over ``S`` and negative terms are ≥ 0, so ``P(S)`` lower-bounds the cost of every hierarchy over ``S``
  (the paper's Proposition; the public reference used Σ|negative| instead, which is not a bound).
* **Dasgupta's cost** (:class:`DasguptaCost`, non-negative weights)::

      cost(A, B) = (|A| + |B|) · (W(A ∪ B) − W(A) − W(B)),    W(S) = Σ_{i<j∈S} w_ij

  Heuristic ``h(S) = 2 W(S)``: every edge inside ``S`` is cut exactly once, at a node with at least
  two points, so it pays at least ``2 w_ij``. This is twice the paper's ``h_d1 = W(S)`` and still a
  lower bound.

The heuristic of a single point is 0. ``h(S)`` bounds the cost of the whole sub-hierarchy over ``S``,
the split of ``S`` itself included.

Kernels (numba, all dispatching on the model ``code``; features are ``(P, N, W, size)`` rows):

* :func:`split_cost_kernel` ``(code, fa, fb, fs)``: the definition, from the features of the two parts
  and of their union.
* Engines that score many splits of one parent (the exact trellis) use the equivalent *parent form*
  ``cost(A, B) = γ(S) · (α(S) − β(A) − β(B))`` with ``S = A ∪ B``: HCC ``α = P``, ``β = P − N``,
  ``γ = 1``; Dasgupta ``α = W``, ``β = W``, ``γ = |S|`` (since ``|A| + |B| = |S|``). Per split that
  reads one number per part: :func:`part_value_kernel` (``β``), :func:`parent_cost_terms`
  (``α, γ``), :func:`split_cost_given_parent`.
* Agglomerative engines use the *cross form* :func:`merge_cost_kernel`
  ``(code, fa, fb, p_cross, n_cross)`` with the positive and ``|negative|`` weight sums over the pairs
  ``i ∈ A, j ∈ B``: HCC ``P_x + N(A) + N(B)``, Dasgupta ``(|A| + |B|) W_x`` (``W_x = P_x − N_x``).
  A cost that is zero is then exactly zero (no cancellation), which keeps ties exact.

Inputs: a dense or scipy-sparse symmetric affinity matrix, or points with a cosine similarity
(:func:`affinities_from_points`, with the paper's mean subtraction for HCC).

Example:
    >>> import numpy as np
    >>> from jetastar.costs import HCCCost
    >>> W = np.array([[0, 1, -1], [1, 0, -1], [-1, -1, 0]])
    >>> cost = HCCCost(W)
    >>> cost.split_cost([0, 1], [2])      # no positive edge cut, no negative edge kept
    0.0
    >>> cost.split_cost([0, 2], [1])      # cuts (0,1) = 1, keeps (0,2) = |-1|
    2.0
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

import numba as nb
import numpy as np

from .errors import TooLargeError
from .tree import Tree

__all__ = ["MAX_POINTS", "CostModel", "DasguptaCost", "HCCCost", "affinities_from_points"]

#: Model code the engines use for the Ginkgo likelihood (cost models have codes >= 1).
GINKGO_CODE = 0

#: Clusters are 64-bit masks: at most 62 points for the bitmask engines.
MAX_POINTS = 62

#: Largest |w_ij − w_ji| / max(1, max|w|) accepted as rounding (the matrix is then symmetrised).
_SYMMETRY_TOL = 1e-6

# model codes understood by the kernels
HCC_CODE = 1
DASGUPTA_CODE = 2


def _validate_matrix(weights: Any, name: str, *, nonnegative: bool) -> np.ndarray:
    """Dense float64 symmetric matrix with a zero diagonal, or a clear ValueError."""
    try:
        import scipy.sparse as sp

        if sp.issparse(weights):
            weights = weights.toarray()
    except ImportError:  # pragma: no cover - scipy is a dependency
        pass
    try:
        w = np.array(weights, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name}: the affinity matrix cannot be read as numbers: {exc}") from exc
    if w.ndim != 2 or w.shape[0] != w.shape[1]:
        raise ValueError(f"{name}: the affinity matrix must be square (n, n), got shape {w.shape}")
    if w.shape[0] < 1:
        raise ValueError(f"{name}: the affinity matrix is empty")
    bad = ~np.isfinite(w)
    if np.any(bad):
        i, j = np.argwhere(bad)[0]
        raise ValueError(f"{name}: the affinity matrix has a non-finite entry w[{i}, {j}] = {w[i, j]}")
    asym = np.abs(w - w.T)
    scale = max(1.0, float(np.abs(w).max()))
    # float32-computed similarities (e.g. the ALOI n = 40 samples) are symmetric only to ~4e-7:
    # differences below _SYMMETRY_TOL * scale are rounding and get averaged away below
    if np.any(asym > _SYMMETRY_TOL * scale):
        i, j = np.unravel_index(int(np.argmax(asym)), asym.shape)
        raise ValueError(
            f"{name}: the affinity matrix must be symmetric; w[{i}, {j}] = {w[i, j]} but "
            f"w[{j}, {i}] = {w[j, i]}"
        )
    w = 0.5 * (w + w.T)
    np.fill_diagonal(w, 0.0)
    if nonnegative and np.any(w < 0):
        i, j = np.argwhere(w < 0)[0]
        raise ValueError(
            f"{name}: Dasgupta's cost needs non-negative similarities, got w[{i}, {j}] = {w[i, j]}"
        )
    w.setflags(write=False)
    return w


def affinities_from_points(
    points: Any, *, subtract_mean: bool = True, similarity: str = "cosine"
) -> np.ndarray:
    """Pairwise affinities of points, as in the paper's benchmark experiments.

    Args:
        points: ``(n, d)`` feature vectors.
        subtract_mean: subtract the mean similarity (turns cosine similarities into signed
            affinities for correlation clustering). As in the paper's benchmark graphs the mean is
            taken over all ``n²`` entries, the diagonal (self-similarity 1) included.
        similarity: only ``"cosine"``.

    Returns:
        ``(n, n)`` symmetric float64 matrix with a zero diagonal.
    """
    if similarity != "cosine":
        raise ValueError(f"unknown similarity {similarity!r}; valid: 'cosine'")
    x = np.asarray(points, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] < 1:
        raise ValueError(f"points must have shape (n, d), got {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError("points have non-finite values")
    norms = np.linalg.norm(x, axis=1)
    if np.any(norms == 0):
        raise ValueError(f"point {int(np.flatnonzero(norms == 0)[0])} is zero: cosine undefined")
    u = x / norms[:, None]
    s = u @ u.T
    if subtract_mean:
        s = s - s.mean()
    np.fill_diagonal(s, 0.0)
    return 0.5 * (s + s.T)


@nb.njit(cache=True)
def _features_of_masks(masks, pos, neg, w):  # pragma: no cover - numba
    """Per-mask (P, N, W, size) from the positive / |negative| / raw weight matrices."""
    out = np.zeros((masks.shape[0], 4), dtype=np.float64)
    n = w.shape[0]
    idx = np.empty(n, dtype=np.int64)
    for k in range(masks.shape[0]):
        m = masks[k]
        size = 0
        for i in range(n):
            if (m >> i) & 1:
                idx[size] = i
                size += 1
        p = 0.0
        q = 0.0
        r = 0.0
        for a in range(size):
            ia = idx[a]
            for b in range(a + 1, size):
                ib = idx[b]
                p += pos[ia, ib]
                q += neg[ia, ib]
                r += w[ia, ib]
        out[k, 0] = p
        out[k, 1] = q
        out[k, 2] = r
        out[k, 3] = size
    return out


@nb.njit(cache=True)
def all_subset_features_kernel(pos, neg, w):  # pragma: no cover - numba
    """(P, N, W, size) for every mask 0 .. 2**n − 1 by the lowest-bit recurrence, O(n 2^n)."""
    n = w.shape[0]
    total = np.int64(1) << n
    out = np.zeros((total, 4), dtype=np.float64)
    for s in range(1, total):
        low = s & -s
        i = 0
        while (np.int64(1) << i) != low:
            i += 1
        rest = s ^ low
        p = out[rest, 0]
        q = out[rest, 1]
        r = out[rest, 2]
        j_mask = rest
        while j_mask:
            jl = j_mask & -j_mask
            j = 0
            while (np.int64(1) << j) != jl:
                j += 1
            p += pos[i, j]
            q += neg[i, j]
            r += w[i, j]
            j_mask ^= jl
        out[s, 0] = p
        out[s, 1] = q
        out[s, 2] = r
        out[s, 3] = out[rest, 3] + 1.0
    return out


@nb.njit(cache=True)
def split_cost_kernel(code, fa, fb, fs):  # pragma: no cover - numba
    """Split cost from the features ``(P, N, W, size)`` of the two parts and of their union."""
    if code == HCC_CODE:
        return fs[0] - fa[0] - fb[0] + fa[1] + fb[1]
    # Dasgupta
    return (fa[3] + fb[3]) * (fs[2] - fa[2] - fb[2])


@nb.njit(cache=True)
def part_value_kernel(code, f):  # pragma: no cover - numba
    """``β`` of a part with features ``f`` in the parent form of the split cost (module docstring)."""
    if code == HCC_CODE:
        return f[0] - f[1]
    return f[2]


@nb.njit(cache=True)
def parent_cost_terms(code, fs):  # pragma: no cover - numba
    """``(α, γ)`` of a parent with features ``fs`` in the parent form of the split cost."""
    if code == HCC_CODE:
        return fs[0], 1.0
    return fs[2], fs[3]


@nb.njit(cache=True)
def split_cost_given_parent(code, beta_a, beta_b, alpha, gamma):  # pragma: no cover - numba
    """Split cost ``γ (α − β_a − β_b)`` from :func:`part_value_kernel` of the parts and
    :func:`parent_cost_terms` of the parent (equal to :func:`split_cost_kernel` up to rounding)."""
    return gamma * (alpha - beta_a - beta_b)


@nb.njit(cache=True)
def merge_cost_kernel(code, fa, fb, p_cross, n_cross):  # pragma: no cover - numba
    """Split cost from the features of the two parts and the sums of the positive and |negative|
    weights of the pairs between them (so ``fs = fa + fb + (P_x, N_x, P_x − N_x, 0)``); no
    cancellation, so a zero cost is exactly zero."""
    if code == HCC_CODE:
        return p_cross + fa[1] + fb[1]
    return (fa[3] + fb[3]) * (p_cross - n_cross)


@nb.njit(cache=True)
def heuristic_kernel(code, f):  # pragma: no cover - numba
    """Admissible lower bound on the cost of any hierarchy over a cluster with features ``f``."""
    if f[3] <= 1.0:
        return 0.0
    if code == HCC_CODE:
        return f[0]
    return 2.0 * f[2]


@nb.njit(cache=True)
def _heuristics_of(code, feats):  # pragma: no cover - numba
    out = np.empty(feats.shape[0], dtype=np.float64)
    for k in range(feats.shape[0]):
        out[k] = heuristic_kernel(code, feats[k])
    return out


@nb.njit(cache=True)
def _tree_cost_kernel(code, children, leaf_of_node, post, pos, neg):  # pragma: no cover - numba
    """Sum of the split costs of a tree, O(n²): in post-order the leaves of every subtree are a
    contiguous run of ``order``, so the cross sums of a split are a rectangle of pairs."""
    n_nodes = children.shape[0]
    n = (n_nodes + 1) // 2
    feat = np.zeros((n_nodes, 4), dtype=np.float64)
    lo = np.empty(n_nodes, dtype=np.int64)
    hi = np.empty(n_nodes, dtype=np.int64)
    order = np.empty(n, dtype=np.int64)
    count = 0
    total = 0.0
    for node in post:
        a = children[node, 0]
        if a < 0:
            order[count] = leaf_of_node[node]
            lo[node] = count
            count += 1
            hi[node] = count
            feat[node, 3] = 1.0
            continue
        b = children[node, 1]
        p_x = 0.0
        n_x = 0.0
        for u in range(lo[a], hi[a]):
            i = order[u]
            for v in range(lo[b], hi[b]):
                j = order[v]
                p_x += pos[i, j]
                n_x += neg[i, j]
        total += merge_cost_kernel(code, feat[a], feat[b], p_x, n_x)
        feat[node, 0] = feat[a, 0] + feat[b, 0] + p_x
        feat[node, 1] = feat[a, 1] + feat[b, 1] + n_x
        feat[node, 2] = feat[a, 2] + feat[b, 2] + (p_x - n_x)
        feat[node, 3] = feat[a, 3] + feat[b, 3]
        lo[node] = min(lo[a], lo[b])
        hi[node] = max(hi[a], hi[b])
    return total


class CostModel:
    """A hierarchical-clustering cost over ``n`` points defined by an affinity matrix.

    Subclasses set the model code. Use :meth:`split_cost`, :meth:`tree_cost` and
    :meth:`heuristic` from Python; engines use :meth:`features` / :meth:`all_subset_features` and
    the kernels :func:`split_cost_kernel`, :func:`heuristic_kernel`.

    Args:
        weights: ``(n, n)`` symmetric affinities (dense or scipy sparse, finite); the diagonal is
            ignored. Asymmetries up to ``1e-6 · max(1, max|w|)`` (float32 rounding) are averaged
            away; larger ones raise ValueError.
    """

    code: ClassVar[int] = 0
    name: ClassVar[str] = "cost"
    _nonnegative: ClassVar[bool] = False

    def __init__(self, weights: Any) -> None:
        self.weights = _validate_matrix(weights, type(self).__name__, nonnegative=self._nonnegative)
        self._pos = np.ascontiguousarray(np.maximum(self.weights, 0.0))
        self._neg = np.ascontiguousarray(np.abs(np.minimum(self.weights, 0.0)))

    @classmethod
    def from_points(cls, points: Any, **kwargs: Any) -> CostModel:
        """Cost model over points with cosine affinities (see :func:`affinities_from_points`)."""
        return cls(affinities_from_points(points, **kwargs))

    @property
    def n_points(self) -> int:
        """Number of points ``n``."""
        return int(self.weights.shape[0])

    @property
    def label(self) -> str:
        """What error messages call this dataset."""
        return f"{self.name} graph with {self.n_points} points"

    @property
    def positive_weights(self) -> np.ndarray:
        """``max(w, 0)`` elementwise: the attractive part of the weights (the kernels' ``pos``)."""
        return self._pos

    @property
    def negative_weights(self) -> np.ndarray:
        """``|min(w, 0)|`` elementwise: the repulsive part of the weights (the kernels' ``neg``)."""
        return self._neg

    def _mask(self, indices: Iterable[int] | int) -> int:
        if isinstance(indices, (int, np.integer)):
            return int(indices)
        mask = 0
        for i in indices:
            i = int(i)
            if not 0 <= i < self.n_points:
                raise ValueError(f"point index {i} out of range for {self.n_points} points")
            mask |= 1 << i
        return mask

    def _check_bitmask_size(self) -> None:
        if self.n_points > MAX_POINTS:
            raise TooLargeError(
                f"{self.label}: bitmask engines handle at most {MAX_POINTS} points"
            )

    def features(self, masks: Any) -> np.ndarray:
        """``(P, N, W, size)`` of the clusters given as int64 bitmasks."""
        self._check_bitmask_size()
        m = np.atleast_1d(np.asarray(masks, dtype=np.int64))
        return _features_of_masks(m, self._pos, self._neg, np.ascontiguousarray(self.weights))

    def all_subset_features(self) -> np.ndarray:
        """``(2**n, 4)`` features of every subset (row = bitmask), for the exact trellis."""
        self._check_bitmask_size()
        return all_subset_features_kernel(self._pos, self._neg, np.ascontiguousarray(self.weights))

    def heuristics(self, masks: Any) -> np.ndarray:
        """:meth:`heuristic` of many clusters given as int64 bitmasks (float64 array).

        Example:
            >>> import numpy as np
            >>> HCCCost(np.array([[0, 2, -1], [2, 0, 3], [-1, 3, 0]])).heuristics([3, 7]).tolist()
            [2.0, 5.0]
        """
        return _heuristics_of(self.code, self.features(masks))

    def split_cost(self, left: Iterable[int] | int, right: Iterable[int] | int) -> float:
        """Cost of splitting ``left ∪ right`` into ``left`` and ``right`` (index lists or masks)."""
        a, b = self._mask(left), self._mask(right)
        if a == 0 or b == 0 or a & b:
            raise ValueError("a split needs two non-empty disjoint parts")
        fa, fb, fs = self.features([a, b, a | b])
        return float(split_cost_kernel(self.code, fa, fb, fs))

    def heuristic(self, indices: Iterable[int] | int) -> float:
        """Admissible lower bound on the cost of any hierarchy over these points."""
        (f,) = self.features([self._mask(indices)])
        return float(heuristic_kernel(self.code, f))

    def tree_cost(self, tree: Tree) -> float:
        """Total cost of a hierarchy: the sum of its split costs (any ``n``, O(n²)).

        Every pair of points is visited once, at the split that separates it; per-node features
        are sums of the children's plus those cross sums, and each split is scored with
        :func:`merge_cost_kernel`.

        Args:
            tree: a :class:`jetastar.Tree` over the ``n`` points.

        Returns:
            The cost (lower is better).
        """
        if tree.n_leaves != self.n_points:
            raise ValueError(
                f"{self.label}: the tree has {tree.n_leaves} leaves, expected {self.n_points}"
            )
        if tree.n_leaves == 1:
            return 0.0
        return float(
            _tree_cost_kernel(
                self.code, tree.children, tree.leaf_of_node, tree.postorder(), self._pos, self._neg
            )
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(n_points={self.n_points})"


class HCCCost(CostModel):
    """Hierarchical correlation clustering cost (signed affinities); heuristic ``P(S)``.

    Example:
        >>> import numpy as np
        >>> from jetastar import Tree
        >>> W = np.array([[0, 2, -1], [2, 0, -1], [-1, -1, 0]])
        >>> HCCCost(W).tree_cost(Tree.from_nested(((0, 1), 2)))  # cut (0,1) at the bottom
        2.0
    """

    code = HCC_CODE
    name = "hcc"


class DasguptaCost(CostModel):
    """Dasgupta's cost (non-negative similarities); heuristic ``2 W(S)``.

    Example:
        >>> import numpy as np
        >>> from jetastar import Tree
        >>> W = np.array([[0, 2, 1], [2, 0, 1], [1, 1, 0]])
        >>> DasguptaCost(W).tree_cost(Tree.from_nested(((0, 1), 2)))  # 3·(1+1) + 2·2
        10.0
    """

    code = DASGUPTA_CODE
    name = "dasgupta"
    _nonnegative = True
