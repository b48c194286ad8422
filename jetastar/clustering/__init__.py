"""Clustering algorithms: exact trellis, A*, greedy, beam search, kt family, MCTS.

name with :func:`cluster`.
"""

from __future__ import annotations

from .beam import beam_search
from .greedy import greedy
from .kt import kt
from .mcts import mcts
from .registry import AlgorithmInfo, algorithm_info, algorithms, cluster, register
from .result import STATUSES, ClusteringResult
from .trellis import Trellis, exact_trellis

__all__ = [
    "STATUSES",
    "AlgorithmInfo",
    "ClusteringResult",
    "Trellis",
    "algorithm_info",
    "algorithms",
    "beam_search",
    "cluster",
    "exact_trellis",
    "greedy",
    "kt",
    "mcts",
    "register",
]
