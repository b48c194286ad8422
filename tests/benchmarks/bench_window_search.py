"""Benchmark of the exact-window search (:func:`jetastar.clustering.window_search`).

Run on demand (not collected by pytest)::

    python tests/benchmarks/bench_window_search.py maps                 # exact MAPs, N = 16 .. 24
    python tests/benchmarks/bench_window_search.py small                # vs the exact MAP, N = 16 .. 24
    python tests/benchmarks/bench_window_search.py large                # vs approximate A*, N = 30, 50, 100
    python tests/benchmarks/bench_window_search.py small --astar --sizes 18 20

Jets: for each size N, ``--jets`` (15) jets with exactly N leaves of each type: default W jets and QCD
jets with t_cut = 1 GeV² up to 24 leaves; beyond, both with the t_cut of the paper study
(``analysis/paper_jets.py``'s ``t_cut_for``: 0.25 GeV² at 25–39 leaves, 0.09 at 40–69, 0.0125 above).
Symmetric likelihood. Times are CPU seconds of the process (``time.process_time``: all threads), per
jet, compilation excluded (every kernel is warmed up first).

``maps`` computes the exact MAP of every jet up to 24 leaves with :func:`exact_map` (24 leaves: about
2–3 minutes per jet) and stores the values in ``--maps`` (JSON, keyed by type, N and jet index), so
that ``small`` reads them. ``small`` runs the window search (options ``--option key=value``) and
counts the jets where it reaches the exact MAP (within 1e-9 relative), the median and largest CPU time
and the mean gap; ``--astar`` adds approximate A* (its defaults). ``large`` runs both on larger jets
and reports how often the window search is higher, the mean gain and the CPU times; ``--physics``
adds greedy, kt / C/A / anti-kt and the truth (log-likelihood relative to the window tree). ``--seeds``
runs the window search with several seeds (how robust the fraction of exact MAPs is).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "analysis"))

from paper_jets import t_cut_for  # noqa: E402

from jetastar.clustering import (  # noqa: E402
    astar_approx,
    exact_map,
    greedy,
    kt,
    window_search,
)
from jetastar.ginkgo import ShowerParams, generate, log_likelihood  # noqa: E402

TYPES = ("w", "qcd")
DEFAULT_MAPS = ROOT / "tests" / "benchmarks" / "data" / "window_search_maps.json"


def jets_for(kind: str, n: int, count: int) -> Any:
    """``count`` jets of type ``kind`` with exactly ``n`` leaves (see the module docstring)."""
    if kind == "w":
        params = ShowerParams.w() if n <= 24 else ShowerParams.w(t_cut=t_cut_for(n))
    else:
        params = ShowerParams.qcd(t_cut=1.0 if n <= 24 else t_cut_for(n))
    seed = 23_000 + 100 * n + (1 if kind == "w" else 0)
    return generate(count, params, seed=seed, min_leaves=n, max_leaves=n, max_tries=2_000_000)


def _warm_up() -> None:
    jet = generate(1, ShowerParams.w(), seed=1, min_leaves=16, max_leaves=16)[0]
    for form in ("symmetric", "legacy"):
        window_search(jet, form)
        astar_approx(jet, likelihood=form, progress=False)
        exact_map(jet, form, progress=False)
        greedy(jet, form)
    for alg in ("kt", "cambridge", "antikt"):
        kt(jet, alg)


def _cpu(func: Any, *args: Any, **kwargs: Any) -> tuple[Any, float]:
    t0 = time.process_time()
    out = func(*args, **kwargs)
    return out, time.process_time() - t0


def _options(pairs: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        key, _, value = pair.partition("=")
        out[key] = json.loads(value) if value not in ("", None) else None
    return out


def cmd_maps(args: argparse.Namespace) -> None:
    path = Path(args.maps)
    maps = json.loads(path.read_text()) if path.exists() else {}
    _warm_up()
    for n in args.sizes:
        for kind in TYPES:
            key = f"{kind}{n}"
            have = maps.get(key, [])
            jets = jets_for(kind, n, args.jets)
            for i, jet in enumerate(jets):
                if i < len(have):
                    continue
                res, cpu = _cpu(exact_map, jet, progress=False)
                assert res.exact
                have.append(res.log_likelihood)
                maps[key] = have
                print(f"{key} jet {i}: {res.log_likelihood:.9f} ({cpu:.1f} CPU-s)", flush=True)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps(maps, indent=1))


def _hit(ll: float, ref: float) -> bool:
    return abs(ll - ref) <= 1e-9 * (1.0 + abs(ref))


def cmd_small(args: argparse.Namespace) -> None:
    maps = json.loads(Path(args.maps).read_text())
    opts = _options(args.option)
    _warm_up()
    total = {"hit": 0, "jets": 0}
    for n in args.sizes:
        for kind in TYPES:
            key = f"{kind}{n}"
            refs = maps.get(key)
            if not refs:
                print(f"{key}: no exact MAPs (run `maps` first)")
                continue
            jets = jets_for(kind, n, min(args.jets, len(refs)))
            rows = {"window": [], "astar": []}
            if args.physics:
                _physics(key, jets, refs)
            for jet, ref in zip(jets, refs, strict=False):
                for seed in args.seeds:
                    res, cpu = _cpu(window_search, jet, **{"seed": seed, **opts})
                    rows["window"].append((res.log_likelihood, cpu, ref, res.stats))
                if args.astar:
                    a, acpu = _cpu(astar_approx, jet, seed=0, progress=False)
                    rows["astar"].append((a.log_likelihood, acpu, ref, None))
            for name, data in rows.items():
                if not data:
                    continue
                hits = sum(_hit(ll, ref) for ll, _, ref, _ in data)
                cpus = [c for _, c, _, _ in data]
                gaps = [ref - ll for ll, _, ref, _ in data]
                if name == "window":
                    total["hit"] += hits
                    total["jets"] += len(data)
                extra = ""
                if name == "window":
                    st = [s for *_, s in data]
                    extra = (f"  windows {statistics.median(s['windows_solved'] for s in st):.0f}"
                             f"  optimal {sum(s['window_optimal'] for s in st)}/{len(st)}")
                print(f"{key:>6} {name:>7}: MAP {hits:2d}/{len(data)}  median CPU "
                      f"{statistics.median(cpus):.3f} s  max {max(cpus):.3f} s  mean gap "
                      f"{statistics.fmean(gaps):.3f}  worst {max(gaps):.3f}{extra}", flush=True)
    if total["jets"]:
        print(f"window search: exact MAP on {total['hit']}/{total['jets']} jets "
              f"({100.0 * total['hit'] / total['jets']:.1f} %)")


def _physics(key: str, jets: Any, refs: list[float]) -> None:
    """log L(exact MAP) minus that of greedy, the kt family and the truth."""
    out = {}
    for jet, ref in zip(jets, refs, strict=False):
        others = {"greedy": greedy(jet).log_likelihood, "truth": log_likelihood(jet)}
        for alg in ("kt", "cambridge", "antikt"):
            others[alg] = kt(jet, alg).log_likelihood
        for name, ll in others.items():
            out.setdefault(name, []).append(ref - ll)
    cells = []
    for name, d in out.items():
        fin = [x for x in d if math.isfinite(x)]
        cells.append(f"{name} {statistics.fmean(fin):+.2f} ({len(fin)})" if fin else f"{name} —")
    print(f"{key:>6} log L(MAP) − log L(X), mean over finite X (count): " + ", ".join(cells))


def cmd_large(args: argparse.Namespace) -> None:
    opts = _options(args.option)
    _warm_up()
    for n in args.sizes:
        for kind in TYPES:
            jets = jets_for(kind, n, args.jets)
            gains, better, worse, wcpu, acpu, phys, converged = [], 0, 0, [], [], {}, 0
            for jet in jets:
                a, ac = _cpu(astar_approx, jet, seed=0, progress=False)
                w_opts = dict(opts)
                if args.match_time:
                    w_opts["max_time"] = max(ac, 1e-3)
                w, wc = _cpu(window_search, jet, **w_opts)
                converged += bool(w.stats["window_optimal"])
                gains.append(w.log_likelihood - a.log_likelihood)
                better += w.log_likelihood > a.log_likelihood + 1e-9 * abs(a.log_likelihood)
                worse += w.log_likelihood < a.log_likelihood - 1e-9 * abs(a.log_likelihood)
                wcpu.append(wc)
                acpu.append(ac)
                if args.physics:
                    others = {"greedy": greedy(jet).log_likelihood,
                              "astar-approx": a.log_likelihood}
                    for alg in ("kt", "cambridge", "antikt"):
                        others[alg] = kt(jet, alg).log_likelihood
                    others["truth"] = log_likelihood(jet)
                    for name, ll in others.items():
                        phys.setdefault(name, []).append(w.log_likelihood - ll)
            print(f"{kind}{n:>4}: window higher on {better}/{len(jets)}, equal on "
                  f"{len(jets) - better - worse}, lower on {worse}; mean gain "
                  f"{statistics.fmean(gains):+.2f} nats (min {min(gains):+.2f}, max "
                  f"{max(gains):+.2f}); CPU per jet window {statistics.median(wcpu):.2f} s median "
                  f"/ {statistics.fmean(wcpu):.2f} mean, astar-approx {statistics.median(acpu):.2f}"
                  f" / {statistics.fmean(acpu):.2f}; window optimal {converged}/{len(jets)}",
                  flush=True)
            for name, d in phys.items():
                fin = [x for x in d if math.isfinite(x)]
                mean = f"{statistics.fmean(fin):+.2f}" if fin else "—"
                print(f"      log L(window) − log L({name}): mean {mean} over {len(fin)} jets where "
                      f"{name} is finite, of {len(d)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["maps", "small", "large"])
    parser.add_argument("--sizes", type=int, nargs="+", default=None)
    parser.add_argument("--jets", type=int, default=15)
    parser.add_argument("--maps", default=str(DEFAULT_MAPS))
    parser.add_argument("--option", action="append", default=[],
                        help="window_search option key=value (JSON value), repeatable")
    parser.add_argument("--astar", action="store_true", help="small: run approximate A* too")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0],
                        help="small: window-search seeds (each jet once per seed; default 0)")
    parser.add_argument("--match-time", action="store_true",
                        help="large: give the window search each jet's approximate-A* CPU time")
    parser.add_argument("--physics", action="store_true",
                        help="gains over greedy, the kt family and the truth (small: of the MAP)")
    args = parser.parse_args(argv)
    if args.sizes is None:
        args.sizes = [30, 50, 100] if args.command == "large" else [16, 18, 20, 22, 24]
    {"maps": cmd_maps, "small": cmd_small, "large": cmd_large}[args.command](args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
