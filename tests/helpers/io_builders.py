"""Builders and comparisons shared by the jet-file tests (HDF5, ROOT, particle files)."""

from __future__ import annotations

import math

import numpy as np

from helpers.refdata import reference_jets
from jetastar import JetCollection, Tree
from jetastar.clustering import ClusteringResult
from jetastar.ginkgo import log_likelihood


def reference_collection() -> JetCollection:
    """The first 40 reference jets with at most 9 leaves."""
    return JetCollection.from_jets([j for _, j in reference_jets(max_leaves=9)[:40]])


def results_for(collection: JetCollection) -> dict[str, list[ClusteringResult]]:
    """Hand-made results with every status, counters, log Z, options."""
    out: dict[str, list[ClusteringResult]] = {"alpha": [], "beta": []}
    for i, jet in enumerate(collection):
        n = jet.n_leaves
        chain = Tree.from_nested(caterpillar(n))
        ll = log_likelihood(jet, chain)
        out["alpha"].append(ClusteringResult(
            chain, ll, "alpha", exact=False, options={"width": 3, "mode": "x"},
            stats={"time_s": 0.01 * i, "splits_evaluated": 10 * n}, jet_id=jet.jet_id,
        ))
        if i % 4 == 0:
            r = ClusteringResult(None, -math.inf, "beta", status="skipped", message="too big",
                                 jet_id=jet.jet_id)
        elif i % 4 == 1:
            r = ClusteringResult(None, -math.inf, "beta", status="failed", message="boom: x",
                                 jet_id=jet.jet_id)
        else:
            r = ClusteringResult(jet.truth, log_likelihood(jet), "beta", exact=True,
                                 log_z=-1.5 * i, n_trees=15, upper_bound=log_likelihood(jet),
                                 stats={"time_s": 1.0, "vertices": i}, jet_id=jet.jet_id)
        out["beta"].append(r)
    return out


def caterpillar(n: int):
    """The nested form of the chain tree ((((0, 1), 2), 3), ...) over ``n`` leaves."""
    t = 0
    for k in range(1, n):
        t = (t, k)
    return t


def assert_same_jets(a: JetCollection, b: JetCollection) -> None:
    """Two collections hold the same jets (columns, truth trees, parameters)."""
    assert len(a) == len(b)
    for name in ("leaves", "leaf_offsets", "children", "leaf_of_node", "node_offsets",
                 "jet_id", "seed"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert (a.node_momenta is None) == (b.node_momenta is None)
    if a.node_momenta is not None:
        assert np.array_equal(a.node_momenta, b.node_momenta)
    assert list(a.jet_type) == list(b.jet_type)
    for k, v in a.params.items():
        assert np.array_equal(v, b.params[k]), k
    for i in range(len(a)):
        ja, jb = a[i], b[i]
        assert ja.truth == jb.truth
        assert ja.params == jb.params


def assert_same_results(tables, results) -> None:
    """Tables read back from a file equal the :class:`ClusteringResult` lists written."""
    for label, rows in results.items():
        table = tables[label]
        assert len(table) == len(rows)
        for k, r in enumerate(rows):
            back = table.result(k)
            assert back.status == r.status and back.message == r.message
            assert (back.tree is None) == (r.tree is None)
            if r.tree is not None:
                assert back.tree == r.tree
                assert back.log_likelihood == r.log_likelihood
            assert back.exact == r.exact
            assert back.log_z == r.log_z and back.upper_bound == r.upper_bound
            assert back.n_trees == r.n_trees
            assert back.options == r.options
            assert back.stats == r.stats
            assert back.jet_id == r.jet_id
