"""``jetastar demo`` (also ``jetastar`` without a command): leaf counts and truth-tree
log-likelihoods of a few Ginkgo jets."""

from __future__ import annotations

import argparse
from typing import Any

from ..ginkgo import ShowerParams, generate, log_likelihood
from .shared import UsageError, add_common, echo, seed_value

__all__ = ["add_parser", "run"]


def run(args: argparse.Namespace) -> int:
    """Print the table; returns the exit code."""
    if args.n < 0:
        raise UsageError(f"--n must be >= 0, got {args.n}")
    echo(f"jetastar demo: {args.n} QCD + {args.n} W Ginkgo jets, seed {args.seed}")
    echo(f"{'type':<5} {'jet':>4} {'leaves':>6} {'logL symmetric':>15} {'logL legacy':>12}")
    for params in (ShowerParams.qcd(), ShowerParams.w()):
        for jet in generate(args.n, params, seed=args.seed):
            echo(f"{jet.jet_type:<5} {jet.jet_id:>4} {jet.n_leaves:>6} "
                 f"{log_likelihood(jet):>15.6f} {log_likelihood(jet, likelihood='legacy'):>12.6f}")
    echo("(truth-tree log-likelihoods with summed leaf momenta; `jetastar --help` for more)")
    return 0


def add_parser(sub: Any) -> None:
    """Add the ``demo`` command to the subparsers ``sub``."""
    p = sub.add_parser("demo", help="print leaf counts and truth log-likelihoods of 20 QCD + 20 W "
                       "jets", description="Generate N QCD and N W jets with a fixed seed and "
                       "print, per jet, the number of leaves and the truth-tree log-likelihood in "
                       "both forms (symmetric, legacy).")
    p.add_argument("--n", type=int, default=20, help="jets of each type (default 20)")
    p.add_argument("--seed", type=seed_value, default=1, help="seed (default 1)")
    p.set_defaults(func=run)
    add_common(p)
