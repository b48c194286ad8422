"""The exact engines and the searches built on them.

* :mod:`.trellis` — the cluster trellis: MAP, log Z, tree counts, posterior samples and marginals
  (:class:`Trellis`, :func:`exact_trellis`, :func:`exact_trellis_batch`), and the registry's exact
  MAP method ``"trellis"``; its kernels in ``_trellis_kernels``.
* :mod:`.exact_map` — the bound-pruned exact MAP engine (:func:`exact_map`,
  :func:`map_over_parts`); its kernels in ``_map_kernels``.
* :mod:`.astar` — A* on the trellis, exact with ``h0`` and approximate on sparse trellises
  (:func:`astar`, :func:`astar_approx`); its kernels in ``_astar_kernels``.
* :mod:`.window_search` — windows of a tree re-solved exactly with the exact MAP engine
  (:func:`window_search`); its kernels in ``_window_kernels``.
* :mod:`.gpu` — the trellis and the MAP engine on an NVIDIA GPU (numba-cuda); its kernels in
  ``_gpu_kernels``, compiled only when a GPU is used.

Each module declares its algorithms to the registry (:class:`~jetastar.clustering.AlgorithmInfo`).
"""

from __future__ import annotations

from .astar import astar, astar_approx
from .exact_map import exact_map, map_over_parts
from .trellis import Trellis, exact_trellis, exact_trellis_batch
from .window_search import window_search

__all__ = ["Trellis", "astar", "astar_approx", "exact_map", "exact_trellis", "exact_trellis_batch",
           "map_over_parts", "window_search"]
