"""ROOT files of jets and clustering results (uproot, classic TTrees readable by ROOT 6), schema 1.

Layout (documented in full in ``jetastar/io/schema.md``)::

    meta      TObjString   JSON: format="jetastar", schema_version=1, jetastar_version, created,
                           command, seed, generator_params, n_jets, results (label -> algorithm,
                           likelihood, exact_method, n_rows), node_extra, jet_extra
    jets      TTree        one entry per jet:
                 jet_id, seed, n_leaves (int64); jet_type (string);
                 m_hard, lam, lam_root, t_cut, t_root, root_E, root_px, root_py, root_pz,
                 truth_llh_symmetric, truth_llh_legacy (double; NaN = no truth tree);
                 nleaf (int32) + leaf_E, leaf_px, leaf_py, leaf_pz (double[nleaf]);
                 nnode (int32) + node_left, node_right, node_leaf (int64[nnode])
                 [+ node_E, node_px, node_py, node_pz, node_extra_<name> (double[nnode])];
                 [extra_<name> (double)]
    results   TTree        one entry per (algorithm, jet):
                 label, algorithm, status, message, options (string; options = JSON);
                 jet_index, jet_id (int64); exact (bool); log_likelihood, log_z, upper_bound,
                 n_trees, time_s (double; NaN = unknown / no tree);
                 nnode (int32) + node_left, node_right, node_leaf (int64[nnode]);
                 counter_<name> (double; NaN where an algorithm lacks it)

Entries are written in baskets of at most 10 000 jets; :func:`iterate_root` reads in chunks with
``uproot.iterate``.

Example:
    >>> import os, tempfile
    >>> import numpy as np
    >>> from jetastar import Jet, JetCollection, Tree
    >>> jet = Jet(np.array([[10.0, 0, 0, 9.0], [10.0, 0, 0, -9.0]]), truth=Tree.from_nested((0, 1)))
    >>> path = os.path.join(tempfile.mkdtemp(), "jets.root")
    >>> write_root(path, JetCollection.from_jets([jet]))
    >>> read_root(path)[0].n_leaves
    2
"""

from __future__ import annotations

import importlib.util
import json
import os
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

from .._atomic import atomic_path
from .._text import Repeated, awkward_strings, str_array
from ..jet import JetCollection
from ..result_tables import AlgorithmResults
from ._by_entry import by_entry_columns, event_columns, has_entries
from ._checks import check_counts
from ._common import (
    FileFormatError,
    check_exists,
    check_tree_extent,
    columns_side_by_side,
    decompression_executor,
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
    validate_columns,
    writer_meta,
)
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
    "RootColumns",
    "RootStreamWriter",
    "iterate_root",
    "n_jets_root",
    "read_root",
    "read_root_results",
    "root_compression",
    "root_info",
    "root_results_rows",
    "root_status_columns",
    "write_root",
]

_BASKET = 10000
#: most rows of the ``results`` tree per ``extend`` (basket): uproot's cost per call (e.g. its
#: handling of the five string branches, ~3 ms each) is paid per block (10 000-row blocks made
#: writing 800 000 rows about 30 % slower)
_RESULTS_BASKET = 50_000


def root_compression() -> Any:
    """The compression of the ROOT files jetastar writes: ZLIB level 1 (uproot's default, which
    every ROOT reader decodes), computed with libdeflate (the ``deflate`` package) when it is
    installed: about 2.2 times faster than Python's ``zlib`` at that level, with files a few per
    cent smaller. Only the compressed bytes differ; readers need nothing but ZLIB.

    Returns:
        An ``uproot.ZLIB(1)`` for ``uproot.recreate(..., compression=...)``.
    """
    import uproot

    compression = uproot.ZLIB(1)
    if hasattr(compression, "library") and importlib.util.find_spec("deflate") is not None:
        compression.library = "deflate"  # on this object only; uproot's class default is untouched
    return compression


def _extra_names(collection: JetCollection) -> tuple[list[str], list[str]]:
    """``meta["node_extra"]`` and ``meta["jet_extra"]``: the names of the extra columns (sorted;
    the truth log-likelihoods have branches of their own)."""
    node_extra, jet_extra = get_extras(collection)
    return sorted(node_extra), sorted(k for k in jet_extra if not k.startswith("truth_llh_"))


def _table_meta(table: AlgorithmResults, n_rows: int) -> dict[str, Any]:
    """A results table's entry of ``meta["results"]`` (``n_rows``: its rows in the file)."""
    return {"algorithm": table.algorithm, "likelihood": table.likelihood,
            "exact_method": table.exact_method, "n_rows": n_rows}


def _jagged(values: np.ndarray, offsets: np.ndarray) -> Any:
    import awkward as ak

    return ak.unflatten(np.ascontiguousarray(values), np.diff(offsets))


def _jets_block(collection: JetCollection, truth: dict[str, np.ndarray], a: int, b: int) -> dict:
    import awkward as ak

    la, lb = int(collection.leaf_offsets[a]), int(collection.leaf_offsets[b])
    na, nb = int(collection.node_offsets[a]), int(collection.node_offsets[b])
    loff = collection.leaf_offsets[a:b + 1] - la
    noff = collection.node_offsets[a:b + 1] - na
    leaf = {c: _jagged(collection.leaves[la:lb, j], loff) for j, c in enumerate(P4_COLUMNS)}
    node: dict[str, Any] = {
        "left": _jagged(collection.children[na:nb, 0], noff),
        "right": _jagged(collection.children[na:nb, 1], noff),
        "leaf": _jagged(collection.leaf_of_node[na:nb], noff),
    }
    if collection.node_momenta is not None:
        for j, c in enumerate(P4_COLUMNS):
            node[c] = _jagged(collection.node_momenta[na:nb, j], noff)
    node_extra, jet_extra = get_extras(collection)
    for k, v in node_extra.items():
        node[f"extra_{k}"] = _jagged(v[na:nb], noff)
    out: dict[str, Any] = {
        "jet_id": collection.jet_id[a:b],
        "seed": collection.seed[a:b],
        "n_leaves": collection.n_leaves[a:b],
        "jet_type": awkward_strings(collection.jet_type[a:b]),
    }
    for k in PARAM_COLUMNS:
        out[k] = collection.params[k][a:b]
    rm = collection.params["root_momentum"].reshape(-1, 4)
    for j, k in enumerate(ROOT_MOMENTUM_COLUMNS):
        out[k] = np.ascontiguousarray(rm[a:b, j])
    for lk in TRUTH_LIKELIHOODS:
        out[f"truth_llh_{lk}"] = truth[lk][a:b]
    for k, v in jet_extra.items():
        if not k.startswith("truth_llh_"):
            out[f"extra_{k}"] = v[a:b]
    out["leaf"] = ak.zip(leaf)
    out["node"] = ak.zip(node)
    return out


def _branch_types(block: dict[str, Any]) -> dict[str, Any]:
    import awkward as ak

    types: dict[str, Any] = {}
    for k, v in block.items():
        if isinstance(v, ak.Array):
            types[k] = "string" if k in _STRING_BRANCHES else v.type.content
        else:
            types[k] = np.asarray(v).dtype
    return types


_STRING_BRANCHES = {"jet_type", "label", "algorithm", "status", "message", "options"}


def _results_block(label: str, table: AlgorithmResults, counters: list[str], a: int, b: int) -> dict:
    import awkward as ak

    na, nb = int(table.node_offsets[a]), int(table.node_offsets[b])
    noff = table.node_offsets[a:b + 1] - na
    out: dict[str, Any] = {
        "label": awkward_strings(Repeated(label, b - a)),
        "algorithm": awkward_strings(Repeated(table.algorithm, b - a)),
        "status": awkward_strings(table.status[a:b]),
        "message": awkward_strings(table.message[a:b]),
        "options": awkward_strings(table.options[a:b]),
        "jet_index": table.jet_index[a:b],
        "jet_id": table.jet_id[a:b],
        "exact": table.exact[a:b].astype(np.bool_),
    }
    for k in ("log_likelihood", "log_z", "upper_bound", "n_trees", "time_s"):
        out[k] = getattr(table, k)[a:b]
    for k in counters:
        out[f"counter_{k}"] = table.counters.get(k, np.full(len(table), np.nan))[a:b]
    out["node"] = ak.zip({
        "left": _jagged(table.children[na:nb, 0], noff),
        "right": _jagged(table.children[na:nb, 1], noff),
        "leaf": _jagged(table.leaf_of_node[na:nb], noff),
    })
    return out


def _extend(f: Any, tree: Any, name: str, title: str, n: int, rows: int,
            block_of: Callable[[int, int], dict[str, Any]],
            types_of: Callable[[dict[str, Any]], dict[str, Any]]) -> Any:
    """Append rows ``0:n`` to the tree ``name`` of ``f`` in blocks (baskets) of ``rows``
    (``block_of(a, b)``: the branches of rows ``a:b``); the tree is made, with ``title`` and the
    branch types ``types_of(block)``, from the first block when ``tree`` is ``None``, even for no
    rows. Returns the tree."""
    for a in range(0, max(n, 1), rows):
        b = min(n, a + rows)
        block = block_of(a, b)
        if tree is None:
            tree = f.mktree(name, types_of(block), title=title)
        if b > a:
            tree.extend(block)
    return tree


def _extend_jets(f: Any, tree: Any, collection: JetCollection) -> Any:
    """Append the jets of ``collection`` to the ``jets`` tree of ``f`` in baskets of
    :data:`_BASKET` (the tree is made from the first block when ``tree`` is ``None``, even for no
    jets); returns the tree."""
    truth = {lk: truth_log_likelihoods(collection, lk) for lk in TRUTH_LIKELIHOODS}
    return _extend(f, tree, "jets", "jetastar jets", len(collection), _BASKET,
                   lambda a, b: _jets_block(collection, truth, a, b), _branch_types)


def _extend_results(f: Any, tree: Any, label: str, table: AlgorithmResults,
                    counters: list[str]) -> Any:
    """Append ``table``'s rows to the ``results`` tree of ``f`` in blocks of
    :data:`_RESULTS_BASKET` (the tree is made from the first block when ``tree`` is ``None``, even
    for an empty table); returns the tree."""
    return _extend(f, tree, "results", "jetastar clustering results", len(table),
                   _RESULTS_BASKET, lambda a, b: _results_block(label, table, counters, a, b),
                   _branch_types)


def write_root(
    path: str | os.PathLike[str],
    collection: JetCollection | None,
    results: Mapping[str, AlgorithmResults] | None = None,
    *,
    attrs: Mapping[str, Any] | None = None,
) -> None:
    """Write jets and/or results to a ROOT file (TTrees + a JSON TObjString), atomically.

    Args:
        path: destination ``.root`` file; replaced if it exists.
        collection: the jets (``None`` for a results-only file).
        results: label -> :class:`AlgorithmResults`.
        attrs: provenance entries to add to ``meta`` (defaults from :func:`provenance`).
    """
    import uproot

    meta = writer_meta(attrs, format=FORMAT_NAME, schema_version=SCHEMA_VERSION)
    results = dict(results or {})
    meta["content"] = file_content(collection is not None)
    meta["results"] = {label: _table_meta(t, len(t)) for label, t in results.items()}
    if collection is not None:
        meta["n_jets"] = len(collection)
        meta.setdefault("generator_params", generator_params(collection))
        meta["node_extra"], meta["jet_extra"] = _extra_names(collection)
    with atomic_path(path, clean=True) as tmp:
        with uproot.recreate(tmp, compression=root_compression()) as f:
            f["meta"] = json.dumps(meta, default=_json_default)
            if collection is not None:
                _extend_jets(f, None, collection)
            if results and has_entries(collection):
                _write_by_entry(f, collection, results)
                _write_by_event(f, collection, results, entry_range(meta))
            if results:
                counters = sorted({k for t in results.values() for k in t.counters})
                tree = None
                for label, table in results.items():
                    tree = _extend_results(f, tree, label, table, counters)


def _write_by_entry(f: Any, collection: JetCollection,
                    results: Mapping[str, AlgorithmResults]) -> None:
    """The ``clusters`` tree: one entry per jet read from a particle file (``_by_entry``)."""
    _extend_by_entry(f, None, *by_entry_columns(collection, results))


def _by_entry_block(scalars: Mapping[str, np.ndarray], per_label: Mapping[str, Mapping[str, Any]],
                    a: int, b: int) -> dict[str, Any]:
    import awkward as ak

    out: dict[str, Any] = {k: np.ascontiguousarray(v[a:b]) for k, v in scalars.items()}
    for p, c in per_label.items():
        out[f"{p}_status"] = awkward_strings(c["status"][a:b])
        out[f"{p}_finite"] = np.ascontiguousarray(c["finite"][a:b])
        out[f"{p}_reason"] = awkward_strings(c["reason"][a:b])
        out[f"{p}_log_likelihood"] = np.ascontiguousarray(c["log_likelihood"][a:b])
        out[f"{p}_time_s"] = np.ascontiguousarray(c["time_s"][a:b])
        out[f"{p}_exact"] = np.ascontiguousarray(c["exact"][a:b])
        off = c["node_offsets"]
        na, nb = int(off[a]), int(off[b])
        sub = off[a:b + 1] - na
        out[f"{p}_node"] = ak.zip({
            "left": _jagged(c["left"][na:nb], sub), "right": _jagged(c["right"][na:nb], sub),
            "leaf": _jagged(c["leaf_of_node"][na:nb], sub),
        })
    return out


def _by_entry_types(block: dict[str, Any]) -> dict[str, Any]:
    import awkward as ak

    types: dict[str, Any] = {}
    for k, v in block.items():
        if k.endswith(("_status", "_reason")):
            types[k] = "string"
        elif isinstance(v, ak.Array):
            types[k] = v.type.content
        else:
            types[k] = np.asarray(v).dtype
    return types


def _extend_by_entry(f: Any, tree: Any, scalars: Mapping[str, np.ndarray],
                     per_label: Mapping[str, Mapping[str, Any]]) -> Any:
    """Append the rows of :func:`~._by_entry.by_entry_columns` to the ``clusters`` tree of ``f``
    in baskets of :data:`_BASKET` (made from the first block when ``tree`` is ``None``, even for
    no rows); returns the tree."""
    return _extend(f, tree, "clusters", "jetastar results, one entry per input jet",
                   scalars["entry"].shape[0], _BASKET,
                   lambda a, b: _by_entry_block(scalars, per_label, a, b), _by_entry_types)


def _write_by_event(f: Any, collection: JetCollection,
                    results: Mapping[str, AlgorithmResults],
                    entry_range: tuple[int, int] | None) -> None:
    """``clusters_events``: one entry per input event, for jets found in events."""
    cols = event_columns(collection, results, entry_range)
    if cols is not None:
        _extend_by_event(f, None, *cols)


def _by_event_block(scalars: Mapping[str, np.ndarray], per_jet: Mapping[str, np.ndarray],
                    offsets: np.ndarray, a: int, b: int) -> dict[str, Any]:
    import awkward as ak

    block: dict[str, Any] = {k: np.ascontiguousarray(v[a:b]) for k, v in scalars.items()}
    ja, jb = int(offsets[a]), int(offsets[b])
    block["jet"] = ak.zip({k: _jagged(v[ja:jb], offsets[a:b + 1] - ja)
                           for k, v in per_jet.items()})
    return block


def _extend_by_event(f: Any, tree: Any, scalars: Mapping[str, np.ndarray],
                     per_jet: Mapping[str, np.ndarray], offsets: np.ndarray) -> Any:
    """Append events (:func:`~._by_entry.event_columns`) to the ``clusters_events`` tree of
    ``f`` in baskets of :data:`_BASKET` (made from the first block when ``tree`` is ``None``);
    returns the tree."""
    return _extend(f, tree, "clusters_events", "jetastar results, one entry per input event",
                   offsets.shape[0] - 1, _BASKET,
                   lambda a, b: _by_event_block(scalars, per_jet, offsets, a, b),
                   lambda block: {k: (v.type.content if k == "jet" else np.asarray(v).dtype)
                                  for k, v in block.items()})


class RootStreamWriter(StreamWriter):
    """A ROOT file of jets and results written block by block (memory bounded by one block),
    atomically: the file appears under its name only when :meth:`close` succeeds.

    The layout is that of :func:`write_root` (the same trees, branches and ``meta``; ``meta`` is
    written last). Jets come in file order (:meth:`add_jets`, in baskets of 10 000 jets when the
    blocks are multiples of that); results table after table (:meth:`add_results`: the
    ``results`` tree holds one table after the other, in blocks of at most 50 000 rows: each
    ``add_results`` call writes at least one), after :meth:`set_counters`. For jets of a particle
    file, the ``clusters`` and ``clusters_events`` trees come block by block too
    (:meth:`add_by_entry`). What the HDF5 writer does alike is in
    :class:`~jetastar.io._stream.StreamWriter`.

    Args:
        path: destination ``.root`` file; replaced when the writer closes.
        attrs: provenance entries to add to ``meta`` (as :func:`write_root`).
        need: an upper estimate of the file's size, checked against the free space.

    Example:
        >>> import os, tempfile
        >>> from jetastar.ginkgo import ShowerParams, generate
        >>> jets = generate(4, ShowerParams.qcd(), seed=1)
        >>> path = os.path.join(tempfile.mkdtemp(), "jets.root")
        >>> with RootStreamWriter(path) as w:
        ...     w.add_jets(jets.take(np.arange(2))); w.add_jets(jets.take(np.arange(2, 4)))
        >>> n_jets_root(path)
        4
    """

    def __init__(self, path: str | os.PathLike[str], attrs: Mapping[str, Any] | None = None,
                 need: int = 0) -> None:
        super().__init__(path, attrs, need, format=FORMAT_NAME, schema_version=SCHEMA_VERSION)
        self._extras: tuple[list[str], list[str]] = ([], [])
        self._counters: list[str] = []
        self._labels: dict[str, dict[str, Any]] = {}
        self._clusters: Any = None
        self._events: Any = None

    def _open(self, tmp: str) -> Any:
        import uproot

        return uproot.recreate(tmp, compression=root_compression())

    def _write_jets(self, collection: JetCollection) -> None:
        if self._jets is None:
            self._extras = _extra_names(collection)
        self._jets = _extend_jets(self.f, self._jets, collection)

    def _jets_only_meta(self, path: str | os.PathLike[str]) -> dict[str, Any] | None:
        return _jets_only_meta(path)

    def _open_copy(self, meta: Mapping[str, Any]) -> None:
        import uproot

        self.f = uproot.update(self._tmp)
        self.f.compression = root_compression()
        del self.f["meta"]  # written again when the writer closes
        self._extras = (list(meta["node_extra"]), list(meta["jet_extra"]))
        self._copied_params = meta["generator_params"]

    def set_counters(self, names: Any) -> None:
        """The counters of every results table (one branch each); before the first results."""
        if self._results is not None:
            raise ValueError("set_counters must come before the first results")
        self._counters = sorted(set(names))

    def add_results(self, label: str, table: AlgorithmResults) -> None:
        """Append rows of the results table ``label`` (a table's rows one after the other; its
        attributes come from its first rows)."""
        info = self._labels.get(label)
        if info is None:
            info = self._labels[label] = _table_meta(table, 0)
        self._results = _extend_results(self.f, self._results, label, table, self._counters)
        info["n_rows"] += len(table)

    def _write_by_entry(self, scalars: Mapping[str, np.ndarray],
                        per_label: Mapping[str, Mapping[str, Any]]) -> None:
        self._clusters = _extend_by_entry(self.f, self._clusters, scalars, per_label)

    def _write_events(self, events: tuple[Any, ...]) -> None:
        self._events = _extend_by_event(self.f, self._events, *events)

    def _write_meta(self) -> None:
        meta = dict(self._meta)
        jets = self._has_jets
        meta["content"] = file_content(jets)
        meta["results"] = self._labels
        if jets:
            meta["n_jets"] = self._n_jets
            meta.setdefault("generator_params", self._params.result() if not self._copied
                            else self._copied_params)
            meta["node_extra"], meta["jet_extra"] = self._extras
        self.f["meta"] = json.dumps(meta, default=_json_default)


def _jets_only_meta(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The ``meta`` of a jetastar ROOT file of this schema that holds its jets and nothing else
    (``None`` for any other file)."""
    try:
        with _RootFile(path) as f:
            if set(f.f.keys(cycle=False)) != {"jets", "meta"}:
                return None
            meta = dict(f.meta)
            entries = f.num_entries("jets")
    except (FileFormatError, OSError):
        return None
    needed = ("n_jets", "node_extra", "jet_extra", "generator_params")
    if meta.get("results") or any(k not in meta for k in needed) or meta["n_jets"] != entries:
        return None
    return meta


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    return repr(obj)


# ---------------------------------------------------------------------- reading
class _RootFile:
    def __init__(self, path: str | os.PathLike[str], need_jets: bool = True) -> None:
        import uproot

        p = check_exists(path)
        self.path = str(p)
        with open(p, "rb") as fh:
            if fh.read(4) != b"root":
                raise FileFormatError(f"{p}: not a ROOT file")
        try:
            # no array cache: every file is opened for one read (or reads each range once)
            self.f = uproot.open(p, array_cache=None,
                                 decompression_executor=decompression_executor())
        except Exception as exc:  # uproot raises many types for non-ROOT / damaged files
            raise FileFormatError(_open_error(self.path, exc)) from None
        try:
            self.meta = self._meta()
            if need_jets and "jets" not in self.f:
                raise FileFormatError(f"{self.path}: holds no 'jets' tree")
            self._check_extent()
        except BaseException:
            self.f.close()
            raise

    def _meta(self) -> dict[str, Any]:
        try:
            if "meta" not in self.f:
                raise FileFormatError(
                    f"{self.path}: not a jetastar ROOT file (no 'meta' TObjString); for "
                    "particles in your own layout use jetastar.io.read_particles or "
                    "`jetastar cluster FILE --tree TREE --particles PREFIX`"
                )
            meta = json.loads(str(self.f["meta"]))
        except FileFormatError:
            raise
        except Exception as exc:
            raise FileFormatError(
                f"{self.path}: corrupt ROOT file, cannot read 'meta' ({type(exc).__name__}: "
                f"{one_line(str(exc))})"
            ) from None
        if not isinstance(meta, dict) or meta.get("format") != FORMAT_NAME:
            raise FileFormatError(f"{self.path}: not a jetastar ROOT file ('meta' has no format)")
        version = meta.get("schema_version")
        if version != SCHEMA_VERSION:
            raise schema_version_error(self.path, version)
        return meta

    def _check_extent(self) -> None:
        """Every basket of every tree lies inside the file (a truncated file is refused before
        anything else is read)."""
        for name in ("jets", "results", "clusters", "clusters_events"):
            if name in self.f:
                check_tree_extent(self.f[name], name, self.path)

    def arrays(self, tree: str, start: int | None = None, stop: int | None = None,
               filter_name: Any = None) -> Any:
        try:
            return self.f[tree].arrays(
                filter_name=filter_name, entry_start=start, entry_stop=stop, library="ak"
            )
        except Exception as exc:
            raise FileFormatError(
                f"{self.path}: tree '{tree}' cannot be read, the file is corrupt or truncated "
                f"({type(exc).__name__}: {one_line(str(exc))})"
            ) from None

    def columns(self, tree: str, start: int | None = None, stop: int | None = None,
                filter_name: Any = None) -> dict[str, Any]:
        """The branches of :meth:`arrays` as a dict in the file's order (:func:`_columns`); from
        :data:`_BRANCH_BY_BRANCH` entries on, read one branch at a time: uproot holds every basket
        of a read *and* the joined array, so one read of every branch of 1 000 000 jets peaked at
        3.1 GB for 1.35 GB of columns (2.0 GB branch by branch). Smaller reads (a batch run's
        chunks) take one call: ~30 calls cost more than the memory they save there."""
        first, last = 0 if start is None else start, self.num_entries(tree) if stop is None else stop
        if last - first < _BRANCH_BY_BRANCH:
            return _columns(self.arrays(tree, start, stop, filter_name=filter_name))
        try:
            names = list(self.f[tree].keys(filter_name=filter_name))
        except Exception as exc:
            raise FileFormatError(
                f"{self.path}: tree '{tree}' cannot be read, the file is corrupt or truncated "
                f"({type(exc).__name__}: {one_line(str(exc))})"
            ) from None
        return {b: self.arrays(tree, start, stop, filter_name=[b])[b] for b in names}

    def num_entries(self, tree: str) -> int:
        try:
            return int(self.f[tree].num_entries)
        except Exception as exc:
            raise FileFormatError(
                f"{self.path}: tree '{tree}' cannot be read ({type(exc).__name__}: "
                f"{one_line(str(exc))})"
            ) from None

    def __enter__(self) -> _RootFile:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.f.close()


#: reads of this many entries or more go branch by branch (:meth:`_RootFile.columns`)
_BRANCH_BY_BRANCH = 100_000


def _open_error(path: str, exc: Exception) -> str:
    text = one_line(str(exc))
    if "not a ROOT file" in text:
        return f"{path}: not a ROOT file"
    return f"{path}: corrupt or truncated ROOT file ({type(exc).__name__}: {text})"


def _np(x: Any, dtype: Any) -> np.ndarray:
    import awkward as ak

    return np.asarray(ak.to_numpy(x), dtype=dtype)


def _flat(x: Any, dtype: Any) -> np.ndarray:
    import awkward as ak

    return np.asarray(ak.to_numpy(ak.flatten(x, axis=1)), dtype=dtype)


def _offsets(counts: Any) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(_np(counts, np.int64))]).astype(np.int64)


def _columns(arr: Any) -> dict[str, Any]:
    """The branches of a record array read from a tree, as a dict in the file's order. The record
    itself is not kept: :func:`_collection_from_arrays` pops each column as it converts it, which
    frees that column (with the whole record alive to the end, building a collection of 1 000 000
    jets peaked 0.6 GB higher)."""
    import awkward as ak

    return {k: arr[k] for k in ak.fields(arr)}


def _stacked(cols: dict[str, Any], names: list[str], dtype: Any, rows: int, path: str,
             jagged: bool = True) -> np.ndarray:
    """``(rows, len(names))`` array of the columns ``names`` (popped from ``cols`` as they are
    placed: :func:`~jetastar.io._common.columns_side_by_side`)."""
    convert = _flat if jagged else _np
    return columns_side_by_side(
        (convert(cols.pop(name), dtype) for name in names), len(names), rows, dtype,
        f"{path}: the branches {names} do not have the lengths their counts give")


def _collection_from_arrays(cols: dict[str, Any], path: str, offset: int = 0) -> JetCollection:
    """The collection of the branches ``cols`` (:func:`_columns`; emptied as they are converted)."""
    import awkward as ak

    order = list(cols)  # (the extras in the file's order: a set's order varies by process)
    fields = set(order)
    need = {"nleaf", "leaf_E", "leaf_px", "leaf_py", "leaf_pz", "nnode", "node_left",
            "node_right", "node_leaf", "jet_id", "seed", "jet_type", *PARAM_COLUMNS, *ROOT_MOMENTUM_COLUMNS}
    missing = sorted(need - fields)
    if missing:
        raise FileFormatError(f"{path}: the 'jets' tree lacks branches {missing}")
    for count, branches in (("nleaf", [f"leaf_{c}" for c in P4_COLUMNS]),
                            ("nnode", ["node_left", "node_right", "node_leaf",
                                       *(f"node_{c}" for c in P4_COLUMNS if f"node_{c}" in fields),
                                       *(k for k in order if k.startswith("node_extra_"))])):
        counts = _np(cols[count], np.int64)
        for b in branches:
            check_counts(path, "the 'jets' tree", counts, count, _np(ak.num(cols[b], axis=1), np.int64),
                         b, offset)
    if "n_leaves" in fields:
        check_counts(path, "the 'jets' tree", _np(cols["n_leaves"], np.int64), "n_leaves",
                     _np(cols["nleaf"], np.int64), "nleaf", offset)
    loff = _offsets(cols.pop("nleaf"))
    noff = _offsets(cols.pop("nnode"))
    n_jets = loff.shape[0] - 1
    leaves = _stacked(cols, [f"leaf_{c}" for c in P4_COLUMNS], np.float64, int(loff[-1]), path)
    children = _stacked(cols, ["node_left", "node_right"], np.int64, int(noff[-1]), path)
    node_momenta = None
    if "node_E" in fields:
        node_momenta = _stacked(cols, [f"node_{c}" for c in P4_COLUMNS], np.float64,
                                int(noff[-1]), path)
    params = {k: _np(cols.pop(k), np.float64) for k in PARAM_COLUMNS}
    params["root_momentum"] = _stacked(cols, list(ROOT_MOMENTUM_COLUMNS), np.float64, n_jets,
                                       path, jagged=False)
    try:
        collection = JetCollection(
            leaves=leaves,
            leaf_offsets=loff,
            children=children,
            leaf_of_node=_flat(cols.pop("node_leaf"), np.int64),
            node_offsets=noff,
            node_momenta=node_momenta,
            jet_id=_np(cols.pop("jet_id"), np.int64),
            seed=_np(cols.pop("seed"), np.int64),
            jet_type=str_array(cols.pop("jet_type")),
            params=params,
        )
    except ValueError as exc:
        raise FileFormatError(f"{path}: inconsistent jet branches ({exc})") from None
    node_extra = {
        k[len("node_extra_"):]: _flat(cols.pop(k), np.float64)
        for k in order if k.startswith("node_extra_")
    }
    jet_extra = {k[len("extra_"):]: _np(cols.pop(k), np.float64) for k in order
                 if k.startswith("extra_")}
    for lk in TRUTH_LIKELIHOODS:
        if f"truth_llh_{lk}" in fields:
            jet_extra[f"truth_llh_{lk}"] = _np(cols.pop(f"truth_llh_{lk}"), np.float64)
    return set_extras(collection, node_extra, jet_extra)


def n_jets_root(path: str | os.PathLike[str]) -> int:
    """Number of jets in a jetastar ROOT file."""
    with _RootFile(path) as f:
        return f.num_entries("jets")


def read_root(
    path: str | os.PathLike[str], jets: Any = None, *, validate: bool = True
) -> JetCollection:
    """Read jets from a jetastar ROOT file (only the baskets of the selected entries).

    Args:
        path: the file.
        jets: ``None`` (all), a slice (step 1), an index or an array of indices.
        validate: check every selected jet and raise on the first bad one (see
            :func:`jetastar.io.read`).

    Returns:
        A :class:`~jetastar.JetCollection`.
    """
    with _RootFile(path) as f:
        n = f.num_entries("jets")
        start, stop, take = normalise_selection(jets, n)
        if stop > start:
            collection = _collection_from_arrays(f.columns("jets", start, stop), f.path, start)
        else:
            collection = set_extras(JetCollection.from_jets([]))
    return selected_jets(collection, path, start, take, validate)


#: the branches of each :class:`RootColumns` column
_COLUMN_BRANCHES = {
    "leaves": [f"leaf_{c}" for c in P4_COLUMNS], "leaf_offsets": ["nleaf"],
    "node_offsets": ["nnode"], "children": ["node_left", "node_right"],
    "leaf_of_node": ["node_leaf"], "jet_id": ["jet_id"], "seed": ["seed"],
    "jet_type": ["jet_type"], "params.root_momentum": list(ROOT_MOMENTUM_COLUMNS),
    **{f"params.{k}": [k] for k in PARAM_COLUMNS},
    **{f"truth_llh_{k}": [f"truth_llh_{k}"] for k in TRUTH_LIKELIHOODS},
}


class RootColumns(ColumnReader):
    """:class:`~jetastar.io.formats.ColumnReader` of a jetastar ROOT file: reads only the
    branches of the columns asked for (the file stays open until :meth:`close`).

    Example:
        >>> import os, tempfile
        >>> from jetastar.ginkgo import ShowerParams, generate
        >>> path = os.path.join(tempfile.mkdtemp(), "jets.root")
        >>> write_root(path, generate(3, ShowerParams.qcd(), seed=1))
        >>> with RootColumns(path) as cols:
        ...     cols.read(["jet_id", "leaf_offsets"], 1, 3)["jet_id"].tolist()
        [1, 2]
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__(_FORMAT, path)
        self._f = _RootFile(path)
        self.n_jets = self._f.num_entries("jets")

    def read(self, names: list[str], start: int, stop: int) -> dict[str, Any]:
        """The columns ``names`` of jets ``start:stop``."""
        branches = sorted({b for name in names for b in _COLUMN_BRANCHES[name]})
        arr = self._f.arrays("jets", start, stop, filter_name=branches)
        out: dict[str, Any] = {}
        for name in names:
            if name in ("leaf_offsets", "node_offsets"):
                out[name] = _offsets(arr["nleaf" if name == "leaf_offsets" else "nnode"])
            elif name == "leaves":
                out[name] = np.stack([_flat(arr[f"leaf_{c}"], np.float64) for c in P4_COLUMNS],
                                     axis=1).reshape(-1, 4)
            elif name == "children":
                out[name] = np.stack([_flat(arr["node_left"], np.int64),
                                      _flat(arr["node_right"], np.int64)], axis=1).reshape(-1, 2)
            elif name == "leaf_of_node":
                out[name] = _flat(arr["node_leaf"], np.int64)
            elif name == "jet_type":
                out[name] = str_array(arr["jet_type"])
            elif name == "params.root_momentum":
                out[name] = np.stack([_np(arr[k], np.float64) for k in ROOT_MOMENTUM_COLUMNS],
                                     axis=1).reshape(-1, 4)
            elif name.startswith("params."):
                out[name] = _np(arr[name[len("params."):]], np.float64)
            elif name.startswith("truth_llh_"):
                out[name] = _np(arr[name], np.float64)
            else:
                out[name] = _np(arr[name], np.int64)
        return out

    def collection(self, start: int, stop: int, *, node_data: bool = True) -> JetCollection:
        """Every column of jets ``start:stop`` (not validated), from the open file
        (``node_data``: see :meth:`ColumnReader.collection`; without it, the node momentum and
        ``node_extra_*`` branches, most of a file of generated jets, are not decompressed)."""
        start, stop, _ = normalise_selection(slice(start, stop), self.n_jets)
        if stop <= start:
            return set_extras(JetCollection.from_jets([]))
        names = None if node_data else [
            b for b in self._f.f["jets"].keys()
            if not (b.startswith("node_") and b not in ("node_left", "node_right", "node_leaf"))]
        return _collection_from_arrays(
            self._f.columns("jets", start, stop, filter_name=names), self._f.path, start)

    def close(self) -> None:
        """Close the file."""
        self._f.f.close()


def iterate_root(
    path: str | os.PathLike[str], step_size: int = 10000, *, validate: bool = True
) -> Iterator[JetCollection]:
    """Yield the jets of a ROOT file in collections of at most ``step_size`` jets (uproot.iterate)."""
    import uproot

    with _RootFile(path) as f:
        name = f.path
    start = 0
    pool = decompression_executor()  # (uproot.iterate leaves it running: shut down below)
    chunks = uproot.iterate({name: "jets"}, step_size=step_size, library="ak",
                            decompression_executor=pool)
    try:
        while True:
            try:
                arr = next(chunks)
            except StopIteration:
                return
            except Exception as exc:
                raise FileFormatError(f"{name}: cannot iterate over 'jets' ({type(exc).__name__}: "
                                      f"{one_line(str(exc))})") from None
            cols = _columns(arr)
            del arr  # (the columns are freed as they are converted)
            collection = _collection_from_arrays(cols, name, start)
            if validate:
                validate_columns(collection, name, offset=start)
            start += len(collection)
            yield collection
    finally:
        chunks.close()
        if pool is not None:
            pool.shutdown()


def read_root_results(
    path: str | os.PathLike[str], algorithms: Any = None, jets: Any = None
) -> dict[str, AlgorithmResults]:
    """Read the ``results`` tree: label -> :class:`AlgorithmResults` (see :func:`read_hdf5_results`)."""
    import awkward as ak

    out: dict[str, AlgorithmResults] = {}
    with _RootFile(path, need_jets=False) as f:
        info = f.meta.get("results", {})
        if "results" not in f.f:
            if algorithms:
                raise FileFormatError(f"{path}: holds no results")
            return out
        arr = f.arrays("results")
    labels = str_array(arr["label"])
    # every table of meta, rows or none (as HDF5 keeps its empty groups), then any others
    wanted = (list(dict.fromkeys([*info, *labels.tolist()])) if algorithms is None
              else list(algorithms))
    fields = ak.fields(arr)
    for label in wanted:
        rows = np.flatnonzero(labels == label)
        if rows.size == 0 and label not in info:
            raise FileFormatError(
                f"{path}: no results for {label!r}; the file has {sorted(set(labels.tolist()))}"
            )
        table = _table_of(arr[rows], fields, label, info.get(label, {}))
        if jets is not None:
            table = table.take(rows_for(table.jet_index, jets))
        out[label] = table
    return out


def _table_of(sub: Any, fields: list[str], label: str, meta: Mapping[str, Any]) -> AlgorithmResults:
    """An :class:`AlgorithmResults` from rows of the ``results`` tree (``meta``: the label's entry
    of the file's ``meta["results"]``)."""
    return AlgorithmResults(
        str(meta.get("algorithm", label)),
        jet_index=_np(sub["jet_index"], np.int64),
        jet_id=_np(sub["jet_id"], np.int64),
        log_likelihood=_np(sub["log_likelihood"], np.float64),
        exact=_np(sub["exact"], bool),
        log_z=_np(sub["log_z"], np.float64),
        upper_bound=_np(sub["upper_bound"], np.float64),
        n_trees=_np(sub["n_trees"], np.float64),
        time_s=_np(sub["time_s"], np.float64),
        status=str_array(sub["status"]),
        message=str_array(sub["message"]),
        options=str_array(sub["options"]),
        node_offsets=_offsets(sub["nnode"]),
        children=np.stack(
            [_flat(sub["node_left"], np.int64), _flat(sub["node_right"], np.int64)], axis=1
        ).reshape(-1, 2),
        leaf_of_node=_flat(sub["node_leaf"], np.int64),
        counters={
            k[len("counter_"):]: _np(sub[k], np.float64)
            for k in fields if k.startswith("counter_")
            and not np.all(np.isnan(_np(sub[k], np.float64)))
        },
        likelihood=str(meta.get("likelihood", "symmetric")),
        exact_method=bool(meta.get("exact_method", False)),
    )


def root_results_rows(path: str | os.PathLike[str], label: str, start: int,
                      stop: int) -> AlgorithmResults:
    """Rows ``start:stop`` of the results table ``label``, with their trees (see
    :func:`jetastar.io.dispatch.read_results_rows`): jetastar writes the ``results`` tree table
    after table, so the rows are the entries after those of the tables before it in ``meta``
    (checked; a file whose tables are interleaved is read whole)."""
    import awkward as ak

    with _RootFile(path, need_jets=False) as f:
        info = f.meta.get("results", {})
        if label not in info or "results" not in f.f:
            raise FileFormatError(f"{path}: no results for {label!r}")
        first = 0
        for other, m in info.items():
            if other == label:
                break
            first += int(m.get("n_rows", 0))
        n = int(info[label].get("n_rows", 0))
        start, stop = max(0, min(start, n)), max(0, min(stop, n))
        stop = max(start, stop)
        arr = f.arrays("results", first + start, first + stop)
    if all(lab == label for lab in str_array(arr["label"]).tolist()):
        return _table_of(arr, ak.fields(arr), label, info[label])
    return read_root_results(path, [label])[label].take(np.arange(start, stop))


def root_status_columns(path: str | os.PathLike[str],
                        step_size: int) -> Iterator[tuple[str, dict[str, Any]]]:
    """The status columns of each results table, ``step_size`` rows of the ``results`` tree at
    a time (see :func:`jetastar.io.dispatch.iterate_status_columns`); a table of ``meta`` without
    rows gives one empty block, in ``meta``'s order, as in :func:`hdf5_status_columns`."""
    with _RootFile(path, need_jets=False) as f:
        if "results" not in f.f:
            return
        tables = f.meta.get("results", {})
        empty = [label for label, m in tables.items() if int(m.get("n_rows", 1)) == 0]
        seen: set[str] = set()
        counters = sorted(k for k in f.f["results"].keys() if k.startswith("counter_"))
        empty_block = {"status": np.array([], dtype=object),
                       "jet_index": np.zeros(0, np.int64),
                       "log_likelihood": np.zeros(0), "exact": np.zeros(0, bool),
                       "time_s": np.zeros(0),
                       "counters": {k[len("counter_"):]: np.zeros(0) for k in counters}}

        def table_meta(label: str) -> dict[str, Any]:
            meta = tables.get(label, {})
            return {"algorithm": str(meta.get("algorithm", label)),
                    "likelihood": str(meta.get("likelihood", "symmetric")),
                    "exact_method": bool(meta.get("exact_method", False))}

        def empty_before(label: str | None) -> Iterator[tuple[str, dict[str, Any]]]:
            # the empty tables ``meta`` lists before ``label`` (None: all that are left)
            order = list(tables)
            stop = order.index(label) if label in tables else len(order)
            for other in order[:stop]:
                if other in empty and other not in seen:
                    seen.add(other)
                    yield other, {**empty_block, **table_meta(other)}

        n = f.num_entries("results")
        names = ["status", "jet_index", "log_likelihood", "exact", "time_s", *counters]

        def columns_of(arr: Any) -> dict[str, Any]:
            return {"status": str_array(arr["status"]),
                    "jet_index": _np(arr["jet_index"], np.int64),
                    "log_likelihood": _np(arr["log_likelihood"], np.float64),
                    "exact": _np(arr["exact"], bool), "time_s": _np(arr["time_s"], np.float64),
                    "counters": {k[len("counter_"):]: _np(arr[k], np.float64)
                                 for k in counters}}

        sizes = [m.get("n_rows") for m in tables.values()]
        if all(isinstance(r, int) and r >= 0 for r in sizes) and sum(sizes) == n:
            # the tables' rows one after the other, as the metadata counts them (as
            # root_results_rows reads them): the label column need not be read
            first = 0
            for label, rows in zip(tables, sizes, strict=True):
                if rows == 0:
                    yield label, {**empty_block, **table_meta(label)}
                for a in range(first, first + rows, step_size):
                    arr = f.arrays("results", a, min(first + rows, a + step_size),
                                   filter_name=names)
                    yield label, {**columns_of(arr), **table_meta(label)}
                first += rows
            return
        for a in range(0, n, step_size):
            arr = f.arrays("results", a, min(n, a + step_size), filter_name=["label", *names])
            labels = str_array(arr["label"])
            columns = columns_of(arr)
            values = columns.pop("counters")
            for label in dict.fromkeys(labels.tolist()):
                yield from empty_before(label)
                seen.add(label)
                rows = labels == label
                yield label, {**{k: v[rows] for k, v in columns.items()},
                              "counters": {k: v[rows] for k, v in values.items()},
                              **table_meta(label)}
        yield from empty_before(None)


def root_info(path: str | os.PathLike[str], *, results: bool = True) -> dict[str, Any]:
    """What a jetastar ROOT file holds (schema, provenance, counts, results per status;
    ``results=False``: the results' rows are not read, and not counted by status)."""

    with _RootFile(path, need_jets=False) as f:
        meta = dict(f.meta)
        info: dict[str, Any] = {"path": str(path), "format": "root", "attrs": meta}
        if "jets" in f.f:
            arr = f.arrays("jets", filter_name=["n_leaves", "jet_type", "nnode"])
            n_leaves = _np(arr["n_leaves"], np.int64)
            types = str_array(arr["jet_type"])
            info["n_jets"] = int(n_leaves.shape[0])
            info["n_leaves"] = n_leaves
            kinds = Counter(types.tolist())
            info["jet_types"] = {t: kinds[t] for t in sorted(kinds)}
            info["has_truth"] = int(np.count_nonzero(_np(arr["nnode"], np.int64)))
            info["extra_columns"] = sorted([*meta.get("node_extra", []),
                                            *meta.get("jet_extra", [])])
    if not results:  # (what the metadata says of each table)
        info["results"] = {label: {"algorithm": m.get("algorithm", label),
                                   "likelihood": m.get("likelihood", ""),
                                   "rows": int(m.get("n_rows", 0))}
                           for label, m in meta.get("results", {}).items()}
        return info
    # counted block by block: a file of millions of rows is not held as Python strings
    counts: dict[str, Counter[str]] = {}
    for label, block in root_status_columns(path, _INFO_ROWS):
        counts.setdefault(label, Counter()).update(block["status"].tolist())
    info["results"] = {}
    for label, st in counts.items():
        m = meta.get("results", {}).get(label, {})
        info["results"][label] = {
            "algorithm": m.get("algorithm", label),
            "likelihood": m.get("likelihood", ""),
            "rows": sum(st.values()),
            "status": {s: st[s] for s in sorted(st)},
        }
    return info


#: rows of the ``results`` tree read at a time by :func:`root_info`
_INFO_ROWS = 200_000


class ROOTFormat(Format):
    """jetastar's ROOT files (this module), as registered with :mod:`jetastar.io.formats`."""

    name = "root"
    suffixes = (".root",)
    magic = b"root"
    hint = ".root"

    def read(self, path: str | os.PathLike[str], jets: Any = None, *,
             validate: bool = True) -> JetCollection:
        return read_root(path, jets, validate=validate)

    def n_jets(self, path: str | os.PathLike[str]) -> int:
        return n_jets_root(path)

    def iterate(self, path: str | os.PathLike[str], step_size: int, *,
                validate: bool = True) -> Iterator[JetCollection]:
        return iterate_root(path, step_size, validate=validate)

    def write(self, path: str | os.PathLike[str], collection: JetCollection | None,
              tables: Mapping[str, AlgorithmResults], *,
              attrs: Mapping[str, Any] | None = None) -> None:
        write_root(path, collection, tables, attrs=attrs)

    def read_results(self, path: str | os.PathLike[str], algorithms: Any = None,
                     jets: Any = None) -> dict[str, AlgorithmResults]:
        return read_root_results(path, algorithms, jets)

    def info(self, path: str | os.PathLike[str], *, results: bool = True) -> dict[str, Any]:
        return root_info(path, results=results)

    def columns(self, path: str | os.PathLike[str]) -> RootColumns:
        return RootColumns(path)

    def stream_writer(self, path: str | os.PathLike[str], attrs: Mapping[str, Any] | None = None,
                      need: int = 0) -> RootStreamWriter:
        return RootStreamWriter(path, attrs, need)


_FORMAT = register_format(ROOTFormat())
