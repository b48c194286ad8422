"""Beam search over partial clusterings, scored with the Ginkgo likelihood.

A *state* is a partial clustering: the clusters made so far by a sequence of merges, ranked by its
accumulated log-likelihood (the sum of the split log-likelihoods of its merges; the merge that makes
the whole jet uses λ_R, so complete trees are ranked by their true log-likelihood). Every level expands
every state of the beam by all possible merges of two of its current clusters and keeps the best
``beam_size`` *distinct* states.

Deduplication is on the set of clusters, not on float equality of the score (which is what the
reference StandardHC code does: it lets duplicates through and merges distinct states whose sums tie).
Two merge orders that build the same clusters give the same state. The canonical form is exact and
works for any number of leaves: each leaf ``l`` gets ``attach[l]``. Take the largest cluster whose
smallest leaf is ``l``. If that cluster has been merged into a parent, ``attach[l]`` is
``(smallest leaf of the parent, size of the parent)``; otherwise it is ``-1``. Two partial clusterings
are equal exactly when their ``attach`` arrays are equal, and a merge changes one entry. States are
hashed by a 64-bit sum of mixed ``(leaf, attach)`` pairs, and a hash match is checked on the full
array.

Candidate scores come from numba kernels. Each state caches the split log-likelihood of every pair of
its clusters (``n(n-1)/2`` float64), and a child state only evaluates the pairs that involve its new
cluster. Above a memory budget the cache is switched off and pairs are re-evaluated. The best
``beam_size`` distinct candidates of a level are found with a bounded heap (ties by the order of the
parent state, then of the pair), so a level costs O(beam · clusters²) cheap operations.

Default beam size as in the paper: ``N(N-1)/2`` for ``N <= 40`` leaves, 1000 above.

A beam can lose the greedy path: a state on it may rank below ``beam_size`` others at some level.
This happens for about 1% of the reference Ginkgo jets (4–14 leaves), and the final beam is then
worse than greedy. With ``greedy_guard=True`` (the default) the greedy tree
(:func:`~jetastar.clustering.greedy`) joins the final beam whenever it would rank in it, so the
result is never worse than greedy. ``greedy_guard=False`` is the plain beam search of the reference.

Example:
    >>> import numpy as np
    >>> from jetastar import Jet
    >>> from jetastar.ginkgo import ShowerParams
    >>> leaves = np.array([[40.0, 0, 30, 25], [30.0, 0, 25, 15], [20.0, 5, 15, 10]])
    >>> result = beam_search(Jet(leaves, ShowerParams.qcd()))
    >>> len(result.beam) <= 3 and result.beam[0].tree == result.tree
    True
"""

from __future__ import annotations

import math
import numbers
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..._jit import DeferredSignals, Stopwatch
from ...errors import OptionError
from ...ginkgo.likelihood import LIKELIHOODS
from ...jet import Jet
from .._engine import check_budget, check_memory, default_memory_limit
from .._merges import (
    canonical_result,
    canonical_results,
    check_jet,
    greedy_kernel,
    jet_arrays,
)
from ..chunks import DONE, Chunk, ChunkPath, ChunkResults, done_trees, ok_rows, rerun_options
from ..estimates import SPLITS_PER_S
from ..options import flag, integer, likelihood_option, number
from ..registry import AlgorithmInfo, WarmUp, register
from ..result import ClusteringResult
from ._beam_kernels import (
    BEAM_CHUNK_MAX,
    N_REGS,
    R_DONE,
    R_LEVEL,
    R_NB,
    R_WORK,
    beam_advance,
    beam_chunk,
    beam_state,
)

__all__ = ["BEAM", "BEAM_CHUNK_MAX", "beam_search", "default_beam_size"]

#: Above this many bytes for the two pair caches, pairs are re-evaluated instead of cached.
CACHE_BUDGET_BYTES = 512 * 1024**2

def default_beam_size(n_leaves: int) -> int:
    """The paper's beam size: ``N(N-1)/2`` for ``N <= 40`` leaves, 1000 above (at least 1)."""
    if n_leaves <= 40:
        return max(1, n_leaves * (n_leaves - 1) // 2)
    return 1000


#: A run returns to Python between slices of work (so that ``max_time`` and Ctrl-C are seen) of
#: about this many seconds; the first slice is :data:`_FIRST_SLICE_WORK` units (split evaluations
#: or candidates ranked), the next ones are sized by the rate measured so far.
_SLICE_S = 0.1
_FIRST_SLICE_WORK = 2_000_000
#: the first slice under a ``max_time`` (a small one, so that a tiny budget is seen early)
FIRST_BUDGET_SLICE_WORK = 100_000
#: no slice is larger than this (tests set it small to cut a run into many slices)
_MAX_SLICE_WORK = 2**62


def _run_beam(
    leaves: np.ndarray, consts: np.ndarray, width: int, use_cache: bool, watch: Stopwatch,
    max_time: float | None,
) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray, int]:
    """The beam search kernel run in slices of work, returning to Python between them: a pending
    signal (Ctrl-C) is raised there, and the run stops once ``watch`` has passed ``max_time``.

    Returns:
        ``(history, steps, counters, level)``: the final beam (``None``, ``None`` when stopped
        by ``max_time``), the counters and the merge level reached.
    """
    regs = np.zeros(N_REGS, dtype=np.int64)
    regs[R_NB] = 1
    hv = np.empty(0, dtype=np.float64)
    hf = np.empty(0, dtype=np.int64)
    budget = _FIRST_SLICE_WORK if max_time is None else FIRST_BUDGET_SLICE_WORK
    with DeferredSignals() as held:
        state = beam_state(leaves, consts, width, use_cache)
        while True:
            started = time.perf_counter()
            hv, hf, history, steps, _ = beam_advance(leaves, consts, use_cache, state, regs, hv,
                                                      hf, min(budget, _MAX_SLICE_WORK))
            if regs[R_DONE]:
                return history, steps, state[-1], int(regs[R_LEVEL])
            held.deliver()
            budget = _next_budget(budget, int(regs[R_WORK]), time.perf_counter() - started,
                                  watch, max_time)
            if budget == 0:
                return None, None, state[-1], int(regs[R_LEVEL])


def _next_budget(budget: int, done: int, took: float, watch: Stopwatch,
                 max_time: float | None) -> int:
    """The work of the next slice: what takes about :data:`_SLICE_S` at the rate of the last one
    (under a ``max_time``, at most half of the time left); ``0`` once ``max_time`` has passed."""
    target = _SLICE_S
    if max_time is not None:
        left = max_time - watch.seconds()
        if left <= 0.0:
            return 0
        target = min(target, 0.5 * left)
    if took > 0.0 and done > 0:
        budget = int(min(max(done * target / took, 1000.0), 8.0 * max(done, budget)))
    return budget


def _add_greedy(
    leaves: np.ndarray,
    consts: np.ndarray,
    n: int,
    size: int,
    trees: list,
    lls: list[float],
    label: object,
) -> bool:
    """Put the greedy tree into the final beam (in place) if it is missing and ranks in it."""
    history, steps, _, _ = greedy_kernel(leaves, consts)
    g_tree, g_ll = canonical_result(history, steps, n, label)
    if len(lls) >= size and not g_ll > min(lls):
        return False
    for tree, ll in zip(trees, lls, strict=True):
        if ll == g_ll and tree == g_tree:  # equal trees have bit-equal canonical sums
            return False
    if len(lls) >= size:
        drop = len(lls) - 1 - int(np.argmin(np.asarray(lls)[::-1]))  # the last of the worst
        del trees[drop]
        del lls[drop]
    trees.append(g_tree)
    lls.append(g_ll)
    return True


def _budget_result(
    jet: Jet, leaves: np.ndarray, consts: np.ndarray, likelihood: str, options: dict[str, Any],
    counters: np.ndarray, level: int, use_cache: bool, watch: Stopwatch, max_time: float | None,
) -> ClusteringResult:
    """The result of a search stopped by ``max_time``: the greedy tree, ``status="budget"``."""
    n = leaves.shape[0]
    history, steps, _, _ = greedy_kernel(leaves, consts)
    tree, ll = canonical_result(history, steps, n, jet.label)
    greedy_res = ClusteringResult(tree=tree, log_likelihood=ll, algorithm="beam",
                                  likelihood=likelihood, options=dict(options), jet_id=jet.jet_id)
    stats = {
        "splits_evaluated": int(counters[0]),
        "candidates": int(counters[1]),
        "duplicates": int(counters[2]),
        "selection_passes": int(counters[3]),
        "beam_trees": 1,
        "pair_cache": bool(use_cache),
        "greedy_added": True,
        "levels_done": int(level),
        "time_s": watch.seconds(),
    }
    return ClusteringResult(
        tree=tree, log_likelihood=ll, algorithm="beam", likelihood=likelihood, options=options,
        stats=stats, beam=[greedy_res], status="budget", jet_id=jet.jet_id,
        message=(f"stopped by max_time={max_time:g} s after {stats['time_s']:.3g} s, at merge "
                 f"level {level} of {n - 1} (no complete tree in the beam yet); the tree is the "
                 "greedy tree"),
    )


def n_trees_capped(n: int, cap: int) -> int:
    """``(2n-3)!!`` (the number of trees over ``n`` leaves), or ``cap`` once it is exceeded."""
    out = 1
    for k in range(3, 2 * n - 2, 2):
        out *= k
        if out >= cap:
            return cap
    return out


def beam_memory(width: int, n: int, use_cache: bool = False) -> int:
    """Bytes the beam kernel allocates for ``width`` partial clusterings of ``n`` leaves (two
    buffers of states: 4-vectors, t, node, min, size, attempts, history, steps, scores; plus
    the pair cache)."""
    per_state = 2 * (n * 8 * (4 + 5) + max(n - 1, 1) * 8 * 3 + 8 * 3)
    cache = 2 * width * (n * (n - 1) // 2) * 8 if use_cache else 0
    return int(width) * per_state + cache


def _check_beam_memory(width: int, n: int, use_cache: bool, label: object) -> None:
    check_memory(
        beam_memory(width, n, use_cache), None, f"jet {label}",
        f"a beam of {width} states over {n} leaves", "use a smaller beam_size",
        detail=" of memory", option=None,
    )


def _check_beam_size(beam_size: object, n: int) -> int:
    if beam_size is None:
        return default_beam_size(n)
    if isinstance(beam_size, bool) or not isinstance(beam_size, numbers.Integral):
        raise ValueError(f"beam_size must be an integer >= 1 (or None), got {beam_size!r}")
    if beam_size < 1:
        raise ValueError(f"beam_size must be >= 1, got {beam_size}")
    return int(beam_size)


def beam_search(
    jet: Jet,
    beam_size: int | None = None,
    likelihood: str = "symmetric",
    greedy_guard: bool = True,
    max_time: float | None = None,
) -> ClusteringResult:
    """Beam search for the maximum-likelihood tree.

    The search runs in slices of work of about 0.1 s and returns to Python between them, so a
    Ctrl-C (``KeyboardInterrupt``) stops it within a slice and ``max_time`` holds whatever the
    size of the jet. Cutting the search into slices changes nothing in its result.

    Args:
        jet: the :class:`jetastar.Jet` to cluster.
        beam_size: number of distinct partial clusterings kept per level; ``None`` = the paper's
            default (``N(N-1)/2`` for ``N <= 40`` leaves, 1000 above).
        likelihood: ``"symmetric"`` (default) or ``"legacy"``.
        greedy_guard: add the greedy tree to the final beam when it is missing and would rank in
            it (replacing the worst tree if the beam is full); the result is then never worse than
            :func:`~jetastar.clustering.greedy`. ``False``: the plain beam search.
        max_time: run-time budget in seconds (``None``: none; compiling kernels does not count),
            checked between slices of work. A search stopped by it has no complete tree of its
            own: the result is the greedy tree with ``status="budget"``.

    Returns:
        A :class:`ClusteringResult` (``algorithm="beam"``) with the best tree of the final beam and
        ``beam``: every distinct complete tree of the final beam as its own result, best first (ties
        keep the beam order). ``stats`` has ``splits_evaluated``, ``candidates`` (merges ranked),
        ``duplicates`` (candidates dropped as an already kept partial clustering),
        ``selection_passes``, ``pair_cache``, ``greedy_added`` and ``time_s``.
        ``status="all_inf"`` when every tree of the final beam has log-likelihood ``-inf``.
        Stopped by ``max_time``: ``status="budget"``, the greedy tree (also the only entry of
        ``beam``), a message saying how far the search got and ``stats["levels_done"]`` (merge
        levels of the beam completed, of ``N - 1``).

    Raises:
        InvalidJetError: if ``jet`` is not a Jet.
        ValueError: for ``beam_size < 1``, a non-integer beam size, an unknown likelihood or a
            ``max_time`` that is not a positive number.

    Example:
        >>> from jetastar.ginkgo import ShowerParams, generate
        >>> jet = generate(1, ShowerParams.qcd(), seed=3)[0]
        >>> result = beam_search(jet, beam_size=10)
        >>> result.log_likelihood == result.beam[0].log_likelihood
        True
    """
    watch = Stopwatch()
    check_jet(jet, "beam search")
    max_time = check_budget(max_time, "max_time")
    leaves, consts = jet_arrays(jet, likelihood)
    n = leaves.shape[0]
    size = _check_beam_size(beam_size, n)
    # no level has more distinct partial clusterings than there are trees, (2N-3)!!
    width = min(size, n_trees_capped(n, size))
    npairs = n * (n - 1) // 2
    use_cache = 2 * width * npairs * 8 <= CACHE_BUDGET_BYTES
    _check_beam_memory(width, n, use_cache, jet.label)
    history, steps, counters, level = _run_beam(leaves, consts, width, use_cache, watch, max_time)
    options: dict[str, Any] = {"beam_size": size, "greedy_guard": bool(greedy_guard)}
    if max_time is not None:
        options["max_time"] = max_time
    if history is None or steps is None:
        return _budget_result(jet, leaves, consts, likelihood, options, counters, level,
                              use_cache, watch, max_time)
    trees, totals = canonical_results(history, steps, n, jet.label)
    lls = totals.tolist()
    added = False
    if greedy_guard:
        added = _add_greedy(leaves, consts, n, size, trees, lls, jet.label)
    order = np.argsort(-np.asarray(lls), kind="stable")
    beam = [
        ClusteringResult(
            tree=trees[q],
            log_likelihood=float(lls[q]),
            algorithm="beam",
            likelihood=likelihood,
            options=dict(options),
            jet_id=jet.jet_id,
        )
        for q in order
    ]
    best = beam[0]
    status, message = "ok", ""
    if not math.isfinite(best.log_likelihood):
        status = "all_inf"
        message = f"every tree of the final beam ({len(beam)} trees) has log-likelihood -inf"
    stats = {
        "splits_evaluated": int(counters[0]),
        "candidates": int(counters[1]),
        "duplicates": int(counters[2]),
        "selection_passes": int(counters[3]),
        "beam_trees": len(beam),
        "pair_cache": bool(use_cache),
        "greedy_added": added,
        "time_s": watch.seconds(),
    }
    return ClusteringResult(
        tree=best.tree,
        log_likelihood=best.log_likelihood,
        algorithm="beam",
        likelihood=likelihood,
        options=options,
        stats=stats,
        beam=beam,
        status=status,
        message=message,
        jet_id=jet.jet_id,
    )


# ---------------------------------------------------------------------- the columnar path
#: a jet whose beam needs more memory than this (a large ``beam_size``) goes to the per-jet
#: function (the chunk kernel's threads hold one beam each)
BEAM_CHUNK_MEMORY = 64 * 2**20
#: a jet whose search is estimated at more work units than this (``width · n³ / 6``, ~40 ns
#: each: about 0.5 s; the default beam at 40 leaves is 8.3 million) goes to the per-jet
#: function, which sees Ctrl-C every 0.1 s
BEAM_CHUNK_WORK = 12_500_000


class _BeamChunks(ChunkPath):
    """Beam search on the columnar path (:func:`~._beam_kernels.beam_chunk`): every jet of up to
    :data:`~._beam_kernels.BEAM_CHUNK_MAX` (40) leaves whose beam fits
    :data:`BEAM_CHUNK_MEMORY` and :data:`BEAM_CHUNK_WORK`, with the results of
    :func:`beam_search` (without ``beam``, the trees of the final beam)."""

    kernel_key = "columnar-beam"

    def options(self, options: Mapping[str, Any]) -> dict[str, Any] | None:
        """The options :func:`beam_search` runs with, as it checks them: ``likelihood``,
        ``beam_size`` (``None``: the default of each jet's size), ``greedy_guard`` (a bool) and
        ``max_time`` (a float or ``None``); ``None`` for a value it would refuse.

        With a ``max_time`` the chunk kernel stops each search after the work of the per-jet
        function's first slice (which that function always runs before it looks at the time): a
        jet finished within it has the result the per-jet function would give, the others are
        left to that function (:data:`~.chunks.PER_JET`), which goes on in slices until
        ``max_time``.
        """
        if set(options) - {"likelihood", "beam_size", "greedy_guard", "max_time"}:
            return None
        likelihood = options.get("likelihood", "symmetric")
        if likelihood not in LIKELIHOODS:
            return None
        size = options.get("beam_size")
        if size is not None and (isinstance(size, bool) or not isinstance(size, numbers.Integral)
                                 or size < 1):
            return None
        try:
            guard = bool(options.get("greedy_guard", True))
            max_time = check_budget(options.get("max_time"), "max_time")
        except (OptionError, ValueError, TypeError):
            return None
        return {"likelihood": likelihood, "beam_size": None if size is None else int(size),
                "greedy_guard": guard, "max_time": max_time}

    def run(self, opts: dict[str, Any], chunk: Chunk) -> ChunkResults:
        n = len(chunk)
        size, width, cache = _beam_plan(opts, chunk.counts)
        budget = 2**62 if opts["max_time"] is None else FIRST_BUDGET_SLICE_WORK
        children, leaf_of_node, ll, outcome, cnt, work = beam_chunk(
            chunk.leaves, chunk.loff, chunk.noff, chunk.which, chunk.consts, chunk.run, size,
            width, cache, opts["greedy_guard"], budget, chunk.threads)
        done = outcome == DONE
        node_offsets, ch, leaf = done_trees(done, chunk.sizes, chunk.noff, children,
                                            leaf_of_node)
        status, message = ok_rows(done)
        for i in np.flatnonzero(done & ~np.isfinite(ll)).tolist():
            status[i] = "all_inf"
            message[i] = (f"every tree of the final beam ({int(cnt[i, 4])} trees) has "
                          "log-likelihood -inf")
        counters: dict[str, np.ndarray] = {}
        if done.any():
            names = ("splits_evaluated", "candidates", "duplicates", "selection_passes",
                     "beam_trees", "pair_cache", "greedy_added")
            counters = {k: np.where(done, cnt[:, q], np.nan).astype(np.float64)
                        for q, k in enumerate(names)}
        options: dict[str, Any] = {"beam_size": opts["beam_size"],
                                   "greedy_guard": opts["greedy_guard"]}
        if opts["max_time"] is not None:
            options["max_time"] = opts["max_time"]
        return ChunkResults(
            algorithm="beam", likelihood=opts["likelihood"], options=options,
            collection=chunk.collection, outcome=outcome,
            log_likelihood=np.where(done, ll, np.nan), status=status, message=message,
            node_offsets=node_offsets, children=ch, leaf_of_node=leaf, counters=counters,
            work=np.where(done, work, 0).astype(np.float64), exact=np.zeros(n, dtype=bool),
            upper_bound=np.full(n, np.nan), row_options={"beam_size": size},
            rerun_options=rerun_options(opts["likelihood"], options,
                                        ("max_time", "beam_size", "greedy_guard")),
            flags=("pair_cache", "greedy_added"),
        )


def _beam_plan(opts: dict[str, Any], counts: np.ndarray) -> tuple[np.ndarray, ...]:
    """How beam search runs on each jet, as :func:`beam_search` decides it: ``(size, width,
    cache)``, each ``(J,)``; ``width`` is ``0`` for the jets left to the per-jet function (fewer
    than 2 or more than :data:`~._beam_kernels.BEAM_CHUNK_MAX` leaves, a beam over
    :data:`BEAM_CHUNK_MEMORY` or the memory limit, more than :data:`BEAM_CHUNK_WORK`)."""
    n_jets = counts.shape[0]
    size = np.zeros(n_jets, dtype=np.int64)
    width = np.zeros(n_jets, dtype=np.int64)
    cache = np.zeros(n_jets, dtype=np.bool_)
    limit = min(BEAM_CHUNK_MEMORY, default_memory_limit())
    for n in np.unique(counts).tolist():
        rows = counts == n
        s = default_beam_size(n) if opts["beam_size"] is None else int(opts["beam_size"])
        size[rows] = s
        if not 2 <= n <= BEAM_CHUNK_MAX:
            continue
        w = min(s, n_trees_capped(n, s))
        use_cache = 2 * w * (n * (n - 1) // 2) * 8 <= CACHE_BUDGET_BYTES
        if beam_memory(w, n, use_cache) > limit or w * n**3 / 6 > BEAM_CHUNK_WORK:
            continue
        width[rows] = w
        cache[rows] = use_cache
    return size, width, cache


def _estimate(n_leaves: int, options: Mapping[str, Any]) -> float:
    """A lower estimate of the seconds of one jet, at :data:`~.estimates.SPLITS_PER_S`: with the
    pair cache each level re-scores one row of pairs per state; without it every level scores
    every pair of every state, ``width n³ / 6`` evaluations, most of them cheap rejections
    (measured 5·10⁹ per second on jets whose trees are all impossible), counted at 1/100 of a
    full evaluation."""
    n = n_leaves
    size = options.get("beam_size")
    width = default_beam_size(n) if size is None else int(size)
    pairs = n * (n - 1) / 2
    if 2 * width * pairs * 8 <= CACHE_BUDGET_BYTES:
        return width * n * n / 10 / SPLITS_PER_S
    return width * n**3 / 600 / SPLITS_PER_S


#: beam search in the registry
BEAM = register(AlgorithmInfo(
    "beam", beam_search,
    description="beam search over partial clusterings, deduplicated on the set of clusters",
    aliases=("beam_search",),
    declared=(
        integer("beam_size", None, "distinct partial clusterings kept per level (None: N(N-1)/2 "
                "for N <= 40 leaves, 1000 above)", low=1, none=True),
        likelihood_option(),
        flag("greedy_guard", True, "add the greedy tree to the final beam where it would rank "
             "in it (never worse than greedy)"),
        number("max_time", None, "run-time budget in seconds (None: none); stopped early, the "
               "result is the greedy tree", low=0.0, low_open=True, none=True),
    ),
    family="search", chunk=_BeamChunks(), estimate=_estimate,
    # (compile CPU seconds measured 2026-11-27 on a 2-core machine, cold cache)
    warm_up=WarmUp(compile_s=17.5, order=0.1),
))
