"""``jetastar run``: the main job on built-in defaults — generate QCD + W jets, cluster them with
every algorithm, write HDF5 + ROOT results, print and plot the comparison."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np

from .. import io
from .._jit import one_notice_for_workers
from ..batch import (
    BatchConfig,
    check_config,
    load_registry,
    make_executor,
    parse_options,
    run_batch,
    shutdown_executor,
    warm_up_workers,
)
from ..batch.executors import warm_up_estimate
from ..clustering import algorithm_info, algorithms
from ..comparison import comparison_table, format_comparison
from ..errors import BatchError
from ..inmemory import JetResults
from ..io import set_extras
from ..jet import JetCollection
from .cmd_algorithms import add_algorithm_listing
from .cmd_compare import plot_comparison
from .shared import (
    UsageError,
    add_cluster_options,
    add_common,
    check_writable,
    command_line,
    count_value,
    echo,
    generate_collection,
    leaves_value,
    print_summaries,
    seed_value,
    split_list,
)

__all__ = ["add_parser", "run", "write_demo_jets"]

#: the main job's jets have at most this many leaves (each still gets its exact MAP: ~0.1 s at 16
#: leaves, ~2 s at 20; 20 until 2026-12-07, when the 17-20-leaf W jets took three quarters of a
#: warm run's clustering time: ~35 CPU-s for the run instead of ~13)
_DEMO_MAX_LEAVES = 16
#: the per-jet time budget of the exact MAP method (``main_job="map"`` in its registry entry) in
#: `jetastar run` (the bundled jets need at most ~1 min)
_MAP_TIME_LIMIT = 600.0


def _main_job(role: str) -> list[str]:
    """The registered algorithms whose ``main_job`` is ``role`` (``"on"``, ``"off"``, ``"map"``:
    :data:`~jetastar.clustering.registry.MAIN_JOB`)."""
    return [a for a in algorithms() if algorithm_info(a).main_job == role]


def run(args: argparse.Namespace) -> int:
    """Run the main job (its own process pool, stopped at once on an interrupt); returns the exit
    code."""
    with one_notice_for_workers():
        executor, _ = make_executor(args.workers, None, args.plugin or ())
        interrupted = False
        try:
            return _run_main_job(args, executor)
        except BaseException:
            interrupted = True
            raise
        finally:
            if executor is not None:
                shutdown_executor(executor, interrupted=interrupted)


def _run_main_job(args: argparse.Namespace, executor: Any) -> int:
    """The main job on ``executor`` (``None``: in this process)."""
    load_registry(args.plugin or [])
    out = Path(args.output)
    check_writable(out, folder=True)
    t0 = time.perf_counter()
    names = split_list(args.algorithms)
    left_out: list[str] = []
    if not names:
        # the demonstration is quick: what compiles and runs for longest is left out
        left_out = _main_job("off")
        names = [a for a in algorithms() if a not in left_out]
    elif names == ["all"]:
        names = algorithms()
    if not names:
        raise UsageError("no clustering algorithms are registered")
    max_leaves = {}
    try:
        options = parse_options(args.option or [])
    except BatchError as exc:
        raise UsageError(str(exc)) from None
    for name in names:
        try:
            info = algorithm_info(name)
        except ValueError as exc:  # an unknown name is a usage error (exit 2)
            raise UsageError(str(exc)) from None
        if info.main_job == "map":
            # every bundled jet gets its exact MAP: the MAP method is not held to the per-jet limit
            options.setdefault(name, {}).setdefault("max_time", _MAP_TIME_LIMIT)
        elif info.exact:
            limit = args.exact_max_leaves if info.max_leaves is None else \
                min(info.max_leaves, args.exact_max_leaves)
            max_leaves[name] = limit
    config = BatchConfig(algorithms=names, options=options, time_limit=args.time_limit,
                         max_leaves=max_leaves, plugins=list(args.plugin or []),
                         chunk_size=args.chunk_size, threads=args.threads,
                         device=args.device)
    try:  # every option is checked before the jets are generated
        check_config(config)
    except BatchError as exc:  # a bad name, option or value: a usage error (exit 2)
        raise UsageError(str(exc)) from None
    out.mkdir(parents=True, exist_ok=True)  # (after the checks: no empty folder for a typo)
    echo(f"jetastar run -> {out}/  (algorithms: {', '.join(names)})")
    if left_out:
        echo(f"  left out for speed: {', '.join(left_out)} (--algorithms all runs every algorithm)")
    jets_path = out / "jets.h5"
    jobs = (args.n_qcd, args.n_w, args.seed, args.max_jet_leaves, jets_path, command_line())
    if executor is not None:
        # a worker generates the jets while the others compile (or load) the clustering kernels:
        # on a cold cache this process compiles nothing (it compiled the generator and the
        # likelihood, which the workers compile or load as well, while both cores compiled).
        # Every worker starts within the block, so its compile notice carries the estimate; the
        # warm-up leaves out kernels that only jets above the cap call.
        with warm_up_estimate(config, max(2, args.workers), largest_jet=args.max_jet_leaves):
            made = executor.submit(write_demo_jets, *jobs)
            warm_up_workers(executor, config, max(2, args.workers),
                            largest_jet=args.max_jet_leaves)
        _load_output_modules()  # (meanwhile)
        made.result()
    else:
        write_demo_jets(*jobs)
    cap = (f"at most {args.max_jet_leaves} leaves each (--max-jet-leaves none lifts the cap)"
           if args.max_jet_leaves is not None else "no cap on the number of leaves")
    echo(f"generated {args.n_qcd} QCD + {args.n_w} W jets (seeds {args.seed}, {args.seed + 1}; "
         f"{cap}) -> {jets_path}")
    results_h5 = out / "results.h5"
    summaries = run_batch([jets_path], config, output=results_h5, workers=args.workers,
                          executor=executor, progress=not args.no_progress, fresh=True,
                          attrs={"command": command_line()})
    if executor is not None:  # the workers end while the results are written and compared
        shutdown_executor(executor, wait=False)
    code = print_summaries(summaries)
    if code:
        return code
    tables = io.read_results(results_h5)
    _print_times(tables)
    results_root = out / "results.root"
    jets = io.read(results_h5, validate=False)
    io.write(results_root, jets, tables, attrs={"command": command_line(), "seed": args.seed})
    echo(f"results: {results_h5} and {results_root}")
    # (from what was read: the same rows as from the file, without reading it a third time)
    rows = comparison_table(JetResults(jets, tables))
    text = format_comparison(rows)
    echo("")
    echo(text)
    (out / "comparison.txt").write_text(text + "\n", encoding="utf-8")
    plot_comparison(rows, out / "comparison.png")
    echo("")
    echo(f"comparison table: {out / 'comparison.txt'}; plot: {out / 'comparison.png'} "
         f"({time.perf_counter() - t0:.0f} s in total)")
    return 0


def write_demo_jets(n_qcd: int, n_w: int, seed: int, max_leaves: int | None, path: Path,
                    command: str) -> None:
    """Generate the main job's jets (``n_qcd`` QCD jets with ``seed``, ``n_w`` W jets with
    ``seed + 1``, ids in that order) with their generator details and write them to ``path``
    (a top-level function: a worker of the pool runs it)."""
    qcd = generate_collection("qcd", n_qcd, seed, None, max_leaves, {})
    w = generate_collection("w", n_w, seed + 1, None, max_leaves, {}, first_id=n_qcd)
    node_q, _ = io.get_extras(qcd)
    node_w, _ = io.get_extras(w)
    both = JetCollection.concatenate([qcd, w])
    both = set_extras(both, {k: np.concatenate([node_q[k], node_w[k]])
                             for k in node_q if k in node_w}, {})
    io.write(path, both, attrs={"seed": seed, "command": command})


def _load_output_modules() -> None:
    """Import what writes the ROOT file and draws the plot (~1 s) while this process waits for the
    workers, instead of after the clustering."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot
    import uproot  # noqa: F401


def _print_times(tables: dict[str, Any]) -> None:
    """One line: the clustering time of each algorithm, summed over the jets (compilation left
    out; with several workers each runs on one thread, so this is its CPU time)."""
    cells = []
    for name, table in tables.items():
        t = np.asarray(table.time_s, dtype=np.float64)
        cells.append(f"{name} {np.nansum(t):.1f}")
    echo("time per algorithm, s summed over jets: " + ", ".join(cells))


def _int_or_none(text: str) -> int | None:
    if text.strip().lower() in ("none", "off"):
        return None
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a number of leaves or 'none', got {text!r}"
        ) from None
    if value < 2:
        raise argparse.ArgumentTypeError(f"expected at least 2 leaves, got {value}")
    return value


def add_parser(sub: Any) -> None:
    """Add the ``run`` command to the subparsers ``sub``."""
    p = sub.add_parser("run", help="the main job: generate QCD + W jets, cluster them with every "
                       "algorithm, write HDF5 + ROOT results, print and plot the comparison",
                       description="Generate a small QCD + W sample, cluster it with every "
                       "available algorithm (exact methods only up to --exact-max-leaves leaves, "
                       "--time-limit per jet), write jets.h5, results.h5, results.root, "
                       "comparison.txt and comparison.png into the output folder.")
    add_algorithm_listing(p)
    p.add_argument("-o", "--output", default="jetastar-run", help="output folder "
                   "(default jetastar-run/)")
    p.add_argument("--n-qcd", type=count_value, default=30, help="QCD jets (default 30)")
    p.add_argument("--n-w", type=count_value, default=30, help="W jets (default 30)")
    p.add_argument("--seed", type=seed_value, default=1, help="seed of the QCD jets (W: seed + 1)")
    p.add_argument("--max-jet-leaves", type=_int_or_none, default=_DEMO_MAX_LEAVES, metavar="N",
                   help=f"generate only jets with at most N leaves (default {_DEMO_MAX_LEAVES}, "
                        "which keeps the run quick; 'none' lifts the cap)")
    p.add_argument("--algorithms", default=None,
                   help="comma-separated, or 'all' (default: every registered algorithm but "
                        f"{' and '.join(_main_job('off'))}, which take longest)")
    p.add_argument("--exact-max-leaves", type=leaves_value, default=14,
                   help="exact search methods (A*) run on jets up to this size (default 14); the "
                        f"exact MAP ({', '.join(map(repr, _main_job('map')))}) runs on every jet, "
                        f"with up to {_MAP_TIME_LIMIT:g} s per jet")
    add_cluster_options(p)
    # (chunks of 15 of the 60 jets: two per worker, ~0.5 s less than chunks of 5 on 2 cores;
    # below CHUNK_PATH_FROM, so no chunk kernel compiles for a first run)
    p.set_defaults(func=run, workers=2, time_limit=10.0, chunk_size=15)
    add_common(p)
