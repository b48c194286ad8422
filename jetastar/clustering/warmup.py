"""Warm-up: run algorithms once on small built-in jets, so that a process compiles (or loads from the
cache) their numba kernels before it times anything.

Batch runs (:mod:`jetastar.batch`) warm every algorithm once per process before its first jet,
and spread the warm-up of a cold start over the worker processes (each kernel is compiled once, on
all cores, instead of once per worker). The jets are two QCD Ginkgo jets (reference parameters, 7
and 18 leaves; the larger one only for methods without a size limit below 18 leaves), written out
here so that warming up needs neither the generator nor a file.

Example:
    >>> from jetastar.clustering.warmup import warm_up
    >>> first = warm_up(["greedy"])  # ['greedy'], unless this process has warmed it up already
    >>> warm_up(["greedy"])
    []
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from ..ginkgo.heuristics import bound_value, heuristic_tables
from ..ginkgo.params import ShowerParams
from ..jet import Jet, JetCollection
from .columnar import OWN_CHUNK_KERNELS, cluster_columns, columnar_options
from .registry import algorithm_info, cluster

__all__ = ["compile_estimate", "warm_up", "warm_up_jets", "warm_up_order", "warm_up_tasks"]

# (E, px, py, pz) in GeV of QCD jets generated with seed 3 (t_cut 16 GeV² and 1 GeV²)
_SMALL = (
    (68.537213, 39.253799, 38.724276, 40.578171), (155.710239, 92.124138, 85.401607, 91.939215),
    (20.374564, 10.774015, 13.462588, 10.323792), (45.698045, 26.571772, 27.530678, 24.701181),
    (40.583224, 22.076189, 25.510707, 22.432602), (27.790262, 16.205141, 16.191098, 15.644615),
    (42.429876, 23.935053, 24.119153, 25.320532),
)
_LARGE = (
    (7.491703, 4.182752, 4.458348, 4.281769), (17.658007, 10.27694, 9.966276, 10.311796),
    (15.476428, 8.714437, 8.946895, 9.128042), (10.970111, 6.38466, 6.082627, 6.517428),
    (16.940964, 9.69501, 9.270129, 10.339136), (6.534095, 3.767971, 3.623441, 3.896282),
    (16.379956, 9.391558, 8.71974, 10.200818), (10.201686, 6.172187, 5.640293, 5.83196),
    (122.594501, 72.792422, 67.418133, 72.010156), (42.7761, 27.06838, 25.513306, 21.102286),
    (5.575006, 3.218085, 3.459115, 2.940265), (9.846764, 6.127655, 5.341695, 5.539314),
    (2.961869, 1.713555, 1.86615, 1.53321), (29.589575, 15.964721, 18.290458, 16.908586),
    (7.355857, 3.864326, 4.007187, 4.799892), (5.237847, 1.749963, 3.185533, 3.680136),
    (4.278342, 1.802383, 2.11424, 3.250047), (69.254611, 38.053104, 43.036541, 38.668986),
)
#: largest jet an exact method is warmed up on (exact methods on 18 leaves take seconds)
_EXACT_WARM_MAX = 7

#: warm-up order across worker processes: the longest chain of kernels first (approximate A*: the
#: A* search and its heuristics), then the methods whose kernels it reuses (beam search and greedy,
#: which another worker compiles while the first one compiles the heuristics, see
#: :func:`_warm_heuristics`), so that two workers rarely compile the same kernel at the same time
_FIRST = ("astar-approx", "beam", "greedy", "mcts", "trellis", "window-search")
_LAST = ("astar",)
#: algorithms sharing most of their kernels, warmed up by one task (one worker) so that two workers
#: never compile them at the same time (exact A* runs the same search machine as approximate A*)
_SHARED = (("astar-approx", "astar"),)
#: algorithms that compile A*'s heuristic kernel first (:func:`_warm_heuristics`)
_HEURISTIC_FIRST = ("astar-approx", "astar")

#: options replaced for the warm-up, where an algorithm accepts them
_WARM_OPTIONS: dict[str, Any] = {"progress": False, "max_time": 1e-3, "time_limit": 1e-3}

_warmed: set[tuple[str, str]] = set()

#: compile CPU seconds on a cold cache (2-core machine, measured 2026-11-27, one warm-up per
#: process with an empty cache): the kernels every algorithm needs (likelihood, tree scoring), then
#: each algorithm's own on top, in the order of :func:`warm_up_order`. Measured alone: greedy 21,
#: kt 20.5, beam 22.5, MCTS 24, the exact MAP (``trellis``) 15, the window search 26.5,
#: approximate A* 36 and exact A* 26 CPU-s; greedy and kt together 22; greedy, beam, kt, MCTS,
#: trellis and the window search together 66. The window search's entry counts only what it does
#: not share with beam search and the exact MAP (alone it is ~21 s on top of the base); exact A*
#: is cheap after approximate A*, and costs the whole of approximate A*'s without it
_COMPILE_BASE_S = 5.0
_COMPILE_OWN_S = {
    "astar-approx": 31.0, "beam": 17.5, "greedy": 1.0, "kt": 1.0, "cambridge": 0.0,
    "antikt": 0.0, "mcts": 19.0, "trellis": 10.0, "window-search": 12.0, "astar": 1.5,
}
_COMPILE_OTHER_S = 3.0
#: the columnar path's shared chunk kernel (``cluster_chunk``: greedy and the kt family), serial
#: and parallel, with the per-jet kernels it calls (beam search, MCTS and the exact MAP have chunk
#: kernels of their own, counted in their entries above)
_COMPILE_COLUMNAR_S = 14.0


def compile_estimate(names: Iterable[str], workers: int = 1) -> float:
    """Roughly how many seconds (wall) compiling the kernels of ``names`` takes on a cold cache.

    Args:
        names: algorithm names (unknown ones, e.g. plugins, count a few seconds each).
        workers: processes that compile in parallel (one warm-up task each).

    Returns:
        Seconds; the compile notice shows it as a range.

    Example:
        >>> compile_estimate(["greedy"]) < compile_estimate(["greedy", "astar-approx"])
        True
    """
    names = list(names)
    own = [_COMPILE_OWN_S.get(name, _COMPILE_OTHER_S) for name in names]
    if any(columnar_options(name, {}) is not None and name not in OWN_CHUNK_KERNELS
           for name in names):
        own.append(_COMPILE_COLUMNAR_S)
    if "astar" in names and "astar-approx" not in names:
        own[names.index("astar")] = _COMPILE_OWN_S["astar-approx"]
    tasks = max(1, min(int(workers), len(warm_up_tasks(names))))
    # the longest task bounds the wall time from below
    return max(_COMPILE_BASE_S + max(own, default=0.0),
               (_COMPILE_BASE_S * tasks + sum(own)) / tasks)


def warm_up_jets() -> list[Any]:
    """The two warm-up jets (7 and 18 leaves)."""
    return [
        Jet(_SMALL, ShowerParams.qcd(), jet_id=-1, jet_type="QCD"),
        Jet(_LARGE, ShowerParams.qcd(t_cut=1.0), jet_id=-2, jet_type="QCD"),
    ]


def warm_up_order(names: Iterable[str]) -> list[str]:
    """``names`` in the order in which workers should warm them up (see ``_FIRST`` / ``_LAST``).

    Example:
        >>> warm_up_order(["astar", "beam", "kt", "astar-approx"])
        ['astar-approx', 'beam', 'kt', 'astar']
    """
    names = list(names)

    def rank(name: str) -> tuple[int, int]:
        if name in _FIRST:
            return 0, _FIRST.index(name)
        if name in _LAST:
            return 2, _LAST.index(name)
        return 1, names.index(name)

    return sorted(names, key=rank)


def warm_up_tasks(names: Iterable[str]) -> list[list[str]]:
    """``names`` grouped into warm-up tasks (one task runs in one worker), in the order of
    :func:`warm_up_order`; algorithms sharing their kernels (``_SHARED``) form one task.

    Example:
        >>> warm_up_tasks(["astar", "beam", "kt", "astar-approx"])
        [['astar-approx', 'astar'], ['beam'], ['kt']]
    """
    tasks: list[list[str]] = []
    where: dict[tuple[str, ...], int] = {}
    for name in warm_up_order(names):
        group = next((g for g in _SHARED if name in g), None)
        if group is not None and group in where:
            tasks[where[group]].append(name)
            continue
        if group is not None:
            where[group] = len(tasks)
        tasks.append([name])
    return tasks


def _warm_heuristics() -> None:
    """Compile (or load) A*'s heuristic kernel, with the argument types the search passes
    (:func:`jetastar.clustering._astar_kernels.new_vertex`), before anything else of A*.

    It is a quarter of A*'s compile time and what the search needs first, while approximate A*
    first runs a beam search and greedy: in a batch run another worker compiles those meanwhile
    (``_FIRST``), and this one loads them from the cache.
    """
    key = ("kernels", "heuristics")
    if key in _warmed:
        return
    _warmed.add(key)
    jet = warm_up_jets()[1]
    p, tl, mt, w, d, consts, phys = heuristic_tables(jet)
    idx = np.arange(jet.n_leaves, dtype=np.int64)
    bound_value(0, idx, idx.size, float(w[0, 1]), p, tl, mt, w, d, consts[0], phys)


def _key(options: Mapping[str, Any]) -> str:
    return repr(sorted((k, repr(v)) for k, v in options.items()))


def warm_up(
    names: Iterable[str], options: Mapping[str, Mapping[str, Any]] | None = None,
    max_leaves: Mapping[str, int | None] | None = None,
) -> list[str]:
    """Run each algorithm on the warm-up jets, once per process and set of options.

    Errors are ignored here (the real run records them per jet). Every option is passed as given
    (options can select other kernels) except the progress bar (off) and the time budget
    (:data:`_WARM_OPTIONS`: searches stop right after their kernels have run once; compiling does
    not count against a budget).

    Args:
        names: registry names.
        options: per name, the keyword options of the real run.
        max_leaves: per name, the size limit of the real run (jets above it are not used).

    Returns:
        The names that were warmed up by this call (not already warm in this process).
    """
    done = []
    jets = None
    for name in names:
        info = algorithm_info(name)
        accepted = set(info.options())
        opts = dict((options or {}).get(name) or {})
        for option, value in _WARM_OPTIONS.items():
            if option in accepted:
                opts[option] = value
        key = (name, _key(opts))
        if key in _warmed:
            continue
        _warmed.add(key)
        if name in _HEURISTIC_FIRST:
            _warm_heuristics()
        limit = (max_leaves or {}).get(name, info.max_leaves if info.exact else None)
        if info.exact:
            limit = _EXACT_WARM_MAX if limit is None else min(limit, _EXACT_WARM_MAX)
        jets = warm_up_jets() if jets is None else jets
        for jet in jets:
            if limit is not None and jet.n_leaves > limit:
                continue
            try:
                cluster(jet, name, **opts)
            except Exception:  # the real run records it, per jet
                break
        flat = columnar_options(name, opts)
        if flat is not None:
            _warm_columnar(jets, name, flat)
        done.append(name)
    return done


def _warm_columnar(jets: list[Any], name: str, options: dict[str, Any]) -> None:
    """Compile (or load) the columnar path's chunk kernels, serial and parallel, once per process
    (every algorithm of the path and every option runs the same two kernels; the exact MAP
    engine, the full trellis (``log_z``), beam search and MCTS have two of their own)."""
    kernel = "columnar-trellis" if name == "trellis" and options.get("log_z") else {
        "trellis": "columnar-map", "window-search": "columnar-map", "beam": "columnar-beam",
        "mcts": "columnar-mcts"}.get(name, "columnar")
    key = ("kernels", kernel)
    if key in _warmed:
        return
    _warmed.add(key)
    collection = JetCollection.from_jets(jets)
    for parallel in (False, True):
        cluster_columns(collection, {name: options}, parallel=parallel)
