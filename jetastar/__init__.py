"""jetastar: exact and approximate maximum-likelihood hierarchical clustering of jets.

Example:
    >>> import jetastar
    >>> from jetastar.ginkgo import ShowerParams, generate, log_likelihood
    >>> jet = generate(1, ShowerParams.qcd(), seed=1)[0]
    >>> isinstance(jet, jetastar.Jet)
    True
"""

from __future__ import annotations

import importlib
from typing import Any

#: jetastar's dependencies (pyproject.toml) by the name they are imported under
_DEPENDENCIES = frozenset({"numpy", "scipy", "awkward", "uproot", "h5py", "matplotlib", "tqdm",
                           "numba", "llvmlite", "vector", "deflate"})

try:
    from . import (
        _jit,  # noqa: F401  (first: sets up the kernel cache before any kernel module)
        ginkgo,
    )
    from ._version import __version__
    from .errors import InvalidJetError, InvalidTreeError, JetastarError, TooLargeError
    from .jet import Jet, JetCollection
    from .tree import Tree
except ModuleNotFoundError as _missing:  # (an install with --no-deps, a broken environment)
    _name = (_missing.name or "").partition(".")[0]
    if _name not in _DEPENDENCIES:
        raise
    raise ModuleNotFoundError(
        f"jetastar needs {_name!r}, which is not installed: `pip install jetastar` installs its "
        "dependencies (`pip check` lists the missing ones)", name=_missing.name,
    ) from None

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


#: the documented modules, loaded on first use as attributes (``jetastar.io.read(path)`` after a
#: plain ``import jetastar``), as ``import jetastar.io`` would
_SUBMODULES = frozenset({
    "batch", "clustering", "comparison", "costs", "diagnostics", "inference", "inmemory", "io",
    "momenta", "observables", "plotting",
})


def __getattr__(name: str) -> Any:
    # jetastar.cluster (one jet or many) and cluster_jets (several algorithms, workers, time
    # limits) are the in-memory collection layer's; they are loaded on first use so that
    # ``import jetastar`` does not import the batch machinery
    if name in ("cluster", "cluster_jets"):
        from . import inmemory

        func = getattr(inmemory, name)
        globals()[name] = func
        return func
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return list(__all__)
