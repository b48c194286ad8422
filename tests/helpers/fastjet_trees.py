"""The clustering history of FastJet's kt-family algorithms as a :class:`jetastar.Tree` (the
reference the kt tests compare with; needs the fastjet extra)."""

from __future__ import annotations

from typing import Any

import numpy as np

from jetastar import Tree

#: jetastar's kt-family names and FastJet's algorithm constants.
FJ_ALGORITHMS = {
    "kt": "kt_algorithm",
    "cambridge": "cambridge_algorithm",
    "antikt": "antikt_algorithm",
}


def fastjet_tree(fastjet: Any, leaves: np.ndarray, algorithm: str) -> Tree:
    """FastJet's tree of ``leaves`` (``(n, 4)`` E, px, py, pz) for ``algorithm`` with R = 1000."""
    inputs = []
    for i, (e, px, py, pz) in enumerate(leaves):
        pj = fastjet.PseudoJet(float(px), float(py), float(pz), float(e))
        pj.set_user_index(i)
        inputs.append(pj)
    jet_def = fastjet.JetDefinition(getattr(fastjet, FJ_ALGORITHMS[algorithm]), 1000.0)
    sequence = fastjet.ClusterSequence(inputs, jet_def)
    jets = sequence.inclusive_jets()
    assert len(jets) == 1
    clusters: list[frozenset[int]] = []

    def walk(pj: Any) -> frozenset[int]:
        p1, p2 = fastjet.PseudoJet(), fastjet.PseudoJet()
        if not pj.has_parents(p1, p2):
            return frozenset([pj.user_index()])
        merged = walk(p1) | walk(p2)
        clusters.append(merged)
        return merged

    walk(jets[0])
    return Tree.from_clusters(clusters, len(leaves))
