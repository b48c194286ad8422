"""What the commands of the ``jetastar`` command line share: output, usage errors, the cluster
options, generated jets and the summary of a batch run."""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .. import io
from ..clustering import algorithm_info
from ..diagnostics import KT_FAMILY
from ..ginkgo import ShowerParams, generate
from ..ginkgo.generator import SEED_LIMIT
from ..io import set_extras
from ..io.dispatch import written_attrs
from ..io.particle_files import describe_particle_file
from ..jet import JetCollection

__all__ = [
    "PROG",
    "UsageError",
    "add_cluster_options",
    "add_common",
    "check_writable",
    "command_line",
    "count_value",
    "echo",
    "format_tree_counts",
    "generate_collection",
    "leaves_value",
    "print_summaries",
    "refuse_replacing",
    "seed_value",
    "split_list",
]

#: the command's name
PROG = "jetastar"


class UsageError(Exception):
    """A command-line usage error (exit code 2)."""


def _int_in(text: str, low: int, what: str, high: int | None = None) -> int:
    """``text`` as an integer ``>= low`` (and ``< high``), else an argparse type error."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
    if value < low or (high is not None and value >= high):
        raise argparse.ArgumentTypeError(f"expected {what}, got {value}")
    return value


def seed_value(text: str) -> int:
    """An argparse type: a seed, an integer in ``[0, 2**63)`` (a bad one is a usage error, exit
    code 2, before any work)."""
    return _int_in(text, 0, "an integer seed in [0, 2**63)", SEED_LIMIT)


def count_value(text: str) -> int:
    """An argparse type: a number of jets, an integer >= 0."""
    return _int_in(text, 0, "an integer >= 0")


def leaves_value(text: str) -> int:
    """An argparse type: a number of leaves, an integer >= 1."""
    return _int_in(text, 1, "a number of leaves >= 1")


def echo(text: str = "") -> None:
    """Print a line of the command's output (flushed at once, for progress lines and pipes)."""
    print(text, flush=True)


def json_text(obj: Any, default: Any = float) -> str:
    """``obj`` as strict JSON (indented): NaN and ±inf, which ``json.dumps`` writes as the
    non-standard ``NaN`` / ``Infinity`` that strict parsers (JavaScript's ``JSON.parse``,
    ``json.loads(..., parse_constant=...)``) refuse, become ``null``; ``default`` converts other
    objects (numpy numbers).

    Example:
        >>> import json
        >>> json.loads(json_text({"a": float("-inf"), "b": [1.5, float("nan")]}))
        {'a': None, 'b': [1.5, None]}
    """
    def strict(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strict(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [strict(v) for v in value]
        if isinstance(value, (float, np.floating)):
            return float(value) if math.isfinite(value) else None
        if isinstance(value, np.ndarray):
            return strict(value.tolist())
        return value

    return json.dumps(strict(obj), indent=1, default=default, allow_nan=False)


def split_list(text: str | None) -> list[str]:
    """``"a, b,,c"`` -> ``["a", "b", "c"]`` (``None`` or ``""`` -> ``[]``)."""
    if not text:
        return []
    return [t.strip() for t in text.split(",") if t.strip()]


def check_writable(path: str | os.PathLike[str], option: str = "-o", *,
                   folder: bool = False) -> None:
    """Raise :class:`UsageError` when the file ``path`` (with ``folder``: the folder ``path``,
    made if missing) cannot be written: its folder is missing, or not writable (a read-only
    file system, no permission); said before any work, naming the option."""
    where = Path(path) if folder else Path(path).parent
    probe = where
    while not probe.exists() and probe != probe.parent:  # (a folder to be made: its parent)
        if not folder:
            raise UsageError(f"{option} {path}: the folder {where} does not exist")
        probe = probe.parent
    if not probe.is_dir():
        raise UsageError(f"{option} {path}: {probe} is not a folder")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise UsageError(f"{option} {path}: cannot write into {probe} (read-only or no "
                         "permission)")


def refuse_replacing(path: str | os.PathLike[str], kind: str,
                     replaceable: Callable[[dict[str, Any]], bool]) -> None:
    """Raise :class:`UsageError` when ``path`` exists and is not a file this command may replace:
    a file jetastar did not write, or one whose attributes ``replaceable`` rejects (``kind`` says
    what the command writes: ``"jets"``, ``"observables"``). A user's own data is never replaced
    by an ``-o`` that names it by mistake."""
    if not os.path.lexists(path):
        return
    if os.path.isdir(path):
        raise UsageError(f"-o {path}: is a directory; give a file name")
    attrs = written_attrs(path)
    if attrs is not None and replaceable(attrs):
        return
    what = "not a file jetastar wrote" if attrs is None else f"not a jetastar file of {kind}"
    raise UsageError(f"-o {path}: the file exists and is {what}; remove it, or choose another "
                     "output")


def command_line() -> str:
    """The command as typed (recorded in the files it writes)."""
    return shlex.join([PROG, *sys.argv[1:]])


def generate_collection(
    jet_type: str, n: int, seed: int, min_leaves: int | None, max_leaves: int | None,
    overrides: dict[str, Any], first_id: int = 0, max_tries: int = 10_000,
    first_index: int = 0,
) -> JetCollection:
    """Ginkgo jets of a preset (``"qcd"`` / ``"w"``) with their generator details (``deltas``,
    ``draws`` per node) as extra columns; jets ``first_index …`` of the seed's sequence, with ids
    from ``first_id + first_index``."""
    params = ShowerParams.preset(jet_type, **overrides)
    collection, details = generate(
        n, params, seed=seed, min_leaves=min_leaves, max_leaves=max_leaves, return_details=True,
        max_tries=max_tries, first_index=first_index,
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


def _echo_failure(text: str) -> None:
    """A ``FAILED`` line: with the summary on standard output, and on standard error too where
    that goes elsewhere (a batch job's separate error log; a terminal shows it once)."""
    echo(text)
    if not _same_destination(sys.stdout, sys.stderr):
        print(text, file=sys.stderr, flush=True)


def _same_destination(a: Any, b: Any) -> bool:
    """Whether two streams write to the same file, pipe or terminal (``True`` when unknown)."""
    try:
        sa, sb = os.fstat(a.fileno()), os.fstat(b.fileno())
    except (AttributeError, OSError, ValueError):  # (replaced streams, e.g. captured by tests)
        return True
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def print_summaries(summaries: Sequence[Any]) -> int:
    """Print the :class:`~jetastar.batch.FileSummary` of each input; returns the exit code (1 when
    a file failed, or every jet of a file failed with every algorithm). ``FAILED`` lines go to
    standard error as well where it is not where standard output goes."""
    failed = 0
    for s in summaries:
        if s.error:
            failed += 1
            _echo_failure(f"FAILED {s.input}: {s.error}")
            continue
        state = "already done" if s.already_done else (
            f"{s.chunks_reused}/{s.chunks_total} chunks resumed" if s.chunks_reused else "done"
        )
        echo(f"{s.input} -> {s.output} ({s.n_jets} jets, {state}, {s.seconds:.1f} s)")
        finite = format_tree_counts(s.tree_counts)
        for alg, counts in s.status_counts.items():
            text = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
            echo(f"  {alg:<16} {text}{finite.get(alg, '')}")
        for note in (all_inf_note(s.status_counts), kt_family_minus_inf_note(s.tree_counts,
                                                                             s.input)):
            if note:
                echo(note)
        rows = [c for c in s.status_counts.values() if sum(c.values())]
        if rows and all(set(c) == {"failed"} for c in rows):
            # an output of nothing but failures: the input or its reading options are wrong
            failed += 1
            alg = next(iter(s.status_counts))
            _echo_failure(f"FAILED {s.input}: every jet failed with every algorithm; each row's "
                          f"message says why (jetastar.io.read_results({str(s.output)!r})"
                          f"[{alg!r}].message)")
    return 1 if failed else 0


def read_jets_or_particles(path: str, *, tree: str | None = None, particles: str | None = None,
                          stop: int | None = None, t_cut: float | None = None) -> JetCollection:
    """The jets of a jetastar jet file, or of a file of particles: the collection ``particles``
    (in ``tree``), or the first one that ``jetastar info`` detects. ``stop``: the first jets only;
    ``t_cut``: given to jets read from particles."""
    try:
        return io.read(path, None if stop is None else slice(0, stop), validate=False)
    except io.FileFormatError as exc:
        if "not a jetastar" not in str(exc):
            raise
    mapping = None
    if particles is None:
        found = describe_particle_file(path)
        if not found:
            raise UsageError(f"{path}: neither a jetastar jet file nor a file of particles "
                             "jetastar recognises; give --particles (and --tree)")
        particles, mapping = found[0]["particles"], found[0].get("mapping")
        tree = tree or found[0].get("tree")
    kw = {} if t_cut is None else {"t_cut": t_cut}
    return io.read_particles(path, tree=tree, particles=particles, mapping=mapping,
                             entry_stop=stop, validate=False, **kw)


def all_inf_note(status_counts: dict[str, dict[str, int]]) -> str:
    """One line on what ``all_inf`` means for the approximate algorithms that report it (their
    own tree is −∞; a tree they did not find may be finite), or ``""``."""
    names = []
    for alg, counts in status_counts.items():
        if not counts.get("all_inf"):
            continue
        try:
            exact = algorithm_info(alg).exact
        except ValueError:  # (a name this process does not know: say nothing about it)
            continue
        if not exact:
            names.append(alg)
    if not names:
        return ""
    return (f"  (all_inf of {', '.join(names)}: the tree each built is −∞ (a split on its path is "
            "impossible); other trees of the jet may be finite. For an exact method, all_inf "
            "means no tree is possible)")


def kt_family_minus_inf_note(tree_counts: dict[str, dict[str, int]], path: Any) -> str:
    """One line when kt-family trees are −∞ on most jets (real jets at the default ``t_cut``),
    with the command that says at which ``t_cut`` they are finite; else ``""``."""
    names = [alg for alg in KT_FAMILY if alg in tree_counts
             and tree_counts[alg].get("ran", 0)
             and tree_counts[alg].get("minus_inf", 0) > tree_counts[alg]["ran"] / 2]
    if not names:
        return ""
    return (f"  ({', '.join(names)}: -inf on most jets at these parameters; `jetastar info "
            f"{path} --check` says at which t_cut their trees are finite)")


def format_tree_counts(counts: dict[str, dict[str, int]]) -> dict[str, str]:
    """Per algorithm: ``"; tree 100, finite 31 (-inf 69)"`` (ran and finite are not the same), and
    where trees are window optimal ``"; proven 60, window optimal 40"`` (the rest: stopped by the
    budget, see the status counts), from :func:`jetastar.comparison.status_counts`."""
    return {alg: f"; tree {c['ran']}, finite {c['finite']}"
                 + (f" (-inf {c['minus_inf']})" if c["minus_inf"] else "")
                 + (f"; proven {c['proven']}, window optimal {c['window_optimal']}"
                    if c["window_optimal"] else "")
            for alg, c in counts.items()}


def add_common(p: argparse.ArgumentParser) -> None:
    """``--debug`` on a command's parser."""
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                   help="show full tracebacks on errors")


def add_cluster_options(p: argparse.ArgumentParser) -> None:
    """The clustering options ``run`` and ``cluster`` share."""
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
    p.add_argument("--device", choices=["cpu", "gpu", "auto"], default=None,
                   help="where the exact trellis runs: a GPU (numba-cuda), the CPU, or auto "
                        "(default: a GPU for jets of 18 or more leaves when one is usable; "
                        "'jetastar info' says which)")
    p.add_argument("--chunk-size", type=int, default=None,
                   help="jets per work unit and part file (default: the first chunks 5000 jets "
                        "when every algorithm runs on the columnar path, which clusters whole "
                        "chunks in one kernel call: greedy, the kt family, the exact MAP of jets "
                        "up to 14 leaves, beam search, MCTS; 200 when one of them is beam search, "
                        "MCTS or the exact MAP; 50 otherwise; later chunks sized to about 2 s of "
                        "work each by their measured cost)")
    p.add_argument("--plugin", action="append", metavar="MODULE",
                   help="import MODULE first (e.g. one that registers extra algorithms)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
