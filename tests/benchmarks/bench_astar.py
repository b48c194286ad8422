"""Benchmarks and analyses of A* (run on demand; not collected by pytest).

Usage::

    python tests/benchmarks/bench_astar.py heuristics [--max-leaves 12] [--random 20]
    python tests/benchmarks/bench_astar.py exact [--sizes 10-16] [--jets 10] [--max-time 600]
        [--max-memory 8e9]
    python tests/benchmarks/bench_astar.py approx [--jets 10]
    python tests/benchmarks/bench_astar.py prune [--sizes 12,14] [--jets 6]
    python tests/benchmarks/bench_astar.py explore [--sizes 12,14] [--jets 6]
    python tests/benchmarks/bench_astar.py budgets [--jets 2] [--limits 0.2,0.5,1,2]

* ``heuristics``: every subset of every reference jet with at most ``--max-leaves`` leaves plus
  random QCD and W jets: violations of h0 / h1 / the reference "proof" bound (a violation is a subset
  whose exact best log-likelihood exceeds the bound) and mean gap bound − exact by subset size.
* ``exact``: exact A* (h0) against the exact trellis, median time, vertices explored, splits
  and the memory of the search arrays; the last column counts jets where A* proved the trellis MAP.
* ``approx``: approximate A* against greedy and beam search at 20/30/50/100 leaves, and the fraction
  of 12–16-leaf jets where it reaches the exact MAP.
* ``prune``: how much any bound of h0's kind can prune. (1) On exact MAP trees, the slack of
  maximising each continuing child's density over its scale, ``x − 1 − log x`` with
  ``x = λ t_child / T`` (the floor of a bound that does not know the parent masses). (2) The
  fraction of the root's 2-partitions that A* cannot discard (``ψ + h(L) + h(R) ≥ MAP``) with h0 and
  with oracle bounds ``MAP(S) + g·(|S| − 2)`` (exact up to EXACT_MAX_LEAVES leaves, like h0).
* ``budgets``: wall and CPU time of ``astar`` / ``astar_approx`` / ``window_search`` /
  ``exact_map`` with ``max_time`` on 20-30 and 60-100-leaf jets (``--limits 0.2,0.5,1,2``): the
  budget holds within ~10 %.
* ``explore``: the fraction of the trellis's splits exact A* scores, measured and estimated from the
  subsets it can reach with ``f ≤ C*`` (the estimate matches the measurement for h0), for h0, for h0
  whose shape DP knows the exact least mass of every subset size, for h0 with exact values of every
  subset up to 6 / 8 leaves, and for the oracle bounds; and the time of h0 on every subset (exact A*
  evaluates it on every child of the root, i.e. every subset) against the whole trellis.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

import numba as nb
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers.refdata import reference_jets

from jetastar.clustering import (
    Trellis,
    astar,
    astar_approx,
    beam_search,
    exact_trellis,
    greedy,
)
from jetastar.ginkgo import ShowerParams, generate
from jetastar.ginkgo.heuristics import (
    _SLACK,
    EXACT_MAX_LEAVES,
    _h0_shapes,
    bound_value,
    heuristic_tables,
)
from jetastar.ginkgo.likelihood import split_llh, split_log_likelihood, t_of
from jetastar.ginkgo.small_clusters import subset_masses


@nb.njit
def _subset(m, p, idx):  # pragma: no cover - numba
    """Leaves of mask ``m`` into ``idx``; returns their number and the subset's squared mass."""
    k = 0
    e = 0.0
    x = 0.0
    y = 0.0
    z = 0.0
    for i in range(p.shape[0]):
        if (m >> i) & 1:
            idx[k] = i
            k += 1
            e += p[i, 0]
            x += p[i, 1]
            y += p[i, 2]
            z += p[i, 3]
    return k, t_of(e, x, y, z)


@nb.njit
def _all_bounds(kind, p, tl, mt, w, d, consts, phys):  # pragma: no cover - numba
    n = p.shape[0]
    out = np.full(1 << n, np.nan)
    idx = np.empty(n, dtype=np.int64)
    for m in range(1, 1 << n):
        k, t_s = _subset(m, p, idx)
        out[m] = bound_value(kind, idx, k, t_s, p, tl, mt, w, d, consts[0], phys)
    return out


def heuristics(args: argparse.Namespace) -> None:
    jets = [("ref", j) for _, j in reference_jets(max_leaves=args.max_leaves)]
    for name, params, seed in (("QCD", ShowerParams.qcd(), 1), ("W", ShowerParams.w(), 2)):
        jets += [
            (name, j)
            for j in generate(args.random, params, seed=seed, min_leaves=6,
                              max_leaves=args.max_leaves)
        ]
    names = {0: "h0", 1: "h1", 2: "paper"}
    for form in ("symmetric", "legacy"):
        gaps = {k: defaultdict(list) for k in names}
        viol = {k: defaultdict(int) for k in names}
        jets_viol = dict.fromkeys(names, 0)
        worst = dict.fromkeys(names, 0.0)
        n_sub = 0
        t0 = time.time()
        for _, jet in jets:
            tabs = heuristic_tables(jet, form)
            consts = tabs[5]
            inner = np.stack([consts[0], consts[0]])
            best = Trellis.from_arrays(jet.leaves, inner, form, progress=False).map_array()
            n = jet.n_leaves
            sizes = np.array([bin(m).count("1") for m in range(1 << n)])
            finite = np.isfinite(best) & (sizes >= 2)
            n_sub += int(finite.sum())
            for kind in names:
                b = _all_bounds(kind, *tabs)
                diff = b - best
                bad = finite & (diff < -1e-9 * np.maximum(1.0, np.abs(best)))
                if bad.any():
                    jets_viol[kind] += 1
                    worst[kind] = max(worst[kind], float(-diff[bad].min()))
                for s in range(2, n + 1):
                    sel = finite & (sizes == s)
                    gaps[kind][s].extend(diff[sel].tolist())
                    viol[kind][s] += int((bad & sel).sum())
        print(f"\n== {form} likelihood: {len(jets)} jets, {n_sub} finite subsets "
              f"({time.time() - t0:.0f} s)")
        for kind, label in names.items():
            nv = sum(viol[kind].values())
            print(f"{label:6s} violations {nv} ({100 * nv / n_sub:.2f} %), jets {jets_viol[kind]}, "
                  f"worst {worst[kind]:.3f}")
        print("size | mean gap h0 | h1 | paper | h1 violations")
        for s in sorted(gaps[0]):
            if not gaps[0][s]:
                continue
            row = [np.mean(np.clip(gaps[k][s], -1e9, 1e9)) for k in names]
            print(f"{s:4d} | {row[0]:11.3f} | {row[1]:6.3f} | {row[2]:6.3f} | {viol[1][s]}")


def exact(args: argparse.Namespace) -> None:
    first, _, last = args.sizes.partition("-")  # "16-18" or "19"
    lo, hi = int(first), int(last or first)
    print("type  N | A* time  trellis time | explored | splits A* / trellis | memory GB | exact")
    for jet_type in ("W", "QCD"):
        for n in range(lo, hi + 1):
            if jet_type == "W":
                params = ShowerParams.w()
            else:
                params = ShowerParams.qcd() if n <= 13 else ShowerParams.qcd(t_cut=4.0)
            jets = generate(args.jets, params, seed=1000 + n, min_leaves=n, max_leaves=n)
            rows = []
            for jet in jets:
                a = astar(jet, max_time=args.max_time, max_memory=args.max_memory, progress=False)
                t = time.perf_counter()
                tr = exact_trellis(jet, progress=False)
                t_tr = time.perf_counter() - t
                agree = a.status == "ok" and abs(a.log_likelihood - tr.log_likelihood) <= 1e-9 * (
                    1 + abs(tr.log_likelihood)
                )
                rows.append((a.stats["time_s"], t_tr, a.stats["vertices_explored"],
                             a.stats["split_fraction"], a.stats["memory_bytes"] / 1e9, agree))
            r = np.array(rows, dtype=float)
            med = np.median(r, axis=0)
            print(f"{jet_type:4s} {n:2d} | {med[0]:7.2f}s {med[1]:8.2f}s | {med[2]:8.0f} | "
                  f"{med[3]:.3f} | {med[4]:6.2f} | {int(r[:, 5].sum())}/{len(rows)}", flush=True)


def approx(args: argparse.Namespace) -> None:
    cases = [(1.0, 18, 22), (0.25, 28, 32), (0.09, 45, 55), (0.0125, 90, 110)]
    print("N~ | jets | time approx (median/max) | gain vs greedy | vs beam | > beam | >= beam")
    for t_cut, lo, hi in cases:
        jets = generate(args.jets, ShowerParams.qcd(t_cut=t_cut), seed=7, min_leaves=lo,
                        max_leaves=hi)
        rows = []
        for jet in jets:
            g = greedy(jet).log_likelihood
            b = beam_search(jet).log_likelihood
            a = astar_approx(jet, progress=False)
            rows.append((a.stats["time_s"], a.log_likelihood - g, a.log_likelihood - b))
        r = np.array(rows)
        print(f"{(lo + hi) // 2:3d} | {len(rows)} | {np.median(r[:, 0]):.1f}/{r[:, 0].max():.1f} s | "
              f"{r[:, 1].mean():.2f} | {r[:, 2].mean():.2f} | {np.mean(r[:, 2] > 1e-9):.0%} | "
              f"{np.mean(r[:, 2] >= -1e-9):.0%}", flush=True)
    hits = 0
    total = 0
    for params in (ShowerParams.w(), ShowerParams.qcd(t_cut=4.0)):
        for jet in generate(args.jets, params, seed=11, min_leaves=12, max_leaves=16):
            ref = exact_trellis(jet, progress=False).log_likelihood
            a = astar_approx(jet, progress=False).log_likelihood
            hits += abs(a - ref) <= 1e-9 * (1 + abs(ref))
            total += 1
    print(f"12-16 leaves: exact MAP reached on {hits}/{total} jets ({hits / total:.0%})")


def _scale_slack(jet, tree) -> list[float]:
    """x − 1 − log x of every continuing child of the MAP tree (x = λ t / T, the better ordering)."""
    lam = jet.params.lam
    mom = np.asarray(tree.node_momenta(jet.leaves))
    t = mom[:, 0] ** 2 - (mom[:, 1:] ** 2).sum(axis=1)
    ch = tree.children
    out: list[float] = []
    for u in range(len(ch)):
        a, b = ch[u]
        if a < 0 or u == tree.root:
            continue
        best = None
        for first, second in ((a, b), (b, a)):
            scales = (t[u], (np.sqrt(t[u]) - np.sqrt(max(t[first], 0.0))) ** 2)
            value, slack = 0.0, []
            for v, scale in zip((first, second), scales, strict=True):
                if ch[v][0] >= 0:
                    x = lam * t[v] / scale
                    value += np.log(lam / scale) - x
                    slack.append(x - 1 - np.log(x))
            if best is None or value > best[0]:
                best = (value, slack)
        out += best[1]
    return out


def prune(args: argparse.Namespace) -> None:
    gs = (0.0, 0.25, 0.5, 0.78, 1.0)
    print("N | MAP slack/child | root splits not prunable: h0 | " +
          " | ".join(f"oracle g={g}" for g in gs))
    for n in (int(x) for x in args.sizes.split(",")):
        jets = generate(args.jets, ShowerParams.qcd(t_cut=1.0), seed=77, min_leaves=n,
                        max_leaves=n)
        slack: list[float] = []
        frac = []
        for jet in jets:
            tr = Trellis(jet, progress=False)
            slack += _scale_slack(jet, tr.map_tree())
            best = tr.map_array()
            bound = _all_bounds(0, *heuristic_tables(jet, "symmetric"))
            sizes = np.array([bin(m).count("1") for m in range(1 << n)])
            extra = np.where(sizes > EXACT_MAX_LEAVES, np.maximum(sizes - 2, 0), 0)
            full = (1 << n) - 1
            opt = best[full]
            p = np.asarray(jet.leaves)
            counts = np.zeros(len(gs) + 1)
            total = 0
            for left in range(1, 1 << (n - 1)):
                right = full ^ left
                pl = p[[i for i in range(n) if left >> i & 1]].sum(axis=0)
                pr = p[[i for i in range(n) if right >> i & 1]].sum(axis=0)
                psi = split_log_likelihood(pl, pr, jet.params.t_cut, jet.params.lam_root)
                if not np.isfinite(psi):
                    continue
                total += 1
                tol = 1e-9 * abs(opt)
                counts[0] += psi + bound[left] + bound[right] >= opt - tol
                for k, g in enumerate(gs):
                    v = psi + best[left] + best[right] + g * (extra[left] + extra[right])
                    counts[k + 1] += v >= opt - tol
            frac.append(counts / total)
        f = np.mean(frac, axis=0)
        print(f"{n} | {np.mean(slack):.2f} | {f[0]:.3f} | " + " | ".join(f"{x:.3f}" for x in f[1:]),
              flush=True)


@nb.njit
def _explored_splits(p, tl, consts, cost_bound, c_star, small):  # pragma: no cover - numba
    """Splits exact A* must score with the heuristic cost ``cost_bound`` (−h per subset mask).

    A vertex S with more than ``small`` leaves is explored only if a partial tree with S open has
    ``f ≤ C*``; the least ``f`` of such trees is ``ctx(S) + H(S)`` with ``ctx`` the cheapest context
    above S (its splits' costs plus H of the other open clusters), computed top-down over all
    subsets (a superset has a larger mask). Contexts with explored siblings' better bounds only
    raise ``f``, so this counts every split A* can score (it matches the measured counts).
    """
    n = p.shape[0]
    nm = 1 << n
    full = nm - 1
    pp, t, size = subset_masses(np.arange(n), n, p, tl, consts[0])
    ctx = np.full(nm, np.inf)
    ctx[full] = 0.0
    n_splits = 0
    for x in range(full, 0, -1):
        if size[x] <= small or ctx[x] == np.inf:
            continue
        hx = 0.0 if x == full else cost_bound[x]
        if ctx[x] + hx > c_star + 1e-9 * abs(c_star):
            continue
        c = consts[1] if x == full else consts[0]
        t_x = t_of(pp[x, 0], pp[x, 1], pp[x, 2], pp[x, 3])
        low = x & -x
        rest = x ^ low
        sub = (rest - 1) & rest
        while True:
            a = low | sub
            b = x ^ a
            n_splits += 1
            psi = split_llh(t[a], t[b], t_x, c)
            if psi > -np.inf:
                base = ctx[x] - psi
                if base + cost_bound[b] < ctx[a]:
                    ctx[a] = base + cost_bound[b]
                if base + cost_bound[a] < ctx[b]:
                    ctx[b] = base + cost_bound[a]
            if sub == 0:
                break
            sub = (sub - 1) & rest
    return n_splits


@nb.njit
def _min_masses(t, n):  # pragma: no cover - numba
    """``out[S, k]``: the least squared mass of a ``k``-leaf subset of ``S`` (every mask ``S``)."""
    out = np.full((1 << n, n + 1), np.inf)
    for s in range(1, 1 << n):
        k = 0
        for i in range(n):
            k += (s >> i) & 1
        out[s, k] = t[s]
        for i in range(n):
            r = s ^ (1 << i)
            if (s >> i) & 1 and r:
                for kk in range(1, k):
                    if out[r, kk] < out[s, kk]:
                        out[s, kk] = out[r, kk]
    return out


@nb.njit
def _bounds_min_masses(h0, p, tl, mt, w, d, consts, phys, floor):  # pragma: no cover - numba
    """h0 with its shape DP given the exact least mass of every subset size (an oracle bound)."""
    n = p.shape[0]
    out = h0.copy()
    idx = np.empty(n, dtype=np.int64)
    for m in range(1, 1 << n):
        k, t_s = _subset(m, p, idx)
        if k <= EXACT_MAX_LEAVES or h0[m] == -np.inf:
            continue
        v = _h0_shapes(idx, k, t_s, p, tl, mt, w, d, consts[0], phys[0] != 0, floor[m])
        v += _SLACK * (1.0 + abs(v))
        if v < out[m]:
            out[m] = v
    return out


def explore(args: argparse.Namespace) -> None:
    ks = (6, 8)
    gs = (0.5, 0.25, 0.0)
    print("N | A* measured | estimate: h0 | h0, exact least masses | " +
          " | ".join(f"exact <= {k} + h0" for k in ks) + " | " +
          " | ".join(f"oracle g={g}" for g in gs) + "   (fraction of the trellis splits) | "
          "time of h0 on every subset / trellis")
    for n in (int(x) for x in args.sizes.split(",")):
        jets = generate(args.jets, ShowerParams.qcd(t_cut=1.0), seed=77, min_leaves=n,
                        max_leaves=n)
        sizes = np.array([bin(m).count("1") for m in range(1 << n)])
        total = (3**n - 2 ** (n + 1) + 1) / 2
        rows = []
        times = []
        for jet in jets:
            tabs = heuristic_tables(jet, "symmetric")
            p, tl, consts = tabs[0], tabs[1], tabs[5]
            t0 = time.perf_counter()
            best = Trellis(jet, progress=False).map_array()
            t1 = time.perf_counter()
            h0 = _all_bounds(0, *tabs)
            t2 = time.perf_counter()
            c_star = -best[-1]
            t_sub = subset_masses(np.arange(n), n, p, tl, consts[0])[1]
            h0m = _bounds_min_masses(h0, *tabs, _min_masses(t_sub, n))
            row = [astar(jet, progress=False).stats["split_fraction"],
                   _explored_splits(p, tl, consts, -h0, c_star, EXACT_MAX_LEAVES),
                   _explored_splits(p, tl, consts, -h0m, c_star, EXACT_MAX_LEAVES)]
            for k in ks:
                row.append(_explored_splits(p, tl, consts, -np.where(sizes <= k, best, h0), c_star, k))
            extra = np.where(sizes > EXACT_MAX_LEAVES, np.maximum(sizes - 2, 0), 0)
            for g in gs:
                row.append(_explored_splits(p, tl, consts, -(best + g * extra), c_star,
                                            EXACT_MAX_LEAVES))
            rows.append([row[0]] + [x / total for x in row[1:]])
            times.append((t2 - t1, t1 - t0))
        med = np.median(rows, axis=0)
        t_h, t_tr = np.median(times, axis=0)
        print(f"{n} | " + " | ".join(f"{x:.3f}" for x in med) + f" | {t_h:.2f} s / {t_tr:.2f} s",
              flush=True)


def budgets(args: argparse.Namespace) -> None:
    """Wall and CPU time of ``astar`` / ``astar_approx`` / ``window_search`` / ``exact_map`` under
    ``max_time`` on large jets (the budget must hold within ~10 %, the seeding, table set-up and
    reading the result out included)."""
    from jetastar.clustering import astar, astar_approx, exact_map, window_search
    from jetastar.ginkgo import ShowerParams, generate

    warm = generate(1, ShowerParams.qcd(), seed=1, max_leaves=6)[0]
    astar(warm)
    astar_approx(warm, max_time=0.1)
    jets = [*generate(args.jets, ShowerParams.qcd(t_cut=1.0), seed=41, min_leaves=20, max_leaves=30),
            *generate(args.jets, ShowerParams.qcd(t_cut=0.1), seed=42, min_leaves=60, max_leaves=100)]
    limits = [float(x) for x in args.limits.split(",")]
    print(f"{'method':>13} {'leaves':>6} " + " ".join(f"{'wall/cpu @' + str(m):>20}" for m in limits))
    methods = (("astar_approx", astar_approx), ("astar", astar), ("window_search", window_search),
               ("exact_map", exact_map))
    for name, fn in methods:
        for jet in jets:
            if name == "exact_map" and jet.n_leaves > 24:  # its tables: 41 bytes x 2^N
                continue
            cells = []
            for m in limits:
                t, c = time.perf_counter(), time.process_time()
                res = fn(jet, max_time=m)
                wall, cpu = time.perf_counter() - t, time.process_time() - c
                cells.append(f"{wall:8.3f}/{cpu:6.3f} {res.status[0]:>4}")
            print(f"{name:>13} {jet.n_leaves:6d} " + " ".join(f"{c:>20}" for c in cells), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    sub = parser.add_subparsers(dest="what", required=True)
    h = sub.add_parser("heuristics")
    h.add_argument("--max-leaves", type=int, default=12)
    h.add_argument("--random", type=int, default=20)
    e = sub.add_parser("exact")
    e.add_argument("--sizes", default="10-16")
    e.add_argument("--jets", type=int, default=10)
    e.add_argument("--max-time", type=float, default=600.0)
    e.add_argument("--max-memory", type=lambda x: int(float(x)), default=None,
                   help="memory budget in bytes (default: that of astar, a third of the RAM)")
    a = sub.add_parser("approx")
    a.add_argument("--jets", type=int, default=10)
    pr = sub.add_parser("prune")
    pr.add_argument("--sizes", default="12,14")
    pr.add_argument("--jets", type=int, default=6)
    ex = sub.add_parser("explore")
    ex.add_argument("--sizes", default="12,14")
    ex.add_argument("--jets", type=int, default=6)
    bu = sub.add_parser("budgets")
    bu.add_argument("--jets", type=int, default=2)
    bu.add_argument("--limits", default="0.2,0.5,1,2")
    args = parser.parse_args()
    {"budgets": budgets, "heuristics": heuristics, "exact": exact, "approx": approx, "prune": prune,
     "explore": explore}[args.what](args)


if __name__ == "__main__":
    main()
