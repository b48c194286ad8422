"""Exact-window search: improve a tree by solving windows of it exactly with the exact MAP engine.

Every split's likelihood depends only on its parent and its two children, so a *window* of a tree — a
cluster ``C`` and a frontier ``F`` of disjoint sub-clusters of ``C`` that cover it (its *parts*) — can
be re-optimised exactly: the parts are treated as the leaves of a small problem (their 4-momenta are
the sums of their leaves; the sub-trees below them stay as they are), the exact MAP engine
(:func:`jetastar.clustering.exact._map_kernels.solve_parts`) finds the best hierarchy over them, and it
replaces the window's interior when it is strictly better. λ_R applies only when ``C`` is the whole
jet. In the symmetric form a part's ``t`` is its squared mass whether it is a leaf or not (a composite
part of a finite tree has ``t > t_cut``, so it continues, as it does in the tree); in the legacy form a
single leaf has ``t = 0`` and a composite part its squared mass, which the parts' ``t`` carry.

A *local search* sweeps windows over a tree from the top down until a sweep improves nothing:

* a cluster of at most ``K`` leaves whose parent is larger (or the root) is solved whole (its leaves
  are the parts): that sub-tree is then exactly optimal;
* every larger cluster gets frontiers of ``K`` parts grown from its two children: expand the part
  with the most leaves; expand the heaviest part; and ``n_random`` times a random part (seeded by
  the seed and the cluster, so the same sub-tree gets the same frontiers).

``K`` is 11 first, then ``window_size`` (each stage until nothing improves). A window is
skipped when the same parts were solved before and the tree still holds their best hierarchy (a
window's value depends only on its parts' leaf sets, so this holds across starts too).

Local optima of this search are far apart: the MAP of a 20-leaf jet often differs from a window-optimal
tree in half of its clusters, at a gap of a few tenths of a nat. What finds it is starting from trees
of different basins: the best beam-search tree, the greedy tree, the kt, Cambridge/Aachen and anti-kt
trees, and the greedy tree of the other likelihood form (``n_starts`` of them, best first), and below
23 leaves two trees drawn at random (``n_sampled``); there, every start is searched through the
11-part stage first and the last stage runs once per distinct tree (``skip_duplicates``). The best
local optimum is then recombined with the others (windows whose parts are the largest clusters both
trees share, which can build either tree's structure between them) and searched once more with fresh
random frontiers. From 23 leaves on, the root window over the clusters the best optimum shares with
each other one is then solved with up to ``top_size`` (18) parts: the optima mostly differ near the
root. Last, below 30 leaves, the root window over the ``root_size`` largest clusters below the
root (15 parts; 17 from 23 leaves) is solved: trees that every start agrees on can still differ
from the MAP at the top, down to clusters of a few leaves, which 13-part windows do not reach. From
20 to 29 leaves the defaults spend more (``n_random=8``, and ``widen=3``: the best optima searched
once more with 16-part windows). The result is never worse than the start trees.

A tree that survived its last sweep is *window optimal*: no window that sweep tried improves it.
Where :func:`exact_map` is expected to cost less CPU time than the search
(:func:`jetastar.clustering.estimates.expected_cpu_seconds`: up to 17 leaves with the defaults) the
MAP is proven with it instead (``exact=True``, ``stats["path"] == "exact_map"``). A jet of at most
``window_size`` leaves is otherwise one window, the whole jet, solved exactly (``exact=True``);
``prove=True`` runs :func:`exact_map` with the tree as incumbent when the jet fits, and says
``exact=True`` only when that finishes.

Measured (``tests/benchmarks/bench_window_search.py``, symmetric form, CPU time of one core): on
default W jets and QCD jets with t_cut = 1 GeV², 15 of each per size, it reaches the exact MAP of 119 of
120 jets of 16–22 leaves (98 % over three more seeds) at a median of 0.11–0.28 CPU-s per jet, and of
28 of 30 jets of 24 leaves with the former defaults (about 0.6 s; ``widen=3, n_random=8``, the
defaults from 23 to 29 leaves now: 97 % at 2–4 s). On fresh jets
(``tests/benchmarks/bench_window_fresh.py``, seeds nobody tuned on, both forms) 307 of 320 jets of
20–22 leaves on five such sets with the former defaults (96 %), and 127 of 128 on a ninth and a tenth
with today's (median 0.22 and 0.27 CPU-s). At 30, 50 and 100 leaves it is never below approximate A*
and above it by 0.4–1.2, 3–6 and 42–52 nats on average, in less CPU time.

Example:
    >>> from jetastar.ginkgo import ShowerParams, generate
    >>> from jetastar.clustering import beam_search, window_search
    >>> jet = generate(1, ShowerParams.qcd(t_cut=1.0), seed=1, min_leaves=20, max_leaves=20)[0]
    >>> res = window_search(jet, seed=0)
    >>> res.log_likelihood >= beam_search(jet).log_likelihood
    True
    >>> res.stats["window_optimal"], res.stats["window_size"]
    (True, 13)
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..._cuda import DEVICES, check_device
from ..._jit import Stopwatch
from ..._progress import ProgressBar
from ...errors import InvalidJetError, OptionError, TooLargeError
from ...ginkgo.likelihood import BOUNDED_LIKELIHOODS, log_likelihood
from ...jet import Jet
from ...tree import Tree
from .._engine import bounded_likelihood, check_budget, search_progress
from .._merges import canonical_results, jet_arrays
from ..agglomerative.greedy import greedy
from ..agglomerative.kt import kt
from ..chunks import DONE, PER_JET, Chunk, ChunkPath, ChunkResults, done_column
from ..options import anything, choice, flag, integer, likelihood_option, number
from ..registry import AlgorithmInfo, WarmUp, register
from ..result import ClusteringResult
from ..search.beam import beam_search, default_beam_size
from . import _map_kernels as _mk
from . import _window_kernels as _wk
from ._map_kernels import EXACT_CHUNK_MAX
from .astar import astar_approx
from .exact_map import MAP_CPU_PER_SPLIT, exact_map, expected_map_cpu_seconds, map_chunk_rows, root_slack

__all__ = ["DEFAULT_ROOT_SIZE", "DEFAULT_WINDOW_SIZE", "MAX_WINDOW_SIZE", "ROOT_BELOW_LEAVES",
           "START_TREES", "TOP_FROM_LEAVES", "WINDOW_SEARCH", "window_defaults", "window_effort",
           "window_options", "window_proves_first", "window_search"]

#: Default number of parts per window: a 13-part window takes about 2 ms (14: 5 ms, 16: 45 ms).
DEFAULT_WINDOW_SIZE = 13
#: Largest window: ``2**k`` clusters of 54 bytes of scratch each (57 MB at 20; about 2 s a window).
MAX_WINDOW_SIZE = 20
#: Window sizes of the stages before the last (each stage sweeps until nothing improves).
STAGES = (11,)
#: The first start tree (option ``start``).
START_TREES = ("beam", "greedy", "astar-approx")
#: Beam width from which the greedy tree is no start of its own (beam search's default above 40
#: leaves): such a beam (greedy-guarded) holds the greedy tree's basin, and the search from the
#: greedy tree cost about as much as the wide beam itself
GREEDY_IN_BEAM = 1000
#: Temperature of the sampled start trees (``n_sampled``): each merge is drawn with probability
#: ∝ exp(ψ / T). At T = 2 the draws reached the MAP on 5 of the 6 tuning jets (report2-4) that the
#: deterministic starts missed, against 3 of 6 at T = 1 (10 draws: 5 of 6)
SAMPLE_TEMPERATURE = 2.0
#: Local optima (best first, distinct) that a ``widen`` search polishes.
WIDEN_TOP = 3
#: most parts of a recombination window at the top of the tree (``top_size=None``) for jets of at
#: least ``TOP_FROM_LEAVES`` leaves; below, the top windows found nothing the search misses
#: (175 vs 176 of 180 jets of 20–22 leaves) and cost a quarter more
DEFAULT_TOP_SIZE = 18
# ``root_size=None``: the root window solved after the search, ``DEFAULT_ROOT_SIZE`` parts (17 from
# ``TOP_FROM_LEAVES`` leaves on, none from ``ROOT_BELOW_LEAVES`` on): the frontier of the largest
# clusters below the root, which holds the top of the tree, where window-optimal trees that every
# start agrees on can still differ from the MAP (a 15-part window costs about 20 ms of one core, a
# 16-part one about 50 ms, a 17-part one about 150 ms). At 30-100 leaves it found nothing (18 jets)
# for 3-20 % more CPU time. These and ``n_random=None``, ``widen=None`` are resolved by
# :func:`window_defaults`.
_MARGIN = _mk.MARGIN
_NEG_INF = -math.inf

#: The window search's size-dependent defaults (:func:`window_defaults`): from ``TOP_FROM_LEAVES``
#: leaves the top windows, a root window of one part more and (below ``ROOT_BELOW_LEAVES``) wider
#: windows and more random frontiers; from ``ROOT_BELOW_LEAVES`` leaves no root window.
TOP_FROM_LEAVES = 23
ROOT_BELOW_LEAVES = 30
#: from this many leaves (below ``ROOT_BELOW_LEAVES``) 8 random frontiers and a last search with
#: windows 3 parts wider (``n_random``, ``widen``; 23 until 2026-12-07: the former 4 and 0 reached
#: the MAP of 60 of 64 fresh W jets of 20 leaves, and of 68 of 72 tuning W jets of 20-22 leaves,
#: where these reached 72 of 72)
WIDER_FROM_LEAVES = 20
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

    Below 23 leaves: a 15-part root window, two sampled start trees and duplicate starts skipped
    after the first stage (on 320 tuning jets of 20-22 leaves: the exact MAP of 313 instead of
    307, at 8 % more median CPU time; a 16-part root window found a better tree on 1 of 512
    jet-forms, for 10 % more); below 20 leaves 4 random frontiers and no widening, from 20 the 8
    and 3 of larger jets (on 72 tuning W jets of 20-22 leaves: the exact MAP of 72 instead of 68,
    at 2.9 instead of 0.5 median CPU-s on a loaded machine). From 23 to 29 leaves, where
    a search costs 0.5-1 s anyway and the former defaults reached the MAP of 83-93 % of 24-leaf
    jets: 8 random frontiers and a last search with windows 3 parts wider (97 % of 42 tuning jets
    of 24 leaves, 2-4 CPU-s), a 17-part root window, no sampled starts, every start searched
    through. From 30 leaves: 4, 0, none, none, no (the wider search and the root window found
    nothing there for more CPU time).

    Example:
        >>> window_defaults(19)
        {'n_random': 4, 'widen': 0, 'root_size': 15, 'n_sampled': 2, 'skip_duplicates': 1}
        >>> window_defaults(20)
        {'n_random': 8, 'widen': 3, 'root_size': 15, 'n_sampled': 2, 'skip_duplicates': 1}
        >>> window_defaults(24)["widen"], window_defaults(50)["root_size"]
        (3, 0)
    """
    n = int(n_leaves)
    wider = WIDER_FROM_LEAVES <= n < ROOT_BELOW_LEAVES
    small = n < TOP_FROM_LEAVES
    return {
        "n_random": 8 if wider else 4,
        "widen": 3 if wider else 0,
        "root_size": (0 if n >= ROOT_BELOW_LEAVES else
                      _ROOT_SIZE_FROM_TOP if n >= TOP_FROM_LEAVES else DEFAULT_ROOT_SIZE),
        "n_sampled": SAMPLED_BELOW_TOP if small else 0,
        "skip_duplicates": int(small),
    }

#: typical CPU seconds of the window search per leaf with its defaults: measured 2026, 0.13-0.16 s at
#: 16-17 leaves, 0.15-0.27 s at 18, 0.25-0.45 s at 20 (the start trees and the searches from them)
_WINDOW_CPU_PER_LEAF = 0.01


def window_search(
    jet: Jet,
    likelihood: str | None = None,
    *,
    window_size: int = DEFAULT_WINDOW_SIZE,
    n_random: int | None = None,
    n_starts: int = 6,
    n_sampled: int | None = None,
    skip_duplicates: bool | None = None,
    widen: int | None = None,
    widen_unsure: int = 0,
    top_size: int | None = None,
    root_size: int | None = None,
    start: str = "beam",
    beam_size: int | None = None,
    trees: Sequence[Tree] | None = None,
    seed: int = 0,
    max_time: float | None = None,
    max_sweeps: int | None = None,
    prove: bool = False,
    exact_first: bool | None = None,
    progress: bool | None = None,
    device: str = "auto",
) -> ClusteringResult:
    """Approximate MAP hierarchy by exact-window search (see the module docstring).

    Args:
        jet: a :class:`jetastar.Jet`.
        likelihood: ``"symmetric"`` (default) or ``"legacy"``.
        window_size: parts per window ``K`` (2 .. 20; default 13). A window costs about ``3**K / 2``
            split bounds: 13 parts take about 2 ms of one core, 14 about 5 ms, 16 about 45 ms.
        n_random: random frontiers per cluster and sweep (``None``, the default: 8 for jets of
            23-29 leaves, else 4; :func:`window_defaults`).
        n_starts: start trees searched (default 6: the first start, greedy, kt, Cambridge/Aachen,
            anti-kt and the other form's greedy tree, best first; more: further beam trees).
        n_sampled: start trees drawn at random, searched besides those (``None``, the default:
            2 below 23 leaves, else 0; :func:`window_defaults`):
            each merge drawn with probability ∝ ``exp(ψ / 2)`` among the current clusters
            (``SAMPLE_TEMPERATURE``), seeded by ``seed``. They reach basins that the
            deterministic starts miss, and cost a local search each: with 2 of them, 314 instead
            of 307 of 320 tuning jets of 20-22 leaves reached the MAP, at 1.26 times the median
            CPU time (``docs/window_search.md``).
        skip_duplicates: search each start through the first stage (11-part windows) first, and
            the last stage only from the distinct trees that reaches, in start order (``None``,
            the default: below 23 leaves; else each start is searched through in turn). Starts often
            end the first stage in the same tree; 0.86 times the CPU time (with ``n_sampled=2``:
            313 instead of 314 of the 320 tuning jets).
        widen: after the search, search the three best distinct local optima once more with
            ``window_size + widen`` parts per window (``None``, the default: 3 for jets of 23-29
            leaves, else 0 = no). With ``widen=3`` and ``n_random=8`` the search finds the exact
            MAP of 97 % of 24-leaf jets instead of 89 %, at about four times the CPU time
            (2–4 s).
        widen_unsure: like ``widen``, but only on jets where no other start's local optimum
            reached the value of the best tree (the search is then less sure of it); ignored
            when ``widen`` is set (default 0: no).
        top_size: most parts of a root window over shared clusters (``None``, the default: 18
            for jets of 23 leaves or more, else 0 = none). After the recombination, the root
            window whose parts are the largest clusters the best tree shares with all the other
            local optima, and with each of them, is solved whenever it has more than
            ``window_size`` parts and at most ``top_size``; the local optima mostly differ at the
            top of the tree, and these windows join them there (24 leaves: exact MAP of 89 %
            instead of 77 % of jets). An 18-part window costs about 0.1–0.5 s of one core.
        root_size: parts of the root window solved once the search has settled (``None``, the
            default: 15 parts, 17 for jets of 23-29 leaves, none from 30 leaves on; 0 = none):
            the frontier grown from the root by always expanding the part with the most leaves,
            so the window holds the top of the tree down to clusters of a few leaves. After an
            improvement the tree is searched locally and the window solved again. A 15-part
            window costs about 20 ms of one core, a 16-part one about 50 ms, a 17-part one about
            150 ms.
        start: the first start tree: ``"beam"`` (default: the tree of :func:`beam_search` with its
            default settings, so the result is never below plain beam search),
            ``"greedy"`` (no beam search) or ``"astar-approx"`` (the tree of
            :func:`astar_approx`, within ``max_time``).
        beam_size: beam size of the seeding beam search (``None``: beam search's default).
        trees: extra start trees (each searched too, besides the ``n_starts`` others).
        seed: random seed of the random frontiers (same seed, same tree).
        max_time: run-time budget in seconds (``None``: search until done). The start trees are
            always built and the first window always solved; compiling kernels does not count.
        max_sweeps: most sweeps per local search (``None``: until a sweep improves nothing).
        prove: after the search, run :func:`exact_map` with the tree as incumbent (within the
            remaining ``max_time`` and the memory limit) and report ``exact=True`` if it finishes.
        exact_first: prove the MAP with :func:`exact_map` instead of searching (``None``, the
            default: where it is expected to cost less CPU time than the search,
            :func:`jetastar.clustering.estimates.expected_cpu_seconds`, which with the defaults
            is up to 17 leaves; ``True``: whenever its tables fit in memory; ``False``: never).
            If it does not finish within ``max_time`` the search runs in the time left.
        progress: tqdm bar over the local searches: ``True`` always, ``False`` never, ``None``
            once the jet has taken 10 s (loops over jets stay quiet).
        device: where :func:`exact_map` runs for ``prove`` and ``exact_first`` (``"cpu"``,
            ``"gpu"`` or ``"auto"``; see :func:`exact_map`). The windows are solved on the CPU.

    Returns:
        :class:`ClusteringResult` (``algorithm="window-search"``), never below its best start tree.
        ``stats``: ``windows_solved``, ``windows_cached`` (skipped: known optimal),
        ``improvements``, ``sweeps``, ``starts`` (local searches from start trees),
        ``duplicate_starts`` (starts dropped by ``skip_duplicates``),
        ``recombined`` (improvements by recombination windows), ``sampled_starts`` (start trees
        drawn at random, ``n_sampled``), ``top_windows`` (root windows of
        more than ``window_size`` parts solved), ``window_optimal`` (the final tree
        survived a full sweep, or is proven), ``window_size``, ``start_log_likelihood`` (the best
        start tree; NaN when none was built), ``splits_evaluated`` (ψ computed in window solves or
        by :func:`exact_map`), ``agreeing_optima`` (other starts' local optima as good as the
        best tree), ``widened`` (the ``widen`` stage ran), ``path`` (``"exact_map"``: proven
        directly; ``"one_window"``: the jet was one window; ``"search"``), ``proved``
        (:func:`exact_map` finished, on the ``exact_map`` path or by ``prove``) and ``time_s``.
        ``exact=True`` only when the MAP is proven: the ``exact_map`` path, the whole jet as one
        window (at most ``window_size`` leaves) or ``prove`` finished. ``status="budget"`` when
        ``max_time`` cut the search short, ``"all_inf"`` when no tree with a finite likelihood was
        found.

    Raises:
        InvalidJetError: not a Jet, or a start tree over other leaves.
        ValueError: unknown likelihood or start, or an option out of range.

    Example:
        >>> from jetastar.ginkgo import ShowerParams, generate
        >>> jet = generate(1, ShowerParams.w(), seed=3, min_leaves=12, max_leaves=12)[0]
        >>> res = window_search(jet)
        >>> res.exact, res.stats["path"]
        (True, 'exact_map')
        >>> res = window_search(jet, exact_first=False)
        >>> res.exact, res.stats["path"], res.stats["windows_solved"]
        (True, 'one_window', 1)
    """
    watch = Stopwatch()
    if not isinstance(jet, Jet):
        raise InvalidJetError(
            f"window search needs a jetastar.Jet, got {type(jet).__name__}", field="jet"
        )
    likelihood = bounded_likelihood(likelihood, "the window search")
    if not (progress is None or isinstance(progress, (bool, np.bool_))):
        raise ValueError(f"progress must be True or False, got {progress!r}")
    options = window_options(
        jet.n_leaves, window_size=window_size, n_random=n_random, n_starts=n_starts,
        n_sampled=n_sampled, skip_duplicates=skip_duplicates, widen=widen,
        widen_unsure=widen_unsure, top_size=top_size, root_size=root_size, start=start,
        beam_size=beam_size, seed=seed, max_time=max_time, max_sweeps=max_sweeps, prove=prove,
        exact_first=exact_first, device=device)
    window_size, n_random, n_starts, n_sampled = (
        options[k] for k in ("window_size", "n_random", "n_starts", "n_sampled"))
    skip_duplicates, widen, widen_unsure, top_size, root_size = (
        options[k] for k in ("skip_duplicates", "widen", "widen_unsure", "top_size", "root_size"))
    beam_size, seed, max_time, max_sweeps = (
        options[k] for k in ("beam_size", "seed", "max_time", "max_sweeps"))
    n = jet.n_leaves
    _check_trees(jet, trees)
    if _exact_first(n, exact_first, options):
        proof, _, _ = _prove(jet, likelihood, None, watch, max_time, options["device"])
        if proof is not None:
            return _proven(jet, likelihood, proof, options, watch)
    sampled = _sampled_trees(jet, likelihood, n_sampled, seed) if n > window_size else []
    n_extra = len(trees or ()) + len(sampled)
    # (the start trees' searches get what is left of the budget)
    left = None if max_time is None else max(max_time - watch.seconds(), 1e-3)
    starts = _start_trees(jet, likelihood, start, beam_size, seed, left, trees, n_starts,
                          sampled)
    best_tree, best_ll = starts[0]
    work = _Workspace(jet, likelihood,
                      min(max(window_size + max(widen, widen_unsure), top_size, root_size), n),
                      seed)
    search = _Search(work, window_size, n_random, seed, watch, max_time, max_sweeps, widen,
                     top_size, widen_unsure, root_size, bool(skip_duplicates))
    exact = n <= window_size
    stats = search.stats
    stats["path"] = "one_window" if exact else "search"
    if exact:
        # one window: the whole jet over its leaves, solved exactly (the start tree as the floor)
        best = work.load(best_tree)
        search.whole(best)
    else:
        bar = search_progress(progress, f"window search jet {jet.label}", "search",
                              total=min(n_starts + n_extra, len(starts)) + 1)
        try:
            best = search.run(starts[:n_starts + n_extra], bar)
        finally:
            if bar is not None:
                bar.close()
    if best.log_likelihood() > best_ll:
        # scored as every algorithm is (the search's own sums differ in the last bits)
        tree = best.tree()
        ll = log_likelihood(jet, tree, likelihood)
        if ll >= best_ll:
            best_tree, best_ll = tree, ll
    status, message = "ok", ""
    if search.stopped:
        status = "budget"
        message = (f"stopped by max_time={max_time:g} s after {watch.seconds():.3g} s"
                   f"{search.stop_note}; the tree is the best found so far, not window optimal")
    stats["proved"] = False
    if prove and not exact:
        proof, unproven, cut = _prove(jet, likelihood, best_tree, watch, max_time,
                                      options["device"])
        if proof is not None:
            exact = True
            stats["proved"] = True
            if proof.log_likelihood > best_ll:
                best_tree, best_ll = proof.tree, proof.log_likelihood
            status, message = "ok", ""
        else:
            # the proof asked for did not finish: say so (a budget that cut it is a budget stop)
            status = "budget" if cut else status
            message = f"{message}; " if message else ""
            message += f"not proven: {unproven}"
    optimal = exact or (best.optimal and not search.stopped)
    stats.update(window_optimal=bool(optimal), window_size=window_size,
                 start_log_likelihood=starts[0][1], sampled_starts=len(sampled),
                 time_s=watch.seconds())
    if best_ll == _NEG_INF and status == "ok":
        status, message = "all_inf", "no tree with a finite likelihood was found"
    return ClusteringResult(
        best_tree, best_ll, "window-search", exact=exact, likelihood=likelihood, options=options,
        stats=stats, upper_bound=best_ll if exact else None, status=status, message=message,
        jet_id=jet.jet_id,
    )


# ---------------------------------------------------------------------- the search
class _Search:
    """Local searches, recombination and their counters for one jet (shared workspace and cache)."""

    def __init__(self, work: _Workspace, window_size: int, n_random: int, seed: int,
                 watch: Stopwatch, max_time: float | None, max_sweeps: int | None,
                 widen: int = 0, top_size: int = 0, widen_unsure: int = 0,
                 root_size: int = 0, skip_duplicates: bool = False) -> None:
        self.work = work
        self.skip_duplicates = skip_duplicates
        self.root_size = min(root_size, work.k_cap)
        self.widen = widen
        self.widen_unsure = widen_unsure
        self.top_size = min(top_size, work.k_cap)
        self.window_size = window_size
        self.n_random = n_random
        self.seed = seed
        self.watch = watch
        self.max_time = max_time
        self.stop_note = ""  # why the search stopped before max_time ran out, if it did
        self.max_sweeps = max_sweeps
        self.stopped = False
        self.stats: dict[str, Any] = {
            "windows_solved": 0, "windows_cached": 0, "improvements": 0, "reverted": 0,
            "sweeps": 0, "starts": 0, "duplicate_starts": 0, "recombined": 0, "top_windows": 0,
            "root_windows": 0, "splits_evaluated": 0,
            "agreeing_optima": 0, "widened": False,
        }

    def run(self, starts: list[tuple[Tree, float]], bar: ProgressBar | None) -> _State:
        """Search from every start, recombine the best local optimum with the others, polish."""
        n = self.work.n
        optima, twins = self._starts(starts, bar)
        optima.sort(key=lambda st: -st.log_likelihood())  # stable: earlier starts win ties
        best = optima[0]
        others = [set(st.hsh[n:].tolist()) for st in optima[1:]]
        rounds = 0
        while not self.stopped:
            # windows over the clusters the best tree shares with all the others, then with each
            changed = self.recombine(best, others) if others else 0
            for codes in others:
                changed += self.recombine(best, [codes])
            if rounds > 0 and not changed:
                break
            self.local(best, salt=len(starts) + rounds)  # fresh random frontiers
            rounds += 1
        if self.top_size > self.window_size and len(optima) > 1:
            self._top(best, [set(st.hsh[n:].tolist()) for st in optima[1:]],
                      salt=len(starts) + rounds)
        if self.root_size > self.window_size:
            self._root(best, salt=len(starts) + rounds + 1)
        top = best.log_likelihood()
        # a start skipped as a duplicate agrees with its twin (ended in the same tree)
        self.stats["agreeing_optima"] = sum(
            abs(st.log_likelihood() - top) <= _MARGIN * (1.0 + abs(top))
            for st in [*optima[1:], *twins])
        if self.widen_unsure and not self.widen and self.stats["agreeing_optima"] == 0:
            self.widen = self.widen_unsure
        if self.widen and not self.stopped:
            self.stats["widened"] = True
            best = self._widen(best, optima, salt=len(starts) + rounds)
        if bar is not None:
            bar.update(1)
        return best

    def _starts(self, starts: list[tuple[Tree, float]],
                bar: ProgressBar | None) -> tuple[list[_State], list[_State]]:
        """The local optima of the starts, and for each start skipped as a duplicate the optimum
        it ended with (its twin's state).

        Without ``skip_duplicates`` each start is searched through in turn. With it, every start
        is searched through the stages before the last; a start that then holds the same tree as
        an earlier one is dropped, and the last stage runs once per distinct tree, in the order
        of the starts (each with the start's own random frontiers).
        """
        n = self.work.n
        stages = self._stages()
        first = stages[:-1] if self.skip_duplicates else stages
        optima: list[_State] = []
        salts: list[int] = []
        sweeps: list[int] = []
        twins: list[_State] = []
        seen: dict[frozenset[int], _State] = {}
        for i, (tree, _) in enumerate(starts):
            state = self.work.load(tree)
            done = self.local(state, salt=i, stages=first)
            self.stats["starts"] += 1
            if bar is not None:
                bar.update(1)
            key = frozenset(state.hsh[n:].tolist()) if self.skip_duplicates else None
            if key is not None and key in seen:
                self.stats["duplicate_starts"] += 1
                twins.append(seen[key])
            else:
                if key is not None:
                    seen[key] = state
                optima.append(state)
                salts.append(i)
                sweeps.append(done)
            if self.stopped:
                break
        if self.skip_duplicates:
            for i, state in enumerate(optima):
                if self.stopped:
                    break
                self.local(state, salt=salts[i], stages=stages[-1:], sweeps=sweeps[i])
        return optima, twins

    def _widen(self, best: _State, optima: list[_State], salt: int) -> _State:
        """Local searches with ``window_size + widen`` parts from the best distinct optima."""
        saved = self.window_size
        self.window_size = min(saved + self.widen, self.work.k_cap)
        done: list[float] = []
        for j, st in enumerate([best, *optima[1:]]):
            ll = st.log_likelihood()
            if any(abs(ll - x) <= _MARGIN * (1.0 + abs(x)) for x in done):
                continue  # the same optimum (or one as good) was polished already
            if len(done) == WIDEN_TOP or self.stopped:
                break
            done.append(ll)
            self.local(st, salt=salt + j)
            if st.log_likelihood() > best.log_likelihood():
                best = st
        self.window_size = saved
        return best

    def _top(self, best: _State, others: list[set[int]], salt: int) -> None:
        """Root windows of up to ``top_size`` parts over the clusters ``best`` shares with all of
        ``others`` and with each of them; after an improvement, a local search and again."""
        work = self.work
        groups = [others, *([o] for o in others)] if len(others) > 1 else [others]
        while not self.stopped:
            changed = 0
            for group in groups:
                if self._out_of_time():
                    return
                k = int(_wk.common_frontier(best.root, best.common_with(group), self.top_size,
                                            best.left, best.right, work.parts))
                if k > self.window_size:  # smaller ones were solved by the recombination
                    if not self._fits(k):
                        return
                    changed += work.solve(best, best.root, k, self.stats)
                    self.stats["top_windows"] += 1
            if not changed:
                return
            self.stats["recombined"] += changed
            self.local(best, salt=salt)
            salt += 1

    def _root(self, best: _State, salt: int) -> None:
        """The root window of up to ``root_size`` parts, grown by the largest part; after an
        improvement, a local search and again (a window with the same parts is skipped)."""
        work = self.work
        while not self._out_of_time():
            k = int(_wk.grow_frontier(best.root, self.root_size, _wk.LARGEST, np.uint64(0),
                                      best.left, best.right, best.size, best.t, best.hsh,
                                      work.parts))
            if k <= self.window_size or not self._fits(k):
                return
            self.stats["root_windows"] += 1
            if not work.solve(best, best.root, k, self.stats):
                return
            self.local(best, salt=salt)
            salt += 1

    def _fits(self, k: int) -> bool:
        """Whether a window of ``k`` parts fits in the time left (else the search stops)."""
        seconds = self.work.split_seconds * 3.0**k / 2.0
        if self.max_time is not None and seconds > self.max_time - self.watch.seconds():
            self.stopped = True  # this window alone would overrun the budget
            self.stop_note = f" (a root window of {k} parts, ~{seconds:.2g} s, would not fit)"
            return False
        return True

    def _out_of_time(self) -> bool:
        # the first window always runs, so that even a spent budget compiles (or loads) the
        # window kernels: batch warm-ups pass a tiny max_time
        if (self.max_time is not None and self.stats["windows_solved"] > 0
                and self.watch.seconds() > self.max_time):
            self.stopped = True
        return self.stopped

    def whole(self, st: _State) -> None:
        """The whole jet as one window over its leaves."""
        work = self.work
        k = int(_wk.grow_frontier(st.root, st.n, _wk.LARGEST, np.uint64(0), st.left, st.right,
                                  st.size, st.t, st.hsh, work.parts))
        work.solve(st, st.root, k, self.stats)
        st.optimal = True

    def _stages(self) -> list[int]:
        """Window sizes of a local search's stages: ``STAGES`` below ``window_size``, then it."""
        return [k for k in STAGES if k < self.window_size] + [self.window_size]

    def local(self, st: _State, salt: int, stages: list[int] | None = None,
              sweeps: int = 0) -> int:
        """Stages of sweeps (window sizes ``stages``, default :meth:`_stages`) until none
        improves; ``salt`` varies the random frontiers (one value per start). ``sweeps``: sweeps
        this local search made before (a search in two calls), counted against ``max_sweeps``.

        Returns:
            The sweeps made, ``sweeps`` included. The tree is window optimal when the last stage
            (``window_size``) ended without improvement.
        """
        st.optimal = False
        stages = self._stages() if stages is None else stages
        for k in stages:
            while True:
                if self.max_sweeps is not None and sweeps >= self.max_sweeps:
                    return sweeps
                improved = self._sweep(st, k, salt)
                sweeps += 1
                self.stats["sweeps"] += 1
                if self.stopped:
                    return sweeps
                if improved == 0:
                    break
        st.optimal = bool(stages) and stages[-1] == self.window_size
        return sweeps

    def _sweep(self, st: _State, k_max: int, salt: int) -> int:
        """One sweep over the clusters, top-down. Returns the number of improvements."""
        work = self.work
        improved = 0
        size, parent = st.size, st.parent
        policies = (_wk.LARGEST, _wk.HEAVIEST) + (_wk.RANDOM,) * self.n_random
        for top in st.preorder():
            top = int(top)
            if size[top] <= k_max:
                par = int(parent[top])
                if par >= 0 and size[par] <= k_max:
                    continue  # inside a small sub-tree solved whole
                policies_here: tuple[int, ...] = (_wk.LARGEST,)
            else:
                policies_here = policies
            code = int(st.hsh[top])
            for j, policy in enumerate(policies_here):
                if self._out_of_time():
                    return improved
                rseed = _seed64(self.seed, salt, code, k_max, j)
                k = int(_wk.grow_frontier(top, k_max, policy, rseed, st.left, st.right, size,
                                          st.t, st.hsh, work.parts))
                improved += work.solve(st, top, k, self.stats)
        return improved

    def recombine(self, st: _State, others: list[set[int]]) -> int:
        """Windows of ``st`` whose parts are the largest clusters it shares with every tree of
        ``others`` (each given by the codes of its clusters), at most ``window_size`` of them."""
        work = self.work
        improved = 0
        common = st.common_with(others)
        for top in st.preorder():
            if self._out_of_time():
                break
            top = int(top)
            k = int(_wk.common_frontier(top, common, self.window_size, st.left, st.right,
                                        work.parts))
            if k >= 3 and work.solve(st, top, k, self.stats):
                improved += 1
                common = st.common_with(others)
        self.stats["recombined"] += improved
        return improved


class _State:
    """A tree of the jet in flat arrays (:mod:`jetastar.clustering._window_kernels`)."""

    def __init__(self, n: int) -> None:
        m = 2 * n - 1
        self.n = n
        self.left = np.full(m, -1, dtype=np.int64)
        self.right = np.full(m, -1, dtype=np.int64)
        self.parent = np.full(m, -1, dtype=np.int64)
        self.size = np.ones(m, dtype=np.int64)
        self.p = np.zeros((m, 4), dtype=np.float64)
        self.t = np.zeros(m, dtype=np.float64)
        self.psi = np.zeros(m, dtype=np.float64)
        self.hsh = np.zeros(m, dtype=np.int64)
        self.root = 0
        self.total = 0.0
        self.n_inf = 0
        #: the last sweep of the last local search improved nothing
        self.optimal = False
        self._order = np.empty(max(n - 1, 1), dtype=np.int64)

    def log_likelihood(self) -> float:
        return _NEG_INF if self.n_inf else self.total

    def preorder(self) -> np.ndarray:
        k = _wk.preorder(self.root, self.left, self.right, self._order)
        return self._order[:k].copy()

    def common_with(self, others: list[set[int]]) -> np.ndarray:
        """1 for each node whose cluster is a cluster of every tree of ``others``, else 0."""
        return np.fromiter((all(h in o for o in others) for h in self.hsh.tolist()),
                           dtype=np.int64, count=self.hsh.shape[0])

    def tree(self) -> Tree:
        n = self.n
        children = np.stack([self.left, self.right], axis=1)
        leaf_of_node = np.full(2 * n - 1, -1, dtype=np.int64)
        leaf_of_node[:n] = np.arange(n)
        return Tree(children, leaf_of_node)


class _Workspace:
    """Scratch arrays for windows of up to ``k_max`` parts, the solved-window cache and the leaves."""

    def __init__(self, jet: Jet, likelihood: str, k_max: int, seed: int) -> None:
        n = jet.n_leaves
        self.n = n
        self.consts = np.ascontiguousarray(jet.likelihood_constants(likelihood), dtype=np.float64)
        self.leaves = np.ascontiguousarray(jet.leaves, dtype=np.float64)
        # the form's t of a single leaf: 0 in the legacy form
        self.leaf_t = (np.zeros(n) if likelihood == "legacy"
                       else np.ascontiguousarray(jet.leaf_t, dtype=np.float64))
        # random 63-bit codes of the leaves: a cluster's code is the XOR of its leaves' codes
        self.codes = np.random.default_rng([seed, 0x57D0]).integers(1, 2**63 - 1, size=n,
                                                                     dtype=np.int64)
        m = 1 << max(k_max, 1)
        self.k_cap = k_max
        self.psum = np.empty((m, 4), dtype=np.float64)
        self.rec = np.empty((m, 2), dtype=np.float64)
        self.wq = np.empty(m, dtype=np.int16)
        self.best = np.zeros(m, dtype=np.int32)
        self.parts = np.empty(max(k_max, 2), dtype=np.int64)
        self.interior = np.empty(max(k_max, 2), dtype=np.int64)
        self.part_p = np.empty((max(k_max, 2), 4), dtype=np.float64)
        self.part_t = np.empty(max(k_max, 2), dtype=np.float64)
        self.mark = np.zeros(max(2 * n - 1, 1), dtype=np.int64)
        self.slack_root = root_slack(self.consts)
        #: seconds per split of the window DPs of >= 8 parts solved so far (a running mean; 0
        #: before any): the cost of a top window of k parts is about this times 3^k / 2
        self.split_seconds = 0.0
        #: parts' codes (frozenset) -> the best value of the window's interior, when known
        self.solved: dict[frozenset[int], float] = {}

    def load(self, tree: Tree) -> _State:
        """The arrays of ``tree`` (leaf ``i`` is node ``i``; internal nodes follow in post-order)."""
        n = self.n
        st = _State(n)
        st.p[:n] = self.leaves
        st.t[:n] = self.leaf_t
        st.hsh[:n] = self.codes
        if n == 1:
            return st
        ch = tree.children
        lon = tree.leaf_of_node
        post = tree.postorder()
        internal = post[ch[post, 0] >= 0]
        ids = np.empty(tree.n_nodes, dtype=np.int64)
        leaf_nodes = np.flatnonzero(lon >= 0)
        ids[leaf_nodes] = lon[leaf_nodes]
        ids[internal] = n + np.arange(internal.size)
        new = ids[internal]
        st.left[new] = ids[ch[internal, 0]]
        st.right[new] = ids[ch[internal, 1]]
        st.parent[st.left[new]] = new
        st.parent[st.right[new]] = new
        st.root = int(ids[tree.root])
        total, n_inf = _wk.score_tree(np.ascontiguousarray(new), st.root, st.left, st.right,
                                      st.size, st.p, st.t, st.psi, st.hsh, self.consts)
        st.total, st.n_inf = float(total), int(n_inf)
        return st

    def solve(self, st: _State, top: int, k: int, stats: dict[str, Any]) -> int:
        """Solve the window of ``top`` over ``self.parts[:k]``; substitute it if strictly better.

        Returns:
            1 if the tree changed, else 0.
        """
        parts = self.parts
        n_int, cur, cur_inf = _wk.window_interior(top, parts, k, self.mark, st.left, st.right,
                                                  st.psi, self.interior)
        key = frozenset(st.hsh[parts[:k]].tolist())
        known = self.solved.get(key)
        if known is not None and cur_inf == 0 and cur >= known - _MARGIN * (1.0 + abs(known)):
            stats["windows_cached"] += 1
            return 0
        _wk.window_parts(parts, k, st.p, st.t, self.part_p, self.part_t)
        at_root = top == st.root
        floor = cur + _MARGIN * (1.0 + abs(cur)) if cur_inf == 0 else _NEG_INF
        clock = Stopwatch()
        counts = _mk.solve_parts(
            self.part_p[:k], self.part_t[:k], self.psum, self.rec, self.wq, self.best,
            self.consts[0], self.consts[1 if at_root else 0],
            self.slack_root if at_root else 0.0, floor,
        )
        if k >= 8:
            rate = clock.seconds() / (3.0**k / 2.0)
            self.split_seconds = rate if self.split_seconds == 0.0 else (
                0.7 * self.split_seconds + 0.3 * rate)
        stats["windows_solved"] += 1
        stats["splits_evaluated"] += int(counts[2])
        value = float(self.rec[(1 << k) - 1, _mk.V])
        if value == _NEG_INF:
            if cur_inf == 0:
                self.solved[key] = cur  # nothing beats the current interior: it is the best
            return 0
        saved = self._save(st, parts[:k], self.interior[:n_int])
        new, new_inf = _wk.substitute(
            self.best, k, parts, self.interior, st.left, st.right, st.parent, st.size, st.p, st.t,
            st.psi, st.hsh, self.consts, at_root,
        )
        if not (new_inf < cur_inf or (new_inf == cur_inf and new > cur)):
            self._restore(st, saved)  # rounding made it no better: keep the old interior
            stats["reverted"] += 1
            return 0
        st.total += float(new) - cur
        st.n_inf += int(new_inf) - int(cur_inf)
        if new_inf == 0:
            self.solved[key] = float(new)
        stats["improvements"] += 1
        return 1

    @staticmethod
    def _save(st: _State, parts: np.ndarray, interior: np.ndarray) -> tuple[Any, ...]:
        nodes = interior.copy()
        return (nodes, parts.copy(), st.parent[parts].copy(), st.left[nodes].copy(),
                st.right[nodes].copy(), st.size[nodes].copy(), st.p[nodes].copy(),
                st.t[nodes].copy(), st.psi[nodes].copy(), st.hsh[nodes].copy())

    @staticmethod
    def _restore(st: _State, saved: tuple[Any, ...]) -> None:
        nodes, parts, par, left, right, size, p, t, psi, hsh = saved
        st.parent[nodes[1:]] = -1
        st.parent[parts] = par
        st.left[nodes], st.right[nodes], st.size[nodes] = left, right, size
        st.p[nodes], st.t[nodes], st.psi[nodes], st.hsh[nodes] = p, t, psi, hsh
        st.parent[left] = nodes
        st.parent[right] = nodes


# ---------------------------------------------------------------------- helpers
def _start_trees(
    jet: Jet, likelihood: str, start: str, beam_size: int | None, seed: int,
    max_time: float | None, trees: Sequence[Tree] | None, n_starts: int,
    scored: Sequence[tuple[Tree, float]] = (),
) -> list[tuple[Tree, float]]:
    """Distinct start trees with their log-likelihoods (``max_time``: the budget left for the
    beam search or approximate A* behind ``start``; stopped, it gives the greedy tree).

    First (best first): the tree of ``start`` (the best beam tree, the greedy tree, or approximate
    A*'s tree), the greedy tree, the kt, Cambridge/Aachen and anti-kt trees, the greedy tree of the
    other likelihood form, ``trees`` and the trees of ``scored`` (with their log-likelihoods, e.g.
    the sampled starts): trees from different basins, which is what lets restarts
    reach different optima (the kt family's trees often have impossible splits, which the windows
    remove). Then the rest of the beam.
    """
    first: list[tuple[Tree, float]] = []
    rest: list[tuple[Tree, float]] = []
    size = 0
    if start == "astar-approx":
        res = astar_approx(jet, beam_size=beam_size, seed=seed, likelihood=likelihood,
                           max_time=max_time, progress=False)
        first.append((res.tree, res.log_likelihood))
    elif start == "beam":
        size = default_beam_size(jet.n_leaves) if beam_size is None else beam_size
        beam = beam_search(jet, beam_size=size, likelihood=likelihood, max_time=max_time)
        found = [(r.tree, r.log_likelihood) for r in beam.beam or [beam] if r.tree is not None]
        first.extend(found[:1])
        # only as many as can be searched (hashing a 1000-wide beam's trees cost a second)
        rest.extend(found[1:n_starts])
    if start != "beam" or size < GREEDY_IN_BEAM:
        first.append((greedy(jet, likelihood).tree, _NEG_INF))
    for name in ("kt", "cambridge", "antikt"):
        first.append((kt(jet, name, likelihood).tree, _NEG_INF))
    other = "legacy" if likelihood == "symmetric" else "symmetric"
    first.append((greedy(jet, other).tree, _NEG_INF))
    for tree in trees or ():
        first.append((tree, _NEG_INF))
    first.extend(scored)
    out: list[tuple[Tree, float]] = []
    seen: set[Tree] = set()
    for tree, ll in first + rest:
        if tree not in seen:
            seen.add(tree)
            out.append((tree, ll if ll > _NEG_INF else log_likelihood(jet, tree, likelihood)))
    head = sorted(out[:len(first)], key=lambda item: -item[1])  # stable: ties keep the order
    return [*head, *out[len(first):]]


def _sampled_trees(jet: Jet, likelihood: str, count: int, seed: int) -> list[tuple[Tree, float]]:
    """``count`` start trees drawn by :func:`~._window_kernels.sampled_histories` (seeded by
    ``seed``: the same seed draws the same trees), with their exact log-likelihoods."""
    if count == 0:
        return []
    leaves, consts = jet_arrays(jet, likelihood)
    rseed = np.uint64(np.random.default_rng([seed, 0x5A3D]).integers(0, 2**63 - 1))
    histories, steps = _wk.sampled_histories(leaves, consts, count, SAMPLE_TEMPERATURE, rseed)
    trees, totals = canonical_results(histories, steps, jet.n_leaves, jet.label)
    return list(zip(trees, totals.tolist(), strict=True))


def _check_trees(jet: Jet, trees: Sequence[Tree] | None) -> None:
    for tree in trees or ():
        if not isinstance(tree, Tree) or tree.n_leaves != jet.n_leaves:
            raise InvalidJetError(
                f"start trees must be Trees over the jet's {jet.n_leaves} leaves, got {tree!r}",
                jet=jet.label, field="trees",
            )


def window_options(
    n_leaves: int,
    *,
    window_size: int = DEFAULT_WINDOW_SIZE,
    n_random: int | None = None,
    n_starts: int = 6,
    n_sampled: int | None = None,
    skip_duplicates: bool | None = None,
    widen: int | None = None,
    widen_unsure: int = 0,
    top_size: int | None = None,
    root_size: int | None = None,
    start: str = "beam",
    beam_size: int | None = None,
    seed: int = 0,
    max_time: float | None = None,
    max_sweeps: int | None = None,
    prove: bool = False,
    exact_first: bool | None = None,
    device: str = "auto",
) -> dict[str, Any]:
    """The options :func:`window_search` runs a jet of ``n_leaves`` leaves with, and records in
    its result: the given ones checked, those left at ``None`` set to their defaults for that
    size (:func:`window_defaults`).

    Args:
        n_leaves: the jet's number of leaves.
        window_size, ...: as for :func:`window_search` (without ``likelihood``, ``trees`` and
            ``progress``).

    Returns:
        Option name -> value.

    Raises:
        ValueError: an unknown start, or an option out of range.

    Example:
        >>> opts = window_options(20)
        >>> opts["n_random"], opts["root_size"], window_options(19)["n_random"]
        (8, 15, 4)
        >>> window_options(24)["root_size"]
        17
    """
    window_size = _check_int(window_size, "window_size", 2, MAX_WINDOW_SIZE)
    default = window_defaults(n_leaves)
    n_random = _check_int(default["n_random"] if n_random is None else n_random, "n_random", 0,
                          None)
    n_starts = _check_int(n_starts, "n_starts", 1, None)
    n_sampled = _check_int(default["n_sampled"] if n_sampled is None else n_sampled, "n_sampled",
                           0, None)
    if skip_duplicates is None:
        skip_duplicates = bool(default["skip_duplicates"])
    widen = _check_int(default["widen"] if widen is None else widen, "widen", 0,
                       MAX_WINDOW_SIZE - window_size)
    widen_unsure = _check_int(widen_unsure, "widen_unsure", 0, MAX_WINDOW_SIZE - window_size)
    if top_size is None:
        top_size = DEFAULT_TOP_SIZE if n_leaves >= TOP_FROM_LEAVES else 0
    top_size = _check_int(top_size, "top_size", 0, MAX_WINDOW_SIZE)
    if root_size is None:
        root_size = default["root_size"]
    root_size = _check_int(root_size, "root_size", 0, MAX_WINDOW_SIZE)
    seed = _check_int(seed, "seed", None, None)
    if beam_size is not None:
        beam_size = _check_int(beam_size, "beam_size", 1, None)
    if max_sweeps is not None:
        max_sweeps = _check_int(max_sweeps, "max_sweeps", 1, None)
    max_time = check_budget(max_time, "max_time")
    if start not in START_TREES:
        raise ValueError(f"unknown start {start!r}; valid: {', '.join(map(repr, START_TREES))}")
    for name, value in (("prove", prove), ("exact_first", exact_first),
                        ("skip_duplicates", skip_duplicates)):
        if not (isinstance(value, (bool, np.bool_)) or (name != "prove" and value is None)):
            raise ValueError(f"{name} must be True or False, got {value!r}")
    options = {
        "window_size": window_size, "n_random": n_random, "n_starts": n_starts,
        "n_sampled": n_sampled, "skip_duplicates": bool(skip_duplicates), "widen": widen,
        "widen_unsure": widen_unsure,
        "top_size": top_size, "root_size": root_size,
        "start": start, "beam_size": beam_size, "seed": seed, "max_time": max_time,
        "max_sweeps": max_sweeps, "prove": bool(prove), "exact_first": exact_first,
        "device": check_device(device),
    }
    return options


def window_proves_first(n_leaves: int, options: dict[str, Any]) -> bool:
    """Whether :func:`window_search` of a jet of ``n_leaves`` leaves with ``options`` (from
    :func:`window_options`) proves the MAP with :func:`exact_map` before any search (its
    ``exact_map`` path; the columnar path takes such jets)."""
    return _exact_first(int(n_leaves), options["exact_first"], options)


def _exact_first(n: int, exact_first: bool | None, options: dict[str, Any]) -> bool:
    """Whether to prove the MAP with :func:`exact_map` before (instead of) searching."""
    if exact_first is not None:
        return bool(exact_first) and n >= 2
    return n >= 2 and expected_map_cpu_seconds(n) <= _expected_cpu(n, options)


def _proven(
    jet: Jet, likelihood: str, proof: ClusteringResult, options: dict[str, Any], watch: Stopwatch
) -> ClusteringResult:
    """The result of the ``exact_map`` path: the proven MAP, no window solved."""
    stats: dict[str, Any] = {
        "windows_solved": 0, "windows_cached": 0, "improvements": 0, "reverted": 0,
        "sweeps": 0, "starts": 0, "duplicate_starts": 0, "recombined": 0, "top_windows": 0,
        "splits_evaluated": int(proof.stats.get("splits_evaluated", 0)),
        "agreeing_optima": 0, "widened": False,
        "path": "exact_map", "proved": True, "window_optimal": True, "sampled_starts": 0,
        "window_size": options["window_size"], "start_log_likelihood": math.nan,
        "time_s": watch.seconds(),
    }
    return ClusteringResult(
        proof.tree, proof.log_likelihood, "window-search", exact=True, likelihood=likelihood,
        options=options, stats=stats, upper_bound=proof.log_likelihood, status=proof.status,
        message=proof.message, jet_id=jet.jet_id,
    )


def _prove(
    jet: Jet, likelihood: str, tree: Tree | None, watch: Stopwatch, max_time: float | None,
    device: str = "auto",
) -> tuple[ClusteringResult | None, str, bool]:
    """:func:`exact_map` with ``tree`` as incumbent (if any), or ``None`` and why not if it cannot
    run or finish, and whether ``max_time`` was what stopped it."""
    left = None if max_time is None else max_time - watch.seconds()
    if left is not None and left <= 0:
        return None, f"no time was left of max_time={max_time:g} s for exact_map", True
    try:
        res = exact_map(jet, likelihood, incumbent=tree, max_time=left, progress=False,
                        device=device)
    except TooLargeError as exc:
        return None, f"exact_map cannot run ({str(exc).split(';')[0]})", False
    if res.exact:
        return res, "", False
    if res.status == "budget" and max_time is not None:
        return None, (f"exact_map did not finish in the {left:.3g} s left of max_time="
                      f"{max_time:g} s"), True
    return None, f"exact_map did not prove the MAP ({res.message})", False


_MASK64 = (1 << 64) - 1


def _seed64(*values: int) -> np.uint64:
    """A uint64 random seed from integers (splitmix64 chained over them)."""
    x = 0x6A09E667F3BCC909
    for v in values:
        x = (x ^ (int(v) & _MASK64)) + 0x9E3779B97F4A7C15 & _MASK64
        x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
        x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
        x ^= x >> 31
    return np.uint64(x)


def _check_int(value: Any, name: str, lo: int | None, hi: int | None) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        rng = f"{lo if lo is not None else '-inf'} .. {hi if hi is not None else 'inf'}"
        raise ValueError(f"{name} must be in {rng}, got {value!r}")
    return int(value)


# ---------------------------------------------------------------------- its cost
def _expected_cpu(n_leaves: int, options: Mapping[str, Any]) -> float:
    """The typical CPU seconds (all threads) of the window search on a jet of ``n_leaves``
    leaves with ``options`` (``window_size``, ``n_random``, ``widen``, ``n_starts``,
    ``n_sampled``: more effort, more time; ``skip_duplicates``: less; ``root_size``: its root
    window; missing or ``None``: its default for this size, :func:`window_defaults`): fitted to
    measured times (see the constants above), no bound. It decides, with
    :func:`~.exact_map.expected_map_cpu_seconds`, whether proving the MAP first costs less than
    searching.

    Example:
        >>> _expected_cpu(20, {}) < expected_map_cpu_seconds(20)
        True
    """
    n = int(n_leaves)
    window = int(options.get("window_size") or 13)
    root = window_defaults(n)["root_size"]
    root = root if options.get("root_size") is None else int(options["root_size"])
    # the root window after the search (``root_size``): enumerated like an exact MAP of that
    # many leaves (measured 50-80 ms at 16, 0.15-0.2 s at 17)
    root_s = MAP_CPU_PER_SPLIT * 3.0 ** min(root, n) / 2.0 if window < root < n else 0.0
    return _WINDOW_CPU_PER_LEAF * n * window_effort(n, options) + root_s


def window_effort(n_leaves: int, options: dict[str, Any]) -> float:
    """The window search's local-search effort relative to its former defaults at 20 leaves
    (``window_size=13``, six starts, ``n_random=4``, no widening, no sampled starts, every start
    searched through): the factor its expected CPU time puts on its per-leaf time, before
    the root window.

    Args:
        n_leaves: size of the jet.
        options: the window search's options (``None`` or missing: the default).

    Example:
        >>> former = {"n_random": 4, "widen": 0, "n_sampled": 0, "skip_duplicates": False}
        >>> window_effort(20, former)
        1.0
        >>> window_effort(20, {**former, "n_sampled": 6})
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


# ---------------------------------------------------------------------- the columnar path
#: the options of the window search that the columnar path takes (``trees``, per-jet start
#: trees, is not one of them)
_CHUNK_OPTIONS = {"likelihood", "window_size", "n_random", "n_starts", "n_sampled",
                  "skip_duplicates", "widen", "widen_unsure", "top_size", "root_size", "start",
                  "beam_size", "seed", "max_time", "max_sweeps", "prove", "exact_first",
                  "progress", "device"}
#: the window search's options whose default depends on the jet's size (:func:`window_options`)
_SIZED = ("n_random", "n_sampled", "skip_duplicates", "widen", "top_size", "root_size")
#: a ``max_time`` below this goes per jet: the per-jet function may find it spent before its
#: exact MAP starts
_CHUNK_MIN_TIME = 0.01


class _WindowChunks(ChunkPath):
    """The window search on the columnar path: the jets it would prove with the exact MAP engine
    before any search (its ``exact_map`` path: ``exact_first``, by default where that costs less
    than the search) of up to :data:`~._map_kernels.EXACT_CHUNK_MAX` (14) leaves, solved by that
    engine's chunk kernel (:func:`~.exact_map.map_chunk_rows`), with the results, options and
    stats of :func:`window_search`; the other jets are left to it (:data:`~.chunks.PER_JET`).
    Its larger jets cost up to seconds each: a batch run sizes its chunks as for the per-jet
    path (``whole = False``)."""

    kernel_key = "columnar-map"
    whole = False

    def options(self, options: Mapping[str, Any]) -> dict[str, Any] | None:
        """The window search's options as given (``likelihood`` and the others it was asked
        for; ``progress`` dropped: the exact MAP path shows none), or ``None`` where the columnar
        path would not give the per-jet function's rows: start ``trees``,
        ``exact_first=False``, a GPU ``device``, a ``max_time`` below 0.01 s, a value it would
        refuse.

        Example:
            >>> from jetastar.clustering import algorithm_info
            >>> path = algorithm_info("window-search").chunk
            >>> path.options({"window_size": 12}), path.options({"exact_first": False})
            ({'likelihood': 'symmetric', 'window_size': 12}, None)
        """
        if set(options) - _CHUNK_OPTIONS:
            return None
        likelihood = options.get("likelihood") or "symmetric"
        if likelihood not in BOUNDED_LIKELIHOODS:
            return None
        asked = {k: v for k, v in options.items() if k not in ("likelihood", "progress")}
        try:
            for n in (2, EXACT_CHUNK_MAX, 24, 40):  # every size's defaults, checked
                resolved = window_options(n, **asked)
            if check_device(resolved["device"]) == "gpu" or resolved["exact_first"] is False:
                return None
            progress = options.get("progress")
            if not (progress is None or isinstance(progress, (bool, np.bool_))):
                return None
        except (OptionError, ValueError, TypeError):
            return None
        if resolved["max_time"] is not None and resolved["max_time"] < _CHUNK_MIN_TIME:
            return None
        return {"likelihood": likelihood, **asked}

    def run(self, opts: dict[str, Any], chunk: Chunk) -> ChunkResults:
        n = len(chunk)
        counts = chunk.counts
        asked = {k: v for k, v in opts.items() if k != "likelihood"}
        exact_path = np.zeros(n, dtype=bool)
        sized = {name: np.zeros(n, dtype=object) for name in _SIZED}
        resolved: dict[str, Any] = {}
        for k in np.unique(counts).tolist():
            resolved = window_options(k, **asked)
            rows = counts == k
            for name in _SIZED:
                sized[name][rows] = resolved[name]
            if 2 <= k <= EXACT_CHUNK_MAX and window_proves_first(k, resolved):
                exact_path[rows] = True
        proof = map_chunk_rows(
            {"likelihood": opts["likelihood"], "max_time": None, "max_memory": None,
             "prune": True, "threads": None, "incumbent": False, "device": "cpu"},
            dataclasses.replace(chunk, run=chunk.run & exact_path))
        outcome = proof.outcome.copy()
        outcome[chunk.run & ~exact_path] = PER_JET
        done = outcome == DONE
        counters: dict[str, np.ndarray] = {}
        if done.any():
            zero, one = done_column(done, np.zeros(n)), done_column(done, np.ones(n))
            counters = {name: zero for name in (
                "windows_solved", "windows_cached", "improvements", "reverted", "sweeps",
                "starts", "duplicate_starts", "recombined", "top_windows", "agreeing_optima",
                "sampled_starts", "widened")}
            counters.update(proved=one, window_optimal=one,
                            splits_evaluated=proof.counters["splits_evaluated"],
                            window_size=done_column(done, np.full(n, resolved["window_size"])),
                            start_log_likelihood=np.full(n, np.nan))
        # the options a row records: those asked for, each size's defaults as row options
        options = {name: (asked.get(name) if name in _SIZED else value)
                   for name, value in resolved.items()} if n else dict(asked)
        row_options = {name: np.array(values.tolist()) for name, values in sized.items()} \
            if n else {}
        return dataclasses.replace(
            proof, algorithm="window-search", options=options, outcome=outcome,
            counters=counters, row_options=row_options, stats={"path": "exact_map"},
            rerun_options={"likelihood": opts["likelihood"], **options},
            flags=("proved", "window_optimal", "widened"))


#: the window search in the registry
WINDOW_SEARCH = register(AlgorithmInfo(
    "window-search", window_search,
    description="exact-window search: windows of a tree re-solved exactly with the exact MAP engine",
    aliases=("window_search",),
    declared=(
        likelihood_option(None, BOUNDED_LIKELIHOODS),
        integer("window_size", DEFAULT_WINDOW_SIZE, "parts per window (a 13-part window takes "
                "~2 ms)", low=2),
        integer("n_random", None, "random frontiers per cluster and sweep (None: by jet size)",
                low=0, none=True),
        integer("n_starts", 6, "start trees searched (beam, greedy, the kt family, the other "
                "form's greedy; more: further beam trees)", low=1),
        integer("n_sampled", None, "start trees drawn at random besides (None: by jet size)",
                low=0, none=True),
        flag("skip_duplicates", None, "search the last stage only from distinct first-stage "
             "trees (None: by jet size)", none=True),
        integer("widen", None, "search the best optima again with this many more parts per "
                "window (None: by jet size)", low=0, none=True),
        integer("widen_unsure", 0, "as widen, only where no other start reached the best value",
                low=0),
        integer("top_size", None, "most parts of the root window over shared clusters (None: by "
                "jet size)", low=0, none=True),
        integer("root_size", None, "parts of the root window solved at the end (None: by jet "
                "size)", low=0, none=True),
        choice("start", "beam", "the first start tree", START_TREES),
        integer("beam_size", None, "beam size of the seeding beam search (None: its default)",
                low=1, none=True),
        anything("trees", None, "extra start trees"),
        integer("seed", 0, "seed of the random frontiers (same seed, same tree)"),
        number("max_time", None, "run-time budget in seconds (None: search until done)",
               low=0.0, low_open=True, none=True),
        integer("max_sweeps", None, "most sweeps per local search (None: until nothing "
                "improves)", low=1, none=True),
        flag("prove", False, "prove the result with the exact MAP engine afterwards"),
        flag("exact_first", None, "prove the MAP with the exact MAP engine instead of searching "
             "(None: where that is expected to cost less)", none=True),
        flag("progress", None, "a progress bar: true, false, or None (after 10 s)", none=True),
        choice("device", "auto", "where the exact MAP engine runs for prove and exact_first",
               DEVICES),
    ),
    family="exact", chunk=_WindowChunks(), expected_cpu=_expected_cpu,
    # (compile CPU seconds measured 2026-11-27 on a 2-core machine, cold cache: only what it does
    # not share with beam search and the exact MAP; alone it is ~21 s on top of the base). One
    # task with the trellis (the same exact MAP engine, group "exact-map"). Measured 2026-12-07:
    # with the trellis 9.5 s, ~9 of them the windows' kernels, which only jets above the
    # exact-first size call (below it, the exact MAP proves the MAP: nothing of its own)
    warm_up=WarmUp(compile_s=9.5, alone_s=21.0, order=0.5, group="exact-map", large_jet_s=9.0),
))
