"""HDF5 files of jets and clustering results (h5py), schema version 1.

The layout is documented in ``jetastar/io/schema.md``; in short (``J`` jets, ``M`` leaves in total,
``K`` truth-tree nodes in total, ``R`` result rows of one algorithm)::

    /                      attrs: format="jetastar", schema_version=1, jetastar_version, created,
                                  command, seed, generator_params (JSON), n_jets, provenance (JSON)
    /jets/leaf_offsets     (J+1,) int64   jet i's leaves are rows leaf_offsets[i]:leaf_offsets[i+1]
    /jets/E, px, py, pz    (M,)   float64 leaf 4-vectors (GeV)
    /jets/node_offsets     (J+1,) int64   jet i's truth-tree nodes
    /jets/left, right      (K,)   int64   children (node index within the jet; -1 -1 = leaf)
    /jets/leaf_of_node     (K,)   int64   leaf index of leaf nodes, -1 for internal nodes
    /jets/node_E, ...      (K,)   float64 optional stored node 4-vectors (node_E/px/py/pz)
    /jets/jet_id, seed, n_leaves (J,) int64;  /jets/jet_type (J,) fixed-length ASCII bytes
    /jets/m_hard, lam, lam_root, t_cut, t_root, root_E, root_px, root_py, root_pz (J,) float64
    /jets/truth_llh_symmetric, truth_llh_legacy (J,) float64 (NaN = no truth tree)
    /jets/node_extra/<name> (K,) and /jets/jet_extra/<name> (J,) float64 optional extra columns
    /results/<algorithm>/  attrs: algorithm, likelihood, exact_method, n_rows
        jet_index, jet_id (R,) int64; log_likelihood, log_z, upper_bound, n_trees, time_s (R,)
        float64 (NaN = unknown / no tree); exact (R,) uint8; status (R,) S8; message, options (R,)
        variable-length UTF-8 (options = JSON); node_offsets (R+1,), left, right, leaf_of_node
        (K',) int64; counters/<name> (R,) float64

Every array is chunked (at most 16384 elements per chunk) and gzip-compressed with the shuffle
filter, so reading a slice of jets reads only the chunks it needs. Numeric chunks are compressed by
jetastar with libdeflate and stored whole (:mod:`jetastar.io._hdf5_chunks`: about twice as fast as
HDF5's own zlib, outside Python's interpreter lock); any HDF5 reader decodes them. Slices of numeric
gzip datasets are read back the same way (raw chunks, libdeflate, numpy; about 1.4 times as fast
as h5py), other layouts through h5py.

Example:
    >>> import os, tempfile
    >>> from jetastar import Jet, JetCollection, Tree
    >>> import numpy as np
    >>> jet = Jet(np.array([[10.0, 0, 0, 9.0], [10.0, 0, 0, -9.0]]), truth=Tree.from_nested((0, 1)))
    >>> path = os.path.join(tempfile.mkdtemp(), "jets.h5")
    >>> write_hdf5(path, JetCollection.from_jets([jet]))
    >>> read_hdf5(path)[0].n_leaves
    2
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numba
import numpy as np
from deflate import DeflateError

from .._atomic import atomic_path
from .._text import distinct_texts
from ..jet import JetCollection
from ..result_tables import AlgorithmResults
from ._by_entry import by_entry_columns, event_columns, has_entries
from ._checks import check_hdf5_dataset_sizes, check_hdf5_jet_columns
from ._common import (
    FileFormatError,
    check_exists,
    columns_side_by_side,
    entry_range,
    file_content,
    generator_params,
    get_extras,
    normalise_selection,
    one_line,
    rows_for,
    schema_version_error,
    selected_jets,
    set_extras,
    truth_log_likelihoods,
    writer_meta,
)
from ._hdf5_chunks import (
    CHUNK_ROWS,
    LEVEL,
    ChunkedAppends,
    ChunkReader,
    direct,
    new_dataset,
    write_whole,
)
from ._space import IN_MEMORY_MAX, check_free_space, estimate_bytes
from ._stream import StreamWriter
from .formats import ColumnReader, Format, register_format
from .schema import (
    FORMAT_NAME,
    P4_COLUMNS,
    PARAM_COLUMNS,
    ROOT_MOMENTUM_COLUMNS,
    SCHEMA_VERSION,
    TRUTH_LIKELIHOODS,
)

__all__ = [
    "HDF5Columns",
    "HDF5StreamWriter",
    "hdf5_info",
    "hdf5_results_rows",
    "hdf5_status_columns",
    "iterate_hdf5",
    "n_jets_hdf5",
    "read_hdf5",
    "read_hdf5_results",
    "write_hdf5",
]

def _h5py() -> Any:
    import h5py

    return h5py


# ---------------------------------------------------------------------- writing
def _dataset(group: Any, name: str, data: Any) -> None:
    arr = np.asarray(data)
    if arr.shape[0] == 0 or arr.dtype == object:
        group.create_dataset(name, data=arr)
        return
    if direct(arr):
        write_whole(group, name, arr)
        return
    # fixed-width bytes: the same layout, filled through h5py
    new_dataset(group, name, arr, arr.shape[0], min(arr.shape[0], CHUNK_ROWS), False)[...] = arr


def _text_dataset(group: Any, name: str, values: Any) -> None:
    h5py = _h5py()
    data = _safe_texts(values)
    if data.shape[0] == 0:
        group.create_dataset(name, shape=(0,), dtype=h5py.string_dtype("utf-8"))
        return
    group.create_dataset(
        name, data=data, dtype=h5py.string_dtype("utf-8"),
        chunks=(min(data.shape[0], 4096),), compression="gzip", compression_opts=LEVEL,
    )


def _safe_text(text: str) -> str:
    """Text that encodes as UTF-8: file names that are not UTF-8 (held by Python as lone
    surrogates) get U+FFFD for their undecodable bytes."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return text


def _safe_texts(values: Any) -> np.ndarray:
    """:func:`_safe_text` of ``str`` of each value, as an object array; each distinct value is
    converted once (a results column repeats a few: statuses, options, empty messages)."""
    items, distinct = distinct_texts(values)
    safe = {v: _safe_text(v) for v in distinct}
    out = np.empty(len(items), dtype=object)
    out[:] = list(map(safe.__getitem__, items))
    return out


def _status_bytes(statuses: Any) -> np.ndarray:
    """The ``S8`` column of statuses (UTF-8; each distinct status encoded once)."""
    items = statuses.tolist() if isinstance(statuses, np.ndarray) else list(statuses)
    encoded = {s: s.encode() for s in dict.fromkeys(items)}
    return np.array(list(map(encoded.__getitem__, items)), dtype="S8")


def _fixed_bytes(values: Any) -> np.ndarray:
    encoded = [_safe_text(str(v)).encode("utf-8") for v in values]
    width = max([1, *(len(e) for e in encoded)])
    return np.array(encoded, dtype=f"S{width}")


def _write_jets(group: Any, collection: JetCollection) -> None:
    group.attrs["n_jets"] = len(collection)
    node_extra, jet_extra = _jet_columns(
        collection, collection.leaf_offsets, collection.node_offsets,
        lambda name, values: _dataset(group, name, values),
        lambda values: _dataset(group, "jet_type", _fixed_bytes(values)),
    )
    if node_extra:  # (the groups keep the columns' order, as the ROOT branches do)
        g = group.create_group("node_extra", track_order=True)
        for k, v in node_extra.items():
            _dataset(g, k, v)
    if jet_extra:
        g = group.create_group("jet_extra", track_order=True)
        for k, v in jet_extra.items():
            _dataset(g, k, v)


def _jet_columns(collection: JetCollection, leaf_offsets: np.ndarray, node_offsets: np.ndarray,
                 put: Callable[[str, np.ndarray], None],
                 put_types: Callable[[Any], None]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Every column of the ``jets`` group, in the file's order, through ``put(name, values)``
    (``jet_type`` through ``put_types``): the one layout of :func:`write_hdf5` and of
    :class:`HDF5StreamWriter`. Returns the extra node and jet columns, left to the caller."""
    put("leaf_offsets", leaf_offsets)
    for j, name in enumerate(P4_COLUMNS):
        put(name, collection.leaves[:, j])
    put("node_offsets", node_offsets)
    put("left", collection.children[:, 0])
    put("right", collection.children[:, 1])
    put("leaf_of_node", collection.leaf_of_node)
    if collection.node_momenta is not None:
        for j, name in enumerate(P4_COLUMNS):
            put(f"node_{name}", collection.node_momenta[:, j])
    put("jet_id", collection.jet_id)
    put("seed", collection.seed)
    put("n_leaves", collection.n_leaves)
    put_types(collection.jet_type)
    for k in PARAM_COLUMNS:
        put(k, collection.params[k])
    rm = collection.params["root_momentum"].reshape(-1, 4)
    for j, name in enumerate(ROOT_MOMENTUM_COLUMNS):
        put(name, rm[:, j])
    node_extra, jet_extra = get_extras(collection)
    for lk in TRUTH_LIKELIHOODS:
        put(f"truth_llh_{lk}", truth_log_likelihoods(collection, lk))
        jet_extra.pop(f"truth_llh_{lk}", None)
    return node_extra, jet_extra


def _table_attrs(group: Any, table: AlgorithmResults) -> None:
    """A results table's attributes but ``n_rows`` (written once its rows are)."""
    group.attrs["algorithm"] = table.algorithm
    group.attrs["likelihood"] = table.likelihood
    group.attrs["exact_method"] = bool(table.exact_method)


def _write_results(group: Any, table: AlgorithmResults) -> None:
    _table_attrs(group, table)
    group.attrs["n_rows"] = len(table)
    for name in ("jet_index", "jet_id", "log_likelihood", "log_z", "upper_bound", "n_trees",
                 "time_s", "node_offsets", "leaf_of_node"):
        _dataset(group, name, getattr(table, name))
    _dataset(group, "exact", table.exact.astype(np.uint8))
    _dataset(group, "status", np.array([s.encode() for s in table.status], dtype="S8"))
    _text_dataset(group, "message", table.message)
    _text_dataset(group, "options", table.options)
    _dataset(group, "left", table.children[:, 0])
    _dataset(group, "right", table.children[:, 1])
    g = group.create_group("counters")
    for k, v in table.counters.items():
        _dataset(g, k, v)


def write_hdf5(
    path: str | os.PathLike[str],
    collection: JetCollection | None,
    results: Mapping[str, AlgorithmResults] | None = None,
    *,
    attrs: Mapping[str, Any] | None = None,
) -> None:
    """Write jets and/or results to an HDF5 file, atomically (temporary file + rename).

    Args:
        path: destination (``.h5`` / ``.hdf5``); replaced if it exists.
        collection: the jets (``None`` for a results-only file, e.g. a batch part).
        results: label -> :class:`AlgorithmResults`; rows refer to jets by ``jet_index``.
        attrs: provenance/extra root attributes (``seed``, ``command``, ...); values that are not
            str/int/float/bool are stored as JSON text. Defaults from :func:`provenance`.

    Example:
        >>> import os, tempfile
        >>> from jetastar import JetCollection
        >>> p = os.path.join(tempfile.mkdtemp(), "empty.h5")
        >>> write_hdf5(p, JetCollection.from_jets([]))
        >>> n_jets_hdf5(p)
        0
    """
    h5py = _h5py()
    meta = writer_meta(attrs)
    need = estimate_bytes(collection, dict(results or {}))
    in_memory = need <= IN_MEMORY_MAX
    if not in_memory:
        check_free_space(path, need)
    image = None
    with atomic_path(path, clean=True) as tmp:
        # a file of moderate size is built in memory and written with one write(), so a full disk
        # is a clean OSError, never a crash inside HDF5
        kw = {"driver": "core", "backing_store": False} if in_memory else {}
        with h5py.File(tmp, "w", **kw) as f:
            _schema_attrs(f)
            f.attrs["content"] = file_content(collection is not None)
            _write_attrs(f, meta)
            if collection is not None:
                f.attrs["n_jets"] = len(collection)
                f.attrs.setdefault("generator_params", json.dumps(generator_params(collection)))
                _write_jets(f.create_group("jets"), collection)
            res = f.create_group("results", track_order=True)  # tables in the order given
            for label, table in (results or {}).items():
                _write_results(res.create_group(_group_name(label)), table)
            if results and has_entries(collection):
                _write_by_entry(f.create_group("clusters"), collection, results)
                events = event_columns(collection, results, entry_range(meta))
                if events is not None:
                    g = f.create_group("clusters/events")
                    for k, v in events[0].items():
                        _dataset(g, k, v)
            if in_memory:
                f.flush()
                image = f.id.get_file_image()
        if image is not None:
            check_free_space(path, len(image))
            with open(tmp, "wb") as fh:
                fh.write(image)


def _write_by_entry(group: Any, collection: JetCollection,
                    results: Mapping[str, AlgorithmResults]) -> None:
    """``/clusters``: one row per jet read from a particle file (see ``io/_by_entry.py``)."""
    scalars, per_label = by_entry_columns(collection, results)
    group.attrs["n_rows"] = len(collection)
    for k, v in scalars.items():
        _dataset(group, k, v)
    for p, c in per_label.items():
        g = group.create_group(p)
        _dataset(g, "status", np.array([str(s).encode() for s in c["status"]], dtype="S8"))
        for k in ("log_likelihood", "time_s", "node_offsets", "left", "right", "leaf_of_node"):
            _dataset(g, k, c[k])
        _dataset(g, "exact", c["exact"].astype(np.uint8))
        _dataset(g, "finite", c["finite"].astype(np.uint8))
        _text_dataset(g, "reason", c["reason"])


def _results_group(f: Any) -> Any:
    """The file's ``results`` group, made (if new) to list its tables in the order they were
    written, as the ROOT ``results`` tree does (an older file lists them by name)."""
    if "results" in f:
        return f["results"]
    return f.create_group("results", track_order=True)


def _schema_attrs(f: Any) -> None:
    """The root attributes that make a jetastar file of this schema (the first ones written)."""
    f.attrs["format"] = FORMAT_NAME
    f.attrs["schema_version"] = SCHEMA_VERSION


def _write_attrs(f: Any, meta: Mapping[str, Any]) -> None:
    """The root attributes ``meta``: text (as UTF-8), numbers and booleans as they are, anything
    else as JSON text."""
    for k, v in meta.items():
        plain = isinstance(v, (str, int, float, bool, np.number))
        f.attrs[k] = _safe_text(v) if isinstance(v, str) else (v if plain else json.dumps(v))


def _group_name(label: str) -> str:
    name = str(label).replace("/", "_")
    if not name or name in (".", ".."):
        raise ValueError(f"invalid result label {label!r}")
    return name


class HDF5StreamWriter(StreamWriter):
    """An HDF5 file of jets and results written block by block (memory bounded by one block),
    atomically: the file appears under its name only when :meth:`close` succeeds.

    The layout is that of :func:`write_hdf5` (the same datasets, attributes and types); every
    dataset is resizable. Jets come in file order (:meth:`add_jets`), the rows of each results
    table in order (:meth:`add_results`; tables may be interleaved), and for jets of a particle
    file the rows by input entry in jet order (:meth:`add_by_entry`). What the ROOT writer does
    alike is in :class:`~jetastar.io._stream.StreamWriter`.

    Args:
        path: destination (``.h5``); replaced when the writer closes.
        attrs: provenance/extra root attributes (as :func:`write_hdf5`).
        need: an upper estimate of the file's size, checked against the free space.

    Example:
        >>> import os, tempfile
        >>> from jetastar.ginkgo import ShowerParams, generate
        >>> jets = generate(4, ShowerParams.qcd(), seed=1)
        >>> path = os.path.join(tempfile.mkdtemp(), "jets.h5")
        >>> with HDF5StreamWriter(path) as w:
        ...     w.add_jets(jets.take(np.arange(2))); w.add_jets(jets.take(np.arange(2, 4)))
        >>> n_jets_hdf5(path)
        4
    """

    def __init__(self, path: str | os.PathLike[str], attrs: Mapping[str, Any] | None = None,
                 need: int = 0) -> None:
        super().__init__(path, attrs, need)
        self._leaf_base = 0
        self._node_base = 0
        self._type_width = 1
        self._tables: dict[str, dict[str, Any]] = {}
        self._appends = ChunkedAppends()
        self._by_entry_nodes: dict[str, int] = {}

    def _open(self, tmp: str) -> Any:
        f = _h5py().File(tmp, "w")
        _schema_attrs(f)
        return f

    # -- jets
    def _write_jets(self, collection: JetCollection) -> None:
        if self._jets is None:
            self._jets = self.f.create_group("jets")
        g = self._jets
        first = self._n_jets == 0
        loff = np.asarray(collection.leaf_offsets, np.int64) + self._leaf_base
        noff = np.asarray(collection.node_offsets, np.int64) + self._node_base
        node_extra, jet_extra = _jet_columns(
            collection, loff if first else loff[1:], noff if first else noff[1:],
            lambda name, values: self._append(g, name, values), self._append_types,
        )
        for sub, extra in (("node_extra", node_extra), ("jet_extra", jet_extra)):
            if extra:
                h = g[sub] if sub in g else g.create_group(sub, track_order=True)
                for k, v in extra.items():
                    self._append(h, k, v)
        self._leaf_base = int(loff[-1])
        self._node_base = int(noff[-1])

    def _jets_only_meta(self, path: str | os.PathLike[str]) -> dict[str, Any] | None:
        return _jets_only_attrs(path)

    def _open_copy(self, meta: Mapping[str, Any]) -> None:
        h5py = _h5py()
        # without a lock: the file is this writer's own, and a worker process being started
        # (between its fork and exec) can still hold the lock of the handle just closed
        try:
            self.f = f = h5py.File(self._tmp, "r+", locking=False)
        except ValueError:  # an HDF5 library without the option (before 1.10.7 / 1.12.1)
            self.f = f = h5py.File(self._tmp, "r+")
        for k in list(f.attrs):  # the input's provenance: this file gets its own at close
            del f.attrs[k]
        _schema_attrs(f)
        if "results" in f:  # empty; made again, listing tables in the order they are written
            del f["results"]
        self._jets = f["jets"]
        self._copied_params = _attr(meta["generator_params"])

    def _append_types(self, values: Any) -> None:
        """``jet_type`` is fixed-width bytes as wide as the longest type: a wider one than seen
        so far rewrites the (small) column with the new width."""
        data = _fixed_bytes(values)
        g = self._jets
        width = max(self._type_width, data.dtype.itemsize)
        if "jet_type" in g and width > self._type_width:
            old = g["jet_type"][:].astype(f"S{width}")
            del g["jet_type"]
            self._append(g, "jet_type", old)
        self._type_width = width
        self._append(g, "jet_type", data.astype(f"S{width}"))

    # -- results
    def add_results(self, label: str, table: AlgorithmResults) -> None:
        """Append rows of the results table ``label`` (its attributes come from its first rows)."""
        if self._results is None:
            self._results = _results_group(self.f)
        name = _group_name(label)
        state = self._tables.get(name)
        if state is None:
            g = self._results.create_group(name)
            _table_attrs(g, table)
            g.create_group("counters")
            state = self._tables[name] = {"group": g, "rows": 0, "nodes": 0}
        g = state["group"]
        rows = state["rows"]
        for k in ("jet_index", "jet_id", "log_likelihood", "log_z", "upper_bound", "n_trees",
                  "time_s", "leaf_of_node"):
            self._append(g, k, getattr(table, k))
        off = np.asarray(table.node_offsets, np.int64) + state["nodes"]
        self._append(g, "node_offsets", off if rows == 0 else off[1:])
        self._append(g, "exact", table.exact.astype(np.uint8))
        self._append(g, "status", _status_bytes(table.status))
        _append_text(g, "message", table.message)
        _append_text(g, "options", table.options)
        self._append(g, "left", table.children[:, 0])
        self._append(g, "right", table.children[:, 1])
        counters = g["counters"]
        for k in sorted(set(table.counters) | set(counters)):
            if k not in counters and rows:
                self._append(counters, k, np.full(rows, np.nan))
            self._append(counters, k, table.counters.get(k, np.full(len(table), np.nan)))
        state["rows"] = rows + len(table)
        state["nodes"] = int(off[-1])

    # -- results by input entry (jets of a particle file)
    def _write_by_entry(self, scalars: Mapping[str, np.ndarray],
                        per_label: Mapping[str, Mapping[str, Any]]) -> None:
        g = self.f.require_group("clusters")
        for k, v in scalars.items():
            self._append(g, k, v)
        for p, c in per_label.items():
            h = g.require_group(p)
            self._append(h, "status", np.array([str(s).encode() for s in c["status"]], dtype="S8"))
            for k in ("log_likelihood", "time_s", "left", "right", "leaf_of_node"):
                self._append(h, k, c[k])
            first = p not in self._by_entry_nodes
            off = np.asarray(c["node_offsets"], np.int64) + self._by_entry_nodes.get(p, 0)
            self._append(h, "node_offsets", off if first else off[1:])
            self._by_entry_nodes[p] = int(off[-1])
            self._append(h, "exact", np.asarray(c["exact"]).astype(np.uint8))
            self._append(h, "finite", np.asarray(c["finite"]).astype(np.uint8))
            _append_text(h, "reason", c["reason"])

    def _write_events(self, events: tuple[Any, ...]) -> None:
        g = self.f.require_group("clusters/events")
        for k, v in events[0].items():
            self._append(g, k, v)

    def _append(self, group: Any, name: str, data: Any) -> None:
        """Append rows to ``group[name]``: numbers a whole compressed chunk at a time
        (:class:`~._hdf5_chunks.ChunkedAppends`), text through h5py."""
        arr = np.asarray(data)
        if direct(arr):
            self._appends.append(group, name, arr)
        else:
            _append_through_h5py(group, name, arr)

    # -- end
    def _write_meta(self) -> None:
        f = self.f
        self._appends.finish()
        jets = self._has_jets
        f.attrs["content"] = file_content(jets)
        meta = dict(self._meta)
        if jets:
            meta.setdefault("generator_params", self._copied_params if self._copied
                            else json.dumps(self._params.result()))
        _write_attrs(f, meta)
        if jets:
            f.attrs["n_jets"] = self._n_jets
            self._jets.attrs["n_jets"] = self._n_jets
        _results_group(f)
        for state in self._tables.values():
            state["group"].attrs["n_rows"] = state["rows"]
        if "clusters" in f:
            f["clusters"].attrs["n_rows"] = self._by_entry_rows


def _append_through_h5py(group: Any, name: str, data: Any) -> None:
    """Append rows to a resizable dataset (created on first use, :func:`new_dataset`) through
    h5py (fixed-width bytes, and empty blocks that create a dataset)."""
    arr = np.asarray(data)
    ds = group.get(name)
    if ds is None:
        ds = new_dataset(group, name, arr, 0, CHUNK_ROWS, True)
    if arr.shape[0]:
        n = ds.shape[0]
        ds.resize(n + arr.shape[0], axis=0)
        ds[n:] = arr


def _append_text(group: Any, name: str, values: Any) -> None:
    h5py = _h5py()
    ds = group.get(name)
    if ds is None:
        ds = group.create_dataset(name, shape=(0,), maxshape=(None,), chunks=(4096,),
                                  dtype=h5py.string_dtype("utf-8"), compression="gzip",
                                  compression_opts=LEVEL)
    data = _safe_texts(values)
    if data.shape[0]:
        n = ds.shape[0]
        ds.resize(n + data.shape[0], axis=0)
        ds[n:] = data


# ---------------------------------------------------------------------- reading
def _jets_only_attrs(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The root attributes of a jetastar HDF5 file of this schema that holds its jets and nothing
    else (an empty ``results`` group at most; ``None`` for any other file)."""
    try:
        with _File(path) as f:
            attrs = dict(f.f.attrs)
            only = set(f.f.keys()) <= {"jets", "results"} and len(f.f.get("results", ())) == 0
            entries = f.n_jets
    except (FileFormatError, OSError):
        return None
    if not only or "n_jets" not in attrs or "generator_params" not in attrs:
        return None
    return attrs if int(attrs["n_jets"]) == entries else None


class _File:
    """An open, checked jetastar HDF5 file (context manager)."""

    def __init__(self, path: str | os.PathLike[str], need_jets: bool = True) -> None:
        self.path = str(path)
        h5py = _h5py()
        p = check_exists(path)
        try:
            self.f = h5py.File(p, "r")
            self._chunks = ChunkReader(numba.get_num_threads())
        except OSError as exc:
            text = str(exc)
            if "errno = 13" in text or "Permission denied" in text:
                raise PermissionError(f"{p}: permission denied (cannot read the file)") from None
            if "signature" in text:
                raise FileFormatError(f"{p}: not an HDF5 file") from None
            if "truncated" in text:
                raise FileFormatError(f"{p}: truncated HDF5 file ({one_line(text)})") from None
            raise FileFormatError(f"{p}: corrupt HDF5 file ({one_line(text)})") from None
        try:
            self._check(need_jets)
        except BaseException:
            self.f.close()
            raise

    def _check(self, need_jets: bool) -> None:
        f = self.f
        try:
            fmt = f.attrs.get("format")
            version = f.attrs.get("schema_version")
        except (OSError, RuntimeError) as exc:
            raise FileFormatError(f"{self.path}: corrupt HDF5 file ({one_line(str(exc))})") from None
        fmt, version = _attr(fmt), _attr(version)
        if fmt != FORMAT_NAME:
            raise FileFormatError(
                f"{self.path}: not a jetastar HDF5 file (root attribute 'format' is {fmt!r}); "
                "for particles in your own layout use jetastar.io.read_particles or "
                "`jetastar cluster FILE --particles DATASET`"
            )
        if version is None or int(version) != SCHEMA_VERSION:
            raise schema_version_error(self.path, version)
        if need_jets and "jets" not in f:
            raise FileFormatError(f"{self.path}: holds no jets (a results-only file)")
        self.n_jets = 0
        if "jets" in f:
            try:
                self.n_jets = check_hdf5_jet_columns(self.path, f["jets"])
            except (OSError, RuntimeError, KeyError) as exc:
                raise FileFormatError(
                    f"{self.path}: corrupt HDF5 file ({one_line(str(exc))})"
                ) from None
        if "results" in f:
            check_hdf5_dataset_sizes(self.path, f["results"])

    def read(self, name: str, sel: Any = slice(None)) -> np.ndarray:
        try:
            ds = self.f[name]
        except KeyError:
            raise FileFormatError(f"{self.path}: dataset '{name}' is missing") from None
        try:
            if isinstance(sel, slice) and sel.step in (None, 1) and ds.ndim >= 1:
                start, stop, _ = sel.indices(ds.shape[0])
                rows = self._chunks.rows(ds, start, max(start, stop))
                if rows is not None:
                    return rows
            return ds[sel]
        except (OSError, RuntimeError, ValueError, DeflateError) as exc:
            raise FileFormatError(
                f"{self.path}: dataset '{name}' cannot be read, the file is corrupt or truncated "
                f"({one_line(str(exc))})"
            ) from None

    def __enter__(self) -> _File:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Close the file and stop the chunk reader's threads."""
        try:
            self.f.close()
        finally:
            self._chunks.close()


def n_jets_hdf5(path: str | os.PathLike[str]) -> int:
    """Number of jets in a jetastar HDF5 file (reads only metadata)."""
    with _File(path) as f:
        return f.n_jets


def read_hdf5(
    path: str | os.PathLike[str], jets: Any = None, *, validate: bool = True
) -> JetCollection:
    """Read jets from a jetastar HDF5 file.

    Only the chunks holding the selected jets are read.

    Args:
        path: the file.
        jets: ``None`` (all), a slice, an index or an array of indices (positions in the file).
        validate: check every selected jet (finite positive energies, leaf counts, tree sizes, ...)
            and raise on the first bad one. Batch processing reads with ``validate=False`` and
            records bad jets as failed instead.

    Returns:
        A :class:`~jetastar.JetCollection` (with extra columns, if the file has any, as
        ``collection.node_columns`` / ``collection.jet_columns``).

    Raises:
        FileNotFoundError, FileFormatError, InvalidJetInFileError: one-line messages naming the file.
    """
    with _File(path) as f:
        n = f.n_jets
        start, stop, take = normalise_selection(jets, n)
        collection = _read_range(f, start, stop)
    return selected_jets(collection, path, start, take, validate)


def _read_range(f: _File, start: int, stop: int, node_data: bool = True) -> JetCollection:
    g = "jets/"
    loff = f.read(g + "leaf_offsets", slice(start, stop + 1)).astype(np.int64)
    noff = f.read(g + "node_offsets", slice(start, stop + 1)).astype(np.int64)
    if loff.shape[0] != stop - start + 1 or noff.shape[0] != stop - start + 1:
        raise FileFormatError(f"{f.path}: offsets are shorter than the number of jets")
    la, lb = int(loff[0]), int(loff[-1])
    na, nb = int(noff[0]), int(noff[-1])
    if np.any(np.diff(loff) < 0) or np.any(np.diff(noff) < 0):
        raise FileFormatError(f"{f.path}: offsets decrease (corrupt file)")
    if la < 0 or nb < 0 or lb > f.f[g + "E"].shape[0] or nb > f.f[g + "left"].shape[0]:
        raise FileFormatError(f"{f.path}: offsets point outside the leaf / node columns")
    stated = f.read(g + "n_leaves", slice(start, stop)).astype(np.int64)
    wrong = np.flatnonzero(stated != np.diff(loff))
    if wrong.size:
        i = int(wrong[0])
        raise FileFormatError(
            f"{f.path}: inconsistent columns: entry {start + i}: 'jets/n_leaves' is "
            f"{int(stated[i])} but 'jets/leaf_offsets' gives {int(loff[i + 1] - loff[i])} leaves"
        )
    leaves = _side_by_side(f, [g + c for c in P4_COLUMNS], slice(la, lb), np.float64)
    children = _side_by_side(f, [g + "left", g + "right"], slice(na, nb), np.int64)
    node_momenta = None
    if node_data and "node_E" in f.f["jets"]:
        node_momenta = _side_by_side(f, [g + f"node_{c}" for c in P4_COLUMNS], slice(na, nb),
                                     np.float64)
    sl = slice(start, stop)
    jet_type = _decoded(f.read(g + "jet_type", sl))
    params = {k: np.asarray(f.read(g + k, sl), dtype=np.float64) for k in PARAM_COLUMNS}
    params["root_momentum"] = _side_by_side(f, [g + c for c in ROOT_MOMENTUM_COLUMNS], sl,
                                            np.float64)
    try:
        collection = JetCollection(
            leaves=leaves,
            leaf_offsets=loff - la,
            children=children,
            leaf_of_node=f.read(g + "leaf_of_node", slice(na, nb)).astype(np.int64),
            node_offsets=noff - na,
            node_momenta=node_momenta,
            jet_id=f.read(g + "jet_id", sl).astype(np.int64),
            seed=f.read(g + "seed", sl).astype(np.int64),
            jet_type=jet_type,
            params=params,
        )
    except ValueError as exc:
        raise FileFormatError(f"{f.path}: inconsistent jet columns ({exc})") from None
    node_extra: dict[str, np.ndarray] = {}
    jet_extra: dict[str, np.ndarray] = {}
    if node_data and "node_extra" in f.f["jets"]:
        for k in f.f["jets/node_extra"]:
            node_extra[k] = f.read(f"{g}node_extra/{k}", slice(na, nb))
    if "jet_extra" in f.f["jets"]:
        for k in f.f["jets/jet_extra"]:
            jet_extra[k] = f.read(f"{g}jet_extra/{k}", sl)
    for lk in TRUTH_LIKELIHOODS:
        if f"truth_llh_{lk}" in f.f["jets"]:
            jet_extra[f"truth_llh_{lk}"] = f.read(f"{g}truth_llh_{lk}", sl)
    return set_extras(collection, node_extra, jet_extra)


class HDF5Columns(ColumnReader):
    """:class:`~jetastar.io.formats.ColumnReader` of a jetastar HDF5 file: reads only the
    datasets of the columns asked for (the file stays open until :meth:`close`).

    Example:
        >>> import os, tempfile
        >>> from jetastar.ginkgo import ShowerParams, generate
        >>> path = os.path.join(tempfile.mkdtemp(), "jets.h5")
        >>> write_hdf5(path, generate(3, ShowerParams.qcd(), seed=1))
        >>> with HDF5Columns(path) as cols:
        ...     cols.read(["jet_id", "leaf_offsets"], 1, 3)["jet_id"].tolist()
        [1, 2]
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__(_FORMAT, path)
        self._f = _File(path)
        self.n_jets = self._f.n_jets

    def read(self, names: list[str], start: int, stop: int) -> dict[str, Any]:
        """The columns ``names`` of jets ``start:stop``."""
        f, g = self._f, "jets/"
        out: dict[str, Any] = {}
        sl = slice(start, stop)
        offsets: dict[str, np.ndarray] = {}

        def off(which: str) -> np.ndarray:
            if which not in offsets:
                offsets[which] = f.read(g + which, slice(start, stop + 1)).astype(np.int64)
            return offsets[which]

        for name in names:
            if name in ("leaf_offsets", "node_offsets"):
                o = off(name)
                out[name] = o - o[0]
            elif name == "leaves":
                o = off("leaf_offsets")
                rows = slice(int(o[0]), int(o[-1]))
                out[name] = _side_by_side(f, [g + c for c in P4_COLUMNS], rows, np.float64)
            elif name in ("children", "leaf_of_node"):
                o = off("node_offsets")
                rows = slice(int(o[0]), int(o[-1]))
                if name == "children":
                    out[name] = _side_by_side(f, [g + "left", g + "right"], rows, np.int64)
                else:
                    out[name] = f.read(g + name, rows).astype(np.int64)
            elif name == "jet_type":
                out[name] = _decoded(f.read(g + name, sl))
            elif name == "params.root_momentum":
                out[name] = _side_by_side(f, [g + c for c in ROOT_MOMENTUM_COLUMNS], sl,
                                          np.float64)
            elif name.startswith("params."):
                out[name] = f.read(g + name[len("params."):], sl).astype(np.float64)
            elif name in ("jet_id", "seed"):
                out[name] = f.read(g + name, sl).astype(np.int64)
            elif name in ("truth_llh_symmetric", "truth_llh_legacy"):
                out[name] = f.read(g + name, sl).astype(np.float64)
            else:
                raise KeyError(name)
        return out

    def collection(self, start: int, stop: int, *, node_data: bool = True) -> JetCollection:
        """Every column of jets ``start:stop`` (not validated), from the open file
        (``node_data``: see :meth:`ColumnReader.collection`)."""
        start, stop, _ = normalise_selection(slice(start, stop), self.n_jets)
        return _read_range(self._f, start, stop, node_data)

    def close(self) -> None:
        """Close the file."""
        self._f.close()


def iterate_hdf5(
    path: str | os.PathLike[str], step_size: int = 10000, *, validate: bool = True
) -> Iterator[JetCollection]:
    """Yield the jets of a file in consecutive collections of at most ``step_size`` jets."""
    n = n_jets_hdf5(path)
    for start in range(0, n, step_size):
        yield read_hdf5(path, slice(start, min(n, start + step_size)), validate=validate)


def read_hdf5_results(
    path: str | os.PathLike[str], algorithms: Any = None, jets: Any = None
) -> dict[str, AlgorithmResults]:
    """Read clustering results: label -> :class:`AlgorithmResults`.

    Args:
        path: a jetastar HDF5 file (with or without jets).
        algorithms: labels to read (default all).
        jets: only rows whose ``jet_index`` is in this slice / array of positions.
    """
    out: dict[str, AlgorithmResults] = {}
    with _File(path, need_jets=False) as f:
        if "results" not in f.f:
            return out
        labels = list(f.f["results"]) if algorithms is None else list(algorithms)
        for label in labels:
            name = _group_name(label)
            if name not in f.f["results"]:
                raise FileFormatError(
                    f"{path}: no results for {label!r}; the file has {sorted(f.f['results'])}"
                )
            out[label] = _read_table(f, f"results/{name}")
    if jets is not None:
        for label, table in out.items():
            out[label] = table.take(rows_for(table.jet_index, jets))
    return out


def hdf5_results_rows(path: str | os.PathLike[str], label: str, start: int,
                      stop: int) -> AlgorithmResults:
    """Rows ``start:stop`` of the results table ``label``, with their trees (see
    :func:`jetastar.io.dispatch.read_results_rows`)."""
    with _File(path, need_jets=False) as f:
        g = f"results/{_group_name(label)}"
        if g not in f.f:
            raise FileFormatError(f"{path}: no results for {label!r}")
        return _read_table(f, g, slice(start, stop))


def hdf5_status_columns(path: str | os.PathLike[str],
                        step_size: int) -> Iterator[tuple[str, dict[str, Any]]]:
    """The status columns of each results table, ``step_size`` rows at a time (see
    :func:`jetastar.io.dispatch.iterate_status_columns`); a table without rows gives one empty
    block."""
    with _File(path, need_jets=False) as f:
        if "results" not in f.f:
            return
        for label in list(f.f["results"]):
            g = f"results/{label}"
            counters = list(f.f[f"{g}/counters"]) if "counters" in f.f[g] else []
            n = f.f[f"{g}/log_likelihood"].shape[0]
            for a in range(0, max(n, 1), step_size):
                rows = slice(a, min(n, a + step_size))
                status = f.read(f"{g}/status", rows)
                attrs = f.f[g].attrs
                yield label, {
                    "jet_index": f.read(f"{g}/jet_index", rows).astype(np.int64),
                    "status": _decoded(status),
                    "log_likelihood": f.read(f"{g}/log_likelihood", rows),
                    "exact": f.read(f"{g}/exact", rows).astype(bool),
                    "time_s": f.read(f"{g}/time_s", rows),
                    "counters": {k: f.read(f"{g}/counters/{k}", rows) for k in counters},
                    "algorithm": str(attrs.get("algorithm", label)),
                    "likelihood": str(attrs.get("likelihood", "symmetric")),
                    "exact_method": bool(attrs.get("exact_method", False)),
                }


def _read_table(f: _File, g: str, rows: slice = slice(None)) -> AlgorithmResults:
    """The results table of group ``g`` (``rows``: only those rows, with their trees)."""
    attrs = f.f[g].attrs
    start, stop, _ = rows.indices(f.f[f"{g}/jet_index"].shape[0])
    stop = max(start, stop)
    rows = slice(start, stop)
    off = f.read(f"{g}/node_offsets", slice(start, stop + 1)).astype(np.int64)
    nodes = slice(int(off[0]), int(off[-1])) if off.size else slice(0, 0)

    def text(name: str) -> np.ndarray:
        return _decoded(f.read(f"{g}/{name}", rows))

    counters = {k: f.read(f"{g}/counters/{k}", rows) for k in f.f[f"{g}/counters"]} \
        if "counters" in f.f[g] else {}
    try:
        return AlgorithmResults(
            str(attrs.get("algorithm", g.rsplit("/", 1)[-1])),
            jet_index=f.read(f"{g}/jet_index", rows),
            jet_id=f.read(f"{g}/jet_id", rows),
            log_likelihood=f.read(f"{g}/log_likelihood", rows),
            exact=f.read(f"{g}/exact", rows).astype(bool),
            log_z=f.read(f"{g}/log_z", rows),
            upper_bound=f.read(f"{g}/upper_bound", rows),
            n_trees=f.read(f"{g}/n_trees", rows),
            time_s=f.read(f"{g}/time_s", rows),
            status=text("status"),
            message=text("message"),
            options=text("options"),
            node_offsets=off - off[0] if off.size else off,
            children=np.stack([f.read(f"{g}/left", nodes), f.read(f"{g}/right", nodes)], axis=1),
            leaf_of_node=f.read(f"{g}/leaf_of_node", nodes),
            counters=counters,
            likelihood=str(attrs.get("likelihood", "symmetric")),
            exact_method=bool(attrs.get("exact_method", False)),
        )
    except ValueError as exc:
        raise FileFormatError(f"{f.path}: inconsistent results in '{g}' ({exc})") from None


def hdf5_info(path: str | os.PathLike[str], *, results: bool = True) -> dict[str, Any]:
    """What a jetastar HDF5 file holds: schema, provenance, jet counts, parameters, results
    (``results=False``: their rows are not read, and not counted by status).

    Reads only metadata and the small per-jet columns.
    """
    with _File(path, need_jets=False) as f:
        attrs = {k: _attr(v) for k, v in f.f.attrs.items()}
        info: dict[str, Any] = {"path": str(path), "format": "hdf5", "attrs": attrs}
        if "jets" in f.f:
            n_leaves = f.read("jets/n_leaves")
            types = _decoded(f.read("jets/jet_type")).tolist()
            info["n_jets"] = int(n_leaves.shape[0])
            info["n_leaves"] = n_leaves
            info["jet_types"] = dict(sorted(Counter(types).items()))
            info["has_truth"] = int(np.count_nonzero(np.diff(f.read("jets/node_offsets"))))
            info["extra_columns"] = sorted(
                [*f.f["jets"].get("node_extra", {}), *f.f["jets"].get("jet_extra", {})]
            )
        info["results"] = {}
        for label in f.f.get("results", {}):
            g = f.f[f"results/{label}"]
            info["results"][label] = {
                "algorithm": _attr(g.attrs.get("algorithm", label)),
                "likelihood": _attr(g.attrs.get("likelihood", "")),
                "rows": int(g["status"].shape[0]),
            }
            if results:
                status = _decoded(f.read(f"results/{label}/status")).tolist()
                info["results"][label]["status"] = dict(sorted(Counter(status).items()))
    return info


def _side_by_side(f: _File, names: list[str], rows: slice, dtype: Any) -> np.ndarray:
    """The datasets ``names`` (rows ``rows``, a slice with both ends) as the columns of one array
    (:func:`~jetastar.io._common.columns_side_by_side`)."""
    return columns_side_by_side(
        (np.asarray(f.read(name, rows), dtype=dtype) for name in names), len(names),
        rows.stop - rows.start, dtype,
        f"{f.path}: the columns {names} are shorter than the offsets say")


def _decoded(values: Any) -> np.ndarray:
    """A text dataset's values (``bytes`` or ``str``) as an object array of ``str``, each distinct
    value decoded once and shared by its rows (a column of statuses or jet types repeats a few
    values: one ``str`` per row costs ~50 bytes and a decode each)."""
    if isinstance(values, np.ndarray) and values.dtype.kind == "S" and values.ndim == 1:
        # fixed-width bytes (statuses, jet types): the distinct values found by numpy
        unique, which = np.unique(values, return_inverse=True)
        text = np.empty(unique.shape[0], dtype=object)
        text[:] = [u.decode("utf-8") for u in unique.tolist()]
        return text[which]
    items = values.tolist() if isinstance(values, np.ndarray) else list(values)
    text = {k: k.decode("utf-8") if isinstance(k, bytes) else str(k) for k in dict.fromkeys(items)}
    out = np.empty(len(items), dtype=object)
    out[:] = [text[k] for k in items]
    return out


def _attr(v: Any) -> Any:
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, np.generic):
        return v.item()
    return v


class HDF5Format(Format):
    """jetastar's HDF5 files (this module), as registered with :mod:`jetastar.io.formats`."""

    name = "hdf5"
    suffixes = (".h5", ".hdf5", ".hdf")
    magic = b"\x89HDF\r\n\x1a\n"
    hint = ".h5/.hdf5"

    def read(self, path: str | os.PathLike[str], jets: Any = None, *,
             validate: bool = True) -> JetCollection:
        return read_hdf5(path, jets, validate=validate)

    def n_jets(self, path: str | os.PathLike[str]) -> int:
        return n_jets_hdf5(path)

    def iterate(self, path: str | os.PathLike[str], step_size: int, *,
                validate: bool = True) -> Iterator[JetCollection]:
        return iterate_hdf5(path, step_size, validate=validate)

    def write(self, path: str | os.PathLike[str], collection: JetCollection | None,
              tables: Mapping[str, AlgorithmResults], *,
              attrs: Mapping[str, Any] | None = None) -> None:
        write_hdf5(path, collection, tables, attrs=attrs)

    def read_results(self, path: str | os.PathLike[str], algorithms: Any = None,
                     jets: Any = None) -> dict[str, AlgorithmResults]:
        return read_hdf5_results(path, algorithms, jets)

    def info(self, path: str | os.PathLike[str], *, results: bool = True) -> dict[str, Any]:
        return hdf5_info(path, results=results)

    def columns(self, path: str | os.PathLike[str]) -> HDF5Columns:
        return HDF5Columns(path)

    def stream_writer(self, path: str | os.PathLike[str], attrs: Mapping[str, Any] | None = None,
                      need: int = 0) -> HDF5StreamWriter:
        return HDF5StreamWriter(path, attrs, need)


_FORMAT = register_format(HDF5Format())
