"""Speed of the tree observables, the -inf diagnosis and in-memory clustering (run on demand).

Usage::

    python tests/benchmarks/bench_observables.py [--jets 20000]

Prints wall and CPU time of :func:`jetastar.observables.tree_observables`,
:func:`jetastar.observables.lund_declustering`, :func:`jetastar.diagnostics.tree_reasons` on the
truth trees of default W jets, and of :func:`jetastar.inmemory.cluster_jets` (greedy + kt, in this
process) on a tenth of them. Kernels are loaded (or compiled) before timing.
"""

from __future__ import annotations

import argparse
import time

from jetastar.diagnostics import tree_reasons
from jetastar.ginkgo import ShowerParams, generate
from jetastar.inmemory import cluster_jets
from jetastar.observables import lund_declustering, tree_observables


def _time(label: str, n: int, func) -> None:
    wall, cpu = time.perf_counter(), time.process_time()
    func()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(f"{label:<34} {n:>7} jets  wall {wall:7.3f} s  cpu {cpu:7.3f} s  "
          f"({1e6 * wall / max(n, 1):.1f} us/jet)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jets", type=int, default=20000)
    args = parser.parse_args()
    jets = generate(args.jets, ShowerParams.w(), seed=1)
    tree_observables(jets[:5])
    tree_reasons(jets[:5])
    cluster_jets(jets[:5], "greedy,kt", progress=False)
    print(f"{args.jets} default W jets, mean {jets.n_leaves.mean():.1f} leaves")
    _time("tree_observables (truth)", len(jets), lambda: tree_observables(jets))
    _time("lund_declustering (truth)", len(jets), lambda: lund_declustering(jets))
    _time("tree_reasons (truth)", len(jets), lambda: tree_reasons(jets))
    sub = jets[: max(1, len(jets) // 10)]
    _time("cluster_jets greedy+kt (1 process)", len(sub),
          lambda: cluster_jets(sub, "greedy,kt", progress=False))


if __name__ == "__main__":
    main()
