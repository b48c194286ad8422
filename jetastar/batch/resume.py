"""The part-file and resume protocol of a batch run: how a killed run picks up where it stopped.

This module is the one place that defines it; :mod:`jetastar.batch.runner` follows it and
:mod:`jetastar.batch.merge` ends it.

**Part files.** An input is clustered in chunks of ``chunk_size`` jets (positions ``start:stop``
in the input's jets). The results of a chunk, one table per algorithm, are written atomically to
``<output>.parts/part-<start>-<stop>.h5`` (both numbers with ten digits) next to the output file,
so a part is either complete or absent: it is written under a temporary name, flushed to disk
(fsync) and only then renamed, by a background thread of the master (:class:`PartWriter`), so the
chunk loop never waits for the disk. A part holds results only, uncompressed and compact
(:func:`write_part`), so the part folder is smaller than the output. The part folder also holds
``manifest.json``, written before any part: the input's identity (below), its number of jets,
the settings of the run
(:meth:`BatchConfig.fingerprint <jetastar.batch.BatchConfig.fingerprint>`: algorithms, options,
time limit, size limits, chunk size) and, for particle files, how they are read. Only the master
process writes; workers return results and need no shared file system.

**What identifies an input.** Its path (resolved), size and modification time, and a SHA-256 of
its content (:func:`input_identity`): for jetastar files a hash of the jets
(:func:`jets_digest`: 4-vectors, offsets, truth trees, ids, seeds, types, parameters — equal for
equal jets, whatever the format, compression or creation date); for particle files, whose jets
are only found while clustering, a hash of the file's bytes (:func:`file_digest`). Each source
(:class:`~jetastar.batch.JetSource`) says which with its ``digest`` method. A finished output and
a part folder also record the input's file state (:func:`file_state`: device, inode, size,
modification and change times, taken before the hash; ``input_state``): a later run whose input
still has that state takes the recorded hash instead of reading the whole input again
(:func:`recorded_digest`; anything done to a file changes its change time, which no user can
set). A state is recorded only when the file last changed :data:`SETTLED_NS` or more before it
was taken (:func:`settled_state`).

**When a run resumes.** Rerun with the same arguments, a run

* skips an input whose output is already complete (:func:`is_complete_output`: same identity, same
  settings — the chunk size aside — and every algorithm with a row per jet); ``fresh=True``
  (``--fresh``) recomputes it;
* refuses to replace a finished output of this input written by a run with other settings
  (other algorithms, options, time limit, ``t_cut``, mass policy...; :func:`output_differences`): the
  ``BatchError`` lists the differences; write to another output, or pass ``fresh=True``
  (``--fresh``) to replace it;
* otherwise reuses the part folder when its manifest matches in every field but the jetastar
  version (:func:`prepare_parts`): the chunks whose part file can be read and holds every
  algorithm are kept, damaged parts are deleted and computed again (:func:`done_parts`);
* refuses a part folder written with other settings (``BatchError``: rerun with the same
  settings, or ``--fresh`` to discard it), and discards one whose manifest was never completely
  written (nothing in it can be trusted);
* removes the temporary files of killed writes (:func:`jetastar._atomic.remove_stale_temporaries`).

**How parts are merged.** When every chunk of an input is done,
:func:`~jetastar.batch.merge.merge_parts` reads the parts in order, checks that every jet appears
exactly once in the results of every algorithm (gaps and duplicates are an error), checks that the
input still has the content hash taken at the start (a changed input is an error: rerun with
``--fresh``), writes the output — the input's jets, one results table per algorithm, the input's
identity (``input_identity``) and the settings (``batch``) — atomically, and removes the part
folder. So after any kill and a rerun, every jet is processed exactly once.

Example:
    >>> import numpy as np
    >>> from jetastar import Jet, JetCollection
    >>> jets = JetCollection.from_jets([Jet(np.array([[10.0, 0, 0, 9.0], [10.0, 0, 0, -9.0]]))])
    >>> len(jets_digest(jets))
    64
    >>> part_name(0, 50), parse_part(part_name(0, 50))
    ('part-0000000000-0000000050.h5', (0, 50))
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import queue
import shutil
import threading
import time as _time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .. import __version__, io
from .._atomic import atomic_path, atomic_write_text, remove_stale_temporaries
from .._progress import progress_bar
from ..errors import BatchError, JetastarError
from ..io.formats import ColumnReader
from ..io.hdf5 import read_hdf5_results
from ..io.schema import PARAM_COLUMNS
from ..result_tables import AlgorithmResults, to_json, unit_options
from .config import BatchConfig

__all__ = [
    "PART_DIR_SUFFIX",
    "SETTLED_NS",
    "ChunkPlan",
    "PartWriter",
    "done_parts",
    "file_digest",
    "file_state",
    "input_identity",
    "is_complete_output",
    "jets_digest",
    "manifest_for",
    "output_differences",
    "parse_part",
    "part_counters",
    "part_name",
    "parts_dir",
    "prepare_parts",
    "read_manifest",
    "read_part",
    "readable_part",
    "recorded_digest",
    "result_of_another_file",
    "same_identity",
    "settled_state",
    "stream_jets_digest",
    "write_part",
]

#: the part folder of ``<output>`` is ``<output>.parts``
PART_DIR_SUFFIX = ".parts"

_BLOCK = 1 << 20


# ---------------------------------------------------------------------- input identity
def _feed(h: Any, name: str, arr: Any) -> None:
    a = np.ascontiguousarray(arr)
    h.update(f"{name}:{a.dtype.str}:{a.shape}:".encode())
    h.update(a.tobytes())


def jets_digest(collection: Any) -> str:
    """SHA-256 (hex) of the jets of a :class:`~jetastar.JetCollection`.

    Args:
        collection: the jets.

    Returns:
        64 hex digits; equal for equal jets.
    """
    h = hashlib.sha256(b"jetastar-jets-v1\n")
    _feed(h, "leaves", np.asarray(collection.leaves, dtype=np.float64))
    for name in ("leaf_offsets", "children", "leaf_of_node", "node_offsets", "jet_id", "seed"):
        _feed(h, name, np.asarray(getattr(collection, name), dtype=np.int64))
    for name in sorted(collection.params):
        _feed(h, f"params.{name}", np.asarray(collection.params[name], dtype=np.float64))
    h.update("\x1f".join(str(t) for t in collection.jet_type).encode("utf-8", "surrogatepass"))
    return h.hexdigest()


#: jets per read of :func:`stream_jets_digest`
DIGEST_BLOCK = 100_000


def stream_jets_digest(columns: ColumnReader, n_jets: int, block: int = DIGEST_BLOCK) -> str:
    """:func:`jets_digest` of a file's jets, read column by column in blocks of ``block`` jets
    (memory bounded by one block's column, whatever the number of jets).

    Args:
        columns: the file (:func:`jetastar.io.dispatch.columns`).
        n_jets: its number of jets.
        block: jets per read.

    Returns:
        The same 64 hex digits as :func:`jets_digest` of the whole collection.
    """
    ranges = [(a, min(n_jets, a + block)) for a in range(0, n_jets, block)]

    def blocks(name: str) -> Iterator[np.ndarray]:
        for a, b in ranges:
            yield columns.read([name], a, b)[name]

    m = k = 0
    for a, b in ranges:
        got = columns.read(["leaf_offsets", "node_offsets"], a, b)
        m += int(got["leaf_offsets"][-1])
        k += int(got["node_offsets"][-1])
    h = hashlib.sha256(b"jetastar-jets-v1\n")

    def feed(name: str, shape: tuple[int, ...], dtype: Any, parts: Iterator[np.ndarray]) -> None:
        h.update(f"{name}:{np.dtype(dtype).str}:{tuple(int(x) for x in shape)}:".encode())
        for part in parts:
            h.update(np.ascontiguousarray(part, dtype=dtype).tobytes())

    def offsets(name: str) -> Iterator[np.ndarray]:
        base = 0
        yield np.zeros(1, np.int64)
        for part in blocks(name):
            yield part[1:] + base
            base += int(part[-1])

    feed("leaves", (m, 4), np.float64, blocks("leaves"))
    feed("leaf_offsets", (n_jets + 1,), np.int64, offsets("leaf_offsets"))
    feed("children", (k, 2), np.int64, blocks("children"))
    feed("leaf_of_node", (k,), np.int64, blocks("leaf_of_node"))
    feed("node_offsets", (n_jets + 1,), np.int64, offsets("node_offsets"))
    for name in ("jet_id", "seed"):
        feed(name, (n_jets,), np.int64, blocks(name))
    for name in sorted([*PARAM_COLUMNS, "root_momentum"]):
        shape = (n_jets, 4) if name == "root_momentum" else (n_jets,)
        feed(f"params.{name}", shape, np.float64, blocks(f"params.{name}"))
    first = True
    for part in blocks("jet_type"):
        text = "\x1f".join(str(t) for t in part)
        if len(part):
            h.update(("" if first else "\x1f").encode() + text.encode("utf-8", "surrogatepass"))
            first = False
    return h.hexdigest()


def file_digest(path: str | os.PathLike[str]) -> str:
    """SHA-256 (hex) of a file's bytes (for inputs whose jets are only found while clustering)."""
    h = hashlib.sha256(b"jetastar-file-v1\n")
    with open(path, "rb") as fh:
        while block := fh.read(_BLOCK):
            h.update(block)
    return h.hexdigest()


def input_identity(path: str | os.PathLike[str], digest: str) -> dict[str, Any]:
    """``{"path", "size", "mtime_ns", "sha256"}`` of an input file.

    Args:
        path: the input.
        digest: the content hash (:func:`jets_digest` or :func:`file_digest`).
    """
    p = Path(path)
    st = p.stat()
    return {"path": os.fsdecode(p.resolve()), "size": int(st.st_size),
            "mtime_ns": int(st.st_mtime_ns), "sha256": str(digest)}


def file_state(path: str | os.PathLike[str]) -> tuple[int, ...]:
    """What the file system says of a file: device, inode, size, modification and change times.

    Any write to the file, and any change of its times, changes the change time (``st_ctime_ns``,
    which no user can set): a file whose state is unchanged still has the content hashed after
    the state was taken, and need not be hashed again. The file is opened for it, so that a
    network file system checks its cached attributes with the server (close-to-open
    consistency) instead of answering from a cache that may predate a write on another node.

    Args:
        path: the file.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        st = os.fstat(fd)
    finally:
        os.close(fd)
    return (int(st.st_dev), int(st.st_ino), int(st.st_size), int(st.st_mtime_ns),
            int(st.st_ctime_ns))


#: a file's state is recorded for later runs (:func:`settled_state`) only when the file last
#: changed this long before the state was taken: a write in the same tick of a coarse file-system
#: clock (a second or two on some) could leave the state as it was
SETTLED_NS = 3_000_000_000

_STATE_FIELDS = ("dev", "ino", "size", "mtime_ns", "ctime_ns")


def settled_state(state: tuple[int, ...], now_ns: int | None = None) -> dict[str, int] | None:
    """A file's :func:`file_state`, taken before its hash, as an output's attributes and a part
    folder's manifest record it (``input_state``) for :func:`recorded_digest`; ``None`` when the
    file changed less than :data:`SETTLED_NS` before ``now_ns`` (default: now): a later run then
    hashes it again.

    Example:
        >>> settled_state((1, 2, 3, 4, 5), now_ns=10_000_000_000)
        {'dev': 1, 'ino': 2, 'size': 3, 'mtime_ns': 4, 'ctime_ns': 5}
        >>> settled_state((1, 2, 3, 4, 9_000_000_000), now_ns=10_000_000_000) is None
        True
    """
    now = _time.time_ns() if now_ns is None else now_ns
    if not state[4] < now - SETTLED_NS:
        return None
    return dict(zip(_STATE_FIELDS, (int(v) for v in state), strict=True))


def recorded_digest(path: str | os.PathLike[str], state: tuple[int, ...], identity: Any,
                    recorded_state: Any) -> str | None:
    """The content hash an earlier run recorded for the file at ``path`` (``identity``: the
    ``input_identity`` of its output, or its part folder's manifest), when the file's state is
    still the one that run recorded (``recorded_state``, of :func:`settled_state`): nothing has
    written to the file since, or its change time, which no user can set, would differ. The
    file need not be hashed again. ``None`` otherwise (no record, another file, or a file
    changed since).

    Args:
        path: the input file.
        state: its :func:`file_state` now.
        identity: the recorded identity (a dict or its JSON text) with ``path`` and ``sha256``
            (a manifest names the file ``input``).
        recorded_state: the recorded ``input_state`` (a dict or its JSON text).
    """
    identity = _json_attr(identity)
    recorded_state = _json_attr(recorded_state)
    if not (isinstance(identity, dict) and isinstance(recorded_state, dict)):
        return None
    if [recorded_state.get(k) for k in _STATE_FIELDS] != [int(v) for v in state]:
        return None
    where = identity.get("path", identity.get("input"))
    if where != os.fsdecode(Path(path).resolve()):
        return None
    digest = identity.get("sha256")
    return digest if isinstance(digest, str) and len(digest) == 64 else None


def same_identity(stored: Any, current: dict[str, Any]) -> bool:
    """Whether a stored identity (a dict, or its JSON text) matches ``current`` in every field."""
    if isinstance(stored, (bytes, str)):
        try:
            stored = json.loads(stored)
        except ValueError:
            return False
    if not isinstance(stored, dict):
        return False
    return all(stored.get(k) == v for k, v in current.items())


def result_of_another_file(info: dict[str, Any] | None, identity: dict[str, Any]) -> str | None:
    """The input a finished batch result was computed from, where that is another file than the
    one of ``identity`` (another path *and* another content): a result its owner may still want,
    never replaced silently. ``None`` otherwise: no batch result (``info``: the output's
    ``io.file_info(output, results=False)``), the same file, or the same path since regenerated
    (a stale result, computed again).

    Example:
        >>> result_of_another_file(None, {"path": "/a.h5", "sha256": "x"}) is None
        True
    """
    if info is None or "batch" not in info.get("attrs", {}):
        return None
    stored = _json_attr(info["attrs"].get("input_identity"))
    if not isinstance(stored, dict) or not stored.get("path"):
        return None
    if stored["path"] == identity.get("path") or stored.get("sha256") == identity.get("sha256"):
        return None
    return str(stored["path"])


# ---------------------------------------------------------------------- part files
def parts_dir(output: Path) -> Path:
    """The part folder of an output file: ``<output>.parts``."""
    return output.with_name(output.name + PART_DIR_SUFFIX)


def part_name(start: int, stop: int) -> str:
    """The file name of the part of chunk ``start:stop``."""
    return f"part-{start:010d}-{stop:010d}.h5"


def parse_part(name: str) -> tuple[int, int] | None:
    """The chunk ``(start, stop)`` of a part file name; ``None`` for other names."""
    if not (name.startswith("part-") and name.endswith(".h5")):
        return None
    try:
        a, b = name[5:-3].split("-")
        return int(a), int(b)
    except ValueError:
        return None


def _input_fingerprint(path: Path) -> dict[str, Any]:
    st = path.stat()
    return {"input": str(path.resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def manifest_for(inp: Path, n_jets: int, identity: dict[str, Any], config: BatchConfig,
                 reading: dict[str, Any],
                 input_state: dict[str, int] | None = None) -> dict[str, Any]:
    """The manifest of a part folder: input, size, time, number of jets, content hash, the run's
    settings and how the input is read; ``input_state``: the input's :func:`settled_state`
    (recorded, not compared: see :func:`recorded_digest`)."""
    manifest = {
        "jetastar_version": __version__, **_input_fingerprint(inp), "n_jets": n_jets,
        "sha256": identity["sha256"], **config.fingerprint(), **reading,
    }
    if input_state is not None:
        manifest["input_state"] = input_state
    return manifest


#: manifest entries that say how a part folder was written, not what it holds: the chunking
#: (parts of any chunking are reused, :class:`ChunkPlan`) and where and when the input was (its
#: content is ``sha256``)
_NOT_COMPARED = ("jetastar_version", "input_state", "chunk_size", "input", "size", "mtime_ns")
#: the manifest entry that says which input the parts are of: parts of another content are
#: stale (``n_jets`` is not one: the same file read with another entry range has other jets,
#: a change of settings that is refused, not a reason to drop finished parts)
_CONTENT_KEYS = ("sha256",)


def read_manifest(parts: Path) -> dict[str, Any] | None:
    """The manifest of a part folder, or ``None`` where there is none that can be read (no
    folder, or a manifest never written completely).

    Example:
        >>> read_manifest(Path("no-such-folder.parts")) is None
        True
    """
    try:
        manifest = json.loads((parts / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) else None


def prepare_parts(parts: Path, manifest: dict[str, Any], *,
                  progress: bool = False) -> set[tuple[int, int]]:
    """Create or check the part folder; return the chunks already done (``progress``: a bar over
    the part files checked, shown when that takes over 2 s).

    Raises:
        BatchError: a part folder of a run with other settings.
    """
    mpath = parts / "manifest.json"
    if parts.exists():
        remove_stale_temporaries(parts)
        old = read_manifest(parts)
        if old is None:
            # manifest never written completely: nothing in here can be trusted
            shutil.rmtree(parts)
        else:
            keys = [k for k in manifest if k not in _NOT_COMPARED]
            diff = [k for k in keys if unit_options(old.get(k)) != unit_options(manifest[k])]
            if any(k in diff for k in _CONTENT_KEYS):
                # parts of another (or a regenerated) input: stale, computed again
                shutil.rmtree(parts)
            elif diff and not any(parse_part(f.name) for f in parts.iterdir()):
                # a run that ended before its first chunk (a bad file, bad options): nothing
                # to keep, nothing to refuse
                shutil.rmtree(parts)
            elif diff:
                shown = "; ".join(f"{k}: {_show(old.get(k))} -> {_show(manifest[k])}"
                                  for k in diff)
                raise BatchError(
                    f"{parts}: part files of an interrupted run with different settings "
                    f"({shown}); rerun with the same settings, or pass --fresh to "
                    "discard them"
                )
    if not parts.exists():
        parts.mkdir(parents=True)
        atomic_write_text(mpath, to_json(manifest))
    return done_parts(parts, manifest.get("algorithms", []), progress=progress)


def done_parts(parts: Path, algorithms: Sequence[str] | None = None, *,
               progress: bool = False) -> set[tuple[int, int]]:
    """The chunks ``(start, stop)`` whose part file is in the folder; with ``algorithms``, only
    parts that can be read and hold all of them (damaged ones are removed). ``progress``: a bar
    over the files checked, shown when checking takes over 2 s (a resume is then not silent)."""
    done = set()
    if parts.is_dir():
        files = [(p, parse_part(p.name)) for p in parts.iterdir()]
        files = [(p, rng) for p, rng in files if rng is not None]
        show = progress and algorithms is not None
        with progress_bar(total=len(files), desc=f"checking finished parts in {parts.name}",
                          unit="part", show=show, delay=2.0) as bar:
            for p, rng in files:
                if algorithms is None or readable_part(p, algorithms):
                    done.add(rng)
                bar.update(1)
    return done


def readable_part(path: Path, algorithms: Sequence[str]) -> bool:
    """Whether a part file can be read and holds every algorithm; a damaged one (truncated by
    a disk error, edited) is removed so that its chunk is computed again."""
    try:
        tables = read_part(path)
        ok = all(name in tables for name in algorithms)
    except (JetastarError, OSError, ValueError, KeyError, RuntimeError, TypeError):
        ok = False
    if not ok:
        with contextlib.suppress(OSError):
            path.unlink()
    return ok


#: the ``format`` attribute of a part file (results only, uncompressed, small integer types,
#: texts stored once per distinct value); older part files are jetastar results files
_PART_FORMAT = "jetastar-part"
_PART_VERSION = 2


def _narrow(values: np.ndarray) -> np.ndarray:
    """Integers in the smallest signed type that holds them (read back as int64)."""
    a = np.asarray(values, dtype=np.int64)
    if a.size == 0:
        return a.astype(np.int8)
    lo, hi = int(a.min()), int(a.max())
    for t in (np.int8, np.int16, np.int32):
        info = np.iinfo(t)
        if info.min <= lo and hi <= info.max:
            return a.astype(t)
    return a


def _codes(values: Sequence[Any]) -> tuple[np.ndarray, list[str]]:
    """Texts as codes into their distinct values (in order of first appearance)."""
    memo: dict[str, int] = {}
    codes = [memo.setdefault(str(v), len(memo)) for v in values]
    return _narrow(np.asarray(codes, dtype=np.int64)), list(memo)


def write_part(parts: Path, start: int, stop: int, tables: dict[str, AlgorithmResults]) -> None:
    """Write the results of chunk ``start:stop`` atomically into the part folder.

    A part holds results only (the merge takes the jets from the input), uncompressed (it is
    read once), with integers in the smallest type that holds them and each distinct text once:
    the part folder stays smaller than the output. Like every atomic write, the file is on disk
    (fsync) before it gets its final name, so a part that exists under its name is complete.
    """
    import h5py

    # built in memory and written with one write(): a full disk is a clean OSError, never a
    # crash inside HDF5
    with h5py.File(f"part-{start}", "w", driver="core", backing_store=False) as f:
        _fill_part(f, start, stop, tables)
        f.flush()
        image = f.id.get_file_image()
    with atomic_path(parts / part_name(start, stop)) as tmp, open(tmp, "wb") as fh:
        fh.write(image)


def _fill_part(f: Any, start: int, stop: int, tables: dict[str, AlgorithmResults]) -> None:
    import h5py

    f.attrs["format"] = _PART_FORMAT
    f.attrs["part_version"] = _PART_VERSION
    f.attrs["chunk_start"] = start
    f.attrs["chunk_stop"] = stop
    for label, t in tables.items():
        g = f.create_group(label.replace("/", "_"))
        g.attrs["label"] = label
        g.attrs["algorithm"] = t.algorithm
        g.attrs["likelihood"] = t.likelihood
        g.attrs["exact_method"] = bool(t.exact_method)
        g.attrs["n_rows"] = len(t)
        g.attrs["counters"] = json.dumps(sorted(t.counters))
        for k in ("jet_index", "jet_id", "node_offsets", "leaf_of_node"):
            g.create_dataset(k, data=_narrow(getattr(t, k)))
        g.create_dataset("children", data=_narrow(t.children))
        for k in ("log_likelihood", "log_z", "upper_bound", "n_trees", "time_s"):
            g.create_dataset(k, data=np.asarray(getattr(t, k), dtype=np.float64))
        g.create_dataset("exact", data=np.asarray(t.exact, dtype=np.uint8))
        for k in ("status", "message", "options"):
            codes, values = _codes(getattr(t, k))
            g.create_dataset(f"{k}_code", data=codes)
            g.create_dataset(f"{k}_values", data=np.array(values, dtype=object),
                             dtype=h5py.string_dtype("utf-8"))
        for k, v in t.counters.items():
            g.create_dataset(f"counter_{k}", data=np.asarray(v, dtype=np.float64))


def read_part(path: Path, algorithms: Sequence[str] | None = None) -> dict[str, AlgorithmResults]:
    """The tables of a part file (only ``algorithms``, when given): label -> table.

    Raises:
        JetastarError, OSError, ValueError, KeyError: an unreadable or incomplete part.
    """
    import h5py

    with h5py.File(path, "r") as f:
        if f.attrs.get("format") == _PART_FORMAT:
            groups = {str(g.attrs["label"]): g for g in f.values()}
            return {label: _read_part_table(groups[label])
                    for label in (groups if algorithms is None else algorithms) if label in groups}
    return read_hdf5_results(path, algorithms)  # a part of an older jetastar


def _read_part_table(g: Any) -> AlgorithmResults:
    def ints(k: str) -> np.ndarray:
        return g[k][()].astype(np.int64)

    def texts(k: str) -> np.ndarray:
        values = np.array([v.decode("utf-8") if isinstance(v, bytes) else str(v)
                           for v in g[f"{k}_values"][()]], dtype=object)
        return values[ints(f"{k}_code")]

    n = int(g.attrs["n_rows"])
    counters = {k: g[f"counter_{k}"][()] for k in json.loads(g.attrs["counters"])}
    table = AlgorithmResults(
        str(g.attrs["algorithm"]), jet_index=ints("jet_index"), jet_id=ints("jet_id"),
        log_likelihood=g["log_likelihood"][()], exact=g["exact"][()].astype(bool),
        log_z=g["log_z"][()], upper_bound=g["upper_bound"][()], n_trees=g["n_trees"][()],
        time_s=g["time_s"][()], status=texts("status"), message=texts("message"),
        options=texts("options"), node_offsets=ints("node_offsets"),
        children=ints("children").reshape(-1, 2), leaf_of_node=ints("leaf_of_node"),
        counters=counters, likelihood=str(g.attrs["likelihood"]),
        exact_method=bool(g.attrs["exact_method"]),
    )
    if len(table) != n:
        raise ValueError(f"{g.file.filename}: {n} rows expected, {len(table)} found")
    return table


def part_counters(path: Path) -> set[str]:
    """The counter names of every table of a part file (read from its attributes only)."""
    import h5py

    with h5py.File(path, "r") as f:
        if f.attrs.get("format") != _PART_FORMAT:
            return {k for t in read_hdf5_results(path).values() for k in t.counters}
        return {k for g in f.values() for k in json.loads(g.attrs["counters"])}


class PartWriter:
    """Writes part files in a background thread, so that the loop handing out chunks never waits
    for a part to be written and flushed to disk (the atomic write's fsync).

    Parts are written in the order given, each with ``write(parts, start, stop, tables)`` (a
    complete file under its final name, or nothing). The first error of a write is raised by the
    next :meth:`put` or by :meth:`flush`, and no part after it is written.

    Args:
        write: the function writing one part (:func:`write_part`).
        max_queued: parts waiting at most (``put`` blocks beyond: memory stays bounded).

    Example:
        >>> import tempfile
        >>> written = []
        >>> with PartWriter(lambda *a: written.append(a[1:3])) as w:
        ...     w.put(Path("."), 0, 5, {}); w.put(Path("."), 5, 9, {})
        >>> written
        [(0, 5), (5, 9)]
    """

    def __init__(self, write: Callable[[Path, int, int, dict[str, AlgorithmResults]], None],
                 max_queued: int = 2) -> None:
        self._write = write
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=max_queued)
        self._error: BaseException | None = None
        self.written = 0
        self._thread = threading.Thread(target=self._run, name="jetastar-part-writer",
                                        daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is None:
                    return
                if self._error is None:
                    self._write(*item)
                    self.written += 1
            except BaseException as exc:  # raised again in the main thread
                self._error = exc
            finally:
                self._queue.task_done()

    def _check(self) -> None:
        if self._error is not None:
            raise self._error

    def put(self, parts: Path, start: int, stop: int, tables: dict[str, AlgorithmResults]) -> None:
        """Queue the part of chunk ``start:stop`` (raises the error of an earlier write)."""
        self._check()
        self._queue.put((parts, start, stop, tables))

    def flush(self) -> None:
        """Wait until every queued part is written (raises the error of a write)."""
        self._queue.join()
        self._check()

    def close(self) -> None:
        """Write what is queued and stop the thread (errors are left to :meth:`flush`)."""
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()

    def __enter__(self) -> PartWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if exc[0] is None:
                self.flush()
        finally:
            self.close()


#: seconds of work per chunk that :class:`ChunkPlan` aims at when it sizes chunks by their cost
CHUNK_SECONDS = 2.0
#: the largest chunk :class:`ChunkPlan` makes (jets; bounds the memory of the chunks in flight)
MAX_CHUNK = 20_000


class ChunkPlan:
    """The chunks of an input still to cluster: the gaps between its finished parts, cut into
    chunks of a fixed size or, with ``adaptive``, of the size whose measured cost is about
    :data:`CHUNK_SECONDS` of work.

    Finished parts are reused when they do not overlap (the first by position wins), whatever
    chunking made them, so a resume with another chunking is still exact: the merge takes
    :attr:`chunks`, the kept parts and the new chunks, which cover every jet once.

    Args:
        n_jets: the input's jets.
        done: chunks whose part file is complete (:func:`done_parts`).
        size: jets per chunk (``adaptive``: the first chunks' size).
        adaptive: size later chunks by the cost of the finished ones (:meth:`record`).
        n_workers: processes clustering at once (the last chunks are cut so that all get work).
        costs: with ``adaptive``, each jet's estimated seconds (e.g. of an exact method, which
            grow ×3 a leaf): a chunk also ends before its estimates add up to more than
            :data:`CHUNK_SECONDS` (at least one jet), so that a few costly jets are chunks of
            their own: an interrupted run keeps them, and the bar moves.

    Example:
        >>> plan = ChunkPlan(10, {(0, 4)}, 3)
        >>> plan.kept, [plan.next() for _ in range(3)], plan.chunks
        ([(0, 4)], [(4, 7), (7, 10), None], [(0, 4), (4, 7), (7, 10)])
        >>> costs = np.array([0.1, 0.1, 5.0, 0.1, 0.1, 0.1])  # jet 2: an estimated 5 s
        >>> plan = ChunkPlan(6, set(), 50, adaptive=True, costs=costs)
        >>> [plan.next() for _ in range(4)]
        [(0, 2), (2, 3), (3, 6), None]
    """

    def __init__(self, n_jets: int, done: set[tuple[int, int]] | Sequence[tuple[int, int]],
                 size: int, *, adaptive: bool = False, n_workers: int = 1,
                 costs: np.ndarray | None = None) -> None:
        self._cumulative = None
        if adaptive and costs is not None and len(costs) == n_jets:
            self._cumulative = np.concatenate([[0.0], np.cumsum(costs, dtype=np.float64)])
        self.kept: list[tuple[int, int]] = []
        end = 0
        for a, b in sorted(done):
            if a >= end and a < b <= n_jets:
                self.kept.append((a, b))
                end = b
        self._gaps: list[tuple[int, int]] = []
        cursor = 0
        for a, b in [*self.kept, (n_jets, n_jets)]:
            if a > cursor:
                self._gaps.append((cursor, a))
            cursor = b
        self.size = max(1, int(size))
        self.adaptive = adaptive
        self.n_workers = max(1, n_workers)
        self.made: list[tuple[int, int]] = []
        self._jets = 0
        self._seconds = 0.0

    @property
    def remaining(self) -> int:
        """Jets not yet handed out."""
        return sum(b - a for a, b in self._gaps)

    @property
    def chunks(self) -> list[tuple[int, int]]:
        """Every chunk of the input, in order: the kept parts and those handed out."""
        return sorted(self.kept + self.made)

    def next(self) -> tuple[int, int] | None:
        """The next chunk to cluster (``None``: none left)."""
        if not self._gaps:
            return None
        a, b = self._gaps[0]
        size = self.size
        if self.adaptive and self.n_workers > 1:
            # the last chunks are cut smaller so that every worker has one
            size = min(size, max(1, -(-self.remaining // self.n_workers)))
        stop = min(b, a + size)
        if self._cumulative is not None:
            cum = self._cumulative
            last = int(np.searchsorted(cum, cum[a] + CHUNK_SECONDS, side="right")) - 1
            stop = min(stop, max(a + 1, last))
        if stop == b:
            self._gaps.pop(0)
        else:
            self._gaps[0] = (stop, b)
        self.made.append((a, stop))
        return a, stop

    def record(self, jets: int, seconds: float) -> None:
        """A chunk of ``jets`` took ``seconds`` of work: size the next chunks (``adaptive``)."""
        if not self.adaptive or jets <= 0 or not seconds >= 0:
            return
        self._jets += jets
        self._seconds += seconds
        per_jet = self._seconds / self._jets
        want = int(CHUNK_SECONDS / per_jet) if per_jet > 0 else MAX_CHUNK
        self.size = max(10, min(MAX_CHUNK, want))


# ---------------------------------------------------------------------- finished outputs
def is_complete_output(output: Path, n_jets: int, config: BatchConfig,
                       reading: dict[str, Any] | None = None,
                       identity: dict[str, Any] | None = None) -> bool:
    """Whether ``output`` is a finished result of this input (same path, size, time and jets)
    with these settings."""
    return output_differences(output, n_jets, config, reading, identity) == []


def output_differences(output: Path, n_jets: int, config: BatchConfig,
                       reading: dict[str, Any] | None = None,
                       identity: dict[str, Any] | None = None,
                       info: dict[str, Any] | None = None) -> list[str] | None:
    """How a finished result file differs from what this run would write (``info``: the
    output's ``io.file_info(output, results=False)``, when the caller has read it).

    Returns:
        ``None`` when ``output`` is not a finished jetastar result of this input (missing,
        unreadable, no record of the run that wrote it, or the result of another input or of an
        input regenerated since: stale, to be computed again); otherwise the differing settings, each as
        ``"name: stored -> this run"`` (``[]``: the file is this run's result, nothing to do).

    Example:
        >>> output_differences(Path("no-such-file.h5"), 3, BatchConfig(["kt"])) is None
        True
    """
    if not output.is_file():
        return None
    if info is None:
        try:
            info = io.file_info(output, results=False)  # (the attributes and the jet count)
        except (OSError, ValueError):
            return None
    attrs = info.get("attrs", {})
    batch = _json_attr(attrs.get("batch"))
    if not isinstance(batch, dict):
        return None
    if info.get("n_jets") != n_jets or (
            identity is not None and not same_identity(attrs.get("input_identity"), identity)):
        return None  # results of another (or a regenerated) input: stale, computed again
    diff = []
    want = config.fingerprint()
    for k in want:
        if k != "chunk_size" and unit_options(batch.get(k)) != unit_options(want[k]):
            diff.append(f"{k}: {_show(batch.get(k))} -> {_show(want[k])}")
    for key, value in (reading or {}).items():
        stored = _json_attr(attrs.get(key))
        if isinstance(stored, dict) and isinstance(value, dict):
            diff += [f"{k}: {_show(stored.get(k))} -> {_show(value.get(k))}"
                     for k in sorted(set(stored) | set(value))
                     if unit_options(stored.get(k)) != unit_options(value.get(k))]
        elif unit_options(stored) != unit_options(value):
            diff.append(f"{key}: {_show(stored)} -> {_show(value)}")
    if not diff:
        res = info.get("results", {})
        if not all(a in res and res[a]["rows"] == n_jets for a in config.algorithms):
            diff.append("results: incomplete")
    return diff


def _json_attr(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _show(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value)) or "(none)"
    return "(none)" if value in (None, {}) else str(value)
