"""The generalized-kt merge history by a full rescan of every pair at each step (O(n³)): the
kernel ``jetastar.clustering.agglomerative.kt.kt_history`` had before its nearest-neighbour
bookkeeping, kept as the reference that the fast kernel must reproduce exactly (same merges in the
same order, same node ids, same beam recombinations, ties included).

At each step the first minimum wins in the scan order: for positions ``i`` ascending, the beam
distance ``d_iB`` and then the pairs ``(i, j > i)`` in ``j`` order; a removed particle's slot is
filled by the last one.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from jetastar.clustering.agglomerative._kt_kernels import _delta_r2, _scale
from jetastar.momenta import rap_phi_kt2


@nb.njit(cache=True)
def kt_history_cubic(leaves, power, r2):  # pragma: no cover - numba
    """``(history, number of beam recombinations)`` of ``leaves`` ``(n, 4)`` (numba kernel)."""
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
        if bj < 0:
            # beam recombination: i becomes a final jet
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
    return history, beams
