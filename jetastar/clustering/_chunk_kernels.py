"""What the chunk kernels of the columnar path share (:mod:`~jetastar.clustering.chunks`): every
jet of a chunk in one call.

A chunk is a collection's flat columns: leaves ``(M, 4)`` with offsets ``loff`` ``(J + 1,)``,
likelihood constants ``consts`` ``(U, 2, 5)`` with the row ``which`` of each jet (``-1``: invalid
parameters), and node offsets ``noff`` (jet ``j``'s tree occupies ``2 n_j - 1`` rows from
``noff[j]``). Each algorithm with a chunk path has its chunk kernel beside its own kernels (the
greedy and kt family's in :mod:`._merge_chunk`, the exact engines' in :mod:`._map_kernels` and
:mod:`._trellis_kernels`, beam search's in :mod:`._beam_kernels`, MCTS's in
:mod:`._mcts_kernels`); they run the very kernels of the per-jet functions, check the leaves with
the one leaf validator (:func:`jetastar._columnar.jet_leaf_problem`, through :func:`to_solve`)
and sum the per-node values as numpy does (:func:`~._agglomerative.numpy_sum`): trees and
log-likelihoods are those of the per-jet path, bit for bit. Here: the outcome codes, the check
every kernel starts a jet with, the slicing of a chunk into calls of bounded work
(:func:`run_in_slices`, Ctrl-C seen between calls; a parallel call deals its jets to the threads
by estimated cost, largest first, :func:`balanced_lists`), and :func:`score_chunk`, which scores
given flat trees (truth included) as :func:`jetastar.ginkgo.log_likelihood` does.

Outcome codes per (algorithm, jet): :data:`DONE` (tree and value written), :data:`INVALID` (the
jet's leaves or parameters are invalid: no algorithm ran), :data:`PER_JET` (this algorithm needs
the per-jet path for this jet; the per-jet function words the error or goes on), :data:`NOT_RUN`
(not requested for this jet). A jet with invalid leaves or parameters is :data:`INVALID` for
every algorithm, requested or not.
"""

from __future__ import annotations

from typing import Any

import numba as nb
import numpy as np

from .._columnar import jet_leaf_problem
from .._jit import DeferredSignals
from ..ginkgo.kernels import tree_postorder, tree_split_terms
from ..ginkgo.likelihood import SPACELIKE_TOLERANCE
from ._merges import numpy_sum

__all__ = [
    "DONE",
    "INVALID",
    "NOT_RUN",
    "PARALLEL_SLICES",
    "PER_JET",
    "SCORE_BAD_TREE",
    "SCORE_INVALID",
    "SCORE_NO_TREE",
    "SCORE_OK",
    "balanced_lists",
    "run_in_slices",
    "score_chunk",
    "search_outputs",
    "to_solve",
]

#: outcome codes of the chunk kernels
DONE, INVALID, PER_JET, NOT_RUN = 0, 1, 2, 3

#: status codes of :func:`score_chunk`
SCORE_OK, SCORE_INVALID, SCORE_NO_TREE, SCORE_BAD_TREE = 0, 1, 2, 3


@nb.njit(cache=True)
def _score_jet(j, leaves, loff, children, leaf_of_node, noff, which, consts, out, status,
               tol):  # pragma: no cover - numba
    """Log-likelihood of jet ``j``'s tree (see :func:`score_chunk`)."""
    la = loff[j]
    n = loff[j + 1] - la
    a = noff[j]
    m = noff[j + 1] - a
    kind, _, _, _ = jet_leaf_problem(leaves, la, la + n, True, True, tol)
    if kind != 0 or which[j] < 0:
        status[j] = SCORE_INVALID
        return
    if m == 0:
        status[j] = SCORE_NO_TREE
        return
    root, order = tree_postorder(children, leaf_of_node, a, m, n)
    if root < 0:
        status[j] = SCORE_BAD_TREE
        return
    full = np.zeros(m, dtype=np.float64)
    tree_split_terms(leaves, la, children, leaf_of_node, a, order, root, consts[which[j]], full)
    out[j] = numpy_sum(full, 0, m)
    status[j] = SCORE_OK


@nb.njit(cache=True, parallel=True)
def _score_parallel(leaves, loff, children, leaf_of_node, noff, which, consts, out, status,
                    tol):  # pragma: no cover - numba
    for j in nb.prange(loff.shape[0] - 1):
        _score_jet(np.int64(j), leaves, loff, children, leaf_of_node, noff, which, consts, out,
                   status, tol)  # int64: prange's unsigned index would compile _score_jet twice


@nb.njit(cache=True)
def _score_serial(leaves, loff, children, leaf_of_node, noff, which, consts, out, status,
                  tol):  # pragma: no cover - numba
    """The serial twin of :func:`_score_parallel` (one thread: a parallel launch costs more than
    a small chunk's work)."""
    for j in range(loff.shape[0] - 1):
        _score_jet(j, leaves, loff, children, leaf_of_node, noff, which, consts, out, status, tol)


def score_chunk(
    leaves: np.ndarray, loff: np.ndarray, children: np.ndarray, leaf_of_node: np.ndarray,
    noff: np.ndarray, which: np.ndarray, consts: np.ndarray, parallel: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """Log-likelihood of one given tree per jet (internal momenta: sums of leaf momenta).

    Args:
        leaves, loff, consts: as in the chunk kernel of greedy
            (:func:`~jetastar.clustering.agglomerative._merge_chunk.cluster_chunk`).
        which: ``(J,)`` int64 row of ``consts`` per jet (``-1``: invalid parameters).
        children: ``(K, 2)`` int64, ``leaf_of_node`` ``(K,)`` int64 and ``noff`` ``(J + 1,)``:
            the trees (local node ids; 0 nodes: no tree).
        parallel: jets in parallel or on this thread.

    Returns:
        ``(log_likelihood, status)``, each ``(J,)``: the value (NaN unless ``status`` is
        :data:`SCORE_OK`) and a ``SCORE_*`` code.
    """
    n_jets = loff.shape[0] - 1
    out = np.full(n_jets, np.nan)
    status = np.full(n_jets, SCORE_OK, dtype=np.int64)
    kernel = _score_parallel if parallel else _score_serial
    with DeferredSignals():
        kernel(leaves, loff, children, leaf_of_node, noff, which, consts, out, status,
               SPACELIKE_TOLERANCE)
    return out, status


@nb.njit(cache=True, inline="always")
def to_solve(j, leaves, loff, which, run, outcome, tol):  # pragma: no cover - numba
    """Whether jet ``j`` of a one-algorithm chunk kernel is to be solved; a jet with bad leaves
    or parameters gets :data:`INVALID`, one not asked for :data:`NOT_RUN` (and ``False``)."""
    kind, _, _, _ = jet_leaf_problem(leaves, loff[j], loff[j + 1], True, True, tol)
    if kind != 0 or which[j] < 0:
        outcome[j] = INVALID
        return False
    if not run[j]:
        outcome[j] = NOT_RUN
        return False
    return True


#: how many single-thread slices of work a parallel chunk kernel call takes per thread
#: (:func:`run_in_slices`): with one slice per thread a call held one or two jets of 14 leaves,
#: and the second thread sat idle
PARALLEL_SLICES = 4


@nb.njit(cache=True)
def balanced_lists(cost: np.ndarray,
                   n_lists: int) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - numba
    """Jobs ``0 .. len(cost) - 1`` dealt into ``n_lists`` lists of about equal total cost, largest
    job first, each to the list with the least cost so far (longest processing time first; the
    lowest list wins ties, so the deal is deterministic).

    Returns:
        ``(jobs, offsets)``: list ``t`` is ``jobs[offsets[t]:offsets[t + 1]]``, in the order dealt.
    """
    n = cost.shape[0]
    order = np.argsort(-cost, kind="mergesort")
    load = np.zeros(n_lists, dtype=np.float64)
    owner = np.empty(n, dtype=np.int64)
    offsets = np.zeros(n_lists + 1, dtype=np.int64)
    for i in range(n):
        t = 0
        for u in range(1, n_lists):
            if load[u] < load[t]:
                t = u
        load[t] += cost[order[i]]
        owner[i] = t
        offsets[t + 1] += 1
    for t in range(n_lists):
        offsets[t + 1] += offsets[t]
    fill = offsets[:-1].copy()
    jobs = np.empty(n, dtype=np.int64)
    for i in range(n):
        jobs[fill[owner[i]]] = order[i]
        fill[owner[i]] += 1
    return jobs, offsets


def run_in_slices(kernel: Any, cost: np.ndarray, per_call: float, parallel: bool,
                   *args: Any) -> None:
    """``kernel(jobs, offsets, *args)`` over runs of consecutive jets of about ``per_call`` units
    of work each (at least one jet; ``cost[j]``: the estimated work of jet ``j``), with Ctrl-C
    held during a call and raised between calls (:class:`~jetastar._jit.DeferredSignals`).

    A serial kernel gets the run's jets in order (``offsets`` is one list). A ``parallel`` kernel
    gets :data:`PARALLEL_SLICES` times as much work per thread per call, dealt into one list per
    thread by :func:`balanced_lists` (each thread runs its list), so that no thread is left
    finishing a large jet alone at the end of a call."""
    n_threads = nb.get_num_threads()
    if parallel:
        per_call *= PARALLEL_SLICES * n_threads
    n_jets = cost.shape[0]
    done_before = np.cumsum(cost)  # the work of jets 0 .. j
    with DeferredSignals() as held:
        lo = 0
        while lo < n_jets:
            start = done_before[lo - 1] if lo else 0.0
            hi = int(np.searchsorted(done_before, start + per_call, side="right"))
            hi = min(max(hi, lo + 1), n_jets)
            if parallel:
                jobs, offsets = balanced_lists(cost[lo:hi], n_threads)
                jobs += lo
            else:
                jobs = np.arange(lo, hi, dtype=np.int64)
                offsets = np.array([0, hi - lo], dtype=np.int64)
            kernel(jobs, offsets, *args)
            held.deliver()
            lo = hi


def search_outputs(loff: np.ndarray, noff: np.ndarray,
                   n_stats: int) -> tuple[np.ndarray, ...]:
    """The output arrays of a search's chunk kernel (:func:`beam_chunk`, :func:`mcts_chunk`), as
    they are before any jet is run: ``(children (K, 2), leaf_of_node (K,), log_likelihood (J,),
    outcome (J,) all NOT_RUN, stats (J, n_stats), work (J,))``."""
    n_jets = loff.shape[0] - 1
    k_all = int(noff[-1])
    return (np.full((k_all, 2), -1, dtype=np.int64), np.full(k_all, -1, dtype=np.int64),
            np.full(n_jets, np.nan), np.full(n_jets, NOT_RUN, dtype=np.int64),
            np.zeros((n_jets, n_stats), dtype=np.int64), np.zeros(n_jets, dtype=np.int64))

