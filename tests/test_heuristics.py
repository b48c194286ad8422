"""A* heuristics: h0 is an upper bound on every subset's best sub-hierarchy; h1 is not."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers.refdata import reference_jets

from jetastar import Jet
from jetastar.clustering import Trellis
from jetastar.clustering.exact._astar_kernels import subset_map
from jetastar.ginkgo import ShowerParams, generate, heuristic
from jetastar.ginkgo.heuristics import (
    EXACT_MAX_LEAVES,
    HEURISTICS,
    _bound_py,
    _h0_shapes,
    heuristic_tables,
)

FORMS = ("symmetric", "legacy")


def _subset_maps(jet: Jet, likelihood: str) -> np.ndarray:
    """Best log-likelihood of every subset (inner λ everywhere), from the exact trellis."""
    consts = jet.likelihood_constants(likelihood)
    inner = np.stack([consts[0], consts[0]])
    return Trellis.from_arrays(jet.leaves, inner, likelihood, progress=False).map_array()


def _all_bounds(jet: Jet, likelihood: str, kind: int) -> np.ndarray:
    p, tl, mt, w, d, consts, phys = heuristic_tables(jet, likelihood)
    n = jet.n_leaves
    out = np.full(1 << n, np.nan)
    for m in range(1, 1 << n):
        idx = np.array([i for i in range(n) if m >> i & 1], dtype=np.int64)
        out[m] = _bound_py(kind, idx, p, tl, mt, w, d, consts, phys)
    return out


def _violations(jet: Jet, likelihood: str, kind: int) -> tuple[int, np.ndarray, np.ndarray]:
    best = _subset_maps(jet, likelihood)
    bound = _all_bounds(jet, likelihood, kind)
    finite = np.isfinite(best)
    tol = 1e-9 * np.maximum(1.0, np.abs(np.where(finite, best, 0.0)))
    bad = finite & (bound < best - tol)
    return int(bad.sum()), bound, best


def _jets_for_admissibility() -> list[Jet]:
    ref = [jet for _, jet in reference_jets(max_leaves=9)][::9]
    gen = list(generate(4, ShowerParams.qcd(), seed=101, min_leaves=7, max_leaves=9))
    gen += list(generate(4, ShowerParams.w(), seed=202, min_leaves=8, max_leaves=10))
    return ref + gen


@pytest.mark.parametrize("likelihood", FORMS)
def test_h0_is_an_upper_bound_on_every_subset(likelihood):
    n_checked = 0
    for jet in _jets_for_admissibility():
        bad, bound, _ = _violations(jet, likelihood, 0)
        assert bad == 0, f"jet {jet.label}: {bad} subsets with h0 below their MAP"
        assert not np.any(np.isnan(bound[1:]))
        assert not np.any(bound[1:] == np.inf)
        n_checked += (1 << jet.n_leaves) - 1
    assert n_checked > 5000


@pytest.mark.parametrize("likelihood", FORMS)
def test_h0_is_exact_on_small_clusters_and_detects_impossible_clusters(likelihood):
    jet = generate(1, ShowerParams.w(), seed=7, min_leaves=8, max_leaves=8)[0]
    best = _subset_maps(jet, likelihood)
    bound = _all_bounds(jet, likelihood, 0)
    sizes = np.array([bin(m).count("1") for m in range(1 << jet.n_leaves)])
    small = (sizes >= 1) & (sizes <= EXACT_MAX_LEAVES)
    np.testing.assert_allclose(bound[small], best[small], rtol=1e-12, atol=1e-12)
    # a subset that no finite tree covers gets -inf, and no finite subset does
    assert np.all(np.isneginf(bound[np.isneginf(best) & small]))
    assert np.all(np.isfinite(bound[np.isfinite(best) & (sizes >= 1)]))


def test_h0_matches_the_internal_subset_oracle():
    # the A*'s own exhaustive subset DP (used by the benchmarks) agrees with the trellis
    jet = generate(1, ShowerParams.qcd(), seed=9, min_leaves=8, max_leaves=8)[0]
    for likelihood in FORMS:
        consts = jet.likelihood_constants(likelihood)
        mine = subset_map(np.ascontiguousarray(jet.leaves), consts)
        trellis = _subset_maps(jet, likelihood)
        np.testing.assert_allclose(mine, trellis, rtol=1e-12)


def test_h1_is_not_admissible_somewhere_but_h0_is():
    # the paper's approximate heuristic overestimates some subsets (the reference "exact" A*
    # returned non-optimal trees because of this); h0 never does on the same jets
    found = 0
    for _, jet in reference_jets(max_leaves=9)[::5]:
        bad1, _, _ = _violations(jet, "legacy", 1)
        if bad1:
            found += 1
            assert _violations(jet, "legacy", 0)[0] == 0
        if found >= 2:
            break
    assert found >= 2


def test_h0_legacy_with_a_spacelike_leaf_is_still_a_bound():
    jet = generate(1, ShowerParams.qcd(), seed=11, min_leaves=7, max_leaves=7)[0]
    leaves = jet.leaves.copy()
    # make leaf 0 very slightly spacelike (inside the accepted tolerance)
    p3 = math.sqrt(float(np.sum(leaves[0, 1:] ** 2)))
    leaves[0, 0] = p3 * (1.0 - 1e-8)
    bent = Jet(leaves, jet.params)
    assert bent.leaf_t[0] < 0
    assert heuristic_tables(bent, "legacy")[-1][0] == 0
    bad, _, _ = _violations(bent, "legacy", 0)
    assert bad == 0


def test_public_heuristic_api():
    jet = generate(1, ShowerParams.qcd(), seed=3, min_leaves=6, max_leaves=6)[0]
    assert heuristic(jet, [2]) == 0.0
    v0 = heuristic(jet, [0, 1, 2, 3], kind="h0")
    v1 = heuristic(jet, (3, 2, 1, 0), kind="h1", likelihood="symmetric")
    assert isinstance(v0, float) and not math.isnan(v0) and not math.isnan(v1)
    best = _subset_maps(jet, "symmetric")[0b1111]
    assert v0 >= best - 1e-9
    for kind in HEURISTICS:
        for likelihood in FORMS:
            assert heuristic(jet, range(jet.n_leaves), kind=kind, likelihood=likelihood) < math.inf


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"kind": "h2"}, "valid: 'h0', 'h1', 'paper'"),
        ({"likelihood": "head"}, "valid: 'symmetric', 'legacy'"),
    ],
)
def test_heuristic_rejects_unknown_names(kwargs, match):
    jet = generate(1, ShowerParams.qcd(), seed=3, min_leaves=4, max_leaves=4)[0]
    with pytest.raises(ValueError, match=match):
        heuristic(jet, [0, 1], **kwargs)


@pytest.mark.parametrize("leaves", [[], [0, 0], [-1, 2], [0, 99]])
def test_heuristic_rejects_bad_clusters(leaves):
    jet = generate(1, ShowerParams.qcd(), seed=3, min_leaves=4, max_leaves=4)[0]
    with pytest.raises(ValueError, match="leaf_indices"):
        heuristic(jet, leaves)


def test_shape_dp_with_the_exact_least_masses_is_tighter_and_still_a_bound():
    """The benchmarks' oracle: every k-leaf node given the least mass of a k-leaf subset."""
    jet = generate(1, ShowerParams.qcd(), seed=101, min_leaves=9, max_leaves=9)[0]
    p, tl, mt, w, d, consts, phys = heuristic_tables(jet, "symmetric")
    best = _subset_maps(jet, "symmetric")
    n = jet.n_leaves
    mom = np.array([p[[i for i in range(n) if m >> i & 1]].sum(axis=0) for m in range(1, 1 << n)])
    t = np.concatenate([[0.0], mom[:, 0] ** 2 - (mom[:, 1:] ** 2).sum(axis=1)])
    size = np.array([bin(m).count("1") for m in range(1 << n)])
    n_tighter = 0
    for s in range(1, 1 << n):
        if size[s] <= EXACT_MAX_LEAVES or not np.isfinite(best[s]):
            continue
        subs = np.array([u for u in range(1, s + 1) if u & s == u])
        floor = np.array([t[subs[size[subs] == k]].min() if k else 0.0 for k in range(size[s] + 1)])
        idx = np.array([i for i in range(n) if s >> i & 1], dtype=np.int64)
        args = (idx, len(idx), t[s], p, tl, mt, w, d, consts[0], phys[0] != 0)
        plain = _h0_shapes(*args, np.zeros(0))
        tight = _h0_shapes(*args, floor)
        assert best[s] <= tight + 1e-9 * abs(best[s]) + 1e-9, f"subset {s:#x}"
        assert tight <= plain + 1e-12 * abs(plain)
        n_tighter += tight < plain - 1e-6
    assert n_tighter > 0


def test_a_numpy_array_is_refused_with_the_way_to_make_a_jet():
    """heuristic(array, ...) failed with "'numpy.ndarray' object has no attribute 'n_leaves'"."""
    jet = generate(1, ShowerParams.w(), seed=7, min_leaves=6, max_leaves=6)[0]
    with pytest.raises(TypeError, match=r"got ndarray; .*Jet\.from_particles\(particles, params\)"):
        heuristic(np.asarray(jet.leaves), [0, 1])
