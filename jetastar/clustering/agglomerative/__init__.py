"""Agglomerative baselines: one merge at a time, never undone.

* :mod:`.greedy` — merge the most likely pair first (:func:`greedy`).
* :mod:`.kt` — kt, Cambridge/Aachen and anti-kt with FastJet's conventions, scored with the
  Ginkgo likelihood (:func:`kt`); its kernels in ``_kt_kernels``.
* ``_merge_chunk`` — the chunk kernel greedy and the kt family share on the columnar path.
* :mod:`.cost_baselines` — greedy and average linkage for cost models over weighted graphs
  (:func:`cost_greedy`, :func:`average_linkage`).

The merge kernels that beam search, MCTS and the window search share with greedy live one level
up, in ``jetastar.clustering._merges``. Each module declares its algorithms to the registry
(:class:`~jetastar.clustering.AlgorithmInfo`).
"""

from __future__ import annotations

from .cost_baselines import average_linkage, cost_greedy
from .greedy import greedy
from .kt import kt

__all__ = ["average_linkage", "cost_greedy", "greedy", "kt"]
