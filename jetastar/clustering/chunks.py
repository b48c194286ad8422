"""The columnar path: whole chunks of jets clustered and scored by one kernel call each.

Jets held as flat columns (a :class:`~jetastar.JetCollection`: leaves with offsets, per-jet
parameters) go to one numba call per chunk and algorithm (jets in parallel, each jet serially)
that checks every jet's leaves with the one leaf validator, clusters every jet and scores the trees
with the Ginkgo likelihood, with the kernels of the per-jet functions: results are those of the
per-jet functions, trees and values bit for bit. The answer is flat arrays, a
:class:`ChunkResults` per algorithm; :class:`~jetastar.Tree` and
:class:`~jetastar.clustering.ClusteringResult` objects are made only when one jet's is asked for.
Batch runs, :func:`jetastar.inmemory.cluster_jets` and ``jetastar.cluster(many_jets, ...)`` use it
for every algorithm that has a chunk path.

This module is the driver; it knows no algorithm. An algorithm that runs on the columnar path
declares a :class:`ChunkPath` (the ``chunk`` of its
:class:`~jetastar.clustering.registry.AlgorithmInfo`), defined next to its code: which options the
path takes (:meth:`ChunkPath.options`), how it runs a :class:`Chunk` (:meth:`ChunkPath.run`), and
how a batch run sizes its chunks. Today: greedy and the kt family (one shared kernel), beam search
(jets of up to 40 leaves), MCTS with deterministic rollouts, the exact MAP engine and the full
trellis (the registry's ``"trellis"``, jets of up to 14 leaves) and the window search (its jets
that it proves with the exact MAP engine before any search); their other jets are left to the
per-jet functions (:data:`PER_JET`).

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
from collections.abc import Mapping
from typing import Any

import numba as nb
import numpy as np

from .._jit import Stopwatch
from .._text import shared_text, text_column
from ..ginkgo.likelihood import LIKELIHOODS, likelihood_constants
from ..jet import JetCollection
from ..tree import Tree
from ._chunk_kernels import DONE, INVALID, NOT_RUN, PER_JET, score_chunk
from .registry import algorithm_info, cluster
from .result import ClusteringResult

__all__ = [
    "CHUNK_PATH_FROM",
    "COSTLY_CHUNK_SIZE",
    "DONE",
    "INVALID",
    "IN_PROCESS_CHUNK_SIZE",
    "NOT_RUN",
    "OWN_PARALLEL_FROM",
    "PARALLEL_FROM",
    "PER_JET",
    "SHORT_CHUNK_SIZE",
    "Chunk",
    "ChunkPath",
    "ChunkResults",
    "cluster_columns",
    "columnar_options",
    "constant_rows",
    "done_column",
    "done_trees",
    "leaves_first",
    "ok_rows",
    "params_valid",
    "rerun_options",
    "score_columns",
    "use_threads",
]

#: batch chunks of fewer jets go jet by jet, not through the chunk kernels: a chunk kernel saves
#: ~0.2 ms a jet and costs 3-12 s to compile on a cold cache (``jetastar run``'s 5-jet chunks
#: compiled 55 s of chunk kernels that saved it well under a second)
CHUNK_PATH_FROM = 16
#: chunks of fewer jets run on one thread (a parallel launch costs more than their work)
PARALLEL_FROM = 256
#: the same for the algorithms whose jets cost more (the exact engines, beam search, MCTS:
#: 0.1-0.3 ms a jet of 7 leaves, up to ~0.1 s at 14)
OWN_PARALLEL_FROM = 16
#: jets per chunk of a batch run when every algorithm runs on the columnar path and their jets
#: are cheap (greedy, kt, cambridge, antikt: 2-40 µs per jet). Measured (30 000 QCD jets, those
#: four algorithms, HDF5 in and out, one worker, a loaded 2-core machine): a chunk's reading and
#: part-file writing cost ~0.1 s whatever its size; chunks of 50 jets ran at 390 jets/s, chunks
#: of 5000 at 3100 jets/s end to end
SHORT_CHUNK_SIZE = 5000
#: the first chunks' size of a batch run whose columnar algorithms cost up to 10 ms a jet (beam
#: search, MCTS, the exact MAP of small jets): 5000 such jets were ~50 s of work before the
#: first part and the first measured cost (later chunks are sized by that cost)
COSTLY_CHUNK_SIZE = 200
#: jets per call of the columnar path in a run in this process (a call's fixed cost, ~0.2 ms, is
#: then spread over many jets)
IN_PROCESS_CHUNK_SIZE = 4096


@dataclasses.dataclass(frozen=True, eq=False)
class Chunk:
    """The flat columns of a chunk of jets, as one algorithm's chunk kernel takes them.

    Attributes:
        collection: the jets.
        leaves: ``(M, 4)`` float64, C-contiguous and read-only (the kernels the chunk kernels
            share with the per-jet functions then have one specialisation for both paths).
        loff: ``(J + 1,)`` int64 leaf offsets; ``counts`` ``(J,)`` leaves per jet.
        sizes: ``(J,)`` nodes per jet (``2 n - 1``); ``noff`` ``(J + 1,)`` their offsets.
        which: ``(J,)`` int64 row of ``consts`` per jet for the algorithm's likelihood form
            (``-1``: invalid parameters).
        consts: ``(U, 2, 5)`` float64 likelihood constants.
        run: ``(J,)`` bool, the jets to run the algorithm on (others: :data:`NOT_RUN`).
        threads: run the jets on numba's threads (or on this one).
    """

    collection: JetCollection
    leaves: np.ndarray
    loff: np.ndarray
    counts: np.ndarray
    sizes: np.ndarray
    noff: np.ndarray
    which: np.ndarray
    consts: np.ndarray
    run: np.ndarray
    threads: bool

    def __len__(self) -> int:
        return int(self.counts.shape[0])


class ChunkPath:
    """How an algorithm runs on whole chunks of jets: subclassed next to each algorithm's code
    and declared as the ``chunk`` of its :class:`~jetastar.clustering.registry.AlgorithmInfo`.

    Attributes:
        kernel_key: what warming it up compiles (algorithms whose chunk paths share a kernel
            share the key; :mod:`.warmup` compiles each key once per process).
        compile_s: compile seconds of that shared kernel on a cold cache, counted once per key
            (``0``: counted in the algorithm's own :class:`~.registry.WarmUp`).
        parallel_from: chunks of fewer jets run on one thread.
        chunk_size: the first chunks' size of a batch run whose algorithms all run here.
        in_process_size: jets per call of a run in this process.
        whole: every jet runs here (``False``: only some, e.g. the window search's small jets;
            a batch run then sizes its chunks as for the per-jet path).
    """

    kernel_key: str = "columnar"
    compile_s: float = 0.0
    parallel_from: int = OWN_PARALLEL_FROM
    chunk_size: int = COSTLY_CHUNK_SIZE
    in_process_size: int = IN_PROCESS_CHUNK_SIZE
    whole: bool = True

    def options(self, options: Mapping[str, Any]) -> dict[str, Any] | None:
        """The options the path runs with (checked as the per-jet function checks them), or
        ``None`` when it does not take these (an option it has no kernel for, a value the
        per-jet function would refuse): those jets go one by one, where bad values are
        reported."""
        raise NotImplementedError

    def run(self, opts: dict[str, Any], chunk: Chunk) -> ChunkResults:
        """Every jet of ``chunk`` asked for (``chunk.run``) with the options ``opts`` (from
        :meth:`options`)."""
        raise NotImplementedError

    def kernel(self, opts: Mapping[str, Any]) -> str:
        """The warm-up key of the kernels ``opts`` select (:attr:`kernel_key`)."""
        return self.kernel_key

    def batch_chunk_size(self, opts: Mapping[str, Any]) -> int:
        """The first chunks' size of a batch run (:attr:`chunk_size`)."""
        return self.chunk_size

    def in_process_chunk_size(self, opts: Mapping[str, Any]) -> int:
        """Jets per call of a run in this process (:attr:`in_process_size`)."""
        return self.in_process_size


def columnar_options(name: str, options: Mapping[str, Any]) -> dict[str, Any] | None:
    """What the columnar path runs algorithm ``name`` with (its :class:`ChunkPath`'s
    :meth:`~ChunkPath.options`), or ``None`` when it does not run ``name`` with these options (an
    algorithm without a chunk path, an option it does not take, a bad value): those go through
    the per-jet path, which reports bad values.

    Example:
        >>> columnar_options("kt", {"R": 1000}), columnar_options("astar-approx", {})
        ({'likelihood': 'symmetric', 'R': 1000.0}, None)
    """
    try:
        info = algorithm_info(name)
    except (ValueError, TypeError):
        return None
    return info.chunk_options(options)


def rerun_options(likelihood: str, options: Mapping[str, Any],
                  keys: tuple[str, ...] = ()) -> dict[str, Any]:
    """The options with which the per-jet function runs a row the chunk kernel left
    (:attr:`ChunkResults.rerun_options`): ``likelihood`` and each of ``keys`` that ``options``
    sets (not ``None``).

    Example:
        >>> rerun_options("legacy", {"R": 0.4, "max_time": None}, ("R", "max_time"))
        {'likelihood': 'legacy', 'R': 0.4}
    """
    out: dict[str, Any] = {"likelihood": likelihood}
    out.update({k: options[k] for k in keys if options.get(k) is not None})
    return out


def ok_rows(done: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(status, message)`` columns of a chunk: ``"ok"`` and ``""`` on the :data:`DONE` rows,
    ``""`` elsewhere (each path then words its other statuses)."""
    return shared_text(np.where(done, "ok", "")), text_column(done.shape[0], "")


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
        rerun_options: the options the per-jet function runs a row that is not :data:`DONE`
            with (:meth:`result`).
        flags: the counters that the per-jet function gives as booleans.
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
    rerun_options: dict[str, Any] = dataclasses.field(default_factory=dict)
    flags: tuple[str, ...] = ()
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
                k: math.nan if math.isnan(v[i]) else bool(v[i]) if k in self.flags
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
        try:
            return cluster(self.collection[i], self.algorithm, **self.rerun_options)
        except Exception as exc:  # an invalid jet, a small R: recorded as the batch does
            return ClusteringResult(None, -math.inf, self.algorithm, likelihood=self.likelihood,
                                    options=dict(self.options), status="failed",
                                    message=f"{type(exc).__name__}: {exc}", jet_id=jet_id)

    def results(self) -> list[ClusteringResult]:
        """Every row's :meth:`result`."""
        return [self.result(i) for i in range(len(self))]


def use_threads(n_jets: int, parallel: bool | None, first: int = PARALLEL_FROM) -> bool:
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
    (or calls of bounded work, for the algorithms whose jets cost more).

    Args:
        collection: the jets (flat columns; truth trees are not used).
        algorithms: registry name (of an algorithm with a :class:`ChunkPath`) -> its options.
        only: per algorithm, a ``(J,)`` bool mask of the jets to run it on (others are
            :data:`NOT_RUN`, e.g. over a size limit).
        parallel: jets on numba's threads (default: for chunks of at least the path's
            :attr:`~ChunkPath.parallel_from` jets) or on this thread.

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
    paths: dict[str, ChunkPath] = {}
    opts = {}
    for name in names:
        o = columnar_options(name, algorithms[name])
        if o is None:
            raise ValueError(f"the columnar path does not run {name!r} with options "
                             f"{dict(algorithms[name])}")
        paths[name] = algorithm_info(name).chunk
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
    common = watch.seconds()
    out = {}
    seconds = {}
    # one algorithm after another (each is timed; the shared validation of the leaves costs 3-5 %
    # more than one call for all)
    for q, name in enumerate(names):
        watch = Stopwatch()
        path = paths[name]
        chunk = Chunk(
            collection, leaves, loff, counts, sizes, noff,
            np.ascontiguousarray(which_form[forms.index(opts[name]["likelihood"])]), consts,
            np.ascontiguousarray(run[q]), use_threads(n_jets, parallel, path.parallel_from))
        out[name] = path.run(opts[name], chunk)
        seconds[name] = watch.seconds()
    share = common / max(len(names), 1)
    return {name: dataclasses.replace(out[name], seconds=seconds[name] + share) for name in names}


def done_column(done: np.ndarray, values: np.ndarray) -> np.ndarray:
    """A float64 counter column: ``values`` on the :data:`DONE` rows, NaN elsewhere."""
    return np.where(done, values, np.nan).astype(np.float64)


def leaves_first(counts: np.ndarray, noff: np.ndarray) -> np.ndarray:
    """``leaf_of_node`` of trees numbered as ``tree_from_best`` numbers them: each jet's leaves
    first in its block of nodes, ``0 .. n - 1`` (``-1`` on internal nodes)."""
    leaf_of_node = np.full(int(noff[-1]), -1, dtype=np.int64)
    local = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
    leaf_of_node[np.repeat(noff[:-1], counts) + local] = local
    return leaf_of_node


def done_trees(done: np.ndarray, sizes: np.ndarray, noff: np.ndarray, children: np.ndarray,
                leaf_of_node: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(node_offsets, children, leaf_of_node)`` of a kernel call's trees with only the rows
    ``done`` keeping theirs (``sizes``: nodes per jet in ``noff``'s layout)."""
    if done.all():
        return noff, children, leaf_of_node
    keep = np.repeat(done, sizes)
    node_offsets = np.zeros(done.shape[0] + 1, dtype=np.int64)
    np.cumsum(np.where(done, sizes, 0), out=node_offsets[1:])
    return node_offsets, children[keep], leaf_of_node[keep]


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
        noff, np.ascontiguousarray(which[0]), consts, use_threads(n_jets, parallel))
    names = np.array(["ok", "invalid jet", "no tree", "bad tree"], dtype=object)
    return ll, names[code]

