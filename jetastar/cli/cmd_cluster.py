"""``jetastar cluster``: every jet of one or more files with several algorithms, in parallel and
resumably (:func:`jetastar.batch.run_batch`); also particle files in a foreign layout."""

from __future__ import annotations

import argparse
import glob
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..batch import (
    BatchConfig,
    check_config,
    load_registry,
    parse_limits,
    parse_options,
    preview_inputs,
    run_batch,
)
from ..clustering import algorithms
from ..comparison import mass_policy_counts
from ..errors import BatchError, InvalidJetError
from ..io import ParticleSource, column_prefix
from ..io.dispatch import written_attrs
from ..io.particle_files import cluster_options, describe_particle_file
from ..jetfinding import load_fastjet
from ..momenta import DEFAULT_MASS_POLICY
from .cmd_algorithms import add_algorithm_listing
from .shared import (
    UsageError,
    add_cluster_options,
    add_common,
    command_line,
    echo,
    print_summaries,
    split_list,
)

__all__ = ["add_parser", "run"]


def _batch_config(args: argparse.Namespace) -> BatchConfig:
    load_registry(args.plugin or [])
    names = split_list(args.algorithms)
    if args.algorithms is not None and not names:
        raise UsageError(f"--algorithms is empty; give names ({', '.join(algorithms())}) or "
                         "'all'")
    if not names or names == ["all"]:
        names = algorithms()
    try:  # names, options and limits checked before any file is read
        options = parse_options(args.option or [])
        if args.likelihood:
            options.setdefault("*", {})["likelihood"] = args.likelihood
        config = BatchConfig(
            algorithms=names,
            options=options,
            time_limit=args.time_limit,
            max_leaves=parse_limits(args.max_leaves or []),
            plugins=list(args.plugin or []),
            chunk_size=args.chunk_size, threads=args.threads, device=args.device,
        )
        check_config(config)
    except BatchError as exc:  # a bad name, option, value or limit: a usage error (exit 2)
        raise UsageError(str(exc)) from None
    return config


def _friend_tree_note(names: Sequence[str], layout: str = "jet", root: bool = True) -> str:
    """Where each algorithm's columns are in the by-entry (friend) tree; for jets found in events
    (``layout="event"``) the friend of the input is the per-event tree. ``root=False``: the
    HDF5 output's ``/clusters`` group instead."""
    if not root:
        groups = ", ".join(f"/clusters/{n}" for n in names)
        events = ("; /clusters/events has one row per input event (entry, n_jets, first_jet)"
                  if layout == "event" else "")
        return (f"  group '/clusters' (one row per input {'jet' if layout == 'event' else 'entry'}"
                f"): {groups}, each with status, finite, reason (whether a tree is possible "
                f"under the model and why not), log_likelihood{events}")
    cols = ", ".join(f"{column_prefix(n)}_*" + (f" ({n})" if column_prefix(n) != n else "")
                     for n in names)
    why = "<alg>_finite / <alg>_reason say whether a tree is possible under the model and why not"
    if layout == "event":
        return ("  friend tree 'clusters_events' (one entry per input event: n_jets, first_jet, "
                f"jet_<alg>_log_likelihood); 'clusters' has one entry per jet: {cols}; {why}")
    return f"  friend tree 'clusters' (one entry per input entry): {cols}; {why}"


def _particle_source(args: argparse.Namespace) -> ParticleSource | None:
    """The :class:`ParticleSource` of ``cluster``'s particle options (None: jetastar files)."""

    mapping = {}
    for item in args.branch or []:
        coord, sep, name = item.partition("=")
        if not sep or not coord.strip() or not name.strip():
            raise UsageError(f"--branch {item!r} is not of the form COORDINATE=NAME (pt=PFCands_pt)")
        mapping[coord.strip()] = name.strip()
    given = [args.tree, args.particles, args.components, args.mask, args.jet_r, mapping or None]
    if all(v is None for v in given) and args.layout is None:
        return None
    layout = args.layout or ("event" if args.jet_r is not None else "jet")
    if layout == "event" and args.jet_r is None:
        raise UsageError("--layout event finds jets with FastJet: give --jet-r (e.g. 0.4)")
    try:
        return _checked_source(args, mapping, layout)
    except InvalidJetError as exc:  # a bad --t-cut / --lam / --mass-policy: before any work
        option = _OPTION_OF_FIELD.get(exc.field or "", exc.field)
        raise UsageError(f"{option}: {exc.reason}") from None


#: ParticleSource's error field -> the command-line option that sets it
_OPTION_OF_FIELD = {"params.t_cut": "--t-cut", "params.lam": "--lam",
                    "params.lam_root": "--lam-root", "mass_policy": "--mass-policy"}


def _checked_source(args: argparse.Namespace, mapping: dict[str, str], layout: str) -> ParticleSource:
    return ParticleSource(
        path="", tree=args.tree, particles=args.particles, mapping=mapping or None,
        components=args.components, mask=args.mask, padding=args.padding, layout=layout,
        jet_algorithm=args.jet_algorithm, jet_r=args.jet_r if args.jet_r is not None else 0.4,
        jet_ptmin=args.jet_ptmin, t_cut=args.t_cut, lam=args.lam, lam_root=args.lam_root,
        mass_policy=args.mass_policy,
    )


def _expanded(inputs: list[str]) -> list[str]:
    """The inputs with quoted patterns expanded (``"data/*.root"``, as a job script passes them
    when the shell did not expand them); a pattern that matches nothing is an error."""
    out: list[str] = []
    for name in inputs:
        if os.path.exists(name) or not glob.has_magic(name):
            out.append(name)
            continue
        found = sorted(glob.glob(name))
        if not found:
            raise UsageError(f"{name}: no such file, and no file matches it as a pattern")
        out.extend(found)
    return out


def _check_ranges(args: argparse.Namespace) -> None:
    """The numeric options of the run and of particle files, before any file is opened."""
    start, stop = args.entry_start, args.entry_stop
    if start is not None and stop is not None and (start >= 0) == (stop >= 0) and start >= stop:
        raise UsageError(f"--entry-start {start} --entry-stop {stop}: no entry between them "
                         "(the stop is not included)")
    if args.step_size < 1:
        raise UsageError(f"--step-size must be >= 1, got {args.step_size}")
    if args.workers < 1:
        raise UsageError(f"--workers: workers must be an integer >= 1, got {args.workers}")
    if args.jet_r is not None and not args.jet_r > 0:
        raise UsageError(f"--jet-r must be > 0 (the jet radius, e.g. 0.4), got {args.jet_r}")
    if args.jet_r is not None:  # (without FastJet: say so before any file is read)
        load_fastjet()


def _mass_summary(path: str, policy: str = DEFAULT_MASS_POLICY) -> str:
    """``mass policy ...: N of M particles changed`` from a results file's by-entry table
    (``policy``: the ``--mass-policy`` given, for the advice)."""
    counts = mass_policy_counts(path)
    if counts is None:
        return ""
    text = (f"  mass policy: changed {counts['particles_touched']} of {counts['particles']} "
            f"particles (in {counts['jets_touched']} of {counts['jets']} jets)")
    if counts["particles_negative_t"]:
        advice = ("use --mass-policy clamp" if str(policy).strip().lower() != "clamp" else
                  "too far below 0 for clamp, which moves only rounding errors: check the "
                  "coordinates' order (--components) and the input's units")
        text += (f"; {counts['particles_negative_t']} particles in {counts['jets_negative_t']} jets "
                 "have E² − |p|² < 0, which makes every tree of those jets −∞ in the symmetric "
                 f"likelihood ({advice})")
    return text


#: options that only particle files read (dest -> default): given for jetastar jet files they
#: would be ignored, so they are refused
_PARTICLE_ONLY = {"entry_start": None, "entry_stop": None, "t_cut": 16.0, "lam": 1.5,
                  "lam_root": 1.5, "mass_policy": DEFAULT_MASS_POLICY, "jet_ptmin": 0.0,
                  "jet_algorithm": "antikt", "padding": 0.0, "step_size": 10000}


def _refuse_particle_only(args: argparse.Namespace) -> None:
    """Particle options given where the inputs are read as jetastar jet files (no option switched
    particles on): an error naming them for the first jetastar file among the inputs, instead of
    a run that ignores them (other inputs fail as they are, naming the options that read them)."""
    given = [f"--{k.replace('_', '-')}" for k, default in _PARTICLE_ONLY.items()
             if getattr(args, k) != default]
    if not given:
        return
    for name in args.inputs:
        if written_attrs(name) is not None:
            raise UsageError(
                f"{', '.join(given)}: options of particle files, which --particles, --branch, "
                f"--tree, --components, --mask, --layout or --jet-r switch on; {name} is a "
                "jetastar file, whose jets carry their own parameters and are all clustered (a "
                "part of a jet file: jetastar.io.read(path, jets=slice(a, b)) and "
                "jetastar.io.write)"
            )


def _detected_particles(args: argparse.Namespace) -> bool:
    """Where no particle option is given and every input is a particle file in which one
    collection is detected, the same in each (what ``jetastar info`` shows): set the options that
    read it, say so in one line, and return ``True``. Otherwise change nothing (a jetastar file, an
    unreadable one, or a choice to make: each file then fails naming its options)."""
    found = set()
    for name in args.inputs:
        try:
            if written_attrs(name) is not None:
                return False
            candidates = describe_particle_file(name)
        except Exception:  # (the run itself reports an unreadable input)
            return False
        if len(candidates) != 1:
            return False
        found.add(cluster_options(candidates[0]))
        first = candidates[0]
    if len(found) != 1:
        return False
    if first["kind"] == "root":
        args.tree = first["tree"]
        if first.get("mapping"):
            args.branch = [f"{c}={b}" for c, b in first["mapping"].items()]
        else:
            args.particles = first["particles"]
    else:
        args.particles = first["particles"]
        coords = first.get("coordinates")
        if first["kind"] == "dense" and isinstance(coords, str) and "," in coords:
            args.components = coords
        if first["kind"] == "dense" and first.get("mask"):
            args.mask = first["mask"]
    echo(f"reading particles with {found.pop()} (detected, as `jetastar info` shows; give "
         "these options to choose others)")
    return True


def _print_preview(args: argparse.Namespace, config: BatchConfig, source: Any) -> None:
    """The run's predicted CPU time per algorithm, and warnings (before any work)."""
    preview = preview_inputs(args.inputs, config, particles=source,
                             entry_start=args.entry_start, entry_stop=args.entry_stop,
                             workers=args.workers)
    if preview is not None:
        for line in preview.lines() + preview.warnings():
            echo(line)


def run(args: argparse.Namespace) -> int:
    """Cluster the inputs and print a summary per file; returns the exit code."""
    _check_ranges(args)
    if args.scheduler is not None and args.workers != 1:
        raise UsageError(f"--workers {args.workers} --scheduler {args.scheduler}: the Dask "
                         "cluster's workers run the chunks; --workers sizes the local pool")
    args.inputs = _expanded(args.inputs)
    source = _particle_source(args)
    if source is None and _detected_particles(args):
        source = _particle_source(args)
    if source is None:
        _refuse_particle_only(args)
    config = _batch_config(args)
    output = output_dir = None
    fmt = args.format or "h5"
    if args.output is not None:
        suffix = Path(args.output).suffix.lower()
        if suffix in (".h5", ".hdf5", ".root"):
            if len(args.inputs) != 1:
                raise UsageError("-o FILE needs a single input; give a folder for several inputs")
            if args.format is not None and (suffix == ".root") != (args.format == "root"):
                raise UsageError(f"--format {args.format} -o {args.output}: the file's extension "
                                 "says its format; --format is for outputs in a folder")
            output = args.output
        elif suffix and not Path(args.output).is_dir():
            raise UsageError(f"-o {args.output}: output files end in .h5, .hdf5 or .root; for "
                             "an output folder give a name without an extension")
        else:
            output_dir = args.output
    if not args.no_preview:
        _print_preview(args, config, source)
    codes: list[int] = []
    noted: set[bool] = set()

    def file_done(s: Any) -> None:
        # each file's lines as it ends: a run interrupted later has said how the others went;
        # the note on how results sit beside the particles follows the first file written in
        # each format, so it never reads as if it were about a file that failed
        codes.append(print_summaries([s]))
        if source is not None and not s.error:
            text = _mass_summary(s.output, args.mass_policy)
            if text:
                echo(f"{text} [{source.mass_policy}]")
            root = str(s.output).lower().endswith(".root")
            if root not in noted:
                noted.add(root)
                echo(_friend_tree_note(config.algorithms, source.layout, root=root))

    run_batch(
        args.inputs, config, output=output, output_dir=output_dir, fmt=fmt,
        workers=args.workers, scheduler=args.scheduler, progress=not args.no_progress,
        fresh=args.fresh, attrs={"command": command_line()}, particles=source,
        entry_start=args.entry_start, entry_stop=args.entry_stop, step_size=args.step_size,
        on_file_done=file_done,
    )
    return max(codes, default=0)


def add_parser(sub: Any) -> None:
    """Add the ``cluster`` command to the subparsers ``sub``."""
    p = sub.add_parser("cluster", help="cluster the jets of one or more files with several "
                       "algorithms (parallel, resumable)",
                       description="Cluster every jet with every algorithm; results go to one file "
                       "per input (the jets plus one results table per algorithm). Interrupted "
                       "runs resume where they stopped when rerun with the same arguments.")
    add_algorithm_listing(p)
    p.add_argument("inputs", nargs="+", metavar="INPUT",
                   help="jet files (.h5, .root, .pkl); a quoted pattern such as 'data/*.root' "
                        "is expanded")
    p.add_argument("--algorithms", required=True,
                   help="comma-separated registry names (see `jetastar algorithms`), or 'all'")
    p.add_argument("-o", "--output", default=None,
                   help="output file (.h5/.root; one input) or folder for "
                        "<input>.results.<format> (default: current folder)")
    p.add_argument("--format", choices=["h5", "root"], default=None,
                   help="format of outputs written into a folder (default h5; an output file's "
                        "extension says its format)")
    p.add_argument("--likelihood", choices=["symmetric", "legacy"], default=None,
                   help="likelihood form for every algorithm that takes one")
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="run on a dask.distributed scheduler (tcp://host:8786); needs "
                        "`pip install 'jetastar[dask]'`")
    p.add_argument("--fresh", action="store_true",
                   help="recompute: discard partial results of an interrupted run instead of "
                        "resuming, redo inputs whose output is already complete, and replace an "
                        "output written with other settings (without it such an output is kept "
                        "and the input fails with the differences)")
    p.add_argument("--no-preview", action="store_true",
                   help="do not print the cost preview (each algorithm's predicted CPU time on "
                        "the inputs, from the first 1000 jets' sizes and shapes) before the run")
    add_cluster_options(p)
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
    g.add_argument("--mass-policy", default=DEFAULT_MASS_POLICY, metavar="clamp|keep|MASS",
                   help="massless particles: clamp (default: raise E by a few ulps where "
                        "E²−|p|² rounds below 0), keep, or a mass in GeV given to every particle")
    g.add_argument("--entry-start", type=int, default=None, help="first entry to read")
    g.add_argument("--entry-stop", type=int, default=None, help="entry to stop before")
    g.add_argument("--step-size", type=int, default=10000,
                   help="entries read from the file at a time (default 10000)")
    p.set_defaults(func=run)
    add_common(p)
