"""What the exact engines share: budget checks, memory refusals, the tree read from arg-max splits."""

from __future__ import annotations

import math

import numpy as np
import pytest

from jetastar import TooLargeError, Tree
from jetastar.clustering import astar, exact_map, exact_trellis, window_search
from jetastar.clustering._engine import (
    check_budget,
    check_memory,
    check_size,
    format_bytes,
    search_progress,
    tree_from_best,
    valid_likelihood,
)
from jetastar.clustering._subsets import mask_of
from jetastar.ginkgo import ShowerParams, generate


@pytest.mark.parametrize(
    ("value", "integer", "match"),
    [
        (True, False, "positive number"),
        ("3", False, "positive number"),
        (2.5, True, "positive integer"),
        (0, False, "> 0"),
        (-1.0, False, "> 0"),
        (math.inf, False, "> 0"),
        (math.nan, False, "> 0"),
    ],
)
def test_bad_budgets_are_refused_by_every_engine(value, integer, match):
    with pytest.raises(ValueError, match=match):
        check_budget(value, "max_x", integer=integer)
    if not integer:
        jet = generate(1, ShowerParams.qcd(), seed=1, min_leaves=5, max_leaves=5)[0]
        for engine in (exact_map, astar, window_search):
            with pytest.raises(ValueError, match=f"max_time .*{match}"):
                engine(jet, max_time=value)


def test_budgets_are_converted():
    assert check_budget(None, "x") is None
    assert check_budget(np.int64(3), "x", integer=True) == 3
    assert isinstance(check_budget(2, "x"), float)
    assert valid_likelihood(None) == "symmetric" and valid_likelihood("legacy") == "legacy"
    with pytest.raises(ValueError, match="'symmetric', 'legacy'"):
        valid_likelihood("exact")


def test_memory_and_size_refusals_read_the_same_everywhere():
    with pytest.raises(TooLargeError) as err:
        check_memory(2**40, 2**20, "jet 4", "the exact trellis of 30 leaves", "use astar")
    assert str(err.value) == ("jet 4: the exact trellis of 30 leaves needs about 1.0 TiB, above the "
                              "memory limit of 1.0 MiB (max_memory=1048576); use astar")
    with pytest.raises(TooLargeError, match=r"of 1\.0 MiB; use a smaller"):
        check_memory(2**40, 2**20, "jet 4", "a beam", "use a smaller beam_size", option=None)
    assert check_memory(10, 2**20, "jet 4", "x", "y") == 10
    with pytest.raises(TooLargeError, match=r"jet 4: 40 leaves is above the trellis limit of 30 "
                                            r"leaves \(big\); use astar"):
        check_size(40, 30, "jet 4", "leaves", "trellis", "big", "use astar")
    jet = generate(1, ShowerParams.qcd(), seed=2, min_leaves=10, max_leaves=10)[0]
    for engine in (exact_map, exact_trellis):
        with pytest.raises(TooLargeError, match=r"needs about .* above the memory limit of .*"
                                                r"\(max_memory=1000\)"):
            engine(jet, max_memory=1000)


def test_format_bytes():
    assert format_bytes(512) == "512 B"
    assert format_bytes(41 * 2**20) == "41.0 MiB"
    assert len(format_bytes(3**700)) < 20


def test_tree_from_best_relabels_a_sub_cluster():
    # cluster {1, 3, 4}: best part of {1, 3, 4} is {1}, of {3, 4} is {3}
    best = np.zeros(1 << 5, dtype=np.int32)
    best[mask_of([1, 3, 4])] = mask_of([1])
    best[mask_of([3, 4])] = mask_of([3])
    tree = tree_from_best(best, mask_of([1, 3, 4]), label=9)
    assert tree == Tree.from_nested((0, (1, 2)))


def test_search_progress_off():
    assert search_progress(False, "x", "it") is None
