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


# ---------------------------------------------------------------------- tables and their jets
@pytest.fixture(scope="module")
def two_runs():
    import jetastar
    from jetastar.ginkgo import ShowerParams, generate

    qcd = generate(12, ShowerParams.qcd(), seed=21)
    w = generate(9, ShowerParams.w(), seed=22)
    return qcd, jetastar.cluster(qcd, "greedy"), w, jetastar.cluster(w, "greedy")


def _masses(jets, table):
    from jetastar.observables import root_split

    return root_split(jets, table).m_heavy.to_numpy()


def test_selected_jets_and_rows_stay_paired(two_runs):
    """`root_split(jets.take(p), table.take(p))` gave jet 2 the tree of jet 0 (same number of
    leaves, no error): rows were looked up by their jet_index as a position in the jets given."""
    jets, table, _, _ = two_runs
    full = _masses(jets, table)
    p = np.array([5, 0, 3, 11])
    assert np.array_equal(_masses(jets.take(p), table.take(p)), full[p])
    mask = jets.n_leaves >= np.median(jets.n_leaves)
    assert np.array_equal(_masses(jets[mask], table[mask]), full[mask])
    assert np.array_equal(_masses(jets[mask], table), full[mask])  # (rows of other jets left out)
    rows = table.take(p).for_jets(jets.take(p))
    assert rows.jet_index.tolist() == [0, 1, 2, 3] and rows.jet_id.tolist() == p.tolist()
    assert table.for_jets(jets) is table


def test_a_table_of_other_jets_is_refused(two_runs):
    from jetastar import InvalidTreeError

    qcd, tq, _, tw = two_runs
    with pytest.raises(InvalidTreeError, match="the table is not of these jets"):
        tw.for_jets(qcd)
    with pytest.raises(InvalidTreeError, match="no row is of one of these"):
        tq.take(np.arange(3)).for_jets(qcd.take(np.arange(5, 9)))


def test_tables_of_two_collections_are_joined_with_n_jets(two_runs, tmp_path):
    """Joining two runs' jets and tables kept the second table's jet_index (0, 1, ...), pointing
    at the first collection's jets; `io.write` wrote it, and `compare` / `info` read nonsense."""
    from jetastar import InvalidTreeError, JetCollection, io

    qcd, tq, w, tw = two_runs
    jets = JetCollection.concatenate([qcd, w])
    with pytest.raises(InvalidTreeError, match=r"2 rows for this jet .*n_jets"):
        io.write(tmp_path / "bad.h5", jets, {"greedy": AlgorithmResults.concatenate([tq, tw])})
    assert not (tmp_path / "bad.h5").exists()
    joined = AlgorithmResults.concatenate([tq, tw], n_jets=[len(qcd), len(w)])
    io.write(tmp_path / "both.h5", jets, {"greedy": joined})
    back = io.read_results(tmp_path / "both.h5")["greedy"]
    assert back.jet_index.tolist() == list(range(len(jets)))
    assert np.array_equal(_masses(io.read(tmp_path / "both.h5"), back),
                          np.concatenate([_masses(qcd, tq), _masses(w, tw)]))
    with pytest.raises(InvalidTreeError, match="the table is not of these jets"):
        io.write(tmp_path / "bad.h5", w, {"greedy": tq})


@pytest.mark.parametrize("suffix", [".h5", ".root"])
def test_parts_of_a_file_pair_with_their_rows(two_runs, tmp_path, suffix):
    """`io.read(path, jets=[2, 0])` returns the jets in the order asked, `read_results(path,
    jets=[2, 0])` the rows in file order (jet_index 0, 2): the trees went to the wrong jets; the
    blocks of `io.iterate` were refused ("positions beyond the 5 jets given")."""
    from jetastar import io

    jets, table, _, _ = two_runs
    path = tmp_path / f"r{suffix}"
    io.write(path, jets, {"greedy": table})
    full = _masses(jets, table)
    sel = np.array([7, 2, 0])
    part = io.read(path, jets=sel)
    assert np.array_equal(_masses(part, io.read_results(path, jets=sel)["greedy"]), full[sel])
    start, got = 0, []
    for block in io.iterate(path, 5):
        rows = io.read_results(path, jets=slice(start, start + len(block)))["greedy"]
        got.append(_masses(block, rows))
        start += len(block)
    assert np.array_equal(np.concatenate(got), full)
    # writing a selection re-indexes its rows to the written jets
    io.write(tmp_path / f"sel{suffix}", jets.take(sel), {"greedy": table.take(sel)})
    back = io.read_results(tmp_path / f"sel{suffix}")["greedy"]
    assert back.jet_index.tolist() == [0, 1, 2] and back.jet_id.tolist() == sel.tolist()
