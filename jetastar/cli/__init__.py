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

Each command is one module (``jetastar.cli.cmd_<command>``: its options and a ``run`` function that
calls library functions); :mod:`jetastar.cli.command` builds the parser and holds :func:`main`;
:mod:`jetastar.cli.shared` has what the commands share.

Example:
    >>> from jetastar.cli import main
    >>> main(["algorithms"])  # doctest: +SKIP
"""

from __future__ import annotations

from ..comparison import comparison_table, format_comparison
from .cmd_compare import plot_comparison
from .command import build_parser, main

__all__ = ["build_parser", "comparison_table", "format_comparison", "main", "plot_comparison"]
