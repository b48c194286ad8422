"""Benchmark of the baselines (greedy, beam search, kt family, MCTS): time per jet and quality.

Run on demand (not collected by pytest)::

    python tests/benchmarks/bench_baselines.py                    # N = 10, 20, 30, 50, 100
    python tests/benchmarks/bench_baselines.py --sizes 100 --jets 3
    python tests/benchmarks/bench_baselines.py --quality-only

Timing: Ginkgo QCD jets with exactly N leaves (smaller ``t_cut`` for larger N, as in the brief),
median wall time per jet after a warm-up call (numba compilation excluded). Quality: on jets with
10–20 leaves, mean log-likelihood difference of MCTS (reference settings, both rollout policies) and
of beam search against greedy, and MCTS against beam search. Times are wall-clock on a shared
machine.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from jetastar.clustering import beam_search, greedy, kt, mcts
from jetastar.ginkgo import ShowerParams, generate

T_CUT = {10: 4.0, 20: 1.0, 30: 0.25, 50: 0.09, 100: 0.0125}


def _jets(n: int, count: int, seed: int) -> list:
    t_cut = T_CUT.get(n, 4.0 if n <= 14 else 1.0 if n <= 25 else 0.25 if n <= 40 else 0.0125)
    return list(generate(count, ShowerParams.qcd(t_cut=t_cut), seed=seed, min_leaves=n, max_leaves=n))


def _time(fn, jets) -> tuple[float, float, int]:
    times, lls = [], []
    for jet in jets:
        start = time.perf_counter()
        result = fn(jet)
        times.append(time.perf_counter() - start)
        lls.append(result.log_likelihood)
    finite = [x for x in lls if np.isfinite(x)]
    mean = float(np.mean(finite)) if finite else -np.inf
    return statistics.median(times), mean, len(jets) - len(finite)


def timing(sizes: list[int], count: int, likelihood: str, mcts_max: int) -> None:
    algorithms = {
        "greedy": lambda j: greedy(j, likelihood=likelihood),
        "beam (default size)": lambda j: beam_search(j, likelihood=likelihood),
        "kt": lambda j: kt(j, likelihood=likelihood),
        "cambridge": lambda j: kt(j, algorithm="cambridge", likelihood=likelihood),
        "antikt": lambda j: kt(j, algorithm="antikt", likelihood=likelihood),
        "mcts (defaults)": lambda j: mcts(j, likelihood=likelihood),
    }
    warm = _jets(8, 1, 1)[0]
    for fn in algorithms.values():
        fn(warm)
    print(
        f"likelihood={likelihood}, {count} jets per size: median seconds per jet "
        "[mean finite log L, number of -inf trees]"
    )
    header = f"{'algorithm':22s}" + "".join(f"{'N=' + str(n):>26s}" for n in sizes)
    print(header)
    jets = {n: _jets(n, count, seed=1000 + n) for n in sizes}
    for name, fn in algorithms.items():
        row = f"{name:22s}"
        for n in sizes:
            if name.startswith("mcts") and n > mcts_max:
                row += f"{'-':>26s}"
                continue
            t, ll, n_inf = _time(fn, jets[n])
            cell = f"{t:.4f} [{ll:.1f}{'' if n_inf == 0 else f', {n_inf} -inf'}]"
            row += f"{cell:>26s}"
        print(row, flush=True)


def quality(count: int, likelihood: str) -> None:
    jets = list(generate(count, ShowerParams.qcd(t_cut=1.5), seed=7, min_leaves=10, max_leaves=20))
    sizes = [j.n_leaves for j in jets]
    g = np.array([greedy(j, likelihood=likelihood).log_likelihood for j in jets])
    b = np.array([beam_search(j, likelihood=likelihood).log_likelihood for j in jets])
    rows = {"beam (default)": b}
    times = {}
    for rollout in ("greedy", "sample"):
        start = time.perf_counter()
        rows[f"mcts rollout={rollout}"] = np.array(
            [mcts(j, likelihood=likelihood, rollout=rollout, seed=i).log_likelihood
             for i, j in enumerate(jets)]
        )
        times[f"mcts rollout={rollout}"] = (time.perf_counter() - start) / len(jets)
    print(
        f"\nquality: {len(jets)} QCD jets, {min(sizes)}-{max(sizes)} leaves "
        f"(mean {np.mean(sizes):.1f}), likelihood={likelihood}"
    )
    print(f"{'method':22s} {'mean ΔlogL vs greedy':>22s} {'vs beam':>10s} "
          f"{'>greedy':>8s} {'<greedy':>8s} {'>beam':>6s} {'<beam':>6s} {'s/jet':>7s}")
    for name, vals in rows.items():
        ok = np.isfinite(vals) & np.isfinite(g) & np.isfinite(b)
        dg = vals[ok] - g[ok]
        db = vals[ok] - b[ok]
        print(
            f"{name:22s} {dg.mean():>22.3f} {db.mean():>10.3f} {np.sum(dg > 1e-9):>8d} "
            f"{np.sum(dg < -1e-9):>8d} {np.sum(db > 1e-9):>6d} {np.sum(db < -1e-9):>6d} "
            f"{times.get(name, float('nan')):>7.3f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 20, 30, 50, 100])
    parser.add_argument("--jets", type=int, default=5, help="jets per size for timing")
    parser.add_argument("--quality-jets", type=int, default=100)
    parser.add_argument("--likelihood", default="symmetric", choices=["symmetric", "legacy"])
    parser.add_argument("--mcts-max", type=int, default=50, help="largest N timed for MCTS")
    parser.add_argument("--quality-only", action="store_true")
    parser.add_argument("--timing-only", action="store_true")
    args = parser.parse_args()
    if not args.quality_only:
        timing(args.sizes, args.jets, args.likelihood, args.mcts_max)
    if not args.timing_only:
        quality(args.quality_jets, args.likelihood)


if __name__ == "__main__":
    main()
