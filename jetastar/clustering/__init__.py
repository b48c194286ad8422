"""Clustering algorithms: exact MAP, exact trellis, A*, window search, greedy, beam search, kt family,
MCTS.

Every algorithm takes a :class:`jetastar.Jet` and returns a :class:`ClusteringResult`; run them by
name with :func:`cluster` (one jet; many jets: ``jetastar.cluster``). The exact trellis, greedy and
average linkage also take a cost model over a weighted graph (:mod:`jetastar.costs`).

The algorithms live in three families: :mod:`~jetastar.clustering.exact` (the trellis, the exact
MAP engine, A*, the window search and their GPU backend), :mod:`~jetastar.clustering.search` (beam
search, MCTS) and :mod:`~jetastar.clustering.agglomerative` (greedy, the kt family, the cost-model
baselines). What they share sits here: the registry (:mod:`.registry`, where each algorithm's
:class:`AlgorithmInfo` is collected), option declarations and checks (:mod:`.options`), the result
type (:mod:`.result`), the columnar chunk driver (:mod:`.chunks`), cost estimates
(:mod:`.estimates`), warm-up (:mod:`.warmup`) and threads (:mod:`.threads`).
"""

from __future__ import annotations

import sys

from .._cuda import gpu_status
from . import chunks
from .agglomerative import average_linkage, cost_greedy, greedy, kt
from .exact import (
    Trellis,
    astar,
    astar_approx,
    exact_map,
    exact_trellis,
    exact_trellis_batch,
    map_over_parts,
    window_search,
)
from .registry import AlgorithmInfo, algorithm_info, algorithms, canonical_name, cluster, register
from .result import STATUSES, ClusteringResult
from .search import beam_search, mcts

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


# Old import paths that still work, as aliases (not second module files): the modules of the flat
# layout before the families (``jetastar.clustering.beam`` is ``jetastar.clustering.search.beam``,
# ...) and the chunk driver's former name.
_OLD_PATHS = {path.rpartition(".")[2]: sys.modules[f"{__name__}.{path}"] for path in (
    "exact.trellis", "exact.exact_map", "exact.astar", "exact.window_search", "exact.gpu",
    "search.beam", "search.mcts", "agglomerative.greedy", "agglomerative.kt",
    "agglomerative.cost_baselines")}
_OLD_PATHS["columnar"] = chunks
for _name, _module in _OLD_PATHS.items():
    sys.modules.setdefault(f"{__name__}.{_name}", _module)
