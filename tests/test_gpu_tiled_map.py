"""The tiled bound-pruned exact MAP on the GPU (jetastar.clustering.gpu.solve_map_on_gpu_tiled)
against the CPU engine (jetastar.clustering.exact_map).

Without a GPU the kernels run in numba's CUDA simulator (tests/conftest.py switches it on). Tiles of
2-5 low bits on jets of 4-10 leaves exercise every branch: jets that fit one tile (``n <= l``),
one high bit, several high bits, a tile's high pairs dealt to several blocks, clusters cut into
several work items. The plan-determined traffic counter is checked against the analytic count.
"""

from __future__ import annotations

import importlib
import math

import numpy as np
import pytest
from helpers.gpu import NEEDS_GPU_OR_SIMULATOR, ginkgo_jet

from jetastar.clustering import exact_map
from jetastar.clustering import gpu as gpu_mod
from jetastar.clustering._subsets import n_splits_total
from jetastar.clustering.exact.exact_map import _MapSolver, root_slack

em_mod = importlib.import_module("jetastar.clustering.exact.exact_map")

pytestmark = NEEDS_GPU_OR_SIMULATOR

#: deal a tile's high pairs to several blocks (one pair each), so the partials' merge runs
CHUNKED = {"target_blocks": 64, "min_pairs": 1}


def _cpu(leaves, consts, prune=True, floor=-math.inf):
    solver = _MapSolver(leaves, consts, None)
    assert solver.solve(prune, floor, False, None, None, "jet")
    return solver


def _tiled(leaves, consts, prune=True, floor=-math.inf, **kw):
    solver = _MapSolver(leaves, consts, None)
    finished, stats = gpu_mod.solve_map_on_gpu_tiled(
        solver.rec, solver.wq, solver.best, solver.consts, solver.scale, floor=floor,
        root_slack=root_slack(solver.consts), prune=prune, count_traffic=True, **kw)
    return solver, finished, stats


def _same_tables(cpu, gpu):
    """The CPU engine's tables bit for bit: ``V`` and its ``-inf`` pattern, ``W`` everywhere, the
    arg-max part where ``V`` is finite."""
    ok = np.isfinite(cpu.rec[:, 1])
    assert ok.sum() > cpu.rec.shape[0] // 4  # a jet with something to compare
    assert np.array_equal(ok, np.isfinite(gpu.rec[:, 1]))
    assert np.array_equal(cpu.rec[ok], gpu.rec[ok])
    assert np.array_equal(cpu.best[ok], gpu.best[ok])
    assert np.array_equal(cpu.wq, gpu.wq)


def _check_traffic(stats, n, low_bits, **kw):
    total, per_split = gpu_mod.tiled_map_bytes_per_split(n, low_bits, **kw)
    assert stats["global_bytes"] == total > 0
    assert stats["bytes_per_split"] == pytest.approx(per_split, rel=1e-12)
    assert stats["splits_done"] == n_splits_total(n)
    assert 0 < stats["splits_evaluated"] <= stats["splits_bound_passed"]


@pytest.mark.parametrize("likelihood", ["symmetric", "legacy"])
@pytest.mark.parametrize(("n", "low_bits", "kind", "chunked"), [
    (4, 5, "qcd", False),  # n < l: the whole jet in the ∅ tile (the CPU's solve_cluster)
    (5, 5, "w", False),  # n = l
    (5, 3, "qcd", True),  # two high bits: one cross pair per top tile
    (7, 2, "w", True),  # five high bits, pairs dealt to several blocks
    (8, 3, "qcd", True),
])
def test_tables_equal_the_cpu_engine(likelihood, n, low_bits, kind, chunked):
    jet = ginkgo_jet(n, kind)
    consts = jet.likelihood_constants(likelihood)
    kw = CHUNKED if chunked else {}
    for prune in (True, False):
        cpu = _cpu(jet.leaves, consts, prune)
        gpu, finished, stats = _tiled(jet.leaves, consts, prune, low_bits=low_bits, **kw)
        assert finished and stats["engine"] == "bound-pruned tiled"
        _same_tables(cpu, gpu)
        _check_traffic(stats, n, low_bits, **kw)
        if n > low_bits + 1:
            assert stats["launches"] > n - low_bits
        if not prune:  # every split with possible parts is scored: more than with the bounds
            assert stats["splits_evaluated"] == stats["splits_bound_passed"]


def test_ten_leaves_with_the_default_plan():
    """Several blocks per tile from the default plan, clusters cut into work items; the work
    items' starts (the warm start's final candidates) keep the ψ evaluated near the CPU engine's
    count (without them: 2.5 times it on this jet)."""
    jet = ginkgo_jet(10, "w", seed=3)
    consts = jet.likelihood_constants("symmetric")
    gpu, finished, stats = _tiled(jet.leaves, consts, low_bits=3)
    assert finished
    cpu = _cpu(jet.leaves, consts)
    _same_tables(cpu, gpu)
    _check_traffic(stats, 10, 3)
    assert stats["data_bytes"] > 0
    assert stats["splits_evaluated"] < 1.5 * cpu.stats["splits_evaluated"]


@pytest.mark.parametrize("likelihood", ["symmetric", "legacy"])
def test_exact_map_value_and_tree(monkeypatch, likelihood):
    """exact_map(device='gpu') routed to the tiled pass: the CPU engine's value and tree, also with
    an incumbent (the floor at the root)."""
    calls = []

    def tiled(*args, **kw):
        calls.append(kw)
        return gpu_mod.solve_map_on_gpu_tiled(*args, low_bits=2, **CHUNKED, **kw)

    monkeypatch.setattr(em_mod, "solve_map_on_gpu", tiled)
    # (one jet per form, a QCD jet in one, a W jet in the other: ~10 s each in the simulator)
    for kind, seed in [(("qcd", 5), ("w", 6))[likelihood == "legacy"]]:
        jet = ginkgo_jet(7, kind, seed)
        cpu = exact_map(jet, likelihood, device="cpu")
        gpu = exact_map(jet, likelihood, device="gpu")
        assert gpu.stats["engine"] == "bound-pruned tiled"
        assert gpu.log_likelihood == cpu.log_likelihood and gpu.tree == cpu.tree
        inc = exact_map(jet, likelihood, device="gpu", incumbent=cpu.tree)
        assert inc.log_likelihood == cpu.log_likelihood and inc.tree == cpu.tree
    assert len(calls) == 2 and any(kw["floor"] > -math.inf for kw in calls)


def test_an_incumbent_floor_at_the_root():
    """A floor below the MAP keeps the root (and nothing else changes); one above it leaves the
    root ``-inf``, as on the CPU."""
    jet = ginkgo_jet(7, "qcd", seed=8)
    consts = jet.likelihood_constants("symmetric")
    full = (1 << 7) - 1
    value = _cpu(jet.leaves, consts).rec[full, 1]
    for floor in (value - 1.0, value - 1e-6, value + 1e-6):
        cpu = _cpu(jet.leaves, consts, floor=floor)
        gpu, finished, _stats = _tiled(jet.leaves, consts, floor=floor, low_bits=2, **CHUNKED)
        assert finished
        assert np.array_equal(cpu.rec[:, 1], gpu.rec[:, 1])  # also the root's -inf
        ok = np.isfinite(cpu.rec[:, 1])
        assert np.array_equal(cpu.best[ok], gpu.best[ok]) and np.array_equal(cpu.wq, gpu.wq)
        assert np.isfinite(gpu.rec[full, 1]) == (floor < value)


@pytest.mark.parametrize(("low_bits", "copies", "seed"), [
    (2, ((4, 1), (6, 2)), 4),  # a low and a high leaf: tied splits in different blocks
    (3, ((2, 1), (4, 3), (6, 5)), 5),  # two low leaves: in different work items of one block
])
def test_ties_go_to_the_cpu_engines_split(low_bits, copies, seed):
    """Repeated leaves make equal split values: the tiled pass keeps the CPU engine's split of
    every tie, whichever block or work item saw it."""
    jet = ginkgo_jet(7, "qcd", seed=seed)
    leaves = np.array(jet.leaves, copy=True)
    for i, j in copies:
        leaves[i] = leaves[j]
    consts = jet.likelihood_constants("legacy")
    gpu, finished, _stats = _tiled(leaves, consts, low_bits=low_bits, **CHUNKED)
    assert finished
    _same_tables(_cpu(leaves, consts), gpu)


def test_max_time_stops_after_the_first_launch():
    jet = ginkgo_jet(6, "qcd")
    _gpu, finished, stats = _tiled(jet.leaves, jet.likelihood_constants("symmetric"), low_bits=2,
                                   max_time=1e-12)
    assert not finished and stats["launches"] == 1
    assert 0 < stats["splits_done"] < stats["splits_total"]


def test_low_bits_are_checked():
    jet = ginkgo_jet(4, "qcd")
    with pytest.raises(ValueError, match="low_bits must be 1"):
        _tiled(jet.leaves, jet.likelihood_constants("symmetric"), low_bits=0)


def test_bytes_per_split_at_production_size():
    """Below one byte of global memory per split from 24 leaves with tiles of 9 low bits (today's
    untiled pass reads 4 bytes of W per split, plus the records of the splits that pass)."""
    for n in (24, 26, 28, 30):
        _total, per_split = gpu_mod.tiled_map_bytes_per_split(n)
        assert 0.9 < per_split < 1.0
    # the plan's bytes are the tiles' (18 bytes a record, two tiles a pair, 3**l splits a pair)
    assert gpu_mod.tiled_map_bytes_per_split(28)[1] == pytest.approx(36 * 2**9 / 3**9, rel=0.02)
    # small tiles reuse each record for few splits
    assert gpu_mod.tiled_map_bytes_per_split(12, 2)[1] > 8


def test_kernels_compile_for_a_gpu(sm90_shared_bytes):
    """Compile the production kernels to PTX for an H100 without a GPU (what only the CUDA target
    rejects would first show on one), and check the cross kernel's static shared memory: two
    tiles of 512 (wq, t, V) records and the merge's int32 parts, 22 KiB."""
    shared = sm90_shared_bytes("""
        from jetastar.clustering.exact import _gpu_tiled_map, _map_kernels

        _map_kernels.max = physics.max  # the CPU engine's bars use max on floats (see conftest)

        cross, same, _ = _gpu_tiled_map.kernels(gpu._TILE_LOW_BITS, gpu._TILE_THREAD_BITS,
                                                gpu._TILE_PART_BITS)
        f8 = t.float64
        tables = (a(i8, 2), a(f8, 2), a(t.int16, 1))
        scalars = (a(f8, 2), f8, f8, b1, f8, a(f8, 1), a(t.int32, 1), b1, a(i8, 1))
        best = (a(t.int32, 1),)
        sigs = {cross: (i8,) * 7 + tables + best + scalars,
                same: (i8,) * 6 + tables + best + scalars}
    """)
    assert shared == [2 * 512 * (2 + 8 + 8 + 4), 0], shared
