"""Benchmark of the columnar path: CPU and wall time per jet of greedy and the kt family on whole
collections, against FastJet's awkward interface, on the same jets.

Run on demand (not collected by pytest)::

    python tests/benchmarks/bench_columnar.py                 # 3000 jets of ~8 and of ~20 leaves
    python tests/benchmarks/bench_columnar.py --jets 1000 --repeat 5
    PYTHONPATH=/path/to/other/checkout python tests/benchmarks/bench_columnar.py --only-cluster

Rows, per algorithm and jet sample (QCD jets with the default parameters, ~7.6 leaves, and with
``t_cut = 1`` GeV², ~20 leaves):

* ``jetastar.cluster``: ``jetastar.cluster(jets, name)`` on the collection, end to end (a
  results table with trees, log-likelihoods and statuses);
* ``columnar kernel``: :func:`jetastar.clustering.chunks.cluster_columns` alone (the kernel call
  and its flat arrays, without the results table);
* ``FastJet awkward``: ``fastjet.ClusterSequence(awkward_array, JetDefinition(alg, 1000))`` and
  its ``inclusive_jets()`` (the clustering of every jet in FastJet's C++ loop; the `fastjet`
  extra), kt family only.

``--exact``: the exact MAP engine (``"trellis"``) on QCD jets of at most 10 leaves (default
parameters): ``jetastar.cluster`` and ``columnar kernel`` as above, serial (``parallel=False``) and
on numba's threads, and ``per-jet exact_map`` (a loop of :func:`jetastar.clustering.exact_map`
over the first 500 jets), with jets per second (wall) besides the times per jet.

``--log-z``: the full trellis (``"trellis"`` with ``log_z``: MAP, log Z and tree count) on the
same jets as ``--exact``: ``jetastar.cluster``, ``columnar kernel`` (serial and on numba's
threads), ``exact_trellis_batch`` (the columnar path, results as objects) and ``per-jet
exact_trellis`` (a loop of :func:`jetastar.clustering.exact_trellis` over the first 500 jets).

``--beam``: beam search (default options) on the two samples (``--jets 1000`` keeps it to a
few minutes): ``jetastar.cluster`` and, unless
``--only-cluster``, ``columnar kernel`` (``cluster_columns(jets, {"beam": {}})``, serial and on
numba's threads) and ``per-jet beam_search`` (a loop of
:func:`jetastar.clustering.beam_search` over the jets).

``--mcts``: MCTS (default options), as ``--beam`` (``per-jet mcts``: a loop of
:func:`jetastar.clustering.mcts`).

``--window``: the window search (default options), as ``--beam`` but on default QCD and W jets
(its jets of up to 14 leaves, proven by the exact MAP engine, are the columnar path's; a 20-leaf
jet is searched one at a time either way): ``per-jet window_search`` is a loop of
:func:`jetastar.clustering.window_search`.

``--deadline``: beam search with ``max_time`` on a 400-leaf jet (leaves of QCD jets with
``t_cut = 0.05`` GeV² put together; the whole search would take an hour): the wall and CPU time
until it returns, for ``max_time`` 1 and 5 s.

``--big``: greedy on jets of 500, 1000 and 2000 leaves (leaves of QCD jets with ``t_cut = 0.05``
GeV² put together, as for ``--deadline``), both likelihood forms: CPU seconds and split evaluations.

Each number is the best of ``--repeat`` runs (after a warm-up run, so that numba compilation is
not counted): ``cpu`` is ``time.process_time`` (all threads of this process), ``wall`` is
``time.perf_counter``, both divided by the number of jets. ``--only-cluster`` times only
``jetastar.cluster`` (to measure another checkout of the package, e.g. the one before the
columnar path, on the same jets).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import jetastar
from jetastar.ginkgo import ShowerParams, generate

ALGORITHMS = ("greedy", "kt", "cambridge", "antikt")
FJ_NAMES = {"kt": "kt_algorithm", "cambridge": "cambridge_algorithm",
            "antikt": "antikt_algorithm"}


def _best(fn: Callable[[], Any], repeat: int) -> tuple[float, float]:
    fn()  # warm-up: compilation and caches
    cpu, wall = [], []
    for _ in range(repeat):
        c0, w0 = time.process_time(), time.perf_counter()
        fn()
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    return min(cpu), min(wall)


def _fastjet_runner(jets: Any, name: str) -> Callable[[], Any] | None:
    try:
        import awkward as ak
        import fastjet
    except ImportError:
        return None
    leaves = jets.leaves
    counts = np.diff(jets.leaf_offsets)
    records = ak.zip({"px": leaves[:, 1], "py": leaves[:, 2], "pz": leaves[:, 3],
                      "E": leaves[:, 0]}, with_name="Momentum4D")
    array = ak.unflatten(records, counts)
    jet_def = fastjet.JetDefinition(getattr(fastjet, FJ_NAMES[name]), 1000.0)

    def run() -> Any:
        return fastjet.ClusterSequence(array, jet_def).inclusive_jets()

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jets", type=int, default=3000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only-cluster", action="store_true")
    parser.add_argument("--exact", action="store_true", help="the exact MAP of <= 10-leaf jets")
    parser.add_argument("--log-z", action="store_true", help="the full trellis of <= 10-leaf jets")
    parser.add_argument("--beam", action="store_true", help="beam search, default options")
    parser.add_argument("--mcts", action="store_true", help="MCTS, default options")
    parser.add_argument("--window", action="store_true", help="window search, default options")
    parser.add_argument("--deadline", action="store_true", help="beam max_time, 400 leaves")
    parser.add_argument("--big", action="store_true", help="greedy on 500-2000 leaves")
    args = parser.parse_args()
    if args.big:
        _big(args.repeat)
        return
    if args.exact or args.log_z:
        _exact(args.jets, args.repeat, args.log_z)
        return
    if args.deadline:
        _deadline()
        return
    if args.beam or args.mcts or args.window:
        name = "beam" if args.beam else "mcts" if args.mcts else "window-search"
        _search(name, args.jets, args.repeat, args.only_cluster)
        return
    samples = {
        "QCD default": generate(args.jets, ShowerParams.qcd(), seed=2033),
        "QCD t_cut=1": generate(args.jets, ShowerParams.qcd(t_cut=1.0), seed=2034),
    }
    print(f"jetastar {jetastar.__version__} from {jetastar.__file__}")
    print(f"{'sample':<13} {'leaves':>6} {'algorithm':<10} {'what':<17} {'cpu µs/jet':>11} "
          f"{'wall µs/jet':>11}")
    for label, jets in samples.items():
        mean = float(np.mean(jets.n_leaves))
        for name in ALGORITHMS:
            rows: list[tuple[str, Callable[[], Any]]] = [
                ("jetastar.cluster", lambda jets=jets, name=name: jetastar.cluster(jets, name)),
            ]
            if not args.only_cluster:
                from jetastar.clustering.chunks import cluster_columns

                rows.append(("columnar kernel",
                             lambda jets=jets, name=name: cluster_columns(jets, {name: {}})))
                if name in FJ_NAMES:
                    fj = _fastjet_runner(jets, name)
                    if fj is not None:
                        rows.append(("FastJet awkward", fj))
            for what, fn in rows:
                cpu, wall = _best(fn, args.repeat)
                print(f"{label:<13} {mean:6.1f} {name:<10} {what:<17} "
                      f"{1e6 * cpu / len(jets):11.2f} {1e6 * wall / len(jets):11.2f}", flush=True)


def _exact(n_jets: int, repeat: int, log_z: bool = False) -> None:
    """The exact MAP (``log_z``: the full trellis) of small jets: columnar path against the
    per-jet engine."""
    from jetastar.clustering import exact_map, exact_trellis, exact_trellis_batch
    from jetastar.clustering.chunks import cluster_columns

    jets = generate(n_jets, ShowerParams.qcd(), seed=2035, max_leaves=10)
    print(f"jetastar {jetastar.__version__} from {jetastar.__file__}")
    print(f"{len(jets)} QCD jets of <= 10 leaves, {np.mean(jets.n_leaves):.2f} leaves on average"
          f"{', full trellis (log Z)' if log_z else ', exact MAP'}")
    print(f"{'what':<28} {'cpu µs/jet':>11} {'wall µs/jet':>11} {'jets/s':>9}")
    few = [jets[i] for i in range(min(500, len(jets)))]
    options = {"log_z": True} if log_z else {}
    rows: list[tuple[str, Callable[[], Any], int]] = [
        ("jetastar.cluster", lambda: jetastar.cluster(jets, "trellis", **options), len(jets)),
        ("columnar kernel, serial",
         lambda: cluster_columns(jets, {"trellis": options}, parallel=False), len(jets)),
        ("columnar kernel, threads",
         lambda: cluster_columns(jets, {"trellis": options}, parallel=True), len(jets)),
    ]
    if log_z:
        rows += [
            ("exact_trellis_batch", lambda: exact_trellis_batch(jets, progress=False), len(jets)),
            ("per-jet exact_trellis", lambda: [exact_trellis(j) for j in few], len(few)),
        ]
    else:
        rows.append(("per-jet exact_map", lambda: [exact_map(j) for j in few], len(few)))
    for what, fn, count in rows:
        cpu, wall = _best(fn, repeat)
        print(f"{what:<28} {1e6 * cpu / count:11.2f} {1e6 * wall / count:11.2f} "
              f"{count / wall:9.0f}", flush=True)


def _search(name: str, n_jets: int, repeat: int, only_cluster: bool) -> None:
    """Beam search, MCTS or the window search (``name``, default options): the columnar path
    against the per-jet function."""
    from jetastar.clustering import beam_search, mcts, window_search

    per_jet = {"beam": beam_search, "mcts": mcts, "window-search": window_search}[name]

    samples = {
        "QCD default": generate(n_jets, ShowerParams.qcd(), seed=2033),
        "QCD t_cut=1": generate(n_jets, ShowerParams.qcd(t_cut=1.0), seed=2034),
    }
    if name == "window-search":
        samples["W default"] = samples.pop("QCD t_cut=1")
        samples["W default"] = generate(n_jets, ShowerParams.w(), seed=2034)
    print(f"jetastar {jetastar.__version__} from {jetastar.__file__}")
    print(f"{'sample':<13} {'leaves':>6} {'what':<28} {'cpu µs/jet':>11} {'wall µs/jet':>11}")
    for label, jets in samples.items():
        mean = float(np.mean(jets.n_leaves))
        rows: list[tuple[str, Callable[[], Any]]] = [
            ("jetastar.cluster", lambda jets=jets: jetastar.cluster(jets, name)),
        ]
        if not only_cluster:
            from jetastar.clustering.chunks import cluster_columns

            one = [jets[i] for i in range(len(jets))]
            rows += [
                ("columnar kernel, serial",
                 lambda jets=jets: cluster_columns(jets, {name: {}}, parallel=False)),
                ("columnar kernel, threads",
                 lambda jets=jets: cluster_columns(jets, {name: {}}, parallel=True)),
                (f"per-jet {per_jet.__name__}", lambda one=one: [per_jet(j) for j in one]),
            ]
        for what, fn in rows:
            cpu, wall = _best(fn, repeat)
            print(f"{label:<13} {mean:6.1f} {what:<28} {1e6 * cpu / len(jets):11.2f} "
                  f"{1e6 * wall / len(jets):11.2f}", flush=True)


def _big(repeat: int) -> None:
    """Greedy on big jets: CPU seconds (best of ``repeat``) and split evaluations."""
    from jetastar import Jet
    from jetastar.clustering import greedy

    params = ShowerParams.qcd(t_cut=0.05)
    leaves = np.concatenate([j.leaves for j in generate(300, params, seed=7)])
    print(f"jetastar {jetastar.__version__} from {jetastar.__file__}")
    greedy(Jet(leaves[:50], params))  # compile
    for n in (500, 1000, 2000):
        jet = Jet(leaves[:n], params, jet_id=n)
        for likelihood in ("symmetric", "legacy"):
            cpu = []
            for _ in range(max(1, repeat)):
                c0 = time.process_time()
                res = greedy(jet, likelihood=likelihood)
                cpu.append(time.process_time() - c0)
            print(f"greedy, {n} leaves, {likelihood}: {min(cpu):.3f} s CPU, "
                  f"{res.stats['splits_evaluated']} split evaluations", flush=True)


def _deadline() -> None:
    """Beam search on a 400-leaf jet under a max_time: how long until it returns."""
    from jetastar import Jet
    from jetastar.clustering import beam_search

    params = ShowerParams.qcd(t_cut=0.05)
    leaves = np.concatenate([j.leaves for j in generate(60, params, seed=7)])[:400]
    jet = Jet(leaves, params, jet_id=0)
    beam_search(jet, beam_size=3, max_time=0.1)  # compile
    for max_time in (1.0, 5.0):
        c0, w0 = time.process_time(), time.perf_counter()
        res = beam_search(jet, max_time=max_time)
        print(f"beam, {jet.n_leaves} leaves, max_time={max_time:g} s: back after "
              f"{time.perf_counter() - w0:.2f} s wall, {time.process_time() - c0:.2f} s CPU, "
              f"status {res.status!r}, merge levels done {res.stats['levels_done']}", flush=True)


if __name__ == "__main__":
    main()
