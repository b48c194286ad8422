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
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .._columnar import jet_leaf_problem
from ..ginkgo.kernels import tree_postorder, tree_split_terms
from ..ginkgo.likelihood import SPACELIKE_TOLERANCE
from ._agglomerative import canonical_into, greedy_kernel, numpy_sum, score_history
from .kt import kt_history, rapidity_problem

__all__ = [
    "ALG_ANTIKT",
    "ALG_CAMBRIDGE",
    "ALG_GREEDY",
    "ALG_KT",
    "DONE",
    "INVALID",
    "NOT_RUN",
    "PER_JET",
    "SCORE_BAD_TREE",
    "SCORE_INVALID",
    "SCORE_NO_TREE",
    "SCORE_OK",
    "cluster_chunk",
    "score_chunk",
]

#: algorithm codes (the kt family's exponent p is 2 - code: 1, 0, -1)
ALG_GREEDY, ALG_KT, ALG_CAMBRIDGE, ALG_ANTIKT = 0, 1, 2, 3

#: outcome codes of :func:`cluster_chunk`
DONE, INVALID, PER_JET, NOT_RUN = 0, 1, 2, 3

#: status codes of :func:`score_chunk`
SCORE_OK, SCORE_INVALID, SCORE_NO_TREE, SCORE_BAD_TREE = 0, 1, 2, 3


@nb.njit(cache=True)
def _cluster_jet(j, leaves, loff, noff, which, consts, algs, run, r2, children, leaf_of_node,
                 ll, outcome, info, work, tol):  # pragma: no cover - numba
    """Every requested algorithm on jet ``j`` (see :func:`cluster_chunk`)."""
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
            history, beams = kt_history(lv, np.int64(2 - alg), r2[q])
            if beams > 0:
                info[q, j] = beams
                outcome[q, j] = PER_JET
                continue
            steps = score_history(lv, c, history)
            info[q, j] = 0
            work[q, j] = (n * n * n - n) // 6 + n - 1  # pair distances, then the splits scored
        canonical_into(history, steps, n, children[q, base:base + m], full)
        ll[q, j] = numpy_sum(full, 0, m)
        outcome[q, j] = DONE


@nb.njit(cache=True, parallel=True)
def _cluster_parallel(leaves, loff, noff, which, consts, algs, run, r2, children, leaf_of_node,
                      ll, outcome, info, work, tol):  # pragma: no cover - numba
    for j in nb.prange(loff.shape[0] - 1):
        _cluster_jet(j, leaves, loff, noff, which, consts, algs, run, r2, children, leaf_of_node,
                     ll, outcome, info, work, tol)


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
    kernel(leaves, loff, noff, which, consts, algs, run, r2, children, leaf_of_node, ll, outcome,
           info, work, SPACELIKE_TOLERANCE)
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
        _score_jet(j, leaves, loff, children, leaf_of_node, noff, which, consts, out, status, tol)


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
    kernel(leaves, loff, children, leaf_of_node, noff, which, consts, out, status,
           SPACELIKE_TOLERANCE)
    return out, status
