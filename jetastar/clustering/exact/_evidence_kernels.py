"""numba kernels of :mod:`.evidence`: the log partition function ``log Z`` (and the MAP value) of
every jet of a chunk at many values of the rates ``λ`` and ``λ_R`` in one pass over its clusters.

What does not depend on the rates is computed once per jet (the ``t`` of every cluster, which
splits are possible, their square roots, logs and Källén functions); only the rate-dependent terms
are evaluated per grid point. The DP is the trellis' (clusters in increasing mask order, a cluster's
subsets first), one table of ``log Z`` per inner rate ``λ`` (``2**n × K1`` values); the split of the
whole jet is the only one that uses ``λ_R``, so it is scored for every ``(λ, λ_R)`` pair at the end.

The density form has a closed split term that is affine in ``λ`` per ordering::

    ψ_k = 2 (N_k + log λ_k) + J + logaddexp(y_lr − λ_k x_lr, y_rl − λ_k x_rl)

(``x = t_first / tP + t_second / T``, ``y = −log T``, ``J = log ½ − log 4π + log 8 − ½ log K``), so a
split costs two ``exp`` per grid point (each ordering is its own term of the log-sum-exp); which
splits are possible, ``K`` and the scales ``T`` are the likelihood's own
(:func:`jetastar.ginkgo.kernels.density_geometry`, which its ψ uses too). The
symmetric and legacy forms call the one likelihood kernel
(:func:`jetastar.ginkgo.kernels.split_llh_given_parent`) per grid point.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from ...ginkgo.kernels import (
    DENSITY_CONSTANT,
    FORM_DENSITY,
    FORM_LEGACY,
    density_geometry,
    parent_terms,
    split_llh_given_parent,
)
from ...ginkgo.likelihood import SPACELIKE_TOLERANCE
from .._chunk_kernels import DONE, INVALID, NOT_RUN, run_in_slices, to_solve
from .._subsets import fill_subset_t, unsplittable

__all__ = ["EVIDENCE_SLICE_WORK", "evidence_chunk", "uniform_step"]

_NEG_INF = -np.inf


@nb.njit(cache=True, inline="always")
def _drawn_order(order: int, t_a: float, t_b: float, t_s: float, scale_ab: float,
                 scale_ba: float) -> tuple[float, float]:  # pragma: no cover - numba
    """The rate-free parts of a density-form split drawn in one order (``0``: ``a`` first):
    ``x``, the coefficient of ``−λ`` in its log-density, and the log of the second child's scale
    (``density_geometry``'s ``scale_ab`` or ``scale_ba``)."""
    if order == 0:
        return t_a / t_s + t_b / scale_ab, math.log(scale_ab)
    return t_b / t_s + t_a / scale_ba, math.log(scale_ba)


@nb.njit(cache=True, inline="always")
def _lse_add(z_max, z_acc, k, z):  # pragma: no cover - numba
    """Add ``z`` to the streaming log-sum-exp ``k`` held in ``(z_max[k], z_acc[k])``."""
    if z > z_max[k]:
        z_acc[k] = z_acc[k] * math.exp(z_max[k] - z) + 1.0
        z_max[k] = z
    else:
        z_acc[k] += math.exp(z - z_max[k])


@nb.njit(cache=True)
def _cluster_density(s, t, lz, mp, rates, base, out_z, out_m, z_max, z_acc, c0, want_map,
                     parts):  # pragma: no cover - numba
    """``log Z`` (and MAP) of cluster ``s`` at every rate ``rates[k]`` (split terms ``base[k]``),
    density form, from its subsets' rows of ``lz`` / ``mp``; into ``out_z`` / ``out_m``."""
    n_k = rates.shape[0]
    for k in range(n_k):
        z_max[k] = _NEG_INF
        z_acc[k] = 0.0
        out_m[k] = _NEG_INF
    t_s = t[s]
    s_p = math.sqrt(t_s)
    cut = c0[0]
    low = s & -s
    rest = s ^ low
    sub = (rest - 1) & rest
    while True:
        a = low | sub
        b = rest ^ sub
        if lz[a, 0] != _NEG_INF and lz[b, 0] != _NEG_INF:
            t_a = t[a]
            t_b = t[b]
            # whether the split is possible (for every rate), as the density form decides it
            kallen, scale_ab, scale_ba, ok_ab, ok_ba = density_geometry(t_a, t_b, t_s, s_p, cut)
            if kallen > 0.0 and (ok_ab or ok_ba):
                j = DENSITY_CONSTANT - 0.5 * math.log(kallen)
                x_ab = t_a / t_s + t_b / scale_ab
                x_ba = t_b / t_s + t_a / scale_ba
                y_ab = -math.log(scale_ab) if ok_ab else 0.0
                y_ba = -math.log(scale_ba) if ok_ba else 0.0
                for k in range(n_k):
                    lam = rates[k]
                    common = base[k] + j
                    za = common + lz[a, k] + lz[b, k]
                    e_ab = y_ab - lam * x_ab if ok_ab else _NEG_INF
                    e_ba = y_ba - lam * x_ba if ok_ba else _NEG_INF
                    if ok_ab:
                        _lse_add(z_max, z_acc, k, za + e_ab)
                    if ok_ba:
                        _lse_add(z_max, z_acc, k, za + e_ba)
                    if want_map:
                        hi = max(e_ab, e_ba)
                        psi = common + hi + math.log1p(math.exp(min(e_ab, e_ba) - hi))
                        v = psi + mp[a, k] + mp[b, k]
                        if v > out_m[k]:
                            out_m[k] = v
                parts[0] += 1
        if sub == 0:
            break
        sub = (sub - 1) & rest
    for k in range(n_k):
        out_z[k] = z_max[k] + math.log(z_acc[k]) if z_max[k] != _NEG_INF else _NEG_INF


@nb.njit(cache=True)
def _cluster_generic(s, t, lz, mp, rows, out_z, out_m, z_max, z_acc, want_map,
                     parts):  # pragma: no cover - numba
    """The same for any form, with the likelihood kernel per rate (``rows[k]``: a constants row)."""
    n_k = rows.shape[0]
    for k in range(n_k):
        z_max[k] = _NEG_INF
        z_acc[k] = 0.0
        out_m[k] = _NEG_INF
    t_s = t[s]
    s_p = 0.0
    log_tp = 0.0
    stops = np.empty(n_k)
    for k in range(n_k):
        s_p, log_tp, stops[k] = parent_terms(t_s, rows[k])
    low = s & -s
    rest = s ^ low
    sub = (rest - 1) & rest
    while True:
        a = low | sub
        b = rest ^ sub
        if lz[a, 0] != _NEG_INF and lz[b, 0] != _NEG_INF:
            counted = False
            for k in range(n_k):
                psi = split_llh_given_parent(t[a], t[b], t_s, s_p, log_tp, stops[k], rows[k])
                if psi == _NEG_INF:
                    continue
                counted = True
                _lse_add(z_max, z_acc, k, psi + lz[a, k] + lz[b, k])
                if want_map:
                    v = psi + mp[a, k] + mp[b, k]
                    if v > out_m[k]:
                        out_m[k] = v
            if counted:
                parts[0] += 1
        if sub == 0:
            break
        sub = (sub - 1) & rest
    for k in range(n_k):
        out_z[k] = z_max[k] + math.log(z_acc[k]) if z_max[k] != _NEG_INF else _NEG_INF


@nb.njit(cache=True)
def _density_linear(n, t, c0, lams, base1, dlam, roots, base2, out, j):  # pragma: no cover - numba
    """Every grid point of one jet in the density form, on a uniform grid of inner rates
    (``lams[k] = lams[0] + k · dlam``), in linear space: each cluster keeps its ``Z`` at every rate
    relative to one scale (``zl[s, k]``, ``ref[s]`` = the log of the scale), and a split's
    ``exp(−λ_k x)`` is ``exp(−λ_0 x) · exp(−dlam x)^k``: two ``exp`` per ordering and split
    whatever the number of rates (the log-space path takes two per rate).

    Returns:
        ``(possible splits, underflow)``: ``underflow`` when some rate's ``Z`` fell below the range
        of a float relative to the others' at a cluster (the caller then uses the log-space path).
    """
    n_k = lams.shape[0]
    m = np.int64(1) << n
    full = m - 1
    cut = c0[0]
    zl = np.empty((m, n_k))
    ref = np.full(m, _NEG_INF)
    for i in range(n):
        s = np.int64(1) << i
        ref[s] = 0.0
        for k in range(n_k):
            zl[s, k] = 1.0
    e_b = np.empty(n_k)
    for k in range(n_k):
        e_b[k] = math.exp(base1[k] - base1[0])
    acc = np.empty(n_k)
    lam0 = lams[0]
    parts = 0
    underflow = False
    for s in range(3, full):
        if s & (s - 1) == 0:
            continue
        t_s = t[s]
        if unsplittable(t_s, cut, False):
            continue
        s_p = math.sqrt(t_s)
        for k in range(n_k):
            acc[k] = 0.0
        acc_ref = _NEG_INF
        low = s & -s
        rest = s ^ low
        sub = (rest - 1) & rest
        while True:
            a = low | sub
            b = rest ^ sub
            if ref[a] != _NEG_INF and ref[b] != _NEG_INF:
                t_a = t[a]
                t_b = t[b]
                kallen, scale_ab, scale_ba, ok_ab, ok_ba = density_geometry(t_a, t_b, t_s, s_p,
                                                                            cut)
                if kallen > 0.0 and (ok_ab or ok_ba):
                    jac = DENSITY_CONSTANT - 0.5 * math.log(kallen) + ref[a] + ref[b]
                    for order in range(2):
                        if not (ok_ab if order == 0 else ok_ba):
                            continue
                        x, log_scale = _drawn_order(order, t_a, t_b, t_s, scale_ab, scale_ba)
                        sc = jac - log_scale - lam0 * x
                        if sc > acc_ref:
                            shrink = math.exp(acc_ref - sc) if acc_ref != _NEG_INF else 0.0
                            for k in range(n_k):
                                acc[k] *= shrink
                            acc_ref = sc
                            g = 1.0
                        else:
                            g = math.exp(sc - acc_ref)
                        r = math.exp(-dlam * x)
                        for k in range(n_k):
                            acc[k] += g * zl[a, k] * zl[b, k]
                            g *= r
                    parts += 1
            if sub == 0:
                break
            sub = (sub - 1) & rest
        if acc_ref == _NEG_INF:
            continue
        top = 0.0
        for k in range(n_k):
            zl[s, k] = acc[k] * e_b[k]
            top = max(top, zl[s, k])
        low_value = np.inf
        for k in range(n_k):
            zl[s, k] /= top
            low_value = min(low_value, zl[s, k])
        if not low_value > 1e-280:
            underflow = True
        ref[s] = acc_ref + base1[0] + math.log(top)
    # the whole jet: λ_R (the grid of roots) for its own split, the parts' tables at each λ
    n_r = roots.shape[0]
    for k1 in range(n_k):
        for k2 in range(n_r):
            out[j, k1, k2] = _NEG_INF
    if unsplittable(t[full], cut, False):
        return parts, underflow
    t_s = t[full]
    s_p = math.sqrt(t_s)
    acc2 = np.zeros((n_k, n_r))
    ref2 = np.full(n_r, _NEG_INF)
    low = full & -full
    rest = full ^ low
    sub = (rest - 1) & rest
    while True:
        a = low | sub
        b = rest ^ sub
        if ref[a] != _NEG_INF and ref[b] != _NEG_INF:
            t_a = t[a]
            t_b = t[b]
            kallen, scale_ab, scale_ba, ok_ab, ok_ba = density_geometry(t_a, t_b, t_s, s_p, cut)
            if kallen > 0.0:
                jac = DENSITY_CONSTANT - 0.5 * math.log(kallen) + ref[a] + ref[b]
                for order in range(2):
                    if not (ok_ab if order == 0 else ok_ba):
                        continue
                    x, log_scale = _drawn_order(order, t_a, t_b, t_s, scale_ab, scale_ba)
                    y = jac - log_scale
                    for k2 in range(n_r):
                        sc = y + base2[k2] - roots[k2] * x
                        if sc > ref2[k2]:
                            shrink = math.exp(ref2[k2] - sc) if ref2[k2] != _NEG_INF else 0.0
                            for k1 in range(n_k):
                                acc2[k1, k2] *= shrink
                            ref2[k2] = sc
                            g = 1.0
                        else:
                            g = math.exp(sc - ref2[k2])
                        for k1 in range(n_k):
                            acc2[k1, k2] += g * zl[a, k1] * zl[b, k1]
                parts += 1
        if sub == 0:
            break
        sub = (sub - 1) & rest
    for k2 in range(n_r):
        if ref2[k2] == _NEG_INF:
            continue
        for k1 in range(n_k):
            if acc2[k1, k2] > 0.0:
                out[j, k1, k2] = ref2[k2] + math.log(acc2[k1, k2])
    return parts, underflow


@nb.njit(cache=True)
def _rows(c0, rates, norms, logs):  # pragma: no cover - numba
    """One constants row per rate: ``c0`` with ``λ``, ``log λ`` and ``N`` replaced."""
    out = np.empty((rates.shape[0], c0.shape[0]))
    for k in range(rates.shape[0]):
        for q in range(c0.shape[0]):
            out[k, q] = c0[q]
        out[k, 1] = rates[k]
        out[k, 2] = logs[k]
        out[k, 3] = norms[k]
    return out


@nb.njit(cache=True)
def _evidence_jet(j, leaves, loff, which, consts, run, lams, lam_norms, roots, root_norms,
                  want_map, dlam, log_z, map_ll, outcome, splits, underflow,
                  tol):  # pragma: no cover - numba
    """Every grid point of jet ``j`` (see :func:`evidence_chunk`); ``dlam > 0``: the inner rates
    are a uniform grid of that step (the density form then takes :func:`_density_linear`)."""
    if not to_solve(j, leaves, loff, which, run, outcome, tol):
        return
    a0 = loff[j]
    n = loff[j + 1] - a0
    c = consts[which[j]]
    c0 = c[0]
    form = c0[4]
    n1 = lams.shape[0]
    n2 = roots.shape[0]
    if n < 2:
        outcome[j] = INVALID
        return
    m = np.int64(1) << n
    full = m - 1
    t = np.empty(m)
    fill_subset_t(leaves[a0:a0 + n], c0, t)
    if form == FORM_DENSITY and dlam > 0.0 and not want_map:
        base1 = 2.0 * (lam_norms + np.log(lams))
        base2 = 2.0 * (root_norms + np.log(roots))
        parts, low = _density_linear(n, t, c0, lams, base1, dlam, roots, base2, log_z, j)
        splits[j] = parts
        underflow[j] = low
        outcome[j] = DONE
        return
    lz = np.empty((m, n1))
    mp = np.empty((m, n1)) if want_map else np.empty((1, n1))
    for k in range(n1):
        lz[0, k] = _NEG_INF
    for i in range(n):
        s = np.int64(1) << i
        for k in range(n1):
            lz[s, k] = 0.0
            if want_map:
                mp[s, k] = 0.0
    legacy = form == FORM_LEGACY
    density = form == FORM_DENSITY
    logs1 = np.log(lams)
    base1 = 2.0 * (lam_norms + logs1)
    rows1 = _rows(c0, lams, lam_norms, logs1)
    logs2 = np.log(roots)
    base2 = 2.0 * (root_norms + logs2)
    rows2 = _rows(c[1], roots, root_norms, logs2)
    z_max = np.empty(max(n1, n2))
    z_acc = np.empty(max(n1, n2))
    out_z = np.empty(max(n1, n2))
    out_m = np.empty(max(n1, n2))
    parts = np.zeros(1, dtype=np.int64)
    dummy = np.empty((1, n1))
    for s in range(3, full):
        if s & (s - 1) == 0:
            continue
        if unsplittable(t[s], c0[0], legacy):
            for k in range(n1):
                lz[s, k] = _NEG_INF
                if want_map:
                    mp[s, k] = _NEG_INF
            continue
        if density:
            _cluster_density(s, t, lz, mp if want_map else dummy, lams, base1, out_z, out_m, z_max,
                             z_acc, c0, want_map, parts)
        else:
            _cluster_generic(s, t, lz, mp if want_map else dummy, rows1, out_z, out_m, z_max,
                             z_acc, want_map, parts)
        for k in range(n1):
            lz[s, k] = out_z[k]
            if want_map:
                mp[s, k] = out_m[k]
    # the whole jet: λ_R for its own split, the parts' tables at each λ
    one = np.empty(1)
    one_base = np.empty(1)
    one_row = np.empty((1, c0.shape[0]))
    col_z = np.empty((m, 1))
    col_m = np.empty((m, 1)) if want_map else np.empty((1, 1))
    for k1 in range(n1):
        for s in range(m):
            col_z[s, 0] = lz[s, k1]
            if want_map:
                col_m[s, 0] = mp[s, k1]
        for k2 in range(n2):
            if unsplittable(t[full], c0[0], legacy):
                log_z[j, k1, k2] = _NEG_INF
                if want_map:
                    map_ll[j, k1, k2] = _NEG_INF
                continue
            one[0] = roots[k2]
            one_base[0] = base2[k2]
            for q in range(c0.shape[0]):
                one_row[0, q] = rows2[k2, q]
            if density:
                _cluster_density(full, t, col_z, col_m if want_map else col_z, one, one_base,
                                 out_z, out_m, z_max, z_acc, c0, want_map, parts)
            else:
                _cluster_generic(full, t, col_z, col_m if want_map else col_z, one_row, out_z,
                                 out_m, z_max, z_acc, want_map, parts)
            log_z[j, k1, k2] = out_z[0]
            if want_map:
                map_ll[j, k1, k2] = out_m[0]
    splits[j] = parts[0]
    outcome[j] = DONE


@nb.njit(cache=True, parallel=True)
def _evidence_parallel(jobs, toff, leaves, loff, which, consts, run, lams, lam_norms, roots,
                       root_norms, want_map, dlam, log_z, map_ll, outcome, splits, underflow,
                       tol):  # pragma: no cover - numba
    for t in nb.prange(toff.shape[0] - 1):
        for q in range(toff[t], toff[t + 1]):
            _evidence_jet(jobs[q], leaves, loff, which, consts, run, lams, lam_norms, roots,
                          root_norms, want_map, dlam, log_z, map_ll, outcome, splits, underflow,
                          tol)


@nb.njit(cache=True)
def _evidence_serial(jobs, toff, leaves, loff, which, consts, run, lams, lam_norms, roots,
                     root_norms, want_map, dlam, log_z, map_ll, outcome, splits, underflow,
                     tol):  # pragma: no cover - numba
    for q in range(toff[0], toff[toff.shape[0] - 1]):
        _evidence_jet(jobs[q], leaves, loff, which, consts, run, lams, lam_norms, roots,
                      root_norms, want_map, dlam, log_z, map_ll, outcome, splits, underflow, tol)


#: estimated work units (~1 ns each: a split's rate-independent terms are ~30, a grid point of the
#: log-space path ~30, of the linear path ~2) per kernel call of :func:`evidence_chunk`, ~0.1 s, so
#: that an interrupt is seen between calls
EVIDENCE_SLICE_WORK = 100_000_000


def evidence_chunk(
    leaves: np.ndarray, loff: np.ndarray, which: np.ndarray, consts: np.ndarray, run: np.ndarray,
    lams: np.ndarray, lam_norms: np.ndarray, roots: np.ndarray, root_norms: np.ndarray,
    want_map: bool, parallel: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``log Z`` (and the MAP value) of every jet of a chunk at every ``(λ, λ_R)`` of a grid.

    Args:
        leaves, loff: the chunk's leaves and offsets (as the other chunk kernels take them).
        which: ``(J,)`` row of ``consts`` per jet (``-1``: invalid parameters).
        consts: ``(U, 2, 5)`` constants of each jet's own parameters: ``t_cut`` and the form are
            taken from them, the rates from the grid.
        run: ``(J,)`` bool, the jets to solve (others :data:`~.._chunk_kernels.NOT_RUN`).
        lams, lam_norms: ``(K1,)`` inner rates and their normalisations ``N(λ)`` (the form's).
        roots, root_norms: ``(K2,)`` rates of the split of the whole jet and their ``N``.
        want_map: also the MAP value at each point.
        parallel: jets on numba's threads.

    Returns:
        ``(log_z (J, K1, K2), map (J, K1, K2) or (0, K1, K2), outcome (J,), splits (J,))``:
        ``outcome`` :data:`~.._chunk_kernels.DONE`, ``INVALID`` or ``NOT_RUN``; ``splits`` the
        possible splits of each jet (the work, per grid point).
    """
    n_jets = loff.shape[0] - 1
    k1, k2 = lams.shape[0], roots.shape[0]
    log_z = np.full((n_jets, k1, k2), np.nan)
    map_ll = np.full((n_jets if want_map else 0, k1, k2), np.nan)
    outcome = np.full(n_jets, NOT_RUN, dtype=np.int64)
    splits = np.zeros(n_jets, dtype=np.int64)
    underflow = np.zeros(n_jets, dtype=np.bool_)
    n = np.diff(loff).astype(np.float64)
    lams = np.ascontiguousarray(lams, dtype=np.float64)
    dlam = uniform_step(lams)
    args = (leaves, loff, which, consts, None, lams,
            np.ascontiguousarray(lam_norms, dtype=np.float64),
            np.ascontiguousarray(roots, dtype=np.float64),
            np.ascontiguousarray(root_norms, dtype=np.float64), bool(want_map))
    kernel = _evidence_parallel if parallel else _evidence_serial
    run = np.asarray(run, dtype=np.bool_)
    for step, todo in ((dlam, run), (0.0, None)):
        if todo is None:  # the log-space path for the jets that underflowed in linear space
            todo = run & underflow
            if not todo.any():
                break
            underflow[:] = False
        per_split = 30.0 + (2.0 if step > 0.0 else 30.0) * k1
        cost = np.where(todo, (3.0**n + 1.0) / 2.0 * per_split + 2.0**n * k1 * k2, 1.0)
        run_in_slices(kernel, cost, EVIDENCE_SLICE_WORK, parallel, *args[:4], todo,
                      *args[5:], float(step), log_z, map_ll, outcome, splits, underflow,
                      SPACELIKE_TOLERANCE)
    return log_z, map_ll, outcome, splits


def uniform_step(values: np.ndarray) -> float:
    """The step of a uniform grid of at least two increasing values (``0.0`` otherwise; a single
    value is a grid of step 1, which it does not use).

    Example:
        >>> uniform_step(np.linspace(1.0, 2.0, 5)), uniform_step(np.array([1.0, 1.5, 3.0]))
        (0.25, 0.0)
    """
    if values.shape[0] == 1:
        return 1.0
    step = (values[-1] - values[0]) / (values.shape[0] - 1)
    if not step > 0.0 or not np.allclose(np.diff(values), step, rtol=1e-9, atol=0.0):
        return 0.0
    return float(step)
