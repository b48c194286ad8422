from __future__ import annotations

import numpy as np
import pytest

from jetastar._sorting import argsort_stable


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
