"""Tests of the bound-pruned exact MAP engine (jetastar.clustering.exact_map).

Cross-checks: the full trellis (value bit for bit, same tree) on random QCD and W jets up to 16
leaves in both forms, brute force over all trees up to 8 leaves, the reference MAPs of the shared
reference jets, every cluster's value with and without pruning, and the bound itself (never below
ψ) on every split of many jets and on every reference split case; then incumbents, budgets, the
registry / ``exact_trellis(log_z=False)`` entry points and bad input.
"""

from __future__ import annotations

import importlib
import math

import numpy as np
import pytest
from helpers.bruteforce import brute_force_map
from helpers.builders import collinear_jet
from helpers.processes import stops_at_second_call
from helpers.refdata import close, reference_jets, split_cases

from jetastar import Jet, TooLargeError, Tree
from jetastar.clustering import Trellis, cluster, exact_map, exact_trellis, greedy
from jetastar.clustering._subsets import enumerate_splits, subset_t
from jetastar.clustering.exact import _map_kernels as _k
from jetastar.clustering.exact.exact_map import _MapSolver, estimate_map_memory
from jetastar.errors import InvalidJetError
from jetastar.ginkgo import ShowerParams, generate, likelihood_constants, log_likelihood
from jetastar.ginkgo.kernels import split_bound_of_split
from jetastar.ginkgo.likelihood import child_bound, parent_terms, split_llh, split_llh_bound

FORMS = ("symmetric", "legacy")


def _jets(params: ShowerParams, seed: int, sizes: range, per_size: int) -> list[Jet]:
    out = []
    for n in sizes:
        out += generate(per_size, params, seed=seed + n, min_leaves=n, max_leaves=n)
    return out


RANDOM_JETS = (
    _jets(ShowerParams.qcd(), 100, range(2, 15), 3)
    + _jets(ShowerParams.w(), 200, range(2, 15), 3)
    + _jets(ShowerParams.w(), 300, range(15, 17), 1)
    + _jets(ShowerParams.qcd(t_cut=1.0), 400, range(10, 15), 1)
)


def _same_as_trellis(jet: Jet, likelihood: str) -> None:
    got = exact_map(jet, likelihood)
    full = Trellis(jet, likelihood)
    assert got.exact and got.log_z is None
    assert got.log_likelihood == full.map_log_likelihood()  # same float expression: bit for bit
    if got.status == "ok":
        assert got.tree == full.map_tree()
        assert close(log_likelihood(jet, got.tree, likelihood), got.log_likelihood, 1e-12)
    else:
        assert got.status == "all_inf" and full.all_inf()


@pytest.mark.parametrize("likelihood", FORMS)
def test_same_map_and_tree_as_the_full_trellis(likelihood):
    assert len(RANDOM_JETS) > 80
    for jet in RANDOM_JETS:
        _same_as_trellis(jet, likelihood)


@pytest.mark.parametrize("likelihood", FORMS)
def test_matches_brute_force_up_to_eight_leaves(likelihood):
    jets = _jets(ShowerParams.w(), 500, range(3, 8), 2) + _jets(ShowerParams.qcd(), 600, [8], 1)
    for jet in jets:
        best, trees = brute_force_map(jet, likelihood)
        got = exact_map(jet, likelihood)
        assert close(got.log_likelihood, best, 1e-12)
        if math.isfinite(best):
            assert got.tree in trees


def test_reference_jets():
    for rec, jet in reference_jets(with_map=True):
        ref = rec["map"]
        got = exact_map(jet)
        assert close(got.log_likelihood, ref["ginkgo_map_logLH"], 1e-8), rec["seed"]
        if math.isfinite(ref["ginkgo_map_logLH"]):
            assert got.tree == Tree.from_nested(ref["ginkgo_map_tree"]), rec["seed"]
        same_lam = Jet(jet.leaves, jet.params.replace(lam_root=jet.params.lam), jet_id=jet.jet_id)
        got = exact_map(same_lam, "legacy")
        assert close(got.log_likelihood, ref["legacy_map_logLH"], 1e-8), rec["seed"]


@pytest.mark.parametrize("likelihood", FORMS)
def test_every_cluster_value_is_the_unpruned_one(likelihood):
    for jet in RANDOM_JETS[::4]:
        consts = jet.likelihood_constants(likelihood)
        tables = []
        for prune in (True, False):
            solver = _MapSolver(jet.leaves, consts, None)
            assert solver.solve(prune, -math.inf, False, None, None, "test")
            tables.append((solver.rec[:, 1].copy(), solver.best.copy(), solver.stats))
        (v_pruned, best_pruned, st_pruned), (v_full, best_full, st_full) = tables
        assert np.array_equal(v_pruned, v_full)
        assert np.array_equal(best_pruned, best_full)
        # and the unpruned engine is the full trellis, cluster by cluster
        assert np.array_equal(v_full, Trellis(jet, likelihood).map_array())
        assert st_full["splits_enumerated"] == st_pruned["splits_enumerated"]


def test_pruning_skips_most_splits():
    jet = generate(1, ShowerParams.w(), seed=5, min_leaves=15, max_leaves=15)[0]
    for likelihood in FORMS:
        st = exact_map(jet, likelihood).stats
        assert st["splits_evaluated"] < 0.2 * st["splits_total"]
        assert st["splits_evaluated"] <= st["splits_bound_passed"] <= st["splits_enumerated"]
        assert st["splits_enumerated"] <= st["splits_total"]


def _all_splits(n: int):
    full = (1 << n) - 1
    for s in range(3, full + 1):
        if s & (s - 1):
            for a in enumerate_splits(s):
                yield s, int(a), s ^ int(a)


@pytest.mark.parametrize("likelihood", FORMS)
def test_bound_is_never_below_psi_on_every_split(likelihood):
    jets = _jets(ShowerParams.w(), 700, range(4, 9), 2) + _jets(ShowerParams.qcd(), 800, range(4, 9), 2)
    checked = finite = 0
    gained: list[float] = []
    for jet in jets:
        for row, c in enumerate(jet.likelihood_constants(likelihood)):
            t = subset_t(jet.leaves, c)
            for s, a, b in _all_splits(jet.n_leaves):
                psi = split_llh(t[a], t[b], t[s], c)
                bound = split_llh_bound(t[a], t[b], t[s], c)
                loose = child_bound(t[a], c) + child_bound(t[b], c) - math.log(4 * math.pi)
                # equality holds for two stopping children: allow rounding (the engine's
                # margin is 1e-9 relative)
                assert bound >= psi - 1e-13 * (1 + abs(psi)), (row, s, a)
                if bound < math.inf:  # inf: the parent cannot split at all
                    assert loose >= bound - 1e-13 * (1 + abs(bound)), (row, s, a)
                    # the engine's bound: at or below the loose one, never below psi
                    tight = _tight(t[a], t[b], t[s], c)
                    assert psi - 1e-13 * (1 + abs(psi)) <= tight, (row, s, a)
                    assert tight <= bound + 1e-13 * (1 + abs(bound)), (row, s, a)
                    if psi > -math.inf:
                        gained.append(bound - tight)
                checked += 1
                finite += psi > -math.inf
    assert checked > 10_000 and finite > 1000
    # and it is tighter where it matters: fewer psi evaluations in the engine
    assert np.mean(gained) > 0.1 and np.mean(np.array(gained) > 1e-9) > 0.15


def _tight(t_left: float, t_right: float, t_parent: float, c: np.ndarray) -> float:
    """:func:`split_bound_of_split` with the parent's terms and the children's ``G``."""
    s_p, log_tp, stop = parent_terms(t_parent, c)
    return split_bound_of_split(t_left, t_right, t_parent, s_p, log_tp, stop,
                                child_bound(t_left, c), child_bound(t_right, c), c)


@pytest.mark.parametrize("likelihood", FORMS)
def test_tight_bound_at_the_edges(likelihood):
    """Splits at the cut, at the truncation, with a child holding almost all of the parent's
    mass (x -> 1, the second scale -> 0), legacy single leaves (t = 0) and a vanishing legacy
    scale: never below psi, never NaN."""
    rng = np.random.default_rng(17)
    t_cut, checked = 16.0, 0
    for c in likelihood_constants(t_cut, 1.5, 2.5, likelihood=likelihood):
        for t_p in (np.nextafter(t_cut, 0.0), t_cut, np.nextafter(t_cut, 99.0), 17.0, 900.0, 1e6):
            s_p = math.sqrt(t_p)
            for x_left in (0.0, 1e-9, 0.1, 0.5, 0.9, 1.0 - 1e-9, 1.0):
                for x_right in (0.0, 1e-12, 0.3, 1.0 - x_left, 1.0 - x_left + 1e-9):
                    pairs = [((x_left * s_p) ** 2, (x_right * s_p) ** 2),
                             (t_cut, (x_right * s_p) ** 2), (0.999 * t_p, 0.0),
                             (np.nextafter(t_cut, 99.0), 0.0), (0.0, 0.0)]
                    for t_left, t_right in [*pairs, tuple(rng.uniform(0, t_p, 2))]:
                        psi = split_llh(t_left, t_right, t_p, c)
                        tight = _tight(t_left, t_right, t_p, c)
                        assert not math.isnan(tight)
                        assert tight >= psi - 1e-13 * (1 + abs(psi)), (t_p, t_left, t_right)
                        checked += psi > -math.inf
    assert checked > 500


def test_bound_on_reference_split_cases():
    cases = [c for c in split_cases() if not c["boundary_sensitive"]]
    for case in cases:
        pl, pr = np.array(case["pL"]), np.array(case["pR"])
        tp = (pl + pr)[0] ** 2 - np.sum((pl + pr)[1:] ** 2)
        for form, tl, tr in (
            ("symmetric", pl[0] ** 2 - np.sum(pl[1:] ** 2), pr[0] ** 2 - np.sum(pr[1:] ** 2)),
            ("legacy", case["tL_given"], case["tR_given"]),
        ):
            c = likelihood_constants(case["t_cut"], case["lam"], likelihood=form)[0]
            psi = split_llh(tl, tr, tp, c)
            assert split_llh_bound(tl, tr, tp, c) >= psi - 1e-13 * (1 + abs(psi)), case
            if tp >= case["t_cut"]:
                assert _tight(tl, tr, tp, c) >= psi - 1e-13 * (1 + abs(psi)), case


@pytest.mark.parametrize("likelihood", FORMS)
def test_all_inf_and_tiny_jets(likelihood):
    res = exact_map(collinear_jet(7), likelihood)
    assert res.status == "all_inf" and res.log_likelihood == -math.inf and res.exact
    assert isinstance(res.tree, Tree) and res.tree.n_leaves == 7
    two = [jet for jet in RANDOM_JETS if jet.n_leaves == 2]
    assert len(two) >= 3
    for jet in two:
        res = exact_map(jet, likelihood)
        assert res.tree == Tree.from_nested((0, 1))
        assert res.log_likelihood == log_likelihood(jet, res.tree, likelihood)
        assert res.stats["splits_total"] == 1


def test_incumbent():
    jet = generate(1, ShowerParams.w(), seed=8, min_leaves=13, max_leaves=13)[0]
    plain = exact_map(jet)
    # a worse incumbent changes nothing
    res = exact_map(jet, incumbent=greedy(jet))
    assert res.log_likelihood == plain.log_likelihood and res.tree == plain.tree
    assert res.options["incumbent"] is True
    # the MAP tree as incumbent: no root split can beat it, and the incumbent is returned
    res = exact_map(jet, incumbent=plain.tree)
    assert res.exact and res.tree == plain.tree
    assert close(res.log_likelihood, plain.log_likelihood, 1e-12)
    assert res.stats["splits_evaluated"] <= plain.stats["splits_evaluated"]
    with pytest.raises(InvalidJetError, match="incumbent"):
        exact_map(jet, incumbent=Tree.from_nested((0, 1)))


def test_time_budget_returns_the_incumbent():
    jet = generate(1, ShowerParams.w(), seed=9, min_leaves=16, max_leaves=16)[0]
    res = exact_map(jet, max_time=1e-9)
    assert res.status == "budget" and not res.exact and "max_time" in res.message
    # a spent budget still runs one slice, so that a warm-up with a tiny budget compiles the DP
    assert 0 < res.stats["splits_enumerated"] < res.stats["splits_total"]
    g = greedy(jet)
    assert res.tree == g.tree and res.log_likelihood == g.log_likelihood
    inc = exact_map(jet, "legacy", max_time=1e-9, incumbent=g)
    assert inc.status == "budget" and inc.tree == g.tree
    assert inc.log_likelihood == log_likelihood(jet, g.tree, "legacy")


def test_registry_and_exact_trellis_entry_points():
    jet = generate(1, ShowerParams.qcd(), seed=10, min_leaves=9, max_leaves=9)[0]
    fast = cluster(jet, "trellis")
    assert fast.algorithm == "trellis" and fast.exact and fast.log_z is None
    assert "splits_bound_passed" in fast.stats
    full = cluster(jet, "trellis", log_z=True)
    assert full.log_z is not None and full.n_trees is not None
    assert fast.log_likelihood == full.log_likelihood and fast.tree == full.tree
    via = exact_trellis(jet, "legacy", log_z=False)
    assert via.algorithm == "trellis" and via.log_z is None
    assert via.log_likelihood == exact_trellis(jet, "legacy").log_likelihood
    assert cluster(jet, "trellis", threads=1).log_likelihood == fast.log_likelihood


def test_bad_input():
    jet = generate(1, ShowerParams.qcd(), seed=11, min_leaves=6, max_leaves=6)[0]
    with pytest.raises(ValueError, match="'symmetric', 'legacy'"):
        exact_map(jet, "nope")
    for bad in (0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="max_time"):
            exact_map(jet, max_time=bad)
    with pytest.raises(ValueError, match="max_memory"):
        exact_map(jet, max_memory=0)
    with pytest.raises(ValueError, match="threads"):
        exact_map(jet, threads=0)
    with pytest.raises(InvalidJetError, match=r"needs a jetastar\.Jet"):
        exact_map(np.zeros((3, 4)))
    with pytest.raises(TooLargeError, match=r"needs about .* above the memory limit"):
        exact_map(jet, max_memory=estimate_map_memory(6) - 1)
    big = Jet(np.tile(jet.leaves, (6, 1)), jet.params, jet_id=77)
    with pytest.raises(TooLargeError, match="jet 77: 36 leaves is above the exact-MAP limit"):
        exact_map(big)


def test_memory_estimate_is_the_tables_plus_a_fixed_allowance():
    jet = generate(1, ShowerParams.w(), seed=3, min_leaves=12, max_leaves=12)[0]
    solver = _MapSolver(jet.leaves, jet.likelihood_constants(), None)
    tables = solver.rec.nbytes + solver.wq.nbytes + solver.best.nbytes
    assert tables == 22 * 2**12
    assert estimate_map_memory(12) == tables + 4096 * 64
    assert all(estimate_map_memory(n + 1) > estimate_map_memory(n) for n in range(2, 30))


def _w_table_checks(jet: Jet, likelihood: str) -> float:
    """Solve ``jet``; check that the fixed-point W table bounds V + G from above; its scale."""
    consts = jet.likelihood_constants(likelihood)
    solver = _MapSolver(jet.leaves, consts, None)
    assert solver.solve(True, -math.inf, False, None, None, "test")
    proper = np.arange(1, solver.full)  # every cluster a split can read
    v = solver.rec[proper, 1]
    q = solver.wq[proper].astype(np.int64)
    assert np.array_equal(q == _k.Q_NONE, v == -np.inf)
    finite = np.flatnonzero(v > -np.inf)
    w = np.array([v[i] + child_bound(solver.rec[proper[i], 0], consts[0]) for i in finite])
    lifted = q[finite] / solver.scale
    assert np.all(lifted >= w)
    # rounded up by at most one step, unless raised to the bottom of the range
    assert np.all((lifted - w <= 1.0 / solver.scale + 1e-9) | (q[finite] == _k.Q_BOTTOM))
    assert np.all(q[finite] < _k.Q_TOP)
    return solver.scale


@pytest.mark.parametrize("likelihood", FORMS)
def test_w_table_is_an_upper_bound_in_fixed_point(likelihood):
    for jet in RANDOM_JETS[::6]:
        assert _w_table_checks(jet, likelihood) == 64.0


@pytest.mark.parametrize("likelihood", FORMS)
def test_w_scale_shrinks_when_the_bound_could_exceed_the_range(likelihood):
    # a tiny t_cut makes G of a cluster large (-log t_cut) and lets V grow with every split:
    # the a-priori bound forces a smaller scale, and the engine stays exact
    base = generate(1, ShowerParams.qcd(), seed=31, min_leaves=11, max_leaves=11)[0]
    jet = Jet(base.leaves, ShowerParams.qcd(t_cut=1e-30), jet_id=5)
    assert _w_table_checks(jet, likelihood) < 64.0
    got = exact_map(jet, likelihood)
    ref = exact_trellis(jet, likelihood)
    assert math.isfinite(got.log_likelihood)
    assert got.log_likelihood == ref.log_likelihood
    assert got.tree == ref.tree


def test_leaf_order_does_not_matter():
    jet = generate(1, ShowerParams.w(), seed=12, min_leaves=11, max_leaves=11)[0]
    base = exact_map(jet).log_likelihood
    rng = np.random.default_rng(0)
    for _ in range(3):
        other = Jet(jet.leaves[rng.permutation(11)], jet.params)
        assert close(exact_map(other).log_likelihood, base, 1e-12)


def test_max_time_below_the_table_setup_stops_at_once():
    """Issue 35 point 6: the solver checked max_time only once its tables were set up, so a
    budget shorter than allocating them (hundreds of MB at 22-24 leaves) was overrun."""
    from jetastar.clustering import greedy

    jet = generate(1, ShowerParams.qcd(t_cut=0.5), seed=3, min_leaves=22, max_leaves=22)[0]
    res = exact_map(jet, max_time=0.01)
    assert res.status == "budget" and not res.exact
    assert "setting up the tables" in res.message and "memory_bytes" in res.stats
    assert res.tree == greedy(jet).tree


def test_kernel_calls_are_bounded_and_an_interrupt_stops_between_them(monkeypatch, python_sigint):
    """Without a bar or a budget the DP still runs in calls of at most ``_CALL_SPLITS`` splits
    (or one cluster), so Ctrl-C is seen within a call: values as in one call per size."""
    engine = importlib.import_module("jetastar.clustering.exact.exact_map")
    jet = generate(1, ShowerParams.qcd(t_cut=1.0), seed=5, min_leaves=12, max_leaves=12)[0]
    whole = exact_map(jet, progress=False)
    splits: list[tuple[int, int]] = []

    def counted(name):
        kernel = getattr(_k, name)

        def run(k, lo, hi, *args):
            splits.append(((hi - lo) * ((1 << (k - 1)) - 1), (1 << (k - 1)) - 1))
            return kernel(k, lo, hi, *args)
        return run

    monkeypatch.setattr(engine, "_CALL_SPLITS", 1000)
    for name in ("solve_size", "solve_ranks"):
        monkeypatch.setattr(_k, name, counted(name))
    cut = exact_map(jet, progress=False)
    assert len(splits) > 30 and all(s <= max(1000, per) for s, per in splits)
    assert cut.log_likelihood == whole.log_likelihood
    assert cut.tree.to_nested() == whole.tree.to_nested()
    stops_at_second_call(monkeypatch, _k, "solve_ranks",
                         lambda: exact_map(jet, progress=False, threads=1))

