"""Exact MAP hierarchy of a jet by a bound-pruned dynamic programme over all clusters.

A MAP needs no partition function, and most split likelihoods never need computing: for a parent
cluster ``P`` the DP wants ``V(P) = max over splits (A, B) of V(A) + V(B) + ψ(A, B)``, and ψ has a
cheap upper bound that separates into per-child terms (:func:`jetastar.ginkgo.likelihood.child_bound`,
``ψ <= G(tA) + G(tB) − log 4π`` in both likelihood forms). Each cluster stores
``W(S) = V(S) + G(S)`` next to ``V``; a split whose ``W(A) + W(B) − log 4π`` cannot beat the best
split of ``P`` found so far is skipped after two 2-byte reads (``W`` in fixed point, rounded up),
then a tighter bound (the exact first-child term plus ``G`` of the other child) filters again, and
ψ is computed for what is left — about 1–4 % of the splits of W and QCD jets at 16–22 leaves. The
skipping is exact by construction: every cluster gets the same value and the same arg-max split as
in the full trellis (:func:`jetastar.clustering.exact_trellis`).

What remains is the enumeration of the ``(3**n + 1)/2 − 2**n`` splits itself (clusters of one size
in parallel, ~1–2 ns per split per core), and 22 bytes per cluster (``2**n`` of them: 23 MB at 20
leaves, 370 MB at 24). The whole jet's split can also be bounded by an *incumbent* (a known tree):
root splits that cannot beat it are skipped, and if none can, the incumbent is the MAP.

Budgets: ``max_memory`` refuses a jet whose tables do not fit (:class:`TooLargeError`, before
allocating); ``max_time`` stops between slices of work (after the first) and returns the incumbent
(the greedy tree when none was given) with ``status="budget"`` and ``exact=False``.

Example:
    >>> from jetastar.ginkgo import ShowerParams, generate
    >>> from jetastar.clustering import exact_map, exact_trellis
    >>> jet = generate(1, ShowerParams.w(), seed=2, min_leaves=9, max_leaves=9)[0]
    >>> res = exact_map(jet)
    >>> res.exact, res.log_likelihood == exact_trellis(jet).log_likelihood
    (True, True)
    >>> res.stats["splits_evaluated"] < res.stats["splits_total"]
    True
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numba as nb
import numpy as np

from ..._cuda import resolve_device
from ..._jit import Stopwatch
from ..._progress import PER_JET_DELAY
from ...errors import InvalidJetError
from ...ginkgo.kernels import FORM_LEGACY
from ...ginkgo.likelihood import child_bound, log_likelihood, t_of
from ...jet import Jet
from ...tree import Tree
from .._engine import (
    bounded_likelihood,
    check_budget,
    check_memory,
    check_size,
    format_bytes,
    solving,
    tree_from_best,
)
from .._subsets import fill_subset_t, full_mask, n_splits_total
from ..agglomerative.greedy import greedy
from ..chunks import (
    DONE,
    NOT_RUN,
    Chunk,
    ChunkResults,
    done_column,
    done_trees,
    leaves_first,
    ok_rows,
    rerun_options,
)
from ..result import ClusteringResult
from ..threads import check_threads, parallel_worth_it
from . import _map_kernels as _k
from .gpu import GPU_MIN_LEAVES, solve_map_on_gpu

__all__ = [
    "ALL_INF_MESSAGE", "MAP_CPU_PER_SPLIT", "MAX_MAP_LEAVES", "estimate_map_memory", "exact_map",
    "exact_rows", "expected_map_cpu_seconds", "map_chunk_rows", "map_over_parts", "root_slack",
    "w_scale",
]

#: The message of an exact result whose every tree is impossible (``status="all_inf"``): the same
#: words from every exact engine (``exact_map``, the trellis on CPU and GPU, the columnar path).
ALL_INF_MESSAGE = ("every tree of this jet has likelihood zero (log-likelihood -inf); the tree "
                   "returned is an arbitrary one")

#: The registry key of the exact MAP engine (``cluster(jet, "trellis")`` runs it): the
#: ``algorithm`` of its results.
ALGORITHM = "trellis"
#: Hard limit of the layout (int32 arg-max masks).
MAX_MAP_LEAVES = 31
#: Most parts :func:`map_over_parts` takes (its tables: 54 bytes per cluster of parts, 0.9 GB).
_MAX_PARTS = 24
#: bytes per cluster: (t, V) float64, W int16 (fixed point), arg-max int32
_BYTES_PER_CLUSTER = 16 + 2 + 4
#: Seconds per byte of tables to allocate and fill them before the solver starts (2.5 ns measured
#: at 22-24 leaves on a busy 2-core node): a ``max_time`` that this alone exceeds stops at once.
_SETUP_SECONDS_PER_BYTE = 2.0e-9
#: ... unless the setup is this short (jets up to ~17 leaves)
_SETUP_ALWAYS = 0.01

#: Show a progress bar from this many leaves on when ``progress=None``.
_PROGRESS_FROM = 21
#: Work slices of about this fraction of all splits when a bar shows or a time budget is set.
_SLICE_FRACTION = 0.005
#: Splits per kernel call otherwise (at most; a cluster size of fewer splits is one call): ~0.25 s
#: of one thread at the ~6 ns per enumerated split of 22-leaf jets, so that Ctrl-C (seen between
#: calls) stops the engine within a second (one call per cluster size took up to 2.2 s at 22
#: leaves)
_CALL_SPLITS = 40_000_000
#: Parallel pieces per thread within one call (balances uneven clusters).
_PIECES_PER_THREAD = 16


def _budget_result(
    jet: Jet, likelihood: str, options: dict[str, Any], inc_tree: Tree | None,
    inc_ll: float | None, watch: Stopwatch, max_time: float | None, stats: dict[str, Any],
    why: str,
) -> ClusteringResult:
    """The result of a run stopped by ``max_time``: the incumbent (default the greedy tree)."""
    if inc_tree is None:
        inc_tree = greedy(jet, likelihood).tree
        inc_ll = log_likelihood(jet, inc_tree, likelihood)
    stats["time_s"] = watch.seconds()
    return ClusteringResult(
        tree=inc_tree, log_likelihood=inc_ll, algorithm=ALGORITHM, exact=False,
        likelihood=likelihood, options=options, stats=stats, status="budget",
        message=f"stopped by max_time={max_time:g} s after {stats['time_s']:.3g} s{why}; the tree "
                "is the incumbent, not proven optimal",
        jet_id=jet.jet_id,
    )


def estimate_map_memory(n_leaves: int) -> int:
    """Bytes :func:`exact_map` allocates for an ``n_leaves`` jet (peak, without Python overhead).

    Example:
        >>> estimate_map_memory(20) // 2**20
        22
    """
    return int((1 << n_leaves) * _BYTES_PER_CLUSTER + 4096 * 64)


def root_slack(consts: np.ndarray) -> float:
    """How much the root row's child bound ``G`` can exceed the inner row's, for both children.

    ``wq`` holds ``G`` of the inner row; a split of the whole jet (λ_R) adds this to its bounds
    (see :func:`jetastar.clustering.exact._map_kernels.solve_cluster`). ``G`` differs between the rows
    by a constant on each branch of its definition, so three probes cover it.

    Args:
        consts: :meth:`Jet.likelihood_constants` (rows 0 and 1).
    """
    probes = (0.0, float(consts[0, 0]), 2.0 * float(consts[0, 0]) + 1.0)
    delta = max(child_bound(t, consts[1]) - child_bound(t, consts[0]) for t in probes)
    return 2.0 * max(delta, 0.0)


def w_scale(leaf_t: np.ndarray, consts: np.ndarray) -> float:
    """The fixed-point scale of the ``W`` table: a power of two, 64 unless the jet needs less.

    ``W(S) = V(S) + G(S)`` is stored as ``ceil(W * scale)`` in int16. Values below the range are
    raised to its bottom (still upper bounds); values above it must never occur for a cluster that
    a split reads (every proper subset of the jet). An a-priori bound guarantees it: a possible
    cluster of two or more leaves has ``t`` above ``t_cut`` (``>=`` in the legacy form), so its
    ``G`` is at most ``Gc = N − 1 − log t_cut``; a leaf's ``G`` is at most the largest of the
    jet's leaves, ``G1``; and ``ψ <= G(tA) + G(tB) − log 4π`` gives ``V`` of a ``k``-cluster at
    most ``U_k = max_j U_j + U_{k−j} + g(j) + g(k−j) − log 4π`` (``U_1 = 0``, ``g(1) = G1``,
    ``g(j) = Gc`` otherwise). The scale halves until ``max_k U_k + g(k)`` (``k < n``) fits.
    For Ginkgo's parameters ``V <= 0`` and the largest ``W`` is a leaf's ``G``, about 0.

    Args:
        leaf_t: the leaves' ``t`` in the likelihood's convention.
        consts: :meth:`Jet.likelihood_constants` (row 0 is used inside the jet).

    Example:
        >>> from jetastar.ginkgo import ShowerParams, generate
        >>> jet = generate(1, ShowerParams.w(), seed=2, min_leaves=9, max_leaves=9)[0]
        >>> w_scale(jet.leaf_t, jet.likelihood_constants())
        64.0
    """
    c = np.ascontiguousarray(consts, dtype=np.float64)[0]
    return float(_k.w_scale_of(np.ascontiguousarray(leaf_t, dtype=np.float64), c))


def exact_map(
    jet: Jet,
    likelihood: str | None = None,
    *,
    max_time: float | None = None,
    max_memory: int | None = None,
    incumbent: Tree | ClusteringResult | None = None,
    prune: bool = True,
    threads: int | None = None,
    progress: bool | None = None,
    device: str | None = "auto",
) -> ClusteringResult:
    """The exact MAP hierarchy of a jet (no log Z): the fastest exact method in jetastar.

    Args:
        jet: a :class:`jetastar.Jet`.
        likelihood: ``"symmetric"`` (default) or ``"legacy"``.
        max_time: run-time budget in seconds (``None``: none; compiling kernels does not count).
            When it runs out the search stops and the incumbent is returned with
            ``status="budget"``.
        max_memory: memory limit in bytes (default: half the available memory).
        incumbent: a known tree (or a result holding one) of the jet: root splits that cannot beat
            it are skipped, and it is what a budget stop returns (default there: the greedy tree).
        prune: skip splits by their bounds (``False`` scores every split: same result, for checks).
        threads: numba threads (default: all).
        progress: tqdm progress bar (``True``); default: from 21 leaves on, once the jet has
            taken 10 s (loops over jets stay quiet).
        device: ``"cpu"``, ``"gpu"`` or ``"auto"`` (default: a GPU from
            :data:`~jetastar.clustering.exact.gpu.GPU_MIN_LEAVES` leaves on when one is usable). The GPU
            runs this engine's own bound-pruned per-cluster scan
            (:func:`~jetastar.clustering.exact.gpu.solve_map_on_gpu`): same tree and value;
            ``max_time`` is checked between its launches.

    Returns:
        :class:`ClusteringResult` with ``algorithm="trellis"`` (the registry key of this engine),
        ``exact=True``, the MAP ``tree`` and ``log_likelihood`` (``log_z`` is ``None``), and
        ``stats``: ``splits_total`` (all splits of all clusters), ``splits_enumerated`` (of the
        clusters that can split), ``splits_bound_passed`` (passed the ``W`` test),
        ``splits_evaluated`` (ψ computed), ``clusters_unsplittable``, ``clusters_impossible``,
        ``memory_bytes``, ``time_s``, ...
        Every tree impossible: ``status="all_inf"``, ``log_likelihood=-inf``, an arbitrary tree.

    Raises:
        InvalidJetError: not a :class:`jetastar.Jet`, or an incumbent over other leaves.
        ValueError: unknown likelihood, or a budget that is not a positive number.
        TooLargeError: the tables would not fit in ``max_memory`` (the message gives the estimate).
        GpuUnavailableError: ``device="gpu"`` where no GPU can be used.

    Example:
        >>> from jetastar.ginkgo import ShowerParams, generate
        >>> jet = generate(1, ShowerParams.qcd(), seed=5, min_leaves=8, max_leaves=8)[0]
        >>> res = exact_map(jet, likelihood="legacy")
        >>> res.algorithm, res.status, res.exact
        ('trellis', 'ok', True)
    """
    watch = Stopwatch()
    if not isinstance(jet, Jet):
        raise InvalidJetError(
            f"exact_map needs a jetastar.Jet, got {type(jet).__name__}", field="jet"
        )
    likelihood = bounded_likelihood(likelihood, "exact_map")
    max_time = check_budget(max_time, "max_time")
    max_memory = check_budget(max_memory, "max_memory", integer=True)
    threads = check_threads(threads)
    n = jet.n_leaves
    who = f"jet {jet.label}"
    on_gpu = n >= 2 and resolve_device(device, worth_it=n >= GPU_MIN_LEAVES) == "gpu"
    memory = _check_map_memory(n, who, max_memory)
    inc_tree, inc_ll = _incumbent(jet, incumbent, likelihood)
    options = {
        "likelihood": likelihood, "max_time": max_time, "max_memory": max_memory,
        "prune": bool(prune), "threads": threads, "incumbent": inc_tree is not None,
        "device": "gpu" if on_gpu else "cpu",
    }
    consts = jet.likelihood_constants(likelihood)
    setup = memory * _SETUP_SECONDS_PER_BYTE
    if max_time is not None and setup > max(max_time - watch.seconds(), _SETUP_ALWAYS):
        # allocating and filling the tables alone would overrun the budget (the solver checks the
        # time only once they are set up): stop now with the incumbent. Small tables are always
        # set up: a spent budget still runs one slice (warm-ups compile the DP that way)
        return _budget_result(jet, likelihood, options, inc_tree, inc_ll, watch, max_time,
                              {"memory_bytes": memory, "setup_estimate_s": setup},
                              f"; setting up the tables (~{setup:.2g} s) does not fit in it")
    solver = _MapSolver(jet.leaves, consts, threads)
    show = n >= _PROGRESS_FROM if progress is None else bool(progress)
    floor = -math.inf if inc_ll is None else inc_ll - _k.MARGIN * (1.0 + abs(inc_ll))
    if on_gpu:
        # the same tables and per-cluster functions, solved on the GPU
        finished, gpu_stats = solve_map_on_gpu(
            solver.rec, solver.wq, solver.best, solver.consts, solver.scale, floor=floor,
            root_slack=root_slack(solver.consts), prune=bool(prune), who=who,
            max_time=max_time, progress=show,
        )
        solver.stats.update(gpu_stats)
    else:
        delay = PER_JET_DELAY if progress is None else 0.0  # quiet in loops over jets
        finished = solver.solve(bool(prune), floor, show, watch, max_time, who, delay)
        solver.stats["device"] = "cpu"
    stats = solver.stats
    stats["memory_bytes"] = memory
    stats["time_s"] = watch.seconds()
    if not finished:
        return _budget_result(jet, likelihood, options, inc_tree, inc_ll, watch, max_time, stats,
                              "")
    value = solver.map_value()
    if inc_ll is not None and not value > -math.inf:
        # no tree beats the incumbent by more than the margin: the incumbent is a MAP tree
        tree, value = inc_tree, inc_ll
        stats["incumbent_is_map"] = True
    else:
        tree = solver.map_tree(jet.label)
    status, message = "ok", ""
    if value == -math.inf:
        status = "all_inf"
        message = ALL_INF_MESSAGE
    return ClusteringResult(
        tree=tree, log_likelihood=value, algorithm=ALGORITHM, exact=True,
        likelihood=likelihood, options=options, stats=stats, upper_bound=value, status=status,
        message=message, jet_id=jet.jet_id,
    )


def map_over_parts(
    jet: Jet,
    parts: Sequence[Sequence[int]],
    likelihood: str | None = None,
    *,
    whole_jet: bool | None = None,
    floor: float = -math.inf,
) -> tuple[float, Any]:
    """The exact best hierarchy over *parts* of a jet: disjoint groups of leaves kept whole.

    Each part is a fixed sub-cluster (its own hierarchy, if it has one, is not part of the problem):
    its 4-momentum is the sum of its leaves and its ``t`` is its squared mass, except that a single
    leaf has ``t = 0`` in the legacy form. This is the exact MAP engine on a jet whose leaves are the
    parts; the window search (:func:`jetastar.clustering.window_search`) solves windows of a tree
    this way (its kernel, without this function's Python overhead).

    Args:
        jet: a :class:`jetastar.Jet`.
        parts: ``k >= 1`` disjoint, non-empty sequences of leaf indices (at most 24 parts).
        likelihood: ``"symmetric"`` (default) or ``"legacy"``.
        whole_jet: whether the top split is the split of the whole jet (rate λ_R); default: when
            the parts cover every leaf.
        floor: only hierarchies worth at least this count (the value is ``-inf`` otherwise).

    Returns:
        ``(value, nested)``: the summed split log-likelihood of the best hierarchy over the parts
        (0 for a single part; ``-inf`` when none is possible or none reaches ``floor``) and the
        hierarchy as nested pairs of part indices (``None`` when the value is ``-inf``).

    Raises:
        InvalidJetError: not a Jet, or parts that are empty, overlap or name no leaf of the jet.
        ValueError: more than 24 parts, or an unknown likelihood.

    Example:
        >>> from jetastar.ginkgo import ShowerParams, generate
        >>> jet = generate(1, ShowerParams.qcd(), seed=5, min_leaves=6, max_leaves=6)[0]
        >>> value, nested = map_over_parts(jet, [[0], [1], [2], [3], [4], [5]])
        >>> abs(value - exact_map(jet).log_likelihood) < 1e-9
        True
    """
    if not isinstance(jet, Jet):
        raise InvalidJetError(
            f"map_over_parts needs a jetastar.Jet, got {type(jet).__name__}", field="jet"
        )
    likelihood = bounded_likelihood(likelihood, "map_over_parts")
    k = len(parts)
    if not 1 <= k <= _MAX_PARTS:
        raise ValueError(f"map_over_parts takes 1 .. {_MAX_PARTS} parts, got {k}")
    seen: set[int] = set()
    groups = []
    for j, part in enumerate(parts):
        idx = [int(i) for i in part]
        if not idx or any(not 0 <= i < jet.n_leaves for i in idx) or seen.intersection(idx) or (
            len(set(idx)) != len(idx)
        ):
            raise InvalidJetError(
                f"part {j} ({idx}) must be a non-empty set of leaf indices 0 .. "
                f"{jet.n_leaves - 1} that no other part holds", jet=jet.label, field="parts",
            )
        seen.update(idx)
        groups.append(idx)
    if whole_jet is None:
        whole_jet = len(seen) == jet.n_leaves
    consts = np.ascontiguousarray(jet.likelihood_constants(likelihood), dtype=np.float64)
    legacy = likelihood == "legacy"
    part_p = np.ascontiguousarray([jet.leaves[g].sum(axis=0) for g in groups], dtype=np.float64)
    part_t = np.array([0.0 if (legacy and len(g) == 1) else t_of(*row)
                       for g, row in zip(groups, part_p, strict=True)], dtype=np.float64)
    if k == 1:
        return (0.0 if 0.0 >= floor else -math.inf), (0 if 0.0 >= floor else None)
    m = 1 << k
    psum = np.empty((m, 4), dtype=np.float64)
    rec = np.empty((m, 2), dtype=np.float64)
    wq = np.empty(m, dtype=np.int16)
    best = np.zeros(m, dtype=np.int32)
    row = 1 if whole_jet else 0
    _k.solve_parts(part_p, part_t, psum, rec, wq, best, consts[0], consts[row],
                   root_slack(consts) if whole_jet else 0.0, float(floor))
    value = float(rec[m - 1, _k.V])
    if value == -math.inf:
        return value, None
    return value, _nested_from_best(best, m - 1)


def _nested_from_best(best: np.ndarray, mask: int) -> Any:
    """Nested pairs of part indices of the hierarchy over ``mask`` read through ``best``."""
    if mask & (mask - 1) == 0:
        return mask.bit_length() - 1
    a = int(best[mask])
    return (_nested_from_best(best, a), _nested_from_best(best, mask ^ a))


# ---------------------------------------------------------------------- internals
def _check_map_memory(n: int, who: str, max_memory: int | None) -> int:
    need = estimate_map_memory(n)
    advice = "use window_search or astar_approx"
    check_size(n, MAX_MAP_LEAVES, who, "leaves", "exact-MAP", f"dense tables: {format_bytes(need)}",
               advice)
    return check_memory(
        need, max_memory, who, f"the exact MAP of {n} leaves", advice,
        detail=" of dense tables (22 bytes per cluster; no sparse layout is implemented)",
    )


def _incumbent(
    jet: Jet, incumbent: Tree | ClusteringResult | None, likelihood: str
) -> tuple[Tree | None, float | None]:
    if incumbent is None:
        return None, None
    tree = incumbent.tree if isinstance(incumbent, ClusteringResult) else incumbent
    if not isinstance(tree, Tree) or tree.n_leaves != jet.n_leaves:
        raise InvalidJetError(
            f"the incumbent must be a Tree (or a result with one) over the jet's {jet.n_leaves} "
            f"leaves, got {incumbent!r}", jet=jet.label, field="incumbent",
        )
    return tree, log_likelihood(jet, tree, likelihood)


class _MapSolver:
    """The tables of one jet and the size-by-size DP over them."""

    def __init__(self, leaves: np.ndarray, consts: np.ndarray, threads: int | None) -> None:
        n = int(leaves.shape[0])
        m = 1 << n
        self.n = n
        self.full = full_mask(n)
        self.consts = np.ascontiguousarray(consts, dtype=np.float64)
        self.threads = threads
        watch = Stopwatch()
        self.rec = np.empty((m, 2), dtype=np.float64)
        self.wq = np.empty(m, dtype=np.int16)
        self.best = np.zeros(m, dtype=np.int32)
        fill_subset_t(np.ascontiguousarray(leaves, dtype=np.float64), self.consts[0], self.rec[:, _k.T])
        leaf_t = self.rec[np.left_shift(1, np.arange(n, dtype=np.int64)), _k.T]
        self.scale = w_scale(leaf_t, self.consts)
        _k.init_records(n, self.rec, self.wq, self.best, self.consts[0], self.scale)
        self.binom = _k.binomials(n)
        self.stats: dict[str, Any] = {"n_leaves": n, "clusters": m - 1,
                                      "time_setup_s": watch.seconds()}

    def solve(
        self, prune: bool, floor: float, show: bool, watch: Stopwatch | None,
        max_time: float | None, who: str, delay: float = 0.0,
    ) -> bool:
        """Run the DP; ``False`` when ``watch`` passed ``max_time`` (run time) first."""
        n = self.n
        c, t_cut = self.consts[0], float(self.consts[0, 0])
        legacy = bool(self.consts[0, 4] == FORM_LEGACY)
        clock = Stopwatch()
        counts = np.zeros(5, dtype=np.int64)
        total = n_splits_total(n)
        fine = show or max_time is not None
        finished = True
        with solving(self.threads, show, total, who, "exact MAP", delay) as bar:
            pieces = _PIECES_PER_THREAD * nb.get_num_threads()
            # splits per slice: ~0.5 % of the work, and under a max_time at most what takes 5 % of
            # it at the measured rate (a slice of a 22-leaf jet can take tenths of a second); never
            # more than _CALL_SPLITS (0.5 % of a 24-leaf jet is ~700 million splits, ~4 s of one thread)
            slice_splits = int(total * _SLICE_FRACTION)
            for k in range(2, n):
                per = (1 << (k - 1)) - 1
                n_k = int(self.binom[n, k])
                lo = 0
                while lo < n_k:
                    # the first slice always runs, so that even a spent budget compiles (or
                    # loads) the kernels: batch warm-ups pass a tiny max_time
                    if (max_time is not None and watch is not None and counts[0] > 0
                            and watch.seconds() > max_time):
                        finished = False
                        break
                    call = min(slice_splits, _CALL_SPLITS) if fine else _CALL_SPLITS
                    step = max(1, call // per)
                    hi = min(n_k, lo + step)
                    started = clock.seconds()
                    if parallel_worth_it((hi - lo) * per):
                        out = _k.solve_size(
                            k, lo, hi, min(pieces, hi - lo), self.binom, self.rec, self.wq,
                            self.best, c, t_cut, legacy, prune, self.scale,
                        )
                    else:
                        out = _k.solve_ranks(
                            k, lo, hi, self.binom, self.rec, self.wq, self.best, c, t_cut,
                            legacy, prune, self.scale,
                        )
                    counts += np.asarray(out, dtype=np.int64)
                    bar.update((hi - lo) * per)
                    took = clock.seconds() - started
                    if max_time is not None and watch is not None and took > 0.0:
                        left = max_time - watch.seconds()
                        target = min(0.05 * max_time, 0.5 * max(left, 0.0))
                        slice_splits = int(min(total * _SLICE_FRACTION,
                                               max(per, (hi - lo) * per / took * target)))
                    lo = hi
                if not finished:
                    break
            if finished and n >= 2:
                # the whole jet: root constants, the incumbent as the floor
                e, q, v, u = _k.solve_cluster(
                    self.full, self.rec, self.wq, self.best, self.consts[1], t_cut, legacy,
                    floor, root_slack(self.consts), prune, self.scale,
                )
                counts += np.array([e, q, v, u, int(self.rec[self.full, _k.V] == -np.inf)])
                bar.update((1 << (n - 1)) - 1)
        self.stats.update({
            "splits_total": total,
            "splits_enumerated": int(counts[0]),
            "splits_bound_passed": int(counts[1]),
            "splits_evaluated": int(counts[2]),
            "clusters_unsplittable": int(counts[3]),
            "clusters_impossible": int(counts[4]),
            "threads": self.threads or nb.get_num_threads(),
            "time_dp_s": clock.seconds(),
        })
        return finished

    def map_value(self) -> float:
        return float(self.rec[self.full, _k.V]) if self.n >= 2 else 0.0

    def map_tree(self, label: object) -> Tree:
        return tree_from_best(self.best, self.full, label)


# ---------------------------------------------------------------------- its cost
#: typical CPU seconds per split of the exact MAP engine (all threads; enumeration and bounds):
#: measured 2026 on W and QCD jets of 14-20 leaves, 2.3-3.0 ns (10 ms at 14, 64 ms at 16, 0.16 s at
#: 17, 0.35-0.5 s at 18, 3.4 s at 20 leaves), plus a fixed cost per call
MAP_CPU_PER_SPLIT = 2.5e-9
_MAP_CPU_FIXED = 2e-4
#: the largest jet whose split count (~3**n / 2) a float holds
_FLOAT_SPLITS_MAX = 600


def expected_map_cpu_seconds(n_leaves: int) -> float:
    """The typical CPU seconds (all threads) of :func:`exact_map` on a jet of ``n_leaves`` leaves:
    :data:`MAP_CPU_PER_SPLIT` per split of its trellis plus a fixed cost (fitted to measured
    times; no bound).

    Example:
        >>> expected_map_cpu_seconds(14) < 0.02 < 1.0 < expected_map_cpu_seconds(20)
        True
    """
    n = int(n_leaves)
    if n > _FLOAT_SPLITS_MAX:  # (3**n overflows a float: an exact MAP is out of reach anyway)
        return math.inf
    return _MAP_CPU_FIXED + MAP_CPU_PER_SPLIT * max(n_splits_total(n), 0)


# ---------------------------------------------------------------------- the columnar path
def map_chunk_rows(opts: dict[str, Any], chunk: Chunk) -> ChunkResults:
    """The exact MAP engine on the jets of a chunk of up to
    :data:`~._map_kernels.EXACT_CHUNK_MAX` (14) leaves (:func:`~._map_kernels.map_chunk`, one jet
    per thread), with the statuses, messages and counters of :func:`exact_map`: the chunk path of
    the registry's ``"trellis"`` (without ``log_z``) and of the window search's small jets.

    Args:
        opts: the options its results record (``likelihood``, ``max_time``, ``max_memory``,
            ``prune``, ``threads``, ``incumbent``, ``device``).
        chunk: the jets (larger ones and one-leaf jets: :data:`~.chunks.PER_JET`).
    """
    n = len(chunk)
    if n:
        slack = np.array([root_slack(chunk.consts[u]) for u in range(chunk.consts.shape[0])],
                         dtype=np.float64)
        children, ll, outcome, cnt = _k.map_chunk(
            chunk.leaves, chunk.loff, chunk.noff, chunk.which, chunk.consts, slack, chunk.run,
            _k.binomials(_k.EXACT_CHUNK_MAX), chunk.threads)
    else:
        children = np.full((0, 2), -1, dtype=np.int64)
        ll = np.full(0, np.nan)
        outcome = np.full(0, NOT_RUN, dtype=np.int64)
        cnt = np.zeros((0, 5), dtype=np.int64)
    done, node_offsets, ch, leaf, status, message, counters = exact_rows(
        opts, outcome, ll, chunk, children, estimate_map_memory, {
            "splits_enumerated": cnt[:, 0], "splits_bound_passed": cnt[:, 1],
            "splits_evaluated": cnt[:, 2], "clusters_unsplittable": cnt[:, 3],
            "clusters_impossible": cnt[:, 4]})
    return ChunkResults(
        algorithm=ALGORITHM, likelihood=opts["likelihood"], options=dict(opts),
        collection=chunk.collection, outcome=outcome, log_likelihood=np.where(done, ll, np.nan),
        status=status, message=message, node_offsets=node_offsets, children=ch,
        leaf_of_node=leaf, counters=counters,
        work=np.where(done, cnt[:, 0] + chunk.counts, 0).astype(np.float64), exact=done.copy(),
        upper_bound=np.where(done, ll, np.nan), stats={"device": "cpu"},
        rerun_options=rerun_options(opts["likelihood"], opts,
                                    ("max_time", "max_memory", "threads")),
    )


def exact_rows(
    opts: dict[str, Any], outcome: np.ndarray, ll: np.ndarray, chunk: Chunk,
    children: np.ndarray, memory_of: Any, columns: dict[str, np.ndarray],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
           dict[str, np.ndarray]]:
    """What the rows of the exact engines' chunk kernels (the MAP engine, the full trellis)
    share: ``(done, node_offsets, children, leaf_of_node, status, message, counters)``, with the
    trees of the :data:`~.chunks.DONE` rows, ``"all_inf"`` where every tree is impossible, and
    the counters both give (``n_leaves``, ``clusters``, ``splits_total``, ``memory_bytes`` by
    ``memory_of(n)``, ``threads``) followed by the engine's own ``columns`` (name -> per-row
    values); no counter when no row is done."""
    done = outcome == DONE
    counts = chunk.counts
    node_offsets, ch, leaf = done_trees(done, chunk.sizes, chunk.noff, children,
                                        leaves_first(counts, chunk.noff))
    status, message = ok_rows(done)
    impossible = done & ~(ll > -np.inf)
    status[impossible] = "all_inf"
    message[impossible] = ALL_INF_MESSAGE
    counters: dict[str, np.ndarray] = {}
    if done.any():
        per_size = range(_k.EXACT_CHUNK_MAX + 1)
        total = np.array([n_splits_total(k) for k in per_size], dtype=np.float64)
        memory = np.array([memory_of(k) for k in per_size], dtype=np.float64)
        small = np.minimum(counts, _k.EXACT_CHUNK_MAX)
        threads = opts["threads"] or nb.get_num_threads()
        counters = {
            "n_leaves": done_column(done, counts),
            "clusters": done_column(done, 2.0 ** small - 1),
            "splits_total": done_column(done, total[small]),
            "memory_bytes": done_column(done, memory[small]),
            "threads": done_column(done, np.full(outcome.shape[0], threads)),
        }
        counters.update({name: done_column(done, values) for name, values in columns.items()})
    return done, node_offsets, ch, leaf, status, message, counters
