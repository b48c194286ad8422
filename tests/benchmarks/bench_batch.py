"""Benchmark: batch clustering throughput (jets/s) with 1 and 2 worker processes.

Generates a file of QCD jets (default 10 000, reference parameters), then runs
:func:`jetastar.batch.run_batch` once per algorithm and worker count, and prints jets/s (wall time of
the whole run: reading, clustering, part files, merge and the final write; worker start-up included).
Also reports HDF5/ROOT write and read speeds of the file.

Usage::

    python tests/benchmarks/bench_batch.py [--n 10000] [--algorithms greedy,beam,astar-approx]

``--pipeline`` measures the whole command instead, as a user runs it: ``jetastar cluster`` of
``--n`` default QCD jets (made once with ``jetastar generate`` into ``--dir``) with greedy, kt,
cambridge and antikt, ROOT in -> ROOT out, once per worker count; it reports jets/s end to end,
the CPU time of the run (the command and its pool workers), the main process's peak RSS, the
largest size the part folder reached and the output's size::

    python tests/benchmarks/bench_batch.py --pipeline --n 100000,1000000 --dir /tmp/bench
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import multiprocessing
import tempfile
import time
from pathlib import Path

_PIPELINE_ALGORITHMS = "greedy,kt,cambridge,antikt"


def _tree_size(path: Path) -> int:
    total = 0
    try:
        for p in path.iterdir():
            try:
                total += p.stat().st_size
            except OSError:
                pass
    except OSError:
        pass
    return total


def _vm_hwm_kb(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _run_measured(cmd: list[str], parts: Path) -> dict:
    """Run ``cmd``; wall and CPU seconds (its own and its children's), the main process's peak
    RSS (``VmHWM``, polled) and the largest size of ``parts``."""
    import os
    import resource
    import subprocess

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    hwm, biggest = 0, 0
    while proc.poll() is None:
        hwm = max(hwm, _vm_hwm_kb(proc.pid) or 0)
        biggest = max(biggest, _tree_size(parts))
        time.sleep(0.05)
    wall = time.perf_counter() - t
    out = proc.stdout.read() if proc.stdout else ""
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"rc": proc.returncode, "wall": wall, "cpu": cpu, "rss_mb": hwm / 1024,
            "parts_mb": biggest / 1e6, "output": out, "load": os.getloadavg()[0]}


def pipeline(sizes: list[int], workers: list[int], folder: Path, profile: bool) -> None:
    """``jetastar cluster`` end to end (see the module docstring)."""
    import os
    import subprocess
    import sys

    folder.mkdir(parents=True, exist_ok=True)
    print(f"{os.cpu_count()} cores; load average before: {os.getloadavg()}")
    print(f"{'jets':>8} {'workers':>7} {'jets/s':>9} {'wall s':>7} {'cpu s':>7} {'cpu/wall':>8} "
          f"{'RSS MB':>7} {'parts MB':>8} {'out MB':>7} {'load':>5}")
    for n in sizes:
        inp = folder / f"qcd-{n}.root"
        if not inp.exists():
            t = time.perf_counter()
            subprocess.run([sys.executable, "-m", "jetastar", "generate", "--n", str(n), "-o",
                            str(inp)], check=True, capture_output=True)
            print(f"generated {inp} in {time.perf_counter() - t:.1f} s")
        for w in workers:
            out = folder / f"out-{n}-{w}.root"
            cmd = [sys.executable, "-m", "jetastar", "cluster", str(inp), "--algorithms",
                   _PIPELINE_ALGORITHMS, "-o", str(out), "--workers", str(w), "--no-progress",
                   "--fresh"]
            if profile and w == 1:
                prof = folder / f"profile-{n}.out"
                cmd[1:1] = ["-m", "cProfile", "-o", str(prof)]
            r = _run_measured(cmd, out.with_name(out.name + ".parts"))
            if r["rc"]:
                print(f"{n:>8} {w:>7} failed (rc {r['rc']}):\n{r['output']}")
                continue
            size = out.stat().st_size / 1e6
            print(f"{n:>8} {w:>7} {n / r['wall']:>9.0f} {r['wall']:>7.1f} {r['cpu']:>7.1f} "
                  f"{r['cpu'] / r['wall']:>8.2f} {r['rss_mb']:>7.0f} {r['parts_mb']:>8.1f} "
                  f"{size:>7.1f} {r['load']:>5.2f}", flush=True)
            out.unlink()
    if profile:
        import pstats

        for n in sizes:
            prof = folder / f"profile-{n}.out"
            if prof.exists():
                print(f"\nmain process, {n} jets, 1 worker (cProfile; cumulative):")
                pstats.Stats(str(prof)).sort_stats("cumulative").print_stats(
                    r"jetastar/(batch|io)/.*\((merge_parts|_merge_streaming|_process_chunks|"
                    r"cluster_collection|add_jets|add_results|chunk|digest|write_part|read_part|"
                    r"print_summaries|warm_up_for)\)")


def main() -> None:
    from jetastar import io
    from jetastar.batch import BatchConfig, run_batch
    from jetastar.clustering import algorithms
    from jetastar.ginkgo import ShowerParams, generate

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", default="10000", help="jets (--pipeline: a comma-separated list)")
    parser.add_argument("--algorithms", default="greedy,beam,astar-approx")
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--chunk-size", type=int, default=200)
    parser.add_argument("--option", action="append", default=[])
    parser.add_argument("--pipeline", action="store_true",
                        help="jetastar cluster end to end, ROOT in and out (see above)")
    parser.add_argument("--dir", default=None, help="--pipeline: folder for inputs and outputs")
    parser.add_argument("--profile", action="store_true",
                        help="--pipeline: profile the main process of the 1-worker runs")
    args, _ = parser.parse_known_args()
    if args.pipeline:
        sizes = [int(x) for x in str(args.n).split(",")]
        folder = Path(args.dir) if args.dir else Path(tempfile.mkdtemp())
        pipeline(sizes, [int(x) for x in args.workers.split(",")], folder, args.profile)
        return
    parser.set_defaults()
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
        jets = generate(int(args.n), ShowerParams.qcd(), seed=1)
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
