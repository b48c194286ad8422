"""Results tables: the text columns (status, message, options) hold the ``str`` of each value."""

from __future__ import annotations

import numpy as np
import pytest

from jetastar.io import AlgorithmResults


def _table(message) -> AlgorithmResults:
    n = len(message)
    nan = np.full(n, np.nan)
    return AlgorithmResults(
        "greedy", jet_index=np.arange(n), jet_id=np.arange(n), log_likelihood=nan,
        exact=np.zeros(n, bool), log_z=nan, upper_bound=nan, n_trees=nan, time_s=nan,
        status=["ok"] * n, message=message, options=["{}"] * n,
        node_offsets=np.zeros(n + 1, np.int64), children=np.empty((0, 2), np.int64),
        leaf_of_node=np.empty(0, np.int64),
    )


@pytest.mark.parametrize("message", [
    ["a", "b", ""],
    np.array(["a", "b", ""]),
    np.array(["a", "b", ""], dtype=object),
    np.array([["a"], ["b"], [""]], dtype=object),
])
def test_text_columns_of_strings(message):
    t = _table(message)
    assert t.message.dtype == object and t.message.shape == (3,)
    assert t.message.tolist() == ["a", "b", ""]
    assert all(type(v) is str for v in t.message)


@pytest.mark.parametrize("message", [
    [1, None, 2.5],
    np.array([1, None, 2.5], dtype=object),
    np.array(["x", np.str_("y"), 3], dtype=object),
])
def test_text_columns_convert_other_values(message):
    t = _table(message)
    assert t.message.tolist() == [str(v) for v in np.asarray(message, dtype=object)]
    assert all(type(v) is str for v in t.message)


def test_a_text_column_is_not_shared_with_the_caller():
    given = np.array(["a", "b"], dtype=object)
    t = _table(given)
    t.message[0] = "changed"
    assert given.tolist() == ["a", "b"]
