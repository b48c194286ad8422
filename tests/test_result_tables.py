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


# ---------------------------------------------------------------- text columns share their strings
def test_text_columns_from_numpy_strings_hold_one_str_per_value():
    t = _table(np.array(["ok", "budget", "ok", "ok", "budget"]))
    assert t.message.tolist() == ["ok", "budget", "ok", "ok", "budget"]
    assert len({id(v) for v in t.message}) == 2
    same = _table(np.array(["ok"] * 4))
    assert len({id(v) for v in same.message}) == 1 and same.message.tolist() == ["ok"] * 4


def test_batch_tables_hold_one_str_per_distinct_status_and_options():
    from jetastar.batch import BatchConfig, cluster_collection
    from jetastar.ginkgo import ShowerParams, generate

    jets = generate(200, ShowerParams.qcd(), seed=5)
    tables = cluster_collection(jets, BatchConfig(["greedy", "kt", "beam"]))
    for table in tables.values():
        for column in (table.status, table.message, table.options):
            assert len({id(v) for v in column}) == len(set(column.tolist()))


# ---------------------------------------------------------------- a table assembled from chunks
def _tables_equal(a: AlgorithmResults, b: AlgorithmResults) -> None:
    for name in ("jet_index", "jet_id", "exact", "status", "message", "options",
                 "node_offsets", "children", "leaf_of_node"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    for name in ("log_likelihood", "log_z", "upper_bound", "n_trees", "time_s"):
        assert np.array_equal(getattr(a, name), getattr(b, name), equal_nan=True), name
    assert a.counters.keys() == b.counters.keys()
    for k in a.counters:
        assert np.array_equal(a.counters[k], b.counters[k], equal_nan=True), k
    assert (a.algorithm, a.likelihood, a.exact_method) == \
        (b.algorithm, b.likelihood, b.exact_method)


@pytest.fixture(scope="module")
def chunked():
    """Chunks of 3 QCD and W jets clustered apart (a bad jet and a jet over the size limit
    among them, so some rows have no tree), the chunks' counters differing."""
    from jetastar import JetCollection
    from jetastar.batch import BatchConfig, cluster_collection
    from jetastar.ginkgo import ShowerParams, generate

    jets = JetCollection.concatenate([generate(11, ShowerParams.qcd(), seed=8),
                                      generate(6, ShowerParams.w(), seed=9)])
    jets.leaves[jets.leaf_offsets[4], 0] = np.nan  # jet 4 fails
    config = BatchConfig(["mcts", "trellis"], options={"mcts": {"n_rollouts": 3}},
                         max_leaves={"trellis": 9})
    bounds = [(a, min(len(jets), a + 3)) for a in range(0, len(jets), 3)]
    parts = {(a, b): cluster_collection(jets.take(np.arange(a, b)), config, first_index=a)
             for a, b in bounds}
    return jets, config, bounds, parts


@pytest.mark.parametrize("name", ["mcts", "trellis"])
def test_a_table_assembled_in_any_order_equals_the_joined_chunks(chunked, name):
    from jetastar.result_tables import TableAssembler

    jets, _, bounds, parts = chunked
    joined = AlgorithmResults.concatenate([parts[c][name] for c in bounds])
    assert (np.diff(joined.node_offsets) == 0).any() and (joined.status == "failed").any()
    if name == "trellis":  # rows skipped by the size limit have no counters: NaN there
        assert (joined.status == "skipped").any()
        assert any(np.isnan(v).any() for v in joined.counters.values())
    for order in (bounds, bounds[::-1], bounds[1::2] + bounds[::2]):
        whole = TableAssembler(name, np.diff(jets.leaf_offsets))
        for a, b in order:
            whole.put(a, parts[(a, b)][name])
        _tables_equal(whole.finish(), joined)


def test_an_assembler_refuses_what_does_not_fit(chunked):
    from jetastar.result_tables import TableAssembler

    jets, _, bounds, parts = chunked
    n_leaves = np.diff(jets.leaf_offsets)
    whole = TableAssembler("mcts", n_leaves)
    whole.put(0, parts[bounds[0]]["mcts"])
    with pytest.raises(ValueError, match="already put"):
        whole.put(0, parts[bounds[0]]["mcts"])
    with pytest.raises(ValueError, match="outside"):
        whole.put(len(jets) - 1, parts[bounds[1]]["mcts"])
    with pytest.raises(ValueError, match="results of 'trellis' put into the table of 'mcts'"):
        whole.put(3, parts[bounds[1]]["trellis"])
    with pytest.raises(ValueError, match=f"{len(jets) - 3} rows never put .the first is row 3"):
        whole.finish()
    # a tree bigger than its jet allows (a plugin's wrong tree): the row and jet are named
    small = TableAssembler("mcts", np.r_[n_leaves[:3], n_leaves[3:] - 1])
    small.put(0, parts[bounds[0]]["mcts"])
    with pytest.raises(ValueError, match=r"jet 3 \(row 3\): a tree of \d+ nodes, more than"):
        small.put(3, parts[bounds[1]]["mcts"])
