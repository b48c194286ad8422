"""numba kernels of beam search (:mod:`.beam`): the partial clusterings, their canonical
form and hashes, the bounded heap that keeps the best distinct candidates of a level, and the
search itself (:func:`beam_state`, :func:`beam_advance`, run in slices of work).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from ..._jit import kernel_helper
from ..._refcount import borrowed
from ..._sorting import argsort_stable
from ...ginkgo.likelihood import SPACELIKE_TOLERANCE, t_of
from .._chunk_kernels import DONE, PER_JET, run_in_slices, search_outputs, to_solve
from .._merges import canonical_into, greedy_kernel, leaf_ts, numpy_sum, pair_llh

_GOLD = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)



# ---------------------------------------------------------------------- numba kernels
@kernel_helper
def _mix(leaf, code):  # pragma: no cover - numba
    """splitmix64 of the pair (leaf, attach code)."""
    x = (np.uint64(leaf) << np.uint64(32)) ^ np.uint64(code + 1)
    x = x + _GOLD
    x = (x ^ (x >> np.uint64(30))) * _MIX1
    x = (x ^ (x >> np.uint64(27))) * _MIX2
    return x ^ (x >> np.uint64(31))


@kernel_helper
def _heap_less(v1, f1, v2, f2):  # pragma: no cover - numba
    """Order of the min-heap: worse score first; on equal scores the later candidate is worse."""
    return v1 < v2 or (v1 == v2 and f1 > f2)


@kernel_helper
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


@kernel_helper
def _sift_up(hv, hf, i):  # pragma: no cover - numba
    while i > 0:
        parent = (i - 1) // 2
        if _heap_less(hv[i], hf[i], hv[parent], hf[parent]):
            hv[i], hv[parent] = hv[parent], hv[i]
            hf[i], hf[parent] = hf[parent], hf[i]
            i = parent
        else:
            return


@kernel_helper
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


# ---------------------------------------------------------------------- the chunk kernel
#: the largest jet :func:`beam_chunk` runs beam search on (the caller sends larger ones to the
#: per-jet function): the default beam at 40 leaves is 780 states, ~16 MB and ~0.3 s per jet;
#: above 40 leaves the default beam is 1000 states and a jet takes seconds, where one call per
#: jet costs nothing in comparison and the per-jet function's slices see Ctrl-C and ``max_time``
BEAM_CHUNK_MAX = 40

# ---------------------------------------------------------------------- beam search
@nb.njit(cache=True)
def _beam_jet(j, leaves, loff, noff, which, consts, run, size, width, cache, guard, budget,
              children, leaf_of_node, ll, outcome, stats, work, tol):  # pragma: no cover - numba
    """Beam search on jet ``j`` (see :func:`beam_chunk`), as ``beam_search`` runs it."""
    if not to_solve(j, leaves, loff, which, run, outcome, tol):
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


def beam_chunk(
    leaves: np.ndarray, loff: np.ndarray, noff: np.ndarray, which: np.ndarray,
    consts: np.ndarray, run: np.ndarray, size: np.ndarray, width: np.ndarray,
    cache: np.ndarray, guard: bool, budget: int, parallel: bool,
) -> tuple[np.ndarray, ...]:
    """Beam search on every jet of a chunk, in kernel calls of about :data:`BEAM_SLICE_WORK`
    estimated work each (a run of consecutive jets; at least one jet), with Ctrl-C held during a
    call and raised between calls.

    Args:
        leaves, loff, noff, consts: as in the chunk kernel of greedy
            (:func:`~jetastar.clustering.agglomerative._merge_chunk.cluster_chunk`).
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
    run_in_slices(kernel, cost, BEAM_SLICE_WORK, parallel, leaves, loff, noff, which,
                   consts, run, size, width, cache, bool(guard), np.int64(budget), children,
                   leaf_of_node, ll, outcome, stats, work, SPACELIKE_TOLERANCE)
    return children, leaf_of_node, ll, outcome, stats, work
