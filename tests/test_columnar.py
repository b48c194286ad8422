"""The columnar path (jetastar.clustering.columnar): whole chunks in one kernel call give the results
of the per-jet path, row for row, on thousands of QCD and W jets, in both likelihood forms,
including -inf trees and invalid jets; and the per-jet leaf validator it shares with Jet."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers.perjet_algorithms import BEAM_TWINS, EXACT_TWINS, MCTS_TWINS, TWINS, WINDOW_TWINS
from helpers.processes import interrupted_on_call

import jetastar
from jetastar import JetCollection
from jetastar._columnar import first_leaf_problem, leaf_problems
from jetastar.batch import BatchConfig, cluster_collection
from jetastar.clustering import beam_search, exact_map, exact_trellis, exact_trellis_batch, greedy, kt, mcts
from jetastar.clustering.chunks import (
    DONE,
    INVALID,
    NOT_RUN,
    PER_JET,
    cluster_columns,
    columnar_options,
    score_columns,
)
from jetastar.clustering.estimates import estimate_seconds
from jetastar.clustering.exact._map_kernels import EXACT_CHUNK_MAX
from jetastar.clustering.search._beam_kernels import BEAM_CHUNK_MAX
from jetastar.ginkgo import ShowerParams, generate, log_likelihood

ALGS = ("greedy", "kt", "cambridge", "antikt")


@pytest.fixture(scope="module")
def jets():
    """1000 QCD and 1000 W jets (default parameters, ~8 and ~11 leaves) and 60 larger QCD jets
    (t_cut 1 GeV², ~20 leaves)."""
    return JetCollection.concatenate([
        generate(1000, ShowerParams.qcd(), seed=331),
        generate(1000, ShowerParams.w(), seed=332),
        generate(60, ShowerParams.qcd(t_cut=1.0), seed=333),
    ])


def _per_jet(jet, name, likelihood):
    if name == "greedy":
        return greedy(jet, likelihood=likelihood)
    return kt(jet, algorithm=name, likelihood=likelihood)


@pytest.mark.parametrize("likelihood", ["symmetric", "legacy"])
def test_flat_results_are_the_per_jet_results(jets, likelihood):
    flat = cluster_columns(jets, {name: {"likelihood": likelihood} for name in ALGS})
    minus_inf = {name: 0 for name in ALGS}
    for i in range(len(jets)):
        jet = jets[i]
        for name in ALGS:
            ref = _per_jet(jet, name, likelihood)
            got = flat[name]
            assert got.outcome[i] == DONE
            a, b = got.node_offsets[i], got.node_offsets[i + 1]
            assert np.array_equal(got.children[a:b], ref.tree.children), (name, i)
            assert np.array_equal(got.leaf_of_node[a:b], ref.tree.leaf_of_node), (name, i)
            value = got.log_likelihood[i]
            assert value == ref.log_likelihood or abs(value - ref.log_likelihood) <= 1e-12
            assert (got.status[i], got.message[i]) == (ref.status, ref.message), (name, i)
            if name == "greedy":
                assert got.counters["splits_evaluated"][i] == ref.stats["splits_evaluated"]
            minus_inf[name] += not math.isfinite(ref.log_likelihood)
        if i < 3:
            lazy = flat["greedy"].result(i)
            assert lazy.tree == ref_tree(jet, likelihood) and lazy.likelihood == likelihood
    # the kt family's trees are often impossible in the model: -inf rows were compared too
    assert min(minus_inf[n] for n in ("kt", "cambridge", "antikt")) > 100


def ref_tree(jet, likelihood):
    return greedy(jet, likelihood=likelihood).tree


def _broken(jets):
    """A copy of 300 of the jets with invalid and awkward jets put in: bad leaves of each kind,
    bad parameters, a leaf without a rapidity, a jet whose every greedy merge is -inf."""
    sub = jets.take(np.r_[0:150, 1000:1150])
    leaves = sub.leaves.copy()
    loff = sub.leaf_offsets
    params = {k: v.copy() for k, v in sub.params.items()}
    leaves[loff[3] + 1, 2] = np.nan  # non-finite
    leaves[loff[10], 0] = -1.0  # non-positive energy
    leaves[loff[20] + 2, 0] = 0.5 * np.abs(leaves[loff[20] + 2, 3])  # spacelike
    params["t_cut"][30] = params["t_root"][30] * 2.0  # t_cut above the root
    params["lam"][40] = -1.0
    params["root_momentum"][50] = [1.0, 2.0, 0.0, 0.0]  # not timelike
    leaves[loff[60]] = [1e-300, 1e-301, 0.0, 0.0]  # no computable rapidity (kt family only)
    # every greedy merge -inf: three light leaves of a jet whose mass is far below t_cut
    n70 = loff[71] - loff[70]
    for k in range(n70):
        leaves[loff[70] + k] = [10.0 + 0.001 * k, 0.001 * k, 0.0, 9.99]
    broken = JetCollection(
        leaves=leaves, leaf_offsets=loff, children=sub.children, leaf_of_node=sub.leaf_of_node,
        node_offsets=sub.node_offsets, jet_id=sub.jet_id + 5000, seed=sub.seed,
        jet_type=sub.jet_type, params=params,
    )
    # a jet of one leaf
    one = JetCollection(
        leaves=leaves[:1], leaf_offsets=np.array([0, 1]), children=np.empty((0, 2)),
        leaf_of_node=np.empty(0), node_offsets=np.array([0, 0]), jet_id=np.array([9999]),
        seed=np.array([-1]), jet_type=np.array(["QCD"], dtype=object),
        params={k: v[:1] for k, v in params.items()},
    )
    return JetCollection.concatenate([broken, one])


def _assert_same_table(a, b, twin):
    assert len(a) == len(b)
    assert np.array_equal(a.jet_index, b.jet_index) and np.array_equal(a.jet_id, b.jet_id)
    assert list(a.status) == list(b.status)
    assert [m.replace(repr(twin), repr(a.algorithm)) for m in b.message] == list(a.message)
    assert list(a.options) == list(b.options)
    assert np.array_equal(a.node_offsets, b.node_offsets)
    assert np.array_equal(a.children, b.children)
    assert np.array_equal(a.leaf_of_node, b.leaf_of_node)
    x, y = a.log_likelihood, b.log_likelihood
    assert np.array_equal(np.isnan(x), np.isnan(y)) and np.array_equal(np.isinf(x), np.isinf(y))
    fin = np.isfinite(x)
    assert np.all(np.abs(x[fin] - y[fin]) <= 1e-12)
    assert sorted(a.counters) == sorted(b.counters)
    for k in a.counters:
        assert np.array_equal(a.counters[k], b.counters[k], equal_nan=True)
    assert (a.likelihood, a.exact_method) == (b.likelihood, b.exact_method)
    assert np.array_equal(np.isnan(a.time_s), np.isnan(b.time_s))


def _twin_tables(chunk, names, twins, options, **config):
    """``cluster_collection`` of ``chunk`` with the algorithms ``names`` and their per-jet
    ``twins`` (twin -> columnar name), ``options`` for all of them; asserts that every twin's table
    is the columnar one's (:func:`_assert_same_table`) and returns the tables."""
    config = BatchConfig([*names, *twins], options={"*": options},
                         plugins=["helpers.perjet_algorithms"], **config)
    tables = cluster_collection(chunk, config, first_index=7, source="jets.h5")
    for twin, name in twins.items():
        _assert_same_table(tables[name], tables[twin], twin)
    return tables


def test_each_algorithm_gets_its_own_time(jets, monkeypatch):
    """A columnar call times each algorithm apart (its kernel calls and arrays, plus an equal
    share of the common preparation), and a batch table shares its algorithm's seconds among its
    rows by work: cheap greedy is not charged beam search's time. The clock here moves only in
    the kernels (1 s a greedy call, 2 s a kt call, 10 s a beam search), so nothing rests on how
    fast this machine is."""
    from jetastar.clustering import algorithm_info, chunks
    from jetastar.clustering.agglomerative import _merge_chunk

    now = [0.0]

    class Clock:
        def __init__(self) -> None:
            self.start = now[0]

        def seconds(self) -> float:
            return now[0] - self.start

    def ticking(function, step):
        def run(*args):
            now[0] += step(args)
            return function(*args)
        return run

    per_call = {_merge_chunk.ALG_GREEDY: 1.0, _merge_chunk.ALG_KT: 2.0}
    monkeypatch.setattr(chunks, "Stopwatch", Clock)
    monkeypatch.setattr(_merge_chunk, "cluster_chunk",
                        ticking(_merge_chunk.cluster_chunk, lambda args: per_call[int(args[5][0])]))
    beam_path = algorithm_info("beam").chunk
    monkeypatch.setattr(beam_path, "run", ticking(beam_path.run, lambda args: 10.0))
    chosen = jets[:200]
    names = {"greedy": {}, "kt": {}, "beam": {"beam_size": 50}}
    flat = cluster_columns(chosen, names)
    seconds = {"greedy": 1.0, "kt": 2.0, "beam": 10.0}
    assert {name: flat[name].seconds for name in names} == seconds
    tables = cluster_collection(chosen, BatchConfig(list(names), options=names))
    for name, total in seconds.items():
        done = flat[name].outcome == DONE
        work = flat[name].work
        assert done.sum() > 150
        assert np.sum(tables[name].time_s[done]) == pytest.approx(
            total * work[done].sum() / work.sum(), rel=1e-12)


@pytest.mark.parametrize("likelihood", ["symmetric", "legacy"])
def test_batch_tables_with_invalid_jets_equal_the_per_jet_path(jets, likelihood):
    chunk = _broken(jets)
    tables = _twin_tables(chunk, ALGS, TWINS, {"likelihood": likelihood},
                          max_leaves={"cambridge": 9, "perjet-cambridge": 9})
    greedy_t, kt_t = tables["greedy"], tables["kt"]
    status = list(greedy_t.status)
    for i in (3, 10, 20, 30, 40, 50, len(chunk) - 1):
        assert status[i] == "failed" and greedy_t.message[i].startswith(f"jets.h5: entry {7 + i}:")
    assert kt_t.status[60] == "failed" and "rapidity" in kt_t.message[60]
    assert greedy_t.status[60] != "failed"  # greedy needs no rapidity
    assert greedy_t.status[70] == "all_inf" and "every possible merge" in greedy_t.message[70]
    assert (tables["cambridge"].status == "skipped").sum() > 50
    assert status.count("ok") > 250


def test_outcomes_of_invalid_jets(jets):
    chunk = _broken(jets)
    flat = cluster_columns(chunk, {"greedy": {}, "kt": {}})
    assert flat["greedy"].outcome[3] == INVALID and flat["kt"].outcome[60] == PER_JET
    assert flat["greedy"].outcome[60] == DONE
    assert flat["kt"].result(3).status == "failed"  # the per-jet path, lazily
    assert "rapidity" in flat["kt"].result(60).message
    # a small R leaves several jets: the per-jet function says so
    small = cluster_columns(jets[:5], {"antikt": {"R": 0.01}})["antikt"]
    assert list(small.outcome) == [PER_JET] * 5
    assert "inclusive jets" in small.result(0).message


def test_time_limits_skip_as_the_per_jet_path(jets):
    limit = 2e-6  # greedy's estimate passes it from 11 leaves
    config = BatchConfig(["greedy", "perjet-greedy"], time_limit=limit,
                         plugins=["helpers.perjet_algorithms"])
    sub = jets[:200]
    tables = cluster_collection(sub, config)
    a, b = tables["greedy"], tables["perjet-greedy"]  # the twin has no time estimate
    hopeless = np.array([estimate_seconds("greedy", n, {}) > limit for n in sub.n_leaves])
    assert 0 < hopeless.sum() < 200
    assert list(a.status[hopeless]) == ["skipped"] * int(hopeless.sum())
    assert all(m.startswith("not started: 'greedy' is estimated") for m in a.message[hopeless])
    assert np.array_equal(a.log_likelihood[~hopeless], b.log_likelihood[~hopeless])
    assert list(a.status[~hopeless]) == list(b.status[~hopeless])


@pytest.mark.parametrize("likelihood", ["symmetric", "legacy"])
def test_scores_of_given_trees_are_log_likelihood(jets, likelihood):
    sub = jets.take(np.r_[0:300, 1000:1300, 2000:2060])
    ll, status = score_columns(sub, likelihood=likelihood)  # the truth trees
    assert set(status) == {"ok"}
    for i in range(len(sub)):
        ref = log_likelihood(sub[i], likelihood=likelihood)
        assert ll[i] == ref or abs(ll[i] - ref) <= 1e-12
    table = jetastar.cluster(sub, "antikt", likelihood=likelihood)
    ll2, status2 = score_columns(sub, (table.children, table.leaf_of_node, table.node_offsets),
                                 likelihood)
    assert set(status2) == {"ok"}
    assert np.array_equal(ll2, table.log_likelihood)


def test_scores_of_missing_and_broken_trees(jets):
    sub = jets.take(np.arange(4))
    children = sub.children.copy()
    a = sub.node_offsets[1]
    root = a + int(np.flatnonzero(children[a:sub.node_offsets[2], 0] >= 0)[0])
    children[root] = children[root, ::-1] * 0  # a node listing node 0 twice
    sizes = np.diff(sub.node_offsets)
    sizes[2] = 0
    keep = np.repeat(np.arange(4) != 2, np.diff(sub.node_offsets))
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    ll, status = score_columns(sub, (children[keep], sub.leaf_of_node[keep], offsets))
    assert list(status) == ["ok", "bad tree", "no tree", "ok"]
    assert np.isnan(ll[1]) and np.isnan(ll[2]) and ll[3] == log_likelihood(sub[3])
    with pytest.raises(ValueError, match="likelihood"):
        score_columns(sub, likelihood="other")


def test_columnar_options():
    assert columnar_options("greedy", {}) == {"likelihood": "symmetric"}
    assert columnar_options("greedy", {"R": 1.0}) is None
    assert columnar_options("kt", {"R": -1.0}) is None
    assert columnar_options("kt", {"likelihood": "x"}) is None
    with pytest.raises(ValueError, match="columnar path"):
        cluster_columns(generate(2, ShowerParams.qcd(), seed=1), {"astar-approx": {}})


def test_per_jet_leaf_problems_agree_with_the_first_problem():
    rng = np.random.default_rng(5)
    counts = rng.integers(0, 6, 400)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    p = np.abs(rng.normal(size=(offsets[-1], 4))) * [3.0, 1.0, 1.0, 1.0]
    bad = rng.integers(0, offsets[-1], 60)
    p[bad, rng.integers(0, 4, 60)] = rng.choice([np.nan, np.inf, -1.0, 0.0, 0.01], 60)
    kind, leaf, _, value = leaf_problems(p, offsets)
    names = ("too few", "non-finite", "non-positive energy", "spacelike")
    for j in range(400):
        one = first_leaf_problem(p[offsets[j]:offsets[j + 1]], [0, counts[j]])
        assert (one is None) == (kind[j] == 0)
        if one is not None:
            assert (one.kind, one.leaf) == (names[kind[j] - 1], leaf[j])
            assert one.value == value[j] or (np.isnan(one.value) and np.isnan(value[j]))
    assert set(kind.tolist()) == {0, 1, 2, 3, 4}


# ---------------------------------------------------------------------- the exact MAP engine
def _small_jets(jets, max_leaves):
    """The jets of the fixture with at most ``max_leaves`` leaves (of each type), as a collection."""
    n = np.diff(jets.leaf_offsets)
    return jets.take(np.flatnonzero(n <= max_leaves))


@pytest.mark.parametrize("likelihood", ["symmetric", "legacy"])
@pytest.mark.parametrize("parallel", [False, True])
def test_exact_map_of_small_jets_is_the_engine_result(jets, likelihood, parallel):
    """One kernel call solves every jet of up to 14 leaves: the tree, value, status, message,
    options and counters of exact_map (the lazily made result is equal field by field); larger
    jets are left to the per-jet engine."""
    sub = _small_jets(jets, 16)
    flat = cluster_columns(sub, {"trellis": {"likelihood": likelihood}}, parallel=parallel)["trellis"]
    sizes = np.diff(sub.leaf_offsets)
    assert np.array_equal(flat.outcome == PER_JET, sizes > 14)
    assert (sizes > 14).sum() > 10 and (sizes <= 14).sum() > 1000
    for i in np.flatnonzero(flat.outcome == DONE)[::3].tolist():
        got = flat.result(i)
        ref = exact_map(sub[i], likelihood)
        assert np.array_equal(got.tree.children, ref.tree.children), i
        assert np.array_equal(got.tree.leaf_of_node, ref.tree.leaf_of_node), i
        assert got.log_likelihood == ref.log_likelihood and got.upper_bound == ref.upper_bound
        assert (got.status, got.message, got.exact) == (ref.status, ref.message, ref.exact)
        assert got.options == ref.options and got.jet_id == ref.jet_id
        timing = ("time_s", "time_setup_s", "time_dp_s")
        assert got.stats == {k: v for k, v in ref.stats.items() if k not in timing}


def test_exact_map_tables_with_invalid_and_minus_inf_jets_equal_the_per_jet_path(jets):
    """A batch chunk with invalid, one-leaf and -inf jets: the columnar exact MAP's table is the
    per-jet engine's, row for row (timing counters aside), in both likelihood forms."""
    chunk = _broken(jets)
    for likelihood in ("symmetric", "legacy"):
        names = ["trellis", *EXACT_TWINS]
        config = BatchConfig(names, options={"*": {"likelihood": likelihood}},
                             max_leaves={n: 16 for n in names},
                             plugins=["helpers.perjet_algorithms"])
        tables = cluster_collection(chunk, config, first_index=7, source="jets.h5")
        for twin, name in EXACT_TWINS.items():
            a, b = tables[name], tables[twin]
            for k in ("time_setup_s", "time_dp_s"):  # timings (of the per-jet rows only in a)
                a.counters.pop(k, None)
                b.counters.pop(k, None)
            _assert_same_table(a, b, twin)
            assert np.array_equal(a.exact, b.exact)
            assert np.array_equal(a.upper_bound, b.upper_bound, equal_nan=True)
        t = tables["trellis"]
        assert t.status[70] == "all_inf" and t.log_likelihood[70] == -math.inf
        assert t.status[3] == "failed" and t.message[3].startswith("jets.h5: entry 10:")
        assert (t.status == "skipped").sum() > 5 and list(t.status).count("ok") > 250
        assert t.exact[0] and t.upper_bound[0] == t.log_likelihood[0]


def test_exact_map_outcomes_and_routing(jets):
    chunk = _broken(jets)
    flat = cluster_columns(chunk, {"trellis": {}})["trellis"]
    assert flat.outcome[3] == INVALID and flat.outcome[len(chunk) - 1] == INVALID
    assert flat.outcome[60] == DONE  # the MAP needs no rapidity
    only = np.zeros(len(chunk), dtype=bool)
    only[:3] = True
    some = cluster_columns(chunk, {"trellis": {}}, only={"trellis": only})["trellis"]
    assert list(some.outcome[:3]) == [DONE] * 3 and NOT_RUN in set(some.outcome[4:].tolist())


def test_exact_map_columnar_options():
    assert columnar_options("trellis", {}) == {
        "likelihood": "symmetric", "max_time": None, "max_memory": None, "prune": True,
        "threads": None, "incumbent": False, "device": "cpu"}
    opts = columnar_options("trellis", {"max_time": 5, "threads": 1, "progress": False,
                                        "likelihood": "legacy", "device": "auto"})
    assert opts["max_time"] == 5.0 and opts["threads"] == 1 and opts["likelihood"] == "legacy"
    assert columnar_options("trellis", opts) == opts  # what it returns reads back
    assert columnar_options("trellis", {"log_z": True})["log_z"] is True  # the full trellis
    assert columnar_options("trellis", {"device": "gpu"}) is None
    assert columnar_options("trellis", {"max_memory": 1000}) is None
    assert columnar_options("trellis", {"max_time": -1}) is None


def test_exact_map_calls_of_any_size_give_the_same_rows(jets, monkeypatch):
    """The chunk's jets go to the kernel in runs of bounded work (an interrupt is seen between
    two runs): one jet per call gives the rows of the default runs."""
    from jetastar.clustering.exact import _map_kernels

    sub = _small_jets(jets, 12)[:300]
    whole = cluster_columns(sub, {"trellis": {}})["trellis"]
    monkeypatch.setattr(_map_kernels, "MAP_SLICE_SPLITS", 1)
    cut = cluster_columns(sub, {"trellis": {}})["trellis"]
    assert np.array_equal(whole.outcome, cut.outcome)
    assert np.array_equal(whole.children, cut.children)
    assert np.array_equal(whole.log_likelihood, cut.log_likelihood, equal_nan=True)
    for k in whole.counters:
        assert np.array_equal(whole.counters[k], cut.counters[k], equal_nan=True)


@pytest.mark.parametrize(("name", "options", "module", "kernel", "per_call"), [
    ("trellis", {}, "exact._map_kernels", "_map_serial", "MAP_SLICE_SPLITS"),
    ("trellis", {"log_z": True}, "exact._trellis_kernels", "_trellis_serial",
     "TRELLIS_SLICE_SPLITS"),
    ("beam", {"beam_size": 3}, "search._beam_kernels", "_beam_serial", "BEAM_SLICE_WORK"),
    ("mcts", {"n_rollouts": 3}, "search._mcts_kernels", "_mcts_serial", "MCTS_SLICE_WORK"),
])
def test_interrupt_is_raised_between_calls(jets, monkeypatch, name, options, module, kernel,
                                           per_call, python_sigint):
    import importlib

    kernels = importlib.import_module(f"jetastar.clustering.{module}")
    calls: list[int] = []
    monkeypatch.setattr(kernels, per_call, 1)
    monkeypatch.setattr(kernels, kernel, interrupted_on_call(getattr(kernels, kernel), calls))
    chosen = _small_jets(jets, 12)[:50] if name == "trellis" else jets[:50]
    with pytest.raises(KeyboardInterrupt):
        cluster_columns(chosen, {name: options}, parallel=False)
    assert len(calls) == 2


@pytest.mark.parametrize("n_lists", [1, 2, 3, 8])
def test_balanced_lists_deal_every_job_once_largest_first(n_lists):
    """A parallel call's jets are dealt into one list per thread, largest first, each to the
    least loaded list: every job once, and no list more than one job's cost above another."""
    from jetastar.clustering._chunk_kernels import balanced_lists

    rng = np.random.default_rng(5)
    for cost in (rng.exponential(1.0, 37), np.zeros(5), 3.0 ** rng.integers(2, 15, 60),
                 np.array([7.0])):
        jobs, offsets = balanced_lists(cost, n_lists)
        assert offsets[0] == 0 and offsets[-1] == cost.size and np.all(np.diff(offsets) >= 0)
        assert np.array_equal(np.sort(jobs), np.arange(cost.size))
        loads = np.array([cost[jobs[offsets[t]:offsets[t + 1]]].sum() for t in range(n_lists)])
        assert loads.max() - loads.min() <= cost.max() + 1e-9 * cost.sum()
        for t in range(n_lists):  # each list in the order dealt: decreasing cost
            assert np.all(np.diff(cost[jobs[offsets[t]:offsets[t + 1]]]) <= 0)
        again = balanced_lists(cost, n_lists)
        assert np.array_equal(again[0], jobs) and np.array_equal(again[1], offsets)


@pytest.mark.parametrize(("name", "options"), [
    ("trellis", {}), ("trellis", {"log_z": True}), ("beam", {"beam_size": 3}),
    ("mcts", {"n_rollouts": 3}),
])
def test_threads_dealt_jets_give_the_rows_of_one_thread(jets, name, options):
    """Jets dealt to the threads by cost (several per call, out of order) give the rows of the
    serial kernel, jets in order."""
    chosen = _small_jets(jets, 16)[:120] if name == "trellis" else jets[:120]
    one = cluster_columns(chosen, {name: options}, parallel=False)[name]
    dealt = cluster_columns(chosen, {name: options}, parallel=True)[name]
    assert np.array_equal(one.outcome, dealt.outcome)
    assert np.array_equal(one.children, dealt.children)
    assert np.array_equal(one.log_likelihood, dealt.log_likelihood, equal_nan=True)
    assert set(one.counters) == set(dealt.counters)
    for k in one.counters:
        if k != "threads":
            assert np.array_equal(one.counters[k], dealt.counters[k], equal_nan=True), k


# ---------------------------------------------------------------------- the full trellis (log Z)
def _same_as_exact_trellis(got, ref, i):
    """A columnar full-trellis row is exact_trellis' result: tree, MAP value, log Z, tree count,
    status, message, options and counters (timings aside), bit for bit."""
    assert np.array_equal(got.tree.children, ref.tree.children), i
    assert np.array_equal(got.tree.leaf_of_node, ref.tree.leaf_of_node), i
    assert got.log_likelihood == ref.log_likelihood and got.upper_bound == ref.upper_bound, i
    assert got.log_z == ref.log_z and got.n_trees == ref.n_trees, i
    assert type(got.n_trees) is type(ref.n_trees) is int
    assert (got.status, got.message, got.exact) == (ref.status, ref.message, ref.exact), i
    assert got.options == ref.options and got.jet_id == ref.jet_id, i
    timing = ("time_s", "time_setup_s", "time_dp_s")  # (a row left to exact_trellis has them)
    assert {k: v for k, v in got.stats.items() if k not in timing} == {
        k: v for k, v in ref.stats.items() if k not in timing}, i


@pytest.mark.parametrize(("likelihood", "parallel"), [("symmetric", False), ("legacy", True)])
def test_full_trellis_of_small_jets_is_exact_trellis(jets, likelihood, parallel):
    """With log_z, one kernel call solves the full trellis of every jet of up to 14 leaves: the
    result of exact_trellis, field by field; larger jets are left to the per-jet trellis (every
    jet of up to 12 leaves and six of each larger size: a full trellis of 14 leaves is ~0.2 s)."""
    sizes = np.diff(jets.leaf_offsets)
    sub = jets.take(np.sort(np.concatenate([
        np.flatnonzero(sizes <= 12), *(np.flatnonzero(sizes == k)[:6] for k in range(13, 17))])))
    flat = cluster_columns(sub, {"trellis": {"likelihood": likelihood, "log_z": True}},
                           parallel=parallel)["trellis"]
    sizes = np.diff(sub.leaf_offsets)
    assert np.array_equal(flat.outcome == PER_JET, sizes > 14)
    assert np.array_equal(flat.outcome == DONE, sizes <= 14)
    for i in np.flatnonzero(flat.outcome == DONE)[::5].tolist():
        _same_as_exact_trellis(flat.result(i), exact_trellis(sub[i], likelihood), i)
    i = int(np.flatnonzero(flat.outcome == PER_JET)[0])  # the per-jet trellis, with log Z
    _same_as_exact_trellis(flat.result(i), exact_trellis(sub[i], likelihood), i)


def test_full_trellis_tables_with_invalid_and_minus_inf_jets_equal_the_per_jet_path(jets):
    """A batch chunk with invalid, one-leaf and -inf jets: the columnar full trellis' table is the
    per-jet trellis', row for row, log Z and tree counts included (timing counters aside)."""
    chunk = _broken(jets)
    for likelihood in ("symmetric", "legacy"):
        names = ["trellis", *EXACT_TWINS]
        config = BatchConfig(names, options={"*": {"likelihood": likelihood, "log_z": True}},
                             max_leaves={n: 12 for n in names},
                             plugins=["helpers.perjet_algorithms"])
        tables = cluster_collection(chunk, config, first_index=7, source="jets.h5")
        for twin, name in EXACT_TWINS.items():
            a, b = tables[name], tables[twin]
            for k in ("time_setup_s", "time_dp_s"):
                a.counters.pop(k, None)
                b.counters.pop(k, None)
            _assert_same_table(a, b, twin)
            assert np.array_equal(a.exact, b.exact)
            assert np.array_equal(a.upper_bound, b.upper_bound, equal_nan=True)
            assert np.array_equal(a.log_z, b.log_z, equal_nan=True)
            assert np.array_equal(a.n_trees, b.n_trees, equal_nan=True)
        t = tables["trellis"]
        assert t.status[70] == "all_inf" and t.log_z[70] == -math.inf and t.n_trees[70] == 0
        assert t.status[3] == "failed" and np.isnan(t.log_z[3])
        ok = t.status == "ok"
        assert ok.sum() > 150 and np.all(t.log_z[ok] >= t.log_likelihood[ok])
        assert np.all(t.n_trees[ok] >= 1)


def test_full_trellis_calls_of_any_size_give_the_same_rows(jets, monkeypatch):
    from jetastar.clustering.exact import _trellis_kernels

    sub = _small_jets(jets, 12)[:300]
    whole = cluster_columns(sub, {"trellis": {"log_z": True}})["trellis"]
    monkeypatch.setattr(_trellis_kernels, "TRELLIS_SLICE_SPLITS", 1)
    cut = cluster_columns(sub, {"trellis": {"log_z": True}}, parallel=False)["trellis"]
    assert np.array_equal(whole.outcome, cut.outcome)
    assert np.array_equal(whole.children, cut.children)
    for k in ("log_likelihood", "log_z", "n_trees"):
        assert np.array_equal(getattr(whole, k), getattr(cut, k), equal_nan=True)
    for k in whole.counters:
        assert np.array_equal(whole.counters[k], cut.counters[k], equal_nan=True)


def test_full_trellis_columnar_options():
    opts = columnar_options("trellis", {"log_z": True, "max_time": 5, "threads": 1,
                                        "progress": False, "likelihood": "legacy"})
    assert opts == {"likelihood": "legacy", "max_memory": None, "threads": 1, "prune": True,
                    "device": "cpu", "log_z": True}
    assert columnar_options("trellis", opts) == opts  # what it returns reads back
    # a limit between the MAP engine's tables and the full trellis' at 14 leaves
    from jetastar.clustering._engine import estimate_trellis_memory
    from jetastar.clustering.exact.exact_map import estimate_map_memory

    limit = estimate_trellis_memory(14) - 1
    assert estimate_map_memory(14) <= limit
    assert columnar_options("trellis", {"max_memory": limit}) is not None
    assert columnar_options("trellis", {"max_memory": limit, "log_z": True}) is None
    assert columnar_options("trellis", {"log_z": True, "prune": False}) is None
    assert columnar_options("trellis", {"log_z": True, "device": "gpu"}) is None


def test_exact_trellis_batch_on_the_cpu_is_exact_trellis(jets):
    """exact_trellis_batch of a collection on the CPU: the columnar path for jets of up to 14
    leaves, the per-jet trellis for larger ones; every result is exact_trellis'; a collection
    with an invalid jet still raises the error naming it."""
    sub = _small_jets(jets, 16)
    sizes = np.diff(sub.leaf_offsets)
    pick = sub.take(np.r_[np.flatnonzero(sizes > 14)[:3], np.arange(40)])
    got = exact_trellis_batch(pick, "legacy", device="cpu")
    assert len(got) == len(pick)
    for i, res in enumerate(got):
        _same_as_exact_trellis(res, exact_trellis(pick[i], "legacy"), i)
    with pytest.raises(jetastar.InvalidJetError, match="5003"):
        exact_trellis_batch(_broken(jets), device="cpu")


# ---------------------------------------------------------------------- beam search
def _same_as_beam_search(flat, jets, i, **options):
    """Row ``i`` of the columnar beam search is beam_search's result (all but ``beam`` and
    ``time_s``): tree (canonical children), value bit for bit, status, message, options,
    counters."""
    got = flat.result(i)
    ref = beam_search(jets[i], **options)
    assert np.array_equal(got.tree.children, ref.tree.children), i
    assert np.array_equal(got.tree.leaf_of_node, ref.tree.leaf_of_node), i
    assert got.log_likelihood == ref.log_likelihood or (
        math.isnan(got.log_likelihood) and math.isnan(ref.log_likelihood)), i
    assert (got.status, got.message, got.options) == (ref.status, ref.message, ref.options), i
    assert got.stats == {k: v for k, v in ref.stats.items() if k != "time_s"}, i
    assert got.beam is None and got.jet_id == ref.jet_id
    return ref


@pytest.mark.parametrize("likelihood", ["symmetric", "legacy"])
@pytest.mark.parametrize("beam_size,guard", [(None, True), (1, True), (2, True), (3, True),
                                             (6, True), (3, False), (None, False)])
def test_beam_of_every_jet_is_beam_search(jets, likelihood, beam_size, guard):
    """One kernel call runs beam search on every jet of 2060 (QCD and W, ~8, ~11 and ~20
    leaves): the per-jet function's tree, value, status, message, options and counters. Small
    beams make the greedy guard add the greedy tree, often replacing the last of the worst."""
    options = {"beam_size": beam_size, "likelihood": likelihood, "greedy_guard": guard}
    flat = cluster_columns(jets, {"beam": options})["beam"]
    assert np.all(flat.outcome == DONE)
    added = replaced = 0
    for i in range(len(jets)):
        ref = _same_as_beam_search(flat, jets, i, **options)
        added += ref.stats["greedy_added"]
        replaced += ref.stats["greedy_added"] and ref.stats["beam_trees"] == (beam_size or 0)
    if guard and beam_size in (2, 3):
        assert added > 20 and replaced > 20
    if not guard:
        assert added == 0


def test_beam_calls_of_any_size_and_threads_give_the_same_rows(jets, monkeypatch):
    from jetastar.clustering.search import _beam_kernels

    sub = jets.take(np.r_[0:200, 1000:1200, 2000:2030])
    whole = cluster_columns(sub, {"beam": {}}, parallel=False)["beam"]
    monkeypatch.setattr(_beam_kernels, "BEAM_SLICE_WORK", 1)
    for parallel in (False, True):
        cut = cluster_columns(sub, {"beam": {}}, parallel=parallel)["beam"]
        assert np.array_equal(whole.outcome, cut.outcome)
        assert np.array_equal(whole.children, cut.children)
        assert np.array_equal(whole.log_likelihood, cut.log_likelihood, equal_nan=True)
        assert sorted(whole.counters) == sorted(cut.counters)
        for k in whole.counters:
            assert np.array_equal(whole.counters[k], cut.counters[k], equal_nan=True)


@pytest.mark.parametrize("likelihood", ["symmetric", "legacy"])
def test_beam_tables_with_invalid_and_minus_inf_jets_equal_the_per_jet_path(jets, likelihood):
    """A batch chunk with invalid, one-leaf and -inf jets: the columnar beam search's table is
    the per-jet function's, row for row (time aside), with the default and a small beam."""
    chunk = _broken(jets)
    for options in ({}, {"beam_size": 2}, {"beam_size": 4, "greedy_guard": False}):
        tables = _twin_tables(chunk, ["beam"], BEAM_TWINS, {"likelihood": likelihood, **options})
        t = tables["beam"]
        assert t.status[70] == "all_inf" and t.log_likelihood[70] == -math.inf
        assert "every tree of the final beam" in t.message[70]
        assert t.status[3] == "failed" and t.message[3].startswith("jets.h5: entry 10:")
        assert list(t.status).count("ok") > 250


def test_beam_with_a_time_limit_is_the_per_jet_path(jets, monkeypatch):
    """Under a time limit (``max_time``) a search that is not done after the per-jet function's
    first slice of work goes to that function: here a cap of 20 000 units sends the larger jets
    there, and the table is still the per-jet path's."""
    from jetastar.clustering.search import beam as beam_module

    chunk = jets.take(np.r_[0:100, 1000:1100, 2000:2030])
    names = ["beam", *BEAM_TWINS]
    config = BatchConfig(names, time_limit=30.0, plugins=["helpers.perjet_algorithms"])
    monkeypatch.setattr(beam_module, "FIRST_BUDGET_SLICE_WORK", 20_000)
    flat = cluster_columns(chunk, {"beam": {"max_time": 30.0}})["beam"]
    assert 20 < (flat.outcome == PER_JET).sum() < len(chunk) - 20
    assert flat.result(int(np.flatnonzero(flat.outcome == DONE)[0])).options["max_time"] == 30.0
    tables = cluster_collection(chunk, config)
    _assert_same_table(tables["beam"], tables["perjet-beam"], "perjet-beam")
    assert set(tables["beam"].status) == {"ok"}


def test_beam_routing_and_options(jets):
    big = generate(40, ShowerParams.qcd(t_cut=0.1), seed=9)
    sizes = np.asarray(big.n_leaves)
    assert (sizes > BEAM_CHUNK_MAX).sum() > 3
    flat = cluster_columns(big, {"beam": {"beam_size": 2}})["beam"]
    assert np.array_equal(flat.outcome == PER_JET, sizes > BEAM_CHUNK_MAX)
    # a beam too large for the chunk kernel's memory: the per-jet function
    huge = cluster_columns(jets[:3], {"beam": {"beam_size": 10**7}})["beam"]
    assert set(huge.outcome.tolist()) <= {DONE, PER_JET}
    assert columnar_options("beam", {}) == {"likelihood": "symmetric", "beam_size": None,
                                            "greedy_guard": True, "max_time": None}
    opts = columnar_options("beam", {"beam_size": np.int64(5), "greedy_guard": 0,
                                     "max_time": 2})
    assert opts["beam_size"] == 5 and opts["greedy_guard"] is False and opts["max_time"] == 2.0
    assert columnar_options("beam", opts) == opts  # what it returns reads back
    for bad in ({"beam_size": 0}, {"beam_size": 2.5}, {"beam_size": True}, {"max_time": -1},
                {"likelihood": "x"}, {"threads": 1}):
        assert columnar_options("beam", bad) is None


# ---------------------------------------------------------------------- MCTS
def _mcts_jets(jets):
    """300 QCD and 300 W jets of the fixture and its 60 larger ones."""
    return jets.take(np.r_[0:300, 1000:1300, 2000:2060])


@pytest.mark.parametrize("likelihood", ["symmetric", "legacy"])
@pytest.mark.parametrize("options", [
    {},
    {"n_rollouts": 7, "beam_size": 2, "planning": "max", "decision": "most_visited"},
    {"prior": "uniform", "beam_size": 0, "n_mc_min": 3, "c_puct": 0.5,
     "reward_range": (-300.0, -20.0), "seed": None},
])
def test_mcts_of_every_jet_is_mcts(jets, likelihood, options):
    """One kernel call runs MCTS on every jet of 660 (QCD and W, ~8, ~11 and ~20 leaves): the
    per-jet function's tree (canonical children), value bit for bit, status, message, options
    and counters."""
    sub = _mcts_jets(jets)
    options = {"likelihood": likelihood, **options}
    flat = cluster_columns(sub, {"mcts": options})["mcts"]
    assert np.all(flat.outcome == DONE)
    for i in range(len(sub)):
        got = flat.result(i)
        ref = mcts(sub[i], **options)
        assert np.array_equal(got.tree.children, ref.tree.children), i
        assert np.array_equal(got.tree.leaf_of_node, ref.tree.leaf_of_node), i
        assert got.log_likelihood == ref.log_likelihood, i
        assert (got.status, got.message, got.options) == (ref.status, ref.message, ref.options), i
        # every counter equal; the per-jet function's time_s (a clock reading) is left out
        assert got.stats == {k: v for k, v in ref.stats.items() if k != "time_s"}, i
        assert got.jet_id == ref.jet_id and got.likelihood == likelihood


def test_mcts_calls_of_any_size_and_threads_give_the_same_rows(jets, monkeypatch):
    from jetastar.clustering.search import _mcts_kernels

    sub = jets.take(np.r_[0:100, 1000:1100, 2000:2020])
    whole = cluster_columns(sub, {"mcts": {}}, parallel=False)["mcts"]
    monkeypatch.setattr(_mcts_kernels, "MCTS_SLICE_WORK", 1)
    for parallel in (False, True):
        cut = cluster_columns(sub, {"mcts": {}}, parallel=parallel)["mcts"]
        assert np.array_equal(whole.outcome, cut.outcome)
        assert np.array_equal(whole.children, cut.children)
        assert np.array_equal(whole.log_likelihood, cut.log_likelihood, equal_nan=True)
        assert np.array_equal(whole.work, cut.work)
        for k in whole.counters:
            assert np.array_equal(whole.counters[k], cut.counters[k], equal_nan=True)


@pytest.mark.parametrize("likelihood", ["symmetric", "legacy"])
def test_mcts_tables_with_invalid_and_minus_inf_jets_equal_the_per_jet_path(jets, likelihood):
    """A batch chunk with invalid, one-leaf and -inf jets: the columnar MCTS table is the per-jet
    function's, row for row (time aside)."""
    chunk = _broken(jets)
    for options in ({}, {"n_rollouts": 4, "decision": "most_visited"}):
        tables = _twin_tables(chunk, ["mcts"], MCTS_TWINS, {"likelihood": likelihood, **options})
        t = tables["mcts"]
        assert t.status[70] == "all_inf" and t.log_likelihood[70] == -math.inf
        assert "no search path reached a possible tree" in t.message[70]
        assert t.status[3] == "failed" and t.message[3].startswith("jets.h5: entry 10:")
        assert list(t.status).count("ok") > 250


def test_mcts_with_a_time_limit_is_the_per_jet_path(jets, monkeypatch):
    """Under a time limit a search that is not done after the per-jet function's first slice of
    work goes to that function (here a cap of 20 000 units sends the larger jets there); an
    estimate above the chunk kernel's cap does too. The table is the per-jet path's."""
    import importlib

    mcts_module = importlib.import_module("jetastar.clustering.search.mcts")

    chunk = jets.take(np.r_[0:100, 1000:1100, 2000:2030])
    names = ["mcts", *MCTS_TWINS]
    config = BatchConfig(names, time_limit=30.0, plugins=["helpers.perjet_algorithms"])
    monkeypatch.setattr(mcts_module, "FIRST_BUDGET_SLICE_WORK", 20_000)
    flat = cluster_columns(chunk, {"mcts": {"max_time": 30.0}})["mcts"]
    assert 20 < (flat.outcome == PER_JET).sum() < len(chunk) - 20
    assert flat.result(int(np.flatnonzero(flat.outcome == DONE)[0])).options["max_time"] == 30.0
    slow = flat.result(int(np.flatnonzero(flat.outcome == PER_JET)[0]))
    # ran by the per-jet function now: its stats carry the time_s key, which flat rows have not
    assert slow.status == "ok" and slow.options["max_time"] == 30.0 and "time_s" in slow.stats
    tables = cluster_collection(chunk, config)
    _assert_same_table(tables["mcts"], tables["perjet-mcts"], "perjet-mcts")
    assert set(tables["mcts"].status) == {"ok"}
    # jets estimated above the cap: the per-jet function, whatever the time limit
    monkeypatch.setattr(mcts_module, "MCTS_CHUNK_WORK", 50_000)
    flat = cluster_columns(chunk, {"mcts": {}})["mcts"]
    over = mcts_module.mcts_work(np.diff(chunk.leaf_offsets), columnar_options("mcts", {})) > 50_000
    assert 20 < over.sum() < len(chunk) - 20
    assert np.array_equal(flat.outcome == PER_JET, over)
    none = cluster_columns(chunk, {"mcts": {}}, only={"mcts": ~over})["mcts"]
    assert np.array_equal(none.outcome == NOT_RUN, over)


def test_mcts_routing_and_options(jets):
    defaults = columnar_options("mcts", {})
    assert defaults == {"likelihood": "symmetric", "n_rollouts": 20, "seed": 0, "n_mc_target": 1,
                        "n_mc_min": 0, "beam_size": 5, "c_puct": 1.0, "planning": "mean",
                        "decision": "max_reward", "prior": "likelihood", "rollout": "greedy",
                        "reward_range": [-500.0, 0.0], "max_time": None}
    opts = columnar_options("mcts", {"n_rollouts": np.int64(5), "max_time": 2, "seed": 7,
                                     "reward_range": (-10, 0)})
    assert opts["n_rollouts"] == 5 and opts["max_time"] == 2.0 and opts["seed"] == 7
    # a numpy integer seed is recorded as the int it is (it was "Generator" before)
    assert type(columnar_options("mcts", {"seed": np.int64(4)})["seed"]) is int
    assert mcts(jets[0], seed=np.int64(4)).options["seed"] == 4
    assert columnar_options("mcts", opts) == opts  # what it returns reads back
    # sampled rollouts draw from each jet's own generator: the per-jet function
    for per_jet in ({"rollout": "sample"}, {"seed": np.random.default_rng(1)}):
        assert columnar_options("mcts", per_jet) is None
    for bad in ({"n_rollouts": -1}, {"n_rollouts": 2.5}, {"c_puct": float("nan")},
                {"planning": "best"}, {"reward_range": (0, -1)}, {"max_time": -1},
                {"likelihood": "x"}, {"seed": True}, {"threads": 1}):
        assert columnar_options("mcts", bad) is None
    # sampled rollouts run on the per-jet path, seeded as there
    sub = jets[:20]
    tables = jetastar.cluster(sub, "mcts", rollout="sample", seed=3)
    assert [r.tree for r in tables.results()] == [
        mcts(sub[i], rollout="sample", seed=3).tree for i in range(20)]


# ---------------------------------------------------------------------- window search
@pytest.mark.parametrize("likelihood", ["symmetric", "legacy"])
@pytest.mark.parametrize("options", [{}, {"window_size": 11, "n_random": 2, "seed": 3,
                                          "max_time": 60.0, "exact_first": True}])
def test_window_search_of_small_jets_is_window_search(jets, likelihood, options):
    """The window search's jets of up to 14 leaves that it proves with the exact MAP engine
    before any search (by default every such jet) are solved by that engine's chunk kernel:
    the per-jet function's tree, value, status, message, options (their defaults by size) and
    stats, of the same types. Larger jets are left to it."""
    from jetastar.clustering import window_search

    sub = jets.take(np.r_[0:200, 1000:1200, 2000:2010])
    options = {"likelihood": likelihood, **options}
    flat = cluster_columns(sub, {"window-search": options})["window-search"]
    sizes = np.asarray(sub.n_leaves)
    assert np.array_equal(flat.outcome == DONE, sizes <= EXACT_CHUNK_MAX)
    assert np.all(flat.outcome[sizes > EXACT_CHUNK_MAX] == PER_JET)
    for i in np.flatnonzero(flat.outcome == DONE).tolist():
        got, ref = flat.result(i), window_search(sub[i], **options)
        assert np.array_equal(got.tree.children, ref.tree.children), i
        assert np.array_equal(got.tree.leaf_of_node, ref.tree.leaf_of_node), i
        assert got.log_likelihood == ref.log_likelihood, i
        assert (got.status, got.message, got.exact, got.upper_bound, got.jet_id) == (
            ref.status, ref.message, ref.exact, ref.upper_bound, ref.jet_id), i
        assert got.options == ref.options, i
        expected = {k: v for k, v in ref.stats.items() if k != "time_s"}
        assert sorted(got.stats) == sorted(expected), i
        for k, v in expected.items():
            assert type(got.stats[k]) is type(v), (i, k)
            assert got.stats[k] == v or (math.isnan(v) and math.isnan(got.stats[k])), (i, k)


@pytest.mark.parametrize("likelihood", ["symmetric", "legacy"])
def test_window_search_tables_with_invalid_and_minus_inf_jets_equal_the_per_jet_path(
        jets, likelihood):
    """A batch chunk with invalid, one-leaf and -inf jets and jets of 15-20 leaves (those
    searched per jet): the window search's table is the per-jet function's, row for row (time
    aside)."""
    big = jets.take(np.r_[2000:2003])
    big = JetCollection(  # (without node momenta, as the broken jets)
        leaves=big.leaves, leaf_offsets=big.leaf_offsets, children=big.children,
        leaf_of_node=big.leaf_of_node, node_offsets=big.node_offsets, jet_id=big.jet_id,
        seed=big.seed, jet_type=big.jet_type, params=big.params)
    # (the broken jets, 30 of the W jets and the one-leaf jet: the window search per jet is slow)
    chunk = JetCollection.concatenate([_broken(jets).take(np.r_[0:150, 150:180, 300]), big])
    # (cheap searches on the jets of more than 14 leaves: the search itself is not compared here)
    for options in ({"n_random": 1, "n_starts": 1, "n_sampled": 0, "root_size": 0},
                    {"window_size": 12, "n_random": 0, "n_starts": 2, "n_sampled": 0,
                     "root_size": 0, "start": "greedy"}):
        tables = _twin_tables(chunk, ["window-search"], WINDOW_TWINS,
                              {"likelihood": likelihood, **options})
        t = tables["window-search"]
        assert t.status[70] == "all_inf" and t.log_likelihood[70] == -math.inf
        assert t.status[3] == "failed" and t.message[3].startswith("jets.h5: entry 10:")
        assert list(t.status).count("ok") > 160 and t.exact[:150].sum() > 140


def test_window_search_routing_and_options(jets):
    from jetastar.clustering import window_search

    assert columnar_options("window-search", {}) == {"likelihood": "symmetric"}
    opts = {"window_size": 12, "n_random": 3, "progress": True, "device": "cpu"}
    assert columnar_options("window-search", opts) == {
        "likelihood": "symmetric", "window_size": 12, "n_random": 3, "device": "cpu"}
    for per_jet in ({"exact_first": False}, {"trees": []}, {"device": "gpu"},
                    {"max_time": 0.001}, {"window_size": 1}, {"n_random": -1},
                    {"start": "nowhere"}, {"likelihood": "x"}, {"progress": 3}, {"colour": 1}):
        assert columnar_options("window-search", per_jet) is None, per_jet
    # rows the kernel did not solve are the per-jet function's, with the options asked for
    big = jets.take(np.r_[2000:2002])
    flat = cluster_columns(big, {"window-search": {"n_random": 1, "n_starts": 1}})
    row = flat["window-search"]
    assert np.all(row.outcome == PER_JET)
    got, ref = row.result(0), window_search(big[0], n_random=1, n_starts=1)
    assert got.log_likelihood == ref.log_likelihood and got.options == ref.options
    # with exact_first=True the engine proves jets of every size up to 14 leaves too
    tiny = cluster_columns(jets[:20], {"window-search": {"exact_first": True}})["window-search"]
    assert np.all(tiny.outcome == DONE)


def test_a_few_jets_go_jet_by_jet_and_warm_up_compiles_only_what_the_run_calls(monkeypatch):
    """Issue 61 point 11: chunks of fewer than CHUNK_PATH_FROM jets skip the chunk kernels (whose
    compilation outweighs what they save there), and warm-up compiles a chunk kernel's parallel
    variant only for a run that can call it."""
    import jetastar.batch.work as work
    import jetastar.clustering.warmup as warmup
    from jetastar.clustering.chunks import CHUNK_PATH_FROM

    calls = []
    real = work.cluster_columns
    monkeypatch.setattr(work, "cluster_columns", lambda *a, **k: calls.append(len(a[0])) or
                        real(*a, **k))
    jets = generate(CHUNK_PATH_FROM, ShowerParams.qcd(), seed=5)
    config = BatchConfig(["greedy", "beam"], chunk_size=CHUNK_PATH_FROM - 1)
    few = cluster_collection(jets[: CHUNK_PATH_FROM - 1], config)
    assert calls == []
    many = cluster_collection(jets, config)
    assert calls == [CHUNK_PATH_FROM]
    for name in ("greedy", "beam"):  # (the same trees either way)
        assert np.array_equal(few[name].log_likelihood, many[name].log_likelihood[:-1])

    warmed = []
    monkeypatch.setattr(warmup, "_warmed", set())
    monkeypatch.setattr(warmup, "cluster_columns",
                        lambda coll, opts, parallel=None: warmed.append((*opts, parallel)))
    warmup.warm_up(["greedy"], chunk_jets=5)
    assert warmed == []
    warmup.warm_up(["beam"], chunk_jets=200, threads=False)
    assert warmed == [("beam", False)]
    warmup.warm_up(["greedy"], chunk_jets=5000)
    assert warmed[1:] == [("greedy", False), ("greedy", True)]
