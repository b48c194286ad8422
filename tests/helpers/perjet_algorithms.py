"""Per-jet twins of the algorithms of the columnar path ("perjet-greedy", "perjet-kt", ...):
the same functions registered under other names, so that a batch run sends them through the
per-jet path (``run_one``) while the originals go through the columnar kernel, and the two tables
can be compared row by row."""

from __future__ import annotations

from jetastar.clustering import greedy, kt, register

#: per-jet twin name -> the algorithm it repeats
TWINS = {"perjet-greedy": "greedy", "perjet-kt": "kt", "perjet-cambridge": "cambridge",
         "perjet-antikt": "antikt"}


@register("perjet-greedy", description="test: greedy through the per-jet path")
def _perjet_greedy(jet, likelihood: str = "symmetric"):
    return greedy(jet, likelihood=likelihood)


@register("perjet-kt", description="test: kt through the per-jet path")
def _perjet_kt(jet, likelihood: str = "symmetric", R: float = 1000.0):
    return kt(jet, algorithm="kt", likelihood=likelihood, R=R)


@register("perjet-cambridge", description="test: Cambridge through the per-jet path")
def _perjet_cambridge(jet, likelihood: str = "symmetric", R: float = 1000.0):
    return kt(jet, algorithm="cambridge", likelihood=likelihood, R=R)


@register("perjet-antikt", description="test: anti-kt through the per-jet path")
def _perjet_antikt(jet, likelihood: str = "symmetric", R: float = 1000.0):
    return kt(jet, algorithm="antikt", likelihood=likelihood, R=R)
