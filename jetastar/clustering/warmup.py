"""Warm-up: run algorithms once on small built-in jets, so that a process compiles (or loads from the
cache) their numba kernels before it times anything.

Batch runs (:mod:`jetastar.batch`) warm every algorithm once per process before its first jet,
and spread the warm-up of a cold start over the worker processes (each kernel is compiled once, on
all cores, instead of once per worker). What an algorithm compiles, how long that takes and in
which order the workers take it is declared with the algorithm (:class:`~.registry.WarmUp`). The
jets are two QCD Ginkgo jets (reference parameters, 7 and 18 leaves; the larger one only for
methods without a size limit below 18 leaves), written out here so that warming up needs neither
the generator nor a file.

Example:
    >>> from jetastar.clustering.warmup import warm_up
    >>> first = warm_up(["greedy"])  # ['greedy'], unless this process has warmed it up already
    >>> warm_up(["greedy"])
    []
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..ginkgo.params import ShowerParams
from ..jet import Jet, JetCollection
from .chunks import CHUNK_PATH_FROM, cluster_columns
from .registry import AlgorithmInfo, WarmUp, algorithm_info, cluster

__all__ = [
    "compile_estimate",
    "warm_up",
    "warm_up_jets",
    "warm_up_order",
    "warm_up_sizes",
    "warm_up_tasks",
]

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

#: options replaced for the warm-up, where an algorithm accepts them
_WARM_OPTIONS: dict[str, Any] = {"progress": False, "max_time": 1e-3, "time_limit": 1e-3}
#: the time budget on the smallest warm-up jet instead (seconds; every algorithm finishes a
#: 7-leaf jet in milliseconds): it takes the path the run's jets of its size take, e.g. the
#: window search's proof by the exact MAP, which a budget of 1 ms stops (the search's window
#: kernels then compiled although no jet of the run below 18 leaves calls them)
_SMALL_JET_BUDGET_S = 0.1

_warmed: set[tuple[Any, ...]] = set()

#: compile CPU seconds on a cold cache (2-core machine, measured 2026-11-27) of the kernels every
#: algorithm needs (likelihood, tree scoring); each algorithm declares its own on top
#: (:class:`~.registry.WarmUp`), and each chunk path its shared kernel's
#: (:attr:`~.chunks.ChunkPath.compile_s`)
_COMPILE_BASE_S = 5.0
#: what an algorithm the registry does not know (a plugin not loaded here) counts
_COMPILE_UNKNOWN_S = WarmUp().compile_s


def _info(name: str) -> AlgorithmInfo | None:
    try:
        return algorithm_info(name)
    except (ValueError, TypeError):
        return None


def compile_estimate(names: Iterable[str], workers: int = 1, *,
                     chunk_jets: int | None = None, largest_jet: int | None = None) -> float:
    """Roughly how many seconds (wall) compiling the kernels of ``names`` takes on a cold cache.

    Args:
        names: algorithm names (unknown ones, e.g. plugins, count a few seconds each).
        workers: processes that compile in parallel (one warm-up task each).
        chunk_jets: the run's jets per chunk (``None``: chosen by the run, large enough for the
            chunk kernels); below :data:`~.chunks.CHUNK_PATH_FROM` no chunk kernel is compiled.
        largest_jet: leaves of the run's largest jet, when known (:func:`warm_up_sizes`: what
            only larger jets compile, :attr:`~.registry.WarmUp.large_jet_s`, is left out).

    Returns:
        Seconds; the compile notice shows it as a range.

    Example:
        >>> compile_estimate(["greedy"]) < compile_estimate(["greedy", "astar-approx"])
        True
    """
    names = list(names)
    infos = [_info(name) for name in names]
    groups = [info.warm_up.group for info in infos if info is not None]
    own = []
    kernels: dict[str, float] = {}
    small = len(warm_up_sizes(largest_jet)) == 1
    for info in infos:
        if info is None:
            own.append(_COMPILE_UNKNOWN_S)
            continue
        warm = info.warm_up
        alone = warm.alone_s is not None and groups.count(warm.group) == 1
        own.append((warm.alone_s if alone else warm.compile_s)
                   - (warm.large_jet_s if small else 0.0))
        flat = info.chunk_options({})
        if flat is not None and _chunks_used(chunk_jets):
            kernels[info.chunk.kernel(flat)] = info.chunk.compile_s
    own.extend(s for s in kernels.values() if s)
    tasks = max(1, min(int(workers), len(warm_up_tasks(names))))
    # the longest task bounds the wall time from below
    return max(_COMPILE_BASE_S + max(own, default=0.0),
               (_COMPILE_BASE_S * tasks + sum(own)) / tasks)


def warm_up_jets(largest_jet: int | None = None) -> list[Any]:
    """The warm-up jets: 7 and 18 leaves, or only the 7-leaf one for a run whose jets have fewer
    than 18 leaves (see :func:`warm_up_sizes`).

    Args:
        largest_jet: leaves of the run's largest jet (``None``: unknown, both jets).
    """
    jets = [
        Jet(_SMALL, ShowerParams.qcd(), jet_id=-1, jet_type="QCD"),
        Jet(_LARGE, ShowerParams.qcd(t_cut=1.0), jet_id=-2, jet_type="QCD"),
    ]
    return jets[:len(warm_up_sizes(largest_jet))]


def warm_up_sizes(largest_jet: int | None = None) -> tuple[int, ...]:
    """The leaf counts of the warm-up jets a run whose largest jet has ``largest_jet`` leaves is
    warmed up on (``None``: unknown, all of them). A larger warm-up jet only compiles kernels that
    such a run never calls (the window search's windows: below 18 leaves it proves the MAP with
    the exact MAP; about 9 of the ~50 CPU-s a cold ``jetastar run`` compiled); the smallest one is
    always used.

    Example:
        >>> warm_up_sizes(16), warm_up_sizes(None), warm_up_sizes(40)
        ((7,), (7, 18), (7, 18))
    """
    sizes = (len(_SMALL), len(_LARGE))
    if largest_jet is None:
        return sizes
    return sizes[:1] + tuple(size for size in sizes[1:] if size <= largest_jet)


def warm_up_order(names: Iterable[str]) -> list[str]:
    """``names`` in the order in which workers should warm them up (each algorithm's
    :attr:`~.registry.WarmUp.order`, smallest first; equal orders keep the given order).

    Example:
        >>> warm_up_order(["astar", "beam", "kt", "astar-approx"])
        ['astar-approx', 'beam', 'kt', 'astar']
    """
    names = list(names)

    def rank(name: str) -> tuple[float, int]:
        info = _info(name)
        return (WarmUp().order if info is None else info.warm_up.order), names.index(name)

    return sorted(names, key=rank)


def warm_up_tasks(names: Iterable[str]) -> list[list[str]]:
    """``names`` grouped into warm-up tasks (one task runs in one worker), in the order of
    :func:`warm_up_order`; algorithms sharing their kernels (the same
    :attr:`~.registry.WarmUp.group`) form one task.

    Example:
        >>> warm_up_tasks(["astar", "beam", "kt", "astar-approx"])
        [['astar-approx', 'astar'], ['beam'], ['kt']]
    """
    tasks: list[list[str]] = []
    where: dict[str, int] = {}
    for name in warm_up_order(names):
        info = _info(name)
        group = None if info is None else info.warm_up.group
        if group is not None and group in where:
            tasks[where[group]].append(name)
            continue
        if group is not None:
            where[group] = len(tasks)
        tasks.append([name])
    return tasks


def _key(options: Mapping[str, Any]) -> str:
    return repr(sorted((k, repr(v)) for k, v in options.items()))


def _chunks_used(chunk_jets: int | None) -> bool:
    """Whether chunks of ``chunk_jets`` jets go through the chunk kernels."""
    return chunk_jets is None or chunk_jets >= CHUNK_PATH_FROM


def warm_up(
    names: Iterable[str], options: Mapping[str, Mapping[str, Any]] | None = None,
    max_leaves: Mapping[str, int | None] | None = None, *, chunk_jets: int | None = None,
    threads: bool = True, largest_jet: int | None = None,
) -> list[str]:
    """Run each algorithm on the warm-up jets, once per process, set of options and jet.

    Errors are ignored here (the real run records them per jet). Every option is passed as given
    (options can select other kernels) except the progress bar (off) and the time budget
    (:data:`_WARM_OPTIONS`: searches stop right after their kernels have run once; compiling does
    not count against a budget; on the 7-leaf jet :data:`_SMALL_JET_BUDGET_S`, which they finish
    well within).

    Args:
        names: registry names.
        options: per name, the keyword options of the real run.
        max_leaves: per name, the size limit of the real run (jets above it are not used).
        chunk_jets: jets per chunk of the real run (``None``: any number): the chunk kernels are
            compiled only where chunks take them (:data:`~.chunks.CHUNK_PATH_FROM` jets), and
            their parallel variant only for chunks of at least the path's ``parallel_from``.
        threads: whether the run may use the parallel variant at all (one worker).
        largest_jet: leaves of the run's largest jet, when known: warm-up jets above it are not
            used (:func:`warm_up_sizes`; kernels that only larger jets call compile if and when
            a run meets one).

    Returns:
        The names that were warmed up by this call (not already warm in this process on these
        jets).
    """
    done = []
    jets = None
    for name in names:
        info = algorithm_info(name)
        accepted = set(info.options())
        given = dict((options or {}).get(name) or {})
        opts = dict(given)
        for option, value in _WARM_OPTIONS.items():
            if option in accepted:
                opts[option] = value
        flat = info.chunk_options(opts)
        if flat is not None and _chunks_used(chunk_jets):
            # (its own keys: a process warmed up for a few jets warms the chunk kernels later)
            jets = warm_up_jets(largest_jet) if jets is None else jets
            parallel = threads and (chunk_jets is None or chunk_jets >= info.chunk.parallel_from)
            _warm_columnar(jets, name, info.chunk.kernel(flat), flat, parallel)
        limit = (max_leaves or {}).get(name, info.max_leaves if info.exact else None)
        if info.exact:
            limit = _EXACT_WARM_MAX if limit is None else min(limit, _EXACT_WARM_MAX)
        # (per jet: a process warmed up on small jets for one run warms up on a larger one later)
        jets = warm_up_jets(largest_jet) if jets is None else jets
        todo = [jet for jet in jets if (limit is None or jet.n_leaves <= limit)
                and (name, _key(given), jet.n_leaves) not in _warmed]
        if not todo:
            continue
        prepare = info.warm_up.prepare
        if prepare is not None and ("prepare", prepare.__qualname__) not in _warmed:
            # (once per process, however many algorithms share it)
            _warmed.add(("prepare", prepare.__qualname__))
            prepare(jets)
        for jet in todo:
            _warmed.add((name, _key(given), jet.n_leaves))
            budget = {option: _SMALL_JET_BUDGET_S for option in ("max_time", "time_limit")
                      if option in accepted and jet.n_leaves == len(_SMALL)}
            try:
                cluster(jet, name, **{**opts, **budget})
            except Exception:  # the real run records it, per jet
                break
        done.append(name)
    return done


def _warm_columnar(jets: list[Any], name: str, kernel: str, options: dict[str, Any],
                   parallel: bool = True) -> None:
    """Compile (or load) the chunk kernels of the columnar path that ``name`` runs with
    ``options`` (their warm-up key ``kernel``): the serial one, and with ``parallel`` the
    parallel one, each once per process."""
    collection = JetCollection.from_jets(jets)
    for variant in (False, True) if parallel else (False,):
        key = ("kernels", kernel, variant)
        if key in _warmed:
            continue
        _warmed.add(key)
        cluster_columns(collection, {name: options}, parallel=variant)
