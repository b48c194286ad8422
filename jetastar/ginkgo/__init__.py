"""The Ginkgo toy parton shower: parameters, generator and splitting likelihood.

Example:
    >>> from jetastar.ginkgo import ShowerParams, generate, log_likelihood
    >>> jets = generate(2, ShowerParams.qcd(), seed=1)
    >>> [round(log_likelihood(j) - log_likelihood(j), 1) for j in jets]
    [0.0, 0.0]
"""

from __future__ import annotations

from .generator import generate
from .heuristics import heuristic
from .likelihood import (
    LIKELIHOODS,
    check_likelihood,
    cluster_t,
    likelihood_constants,
    log_likelihood,
    node_log_likelihoods,
    split_llh,
    split_log_likelihood,
    split_log_likelihood_t,
    t_of,
)
from .params import ShowerParams, default_root_momentum

__all__ = [
    "LIKELIHOODS",
    "ShowerParams",
    "check_likelihood",
    "cluster_t",
    "default_root_momentum",
    "generate",
    "heuristic",
    "likelihood_constants",
    "log_likelihood",
    "node_log_likelihoods",
    "split_llh",
    "split_log_likelihood",
    "split_log_likelihood_t",
    "t_of",
]
