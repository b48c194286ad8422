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
from typing import Any

import numba as nb
import numpy as np

from .._jit import DeferredSignals, Stopwatch
from .._refcount import borrowed
from .._sorting import argsort_stable
from ..ginkgo.likelihood import t_of
from ..jet import Jet
from ._agglomerative import (
    canonical_result,
    canonical_results,
    check_jet,
    greedy_kernel,
    jet_arrays,
    leaf_ts,
    pair_llh,
)
from ._engine import check_budget, check_memory
from .registry import register
from .result import ClusteringResult

__all__ = ["beam_search", "default_beam_size"]

#: Above this many bytes for the two pair caches, pairs are re-evaluated instead of cached.
CACHE_BUDGET_BYTES = 512 * 1024**2

_GOLD = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


def default_beam_size(n_leaves: int) -> int:
    """The paper's beam size: ``N(N-1)/2`` for ``N <= 40`` leaves, 1000 above (at least 1)."""
    if n_leaves <= 40:
        return max(1, n_leaves * (n_leaves - 1) // 2)
    return 1000


# ---------------------------------------------------------------------- numba kernels
@nb.njit(cache=True)
def _mix(leaf, code):  # pragma: no cover - numba
    """splitmix64 of the pair (leaf, attach code)."""
    x = (np.uint64(leaf) << np.uint64(32)) ^ np.uint64(code + 1)
    x = x + _GOLD
    x = (x ^ (x >> np.uint64(30))) * _MIX1
    x = (x ^ (x >> np.uint64(27))) * _MIX2
    return x ^ (x >> np.uint64(31))


@nb.njit(cache=True)
def _heap_less(v1, f1, v2, f2):  # pragma: no cover - numba
    """Order of the min-heap: worse score first; on equal scores the later candidate is worse."""
    return v1 < v2 or (v1 == v2 and f1 > f2)


@nb.njit(cache=True)
def _sift_down(hv, hf, size, i):  # pragma: no cover - numba
    while True:
        left = 2 * i + 1
        if left >= size:
            return
        child = left
        right = left + 1
        if right < size and _heap_less(hv[right], hf[right], hv[left], hf[left]):
            child = right
        if _heap_less(hv[child], hf[child], hv[i], hf[i]):
            hv[i], hv[child] = hv[child], hv[i]
            hf[i], hf[child] = hf[child], hf[i]
            i = child
        else:
            return


@nb.njit(cache=True)
def _sift_up(hv, hf, i):  # pragma: no cover - numba
    while i > 0:
        parent = (i - 1) // 2
        if _heap_less(hv[i], hf[i], hv[parent], hf[parent]):
            hv[i], hv[parent] = hv[parent], hv[i]
            hf[i], hf[parent] = hf[parent], hf[i]
            i = parent
        else:
            return


@nb.njit(cache=True)
def _same_child(att, n, b1, hi1, code1, b2, hi2, code2):  # pragma: no cover - numba
    """Whether two candidate children (parent, changed leaf, new code) are the same state."""
    for leaf in range(n):
        x = code1 if leaf == hi1 else att[b1, leaf]
        y = code2 if leaf == hi2 else att[b2, leaf]
        if x != y:
            return False
    return True


#: registers of a beam search between slices (an int64 array the kernel reads and updates)
R_LEVEL, R_NB, R_PREV_DUPS, R_CUR, R_PHASE, R_B, R_HS, R_KSEL, R_DONE, R_WORK = range(10)
N_REGS = 10


@nb.njit(cache=True)
def beam_state(leaves, consts, beam_size, use_cache):  # pragma: no cover - numba
    """The state of a beam search before its first level: the leaves as the one partial
    clustering, in buffer 0 of the double-buffered state arrays (see :func:`beam_advance`).

    Returns:
        ``(sp, st, snode, smin, ssize, att, hsh, hist, stp, score, smax, tri, pa, pc,
        counters)``: the per-state arrays with a leading axis of 2 (the current and the next
        beam), the pair index tables and the counters.
    """
    n = leaves.shape[0]
    bmax = beam_size
    c0 = consts[0]
    npairs = n * (n - 1) // 2
    pa = np.empty(max(npairs, 1), dtype=np.int64)
    pc = np.empty(max(npairs, 1), dtype=np.int64)
    for c in range(1, n):
        for a in range(c):
            idx = c * (c - 1) // 2 + a
            pa[idx] = a
            pc[idx] = c
    ncache = npairs if use_cache else 1
    bcache = bmax if use_cache else 1
    sp = np.empty((2, bmax, n, 4), dtype=np.float64)
    st = np.empty((2, bmax, n), dtype=np.float64)
    snode = np.empty((2, bmax, n), dtype=np.int64)
    smin = np.empty((2, bmax, n), dtype=np.int64)
    ssize = np.empty((2, bmax, n), dtype=np.int64)
    att = np.empty((2, bmax, n), dtype=np.int64)
    hsh = np.zeros((2, bmax), dtype=np.uint64)
    hist = np.empty((2, bmax, max(n - 1, 1), 2), dtype=np.int64)
    stp = np.empty((2, bmax, max(n - 1, 1)), dtype=np.float64)
    score = np.empty((2, bmax), dtype=np.float64)
    smax = np.full((2, bmax), np.inf, dtype=np.float64)  # best pair of each state (cache mode)
    tri = np.empty((2, bcache, ncache), dtype=np.float64)
    counters = np.zeros(4, dtype=np.int64)
    lt = leaf_ts(leaves, c0)
    for i in range(n):  # loops, not slice assignments: much less to compile
        for d in range(4):
            sp[0, 0, i, d] = leaves[i, d]
        st[0, 0, i] = lt[i]
        snode[0, 0, i] = i
        smin[0, 0, i] = i
        ssize[0, 0, i] = 1
        att[0, 0, i] = -1
    score[0, 0] = 0.0
    if use_cache and n > 2:
        best = -np.inf
        for idx in range(npairs):
            v = pair_llh(sp[0, 0], st[0, 0], pa[idx], pc[idx], c0)
            tri[0, 0, idx] = v
            best = max(best, v)
        smax[0, 0] = best
        counters[0] += npairs
    return sp, st, snode, smin, ssize, att, hsh, hist, stp, score, smax, tri, pa, pc, counters


@nb.njit(cache=True)
def beam_advance(leaves, consts, use_cache, state, regs, hv, hf, budget):  # pragma: no cover
    """Run a beam search (state from :func:`beam_state`) on until it ends or has done about
    ``budget`` units of work (split evaluations or candidates ranked), whichever comes first.

    The search pauses only between two states of a selection pass (after at least one state of
    this call), so that a run cut into any number of calls does exactly the work of one call, in
    the same order: the results are bit for bit those of an uninterrupted run. ``regs`` (int64,
    ``_R_*``) holds where it stands: the level, the size of the beam, the duplicates of the last
    level, which buffer holds the current beam, whether a selection pass is under way (and at
    which state, with how many candidates in its heap ``hv`` / ``hf`` of capacity ``k_sel``),
    whether the search is done, and the work of the last call.

    Returns:
        ``(hv, hf, history, steps, score)``: the heap to pass to the next call; once done
        (``regs[R_DONE] == 1``) the final beam, best first (complete trees as merge
        histories, split log-likelihoods and totals; empty arrays before).
    """
    # the state's arrays, the constants rows and the heap as views without reference counts for
    # the calls per candidate (split scores, heap moves; see jetastar._refcount): the caller
    # holds the state and the constants, and the heap's owners are returned after the last use
    sp_all, st_all, snode_all, smin_all, ssize_all, att_all, hsh_all, hist_all, stp_all, \
        score_all, smax_all, tri_all, pa, pc, counters = borrowed(state)
    n = leaves.shape[0]
    bmax = sp_all.shape[1]
    c0 = borrowed(consts[0])
    c1 = borrowed(consts[1])
    hv_v = borrowed(hv)
    hf_v = borrowed(hf)
    level = regs[R_LEVEL]
    nb_ = regs[R_NB]
    prev_dups = regs[R_PREV_DUPS]
    cur = regs[R_CUR]
    phase = regs[R_PHASE]
    b0 = regs[R_B]
    hs = regs[R_HS]
    k_sel = regs[R_KSEL]
    work = np.int64(0)
    none_hist = np.empty((0, max(n - 1, 1), 2), dtype=np.int64)
    none_steps = np.empty((0, max(n - 1, 1)), dtype=np.float64)
    none_score = np.empty(0, dtype=np.float64)

    while level < n - 1:
        if phase == 0 and work >= budget and work > 0:  # pause between two levels
            regs[R_LEVEL] = level
            regs[R_NB] = nb_
            regs[R_PREV_DUPS] = prev_dups
            regs[R_CUR] = cur
            regs[R_PHASE] = phase
            regs[R_WORK] = work
            return hv, hf, none_hist, none_steps, none_score
        nxt = 1 - cur
        sp = sp_all[cur]
        st = st_all[cur]
        snode = snode_all[cur]
        smin = smin_all[cur]
        ssize = ssize_all[cur]
        att = att_all[cur]
        hsh = hsh_all[cur]
        hist = hist_all[cur]
        stp = stp_all[cur]
        score = score_all[cur]
        smax = smax_all[cur]
        tri = tri_all[cur]
        m = n - level
        if m == 2:
            # final merge: root constants; distinct parents give distinct complete trees
            total = np.empty(nb_, dtype=np.float64)
            psi = np.empty(nb_, dtype=np.float64)
            for b in range(nb_):
                psi[b] = pair_llh(sp[b], st[b], np.int64(0), np.int64(1), c1)
                total[b] = score[b] + psi[b]
            counters[0] += nb_
            counters[1] += nb_
            order = argsort_stable(-total)
            out_hist = np.empty((nb_, n - 1, 2), dtype=np.int64)
            out_steps = np.empty((nb_, n - 1), dtype=np.float64)
            out_score = np.empty(nb_, dtype=np.float64)
            for q in range(nb_):
                b = order[q]
                for k in range(n - 2):
                    out_hist[q, k, 0] = hist[b, k, 0]
                    out_hist[q, k, 1] = hist[b, k, 1]
                    out_steps[q, k] = stp[b, k]
                out_hist[q, n - 2, 0] = snode[b, 0]
                out_hist[q, n - 2, 1] = snode[b, 1]
                out_steps[q, n - 2] = psi[b]
                out_score[q] = total[b]
            regs[R_DONE] = 1
            regs[R_LEVEL] = level + 1
            regs[R_WORK] = work + nb_
            return hv, hf, out_hist, out_steps, out_score

        npair = m * (m - 1) // 2
        ntotal = nb_ * npair
        if phase == 0:
            # room for the duplicates seen at the previous level, so one pass is usually enough
            k_sel = min(ntotal, bmax + 2 * prev_dups + 8)
            b0 = -1
            phase = 1
        while True:
            if b0 < 0:  # a new selection pass
                counters[3] += 1
                hv = np.empty(k_sel, dtype=np.float64)
                hf = np.empty(k_sel, dtype=np.int64)
                hv_v = borrowed(hv)
                hf_v = borrowed(hf)
                hs = np.int64(0)  # int64, not a literal: one specialisation of its callees
                b0 = 0
            for b in range(b0, nb_):
                if work >= budget and b > b0:
                    regs[R_LEVEL] = level
                    regs[R_NB] = nb_
                    regs[R_PREV_DUPS] = prev_dups
                    regs[R_CUR] = cur
                    regs[R_PHASE] = phase
                    regs[R_B] = b
                    regs[R_HS] = hs
                    regs[R_KSEL] = k_sel
                    regs[R_WORK] = work
                    return hv, hf, none_hist, none_steps, none_score
                base = b * npair
                s = score[b]
                if hs == k_sel and not _heap_less(hv[0], hf[0], s + smax[b], base):
                    work += 1
                    continue  # no merge of this state can enter the heap
                counters[1] += npair
                work += npair
                for idx in range(npair):
                    if use_cache:
                        v = s + tri[b, idx]
                    else:
                        v = s + pair_llh(sp[b], st[b], pa[idx], pc[idx], c0)
                    f = base + idx
                    if hs < k_sel:
                        hv[hs] = v
                        hf[hs] = f
                        _sift_up(hv_v, hf_v, hs)
                        hs += 1
                    elif _heap_less(hv[0], hf[0], v, f):
                        hv[0] = v
                        hf[0] = f
                        _sift_down(hv_v, hf_v, hs, 0)
            if not use_cache:
                counters[0] += ntotal
            # best first: by score descending, then candidate order
            o1 = argsort_stable(hf[:hs].astype(np.float64))
            o2 = argsort_stable(-hv[:hs][o1])
            order = o1[o2]
            work += hs
            tsize = 4
            while tsize < 2 * hs:
                tsize *= 2
            table = np.full(tsize, -1, dtype=np.int64)
            acc_b = np.empty(bmax, dtype=np.int64)
            acc_idx = np.empty(bmax, dtype=np.int64)
            acc_hi = np.empty(bmax, dtype=np.int64)
            acc_code = np.empty(bmax, dtype=np.int64)
            acc_h = np.empty(bmax, dtype=np.uint64)
            acc_v = np.empty(bmax, dtype=np.float64)
            nacc = 0
            dups = 0
            for r in range(hs):
                f = hf[order[r]]
                b = f // npair
                idx = f - b * npair
                a = pa[idx]
                c = pc[idx]
                la = smin[b, a]
                lc = smin[b, c]
                lo = min(la, lc)
                hi = max(la, lc)
                code = lo * (n + 1) + ssize[b, a] + ssize[b, c]
                h = hsh[b] + _mix(hi, code)
                slot = np.int64(h & np.uint64(tsize - 1))
                dup = False
                while table[slot] != -1:
                    q = table[slot]
                    if acc_h[q] == h and _same_child(
                        att, n, b, hi, code, acc_b[q], acc_hi[q], acc_code[q]
                    ):
                        dup = True
                        break
                    slot = (slot + 1) & (tsize - 1)
                if dup:
                    dups += 1
                    continue
                table[slot] = nacc
                acc_b[nacc] = b
                acc_idx[nacc] = idx
                acc_hi[nacc] = hi
                acc_code[nacc] = code
                acc_h[nacc] = h
                acc_v[nacc] = hv[order[r]]
                nacc += 1
                if nacc == bmax:
                    break
            if nacc == bmax or k_sel >= ntotal:
                counters[2] += dups
                prev_dups = dups
                break
            k_sel = min(ntotal, 2 * k_sel)
            b0 = -1

        # build the next beam
        sp2 = sp_all[nxt]
        st2 = st_all[nxt]
        snode2 = snode_all[nxt]
        smin2 = smin_all[nxt]
        ssize2 = ssize_all[nxt]
        att2 = att_all[nxt]
        hsh2 = hsh_all[nxt]
        hist2 = hist_all[nxt]
        stp2 = stp_all[nxt]
        score2 = score_all[nxt]
        smax2 = smax_all[nxt]
        tri2 = tri_all[nxt]
        node = n + level
        mm = m - 1
        for q in range(nacc):
            b = acc_b[q]
            idx = acc_idx[q]
            a = pa[idx]
            c = pc[idx]
            for s in range(mm):
                src = m - 1 if s == c else s
                for d in range(4):
                    sp2[q, s, d] = sp[b, src, d]
                st2[q, s] = st[b, src]
                snode2[q, s] = snode[b, src]
                smin2[q, s] = smin[b, src]
                ssize2[q, s] = ssize[b, src]
            for d in range(4):
                sp2[q, a, d] = sp[b, a, d] + sp[b, c, d]
            st2[q, a] = t_of(sp2[q, a, 0], sp2[q, a, 1], sp2[q, a, 2], sp2[q, a, 3])
            snode2[q, a] = node
            smin2[q, a] = min(smin[b, a], smin[b, c])
            ssize2[q, a] = ssize[b, a] + ssize[b, c]
            for leaf in range(n):
                att2[q, leaf] = att[b, leaf]
            att2[q, acc_hi[q]] = acc_code[q]
            hsh2[q] = acc_h[q]
            for k in range(level):
                hist2[q, k, 0] = hist[b, k, 0]
                hist2[q, k, 1] = hist[b, k, 1]
                stp2[q, k] = stp[b, k]
            hist2[q, level, 0] = snode[b, a]
            hist2[q, level, 1] = snode[b, c]
            if use_cache:
                stp2[q, level] = tri[b, idx]
            else:
                stp2[q, level] = pair_llh(sp[b], st[b], a, c, c0)
                counters[0] += 1
            score2[q] = acc_v[q]
            work += n + level
            if use_cache and mm > 2:
                # column cc of the child = column cc of the parent (the moved last slot for
                # cc == c), except the entries of the new cluster (slot a) and of slot c
                best = -np.inf
                last0 = (m - 1) * (m - 2) // 2
                for cc in range(1, mm):
                    j0 = cc * (cc - 1) // 2
                    if cc == a:
                        for aa in range(cc):
                            v = pair_llh(sp2[q], st2[q], aa, cc, c0)
                            tri2[q, j0 + aa] = v
                            best = max(best, v)
                        continue
                    src0 = last0 if cc == c else j0
                    for aa in range(cc):
                        tri2[q, j0 + aa] = tri[b, src0 + aa]
                    if c < cc:
                        tri2[q, j0 + c] = tri[b, last0 + cc]
                    if a < cc:
                        tri2[q, j0 + a] = pair_llh(sp2[q], st2[q], a, cc, c0)
                    for aa in range(cc):
                        best = max(best, tri2[q, j0 + aa])
                smax2[q] = best
                counters[0] += mm - 1
                work += mm * (mm - 1) // 2
        nb_ = nacc
        cur = nxt
        level += 1
        phase = 0
    # unreachable for n >= 2 (the loop returns at m == 2)
    regs[R_DONE] = 1
    regs[R_WORK] = work
    return hv, hf, none_hist, none_steps, none_score


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


@register(
    "beam",
    description="beam search over partial clusterings, deduplicated on the set of clusters",
)
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
