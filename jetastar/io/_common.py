"""Helpers shared by the HDF5, ROOT and legacy readers/writers.

Errors, validation, provenance, jet selections and the metadata both writers record; the layout
constants are in :mod:`jetastar.io.schema`.
"""

from __future__ import annotations

import datetime as _dt
import errno
import json
import os
import shlex
import sys
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numba
import numpy as np

from .._columnar import first_leaf_problem
from .._version import __version__
from ..errors import FileFormatError, InvalidJetInFileError
from ..ginkgo.likelihood import truth_log_likelihoods
from ..jet import JetCollection
from .schema import FORMAT_NAME, SCHEMA_VERSION

__all__ = [
    "FORMAT_NAME",
    "SCHEMA_VERSION",
    "FileFormatError",
    "InvalidJetInFileError",
    "check_exists",
    "check_tree_extent",
    "columns_side_by_side",
    "copy_bytes",
    "decompression_executor",
    "entry_range",
    "file_content",
    "generator_params",
    "get_extras",
    "jet_slice",
    "normalise_selection",
    "one_line",
    "provenance",
    "rows_for",
    "schema_version_error",
    "selected_jets",
    "set_extras",
    "take_with_extras",
    "truth_log_likelihoods",
    "validate_columns",
    "writer_meta",
]


def one_line(text: str) -> str:
    """``text`` on one line (each run of white space one space), at most 160 characters: how a
    message quotes what a library said.

    Example:
        >>> one_line("unable to open file:   truncated  ")
        'unable to open file: truncated'
    """
    return " ".join(text.split())[:160]


def schema_version_error(path: str, version: Any) -> FileFormatError:
    """The error of a jetastar file of another schema version (``version``: the one it says)."""
    return FileFormatError(
        f"{path}: unknown schema version {version!r} (this jetastar reads version "
        f"{SCHEMA_VERSION}; a newer file needs a newer jetastar)"
    )


def columns_side_by_side(columns: Iterable[np.ndarray], n_columns: int, rows: int, dtype: Any,
                         short: str) -> np.ndarray:
    """``(rows, n_columns)`` array of ``dtype`` filled one column at a time from ``columns`` (an
    iterator, so each column can be read, placed and dropped in turn): ``np.stack`` holds every
    column and the result at once, and the ``astype`` after it copies the result again.

    Raises:
        FileFormatError: ``short`` (a message naming the file), when a column has another length.
    """
    out = np.empty((rows, n_columns), dtype=dtype)
    for i, column in enumerate(columns):
        if column.shape != (rows,):
            raise FileFormatError(short)
        out[:, i] = column
    return out


def decompression_executor() -> Any:
    """A thread pool for uproot to decompress a ROOT file's baskets with, one thread per numba
    thread (``NUMBA_NUM_THREADS``, ``jetastar --threads``); ``None`` (uproot's serial default)
    with one thread.

    zlib releases the GIL while it inflates, so a file of many baskets reads up to that many times
    faster (1 000 000 default QCD jets, 2 threads: 10.3 → 7.9 s). uproot shuts the pool down when
    the file is closed, so every open file gets its own (its threads start on the first basket).

    Example:
        >>> import numba
        >>> pool = decompression_executor()  # uproot.open(path, decompression_executor=pool)
        >>> (pool is None) == (numba.get_num_threads() == 1)
        True
    """
    n = numba.get_num_threads()
    if n <= 1:
        return None
    return ThreadPoolExecutor(n, thread_name_prefix="jetastar-inflate")


def check_tree_extent(tree: Any, name: str, path: str | os.PathLike[str]) -> None:
    """Refuse a truncated ROOT file: every basket of the TTree ``tree`` must lie inside the file.

    uproot opens a truncated file and fails only when a missing basket is read (``OSError: expected
    Chunk of length ...``); this check names the problem before anything is read.

    Args:
        tree: an uproot TTree (RNTuples are not checked).
        name: the tree's name (for the message).
        path: the file.

    Raises:
        FileFormatError: ``truncated ROOT file (tree ... needs N bytes, the file has M)``, or a
            corrupt file whose basket table cannot be read.
    """
    if "RNTuple" in type(tree).__name__:
        return
    size = os.path.getsize(path)
    end = 0
    try:
        for b in tree.itervalues(recursive=True):
            seeks = b.member("fBasketSeek")
            for i in range(b.num_baskets):
                end = max(end, int(seeks[i]) + int(b.basket_compressed_bytes(i)))
    except Exception as exc:  # (uproot raises many types on damage)
        raise FileFormatError(
            f"{path}: corrupt or truncated ROOT file, tree '{name}' cannot be read "
            f"({type(exc).__name__}: {one_line(str(exc))})"
        ) from None
    if end > size:
        raise FileFormatError(
            f"{path}: truncated ROOT file (tree '{name}' needs {end} bytes, the file has {size})"
        )


#: bytes copied between two looks at the stop signal of :func:`copy_bytes`
COPY_BLOCK = 16 << 20
#: errors of a first ``os.sendfile`` that mean it cannot copy into a file here
_NO_SENDFILE = {errno.EINVAL, errno.ENOTSOCK, errno.ENOSYS, errno.EOPNOTSUPP, errno.EXDEV}


def copy_bytes(source: str | os.PathLike[str], target: str | os.PathLike[str],
               stop: Any = None) -> None:
    """Copy a file's bytes into ``target`` (created or truncated), a block of
    :data:`COPY_BLOCK` bytes at a time.

    Args:
        source: the file to copy.
        target: where to.
        stop: an event (``is_set()``) looked at before each block: once set, the copy stops with
            :class:`InterruptedError` (so that a copy of a large file on a slow disk does not hold
            up an interrupted run).

    Example:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> _ = (folder / "a").write_bytes(b"jets")
        >>> copy_bytes(folder / "a", folder / "b")
        >>> (folder / "b").read_bytes()
        b'jets'
    """
    with open(source, "rb", buffering=0) as src, open(target, "wb", buffering=0) as dst:
        offset = 0
        kernel = hasattr(os, "sendfile")  # the kernel copies (as shutil.copyfile does on Linux)
        while True:
            if stop is not None and stop.is_set():
                raise InterruptedError(f"the copy of {source} was stopped")
            if kernel:
                try:
                    sent = os.sendfile(dst.fileno(), src.fileno(), offset, COPY_BLOCK)
                except OSError as exc:
                    if offset or exc.errno not in _NO_SENDFILE:
                        raise
                    kernel = False  # (not to a file on this system): copied through a buffer
                    continue
                if not sent:
                    return
                offset += sent
                continue
            block = src.read(COPY_BLOCK)
            if not block:
                return
            dst.write(block)


def check_exists(path: str | os.PathLike[str]) -> Path:
    """``Path(path)``, raising a one-line :class:`FileNotFoundError` when it is not a file."""
    p = Path(path)
    try:
        p.stat()
    except PermissionError:
        raise PermissionError(f"{p}: permission denied (cannot reach the file)") from None
    except OSError:
        raise FileNotFoundError(f"{p}: no such file") from None
    if p.is_dir():
        raise FileFormatError(f"{p}: is a directory, not a jet file")
    if not p.is_file():  # reading a FIFO would block, a device would never end
        raise FileFormatError(f"{p}: not a regular file (a pipe, socket or device)")
    if not os.access(p, os.R_OK):
        raise PermissionError(f"{p}: permission denied (cannot read the file)")
    return p


def provenance(
    *, seed: int | None = None, command: str | None = None, **extra: Any
) -> dict[str, Any]:
    """Provenance attributes: jetastar version, creation date (UTC ISO 8601), command, seed.

    Args:
        seed: the generator seed, if any.
        command: the command line (default: this process's ``sys.argv``).
        **extra: further JSON-serialisable entries.

    Example:
        >>> provenance(seed=3)["seed"]
        3
    """
    if command is None:
        command = shlex.join([Path(sys.argv[0]).name, *sys.argv[1:]]) if sys.argv else ""
    out: dict[str, Any] = {
        "jetastar_version": __version__,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": command,
        "seed": -1 if seed is None else int(seed),
    }
    out.update(extra)
    return out


def writer_meta(attrs: Mapping[str, Any] | None, **first: Any) -> dict[str, Any]:
    """The metadata a writer records: ``first``, then :func:`provenance`, then ``attrs`` (an entry
    replaces one of the same name before it).

    Example:
        >>> meta = writer_meta({"seed": 3}, format="jetastar")
        >>> list(meta)[0], meta["seed"]
        ('format', 3)
    """
    meta = dict(first)
    meta.update(provenance())
    meta.update(dict(attrs or {}))
    return meta


def file_content(jets: bool) -> str:
    """The ``content`` entry of a file's metadata: ``"jets+results"`` for a file with its jets,
    else ``"results"``."""
    return "jets+results" if jets else "results"


def get_extras(collection: JetCollection) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Extra columns of a collection: ``(per_node, per_jet)`` name -> array (copies of the dicts).

    They live in ``collection.node_columns`` / ``collection.jet_columns`` (e.g. the nominal
    ``deltas`` of legacy Ginkgo pickles) and follow the collection's node / jet order.
    """
    return dict(collection.node_columns), dict(collection.jet_columns)


def set_extras(
    collection: JetCollection,
    node: dict[str, Any] | None = None,
    jet: dict[str, Any] | None = None,
) -> JetCollection:
    """Replace the extra per-node / per-jet columns of ``collection`` (in place; returned).

    Raises:
        ValueError: if a column's length does not match the nodes / jets.
    """
    collection.node_columns = {}
    collection.jet_columns = {}
    return collection.with_columns(node, jet)


def jet_slice(collection: JetCollection, start: int, stop: int) -> JetCollection:
    """Jets ``start:stop`` of a collection, with their extra columns."""
    return collection.take(np.arange(start, stop))


def take_with_extras(collection: JetCollection, indices: Any) -> JetCollection:
    """``collection.take(indices)`` (extra columns included)."""
    return collection.take(indices)


#: What a reader says after a bad jet's problem: how to read such jets anyway (a results file keeps
#: the jets its run recorded as failed, e.g. one-particle jets found in events).
_READ_HINT = (" (validate=False reads such jets as they are; a file of a run's results keeps the "
              "jets the run recorded as failed)")


def validate_columns(collection: JetCollection, path: str, offset: int = 0) -> None:
    """Fast (vectorised) checks of every jet of a collection read from ``path``.

    Checks: at least 2 leaves, finite leaf 4-vectors, positive energies, no clearly spacelike leaf,
    a truth tree of ``2n - 1`` nodes (or none), finite positive parameters.

    Raises:
        InvalidJetInFileError: for the first bad jet, naming file, entry, jet id and field.
    """
    n_leaves = collection.n_leaves
    ids = collection.jet_id

    def fail(i: int, field: str, msg: str) -> None:
        raise InvalidJetInFileError(
            msg + _READ_HINT, path=path, entry=int(i) + offset, jet=int(ids[i]), field=field
        )

    bad = first_leaf_problem(collection.leaves, collection.leaf_offsets)
    if bad is not None:
        field = {"non-finite": f"leaves.{bad.component}", "non-positive energy": "leaves.E"}
        fail(bad.jet, field.get(bad.kind, "leaves"), bad.message("leaf"))
    n_nodes = np.diff(collection.node_offsets)
    wrong = np.flatnonzero((n_nodes != 0) & (n_nodes != 2 * n_leaves - 1))
    if wrong.size:
        i = int(wrong[0])
        fail(i, "tree", f"the truth tree has {int(n_nodes[i])} nodes, "
             f"a binary tree over {int(n_leaves[i])} leaves has {2 * int(n_leaves[i]) - 1}")
    for name in ("lam", "lam_root", "t_cut", "t_root", "m_hard"):
        v = collection.params[name]
        badp = np.flatnonzero(~(np.isfinite(v) & (v > 0)))
        if badp.size:
            i = int(badp[0])
            fail(i, f"params.{name}", f"must be finite and > 0, got {v[i]}")
    rm = collection.params["root_momentum"]
    badr = np.flatnonzero(~np.all(np.isfinite(rm), axis=1)) if rm.size else np.empty(0, np.int64)
    if badr.size:
        i = int(badr[0])
        fail(i, "params.root_momentum", f"has non-finite values {rm[i].tolist()}")


def selected_jets(collection: JetCollection, path: str | os.PathLike[str], start: int,
                  take: np.ndarray | None, validate: bool) -> JetCollection:
    """What a reader returns of the jets it read for a selection (:func:`normalise_selection`):
    ``collection``, the file's jets from ``start`` on, checked (:func:`validate_columns`) when
    ``validate``, then the positions ``take`` of it (if any)."""
    if validate:
        validate_columns(collection, str(path), offset=start)
    if take is not None:
        collection = take_with_extras(collection, take)
    return collection


# ---------------------------------------------------------------------- selections
def normalise_selection(jets: Any, n: int) -> tuple[int, int, np.ndarray | None]:
    """``(start, stop, take)``: read rows ``start:stop``, then (optionally) take positions.

    Args:
        jets: ``None`` (all), a slice, an index or an array of positions (negative ones count
            from the end).
        n: the number of jets in the file.

    Raises:
        IndexError: for positions out of range.

    Example:
        >>> normalise_selection(slice(2, 5), 10), normalise_selection(-1, 10)
        ((2, 5, None), (9, 10, None))
    """
    if jets is None:
        return 0, n, None
    if isinstance(jets, slice):
        start, stop, step = jets.indices(n)
        if step == 1:
            return start, max(start, stop), None
        idx = np.arange(start, stop, step)
    elif isinstance(jets, (int, np.integer)):
        i = int(jets) + (n if int(jets) < 0 else 0)
        if not 0 <= i < n:
            raise IndexError(f"jet {jets} out of range for {n} jets")
        return i, i + 1, None
    else:
        idx = np.asarray(jets, dtype=np.int64).ravel()
        idx = np.where(idx < 0, idx + n, idx)
        if idx.size and (idx.min() < 0 or idx.max() >= n):
            raise IndexError(f"jet indices out of range for {n} jets")
    if idx.size == 0:
        return 0, 0, idx
    lo, hi = int(idx.min()), int(idx.max()) + 1
    return lo, hi, idx - lo


def rows_for(jet_index: np.ndarray, jets: Any) -> np.ndarray:
    """Rows of a results table whose ``jet_index`` is among the selected jets (slice or array).

    Example:
        >>> import numpy as np
        >>> rows_for(np.array([4, 0, 7]), slice(0, 5)).tolist()
        [0, 1]
    """
    if isinstance(jets, slice):
        start = 0 if jets.start is None else jets.start
        stop = np.iinfo(np.int64).max if jets.stop is None else jets.stop
        return np.flatnonzero((jet_index >= start) & (jet_index < stop))
    wanted = np.asarray(jets, dtype=np.int64).ravel()
    return np.flatnonzero(np.isin(jet_index, wanted))


# ---------------------------------------------------------------------- metadata both writers record
def generator_params(collection: JetCollection) -> list[dict[str, Any]]:
    """The distinct parameter sets of a collection (for the ``generator_params`` attribute).

    Jets of one model (same λ, λ_R, t_cut and type) whose root mass and 4-vector differ from jet to
    jet — measured jets, whose root is the sum of their particles — give one set with
    ``"per_jet"`` naming those columns instead of one set per jet.
    """
    n = len(collection)
    if n == 0:
        return []
    prm = collection.params
    model = np.stack([prm["lam"], prm["lam_root"], prm["t_cut"]], axis=1)
    types = np.asarray([str(t) for t in collection.jet_type], dtype=object)
    kin = np.concatenate([np.stack([prm["m_hard"], prm["t_root"]], axis=1),
                          prm["root_momentum"]], axis=1)
    out: list[dict[str, Any]] = []
    seen: dict[tuple[Any, ...], list[int]] = {}
    for i in range(n):
        seen.setdefault((*model[i].tolist(), types[i]), []).append(i)
    for key, rows in seen.items():
        base = {"lam": key[0], "lam_root": key[1], "t_cut": key[2]}
        sub = kin[rows]
        distinct = np.unique(np.nan_to_num(sub, nan=-1.0), axis=0)
        if distinct.shape[0] > 2:
            out.append({**base, "jet_type": key[3], "per_jet": "m_hard, t_root, root_momentum "
                        "(each jet's own: its measured mass and 4-vector)"})
            continue
        for d in distinct:
            k = int(np.flatnonzero(np.all(np.nan_to_num(sub, nan=-1.0) == d, axis=1))[0])
            i = rows[k]
            out.append({
                "m_hard": float(prm["m_hard"][i]), **base, "t_root": float(prm["t_root"][i]),
                "root_momentum": [float(x) for x in prm["root_momentum"][i]],
                "jet_type": key[3],
            })
    return out


def entry_range(meta: Mapping[str, Any]) -> tuple[int, int] | None:
    """The input entries a particle-file run read (``meta["particles"]``), if recorded."""
    src = meta.get("particles")
    if isinstance(src, str):
        src = json.loads(src)
    if isinstance(src, Mapping) and src.get("entry_start") is not None \
            and src.get("entry_stop") is not None:
        return int(src["entry_start"]), int(src["entry_stop"])
    return None


class GeneratorParamsStream:
    """:func:`generator_params` of a collection fed in consecutive blocks of jets (the same list
    as for the whole collection, in memory bounded by the number of distinct parameter sets).

    Example:
        >>> from jetastar.ginkgo import ShowerParams, generate
        >>> jets = generate(6, ShowerParams.qcd(), seed=1)
        >>> stream = GeneratorParamsStream()
        >>> stream.add(jets.take(np.arange(3))); stream.add(jets.take(np.arange(3, 6)))
        >>> stream.result() == generator_params(jets)
        True
    """

    def __init__(self) -> None:
        # key -> (first row, {kin row with NaN as -1: (m_hard, t_root, root_momentum)} or None
        # once more than two distinct kinematics were seen)
        self._keys: dict[tuple[Any, ...], tuple[int, dict[tuple[float, ...], Any] | None]] = {}
        self._n = 0

    def add(self, collection: JetCollection) -> None:
        """Take the next jets (in file order)."""
        n = len(collection)
        if n == 0:
            return
        prm = collection.params
        model = np.stack([prm["lam"], prm["lam_root"], prm["t_cut"]], axis=1)
        types = np.asarray([str(t) for t in collection.jet_type], dtype=object)
        kin = np.concatenate([np.stack([prm["m_hard"], prm["t_root"]], axis=1),
                              prm["root_momentum"]], axis=1)
        kin_key = np.nan_to_num(kin, nan=-1.0)
        groups: list[tuple[int, tuple[Any, ...], np.ndarray]] = []
        bad = np.isnan(model).any(axis=1)
        for i in np.flatnonzero(bad).tolist():  # a NaN key is never equal to another: one each
            groups.append((i, (*model[i].tolist(), types[i]), np.array([i])))
        good = np.flatnonzero(~bad)
        if good.size:
            names, code = np.unique(types[good].astype(str), return_inverse=True)
            keyed = np.concatenate([model[good], code.reshape(-1, 1).astype(np.float64)], axis=1)
            _, first, inverse = np.unique(keyed, axis=0, return_index=True, return_inverse=True)
            inverse = inverse.reshape(-1)
            order = np.argsort(inverse, kind="stable")
            bounds = np.searchsorted(inverse[order], np.arange(first.shape[0] + 1))
            for g, f in enumerate(first.tolist()):
                rows = good[order[bounds[g]:bounds[g + 1]]]
                i = int(good[f])
                groups.append((i, (*model[i].tolist(), str(names[code[f]])), rows))
        groups.sort(key=lambda t: t[0])
        for i, key, rows in groups:
            first_row, seen = self._keys.setdefault(key, (self._n + i, {}))
            if seen is None:
                continue
            distinct, where = np.unique(kin_key[rows], axis=0, return_index=True)
            for d, w in zip(distinct.tolist(), where.tolist(), strict=True):
                r = int(rows[w])
                seen.setdefault(tuple(d), (float(prm["m_hard"][r]), float(prm["t_root"][r]),
                                           [float(x) for x in prm["root_momentum"][r]]))
            if len(seen) > 2:
                self._keys[key] = (first_row, None)
        self._n += n

    def result(self) -> list[dict[str, Any]]:
        """The parameter sets of every jet taken so far (:func:`generator_params`)."""
        out: list[dict[str, Any]] = []
        for key, (_, seen) in sorted(self._keys.items(), key=lambda kv: kv[1][0]):
            base = {"lam": key[0], "lam_root": key[1], "t_cut": key[2]}
            if seen is None:
                out.append({**base, "jet_type": key[3], "per_jet": "m_hard, t_root, root_momentum "
                            "(each jet's own: its measured mass and 4-vector)"})
                continue
            for d in np.unique(np.array(list(seen), dtype=np.float64), axis=0).tolist():
                m_hard, t_root, momentum = seen[tuple(d)]
                out.append({"m_hard": m_hard, **base, "t_root": t_root,
                            "root_momentum": momentum, "jet_type": key[3]})
        return out
