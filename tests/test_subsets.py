"""Tests of the bitmask helpers in jetastar.clustering._subsets."""

from __future__ import annotations

import itertools

import numba as nb
import numpy as np
import pytest

from jetastar.clustering._subsets import (
    bit_index,
    enumerate_splits,
    fill_subset_t_parallel,
    full_mask,
    leaves_of,
    lowest_bit,
    mask_of,
    masks_by_size,
    n_splits,
    n_splits_total,
    popcount,
    subset_sizes,
    subset_sums,
    subset_sums_many,
    subset_t,
)
from jetastar.ginkgo import ShowerParams, generate, likelihood_constants
from jetastar.ginkgo.kernels import t_of


def test_scalar_helpers():
    for x in (0, 1, 2, 3, 0b1011, (1 << 40) | 5, (1 << 62) - 1):
        assert popcount(x) == bin(x).count("1")
        assert lowest_bit(x) == (x & -x)
    for i in range(62):
        assert bit_index(1 << i) == i
    assert full_mask(5) == 31
    assert mask_of([0, 2, 3]) == 13
    assert leaves_of(13) == (0, 2, 3)
    assert leaves_of(mask_of([7, 1, 30])) == (1, 7, 30)


@nb.njit(cache=True)
def _popcount_at_least_5(masks):  # pragma: no cover - numba
    out = np.empty(masks.shape[0], dtype=np.bool_)
    for j in range(masks.shape[0]):
        out[j] = popcount(masks[j]) >= 5  # a literal: LLVM folds the comparison
    return out


def test_popcount_inlined_into_a_comparison():
    # popcount once multiplied by 0x0101010101010101 (int64 overflow): inlined into a kernel,
    # LLVM folded `popcount(s) >= 5` to True for s = 258
    masks = np.array([258, 0b11111, 0b1111, (1 << 62) | 0b1111, (1 << 40) | 0b111], dtype=np.int64)
    assert _popcount_at_least_5(masks).tolist() == [False, True, False, True, False]


@pytest.mark.parametrize("mask", [0b1, 0b11, 0b1011, 0b110110, 0b1111111])
def test_enumerate_splits_is_every_unordered_partition_once(mask):
    parts = [int(a) for a in enumerate_splits(mask)]
    assert len(parts) == n_splits(popcount(mask))
    low = mask & -mask
    seen = set()
    for a in parts:
        b = mask ^ a
        assert a & low and a != mask and b and (a | b) == mask and not (a & b)
        seen.add(frozenset((a, b)))
    assert len(seen) == len(parts)
    # every unordered 2-partition appears
    members = leaves_of(mask)
    expected = set()
    for r in range(1, len(members)):
        for combo in itertools.combinations(members, r):
            a = mask_of(combo)
            expected.add(frozenset((a, mask ^ a)))
    assert seen == expected


def test_split_counts():
    for n in range(1, 10):
        total = sum(n_splits(popcount(s)) for s in range(1, 1 << n))
        assert n_splits_total(n) == total


def test_subset_sums_and_sizes():
    rng = np.random.default_rng(0)
    values = rng.normal(size=(7, 3))
    sums = subset_sums(values)
    sizes = subset_sizes(7)
    for s in range(1 << 7):
        idx = list(leaves_of(s))
        assert np.allclose(sums[s], values[idx].sum(axis=0), rtol=0, atol=1e-12)
        assert sizes[s] == len(idx)


def test_subset_sums_of_many_jets_are_each_jets_bit_for_bit():
    values = np.random.default_rng(3).normal(size=(5, 9, 4))
    for lo, hi in ((0, 4), (4, 9), (0, 9), (3, 3)):
        many = subset_sums_many(values, lo, hi)
        assert many.shape == (5, 1 << (hi - lo), 4)
        for b in range(5):
            one = subset_sums(np.ascontiguousarray(values[b, lo:hi]))
            assert np.array_equal(many[b], one)


def test_masks_by_size():
    n = 9
    order, offsets = masks_by_size(n)
    assert sorted(order.tolist()) == list(range(1, 1 << n))
    for k in range(1, n + 1):
        block = order[offsets[k]:offsets[k + 1]].tolist()
        assert block == sorted(block)
        assert all(bin(s).count("1") == k for s in block)


@pytest.mark.parametrize("form", ["symmetric", "legacy"])
def test_subset_t_matches_summed_momenta(form):
    jet = generate(1, ShowerParams.qcd(), seed=11, min_leaves=9, max_leaves=9)[0]
    c = likelihood_constants(16.0, 1.5, likelihood=form)[0]
    t = subset_t(jet.leaves, c)
    for s in range(1, 1 << jet.n_leaves):
        idx = list(leaves_of(s))
        p = jet.leaves[idx].sum(axis=0)
        expected = 0.0 if (form == "legacy" and len(idx) == 1) else t_of(*p)
        assert t[s] == pytest.approx(expected, rel=1e-12, abs=1e-9)


@pytest.mark.parametrize("form", ["symmetric", "legacy", "density"])
def test_parallel_subset_t_is_the_serial_bit_for_bit(form):
    """The GPU backend makes ``t`` on the host on numba's threads: the same bits as the CPU
    trellis's serial fill, in every form (the density form's single leaves above t_cut: inf)."""
    jets = generate(3, ShowerParams.w(), seed=12, min_leaves=11, max_leaves=13)
    for jet in jets:
        c = likelihood_constants(jet.params.t_cut, jet.params.lam, likelihood=form)[0]
        serial = subset_t(jet.leaves, c)
        parallel = np.full_like(serial, np.nan)
        fill_subset_t_parallel(jet.leaves, c, parallel)
        assert np.array_equal(serial.view(np.int64), parallel.view(np.int64))
