"""Reproduce the jet-physics study of the A* paper (§5) with jetastar's engines.

For every leaf count N, QCD jets (``--jet-type w``: W jets; ``both``: both studies) with exactly N leaves
are generated (t_cut lowered for large N, recorded in the output), clustered with every method at the
paper's settings, written to HDF5 with the I/O layer, and summarised in four figures (PNG + PDF):

1. ``cost_vs_greedy``: log-likelihood of each method minus greedy vs N (mean ± standard error);
2. ``time``: wall time per jet vs N (log scale);
3. ``explored``: splits evaluated by the trellis, exact and approximate A*, divided by 3^N;
4. ``exact_fraction``: fraction of jets where each method finds the exact MAP (where it is known).

Usage::

    python analysis/paper_jets.py                 # the full study (see analysis/README.md for times)
    python analysis/paper_jets.py --quick         # a few minutes: small sizes, few jets (own
                                                  # folders paper_jets_quick, figures untouched)
    python analysis/paper_jets.py --plot-only     # redraw the figures from an earlier run's results
    python analysis/paper_jets.py --jet-type w    # the same study on W jets (own results and figures)

Settings: beam size N(N−1)/2 up to 40 leaves, 1000 above; approximate A* seeded with the
whole beam, top-K sampling and iterative rounds (its defaults); the window search with its defaults
(seed 0; windows of 14 parts re-solved exactly with the exact MAP engine); exact methods only up to
their size limits (``--max-trellis``, ``--max-astar``) and with per-jet time budgets
(``--trellis-time`` for the exact MAP engine behind ``trellis``, ``--astar-time`` for exact A*): a jet
over budget keeps its best tree, marked not exact, and the figures count a size as solved only when
every jet of it was.

Where this departs from the paper: the likelihood is the symmetric form unless ``--likelihood
legacy`` (the paper's; its results and figures go into folders ending in ``_legacy``); exact A*
uses the admissible ``h0`` (the paper's ``h1`` is not admissible, so its A* is not exact: see
``docs/heuristics.md``); MCTS is jetastar's likelihood-prior variant with its defaults (20 rollouts,
beam 5), where the paper used a trained neural policy with beam 100 and 200 rollouts (on 10 QCD jets
of 16 leaves those settings moved MCTS's mean gain over greedy from +2.15 to +2.19, against +2.48 for
beam search and +2.64 for the exact MAP).
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
from tqdm import tqdm

from jetastar import JetCollection, io
from jetastar.clustering import algorithm_info, algorithms, cluster
from jetastar.ginkgo import ShowerParams, generate

HERE = Path(__file__).resolve().parent

#: t_cut (GeV²) used to reach a leaf count: the default 16 GeV² up to 11 leaves, then smaller.
T_CUT_BANDS = ((11, 16.0), (24, 1.0), (39, 0.25), (69, 0.09), (10_000, 0.0125))

METHOD_STYLE = {
    "greedy": ("greedy", "tab:gray", "o"),
    "beam": ("beam search", "tab:blue", "s"),
    "kt": ("kt", "tab:olive", "v"),
    "cambridge": ("Cambridge-Aachen", "tab:pink", "<"),
    "antikt": ("anti-kt", "tab:brown", ">"),
    "mcts": ("MCTS", "tab:purple", "D"),
    "trellis": ("exact MAP (trellis)", "black", "*"),
    "astar": ("exact A*", "tab:red", "^"),
    "astar-approx": ("approx. A*", "tab:green", "P"),
    "window-search": ("window search", "tab:orange", "X"),
}


def t_cut_for(n_leaves: int) -> float:
    """The t_cut (GeV²) used to generate QCD jets with ``n_leaves`` leaves."""
    for upper, t_cut in T_CUT_BANDS:
        if n_leaves <= upper:
            return t_cut
    return T_CUT_BANDS[-1][1]


def make_jets(n_leaves: int, n_jets: int, seed: int, jet_type: str = "qcd") -> JetCollection:
    """QCD (or W) jets with exactly ``n_leaves`` leaves (default parameters but t_cut)."""
    preset = ShowerParams.w if jet_type == "w" else ShowerParams.qcd
    params = preset(t_cut=t_cut_for(n_leaves))
    return generate(n_jets, params, seed=seed, min_leaves=n_leaves, max_leaves=n_leaves,
                    max_tries=200_000)


def method_options(name: str, n_leaves: int, args: argparse.Namespace) -> dict[str, Any] | None:
    """Options of ``name`` at size ``n_leaves``, or ``None`` to skip it there."""
    if name == "trellis":
        return {"max_time": args.trellis_time} if n_leaves <= args.max_trellis else None
    if name == "astar":
        return {"max_time": args.astar_time} if n_leaves <= args.max_astar else None
    if name == "mcts":
        return {"seed": 0} if n_leaves <= args.max_mcts else None
    if name in ("astar-approx", "window-search"):
        return {"seed": 0}
    return {}


def run_size(n_leaves: int, args: argparse.Namespace, methods: Sequence[str], jet_type: str,
             out_dir: Path) -> Path:
    """Cluster the jets of one size with every method; write ``<out_dir>/N{n}.h5``."""
    jets = make_jets(n_leaves, args.jets_per_n, seed=1000 + n_leaves, jet_type=jet_type)
    results: dict[str, list[Any]] = {}
    for name in methods:
        opts = method_options(name, n_leaves, args)
        if opts is None:
            continue
        opts["likelihood"] = args.likelihood
        valid = set(algorithm_info(name).options())
        opts = {k: v for k, v in opts.items() if k in valid}
        rows = []
        for jet in tqdm(jets, desc=f"N={n_leaves:3d} {name:>12}", leave=False):
            rows.append(cluster(jet, name, **opts))
        results[name] = rows
    out = out_dir / f"N{n_leaves:03d}.h5"
    io.write(out, jets, results, attrs={
        "study": "paper_jets", "jet_type": jet_type, "n_leaves": n_leaves,
        "t_cut": t_cut_for(n_leaves),
        "seed": 1000 + n_leaves, "settings": json.dumps(vars(args), default=str),
    })
    return out


def load_summary(out_dir: Path) -> dict[str, dict[int, dict[str, np.ndarray]]]:
    """method -> N -> arrays (log_likelihood, time_s, splits, exact flags, exact MAP reference)."""
    summary: dict[str, dict[int, dict[str, np.ndarray]]] = {}
    for path in sorted(out_dir.glob("N*.h5")):
        n = int(path.stem[1:])
        tables = io.read_results(path)
        per_method = {label: table.results() for label, table in tables.items()}
        exact_ref = None
        for label in ("trellis", "astar"):
            rs = per_method.get(label)
            if rs and all(r.exact for r in rs):
                exact_ref = np.array([r.log_likelihood for r in rs])
                break
        for label, rs in per_method.items():
            ll = np.array([r.log_likelihood for r in rs])
            summary.setdefault(label, {})[n] = {
                "log_likelihood": ll,
                "time_s": np.array([r.time_s or np.nan for r in rs]),
                "splits": np.array([float(r.stats.get("splits_evaluated", np.nan)) for r in rs]),
                "exact": np.array([bool(r.exact) for r in rs]),
                "map": exact_ref if exact_ref is not None else np.full(len(rs), np.nan),
            }
    return summary


def _mean_sem(x: np.ndarray) -> tuple[float, float]:
    x = x[np.isfinite(x)]
    if x.size == 0:
        return math.nan, math.nan
    return float(x.mean()), float(x.std(ddof=1) / math.sqrt(x.size)) if x.size > 1 else 0.0


def plot(summary: dict[str, dict[int, dict[str, np.ndarray]]], fig_dir: Path) -> dict[str, Any]:
    """Draw the four figures; return their key numbers."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from jetastar.plotting import ginkgo_label

    fig_dir.mkdir(parents=True, exist_ok=True)
    numbers: dict[str, Any] = {"delta_vs_greedy": {}, "exact_fraction": {}, "time_s": {},
                               "explored_fraction": {}, "max_exact_n": {}}
    greedy = summary.get("greedy", {})
    figs = {k: plt.subplots(figsize=(6.4, 4.4)) for k in
            ("cost_vs_greedy", "time", "explored", "exact_fraction")}
    for label, per_n in summary.items():
        name, color, marker = METHOD_STYLE.get(label, (label, None, "x"))
        ns = sorted(per_n)
        d_mean, d_err, t_mean, ex_frac, ex_n, expl, expl_n = [], [], [], [], [], [], []
        for n in ns:
            row = per_n[n]
            if n in greedy:
                m, e = _mean_sem(row["log_likelihood"] - greedy[n]["log_likelihood"])
            else:
                m, e = math.nan, math.nan
            d_mean.append(m)
            d_err.append(e)
            t_mean.append(np.nanmean(row["time_s"]))
            if np.all(np.isfinite(row["map"])):
                hit = np.abs(row["log_likelihood"] - row["map"]) <= 1e-6 * np.abs(row["map"])
                ex_frac.append(hit.mean())
                ex_n.append(n)
            if np.any(np.isfinite(row["splits"])):
                expl.append(np.nanmedian(row["splits"]) / 3.0**n)
                expl_n.append(n)
            numbers["delta_vs_greedy"].setdefault(label, {})[n] = m
            numbers["time_s"].setdefault(label, {})[n] = float(t_mean[-1])
        if any(np.isfinite(d_mean)):
            figs["cost_vs_greedy"][1].errorbar(ns, d_mean, d_err, label=name, color=color,
                                               marker=marker, capsize=2, lw=1)
        figs["time"][1].plot(ns, t_mean, label=name, color=color, marker=marker, lw=1)
        if ex_n:
            figs["exact_fraction"][1].plot(ex_n, ex_frac, label=name, color=color, marker=marker)
            numbers["exact_fraction"][label] = dict(zip(ex_n, map(float, ex_frac), strict=True))
        if expl_n and label in ("trellis", "astar", "astar-approx", "window-search"):
            figs["explored"][1].plot(expl_n, expl, label=name, color=color, marker=marker)
            numbers["explored_fraction"][label] = dict(zip(expl_n, map(float, expl), strict=True))
        if label in ("trellis", "astar"):
            solved = [n for n in ns if per_n[n]["exact"].all()]
            numbers["max_exact_n"][label] = max(solved) if solved else None
    labels = {
        "cost_vs_greedy": ("log L(method) − log L(greedy)", "linear"),
        "time": ("wall time per jet [s]", "log"),
        "explored": ("splits evaluated / 3$^N$", "log"),
        "exact_fraction": ("fraction of jets with the exact MAP", "linear"),
    }
    for key, (fig, ax) in figs.items():
        ylabel, scale = labels[key]
        ax.set_xlabel("number of leaves N")
        ax.set_ylabel(ylabel)
        ax.set_yscale(scale)
        ax.legend(frameon=False, fontsize="small", loc="best")
        if key == "exact_fraction":
            ax.set_ylim(-0.02, 1.2)  # room for the label above the curves at 1
        ginkgo_label(ax, loc="upper left")
        fig.tight_layout()
        for ext in ("png", "pdf"):
            fig.savefig(fig_dir / f"{key}.{ext}", dpi=110)
        plt.close(fig)
    return numbers


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+",
                        default=[*range(4, 21), 22, 25, 30, 40, 50, 75, 100])
    parser.add_argument("--jets-per-n", type=int, default=15)
    parser.add_argument("--methods", nargs="+", default=None,
                        help="default: every registered algorithm but the kt family")
    parser.add_argument("--jet-type", choices=["qcd", "w", "both"], default="qcd",
                        help="QCD jets (the paper's study), W jets, or both (default qcd)")
    parser.add_argument("--max-trellis", type=int, default=24,
                        help="exact MAP (trellis) up to this many leaves (default 24)")
    parser.add_argument("--trellis-time", type=float, default=120.0,
                        help="time budget per jet for the exact MAP (s)")
    parser.add_argument("--max-astar", type=int, default=20)
    parser.add_argument("--max-mcts", type=int, default=20)
    parser.add_argument("--astar-time", type=float, default=60.0,
                        help="time budget per jet for exact A* (s)")
    parser.add_argument("--out", default=None,
                        help="results folder (default analysis/results/paper_jets, "
                             "paper_jets_quick with --quick)")
    parser.add_argument("--figures", default=None,
                        help="figures folder (default analysis/figures/paper_jets, "
                             "paper_jets_quick with --quick, so a quick run leaves the "
                             "committed figures alone)")
    parser.add_argument("--likelihood", choices=["symmetric", "legacy"], default="symmetric",
                        help="the likelihood form of every method (default symmetric; the "
                             "paper's is legacy, into folders ending in _legacy)")
    parser.add_argument("--quick", action="store_true", help="small sizes and few jets")
    parser.add_argument("--plot-only", action="store_true",
                        help="redraw the figures from an earlier run's results folder")
    args = parser.parse_args(argv)
    name = ("paper_jets_quick" if args.quick else "paper_jets") + (
        "_legacy" if args.likelihood == "legacy" else "")
    args.out = args.out or str(HERE / "results" / name)
    args.figures = args.figures or str(HERE / "figures" / name)
    if args.quick:
        args.sizes = [4, 6, 8, 10, 12, 20, 30]
        args.jets_per_n = 4
        args.max_trellis = 20
        args.max_astar = 12
        args.max_mcts = 10
    for jet_type in (["qcd", "w"] if args.jet_type == "both" else [args.jet_type]):
        # QCD keeps the paper's folders; W jets get their own
        suffix = "" if jet_type == "qcd" else "_w"
        out = Path(args.out + suffix)
        figures = Path(args.figures + suffix)
        if args.plot_only and not any(out.glob("N*.h5")):
            raise SystemExit(f"paper_jets.py --plot-only: no results in {out} (N*.h5); "
                             "run the study first (without --plot-only), or pass --out")
        out.mkdir(parents=True, exist_ok=True)
        if not args.plot_only:
            # the paper's comparison; the kt family (often -inf under the model) only on request
            methods = args.methods or [a for a in algorithms()
                                       if a not in ("kt", "cambridge", "antikt")]
            start = time.perf_counter()
            for n in args.sizes:
                run_size(n, args, methods, jet_type, out)
            print(f"{jet_type}: clustering done in {time.perf_counter() - start:.0f} s")
        numbers = plot(load_summary(out), figures)
        (figures / "key_numbers.json").write_text(json.dumps(numbers, indent=1))
        for label, per_n in sorted(numbers["delta_vs_greedy"].items()):
            cells = ", ".join(f"N={n}: {v:+.2f}" for n, v in sorted(per_n.items())
                              if n in (10, 20, 50))
            print(f"{jet_type} {label:>14}  Δ log L vs greedy  {cells}")
        print(f"{jet_type}: largest N solved exactly:", numbers["max_exact_n"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
