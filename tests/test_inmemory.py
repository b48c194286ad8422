"""Clustering collections held in memory; results as awkward arrays; one jet as awkward momenta."""

from __future__ import annotations

import math

import awkward as ak
import numpy as np
import pytest
import vector

from jetastar import InvalidJetError, Jet, JetCollection
from jetastar.batch import BatchError
from jetastar.clustering import greedy, kt
from jetastar.ginkgo import ShowerParams, generate
from jetastar.inmemory import JetResults, cluster, cluster_jets
from jetastar.io import AlgorithmResults

vector.register_awkward()


@pytest.fixture(scope="module")
def jets() -> JetCollection:
    return JetCollection.concatenate([
        generate(12, ShowerParams.qcd(), seed=31), generate(9, ShowerParams.w(), seed=32),
    ])


def test_cluster_jets_in_process(jets: JetCollection, tmp_path) -> None:
    res = cluster_jets(jets, ["greedy", "kt"], chunk_size=5, progress=False)
    assert isinstance(res, JetResults) and list(res) == ["greedy", "kt"]
    g = res["greedy"]
    assert np.array_equal(g.jet_index, np.arange(len(jets)))
    for i in (0, 7, 20):
        assert g.log_likelihood[i] == greedy(jets[i]).log_likelihood
        assert g.tree(i) == greedy(jets[i]).tree
    arr = res.to_awkward()
    assert len(arr) == len(jets) and arr.jet_id.tolist() == jets.jet_id.tolist()
    assert arr.kt.finite.tolist() == [math.isfinite(kt(j).log_likelihood) for j in jets]
    assert ak.all(ak.num(arr.greedy.tree) == 2 * jets.n_leaves - 1)
    summary = res.summary()
    assert summary["kt"]["ran"] == len(jets)
    assert summary["kt"]["finite"] + summary["kt"]["minus_inf"] == len(jets)
    # the same counts as comparison.status_counts (with the proofs and window verdicts)
    from jetastar.comparison import status_counts

    assert summary == status_counts(res)
    finite, reason = res.reasons("kt")
    assert all((r == "") == f for r, f in zip(reason, finite, strict=True))
    obs = res.observables("greedy")
    assert len(obs) == len(jets) and ak.all(obs.has_tree)
    res.write(tmp_path / "r.h5")
    from jetastar import io

    back = io.read_results(tmp_path / "r.h5")
    assert np.array_equal(back["kt"].log_likelihood, res["kt"].log_likelihood)
    with pytest.raises(KeyError, match="have greedy, kt"):
        res["beam"]
    # the comparison table works on results in memory as on the file
    from jetastar.comparison import comparison_table

    assert comparison_table(res) == comparison_table(tmp_path / "r.h5")


def test_cluster_jets_with_workers_matches(jets: JetCollection) -> None:
    one = cluster_jets(jets, "greedy,beam", options={"beam": {"beam_size": 5}}, progress=False)
    two = cluster_jets(jets, "greedy,beam", options={"beam": {"beam_size": 5}}, workers=2,
                       chunk_size=4, progress=False)
    for name in ("greedy", "beam"):
        assert np.array_equal(one[name].log_likelihood, two[name].log_likelihood)
        assert np.array_equal(one[name].children, two[name].children)


def test_cluster_jets_in_chunks_equals_one_chunk(jets: JetCollection, monkeypatch) -> None:
    """Chunks assembled into one table per algorithm (:class:`~jetastar.result_tables.
    TableAssembler`) give the table of one chunk, row for row."""
    from jetastar.batch import work
    from jetastar.clustering import algorithm_info

    whole = cluster_jets(jets, ["greedy", "kt"], progress=False)
    for name in ("greedy", "kt"):  # (their chunk paths' jets per call)
        monkeypatch.setattr(algorithm_info(name).chunk, "in_process_size", 4)
    assert work.in_process_chunk_size(work.BatchConfig(["greedy", "kt"], chunk_size=4)) == 4
    chunked = cluster_jets(jets, ["greedy", "kt"], chunk_size=4, progress=False)
    for name in ("greedy", "kt"):
        a, b = whole[name], chunked[name]
        for column in ("jet_index", "jet_id", "status", "message", "options", "node_offsets",
                       "children", "leaf_of_node", "log_likelihood"):
            assert np.array_equal(getattr(a, column), getattr(b, column)), column


def test_cluster_jets_on_an_executor_drops_each_chunk_once_it_is_in_place(
        jets: JetCollection, monkeypatch) -> None:
    """A chunk's tables are freed once copied into the whole table (cf.as_completed kept every
    finished future, and its tables, to the end of the loop)."""
    import concurrent.futures as cf
    import gc
    import weakref

    from jetastar import inmemory
    from jetastar.result_tables import TableAssembler

    made: dict[int, list] = {}  # chunk start -> weak references to its tables
    put: list[int] = []
    still_alive: list[int] = []

    class Recording(cf.ThreadPoolExecutor):
        def submit(self, fn, *args, **kw):
            def run():
                out = fn(*args, **kw)
                if "first_index" in kw:
                    made[kw["first_index"]] = [weakref.ref(t) for t in out.values()]
                return out
            return super().submit(run)

    original_put = TableAssembler.put

    def recording_put(self, first_row, part):
        original_put(self, first_row, part)
        if first_row not in put:
            put.append(first_row)
        gc.collect()
        # every chunk put before this one: its tables are gone
        still_alive.extend(a for a in put[:-1] if any(r() is not None for r in made[a]))

    monkeypatch.setattr(TableAssembler, "put", recording_put)
    with Recording(1) as pool:
        res = inmemory.cluster_jets(jets, ["greedy", "kt"], executor=pool, chunk_size=3,
                                    progress=False)
    assert len(put) == len(made) == 7 and still_alive == []
    whole = cluster_jets(jets, ["greedy", "kt"], progress=False)
    for name in ("greedy", "kt"):
        assert np.array_equal(res[name].children, whole[name].children)
        assert np.array_equal(res[name].log_likelihood, whole[name].log_likelihood)


def test_a_tree_not_over_the_jets_leaves_is_a_failed_row(jets: JetCollection,
                                                          monkeypatch) -> None:
    """A plugin that returns a tree over other leaves than the jet's: that row fails, naming the
    jet and both sizes (the tree is not written, nor put into the whole table)."""
    from helpers.batch_algorithms import caterpillar

    from jetastar.clustering import registry
    from jetastar.clustering.result import ClusteringResult

    def wrong(jet):
        n = jet.n_leaves + (1 if jet.jet_id == 3 else -1 if jet.jet_id == 5 else 0)
        return ClusteringResult(caterpillar(n), -1.0, "test-wrong-tree", jet_id=jet.jet_id)

    monkeypatch.setitem(registry._REGISTRY, "test-wrong-tree",
                        registry.AlgorithmInfo("test-wrong-tree", wrong, False, None, ""))
    jets = jets.take(np.arange(12))  # (ids 0..11: the W jets' ids repeat them)
    table = cluster_jets(jets, ["test-wrong-tree"], chunk_size=4, progress=False)["test-wrong-tree"]
    assert table.status[3] == table.status[5] == "failed"
    n3, n5 = jets.n_leaves[3], jets.n_leaves[5]
    assert table.message[3] == f"'test-wrong-tree' gave jet 3 a tree over {n3 + 1} leaves; " \
        f"the jet has {n3}"
    assert table.message[5] == f"'test-wrong-tree' gave jet 5 a tree over {n5 - 1} leaves; " \
        f"the jet has {n5}"
    assert table.tree(3) is None and table.tree(5) is None
    assert (np.delete(table.status, [3, 5]) == "ok").all()
    assert table.tree(4) == caterpillar(jets.n_leaves[4])


def test_cluster_jets_errors_and_bad_jets(jets: JetCollection) -> None:
    with pytest.raises(BatchError, match="unknown option"):
        cluster_jets(jets, ["greedy"], options={"greedy": {"nope": 1}}, progress=False)
    with pytest.raises(ValueError, match="unknown algorithm"):
        cluster_jets(jets, ["nope"], progress=False)
    # a bad jet is a failed row naming it, not an exception
    leaves = jets.leaves.copy()
    leaves[3, 0] = np.nan
    bad = JetCollection(
        leaves=leaves, leaf_offsets=jets.leaf_offsets, children=jets.children,
        leaf_of_node=jets.leaf_of_node, node_offsets=jets.node_offsets, jet_id=jets.jet_id,
        seed=jets.seed, jet_type=jets.jet_type, params=jets.params,
    )
    res = cluster_jets(bad, ["greedy"], progress=False)
    assert res["greedy"].status[0] == "failed" and "NaN" in res["greedy"].message[0].replace(
        "nan", "NaN")
    assert (res["greedy"].status[1:] == "ok").all()


def test_registry_cluster_accepts_collections_and_awkward(jets: JetCollection) -> None:
    table = cluster(jets, "greedy")
    assert isinstance(table, AlgorithmResults) and len(table) == len(jets)
    assert table.log_likelihood[2] == greedy(jets[2]).log_likelihood
    assert len(cluster(list(jets)[:3], "kt")) == 3
    arr = jets.to_awkward()
    assert len(cluster(arr, "greedy")) == len(jets)
    by_leaves = cluster(arr.leaves, "greedy")  # particles only: default parameters
    assert len(by_leaves) == len(jets)
    # one jet as a 1-D array of momenta (vector or plain records in other coordinates)
    one = arr.leaves[4]
    jet = Jet(one)
    np.testing.assert_allclose(jet.leaves, jets[4].leaves, rtol=1e-12)
    ptetaphi = ak.zip({"pt": one.pt, "eta": one.eta, "phi": one.phi, "mass": one.mass})
    np.testing.assert_allclose(Jet(ptetaphi).leaves, jets[4].leaves, rtol=1e-9, atol=1e-9)
    res = cluster(one, "greedy")
    qcd_jet = Jet(jets[4].leaves)  # default parameters, as for the awkward input
    assert res.log_likelihood == greedy(qcd_jet).log_likelihood
    assert cluster(jets[4].leaves, "greedy").log_likelihood == res.log_likelihood
    with pytest.raises(InvalidJetError, match="1-D records"):
        Jet(ak.Array([1.0, 2.0]))


def test_one_algorithm_for_cluster_several_for_cluster_jets(jets: JetCollection) -> None:
    import jetastar
    from jetastar.clustering import algorithm_info

    # a list is not one algorithm: the error says where several go, before any jet runs
    with pytest.raises(TypeError, match=r"runs one algorithm.*jetastar\.cluster_jets\(jets, "
                                        r"\['greedy', 'kt'\]\)"):
        cluster(jets, ["greedy", "kt"])
    with pytest.raises(TypeError, match="runs one algorithm"):
        cluster(jets[0], ("greedy",))
    with pytest.raises(TypeError, match="an algorithm name is a string; got list"):
        algorithm_info(["greedy"])
    with pytest.raises(BatchError, match="an algorithm name is a string; got list"):
        cluster_jets(jets, [["greedy"]], progress=False)
    # and cluster_jets is a top-level name, as cluster is
    res = jetastar.cluster_jets(jets, ["greedy", "kt"], progress=False)
    assert list(res) == ["greedy", "kt"]
    assert res["kt"].log_likelihood.tolist() == cluster(jets, "kt").log_likelihood.tolist()


def test_a_rejected_jet_says_how_to_keep_it(tmp_path) -> None:
    import jetastar.io as jio

    parts = ak.zip({"pt": [[30.0, 20.0, 5.0], [40.0]], "eta": [[0.1, 0.2, 0.0], [0.0]],
                    "phi": [[0.1, 0.3, 0.2], [0.0]], "mass": [[0.0, 0.0, 0.0], [0.0]]})
    with pytest.raises(InvalidJetError, match=r"jet 1, field 'particles': .* got 1 "
                                              r"\(validate=False keeps invalid jets"):
        JetCollection.from_momenta(parts, t_cut=1.0)
    kept = JetCollection.from_momenta(parts, t_cut=1.0, validate=False)
    res = cluster_jets(kept, ["greedy"], progress=False)
    assert res["greedy"].status.tolist() == ["ok", "failed"]
    # a file holding such a jet reads back the same way
    res.write(tmp_path / "r.h5")
    with pytest.raises(InvalidJetError, match=r"entry 1: jet 1, .*validate=False reads such"):
        jio.read(tmp_path / "r.h5")
    assert jio.read(tmp_path / "r.h5", validate=False).n_leaves.tolist() == [3, 1]


def test_a_results_table_is_a_sequence_of_results(jets: JetCollection) -> None:
    """table[i] is row i's result (negative from the end), slices / row numbers / masks are
    tables, iteration gives every row's result; a column name or a row out of range is a clear
    error."""
    table = cluster(jets[:6], "greedy")
    assert table[0].log_likelihood == greedy(jets[0]).log_likelihood
    assert table[-1].jet_id == table.result(5).jet_id == int(jets.jet_id[5])
    assert table[np.int64(2)].tree.to_nested() == table.tree(2).to_nested()
    assert table[-6].tree.to_nested() == table.tree(0).to_nested()
    part = table[1:5:2]
    assert isinstance(part, AlgorithmResults) and list(part.jet_id) == list(table.jet_id[[1, 3]])
    assert part[1].log_likelihood == table[3].log_likelihood
    mask = table.log_likelihood > np.median(table.log_likelihood)
    assert list(table[mask].jet_index) == list(np.flatnonzero(mask))
    assert list(table[np.array([5, -6])].jet_id) == list(table.jet_id[[5, 0]])
    assert len(table[[]]) == 0
    assert [r.log_likelihood for r in table] == [table.result(i).log_likelihood for i in range(6)]
    for bad in (6, -7):
        with pytest.raises(IndexError, match=f"row {bad} of a table of 6 rows"):
            table[bad]
        with pytest.raises(IndexError, match="of 6 rows"):
            table.tree(bad)
    with pytest.raises(IndexError, match="of 6 rows"):
        table[[0, 9]]
    with pytest.raises(TypeError, match=r"table\.log_likelihood"):
        table["log_likelihood"]
    with pytest.raises(IndexError, match="boolean mask"):
        table[np.ones(3, dtype=bool)]
    with pytest.raises(TypeError, match="row numbers"):
        table[np.array([0.5])]


def test_script_without_main_guard_gets_a_clear_message(tmp_path):
    """Worker processes import the main script; without the ``__main__`` guard they die, and the
    user is told why instead of getting a bare BrokenProcessPool."""
    import subprocess
    import sys

    script = tmp_path / "script.py"
    script.write_text(
        "from jetastar.ginkgo import ShowerParams, generate\n"
        "from jetastar.inmemory import cluster_jets\n"
        "jets = generate(20, ShowerParams.qcd(), seed=1)\n"
        "cluster_jets(jets, ['greedy'], workers=2, chunk_size=5, progress=False)\n"
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert done.returncode != 0
    assert 'if __name__ == "__main__":' in done.stderr, done.stderr[-2000:]


def _massless_particles(n_jets: int, seed: int) -> ak.Array:
    """Particles as a NanoAOD reader zips them: ``pt, eta, phi, mass`` with mass exactly 0."""
    rng = np.random.default_rng(seed)
    jets = []
    for _ in range(n_jets):
        n = int(rng.integers(5, 9))
        jets.append([{"pt": float(rng.uniform(5, 50)), "eta": float(rng.normal(0, 0.2)),
                      "phi": float(rng.normal(0, 0.2)), "mass": 0.0} for _ in range(n)])
    return ak.Array(jets)


def test_awkward_particles_get_the_documented_mass_policy_on_every_entry_point() -> None:
    """Issue 35 point 1: massless particles passed as awkward records scored every jet -inf through
    cluster_jets / cluster (read with mass_policy="keep"); every entry point now uses the default
    of JetCollection.from_momenta ("clamp")."""
    parts = _massless_particles(8, seed=5)
    kept = JetCollection.from_momenta(parts, mass_policy="keep")
    # the data do hit the problem: rounding leaves some particles with t < 0 under "keep"
    assert (kept.jet_columns["n_negative_t"] > 0).sum() >= 4
    assert not np.isfinite(cluster(kept, "greedy").log_likelihood).any()
    reference = cluster(JetCollection.from_momenta(parts), "greedy").log_likelihood
    assert np.isfinite(reference).all()
    many = cluster_jets(parts, ["greedy", "kt"], progress=False)
    np.testing.assert_array_equal(many["greedy"].log_likelihood, reference)
    np.testing.assert_array_equal(many["kt"].log_likelihood,
                                  cluster(JetCollection.from_momenta(parts), "kt").log_likelihood)
    np.testing.assert_array_equal(cluster(parts, "greedy").log_likelihood, reference)
    for i in (0, 3):  # one jet's records
        assert cluster(parts[i], "greedy").log_likelihood == reference[i]


def test_to_awkward_carries_log_z_and_bounds_where_given(jets: JetCollection) -> None:
    small = jets.take(np.flatnonzero(jets.n_leaves <= 9)[:6])
    full = cluster(small, "trellis", log_z=True)
    arr = full.to_awkward()
    assert arr.log_z.tolist() == full.log_z.tolist()
    assert arr.n_trees.tolist() == full.n_trees.tolist()
    log_z = ak.to_numpy(arr.log_z)
    assert np.isfinite(log_z).all() and (log_z >= ak.to_numpy(arr.log_likelihood)).all()
    # an algorithm without them has no such fields (not a column of NaN)
    assert "log_z" not in cluster(small, "greedy").to_awkward().fields


def test_results_as_pandas_dataframes(jets: JetCollection, monkeypatch) -> None:
    """Issue 61 point 8: one row per jet, the columns of to_awkward without the trees (and the
    tree's leaf count); several algorithms side by side under one column level each."""
    small = jets.take(np.flatnonzero(jets.n_leaves <= 9)[:6])
    full = cluster(small, "trellis", log_z=True)
    df = full.to_pandas()
    assert len(df) == len(small) and df["jet_id"].tolist() == small.jet_id.tolist()
    assert df["log_likelihood"].tolist() == full.log_likelihood.tolist()
    assert df["log_z"].tolist() == full.log_z.tolist()
    assert df["n_leaves"].tolist() == small.n_leaves.tolist()
    assert set(df["status"]) == {"ok"} and df["finite"].all()
    assert "log_z" not in cluster(small, "greedy").to_pandas().columns
    both = cluster_jets(small, ["greedy", "kt"], progress=False).to_pandas()
    assert both["jet_id"].tolist() == small.jet_id.tolist()
    assert both["kt", "log_likelihood"].tolist() == cluster(small, "kt").log_likelihood.tolist()
    # without pandas: how to install it
    import builtins

    real_import = builtins.__import__

    def no_pandas(name, *args, **kwargs):
        if name == "pandas":
            raise ImportError("No module named 'pandas'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pandas)
    with pytest.raises(ImportError, match=r"pip install 'jetastar\[pandas\]'"):
        full.to_pandas()


def _strided_buffers(layout: object, path: str = "") -> list[str]:
    """The fields of an awkward layout whose numpy buffers are not C-contiguous."""
    if isinstance(layout, ak.contents.NumpyArray):
        return [] if layout.data.flags["C_CONTIGUOUS"] else [path]
    if isinstance(layout, ak.contents.RecordArray):
        return [p for f, c in zip(layout.fields, layout.contents, strict=True)
                for p in _strided_buffers(c, f"{path}.{f}")]
    inner = [layout.content] if hasattr(layout, "content") else getattr(layout, "contents", [])
    return [p for c in inner for p in _strided_buffers(c, path)]


def test_awkward_outputs_have_contiguous_buffers():
    """ak.to_parquet of jetastar's awkward arrays failed ("ndarray is not contiguous"): the tree's
    left / right and the momenta were strided views of (n, 2) / (n, 4) arrays."""
    import jetastar

    jets = generate(5, ShowerParams.qcd(), seed=1)
    both = jetastar.cluster_jets(jets, ["greedy", "kt"], progress=False)
    for name, arr in (("results", jetastar.cluster(jets, "greedy").to_awkward()),
                      ("jets", jets.to_awkward()), ("jet results", both.to_awkward())):
        assert _strided_buffers(ak.to_layout(arr)) == [], name


def test_worker_death_advice_names_a_script_read_from_stdin(monkeypatch):
    """`python - < script.py` (guarded) with workers=2 was told to add the __main__ guard it had."""
    import sys
    import types

    from jetastar import inmemory

    main = types.ModuleType("__main__")
    main.__file__ = "<stdin>"
    monkeypatch.setitem(sys.modules, "__main__", main)
    assert "came from <stdin> (standard input" in inmemory._worker_death_advice()
    main.__file__ = __file__  # a script file: the __main__ guard is the usual cause
    assert 'if __name__ == "__main__":' in inmemory._worker_death_advice()
