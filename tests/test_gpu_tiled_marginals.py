"""The tiled GPU marginals (jetastar.clustering.gpu.gpu_marginals_tiled) against the CPU trellis.

Without a GPU the kernels run in numba's CUDA simulator (tests/conftest.py switches it on). Tiles of
2-5 low bits on jets of 4-9 leaves exercise every branch: jets smaller than a tile (``n < l``), equal
to one (``n = l``), one high bit (``n = l + 1``), several high bits, a tile's sibling high parts
dealt to several blocks, several clusters per thread, a batch. The walked pairs are checked against
a count made from the table, the traffic counter against the analytic count of the plan.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers.gpu import NEEDS_GPU_OR_SIMULATOR, ginkgo_jet

from jetastar.clustering import Trellis
from jetastar.clustering import gpu as gpu_mod

pytestmark = NEEDS_GPU_OR_SIMULATOR

#: deal a tile's sibling high parts to several blocks (one each), so the partials' merge runs
CHUNKED = {"target_blocks": 64, "min_pairs": 1}


def _walked(node):
    """(cluster, parent) pairs of the clusters with a finite log Z, counted from the table:
    ``2**(n - |c|) - 1`` per cluster ``c`` other than ``∅`` and the whole jet."""
    m = node.shape[0]
    n = m.bit_length() - 1
    masks = np.arange(1, m - 1)
    sizes = np.array([bin(int(s)).count("1") for s in masks])
    finite = np.isfinite(node[1:m - 1, 2])
    return int(((1 << (n - sizes[finite])) - 1).sum())


def _run(jets, likelihood, low_bits, **kw):
    """Tiled marginals of ``jets``, checked against the CPU trellis, the walked count and the
    analytic traffic; returns the stats."""
    trellises = [Trellis(j, likelihood, device="cpu") for j in jets]
    node = np.stack([tr._node for tr in trellises])
    consts = np.stack([j.likelihood_constants(likelihood) for j in jets])
    marg, stats = gpu_mod.gpu_marginals_tiled(node, consts, low_bits=low_bits, count_traffic=True,
                                              **kw)
    n = node.shape[1].bit_length() - 1
    assert marg.shape == node.shape[:2]
    for b, tr in enumerate(trellises):
        ref = tr.marginals_array()
        assert ref[1:].max() > 0 and (ref[1:-1] > 0).sum() > n  # something to compare
        np.testing.assert_allclose(marg[b], ref, rtol=1e-9, atol=1e-12)
    assert stats["walked"] == sum(_walked(tr._node) for tr in trellises)
    total, per_pair = gpu_mod.tiled_marginal_bytes_per_split(n, low_bits, n_jets=len(jets), **kw)
    assert stats["global_bytes"] == total > 0
    assert stats["bytes_per_pair"] == pytest.approx(per_pair, rel=1e-12)
    return stats


@pytest.mark.parametrize(("n", "low_bits", "kind", "likelihood", "chunked"), [
    (4, 5, "qcd", "symmetric", False),  # n < l: one tile, smaller than it
    (5, 5, "w", "legacy", False),  # n = l: one tile
    (4, 3, "w", "symmetric", False),  # n = l + 1: one high bit, two clusters per thread
    (7, 2, "qcd", "legacy", True),  # five high bits, sibling parts dealt to several blocks
    (8, 3, "w", "symmetric", True),
    (6, 2, "w", "legacy", False),  # several high bits, one block per tile
])
def test_marginals_equal_the_cpu_trellis(n, low_bits, kind, likelihood, chunked):
    _run([ginkgo_jet(n, kind)], likelihood, low_bits, **(CHUNKED if chunked else {}))


def test_nine_leaves():
    stats = _run([ginkgo_jet(9, "w", seed=3)], "symmetric", 3)
    assert stats["bytes_per_pair"] < 56  # today's pull kernel


def test_a_batch_of_jets():
    jets = [ginkgo_jet(6, "qcd", seed=1), ginkgo_jet(6, "w", seed=2), ginkgo_jet(6, "qcd", seed=3)]
    _run(jets, "legacy", 2, **CHUNKED)


def test_impossible_clusters():
    """A jet where some clusters have ``log Z = -inf`` (no possible tree below them): they get
    marginal 0, and their pairs are not walked."""
    jet = ginkgo_jet(7, "qcd", seed=8)
    tr = Trellis(jet, "symmetric", device="cpu")
    impossible = np.isneginf(tr._node[:, 2])
    impossible[0] = False
    assert impossible.sum() >= 7
    assert np.all(tr.marginals_array()[impossible] == 0)
    stats = _run([jet], "symmetric", 2, **CHUNKED)
    assert 0 < stats["walked"] < stats["pairs_total"]


def test_whole_jet_impossible_is_refused():
    """No posterior tree: the contract (as gpu_marginals's) is a finite whole-jet log Z; and
    the other arguments are checked."""
    jet = ginkgo_jet(4, "qcd")
    tr = Trellis(jet, "symmetric", device="cpu")
    node = np.stack([tr._node, tr._node])
    node[1, -1, 2] = -np.inf
    consts = np.stack([jet.likelihood_constants("symmetric")] * 2)
    with pytest.raises(ValueError, match=r"log Z is not finite \(jets \[1\]\)"):
        gpu_mod.gpu_marginals_tiled(node, consts, low_bits=2)
    with pytest.raises(ValueError, match="low_bits must be 1"):
        gpu_mod.gpu_marginals_tiled(node[:1], consts[:1], low_bits=0)
    with pytest.raises(ValueError, match="node must be"):
        gpu_mod.gpu_marginals_tiled(node[:1, :15], consts[:1], low_bits=2)


def test_plan_covers_every_pair_once():
    """The tiles' pairs add up to ``3**n − 2**(n+1) + 1`` plus the skipped pairs of ``∅`` and the
    whole jet, levels run from the top, every chunk has sibling parts."""
    for n in range(2, 31):
        for low_bits in (2, 3, 9):
            nl = min(n, low_bits)
            hb = n - nl
            plan = gpu_mod._marg_plan(n, low_bits, 1)
            levels = [p for p, _i0, _c, _g in plan]
            assert levels == sorted(levels, reverse=True)
            # every (c, d) with c ∩ d = ∅ and d ≠ ∅: 3**n − 2**n; less ∅'s 2**n − 1 siblings
            pairs = sum(c * (((1 << (hb - p)) - 1) * 3**nl + 3**nl - (1 << nl))
                        for p, _i0, c, _g in plan)
            assert pairs - ((1 << n) - 1) == gpu_mod._n_marginal_pairs(n)
            for p, _i0, _c, g in plan:
                sib = (1 << (hb - p)) - 1
                assert (g == 0) == (sib == 0) and g <= sib


def test_bytes_per_pair_at_production_size():
    """About 1 byte of global memory per (cluster, parent) pair from 20 leaves (today: 56)."""
    for n in (20, 22, 24, 26):
        _total, per_pair = gpu_mod.tiled_marginal_bytes_per_split(n)
        print(f"{n} leaves: {per_pair:.3f} B/pair (tiles of 9 low bits; today's pull kernel 56)")
        assert per_pair < 1.1


def test_kernels_compile_for_a_gpu(sm90_shared_bytes):
    """The simulator runs the kernels as Python: compile the production kernels to PTX without a
    GPU (types that do not unify, unsupported calls), and check their static shared memory (8
    arrays of 512 float64: 32 KiB) fits the 48 KiB limit."""
    shared = sm90_shared_bytes("""
        from jetastar.clustering.exact import _gpu_tiled_marginals

        cross, same, _ = _gpu_tiled_marginals.kernels(gpu._TILE_LOW_BITS, gpu._TILE_THREAD_BITS,
                                                      gpu._TILE_PART_BITS)
        rest = (a(i8, 2), a(t.float64, 3), a(t.float64, 2), a(t.float64, 3), a(t.float64, 1), b1,
                a(i8, 1), a(i8, 1))
        sigs = {cross: (i8,) * 7 + rest, same: (i8,) * 6 + rest}
    """)
    assert shared == [32 * 1024, 32 * 1024], shared
