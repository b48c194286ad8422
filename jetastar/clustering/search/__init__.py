"""Searches over merge sequences, scored with the Ginkgo likelihood.

* :mod:`.beam` — beam search over partial clusterings, deduplicated on the set of clusters
  (:func:`beam_search`); its kernels, the per-jet search and the chunk kernel, in
  ``_beam_kernels``.
* :mod:`.mcts` — Monte-Carlo tree search with a likelihood prior (:func:`mcts`); its kernels in
  ``_mcts_kernels``.

Each module declares its algorithm to the registry (:class:`~jetastar.clustering.AlgorithmInfo`).
"""

from __future__ import annotations

from .beam import beam_search
from .mcts import mcts

__all__ = ["beam_search", "mcts"]
