"""Lower estimates of how long an algorithm without a time option takes on a jet.

greedy and the kt family run one compiled kernel from start to end: they cannot stop at a time
budget. A batch run with a time limit therefore does not start them on a jet they clearly cannot
finish in time: it records the jet as ``"skipped"`` with the estimate instead of blocking for
minutes or hours. (Beam search and MCTS run in slices of work and have a ``max_time`` of their
own, so batch runs pass them the limit instead; their estimates are kept for callers that want
one.)

The estimates count the split evaluations (or pair distances) the kernel makes and divide by an
optimistic rate, so they are *lower* bounds of the time on today's machines (measured 2026 on one
core: beam and MCTS ~5·10⁶ split evaluations per second on Ginkgo jets, 10–100× below the
estimates; greedy 0.23 s at 2000 leaves, estimate 0.08 s; kt 0.014 s at 2000 and 0.08 s at 5000
leaves, ~2 n² pair distances at 6·10⁸ per second, estimates 0.002 s and 0.0125 s). A jet is refused
only when even this lower bound is over the limit.

:func:`expected_cpu_seconds` is the other kind of estimate: the *typical* CPU time of the exact MAP
engine and of the window search, fitted to measurements, with which the window search decides whether
proving the MAP directly is cheaper than searching.

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

import math
from typing import Any

from ._subsets import n_splits_total
from .beam import CACHE_BUDGET_BYTES, default_beam_size
from .kt import NN_MIN_LEAVES

__all__ = [
    "DEFAULT_ROOT_SIZE", "ROOT_BELOW_LEAVES", "TOP_FROM_LEAVES", "estimate_seconds",
    "expected_cpu_seconds", "window_defaults", "window_effort",
]

#: The window search's size-dependent defaults (:func:`window_defaults`): from ``TOP_FROM_LEAVES``
#: leaves the top windows, a root window of one part more and (below ``ROOT_BELOW_LEAVES``) wider
#: windows and more random frontiers; from ``ROOT_BELOW_LEAVES`` leaves no root window.
TOP_FROM_LEAVES = 23
ROOT_BELOW_LEAVES = 30
#: parts of the root window below ``TOP_FROM_LEAVES`` leaves (16 until 2026-11-27: 15 found trees as
#: good on 511 of 512 tuning jet-forms of 20-22 leaves and on 256 of 256 of 18-19 leaves, at
#: 0.89-0.91 times the median CPU time), and from ``TOP_FROM_LEAVES`` to ``ROOT_BELOW_LEAVES``
DEFAULT_ROOT_SIZE = 15
_ROOT_SIZE_FROM_TOP = 17
#: sampled start trees below ``TOP_FROM_LEAVES`` leaves (``n_sampled=None``)
SAMPLED_BELOW_TOP = 2
#: the window search's CPU time with ``skip_duplicates`` relative to without (measured 2026 on 320
#: jets of 20-22 leaves: 0.86 of the median, with and without sampled starts)
_SKIP_DUPLICATES_FACTOR = 0.86


def window_defaults(n_leaves: int) -> dict[str, int]:
    """The window search's defaults of ``n_random``, ``widen``, ``root_size``, ``n_sampled`` and
    ``skip_duplicates`` (0 or 1) for a jet of ``n_leaves`` leaves (what its ``None`` options
    become).

    Below 23 leaves: 4 random frontiers, no widening, a 15-part root window, two sampled start
    trees and duplicate starts skipped after the first stage (on 320 tuning jets of 20-22 leaves:
    the exact MAP of 313 instead of 307, at 8 % more median CPU time; a 16-part root window found
    a better tree on 1 of 512 jet-forms, for 10 % more). From 23 to 29 leaves, where
    a search costs 0.5-1 s anyway and the former defaults reached the MAP of 83-93 % of 24-leaf
    jets: 8 random frontiers and a last search with windows 3 parts wider (97 % of 42 tuning jets
    of 24 leaves, 2-4 CPU-s), a 17-part root window, no sampled starts, every start searched
    through. From 30 leaves: 4, 0, none, none, no (the wider search and the root window found
    nothing there for more CPU time).

    Example:
        >>> window_defaults(20)
        {'n_random': 4, 'widen': 0, 'root_size': 15, 'n_sampled': 2, 'skip_duplicates': 1}
        >>> window_defaults(24)["widen"], window_defaults(50)["root_size"]
        (3, 0)
    """
    n = int(n_leaves)
    mid = TOP_FROM_LEAVES <= n < ROOT_BELOW_LEAVES
    small = n < TOP_FROM_LEAVES
    return {
        "n_random": 8 if mid else 4,
        "widen": 3 if mid else 0,
        "root_size": (0 if n >= ROOT_BELOW_LEAVES else
                      _ROOT_SIZE_FROM_TOP if n >= TOP_FROM_LEAVES else DEFAULT_ROOT_SIZE),
        "n_sampled": SAMPLED_BELOW_TOP if small else 0,
        "skip_duplicates": int(small),
    }

#: split evaluations (likelihood of one candidate merge) per second: optimistic
_SPLITS_PER_S = 1e8
#: pair distances of the kt family per second: optimistic
_DISTANCES_PER_S = 2e9
#: typical CPU seconds per split of the exact MAP engine (all threads; enumeration and bounds):
#: measured 2026 on W and QCD jets of 14-20 leaves, 2.3-3.0 ns (10 ms at 14, 64 ms at 16, 0.16 s at
#: 17, 0.35-0.5 s at 18, 3.4 s at 20 leaves), plus a fixed cost per call
_MAP_CPU_PER_SPLIT = 2.5e-9
#: the largest jet whose split count (~3**n / 2) a float holds
_FLOAT_SPLITS_MAX = 600
_MAP_CPU_FIXED = 2e-4
#: typical CPU seconds of the window search per leaf with its defaults: measured 2026, 0.13-0.16 s at
#: 16-17 leaves, 0.15-0.27 s at 18, 0.25-0.45 s at 20 (the start trees and the searches from them)
_WINDOW_CPU_PER_LEAF = 0.01


def _beam_work(n: int, options: dict[str, Any]) -> float:
    size = options.get("beam_size")
    width = default_beam_size(n) if size is None else int(size)
    pairs = n * (n - 1) / 2
    if 2 * width * pairs * 8 <= CACHE_BUDGET_BYTES:  # pair cache: each level re-scores one row
        return width * n * n / 10
    # every level scores every pair of every state: width n³/6 evaluations, most of them cheap
    # rejections (measured 5·10⁹ per second on jets whose trees are all impossible), so counted
    # at 1/100 of a full evaluation
    return width * n**3 / 600


def _kt_distances(n: int) -> float:
    """A lower bound of the pair distances :func:`~.kt.kt_history` computes on ``n`` leaves: every
    pair at every step below :data:`~.kt.NN_MIN_LEAVES` leaves, ``(n³ - n) / 6``; from there on
    nearest neighbours, ``n²`` (``n (n - 1) / 2`` for the first neighbours, then the new particle
    against the others at each step; measured 1.6–2.2 n² in all)."""
    if n < NN_MIN_LEAVES:
        return (n**3 - n) / 6
    return float(n * n)


def estimate_seconds(name: str, n_leaves: int, options: dict[str, Any]) -> float | None:
    """A lower estimate of the seconds ``name`` needs on a jet of ``n_leaves`` leaves.

    Args:
        name: registry name.
        n_leaves: size of the jet.
        options: the options it runs with.

    Returns:
        Seconds, or ``None`` for algorithms without an estimate (those with a time option stop
        at their budget themselves).
    """
    n = int(n_leaves)
    if name == "greedy":  # at most ~n² evaluations (each pair once), fewer with the bounds
        return 2 * n * n / _SPLITS_PER_S
    if name == "beam":
        return _beam_work(n, options) / _SPLITS_PER_S
    if name == "mcts":
        rollouts = max(1, int(options.get("n_rollouts", 20) or 1))
        return rollouts * n**3 / 5 / _SPLITS_PER_S
    if name in ("kt", "cambridge", "antikt"):
        return _kt_distances(n) / _DISTANCES_PER_S
    return None


def expected_cpu_seconds(name: str, n_leaves: int, options: dict[str, Any]) -> float | None:
    """The typical CPU seconds (all threads) of the exact MAP engine or the window search.

    Unlike :func:`estimate_seconds` this is no bound: it is fitted to measured times (see the
    constants of this module) so that two methods can be compared. The window search uses it to
    prove the MAP with :func:`~jetastar.clustering.exact_map` where that is expected to cost less
    than searching.

    Args:
        name: ``"trellis"`` (the exact MAP engine) or ``"window-search"``.
        n_leaves: size of the jet.
        options: the window search's options (``window_size``, ``n_random``, ``widen``,
            ``n_starts``, ``n_sampled``: more effort, more time; ``skip_duplicates``: less;
            ``root_size``: its root window; missing or ``None``: the window search's default for
            this size, :func:`window_defaults`); ignored for ``"trellis"``.

    Returns:
        Seconds, or ``None`` for other algorithms.

    Example:
        >>> expected_cpu_seconds("trellis", 20, {}) > expected_cpu_seconds("window-search", 20, {})
        True
    """
    n = int(n_leaves)
    if name == "trellis":
        if n > _FLOAT_SPLITS_MAX:  # (3**n overflows a float: an exact MAP is out of reach anyway)
            return math.inf
        return _MAP_CPU_FIXED + _MAP_CPU_PER_SPLIT * max(n_splits_total(n), 0)
    if name == "window-search":
        window = int(options.get("window_size") or 13)
        root = window_defaults(n)["root_size"]
        root = root if options.get("root_size") is None else int(options["root_size"])
        # the root window after the search (``root_size``): enumerated like an exact MAP of that
        # many leaves (measured 50-80 ms at 16, 0.15-0.2 s at 17)
        root_s = _MAP_CPU_PER_SPLIT * 3.0 ** min(root, n) / 2.0 if window < root < n else 0.0
        return _WINDOW_CPU_PER_LEAF * n * window_effort(n, options) + root_s
    return None


def window_effort(n_leaves: int, options: dict[str, Any]) -> float:
    """The window search's local-search effort relative to its former defaults at 20 leaves
    (``window_size=13``, six starts, ``n_random=4``, no widening, no sampled starts, every start
    searched through): the factor :func:`expected_cpu_seconds` puts on its per-leaf time, before
    the root window.

    Args:
        n_leaves: size of the jet.
        options: as for :func:`expected_cpu_seconds` (``None`` or missing: the default).

    Example:
        >>> window_effort(20, {"n_sampled": 0, "skip_duplicates": False})
        1.0
        >>> window_effort(20, {"n_sampled": 6, "skip_duplicates": False})
        2.0
    """
    n = int(n_leaves)
    window = int(options.get("window_size") or 13)
    default = window_defaults(n)
    n_random, widen, sampled, skip = (
        default[k] if options.get(k) is None else int(options[k])
        for k in ("n_random", "widen", "n_sampled", "skip_duplicates")
    )
    starts = int(options.get("n_starts") or 6) + sampled
    # a window of K parts costs about 3**K / 2 split bounds; the frontiers per cluster are
    # 2 + n_random; widen searches the best optima once more with larger windows; each start
    # tree is searched (six by default), duplicates only through the first stage with skip
    return (max(2.0 ** (window - 13), 0.25) * (2 + n_random) / 6.0 * (1.0 + 0.5 * widen)
            * starts / 6.0 * (_SKIP_DUPLICATES_FACTOR if skip else 1.0))
