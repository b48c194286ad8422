"""Clustering algorithms: exact trellis, A*, greedy, beam search, kt family, MCTS.

Every algorithm takes a :class:`jetastar.Jet` and returns a :class:`ClusteringResult`; run them by
name with :func:`cluster`.
"""

from __future__ import annotations

from .registry import AlgorithmInfo, algorithm_info, algorithms, cluster, register
from .result import STATUSES, ClusteringResult

__all__ = [
    "STATUSES",
    "AlgorithmInfo",
    "ClusteringResult",
    "algorithm_info",
    "algorithms",
    "cluster",
    "register",
]
