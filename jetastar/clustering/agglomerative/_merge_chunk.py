"""The chunk kernel of greedy and the kt family (:mod:`.greedy`, :mod:`.kt`): every jet of a
chunk in one call, with the very kernels of the per-jet functions (``greedy_kernel``,
``kt_history``, ``score_history``, ``canonical_into``), so that trees and log-likelihoods are
those of the per-jet path, bit for bit.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numba as nb
import numpy as np

from ..._columnar import jet_leaf_problem
from ..._jit import DeferredSignals
from ..._refcount import borrowed
from ...ginkgo.likelihood import LIKELIHOODS, SPACELIKE_TOLERANCE
from .._chunk_kernels import DONE, INVALID, NOT_RUN, PER_JET
from .._merges import canonical_into, greedy_kernel, numpy_sum, score_history
from ..chunks import (
    PARALLEL_FROM,
    SHORT_CHUNK_SIZE,
    Chunk,
    ChunkPath,
    ChunkResults,
    done_trees,
    ok_rows,
    rerun_options,
)
from ._kt_kernels import kt_history, rapidity_problem

__all__ = ["ALG_ANTIKT", "ALG_CAMBRIDGE", "ALG_GREEDY", "ALG_KT", "MergeChunks", "cluster_chunk"]

#: algorithm codes (the kt family's exponent p is 2 - code: 1, 0, -1)
ALG_GREEDY, ALG_KT, ALG_CAMBRIDGE, ALG_ANTIKT = 0, 1, 2, 3


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


class MergeChunks(ChunkPath):
    """The chunk path of greedy and the kt family: :func:`cluster_chunk`, one call per chunk and
    algorithm (the algorithm's code selects it in the kernel). Subclassed next to each
    algorithm's code, which words its rows (:meth:`finish`).

    Args:
        name: the algorithm's registry name.
        code: its code in the kernel (:data:`ALG_GREEDY`, ...).
        radius: it takes the option ``R`` (the kt family).
    """

    kernel_key = "columnar"
    #: the shared kernel, serial and parallel, with the per-jet kernels it calls (measured
    #: 2026-11-27 on the 2-core machine, cold cache)
    compile_s = 14.0
    parallel_from = PARALLEL_FROM
    chunk_size = SHORT_CHUNK_SIZE

    def __init__(self, name: str, code: int, radius: bool) -> None:
        self.name = name
        self.code = int(code)
        self.radius = bool(radius)

    def options(self, options: Mapping[str, Any]) -> dict[str, Any] | None:
        """``likelihood`` (and ``R`` for the kt family), or ``None`` for any other option or a
        bad value.

        Example:
            >>> from jetastar.clustering import algorithm_info
            >>> kt, greedy = algorithm_info("kt").chunk, algorithm_info("greedy").chunk
            >>> kt.options({"R": 1000}), greedy.options({"R": 1})
            ({'likelihood': 'symmetric', 'R': 1000.0}, None)
        """
        allowed = {"likelihood", "R"} if self.radius else {"likelihood"}
        if set(options) - allowed:
            return None
        likelihood = options.get("likelihood", "symmetric")
        if likelihood not in LIKELIHOODS:
            return None
        out: dict[str, Any] = {"likelihood": likelihood}
        if self.radius:
            try:
                radius = float(options.get("R", 1000.0))
            except (TypeError, ValueError):
                return None
            if not (math.isfinite(radius) and radius > 0.0):
                return None
            out["R"] = radius
        return out

    def run(self, opts: dict[str, Any], chunk: Chunk) -> ChunkResults:
        n_jets = len(chunk)
        k_all = int(chunk.noff[-1])
        if n_jets == 0:
            children = np.full((1, k_all, 2), -1, dtype=np.int64)
            leaf_of_node = np.full(k_all, -1, dtype=np.int64)
            ll = np.full((1, n_jets), np.nan)
            outcome = np.full((1, n_jets), NOT_RUN, dtype=np.int64)
            info = np.full((1, n_jets), -1, dtype=np.int64)
            work = np.zeros((1, n_jets), dtype=np.int64)
        else:
            children, leaf_of_node, ll, outcome, info, work = cluster_chunk(
                chunk.leaves, chunk.loff, chunk.noff, np.ascontiguousarray(chunk.which[None]),
                chunk.consts, np.array([self.code], dtype=np.int64),
                np.ascontiguousarray(chunk.run[None]),
                np.array([opts.get("R", 1.0) ** 2], dtype=np.float64), chunk.threads)
        ll, outcome, info, work = ll[0], outcome[0], info[0], work[0]
        done = outcome == DONE
        node_offsets, ch, leaf = done_trees(done, chunk.sizes, chunk.noff, children[0],
                                            leaf_of_node)
        status, message = ok_rows(done)
        options, counters = self.finish(opts, done, ll, info, chunk.counts, work, status,
                                        message)
        return ChunkResults(
            algorithm=self.name, likelihood=opts["likelihood"], options=options,
            collection=chunk.collection, outcome=outcome,
            log_likelihood=np.where(done, ll, np.nan), status=status, message=message,
            node_offsets=node_offsets, children=ch, leaf_of_node=leaf, counters=counters,
            work=np.where(done, work, 0).astype(np.float64), exact=np.zeros(n_jets, dtype=bool),
            upper_bound=np.full(n_jets, np.nan),
            rerun_options=rerun_options(opts["likelihood"], options, ("R",)),
        )

    def finish(self, opts: dict[str, Any], done: np.ndarray, ll: np.ndarray, info: np.ndarray,
               counts: np.ndarray, work: np.ndarray, status: np.ndarray,
               message: np.ndarray) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """The rows as the per-jet function words them: its statuses and messages (written into
        ``status`` and ``message``), and ``(options, counters)`` of its results.

        Args:
            opts: the path's options.
            done: ``(J,)`` the :data:`DONE` rows.
            ll, info, counts, work: the kernel's values, first all-``-inf`` steps (greedy),
                leaves and work per jet.
            status, message: the rows' statuses and messages (``"ok"`` / ``""`` so far).
        """
        raise NotImplementedError
