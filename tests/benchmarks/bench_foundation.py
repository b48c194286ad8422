"""Benchmarks of the foundation: generator jets/s and split log-likelihood evaluations/s.

Run on demand: ``python tests/benchmarks/bench_foundation.py``. Not collected by pytest.
"""

from __future__ import annotations

import argparse
import time

import numba as nb
import numpy as np

from jetastar.ginkgo import ShowerParams, generate, likelihood_constants
from jetastar.ginkgo.kernels import split_llh


@nb.njit(cache=True)
def _sum_splits(t_left, t_right, t_parent, consts):
    total = 0.0
    n_finite = 0
    for i in range(t_left.shape[0]):
        v = split_llh(t_left[i], t_right[i], t_parent[i], consts)
        if v > -np.inf:
            total += v
            n_finite += 1
    return total, n_finite


@nb.njit(cache=True)
def _sum_only(t_left, t_right, t_parent):
    total = 0.0
    for i in range(t_left.shape[0]):
        total += t_left[i] + t_right[i] + t_parent[i]
    return total


def _best_of(fn, repeat: int = 5) -> float:
    best = np.inf
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def bench_generator(n_jets: int = 50_000) -> None:
    for params in (ShowerParams.qcd(), ShowerParams.w()):
        generate(10, params, seed=0)  # compile / load cache
        dt = _best_of(lambda p=params: generate(n_jets, p, seed=1), repeat=3)
        print(f"generator {params.jet_type:>3}: {n_jets / dt:12,.0f} jets/s  ({n_jets} jets, "
              f"{dt:.3f} s, reference 96 QCD / 48 W jets/s)")


def bench_split_kernel(n: int = 5_000_000) -> None:
    rng = np.random.default_rng(0)
    t_parent = rng.uniform(20.0, 900.0, n)
    t_left = t_parent * rng.uniform(0.0, 0.6, n)
    t_right = (np.sqrt(t_parent) - np.sqrt(t_left)) ** 2 * rng.uniform(0.0, 0.99, n)
    for form in ("symmetric", "legacy"):
        c = likelihood_constants(16.0, 1.5, likelihood=form)[0]
        _sum_splits(t_left[:10], t_right[:10], t_parent[:10], c)
        _sum_only(t_left[:10], t_right[:10], t_parent[:10])
        dt = _best_of(lambda c=c: _sum_splits(t_left, t_right, t_parent, c))
        base = _best_of(lambda: _sum_only(t_left, t_right, t_parent))
        print(f"split kernel {form:>9}: {1e9 * dt / n:6.1f} ns/split "
              f"({n / dt / 1e6:.1f} M splits/s; bare loop {1e9 * base / n:.1f} ns; "
              f"reference symmetric 153 µs, legacy 7.9 µs)")


if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    bench_generator()
    bench_split_kernel()
