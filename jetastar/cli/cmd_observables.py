"""``jetastar observables``: jet-substructure observables of the trees of a results file
(:func:`jetastar.observables.write_observables`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..observables import check_soft_drop_parameters, write_observables
from .shared import (
    UsageError,
    add_common,
    check_writable,
    command_line,
    echo,
    refuse_replacing,
    split_list,
)

__all__ = ["add_parser", "run"]


def run(args: argparse.Namespace) -> int:
    """Write the observables; returns the exit code."""
    if Path(args.output).suffix.lower() not in (".root", ".h5", ".hdf5"):
        raise UsageError(f"-o {args.output}: observables go to a .root or .h5 file")
    try:
        check_soft_drop_parameters(args.z_cut, args.beta, args.r0)
    except ValueError as exc:  # "z_cut must be ..." -> "--z-cut: must be ..."
        name, _, rest = str(exc).partition(" ")
        raise UsageError(f"--{name.replace('_', '-')}: {rest}") from None
    check_writable(args.output)
    refuse_replacing(args.output, "observables", lambda attrs: "results_file" in attrs)
    labels = write_observables(
        args.output, args.results, algorithms=split_list(args.algorithms) or None,
        truth=not args.no_truth, z_cut=args.z_cut, beta=args.beta, r0=args.r0,
        command=command_line(),
    )
    echo(f"wrote observables of {', '.join(labels)} to {args.output} (one entry per jet; "
         f"soft drop z_cut={args.z_cut:g}, beta={args.beta:g}, R0={args.r0:g})")
    return 0


def add_parser(sub: Any) -> None:
    """Add the ``observables`` command to the subparsers ``sub``."""
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
    add_common(p)
    p.set_defaults(func=run)
