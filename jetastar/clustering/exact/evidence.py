"""``log Z`` of many jets at many values of the rates: the exact partition function over trees on a
grid of ``λ`` and ``λ_R``, in one pass over each jet's clusters.

The trellis computes ``log Z(x | θ) = log Σ_trees Π ψ`` of one jet at one parameter point. A fit of
the shower's rates needs it at many points; most of the work (the ``t`` of every cluster, which of
its splits are possible, the square roots, logs and Källén functions of each split) does not depend
on the rates, so :func:`log_z_grid` does it once per jet and evaluates only the rate-dependent terms
per grid point (:mod:`._evidence_kernels`). The values are those of
:func:`~jetastar.clustering.exact.trellis.exact_trellis` at each point (to rounding: the density
form's split term is summed in another order). :mod:`jetastar.inference` builds scans and fits on
it.

Example:
    >>> import numpy as np
    >>> from jetastar.ginkgo import ShowerParams, generate
    >>> jets = generate(20, ShowerParams.qcd(), seed=1)
    >>> grid = log_z_grid(jets, "density", lam=np.array([1.0, 1.5, 2.0]))
    >>> grid.log_z.shape, bool(np.all(grid.outcome == 0))
    ((20, 3, 1), True)
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from ..._columnar import leaf_problems
from ..._cuda import resolve_device
from ...errors import TooLargeError
from ...ginkgo.kernels import TRUNCATION
from ...ginkgo.likelihood import check_likelihood
from ...jet import JetCollection
from .._subsets import n_splits_total
from ..chunks import constant_rows, params_valid, use_threads
from ._evidence_kernels import evidence_chunk
from ._trellis_kernels import LOG_Z, MAP
from .gpu import GPU_MAX_LEAVES, estimate_gpu_memory, solve_on_gpu

__all__ = ["GRID_MAX_LEAVES", "EvidenceGrid", "grid_memory", "log_z_grid", "normalisation"]

#: the largest jet :func:`log_z_grid` takes by default (``2**n`` clusters times the grid's inner
#: rates, 8 bytes each, per thread: 64 MB at 20 leaves and 8 rates)
GRID_MAX_LEAVES = 20
#: most bytes of tables one thread may hold for one jet
_MEMORY_PER_THREAD = 2 * 2**30


def normalisation(rate: float, likelihood: str) -> float:
    """``N(λ) = −log(1 − e^{−aλ})`` of a form (``a = 0.999``; ``a = 1`` in the legacy form).

    Example:
        >>> round(normalisation(1.5, "density"), 12)
        0.252913700553
    """
    a = 1.0 if check_likelihood(likelihood) == 1 else TRUNCATION
    return -math.log(-math.expm1(-a * float(rate)))


def grid_memory(n_leaves: int, n_inner: int, want_map: bool = False) -> int:
    """Bytes of the tables :func:`log_z_grid` holds for one jet of ``n_leaves`` leaves and
    ``n_inner`` inner rates (per thread)."""
    n = int(n_leaves)
    return (2**n) * 8 * (1 + int(n_inner) * (2 if want_map else 1))


@dataclasses.dataclass(frozen=True, eq=False)
class EvidenceGrid:
    """``log Z`` (and the MAP value) of every jet at every grid point.

    Attributes:
        log_z: ``(J, K1, K2)`` at ``(lam[k1], lam_root[k2])``; NaN where the jet was not solved.
        map_log_likelihood: the same shape, the MAP value (``None`` unless asked for).
        outcome: ``(J,)`` :data:`~jetastar.clustering.chunks.DONE` (0), ``INVALID`` (1: leaves or
            parameters), or ``NOT_RUN`` (3: over ``max_leaves``).
        splits: ``(J,)`` the splits scored per grid point for each jet (the possible ones on the
            CPU; every split on the GPU, which scores them all).
        lam, lam_root: the grid's rates.
        likelihood: the form.
    """

    log_z: np.ndarray
    map_log_likelihood: np.ndarray | None
    outcome: np.ndarray
    splits: np.ndarray
    lam: np.ndarray
    lam_root: np.ndarray
    likelihood: str


def _rates(values: Any, name: str) -> np.ndarray:
    arr = np.atleast_1d(np.asarray(values, dtype=np.float64))
    if arr.ndim != 1 or arr.size == 0 or not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(f"{name} must be finite values > 0, got {values!r}")
    return arr


def log_z_grid(
    jets: JetCollection,
    likelihood: str = "density",
    *,
    lam: Any = None,
    lam_root: Any = None,
    want_map: bool = False,
    max_leaves: int | None = GRID_MAX_LEAVES,
    parallel: bool | None = None,
    only: np.ndarray | None = None,
    device: str = "cpu",
    batch_memory: int = 2 * 2**30,
) -> EvidenceGrid:
    """``log Z`` of every jet at every point of a grid of rates.

    ``t_cut`` and the rest of each jet's parameters are the jet's own; so are the rates not given
    (``None``: each jet's own ``λ`` or ``λ_R``, a grid of one value).

    Args:
        jets: the jets.
        likelihood: ``"density"``, ``"symmetric"`` or ``"legacy"``.
        lam: inner rates ``λ`` (a value or a 1-D array, > 0), or ``None``.
        lam_root: rates ``λ_R`` of the split of the whole jet (a value or an array), or ``None``.
        want_map: also the MAP value at every point.
        max_leaves: jets with more leaves are not solved (``NOT_RUN``); ``None`` = no limit.
        parallel: jets on numba's threads (default: from 16 jets, when there are threads).
        only: ``(J,)`` bool, the jets to solve (default all).
        device: ``"cpu"`` (the one-pass kernel above), ``"gpu"`` (the batched GPU trellis,
            :func:`~jetastar.clustering.exact.gpu.solve_on_gpu`, once per grid point: jets of
            equal size share launches) or ``"auto"`` (a GPU when one is usable).
        batch_memory: bytes of GPU tables per batch of jets (``device="gpu"``).

    Returns:
        An :class:`EvidenceGrid` (``lam`` / ``lam_root`` hold ``NaN`` for a dimension that is each
        jet's own).

    Raises:
        ValueError: an unknown likelihood or a rate that is not > 0.
        TooLargeError: a jet to solve whose tables would not fit (:func:`grid_memory`).
        GpuUnavailableError: ``device="gpu"`` where no GPU can be used.
    """
    check_likelihood(likelihood)
    lams = None if lam is None else _rates(lam, "lam")
    roots = None if lam_root is None else _rates(lam_root, "lam_root")
    if resolve_device(device, worth_it=len(jets) > 0) == "gpu":
        return _log_z_grid_gpu(jets, likelihood, lams, roots, want_map, max_leaves, only,
                               batch_memory)
    n1 = 1 if lams is None else lams.size
    n2 = 1 if roots is None else roots.size
    n_jets = len(jets)
    sizes = np.asarray(jets.n_leaves, dtype=np.int64)
    run = np.ones(n_jets, dtype=bool) if only is None else np.asarray(only, dtype=bool).copy()
    if max_leaves is not None:
        run &= sizes <= int(max_leaves)
    big = int(sizes[run].max()) if run.any() else 0
    need = grid_memory(big, n1, want_map)
    if need > _MEMORY_PER_THREAD:
        raise TooLargeError(
            f"log Z of a {big}-leaf jet on {n1} rates needs {need / 2**30:.1g} GiB of tables per "
            "thread; use fewer grid points or a smaller max_leaves")
    valid = params_valid(jets)
    which, consts = constant_rows(jets, valid, [likelihood])
    leaves = np.ascontiguousarray(jets.leaves, dtype=np.float64).view()
    leaves.flags.writeable = False
    loff = np.ascontiguousarray(jets.leaf_offsets, dtype=np.int64)
    threads = use_threads(n_jets, parallel, 16)
    out_z = np.full((n_jets, n1, n2), np.nan)
    out_m = np.full((n_jets, n1, n2), np.nan) if want_map else None
    outcome = np.full(n_jets, 3, dtype=np.int64)  # NOT_RUN
    splits = np.zeros(n_jets, dtype=np.int64)
    # the dimensions that are each jet's own: one kernel call per distinct value
    own = np.stack([jets.params["lam"] if lams is None else np.zeros(n_jets),
                    jets.params["lam_root"] if roots is None else np.zeros(n_jets)], axis=1)
    keys, group = np.unique(np.where(valid[:, None], own, 0.0), axis=0, return_inverse=True)
    for g, (own_lam, own_root) in enumerate(keys.tolist()):
        members = run & (group.ravel() == g)
        if not members.any():
            continue
        g_lams = lams if lams is not None else np.array([own_lam if own_lam > 0 else 1.0])
        g_roots = roots if roots is not None else np.array([own_root if own_root > 0 else 1.0])
        z, m, o, w = evidence_chunk(
            leaves, loff, np.ascontiguousarray(which[0]), consts, members, g_lams,
            np.array([normalisation(x, likelihood) for x in g_lams]), g_roots,
            np.array([normalisation(x, likelihood) for x in g_roots]), want_map, threads)
        done = o != 3
        out_z[done] = z[done]
        if out_m is not None:
            out_m[done] = m[done]
        outcome[done] = o[done]
        splits[done] = w[done]
    return EvidenceGrid(out_z, out_m, outcome, splits,
                        np.full(1, np.nan) if lams is None else lams,
                        np.full(1, np.nan) if roots is None else roots, likelihood)


def _log_z_grid_gpu(jets: JetCollection, likelihood: str, lams: np.ndarray | None,
                    roots: np.ndarray | None, want_map: bool, max_leaves: int | None,
                    only: np.ndarray | None, batch_memory: int) -> EvidenceGrid:
    """:func:`log_z_grid` on the GPU: the batched trellis once per grid point (the jets of one
    size in as few launches as ``batch_memory`` allows); invalid jets and jets the GPU does not
    take (one leaf, more than 30) go through the CPU path, which says why."""
    n_jets = len(jets)
    sizes = np.asarray(jets.n_leaves, dtype=np.int64)
    run = np.ones(n_jets, dtype=bool) if only is None else np.asarray(only, dtype=bool).copy()
    if max_leaves is not None:
        run &= sizes <= int(max_leaves)
    offsets = np.asarray(jets.leaf_offsets, dtype=np.int64)
    flat = np.ascontiguousarray(jets.leaves, dtype=np.float64)
    valid = params_valid(jets)
    on_gpu = (run & valid & (leaf_problems(flat, offsets)[0] == 0)
              & (sizes >= 2) & (sizes <= GPU_MAX_LEAVES))
    rest = log_z_grid(jets, likelihood, lam=lams, lam_root=roots, want_map=want_map,
                      max_leaves=max_leaves, only=run & ~on_gpu)
    out_z, out_m = rest.log_z, rest.map_log_likelihood
    outcome, splits = rest.outcome.copy(), rest.splits.copy()
    groups = [(n, np.flatnonzero(on_gpu & (sizes == n))) for n in np.unique(sizes[on_gpu]).tolist()]
    for k1 in range(1 if lams is None else lams.size):
        for k2 in range(1 if roots is None else roots.size):
            # the constants of this grid point, made once per distinct parameter set
            point = {name: values[q] for name, values, q in (("lam", lams, k1),
                                                              ("lam_root", roots, k2))
                     if values is not None}
            which, rows = constant_rows(jets.with_params(**point), valid, [likelihood])
            for n, idx in groups:
                step = max(1, min(idx.size, int(batch_memory) // max(1, estimate_gpu_memory(n, 1))))
                for lo in range(0, idx.size, step):
                    part = idx[lo:lo + step]
                    sol = solve_on_gpu([flat[offsets[i]:offsets[i + 1]] for i in part],
                                       rows[which[0, part]], log_z=True, tables=False,
                                       who=f"jet {jets.jet_id[part[0]]}")
                    out_z[part, k1, k2] = sol.root[:, LOG_Z]
                    if out_m is not None:
                        out_m[part, k1, k2] = sol.root[:, MAP]
    for n, idx in groups:
        outcome[idx] = 0  # DONE
        splits[idx] = n_splits_total(n)
    return dataclasses.replace(rest, log_z=out_z, map_log_likelihood=out_m, outcome=outcome,
                               splits=splits)
