"""Monte-Carlo tree search over merge sequences with a likelihood prior (PUCT).

The MCTS baseline of Brehmer et al. (ginkgo-rl ``LikelihoodMCTSAgent``), without a neural network. A
jet is clustered by ``N - 1`` *decisions*; each decision merges two of the current clusters. Before a
decision, the search runs from the current state (the *head*):

1. **beam pre-expansion** (``beam_size > 0``): a beam search of width ``beam_size`` from the head down
   to complete trees. Each beam node proposes its ``beam_size`` most likely merges, and the best
   ``beam_size`` partial sequences by accumulated log-likelihood are kept. The nodes are added to the
   search tree and the returns of the complete trees are backed up.
2. **trajectories**: ``min(max(n_mc_target · #merges − visits(head), n_mc_min), n_rollouts)`` of
   them. Each descends from the head to a complete tree. At a node visited before, it picks the merge
   ``a`` that maximises the PUCT score

       Q(a) + c_puct · P(a) · sqrt(N + 1e-9) / (1 + n(a)).

   ``P(a) ∝ exp(ψ(a))`` is the prior over the legal merges of the node: ``ψ`` is the split
   log-likelihood of the merge, and the prior is normalised; it is uniform when every ``ψ`` is
   ``-inf``, or with ``prior="uniform"``. ``N`` and ``n(a)`` are visit counts. ``Q`` is the mean
   (``planning="mean"``) or best (``"max"``) return of the child, normalised into ``[0, 1]`` via
   ``reward_range``; a child never visited gets its parent's ``Q``. At a node never visited before, the
   merge comes from the *rollout* policy instead. With ``"greedy"``, the reference behaviour, that is
   the most likely merge. With ``"sample"``, the merge is drawn from ``P`` with the seeded generator.
   Every node a trajectory passes through joins the search tree. Its return, the log-likelihood of
   the complete tree, is backed up to the head.
3. **decision** (``decision="max_reward"``): the child of the head with the best return seen through
   it; ``"most_visited"`` takes the most visited child. The search tree below the chosen child is
   kept for the next decision.

Returns are exact log-likelihoods (the final merge uses λ_R). They are clipped to ``reward_range`` only
for ``Q``, while best returns are kept unclipped. So with ``"max_reward"`` the returned tree is the best
complete tree that any trajectory or beam reached through the chosen path, and never worse than the
head's beam pre-expansion at the first decision. Split log-likelihoods come from the shared numba kernel,
and the search itself is one numba kernel: with the defaults a 20-leaf jet takes about 10 ms and a
50-leaf jet about 0.25 s.

Defaults follow the reference configuration ``mcts_likelihood``: ``n_mc_target=1``, ``n_mc_min=0``,
``n_rollouts`` (``n_mc_max``) ``= 20``, ``beam_size=5``, ``c_puct=1``, ``planning="mean"``,
``decision="max_reward"``, ``reward_range=(-500, 0)``. ``rollout="greedy"`` is the reference's
behaviour and is deterministic (the seed is not used). ``"sample"`` makes the search stochastic:
its draws use a :class:`numpy.random.Generator` made from ``seed``, so the same seed and options give
the same tree. On 10–20-leaf QCD jets ``"greedy"`` finds better trees than ``"sample"`` at equal cost
(see ``tests/benchmarks/bench_baselines.py``).

Example:
    >>> import numpy as np
    >>> from jetastar import Jet
    >>> from jetastar.ginkgo import ShowerParams
    >>> leaves = np.array([[40.0, 0, 30, 25], [30.0, 0, 25, 15], [20.0, 5, 15, 10]])
    >>> mcts(Jet(leaves, ShowerParams.qcd()), n_rollouts=5, seed=1).tree.n_leaves
    3
"""

from __future__ import annotations

import math
import numbers
import time
from typing import Any

import numba as nb
import numpy as np

from .._jit import DeferredSignals, Stopwatch
from .._refcount import borrowed, keep_alive
from .._sorting import argsort_stable
from ..ginkgo.likelihood import t_of
from ..jet import Jet
from ._agglomerative import (
    canonical_result,
    check_jet,
    greedy_kernel,
    jet_arrays,
    leaf_ts,
    pair_llh,
)
from ._engine import check_budget
from .estimates import estimate_seconds
from .registry import register
from .result import ClusteringResult

__all__ = ["ALL_INF_MESSAGE", "FIRST_BUDGET_SLICE_WORK", "mcts", "mcts_run", "mcts_settings"]

_PLANNING = ("mean", "max")
_DECISIONS = ("max_reward", "most_visited")
_PRIORS = ("likelihood", "uniform")
_ROLLOUTS = ("greedy", "sample")

# node table columns
_PARENT, _ACTION, _FIRST, _NEXT, _VISITS = range(5)
_QSUM, _QMAX, _STEP = range(3)


# ---------------------------------------------------------------------- state helpers
@nb.njit(cache=True)
def _init_tri(sp, st, m, tri, c0):  # pragma: no cover - numba
    for c in range(1, m):
        for a in range(c):
            tri[c * (c - 1) // 2 + a] = pair_llh(sp, st, a, c, c0)


@nb.njit(cache=True)
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


@nb.njit(cache=True)
def _decode(act):  # pragma: no cover - numba
    """Slots (a, c), a < c, of merge index ``act = c(c-1)/2 + a``."""
    c = 1
    while c * (c + 1) // 2 <= act:
        c += 1
    return act - c * (c - 1) // 2, c


@nb.njit(cache=True)
def _step_values(sp, st, tri, m, c1, out):  # pragma: no cover - numba
    """Split log-likelihood of every legal merge (root constants when two clusters are left)."""
    if m == 2:
        out[0] = pair_llh(sp, st, np.int64(0), np.int64(1), c1)
        return 1
    npair = m * (m - 1) // 2
    for i in range(npair):
        out[i] = tri[i]
    return npair


@nb.njit(cache=True)
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


@nb.njit(cache=True)
def _qnorm(x, lo, hi):  # pragma: no cover - numba
    if x <= lo:
        return 0.0
    if x >= hi:
        return 1.0
    return (x - lo) / (hi - lo)


@nb.njit(cache=True)
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


@nb.njit(cache=True)
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


@nb.njit(cache=True)
def _find_child(ni, node, action):  # pragma: no cover - numba
    child = ni[node, _FIRST]
    while child >= 0:
        if ni[child, _ACTION] == action:
            return child
        child = ni[child, _NEXT]
    return -1


@nb.njit(cache=True)
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


@nb.njit(cache=True)
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


@nb.njit(cache=True)
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


@nb.njit(cache=True)
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
_R_DEC, _R_COUNT, _R_HEAD, _R_CUR, _R_PHASE, _R_T, _R_NTRAJ, _R_NPAIR, _R_DONE, _R_WORK = range(10)
_N_REGS = 10


@nb.njit(cache=True)
def _mcts_state(leaves, consts):  # pragma: no cover - numba
    """The state of a search before its first decision (see :func:`_mcts_advance`).

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


@nb.njit(cache=True)
def _scratch(n, npairs, bw):  # pragma: no cover - numba
    """The scratch arrays of :func:`_mcts_advance`: a trajectory's work state and the beam
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
def _mcts_advance(
    leaves, consts, n_mc_target, n_mc_min, n_mc_max, beam_size, c_puct, planning, decision,
    uniform, sample, lo, hi, rng, ni, nf, state, regs, fregs, budget,
):  # pragma: no cover - numba
    """Run a search (state from :func:`_mcts_state`) on until it ends or has done about
    ``budget`` units of work (merges looked at), whichever comes first.

    The search pauses only at the start of a decision or between two trajectories (after some
    work of this call), so a run cut into any number of calls makes exactly the moves (and
    random draws) of one call: the results are bit for bit those of an uncut run. ``regs``
    (``_R_*``) and ``fregs[0]`` (the log-likelihood of the decisions made) say where it stands.

    Returns:
        ``(ni, nf)``: the search tree, to pass to the next call. ``state`` holds the decisions
        (``history``, ``steps``; complete once ``regs[_R_DONE] == 1``) and the counters
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
    dec = regs[_R_DEC]
    count = regs[_R_COUNT]
    head = regs[_R_HEAD]
    cur = regs[_R_CUR]
    phase = regs[_R_PHASE]
    t0 = regs[_R_T]
    n_traj = regs[_R_NTRAJ]
    npair = regs[_R_NPAIR]
    realized = fregs[0]
    work = np.int64(0)
    bw = max(beam_size, 1)
    scratch = _scratch(n, npairs, bw)
    wp, wt, wnode, wtri, wp2, wt2, wnode2, wtri2, bp, bt, bnode, btri, bp2, bt2, bnode2, btri2, \
        bid, bret, bid2, bret2, cand_v, cand_src, cand_act, values, prior, cmap, order_tmp = \
        borrowed(scratch)

    while dec < n - 1:
        if phase == 0 and work >= budget and work > 0:  # pause before a decision
            regs[_R_DEC] = dec
            regs[_R_COUNT] = count
            regs[_R_HEAD] = head
            regs[_R_CUR] = cur
            regs[_R_PHASE] = phase
            regs[_R_WORK] = work
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
                    regs[_R_DEC] = dec
                    regs[_R_COUNT] = count
                    regs[_R_HEAD] = head
                    regs[_R_CUR] = cur
                    regs[_R_PHASE] = phase
                    regs[_R_T] = t
                    regs[_R_NTRAJ] = n_traj
                    regs[_R_NPAIR] = npair
                    regs[_R_WORK] = work
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
    regs[_R_DEC] = dec
    regs[_R_DONE] = 1
    regs[_R_WORK] = work
    fregs[0] = realized
    keep_alive(scratch)
    return ni_own, nf_own


@nb.njit(cache=True)
def _new_registers():  # pragma: no cover - numba
    """The registers of a search before its first call of :func:`_mcts_advance`: ``(regs,
    fregs)`` (``_R_*``; the realized log-likelihood in ``fregs[0]``)."""
    regs = np.zeros(_N_REGS, dtype=np.int64)
    regs[_R_COUNT] = 1
    return regs, np.zeros(1, dtype=np.float64)


@nb.njit(cache=True)
def mcts_run(
    leaves, consts, n_mc_target, n_mc_min, n_mc_max, beam_size, c_puct, planning, decision,
    uniform, sample, lo, hi, rng, budget,
):  # pragma: no cover - numba
    """A search in one call (:func:`_mcts_state`, then :func:`_mcts_advance` with ``budget``): the
    first slice of :func:`_run_mcts`, for kernels that run many jets (the columnar path).

    Returns:
        ``(history, steps, counters, finished, work)``: the decisions (complete when
        ``finished``), the counters of :func:`_mcts_advance` and the work units done.
    """
    regs, fregs = _new_registers()
    ni, nf, state = _mcts_state(leaves, consts)
    _mcts_advance(leaves, consts, n_mc_target, n_mc_min, n_mc_max, beam_size, c_puct, planning,
                  decision, uniform, sample, lo, hi, rng, ni, nf, state, regs, fregs, budget)
    return state[4], state[5], state[6], regs[_R_DONE] != 0, regs[_R_WORK]


# ---------------------------------------------------------------------- Python API
#: the message of a search whose tree has log-likelihood ``-inf`` (status ``"all_inf"``)
ALL_INF_MESSAGE = "the tree found has log-likelihood -inf (no search path reached a possible tree)"
#: A search returns to Python between slices of work of about this many seconds (see
#: :func:`_run_mcts`); the first slice is :data:`_FIRST_SLICE_WORK` units (merges looked at).
_SLICE_S = 0.1
_FIRST_SLICE_WORK = 2_000_000
#: the first slice under a ``max_time``
FIRST_BUDGET_SLICE_WORK = 100_000
#: no slice is larger than this (tests set it small to cut a search into many slices)
_MAX_SLICE_WORK = 2**62


def _run_mcts(
    args: tuple[Any, ...], watch: Stopwatch, max_time: float | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """The search kernel run in slices of work, returning to Python between them: a pending
    signal (Ctrl-C) is raised there, and the search stops once ``watch`` has passed
    ``max_time``.

    Returns:
        ``(history, steps, counters, decisions made)``.
    """
    leaves, consts = args[0], args[1]
    regs, fregs = _new_registers()
    budget = _FIRST_SLICE_WORK if max_time is None else FIRST_BUDGET_SLICE_WORK
    with DeferredSignals() as held:
        ni, nf, state = _mcts_state(leaves, consts)
        while True:
            started = time.perf_counter()
            ni, nf = _mcts_advance(*args, ni, nf, state, regs, fregs, min(budget, _MAX_SLICE_WORK))
            if regs[_R_DONE]:
                break
            held.deliver()
            took = time.perf_counter() - started
            target = _SLICE_S
            if max_time is not None:
                left = max_time - watch.seconds()
                if left <= 0.0:
                    break
                target = min(target, 0.5 * left)
            work = int(regs[_R_WORK])
            if took > 0.0 and work > 0:
                budget = int(min(max(work * target / took, 1000.0), 8.0 * max(work, budget)))
    history, steps, counters = state[4], state[5], state[6]
    return history, steps, counters, int(regs[_R_DEC])


def mcts_settings(
    n_rollouts: int = 20,
    seed: Any = 0,
    *,
    n_mc_target: int = 1,
    n_mc_min: int = 0,
    beam_size: int = 5,
    c_puct: float = 1.0,
    planning: str = "mean",
    decision: str = "max_reward",
    prior: str = "likelihood",
    rollout: str = "greedy",
    reward_range: Any = (-500.0, 0.0),
) -> tuple[dict[str, Any], tuple[Any, ...]]:
    """The options of :func:`mcts` checked, as its results record them, and as its kernel takes them.

    One check for the per-jet function and the columnar path (:mod:`.columnar`), so both accept,
    refuse and record the same values. ``seed`` is recorded, not checked (:func:`_make_rng` checks
    it when it makes the generator).

    Returns:
        ``(options, settings)``: the options dict of a result (without ``max_time``) and
        ``(n_mc_target, n_mc_min, n_mc_max, beam_size, c_puct, planning, decision, uniform,
        sample, low, high)`` for :func:`mcts_run` / :func:`_mcts_advance`.

    Raises:
        ValueError: an invalid value (the message lists the valid ones).

    Example:
        >>> options, settings = mcts_settings(10, rollout="sample")
        >>> options["n_rollouts"], options["rollout"], settings[8]
        (10, 'sample', True)
    """
    n_max = _count("n_rollouts", n_rollouts)
    target = _count("n_mc_target", n_mc_target)
    n_min = _count("n_mc_min", n_mc_min)
    width = _count("beam_size", beam_size)
    try:
        c = float(c_puct)
    except (TypeError, ValueError):
        raise ValueError(f"c_puct must be a number >= 0, got {c_puct!r}") from None
    if not (math.isfinite(c) and c >= 0.0):
        raise ValueError(f"c_puct must be a finite number >= 0, got {c_puct!r}")
    plan = _choice("planning", planning, _PLANNING)
    dec = _choice("decision", decision, _DECISIONS)
    uniform = _choice("prior", prior, _PRIORS) == 1
    sample = _choice("rollout", rollout, _ROLLOUTS) == 1
    try:
        lo, hi = (float(x) for x in reward_range)
    except (TypeError, ValueError):
        raise ValueError(
            f"reward_range must be two numbers (low, high), got {reward_range!r}"
        ) from None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise ValueError(f"reward_range must be finite with low < high, got {reward_range!r}")
    options = {
        "n_rollouts": n_max,
        "seed": _recorded_seed(seed),
        "n_mc_target": target,
        "n_mc_min": n_min,
        "beam_size": width,
        "c_puct": c,
        "planning": planning,
        "decision": decision,
        "prior": prior,
        "rollout": rollout,
        "reward_range": [lo, hi],
    }
    return options, (target, n_min, n_max, width, c, plan, dec, uniform, sample, lo, hi)


def _recorded_seed(seed: Any) -> Any:
    """``seed`` as a result records it: an int (numpy integers too), ``None``, or ``"Generator"``
    for anything else (a generator; :func:`_make_rng` refuses what is neither)."""
    if isinstance(seed, numbers.Integral) and not isinstance(seed, bool):
        return int(seed)
    return None if seed is None else "Generator"


def _choice(name: str, value: object, valid: tuple[str, ...]) -> int:
    if value not in valid:
        raise ValueError(f"unknown {name} {value!r}; valid: {', '.join(map(repr, valid))}")
    return valid.index(value)  # type: ignore[arg-type]


def _count(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
    return int(value)


def _make_rng(seed: Any) -> np.random.Generator:
    if isinstance(seed, np.random.Generator):
        if not isinstance(seed.bit_generator, np.random.PCG64):
            raise ValueError("seed: a Generator must use the PCG64 bit generator (default_rng)")
        return seed
    if seed is None or (isinstance(seed, numbers.Integral) and not isinstance(seed, bool)):
        return np.random.default_rng(seed)
    raise ValueError(f"seed must be an integer, None or a numpy Generator, got {seed!r}")


@register(
    "mcts",
    description="Monte-Carlo tree search with a likelihood prior (PUCT, beam pre-expansion)",
)
def mcts(
    jet: Jet,
    n_rollouts: int = 20,
    seed: Any = 0,
    likelihood: str = "symmetric",
    *,
    n_mc_target: int = 1,
    n_mc_min: int = 0,
    beam_size: int = 5,
    c_puct: float = 1.0,
    planning: str = "mean",
    decision: str = "max_reward",
    prior: str = "likelihood",
    rollout: str = "greedy",
    reward_range: tuple[float, float] = (-500.0, 0.0),
    max_time: float | None = None,
) -> ClusteringResult:
    """Cluster a jet by Monte-Carlo tree search over merge sequences (see the module docstring).

    The search runs in slices of work of about 0.1 s (cut before a decision or between two
    trajectories) and returns to Python between them, so a Ctrl-C stops it within a slice and
    ``max_time`` holds whatever the size of the jet; the slices change nothing in the result.

    Args:
        jet: the :class:`jetastar.Jet` to cluster.
        n_rollouts: maximum number of trajectories per decision (the reference's ``n_mc_max``).
        seed: integer seed (or ``None``, or a PCG64 :class:`numpy.random.Generator`) for the random
            draws of ``rollout="sample"`` (unused with the default ``rollout="greedy"``).
        likelihood: ``"symmetric"`` (default) or ``"legacy"``.
        n_mc_target: trajectories per legal merge at a decision, before subtracting the head's
            visits.
        n_mc_min: minimum number of trajectories per decision.
        beam_size: width of the beam pre-expansion before each decision (0 = none).
        c_puct: exploration constant of PUCT.
        planning: ``"mean"`` or ``"max"`` normalised return as ``Q`` in PUCT.
        decision: ``"max_reward"`` (child with the best return) or ``"most_visited"``.
        prior: ``"likelihood"`` (``P ∝ exp ψ``) or ``"uniform"``.
        rollout: policy at nodes never visited before: ``"greedy"`` (most probable merge under the
            prior, the reference behaviour) or ``"sample"`` (drawn from the prior).
        reward_range: ``(low, high)`` used to normalise returns into ``[0, 1]`` for ``Q``.
        max_time: run-time budget in seconds (``None``: none; compiling kernels does not count),
            checked between slices of work.

    Returns:
        A :class:`ClusteringResult` (``algorithm="mcts"``) with ``stats``: ``trajectories``,
        ``nodes`` (search-tree nodes created), ``beam_nodes``, ``splits_evaluated`` and
        ``time_s``. ``status="all_inf"`` when the tree found has log-likelihood ``-inf``.
        Stopped by ``max_time`` before its last decision: ``status="budget"``, the greedy tree,
        a message and ``stats["decisions"]`` (how many decisions were made).

    Raises:
        InvalidJetError: if ``jet`` is not a Jet.
        ValueError: for an invalid option value (the message lists the valid ones).

    Example:
        >>> from jetastar.ginkgo import ShowerParams, generate
        >>> jet = generate(1, ShowerParams.qcd(), seed=3)[0]
        >>> mcts(jet, seed=1).tree == mcts(jet, seed=1).tree
        True
    """
    watch = Stopwatch()
    check_jet(jet, "mcts")
    leaves, consts = jet_arrays(jet, likelihood)
    n = leaves.shape[0]
    options, settings = mcts_settings(
        n_rollouts, seed, n_mc_target=n_mc_target, n_mc_min=n_mc_min, beam_size=beam_size,
        c_puct=c_puct, planning=planning, decision=decision, prior=prior, rollout=rollout,
        reward_range=reward_range,
    )
    max_time = check_budget(max_time, "max_time")
    rng = _make_rng(seed)
    args = (leaves, consts, *settings, rng)
    # a search that cannot end within the budget ends with the greedy tree: not started (its
    # first decision's beam pre-expansion, ~beam_size n³/6 merges, is not cut into slices)
    lower = estimate_seconds("mcts", n, options) if max_time is not None else None
    too_long = lower is not None and max_time is not None and lower > max_time
    if too_long:
        counters, done = np.zeros(4, dtype=np.int64), 0
    else:
        history, steps, counters, done = _run_mcts(args, watch, max_time)
    status, message = "ok", ""
    if done < max(n - 1, 0):  # stopped by max_time: the greedy tree
        history, steps, _, _ = greedy_kernel(leaves, consts)
        status = "budget"
        message = (f"not started: a lower estimate of its time, {lower:.3g} s, is over max_time="
                   f"{max_time:g} s; the tree is the greedy tree" if too_long else
                   f"stopped by max_time={max_time:g} s after {watch.seconds():.3g} s, after "
                   f"{done} of {n - 1} decisions; the tree is the greedy tree")
    tree, ll = canonical_result(history, steps, n, jet=jet.label)
    if status == "ok" and not math.isfinite(ll):
        status = "all_inf"
        message = ALL_INF_MESSAGE
    if max_time is not None:
        options["max_time"] = max_time
    stats = {
        "trajectories": int(counters[0]),
        "nodes": int(counters[1]),
        "beam_nodes": int(counters[3]),
        "splits_evaluated": int(counters[2]),
        "time_s": watch.seconds(),
    }
    if status == "budget":
        stats["decisions"] = int(done)
    return ClusteringResult(
        tree=tree,
        log_likelihood=ll,
        algorithm="mcts",
        likelihood=likelihood,
        options=options,
        stats=stats,
        status=status,
        message=message,
        jet_id=jet.jet_id,
    )
