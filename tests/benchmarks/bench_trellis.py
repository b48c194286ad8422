"""Benchmark of the exact cluster trellis: time, peak memory, split rates, counters.

Run on demand (not collected by pytest)::

    python tests/benchmarks/bench_trellis.py                 # N = 10 .. 20, both likelihoods
    python tests/benchmarks/bench_trellis.py --sizes 22      # one size
    python tests/benchmarks/bench_trellis.py --threads 1     # single thread

Each size runs in a fresh subprocess so that the peak resident memory (``ru_maxrss``) belongs to
that size alone; the table reports it above the baseline after imports and compilation. The jets are
Ginkgo QCD jets (default parameters, with a smaller ``t_cut`` for the larger sizes so that the size
is typical) filtered to exactly ``N`` leaves. Two one-thread baselines visit the same splits as the
DP (every split of every cluster of two or more leaves): "bare" does one subtraction per split (the
enumeration and memory-access floor), "ψ only" calls ``split_llh`` once per split and nothing else
(the floor for any exact method that scores every split). Times are wall-clock on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import numba as nb
import numpy as np

from jetastar.ginkgo.likelihood import split_llh

#: reference exhaustive DP (ClusterTrellis, repaired) on this machine, seconds per jet (issue 3)
REFERENCE_S = {9: 3.0, 10: 9.0, 11: 27.0, 12: 80.0}
T_CUT = {9: 16.0, 10: 16.0, 11: 16.0, 12: 16.0, 14: 4.0, 16: 4.0, 18: 1.0, 20: 1.0, 22: 1.0}


@nb.njit(cache=True)
def _bare_loop(order, start, stop, t):  # pragma: no cover - numba
    acc = 0.0
    visited = 0
    for j in range(start, stop):
        s = np.int64(order[j])
        low = s & -s
        rest = s ^ low
        sub = (rest - 1) & rest
        while True:
            acc += t[low | sub] - t[rest ^ sub]
            visited += 1
            if sub == 0:
                break
            sub = (sub - 1) & rest
    return acc, visited


@nb.njit(cache=True)
def _psi_loop(order, start, stop, t, full, consts):  # pragma: no cover - numba
    acc = 0.0
    visited = 0
    for j in range(start, stop):
        s = np.int64(order[j])
        c = consts[1] if s == full else consts[0]
        low = s & -s
        rest = s ^ low
        sub = (rest - 1) & rest
        t_s = t[s]
        while True:
            v = split_llh(t[low | sub], t[rest ^ sub], t_s, c)
            if v > -np.inf:
                acc += v
            visited += 1
            if sub == 0:
                break
            sub = (sub - 1) & rest
    return acc, visited


def _jet(n: int, seed: int = 7):
    from jetastar.ginkgo import ShowerParams, generate

    params = ShowerParams.qcd(t_cut=T_CUT.get(n, 1.0))
    return generate(1, params, seed=seed, min_leaves=n, max_leaves=n, max_tries=100_000)[0]


def _maxrss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def run_one(n: int, likelihood: str, threads: int | None, repeat: int) -> dict:
    """Measure one size in this process (called in a subprocess by :func:`main`)."""
    from jetastar.clustering import Trellis, exact_trellis
    from jetastar.clustering._subsets import masks_by_size

    # compile / load every kernel before measuring
    warm = _jet(6)
    exact_trellis(warm, likelihood=likelihood, progress=False)
    exact_trellis(warm, likelihood=likelihood, progress=False, threads=1)
    big = _jet(12)
    tr = Trellis(big, likelihood, threads=threads)
    tr.marginals_array()
    tr.sample_children(2, seed=0)
    order0, _ = masks_by_size(6)
    _bare_loop(order0, 0, len(order0), tr.t_array())
    _psi_loop(order0, 0, len(order0), tr.t_array(), 63, big.likelihood_constants(likelihood))
    jet = _jet(n)
    base = _maxrss()
    times = []
    res = None
    for _ in range(repeat):
        res = exact_trellis(jet, likelihood=likelihood, threads=threads, progress=False)
        times.append(res.stats["time_s"])
    peak = _maxrss() - base
    assert res is not None
    out = {
        "n": n,
        "likelihood": likelihood,
        "t_cut": jet.params.t_cut,
        "time_s": min(times),
        "time_dp_s": res.stats["time_dp_s"],
        "peak_bytes": peak,
        "estimate_bytes": res.stats["memory_bytes"],
        "log_likelihood": res.log_likelihood,
        "log_z": res.log_z,
        "n_trees": float(res.n_trees),
        "threads": res.stats["threads"],
        **{key: res.stats[key] for key in (
            "splits_total", "splits_evaluated", "splits_skipped", "clusters", "clusters_pruned",
            "clusters_impossible",
        )},
    }
    # one-thread DP vs a bare loop over the same splits (one thread too)
    if n <= 18:
        one = exact_trellis(jet, likelihood=likelihood, threads=1, progress=False)
        tr = Trellis(jet, likelihood, threads=1, progress=False)
        order, offsets = masks_by_size(n)
        t = tr.t_array()
        start = time.perf_counter()
        _, visited = _bare_loop(order, int(offsets[2]), len(order), t)
        bare = time.perf_counter() - start
        start = time.perf_counter()
        _psi_loop(order, int(offsets[2]), len(order), t, (1 << n) - 1,
                  jet.likelihood_constants(likelihood))
        psi = time.perf_counter() - start
        out["psi_only_s"] = psi
        out["time_1thread_s"] = one.stats["time_dp_s"]
        out["bare_s"] = bare
        out["bare_splits_per_s"] = visited / bare
        out["dp_splits_per_s_1thread"] = out["splits_total"] / one.stats["time_dp_s"]
    out["dp_splits_per_s"] = out["splits_total"] / out["time_dp_s"]
    # marginals and sampling (moderate sizes)
    if n <= 18:
        tr = Trellis(jet, likelihood, threads=threads, progress=False)
        start = time.perf_counter()
        tr.marginals_array()
        out["marginals_s"] = time.perf_counter() - start
        start = time.perf_counter()
        tr.sample_children(1000, seed=0)
        out["sample_1000_s"] = time.perf_counter() - start
    return out


def _fmt_bytes(x: float) -> str:
    return f"{x / 2**20:.1f} MiB"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="*", default=[10, 12, 14, 16, 18, 20])
    ap.add_argument("--likelihood", nargs="*", default=["symmetric", "legacy"])
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--repeat", type=int, default=None, help="default: 5 up to N=16, else 1")
    ap.add_argument("--reference", action="store_true", help="also time N = 9, 11 (speed-up)")
    ap.add_argument("--one", nargs=2, metavar=("N", "LIKELIHOOD"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        n = int(args.one[0])
        repeat = args.repeat or (5 if n <= 16 else 1)
        print(json.dumps(run_one(n, args.one[1], args.threads, repeat)))
        return
    sizes = sorted(set(args.sizes) | ({9, 10, 11, 12} if args.reference else set()))
    print(f"numba threads: {args.threads or nb.config.NUMBA_NUM_THREADS}")
    rows = []
    for likelihood in args.likelihood:
        for n in sizes:
            cmd = [sys.executable, __file__, "--one", str(n), likelihood]
            if args.threads:
                cmd += ["--threads", str(args.threads)]
            if args.repeat:
                cmd += ["--repeat", str(args.repeat)]
            out = subprocess.run(cmd, capture_output=True, text=True, check=True)
            row = json.loads(out.stdout.strip().splitlines()[-1])
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    print()
    print("| N | likelihood | t_cut | DP time | peak RSS | estimate | splits | evaluated | "
          "skipped | clusters pruned | Msplits/s | 1 thread: DP / ψ only / bare (Msplits/s) | "
          "marginals | 1000 samples | vs reference |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        ratio = (
            f"{r['dp_splits_per_s_1thread'] / 1e6:.1f} / "
            f"{r['splits_total'] / r['psi_only_s'] / 1e6:.1f} / "
            f"{r['bare_splits_per_s'] / 1e6:.0f}" if "bare_s" in r else "—"
        )
        ref = REFERENCE_S.get(r["n"])
        speed = f"{ref / r['time_s']:,.0f}×" if ref else "—"
        print(
            f"| {r['n']} | {r['likelihood']} | {r['t_cut']:g} | {r['time_s']:.4g} s | "
            f"{_fmt_bytes(r['peak_bytes'])} | {_fmt_bytes(r['estimate_bytes'])} | "
            f"{r['splits_total']:.3g} | {r['splits_evaluated']:.3g} | {r['splits_skipped']:.3g} | "
            f"{r['clusters_pruned']} | {r['dp_splits_per_s'] / 1e6:.1f} | {ratio} | "
            f"{r.get('marginals_s', float('nan')):.3g} s | "
            f"{r.get('sample_1000_s', float('nan')):.3g} s | {speed} |"
        )


if __name__ == "__main__":
    main()
