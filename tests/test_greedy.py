"""Greedy clustering: reference trees, an independent O(N³) greedy, the all -inf flag."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers.refdata import baseline_records, close, jet_from_record, reference_jets

from jetastar import InvalidJetError, Jet, Tree
from jetastar.clustering import greedy
from jetastar.ginkgo import ShowerParams, generate, log_likelihood, split_log_likelihood

BASELINES = baseline_records()


@pytest.mark.parametrize("rec", BASELINES, ids=[r["jet_id"] for r in BASELINES])
def test_reproduces_reference_greedy(rec):
    """Same tree (cluster sets) and log-likelihood as the reference StandardHC greedy (legacy)."""
    jet = jet_from_record(rec)
    result = greedy(jet, likelihood="legacy")
    ref = rec["greedy"]
    assert result.tree.clusters() == {frozenset(c) for c in ref["clusters"]}
    assert close(result.log_likelihood, ref["logLH"], 1e-9)
    assert result.status == "ok" and result.algorithm == "greedy"
    assert result.likelihood == "legacy"


def _plain_greedy(jet: Jet, likelihood: str) -> tuple[Tree, float]:
    """Textbook O(N³) greedy: score every pair at every step; first maximum in position order.

    Positions: the leaves in order; a merge removes both clusters and appends the new one at the
    end. Candidates are scanned (k = 1.., j = 0..k-1) and the first maximum wins — the reference's
    tie rule. Splits are scored through the public Python API.
    """
    p = jet.params
    clusters: list[tuple[frozenset[int], np.ndarray]] = [
        (frozenset([i]), jet.leaves[i].copy()) for i in range(jet.n_leaves)
    ]
    found: list[frozenset[int]] = []
    total = 0.0
    while len(clusters) > 1:
        lam = p.lam_root if len(clusters) == 2 else p.lam
        best = None
        for k in range(1, len(clusters)):
            for j in range(k):
                kw = {}
                if likelihood == "legacy":
                    kw = {
                        "t_left": 0.0 if len(clusters[j][0]) == 1 else None,
                        "t_right": 0.0 if len(clusters[k][0]) == 1 else None,
                    }
                v = split_log_likelihood(
                    clusters[j][1], clusters[k][1], p.t_cut, p.lam, likelihood, **kw
                )
                if best is None or v > best[0]:
                    best = (v, j, k)
        _, j, k = best
        left, right = clusters[j], clusters[k]
        kw = {}
        if likelihood == "legacy":
            kw = {
                "t_left": 0.0 if len(left[0]) == 1 else None,
                "t_right": 0.0 if len(right[0]) == 1 else None,
            }
        total += split_log_likelihood(left[1], right[1], p.t_cut, lam, likelihood, **kw)
        merged = (left[0] | right[0], left[1] + right[1])
        found.append(merged[0])
        clusters = [c for i, c in enumerate(clusters) if i not in (j, k)] + [merged]
    return Tree.from_clusters(found, jet.n_leaves), total


def _generated_jets() -> list[Jet]:
    jets = list(generate(12, ShowerParams.qcd(t_cut=1.0), seed=21, min_leaves=8, max_leaves=26))
    jets += list(generate(6, ShowerParams.w(), seed=22, min_leaves=6, max_leaves=14))
    return jets


@pytest.mark.parametrize("likelihood", ["symmetric", "legacy"])
def test_matches_plain_python_greedy(likelihood):
    for jet in _generated_jets():
        result = greedy(jet, likelihood=likelihood)
        tree, total = _plain_greedy(jet, likelihood)
        assert result.tree == tree, jet.label
        assert close(result.log_likelihood, total, 1e-11), (result.log_likelihood, total)


@pytest.mark.parametrize("likelihood", ["symmetric", "legacy"])
def test_log_likelihood_is_the_tree_score(likelihood):
    """The reported value is exactly jetastar.ginkgo.log_likelihood of the returned tree."""
    for _, jet in reference_jets(max_leaves=14)[::9]:
        result = greedy(jet, likelihood=likelihood)
        assert result.log_likelihood == log_likelihood(jet, result.tree, likelihood=likelihood)
        assert result.stats["splits_evaluated"] > 0 and "time_s" in result.stats


def test_root_uses_lambda_root():
    """W jets (λ_R = 3 ≠ λ): the score of the last merge uses λ_R."""
    jet = generate(1, ShowerParams.w(), seed=5, min_leaves=7, max_leaves=7)[0]
    result = greedy(jet)
    same_lambda = Jet(jet.leaves, jet.params.replace(lam_root=jet.params.lam))
    assert result.log_likelihood == log_likelihood(jet, result.tree)
    assert result.log_likelihood != log_likelihood(same_lambda, result.tree)


def test_all_inf_is_flagged_and_follows_the_reference_rule():
    """Parallel massless leaves: every merge has t_parent = 0 < t_cut, so every candidate is -inf."""
    leaves = np.array([[e, 0.0, 0.0, e] for e in (10.0, 20.0, 30.0, 40.0)])
    jet = Jet(leaves, ShowerParams.qcd(), jet_id=7)
    for likelihood in ("symmetric", "legacy"):
        result = greedy(jet, likelihood=likelihood)
        assert result.status == "all_inf"
        assert "-inf" in result.message
        assert result.log_likelihood == -math.inf
        # reference rule: first entries (positions 1 and 0) each time
        assert result.tree == Tree.from_nested(((0, 1), (2, 3)))


def test_two_leaves():
    jet = Jet(np.array([[50.0, 0.0, 10.0, 40.0], [40.0, 5.0, 0.0, 35.0]]), ShowerParams.qcd())
    result = greedy(jet)
    assert result.tree == Tree.from_nested((0, 1))
    assert result.log_likelihood == log_likelihood(jet, result.tree)


def test_bad_input():
    with pytest.raises(InvalidJetError, match="Jet"):
        greedy(np.zeros((3, 4)))
    jet = generate(1, ShowerParams.qcd(), seed=1)[0]
    with pytest.raises(ValueError, match="symmetric"):
        greedy(jet, likelihood="nope")
