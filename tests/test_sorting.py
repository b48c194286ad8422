from __future__ import annotations

import numpy as np
import pytest

from jetastar._sorting import argsort_stable, sort_inplace


@pytest.mark.parametrize("n", [0, 1, 2, 15, 16, 17, 33, 100, 1000])
def test_argsort_stable_matches_numpy(n: int) -> None:
    rng = np.random.default_rng(n)
    for _ in range(5):
        keys = rng.integers(0, max(n // 4, 1), size=n).astype(np.float64)  # many ties
        special = rng.random(n)
        keys[special < 0.05] = np.nan
        keys[(special >= 0.05) & (special < 0.1)] = np.inf
        keys[(special >= 0.1) & (special < 0.15)] = -np.inf
        keys[(special >= 0.15) & (special < 0.2)] = -0.0
        np.testing.assert_array_equal(argsort_stable(keys), np.argsort(keys, kind="stable"))


def test_argsort_stable_sorted_and_reversed() -> None:
    keys = np.arange(50, dtype=np.float64)
    np.testing.assert_array_equal(argsort_stable(keys), np.arange(50))
    np.testing.assert_array_equal(argsort_stable(keys[::-1].copy()), np.arange(50)[::-1])


@pytest.mark.parametrize("n", [0, 1, 2, 15, 16, 17, 31, 33, 100, 1000, 1771])
def test_sort_inplace_matches_numpy(n: int) -> None:
    rng = np.random.default_rng(100 + n)
    for _ in range(5):
        values = rng.normal(size=n)
        special = rng.random(n)
        values[special < 0.05] = np.nan
        values[(special >= 0.05) & (special < 0.1)] = np.inf
        values[(special >= 0.1) & (special < 0.15)] = -np.inf
        values[(special >= 0.15) & (special < 0.3)] = 1.0  # ties
        got = values.copy()
        assert sort_inplace(got) is None
        np.testing.assert_array_equal(got, np.sort(values))
        # a leading slice of a longer array is sorted in place, the rest untouched
        longer = np.concatenate([values, [7.0, -7.0]])
        sort_inplace(longer[:n])
        np.testing.assert_array_equal(longer[:n], np.sort(values))
        np.testing.assert_array_equal(longer[n:], [7.0, -7.0])
