"""Benchmark of the bound-pruned exact MAP engine (:func:`jetastar.clustering.exact_map`).

Run on demand (not collected by pytest)::

    python tests/benchmarks/bench_exact_map.py speed                       # N = 16 .. 24, W jets
    python tests/benchmarks/bench_exact_map.py speed --sizes 20 --trellis  # with the full trellis
    python tests/benchmarks/bench_exact_map.py coverage --times out.json   # 20 000 default W jets
    python tests/benchmarks/bench_exact_map.py survivors --sizes 12 14 16  # cluster skipping limit

``speed``: W jets (default parameters; ``t_cut = 4`` from 26 leaves on) with exactly ``N`` leaves,
both likelihood forms, each size in a fresh subprocess (its peak resident memory is that size's
alone). Per jet: wall time, the fraction of all splits whose ψ was computed, the fraction passing
the first (W) test; the median over the jets is printed. ``--trellis`` runs today's full
:func:`exact_trellis` (MAP and log Z) on the same jets up to ``--trellis-max`` leaves, side by
side. ``--json`` writes every number.

``coverage``: the leaf-count distribution of 20 000 default W jets and, from the median times of a
``speed --json`` file (sizes beyond the largest measured one extrapolated with the 3^N growth of
the enumeration), the fraction of those jets whose exact MAP takes at most ``--limit`` seconds.

``survivors``: how much *cluster* skipping could ever save. For each jet the exact inside values
``V(S)`` (the engine) and exact outside values ``O(S)`` (best log-likelihood of the rest of a tree
containing ``S``, one top-down max pass) are computed; a cluster survives when
``V(S) + O(S) >= L0`` for an incumbent ``L0`` (the greedy tree, the beam tree, the MAP itself).
These are exactly the clusters that a scheme with *perfect* inside and outside bounds would have to
keep, and the splits it would still enumerate are theirs; any real bound keeps more. The rows
``beam-d`` lower the beam incumbent by ``d`` nats: what bounds that are ``d`` nats loose in total
would keep.
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import subprocess
import sys
import time

import numba as nb
import numpy as np

from jetastar.clustering import beam_search, exact_map, exact_trellis, greedy
from jetastar.clustering.exact.exact_map import _MapSolver, estimate_map_memory
from jetastar.ginkgo import ShowerParams, generate
from jetastar.ginkgo.likelihood import parent_terms, split_llh_given_parent

FORMS = ("symmetric", "legacy")
#: survivors: bounds that are this many nats loose (beam incumbent lowered by the slack)
SLACKS = (2, 5, 10, 20)


def _jets(n: int, count: int, seed: int):
    params = ShowerParams.w() if n < 26 else ShowerParams.w(t_cut=4.0)
    return generate(count, params, seed=seed + 1000 * n, min_leaves=n, max_leaves=n,
                    max_tries=200_000)


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


# ---------------------------------------------------------------------- speed
def _one_size(n: int, count: int, seed: int, trellis: int, threads: int | None) -> dict:
    """One size in this process; the full trellis on the first ``trellis`` jets."""
    warm = generate(1, ShowerParams.w(), seed=1, min_leaves=8, max_leaves=8)[0]
    for form in FORMS:
        exact_map(warm, form)
        if trellis:
            exact_trellis(warm, form)
    base = _rss_mb()
    jets = _jets(n, count, seed)
    out: dict = {"n": n, "jets": count, "estimate_mb": estimate_map_memory(n) / 2**20}
    for form in FORMS:
        rows = []
        for jet in jets:
            res = exact_map(jet, form, threads=threads, progress=False)
            st = res.stats
            rows.append({
                "time_s": st["time_s"], "psi_fraction": st["splits_evaluated"] / st["splits_total"],
                "w_pass_fraction": st["splits_bound_passed"] / st["splits_total"],
                "ns_per_split": 1e9 * st["time_dp_s"] / st["splits_total"],
                "log_likelihood": res.log_likelihood, "tree": res.tree.to_nested(),
            })
        out[form] = rows
    out["peak_mb"] = _rss_mb() - base  # before the full trellis runs
    for form in FORMS:
        for jet, row in zip(jets[:trellis], out[form], strict=False):
            full = exact_trellis(jet, form, threads=threads, progress=False)
            assert full.log_likelihood == row["log_likelihood"]
            assert full.tree.to_nested() == row["tree"]
            row["trellis_s"] = full.stats["time_s"]
    for form in FORMS:
        for row in out[form]:
            del row["tree"]
    return out


def _median(rows: list[dict], key: str) -> float:
    vals = [r[key] for r in rows if key in r]
    return float(np.median(vals)) if vals else math.nan


def cmd_speed(args: argparse.Namespace) -> None:
    results = []
    print(f"W jets, median of {args.jets}, threads={args.threads or nb.get_num_threads()}")
    print(f"{'N':>3} {'form':>9} {'time':>9} {'ns/split':>8} {'psi %':>7} {'W-pass %':>8} "
          f"{'trellis':>9} {'speed-up':>8} {'peak MB':>8} {'est. MB':>8}")
    for n in args.sizes:
        trellis = args.trellis_jets if args.trellis and n <= args.trellis_max else 0
        code = (f"import json, sys; sys.path.insert(0, {str(__file__.rsplit('/', 1)[0])!r}); "
                f"import bench_exact_map as b; print(json.dumps(b._one_size({n}, {args.jets}, "
                f"{args.seed}, {trellis}, {args.threads})))")
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        if done.returncode:
            print(done.stderr[-2000:])
            raise SystemExit(f"size {n} failed")
        r = json.loads(done.stdout.strip().splitlines()[-1])
        results.append(r)
        for form in FORMS:
            rows = r[form]
            t = _median(rows, "time_s")
            tt = _median(rows, "trellis_s")
            # speed-up on the jets both ran
            both = [r["trellis_s"] / r["time_s"] for r in rows if "trellis_s" in r]
            gain = float(np.median(both)) if both else math.nan
            print(f"{n:>3} {form:>9} {t:>8.3g}s {_median(rows, 'ns_per_split'):>8.2f} "
                  f"{100 * _median(rows, 'psi_fraction'):>7.2f} "
                  f"{100 * _median(rows, 'w_pass_fraction'):>8.2f} "
                  f"{tt:>8.3g}s {gain:>8.1f} {r['peak_mb']:>8.0f} {r['estimate_mb']:>8.0f}",
                  flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


# ---------------------------------------------------------------------- coverage
def cmd_coverage(args: argparse.Namespace) -> None:
    jets = generate(args.n, ShowerParams.w(), seed=args.seed)
    sizes = np.array([j.n_leaves for j in jets])
    print(f"{args.n} default W jets: leaves min {sizes.min()}, median {np.median(sizes):.0f}, "
          f"max {sizes.max()}")
    for k in (16, 18, 20, 22, 24, 26, 28):
        print(f"  more than {k} leaves: {100 * np.mean(sizes > k):.2f} %")
    if not args.times:
        return
    with open(args.times) as f:
        measured = json.load(f)
    for form in FORMS:
        med = {r["n"]: _median(r[form], "time_s") for r in measured}
        top = max(med)

        def time_of(n: int, med=med, top=top) -> float:
            if n in med:
                return med[n]
            if n < min(med):
                return med[min(med)]
            return med[top] * 3.0 ** (n - top)

        ok = np.array([time_of(int(n)) <= args.limit for n in sizes])
        largest = max((int(n) for n in np.unique(sizes) if time_of(int(n)) <= args.limit),
                      default=0)
        print(f"{form}: {100 * ok.mean():.2f} % of the jets within {args.limit:g} s each "
              f"(largest N within the limit: {largest}; measured up to {top}, beyond that x3 per leaf)")


# ---------------------------------------------------------------------- survivors
@nb.njit(cache=True)
def _outside(n, rec, consts, order_desc):  # pragma: no cover - numba
    """Exact outside values O(S) by one top-down max pass (parents before their parts)."""
    m = np.int64(1) << n
    full = m - 1
    out = np.full(m, -np.inf)
    out[full] = 0.0
    for j in range(order_desc.shape[0]):
        p = np.int64(order_desc[j])
        o_p = out[p]
        if o_p == -np.inf or rec[p, 1] == -np.inf or p & (p - 1) == 0:
            continue
        c = consts[1] if p == full else consts[0]
        t_p = rec[p, 0]
        if not t_p > 0.0:
            continue
        s_p, log_tp, stop = parent_terms(t_p, c)
        low = p & -p
        rest = p ^ low
        sub = (rest - 1) & rest
        while True:
            a = low | sub
            b = rest ^ sub
            if rec[a, 1] > -np.inf and rec[b, 1] > -np.inf:
                psi = split_llh_given_parent(rec[a, 0], rec[b, 0], t_p, s_p, log_tp, stop, c)
                if psi > -np.inf:
                    base = o_p + psi
                    if base + rec[b, 1] > out[a]:
                        out[a] = base + rec[b, 1]
                    if base + rec[a, 1] > out[b]:
                        out[b] = base + rec[a, 1]
            if sub == 0:
                break
            sub = (sub - 1) & rest
    return out


def cmd_survivors(args: argparse.Namespace) -> None:
    print("fraction of clusters (of 2^N - 1) / of splits (of (3^N+1)/2 - 2^N) that survive with "
          "perfect inside + outside bounds, median over jets (symmetric form)")
    print(f"{'N':>3} {'incumbent':>9} {'MAP-L0':>7} {'clusters %':>10} {'splits %':>9}")
    for n in args.sizes:
        per: dict[str, list] = {}
        for jet in _jets(n, args.jets, args.seed):
            consts = jet.likelihood_constants("symmetric")
            solver = _MapSolver(jet.leaves, consts, None)
            solver.solve(True, -math.inf, False, None, None, "bench")
            v_map = solver.map_value()
            masks = np.arange(1, 1 << n, dtype=np.int64)
            size = np.array([bin(int(s)).count("1") for s in masks])
            order_desc = masks[np.argsort(-size, kind="stable")]
            out = _outside(n, solver.rec, consts, order_desc)
            total = out[1:] + solver.rec[1:, 1]
            splits_of = np.where(size >= 2, (2.0 ** (size - 1)) - 1, 0.0)
            beam = beam_search(jet).log_likelihood
            for name, value in (("greedy", greedy(jet).log_likelihood), ("beam", beam),
                                ("map", v_map), *((f"beam-{d}", beam - d) for d in SLACKS)):
                keep = total >= value - 1e-9 * (1 + abs(value))
                per.setdefault(name, []).append(
                    (v_map - value, keep.mean(), splits_of[keep].sum() / splits_of.sum()))
        for name, rows in per.items():
            a = np.array(rows)
            print(f"{n:>3} {name:>9} {np.median(a[:, 0]):>7.2f} {100 * np.median(a[:, 1]):>10.3f} "
                  f"{100 * np.median(a[:, 2]):>9.3f}", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("speed")
    s.add_argument("--sizes", type=int, nargs="+", default=[16, 18, 20, 22, 24])
    s.add_argument("--jets", type=int, default=5)
    s.add_argument("--seed", type=int, default=1)
    s.add_argument("--threads", type=int, default=None)
    s.add_argument("--trellis", action="store_true", help="also run the full trellis")
    s.add_argument("--trellis-max", type=int, default=20)
    s.add_argument("--trellis-jets", type=int, default=5, help="jets per size for the trellis")
    s.add_argument("--json", default=None)
    c = sub.add_parser("coverage")
    c.add_argument("--n", type=int, default=20_000)
    c.add_argument("--seed", type=int, default=7)
    c.add_argument("--times", default=None, help="a speed --json file")
    c.add_argument("--limit", type=float, default=600.0)
    v = sub.add_parser("survivors")
    v.add_argument("--sizes", type=int, nargs="+", default=[12, 14, 16])
    v.add_argument("--jets", type=int, default=5)
    v.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    t0 = time.perf_counter()
    {"speed": cmd_speed, "coverage": cmd_coverage, "survivors": cmd_survivors}[args.cmd](args)
    print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
