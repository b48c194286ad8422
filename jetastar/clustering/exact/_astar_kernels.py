"""Numba kernels of A* on the cluster trellis (exact and sparse/approximate).

The search is a resumable state machine: :func:`run` works until it is done, until a work quota
(split evaluations) is used up, or until it needs more room, and returns a status; the Python driver
(:mod:`jetastar.clustering.astar`) then checks the time budget, grows arrays, updates the progress
bar and calls it again. Nothing in here allocates large arrays or reads a clock.

The per-problem tables are ``(p, tl, mt, w, d, consts, phys, cm)``: the Ginkgo tables of
:func:`jetastar.ginkgo.heuristics.heuristic_tables` and ``cm (3, n, n)``, the positive, |negative|
and raw weight matrices of a cost model (placeholders of the right types for the unused side, so one
compilation serves both).

Clusters are 128-bit masks ``(lo, hi)`` (leaves 0–63 in ``lo``, 64–127 in ``hi``), looked up in an
open-addressing hash table (``ht``) that maps them to vertex ids.

State arrays (all grown by the driver):

* ``vf (V, 8)`` float64 per vertex: summed 4-momentum (0–3), likelihood ``t`` (4), heuristic cost
  ``H = −h`` (5), solved cost (6, finite exactly when solved), current lower bound (7, see below;
  kept up to date whenever the vertex's state or heap top changes, so scoring a split reads one
  row per child and never the child's heap). For a cost model (``ip[P_MODEL]`` = its code, see
  :mod:`jetastar.costs`) columns 0–3 hold the cluster's features ``(P, N, W, size)`` instead, a
  split's ``ψ`` is minus its cost and ``H`` the model's admissible heuristic.
* ``vi (V, 7)`` int64 per vertex: mask lo (0), hi (1), size (2), state (3: 0 unexplored,
  1 explored, 2 solved, 3 dead), heap offset (4), heap length (5), head of its candidate-split
  list (6, sparse trellis only).
* ``ef (E, 1)`` float64 / ``ei (E, 3)`` int32 per heap entry (split): lower bound ``f``; left id,
  right id, complete flag (24 bytes per entry with ``hp``; the split's ``ψ`` is recomputed when an
  entry is refreshed rather than stored). ``hp`` (int32) holds each vertex's binary heap (a
  contiguous segment of entry ids ordered by ``(f, incomplete, left id)``).
* ``cp (C, 3)`` candidate-split pool ``(next, left id, right id)`` of the sparse trellis.
* ``ctr`` counters and the machine's registers (see the ``_C_*`` constants).

Lower bound of a child ``c`` used in a parent's entry: 0 for a leaf, the exact cost when solved,
``+inf`` when dead, ``max(H(c), f(top of c))`` when explored, ``H(c)`` otherwise. All of them are
valid lower bounds on the cost of ``c``'s best sub-hierarchy when ``H`` is admissible, they never
decrease, and a vertex whose best entry is complete is solved (its value is exact).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from ..._sorting import argsort_stable
from ...costs import (
    GINKGO_CODE,
    all_subset_features_kernel,
    heuristic_kernel,
    merge_cost_kernel,
    split_cost_kernel,
)
from ...ginkgo.heuristics import bound_value
from ...ginkgo.likelihood import (
    cluster_t,
    parent_terms,
    split_llh,
    split_llh_given_parent,
    t_of,
)
from ...ginkgo.small_clusters import subset_dp

# ---------------------------------------------------------------------- layout
V_E, V_PX, V_PY, V_PZ, V_T, V_H, V_VAL, V_LB = range(8)
V_LO, V_HI, V_SIZE, V_STATE, V_OFF, V_LEN, V_CAND = range(7)
N_VF = 8
N_VI = 7
UNEXPLORED, EXPLORED, SOLVED, DEAD = 0, 1, 2, 3

# counters / registers in ctr
(
    C_NV, C_NE, C_NCAND, C_PHASE, C_FIDX, C_CODE, C_NWALK, C_NFRONT, C_EXPLORED, C_SPLITS,
    C_PUSHES, C_POPS, C_ITER, C_ROOT, C_ESTART, C_NEED, C_NSOLVED_SMALL, C_PRUNED, C_DPSOLVED,
) = range(19)
N_CTR = 24

# parameters in ip
(
    P_KIND, P_ALLMAX, P_NSAMPLES, P_TOPK, P_N, P_SMALL, P_WEIGHT, P_EXPLORE_MAX, P_DPMAX, P_RANK,
    P_ROOTALL, P_MODEL,
) = range(12)
N_IP = 12

# statuses returned by run()
ST_WORK, ST_SOLVED, ST_ALLINF, ST_NEED_V, ST_NEED_E, ST_NEED_H, ST_NEED_C, ST_EXPLORE = range(8)

_INF = np.inf
_GOLD = np.uint64(0x9E3779B97F4A7C15)
_MIX2 = np.uint64(0xC2B2AE3D27D4EB4F)


# ---------------------------------------------------------------------- hashing
@nb.njit(cache=True)
def _slot(lo, hi, cap):  # pragma: no cover - numba
    h = np.uint64(lo) * _GOLD ^ (np.uint64(hi) + np.uint64(0x632BE59BD9B4E019)) * _MIX2
    h ^= h >> np.uint64(29)
    return np.int64(h & np.uint64(cap - 1))


@nb.njit(cache=True)
def find(lo, hi, vi, ht):  # pragma: no cover - numba
    """Vertex id of mask ``(lo, hi)`` or -1 (direct table when ``ht`` has ``2**n + 1`` slots)."""
    cap = ht.shape[0]
    if cap & 1:
        return ht[lo]
    s = _slot(lo, hi, cap)
    while True:
        v = ht[s]
        if v < 0:
            return -1
        if vi[v, V_LO] == lo and vi[v, V_HI] == hi:
            return v
        s = (s + 1) & (cap - 1)


@nb.njit(cache=True)
def _insert(v, vi, ht):  # pragma: no cover - numba
    cap = ht.shape[0]
    if cap & 1:
        ht[vi[v, V_LO]] = v
        return
    s = _slot(vi[v, V_LO], vi[v, V_HI], cap)
    while ht[s] >= 0:
        s = (s + 1) & (cap - 1)
    ht[s] = v


@nb.njit(cache=True)
def rehash(vi, nv, ht):  # pragma: no cover - numba
    """Insert vertices ``0 .. nv-1`` into the empty table ``ht``."""
    for v in range(nv):
        _insert(v, vi, ht)


# ---------------------------------------------------------------------- vertices
@nb.njit(cache=True)
def _members(lo, hi, out):  # pragma: no cover - numba
    k = 0
    for word in range(2):
        x = lo if word == 0 else hi
        for b in range(64):
            if (x >> b) & 1:
                out[k] = 64 * word + b
                k += 1
    return k


@nb.njit(cache=True)
def new_vertex(lo, hi, vf, vi, ht, ctr, ip, p, tl, mt, w, d, consts, phys, cm, scratch):  # pragma: no cover
    """Create the vertex of mask ``(lo, hi)`` (caller guarantees capacity) and return its id."""
    v = ctr[C_NV]
    ctr[C_NV] += 1
    k = _members(lo, hi, scratch)
    code = ip[P_MODEL]
    e = 0.0
    x = 0.0
    y = 0.0
    z = 0.0
    c = consts[0]
    if code == GINKGO_CODE:
        for a in range(k):
            i = scratch[a]
            e += p[i, 0]
            x += p[i, 1]
            y += p[i, 2]
            z += p[i, 3]
        vf[v, V_T] = cluster_t(e, x, y, z, k, c)
    else:
        # cost model: features (P, N, W, size) in the momentum slots, O(k^2)
        for a in range(k):
            i = scratch[a]
            for b in range(a + 1, k):
                j = scratch[b]
                e += cm[0, i, j]
                x += cm[1, i, j]
                y += cm[2, i, j]
        z = float(k)
        vf[v, V_T] = 0.0
    vf[v, V_E] = e
    vf[v, V_PX] = x
    vf[v, V_PY] = y
    vf[v, V_PZ] = z
    vi[v, V_LO] = lo
    vi[v, V_HI] = hi
    vi[v, V_SIZE] = k
    vi[v, V_OFF] = 0
    vi[v, V_LEN] = 0
    vi[v, V_CAND] = -1
    if k == 1:
        vf[v, V_H] = 0.0
        vf[v, V_VAL] = 0.0
        vi[v, V_STATE] = SOLVED
    else:
        if code == GINKGO_CODE:
            h = -bound_value(ip[P_KIND], scratch, k, t_of(e, x, y, z), p, tl, mt, w, d, c, phys)
        else:
            h = heuristic_kernel(code, vf[v])
        if k > ip[P_SMALL] and ip[P_WEIGHT] != 1_000_000 and h < _INF:
            # weighted A* (approximate searches only): inflate the estimated cost
            h *= ip[P_WEIGHT] * 1e-6
        vf[v, V_H] = h
        vf[v, V_VAL] = _INF
        vi[v, V_STATE] = UNEXPLORED
        if h == _INF:
            vi[v, V_STATE] = DEAD
        elif k <= ip[P_SMALL]:
            # exact heuristic for tiny clusters: solved without exploring
            vi[v, V_STATE] = SOLVED
            vf[v, V_VAL] = h
            ctr[C_NSOLVED_SMALL] += 1
    _store_lb(v, vf, vi)
    _insert(v, vi, ht)
    return v


@nb.njit(cache=True)
def _get(lo, hi, vf, vi, ht, ctr, ip, p, tl, mt, w, d, consts, phys, cm, scratch):  # pragma: no cover
    """Vertex id of mask ``(lo, hi)``, created if new.

    Not inlined on purpose: numba's IR inlining adds a reference-count update per array argument
    and call; hot loops look the mask up in the direct table themselves (see :func:`_explore_all`)
    and call this only on a miss."""
    v = find(lo, hi, vi, ht)
    if v >= 0:
        return v
    return new_vertex(lo, hi, vf, vi, ht, ctr, ip, p, tl, mt, w, d, consts, phys, cm, scratch)


@nb.njit(cache=True)
def _store_lb(v, vf, vi):  # pragma: no cover - numba
    """Store the lower bound of a vertex that is not explored (solved, dead or unexplored)."""
    st = vi[v, V_STATE]
    if st == SOLVED:
        vf[v, V_LB] = vf[v, V_VAL]
    elif st == DEAD:
        vf[v, V_LB] = _INF
    else:
        vf[v, V_LB] = vf[v, V_H]


@nb.njit(cache=True)
def _lb(v, vf):  # pragma: no cover - numba
    """Current lower bound on the cost of v's best sub-hierarchy (kept up to date in ``V_LB``)."""
    return vf[v, V_LB]


@nb.njit(cache=True)
def _complete(v, vf):  # pragma: no cover - numba
    """Whether v is solved (its solved cost is finite exactly then)."""
    return vf[v, V_VAL] < _INF


# ---------------------------------------------------------------------- heaps
@nb.njit(cache=True)
def _less(a, b, ef, ei):  # pragma: no cover - numba
    fa = ef[a, 0]
    fb = ef[b, 0]
    if fa != fb:
        return fa < fb
    if ei[a, 2] != ei[b, 2]:
        return ei[a, 2] > ei[b, 2]
    if ei[a, 0] != ei[b, 0]:
        return ei[a, 0] < ei[b, 0]
    return a < b


@nb.njit(cache=True)
def _sift_down(hp, off, n, i, ef, ei):  # pragma: no cover - numba
    while True:
        lft = 2 * i + 1
        if lft >= n:
            return
        best = lft
        rgt = lft + 1
        if rgt < n and _less(hp[off + rgt], hp[off + lft], ef, ei):
            best = rgt
        if _less(hp[off + best], hp[off + i], ef, ei):
            tmp = hp[off + best]
            hp[off + best] = hp[off + i]
            hp[off + i] = tmp
            i = best
        else:
            return


@nb.njit(cache=True)
def _finish_vertex(x, vf, vi, ef, ei, hp, ctr):  # pragma: no cover - numba
    """Heapify the entries pushed for ``x`` since ``C_ESTART`` and set its state."""
    off = ctr[C_ESTART]
    n = ctr[C_NE] - off
    for j in range(n):
        hp[off + j] = off + j
    for j in range(n // 2 - 1, -1, -1):
        _sift_down(hp, off, n, j, ef, ei)
    vi[x, V_OFF] = off
    vi[x, V_LEN] = n
    ctr[C_EXPLORED] += 1
    _set_state(x, vf, vi, ef, ei, hp)


@nb.njit(cache=True)
def _set_state(x, vf, vi, ef, ei, hp):  # pragma: no cover - numba
    n = vi[x, V_LEN]
    if n == 0:
        vi[x, V_STATE] = DEAD
        vf[x, V_VAL] = _INF
        vf[x, V_LB] = _INF
        return
    top = hp[vi[x, V_OFF]]
    f = ef[top, 0]
    if f == _INF:
        vi[x, V_STATE] = DEAD
        vf[x, V_VAL] = _INF
        vf[x, V_LB] = _INF
    elif ei[top, 2] != 0:
        vi[x, V_STATE] = SOLVED
        vf[x, V_VAL] = f
        vf[x, V_LB] = f
    else:
        vi[x, V_STATE] = EXPLORED
        vf[x, V_VAL] = _INF
        h = vf[x, V_H]
        vf[x, V_LB] = f if f > h else h


@nb.njit(cache=True)
def _parent(code, x, vf, c):  # pragma: no cover - numba
    """x's parent terms for :func:`_psi` (:func:`parent_terms`; unused by a cost model)."""
    if code == GINKGO_CODE:
        return parent_terms(vf[x, V_T], c)
    return np.nan, np.nan, np.nan


@nb.njit(cache=True)
def _psi(code, x, l, r, vf, c, pt):  # pragma: no cover - numba
    """Log-likelihood ψ of the split (l, r) of x (minus the split cost for a cost model).

    ``pt = _parent(code, x, vf, c)``, computed once per vertex (ψ is the same as
    :func:`split_llh`'s, bit for bit)."""
    if code == GINKGO_CODE:
        return split_llh_given_parent(vf[l, V_T], vf[r, V_T], vf[x, V_T], pt[0], pt[1], pt[2], c)
    return -split_cost_kernel(code, vf[l], vf[r], vf[x])


_CHUNK = 512  # splits scored per call of _push_entries


@nb.njit(cache=True)
def _push_entries(x, buf, m, vf, ef, ei, ctr, code, c, pt):  # pragma: no cover - numba
    """Score the splits ``(buf[0, q], buf[1, q])``, ``q < m``, of x and append the entries that can
    be finite.

    Callers collect a chunk of splits and call this once per chunk, so that the per-split work
    touches only plain array elements: inlining array-taking helpers into a caller's loop makes
    numba update reference counts (atomically) per iteration, which cost a third of the search.
    """
    t_x = vf[x, V_T]
    for q in range(m):
        l = buf[0, q]
        r = buf[1, q]
        # _psi, _lb and _complete written out: as inlined calls they would update reference counts
        if code == GINKGO_CODE:
            psi = split_llh_given_parent(vf[l, V_T], vf[r, V_T], t_x, pt[0], pt[1], pt[2], c)
        else:
            psi = -split_cost_kernel(code, vf[l], vf[r], vf[x])
        ctr[C_SPLITS] += 1
        if psi == -_INF:
            continue
        f = vf[l, V_LB] + vf[r, V_LB] - psi
        if f == _INF:
            ctr[C_PRUNED] += 1
            continue
        e = ctr[C_NE]
        ctr[C_NE] = e + 1
        ef[e, 0] = f
        ei[e, 0] = l
        ei[e, 1] = r
        ei[e, 2] = 1 if (vf[l, V_VAL] < _INF and vf[r, V_VAL] < _INF) else 0
        ctr[C_PUSHES] += 1


# ---------------------------------------------------------------------- exploration
@nb.njit(cache=True)
def _explore_all(x, quota, vf, vi, ht, ef, ei, hp, ctr, ip, p, tl, mt, w, d, consts, phys, cm,
                 scratch, elems):  # pragma: no cover - numba
    """Push every 2-partition of x (Gray-code order, resumable). Returns a status."""
    k = _members(vi[x, V_LO], vi[x, V_HI], elems)
    m = k - 1
    total = np.int64(1) << m
    c = consts[1] if x == ctr[C_ROOT] else consts[0]
    pt = _parent(ip[P_MODEL], x, vf, c)
    if ctr[C_CODE] == 0:
        ctr[C_ESTART] = ctr[C_NE]
    # rebuild the left mask of Gray index ctr[C_CODE]
    i = ctr[C_CODE]
    code = i ^ (i >> 1)
    llo = np.int64(0)
    lhi = np.int64(0)
    e0 = elems[0]
    if e0 < 64:
        llo |= np.int64(1) << e0
    else:
        lhi |= np.int64(1) << (e0 - 64)
    for j in range(m):
        if (code >> j) & 1:
            ej = elems[j + 1]
            if ej < 64:
                llo |= np.int64(1) << ej
            else:
                lhi |= np.int64(1) << (ej - 64)
    xlo = vi[x, V_LO]
    xhi = vi[x, V_HI]
    full = total - 1
    direct = (ht.shape[0] & 1) == 1  # mask -> id table (exact searches; -1 for unknown masks)
    model = ip[P_MODEL]
    buf = np.empty((2, _CHUNK), dtype=np.int64)
    nbuf = np.int64(0)  # int64, not a literal: one specialisation of the kernels it is passed to
    done = 0
    while True:
        if code != full:
            if ctr[C_NV] + 2 >= vf.shape[0]:
                _push_entries(x, buf, nbuf, vf, ef, ei, ctr, model, c, pt)
                ctr[C_NEED] = 2
                ctr[C_CODE] = i
                return ST_NEED_V
            if (ht.shape[0] & 1) == 0 and 2 * (ctr[C_NV] + 2) >= ht.shape[0]:
                _push_entries(x, buf, nbuf, vf, ef, ei, ctr, model, c, pt)
                ctr[C_CODE] = i
                return ST_NEED_H
            rlo = xlo ^ llo
            rhi = xhi ^ lhi
            l = ht[llo] if direct else -1
            if l < 0:
                l = _get(llo, lhi, vf, vi, ht, ctr, ip, p, tl, mt, w, d, consts, phys, cm, scratch)
            r = ht[rlo] if direct else -1
            if r < 0:
                r = _get(rlo, rhi, vf, vi, ht, ctr, ip, p, tl, mt, w, d, consts, phys, cm, scratch)
            buf[0, nbuf] = l
            buf[1, nbuf] = r
            nbuf += 1
            if nbuf == _CHUNK:
                _push_entries(x, buf, nbuf, vf, ef, ei, ctr, model, c, pt)
                nbuf = np.int64(0)
            done += 1
        i += 1
        if i >= total:
            break
        # flip the bit that changes between Gray codes i-1 and i
        j = 0
        while ((i >> j) & 1) == 0:
            j += 1
        code ^= np.int64(1) << j
        ej = elems[j + 1]
        if ej < 64:
            llo ^= np.int64(1) << ej
        else:
            lhi ^= np.int64(1) << (ej - 64)
        if done >= quota:
            _push_entries(x, buf, nbuf, vf, ef, ei, ctr, model, c, pt)
            ctr[C_CODE] = i
            return ST_WORK
    _push_entries(x, buf, nbuf, vf, ef, ei, ctr, model, c, pt)
    ctr[C_CODE] = 0
    _finish_vertex(x, vf, vi, ef, ei, hp, ctr)
    return -1


@nb.njit(cache=True)
def _add_cand(x, l, r, vi, cp, ctr):  # pragma: no cover - numba
    """Append split (l, r) to x's candidate list unless present. Returns 1 if added."""
    j = vi[x, V_CAND]
    while j >= 0:
        if (cp[j, 1] == l and cp[j, 2] == r) or (cp[j, 1] == r and cp[j, 2] == l):
            return 0
        j = cp[j, 0]
    j = ctr[C_NCAND]
    ctr[C_NCAND] += 1
    cp[j, 0] = vi[x, V_CAND]
    cp[j, 1] = l
    cp[j, 2] = r
    vi[x, V_CAND] = j
    return 1


@nb.njit(cache=True)
def _explore_sampled(x, vf, vi, ht, ef, ei, hp, cp, ctr, ip, p, tl, mt, w, d, consts, phys, cm,
                     scratch, elems):  # pragma: no cover - numba
    """Sparse exploration: sample 2-partitions, keep the best K by ψ, plus known candidates."""
    k = _members(vi[x, V_LO], vi[x, V_HI], elems)
    ns = ip[P_NSAMPLES]
    topk = ip[P_TOPK]
    if ctr[C_NV] + 2 * ns + 2 >= vf.shape[0]:
        ctr[C_NEED] = 2 * ns + 2
        return ST_NEED_V
    if (ht.shape[0] & 1) == 0 and 2 * (ctr[C_NV] + 2 * ns + 2) >= ht.shape[0]:
        return ST_NEED_H
    if ctr[C_NCAND] + topk + 1 >= cp.shape[0]:
        ctr[C_NEED] = topk + 1
        return ST_NEED_C
    ncand = 0
    j = vi[x, V_CAND]
    while j >= 0:
        ncand += 1
        j = cp[j, 0]
    if ctr[C_NE] + ncand + topk + 1 >= ef.shape[0]:
        ctr[C_NEED] = ncand + topk + 1
        return ST_NEED_E
    c = consts[1] if x == ctr[C_ROOT] else consts[0]
    pt = _parent(ip[P_MODEL], x, vf, c)
    xlo = vi[x, V_LO]
    xhi = vi[x, V_HI]
    e0 = elems[0]
    perm = elems[:k].copy()
    s_lo = np.empty(ns, dtype=np.int64)
    s_hi = np.empty(ns, dtype=np.int64)
    s_psi = np.empty(ns)
    s_l = np.empty(ns, dtype=np.int64)
    s_r = np.empty(ns, dtype=np.int64)
    nu = 0
    for _ in range(ns):
        for a in range(k - 1, 0, -1):
            b = np.random.randint(0, a + 1)  # noqa: NPY002 (numba's generator)
            tmp = perm[a]
            perm[a] = perm[b]
            perm[b] = tmp
        cut = np.random.randint(1, k)  # noqa: NPY002 (numba's generator)
        llo = np.int64(0)
        lhi = np.int64(0)
        has0 = False
        for a in range(cut):
            ea = perm[a]
            if ea == e0:
                has0 = True
            if ea < 64:
                llo |= np.int64(1) << ea
            else:
                lhi |= np.int64(1) << (ea - 64)
        if not has0:
            llo = xlo ^ llo
            lhi = xhi ^ lhi
        dup = False
        for q in range(nu):
            if s_lo[q] == llo and s_hi[q] == lhi:
                dup = True
                break
        if dup:
            continue
        l = _get(llo, lhi, vf, vi, ht, ctr, ip, p, tl, mt, w, d, consts, phys, cm, scratch)
        r = _get(xlo ^ llo, xhi ^ lhi, vf, vi, ht, ctr, ip, p, tl, mt, w, d, consts, phys, cm, scratch)
        ctr[C_SPLITS] += 1
        s_lo[nu] = llo
        s_hi[nu] = lhi
        s_psi[nu] = _psi(ip[P_MODEL], x, l, r, vf, c, pt)
        s_l[nu] = l
        s_r[nu] = r
        nu += 1
    key = s_psi[:nu].copy()
    if ip[P_RANK] == 1:
        # rank by the split's estimated value ψ + h(L) + h(R) instead of ψ alone
        for q in range(nu):
            key[q] = s_psi[q] - _lb(s_l[q], vf) - _lb(s_r[q], vf)
    order = argsort_stable(-key)
    kept = 0
    for q in range(nu):
        if kept >= topk:
            break
        a = order[q]
        if key[a] == -_INF:
            break
        kept += _add_cand(x, s_l[a], s_r[a], vi, cp, ctr)
    ctr[C_ESTART] = ctr[C_NE]
    buf = np.empty((2, ncand + kept), dtype=np.int64)
    nbuf = np.int64(0)  # int64, not a literal: one specialisation of the kernels it is passed to
    j = vi[x, V_CAND]
    while j >= 0:
        buf[0, nbuf] = cp[j, 1]
        buf[1, nbuf] = cp[j, 2]
        nbuf += 1
        j = cp[j, 0]
    _push_entries(x, buf, nbuf, vf, ef, ei, ctr, ip[P_MODEL], c, pt)
    _finish_vertex(x, vf, vi, ef, ei, hp, ctr)
    return -1


# ---------------------------------------------------------------------- small clusters by DP
@nb.njit(cache=True)
def _local_dp(elems, k, p, tl, cm, code, c_in, c_top, best, arg, max_size):  # pragma: no cover
    """Exact subset DP over the k leaves ``elems[:k]`` (all 2**k subsets, O(3**k)).

    Subsets of more than ``max_size`` leaves are skipped (left at −∞; pass ``k`` for all).

    Fills ``best`` (log-likelihood, inner λ; ``c_top`` for the full set; minus the minimum cost for
    a cost model) and ``arg`` (left part of the best split, local mask) and returns the number of
    splits scored. Ginkgo: :func:`jetastar.ginkgo.small_clusters.subset_dp`; a cost model: the same
    recurrence over the features ``(P, N, W, size)`` of each subset (from the cost model's own
    feature kernel on the cluster's sub-matrices).
    """
    if code == GINKGO_CODE:
        return subset_dp(elems, k, p, tl, c_in, c_top, best, arg, max_size)
    nm = 1 << k
    sub_cm = np.empty((3, k, k))
    for a in range(k):
        for b in range(k):
            for q in range(3):
                sub_cm[q, a, b] = cm[q, elems[a], elems[b]]
    rec = all_subset_features_kernel(sub_cm[0], sub_cm[1], sub_cm[2])
    n_splits = 0
    for m in range(1, nm):
        arg[m] = 0
        if rec[m, 3] == 1.0:
            best[m] = 0.0
            continue
        if rec[m, 3] > max_size:
            best[m] = -_INF
            continue
        low = m & (-m)
        rest = m ^ low
        sub = (rest - 1) & rest
        bv = -_INF
        ba = low
        while True:
            a = low | sub
            b = m ^ a
            if best[a] > -_INF and best[b] > -_INF:
                v = best[a] + best[b] - split_cost_kernel(code, rec[a], rec[b], rec[m])
                n_splits += 1
                if v > bv:
                    bv = v
                    ba = a
            if sub == 0:
                break
            sub = (sub - 1) & rest
        best[m] = bv
        arg[m] = ba
    return n_splits


@nb.njit(cache=True)
def _solve_by_dp(x, vf, vi, ctr, p, tl, consts, cm, code, elems):  # pragma: no cover - numba
    k = _members(vi[x, V_LO], vi[x, V_HI], elems)
    best = np.empty(1 << k)
    arg = np.empty(1 << k, dtype=np.int64)
    c_top = consts[1] if x == ctr[C_ROOT] else consts[0]
    ctr[C_SPLITS] += _local_dp(elems, k, p, tl, cm, code, consts[0], c_top, best, arg, k)
    ctr[C_EXPLORED] += 1
    ctr[C_DPSOLVED] += 1
    _set_solved(x, best[(1 << k) - 1], vf, vi)


@nb.njit(cache=True)
def _set_solved(x, value, vf, vi):  # pragma: no cover - numba
    """Mark x solved with its exact best log-likelihood ``value`` (dead when −∞)."""
    vi[x, V_LEN] = 0
    if value == -_INF:
        vi[x, V_STATE] = DEAD
        vf[x, V_VAL] = _INF
    else:
        vi[x, V_STATE] = SOLVED
        vf[x, V_VAL] = -value
    vf[x, V_LB] = vf[x, V_VAL]


@nb.njit(cache=True)
def small_cluster_table(n, dpmax, p, tl, consts, cm, code, ctr):  # pragma: no cover - numba
    """Exact value of every cluster of at most ``dpmax`` leaves of an ``n``-leaf problem, by mask.

    One subset DP over the whole jet (``Σ_k C(n,k) 2^(k−1)`` splits, ~5e6 at ``n = 16``, a quarter
    of the trellis) replaces one local DP per small cluster the approximate search reaches (each
    ``3^k / 2`` splits, most of them repeated between overlapping clusters). The leaves are
    ``0 .. n−1``, so a cluster's table index is its bit mask; inner λ everywhere (never used for the
    root). Counts its splits in ``ctr[C_SPLITS]``.
    """
    elems = np.arange(n)
    table = np.empty(1 << n)
    arg = np.empty(1 << n, dtype=np.int64)
    ctr[C_SPLITS] += _local_dp(elems, n, p, tl, cm, code, consts[0], consts[0], table, arg, dpmax)
    return table


@nb.njit(cache=True)
def _dp_clusters(lo, hi, is_root, p, tl, consts, cm, code, out_lo, out_hi, n_out):  # pragma: no cover
    """Append the clusters of the exact best tree over (lo, hi) (local DP)."""
    elems = np.empty(128, dtype=np.int64)
    k = _members(lo, hi, elems)
    best = np.empty(1 << k)
    arg = np.empty(1 << k, dtype=np.int64)
    _local_dp(elems, k, p, tl, cm, code, consts[0], consts[1] if is_root else consts[0], best,
              arg, k)
    stack = np.empty(2 * k + 2, dtype=np.int64)
    top = 1
    stack[0] = (1 << k) - 1
    while top > 0:
        top -= 1
        m = stack[top]
        if m & (m - 1) == 0:
            continue
        clo = np.int64(0)
        chi = np.int64(0)
        for j in range(k):
            if (m >> j) & 1:
                e = elems[j]
                if e < 64:
                    clo |= np.int64(1) << e
                else:
                    chi |= np.int64(1) << (e - 64)
        out_lo[n_out] = clo
        out_hi[n_out] = chi
        n_out += 1
        a = arg[m]
        stack[top] = a
        stack[top + 1] = m ^ a
        top += 2
    return n_out


# ---------------------------------------------------------------------- the machine
@nb.njit(cache=True)
def run(quota, vf, vi, ht, ef, ei, hp, cp, ctr, walk, front, ip, p, tl, mt, w, d, consts, phys, cm,
        scratch, elems, table):  # pragma: no cover - numba
    """Advance the search by about ``quota`` split evaluations. Returns a status (``ST_*``).

    ``table`` holds the exact value of every cluster of at most ``P_DPMAX`` leaves by bit mask
    (small jets of the approximate search, see :func:`small_cluster_table`), or is empty: small
    clusters are then solved by a local DP each."""
    root = ctr[C_ROOT]
    code = ip[P_MODEL]
    start_splits = ctr[C_SPLITS]
    allmax = ip[P_ALLMAX]
    while True:
        phase = ctr[C_PHASE]
        if phase == 0:
            st = vi[root, V_STATE]
            if st == SOLVED:
                return ST_SOLVED
            if st == DEAD:
                return ST_ALLINF
            if ip[P_EXPLORE_MAX] > 0 and ctr[C_EXPLORED] >= ip[P_EXPLORE_MAX]:
                return ST_EXPLORE
            # walk the current best partial tree
            nw = 0
            nf = 0
            stack = scratch  # reuse: the walk stack never exceeds 2 * n
            top = 0
            stack[top] = root
            top += 1
            while top > 0:
                top -= 1
                v = stack[top]
                s = vi[v, V_STATE]
                if s == SOLVED or s == DEAD:
                    continue
                if s == UNEXPLORED:
                    front[nf] = v
                    nf += 1
                    continue
                walk[nw] = v
                nw += 1
                e = hp[vi[v, V_OFF]]
                stack[top] = ei[e, 1]
                top += 1
                stack[top] = ei[e, 0]
                top += 1
            ctr[C_NWALK] = nw
            ctr[C_NFRONT] = nf
            ctr[C_FIDX] = 0
            ctr[C_CODE] = 0
            ctr[C_ITER] += 1
            ctr[C_PHASE] = 1
        elif phase == 1:
            while ctr[C_FIDX] < ctr[C_NFRONT]:
                x = front[ctr[C_FIDX]]
                if vi[x, V_STATE] != UNEXPLORED:
                    ctr[C_FIDX] += 1
                    continue
                size = vi[x, V_SIZE]
                if size <= ip[P_DPMAX]:
                    if table.shape[0] > 0 and x != root:
                        _set_solved(x, table[vi[x, V_LO]], vf, vi)
                        ctr[C_EXPLORED] += 1
                        ctr[C_DPSOLVED] += 1
                    else:
                        _solve_by_dp(x, vf, vi, ctr, p, tl, consts, cm, code, elems)
                    st = -1
                elif allmax < 0 or size <= allmax or (x == root and size <= ip[P_ROOTALL]):
                    if ctr[C_CODE] == 0:
                        need = (np.int64(1) << (size - 1)) - 1 if size < 62 else (
                            np.int64(1) << 61
                        )
                        if ctr[C_NE] + need > ef.shape[0]:
                            ctr[C_NEED] = need
                            return ST_NEED_E
                    used = ctr[C_SPLITS] - start_splits
                    left = quota - used
                    if left < 1:
                        left = 1
                    st = _explore_all(x, left, vf, vi, ht, ef, ei, hp, ctr, ip, p, tl, mt, w,
                                      d, consts, phys, cm, scratch, elems)
                else:
                    st = _explore_sampled(x, vf, vi, ht, ef, ei, hp, cp, ctr, ip, p, tl, mt,
                                          w, d, consts, phys, cm, scratch, elems)
                if st >= 0:
                    return st
                ctr[C_FIDX] += 1
                if ctr[C_SPLITS] - start_splits >= quota:
                    return ST_WORK
            ctr[C_PHASE] = 2
        else:
            # bottom-up update of the walked vertices
            for q in range(ctr[C_NWALK] - 1, -1, -1):
                v = walk[q]
                if vi[v, V_STATE] != EXPLORED:
                    continue
                cv = consts[1] if v == root else consts[0]
                pt = _parent(code, v, vf, cv)
                off = vi[v, V_OFF]
                n = vi[v, V_LEN]
                # refresh the best entry until it is up to date (stale entries only rise)
                while True:
                    e = hp[off]
                    l = np.int64(ei[e, 0])  # int64 like the other callers: one specialisation
                    r = np.int64(ei[e, 1])
                    # ψ is recomputed (not stored: 8 bytes less per entry); it is deterministic
                    f = -_psi(code, v, l, r, vf, cv, pt)
                    f += _lb(l, vf) + _lb(r, vf)
                    comp = 1 if (_complete(l, vf) and _complete(r, vf)) else 0
                    if f == ef[e, 0] and comp == ei[e, 2]:
                        break
                    ef[e, 0] = f
                    ei[e, 2] = comp
                    ctr[C_POPS] += 1
                    ctr[C_PUSHES] += 1
                    _sift_down(hp, off, n, np.int64(0), ef, ei)
                _set_state(v, vf, vi, ef, ei, hp)
            ctr[C_PHASE] = 0
            if ctr[C_SPLITS] - start_splits >= quota:
                return ST_WORK


@nb.njit(cache=True)
def reset_round(vf, vi, ctr):  # pragma: no cover - numba
    """Forget every heap (keep vertices, heuristics and candidate lists) for a new round."""
    for v in range(ctr[C_NV]):
        st = vi[v, V_STATE]
        if st == EXPLORED or (st == SOLVED and vi[v, V_LEN] > 0) or (
            st == DEAD and vf[v, V_H] < _INF
        ):
            vi[v, V_STATE] = UNEXPLORED
            vi[v, V_LEN] = 0
            vf[v, V_VAL] = _INF
            vf[v, V_LB] = vf[v, V_H]
    ctr[C_NE] = 0
    ctr[C_PHASE] = 0
    ctr[C_CODE] = 0


@nb.njit(cache=True)
def seed_rng(s):  # pragma: no cover - numba
    """Seed numba's random generator (reproducible sampling)."""
    np.random.seed(s)  # noqa: NPY002 (seeds numba's generator)


@nb.njit(cache=True)
def add_splits(par_lo, par_hi, l_lo, l_hi, vf, vi, ht, cp, ctr, ip, p, tl, mt, w, d, consts,
               phys, cm, scratch):  # pragma: no cover - numba
    """Register seed splits (parent mask, left mask) in the sparse trellis. Returns # added."""
    added = 0
    for q in range(par_lo.shape[0]):
        x = _get(par_lo[q], par_hi[q], vf, vi, ht, ctr, ip, p, tl, mt, w, d, consts, phys, cm, scratch)
        l = _get(l_lo[q], l_hi[q], vf, vi, ht, ctr, ip, p, tl, mt, w, d, consts, phys, cm, scratch)
        r = _get(par_lo[q] ^ l_lo[q], par_hi[q] ^ l_hi[q], vf, vi, ht, ctr, ip, p, tl, mt, w, d,
                 consts, phys, cm, scratch)
        added += _add_cand(x, l, r, vi, cp, ctr)
    return added


# ---------------------------------------------------------------------- trees out
@nb.njit(cache=True)
def _greedy_masks(lo, hi, p, tl, consts, cm, code, out_lo, out_hi, n_out):  # pragma: no cover - numba
    """Bottom-up greedy over the leaves of (lo, hi): the best-ψ merge first (the cheapest merge for a
    cost model); appends its clusters."""
    members = np.empty(128, dtype=np.int64)
    k = _members(lo, hi, members)
    c = consts[0]
    ginkgo = code == GINKGO_CODE
    cl = np.empty(k, dtype=np.int64)
    ch = np.empty(k, dtype=np.int64)
    rec = np.zeros((k, 4))  # summed 4-momentum, or features (P, N, W, size)
    ct = np.zeros(k)
    kx = 1 if ginkgo else k
    xp = np.zeros((kx, kx))  # positive / |negative| weight sums between clusters (cost models)
    xn = np.zeros((kx, kx))
    alive = np.ones(k, dtype=np.bool_)
    for a in range(k):
        i = members[a]
        cl[a] = np.int64(1) << i if i < 64 else 0
        ch[a] = np.int64(1) << (i - 64) if i >= 64 else 0
        if ginkgo:
            for q in range(4):
                rec[a, q] = p[i, q]
            ct[a] = tl[i]
        else:
            rec[a, 3] = 1.0
            for b in range(k):
                xp[a, b] = cm[0, i, members[b]]
                xn[a, b] = cm[1, i, members[b]]
    for _ in range(k - 1):
        ba = -1
        bb = -1
        bv = -_INF
        for a in range(k):
            if not alive[a]:
                continue
            for b in range(a + 1, k):
                if not alive[b]:
                    continue
                if ginkgo:
                    v = split_llh(ct[a], ct[b], t_of(rec[a, 0] + rec[b, 0], rec[a, 1] + rec[b, 1],
                                                     rec[a, 2] + rec[b, 2], rec[a, 3] + rec[b, 3]), c)
                else:
                    v = -merge_cost_kernel(code, rec[a], rec[b], xp[a, b], xn[a, b])
                if ba < 0 or v > bv:
                    ba = a
                    bb = b
                    bv = v
        alive[bb] = False
        cl[ba] |= cl[bb]
        ch[ba] |= ch[bb]
        if ginkgo:
            for q in range(4):
                rec[ba, q] += rec[bb, q]
            size = np.int64(0)  # not a literal: one specialisation of cluster_t
            for word in range(2):
                xw = cl[ba] if word == 0 else ch[ba]
                for bit in range(64):
                    size += (xw >> bit) & 1
            ct[ba] = cluster_t(rec[ba, 0], rec[ba, 1], rec[ba, 2], rec[ba, 3], size, c)
        else:
            px = xp[ba, bb]
            nx = xn[ba, bb]
            rec[ba, 0] += rec[bb, 0] + px
            rec[ba, 1] += rec[bb, 1] + nx
            rec[ba, 2] += rec[bb, 2] + (px - nx)
            rec[ba, 3] += rec[bb, 3]
            for x in range(k):
                if alive[x] and x != ba:
                    xp[ba, x] += xp[bb, x]
                    xp[x, ba] = xp[ba, x]
                    xn[ba, x] += xn[bb, x]
                    xn[x, ba] = xn[ba, x]
        out_lo[n_out] = cl[ba]
        out_hi[n_out] = ch[ba]
        n_out += 1
    return n_out


@nb.njit(cache=True)
def extract(root, vf, vi, ht, ef, ei, hp, p, tl, consts, cm, code, out_lo, out_hi):  # pragma: no cover
    """Clusters of the current best (partial) tree, completed greedily where it is open.

    Returns:
        (number of clusters written, number of vertices completed greedily).
    """
    n_out = np.int64(0)  # int64, not a literal: one specialisation of the kernels it is passed to
    n_greedy = 0
    slo = np.empty(256, dtype=np.int64)
    shi = np.empty(256, dtype=np.int64)
    top = 0
    slo[0] = vi[root, V_LO]
    shi[0] = vi[root, V_HI]
    top = 1
    while top > 0:
        top -= 1
        lo = slo[top]
        hi = shi[top]
        v = find(lo, hi, vi, ht)
        size = 0
        for word in range(2):
            xw = lo if word == 0 else hi
            for b in range(64):
                size += (xw >> b) & 1
        if size == 1:
            continue
        st = vi[v, V_STATE] if v >= 0 else UNEXPLORED
        if v >= 0 and (st == EXPLORED or st == SOLVED) and vi[v, V_LEN] > 0:
            out_lo[n_out] = lo
            out_hi[n_out] = hi
            n_out += 1
            e = hp[vi[v, V_OFF]]
            for side in range(2):
                c = ei[e, side]
                slo[top] = vi[c, V_LO]
                shi[top] = vi[c, V_HI]
                top += 1
        elif v >= 0 and st == SOLVED:
            n_out = _dp_clusters(lo, hi, v == root, p, tl, consts, cm, code, out_lo, out_hi, n_out)
        else:
            n_out = _greedy_masks(lo, hi, p, tl, consts, cm, code, out_lo, out_hi, n_out)
            n_greedy += 1
    return n_out, n_greedy


@nb.njit(cache=True)
def _never_looked_at(c, vi, dpmax):  # pragma: no cover - numba
    """A cluster of 2 .. dpmax leaves that the search has not solved (its value needs a DP)."""
    size = vi[c, V_SIZE]
    return 1 < size <= dpmax and vi[c, V_STATE] == UNEXPLORED


@nb.njit(cache=True)
def best_known(vf, vi, ef, ei, hp, cp, ctr, ip, p, tl, consts, cm, code, out_lo, out_hi,
               table):  # pragma: no cover
    """Best complete tree represented in the explored (sparse) trellis.

    Every vertex reachable from the root through candidate splits (seed trees included) or through
    heap entries whose parts the search has reached is valued exactly within the trellis: solved
    vertices by their value, clusters of at most ``P_DPMAX`` leaves by a local DP (kept: the vertex is
    then solved for later rounds), others by the best of their splits. For a jet of at most
    ``P_ROOTALL`` leaves (the root has every 2-partition) every small part of every heap entry is
    valued from ``table`` (:func:`small_cluster_table`; empty for larger jets). Above that, heap
    entries with a small part the search never reached are left out (one local DP per such part
    would cost more than the search). Seeds are always represented, so the result is never below
    the best seed tree.

    Returns:
        (log-likelihood, number of clusters written to out_lo / out_hi).
    """
    nv = ctr[C_NV]
    root = ctr[C_ROOT]
    dpmax = ip[P_DPMAX]
    # small jets (the root has every 2-partition): every small part is valued from the table
    use_table = table.shape[0] > 0
    reach = np.zeros(nv, dtype=np.bool_)
    leafish = np.zeros(nv, dtype=np.bool_)
    stack = np.empty(nv + 1, dtype=np.int64)
    top = 1
    stack[0] = root
    reach[root] = True
    while top > 0:
        top -= 1
        v = stack[top]
        size = vi[v, V_SIZE]
        st = vi[v, V_STATE]
        if size == 1 or (st == SOLVED and vi[v, V_LEN] == 0) or (
            size <= dpmax and st == UNEXPLORED and v != root
        ):
            leafish[v] = True
            continue
        for q in range(vi[v, V_LEN]):
            e = hp[vi[v, V_OFF] + q]
            l = ei[e, 0]
            r = ei[e, 1]
            if not use_table and (_never_looked_at(l, vi, dpmax) or _never_looked_at(r, vi, dpmax)):
                # a split with a small part the search never reached
                continue
            for side in range(2):
                c = ei[e, side]
                if not reach[c]:
                    reach[c] = True
                    stack[top] = c
                    top += 1
        j = vi[v, V_CAND]
        while j >= 0:
            for side in range(1, 3):
                c = cp[j, side]
                if not reach[c]:
                    reach[c] = True
                    stack[top] = c
                    top += 1
            j = cp[j, 0]
    ids = np.flatnonzero(reach)
    sizes = np.empty(ids.shape[0])
    for q in range(ids.shape[0]):
        sizes[q] = vi[ids[q], V_SIZE]
    order = ids[argsort_stable(sizes)]
    val = np.full(nv, -_INF)
    arg_l = np.full(nv, -1, dtype=np.int64)
    arg_r = np.full(nv, -1, dtype=np.int64)
    elems = np.empty(128, dtype=np.int64)
    for v in order:
        size = vi[v, V_SIZE]
        if size == 1:
            val[v] = 0.0
            continue
        if leafish[v]:
            if vi[v, V_STATE] == SOLVED:
                val[v] = -vf[v, V_VAL]
            elif vi[v, V_STATE] != DEAD and use_table:
                val[v] = table[vi[v, V_LO]]
                _set_solved(v, val[v], vf, vi)
            elif vi[v, V_STATE] != DEAD:
                # exact value by a local DP, kept: the vertex is solved for later rounds
                _solve_by_dp(v, vf, vi, ctr, p, tl, consts, cm, code, elems)
                val[v] = -vf[v, V_VAL]
            arg_l[v] = -2
            continue
        c = consts[1] if v == root else consts[0]
        pt = _parent(code, v, vf, c)
        bv = -_INF
        for q in range(vi[v, V_LEN]):
            e = hp[vi[v, V_OFF] + q]
            l = np.int64(ei[e, 0])  # int64 like the other callers of _psi: one specialisation
            r = np.int64(ei[e, 1])
            x = _psi(code, v, l, r, vf, c, pt) + val[l] + val[r]
            if x > bv:
                bv = x
                arg_l[v] = l
                arg_r[v] = r
        j = vi[v, V_CAND]
        while j >= 0:
            l = cp[j, 1]
            r = cp[j, 2]
            if val[l] > -_INF and val[r] > -_INF:
                x = _psi(code, v, l, r, vf, c, pt) + val[l] + val[r]
                if x > bv:
                    bv = x
                    arg_l[v] = l
                    arg_r[v] = r
            j = cp[j, 0]
        val[v] = bv
    if val[root] == -_INF:
        return -_INF, 0
    n_out = np.int64(0)  # int64, not a literal: one specialisation of the kernels it is passed to
    top = 1
    stack[0] = root
    while top > 0:
        top -= 1
        v = stack[top]
        if vi[v, V_SIZE] == 1:
            continue
        if arg_l[v] == -2:
            n_out = _dp_clusters(vi[v, V_LO], vi[v, V_HI], v == root, p, tl, consts, cm, code, out_lo,
                                 out_hi, n_out)
            continue
        out_lo[n_out] = vi[v, V_LO]
        out_hi[n_out] = vi[v, V_HI]
        n_out += 1
        stack[top] = arg_l[v]
        stack[top + 1] = arg_r[v]
        top += 2
    return val[root], n_out


@nb.njit(cache=True)
def root_bound(vf, vi, ef, hp, ctr):  # pragma: no cover - numba
    """Proven lower bound on the optimal cost (the root's best f)."""
    root = ctr[C_ROOT]
    st = vi[root, V_STATE]
    if st == SOLVED:
        return vf[root, V_VAL]
    if st == DEAD:
        return _INF
    if st == EXPLORED:
        return ef[hp[vi[root, V_OFF]], 0]
    return -_INF


@nb.njit(cache=True)
def subset_map(p, consts):  # pragma: no cover - numba
    """Exact best log-likelihood of every subset mask (inner λ everywhere), O(3^n). Test oracle."""
    n = p.shape[0]
    c = consts[0]
    tl = np.empty(n)
    for i in range(n):
        tl[i] = cluster_t(p[i, 0], p[i, 1], p[i, 2], p[i, 3], np.int64(1), c)
    best = np.empty(1 << n)
    arg = np.empty(1 << n, dtype=np.int64)
    subset_dp(np.arange(n), n, p, tl, c, c, best, arg, n)
    return best
