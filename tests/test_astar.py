"""A* on the cluster trellis: exact A* against brute force and the trellis, budgets, approx A*;
the same engines on cost models (HCC, Dasgupta)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers.bruteforce import all_nested, brute_force
from helpers.refdata import DATA, close, reference_jets

from jetastar import Jet, Tree
from jetastar.clustering import (
    algorithm_info,
    astar,
    astar_approx,
    average_linkage,
    beam_search,
    cluster,
    exact_trellis,
    greedy,
)
from jetastar.costs import DasguptaCost, HCCCost
from jetastar.errors import InvalidJetError
from jetastar.ginkgo import ShowerParams, generate, log_likelihood

FORMS = ("symmetric", "legacy")
REL = 1e-9


def _check_exact(jet: Jet, likelihood: str, expected: float, heuristic: str = "h0") -> None:
    res = astar(jet, heuristic=heuristic, likelihood=likelihood, progress=False)
    assert res.status in ("ok", "all_inf")
    assert close(res.log_likelihood, expected, REL), (jet.label, res.log_likelihood, expected)
    # the returned tree really has that log-likelihood
    assert close(log_likelihood(jet, res.tree, likelihood), expected, REL)
    if heuristic == "h0":
        assert res.exact
        assert close(res.upper_bound, res.log_likelihood, REL)
    stats = res.stats
    for key in ("vertices_explored", "splits_evaluated", "heap_pushes", "heap_pops", "time_s"):
        assert key in stats
    assert 0 < stats["split_fraction"] <= 1.5


@pytest.mark.parametrize("likelihood", FORMS)
def test_exact_astar_equals_brute_force(likelihood):
    jets = list(generate(2, ShowerParams.qcd(), seed=31, min_leaves=6, max_leaves=7))
    jets += list(generate(1, ShowerParams.w(), seed=32, min_leaves=6, max_leaves=6))
    for jet in jets:
        bf = brute_force(jet, likelihood)
        _check_exact(jet, likelihood, bf["map_ll"])
        res = astar(jet, likelihood=likelihood, progress=False)
        if math.isfinite(bf["map_ll"]):
            assert any(res.tree == t for t in bf["map_trees"])


@pytest.mark.parametrize("likelihood", FORMS)
@pytest.mark.parametrize("kind", ["qcd", "w"])
def test_exact_astar_equals_trellis_on_random_jets(likelihood, kind):
    params = ShowerParams.qcd() if kind == "qcd" else ShowerParams.w()
    jets = generate(12, params, seed=41 if kind == "qcd" else 42, min_leaves=4, max_leaves=12)
    for jet in jets:
        ref = exact_trellis(jet, likelihood=likelihood, progress=False)
        _check_exact(jet, likelihood, ref.log_likelihood)


def test_exact_astar_on_reference_maps():
    records = reference_jets(max_leaves=11, with_map=True)[::6]
    assert len(records) >= 30
    for rec, jet in records:
        _check_exact(jet, "symmetric", rec["map"]["ginkgo_map_logLH"])
        # the reference legacy MAP uses λ at every split (its A* ignores λ_R)
        flat = Jet(jet.leaves, jet.params.replace(lam_root=jet.params.lam), jet_id=jet.jet_id)
        _check_exact(flat, "legacy", rec["map"]["legacy_map_logLH"])


def test_h0_stays_optimal_where_h1_fails():
    """Jets on which the approximate heuristic returns a worse tree are solved exactly by h0."""
    found = 0
    for rec, jet in reference_jets(max_leaves=10, with_map=True):
        flat = Jet(jet.leaves, jet.params.replace(lam_root=jet.params.lam), jet_id=jet.jet_id)
        target = rec["map"]["legacy_map_logLH"]
        h1 = astar(flat, heuristic="h1", likelihood="legacy", progress=False)
        assert not h1.exact
        if h1.log_likelihood < target - 1e-6:
            found += 1
            _check_exact(flat, "legacy", target)
        if found >= 2:
            break
    assert found >= 2


def test_budget_stops_return_a_tree_and_a_valid_bound():
    jet = generate(1, ShowerParams.w(), seed=5, min_leaves=14, max_leaves=14)[0]
    best = exact_trellis(jet, progress=False).log_likelihood
    res = astar(jet, max_vertices=40, progress=False)
    assert res.status == "budget" and not res.exact
    assert "max_vertices" in res.message
    assert res.tree is not None and res.tree.n_leaves == jet.n_leaves
    assert close(log_likelihood(jet, res.tree), res.log_likelihood, REL)
    assert res.log_likelihood <= best + 1e-9
    assert res.upper_bound >= best - 1e-9
    assert res.log_likelihood >= greedy(jet).log_likelihood - 1e-9
    small = astar(jet, max_memory=200_000, progress=False)
    assert small.status == "budget" and "memory" in small.message
    # stopped before the root was explored: no bound is claimed
    assert small.upper_bound is None or small.upper_bound >= best - 1e-9
    assert small.log_likelihood <= best + 1e-9
    timed = astar(jet, max_time=1e-6, progress=False)
    assert timed.status == "budget" and "max_time" in timed.message


def test_a_budget_spent_expanding_the_root_still_gives_the_whole_jet_bound(monkeypatch):
    """A max_time that the root's estimate let through but that ran out while the root's splits
    were scored used to give no bound at all (and a worse answer than a smaller budget, which
    skips the search); the bound of the whole jet is proven whatever the search did."""
    import sys

    from jetastar.ginkgo import heuristic
    from jetastar.ginkgo.heuristics import root_rate_slack

    module = sys.modules[astar.__module__]
    monkeypatch.setattr(module, "_ROOT_SECONDS_PER_SPLIT", 0.0)  # always try the root
    jet = generate(1, ShowerParams.w(), seed=5, min_leaves=14, max_leaves=14)[0]
    res = astar(jet, max_time=1e-6, progress=False)
    assert res.status == "budget" and res.stats["vertices_explored"] == 0
    assert "the root was not fully expanded" in res.message and "(proven)" in res.message
    slack = root_rate_slack(jet.likelihood_constants("symmetric"))
    h0 = heuristic(jet, range(jet.n_leaves), kind="h0")
    assert res.upper_bound == pytest.approx(max(h0 + slack, res.log_likelihood), rel=1e-12)
    assert res.upper_bound >= exact_trellis(jet, progress=False).log_likelihood


def test_memory_budget_just_below_a_doubling_still_solves_within_it():
    # near the budget the heap arrays grow once to what it allows instead of doubling
    jet = generate(1, ShowerParams.w(), seed=5, min_leaves=14, max_leaves=14)[0]
    free = astar(jet, progress=False)
    budget = free.stats["memory_bytes"] - 1
    tight = astar(jet, max_memory=budget, progress=False)
    assert tight.exact and tight.status == "ok"
    assert tight.log_likelihood == free.log_likelihood
    assert tight.stats["memory_bytes"] <= budget


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_time": 0},
        {"max_time": -1.0},
        {"max_time": float("nan")},
        {"max_vertices": 0},
        {"max_vertices": 2.5},
        {"max_memory": -5},
    ],
)
def test_non_positive_budgets_are_rejected(kwargs):
    jet = generate(1, ShowerParams.qcd(), seed=1, min_leaves=5, max_leaves=5)[0]
    with pytest.raises(ValueError, match="max_"):
        astar(jet, **kwargs)


def test_unknown_names_are_rejected():
    jet = generate(1, ShowerParams.qcd(), seed=1, min_leaves=5, max_leaves=5)[0]
    with pytest.raises(ValueError, match="valid: 'h0', 'h1', 'paper'"):
        astar(jet, heuristic="zero")
    with pytest.raises(ValueError, match="valid: 'symmetric', 'legacy'"):
        astar(jet, likelihood="head")
    with pytest.raises(ValueError, match="valid: 'h0', 'h1', 'paper'"):
        astar_approx(jet, heuristic="h9")
    with pytest.raises(ValueError, match="top_k"):
        astar_approx(jet, top_k=0)
    with pytest.raises(ValueError, match="rounds"):
        astar_approx(jet, rounds=-1)


def test_all_inf_jet_is_reported():
    # t_cut above every pair mass: no split of any cluster is possible
    leaves = np.array(
        [[10.0, 0.0, 0.0, 9.9], [10.0, 0.0, 0.1, 9.9], [10.0, 0.1, 0.0, 9.9], [10.0, 0.1, 0.1, 9.9]]
    )
    jet = Jet(leaves, ShowerParams.qcd(t_cut=800.0), jet_id=77)
    for likelihood in FORMS:
        res = astar(jet, likelihood=likelihood, progress=False)
        assert res.status == "all_inf" and res.log_likelihood == -math.inf
        assert res.tree is not None and res.exact
        approx = astar_approx(jet, likelihood=likelihood, progress=False)
        assert approx.status == "all_inf" and approx.log_likelihood == -math.inf


def test_registry_entries():
    assert algorithm_info("astar").exact
    assert not algorithm_info("astar-approx").exact
    jet = generate(1, ShowerParams.qcd(), seed=2, min_leaves=7, max_leaves=7)[0]
    res = cluster(jet, "astar", progress=False)
    assert res.algorithm == "astar" and res.exact
    assert close(res.log_likelihood, exact_trellis(jet, progress=False).log_likelihood, REL)


# ---------------------------------------------------------------------- approximate A*
def test_approx_is_never_below_its_seeds_and_reproducible():
    jets = generate(3, ShowerParams.qcd(t_cut=1.0), seed=8, min_leaves=16, max_leaves=22)
    light = {"all_pairs_max_size": 6, "n_samples": 30, "top_k": 4, "rounds": 3}
    for jet in jets:
        res = astar_approx(jet, seed=3, progress=False, **light)
        beam = beam_search(jet)
        assert res.log_likelihood >= res.stats["seed_log_likelihood"] - 1e-12
        assert res.log_likelihood >= beam.log_likelihood - 1e-12
        assert res.log_likelihood >= greedy(jet).log_likelihood - 1e-12
        assert close(log_likelihood(jet, res.tree), res.log_likelihood, REL)
        again = astar_approx(jet, seed=3, progress=False, **light)
        assert again.log_likelihood == res.log_likelihood and again.tree == res.tree
        assert not res.exact


def test_approx_reaches_the_map_on_most_small_jets():
    # 14-16 leaves: the root and every cluster of up to 12 leaves get all their 2-partitions and
    # every small part is valued exactly; the benchmark reaches the MAP on 90 of 90 such jets
    jets = generate(8, ShowerParams.w(), seed=123, min_leaves=14, max_leaves=16)
    hits = 0
    for jet in jets:
        res = astar_approx(jet, progress=False)
        ref = exact_trellis(jet, progress=False).log_likelihood
        assert res.log_likelihood <= ref + 1e-9 * abs(ref)
        assert res.log_likelihood >= beam_search(jet).log_likelihood - 1e-12
        assert close(log_likelihood(jet, res.tree), res.log_likelihood, REL)
        hits += close(res.log_likelihood, ref, REL)
    assert hits >= 7, hits


def test_approx_keeps_user_trees():
    jet = generate(1, ShowerParams.w(), seed=12, min_leaves=14, max_leaves=16)[0]
    truth_ll = log_likelihood(jet, jet.truth)
    res = astar_approx(
        jet, trees=[jet.truth], rounds=1, all_pairs_max_size=6, n_samples=30, top_k=4,
        progress=False,
    )
    assert res.log_likelihood >= truth_ll - 1e-12
    with pytest.raises(ValueError, match="trees"):
        astar_approx(jet, trees=[Tree.from_nested((0, 1))])


@pytest.mark.parametrize("likelihood", FORMS)
def test_approx_with_all_partitions_is_exact(likelihood):
    jets = generate(4, ShowerParams.w(), seed=13, min_leaves=7, max_leaves=11)
    for jet in jets:
        res = astar_approx(
            jet, heuristic="h0", all_pairs_max_size=None, max_explored=None, weight=1.0,
            likelihood=likelihood, progress=False,
        )
        ref = exact_trellis(jet, likelihood=likelihood, progress=False)
        assert res.exact
        assert close(res.log_likelihood, ref.log_likelihood, REL)


# ---------------------------------------------------------------------- cost models (HCC, Dasgupta)
def _graph(n: int, seed: int, signed: bool) -> np.ndarray:
    rng = np.random.default_rng(seed)
    w = rng.normal(size=(n, n)) if signed else rng.random((n, n))
    w = np.triu(w, 1)
    return w + w.T


COST_MODELS = [(HCCCost, True), (DasguptaCost, False)]


@pytest.mark.parametrize(("cls", "signed"), COST_MODELS)
@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 7])
def test_exact_astar_on_costs_equals_brute_force_and_trellis(cls, signed, n):
    for seed in range(3 if n < 7 else 1):
        model = cls(_graph(n, 1000 * n + seed, signed))
        costs = [model.tree_cost(Tree.from_nested(t)) for t in all_nested(tuple(range(n)))]
        best = min(costs)
        res = astar(model, progress=False)
        assert res.exact and res.status == "ok" and res.jet_id is None
        assert res.likelihood == model.name and res.options["heuristic"] == "admissible"
        assert res.cost == pytest.approx(best, rel=1e-10, abs=1e-12)
        assert model.tree_cost(res.tree) == pytest.approx(res.cost, rel=1e-10, abs=1e-12)
        assert exact_trellis(model).cost == pytest.approx(res.cost, rel=1e-10, abs=1e-12)
        assert -res.upper_bound == pytest.approx(res.cost, rel=1e-10, abs=1e-12)


@pytest.mark.parametrize(("cls", "signed"), COST_MODELS)
def test_exact_astar_on_costs_equals_trellis_on_larger_graphs(cls, signed):
    for n, seed in ((9, 1), (11, 2), (12, 3)):
        model = cls(_graph(n, seed, signed))
        res = astar(model, progress=False)
        ref = exact_trellis(model, progress=False)
        assert res.exact
        assert res.cost == pytest.approx(ref.cost, rel=1e-9, abs=1e-12)
        assert 0 < res.stats["split_fraction"] <= 1.0


def test_exact_astar_on_aloi_samples():
    with np.load(DATA / "aloi_hcc_samples.npz") as data:
        graphs = [np.asarray(data[f"n{n}_s{s}_weights"]) for n in (11, 12) for s in range(2)]
    for w in graphs:
        model = HCCCost(w)
        res = astar(model, progress=False)
        assert res.exact
        assert res.cost == pytest.approx(exact_trellis(model, progress=False).cost, rel=1e-9)


@pytest.mark.parametrize(("cls", "signed"), COST_MODELS)
def test_cost_budget_stop_returns_a_tree_and_a_valid_bound(cls, signed):
    model = cls(_graph(13, 7, signed))
    best = exact_trellis(model, progress=False).cost
    res = astar(model, max_vertices=4, progress=False)
    assert res.status == "budget" and not res.exact
    assert model.tree_cost(res.tree) == pytest.approx(res.cost, rel=1e-10)
    assert res.cost >= best - 1e-9
    assert res.cost <= min(greedy(model).cost, average_linkage(model).cost) + 1e-9
    assert -res.upper_bound <= best + 1e-9


@pytest.mark.parametrize(("cls", "signed"), COST_MODELS)
def test_kernel_greedy_on_costs_matches_cost_greedy(cls, signed):
    # the greedy completion of open clusters inside A* is the cheapest-merge greedy
    from jetastar.clustering.exact import _astar_kernels as k

    for seed in range(4):
        model = cls(_graph(15, 50 + seed, signed))
        cm = np.ascontiguousarray(np.stack([model._pos, model._neg, model.weights]))
        out_lo = np.zeros(15, dtype=np.int64)
        out_hi = np.zeros(15, dtype=np.int64)
        n_out = k._greedy_masks((1 << 15) - 1, 0, np.zeros((15, 4)), np.zeros(15),
                                np.zeros((2, 5)), cm, model.code, out_lo, out_hi, 0)
        clusters = [[i for i in range(15) if m >> i & 1] for m in out_lo[:n_out]]
        tree = Tree.from_clusters(clusters, 15)
        assert model.tree_cost(tree) == pytest.approx(greedy(model).cost, rel=1e-10)


@pytest.mark.parametrize(("cls", "signed"), COST_MODELS)
def test_approx_on_costs(cls, signed):
    for n, seed in ((10, 1), (25, 2), (40, 3)):
        model = cls(_graph(n, seed, signed))
        res = astar_approx(model, seed=1, progress=False)
        assert not res.exact and res.status == "ok"
        assert model.tree_cost(res.tree) == pytest.approx(res.cost, rel=1e-10)
        for base in (average_linkage(model), greedy(model)):
            assert res.cost <= base.cost + 1e-9
        assert res.stats["average_linkage_log_likelihood"] == -average_linkage(model).cost
        if n == 25:  # (once: a search of 40 points takes ~8 s)
            again = astar_approx(model, seed=1, progress=False)
            assert again.cost == res.cost and again.tree == res.tree
        if n <= 12:
            ref = exact_trellis(model, progress=False).cost
            full = astar_approx(model, all_pairs_max_size=None, max_explored=None, weight=1.0,
                                progress=False)
            assert full.exact and full.cost == pytest.approx(ref, rel=1e-9)
            # exact small clusters (local DP) and the 16-point root rule make n = 10 exact here
            assert res.cost == pytest.approx(ref, rel=1e-9)


def test_astar_cost_model_bad_input():
    model = HCCCost(_graph(6, 1, True))
    with pytest.raises(ValueError, match="no likelihood option"):
        astar(model, likelihood="symmetric")
    with pytest.raises(ValueError, match="one heuristic"):
        astar(model, heuristic="h1")
    with pytest.raises(ValueError, match="beam_size"):
        astar_approx(model, beam_size=10)
    with pytest.raises(ValueError, match="trees"):
        astar_approx(model, trees=[Tree.from_nested((0, 1))])
    with pytest.raises(InvalidJetError, match="cost model"):
        astar(np.eye(3))
    single = astar(HCCCost(np.zeros((1, 1))), progress=False)
    assert single.exact and single.cost == 0.0 and single.tree.n_leaves == 1
    assert astar_approx(DasguptaCost(np.zeros((1, 1))), progress=False).cost == 0.0


def test_small_cluster_table_holds_the_exact_value_of_every_small_cluster():
    from jetastar.clustering.exact import _astar_kernels as kernels
    from jetastar.costs import GINKGO_CODE
    from jetastar.ginkgo.heuristics import heuristic_tables

    jet = generate(1, ShowerParams.qcd(), seed=4, min_leaves=9, max_leaves=9)[0]
    p, tl, _, _, _, consts, _ = heuristic_tables(jet)
    ctr = np.zeros(kernels.N_CTR, dtype=np.int64)
    cm = np.zeros((3, 1, 1))
    table = kernels.small_cluster_table(9, 5, p, tl, consts, cm, GINKGO_CODE, ctr)
    exact = kernels.subset_map(p, consts)
    sizes = np.array([bin(m).count("1") for m in range(1 << 9)])
    small = (sizes >= 1) & (sizes <= 5)
    np.testing.assert_array_equal(table[small], exact[small])
    assert np.all(np.isneginf(table[sizes > 5]))
    assert ctr[kernels.C_SPLITS] > 0


def test_exact_astar_on_a_jet_whose_root_cannot_be_expanded():
    """Issue 35 point 6: astar(max_time=2) on an 81-leaf jet returned at once with "stopped by
    memory after 0 explored vertices" and no bound. Now it says why no exact search can start,
    uses the time for astar_approx, and returns h0 of the whole jet as the proven bound (valid when
    λ_R = λ, as for QCD jets)."""
    from jetastar.ginkgo import heuristic

    jet = generate(1, ShowerParams.qcd(t_cut=0.5), seed=7, min_leaves=40, max_leaves=50)[0]
    res = astar(jet, max_time=0.3)
    assert res.status == "budget" and not res.exact
    assert "exact A* cannot start" in res.message and "explored vertices" not in res.message
    assert "astar_approx within max_time=0.3 s" in res.message and "(proven)" in res.message
    h0 = heuristic(jet, range(jet.n_leaves), kind="h0")
    assert res.upper_bound == pytest.approx(max(h0, res.log_likelihood), rel=1e-12)
    assert res.log_likelihood <= res.upper_bound
    assert res.log_likelihood >= greedy(jet).log_likelihood
    assert res.log_likelihood == pytest.approx(log_likelihood(jet, res.tree))
    quick = astar(jet)  # no time budget: at once, the root does not fit in memory
    assert "above max_memory" in quick.message and quick.upper_bound == res.upper_bound
    # W jets have λ_R ≠ λ: h0 (inner λ) plus the root-rate slack is the bound
    from jetastar.ginkgo.heuristics import root_rate_slack

    w = generate(1, ShowerParams.w(t_cut=0.5), seed=7, min_leaves=40, max_leaves=50)[0]
    res_w = astar(w)
    slack = root_rate_slack(w.likelihood_constants("symmetric"))
    assert res_w.status == "budget" and slack > 0.9
    h0_w = heuristic(w, range(w.n_leaves), kind="h0")
    assert res_w.upper_bound == pytest.approx(max(h0_w + slack, res_w.log_likelihood), rel=1e-12)
    assert "for the root rate λ_R (proven)" in res_w.message
    # the legacy form with λ_R < λ: no bound is claimed
    low = generate(1, ShowerParams.w(t_cut=0.5, lam_root=1.0), seed=7, min_leaves=40,
                   max_leaves=50)[0]
    res_low = astar(low, likelihood="legacy")
    assert res_low.upper_bound is None and "no proven bound" in res_low.message


@pytest.mark.parametrize("likelihood", ["symmetric", "legacy"])
@pytest.mark.parametrize("lam_root", [0.7, 1.5, 3.0, 6.0])
def test_root_rate_slack_bounds_every_split_and_the_map(likelihood, lam_root):
    """ψ with λ_R minus ψ with λ is at most root_rate_slack on every split of every cluster of
    W-like jets, so h0(jet) + slack bounds the exact MAP (scored with λ_R at the root)."""
    from jetastar.clustering import exact_map
    from jetastar.ginkgo import heuristic, likelihood_constants
    from jetastar.ginkgo.heuristics import root_rate_slack
    from jetastar.ginkgo.kernels import split_llh

    c = likelihood_constants(4.0, 1.5, lam_root, likelihood)
    slack = root_rate_slack(c)
    if slack is None:
        assert likelihood == "legacy" and lam_root < 1.5
        return
    worst = -math.inf
    for jet in generate(6, ShowerParams.w(t_cut=4.0, lam_root=lam_root), seed=13,
                        min_leaves=5, max_leaves=8):
        p = jet.leaves
        n = jet.n_leaves
        sums = [p[[i for i in range(n) if m >> i & 1]].sum(axis=0) for m in range(1 << n)]
        ts = [0.0 if likelihood == "legacy" and bin(m).count("1") == 1
              else float(v[0] ** 2 - v[1:] @ v[1:]) for m, v in enumerate(sums)]
        for s in range(3, 1 << n):
            if s & (s - 1) == 0:
                continue
            low_bit = s & -s
            rest = s ^ low_bit
            sub = (rest - 1) & rest
            while True:
                a, b = low_bit | sub, rest ^ sub
                inner = split_llh(ts[a], ts[b], ts[s], c[0])
                root = split_llh(ts[a], ts[b], ts[s], c[1])
                assert np.isneginf(inner) == np.isneginf(root)
                if np.isfinite(inner):
                    worst = max(worst, root - inner)
                if sub == 0:
                    break
                sub = (sub - 1) & rest
        best = exact_map(jet, likelihood, device="cpu").log_likelihood
        h0 = heuristic(jet, range(n), likelihood=likelihood, kind="h0")
        if np.isfinite(best):
            assert best <= h0 + slack + 1e-9
    assert worst <= slack
    if lam_root == 1.5:
        assert slack == 0.0


def test_approx_skips_its_up_front_small_cluster_dp_when_the_budget_is_short(monkeypatch):
    """astar_approx(max_time=0.01) on 16 leaves took 0.2 s: the one subset DP of the jet's small
    clusters ran before the budgeted search. A budget it does not fit now skips it (the search
    solves those clusters as it meets them)."""
    import sys

    module = sys.modules[astar_approx.__module__]
    jet = generate(1, ShowerParams.w(), seed=7, min_leaves=16, max_leaves=16)[0]
    calls = []
    real = module._k.small_cluster_table

    def counted(*args):
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(module._k, "small_cluster_table", counted)
    short = astar_approx(jet, max_time=0.01, progress=False)
    assert calls == [] and short.status == "budget"
    assert short.log_likelihood >= greedy(jet).log_likelihood
    assert short.log_likelihood == pytest.approx(log_likelihood(jet, short.tree), rel=1e-12)
    astar_approx(jet, progress=False)  # no budget: the table as before
    assert calls == [1]


def test_jets_and_cost_models_share_one_compiled_search():
    """The kernel tables of a jet and of a cost model have the same numba types, so one compiled A*
    serves both (a writable placeholder for the cost model's leaves made numba compile every A*
    kernel a second time, ~40 s on its first use)."""
    from numba import typeof

    from jetastar.clustering.exact.astar import _Problem

    jet = generate(1, ShowerParams.qcd(), seed=3, min_leaves=6, max_leaves=6)[0]
    for likelihood in ("symmetric", "legacy"):
        for heuristic in ("h0", "h1"):
            of_jet = _Problem(jet, likelihood, heuristic, "h0").tables
            for cls, signed in COST_MODELS:
                of_model = _Problem(cls(_graph(6, 1, signed)), None, None, "h0").tables
                assert [typeof(a) for a in of_jet] == [typeof(a) for a in of_model]
