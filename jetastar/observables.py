"""Jet-substructure observables of clustering trees, vectorised over collections.

Every function takes jets and trees over their leaves — the truth trees, MAP trees, kt / C/A /
anti-kt trees, anything — and returns an awkward array with one entry per jet. The trees are walked
by numba kernels over flat arrays, so a whole collection costs one call.

* :func:`lund_declustering` — the primary Lund plane: from the root, decluster each node into its two
  children, record ``ΔR``, ``k_t``, ``z`` of the split and follow the harder (higher-pT) branch;
* :func:`soft_drop` — soft-drop grooming with ``z_cut`` and ``β`` along the same walk;
* :func:`exclusive_subjets` — the ``n`` subjets left when the ``n − 1`` last splits are undone;
* :func:`root_split` — the two subjets of the root split (masses, ``z``, ``ΔR``);
* :func:`tree_shape` — depth and tree-shape measures (mean leaf depth, Sackin and Colless indices,
  primary-chain length);
* :func:`tree_observables` — the scalars of all of these in one flat record per jet;
* :func:`write_observables` — those of every algorithm of a results file, written as a friend tree
  (``jetastar observables RESULTS -o obs.root``).

Conventions (those of FastJet and its Lund-plane and soft-drop tools, so kt-family trees give the
same numbers): ``pT = √(px² + py²)``, rapidity ``y = ½ ln((E + pz)/(E − pz))``, azimuth ``φ``,
``ΔR² = Δy² + Δφ²`` with ``Δφ`` wrapped into ``[−π, π]``; for a split into ``a`` and ``b`` with
``pT_a >= pT_b``: ``z = pT_b / (pT_a + pT_b)``, ``k_t = pT_b ΔR``, ``κ = z ΔR``, ``m`` the mass of
the node being split. FastJet's own tools recluster a jet with Cambridge/Aachen first; these functions
use the tree they are given (on a C/A tree the two agree; ``tests/test_observables.py`` checks it).

Inputs: ``jets`` is a :class:`~jetastar.Jet`, a :class:`~jetastar.JetCollection`, a list of jets, or
an awkward array of jets (``n_jets * var * momentum`` in any coordinates ``vector`` understands, or
records with a ``leaves`` field as written by :meth:`JetCollection.to_awkward`). ``trees`` is
``None`` (the jets' truth trees), a :class:`~jetastar.Tree` (with a single jet), a list of trees,
:class:`~jetastar.clustering.ClusteringResult` objects or ``None`` (one per jet), or an
:class:`~jetastar.io.AlgorithmResults` table (rows matched to jets by ``jet_index``). A jet without a
tree gives ``None`` (records) or an empty list. With a single :class:`~jetastar.Jet` the result is
that jet's entry instead of an array of one.

Example:
    >>> from jetastar.ginkgo import ShowerParams, generate
    >>> from jetastar.observables import lund_declustering, soft_drop
    >>> jets = generate(5, ShowerParams.qcd(), seed=1)
    >>> lund = lund_declustering(jets)          # truth trees
    >>> [str(f) for f in lund.fields]
    ['delta_r', 'kt', 'z', 'kappa', 'm', 'node']
    >>> import awkward as ak
    >>> sd = soft_drop(jets, z_cut=0.1, beta=0.0)
    >>> bool(ak.all(sd.mass <= sd.jet_mass + 1e-9))
    True
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator, Sequence
from typing import Any

import numba as nb
import numpy as np

from . import io
from ._atomic import atomic_path
from .io.dispatch import columns, iterate_status_columns, read_results_rows
from .io.root import root_compression
from .momenta import rap_phi_kt2
from .tree_arrays import FlatTrees, flat_trees

__all__ = [
    "OBSERVABLES_SCHEMA_VERSION",
    "SUBJET_ORDERS",
    "exclusive_subjets",
    "lund_declustering",
    "root_split",
    "soft_drop",
    "tree_observables",
    "tree_shape",
    "write_observables",
]

#: orderings of :func:`exclusive_subjets`: which split is undone first.
SUBJET_ORDERS = ("mass", "kt", "cambridge", "antikt")

_TWOPI = 2.0 * math.pi


# ---------------------------------------------------------------------- kernels
@nb.njit(cache=True)
def _pair(p, x, y):  # pragma: no cover - numba
    """``(pT_x, pT_y, ΔR)`` of two nodes (FastJet conventions)."""
    rx, phx, kx = rap_phi_kt2(p[x, 0], p[x, 1], p[x, 2], p[x, 3])
    ry, phy, ky = rap_phi_kt2(p[y, 0], p[y, 1], p[y, 2], p[y, 3])
    dphi = abs(phx - phy)
    if dphi > math.pi:
        dphi = _TWOPI - dphi
    dy = rx - ry
    return math.sqrt(kx), math.sqrt(ky), math.sqrt(dy * dy + dphi * dphi)


@nb.njit(cache=True)
def _mass(p, k):  # pragma: no cover - numba
    t = p[k, 0] * p[k, 0] - (p[k, 1] * p[k, 1] + p[k, 2] * p[k, 2] + p[k, 3] * p[k, 3])
    return math.sqrt(t) if t > 0.0 else 0.0


@nb.njit(cache=True)
def _lund(children, node_offsets, node_p, root):  # pragma: no cover - numba
    """Primary declusterings: counts per jet and flat ``(ΔR, k_t, z, κ, m)`` and node index."""
    n_jets = root.shape[0]
    counts = np.zeros(n_jets, dtype=np.int64)
    total = 0
    for j in range(n_jets):
        if root[j] < 0:
            continue
        a = node_offsets[j]
        k = root[j]
        while children[a + k, 0] >= 0:
            counts[j] += 1
            c0 = children[a + k, 0]
            c1 = children[a + k, 1]
            # the harder branch chosen as the second pass chooses it (on pT, not pT²: two pT² one
            # unit in the last place apart can have equal square roots, and a walk that went
            # another way would write more rows than were counted)
            pt0, pt1, _ = _pair(node_p, a + c0, a + c1)
            k = c0 if pt0 >= pt1 else c1
        total += counts[j]
    vals = np.empty((total, 5), dtype=np.float64)
    nodes = np.empty(total, dtype=np.int64)
    row = 0
    for j in range(n_jets):
        if root[j] < 0:
            continue
        a = node_offsets[j]
        k = root[j]
        while children[a + k, 0] >= 0:
            c0 = children[a + k, 0]
            c1 = children[a + k, 1]
            pt0, pt1, dr = _pair(node_p, a + c0, a + c1)
            if pt0 >= pt1:
                hard, soft_pt, hard_pt = c0, pt1, pt0
            else:
                hard, soft_pt, hard_pt = c1, pt0, pt1
            z = soft_pt / (soft_pt + hard_pt) if soft_pt + hard_pt > 0.0 else 0.0
            vals[row, 0] = dr
            vals[row, 1] = soft_pt * dr
            vals[row, 2] = z
            vals[row, 3] = z * dr
            vals[row, 4] = _mass(node_p, a + k)
            nodes[row] = k
            row += 1
            k = hard
    return counts, vals, nodes


@nb.njit(cache=True)
def _soft_drop(children, node_offsets, node_p, size, root, z_cut, beta, r0):  # pragma: no cover
    """Soft drop along the harder branch: per jet the kept node, ``z_g``, ``R_g``, branches dropped."""
    n_jets = root.shape[0]
    kept = np.full(n_jets, -1, dtype=np.int64)
    zg = np.zeros(n_jets, dtype=np.float64)
    rg = np.zeros(n_jets, dtype=np.float64)
    dropped = np.zeros(n_jets, dtype=np.int64)
    dropped_leaves = np.zeros(n_jets, dtype=np.int64)
    for j in range(n_jets):
        if root[j] < 0:
            continue
        a = node_offsets[j]
        k = root[j]
        while children[a + k, 0] >= 0:
            c0 = children[a + k, 0]
            c1 = children[a + k, 1]
            pt0, pt1, dr = _pair(node_p, a + c0, a + c1)
            s = pt0 + pt1
            z = min(pt0, pt1) / s if s > 0.0 else 0.0
            cut = z_cut
            if beta != 0.0:
                cut = z_cut * (dr / r0) ** beta if dr > 0.0 else 0.0
            if z > cut:
                zg[j] = z
                rg[j] = dr
                break
            dropped[j] += 1
            if pt0 >= pt1:
                dropped_leaves[j] += size[a + c1]
                k = c0
            else:
                dropped_leaves[j] += size[a + c0]
                k = c1
        kept[j] = k
    return kept, zg, rg, dropped, dropped_leaves


@nb.njit(cache=True)
def _split_key(p, x, y, parent, order):  # pragma: no cover - numba
    """How late a split happened: the larger, the earlier it is undone."""
    if order == 0:  # mass²
        return p[parent, 0] ** 2 - (p[parent, 1] ** 2 + p[parent, 2] ** 2 + p[parent, 3] ** 2)
    ptx, pty, dr = _pair(p, x, y)
    if order == 1:  # kt distance
        return min(ptx * ptx, pty * pty) * dr * dr
    if order == 2:  # Cambridge/Aachen
        return dr * dr
    lo = max(ptx * ptx, pty * pty)  # anti-kt: min(1/pT²) ΔR²
    return dr * dr / lo if lo > 0.0 else np.inf


@nb.njit(cache=True)
def _exclusive(children, node_offsets, node_p, root, n_sub, order):  # pragma: no cover - numba
    """The nodes left after undoing the ``n_sub − 1`` splits with the largest keys (per jet)."""
    n_jets = root.shape[0]
    counts = np.zeros(n_jets, dtype=np.int64)
    out = np.empty(n_jets * n_sub, dtype=np.int64)
    keys = np.empty(n_sub, dtype=np.float64)
    front = np.empty(n_sub, dtype=np.int64)
    total = 0
    for j in range(n_jets):
        if root[j] < 0:
            continue
        a = node_offsets[j]
        m = 1
        front[0] = root[j]
        keys[0] = -np.inf
        if children[a + root[j], 0] >= 0:
            keys[0] = _split_key(node_p, a + children[a + root[j], 0],
                                 a + children[a + root[j], 1], a + root[j], order)
        while m < n_sub:
            best = -1
            for i in range(m):
                if children[a + front[i], 0] >= 0 and (best < 0 or keys[i] > keys[best]):
                    best = i
            if best < 0:
                break
            k = front[best]
            for side in range(2):
                c = children[a + k, side]
                idx = best if side == 0 else m
                front[idx] = c
                keys[idx] = -np.inf
                if children[a + c, 0] >= 0:
                    keys[idx] = _split_key(node_p, a + children[a + c, 0],
                                           a + children[a + c, 1], a + c, order)
            m += 1
        for i in range(m):
            out[total + i] = a + front[i]
        counts[j] = m
        total += m
    return counts, out[:total]


@nb.njit(cache=True)
def _shape(children, node_offsets, depth, size, root):  # pragma: no cover - numba
    """Per jet: depth, Sackin index (sum of leaf depths), Colless index, number of leaves."""
    n_jets = root.shape[0]
    max_depth = np.zeros(n_jets, dtype=np.int64)
    sackin = np.zeros(n_jets, dtype=np.int64)
    colless = np.zeros(n_jets, dtype=np.int64)
    for j in range(n_jets):
        if root[j] < 0:
            continue
        for k in range(node_offsets[j], node_offsets[j + 1]):
            c0 = children[k, 0]
            if c0 < 0:
                sackin[j] += depth[k]
                if depth[k] > max_depth[j]:
                    max_depth[j] = depth[k]
            else:
                base = node_offsets[j]
                colless[j] += abs(size[base + c0] - size[base + children[k, 1]])
    return max_depth, sackin, colless


# ---------------------------------------------------------------------- input handling
def _momenta(flat: np.ndarray) -> Any:
    import awkward as ak
    import vector

    vector.register_awkward()
    return ak.zip({"E": flat[:, 0], "px": flat[:, 1], "py": flat[:, 2], "pz": flat[:, 3]},
                  with_name="Momentum4D")


def _masked(array: Any, valid: np.ndarray) -> Any:
    """``None`` where a jet has no tree."""
    import awkward as ak

    if np.all(valid):
        return array
    return ak.mask(array, valid)


def _jet_mass(batch: FlatTrees) -> np.ndarray:
    out = np.full(batch.n_jets, np.nan)
    have = batch.has_tree
    p = batch.node_p[batch.node_offsets[:-1][have] + batch.root[have]]
    out[have] = np.sqrt(np.clip(p[:, 0] ** 2 - np.sum(p[:, 1:] ** 2, axis=1), 0.0, None))
    return out


# ---------------------------------------------------------------------- public functions
def lund_declustering(jets: Any, trees: Any = None) -> Any:
    """The primary Lund-plane declusterings of each tree (following the harder branch).

    Args:
        jets: jets (see the module docstring for the accepted forms).
        trees: their trees (default: the truth trees).

    Returns:
        ``n_jets * var * {delta_r, kt, z, kappa, m, node}``, the root split first: ``delta_r`` the
        opening angle of the split, ``kt = pT_soft · ΔR`` (GeV), ``z = pT_soft / (pT_a + pT_b)``,
        ``kappa = z · ΔR``, ``m`` the mass of the node split (GeV), ``node`` its index in the tree.
        The usual Lund-plane axes are ``ln(1/ΔR)`` and ``ln(k_t)``. A jet without a tree has an
        empty list.

    Example:
        >>> import numpy as np
        >>> from jetastar.ginkgo import ShowerParams, generate
        >>> jets = generate(3, ShowerParams.w(), seed=4)
        >>> lund = lund_declustering(jets)
        >>> bool(np.all(lund.z[:, 0] <= 0.5))
        True
    """
    import awkward as ak

    b = flat_trees(jets, trees)
    counts, vals, nodes = _lund(b.children, b.node_offsets, b.node_p, b.root)
    flat = ak.zip({
        "delta_r": vals[:, 0], "kt": vals[:, 1], "z": vals[:, 2], "kappa": vals[:, 3],
        "m": vals[:, 4], "node": b.local(nodes, counts),
    })
    return b.finish(ak.unflatten(flat, counts))


def check_soft_drop_parameters(z_cut: float, beta: float, r0: float) -> None:
    """Raise ``ValueError`` naming the first soft-drop parameter out of range: ``z_cut >= 0``,
    ``beta >= 0``, ``r0 > 0``, all finite."""
    if not (math.isfinite(z_cut) and z_cut >= 0.0):
        raise ValueError(f"z_cut must be a finite number >= 0, got {z_cut!r}")
    if not (math.isfinite(beta) and beta >= 0.0):
        raise ValueError(f"beta must be a finite number >= 0, got {beta!r}")
    if not (math.isfinite(r0) and r0 > 0.0):
        raise ValueError(f"r0 must be a finite number > 0, got {r0!r}")


def soft_drop(
    jets: Any, trees: Any = None, *, z_cut: float = 0.1, beta: float = 0.0, r0: float = 1.0
) -> Any:
    """Soft-drop grooming along the harder branch of each tree.

    From the root: split the node into its children ``a``, ``b``; if
    ``min(pT_a, pT_b) / (pT_a + pT_b) > z_cut · (ΔR_ab / r0)^β`` stop and keep the node, else drop
    the softer child and go on with the harder. A jet whose every split fails keeps its hardest
    leaf (``zg = rg = 0``; FastJet's soft drop gives −1 there). ``beta = 0`` is the modified
    mass-drop tagger.

    Args:
        jets: jets (module docstring).
        trees: their trees (default: the truth trees).
        z_cut: the symmetry cut (``>= 0``).
        beta: the angular exponent (``>= 0``).
        r0: the angular scale (``> 0``; FastJet's R0; 1 by default since Ginkgo jets are not cut
            at a radius).

    Returns:
        Records per jet: ``jet`` (the groomed 4-vector, ``Momentum4D``), ``mass`` (GeV), ``jet_mass``
        (ungroomed), ``zg``, ``rg``, ``n_dropped`` (branches removed), ``n_leaves_dropped``,
        ``n_leaves`` (kept), ``node`` (the kept node's index); ``None`` for a jet without a tree.
    """
    import awkward as ak

    check_soft_drop_parameters(z_cut, beta, r0)
    b = flat_trees(jets, trees)
    kept, zg, rg, dropped, dropped_leaves = _soft_drop(
        b.children, b.node_offsets, b.node_p, b.size, b.root, float(z_cut), float(beta), float(r0)
    )
    have = b.has_tree
    glob = np.where(have, b.node_offsets[:-1] + np.maximum(kept, 0), 0)
    p = b.node_p[glob] if b.node_p.shape[0] else np.zeros((b.n_jets, 4))
    mass = np.sqrt(np.clip(p[:, 0] ** 2 - np.sum(p[:, 1:] ** 2, axis=1), 0.0, None))
    size = b.size[glob] if b.size.shape[0] else np.zeros(b.n_jets, np.int64)
    rec = ak.zip({
        "jet": _momenta(p), "mass": mass, "jet_mass": _jet_mass(b), "zg": zg, "rg": rg,
        "n_dropped": dropped, "n_leaves_dropped": dropped_leaves, "n_leaves": size, "node": kept,
    }, depth_limit=1)
    return b.finish(_masked(rec, have))


def exclusive_subjets(jets: Any, trees: Any = None, n: int = 2, *, order: str = "mass") -> Any:
    """The subjets left when the last ``n − 1`` splits of each tree are undone.

    Splits are undone one at a time, always the one with the largest ordering key among the current
    subjets, so the result is a cut through the tree.

    Args:
        jets: jets (module docstring).
        trees: their trees (default: the truth trees).
        n: the number of subjets (``>= 1``); a jet with fewer leaves gives all its leaves.
        order: ``"mass"`` (default: undo the heaviest cluster first — the evolution variable of the
            Ginkgo shower, the natural order for MAP and truth trees), ``"kt"`` (the kt distance
            ``min(pT²) ΔR²`` of the split: FastJet's ``exclusive_subjets`` of a kt-clustered jet),
            ``"cambridge"`` (``ΔR²``) or ``"antikt"`` (``min(1/pT²) ΔR²``).

    Returns:
        ``n_jets * var * Momentum4D`` (E, px, py, pz), subjets by decreasing pT; an empty list for a
        jet without a tree.

    Example:
        >>> from jetastar.ginkgo import ShowerParams, generate
        >>> jets = generate(4, ShowerParams.w(), seed=1)
        >>> sub = exclusive_subjets(jets, n=3)
        >>> [len(s) for s in sub.tolist()]
        [3, 3, 3, 3]
    """
    import awkward as ak

    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    if order not in SUBJET_ORDERS:
        raise ValueError(f"unknown order {order!r}; valid: {', '.join(map(repr, SUBJET_ORDERS))}")
    b = flat_trees(jets, trees)
    counts, nodes = _exclusive(b.children, b.node_offsets, b.node_p, b.root, int(n),
                               SUBJET_ORDERS.index(order))
    p = b.node_p[nodes]
    # by decreasing pT within each jet
    jet = np.repeat(np.arange(b.n_jets), counts)
    pt2 = p[:, 1] ** 2 + p[:, 2] ** 2
    perm = np.lexsort((-pt2, jet))
    return b.finish(ak.unflatten(_momenta(p[perm]), counts))


def root_split(jets: Any, trees: Any = None) -> Any:
    """The two subjets of each tree's root split.

    Args:
        jets: jets (module docstring).
        trees: their trees (default: the truth trees).

    Returns:
        Records per jet: ``m_heavy``, ``m_light`` (the two subjet masses, GeV), ``m_jet``, ``z``
        (``pT_soft / (pT_a + pT_b)``), ``delta_r``, ``kt`` (GeV), ``n_heavy``, ``n_light`` (their leaf
        counts); ``None`` for a jet without a tree.

    Example:
        >>> from jetastar.ginkgo import ShowerParams, generate
        >>> import numpy as np
        >>> rs = root_split(generate(3, ShowerParams.w(), seed=2))
        >>> bool(np.all(rs.m_heavy >= rs.m_light))
        True
    """
    import awkward as ak

    b = flat_trees(jets, trees)
    have = b.has_tree
    base = b.node_offsets[:-1]
    r = np.where(have, base + np.maximum(b.root, 0), 0)
    out = {k: np.full(b.n_jets, np.nan) for k in ("m_heavy", "m_light", "m_jet", "z", "delta_r",
                                                   "kt")}
    nh = np.zeros(b.n_jets, dtype=np.int64)
    nl = np.zeros(b.n_jets, dtype=np.int64)
    if b.children.shape[0]:
        c0 = np.where(have, base + b.children[r, 0], 0)
        c1 = np.where(have, base + b.children[r, 1], 0)
        lund_counts, vals, _ = _lund(b.children, b.node_offsets, b.node_p, b.root)
        first = np.concatenate([[0], np.cumsum(lund_counts)[:-1]])
        got = have & (lund_counts > 0)
        for key, col in (("delta_r", 0), ("kt", 1), ("z", 2)):
            out[key][got] = vals[first[got], col]

        def mass(idx: np.ndarray) -> np.ndarray:
            q = b.node_p[idx]
            return np.sqrt(np.clip(q[:, 0] ** 2 - np.sum(q[:, 1:] ** 2, axis=1), 0.0, None))

        m0, m1 = mass(c0), mass(c1)
        heavy_is_0 = m0 >= m1
        out["m_heavy"] = np.where(have, np.maximum(m0, m1), np.nan)
        out["m_light"] = np.where(have, np.minimum(m0, m1), np.nan)
        out["m_jet"] = np.where(have, mass(r), np.nan)
        nh = np.where(heavy_is_0, b.size[c0], b.size[c1])
        nl = np.where(heavy_is_0, b.size[c1], b.size[c0])
    rec = ak.zip({**out, "n_heavy": nh, "n_light": nl})
    return b.finish(_masked(rec, have))


def tree_shape(jets: Any, trees: Any = None) -> Any:
    """Depth and shape measures of each tree.

    Args:
        jets: jets (module docstring; only the leaf counts and trees are used).
        trees: their trees (default: the truth trees).

    Returns:
        Records per jet: ``n_leaves``, ``depth`` (longest root-to-leaf path, in splits),
        ``mean_leaf_depth``, ``sackin`` (sum of leaf depths), ``colless`` (sum over splits of
        ``|n_left − n_right|``: 0 for a perfectly balanced tree, ``(n−1)(n−2)/2`` for a ladder),
        ``n_primary`` (splits along the harder branch, the length of :func:`lund_declustering`);
        ``None`` for a jet without a tree.

    Example:
        >>> from jetastar import Jet, Tree
        >>> import numpy as np
        >>> leaves = np.array([[10.0, 1, 2, 9], [9.0, 2, 1, 8], [8.0, 1, 1, 7], [7.0, 2, 2, 6]])
        >>> s = tree_shape(Jet(leaves), Tree.from_nested((((0, 1), 2), 3)))
        >>> int(s.depth), int(s.colless)
        (3, 3)
    """
    import awkward as ak

    b = flat_trees(jets, trees)
    depth, sackin, colless = _shape(b.children, b.node_offsets, b.depth, b.size, b.root)
    lund_counts, _, _ = _lund(b.children, b.node_offsets, b.node_p, b.root)
    n_leaves = np.diff(b.leaf_offsets)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_depth = sackin / np.maximum(n_leaves, 1)
    rec = ak.zip({
        "n_leaves": n_leaves, "depth": depth, "mean_leaf_depth": mean_depth, "sackin": sackin,
        "colless": colless, "n_primary": lund_counts,
    })
    return b.finish(_masked(rec, b.has_tree))


def tree_observables(
    jets: Any, trees: Any = None, *, z_cut: float = 0.1, beta: float = 0.0, r0: float = 1.0,
    lund: bool = True,
) -> Any:
    """Every scalar observable of each tree in one flat record (for tables and friend trees).

    Args:
        jets: jets (module docstring).
        trees: their trees (default: the truth trees).
        z_cut, beta, r0: soft-drop settings (:func:`soft_drop`).
        lund: also add the primary Lund declusterings as variable-length fields ``lund_delta_r``,
            ``lund_kt``, ``lund_z``.

    Returns:
        Records per jet with ``has_tree`` (bool) and the fields of :func:`root_split` (``m_heavy``,
        ``m_light``, ``m_jet``, ``z``, ``delta_r``, ``kt``, ``n_heavy``, ``n_light``), soft drop
        (``sd_mass``, ``sd_zg``, ``sd_rg``, ``sd_n_dropped``), :func:`tree_shape` (``depth``,
        ``mean_leaf_depth``, ``sackin``, ``colless``, ``n_primary``) and, with ``lund``, the Lund
        lists. Numbers are NaN (floats) or −1 (integers) for a jet without a tree, so the record
        has no missing values.
    """
    import awkward as ak

    b = flat_trees(jets, trees)
    single, b.single = b.single, False
    b_rs = root_split(b)
    sd = soft_drop(b, z_cut=z_cut, beta=beta, r0=r0)
    shape = tree_shape(b)
    have = b.has_tree

    def col(arr: Any, name: str, fill: float) -> np.ndarray:
        return ak.to_numpy(ak.fill_none(arr[name], fill))

    fields: dict[str, Any] = {"has_tree": have}
    for name in ("m_heavy", "m_light", "m_jet", "z", "delta_r", "kt"):
        fields[name] = col(b_rs, name, np.nan)
    for name in ("n_heavy", "n_light"):
        fields[name] = col(b_rs, name, -1)
    fields["sd_mass"] = col(sd, "mass", np.nan)
    fields["sd_zg"] = col(sd, "zg", np.nan)
    fields["sd_rg"] = col(sd, "rg", np.nan)
    fields["sd_n_dropped"] = col(sd, "n_dropped", -1)
    for name in ("depth", "sackin", "colless", "n_primary"):
        fields[name] = col(shape, name, -1)
    fields["mean_leaf_depth"] = col(shape, "mean_leaf_depth", np.nan)
    if lund:
        ld = lund_declustering(b)
        fields["lund_delta_r"] = ld.delta_r
        fields["lund_kt"] = ld.kt
        fields["lund_z"] = ld.z
    rec = ak.zip(fields, depth_limit=1)
    b.single = single
    return b.finish(rec)


#: schema version of files written by :func:`write_observables`
OBSERVABLES_SCHEMA_VERSION = 1


def write_observables(
    path: str | os.PathLike[str],
    results: str | os.PathLike[str],
    *,
    algorithms: Sequence[str] | None = None,
    truth: bool = True,
    z_cut: float = 0.1,
    beta: float = 0.0,
    r0: float = 1.0,
    command: str | None = None,
) -> list[str]:
    """Compute :func:`tree_observables` for every algorithm of a results file and write them as a
    friend tree: one entry per jet, in the order of the file's jets (and of its ``results`` /
    ``clusters`` rows).

    ROOT (``.root``): tree ``observables`` with ``jet_id`` and, per label ``L`` (the algorithm
    name with non-alphanumeric characters replaced by ``_``; ``truth`` for the truth trees),
    branches ``L_<field>`` for the scalar fields and ``L_lund_delta_r[nL_lund]`` etc. HDF5
    (``.h5``): group ``/observables`` with ``jet_id`` and ``/observables/<L>/<field>`` datasets,
    the Lund lists as ``lund_offsets`` plus flat ``lund_delta_r``, ``lund_kt``, ``lund_z``. Both
    carry the schema version, the soft-drop settings and provenance; the file is written
    atomically.

    Args:
        path: the output file.
        results: a results file written by ``jetastar cluster`` / ``run``.
        algorithms: which results (default: all).
        truth: also the truth trees, when the jets have them.
        z_cut, beta, r0: soft-drop settings.
        command: the command line, for provenance.

    Returns:
        The labels written.
    """
    if not os.path.exists(results) and os.path.exists(path):
        raise FileNotFoundError(
            f"{results}: no such results file; write_observables(path, results) writes the "
            f"observables of the results file `results` to `path` ({path} exists: swapped "
            "arguments?)"
        )
    fmt = io.file_format(path, sniff=False)
    if fmt not in ("hdf5", "root"):
        raise ValueError(f"{path}: observables are written to .h5 or .root files")
    rows: dict[str, list[np.ndarray]] = {}  # label -> jet_index of its rows, block by block
    for label, block in iterate_status_columns(results):
        rows.setdefault(label, []).append(np.asarray(block["jet_index"], dtype=np.int64))
    names = list(rows) if algorithms is None else list(algorithms)
    for name in names:
        if name not in rows:
            raise ValueError(f"{results}: no results for {name!r}; it has {', '.join(rows)}")
    index = {name: np.concatenate(rows[name]) for name in names}
    n = io.n_jets(results)
    with columns(results) as cols:
        truth = truth and any(
            cols.read(["node_offsets"], a, min(n, a + OBSERVABLES_BLOCK))["node_offsets"][-1]
            for a in range(0, n, OBSERVABLES_BLOCK))
    labels = list(dict.fromkeys(io.column_prefix(name) for name in names))
    if truth and "truth" not in labels:
        labels.append("truth")
    meta = {
        **io.provenance(command=command), "schema_version": OBSERVABLES_SCHEMA_VERSION,
        "content": "jetastar tree observables", "results_file": str(results),
        "soft_drop": {"z_cut": z_cut, "beta": beta, "r0": r0}, "labels": labels,
    }
    kw = {"z_cut": z_cut, "beta": beta, "r0": r0}
    # a block of jets at a time when every table's rows are in jet order (jetastar writes them
    # so): memory does not grow with the file
    in_order = all(np.all(np.diff(i) >= 0) for i in index.values())
    step = OBSERVABLES_BLOCK if in_order else max(n, 1)

    def blocks() -> Iterator[tuple[np.ndarray, dict[str, Any]]]:
        with columns(results) as cols:
            for a in range(0, max(n, 1), step):
                b = min(n, a + step)
                jets = cols.collection(a, b, node_data=False)
                per: dict[str, Any] = {}
                for name in names:
                    if in_order:
                        r0, r1 = np.searchsorted(index[name], [a, b], side="left").tolist()
                        table = read_results_rows(results, name, r0, r1)
                        table.jet_index = table.jet_index - a
                    else:
                        table = io.read_results(results, [name])[name]
                    per[io.column_prefix(name)] = tree_observables(jets, table, **kw)
                if "truth" in labels and "truth" not in per:
                    per["truth"] = tree_observables(jets, None, **kw)
                yield np.asarray(jets.jet_id, dtype=np.int64), per

    with atomic_path(path, clean=True) as tmp:
        if fmt == "root":
            _write_observables_root(tmp, meta, blocks())
        else:
            _write_observables_hdf5(tmp, meta, blocks())
    return labels


#: jets whose observables :func:`write_observables` computes and writes at a time
OBSERVABLES_BLOCK = 100_000


def _write_observables_root(path: str | os.PathLike[str], meta: dict[str, Any],
                            blocks: Iterator[tuple[np.ndarray, dict[str, Any]]]) -> None:
    import awkward as ak
    import uproot

    with uproot.recreate(path, compression=root_compression()) as f:
        f["meta"] = json.dumps(meta, default=str)
        tree = None
        for jet_id, per in blocks:
            scalars = [k for k in ak.fields(next(iter(per.values()))) if not k.startswith("lund_")] \
                if per else []
            branches: dict[str, Any] = {"jet_id": jet_id}
            for label, rec in per.items():
                for k in scalars:
                    branches[f"{label}_{k}"] = ak.to_numpy(rec[k])
                branches[f"{label}_lund"] = ak.zip(
                    {"delta_r": rec.lund_delta_r, "kt": rec.lund_kt, "z": rec.lund_z})
            if tree is None:
                types = {k: (v.type.content if isinstance(v, ak.Array) else np.asarray(v).dtype)
                         for k, v in branches.items()}
                tree = f.mktree("observables", types,
                                title="jetastar tree observables, one entry per jet")
            if len(jet_id):
                tree.extend(branches)


def _write_observables_hdf5(path: str | os.PathLike[str], meta: dict[str, Any],
                            blocks: Iterator[tuple[np.ndarray, dict[str, Any]]]) -> None:
    import awkward as ak
    import h5py

    def append(group: Any, name: str, data: np.ndarray) -> None:
        ds = group.get(name)
        if ds is None:
            group.create_dataset(name, data=data, maxshape=(None, *data.shape[1:]), chunks=True)
            return
        if data.shape[0]:
            old = ds.shape[0]
            ds.resize(old + data.shape[0], axis=0)
            ds[old:] = data

    with h5py.File(path, "w") as f:
        for k, v in meta.items():
            f.attrs[k] = v if isinstance(v, (int, float, str)) else json.dumps(v)
        g = f.create_group("observables")
        lund_base: dict[str, int] = {}
        for jet_id, per in blocks:
            append(g, "jet_id", jet_id)
            for label, rec in per.items():
                sub = g.require_group(label)
                for k in ak.fields(rec):
                    if not k.startswith("lund_"):
                        append(sub, k, ak.to_numpy(rec[k]))
                counts = ak.to_numpy(ak.num(rec.lund_delta_r)).astype(np.int64)
                base = lund_base.get(label)
                offsets = np.cumsum(counts) + (base or 0)
                append(sub, "lund_offsets",
                       np.concatenate([[0], offsets]) if base is None else offsets)
                lund_base[label] = int(offsets[-1]) if offsets.size else (base or 0)
                for k in ("lund_delta_r", "lund_kt", "lund_z"):
                    append(sub, k, ak.to_numpy(ak.flatten(rec[k])))
