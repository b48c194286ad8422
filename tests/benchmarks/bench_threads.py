"""Benchmark: the exact engines on a quiet and on a busy machine, by thread setting.

Run on demand (not collected by pytest)::

    python tests/benchmarks/bench_threads.py                  # quiet, then loaded by 2 busy processes
    python tests/benchmarks/bench_threads.py --load 2 --configs default serial passive
    python tests/benchmarks/bench_threads.py --sizes 18 20 --jets 5 --load 0

Each configuration runs in a fresh subprocess (numba reads its thread settings once, when it starts).
A configuration is a set of environment variables (``default`` = what a user gets with nothing set;
the others name the switch they set, see :data:`CONFIGS`). ``--load k`` starts ``k`` busy processes
for the measurement, so that each core has other work, as on a shared batch node: by default numba
programs running parallel loops without pause (other users' multi-threaded jobs, the case that hurt),
or pure Python loops (``--load-kind python``).

Per configuration and algorithm: median and 90th percentile of the per-jet wall time and the total
CPU time of the process (user + system, all threads) per jet, both after a warm-up jet (compilation
excluded). Jets: default QCD jets with 6 .. 12 leaves (``--sizes small``), or W jets with exactly the
given numbers of leaves.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import subprocess
import sys
import time

#: environment of each configuration (on top of the caller's, with the jetastar/numba switches removed)
CONFIGS: dict[str, dict[str, str]] = {
    "default": {},
    "serial": {"NUMBA_NUM_THREADS": "1"},
    "passive": {"OMP_WAIT_POLICY": "passive"},
    "active": {"OMP_WAIT_POLICY": "active"},
    "workqueue": {"NUMBA_THREADING_LAYER": "workqueue"},
    "threads2": {"JETASTAR_THREADS": "2"},
}
_SWITCHES = ("NUMBA_NUM_THREADS", "OMP_WAIT_POLICY", "NUMBA_THREADING_LAYER", "JETASTAR_THREADS",
             "GOMP_SPINCOUNT", "KMP_BLOCKTIME")


def _busy() -> None:  # pragma: no cover - a load generator
    x = 0
    while True:
        x = (x * 1103515245 + 12345) % 2147483648


_NUMBA_HOG = """
import numba as nb, numpy as np
@nb.njit(parallel=True)
def step(a):
    s = 0.0
    for i in nb.prange(a.size):
        s += np.sqrt(a[i])
    return s
a = np.ones(5_000_000)
while True:
    step(a)
"""


def _start_load(kind: str, k: int) -> list:
    """``k`` busy processes: pure Python loops, or numba programs that run parallel loops all the
    time (other users' multi-threaded jobs, with their own OpenMP settings)."""
    if kind == "python":
        hogs = [mp.Process(target=_busy, daemon=True) for _ in range(k)]
        for h in hogs:
            h.start()
        return hogs
    env = {key: v for key, v in os.environ.items() if key not in _SWITCHES}
    return [subprocess.Popen([sys.executable, "-c", _NUMBA_HOG], env=env) for _ in range(k)]


def _measure(sizes: str, jets_per: int, algorithms: list[str]) -> dict:
    """Run inside the subprocess: time every algorithm on every jet."""
    import numpy as np

    from jetastar.clustering import exact_map, exact_trellis
    from jetastar.ginkgo import ShowerParams, generate

    if sizes == "small":
        jets = [j for j in generate(400, ShowerParams.qcd(), seed=11)
                if 6 <= j.n_leaves <= 12][: jets_per]
    else:
        jets = []
        for n in (int(s) for s in sizes.split(",")):
            jets += generate(jets_per, ShowerParams.w(), seed=5000 + n, min_leaves=n, max_leaves=n,
                             max_tries=200_000)
    run = {"exact_map": lambda j: exact_map(j, progress=False),
           "trellis": lambda j: exact_trellis(j, progress=False)}
    out: dict = {"n_jets": len(jets), "leaves": [j.n_leaves for j in jets]}
    for name in algorithms:
        run[name](jets[0])  # compile / load from the cache
        wall, cpu, values = [], [], []
        for jet in jets:
            t0, c0 = time.perf_counter(), time.process_time()
            r = run[name](jet)
            wall.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
            values.append(r.log_likelihood)
        out[name] = {"wall_ms": [1e3 * w for w in wall], "cpu_ms": [1e3 * c for c in cpu],
                     "values": values, "threads": r.stats.get("threads")}
        out[name]["median_wall_ms"] = float(np.median(out[name]["wall_ms"]))
        out[name]["p90_wall_ms"] = float(np.percentile(out[name]["wall_ms"], 90))
        out[name]["median_cpu_ms"] = float(np.median(out[name]["cpu_ms"]))
    return out


def _child(config: str, sizes: str, jets_per: int, algorithms: list[str]) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in _SWITCHES}
    env.update(CONFIGS[config])
    env["TQDM_DISABLE"] = "1"
    here = os.path.dirname(os.path.abspath(__file__))
    code = (f"import json, sys; sys.path.insert(0, {here!r}); import bench_threads as b; "
            f"print(json.dumps(b._measure({sizes!r}, {jets_per}, {algorithms!r})))")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", nargs="+", default=["default", "serial"], choices=CONFIGS)
    parser.add_argument("--load", type=int, nargs="+", default=[0, 2],
                        help="busy processes during the measurement (one run per value)")
    parser.add_argument("--load-kind", choices=["python", "numba"], default="numba",
                        help="what the busy processes run (default: numba parallel loops)")
    parser.add_argument("--sizes", default="small",
                        help="'small' (QCD, 6-12 leaves) or comma-separated leaf counts (W jets)")
    parser.add_argument("--jets", type=int, default=100, help="jets (per size)")
    parser.add_argument("--algorithms", nargs="+", default=["exact_map", "trellis"],
                        choices=["exact_map", "trellis"])
    parser.add_argument("--json", help="write every number here")
    args = parser.parse_args(argv)
    results = {}
    print(f"{'load':>4} {'config':>10} {'algorithm':>10} {'jets':>5} {'threads':>7} "
          f"{'median ms':>10} {'p90 ms':>8} {'CPU ms':>8}")
    for load in args.load:
        hogs = _start_load(args.load_kind, load)
        time.sleep(6.0 if load else 0.0)  # let the load start (numba hogs compile first)
        try:
            for config in args.configs:
                res = _child(config, args.sizes, args.jets, args.algorithms)
                results[f"{load}/{config}"] = res
                for name in args.algorithms:
                    r = res[name]
                    print(f"{load:>4} {config:>10} {name:>10} {res['n_jets']:>5} "
                          f"{r['threads']!s:>7} {r['median_wall_ms']:>10.2f} "
                          f"{r['p90_wall_ms']:>8.2f} {r['median_cpu_ms']:>8.2f}", flush=True)
        finally:
            for h in hogs:
                h.terminate()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
