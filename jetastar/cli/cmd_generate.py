"""``jetastar generate``: Ginkgo jets with their truth trees into an HDF5 or ROOT file."""

from __future__ import annotations

import argparse
import dataclasses
import json
from typing import Any

from .. import io
from .._progress import progress_bar
from ..batch import parse_option_value
from ..ginkgo import ShowerParams
from ..io.dispatch import stream_writer
from .shared import (
    UsageError,
    add_common,
    check_writable,
    command_line,
    echo,
    generate_collection,
    leaves_value,
    refuse_replacing,
    seed_value,
)

__all__ = ["add_parser", "run"]

#: the reference Ginkgo code's parameter names (docs/physics.md, "Coming from the reference code")
_REFERENCE_NAMES = {
    "Lambda": "lam", "LambdaRoot": "lam_root", "pt_cut": "t_cut, in GeV² (16 = 4²)",
    "pt_min": "t_cut, in GeV² (16 = 4²)", "delta_min": "t_cut, in GeV² (16 = 4²)",
    "Delta_0": "t_root", "M2start": "t_root", "M_Hard": "m_hard", "M_hard": "m_hard",
    "jet_p": "root_momentum",
}


def run(args: argparse.Namespace) -> int:
    """Generate the jets and write them; returns the exit code."""
    overrides: dict[str, Any] = {}
    if args.t_cut is not None:
        overrides["t_cut"] = args.t_cut
    fields = [f.name for f in dataclasses.fields(ShowerParams) if f.name != "jet_type"]
    for item in args.param or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise UsageError(f"--param {item!r} is not of the form name=value")
        if key.strip() not in fields:
            known = _REFERENCE_NAMES.get(key.strip())
            raise UsageError(f"--param {item!r}: unknown parameter {key.strip()!r}"
                             + (f": the reference code's name for {known}" if known else "")
                             + f"; valid: {', '.join(fields)}")
        overrides[key.strip()] = parse_option_value(value)
    if args.n < 0:
        raise UsageError("--n must be >= 0")
    if args.max_tries < 1:
        raise UsageError("--max-tries must be >= 1")
    try:
        io.file_format(args.output, sniff=False)
    except io.FileFormatError as exc:  # an -o the command cannot write: a usage error (exit 2)
        raise UsageError(f"-o {exc}") from None
    check_writable(args.output)
    # a jets file may be generated again; results, observables and others' files are kept
    refuse_replacing(args.output, "jets",
                     lambda attrs: not ({"batch", "results_file"} & set(attrs)))
    settings: dict[str, Any] = {
        "type": args.type, "n": args.n, "seed": args.seed, "min_leaves": args.min_leaves,
        "max_leaves": args.max_leaves,
    }
    # written block by block: memory does not grow with --n (jet i depends only on the seed and i)
    writer = stream_writer(args.output, {
        "seed": args.seed, "command": command_line(), "generator": "jetastar.ginkgo.generate",
    })
    lo, hi = None, None
    try:
        with progress_bar(total=args.n, desc=f"generating {args.type.upper()} jets", unit="jet",
                          unit_scale=True, show=args.n > GENERATE_BLOCK and not args.no_progress,
                          ) as bar:
            for a in range(0, max(args.n, 1), GENERATE_BLOCK):
                b = min(args.n, a + GENERATE_BLOCK)
                collection = generate_collection(
                    args.type, b - a, args.seed, args.min_leaves, args.max_leaves, overrides,
                    max_tries=args.max_tries, first_index=a,
                )
                if a == 0:
                    settings["params"] = (collection.jet_params(0).to_dict()
                                          if len(collection) else {})
                writer.add_jets(collection)
                if len(collection):
                    n_leaves = collection.n_leaves
                    lo = min(int(n_leaves.min()), lo if lo is not None else 1 << 62)
                    hi = max(int(n_leaves.max()), hi if hi is not None else 0)
                bar.update(b - a)
        writer.update_attrs({"generator_settings": json.dumps(settings)})
    except BaseException:
        writer.abort()
        raise
    writer.close()  # (which deletes its temporary file itself if it fails)
    span = f"{lo}..{hi}" if lo is not None else "-"
    echo(f"wrote {args.n} {args.type.upper()} jets (leaves {span}) to {args.output}")
    return 0


#: jets generated and written at a time by ``jetastar generate``
GENERATE_BLOCK = 100_000


def add_parser(sub: Any) -> None:
    """Add the ``generate`` command to the subparsers ``sub``."""
    p = sub.add_parser("generate", help="generate Ginkgo jets into an HDF5 or ROOT file",
                       description="Generate jets with the Ginkgo toy shower (reference defaults; "
                       "change parameters with --t-cut / --param) and write them with their truth "
                       "trees.")
    p.add_argument("--type", choices=["qcd", "w"], default="qcd", type=str.lower,
                   help="jet type preset (default qcd)")
    p.add_argument("--n", type=int, default=1000, help="number of jets (default 1000)")
    p.add_argument("--seed", type=seed_value, default=1, help="master seed (default 1)")
    p.add_argument("--min-leaves", type=leaves_value, default=None, help="keep jets with >= this many leaves")
    p.add_argument("--max-leaves", type=leaves_value, default=None, help="keep jets with <= this many leaves")
    p.add_argument("--max-tries", type=int, default=10_000,
                   help="showers tried per jet for the leaf range before giving up (default "
                        "10000; a rare range is better reached with another --t-cut)")
    p.add_argument("--t-cut", type=float, default=None,
                   help="t_cut in GeV² (smaller = larger jets: 1.0 ~20 leaves, 0.25 ~30)")
    p.add_argument("--param", action="append", metavar="NAME=VALUE",
                   help="other ShowerParams field, e.g. lam=2.0 or m_hard=50")
    p.add_argument("-o", "--output", required=True, help="output file (.h5, .hdf5 or .root)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)
    add_common(p)
