"""kt / Cambridge-Aachen / anti-kt: hand-made configurations, conventions, FastJet agreement."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers.fastjet_trees import fastjet_tree
from helpers.kt_reference import kt_history_cubic

from jetastar import InvalidJetError, Jet, Tree
from jetastar.clustering import cluster, kt
from jetastar.clustering.agglomerative._kt_kernels import (
    NN_MIN_LEAVES,
    NN_SCAN_BELOW,
    kt_history,
    kt_history_nn,
    kt_history_scan,
)
from jetastar.clustering.agglomerative.kt import KT_ALGORITHMS, rapidity_phi
from jetastar.ginkgo import ShowerParams, generate, log_likelihood


def _massless(pt: float, y: float, phi: float) -> list[float]:
    return [pt * math.cosh(y), pt * math.cos(phi), pt * math.sin(phi), pt * math.sinh(y)]


def _jet(particles: list[tuple[float, float, float]]) -> Jet:
    return Jet(np.array([_massless(*p) for p in particles]), ShowerParams.qcd(), jet_id=99)


def _first_merge(tree: Tree) -> frozenset[int]:
    return min(tree.clusters(), key=len)


# A (pt 100, φ 0), B (pt 1, φ 1.0), C (pt 50, φ 0.2):
#   kt:  d_BC = 1·0.64 < d_AB = 1·1.0 < d_AC = 2500·0.04       -> B+C first
#   CA:  ΔR²: AC 0.04 < BC 0.64 < AB 1.0                        -> A+C first
#   akt: d_AC = 0.04/1e4 < d_AB = 1/1e4 < d_BC = 0.64/2500      -> A+C first
CONFIG_1 = [(100.0, 0.0, 0.0), (1.0, 0.0, 1.0), (50.0, 0.0, 0.2)]
# A (pt 100, φ 0), B (pt 1, φ 0.2), C (pt 1, φ 0.25):
#   kt:  d_BC = 0.0025 < d_AB = 0.04                             -> B+C first
#   CA:  ΔR²: BC 0.0025 < AB 0.04 < AC 0.0625                    -> B+C first
#   akt: d_AB = 0.04/1e4 < d_AC = 0.0625/1e4 < d_BC = 0.0025     -> A+B first
CONFIG_2 = [(100.0, 0.0, 0.0), (1.0, 0.0, 0.2), (1.0, 0.0, 0.25)]
# the same ideas with separation in rapidity instead of azimuth
CONFIG_3 = [(100.0, 0.0, 1.0), (1.0, 0.2, 1.0), (1.0, 0.25, 1.0)]


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (CONFIG_1, {"kt": {1, 2}, "cambridge": {0, 2}, "antikt": {0, 2}}),
        (CONFIG_2, {"kt": {1, 2}, "cambridge": {1, 2}, "antikt": {0, 1}}),
        (CONFIG_3, {"kt": {1, 2}, "cambridge": {1, 2}, "antikt": {0, 1}}),
    ],
)
def test_first_merge_on_hand_made_configurations(config, expected):
    jet = _jet(config)
    for algorithm, pair in expected.items():
        result = kt(jet, algorithm=algorithm)
        assert _first_merge(result.tree) == frozenset(pair), algorithm
        assert result.algorithm == algorithm


def test_four_particles_full_history():
    """Two tight pairs far apart: the pairs first; then a configuration where all three differ."""
    jet = _jet([(50.0, 0.0, 0.0), (5.0, 0.0, 0.1), (40.0, 0.0, 2.0), (4.0, 0.0, 2.3)])
    expected = Tree.from_nested(((0, 1), (2, 3)))
    for algorithm in ("kt", "cambridge", "antikt"):
        assert kt(jet, algorithm=algorithm).tree == expected
    # hard A (100, φ 0), D (60, φ 0.3); soft B (1, φ 1.5), C (1.2, φ 1.85):
    # kt:  d_BC = 0.1225 first; then d(D, BC) ≈ 4.84·1.93 < d(A, BC) ≈ 4.84·2.86 < d_AD = 324
    # CA:  ΔR² AD 0.09 < BC 0.1225, then the two pairs
    # akt: d_AD = 0.09/1e4 first; then B (ΔR² 1.93 to AD, /160²) before C (ΔR² 3.0), C last
    jet = _jet([(100.0, 0.0, 0.0), (1.0, 0.0, 1.5), (1.2, 0.0, 1.85), (60.0, 0.0, 0.3)])
    assert kt(jet, algorithm="kt").tree == Tree.from_nested((0, (3, (1, 2))))
    assert kt(jet, algorithm="cambridge").tree == Tree.from_nested(((0, 3), (1, 2)))
    assert kt(jet, algorithm="antikt").tree == Tree.from_nested((((0, 3), 1), 2))


def test_azimuth_wraps_around():
    """φ = 0.1 and φ = 2π - 0.1 are 0.2 apart, closer than φ = 0.5."""
    jet = _jet([(10.0, 0.0, 0.1), (10.0, 0.0, 2 * math.pi - 0.1), (10.0, 0.0, 0.5)])
    assert _first_merge(kt(jet, algorithm="cambridge").tree) == frozenset({0, 1})


def test_rapidity_phi_conventions():
    y, phi = rapidity_phi(np.array(_massless(3.0, 0.7, -1.0)))
    assert math.isclose(y, 0.7, rel_tol=1e-12)
    assert math.isclose(phi, 2 * math.pi - 1.0, rel_tol=1e-12)
    # along the beam axis: FastJet's ±(1e5 + |pz|)
    assert rapidity_phi(np.array([5.0, 0.0, 0.0, 5.0])) == (1e5 + 5.0, 0.0)
    assert rapidity_phi(np.array([5.0, 0.0, 0.0, -5.0])) == (-(1e5 + 5.0), 0.0)
    # massive: y = ½ ln((E+pz)/(E-pz))
    y, _ = rapidity_phi(np.array([10.0, 1.0, 2.0, 6.0]))
    assert math.isclose(y, 0.5 * math.log(16.0 / 4.0), rel_tol=1e-12)


@pytest.mark.parametrize("likelihood", ["symmetric", "legacy"])
def test_scored_with_the_ginkgo_likelihood(likelihood):
    for jet in generate(5, ShowerParams.qcd(t_cut=1.0), seed=81):
        for algorithm in ("kt", "cambridge", "antikt"):
            result = kt(jet, algorithm=algorithm, likelihood=likelihood)
            assert result.log_likelihood == log_likelihood(jet, result.tree, likelihood=likelihood)
            assert result.tree.n_leaves == jet.n_leaves
            assert result.options == {"algorithm": algorithm, "R": 1000.0}


def test_aliases_in_the_registry():
    jet = generate(1, ShowerParams.qcd(t_cut=1.0), seed=3)[0]
    for name in ("cambridge", "antikt"):
        by_name = cluster(jet, name)
        direct = kt(jet, algorithm=name)
        assert by_name.algorithm == name and by_name.tree == direct.tree
    assert cluster(jet, "kt").tree == kt(jet).tree and cluster(jet, "kt").algorithm == "kt"
    assert cluster(jet, "antikt", R=500.0).options["R"] == 500.0


def test_bad_input():
    jet = _jet(CONFIG_1)
    with pytest.raises(ValueError, match="'kt', 'cambridge', 'antikt'"):
        kt(jet, algorithm="siscone")
    for bad in (0.0, -1.0, math.inf, "wide"):
        with pytest.raises(ValueError, match="R must be"):
            kt(jet, R=bad)
    with pytest.raises(ValueError, match="larger R"):
        kt(_jet([(10.0, 0.0, 0.0), (10.0, 0.0, 2.0), (10.0, 0.0, 2.2)]), R=0.4)
    with pytest.raises(InvalidJetError, match="Jet"):
        kt("not a jet")


# ---------------------------------------------------------------------- FastJet agreement
def _random_event_jet(rng: np.random.Generator, n: int) -> Jet:
    """Massive particles spread over a wide range of rapidity and azimuth (not Ginkgo-like)."""
    pt = rng.exponential(20.0, n) + 0.5
    y = rng.uniform(-4.0, 4.0, n)
    phi = rng.uniform(0.0, 2 * math.pi, n)
    m = rng.uniform(0.0, 2.0, n)
    mt = np.sqrt(pt * pt + m * m)
    leaves = np.stack([mt * np.cosh(y), pt * np.cos(phi), pt * np.sin(phi), mt * np.sinh(y)], 1)
    return Jet(leaves, ShowerParams.qcd())


def test_identical_to_fastjet():
    fastjet = pytest.importorskip(
        "fastjet", reason="FastJet comparison needs the optional 'fastjet' extra"
    )
    jets = list(generate(40, ShowerParams.qcd(t_cut=1.0), seed=91))
    rng = np.random.default_rng(92)
    jets += [_random_event_jet(rng, int(n)) for n in rng.integers(2, 60, 40)]
    for jet in jets:
        for algorithm in ("kt", "cambridge", "antikt"):
            ours = kt(jet, algorithm=algorithm).tree
            assert ours == fastjet_tree(fastjet, jet.leaves, algorithm), (jet.label, algorithm)


def test_identical_to_fastjet_on_large_jets():
    fastjet = pytest.importorskip(
        "fastjet", reason="FastJet comparison needs the optional 'fastjet' extra"
    )
    for n, seed in ((150, 5), (500, 6)):
        jet = Jet(_concatenated_leaves(n, seed), ShowerParams.qcd())
        for algorithm in ("kt", "cambridge", "antikt"):
            ours = kt(jet, algorithm=algorithm).tree
            assert ours == fastjet_tree(fastjet, jet.leaves, algorithm), (n, algorithm)


# ---------------------------------------------------------------------- the nearest-neighbour kernel
# kt_history keeps nearest neighbours (O(n²)) from NN_MIN_LEAVES leaves on; its history must be
# the one of the full rescan at every step (tests/helpers/kt_reference.py, the kernel before),
# ties included: the same merges in the same order, the same node ids, the same beam steps.
POWERS = tuple(KT_ALGORITHMS.values())
#: R² of R = 1000 (one jet), 1, 0.4, 0.1 (beam recombinations)
R2S = (1e6, 1.0, 0.16, 0.01)


def _concatenated_leaves(n: int, seed: int) -> np.ndarray:
    """``n`` leaves of QCD jets (t_cut = 0.05 GeV²) put together (bench_columnar.py --deadline)."""
    jets = generate(max(4, n // 8), ShowerParams.qcd(t_cut=0.05), seed=seed)
    leaves = np.concatenate([j.leaves for j in jets])
    assert leaves.shape[0] >= n
    return np.ascontiguousarray(leaves[:n])


def _delta_r2(a: np.ndarray, b: np.ndarray) -> float:
    """ΔR² of two leaves, computed as the kernel does."""
    y1, phi1 = rapidity_phi(a)
    y2, phi2 = rapidity_phi(b)
    dphi = abs(phi1 - phi2)
    if dphi > math.pi:
        dphi = 2.0 * math.pi - dphi
    deta = y1 - y2
    return dphi * dphi + deta * deta


def _mismatches(leaves: np.ndarray, power: int, r2: float) -> list[str]:
    """Where the kernels' histories differ from the full rescan's (both paths of the kernel)."""
    lv = np.ascontiguousarray(leaves, dtype=np.float64)
    ref, ref_beams = kt_history_cubic(lv, np.int64(power), float(r2))
    out = []
    n = lv.shape[0]
    runs = {"scan": kt_history_scan(lv, np.int64(power), float(r2))}
    for scan_below in (2, 5, NN_SCAN_BELOW):  # nearest neighbours to the end, then full scans
        runs[f"nn<{scan_below}"] = kt_history_nn(lv, np.int64(power), float(r2), scan_below)
    runs["default"] = kt_history(lv, np.int64(power), float(r2))
    for name, (hist, beams, evals) in runs.items():
        if beams != ref_beams or not np.array_equal(hist, ref):
            out.append(f"n={n} p={power} r2={r2!r} {name}")
        if name == "scan" and ref_beams == 0:
            assert evals == (n**3 - n) // 6  # every pair at every step
    return out


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["qcd", "w"])
def test_nearest_neighbours_identical_to_full_scan_on_generated_jets(kind):
    params = ShowerParams.qcd if kind == "qcd" else ShowerParams.w
    jets = []
    for t_cut, count, seed in ((None, 1000, 301), (1.0, 600, 302), (0.3, 150, 303)):
        opts = {} if t_cut is None else {"t_cut": t_cut}
        jets += [j.leaves for j in generate(count, params(**opts), seed=seed)]
    bad = []
    beam_steps = 0
    for leaves in jets:
        for power in POWERS:
            for r2 in R2S:
                bad += _mismatches(leaves, power, r2)
            beam_steps += kt_history_cubic(leaves, np.int64(power), 0.01)[1]
    assert not bad, bad[:10]
    assert beam_steps > 1000  # small R: many beam recombinations were compared


def _tied_jets(rng: np.random.Generator) -> list[np.ndarray]:
    """Jets with exactly equal distances: copies of leaves (ΔR² = 0; doubled 4-vectors keep
    their rapidity and azimuth), mirror images in z (equal ΔR² between mirrored pairs), leaves
    along the beam (kt scale 0; anti-kt distances overflow to infinity)."""
    out = []
    for jet in generate(40, ShowerParams.qcd(t_cut=1.0), seed=int(rng.integers(1 << 30))):
        lv = jet.leaves
        mirror = lv * np.array([1.0, 1.0, 1.0, -1.0])
        beam = np.array([[7.0, 0.0, 0.0, 7.0], [3.0, 0.0, 0.0, -3.0], [14.0, 0.0, 0.0, 14.0]])
        for parts in ([lv, lv], [lv, lv, 2.0 * lv], [lv, mirror], [lv, mirror, lv, mirror],
                      [lv, 2.0 * mirror, 0.5 * lv], [lv, beam], [beam, lv, lv], [lv[:3], lv[:3]]):
            both = np.concatenate(parts)
            out.append(both)
            out.append(both[rng.permutation(both.shape[0])])
    out.append(np.array([[7.0, 0.0, 0.0, 7.0], [3.0, 0.0, 0.0, -3.0]]))
    return out


@pytest.mark.slow
def test_nearest_neighbours_identical_to_full_scan_on_ties():
    rng = np.random.default_rng(404)
    bad = []
    for leaves in _tied_jets(rng):
        # R² equal to pair distances of the first leaves: beam distances tie with pair distances
        pairs = [_delta_r2(leaves[0], leaves[k]) for k in range(1, min(6, leaves.shape[0]))]
        closest = min(_delta_r2(leaves[i], leaves[j]) for i in range(leaves.shape[0])
                      for j in range(i))
        for power in POWERS:
            for r2 in (*R2S, 1e10, closest, *pairs):
                if r2 > 0.0:
                    bad += _mismatches(leaves, power, r2)
    assert not bad, bad[:10]


def test_nearest_neighbours_identical_to_full_scan_on_large_jets():
    bad = []
    for n, seed in ((300, 11), (700, 12)):
        leaves = _concatenated_leaves(n, seed)
        for power in POWERS:
            for r2 in (1e6, 0.16):
                bad += _mismatches(leaves, power, r2)
    half = _concatenated_leaves(200, 13)
    doubled = np.concatenate([half, half, half * np.array([1.0, 1.0, 1.0, -1.0])])
    for power in POWERS:
        bad += _mismatches(doubled, power, 1e6)
    assert not bad, bad


def test_nearest_neighbours_count_fewer_distances():
    """Work counter: every pair at every step below NN_MIN_LEAVES, O(n²) above."""
    assert 10 < NN_MIN_LEAVES < 400
    leaves = _concatenated_leaves(400, 14)
    for power in POWERS:
        _, _, evals = kt_history(leaves, np.int64(power), 1e6)
        assert 400**2 / 2 < evals < 20 * 400**2
        _, _, small = kt_history(leaves[:10], np.int64(power), 1e6)
        assert small == (10**3 - 10) // 6
