"""Run clustering algorithms by name.

Algorithms register themselves with :func:`register`; callers (the CLI, batch processing,
analysis scripts) use :func:`cluster` and :func:`algorithms`.

Example:
    >>> from jetastar.clustering import algorithms
    >>> "greedy" in algorithms()
    True
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from .._columnar import is_list_of_jet_arrays
from .._jit import DeferredSignals
from ..jet import Jet, JetCollection
from .options import check_options
from .result import ClusteringResult

__all__ = [
    "ALIASES",
    "AlgorithmInfo",
    "algorithm_info",
    "algorithms",
    "canonical_name",
    "checked_options",
    "cluster",
    "holds_many_jets",
    "register",
]

#: Other names of registered algorithms: the Python functions' names and older result labels.
ALIASES = {
    "exact_map": "trellis",
    "exact-map": "trellis",
    "exact_trellis": "trellis",
    "astar_approx": "astar-approx",
    "window_search": "window-search",
    "beam_search": "beam",
}


@dataclasses.dataclass(frozen=True)
class AlgorithmInfo:
    """A registered algorithm.

    Args:
        name: registry name.
        func: ``func(jet, **options) -> ClusteringResult``.
        exact: whether it returns proven MAP trees.
        max_leaves: default size limit (jets above are skipped by batch runs), ``None`` = none.
        description: one line for listings.
    """

    name: str
    func: Callable[..., ClusteringResult]
    exact: bool = False
    max_leaves: int | None = None
    description: str = ""

    def options(self) -> list[str]:
        """Names of the keyword options the algorithm accepts."""
        return list(_option_names(self.func))


@functools.cache
def _option_names(func: Callable[..., ClusteringResult]) -> tuple[str, ...]:
    params = list(inspect.signature(func).parameters.values())[1:]
    return tuple(p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD))


_REGISTRY: dict[str, AlgorithmInfo] = {}


def register(
    name: str, *, exact: bool = False, max_leaves: int | None = None, description: str = ""
) -> Callable[[Callable[..., ClusteringResult]], Callable[..., ClusteringResult]]:
    """Decorator that registers ``func(jet, **options)`` under ``name``."""

    def wrap(func: Callable[..., ClusteringResult]) -> Callable[..., ClusteringResult]:
        _REGISTRY[name] = AlgorithmInfo(name, func, exact, max_leaves, description)
        return func

    return wrap


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
    def squash(text: str) -> str:
        return str(text).lower().replace("-", "").replace("_", "")

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
    info = algorithm_info(algorithm)
    valid = info.options()
    unknown = sorted(set(options) - set(valid))
    if unknown:
        raise ValueError(unknown_options_message(algorithm, unknown, valid))
    return check_options(algorithm, info.func, dict(options))


#: Names of Ginkgo parameters, which belong to the jets rather than to an algorithm.
_PARAMETER_NAMES = frozenset({"params", "t_cut", "lam", "lam_root", "m_hard", "t_root"})


def unknown_options_message(algorithm: str, unknown: Sequence[str], valid: Sequence[str]) -> str:
    """The error for options ``algorithm`` does not take, listing the ones it does (and, for
    shower parameters given as options, where they go instead).

    Example:
        >>> unknown_options_message("kt", ["beam"], ["algorithm", "R"])
        "unknown option(s) beam for algorithm 'kt'; valid: algorithm, R"
    """
    text = (f"unknown option(s) {', '.join(unknown)} for algorithm {algorithm!r}; "
            f"valid: {', '.join(valid) or '(none)'}")
    if _PARAMETER_NAMES.intersection(unknown):
        text += (". The Ginkgo parameters belong to the jets: jetastar.Jet.from_particles("
                 "particles, params) for one jet's particles, JetCollection.from_momenta(..., "
                 "t_cut=, lam=, lam_root=) for many (particles get ShowerParams.qcd()'s otherwise)")
    return text


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
