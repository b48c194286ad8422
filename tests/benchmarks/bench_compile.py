"""Benchmark: numba compile time per kernel on a cold cache, and cold / warm ``jetastar run`` wall time.

Two measurements, each in a fresh process with ``NUMBA_CACHE_DIR`` pointing to an empty folder:

1. per kernel: the main job (``jetastar run`` in one process, ``--workers 1``) with a listener on
   numba's ``numba:compile`` event — every compiled specialisation, its time including the kernels it
   compiles inside (``incl``) and without them (``self``, as wall time and as CPU time of the
   process, which a busy machine disturbs less);
2. ``jetastar run`` as a user runs it (default two workers), first with the empty cache (cold), then
   again with the cache it filled (warm): wall time of the whole command.

Usage::

    python tests/benchmarks/bench_compile.py [--skip-run] [--top 40] [--run-args "--n-qcd 10"]
        [--skip-kernels --repeat 3]
"""

from __future__ import annotations

import argparse
import os
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_PROFILE = r"""
import collections, sys, threading, time
from numba.core import event

stack = []
rows = collections.defaultdict(lambda: [0, 0.0, 0.0, 0.0])  # name -> [signatures, incl, self, self cpu]
sigs = collections.defaultdict(list)

class Listener(event.Listener):
    def on_start(self, ev):
        stack.append([ev.data["dispatcher"], time.perf_counter(), 0.0, time.process_time(), 0.0])
        fn = ev.data["dispatcher"].py_func
        sigs[f"{fn.__module__}.{fn.__qualname__}"].append(str(ev.data["args"]))

    def on_end(self, ev):
        disp, t0, child, c0, child_cpu = stack.pop()
        took = time.perf_counter() - t0
        cpu = time.process_time() - c0
        fn = disp.py_func
        row = rows[f"{fn.__module__}.{fn.__qualname__}"]
        row[0] += 1
        row[1] += took
        row[2] += took - child
        row[3] += cpu - child_cpu
        if stack:
            stack[-1][2] += took
            stack[-1][4] += cpu

event.register("numba:compile", Listener())
t0 = time.perf_counter()
from jetastar.cli import main
t_import = time.perf_counter() - t0
code = main(sys.argv[1:])
total = time.perf_counter() - t0
top = int(__import__("os").environ["BENCH_TOP"])
self_total = sum(r[2] for r in rows.values())
cpu_total = sum(r[3] for r in rows.values())
own = [r for name, r in rows.items() if name.startswith("jetastar")]
print(f"in-process run: {total:.1f} s (import {t_import:.1f} s), numba compiling: {self_total:.1f} s "
      f"wall, {cpu_total:.1f} s CPU; {len(rows)} kernels ({len(own)} of jetastar), "
      f"{sum(r[0] for r in rows.values())} specialisations ({sum(r[0] for r in own)} of jetastar)")
print(f"{'kernel':<62} {'sigs':>4} {'incl s':>7} {'self s':>7} {'self cpu':>8}")
for name, (n, incl, own_s, own_cpu) in sorted(rows.items(), key=lambda kv: -kv[1][3])[:top]:
    print(f"{name:<62} {n:>4} {incl:>7.2f} {own_s:>7.2f} {own_cpu:>8.2f}")
for name, args in sorted(sigs.items()):
    if len(args) > 1 and name.startswith("jetastar"):
        print(f"several specialisations: {name}")
        for a in args:
            print(f"    {a}")
sys.exit(code)
"""


ROOT = Path(__file__).resolve().parents[2]


#: the goals of issue 61 point 11 on a quiet 2-core machine (wall seconds)
GOALS = {"cold": 30.0, "warm": 10.0}


def _run(cmd: list[str], env: dict[str, str], cwd: str
         ) -> tuple[float, float, subprocess.CompletedProcess]:
    """Run ``cmd``; returns its wall time, its CPU time (user + sys of it and the processes it
    waited for: a run's workers) and the finished process."""
    env = {**env, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    took = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return took, cpu, proc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=40, help="kernels to list (default 40)")
    parser.add_argument("--run-args", default="", help="extra arguments of `jetastar run`")
    parser.add_argument("--skip-run", action="store_true", help="only the per-kernel table")
    parser.add_argument("--skip-kernels", action="store_true", help="only the cold / warm runs")
    parser.add_argument("--repeat", type=int, default=1,
                        help="cold / warm pairs, each with its own empty cache (default 1)")
    args = parser.parse_args()
    extra = shlex.split(args.run_args)
    with tempfile.TemporaryDirectory() as tmp:
        if not args.skip_kernels:
            env = {**os.environ, "NUMBA_CACHE_DIR": str(Path(tmp) / "cache1"), "BENCH_TOP": str(args.top),
                   "TQDM_DISABLE": "1"}
            _, _, proc = _run([sys.executable, "-c", _PROFILE, "run", "-o", str(Path(tmp) / "out1"),
                            "--workers", "1", *extra], env, tmp)
            print("\n".join(line for line in proc.stdout.splitlines()
                            if line.startswith(("in-process", "kernel", "several", "    "))
                            or line.startswith("jetastar.") or "." in line.split(" ")[0]))
            if proc.returncode:
                print(proc.stderr[-3000:], file=sys.stderr)
        if not args.skip_run:
            print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
            for k in range(args.repeat):
                env = {**os.environ, "NUMBA_CACHE_DIR": str(Path(tmp) / f"cache2-{k}"),
                       "TQDM_DISABLE": "1"}
                cmd = [sys.executable, "-m", "jetastar", "run", "-o", str(Path(tmp) / "out2"),
                       *extra]
                for label in ("cold", "warm"):
                    took, cpu, proc = _run(cmd, env, tmp)
                    note = "" if proc.returncode == 0 else f" (exit {proc.returncode})"
                    verdict = "meets" if took <= GOALS[label] else "misses"
                    print(f"jetastar run, {label} cache: {took:.1f} s wall, {cpu:.1f} CPU-s "
                          f"({verdict} the goal of {GOALS[label]:g} s){note}")
                    if proc.returncode:
                        print(proc.stderr[-3000:], file=sys.stderr)


if __name__ == "__main__":
    main()
