"""``jetastar fit``: the maximum-likelihood rates of a file's jets, with profile-likelihood
intervals (:func:`jetastar.inference.fit`); prints the estimate, writes the profile plot (PNG) and
the result as JSON."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .._atomic import atomic_write_text
from ..errors import InferenceError
from ..ginkgo.likelihood import LIKELIHOODS
from ..inference import ESTIMATORS, PARAMETERS, fit
from .shared import (
    UsageError,
    add_common,
    check_writable,
    echo,
    json_text,
    read_jets_or_particles,
    split_list,
)

__all__ = ["add_parser", "run"]


def _grid(items: list[str] | None, free: list[str]) -> dict[str, tuple[float, float]]:
    """``["lam=0.5:4"]`` -> ``{"lam": (0.5, 4.0)}``."""
    out = {}
    for item in items or ():
        name, sep, spec = item.partition("=")
        lo, colon, hi = spec.partition(":")
        try:
            if not (sep and colon):
                raise ValueError
            out[name.strip()] = (float(lo), float(hi))
        except ValueError:
            raise UsageError(f"--grid {item!r}: give NAME=LOW:HIGH, e.g. lam=0.5:4") from None
        if name.strip() not in free:
            raise UsageError(f"--grid {item!r}: {name.strip()!r} is not among --free "
                             f"({', '.join(free)})")
    return out


def _selection(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    lo, sep, hi = text.partition(":")
    try:
        if not sep:
            raise ValueError
        return int(lo), int(hi)
    except ValueError:
        raise UsageError(f"--selection {text!r}: give MIN:MAX leaves, e.g. 1:14") from None


def run(args: argparse.Namespace) -> int:
    """Fit, print, and write the plot and the JSON; returns the exit code."""
    free = split_list(args.free)
    unknown = [f for f in free if f not in PARAMETERS]
    if not free or unknown:
        raise UsageError(f"--free takes one or both of {', '.join(PARAMETERS)}, got {args.free!r}")
    grid = _grid(args.grid, free)
    selection = _selection(args.selection)
    prefix = Path(args.output) if args.output else Path(Path(args.file).name).with_suffix("")
    png, js = Path(f"{prefix}.fit.png"), Path(f"{prefix}.fit.json")
    for path in (png, js):
        check_writable(path)
    jets = read_jets_or_particles(args.file, tree=args.tree, particles=args.particles,
                                  t_cut=args.t_cut)
    try:
        result = fit(jets, free=free, likelihood=args.likelihood, estimator=args.estimator,
                     grid=grid or None, lam=args.lam, lam_root=args.lam_root,
                     selection=selection, max_leaves=args.max_leaves, device=args.device,
                     progress=False if args.no_progress else None)
    except InferenceError as exc:
        raise UsageError(str(exc)) from None
    echo(str(result))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(free), figsize=(5 * len(free), 3.6), squeeze=False)
    for ax, name in zip(axes[0], free, strict=True):
        result.plot(name, ax=ax)
    fig.tight_layout()
    tmp = png.with_name(png.name + ".tmp")
    fig.savefig(tmp, dpi=120, format="png")
    plt.close(fig)
    tmp.replace(png)
    data = result.to_dict()
    data["input"] = str(args.file)
    atomic_write_text(js, json_text(data) + "\n")
    echo(f"profile plot: {png}; result: {js}")
    return 0


def add_parser(sub: Any) -> None:
    """Add the ``fit`` command to the subparsers ``sub``."""
    p = sub.add_parser(
        "fit", help="fit the shower's rates (λ, λ_R) to a file's jets",
        description="The maximum-likelihood rates of the jets of FILE, summed exactly over every "
        "tree of each jet (the density of the observed jets by default), with 68 % and 95 % "
        "profile-likelihood intervals. Prints the estimate, writes PREFIX.fit.png (the "
        "profile) and PREFIX.fit.json. Jets of more than --max-leaves leaves are not summed "
        "over: select them away yourself and declare the selection (--selection), which the fit "
        "then includes.")
    p.add_argument("file", help="a jetastar jet file (.h5, .root, .pkl) or a file of particles")
    p.add_argument("--free", default="lam", help="rates to fit: lam, lam_root or lam,lam_root "
                   "(default lam)")
    p.add_argument("--grid", action="append", metavar="NAME=LOW:HIGH",
                   help="range of the first scan of a free rate (default 0.25:6)")
    p.add_argument("--lam", type=float, default=None,
                   help="λ when it is not free (default: each jet's own)")
    p.add_argument("--lam-root", type=float, default=None,
                   help="λ_R when it is not free (default: each jet's own)")
    p.add_argument("--likelihood", choices=LIKELIHOODS, default="density",
                   help="the form summed over trees (default density: the density of the jets)")
    p.add_argument("--estimator", choices=ESTIMATORS, default="marginal",
                   help="marginal (sum over trees, default), map (the MAP tree at each point) or "
                        "truth (the truth trees of generated jets)")
    p.add_argument("--selection", default=None, metavar="MIN:MAX",
                   help="the leaf-count window the sample was selected with")
    p.add_argument("--max-leaves", type=int, default=20,
                   help="largest jet summed over its trees (default 20)")
    p.add_argument("--device", choices=["cpu", "gpu", "auto"], default="cpu",
                   help="where the sums over trees run: cpu (default), gpu (the batched GPU "
                        "trellis, once per grid point) or auto (a GPU when one is usable)")
    p.add_argument("-o", "--output", default=None, metavar="PREFIX",
                   help="output prefix (default: the file's name without extension)")
    p.add_argument("--particles", default=None, help="particle collection of a particle file")
    p.add_argument("--tree", default=None, help="TTree of a ROOT particle file")
    p.add_argument("--t-cut", type=float, default=None,
                   help="t_cut (GeV²) given to jets read from particles (default 16)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)
    add_common(p)
