"""A* on the cluster trellis: exact A* against brute force and the trellis, budgets, approx A*."""

from __future__ import annotations

import math

import numpy as np
import pytest
from bruteforce import brute_force
from refdata import close, reference_jets

from jetastar import Jet, Tree
from jetastar.clustering import (
    algorithm_info,
    astar,
    astar_approx,
    beam_search,
    cluster,
    exact_trellis,
    greedy,
)
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
