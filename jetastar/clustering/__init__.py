"""Clustering algorithms: exact trellis, A*, greedy, beam search, kt family, MCTS.

Every algorithm takes a :class:`jetastar.Jet` and returns a :class:`ClusteringResult`; run them by
name with :func:`cluster`.
"""

from __future__ import annotations

from .beam import beam_search
from .greedy import greedy
from .kt import kt
from .mcts import mcts
from .registry import AlgorithmInfo, algorithm_info, algorithms, cluster, register
from .result import STATUSES, ClusteringResult

__all__ = [
    "STATUSES",
    "AlgorithmInfo",
    "ClusteringResult",
    "algorithm_info",
    "algorithms",
    "beam_search",
    "cluster",
    "greedy",
    "kt",
    "mcts",
    "register",
]
