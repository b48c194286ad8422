"""The ``jetastar`` command line (also ``python -m jetastar``).

Commands::

    jetastar run       [-o jetastar-run/]                 the main job on built-in defaults
    jetastar generate  --type qcd|w --n N --seed S -o jets.h5|jets.root
    jetastar cluster   INPUT... --algorithms greedy,beam,... [--option k=v] -o results.h5|.root
    jetastar compare   results.h5 [--plot comparison.png]
    jetastar info      FILE [--check --t-cut 1,4,16]      what a file holds; can the model describe its jets?
    jetastar observables results.h5 -o obs.root           Lund plane, soft drop, subjets of the trees
    jetastar algorithms
    jetastar demo                                          20 QCD + 20 W jets, truth log-likelihoods

Every command has ``--help``. Errors are printed as one line (``jetastar: error: ...``, exit code 1,
2 for usage errors); ``--debug`` shows the traceback instead.

Example:
    >>> from jetastar.cli import main
    >>> main(["algorithms"])  # doctest: +SKIP
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shlex
import signal
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .comparison import DEFAULT_BANDS, comparison_table, format_comparison

__all__ = ["comparison_table", "format_comparison", "main", "plot_comparison"]

_PROG = "jetastar"


class _UsageError(Exception):
    """A command-line usage error (exit code 2)."""


# ---------------------------------------------------------------------- helpers
def _out(text: str = "") -> None:
    print(text, flush=True)


def _split_list(text: str | None) -> list[str]:
    if not text:
        return []
    return [t.strip() for t in text.split(",") if t.strip()]


def _load_algorithms(plugins: Sequence[str] = ()) -> None:
    from .batch import load_registry

    load_registry(plugins)


def _command_line() -> str:
    return shlex.join([_PROG, *sys.argv[1:]])


# ---------------------------------------------------------------------- generate
def _generate_collection(
    jet_type: str, n: int, seed: int, min_leaves: int | None, max_leaves: int | None,
    overrides: dict[str, Any], first_id: int = 0,
) -> Any:
    from .ginkgo import ShowerParams, generate
    from .io import set_extras

    params = ShowerParams.preset(jet_type, **overrides)
    collection, details = generate(
        n, params, seed=seed, min_leaves=min_leaves, max_leaves=max_leaves, return_details=True
    )
    if first_id:
        collection.jet_id = collection.jet_id + first_id
    node: dict[str, Any] = {}
    for key, name in (("node_t", "deltas"), ("draws", "draws")):
        if isinstance(details, dict) and key in details:
            values = np.asarray(details[key], dtype=np.float64).ravel()
            if values.shape[0] == collection.children.shape[0]:
                node[name] = values
    return set_extras(collection, node, {})


def _cmd_generate(args: argparse.Namespace) -> int:
    from . import io
    from .batch import parse_option_value

    overrides: dict[str, Any] = {}
    if args.t_cut is not None:
        overrides["t_cut"] = args.t_cut
    from .ginkgo import ShowerParams

    fields = [f.name for f in dataclasses.fields(ShowerParams) if f.name != "jet_type"]
    for item in args.param or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise _UsageError(f"--param {item!r} is not of the form name=value")
        if key.strip() not in fields:
            raise _UsageError(f"--param {item!r}: unknown parameter {key.strip()!r}; valid: "
                              f"{', '.join(fields)}")
        overrides[key.strip()] = parse_option_value(value)
    if args.n < 0:
        raise _UsageError("--n must be >= 0")
    io.file_format(args.output, sniff=False)
    collection = _generate_collection(
        args.type, args.n, args.seed, args.min_leaves, args.max_leaves, overrides
    )
    params = collection.jet_params(0).to_dict() if len(collection) else {}
    io.write(args.output, collection, attrs={
        "seed": args.seed, "command": _command_line(), "generator": "jetastar.ginkgo.generate",
        "generator_settings": json.dumps({
            "type": args.type, "n": args.n, "seed": args.seed, "min_leaves": args.min_leaves,
            "max_leaves": args.max_leaves, "params": params,
        }),
    })
    n_leaves = collection.n_leaves
    span = f"{int(n_leaves.min())}..{int(n_leaves.max())}" if len(collection) else "-"
    _out(f"wrote {len(collection)} {args.type.upper()} jets (leaves {span}) to {args.output}")
    return 0


# ---------------------------------------------------------------------- cluster
def _batch_config(args: argparse.Namespace) -> Any:
    from .batch import BatchConfig, parse_limits, parse_options

    _load_algorithms(args.plugin or [])
    from .clustering import algorithms

    names = _split_list(args.algorithms)
    if args.algorithms is not None and not names:
        raise _UsageError(f"--algorithms is empty; give names ({', '.join(algorithms())}) or "
                          "'all'")
    if not names or names == ["all"]:
        names = algorithms()
    options = parse_options(args.option or [])
    if args.likelihood:
        options.setdefault("*", {})["likelihood"] = args.likelihood
    return BatchConfig(
        algorithms=names,
        options=options,
        time_limit=args.time_limit,
        max_leaves=parse_limits(args.max_leaves or []),
        plugins=list(args.plugin or []),
        chunk_size=args.chunk_size, threads=args.threads,
    )


def _print_summaries(summaries: Sequence[Any]) -> int:
    failed = 0
    for s in summaries:
        if s.error:
            failed += 1
            _out(f"FAILED {s.input}: {s.error}")
            continue
        state = "already done" if s.already_done else (
            f"{s.chunks_reused}/{s.chunks_total} chunks resumed" if s.chunks_reused else "done"
        )
        _out(f"{s.input} -> {s.output} ({s.n_jets} jets, {state}, {s.seconds:.1f} s)")
        finite = _finite_counts(s.output)
        for alg, counts in s.status_counts.items():
            text = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
            _out(f"  {alg:<16} {text}{finite.get(alg, '')}")
    return 1 if failed else 0


def _friend_tree_note(names: Sequence[str]) -> str:
    """Where each algorithm's columns are in the by-entry (friend) tree."""
    from .io._by_entry import column_prefix

    cols = ", ".join(f"{column_prefix(n)}_*" + (f" ({n})" if column_prefix(n) != n else "")
                     for n in names)
    return (f"  friend tree 'clusters' (one entry per input entry): {cols}; "
            "<alg>_finite / <alg>_reason say whether a tree is possible under the model and why not")


def _finite_counts(path: str) -> dict[str, str]:
    """Per algorithm: ``"; tree 100, finite 31 (-inf 69)"`` (ran and finite are not the same)."""
    from .comparison import status_counts

    try:
        counts = status_counts(path)
    except (OSError, ValueError, KeyError):
        return {}
    return {alg: f"; tree {c['ran']}, finite {c['finite']}"
                 + (f" (-inf {c['minus_inf']})" if c["minus_inf"] else "")
            for alg, c in counts.items()}


def _particle_source(args: argparse.Namespace) -> Any:
    """The :class:`ParticleSource` of ``cluster``'s particle options (None: jetastar files)."""
    from .io.particles import ParticleSource

    mapping = {}
    for item in args.branch or []:
        coord, sep, name = item.partition("=")
        if not sep or not coord.strip() or not name.strip():
            raise _UsageError(f"--branch {item!r} is not of the form COORDINATE=NAME (pt=PFCands_pt)")
        mapping[coord.strip()] = name.strip()
    given = [args.tree, args.particles, args.components, args.mask, args.jet_r, mapping or None]
    if all(v is None for v in given) and args.layout is None:
        return None
    layout = args.layout or ("event" if args.jet_r is not None else "jet")
    if layout == "event" and args.jet_r is None:
        raise _UsageError("--layout event finds jets with FastJet: give --jet-r (e.g. 0.4)")
    return ParticleSource(
        path="", tree=args.tree, particles=args.particles, mapping=mapping or None,
        components=args.components, mask=args.mask, padding=args.padding, layout=layout,
        jet_algorithm=args.jet_algorithm, jet_r=args.jet_r if args.jet_r is not None else 0.4,
        jet_ptmin=args.jet_ptmin, t_cut=args.t_cut, lam=args.lam, lam_root=args.lam_root,
        mass_policy=args.mass_policy,
    )


def _mass_summary(path: str) -> str:
    """``mass policy ...: N of M particles changed`` from a results file's by-entry table."""
    from . import io

    try:
        info = io.file_info(path)
        coll_cols = {}
        if info["format"] == "hdf5":
            import h5py

            with h5py.File(path, "r") as f:
                if "clusters" in f:
                    coll_cols = {k: f[f"clusters/{k}"][()] for k in ("n_particles",
                                                                      "n_mass_adjusted",
                                                                      "n_negative_t")}
        else:
            import uproot

            with uproot.open(path) as f:
                if "clusters" in f:
                    coll_cols = f["clusters"].arrays(
                        ["n_particles", "n_mass_adjusted", "n_negative_t"], library="np")
    except (OSError, ValueError, KeyError):
        return ""
    if not coll_cols:
        return ""
    touched = np.asarray(coll_cols["n_mass_adjusted"])
    negative = np.asarray(coll_cols["n_negative_t"])
    text = (f"  mass policy: changed {int(touched.sum())} of {int(np.sum(coll_cols['n_particles']))} "
            f"particles (in {int(np.count_nonzero(touched))} of {touched.shape[0]} jets)")
    if negative.any():
        text += (f"; {int(negative.sum())} particles in {int(np.count_nonzero(negative))} jets "
                 "have E² − |p|² < 0, which makes every tree of those jets −∞ in the symmetric "
                 "likelihood (use --mass-policy clamp)")
    return text


def _cmd_cluster(args: argparse.Namespace) -> int:
    from .batch import run_batch

    source = _particle_source(args)
    config = _batch_config(args)
    output = output_dir = None
    fmt = args.format
    if args.output is not None:
        suffix = Path(args.output).suffix.lower()
        if suffix in (".h5", ".hdf5", ".root"):
            if len(args.inputs) != 1:
                raise _UsageError("-o FILE needs a single input; give a folder for several inputs")
            output = args.output
        elif suffix and not Path(args.output).is_dir():
            raise _UsageError(f"-o {args.output}: output files end in .h5, .hdf5 or .root; for "
                              "an output folder give a name without an extension")
        else:
            output_dir = args.output
    summaries = run_batch(
        args.inputs, config, output=output, output_dir=output_dir, fmt=fmt,
        workers=args.workers, scheduler=args.scheduler, progress=not args.no_progress,
        fresh=args.fresh, attrs={"command": _command_line()}, particles=source,
        entry_start=args.entry_start, entry_stop=args.entry_stop, step_size=args.step_size,
    )
    code = _print_summaries(summaries)
    if source is not None:
        for s in summaries:
            if not s.error:
                text = _mass_summary(s.output)
                if text:
                    _out(f"{text} [{source.mass_policy}]")
        _out(_friend_tree_note(config.algorithms))
    return code


# ---------------------------------------------------------------------- compare
def plot_comparison(rows: Sequence[dict[str, Any]], path: str | os.PathLike[str],
                    **kw: Any) -> None:
    """Save :func:`jetastar.plotting.plot_comparison` of the rows to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .plotting import plot_comparison as _plot

    plt.close(_plot(rows, path, **kw))


def _cmd_compare(args: argparse.Namespace) -> int:
    bands = DEFAULT_BANDS if not args.bands else tuple(int(b) for b in _split_list(args.bands))
    if list(bands) != sorted(set(bands)) or bands[0] < 1:
        raise _UsageError("--bands must be increasing positive integers, e.g. 2,6,10,15")
    rows = comparison_table(args.results, bands=bands, reference=args.reference)
    if args.json:
        _out(json.dumps(rows, indent=1, default=float))
    else:
        _out(format_comparison(rows))
    if args.plot:
        plot_comparison(rows, args.plot)
        _out(f"plot saved to {args.plot}")
    return 0


# ---------------------------------------------------------------------- observables
def _cmd_observables(args: argparse.Namespace) -> int:
    from .observables import write_observables

    labels = write_observables(
        args.output, args.results, algorithms=_split_list(args.algorithms) or None,
        truth=not args.no_truth, z_cut=args.z_cut, beta=args.beta, r0=args.r0,
        command=_command_line(),
    )
    _out(f"wrote observables of {', '.join(labels)} to {args.output} (one entry per jet; "
         f"soft drop z_cut={args.z_cut:g}, beta={args.beta:g}, R0={args.r0:g})")
    return 0


# ---------------------------------------------------------------------- info
def _cmd_info(args: argparse.Namespace) -> int:
    code = _cmd_info_file(args)
    if code == 0 and getattr(args, "check", False):
        _model_check(args)
    return code


def _model_check(args: argparse.Namespace) -> None:
    """``jetastar info FILE --check``: how many jets the model can describe."""
    from . import io
    from .diagnostics import model_check

    try:
        t_cuts = [float(x) for x in _split_list(args.t_cut)] if args.t_cut else [None]
    except ValueError:
        raise _UsageError(f"--t-cut {args.t_cut!r}: give numbers, e.g. 1,4,16") from None
    if args.max_jets < 1:
        raise _UsageError("--max-jets must be >= 1")
    try:
        jets = io.read(args.file, slice(0, args.max_jets), validate=False)
    except io.FileFormatError as exc:
        if "not a jetastar" not in str(exc):
            raise
        from .io.particles import describe_particle_file

        particles = args.particles
        if particles is None:
            found = describe_particle_file(args.file)
            if not found:
                raise _UsageError("--check: no particle collection found; give --particles") from None
            particles = found[0]["particles"]
            args.tree = args.tree or found[0].get("tree")
        jets = io.read_particles(args.file, tree=args.tree, particles=particles,
                                 entry_stop=args.max_jets, validate=False)
    _out("")
    _out(f"model check on {len(jets)} jets (greedy, then beam search; up to 14 leaves the exact "
         "MAP engine decides):")
    for t_cut in t_cuts:
        check = model_check(jets, t_cut=t_cut, lam=args.lam, lam_root=args.lam_root,
                            progress=not getattr(args, "no_progress", False))
        _out(f"  {check}")
    _out("  (a jet without a possible tree scores -inf for every algorithm; a smaller t_cut "
         "describes more jets)")


def _cmd_info_file(args: argparse.Namespace) -> int:
    from . import io

    try:
        info = io.file_info(args.file)
    except io.FileFormatError as exc:
        if "not a jetastar" not in str(exc):
            raise
        return _info_particles(args.file)
    if args.json:
        clean = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in info.items()}
        _out(json.dumps(clean, indent=1, default=str))
        return 0
    attrs = info.get("attrs", {})
    _out(f"file:            {info['path']}")
    _out(f"format:          {info['format']}" + (
        f", schema version {attrs['schema_version']}" if "schema_version" in attrs else ""))
    for key in ("jetastar_version", "created", "command", "seed", "input"):
        if key in attrs:
            _out(f"{key + ':':<16} {attrs[key]}")
    if "n_jets" in info:
        nl = info["n_leaves"]
        _out(f"jets:            {info['n_jets']} "
             f"({', '.join(f'{k} {v}' for k, v in info['jet_types'].items())})")
        if len(nl):
            _out(f"leaves per jet:  min {int(nl.min())}, mean {float(nl.mean()):.2f}, "
                 f"max {int(nl.max())}")
        _out(f"truth trees:     {info['has_truth']}")
        if info.get("extra_columns"):
            _out(f"extra columns:   {', '.join(info['extra_columns'])}")
    gp = attrs.get("generator_params")
    if isinstance(gp, str):
        try:
            gp = json.loads(gp)
        except ValueError:
            gp = None
    if gp:
        _out("parameters:")
        for p in gp[:10]:
            _out("  " + ", ".join(f"{k}={_short_value(v)}" for k, v in p.items()))
        if len(gp) > 10:
            _out(f"  ... {len(gp) - 10} more parameter sets")
    if info.get("results"):
        _out("results:")
        finite = _finite_counts(args.file)
        for label, r in info["results"].items():
            st = ", ".join(f"{k} {v}" for k, v in r["status"].items())
            _out(f"  {label:<16} {r['rows']} rows ({st}{finite.get(label, '')}), "
                 f"likelihood {r['likelihood']}")
    return 0


def _info_particles(path: str) -> int:
    """``jetastar info`` on a file jetastar did not write: what read_particles could read."""
    from .io.particles import describe_particle_file

    found = describe_particle_file(path)
    _out(f"file:            {path}")
    _out("format:          not a jetastar file")
    if not found:
        _out("particles:       none found (no branch prefix / dataset with momentum coordinates; "
             "see `jetastar cluster --help` for explicit mappings)")
        return 0
    _out("particles (read with `jetastar cluster FILE ... --algorithms ...`):")
    for d in found:
        coords = d.get("coordinates")
        text = ", ".join(coords.values()) if isinstance(coords, dict) else str(coords or "")
        if d["kind"] == "root":
            where = f"--tree {d['tree']} --particles {d['particles']}"
        else:
            where = f"--particles {d['particles']}"
            if d["kind"] == "dense":
                if isinstance(coords, str) and "," in coords:
                    where += f" --components {coords}"
                if d.get("mask"):
                    where += f" --mask {d['mask']}"
        entries = f"{d['entries']} entries" if "entries" in d else ""
        shape = f" shape {tuple(d['shape'])}" if "shape" in d else ""
        coords_text = f"  [{text}]" if text else ""
        _out(f"  {where:<40} {d['kind']:<10} {entries}{shape}{coords_text}")
    return 0


def _short_value(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, list):
        return "(" + ", ".join(_short_value(x) for x in v) + ")"
    return str(v)


# ---------------------------------------------------------------------- algorithms
def _cmd_algorithms(args: argparse.Namespace) -> int:
    _load_algorithms(args.plugin or [])
    from .clustering import algorithm_info, algorithms

    names = algorithms()
    if not names:
        _out("no algorithms are registered")
        return 0
    for name in names:
        info = algorithm_info(name)
        kind = "exact" if info.exact else "approx"
        limit = f", max {info.max_leaves} leaves" if info.max_leaves else ""
        _out(f"{name:<16} [{kind}{limit}] {info.description}")
        _out(f"{'':<16} options: {', '.join(info.options()) or '(none)'}")
    return 0


# ---------------------------------------------------------------------- demo
def _cmd_demo(args: argparse.Namespace) -> int:
    from .ginkgo import ShowerParams, generate, log_likelihood

    _out(f"jetastar demo: {args.n} QCD + {args.n} W Ginkgo jets, seed {args.seed}")
    _out(f"{'type':<5} {'jet':>4} {'leaves':>6} {'logL symmetric':>15} {'logL legacy':>12}")
    for params in (ShowerParams.qcd(), ShowerParams.w()):
        for jet in generate(args.n, params, seed=args.seed):
            _out(f"{jet.jet_type:<5} {jet.jet_id:>4} {jet.n_leaves:>6} "
                 f"{log_likelihood(jet):>15.6f} {log_likelihood(jet, likelihood='legacy'):>12.6f}")
    _out("(truth-tree log-likelihoods with summed leaf momenta; `jetastar --help` for more)")
    return 0


# ---------------------------------------------------------------------- run
#: the registry's exact-MAP method, which `jetastar run` applies to every jet
_MAP_METHOD = "trellis"
#: the main job's jets have at most this many leaves (each still gets its exact MAP, in ~2 s at 20)
_DEMO_MAX_LEAVES = 20
#: left out of the main job unless asked for: their kernels alone take longer to compile than the
#: rest of the run (the window search is the approximate MAP method shown)
_SLOW_DEMO_METHODS = ("astar", "astar-approx")
#: its per-jet time budget in `jetastar run` (the bundled jets need at most ~1 min)
_MAP_TIME_LIMIT = 600.0

def _cmd_run(args: argparse.Namespace) -> int:
    from ._jit import one_notice_for_workers
    from .batch import make_executor, shutdown_executor

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
    from . import io
    from .batch import BatchConfig, check_config, parse_options, run_batch, warm_up_workers
    from .io import set_extras
    from .jet import JetCollection

    _load_algorithms(args.plugin or [])
    from .clustering import algorithm_info, algorithms

    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    names = _split_list(args.algorithms)
    left_out: list[str] = []
    if not names:
        # the demonstration is quick: A* (exact and approximate) compile and run for longest
        names = [a for a in algorithms() if a not in _SLOW_DEMO_METHODS]
        left_out = [a for a in algorithms() if a in _SLOW_DEMO_METHODS]
    elif names == ["all"]:
        names = algorithms()
    if not names:
        raise _UsageError("no clustering algorithms are registered")
    max_leaves = {}
    for name in names:
        info = algorithm_info(name)
        if info.exact and name != _MAP_METHOD:
            limit = args.exact_max_leaves if info.max_leaves is None else \
                min(info.max_leaves, args.exact_max_leaves)
            max_leaves[name] = limit
    options = parse_options(args.option or [])
    if _MAP_METHOD in names:
        # every bundled jet gets its exact MAP: the MAP engine is not held to the per-jet limit
        options.setdefault(_MAP_METHOD, {}).setdefault("max_time", _MAP_TIME_LIMIT)
    config = BatchConfig(algorithms=names, options=options, time_limit=args.time_limit,
                         max_leaves=max_leaves, plugins=list(args.plugin or []),
                         chunk_size=args.chunk_size, threads=args.threads)
    check_config(config)  # every option is checked before the jets are generated
    _out(f"jetastar run -> {out}/  (algorithms: {', '.join(names)})")
    if left_out:
        _out(f"  left out for speed: {', '.join(left_out)} (--algorithms all runs every algorithm)")
    if executor is not None:
        # the workers compile (or load) the clustering kernels while this process generates
        warm_up_workers(executor, config, max(2, args.workers))
    jets_path = out / "jets.h5"
    qcd = _generate_collection("qcd", args.n_qcd, args.seed, None, args.max_jet_leaves, {})
    w = _generate_collection("w", args.n_w, args.seed + 1, None, args.max_jet_leaves, {},
                             first_id=args.n_qcd)
    node_q, _ = io.get_extras(qcd)
    node_w, _ = io.get_extras(w)
    both = JetCollection.concatenate([qcd, w])
    both = set_extras(both, {k: np.concatenate([node_q[k], node_w[k]])
                             for k in node_q if k in node_w}, {})
    io.write(jets_path, both, attrs={"seed": args.seed, "command": _command_line()})
    cap = (f"at most {args.max_jet_leaves} leaves each (--max-jet-leaves none lifts the cap)"
           if args.max_jet_leaves is not None else "no cap on the number of leaves")
    _out(f"generated {args.n_qcd} QCD + {args.n_w} W jets (seeds {args.seed}, {args.seed + 1}; "
         f"{cap}) -> {jets_path}")
    results_h5 = out / "results.h5"
    summaries = run_batch([jets_path], config, output=results_h5, workers=args.workers,
                          executor=executor, progress=not args.no_progress, fresh=True,
                          attrs={"command": _command_line()})
    code = _print_summaries(summaries)
    if code:
        return code
    _print_times(io.read_results(results_h5))
    results_root = out / "results.root"
    io.write(results_root, io.read(results_h5, validate=False), io.read_results(results_h5),
             attrs={"command": _command_line(), "seed": args.seed})
    _out(f"results: {results_h5} and {results_root}")
    rows = comparison_table(results_h5)
    text = format_comparison(rows)
    _out("")
    _out(text)
    (out / "comparison.txt").write_text(text + "\n", encoding="utf-8")
    plot_comparison(rows, out / "comparison.png")
    _out("")
    _out(f"comparison table: {out / 'comparison.txt'}; plot: {out / 'comparison.png'} "
         f"({time.perf_counter() - t0:.0f} s in total)")
    return 0


def _print_times(tables: dict[str, Any]) -> None:
    """One line: the clustering time of each algorithm, summed over the jets (compilation left
    out; with several workers each runs on one thread, so this is its CPU time)."""
    cells = []
    for name, table in tables.items():
        t = np.asarray(table.time_s, dtype=np.float64)
        cells.append(f"{name} {np.nansum(t):.1f}")
    _out("time per algorithm, s summed over jets: " + ", ".join(cells))


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


# ---------------------------------------------------------------------- parser
def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                   help="show full tracebacks on errors")


def _add_cluster_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--option", action="append", metavar="[ALG.]KEY=VALUE",
                   help="algorithm option; ALG.KEY=VALUE for one algorithm, KEY=VALUE for every "
                        "algorithm that accepts KEY (values are JSON: 10, 0.5, true, \"x\")")
    p.add_argument("--time-limit", type=float, default=None, metavar="SECONDS",
                   help="per jet and algorithm: passed as max_time to algorithms that have such an "
                        "option (they stop with status 'budget'); others run to completion and a "
                        "note is recorded when they exceed it")
    p.add_argument("--max-leaves", action="append", metavar="ALG=N",
                   help="size limit for an algorithm (default: the registry's for exact methods); "
                        "larger jets are recorded as 'skipped'")
    p.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    p.add_argument("--threads", type=int, default=None, metavar="N",
                   help="numba threads per process for the exact engines (default: all cores "
                        "with one worker, 1 per worker with several; small jets use one anyway)")
    p.add_argument("--chunk-size", type=int, default=50,
                   help="jets per work unit and part file (default 50)")
    p.add_argument("--plugin", action="append", metavar="MODULE",
                   help="import MODULE first (e.g. one that registers extra algorithms)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``jetastar`` command."""
    from ._version import __version__

    parser = argparse.ArgumentParser(
        prog=_PROG,
        description="jetastar: exact and approximate maximum-likelihood clustering of Ginkgo jets. "
                    "Start with `jetastar run` (the main job on built-in defaults).",
        epilog="Run `jetastar COMMAND --help` for the options of a command.",
    )
    parser.add_argument("--version", action="version", version=f"jetastar {__version__}")
    parser.add_argument("--debug", action="store_true", help="show full tracebacks on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("run", help="the main job: generate QCD + W jets, cluster them with every "
                       "algorithm, write HDF5 + ROOT results, print and plot the comparison",
                       description="Generate a small QCD + W sample, cluster it with every "
                       "available algorithm (exact methods only up to --exact-max-leaves leaves, "
                       "--time-limit per jet), write jets.h5, results.h5, results.root, "
                       "comparison.txt and comparison.png into the output folder.")
    p.add_argument("-o", "--output", default="jetastar-run", help="output folder "
                   "(default jetastar-run/)")
    p.add_argument("--n-qcd", type=int, default=30, help="QCD jets (default 30)")
    p.add_argument("--n-w", type=int, default=30, help="W jets (default 30)")
    p.add_argument("--seed", type=int, default=1, help="seed of the QCD jets (W: seed + 1)")
    p.add_argument("--max-jet-leaves", type=_int_or_none, default=_DEMO_MAX_LEAVES, metavar="N",
                   help=f"generate only jets with at most N leaves (default {_DEMO_MAX_LEAVES}, "
                        "which keeps the run quick; 'none' lifts the cap)")
    p.add_argument("--algorithms", default=None,
                   help="comma-separated, or 'all' (default: every registered algorithm but "
                        f"{' and '.join(_SLOW_DEMO_METHODS)}, which take longest)")
    p.add_argument("--exact-max-leaves", type=int, default=14,
                   help="exact search methods (A*) run on jets up to this size (default 14); the "
                        f"exact MAP ({_MAP_METHOD!r}) runs on every jet, with up to "
                        f"{_MAP_TIME_LIMIT:g} s per jet")
    _add_cluster_options(p)
    p.set_defaults(func=_cmd_run, workers=2, time_limit=10.0, chunk_size=5)
    _add_common(p)

    p = sub.add_parser("generate", help="generate Ginkgo jets into an HDF5 or ROOT file",
                       description="Generate jets with the Ginkgo toy shower (reference defaults; "
                       "change parameters with --t-cut / --param) and write them with their truth "
                       "trees.")
    p.add_argument("--type", choices=["qcd", "w"], default="qcd", type=str.lower,
                   help="jet type preset (default qcd)")
    p.add_argument("--n", type=int, default=1000, help="number of jets (default 1000)")
    p.add_argument("--seed", type=int, default=1, help="master seed (default 1)")
    p.add_argument("--min-leaves", type=int, default=None, help="keep jets with >= this many leaves")
    p.add_argument("--max-leaves", type=int, default=None, help="keep jets with <= this many leaves")
    p.add_argument("--t-cut", type=float, default=None,
                   help="t_cut in GeV² (smaller = larger jets: 1.0 ~20 leaves, 0.25 ~30)")
    p.add_argument("--param", action="append", metavar="NAME=VALUE",
                   help="other ShowerParams field, e.g. lam=2.0 or m_hard=50")
    p.add_argument("-o", "--output", required=True, help="output file (.h5, .hdf5 or .root)")
    p.set_defaults(func=_cmd_generate)
    _add_common(p)

    p = sub.add_parser("cluster", help="cluster the jets of one or more files with several "
                       "algorithms (parallel, resumable)",
                       description="Cluster every jet with every algorithm; results go to one file "
                       "per input (the jets plus one results table per algorithm). Interrupted "
                       "runs resume where they stopped when rerun with the same arguments.")
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="jet files (.h5, .root, .pkl)")
    p.add_argument("--algorithms", required=True,
                   help="comma-separated registry names (see `jetastar algorithms`), or 'all'")
    p.add_argument("-o", "--output", default=None,
                   help="output file (.h5/.root; one input) or folder for "
                        "<input>.results.<format> (default: current folder)")
    p.add_argument("--format", choices=["h5", "root"], default="h5",
                   help="format of outputs written into a folder (default h5)")
    p.add_argument("--likelihood", choices=["symmetric", "legacy"], default=None,
                   help="likelihood form for every algorithm that takes one")
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="run on a dask.distributed scheduler (tcp://host:8786); needs "
                        "`pip install 'jetastar[dask]'`")
    p.add_argument("--fresh", action="store_true",
                   help="recompute: discard partial results of an interrupted run instead of "
                        "resuming, and redo inputs whose output is already complete")
    _add_cluster_options(p)
    g = p.add_argument_group(
        "particles in your own layout",
        "Read ROOT TTrees / HDF5 files not written by jetastar (any of these options switches it "
        "on). Results keep the input entry number: ROOT outputs get a 'clusters' tree with one "
        "entry per input jet (a friend tree of the input tree), HDF5 outputs a /clusters group "
        "with an 'entry' column.")
    g.add_argument("--tree", default=None, help="ROOT: the tree (default Events, or the only one)")
    g.add_argument("--particles", default=None, metavar="PREFIX",
                   help="ROOT: branch prefix (PFCands, Particle, ...; coordinates detected from "
                        "the names); HDF5: the dataset or group of particles")
    g.add_argument("--branch", action="append", metavar="COORD=NAME",
                   help="explicit coordinate -> branch/dataset, e.g. --branch pt=PFCands_pt "
                        "(repeat for all four)")
    g.add_argument("--components", default=None, metavar="C1,C2,C3,C4",
                   help="HDF5 dense (n_jets, n_particles, 4) dataset: order of the last axis, "
                        "e.g. E,px,py,pz or pt,eta,phi,mass")
    g.add_argument("--mask", default=None, metavar="DATASET",
                   help="HDF5 dense: boolean (n_jets, n_particles) dataset, True = particle")
    g.add_argument("--padding", type=float, default=0.0,
                   help="HDF5 dense: value of padded slots (default 0)")
    g.add_argument("--layout", choices=["jet", "event"], default=None,
                   help="an entry is a jet (default) or an event (jets found with FastJet)")
    g.add_argument("--jet-r", type=float, default=None,
                   help="events: find jets with FastJet with this radius (implies --layout event)")
    g.add_argument("--jet-ptmin", type=float, default=0.0, help="events: minimum jet pT in GeV")
    g.add_argument("--jet-algorithm", choices=["antikt", "kt", "cambridge"], default="antikt",
                   help="events: FastJet algorithm (default antikt)")
    g.add_argument("--t-cut", type=float, default=16.0, help="Ginkgo t_cut in GeV² (default 16)")
    g.add_argument("--lam", type=float, default=1.5, help="Ginkgo λ (default 1.5)")
    g.add_argument("--lam-root", type=float, default=1.5, help="Ginkgo λ_R (default 1.5)")
    g.add_argument("--mass-policy", default="clamp", metavar="clamp|keep|MASS",
                   help="massless particles: clamp (default: raise E by a few ulps where "
                        "E²−|p|² rounds below 0), keep, or a mass in GeV given to every particle")
    g.add_argument("--entry-start", type=int, default=None, help="first entry to read")
    g.add_argument("--entry-stop", type=int, default=None, help="entry to stop before")
    g.add_argument("--step-size", type=int, default=10000,
                   help="entries read from the file at a time (default 10000)")
    p.set_defaults(func=_cmd_cluster)
    _add_common(p)

    p = sub.add_parser("compare", help="compare algorithms in a results file (table, plot)",
                       description="Per jet type, algorithm and leaf-count band, over the same "
                       "jets for every algorithm: median log-likelihood relative to the best tree "
                       "of each jet (the proven MAP where known; -inf trees included), how many "
                       "jets have a tree and a finite one, time per jet, and how often the exact "
                       "MAP was found where it is known.")
    p.add_argument("results", help="results file (.h5 or .root) from `jetastar cluster` / `run`")
    p.add_argument("--plot", default=None, metavar="OUT.png", help="also save a plot")
    p.add_argument("--reference", default="best",
                   help="'best' (the proven MAP, else the best tree found; default) or an "
                        "algorithm to compare to")
    p.add_argument("--bands", default=None, metavar="E1,E2,...",
                   help=f"leaf-count band edges (default {','.join(map(str, DEFAULT_BANDS))})")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.set_defaults(func=_cmd_compare)
    _add_common(p)

    p = sub.add_parser("observables", help="jet-substructure observables of the trees of a "
                       "results file (friend tree)",
                       description="Lund-plane primary declusterings, soft drop, root-split "
                       "subjet masses and tree shape of every algorithm's trees (and the truth "
                       "trees), one entry per jet, written to a .root or .h5 file.")
    p.add_argument("results", help="results file (.h5 or .root) from `jetastar cluster` / `run`")
    p.add_argument("-o", "--output", required=True, metavar="OUT.root|OUT.h5")
    p.add_argument("--algorithms", default=None, help="comma-separated (default: all)")
    p.add_argument("--no-truth", action="store_true", help="leave out the truth trees")
    p.add_argument("--z-cut", type=float, default=0.1, help="soft drop z_cut (0.1)")
    p.add_argument("--beta", type=float, default=0.0, help="soft drop beta (0)")
    p.add_argument("--r0", type=float, default=1.0, help="soft drop R0 (1)")
    p.set_defaults(func=_cmd_observables)

    p = sub.add_parser("info", help="what a jet/results file holds",
                       description="Print the schema version, provenance, jet and leaf counts, "
                       "parameters and results of a file (.h5, .root or legacy .pkl).")
    p.add_argument("file")
    p.add_argument("--json", action="store_true", help="print as JSON")
    g = p.add_argument_group(
        "model check", "how many jets have a tree of non-zero Ginkgo likelihood (jets whose mass² "
        "is at or below t_cut, or with a particle of E² − |p|² < 0, have none)")
    g.add_argument("--check", action="store_true", help="run the model check")
    g.add_argument("--t-cut", default=None, metavar="T[,T...]",
                   help="t_cut values to check in GeV² (default: the jets' own), e.g. 1,4,16")
    g.add_argument("--lam", type=float, default=None, help="λ to check (default: the jets' own)")
    g.add_argument("--lam-root", type=float, default=None, help="λ_R (default: the jets' own)")
    g.add_argument("--max-jets", type=int, default=500,
                   help="check the first N jets (default 500)")
    g.add_argument("--tree", default=None, help="particle files: the TTree")
    g.add_argument("--particles", default=None, help="particle files: the collection to read")
    p.set_defaults(func=_cmd_info)
    _add_common(p)

    p = sub.add_parser("algorithms", help="list the registered clustering algorithms",
                       description="List every registered algorithm with its options.")
    p.add_argument("--plugin", action="append", metavar="MODULE",
                   help="import MODULE first (e.g. one that registers extra algorithms)")
    p.set_defaults(func=_cmd_algorithms)
    _add_common(p)

    p = sub.add_parser("demo", help="print leaf counts and truth log-likelihoods of 20 QCD + 20 W "
                       "jets", description="Generate N QCD and N W jets with a fixed seed and "
                       "print, per jet, the number of leaves and the truth-tree log-likelihood in "
                       "both forms (symmetric, legacy).")
    p.add_argument("--n", type=int, default=20, help="jets of each type (default 20)")
    p.add_argument("--seed", type=int, default=1, help="seed (default 1)")
    p.set_defaults(func=_cmd_demo)
    _add_common(p)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (0 ok, 1 error, 2 usage error).

    Args:
        argv: arguments without the program name (default ``sys.argv[1:]``).
    """
    parser = build_parser()
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.command is None:
        args = parser.parse_args(["demo"])
    debug = bool(getattr(args, "debug", False))
    previous = _terminate_as_interrupt()
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:  # output piped into `head` etc.
        try:  # silence the flush at exit (Python docs, "Note on SIGPIPE")
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 0
    except KeyboardInterrupt as exc:
        if debug:
            raise
        from .batch import BatchInterrupted

        what = "terminated" if isinstance(exc, _Terminated) or _Terminated.seen else "interrupted"
        if args.command == "run":  # the demonstration regenerates its jets: nothing to resume
            text = f"{what} (`{_PROG} run` starts afresh when rerun)"
        elif isinstance(exc, BatchInterrupted):
            text = str(exc).replace("interrupted", what, 1)
        else:
            text = f"{what} (rerun the same command to resume a cluster run)"
        print(f"{_PROG}: {text}", file=sys.stderr)
        return 143 if what == "terminated" else 130
    except _UsageError as exc:
        if debug:
            raise
        print(f"{_PROG}: error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        if debug:
            raise
        print(f"{_PROG}: error: {_one_line(exc)}", file=sys.stderr)
        return 1
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


class _Terminated(KeyboardInterrupt):
    """SIGTERM (what batch systems send before killing a job), raised like Ctrl-C so that a run
    stops the same way: finished work kept, workers stopped, exit code 143."""

    seen = False


def _raise_terminated(signum: int, frame: Any) -> None:
    _Terminated.seen = True
    raise _Terminated()


def _terminate_as_interrupt() -> Any:
    """Install the SIGTERM handler (main thread only); returns the previous one to restore."""
    if threading.current_thread() is not threading.main_thread():
        return None
    try:
        return signal.signal(signal.SIGTERM, _raise_terminated)
    except (ValueError, OSError):
        return None


def _one_line(exc: BaseException) -> str:
    from .errors import JetastarError

    text = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, (JetastarError, ValueError, OSError)):
        return text
    return f"{type(exc).__name__}: {text} (rerun with --debug for the traceback)"
