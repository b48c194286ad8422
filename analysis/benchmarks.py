"""All of jetastar's speed figures in one place.

Runs every benchmark script in ``tests/benchmarks/`` (generator and likelihood kernel, trellis, A*,
baselines, batch processing) one after the other and gathers what they print into one report,
``analysis/results/benchmarks.md``, headed by the machine it ran on.

Usage::

    python analysis/benchmarks.py                  # everything (see analysis/README.md for the time)
    python analysis/benchmarks.py --only foundation trellis
    python analysis/benchmarks.py --quick          # the quick variant of each script, where it has one

Each script can also be run alone; see its own docstring for options.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH_DIR = ROOT / "tests" / "benchmarks"

#: the exit status of a script with nothing to measure on this machine (bench_gpu without a GPU)
SKIPPED = 77

#: the arguments of the scripts whose command has parts (a subcommand): the part in the report
ARGS = {
    "astar": ["exact"],
    "exact_map": ["speed"],
    "window_search": ["small"],
    "window_fresh": ["tiny"],
}

#: arguments of each script for ``--quick`` (instead of those of :data:`ARGS`)
QUICK_ARGS = {
    "trellis": ["--sizes", "10", "12", "14", "16"],
    "baselines": ["--sizes", "10", "20", "50"],
    "batch": ["--n", "2000"],
    "astar": ["exact", "--sizes", "10-12", "--jets", "2"],
    "exact_map": ["speed", "--sizes", "14", "16", "--jets", "2"],
    "window_search": ["small", "--sizes", "14", "--jets", "3"],
    "window_fresh": ["tiny", "--sizes", "6", "9", "12", "--jets", "2"],
    "compile": ["--skip-run"],
    "kill": ["--n", "5000", "--trials", "2"],
    "kt": ["--repeat", "1"],
    "observables": ["--jets", "2000"],
    "particles": ["--n", "10000"],
    "threads": ["--jets", "20"],
    "columnar": ["--jets", "500", "--repeat", "1"],
}


def _machine() -> str:
    import numba
    import numpy as np

    import jetastar

    return (
        f"{platform.node()} · {os.cpu_count()} cores · Python {platform.python_version()} · "
        f"numpy {np.__version__} · numba {numba.__version__} · jetastar {jetastar.__version__} · "
        f"{dt.datetime.now(dt.timezone.utc).isoformat(timespec='minutes')}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    scripts = sorted(p.stem.removeprefix("bench_") for p in BENCH_DIR.glob("bench_*.py"))
    parser.add_argument("--only", nargs="+", choices=scripts, default=scripts)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", default=str(ROOT / "analysis" / "results" / "benchmarks.md"))
    args = parser.parse_args(argv)
    report = [f"# jetastar benchmarks\n\n{_machine()}\n"]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    failed = []
    for name in args.only:
        cmd = [sys.executable, str(BENCH_DIR / f"bench_{name}.py")]
        cmd += QUICK_ARGS.get(name, ARGS.get(name, [])) if args.quick else ARGS.get(name, [])
        print(f"== {name}: {' '.join(cmd[1:])}", flush=True)
        start = time.perf_counter()
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        took = time.perf_counter() - start
        print(proc.stdout, flush=True)
        status = ("ok" if proc.returncode == 0 else
                  "skipped: nothing to measure here" if proc.returncode == SKIPPED else
                  f"FAILED (exit {proc.returncode})")
        report.append(f"## {name} ({took:.0f} s, {status})\n\n```\n{proc.stdout.rstrip()}\n```\n")
        if proc.returncode not in (0, SKIPPED):
            failed.append(name)
            print(proc.stderr[-3000:], file=sys.stderr)
            report.append(f"stderr:\n```\n{proc.stderr[-3000:]}\n```\n")
        out.write_text("\n".join(report))  # (after every script: a stopped run keeps its tables)
    print(f"report: {out}")
    if failed:
        print(f"FAILED: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
