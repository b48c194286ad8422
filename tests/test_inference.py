"""Inference: the density form, log Z over a grid of rates, scans and fits (jetastar.inference)."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest
from helpers.bruteforce import all_nested

from jetastar import InvalidJetError, Jet, JetCollection
from jetastar.clustering import exact_trellis, greedy
from jetastar.clustering.exact.evidence import log_z_grid
from jetastar.errors import InferenceError
from jetastar.ginkgo import LIKELIHOODS, ShowerParams, generate
from jetastar.inference import fit, log_evidence, scan, selection_log_probability

A = 0.999


def _f(scale: float, t: float, lam: float) -> float:
    """log-density of a draw ``t`` of scale ``T`` (truncated exponential), written from the model."""
    if not 0.0 <= t < A * scale:
        return -math.inf
    return -math.log(-math.expm1(-A * lam)) + math.log(lam) - math.log(scale) - lam * t / scale


def _t(p: np.ndarray) -> float:
    return float(p[0] ** 2 - p[1] ** 2 - p[2] ** 2 - p[3] ** 2)


def density_split(p_left: np.ndarray, p_right: np.ndarray, t_cut: float, lam: float) -> float:
    """The density form's split term, written independently of the package from the derivation:
    two orderings of truncated-exponential draws, ½ each, the direction's 1/4π and the Jacobian
    8 tP / √K of the map from the draws to the children's 4-momenta (``K`` expanded here, factored
    in the package: they agree to ~1e-13 relative)."""
    t_l, t_r, t_p = _t(p_left), _t(p_right), _t(p_left + p_right)
    if t_p <= t_cut or t_l < 0 or t_r < 0:
        return -math.inf
    s_p, s_l, s_r = math.sqrt(t_p), math.sqrt(t_l), math.sqrt(t_r)
    if s_l + s_r > s_p:
        return -math.inf
    kallen = (t_p - t_l - t_r) ** 2 - 4 * t_l * t_r
    if kallen <= 0:
        return -math.inf
    lr = _f(t_p, t_l, lam) + _f((s_p - s_l) ** 2, t_r, lam)
    rl = _f(t_p, t_r, lam) + _f((s_p - s_r) ** 2, t_l, lam)
    top = max(lr, rl)
    if top == -math.inf:
        return -math.inf
    both = top + math.log(math.exp(lr - top) + math.exp(rl - top))
    return both + math.log(0.5) - math.log(4 * math.pi) + math.log(8 * t_p) - 0.5 * math.log(kallen)


def density_tree(jet: Jet, nested: object, memo: dict[Any, float] | None = None) -> float:
    """A tree's log-likelihood in the density form (a leaf above t_cut: −inf); ``memo`` keeps the
    leaf and split terms of one jet between calls (each distinct split is scored once)."""
    leaves = np.asarray(jet.leaves)
    p = jet.params
    memo = {} if memo is None else memo

    def walk(x: object, root: bool) -> tuple[tuple[int, ...], float]:
        """The leaves under ``x`` (sorted) and the log-likelihood of its subtree."""
        if isinstance(x, int):
            if x not in memo:
                memo[x] = 0.0 if _t(leaves[x]) <= p.t_cut else -math.inf
            return (x,), memo[x]
        a, va = walk(x[0], False)  # type: ignore[index]
        b, vb = walk(x[1], False)  # type: ignore[index]
        if (a, b, root) not in memo:
            memo[a, b, root] = density_split(leaves[list(a)].sum(axis=0), leaves[list(b)].sum(axis=0),
                                             p.t_cut, p.lam_root if root else p.lam)
        return tuple(sorted(a + b)), memo[a, b, root] + va + vb

    return walk(nested, True)[1]


def _with(jet: Jet, **rates: float) -> Jet:
    return Jet(jet.leaves, jet.params.replace(**rates), jet_id=jet.jet_id)


@pytest.fixture(scope="module")
def jets() -> JetCollection:
    return JetCollection.concatenate([
        generate(24, ShowerParams.qcd(), seed=31, max_leaves=14),
        generate(16, ShowerParams.w(), seed=32, max_leaves=14),
        generate(4, ShowerParams.qcd(t_cut=4.0), seed=33, min_leaves=12, max_leaves=14),
    ])


# ---------------------------------------------------------------------- the density form
def test_density_form_is_summed_over_trees_as_brute_force_does():
    """MAP and log Z of the density form by the trellis equal an enumeration of every tree with the
    independent split term above (jets of 2 to 7 leaves)."""
    checked = 0
    for jet in JetCollection.concatenate([generate(60, ShowerParams.qcd(), seed=34, max_leaves=6),
                                          generate(4, ShowerParams.qcd(), seed=34, min_leaves=7,
                                                   max_leaves=7)]):
        memo: dict[Any, float] = {}
        values = [density_tree(jet, nested, memo) for nested in all_nested(tuple(range(jet.n_leaves)))]
        top = max(values)
        res = exact_trellis(jet, "density")
        if top == -math.inf:
            assert res.log_z == -math.inf and res.log_likelihood == -math.inf
            continue
        log_z = top + math.log(sum(math.exp(v - top) for v in values))
        assert res.log_z == pytest.approx(log_z, rel=1e-9)
        assert res.log_likelihood == pytest.approx(top, rel=1e-9)
        checked += 1
    assert checked > 50


def test_density_form_of_a_truth_tree():
    from jetastar.ginkgo import log_likelihood

    for jet in generate(20, ShowerParams.w(), seed=35, max_leaves=12):
        assert log_likelihood(jet, likelihood="density") == pytest.approx(
            density_tree(jet, jet.truth.to_nested()), rel=1e-11)


def test_a_leaf_above_t_cut_makes_every_tree_impossible_in_the_density_form():
    jet = generate(1, ShowerParams.qcd(), seed=36, min_leaves=5, max_leaves=5)[0]
    heavy = np.array(jet.leaves, copy=True)
    heavy[0, 0] = math.sqrt(heavy[0, 0] ** 2 + 40.0)  # t = 40 > t_cut = 16
    bad = Jet(heavy, jet.params)
    assert exact_trellis(bad, "density").log_z == -math.inf
    assert greedy(bad, "density").status == "all_inf"
    assert exact_trellis(bad, "symmetric").log_z > -math.inf  # (Ginkgo's form scores it)
    ev = log_evidence(bad)
    assert ev.status[0] == "all_inf" and "leaf above t_cut" in ev.message[0]


@pytest.mark.parametrize("name", ["astar", "astar-approx", "window-search"])
def test_branch_and_bound_methods_refuse_the_density_form(name):
    from jetastar.batch import BatchConfig, BatchError, check_config
    from jetastar.clustering import cluster, exact_map

    jet = generate(1, ShowerParams.qcd(), seed=37)[0]
    with pytest.raises(ValueError, match="unknown likelihood 'density'"):
        cluster(jet, name, likelihood="density")
    with pytest.raises(BatchError, match="likelihood"):
        check_config(BatchConfig([name], options={name: {"likelihood": "density"}}))
    with pytest.raises(ValueError, match="proven for the 'symmetric' and 'legacy' forms only"):
        exact_map(jet, "density")
    # the registry's exact MAP method takes it, with the full trellis
    res = cluster(jet, "trellis", likelihood="density")
    assert res.exact and res.log_z is not None and res.likelihood == "density"


# ---------------------------------------------------------------------- log Z on a grid
@pytest.mark.parametrize("likelihood", LIKELIHOODS)
def test_log_evidence_is_the_trellis_log_z(jets, likelihood):
    """At rates other than the jets' own, every form, jets of 2 to 14 leaves."""
    ev = log_evidence(jets, likelihood, lam=1.9, lam_root=2.6)
    assert set(ev.status) <= {"ok", "all_inf"} and ev.summary()["ok"] >= len(jets) - 2
    for i, jet in enumerate(jets):
        ref = exact_trellis(_with(jet, lam=1.9, lam_root=2.6), likelihood).log_z
        if ref == -math.inf:
            assert ev.log_z[i] == -math.inf and ev.status[i] == "all_inf"
        else:
            assert ev.log_z[i] == pytest.approx(ref, rel=1e-9)
    assert np.array_equal(ev.parameters["lam"], np.full(len(jets), 1.9))
    # the rates not given are each jet's own
    own = log_evidence(jets, likelihood)
    for i in (0, len(jets) - 1):
        assert own.log_z[i] == pytest.approx(exact_trellis(jets[i], likelihood).log_z, rel=1e-9)


@pytest.mark.parametrize("likelihood", LIKELIHOODS)
def test_a_grid_is_its_points_one_by_one(jets, likelihood):
    # (each jet's trees summed 12 times: the jets of up to 11 leaves and those of t_cut 4 GeV² of 12)
    n = np.asarray(jets.n_leaves)
    jets = jets.take(np.flatnonzero((n <= 11) | ((n == 12) & (jets.params["t_cut"] == 4.0))))
    lams, roots = np.array([0.8, 1.6, 2.9]), np.array([1.2, 3.1])
    grid = log_z_grid(jets, likelihood, lam=lams, lam_root=roots, want_map=True)
    for a, lam in enumerate(lams):
        for b, root in enumerate(roots):
            one = log_z_grid(jets, likelihood, lam=lam, lam_root=root, want_map=True)
            assert np.allclose(grid.log_z[:, a, b], one.log_z[:, 0, 0], rtol=1e-12, atol=0,
                               equal_nan=True)
            assert np.array_equal(grid.map_log_likelihood[:, a, b],
                                  one.map_log_likelihood[:, 0, 0], equal_nan=True)
    # and the MAP values are the trellis' MAP
    jet = jets[3]
    ref = exact_trellis(_with(jet, lam=1.6, lam_root=3.1), likelihood).log_likelihood
    assert grid.map_log_likelihood[3, 1, 1] == pytest.approx(ref, rel=1e-12)


def test_scan_sums_the_jets(jets):
    s = scan(jets, lam=[1.0, 1.5, 2.0, 2.5])
    ev = log_evidence(jets, lam=2.0)
    assert s.total.shape == (4,) and s.used.all()
    assert s.total[2] == pytest.approx(ev.total, rel=1e-12)
    assert s.best()["lam"] in (1.0, 1.5, 2.0, 2.5)
    two = scan(jets, lam=[1.0, 2.0], lam_root=[1.5, 3.0, 4.0])
    assert two.total.shape == (2, 3) and list(two.grid) == ["lam", "lam_root"]
    assert two.per_jet.shape == (len(jets), 2, 3)


@pytest.mark.parametrize("likelihood", ["density", "symmetric"])
def test_truth_scan_on_two_rates_is_each_points_log_likelihood(jets, likelihood):
    """The truth estimator on a grid of both rates (scored per rate, not per point) is every
    point's truth-tree log-likelihood; jets impossible in the density form are left out of the
    scan (NaN), as at every point of a one-rate scan."""
    from jetastar.ginkgo import log_likelihood

    lams, roots = [0.4, 1.3, 2.2], [0.05, 1.0, 2.5, 4.0]
    # (the last two: leaves above a lowered t_cut, impossible in the density form)
    jets = JetCollection.concatenate([jets, jets.take([5, 6]).with_params(t_cut=1e-3)])
    s = scan(jets, lam=lams, lam_root=roots, estimator="truth", likelihood=likelihood,
             max_leaves=None)
    assert s.per_jet.shape == (len(jets), 3, 4)
    for i in [*range(0, len(jets), 7), len(jets) - 1]:
        for a, lam in enumerate(lams):
            for b, root in enumerate(roots):
                ref = log_likelihood(_with(jets[i], lam=lam, lam_root=root), jets[i].truth,
                                     likelihood=likelihood)
                got = s.per_jet[i, a, b]
                assert got == pytest.approx(ref, rel=1e-11) or (np.isnan(got) and ref == -np.inf)
    assert np.isnan(s.per_jet[-2:]).all() == (likelihood == "density")


# ---------------------------------------------------------------------- fits
def test_fit_recovers_the_rate_it_was_generated_with():
    jets = generate(300, ShowerParams.qcd(lam=2.1, lam_root=2.1), seed=38)
    result = fit(jets, free=("lam",))
    lo, hi = result.interval("lam", 0.95)
    assert lo < 2.1 < hi and lo < result.values["lam"] < hi
    assert result.interval("lam", 0.68)[0] > lo and result.n_used == 300 and not result.left_out
    grid, delta = result.profile("lam")
    assert 0.0 <= delta.min() < 0.1 and grid.size == 16
    d = json.loads(result.to_json())
    assert d["values"]["lam"] == result.values["lam"] and d["fixed"] == {
        "lam_root": "each jet's own"}
    text = str(result)
    assert "lam = " in text and "68 %" in text and "300 of 300 jets" in text
    ax = result.plot()
    assert ax.get_xlabel() == "λ"
    import matplotlib.pyplot as plt

    plt.close("all")


def test_two_rates_profile_each_other():
    jets = generate(150, ShowerParams.w(), seed=39, max_leaves=12)
    result = fit(jets, free=("lam", "lam_root"), selection=(1, 12))
    assert set(result.values) == {"lam", "lam_root"}
    for name in ("lam", "lam_root"):
        lo, hi = result.interval(name, 0.95)
        assert lo is not None and hi is not None and lo < result.values[name] < hi


def test_selection_is_accounted_for_or_refused():
    jets = generate(40, ShowerParams.w(), seed=40, max_leaves=12)
    over = generate(5, ShowerParams.w(), seed=41, min_leaves=13, max_leaves=16)
    both = JetCollection.concatenate([jets, over])
    with pytest.raises(InferenceError,
                       match=r"max_leaves=12.*selection=\(1, 12\) \(command line: --selection 1:12"):
        scan(both, lam=[1.0, 2.0], max_leaves=12)
    # declared, the selection is applied: the jets outside it are left out, named
    cut = scan(both, lam=[1.0, 2.0], selection=(1, 12), max_leaves=12)
    assert list(cut.status[-5:]) == ["outside_selection"] * 5 and not cut.used[-5:].any()
    assert "outside the declared selection 1..12" in cut.message[-1]
    s = scan(jets, lam=[1.0, 2.0], selection=(1, 12), max_leaves=12)
    assert np.array_equal(cut.total, s.total) and cut.used[:40].all()
    log_p = selection_log_probability(jets, (1, 12), lam=[1.0, 2.0])
    plain = scan(jets, lam=[1.0, 2.0], max_leaves=12)
    assert np.allclose(s.total, plain.total - log_p[:, :, 0].sum(axis=0))
    # fewer leaves at a larger rate: the window holds more of the jets there
    assert log_p[0, 0, 0] < log_p[0, 1, 0] < 0


def test_selection_probability_is_the_generators_and_smooth():
    """The importance-sampled P(selection | θ) equals fresh generator counts at every point (within
    their binomial errors) and is a smooth function of the rate (no count noise between points)."""
    jets = generate(2, ShowerParams.w(), seed=42, max_leaves=13)
    grid = np.linspace(1.5, 5.0, 8)
    log_p = selection_log_probability(jets, (1, 13), lam_root=grid, n_generated=40_000)[0, 0]
    assert log_p.shape == (8,) and np.all(np.diff(log_p) > 0)
    for k in (0, 3, 7):
        sizes = generate(40_000, ShowerParams.w().replace(lam_root=float(grid[k])),
                         seed=777).n_leaves
        p = float(np.mean(np.asarray(sizes) <= 13))
        error = math.sqrt((1 - p) / (40_000 * p))  # on log p, fresh count; the reweighted's is
        assert abs(log_p[k] - math.log(p)) < 5 * error * math.sqrt(2), k  # of the same order
    # a quartic through the eight points: what is left is far below the noise of a count per point
    residual = log_p - np.polyval(np.polyfit(grid, log_p, 4), grid)
    assert np.max(np.abs(residual)) < 0.05 * math.sqrt(0.5 / 40_000)
    with pytest.raises(InferenceError, match="n_generated must be >= 1"):
        selection_log_probability(jets, (1, 13), lam_root=grid, n_generated=0)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"free": ("t_cut",)}, "free parameters are one or both of lam, lam_root"),
    ({"free": ("lam", "lam")}, "free parameters"),
    ({"free": ("lam",), "lam": 2.0}, "lam is free: do not also give it a value"),
    ({"free": ("lam",), "grid": {"lam": (0.0, 3.0)}}, "0 < low < high"),
    ({"free": ("lam",), "grid": {"lam": (-1.0, 2.0)}}, "0 < low < high"),
    ({"free": ("lam",), "grid": {"lam_root": (1.0, 2.0)}}, "not free"),
    ({"free": ("lam",), "likelihood": "exact"}, "unknown likelihood 'exact'"),
    ({"free": ("lam",), "estimator": "bayes"}, "unknown estimator 'bayes'"),
    ({"free": ("lam",), "device": "tpu"}, "device must be one of"),
])
def test_bad_fits_are_one_clear_line(kwargs, match):
    jets = generate(5, ShowerParams.qcd(), seed=42)
    with pytest.raises(InferenceError, match=match):
        fit(jets, **kwargs)


def test_bad_grids_and_jets_are_refused():
    jets = generate(5, ShowerParams.qcd(), seed=43)
    with pytest.raises(InferenceError, match="finite and > 0"):
        scan(jets, lam=[1.0, -2.0])
    with pytest.raises(InferenceError, match="needs a grid"):
        scan(jets, lam=2.0)
    with pytest.raises(InferenceError, match="one value of lam"):
        log_evidence(jets, lam=[1.0, 2.0])
    with pytest.raises(InferenceError, match="truth trees"):
        scan(JetCollection.from_momenta([np.asarray(j.leaves) for j in jets]), lam=[1.0, 2.0],
             estimator="truth")
    with pytest.raises(TypeError, match=r"inference takes what jetastar\.cluster takes"):
        log_evidence({"E": [1.0]})
    # an invalid jet is one failed row, named
    bad = np.array(jets.leaves, copy=True)
    bad[0, 0] = np.nan
    broken = JetCollection(
        leaves=bad, leaf_offsets=jets.leaf_offsets, children=jets.children,
        leaf_of_node=jets.leaf_of_node, node_offsets=jets.node_offsets, jet_id=jets.jet_id,
        seed=jets.seed, jet_type=jets.jet_type, params=jets.params)
    ev = log_evidence(broken)
    assert ev.status[0] == "failed" and "leaves" in ev.message[0] and np.isnan(ev.log_z[0])
    assert set(ev.status[1:]) == {"ok"}
    with pytest.raises(InvalidJetError):
        broken[0]


def test_one_jets_particles_are_a_jet():
    jet = generate(1, ShowerParams.qcd(), seed=44)[0]
    ev = log_evidence(np.asarray(jet.leaves))
    assert len(ev) == 1 and ev.status[0] == "ok"
