"""Calibration of the fits of λ by pseudo-experiments (``jetastar.inference``).

For each true ``λ`` (QCD jets, ``λ_R = λ``: the QCD model has one rate), ``--experiments``
pseudo-experiments of ``--jets`` jets each are generated on fresh seeds and ``λ`` is fitted with
four estimators:

* ``density``: the sum over trees of the density form (the default of :func:`jetastar.inference.fit`);
* ``ginkgo``: the sum over trees of Ginkgo's split term (``likelihood="symmetric"``), the marginal
  likelihood of the trellis papers;
* ``truth``: the truth tree's log-likelihood (density form), the oracle;
* ``map``: the MAP tree's log-likelihood at each point (density form), what one gets from trees
  instead of the posterior.

``λ_R`` is each jet's own (the true value) in every fit. Per estimator and true value the script
reports the mean estimate, the bias in units of the spread (mean of ``estimate − true`` over the
standard deviation of the estimates), the mean pull (``(estimate − true) / σ`` with ``σ`` half the
68 % interval) and the coverage of the 68 % and 95 % profile-likelihood intervals (with its binomial
standard error), into ``analysis/results/calibration.json`` and a markdown table
``analysis/results/calibration.md``, and draws the pulls (``analysis/figures/calibration/``).

``--jet-type w --max-leaves 14`` calibrates the fit of ``λ_R`` (the W jet's first split; ``λ`` is
the jets' own, 1.5) on W jets selected at ``n_leaves <= 14``, with the selection declared to the
fit (its ``P(selection | θ)`` estimated by the generator): the ``--true`` values are then ``λ_R``.

Seeds: pseudo-experiment ``k`` of true value ``λ`` uses ``--seed + 1000 * round(10 λ) + k``; the
fit's settings (grids, levels) were chosen on other seeds (the tests' and ``--seed 1``), so the
default ``--seed 5000000`` reports on jets they never saw.

Usage::

    python analysis/calibration.py                       # 3 values x 50 experiments x 500 jets
    python analysis/calibration.py --quick               # 3 x 4 x 200: a few minutes
    python analysis/calibration.py --estimators density ginkgo

The ``ginkgo`` and ``map`` fits cost 40-60 s of wall time each per experiment of 500 jets on 2
cores (they scan point by point; the density form's one-pass scan takes about 4 s, the truth fit
0.1 s); their biases are many spreads wide, so fewer experiments show them. Experiment ``k`` runs at
every true value before experiment ``k + 1``, and the results so far are written after each, so a
run stopped early is usable (``"complete": false`` in the JSON). The documented tables came from::

    python analysis/calibration.py --estimators density truth
    python analysis/calibration.py --estimators ginkgo map --experiments 20 --tag calibration_biased
    python analysis/calibration.py --estimators ginkgo map --experiments 50 --tag calibration_biased \
        --resume
    python analysis/calibration.py --jet-type w --max-leaves 14 --true 3 --experiments 20 \
        --jets 300 --estimators density --tag calibration_w_selected
    python analysis/calibration.py --jet-type w --max-leaves 14 --true 3 --experiments 20 \
        --jets 300 --estimators truth --tag calibration_w_truth
    python analysis/calibration.py --jet-type w --max-leaves 14 --true 3 --experiments 30 \
        --jets 300 --estimators density truth --seed 5100000 --tag calibration_w_more
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from jetastar.ginkgo import ShowerParams, generate
from jetastar.inference import fit

HERE = Path(__file__).resolve().parent

ESTIMATORS = {
    "density": {"likelihood": "density", "estimator": "marginal"},
    "ginkgo": {"likelihood": "symmetric", "estimator": "marginal"},
    "truth": {"likelihood": "density", "estimator": "truth"},
    "map": {"likelihood": "density", "estimator": "map"},
}


def _summary(true: float, rows: list[dict[str, Any]]) -> dict[str, Any]:
    est = np.array([r["value"] for r in rows])
    lo68 = np.array([np.nan if r["lo68"] is None else r["lo68"] for r in rows])
    hi68 = np.array([np.nan if r["hi68"] is None else r["hi68"] for r in rows])
    lo95 = np.array([np.nan if r["lo95"] is None else r["lo95"] for r in rows])
    hi95 = np.array([np.nan if r["hi95"] is None else r["hi95"] for r in rows])
    n = est.size
    spread = float(np.std(est, ddof=1)) if n > 1 else math.nan
    sigma = (hi68 - lo68) / 2.0
    cover68 = float(np.mean((lo68 <= true) & (true <= hi68)))
    cover95 = float(np.mean((lo95 <= true) & (true <= hi95)))
    return {
        "true": true, "experiments": n, "mean": float(np.mean(est)), "spread": spread,
        "bias_over_spread": float((np.mean(est) - true) / spread) if spread > 0 else math.nan,
        "bias_error": 1.0 / math.sqrt(n),
        "mean_sigma": float(np.nanmean(sigma)),
        "mean_pull": float(np.nanmean((est - true) / sigma)),
        "pull_std": float(np.nanstd((est - true) / sigma, ddof=1)) if n > 1 else math.nan,
        "coverage68": cover68, "coverage68_error": math.sqrt(0.68 * 0.32 / n),
        "coverage95": cover95, "coverage95_error": math.sqrt(0.95 * 0.05 / n),
        "open_intervals": int(np.sum(np.isnan(lo95) | np.isnan(hi95))),
        "cpu_s": float(np.sum([r["cpu_s"] for r in rows])),
    }


def _table(summaries: dict[str, list[dict[str, Any]]], rate: str = "λ") -> str:
    lines = [f"| estimator | true {rate} | mean estimate | spread | bias / spread | mean pull | pull std | "
             "68 % coverage | 95 % coverage |", "|---|---|---|---|---|---|---|---|---|"]
    for name, rows in summaries.items():
        for s in rows:
            lines.append(
                f"| {name} | {s['true']:g} | {s['mean']:.3f} | {s['spread']:.3f} | "
                f"{s['bias_over_spread']:+.2f} ± {s['bias_error']:.2f} | {s['mean_pull']:+.2f} | "
                f"{s['pull_std']:.2f} | {100 * s['coverage68']:.0f} ± "
                f"{100 * s['coverage68_error']:.0f} % | {100 * s['coverage95']:.0f} ± "
                f"{100 * s['coverage95_error']:.0f} % |")
    return "\n".join(lines)


def _plot(summaries: dict[str, list[dict[str, Any]]], pulls: dict[str, dict[float, list[float]]],
          figures: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figures.mkdir(parents=True, exist_ok=True)
    names = list(pulls)
    fig, axes = plt.subplots(1, len(names), figsize=(3.6 * len(names), 3.2), sharey=True,
                             squeeze=False)
    edges = np.linspace(-6, 6, 25)
    for ax, name in zip(axes[0], names, strict=True):
        for true, values in pulls[name].items():
            ax.hist(np.clip(values, -6, 6), bins=edges, histtype="step", label=f"λ = {true:g}")
        x = np.linspace(-6, 6, 200)
        n = max(len(v) for v in pulls[name].values())
        ax.plot(x, n * (edges[1] - edges[0]) * np.exp(-x * x / 2) / math.sqrt(2 * math.pi),
                color="black", lw=1, ls="--", label="N(0, 1)")
        ax.set_title(name)
        ax.set_xlabel("(λ̂ − λ) / σ")
    axes[0][0].set_ylabel("pseudo-experiments")
    axes[0][-1].legend(fontsize=7, frameon=False)
    fig.tight_layout()
    for ext in ("png", "pdf"):
        fig.savefig(figures / f"pulls.{ext}", dpi=130)
    plt.close(fig)


def _write(args: argparse.Namespace, rows: dict[str, dict[float, list[dict[str, Any]]]],
           results: Path, stem: str, figures: Path, wall_s: float, final: bool) -> None:
    """The results so far: JSON and the markdown table (and, when ``final``, the pull plots)."""
    summaries = {name: [_summary(t, rows[name][t]) for t in args.true] for name in args.estimators}
    table = _table(summaries, "λ_R" if args.jet_type == "w" else "λ")
    out = {"settings": vars(args), "summaries": summaries, "complete": final,
           "experiments": {n: {str(t): v for t, v in rows[n].items()} for n in rows},
           "wall_s": wall_s}
    (results / f"{stem}.json").write_text(json.dumps(out, indent=1, default=float))
    (results / f"{stem}.md").write_text(table + "\n")
    if final:
        pulls = {name: {t: [(r["value"] - t) / ((r["hi68"] - r["lo68"]) / 2.0)
                            for r in rows[name][t]
                            if r["lo68"] is not None and r["hi68"] is not None]
                        for t in args.true} for name in args.estimators}
        _plot(summaries, pulls, figures)
        print(table)
        print(f"results: {results / (stem + '.json')}; figures: {figures}")


def _resumed(args: argparse.Namespace, path: Path,
             rows: dict[str, dict[float, list[dict[str, Any]]]]
             ) -> dict[str, dict[float, list[dict[str, Any]]]]:
    """The experiments of an earlier run with the same settings (``--resume``)."""
    if not path.exists():
        return rows
    old = json.loads(path.read_text())
    keys = ("true", "jets", "estimators", "seed", "jet_type", "max_leaves")
    mismatch = [k for k in keys if old["settings"].get(k) != vars(args)[k]]
    if mismatch:
        raise SystemExit(f"--resume: {path} was written with other settings ({', '.join(mismatch)})")
    for name in args.estimators:
        for true in args.true:
            done = old["experiments"].get(name, {}).get(str(true), [])
            # experiment k of value true used seed + 1000 * round(10 * true) + k: keep them in order
            base = args.seed + 1000 * round(10 * true)
            done = sorted(done, key=lambda r: r["seed"])
            if [r["seed"] - base for r in done] != list(range(len(done))):
                raise SystemExit(f"--resume: {path} has gaps in the seeds of {name} at {true:g}")
            rows[name][true] = done
    print(f"resumed {min(len(v) for r in rows.values() for v in r.values())} experiments "
          f"from {path}")
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--true", type=float, nargs="+", default=[1.0, 1.5, 2.1])
    parser.add_argument("--experiments", type=int, default=50)
    parser.add_argument("--jets", type=int, default=500)
    parser.add_argument("--estimators", nargs="+", default=list(ESTIMATORS),
                        choices=list(ESTIMATORS))
    parser.add_argument("--seed", type=int, default=5_000_000)
    parser.add_argument("--quick", action="store_true", help="4 experiments of 200 jets")
    parser.add_argument("--out", default=None, help="results folder (default analysis/results)")
    parser.add_argument("--jet-type", choices=("qcd", "w"), default="qcd",
                        help="qcd: fit λ (λ_R = λ); w: fit λ_R (λ the default 1.5)")
    parser.add_argument("--max-leaves", type=int, default=None,
                        help="select the jets at n_leaves <= this and declare it to the fit")
    parser.add_argument("--tag", default=None,
                        help="name of the outputs (default calibration, calibration_quick)")
    parser.add_argument("--resume", action="store_true",
                        help="keep the experiments already in the output JSON (same settings) and "
                             "run only the missing ones")
    args = parser.parse_args(argv)
    if args.quick:
        args.experiments, args.jets = 4, 200
    stem = args.tag or ("calibration_quick" if args.quick else "calibration")
    results = Path(args.out) if args.out else HERE / "results"
    figures = HERE / "figures" / stem
    results.mkdir(parents=True, exist_ok=True)
    rows: dict[str, dict[float, list[dict[str, Any]]]] = {e: {} for e in args.estimators}
    if args.resume:
        rows = _resumed(args, results / f"{stem}.json", rows)
    t0 = time.perf_counter()
    # experiment k of every true value before experiment k + 1 of any: a run stopped early has
    # as many experiments at each value, and its results so far are on disk
    for k in range(args.experiments):
        if all(len(rows[n].get(t, [])) > k for n in args.estimators for t in args.true):
            continue  # resumed: experiment k is on disk at every value
        for true in args.true:
            seed = args.seed + 1000 * round(10 * true) + k
            if args.jet_type == "w":
                params, free = ShowerParams.w().replace(lam_root=true), "lam_root"
            else:
                params, free = ShowerParams.qcd(lam=true, lam_root=true), "lam"
            jets = generate(args.jets, params, seed=seed, max_leaves=args.max_leaves)
            selection = None if args.max_leaves is None else (1, args.max_leaves)
            for name in args.estimators:
                r = fit(jets, free=(free,), selection=selection, progress=False,
                        **ESTIMATORS[name])
                lo68, hi68 = r.interval(free, 0.68)
                lo95, hi95 = r.interval(free, 0.95)
                rows[name].setdefault(true, []).append({
                    "seed": seed, "value": r.values[free], "lo68": lo68, "hi68": hi68,
                    "lo95": lo95, "hi95": hi95, "cpu_s": r.cpu_s, "n_used": r.n_used})
            done = [f"{n} {rows[n][true][-1]['value']:.3f}" for n in args.estimators]
            print(f"λ = {true:g}, experiment {k + 1}/{args.experiments} (seed {seed}): "
                  f"{', '.join(done)}  [{time.perf_counter() - t0:.0f} s]", flush=True)
        if k >= 1:
            _write(args, rows, results, stem, figures, time.perf_counter() - t0,
                   final=k + 1 == args.experiments)
    if args.experiments < 2:
        print("(one experiment per value: no spread, nothing written)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
