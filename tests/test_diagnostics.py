"""Why trees are −∞ and how many jets the model can describe."""

from __future__ import annotations

import dataclasses
import math

import awkward as ak
import numpy as np
import pytest

from jetastar import Jet, JetCollection, Tree
from jetastar.clustering import exact_map, kt
from jetastar.diagnostics import (
    REASONS,
    impossible_splits,
    model_check,
    result_reasons,
    split_reasons,
    tree_reasons,
)
from jetastar.ginkgo import ShowerParams, generate, node_log_likelihoods, split_log_likelihood_t
from jetastar.io import AlgorithmResults


@pytest.fixture(scope="module")
def jets() -> JetCollection:
    return JetCollection.concatenate([
        generate(30, ShowerParams.qcd(), seed=11), generate(30, ShowerParams.w(), seed=12),
    ])


@pytest.mark.parametrize("likelihood", ["symmetric", "legacy"])
def test_split_reasons_agree_with_the_likelihood(likelihood: str) -> None:
    rng = np.random.default_rng(5)
    tp = rng.uniform(-5, 60, 20000)
    tl = rng.uniform(-1, 40, 20000)
    tr = rng.uniform(-1, 40, 20000)
    if likelihood == "legacy":
        tl = np.where(rng.random(20000) < 0.3, 0.0, np.abs(tl))
        tr = np.where(rng.random(20000) < 0.3, 0.0, np.abs(tr))
    codes = split_reasons(tl, tr, tp, 16.0, likelihood)
    psi = split_log_likelihood_t(tl, tr, tp, 16.0, 1.5, likelihood)
    np.testing.assert_array_equal(codes > 0, psi == -np.inf)
    # every reason the form can give occurs in this sample
    expected = {1, 2, 3, 4, 5} if likelihood == "symmetric" else {3}
    assert expected <= set(np.unique(codes).tolist())


@pytest.mark.parametrize("algorithm", ["kt", "cambridge", "antikt"])
def test_tree_reasons_match_the_log_likelihood(jets: JetCollection, algorithm: str) -> None:
    results = [kt(j, algorithm=algorithm) for j in jets]
    rec = tree_reasons(jets, results)
    finite = np.array([math.isfinite(r.log_likelihood) for r in results])
    np.testing.assert_array_equal(ak.to_numpy(rec.finite), finite)
    assert (~finite).any()  # the kt family gives -inf trees on these jets
    for i in np.flatnonzero(~finite)[:10]:
        psi = node_log_likelihoods(jets[i], results[i].tree)
        assert rec.n_impossible[i] == int(np.sum(psi == -np.inf))
        assert psi[rec.node[i]] == -np.inf
        assert rec.reason[i] == REASONS[rec.first_reason[i]] != ""
        report = impossible_splits(jets[i], results[i])
        assert not report.finite and report.nodes[0] == rec.node[i]
        assert report.reasons[0] == rec.reason[i]
        assert "impossible" in str(report)
        assert len(report) == rec.n_impossible[i]
        node, reason, _, _ = next(iter(report))
        assert (node, reason) == (rec.node[i], rec.reason[i])
    assert ak.all(rec.reason[finite] == "")


@pytest.mark.parametrize("likelihood", ["symmetric", "legacy"])
def test_result_reasons_per_jet(likelihood: str) -> None:
    """The reasons of a results table (one kernel call over every -inf tree, jets of several
    ``t_cut``) name each jet's own impossible split nearest the root, as :func:`impossible_splits`
    does jet by jet; rows without a tree say their status, jets without a row ``missing``."""
    jets = JetCollection.concatenate([
        generate(40, ShowerParams.qcd(), seed=21), generate(40, ShowerParams.w(), seed=22),
        generate(40, ShowerParams.qcd(t_cut=4.0, lam_root=2.0), seed=23),
    ])
    results = [kt(j, algorithm="cambridge", likelihood=likelihood) for j in jets]
    results[3] = dataclasses.replace(results[3], tree=None, log_likelihood=-math.inf,
                                     status="skipped", message="too large")
    table = AlgorithmResults.from_results("cambridge", results[:-1],
                                          jet_index=np.arange(len(jets) - 1))
    finite, reason = result_reasons(jets, table)
    assert reason[3] == "skipped: too large" and not finite[3]
    assert reason[-1] == "missing" and not finite[-1]
    n_inf = 0
    for i in range(len(jets) - 1):
        if i == 3:
            continue
        report = impossible_splits(jets[i], results[i].tree, likelihood)
        assert finite[i] == report.finite == math.isfinite(results[i].log_likelihood)
        if report.finite:
            assert reason[i] == ""
            continue
        n_inf += 1
        assert reason[i] == (f"{report.reasons[0]}: cluster of {report.leaves[0]} leaves, "
                             f"m = {report.masses[0]:.4g} GeV ({len(report.nodes)} impossible "
                             "split(s))")
    assert 10 < n_inf < len(jets) - 10


def test_kt_trees_fail_on_pairs_below_the_cut() -> None:
    # two soft collinear particles: kt merges them first, but their pair mass is below t_cut, so the
    # shower would have stopped that cluster instead of splitting it
    c, s = 0.99 * math.cos(0.5), 0.99 * math.sin(0.5)
    leaves = np.array([
        [100.0, 99.0, 0.0, 0.0], [1.0, c, s, 0.01], [1.0, c, s, -0.01], [60.0, 58.0, 8.0, 0.0],
    ])
    jet = Jet(leaves, ShowerParams.qcd(t_cut=1.0))
    res = kt(jet, algorithm="kt")
    report = impossible_splits(jet, res.tree)
    assert not report.finite
    assert report.reasons == ["parent_below_cut"] and report.leaves == [2]
    assert report.masses[0] < 1.0


def test_tree_reasons_without_tree_and_truth(jets: JetCollection) -> None:
    rec = tree_reasons(jets)
    assert ak.all(rec.has_tree)
    trees: list[Tree | None] = [j.truth for j in jets]
    trees[0] = None
    rec = tree_reasons(jets, trees)
    assert not rec.has_tree[0] and not rec.finite[0] and rec.reason[0] == ""


def test_model_check(jets: JetCollection) -> None:
    check = model_check(jets)
    assert check.counts() == {"yes": len(jets), "no": 0, "unknown": 0}
    # a cut above the jet mass: no tree possible
    high = model_check(jets[:5], t_cut=2000.0)
    assert high.counts()["no"] == 5
    assert set(high.reasons("no")) == {"jet mass² <= t_cut"}
    assert "0 of 5 jets" in str(high)
    # a larger cut on small jets: the exact search proves some jets have no finite tree
    small = jets.take(np.flatnonzero(jets.n_leaves <= 10))
    mid = model_check(small, t_cut=200.0, exact_max_leaves=10)
    c = mid.counts()
    assert c["unknown"] == 0 and c["yes"] + c["no"] == len(small)
    for i in np.flatnonzero(mid.status == "no"):
        if mid.reason[i].startswith("exact"):
            jet = small[int(i)]
            prm = jet.params.to_dict()
            prm["t_cut"] = 200.0
            from jetastar.ginkgo import ShowerParams as SP

            j2 = Jet(jet.leaves, SP(**prm))
            assert exact_map(j2).status == "all_inf"
    with pytest.raises(ValueError, match="t_cut"):
        model_check(jets, t_cut=-1.0)


def test_model_check_negative_mass_particle() -> None:
    leaves = np.array([[10.0, 0.0, 0.0, 9.0], [10.0, 0.0, 0.0, -9.0],
                       [5.0, 0.0, 5.0 + 1e-7, 0.0]])
    coll = JetCollection.from_jets([Jet(leaves, ShowerParams.qcd())])
    check = model_check(coll)
    assert check.status.tolist() == ["no"]
    assert "E² − |p|² < 0" in check.reason[0]


def test_kt_family_t_cut_on_real_jets():
    """Issue 61 point 9: on real jets the kt family is −∞ at the default t_cut; the ladder finds
    the t_cut at which each is finite on most jets, and the model check counts them."""
    from pathlib import Path

    from jetastar import io
    from jetastar.diagnostics import T_CUT_LADDER, kt_family_t_cut

    path = Path(__file__).resolve().parents[1] / "data" / "particles_nanoaod.root"
    jets = io.read_particles(path, tree="Events", particles="PFCands", validate=False)
    check = model_check(jets)
    assert set(check.baselines) == {"kt", "cambridge", "antikt"}
    assert all(v < len(jets) / 2 for v in check.baselines.values())
    assert "kt-family trees finite: kt " in str(check)
    best = kt_family_t_cut(jets)
    assert all(t is not None and t < 16.0 and t in T_CUT_LADDER for t in best.values())
    for name, t in best.items():  # finite on most jets there, and not at the next larger value
        at = model_check(jets, t_cut=t).baselines[name]
        assert at >= len(jets) / 2
        larger = T_CUT_LADDER[T_CUT_LADDER.index(t) - 1]
        assert model_check(jets, t_cut=larger).baselines[name] < len(jets) / 2
    assert kt_family_t_cut(jets, fraction=1.01) == dict.fromkeys(best)
