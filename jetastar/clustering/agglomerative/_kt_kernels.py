"""numba kernels of the kt family (:mod:`.kt`): the sequential recombination of kt,
Cambridge/Aachen and anti-kt with FastJet's conventions (distances, rapidities, nearest
neighbours), and the rapidity check of a jet's leaves.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from ..._jit import kernel_helper
from ...momenta import rap_phi_kt2

__all__ = ["NN_MIN_LEAVES", "NN_SCAN_BELOW", "history_of", "kt_history", "kt_history_nn",
           "kt_history_scan", "rapidity_problem"]

_TWOPI = 2.0 * math.pi


@nb.njit(cache=True)
def _scale(kt2, power):  # pragma: no cover - numba
    """FastJet's jet_scale_for_algorithm: kt^(2p)."""
    if power == 1:
        return kt2
    if power == 0:
        return 1.0
    if kt2 > 1e-300:
        return 1.0 / kt2
    return 1e300


@nb.njit(cache=True)
def _delta_r2(rap1, phi1, rap2, phi2):  # pragma: no cover - numba
    dphi = abs(phi1 - phi2)
    if dphi > math.pi:
        dphi = _TWOPI - dphi
    deta = rap1 - rap2
    return dphi * dphi + deta * deta


#: from this many leaves on, :func:`kt_history` keeps nearest neighbours (O(n²)); smaller jets are
#: scanned in full at every step (O(n³), but faster there). Measured 2026 (CPU µs per jet, Ginkgo
#: QCD jets, scan / nearest neighbours): 5.0 / 6.1 at 20 leaves, 15.4 / 15.2 at 36, 19.9 / 17.8
#: at 40, 46 / 28 at 56.
NN_MIN_LEAVES = 36
#: :func:`kt_history_nn` scans in full once fewer particles than this are left (faster there)
NN_SCAN_BELOW = 20


@kernel_helper
def _nearest(k, m, rap, phi):  # pragma: no cover - numba
    """The particle (position ``< m``) closest to ``k`` in ΔR², and that ΔR² (``-1, inf`` if none
    is closer than infinity)."""
    best = np.inf
    arg = -1
    rk = rap[k]
    pk = phi[k]
    for x in range(m):
        if x != k:
            d = _delta_r2(rk, pk, rap[x], phi[x])
            if d < best:
                best = d
                arg = x
    return arg, best


@kernel_helper
def _choose_rescan(m, rap, phi, scale, r2):  # pragma: no cover - numba
    """The step's winner by a scan of every candidate: ``(i, j)`` for the pair ``i < j``,
    ``(i, -1)`` for the beam distance of ``i``, ``(-1, -1)`` if no distance is below infinity;
    and the number of pair distances computed. The first minimum wins in the scan order: for
    ``i`` ascending, ``d_iB`` and then ``d_ij`` for ``j > i`` ascending."""
    best = np.inf
    bi = -1
    bj = -1
    for i in range(m):
        d_ib = scale[i] * r2
        if d_ib < best:
            best = d_ib
            bi = i
            bj = -1
        for j in range(i + 1, m):
            d = min(scale[i], scale[j]) * _delta_r2(rap[i], phi[i], rap[j], phi[j])
            if d < best:
                best = d
                bi = i
                bj = j
    return bi, bj, m * (m - 1) // 2


@kernel_helper
def _choose_nn(m, rap, phi, scale, r2, nn, nnd, dd):  # pragma: no cover - numba
    """:func:`_choose_rescan`'s winner, from the nearest neighbours ``nn`` (ΔR² ``nnd``).

    The smallest distance: each particle's candidate ``dd[c] = min(d_cB, d_c,nn[c])`` is a real
    distance, and if ``(i, j)`` has the smallest distance ``d*`` and ``c`` is the one of the two
    with the smaller scale ``s``, then ``dd[c] <= s_c ΔR²_c,nn[c] <= s_c ΔR²_ij = d*`` (a product
    rounds monotonically), so ``min dd = d*``. The same holds for every candidate that ties with
    ``d*``: its smaller-scale particle (or, for a beam distance, its particle) has ``dd == d*``.
    So the distances of the particles with ``dd == d*`` to all others decide the tie as the full
    scan does (the first in scan order: smallest row ``min(i, j)``, then the beam, then ``j``).
    """
    best = np.inf
    for k in range(m):
        v = scale[k] * r2
        j = nn[k]
        if j >= 0:
            dp = min(scale[k], scale[j]) * nnd[k]
            if dp < v:
                v = dp
        dd[k] = v
        if v < best:
            best = v
    if not best < np.inf:
        return -1, -1, 0
    # the first candidate in scan order at distance best: key (bi, bj), a beam is bj = -1
    bi = m
    bj = m
    evals = 0
    for c in range(m):
        if dd[c] != best:
            continue
        sc = scale[c]
        for x in range(min(c, bi + 1)):  # pairs (x, c) of the rows x < c, x <= bi
            evals += 1
            if min(scale[x], sc) * _delta_r2(rap[x], phi[x], rap[c], phi[c]) == best:
                if x < bi or c < bj:
                    bi = x
                    bj = c
                break
        if c > bi:
            continue
        # here c < bi (every key so far has a row below c, or is c's own (x, c) with x < c)
        if sc * r2 == best:  # the beam comes first in its row
            bi = c
            bj = -1
            continue
        for x in range(c + 1, m):  # pairs (c, x) of the row c
            evals += 1
            if min(sc, scale[x]) * _delta_r2(rap[c], phi[c], rap[x], phi[x]) == best:
                bi = c
                bj = x
                break
    if bi == m:  # not reached with finite momenta (a NaN distance, e.g. 0 · inf): scan
        bi, bj, e = _choose_rescan(m, rap, phi, scale, r2)
        evals += e
    return bi, bj, evals


@kernel_helper
def _redo_nearest(nr, redo, m, rap, phi, nn, nnd):  # pragma: no cover - numba
    """Nearest neighbours of the particles ``redo[:nr]`` again; returns the distances computed."""
    for r in range(nr):
        k = redo[r]
        nn[k], nnd[k] = _nearest(k, m, rap, phi)
    return nr * (m - 1)


@nb.njit(cache=True)
def kt_history(leaves, power, r2):  # pragma: no cover - numba
    """Generalized-kt merge history of ``leaves`` ``(n, 4)`` with exponent ``power`` and ``R² = r2``.

    Returns ``(history, number of beam recombinations, pair distances computed)`` (numba
    kernel). At each step the smallest distance wins, and among equal ones the first in the order
    of a full scan: for the particles' positions ``i`` ascending, ``d_iB`` and then ``d_ij`` for
    ``j > i`` ascending (a removed particle's slot is taken by the last particle). Below
    :data:`NN_MIN_LEAVES` leaves :func:`kt_history_scan` scans every pair at every step (O(n³));
    from there on :func:`kt_history_nn` keeps nearest neighbours (O(n²)), with the same history.
    """
    if leaves.shape[0] < NN_MIN_LEAVES:
        return kt_history_scan(leaves, power, r2)
    return kt_history_nn(leaves, power, r2, np.int64(NN_SCAN_BELOW))


def history_of(leaves: np.ndarray, power: int, r2: float) -> tuple[np.ndarray, int, int]:
    """:func:`kt_history` with its choice of kernel made in Python (the same kernels, so the same
    history): a process that clusters only jets below :data:`NN_MIN_LEAVES` leaves compiles only
    :func:`kt_history_scan` (~2 CPU-s on a cold cache) instead of both kernels and the
    dispatcher (~8 CPU-s). The chunk kernels call :func:`kt_history` itself.

    Args:
        leaves: ``(n, 4)`` float64, C-contiguous.
        power: the exponent ``p`` (``np.int64``: 1 kt, 0 Cambridge/Aachen, -1 anti-kt).
        r2: ``R²``.

    Returns:
        As :func:`kt_history`.
    """
    if leaves.shape[0] < NN_MIN_LEAVES:
        return kt_history_scan(leaves, power, r2)
    return kt_history_nn(leaves, power, r2, np.int64(NN_SCAN_BELOW))


@kernel_helper
def _particles(leaves, power):  # pragma: no cover - numba
    """The working copies of the leaves: 4-vectors, rapidities, azimuths, scales ``kt^(2p)`` and
    node ids."""
    n = leaves.shape[0]
    p = np.empty((n, 4), dtype=np.float64)
    rap = np.empty(n, dtype=np.float64)
    phi = np.empty(n, dtype=np.float64)
    scale = np.empty(n, dtype=np.float64)
    node = np.empty(n, dtype=np.int64)
    for i in range(n):
        for d in range(4):
            p[i, d] = leaves[i, d]
        rap[i], phi[i], kt2 = rap_phi_kt2(p[i, 0], p[i, 1], p[i, 2], p[i, 3])
        scale[i] = _scale(kt2, power)
        node[i] = i
    return p, rap, phi, scale, node


@kernel_helper
def _merge(bi, bj, new, power, p, rap, phi, scale, node):  # pragma: no cover - numba
    """Particle ``bj`` added to ``bi`` (E-scheme), which becomes node ``new``."""
    for d in range(4):
        p[bi, d] = p[bi, d] + p[bj, d]
    rap[bi], phi[bi], kt2 = rap_phi_kt2(p[bi, 0], p[bi, 1], p[bi, 2], p[bi, 3])
    scale[bi] = _scale(kt2, power)
    node[bi] = new


@kernel_helper
def _move(src, dst, p, rap, phi, scale, node):  # pragma: no cover - numba
    """Particle ``src`` copied into the slot ``dst``."""
    for d in range(4):
        p[dst, d] = p[src, d]
    rap[dst] = rap[src]
    phi[dst] = phi[src]
    scale[dst] = scale[src]
    node[dst] = node[src]


@nb.njit(cache=True)
def kt_history_scan(leaves, power, r2):  # pragma: no cover - numba
    """:func:`kt_history` by a scan of every pair at every step (O(n³), the fastest for small
    jets). Written out in one function: with the helpers of :func:`kt_history_nn` (or its loop in
    a function of its own) it is 10-25 % slower at 20 leaves."""
    n = leaves.shape[0]
    p = np.empty((n, 4), dtype=np.float64)
    rap = np.empty(n, dtype=np.float64)
    phi = np.empty(n, dtype=np.float64)
    scale = np.empty(n, dtype=np.float64)
    node = np.empty(n, dtype=np.int64)
    for i in range(n):
        for d in range(4):
            p[i, d] = leaves[i, d]
        rap[i], phi[i], kt2 = rap_phi_kt2(p[i, 0], p[i, 1], p[i, 2], p[i, 3])
        scale[i] = _scale(kt2, power)
        node[i] = i
    history = np.full((max(n - 1, 1), 2), -1, dtype=np.int64)
    m = n
    step = 0
    beams = 0
    evals = 0
    while m > 1:
        best = np.inf
        bi = -1
        bj = -1
        for i in range(m):
            d_ib = scale[i] * r2
            if d_ib < best:
                best = d_ib
                bi = i
                bj = -1
            for j in range(i + 1, m):
                d = min(scale[i], scale[j]) * _delta_r2(rap[i], phi[i], rap[j], phi[j])
                if d < best:
                    best = d
                    bi = i
                    bj = j
        evals += m * (m - 1) // 2
        if bj < 0:
            # beam recombination: i becomes a final jet (none below infinity: bi = -1 indexes
            # the last row, a free slot or the last particle itself, so the last one)
            beams += 1
            m -= 1
            for d in range(4):
                p[bi, d] = p[m, d]
            rap[bi] = rap[m]
            phi[bi] = phi[m]
            scale[bi] = scale[m]
            node[bi] = node[m]
            continue
        history[step, 0] = node[bi]
        history[step, 1] = node[bj]
        for d in range(4):
            p[bi, d] = p[bi, d] + p[bj, d]
        rap[bi], phi[bi], kt2 = rap_phi_kt2(p[bi, 0], p[bi, 1], p[bi, 2], p[bi, 3])
        scale[bi] = _scale(kt2, power)
        node[bi] = n + step
        step += 1
        m -= 1
        for d in range(4):
            p[bj, d] = p[m, d]
        rap[bj] = rap[m]
        phi[bj] = phi[m]
        scale[bj] = scale[m]
        node[bj] = node[m]
    return history, beams, evals


@nb.njit(cache=True)
def kt_history_nn(leaves, power, r2, scan_below):  # pragma: no cover - numba
    """:func:`kt_history` with nearest neighbours (FastJet's NNH strategy): each particle keeps
    its nearest neighbour in ΔR²; after a step only the particles whose neighbour took part are
    searched again, the others are compared with the new particle. O(n²); the same history as
    :func:`kt_history_scan` (see :func:`_choose_nn` for the ties). Once fewer than
    ``scan_below`` particles are left (:data:`NN_SCAN_BELOW`; 2: never), every step scans all
    pairs, which is faster there."""
    n = leaves.shape[0]
    p, rap, phi, scale, node = _particles(leaves, power)
    history = np.full((max(n - 1, 1), 2), -1, dtype=np.int64)
    nn = np.full(n, -1, dtype=np.int64)
    nnd = np.full(n, np.inf, dtype=np.float64)
    dd = np.empty(n, dtype=np.float64)
    redo = np.empty(n, dtype=np.int64)
    evals = 0
    if n >= scan_below:
        for i in range(n):
            for j in range(i + 1, n):
                d = _delta_r2(rap[i], phi[i], rap[j], phi[j])
                if d < nnd[i]:
                    nnd[i] = d
                    nn[i] = j
                if d < nnd[j]:
                    nnd[j] = d
                    nn[j] = i
        evals = n * (n - 1) // 2
    m = n
    step = 0
    beams = 0
    while m > 1:
        if m < scan_below:
            # the rest by full scans: the same positions, rapidities, azimuths and scales (computed
            # from the same 4-vectors), so the same steps; their node ids renumbered
            rest = np.empty((m, 4), dtype=np.float64)
            for i in range(m):
                for d in range(4):
                    rest[i, d] = p[i, d]
            tail, tail_beams, e = kt_history_scan(rest, power, r2)
            evals += e
            beams += tail_beams
            for s in range(m - 1 - tail_beams):
                for c in range(2):
                    k = tail[s, c]
                    history[step + s, c] = node[k] if k < m else n + step + k - m
            break
        keep = m > scan_below  # nearest neighbours still needed after this step
        bi, bj, e = _choose_nn(m, rap, phi, scale, r2, nn, nnd, dd)
        evals += e
        last = m - 1
        m -= 1
        if bj < 0:
            # beam recombination: bi becomes a final jet (none below infinity: the last one)
            beams += 1
            gone = bi if bi >= 0 else last
            if gone != last:
                _move(last, gone, p, rap, phi, scale, node)
                nn[gone] = nn[last]
                nnd[gone] = nnd[last]
            if not keep:
                continue
            nr = np.int64(0)
            for k in range(m):
                t = nn[k]
                if t == gone:
                    redo[nr] = k
                    nr += 1
                elif t == last:
                    nn[k] = gone
            evals += _redo_nearest(nr, redo, m, rap, phi, nn, nnd)
            continue
        history[step, 0] = node[bi]
        history[step, 1] = node[bj]
        _merge(bi, bj, n + step, power, p, rap, phi, scale, node)
        step += 1
        if bj != last:
            _move(last, bj, p, rap, phi, scale, node)
            nn[bj] = nn[last]
            nnd[bj] = nnd[last]
        if not keep:
            continue
        # the new particle bi: its nearest neighbour, and it may be the others' nearest
        nr = np.int64(0)
        near = np.inf
        arg = -1
        rb = rap[bi]
        pb = phi[bi]
        for k in range(m):
            if k == bi:
                continue
            d = _delta_r2(rap[k], phi[k], rb, pb)
            if d < near:
                near = d
                arg = k
            t = nn[k]
            if t == bi or t == bj:
                redo[nr] = k
                nr += 1
            else:
                if t == last:
                    nn[k] = bj
                if d < nnd[k]:
                    nnd[k] = d
                    nn[k] = bi
        nn[bi] = arg
        nnd[bi] = near
        evals += m - 1 + _redo_nearest(nr, redo, m, rap, phi, nn, nnd)
    return history, beams, evals


@nb.njit(cache=True)
def rapidity_problem(leaves, a, b):  # pragma: no cover - numba
    """The first leaf of ``leaves[a:b]`` without a computable rapidity (index within the jet), or
    ``-1``: ``(kt² + m²) / (E + |pz|)²`` must not underflow to 0/0 (a leaf of E ~ 1e-300 GeV),
    except for a massless leaf along the beam (which FastJet places at its maximal rapidity)."""
    for i in range(a, b):
        e = leaves[i, 0]
        px = leaves[i, 1]
        py = leaves[i, 2]
        pz = leaves[i, 3]
        kt2 = px * px + py * py
        d = (e + pz) * (e - pz) - kt2
        num = kt2 + (d if (d > 0.0 or d != d) else 0.0)  # np.maximum(0, d): NaN propagates
        s = e + abs(pz)
        den = s * s
        ok = num > 0.0 and den > 0.0 and np.isfinite(num / den)
        along_beam = e == abs(pz) and kt2 == 0.0
        if not ok and not along_beam:
            return i - a
    return -1
