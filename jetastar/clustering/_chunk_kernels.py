"""numba kernels of the columnar path: every jet of a chunk in one call (:mod:`.columnar`).

A chunk is a collection's flat columns: leaves ``(M, 4)`` with offsets ``loff`` ``(J + 1,)``,
likelihood constants ``consts`` ``(U, 2, 5)`` with the row ``which`` of each jet (``-1``: invalid
parameters), and node offsets ``noff`` (jet ``j``'s tree occupies ``2 n_j - 1`` rows from
``noff[j]``). :func:`cluster_chunk` runs each requested algorithm on each jet (jets in parallel,
each jet serially) with the very kernels of the per-jet functions (``greedy_kernel``,
``kt_history``, ``score_history``, ``canonical_into``), checks the leaves with the one leaf
validator (:func:`jetastar._columnar.jet_leaf_problem`) and sums the per-node values as numpy
does (:func:`~._agglomerative.numpy_sum`): trees and log-likelihoods are those of the per-jet
path, bit for bit. :func:`score_chunk` scores given flat trees (truth included) the same way as
:func:`jetastar.ginkgo.log_likelihood`.

Outcome codes per (algorithm, jet): :data:`DONE` (tree and value written), :data:`INVALID` (the
jet's leaves or parameters are invalid: no algorithm ran), :data:`PER_JET` (this algorithm needs
the per-jet path for this jet: a kt leaf without a rapidity, or beam recombinations at a small
``R``; the per-jet function words the error), :data:`NOT_RUN` (not requested for this jet). A jet with
invalid leaves or parameters is :data:`INVALID` for every algorithm, requested or not.

:func:`map_chunk` is the exact MAP engine (:func:`~jetastar.clustering.exact_map`) on every jet of
up to :data:`EXACT_CHUNK_MAX` leaves, one jet per thread: its tables, its size-by-size DP
(``solve_ranks``), its root split (``solve_cluster`` with the root constants and slack) and its
top-down reading of the arg-max splits, so trees, values and counters are those of the per-jet
engine.

:func:`trellis_chunk` is the full trellis (:func:`~jetastar.clustering.exact_trellis`: MAP, log Z,
tree count) on every jet of up to :data:`EXACT_CHUNK_MAX` leaves, one jet per thread: its tables,
its cluster solver (``dp_all_serial``: ``_solve_cluster`` on every cluster in mask order) and the
same top-down reading of the arg-max splits, so values, trees and counters are the trellis'.

:func:`beam_chunk` is beam search (:func:`~jetastar.clustering.beam_search`) on every jet of a
chunk, one jet per thread, with the kernels of the per-jet function (``beam_state``,
``beam_advance`` in one call, ``greedy_kernel`` for the greedy guard, ``canonical_into`` and
``numpy_sum`` for the trees of the final beam): the best tree, its value and the counters are
those of the per-jet function, bit for bit. The caller routes jets (a width of 0: :data:`PER_JET`).

:func:`mcts_chunk` is MCTS (:func:`~jetastar.clustering.mcts`) with deterministic rollouts on every
jet of a chunk, one jet per thread, with the per-jet function's search kernel (``mcts_run``: its
first slice of work, the whole search without a ``max_time``) and ``canonical_into`` /
``numpy_sum`` for the tree: trees, values and counters are the per-jet function's, bit for bit.

These four run in calls of bounded work (Ctrl-C is seen between calls); a parallel call deals its
jets to the threads by estimated cost, largest first (:func:`balanced_lists`), so that a thread is
not left alone with one large jet at the end of a call.
"""

from __future__ import annotations

from typing import Any

import numba as nb
import numpy as np

from .._columnar import jet_leaf_problem
from .._jit import DeferredSignals
from .._refcount import borrowed
from ..ginkgo.kernels import tree_postorder, tree_split_terms
from ..ginkgo.likelihood import SPACELIKE_TOLERANCE
from ._agglomerative import canonical_into, greedy_kernel, numpy_sum, score_history
from ._map_kernels import init_records, solve_cluster, solve_ranks, w_scale_of
from ._subsets import fill_subset_t, read_tree
from ._trellis_kernels import COUNT, GINKGO, LOG_Z, MAP, N_COLUMNS, T, dp_all_serial, init_leaves
from .beam import N_REGS, R_DONE, R_NB, R_WORK, beam_advance, beam_state
from .kt import kt_history, rapidity_problem
from .mcts import mcts_run

__all__ = [
    "ALG_ANTIKT",
    "ALG_CAMBRIDGE",
    "ALG_GREEDY",
    "ALG_KT",
    "BEAM_CHUNK_MAX",
    "BEAM_JET_WORK",
    "BEAM_SLICE_WORK",
    "DONE",
    "EXACT_CHUNK_MAX",
    "INVALID",
    "MAP_SLICE_SPLITS",
    "MCTS_SLICE_WORK",
    "NOT_RUN",
    "PER_JET",
    "SCORE_BAD_TREE",
    "SCORE_INVALID",
    "SCORE_NO_TREE",
    "SCORE_OK",
    "TRELLIS_SLICE_SPLITS",
    "balanced_lists",
    "beam_chunk",
    "cluster_chunk",
    "map_chunk",
    "mcts_chunk",
    "score_chunk",
    "search_outputs",
    "trellis_chunk",
]

#: algorithm codes (the kt family's exponent p is 2 - code: 1, 0, -1)
ALG_GREEDY, ALG_KT, ALG_CAMBRIDGE, ALG_ANTIKT = 0, 1, 2, 3

#: outcome codes of :func:`cluster_chunk`
DONE, INVALID, PER_JET, NOT_RUN = 0, 1, 2, 3

#: the largest jet whose exact MAP :func:`map_chunk` solves (larger ones: :data:`PER_JET`):
#: ``2**14`` clusters, 360 kB of tables per thread and a few ms per jet
EXACT_CHUNK_MAX = 14

#: the largest jet :func:`beam_chunk` runs beam search on (the caller sends larger ones to the
#: per-jet function): the default beam at 40 leaves is 780 states, ~16 MB and ~0.3 s per jet;
#: above 40 leaves the default beam is 1000 states and a jet takes seconds, where one call per
#: jet costs nothing in comparison and the per-jet function's slices see Ctrl-C and ``max_time``
BEAM_CHUNK_MAX = 40

#: status codes of :func:`score_chunk`
SCORE_OK, SCORE_INVALID, SCORE_NO_TREE, SCORE_BAD_TREE = 0, 1, 2, 3


@nb.njit(cache=True)
def _cluster_jet(j, leaves, loff, noff, which, consts, algs, run, r2, children, leaf_of_node,
                 ll, outcome, info, work, tol):  # pragma: no cover - numba
    """Every requested algorithm on jet ``j`` (see :func:`cluster_chunk`)."""
    # the chunk's arrays (held by the caller) as views without reference counts: the jet's
    # slices of them go to a dozen calls per jet (jetastar._refcount)
    leaves, consts, children, leaf_of_node = borrowed((leaves, consts, children, leaf_of_node))
    a = loff[j]
    b = loff[j + 1]
    n = b - a
    kind, _, _, _ = jet_leaf_problem(leaves, a, b, True, True, tol)
    if kind != 0 or which[0, j] < 0:
        for q in range(algs.shape[0]):
            outcome[q, j] = INVALID
        return
    lv = leaves[a:b]
    base = noff[j]
    m = 2 * n - 1
    for k in range(n):
        leaf_of_node[base + k] = k
    for k in range(n, m):
        leaf_of_node[base + k] = -1
    full = np.empty(m, dtype=np.float64)
    rap_bad = -2  # not computed yet
    for q in range(algs.shape[0]):
        if not run[q, j]:
            outcome[q, j] = NOT_RUN
            continue
        alg = algs[q]
        c = consts[which[q, j]]
        if alg == ALG_GREEDY:
            history, steps, all_inf_step, evals = greedy_kernel(lv, c)
            info[q, j] = all_inf_step
            work[q, j] = evals
        else:
            if rap_bad == -2:
                rap_bad = rapidity_problem(leaves, a, b)
            if rap_bad >= 0:
                outcome[q, j] = PER_JET
                continue
            history, beams, dist = kt_history(lv, np.int64(2 - alg), r2[q])
            if beams > 0:
                info[q, j] = beams
                outcome[q, j] = PER_JET
                continue
            steps = score_history(lv, c, history)
            info[q, j] = 0
            work[q, j] = dist + n - 1  # pair distances, then the splits scored
        canonical_into(history, steps, n, children[q, base:base + m], full)
        ll[q, j] = numpy_sum(full, 0, m)
        outcome[q, j] = DONE


@nb.njit(cache=True, parallel=True)
def _cluster_parallel(leaves, loff, noff, which, consts, algs, run, r2, children, leaf_of_node,
                      ll, outcome, info, work, tol):  # pragma: no cover - numba
    for j in nb.prange(loff.shape[0] - 1):
        # int64 as in the serial twin: prange's unsigned index would compile _cluster_jet twice
        _cluster_jet(np.int64(j), leaves, loff, noff, which, consts, algs, run, r2, children,
                     leaf_of_node, ll, outcome, info, work, tol)


@nb.njit(cache=True)
def _cluster_serial(leaves, loff, noff, which, consts, algs, run, r2, children, leaf_of_node,
                    ll, outcome, info, work, tol):  # pragma: no cover - numba
    """The serial twin (one thread: a parallel launch costs ~20-50 µs and, on a busy machine, a
    barrier wait of up to a scheduler slice, more than a small chunk's work)."""
    for j in range(loff.shape[0] - 1):
        _cluster_jet(j, leaves, loff, noff, which, consts, algs, run, r2, children, leaf_of_node,
                     ll, outcome, info, work, tol)


def cluster_chunk(
    leaves: np.ndarray, loff: np.ndarray, noff: np.ndarray, which: np.ndarray,
    consts: np.ndarray, algs: np.ndarray, run: np.ndarray, r2: np.ndarray, parallel: bool,
) -> tuple[np.ndarray, ...]:
    """Cluster every jet of a chunk with every requested algorithm, in one kernel call.

    Args:
        leaves: ``(M, 4)`` float64 C-contiguous.
        loff: ``(J + 1,)`` int64 leaf offsets.
        noff: ``(J + 1,)`` int64 node offsets (``2 n_j - 1`` rows per jet with ``n_j >= 1``).
        which: ``(A, J)`` int64 row of ``consts`` per algorithm (its likelihood form) and jet,
            ``-1`` for a jet with invalid parameters.
        consts: ``(U, 2, 5)`` float64 likelihood constants.
        algs: ``(A,)`` int64 algorithm codes.
        run: ``(A, J)`` bool: run algorithm ``q`` on jet ``j`` (size limits).
        r2: ``(A,)`` float64 ``R²`` of each kt-family algorithm (ignored for greedy).
        parallel: jets in parallel (numba's threads) or on this thread.

    Returns:
        ``(children (A, K, 2), leaf_of_node (K,), log_likelihood (A, J), outcome (A, J),
        info (A, J), work (A, J))``: ``info`` is greedy's first all-``-inf`` step (``-1``: none)
        or the kt beam recombinations; ``work`` counts split evaluations / pair distances.
    """
    n_jets = loff.shape[0] - 1
    n_algs = algs.shape[0]
    k_all = int(noff[-1])
    children = np.full((n_algs, k_all, 2), -1, dtype=np.int64)
    leaf_of_node = np.full(k_all, -1, dtype=np.int64)
    ll = np.full((n_algs, n_jets), np.nan)
    outcome = np.full((n_algs, n_jets), NOT_RUN, dtype=np.int64)
    info = np.full((n_algs, n_jets), -1, dtype=np.int64)
    work = np.zeros((n_algs, n_jets), dtype=np.int64)
    kernel = _cluster_parallel if parallel else _cluster_serial
    with DeferredSignals():  # Ctrl-C during the call: raised after it, not inside numba's return
        kernel(leaves, loff, noff, which, consts, algs, run, r2, children, leaf_of_node, ll,
               outcome, info, work, SPACELIKE_TOLERANCE)
    return children, leaf_of_node, ll, outcome, info, work


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
                   status, tol)  # int64 (see _cluster_parallel)


@nb.njit(cache=True)
def _score_serial(leaves, loff, children, leaf_of_node, noff, which, consts, out, status,
                  tol):  # pragma: no cover - numba
    """The serial twin of :func:`_score_parallel` (see :func:`_cluster_serial`)."""
    for j in range(loff.shape[0] - 1):
        _score_jet(j, leaves, loff, children, leaf_of_node, noff, which, consts, out, status, tol)


def score_chunk(
    leaves: np.ndarray, loff: np.ndarray, children: np.ndarray, leaf_of_node: np.ndarray,
    noff: np.ndarray, which: np.ndarray, consts: np.ndarray, parallel: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """Log-likelihood of one given tree per jet (internal momenta: sums of leaf momenta).

    Args:
        leaves, loff, consts: as in :func:`cluster_chunk`.
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
def _to_solve(j, leaves, loff, which, run, outcome, tol):  # pragma: no cover - numba
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


@nb.njit(cache=True)
def _small_to_solve(j, leaves, loff, which, run, outcome, tol):  # pragma: no cover - numba
    """The size of jet ``j`` when an exact engine of the chunk is to solve it (:func:`_to_solve`,
    2 to :data:`EXACT_CHUNK_MAX` leaves); else 0, with the outcome written (larger jets and jets
    of one leaf: :data:`PER_JET`)."""
    if not _to_solve(j, leaves, loff, which, run, outcome, tol):
        return 0
    n = loff[j + 1] - loff[j]
    if n < 2 or n > EXACT_CHUNK_MAX:
        outcome[j] = PER_JET
        return 0
    return n


@nb.njit(cache=True)
def _map_tree(best, n, children, base):  # pragma: no cover - numba
    """The MAP tree read top-down through the arg-max parts ``best``, numbered as
    ``tree_from_best`` numbers it, into ``children[base:base + 2n - 1]``."""
    read_tree(best, n, children, base, np.empty(2 * n, dtype=np.int64),
              np.empty(2 * n, dtype=np.int64), np.empty(2 * n, dtype=np.int64))


@nb.njit(cache=True)
def _map_jet(j, leaves, loff, noff, which, consts, slack, run, binom, children, ll, outcome,
             counts, tol):  # pragma: no cover - numba
    """The exact MAP of jet ``j`` (see :func:`map_chunk`)."""
    n = _small_to_solve(j, leaves, loff, which, run, outcome, tol)
    if n == 0:
        return
    a = loff[j]
    row = which[j]
    c = consts[row, 0]
    t_cut = c[0]
    legacy = c[4] != 0.0
    m = np.int64(1) << n
    full = m - 1
    rec = np.empty((m, 2), dtype=np.float64)
    wq = np.empty(m, dtype=np.int16)
    best = np.zeros(m, dtype=np.int32)
    fill_subset_t(leaves[a:a + n], c, rec[:, 0])
    leaf_t = np.empty(n, dtype=np.float64)
    for i in range(n):
        leaf_t[i] = rec[np.int64(1) << i, 0]
    scale = w_scale_of(leaf_t, c)
    init_records(n, rec, wq, best, c, scale)
    prune = np.bool_(True)
    for k in range(2, n):
        e, q, v, u, imp = solve_ranks(np.int64(k), np.int64(0), binom[n, k], binom, rec, wq, best,
                                      c, t_cut, legacy, prune, scale)
        counts[j, 0] += e
        counts[j, 1] += q
        counts[j, 2] += v
        counts[j, 3] += u
        counts[j, 4] += imp
    e, q, v, u = solve_cluster(full, rec, wq, best, consts[row, 1], t_cut, legacy, -np.inf,
                               slack[row], prune, scale)
    counts[j, 0] += e
    counts[j, 1] += q
    counts[j, 2] += v
    counts[j, 3] += u
    if rec[full, 1] == -np.inf:
        counts[j, 4] += 1
    ll[j] = rec[full, 1]
    _map_tree(best, n, children, noff[j])
    outcome[j] = DONE


@nb.njit(cache=True, parallel=True)
def _map_parallel(jobs, toff, leaves, loff, noff, which, consts, slack, run, binom, children, ll,
                  outcome, counts, tol):  # pragma: no cover - numba
    for t in nb.prange(toff.shape[0] - 1):
        for i in range(toff[t], toff[t + 1]):
            _map_jet(jobs[i], leaves, loff, noff, which, consts, slack, run, binom, children, ll,
                     outcome, counts, tol)


@nb.njit(cache=True)
def _map_serial(jobs, toff, leaves, loff, noff, which, consts, slack, run, binom, children, ll,
                outcome, counts, tol):  # pragma: no cover - numba
    """The serial twin of :func:`_map_parallel` (see :func:`_cluster_serial`)."""
    for i in range(jobs.shape[0]):
        _map_jet(jobs[i], leaves, loff, noff, which, consts, slack, run, binom, children, ll,
                 outcome, counts, tol)


#: splits (``(3**n + 1) / 2 - 2**n`` per jet) per kernel call of :func:`map_chunk`: ~0.1 s at
#: the measured ~20 ns per split of small jets, so that an interrupt is seen between calls
MAP_SLICE_SPLITS = 5_000_000


def map_chunk(
    leaves: np.ndarray, loff: np.ndarray, noff: np.ndarray, which: np.ndarray,
    consts: np.ndarray, slack: np.ndarray, run: np.ndarray, binom: np.ndarray, parallel: bool,
) -> tuple[np.ndarray, ...]:
    """The exact MAP of every jet of a chunk of up to :data:`EXACT_CHUNK_MAX` leaves, in kernel
    calls of about :data:`MAP_SLICE_SPLITS` splits each (a run of consecutive jets; at least one
    jet), with Ctrl-C held during a call and raised between calls
    (:class:`~jetastar._jit.DeferredSignals`); larger jets and jets of one leaf are
    :data:`PER_JET`.

    Args:
        leaves, loff, noff, consts: as in :func:`cluster_chunk`.
        which: ``(J,)`` int64 row of ``consts`` per jet (``-1``: invalid parameters).
        slack: ``(U,)`` float64 root slack of each constants row
            (:func:`~jetastar.clustering.exact_map.root_slack`).
        run: ``(J,)`` bool: jets to solve.
        binom: binomial table of at least :data:`EXACT_CHUNK_MAX` (``_map_kernels.binomials``).
        parallel: jets in parallel (numba's threads) or on this thread.

    Returns:
        ``(children (K, 2), log_likelihood (J,), outcome (J,), counts (J, 5))``: ``counts`` are
        the engine's splits enumerated, splits looked at, ψ evaluated, clusters unsplittable and
        clusters impossible.
    """
    n_jets = loff.shape[0] - 1
    children = np.full((int(noff[-1]), 2), -1, dtype=np.int64)
    ll = np.full(n_jets, np.nan)
    outcome = np.full(n_jets, NOT_RUN, dtype=np.int64)
    counts = np.zeros((n_jets, 5), dtype=np.int64)
    kernel = _map_parallel if parallel else _map_serial
    _run_in_slices(kernel, _exact_splits(loff, run), MAP_SLICE_SPLITS, parallel, leaves, loff,
                   noff, which, consts, slack, run, binom, children, ll, outcome, counts,
                   SPACELIKE_TOLERANCE)
    return children, ll, outcome, counts


@nb.njit(cache=True)
def _trellis_jet(j, leaves, loff, noff, which, consts, run, children, ll, log_z, n_trees, outcome,
                 counts, tol):  # pragma: no cover - numba
    """The full trellis of jet ``j`` (see :func:`trellis_chunk`)."""
    n = _small_to_solve(j, leaves, loff, which, run, outcome, tol)
    if n == 0:
        return
    a = loff[j]
    c = consts[which[j]]
    m = np.int64(1) << n
    full = m - 1
    node = np.empty((m, N_COLUMNS), dtype=np.float64)
    node_i = node.view(np.int64)
    best = np.zeros(m, dtype=np.int32)
    fill_subset_t(leaves[a:a + n], c[0], node[:, T])
    init_leaves(n, node, node_i, best, True)
    e, k, p = dp_all_serial(n, node, node_i, best, True, c, c[0, 0], c[0, 4] != 0.0, True,
                            GINKGO, np.zeros((1, 4), dtype=np.float64))
    counts[j, 0] = e
    counts[j, 1] = k
    counts[j, 2] = p
    impossible = 0
    for s in range(1, m):
        if node[s, MAP] == -np.inf:
            impossible += 1
    counts[j, 3] = impossible
    ll[j] = node[full, MAP]
    log_z[j] = node[full, LOG_Z]
    n_trees[j] = node_i[full, COUNT]
    _map_tree(best, n, children, noff[j])
    outcome[j] = DONE


@nb.njit(cache=True, parallel=True)
def _trellis_parallel(jobs, toff, leaves, loff, noff, which, consts, run, children, ll, log_z,
                      n_trees, outcome, counts, tol):  # pragma: no cover - numba
    for t in nb.prange(toff.shape[0] - 1):
        for i in range(toff[t], toff[t + 1]):
            _trellis_jet(jobs[i], leaves, loff, noff, which, consts, run, children, ll, log_z,
                         n_trees, outcome, counts, tol)


@nb.njit(cache=True)
def _trellis_serial(jobs, toff, leaves, loff, noff, which, consts, run, children, ll, log_z,
                    n_trees, outcome, counts, tol):  # pragma: no cover - numba
    """The serial twin of :func:`_trellis_parallel`."""
    for i in range(jobs.shape[0]):
        _trellis_jet(jobs[i], leaves, loff, noff, which, consts, run, children, ll, log_z,
                     n_trees, outcome, counts, tol)


#: splits per kernel call of :func:`trellis_chunk`: ~0.1 s at the measured ~45 ns per split
#: (every split is scored: ψ and a log-sum-exp term), so that an interrupt is seen between calls
TRELLIS_SLICE_SPLITS = 2_000_000


def trellis_chunk(
    leaves: np.ndarray, loff: np.ndarray, noff: np.ndarray, which: np.ndarray,
    consts: np.ndarray, run: np.ndarray, parallel: bool,
) -> tuple[np.ndarray, ...]:
    """The full trellis (:func:`~jetastar.clustering.exact_trellis`: MAP, log Z and the exact
    tree count) of every jet of a chunk of up to :data:`EXACT_CHUNK_MAX` leaves, one jet per
    thread, in kernel calls of about :data:`TRELLIS_SLICE_SPLITS` splits each, with Ctrl-C held
    during a call and raised between calls; larger jets and jets of one leaf are
    :data:`PER_JET`. Every cluster is solved by the trellis' own ``_solve_cluster`` (through
    ``dp_all_serial``), so values, trees and counters are those of the per-jet trellis.

    Args:
        leaves, loff, noff, consts, which, run, parallel: as in :func:`map_chunk`.

    Returns:
        ``(children (K, 2), log_likelihood (J,), log_z (J,), n_trees (J,) int64, outcome (J,),
        counts (J, 4))``: ``counts`` are the trellis' splits evaluated, splits skipped, clusters
        pruned and clusters impossible.
    """
    n_jets = loff.shape[0] - 1
    children = np.full((int(noff[-1]), 2), -1, dtype=np.int64)
    ll = np.full(n_jets, np.nan)
    log_z = np.full(n_jets, np.nan)
    n_trees = np.zeros(n_jets, dtype=np.int64)
    outcome = np.full(n_jets, NOT_RUN, dtype=np.int64)
    counts = np.zeros((n_jets, 4), dtype=np.int64)
    kernel = _trellis_parallel if parallel else _trellis_serial
    _run_in_slices(kernel, _exact_splits(loff, run), TRELLIS_SLICE_SPLITS, parallel, leaves, loff,
                   noff, which, consts, run, children, ll, log_z, n_trees, outcome, counts,
                   SPACELIKE_TOLERANCE)
    return children, ll, log_z, n_trees, outcome, counts


def _exact_splits(loff: np.ndarray, run: np.ndarray) -> np.ndarray:
    """The splits of each jet's trellis (``(3^n + 1) / 2 − 2^n``, 0 for the jets an exact engine's
    chunk kernel does not solve: not asked for, or not 2 to :data:`EXACT_CHUNK_MAX` leaves): the
    work measure of the exact engines' kernel calls."""
    sizes = np.diff(loff)
    solved = np.asarray(run, dtype=bool) & (sizes <= EXACT_CHUNK_MAX)
    n = np.where(solved, sizes, 0).astype(np.float64)
    return (3.0**n + 1.0) / 2.0 - 2.0**n


#: how many single-thread slices of work a parallel chunk kernel call takes per thread
#: (:func:`_run_in_slices`): with one slice per thread a call held one or two jets of 14 leaves,
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


def _run_in_slices(kernel: Any, cost: np.ndarray, per_call: float, parallel: bool,
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


# ---------------------------------------------------------------------- beam search
@nb.njit(cache=True)
def _beam_jet(j, leaves, loff, noff, which, consts, run, size, width, cache, guard, budget,
              children, leaf_of_node, ll, outcome, stats, work, tol):  # pragma: no cover - numba
    """Beam search on jet ``j`` (see :func:`beam_chunk`), as ``beam_search`` runs it."""
    if not _to_solve(j, leaves, loff, which, run, outcome, tol):
        return
    a = loff[j]
    b = loff[j + 1]
    n = b - a
    if width[j] <= 0:
        outcome[j] = PER_JET
        return
    lv = leaves[a:b]
    c = consts[which[j]]
    use_cache = cache[j]
    state = beam_state(lv, c, width[j], use_cache)
    regs = np.zeros(N_REGS, dtype=np.int64)
    regs[R_NB] = 1
    hv = np.empty(0, dtype=np.float64)
    hf = np.empty(0, dtype=np.int64)
    hv, hf, history, steps, _ = beam_advance(lv, c, use_cache, state, regs, hv, hf, budget)
    if regs[R_DONE] == 0:  # over the work cap (a max_time): the per-jet function goes on
        outcome[j] = PER_JET
        return
    counters = state[14]
    m = 2 * n - 1
    k = history.shape[0]
    # the final beam's trees (canonical) and exact totals, then the greedy tree in slot k
    ch = np.empty((k + 1, m, 2), dtype=np.int64)
    tot = np.empty(k + 1, dtype=np.float64)
    full = np.empty(m, dtype=np.float64)
    for q in range(k):
        canonical_into(history[q], steps[q], n, ch[q], full)
        tot[q] = numpy_sum(full, 0, m)
    slots = np.arange(k + 1)  # the beam's list: slot of each entry
    count = k
    added = False
    if guard:  # _add_greedy of beam.py
        g_hist, g_steps, _, _ = greedy_kernel(lv, c)
        canonical_into(g_hist, g_steps, n, ch[k], full)
        g_ll = numpy_sum(full, 0, m)
        tot[k] = g_ll
        full_beam = count >= size[j]
        worst = np.inf
        for q in range(count):
            if tot[q] < worst:
                worst = tot[q]
        add = not full_beam or g_ll > worst
        if add:
            for q in range(count):
                if tot[q] == g_ll:
                    same = True
                    for r in range(n, m):
                        if ch[q, r, 0] != ch[k, r, 0] or ch[q, r, 1] != ch[k, r, 1]:
                            same = False
                            break
                    if same:
                        add = False
                        break
        if add:
            if full_beam:  # the last of the worst leaves the beam
                drop = count - 1
                while tot[slots[drop]] != worst:
                    drop -= 1
                for q in range(drop, count - 1):
                    slots[q] = slots[q + 1]
                count -= 1
            slots[count] = k
            count += 1
            added = True
    # a stable sort by descending value puts the first of the best first
    best = slots[0]
    for q in range(1, count):
        if tot[slots[q]] > tot[best]:
            best = slots[q]
    base = noff[j]
    for r in range(m):
        children[base + r, 0] = ch[best, r, 0]
        children[base + r, 1] = ch[best, r, 1]
        leaf_of_node[base + r] = r if r < n else -1
    ll[j] = tot[best]
    for q in range(4):
        stats[j, q] = counters[q]
    stats[j, 4] = count
    stats[j, 5] = 1 if use_cache else 0
    stats[j, 6] = 1 if added else 0
    work[j] = regs[R_WORK]
    outcome[j] = DONE


@nb.njit(cache=True, parallel=True)
def _beam_parallel(jobs, toff, leaves, loff, noff, which, consts, run, size, width, cache, guard,
                   budget, children, leaf_of_node, ll, outcome, stats, work,
                   tol):  # pragma: no cover - numba
    for t in nb.prange(toff.shape[0] - 1):
        for i in range(toff[t], toff[t + 1]):
            _beam_jet(jobs[i], leaves, loff, noff, which, consts, run, size, width, cache, guard,
                      budget, children, leaf_of_node, ll, outcome, stats, work, tol)


@nb.njit(cache=True)
def _beam_serial(jobs, toff, leaves, loff, noff, which, consts, run, size, width, cache, guard,
                 budget, children, leaf_of_node, ll, outcome, stats, work,
                 tol):  # pragma: no cover - numba
    """The serial twin of :func:`_beam_parallel` (see :func:`_cluster_serial`)."""
    for i in range(jobs.shape[0]):
        _beam_jet(jobs[i], leaves, loff, noff, which, consts, run, size, width, cache, guard,
                  budget, children, leaf_of_node, ll, outcome, stats, work, tol)


#: estimated work units (candidates ranked, about ``width · n³ / 6`` per jet, plus
#: :data:`BEAM_JET_WORK`) per kernel call of :func:`beam_chunk`: ~0.1 s at the measured ~40 ns
#: per unit (QCD jets of 20 leaves; ~80 ns at 8 leaves, where a jet's fixed costs count), so that
#: an interrupt is seen between calls
BEAM_SLICE_WORK = 2_500_000
#: the fixed cost of a jet in :func:`beam_chunk`, in work units (measured ~180 µs per QCD jet of
#: ~8 leaves, whose ``width · n³ / 6`` is ~2000 units)
BEAM_JET_WORK = 2500


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


def beam_chunk(
    leaves: np.ndarray, loff: np.ndarray, noff: np.ndarray, which: np.ndarray,
    consts: np.ndarray, run: np.ndarray, size: np.ndarray, width: np.ndarray,
    cache: np.ndarray, guard: bool, budget: int, parallel: bool,
) -> tuple[np.ndarray, ...]:
    """Beam search on every jet of a chunk, in kernel calls of about :data:`BEAM_SLICE_WORK`
    estimated work each (a run of consecutive jets; at least one jet), with Ctrl-C held during a
    call and raised between calls.

    Args:
        leaves, loff, noff, consts: as in :func:`cluster_chunk`.
        which: ``(J,)`` int64 row of ``consts`` per jet (``-1``: invalid parameters).
        run: ``(J,)`` bool: jets to run.
        size: ``(J,)`` int64 beam size of each jet (the greedy guard's "full beam").
        width: ``(J,)`` int64 states kept per level (``min(size, (2n-3)!!)``); ``0``: leave the
            jet to the per-jet function (:data:`PER_JET`).
        cache: ``(J,)`` bool, the pair cache of each jet.
        guard: the greedy guard.
        budget: work units of the search (``beam_advance``'s budget): a jet not finished within
            it is :data:`PER_JET`.
        parallel: jets in parallel (numba's threads) or on this thread.

    Returns:
        ``(children (K, 2), leaf_of_node (K,), log_likelihood (J,), outcome (J,), stats (J, 7),
        work (J,))``: ``stats`` are the per-jet function's ``splits_evaluated``, ``candidates``,
        ``duplicates``, ``selection_passes``, ``beam_trees``, ``pair_cache`` and
        ``greedy_added``; ``work`` the search's work units.
    """
    children, leaf_of_node, ll, outcome, stats, work = search_outputs(loff, noff, 7)
    kernel = _beam_parallel if parallel else _beam_serial
    n = np.diff(loff).astype(np.float64)
    cost = width * n**3 / 6.0 + BEAM_JET_WORK  # estimated work of each jet
    _run_in_slices(kernel, cost, BEAM_SLICE_WORK, parallel, leaves, loff, noff, which,
                   consts, run, size, width, cache, bool(guard), np.int64(budget), children,
                   leaf_of_node, ll, outcome, stats, work, SPACELIKE_TOLERANCE)
    return children, leaf_of_node, ll, outcome, stats, work


# ---------------------------------------------------------------------- MCTS
@nb.njit(cache=True)
def _mcts_jet(j, leaves, loff, noff, which, consts, run, settings, rng, budget, children,
              leaf_of_node, ll, outcome, stats, work, tol):  # pragma: no cover - numba
    """MCTS on jet ``j`` (see :func:`mcts_chunk`), as ``mcts`` runs it (a valid jet has at least
    two leaves: ``_to_solve``)."""
    if not _to_solve(j, leaves, loff, which, run, outcome, tol):
        return
    a = loff[j]
    b = loff[j + 1]
    n = b - a
    history, steps, counters, finished, done_work = mcts_run(
        leaves[a:b], consts[which[j]], *settings, rng, budget)
    if not finished:  # over the work cap (a max_time): the per-jet function goes on
        outcome[j] = PER_JET
        return
    m = 2 * n - 1
    full = np.empty(m, dtype=np.float64)
    base = noff[j]
    canonical_into(history, steps, n, children[base:base + m], full)
    for r in range(m):
        leaf_of_node[base + r] = r if r < n else -1
    ll[j] = numpy_sum(full, 0, m)
    for q in range(4):
        stats[j, q] = counters[q]
    work[j] = done_work
    outcome[j] = DONE


@nb.njit(cache=True, parallel=True)
def _mcts_parallel(jobs, toff, leaves, loff, noff, which, consts, run, settings, rng, budget,
                   children, leaf_of_node, ll, outcome, stats, work,
                   tol):  # pragma: no cover - numba
    for t in nb.prange(toff.shape[0] - 1):
        for i in range(toff[t], toff[t + 1]):
            _mcts_jet(jobs[i], leaves, loff, noff, which, consts, run, settings, rng, budget,
                      children, leaf_of_node, ll, outcome, stats, work, tol)


@nb.njit(cache=True)
def _mcts_serial(jobs, toff, leaves, loff, noff, which, consts, run, settings, rng, budget,
                 children, leaf_of_node, ll, outcome, stats, work,
                 tol):  # pragma: no cover - numba
    """The serial twin of :func:`_mcts_parallel` (see :func:`_cluster_serial`)."""
    for i in range(jobs.shape[0]):
        _mcts_jet(jobs[i], leaves, loff, noff, which, consts, run, settings, rng, budget, children,
                  leaf_of_node, ll, outcome, stats, work, tol)


#: estimated work units per kernel call of :func:`mcts_chunk` (``columnar.mcts_work``): 0.1-0.3 s
#: at the measured ~20-50 ns per unit, so that an interrupt is seen between calls
MCTS_SLICE_WORK = 6_000_000


def mcts_chunk(
    leaves: np.ndarray, loff: np.ndarray, noff: np.ndarray, which: np.ndarray,
    consts: np.ndarray, run: np.ndarray, settings: tuple[Any, ...], estimate: np.ndarray,
    budget: int, parallel: bool,
) -> tuple[np.ndarray, ...]:
    """MCTS (:func:`~jetastar.clustering.mcts`, deterministic rollouts) on every jet of a chunk,
    in kernel calls of about :data:`MCTS_SLICE_WORK` estimated work each (a run of consecutive
    jets; at least one jet), with Ctrl-C held during a call and raised between calls.

    Args:
        leaves, loff, noff, consts: as in :func:`cluster_chunk`.
        which: ``(J,)`` int64 row of ``consts`` per jet (``-1``: invalid parameters).
        run: ``(J,)`` bool: jets to run.
        settings: the kernel settings of :func:`~jetastar.clustering.mcts.mcts_settings`
            (``rollout="greedy"``: the random generator is not used).
        estimate: ``(J,)`` estimated work units of each jet (how jets are cut into calls).
        budget: work units of a search (``mcts_run``'s budget): a jet not finished within it is
            :data:`PER_JET`.
        parallel: jets in parallel (numba's threads) or on this thread.

    Returns:
        ``(children (K, 2), leaf_of_node (K,), log_likelihood (J,), outcome (J,), stats (J, 4),
        work (J,))``: ``stats`` are the search's counters (trajectories, nodes, splits evaluated,
        beam nodes), ``work`` its work units.
    """
    if settings[8]:  # sampled rollouts
        raise ValueError("mcts_chunk runs deterministic rollouts only (rollout='greedy')")
    children, leaf_of_node, ll, outcome, stats, work = search_outputs(loff, noff, 4)
    kernel = _mcts_parallel if parallel else _mcts_serial
    rng = np.random.default_rng(0)  # not drawn from (deterministic rollouts)
    _run_in_slices(kernel, estimate.astype(np.float64), MCTS_SLICE_WORK, parallel,
                   leaves, loff, noff, which, consts, run, tuple(settings), rng, np.int64(budget),
                   children, leaf_of_node, ll, outcome, stats, work, SPACELIKE_TOLERANCE)
    return children, leaf_of_node, ll, outcome, stats, work
