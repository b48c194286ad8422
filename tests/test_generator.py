from __future__ import annotations

import subprocess
import sys
from functools import cache

import numpy as np
import pytest
from helpers.refdata import DATA
from scipy import stats

from jetastar import JetastarError
from jetastar.ginkgo import ShowerParams, generate, log_likelihood

N_JETS = 4000


@cache
def _sample(jet_type: str):
    params = ShowerParams.preset(jet_type)
    jets, details = generate(N_JETS, params, seed=20261122, return_details=True)
    per_jet = {"n_leaves": [], "depth_max": [], "logLH_total": [], "heavy": [], "light": []}
    pooled = {"leaf_depth": [], "internal_m2_excl_root": []}
    for jet in jets:
        tree = jet.truth
        depth = tree.depths()
        leaf = tree.is_leaf()
        per_jet["n_leaves"].append(jet.n_leaves)
        per_jet["depth_max"].append(depth.max())
        per_jet["logLH_total"].append(log_likelihood(jet))
        nm = jet.node_momenta
        t = nm[:, 0] ** 2 - np.sum(nm[:, 1:] ** 2, axis=1)
        kids = t[tree.children[tree.root]]
        per_jet["heavy"].append(kids.max())
        per_jet["light"].append(kids.min())
        pooled["leaf_depth"].extend(depth[leaf])
        internal = ~leaf
        internal[tree.root] = False
        pooled["internal_m2_excl_root"].extend(t[internal])
    leaves = jets.leaves
    pooled["leaf_E"] = leaves[:, 0]
    pooled["leaf_m2"] = leaves[:, 0] ** 2 - np.sum(leaves[:, 1:] ** 2, axis=1)
    draws = details["draws"]
    return jets, details, per_jet, pooled, draws


@cache
def _reference():
    with np.load(DATA / "ginkgo_generator_stats_raw.npz") as data:
        return {k: data[k] for k in data.files}


@pytest.mark.parametrize("jet_type", ["QCD", "W"])
def test_distributions_match_reference_generator(jet_type: str):
    """Two-sample KS tests against 2000 jets of the reference generator (default parameters).

    Per-jet quantities are independent across jets: p > 0.01. Pooled per-leaf / per-node samples
    are correlated within a jet (e.g. leaf energies add up to the jet energy), which makes the KS
    p-value anti-conservative: p > 1e-3 for those.
    """
    ref = _reference()
    _, _, per_jet, pooled, draws = _sample(jet_type)
    p_values = {}
    for name in ("n_leaves", "depth_max", "logLH_total"):
        r = ref[f"{jet_type}_{name}"]
        p_values[name] = stats.ks_2samp(np.asarray(per_jet[name]), r[np.isfinite(r)]).pvalue
    rc = ref[f"{jet_type}_root_children_m2"]
    p_values["heavy_root_child"] = stats.ks_2samp(per_jet["heavy"], rc.max(axis=1)).pvalue
    p_values["light_root_child"] = stats.ks_2samp(per_jet["light"], rc.min(axis=1)).pvalue
    for name, p in p_values.items():
        assert p > 0.01, (name, p)
    for name in ("leaf_E", "leaf_m2", "internal_m2_excl_root", "leaf_depth"):
        p = stats.ks_2samp(np.asarray(pooled[name]), ref[f"{jet_type}_{name}"]).pvalue
        assert p > 1e-3, (name, p)
    # accepted draws of splits other than the root's (the root split uses λ_R)
    jets = _sample(jet_type)[0]
    base = jets.node_offsets[:-1]
    root_kids = np.concatenate([jets.children[base, 0] + base, jets.children[base, 1] + base])
    other = np.ones(draws.size, dtype=bool)
    other[base] = False
    other[root_kids] = False
    assert stats.ks_2samp(draws[other], ref[f"{jet_type}_draws_other"]).pvalue > 1e-3
    rk = ref[f"{jet_type}_draws_root_children"]
    assert stats.ks_2samp(draws[root_kids], rk).pvalue > 1e-3


def test_truncated_exponential_mean():
    for jet_type, rate in (("QCD", 1.5), ("W", 3.0)):
        jets, details, *_ = _sample(jet_type)
        # the second node of each jet in pre-order is a child of the root (drawn with λ_R)
        first_child_draws = details["draws"][jets.node_offsets[:-1] + 1]
        expected = 1 / rate - 0.999 * np.exp(-0.999 * rate) / (1 - np.exp(-0.999 * rate))
        sigma = first_child_draws.std() / np.sqrt(first_child_draws.size)
        assert abs(first_child_draws.mean() - expected) < 4 * sigma
        assert first_child_draws.max() < 0.999


@pytest.mark.parametrize("jet_type", ["QCD", "W"])
def test_physics_invariants(jet_type: str):
    jets, details, *_ = _sample(jet_type)
    params = ShowerParams.preset(jet_type)
    nm = jets.node_momenta
    t_nodes = nm[:, 0] ** 2 - np.sum(nm[:, 1:] ** 2, axis=1)
    is_leaf = jets.children[:, 0] < 0
    # no negative leaf masses; leaves at or below t_cut; internal nodes above it
    assert np.all(t_nodes[is_leaf] >= 0.0)
    assert np.all(t_nodes[is_leaf] <= params.t_cut * (1 + 1e-9))
    assert np.all(details["node_t"][~is_leaf] > params.t_cut)
    # the actual mass of every internal node equals its nominal t (float64 rounding only)
    rel = np.abs(t_nodes[~is_leaf] - details["node_t"][~is_leaf]) / details["node_t"][~is_leaf]
    assert rel.max() < 1e-9
    # momentum conservation at every split
    base = np.repeat(jets.node_offsets[:-1], np.diff(jets.node_offsets))
    internal = np.flatnonzero(~is_leaf)
    left = jets.children[internal, 0] + base[internal]
    right = jets.children[internal, 1] + base[internal]
    dev = np.abs(nm[internal] - nm[left] - nm[right]).max()
    assert dev < 1e-10 * nm[:, 0].max()
    # the root is the requested 4-vector
    assert np.allclose(nm[jets.node_offsets[:-1]], params.root_momentum, rtol=0, atol=1e-12)
    # every truth tree has a finite symmetric likelihood
    assert all(np.isfinite(log_likelihood(j)) for j in jets[:500])


def test_per_jet_reproducibility():
    params = ShowerParams.w()
    full = generate(60, params, seed=77)
    pieces = [generate(20, params, seed=77, first_index=k) for k in (0, 20, 40)]
    for k, piece in enumerate(pieces):
        for i, jet in enumerate(piece):
            ref = full[20 * k + i]
            assert jet.jet_id == ref.jet_id
            assert np.array_equal(jet.leaves, ref.leaves) and jet.truth == ref.truth
    assert not np.array_equal(generate(1, params, seed=78)[0].leaves, full[0].leaves)
    # the filter only replaces jets that fail it: passing jets are unchanged
    filtered = generate(60, params, seed=77, min_leaves=12)
    for a, b in zip(filtered, full, strict=True):
        if b.n_leaves >= 12:
            assert np.array_equal(a.leaves, b.leaves)
        assert a.n_leaves >= 12


def test_leaf_filter_bounds_and_errors():
    jets = generate(50, ShowerParams.qcd(), seed=5, min_leaves=9, max_leaves=10)
    assert set(jets.n_leaves) <= {9, 10} and len(jets) == 50
    with pytest.raises(JetastarError, match=r"jet 0: no jet with 40 <= n_leaves <= 41 in 30 tries"):
        generate(2, ShowerParams.qcd(), seed=5, min_leaves=40, max_leaves=41, max_tries=30)
    with pytest.raises(ValueError, match="min_leaves <= max_leaves"):
        generate(2, ShowerParams.qcd(), min_leaves=5, max_leaves=4)
    with pytest.raises(ValueError, match="n_jets"):
        generate(-1)
    with pytest.raises(ValueError, match="seed"):
        generate(1, seed=-3)
    with pytest.raises(TypeError, match="ShowerParams"):
        generate(1, {"t_cut": 16})
    assert len(generate(0)) == 0


def test_small_t_cut_gives_large_jets():
    jets = generate(20, ShowerParams.qcd(t_cut=0.09), seed=2)
    assert 30 < np.mean(jets.n_leaves) < 80
    assert all(np.isfinite(log_likelihood(j)) for j in jets)


def test_the_model_loads_without_the_generator():
    """``jetastar.ginkgo`` loads ``generate`` on first use: the model (layer 1) must not import the
    generator (layer 3, which imports ``jetastar.jet``), whatever is imported first."""
    code = ("import sys, jetastar.ginkgo.params, jetastar.jet\n"
            "assert 'jetastar.ginkgo.generator' not in sys.modules\n"
            "from jetastar.ginkgo import generate\n"
            "import jetastar.ginkgo as g\n"
            "assert g.generate is generate and 'generate' in dir(g)\n"
            "print(len(generate(2, seed=1)))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip() == "2", proc.stderr
