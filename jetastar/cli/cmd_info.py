"""``jetastar info``: what a jet or results file holds (a foreign particle file: how to read it);
with ``--check``, how many of its jets the model can describe (:func:`jetastar.diagnostics.model_check`);
without a file, this installation and the device the exact trellis would use.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

import numba as nb
import numpy as np

from .. import __version__, io
from .._cuda import gpu_status, resolve_device
from ..batch import BatchConfig, preview_jets
from ..batch.resume import PART_DIR_SUFFIX, done_parts, parts_dir, read_manifest
from ..clustering import algorithms
from ..clustering.exact.gpu import GPU_MEASURED, GPU_MIN_LEAVES
from ..comparison import results_summary
from ..diagnostics import T_CUT_LADDER, kt_family_t_cut, model_check
from ..io.particle_files import cluster_options, describe_particle_file
from .shared import (
    UsageError,
    add_common,
    echo,
    format_tree_counts,
    json_text,
    read_jets_or_particles,
    split_list,
)

__all__ = ["add_parser", "run"]


def run(args: argparse.Namespace) -> int:
    """Describe the file (and check it against the model); returns the exit code. Without a file:
    this installation (version, the device the exact trellis would use and why)."""
    if args.file is None:
        return _describe_setup(args)
    _interrupted_output(Path(args.file))
    check = getattr(args, "check", False)
    t_cuts = _check_options(args) if check else []  # (before the file's summary is printed)
    code = _describe_file(args)
    if code == 0 and check:
        _model_check(args, t_cuts)
    return code


def _interrupted_output(path: Path) -> None:
    """An output that an interrupted ``cluster`` run has not written yet (or its part folder):
    say how far the run got and how it is finished, instead of "no such file"."""
    if path.name.endswith(PART_DIR_SUFFIX) and path.is_dir():
        parts, output = path, path.with_name(path.name[: -len(PART_DIR_SUFFIX)])
    elif not path.exists() and parts_dir(path).is_dir():
        parts, output = parts_dir(path), path
    else:
        return
    done = sum(b - a for a, b in done_parts(parts))
    n_jets = (read_manifest(parts) or {}).get("n_jets")
    of = f" of {n_jets}" if isinstance(n_jets, int) else ""
    raise FileNotFoundError(
        f"{output}: not written yet; {parts} holds the finished parts of an interrupted "
        f"`jetastar cluster` run ({done}{of} jets done): rerun the same command to finish it"
    )


def _check_options(args: argparse.Namespace) -> list[float | None]:
    """The ``--check`` options: the t_cut values (``[None]``: the jets' own)."""
    try:
        t_cuts = [float(x) for x in split_list(args.t_cut)] if args.t_cut else [None]
    except ValueError:
        raise UsageError(f"--t-cut {args.t_cut!r}: give numbers, e.g. 1,4,16") from None
    if any(t is not None and not (math.isfinite(t) and t > 0) for t in t_cuts):
        raise UsageError(f"--t-cut {args.t_cut!r}: t_cut values are finite numbers > 0 (GeV²)")
    for option, value in (("--lam", args.lam), ("--lam-root", args.lam_root),
                          ("--time-limit", args.time_limit)):
        if value is not None and not (math.isfinite(value) and value > 0):
            raise UsageError(f"{option}: must be a finite number > 0, got {value!r}")
    if args.max_jets < 1:
        raise UsageError("--max-jets must be >= 1")
    return t_cuts


def kt_family_note(jets: Any) -> str:
    """One line: at which ``t_cut`` the kt family's trees are finite on most of the jets."""
    best = kt_family_t_cut(jets)
    found = {name: t for name, t in best.items() if t is not None}
    if not found:
        return (f"the kt family's trees are -inf on most jets at every t_cut down to "
                f"{T_CUT_LADDER[-1]:g} GeV²")
    if len(set(found.values())) == 1 and len(found) == len(best):
        where = f"at t_cut <= {next(iter(found.values())):g} GeV²"
    else:
        where = "at " + ", ".join(f"t_cut <= {t:g} GeV² ({name})" for name, t in found.items())
        missing = [name for name in best if name not in found]
        if missing:
            where += f"; {', '.join(missing)}: at no t_cut down to {T_CUT_LADDER[-1]:g} GeV²"
    return (f"the kt family's trees are finite on most jets {where}: to compare with them, "
            "cluster at such a t_cut (--t-cut), where the model treats almost every pair as a "
            "splitting")


def _model_check(args: argparse.Namespace, t_cuts: list[float | None]) -> None:
    """``jetastar info FILE --check``: how many jets the model can describe."""
    jets = read_jets_or_particles(args.file, tree=args.tree, particles=args.particles,
                                  stop=args.max_jets)
    echo("")
    echo(f"model check on {len(jets)} jets (greedy, then beam search; up to 14 leaves the exact "
         "MAP engine decides):")
    for t_cut in t_cuts:
        check = model_check(jets, t_cut=t_cut, lam=args.lam, lam_root=args.lam_root,
                            progress=not getattr(args, "no_progress", False))
        echo(f"  {check}")
    echo("  (a jet without a possible tree scores -inf for every algorithm; a smaller t_cut "
         "describes more jets)")
    echo(f"  {kt_family_note(jets)}")
    preview = preview_jets(jets, BatchConfig(algorithms(), time_limit=args.time_limit),
                           n_jets=_file_jet_count(args, len(jets)))
    echo("")
    for line in preview.lines() + preview.warnings():
        echo(line)


def _file_jet_count(args: argparse.Namespace, n_read: int) -> int:
    """The file's number of jets (entries of a particle file), for the cost preview."""
    if n_read < args.max_jets:
        return n_read
    try:
        return io.n_jets(args.file)
    except io.FileFormatError:
        pass
    found = describe_particle_file(args.file)
    tree = args.tree or (found[0].get("tree") if found else None)
    particles = args.particles or (found[0]["particles"] if found else None)
    mapping = None if args.particles else (found[0].get("mapping") if found else None)
    return io.particle_entries(args.file, tree=tree, particles=particles, mapping=mapping)


def _describe_setup(args: argparse.Namespace) -> int:
    """``jetastar info`` without a file: version, numba threads and the device."""
    status = gpu_status()
    auto = resolve_device("auto")
    if auto == "gpu":
        why = (f"device=auto uses the GPU for exact trellises of {GPU_MIN_LEAVES} or more leaves "
               f"({status['device']}); smaller jets stay on the CPU")
    elif status["available"] and status["simulator"]:
        why = "device=auto uses the CPU: the only GPU is the CUDA simulator (NUMBA_ENABLE_CUDASIM)"
    else:
        why = f"device=auto uses the CPU: {status['reason']}"
    info = {
        "version": __version__, "numba_threads": nb.get_num_threads(),
        "gpu_available": status["available"], "gpu": status["device"] or None,
        "device_auto": auto, "device_reason": why, "gpu_cost_measured": GPU_MEASURED,
    }
    if args.json:
        echo(json_text(info))
        return 0
    echo(f"jetastar:        {__version__}")
    echo(f"numba threads:   {info['numba_threads']}")
    echo(f"GPU:             {status['device'] or 'none'}")
    echo(f"device (auto):   {why}")  # (with the install hint where a package is missing)
    echo(f"GPU cost:        {_gpu_cost_line(GPU_MEASURED)}")
    return 0


def _gpu_cost_line(measured: dict) -> str:
    """What the GPU path cost per jet where it was measured, in one line.

    Example:
        >>> line = _gpu_cost_line({"device": "X", "date": "D", "map_only_s": {28: 68.8},
        ...                        "map_and_log_z_s": {20: 0.09, 26: 38.8},
        ...                        "marginals_s": {22: 33.0}, "batch_12_leaves_jets_per_s": 50800})
        >>> line.split("; ")[:2]
        ['MAP + log Z 0.09 s at 20, 39 s at 26 leaves', 'MAP only 69 s at 28']
    """
    def sizes(times: dict) -> str:
        return ", ".join(f"{t:.2g} s at {n}" for n, t in times.items())

    return (f"MAP + log Z {sizes(measured['map_and_log_z_s'])} leaves; "
            f"MAP only {sizes(measured['map_only_s'])}; "
            f"marginals {sizes(measured['marginals_s'])}; "
            f"{measured['batch_12_leaves_jets_per_s']:,} jets/s of 12 leaves "
            f"(measured on one {measured['device']}, {measured['date']})")


def _describe_file(args: argparse.Namespace) -> int:
    """Print what :func:`jetastar.io.file_info` says of the file (as JSON with ``--json``)."""
    try:
        info = io.file_info(args.file, results=False)
    except io.FileFormatError as exc:
        if "not a jetastar" not in str(exc):
            raise
        return _info_particles(args.file)
    summary = {}
    if info.get("results"):  # (the results' rows, read once for the statuses and the tree
        # counts)
        summary = results_summary(args.file)
        info["results"] = {label: {k: s[k] for k in ("algorithm", "likelihood", "rows", "status")}
                           for label, s in summary.items()}
    if args.json:
        clean = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in info.items()}
        echo(json_text(clean, default=str))
        return 0
    attrs = info.get("attrs", {})
    echo(f"file:            {info['path']}")
    echo(f"format:          {info['format']}" + (
        f", schema version {attrs['schema_version']}" if "schema_version" in attrs else ""))
    for key in ("jetastar_version", "created", "command", "seed", "input"):
        if key in attrs:
            echo(f"{key + ':':<16} {attrs[key]}")
    if "n_jets" in info:
        nl = info["n_leaves"]
        echo(f"jets:            {info['n_jets']} "
             f"({', '.join(f'{k} {v}' for k, v in info['jet_types'].items())})")
        if len(nl):
            echo(f"leaves per jet:  min {int(nl.min())}, mean {float(nl.mean()):.2f}, "
                 f"max {int(nl.max())}")
        echo(f"truth trees:     {info['has_truth']}")
        if info.get("extra_columns"):
            echo(f"extra columns:   {', '.join(info['extra_columns'])}")
    gp = attrs.get("generator_params")
    if isinstance(gp, str):
        try:
            gp = json.loads(gp)
        except ValueError:
            gp = None
    if gp:
        echo("parameters:")
        for p in gp[:10]:
            echo("  " + ", ".join(f"{k}={_short_value(v)}" for k, v in p.items()))
        if len(gp) > 10:
            echo(f"  ... {len(gp) - 10} more parameter sets")
    if info.get("results"):
        echo("results:")
        finite = format_tree_counts({label: s["counts"] for label, s in summary.items()})
        for label, r in info["results"].items():
            st = ", ".join(f"{k} {v}" for k, v in r["status"].items())
            detail = f"{st}{finite.get(label, '')}".removeprefix("; ")
            echo(f"  {label:<16} {r['rows']} rows" + (f" ({detail})" if detail else "")
                 + f", likelihood {r['likelihood']}")
    return 0


def _info_particles(path: str) -> int:
    """``jetastar info`` on a file jetastar did not write: what read_particles could read."""
    found = describe_particle_file(path)
    echo(f"file:            {path}")
    echo("format:          not a jetastar file")
    if not found:
        echo("particles:       none found (no branch prefix / dataset with momentum coordinates; "
             "see `jetastar cluster --help` for explicit mappings)")
        return 0
    echo("particles (read with `jetastar cluster FILE ... --algorithms ...`):")
    for d in found:
        coords = d.get("coordinates")
        text = ", ".join(coords.values()) if isinstance(coords, dict) else str(coords or "")
        where = cluster_options(d)
        entries = f"{d['entries']} entries" if "entries" in d else ""
        shape = f" shape {tuple(d['shape'])}" if "shape" in d else ""
        coords_text = f"  [{text}]" if text else ""
        echo(f"  {where:<40} {d['kind']:<10} {entries}{shape}{coords_text}")
    return 0


def _short_value(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, list):
        return "(" + ", ".join(_short_value(x) for x in v) + ")"
    return str(v)


def add_parser(sub: Any) -> None:
    """Add the ``info`` command to the subparsers ``sub``."""
    p = sub.add_parser("info", help="what a jet/results file holds (no file: this installation)",
                       description="Print the schema version, provenance, jet and leaf counts, "
                       "parameters and results of a file (.h5, .root or legacy .pkl). Without a "
                       "file: the version, numba threads and the device (CPU or GPU) the exact "
                       "trellis would use, and why.")
    p.add_argument("file", nargs="?", default=None)
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
    g.add_argument("--time-limit", type=float, default=None, metavar="SECONDS",
                   help="the cost preview's time limit per jet and algorithm, as `jetastar "
                        "cluster --time-limit` (default: none)")
    g.add_argument("--tree", default=None, help="particle files: the TTree")
    g.add_argument("--particles", default=None, help="particle files: the collection to read")
    p.set_defaults(func=run)
    add_common(p)
