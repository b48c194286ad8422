"""FastJet's clustering trees, the oracle of the kt-family tests (needs the fastjet extra)."""

from __future__ import annotations

import numpy as np

from jetastar import Tree

#: jetastar algorithm name -> FastJet's JetAlgorithm name.
FJ_ALGORITHMS = {
    "kt": "kt_algorithm",
    "cambridge": "cambridge_algorithm",
    "antikt": "antikt_algorithm",
}


def fastjet_tree(fastjet, leaves: np.ndarray, algorithm: str) -> Tree:
    """FastJet's clustering tree of one jet's leaves (exclusive to one jet, R = 1000)."""
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

    def walk(pj) -> frozenset[int]:
        p1, p2 = fastjet.PseudoJet(), fastjet.PseudoJet()
        if not pj.has_parents(p1, p2):
            return frozenset([pj.user_index()])
        merged = walk(p1) | walk(p2)
        clusters.append(merged)
        return merged

    walk(jets[0])
    return Tree.from_clusters(clusters, len(leaves))
