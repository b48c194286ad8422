"""Hierarchical correlation clustering of the ALOI samples (the paper's §6 benchmark).

For every sample size n in {11, 12, 15, 18, 20, 30, 40, 50, 60} and each of the 10 ALOI samples
(``tests/data/aloi_hcc_samples.npz``: signed affinities, cosine similarity minus its mean), the HCC
cost (:class:`jetastar.costs.HCCCost`, lower is better) of

* the exact minimum (the exact cluster trellis, O(3^n)) for n up to ``--max-exact`` (default 20),
* the exact minimum by exact A* (:func:`jetastar.clustering.astar` with the HCC heuristic ``P(S)``,
  a proof of optimality), tried at every n with ``--max-seconds`` per sample; a size is reported only
  when every sample is proven optimal,
* ``greedy``: agglomeration merging the cheapest pair first (:func:`jetastar.clustering.greedy`),
* ``average linkage``: average-linkage HAC on the affinities, scored with the cost — the baseline the
  paper and the public reference use for HCC (:func:`jetastar.clustering.average_linkage`),
* ``approx. A*``: A* on a sparse trellis seeded with the average-linkage and greedy trees (sampled
  top-K splits, exact clusters of up to 9 points, iterative rounds; :func:`jetastar.clustering.astar_approx`
  with its defaults and seed 0),

is reported as mean ± std/√10 per n, as a table (printed, and written to
``analysis/results/aloi_hcc.md`` with the raw numbers in ``aloi_hcc.json``) and a figure
(``analysis/figures/aloi/aloi_hcc.{png,pdf}``): costs vs n, the gap to the exact cost in percent,
and each method's cost relative to average linkage's in percent (per sample, then averaged).

Before each exact size the time per sample is predicted from the previous size (the trellis scores
(3^n + 1)/2 − 2^n splits); a size predicted above ``--max-seconds`` per sample (default 120) is
skipped, and so is one whose first sample takes longer; skipped sizes are listed.

Usage::

    python analysis/aloi_hcc.py                  # everything (~3.5 min on 2 cores, 5 CPU-min)
    python analysis/aloi_hcc.py --max-exact 15   # quick: exact up to 15 points (other settings
                                                 # than the defaults write into aloi_custom/)
    python analysis/aloi_hcc.py --plot-only      # redraw from analysis/results/aloi_hcc.json
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from jetastar.clustering import (
    ClusteringResult,
    astar,
    astar_approx,
    average_linkage,
    exact_trellis,
    greedy,
)
from jetastar.clustering._subsets import n_splits_total
from jetastar.costs import HCCCost

HERE = Path(__file__).resolve().parent
DATA = HERE.parent / "tests" / "data" / "aloi_hcc_samples.npz"
SIZES = (11, 12, 15, 18, 20, 30, 40, 50, 60)
N_SAMPLES = 10

#: The methods run on every sample: name -> (label, colour, marker, function of the cost model).
#: Exact methods are in EXACT_METHODS (size-limited, see ``--max-exact``).
METHODS: dict[str, tuple[str, str, str, Callable[[HCCCost], ClusteringResult]]] = {
    "greedy": ("greedy (cheapest merge)", "tab:gray", "o", greedy),
    "average_linkage": ("average linkage", "tab:blue", "s", average_linkage),
    "astar_approx": ("approx. A*", "tab:green", "P", lambda model: astar_approx(model, seed=0)),
}
EXACT_METHODS = {"exact": ("exact (trellis)", "black", "*"), "astar": ("exact A*", "tab:red", "x")}
BASELINE = "average_linkage"


def load_samples(n: int) -> list[np.ndarray]:
    """The 10 weight matrices of size ``n``."""
    with np.load(DATA) as data:
        return [np.asarray(data[f"n{n}_s{s}_weights"], dtype=np.float64) for s in range(N_SAMPLES)]


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Cluster every sample; return ``{"rows": {n: {method: {cost, time_s}}}, "skipped": ...}``."""
    rows: dict[int, dict[str, dict[str, list[float]]]] = {}
    skipped: list[str] = []
    last_exact: tuple[int, float] | None = None  # (n, seconds per sample)
    exact_ok = True
    astar_ok = True
    for n in args.sizes:
        graphs = load_samples(n)
        per: dict[str, dict[str, list[float]]] = {}
        for name, (_, _, _, fn) in METHODS.items():
            per[name] = _run_method(graphs, fn, f"n={n:2d} {name}")
        do_exact = exact_ok and n <= args.max_exact
        if do_exact and last_exact is not None:
            n0, t0 = last_exact
            predicted = t0 * n_splits_total(n) / n_splits_total(n0)
            if predicted > args.max_seconds:
                skipped.append(f"exact n={n}: predicted {predicted:.0f} s per sample "
                               f"(> {args.max_seconds:g} s)")
                do_exact = exact_ok = False
        if do_exact:
            first = exact_trellis(HCCCost(graphs[0]), progress=n >= 18)
            if first.time_s is not None and first.time_s > args.max_seconds:
                skipped.append(f"exact n={n}: first sample took {first.time_s:.0f} s")
                exact_ok = False
            else:
                rest = _run_method(graphs[1:], lambda m: exact_trellis(m, progress=False),
                                   f"n={n:2d} exact")
                per["exact"] = {
                    "cost": [first.cost, *rest["cost"]],
                    "time_s": [float(first.time_s or 0.0), *rest["time_s"]],
                }
                last_exact = (n, float(np.mean(per["exact"]["time_s"])))
        if astar_ok:
            proven = _run_exact_astar(graphs, args.max_seconds, f"n={n:2d} exact A*")
            if proven is None:
                skipped.append(f"exact A* n>={n}: not every sample proven optimal within "
                               f"{args.max_seconds:g} s and the memory budget")
                astar_ok = False
            else:
                per["astar"] = proven
        rows[n] = per
    above = [n for n in args.sizes if n > args.max_exact]
    if above:
        skipped.append(f"exact n={', '.join(map(str, above))}: above --max-exact={args.max_exact} "
                       "(the O(3^n) trellis at n = 30 needs ~80 GB and ~6·10^4 times the work of n = 20)")
    return {"rows": rows, "skipped": skipped, "sizes": list(args.sizes),
            "max_exact": args.max_exact, "max_seconds": args.max_seconds}


def _run_exact_astar(
    graphs: Sequence[np.ndarray], max_seconds: float, desc: str
) -> dict[str, list[float]] | None:
    """Exact A* on every sample; None as soon as one is not proven optimal."""
    costs, times = [], []
    for w in tqdm(graphs, desc=desc, leave=False):
        res = astar(HCCCost(w), max_time=max_seconds, progress=False)
        if not res.exact:
            return None
        costs.append(float(res.cost))
        times.append(float(res.time_s or 0.0))
    return {"cost": costs, "time_s": times}


def _run_method(
    graphs: Sequence[np.ndarray], fn: Callable[[HCCCost], ClusteringResult], desc: str
) -> dict[str, list[float]]:
    costs, times = [], []
    for w in tqdm(graphs, desc=desc, leave=False):
        res = fn(HCCCost(w))
        costs.append(float(res.cost))
        times.append(float(res.time_s or 0.0))
    return {"cost": costs, "time_s": times}


def _mean_se(values: Sequence[float]) -> tuple[float, float]:
    """Mean and std/√k (population std, as in the paper's mean ± std/√runs)."""
    a = np.asarray(values, dtype=np.float64)
    return float(a.mean()), float(a.std() / math.sqrt(len(a)))


def _percent(cost: Sequence[float], ref: Sequence[float]) -> np.ndarray:
    """Per-sample ``100 (cost − ref) / ref``."""
    r = np.asarray(ref, dtype=np.float64)
    return 100.0 * (np.asarray(cost, dtype=np.float64) - r) / r


def _exact_ref(per: dict[str, dict[str, list[float]]]) -> list[float] | None:
    """The exact costs of a size (trellis, else exact A*), or None."""
    for m in EXACT_METHODS:
        if m in per:
            return per[m]["cost"]
    return None


def _styles() -> dict[str, tuple[str, str, str]]:
    return {**EXACT_METHODS, **{k: v[:3] for k, v in METHODS.items()}}


def table(results: dict[str, Any]) -> str:
    """Markdown table: mean ± std/√10 of each method's cost per n, exact time per sample."""
    names = [*EXACT_METHODS, *METHODS]
    styles = _styles()
    head = ["n", *(styles[m][0] for m in names), "trellis s/sample", "A* s/sample",
            f"{styles[BASELINE][0]} optimal"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for n_key, per in sorted(results["rows"].items(), key=lambda kv: int(kv[0])):
        cells = [str(n_key)]
        for m in names:
            if m in per:
                mean, se = _mean_se(per[m]["cost"])
                cells.append(f"{mean:.3f} ± {se:.3f}")
            else:
                cells.append("—")
        for m in EXACT_METHODS:
            cells.append(f"{np.mean(per[m]['time_s']):.3g}" if m in per else "—")
        ref = _exact_ref(per)
        if ref is not None:
            exact = np.asarray(ref)
            base = np.asarray(per[BASELINE]["cost"])
            hit = int(np.sum(base <= exact + 1e-9 * np.maximum(1.0, np.abs(exact))))
            cells.append(f"{hit}/{len(exact)}")
        else:
            cells.append("—")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(results: dict[str, Any], fig_dir: Path) -> list[Path]:
    """Three panels: cost vs n; % above exact; % vs average linkage (per sample). PNG + PDF."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = {int(k): v for k, v in results["rows"].items()}
    sizes = sorted(rows)
    styles = _styles()
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.4))
    for name, (label, colour, marker) in styles.items():
        xs, ys, es, gx, gy, ge, bx, by, be = ([] for _ in range(9))
        for n in sizes:
            per = rows[n]
            if name not in per:
                continue
            cost = np.asarray(per[name]["cost"])
            m, e = _mean_se(cost)
            xs.append(n), ys.append(m), es.append(e)
            ref = _exact_ref(per)
            if ref is not None and name not in EXACT_METHODS:
                m, e = _mean_se(_percent(cost, ref))
                gx.append(n), gy.append(m), ge.append(e)
            if name != BASELINE:
                m, e = _mean_se(_percent(cost, per[BASELINE]["cost"]))
                bx.append(n), by.append(m), be.append(e)
        kw = {"color": colour, "marker": marker, "label": label, "capsize": 3, "lw": 1.2}
        if xs:
            axes[0].errorbar(xs, ys, yerr=es, **kw)
        if gx:
            axes[1].errorbar(gx, gy, yerr=ge, **kw)
        if bx:
            axes[2].errorbar(bx, by, yerr=be, **kw)
    axes[0].set(xlabel="number of points n", ylabel="HCC cost (mean ± std/√10)",
                title="ALOI: cost (lower is better)", yscale="log")
    axes[1].set(xlabel="number of points n", ylabel="(cost − exact) / exact  [%]",
                title="gap to the exact minimum")
    axes[1].set_yscale("symlog", linthresh=1.0)
    axes[1].axhline(0.0, color="black", lw=0.6)
    axes[2].set(xlabel="number of points n",
                ylabel=f"(cost − {styles[BASELINE][0]}) / {styles[BASELINE][0]}  [%]",
                title=f"vs {styles[BASELINE][0]} (negative = better)")
    axes[2].set_yscale("symlog", linthresh=1.0)
    axes[2].axhline(0.0, color=styles[BASELINE][1], lw=0.8)
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig_dir.mkdir(parents=True, exist_ok=True)
    out = []
    for ext in ("png", "pdf"):
        path = fig_dir / f"aloi_hcc.{ext}"
        fig.savefig(path, dpi=120)
        out.append(path)
    plt.close(fig)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--max-exact", type=int, default=20, help="largest n for the exact trellis")
    parser.add_argument("--max-seconds", type=float, default=120.0,
                        help="skip exact sizes slower than this per sample")
    parser.add_argument("--plot-only", action="store_true")
    parser.add_argument("--results", default=None,
                        help="folder of the table and raw numbers (default: analysis/results, or "
                             "analysis/results/aloi_custom for other settings than the defaults)")
    parser.add_argument("--figures", default=None,
                        help="folder of the figure (default: analysis/figures/aloi, the committed "
                             "one, or analysis/figures/aloi_custom for other settings)")
    args = parser.parse_args(argv)
    # a run with other settings (e.g. the quick --max-exact 15) keeps the committed figure and the
    # default run's numbers: it writes into folders of its own
    custom = (args.sizes, args.max_exact, args.max_seconds) != (list(SIZES), 20, 120.0)
    if args.results is None:
        args.results = str(HERE / "results" / ("aloi_custom" if custom else ""))
    if args.figures is None:
        args.figures = str(HERE / "figures" / ("aloi_custom" if custom else "aloi"))
    res_dir = Path(args.results)
    json_path = res_dir / "aloi_hcc.json"
    if args.plot_only:
        if not json_path.is_file():
            raise SystemExit(f"aloi_hcc.py --plot-only: no results at {json_path}; run the "
                             "study first (without --plot-only), or pass --results")
        results = json.loads(json_path.read_text())
    else:
        start = time.perf_counter()
        results = run(args)
        results["time_s"] = time.perf_counter() - start
        res_dir.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(results, indent=1))
    text = table(results)
    notes = [f"- skipped: {s}" for s in results["skipped"]] or ["- no exact size skipped"]
    report = (
        "# HCC on the ALOI samples\n\nmean ± std/√10 of the HCC cost over the 10 samples per n "
        f"(lower is better); last column: samples where {_styles()[BASELINE][0]} is optimal.\n\n"
        f"{text}\n\n" + "\n".join(notes) + "\n"
    )
    if not args.plot_only:
        (res_dir / "aloi_hcc.md").write_text(report)
    print(report)
    for path in plot(results, Path(args.figures)):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
