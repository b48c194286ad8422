"""Benchmark of the cost-model engines (HCC, Dasgupta): exact trellis, greedy, average linkage.

Run on demand (not collected by pytest)::

    python tests/benchmarks/bench_costs.py                      # trellis n = 12..18, baselines
    python tests/benchmarks/bench_costs.py --sizes 20           # one trellis size (~30 s here)
    python tests/benchmarks/bench_costs.py --baseline-sizes 100 1000 4000

Trellis graphs: the ALOI samples (``tests/data/aloi_hcc_samples.npz``, sample 0) for the sizes they
have, random signed graphs otherwise; the DP is timed on one thread and on all threads (the machine
may be shared: the one-thread numbers are the stable ones). Baselines: cosine affinities (mean
subtracted) of points drawn around 20 random centres in 32 dimensions for HCC, the cosine clipped at
0 for Dasgupta.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from jetastar.clustering import Trellis, average_linkage, cost_greedy
from jetastar.clustering._subsets import n_splits_total
from jetastar.costs import DasguptaCost, HCCCost, affinities_from_points

DATA = Path(__file__).resolve().parents[1] / "data" / "aloi_hcc_samples.npz"


def _graph(n: int) -> tuple[np.ndarray, str]:
    with np.load(DATA) as data:
        key = f"n{n}_s0_weights"
        if key in data:
            return np.asarray(data[key], dtype=np.float64), "ALOI"
    rng = np.random.default_rng(n)
    w = np.triu(rng.normal(size=(n, n)), 1)
    return w + w.T, "random"


def _points(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(20, 32))
    return centres[rng.integers(0, 20, n)] + 0.5 * rng.normal(size=(n, 32))


def bench_trellis(sizes: list[int]) -> None:
    w, _ = _graph(8)
    Trellis(HCCCost(w), threads=1)
    Trellis(DasguptaCost(np.abs(w)))
    print("| n | graph | cost | splits | DP 1 thread | Msplits/s | DP all threads | min cost | log Z |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n in sizes:
        w, kind = _graph(n)
        for model in (HCCCost(w), DasguptaCost(np.abs(w))):
            one = Trellis(model, threads=1, progress=False)
            t1 = one.stats["time_dp_s"]
            many = Trellis(model, progress=False)
            assert many.map_cost() == one.map_cost()
            print(
                f"| {n} | {kind} | {model.name} | {n_splits_total(n):.3g} | {t1:.3g} s | "
                f"{n_splits_total(n) / t1 / 1e6:.1f} | {many.stats['time_dp_s']:.3g} s | "
                f"{one.map_cost():.6g} | {one.log_partition():.6g} |",
                flush=True,
            )


def bench_baselines(sizes: list[int]) -> None:
    cost_greedy(HCCCost(np.eye(3)))
    print("\n| n | cost | greedy | merge costs evaluated | average linkage | greedy cost | "
          "average-linkage cost |")
    print("|---|---|---|---|---|---|---|")
    for n in sizes:
        x = _points(n)
        cosine = affinities_from_points(x, subtract_mean=False)
        for model in (HCCCost.from_points(x), DasguptaCost(np.maximum(cosine, 0.0))):
            start = time.perf_counter()
            g = cost_greedy(model)
            tg = time.perf_counter() - start
            start = time.perf_counter()
            a = average_linkage(model)
            ta = time.perf_counter() - start
            print(f"| {n} | {model.name} | {tg:.3g} s | {g.stats['merge_costs_evaluated']:.3g} | "
                  f"{ta:.3g} s | {g.cost:.6g} | {a.cost:.6g} |", flush=True)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="*", default=[12, 15, 18])
    ap.add_argument("--baseline-sizes", type=int, nargs="*", default=[60, 300, 1000, 3000])
    args = ap.parse_args(argv)
    bench_trellis(args.sizes)
    bench_baselines(args.baseline_sizes)


if __name__ == "__main__":
    main()
