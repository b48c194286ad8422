"""numba kernels of MCTS (:mod:`.mcts`): the search tree's node tables, the state of a partial
clustering, PUCT selection with a likelihood prior, rollouts and backups, and the search itself
(:func:`mcts_state`, :func:`mcts_advance`, run in slices of work; :func:`mcts_run` in one call).
"""

from __future__ import annotations

import math
from typing import Any

import numba as nb
import numpy as np

from ..._jit import kernel_helper
from ..._refcount import borrowed, keep_alive
from ..._sorting import argsort_stable
from ...ginkgo.likelihood import SPACELIKE_TOLERANCE, t_of
from .._chunk_kernels import DONE, PER_JET, run_in_slices, search_outputs, to_solve
from .._merges import canonical_into, leaf_ts, numpy_sum, pair_llh

# node table columns
_PARENT, _ACTION, _FIRST, _NEXT, _VISITS = range(5)
_QSUM, _QMAX, _STEP = range(3)


# ---------------------------------------------------------------------- state helpers
@kernel_helper
def _init_tri(sp, st, m, tri, c0):  # pragma: no cover - numba
    for c in range(1, m):
        for a in range(c):
            tri[c * (c - 1) // 2 + a] = pair_llh(sp, st, a, c, c0)


@kernel_helper
def _merge_into(
    sp, st, snode, tri, m, a, c, node_id, sp2, st2, snode2, tri2, c0
):  # pragma: no cover - numba
    """Child state of merging slots a < c: new cluster in slot a, the last slot moves to c.

    Returns the number of split evaluations (pairs of the new cluster).
    """
    mm = m - 1
    for s in range(mm):
        src = m - 1 if s == c else s
        for d in range(4):
            sp2[s, d] = sp[src, d]
        st2[s] = st[src]
        snode2[s] = snode[src]
    for d in range(4):
        sp2[a, d] = sp[a, d] + sp[c, d]
    st2[a] = t_of(sp2[a, 0], sp2[a, 1], sp2[a, 2], sp2[a, 3])
    snode2[a] = node_id
    if mm <= 2:
        return 0
    last0 = (m - 1) * (m - 2) // 2
    for cc in range(1, mm):
        j0 = cc * (cc - 1) // 2
        if cc == a:
            for aa in range(cc):
                tri2[j0 + aa] = pair_llh(sp2, st2, aa, cc, c0)
            continue
        src0 = last0 if cc == c else j0
        for aa in range(cc):
            tri2[j0 + aa] = tri[src0 + aa]
        if c < cc:
            tri2[j0 + c] = tri[last0 + cc]
        if a < cc:
            tri2[j0 + a] = pair_llh(sp2, st2, a, cc, c0)
    return mm - 1


@kernel_helper
def _decode(act):  # pragma: no cover - numba
    """Slots (a, c), a < c, of merge index ``act = c(c-1)/2 + a``."""
    c = 1
    while c * (c + 1) // 2 <= act:
        c += 1
    return act - c * (c - 1) // 2, c


@kernel_helper
def _step_values(sp, st, tri, m, c1, out):  # pragma: no cover - numba
    """Split log-likelihood of every legal merge (root constants when two clusters are left)."""
    if m == 2:
        out[0] = pair_llh(sp, st, np.int64(0), np.int64(1), c1)
        return 1
    npair = m * (m - 1) // 2
    for i in range(npair):
        out[i] = tri[i]
    return npair


@kernel_helper
def _prior(values, npair, uniform, out):  # pragma: no cover - numba
    """P ∝ exp(ψ) over the legal merges (uniform if asked or if every ψ is -inf)."""
    vmax = -np.inf
    for i in range(npair):
        vmax = max(vmax, values[i])
    if uniform or vmax == -np.inf:
        for i in range(npair):
            out[i] = 1.0 / npair
        return
    total = 0.0
    for i in range(npair):
        w = math.exp(values[i] - vmax)
        out[i] = w
        total += w
    for i in range(npair):
        out[i] /= total


@kernel_helper
def _qnorm(x, lo, hi):  # pragma: no cover - numba
    if x <= lo:
        return 0.0
    if x >= hi:
        return 1.0
    return (x - lo) / (hi - lo)


@kernel_helper
def _node_q(ni, nf, node, planning, lo, hi):  # pragma: no cover - numba
    """Normalised Q of a visited node; an unvisited one borrows its nearest visited ancestor's."""
    while ni[node, _VISITS] == 0:
        parent = ni[node, _PARENT]
        if parent < 0:
            return 0.5
        node = parent
    if planning == 0:
        return nf[node, _QSUM] / ni[node, _VISITS]
    return _qnorm(nf[node, _QMAX], lo, hi)


@kernel_helper
def _new_node(ni, nf, count, parent, action, step):  # pragma: no cover - numba
    ni[count, _PARENT] = parent
    ni[count, _ACTION] = action
    ni[count, _FIRST] = -1
    ni[count, _NEXT] = ni[parent, _FIRST] if parent >= 0 else -1
    ni[count, _VISITS] = 0
    if parent >= 0:
        ni[parent, _FIRST] = count
    nf[count, _QSUM] = 0.0
    nf[count, _QMAX] = -np.inf
    nf[count, _STEP] = step
    return count


@kernel_helper
def _find_child(ni, node, action):  # pragma: no cover - numba
    child = ni[node, _FIRST]
    while child >= 0:
        if ni[child, _ACTION] == action:
            return child
        child = ni[child, _NEXT]
    return -1


@kernel_helper
def _grow(ni, nf, need):  # pragma: no cover - numba
    cap = ni.shape[0]
    while cap < need:
        cap *= 2
    ni2 = np.empty((cap, ni.shape[1]), dtype=np.int64)
    nf2 = np.empty((cap, nf.shape[1]), dtype=np.float64)
    for i in range(ni.shape[0]):  # loops, not slice assignments: much less to compile
        for j in range(ni.shape[1]):
            ni2[i, j] = ni[i, j]
        for j in range(nf.shape[1]):
            nf2[i, j] = nf[i, j]
    return ni2, nf2


@kernel_helper
def _copy_state(sp, st, snode, tri, m, npair, sp2, st2, snode2, tri2):  # pragma: no cover - numba
    """Copy the first ``m`` slots and ``npair`` pair values of a state into another (loops, not
    slice assignments: numba compiles each slice assignment into a generic copy of its own)."""
    for s in range(m):
        for d in range(4):
            sp2[s, d] = sp[s, d]
        st2[s] = st[s]
        snode2[s] = snode[s]
    for j in range(npair):
        tri2[j] = tri[j]


@kernel_helper
def _backup(ni, nf, leaf, head, ret, lo, hi):  # pragma: no cover - numba
    clipped = _qnorm(ret, lo, hi)
    x = leaf
    while True:
        ni[x, _VISITS] += 1
        nf[x, _QSUM] += clipped
        if ret > nf[x, _QMAX]:
            nf[x, _QMAX] = ret
        if x == head:
            return
        x = ni[x, _PARENT]


@kernel_helper
def _pick_rollout(prior, npair, sample, rng):  # pragma: no cover - numba
    if not sample:
        best = 0
        for i in range(1, npair):
            if prior[i] > prior[best]:
                best = i
        return best
    u = rng.random()
    acc = 0.0
    last = 0
    for i in range(npair):
        if prior[i] > 0.0:
            last = i
            acc += prior[i]
            if u < acc:
                return i
    return last


# ---------------------------------------------------------------------- the search
#: registers of a search between slices (int64; the realized log-likelihood is a float64 apart)
R_DEC, R_COUNT, R_HEAD, R_CUR, R_PHASE, R_T, R_NTRAJ, R_NPAIR, R_DONE, R_WORK = range(10)
N_REGS = 10


@nb.njit(cache=True)
def mcts_state(leaves, consts):  # pragma: no cover - numba
    """The state of a search before its first decision (see :func:`mcts_advance`).

    Returns:
        ``(ni, nf, (hp, ht, hnode, htri, history, steps, counters))``: the search tree (node
        tables, grown as needed) and the head state with a leading axis of 2 (the current and
        the next head), the decisions made and the counters.
    """
    n = leaves.shape[0]
    c0 = consts[0]
    npairs = max(n * (n - 1) // 2, 1)
    counters = np.zeros(4, dtype=np.int64)
    cap = 1024
    ni = np.empty((cap, 5), dtype=np.int64)
    nf = np.empty((cap, 3), dtype=np.float64)
    _new_node(ni, nf, np.int64(0), np.int64(-1), np.int64(-1), 0.0)
    hp = np.empty((2, n, 4), dtype=np.float64)
    ht = np.empty((2, n), dtype=np.float64)
    hnode = np.empty((2, n), dtype=np.int64)
    htri = np.empty((2, npairs), dtype=np.float64)
    lt = leaf_ts(leaves, c0)
    for i in range(n):
        for d in range(4):
            hp[0, i, d] = leaves[i, d]
        ht[0, i] = lt[i]
        hnode[0, i] = i
    if n > 2:
        _init_tri(hp[0], ht[0], n, htri[0], c0)
        counters[2] += n * (n - 1) // 2
    history = np.empty((max(n - 1, 1), 2), dtype=np.int64)
    steps = np.empty(max(n - 1, 1), dtype=np.float64)
    return ni, nf, (hp, ht, hnode, htri, history, steps, counters)


@kernel_helper
def _scratch(n, npairs, bw):  # pragma: no cover - numba
    """The scratch arrays of :func:`mcts_advance`: a trajectory's work state and the beam
    states (each double-buffered), the beam's candidates, and per-merge values."""
    wp = np.empty((n, 4), dtype=np.float64)
    wt = np.empty(n, dtype=np.float64)
    wnode = np.empty(n, dtype=np.int64)
    wtri = np.empty(npairs, dtype=np.float64)
    bp = np.empty((bw, n, 4), dtype=np.float64)
    bt = np.empty((bw, n), dtype=np.float64)
    bnode = np.empty((bw, n), dtype=np.int64)
    btri = np.empty((bw, npairs), dtype=np.float64)
    return (wp, wt, wnode, wtri, np.empty_like(wp), np.empty_like(wt), np.empty_like(wnode),
            np.empty_like(wtri), bp, bt, bnode, btri, np.empty_like(bp), np.empty_like(bt),
            np.empty_like(bnode), np.empty_like(btri), np.empty(bw, dtype=np.int64),
            np.empty(bw, dtype=np.float64), np.empty(bw, dtype=np.int64),
            np.empty(bw, dtype=np.float64), np.empty(bw * bw, dtype=np.float64),
            np.empty(bw * bw, dtype=np.int64), np.empty(bw * bw, dtype=np.int64),
            np.empty(npairs, dtype=np.float64), np.empty(npairs, dtype=np.float64),
            np.full(npairs, -1, dtype=np.int64), np.empty(npairs, dtype=np.int64))


@nb.njit(cache=True)
def mcts_advance(
    leaves, consts, n_mc_target, n_mc_min, n_mc_max, beam_size, c_puct, planning, decision,
    uniform, sample, lo, hi, rng, ni, nf, state, regs, fregs, budget,
):  # pragma: no cover - numba
    """Run a search (state from :func:`mcts_state`) on until it ends or has done about
    ``budget`` units of work (merges looked at), whichever comes first.

    The search pauses only at the start of a decision or between two trajectories (after some
    work of this call), so a run cut into any number of calls makes exactly the moves (and
    random draws) of one call: the results are bit for bit those of an uncut run. ``regs``
    (``_R_*``) and ``fregs[0]`` (the log-likelihood of the decisions made) say where it stands.

    Returns:
        ``(ni, nf)``: the search tree, to pass to the next call. ``state`` holds the decisions
        (``history``, ``steps``; complete once ``regs[R_DONE] == 1``) and the counters
        ``[trajectories, nodes created, splits evaluated, beam nodes created]``.
    """
    # every array as a view without reference counts for the calls per merge and per node
    # (jetastar._refcount; they were half of the search's time on small jets): the caller holds
    # the state and the constants, the tree's owners are returned and the scratch's owners are
    # kept alive to every return
    hp_all, ht_all, hnode_all, htri_all, history, steps, counters = borrowed(state)
    n = leaves.shape[0]
    c0 = borrowed(consts[0])
    c1 = borrowed(consts[1])
    ni_own = ni
    nf_own = nf
    ni = borrowed(ni_own)
    nf = borrowed(nf_own)
    npairs = max(n * (n - 1) // 2, 1)
    dec = regs[R_DEC]
    count = regs[R_COUNT]
    head = regs[R_HEAD]
    cur = regs[R_CUR]
    phase = regs[R_PHASE]
    t0 = regs[R_T]
    n_traj = regs[R_NTRAJ]
    npair = regs[R_NPAIR]
    realized = fregs[0]
    work = np.int64(0)
    bw = max(beam_size, 1)
    scratch = _scratch(n, npairs, bw)
    wp, wt, wnode, wtri, wp2, wt2, wnode2, wtri2, bp, bt, bnode, btri, bp2, bt2, bnode2, btri2, \
        bid, bret, bid2, bret2, cand_v, cand_src, cand_act, values, prior, cmap, order_tmp = \
        borrowed(scratch)

    while dec < n - 1:
        if phase == 0 and work >= budget and work > 0:  # pause before a decision
            regs[R_DEC] = dec
            regs[R_COUNT] = count
            regs[R_HEAD] = head
            regs[R_CUR] = cur
            regs[R_PHASE] = phase
            regs[R_WORK] = work
            fregs[0] = realized
            keep_alive(scratch)
            return ni_own, nf_own
        hp = hp_all[cur]
        ht = ht_all[cur]
        hnode = hnode_all[cur]
        htri = htri_all[cur]
        m = n - dec
        if phase == 0:
            npair = _step_values(hp, ht, htri, m, c1, values)
            work += npair
        if m > 2:
            if phase == 0:
                # ---------------- beam pre-expansion
                if beam_size > 0:
                    nbeam = 1
                    bid[0] = head
                    bret[0] = realized
                    _copy_state(hp, ht, hnode, htri, n, npair, bp[0], bt[0], bnode[0], btri[0])
                    bm = m
                    while True:
                        if bm == 1:
                            for e in range(nbeam):
                                if ni[bid[e], _VISITS] == 0:
                                    _backup(ni, nf, bid[e], head, bret[e], lo, hi)
                            break
                        if count + bw + 1 > ni.shape[0]:
                            ni_own, nf_own = _grow(ni, nf, count + bw + 1)
                            ni = borrowed(ni_own)
                            nf = borrowed(nf_own)
                        ncand = 0
                        for e in range(nbeam):
                            k = _step_values(bp[e], bt[e], btri[e], bm, c1, values)
                            work += k
                            # this entry's best min(beam_size, k) merges, ties by merge index
                            for i in range(k):
                                order_tmp[i] = i
                            take = min(beam_size, k)
                            for r in range(take):
                                best = r
                                for i in range(r + 1, k):
                                    if values[order_tmp[i]] > values[order_tmp[best]]:
                                        best = i
                                if best != r:
                                    keep = order_tmp[best]
                                    for i in range(best, r, -1):
                                        order_tmp[i] = order_tmp[i - 1]
                                    order_tmp[r] = keep
                                cand_v[ncand] = bret[e] + values[order_tmp[r]]
                                cand_src[ncand] = e
                                cand_act[ncand] = order_tmp[r]
                                ncand += 1
                        corder = argsort_stable(-cand_v[:ncand])
                        nkeep = min(beam_size, ncand)
                        for q in range(nkeep):
                            r = corder[q]
                            e = cand_src[r]
                            act = cand_act[r]
                            if bm == 2:
                                psi = pair_llh(bp[e], bt[e], np.int64(0), np.int64(1), c1)
                                a = 0
                                c = 1
                            else:
                                psi = btri[e, act]
                                a, c = _decode(act)
                            child = _find_child(ni, bid[e], act)
                            if child < 0:
                                child = _new_node(ni, nf, count, bid[e], act, psi)
                                count += 1
                                counters[1] += 1
                                counters[3] += 1
                            counters[2] += _merge_into(
                                bp[e], bt[e], bnode[e], btri[e], bm, a, c, np.int64(-1),
                                bp2[q], bt2[q], bnode2[q], btri2[q], c0,
                            )
                            bid2[q] = child
                            bret2[q] = cand_v[r]
                        nbeam = nkeep
                        bid, bid2 = bid2, bid
                        bret, bret2 = bret2, bret
                        bp, bp2 = bp2, bp
                        bt, bt2 = bt2, bt
                        bnode, bnode2 = bnode2, bnode
                        btri, btri2 = btri2, btri
                        bm -= 1
                n_traj = min(max(n_mc_target * npair - ni[head, _VISITS], n_mc_min), n_mc_max)
                t0 = 0
                phase = 1
            # ---------------- trajectories
            for t in range(t0, n_traj):
                if work >= budget and t > t0:  # pause between two trajectories
                    regs[R_DEC] = dec
                    regs[R_COUNT] = count
                    regs[R_HEAD] = head
                    regs[R_CUR] = cur
                    regs[R_PHASE] = phase
                    regs[R_T] = t
                    regs[R_NTRAJ] = n_traj
                    regs[R_NPAIR] = npair
                    regs[R_WORK] = work
                    fregs[0] = realized
                    keep_alive(scratch)
                    return ni_own, nf_own
                counters[0] += 1
                if count + n + 1 > ni.shape[0]:
                    ni_own, nf_own = _grow(ni, nf, count + n + 1)
                    ni = borrowed(ni_own)
                    nf = borrowed(nf_own)
                node = head
                wm = m
                _copy_state(hp, ht, hnode, htri, wm, npair, wp, wt, wnode, wtri)
                ret = realized
                while wm > 1:
                    k = _step_values(wp, wt, wtri, wm, c1, values)
                    work += k
                    if k == 1:
                        act = 0
                    else:
                        _prior(values, k, uniform, prior)
                        if ni[node, _VISITS] == 0:
                            act = _pick_rollout(prior, k, sample, rng)
                        else:
                            child = ni[node, _FIRST]
                            while child >= 0:
                                cmap[ni[child, _ACTION]] = child
                                child = ni[child, _NEXT]
                            q_parent = _node_q(ni, nf, node, planning, lo, hi)
                            sqrt_n = math.sqrt(ni[node, _VISITS] + 1e-9)
                            act = 0
                            best = -np.inf
                            for i in range(k):
                                ch = cmap[i]
                                if ch >= 0 and ni[ch, _VISITS] > 0:
                                    q = _node_q(ni, nf, ch, planning, lo, hi)
                                    visits = ni[ch, _VISITS]
                                else:
                                    q = q_parent
                                    visits = 0
                                u = q + c_puct * prior[i] * sqrt_n / (1.0 + visits)
                                if u > best:
                                    best = u
                                    act = i
                            child = ni[node, _FIRST]
                            while child >= 0:
                                cmap[ni[child, _ACTION]] = -1
                                child = ni[child, _NEXT]
                    psi = values[act]
                    child = _find_child(ni, node, act)
                    if child < 0:
                        child = _new_node(ni, nf, count, node, act, psi)
                        count += 1
                        counters[1] += 1
                    a, c = _decode(act)
                    counters[2] += _merge_into(
                        wp, wt, wnode, wtri, wm, a, c, np.int64(-1), wp2, wt2, wnode2, wtri2, c0
                    )
                    wp, wp2 = wp2, wp
                    wt, wt2 = wt2, wt
                    wnode, wnode2 = wnode2, wnode
                    wtri, wtri2 = wtri2, wtri
                    wm -= 1
                    ret += psi
                    node = child
                _backup(ni, nf, node, head, ret, lo, hi)
        # ---------------- decision (the search used `values` as scratch: recompute the head's)
        npair = _step_values(hp, ht, htri, m, c1, values)
        if npair == 1:
            act = 0
        else:
            act = -1
            best = -np.inf
            best_visits = -1
            child = ni[head, _FIRST]
            while child >= 0:
                cmap[ni[child, _ACTION]] = child
                child = ni[child, _NEXT]
            for i in range(npair):
                ch = cmap[i]
                if ch < 0:
                    continue
                if decision == 0:
                    better = act < 0 or nf[ch, _QMAX] > best
                    if better:
                        best = nf[ch, _QMAX]
                        act = i
                else:
                    better = act < 0 or ni[ch, _VISITS] > best_visits
                    if better:
                        best_visits = ni[ch, _VISITS]
                        act = i
            child = ni[head, _FIRST]
            while child >= 0:
                cmap[ni[child, _ACTION]] = -1
                child = ni[child, _NEXT]
            if act < 0:  # no search at all: the most likely merge
                act = 0
                for i in range(1, npair):
                    if values[i] > values[act]:
                        act = i
        psi = values[act]
        if count + 2 > ni.shape[0]:
            ni_own, nf_own = _grow(ni, nf, count + 2)
            ni = borrowed(ni_own)
            nf = borrowed(nf_own)
        child = _find_child(ni, head, act)
        if child < 0:
            child = _new_node(ni, nf, count, head, act, psi)
            count += 1
            counters[1] += 1
        a, c = _decode(act)
        history[dec, 0] = hnode[a]
        history[dec, 1] = hnode[c]
        steps[dec] = psi
        nxt = 1 - cur
        counters[2] += _merge_into(
            hp, ht, hnode, htri, m, a, c, n + dec, hp_all[nxt], ht_all[nxt], hnode_all[nxt],
            htri_all[nxt], c0,
        )
        cur = nxt
        realized += psi
        head = child
        dec += 1
        phase = 0
    regs[R_DEC] = dec
    regs[R_DONE] = 1
    regs[R_WORK] = work
    fregs[0] = realized
    keep_alive(scratch)
    return ni_own, nf_own


@nb.njit(cache=True)
def new_registers():  # pragma: no cover - numba
    """The registers of a search before its first call of :func:`mcts_advance`: ``(regs,
    fregs)`` (``_R_*``; the realized log-likelihood in ``fregs[0]``)."""
    regs = np.zeros(N_REGS, dtype=np.int64)
    regs[R_COUNT] = 1
    return regs, np.zeros(1, dtype=np.float64)


@nb.njit(cache=True)
def mcts_run(
    leaves, consts, n_mc_target, n_mc_min, n_mc_max, beam_size, c_puct, planning, decision,
    uniform, sample, lo, hi, rng, budget,
):  # pragma: no cover - numba
    """A search in one call (:func:`mcts_state`, then :func:`mcts_advance` with ``budget``): the
    first slice of :func:`_run_mcts`, for kernels that run many jets (the columnar path).

    Returns:
        ``(history, steps, counters, finished, work)``: the decisions (complete when
        ``finished``), the counters of :func:`mcts_advance` and the work units done.
    """
    regs, fregs = new_registers()
    ni, nf, state = mcts_state(leaves, consts)
    mcts_advance(leaves, consts, n_mc_target, n_mc_min, n_mc_max, beam_size, c_puct, planning,
                  decision, uniform, sample, lo, hi, rng, ni, nf, state, regs, fregs, budget)
    return state[4], state[5], state[6], regs[R_DONE] != 0, regs[R_WORK]


# ---------------------------------------------------------------------- the chunk kernel
# ---------------------------------------------------------------------- MCTS
@nb.njit(cache=True)
def _mcts_jet(j, leaves, loff, noff, which, consts, run, settings, rng, budget, children,
              leaf_of_node, ll, outcome, stats, work, tol):  # pragma: no cover - numba
    """MCTS on jet ``j`` (see :func:`mcts_chunk`), as ``mcts`` runs it (a valid jet has at least
    two leaves: ``to_solve``)."""
    if not to_solve(j, leaves, loff, which, run, outcome, tol):
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


#: estimated work units per kernel call of :func:`mcts_chunk` (``mcts.mcts_work``): 0.1-0.3 s
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
        leaves, loff, noff, consts: as in the chunk kernel of greedy
            (:func:`~jetastar.clustering.agglomerative._merge_chunk.cluster_chunk`).
        which: ``(J,)`` int64 row of ``consts`` per jet (``-1``: invalid parameters).
        run: ``(J,)`` bool: jets to run.
        settings: the kernel settings of :func:`~jetastar.clustering.search.mcts.mcts_settings`
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
    run_in_slices(kernel, estimate.astype(np.float64), MCTS_SLICE_WORK, parallel,
                   leaves, loff, noff, which, consts, run, tuple(settings), rng, np.int64(budget),
                   children, leaf_of_node, ll, outcome, stats, work, SPACELIKE_TOLERANCE)
    return children, leaf_of_node, ll, outcome, stats, work
