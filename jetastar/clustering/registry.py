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
import functools
import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from .result import ClusteringResult

__all__ = ["AlgorithmInfo", "algorithm_info", "algorithms", "cluster", "register"]


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
    """
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(
            f"unknown algorithm {name!r}; valid: {', '.join(algorithms())}"
        ) from None


def cluster(jet: Any, algorithm: str, /, **options: Any) -> Any:
    """Run the algorithm called ``algorithm`` on ``jet`` with keyword ``options``.

    ``jet`` may be a :class:`~jetastar.Jet` or one jet's particles (an ``(n, 4)`` array of
    ``(E, px, py, pz)`` or a 1-D awkward / vector array of momenta, which get the default
    parameters of :class:`~jetastar.Jet`). It may also be many jets — a
    :class:`~jetastar.JetCollection`, a list of jets or an awkward array of jets: they are
    clustered with :func:`jetastar.inmemory.cluster_jets` (in this process; use that function
    for workers, time limits and several algorithms) and the result is the algorithm's
    :class:`~jetastar.io.AlgorithmResults` table (``.results()``, ``.to_awkward()``).

    Returns:
        A :class:`ClusteringResult` for one jet, an :class:`~jetastar.io.AlgorithmResults` for many.

    Raises:
        ValueError: for an unknown algorithm or option (listing the valid ones), or an option
            value of the wrong type or range (text booleans such as ``"false"`` are read as
            booleans, numbers given as text as numbers).

    Example:
        >>> from jetastar.ginkgo import ShowerParams, generate
        >>> from jetastar.clustering import cluster
        >>> jet = generate(1, ShowerParams.qcd(), seed=1)[0]
        >>> cluster(jet, "greedy").algorithm
        'greedy'
    """
    info = algorithm_info(algorithm)
    valid = info.options()
    unknown = sorted(set(options) - set(valid))
    if unknown:
        raise ValueError(
            f"unknown option(s) {', '.join(unknown)} for algorithm {algorithm!r}; "
            f"valid: {', '.join(valid) or '(none)'}"
        )
    from .options import check_options

    options = check_options(algorithm, info.func, options)
    if _is_many(jet):
        from ..inmemory import cluster_jets

        return cluster_jets(jet, [algorithm], options={algorithm: options}, progress=False)[
            algorithm]
    from ..jet import Jet

    if not isinstance(jet, Jet) and (
        type(jet).__module__.startswith(("awkward", "vector")) or isinstance(jet, np.ndarray)
    ):
        jet = Jet(jet)  # one jet's particles: awkward / vector momenta or an (n, 4) array
    return info.func(jet, **options)


def _is_many(jet: Any) -> bool:
    """Whether ``jet`` holds several jets (a collection, a list of jets, a 2-level awkward array)."""
    from ..jet import Jet, JetCollection

    if isinstance(jet, JetCollection):
        return True
    if isinstance(jet, (list, tuple)) and jet and all(isinstance(j, Jet) for j in jet):
        return True
    if type(jet).__module__.startswith(("awkward", "vector")):
        import awkward as ak

        return isinstance(jet, ak.Array) and (
            jet.layout.purelist_depth >= 2 or "leaves" in ak.fields(jet))
    return False
