"""The identity of an input file: where it is, its size and time, and a hash of the jets it holds.

A results file records the identity of the input it was computed from (root attribute / meta entry
``input_identity``), and a batch run reuses a finished output only when the input still has the
same identity — a different file under the same output name, or the same file regenerated with
other jets, is clustered again.

The content hash covers every column of the jets that clustering reads or that is written to the
output (4-vectors, offsets, truth trees, ids, seeds, types, parameters), so two files with the same
jets have the same hash whatever their format, compression or creation date.

Example:
    >>> import numpy as np
    >>> from jetastar import Jet, JetCollection
    >>> jets = JetCollection.from_jets([Jet(np.array([[10.0, 0, 0, 9.0], [10.0, 0, 0, -9.0]]))])
    >>> len(jets_digest(jets))
    64
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["file_digest", "input_identity", "jets_digest", "same_identity"]

_BLOCK = 1 << 20


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
    import json

    if isinstance(stored, (bytes, str)):
        try:
            stored = json.loads(stored)
        except ValueError:
            return False
    if not isinstance(stored, dict):
        return False
    return all(stored.get(k) == v for k, v in current.items())
