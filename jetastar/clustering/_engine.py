"""What the exact engines share: option and budget checks, memory limits and their errors, progress
bars, the thread context and the tree read from arg-max splits.

The exact MAP engine (:mod:`jetastar.clustering.exact_map`), the trellis
(:mod:`jetastar.clustering.trellis`), A* (:mod:`jetastar.clustering.astar`), beam search and the
window search use these helpers so that a budget, a memory limit or a bar behaves (and reads) the
same in every one of them.

Example:
    >>> format_bytes(3 * 2**30)
    '3.0 GiB'
    >>> check_budget(2, "max_time")
    2.0
    >>> tree_from_best(np.array([0, 0, 0, 1]), 0b11, label=7).to_nested()
    (0, 1)
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterator
from typing import Any

import numba as nb
import numpy as np

from .._progress import PER_JET_DELAY, ProgressBar, progress_bar
from ..errors import TooLargeError
from ..ginkgo.likelihood import BOUNDED_LIKELIHOODS, check_likelihood
from ..tree import Tree
from ._subsets import leaves_of
from .threads import Threads

__all__ = [
    "bounded_likelihood",
    "check_budget",
    "check_memory",
    "check_size",
    "default_memory_limit",
    "estimate_trellis_memory",
    "format_bytes",
    "search_progress",
    "solving",
    "split_progress",
    "tree_from_best",
    "valid_likelihood",
]


# ---------------------------------------------------------------------- options and budgets
def valid_likelihood(likelihood: str | None) -> str:
    """The likelihood form to use: ``"symmetric"`` for ``None``, else ``likelihood`` checked.

    Raises:
        ValueError: for an unknown likelihood name (listing the valid ones).
    """
    if likelihood is None:
        return "symmetric"
    check_likelihood(likelihood)
    return likelihood


def bounded_likelihood(likelihood: str | None, who: str) -> str:
    """:func:`valid_likelihood` for a method that prunes with upper bounds on ψ (the exact MAP
    engine, A*, the window search): the forms with proven bounds only.

    Raises:
        ValueError: an unknown form, or ``"density"``, naming what computes it instead.

    Example:
        >>> bounded_likelihood(None, "exact_map")
        'symmetric'
    """
    likelihood = valid_likelihood(likelihood)
    if likelihood not in BOUNDED_LIKELIHOODS:
        raise ValueError(
            f"{who} prunes with upper bounds on the split likelihood, which are proven for the "
            f"{' and '.join(map(repr, BOUNDED_LIKELIHOODS))} forms only (the {likelihood!r} form's "
            "Jacobian is unbounded): for its MAP tree and log Z use exact_trellis or Trellis "
            "(the full trellis, ~20 leaves; the registry's 'trellis' does so by itself), or greedy "
            "and beam search for larger jets")
    return likelihood


def check_budget(value: Any, name: str, integer: bool = False) -> Any:
    """A positive budget or option (``None``: no limit), as float, or int with ``integer=True``.

    Raises:
        ValueError: not a number, not an integer when one is needed, not finite or not positive.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{name} must be a positive number or None, got {value!r}")
    if integer and float(value) != int(value):
        raise ValueError(f"{name} must be a positive integer or None, got {value!r}")
    if not (math.isfinite(float(value)) and value > 0):
        raise ValueError(f"{name} must be > 0 (or None for no limit), got {value!r}")
    return int(value) if integer else float(value)


# ---------------------------------------------------------------------- memory
#: bytes per cluster of the cost-model features ((P, N, W, size) float64)
_FEATURE_BYTES = 32


def estimate_trellis_memory(
    n_leaves: int, marginals: bool = False, threads: int | None = None, *, cost_model: bool = False
) -> int:
    """Bytes the trellis of an ``n_leaves`` jet allocates (peak, without Python overhead).

    Per mask: a 32-byte record (``t``, MAP, ``log Z``, tree count), the arg-max part (int32), the
    by-size order (int32) and a transient int8 size table: 41 bytes; a cost model adds its 32-byte
    features. Marginals add one float64 per mask plus one float64 accumulator per mask and thread.

    Args:
        n_leaves: number of leaves (points of a cost model).
        marginals: include the marginal pass.
        threads: threads for the marginal pass (default: numba's current setting).
        cost_model: the trellis of a cost model (per-cluster features).

    Returns:
        The estimate in bytes.

    Example:
        >>> estimate_trellis_memory(20) // 2**20
        41
    """
    m = 1 << n_leaves
    total = m * (8 + 8 + 8 + 4 + 8 + 4 + 1) + 4096 * 64
    if cost_model:
        total += m * _FEATURE_BYTES
    if marginals:
        rows = nb.get_num_threads() if threads is None else threads
        total += m * 8 * (1 + rows)
    return int(total)


def default_memory_limit() -> int:
    """Half of the available memory (``MemAvailable`` in /proc/meminfo, else physical memory)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024 // 2
    except OSError:
        pass
    try:
        return int(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")) // 2
    except (ValueError, OSError, AttributeError):
        return 4 * 2**30


def format_bytes(x: float) -> str:
    """A byte count for messages (``"41.0 MiB"``); sizes beyond float range as a power of ten."""
    if isinstance(x, int) and x.bit_length() > 1000:  # beyond float range: 2^k bytes
        return f"about 10^{int(x.bit_length() * 0.30103)} B"
    x = float(x)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(x) < 1024 or unit == "TiB":
            if unit == "B":
                return f"{int(x)} B"
            return f"{x:.1f} {unit}" if abs(x) < 1e6 else f"{x:.3g} {unit}"
        x /= 1024
    return f"{x:.3g} TiB"  # pragma: no cover


def check_size(n: int, limit: int, who: str, unit: str, what: str, detail: str, advice: str) -> None:
    """Refuse a problem above an engine's hard size limit (its layout), before allocating.

    Raises:
        TooLargeError: ``"{who}: {n} {unit} is above the {what} limit of {limit} {unit}
            ({detail}); {advice}"``.
    """
    if n > limit:
        raise TooLargeError(
            f"{who}: {n} {unit} is above the {what} limit of {limit} {unit} ({detail}); {advice}"
        )


def check_memory(
    need: int, max_memory: int | None, who: str, what: str, advice: str, *,
    detail: str = "", option: str | None = "max_memory",
) -> int:
    """Refuse a problem whose tables need more than the memory limit, before allocating.

    Args:
        need: the estimate in bytes.
        max_memory: the limit in bytes (``None``: :func:`default_memory_limit`).
        who: start of the message (``"jet 3"``).
        what: what needs the memory (``"the exact trellis of 20 leaves"``).
        advice: what to do instead (``"use astar or astar_approx"``).
        detail: said after the estimate (``" of dense tables"``).
        option: the option that sets the limit, named in the message (``None``: none).

    Returns:
        ``need``.

    Raises:
        TooLargeError: ``"{who}: {what} needs about {need}{detail}, above the memory limit of
            {limit} (max_memory={limit}); {advice}"``.
    """
    limit = default_memory_limit() if max_memory is None else int(max_memory)
    if need > limit:
        which = "" if option is None else f" ({option}={limit})"
        raise TooLargeError(
            f"{who}: {what} needs about {format_bytes(need)}{detail}, above the memory limit of "
            f"{format_bytes(limit)}{which}; {advice}"
        )
    return need


# ---------------------------------------------------------------------- progress and threads
def split_progress(show: bool, total: int, who: str, what: str = "trellis",
                   delay: float = 0.0) -> ProgressBar:
    """A bar over split counts (``show=False``: a bar that shows nothing), appearing after
    ``delay`` seconds."""
    return progress_bar(total=total, unit="split", unit_scale=True, desc=f"{what} {who}", show=show,
                        delay=delay)


@contextlib.contextmanager
def solving(
    threads: int | None, show: bool, total: int, who: str, what: str, delay: float = 0.0
) -> Iterator[ProgressBar]:
    """The pass of an exact engine over all splits: ``threads`` numba threads and a bar over the
    ``total`` splits (appearing after ``delay`` seconds), both restored / closed on exit."""
    with Threads(threads), split_progress(show, total, who, what, delay) as bar:
        yield bar


def search_progress(
    show: bool | None, desc: str, unit: str, total: int | None = None
) -> ProgressBar | None:
    """The bar of a search: ``True`` at once, ``None`` after :data:`PER_JET_DELAY` seconds (so that
    loops over jets stay quiet), ``False`` (or switched off) none.
    """
    if show is False:
        return None
    bar = progress_bar(total=total, desc=desc, unit=unit, delay=0.0 if show else PER_JET_DELAY)
    return bar if bar.shown else None


# ---------------------------------------------------------------------- trees
def tree_from_best(best: np.ndarray, root_mask: int, label: object) -> Tree:
    """The hierarchy over ``root_mask`` read top-down through arg-max parts ``best[mask]`` (the
    part holding the lowest leaf; the other part is the rest). Leaves are relabelled ``0 .. k-1``
    in increasing order."""
    members = leaves_of(root_mask)
    k = len(members)
    pos = {leaf: j for j, leaf in enumerate(members)}
    children = np.full((2 * k - 1, 2), -1, dtype=np.int64)
    next_node = k
    stack = [(root_mask, -1, 0)]
    while stack:
        mask, parent, side = stack.pop()
        if mask & (mask - 1) == 0:
            node = pos[leaves_of(mask)[0]]
        else:
            node = next_node
            next_node += 1
            a = int(best[mask])
            stack.append((mask ^ a, node, 1))
            stack.append((a, node, 0))
        if parent >= 0:
            children[parent, side] = node
    leaf_of_node = np.full(2 * k - 1, -1, dtype=np.int64)
    leaf_of_node[:k] = np.arange(k)
    return Tree(children, leaf_of_node, jet=label)
