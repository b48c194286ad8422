"""jetastar: exact and approximate maximum-likelihood hierarchical clustering of jets.

Example:
    >>> import jetastar
    >>> from jetastar.ginkgo import ShowerParams, generate, log_likelihood
    >>> jet = generate(1, ShowerParams.qcd(), seed=1)[0]
    >>> isinstance(jet, jetastar.Jet)
    True
"""

from __future__ import annotations

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
    "ginkgo",
]
