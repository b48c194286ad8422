"""Results keyed by input entry: one row per jet read from a particle file (the friend-tree table).

Files of particles read with :func:`jetastar.io.read_particles` give jets whose
``jet_columns["entry"]`` is their input entry. When such jets are written with results, the writers
add a table with one row per jet, in jet order (for one jet per entry: one row per input entry, so
the ROOT tree ``clusters`` is a friend tree of the input tree):

* ``entry`` (int64), ``jet_in_event`` (int64, per-event inputs only), ``n_particles``,
  ``n_mass_adjusted`` (int64);
* per result label ``L`` (non-alphanumeric characters replaced by ``_``): ``L_status`` (string),
  ``L_log_likelihood``, ``L_time_s`` (double; NaN = no tree / unknown), ``L_exact`` (bool) and the tree
  (ROOT: ``nL_node`` + ``L_node_left``, ``L_node_right``, ``L_node_leaf``; HDF5: ``L/node_offsets``,
  ``L/left``, ``L/right``, ``L/leaf_of_node``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..jet import JetCollection
from .results import AlgorithmResults

__all__ = ["by_entry_columns", "column_prefix", "has_entries"]


def has_entries(collection: JetCollection | None) -> bool:
    """Whether a collection came from a particle file (has an ``entry`` column)."""
    return collection is not None and "entry" in collection.jet_columns


def column_prefix(label: str) -> str:
    """``"astar-approx"`` -> ``"astar_approx"`` (a valid ROOT branch / HDF5 name)."""
    return re.sub(r"\W", "_", str(label))


def by_entry_columns(
    collection: JetCollection, tables: Mapping[str, AlgorithmResults]
) -> tuple[dict[str, np.ndarray], dict[str, dict[str, Any]]]:
    """The columns of the by-entry table.

    Returns:
        ``(scalars, per_label)``: scalar columns (name -> ``(J,)`` array) and, per label prefix,
        ``status``, ``log_likelihood``, ``time_s``, ``exact`` (``(J,)``) and ``node_offsets``
        ``(J + 1,)``, ``left``, ``right``, ``leaf_of_node`` (flat).
    """
    n = len(collection)
    cols = collection.jet_columns
    scalars: dict[str, np.ndarray] = {"entry": cols["entry"].astype(np.int64)}
    if "jet_in_event" in cols:
        scalars["jet_in_event"] = cols["jet_in_event"].astype(np.int64)
    scalars["n_particles"] = collection.n_leaves.astype(np.int64)
    if "n_mass_adjusted" in cols:
        scalars["n_mass_adjusted"] = cols["n_mass_adjusted"].astype(np.int64)
    per_label: dict[str, dict[str, Any]] = {}
    for label, t in tables.items():
        row_of = np.full(n, -1, np.int64)
        ok = (t.jet_index >= 0) & (t.jet_index < n)
        row_of[t.jet_index[ok]] = np.flatnonzero(ok)
        have = row_of >= 0
        rows = row_of[have]
        status = np.full(n, "missing", dtype=object)
        status[have] = t.status[rows]
        ll = np.full(n, np.nan)
        ll[have] = t.log_likelihood[rows]
        time_s = np.full(n, np.nan)
        time_s[have] = t.time_s[rows]
        exact = np.zeros(n, bool)
        exact[have] = t.exact[rows]
        sizes = np.zeros(n, np.int64)
        sizes[have] = np.diff(t.node_offsets)[rows]
        sel = [np.arange(t.node_offsets[r], t.node_offsets[r + 1]) for r in row_of if r >= 0]
        nsel = np.concatenate(sel) if sel else np.empty(0, np.int64)
        offsets = np.zeros(n + 1, np.int64)
        np.cumsum(sizes, out=offsets[1:])
        per_label[column_prefix(label)] = {
            "status": status, "log_likelihood": ll, "time_s": time_s, "exact": exact,
            "node_offsets": offsets, "left": t.children[nsel, 0], "right": t.children[nsel, 1],
            "leaf_of_node": t.leaf_of_node[nsel],
        }
    return scalars, per_label
