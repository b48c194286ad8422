"""The columnar path: whole chunks of jets clustered and scored by one kernel call each.

Jets held as flat columns (a :class:`~jetastar.JetCollection`: leaves with offsets, per-jet
parameters) go to one numba call per chunk (:mod:`._chunk_kernels`: jets in parallel, each jet
serially) that checks every jet's leaves with the one leaf validator, clusters every jet with each
requested algorithm of :data:`COLUMNAR_ALGORITHMS` and scores the trees with the Ginkgo likelihood
(the kernels of the per-jet functions: results are those of :func:`~jetastar.clustering.greedy`
and :func:`~jetastar.clustering.kt`, trees and values bit for bit). The exact MAP engine
(the registry's ``"trellis"`` without ``log_z``) runs on every jet of up to 14 leaves the same way,
one jet per thread, with the kernels of :func:`~jetastar.clustering.exact_map` (larger jets are
left to it), and with ``log_z`` the full trellis, with the kernel of
:func:`~jetastar.clustering.exact_trellis` (log Z and the tree count too); beam search too, on
every jet of up to 40 leaves (:data:`BEAM_CHUNK_MAX`), with the kernels of
:func:`~jetastar.clustering.beam_search`, and MCTS with its default deterministic rollouts, with
the kernel of :func:`~jetastar.clustering.mcts`. The window search's jets of up to 14 leaves that
it proves with the exact MAP engine before any search go to that engine's kernel (its larger jets
are searched by :func:`~jetastar.clustering.window_search`). The answer is flat arrays, a
:class:`ChunkResults` per algorithm; :class:`~jetastar.Tree` and
:class:`~jetastar.clustering.ClusteringResult` objects are made only when one jet's is asked for.
Batch runs, :func:`jetastar.inmemory.cluster_jets` and ``jetastar.cluster(many_jets, ...)`` use it
for these algorithms.

:func:`score_columns` scores one given tree per jet (flat trees, the truth trees by default) the
way :func:`jetastar.ginkgo.log_likelihood` does, in one call per chunk.

Example:
    >>> from jetastar.ginkgo import ShowerParams, generate
    >>> jets = generate(100, ShowerParams.qcd(), seed=1)
    >>> flat = cluster_columns(jets, {"greedy": {}, "cambridge": {}})
    >>> flat["greedy"].status[:3].tolist(), flat["cambridge"].result(0).algorithm
    (['ok', 'ok', 'ok'], 'cambridge')
    >>> from jetastar.ginkgo import log_likelihood
    >>> ll, status = score_columns(jets)  # the truth trees
    >>> status[0], bool(ll[0] == log_likelihood(jets[0]))
    ('ok', True)
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Mapping
from typing import Any

import numba as nb
import numpy as np

from .._cuda import check_device
from .._jit import Stopwatch
from .._text import shared_text, text_column
from ..errors import OptionError
from ..ginkgo.likelihood import LIKELIHOODS, likelihood_constants
from ..jet import JetCollection
from ..tree import Tree
from ._chunk_kernels import (
    ALG_ANTIKT,
    ALG_CAMBRIDGE,
    ALG_GREEDY,
    ALG_KT,
    BEAM_CHUNK_MAX,
    DONE,
    EXACT_CHUNK_MAX,
    INVALID,
    NOT_RUN,
    PER_JET,
    beam_chunk,
    cluster_chunk,
    map_chunk,
    mcts_chunk,
    score_chunk,
    trellis_chunk,
)
from ._engine import check_budget, default_memory_limit, estimate_trellis_memory
from ._map_kernels import binomials
from ._subsets import n_splits_total
from .beam import (
    CACHE_BUDGET_BYTES,
    FIRST_BUDGET_SLICE_WORK,
    beam_memory,
    default_beam_size,
    n_trees_capped,
)
from .exact_map import ALL_INF_MESSAGE, estimate_map_memory, root_slack
from .greedy import greedy_status
from .kt import minus_inf_message
from .mcts import ALL_INF_MESSAGE as MCTS_ALL_INF_MESSAGE
from .mcts import FIRST_BUDGET_SLICE_WORK as FIRST_MCTS_BUDGET_WORK
from .mcts import mcts_settings
from .options import as_flag
from .registry import cluster
from .result import ClusteringResult
from .threads import check_threads
from .window_search import window_options, window_proves_first

__all__ = [
    "BEAM_CHUNK_MAX",
    "COLUMNAR_ALGORITHMS",
    "DONE",
    "INVALID",
    "NOT_RUN",
    "OWN_CHUNK_KERNELS",
    "OWN_PARALLEL_FROM",
    "PARALLEL_FROM",
    "PER_JET",
    "ChunkResults",
    "cluster_columns",
    "columnar_options",
    "constant_rows",
    "params_valid",
    "score_columns",
]

#: code of the exact MAP engine (its own chunk kernel, :func:`._chunk_kernels.map_chunk`)
ALG_EXACT_MAP = 4
#: code of beam search (its own chunk kernel, :func:`._chunk_kernels.beam_chunk`)
ALG_BEAM = 5
#: code of MCTS (its own chunk kernel, :func:`._chunk_kernels.mcts_chunk`)
ALG_MCTS = 6
#: code of the window search: on jets where it proves the MAP with the exact MAP engine before
#: any search (up to 14 leaves here), that engine's chunk kernel; larger jets go per jet
ALG_WINDOW = 7

#: the algorithms the columnar path runs (registry names -> kernel codes); ``"trellis"`` is the
#: exact MAP engine (with ``log_z``: the full trellis) on jets of up to ``EXACT_CHUNK_MAX`` (14)
#: leaves, ``"beam"`` beam search on jets of up to ``BEAM_CHUNK_MAX`` (40) leaves, ``"mcts"``
#: MCTS with deterministic rollouts on jets of up to :data:`MCTS_CHUNK_WORK` estimated work,
#: ``"window-search"`` the exact MAP engine on the jets of up to 14 leaves that the window search
#: proves with it instead of searching (its ``exact_map`` path)
COLUMNAR_ALGORITHMS = {
    "greedy": ALG_GREEDY, "kt": ALG_KT, "cambridge": ALG_CAMBRIDGE, "antikt": ALG_ANTIKT,
    "trellis": ALG_EXACT_MAP, "beam": ALG_BEAM, "mcts": ALG_MCTS, "window-search": ALG_WINDOW,
}

#: the options of beam search (all of them: the columnar path takes every value the per-jet
#: function accepts)
_BEAM_OPTIONS = {"likelihood", "beam_size", "greedy_guard", "max_time"}
#: a jet whose beam needs more memory than this (a large ``beam_size``) goes to the per-jet
#: function (the chunk kernel's threads hold one beam each)
BEAM_CHUNK_MEMORY = 64 * 2**20
#: a jet whose search is estimated at more work units than this (``width · n³ / 6``, ~40 ns
#: each: about 0.5 s; the default beam at 40 leaves is 8.3 million) goes to the per-jet
#: function, which sees Ctrl-C every 0.1 s
BEAM_CHUNK_WORK = 12_500_000
#: the algorithms of the path with chunk kernels of their own (the others share ``cluster_chunk``)
OWN_CHUNK_KERNELS = ("trellis", "beam", "mcts", "window-search")
#: the options of MCTS (all of them; ``rollout="sample"`` and a Generator as ``seed`` go to the
#: per-jet function, whose random draws are one generator's per jet)
_MCTS_OPTIONS = {"likelihood", "n_rollouts", "seed", "n_mc_target", "n_mc_min", "beam_size",
                 "c_puct", "planning", "decision", "prior", "rollout", "reward_range", "max_time"}
#: a jet whose search is estimated at more work units than this (:func:`mcts_work`; ~20-50 ns
#: each: ~0.5-1 s, 66 leaves with the defaults) goes to the per-jet function, which sees Ctrl-C
#: every 0.1 s
MCTS_CHUNK_WORK = 25_000_000
#: the fixed cost of a jet in :func:`._chunk_kernels.mcts_chunk`, in work units (measured ~200 µs
#: per QCD jet of ~7 leaves with the defaults, ~50 ns per unit there)
MCTS_JET_WORK = 3000
#: the counters that the per-jet functions give as bools (beam search's; the trellis' ``exact_count``)
_BOOL_COUNTERS = ("pair_cache", "greedy_added", "exact_count", "proved", "window_optimal",
                  "widened")
#: the options of the window search that the columnar path takes (``trees``, per-jet start
#: trees, is not one of them)
_WINDOW_OPTIONS = {"likelihood", "window_size", "n_random", "n_starts", "n_sampled",
                   "skip_duplicates", "widen", "widen_unsure", "top_size", "root_size", "start",
                   "beam_size", "seed", "max_time", "max_sweeps", "prove", "exact_first",
                   "progress", "device"}
#: the window search's options whose default depends on the jet's size
#: (:func:`~jetastar.clustering.window_search.window_options`)
_WINDOW_SIZED = ("n_random", "n_sampled", "skip_duplicates", "widen", "top_size", "root_size")
#: a ``max_time`` below this goes per jet: the per-jet function may find it spent before its
#: exact MAP starts
_WINDOW_MIN_TIME = 0.01

#: the options of the registry's ``"trellis"`` that the columnar path takes
_TRELLIS_OPTIONS = {"likelihood", "log_z", "max_time", "max_memory", "threads", "progress", "device",
                    "prune", "incumbent"}

#: chunks of fewer jets run on one thread (a parallel launch costs more than their work)
PARALLEL_FROM = 256
#: the same for the algorithms with chunk kernels of their own (the exact engines, beam search,
#: MCTS: 0.1-0.3 ms a jet of 7 leaves, up to ~0.1 s at 14), whose first chunks of a batch run are
#: 200 jets (``batch.config.COSTLY_COLUMNAR_CHUNK_SIZE``)
OWN_PARALLEL_FROM = 16


def columnar_options(name: str, options: Mapping[str, Any]) -> dict[str, Any] | None:
    """What the columnar path runs ``name`` with (``likelihood``, and ``R`` for the kt family), or
    ``None`` when it does not run ``name`` with these options (another algorithm, an option it
    does not take, a bad value): those go through the per-jet path, which reports bad values.

    Example:
        >>> columnar_options("kt", {"R": 1000}), columnar_options("astar-approx", {})
        ({'likelihood': 'symmetric', 'R': 1000.0}, None)
    """
    if name not in COLUMNAR_ALGORITHMS:
        return None
    if name == "trellis":
        return _trellis_options(options)
    if name == "beam":
        return _beam_options(options)
    if name == "mcts":
        return _mcts_options(options)
    if name == "window-search":
        return _window_options(options)
    allowed = {"likelihood"} if name == "greedy" else {"likelihood", "R"}
    if set(options) - allowed:
        return None
    likelihood = options.get("likelihood", "symmetric")
    if likelihood not in LIKELIHOODS:
        return None
    out: dict[str, Any] = {"likelihood": likelihood}
    if name != "greedy":
        try:
            radius = float(options.get("R", 1000.0))
        except (TypeError, ValueError):
            return None
        if not (math.isfinite(radius) and radius > 0.0):
            return None
        out["R"] = radius
    return out


def _trellis_options(options: Mapping[str, Any]) -> dict[str, Any] | None:
    """The options the registry's ``"trellis"`` records, as it would check them, on the columnar
    path: those of :func:`~jetastar.clustering.exact_map`, or with ``log_z`` those of
    :func:`~jetastar.clustering.exact_trellis` plus ``"log_z": True`` (which says which engine
    runs; the rows' results record the per-jet function's options without it).

    The columnar path solves jets of up to 14 leaves in a few ms each (the full trellis in at
    most ~0.1 s), so a ``max_time`` is recorded but does not stop the MAP engine (the per-jet
    engine also always runs its first slice of work); the full trellis has no time budget.

    Args:
        options: the registry options (``likelihood``, ``log_z``, ``max_time``, ``max_memory``,
            ``threads``, ``progress``, ``device``; or what this function returned).

    Returns:
        The options dict of the engine's results, or ``None`` for a GPU, a memory limit below
        the tables of the largest jet the path takes, or a value the engine would refuse.
    """
    if set(options) - _TRELLIS_OPTIONS:
        return None
    likelihood = options.get("likelihood") or "symmetric"
    if likelihood not in LIKELIHOODS:
        return None
    try:
        log_z = as_flag(options.get("log_z", False), "log_z")
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
    need = estimate_trellis_memory(EXACT_CHUNK_MAX) if log_z else estimate_map_memory(
        EXACT_CHUNK_MAX)
    if max_memory is not None and max_memory < need:
        return None
    if log_z:
        return {"likelihood": likelihood, "max_memory": max_memory, "threads": threads,
                "prune": True, "device": "cpu", "log_z": True}
    return {"likelihood": likelihood, "max_time": max_time, "max_memory": max_memory,
            "prune": True, "threads": threads, "incumbent": False, "device": "cpu"}


def _window_options(options: Mapping[str, Any]) -> dict[str, Any] | None:
    """The window search's options as given (``likelihood`` and the others it was asked for;
    ``progress`` dropped: the exact MAP path shows none), or ``None`` where the columnar path
    would not give the per-jet function's rows: start ``trees``, ``exact_first=False``, a GPU
    ``device``, a ``max_time`` below :data:`_WINDOW_MIN_TIME`, a value it would refuse.

    Example:
        >>> _window_options({"window_size": 12}), _window_options({"exact_first": False})
        ({'likelihood': 'symmetric', 'window_size': 12}, None)
    """
    if set(options) - _WINDOW_OPTIONS:
        return None
    likelihood = options.get("likelihood") or "symmetric"
    if likelihood not in LIKELIHOODS:
        return None
    asked = {k: v for k, v in options.items() if k not in ("likelihood", "progress")}
    try:
        for n in (2, EXACT_CHUNK_MAX, 24, 40):  # every size's defaults, checked
            resolved = window_options(n, **asked)
        if check_device(resolved["device"]) == "gpu" or resolved["exact_first"] is False:
            return None
        progress = options.get("progress")
        if not (progress is None or isinstance(progress, (bool, np.bool_))):
            return None
    except (OptionError, ValueError, TypeError):
        return None
    if resolved["max_time"] is not None and resolved["max_time"] < _WINDOW_MIN_TIME:
        return None
    return {"likelihood": likelihood, **asked}


def _beam_options(options: Mapping[str, Any]) -> dict[str, Any] | None:
    """The options :func:`~jetastar.clustering.beam_search` runs with, as it checks them:
    ``likelihood``, ``beam_size`` (``None``: the default of each jet's size), ``greedy_guard``
    (a bool) and ``max_time`` (a float or ``None``); ``None`` for a value it would refuse.

    With a ``max_time`` the chunk kernel stops each search after the work of the per-jet
    function's first slice (which that function always runs before it looks at the time): a jet
    finished within it has the result the per-jet function would give, the others are left to
    that function (:data:`PER_JET`), which goes on in slices until ``max_time``.
    """
    if set(options) - _BEAM_OPTIONS:
        return None
    likelihood = options.get("likelihood", "symmetric")
    if likelihood not in LIKELIHOODS:
        return None
    size = options.get("beam_size")
    if size is not None and (isinstance(size, bool) or not isinstance(size, numbers.Integral)
                             or size < 1):
        return None
    try:
        guard = bool(options.get("greedy_guard", True))
        max_time = check_budget(options.get("max_time"), "max_time")
    except (OptionError, ValueError, TypeError):
        return None
    return {"likelihood": likelihood, "beam_size": None if size is None else int(size),
            "greedy_guard": guard, "max_time": max_time}


def _mcts_options(options: Mapping[str, Any]) -> dict[str, Any] | None:
    """The options :func:`~jetastar.clustering.mcts` records (:func:`~.mcts.mcts_settings`), with
    ``likelihood`` and ``max_time``; ``None`` for a value it would refuse, for sampled rollouts
    (``rollout="sample"``: each jet's draws come from its own generator, on the per-jet path) and
    for a :class:`numpy.random.Generator` as ``seed``.

    With a ``max_time`` the chunk kernel stops each search after the work of the per-jet
    function's first slice, as for beam search (:func:`_beam_options`).
    """
    if set(options) - _MCTS_OPTIONS:
        return None
    likelihood = options.get("likelihood", "symmetric")
    if likelihood not in LIKELIHOODS:
        return None
    seed = options.get("seed", 0)
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, numbers.Integral)):
        return None
    rest = {k: v for k, v in options.items() if k not in ("likelihood", "max_time")}
    try:
        recorded, settings = mcts_settings(**rest)
        max_time = check_budget(options.get("max_time"), "max_time")
    except (OptionError, ValueError, TypeError):
        return None
    if settings[8]:  # sampled rollouts
        return None
    return {"likelihood": likelihood, **recorded, "max_time": max_time}


def mcts_work(n_leaves: np.ndarray, opts: Mapping[str, Any]) -> np.ndarray:
    """Estimated work of MCTS on jets of ``n_leaves`` leaves with the options ``opts`` (of
    :func:`_mcts_options`), in units of ~20-50 ns: ``n⁴ · (R + 1.5 B + 0.065 B²) / 22`` plus
    :data:`MCTS_JET_WORK`, with ``R = n_rollouts`` and ``B = beam_size``.

    Fitted to the CPU time of QCD jets of ~20 leaves with the defaults, 100 or 200 rollouts and beams
    of 20 and 50 (the beam's candidates cost more than the trajectories' merges); ~1.3 n⁴ with the
    defaults, where the kernel counts ~1.1 n⁴ merges looked at.
    """
    n = np.asarray(n_leaves, dtype=np.float64)
    r, b = float(opts["n_rollouts"]), float(opts["beam_size"])
    return n**4 * (r + 1.5 * b + 0.065 * b * b) / 22.0 + MCTS_JET_WORK


def params_valid(collection: JetCollection) -> np.ndarray:
    """Which jets have parameters :class:`~jetastar.ginkgo.ShowerParams` accepts (the checks of
    its constructor, over the columns at once): ``(J,)`` bool."""
    prm = collection.params
    ok = np.ones(len(collection), dtype=bool)
    with np.errstate(all="ignore"):
        for name in ("m_hard", "lam", "lam_root", "t_cut", "t_root"):
            v = prm[name]
            ok &= np.isfinite(v) & (v > 0.0)
        ok &= prm["t_cut"] < prm["t_root"]
        root = prm["root_momentum"]
        ok &= np.all(np.isfinite(root), axis=1)
        e, px, py, pz = root[:, 0], root[:, 1], root[:, 2], root[:, 3]
        ok &= (e > 0.0) & (e * e - (px * px + py * py + pz * pz) > 0.0)
    return ok


def constant_rows(collection: JetCollection, valid: np.ndarray,
                  forms: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Likelihood constants of many jets, made once per distinct parameter set.

    Args:
        collection: the jets.
        valid: ``(J,)`` bool, the jets to make constants for (their parameters must be valid).
        forms: likelihood forms.

    Returns:
        ``(which (len(forms), J), consts (U, 2, 5))``: each jet's row of ``consts`` per form
        (``-1`` where not ``valid``), made by :func:`~jetastar.ginkgo.likelihood_constants` once
        per distinct ``(t_cut, λ, λ_R)``.

    Example:
        >>> from jetastar.ginkgo import ShowerParams, generate
        >>> jets = generate(3, ShowerParams.qcd(), seed=1)
        >>> which, consts = constant_rows(jets, np.ones(3, bool), ["symmetric"])
        >>> which.tolist(), consts.shape
        ([[0, 0, 0]], (1, 2, 5))
    """
    n = len(collection)
    prm = collection.params
    triples = np.stack([prm["t_cut"], prm["lam"], prm["lam_root"]], axis=1)
    which = np.full((max(len(forms), 1), n), -1, dtype=np.int64)
    rows: list[np.ndarray] = []
    good = np.flatnonzero(valid)
    if good.size:
        first = triples[good[0]]
        if np.all(triples[good] == first):  # the usual case: one set of parameters
            uniq, inverse = first[None], np.zeros(good.size, dtype=np.int64)
        else:
            uniq, inverse = np.unique(triples[good], axis=0, return_inverse=True)
        for f, form in enumerate(forms):
            start = len(rows)
            rows.extend(likelihood_constants(float(t), float(lam), float(lr), form)
                        for t, lam, lr in uniq)
            which[f, good] = start + inverse.ravel()
    consts = np.ascontiguousarray(np.stack(rows) if rows else np.zeros((1, 2, 5)))
    return which, consts


@dataclasses.dataclass(frozen=True, eq=False)
class ChunkResults:
    """One algorithm over the jets of a chunk, as flat arrays (row ``i`` = jet ``i``).

    Attributes:
        algorithm: registry name.
        likelihood: the likelihood form.
        options: the options a per-jet result of the algorithm records (kt family: ``algorithm``
            and ``R``; greedy: none).
        collection: the jets.
        outcome: ``(J,)`` :data:`DONE` (tree and value below), :data:`INVALID` (the jet's leaves
            or parameters are invalid), :data:`PER_JET` (needs the per-jet function: a kt leaf
            without a rapidity, several kt jets at a small ``R``), :data:`NOT_RUN`.
        log_likelihood: ``(J,)`` the trees' values (NaN where no tree).
        status: ``(J,)`` str, the per-jet status of :data:`DONE` rows (``""`` elsewhere).
        message: ``(J,)`` str.
        node_offsets: ``(J + 1,)``; ``children`` ``(K, 2)`` and ``leaf_of_node`` ``(K,)``: the
            trees of :data:`DONE` rows in canonical node order (0 nodes elsewhere).
        counters: numeric stats of the per-jet results (greedy: ``splits_evaluated``), NaN where
            not :data:`DONE`.
        work: ``(J,)`` split evaluations / pair distances per jet (how a chunk's run time is
            shared among its rows).
        exact: ``(J,)`` bool, rows whose tree is a proven MAP (the exact engine's :data:`DONE`
            rows).
        upper_bound: ``(J,)`` the proven upper bound of such rows (NaN elsewhere).
        row_options: options whose value differs by row (beam search: ``beam_size``, the beam
            size each jet ran with, its default depending on the jet's size): name -> ``(J,)``,
            over ``options`` in the :data:`DONE` rows' results (``options`` holds the value
            asked for, ``None`` for the default).
        log_z, n_trees: ``(J,)`` the full trellis' log partition function (float64) and exact
            tree count (int64) of :data:`DONE` rows (the registry's ``"trellis"`` with
            ``log_z``); ``None`` for the other algorithms.
        stats: the stats, besides the counters, of every :data:`DONE` row's result (the exact
            engines: ``device``; the window search: ``path``).
        seconds: run time (wall, without compiling or loading kernels:
            :class:`~jetastar._jit.Stopwatch`) of this algorithm in :func:`cluster_columns`: its
            own kernel calls and arrays, plus an equal share of the chunk's common preparation
            (what a batch shares among the algorithm's rows as their ``time_s``).

    The result of a :data:`DONE` row (:meth:`result`) is the per-jet function's without the
    objects that the columnar path does not make: for beam search, ``beam`` (every tree of the
    final beam) is ``None``, as in a results table's rows; the best tree, its value, status,
    message, options and counters are the per-jet function's.
    """

    algorithm: str
    likelihood: str
    options: dict[str, Any]
    collection: JetCollection
    outcome: np.ndarray
    log_likelihood: np.ndarray
    status: np.ndarray
    message: np.ndarray
    node_offsets: np.ndarray
    children: np.ndarray
    leaf_of_node: np.ndarray
    counters: dict[str, np.ndarray]
    work: np.ndarray
    exact: np.ndarray
    upper_bound: np.ndarray
    row_options: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)
    log_z: np.ndarray | None = None
    n_trees: np.ndarray | None = None
    stats: dict[str, Any] = dataclasses.field(default_factory=dict)
    seconds: float = 0.0

    def __len__(self) -> int:
        return int(self.outcome.shape[0])

    def tree(self, i: int) -> Tree | None:
        """Jet ``i``'s tree (``None`` unless :data:`DONE`)."""
        a, b = int(self.node_offsets[i]), int(self.node_offsets[i + 1])
        if a == b:
            return None
        return Tree(self.children[a:b], self.leaf_of_node[a:b],
                    jet=int(self.collection.jet_id[i]))

    def options_of(self, i: int) -> dict[str, Any]:
        """The options of row ``i``'s result: :attr:`options` with the row's
        :attr:`row_options`."""
        return {**self.options, **{k: v[i].item() for k, v in self.row_options.items()}}

    def result(self, i: int) -> ClusteringResult:
        """Jet ``i``'s result, as the per-jet function returns it (``stats`` without ``time_s``);
        a row that is not :data:`DONE` runs the per-jet function now (an invalid jet gives a
        ``"failed"`` result naming the problem)."""
        jet_id = int(self.collection.jet_id[i])
        if self.outcome[i] == DONE:
            stats: dict[str, Any] = {
                k: math.nan if math.isnan(v[i]) else bool(v[i]) if k in _BOOL_COUNTERS
                else int(v[i]) for k, v in self.counters.items()}
            stats.update(self.stats)
            exact = bool(self.exact[i])
            return ClusteringResult(
                self.tree(i), float(self.log_likelihood[i]), self.algorithm, exact=exact,
                likelihood=self.likelihood, options=self.options_of(i), stats=stats,
                log_z=None if self.log_z is None else float(self.log_z[i]),
                n_trees=None if self.n_trees is None else int(self.n_trees[i]),
                upper_bound=float(self.upper_bound[i]) if exact else None,
                status=str(self.status[i]), message=str(self.message[i]), jet_id=jet_id,
            )
        opts: dict[str, Any] = {"likelihood": self.likelihood}
        if self.log_z is not None:
            opts["log_z"] = True
        if self.algorithm in ("mcts", "window-search"):  # every option it records is an argument
            opts.update(self.options)
        for key in ("R", "max_time", "max_memory", "threads", "beam_size", "greedy_guard"):
            if self.options.get(key) is not None:
                opts[key] = self.options[key]
        try:
            return cluster(self.collection[i], self.algorithm, **opts)
        except Exception as exc:  # an invalid jet, a small R: recorded as the batch does
            return ClusteringResult(None, -math.inf, self.algorithm, likelihood=self.likelihood,
                                    options=dict(self.options), status="failed",
                                    message=f"{type(exc).__name__}: {exc}", jet_id=jet_id)

    def results(self) -> list[ClusteringResult]:
        """Every row's :meth:`result`."""
        return [self.result(i) for i in range(len(self))]


def _use_threads(n_jets: int, parallel: bool | None, first: int = PARALLEL_FROM) -> bool:
    """``parallel``, or by default whether a chunk of ``n_jets`` is worth numba's threads (from
    ``first`` jets on)."""
    if parallel is None:
        return n_jets >= first and nb.get_num_threads() > 1
    return bool(parallel)


def cluster_columns(
    collection: JetCollection,
    algorithms: Mapping[str, Mapping[str, Any]],
    *,
    only: Mapping[str, np.ndarray] | None = None,
    parallel: bool | None = None,
) -> dict[str, ChunkResults]:
    """Cluster every jet of a collection with each algorithm, in one kernel call per algorithm
    (or calls of bounded work, for the exact engines, beam search and MCTS).

    Args:
        collection: the jets (flat columns; truth trees are not used).
        algorithms: registry name (of :data:`COLUMNAR_ALGORITHMS`) -> its options
            (``likelihood``; ``R`` for the kt family).
        only: per algorithm, a ``(J,)`` bool mask of the jets to run it on (others are
            :data:`NOT_RUN`, e.g. over a size limit).
        parallel: jets on numba's threads (default: for chunks of :data:`PARALLEL_FROM` jets or
            more, :data:`OWN_PARALLEL_FROM` for the exact engines, beam search and MCTS) or on
            this thread.

    Returns:
        Registry name -> :class:`ChunkResults`.

    Raises:
        ValueError: an algorithm or option the columnar path does not run (see
            :func:`columnar_options`).

    Example:
        >>> from jetastar.ginkgo import ShowerParams, generate
        >>> flat = cluster_columns(generate(5, ShowerParams.w(), seed=2), {"kt": {"R": 1000}})
        >>> flat["kt"].outcome.tolist(), flat["kt"].result(0).options["R"]
        ([0, 0, 0, 0, 0], 1000.0)
    """
    watch = Stopwatch()
    names = list(algorithms)
    opts = {}
    for name in names:
        o = columnar_options(name, algorithms[name])
        if o is None:
            raise ValueError(f"the columnar path does not run {name!r} with options "
                             f"{dict(algorithms[name])}")
        opts[name] = o
    n_jets = len(collection)
    # read-only, as a Jet's leaves: the kernels the chunk kernels share with the per-jet functions
    # (greedy, kt, beam search, the exact MAP engine) then have one specialisation for both paths,
    # whatever array the chunk was read into (a second one cost ~25 s of compilation)
    leaves = np.ascontiguousarray(collection.leaves, dtype=np.float64).view()
    leaves.flags.writeable = False
    loff = np.ascontiguousarray(collection.leaf_offsets, dtype=np.int64)
    counts = np.diff(loff)
    sizes = np.maximum(2 * counts - 1, 0)
    noff = np.zeros(n_jets + 1, dtype=np.int64)
    np.cumsum(sizes, out=noff[1:])
    forms = sorted({o["likelihood"] for o in opts.values()})
    which_form, consts = constant_rows(collection, params_valid(collection), forms)
    run = np.ones((len(names), n_jets), dtype=np.bool_)
    for q, name in enumerate(names):
        if only is not None and name in only:
            run[q] = np.asarray(only[name], dtype=bool)
    threads = _use_threads(n_jets, parallel)
    common = watch.seconds()
    out = {}
    seconds = {}
    # greedy and the kt family: one call per algorithm (each is timed; the shared validation of
    # the leaves costs 3-5 % more than one call for all)
    for q, name in enumerate(names):
        if name in OWN_CHUNK_KERNELS:
            continue
        watch = Stopwatch()
        which = np.ascontiguousarray(which_form[forms.index(opts[name]["likelihood"])][None])
        algs = np.array([COLUMNAR_ALGORITHMS[name]], dtype=np.int64)
        r2 = np.array([opts[name].get("R", 1.0) ** 2], dtype=np.float64)
        if n_jets == 0:
            children = np.full((1, int(noff[-1]), 2), -1, dtype=np.int64)
            leaf_of_node = np.full(int(noff[-1]), -1, dtype=np.int64)
            ll = np.full((1, n_jets), np.nan)
            outcome = np.full((1, n_jets), NOT_RUN, dtype=np.int64)
            info = np.full((1, n_jets), -1, dtype=np.int64)
            work = np.zeros((1, n_jets), dtype=np.int64)
        else:
            children, leaf_of_node, ll, outcome, info, work = cluster_chunk(
                leaves, loff, noff, which, consts, algs, np.ascontiguousarray(run[q][None]), r2,
                threads)
        out[name] = _chunk_results(name, opts[name], collection, counts, sizes, noff,
                                   children[0], leaf_of_node, ll[0], outcome[0], info[0],
                                   work[0])
        seconds[name] = watch.seconds()
    # the algorithms with chunk kernels of their own, one jet per thread
    for name, results in (("trellis", _map_results), ("beam", _beam_results),
                          ("mcts", _mcts_results), ("window-search", _window_results)):
        if name in names:
            watch = Stopwatch()
            if name == "trellis" and opts[name].get("log_z"):
                results = _trellis_results
            form = forms.index(opts[name]["likelihood"])
            out[name] = results(opts[name], collection, leaves, loff, counts, sizes, noff,
                                np.ascontiguousarray(which_form[form]), consts,
                                np.ascontiguousarray(run[names.index(name)]),
                                _use_threads(n_jets, parallel, OWN_PARALLEL_FROM))
            seconds[name] = watch.seconds()
    share = common / max(len(names), 1)
    out = {name: dataclasses.replace(chunk, seconds=seconds[name] + share)
           for name, chunk in out.items()}
    return {name: out[name] for name in names}


def _beam_plan(opts: dict[str, Any], counts: np.ndarray) -> tuple[np.ndarray, ...]:
    """How beam search runs on each jet, as :func:`~jetastar.clustering.beam_search` decides
    it: ``(size, width, cache)``, each ``(J,)``; ``width`` is ``0`` for the jets left to the
    per-jet function (fewer than 2 or more than :data:`BEAM_CHUNK_MAX` leaves, a beam over
    :data:`BEAM_CHUNK_MEMORY` or the memory limit, more than :data:`BEAM_CHUNK_WORK`)."""
    n_jets = counts.shape[0]
    size = np.zeros(n_jets, dtype=np.int64)
    width = np.zeros(n_jets, dtype=np.int64)
    cache = np.zeros(n_jets, dtype=np.bool_)
    limit = min(BEAM_CHUNK_MEMORY, default_memory_limit())
    for n in np.unique(counts).tolist():
        rows = counts == n
        s = default_beam_size(n) if opts["beam_size"] is None else int(opts["beam_size"])
        size[rows] = s
        if not 2 <= n <= BEAM_CHUNK_MAX:
            continue
        w = min(s, n_trees_capped(n, s))
        use_cache = 2 * w * (n * (n - 1) // 2) * 8 <= CACHE_BUDGET_BYTES
        if beam_memory(w, n, use_cache) > limit or w * n**3 / 6 > BEAM_CHUNK_WORK:
            continue
        width[rows] = w
        cache[rows] = use_cache
    return size, width, cache


def _beam_results(opts: dict[str, Any], collection: JetCollection, leaves: np.ndarray,
                  loff: np.ndarray, counts: np.ndarray, sizes: np.ndarray, noff: np.ndarray,
                  which: np.ndarray, consts: np.ndarray, run: np.ndarray,
                  threads: bool) -> ChunkResults:
    """Beam search's rows of a chunk (:func:`._chunk_kernels.beam_chunk`), with the statuses,
    messages, options and counters of :func:`~jetastar.clustering.beam_search`."""
    n = counts.shape[0]
    size, width, cache = _beam_plan(opts, counts)
    budget = 2**62 if opts["max_time"] is None else FIRST_BUDGET_SLICE_WORK
    children, leaf_of_node, ll, outcome, cnt, work = beam_chunk(
        leaves, loff, noff, which, consts, run, size, width, cache, opts["greedy_guard"], budget,
        threads)
    done = outcome == DONE
    node_offsets, ch, leaf = _done_trees(done, sizes, noff, children, leaf_of_node)
    status = shared_text(np.where(done, "ok", ""))
    message = text_column(n, "")
    for i in np.flatnonzero(done & ~np.isfinite(ll)).tolist():
        status[i] = "all_inf"
        message[i] = (f"every tree of the final beam ({int(cnt[i, 4])} trees) has "
                      "log-likelihood -inf")
    counters: dict[str, np.ndarray] = {}
    if done.any():
        names = ("splits_evaluated", "candidates", "duplicates", "selection_passes",
                 "beam_trees", "pair_cache", "greedy_added")
        counters = {k: np.where(done, cnt[:, q], np.nan).astype(np.float64)
                    for q, k in enumerate(names)}
    options: dict[str, Any] = {"beam_size": opts["beam_size"],
                               "greedy_guard": opts["greedy_guard"]}
    if opts["max_time"] is not None:
        options["max_time"] = opts["max_time"]
    return ChunkResults(
        algorithm="beam", likelihood=opts["likelihood"], options=options,
        collection=collection, outcome=outcome, log_likelihood=np.where(done, ll, np.nan),
        status=status, message=message, node_offsets=node_offsets, children=ch,
        leaf_of_node=leaf, counters=counters, work=np.where(done, work, 0).astype(np.float64),
        exact=np.zeros(n, dtype=bool), upper_bound=np.full(n, np.nan),
        row_options={"beam_size": size},
    )


def _mcts_results(opts: dict[str, Any], collection: JetCollection, leaves: np.ndarray,
                  loff: np.ndarray, counts: np.ndarray, sizes: np.ndarray, noff: np.ndarray,
                  which: np.ndarray, consts: np.ndarray, run: np.ndarray,
                  threads: bool) -> ChunkResults:
    """MCTS's rows of a chunk (:func:`._chunk_kernels.mcts_chunk`), with the statuses, messages,
    options and counters of :func:`~jetastar.clustering.mcts`; jets estimated at more than
    :data:`MCTS_CHUNK_WORK` are left to that function."""
    n = counts.shape[0]
    recorded = {k: v for k, v in opts.items() if k not in ("likelihood", "max_time")}
    _, settings = mcts_settings(**recorded)
    options = recorded if opts["max_time"] is None else {**recorded, "max_time": opts["max_time"]}
    estimate = mcts_work(counts, opts)
    over = run & (estimate > MCTS_CHUNK_WORK)
    budget = 2**62 if opts["max_time"] is None else FIRST_MCTS_BUDGET_WORK
    children, leaf_of_node, ll, outcome, cnt, work = mcts_chunk(
        leaves, loff, noff, which, consts, run & ~over, settings, estimate, budget, threads)
    # a jet over the cap is the per-jet function's (the kernel did not run it)
    outcome[(outcome == NOT_RUN) & over] = PER_JET
    done = outcome == DONE
    node_offsets, ch, leaf = _done_trees(done, sizes, noff, children, leaf_of_node)
    status = shared_text(np.where(done, "ok", ""))
    message = text_column(n, "")
    impossible = done & ~np.isfinite(ll)
    status[impossible] = "all_inf"
    message[impossible] = MCTS_ALL_INF_MESSAGE
    counters: dict[str, np.ndarray] = {}
    if done.any():
        counters = {k: np.where(done, cnt[:, q], np.nan).astype(np.float64) for k, q in
                    (("trajectories", 0), ("nodes", 1), ("beam_nodes", 3),
                     ("splits_evaluated", 2))}
    return ChunkResults(
        algorithm="mcts", likelihood=opts["likelihood"], options=options,
        collection=collection, outcome=outcome, log_likelihood=np.where(done, ll, np.nan),
        status=status, message=message, node_offsets=node_offsets, children=ch,
        leaf_of_node=leaf, counters=counters, work=np.where(done, work, 0).astype(np.float64),
        exact=np.zeros(n, dtype=bool), upper_bound=np.full(n, np.nan),
    )


def _map_results(opts: dict[str, Any], collection: JetCollection, leaves: np.ndarray,
                 loff: np.ndarray, counts: np.ndarray, sizes: np.ndarray, noff: np.ndarray,
                 which: np.ndarray, consts: np.ndarray, run: np.ndarray,
                 threads: bool) -> ChunkResults:
    """The exact MAP engine's rows of a chunk (:func:`._chunk_kernels.map_chunk`), with the
    statuses, messages and counters of :func:`~jetastar.clustering.exact_map`."""
    n = counts.shape[0]
    if n:
        slack = np.array([root_slack(consts[u]) for u in range(consts.shape[0])],
                         dtype=np.float64)
        children, ll, outcome, cnt = map_chunk(leaves, loff, noff, which, consts, slack, run,
                                               binomials(EXACT_CHUNK_MAX), threads)
    else:
        children = np.full((0, 2), -1, dtype=np.int64)
        ll = np.full(0, np.nan)
        outcome = np.full(0, NOT_RUN, dtype=np.int64)
        cnt = np.zeros((0, 5), dtype=np.int64)
    done, node_offsets, ch, leaf, status, message, counters = _exact_rows(
        opts, outcome, ll, counts, sizes, noff, children, estimate_map_memory, {
            "splits_enumerated": cnt[:, 0], "splits_bound_passed": cnt[:, 1],
            "splits_evaluated": cnt[:, 2], "clusters_unsplittable": cnt[:, 3],
            "clusters_impossible": cnt[:, 4]})
    return ChunkResults(
        algorithm="trellis", likelihood=opts["likelihood"], options=dict(opts),
        collection=collection, outcome=outcome, log_likelihood=np.where(done, ll, np.nan),
        status=status, message=message, node_offsets=node_offsets, children=ch,
        leaf_of_node=leaf, counters=counters,
        work=np.where(done, cnt[:, 0] + counts, 0).astype(np.float64), exact=done.copy(),
        upper_bound=np.where(done, ll, np.nan), stats={"device": "cpu"},
    )


def _window_results(opts: dict[str, Any], collection: JetCollection, leaves: np.ndarray,
                    loff: np.ndarray, counts: np.ndarray, sizes: np.ndarray, noff: np.ndarray,
                    which: np.ndarray, consts: np.ndarray, run: np.ndarray,
                    threads: bool) -> ChunkResults:
    """The window search's rows of a chunk: the jets it would prove with the exact MAP engine
    before any search (its ``exact_map`` path: ``exact_first``, by default where that costs less
    than the search) of up to 14 leaves, solved by that engine's chunk kernel
    (:func:`_map_results`), with the results, options and stats of
    :func:`~jetastar.clustering.window_search`; the other jets are left to it
    (:data:`PER_JET`)."""
    n = counts.shape[0]
    asked = {k: v for k, v in opts.items() if k != "likelihood"}
    exact_path = np.zeros(n, dtype=bool)
    sized = {name: np.zeros(n, dtype=object) for name in _WINDOW_SIZED}
    resolved: dict[str, Any] = {}
    for k in np.unique(counts).tolist():
        resolved = window_options(k, **asked)
        rows = counts == k
        for name in _WINDOW_SIZED:
            sized[name][rows] = resolved[name]
        if 2 <= k <= EXACT_CHUNK_MAX and window_proves_first(k, resolved):
            exact_path[rows] = True
    proof = _map_results(
        {"likelihood": opts["likelihood"], "max_time": None, "max_memory": None, "prune": True,
         "threads": None, "incumbent": False, "device": "cpu"},
        collection, leaves, loff, counts, sizes, noff, which, consts, run & exact_path, threads)
    outcome = proof.outcome.copy()
    outcome[run & ~exact_path] = PER_JET
    done = outcome == DONE
    counters: dict[str, np.ndarray] = {}
    if done.any():
        zero, one = _done_column(done, np.zeros(n)), _done_column(done, np.ones(n))
        counters = {name: zero for name in (
            "windows_solved", "windows_cached", "improvements", "reverted", "sweeps", "starts",
            "duplicate_starts", "recombined", "top_windows", "agreeing_optima", "sampled_starts",
            "widened")}
        counters.update(proved=one, window_optimal=one,
                        splits_evaluated=proof.counters["splits_evaluated"],
                        window_size=_done_column(done, np.full(n, resolved["window_size"])),
                        start_log_likelihood=np.full(n, np.nan))
    # the options a row records: those asked for, each size's defaults as row options
    options = {name: (asked.get(name) if name in _WINDOW_SIZED else value)
               for name, value in resolved.items()} if n else dict(asked)
    row_options = {name: np.array(values.tolist()) for name, values in sized.items()} if n else {}
    return dataclasses.replace(
        proof, algorithm="window-search", options=options, outcome=outcome,
        counters=counters, row_options=row_options, stats={"path": "exact_map"})


def _trellis_results(opts: dict[str, Any], collection: JetCollection, leaves: np.ndarray,
                     loff: np.ndarray, counts: np.ndarray, sizes: np.ndarray, noff: np.ndarray,
                     which: np.ndarray, consts: np.ndarray, run: np.ndarray,
                     threads: bool) -> ChunkResults:
    """The full trellis' rows of a chunk (:func:`._chunk_kernels.trellis_chunk`): MAP, log Z and
    tree count, with the statuses, messages, options and counters of
    :func:`~jetastar.clustering.exact_trellis` (its timings aside)."""
    n = counts.shape[0]
    children, ll, log_z, n_trees, outcome, cnt = trellis_chunk(
        leaves, loff, noff, which, consts, run, threads)
    done, node_offsets, ch, leaf, status, message, counters = _exact_rows(
        opts, outcome, ll, counts, sizes, noff, children, estimate_trellis_memory, {
            "clusters_pruned": cnt[:, 2], "clusters_impossible": cnt[:, 3],
            "splits_evaluated": cnt[:, 0], "splits_skipped": cnt[:, 1],
            "exact_count": np.ones(n)})
    options = {k: v for k, v in opts.items() if k != "log_z"}
    return ChunkResults(
        algorithm="trellis", likelihood=opts["likelihood"], options=options,
        collection=collection, outcome=outcome, log_likelihood=np.where(done, ll, np.nan),
        status=status, message=message, node_offsets=node_offsets, children=ch,
        leaf_of_node=leaf, counters=counters,
        work=np.where(done, cnt[:, 0] + cnt[:, 1] + counts, 0).astype(np.float64),
        exact=done.copy(), upper_bound=np.where(done, ll, np.nan),
        log_z=np.where(done, log_z, np.nan), n_trees=np.where(done, n_trees, 0),
        stats={"device": "cpu"},
    )


def _exact_rows(
    opts: dict[str, Any], outcome: np.ndarray, ll: np.ndarray, counts: np.ndarray,
    sizes: np.ndarray, noff: np.ndarray, children: np.ndarray, memory_of: Any,
    columns: dict[str, np.ndarray],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
           dict[str, np.ndarray]]:
    """What the rows of the exact engines (the MAP engine, the full trellis) share:
    ``(done, node_offsets, children, leaf_of_node, status, message, counters)``, with the trees
    of the :data:`DONE` rows, ``"all_inf"`` where every tree is impossible, and the counters both
    give (``n_leaves``, ``clusters``, ``splits_total``, ``memory_bytes`` by ``memory_of(n)``,
    ``threads``) followed by the engine's own ``columns`` (name -> per-row values); no counter
    when no row is done."""
    done = outcome == DONE
    node_offsets, ch, leaf = _done_trees(done, sizes, noff, children, _leaves_first(counts, noff))
    status = shared_text(np.where(done, "ok", ""))
    message = text_column(outcome.shape[0], "")
    impossible = done & ~(ll > -np.inf)
    status[impossible] = "all_inf"
    message[impossible] = ALL_INF_MESSAGE
    counters: dict[str, np.ndarray] = {}
    if done.any():
        per_size = range(EXACT_CHUNK_MAX + 1)
        total = np.array([n_splits_total(k) for k in per_size], dtype=np.float64)
        memory = np.array([memory_of(k) for k in per_size], dtype=np.float64)
        small = np.minimum(counts, EXACT_CHUNK_MAX)
        threads = opts["threads"] or nb.get_num_threads()
        counters = {
            "n_leaves": _done_column(done, counts),
            "clusters": _done_column(done, 2.0 ** small - 1),
            "splits_total": _done_column(done, total[small]),
            "memory_bytes": _done_column(done, memory[small]),
            "threads": _done_column(done, np.full(outcome.shape[0], threads)),
        }
        counters.update({name: _done_column(done, values) for name, values in columns.items()})
    return done, node_offsets, ch, leaf, status, message, counters


def _done_column(done: np.ndarray, values: np.ndarray) -> np.ndarray:
    """A float64 counter column: ``values`` on the :data:`DONE` rows, NaN elsewhere."""
    return np.where(done, values, np.nan).astype(np.float64)


def _leaves_first(counts: np.ndarray, noff: np.ndarray) -> np.ndarray:
    """``leaf_of_node`` of trees numbered as ``tree_from_best`` numbers them: each jet's leaves
    first in its block of nodes, ``0 .. n - 1`` (``-1`` on internal nodes)."""
    leaf_of_node = np.full(int(noff[-1]), -1, dtype=np.int64)
    local = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
    leaf_of_node[np.repeat(noff[:-1], counts) + local] = local
    return leaf_of_node


def _done_trees(done: np.ndarray, sizes: np.ndarray, noff: np.ndarray, children: np.ndarray,
                leaf_of_node: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(node_offsets, children, leaf_of_node)`` of a kernel call's trees with only the rows
    ``done`` keeping theirs (``sizes``: nodes per jet in ``noff``'s layout)."""
    if done.all():
        return noff, children, leaf_of_node
    keep = np.repeat(done, sizes)
    node_offsets = np.zeros(done.shape[0] + 1, dtype=np.int64)
    np.cumsum(np.where(done, sizes, 0), out=node_offsets[1:])
    return node_offsets, children[keep], leaf_of_node[keep]


def _chunk_results(name: str, opts: dict[str, Any], collection: JetCollection,
                   counts: np.ndarray, sizes: np.ndarray, noff: np.ndarray, children: np.ndarray,
                   leaf_of_node: np.ndarray, ll: np.ndarray, outcome: np.ndarray,
                   info: np.ndarray, work: np.ndarray) -> ChunkResults:
    """One algorithm's rows of a kernel call: trees kept for :data:`DONE` rows only, statuses
    and messages as the per-jet functions word them."""
    done = outcome == DONE
    n = outcome.shape[0]
    node_offsets, ch, leaf = _done_trees(done, sizes, noff, children, leaf_of_node)
    status = shared_text(np.where(done, "ok", ""))
    message = text_column(n, "")
    counters: dict[str, np.ndarray] = {}
    if name == "greedy":
        options: dict[str, Any] = {}
        for i in np.flatnonzero(done & ((info >= 0) | ~np.isfinite(ll))):
            status[i], message[i] = greedy_status(int(info[i]), int(counts[i]), float(ll[i]))
        if done.any():
            counters["splits_evaluated"] = np.where(done, work, np.nan).astype(np.float64)
    else:
        options = {"algorithm": name, "R": opts["R"]}
        message[done & ~np.isfinite(ll)] = minus_inf_message(name)
    return ChunkResults(
        algorithm=name, likelihood=opts["likelihood"], options=options, collection=collection,
        outcome=outcome, log_likelihood=np.where(done, ll, np.nan), status=status,
        message=message, node_offsets=node_offsets, children=ch, leaf_of_node=leaf,
        counters=counters, work=np.where(done, work, 0).astype(np.float64),
        exact=np.zeros(n, dtype=bool), upper_bound=np.full(n, np.nan),
    )


def score_columns(
    collection: JetCollection,
    trees: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
    likelihood: str = "symmetric",
    *,
    parallel: bool | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Log-likelihood of one tree per jet, every jet of a collection in one kernel call.

    The values of :func:`jetastar.ginkgo.log_likelihood` (internal momenta: sums of leaf
    momenta; the per-node values summed as numpy sums them).

    Args:
        collection: the jets.
        trees: ``(children (K, 2), leaf_of_node (K,), node_offsets (J + 1,))`` with local node
            ids per jet (e.g. an :class:`~jetastar.io.AlgorithmResults` table's); default the
            collection's truth trees.
        likelihood: ``"symmetric"`` or ``"legacy"``.
        parallel: as in :func:`cluster_columns`.

    Returns:
        ``(log_likelihood, status)``, each ``(J,)``: ``status`` is ``"ok"``, ``"invalid jet"``
        (leaves or parameters), ``"no tree"`` or ``"bad tree"`` (not one binary tree over the
        jet's leaves); the value is NaN unless ``"ok"``.

    Raises:
        ValueError: an unknown likelihood form, or tree columns of the wrong lengths.
    """
    if likelihood not in LIKELIHOODS:
        raise ValueError(f"unknown likelihood {likelihood!r}; valid: "
                         f"{', '.join(map(repr, LIKELIHOODS))}")
    children, leaf_of_node, node_offsets = (
        (collection.children, collection.leaf_of_node, collection.node_offsets)
        if trees is None else trees)
    children = np.ascontiguousarray(children, dtype=np.int64).reshape(-1, 2)
    leaf_of_node = np.ascontiguousarray(leaf_of_node, dtype=np.int64)
    noff = np.ascontiguousarray(node_offsets, dtype=np.int64)
    n_jets = len(collection)
    if noff.shape != (n_jets + 1,) or noff[-1] != children.shape[0] or \
            leaf_of_node.shape[0] != children.shape[0]:
        raise ValueError("the trees' offsets and columns do not match the jets")
    which, consts = constant_rows(collection, params_valid(collection), [likelihood])
    ll, code = score_chunk(
        np.ascontiguousarray(collection.leaves, dtype=np.float64),
        np.ascontiguousarray(collection.leaf_offsets, dtype=np.int64), children, leaf_of_node,
        noff, np.ascontiguousarray(which[0]), consts, _use_threads(n_jets, parallel))
    names = np.array(["ok", "invalid jet", "no tree", "bad tree"], dtype=object)
    return ll, names[code]

