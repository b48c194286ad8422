from __future__ import annotations

import math

import numpy as np
import pytest
from helpers.bruteforce import brute_force
from helpers.refdata import close, reference_jet_records, reference_jets, split_cases
from hypothesis import given, settings
from hypothesis import strategies as st

from jetastar import InvalidJetError, InvalidTreeError, Jet, Tree
from jetastar.ginkgo import (
    ShowerParams,
    generate,
    likelihood_constants,
    log_likelihood,
    node_log_likelihoods,
    split_log_likelihood,
    split_log_likelihood_t,
)
from jetastar.ginkgo.kernels import parent_terms, split_llh, split_llh_above, split_llh_given_parent

CASES = [c for c in split_cases() if not c["boundary_sensitive"]]


def _t(p: np.ndarray) -> np.ndarray:
    return p[..., 0] ** 2 - np.sum(p[..., 1:] ** 2, axis=-1)


@pytest.mark.parametrize(("form", "key"), [("symmetric", "head"), ("legacy", "legacy")])
def test_every_reference_split_case(form: str, key: str):
    assert len(CASES) > 1300
    pl = np.array([c["pL"] for c in CASES])
    pr = np.array([c["pR"] for c in CASES])
    if form == "legacy":
        tl = np.array([c["tL_given"] for c in CASES])
        tr = np.array([c["tR_given"] for c in CASES])
    else:
        tl, tr = _t(pl), _t(pr)
    t_cut = np.array([c["t_cut"] for c in CASES])
    lam = np.array([c["lam"] for c in CASES])
    ref = np.array([c[key] for c in CASES], dtype=float)
    n_inf = 0
    for tc in np.unique(t_cut):
        sel = t_cut == tc
        got = split_log_likelihood_t(tl[sel], tr[sel], _t(pl + pr)[sel], tc, lam[sel], form)
        for g, r in zip(got, ref[sel], strict=True):
            assert not math.isnan(g)
            assert close(g, r, 1e-9), (g, r)
            n_inf += g == -math.inf
    assert n_inf > 0  # the cases cover the -inf branches


def test_scalar_split_function_matches_cases():
    for c in CASES[:200]:
        got = split_log_likelihood(c["pL"], c["pR"], c["t_cut"], c["lam"])
        assert close(got, c["head"], 1e-9)
        got = split_log_likelihood(
            c["pL"], c["pR"], c["t_cut"], c["lam"], "legacy",
            t_left=c["tL_given"], t_right=c["tR_given"],
        )
        assert close(got, c["legacy"], 1e-9)


def test_truth_totals_of_reference_jets():
    records = reference_jet_records()
    assert len(records) == 433
    for rec, jet in reference_jets():
        stored = log_likelihood(jet, use_node_momenta=True)
        assert close(stored, rec["logLH_f64_total"], 1e-9), rec["seed"]
        per_node = node_log_likelihoods(jet, use_node_momenta=True)
        assert np.allclose(per_node, rec["logLH_f64"], rtol=1e-9, atol=1e-12)
        assert close(log_likelihood(jet), rec["logLH_f64_leafsum_total"], 1e-9), rec["seed"]
        # The reference legacy totals use the generator's float32 nominal t ("deltas"), which the
        # JSON does not carry; from the stored 4-vectors the difference is ~1e-6 relative.
        legacy = log_likelihood(jet, likelihood="legacy", use_node_momenta=True)
        assert close(legacy, rec["logLH_legacy_total"], 2e-5), rec["seed"]


def _legacy_all_lambda(jet: Jet) -> Jet:
    """The reference A* scores legacy MAPs with λ at every split, λ_R unused."""
    return Jet(jet.leaves, jet.params.replace(lam_root=jet.params.lam), jet_id=jet.jet_id)


@pytest.mark.parametrize("max_leaves", [6])
def test_brute_force_reproduces_reference_map_and_log_z(max_leaves: int):
    jets = reference_jets(max_leaves=max_leaves, with_map=True)
    assert len(jets) >= 50
    for rec, jet in jets:
        m = rec["map"]
        bf = brute_force(jet)
        assert close(bf["map_ll"], m["ginkgo_map_logLH"], 1e-8)
        assert close(bf["log_z"], m["ginkgo_logZ"], 1e-8)
        assert Tree.from_nested(m["ginkgo_map_tree"]) in bf["map_trees"]
        bfl = brute_force(_legacy_all_lambda(jet), "legacy")
        assert close(bfl["map_ll"], m["legacy_map_logLH"], 1e-8)
        assert close(bfl["log_z"], m["legacy_logZ"], 1e-8)
        assert Tree.from_nested(m["legacy_map_tree"]) in bfl["map_trees"]


def test_brute_force_seven_leaves():
    jets = [(r, j) for r, j in reference_jets(max_leaves=7, with_map=True) if j.n_leaves == 7]
    for rec, jet in jets[:3]:
        bf = brute_force(jet)
        assert bf["n_trees"] == 10395
        assert close(bf["map_ll"], rec["map"]["ginkgo_map_logLH"], 1e-8)
        assert close(bf["log_z"], rec["map"]["ginkgo_logZ"], 1e-8)


def test_lambda_root_only_at_the_root():
    jet = generate(1, ShowerParams.w(), seed=4, min_leaves=5, max_leaves=8)[0]
    per_node = node_log_likelihoods(jet)
    same = Jet(jet.leaves, jet.params.replace(lam_root=jet.params.lam), jet.truth)
    per_node_same = node_log_likelihoods(same)
    root = jet.truth.root
    others = np.arange(jet.truth.n_nodes) != root
    assert np.array_equal(per_node[others], per_node_same[others])
    assert per_node[root] != per_node_same[root]


def test_infinite_cases_exact():
    c = likelihood_constants(16.0, 1.5)[0]
    assert split_llh(1.0, 1.0, 16.0, c) == -math.inf  # tP <= t_cut
    assert split_llh(-1e-9, 1.0, 100.0, c) == -math.inf  # negative child mass
    assert split_llh(99.95, 0.0, 100.0, c) == -math.inf  # child >= 0.999 tP
    assert split_llh(30.0, 30.0, 100.0, c) == -math.inf  # √tL + √tR > √tP
    assert split_llh(1.0, 1.0, -5.0, c) == -math.inf
    assert split_llh(1.0, 1.0, math.nan, c) == -math.inf
    cl = likelihood_constants(16.0, 1.5, likelihood="legacy")[0]
    assert split_llh(0.0, 0.0, 15.999, cl) == -math.inf  # strict <
    assert math.isfinite(split_llh(0.0, 0.0, 16.0, cl))
    assert split_llh(0.0, 0.0, math.nan, cl) == -math.inf
    # legacy degenerate second scale: heavier child as heavy as the parent
    assert math.isfinite(split_llh(50.0, 0.0, 50.0, cl))
    assert split_llh(50.0, 1.0, 50.0, cl) == -math.inf


def test_small_cut_leaf_term_is_precise():
    # both children stop and λ t_cut / T ≈ 4e-15: a naive log(1 - e^{-x}) is off by percent here
    t_cut, lam, t_leaf, t_parent = 1e-12, 1.5, 1e-13, 400.0
    c = likelihood_constants(t_cut, lam)[0]
    got = split_llh(t_leaf, t_leaf, t_parent, c)
    norm = -math.log(-math.expm1(-0.999 * lam))
    x1 = lam * t_cut / t_parent
    x2 = lam * t_cut / (math.sqrt(t_parent) - math.sqrt(t_leaf)) ** 2
    # log(1 - e^{-x}) = log x - x/2 + O(x²); both orderings are equal, so logaddexp + log ½ = one
    expected = 2 * norm + math.log(x1) - x1 / 2 + math.log(x2) - x2 / 2 - math.log(4 * math.pi)
    assert abs(got - expected) <= 1e-13 * abs(expected)


four_vec = st.tuples(
    st.floats(-50, 50), st.floats(-50, 50), st.floats(-50, 50), st.floats(0.0, 30.0)
).map(lambda v: (math.sqrt(v[0] ** 2 + v[1] ** 2 + v[2] ** 2 + v[3] ** 2), v[0], v[1], v[2]))


@settings(max_examples=200, deadline=None)
@given(four_vec, four_vec, st.sampled_from([1.0, 16.0]), st.sampled_from([1.5, 3.0]))
def test_symmetric_form_is_symmetric_and_never_nan(pl, pr, t_cut, lam):
    a = split_log_likelihood(pl, pr, t_cut, lam)
    b = split_log_likelihood(pr, pl, t_cut, lam)
    assert not math.isnan(a)
    assert a == b or abs(a - b) <= 1e-12 * abs(a)
    la = split_log_likelihood(pl, pr, t_cut, lam, "legacy")
    lb = split_log_likelihood(pr, pl, t_cut, lam, "legacy")
    assert not math.isnan(la)
    assert la == lb or abs(la - lb) <= 1e-12 * abs(la)
    assert la < math.inf and a < math.inf


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**31), st.sampled_from(["symmetric", "legacy"]))
def test_invariant_under_leaf_relabelling(seed: int, likelihood: str):
    jet = generate(1, ShowerParams.qcd(), seed=seed, max_leaves=12)[0]
    rng = np.random.default_rng(seed)
    perm = rng.permutation(jet.n_leaves)  # new leaf i is old leaf perm[i]
    inverse = np.argsort(perm)
    relabelled_tree = Tree.from_children(
        jet.truth.children,
        np.where(jet.truth.leaf_of_node >= 0, inverse[jet.truth.leaf_of_node], -1),
    )
    relabelled = Jet(jet.leaves[perm], jet.params, relabelled_tree)
    a = log_likelihood(jet, likelihood=likelihood)
    b = log_likelihood(relabelled, likelihood=likelihood)
    assert a == b or abs(a - b) <= 1e-12 * abs(a)


def test_bad_names_and_arguments():
    jet = generate(1, ShowerParams.qcd(), seed=1)[0]
    with pytest.raises(ValueError, match="valid: 'symmetric', 'legacy'"):
        log_likelihood(jet, likelihood="head")
    with pytest.raises(ValueError, match="legacy"):
        split_log_likelihood((5, 0, 0, 1), (5, 0, 0, -1), 16.0, 1.5, t_left=0.0)
    with pytest.raises(ValueError, match="4-vector"):
        split_log_likelihood((5, 0, 0), (5, 0, 0, -1), 16.0, 1.5)
    with pytest.raises(ValueError, match="non-finite"):
        split_log_likelihood((math.nan, 0, 0, 1), (5, 0, 0, -1), 16.0, 1.5)
    with pytest.raises(InvalidJetError, match="lam"):
        likelihood_constants(16.0, -1.0)
    no_truth = Jet(jet.leaves, jet.params, jet_id=3)
    with pytest.raises(InvalidJetError, match=r"jet 3.*truth"):
        log_likelihood(no_truth)
    other = Tree.from_nested(tuple(range(2))) if jet.n_leaves == 2 else None
    if other is None:
        with pytest.raises(InvalidJetError, match="leaves"):
            log_likelihood(jet, Tree.from_nested((0, 1)))
    caterpillar = Tree.from_clusters(
        [set(range(k, jet.n_leaves)) for k in range(jet.n_leaves - 1)], jet.n_leaves
    )
    with pytest.raises(InvalidJetError, match="node momenta"):
        log_likelihood(jet, caterpillar, use_node_momenta=True)


def test_a_tree_may_be_given_as_a_result_or_as_nested_pairs():
    import jetastar
    from jetastar.clustering import ClusteringResult

    jet = generate(1, ShowerParams.qcd(), seed=3)[0]
    res = jetastar.cluster(jet, "greedy")
    nested = res.tree.to_nested()
    assert log_likelihood(jet, res) == log_likelihood(jet, res.tree) == res.log_likelihood
    assert log_likelihood(jet, nested) == res.log_likelihood
    np.testing.assert_array_equal(node_log_likelihoods(jet, res, "legacy"),
                                  node_log_likelihoods(jet, res.tree, "legacy"))
    with pytest.raises(InvalidTreeError, match=r"field 'tree': the greedy result has no tree"):
        log_likelihood(jet, ClusteringResult(None, -np.inf, "greedy", status="failed"))
    with pytest.raises(InvalidTreeError, match=r"must be a jetastar\.Tree, a clustering result or"):
        log_likelihood(jet, "((0, 1), 2)")
    # a results table is not one result (its tree is a method): the same error, not a crash
    with pytest.raises(InvalidTreeError, match=r"got AlgorithmResults"):
        log_likelihood(jet, jetastar.cluster(generate(2, ShowerParams.qcd(), seed=3), "greedy"))
    # particles are not a Jet: the message names the one jetastar.cluster made of them
    p4 = np.asarray(jet.leaves)
    with pytest.raises(TypeError, match=r"scores a jetastar\.Jet, got ndarray.*Jet\.from_particles"):
        log_likelihood(p4, res)
    from_numbers = jetastar.cluster(p4, "greedy")
    assert log_likelihood(Jet.from_particles(p4), from_numbers) == from_numbers.log_likelihood


@pytest.mark.parametrize("form", ["symmetric", "legacy"])
def test_single_split_scores_equal_the_precomputed_parent_form(form: str):
    # split_llh and split_llh_above compute only the parent terms a split's children use; the
    # exact engines compute all of them once per cluster: both must give the same bits
    rng = np.random.default_rng(5)
    c = likelihood_constants(t_cut=4.0, lam=1.5, lam_root=2.0, likelihood=form)[0]
    special = np.array([0.0, -1e-9, 4.0, np.nextafter(4.0, 5.0), 3.9, np.nan, -2.0])
    values = np.concatenate([special, rng.uniform(0.0, 12.0, 200), rng.uniform(0.0, 400.0, 200)])
    n = 0
    for t_left in values[::7]:
        for t_right in values[::5]:
            for t_parent in (0.0, 3.0, 4.0, 40.0, 900.0, float(rng.uniform(4.0, 2000.0))):
                value = split_llh(t_left, t_right, t_parent, c)
                above, evaluated = split_llh_above(t_left, t_right, t_parent, 0.0, 0.0,
                                                   -math.inf, c)
                assert evaluated and np.array_equal(above, value, equal_nan=True)
                if t_parent >= c[0]:
                    given = split_llh_given_parent(t_left, t_right, t_parent,
                                                   *parent_terms(t_parent, c), c)
                    assert np.array_equal(given, value, equal_nan=True)
                    n += value > -math.inf
    assert n > 500  # many finite cases, not only impossible ones
