"""The work of one chunk: every algorithm on every jet, each outcome recorded as a status.

:func:`cluster_collection` clusters the jets of a collection in this process (the master without
an executor, or a worker through :func:`chunk_task`); :func:`run_one` runs one algorithm on one
jet and turns size limits, hopeless time estimates and errors into ``"skipped"`` / ``"failed"``
results instead of exceptions (see :mod:`jetastar.batch` for the statuses).

Example:
    >>> from jetastar.batch import BatchConfig, cluster_collection
    >>> from jetastar.ginkgo import ShowerParams, generate
    >>> tables = cluster_collection(generate(3, ShowerParams.qcd(), seed=1), BatchConfig(["kt"]))
    >>> list(tables["kt"].status)
    ['ok', 'ok', 'ok']
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .._columnar import LEAF_OK, leaf_problems
from .._jit import Stopwatch
from .._text import text_column
from ..clustering import ClusteringResult, algorithm_info, cluster
from ..clustering.chunks import (
    CHUNK_PATH_FROM,
    DONE,
    IN_PROCESS_CHUNK_SIZE,
    INVALID,
    PER_JET,
    ChunkResults,
    cluster_columns,
    params_valid,
)
from ..clustering.threads import Threads
from ..errors import InvalidJetError, TooLargeError
from ..jet import Jet, validate_leaves
from ..result_tables import AlgorithmResults, to_json
from .config import BatchConfig, load_registry, options_for, size_limit
from .executors import jet_reporter, warm_up_here

__all__ = ["COLUMNAR_CHUNK", "chunk_task", "cluster_collection", "in_process_chunk_size",
           "run_one"]

#: jets per call of :func:`cluster_collection` in this process when every algorithm runs on the
#: columnar path (a call's fixed cost, ~0.2 ms, is then spread over many jets; an algorithm's chunk
#: path may ask for fewer: the full trellis, 256)
COLUMNAR_CHUNK = IN_PROCESS_CHUNK_SIZE


def in_process_chunk_size(config: BatchConfig) -> int:
    """Jets per :func:`cluster_collection` call for a run in this process: ``config.chunk_size``,
    or, when every algorithm runs on the columnar path, at least the smallest of their chunk
    paths' :meth:`~jetastar.clustering.chunks.ChunkPath.in_process_chunk_size`
    (:data:`COLUMNAR_CHUNK`; 256 with the full trellis).

    Example:
        >>> in_process_chunk_size(BatchConfig(["kt"])), in_process_chunk_size(BatchConfig(["astar"]))
        (4096, 50)
        >>> in_process_chunk_size(BatchConfig(["kt", "trellis"], options={"trellis": {"log_z": True}}))
        256
    """
    sizes = []
    for name in config.algorithms:
        info = algorithm_info(name)
        flat = info.chunk_options(options_for(name, config, 1))
        if flat is None or not info.chunk.whole:
            return config.chunk_size
        sizes.append(info.chunk.in_process_chunk_size(flat))
    return max(config.chunk_size, min(sizes, default=COLUMNAR_CHUNK))


def run_one(jet: Any, name: str, opts: dict[str, Any], config: BatchConfig) -> ClusteringResult:
    """Run algorithm ``name`` on ``jet``; never raises for the jet's or the algorithm's sake.

    Args:
        jet: a :class:`~jetastar.Jet`.
        name: a registry name.
        opts: its options (:func:`~jetastar.batch.config.options_for`).
        config: the run's settings (size and time limits).

    Returns:
        The algorithm's result with the options it ran with and the jet's id, or a ``"skipped"``
        (size limit, hopeless time estimate, :class:`~jetastar.TooLargeError`) or ``"failed"``
        (any other error, or a tree that is not over the jet's leaves) result whose message says
        why.
    """
    refused = _refusal(jet.n_leaves, jet.jet_id, name, opts, config)
    if refused is not None:
        return refused
    watch = Stopwatch()
    try:
        res = cluster(jet, name, **opts)
    except TooLargeError as exc:
        return ClusteringResult(
            None, -math.inf, name, options=opts, status="skipped", jet_id=jet.jet_id,
            message=str(exc), stats={"time_s": watch.seconds()},
        )
    except Exception as exc:  # recorded, the batch goes on
        return ClusteringResult(
            None, -math.inf, name, options=opts, status="failed", jet_id=jet.jet_id,
            message=f"{type(exc).__name__}: {exc}", stats={"time_s": watch.seconds()},
        )
    elapsed = watch.seconds()
    if res.tree is not None and res.tree.n_leaves != jet.n_leaves:  # (a plugin's mistake)
        return ClusteringResult(
            None, -math.inf, name, options=opts, status="failed", jet_id=jet.jet_id,
            message=(f"{name!r} gave jet {jet.jet_id} a tree over {res.tree.n_leaves} leaves; "
                     f"the jet has {jet.n_leaves}"),
            stats={"time_s": elapsed},
        )
    stats = dict(res.stats)
    stats.setdefault("time_s", elapsed)
    res = dataclasses.replace(res, options={**opts, **res.options}, jet_id=jet.jet_id,
                              stats=stats)
    note = _time_note(name, elapsed, config)
    if note:
        res = dataclasses.replace(res, message=f"{res.message}; {note}" if res.message else note)
    return res


def _time_note(name: str, elapsed: float, config: BatchConfig) -> str:
    """What a result's message says when an algorithm without a time option ran past the time
    limit (``""`` otherwise)."""
    if config.time_limit is not None and elapsed > config.time_limit and \
            algorithm_info(name).time_option is None:
        return (f"took {elapsed:.3g} s, over the time limit of {config.time_limit:g} s "
                f"({name!r} has no time option, so it ran to completion)")
    return ""


def _refusal(n_leaves: int, jet_id: int | None, name: str, opts: dict[str, Any],
             config: BatchConfig) -> ClusteringResult | None:
    """A ``"skipped"`` result for a jet over the algorithm's size limit or, under a time limit,
    for an algorithm without a time option whose lower time estimate on this jet is over the
    limit (its kernel could not be stopped); ``None`` when the jet is to be run."""
    limit = size_limit(name, config)
    if limit is not None and n_leaves > limit:
        return ClusteringResult(
            None, -math.inf, name, options=opts, status="skipped", jet_id=jet_id,
            message=f"{n_leaves} leaves is over the size limit {limit} of {name!r}",
        )
    info = algorithm_info(name)
    if config.time_limit is None or info.time_option is not None or info.estimate is None:
        return None
    est = info.estimate(n_leaves, opts)
    if est is None or not est > config.time_limit:
        return None
    return ClusteringResult(
        None, -math.inf, name, options=opts, status="skipped", jet_id=jet_id,
        message=(f"not started: {name!r} is estimated at {est:.3g} s or more for "
                 f"{n_leaves} leaves, over the time limit of {config.time_limit:g} s (it has "
                 "no time option and cannot be stopped once started)"),
    )


def _jet_for_clustering(collection: Any, i: int) -> Jet:
    """Jet ``i`` of a collection without its truth tree (clustering does not need it, and
    building the tree costs more than clustering a small jet)."""
    a, b = collection.leaf_offsets[i], collection.leaf_offsets[i + 1]
    seed = int(collection.seed[i])
    try:
        params = collection.jet_params(i)
    except InvalidJetError:
        # a bad particle also spoils the parameters derived from it (a jet's root 4-vector):
        # name the particle when it is the cause
        validate_leaves(collection.leaves[a:b], int(collection.jet_id[i]))
        raise
    return Jet(collection.leaves[a:b], params, jet_id=int(collection.jet_id[i]),
               seed=None if seed < 0 else seed, jet_type=str(collection.jet_type[i]))


def cluster_collection(
    collection: Any,
    config: BatchConfig,
    *,
    first_index: int = 0,
    source: str = "",
    n_workers: int = 1,
    on_jet: Callable[[int], None] | None = None,
) -> dict[str, AlgorithmResults]:
    """Cluster every jet of a collection with every algorithm of ``config`` (in this process).

    The algorithms of the columnar path (greedy, the kt family, the exact MAP of small jets with
    their usual options, beam search and MCTS with deterministic rollouts: every algorithm with a
    :class:`~jetastar.clustering.chunks.ChunkPath` that takes its options) run on the whole
    collection in one kernel call and their tables are made from its flat arrays; the others, and the jets the
    kernel leaves to them (invalid jets, whose message comes from :class:`~jetastar.Jet`; a kt
    leaf without a rapidity), go through :func:`run_one` jet by jet. The results are the same
    either way; the ``time_s`` of a row of the columnar path is its algorithm's time in the
    columnar call (:attr:`~jetastar.clustering.chunks.ChunkResults.seconds`) shared among the
    algorithm's rows in proportion to their work (split evaluations / pair distances).

    Args:
        collection: a :class:`~jetastar.JetCollection`.
        config: what to run.
        first_index: position of the collection's first jet in its file (for ``jet_index``).
        source: file name used in the messages of invalid jets.
        n_workers: how many such calls run at the same time (sets ``threads=1`` when > 1, and
            the columnar kernel then runs on one thread).
        on_jet: called with a number of jets as they finish (every algorithm done), e.g. to move
            a progress bar.

    Returns:
        algorithm name -> :class:`AlgorithmResults` with one row per jet.
    """
    load_registry(config.plugins)
    opts = {name: options_for(name, config, n_workers) for name in config.algorithms}
    n = len(collection)
    if n:
        warm_up_here(config, opts, n_workers=n_workers,
                     largest_jet=int(collection.n_leaves.max()), n_jets=n)
    rows: dict[str, dict[int, ClusteringResult]] = {name: {} for name in config.algorithms}
    flat = _cluster_columnar(collection, config, opts, n_workers, rows)
    _cluster_on_gpu(collection, config, opts, rows)
    per_jet = [name for name in config.algorithms if name not in flat]
    need = np.full(n, bool(per_jet))
    for chunk in flat.values():
        need |= (chunk.outcome == INVALID) | (chunk.outcome == PER_JET)
    # several workers share the cores: every algorithm on one thread, also those without a
    # ``threads`` option (the window search's exact MAP ran on every core in each worker: on a
    # 2-core machine 4 threads, 2-4x the wall time at the same CPU time, and each worker compiled
    # the engine's parallel kernel)
    with Threads(1 if n_workers > 1 and config.threads is None else None):
        _cluster_per_jet(collection, config, opts, rows, flat, per_jet, need, first_index, source,
                         on_jet)
    if on_jet is not None and n - int(need.sum()):
        on_jet(n - int(need.sum()))
    index = np.arange(first_index, first_index + n)
    tables = {}
    for name in config.algorithms:
        info = algorithm_info(name)
        if name in flat:
            tables[name] = _flat_table(name, flat[name], rows[name], opts[name], index,
                                       collection.jet_id, config, info.exact)
        else:
            results = [rows[name][i] for i in range(n)]
            tables[name] = AlgorithmResults.from_results(
                name, results, jet_index=index, jet_id=collection.jet_id,
                likelihood=_likelihood_of(results, opts[name]), exact_method=info.exact,
            )
    return tables


def _cluster_per_jet(collection: Any, config: BatchConfig, opts: dict[str, dict[str, Any]],
                     rows: dict[str, dict[int, ClusteringResult]], flat: dict[str, ChunkResults],
                     per_jet: list[str], need: np.ndarray, first_index: int, source: str,
                     on_jet: Callable[[int], None] | None) -> None:
    """The jets of :func:`cluster_collection` that go jet by jet (``need``), into ``rows``."""
    for i in np.flatnonzero(need).tolist():
        jet_id = int(collection.jet_id[i])
        try:
            jet = _jet_for_clustering(collection, i)
        except InvalidJetError as exc:
            entries = collection.jet_columns.get("entry")
            entry = int(entries[i]) if entries is not None else first_index + i
            # jets found in events: which of the entry's jets (the column of the 'clusters' tree)
            in_event = collection.jet_columns.get("jet_in_event")
            which = f", jet_in_event {int(in_event[i])}" if in_event is not None else ""
            where = f"{source}: entry {entry}{which}: " if source else ""
            for name in config.algorithms:
                rows[name][i] = ClusteringResult(
                    None, -math.inf, name, options=opts[name], status="failed",
                    message=f"{where}{exc}", jet_id=jet_id,
                )
        else:
            for name in config.algorithms:
                if name in per_jet and i in rows[name]:
                    continue  # solved with its batch on a GPU
                if name in per_jet or flat[name].outcome[i] in (INVALID, PER_JET):
                    rows[name][i] = run_one(jet, name, opts[name], config)
        if on_jet is not None:
            on_jet(1)


def _cluster_on_gpu(
    collection: Any, config: BatchConfig, opts: dict[str, dict[str, Any]],
    rows: dict[str, dict[int, ClusteringResult]],
) -> None:
    """The algorithms that run whole chunks on an accelerator with their options (their
    :attr:`~jetastar.clustering.AlgorithmInfo.device_batch`: the exact trellis with ``log_z``
    on a GPU, many jets per launch) on the whole chunk.

    Jets that are invalid, refused by a size or time limit, or that the batch cannot take (a
    :class:`~jetastar.TooLargeError`) are left to :func:`run_one`; the others get their rows here.
    """
    if not len(collection):
        return
    valid = None
    for name in config.algorithms:
        batch = algorithm_info(name).device_batch
        if batch is None or not batch.takes(opts[name]):
            continue
        o = opts[name]
        if valid is None:
            # invalid jets (leaves or parameters, checked over the columns) and refused ones are
            # left to run_one, which reports them per jet
            kind = leaf_problems(collection.leaves, collection.leaf_offsets)[0]
            valid = (kind == LEAF_OK) & params_valid(collection)
        n_leaves = np.diff(collection.leaf_offsets)
        picked = [i for i in np.flatnonzero(valid).tolist()
                  if _refusal(int(n_leaves[i]), None, name, o, config) is None]
        if not picked:
            continue
        try:
            results = batch.run(collection.take(picked), o)
        except (TooLargeError, InvalidJetError):
            continue
        for i, res in zip(picked, results, strict=True):
            rows[name][i] = dataclasses.replace(res, options={**o, **res.options},
                                                jet_id=int(collection.jet_id[i]))


def _on_device(name: str, options: dict[str, Any]) -> bool:
    """Whether :func:`_cluster_on_gpu` takes algorithm ``name`` with ``options``."""
    batch = algorithm_info(name).device_batch
    return batch is not None and batch.takes(options)


def _cluster_columnar(
    collection: Any, config: BatchConfig, opts: dict[str, dict[str, Any]], n_workers: int,
    rows: dict[str, dict[int, ClusteringResult]],
) -> dict[str, ChunkResults]:
    """The columnar algorithms of ``config`` on the whole collection
    (:func:`~jetastar.clustering.chunks.cluster_columns`); jets refused by a size or time
    limit are not run (their ``"skipped"`` results go into ``rows``).

    Returns:
        name -> :class:`~jetastar.clustering.chunks.ChunkResults` (with the algorithm's
        seconds).
    """
    names = [name for name in config.algorithms
             if algorithm_info(name).chunk_options(opts[name]) is not None
             and not _on_device(name, opts[name])]
    n = len(collection)
    if not names or n < CHUNK_PATH_FROM:  # (a few jets: jet by jet, no chunk kernel to compile)
        return {}
    n_leaves = np.diff(collection.leaf_offsets)
    only = {}
    for name in names:
        run = np.ones(n, dtype=bool)
        for size in np.unique(n_leaves).tolist():
            if _refusal(size, None, name, opts[name], config) is None:
                continue
            for i in np.flatnonzero(n_leaves == size).tolist():
                run[i] = False
                rows[name][i] = _refusal(size, int(collection.jet_id[i]), name, opts[name],
                                         config)
        only[name] = run
    return cluster_columns(collection, {name: opts[name] for name in names}, only=only,
                           parallel=None if n_workers == 1 else False)


def _flat_table(
    name: str, chunk: ChunkResults, rows: dict[int, ClusteringResult], opts: dict[str, Any],
    index: np.ndarray, jet_id: np.ndarray, config: BatchConfig,
    exact_method: bool,
) -> AlgorithmResults:
    """An algorithm's table from the columnar path's arrays, with the rows that went another way
    (``rows``: position -> result) put in their places."""
    n = len(chunk)
    total = float(chunk.work.sum())
    seconds = chunk.seconds
    time_s = chunk.work * (seconds / total) if total > 0 else np.full(n, seconds / max(n, 1))
    done = chunk.outcome == DONE
    time_s = np.where(done, time_s, np.nan)
    message = chunk.message
    late = np.flatnonzero(done & (time_s > config.time_limit)) \
        if config.time_limit is not None else ()
    if len(late):
        message = message.copy()
        for i in late:
            note = _time_note(name, float(time_s[i]), config)
            if note:
                message[i] = f"{message[i]}; {note}" if message[i] else note
    table = AlgorithmResults(
        name, jet_index=index, jet_id=jet_id, log_likelihood=chunk.log_likelihood,
        exact=chunk.exact,
        log_z=np.full(n, np.nan) if chunk.log_z is None else chunk.log_z,
        upper_bound=chunk.upper_bound,
        n_trees=np.full(n, np.nan) if chunk.n_trees is None else np.where(
            chunk.outcome == DONE, chunk.n_trees, np.nan),
        time_s=time_s,
        status=np.where(done, chunk.status, "failed"),  # the other rows are replaced below
        message=message,
        options=_options_column(chunk, opts),
        node_offsets=chunk.node_offsets, children=chunk.children,
        leaf_of_node=chunk.leaf_of_node, counters=chunk.counters,
        likelihood=chunk.likelihood, exact_method=exact_method,
    )
    if not rows:
        return table
    where = np.array(sorted(rows), dtype=np.int64)
    others = AlgorithmResults.from_results(
        name, [rows[i] for i in where.tolist()], jet_index=index[where], jet_id=jet_id[where],
        likelihood=chunk.likelihood, exact_method=exact_method,
    )
    order = np.arange(n)
    order[where] = n + np.arange(where.shape[0])
    return AlgorithmResults.concatenate([table, others]).take(order)


def _options_column(chunk: ChunkResults, opts: dict[str, Any]) -> np.ndarray:
    """The options of each row as the per-jet path records them (``{**opts, **result.options}``),
    one JSON text per distinct set of row options (beam search: one per beam size)."""
    n = len(chunk)
    if not chunk.row_options:
        return text_column(n, to_json({**opts, **chunk.options}))
    out = np.empty(n, dtype=object)
    texts: dict[tuple[Any, ...], str] = {}
    keys = zip(*(v.tolist() for v in chunk.row_options.values()), strict=True)
    for i, key in enumerate(keys):
        text = texts.get(key)
        if text is None:
            text = texts[key] = to_json({**opts, **chunk.options_of(i)})
        out[i] = text
    return out


def _likelihood_of(rows: Sequence[Any], opts: dict[str, Any]) -> str:
    for r in rows:
        if r.status not in ("skipped", "failed"):
            return r.likelihood
    return str(opts.get("likelihood", "symmetric"))


def chunk_task(
    collection: Any, config: BatchConfig, first_index: int, source: str, n_workers: int
) -> tuple[int, dict[str, AlgorithmResults]]:
    """What a worker runs on one chunk (a top-level function, so executors can pickle it); a
    worker of the local pool reports each finished jet to the master.

    Returns:
        ``(first_index, tables)``: the chunk's start and :func:`cluster_collection`'s tables.
    """
    return first_index, cluster_collection(
        collection, config, first_index=first_index, source=source, n_workers=n_workers,
        on_jet=jet_reporter(source, first_index),
    )
