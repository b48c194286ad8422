"""The exact cluster trellis: MAP tree, partition function, posterior samples and cluster marginals.

The trellis holds every non-empty subset (*cluster*) of a jet's ``n`` leaves as an integer bitmask.
Per-cluster squared masses ``t`` are computed once in O(2**n); then a bottom-up dynamic programme
over clusters in order of size visits every unordered 2-partition of every cluster exactly once
(O(3**n) split scores in total) and stores, per cluster, the best log-likelihood of a hierarchy over
it (and the arg-max split), the log partition function ``log Z`` (a streaming log-sum-exp) and the
number of hierarchies with non-zero likelihood. The split of the whole jet is scored with ``λ_R``,
every other split with ``λ``, through :func:`jetastar.ginkgo.likelihood.split_llh`.

Exactness-preserving pruning: a cluster whose ``t`` is at or below ``t_cut`` (``< t_cut`` for the
legacy form) has no split of non-zero likelihood, so its splits are never enumerated; a split
whose part has no possible hierarchy is skipped before scoring.

On top of the solved trellis, :class:`Trellis` draws exact posterior samples of trees (top-down,
each split chosen with probability ``exp(ψ + log Z(A) + log Z(B) − log Z(S))``) and computes the
posterior probability of every cluster (an outside pass over the subset lattice, also O(3**n)).

Cost models. The same trellis solves a hierarchical-clustering cost over a weighted graph
(:class:`jetastar.costs.HCCCost`, :class:`jetastar.costs.DasguptaCost`): pass the cost model instead
of a jet. A split is then scored ``ψ = −cost(A, B)`` from the model's per-subset features
(:meth:`~jetastar.costs.CostModel.all_subset_features`, 32 more bytes per cluster), so the MAP tree
is the minimum-cost hierarchy (``result.cost`` is its cost), ``log Z = log Σ_trees exp(−cost)`` is
the partition function of the Gibbs distribution over hierarchies at temperature 1 (samples and
marginals are exact under that distribution), and every one of the ``(2n − 3)!!`` hierarchies
counts. Nothing is pruned.

Memory is about 41 bytes per cluster (``2**n`` of them), 43 MB at 20 leaves and 690 MB at 24;
the marginal pass adds ``8 * (1 + threads)`` bytes per cluster. The time is dominated by the
``(3**n + 1)/2 - 2**n`` split scores (1.7e9 at 20 leaves), each one call of the likelihood kernel;
clusters of equal size are solved in parallel (numba threads).

Example:
    >>> from jetastar.ginkgo import ShowerParams, generate
    >>> from jetastar.clustering import Trellis, exact_trellis
    >>> jet = generate(1, ShowerParams.qcd(), seed=1, min_leaves=6, max_leaves=6)[0]
    >>> res = exact_trellis(jet)
    >>> res.exact, res.log_z >= res.log_likelihood
    (True, True)
    >>> tr = Trellis(jet)
    >>> len(tr.sample(3, seed=0))
    3
    >>> import numpy as np
    >>> from jetastar.costs import HCCCost
    >>> W = np.array([[0, 2, -1, -1], [2, 0, -1, -1], [-1, -1, 0, 1], [-1, -1, 1, 0]])
    >>> res = exact_trellis(HCCCost(W))
    >>> res.tree.to_nested(), res.cost, res.likelihood, res.n_trees
    (((0, 1), (2, 3)), 3.0, 'hcc', 15)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import numba as nb
import numpy as np

from ..._columnar import first_leaf_problem
from ..._cuda import DEVICES, check_device, resolve_device
from ..._jit import Stopwatch
from ..._progress import PER_JET_DELAY, progress_bar
from ...costs import CostModel
from ...errors import GpuUnavailableError, InvalidJetError, InvalidTreeError, OptionError
from ...ginkgo.kernels import FORM_LEGACY
from ...ginkgo.likelihood import LIKELIHOODS, check_likelihood
from ...jet import Jet, JetCollection
from ...tree import Tree
from .._engine import (
    check_budget,
    check_memory,
    check_size,
    default_memory_limit,
    format_bytes,
    solving,
    tree_from_best,
    valid_likelihood,
)
from .._engine import estimate_trellis_memory as estimate_memory
from .._subsets import (
    fill_subset_t,
    full_mask,
    leaves_of,
    mask_of,
    masks_by_size,
    n_splits_total,
    subset_sizes,
)
from ..agglomerative.cost_baselines import average_linkage
from ..agglomerative.greedy import greedy
from ..chunks import (
    DONE,
    Chunk,
    ChunkPath,
    ChunkResults,
    cluster_columns,
    constant_rows,
    params_valid,
    rerun_options,
)
from ..options import as_flag, choice, flag, integer, likelihood_option, number
from ..registry import AlgorithmInfo, WarmUp, register
from ..result import ClusteringResult
from ..threads import Threads, check_threads, parallel_worth_it
from . import _trellis_kernels as _k
from ._map_kernels import EXACT_CHUNK_MAX
from .exact_map import (
    ALL_INF_MESSAGE,
    estimate_map_memory,
    exact_map,
    exact_rows,
    expected_map_cpu_seconds,
    map_chunk_rows,
)
from .gpu import GPU_MIN_LEAVES, estimate_gpu_memory, gpu_marginals, solve_on_gpu

__all__ = [
    "LOG_Z_IN_PROCESS_CHUNK",
    "MAX_EXACT_COUNT_LEAVES",
    "MAX_TRELLIS_LEAVES",
    "TRELLIS",
    "Trellis",
    "default_memory_limit",
    "estimate_memory",
    "exact_trellis",
    "exact_trellis_batch",
]

#: Largest jet for which tree counts are exact int64 ((2n-3)!! < 2**63 up to 18 leaves: 33!! is
#: 6.3e18, 35!! is 2.2e20); above it counts are float64 (relative precision ~1e-16, can round).
MAX_EXACT_COUNT_LEAVES = 18
#: Hard limit of the bitmask layout (int32 masks), whatever the memory.
MAX_TRELLIS_LEAVES = 30

#: Show a progress bar from this many leaves on when ``progress=None``.
_PROGRESS_FROM = 19
#: Jets per columnar kernel call of :func:`exact_trellis_batch` on the CPU (bounds the flat
#: results held at once).
_CPU_BATCH = 4096
#: Posterior samples are drawn in batches of this many (bounds the sampler's scratch memory).
_SAMPLE_BATCH = 20_000

# layout of a constants row (see jetastar.ginkgo.likelihood.likelihood_constants)
_ROW_TCUT = 0
_ROW_FORM = 4

def _check_memory(
    n: int, who: str, max_memory: int | None, marginals: bool = False,
    threads: int | None = None, cost_model: bool = False,
) -> int:
    """The memory estimate, or TooLargeError; ``who`` starts the message (``"jet 3"``)."""
    need = estimate_memory(n, marginals=marginals, threads=threads, cost_model=cost_model)
    unit = "points" if cost_model else "leaves"
    advice = "use astar_approx or greedy" if cost_model else "use astar or astar_approx"
    check_size(n, MAX_TRELLIS_LEAVES, who, unit, "trellis", f"it would need {format_bytes(need)}",
               advice)
    what = "trellis with marginals" if marginals else "trellis"
    return check_memory(need, max_memory, who, f"the exact {what} of {n} {unit}", advice)


# ---------------------------------------------------------------------- the trellis
class Trellis:
    """The solved exact trellis of one jet (or one cost model), for repeated queries.

    Construction runs the O(3**n) dynamic programme (MAP and log Z in one pass); samples and
    marginals are computed on demand.

    Args:
        jet: a :class:`jetastar.Jet`, or a cost model (:class:`jetastar.costs.HCCCost`,
            :class:`jetastar.costs.DasguptaCost`): then every "log-likelihood" below is minus a
            cost (see the module docstring).
        likelihood: ``"symmetric"`` (default) or ``"legacy"``; for a cost model leave it unset
            (or give the model's name, e.g. ``"hcc"``).
        max_memory: memory limit in bytes (default :func:`default_memory_limit`); a jet whose
            trellis would need more raises :class:`TooLargeError` before anything is allocated.
        prune: skip clusters that cannot be split (``t <= t_cut``); the results are identical
            with ``prune=False``, which exists to check that. Ignored for cost models.
        threads: numba threads for the parallel passes (default: numba's setting, all cores).
        progress: show a tqdm progress bar (``True``); default: from 19 leaves on, once the jet
            has taken 10 s (loops over jets stay quiet).
        device: ``"cpu"``, ``"gpu"`` or ``"auto"`` (default): where the dynamic programme and the
            marginal pass run. ``"auto"`` uses a GPU (:mod:`jetastar.clustering.gpu`) from
            ``GPU_MIN_LEAVES`` leaves on when one is usable, else the CPU. Results are the same
            (to rounding); cost models run on the CPU.
        max_time: run-time budget of the dynamic programme in seconds (``None``: none;
            compiling kernels does not count on the CPU), checked between slices of work on the
            CPU and between launches on the GPU.

    Raises:
        InvalidJetError: ``jet`` is neither a Jet nor a cost model.
        ValueError: unknown likelihood name (or a likelihood given with a cost model).
        TooLargeError: the trellis would not fit in ``max_memory`` (or in the GPU's memory).
        GpuUnavailableError: ``device="gpu"`` where no GPU can be used.
        TimeoutError: the dynamic programme passed ``max_time`` (:func:`exact_trellis` returns
            the greedy tree with ``status="budget"`` instead).

    Example:
        >>> from jetastar.ginkgo import ShowerParams, generate
        >>> jet = generate(1, ShowerParams.qcd(), seed=3, min_leaves=5, max_leaves=5)[0]
        >>> tr = Trellis(jet)
        >>> tr.map_tree().n_leaves, tr.n_trees() <= 105
        (5, True)
    """

    def __init__(
        self,
        jet: Jet | CostModel,
        likelihood: str | None = None,
        max_memory: int | None = None,
        *,
        prune: bool = True,
        threads: int | None = None,
        progress: bool | None = None,
        device: str | None = "auto",
        max_time: float | None = None,
    ) -> None:
        self._max_time = check_budget(max_time, "max_time")
        if isinstance(jet, CostModel):
            if resolve_device(device, worth_it=False) != "cpu":
                raise OptionError(
                    f"{jet.label}: the GPU trellis scores the Ginkgo likelihood; cost models run on "
                    "the CPU (device='cpu' or 'auto')"
                )
            self._setup_cost(jet, likelihood, max_memory, threads, progress)
            return
        if not isinstance(jet, Jet):
            raise InvalidJetError(
                "the exact trellis needs a jetastar.Jet or a cost model (jetastar.costs.HCCCost, "
                f"DasguptaCost), got {type(jet).__name__}", field="jet"
            )
        likelihood = valid_likelihood(likelihood)
        self._setup(
            jet, jet.leaves, jet.likelihood_constants(likelihood), likelihood,
            jet.label, max_memory, prune, threads, progress, device,
        )

    @classmethod
    def from_arrays(
        cls,
        leaves: Any,
        constants: Any,
        likelihood: str | None = None,
        max_memory: int | None = None,
        *,
        label: object = None,
        prune: bool = True,
        threads: int | None = None,
        progress: bool | None = None,
        device: str | None = "auto",
    ) -> Trellis:
        """Solve the trellis of raw leaf 4-momenta (no :class:`Jet` validation; ``n >= 1``).

        Args:
            leaves: ``(n, 4)`` float64 leaf 4-momenta ``(E, px, py, pz)``.
            constants: ``(2, 5)`` :func:`jetastar.ginkgo.likelihood_constants` for ``likelihood``.
            likelihood: the form ``constants`` were made for (default: the form they record;
                another name is an error).
            max_memory, prune, threads, progress, device: as for the constructor.
            label: name of the input in messages.

        Returns:
            The solved :class:`Trellis` (its ``jet`` is ``None``).

        Example:
            >>> import numpy as np
            >>> from jetastar.ginkgo import likelihood_constants
            >>> leaves = np.array([[5.0, 0.0, 0.0, 4.0], [5.0, 0.0, 0.0, -4.0]])
            >>> tr = Trellis.from_arrays(leaves, likelihood_constants(16.0, 1.5))
            >>> tr.n_trees()
            1
        """
        p = np.asarray(leaves, dtype=np.float64)
        c = np.asarray(constants, dtype=np.float64)
        if p.ndim != 2 or p.shape[1] != 4 or p.shape[0] < 1 or not np.all(np.isfinite(p)):
            raise InvalidJetError(
                f"must be a finite (n >= 1, 4) array, got shape {p.shape}", jet=label,
                field="leaves",
            )
        if c.shape != (2, 5) or not np.all(np.isfinite(c)):
            raise ValueError(f"constants must be a finite (2, 5) array, got shape {c.shape}")
        made_for = LIKELIHOODS[int(c[0, _ROW_FORM])]
        if likelihood is None:
            likelihood = made_for
        elif check_likelihood(likelihood) >= 0 and likelihood != made_for:  # (a name it knows)
            raise ValueError(
                f"likelihood={likelihood!r}, but the constants were made for the {made_for!r} "
                f"form (likelihood_constants(..., likelihood={likelihood!r}) makes theirs)"
            )
        self = cls.__new__(cls)
        self._setup(None, p, c, likelihood, label, max_memory, prune, threads, progress, device)
        return self

    def _setup(
        self, jet: Jet | None, leaves: np.ndarray, consts: np.ndarray, likelihood: str,
        label: object, max_memory: int | None, prune: bool, threads: int | None,
        progress: bool | None, device: str | None = "cpu",
    ) -> None:
        self.device = resolve_device(device, worth_it=leaves.shape[0] >= GPU_MIN_LEAVES)
        self.jet = jet
        self.cost_model: CostModel | None = None
        self.likelihood = likelihood
        self.max_memory = max_memory
        self.prune = bool(prune)
        self.threads = check_threads(threads)
        label = "<unnamed>" if label is None else label
        self._who = f"jet {label}"
        self._solve(
            np.ascontiguousarray(leaves, dtype=np.float64),
            np.ascontiguousarray(consts, dtype=np.float64),
            label,
            self.prune,
            progress,
        )

    def _setup_cost(
        self, model: CostModel, likelihood: str | None, max_memory: int | None,
        threads: int | None, progress: bool | None,
    ) -> None:
        if likelihood is not None and likelihood != model.name:
            raise ValueError(
                f"{model.label}: a cost model has no likelihood option (got likelihood="
                f"{likelihood!r}); the trellis scores its splits with -cost"
            )
        self.device = "cpu"
        self.jet = None
        self.cost_model = model
        self.likelihood = model.name
        self.max_memory = max_memory
        self.prune = False
        self.threads = check_threads(threads)
        self._who = model.label
        n = model.n_points
        self._solve(
            np.zeros((n, 4), dtype=np.float64),
            np.zeros((2, 5), dtype=np.float64),
            model.label,
            False,
            progress,
            model,
        )

    # ------------------------------------------------------------------ the DP
    #: run-time budget of the DP (``max_time``; none for :meth:`from_arrays`)
    _max_time: float | None = None

    def _solve(
        self, leaves: np.ndarray, consts: np.ndarray, label: object, prune: bool,
        progress: bool | None, model: CostModel | None = None,
    ) -> None:
        watch = Stopwatch()
        n = int(leaves.shape[0])
        self.n_leaves = n
        self._label = label
        self._consts = consts
        self._marg: np.ndarray | None = None
        if self.device == "gpu":
            self._solve_gpu(leaves, consts, prune, progress)
            return
        self.memory_bytes = _check_memory(
            n, self._who, self.max_memory, cost_model=model is not None
        )
        m = 1 << n
        full = full_mask(n)
        self._full = full
        exact_count = n <= MAX_EXACT_COUNT_LEAVES
        node = np.empty((m, _k.N_COLUMNS), dtype=np.float64)
        node_i = node.view(np.int64)
        if model is None:
            self._code = _k.GINKGO
            self._feat = np.zeros((1, 4), dtype=np.float64)
            fill_subset_t(leaves, consts[0], node[:, _k.T])
        else:
            self._code = int(model.code)
            self._feat = np.ascontiguousarray(model.all_subset_features(), dtype=np.float64)
            _k.fill_part_values(self._code, self._feat, node[:, _k.T])
        code, feat = self._code, self._feat
        self._node = node
        self._node_i = node_i
        self._best = np.zeros(m, dtype=np.int32)
        self._exact_count = exact_count
        self._order, self._offsets = masks_by_size(n)
        _k.init_leaves(n, node, node_i, self._best, exact_count)
        t_cut = float(consts[0, _ROW_TCUT])
        legacy = bool(consts[0, _ROW_FORM] == FORM_LEGACY)
        t_setup = watch.seconds()
        evaluated = skipped = pruned = 0
        show = n >= _PROGRESS_FROM if progress is None else bool(progress)
        delay = PER_JET_DELAY if progress is None else 0.0  # quiet in loops over jets
        with solving(self.threads, show, n_splits_total(n), self._who, "trellis", delay) as bar:
            for size in range(2, n + 1):
                per = (1 << (size - 1)) - 1
                for start, stop in _chunks(self._offsets, size, n, show):
                    kernel = _k.dp_range if parallel_worth_it((stop - start) * per) else (
                        _k.dp_range_serial
                    )
                    e, k, p = kernel(
                        self._order, start, stop, full, node, node_i, self._best, exact_count,
                        consts, t_cut, legacy, prune, code, feat,
                    )
                    evaluated += int(e)
                    skipped += int(k)
                    pruned += int(p)
                    bar.update((stop - start) * per)
                    if self._max_time is not None and watch.seconds() > self._max_time:
                        raise TimeoutError(
                            f"{self._who}: the exact trellis of {n} "
                            f"{'points' if model is not None else 'leaves'} stopped by max_time="
                            f"{self._max_time:g} s after {watch.seconds():.3g} s (clusters of "
                            f"up to {size} of the {n} done)"
                        )
        t_total = watch.seconds()
        self.stats: dict[str, Any] = {
            "device": "cpu",
            "n_leaves": n,
            "clusters": m - 1,
            "clusters_pruned": pruned,
            "clusters_impossible": int(np.count_nonzero(node[1:, _k.MAP] == -np.inf)),
            "splits_total": n_splits_total(n),
            "splits_evaluated": evaluated,
            "splits_skipped": skipped,
            "memory_bytes": self.memory_bytes,
            "threads": self.threads or nb.get_num_threads(),
            "exact_count": exact_count,
            "time_setup_s": t_setup,
            "time_dp_s": t_total - t_setup,
            "time_s": t_total,
        }

    def _solve_gpu(
        self, leaves: np.ndarray, consts: np.ndarray, prune: bool, progress: bool | None
    ) -> None:
        n = int(leaves.shape[0])
        show = n >= _PROGRESS_FROM if progress is None else bool(progress)
        sol = solve_on_gpu([leaves], consts[None], log_z=True, prune=prune, who=self._who,
                           max_memory=self.max_memory, progress=show, max_time=self._max_time)
        if not sol.finished:  # (a half-filled table is never read as a result)
            raise TimeoutError(
                f"{self._who}: the exact trellis of {n} leaves on the GPU stopped by max_time="
                f"{self._max_time:g} s after {sol.stats['time_s']:.3g} s ({sol.stats['launches']} "
                "launches)")
        self._adopt(sol.node[0], sol.best[0], sol.exact_count, sol.stats)

    def _adopt(self, node: np.ndarray, best: np.ndarray, exact_count: bool,
               stats: dict[str, Any]) -> None:
        """Take over tables solved elsewhere (the GPU) in this class's layout."""
        self._node = node
        self._node_i = node.view(np.int64)
        self._best = best
        self._exact_count = exact_count
        self._full = full_mask(self.n_leaves)
        self._code = _k.GINKGO
        self._feat = np.zeros((1, 4), dtype=np.float64)
        self.memory_bytes = int(stats["memory_bytes"])
        self.stats = dict(stats)
        self.stats["clusters_impossible"] = int(np.count_nonzero(node[1:, _k.MAP] == -np.inf))

    # ------------------------------------------------------------------ MAP, log Z, counts
    def map_log_likelihood(self) -> float:
        """Log-likelihood of the MAP tree (``-inf`` when every tree is impossible); for a cost model
        minus the minimum cost."""
        return float(self._node[self._full, _k.MAP])

    def map_cost(self) -> float:
        """``-map_log_likelihood()``: the minimum cost of a hierarchy for a cost model."""
        return -self.map_log_likelihood()

    def log_partition(self) -> float:
        """``log Z``: log of the sum of the likelihoods of all hierarchies (``-inf`` if none)."""
        return float(self._node[self._full, _k.LOG_Z])

    def n_trees(self) -> int | float:
        """Number of hierarchies with non-zero likelihood.

        Exact ``int`` up to :data:`MAX_EXACT_COUNT_LEAVES` leaves, a ``float`` above (the count
        can exceed int64: (2n − 3)!! is 2.2e20 at 19 leaves).
        """
        if self._exact_count:
            return int(self._node_i[self._full, _k.COUNT])
        return float(self._node[self._full, _k.COUNT])

    def all_inf(self) -> bool:
        """True when every hierarchy of the jet has likelihood zero."""
        return self.map_log_likelihood() == -math.inf

    def map_tree(self) -> Tree:
        """The MAP hierarchy, read top-down through the arg-max splits.

        When every tree is impossible this is still a valid tree (the first split of each
        cluster); check :meth:`all_inf`.
        """
        return self._tree_from_splits(self._full)

    def map_tree_of(self, leaves: Iterable[int]) -> Tree:
        """The MAP hierarchy of a sub-cluster (leaf indices relabelled ``0 .. k-1`` in order).

        Args:
            leaves: the leaf indices of the cluster (at least one).
        """
        mask = self._mask(leaves)
        return self._tree_from_splits(mask)

    def cluster_map(self, leaves: Iterable[int]) -> float:
        """Best log-likelihood of a hierarchy over a sub-cluster (with ``λ``, or ``λ_R`` for the
        whole jet); 0 for a single leaf."""
        return float(self._node[self._mask(leaves), _k.MAP])

    def cluster_log_z(self, leaves: Iterable[int]) -> float:
        """``log Z`` of a sub-cluster (all hierarchies over those leaves)."""
        return float(self._node[self._mask(leaves), _k.LOG_Z])

    def map_array(self) -> np.ndarray:
        """Read-only per-mask MAP log-likelihoods (index = bitmask; entry 0 is ``-inf``)."""
        return _readonly(self._node[:, _k.MAP])

    def log_z_array(self) -> np.ndarray:
        """Read-only per-mask ``log Z`` (index = bitmask; entry 0 is ``-inf``)."""
        return _readonly(self._node[:, _k.LOG_Z])

    def t_array(self) -> np.ndarray:
        """Read-only per-mask ``t`` the likelihood uses (index = bitmask)."""
        return _readonly(self._node[:, _k.T])

    def _mask(self, leaves: Iterable[int]) -> int:
        idx = [int(i) for i in leaves]
        if not idx or any(not 0 <= i < self.n_leaves for i in idx):
            raise ValueError(
                f"{self._who}: a cluster is a non-empty set of leaf indices in "
                f"0..{self.n_leaves - 1}, got {idx}"
            )
        if len(set(idx)) != len(idx):
            raise ValueError(f"{self._who}: repeated leaf indices {idx}")
        return mask_of(idx)

    def _tree_from_splits(self, root_mask: int) -> Tree:
        return tree_from_best(self._best, root_mask, self._label)

    # ------------------------------------------------------------------ sampling
    def sample_children(self, n: int, seed: int | None = 0) -> np.ndarray:
        """Exact posterior samples as children arrays (fast path of :meth:`sample`).

        Args:
            n: number of samples.
            seed: seed of ``numpy.random.default_rng`` (``None`` for fresh entropy).

        Returns:
            ``(n, 2N - 1, 2)`` int64 array; leaf ``i`` is node ``i``, internal nodes follow.

        Raises:
            ValueError: ``n < 0``, or every tree has likelihood zero (nothing to sample).
        """
        n = _check_count(n, "n")
        if self.all_inf():
            raise ValueError(
                f"{self._who}: every tree has likelihood zero, there is no posterior to "
                "sample"
            )
        nl = self.n_leaves
        rng = np.random.default_rng(seed)
        out = np.empty((n, 2 * nl - 1, 2), dtype=np.int64)
        for lo in range(0, n, _SAMPLE_BATCH):
            hi = min(n, lo + _SAMPLE_BATCH)
            u = rng.random((hi - lo, nl - 1))
            out[lo:hi] = _k.sample_trees(
                nl, self._full, self._node, self._consts, self._code, self._feat, u
            )
        return out

    def sample(self, n: int, seed: int | None = 0) -> list[Tree]:
        """``n`` exact samples from the posterior ``p(tree | jet) = exp(log L(tree) − log Z)``.

        Args:
            n: number of trees.
            seed: seed of ``numpy.random.default_rng`` (reproducible; ``None`` for fresh entropy).

        Returns:
            List of :class:`Tree`.

        Example:
            >>> from jetastar.ginkgo import ShowerParams, generate
            >>> jet = generate(1, ShowerParams.qcd(), seed=2, min_leaves=6, max_leaves=6)[0]
            >>> trees = Trellis(jet).sample(100, seed=1)
            >>> len(trees), trees[0].n_leaves
            (100, 6)
        """
        children = self.sample_children(n, seed)
        nl = self.n_leaves
        leaf_of_node = np.full(2 * nl - 1, -1, dtype=np.int64)
        leaf_of_node[:nl] = np.arange(nl)
        return [Tree(ch, leaf_of_node, jet=self._label) for ch in children]

    # ------------------------------------------------------------------ marginals
    def marginals_array(self) -> np.ndarray:
        """Posterior probability of every cluster (index = bitmask), computed once, O(3**n).

        Entry ``s`` is the probability that cluster ``s`` is a node of a tree drawn from the
        posterior (1 for the whole jet and for single leaves; 0 for entry 0). All zeros when every
        tree is impossible.

        Raises:
            TooLargeError: the extra arrays would exceed the memory limit.
        """
        if self._marg is None:
            self._compute_marginals()
        assert self._marg is not None
        return _readonly(self._marg)

    def marginals(self, min_prob: float = 0.0) -> dict[frozenset[int], float]:
        """Posterior probability of each cluster of two or more leaves that has one above
        ``min_prob``.

        Args:
            min_prob: only clusters with probability strictly above this.

        Returns:
            ``{frozenset(leaf indices): probability}``; the whole jet maps to 1.

        Example:
            >>> from jetastar.ginkgo import ShowerParams, generate
            >>> jet = generate(1, ShowerParams.qcd(), seed=2, min_leaves=6, max_leaves=6)[0]
            >>> m = Trellis(jet).marginals()
            >>> round(m[frozenset(range(6))], 12)
            1.0
        """
        marg = self.marginals_array()
        masks = np.flatnonzero(marg > min_prob)
        out: dict[frozenset[int], float] = {}
        for s in masks.tolist():
            if s & (s - 1):
                out[frozenset(leaves_of(s))] = float(marg[s])
        return out

    def cluster_probabilities(self, tree: Any = None, *, min_prob: float = 0.0) -> Any:
        """The posterior as arrays: clusters of two or more leaves and their probabilities.

        Args:
            tree: a tree of this jet (a :class:`~jetastar.Tree`, a clustering result or nested
                pairs): its clusters, in its node order (``node``); ``None``: every cluster with a
                probability above ``min_prob``, most probable first (then larger, then lower
                mask).
            min_prob: only clusters with probability strictly above this (``tree=None``).

        Returns:
            An awkward array of records ``bitmask`` (int64, bit ``i`` = leaf ``i``),
            ``leaves`` (``var * int64``), ``size`` and ``probability`` (and ``node`` with a
            tree); ``ak.to_numpy(out.probability)`` is a plain array.

        Raises:
            InvalidTreeError: a tree over another number of leaves.

        Example:
            >>> from jetastar.ginkgo import ShowerParams, generate
            >>> jet = generate(1, ShowerParams.qcd(), seed=2, min_leaves=6, max_leaves=6)[0]
            >>> tr = Trellis(jet)
            >>> top = tr.cluster_probabilities()
            >>> top[0].leaves.tolist(), float(top[0].probability)
            ([0, 1, 2, 3, 4, 5], 1.0)
            >>> truth = tr.cluster_probabilities(jet.truth)  # the truth tree's 5 clusters
            >>> len(truth), float(truth.probability[0])  # (its root first: the whole jet)
            (5, 1.0)
        """
        import awkward as ak

        marg = self.marginals_array()
        size_of = subset_sizes(self.n_leaves)
        fields: dict[str, Any] = {}
        if tree is None:
            masks = np.flatnonzero(marg > float(min_prob)).astype(np.int64)
            masks = masks[(masks & (masks - 1)) != 0]  # two or more leaves
            sizes = size_of[masks].astype(np.int64)
            order = np.lexsort((masks, -sizes, -marg[masks]))
            masks = masks[order]
        else:
            tree = Tree.from_any(tree, jet=self._label)
            if tree.n_leaves != self.n_leaves:
                raise InvalidTreeError(
                    f"a tree over {tree.n_leaves} leaves given for a jet of {self.n_leaves}",
                    jet=self._label, field="tree")
            all_masks = tree.node_masks()
            nodes = np.flatnonzero(~tree.is_leaf())
            masks = all_masks[nodes]
            fields["node"] = nodes
        sizes = size_of[masks].astype(np.int64)
        bits = (masks[:, None] >> np.arange(self.n_leaves, dtype=np.int64)) & 1
        leaves = ak.unflatten(np.nonzero(bits)[1].astype(np.int64), sizes)
        fields.update({"bitmask": masks, "leaves": leaves, "size": sizes,
                       "probability": np.asarray(marg[masks], dtype=np.float64)})
        return ak.zip(fields, depth_limit=1)

    def map_clusters_with_marginals(self) -> list[tuple[frozenset[int], float]]:
        """The MAP tree's clusters (two or more leaves) with their posterior probabilities.

        Returns:
            ``[(frozenset(leaves), probability), ...]``, largest clusters first (ties by smallest
            leaf).
        """
        marg = self.marginals_array()
        clusters = sorted(self.map_tree().clusters(), key=lambda c: (-len(c), min(c)))
        return [(c, float(marg[mask_of(c)])) for c in clusters]

    def _compute_marginals(self) -> None:
        watch = Stopwatch()
        n = self.n_leaves
        rows = self.threads or nb.get_num_threads()
        _check_memory(
            n, self._who, self.max_memory, marginals=True,
            threads=0 if self.device == "gpu" else rows,
            cost_model=self.cost_model is not None,
        )
        m = 1 << n
        marg = np.zeros(m, dtype=np.float64)
        evaluated = 0
        if self.device == "gpu":
            if not self.all_inf():
                margs, evaluated = gpu_marginals(self._node[None], self._consts[None],
                                                 who=self._who)
                marg = margs[0]
            self._marg = marg
            self.stats["marginal_splits_evaluated"] = evaluated
            self.stats["time_marginals_s"] = watch.seconds()
            return
        if not self.all_inf():
            acc = np.zeros((rows, m), dtype=np.float64)
            marg[self._full] = 1.0
            order, offsets = self._order, self._offsets
            with Threads(self.threads):
                for size in range(n, 0, -1):
                    start, stop = int(offsets[size]), int(offsets[size + 1])
                    small = not parallel_worth_it((stop - start) * ((1 << (size - 1)) - 1))
                    if size < n:
                        gather = _k.marginals_gather_serial if small else _k.marginals_gather
                        gather(order, start, stop, marg, acc)
                    if size < 2:
                        continue
                    args = (
                        order, start, stop, self._full, self._node, marg, acc, self._consts,
                        self._code, self._feat,
                    )
                    if small:
                        evaluated += int(_k.push_row(0, 1, *args))
                    else:
                        evaluated += int(_k.marginals_push(*args))
            del acc
        self._marg = marg
        self.stats["marginal_splits_evaluated"] = evaluated
        self.stats["time_marginals_s"] = watch.seconds()

    # ------------------------------------------------------------------ result
    def result(self) -> ClusteringResult:
        """The MAP tree and the trellis' numbers as a :class:`ClusteringResult`.

        For a cost model: ``log_likelihood = -cost`` (so ``.cost`` is the minimum cost),
        ``likelihood`` is the cost's name (``"hcc"``, ``"dasgupta"``), ``log_z`` is the Gibbs
        ``log Σ exp(-cost)`` and ``n_trees = (2n - 3)!!``.
        """
        ll = self.map_log_likelihood()
        if self.cost_model is not None:
            return ClusteringResult(
                tree=self.map_tree(),
                log_likelihood=ll,
                algorithm="trellis",
                exact=True,
                likelihood=self.likelihood,
                options={"max_memory": self.max_memory, "threads": self.threads},
                stats=dict(self.stats),
                log_z=self.log_partition(),
                n_trees=self.n_trees(),
                upper_bound=ll,
                jet_id=None,
            )
        return _ginkgo_result(
            self.map_tree(), ll, self.likelihood,
            _options(self.likelihood, self.max_memory, self.threads, self.prune, self.device),
            dict(self.stats), self.log_partition(), self.n_trees(),
            None if self.jet is None else self.jet.jet_id,
        )

    def __repr__(self) -> str:
        if self.cost_model is not None:
            return (
                f"Trellis({self._who}, min cost={self.map_cost():.6g}, "
                f"log_z={self.log_partition():.6g})"
            )
        return (
            f"Trellis(jet={self._label}, n_leaves={self.n_leaves}, likelihood={self.likelihood!r}, "
            f"map={self.map_log_likelihood():.6g}, log_z={self.log_partition():.6g})"
        )


def exact_trellis(
    jet: Jet | CostModel,
    likelihood: str | None = None,
    max_memory: int | None = None,
    *,
    log_z: bool = True,
    prune: bool = True,
    threads: int | None = None,
    progress: bool | None = None,
    device: str | None = "auto",
    max_time: float | None = None,
) -> ClusteringResult:
    """Exact MAP hierarchy, log partition function and tree count of a jet (or a cost model).

    Args:
        jet: a :class:`jetastar.Jet`, or a cost model (:class:`jetastar.costs.HCCCost`,
            :class:`jetastar.costs.DasguptaCost`, at most ~25 points in practice).
        likelihood: ``"symmetric"`` (default) or ``"legacy"``; unset for a cost model.
        max_memory: memory limit in bytes (default: half the available memory).
        log_z: also compute ``log Z`` and the tree count (default). ``False`` asks for the MAP
            only, which :func:`jetastar.clustering.exact_map` finds much faster (same tree and
            value; ``log_z`` and ``n_trees`` are then ``None``; Ginkgo jets only).
        prune: skip clusters that cannot be split (results are identical either way; ignored
            for cost models).
        threads: numba threads (default: all).
        progress: tqdm progress bar (``True``); default: from 19 leaves on, once the jet has
            taken 10 s (loops over jets stay quiet).
        device: ``"cpu"``, ``"gpu"`` or ``"auto"`` (default: a GPU from
            :data:`~jetastar.clustering.exact.gpu.GPU_MIN_LEAVES` leaves on when one is usable); see
            :class:`Trellis`. ``stats["device"]`` says where it ran.
        max_time: run-time budget in seconds (``None``: none; compiling kernels does not count
            on the CPU), checked between slices of the dynamic programme on the CPU and between
            launches on the GPU. A run that passes it
            returns the greedy tree (a cost model: the better of greedy and average linkage)
            with ``status="budget"``, ``exact=False`` and ``log_z = n_trees = None``.

    Returns:
        :class:`ClusteringResult` with ``tree``, ``log_likelihood``, ``exact=True``, ``log_z``,
        ``n_trees`` (exact int up to 18 leaves, float above) and ``stats`` (``time_s``,
        ``splits_evaluated``, ``splits_skipped``, ``clusters_pruned``, ...). When every tree is
        impossible: ``status="all_inf"``, ``log_likelihood = log_z = -inf``, ``n_trees = 0``.
        For a cost model: ``cost`` = the minimum cost, ``likelihood`` = the cost's name,
        ``log_z = log Σ_trees exp(-cost)``, ``n_trees = (2n - 3)!!``, ``jet_id=None``.

    Raises:
        InvalidJetError: neither a Jet nor a cost model.
        TooLargeError: the trellis would not fit in ``max_memory``; use ``astar`` or
            ``astar_approx`` (cost models: ``astar_approx`` or ``greedy``).
        GpuUnavailableError: ``device="gpu"`` where no GPU can be used.

    Example:
        >>> from jetastar.ginkgo import ShowerParams, generate
        >>> jet = generate(1, ShowerParams.w(), seed=4, min_leaves=7, max_leaves=7)[0]
        >>> res = exact_trellis(jet, likelihood="legacy")
        >>> res.algorithm, res.status
        ('trellis', 'ok')
        >>> exact_trellis(jet, log_z=False).log_likelihood == exact_trellis(jet).log_likelihood
        True
    """
    log_z = as_flag(log_z, "log_z")
    if not log_z and isinstance(jet, Jet):
        return exact_map(jet, likelihood, max_memory=max_memory, threads=threads,
                         progress=progress, device=device, max_time=max_time)
    watch = Stopwatch()
    try:
        tr = Trellis(
            jet, likelihood, max_memory, prune=prune, threads=threads, progress=progress,
            device=device, max_time=max_time,
        )
    except TimeoutError as stop:
        options = {"likelihood": likelihood, "max_memory": max_memory, "threads": threads,
                   "prune": prune, "device": device, "max_time": max_time}
        return _stopped_trellis(jet, options, watch, str(stop))
    return tr.result()


def _stopped_trellis(
    target: Jet | CostModel, options: dict[str, Any], watch: Stopwatch, why: str
) -> ClusteringResult:
    """What :func:`exact_trellis` returns when ``max_time`` stopped its dynamic programme: the
    greedy tree (of a cost model the better of greedy and average linkage), not proven."""
    if isinstance(target, CostModel):
        base = max((greedy(target), average_linkage(target)), key=lambda r: r.log_likelihood)
        form, jet_id, which = target.name, None, "the better of greedy and average linkage"
    else:
        form = valid_likelihood(options["likelihood"])
        base = greedy(target, form)
        jet_id, which = target.jet_id, "the greedy tree"
    return ClusteringResult(
        base.tree, base.log_likelihood, "trellis", exact=False, likelihood=form,
        options={**options, "likelihood": form},
        stats={"time_s": watch.seconds()}, status="budget",
        message=f"{why}; log Z needs the whole trellis. The tree is {which}, not proven optimal",
        jet_id=jet_id,
    )


def exact_trellis_batch(
    jets: Iterable[Jet] | JetCollection,
    likelihood: str | None = None,
    *,
    device: str | None = "auto",
    max_memory: int | None = None,
    batch_memory: int = 2 * 2**30,
    progress: bool | None = None,
    max_time: float | None = None,
) -> list[ClusteringResult]:
    """:func:`exact_trellis` (MAP, log Z, tree count) of many jets, many per GPU launch.

    On a GPU, jets of equal size are solved together (one launch per cluster size for a whole
    batch), so thousands of small jets cost a few launches instead of thousands; each batch holds
    at most ``batch_memory`` bytes of tables. Only what the results need comes back from the GPU
    (each jet's MAP tree, read on the device, and its root record), not the tables. A
    :class:`~jetastar.JetCollection` is read as columns (no :class:`~jetastar.Jet` is made per
    jet). On the CPU the jets of 2 to 14 leaves of a collection (all valid, no memory limit
    below their tables) are solved on the columnar path, one kernel call per 4096 jets and one
    jet per thread (the same results as :func:`exact_trellis`, without its per-jet cost); other
    jets run :func:`exact_trellis` one by one.

    Args:
        jets: :class:`jetastar.Jet` objects or a :class:`~jetastar.JetCollection` (any sizes; at
            most 30 leaves on the GPU).
        likelihood: ``"symmetric"`` (default) or ``"legacy"``.
        device: ``"cpu"``, ``"gpu"`` or ``"auto"`` (default: a GPU when one is usable).
        max_memory: host memory limit per batch (default: half the available memory).
        batch_memory: bytes of tables per GPU batch (default 2 GiB).
        progress: a bar over jets (default: from 1000 jets on).
        max_time: run-time budget per jet in seconds (``None``: none). The ``B`` jets of one GPU
            batch share ``B * max_time``, checked between launches: a batch that passes it gives
            each of its jets :func:`exact_trellis`'s budget result (the greedy tree,
            ``status="budget"``). On the CPU each jet run one by one has its own budget; the
            columnar path (2 to 14 leaves, at most ~0.1 s a jet) is not stopped.

    Returns:
        One :class:`ClusteringResult` per jet, in order, as :func:`exact_trellis` gives it
        (``stats["device"]`` says where it ran; ``stats["batch_jets"]`` how many shared a batch).

    Raises:
        InvalidJetError: an element is not a Jet, or a jet of the collection is invalid.
        TooLargeError: a jet whose trellis does not fit.
        GpuUnavailableError: ``device="gpu"`` where no GPU can be used.

    Example:
        >>> from jetastar.ginkgo import ShowerParams, generate
        >>> jets = generate(3, ShowerParams.qcd(), seed=1, min_leaves=5, max_leaves=6)
        >>> [r.log_z == exact_trellis(j).log_z for r, j in zip(exact_trellis_batch(jets), jets)]
        [True, True, True]
    """
    likelihood = valid_likelihood(likelihood)
    max_time = check_budget(max_time, "max_time")
    columns = _batch_columns(jets, likelihood) if isinstance(jets, JetCollection) else None
    if columns is None:
        jets = list(jets)
        for i, jet in enumerate(jets):
            if not isinstance(jet, Jet):
                raise InvalidJetError(
                    f"exact_trellis_batch needs jetastar.Jet objects, got {type(jet).__name__}",
                    jet=i, field="jets",
                )
    n_total = len(jets)
    on_gpu = n_total > 0 and resolve_device(device, worth_it=True) == "gpu"
    show = n_total >= 1000 if progress is None else bool(progress)
    out: list[ClusteringResult | None] = [None] * n_total
    with progress_bar(total=n_total, desc="exact trellis", unit="jet", show=show) as bar:
        if not on_gpu:
            if columns is not None and _columnar_ok(likelihood, max_memory):
                _cpu_columnar(jets, likelihood, max_memory, out, bar)
            else:
                for i, jet in enumerate(jets):
                    out[i] = exact_trellis(jet, likelihood, max_memory, device="cpu",
                                           progress=False, max_time=max_time)
                    bar.update(1)
            return [r for r in out if r is not None]
        if columns is None:
            sizes = np.array([jet.n_leaves for jet in jets], dtype=np.int64)
        else:
            sizes = np.diff(columns[0])
        for n in np.unique(sizes).tolist():
            idx = np.flatnonzero(sizes == n).tolist()
            if n < 2:
                for i in idx:
                    out[i] = exact_trellis(jets[i], likelihood, max_memory, device="cpu",
                                           progress=False, max_time=max_time)
                bar.update(len(idx))
                continue
            per_jet = max(1, estimate_gpu_memory(n, 1))
            size = max(1, min(len(idx), int(batch_memory) // per_jet))
            for lo in range(0, len(idx), size):
                part = idx[lo:lo + size]
                if columns is None:
                    leaves = [jets[i].leaves for i in part]
                    consts = np.stack([jets[i].likelihood_constants(likelihood) for i in part])
                    ids = [jets[i].jet_id for i in part]
                else:
                    offsets, flat, which, rows, jet_ids = columns
                    leaves = [flat[offsets[i]:offsets[i + 1]] for i in part]
                    consts = rows[which[part]]
                    ids = [int(jet_ids[i]) for i in part]
                who = f"jet {'<unnamed>' if ids[0] is None else ids[0]}"
                watch = Stopwatch()
                sol = solve_on_gpu(leaves, consts, log_z=True, who=who, max_memory=max_memory,
                                   tables=False,
                                   max_time=None if max_time is None else max_time * len(part))
                if sol.finished:
                    for b, r in enumerate(_gpu_results(sol, likelihood, max_memory, ids)):
                        out[part[b]] = r
                else:
                    why = (f"{who}: the GPU batch of {len(part)} jets of {n} leaves stopped by "
                           f"max_time={max_time:g} s a jet after {watch.seconds():.3g} s")
                    options = {**_options(likelihood, max_memory, None, True, "gpu"),
                               "max_time": max_time}
                    for i in part:
                        out[i] = _stopped_trellis(jets[i], options, watch, why)
                bar.update(len(part))
    return [r for r in out if r is not None]


def _columnar_ok(likelihood: str, max_memory: int | None) -> bool:
    """Whether the columnar path takes the full trellis with these options."""
    return TRELLIS.chunk_options({"likelihood": likelihood, "log_z": True,
                                  "max_memory": max_memory}) is not None


def _cpu_columnar(collection: JetCollection, likelihood: str, max_memory: int | None,
                  out: list[ClusteringResult | None], bar: Any) -> None:
    """:func:`exact_trellis_batch` on the CPU for a collection of valid jets: the jets of
    2 to 14 leaves on the columnar path (one kernel call per :data:`_CPU_BATCH` jets, one jet
    per thread, the per-jet results bit for bit), the others one by one."""
    options = {"likelihood": likelihood, "log_z": True, "max_memory": max_memory}
    for lo in range(0, len(collection), _CPU_BATCH):
        hi = min(lo + _CPU_BATCH, len(collection))
        flat = cluster_columns(collection[lo:hi], {"trellis": options})["trellis"]
        for i in range(hi - lo):
            if flat.outcome[i] == DONE:
                out[lo + i] = flat.result(i)
            else:  # one leaf, or over the columnar path's size
                out[lo + i] = exact_trellis(collection[lo + i], likelihood, max_memory,
                                            device="cpu", progress=False)
        bar.update(hi - lo)


def _batch_columns(
    collection: JetCollection, likelihood: str,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """``(leaf offsets, leaves, constants row per jet, constants rows, jet ids)`` of a
    collection whose jets are all valid (checked over the columns); ``None`` otherwise (the jets
    are then made one by one, which raises the error naming the first invalid one)."""
    offsets = np.asarray(collection.leaf_offsets, dtype=np.int64)
    flat = np.ascontiguousarray(collection.leaves, dtype=np.float64)
    valid = params_valid(collection)
    if not valid.all() or first_leaf_problem(flat, offsets) is not None:
        return None
    which, rows = constant_rows(collection, valid, [likelihood])
    return offsets, flat, which[0], rows, np.asarray(collection.jet_id)


def _gpu_results(sol: Any, likelihood: str, max_memory: int | None,
                 ids: list[int | None]) -> list[ClusteringResult]:
    """The results of a batch solved with ``solve_on_gpu(..., tables=False)``: what
    :meth:`Trellis.result` gives for each jet, made from the root records and the MAP trees
    read on the GPU."""
    n = int(sol.stats["n_leaves"])
    stats = dict(sol.stats, batch_jets=len(ids))
    stats["time_s"] = sol.stats["time_s"] / len(ids)
    stats["memory_bytes"] = sol.stats["memory_bytes"] // len(ids)
    root = sol.root
    counts = root.view(np.int64)[:, _k.COUNT] if sol.exact_count else root[:, _k.COUNT]
    leaf_of_node = np.full(2 * n - 1, -1, dtype=np.int64)
    leaf_of_node[:n] = np.arange(n)
    leaf_of_node.setflags(write=False)
    return [
        _ginkgo_result(
            Tree._trusted(sol.children[b], leaf_of_node, n), float(root[b, _k.MAP]), likelihood,
            _options(likelihood, max_memory, None, True, "gpu"),
            dict(stats, clusters_impossible=int(sol.impossible[b])), float(root[b, _k.LOG_Z]),
            int(counts[b]) if sol.exact_count else float(counts[b]), jet_id,
        )
        for b, jet_id in enumerate(ids)
    ]


def _options(likelihood: str, max_memory: int | None, threads: int | None, prune: bool,
             device: str) -> dict[str, Any]:
    """The options of a Ginkgo trellis result (one jet or a batch)."""
    return {"likelihood": likelihood, "max_memory": max_memory, "threads": threads,
            "prune": prune, "device": device}


def _ginkgo_result(tree: Tree, ll: float, likelihood: str, options: dict[str, Any],
                   stats: dict[str, Any], log_z: float, n_trees: int | float,
                   jet_id: int | None) -> ClusteringResult:
    """A Ginkgo trellis result: :meth:`Trellis.result` and the GPU batch's (``status="all_inf"``
    with :data:`~jetastar.clustering.exact.exact_map.ALL_INF_MESSAGE` when every tree is impossible)."""
    inf = ll == -math.inf
    return ClusteringResult(
        tree=tree, log_likelihood=ll, algorithm="trellis", exact=True, likelihood=likelihood,
        options=options, stats=stats, log_z=log_z, n_trees=n_trees, upper_bound=ll,
        status="all_inf" if inf else "ok", message=ALL_INF_MESSAGE if inf else "", jet_id=jet_id,
    )


def _trellis_method(
    jet: Jet | CostModel,
    likelihood: str | None = None,
    *,
    log_z: bool = False,
    max_time: float | None = None,
    max_memory: int | None = None,
    threads: int | None = None,
    progress: bool | None = None,
    device: str = "auto",
) -> ClusteringResult:
    """The registry's exact method: :func:`~jetastar.clustering.exact_map` (MAP only, budgets),
    or with ``log_z=True`` (and always in the density form, which has no bounds for the MAP
    engine) the full :func:`exact_trellis` (log Z and tree count).
    ``device`` (``"cpu"``, ``"gpu"``, ``"auto"``) says where it runs.
    """
    if as_flag(log_z, "log_z") or not isinstance(jet, Jet) or likelihood == "density":
        # (the density form has no bounds for the exact MAP engine: the full trellis)
        return exact_trellis(jet, likelihood, max_memory, log_z=True, threads=threads,
                             progress=progress, device=device, max_time=max_time)
    return exact_map(jet, likelihood, max_time=max_time, max_memory=max_memory, threads=threads,
                     progress=progress, device=device)


# ---------------------------------------------------------------------- the registry's "trellis"
#: the options of the registry's ``"trellis"`` that the columnar path takes
_CHUNK_OPTIONS = {"likelihood", "log_z", "max_time", "max_memory", "threads", "progress",
                  "device", "prune", "incumbent"}
#: jets per call of the columnar path in this process with the full trellis (``log_z``), up to
#: ~0.1 s a jet at 14 leaves: enough jets for numba's threads to share, few enough that the
#: progress bar moves every few seconds
LOG_Z_IN_PROCESS_CHUNK = 256


class _TrellisChunks(ChunkPath):
    """The registry's ``"trellis"`` on the columnar path: the exact MAP engine
    (:func:`~.exact_map.map_chunk_rows`) or, with ``log_z``, the full trellis
    (:func:`~._trellis_kernels.trellis_chunk`: MAP, log Z and tree count) on every jet of up to
    :data:`~._map_kernels.EXACT_CHUNK_MAX` (14) leaves, one jet per thread; larger jets are left
    to the per-jet functions."""

    def options(self, options: Mapping[str, Any]) -> dict[str, Any] | None:
        """The options the registry's ``"trellis"`` records, as it would check them, on the
        columnar path: those of :func:`~jetastar.clustering.exact_map`, or with ``log_z`` those
        of :func:`exact_trellis` plus ``"log_z": True`` (which says which engine runs; the rows'
        results record the per-jet function's options without it).

        The columnar path solves jets of up to 14 leaves in a few ms each (the full trellis in
        at most ~0.1 s), so a ``max_time`` is recorded but does not stop the MAP engine (the
        per-jet engine also always runs its first slice of work); the full trellis has no time
        budget.

        Args:
            options: the registry options (``likelihood``, ``log_z``, ``max_time``,
                ``max_memory``, ``threads``, ``progress``, ``device``; or what this returned).

        Returns:
            The options dict of the engine's results, or ``None`` for a GPU, a memory limit
            below the tables of the largest jet the path takes, or a value the engine would
            refuse.
        """
        if set(options) - _CHUNK_OPTIONS:
            return None
        likelihood = options.get("likelihood") or "symmetric"
        if likelihood not in LIKELIHOODS:
            return None
        try:
            # (the density form: the full trellis, as the per-jet function runs it)
            log_z = as_flag(options.get("log_z", False), "log_z") or likelihood == "density"
            if not as_flag(options.get("prune", True), "prune") or options.get(
                    "incumbent", False) is not False:
                return None  # (prune and incumbent: what this function returns, read back)
            device = options.get("device", "auto")
            if check_device(device) == "gpu":
                return None
            max_time = check_budget(options.get("max_time"), "max_time")
            max_memory = check_budget(options.get("max_memory"), "max_memory", integer=True)
            threads = check_threads(options.get("threads"))
        except (OptionError, ValueError, TypeError):
            return None
        need = estimate_memory(EXACT_CHUNK_MAX) if log_z else estimate_map_memory(
            EXACT_CHUNK_MAX)
        if max_memory is not None and max_memory < need:
            return None
        if log_z:
            return {"likelihood": likelihood, "max_memory": max_memory, "threads": threads,
                    "prune": True, "device": "cpu", "log_z": True}
        return {"likelihood": likelihood, "max_time": max_time, "max_memory": max_memory,
                "prune": True, "threads": threads, "incumbent": False, "device": "cpu"}

    def run(self, opts: dict[str, Any], chunk: Chunk) -> ChunkResults:
        if not opts.get("log_z"):
            return map_chunk_rows(opts, chunk)
        n = len(chunk)
        children, ll, log_z, n_trees, outcome, cnt = _k.trellis_chunk(
            chunk.leaves, chunk.loff, chunk.noff, chunk.which, chunk.consts, chunk.run,
            chunk.threads)
        done, node_offsets, ch, leaf, status, message, counters = exact_rows(
            opts, outcome, ll, chunk, children, estimate_memory, {
                "clusters_pruned": cnt[:, 2], "clusters_impossible": cnt[:, 3],
                "splits_evaluated": cnt[:, 0], "splits_skipped": cnt[:, 1],
                "exact_count": np.ones(n)})
        options = {k: v for k, v in opts.items() if k != "log_z"}
        return ChunkResults(
            algorithm="trellis", likelihood=opts["likelihood"], options=options,
            collection=chunk.collection, outcome=outcome,
            log_likelihood=np.where(done, ll, np.nan), status=status, message=message,
            node_offsets=node_offsets, children=ch, leaf_of_node=leaf, counters=counters,
            work=np.where(done, cnt[:, 0] + cnt[:, 1] + chunk.counts, 0).astype(np.float64),
            exact=done.copy(), upper_bound=np.where(done, ll, np.nan),
            log_z=np.where(done, log_z, np.nan), n_trees=np.where(done, n_trees, 0),
            stats={"device": "cpu"},
            rerun_options={**rerun_options(opts["likelihood"], options,
                                           ("max_memory", "threads")), "log_z": True},
            flags=("exact_count",),
        )

    def kernel(self, opts: Mapping[str, Any]) -> str:
        return "columnar-trellis" if opts.get("log_z") else "columnar-map"

    def in_process_chunk_size(self, opts: Mapping[str, Any]) -> int:
        return LOG_Z_IN_PROCESS_CHUNK if opts.get("log_z") else self.in_process_size


class _GpuBatch:
    """The registry's ``"trellis"`` with ``log_z`` on a GPU, many jets per launch
    (:func:`exact_trellis_batch`): how a batch run clusters a whole chunk on the device."""

    def takes(self, options: Mapping[str, Any]) -> bool:
        """Whether it runs with ``options``: ``log_z`` and a ``device`` that resolves to a GPU
        (a bad option or no GPU: ``False``, and the per-jet runs report it)."""
        try:
            return as_flag(options.get("log_z", False), "log_z") and \
                resolve_device(options.get("device", "auto")) == "gpu"
        except (ValueError, GpuUnavailableError):
            return False

    def run(self, collection: JetCollection, options: Mapping[str, Any]) -> list[ClusteringResult]:
        """One result per jet of ``collection`` (all valid).

        Raises:
            TooLargeError, InvalidJetError: jets the batch cannot take (the caller then runs
                them one by one).
        """
        return exact_trellis_batch(collection, options.get("likelihood"), device="gpu",
                                   max_memory=options.get("max_memory"), progress=False,
                                   max_time=options.get("max_time"))


def _expected_cpu(n_leaves: int, options: Mapping[str, Any]) -> float:
    """The typical CPU seconds of a jet: the exact MAP engine's
    (:func:`~.exact_map.expected_map_cpu_seconds`), 20 times that with ``log_z`` (the full
    trellis, log Z too, costs 13-35 times the bound-pruned MAP)."""
    log_z = options.get("log_z")
    factor = 20.0 if log_z is not None and as_flag(log_z, "log_z") else 1.0
    return factor * expected_map_cpu_seconds(n_leaves)


#: the exact MAP method in the registry (the exact MAP engine, or the full trellis with log_z)
TRELLIS = register(AlgorithmInfo(
    "trellis", _trellis_method, exact=True, max_leaves=24,
    description="exact MAP tree (bound-pruned trellis; log Z and tree count with log_z=true)",
    aliases=("exact_map", "exact-map", "exact_trellis"),
    declared=(
        likelihood_option(None),
        flag("log_z", False, "the full trellis: log Z and the tree count too (slower)"),
        number("max_time", None, "run-time budget in seconds (None: none); stopped early, the "
               "result has a proven upper bound", low=0.0, low_open=True, none=True),
        integer("max_memory", None, "memory limit in bytes (None: half the available memory)",
                low=1, none=True),
        integer("threads", None, "numba threads (None: every core)", low=1, none=True),
        flag("progress", None, "a progress bar: true, false, or None (after 10 s)", none=True),
        choice("device", "auto", "where it runs", DEVICES),
    ),
    family="exact", chunk=_TrellisChunks(), expected_cpu=_expected_cpu,
    device_batch=_GpuBatch(), main_job="map",
    # (compile CPU seconds measured 2026-12-07 on a 2-core machine, cold cache; one task with the
    # window search, which runs the same exact MAP engine: two workers compiled it at once
    # before, 2026-12-07; after beam search and greedy, whose kernels the window search runs:
    # before them, the other worker compiled beam search while this task compiled it too)
    warm_up=WarmUp(compile_s=8.0, order=0.25, group="exact-map"),
))


# ---------------------------------------------------------------------- helpers
def _readonly(a: np.ndarray) -> np.ndarray:
    v = a.view()
    v.setflags(write=False)
    return v


def _check_count(n: Any, name: str) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {n!r}")
    return int(n)


#: splits per kernel call of the CPU trellis (at most; a cluster size of fewer splits is one call):
#: ~0.2 s of one thread at the ~45 ns per scored split, so that Ctrl-C (seen between calls) stops
#: it within a second (one call per cluster size took seconds from ~18 leaves on)
_CALL_SPLITS = 4_000_000


def _chunks(offsets: np.ndarray, size: int, n: int, fine: bool) -> list[tuple[int, int]]:
    """The slice of one size, in calls of at most :data:`_CALL_SPLITS` splits, and in ~1 % pieces
    of the total work when a progress bar shows."""
    start, stop = int(offsets[size]), int(offsets[size + 1])
    per = (1 << (size - 1)) - 1
    budget = _CALL_SPLITS
    if fine:
        budget = min(budget, n_splits_total(n) // 100)
    step = max(1, budget // per)
    return [(a, min(stop, a + step)) for a in range(start, stop, step)]
