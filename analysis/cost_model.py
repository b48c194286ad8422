"""The cost model behind ``jetastar cluster``'s cost preview: measure, fit, check.

Three steps::

    python analysis/cost_model.py measure --sample real --half tune     # even Pythia entries
    python analysis/cost_model.py measure --sample ginkgo --half tune   # Ginkgo, 10-60 leaves
    python analysis/cost_model.py fit                                   # -> cost_model.json
    python analysis/cost_model.py measure --sample real --half check    # odd entries
    python analysis/cost_model.py measure --sample ginkgo --half check  # other seeds
    python analysis/cost_model.py check --time-limit 5                  # preview vs measured
    python analysis/cost_model.py run-check --time-limit 5              # vs `jetastar cluster`

The window search's defaults at 20-22 leaves changed after the first measurement (2026-12-07);
its rows of those sizes were measured again with ``measure ... --algorithms window-search
--leaves 20 22`` on each sample and half before the fit and check.

``measure`` runs every registered algorithm at its default options on each jet, one at a time in a
warm process (every algorithm ran once before the first timed jet), with a time limit of
``--max-time`` seconds (20) for those that take one, and records the CPU seconds (all threads,
``time.process_time``), the wall seconds, the status and whether the result is proven exact, with
the jet's size and shape (:func:`jetastar.clustering.cost.cost_features`), into
``analysis/results/cost_<sample>_<half>.json`` (rewritten after every jet, so an interrupted run is
usable).

* ``real``: the 300 Pythia 8 jets of ``data/pythia_jets.root`` (18-110 particles, read as
  ``jetastar cluster`` reads them: t_cut 16 GeV², λ = λ_R = 1.5); ``tune`` takes the even entries,
  ``check`` the odd ones.
* ``ginkgo``: QCD jets at t_cut 4, 1, 0.2 GeV² and W jets at 4, 1, 0.4 GeV² (the other
  parameters the defaults), ``--per-setting`` jets each of 10-60 leaves; ``tune`` on seeds 910 000+,
  ``check`` on 920 000+.

``fit`` fits, per algorithm, ``log cpu = c0 + c1 · size + c2 · shape`` by least squares on the tune
halves (size: ``log n``, or ``n`` for the exact methods whose cost grows exponentially; shape: the
fraction of leaf pairs with mass² above t_cut), with the residual spread ``sigma``, and writes the
model with its provenance. Jets stopped by the time limit enter at the limit (their true cost is
higher: the fit is low there, which matters only for jets that hit any smaller limit anyway).

``check`` predicts each sample's total CPU time per algorithm with the model (under ``--time-limit``
as a run with that limit would see it: a jet costs at most the limit) and compares it with the
measured total (each measured jet capped at the limit the same way): the goal is a ratio within
0.5-2. It also writes the real-jet table of the docs ("which algorithm when": per particle-count
band, per-jet CPU time and how often each method is exact or stopped at the limit).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
REAL_FILE = ROOT / "data" / "pythia_jets.root"
GINKGO_SETTINGS = (("qcd", 4.0), ("qcd", 1.0), ("qcd", 0.2), ("w", 4.0), ("w", 1.0), ("w", 0.4))
SEEDS = {"tune": 910_000, "check": 920_000}
#: size term of each algorithm's fit: exponential growth for the exact methods
LINEAR_SIZE = ("trellis", "astar")
BANDS = ((18, 24), (25, 34), (35, 49), (50, 69), (70, 119))


def _jets(sample: str, half: str, per_setting: int) -> Any:
    from jetastar.cli.shared import read_jets_or_particles
    from jetastar.ginkgo import ShowerParams, generate

    if sample == "real":
        jets = read_jets_or_particles(str(REAL_FILE))
        first = 0 if half == "tune" else 1
        return [jets[i] for i in range(first, len(jets), 2)], "pythia"
    out = []
    for k, (kind, t_cut) in enumerate(GINKGO_SETTINGS):
        params = (ShowerParams.qcd() if kind == "qcd" else ShowerParams.w()).replace(t_cut=t_cut)
        got = generate(per_setting, params, seed=SEEDS[half] + k, min_leaves=10, max_leaves=60)
        out.extend(got)
    return out, "ginkgo"


def measure(args: argparse.Namespace) -> None:
    from jetastar.clustering import algorithm_info, algorithms, cluster
    from jetastar.clustering.cost import cost_features
    from jetastar.ginkgo import ShowerParams, generate

    jets, label = _jets(args.sample, args.half, args.per_setting)
    names = args.algorithms or algorithms()
    n_leaves, shape = cost_features(jets)
    warm = generate(1, ShowerParams.qcd(), seed=1, min_leaves=8, max_leaves=8)[0]
    for name in names:  # compile before timing
        cluster(warm, name)
    out = RESULTS / f"cost_{args.sample}_{args.half}.json"
    rows: list[dict[str, Any]] = []
    keep: list[dict[str, Any]] = []
    if args.leaves is not None:  # measure these sizes again (after a change of defaults)
        lo, hi = args.leaves
        old = json.loads(out.read_text())
        keep = [r for r in old["rows"]
                if not (lo <= r["n"] <= hi and r["algorithm"] in names)]
    meta = {"sample": args.sample, "half": args.half, "source": label, "max_time": args.max_time,
            "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
            "date": time.strftime("%Y-%m-%d")}
    t0 = time.perf_counter()
    for i, jet in enumerate(jets):
        if args.leaves is not None and not args.leaves[0] <= n_leaves[i] <= args.leaves[1]:
            continue
        for name in names:
            info = algorithm_info(name)
            if info.exact and info.max_leaves is not None and n_leaves[i] > info.max_leaves:
                continue
            opts = {} if info.time_option is None else {info.time_option: args.max_time}
            if "progress" in info.options():
                opts["progress"] = False
            c0, w0 = time.process_time(), time.perf_counter()
            r = cluster(jet, name, **opts)
            rows.append({"jet": i, "n": int(n_leaves[i]), "shape": float(shape[i]),
                         "algorithm": name, "cpu_s": time.process_time() - c0,
                         "wall_s": time.perf_counter() - w0, "status": r.status,
                         "exact": bool(r.exact), "finite": bool(np.isfinite(r.log_likelihood))})
        tmp = out.with_suffix(".tmp")
        tmp.write_text(json.dumps({"meta": meta, "n_jets": len(jets), "done": i + 1,
                                   "rows": keep + rows}))
        os.replace(tmp, out)
        print(f"{args.sample}/{args.half}: jet {i + 1}/{len(jets)} ({n_leaves[i]} leaves) "
              f"[{time.perf_counter() - t0:.0f} s]", flush=True)


def run_check(args: argparse.Namespace) -> None:
    """A real run against its preview: the check halves written as jet files and clustered by
    ``jetastar cluster`` in a fresh process (kernels loaded from the cache), its CPU time
    (``RUSAGE_CHILDREN``) against the preview that run prints. The start-up (imports, loading the
    kernels, reading and writing) is measured by the same run with ``greedy`` alone and taken
    off; both figures are reported."""
    import resource
    import subprocess
    import sys
    import tempfile

    from jetastar import JetCollection, io
    from jetastar.batch import BatchConfig, preview_inputs

    names = args.algorithms
    lines = [f"# `jetastar cluster` runs against their cost preview ({', '.join(names)}, "
             f"--time-limit {args.time_limit:g}; the check halves, never fitted)", "",
             "| sample | jets | predicted CPU-s | run CPU-s | start-up CPU-s (greedy alone) | "
             "ratio predicted / (run − start-up) |", "|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        for sample in ("real", "ginkgo"):
            jets, _ = _jets(sample, "check", args.per_setting)
            path = Path(tmp) / f"{sample}.h5"
            io.write(path, JetCollection.from_jets(jets))
            config = BatchConfig(names, time_limit=args.time_limit)
            predicted = preview_inputs([path], config).cpu_seconds()
            cpu = {}
            for label, algs in (("startup", ["greedy"]), ("run", names)):
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                cmd = [sys.executable, "-m", "jetastar", "cluster", str(path), "--algorithms",
                       ",".join(algs), "--time-limit", str(args.time_limit), "--no-progress",
                       "--fresh", "-o", str(Path(tmp) / f"{sample}.{label}.h5")]
                subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu[label] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            ratio = predicted / max(cpu["run"] - cpu["startup"], 1e-9)
            lines.append(f"| {sample} | {len(jets)} | {predicted:.1f} | {cpu['run']:.1f} | "
                         f"{cpu['startup']:.1f} | {ratio:.2f} |")
            print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    (RESULTS / "cost_run_check.md").write_text(text)
    print(text)


def _load(sample: str, half: str) -> dict[str, Any]:
    return json.loads((RESULTS / f"cost_{sample}_{half}.json").read_text())


def fit(args: argparse.Namespace) -> None:
    import jetastar
    from jetastar.clustering.cost import COST_MODEL_FILE

    rows = [r for sample in ("real", "ginkgo") if (RESULTS / f"cost_{sample}_tune.json").exists()
            for r in _load(sample, "tune")["rows"]]
    model: dict[str, Any] = {}
    for name in sorted({r["algorithm"] for r in rows}):
        sel = [r for r in rows if r["algorithm"] == name]
        n = np.array([r["n"] for r in sel], dtype=float)
        shape = np.array([r["shape"] for r in sel])
        cpu = np.maximum(np.array([r["cpu_s"] for r in sel]), 1e-6)
        size_kind = "linear" if name in LINEAR_SIZE else "log"
        size = n if size_kind == "linear" else np.log(n)
        x = np.column_stack([np.ones_like(n), size, shape])
        coef, *_ = np.linalg.lstsq(x, np.log(cpu), rcond=None)
        resid = np.log(cpu) - x @ coef
        sigma = float(np.sqrt(np.sum(resid ** 2) / max(len(sel) - 3, 1)))
        model[name] = {"size": size_kind, "coef": [float(c) for c in coef], "sigma": sigma,
                       "jets": len(sel), "leaves": [int(n.min()), int(n.max())],
                       "stopped_at_limit": sum(r["status"] == "budget" for r in sel)}
        print(f"{name:14s} {size_kind:6s} coef {np.round(coef, 3)} sigma {sigma:.2f} "
              f"({len(sel)} jets)")
    meta = _load("real", "tune")["meta"]
    out = {"schema": 1, "algorithms": model, "provenance": {
        "jetastar": jetastar.__version__, "script": "analysis/cost_model.py fit",
        "samples": "data/pythia_jets.root even entries; Ginkgo QCD t_cut 4/1/0.2 and W "
                   "4/1/0.4 GeV², 10-60 leaves, seeds 910000+",
        "options": "defaults", "max_time": meta["max_time"], "machine": meta["machine"],
        "date": meta["date"]}}
    tmp = COST_MODEL_FILE.with_suffix(".tmp")
    tmp.write_text(json.dumps(out, indent=1) + "\n")
    os.replace(tmp, COST_MODEL_FILE)
    print(f"wrote {COST_MODEL_FILE}")


def _band(n: int) -> str:
    for lo, hi in BANDS:
        if lo <= n <= hi:
            return f"{lo}-{hi}"
    return "other"


def check(args: argparse.Namespace) -> None:
    from jetastar.clustering import algorithm_info
    from jetastar.clustering.cost import predicted_cpu

    limit = args.time_limit
    lines = [f"# Cost preview against measured CPU time (time limit {limit:g} s; the check halves, "
             "never fitted)", "",
             "| sample | algorithm | jets run | predicted CPU-s | measured CPU-s | ratio | "
             "predicted at limit | measured at limit |", "|---|---|---|---|---|---|---|---|"]
    worst = 1.0
    for sample in ("real", "ginkgo"):
        data = _load(sample, "check")
        rows = data["rows"]
        for name in sorted({r["algorithm"] for r in rows}):
            sel = [r for r in rows if r["algorithm"] == name]
            n = np.array([r["n"] for r in sel])
            shape = np.array([r["shape"] for r in sel])
            info = algorithm_info(name)
            cap = limit if info.time_option is not None else None
            cost = predicted_cpu(name, n, shape, {}, time_limit=cap)
            cpu = np.array([r["cpu_s"] for r in sel])
            measured = float(np.sum(np.minimum(cpu, cap) if cap else cpu))
            hit = int(np.sum(cpu > cap)) if cap else 0
            ratio = cost.total / measured if measured > 0 else float("nan")
            if measured > 1.0:  # (sub-second totals: timer noise and fixed costs)
                worst = max(worst, ratio, 1 / ratio)
            lines.append(f"| {sample} | {name} | {cost.n_run} | {cost.total:.2f} | "
                         f"{measured:.2f} | {ratio:.2f} | {cost.over_limit:.0f} | {hit} |")
    lines += ["", f"worst ratio over runs of more than 1 CPU-s: {worst:.2f} (goal <= 2)"]
    lines += ["", *_real_table(limit)]
    text = "\n".join(lines) + "\n"
    (RESULTS / "cost_check.md").write_text(text)
    print(text)


def _real_table(limit: float) -> list[str]:
    """Which algorithm when, on real jets: both halves of the Pythia sample."""
    from jetastar.clustering import algorithm_info

    rows = _load("real", "tune")["rows"] + _load("real", "check")["rows"]
    names = sorted({r["algorithm"] for r in rows})
    out = [f"## Real jets (300 Pythia 8 jets, time limit {limit:g} s): median CPU-s per jet; "
           "% exact (proven); % stopped at the limit", "",
           "| particles | jets | " + " | ".join(names) + " |", "|---|---|" + "---|" * len(names)]
    for lo, hi in BANDS:
        band_rows = [r for r in rows if lo <= r["n"] <= hi]
        jets = len({(r["jet"], r["n"], r["shape"]) for r in band_rows})
        cells = []
        for name in names:
            sel = [r for r in band_rows if r["algorithm"] == name]
            if not sel:
                cells.append("—")
                continue
            cpu = np.array([min(r["cpu_s"], limit) for r in sel])
            # (CPU, not wall: the measurement shared the cores with other work)
            stopped = np.array([r["cpu_s"] > limit or r["status"] == "budget" for r in sel])
            exact = np.array([r["exact"] for r in sel]) & ~stopped
            cell = f"{np.median(cpu):.2g} s"
            if exact.any() or algorithm_info(name).exact:
                cell += f"; {100 * exact.mean():.0f} % exact"
            if stopped.any():
                cell += f"; {100 * stopped.mean():.0f} % stopped"
            cells.append(cell)
        out.append(f"| {lo}–{hi} | {jets} | " + " | ".join(cells) + " |")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="step", required=True)
    m = sub.add_parser("measure")
    m.add_argument("--sample", choices=("real", "ginkgo"), required=True)
    m.add_argument("--half", choices=("tune", "check"), required=True)
    m.add_argument("--per-setting", type=int, default=12)
    m.add_argument("--max-time", type=float, default=20.0)
    m.add_argument("--algorithms", nargs="+", default=None)
    m.add_argument("--leaves", type=int, nargs=2, default=None, metavar=("LO", "HI"),
                   help="measure only the jets of LO-HI leaves again, keeping the other rows "
                        "of the results file")
    sub.add_parser("fit")
    c = sub.add_parser("check")
    c.add_argument("--time-limit", type=float, default=5.0)
    r = sub.add_parser("run-check")
    r.add_argument("--time-limit", type=float, default=5.0)
    r.add_argument("--per-setting", type=int, default=12)
    r.add_argument("--algorithms", nargs="+",
                   default=["greedy", "beam", "window-search", "trellis"])
    args = parser.parse_args(argv)
    RESULTS.mkdir(parents=True, exist_ok=True)
    {"measure": measure, "fit": fit, "check": check, "run-check": run_check}[args.step](args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
