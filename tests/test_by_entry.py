"""The per-event table of jets found in events, given whole or block by block."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from jetastar.io._by_entry import EventRows


def _reference(entry: np.ndarray, entry_range):
    """Per event from first principles: its entry, its number of jets, its first jet."""
    start, stop = entry_range if entry_range is not None else (
        (int(entry.min()), int(entry.max()) + 1) if entry.size else (0, 0))
    events = np.arange(start, stop)
    n_jets = np.array([np.count_nonzero(entry == e) for e in events], dtype=np.int64)
    first = np.array([int(np.searchsorted(entry, e)) for e in events], dtype=np.int64)
    return events, n_jets, first


@pytest.mark.parametrize("entry_range", [None, (0, 25), (3, 20)])
def test_events_block_by_block_equal_the_whole(entry_range):
    rng = np.random.default_rng(7)
    for _ in range(200):
        entry = np.sort(rng.integers(3, 20, rng.integers(0, 30)))
        values = rng.random(entry.size)
        whole = EventRows(entry_range)
        whole.take(entry, {"x": values})
        scalars, per_jet, offsets = whole.finish()
        events, n_jets, first = _reference(entry, entry_range)
        assert np.array_equal(scalars["entry"], events)
        assert np.array_equal(scalars["n_jets"], n_jets)
        assert np.array_equal(scalars["first_jet"], first)
        assert np.array_equal(offsets[:-1], first) and offsets[-1] == entry.size
        assert np.array_equal(per_jet["x"], values)
        # blocks cut anywhere, empty ones included (an event may span blocks)
        cuts = [0, *np.sort(rng.integers(0, entry.size + 1, 3)).tolist(), entry.size]
        rows = EventRows(entry_range)
        got = [rows.add(entry[a:b], {"x": values[a:b]}) for a, b in itertools.pairwise(cuts)]
        got.append(rows.finish())
        for k in ("entry", "n_jets", "first_jet"):
            assert np.array_equal(np.concatenate([g[0][k] for g in got]), scalars[k])
        assert np.array_equal(np.concatenate([g[1]["x"] for g in got]), values)


def test_jets_out_of_order_or_outside_the_range_are_refused():
    with pytest.raises(ValueError, match="event order"):
        EventRows().take(np.array([3, 2]), {})
    with pytest.raises(ValueError, match="entry range"):
        EventRows((0, 5)).take(np.array([4, 5]), {})
