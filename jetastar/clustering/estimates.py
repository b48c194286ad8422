"""How long an algorithm takes on a jet: each algorithm's estimates, asked for by name.

Each algorithm declares its own cost model next to its code (the ``estimate`` and
``expected_cpu`` of its :class:`~.registry.AlgorithmInfo`); this module asks for them by name and
holds the rates they share.

:func:`estimate_seconds` is a *lower* estimate. greedy and the kt family run one compiled kernel
from start to end: they cannot stop at a time budget. A batch run with a time limit therefore does
not start them on a jet they clearly cannot finish in time: it records the jet as ``"skipped"``
with the estimate instead of blocking for minutes or hours. (Beam search and MCTS run in slices of
work and have a ``max_time`` of their own, so batch runs pass them the limit instead; their
estimates are kept for callers that want one.) The estimates count the split evaluations (or pair
distances) the kernel makes and divide by an optimistic rate (:data:`SPLITS_PER_S`,
:data:`DISTANCES_PER_S`), so they are lower bounds of the time on today's machines (measured 2026
on one core: beam and MCTS ~5·10⁶ split evaluations per second on Ginkgo jets, 10–100× below the
estimates; greedy 0.23 s at 2000 leaves, estimate 0.08 s; kt 0.014 s at 2000 and 0.08 s at 5000
leaves, ~2 n² pair distances at 6·10⁸ per second, estimates 0.002 s and 0.0125 s). A jet is
refused only when even this lower bound is over the limit.

:func:`expected_cpu_seconds` is the other kind of estimate: the *typical* CPU time of the exact MAP
engine and of the window search, fitted to measurements, with which the window search decides
whether proving the MAP directly is cheaper than searching, and batch runs size their chunks.

Example:
    >>> estimate_seconds("beam", 1000, {}) > 10
    True
    >>> estimate_seconds("greedy", 20, {}) < 0.01
    True
    >>> estimate_seconds("kt", 5000, {}) < 0.1
    True
    >>> expected_cpu_seconds("trellis", 14, {}) < expected_cpu_seconds("window-search", 14, {})
    True
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .registry import algorithm_info

__all__ = ["DISTANCES_PER_S", "SPLITS_PER_S", "estimate_seconds", "expected_cpu_seconds"]

#: split evaluations (likelihood of one candidate merge) per second: optimistic
SPLITS_PER_S = 1e8
#: pair distances of the kt family per second: optimistic
DISTANCES_PER_S = 2e9


def estimate_seconds(name: str, n_leaves: int, options: Mapping[str, Any]) -> float | None:
    """A lower estimate of the seconds algorithm ``name`` needs on a jet of ``n_leaves`` leaves
    (its :attr:`~.registry.AlgorithmInfo.estimate`).

    Args:
        name: registry name.
        n_leaves: size of the jet.
        options: the options it runs with.

    Returns:
        Seconds, or ``None`` for algorithms without an estimate (those with a time option stop
        at their budget themselves).
    """
    estimate = algorithm_info(name).estimate
    return None if estimate is None else estimate(int(n_leaves), options)


def expected_cpu_seconds(name: str, n_leaves: int, options: Mapping[str, Any]) -> float | None:
    """The typical CPU seconds (all threads) of algorithm ``name`` on a jet of ``n_leaves``
    leaves (its :attr:`~.registry.AlgorithmInfo.expected_cpu`: the exact MAP engine, the window
    search).

    Unlike :func:`estimate_seconds` this is no bound: it is fitted to measured times so that two
    methods can be compared.

    Args:
        name: registry name.
        n_leaves: size of the jet.
        options: the options it runs with (missing or ``None``: its defaults).

    Returns:
        Seconds, or ``None`` for algorithms without such an estimate.

    Example:
        >>> expected_cpu_seconds("trellis", 20, {}) > expected_cpu_seconds("window-search", 20, {})
        True
    """
    expected = algorithm_info(name).expected_cpu
    return None if expected is None else expected(int(n_leaves), options)
