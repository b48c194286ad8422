"""The Ginkgo toy parton shower: parameters, generator and splitting likelihood.

The model (parameters, likelihood, heuristics) sits below :class:`~jetastar.Jet`; the generator sits
above it (it builds a :class:`~jetastar.JetCollection`). So that importing the model never imports
the generator, :func:`generate` is loaded on first use (a module ``__getattr__``); ``from
jetastar.ginkgo import generate`` works as usual. The numba primitives (``split_llh``, ``t_of``,
``cluster_t``, ...) are documented in :mod:`jetastar.ginkgo.kernels`.

Example:
    >>> from jetastar.ginkgo import ShowerParams, generate, log_likelihood
    >>> jets = generate(2, ShowerParams.qcd(), seed=1)
    >>> [round(log_likelihood(j) - log_likelihood(j), 1) for j in jets]
    [0.0, 0.0]
"""

from __future__ import annotations

import warnings
from typing import Any

from . import kernels
from .heuristics import heuristic
from .likelihood import (
    BOUNDED_LIKELIHOODS,
    LIKELIHOODS,
    check_likelihood,
    likelihood_constants,
    log_likelihood,
    node_log_likelihoods,
    split_log_likelihood,
    split_log_likelihood_t,
    truth_log_likelihoods,
)
from .params import ShowerParams, default_root_momentum

__all__ = [
    "BOUNDED_LIKELIHOODS",
    "LIKELIHOODS",
    "ShowerParams",
    "check_likelihood",
    "default_root_momentum",
    "generate",
    "heuristic",
    "likelihood_constants",
    "log_likelihood",
    "node_log_likelihoods",
    "split_log_likelihood",
    "split_log_likelihood_t",
    "truth_log_likelihoods",
]


#: numba primitives that were names of this face (now in :mod:`jetastar.ginkgo.kernels`)
_MOVED_TO_KERNELS = ("cluster_t", "split_llh", "t_of")


def __getattr__(name: str) -> Any:
    # The one import inside a function of this package face: the generator (layer 3) imports
    # jet (layer 2), which imports the model modules of this package (layer 1), so the face must
    # not import the generator when it is first loaded.
    if name == "generate":
        from .generator import generate

        globals()["generate"] = generate
        return generate
    if name in _MOVED_TO_KERNELS:
        warnings.warn(
            f"jetastar.ginkgo.{name} moved to jetastar.ginkgo.kernels.{name} (numba primitives "
            "are no longer part of the jetastar.ginkgo namespace)",
            DeprecationWarning, stacklevel=2,
        )
        return getattr(kernels, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return list(__all__)
