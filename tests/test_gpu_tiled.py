"""The tiled GPU trellis (jetastar.clustering.gpu.solve_on_gpu_tiled) against the CPU trellis.

Without a GPU the kernels run in numba's CUDA simulator (tests/conftest.py switches it on). Tiles of
2-5 low bits on jets of 4-10 leaves exercise every branch: jets that fit one tile (``n <= l``), one
high bit (``n = l + 1``), several high bits, a tile's high pairs dealt to several blocks, several
clusters per thread. The traffic counter is checked against the analytic count of the plan.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers.gpu import NEEDS_GPU_OR_SIMULATOR, ginkgo_jet

from jetastar.clustering import Trellis
from jetastar.clustering import gpu as gpu_mod
from jetastar.clustering._subsets import n_splits_total

pytestmark = NEEDS_GPU_OR_SIMULATOR

#: deal a tile's high pairs to several blocks (one pair each), so the partials' merge runs
CHUNKED = {"target_blocks": 64, "min_pairs": 1}


def _same_table(sol, tr, b=0, exact=True):
    """Tiled tables equal to the CPU trellis's: t, MAP, log Z (1e-9 relative), ``-inf`` patterns,
    the arg-max where the MAP is finite, and the counts (exact, or float64 above the exact limit)."""
    node, cpu = sol.node[b], tr._node
    for col in (0, 1, 2):
        a, c = node[1:, col], cpu[1:, col]
        assert np.array_equal(np.isneginf(a), np.isneginf(c)), col
        fin = np.isfinite(c)
        assert np.array_equal(np.isfinite(a), fin), col
        np.testing.assert_allclose(a[fin], c[fin], rtol=1e-9, atol=1e-9)
    finite = np.isfinite(cpu[:, 1])
    assert finite.sum() > node.shape[0] // 4  # a jet with something to compare
    assert np.array_equal(sol.best[b][finite], tr._best[finite])
    counts = tr._node_i[1:, 3]
    assert counts.max() > 1
    if exact:
        assert sol.exact_count
        assert np.array_equal(node.view(np.int64)[1:, 3], counts)
    else:
        assert not sol.exact_count
        np.testing.assert_allclose(node[1:, 3], counts.astype(np.float64), rtol=1e-12)


def _solve(jets, likelihood, **kw):
    consts = np.stack([j.likelihood_constants(likelihood) for j in jets])
    return gpu_mod.solve_on_gpu_tiled([j.leaves for j in jets], consts, count_traffic=True, **kw)


def _check_traffic(sol, n, low_bits, n_jets=1, log_z=True, **kw):
    """The counted bytes are the analytic count of the same plan, and the per-split figure its."""
    total, per_split = gpu_mod.tiled_bytes_per_split(n, low_bits, n_jets=n_jets, log_z=log_z, **kw)
    assert sol.stats["global_bytes"] == total > 0
    assert sol.stats["bytes_per_split"] == pytest.approx(per_split, rel=1e-12)
    assert sol.stats["splits_evaluated"] == n_splits_total(n)


@pytest.mark.parametrize("likelihood", ["symmetric", "legacy"])
@pytest.mark.parametrize(("n", "low_bits", "kind", "chunked"), [
    (4, 5, "qcd", False),  # n < l: one tile
    (5, 5, "w", False),  # n = l
    (4, 3, "w", False),  # n = l + 1: one high bit, two clusters per thread
    (7, 2, "qcd", True),  # five high bits, pairs dealt to several blocks
    (8, 3, "w", True),
])
def test_tables_equal_the_cpu_trellis(likelihood, n, low_bits, kind, chunked):
    jet = ginkgo_jet(n, kind)
    tr = Trellis(jet, likelihood, device="cpu")
    kw = CHUNKED if chunked else {}
    sol = _solve([jet], likelihood, low_bits=low_bits, **kw)
    assert sol.finished and sol.stats["engine"] == "tiled"
    _same_table(sol, tr)
    _check_traffic(sol, n, low_bits, **kw)


def test_ten_leaves():
    jet = ginkgo_jet(10, "qcd", seed=3)
    tr = Trellis(jet, "symmetric", device="cpu")
    sol = _solve([jet], "symmetric", low_bits=3, **CHUNKED)
    _same_table(sol, tr)
    _check_traffic(sol, 10, 3, **CHUNKED)
    assert sol.stats["bytes_per_split"] < 64


def test_unpruned_and_map_only():
    jet = ginkgo_jet(6, "w", seed=5)
    tr = Trellis(jet, "symmetric", device="cpu")
    unpruned = _solve([jet], "symmetric", low_bits=2, prune=False, **CHUNKED)
    _same_table(unpruned, tr)
    _check_traffic(unpruned, 6, 2, **CHUNKED)
    only = _solve([jet], "symmetric", low_bits=2, log_z=False, **CHUNKED)
    assert not only.exact_count
    cpu = tr._node
    for col in (0, 1):
        a, c = only.node[0, 1:, col], cpu[1:, col]
        assert np.array_equal(np.isneginf(a), np.isneginf(c))
        fin = np.isfinite(c)
        np.testing.assert_allclose(a[fin], c[fin], rtol=1e-9, atol=1e-9)
    finite = np.isfinite(cpu[:, 1])
    assert np.array_equal(only.best[0][finite], tr._best[finite])
    _check_traffic(only, 6, 2, log_z=False, **CHUNKED)
    # MAP only moves half the bytes of the records
    assert only.stats["global_bytes"] < unpruned.stats["global_bytes"]


def test_a_batch_of_jets():
    jets = [ginkgo_jet(6, "qcd", seed=1), ginkgo_jet(6, "w", seed=2), ginkgo_jet(6, "qcd", seed=3)]
    sol = _solve(jets, "legacy", low_bits=2, **CHUNKED)
    for b, jet in enumerate(jets):
        _same_table(sol, Trellis(jet, "legacy", device="cpu"), b)
    _check_traffic(sol, 6, 2, n_jets=3, **CHUNKED)


def test_float_counts_above_the_exact_limit(monkeypatch):
    """Above 18 leaves counts are float64; the same path on a small jet with the limit lowered."""
    monkeypatch.setattr(gpu_mod, "_MAX_EXACT_COUNT_LEAVES", 4)
    jet = ginkgo_jet(6, "qcd", seed=7)
    sol = _solve([jet], "symmetric", low_bits=2, **CHUNKED)
    _same_table(sol, Trellis(jet, "symmetric", device="cpu"), exact=False)
    _check_traffic(sol, 6, 2, **CHUNKED)


def test_max_time_stops_between_launches():
    jet = ginkgo_jet(6, "qcd")
    sol = _solve([jet], "symmetric", low_bits=2, max_time=1e-12)
    assert not sol.finished  # (the first launch always runs, as in solve_on_gpu)
    assert sol.stats["launches"] == 1
    assert 0 < sol.stats["splits_evaluated"] < sol.stats["splits_total"]


def test_plan_covers_every_split_once():
    """The tiles' split counts add up to the DP's, every chunk has pairs, every level is planned."""
    for n in range(2, 31):
        for low_bits in (2, 3, 9, 10):
            nl = min(n, low_bits)
            plan = gpu_mod._tile_plan(n, low_bits, 1)
            assert sum(c * gpu_mod._tile_splits(p, nl) for p, _i0, c, _g in plan) == n_splits_total(n)
            for p in range(n - nl + 1):
                assert sum(c for q, _i0, c, _g in plan if q == p) == math.comb(n - nl, p)
            for p, _i0, _c, g in plan:
                pairs = (1 << (p - 1)) - 1 if p >= 2 else 0
                assert (g == 0) == (pairs == 0) and g <= pairs


def test_bytes_per_split_at_production_size():
    """The issue's goal: at most 8 bytes of global memory per split from 24 leaves (today: 64)."""
    for n in (24, 26, 28, 30):
        _total, per_split = gpu_mod.tiled_bytes_per_split(n)
        assert per_split < 2.0
        assert gpu_mod.tiled_bytes_per_split(n, log_z=False)[1] < per_split / 1.9
    # a tile of 2 low bits reuses each record for few splits: far above
    assert gpu_mod.tiled_bytes_per_split(12, 2)[1] > 20


@pytest.mark.parametrize("likelihood", ["symmetric", "legacy"])
def test_ties_go_to_the_cpu_trellis_split(likelihood):
    """Repeated leaves make equal split scores (swapping two equal leaves changes no ``t``): the
    tiled kernels keep the CPU trellis's split of every tie, whichever block or item saw it."""
    jet = ginkgo_jet(7, "qcd", seed=4)
    leaves = np.array(jet.leaves, copy=True)
    leaves[4] = leaves[1]
    leaves[6] = leaves[2]
    consts = jet.likelihood_constants(likelihood)
    tr = Trellis.from_arrays(leaves, consts, likelihood)
    sol = gpu_mod.solve_on_gpu_tiled([leaves], consts[None], low_bits=2, **CHUNKED)
    _same_table(sol, tr)


def test_low_bits_are_checked():
    jet = ginkgo_jet(4, "qcd")
    with pytest.raises(ValueError, match="low_bits must be 1"):
        _solve([jet], "symmetric", low_bits=0)


def test_kernels_compile_for_a_gpu(sm90_shared_bytes):
    """The simulator runs the kernels as Python, so what only the CUDA target rejects (types that
    do not unify, unsupported calls) would first show on a GPU: compile the production kernels to
    PTX without one, and check their static shared memory fits the 48 KiB limit."""
    shared = sm90_shared_bytes("""
        from jetastar.clustering.exact import _gpu_tiled

        cross, same, _ = _gpu_tiled.kernels(gpu._TILE_LOW_BITS, gpu._TILE_THREAD_BITS,
                                            gpu._TILE_PART_BITS)
        parts = (a(t.float64, 1), a(t.int32, 1), a(t.float64, 1), a(t.float64, 1),
                 a(t.float64, 1), a(i8, 1), b1, a(i8, 1))
        tables = (a(i8, 2), a(t.float64, 3), a(i8, 2))
        sigs = {cross: (i8,) * 7 + tables + (a(t.float64, 3), b1, b1, b1) + parts,
                same: (i8,) * 6 + tables + (a(t.int32, 2), a(t.float64, 3), b1, b1, b1) + parts}
    """)
    assert len(shared) == 2 and 40 * 1024 <= min(shared) and max(shared) <= 48 * 1024, shared
