"""Lower estimates of how long an algorithm without a time option takes on a jet.

greedy, beam, MCTS and the kt family run one compiled kernel from start to end: they cannot stop
at a time budget, and a kernel does not see Ctrl-C. A batch run with a time limit therefore does
not start them on a jet they clearly cannot finish in time: it records the jet as ``"skipped"``
with the estimate instead of blocking for minutes or hours.

The estimates count the split evaluations (or pair distances) the kernel makes and divide by an
optimistic rate, so they are *lower* bounds of the time on today's machines (measured 2026 on one
core: beam and MCTS ~5·10⁶ split evaluations per second on Ginkgo jets, 10–100× below the
estimates; greedy 6.5 s, kt 1.2 s at 2000 leaves, estimates 0.4 s and 0.7 s). A jet is refused only
when even this lower bound is over the limit.

Example:
    >>> estimate_seconds("beam", 1000, {}) > 10
    True
    >>> estimate_seconds("greedy", 20, {}) < 0.01
    True
"""

from __future__ import annotations

from typing import Any

from .beam import CACHE_BUDGET_BYTES, default_beam_size

__all__ = ["estimate_seconds"]

#: split evaluations (likelihood of one candidate merge) per second: optimistic
_SPLITS_PER_S = 1e8
#: pair distances of the kt family per second: optimistic
_DISTANCES_PER_S = 2e9


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
    if name == "greedy":
        return 10 * n * n / _SPLITS_PER_S
    if name == "beam":
        return _beam_work(n, options) / _SPLITS_PER_S
    if name == "mcts":
        rollouts = max(1, int(options.get("n_rollouts", 20) or 1))
        return rollouts * n**3 / 5 / _SPLITS_PER_S
    if name in ("kt", "cambridge", "antikt"):
        return n**3 / 6 / _DISTANCES_PER_S
    return None
