"""Cluster jets held in memory with many algorithms — the batch engine without files.

:func:`cluster_jets` takes a :class:`~jetastar.JetCollection`, a list of jets or an awkward array of
jets and runs every requested algorithm on every jet with the engine ``jetastar cluster`` uses
(:func:`jetastar.batch.cluster_collection` on chunks of jets, in this process or on a pool of
worker processes or any :class:`concurrent.futures.Executor`, with the same options, time limits,
size limits and per-jet statuses). The result, :class:`JetResults`, maps algorithm names to
:class:`~jetastar.io.AlgorithmResults` tables and turns into awkward arrays, observables, a status
summary or a results file.

Example:
    >>> from jetastar.ginkgo import ShowerParams, generate
    >>> from jetastar.inmemory import cluster_jets
    >>> res = cluster_jets(generate(10, ShowerParams.qcd(), seed=1), ["greedy", "kt"],
    ...                    progress=False)
    >>> arr = res.to_awkward()
    >>> len(arr), sorted(arr.fields)
    (10, ['greedy', 'jet_id', 'kt'])
    >>> res.summary()["kt"]["ran"]
    10
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import os
import queue
import sys
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures.process import BrokenProcessPool
from typing import Any

import numpy as np

from . import clustering, io
from ._jit import one_notice_for_workers
from ._progress import progress_bar
from .batch import (
    BatchConfig,
    check_config,
    cluster_collection,
    make_executor,
    shutdown_executor,
    warm_up_workers,
)
from .batch.work import in_process_chunk_size
from .clustering.registry import checked_options, holds_many_jets
from .clustering.result import ClusteringResult
from .comparison import table_counts
from .diagnostics import result_reasons
from .io import AlgorithmResults
from .observables import tree_observables
from .result_tables import TableAssembler, load_pandas
from .tree_arrays import as_collection

__all__ = ["JetResults", "cluster", "cluster_jets"]


class JetResults(Mapping[str, Any]):
    """Clustering results of a collection held in memory: algorithm name -> results table.

    Attributes:
        jets: the :class:`~jetastar.JetCollection` that was clustered (row ``i`` of every table is
            jet ``i``).
    """

    def __init__(self, jets: Any, tables: dict[str, Any]) -> None:
        self.jets = jets
        self._tables = dict(tables)

    def __getitem__(self, name: str) -> Any:
        try:
            return self._tables[name]
        except KeyError:
            raise KeyError(f"no results for {name!r}; have {', '.join(self._tables)}") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._tables)

    def __len__(self) -> int:
        return len(self._tables)

    def __repr__(self) -> str:
        return f"JetResults({len(self.jets)} jets; {', '.join(self._tables)})"

    def to_awkward(self) -> Any:
        """One record per jet: ``jet_id`` and, per algorithm, the record of
        :meth:`jetastar.io.AlgorithmResults.to_awkward` (status, log-likelihood, finite, tree, ...).
        """
        import awkward as ak

        fields: dict[str, Any] = {"jet_id": np.asarray(self.jets.jet_id)}
        for name, table in self._tables.items():
            fields[name] = table.to_awkward()
        return ak.zip(fields, depth_limit=1)

    def to_pandas(self) -> Any:
        """One row per jet as a ``pandas.DataFrame`` with a column level per algorithm
        (``df["greedy", "log_likelihood"]``; :meth:`jetastar.io.AlgorithmResults.to_pandas`'s
        columns) and the ``jet_id``. Needs pandas (``pip install "jetastar[pandas]"``)."""
        pd = load_pandas()
        frames = {name: table.to_pandas().drop(columns=["jet_index", "jet_id"])
                  for name, table in self._tables.items()}
        out = pd.concat(frames, axis=1) if frames else pd.DataFrame()
        out.insert(0, ("jet_id", ""), np.asarray(self.jets.jet_id))
        return out

    def summary(self) -> dict[str, dict[str, int]]:
        """Per algorithm: ``jets``, ``ran`` (with a tree), ``finite``, ``minus_inf``, ``skipped``,
        ``failed``, ``budget``, ``proven`` and ``window_optimal``
        (:func:`jetastar.comparison.status_counts`)."""
        return {name: table_counts(t) for name, t in self._tables.items()}

    def observables(self, algorithm: str, **kw: Any) -> Any:
        """:func:`jetastar.observables.tree_observables` of one algorithm's trees."""
        return tree_observables(self.jets, self[algorithm], **kw)

    def reasons(self, algorithm: str) -> tuple[np.ndarray, np.ndarray]:
        """``(finite, reason)`` per jet: :func:`jetastar.diagnostics.result_reasons`."""
        return result_reasons(self.jets, self[algorithm])

    def write(self, path: str | os.PathLike[str], **kw: Any) -> None:
        """Write jets and results to a file (:func:`jetastar.io.write`; ``.h5`` or ``.root``)."""
        io.write(path, self.jets, self._tables, **kw)


def cluster_jets(
    jets: Any,
    algorithms: str | Sequence[str],
    *,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    time_limit: float | None = None,
    max_leaves: Mapping[str, int] | None = None,
    workers: int = 1,
    executor: cf.Executor | None = None,
    chunk_size: int = 50,
    progress: bool = True,
    plugins: Sequence[str] = (),
) -> JetResults:
    """Cluster every jet with every algorithm, in memory (the engine of ``jetastar cluster``).

    Args:
        jets: a :class:`~jetastar.JetCollection`, a list of :class:`~jetastar.Jet`, or an awkward
            array of jets (``n_jets * var * momentum`` in any coordinates, or records with a
            ``leaves`` field); awkward particles get the default Ginkgo parameters and the mass policy
            of :meth:`JetCollection.from_momenta <jetastar.JetCollection.from_momenta>`.
        algorithms: registry names (a comma-separated string works too).
        options: per algorithm name, keyword options; the key ``"*"`` for every algorithm that
            accepts them (as :class:`jetastar.batch.BatchConfig`).
        time_limit: seconds per jet and algorithm (passed as ``max_time`` where accepted).
        max_leaves: per algorithm, skip jets above this size (exact methods have defaults).
        workers: processes (1 = this process).
        executor: any :class:`concurrent.futures.Executor` instead (e.g. a Dask client's).
        chunk_size: jets per task.
        progress: a progress bar over jets (per finished chunk).
        plugins: modules that register extra algorithms (imported in every worker).

    Returns:
        A :class:`JetResults`: ``results["greedy"]`` is an :class:`~jetastar.io.AlgorithmResults`
        with row ``i`` for jet ``i``; per jet statuses as in :mod:`jetastar.batch` (a bad jet is
        ``"failed"`` with a message naming it, never an exception).

    Raises:
        BatchError: unknown algorithm or option, bad settings.

    Example:
        >>> import jetastar
        >>> from jetastar.ginkgo import ShowerParams, generate
        >>> jets = generate(4, ShowerParams.qcd(), seed=1)
        >>> res = jetastar.cluster_jets(jets, ["greedy", "kt"], progress=False)
        >>> len(res["greedy"]), res["kt"].algorithm
        (4, 'kt')
    """
    if isinstance(algorithms, str):
        algorithms = [a.strip() for a in algorithms.split(",") if a.strip()]
    config = BatchConfig(
        algorithms=list(algorithms),
        options={k: dict(v) for k, v in (options or {}).items()},
        time_limit=time_limit, max_leaves=dict(max_leaves or {}), plugins=list(plugins),
        chunk_size=int(chunk_size),
    )
    check_config(config)
    collection, _ = as_collection(jets)
    n = len(collection)
    # columnar path (issue 33): in this process, larger chunks (one kernel call each)
    step = config.chunk_size if workers > 1 or executor is not None else \
        in_process_chunk_size(config)
    chunks = [(a, min(n, a + step)) for a in range(0, n, step)]
    # each chunk's tables are copied into place as they come (no second copy of every result)
    tables = {name: TableAssembler(name, np.diff(collection.leaf_offsets))
              for name in config.algorithms} if len(chunks) > 1 else {}
    pieces: dict[tuple[int, int], dict[str, Any]] = {}

    def keep(a: int, b: int, chunk_tables: dict[str, Any]) -> None:
        if not tables:
            pieces[(a, b)] = chunk_tables
            return
        for name in config.algorithms:
            tables[name].put(a, chunk_tables[name])
    # columnar path (issue 33): no token folder for a run without workers (a fixed cost per call)
    in_process = executor is None and (workers <= 1 or len(chunks) <= 1)
    with contextlib.nullcontext() if in_process else one_notice_for_workers():
        own = None
        if executor is None and workers > 1 and len(chunks) > 1:
            own, _ = make_executor(workers, None, config.plugins)
            executor = own
        n_workers = 1 if executor is None else max(2, workers)
        interrupted = False
        try:
            with progress_bar(total=n, unit="jet", desc="clustering", show=progress) as bar:
                if executor is None:
                    for a, b in chunks:
                        chunk = collection if (a, b) == (0, n) else collection.take(
                            np.arange(a, b))  # (issue 33: no copy of a whole collection)
                        keep(a, b, cluster_collection(chunk, config, first_index=a,
                                                      on_jet=bar.update))
                else:
                    largest = int(collection.n_leaves.max()) if n else None
                    for fut in warm_up_workers(executor, config, n_workers, largest_jet=largest):
                        try:
                            fut.result()
                        except Exception:  # the chunks report what fails
                            pass
                    # finished futures come through a queue, not cf.as_completed, which holds
                    # every future (and so every chunk's tables) to the end
                    finished: queue.SimpleQueue[cf.Future[Any]] = queue.SimpleQueue()
                    futures = {}
                    for a, b in chunks:
                        fut = executor.submit(cluster_collection,
                                              collection.take(np.arange(a, b)), config,
                                              first_index=a, n_workers=n_workers)
                        futures[fut] = (a, b)
                        fut.add_done_callback(finished.put)
                    try:
                        while futures:
                            fut = finished.get()
                            a, b = futures.pop(fut)
                            keep(a, b, fut.result())
                            bar.update(b - a)
                            del fut
                    finally:
                        for fut in futures:
                            fut.cancel()
        except BrokenProcessPool as exc:
            interrupted = True
            raise RuntimeError(_worker_death_advice()) from exc
        except BaseException:
            interrupted = True
            raise
        finally:
            if own is not None:
                shutdown_executor(own, interrupted=interrupted)
    if tables:
        return JetResults(collection, {name: t.finish() for name, t in tables.items()})
    return JetResults(collection, {  # one chunk (no copy) or none
        name: pieces[chunks[0]][name] if chunks
        else AlgorithmResults.from_results(name, [], jet_index=[])
        for name in config.algorithms})


def _worker_death_advice() -> str:
    """Why a pool's workers can die at once, for the way this script was started."""
    main = getattr(sys.modules.get("__main__"), "__file__", None)
    if main is not None and not os.path.exists(main):
        # `python - < script.py`: spawned workers import the main module from its path
        return (f"a worker process died before it could cluster anything: the main script came "
                f"from {main} (standard input, as with `python - < script.py`), which worker "
                "processes cannot import. Run it from a file (python script.py) or use workers=1")
    return ("a worker process died before it could cluster anything. Worker processes import "
            "the main script: in a script, call cluster_jets(..., workers=...) under "
            "`if __name__ == \"__main__\":` (or use workers=1)")


def cluster(jets: Any, algorithm: str, **options: Any) -> ClusteringResult | AlgorithmResults:
    """One algorithm on one jet or on many jets.

    One jet (a :class:`~jetastar.Jet`, or one jet's momenta: an ``(n, 4)`` array or a 1-D awkward /
    vector array) goes to :func:`jetastar.clustering.cluster` and gives a
    :class:`~jetastar.clustering.ClusteringResult`. Many jets (a :class:`~jetastar.JetCollection`,
    a list of jets or of per-jet ``(n_i, 4)`` arrays, or an awkward array of jets) are clustered
    with :func:`cluster_jets` in this
    process (use that function for workers, time limits and several algorithms) and give the
    algorithm's :class:`~jetastar.io.AlgorithmResults` table (``.results()``, ``.to_awkward()``).

    Args:
        jets: one jet or many.
        algorithm: a registry name (``jetastar algorithms`` lists them: ``greedy``, ``beam``,
            ``kt``, ``cambridge``, ``antikt``, ``mcts``, ``trellis``, ``astar``,
            ``astar-approx``, ``window-search``, and any a plugin registers).
        **options: the algorithm's keyword options, checked against its declaration: e.g.
            ``likelihood="legacy"`` (every Ginkgo algorithm), ``beam_size=20`` (``beam``),
            ``R=0.4`` (the kt family), ``max_time=5.0`` (the exact and search methods),
            ``log_z=True`` (``trellis``). Every algorithm's options with their defaults, ranges
            and meaning: the *Algorithm options* page of the documentation, or
            ``jetastar algorithms NAME``.

    Returns:
        For one jet a :class:`~jetastar.clustering.ClusteringResult` (``tree``,
        ``log_likelihood``, ``status``, ...); for many an
        :class:`~jetastar.io.AlgorithmResults` table, one row per jet (``.result(i)``,
        ``.to_awkward()``, ``.to_pandas()``).

    Raises:
        ValueError: an unknown algorithm or option, or a bad option value.
        TypeError: ``algorithm`` is not one name (several algorithms: :func:`cluster_jets`).

    Example:
        >>> from jetastar.ginkgo import ShowerParams, generate
        >>> jets = generate(3, ShowerParams.qcd(), seed=1)
        >>> len(cluster(jets, "kt")), cluster(jets[0], "kt").algorithm
        (3, 'kt')
    """
    if not isinstance(algorithm, str):
        several = isinstance(algorithm, (list, tuple, set, frozenset))
        raise TypeError(
            f"jetastar.cluster runs one algorithm, given by its name; got {algorithm!r}"
            + (f" (several algorithms: jetastar.cluster_jets(jets, {[str(a) for a in algorithm]!r}))"
               if several else "")
        )
    if holds_many_jets(jets):
        options = checked_options(algorithm, options)  # bad options fail before any jet runs
        return cluster_jets(jets, [algorithm], options={algorithm: options}, progress=False)[
            algorithm]
    return clustering.cluster(jets, algorithm, **options)
