"""Tests of the exact cluster trellis (jetastar.clustering.trellis).

Cross-checks: brute force over all (2n-3)!! trees for n <= 7 (MAP value and tree, log Z, non-zero
tree count, cluster marginals; both likelihoods; QCD and W), the reference MAP / log Z of every
reference jet that has one, a chi-square test of posterior samples, and internal consistency
(pruning on/off, threads, counters, float counts, sub-cluster queries). Cost models (HCC on signed
random graphs, Dasgupta on non-negative ones): brute force for n <= 7 (minimum cost and tree, Gibbs
log Z and marginals, chi-square of samples), and the heuristics checked against the exact
per-subset minimum cost on every subset (random graphs n = 10, ALOI samples n = 11, 12).
"""

from __future__ import annotations

import functools
import itertools
import math

import numpy as np
import pytest
from helpers.bruteforce import all_nested, brute_force, double_factorial_trees
from helpers.builders import collinear_jet
from helpers.processes import stops_at_second_call
from helpers.refdata import DATA, close, reference_jets
from scipy import stats

import jetastar.clustering.exact.trellis as trellis_mod
from jetastar import Jet, TooLargeError, Tree
from jetastar.clustering import Trellis, algorithm_info, cluster, exact_trellis
from jetastar.clustering._engine import format_bytes
from jetastar.clustering._subsets import leaves_of, mask_of, n_splits
from jetastar.costs import DasguptaCost, HCCCost
from jetastar.errors import InvalidJetError
from jetastar.ginkgo import ShowerParams, generate, likelihood_constants, log_likelihood

REL = 1e-10


# ---------------------------------------------------------------------- fixtures
def _bf_jets() -> list[tuple[str, Jet]]:
    out = []
    for name, params, seed in (("qcd", ShowerParams.qcd(), 21), ("w", ShowerParams.w(), 22)):
        for n in (4, 5, 6, 7):
            count = 1 if n == 7 else 2
            for k, jet in enumerate(generate(count, params, seed=seed + n, min_leaves=n,
                                             max_leaves=n)):
                out.append((f"{name}-n{n}-{k}", jet))
    return out


BF_JETS = _bf_jets()


@pytest.fixture(scope="module", params=[j for j in BF_JETS], ids=[name for name, _ in BF_JETS])
def bf_case(request):
    return request.param[1]


def _check_against_brute_force(jet: Jet, likelihood: str) -> None:
    bf = brute_force(jet, likelihood)
    tr = Trellis(jet, likelihood)
    assert close(tr.map_log_likelihood(), bf["map_ll"], REL)
    assert close(tr.log_partition(), bf["log_z"], REL)
    assert tr.n_trees() == bf["n_nonzero"]
    assert isinstance(tr.n_trees(), int)
    tree = tr.map_tree()
    if math.isfinite(bf["map_ll"]):
        assert tree in bf["map_trees"]
        # the DP value is the tree's log-likelihood (up to the order of momentum sums)
        assert close(log_likelihood(jet, tree, likelihood), tr.map_log_likelihood(), 1e-12)
    marg = tr.marginals()
    keys = set(marg) | set(bf["marginals"])
    for key in keys:
        assert abs(marg.get(key, 0.0) - bf["marginals"].get(key, 0.0)) < 1e-10, key
    # a cluster with zero probability is never reported, every reported one is a real cluster
    assert all(p > 0.0 and len(c) >= 2 for c, p in marg.items())
    # the same posterior as arrays: every cluster, most probable first; a tree's clusters
    arrays = tr.cluster_probabilities()
    as_dict = {frozenset(c): p for c, p in zip(arrays.leaves.tolist(),
                                                arrays.probability.tolist(), strict=True)}
    assert as_dict == marg
    prob = arrays.probability.to_numpy()
    assert np.all(np.diff(prob) <= 0) and arrays.size.tolist() == [len(c) for c in
                                                                    arrays.leaves.tolist()]
    if math.isfinite(bf["map_ll"]):
        on_tree = tr.cluster_probabilities(tree)
        assert sorted(zip(map(frozenset, on_tree.leaves.tolist()), on_tree.probability.tolist(),
                          strict=True),
                      key=lambda cp: (-len(cp[0]), min(cp[0]))) == \
            tr.map_clusters_with_marginals()
        masks = tree.node_masks()
        assert on_tree.bitmask.tolist() == masks[on_tree.node.to_numpy()].tolist()


@pytest.mark.parametrize("likelihood", ["symmetric", "legacy"])
def test_matches_brute_force(bf_case, likelihood):
    _check_against_brute_force(bf_case, likelihood)


# ---------------------------------------------------------------------- reference jets
REF_JETS = reference_jets(with_map=True)


def test_reference_jets_symmetric():
    assert len(REF_JETS) == 256
    for rec, jet in REF_JETS:
        ref = rec["map"]
        res = exact_trellis(jet)
        assert close(res.log_likelihood, ref["ginkgo_map_logLH"], 1e-8), rec["seed"]
        assert close(res.log_z, ref["ginkgo_logZ"], 1e-8), rec["seed"]
        if math.isfinite(ref["ginkgo_map_logLH"]):
            assert res.tree == Tree.from_nested(ref["ginkgo_map_tree"]), rec["seed"]
            assert res.status == "ok"
        else:
            assert res.status == "all_inf"


def test_reference_jets_legacy_lambda_everywhere():
    for rec, jet in REF_JETS:
        ref = rec["map"]
        same_lam = Jet(jet.leaves, jet.params.replace(lam_root=jet.params.lam), jet_id=jet.jet_id)
        res = exact_trellis(same_lam, likelihood="legacy")
        assert close(res.log_likelihood, ref["legacy_map_logLH"], 1e-8), rec["seed"]
        assert close(res.log_z, ref["legacy_logZ"], 1e-8), rec["seed"]
        if math.isfinite(ref["legacy_map_logLH"]):
            assert res.tree == Tree.from_nested(ref["legacy_map_tree"]), rec["seed"]


# ---------------------------------------------------------------------- sampling
def _five_leaf_jet() -> Jet:
    for _, jet in reference_jets(max_leaves=5, with_map=True):
        if jet.n_leaves == 5 and jet.jet_type == "QCD":
            bf = brute_force(jet)
            if bf["n_nonzero"] >= 60:
                return jet
    raise AssertionError("no suitable 5-leaf reference jet")


def test_posterior_samples_chi_square():
    jet = _five_leaf_jet()
    bf = brute_force(jet, with_trees=True)
    prob = np.exp(bf["lls"] - bf["log_z"])
    index = {tree: k for k, tree in enumerate(bf["trees"])}
    n = 20_000
    samples = Trellis(jet).sample(n, seed=12345)
    counts = np.zeros(len(prob))
    for tree in samples:
        counts[index[tree]] += 1
    assert counts[prob == 0.0].sum() == 0  # impossible trees are never drawn
    expected = prob * n
    big = expected >= 5.0
    f_obs = np.append(counts[big], counts[~big].sum())
    f_exp = np.append(expected[big], expected[~big].sum())
    keep = f_exp > 0
    f_obs, f_exp = f_obs[keep], f_exp[keep]
    f_exp *= f_obs.sum() / f_exp.sum()
    assert big.sum() >= 10
    pvalue = stats.chisquare(f_obs, f_exp).pvalue
    assert pvalue > 1e-3, pvalue
    # and the test has power: a wrong distribution (uniform over non-zero trees) is rejected
    wrong = np.where(prob > 0, 1.0, 0.0)
    wrong = np.append(wrong[big], wrong[~big].sum())[keep]
    wrong *= f_obs.sum() / wrong.sum()
    assert stats.chisquare(f_obs, wrong).pvalue < 1e-6


def test_sample_frequencies_match_marginals():
    jet = generate(1, ShowerParams.qcd(), seed=31, min_leaves=9, max_leaves=9)[0]
    tr = Trellis(jet)
    marg = tr.marginals()
    n = 4000
    freq: dict[frozenset[int], int] = {}
    for tree in tr.sample(n, seed=3):
        for c in tree.clusters():
            freq[c] = freq.get(c, 0) + 1
    assert set(freq) <= set(marg)
    for c, p in marg.items():
        f = freq.get(c, 0) / n
        sigma = math.sqrt(p * (1 - p) / n)
        assert abs(f - p) <= 5 * sigma + 2e-3, (sorted(c), p, f)


def test_sampling_is_reproducible_and_batched(monkeypatch):
    jet = generate(1, ShowerParams.w(), seed=5, min_leaves=8, max_leaves=8)[0]
    tr = Trellis(jet)
    a = tr.sample_children(50, seed=7)
    b = tr.sample_children(50, seed=7)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, tr.sample_children(50, seed=8))
    monkeypatch.setattr(trellis_mod, "_SAMPLE_BATCH", 7)
    assert np.array_equal(a, tr.sample_children(50, seed=7))
    trees = tr.sample(5, seed=1)
    assert all(isinstance(t, Tree) and t.n_leaves == 8 for t in trees)
    assert all(math.isfinite(log_likelihood(jet, t)) for t in trees)
    assert tr.sample(0) == []
    with pytest.raises(ValueError, match="non-negative integer"):
        tr.sample(-1)


# ---------------------------------------------------------------------- consistency
def _pruned_jet() -> Jet:
    jets = generate(20, ShowerParams.qcd(), seed=41, min_leaves=8, max_leaves=8)
    for jet in jets:
        if Trellis(jet).stats["clusters_pruned"] >= 3:
            return jet
    raise AssertionError("no jet with prunable clusters")


@pytest.mark.parametrize("likelihood", ["symmetric", "legacy"])
def test_pruning_changes_nothing(likelihood):
    jet = _pruned_jet()
    a = Trellis(jet, likelihood)
    b = Trellis(jet, likelihood, prune=False)
    assert a.stats["clusters_pruned"] > 0 and b.stats["clusters_pruned"] == 0
    assert a.stats["splits_evaluated"] < b.stats["splits_evaluated"]
    assert np.array_equal(a.map_array(), b.map_array())
    assert np.array_equal(a.log_z_array(), b.log_z_array())
    assert a.n_trees() == b.n_trees()
    assert a.map_tree() == b.map_tree()


def test_counters_add_up():
    jet = _pruned_jet()
    tr = Trellis(jet)
    s = tr.stats
    t = tr.t_array()
    t_cut = jet.params.t_cut
    pruned = [m for m in range(1, 1 << jet.n_leaves) if m & (m - 1) and not t[m] > t_cut]
    assert s["clusters_pruned"] == len(pruned)
    pruned_splits = sum(n_splits(len(leaves_of(m))) for m in pruned)
    assert s["splits_evaluated"] + s["splits_skipped"] + pruned_splits == s["splits_total"]
    assert s["clusters"] == 2**jet.n_leaves - 1
    assert s["clusters_impossible"] >= s["clusters_pruned"]
    for key in ("time_s", "time_dp_s", "memory_bytes", "threads"):
        assert s[key] >= 0
    res = tr.result()
    assert res.stats["splits_evaluated"] == s["splits_evaluated"]
    assert res.time_s is not None and res.exact and res.algorithm == "trellis"
    assert res.upper_bound == res.log_likelihood
    assert res.jet_id == jet.jet_id


def test_threads_option_gives_same_result():
    jet = generate(1, ShowerParams.qcd(), seed=8, min_leaves=10, max_leaves=10)[0]
    a = Trellis(jet, threads=1)
    b = Trellis(jet)
    assert np.array_equal(a.map_array(), b.map_array())
    assert np.array_equal(a.log_z_array(), b.log_z_array())
    assert np.allclose(a.marginals_array(), b.marginals_array(), rtol=1e-12, atol=1e-15)
    with pytest.raises(ValueError, match="threads"):
        Trellis(jet, threads=0)


def test_float_counts_equal_exact_counts(monkeypatch):
    jet = generate(1, ShowerParams.qcd(), seed=9, min_leaves=9, max_leaves=9)[0]
    exact = Trellis(jet).n_trees()
    monkeypatch.setattr(trellis_mod, "MAX_EXACT_COUNT_LEAVES", 3)
    tr = Trellis(jet)
    assert isinstance(tr.n_trees(), float)
    assert tr.n_trees() == float(exact)


def test_marginal_bookkeeping():
    jet = generate(1, ShowerParams.w(), seed=12, min_leaves=8, max_leaves=8)[0]
    tr = Trellis(jet)
    arr = tr.marginals_array()
    n = jet.n_leaves
    assert arr[(1 << n) - 1] == 1.0
    assert np.allclose([arr[1 << i] for i in range(n)], 1.0, atol=1e-12)
    # every tree has n - 1 internal clusters: the expected number is n - 1
    internal = [m for m in range(1, 1 << n) if m & (m - 1)]
    assert arr[internal].sum() == pytest.approx(n - 1, rel=1e-12)
    pairs = tr.map_clusters_with_marginals()
    assert {c for c, _ in pairs} == set(tr.map_tree().clusters())
    assert pairs[0] == (frozenset(range(n)), 1.0)
    marg = tr.marginals()
    assert all(marg[c] == p for c, p in pairs)
    assert all(p > 0.5 for p in tr.marginals(min_prob=0.5).values())
    assert "time_marginals_s" in tr.stats


def test_sub_cluster_queries_match_a_sub_jet():
    jet = generate(1, ShowerParams.qcd(), seed=13, min_leaves=8, max_leaves=8)[0]
    tr = Trellis(jet)
    sub = [1, 2, 5, 6]
    consts = jet.likelihood_constants("symmetric").copy()
    consts[1] = consts[0]  # a sub-cluster is never the root split: λ everywhere
    small = Trellis.from_arrays(jet.leaves[sub], consts)
    assert close(tr.cluster_map(sub), small.map_log_likelihood(), 1e-12)
    assert close(tr.cluster_log_z(sub), small.log_partition(), 1e-12)
    if math.isfinite(small.map_log_likelihood()):
        assert tr.map_tree_of(sub) == small.map_tree()
    assert tr.cluster_map([3]) == 0.0
    with pytest.raises(ValueError, match="non-empty set of leaf indices"):
        tr.cluster_map([])
    with pytest.raises(ValueError, match="non-empty set of leaf indices"):
        tr.cluster_log_z([8])
    with pytest.raises(ValueError, match=r"repeated leaf indices \[1, 1, 2\]"):
        tr.cluster_map([1, 1, 2])  # used to answer for {1, 2}


# ---------------------------------------------------------------------- small and degenerate jets
def test_two_leaves():
    jet = generate(1, ShowerParams.qcd(), seed=1, min_leaves=2, max_leaves=2)[0]
    res = exact_trellis(jet)
    tree = Tree.from_nested((0, 1))
    assert res.tree == tree
    assert res.n_trees == 1
    assert res.log_likelihood == pytest.approx(log_likelihood(jet, tree), rel=1e-12)
    assert res.log_z == res.log_likelihood
    tr = Trellis(jet)
    assert tr.marginals() == {frozenset({0, 1}): 1.0}
    assert tr.sample(3) == [tree] * 3


def test_from_arrays_labels_results_with_the_form_of_its_constants():
    """from_arrays used to record its likelihood argument (default "symmetric") whatever form the
    constants were made for."""
    jet = generate(1, ShowerParams.w(), seed=7, min_leaves=6, max_leaves=6)[0]
    legacy = likelihood_constants(16.0, 1.5, 3.0, "legacy")
    tr = Trellis.from_arrays(jet.leaves, legacy)
    assert tr.result().likelihood == "legacy"
    assert tr.log_partition() == Trellis(jet, "legacy").log_partition()
    with pytest.raises(ValueError, match=r"likelihood='symmetric', but the constants were made for"
                                         r" the 'legacy' form"):
        Trellis.from_arrays(jet.leaves, legacy, "symmetric")


def test_one_leaf_from_arrays():
    leaves = np.array([[10.0, 1.0, 2.0, 3.0]])
    tr = Trellis.from_arrays(leaves, likelihood_constants(16.0, 1.5))
    assert tr.map_log_likelihood() == 0.0 and tr.log_partition() == 0.0
    assert tr.n_trees() == 1
    assert tr.map_tree().n_leaves == 1
    assert tr.marginals() == {}
    res = tr.result()
    assert res.status == "ok" and res.log_likelihood == 0.0 and res.jet_id is None
    with pytest.raises(InvalidJetError, match="at least 2 leaves"):
        Jet(leaves, ShowerParams.qcd())


@pytest.mark.parametrize("likelihood", ["symmetric", "legacy"])
def test_all_inf_jet(likelihood):
    jet = collinear_jet(6)
    res = exact_trellis(jet, likelihood=likelihood)
    assert res.status == "all_inf" and "likelihood zero" in res.message
    assert res.log_likelihood == -math.inf and res.log_z == -math.inf
    assert res.n_trees == 0
    assert isinstance(res.tree, Tree) and res.tree.n_leaves == 6
    assert res.exact
    tr = Trellis(jet, likelihood)
    assert tr.all_inf()
    assert tr.marginals() == {}
    assert not np.any(np.isnan(tr.marginals_array()))
    with pytest.raises(ValueError, match="no posterior to sample"):
        tr.sample(1)


def test_all_inf_matches_brute_force():
    _check_against_brute_force(collinear_jet(5), "legacy")


# ---------------------------------------------------------------------- guards and API
def test_memory_guard():
    jet = generate(1, ShowerParams.qcd(), seed=2, min_leaves=10, max_leaves=10)[0]
    with pytest.raises(TooLargeError) as err:
        exact_trellis(jet, max_memory=10_000)
    msg = str(err.value)
    assert "use astar or astar_approx" in msg
    assert "10 leaves" in msg and "max_memory=10000" in msg
    assert str(format_bytes(trellis_mod.estimate_memory(10))) in msg
    # the marginal pass has its own, larger estimate
    need = trellis_mod.estimate_memory(10)
    tr = Trellis(jet, max_memory=need)
    with pytest.raises(TooLargeError, match="with marginals"):
        tr.marginals()
    assert trellis_mod.estimate_memory(20, marginals=True) > trellis_mod.estimate_memory(20)
    assert trellis_mod.default_memory_limit() > 0


def test_huge_jet_is_refused_before_allocating():
    jet = generate(1, ShowerParams.qcd(t_cut=0.09), seed=1, min_leaves=40)[0]
    with pytest.raises(TooLargeError, match="use astar or astar_approx"):
        exact_trellis(jet, max_memory=2**62)
    with pytest.raises(TooLargeError, match="use astar or astar_approx"):
        exact_trellis(jet)


def test_registry_and_bad_input():
    info = algorithm_info("trellis")
    assert info.exact
    assert {"likelihood", "log_z", "max_time", "max_memory", "threads", "progress", "device"} <= set(
        info.options())
    jet = generate(1, ShowerParams.qcd(), seed=3, min_leaves=6, max_leaves=6)[0]
    # by name the exact method is the MAP engine; log Z on request
    res = cluster(jet, "trellis", likelihood="legacy", log_z=True)
    assert res.likelihood == "legacy" and res.options["likelihood"] == "legacy"
    assert res.options == {"likelihood": "legacy", "max_memory": None, "threads": None,
                           "prune": True, "device": "cpu"}
    assert res.log_z is not None
    fast = cluster(jet, "trellis", likelihood="legacy")
    assert fast.log_z is None and fast.log_likelihood == res.log_likelihood
    assert fast.options["likelihood"] == "legacy" and fast.options["max_time"] is None
    with pytest.raises(ValueError, match="unknown likelihood"):
        exact_trellis(jet, likelihood="nope")
    with pytest.raises(InvalidJetError, match=r"needs a jetastar\.Jet"):
        exact_trellis(jet.leaves)  # type: ignore[arg-type]
    with pytest.raises(InvalidJetError, match="leaves"):
        Trellis.from_arrays(np.zeros((3, 3)), likelihood_constants(16.0, 1.5))
    with pytest.raises(ValueError, match="constants"):
        Trellis.from_arrays(jet.leaves, np.zeros(5))
    assert "Trellis(jet=" in repr(Trellis(jet))


def test_progress_bar_runs(capsys):
    jet = generate(1, ShowerParams.qcd(), seed=4, min_leaves=7, max_leaves=7)[0]
    a = exact_trellis(jet, progress=True)
    b = exact_trellis(jet, progress=False)
    assert a.log_likelihood == b.log_likelihood and a.log_z == b.log_z


def test_mask_helpers_roundtrip_with_trees():
    jet = generate(1, ShowerParams.qcd(), seed=6, min_leaves=7, max_leaves=7)[0]
    tree = Trellis(jet).map_tree()
    masks = {mask_of(c) for c in tree.clusters()}
    nodes = {int(m) for m, internal in zip(tree.node_masks(), ~tree.is_leaf(), strict=True)
             if internal}
    assert masks == nodes


# ---------------------------------------------------------------------- cost models (HCC, Dasgupta)
def _random_graph(n: int, seed: int, signed: bool) -> np.ndarray:
    rng = np.random.default_rng(seed)
    w = rng.normal(size=(n, n)) if signed else rng.random((n, n))
    w = np.triu(w, 1)
    return w + w.T


@functools.cache
def _all_trees(n: int) -> tuple[Tree, ...]:
    return tuple(Tree.from_nested(nested) for nested in all_nested(tuple(range(n))))


def _brute_force_cost(model) -> dict:
    """Every hierarchy scored with tree_cost: min cost, its trees, Gibbs log Z and marginals."""
    trees = _all_trees(model.n_points)
    costs = np.array([model.tree_cost(t) for t in trees])
    best = float(costs.min())
    log_z = float(-best + np.log(np.sum(np.exp(-(costs - best)))))
    marg: dict[frozenset[int], float] = {}
    for tree, p in zip(trees, np.exp(-costs - log_z), strict=True):
        for c in tree.clusters():
            marg[c] = marg.get(c, 0.0) + float(p)
    argmin = [t for t, c in zip(trees, costs, strict=True) if c <= best + 1e-9 * max(1.0, abs(best))]
    return {"cost": best, "argmin": argmin, "log_z": log_z, "marginals": marg, "costs": costs,
            "trees": trees}


COST_CASES = [
    (cls, n, seed)
    for cls in (HCCCost, DasguptaCost)
    for n, seeds in ((3, (0, 1)), (4, (0, 1, 2)), (5, (0, 1, 2)), (6, (0, 1)), (7, (0,)))
    for seed in seeds
]


@pytest.mark.parametrize(("cls", "n", "seed"), COST_CASES,
                         ids=[f"{c.name}-n{n}-s{s}" for c, n, s in COST_CASES])
def test_cost_model_matches_brute_force(cls, n, seed):
    model = cls(_random_graph(n, 100 * n + seed, signed=cls is HCCCost))
    bf = _brute_force_cost(model)
    tr = Trellis(model)
    res = tr.result()
    assert res.cost == pytest.approx(bf["cost"], rel=1e-10, abs=1e-12)
    assert tr.map_cost() == res.cost
    assert res.tree in bf["argmin"]
    assert model.tree_cost(res.tree) == pytest.approx(res.cost, rel=1e-10, abs=1e-12)
    assert res.log_z == pytest.approx(bf["log_z"], rel=1e-10, abs=1e-12)
    assert res.n_trees == len(bf["trees"]) == double_factorial_trees(n)
    assert (res.algorithm, res.exact, res.likelihood, res.jet_id) == ("trellis", True, cls.name, None)
    assert res.upper_bound == res.log_likelihood and res.status == "ok"
    marg = tr.marginals()
    for key in set(marg) | {c for c in bf["marginals"] if len(c) >= 2}:
        assert abs(marg.get(key, 0.0) - bf["marginals"][key]) < 1e-10, key


def test_cost_model_gibbs_samples_chi_square():
    model = HCCCost(_random_graph(5, 7, signed=True))
    bf = _brute_force_cost(model)
    prob = np.exp(-bf["costs"] - bf["log_z"])
    index = {tree: k for k, tree in enumerate(bf["trees"])}
    n = 20_000
    counts = np.zeros(len(prob))
    for tree in Trellis(model).sample(n, seed=11):
        counts[index[tree]] += 1
    expected = prob * n
    big = expected >= 5.0
    f_obs = np.append(counts[big], counts[~big].sum())
    f_exp = np.append(expected[big], expected[~big].sum())
    assert big.sum() >= 20
    assert stats.chisquare(f_obs, f_exp * f_obs.sum() / f_exp.sum()).pvalue > 1e-3
    # power: the uniform distribution over trees is rejected
    flat = np.full(len(prob), n / len(prob))
    assert stats.chisquare(counts, flat).pvalue < 1e-6


def _admissible_everywhere(model, tr) -> None:
    masks = np.arange(1, 1 << model.n_points, dtype=np.int64)
    best = -tr.map_array()[1:]
    h = model.heuristics(masks)
    tol = 1e-9 * max(1.0, float(np.abs(best).max()))
    assert np.all(h <= best + tol), int(masks[np.argmax(h - best)])
    # the heuristic is exact on pairs and single points
    small = np.array([bin(int(m)).count("1") <= 2 for m in masks])
    assert np.allclose(h[small], best[small], atol=tol)


@pytest.mark.parametrize(("cls", "seed"), [(HCCCost, 1), (HCCCost, 2), (DasguptaCost, 1)])
def test_heuristic_admissible_on_every_subset_random(cls, seed):
    model = cls(_random_graph(10, seed, signed=cls is HCCCost))
    tr = Trellis(model)
    _admissible_everywhere(model, tr)
    # a sub-cluster's MAP is the MAP of the sub-graph
    idx = [0, 2, 3, 5, 8, 9]
    sub = exact_trellis(cls(model.weights[np.ix_(idx, idx)]))
    assert sub.cost == pytest.approx(-tr.cluster_map(idx), rel=1e-12)
    assert sub.tree == tr.map_tree_of(idx)


@pytest.mark.parametrize("n", [11, 12])
def test_heuristic_admissible_on_every_subset_aloi(n):
    with np.load(DATA / "aloi_hcc_samples.npz") as data:
        graphs = [data[f"n{n}_s{s}_weights"] for s in range(10)]
    violated = 0
    for w in graphs:
        model = HCCCost(w)
        tr = Trellis(model)
        _admissible_everywhere(model, tr)
        # the public reference's heuristic, sum of |negative| weights inside, is not a lower bound
        masks = np.arange(1, 1 << n, dtype=np.int64)
        violated += int(np.sum(model.features(masks)[:, 1] > -tr.map_array()[1:] + 1e-9))
    assert violated > 0


def test_cost_model_small_and_options():
    one = exact_trellis(HCCCost(np.zeros((1, 1))))
    assert one.cost == 0.0 and one.n_trees == 1 and one.log_z == 0.0 and one.tree.n_leaves == 1
    w = np.array([[0.0, 2.5], [2.5, 0.0]])
    for cls, cost in ((HCCCost, 2.5), (DasguptaCost, 5.0)):
        res = exact_trellis(cls(w))
        assert res.tree == Tree.from_nested((0, 1)) and res.cost == cost and res.n_trees == 1
        assert res.log_z == -cost
    model = DasguptaCost(_random_graph(12, 4, signed=False))
    a = exact_trellis(model, threads=1)
    b = exact_trellis(model, "dasgupta", threads=2, progress=True)
    assert a.cost == b.cost and a.log_z == b.log_z and a.tree == b.tree
    # the parallel marginal pass (slices above the serial threshold) agrees with one thread
    m1 = Trellis(model, threads=1).marginals_array()
    m2 = Trellis(model, threads=2).marginals_array()
    assert np.allclose(m1, m2, rtol=1e-12, atol=1e-14) and m1[(1 << 12) - 1] == 1.0
    assert a.options == {"max_memory": None, "threads": 1}
    assert a.stats["splits_evaluated"] == a.stats["splits_total"] and a.stats["clusters_pruned"] == 0
    assert "dasgupta graph with 12 points" in repr(Trellis(model))


def test_cost_model_bad_input_and_size_guard():
    with pytest.raises(InvalidJetError, match="Jet or a cost model"):
        exact_trellis(np.zeros((3, 3)))  # type: ignore[arg-type]
    model = HCCCost(_random_graph(10, 0, signed=True))
    with pytest.raises(ValueError, match="no likelihood option"):
        exact_trellis(model, likelihood="symmetric")
    with pytest.raises(TooLargeError, match="use astar_approx") as err:
        exact_trellis(model, max_memory=10_000)
    assert "hcc graph with 10 points" in str(err.value) and "10 points needs" in str(err.value)
    assert trellis_mod.estimate_memory(10, cost_model=True) > trellis_mod.estimate_memory(10)
    # refused before the (2**40, 4) features are computed
    with pytest.raises(TooLargeError, match="40 points is above the trellis limit"):
        exact_trellis(HCCCost(_random_graph(40, 0, signed=True)), max_memory=2**62)
    with pytest.raises(ValueError, match="non-empty set of leaf indices"):
        Trellis(model).cluster_map([11])


def test_kernel_calls_are_bounded_and_an_interrupt_stops_between_them(monkeypatch, python_sigint):
    """Without a bar the DP still runs in calls of at most ``_CALL_SPLITS`` splits (or one
    cluster), so Ctrl-C is seen within a call: values as in one call per size."""
    from jetastar.clustering.exact import _trellis_kernels as tk

    jet = generate(1, ShowerParams.qcd(t_cut=1.0), seed=5, min_leaves=11, max_leaves=11)[0]
    whole = exact_trellis(jet, progress=False)
    offsets = trellis_mod.masks_by_size(11)[1]
    monkeypatch.setattr(trellis_mod, "_CALL_SPLITS", 1000)
    for size in range(2, 12):
        per = (1 << (size - 1)) - 1
        pieces = trellis_mod._chunks(offsets, size, 11, False)
        assert pieces[0][0] == offsets[size] and pieces[-1][1] == offsets[size + 1]
        assert all(b == c for (_, b), (c, _) in itertools.pairwise(pieces))
        assert all((b - a) * per <= max(1000, per) for a, b in pieces)
    cut = exact_trellis(jet, progress=False)
    assert (cut.log_likelihood, cut.log_z, cut.n_trees) == (whole.log_likelihood, whole.log_z,
                                                            whole.n_trees)
    assert cut.tree.to_nested() == whole.tree.to_nested()
    stops_at_second_call(monkeypatch, tk, "dp_range_serial",
                         lambda: exact_trellis(jet, progress=False, threads=1))



def test_tree_counts_are_int64_exactly_as_far_as_every_count_fits():
    """(2n − 3)!! trees fit int64 up to 18 leaves and not at 19 (35!! = 2.2e20): the limit used to
    be 19, where an all-finite jet's count wrapped around silently."""
    from jetastar.clustering import gpu

    for limit in (trellis_mod.MAX_EXACT_COUNT_LEAVES, gpu._MAX_EXACT_COUNT_LEAVES):
        assert double_factorial_trees(limit) < 2**63 <= double_factorial_trees(limit + 1)


def test_max_time_stops_the_full_trellis_with_the_greedy_tree():
    """cluster(jet, "trellis", log_z=True, max_time=...) used to drop max_time and run to the end
    (11.7 s for max_time=0.05 on a 19-leaf jet); it now stops between slices of the DP."""
    from jetastar.clustering import greedy

    jet = generate(1, ShowerParams.w(), seed=7, min_leaves=15, max_leaves=15)[0]
    res = cluster(jet, "trellis", log_z=True, max_time=1e-4)
    assert res.status == "budget" and not res.exact and res.log_z is None
    assert "stopped by max_time=0.0001 s" in res.message and "log Z needs the whole" in res.message
    assert res.tree == greedy(jet).tree and res.options["max_time"] == 1e-4
    with pytest.raises(TimeoutError, match="max_time"):
        Trellis(jet, max_time=1e-4)
    full = exact_trellis(jet, max_time=600.0)
    assert full.status == "ok" and full.log_z == exact_trellis(jet).log_z
    model = HCCCost(_random_graph(15, 3, signed=True))
    cut = exact_trellis(model, max_time=1e-4)
    assert cut.status == "budget" and "15 points" in cut.message and cut.cost is not None
