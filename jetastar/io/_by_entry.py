"""Results keyed by input entry: one row per jet read from a particle file (the friend-tree table).

Files of particles read with :func:`jetastar.io.read_particles` give jets whose
``jet_columns["entry"]`` is their input entry. When such jets are written with results, the writers
add a table with one row per jet, in jet order (for one jet per entry: one row per input entry, so
the ROOT tree ``clusters`` is a friend tree of the input tree):

* ``entry`` (int64), ``jet_in_event`` (int64, per-event inputs only), ``n_particles``,
  ``n_mass_adjusted``, ``n_negative_t`` (int64);
* per result label ``L`` (non-alphanumeric characters replaced by ``_``): ``L_status`` (string),
  ``L_finite`` (bool: a tree with a finite log-likelihood), ``L_reason`` (string: why not —
  the impossible split of a −∞ tree or the message of a skipped / failed row; see
  :func:`jetastar.diagnostics.result_reasons`),
  ``L_log_likelihood``, ``L_time_s`` (double; NaN = no tree / unknown), ``L_exact`` (bool) and the tree
  (ROOT: ``nL_node`` + ``L_node_left``, ``L_node_right``, ``L_node_leaf``; HDF5: ``L/node_offsets``,
  ``L/left``, ``L/right``, ``L/leaf_of_node``).

For per-event inputs (jets found with FastJet, ``jet_in_event`` column) the rows are jets; a second
table has one row per input *event* (ROOT tree ``clusters_events``, HDF5 group
``/clusters/events``): ``entry``, ``n_jets`` and ``first_jet`` (the event's first row in the jet
table), plus, in ROOT, the jets' ``jet_n_particles[njet]`` and ``jet_L_log_likelihood[njet]``, so
that this tree is the friend tree of the input.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from .._columnar import offset_ranges
from .._text import text_column
from ..diagnostics import result_reasons
from ..jet import JetCollection
from ..result_tables import AlgorithmResults
from ._common import entry_range

__all__ = [
    "ByEntryStream", "EventRows", "by_entry_columns", "column_prefix", "event_columns",
    "event_jet_columns", "has_entries",
]


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
        ``finite``, ``reason``, ``status``, ``log_likelihood``, ``time_s``, ``exact`` (``(J,)``)
        and ``node_offsets`` ``(J + 1,)``, ``left``, ``right``, ``leaf_of_node`` (flat).
    """
    n = len(collection)
    cols = collection.jet_columns
    scalars: dict[str, np.ndarray] = {"entry": cols["entry"].astype(np.int64)}
    if "jet_in_event" in cols:
        scalars["jet_in_event"] = cols["jet_in_event"].astype(np.int64)
    scalars["n_particles"] = collection.n_leaves.astype(np.int64)
    for name in ("n_mass_adjusted", "n_negative_t"):
        if name in cols:
            scalars[name] = cols[name].astype(np.int64)
    per_label: dict[str, dict[str, Any]] = {}
    for label, t in tables.items():
        row_of = np.full(n, -1, np.int64)
        ok = (t.jet_index >= 0) & (t.jet_index < n)
        row_of[t.jet_index[ok]] = np.flatnonzero(ok)
        have = row_of >= 0
        rows = row_of[have]
        status = text_column(n, "missing")
        status[have] = t.status[rows]
        ll = np.full(n, np.nan)
        ll[have] = t.log_likelihood[rows]
        time_s = np.full(n, np.nan)
        time_s[have] = t.time_s[rows]
        exact = np.zeros(n, bool)
        exact[have] = t.exact[rows]
        sizes = np.zeros(n, np.int64)
        sizes[have] = np.diff(t.node_offsets)[rows]
        nsel = offset_ranges(t.node_offsets, rows)
        offsets = np.zeros(n + 1, np.int64)
        np.cumsum(sizes, out=offsets[1:])
        finite, reason = result_reasons(collection, t)
        per_label[column_prefix(label)] = {
            "finite": finite, "reason": reason,
            "status": status, "log_likelihood": ll, "time_s": time_s, "exact": exact,
            "node_offsets": offsets, "left": t.children[nsel, 0], "right": t.children[nsel, 1],
            "leaf_of_node": t.leaf_of_node[nsel],
        }
    return scalars, per_label


def event_columns(
    collection: JetCollection, tables: Mapping[str, AlgorithmResults],
    entry_range: tuple[int, int] | None = None,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], np.ndarray] | None:
    """Per-event columns for jets found in events (``None`` for one-jet-per-entry inputs).

    Args:
        collection: jets with ``entry`` and ``jet_in_event`` columns, in event order.
        tables: results per label.
        entry_range: the input entries that were read (default: first to last entry with a jet).

    Returns:
        ``(scalars, per_jet, offsets)``: ``entry``, ``n_jets``, ``first_jet`` per event; per-jet
        values ``n_particles`` and ``<L>_log_likelihood`` in jet order; and ``(E + 1,)``
        offsets of each event's jets.
    """
    cols = collection.jet_columns
    if "jet_in_event" not in cols or "entry" not in cols:
        return None
    _, per_label = by_entry_columns(collection, tables)
    rows = EventRows(entry_range)
    rows.take(cols["entry"], event_jet_columns(collection, per_label))
    return rows.finish()


class EventRows:
    """The per-event table of jets given block by block, in event order (one block:
    :func:`event_columns`): each call of :meth:`add` returns the events that are complete (an
    event whose jets may continue in the next block waits for it), so memory holds one block and
    one event's jets.

    Args:
        entry_range: the input entries that were read (``None``: from the first jet's entry to
            the last jet's, as :func:`event_columns`).

    Example:
        >>> rows = EventRows((0, 4))
        >>> done = rows.add(np.array([0, 0, 2]), {"n_particles": np.array([3, 4, 5])})
        >>> done[0]["entry"].tolist(), done[0]["n_jets"].tolist()
        ([0, 1], [2, 0])
        >>> last = rows.finish()
        >>> last[0]["entry"].tolist(), last[0]["n_jets"].tolist(), last[0]["first_jet"].tolist()
        ([2, 3], [1, 0], [2, 3])
    """

    def __init__(self, entry_range: tuple[int, int] | None = None) -> None:
        self._range = None if entry_range is None else tuple(int(x) for x in entry_range)
        self._next: int | None = None if entry_range is None else int(entry_range[0])
        self._before = 0  # jets already in returned events
        self._last = -1  # entry of the last jet seen
        self._entry = np.zeros(0, np.int64)
        self._per_jet: dict[str, np.ndarray] = {}

    def add(self, entry: np.ndarray, per_jet: Mapping[str, np.ndarray]
            ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], np.ndarray]:
        """Take the next jets (their ``entry`` and per-jet columns) and return the events that
        are complete: ``(scalars, per_jet, offsets)`` as :func:`event_columns`, with
        ``first_jet`` counted from the first jet of all."""
        self.take(entry, per_jet)
        # the event of the last jet may go on in the next block
        return self._close(self._last if self._entry.size else self._next)

    def take(self, entry: np.ndarray, per_jet: Mapping[str, np.ndarray]) -> None:
        """Take the next jets without returning events (:meth:`finish` returns them all)."""
        entry = np.asarray(entry, np.int64)
        if entry.size:
            if np.any(np.diff(entry) < 0) or entry[0] < self._last:
                raise ValueError("jets of events must be in event order")
            if self._next is None:
                self._next = int(entry[0])
            if entry[0] < self._next or (self._range is not None and entry[-1] >= self._range[1]):
                raise ValueError("jets of events must be inside the entry range")
            self._last = int(entry[-1])
        self._entry = np.concatenate([self._entry, entry])
        for k, v in per_jet.items():
            old = self._per_jet.get(k)
            self._per_jet[k] = np.asarray(v) if old is None else np.concatenate([old, v])

    def finish(self) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], np.ndarray]:
        """The remaining events, up to the end of the entry range."""
        if self._range is not None:
            stop = self._range[1]
        else:
            stop = self._last + 1 if self._last >= 0 else (self._next or 0)
        return self._close(stop)

    def _close(self, stop: int | None
               ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], np.ndarray]:
        start = self._next if self._next is not None else (stop or 0)
        stop = start if stop is None else max(int(stop), start)
        k = int(np.searchsorted(self._entry, stop, side="left"))
        n_jets = np.bincount(self._entry[:k] - start, minlength=stop - start).astype(np.int64)
        offsets = np.zeros(stop - start + 1, np.int64)
        np.cumsum(n_jets, out=offsets[1:])
        scalars = {"entry": np.arange(start, stop, dtype=np.int64), "n_jets": n_jets,
                   "first_jet": offsets[:-1] + self._before}
        per_jet = {name: v[:k] for name, v in self._per_jet.items()}
        self._entry = self._entry[k:]
        self._per_jet = {name: v[k:] for name, v in self._per_jet.items()}
        self._before += k
        if self._next is not None or self._entry.size or k:
            self._next = stop  # (no jet and no entry range yet: the first event is not known)
        return scalars, per_jet, offsets


def event_jet_columns(collection: JetCollection,
                      per_label: Mapping[str, Mapping[str, Any]]) -> dict[str, np.ndarray]:
    """The per-jet values of the per-event table (``n_particles`` and ``<L>_log_likelihood``),
    from the ``per_label`` columns of :func:`by_entry_columns`."""
    per_jet = {"n_particles": collection.n_leaves.astype(np.int64)}
    for p, c in per_label.items():
        per_jet[f"{p}_log_likelihood"] = c["log_likelihood"]
    return per_jet


class ByEntryStream:
    """The tables by input entry of jets given block by block, in jet order (what the stream
    writers' ``add_by_entry`` writes): per block, the columns of :func:`by_entry_columns` and,
    for jets found in events, the events that are complete (:class:`EventRows`).

    Args:
        meta: the output's provenance (the entry range read, ``meta["particles"]``).
    """

    def __init__(self, meta: Mapping[str, Any]) -> None:
        self._range = entry_range(meta)
        self._events: EventRows | None = None

    def add(self, collection: JetCollection, tables: Mapping[str, AlgorithmResults]) -> tuple[
            dict[str, np.ndarray], dict[str, dict[str, Any]],
            tuple[dict[str, np.ndarray], dict[str, np.ndarray], np.ndarray] | None]:
        """``(scalars, per_label, events)`` of the next jets (``tables``: their rows, with
        ``jet_index`` counted from the block's first jet); ``events`` is ``None`` for inputs
        with one jet per entry."""
        scalars, per_label = by_entry_columns(collection, tables)
        events = None
        if "jet_in_event" in collection.jet_columns:
            if self._events is None:
                self._events = EventRows(self._range)
            events = self._events.add(collection.jet_columns["entry"],
                                      event_jet_columns(collection, per_label))
        return scalars, per_label, events

    def finish(self) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], np.ndarray] | None:
        """The last events (``None`` for inputs with one jet per entry)."""
        return None if self._events is None else self._events.finish()
