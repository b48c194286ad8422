"""Every algorithm's results on a fixed set of benchmark jets, written to a file and compared bit for
bit with another checkout's: the check that a change which should not change results (a refactor,
a faster kernel) did not.

Run on demand (not collected by pytest)::

    python tests/benchmarks/snapshot_results.py write before.pkl          # on the old checkout
    python tests/benchmarks/snapshot_results.py write after.pkl           # on the new one
    python tests/benchmarks/snapshot_results.py compare before.pkl after.pkl

The jets: default QCD and W jets (seeds 11 and 12) and QCD jets with ``t_cut = 4`` GeV² (seed 13),
both likelihood forms. Each registered algorithm runs

* per jet, through :func:`jetastar.clustering.cluster` (the exact methods on jets of up to their
  size limit and at most 12 leaves, A* and MCTS on at most 10),
* on the whole collection, through ``jetastar.cluster(jets, name)`` (the columnar path where it
  applies, the batch machinery otherwise),

and the snapshot keeps, per result, the tree (its nested form), the log-likelihood, status,
message, ``exact``, ``upper_bound``, ``log_z``, ``n_trees``, the options and every statistic but
the run times and the thread count. ``compare`` reports each difference (floats compared as
bits: ``-0.0`` and ``0.0`` differ, NaN equals NaN) and exits 1 when there is one.
"""

from __future__ import annotations

import argparse
import pickle
import sys
from typing import Any

import numpy as np

#: statistics that depend on the machine, not on the result (besides times: ``time_*``, ``*_s``)
_MACHINE = ("threads",)
#: per-jet runs of an algorithm stop at this many leaves (exact searches are exponential)
_PER_JET_MAX = {"astar": 10, "mcts": 10, "astar-approx": 12}
_EXACT_MAX = 12


def _jets() -> list[tuple[str, Any]]:
    from jetastar.ginkgo import ShowerParams, generate

    return [
        ("qcd", generate(40, ShowerParams.qcd(), seed=11)),
        ("w", generate(30, ShowerParams.w(), seed=12)),
        ("qcd4", generate(20, ShowerParams.qcd(t_cut=4.0), seed=13, max_leaves=16)),
    ]


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return [_plain(v) for v in value.tolist()]
    if isinstance(value, (np.floating, float)):
        return ("f", float(value).hex())
    if isinstance(value, (np.integer,)):
        return int(value)
    return value


def _kept(stats: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in stats.items()
            if not (k.startswith("time") or k.endswith("_s") or k in _MACHINE)}


def _record(result: Any) -> dict[str, Any]:
    stats = _kept(result.stats)
    return _plain({
        "tree": None if result.tree is None else repr(result.tree.to_nested()),
        "log_likelihood": result.log_likelihood, "status": result.status,
        "message": result.message, "exact": result.exact, "upper_bound": result.upper_bound,
        "log_z": result.log_z, "n_trees": result.n_trees, "options": dict(result.options),
        "stats": stats, "algorithm": result.algorithm,
    })


def write(path: str) -> None:
    import jetastar
    from jetastar.clustering import algorithm_info, algorithms, cluster

    snapshot: dict[str, Any] = {}
    samples = _jets()
    for name in algorithms():
        info = algorithm_info(name)
        limit = _PER_JET_MAX.get(name, min(info.max_leaves or _EXACT_MAX, _EXACT_MAX)
                                 if info.exact else None)
        accepted = set(info.options())
        for form in ("symmetric", "legacy"):
            opts = {"likelihood": form} if "likelihood" in accepted else {}
            if "progress" in accepted:
                opts["progress"] = False
            for label, jets in samples:
                key = f"{name}/{form}/{label}"
                print(key, file=sys.stderr, flush=True)
                rows = []
                for jet in jets:
                    if limit is not None and jet.n_leaves > limit:
                        continue
                    rows.append(_record(cluster(jet, name, **opts)))
                snapshot[f"per-jet/{key}"] = rows
                small = [j for j in jets if limit is None or j.n_leaves <= limit]
                table = jetastar.cluster(type(jets).from_jets(small), name, **opts)
                snapshot[f"collection/{key}"] = [_record(table.result(i))
                                                 for i in range(len(table))]
    with open(path, "wb") as f:
        pickle.dump(snapshot, f)
    print(f"{sum(len(v) for v in snapshot.values())} results in {len(snapshot)} groups -> {path}")


def _diff(a: Any, b: Any, where: str, out: list[str]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                out.append(f"{where}.{k}: only in {'after' if k not in a else 'before'}")
            else:
                _diff(a[k], b[k], f"{where}.{k}", out)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _diff(x, y, f"{where}[{i}]", out)
    elif a != b:
        out.append(f"{where}: {a!r} != {b!r}")


def compare(before: str, after: str) -> int:
    with open(before, "rb") as f:
        a = pickle.load(f)
    with open(after, "rb") as f:
        b = pickle.load(f)
    for snapshot in (a, b):  # (older snapshots kept every statistic)
        for rows in snapshot.values():
            for row in rows:
                row["stats"] = _kept(row["stats"])
    out: list[str] = []
    _diff(a, b, "", out)
    n = sum(len(v) for v in a.values())
    for line in out[:200]:
        print(line)
    print(f"{n} results in {len(a)} groups compared: "
          f"{'equal bit for bit' if not out else f'{len(out)} differences'}")
    return 1 if out else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    w = sub.add_parser("write")
    w.add_argument("path")
    c = sub.add_parser("compare")
    c.add_argument("before")
    c.add_argument("after")
    args = parser.parse_args(argv)
    if args.command == "write":
        write(args.path)
        return 0
    return compare(args.before, args.after)


if __name__ == "__main__":
    sys.exit(main())
