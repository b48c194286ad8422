"""Jets from particles in memory: every coordinate system via vector, dense arrays, the mass policy."""

from __future__ import annotations

import math

import awkward as ak
import numpy as np
import pytest
import vector

from jetastar import InvalidJetError, Jet, JetCollection
from jetastar.clustering import greedy
from jetastar.momenta import apply_mass_policy, detect_coordinates, mass_report, rap_phi_kt2

vector.register_awkward()


def _random_particles(seed: int = 1, n_jets: int = 6) -> tuple[np.ndarray, np.ndarray]:
    """Massless and massive particles around one axis: (counts, (M, 4) pt, eta, phi, mass)."""
    rng = np.random.default_rng(seed)
    counts = rng.integers(2, 12, n_jets)
    m = counts.sum()
    cols = np.stack([rng.exponential(20.0, m) + 1.0, rng.normal(0.5, 0.3, m),
                     rng.normal(1.0, 0.3, m), np.where(rng.random(m) < 0.5, 0.0, 0.14)], axis=1)
    return counts, cols


def _reference(cols: np.ndarray) -> np.ndarray:
    v = vector.array({"pt": cols[:, 0], "eta": cols[:, 1], "phi": cols[:, 2], "mass": cols[:, 3]})
    return np.stack([v.E, v.px, v.py, v.pz], axis=1)


COORDINATE_SYSTEMS = {
    "ptetaphimass": lambda v: {"pt": v.pt, "eta": v.eta, "phi": v.phi, "mass": v.mass},
    "ptetaphiE": lambda v: {"pt": v.pt, "eta": v.eta, "phi": v.phi, "E": v.E},
    "cartesian": lambda v: {"px": v.px, "py": v.py, "pz": v.pz, "E": v.E},
    "cartesian_mass": lambda v: {"px": v.px, "py": v.py, "pz": v.pz, "M": v.mass},
    "delphes_names": lambda v: {"PT": v.pt, "Eta": v.eta, "Phi": v.phi, "E": v.E},
    "ptphipz": lambda v: {"pt": v.pt, "phi": v.phi, "pz": v.pz, "energy": v.E},
}


@pytest.mark.parametrize("system", sorted(COORDINATE_SYSTEMS))
def test_awkward_records_in_any_coordinates(system):
    counts, cols = _random_particles()
    ref = _reference(cols)
    v = vector.array({"E": ref[:, 0], "px": ref[:, 1], "py": ref[:, 2], "pz": ref[:, 3]})
    fields = {k: np.asarray(x, dtype=np.float64) for k, x in COORDINATE_SYSTEMS[system](v).items()}
    arr = ak.unflatten(ak.zip(fields), counts)
    jets = JetCollection.from_momenta(arr, t_cut=0.01, mass_policy="keep")
    assert np.array_equal(jets.n_leaves, counts)
    np.testing.assert_allclose(jets.leaves, ref, rtol=1e-12, atol=1e-9)
    assert np.array_equal(jets.jet_id, np.arange(len(counts)))
    assert jets.children.shape == (0, 2)  # no truth trees
    np.testing.assert_allclose(jets.params["root_momentum"],
                               np.add.reduceat(ref, np.r_[0, np.cumsum(counts)[:-1]]), rtol=1e-12)


def test_vector_momentum4d_records_with_vector_names():
    counts, cols = _random_particles(2)
    arr = ak.unflatten(vector.zip({"pt": cols[:, 0], "eta": cols[:, 1], "phi": cols[:, 2],
                                   "mass": cols[:, 3]}), counts)
    jets = JetCollection.from_momenta(arr, t_cut=0.01, mass_policy="keep")
    np.testing.assert_allclose(jets.leaves, _reference(cols), rtol=1e-12, atol=1e-9)
    # records named only by vector's internal coordinates (rho, phi, eta, tau)
    ref = _reference(cols)
    vv = vector.array({"E": ref[:, 0], "px": ref[:, 1], "py": ref[:, 2], "pz": ref[:, 3]})
    other = ak.unflatten(ak.zip({"x": vv.px, "y": vv.py, "z": vv.pz, "t": vv.E},
                                with_name="Momentum4D"), counts)
    np.testing.assert_allclose(JetCollection.from_momenta(other, t_cut=0.01).leaves[:, 1:],
                               ref[:, 1:], rtol=1e-12, atol=1e-9)


@pytest.mark.parametrize("system", ["cartesian", "ptetaphiE", "ptetaphimass"])
def test_vector_numpy_arrays_in_any_coordinates(system):
    """vector's numpy arrays store vector's own field names (x, y, z, t; rho, phi, eta, tau...):
    one jet (jetastar.cluster, Jet) and a padded (n_jets, n_particles) array (from_momenta) are
    read through vector's properties."""
    import jetastar
    from jetastar import Jet

    counts, cols = _random_particles(3, n_jets=1)
    ref = _reference(cols)
    v = vector.array({"E": ref[:, 0], "px": ref[:, 1], "py": ref[:, 2], "pz": ref[:, 3]})
    one = vector.array({k: np.asarray(x) for k, x in COORDINATE_SYSTEMS[system](v).items()})
    assert not set(one.dtype.names) >= {"px", "E"}  # vector renamed the fields
    np.testing.assert_allclose(Jet(one).leaves[:, 1:], ref[:, 1:], rtol=1e-12, atol=1e-9)
    res = jetastar.cluster(one, "greedy")
    # particles get the default mass policy (clamp); a Jet is taken as it is. The clamp is
    # applied to the leaves as read (vector's conversion from pt, eta, phi, mass rounds them
    # differently from ``ref`` in the last bit on some processors)
    clamped = Jet(Jet(one).leaves).with_nonnegative_masses()
    assert res.log_likelihood == jetastar.cluster(clamped, "greedy").log_likelihood
    dense = vector.array({k: np.stack([np.asarray(x)] * 3)
                          for k, x in COORDINATE_SYSTEMS[system](v).items()})
    jets = JetCollection.from_momenta(dense, t_cut=0.01)
    assert jets.n_leaves.tolist() == [counts[0]] * 3
    np.testing.assert_allclose(jets.leaves[:counts[0], 1:], ref[:, 1:], rtol=1e-12, atol=1e-9)
    # several jets are not one: the message says where they go
    with pytest.raises(InvalidJetError, match=r"got \(3, \d+, 4\); several jets .*from_momenta"):
        Jet(dense)
    # one jet as a plain list of (E, px, py, pz) rows
    from_rows = jetastar.cluster(ref.tolist(), "greedy")
    assert from_rows.log_likelihood == pytest.approx(res.log_likelihood, rel=1e-12)
    np.testing.assert_array_equal(from_rows.tree.children, res.tree.children)
    with pytest.raises(InvalidJetError, match="rows of four numbers"):
        jetastar.cluster([[1.0, 0.0, 0.0], [1.0]], "greedy")
    # ... as dicts of coordinates, vector objects, or a structured numpy array
    rows = COORDINATE_SYSTEMS[system](v)
    dicts = [{k: float(np.asarray(x)[i]) for k, x in rows.items()} for i in range(len(ref))]
    objs = [vector.obj(E=e, px=px, py=py, pz=pz) for e, px, py, pz in ref]
    structured = np.array([tuple(d.values()) for d in dicts],
                          dtype=[(k, "f8") for k in rows])
    # every form of particles gets the same mass policy, hence the same tree
    for particles in (dicts, structured, objs, ak.Array(dicts)):
        found = jetastar.cluster(particles, "greedy")
        assert found.log_likelihood == pytest.approx(res.log_likelihood, rel=1e-12)
        np.testing.assert_array_equal(found.tree.children, res.tree.children)
    with pytest.raises(InvalidJetError, match="dicts of momentum coordinates or vector 4-vectors"):
        jetastar.cluster([vector.obj(x=1.0, y=2.0)] * 2, "greedy")


def test_massless_particles_as_numbers_get_the_default_mass_policy():
    """Massless particles as a plain (n, 4) array: E² − |p|² rounds to ±tiny, and in the symmetric
    form a child with t < 0 makes its split -inf, so every tree was -inf (while the same particles
    as awkward records, which get the default mass policy, clustered fine). jetastar.cluster and a
    list of such arrays now apply the same policy; a Jet is still taken as it is."""
    import jetastar
    from jetastar import Jet

    rng = np.random.default_rng(3)
    v = vector.array({"pt": rng.exponential(20.0, 12) + 1.0, "eta": rng.normal(0.3, 0.2, 12),
                      "phi": rng.normal(1.0, 0.2, 12), "mass": np.zeros(12)})
    p4 = np.stack([v.E, v.px, v.py, v.pz], axis=1)
    assert (p4[:, 0] ** 2 - (p4[:, 1:] ** 2).sum(axis=1) < 0).any()
    as_is = jetastar.cluster(Jet(p4), "greedy")
    assert as_is.log_likelihood == -np.inf and as_is.status == "all_inf"
    records = jetastar.cluster(ak.zip({"E": p4[:, 0], "px": p4[:, 1], "py": p4[:, 2],
                                       "pz": p4[:, 3]}), "greedy")
    assert np.isfinite(records.log_likelihood)
    for particles in (p4, p4.tolist()):
        assert jetastar.cluster(particles, "greedy").log_likelihood == records.log_likelihood
    table = jetastar.cluster([p4, p4], "greedy")
    assert table.log_likelihood.tolist() == [records.log_likelihood] * 2


def test_explicit_mapping():
    counts, cols = _random_particles(3)
    arr = ak.unflatten(ak.zip({"a": cols[:, 0], "b": cols[:, 1], "c": cols[:, 2],
                               "d": cols[:, 3]}), counts)
    jets = JetCollection.from_momenta(arr, mapping={"pt": "a", "eta": "b", "phi": "c", "mass": "d"},
                                      t_cut=0.01, mass_policy="keep")
    np.testing.assert_allclose(jets.leaves, _reference(cols), rtol=1e-12, atol=1e-9)
    same = JetCollection.from_momenta(arr, mapping={"PT": "a", "Eta": "b", "Phi": "c", "M": "d"},
                                      t_cut=0.01, mass_policy="keep")
    np.testing.assert_array_equal(same.leaves, jets.leaves)
    with pytest.raises(InvalidJetError, match="no complete set of momentum coordinates"):
        JetCollection.from_momenta(arr)
    with pytest.raises(InvalidJetError, match=r"\['charge'\] are not momentum coordinates"):
        JetCollection.from_momenta(arr, mapping={"pt": "a", "eta": "b", "phi": "c", "charge": "d"})
    with pytest.raises(InvalidJetError, match="no complete set"):
        JetCollection.from_momenta(arr, mapping={"pt": "a", "eta": "b", "phi": "c"})


def test_records_of_jagged_lists_and_branch_prefixes(tmp_path):
    """``tree.arrays([...])`` of separate jagged branches gives a record of per-jet lists
    (``n * {pt: var * float32, ...}``), with NanoAOD's prefixed names (``PFCands_pt``) and a
    per-jet count: read as the same jets as the zipped records (this crashed inside awkward)."""
    import uproot

    import jetastar
    from jetastar.ginkgo import ShowerParams, generate

    gen = generate(6, ShowerParams.qcd(), seed=5)
    counts = np.asarray([j.n_leaves for j in gen])
    p4 = np.concatenate([np.asarray(j.leaves) for j in gen])
    v = vector.array({"E": p4[:, 0], "px": p4[:, 1], "py": p4[:, 2], "pz": p4[:, 3]})
    zipped = ak.unflatten(ak.zip({"pt": v.pt, "eta": v.eta, "phi": v.phi, "mass": v.mass}),
                          counts)
    ref = JetCollection.from_momenta(zipped, t_cut=0.01, mass_policy="keep")
    fields = {f"PFCands_{c}": zipped[c] for c in ("pt", "eta", "phi", "mass")}
    path = tmp_path / "nano.root"
    with uproot.recreate(path) as f:
        f["Events"] = {"nPFCands": ak.num(zipped, axis=1), **fields}
    with uproot.open(path) as f:
        read = f["Events"].arrays(filter_name=["nPFCands", "PFCands_*"])
    assert ak.to_layout(read).is_record and "nPFCands" in read.fields
    for arr in (read, ak.Array({c: zipped[c] for c in zipped.fields}), ak.Array(fields)):
        jets = JetCollection.from_momenta(arr, t_cut=0.01, mass_policy="keep")
        np.testing.assert_allclose(jets.leaves, ref.leaves, rtol=1e-12, atol=1e-9)
        assert np.array_equal(jets.n_leaves, counts)
    # jetastar.cluster takes it as many jets, not as one jet of list-valued particles
    table = jetastar.cluster(read, "greedy")
    expected = jetastar.cluster(zipped, "greedy").log_likelihood
    assert len(table) == len(counts) and np.isfinite(expected).all()
    np.testing.assert_allclose(table.log_likelihood, expected, rtol=1e-9)
    # lists of different lengths in one jet, and two collections' coordinates: clear errors
    bad = ak.Array({**fields, "PFCands_eta": ak.concatenate([zipped.eta[:2, :-1],
                                                             zipped.eta[2:]])})
    with pytest.raises(InvalidJetError, match=r"jet 0: the particle fields are lists of "
                                              r"different lengths \(PFCands_pt: \d+, PFCands_eta"):
        JetCollection.from_momenta(bad)
    two = ak.Array({**fields, **{f"Jet_{c}": zipped[c] for c in ("pt", "eta", "phi", "mass")}})
    with pytest.raises(InvalidJetError, match=r"several particle collections: 'PFCands' .*'Jet'"):
        JetCollection.from_momenta(two)


def test_list_of_per_jet_arrays():
    """A list of (n_i, 4) arrays, one per jet (E, px, py, pz unless components say otherwise), is
    many jets for from_momenta, jetastar.cluster and cluster_jets; one jet's rows stay one jet."""
    import jetastar
    from jetastar.ginkgo import ShowerParams, generate

    gen = generate(5, ShowerParams.qcd(), seed=11)
    arrays = [np.asarray(j.leaves) for j in gen]
    jets = JetCollection.from_momenta(arrays, mass_policy="keep")
    assert jets.n_leaves.tolist() == [a.shape[0] for a in arrays]
    np.testing.assert_array_equal(jets.leaves, np.concatenate(arrays))
    v = vector.array({"E": jets.leaves[:, 0], "px": jets.leaves[:, 1], "py": jets.leaves[:, 2],
                      "pz": jets.leaves[:, 3]})
    cols = np.stack([v.pt, v.eta, v.phi, v.mass], axis=1)
    offsets = np.cumsum([a.shape[0] for a in arrays])[:-1]
    in_pt = JetCollection.from_momenta(np.split(cols, offsets), "pt,eta,phi,mass",
                                       mass_policy="keep")
    np.testing.assert_allclose(in_pt.leaves, jets.leaves, rtol=1e-12, atol=1e-9)
    expected = jetastar.cluster(gen, "greedy").log_likelihood
    for many in (arrays, tuple(arrays), [a.tolist() for a in arrays]):
        table = jetastar.cluster(many, "greedy")
        assert len(table) == len(arrays)
        np.testing.assert_allclose(table.log_likelihood, expected, rtol=1e-9)
    assert len(jetastar.cluster_jets(arrays, ["kt", "greedy"])["kt"]) == len(arrays)
    # a one-particle jet among them is recorded as failed, the others run
    table = jetastar.cluster([arrays[0][:1], *arrays[1:]], "greedy")
    assert table.status.tolist() == ["failed"] + ["ok"] * (len(arrays) - 1)
    with pytest.raises(InvalidJetError, match=r"jet 1, .*at least 2 particles"):
        JetCollection.from_momenta([arrays[0], arrays[1][:1]])
    # one jet's rows are one jet
    assert jetastar.cluster(arrays[0].tolist(), "greedy").log_likelihood == pytest.approx(
        expected[0], rel=1e-12)


@pytest.mark.parametrize("order", ["E,px,py,pz", "px,py,pz,E", "pt,eta,phi,mass"])
def test_dense_with_padding_and_with_mask(order):
    counts, cols = _random_particles(4)
    ref = _reference(cols)
    v = vector.array({"E": ref[:, 0], "px": ref[:, 1], "py": ref[:, 2], "pz": ref[:, 3]})
    values = {"E": ref[:, 0], "px": ref[:, 1], "py": ref[:, 2], "pz": ref[:, 3],
              "pt": v.pt, "eta": v.eta, "phi": v.phi, "mass": cols[:, 3]}
    names = order.split(",")
    dense = np.zeros((len(counts), 15, 4))
    mask = np.zeros((len(counts), 15), bool)
    rng = np.random.default_rng(5)
    q = 0
    for i, n in enumerate(counts):
        slots = np.sort(rng.choice(15, n, replace=False))  # padding anywhere, not only at the end
        dense[i, slots] = np.stack([values[c][q:q + n] for c in names], axis=1)
        mask[i, slots] = True
        q += n
    for kw in ({}, {"mask": mask}):
        jets = JetCollection.from_momenta(dense, order, t_cut=0.01, mass_policy="keep", **kw)
        assert np.array_equal(jets.n_leaves, counts)
        np.testing.assert_allclose(jets.leaves, ref, rtol=1e-12, atol=1e-9)
    structured = np.zeros(dense.shape[:2], dtype=[(c, "f8") for c in names])
    for j, c in enumerate(names):
        structured[c] = dense[..., j]
    np.testing.assert_allclose(JetCollection.from_momenta(structured, t_cut=0.01,
                                                          mass_policy="keep").leaves,
                               ref, rtol=1e-12, atol=1e-9)


def test_dense_bad_padding_and_components():
    dense = np.zeros((2, 4, 4))
    dense[:, :3] = [[50.0, 0.1, 0.2, 0.0], [40.0, -0.1, 0.3, 0.0], [10.0, 0.0, 0.0, 0.0]]
    mask = np.zeros((2, 4), bool)
    mask[:, :2] = True
    with pytest.raises(InvalidJetError, match=r"jet 0, field 'particles': padded slot 2"):
        JetCollection.from_momenta(dense, "pt,eta,phi,mass", mask=mask, t_cut=1.0)
    with pytest.raises(InvalidJetError, match="components"):
        JetCollection.from_momenta(dense)
    with pytest.raises(InvalidJetError, match="components"):
        JetCollection.from_momenta(dense, "pt,eta,phi,charge")


def test_bad_particles_name_jet_and_field():
    good = {"pt": [50.0, 30.0], "eta": [0.1, -0.3], "phi": [0.2, 0.5], "mass": [0.0, 0.0]}

    def arr(**change: list[float]) -> ak.Array:
        return ak.Array([ak.zip({**good}).tolist(), ak.zip({**good, **change}).tolist()])

    with pytest.raises(InvalidJetError, match=r"jet 1, field 'eta': particle 1 has a non-finite"):
        JetCollection.from_momenta(arr(eta=[0.1, np.nan]), t_cut=1.0)
    with pytest.raises(InvalidJetError, match=r"jet 1, field 'mass': particle 0 is spacelike"):
        JetCollection.from_momenta(arr(mass=[-3.0, 0.0]), t_cut=1.0)
    one = ak.Array([ak.zip(good).tolist(), ak.zip(good).tolist()[:1]])
    with pytest.raises(InvalidJetError, match=r"jet 1, field 'particles': .*at least 2 particles"):
        JetCollection.from_momenta(one, t_cut=1.0)
    # a jet whose mass is below t_cut could only score -inf: an error, not a silent -inf
    with pytest.raises(InvalidJetError, match=r"field 'params.t_cut'.*every tree has likelihood"):
        JetCollection.from_momenta(arr(), t_cut=1e5)
    # kept (and counted) with validate=False
    jets = JetCollection.from_momenta(arr(eta=[0.1, np.nan]), t_cut=1.0, validate=False)
    assert len(jets) == 2


def test_mass_policy_clamp_keep_and_mass():
    counts, cols = _random_particles(6, n_jets=30)
    cols[:, 3] = 0.0  # massless, as detector particles are
    arr = ak.unflatten(ak.zip({"pt": cols[:, 0], "eta": cols[:, 1], "phi": cols[:, 2],
                               "mass": cols[:, 3]}), counts)
    kept = JetCollection.from_momenta(arr, t_cut=1.0, mass_policy="keep")
    t_kept = kept.leaves[:, 0] ** 2 - (kept.leaves[:, 1:] ** 2).sum(axis=1)
    negative = t_kept < 0
    assert negative.any() and (t_kept > 0).any()  # rounding goes both ways
    clamped = JetCollection.from_momenta(arr, t_cut=1.0)
    t_clamp = clamped.leaves[:, 0] ** 2 - (clamped.leaves[:, 1:] ** 2).sum(axis=1)
    assert np.all(t_clamp >= 0.0)
    changed = clamped.leaves[:, 0] != kept.leaves[:, 0]
    assert np.array_equal(changed, negative)  # exactly the negative ones
    np.testing.assert_allclose(clamped.leaves[:, 0], kept.leaves[:, 0], rtol=1e-14)
    assert np.array_equal(clamped.leaves[:, 1:], kept.leaves[:, 1:])
    report = mass_report(clamped)
    assert report["particles_touched"] == int(negative.sum())
    assert report["jets_touched"] == int(np.count_nonzero(
        np.add.reduceat(negative, np.r_[0, np.cumsum(counts)[:-1]])))
    assert mass_report(kept)["particles_touched"] == 0
    # the symmetric likelihood: a negative leaf makes every tree -inf, the clamp fixes it
    bad_jet = int(np.searchsorted(np.cumsum(counts), np.flatnonzero(negative)[0], side="right"))
    assert greedy(kept[bad_jet]).log_likelihood == -np.inf
    assert greedy(kept[bad_jet]).status == "all_inf"
    assert np.isfinite(greedy(clamped[bad_jet]).log_likelihood)
    pion = JetCollection.from_momenta(arr, t_cut=1.0, mass_policy=0.13957)
    m2 = pion.leaves[:, 0] ** 2 - (pion.leaves[:, 1:] ** 2).sum(axis=1)
    np.testing.assert_allclose(m2, 0.13957**2, rtol=1e-6, atol=1e-9)
    assert mass_report(pion)["particles_touched"] == len(cols)
    # a mass of 0 ("massless", as asked for) leaves no particle below t = 0: none is -inf
    massless = JetCollection.from_momenta(arr, t_cut=1.0, mass_policy=0.0)
    m2 = massless.leaves[:, 0] ** 2 - (massless.leaves[:, 1:] ** 2).sum(axis=1)
    assert np.all(m2 >= 0.0) and np.all(massless.jet_columns["n_negative_t"] == 0)
    np.testing.assert_allclose(massless.leaves[:, 0], kept.leaves[:, 0], rtol=1e-14)
    assert np.isfinite(greedy(massless[bad_jet]).log_likelihood)
    with pytest.raises(InvalidJetError, match="mass policy"):
        JetCollection.from_momenta(arr, mass_policy="zero")


def test_apply_mass_policy_leaves_spacelike_alone():
    p = np.array([[1.0, 0.0, 0.0, 2.0]])  # clearly spacelike: not a rounding problem
    assert not apply_mass_policy(p).any()
    assert p[0, 0] == 1.0


def test_detect_coordinates_prefers_cartesian_and_lists_fields():
    assert detect_coordinates(["Mass", "PT", "Eta", "Phi"]) == {
        "pt": "PT", "eta": "Eta", "phi": "Phi", "mass": "Mass"}
    with pytest.raises(InvalidJetError, match=r"\['charge', 'eta', 'pt'\]"):
        detect_coordinates(["pt", "eta", "charge"])


def test_negative_t_particles_are_counted():
    counts, cols = _random_particles(7, n_jets=10)
    cols[:, 3] = 0.0
    arr = ak.unflatten(ak.zip({"pt": cols[:, 0], "eta": cols[:, 1], "phi": cols[:, 2],
                               "mass": cols[:, 3]}), counts)
    kept = JetCollection.from_momenta(arr, t_cut=1.0, mass_policy="keep")
    t = kept.leaves[:, 0] ** 2 - (kept.leaves[:, 1:] ** 2).sum(axis=1)
    per_jet = np.add.reduceat((t < 0).astype(float), np.r_[0, np.cumsum(counts)[:-1]])
    assert per_jet.sum() > 0
    np.testing.assert_array_equal(kept.jet_columns["n_negative_t"], per_jet)
    assert mass_report(kept)["particles_negative_t"] == int(per_jet.sum())
    assert mass_report(JetCollection.from_momenta(arr, t_cut=1.0))["particles_negative_t"] == 0


def test_old_module_paths_still_work():
    import jetastar.io.particles as old_io

    import jetastar.particles as old
    from jetastar import momenta
    from jetastar.io import particle_files

    assert old.from_dense is momenta.from_dense and old.mass_report is momenta.mass_report
    assert old_io is particle_files and old_io.read_particles is particle_files.read_particles


def test_rap_phi_kt2_follows_fastjet_conventions():
    rng = np.random.default_rng(4)
    for _ in range(20):
        px, py, pz = rng.normal(0.0, 30.0, 3)
        e = math.sqrt(px * px + py * py + pz * pz + rng.uniform(0.0, 25.0))
        rap, phi, kt2 = rap_phi_kt2(e, px, py, pz)
        v = vector.obj(E=e, px=px, py=py, pz=pz)
        assert rap == pytest.approx(v.rapidity, rel=1e-12, abs=1e-12)
        assert phi == pytest.approx(v.phi % (2 * math.pi), rel=1e-12, abs=1e-12)
        assert 0.0 <= phi < 2 * math.pi and kt2 == px * px + py * py
    # a massless particle along the beam sits at FastJet's maximal rapidity
    assert rap_phi_kt2(5.0, 0.0, 0.0, 5.0) == (1e5 + 5.0, 0.0, 0.0)
    assert rap_phi_kt2(5.0, 0.0, 0.0, -5.0)[0] == -(1e5 + 5.0)


def _nano_like(n_jets: int = 6, seed: int = 3) -> ak.Array:
    """Massless float32 particles as NanoAOD stores them (pt, eta, phi, mass)."""
    rng = np.random.default_rng(seed)
    counts = rng.integers(3, 9, n_jets)
    m = int(counts.sum())
    cols = {"pt": rng.exponential(8.0, m) + 0.5, "eta": rng.normal(0, 0.3, m),
            "phi": rng.normal(0, 0.3, m), "mass": np.zeros(m)}
    return ak.zip({k: ak.unflatten(v.astype(np.float32), counts) for k, v in cols.items()})


def test_vector_names_and_float32_read_like_the_same_data_under_other_names():
    """``vector.zip`` renames pt/mass to rho/tau; those records were converted by vector in
    float32 (log-likelihoods moved by up to 2.8 nats on NanoAOD jets), and one such jet was not
    read at all (its record name was lost)."""
    plain = _nano_like()
    named = vector.zip({k: plain[k] for k in ("pt", "eta", "phi", "mass")})
    assert set(ak.fields(named)) == {"rho", "eta", "phi", "tau"}
    a = JetCollection.from_momenta(plain, t_cut=1.0)
    b = JetCollection.from_momenta(named, t_cut=1.0)
    assert np.array_equal(a.leaves, b.leaves)
    for i in range(len(a)):
        one = Jet.from_particles(named[i])
        assert np.array_equal(one.leaves, a[i].leaves)
    xyzt = ak.zip({"x": ak.Array([[1.0, 2.0, -1.0]]), "y": ak.Array([[0.5, 1.0, 0.2]]),
                   "z": ak.Array([[10.0, 20.0, 5.0]]), "t": ak.Array([[11.0, 23.0, 6.0]])},
                  with_name="Momentum4D")
    assert Jet.from_particles(xyzt[0]).leaves.tolist() == [
        [11.0, 1.0, 0.5, 10.0], [23.0, 2.0, 1.0, 20.0], [6.0, -1.0, 0.2, 5.0]]


def test_missing_jets_and_particles_are_named():
    """A ``None`` jet (e.g. from ``ak.mask``) gave "the particle counts add up to
    -9223372036854775807"."""
    plain = _nano_like()
    masked = ak.mask(plain, ak.num(plain) > 4)
    first = int(np.flatnonzero(ak.to_numpy(ak.num(plain) <= 4))[0])
    with pytest.raises(InvalidJetError, match=rf"jet {first}, field 'particles': the jet is "
                                              r"missing \(None"):
        JetCollection.from_momenta(masked, t_cut=1.0)
    holes = ak.Array([[{"px": 1.0, "py": 2.0, "pz": 3.0, "E": 10.0}, None,
                       {"px": 1.0, "py": -2.0, "pz": 3.0, "E": 10.0}]])
    with pytest.raises(InvalidJetError, match=r"jet 0, field 'particles': particle 1 is missing"):
        JetCollection.from_momenta(holes)
    # without None, the same arrays are read
    assert len(JetCollection.from_momenta(plain[ak.num(plain) > 4], t_cut=1.0)) == len(plain) - \
        int(np.sum(ak.to_numpy(ak.num(plain) <= 4)))


def test_masked_arrays_are_not_read_through_their_mask():
    """numpy masked arrays: a padded block's mask says which slots are particles; one jet's
    masked array is refused (its masked slots were read as particles)."""
    one = np.array([[50.0, 1.0, 2.0, 49.9], [30.0, 0.5, 1.0, 29.9], [20.0, -0.5, 1.0, 19.9],
                    [999.0, 5.0, 5.0, -1.0]])
    hidden = np.zeros_like(one, dtype=bool)
    hidden[3] = True
    with pytest.raises(InvalidJetError, match="a masked array"):
        Jet.from_particles(np.ma.masked_array(one, mask=hidden))
    dense = np.stack([one, one])
    jets = JetCollection.from_momenta(np.ma.masked_array(dense, mask=np.stack([hidden, hidden])),
                                      "E,px,py,pz")
    assert jets.n_leaves.tolist() == [3, 3]
    assert np.array_equal(jets[0].leaves, one[:3])


def test_a_jet_id_of_another_length_is_named():
    """It was found among the collection's columns, as a list of every internal column."""
    plain = _nano_like()
    for ids in (np.arange(3), np.arange(len(plain) + 1)):
        with pytest.raises(InvalidJetError, match=rf"jet_id has {ids.size} values, need one per "
                                                  rf"jet: {len(plain)}"):
            JetCollection.from_momenta(plain, t_cut=1.0, jet_id=ids)
    dense = np.zeros((4, 3, 4))
    dense[:, :2] = [[50.0, 1.0, 2.0, 49.0], [30.0, 1.0, 1.0, 29.0]]
    with pytest.raises(InvalidJetError, match="jet_id has 2 values, need one per jet: 4"):
        JetCollection.from_momenta(dense, "E,px,py,pz", jet_id=[1, 2])
    assert JetCollection.from_momenta(plain, t_cut=1.0, jet_id=np.arange(len(plain)) + 7
                                      ).jet_id.tolist() == list(range(7, 7 + len(plain)))


def test_zero_padded_records_are_named_as_padding():
    flat = ak.Array([[{"pt": 50.0, "eta": 0.1, "phi": 0.2, "mass": 0.0},
                      {"pt": 30.0, "eta": -0.3, "phi": 0.5, "mass": 0.0}],
                     [{"pt": 40.0, "eta": 0.0, "phi": 0.0, "mass": 0.0},
                      {"pt": 40.0, "eta": 1.0, "phi": 1.0, "mass": 0.0},
                      {"pt": 4.0, "eta": 1.0, "phi": 1.0, "mass": 0.0}]])
    zero = {"pt": 0.0, "eta": 0.0, "phi": 0.0, "mass": 0.0}
    padded = ak.to_regular(ak.fill_none(ak.pad_none(flat, 4, clip=True), zero), axis=1)
    with pytest.raises(InvalidJetError, match=r"particle 2 has non-positive energy E = 0.0 GeV "
                                              r"\(every coordinate is 0: padding\?"):
        JetCollection.from_momenta(padded, t_cut=0.25)


@pytest.mark.parametrize("names", [("x", "y", "z", "t"), ("rho", "phi", "eta", "tau"),
                                   ("x", "y", "eta", "t")])
def test_plain_records_with_vectors_own_names(names):
    """ak.zip records named as vector names a Momentum4D's coordinates were refused ("no complete
    set of momentum coordinates") unless made with vector.zip."""
    vector.register_awkward()
    ref = ak.Array([[{"pt": 50.0, "eta": 0.1, "phi": 0.2, "mass": 0.5},
                     {"pt": 30.0, "eta": -0.3, "phi": 0.5, "mass": 0.3}]])
    v = vector.zip({"pt": ref.pt, "eta": ref.eta, "phi": ref.phi, "mass": ref.mass})
    plain = ak.zip({n: getattr(v, n) for n in names})
    np.testing.assert_allclose(JetCollection.from_momenta(plain, t_cut=1.0).leaves,
                               JetCollection.from_momenta(ref, t_cut=1.0).leaves, rtol=1e-14)


def test_a_vertex_next_to_momenta_is_not_read_as_momenta():
    assert detect_coordinates(["x", "y", "z", "t", "pt", "eta", "phi", "mass"]) == {
        "pt": "pt", "eta": "eta", "phi": "phi", "mass": "mass"}
