"""jetastar: exact and approximate maximum-likelihood hierarchical clustering of jets.

Example:
    >>> import jetastar
    >>> from jetastar.ginkgo import ShowerParams, generate, log_likelihood
    >>> jet = generate(1, ShowerParams.qcd(), seed=1)[0]
    >>> isinstance(jet, jetastar.Jet)
    True
"""

from __future__ import annotations

from typing import Any

from . import (
    _jit,  # noqa: F401  (first: sets up the kernel cache before any kernel module)
    ginkgo,
)
from ._version import __version__
from .errors import InvalidJetError, InvalidTreeError, JetastarError, TooLargeError
from .jet import Jet, JetCollection
from .tree import Tree

__all__ = [
    "InvalidJetError",
    "InvalidTreeError",
    "Jet",
    "JetCollection",
    "JetastarError",
    "TooLargeError",
    "Tree",
    "__version__",
    "cluster",
    "cluster_jets",
    "ginkgo",
]


def __getattr__(name: str) -> Any:
    # jetastar.cluster (one jet or many) and cluster_jets (several algorithms, workers, time
    # limits) are the in-memory collection layer's; they are loaded on first use so that
    # ``import jetastar`` does not import the batch machinery
    if name in ("cluster", "cluster_jets"):
        from . import inmemory

        func = getattr(inmemory, name)
        globals()[name] = func
        return func
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return list(__all__)
