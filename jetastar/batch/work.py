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

from .._jit import Stopwatch
from ..clustering import ClusteringResult, algorithm_info, cluster
from ..clustering.estimates import estimate_seconds
from ..errors import InvalidJetError, TooLargeError
from ..jet import Jet, validate_leaves
from ..result_tables import AlgorithmResults
from .config import TIME_OPTIONS, BatchConfig, accepted_options, load_registry, options_for, size_limit
from .executors import jet_reporter, warm_up_here

__all__ = ["chunk_task", "cluster_collection", "run_one"]


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
        (any other error) result whose message says why.
    """
    limit = size_limit(name, config)
    if limit is not None and jet.n_leaves > limit:
        return ClusteringResult(
            None, -math.inf, name, options=opts, status="skipped", jet_id=jet.jet_id,
            message=f"{jet.n_leaves} leaves is over the size limit {limit} of {name!r}",
        )
    refused = _hopeless(jet, name, opts, config)
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
    stats = dict(res.stats)
    stats.setdefault("time_s", elapsed)
    res = dataclasses.replace(res, options={**opts, **res.options}, jet_id=jet.jet_id,
                              stats=stats)
    if config.time_limit is not None and elapsed > config.time_limit and not (
        set(accepted_options(name)) & set(TIME_OPTIONS)
    ):
        note = (f"took {elapsed:.3g} s, over the time limit of {config.time_limit:g} s "
                f"({name!r} has no time option, so it ran to completion)")
        res = dataclasses.replace(res, message=f"{res.message}; {note}" if res.message else note)
    return res


def _hopeless(jet: Any, name: str, opts: dict[str, Any],
              config: BatchConfig) -> ClusteringResult | None:
    """Under a time limit, a ``"skipped"`` result for an algorithm without a time option whose
    lower time estimate on this jet is over the limit (its kernel could not be stopped)."""
    if config.time_limit is None or set(accepted_options(name)) & set(TIME_OPTIONS):
        return None
    est = estimate_seconds(name, jet.n_leaves, opts)
    if est is None or not est > config.time_limit:
        return None
    return ClusteringResult(
        None, -math.inf, name, options=opts, status="skipped", jet_id=jet.jet_id,
        message=(f"not started: {name!r} is estimated at {est:.3g} s or more for "
                 f"{jet.n_leaves} leaves, over the time limit of {config.time_limit:g} s (it has "
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
    on_jet: Callable[[], None] | None = None,
) -> dict[str, AlgorithmResults]:
    """Cluster every jet of a collection with every algorithm of ``config`` (in this process).

    Args:
        collection: a :class:`~jetastar.JetCollection`.
        config: what to run.
        first_index: position of the collection's first jet in its file (for ``jet_index``).
        source: file name used in the messages of invalid jets.
        n_workers: how many such calls run at the same time (sets ``threads=1`` when > 1).
        on_jet: called after each jet (every algorithm done), e.g. to move a progress bar.

    Returns:
        algorithm name -> :class:`AlgorithmResults` with one row per jet.
    """
    load_registry(config.plugins)
    per_alg: dict[str, list[Any]] = {name: [] for name in config.algorithms}
    opts = {name: options_for(name, config, n_workers) for name in config.algorithms}
    if len(collection):
        warm_up_here(config, opts)
    for i in range(len(collection)):
        jet_id = int(collection.jet_id[i])
        try:
            jet = _jet_for_clustering(collection, i)
        except InvalidJetError as exc:
            entries = collection.jet_columns.get("entry")
            entry = int(entries[i]) if entries is not None else first_index + i
            where = f"{source}: entry {entry}: " if source else ""
            for name in config.algorithms:
                per_alg[name].append(ClusteringResult(
                    None, -math.inf, name, options=opts[name], status="failed",
                    message=f"{where}{exc}", jet_id=jet_id,
                ))
        else:
            for name in config.algorithms:
                per_alg[name].append(run_one(jet, name, opts[name], config))
        if on_jet is not None:
            on_jet()
    index = np.arange(first_index, first_index + len(collection))
    return {
        name: AlgorithmResults.from_results(
            name, rows, jet_index=index, jet_id=collection.jet_id,
            likelihood=_likelihood_of(rows, opts[name]),
            exact_method=algorithm_info(name).exact,
        )
        for name, rows in per_alg.items()
    }


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
