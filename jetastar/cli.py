"""The ``jetastar`` command line (also ``python -m jetastar``).

Commands::

    jetastar run       [-o jetastar-run/]                 the main job on built-in defaults
    jetastar generate  --type qcd|w --n N --seed S -o jets.h5|jets.root
    jetastar cluster   INPUT... --algorithms greedy,beam,... [--option k=v] -o results.h5|.root
    jetastar compare   results.h5 [--plot comparison.png]
    jetastar info      FILE
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
import math
import os
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["comparison_table", "format_comparison", "main", "plot_comparison"]

_PROG = "jetastar"

#: leaf-count band edges of the comparison table (a band is [edge_k, edge_{k+1})).
DEFAULT_BANDS = (2, 6, 10, 14, 18, 25, 40, 70, 120)


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
    from .batch import _load_registry

    _load_registry(plugins)


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
        chunk_size=args.chunk_size,
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
        for alg, counts in s.status_counts.items():
            text = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
            _out(f"  {alg:<16} {text}")
    return 1 if failed else 0


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
    return code


# ---------------------------------------------------------------------- compare
def _band_label(lo: int, hi: int | None) -> str:
    return f"{lo}+" if hi is None else (f"{lo}-{hi - 1}" if hi - 1 > lo else f"{lo}")


def comparison_table(
    path: str | os.PathLike[str], bands: Sequence[int] = DEFAULT_BANDS, reference: str = "greedy",
    tol: float = 1e-9,
) -> list[dict[str, Any]]:
    """Per algorithm and leaf-count band: log-likelihood differences, times, exact-MAP rate.

    Args:
        path: a results file (jets + results) written by ``jetastar cluster``/``run``.
        bands: increasing leaf-count edges; the last band is open-ended; an ``"all"`` row is added
            per algorithm.
        reference: the algorithm to compare to (default greedy; skipped when absent).
        tol: relative tolerance for "found the exact MAP".

    Returns:
        One dict per (algorithm, band) with keys ``algorithm``, ``band``, ``jets``, ``with_tree``,
        ``skipped``, ``failed``, ``budget`` (coverage: counts over all jets of the band),
        ``compared`` (jets of the band where every algorithm produced a tree — every algorithm
        that produced one for any jet of the band: one skipped on the whole band does not empty
        it), ``d_ref_mean``, ``d_ref_median``, ``d_truth_mean``, ``d_truth_median``,
        ``time_mean``, ``time_median`` (seconds; all six over the compared jets only, so that
        within a band every algorithm is averaged over the same jets), ``map_known``,
        ``map_found`` (count of jets with a known exact MAP, and how many of those this algorithm
        matched); NaN where undefined.
        Differences use only jets where both values are finite.
    """
    from . import io
    from .io import get_extras

    collection = io.read(path, validate=False)
    tables = io.read_results(path)
    if not tables:
        raise io.FileFormatError(f"{path}: holds no clustering results (run jetastar cluster)")
    n_leaves = collection.n_leaves
    _, jet_extra = get_extras(collection)
    n = len(collection)

    def column(table: Any) -> np.ndarray:
        values = np.full(n, np.nan)
        has_tree = np.isin(table.status, ["ok", "budget", "all_inf"])
        values[table.jet_index[has_tree]] = table.log_likelihood[has_tree]
        return values

    lls = {label: column(t) for label, t in tables.items()}
    # which algorithm produced a tree for which jet: means over different jet sets do not compare
    produced = {}
    for label, t in tables.items():
        produced[label] = np.zeros(n, dtype=bool)
        produced[label][t.jet_index[np.isin(t.status, ["ok", "budget", "all_inf"])]] = True

    def common_of(sel: np.ndarray) -> np.ndarray:
        """Jets of ``sel`` with a tree from every algorithm that has a tree for any jet of it."""
        common = sel.copy()
        for has in produced.values():
            if (has & sel).any():
                common &= has
        return common
    map_ll: dict[str, np.ndarray] = {}
    for t in tables.values():
        if not t.exact_method:
            continue
        known = np.full(n, np.nan)
        good = t.exact & np.isin(t.status, ["ok", "all_inf"])
        known[t.jet_index[good]] = t.log_likelihood[good]
        prev = map_ll.get(t.likelihood)
        map_ll[t.likelihood] = known if prev is None else np.where(np.isnan(prev), known, prev)
    ref_table = tables.get(reference)
    edges = list(bands)
    band_of = np.searchsorted(np.asarray(edges), n_leaves, side="right") - 1
    band_list = [(k, edges[k], edges[k + 1] if k + 1 < len(edges) else None)
                 for k in range(len(edges))]
    rows: list[dict[str, Any]] = []
    for label, t in tables.items():
        ll = lls[label]
        truth = jet_extra.get(f"truth_llh_{t.likelihood}")
        if truth is None:
            from .io._common import truth_log_likelihoods

            truth = truth_log_likelihoods(collection, t.likelihood)
        ref = lls[reference] if (ref_table is not None and ref_table.likelihood == t.likelihood) \
            else np.full(n, np.nan)
        known = map_ll.get(t.likelihood, np.full(n, np.nan))
        time_of = np.full(n, np.nan)
        time_of[t.jet_index] = t.time_s
        status_of = np.full(n, "", dtype=object)
        status_of[t.jet_index] = t.status
        selections = [(_band_label(lo, hi), band_of == k) for k, lo, hi in band_list]
        selections = [(name, sel) for name, sel in selections if sel.any()]
        selections.append(("all", np.ones(n, dtype=bool)))
        for name, sel in selections:
            rows.append(_row(label, name, sel, common_of(sel), ll, ref, truth, known, time_of,
                             status_of, tol))
    return rows


def _stats(values: np.ndarray) -> tuple[float, float]:
    v = values[np.isfinite(values)]
    if v.size == 0:
        return math.nan, math.nan
    return float(np.mean(v)), float(np.median(v))


def _row(label: str, band: str, sel: np.ndarray, cmp: np.ndarray, ll: np.ndarray,
         ref: np.ndarray, truth: np.ndarray, known: np.ndarray, time_of: np.ndarray,
         status_of: np.ndarray, tol: float) -> dict[str, Any]:
    both = cmp & np.isfinite(ll)
    with np.errstate(invalid="ignore"):
        d_ref = np.where(both & np.isfinite(ref), ll - ref, np.nan)
        d_truth = np.where(both & np.isfinite(truth), ll - truth, np.nan)
        known_sel = sel & ~np.isnan(known)
        found = known_sel & (
            (ll == known) | (np.abs(ll - known) <= tol * np.maximum(1.0, np.abs(known)))
        )
    d_ref_mean, d_ref_median = _stats(d_ref[cmp])
    d_truth_mean, d_truth_median = _stats(d_truth[cmp])
    t_mean, t_median = _stats(time_of[cmp])
    st = status_of[sel]
    return {
        "algorithm": label, "band": band, "jets": int(sel.sum()),
        "with_tree": int(np.isin(st, ["ok", "budget", "all_inf"]).sum()),
        "minus_inf": int((sel & (ll == -np.inf)).sum()),
        "skipped": int((st == "skipped").sum()), "failed": int((st == "failed").sum()),
        "budget": int((st == "budget").sum()), "compared": int(cmp.sum()),
        "d_ref_mean": d_ref_mean, "d_ref_median": d_ref_median,
        "d_truth_mean": d_truth_mean, "d_truth_median": d_truth_median,
        "time_mean": t_mean, "time_median": t_median,
        "map_known": int(known_sel.sum()), "map_found": int(found.sum()),
    }


def _fmt(x: float, spec: str = "+.3f") -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def format_comparison(rows: Sequence[dict[str, Any]], reference: str = "greedy") -> str:
    """The comparison table as aligned text."""
    head = ["algorithm", "leaves", "jets", "tree", "-inf", "skip", "fail", "budg", "cmp",
            f"dLL-{reference} mean", "median", "dLL-truth mean", "median",
            "time/jet mean", "median", "exact MAP found"]
    lines = []
    for r in rows:
        found = "-" if r["map_known"] == 0 else \
            f"{r['map_found']}/{r['map_known']} ({100.0 * r['map_found'] / r['map_known']:.0f}%)"
        lines.append([
            r["algorithm"], r["band"], str(r["jets"]), str(r["with_tree"]), str(r["minus_inf"]),
            str(r["skipped"]),
            str(r["failed"]), str(r["budget"]), str(r["compared"]),
            _fmt(r["d_ref_mean"]), _fmt(r["d_ref_median"]),
            _fmt(r["d_truth_mean"]), _fmt(r["d_truth_median"]),
            _fmt_time(r["time_mean"]), _fmt_time(r["time_median"]), found,
        ])
    widths = [max(len(h), *(len(row[k]) for row in lines)) if lines else len(h)
              for k, h in enumerate(head)]
    out = ["  ".join(h.rjust(w) if k >= 2 else h.ljust(w) for k, (h, w) in
                     enumerate(zip(head, widths, strict=True)))]
    out.append("  ".join("-" * w for w in widths))
    prev = None
    for row in lines:
        if prev is not None and row[0] != prev:
            out.append("")
        prev = row[0]
        out.append("  ".join(c.rjust(w) if k >= 2 else c.ljust(w) for k, (c, w) in
                             enumerate(zip(row, widths, strict=True))))
    note = (f"coverage: tree = jets with a tree (-inf: of which log-likelihood -inf), skip / fail / "
            f"budg(et) stops.\ncmp = jets of the band where every algorithm with any tree in the "
            f"band produced one: dLL and time columns are over these jets only, the same set for "
            f"every algorithm of the band.\ndLL = "
            f"log-likelihood minus that of {reference} / of the truth tree (same likelihood form; "
            f"jets where both are finite); exact MAP found = matches of the MAP where an exact "
            f"method finished.")
    return "\n".join([*out, "", note])


def _fmt_time(t: float) -> str:
    if t is None or math.isnan(t):
        return "-"
    if t < 1e-3:
        return f"{t * 1e6:.0f} us"
    if t < 1.0:
        return f"{t * 1e3:.1f} ms"
    return f"{t:.2f} s"


def plot_comparison(rows: Sequence[dict[str, Any]], path: str | os.PathLike[str],
                    reference: str = "greedy") -> None:
    """Save a plot per leaf band: mean Δ log-likelihood to the truth and to ``reference`` and median
    time per jet (over the jets where every algorithm produced a tree), and each algorithm's
    coverage (fraction of jets with a tree)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    algs = list(dict.fromkeys(r["algorithm"] for r in rows))
    bands = list(dict.fromkeys(r["band"] for r in rows if r["band"] != "all"))
    fig, axes = plt.subplots(1, 4, figsize=(19, 4.5))
    for alg in algs:
        sub = {r["band"]: r for r in rows if r["algorithm"] == alg}
        x = np.arange(len(bands))
        axes[0].plot(x, [sub.get(b, {}).get("d_truth_mean", np.nan) for b in bands], "o-",
                     label=alg)
        axes[1].plot(x, [sub.get(b, {}).get("d_ref_mean", np.nan) for b in bands], "o-",
                     label=alg)
        axes[2].plot(x, [sub.get(b, {}).get("time_median", np.nan) for b in bands], "o-",
                     label=alg)
        axes[3].plot(x, [sub[b]["with_tree"] / sub[b]["jets"] if b in sub and sub[b]["jets"]
                         else np.nan for b in bands], "o-", label=alg)
    titles = ("mean log L − log L(truth)", f"mean log L − log L({reference})",
              "median time per jet [s]", "coverage: fraction of jets with a tree")
    for ax, title in zip(axes, titles, strict=True):
        ax.set_xticks(np.arange(len(bands)))
        ax.set_xticklabels(bands)
        ax.set_xlabel("number of leaves")
        ax.set_title(title)
        ax.grid(alpha=0.3)
    axes[2].set_yscale("log")
    axes[3].set_ylim(-0.05, 1.05)
    axes[0].legend(fontsize="small")
    fig.suptitle("first three panels: the jets where every algorithm produced a tree",
                 fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _cmd_compare(args: argparse.Namespace) -> int:
    bands = DEFAULT_BANDS if not args.bands else tuple(int(b) for b in _split_list(args.bands))
    if list(bands) != sorted(set(bands)) or bands[0] < 1:
        raise _UsageError("--bands must be increasing positive integers, e.g. 2,6,10,15")
    rows = comparison_table(args.results, bands=bands, reference=args.reference)
    if args.json:
        _out(json.dumps(rows, indent=1, default=float))
    else:
        _out(format_comparison(rows, args.reference))
    if args.plot:
        plot_comparison(rows, args.plot, args.reference)
        _out(f"plot saved to {args.plot}")
    return 0


# ---------------------------------------------------------------------- info
def _cmd_info(args: argparse.Namespace) -> int:
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
        for label, r in info["results"].items():
            st = ", ".join(f"{k} {v}" for k, v in r["status"].items())
            _out(f"  {label:<16} {r['rows']} rows ({st}), likelihood {r['likelihood']}")
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
#: its per-jet time budget in `jetastar run` (the bundled jets need at most ~1 min)
_MAP_TIME_LIMIT = 600.0

def _cmd_run(args: argparse.Namespace) -> int:
    from ._jit import one_notice_for_workers
    from .batch import _make_executor

    with one_notice_for_workers():
        executor, _ = _make_executor(args.workers, None, args.plugin or ())
        try:
            return _run_main_job(args, executor)
        finally:
            if executor is not None:
                executor.shutdown(wait=True, cancel_futures=True)


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
    names = _split_list(args.algorithms) or algorithms()
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
                         chunk_size=args.chunk_size)
    check_config(config)  # every option is checked before the jets are generated
    _out(f"jetastar run -> {out}/  (algorithms: {', '.join(names)})")
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
    _out(f"generated {args.n_qcd} QCD + {args.n_w} W jets (seeds {args.seed}, {args.seed + 1}) "
         f"-> {jets_path}")
    results_h5 = out / "results.h5"
    summaries = run_batch([jets_path], config, output=results_h5, workers=args.workers,
                          executor=executor, progress=not args.no_progress, fresh=True,
                          attrs={"command": _command_line()})
    code = _print_summaries(summaries)
    if code:
        return code
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
    p.add_argument("--max-jet-leaves", type=int, default=None,
                   help="generate only jets with at most this many leaves")
    p.add_argument("--algorithms", default=None, help="comma-separated (default: all registered)")
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
                       description="Per algorithm and leaf-count band: mean/median log-likelihood "
                       "difference to the reference algorithm (greedy) and to the truth tree, "
                       "time per jet, and how often the exact MAP was found where it is known.")
    p.add_argument("results", help="results file (.h5 or .root) from `jetastar cluster` / `run`")
    p.add_argument("--plot", default=None, metavar="OUT.png", help="also save a plot")
    p.add_argument("--reference", default="greedy", help="algorithm to compare to (greedy)")
    p.add_argument("--bands", default=None, metavar="E1,E2,...",
                   help=f"leaf-count band edges (default {','.join(map(str, DEFAULT_BANDS))})")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.set_defaults(func=_cmd_compare)
    _add_common(p)

    p = sub.add_parser("info", help="what a jet/results file holds",
                       description="Print the schema version, provenance, jet and leaf counts, "
                       "parameters and results of a file (.h5, .root or legacy .pkl).")
    p.add_argument("file")
    p.add_argument("--json", action="store_true", help="print as JSON")
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
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:  # output piped into `head` etc.
        try:  # silence the flush at exit (Python docs, "Note on SIGPIPE")
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 0
    except KeyboardInterrupt:
        if debug:
            raise
        print(f"{_PROG}: interrupted (rerun the same command to resume a cluster run)",
              file=sys.stderr)
        return 130
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


def _one_line(exc: BaseException) -> str:
    from .errors import JetastarError

    text = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, (JetastarError, ValueError, OSError)):
        return text
    return f"{type(exc).__name__}: {text} (rerun with --debug for the traceback)"
