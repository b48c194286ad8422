"""The window search's defaults on jets they were not tuned on (tuning seeds and report seeds apart).

Run on demand (not collected by pytest)::

    python tests/benchmarks/bench_window_fresh.py maps --set report --sizes 20 22
    python tests/benchmarks/bench_window_fresh.py small --set report --sizes 20 22
    python tests/benchmarks/bench_window_fresh.py small --set tune --option n_random=6
    python tests/benchmarks/bench_window_fresh.py tiny              # small jets vs exact_map
    python tests/benchmarks/bench_window_fresh.py large             # 30-100 leaves vs approx. A*

Jet sets (both jet types, exactly ``N`` leaves, both likelihood forms; every set is generated from
its own seeds, written here):

* ``tune``: the seeds the defaults were chosen on: ``TUNE_BASE + 100 N + type`` (type 0 = W with
  the default t_cut of 16 GeV², 1 = QCD with t_cut = 1 GeV²). The older benchmark
  (``bench_window_search.py``, seeds ``23 000 + 100 N + type``) is part of the tuning data too.
* ``report``: fresh seeds ``REPORT_BASE + 100 N + type``, never looked at while tuning the first
  defaults; its two misses were looked at afterwards, so it is tuning data for later changes.
* ``report2``: fresh seeds ``REPORT2_BASE + 100 N + type`` for the defaults tuned on the sets above
  (run once with them; its misses were looked at afterwards);
* ``report3``: fresh seeds ``REPORT3_BASE + 100 N + type`` for the defaults after that (its
  20-24-leaf jets have been looked at since);
* ``report4``: fresh seeds ``REPORT4_BASE + 100 N + type`` for the defaults after that (its
  20-24-leaf jets have been looked at since);
* ``report5``: fresh seeds ``REPORT5_BASE + 100 N + type`` for the defaults after that (its misses
  have been looked at since);
* ``report6``: fresh seeds ``REPORT6_BASE + 100 N + type``, the same defaults once more (its misses
  have been looked at since);
* ``report7``: fresh seeds ``REPORT7_BASE + 100 N + type`` (20-24 leaves; exact MAPs on a GPU);
* ``report8``: fresh seeds ``REPORT8_BASE + 100 N + type``, the report7 defaults once more (20-24
  leaves; exact MAPs by ``exact_map`` on the CPU).
* ``report9``, ``report10``: fresh seeds ``REPORT9_BASE`` / ``REPORT10_BASE + 100 N + type``,
  generated after the 15-part root window had been chosen (on the sets above), run with it
  (20-22 leaves).
* ``tune11``: seeds ``TUNE11_BASE + 100 N + type``: 24 W jets of each of 20, 21 and 22 leaves
  (symmetric form) on which the defaults of 2026-12-07 were chosen after ``report11`` (below) had
  shown the former ones reaching the MAP of 60 of 64 W jets of 20 leaves.
* ``report11``: fresh seeds ``REPORT11_BASE + 100 N + type``: 64 W jets of each of 20, 21 and 22
  leaves, symmetric form, run once with the defaults of 2026-12-07 (``--types w --forms
  symmetric --jets 64``).

``maps`` computes the exact MAP of every (jet, form) with :func:`exact_map` and appends it to a JSON
cache (``--cache``; default ``$JETASTAR_BENCH_CACHE`` or ``~/.cache/jetastar/``), one entry at a
time, so an interrupted run resumes. 20-22 leaves take 2-30 CPU-s a jet, 24 leaves minutes.
``compare`` runs the defaults and named variants jet by jet (no exact MAPs: how often a variant ends
below or above the defaults, and its median CPU time). ``small`` runs the window search (``--option
key=value``) on the jets whose MAP is cached and prints, per size, type and form, how many reach the
MAP, the median and largest CPU-s per jet and the verdicts (proven / window optimal / budget).
``tiny`` times the window search against :func:`exact_map` on jets of 6-18 leaves. ``large``
compares with approximate A* at 30, 50 and 100 leaves (t_cut of ``analysis/paper_jets.py``;
``--baseline key=value`` runs a second configuration on the same jets).
CPU seconds are those of the process
(``time.process_time``: all threads), compilation excluded.

The numbers of ``docs/window_search.md`` (*Small jets*, *Never below plain beam search*, *Jets nobody
tuned on*) come from::

    maps --set report --sizes 20 22 --jets 8         # 64 exact MAPs, both forms
    maps --set report --sizes 24 --jets 1 --forms symmetric
    small --set tune0 --sizes 20 22 [--option widen_unsure=2 | widen_unsure=3 | n_random=6]
    small --set report --sizes 20 22 24              # once, with the final defaults
    maps --set report5 --sizes 20 22 --jets 8        # the fifth fresh set
    small --set report5 [--option n_sampled=4]
    maps --set report6 --sizes 20 22 --jets 8        # the sixth, same defaults
    small --set report6
    maps --set report8 --sizes 20 22 --jets 8        # the eighth, the report7 defaults
    maps --set report8 --sizes 24 --jets 4           # ~2.3 min a jet on 2 cores
    small --set report8 --sizes 20 22 24
    maps --set report9 --sizes 20 22 --jets 8        # the ninth, 15-part root window
    small --set report9 [--option root_size=16]
    maps --set report10 --sizes 20 22 --jets 8       # the tenth
    small --set report10 [--option root_size=16]
    maps --set report11 --sizes 20 21 22 --jets 64 --types w --forms symmetric
    small --set report11 --sizes 20 21 22 --jets 64 --types w --forms symmetric
    compare --set report report2 report3 report4 --option r15:root_size=15 --option r14:root_size=14
    compare --set report5 report6 report7 report8 [--sizes 18 19] --option r15:root_size=15
    maps --set report5 --sizes 26 --jets 3 --forms symmetric   # ~40 CPU-min a jet
    maps --set report5 --sizes 26 --jets 3 --forms symmetric --device gpu --recheck 1
    small --set report5 --sizes 26 --forms symmetric
    tiny
    large --jets 3 --baseline beam_size=100
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "analysis"))
sys.path.insert(0, str(ROOT))  # this checkout's jetastar, whatever the environment installed

from paper_jets import t_cut_for  # noqa: E402

from jetastar.clustering import (  # noqa: E402
    astar_approx,
    exact_map,
    window_search,
)
from jetastar.ginkgo import ShowerParams, generate  # noqa: E402

#: seeds of the tuning set and of the report set (never used while tuning)
TUNE_BASE = 41_000
REPORT_BASE = 52_000
REPORT2_BASE = 85_000
REPORT3_BASE = 96_000
REPORT4_BASE = 118_000
REPORT5_BASE = 131_000
REPORT6_BASE = 142_000
REPORT7_BASE = 164_000
REPORT8_BASE = 186_000
REPORT9_BASE = 197_000
REPORT10_BASE = 208_000
REPORT11_BASE = 219_000
#: the W jets of 20-22 leaves the defaults of 2026-12-07 were tuned on (``tune11``)
TUNE11_BASE = 230_000
#: seeds of the larger jets (30-100 leaves) and of the small-jet timing
LARGE_BASE = 63_000
TINY_BASE = 74_000
TYPES = ("w", "qcd")
FORMS = ("symmetric", "legacy")
#: the older benchmark's jets (``bench_window_search.py``: W seed offset 1, QCD 0), whose exact MAPs
#: (symmetric form) are in the repository: tuning data too
OLD_BASE = 23_000
SETS = {"tune0": OLD_BASE, "tune": TUNE_BASE, "report": REPORT_BASE, "report2": REPORT2_BASE,
        "report3": REPORT3_BASE, "report4": REPORT4_BASE,
        "report5": REPORT5_BASE, "report6": REPORT6_BASE,
        "report7": REPORT7_BASE, "report8": REPORT8_BASE, "report9": REPORT9_BASE,
        "report10": REPORT10_BASE, "report11": REPORT11_BASE,
        "tune11": TUNE11_BASE}
OLD_MAPS = ROOT / "tests" / "benchmarks" / "data" / "window_search_maps.json"


def default_cache() -> Path:
    base = os.environ.get("JETASTAR_BENCH_CACHE")
    folder = Path(base) if base else Path.home() / ".cache" / "jetastar"
    return folder / "window_fresh_maps.json"


def params_for(kind: str, n: int) -> ShowerParams:
    """W jets with the default t_cut (16 GeV²) and QCD jets with t_cut = 1 GeV² up to 24 leaves;
    beyond, both with the paper study's t_cut."""
    if kind == "w":
        return ShowerParams.w() if n <= 24 else ShowerParams.w(t_cut=t_cut_for(n))
    return ShowerParams.qcd(t_cut=1.0 if n <= 24 else t_cut_for(n))


def jets_for(base: int, kind: str, n: int, count: int) -> Any:
    seed = base + 100 * n + ((0 if kind == "w" else 1) if base != OLD_BASE else
                             (1 if kind == "w" else 0))
    return generate(count, params_for(kind, n), seed=seed, min_leaves=n, max_leaves=n,
                    max_tries=2_000_000)


def _cpu(func: Any, *args: Any, **kwargs: Any) -> tuple[Any, float]:
    t0 = time.process_time()
    out = func(*args, **kwargs)
    return out, time.process_time() - t0


def _warm_up() -> None:
    jet = generate(1, ShowerParams.w(), seed=1, min_leaves=19, max_leaves=19)[0]
    for form in FORMS:
        window_search(jet, form, progress=False)
        window_search(jet, form, progress=False, top_size=14, widen=1)
        exact_map(jet, form, progress=False)
        astar_approx(jet, likelihood=form, progress=False)


def _options(pairs: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        key, _, value = pair.partition("=")
        out[key] = json.loads(value) if value else None
    return out


def _key(set_name: str, kind: str, n: int, form: str) -> str:
    return f"{set_name}/{kind}{n}/{form}"


def _hit(ll: float, ref: float) -> bool:
    return abs(ll - ref) <= 1e-9 * (1.0 + abs(ref))


def verdict(res: Any) -> str:
    """``proven``, ``window optimal`` or ``budget`` (what a run reports per jet)."""
    if res.exact:
        return "proven"
    if res.status == "budget":
        return "budget"
    return "window optimal" if res.stats.get("window_optimal") else "other"


def cmd_maps(args: argparse.Namespace) -> None:
    path = Path(args.cache)
    cache = json.loads(path.read_text()) if path.exists() else {}
    if args.device == "cpu":
        _warm_up()
    rechecks = []
    for set_name, n, kind in [(a, n, k) for a in args.set for n in args.sizes for k in args.types]:
        if set_name == "tune0":
            continue  # in the repository already
        jets = jets_for(SETS[set_name], kind, n, args.jets)
        for form in args.forms:
            key = _key(set_name, kind, n, form)
            have = cache.get(key, [])
            for i, jet in enumerate(jets):
                if i < len(have):
                    if i < args.recheck:
                        rechecks.append((key, i, jet, form, have[i]["map"]))
                    continue
                t0 = time.perf_counter()
                res, cpu = _cpu(exact_map, jet, form, progress=False, device=args.device)
                assert res.exact and res.status == "ok"
                have.append({"map": res.log_likelihood, "cpu_s": cpu, "device": args.device,
                             "wall_s": time.perf_counter() - t0})
                cache[key] = have
                print(f"{key} jet {i}: {res.log_likelihood:.9f} ({cpu:.1f} CPU-s, "
                      f"{have[-1]['wall_s']:.1f} s on {args.device})", flush=True)
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp = path.with_suffix(".tmp")
                tmp.write_text(json.dumps(cache, indent=1))
                tmp.replace(path)
    for key, i, jet, form, stored in rechecks:  # the same MAP again, on --device
        t0 = time.perf_counter()
        res = exact_map(jet, form, progress=False, device=args.device)
        print(f"recheck {key} jet {i} on {args.device}: {res.log_likelihood:.9f}, stored "
              f"{stored:.9f}, |diff| {abs(res.log_likelihood - stored):.1e} "
              f"({time.perf_counter() - t0:.1f} s)", flush=True)


def _load_maps(path: str) -> dict[str, Any]:
    cache = json.loads(Path(path).read_text()) if Path(path).exists() else {}
    for key, values in json.loads(OLD_MAPS.read_text()).items():
        cache[f"tune0/{key}/symmetric"] = [{"map": v} for v in values]
    return cache


def cmd_small(args: argparse.Namespace) -> None:
    cache = _load_maps(args.cache)
    opts = _options(args.option)
    _warm_up()
    total_hit = total = 0
    all_cpu: list[float] = []
    for set_name, n, kind in [(a, n, k) for a in args.set for n in args.sizes for k in args.types]:
        for form in args.forms:
            refs = cache.get(_key(set_name, kind, n, form), [])[: args.jets]
            if not refs:
                continue
            jets = jets_for(SETS[set_name], kind, n, len(refs))
            hits, cpus, gaps, verdicts = 0, [], [], {}
            for jet, ref in zip(jets, refs, strict=True):
                res, cpu = _cpu(window_search, jet, form, progress=False, **opts)
                hit = _hit(res.log_likelihood, ref["map"])
                hits += hit
                cpus.append(cpu)
                gaps.append(ref["map"] - res.log_likelihood)
                v = verdict(res)
                verdicts[v] = verdicts.get(v, 0) + 1
                if args.verbose and not hit:
                    print(f"    miss {kind}{n} {form}: gap {gaps[-1]:.4f} ({v})")
            total_hit += hits
            total += len(refs)
            all_cpu.extend(cpus)
            print(f"{set_name:>6} {kind}{n:<3} {form:<9}: MAP {hits:2d}/{len(refs)}  median CPU "
                  f"{statistics.median(cpus):.3f} s  max {max(cpus):.3f} s  worst gap "
                  f"{max(gaps):.3f}  {verdicts}", flush=True)
    if total:
        print(f"{'+'.join(args.set)}, options {opts}: exact MAP on {total_hit}/{total} "
              f"({100.0 * total_hit / total:.1f} %), median CPU {statistics.median(all_cpu):.3f} s "
              f"per jet")


def cmd_tiny(args: argparse.Namespace) -> None:
    _warm_up()
    for n in args.sizes:
        rows = []
        for kind in TYPES:
            for jet in jets_for(TINY_BASE, kind, n, args.jets):
                for form in args.forms:
                    w, wc = _cpu(window_search, jet, form, progress=False)
                    e, ec = _cpu(exact_map, jet, form, progress=False)
                    assert _hit(w.log_likelihood, e.log_likelihood), (n, kind, form)
                    rows.append((wc, ec, w.exact, w.stats["path"]))
        wcs = [r[0] for r in rows]
        ecs = [r[1] for r in rows]
        paths = sorted({r[3] for r in rows})
        w_med, e_med = 1e3 * statistics.median(wcs), 1e3 * statistics.median(ecs)
        print(f"{n:3d} leaves ({len(rows)} runs): window search median {w_med:.1f} ms"
              f" (max {1e3 * max(wcs):.1f}), exact_map {e_med:.1f} ms"
              f" (max {1e3 * max(ecs):.1f}); exact=True on {sum(r[2] for r in rows)}/{len(rows)};"
              f" path {paths}", flush=True)


def cmd_compare(args: argparse.Namespace) -> None:
    """The defaults and ``--option`` variants (``name:key=value``) jet by jet, no exact MAPs: per
    variant, on how many (jet, form) its log-likelihood is below / above the defaults', and the
    median CPU-s of each (all runs of one jet back to back, so load hits them alike)."""
    variants: dict[str, dict[str, Any]] = {"defaults": {}}
    for item in args.option:
        name, _, pair = item.partition(":")
        variants.setdefault(name, {}).update(_options([pair]))
    _warm_up()
    cpu: dict[str, list[float]] = {name: [] for name in variants}
    lower = dict.fromkeys(variants, 0)
    higher = dict.fromkeys(variants, 0)
    for set_name, n, kind in [(a, n, k) for a in args.set for n in args.sizes for k in args.types]:
        for jet in jets_for(SETS[set_name], kind, n, args.jets):
            for form in args.forms:
                values = {}
                for name, opts in variants.items():
                    res, seconds = _cpu(window_search, jet, form, progress=False, **opts)
                    values[name] = res.log_likelihood
                    cpu[name].append(seconds)
                ref = values["defaults"]
                for name, value in values.items():
                    lower[name] += value < ref - 1e-9 * (1.0 + abs(ref))
                    higher[name] += value > ref + 1e-9 * (1.0 + abs(ref))
    for name, opts in variants.items():
        print(f"{name} {opts}: {len(cpu[name])} runs, below the defaults on {lower[name]}, above "
              f"on {higher[name]}; median CPU {statistics.median(cpu[name]):.3f} s", flush=True)


def cmd_large(args: argparse.Namespace) -> None:
    opts = _options(args.option)
    base = _options(args.baseline) if args.baseline else None
    _warm_up()
    for n in args.sizes:
        for kind in TYPES:
            jets = jets_for(LARGE_BASE, kind, n, args.jets)
            runs: dict[str, dict[str, list[float]]] = {}
            lower = 0
            for jet in jets:
                a, ac = _cpu(astar_approx, jet, seed=0, progress=False)
                runs.setdefault("approx. A*", {}).setdefault("cpu", []).append(ac)
                for name, o in (("window", opts), ("baseline", base)):
                    if o is None:
                        continue
                    w, wc = _cpu(window_search, jet, progress=False, **o)
                    r = runs.setdefault(name, {})
                    r.setdefault("gain", []).append(w.log_likelihood - a.log_likelihood)
                    r.setdefault("cpu", []).append(wc)
                    if name == "window":
                        lower += w.log_likelihood < a.log_likelihood - 1e-9 * abs(a.log_likelihood)
            cells = []
            for name, r in runs.items():
                gain = f"gain {statistics.fmean(r['gain']):+.3f} " if "gain" in r else ""
                cells.append(f"{name}: {gain}CPU {statistics.fmean(r['cpu']):.2f} s mean "
                             f"({statistics.median(r['cpu']):.2f} median)")
            print(f"{kind}{n:<4}({len(jets)} jets, window lower than approx. A* on {lower}): "
                  + "; ".join(cells), flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["maps", "small", "compare", "tiny", "large"])
    parser.add_argument("--set", choices=sorted(SETS), nargs="+", default=["report"],
                        help="jet sets (small: several are pooled in the total)")
    parser.add_argument("--sizes", type=int, nargs="+", default=None)
    parser.add_argument("--jets", type=int, default=None)
    parser.add_argument("--forms", nargs="+", choices=FORMS, default=list(FORMS))
    parser.add_argument("--types", nargs="+", choices=TYPES, default=list(TYPES),
                        help="jet types (default both)")
    parser.add_argument("--cache", default=str(default_cache()))
    parser.add_argument("--option", action="append", default=[],
                        help="window_search option key=value (JSON value), repeatable; "
                             "compare: name:key=value (a variant named name)")
    parser.add_argument("--baseline", action="append", default=[],
                        help="large: also run the window search with these options (key=value)")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--device", choices=["cpu", "gpu"], default="cpu",
                        help="maps: where exact_map runs (gpu: the MAP of 26-leaf jets in seconds)")
    parser.add_argument("--recheck", type=int, default=0,
                        help="maps: compute the first N cached MAPs again and print the difference")
    args = parser.parse_args(argv)
    defaults = {"maps": ([20, 22], 8), "small": ([20, 22], 1000), "compare": ([20, 22], 8),
                "tiny": ([6, 9, 12, 14, 16, 17, 18], 4),
                "large": ([30, 50, 100], 5)}
    sizes, jets = defaults[args.command]
    args.sizes = args.sizes or sizes
    args.jets = args.jets or jets
    {"maps": cmd_maps, "small": cmd_small, "compare": cmd_compare, "tiny": cmd_tiny,
     "large": cmd_large}[args.command](args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
