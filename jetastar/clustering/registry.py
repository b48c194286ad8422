"""Run clustering algorithms by name.

Every algorithm declares itself once, next to its code, as an :class:`AlgorithmInfo` (names and
aliases, exactness, options, the per-jet function, its chunk path, cost estimates, warm-up) and
registers it with :func:`register`; the rest of the package (batch processing, the columnar
driver, warm-up, the command line, the docs) asks the registry for these objects instead of
knowing algorithms by name. Callers use :func:`cluster` and :func:`algorithms`.

Example:
    >>> from jetastar.clustering import algorithms
    >>> "greedy" in algorithms()
    True
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from .._columnar import is_list_of_jet_arrays
from .._jit import DeferredSignals
from ..jet import Jet, JetCollection
from .options import Option, options_from_signature, unknown_options_message, validate_options
from .result import ClusteringResult

__all__ = [
    "ALIASES",
    "FAMILIES",
    "MAIN_JOB",
    "AlgorithmInfo",
    "WarmUp",
    "algorithm_info",
    "algorithms",
    "canonical_name",
    "checked_options",
    "cluster",
    "holds_many_jets",
    "register",
    "unknown_options_message",
]

#: Other names of registered algorithms (the Python functions' names and older result labels) ->
#: registry key; each algorithm declares its own (:attr:`AlgorithmInfo.aliases`).
ALIASES: dict[str, str] = {}

#: The families of :mod:`jetastar.clustering` (its sub-packages) an algorithm can belong to, and
#: ``"plugin"`` for algorithms registered from elsewhere.
FAMILIES = ("exact", "search", "agglomerative", "plugin")

#: What ``jetastar run`` (the main job) does with an algorithm: ``"on"``, run it; ``"off"``, leave
#: it out unless asked for (its kernels take longer to compile than the rest of the run);
#: ``"map"``, the exact MAP method that every jet gets, with a long time limit.
MAIN_JOB = ("on", "off", "map")


@dataclasses.dataclass(frozen=True)
class WarmUp:
    """What warming an algorithm up compiles, and how a batch run orders it among its workers.

    Args:
        compile_s: compile CPU seconds of its own kernels on a cold cache (2-core machine; the
            kernels every algorithm needs, and a chunk path's shared kernel, are counted apart).
        alone_s: the same when no other algorithm of its ``group`` is warmed up too (``None``:
            ``compile_s``).
        order: warm-up order across worker processes, smallest first (the longest chains of
            kernels first, so that two workers rarely compile the same kernel at once); algorithms
            of equal order keep the order they were given in.
        group: algorithms sharing most of their kernels have the same group and are warmed up by
            one task (one worker), never by two workers at the same time.
        prepare: called once per process before the algorithm first runs (a kernel that it
            needs first and that others do not share, compiled while other workers compile the
            rest).
        large_jet_s: of ``compile_s`` (and ``alone_s``), what only jets of the larger warm-up
            size compile (:func:`~jetastar.clustering.warmup.warm_up_sizes`): a run whose jets
            are all smaller does not compile it.
    """

    compile_s: float = 3.0
    alone_s: float | None = None
    order: float = 1.0
    group: str | None = None
    prepare: Callable[[], None] | None = None
    large_jet_s: float = 0.0


@dataclasses.dataclass(frozen=True)
class AlgorithmInfo:
    """A registered algorithm: everything the rest of the package asks about it, declared once
    next to its code.

    Args:
        name: registry name.
        func: ``func(jet, **options) -> ClusteringResult``.
        exact: whether it returns proven MAP trees.
        max_leaves: default size limit of an exact method (jets above are skipped by batch
            runs), ``None`` = none.
        description: one line for listings.
        declared: its keyword options (:class:`~jetastar.clustering.options.Option`), in the
            order of ``func``'s signature; ``None`` (a plugin's): read from the signature.
        aliases: other names that map to ``name`` (:func:`canonical_name`).
        family: which sub-package of :mod:`jetastar.clustering` holds it (:data:`FAMILIES`).
        chunk: how it runs on whole chunks of jets
            (:class:`~jetastar.clustering.chunks.ChunkPath`), ``None`` = jet by jet only.
        estimate: ``estimate(n_leaves, options)``, a *lower* estimate of the seconds one jet
            takes (for an algorithm that cannot stop at a time budget, a batch run with a time
            limit does not start a jet whose estimate is over it), ``None`` = none.
        expected_cpu: ``expected_cpu(n_leaves, options)``, the *typical* CPU seconds of one jet
            (fitted to measurements; sizes the chunks of batch runs), ``None`` = none.
        cost_scales_with: options its CPU time is proportional to (the cost preview scales its
            measured cost at the defaults by the ratio to the default value).
        warm_up: what warming it up compiles (:class:`WarmUp`).
        device_batch: an object with ``takes(options) -> bool`` and ``run(collection, options)
            -> list[ClusteringResult]`` that runs whole chunks on an accelerator (the trellis on
            a GPU), ``None`` = none.
        main_job: what ``jetastar run`` does with it (:data:`MAIN_JOB`).
    """

    name: str
    func: Callable[..., ClusteringResult]
    exact: bool = False
    max_leaves: int | None = None
    description: str = ""
    declared: tuple[Option, ...] | None = None
    aliases: tuple[str, ...] = ()
    family: str = "plugin"
    chunk: Any = None
    estimate: Callable[[int, Mapping[str, Any]], float | None] | None = None
    expected_cpu: Callable[[int, Mapping[str, Any]], float | None] | None = None
    cost_scales_with: tuple[str, ...] = ()
    warm_up: WarmUp = WarmUp()
    device_batch: Any = None
    main_job: str = "on"

    def __post_init__(self) -> None:
        if self.declared is None:
            object.__setattr__(self, "declared", options_from_signature(self.func))
        if self.family not in FAMILIES:
            raise ValueError(f"algorithm {self.name!r}: unknown family {self.family!r}; valid: "
                             f"{FAMILIES}")
        if self.main_job not in MAIN_JOB:
            raise ValueError(f"algorithm {self.name!r}: unknown main_job {self.main_job!r}; "
                             f"valid: {MAIN_JOB}")

    def options(self) -> list[str]:
        """Names of the keyword options the algorithm accepts."""
        return [o.name for o in self.declared or ()]

    def option(self, name: str) -> Option:
        """The declaration of option ``name``.

        Raises:
            KeyError: an option it does not take.
        """
        for o in self.declared or ():
            if o.name == name:
                return o
        raise KeyError(f"{self.name!r} has no option {name!r}")

    def check_options(self, options: Mapping[str, Any], *, unknown: bool = True) -> dict[str, Any]:
        """``options`` converted to their declared types and checked
        (:func:`~jetastar.clustering.options.validate_options`).

        Args:
            options: keyword options.
            unknown: refuse names it does not take (``False``: pass them through).

        Raises:
            ValueError: an unknown option, a value of the wrong type or range.
        """
        return validate_options(self.name, self.declared or (), options, unknown=unknown)

    @property
    def time_option(self) -> str | None:
        """The option through which it stops itself at a time limit (``max_time`` or
        ``time_limit``), ``None`` when it has none."""
        names = self.options()
        return next((t for t in TIME_OPTIONS if t in names), None)

    def chunk_options(self, options: Mapping[str, Any]) -> dict[str, Any] | None:
        """What its chunk path runs with these options, or ``None`` when the jets go one by one
        (no chunk path, or options it does not take there)."""
        return None if self.chunk is None else self.chunk.options(options)


#: the options through which an algorithm stops itself at a time limit (the first it has gets it)
TIME_OPTIONS = ("max_time", "time_limit")

_REGISTRY: dict[str, AlgorithmInfo] = {}


def register(
    name: str | AlgorithmInfo, *, exact: bool = False, max_leaves: int | None = None,
    description: str = "", options: Sequence[Option] | None = None,
) -> Any:
    """Register an algorithm.

    ``register(info)`` registers an :class:`AlgorithmInfo` (how jetastar's own algorithms
    declare themselves) and returns it; ``@register("name", ...)`` is a decorator that registers
    ``func(jet, **options)`` under ``name``, its options read from its signature unless
    ``options`` declares them.

    Returns:
        The :class:`AlgorithmInfo`, or the decorator.
    """
    if isinstance(name, AlgorithmInfo):
        _add(name)
        return name

    def wrap(func: Callable[..., ClusteringResult]) -> Callable[..., ClusteringResult]:
        _add(AlgorithmInfo(name, func, exact, max_leaves, description,
                           None if options is None else tuple(options)))
        return func

    return wrap


def _add(info: AlgorithmInfo) -> None:
    _REGISTRY[info.name] = info
    for alias in info.aliases:
        ALIASES[alias] = info.name


def algorithms() -> list[str]:
    """Names of all registered algorithms, sorted."""
    return sorted(_REGISTRY)


def algorithm_info(name: str) -> AlgorithmInfo:
    """The :class:`AlgorithmInfo` of ``name``.

    Raises:
        ValueError: for an unknown name, listing the valid ones.
        TypeError: ``name`` is not a string.
    """
    if not isinstance(name, str):
        raise TypeError(f"an algorithm name is a string; got {type(name).__name__} {name!r}")
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(
            f"unknown algorithm {name!r}{_did_you_mean(name)}; valid: {', '.join(algorithms())}"
        ) from None


def _did_you_mean(name: str) -> str:
    """`` (did you mean 'antikt'?)`` for a name close to a registered one or to an alias
    (spelling with or without ``-`` / ``_`` counts as the same)."""
    def squash(word: str) -> str:
        return str(word).lower().replace("-", "").replace("_", "")

    key = squash(name)
    names = {squash(n): n for n in algorithms()}
    names.update({squash(a): k for a, k in ALIASES.items() if k in _REGISTRY and squash(a) not in names})
    if key in names:
        return f" (did you mean {names[key]!r}?)"
    close = difflib.get_close_matches(key, list(names), n=2, cutoff=0.75)
    found = list(dict.fromkeys(names[c] for c in close))
    return f" (did you mean {' or '.join(map(repr, found))}?)" if found else ""


def canonical_name(name: str) -> str:
    """The registry key of an algorithm name: aliases (the Python function names, older labels
    such as ``"exact_map"``) map to their key; a key, or a name the registry does not know (an
    algorithm registered by a plugin not loaded here), is returned as given.

    Results read from files use it, so that ``ClusteringResult.algorithm`` is a registry key.

    Example:
        >>> canonical_name("exact_map"), canonical_name("astar_approx"), canonical_name("kt")
        ('trellis', 'astar-approx', 'kt')
    """
    name = str(name)
    if name in _REGISTRY:
        return name
    return ALIASES.get(name, name)


def checked_options(algorithm: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword ``options`` of ``algorithm``, checked and converted as :func:`cluster` does.

    Raises:
        ValueError: for an unknown algorithm or option (listing the valid ones), or an option
            value of the wrong type or range (text booleans such as ``"false"`` are read as
            booleans, numbers given as text as numbers).
    """
    return algorithm_info(algorithm).check_options(options)


def cluster(jet: Any, algorithm: str, /, **options: Any) -> ClusteringResult:
    """Run the algorithm called ``algorithm`` on one jet with keyword ``options``.

    ``jet`` may be a :class:`~jetastar.Jet` (taken as it is) or one jet's particles (an
    ``(n, 4)`` array or list of rows of ``(E, px, py, pz)``, a 1-D awkward / vector array of
    momenta, dicts of coordinates or vector 4-vectors), which get the default parameters of
    :class:`~jetastar.Jet` and the default mass policy of every particle input, ``"clamp"``
    (massless particles whose ``E² − |p|²`` rounds below 0 are put on the mass shell; in the
    symmetric form such a particle would make every split it is a child of −∞). Many jets (a
    :class:`~jetastar.JetCollection`, a list of jets, an awkward array of jets) are clustered by
    ``jetastar.cluster`` (one
    algorithm, a results table) or :func:`jetastar.inmemory.cluster_jets` (several algorithms,
    workers, time limits).

    Returns:
        A :class:`ClusteringResult` whose ``algorithm`` is ``algorithm``.

    Raises:
        ValueError: for an unknown algorithm or option (listing the valid ones), or an option
            value of the wrong type or range (text booleans such as ``"false"`` are read as
            booleans, numbers given as text as numbers).
        TypeError: ``jet`` holds several jets.

    Example:
        >>> from jetastar.ginkgo import ShowerParams, generate
        >>> from jetastar.clustering import cluster
        >>> jet = generate(1, ShowerParams.qcd(), seed=1)[0]
        >>> cluster(jet, "greedy").algorithm
        'greedy'
    """
    info = algorithm_info(algorithm)
    options = checked_options(algorithm, options)
    if holds_many_jets(jet):
        raise TypeError(
            f"jetastar.clustering.cluster runs one jet, got {_describe(jet)}: use "
            f"jetastar.cluster(jets, {algorithm!r}) for a results table, or "
            "jetastar.cluster_jets for several algorithms, workers and time limits"
        )
    if not isinstance(jet, Jet) and (
        isinstance(jet, (list, tuple, np.ndarray))
        or type(jet).__module__.startswith(("awkward", "vector"))
    ):
        # one jet's particles, with the default mass policy of every particle input ("clamp"):
        # massless particles whose E² − |p|² rounds below 0 would make every split with them
        # -inf in the symmetric form
        jet = Jet.from_particles(jet)
    # a Ctrl-C that lands while numba boxes a kernel's result is raised after the call instead of
    # coming out as a SystemError (which a batch would record as the algorithm failing)
    with DeferredSignals(only_in_numba=True):
        return info.func(jet, **options)


def holds_many_jets(jet: Any) -> bool:
    """Whether ``jet`` holds several jets: a :class:`~jetastar.JetCollection`, a non-empty list or
    tuple of :class:`~jetastar.Jet`, or an awkward array of jets (two list levels, records with
    a ``leaves`` field, or records of per-jet lists such as ``{pt: var * float32, ...}``, what
    ``tree.arrays([...])`` gives for separate jagged branches).

    Example:
        >>> import numpy as np
        >>> holds_many_jets(np.zeros((3, 4)))
        False
    """
    if isinstance(jet, JetCollection):
        return True
    if isinstance(jet, (list, tuple)) and jet and all(isinstance(j, Jet) for j in jet):
        return True
    if is_list_of_jet_arrays(jet):  # one (n_i, 4) array of (E, px, py, pz) per jet
        return True
    if type(jet).__module__.startswith(("awkward", "vector")):
        import awkward as ak

        return isinstance(jet, ak.Array) and (
            jet.layout.purelist_depth >= 2 or "leaves" in ak.fields(jet)
            or (jet.layout.is_record and jet.layout.minmax_depth[1] >= 2))
    return False


def _describe(jets: Any) -> str:
    try:
        return f"{type(jets).__name__} of {len(jets)} jets"
    except TypeError:  # pragma: no cover - every many-jets type has a length
        return type(jets).__name__
