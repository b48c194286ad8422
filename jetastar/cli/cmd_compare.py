"""``jetastar compare``: the comparison table of a results file (:mod:`jetastar.comparison`) and
its plot (:func:`jetastar.plotting.plot_comparison`)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..comparison import DEFAULT_BANDS, comparison_table, format_comparison
from ..plotting import plot_comparison as draw_comparison
from .shared import (
    UsageError,
    add_common,
    check_writable,
    echo,
    json_text,
    kt_family_minus_inf_note,
    split_list,
)

__all__ = ["add_parser", "plot_comparison", "run"]


def plot_comparison(rows: Sequence[dict[str, Any]], path: str | os.PathLike[str],
                    **kw: Any) -> None:
    """Save :func:`jetastar.plotting.plot_comparison` of the rows to ``path`` (without a display:
    matplotlib's Agg backend) and close the figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.close(draw_comparison(rows, path, **kw))


def _check_plot_format(path: str) -> None:
    """Refuse a ``--plot`` file whose extension matplotlib cannot write (before any work)."""
    from matplotlib.figure import Figure

    kinds = Figure().canvas.get_supported_filetypes()
    suffix = Path(path).suffix.lower().lstrip(".")
    if suffix not in kinds:
        raise UsageError(f"--plot {path}: matplotlib writes {', '.join('.' + k for k in kinds)}")


def run(args: argparse.Namespace) -> int:
    """Print (and plot) the comparison; returns the exit code."""
    try:
        bands = DEFAULT_BANDS if not args.bands else tuple(int(b) for b in split_list(args.bands))
    except ValueError:
        bands = ()
    if not bands or list(bands) != sorted(set(bands)) or bands[0] < 1:
        raise UsageError(f"--bands {args.bands}: give increasing positive integers, e.g. "
                         "2,6,10,15")
    if args.plot:
        check_writable(args.plot, "--plot")  # (before the table is printed)
        _check_plot_format(args.plot)
    rows = comparison_table(args.results, bands=bands, reference=args.reference)
    if args.json:
        echo(json_text(rows))
    else:
        echo(format_comparison(rows))
        counts: dict[str, dict[str, int]] = {}
        for row in rows:
            if row["band"] == "all":
                c = counts.setdefault(row["algorithm"], {"ran": 0, "minus_inf": 0})
                c["ran"] += int(row["ran"])
                c["minus_inf"] += int(row["ran"]) - int(row["finite"])
        note = kt_family_minus_inf_note(counts, args.results)
        if note:
            echo(note.strip())
    if args.plot:
        plot_comparison(rows, args.plot)
        echo(f"plot saved to {args.plot}")
    return 0


def add_parser(sub: Any) -> None:
    """Add the ``compare`` command to the subparsers ``sub``."""
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
    p.add_argument("--json", action="store_true",
                   help="print the rows as JSON (NaN and ±inf as null)")
    p.set_defaults(func=run)
    add_common(p)
