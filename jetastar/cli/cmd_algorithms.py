"""``jetastar algorithms``: the registered clustering algorithms and their options.

Everything it prints comes from the algorithms' own declarations
(:class:`~jetastar.clustering.AlgorithmInfo` and its options), as do the listing at the end of
``jetastar cluster --help`` and ``jetastar run --help`` (:func:`add_algorithm_listing`) and the
option tables of the documentation.
"""

from __future__ import annotations

import argparse
import textwrap
from typing import Any

from ..batch import load_registry
from ..clustering import AlgorithmInfo, algorithm_info, algorithms
from ..clustering.options import option_table
from .shared import UsageError, add_common, echo

__all__ = ["add_algorithm_listing", "add_parser", "describe", "listing", "run"]

#: width of the name column
_NAME = 16


def _kind(info: AlgorithmInfo) -> str:
    limit = f", max {info.max_leaves} leaves" if info.max_leaves else ""
    return f"[{'exact' if info.exact else 'approx'}{limit}]"


def listing(names: list[str] | None = None, width: int = 100) -> str:
    """Per algorithm: its name, kind and description, then its options (lines wrapped at
    ``width`` columns).

    Example:
        >>> print(listing(["kt"]))
        kt               [approx] kt clustering (generalized kt, p = 1), E-scheme, R = 1000
                         options: likelihood, R
    """
    lines = []
    indent = " " * (_NAME + 1)
    for name in algorithms() if names is None else names:
        info = algorithm_info(name)
        lines += textwrap.wrap(f"{name:<{_NAME}} {_kind(info)} {info.description}", width,
                               subsequent_indent=indent)
        lines += textwrap.wrap(f"options: {', '.join(info.options()) or '(none)'}", width,
                               initial_indent=indent, subsequent_indent=indent + "  ")
    return "\n".join(lines)


def describe(name: str, width: int = 100) -> str:
    """One algorithm in full: its kind, family, aliases and every option with its default,
    allowed values and help.

    Example:
        >>> print(describe("greedy"))  # doctest: +NORMALIZE_WHITESPACE
        greedy [approx] greedy agglomeration: merge the most likely pair first (reference tie rule)
          family: agglomerative; columnar path: yes
          option      default      values                                meaning
          likelihood  'symmetric'  'symmetric' or 'legacy' or 'density'  the likelihood form
    """
    info = algorithm_info(name)
    head = [f"{name} {_kind(info)} {info.description}".rstrip()]
    facts = [f"family: {info.family}", f"columnar path: {'yes' if info.chunk else 'no'}"]
    if info.aliases:
        facts.append(f"also called: {', '.join(info.aliases)}")
    head.append("  " + "; ".join(facts))
    rows = [("option", "default", "values", "meaning"), *option_table(info.declared or ())]
    if len(rows) == 1:
        return "\n".join([*head, "  (no options)"])
    widths = [max(len(r[k]) for r in rows) for k in range(3)]
    lead = sum(widths) + 2 + 2 * 3
    body = []
    for row in rows:
        first = "  " + "  ".join(f"{row[k]:<{widths[k]}}" for k in range(3)) + "  "
        rest = textwrap.wrap(row[3], max(20, width - lead)) or [""]
        body.append(first + rest[0])
        body.extend(" " * lead + more for more in rest[1:])
    return "\n".join(head + [line.rstrip() for line in body])


def run(args: argparse.Namespace) -> int:
    """List the algorithms (with names: each one's options in full); returns the exit code."""
    load_registry(args.plugin or [])
    if not algorithms():
        echo("no algorithms are registered")
        return 0
    if not args.names:
        echo(listing())
        echo(f"\n(`{args.prog_name} NAME` shows an algorithm's options with their defaults and "
             "allowed values)")
        return 0
    for k, name in enumerate(args.names):
        try:
            text = describe(name)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        echo(("\n" if k else "") + text)
    return 0


class _KeepLines(argparse.HelpFormatter):
    """Wraps a description as usual, but prints text with line breaks (the algorithm listing)
    as it is."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if "\n" in text:
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


def add_algorithm_listing(p: argparse.ArgumentParser) -> None:
    """End ``p``'s ``--help`` with the registered algorithms and their options."""
    p.formatter_class = _KeepLines
    p.epilog = ("algorithms and their options (`jetastar algorithms NAME`: defaults, allowed "
                "values):\n" + listing())


def add_parser(sub: Any) -> None:
    """Add the ``algorithms`` command to the subparsers ``sub``."""
    p = sub.add_parser("algorithms", help="list the registered clustering algorithms",
                       description="List every registered algorithm with its options; with names, "
                       "each one's options with their defaults, allowed values and meaning.")
    p.add_argument("names", nargs="*", metavar="NAME",
                   help="algorithms to describe in full (default: list them all)")
    p.add_argument("--plugin", action="append", metavar="MODULE",
                   help="import MODULE first (e.g. one that registers extra algorithms)")
    p.set_defaults(func=run, prog_name="jetastar algorithms")
    add_common(p)
