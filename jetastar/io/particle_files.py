"""Read particles from *other people's* ROOT and HDF5 files into jets.

jetastar's own files (:func:`jetastar.io.read`) hold jets with truth trees. This module reads the
layouts physicists already have:

* **ROOT TTrees** (read with uproot), one entry per jet or per event, particles in jagged branches
  chosen by a prefix — CMS NanoAOD-like ``nPFCands`` + ``PFCands_pt/eta/phi/mass``, Delphes-like
  ``Particle.PT/Eta/Phi/E/Px/Py/Pz``, anything written by ``tree["Jets"] = {"part": ak.zip(...)}`` —
  with the coordinates detected from the names (:func:`jetastar.momenta.detect_coordinates`), or an
  explicit ``mapping`` (vector coordinate -> branch name);
* **HDF5** (h5py): a dense padded dataset ``(n_jets, n_particles, 4)`` with a declared component
  order (``components="pt,eta,phi,mass"``) and optionally a boolean mask dataset, a structured
  ``(n_jets, n_particles)`` dataset with named fields, a group of flat per-coordinate datasets
  (``pt``, ``eta``, ...) plus ``counts`` (particles per entry) or ``offsets``, or a group written
  with ``ak.to_buffers`` (attributes ``form`` and ``length``; read whole, then sliced).

``layout="jet"`` (default): each entry is one jet. ``layout="event"``: each entry is a whole event;
jets are found with FastJet (``pip install fastjet``; anti-kt with radius ``jet_r`` and
``jet_ptmin`` in GeV, by default) and each jet's constituents become a jetastar jet.

Every jet's ``jet_id`` is its input entry number, also stored as ``jet_columns["entry"]`` (event
layout: plus ``jet_columns["jet_in_event"]``, jets ordered by decreasing pT). The mass policy and
Ginkgo parameters are those of :func:`jetastar.momenta.collection_from_flat`.

Errors are one line naming the file, the entry and the field: a missing branch lists the branches
that exist; jagged branches of different lengths, non-finite values, fewer than 2 particles, padding
that is not padding, etc. raise :class:`~jetastar.io.FileFormatError` /
:class:`~jetastar.io.InvalidJetInFileError`.

Example:
    >>> import os, tempfile
    >>> import awkward as ak, uproot
    >>> from jetastar.io import read_particles
    >>> path = os.path.join(tempfile.mkdtemp(), "events.root")
    >>> with uproot.recreate(path) as f:
    ...     f["Events"] = {"PFCands": ak.zip({"pt": [[50.0, 30.0]], "eta": [[0.1, -0.3]],
    ...                                       "phi": [[0.2, 0.5]], "mass": [[0.0, 0.0]]})}
    >>> jets = read_particles(path, tree="Events", particles="PFCands", t_cut=1.0)
    >>> len(jets), jets[0].n_leaves, int(jets.jet_columns["entry"][0])
    (1, 2, 0)
"""

from __future__ import annotations

import dataclasses
import difflib
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from .._columnar import (
    DEFAULT_MASS_POLICY,
    check_mass_policy,
    coordinate_prefixes,
    first_nonfinite_input,
    input_value_problem,
)
from ..errors import InvalidJetError
from ..ginkgo.params import ShowerParams
from ..jet import JetCollection
from ..jetfinding import FoundJets, find_jets
from ..momenta import (
    DEFAULT_LAM,
    DEFAULT_LAM_ROOT,
    DEFAULT_T_CUT,
    canonical_name,
    collection_from_flat,
    detect_coordinates,
    from_dense,
    to_cartesian,
)
from ._common import (
    FileFormatError,
    InvalidJetInFileError,
    check_exists,
    check_tree_extent,
    decompression_executor,
    one_line,
)
from .formats import file_format

__all__ = [
    "ParticleSource",
    "cluster_options",
    "describe_particle_file",
    "iterate_particles",
    "particle_entries",
    "read_particles",
]

_BLOCK = 10000  # entries converted at a time by read_particles
_COUNT_NAMES = ("counts", "count", "n", "num", "n_particles", "nparticles", "multiplicity",
                "n_constituents", "nconstituents")


@dataclasses.dataclass(frozen=True)
class ParticleSource:
    """Where and how to read particles (the settings of :func:`read_particles`).

    Args:
        path: the ROOT or HDF5 file.
        tree: ROOT: the TTree (default ``"Events"`` if present, else the file's only TTree).
        particles: ROOT: branch prefix (``"PFCands"``, ``"Particle"``, ``"part"``; default: the
            tree's only prefix whose branches hold momentum coordinates); HDF5: the dataset or
            group holding the particles (default: the file's only top-level one).
        mapping: vector coordinate -> branch / field / dataset name, instead of detection
            (e.g. ``{"pt": "PFCands_pt", "eta": "PFCands_eta", "phi": "PFCands_phi",
            "mass": "PFCands_mass"}``).
        components: HDF5 dense datasets: order of the last axis (``"E,px,py,pz"``); default the
            dataset's ``components`` attribute, if any.
        mask: HDF5 dense datasets: name of a boolean ``(n_jets, n_particles)`` dataset.
        padding: HDF5 dense datasets: the value of padded slots (0).
        layout: ``"jet"`` (an entry is a jet) or ``"event"`` (find jets with FastJet).
        jet_algorithm, jet_r, jet_ptmin: event layout: FastJet algorithm (``"antikt"``,
            ``"kt"``, ``"cambridge"``), radius and minimum jet pT (GeV).
        t_cut, lam, lam_root, mass_policy, jet_type: see :mod:`jetastar.momenta`.
    """

    path: str
    tree: str | None = None
    particles: str | None = None
    mapping: Mapping[str, str] | None = None
    components: str | None = None
    mask: str | None = None
    padding: float = 0.0
    layout: str = "jet"
    jet_algorithm: str = "antikt"
    jet_r: float = 0.4
    jet_ptmin: float = 0.0
    t_cut: float = DEFAULT_T_CUT
    lam: float = DEFAULT_LAM
    lam_root: float = DEFAULT_LAM_ROOT
    mass_policy: Any = DEFAULT_MASS_POLICY
    jet_type: str = "data"

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", str(self.path))
        if self.layout not in ("jet", "event"):
            raise ValueError(f"layout must be 'jet' or 'event', got {self.layout!r}")
        if self.mapping is not None:
            object.__setattr__(self, "mapping", dict(self.mapping))
        if isinstance(self.components, (list, tuple)):
            object.__setattr__(self, "components", ",".join(self.components))
        # bad Ginkgo parameters or mass policy fail here, before any file is read or written
        ShowerParams(t_cut=self.t_cut, lam=self.lam, lam_root=self.lam_root, m_hard=1e150)
        check_mass_policy(self.mass_policy)

    def settings(self) -> dict[str, Any]:
        """Everything but the path, as plain values (recorded in output files)."""
        d = dataclasses.asdict(self)
        d.pop("path")
        d["mass_policy"] = str(self.mass_policy)
        return d

    def collection_kw(self) -> dict[str, Any]:
        return {"t_cut": self.t_cut, "lam": self.lam, "lam_root": self.lam_root,
                "mass_policy": self.mass_policy, "jet_type": self.jet_type}


# ---------------------------------------------------------------------- both formats
class _ParticleFile:
    """A particle file open for reading (``self.file``, :meth:`_open`), its layout found by
    :meth:`_setup` (the file is closed again when that fails)."""

    def __init__(self, src: ParticleSource) -> None:
        self.src = src
        self.path = src.path
        self.file = self._open(src.path)
        try:
            self._setup()
        except BaseException:
            self.file.close()
            raise

    def _open(self, path: str) -> Any:
        """The open file (``FileFormatError`` naming the file when it cannot be opened)."""
        raise NotImplementedError

    def _setup(self) -> None:
        """Find the particles in the open file."""
        raise NotImplementedError

    def close(self) -> None:
        self.file.close()


# ---------------------------------------------------------------------- ROOT
class _RootParticles(_ParticleFile):
    def _open(self, path: str) -> Any:
        import uproot

        try:
            return uproot.open(path, decompression_executor=decompression_executor())
        except Exception as exc:
            raise FileFormatError(f"{path}: cannot open as a ROOT file ({type(exc).__name__}: "
                                  f"{one_line(str(exc))})") from None

    def _setup(self) -> None:
        src = self.src
        trees = [k.split(";")[0] for k, c in self.file.classnames().items()
                 if c in ("TTree", "ROOT::RNTuple")]
        self.rntuple = False
        name = src.tree
        if name is None:
            if "Events" in trees:
                name = "Events"
            elif len(set(trees)) == 1:
                name = trees[0]
            else:
                raise FileFormatError(f"{self.path}: give the tree to read (--tree); the file "
                                      f"has TTrees {sorted(set(trees))}")
        if name not in trees:
            raise FileFormatError(f"{self.path}: no TTree {name!r}; the file has "
                                  f"{sorted(set(trees)) or 'no TTrees'}")
        self.tree_name = name
        self.tree = self.file[name]
        self.rntuple = "RNTuple" in type(self.tree).__name__
        check_tree_extent(self.tree, name, self.path)
        keys = list(self.tree.keys(recursive=True))
        self.all_keys = keys
        if src.mapping:
            missing = [b for b in src.mapping.values() if b not in keys]
            if missing:
                raise FileFormatError(
                    f"{self.path}: tree '{name}' has no branch {', '.join(map(repr, missing))}; "
                    f"its branches are {_listing(keys)}"
                )
            bad = [c for c in src.mapping if canonical_name(c) is None]
            if bad:
                raise FileFormatError(f"{self.path}: {bad} are not momentum coordinates "
                                      "(use px, py, pz, E, pt, eta, phi, mass, theta)")
            self.branches = {canonical_name(c): b for c, b in src.mapping.items()}
            detect_coordinates(list(self.branches), where=f"{self.path}: mapping")
        else:
            particles = src.particles
            if not particles:  # the one collection with momentum coordinates, if there is one
                found = _coordinate_prefixes(keys)
                if len(found) != 1:
                    which = (f"its collections with momentum coordinates are {found}" if found
                             else f"it has branches {_listing(keys)}")
                    bare = {} if found else _bare_coordinates(self.tree, self.rntuple)
                    if bare:
                        which += ("; they are one list of particles per entry: read them with "
                                  + " ".join(f"--branch {c}={b}" for c, b in bare.items())
                                  + " (mapping=)")
                    raise FileFormatError(f"{self.path}: give the particle branch prefix "
                                          f"(--particles, e.g. PFCands); tree '{name}': {which}")
                particles = found[0]
            by_suffix: dict[str, str] = {}
            for k in keys:
                last = k.split("/")[-1]
                if last.startswith(particles) and last != particles:
                    suffix = last[len(particles):].lstrip("_.")
                    if suffix:
                        by_suffix.setdefault(suffix, k)
            if not by_suffix:
                raise FileFormatError(f"{self.path}: tree '{name}' has no branches starting with "
                                      f"{particles!r}{_did_you_mean(particles, keys)}; "
                                      f"its branches are {_listing(keys)}")
            try:
                coords = detect_coordinates(list(by_suffix))
            except InvalidJetError:
                raise FileFormatError(
                    f"{self.path}: tree '{name}': the branches of {particles!r} "
                    f"({_listing([by_suffix[s] for s in by_suffix])}) hold no complete set of "
                    "momentum coordinates (px,py,pz,E or pt,eta,phi,mass or pt,eta,phi,E)"
                    f"{_did_you_mean(particles, keys)}; or give an explicit mapping"
                ) from None
            self.branches = {c: by_suffix[s] for c, s in coords.items()}
            scalar = _scalar_branches(self.tree, list(self.branches.values()), self.rntuple)
            if scalar:
                raise FileFormatError(
                    f"{self.path}: tree '{name}': {_listing(scalar)} hold one value per "
                    f"entry, not a list of particles: {particles!r} is not a particle "
                    f"collection{_did_you_mean(particles, keys)}")
        self.n_entries = int(self.tree.num_entries)

    def read(self, start: int, stop: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
        import awkward as ak

        names = list(self.branches.values())
        try:
            if self.rntuple:  # nested records: PFCands.pt is field pt of record PFCands
                rec = self.tree.arrays(names, entry_start=start, entry_stop=stop)
                arrays = {b: _field_path(rec, b) for b in names}
            else:
                arrays = self.tree.arrays(names, entry_start=start, entry_stop=stop,
                                          library="ak", how=dict)
        except Exception as exc:
            raise FileFormatError(
                f"{self.path}: tree '{self.tree_name}' entries {start}-{stop} cannot be read "
                f"({type(exc).__name__}: {one_line(str(exc))})"
            ) from None
        counts = None
        first = None
        comps = {}
        for c, b in self.branches.items():
            arr = arrays[b]
            if arr.ndim != 2:
                raise FileFormatError(f"{self.path}: branch '{b}' of tree '{self.tree_name}' holds "
                                      f"{arr.type.content} per entry, not a list of particles")
            n = ak.to_numpy(ak.num(arr, axis=1)).astype(np.int64)
            if counts is None:
                counts, first = n, b
            elif not np.array_equal(n, counts):
                i = int(np.flatnonzero(n != counts)[0])
                raise InvalidJetInFileError(
                    f"branch '{b}' has {int(n[i])} particles but '{first}' has {int(counts[i])}",
                    path=self.path, entry=start + i, jet=start + i, field=b,
                )
            comps[c] = ak.to_numpy(ak.flatten(arr, axis=1)).astype(np.float64, copy=False)
        assert counts is not None
        return comps, counts

    def fields(self) -> dict[str, str]:
        return dict(self.branches)


# ---------------------------------------------------------------------- HDF5
class _H5Particles(_ParticleFile):
    def _open(self, path: str) -> Any:
        import h5py

        try:
            return h5py.File(path, "r")
        except OSError as exc:
            raise FileFormatError(f"{path}: cannot open as an HDF5 file ({one_line(str(exc))})") \
                from None

    def _setup(self) -> None:
        import h5py

        f, src = self.file, self.src
        name = src.particles
        if name is None:
            top = [k for k in f if k not in ("jets", "results")]
            if len(top) != 1:
                raise FileFormatError(f"{self.path}: give the particle dataset or group "
                                      f"(--particles); the file has {sorted(f)}")
            name = top[0]
        if name not in f:
            raise FileFormatError(f"{self.path}: no dataset or group {name!r}; the file has "
                                  f"{_h5_listing(f)}")
        self.name = name
        obj = f[name]
        self.mask = None
        if isinstance(obj, h5py.Dataset):
            self.kind = "dense"
            self.ds = obj
            if obj.dtype.names:
                if obj.ndim != 2:
                    raise FileFormatError(f"{self.path}: '{name}' must be (n_jets, n_particles) "
                                          f"records, got shape {obj.shape}")
                self.components = None
            else:
                if obj.ndim != 3 or obj.shape[2] != 4:
                    raise FileFormatError(f"{self.path}: dataset '{name}' must have shape "
                                          f"(n_jets, n_particles, 4), got {obj.shape}")
                comp = src.components or _attr_text(obj.attrs.get("components"))
                if not comp:
                    raise FileFormatError(
                        f"{self.path}: dataset '{name}' is dense (n_jets, n_particles, 4): give "
                        "the order of its last axis (--components E,px,py,pz or pt,eta,phi,mass)"
                    )
                self.components = comp
            if src.mask is not None:
                if src.mask not in f:
                    raise FileFormatError(f"{self.path}: no mask dataset {src.mask!r}; the file "
                                          f"has {_h5_listing(f)}")
                self.mask = f[src.mask]
                if self.mask.shape != obj.shape[:2]:
                    raise FileFormatError(f"{self.path}: mask '{src.mask}' has shape "
                                          f"{self.mask.shape}, the particles {obj.shape[:2]}")
            self.n_entries = int(obj.shape[0])
            return
        if "form" in obj.attrs and "length" in obj.attrs:
            self._setup_awkward(obj)
            return
        self.kind = "flat"
        keys = [k for k in obj if isinstance(obj[k], h5py.Dataset)]
        if src.mapping:
            missing = [d for d in src.mapping.values() if d not in obj]
            if missing:
                raise FileFormatError(f"{self.path}: group '{name}' has no dataset "
                                      f"{', '.join(map(repr, missing))}; it has {sorted(keys)}")
            self.columns = {canonical_name(c) or c: d for c, d in src.mapping.items()}
        else:
            try:
                self.columns = detect_coordinates(keys)
            except InvalidJetError:
                raise FileFormatError(
                    f"{self.path}: group '{name}' ({sorted(keys)}) holds no complete set of momentum "
                    "coordinates (px,py,pz,E or pt,eta,phi,mass or pt,eta,phi,E)"
                ) from None
        lower = {k.lower(): k for k in keys}
        if "offsets" in lower:
            off = np.asarray(obj[lower["offsets"]][()], dtype=np.int64)
        else:
            cname = next((lower[c] for c in _COUNT_NAMES if c in lower), None)
            if cname is None:
                raise FileFormatError(
                    f"{self.path}: group '{name}' has flat particle columns but no 'counts' "
                    f"(particles per entry) or 'offsets' dataset; it has {sorted(keys)}"
                )
            counts = np.asarray(obj[cname][()], dtype=np.int64)
            off = np.zeros(counts.shape[0] + 1, np.int64)
            np.cumsum(counts, out=off[1:])
        if off.ndim != 1 or off.size == 0 or off[0] != 0 or np.any(np.diff(off) < 0):
            raise FileFormatError(f"{self.path}: group '{name}': the counts/offsets are not "
                                  "non-negative counts")
        for d in self.columns.values():
            if obj[d].shape != (off[-1],):
                raise FileFormatError(
                    f"{self.path}: group '{name}': dataset '{d}' has shape {obj[d].shape}, the "
                    f"counts add up to {int(off[-1])} particles"
                )
        self.group = obj
        self.offsets = off
        self.n_entries = int(off.shape[0] - 1)

    def fields(self) -> dict[str, str]:
        if self.kind == "flat":
            return {c: f"{self.name}/{d}" for c, d in self.columns.items()}
        if self.kind == "awkward":
            return {c: f"{self.name}.{d}" for c, d in self.columns.items()}
        return {}

    def _setup_awkward(self, group: Any) -> None:
        """A group written with ``ak.to_buffers`` (attributes ``form`` and ``length``)."""
        import awkward as ak

        try:
            form = ak.forms.from_json(_attr_text(group.attrs["form"]) or "")
            arr = ak.from_buffers(form, int(group.attrs["length"]),
                                  {k: np.asarray(v) for k, v in group.items()})
        except Exception as exc:
            raise FileFormatError(f"{self.path}: group '{self.name}' has an awkward form but "
                                  f"cannot be read ({type(exc).__name__}: {one_line(str(exc))})") \
                from None
        if arr.ndim == 1 and ak.fields(arr):  # records: pick the field that holds the particles
            lists = [f for f in ak.fields(arr) if arr[f].ndim == 2 and ak.fields(arr[f])]
            if len(lists) != 1:
                raise FileFormatError(
                    f"{self.path}: group '{self.name}' holds records with fields "
                    f"{ak.fields(arr)}; exactly one must be a list of particle records"
                )
            self.name = f"{self.name}.{lists[0]}"
            arr = arr[lists[0]]
        if arr.ndim != 2 or not ak.fields(arr):
            raise FileFormatError(f"{self.path}: '{self.name}' is {arr.type}, not "
                                  "n_entries * var * {coordinates}")
        src = self.src
        if src.mapping:
            missing = [f for f in src.mapping.values() if f not in ak.fields(arr)]
            if missing:
                raise FileFormatError(f"{self.path}: '{self.name}' has no field {missing}; it "
                                      f"has {ak.fields(arr)}")
            self.columns = {canonical_name(c) or c: f for c, f in src.mapping.items()}
        else:
            try:
                self.columns = detect_coordinates(ak.fields(arr))
            except InvalidJetError:
                raise FileFormatError(
                    f"{self.path}: '{self.name}' ({ak.fields(arr)}) holds no complete set of "
                    "momentum coordinates (px,py,pz,E or pt,eta,phi,mass or pt,eta,phi,E)"
                ) from None
        self.kind = "awkward"
        self.array = arr
        self.n_entries = len(arr)

    def read_flat(self, start: int, stop: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
        if self.kind == "awkward":
            import awkward as ak

            part = self.array[start:stop]
            counts = ak.to_numpy(ak.num(part, axis=1)).astype(np.int64)
            flat = ak.flatten(part, axis=1)
            return ({c: ak.to_numpy(flat[f]).astype(np.float64) for c, f in self.columns.items()},
                    counts)
        a, b = int(self.offsets[start]), int(self.offsets[stop])
        comps = {c: np.asarray(self.group[d][a:b], dtype=np.float64)
                 for c, d in self.columns.items()}
        return comps, np.diff(self.offsets[start:stop + 1])

    def read_dense(self, start: int, stop: int) -> tuple[np.ndarray, Any]:
        data = self.ds[start:stop]
        mask = None if self.mask is None else np.asarray(self.mask[start:stop], dtype=bool)
        return data, mask


# ---------------------------------------------------------------------- common
def _open(src: ParticleSource) -> Any:
    fmt = file_format(check_exists(src.path))
    if fmt == "root":
        return _RootParticles(src)
    if fmt == "hdf5":
        return _H5Particles(src)
    raise FileFormatError(f"{src.path}: particles are read from ROOT or HDF5 files")


def _read_block(reader: Any, src: ParticleSource, start: int, stop: int,
                validate: bool, problems: dict[int, str] | None = None) -> JetCollection:
    """Jets of entries ``start:stop`` (event layout: the jets found in those events).

    ``problems``: filled with position in the block -> message for jets with non-finite input
    values (per-jet layouts read from flat columns), when not validating.
    """
    entry = np.arange(start, stop, dtype=np.int64)
    if src.layout == "event":
        comps, counts, fields = _event_particles(reader, src, start, stop)
        return _found_collection(_find_in_events(comps, counts, entry, src, fields), entry, src,
                                 validate)
    kw = src.collection_kw()
    if isinstance(reader, _H5Particles) and reader.kind == "dense":
        data, mask = reader.read_dense(start, stop)
        return from_dense(data, reader.components, mask=mask, padding=src.padding, entry=entry,
                          path=src.path, field=reader.name, validate=validate,
                          jet_columns={"entry": entry}, problems=problems, **kw)
    if isinstance(reader, _H5Particles):
        comps, counts = reader.read_flat(start, stop)
    else:
        comps, counts = reader.read(start, stop)
    return collection_from_flat(comps, counts, entry=entry, fields=reader.fields(),
                                path=src.path, validate=validate, jet_columns={"entry": entry},
                                problems=problems, **kw)


def _event_particles(reader: Any, src: ParticleSource, start: int, stop: int
                     ) -> tuple[dict[str, np.ndarray], np.ndarray, Mapping[str, str]]:
    """The particles of events ``start:stop``: their components, counts per event and the
    input field of each component."""
    if isinstance(reader, _H5Particles) and reader.kind == "dense":
        data, mask = reader.read_dense(start, stop)
        coll = from_dense(data, reader.components, mask=mask, padding=src.padding,
                          entry=np.arange(start, stop, dtype=np.int64), path=src.path,
                          field=reader.name, **{**src.collection_kw(), "mass_policy": "keep"},
                          validate=False)
        comps = {c: coll.leaves[:, j] for j, c in enumerate(("E", "px", "py", "pz"))}
        return comps, coll.n_leaves, {}
    if isinstance(reader, _H5Particles):
        comps, counts = reader.read_flat(start, stop)
    else:
        comps, counts = reader.read(start, stop)
    return comps, counts, reader.fields()


def _event_momenta(comps: dict[str, np.ndarray], counts: np.ndarray, entry: np.ndarray,
                   src: ParticleSource, fields: Mapping[str, str]) -> np.ndarray:
    """``(M, 4)`` particles ``(E, px, py, pz)`` of events (their ``counts`` and ``entry``); a
    non-finite input value is an error naming the entry and field (FastJet must not see it)."""
    offsets = np.zeros(counts.shape[0] + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    bad = first_nonfinite_input({c: np.ascontiguousarray(v, dtype=np.float64).ravel()
                                 for c, v in comps.items()})
    if bad is not None:
        c, q = bad
        i = int(np.searchsorted(offsets, q, side="right") - 1)
        raise InvalidJetInFileError(
            f"particle {q - int(offsets[i])} {input_value_problem(c, comps[c][q])}",
            path=src.path, entry=int(entry[i]), jet=int(entry[i]), field=fields.get(c, c),
        )
    return to_cartesian(comps)


def _find_in_events(comps: dict[str, np.ndarray], counts: np.ndarray, entry: np.ndarray,
                    src: ParticleSource, fields: Mapping[str, str]) -> FoundJets:
    """The jets FastJet finds in events (the source's jet definition)."""
    return find_jets(_event_momenta(comps, counts, entry, src, fields), counts,
                     algorithm=src.jet_algorithm, r=src.jet_r, ptmin=src.jet_ptmin)


def _found_collection(jets: FoundJets, entry: np.ndarray, src: ParticleSource,
                      validate: bool) -> JetCollection:
    """The collection of jets found in the events of ``entry``."""
    jet_entry = entry[jets.event]
    few = np.flatnonzero(jets.counts < 2) if validate else np.zeros(0, np.int64)
    if few.size:  # (FastJet finds one-particle jets: say which jet of which event)
        i = int(few[0])
        raise InvalidJetInFileError(
            f"the event's jet {int(jets.jet_in_event[i])} (by decreasing pT, from 0) has "
            f"{int(jets.counts[i])} particle(s), a jet needs at least 2 ({few.size} such jets "
            "in these events; a higher jet_ptmin drops most, validate=False keeps them as "
            "failed rows)", path=src.path, entry=int(jet_entry[i]), jet=int(jet_entry[i]),
            field="particles")
    cart = {"E": jets.p4[:, 0], "px": jets.p4[:, 1], "py": jets.p4[:, 2], "pz": jets.p4[:, 3]}
    return collection_from_flat(
        cart, jets.counts, entry=jet_entry, path=src.path, validate=validate,
        jet_columns={"entry": jet_entry, "jet_in_event": jets.jet_in_event},
        **src.collection_kw(),
    )


def _source(path: Any, kw: dict[str, Any]) -> ParticleSource:
    if isinstance(path, ParticleSource):
        if kw:
            return dataclasses.replace(path, **kw)
        return path
    return ParticleSource(path=str(path), **kw)


def _range(n: int, entry_start: int | None, entry_stop: int | None) -> tuple[int, int]:
    start = 0 if entry_start is None else int(entry_start)
    stop = n if entry_stop is None else int(entry_stop)
    if start < 0:
        start += n
    if stop < 0:
        stop += n
    start = max(0, min(start, n))
    return start, max(start, min(stop, n))  # (a stop before the start: no entry, as a slice)


def particle_entries(path: str | os.PathLike[str] | ParticleSource, **kw: Any) -> int:
    """Number of entries (jets, or events in the event layout) of a particle file.

    Args:
        path: the file (or a :class:`ParticleSource`).
        **kw: :class:`ParticleSource` settings (``tree``, ``particles``, ...).
    """
    src = _source(path, kw)
    reader = _open(src)
    try:
        return reader.n_entries
    finally:
        reader.close()


def read_particles(
    path: str | os.PathLike[str] | ParticleSource,
    *,
    entry_start: int | None = None,
    entry_stop: int | None = None,
    validate: bool = True,
    **kw: Any,
) -> JetCollection:
    """Read jets from a ROOT or HDF5 file of particles (any common layout; module docstring).

    Args:
        path: the file, or a :class:`ParticleSource` with all settings.
        entry_start, entry_stop: read only these entries (Python slice semantics, negative
            values count from the end).
        validate: raise on the first invalid jet (one line: file, entry, field, problem);
            ``False`` keeps invalid jets (clustering them records ``"failed"``).
        **kw: :class:`ParticleSource` settings: ``tree``, ``particles``, ``mapping``,
            ``components``, ``mask``, ``padding``, ``layout``, ``jet_r``, ``jet_ptmin``,
            ``jet_algorithm``, ``t_cut``, ``lam``, ``lam_root``, ``mass_policy``, ``jet_type``.

    Returns:
        A :class:`~jetastar.JetCollection` without truth trees; ``jet_id`` (int64) and
        ``jet_columns["entry"]`` (float64, as every extra column) are the input entry numbers;
        ``jet_columns["n_mass_adjusted"]`` counts the particles the mass policy changed.
    """
    src = _source(path, kw)
    reader = _open(src)
    try:
        start, stop = _range(reader.n_entries, entry_start, entry_stop)
        if stop - start <= _BLOCK:
            return _read_block(reader, src, start, stop, validate)
        # block by block: the arrays of one block stay in the CPU caches (2x faster than all at once)
        return JetCollection.concatenate(
            _read_block(reader, src, a, min(stop, a + _BLOCK), validate)
            for a in range(start, stop, _BLOCK)
        )
    finally:
        reader.close()


def iterate_particles(
    path: str | os.PathLike[str] | ParticleSource,
    step_size: int = 10000,
    *,
    entry_start: int | None = None,
    entry_stop: int | None = None,
    validate: bool = True,
    progress: bool = False,
    **kw: Any,
) -> Iterator[JetCollection]:
    """Yield the jets of a particle file in collections of at most ``step_size`` entries.

    Like ``uproot.iterate``: only one step is in memory at a time, so files larger than memory
    can be processed. Arguments as :func:`read_particles`; ``progress=True`` shows a tqdm bar
    over the entries (``TQDM_DISABLE=1`` hides it).
    """
    from tqdm.auto import tqdm

    if step_size < 1:
        raise ValueError("step_size must be >= 1")
    src = _source(path, kw)
    reader = _open(src)
    try:
        start, stop = _range(reader.n_entries, entry_start, entry_stop)
        with tqdm(total=stop - start, unit="entry", desc=Path(src.path).name,
                  disable=_no_bar(progress)) as bar:
            for a in range(start, stop, step_size):
                b = min(stop, a + step_size)
                yield _read_block(reader, src, a, b, validate)
                bar.update(b - a)
    finally:
        reader.close()


class ParticleReader:
    """Chunks of jets from a particle file, for :func:`jetastar.batch.run_batch`.

    Jets are numbered ``0..n_jets-1`` in file order (entries ``entry_start..entry_stop``; event
    layout: every jet found, which needs one pass over the file to count them). Reads go by
    blocks of ``step_size`` entries and the last block is kept, so chunks of a few jets do not
    re-read the file.
    """

    def __init__(self, source: ParticleSource, *, entry_start: int | None = None,
                 entry_stop: int | None = None, step_size: int = 10000,
                 progress: bool = False) -> None:
        self.source = source
        self.path = Path(source.path)
        self.fmt = "particles"
        self.step_size = max(1, int(step_size))
        self._reader = _open(source)
        self.start, self.stop = _range(self._reader.n_entries, entry_start, entry_stop)
        # first jet, stop, jets, problems of the block read last
        self._block: tuple[int, int, JetCollection, dict[int, str]] | None = None
        self._problems: dict[tuple[int, int], dict[int, str]] = {}
        # event layout: what FastJet found in the counting pass, so that later reads of the
        # same events only gather the constituents (per jet, its constituents' first position
        # in ``_constituents``; each constituent's position among its event's particles)
        self._constituent_offsets: np.ndarray | None = None
        self._constituents: np.ndarray | None = None
        if source.layout == "jet":
            self.jet_offsets = None
            self.n_jets = self.stop - self.start
        else:
            self.jet_offsets = self._count_jets(progress)
            self.n_jets = int(self.jet_offsets[-1])

    def settings(self) -> dict[str, Any]:
        """The reading settings (must match for an interrupted run to resume)."""
        return {**self.source.settings(), "entry_start": self.start, "entry_stop": self.stop}

    def _count_jets(self, progress: bool) -> np.ndarray:
        """Find the jets of every event once: the first jet of each event (offsets), and each
        jet's constituents, kept as positions in their events (about 40 bytes a jet)."""
        from tqdm.auto import tqdm

        per_event = np.zeros(self.stop - self.start, np.int64)
        sizes: list[np.ndarray] = []
        positions: list[np.ndarray] = []
        with tqdm(total=self.stop - self.start, unit="event", disable=_no_bar(progress),
                  desc=f"{self.path.name}: finding jets") as bar:
            for a in range(self.start, self.stop, self.step_size):
                b = min(self.stop, a + self.step_size)
                comps, counts, fields = _event_particles(self._reader, self.source, a, b)
                found = _find_in_events(comps, counts, np.arange(a, b, dtype=np.int64),
                                        self.source, fields)
                per_event[a - self.start:b - self.start] = np.bincount(found.event,
                                                                       minlength=b - a)
                first = np.zeros(counts.shape[0] + 1, np.int64)
                np.cumsum(counts, out=first[1:])
                sizes.append(found.counts)
                positions.append((found.index - np.repeat(first[found.event], found.counts))
                                 .astype(np.int32))
                bar.update(b - a)
        self._constituents = np.concatenate(positions) if positions else np.zeros(0, np.int32)
        self._constituent_offsets = np.zeros(int(per_event.sum()) + 1, np.int64)
        if sizes:
            np.cumsum(np.concatenate(sizes), out=self._constituent_offsets[1:])
        out = np.zeros(per_event.shape[0] + 1, np.int64)
        np.cumsum(per_event, out=out[1:])
        return out

    def _found_again(self, e0: int, e1: int) -> JetCollection:
        """Jets of entries ``e0:e1`` (event layout), from the constituents the counting pass
        kept: the particles are read again, FastJet is not run again."""
        assert self.jet_offsets is not None
        assert self._constituents is not None and self._constituent_offsets is not None
        entry = np.arange(e0, e1, dtype=np.int64)
        comps, counts, fields = _event_particles(self._reader, self.source, e0, e1)
        p4 = _event_momenta(comps, counts, entry, self.source, fields)
        jet_first = self.jet_offsets[e0 - self.start:e1 - self.start + 1]
        j0, j1 = int(jet_first[0]), int(jet_first[-1])
        per_jet = np.diff(self._constituent_offsets[j0:j1 + 1])
        event = np.repeat(np.arange(e1 - e0), np.diff(jet_first))
        first = np.zeros(counts.shape[0] + 1, np.int64)
        np.cumsum(counts, out=first[1:])
        c0, c1 = int(self._constituent_offsets[j0]), int(self._constituent_offsets[j1])
        local = self._constituents[c0:c1]
        if np.any(local >= np.repeat(counts[event], per_jet)):
            raise FileFormatError(f"{self.path}: entries {e0} to {e1 - 1} have fewer particles "
                                  "than when their jets were found: the file changed while it "
                                  "was read; run again")
        index = local.astype(np.int64) + np.repeat(first[event], per_jet)
        rank = np.arange(j1 - j0) - (jet_first[event] - j0)
        jets = FoundJets(np.ascontiguousarray(p4[index]), per_jet, event, rank, index)
        return _found_collection(jets, entry, self.source, False)

    def _entries_of(self, a: int, b: int) -> tuple[int, int]:
        """Entry range holding jets ``a:b``."""
        if self.jet_offsets is None:
            return self.start + a, self.start + b
        e0 = int(np.searchsorted(self.jet_offsets, a, side="right") - 1)
        e1 = int(np.searchsorted(self.jet_offsets, b, side="left"))
        return self.start + e0, self.start + e1

    def _first_jet(self, entry: int) -> int:
        if self.jet_offsets is None:
            return entry - self.start
        return int(self.jet_offsets[entry - self.start])

    def chunk(self, a: int, b: int, *, node_data: bool = True) -> JetCollection:
        """Jets ``a:b`` (positions in the file's jets), not validated (``node_data`` is for the
        batch runner's sources: jets found in particles have no truth trees)."""
        blk = self._block
        if blk is None or not (blk[0] <= a and b <= blk[1]):
            e0, _ = self._entries_of(a, a + 1) if b > a else self._entries_of(a, a)
            e1 = min(self.stop, max(e0 + self.step_size, self._entries_of(a, b)[1]))
            found: dict[int, str] = {}
            if self._constituents is not None:
                jets = self._found_again(e0, e1)
            else:
                jets = _read_block(self._reader, self.source, e0, e1, False, found)
            first = self._first_jet(e0)
            self._block = blk = (first, first + len(jets), jets, found)
        first, _, jets, found = blk
        mine = {first + i: m for i, m in found.items() if a <= first + i < b}
        if mine:
            self._problems[(a, b)] = mine
        return jets.take(np.arange(a - first, b - first))

    def problems(self, a: int, b: int) -> dict[int, str]:
        """Messages for the invalid jets of chunk ``a:b`` (read by :meth:`chunk`), naming the
        input field: jet position -> one line."""
        return self._problems.pop((a, b), {})

    def whole(self) -> JetCollection:
        """Every jet (read block by block)."""
        parts = [self.chunk(a, min(self.n_jets, a + self.step_size))
                 for a in range(0, self.n_jets, self.step_size)]
        return JetCollection.concatenate(parts) if parts else \
            _read_block(self._reader, self.source, self.start, self.start, False)

    def close(self) -> None:
        self._reader.close()


def _scalar_branches(tree: Any, names: list[str], rntuple: bool) -> list[str]:
    """The branches (fields) of ``names`` that hold one value per entry instead of a list."""
    if not rntuple:
        out = []
        for b in names:
            typename = str(getattr(tree[b], "typename", ""))
            if not (typename.endswith("]") or "vector" in typename or "RVec" in typename):
                out.append(b)
        return out
    if not tree.num_entries:
        return []
    try:
        rec = tree.arrays(names, entry_stop=1)
        return [b for b in names if _field_path(rec, b).ndim < 2]
    except Exception:  # unreadable here: the read reports it with the entry
        return []


def _bare_coordinates(tree: Any, is_rntuple: bool) -> dict[str, str]:
    """Coordinate -> branch of a tree whose branches are named by the coordinates themselves
    (``pt, eta, phi, mass``: one list of particles per entry, no collection prefix); empty when
    it has no complete set, or those branches hold one value per entry."""
    keys = list(tree.keys(recursive=True))
    by_name = {k.split("/")[-1]: k for k in keys}
    try:
        coords = detect_coordinates(list(by_name))
    except InvalidJetError:
        return {}
    mapping = {c: by_name[name] for c, name in coords.items()}
    if _scalar_branches(tree, list(mapping.values())[:1], is_rntuple):
        return {}
    return mapping


def _coordinate_prefixes(keys: list[str]) -> list[str]:
    """Branch prefixes (``PFCands`` of ``PFCands_pt``) whose suffixes are momentum coordinates."""
    return list(coordinate_prefixes(keys))


def _did_you_mean(name: str, keys: list[str]) -> str:
    """`` (did you mean 'PFCands'?)`` for a particle prefix close to one that exists."""
    prefixes = [p for p in _coordinate_prefixes(keys) if p != name]
    close = difflib.get_close_matches(name, prefixes, n=3, cutoff=0.6)
    if close:
        return f" (did you mean {' or '.join(map(repr, close))}?)"
    if prefixes:
        return f" (prefixes with momentum coordinates: {', '.join(prefixes)})"
    return ""


def cluster_options(description: dict[str, Any]) -> str:
    """The ``jetastar cluster`` options that read one candidate of :func:`describe_particle_file`.

    Example:
        >>> cluster_options({"kind": "root", "tree": "Events", "particles": "PFCands"})
        '--tree Events --particles PFCands'
        >>> cluster_options({"kind": "dense", "particles": "jets", "coordinates": "E,px,py,pz",
        ...                  "mask": "valid"})
        '--particles jets --components E,px,py,pz --mask valid'
    """
    if description["kind"] == "root":
        if description.get("mapping"):
            return f"--tree {description['tree']} " + " ".join(
                f"--branch {c}={b}" for c, b in description["mapping"].items())
        return f"--tree {description['tree']} --particles {description['particles']}"
    where = f"--particles {description['particles']}"
    if description["kind"] == "dense":
        coords = description.get("coordinates")
        if isinstance(coords, str) and "," in coords:
            where += f" --components {coords}"
        if description.get("mask"):
            where += f" --mask {description['mask']}"
    return where


def describe_particle_file(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """What a ROOT or HDF5 file holds that :func:`read_particles` could read.

    Returns:
        One dict per candidate: ``kind`` (``"root"``, ``"dense"``, ``"structured"``, ``"flat"``,
        ``"awkward"``), ``tree`` (ROOT), ``particles`` (prefix / dataset / group), ``entries``,
        ``coordinates`` (vector coordinate -> name, when detected), ``shape`` (HDF5 datasets) and
        ``mask`` (a boolean dataset of a dense dataset's first two dimensions, if any).

    Example:
        >>> import os, tempfile
        >>> import awkward as ak, uproot
        >>> path = os.path.join(tempfile.mkdtemp(), "e.root")
        >>> parts = ak.Array([[{"pt": 5.0, "eta": 0.0, "phi": 0.0, "mass": 0.0}]])
        >>> with uproot.recreate(path) as f:
        ...     tree = f.mktree("Events", {"PF": parts.type.content})
        ...     tree.extend({"PF": parts})
        >>> [(d["tree"], d["particles"], d["entries"]) for d in describe_particle_file(path)]
        [('Events', 'PF', 1)]
    """
    p = check_exists(path)
    fmt = file_format(p)
    out: list[dict[str, Any]] = []
    if fmt == "root":
        import uproot

        with uproot.open(p) as f:
            for key, cls in f.classnames().items():
                if cls not in ("TTree", "ROOT::RNTuple"):
                    continue
                tree = f[key]
                check_tree_extent(tree, key.split(";")[0], p)
                groups: dict[str, list[str]] = {}
                for k in tree.keys(recursive=True):
                    last = k.split("/")[-1]
                    for sep in ("_", "."):
                        if sep in last:
                            prefix, suffix = last.split(sep, 1)
                            groups.setdefault(prefix, []).append(suffix)
                is_rntuple = "RNTuple" in type(tree).__name__
                for prefix, suffixes in groups.items():
                    try:
                        coords = detect_coordinates(suffixes)
                    except InvalidJetError:
                        continue
                    names = [k for k in tree.keys(recursive=True)
                             if k.split("/")[-1].startswith(prefix)
                             and k.split("/")[-1] != prefix]
                    if names and _scalar_branches(tree, names[:1], is_rntuple):
                        continue  # one value per entry (e.g. the leading fat jet), no list
                    out.append({"kind": "root", "tree": key.split(";")[0], "particles": prefix,
                                "entries": int(tree.num_entries), "coordinates": coords})
                bare = _bare_coordinates(tree, is_rntuple)
                if bare:  # branches named pt, eta, ... themselves: read with --branch
                    out.append({"kind": "root", "tree": key.split(";")[0], "particles": None,
                                "mapping": bare, "entries": int(tree.num_entries),
                                "coordinates": {c: b.split("/")[-1] for c, b in bare.items()}})
        return out
    if fmt != "hdf5":
        return out
    import h5py

    masks: list[tuple[str, tuple[int, ...]]] = []
    with h5py.File(p, "r") as f:
        def visit(name: str, obj: Any) -> None:
            if isinstance(obj, h5py.Dataset):
                if obj.dtype == bool and obj.ndim == 2:
                    masks.append((name, obj.shape))
                elif obj.dtype.names and obj.ndim == 2:
                    try:
                        coords = detect_coordinates(obj.dtype.names)
                    except InvalidJetError:
                        return
                    out.append({"kind": "structured", "particles": name,
                                "entries": int(obj.shape[0]), "coordinates": coords,
                                "shape": list(obj.shape)})
                elif obj.ndim == 3 and obj.shape[2] == 4 and obj.dtype.kind == "f":
                    comp = _attr_text(obj.attrs.get("components"))
                    out.append({"kind": "dense", "particles": name, "entries": int(obj.shape[0]),
                                "coordinates": comp or "(give --components)",
                                "shape": list(obj.shape)})
                return
            if "form" in obj.attrs and "length" in obj.attrs:
                out.append({"kind": "awkward", "particles": name,
                            "entries": int(obj.attrs["length"])})
                return
            keys = [k for k in obj if isinstance(obj[k], h5py.Dataset)]
            lower = {k.lower() for k in keys}
            if "offsets" in lower or lower & set(_COUNT_NAMES):
                try:
                    coords = detect_coordinates(keys)
                except InvalidJetError:
                    return
                out.append({"kind": "flat", "particles": name, "coordinates": coords})

        f.visititems(visit)
    for d in out:
        if d["kind"] == "dense":
            fits = [m for m, shape in masks if list(shape) == d["shape"][:2]]
            if fits:
                d["mask"] = fits[0]
    return out


def _no_bar(progress: bool) -> bool:
    """No progress bar when not asked for or when ``TQDM_DISABLE`` is set (to anything but 0)."""
    return not progress or os.environ.get("TQDM_DISABLE", "").strip().lower() not in (
        "", "0", "false", "no")


def _listing(keys: list[str], limit: int = 40) -> str:
    keys = list(dict.fromkeys(keys))
    if len(keys) > limit:
        return "[" + ", ".join(keys[:limit]) + f", ... {len(keys) - limit} more]"
    return "[" + ", ".join(keys) + "]"


def _h5_listing(f: Any) -> str:
    out: list[str] = []
    f.visit(out.append)
    return _listing(out)


def _attr_text(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, np.ndarray):
        return ",".join(x.decode() if isinstance(x, bytes) else str(x) for x in v.tolist())
    return str(v)


def _field_path(rec: Any, name: str) -> Any:
    out = rec
    for part in name.split("."):
        out = out[part]
    return out
