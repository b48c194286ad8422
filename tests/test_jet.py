from __future__ import annotations

import math

import awkward as ak
import numpy as np
import pytest
import vector

from jetastar import InvalidJetError, Jet, JetCollection, Tree
from jetastar.ginkgo import ShowerParams, generate, log_likelihood

GOOD = np.array([[10.0, 0.0, 0.0, 9.0], [10.0, 0.0, 0.0, -9.0], [5.0, 3.0, 0.0, 0.0]])


@pytest.mark.parametrize(
    ("leaves", "match"),
    [
        (np.zeros((3, 3)), "shape"),
        (GOOD[:1], "at least 2 leaves"),
        (np.array([[10.0, 0, 0, math.nan], [10.0, 0, 0, 1]]), "leaf 0 has a non-finite pz"),
        (np.array([[10.0, 0, 0, 1], [math.inf, 0, 0, 1]]), "leaf 1 has a non-finite E"),
        (np.array([[10.0, 0, 0, 1], [-3.0, 0, 0, 1]]), "leaf 1 has non-positive energy"),
        (np.array([[10.0, 0, 0, 1], [3.0, 0, 0, 3.1]]), "leaf 1 is spacelike"),
        ([["a", "b", "c", "d"], [1, 2, 3, 4]], "cannot be read as numbers"),
    ],
)
def test_bad_leaves_name_jet_field_and_problem(leaves, match):
    with pytest.raises(InvalidJetError, match=match) as info:
        Jet(leaves, ShowerParams.qcd(), jet_id=42)
    msg = str(info.value)
    assert "jet 42" in msg and "field 'leaves'" in msg
    assert info.value.jet == 42 and info.value.field == "leaves"


def test_tiny_negative_mass_policy():
    # massless leaf whose t rounds negative: accepted and kept as is (within 1e-6 E²)
    e = 7.0
    p = np.array([e, e * 0.6, e * 0.8, 0.0])
    p[0] = np.nextafter(math.sqrt(p[1] ** 2 + p[2] ** 2), 0)
    leaves = np.array([[40.0, 0.0, 0.0, 30.0], p])
    jet = Jet(leaves, ShowerParams.qcd(t_cut=1.0), Tree.from_nested((0, 1)))
    assert jet.leaf_t[1] < 0
    assert log_likelihood(jet) == -math.inf  # as the reference: a child with t < 0 is impossible
    fixed = jet.with_nonnegative_masses()
    assert fixed.leaf_t[1] >= 0 and abs(fixed.leaves[1, 0] - p[0]) < 1e-13
    assert math.isfinite(log_likelihood(fixed, jet.truth))
    assert np.array_equal(fixed.leaves[0], leaves[0])


def test_truth_and_node_momenta_validation():
    with pytest.raises(InvalidJetError, match="truth tree has 2 leaves, the jet has 3"):
        Jet(GOOD, ShowerParams.qcd(), Tree.from_nested((0, 1)), jet_id=1)
    with pytest.raises(InvalidJetError, match="must be a Tree"):
        Jet(GOOD, ShowerParams.qcd(), ((0, 1), 2))
    tree = Tree.from_nested(((0, 1), 2))
    with pytest.raises(InvalidJetError, match="shape"):
        Jet(GOOD, ShowerParams.qcd(), tree, np.zeros((4, 4)))
    with pytest.raises(InvalidJetError, match="need a truth tree"):
        Jet(GOOD, ShowerParams.qcd(), None, np.zeros((5, 4)))
    bad = np.zeros((5, 4))
    bad[2, 1] = math.nan
    with pytest.raises(InvalidJetError, match="non-finite"):
        Jet(GOOD, ShowerParams.qcd(), tree, bad)
    with pytest.raises(InvalidJetError, match="ShowerParams"):
        Jet(GOOD, {"t_cut": 16.0})


def test_jet_is_immutable_copy():
    leaves = GOOD.copy()
    jet = Jet(leaves, ShowerParams.qcd())
    leaves[0, 0] = 99.0
    assert jet.leaves[0, 0] == 10.0
    with pytest.raises(ValueError):
        jet.leaves[0, 0] = 1.0


def test_collection_round_trips():
    qcd = generate(30, ShowerParams.qcd(), seed=3)
    w = generate(20, ShowerParams.w(), seed=4, first_index=100)
    both = JetCollection.concatenate([qcd, w])
    assert len(both) == 50
    assert list(both.jet_id[:3]) == [0, 1, 2] and both.jet_id[30] == 100
    assert both[30].jet_type == "W" and both[0].jet_type == "QCD"
    assert both[30].params == ShowerParams.w()
    for original, copy in ((qcd[4], both[4]), (w[7], both[37])):
        assert np.array_equal(original.leaves, copy.leaves)
        assert original.truth == copy.truth
        assert np.array_equal(original.node_momenta, copy.node_momenta)
    rebuilt = JetCollection.from_jets(list(both))
    sub = both[10:40:3]
    assert len(sub) == 10 and sub[1].jet_id == both[13].jet_id
    assert np.array_equal(sub[1].leaves, both[13].leaves)
    for a, b in zip(rebuilt, both, strict=True):
        assert np.array_equal(a.leaves, b.leaves) and a.truth == b.truth
        assert a.jet_id == b.jet_id and a.seed == b.seed and a.params == b.params
    with pytest.raises(IndexError):
        both[50]
    assert both[-1].jet_id == both.jet_id[-1]
    assert "50 jets" in repr(both)


def test_awkward_round_trip_with_vector_behaviour():
    jets = generate(25, ShowerParams.w(), seed=9)
    arr = jets.to_awkward()
    assert ak.fields(arr)[:3] == ["leaves", "tree", "node_momenta"]
    vector.register_awkward()
    masses = ak.to_numpy(ak.sum(arr.leaves, axis=1).mass)
    assert np.allclose(masses, 80.0, rtol=1e-9)
    assert ak.to_list(arr.tree[0].left)[0] == int(jets[0].truth.children[0, 0])
    back = JetCollection.from_awkward(arr)
    for a, b in zip(back, jets, strict=True):
        assert np.array_equal(a.leaves, b.leaves)
        assert a.truth == b.truth
        assert np.array_equal(a.node_momenta, b.node_momenta)
        assert a.params == b.params and a.jet_id == b.jet_id and a.seed == b.seed
    mixed = JetCollection.concatenate([jets, generate(5, ShowerParams.qcd(), seed=2)])
    types = JetCollection.from_awkward(mixed.to_awkward()).jet_type
    assert types.tolist() == mixed.jet_type.tolist() == ["W"] * 25 + ["QCD"] * 5
    assert len({id(t) for t in types}) == 2  # one str per value (not one per row)
    no_truth = JetCollection.from_jets([Jet(GOOD, ShowerParams.qcd(), jet_id=5)])
    again = JetCollection.from_awkward(no_truth.to_awkward())
    assert again[0].truth is None and again[0].jet_id == 5
    # extra columns (a particle file's entry numbers, legacy deltas) go there and back too
    jets.with_columns(node={"deltas": np.arange(jets.children.shape[0]) * 0.5},
                      jet={"entry": np.arange(len(jets)) + 100.0})
    back = JetCollection.from_awkward(jets.to_awkward())
    assert back.jet_columns.keys() == {"entry"} and back.node_columns.keys() == {"deltas"}
    assert np.array_equal(back.jet_columns["entry"], jets.jet_columns["entry"])
    assert np.array_equal(back.node_columns["deltas"], jets.node_columns["deltas"])
    assert "jet_columns" not in ak.fields(generate(2, ShowerParams.w(), seed=1).to_awkward())


def test_collection_rejects_inconsistent_columns():
    jets = generate(3, ShowerParams.qcd(), seed=1)
    with pytest.raises(InvalidJetError, match="offsets"):
        JetCollection(
            leaves=jets.leaves, leaf_offsets=jets.leaf_offsets[:-1], children=jets.children,
            leaf_of_node=jets.leaf_of_node, node_offsets=jets.node_offsets, jet_id=jets.jet_id,
            seed=jets.seed, jet_type=jets.jet_type, params=jets.params,
        )


def test_extra_columns_follow_the_collection():
    a = generate(4, ShowerParams.qcd(), seed=1)
    b = generate(3, ShowerParams.qcd(), seed=2)
    a.with_columns(node={"deltas": np.arange(a.children.shape[0])}, jet={"w": [1, 2, 3, 4]})
    b.with_columns(node={"deltas": -np.arange(b.children.shape[0])}, jet={"other": [0, 0, 0]})
    sub = a[1:3]
    lo, hi = a.node_offsets[1], a.node_offsets[3]
    assert np.array_equal(sub.node_columns["deltas"], np.arange(lo, hi))
    assert np.array_equal(sub.jet_columns["w"], [2, 3])
    both = JetCollection.concatenate([a, b])
    assert set(both.node_columns) == {"deltas"} and both.jet_columns == {}
    assert both.node_columns["deltas"].shape[0] == both.children.shape[0]
    with pytest.raises(InvalidJetError, match="jet column 'x' has 2 values, need 4"):
        a.with_columns(jet={"x": [1, 2]})
    assert "x" not in a.jet_columns  # a failed update changes nothing


def test_from_particles_reads_one_jet_like_jetastar_cluster():
    """Jet.from_particles: rows, dicts of coordinates and arrays give the jet jetastar.cluster
    clusters (default parameters, the clamp mass policy); a Jet is returned as it is."""
    v = vector.array({"pt": [50.0, 30.0, 12.0], "eta": [0.1, -0.2, 0.3],
                      "phi": [0.2, 0.4, 0.1], "mass": [0.0, 0.0, 0.0]})
    p4 = np.stack([v.E, v.px, v.py, v.pz], axis=1)
    jet = Jet.from_particles(p4)
    # the QCD defaults score the jet; its root is its own (it carried the Ginkgo 400 GeV root)
    qcd = ShowerParams.qcd()
    assert (jet.leaf_t >= 0).all() and jet.jet_type == jet.params.jet_type == "data"
    assert [getattr(jet.params, k) for k in ("t_cut", "lam", "lam_root")] == [16.0, 1.5, 1.5]
    root = jet.leaves.sum(axis=0)
    np.testing.assert_allclose(jet.params.root_momentum, root, rtol=1e-15)
    assert jet.params.t_root == pytest.approx(root[0] ** 2 - root[1:] @ root[1:], rel=1e-12)
    assert jet.params.m_hard == pytest.approx(math.sqrt(jet.params.t_root), rel=1e-15)
    assert np.array_equal(jet.likelihood_constants(), Jet(p4, qcd).likelihood_constants())
    np.testing.assert_allclose(jet.leaves, p4, rtol=1e-15)
    dicts = [{"pt": float(a), "eta": float(b), "phi": float(c), "mass": 0.0}
             for a, b, c in zip(v.pt, v.eta, v.phi, strict=True)]
    for same in (p4.tolist(), dicts):
        np.testing.assert_allclose(Jet.from_particles(same).leaves, jet.leaves, rtol=1e-12)
    assert Jet.from_particles(jet) is jet
    w = Jet.from_particles(p4, ShowerParams.w())
    assert w.params.lam_root == 3.0 and w.jet_type == "W"
    assert w.params.root_momentum == jet.params.root_momentum
    # below t_cut no tree is possible: the parameters' own root stays (a Jet needs t_root > t_cut)
    soft = Jet.from_particles(p4 / 100.0)
    assert soft.params.t_root == qcd.t_root and soft.jet_type == "data"


def test_an_invalid_jet_kept_by_validate_false_names_its_own_problem():
    """jets[1] of a one-particle jet said "field 'params.m_hard': must be finite and > 0, got nan"
    (its parameters are made from its leaves); it names the leaves' problem and the jet."""
    parts = ak.Array([
        [{"pt": 50.0, "eta": 0.1, "phi": 0.2, "mass": 0.0},
         {"pt": 30.0, "eta": -0.3, "phi": 0.5, "mass": 0.0}],
        [{"pt": 40.0, "eta": 0.0, "phi": 0.0, "mass": 0.0}],
        [],
        [{"pt": 50.0, "eta": 0.1, "phi": 0.2, "mass": 0.0},
         {"pt": 30.0, "eta": 0.1001, "phi": 0.2001, "mass": 0.0}],
    ])
    jets = JetCollection.from_momenta(parts, t_cut=1.0, validate=False)
    assert jets[0].n_leaves == 2
    with pytest.raises(InvalidJetError, match=r"^jet 1, field 'leaves': a jet needs at least 2 "
                                              r"leaves, got 1$"):
        jets[1]
    with pytest.raises(InvalidJetError, match=r"^jet 2, field 'leaves': .* got 0$"):
        jets[2]
    with pytest.raises(InvalidJetError, match=r"^jet 3, field 'params.t_cut': t_cut = 1.0 GeV²"):
        jets[3]


def test_rows_that_cannot_be_e_px_py_pz_say_how_rows_are_read():
    rows = np.array([[0.5, 120.0, 1.1, 0.0], [0.55, 60.0, 1.05, 0.0]])  # (eta, pt, phi, mass)
    with pytest.raises(InvalidJetError, match=r"spacelike.*rows are read as \(E, px, py, pz\)"):
        Jet(rows)
    with pytest.raises(InvalidJetError, match=r"non-positive energy.*rows are read as"):
        Jet(-rows)
