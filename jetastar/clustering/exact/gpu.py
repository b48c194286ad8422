"""The exact trellis on one GPU: MAP, log Z, tree counts and marginals of one jet or of many jets
of one size per launch (numba's CUDA target; ``pip install "jetastar[gpu]"``).

This module plans and launches the CUDA kernels of :mod:`jetastar.clustering._gpu_kernels` and
copies the solved table back in the CPU trellis's layout, so :class:`~jetastar.clustering.Trellis`
(MAP tree, sub-cluster queries, posterior samples) works on it unchanged; users reach it through the
``device`` option of :func:`~jetastar.clustering.exact_trellis`, :class:`~jetastar.clustering.Trellis`,
:func:`~jetastar.clustering.exact_map`, the registry and the command line, and through
:func:`exact_trellis_batch` for many small jets.

Memory: per cluster mask and jet, the 32-byte record and the 4-byte arg-max part on the device and
the same on the host (36 bytes: 2.3 GiB at 26 leaves, 36 GiB at 30), plus an 8-byte exact count
up to 18 leaves and a scratch area for partial results (a few hundred MiB at most). A jet (or batch)
whose tables do not fit the free GPU memory, or the host memory limit, is refused before anything
is allocated, with the estimate (:class:`~jetastar.errors.TooLargeError`).

Time: the ``(3**n + 1)/2 − 2**n`` split scores of the DP; the marginal pass does twice as many
(:func:`gpu_marginals_tiled`: the same pass with tiles, about 1 byte of global memory per pair).
The full DP scores every split (the bound-pruned MAP only is :func:`solve_map_on_gpu`). Work is
launched in slices of at most a few billion splits, so ``max_time`` is checked, and the progress
bar moves, between slices.

Example:
    >>> from jetastar._cuda import gpu_status
    >>> from jetastar.clustering.gpu import estimate_gpu_memory
    >>> estimate_gpu_memory(26) // 2**30  # GiB for a 26-leaf jet
    2
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..._cuda import gpu_status, load_cuda, simulator_enabled
from ...errors import TooLargeError
from .._engine import check_memory, format_bytes, split_progress
from .._subsets import fill_subset_t, fill_subset_t_parallel, n_splits_total

__all__ = [
    "GPU_MEASURED",
    "GPU_MIN_LEAVES",
    "GpuSolution",
    "estimate_gpu_memory",
    "gpu_marginals",
    "gpu_marginals_tiled",
    "solve_map_on_gpu",
    "solve_map_on_gpu_tiled",
    "solve_on_gpu",
    "solve_on_gpu_tiled",
    "tiled_bytes_per_split",
    "tiled_map_bytes_per_split",
    "tiled_marginal_bytes_per_split",
]

#: ``device="auto"`` uses a GPU from this many leaves on (below it the CPU engines finish in
#: milliseconds and a launch, a transfer and the first compilation cost more).
GPU_MIN_LEAVES = 18
#: What the GPU path cost per jet, measured on one NVIDIA H100 80GB HBM3 (2026-11-27,
#: ``tests/benchmarks/bench_gpu.py``, docs/gpu.md): seconds by leaves, after compilation. MAP +
#: log Z and MAP only with today's launch shape (2**19 threads), the mean of two runs.
GPU_MEASURED: dict[str, Any] = {
    "device": "NVIDIA H100 80GB HBM3",
    "date": "2026-11-27",
    "map_and_log_z_s": {20: 0.09, 22: 0.51, 24: 4.1, 26: 38.8},
    "map_only_s": {24: 1.25, 26: 7.75, 28: 68.8},
    "marginals_s": {20: 7.8, 22: 33.0},
    "batch_12_leaves_jets_per_s": 50_800,
}
#: Largest jet the int32 arg-max layout and the unranking hold.
GPU_MAX_LEAVES = 30
_MAX_LEAVES = GPU_MAX_LEAVES
#: Up to this many leaves tree counts are exact int64 (as on the CPU).
_MAX_EXACT_COUNT_LEAVES = 18
#: Threads to aim for per launch (a few waves of a large GPU), and at least 2**_MIN_FREE_BITS
#: splits per thread when a cluster is shared by several threads. 2**19 rather than 2**21: on one
#: H100 (docs/gpu.md) 9-11 % faster for MAP + log Z at 22-26 leaves and 0-7 % for MAP only at 24-26,
#: the same values (each setting twice, alternating).
_TARGET_THREADS = 1 << 19
_MIN_FREE_BITS = 6
#: Split scores per launch at most (a fraction of a second on a large GPU).
_LAUNCH_SPLITS = 1 << 33
#: Bytes of one partial result (value, part, z max, z sum, float count, int count).
_PART_BYTES = 8 + 8 + 8 + 8 + 8 + 8
_RECORD_BYTES = 4 * 8 + 4
#: ``t`` values per host-to-device copy (:func:`_upload_t`; 128 MiB)
_T_CHUNK = 1 << 24
#: from this many leaves the host makes ``t`` on numba's threads (:func:`_host_t`)
_PARALLEL_T_FROM = 20
#: Tiled DP (:func:`solve_on_gpu_tiled`): low bits per tile. 9: a block's two tiles of 32-byte
#: records plus the int64 counts (5 arrays of 2 x 512 float64/int64, 40 KiB) fit the 48 KiB of static
#: shared memory a kernel may use without the dynamic opt-in; l = 10 would need 80 KiB.
_TILE_LOW_BITS = 9
#: log2 threads per block of the tiled kernels (small in the CUDA simulator, where every thread of
#: a block is a Python thread)
_TILE_THREAD_BITS = 7
_TILE_THREAD_BITS_SIM = 2
#: a work item of the cross kernel scores at most 2**this low-bit splits per high pair (larger
#: clusters are cut into parts, merged in shared memory), so a warp's threads run loops of about
#: one length (the simulator's value makes small tiles cut clusters too)
_TILE_PART_BITS = 5
_TILE_PART_BITS_SIM = 1
#: blocks to aim for per launch of the cross kernel (a few per SM), and at least this many
#: high-part pairs per block when a tile's pairs are dealt to several blocks
_TILE_TARGET_BLOCKS = 1024
_TILE_MIN_PAIRS = 8
#: numba-cuda's low-occupancy warning (a regular expression; the text may carry colour codes)
_LOW_OCCUPANCY = r".*Grid size \d+ will likely result in GPU under-utilization"


class GpuSolution:
    """A trellis solved on the GPU, copied back to the host.

    Attributes:
        node: ``(B, 2**n, 4)`` float64 records ``(t, map, log_z, count)`` per jet and mask (the
            count column holds int64 bits when ``exact_count``).
        best: ``(B, 2**n)`` int32 arg-max parts.
        exact_count: whether counts are int64.
        finished: False when ``max_time`` stopped the solve (the tables are then incomplete).
        stats: ``device``, ``splits_total``, ``launches``, ``gpu_memory_bytes``, ``time_s``,
            ``gsplits_per_s``, ...
        root: ``(B, 4)`` the whole jet's record per jet (count column as ``node``'s).
        children: ``(B, 2n - 1, 2)`` int64 MAP trees (``solve_on_gpu(..., tables=False)``; the
            numbering of the trees :class:`~jetastar.clustering.Trellis` reads from ``best``).
            ``root``, ``children`` and ``impossible`` are ``None`` when the solve did not finish.
        impossible: ``(B,)`` int64 clusters whose MAP is ``-inf`` (``tables=False``).

    With ``tables=False`` only ``root``, ``children`` and ``impossible`` come back (``node`` and
    ``best`` are ``None``): what a batch of results needs, a few hundred bytes per jet instead of
    the tables.
    """

    def __init__(self, node: np.ndarray | None, best: np.ndarray | None, exact_count: bool,
                 finished: bool, stats: dict[str, Any], *, root: np.ndarray | None = None,
                 children: np.ndarray | None = None,
                 impossible: np.ndarray | None = None) -> None:
        self.node = node
        self.best = best
        self.exact_count = exact_count
        self.finished = finished
        self.stats = stats
        self.root = root
        self.children = children
        self.impossible = impossible


def estimate_gpu_memory(n_leaves: int, n_jets: int = 1, log_z: bool = True) -> int:
    """Bytes of GPU memory the trellis of ``n_jets`` jets of ``n_leaves`` leaves needs (peak).

    Args:
        n_leaves: leaves per jet.
        n_jets: jets solved together.
        log_z: with log Z and tree counts (``False``: MAP only; same tables, no exact counts).

    Returns:
        The estimate in bytes.

    Example:
        >>> estimate_gpu_memory(30) > 36 * 2**30  # 38.7 GiB of tables at 30 leaves
        True
    """
    m = 1 << n_leaves
    total = n_jets * m * _RECORD_BYTES
    if log_z and n_leaves <= _MAX_EXACT_COUNT_LEAVES:
        total += n_jets * m * 8
    total += _scratch_items(n_leaves, n_jets) * _PART_BYTES
    total += min(n_jets * m, _T_CHUNK) * 8 + 64 * 1024  # the t upload buffer, small tables
    return int(total)


def _host_t(stacked: np.ndarray, consts: np.ndarray) -> np.ndarray:
    """The ``t`` of every cluster of every jet, made on the host by the CPU trellis's own
    :func:`~jetastar.clustering._subsets.fill_subset_t`.

    The GPU does not compute ``t``: NVVM contracts ``px*px + py*py + pz*pz`` into fused
    multiply-adds, so a ``t`` made on the device can differ from the CPU's in the last bits, and
    near ``t = t_cut`` that flips whether a split is allowed. Made here, every cut decision is the
    CPU's. It costs ``8 * 2**n`` bytes of host memory per jet and, measured on a busy 2-core
    machine at 26 leaves, 0.9-1.4 CPU-s on one thread, 0.24 s wall on two (numba's threads are
    used from :data:`_PARALLEL_T_FROM` leaves on).

    Args:
        stacked: ``(B, n, 4)`` leaf 4-momenta.
        consts: ``(B, 2, 5)`` likelihood constants (row 0 chooses the single-leaf convention).

    Returns:
        ``(B, 2**n)`` float64.

    Example:
        >>> import numpy as np
        >>> from jetastar.ginkgo import ShowerParams, generate
        >>> jet = generate(1, ShowerParams.qcd(), seed=3, min_leaves=4, max_leaves=4)[0]
        >>> c = jet.likelihood_constants("symmetric")[None]
        >>> _host_t(jet.leaves[None], c).shape
        (1, 16)
    """
    n_jets, n = stacked.shape[0], stacked.shape[1]
    out = np.empty((n_jets, 1 << n), dtype=np.float64)
    fill = fill_subset_t_parallel if n >= _PARALLEL_T_FROM else fill_subset_t
    for j in range(n_jets):
        fill(stacked[j], consts[j, 0], out[j])
    return out


def _upload_t(cuda: Any, kernels: Any, t: np.ndarray, d_node: Any) -> None:
    """Copy the host's ``t`` (:func:`_host_t`, ``(B, 2**n)``) into the ``t`` column of the device
    records ``d_node`` (``(B, 2**n, 4)``), through one buffer of at most :data:`_T_CHUNK` values.

    Args:
        cuda: ``numba.cuda``.
        kernels: the kernel module (its ``set_t``).
        t: ``(B, 2**n)`` float64.
        d_node: the device records.
    """
    flat = t.reshape(-1)
    d_buf = cuda.device_array(min(flat.size, _T_CHUNK), dtype=np.float64)
    for lo in range(0, flat.size, _T_CHUNK):
        part = flat[lo:lo + _T_CHUNK]
        d_buf[:part.size].copy_to_device(part)
        _launch(kernels.set_t, part.size, lo, part.size, d_buf, d_node)
    cuda.synchronize()


def _scratch_items(n: int, n_jets: int, target: int = _TARGET_THREADS,
                   min_free: int = _MIN_FREE_BITS) -> int:
    most = 0
    for k in range(2, n + 1):
        for _i0, count, g in _launches(n, k, n_jets, target, min_free, splits_per=1 << (k - 1)):
            if g:
                most = max(most, n_jets * count << g)
    for k in range(1, n):
        for _i0, count, g in _launches(n, n - k + 1, n_jets, target, min_free,
                                       splits_per=1 << (n - k), clusters=math.comb(n, k)):
            if g:
                most = max(most, n_jets * count << g)
    return most


def _launches(n: int, k: int, n_jets: int, target: int, min_free: int, splits_per: int,
              clusters: int | None = None) -> list[tuple[int, int, int]]:
    """``(first cluster, clusters, g)`` per launch for the clusters of size ``k``: slices of at most
    ``_LAUNCH_SPLITS`` split scores, each cluster's work dealt to ``2**g`` threads. ``k`` counts the
    bits of the enumerated set plus one (``rest`` for the DP, the complement for marginals)."""
    total = math.comb(n, k) if clusters is None else clusters
    per_launch = max(1, _LAUNCH_SPLITS // max(1, n_jets * splits_per))
    out = []
    bits = k - 1
    for i0 in range(0, total, per_launch):
        count = min(per_launch, total - i0)
        items = n_jets * count
        g = 0
        while items << g < target and bits - (g + 1) >= min_free:
            g += 1
        out.append((i0, count, g))
    return out


def _binomials(n: int) -> np.ndarray:
    b = np.zeros((n + 1, n + 1), dtype=np.int64)
    for c in range(n + 1):
        for j in range(c + 1):
            b[c, j] = math.comb(c, j)
    return b


def _check_gpu_memory(need: int, who: str, what: str) -> None:
    """Refuse what does not fit the free memory of the current GPU (before allocating)."""
    free = _free_gpu_memory()
    if free is not None and need > 0.95 * free:
        raise TooLargeError(
            f"{who}: {what} on the GPU needs about {format_bytes(need)}, above the free GPU memory "
            f"of {format_bytes(int(free))}; use fewer leaves (exact_map on the CPU, window_search "
            f"or astar_approx)"
        )


def _times(t_setup: float, t_dp: float, total: float, splits: int) -> dict[str, float]:
    """The time entries of a solve's stats: set-up, DP, copy back, total, and the DP's rate."""
    return {"time_setup_s": t_setup, "time_dp_s": t_dp, "time_copy_s": total - t_setup - t_dp,
            "time_s": total, "gsplits_per_s": splits / t_dp / 1e9 if t_dp > 0 else 0.0}


def _free_gpu_memory() -> int | None:
    """Free bytes of the current GPU; ``None`` where that is not known (the CUDA simulator, a
    driver that cannot say)."""
    if simulator_enabled():
        return None
    cuda = load_cuda()
    try:
        free, _total = cuda.current_context().get_memory_info()
    except Exception:  # pragma: no cover - drivers that cannot say
        return None
    return int(free)


def _launch(kernel: Any, total: int, *args: Any) -> None:
    """Launch ``kernel`` over ``total`` work items (grid-stride loops inside).

    The first cluster sizes of a jet have only a few clusters, so their grids are small on
    purpose; numba-cuda's low-occupancy warning for them is silenced here (only for these
    launches: a user's own kernels keep it). It was printed dozens of times per jet on an H100,
    and under ``-W error`` (the test suite) it turned into an error.
    """
    if total <= 0:
        return
    if simulator_enabled():
        tpb, most = 16, 4
    else:
        tpb, most = 128, 132 * 64
    blocks = min(most, (total + tpb - 1) // tpb)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_LOW_OCCUPANCY)
        kernel[blocks, tpb](*args)


def solve_on_gpu(
    leaves: Sequence[np.ndarray],
    consts: np.ndarray,
    *,
    log_z: bool = True,
    prune: bool = True,
    who: str = "jet",
    max_memory: int | None = None,
    max_time: float | None = None,
    progress: bool = False,
    tables: bool = True,
    target_threads: int = _TARGET_THREADS,
    min_free_bits: int = _MIN_FREE_BITS,
) -> GpuSolution:
    """Solve the trellis of ``B`` jets of one size on the GPU (MAP, and log Z with counts).

    Args:
        leaves: ``B`` arrays ``(n, 4)`` of leaf 4-momenta, all with the same ``n`` (``2 <= n <= 30``).
        consts: ``(B, 2, 5)`` likelihood constants (:func:`jetastar.ginkgo.likelihood_constants`).
        log_z: also log Z and tree counts (``False``: MAP only).
        prune: skip clusters that cannot split (identical results either way).
        who: start of messages (``"jet 3"``).
        max_memory: host memory limit for the copied-back tables (default: half the available).
        max_time: seconds; checked between launches, after the first (a solve it stops is
            ``finished=False``: its tables are incomplete and must not be read as results).
        progress: show a bar over split scores.
        tables: copy the solved tables back (``False``: only each jet's root record, MAP tree
            and count of impossible clusters, made on the GPU; what
            :func:`~jetastar.clustering.exact_trellis_batch` needs).
        target_threads, min_free_bits: how work is dealt to threads (tests use small values to
            exercise the shared-cluster path).

    Returns:
        :class:`GpuSolution` on the host.

    Raises:
        TooLargeError: too many leaves, or tables that do not fit the GPU or the host limit.
        GpuUnavailableError: no usable GPU.
    """
    cuda = load_cuda()
    from . import _gpu_kernels as _g  # compiled for the device only when a GPU is used

    started = time.perf_counter()
    n_jets = len(leaves)
    n = int(leaves[0].shape[0])
    if n > _MAX_LEAVES:
        raise TooLargeError(
            f"{who}: {n} leaves is above the GPU trellis limit of {_MAX_LEAVES} leaves (it would "
            f"need {format_bytes(estimate_gpu_memory(n, n_jets, log_z))}); use window_search or "
            "astar_approx"
        )
    m = 1 << n
    exact_count = log_z and n <= _MAX_EXACT_COUNT_LEAVES
    what = f"the exact trellis of {n} leaves" + (f" for {n_jets} jets" if n_jets > 1 else "")
    host_need = 0  # bytes copied back: the tables, or (below) the roots and trees
    if tables:
        host_need = n_jets * m * (_RECORD_BYTES + (8 if exact_count else 0))
    # the t column is made on the host (_host_t), and the copied-back tables come after it
    check_memory(max(host_need, n_jets * m * 8), max_memory, who,
                 what + (" (copied back from the GPU)" if tables else " (t made on the host)"),
                 "use window_search or astar_approx")
    gpu_need = estimate_gpu_memory(n, n_jets, log_z)
    _check_gpu_memory(gpu_need, who, what)

    stacked = np.ascontiguousarray(
        leaves if isinstance(leaves, np.ndarray) else np.stack(leaves), dtype=np.float64)
    consts = np.ascontiguousarray(consts, dtype=np.float64).reshape(n_jets, 2, 5)
    binom = _binomials(n)
    d_node = cuda.device_array((n_jets, m, 4), dtype=np.float64)
    d_best = cuda.device_array((n_jets, m), dtype=np.int32)
    d_count = cuda.device_array((n_jets, m) if exact_count else (1, 1), dtype=np.int64)
    d_binom = cuda.to_device(binom)
    d_consts = cuda.to_device(consts)
    _upload_t(cuda, _g, _host_t(stacked, consts), d_node)
    _launch(_g.init_leaves, n_jets * (n + 1), n, d_node, d_best, d_count, exact_count)
    n_scratch = max(1, _scratch_items(n, n_jets, target_threads, min_free_bits))
    scratch = (
        cuda.device_array(n_scratch, dtype=np.float64),
        cuda.device_array(n_scratch, dtype=np.int64),
        cuda.device_array(n_scratch, dtype=np.float64),
        cuda.device_array(n_scratch, dtype=np.float64),
        cuda.device_array(n_scratch, dtype=np.float64),
        cuda.device_array(n_scratch, dtype=np.int64),
    )
    cuda.synchronize()
    t_setup = time.perf_counter() - started
    finished = True
    launches = 0
    done_splits = 0
    with split_progress(progress, n_jets * n_splits_total(n), who, "GPU trellis") as bar:
        for k in range(2, n + 1):
            per = (1 << (k - 1)) - 1
            for i0, count, g in _launches(n, k, n_jets, target_threads, min_free_bits, per + 1):
                if (max_time is not None and launches > 0
                        and time.perf_counter() - started > max_time):
                    finished = False
                    break
                items = n_jets * count
                _launch(_g.solve_parts, items << g, k, n, g, i0, count, d_binom, d_node, d_count,
                        d_best, d_consts, log_z, exact_count, prune, *scratch)
                if g:
                    _launch(_g.combine_parts, items, k, n, g, i0, count, d_binom, d_node,
                            d_count, d_best, log_z, exact_count, *scratch)
                cuda.synchronize()
                launches += 1
                done_splits += items * per
                bar.update(items * per)
            if not finished:
                break
    t_dp = time.perf_counter() - started - t_setup
    extra: dict[str, np.ndarray] = {}
    if tables:
        node = d_node.copy_to_host()
        best = d_best.copy_to_host()
        if exact_count:
            node.view(np.int64)[:, :, 3] = d_count.copy_to_host()
    elif not finished:  # a half-filled table: no tree is read from it (garbage arg-maxes)
        node = best = None
        host_need = 0
    else:
        node = best = None
        d_children = cuda.device_array((n_jets, 2 * n - 1, 2), dtype=np.int64)
        d_root = cuda.device_array((n_jets, 4), dtype=np.float64)
        d_root_count = cuda.device_array(n_jets if exact_count else 1, dtype=np.int64)
        d_impossible = cuda.to_device(np.zeros(n_jets, dtype=np.int64))
        _launch(_g.map_trees, n_jets, n, d_node, d_best, d_count, exact_count, d_children,
                d_root, d_root_count)
        _launch(_g.count_impossible, n_jets * m, n, d_node, d_impossible)
        root = d_root.copy_to_host()
        if exact_count:
            root.view(np.int64)[:, 3] = d_root_count.copy_to_host()
        extra = {"root": root, "children": d_children.copy_to_host(),
                 "impossible": d_impossible.copy_to_host()}
        host_need = sum(int(a.nbytes) for a in extra.values())
    del d_node, d_best, d_count, scratch
    total = time.perf_counter() - started
    status = gpu_status()
    stats: dict[str, Any] = {
        "device": "gpu",
        "gpu": status["device"],
        "n_leaves": n,
        "n_jets": n_jets,
        "clusters": m - 1,
        "splits_total": n_splits_total(n),
        "splits_evaluated": done_splits // max(1, n_jets),
        "launches": launches,
        "gpu_memory_bytes": gpu_need,
        "memory_bytes": host_need,
        "exact_count": exact_count,
        **_times(t_setup, t_dp, total, done_splits),
    }
    return GpuSolution(node, best, exact_count, finished, stats, **extra)


def _tile_splits(p: int, nl: int) -> int:
    """Split scores of one tile of level ``p`` (high parts of ``p`` bits) with ``nl`` low bits:
    the cross splits of its ``2**(p-1) - 1`` high pairs and its same-high splits."""
    if p == 0:
        return (3**nl + 1) // 2 - (1 << nl)
    pairs = (1 << (p - 1)) - 1
    return pairs * 3**nl + 3**nl - (1 << nl)


def _tile_low_bits(low_bits: int | None, n: int, who: str) -> int:
    """A tiled pass's low bits per tile (default :data:`_TILE_LOW_BITS`), checked with the jet's
    size.

    Raises:
        ValueError: ``low_bits`` outside ``1 ..`` 9 on a GPU (above 9 a block's static shared
            memory passes the 48 KiB limit; there is no dynamic opt-in yet), ``1 .. 12`` in the
            simulator.
        TooLargeError: more leaves than the GPU trellis takes.
    """
    low_bits = _TILE_LOW_BITS if low_bits is None else int(low_bits)
    most = 12 if simulator_enabled() else _TILE_LOW_BITS
    if not 1 <= low_bits <= most:
        raise ValueError(f"{who}: low_bits must be 1..{most}, got {low_bits}")
    if n > _MAX_LEAVES:
        raise TooLargeError(f"{who}: {n} leaves is above the GPU trellis limit of {_MAX_LEAVES}")
    return low_bits


def _blocks_per_tile(pairs: int, tiles: int, target_blocks: int, min_pairs: int) -> int:
    """How many blocks share the ``pairs`` high-part pairs of each of ``tiles`` tiles in one
    launch (0 without pairs): enough for about ``target_blocks`` blocks, at least ``min_pairs``
    pairs a block, and no block without pairs.

    Example:
        >>> _blocks_per_tile(1000, 4, 1024, 8), _blocks_per_tile(10, 4, 1024, 8)
        (125, 1)
    """
    if not pairs:
        return 0
    g = max(1, min(-(-target_blocks // tiles), pairs // min_pairs))
    return -(-pairs // -(-pairs // g))


def _tile_plan(n: int, low_bits: int, n_jets: int, target_blocks: int = _TILE_TARGET_BLOCKS,
               min_pairs: int = _TILE_MIN_PAIRS) -> list[tuple[int, int, int, int]]:
    """``(level p, first tile, tiles, chunks G)`` per launch pair of the tiled DP.

    Levels in order; the tiles of a level in slices of at most ``_LAUNCH_SPLITS`` split scores (so
    ``max_time`` is checked between them); each tile's high pairs dealt to ``G`` blocks (``G = 0``:
    no cross splits, levels 0 and 1), enough for about ``target_blocks`` blocks, with at least
    ``min_pairs`` pairs per block, and no empty block.
    """
    nl = min(low_bits, n)
    hb = n - nl
    out = []
    for p in range(hb + 1):
        tiles = math.comb(hb, p)
        pairs = (1 << (p - 1)) - 1 if p >= 2 else 0
        per_slice = max(1, _LAUNCH_SPLITS // max(1, n_jets * _tile_splits(p, nl)))
        for i0 in range(0, tiles, per_slice):
            count = min(per_slice, tiles - i0)
            out.append((p, i0, count, _blocks_per_tile(pairs, n_jets * count, target_blocks,
                                                       min_pairs)))
    return out


def _tile_bytes(p: int, nl: int, g: int, log_z: bool) -> int:
    """Global-memory bytes the tiled kernels read and write for one tile of level ``p`` dealt to
    ``g`` chunks (what their ``traffic`` counter adds)."""
    rec, part, write = _tiled_sizes(log_z)
    size = 1 << nl
    pairs = (1 << (p - 1)) - 1 if p >= 2 else 0
    cross = (g * size * 8 + pairs * 2 * size * rec + g * size * part) if g else 0
    same = (size * rec if p else 0) + size * 8 + g * size * part + size * write
    return cross + same


def _tiled_sizes(log_z: bool) -> tuple[int, int, int]:
    """Bytes of a record read, a partial, and a record written (MAP + log Z, or MAP only)."""
    if log_z:
        return 32, 8 + 4 + 8 + 8 + 8, 8 + 4 + 8 + 8
    return 16, 8 + 4, 8 + 4


def tiled_bytes_per_split(
    n_leaves: int, low_bits: int = _TILE_LOW_BITS, *, n_jets: int = 1, log_z: bool = True,
    target_blocks: int = _TILE_TARGET_BLOCKS, min_pairs: int = _TILE_MIN_PAIRS,
) -> tuple[int, float]:
    """Global-memory traffic of :func:`solve_on_gpu_tiled`'s DP, counted from its plan without
    running anything (the figure its ``count_traffic`` counter measures).

    Counts every byte the DP kernels read or write in global memory: the tiles loaded into
    shared memory, each cluster's ``t``, the partial results of chunks, the finished records (not
    the ``t`` fill before the DP, ``2**n`` records once). Today's :func:`solve_on_gpu` reads two
    32-byte records per split: 64 bytes. These are the bytes the kernels ask for; the memory moves
    whole 32-byte sectors, so where a record is read in part (``t`` and MAP only; the exact int64
    counts, kept apart up to 18 leaves) it moves the whole record: above 18 leaves with log Z the
    two agree.

    Args:
        n_leaves: leaves per jet.
        low_bits: low bits per tile.
        n_jets: jets solved together.
        log_z: MAP and log Z with counts (``False``: MAP only, 16-byte records).
        target_blocks, min_pairs: the plan's settings (as for :func:`solve_on_gpu_tiled`).

    Returns:
        ``(bytes, bytes per split)``, per split of the ``(3**n + 1)/2 − 2**n`` of every jet.

    Example:
        >>> round(tiled_bytes_per_split(24)[1], 2)
        1.68
    """
    nl = min(low_bits, n_leaves)
    total = 0
    for p, _i0, count, g in _tile_plan(n_leaves, low_bits, n_jets, target_blocks, min_pairs):
        total += n_jets * count * _tile_bytes(p, nl, g, log_z)
    return total, total / max(1, n_jets * n_splits_total(n_leaves))


def _launch_tiles(kernel: Any, items: int, threads: int, *args: Any) -> None:
    """Launch a tiled kernel over ``items`` blocks of work (a block-stride loop inside)."""
    if items <= 0:
        return
    most = 4 if simulator_enabled() else 132 * 64
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_LOW_OCCUPANCY)
        kernel[min(most, items), threads](*args)


def solve_on_gpu_tiled(
    leaves: Sequence[np.ndarray],
    consts: np.ndarray,
    *,
    log_z: bool = True,
    prune: bool = True,
    low_bits: int | None = None,
    count_traffic: bool = False,
    who: str = "jet",
    max_time: float | None = None,
    target_blocks: int = _TILE_TARGET_BLOCKS,
    min_pairs: int = _TILE_MIN_PAIRS,
) -> GpuSolution:
    """:func:`solve_on_gpu` by the tiled DP of :mod:`jetastar.clustering.exact._gpu_tiled`: the same
    tables (MAP, arg-max, log Z, counts), with each part record read from global memory once per
    many splits: 1.7 bytes of global memory per split at 24-30 leaves with the default tiles of 9
    low bits, instead of 64 (:func:`tiled_bytes_per_split`).

    Args:
        leaves: ``B`` arrays ``(n, 4)`` of leaf 4-momenta, all with the same ``n`` (``2 <= n <= 30``).
        consts: ``(B, 2, 5)`` likelihood constants.
        log_z: also log Z and tree counts (``False``: MAP only).
        prune: skip clusters that cannot split (identical results either way).
        low_bits: low bits per tile (default and most on a GPU: 9; the simulator takes up to 12,
            tests 2-5 to have many tiles on small jets).
        count_traffic: count the global-memory bytes the DP kernels read and write
            (``stats["global_bytes"]``, ``stats["bytes_per_split"]``).
        who: start of messages.
        max_time: seconds; checked between launches, after the first (the solution is then
            ``finished=False`` and its tables incomplete).
        target_blocks, min_pairs: how a tile's high pairs are dealt to blocks (tests use small
            values to have several chunks per tile).

    Returns:
        :class:`GpuSolution` with the tables copied back (``node``, ``best``).

    Raises:
        TooLargeError: too many leaves, or tables that do not fit the GPU.
        GpuUnavailableError: no usable GPU.
    """
    cuda = load_cuda()
    from . import _gpu_kernels as _g
    from . import _gpu_tiled as _gt

    started = time.perf_counter()
    n_jets = len(leaves)
    n = int(leaves[0].shape[0])
    low_bits = _tile_low_bits(low_bits, n, who)
    m = 1 << n
    nl = min(low_bits, n)
    exact_count = log_z and n <= _MAX_EXACT_COUNT_LEAVES
    plan = _tile_plan(n, low_bits, n_jets, target_blocks, min_pairs)
    n_scratch = max(1, max((n_jets * count * g << nl for _p, _i0, count, g in plan), default=1))
    part_bytes = _tiled_sizes(log_z)[1]
    gpu_need = (n_jets * m * (_RECORD_BYTES + (8 if exact_count else 0)) + n_scratch * part_bytes
                + min(n_jets * m, _T_CHUNK) * 8)
    what = f"the tiled trellis of {n} leaves" + (f" for {n_jets} jets" if n_jets > 1 else "")
    check_memory(n_jets * m * (_RECORD_BYTES + (8 if exact_count else 0)), None, who,
                 what + " (copied back from the GPU)", "use window_search or astar_approx")
    _check_gpu_memory(gpu_need, who, what)
    thread_bits = min(low_bits, _TILE_THREAD_BITS_SIM if simulator_enabled() else _TILE_THREAD_BITS)
    sim = simulator_enabled()
    cross, same, part_bits = _gt.kernels(low_bits, thread_bits,
                                         _TILE_PART_BITS_SIM if sim else _TILE_PART_BITS)
    n_work = _gt.work_items(nl, part_bits)

    stacked = np.ascontiguousarray(
        leaves if isinstance(leaves, np.ndarray) else np.stack(leaves), dtype=np.float64)
    consts = np.ascontiguousarray(consts, dtype=np.float64).reshape(n_jets, 2, 5)
    d_node = cuda.device_array((n_jets, m, 4), dtype=np.float64)
    d_best = cuda.device_array((n_jets, m), dtype=np.int32)
    d_count = cuda.device_array((n_jets, m) if exact_count else (1, 1), dtype=np.int64)
    d_binom = cuda.to_device(_binomials(n))
    d_consts = cuda.to_device(consts)
    d_traffic = cuda.to_device(np.zeros(1, dtype=np.int64))
    _upload_t(cuda, _g, _host_t(stacked, consts), d_node)  # (t from the host, as solve_on_gpu)
    _launch(_g.init_leaves, n_jets * (n + 1), n, d_node, d_best, d_count, exact_count)
    z_items = n_scratch if log_z else 1
    scratch = (
        cuda.device_array(n_scratch, dtype=np.float64),
        cuda.device_array(n_scratch, dtype=np.int32),
        cuda.device_array(z_items, dtype=np.float64),
        cuda.device_array(z_items, dtype=np.float64),
        cuda.device_array(1 if exact_count else z_items, dtype=np.float64),
        cuda.device_array(z_items if exact_count else 1, dtype=np.int64),
    )
    cuda.synchronize()
    t_setup = time.perf_counter() - started
    finished = True
    launches = 0
    done_splits = 0
    threads = 1 << thread_bits
    for p, i0, count, g in plan:
        if (max_time is not None and launches > 0
                and time.perf_counter() - started > max_time):
            finished = False
            break
        if g:
            _launch_tiles(cross, n_jets * count * g, threads, p, n, nl, n_work, i0, count, g, d_binom,
                          d_node, d_count, d_consts, log_z, exact_count, prune, *scratch,
                          count_traffic, d_traffic)
        _launch_tiles(same, n_jets * count, threads, p, n, nl, i0, count, g, d_binom, d_node,
                      d_count, d_best, d_consts, log_z, exact_count, prune, *scratch,
                      count_traffic, d_traffic)
        cuda.synchronize()
        launches += 1
        done_splits += n_jets * count * _tile_splits(p, nl)
    t_dp = time.perf_counter() - started - t_setup
    node = d_node.copy_to_host()
    best = d_best.copy_to_host()
    if exact_count:
        node.view(np.int64)[:, :, 3] = d_count.copy_to_host()
    traffic = int(d_traffic.copy_to_host()[0])
    del d_node, d_best, d_count, scratch
    total = time.perf_counter() - started
    stats: dict[str, Any] = {
        "device": "gpu",
        "gpu": gpu_status()["device"],
        "engine": "tiled",
        "n_leaves": n,
        "n_jets": n_jets,
        "low_bits": nl,
        "clusters": m - 1,
        "splits_total": n_splits_total(n),
        "splits_evaluated": done_splits // max(1, n_jets),
        "launches": launches,
        "gpu_memory_bytes": gpu_need,
        "memory_bytes": int(node.nbytes + best.nbytes),
        "exact_count": exact_count,
        **_times(t_setup, t_dp, total, done_splits),
    }
    if count_traffic:
        stats["global_bytes"] = traffic
        stats["bytes_per_split"] = traffic / max(1, done_splits)
    return GpuSolution(node, best, exact_count, finished, stats)


def gpu_marginals(
    node: np.ndarray, consts: np.ndarray, *, who: str = "jet",
    target_threads: int = _TARGET_THREADS, min_free_bits: int = _MIN_FREE_BITS,
) -> tuple[np.ndarray, int]:
    """Posterior marginal of every cluster of solved trellises, on the GPU (pull formulation).

    Args:
        node: ``(B, 2**n, 4)`` solved records (:attr:`GpuSolution.node`); every jet's whole-jet
            ``log Z`` must be finite.
        consts: ``(B, 2, 5)`` likelihood constants.
        who: start of messages.
        target_threads, min_free_bits: as for :func:`solve_on_gpu`.

    Returns:
        ``(marginals, walked)``: ``(B, 2**n)`` float64, the probability that each cluster is a
        node of a posterior tree; and the (cluster, parent) pairs the kernels walked, counted on
        the device (every pair of a cluster with a finite ``log Z``: ``3**n − 2**(n+1) + 1`` per
        jet when every cluster has one).
    """
    cuda = load_cuda()
    from . import _gpu_kernels as _g

    n_jets, m = node.shape[0], node.shape[1]
    n = m.bit_length() - 1
    n_scratch = max(1, _scratch_items(n, n_jets, target_threads, min_free_bits))
    need = node.nbytes + n_jets * m * 8 + n_scratch * 8
    _check_gpu_memory(need, who, f"the marginals of {n} leaves")
    d_node = cuda.to_device(np.ascontiguousarray(node))
    marg = np.zeros((n_jets, m), dtype=np.float64)
    marg[:, m - 1] = 1.0
    d_marg = cuda.to_device(marg)
    d_binom = cuda.to_device(_binomials(n))
    d_consts = cuda.to_device(np.ascontiguousarray(consts, dtype=np.float64).reshape(n_jets, 2, 5))
    d_part = cuda.device_array(n_scratch, dtype=np.float64)
    d_walked = cuda.to_device(np.zeros(1, dtype=np.int64))
    # each cluster's parent terms once, into the uploaded copy's unused MAP and count columns
    _launch(_g.parent_table, n_jets * m, n, d_node, d_consts)
    for k in range(n - 1, 0, -1):
        launches = _launches(n, n - k + 1, n_jets, target_threads, min_free_bits,
                             splits_per=1 << (n - k), clusters=math.comb(n, k))
        for i0, count, g in launches:
            items = n_jets * count
            _launch(_g.pull_marginals, items << g, k, n, g, i0, count, d_binom, d_node, d_consts,
                    d_marg, d_part, d_walked)
            if g:
                _launch(_g.combine_marginals, items, k, n, g, i0, count, d_binom, d_marg, d_part)
        cuda.synchronize()
    return d_marg.copy_to_host(), int(d_walked.copy_to_host()[0])


def _n_marginal_pairs(n: int) -> int:
    """(cluster, parent) pairs of a jet of ``n`` leaves: ``Σ_c (2**(n - |c|) - 1)`` over the
    clusters ``c`` other than the whole jet, ``3**n − 2**(n+1) + 1``."""
    return 3**n - (1 << (n + 1)) + 1


def _marg_plan(n: int, low_bits: int, n_jets: int, target_blocks: int = _TILE_TARGET_BLOCKS,
               min_pairs: int = _TILE_MIN_PAIRS) -> list[tuple[int, int, int, int]]:
    """``(level p, first tile, tiles, chunks G)`` per launch pair of the tiled marginals.

    Levels from the most high bits to the fewest (every parent is final when read); the tiles of a
    level in slices of at most ``_LAUNCH_SPLITS`` pairs; each tile's ``2**(h - p) - 1`` sibling
    high parts dealt to ``G`` blocks (``G = 0``: no cross pairs, the top level), as
    :func:`_tile_plan` deals the DP's high pairs.
    """
    nl = min(low_bits, n)
    hb = n - nl
    out = []
    for p in range(hb, -1, -1):
        tiles = math.comb(hb, p)
        pairs = (1 << (hb - p)) - 1
        per_slice = max(1, _LAUNCH_SPLITS // max(1, n_jets * (pairs + 1) * 3**nl))
        for i0 in range(0, tiles, per_slice):
            count = min(per_slice, tiles - i0)
            out.append((p, i0, count, _blocks_per_tile(pairs, n_jets * count, target_blocks,
                                                       min_pairs)))
    return out


#: bytes the tiled marginals read per record of a tile: (t, log Z) of a cluster or a sibling;
#: (t, log Z, marginal) of a parent; and a partial sum or a marginal written or read
_MARG_TZ_BYTES = 16
_MARG_PARENT_BYTES = 24
_MARG_VALUE_BYTES = 8


def _marg_tile_bytes(p: int, hb: int, nl: int, g: int) -> int:
    """Global-memory bytes the tiled marginal kernels read and write for one tile of level ``p``
    (of ``hb`` high bits) dealt to ``g`` chunks (what their ``traffic`` counter adds)."""
    size = 1 << nl
    pairs = (1 << (hb - p)) - 1
    cross = 0
    if g:
        cross = (g * size * (_MARG_TZ_BYTES + _MARG_VALUE_BYTES)
                 + pairs * size * (_MARG_TZ_BYTES + _MARG_PARENT_BYTES))
    same = (size * _MARG_TZ_BYTES * (2 if p else 1) + g * size * _MARG_VALUE_BYTES
            + size * _MARG_VALUE_BYTES)
    return cross + same


def tiled_marginal_bytes_per_split(
    n_leaves: int, low_bits: int = _TILE_LOW_BITS, *, n_jets: int = 1,
    target_blocks: int = _TILE_TARGET_BLOCKS, min_pairs: int = _TILE_MIN_PAIRS,
) -> tuple[int, float]:
    """Global-memory traffic of :func:`gpu_marginals_tiled`, counted from its plan without running
    anything (the figure its ``count_traffic`` counter measures), per (cluster, parent) pair.

    Counts every byte the marginal kernels read or write in global memory: each tile's ``(t, log Z)``
    (16 bytes a record, packed by the host), each parent tile's ``(t, log Z, marginal)`` (24), the
    partial sums of chunks and the marginals written (8); not the upload of the table. Today's
    :func:`gpu_marginals` (``pull_marginals``) reads per pair the parent's marginal, ``log Z``, ``t``,
    ``log t`` and stop term and the sibling's ``log Z`` and ``t``: 56 bytes (32-byte records read at
    scattered masks, so it moves whole sectors: up to 96).

    Args:
        n_leaves: leaves per jet.
        low_bits: low bits per tile.
        n_jets: jets done together.
        target_blocks, min_pairs: the plan's settings (as for :func:`gpu_marginals_tiled`).

    Returns:
        ``(bytes, bytes per pair)``, per pair of the ``3**n − 2**(n+1) + 1`` of every jet.

    Example:
        >>> round(tiled_marginal_bytes_per_split(24)[1], 2)
        1.04
    """
    nl = min(low_bits, n_leaves)
    hb = n_leaves - nl
    total = 0
    for p, _i0, count, g in _marg_plan(n_leaves, low_bits, n_jets, target_blocks, min_pairs):
        total += n_jets * count * _marg_tile_bytes(p, hb, nl, g)
    return total, total / max(1, n_jets * _n_marginal_pairs(n_leaves))


def gpu_marginals_tiled(
    node: np.ndarray, consts: np.ndarray, *, who: str = "jet", low_bits: int | None = None,
    count_traffic: bool = False, target_blocks: int = _TILE_TARGET_BLOCKS,
    min_pairs: int = _TILE_MIN_PAIRS,
) -> tuple[np.ndarray, dict[str, Any]]:
    """:func:`gpu_marginals` by the tiled kernels of
    :mod:`jetastar.clustering.exact._gpu_tiled_marginals`: the same marginals, with each record
    read from global memory once per many (cluster, parent) pairs (about 1 byte per pair from 20
    leaves with the default tiles of 9 low bits, against today's 56:
    :func:`tiled_marginal_bytes_per_split`). Not yet used by :class:`~jetastar.clustering.Trellis`
    (reached through this function until a GPU has measured it).

    Args:
        node: ``(B, 2**n, 4)`` solved records (:attr:`GpuSolution.node`, or a CPU trellis's
            ``_node[None]``); only the ``t`` and ``log Z`` columns are read. Every jet's whole-jet
            ``log Z`` must be finite (a jet with no possible tree has no posterior: its marginals
            are all zero, which the caller knows without a GPU).
        consts: ``(B, 2, 5)`` likelihood constants.
        who: start of messages.
        low_bits: low bits per tile (default and most on a GPU: 9; the simulator takes up to 12,
            tests 2-3 to have many tiles on small jets).
        count_traffic: count the global-memory bytes the kernels read and write
            (``stats["global_bytes"]``, ``stats["bytes_per_pair"]``).
        target_blocks, min_pairs: how a tile's sibling high parts are dealt to blocks (tests use
            small values to have several chunks per tile).

    Returns:
        ``(marginals, stats)``: ``(B, 2**n)`` float64, the probability that each cluster is a node
        of a posterior tree (``gpu_marginals``'s); ``stats`` with ``walked`` (the (cluster,
        parent) pairs the kernels walked, counted on the device: every pair of a cluster with a
        finite ``log Z``, ``3**n − 2**(n+1) + 1`` per jet when every cluster has one),
        ``pairs_total`` (per jet), ``launches``, ``low_bits``, ``gpu_memory_bytes``, ``time_s``,
        and with ``count_traffic`` ``global_bytes`` and ``bytes_per_pair``.

    Raises:
        ValueError: a jet whose whole-jet ``log Z`` is not finite, or ``low_bits`` out of range.
        TooLargeError: too many leaves, or tables that do not fit the GPU.
        GpuUnavailableError: no usable GPU.

    Example:
        >>> from jetastar.clustering import Trellis
        >>> from jetastar.ginkgo import ShowerParams, generate
        >>> jet = generate(1, ShowerParams.qcd(), seed=2, min_leaves=4, max_leaves=4)[0]
        >>> tr = Trellis(jet, "symmetric", device="cpu")
        >>> c = jet.likelihood_constants("symmetric")[None]
        >>> marg, stats = gpu_marginals_tiled(tr._node[None], c, low_bits=2)  # doctest: +SKIP
        >>> bool(np.allclose(marg[0], tr.marginals_array()))  # doctest: +SKIP
        True
    """
    cuda = load_cuda()
    from . import _gpu_tiled_marginals as _gm

    started = time.perf_counter()
    if node.ndim != 3 or node.shape[2] != 4 or node.shape[1] < 2 or node.shape[1] & (
            node.shape[1] - 1):
        raise ValueError(f"{who}: node must be (B, 2**n, 4) records, got {node.shape}")
    n_jets, m = int(node.shape[0]), int(node.shape[1])
    n = m.bit_length() - 1
    low_bits = _tile_low_bits(low_bits, n, who)
    root_z = np.asarray(node[:, m - 1, 2], dtype=np.float64)
    if not np.all(np.isfinite(root_z)):
        bad = np.flatnonzero(~np.isfinite(root_z)).tolist()
        raise ValueError(f"{who}: the whole jet's log Z is not finite (jets {bad}): no posterior "
                         "tree, so no marginals to compute (they are all zero)")
    nl = min(low_bits, n)
    plan = _marg_plan(n, low_bits, n_jets, target_blocks, min_pairs)
    n_scratch = max(1, max((n_jets * count * g << nl for _p, _i0, count, g in plan), default=1))
    need = n_jets * m * (_MARG_TZ_BYTES + _MARG_VALUE_BYTES) + n_scratch * _MARG_VALUE_BYTES
    what = f"the tiled marginals of {n} leaves" + (f" for {n_jets} jets" if n_jets > 1 else "")
    check_memory(n_jets * m * (_MARG_TZ_BYTES + _MARG_VALUE_BYTES), None, who,
                 what + " (packed and copied back on the host)", "use fewer leaves")
    _check_gpu_memory(need, who, what)
    sim = simulator_enabled()
    thread_bits = min(low_bits, _TILE_THREAD_BITS_SIM if sim else _TILE_THREAD_BITS)
    cross, same, part_bits = _gm.kernels(low_bits, thread_bits,
                                         _TILE_PART_BITS_SIM if sim else _TILE_PART_BITS)
    n_work = _gm.work_items(nl, part_bits)
    d_tz = cuda.to_device(np.ascontiguousarray(node[:, :, [0, 2]], dtype=np.float64))
    d_marg = cuda.to_device(np.zeros((n_jets, m), dtype=np.float64))
    d_binom = cuda.to_device(_binomials(n))
    d_consts = cuda.to_device(np.ascontiguousarray(consts, dtype=np.float64).reshape(n_jets, 2, 5))
    d_part = cuda.device_array(n_scratch, dtype=np.float64)
    d_traffic = cuda.to_device(np.zeros(1, dtype=np.int64))
    d_walked = cuda.to_device(np.zeros(1, dtype=np.int64))
    threads = 1 << thread_bits
    launches = 0
    for p, i0, count, g in plan:
        if g:
            _launch_tiles(cross, n_jets * count * g, threads, p, n, nl, n_work, i0, count, g,
                          d_binom, d_tz, d_marg, d_consts, d_part, count_traffic, d_traffic,
                          d_walked)
        _launch_tiles(same, n_jets * count, threads, p, n, nl, i0, count, g, d_binom, d_tz, d_marg,
                      d_consts, d_part, count_traffic, d_traffic, d_walked)
        cuda.synchronize()
        launches += 1
    marg = d_marg.copy_to_host()
    walked = int(d_walked.copy_to_host()[0])
    traffic = int(d_traffic.copy_to_host()[0])
    pairs = _n_marginal_pairs(n)
    stats: dict[str, Any] = {
        "device": "gpu",
        "engine": "tiled",
        "n_leaves": n,
        "n_jets": n_jets,
        "low_bits": nl,
        "pairs_total": pairs,
        "walked": walked,
        "launches": launches,
        "gpu_memory_bytes": need,
        "time_s": time.perf_counter() - started,
    }
    if count_traffic:
        stats["global_bytes"] = traffic
        stats["bytes_per_pair"] = traffic / max(1, n_jets * pairs)
    return marg, stats


def solve_map_on_gpu(
    rec: np.ndarray,
    wq: np.ndarray,
    best: np.ndarray,
    consts: np.ndarray,
    scale: float,
    *,
    floor: float = -math.inf,
    root_slack: float = 0.0,
    prune: bool = True,
    who: str = "jet",
    max_time: float | None = None,
    progress: bool = False,
    target_threads: int = _TARGET_THREADS,
    min_free_bits: int = _MIN_FREE_BITS,
) -> tuple[bool, dict[str, Any]]:
    """The bound-pruned exact MAP engine (:mod:`jetastar.clustering.exact_map`) on the GPU.

    The tables are the CPU engine's, set up on the host (``t`` column and leaves filled, as
    ``exact_map`` does); they are solved on the GPU by the CPU engine's own per-cluster functions
    and copied back in place, so the value and tree are read as on the CPU.

    Args:
        rec, wq, best: the ``(2**n, 2)`` float64, ``(2**n,)`` int16 and ``(2**n,)`` int32 tables.
        consts: ``(2, 5)`` likelihood constants.
        scale: the fixed-point scale of ``wq`` (:func:`jetastar.clustering.exact.exact_map.w_scale`).
        floor, root_slack: the whole jet's floor (an incumbent) and bound slack.
        prune: use the bounds.
        who: start of messages.
        max_time: seconds; checked between launches.
        progress: a bar over split counts.
        target_threads, min_free_bits: as for :func:`solve_on_gpu`.

    Returns:
        ``(finished, stats)``.
    """
    cuda = load_cuda()
    from . import _gpu_kernels as _g

    started = time.perf_counter()
    m = rec.shape[0]
    n = m.bit_length() - 1
    n_scratch = max(1, _scratch_items(n, 1, target_threads, min_free_bits))
    need = m * 22 + n_scratch * 16 + 64 * 1024
    _check_gpu_memory(need, who, f"the exact MAP of {n} leaves")
    d_rec, d_wq, d_best = cuda.to_device(rec), cuda.to_device(wq), cuda.to_device(best)
    d_binom = cuda.to_device(_binomials(n))
    d_consts = cuda.to_device(np.ascontiguousarray(consts, dtype=np.float64))
    part_v = cuda.device_array(n_scratch, dtype=np.float64)
    part_a = cuda.device_array(n_scratch, dtype=np.int64)
    cuda.synchronize()
    t_setup = time.perf_counter() - started
    finished = True
    launches = 0
    with split_progress(progress, n_splits_total(n), who, "GPU exact MAP") as bar:
        for k in range(2, n + 1):
            per = (1 << (k - 1)) - 1
            for i0, count, g in _launches(n, k, 1, target_threads, min_free_bits, per + 1):
                if (max_time is not None and launches > 0
                        and time.perf_counter() - started > max_time):
                    finished = False
                    break
                _launch(_g.map_bounded_parts, count << g, k, n, g, i0, count, d_binom, d_rec,
                        d_wq, d_best, d_consts, float(floor), float(root_slack), bool(prune),
                        float(scale), part_v, part_a)
                if g:
                    _launch(_g.map_bounded_combine, count, k, n, g, i0, count, d_binom, d_rec,
                            d_wq, d_best, d_consts, float(floor), float(scale), part_v, part_a)
                cuda.synchronize()
                launches += 1
                bar.update(count * per)
            if not finished:
                break
    t_dp = time.perf_counter() - started - t_setup
    d_rec.copy_to_host(rec)
    d_wq.copy_to_host(wq)
    d_best.copy_to_host(best)
    total = time.perf_counter() - started
    stats = {
        "device": "gpu", "gpu": gpu_status()["device"], "engine": "bound-pruned", "n_leaves": n,
        "clusters": m - 1, "splits_total": n_splits_total(n), "launches": launches,
        "gpu_memory_bytes": need, "memory_bytes": m * 22, "time_setup_s": t_setup,
        "time_dp_s": t_dp, "time_copy_s": total - t_setup - t_dp, "time_s": total,
        "gsplits_per_s": n_splits_total(n) / t_dp / 1e9 if t_dp > 0 and finished else 0.0,
    }
    return finished, stats


#: the tiled MAP's bytes (see :mod:`jetastar.clustering.exact._gpu_tiled_map`): a tile record read
#: (``wq``, ``t``, ``V``), a record written (``V``, ``wq``, ``best``), a partial (value, part), a ``t``
_MAP_TILE_RECORD_BYTES = 2 + 8 + 8
_MAP_WRITE_BYTES = 8 + 2 + 4
_MAP_PART_BYTES = 8 + 4
_MAP_T_BYTES = 8


def _map_tile_bytes(p: int, nl: int, g: int) -> int:
    """Plan-determined global-memory bytes of one tile of level ``p`` of the tiled MAP, its high
    pairs dealt to ``g`` chunks (what the kernels' ``traffic[0]`` adds): each chunk reads the
    tile's ``t``, both tiles of each of its pairs and writes a partial per cluster; the finishing
    block reads each cluster's ``t`` and ``g`` partials and writes its record (clusters of two
    leaves or more)."""
    size = 1 << nl
    pairs = (1 << (p - 1)) - 1 if p >= 2 else 0
    cross = (g * size * (_MAP_T_BYTES + _MAP_PART_BYTES)
             + pairs * 2 * size * _MAP_TILE_RECORD_BYTES) if g else 0
    clusters = size - nl - 1 if p == 0 else (size - 1 if p == 1 else size)
    return cross + clusters * (_MAP_T_BYTES + _MAP_WRITE_BYTES + g * _MAP_PART_BYTES)


def tiled_map_bytes_per_split(
    n_leaves: int, low_bits: int = _TILE_LOW_BITS, *, target_blocks: int = _TILE_TARGET_BLOCKS,
    min_pairs: int = _TILE_MIN_PAIRS,
) -> tuple[int, float]:
    """Plan-determined global-memory traffic of :func:`solve_map_on_gpu_tiled`, counted from its
    plan without running anything (what its counter's ``stats["global_bytes"]`` measures).

    Counts the tiles of ``wq``, ``t`` and ``V`` (18 bytes a record) loaded into shared memory,
    each cluster's ``t``, the partial bests of chunks, the finished records. Not counted here (they
    depend on the jet: ``stats["data_bytes"]``): the global reads of the same-high and level-0
    scans (``wq`` of both parts of every split of a cluster that can split, ``(t, V)`` of both
    parts of a split that passes the W test), a few tenths of a percent of the splits at 20+
    leaves. Today's :func:`solve_map_on_gpu` reads ``wq`` of both parts of every split (4 bytes)
    plus the records of the splits that pass.

    Args:
        n_leaves: leaves of the jet.
        low_bits: low bits per tile.
        target_blocks, min_pairs: the plan's settings (as for :func:`solve_map_on_gpu_tiled`).

    Returns:
        ``(bytes, bytes per split)``, per split of the ``(3**n + 1)/2 − 2**n``.

    Example:
        >>> round(tiled_map_bytes_per_split(26)[1], 2)
        0.94
    """
    nl = min(low_bits, n_leaves)
    total = 0
    for p, _i0, count, g in _tile_plan(n_leaves, low_bits, 1, target_blocks, min_pairs):
        total += count * _map_tile_bytes(p, nl, g)
    return total, total / max(1, n_splits_total(n_leaves))


def solve_map_on_gpu_tiled(
    rec: np.ndarray,
    wq: np.ndarray,
    best: np.ndarray,
    consts: np.ndarray,
    scale: float,
    *,
    floor: float = -math.inf,
    root_slack: float = 0.0,
    prune: bool = True,
    who: str = "jet",
    max_time: float | None = None,
    progress: bool = False,
    low_bits: int | None = None,
    count_traffic: bool = False,
    target_blocks: int = _TILE_TARGET_BLOCKS,
    min_pairs: int = _TILE_MIN_PAIRS,
) -> tuple[bool, dict[str, Any]]:
    """:func:`solve_map_on_gpu` by tiles (:mod:`jetastar.clustering.exact._gpu_tiled_map`): the
    same tables, solved in place with the same values and arg-max parts bit for bit, with the parts
    of the cross splits (all but a few tenths of a percent at 20+ leaves) read from shared memory:
    about 0.94 bytes of global memory per split at 24-30 leaves with tiles of 9 low bits
    (:func:`tiled_map_bytes_per_split`) instead of today's 4 plus the records of passing splits.

    Args:
        rec, wq, best: the ``(2**n, 2)`` float64, ``(2**n,)`` int16 and ``(2**n,)`` int32 tables
            (``t`` column and leaves filled on the host, as ``exact_map`` does).
        consts: ``(2, 5)`` likelihood constants.
        scale: the fixed-point scale of ``wq`` (:func:`jetastar.clustering.exact.exact_map.w_scale`).
        floor, root_slack: the whole jet's floor (an incumbent) and bound slack.
        prune: use the bounds.
        who: start of messages.
        max_time: seconds; checked between launches, after the first (then ``finished`` is
            ``False`` and the tables incomplete).
        progress: a bar over split counts.
        low_bits: low bits per tile (default and most on a GPU: 9; tests use 2-3).
        count_traffic: count global-memory bytes (``stats["global_bytes"]``, plan-determined,
            ``stats["bytes_per_split"]``; ``stats["data_bytes"]``, the scans' reads from global
            memory, which depend on the jet), and the splits that passed the W test and the ψ
            evaluated (``stats["splits_bound_passed"]``, ``stats["splits_evaluated"]``).
        target_blocks, min_pairs: how a tile's high pairs are dealt to blocks.

    Returns:
        ``(finished, stats)``.

    Raises:
        TooLargeError: too many leaves, or tables that do not fit the GPU.
        ValueError: ``low_bits`` out of range.
    """
    cuda = load_cuda()
    from . import _gpu_tiled_map as _gm

    started = time.perf_counter()
    m = rec.shape[0]
    n = m.bit_length() - 1
    low_bits = _tile_low_bits(low_bits, n, who)
    nl = min(low_bits, n)
    plan = _tile_plan(n, low_bits, 1, target_blocks, min_pairs)
    n_scratch = max(1, max((count * g << nl for _p, _i0, count, g in plan), default=1))
    need = m * 22 + n_scratch * _MAP_PART_BYTES + 64 * 1024
    _check_gpu_memory(need, who, f"the tiled exact MAP of {n} leaves")
    sim = simulator_enabled()
    thread_bits = min(low_bits, _TILE_THREAD_BITS_SIM if sim else _TILE_THREAD_BITS)
    cross, same, part_bits = _gm.kernels(low_bits, thread_bits,
                                         _TILE_PART_BITS_SIM if sim else _TILE_PART_BITS)
    n_work = _gm.work_items(nl, part_bits)
    d_rec, d_wq, d_best = cuda.to_device(rec), cuda.to_device(wq), cuda.to_device(best)
    d_binom = cuda.to_device(_binomials(n))
    d_consts = cuda.to_device(np.ascontiguousarray(consts, dtype=np.float64).reshape(2, 5))
    part_v = cuda.device_array(n_scratch, dtype=np.float64)
    part_a = cuda.device_array(n_scratch, dtype=np.int32)
    d_traffic = cuda.to_device(np.zeros(4, dtype=np.int64))
    cuda.synchronize()
    t_setup = time.perf_counter() - started
    finished = True
    launches = 0
    done_splits = 0
    threads = 1 << thread_bits
    scalars = (float(floor), float(root_slack), bool(prune), float(scale))
    with split_progress(progress, n_splits_total(n), who, "GPU exact MAP (tiled)") as bar:
        for p, i0, count, g in plan:
            if (max_time is not None and launches > 0
                    and time.perf_counter() - started > max_time):
                finished = False
                break
            if g:
                _launch_tiles(cross, count * g, threads, p, n, nl, n_work, i0, count, g, d_binom,
                              d_rec, d_wq, d_best, d_consts, *scalars, part_v, part_a,
                              bool(count_traffic), d_traffic)
            _launch_tiles(same, count, threads, p, n, nl, i0, count, g, d_binom, d_rec, d_wq,
                          d_best, d_consts, *scalars, part_v, part_a, bool(count_traffic),
                          d_traffic)
            cuda.synchronize()
            launches += 1
            done_splits += count * _tile_splits(p, nl)
            bar.update(count * _tile_splits(p, nl))
    t_dp = time.perf_counter() - started - t_setup
    d_rec.copy_to_host(rec)
    d_wq.copy_to_host(wq)
    d_best.copy_to_host(best)
    traffic = d_traffic.copy_to_host()
    total = time.perf_counter() - started
    stats: dict[str, Any] = {
        "device": "gpu", "gpu": gpu_status()["device"], "engine": "bound-pruned tiled",
        "n_leaves": n, "low_bits": nl, "clusters": m - 1, "splits_total": n_splits_total(n),
        "splits_done": done_splits, "launches": launches, "gpu_memory_bytes": need,
        "memory_bytes": m * 22,
        **_times(t_setup, t_dp, total, done_splits if finished else 0),
    }
    if count_traffic:
        stats["global_bytes"] = int(traffic[0])
        stats["bytes_per_split"] = int(traffic[0]) / max(1, done_splits)
        stats["data_bytes"] = int(traffic[1])
        stats["data_bytes_per_split"] = int(traffic[1]) / max(1, done_splits)
        stats["splits_bound_passed"] = int(traffic[2])
        stats["splits_evaluated"] = int(traffic[3])
    return finished, stats
