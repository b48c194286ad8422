"""Greedy clustering: reference trees, an independent O(N³) greedy, the kernel against a textbook
greedy on big jets (every pair table / bound setting), the all -inf flag."""

from __future__ import annotations

import math
import signal
import sys

import numpy as np
import pytest
from helpers.processes import interrupted_on_call
from helpers.refdata import baseline_records, close, jet_from_record, reference_jets

from jetastar import InvalidJetError, Jet, Tree
from jetastar.clustering import greedy
from jetastar.clustering._merges import (
    BOUND_MIN_LEAVES,
    PAIR_TABLE_MAX,
    canonical_result,
    greedy_kernel,
    greedy_merges,
    jet_arrays,
)
from jetastar.clustering.agglomerative.greedy import greedy_status
from jetastar.ginkgo import (
    ShowerParams,
    generate,
    log_likelihood,
    split_log_likelihood,
    split_log_likelihood_t,
)

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


def _t4(q: np.ndarray) -> np.ndarray:
    """``E² − |p|²`` of rows of 4-vectors, as the kernels compute it (same operations and order)."""
    return q[..., 0] * q[..., 0] - (q[..., 1] * q[..., 1] + q[..., 2] * q[..., 2] + q[..., 3] * q[..., 3])


def _textbook_merges(jet: Jet, likelihood: str) -> tuple[np.ndarray, np.ndarray, int]:
    """Greedy with no bookkeeping: every pair of clusters scored at every step (vectorised through
    the public API), the first maximum in position order (cluster k = 1.., partner j = 0..k-1) merged,
    the partner as left child, the new cluster appended at the end; node ids as the kernel's.

    Returns ``(history, steps, first all -inf step or -1)``.
    """
    p = jet.params
    n = jet.n_leaves
    mom = np.array(jet.leaves, dtype=np.float64)
    ts = np.zeros(n) if likelihood == "legacy" else _t4(mom)
    ids = np.arange(n)
    history, steps, all_inf = [], [], -1
    for s in range(n - 1):
        m = len(ids)
        kk, jj = np.tril_indices(m, -1)  # (1, 0), (2, 0), (2, 1), (3, 0), ...: position order
        tp = _t4(mom[kk] + mom[jj])
        values = split_log_likelihood_t(ts[kk], ts[jj], tp, p.t_cut, p.lam, likelihood)
        q = int(np.argmax(values))  # first maximum
        if values[q] == -np.inf and all_inf < 0:
            all_inf = s
        k, j = int(kk[q]), int(jj[q])
        if m == 2:  # the root: λ_R
            v = split_log_likelihood_t(ts[j], ts[k], tp[q], p.t_cut, p.lam_root, likelihood)
            values = np.atleast_1d(v)
            q = 0
        history.append((ids[j], ids[k]))
        steps.append(values[q])
        new = mom[j] + mom[k]
        keep = np.array([i for i in range(m) if i not in (j, k)], dtype=np.int64)
        mom = np.concatenate([mom[keep], new[None]])
        ts = np.append(ts[keep], _t4(new))
        ids = np.append(ids[keep], n + s)
    return np.array(history, dtype=np.int64).reshape(-1, 2), np.array(steps), all_inf


def _big_jet(n: int, seed: int) -> Jet:
    """Leaves of many QCD jets with a small t_cut put together (as bench_columnar's --deadline)."""
    params = ShowerParams.qcd(t_cut=0.05)
    leaves = np.concatenate([j.leaves for j in generate(40, params, seed=seed)])
    assert len(leaves) >= n
    return Jet(leaves[:n], params, jet_id=n)


def _kernel_jets() -> list[Jet]:
    jets = list(generate(40, ShowerParams.qcd(), seed=31))
    jets += list(generate(12, ShowerParams.qcd(t_cut=1.0), seed=32, min_leaves=15))
    jets += list(generate(8, ShowerParams.w(), seed=33))
    base = generate(1, ShowerParams.qcd(t_cut=1.0), seed=34, min_leaves=12)[0]
    jets.append(Jet(np.concatenate([base.leaves, base.leaves]), base.params))  # exact ties
    jets.append(Jet(np.array([[e, 0.0, 0.0, e] for e in range(1, 60)], dtype=float),
                    ShowerParams.qcd()))  # every merge -inf
    jets += [_big_jet(70, 35), _big_jet(180, 36)]
    return jets


@pytest.mark.parametrize("likelihood", ["symmetric", "legacy"])
def test_kernel_matches_textbook_greedy(likelihood):
    """Merges, values (bit for bit) and the all -inf step of the kernel, with and without the pair
    table and the bounds, equal those of a greedy that scores every pair at every step."""
    settings = [(PAIR_TABLE_MAX, BOUND_MIN_LEAVES), (0, 0), (0, 10**9), (10**9, 0), (10**9, 10**9)]
    for jet in _kernel_jets():
        leaves, consts = jet_arrays(jet, likelihood)
        history, steps, all_inf = _textbook_merges(jet, likelihood)
        for table_max, bound_min in settings:
            h, s, a, evals = greedy_merges(leaves, consts, table_max, bound_min)
            label = (jet.n_leaves, table_max, bound_min)
            assert np.array_equal(h, history), label
            assert s.tobytes() == steps.tobytes(), label
            assert a == all_inf, label
            assert 0 < evals
            if table_max >= jet.n_leaves:  # each pair of clusters evaluated at most once
                assert evals <= jet.n_leaves * (jet.n_leaves - 1), label


def test_big_jet_evaluates_each_pair_once():
    """The former worst case (every merge -inf: every cluster's partner is the first one, merged at
    every step) and a physical jet: fewer evaluations than ordered pairs of clusters, n(n - 1)."""
    flat = Jet(np.array([[e, 0.0, 0.0, e] for e in range(1, 401)], dtype=float), ShowerParams.qcd())
    for jet, first_all_inf in ((flat, 0), (_big_jet(600, 37), -1)):
        history, _, all_inf, evals = greedy_kernel(*jet_arrays(jet, "symmetric"))
        n = jet.n_leaves
        assert evals <= n * (n - 1)
        assert history.shape == (n - 1, 2) and np.unique(history).size == 2 * n - 2
        assert all_inf == first_all_inf


@pytest.mark.parametrize("likelihood", ["symmetric", "legacy"])
@pytest.mark.parametrize("table_max", [PAIR_TABLE_MAX, 0])
def test_greedy_in_slices_equals_one_kernel_call(likelihood, table_max, monkeypatch):
    """Jets above SLICED_FROM leaves are merged in slices returning to Python in between (here:
    every jet, from one merge per slice on, with and without the pair table): the same merges,
    values (bit for bit), statuses and evaluation counts as one call of the kernel."""
    module = sys.modules[greedy.__module__]
    monkeypatch.setattr(module, "SLICED_FROM", 1)
    monkeypatch.setattr(module, "_FIRST_SLICE_MERGES", 1)
    monkeypatch.setattr(module, "_SLICE_S", 1e-9)  # the slices stay small
    monkeypatch.setattr(module, "PAIR_TABLE_MAX", table_max)
    calls = []
    steps_kernel = module.greedy_steps
    monkeypatch.setattr(module, "greedy_steps", lambda *a: calls.append(1) or steps_kernel(*a))
    for jet in _kernel_jets():
        leaves, consts = jet_arrays(jet, likelihood)
        h, s, a, evals = greedy_merges(leaves, consts, table_max, BOUND_MIN_LEAVES)
        calls.clear()
        result = greedy(jet, likelihood=likelihood)
        assert len(calls) >= (2 if jet.n_leaves > 2 else 1), jet.n_leaves
        reference = greedy_status(int(a), jet.n_leaves, float(np.sum(s)))[0]
        assert result.status == reference
        assert result.stats["splits_evaluated"] == evals
        tree, ll = canonical_result(h, s, jet.n_leaves)
        assert result.tree == tree and result.log_likelihood == ll


def test_an_interrupt_during_a_greedy_slice_stops_after_it(monkeypatch, python_sigint):
    """Ctrl-C while a slice of a large jet's merges runs is raised as KeyboardInterrupt after that
    slice, and the signal handlers are put back."""
    module = sys.modules[greedy.__module__]
    monkeypatch.setattr(module, "SLICED_FROM", 100)
    monkeypatch.setattr(module, "_FIRST_SLICE_MERGES", 10)
    monkeypatch.setattr(module, "_SLICE_S", 1e-9)
    calls: list[int] = []
    monkeypatch.setattr(module, "greedy_steps", interrupted_on_call(module.greedy_steps, calls))
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        greedy(_big_jet(180, 36))
    assert len(calls) == 2
    assert signal.getsignal(signal.SIGINT) is before
