"""Benchmark of the generalized-kt kernel (``kt_history``) on large jets: CPU seconds per jet for
kt, Cambridge/Aachen and anti-kt at 500 to 5000 leaves.

Run on demand (not collected by pytest)::

    python tests/benchmarks/bench_kt.py                       # 500 1000 2000 5000 leaves
    python tests/benchmarks/bench_kt.py --sizes 500 1000 --repeat 5
    python tests/benchmarks/bench_kt.py --reference           # the O(n³) rescan, for comparison

A jet of ``n`` leaves is the leaves of QCD jets with ``t_cut = 0.05`` GeV² put together (as
``bench_columnar.py --deadline`` builds its 400-leaf jet). Each number is the best of ``--repeat``
calls (after a warm-up call that compiles), in CPU seconds (``time.process_time``). ``--reference``
times ``tests/helpers/kt_reference.kt_history_cubic`` (the kernel before its nearest-neighbour
bookkeeping) instead.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

from jetastar.clustering.agglomerative.kt import KT_ALGORITHMS, kt_history
from jetastar.ginkgo import ShowerParams, generate


def big_leaves(n: int, seed: int = 7) -> np.ndarray:
    """``n`` leaves: those of QCD jets (``t_cut = 0.05`` GeV²) put together."""
    params = ShowerParams.qcd(t_cut=0.05)
    parts: list[np.ndarray] = []
    total = 0
    k = 0
    while total < n:
        jets = generate(50, params, seed=seed + k)
        for jet in jets:
            parts.append(jet.leaves)
            total += jet.leaves.shape[0]
        k += 1
    return np.ascontiguousarray(np.concatenate(parts)[:n], dtype=np.float64)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[500, 1000, 2000, 5000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--reference", action="store_true", help="time the O(n³) rescan")
    args = parser.parse_args()
    kernel = kt_history
    if args.reference:
        sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
        from helpers.kt_reference import kt_history_cubic

        kernel = kt_history_cubic
    kernel(big_leaves(10), np.int64(1), 1e6)  # compile
    print(f"{'leaves':>6} " + " ".join(f"{name + ' cpu s':>14}" for name in KT_ALGORITHMS))
    for n in args.sizes:
        leaves = big_leaves(n)
        row = []
        for power in KT_ALGORITHMS.values():
            best = np.inf
            for _ in range(args.repeat):
                c0 = time.process_time()
                kernel(leaves, np.int64(power), 1e6)
                best = min(best, time.process_time() - c0)
            row.append(best)
        print(f"{n:>6} " + " ".join(f"{t:>14.4f}" for t in row), flush=True)


if __name__ == "__main__":
    main()
