"""``jetastar algorithms``: the registered clustering algorithms and their options."""

from __future__ import annotations

import argparse
from typing import Any

from ..batch import load_registry
from ..clustering import algorithm_info, algorithms
from .shared import add_common, echo

__all__ = ["add_parser", "run"]


def run(args: argparse.Namespace) -> int:
    """List the algorithms; returns the exit code."""
    load_registry(args.plugin or [])
    names = algorithms()
    if not names:
        echo("no algorithms are registered")
        return 0
    for name in names:
        info = algorithm_info(name)
        kind = "exact" if info.exact else "approx"
        limit = f", max {info.max_leaves} leaves" if info.max_leaves else ""
        echo(f"{name:<16} [{kind}{limit}] {info.description}")
        echo(f"{'':<16} options: {', '.join(info.options()) or '(none)'}")
    return 0


def add_parser(sub: Any) -> None:
    """Add the ``algorithms`` command to the subparsers ``sub``."""
    p = sub.add_parser("algorithms", help="list the registered clustering algorithms",
                       description="List every registered algorithm with its options.")
    p.add_argument("--plugin", action="append", metavar="MODULE",
                   help="import MODULE first (e.g. one that registers extra algorithms)")
    p.set_defaults(func=run)
    add_common(p)
