"""MCTS: valid trees, reproducibility, what its design guarantees, option errors."""

from __future__ import annotations

import importlib
import math

import numpy as np
import pytest
from helpers.bruteforce import brute_force
from helpers.processes import interrupted_on_call
from helpers.refdata import close, reference_jets

from jetastar import InvalidJetError, Jet, Tree
from jetastar.clustering import greedy, mcts
from jetastar.ginkgo import ShowerParams, generate, log_likelihood, split_log_likelihood

#: the module (``jetastar.clustering.mcts`` is the function)
MCTS_MODULE = importlib.import_module("jetastar.clustering.search.mcts")


def _jets(n_jets: int, seed: int, lo: int, hi: int) -> list[Jet]:
    return list(generate(n_jets, ShowerParams.qcd(t_cut=4.0), seed=seed, min_leaves=lo, max_leaves=hi))


@pytest.mark.parametrize("likelihood", ["symmetric", "legacy"])
def test_valid_tree_and_exact_score(likelihood):
    jets = _jets(3, 101, 8, 14) + list(generate(2, ShowerParams.w(), seed=102, max_leaves=12))
    for jet in jets:
        result = mcts(jet, likelihood=likelihood)
        assert result.tree.n_leaves == jet.n_leaves
        assert result.log_likelihood == log_likelihood(jet, result.tree, likelihood=likelihood)
        assert result.algorithm == "mcts" and result.likelihood == likelihood
        assert result.stats["trajectories"] > 0 and result.stats["nodes"] > 0
        assert result.options["n_rollouts"] == 20 and result.options["beam_size"] == 5


@pytest.mark.parametrize(
    "options",
    [
        {"planning": "max"},
        {"decision": "most_visited"},
        {"prior": "uniform", "rollout": "sample"},
        {"n_mc_target": 3, "n_mc_min": 5, "n_rollouts": 40, "beam_size": 0, "c_puct": 5.0},
        {"reward_range": (-200.0, -20.0)},
    ],
)
def test_other_settings(options):
    for jet in _jets(2, 105, 9, 12):
        result = mcts(jet, seed=4, **options)
        assert result.log_likelihood == log_likelihood(jet, result.tree)
        for key, value in options.items():
            expected = list(value) if key == "reward_range" else value
            assert result.options[key] == expected


def test_reproducible_with_a_seed():
    jet = _jets(1, 111, 12, 14)[0]
    for rollout in ("greedy", "sample"):
        a = mcts(jet, seed=7, rollout=rollout)
        b = mcts(jet, seed=7, rollout=rollout)
        assert a.tree == b.tree and a.log_likelihood == b.log_likelihood and a.stats.keys() == b.stats.keys()
        assert {k: v for k, v in a.stats.items() if k != "time_s"} == {
            k: v for k, v in b.stats.items() if k != "time_s"
        }
    c = mcts(jet, seed=np.random.default_rng(7), rollout="sample")
    d = mcts(jet, seed=7, rollout="sample")
    assert c.tree == d.tree and c.log_likelihood == d.log_likelihood


def _first_decision_beam_best(jet: Jet, width: int, likelihood: str) -> float:
    """The best complete return of MCTS's beam pre-expansion from the root, written plainly:
    every partial sequence proposes its ``width`` most likely merges; the best ``width`` sequences
    by accumulated log-likelihood are kept (no deduplication)."""
    p = jet.params
    n = jet.n_leaves
    beam = [(0.0, [(frozenset([i]), jet.leaves[i].copy()) for i in range(n)])]
    while len(beam[0][1]) > 1:
        lam = p.lam_root if len(beam[0][1]) == 2 else p.lam
        pool = []
        for total, active in beam:
            moves = []
            for c in range(1, len(active)):
                for a in range(c):
                    kw = {}
                    if likelihood == "legacy":
                        kw = {
                            "t_left": 0.0 if len(active[a][0]) == 1 else None,
                            "t_right": 0.0 if len(active[c][0]) == 1 else None,
                        }
                    v = split_log_likelihood(active[a][1], active[c][1], p.t_cut, lam, likelihood, **kw)
                    moves.append((v, a, c))
            moves.sort(key=lambda x: -x[0])
            for v, a, c in moves[:width]:
                rest = [x for i, x in enumerate(active) if i not in (a, c)]
                merged = (active[a][0] | active[c][0], active[a][1] + active[c][1])
                pool.append((total + v, [*rest, merged]))
        pool.sort(key=lambda x: -x[0])
        beam = pool[:width]
    return max(total for total, _ in beam)


@pytest.mark.parametrize("likelihood", ["symmetric", "legacy"])
@pytest.mark.parametrize("rollout", ["greedy", "sample"])
def test_never_worse_than_its_beam_pre_expansion(likelihood, rollout):
    """With exact best returns and the max-return decision rule, the tree found is at least as good
    as every complete tree the search reached — in particular the first beam pre-expansion's best."""
    for jet in _jets(4, 121, 8, 13):
        for width in (2, 5):
            result = mcts(jet, likelihood=likelihood, beam_size=width, rollout=rollout, seed=3)
            best = _first_decision_beam_best(jet, width, likelihood)
            assert result.log_likelihood >= best - 1e-9 * abs(best), (jet.label, width)


def test_without_search_it_takes_the_most_likely_merge():
    """No beam, no trajectories: every decision is the most likely merge — the greedy tree."""
    for jet in _jets(5, 131, 6, 16):
        for likelihood in ("symmetric", "legacy"):
            result = mcts(jet, n_rollouts=0, beam_size=0, likelihood=likelihood)
            assert result.tree == greedy(jet, likelihood=likelihood).tree
            assert result.stats["trajectories"] == 0


@pytest.mark.parametrize("likelihood", ["symmetric", "legacy"])
def test_exhaustive_search_finds_the_map(likelihood):
    """Uniform prior and a huge c_puct make PUCT pick a least-visited child, so the first decision's
    (k choose 2)·…·3 trajectories visit every merge sequence once; max-return decisions then follow a
    MAP tree. N = 4: 6·3 = 18 sequences, N = 5: 10·6·3 = 180."""
    checked = 0
    for _, jet in reference_jets(max_leaves=5)[::6]:
        n_seq = {4: 18, 5: 180}[jet.n_leaves]
        result = mcts(
            jet, n_rollouts=n_seq, n_mc_min=n_seq, beam_size=0, prior="uniform", c_puct=1e6,
            likelihood=likelihood,
        )
        bf = brute_force(jet, likelihood)
        assert close(result.log_likelihood, bf["map_ll"], 1e-12), jet.label
        checked += 1
    assert checked >= 5


def test_two_leaves_and_all_inf():
    jet = Jet(np.array([[50.0, 0.0, 10.0, 40.0], [40.0, 5.0, 0.0, 35.0]]), ShowerParams.qcd())
    result = mcts(jet)
    assert result.tree == Tree.from_nested((0, 1))
    assert result.log_likelihood == log_likelihood(jet, result.tree)
    parallel = Jet(np.array([[e, 0.0, 0.0, e] for e in (10.0, 20.0, 30.0, 40.0)]), ShowerParams.qcd())
    result = mcts(parallel, rollout="sample")
    assert result.status == "all_inf" and result.log_likelihood == -math.inf


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"n_rollouts": -1}, "n_rollouts"),
        ({"n_rollouts": 2.5}, "n_rollouts"),
        ({"beam_size": -2}, "beam_size"),
        ({"n_mc_target": True}, "n_mc_target"),
        ({"c_puct": -1.0}, "c_puct"),
        ({"c_puct": "big"}, "c_puct"),
        ({"planning": "median"}, "'mean', 'max'"),
        ({"decision": "vote"}, "'max_reward', 'most_visited'"),
        ({"prior": "nn"}, "'likelihood', 'uniform'"),
        ({"rollout": "random"}, "'greedy', 'sample'"),
        ({"reward_range": (0.0, -500.0)}, "reward_range"),
        ({"reward_range": 3}, "reward_range"),
        ({"seed": "abc"}, "seed"),
        ({"seed": np.random.Generator(np.random.MT19937(1))}, "PCG64"),
        ({"likelihood": "exact"}, "symmetric"),
    ],
)
def test_bad_options(options, match):
    jet = _jets(1, 141, 5, 8)[0]
    with pytest.raises(ValueError, match=match):
        mcts(jet, **options)


def test_bad_jet():
    with pytest.raises(InvalidJetError, match="Jet"):
        mcts(None)


def _key(result):
    return (result.tree.children.tobytes(), result.log_likelihood, result.status,
            {k: v for k, v in result.stats.items() if k != "time_s"})


def test_slices_change_nothing(monkeypatch):
    """A search cut into slices (down to one trajectory per slice) makes the moves and random
    draws of an uncut search: same tree, value and counters."""
    module = MCTS_MODULE
    cases = []
    for params in (ShowerParams.qcd(), ShowerParams.w(), ShowerParams.qcd(t_cut=1.0)):
        for jet in generate(5, params, seed=91, min_leaves=3, max_leaves=24):
            for likelihood in ("symmetric", "legacy"):
                cases.append((jet, likelihood, {}))
                cases.append((jet, likelihood, {"rollout": "sample", "seed": 4, "n_rollouts": 6}))
                cases.append((jet, likelihood, {"beam_size": 0, "n_mc_min": 2,
                                                "decision": "most_visited"}))
    whole = [_key(mcts(j, likelihood=lk, **kw)) for j, lk, kw in cases]
    for slice_work in (1, 400):
        monkeypatch.setattr(module, "_MAX_SLICE_WORK", slice_work)
        assert [_key(mcts(j, likelihood=lk, **kw)) for j, lk, kw in cases] == whole


def test_max_time_stops_with_the_greedy_tree(monkeypatch):
    jet = generate(1, ShowerParams.qcd(t_cut=0.02), seed=71, min_leaves=70, max_leaves=90)[0]
    # (started whatever its estimate says: the search itself is stopped)
    monkeypatch.setattr(MCTS_MODULE, "_estimate", lambda *args: 0.0)
    result = mcts(jet, max_time=1e-9)
    g = greedy(jet)
    assert result.status == "budget" and "stopped by max_time=1e-09 s" in result.message
    assert result.tree == g.tree and result.log_likelihood == g.log_likelihood
    assert 0 <= result.stats["decisions"] < jet.n_leaves - 1
    assert result.options["max_time"] == 1e-9
    free = generate(1, ShowerParams.qcd(), seed=3)[0]
    assert _key(mcts(free, max_time=3600)) == _key(mcts(free))


def test_a_search_that_cannot_end_within_max_time_is_not_started(monkeypatch):
    """Its first decision's beam pre-expansion is one piece of work (~beam_size n³/6 merges:
    10 s at 1000 leaves), so a search whose lower time estimate is over the budget ends at once,
    with what a search stopped by the budget gives: the greedy tree."""
    jet = generate(1, ShowerParams.qcd(t_cut=0.02), seed=71, min_leaves=70, max_leaves=90)[0]
    runs = []
    monkeypatch.setattr(MCTS_MODULE, "_run_mcts", lambda *a: runs.append(a) or None)
    lower = MCTS_MODULE.MCTS.estimate(jet.n_leaves, {"n_rollouts": 20})
    result = mcts(jet, max_time=lower / 2)
    g = greedy(jet)
    assert runs == [] and result.status == "budget"
    assert result.tree == g.tree and result.log_likelihood == g.log_likelihood
    assert "not started: a lower estimate of its time" in result.message
    assert f"is over max_time={lower / 2:g} s" in result.message
    assert result.stats["decisions"] == 0 and result.options["max_time"] == lower / 2


@pytest.mark.parametrize("bad", [0, -2.0, "soon"])
def test_bad_max_time(bad):
    with pytest.raises(ValueError, match="max_time"):
        mcts(generate(1, ShowerParams.qcd(), seed=1)[0], max_time=bad)


def test_an_interrupt_during_a_slice_stops_after_it(monkeypatch, python_sigint):
    module = MCTS_MODULE
    jet = generate(1, ShowerParams.qcd(t_cut=1.0), seed=83, min_leaves=20, max_leaves=30)[0]
    calls: list[int] = []
    monkeypatch.setattr(module, "_MAX_SLICE_WORK", 10)
    monkeypatch.setattr(module, "mcts_advance", interrupted_on_call(module.mcts_advance, calls))
    with pytest.raises(KeyboardInterrupt):
        mcts(jet)
    assert len(calls) == 2
