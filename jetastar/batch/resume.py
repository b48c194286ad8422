"""The part-file and resume protocol of a batch run: how a killed run picks up where it stopped.

This module is the one place that defines it; :mod:`jetastar.batch.runner` follows it and
:mod:`jetastar.batch.merge` ends it.

**Part files.** An input is clustered in chunks of ``chunk_size`` jets (positions ``start:stop``
in the input's jets). The results of a chunk, one table per algorithm, are written atomically to
``<output>.parts/part-<start>-<stop>.h5`` (both numbers with ten digits) next to the output file,
so a part is either complete or absent. The part folder also holds ``manifest.json``, written
before any part: the input's identity (below), its number of jets, the settings of the run
(:meth:`BatchConfig.fingerprint <jetastar.batch.BatchConfig.fingerprint>`: algorithms, options,
time limit, size limits, chunk size) and, for particle files, how they are read. Only the master
process writes; workers return results and need no shared file system.

**What identifies an input.** Its path (resolved), size and modification time, and a SHA-256 of
its content (:func:`input_identity`): for jetastar files a hash of the jets
(:func:`jets_digest`: 4-vectors, offsets, truth trees, ids, seeds, types, parameters — equal for
equal jets, whatever the format, compression or creation date); for particle files, whose jets
are only found while clustering, a hash of the file's bytes (:func:`file_digest`). Each source
(:class:`~jetastar.batch.JetSource`) says which with its ``digest`` method.

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
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .. import __version__, io
from .._atomic import atomic_write_text, remove_stale_temporaries
from .._progress import progress_bar
from ..errors import BatchError, JetastarError
from ..io.hdf5 import read_hdf5_results, write_hdf5
from ..result_tables import AlgorithmResults, to_json, unit_options
from .config import BatchConfig

__all__ = [
    "PART_DIR_SUFFIX",
    "done_parts",
    "file_digest",
    "input_identity",
    "is_complete_output",
    "jets_digest",
    "manifest_for",
    "output_differences",
    "parse_part",
    "part_name",
    "parts_dir",
    "prepare_parts",
    "readable_part",
    "same_identity",
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
                 reading: dict[str, Any]) -> dict[str, Any]:
    """The manifest of a part folder: input, size, time, number of jets, content hash, the run's
    settings and how the input is read."""
    return {
        "jetastar_version": __version__, **_input_fingerprint(inp), "n_jets": n_jets,
        "sha256": identity["sha256"], **config.fingerprint(), **reading,
    }


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
        try:
            old = json.loads(mpath.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            old = None
        if old is None:
            # manifest never written completely: nothing in here can be trusted
            shutil.rmtree(parts)
        else:
            keys = [k for k in manifest if k != "jetastar_version"]
            diff = [k for k in keys if unit_options(old.get(k)) != unit_options(manifest[k])]
            if diff:
                raise BatchError(
                    f"{parts}: part files of an interrupted run with different settings "
                    f"({', '.join(diff)}); rerun with the same settings, or pass --fresh to "
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
        tables = read_hdf5_results(path)
        ok = all(name in tables for name in algorithms)
    except (JetastarError, OSError, ValueError, KeyError, RuntimeError):
        ok = False
    if not ok:
        with contextlib.suppress(OSError):
            path.unlink()
    return ok


def write_part(parts: Path, start: int, stop: int, tables: dict[str, AlgorithmResults]) -> None:
    """Write the results of chunk ``start:stop`` atomically into the part folder."""
    write_hdf5(parts / part_name(start, stop), None, tables,
               attrs={"chunk_start": start, "chunk_stop": stop})


# ---------------------------------------------------------------------- finished outputs
def is_complete_output(output: Path, n_jets: int, config: BatchConfig,
                       reading: dict[str, Any] | None = None,
                       identity: dict[str, Any] | None = None) -> bool:
    """Whether ``output`` is a finished result of this input (same path, size, time and jets)
    with these settings."""
    return output_differences(output, n_jets, config, reading, identity) == []


def output_differences(output: Path, n_jets: int, config: BatchConfig,
                       reading: dict[str, Any] | None = None,
                       identity: dict[str, Any] | None = None) -> list[str] | None:
    """How a finished result file differs from what this run would write.

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
    try:
        info = io.file_info(output)
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
