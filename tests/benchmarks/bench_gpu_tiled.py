"""The tiled GPU trellis (``solve_on_gpu_tiled``) against today's (``solve_on_gpu``) on one GPU.

Run on demand on a machine with an NVIDIA GPU and numba-cuda (not collected by pytest)::

    python tests/benchmarks/bench_gpu_tiled.py                       # check, then 20-24 leaves
    python tests/benchmarks/bench_gpu_tiled.py --sizes 20,22,24,26 --budget 400

It checks first: at the ``--check`` sizes both solvers' tables (t, MAP, log Z to 1e-9 relative,
the arg-max, exact counts) agree, and the tiled solve's traffic counter equals
``tiled_bytes_per_split``. Then it times both on the same W jet per size, alternating (today's
first), MAP + log Z, skipping a size whose predicted time (the last size's, times 3.2 per leaf)
does not fit the remaining ``--budget`` seconds. Times exclude compilation (a warm-up solve at 10
leaves compiles both). Not yet run on a GPU: written without one, its kernels tested only in
numba's CUDA simulator.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time

os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")

#: the exit status of a run with nothing to measure (no GPU), as automake's "skipped"
SKIPPED = 77


def _jet(n: int):
    from jetastar.ginkgo import ShowerParams, generate

    for t_cut in (16.0, 9.0, 4.0, 1.0):
        params = dataclasses.replace(ShowerParams.w(), t_cut=t_cut)
        try:
            return generate(1, params, seed=1000 + n, min_leaves=n, max_leaves=n)[0]
        except Exception:  # no jet of exactly n leaves at this t_cut
            continue
    raise SystemExit(f"no W jet with {n} leaves")


def _solve(jet, tiled: bool, **kw):
    from jetastar.clustering import gpu

    consts = jet.likelihood_constants("symmetric")[None]
    if tiled:
        return gpu.solve_on_gpu_tiled([jet.leaves], consts, **kw)
    return gpu.solve_on_gpu([jet.leaves], consts, **kw)


def check(n: int, low_bits: int | None) -> str:
    """Both solvers' tables agree at ``n`` leaves; the counter equals the analytic count."""
    import numpy as np

    from jetastar.clustering import gpu

    jet = _jet(n)
    ref = _solve(jet, False)
    sol = _solve(jet, True, low_bits=low_bits, count_traffic=True)
    a, b = sol.node[0, 1:], ref.node[0, 1:]
    for col in (0, 1, 2):
        assert np.array_equal(np.isneginf(a[:, col]), np.isneginf(b[:, col])), (n, col)
        fin = np.isfinite(b[:, col])
        np.testing.assert_allclose(a[fin, col], b[fin, col], rtol=1e-9, atol=1e-9)
    fin = np.isfinite(ref.node[0, :, 1])
    assert np.array_equal(sol.best[0][fin], ref.best[0][fin]), n
    assert np.array_equal(sol.node[0].view(np.int64)[1:, 3], ref.node[0].view(np.int64)[1:, 3])
    total, per_split = gpu.tiled_bytes_per_split(n, low_bits or gpu._TILE_LOW_BITS)
    assert sol.stats["global_bytes"] == total, (sol.stats["global_bytes"], total)
    return f"check {n} leaves: tables equal, {per_split:.2f} B/split counted = analytic"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="20,22,24")
    parser.add_argument("--check", default="12,14,16")
    parser.add_argument("--low-bits", type=int, default=None)
    parser.add_argument("--budget", type=float, default=300.0)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    from jetastar._cuda import gpu_status, simulator_enabled
    from jetastar.clustering import gpu

    if not gpu_status()["available"] or simulator_enabled():
        print("no GPU:", gpu_status()["reason"])
        return SKIPPED
    started = time.perf_counter()
    _solve(_jet(10), False)
    _solve(_jet(10), True, low_bits=args.low_bits)
    for n in (int(x) for x in args.check.split(",") if x):
        print(check(n, args.low_bits), flush=True)
    rows = []
    predicted = 0.0
    for n in (int(x) for x in args.sizes.split(",") if x):
        left = args.budget - (time.perf_counter() - started)
        if predicted * 2 > left:
            print(f"{n} leaves: skipped (predicted {predicted:.0f} s each, {left:.0f} s left)")
            break
        jet = _jet(n)
        row = {"n": n, "bytes_per_split": gpu.tiled_bytes_per_split(n, args.low_bits or 9)[1]}
        for name, tiled in (("today", False), ("tiled", True)):
            kw = {"low_bits": args.low_bits} if tiled else {}
            sol = _solve(jet, tiled, **kw)
            row[name + "_s"] = sol.stats["time_dp_s"]
            row[name + "_gsplits"] = sol.stats["gsplits_per_s"]
            row[name + "_map"] = float(sol.node[0, -1, 1])
            row[name + "_log_z"] = float(sol.node[0, -1, 2])
        rows.append(row)
        print(json.dumps(row), flush=True)
        predicted = max(row["today_s"], row["tiled_s"]) * 3.2 ** 2
    print(f"{'leaves':>6} {'today s':>9} {'Gsplit/s':>9} {'tiled s':>9} {'Gsplit/s':>9} {'B/split':>8}")
    for r in rows:
        print(f"{r['n']:>6} {r['today_s']:>9.2f} {r['today_gsplits']:>9.1f} {r['tiled_s']:>9.2f} "
              f"{r['tiled_gsplits']:>9.1f} {r['bytes_per_split']:>8.2f}")
    out = args.json or (os.path.join(os.environ["OUT"], "bench_gpu_tiled.json")
                        if os.environ.get("OUT") else None)
    if out:
        with open(out, "w") as f:
            json.dump({"rows": rows, "gpu": gpu_status()["device"]}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
