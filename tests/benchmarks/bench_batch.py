"""Benchmark: batch clustering throughput (jets/s) with 1 and 2 worker processes.

Generates a file of QCD jets (default 10 000, reference parameters), then runs
:func:`jetastar.batch.run_batch` once per algorithm and worker count, and prints jets/s (wall time of
the whole run: reading, clustering, part files, merge and the final write; worker start-up included).
Also reports HDF5/ROOT write and read speeds of the file.

Usage::

    python tests/benchmarks/bench_batch.py [--n 10000] [--algorithms greedy,beam,astar-approx]
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import multiprocessing
import tempfile
import time
from pathlib import Path


def main() -> None:
    from jetastar import io
    from jetastar.batch import BatchConfig, run_batch
    from jetastar.clustering import algorithms
    from jetastar.ginkgo import ShowerParams, generate

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10000)
    parser.add_argument("--algorithms", default="greedy,beam,astar-approx")
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--chunk-size", type=int, default=200)
    parser.add_argument("--option", action="append", default=[])
    args = parser.parse_args()
    from jetastar.batch import parse_options

    names = [a for a in args.algorithms.split(",") if a]
    missing = [a for a in names if a not in algorithms()]
    if missing:
        print(f"not registered (skipped): {', '.join(missing)}; available: {algorithms()}")
    names = [a for a in names if a in algorithms()]
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        t = time.perf_counter()
        jets = generate(args.n, ShowerParams.qcd(), seed=1)
        print(f"generated {len(jets)} QCD jets (mean {jets.n_leaves.mean():.2f} leaves) in "
              f"{time.perf_counter() - t:.1f} s")
        for ext in ("h5", "root"):
            path = d / f"jets.{ext}"
            t = time.perf_counter()
            io.write(path, jets)
            tw = time.perf_counter() - t
            t = time.perf_counter()
            io.read(path)
            tr = time.perf_counter() - t
            print(f"{ext:>4}: write {len(jets) / tw:9.0f} jets/s, read {len(jets) / tr:9.0f} "
                  f"jets/s, {path.stat().st_size / len(jets):.0f} bytes/jet")
        src = d / "jets.h5"
        warm = d / "warm.h5"
        io.write(warm, jets[:400])
        print("\njets/s = jets / wall time of run_batch (read, cluster, part files, merge, final "
              "write);\nworkers are started and warmed up (imports, numba caches) beforehand.")
        print(f"\n{'algorithm':<14} {'workers':>7} {'jets/s':>10} {'wall s':>8}  statuses")
        for name in names:
            for w in (int(x) for x in args.workers.split(",")):
                config = BatchConfig([name], options=parse_options(args.option),
                                     chunk_size=args.chunk_size)
                executor = None
                if w > 1:
                    ctx = multiprocessing.get_context("spawn")
                    executor = cf.ProcessPoolExecutor(max_workers=w, mp_context=ctx)
                run_batch([warm], BatchConfig([name], options=parse_options(args.option),
                                              chunk_size=50),
                          output=d / "warm-out.h5", executor=executor, progress=False, fresh=True)
                out = d / f"{name}-{w}.h5"
                t = time.perf_counter()
                (s,) = run_batch([src], config, output=out, executor=executor, workers=w,
                                 progress=False)
                wall = time.perf_counter() - t
                if executor is not None:
                    executor.shutdown()
                if s.error:
                    print(f"{name:<14} {w:>7} failed: {s.error}")
                    continue
                print(f"{name:<14} {w:>7} {s.n_jets / wall:>10.0f} {wall:>8.1f}  "
                      f"{s.status_counts.get(name)}", flush=True)

if __name__ == "__main__":
    main()
