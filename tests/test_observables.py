"""Tree observables: Lund declustering, soft drop, exclusive subjets, root split, tree shape."""

from __future__ import annotations

import math

import awkward as ak
import numpy as np
import pytest

from jetastar import InvalidTreeError, Jet, JetCollection, Tree
from jetastar.clustering import greedy, kt
from jetastar.ginkgo import ShowerParams, generate
from jetastar.io import AlgorithmResults
from jetastar.observables import (
    exclusive_subjets,
    lund_declustering,
    root_split,
    soft_drop,
    tree_observables,
    tree_shape,
)


@pytest.fixture(scope="module")
def jets() -> JetCollection:
    return JetCollection.concatenate([
        generate(25, ShowerParams.qcd(), seed=3), generate(25, ShowerParams.w(), seed=4),
    ])


def _rap_phi(p: np.ndarray) -> tuple[float, float, float]:
    pt = math.hypot(p[1], p[2])
    return 0.5 * math.log((p[0] + p[3]) / (p[0] - p[3])), math.atan2(p[2], p[1]), pt


def _three_leaf_jet() -> tuple[Jet, Tree]:
    leaves = np.array([
        [60.0, 30.0, 20.0, 45.0], [25.0, 10.0, 12.0, 18.0], [12.0, 4.0, 7.0, 8.0],
    ])
    return Jet(leaves, ShowerParams.qcd()), Tree.from_nested(((0, 1), 2))


def test_lund_by_hand() -> None:
    jet, tree = _three_leaf_jet()
    lund = lund_declustering(jet, tree)
    assert len(lund) == 2
    p = jet.leaves
    # root split: (0+1) vs 2; then 0 vs 1 (the harder branch (0+1) is followed)
    pairs = [(p[0] + p[1], p[2]), (p[0], p[1])]
    for entry, (a, b) in zip(lund.tolist(), pairs, strict=True):
        ya, fa, pta = _rap_phi(a)
        yb, fb, ptb = _rap_phi(b)
        dphi = (fa - fb + math.pi) % (2 * math.pi) - math.pi
        dr = math.hypot(ya - yb, dphi)
        soft, hard = sorted((pta, ptb))
        assert entry["delta_r"] == pytest.approx(dr, rel=1e-12)
        assert entry["kt"] == pytest.approx(soft * dr, rel=1e-12)
        assert entry["z"] == pytest.approx(soft / (soft + hard), rel=1e-12)
        assert entry["kappa"] == pytest.approx(entry["z"] * dr, rel=1e-12)
        s = a + b
        assert entry["m"] == pytest.approx(math.sqrt(s[0] ** 2 - s[1:] @ s[1:]), rel=1e-12)


def test_lund_follows_harder_branch(jets: JetCollection) -> None:
    lund = lund_declustering(jets)
    assert len(lund) == len(jets)
    assert ak.all(lund.z <= 0.5) and ak.all(lund.z >= 0)
    # the masses along the primary chain of a (finite) truth tree decrease
    assert ak.all(lund.m[:, 1:] <= lund.m[:, :-1] + 1e-9)
    assert ak.all(ak.num(lund) >= 1) and ak.all(ak.num(lund) <= jets.n_leaves - 1)


def test_lund_counts_the_walk_it_writes() -> None:
    """Two branches whose pT² differ by one unit in the last place but whose pT round equal: the
    declusterings were counted along one branch (pT²) and written along the other (pT), past the
    end of the rows allocated (numba does not check bounds). Both passes now follow pT."""
    from jetastar.observables import _lund

    px0, py0 = 50.04807362210215, 45.49961541408508  # node 3 (leaves 0, 1)
    py1 = math.nextafter(py0, math.inf)  # node 2, a leaf: its pT² one ulp larger
    assert px0 * px0 + py0 * py0 < px0 * px0 + py1 * py1
    assert math.sqrt(px0 * px0 + py0 * py0) == math.sqrt(px0 * px0 + py1 * py1)
    node_p = np.array([[60.0, 30.0, 20.0, 0.0], [60.0, 20.0, 25.5, 0.0], [100.0, px0, py1, 0.0],
                       [100.0, px0, py0, 0.0], [220.0, 100.0, 91.0, 0.0]])
    children = np.array([[-1, -1], [-1, -1], [-1, -1], [0, 1], [3, 2]], dtype=np.int64)
    counts, vals, nodes = _lund(children, np.array([0, 5], dtype=np.int64), node_p,
                                np.array([4], dtype=np.int64))
    assert counts.tolist() == [2] and vals.shape == (2, 5) and nodes.tolist() == [4, 3]


def test_soft_drop_limits(jets: JetCollection) -> None:
    none = soft_drop(jets, z_cut=0.0)
    assert np.all(ak.to_numpy(none.n_dropped) == 0)
    np.testing.assert_allclose(ak.to_numpy(none.mass), ak.to_numpy(none.jet_mass), rtol=1e-12)
    # z <= 1/2 always, so z_cut = 1/2 grooms every jet down to its hardest leaf
    everything = soft_drop(jets, z_cut=0.5)
    assert np.all(ak.to_numpy(everything.n_leaves) == 1)
    assert np.all(ak.to_numpy(everything.zg) == 0.0)
    assert np.all(ak.to_numpy(everything.n_leaves + everything.n_leaves_dropped) == jets.n_leaves)
    mid = soft_drop(jets, z_cut=0.1, beta=1.0)
    assert np.all(ak.to_numpy(mid.mass) <= ak.to_numpy(mid.jet_mass) + 1e-9)
    for bad in ({"z_cut": -0.1}, {"beta": float("nan")}, {"r0": 0.0}):
        with pytest.raises(ValueError):
            soft_drop(jets, **bad)


def test_exclusive_subjets_cut_the_tree(jets: JetCollection) -> None:
    for order in ("mass", "kt", "cambridge", "antikt"):
        for n in (1, 2, 3, 5):
            sub = exclusive_subjets(jets, n=n, order=order)
            assert np.array_equal(ak.to_numpy(ak.num(sub)), np.minimum(n, jets.n_leaves))
            total = ak.sum(sub, axis=1)
            for i in (0, 17, 40):
                np.testing.assert_allclose(
                    [total[i].E, total[i].px], jets[i].momentum[:2], rtol=1e-12)
    leaves = exclusive_subjets(jets[0], n=100)
    assert len(leaves) == jets[0].n_leaves
    with pytest.raises(ValueError, match="order"):
        exclusive_subjets(jets, n=2, order="pt")
    with pytest.raises(ValueError, match="n must"):
        exclusive_subjets(jets, n=0)


def test_exclusive_subjets_mass_order_is_the_shower_order() -> None:
    # W jets: undoing the heaviest cluster first gives the root's two children at n = 2
    jets = generate(10, ShowerParams.w(), seed=9)
    sub = exclusive_subjets(jets, n=2)
    rs = root_split(jets)
    masses = np.sort(np.stack([ak.to_numpy(sub.mass[:, 0]), ak.to_numpy(sub.mass[:, 1])]), axis=0)
    np.testing.assert_allclose(masses[1], ak.to_numpy(rs.m_heavy), rtol=1e-9)
    np.testing.assert_allclose(masses[0], ak.to_numpy(rs.m_light), rtol=1e-9, atol=1e-9)


def test_root_split_and_shape() -> None:
    jet, tree = _three_leaf_jet()
    rs = root_split(jet, tree)
    p = jet.leaves
    ab = p[0] + p[1]
    assert rs.m_heavy == pytest.approx(math.sqrt(ab[0] ** 2 - ab[1:] @ ab[1:]))
    assert rs.n_heavy == 2 and rs.n_light == 1
    leaves = np.array([[10.0 + i, 1, 2, 9 - 0.5 * i] for i in range(8)])
    ladder = Tree.from_nested((((((((0, 1), 2), 3), 4), 5), 6), 7))
    balanced = Tree.from_nested((((0, 1), (2, 3)), ((4, 5), (6, 7))))
    s = tree_shape([Jet(leaves), Jet(leaves)], [ladder, balanced])
    assert s.depth.tolist() == [7, 3]
    assert s.colless.tolist() == [21, 0]  # ladder: (n-1)(n-2)/2
    assert s.sackin.tolist() == [35, 24]
    assert s.mean_leaf_depth.tolist() == [35 / 8, 3.0]


def test_inputs_results_tables_and_missing_trees(jets: JetCollection) -> None:
    results = [greedy(j) for j in jets]
    results[3] = None
    lund = lund_declustering(jets, results)
    assert len(lund[3]) == 0 and len(lund[4]) > 0
    assert soft_drop(jets, results)[3] is None
    obs = tree_observables(jets, results)
    assert not obs.has_tree[3] and math.isnan(obs.sd_mass[3]) and obs.depth[3] == -1
    # an AlgorithmResults table, rows in any order, one jet missing
    rows = [r for r in results if r is not None]
    idx = [i for i, r in enumerate(results) if r is not None]
    table = AlgorithmResults.from_results("greedy", rows[::-1], jet_index=idx[::-1])
    again = tree_observables(jets, table)
    np.testing.assert_array_equal(ak.to_numpy(again.has_tree), ak.to_numpy(obs.has_tree))
    np.testing.assert_array_equal(ak.to_numpy(again.sd_mass), ak.to_numpy(obs.sd_mass))
    # awkward arrays of particles (any coordinates) work as jets
    arr = jets.to_awkward()
    np.testing.assert_allclose(
        ak.to_numpy(ak.flatten(lund_declustering(arr.leaves, results).kt)),
        ak.to_numpy(ak.flatten(lund.kt)), rtol=1e-12)
    np.testing.assert_allclose(
        ak.to_numpy(soft_drop(arr).mass), ak.to_numpy(soft_drop(jets).mass), rtol=1e-12)


def test_wrong_tree_names_the_jet(jets: JetCollection) -> None:
    trees = [j.truth for j in jets]
    trees[2] = jets[5].truth
    if trees[2].n_leaves == jets[2].n_leaves:
        pytest.skip("same leaf count")
    with pytest.raises(InvalidTreeError, match=f"jet {jets.jet_id[2]}"):
        lund_declustering(jets, trees)
    with pytest.raises(ValueError, match="one tree"):
        lund_declustering(jets, trees[:3])
    with pytest.raises(InvalidTreeError, match="no truth trees"):
        lund_declustering(JetCollection.from_momenta(jets.to_awkward().leaves))


# ---------------------------------------------------------------------- FastJet cross-checks
def _fastjet_events(jets: JetCollection):
    fastjet = pytest.importorskip("fastjet", reason="FastJet is not installed (pip install fastjet)")
    arr = ak.zip({"px": jets.leaves[:, 1], "py": jets.leaves[:, 2], "pz": jets.leaves[:, 3],
                  "E": jets.leaves[:, 0]}, with_name="Momentum4D")
    return fastjet, ak.unflatten(arr, jets.n_leaves)


def test_lund_matches_fastjet_on_cambridge_trees(jets: JetCollection) -> None:
    fastjet, events = _fastjet_events(jets)
    cs = fastjet.ClusterSequence(events, fastjet.JetDefinition(fastjet.cambridge_algorithm, 1000.0))
    theirs = cs.exclusive_jets_lund_declusterings(1)[:, 0]
    ours = lund_declustering(jets, [kt(j, algorithm="cambridge") for j in jets])
    assert ak.all(ak.num(theirs) == ak.num(ours))
    np.testing.assert_allclose(ak.to_numpy(ak.flatten(ours.delta_r)),
                               ak.to_numpy(ak.flatten(theirs.Delta)), rtol=1e-10)
    np.testing.assert_allclose(ak.to_numpy(ak.flatten(ours.kt)),
                               ak.to_numpy(ak.flatten(theirs.kt)), rtol=1e-10)


@pytest.mark.parametrize("algorithm", ["cambridge", "kt"])
@pytest.mark.parametrize("beta", [0.0, 1.0])
def test_soft_drop_matches_fastjet(jets: JetCollection, algorithm: str, beta: float) -> None:
    # FastJet's soft drop reclusters any jet with C/A first: compare with our C/A tree
    fastjet, events = _fastjet_events(jets)
    fj_alg = {"kt": fastjet.kt_algorithm, "cambridge": fastjet.cambridge_algorithm}[algorithm]
    cs = fastjet.ClusterSequence(events, fastjet.JetDefinition(fj_alg, 1000.0))
    theirs = cs.exclusive_jets_softdrop_grooming(1, beta=beta, symmetry_cut=0.1, R0=1.0)
    ours = soft_drop(jets, [kt(j, algorithm="cambridge") for j in jets], z_cut=0.1, beta=beta)
    np.testing.assert_allclose(ak.to_numpy(ours.mass), ak.to_numpy(theirs.msoftdrop),
                               rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(ak.to_numpy(ours.rg), ak.to_numpy(theirs.deltaRsoftdrop),
                               rtol=1e-10)
    np.testing.assert_allclose(ak.to_numpy(ours.zg), ak.to_numpy(theirs.symmetrysoftdrop),
                               rtol=1e-10)
    np.testing.assert_allclose(ak.to_numpy(ours.jet.pt), ak.to_numpy(theirs.ptsoftdrop),
                               rtol=1e-10)
    # the test is not empty: grooming removed something from some jets and nothing from others
    dropped = ak.to_numpy(ours.n_dropped)
    assert dropped.max() > 0 and dropped.min() == 0


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize(("algorithm", "order"), [("kt", "kt"), ("cambridge", "cambridge")])
def test_exclusive_subjets_match_fastjet(jets: JetCollection, algorithm: str, order: str) -> None:
    fastjet, _ = _fastjet_events(jets)
    fj_alg = {"kt": fastjet.kt_algorithm, "cambridge": fastjet.cambridge_algorithm}[algorithm]
    for jet in jets[:30]:
        pj = [fastjet.PseudoJet(float(p[1]), float(p[2]), float(p[3]), float(p[0]))
              for p in jet.leaves]
        cs = fastjet.ClusterSequence(pj, fastjet.JetDefinition(fj_alg, 1000.0))
        (whole,) = cs.inclusive_jets()
        tree = kt(jet, algorithm=algorithm)
        for n in (2, 3, 4):
            theirs = sorted(s.E() for s in whole.exclusive_subjets(n))
            ours = sorted(ak.to_numpy(exclusive_subjets(jet, tree, n, order=order).E))
            np.testing.assert_allclose(ours, theirs, rtol=1e-12)


@pytest.mark.parametrize("algorithm", ["kt", "cambridge", "antikt"])
def test_lund_matches_fastjet_history_walk(jets: JetCollection, algorithm: str) -> None:
    # FastJet's Lund tool reclusters with C/A; on kt and anti-kt trees compare with a walk down
    # FastJet's own clustering history (has_parents), harder branch first
    fastjet, _ = _fastjet_events(jets)
    fj_alg = {"kt": fastjet.kt_algorithm, "cambridge": fastjet.cambridge_algorithm,
              "antikt": fastjet.antikt_algorithm}[algorithm]
    ours = lund_declustering(jets, [kt(j, algorithm=algorithm) for j in jets])
    for i, jet in enumerate(jets):
        pj = [fastjet.PseudoJet(float(p[1]), float(p[2]), float(p[3]), float(p[0]))
              for p in jet.leaves]
        cs = fastjet.ClusterSequence(pj, fastjet.JetDefinition(fj_alg, 1000.0))
        (node,) = cs.inclusive_jets()
        theirs = []
        while True:
            a, b = fastjet.PseudoJet(), fastjet.PseudoJet()
            if not node.has_parents(a, b):
                break
            hard, soft = (a, b) if a.pt() >= b.pt() else (b, a)
            dr = a.delta_R(b)
            theirs.append((dr, soft.pt() * dr, soft.pt() / (a.pt() + b.pt())))
            node = hard
        mine = list(zip(ours[i].delta_r.tolist(), ours[i].kt.tolist(), ours[i].z.tolist(),
                        strict=True))
        np.testing.assert_allclose(np.array(mine), np.array(theirs), rtol=1e-10)


def _file_content(path) -> dict:
    """Every branch / dataset of an observables file (values as text: NaN equals NaN)."""
    import h5py
    import uproot

    out: dict = {}
    if str(path).endswith(".root"):
        with uproot.open(path) as f:
            tree = f["observables"]
            for b in tree.branches:
                out[b.name] = (b.typename, repr(ak.to_list(b.array())))
            out["#"] = tree.num_entries
    else:
        with h5py.File(path, "r") as f:
            def visit(name, obj):
                if isinstance(obj, h5py.Dataset):
                    out[name] = (obj.dtype.str, obj.shape, repr(obj[()].tolist()))
            f.visititems(visit)
    return out


@pytest.mark.parametrize("ext", ["h5", "root"])
def test_observables_file_written_block_by_block(tmp_path, ext, monkeypatch):
    """write_observables goes through the results file a block of jets at a time (the rows of
    each table read for those jets only), and writes what one block of every jet writes; a
    table whose rows are not in jet order is read whole, with the same observables."""
    import jetastar.observables as observables
    from jetastar import io as jio

    jets = JetCollection.concatenate([generate(13, ShowerParams.qcd(), seed=31),
                                      generate(9, ShowerParams.w(), seed=32)])
    jets.jet_id = np.arange(len(jets)) + 1000
    idx = np.arange(len(jets))
    tables = {"greedy": AlgorithmResults.from_results("greedy", [greedy(j) for j in jets],
                                                      jet_index=idx, jet_id=jets.jet_id),
              "kt": AlgorithmResults.from_results("kt", [kt(j) for j in jets],
                                                  jet_index=idx, jet_id=jets.jet_id)}
    res = tmp_path / f"res.{ext}"
    jio.write(res, jets, tables)
    whole = tmp_path / f"whole.{ext}"
    with pytest.raises(FileNotFoundError, match=r"no such results file.*swapped arguments\?"):
        observables.write_observables(res, whole)  # (out, results) in the CLI's order
    assert observables.write_observables(whole, res) == ["greedy", "kt", "truth"]

    def not_whole(*args, **kwargs):
        raise AssertionError("read the whole results")

    blocks = tmp_path / f"blocks.{ext}"
    with monkeypatch.context() as m:
        m.setattr(observables, "OBSERVABLES_BLOCK", 5)
        m.setattr(observables.io, "read_results", not_whole)
        m.setattr(observables.io, "read", not_whole)
        observables.write_observables(blocks, res)
    content = _file_content(whole)
    assert content == _file_content(blocks)
    # the values are those of the whole collection
    sd = observables.tree_observables(jets, tables["kt"])
    key = "kt_sd_mass" if ext == "root" else "observables/kt/sd_mass"
    values = eval(content[key][-1], {"nan": math.nan, "inf": math.inf})
    np.testing.assert_array_equal(np.array(values, dtype=float),
                                  ak.to_numpy(sd.sd_mass))
    # rows out of jet order: read whole, same observables
    shuffled = {k: t.take(np.arange(len(t))[::-1]) for k, t in tables.items()}
    res2 = tmp_path / f"res2.{ext}"
    jio.write(res2, jets, shuffled)
    again = tmp_path / f"again.{ext}"
    with monkeypatch.context() as m:
        m.setattr(observables, "OBSERVABLES_BLOCK", 5)
        observables.write_observables(again, res2)
    assert _file_content(again) == content
