"""Clustering algorithms: exact MAP, exact trellis, A*, window search, greedy, beam search, kt family,
MCTS.

Every algorithm takes a :class:`jetastar.Jet` and returns a :class:`ClusteringResult`; run them by
name with :func:`cluster` (one jet; many jets: ``jetastar.cluster``). The exact trellis, greedy and
average linkage also take a cost model over a weighted graph (:mod:`jetastar.costs`).
"""

from __future__ import annotations

from .._cuda import gpu_status
from .astar import astar, astar_approx
from .beam import beam_search
from .cost_baselines import average_linkage, cost_greedy
from .exact_map import exact_map, map_over_parts
from .greedy import greedy
from .kt import kt
from .mcts import mcts
from .registry import AlgorithmInfo, algorithm_info, algorithms, canonical_name, cluster, register
from .result import STATUSES, ClusteringResult
from .trellis import Trellis, exact_trellis, exact_trellis_batch
from .window_search import window_search

__all__ = [
    "STATUSES",
    "AlgorithmInfo",
    "ClusteringResult",
    "Trellis",
    "algorithm_info",
    "algorithms",
    "astar",
    "astar_approx",
    "average_linkage",
    "beam_search",
    "canonical_name",
    "cluster",
    "cost_greedy",
    "exact_map",
    "exact_trellis",
    "exact_trellis_batch",
    "gpu_status",
    "greedy",
    "kt",
    "map_over_parts",
    "mcts",
    "register",
    "window_search",
]


def __dir__() -> list[str]:
    return list(__all__)
