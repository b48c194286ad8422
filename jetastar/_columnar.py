"""Flat momentum columns: coordinate detection, conversion, mass policy and the leaf validator.

The arrays behind :class:`~jetastar.Jet` (one jet's awkward records), :meth:`JetCollection.from_momenta
<jetastar.JetCollection.from_momenta>`, :mod:`jetastar.momenta` and the particle-file readers, and
:func:`first_leaf_problem`, the one check of leaf momenta that ``Jet``, the file readers and the
momenta conversion share. It sits with the model, below :mod:`jetastar.jet` (it imports only
``errors`` and ``ginkgo.likelihood`` / ``ginkgo.params``), and returns plain columns (the keyword
arguments of :class:`~jetastar.JetCollection`), so that ``jet`` uses it without importing anything
above itself; :mod:`jetastar.momenta` is the public face (the mass policy is documented there).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numba as nb
import numpy as np

from ._jit import kernel_helper
from ._text import text_column
from .errors import InvalidJetError, InvalidJetInFileError
from .ginkgo.likelihood import SPACELIKE_TOLERANCE, t_of
from .ginkgo.params import ShowerParams

__all__ = [
    "COORDINATE_SETS",
    "DEFAULT_LAM",
    "DEFAULT_LAM_ROOT",
    "DEFAULT_MASS_POLICY",
    "DEFAULT_T_CUT",
    "LEAF_OK",
    "MASS_POLICIES",
    "SPACELIKE_TOLERANCE",
    "LeafProblem",
    "apply_mass_policy",
    "awkward_columns",
    "canonical_name",
    "check_mass_policy",
    "dense_columns",
    "detect_coordinates",
    "first_leaf_problem",
    "first_nonfinite_input",
    "flat_columns",
    "input_value_problem",
    "jet_leaf_problem",
    "leaf_problems",
    "nonfinite_problems",
    "offset_ranges",
    "to_cartesian",
    "vector_momenta",
]

#: Default Ginkgo parameters for particles that carry none (those of ``ShowerParams.qcd()``).
DEFAULT_T_CUT = 16.0
DEFAULT_LAM = 1.5
DEFAULT_LAM_ROOT = 1.5

#: Named mass policies (a number is also accepted: assign that mass in GeV).
MASS_POLICIES = ("clamp", "keep")

#: The mass policy of every entry point that converts particles (files, awkward arrays, one jet's
#: momentum records, the command line) unless the caller names another.
DEFAULT_MASS_POLICY = "clamp"

#: lower-cased field name -> the vector momentum coordinate it holds.
_ALIASES = {
    "px": "px", "py": "py", "pz": "pz",
    "e": "E", "energy": "E", "en": "E",
    "pt": "pt", "eta": "eta", "phi": "phi", "theta": "theta",
    "mass": "mass", "m": "mass",
}

#: vector's own names of momentum coordinates (``vector.zip`` accepts ``x, y, z, t`` and
#: ``rho, phi, eta, tau`` for a Momentum4D): read only when no complete set of the names above is
#: present, so that a vertex's ``x, y, z, t`` next to ``pt, eta, phi, mass`` is left alone.
_VECTOR_ALIASES = {"x": "px", "y": "py", "z": "pz", "t": "E", "rho": "pt", "tau": "mass"}

#: Coordinate sets, in order of preference (the first complete one found is used).
COORDINATE_SETS: tuple[tuple[str, str, str, str], ...] = (
    ("px", "py", "pz", "E"),
    ("pt", "eta", "phi", "E"),
    ("pt", "eta", "phi", "mass"),
    ("px", "py", "pz", "mass"),
    ("pt", "phi", "pz", "E"),
    ("pt", "phi", "pz", "mass"),
    ("pt", "theta", "phi", "E"),
    ("pt", "theta", "phi", "mass"),
    ("px", "py", "eta", "E"),
    ("px", "py", "eta", "mass"),
)

_P4 = ("E", "px", "py", "pz")


def canonical_name(field: str) -> str | None:
    """The vector coordinate a field name holds (``"PT"`` -> ``"pt"``, ``"Mass"`` -> ``"mass"``).

    Example:
        >>> canonical_name("PT"), canonical_name("E"), canonical_name("charge")
        ('pt', 'E', None)
    """
    return _ALIASES.get(str(field).lower())


def detect_coordinates(
    fields: Sequence[str], *, where: str = "", vector_names: bool = True
) -> dict[str, str]:
    """Choose the coordinates to read from a list of field names.

    Args:
        fields: the available names (already stripped of any branch prefix).
        where: what the fields belong to, for the error message (file, tree, prefix).
        vector_names: also read vector's own names (``x, y, z, t``; ``rho, tau``) where no
            complete set of the usual names is present.

    Returns:
        vector coordinate name -> field name, four entries.

    Raises:
        InvalidJetError: when no complete coordinate set is present (lists what is there).

    Example:
        >>> detect_coordinates(["pt", "eta", "phi", "mass", "charge"])
        {'pt': 'pt', 'eta': 'eta', 'phi': 'phi', 'mass': 'mass'}
        >>> detect_coordinates(["PT", "Eta", "Phi", "E", "Px", "Py", "Pz"])
        {'px': 'Px', 'py': 'Py', 'pz': 'Pz', 'E': 'E'}
    """
    found: dict[str, str] = {}
    for f in fields:
        c = canonical_name(f)
        if c is not None and c not in found:
            found[c] = str(f)
    for combo in COORDINATE_SETS:
        if all(c in found for c in combo):
            return {c: found[c] for c in combo}
    if vector_names:
        for f in fields:
            c = _VECTOR_ALIASES.get(str(f).lower())
            if c is not None and c not in found:
                found[c] = str(f)
        for combo in COORDINATE_SETS:
            if all(c in found for c in combo):
                return {c: found[c] for c in combo}
    prefix = f"{where}: " if where else ""
    sets = "; ".join(", ".join(c) for c in COORDINATE_SETS[:4])
    raise InvalidJetError(
        f"{prefix}no complete set of momentum coordinates among the fields "
        f"{sorted(map(str, fields))} (need e.g. {sets}; give an explicit mapping otherwise)",
        field="particles",
    )


def coordinate_prefixes(fields: Sequence[str]) -> dict[str, dict[str, str]]:
    """Prefixes of field names whose suffixes hold a complete set of coordinates (``PFCands`` of
    ``PFCands_pt, PFCands_eta, PFCands_phi, PFCands_mass``, NanoAOD's branch names; ``_`` or
    ``.`` after the prefix), each with its coordinates (vector name -> full field name).

    Example:
        >>> coordinate_prefixes(["nPFCands", "PFCands_pt", "PFCands_eta", "PFCands_phi",
        ...                      "PFCands_mass", "Jet_pt"])
        {'PFCands': {'pt': 'PFCands_pt', 'eta': 'PFCands_eta', 'phi': 'PFCands_phi', \
'mass': 'PFCands_mass'}}
    """
    groups: dict[str, dict[str, str]] = {}
    for field in fields:
        last = str(field).split("/")[-1]
        for sep in ("_", "."):
            if sep in last:
                prefix, suffix = last.split(sep, 1)
                groups.setdefault(prefix, {}).setdefault(suffix, str(field))
    found: dict[str, dict[str, str]] = {}
    for prefix, by_suffix in groups.items():
        try:
            coords = detect_coordinates(list(by_suffix), vector_names=False)
        except InvalidJetError:
            continue
        found[prefix] = {c: by_suffix[suffix] for c, suffix in coords.items()}
    return found


def _detect_fields(fields: Sequence[str], where: str) -> dict[str, str]:
    """:func:`detect_coordinates`, else the coordinates of the one prefix that has a complete set
    (``PFCands_pt, ...``); several such prefixes are an error that names them."""
    try:
        return detect_coordinates(fields, where=where)
    except InvalidJetError as exc:
        missing = exc  # raised below unless one prefix holds a complete set
    prefixed = coordinate_prefixes(fields)
    if len(prefixed) == 1:
        return next(iter(prefixed.values()))
    if len(prefixed) > 1:
        names = ", ".join(f"{p!r} ({', '.join(m.values())})" for p, m in prefixed.items())
        first = next(iter(prefixed))
        raise InvalidJetError(
            f"{where + ': ' if where else ''}the fields hold the coordinates of several particle "
            f"collections: {names}; select one (e.g. array[[f for f in array.fields if "
            f"f.startswith({first + '_'!r})]]) or give mapping=",
            field="particles",
        )
    raise missing  # no complete set under any name: the message lists the fields


def _records_of_particles(arr: Any, where: str) -> Any:
    """``n * {f: var * x, ...}`` (a record of per-jet lists, as ``tree.arrays([...])`` returns
    separate jagged branches) as ``n * var * {f: x, ...}``; the record's fields that are not lists
    (one value per jet, such as a particle count) are left out. Other arrays are unchanged."""
    import awkward as ak

    if not ak.fields(arr) or not ak.to_layout(arr).is_record:
        return arr
    lists = [f for f in ak.fields(arr) if arr[f].ndim == 2]
    if not lists:
        return arr
    try:
        return ak.zip({f: arr[f] for f in lists})
    except ValueError:
        counts = np.stack([ak.to_numpy(ak.num(arr[f], axis=1)) for f in lists])
        jet = int(np.flatnonzero((counts != counts[0]).any(axis=0))[0])
        sizes = ", ".join(f"{f}: {int(n)}" for f, n in zip(lists, counts[:, jet], strict=True))
        raise InvalidJetError(
            f"{where + ': ' if where else ''}jet {jet}: the particle fields are lists of different "
            f"lengths ({sizes}); each field needs one value per particle",
            field="particles",
        ) from None


def to_cartesian(components: Mapping[str, Any]) -> np.ndarray:
    """``(n, 4)`` float64 ``(E, px, py, pz)`` from flat arrays of vector coordinates, via ``vector``
    (a particle with a negative ``pt`` gets NaN: see :func:`input_value_problem`).

    Args:
        components: vector coordinate name (as from :func:`detect_coordinates`) -> 1-D array.

    Example:
        >>> import numpy as np
        >>> p = to_cartesian({"pt": np.array([3.0]), "eta": np.array([0.0]),
        ...                   "phi": np.array([0.0]), "mass": np.array([4.0])})
        >>> p.tolist()
        [[5.0, 3.0, 0.0, 0.0]]
    """
    import awkward as ak
    import vector

    vector.register_awkward()
    arrays = {k: np.ascontiguousarray(v, dtype=np.float64) for k, v in components.items()}
    n = next(iter(arrays.values())).shape[0] if arrays else 0
    out = np.empty((n, 4), dtype=np.float64)
    if n == 0:
        return out
    if set(arrays) == set(_P4):  # already (E, px, py, pz): nothing to convert
        for j, c in enumerate(_P4):
            out[:, j] = arrays[c]
        return out
    with np.errstate(all="ignore"):
        # vector's awkward backend works on the flat columns as they are (no record copy)
        vec = ak.zip(arrays, with_name="Momentum4D")
        for j, c in enumerate(_P4):
            out[:, j] = ak.to_numpy(getattr(vec, c))
        for k in _NON_NEGATIVE & set(arrays):
            # vector would turn a negative pt into the opposite direction: no momentum at all
            # (non-finite), so that the particle's jet is invalid, not silently another jet
            out[arrays[k] < 0.0] = np.nan
    return out


def check_mass_policy(mass_policy: Any) -> str | float:
    """A mass policy in its normal form (``"clamp"``, ``"keep"`` or a mass in GeV as a float).

    Raises:
        InvalidJetError: (field ``mass_policy``) for anything else.

    Example:
        >>> check_mass_policy(" Clamp"), check_mass_policy("0.13957")
        ('clamp', 0.13957)
    """
    if isinstance(mass_policy, str):
        key = mass_policy.strip().lower()
        if key in MASS_POLICIES:
            return key
        try:
            mass_policy = float(key)
        except ValueError:
            raise InvalidJetError(
                f"unknown mass policy {mass_policy!r}; use 'clamp', 'keep' or a mass in GeV",
                field="mass_policy",
            ) from None
    m = float(mass_policy)
    if not np.isfinite(m) or m < 0.0:
        raise InvalidJetError(f"a particle mass must be finite and >= 0, got {m}",
                              field="mass_policy")
    return m


def apply_mass_policy(p4: np.ndarray, mass_policy: Any = DEFAULT_MASS_POLICY) -> np.ndarray:
    """Apply a mass policy (see :mod:`jetastar.momenta`) to ``(n, 4)`` 4-vectors in place.

    Returns:
        Boolean ``(n,)``: which particles were changed.

    Example:
        >>> import numpy as np
        >>> p = np.array([[1.0, 0.6, 0.8, 1e-7], [2.0, 0.0, 0.0, 1.0]])
        >>> apply_mass_policy(p).tolist(), bool(p[0, 0] ** 2 - (p[0, 1:] ** 2).sum() >= 0)
        ([True, False], True)
    """
    policy = check_mass_policy(mass_policy)
    n = p4.shape[0]
    changed = np.zeros(n, dtype=bool)
    if n == 0 or policy == "keep":
        return changed
    if p4.dtype != np.float64 or not p4.flags.c_contiguous:
        raise ValueError("apply_mass_policy needs a C-contiguous float64 (n, 4) array")
    if isinstance(policy, float):
        _assign_mass_kernel(p4, policy, changed)
    else:
        _clamp_kernel(p4, SPACELIKE_TOLERANCE, changed)
    return changed


@nb.njit(cache=True)
def _clamp_kernel(p4, tol, changed):  # pragma: no cover - numba
    """Raise E of rounding-spacelike particles to the smallest float64 with E² − |p|² >= 0."""
    for i in range(p4.shape[0]):
        e = p4[i, 0]
        p2 = p4[i, 1] * p4[i, 1] + p4[i, 2] * p4[i, 2] + p4[i, 3] * p4[i, 3]
        t = e * e - p2
        if t < 0.0 and t >= -tol * e * e and e > 0.0:
            new = max(e, math.sqrt(p2))
            while new * new - p2 < 0.0:  # a few steps at most
                new = np.nextafter(new, np.inf)
            p4[i, 0] = new
            changed[i] = True


@nb.njit(cache=True)
def _assign_mass_kernel(p4, mass, changed):  # pragma: no cover - numba
    """E = sqrt(|p|² + m²), 3-momentum kept (non-finite particles left alone), raised to the
    smallest float64 with E² − |p|² >= 0 where rounding leaves it below (a mass of 0 or a tiny one:
    such a particle would make every split with it −∞ in the symmetric form)."""
    for i in range(p4.shape[0]):
        p2 = p4[i, 1] * p4[i, 1] + p4[i, 2] * p4[i, 2] + p4[i, 3] * p4[i, 3]
        e = math.sqrt(p2 + mass * mass)
        if not np.isfinite(e):
            continue
        while e * e - p2 < 0.0:  # a few steps at most
            e = np.nextafter(e, np.inf)
        if e != p4[i, 0]:
            p4[i, 0] = e
            changed[i] = True


# ---------------------------------------------------------------------- the columnar validator
@dataclasses.dataclass(frozen=True)
class LeafProblem:
    """The first problem :func:`first_leaf_problem` found in flat leaf columns.

    Attributes:
        kind: ``"too few"``, ``"non-finite"``, ``"non-positive energy"`` or ``"spacelike"``.
        jet: position of the jet (row of ``offsets``).
        leaf: index of the leaf within its jet (``too few``: the jet's number of leaves).
        component: ``"E"``, ``"px"``, ``"py"`` or ``"pz"`` (non-finite: the bad one; non-positive
            energy: ``"E"``; otherwise ``""``).
        value: the bad value (spacelike: ``E² − |p|²``).
    """

    kind: str
    jet: int
    leaf: int
    component: str = ""
    value: float = math.nan

    def message(self, noun: str = "leaf", *, tolerance: bool = False) -> str:
        """The one-line description (``noun``: what a leaf is called, ``"leaf"`` / ``"particle"``;
        ``tolerance``: name the spacelike tolerance).

        Example:
            >>> LeafProblem("non-positive energy", 3, 1, "E", -2.0).message()
            'leaf 1 has non-positive energy E = -2.0 GeV'
        """
        if self.kind == "too few":
            plural = "leaves" if noun == "leaf" else f"{noun}s"
            return f"a jet needs at least 2 {plural}, got {self.leaf}"
        if self.kind == "non-finite":
            return f"{noun} {self.leaf} has a non-finite {self.component} ({self.value})"
        if self.kind == "non-positive energy":
            return f"{noun} {self.leaf} has non-positive energy E = {self.value} GeV"
        text = f"{noun} {self.leaf} is spacelike: E² − |p|² = {self.value:.6g} GeV²"
        if tolerance:
            text += f" (tolerance {SPACELIKE_TOLERANCE:g}·E²)"
        return text


def first_leaf_problem(
    leaves: np.ndarray, offsets: Any, *, finite: bool = True, too_few: bool = True,
) -> LeafProblem | None:
    """The first invalid jet of flat leaf columns, or ``None``: the checks every jet passes.

    The one validator of leaf momenta, used by :class:`~jetastar.Jet`, the file readers, the
    momenta conversion and the columnar clustering of whole chunks (each words the problem its way
    with :meth:`LeafProblem.message`; :func:`leaf_problems` gives every jet's). Checked in this
    order, each over all jets: fewer than 2 leaves, a non-finite value, ``E <= 0``, and a clearly
    spacelike leaf (``E² − |p|² < −SPACELIKE_TOLERANCE · E²``).

    Args:
        leaves: ``(M, 4)`` float64 ``(E, px, py, pz)``.
        offsets: ``(J + 1,)`` jet ``j``'s leaves are ``leaves[offsets[j]:offsets[j + 1]]``.
        finite: check for non-finite values (off when the caller has checked its inputs).
        too_few: check the number of leaves per jet.

    Example:
        >>> import numpy as np
        >>> p = np.array([[5.0, 0, 0, 4], [5.0, 0, 0, -4], [1.0, 0, 0, 2], [3.0, 0, 0, 1]])
        >>> first_leaf_problem(p, np.array([0, 2, 4])).message()
        'leaf 0 is spacelike: E² − |p|² = -3 GeV²'
    """
    kind, leaf, comp, value = leaf_problems(leaves, offsets, finite=finite, too_few=too_few)
    if kind.shape[0] == 0:
        return None
    # the first kind (in the order of the checks) any jet has, then the first jet with it
    key = np.where(kind > 0, kind, len(_KINDS) + 1) * kind.shape[0] + np.arange(kind.shape[0])
    j = int(np.argmin(key))
    if kind[j] == LEAF_OK:
        return None
    k = int(kind[j])
    return LeafProblem(_KINDS[k - 1], j, int(leaf[j]), _component_name(k, int(comp[j])),
                       float(value[j]))


#: the kinds of :class:`LeafProblem`, in the order of the checks (code ``k`` is ``_KINDS[k - 1]``)
_KINDS = ("too few", "non-finite", "non-positive energy", "spacelike")
#: :func:`leaf_problems` code of a jet whose leaves pass every check
LEAF_OK = 0


def offset_ranges(offsets: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """The concatenated rows ``offsets[i]:offsets[i + 1]`` of the entries ``idx``, in order (the
    rows of a ragged column: a jet's leaves or nodes, a results table's tree nodes).

    Example:
        >>> offset_ranges(np.array([0, 2, 3, 6]), np.array([2, 0])).tolist()
        [3, 4, 5, 0, 1]
    """
    idx = np.asarray(idx, dtype=np.int64)
    start = offsets[idx]
    count = offsets[idx + 1] - start
    total = int(count.sum())
    if total == 0:
        return np.empty(0, np.int64)
    first = np.zeros(idx.shape[0], dtype=np.int64)
    np.cumsum(count[:-1], out=first[1:])
    return np.repeat(start - first, count) + np.arange(total, dtype=np.int64)


def _component_name(kind: int, comp: int) -> str:
    if kind == 2:
        return _P4_ORDER[comp]
    return "E" if kind == 3 else ""


def leaf_problems(
    leaves: np.ndarray, offsets: Any, *, finite: bool = True, too_few: bool = True,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every jet's first leaf problem, as arrays (the per-jet form of :func:`first_leaf_problem`).

    Args:
        leaves, offsets, finite, too_few: as in :func:`first_leaf_problem`.

    Returns:
        ``(kind, leaf, component, value)``, each ``(J,)``: ``kind`` is :data:`LEAF_OK` (0) for a
        valid jet, else 1 + the position of the problem's kind in the order of the checks (too
        few, non-finite, non-positive energy, spacelike); ``leaf`` the leaf (too few: the number
        of leaves), ``component`` the column of a non-finite value, ``value`` as in
        :class:`LeafProblem`.

    Example:
        >>> import numpy as np
        >>> p = np.array([[5.0, 0, 0, 4], [5.0, 0, 0, -4], [1.0, 0, 0, 2], [3.0, 0, 0, 1]])
        >>> leaf_problems(p, np.array([0, 2, 4]))[0].tolist()
        [0, 4]
    """
    p = np.ascontiguousarray(leaves, dtype=np.float64).reshape(-1, 4)
    off = np.ascontiguousarray(offsets, dtype=np.int64)
    n_jets = off.shape[0] - 1
    kind = np.zeros(n_jets, np.int64)
    leaf = np.zeros(n_jets, np.int64)
    comp = np.zeros(n_jets, np.int64)
    value = np.zeros(n_jets, np.float64)
    _leaf_problems_kernel(p, off, bool(finite), bool(too_few), SPACELIKE_TOLERANCE, kind, leaf,
                          comp, value)
    return kind, leaf, comp, value


@kernel_helper
def jet_leaf_problem(leaves, a, b, finite, too_few, tol):  # pragma: no cover - numba
    """The first problem of the leaves ``leaves[a:b]`` of one jet (numba kernel; the checks of
    :func:`first_leaf_problem`): ``(kind, leaf, component, value)``, ``kind`` 0 when valid."""
    n = b - a
    if too_few and n < 2:
        return 1, n, 0, np.nan
    if finite:
        for i in range(a, b):
            for c in range(4):
                if not np.isfinite(leaves[i, c]):
                    return 2, i - a, c, leaves[i, c]
    for i in range(a, b):
        if not leaves[i, 0] > 0.0:
            return 3, i - a, 0, leaves[i, 0]
    for i in range(a, b):
        e = leaves[i, 0]
        t = e * e - (leaves[i, 1] * leaves[i, 1] + leaves[i, 2] * leaves[i, 2]
                     + leaves[i, 3] * leaves[i, 3])
        if t < -tol * e * e:
            return 4, i - a, 0, t
    return 0, 0, 0, np.nan


@nb.njit(cache=True)
def _leaf_problems_kernel(leaves, offsets, finite, too_few, tol, kind, leaf, comp,
                          value):  # pragma: no cover - numba
    for j in range(offsets.shape[0] - 1):
        kind[j], leaf[j], comp[j], value[j] = jet_leaf_problem(
            leaves, offsets[j], offsets[j + 1], finite, too_few, tol)


def first_nonfinite_input(components: Mapping[str, np.ndarray]) -> tuple[str, int] | None:
    """``(name, index)`` of the first bad input coordinate (the first column, in order, that
    has one): non-finite, or a negative ``pt`` (which vector would turn into the opposite
    direction); ``None`` when there is none. The columns must be float64 (as
    :func:`flat_columns` makes them); :func:`input_value_problem` words the problem.
    """
    for k, v in components.items():
        q = _first_nonfinite(v, k in _NON_NEGATIVE)
        if q >= 0:
            return k, int(q)
    return None


#: input coordinates that cannot be negative
_NON_NEGATIVE = frozenset({"pt"})


def input_value_problem(name: str, value: Any) -> str:
    """What is wrong with the input coordinate ``name`` of value ``value``, as found by
    :func:`first_nonfinite_input` (``"has a non-finite value (nan)"``, ...)."""
    if name in _NON_NEGATIVE and np.isfinite(value) and value < 0:
        return f"has a negative transverse momentum ({value}); pt must be >= 0"
    return f"has a non-finite value ({value})"


_P4_ORDER = ("E", "px", "py", "pz")


def vector_momenta(obj: Any) -> np.ndarray:
    """``(..., 4)`` float64 ``(E, px, py, pz)`` of a vector momentum object (e.g. a vector numpy
    array, whose fields carry vector's own names ``x, y, z, t``, ``rho, phi, eta, tau``, ...),
    read through vector's properties."""
    return np.stack([np.asarray(getattr(obj, c), dtype=np.float64) for c in _P4_ORDER], axis=-1)


#: appended to the message of a jet rejected because ``validate=True``: how to keep such jets
KEEP_HINT = " (validate=False keeps invalid jets; clustering then records them as failed)"


def _entries(entry: Any, n_jets: int, path: str | None) -> np.ndarray:
    """The jets' ids (``entry``, default ``0..n_jets-1``) as int64, one per jet: a list of
    another length is named as such (it was found later, among the collection's columns)."""
    if entry is None:
        return np.arange(n_jets, dtype=np.int64)
    out = np.asarray(entry, dtype=np.int64).ravel()
    if out.shape[0] != n_jets:
        raise InvalidJetError(f"{path + ': ' if path else ''}jet_id has {out.shape[0]} values, "
                              f"need one per jet: {n_jets}", field="jet_id")
    return out


def _fail(msg: str, *, path: str | None, entry: int, field: str) -> InvalidJetError:
    if path:
            return InvalidJetInFileError(msg, path=path, entry=entry, jet=entry, field=field)
    return InvalidJetError(msg, jet=entry, field=field)


def flat_columns(
    components: Mapping[str, Any],
    counts: Any,
    *,
    entry: Any = None,
    fields: Mapping[str, str] | None = None,
    t_cut: float = DEFAULT_T_CUT,
    lam: float = DEFAULT_LAM,
    lam_root: float = DEFAULT_LAM_ROOT,
    mass_policy: Any = DEFAULT_MASS_POLICY,
    jet_type: str = "data",
    validate: bool = True,
    path: str | None = None,
    jet_columns: Mapping[str, Any] | None = None,
    problems: dict[int, str] | None = None,
) -> dict[str, Any]:
    """The columns of a :class:`~jetastar.JetCollection` (its keyword arguments) from flat
    particle coordinates and particles per jet; :func:`jetastar.momenta.collection_from_flat`.

    Args:
        components: vector coordinate name -> flat ``(M,)`` array (all jets' particles in order).
        counts: ``(J,)`` particles per jet.
        entry: ``(J,)`` ids of the jets (their entry numbers in a file); default ``0..J-1``.
        fields: vector coordinate name -> the user's field name (for error messages).
        t_cut, lam, lam_root: Ginkgo parameters of every jet (GeV², rates).
        mass_policy: ``"clamp"``, ``"keep"`` or a mass in GeV (see :mod:`jetastar.momenta`).
        jet_type: label of the jets.
        validate: raise on the first invalid jet; otherwise such jets are kept (clustering
            them records ``"failed"`` with the reason).
        path: the file the particles came from (named in errors).
        jet_columns: further per-jet float columns to attach.
        problems: with ``validate=False``, gets the message of each jet with a bad input value
            (:func:`nonfinite_problems`: jet position -> one line naming the input field), which
            the converted leaves no longer show.

    Raises:
        InvalidJetError: (:class:`~jetastar.io.InvalidJetInFileError` with ``path``) naming the
            entry, the field and the problem: non-finite coordinates, fewer than 2 particles,
            non-positive energy, a clearly spacelike particle, a jet mass² not above ``t_cut``.
    """
    ShowerParams(t_cut=t_cut, lam=lam, lam_root=lam_root, m_hard=1e150)  # validates the values
    counts = np.asarray(counts, dtype=np.int64).ravel()
    n_jets = counts.shape[0]
    entry = _entries(entry, n_jets, path)
    fields = dict(fields or {c: c for c in components})
    if problems is not None and not validate:
        problems.update(nonfinite_problems(components, counts, entry=entry, fields=fields,
                                           path=path))
    offsets = np.zeros(n_jets + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    comps = {k: np.asarray(v, dtype=np.float64).ravel() for k, v in components.items()}
    for k, v in comps.items():
        if v.shape[0] != offsets[-1]:
            raise InvalidJetError(
                f"{path + ': ' if path else ''}field '{fields.get(k, k)}' has {v.shape[0]} values, "
                f"the particle counts add up to {int(offsets[-1])}", field=fields.get(k, k)
            )
    if validate:
        small = np.flatnonzero(counts < 2)
        if small.size:
            i = int(small[0])
            few = LeafProblem("too few", i, int(counts[i]))
            raise _fail(few.message("particle") + KEEP_HINT, path=path, entry=int(entry[i]),
                        field="particles")
        bad_input = first_nonfinite_input(comps)
        if bad_input is not None:
            k, q = bad_input
            i = _jet_of(offsets, q)
            raise _fail(f"particle {q - int(offsets[i])} {input_value_problem(k, comps[k][q])}"
                        + KEEP_HINT, path=path, entry=int(entry[i]), field=fields.get(k, k))
    p4 = to_cartesian(comps)
    changed = apply_mass_policy(p4, mass_policy)
    n_adjusted = np.zeros(n_jets, np.float64)
    n_negative = np.zeros(n_jets, np.float64)
    total = np.zeros((n_jets, 4), dtype=np.float64)
    first_bad = np.full(2, -1, np.int64)
    _scan_kernel(p4, offsets, changed, SPACELIKE_TOLERANCE, total, n_adjusted, n_negative,
                 first_bad)
    if validate and (first_bad[0] >= 0 or first_bad[1] >= 0):
        # the scan found a bad particle in the same pass as the sums; the validator names it
        # (the inputs were checked for non-finite values above)
        bad = first_leaf_problem(p4, offsets, finite=False, too_few=False)
        if bad is not None:
            source = "/".join(fields.get(c, c) for c in comps)
            field = source if bad.kind == "non-positive energy" else fields.get("mass", source)
            row = int(offsets[bad.jet]) + bad.leaf
            padding = ""
            if bad.kind == "non-positive energy" and all(float(v[row]) == 0.0
                                                         for v in comps.values()):
                # zero-padded records (ak.pad_none + fill_none + to_regular) are read as particles
                padding = (" (every coordinate is 0: padding? drop it, e.g. "
                           "particles[particles.pt > 0], or give a padded numpy array with mask=)")
            raise _fail(bad.message("particle") + padding + KEEP_HINT, path=path,
                        entry=int(entry[bad.jet]), field=field)
    with np.errstate(all="ignore"):
        t_root = total[:, 0] ** 2 - (total[:, 1] ** 2 + total[:, 2] ** 2 + total[:, 3] ** 2)
    if validate:
        low = np.flatnonzero(~(t_root > t_cut))
        if low.size:
            i = int(low[0])
            raise _fail(
                f"the jet's squared mass {t_root[i]:.6g} GeV² is not above t_cut = {t_cut:g} GeV², "
                "so every tree has likelihood −∞ (choose a smaller t_cut, or validate=False to "
                "keep such jets; clustering then records them as failed)",
                path=path, entry=int(entry[i]), field="params.t_cut",
            )
    m_hard = np.sqrt(np.abs(t_root))
    m_hard[m_hard == 0.0] = np.nan
    columns = {"n_mass_adjusted": n_adjusted, "n_negative_t": n_negative}
    columns.update({k: np.asarray(v, dtype=np.float64) for k, v in (jet_columns or {}).items()})
    return dict(
        leaves=p4,
        leaf_offsets=offsets,
        children=np.empty((0, 2), np.int64),
        leaf_of_node=np.empty(0, np.int64),
        node_offsets=np.zeros(n_jets + 1, np.int64),
        jet_id=entry,
        seed=np.full(n_jets, -1, np.int64),
        jet_type=text_column(n_jets, str(jet_type)),
        params={
            "m_hard": m_hard,
            "lam": np.full(n_jets, float(lam)),
            "lam_root": np.full(n_jets, float(lam_root)),
            "t_cut": np.full(n_jets, float(t_cut)),
            "t_root": t_root,
            "root_momentum": total,
        },
        jet_columns=columns,
    )


def nonfinite_problems(
    components: Mapping[str, Any], counts: Any, *, entry: Any, fields: Mapping[str, str],
    path: str | None = None,
) -> dict[int, str]:
    """Jets with a non-finite input value: position -> the one-line message naming the field.

    What :func:`~jetastar.momenta.collection_from_flat` raises for the first such jet with
    ``validate=True``; used
    to record every bad jet of a file whose jets are kept (``validate=False``).
    """
    counts = np.asarray(counts, dtype=np.int64)
    offsets = np.zeros(counts.shape[0] + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    first: dict[int, tuple[int, str]] = {}
    for k, v in components.items():
        v = np.asarray(v, dtype=np.float64)
        with np.errstate(invalid="ignore"):
            bad = np.flatnonzero(~np.isfinite(v) | ((v < 0.0) if k in _NON_NEGATIVE else False))
        if bad.size == 0:
            continue
        jets = np.searchsorted(offsets, bad, side="right") - 1
        uniq, where = np.unique(jets, return_index=True)  # first bad particle of each jet
        for i, q in zip(uniq.tolist(), bad[where].tolist(), strict=True):
            if i not in first or q < first[i][0]:
                first[i] = (q, k)
    out = {}
    for i, (q, k) in first.items():
        v = np.asarray(components[k])[q]
        out[i] = str(_fail(f"particle {q - int(offsets[i])} {input_value_problem(k, v)}",
                           path=path, entry=int(np.asarray(entry)[i]), field=fields.get(k, k)))
    return out


def _jet_of(offsets: np.ndarray, q: int) -> int:
    return int(np.searchsorted(offsets, q, side="right") - 1)


@nb.njit(cache=True)
def _first_nonfinite(v, non_negative):  # pragma: no cover - numba
    for i in range(v.shape[0]):
        if not np.isfinite(v[i]) or (non_negative and v[i] < 0.0):
            return i
    return -1


@nb.njit(cache=True)
def _scan_kernel(p4, offsets, changed, tol, total, n_adjusted, n_negative,
                 first_bad):  # pragma: no cover - numba
    """One pass: per-jet 4-vector sums, particles changed by the mass policy and particles left
    with t < 0; first non-positive-energy particle (``first_bad[0]``) and first clearly spacelike
    one (``first_bad[1]``)."""
    for j in range(offsets.shape[0] - 1):
        for i in range(offsets[j], offsets[j + 1]):
            e = p4[i, 0]
            for c in range(4):
                total[j, c] += p4[i, c]
            if changed[i]:
                n_adjusted[j] += 1.0
            t = t_of(e, p4[i, 1], p4[i, 2], p4[i, 3])
            if t < 0.0:
                n_negative[j] += 1.0
            if not e > 0.0:
                if first_bad[0] < 0:
                    first_bad[0] = i
            elif first_bad[1] < 0 and t < -tol * e * e:
                first_bad[1] = i


def _parse_components(components: Any) -> list[str]:
    if components is None:
        raise InvalidJetError(
            "a dense (n_jets, n_particles, 4) array needs components=, e.g. 'E,px,py,pz' or "
            "'pt,eta,phi,mass'", field="components"
        )
    names = [c.strip() for c in components.split(",")] if isinstance(components, str) \
        else [str(c) for c in components]
    canon = [canonical_name(c) for c in names]
    if len(names) != 4 or None in canon or not any(
        set(canon) == set(s) for s in COORDINATE_SETS
    ):
        raise InvalidJetError(
            f"components {names} are not four momentum coordinates vector understands "
            "(e.g. E,px,py,pz or pt,eta,phi,mass, in the array's order)", field="components"
        )
    return names


def is_list_of_jet_arrays(obj: Any) -> bool:
    """Whether ``obj`` is a non-empty list or tuple of per-jet ``(n_i, 4)`` momentum arrays (numpy
    arrays or nested lists of rows), i.e. several jets, not one jet's rows.

    Example:
        >>> import numpy as np
        >>> is_list_of_jet_arrays([np.ones((3, 4)), np.ones((2, 4))]), is_list_of_jet_arrays(
        ...     [[1.0, 0.0, 0.0, 0.5], [1.0, 0.0, 0.0, -0.5]])
        (True, False)
    """
    if not isinstance(obj, (list, tuple)) or not obj:
        return False
    for item in obj:
        if isinstance(item, np.ndarray):
            shape = item.shape
        elif isinstance(item, (list, tuple)) and item and isinstance(item[0], (list, tuple)):
            shape = (len(item), len(item[0]))
        else:
            return False
        if len(shape) != 2 or shape[1] != 4:
            return False
    return True


def list_columns(arrays: Sequence[Any], components: Any = None, **kw: Any) -> dict[str, Any]:
    """Columns of jets from a list of per-jet ``(n_i, 4)`` arrays whose columns are in
    ``components`` order (default ``"E,px,py,pz"``, as for one jet's array).

    Args:
        arrays: one array (or list of rows) per jet.
        components: the order of the columns, e.g. ``"pt,eta,phi,mass"``.
        **kw: passed to :func:`flat_columns` (``entry``, ``t_cut``, ``mass_policy``,
            ``validate``...).

    Example:
        >>> import numpy as np
        >>> jets = [np.array([[50.0, 1.0, 0.0, 0.0], [40.0, -1.0, 0.0, 0.0]])] * 2
        >>> list_columns(jets, t_cut=1.0)["leaf_offsets"].tolist()
        [0, 2, 4]
    """
    names = _parse_components("E,px,py,pz" if components is None else components)
    blocks = []
    for i, item in enumerate(arrays):
        try:
            block = np.asarray(item, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise InvalidJetError(f"jet {i}: its particles cannot be read as numbers ({exc})",
                                  field="particles") from None
        if block.ndim != 2 or block.shape[1] != 4:
            raise InvalidJetError(f"jet {i}: its particles must have shape (n, 4), got "
                                  f"{block.shape}", field="particles")
        blocks.append(block)
    counts = np.asarray([b.shape[0] for b in blocks], dtype=np.int64)
    flat = np.concatenate(blocks) if blocks else np.empty((0, 4))
    comps = {canonical_name(n): np.ascontiguousarray(flat[:, j]) for j, n in enumerate(names)}
    fields = {canonical_name(n): f"particles[..., {j}] ({n})" for j, n in enumerate(names)}
    return flat_columns(comps, counts, fields=fields, **kw)


def dense_columns(
    array: Any,
    components: Any = None,
    *,
    mask: Any = None,
    padding: float = 0.0,
    entry: Any = None,
    path: str | None = None,
    field: str = "particles",
    **kw: Any,
) -> dict[str, Any]:
    """Columns of jets from a dense ``(n_jets, n_particles, 4)`` array (the common ML jet-dataset
    layout); :func:`jetastar.momenta.from_dense`.

    Args:
        array: float array ``(J, P, 4)`` whose last axis is in ``components`` order, or a structured
            array ``(J, P)`` with named fields (coordinates detected from the names).
        components: the order of the last axis, e.g. ``"E,px,py,pz"`` or ``("pt", "eta", "phi",
            "mass")``.
        mask: optional boolean ``(J, P)``, ``True`` for real particles. Without a mask, a particle
            whose four components all equal ``padding`` is padding.
        padding: the value of padded slots (0 by default); with a mask, the masked-out slots
            must hold it too (a non-zero "padding" usually means a wrong mask or layout).
        entry: ids of the jets (default ``0..J-1``).
        path, field: where the array came from (for error messages).
        **kw: passed to :func:`flat_columns` (``t_cut``, ``mass_policy``, ``validate``...).

    Example:
        >>> import numpy as np
        >>> dense = np.zeros((2, 3, 4))
        >>> dense[:, :2] = [[[60.0, 0.0, 0.1, 0.0], [40.0, 0.2, -0.1, 0.0]]]
        >>> dense_columns(dense, "pt,eta,phi,mass", t_cut=1.0)["leaf_offsets"].tolist()
        [0, 2, 4]
    """
    if isinstance(array, np.ma.MaskedArray):
        # the mask of a masked array says which slots are particles (a slot with any masked
        # component is padding), unless a mask is given; masked slots hold the padding value
        hidden = np.ma.getmaskarray(array)
        hidden = hidden.any(axis=-1) if hidden.ndim == 3 else hidden
        if mask is None:
            mask = ~hidden
        array = array.filled(padding) if not array.dtype.names else array.data
    arr = np.asarray(array)
    where = f"{path}: " if path else ""
    if arr.dtype.names and type(array).__module__.startswith("vector"):
        # a vector numpy array (its fields are vector's own: x, y, z, t, rho, tau, ...)
        names = list(_P4_ORDER)
        data = vector_momenta(array)
    elif arr.dtype.names:
        coords = detect_coordinates(arr.dtype.names, where=path or "")
        names = list(coords.values())
        data = np.stack([np.asarray(arr[n], dtype=np.float64) for n in names], axis=-1)
    else:
        names = _parse_components(components)
        data = arr if arr.dtype.kind == "f" else np.asarray(arr, dtype=np.float64)
    if data.ndim != 3 or data.shape[2] != 4:
        raise InvalidJetError(
            f"{where}'{field}' must have shape (n_jets, n_particles, 4), got {data.shape}",
            field=field,
        )
    n_jets = data.shape[0]
    entry = _entries(entry, n_jets, path)
    with np.errstate(invalid="ignore"):
        is_pad = np.all(data == padding, axis=2) if not np.isnan(padding) else \
            np.all(np.isnan(data), axis=2)
    if mask is None:
        real = ~is_pad
    else:
        real = np.asarray(mask, dtype=bool)
        if real.shape != data.shape[:2]:
            raise InvalidJetError(
                f"{where}the mask has shape {real.shape}, the particles {data.shape[:2]}",
                field="mask",
            )
        bad = ~real & ~is_pad
        if bad.any():
            i, k = (int(x) for x in np.argwhere(bad)[0])
            raise _fail(
                f"padded slot {k} (mask False) holds {data[i, k].tolist()}, not {padding:g}: "
                "the mask or the component order is probably wrong",
                path=path, entry=int(entry[i]), field=field,
            )
    counts = real.sum(axis=1)
    flat = data[real].astype(np.float64)
    comps = {canonical_name(n): flat[:, j] for j, n in enumerate(names)}
    fields = {canonical_name(n): f"{field}[..., {j}] ({n})" for j, n in enumerate(names)}
    return flat_columns(comps, counts, entry=entry, fields=fields, path=path, **kw)


def awkward_columns(
    array: Any,
    *,
    mapping: Mapping[str, str] | None = None,
    entry: Any = None,
    path: str | None = None,
    **kw: Any,
) -> dict[str, Any]:
    """Columns of jets from an awkward array ``n_jets * var * {coordinates...}`` in any vector
    coordinates; :func:`jetastar.momenta.from_awkward_particles`.

    Args:
        array: jagged records (e.g. ``var * Momentum4D`` with vector behaviour, or plain records
            with fields such as ``pt, eta, phi, mass``); one list of particles per jet.
        mapping: vector coordinate -> field name, to override detection (e.g.
            ``{"pt": "PT", "eta": "Eta", "phi": "Phi", "E": "E"}``).
        entry: ids of the jets (default ``0..J-1``).
        path: origin, for error messages.
        **kw: passed to :func:`flat_columns`.
    """
    import awkward as ak

    arr = _records_of_particles(ak.Array(array), path or "")
    if arr.ndim != 2:
        raise InvalidJetError(
            f"{path + ': ' if path else ''}particles must be a jagged array n_jets * var * "
            f"record, got type {arr.type}", field="particles"
        )
    fields = ak.fields(arr)
    _check_not_missing(arr, entry, path)
    counts = ak.to_numpy(ak.num(arr, axis=1)).astype(np.int64)
    flat = ak.flatten(arr, axis=1)
    if mapping is None and _is_vector_record(flat) and not _has_coordinates(fields):
        import vector

        vector.register_awkward()  # records such as x, y, z, t or rho, phi, eta, tau
        # (in float64 before vector converts: float32 momenta of massless particles lose the
        # mass, and the log-likelihoods moved by nats against the same data named pt, eta, ...)
        vec = ak.with_name(ak.values_astype(flat, np.float64), "Momentum4D")
        comps = {c: ak.to_numpy(getattr(vec, c)).astype(np.float64) for c in ("px", "py", "pz", "E")}
        return flat_columns(comps, counts, entry=entry, path=path, **kw)
    if mapping is None:
        if not fields:
            raise InvalidJetError("particles must be records with coordinate fields "
                                  "(e.g. pt, eta, phi, mass)", field="particles")
        mapping = _detect_fields(fields, path or "")
    else:
        missing = [f for f in mapping.values() if f not in fields]
        if missing:
            raise InvalidJetError(f"fields {missing} do not exist; the particles have {fields}",
                                  field="particles")
        unknown = [c for c in mapping if canonical_name(c) is None]
        if unknown:
            raise InvalidJetError(f"{unknown} are not momentum coordinates (use px, py, pz, E, pt, "
                                  "eta, phi, theta, mass)", field="mapping")
        mapping = {canonical_name(c): f for c, f in mapping.items()}
        detect_coordinates(list(mapping), where="mapping")
    comps = {c: ak.to_numpy(flat[f]).astype(np.float64, copy=False) for c, f in mapping.items()}
    return flat_columns(comps, counts, entry=entry, fields=mapping, path=path, **kw)


def _check_not_missing(arr: Any, entry: Any, path: str | None) -> None:
    """A missing jet or particle (``None`` in an option-type awkward array) is an error naming
    it (its count came out as a huge negative number)."""
    import awkward as ak

    if "?" not in str(arr.type) and "option[" not in str(arr.type):  # (no None anywhere)
        return
    ids = _entries(entry, len(arr), path)
    jets = np.flatnonzero(ak.to_numpy(ak.is_none(arr, axis=0)))
    if jets.size:
        i = int(jets[0])
        raise _fail(f"the jet is missing (None; {jets.size} jets are): drop such jets first, "
                    "e.g. jets[~ak.is_none(jets)]", path=path, entry=int(ids[i]),
                    field="particles")
    fields = ak.fields(arr)
    # (a missing record is missing in every field; a missing value in a record becomes NaN)
    missing = ak.is_none(arr[fields[0]] if fields else arr, axis=1)
    if ak.any(missing):
        per_jet = ak.to_numpy(ak.any(missing, axis=1))
        i = int(np.flatnonzero(per_jet)[0])
        q = int(np.flatnonzero(ak.to_numpy(missing[i]))[0])
        raise _fail(f"particle {q} is missing (None)", path=path, entry=int(ids[i]),
                    field="particles")


def _is_vector_record(flat: Any) -> bool:
    import awkward as ak

    name = ak.parameters(flat).get("__record__")
    return name in ("Momentum4D", "Vector4D", "Lorentz")


def _has_coordinates(fields: Sequence[str]) -> bool:
    try:
        detect_coordinates(fields)
    except InvalidJetError:
        return False
    return True
