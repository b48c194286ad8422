"""Jets and collections of jets.

A :class:`Jet` is its leaf 4-momenta ``(n, 4)`` in ``(E, px, py, pz)`` (GeV, float64), the
:class:`~jetastar.ginkgo.ShowerParams` it came from (needed to score trees), an optional truth
:class:`~jetastar.Tree` with optional per-node 4-vectors, and metadata (id, seed, jet type).

A :class:`JetCollection` stores many jets as flat columns with offsets (the layout the I/O layer
writes) and makes :class:`Jet` objects on access. It converts to and from an awkward array of
records whose ``leaves`` are ``var * Momentum4D`` with vector behaviour.

Leaf-mass policy: a leaf must be timelike or light-like up to rounding. A squared mass
``t = E² − |p|²`` below ``−1e-6 · E²`` is an error (clearly spacelike). Tiny negative values within that
tolerance (rounding of massless or nearly massless particles) are accepted and kept as they are, so
reference data are scored exactly as the reference scores them: in the symmetric likelihood a child with
``t < 0`` makes its split −∞. Call :meth:`Jet.with_nonnegative_masses` to raise such leaves' energies
by the smallest amount that makes ``t >= 0`` exactly.

Example:
    >>> import numpy as np
    >>> from jetastar import Jet
    >>> from jetastar.ginkgo import ShowerParams
    >>> jet = Jet(np.array([[10.0, 0, 0, 9.0], [10.0, 0, 0, -9.0]]), ShowerParams.qcd())
    >>> jet.n_leaves
    2
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import cached_property
from typing import Any, overload

import numpy as np

from ._columnar import (
    DEFAULT_MASS_POLICY,
    apply_mass_policy,
    awkward_columns,
    dense_columns,
    first_leaf_problem,
    is_list_of_jet_arrays,
    list_columns,
    offset_ranges,
    vector_momenta,
)
from ._text import str_array
from .errors import InvalidJetError
from .ginkgo.likelihood import SPACELIKE_TOLERANCE, likelihood_constants
from .ginkgo.params import ShowerParams
from .tree import Tree

__all__ = ["SPACELIKE_TOLERANCE", "Jet", "JetCollection", "validate_leaves"]


class Jet:
    """One jet: leaf 4-momenta, shower parameters, optional truth tree and metadata.

    Args:
        leaves: ``(n, 4)`` array of leaf 4-vectors ``(E, px, py, pz)`` in GeV, ``n >= 2``, or one
            jet's particles as a 1-D awkward array of momentum records in any coordinates
            ``vector`` understands (``Momentum4D``, ``pt, eta, phi, mass``, ...).
        params: the :class:`~jetastar.ginkgo.ShowerParams` used to score trees of this jet.
        truth: optional truth :class:`~jetastar.Tree` over the ``n`` leaves.
        node_momenta: optional ``(2n − 1, 4)`` 4-vectors of the truth tree's nodes (indexed by the
            truth tree's node ids), as stored by a generator.
        jet_id: an integer id (used in error messages and files).
        seed: the random seed the jet was generated from, if any.
        jet_type: a label (default ``params.jet_type``).

    Raises:
        InvalidJetError: naming the jet, the field and the problem, for non-finite values, wrong
            shapes, non-positive energies, spacelike leaves, fewer than two leaves, or a truth tree
            that is not a binary tree over exactly these leaves.

    Example:
        >>> from jetastar.ginkgo import ShowerParams, generate
        >>> jet = generate(1, ShowerParams.qcd(), seed=7)[0]
        >>> jet.truth.n_leaves == jet.n_leaves
        True
    """

    __slots__ = (
        "__dict__",
        "_leaves",
        "jet_id",
        "jet_type",
        "node_momenta",
        "params",
        "seed",
        "truth",
    )

    def __init__(
        self,
        leaves: Any,
        params: ShowerParams | None = None,
        truth: Tree | None = None,
        node_momenta: Any = None,
        *,
        jet_id: int | None = None,
        seed: int | None = None,
        jet_type: str | None = None,
    ) -> None:
        label = jet_id if jet_id is not None else "<unnamed>"
        if params is None:
            params = ShowerParams.qcd()
        if not isinstance(params, ShowerParams):
            raise InvalidJetError(
                f"must be a ShowerParams, got {type(params).__name__}", jet=label, field="params"
            )
        self._leaves = validate_leaves(leaves, label)
        n = self._leaves.shape[0]
        if truth is not None:
            if not isinstance(truth, Tree):
                raise InvalidJetError(
                    f"must be a Tree, got {type(truth).__name__}", jet=label, field="truth"
                )
            if truth.n_leaves != n:
                raise InvalidJetError(
                    f"the truth tree has {truth.n_leaves} leaves, the jet has {n}",
                    jet=label,
                    field="truth",
                )
        if node_momenta is not None:
            if truth is None:
                raise InvalidJetError(
                    "node momenta need a truth tree", jet=label, field="node_momenta"
                )
            nm = np.array(node_momenta, dtype=np.float64)
            if nm.shape != (2 * n - 1, 4):
                raise InvalidJetError(
                    f"must have shape ({2 * n - 1}, 4), got {nm.shape}",
                    jet=label,
                    field="node_momenta",
                )
            if not np.all(np.isfinite(nm)):
                raise InvalidJetError("has non-finite values", jet=label, field="node_momenta")
            nm.setflags(write=False)
            node_momenta = nm
        self.params = params
        self.truth = truth
        self.node_momenta = node_momenta
        self.jet_id = None if jet_id is None else int(jet_id)
        self.seed = None if seed is None else int(seed)
        self.jet_type = params.jet_type if jet_type is None else str(jet_type)

    # ------------------------------------------------------------------ properties
    @property
    def leaves(self) -> np.ndarray:
        """``(n, 4)`` float64 leaf 4-vectors ``(E, px, py, pz)`` (read-only)."""
        return self._leaves

    @property
    def n_leaves(self) -> int:
        """Number of leaves."""
        return self._leaves.shape[0]

    @property
    def label(self) -> object:
        """What error messages call this jet (its id, or ``"<unnamed>"``)."""
        return self.jet_id if self.jet_id is not None else "<unnamed>"

    @cached_property
    def leaf_t(self) -> np.ndarray:
        """Squared masses ``E² − |p|²`` of the leaves (GeV²)."""
        p = self._leaves
        return p[:, 0] * p[:, 0] - (p[:, 1] * p[:, 1] + p[:, 2] * p[:, 2] + p[:, 3] * p[:, 3])

    @property
    def momentum(self) -> np.ndarray:
        """Total 4-momentum of the jet."""
        return self._leaves.sum(axis=0)

    def likelihood_constants(self, likelihood: str = "symmetric") -> np.ndarray:
        """Kernel constants ``(2, 5)`` of this jet's parameters (row 0 λ, row 1 λ_R)."""
        cache = self.__dict__.setdefault("_consts", {})
        if likelihood not in cache:
            p = self.params
            cache[likelihood] = likelihood_constants(p.t_cut, p.lam, p.lam_root, likelihood)
        return cache[likelihood]

    @classmethod
    def from_particles(cls, particles: Any, params: ShowerParams | None = None) -> Jet:
        """One jet's particles in any form :func:`jetastar.cluster` takes, read the way it reads
        them: an ``(n, 4)`` array or list of rows of ``(E, px, py, pz)``, a 1-D awkward / vector
        array of momenta in any coordinates, dicts of coordinates or vector 4-vectors; with the
        default mass policy of every particle input (``"clamp"``: massless particles whose
        ``E² − |p|²`` rounds below 0 are put on the mass shell). A :class:`Jet` is returned as it
        is.

        Args:
            particles: the particles.
            params: Ginkgo parameters (default: those of ``ShowerParams.qcd()``, ``jet_type``
                ``"data"``). As for :meth:`JetCollection.from_momenta`, the jet's root 4-vector
                is the sum of its particles and ``t_root`` (``m_hard``) its squared mass (mass)
                where that is above ``t_cut`` (otherwise every tree is −∞ and the parameters'
                own are kept); only ``t_cut``, ``lam`` and ``lam_root`` score trees.

        Example:
            >>> jet = Jet.from_particles([{"pt": 50.0, "eta": 0.1, "phi": 0.2, "mass": 0.0},
            ...                           {"pt": 30.0, "eta": -0.2, "phi": 0.4, "mass": 0.0}])
            >>> jet.n_leaves, bool((jet.leaf_t >= 0).all()), jet.jet_type
            (2, True, 'data')
        """
        if isinstance(particles, Jet):
            return particles
        if isinstance(particles, (list, tuple)):
            particles = _one_jet_particles(particles)
        if params is None:
            params = ShowerParams.qcd(jet_type="data")
        jet = cls(particles, params)
        if (jet.leaf_t < 0.0).any():
            jet = jet.with_nonnegative_masses()
        root = jet.leaves.sum(axis=0)
        t = float(root[0] ** 2 - root[1:] @ root[1:])
        if t > params.t_cut:  # the jet's own root (metadata: the likelihood reads the leaves)
            jet.params = dataclasses.replace(params, root_momentum=tuple(root.tolist()), t_root=t,
                                             m_hard=math.sqrt(t))
            jet.jet_type = jet.params.jet_type
        return jet

    def with_nonnegative_masses(self) -> Jet:
        """A copy whose leaves with ``t < 0`` (within tolerance) get ``E`` raised until ``t >= 0``.

        The change is the smallest in float64 (a few ulps of ``E``); other leaves are untouched.
        """
        p = self._leaves.copy()
        apply_mass_policy(p, "clamp")  # a Jet's leaves are never clearly spacelike
        return Jet(
            p, self.params, self.truth, None, jet_id=self.jet_id, seed=self.seed,
            jet_type=self.jet_type,
        )

    def __repr__(self) -> str:
        return (
            f"Jet(id={self.jet_id}, type={self.jet_type!r}, n_leaves={self.n_leaves}, "
            f"truth={'yes' if self.truth is not None else 'no'})"
        )


def _one_jet_particles(particles: list[Any] | tuple[Any, ...]) -> Any:
    """One jet's particles given as a list: rows of (E, px, py, pz), dicts of momentum coordinates
    (``{"pt": ..., "eta": ..., ...}``, any system vector understands) or vector momentum objects."""
    if particles and all(isinstance(p, Mapping) for p in particles):
        import awkward as ak

        return ak.Array(list(particles))  # records: coordinates detected like an awkward jet's
    if particles and all(type(p).__module__.startswith("vector") for p in particles):
        try:
            return np.stack([vector_momenta(p) for p in particles])
        except AttributeError:
            pass  # not 4-vectors: the message below
    try:
        return np.asarray(particles, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidJetError(
            f"a {type(particles).__name__} given as one jet must hold rows of four numbers "
            "(E, px, py, pz) in GeV, dicts of momentum coordinates or vector 4-vectors",
            field="jet") from None


def _momenta_of_records(leaves: Any, label: object) -> np.ndarray:
    """``(n, 4)`` (E, px, py, pz) of one jet's particles given as a 1-D awkward array of momentum
    records (any coordinates ``vector`` understands) or a vector momentum array."""
    import awkward as ak

    def own_properties() -> np.ndarray:
        try:
            return vector_momenta(leaves)
        except Exception as exc:
            raise InvalidJetError(f"cannot read momenta from {type(leaves).__name__}: {exc}",
                                  jet=label, field="leaves") from exc

    if not isinstance(leaves, ak.Array) and type(leaves).__module__.startswith("vector"):
        # a vector numpy array stores its own field names (x, y, z, t for px, py, pz, E; rho,
        # tau, ...): ask vector for the momenta
        return own_properties()
    try:
        arr = ak.Array(leaves)
    except Exception:  # an object with E/px/py/pz properties
        return own_properties()
    if arr.layout.purelist_depth != 1 or not ak.fields(arr):
        raise InvalidJetError(
            f"one jet's particles as an awkward array must be 1-D records of momentum "
            f"coordinates, got type {arr.type}", jet=label, field="leaves")
    # (one list of them, keeping their record name: vector's own fields x, y, z, t or rho,
    # tau, ... are read through vector, as for many jets)
    one = awkward_columns(ak.unflatten(arr, [len(arr)]), mass_policy=DEFAULT_MASS_POLICY,
                          validate=False)
    return np.ascontiguousarray(one["leaves"], dtype=np.float64).reshape(-1, 4)


def validate_leaves(leaves: Any, label: object = "<unnamed>") -> np.ndarray:
    """One jet's leaves as a read-only ``(n, 4)`` float64 array, or a clear error.

    The checks of :class:`Jet` (module docstring): shape ``(n, 4)``, ``n >= 2``, finite values,
    positive energies, no clearly spacelike leaf. Awkward / vector momentum records are converted
    to ``(E, px, py, pz)`` first.

    Args:
        leaves: ``(n, 4)`` array-like of ``(E, px, py, pz)``, or one jet's momentum records.
        label: what error messages call the jet (its id).

    Raises:
        InvalidJetError: naming the jet, the field ``leaves`` and the first problem.

    Example:
        >>> validate_leaves([[10.0, 0, 0, 9.0], [10.0, 0, 0, -9.0]], 3).shape
        (2, 4)
    """
    if isinstance(leaves, np.ma.MaskedArray) and np.ma.getmaskarray(leaves).any():
        # a masked array's data would be read as it is, masked slots included
        raise InvalidJetError(
            "a masked array: give the particles without the masked ones, e.g. "
            "leaves[~np.ma.getmaskarray(leaves).any(axis=1)].data (many padded jets: "
            "JetCollection.from_momenta(array, components, mask=...))", jet=label, field="leaves")
    records = type(leaves).__module__.startswith(("awkward", "vector")) or (
        isinstance(leaves, np.ndarray) and bool(leaves.dtype.names))  # records of coordinates
    if records:
        leaves = _momenta_of_records(leaves, label)
    try:
        p = np.array(leaves, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidJetError(f"cannot be read as numbers: {exc}", jet=label, field="leaves") from exc
    if p.ndim != 2 or p.shape[1] != 4:
        raise InvalidJetError(
            f"must have shape (n, 4) as (E, px, py, pz), got {p.shape}"
            + ("; several jets in one padded array: JetCollection.from_momenta(array, "
               "components, mask=...)" if p.ndim == 3 else ""), jet=label, field="leaves"
        )
    bad = first_leaf_problem(p, (0, p.shape[0]))
    if bad is not None:
        hint = ""
        if not records and bad.kind in ("non-positive energy", "spacelike"):
            # the commonest cause: rows in another order, e.g. (pt, eta, phi, mass)
            hint = ("; rows are read as (E, px, py, pz): other coordinates as records "
                    "(Jet.from_particles) or JetCollection.from_momenta(array, components)")
        raise InvalidJetError(bad.message("leaf", tolerance=True) + hint, jet=label,
                              field="leaves")
    p.setflags(write=False)
    return p




# ---------------------------------------------------------------------- collections
_PARAM_COLUMNS = ("m_hard", "lam", "lam_root", "t_cut", "t_root")


class JetCollection(Sequence[Jet]):
    """Many jets stored as flat columns with offsets; ``collection[i]`` builds a :class:`Jet`.

    Build one with :meth:`from_jets`, :func:`jetastar.ginkgo.generate`, :meth:`from_awkward` or
    the I/O layer. Columns (all numpy arrays):

    * ``leaves`` ``(M, 4)`` and ``leaf_offsets`` ``(J + 1,)``: jet ``i``'s leaves are
      ``leaves[leaf_offsets[i]:leaf_offsets[i + 1]]``;
    * ``children`` ``(K, 2)``, ``leaf_of_node`` ``(K,)`` and ``node_offsets`` ``(J + 1,)``: the truth
      trees (0 nodes for a jet without truth); ``node_momenta`` ``(K, 4)`` or ``None``;
    * per jet: ``jet_id``, ``seed`` (−1 = unknown), ``jet_type`` (str), and the parameters
      ``m_hard``, ``lam``, ``lam_root``, ``t_cut``, ``t_root`` ``(J,)`` and ``root_momentum`` ``(J, 4)``;
    * optional extra float64 columns: ``node_columns`` (name -> ``(K,)``, e.g. the nominal ``deltas``
      of legacy Ginkgo pickles) and ``jet_columns`` (name -> ``(J,)``). They follow the collection
      through :meth:`take`, slicing and :meth:`concatenate` (only columns every part has).

    Example:
        >>> from jetastar.ginkgo import ShowerParams, generate
        >>> jets = generate(3, ShowerParams.w(), seed=2)
        >>> len(jets), jets[1].jet_type
        (3, 'W')
    """

    def __init__(
        self,
        *,
        leaves: np.ndarray,
        leaf_offsets: np.ndarray,
        children: np.ndarray,
        leaf_of_node: np.ndarray,
        node_offsets: np.ndarray,
        jet_id: np.ndarray,
        seed: np.ndarray,
        jet_type: np.ndarray,
        params: dict[str, np.ndarray],
        node_momenta: np.ndarray | None = None,
        node_columns: dict[str, Any] | None = None,
        jet_columns: dict[str, Any] | None = None,
    ) -> None:
        self.leaves = np.ascontiguousarray(leaves, dtype=np.float64).reshape(-1, 4)
        self.leaf_offsets = np.asarray(leaf_offsets, dtype=np.int64)
        self.children = np.ascontiguousarray(children, dtype=np.int64).reshape(-1, 2)
        self.leaf_of_node = np.asarray(leaf_of_node, dtype=np.int64)
        self.node_offsets = np.asarray(node_offsets, dtype=np.int64)
        self.node_momenta = (
            None if node_momenta is None
            else np.ascontiguousarray(node_momenta, dtype=np.float64).reshape(-1, 4)
        )
        self.jet_id = np.asarray(jet_id, dtype=np.int64)
        self.seed = np.asarray(seed, dtype=np.int64)
        self.jet_type = np.asarray(jet_type, dtype=object)
        self.params = {k: np.asarray(params[k], dtype=np.float64) for k in _PARAM_COLUMNS}
        self.params["root_momentum"] = np.asarray(params["root_momentum"], dtype=np.float64)
        self.node_columns = {
            str(k): np.asarray(v, dtype=np.float64).ravel() for k, v in (node_columns or {}).items()
        }
        self.jet_columns = {
            str(k): np.asarray(v, dtype=np.float64).ravel() for k, v in (jet_columns or {}).items()
        }
        self._check()
        self._params_cache: dict[tuple[Any, ...], ShowerParams] = {}

    def _check(self) -> None:
        n_jets = self.jet_id.shape[0]
        problems = []
        if self.leaf_offsets.shape != (n_jets + 1,) or self.node_offsets.shape != (n_jets + 1,):
            problems.append("offsets must have length n_jets + 1")
        elif self.leaf_offsets[-1] != self.leaves.shape[0]:
            problems.append("leaf_offsets do not end at the number of leaves")
        elif self.node_offsets[-1] != self.children.shape[0]:
            problems.append("node_offsets do not end at the number of nodes")
        elif np.any(np.diff(self.leaf_offsets) < 0) or np.any(np.diff(self.node_offsets) < 0):
            problems.append("offsets must not decrease")
        if self.leaf_of_node.shape[0] != self.children.shape[0]:
            problems.append("leaf_of_node and children differ in length")
        if self.node_momenta is not None and self.node_momenta.shape[0] != self.children.shape[0]:
            problems.append("node_momenta and children differ in length")
        for name in ("seed", "jet_type"):
            if getattr(self, name).shape[0] != n_jets:
                problems.append(f"{name} has the wrong length")
        for k, v in self.params.items():
            if v.shape[0] != n_jets:
                problems.append(f"params.{k} has the wrong length")
        for k, v in self.node_columns.items():
            if v.shape[0] != self.children.shape[0]:
                problems.append(f"node column {k!r} has {v.shape[0]} values, need "
                                f"{self.children.shape[0]}")
        for k, v in self.jet_columns.items():
            if v.shape[0] != n_jets:
                problems.append(f"jet column {k!r} has {v.shape[0]} values, need {n_jets}")
        if problems:
            raise InvalidJetError("; ".join(problems), field="collection")

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_jets(cls, jets: Iterable[Jet]) -> JetCollection:
        """Collect :class:`Jet` objects into columns (ids default to positions)."""
        jets = list(jets)
        n_leaves = np.array([j.n_leaves for j in jets], dtype=np.int64)
        n_nodes = np.array(
            [0 if j.truth is None else j.truth.n_nodes for j in jets], dtype=np.int64
        )
        has_nm = [j.node_momenta is not None for j in jets]
        if any(has_nm) and not all(
            nm or j.truth is None for nm, j in zip(has_nm, jets, strict=True)
        ):
            raise InvalidJetError(
                "either every jet with a truth tree has node momenta or none has",
                field="node_momenta",
            )
        empty2 = np.empty((0, 2), dtype=np.int64)
        return cls(
            leaves=np.concatenate([j.leaves for j in jets]) if jets else np.empty((0, 4)),
            leaf_offsets=np.concatenate([[0], np.cumsum(n_leaves)]),
            children=np.concatenate([j.truth.children if j.truth else empty2 for j in jets])
            if jets else empty2,
            leaf_of_node=np.concatenate(
                [j.truth.leaf_of_node if j.truth else np.empty(0, np.int64) for j in jets]
            ) if jets else np.empty(0, np.int64),
            node_offsets=np.concatenate([[0], np.cumsum(n_nodes)]),
            node_momenta=np.concatenate(
                [j.node_momenta if j.node_momenta is not None else np.empty((0, 4)) for j in jets]
            ) if any(has_nm) else None,
            jet_id=np.array(
                [i if j.jet_id is None else j.jet_id for i, j in enumerate(jets)], dtype=np.int64
            ),
            seed=np.array([-1 if j.seed is None else j.seed for j in jets], dtype=np.int64),
            jet_type=np.array([j.jet_type for j in jets], dtype=object),
            params={
                **{k: np.array([getattr(j.params, k) for j in jets]) for k in _PARAM_COLUMNS},
                "root_momentum": np.array(
                    [j.params.root_momentum for j in jets], dtype=np.float64
                ).reshape(-1, 4),
            },
        )

    @classmethod
    def concatenate(cls, collections: Iterable[JetCollection]) -> JetCollection:
        """Join collections (ids are kept as they are)."""
        cols = list(collections)
        if not cols:
            return cls.from_jets([])

        def offsets(name: str) -> np.ndarray:
            parts, base = [np.zeros(1, np.int64)], 0
            for c in cols:
                off = getattr(c, name)
                parts.append(off[1:] + base)
                base += int(off[-1])
            return np.concatenate(parts)

        any_nm = any(c.node_momenta is not None for c in cols)
        # the columns all have, in the first one's order (a set's order varies by process)
        node_keys = [k for k in cols[0].node_columns if all(k in c.node_columns for c in cols)]
        jet_keys = [k for k in cols[0].jet_columns if all(k in c.jet_columns for c in cols)]
        if any_nm and not all(
            c.node_momenta is not None or c.children.shape[0] == 0 for c in cols
        ):
            raise InvalidJetError("cannot join collections with and without node momenta")
        return cls(
            leaves=np.concatenate([c.leaves for c in cols]),
            leaf_offsets=offsets("leaf_offsets"),
            children=np.concatenate([c.children for c in cols]),
            leaf_of_node=np.concatenate([c.leaf_of_node for c in cols]),
            node_offsets=offsets("node_offsets"),
            node_momenta=np.concatenate(
                [c.node_momenta if c.node_momenta is not None else np.empty((0, 4)) for c in cols]
            ) if any_nm else None,
            jet_id=np.concatenate([c.jet_id for c in cols]),
            seed=np.concatenate([c.seed for c in cols]),
            jet_type=np.concatenate([c.jet_type for c in cols]),
            params={
                k: np.concatenate([c.params[k] for c in cols])
                for k in (*_PARAM_COLUMNS, "root_momentum")
            },
            node_columns={k: np.concatenate([c.node_columns[k] for c in cols]) for k in node_keys},
            jet_columns={k: np.concatenate([c.jet_columns[k] for c in cols]) for k in jet_keys},
        )

    @classmethod
    def from_momenta(
        cls,
        particles: Any,
        components: Any = None,
        *,
        mask: Any = None,
        padding: float = 0.0,
        mapping: Any = None,
        t_cut: float = 16.0,
        lam: float = 1.5,
        lam_root: float = 1.5,
        mass_policy: Any = DEFAULT_MASS_POLICY,
        jet_type: str = "data",
        jet_id: Any = None,
        validate: bool = True,
    ) -> JetCollection:
        """Jets (without truth trees) from particle momenta in any coordinates.

        Args:
            particles: an awkward array ``n_jets * var * record`` whose fields are momentum
                coordinates in any system ``vector`` understands (``px, py, pz, E``;
                ``pt, eta, phi, mass``; ``pt, eta, phi, E``; vector ``Momentum4D`` records; names
                case-insensitive), or a dense ``(n_jets, n_particles, 4)`` numpy array (then give
                ``components``), or a structured ``(n_jets, n_particles)`` numpy array, or a list
                of per-jet ``(n_i, 4)`` arrays.
            components: order of a dense array's last axis, e.g. ``"pt,eta,phi,mass"`` (a list of
                per-jet arrays: ``"E,px,py,pz"`` unless given).
            mask: dense arrays: boolean ``(n_jets, n_particles)``, ``True`` = real particle
                (default: slots whose four values all equal ``padding`` are padding).
            padding: dense arrays: the value of padded slots (0).
            mapping: awkward arrays: vector coordinate -> field name, overriding detection.
            t_cut, lam, lam_root: Ginkgo parameters of every jet (defaults: ``ShowerParams.qcd()``).
            mass_policy: ``"clamp"`` (default), ``"keep"`` or a mass in GeV; see
                :mod:`jetastar.momenta`. ``jet_columns["n_mass_adjusted"]`` counts the particles
                it changed per jet.
            jet_type: label stored with the jets.
            jet_id: ids (default ``0..n_jets-1``).
            validate: raise :class:`InvalidJetError` for the first invalid jet (naming jet, field
                and problem); ``False`` keeps it (clustering records it as failed; taking it out
                as a :class:`Jet`, ``jets[i]``, raises that error).

        Returns:
            A :class:`JetCollection`; each jet's root 4-vector is the sum of its particles.

        Example:
            >>> import numpy as np
            >>> from jetastar import JetCollection
            >>> dense = np.array([[[1.0, 1.0, 0, 0], [1.0, -1.0, 0, 0], [0, 0, 0, 0]]]) * 40
            >>> jets = JetCollection.from_momenta(dense, "E,px,py,pz")
            >>> jets.n_leaves.tolist(), float(jets.params["t_root"][0])
            ([2], 6400.0)
        """
        kw = {"t_cut": t_cut, "lam": lam, "lam_root": lam_root, "mass_policy": mass_policy,
              "jet_type": jet_type, "validate": validate, "entry": jet_id}
        if isinstance(particles, np.ndarray):
            return cls(**dense_columns(particles, components, mask=mask, padding=padding, **kw))
        if is_list_of_jet_arrays(particles):
            return cls(**list_columns(particles, components, **kw))
        return cls(**awkward_columns(particles, mapping=mapping, **kw))

    # ------------------------------------------------------------------ sequence protocol
    def __len__(self) -> int:
        return int(self.jet_id.shape[0])

    @overload
    def __getitem__(self, index: int) -> Jet: ...

    @overload
    def __getitem__(self, index: slice | Sequence[int] | np.ndarray) -> JetCollection: ...

    def __getitem__(self, index: Any) -> Jet | JetCollection:
        if isinstance(index, (int, np.integer)):
            i = int(index)
            if i < 0:
                i += len(self)
            if not 0 <= i < len(self):
                raise IndexError(f"jet index {index} out of range for {len(self)} jets")
            return self._jet(i)
        idx = np.arange(len(self))[index]
        return self.take(idx)

    def __iter__(self) -> Iterator[Jet]:
        for i in range(len(self)):
            yield self._jet(i)

    def take(self, indices: Any) -> JetCollection:
        """A new collection with the jets at ``indices`` (in that order)."""
        idx = np.asarray(indices, dtype=np.int64).ravel()
        idx = np.where(idx < 0, idx + len(self), idx)
        if idx.size and idx[-1] - idx[0] + 1 == idx.size and np.all(np.diff(idx) == 1):
            return self._copy_range(int(idx[0]), int(idx[-1]) + 1)
        lsel = offset_ranges(self.leaf_offsets, idx)
        nsel = offset_ranges(self.node_offsets, idx)
        return JetCollection(
            leaves=self.leaves[lsel],
            leaf_offsets=np.concatenate([[0], np.cumsum(np.diff(self.leaf_offsets)[idx])]),
            children=self.children[nsel],
            leaf_of_node=self.leaf_of_node[nsel],
            node_offsets=np.concatenate([[0], np.cumsum(np.diff(self.node_offsets)[idx])]),
            node_momenta=None if self.node_momenta is None else self.node_momenta[nsel],
            jet_id=self.jet_id[idx],
            seed=self.seed[idx],
            jet_type=self.jet_type[idx],
            params={k: v[idx] for k, v in self.params.items()},
            node_columns={k: v[nsel] for k, v in self.node_columns.items()},
            jet_columns={k: v[idx] for k, v in self.jet_columns.items()},
        )

    def _copy_range(self, a: int, b: int) -> JetCollection:
        """:meth:`take` of the jets ``a .. b - 1`` (copies of contiguous slices: much faster than
        gathering rows)."""
        la, lb = int(self.leaf_offsets[a]), int(self.leaf_offsets[b])
        na, nb = int(self.node_offsets[a]), int(self.node_offsets[b])
        return JetCollection(
            leaves=self.leaves[la:lb].copy(),
            leaf_offsets=self.leaf_offsets[a:b + 1] - la,
            children=self.children[na:nb].copy(),
            leaf_of_node=self.leaf_of_node[na:nb].copy(),
            node_offsets=self.node_offsets[a:b + 1] - na,
            node_momenta=None if self.node_momenta is None else self.node_momenta[na:nb].copy(),
            jet_id=self.jet_id[a:b].copy(),
            seed=self.seed[a:b].copy(),
            jet_type=self.jet_type[a:b].copy(),
            params={k: v[a:b].copy() for k, v in self.params.items()},
            node_columns={k: v[na:nb].copy() for k, v in self.node_columns.items()},
            jet_columns={k: v[a:b].copy() for k, v in self.jet_columns.items()},
        )

    def with_params(self, **values: Any) -> JetCollection:
        """The same jets with some shower parameters replaced (the other columns shared, not
        copied): a fit or a model check at other parameter values.

        Args:
            **values: parameter name (a key of ``params``, e.g. ``t_cut``, ``lam``,
                ``lam_root``) -> one value for every jet or a ``(J,)`` column.

        Raises:
            ValueError: an unknown parameter name.

        Example:
            >>> from jetastar.ginkgo import ShowerParams, generate
            >>> jets = generate(3, ShowerParams.qcd(), seed=1).with_params(lam=2.0)
            >>> jets.params["lam"].tolist()
            [2.0, 2.0, 2.0]
        """
        params = dict(self.params)
        for name, value in values.items():
            if name not in params:
                raise ValueError(f"unknown shower parameter {name!r}; valid: "
                                 f"{', '.join(params)}")
            params[name] = np.array(np.broadcast_to(np.asarray(value, dtype=np.float64),
                                                    (len(self),)))
        return JetCollection(
            leaves=self.leaves, leaf_offsets=self.leaf_offsets, children=self.children,
            leaf_of_node=self.leaf_of_node, node_offsets=self.node_offsets,
            node_momenta=self.node_momenta, jet_id=self.jet_id, seed=self.seed,
            jet_type=self.jet_type, params=params, node_columns=self.node_columns,
            jet_columns=self.jet_columns,
        )

    def with_columns(
        self, node: dict[str, Any] | None = None, jet: dict[str, Any] | None = None
    ) -> JetCollection:
        """Add (or replace) extra per-node / per-jet columns, in place; returns the collection.

        Raises:
            InvalidJetError: if a column's length does not match the nodes / jets.
        """
        old_node, old_jet = dict(self.node_columns), dict(self.jet_columns)
        for k, v in (node or {}).items():
            self.node_columns[str(k)] = np.asarray(v, dtype=np.float64).ravel()
        for k, v in (jet or {}).items():
            self.jet_columns[str(k)] = np.asarray(v, dtype=np.float64).ravel()
        try:
            self._check()
        except InvalidJetError:
            self.node_columns, self.jet_columns = old_node, old_jet
            raise
        return self

    @property
    def n_leaves(self) -> np.ndarray:
        """Number of leaves of every jet."""
        return np.diff(self.leaf_offsets)

    def jet_params(self, i: int) -> ShowerParams:
        """The :class:`ShowerParams` of jet ``i`` (cached per distinct value)."""
        key = (
            *(float(self.params[k][i]) for k in _PARAM_COLUMNS),
            tuple(float(x) for x in self.params["root_momentum"][i]),
            str(self.jet_type[i]),
        )
        params = self._params_cache.get(key)
        if params is None:
            params = ShowerParams(
                m_hard=key[0], lam=key[1], lam_root=key[2], t_cut=key[3], t_root=key[4],
                root_momentum=key[5], jet_type=key[6],
            )
            self._params_cache[key] = params
        return params

    def _jet(self, i: int) -> Jet:
        jet_id = int(self.jet_id[i])
        a, b = self.node_offsets[i], self.node_offsets[i + 1]
        truth = None
        node_momenta = None
        if b > a:
            truth = Tree(self.children[a:b], self.leaf_of_node[a:b], jet=jet_id)
            if self.node_momenta is not None:
                node_momenta = self.node_momenta[a:b]
        seed = int(self.seed[i])
        leaves = self.leaves[self.leaf_offsets[i]:self.leaf_offsets[i + 1]]
        try:
            params = self.jet_params(i)
        except InvalidJetError as exc:
            # a jet kept with validate=False: parameters made from bad leaves (one particle: no
            # mass) are bad too, so name the leaves' problem first, else this jet
            validate_leaves(leaves, jet_id)
            raise InvalidJetError(exc.reason, jet=jet_id, field=exc.field) from None
        return Jet(
            leaves,
            params,
            truth,
            node_momenta,
            jet_id=jet_id,
            seed=None if seed < 0 else seed,
            jet_type=str(self.jet_type[i]),
        )

    def __repr__(self) -> str:
        if len(self) == 0:
            return "JetCollection(0 jets)"
        n = self.n_leaves
        types = sorted(set(map(str, self.jet_type)))
        return (
            f"JetCollection({len(self)} jets, types {types}, leaves {int(n.min())}..{int(n.max())})"
        )

    # ------------------------------------------------------------------ awkward
    def to_awkward(self) -> Any:
        """An awkward array of jet records.

        Fields: ``leaves`` (``var * Momentum4D`` with fields E, px, py, pz and vector behaviour),
        ``tree`` (``var * {left, right, leaf}``; ``leaf`` is the leaf index of leaf nodes, −1
        otherwise), optional ``node_momenta`` (``var * Momentum4D``), and the scalars ``jet_id``,
        ``seed``, ``jet_type``, ``m_hard``, ``lam``, ``lam_root``, ``t_cut``, ``t_root`` and
        ``root_momentum`` (a ``Momentum4D``); the extra columns, where there are any, as
        ``jet_columns`` (a record per jet) and ``node_columns`` (``var * record``, per node).

        Example:
            >>> import awkward as ak
            >>> from jetastar.ginkgo import ShowerParams, generate
            >>> arr = generate(2, ShowerParams.qcd(), seed=3).to_awkward()
            >>> bool(abs(ak.sum(arr.leaves, axis=1).mass[0] - 30.0) < 1e-6)
            True
        """
        import awkward as ak
        import vector

        vector.register_awkward()

        def record(flat: np.ndarray) -> Any:
            # contiguous columns: strided buffers fail in ak.to_parquet
            cols = np.ascontiguousarray(flat.T)
            return ak.zip({"E": cols[0], "px": cols[1], "py": cols[2], "pz": cols[3]},
                          with_name="Momentum4D")

        def momenta(flat: np.ndarray, offsets: np.ndarray) -> Any:
            return ak.unflatten(record(flat), np.diff(offsets))

        fields: dict[str, Any] = {
            "leaves": momenta(self.leaves, self.leaf_offsets),
            "tree": ak.unflatten(
                ak.zip(
                    {
                        "left": np.ascontiguousarray(self.children[:, 0]),
                        "right": np.ascontiguousarray(self.children[:, 1]),
                        "leaf": self.leaf_of_node,
                    }
                ),
                np.diff(self.node_offsets),
            ),
        }
        if self.node_momenta is not None:
            fields["node_momenta"] = momenta(self.node_momenta, self.node_offsets)
        fields["jet_id"] = self.jet_id
        fields["seed"] = self.seed
        fields["jet_type"] = ak.Array(self.jet_type.astype(str).tolist())
        for k in _PARAM_COLUMNS:
            fields[k] = self.params[k]
        fields["root_momentum"] = record(self.params["root_momentum"])
        if self.jet_columns:
            fields["jet_columns"] = ak.zip(dict(self.jet_columns))
        if self.node_columns:
            fields["node_columns"] = ak.unflatten(ak.zip(dict(self.node_columns)),
                                                  np.diff(self.node_offsets))
        return ak.zip(fields, depth_limit=1)

    @classmethod
    def from_awkward(cls, array: Any) -> JetCollection:
        """Inverse of :meth:`to_awkward` (the fields it writes; ``node_momenta`` optional)."""
        import awkward as ak

        def flat_momenta(jagged: Any) -> tuple[np.ndarray, np.ndarray]:
            counts = ak.to_numpy(ak.num(jagged, axis=1)).astype(np.int64)
            flat = ak.flatten(jagged)
            cols = [ak.to_numpy(flat[name]).astype(np.float64) for name in ("E", "px", "py", "pz")]
            return np.stack(cols, axis=1), np.concatenate([[0], np.cumsum(counts)])

        leaves, leaf_offsets = flat_momenta(array["leaves"])
        tree = array["tree"]
        node_counts = ak.to_numpy(ak.num(tree, axis=1)).astype(np.int64)
        flat_tree = ak.flatten(tree)
        children = np.stack(
            [ak.to_numpy(flat_tree["left"]), ak.to_numpy(flat_tree["right"])], axis=1
        )
        node_momenta = None
        if "node_momenta" in ak.fields(array):
            node_momenta, _ = flat_momenta(array["node_momenta"])
        extra: dict[str, Any] = {}
        if "jet_columns" in ak.fields(array):
            cols = array["jet_columns"]
            extra["jet_columns"] = {k: ak.to_numpy(cols[k]) for k in ak.fields(cols)}
        if "node_columns" in ak.fields(array):
            cols = ak.flatten(array["node_columns"])
            extra["node_columns"] = {k: ak.to_numpy(cols[k]) for k in ak.fields(cols)}
        rm = array["root_momentum"]
        return cls(
            leaves=leaves,
            leaf_offsets=leaf_offsets,
            children=children,
            leaf_of_node=ak.to_numpy(flat_tree["leaf"]),
            node_offsets=np.concatenate([[0], np.cumsum(node_counts)]),
            node_momenta=node_momenta,
            jet_id=ak.to_numpy(array["jet_id"]),
            seed=ak.to_numpy(array["seed"]),
            jet_type=str_array(array["jet_type"]),
            params={
                **{k: ak.to_numpy(array[k]) for k in _PARAM_COLUMNS},
                "root_momentum": np.stack(
                    [ak.to_numpy(rm[name]) for name in ("E", "px", "py", "pz")], axis=1
                ),
            },
            **extra,
        )
