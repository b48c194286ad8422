"""Particle files in other people's layouts, written here with plain uproot / h5py / awkward / vector:
round trips, entry ranges and chunks, per-event jet finding, friend-tree alignment, FastJet trees,
bad input, and the `jetastar cluster` command on them."""

from __future__ import annotations

import math
from pathlib import Path

import awkward as ak
import h5py
import numpy as np
import pytest
import uproot
import vector
from helpers.fastjet_trees import fastjet_tree

from jetastar import InvalidJetError, JetCollection
from jetastar import io as jio
from jetastar._columnar import KEEP_HINT
from jetastar.cli import main
from jetastar.clustering import greedy, kt
from jetastar.io import FileFormatError, InvalidJetInFileError, iterate_particles, read_particles

DATA = Path(__file__).resolve().parents[1] / "data"


def _particles(seed: int, n_entries: int, lo: int = 2, hi: int = 25) -> tuple[np.ndarray, dict]:
    """Counts and flat pt/eta/phi/mass of jet-like particle sprays (half of them massless)."""
    rng = np.random.default_rng(seed)
    counts = rng.integers(lo, hi, n_entries)
    m = int(counts.sum())
    cols = {
        "pt": rng.exponential(15.0, m) + 0.5,
        "eta": rng.normal(0.3, 0.25, m),
        "phi": rng.normal(-2.9, 0.25, m),  # across the ±π boundary
        "mass": np.where(rng.random(m) < 0.5, 0.0, 0.13957),
    }
    return counts, cols


def _vector_p4(cols: dict) -> np.ndarray:
    v = vector.array(cols)
    return np.stack([v.E, v.px, v.py, v.pz], axis=1)


def _write_tree(path: Path, name: str, branches: dict, **extra) -> None:
    with uproot.recreate(path) as f:
        types = {k: (v.type.content if isinstance(v, ak.Array) else np.asarray(v).dtype)
                 for k, v in {**branches, **extra}.items()}
        f.mktree(name, types)
        f[name].extend({**branches, **extra})


def _nanoaod(path: Path, counts: np.ndarray, cols: dict, dtype=np.float64) -> None:
    cands = ak.unflatten(ak.zip({k: v.astype(dtype) for k, v in cols.items()}), counts)
    _write_tree(path, "Events", {"PFCands": cands}, run=np.ones(len(counts), np.int32))


# ---------------------------------------------------------------------- round trips
def test_nanoaod_like_root_round_trip(tmp_path):
    counts, cols = _particles(1, 40)
    path = tmp_path / "nano.root"
    _nanoaod(path, counts, cols)
    with uproot.open(path) as f:
        assert {"nPFCands", "PFCands_pt", "PFCands_mass"} <= set(f["Events"].keys())
        plain = f["Events"].arrays(["PFCands_pt", "PFCands_eta", "PFCands_phi", "PFCands_mass"])
    expected = _vector_p4({k: ak.to_numpy(ak.flatten(plain[f"PFCands_{k}"])) for k in cols})
    jets = read_particles(path, tree="Events", particles="PFCands", t_cut=0.01, mass_policy="keep")
    assert np.array_equal(jets.n_leaves, counts)
    np.testing.assert_allclose(jets.leaves, expected, rtol=1e-13, atol=1e-10)
    assert np.array_equal(jets.jet_columns["entry"], np.arange(40))
    assert np.array_equal(jets.jet_id, np.arange(40))
    # the tree name defaults to Events; an explicit mapping gives the same
    mapping = {c: f"PFCands_{c}" for c in cols}
    same = read_particles(path, mapping=mapping, t_cut=0.01, mass_policy="keep")
    assert np.array_equal(same.leaves, jets.leaves)
    # without particles=: the tree's one collection with momentum coordinates
    found = read_particles(path, t_cut=0.01, mass_policy="keep")
    assert np.array_equal(found.leaves, jets.leaves)
    two = tmp_path / "two.root"
    cands = ak.unflatten(ak.zip(cols), counts)
    _write_tree(two, "Events", {"PFCands": cands, "Jet": cands})
    with pytest.raises(FileFormatError, match=r"give the particle branch prefix .*tree 'Events': "
                                              r"its collections .* are \['PFCands', 'Jet'\]"):
        read_particles(two)


def test_particle_baskets_are_inflated_on_threads(tmp_path, monkeypatch):
    """With 2 numba threads a particle ROOT file is decompressed on a pool of 2 threads that ends
    with the file; the jets are those of a serial read."""
    import numba

    from jetastar.clustering.threads import Threads
    from jetastar.io import _common, particle_files

    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("needs 2 numba threads")
    counts, cols = _particles(5, 3000)
    path = tmp_path / "nano.root"
    _nanoaod(path, counts, cols)
    pools: list = []

    def recording() -> object:
        pools.append(_common.decompression_executor())
        return pools[-1]

    monkeypatch.setattr(particle_files, "decompression_executor", recording)
    with Threads(1):
        serial = read_particles(path, tree="Events", particles="PFCands", t_cut=0.01)
    with Threads(2):
        threaded = read_particles(path, tree="Events", particles="PFCands", t_cut=0.01)
    assert pools[0] is None and pools[-1]._max_workers == 2
    assert pools[-1]._threads and pools[-1]._shutdown
    assert not any(t.is_alive() for t in pools[-1]._threads)
    assert np.array_equal(threaded.leaves, serial.leaves)
    assert np.array_equal(threaded.leaf_offsets, serial.leaf_offsets)


def test_delphes_like_cartesian_names_and_rntuple(tmp_path):
    counts, cols = _particles(2, 12)
    p4 = _vector_p4(cols)
    names = {"E": "Particle.E", "px": "Particle.Px", "py": "Particle.Py", "pz": "Particle.Pz"}
    split = np.cumsum(counts)[:-1]
    jagged = {b: ak.Array([list(x) for x in np.split(p4[:, j], split)])
              for j, b in enumerate(names.values())}
    v = vector.array({"E": p4[:, 0], "px": p4[:, 1], "py": p4[:, 2], "pz": p4[:, 3]})
    jagged["Particle.PT"] = ak.Array([list(x) for x in np.split(v.pt, split)])
    path = tmp_path / "delphes.root"
    _write_tree(path, "Delphes", jagged)
    jets = read_particles(path, tree="Delphes", particles="Particle", t_cut=0.01,
                          mass_policy="keep")
    np.testing.assert_array_equal(jets.leaves, p4)  # cartesian preferred: no conversion error
    # uproot's default writer makes an RNTuple (f[name] = {...}); it is read the same way
    rn = tmp_path / "rntuple.root"
    with uproot.recreate(rn) as f:
        f["Events"] = {"PFCands": ak.unflatten(ak.zip(cols), counts)}
    jets = read_particles(rn, particles="PFCands", t_cut=0.01, mass_policy="keep")
    np.testing.assert_allclose(jets.leaves, p4, rtol=1e-13, atol=1e-10)


def test_entry_ranges_and_chunked_iteration(tmp_path):
    counts, cols = _particles(3, 57)
    path = tmp_path / "nano.root"
    _nanoaod(path, counts, cols)
    kw = {"particles": "PFCands", "t_cut": 0.01}
    whole = read_particles(path, **kw)
    part = read_particles(path, entry_start=10, entry_stop=20, **kw)
    assert np.array_equal(part.jet_columns["entry"], np.arange(10, 20))
    np.testing.assert_array_equal(part.leaves, whole.leaves[whole.leaf_offsets[10]:
                                                            whole.leaf_offsets[20]])
    assert len(read_particles(path, entry_start=-5, **kw)) == 5
    chunks = list(iterate_particles(path, 10, entry_start=3, **kw))
    assert [len(c) for c in chunks] == [10, 10, 10, 10, 10, 4]
    joined = JetCollection.concatenate(chunks)
    assert np.array_equal(joined.jet_id, np.arange(3, 57))
    np.testing.assert_array_equal(joined.leaves, whole.leaves[whole.leaf_offsets[3]:])


def test_hdf5_dense_mask_structured_and_flat_groups(tmp_path):
    counts, cols = _particles(4, 30, hi=20)
    p4 = _vector_p4(cols)
    dense = np.zeros((30, 20, 4))
    mask = np.zeros((30, 20), bool)
    q = 0
    for i, n in enumerate(counts):
        dense[i, :n] = p4[q:q + n]
        mask[i, :n] = True
        q += n
    path = tmp_path / "ml.h5"
    with h5py.File(path, "w") as f:
        f["constituents"] = dense
        f["mask"] = mask
        f.create_dataset("labelled", data=dense).attrs["components"] = "E,px,py,pz"
        rec = np.zeros((30, 20), dtype=[("pt", "f8"), ("eta", "f8"), ("phi", "f8"), ("m", "f8")])
        v = vector.array({"E": dense[..., 0], "px": dense[..., 1], "py": dense[..., 2],
                          "pz": dense[..., 3]})
        with np.errstate(invalid="ignore", divide="ignore"):
            for k, val in (("pt", v.pt), ("eta", v.eta), ("phi", v.phi), ("m", v.mass)):
                rec[k] = np.where(mask, val, 0.0)
        f["records"] = rec
        g = f.create_group("flat")
        for k, val in cols.items():
            g[k] = val
        g["counts"] = counts
    kw = {"t_cut": 0.01, "mass_policy": "keep"}
    for extra in ({"particles": "constituents", "components": "E,px,py,pz"},
                  {"particles": "constituents", "components": "E,px,py,pz", "mask": "mask"},
                  {"particles": "labelled"}):
        jets = read_particles(path, **extra, **kw)
        assert np.array_equal(jets.n_leaves, counts), extra
        np.testing.assert_array_equal(jets.leaves, p4)
    for name in ("records", "flat"):
        jets = read_particles(path, particles=name, **kw)
        assert np.array_equal(jets.n_leaves, counts), name
        np.testing.assert_allclose(jets.leaves, p4, rtol=1e-12, atol=1e-9)
    sub = read_particles(path, particles="flat", entry_start=5, entry_stop=9, **kw)
    assert np.array_equal(sub.jet_id, [5, 6, 7, 8])
    with pytest.raises(FileFormatError, match=r"give the order of its last axis"):
        read_particles(path, particles="constituents")


# ---------------------------------------------------------------------- events -> jets
def test_events_to_jets_with_fastjet(tmp_path):
    fastjet = pytest.importorskip("fastjet", reason="jet finding needs the optional fastjet")
    rng = np.random.default_rng(5)
    n_events = 8
    counts, cols = _particles(6, n_events, lo=20, hi=60)
    cols["phi"] = rng.uniform(-math.pi, math.pi, cols["pt"].shape[0])  # several jets per event
    cols["eta"] = rng.normal(0.0, 1.0, cols["pt"].shape[0])
    path = tmp_path / "events.root"
    _nanoaod(path, counts, cols)
    jets = read_particles(path, particles="PFCands", layout="event", jet_r=0.4, jet_ptmin=10.0,
                          t_cut=0.01, mass_policy="keep", validate=False)
    p4 = _vector_p4(cols)
    offsets = np.r_[0, np.cumsum(counts)]
    jet_def = fastjet.JetDefinition(fastjet.antikt_algorithm, 0.4)
    expected = []
    for e in range(n_events):
        inputs = []
        for k, (en, px, py, pz) in enumerate(p4[offsets[e]:offsets[e + 1]]):
            pj = fastjet.PseudoJet(float(px), float(py), float(pz), float(en))
            pj.set_user_index(k)
            inputs.append(pj)
        cs = fastjet.ClusterSequence(inputs, jet_def)
        for j in sorted(cs.inclusive_jets(10.0), key=lambda j: -j.pt()):
            idx = sorted(c.user_index() for c in j.constituents())
            expected.append((e, p4[offsets[e] + np.array(idx)]))
    assert len(jets) == len(expected) > n_events
    assert np.array_equal(jets.jet_columns["entry"], [e for e, _ in expected])
    # validated, a one-particle jet is named by its event and its place in it
    ones = [i for i, (_, leaves) in enumerate(expected) if len(leaves) < 2]
    assert ones  # (this sample has some)
    i = ones[0]
    where = int(jets.jet_columns["jet_in_event"][i])
    with pytest.raises(InvalidJetInFileError,
                       match=rf"entry {expected[i][0]}: .*the event's jet {where} \(by "
                             r"decreasing pT, from 0\) has 1 particle"):
        read_particles(path, particles="PFCands", layout="event", jet_r=0.4,
                       jet_ptmin=10.0, t_cut=0.01, mass_policy="keep")
    for i, (_, leaves) in enumerate(expected):
        np.testing.assert_array_equal(jets[i].leaves if len(leaves) > 1 else
                                      jets.leaves[jets.leaf_offsets[i]:jets.leaf_offsets[i + 1]],
                                      leaves)


def test_event_reader_runs_fastjet_once_and_reads_the_jets_read_particles_finds(tmp_path,
                                                                               monkeypatch):
    """The batch reader of the event layout finds the jets in its counting pass; its chunks (any
    boundaries, after any others) gather the same constituents again without FastJet."""
    pytest.importorskip("fastjet", reason="jet finding needs the optional fastjet")
    import jetastar.io.particle_files as pf

    rng = np.random.default_rng(11)
    n_events = 23
    counts, cols = _particles(12, n_events, lo=0, hi=50)
    cols["phi"] = rng.uniform(-math.pi, math.pi, cols["pt"].shape[0])  # several jets per event
    cols["eta"] = rng.normal(0.0, 1.0, cols["pt"].shape[0])
    cols["pt"][np.sum(counts[:5]):np.sum(counts[:6])] = 0.5  # event 5: no jet above 10 GeV
    root = tmp_path / "events.root"
    _nanoaod(root, counts, cols)
    p4 = _vector_p4(cols)
    dense = np.zeros((n_events, int(counts.max()), 4))
    mask = np.arange(dense.shape[1]) < counts[:, None]
    dense[mask] = p4
    h5 = tmp_path / "events.h5"
    with h5py.File(h5, "w") as f:
        f["constituents"], f["mask"] = dense, mask
    calls = []
    real = pf.find_jets
    monkeypatch.setattr(pf, "find_jets", lambda *a, **k: calls.append(1) or real(*a, **k))
    finding = {"layout": "event", "jet_r": 0.4, "jet_ptmin": 10.0, "t_cut": 0.01,
               "mass_policy": "keep"}
    for path, where in ((root, {"particles": "PFCands"}),
                        (h5, {"particles": "constituents", "components": "E,px,py,pz",
                              "mask": "mask"})):
        want = read_particles(path, **where, **finding, entry_start=2, entry_stop=21,
                              validate=False)
        assert len(want) > n_events and 5 not in want.jet_columns["entry"]
        reader = pf.ParticleReader(pf.ParticleSource(path=str(path), **where, **finding),
                                   entry_start=2, entry_stop=21, step_size=4)
        calls.clear()
        n = reader.n_jets
        assert n == len(want)
        for a, b in ((3, 9), (0, 1), (1, n - 2), (n - 2, n), (7, 7), (0, n)):
            got = reader.chunk(a, b)
            sub = want.take(np.arange(a, b))
            assert np.array_equal(got.leaf_offsets, sub.leaf_offsets), (path.name, a, b)
            assert np.array_equal(got.leaves, sub.leaves)
            for k in ("entry", "jet_in_event"):
                assert np.array_equal(got.jet_columns[k], sub.jet_columns[k]), k
            for k, v in sub.params.items():
                np.testing.assert_array_equal(got.params[k], v, err_msg=k)
        assert calls == [], "FastJet ran again after the counting pass"
        reader.close()

    # events that lost particles since the counting pass (a file changed while it was read)
    real_particles = pf._event_particles

    def fewer(*args):
        comps, counts, fields = real_particles(*args)
        first = np.r_[0, np.cumsum(counts)[:-1]][counts > 0]  # each event keeps its first one
        return {k: v[first] for k, v in comps.items()}, np.minimum(counts, 1), fields

    reader = pf.ParticleReader(pf.ParticleSource(path=str(root), particles="PFCands", **finding))
    monkeypatch.setattr(pf, "_event_particles", fewer)
    with pytest.raises(FileFormatError, match="changed while it was read"):
        reader.chunk(0, reader.n_jets)
    reader.close()


def test_kt_family_on_foreign_jets_equals_fastjet(tmp_path):
    fastjet = pytest.importorskip("fastjet", reason="FastJet comparison needs the fastjet extra")
    counts, cols = _particles(7, 25, lo=2, hi=40)
    path = tmp_path / "nano.root"
    _nanoaod(path, counts, cols, dtype=np.float32)  # float32, massless: real-data rounding
    jets = read_particles(path, particles="PFCands", t_cut=0.01)
    for jet in jets:
        for algorithm in ("kt", "cambridge", "antikt"):
            ours = kt(jet, algorithm=algorithm).tree
            assert ours == fastjet_tree(fastjet, jet.leaves, algorithm), (jet.label, algorithm)


# ---------------------------------------------------------------------- bad input
def test_bad_input_one_line_errors(tmp_path):
    counts, cols = _particles(8, 6)
    path = tmp_path / "nano.root"
    _nanoaod(path, counts, cols)
    with pytest.raises(FileFormatError, match=r"no branches starting with 'Jet'.*PFCands_pt"):
        read_particles(path, particles="Jet")
    with pytest.raises(FileFormatError, match=r"no branch 'PFCands_E'.*nPFCands, PFCands_pt"):
        read_particles(path, mapping={"pt": "PFCands_pt", "eta": "PFCands_eta",
                                      "phi": "PFCands_phi", "E": "PFCands_E"})
    with pytest.raises(FileFormatError, match=r"no TTree 'Delphes'.*Events"):
        read_particles(path, tree="Delphes", particles="PFCands")
    # jagged branches with different lengths
    bad = tmp_path / "mismatch.root"
    pt = ak.unflatten(cols["pt"], counts)
    eta = ak.unflatten(np.r_[cols["eta"], 0.0], np.r_[counts[:3], counts[3] + 1, counts[4:]])
    phi = ak.unflatten(cols["phi"], counts)
    m = ak.unflatten(cols["mass"], counts)
    _write_tree(bad, "Events", {"P_pt": pt, "P_eta": eta, "P_phi": phi, "P_mass": m})
    with pytest.raises(InvalidJetInFileError) as exc:
        read_particles(bad, particles="P")
    assert str(exc.value) == (f"{bad}: entry 3: jet 3, field 'P_eta': branch 'P_eta' has "
                              f"{counts[3] + 1} particles but 'P_pt' has {counts[3]}")
    # NaN, an empty entry, a one-particle jet
    for change, field, text in (
        (lambda c: c["phi"].__setitem__(int(counts[:2].sum()) + 1, np.nan), "PFCands_phi",
         "particle 1 has a non-finite value (nan)"),
        (lambda c: c["pt"].__setitem__(int(counts[:2].sum()), np.inf), "PFCands_pt",
         "particle 0 has a non-finite value (inf)"),
    ):
        c2 = {k: v.copy() for k, v in cols.items()}
        change(c2)
        p = tmp_path / f"bad_{field}.root"
        _nanoaod(p, counts, c2)
        with pytest.raises(InvalidJetInFileError) as exc:
            read_particles(p, particles="PFCands", t_cut=0.01)
        assert str(exc.value) == f"{p}: entry 2: jet 2, field '{field}': {text}{KEEP_HINT}"
        assert "\n" not in str(exc.value)
    for n_bad, text in ((0, "got 0"), (1, "got 1")):
        c3 = counts.copy()
        c3[4] = n_bad
        keep = np.r_[0, np.cumsum(c3)][-1]
        p = tmp_path / f"short{n_bad}.root"
        _nanoaod(p, c3, {k: v[:keep] for k, v in cols.items()})
        with pytest.raises(InvalidJetInFileError, match=rf"^{p}: entry 4: jet 4, field "
                                                        rf"'particles': .*{text} \(validate=False"):
            read_particles(p, particles="PFCands", t_cut=0.01)
    # padding that is not padding
    h5 = tmp_path / "pad.h5"
    dense = np.zeros((3, 5, 4))
    dense[:, :3] = [[30.0, 0.1, 0.2, 0.0], [20.0, 0.3, 0.1, 0.0], [5.0, 0.2, 0.4, 0.0]]
    mask = np.zeros((3, 5), bool)
    mask[:, :3] = True
    dense[1, 4] = [1.0, 0.0, 0.0, 0.0]
    with h5py.File(h5, "w") as f:
        f["x"] = dense
        f["mask"] = mask
    with pytest.raises(InvalidJetInFileError, match=rf"^{h5}: entry 1: jet 1, field 'x': padded "
                                                    r"slot 4 \(mask False\)"):
        read_particles(h5, particles="x", components="pt,eta,phi,mass", mask="mask", t_cut=0.01)
    with pytest.raises(FileFormatError, match=r"no mask dataset 'm'.*\[mask, x\]"):
        read_particles(h5, particles="x", components="pt,eta,phi,mass", mask="m")


# ---------------------------------------------------------------------- command line
def test_cluster_root_results_are_a_friend_tree(tmp_path, capsys):
    counts, cols = _particles(9, 30, lo=2, hi=15)
    cols["mass"][:] = 0.0
    counts[7] = 1  # a one-particle jet: a failed row that keeps the alignment
    n = int(counts.sum())
    cols = {k: v[:n] for k, v in cols.items()}
    path = tmp_path / "events.root"
    _nanoaod(path, counts, cols, dtype=np.float32)
    out = tmp_path / "res.root"
    args = ["cluster", str(path), "--tree", "Events", "--particles", "PFCands",
            "--algorithms", "greedy,kt", "--t-cut", "0.01", "--chunk-size", "7",
            "--step-size", "11", "--no-progress", "-o", str(out)]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "30 jets" in text and "failed 1" in text and "mass policy: changed" in text
    with uproot.open(path) as fin, uproot.open(out) as fout:
        events = fin["Events"].arrays(["nPFCands", "PFCands_pt"])
        friend = fout["clusters"].arrays()
        assert fout["clusters"].num_entries == fin["Events"].num_entries
    assert np.array_equal(ak.to_numpy(friend["entry"]), np.arange(30))
    assert np.array_equal(ak.to_numpy(friend["n_particles"]), ak.to_numpy(events["nPFCands"]))
    status = np.array(ak.to_list(friend["greedy_status"]))
    assert status[7] == "failed" and np.all(np.delete(status, 7) != "failed")
    assert np.array_equal(ak.to_numpy(ak.num(friend["greedy_node_left"])),
                          np.where(status == "failed", 0, 2 * counts - 1))
    # the same numbers as jetastar's own results table, row by row
    table = jio.read_results(out)["greedy"]
    np.testing.assert_array_equal(ak.to_numpy(friend["greedy_log_likelihood"])[table.jet_index],
                                  table.log_likelihood)
    msg = table.message[7]
    assert msg.startswith(f"{path}: entry 7: jet 7, field 'leaves'") and "at least 2" in msg
    # a rerun is recognised as done; different reading settings do not silently replace the
    # finished result (issue 35 point 4): refused, naming the difference and --fresh
    assert main(args) == 0
    assert "already done" in capsys.readouterr().out
    before = out.read_bytes()
    assert main([*args, "--mass-policy", "keep"]) == 1
    text = capsys.readouterr().out
    assert "mass_policy: clamp -> keep" in text and "--fresh" in text
    assert out.read_bytes() == before
    assert main([*args, "--mass-policy", "keep", "--fresh"]) == 0
    text = capsys.readouterr().out
    assert "already done" not in text
    assert "have E² − |p|² < 0, which makes every tree of those jets −∞" in text


def test_cluster_hdf5_dense_with_entry_column(tmp_path, capsys):
    out = tmp_path / "dense.h5"
    assert main(["cluster", str(DATA / "particles_dense.h5"), "--particles", "constituents",
                 "--mask", "mask", "--algorithms", "greedy", "--entry-start", "5",
                 "--entry-stop", "25", "--no-progress", "-o", str(out)]) == 0
    capsys.readouterr()
    with h5py.File(out, "r") as f:
        entry = f["clusters/entry"][()]
        ll = f["clusters/greedy/log_likelihood"][()]
    assert np.array_equal(entry, np.arange(5, 25))
    jets = read_particles(DATA / "particles_dense.h5", particles="constituents", mask="mask",
                          entry_start=5, entry_stop=25)
    np.testing.assert_array_equal(ll, [greedy(j).log_likelihood for j in jets])


def test_cluster_bad_file_one_line_and_nothing_written(tmp_path, capsys):
    counts, cols = _particles(10, 5)
    path = tmp_path / "nano.root"
    _nanoaod(path, counts, cols)
    out = tmp_path / "res.h5"
    code = main(["cluster", str(path), "--particles", "Jet", "--algorithms", "greedy",
                 "--no-progress", "-o", str(out)])
    text = capsys.readouterr().out
    assert code == 1
    line = [t for t in text.splitlines() if t.startswith("FAILED")]
    assert len(line) == 1 and "no branches starting with 'Jet'" in line[0]
    assert "PFCands_pt" in line[0]
    assert not out.exists() and not list(tmp_path.glob("res.h5*"))
    # jagged branches of different lengths, found while streaming: one line, no output file
    bad = tmp_path / "mismatch.root"
    eta = ak.unflatten(np.r_[cols["eta"], 0.0], np.r_[counts[:3], counts[3] + 1, counts[4:]])
    _write_tree(bad, "Events", {"P_pt": ak.unflatten(cols["pt"], counts), "P_eta": eta,
                                "P_phi": ak.unflatten(cols["phi"], counts),
                                "P_mass": ak.unflatten(cols["mass"], counts)})
    out = tmp_path / "mismatch.results.root"
    code = main(["cluster", str(bad), "--particles", "P", "--algorithms", "greedy",
                 "--chunk-size", "2", "--step-size", "2", "--no-progress", "-o", str(out)])
    line = [t for t in capsys.readouterr().out.splitlines() if t.startswith("FAILED")]
    assert code == 1 and len(line) == 1
    assert f"{bad}: entry 3: jet 3, field 'P_eta': branch 'P_eta' has" in line[0]
    assert not out.exists()


def test_cluster_records_bad_jets_naming_the_input_field(tmp_path, capsys):
    counts, cols = _particles(16, 12, lo=3, hi=10)
    off = np.r_[0, np.cumsum(counts)]
    cols["eta"][off[3] + 2] = np.nan
    cols["pt"][off[9] + 1] = np.inf
    cols["phi"][off[9] + 2] = np.nan
    cols["pt"][off[7] + 1] = -cols["pt"][off[7] + 1]  # vector would flip it: refused too
    path = tmp_path / "events.root"
    _nanoaod(path, counts, cols)
    out = tmp_path / "res.h5"
    for workers in ("1", "2"):
        assert main(["cluster", str(path), "--particles", "PFCands", "--algorithms", "greedy,kt",
                     "--t-cut", "0.01", "--chunk-size", "4", "--workers", workers, "--fresh",
                     "--no-progress", "-o", str(out)]) == 0
        assert "failed 3" in capsys.readouterr().out
        for table in jio.read_results(out).values():
            msg = dict(zip(table.jet_index.tolist(), table.message.tolist(), strict=True))
            assert msg[3] == (f"{path}: entry 3: jet 3, field 'PFCands_eta': particle 2 has a "
                              "non-finite value (nan)")
            assert msg[9] == (f"{path}: entry 9: jet 9, field 'PFCands_pt': particle 1 has a "
                              "non-finite value (inf)")
            assert msg[7].startswith(f"{path}: entry 7: jet 7, field 'PFCands_pt': particle "
                                      "1 has a negative transverse momentum (-")
            assert np.all(table.status[[3, 7, 9]] == "failed")
            assert np.sum(table.status == "failed") == 3
    # in memory: refused naming the jet, the field and the particle
    parts = ak.zip({"pt": ak.unflatten(cols["pt"], counts), "eta": ak.unflatten(cols["eta"], counts),
                    "phi": ak.unflatten(cols["phi"], counts),
                    "mass": ak.unflatten(cols["mass"], counts)})
    with pytest.raises(InvalidJetError, match=r"jet 7, field 'pt': particle 1 has a negative "
                                              r"transverse momentum"):
        JetCollection.from_momenta(parts[4:], t_cut=0.01, jet_id=np.arange(4, 12))


def test_data_samples_are_small_and_readable():
    total = sum(p.stat().st_size for p in DATA.iterdir())
    assert total < 2_000_000
    for name in ("ginkgo_qcd.h5", "ginkgo_qcd.root", "ginkgo_w.h5", "ginkgo_w.root"):
        jets = jio.read(DATA / name)
        assert len(jets) == 100 and np.all(np.diff(jets.node_offsets) == 2 * jets.n_leaves - 1)
    assert len(jio.read(DATA / "legacy_ginkgo_W_sample.pkl")) > 0
    with uproot.open(DATA / "particles_nanoaod.root") as f:
        assert "meta" not in f  # not a jetastar file: plain uproot wrote it
    with pytest.raises(FileFormatError, match="read_particles"):
        jio.read(DATA / "particles_nanoaod.root")
    jets = read_particles(DATA / "particles_nanoaod.root", particles="PFCands")
    assert len(jets) == 200 and jets.jet_columns["n_mass_adjusted"].sum() > 0
    with pytest.raises(InvalidJetError):
        read_particles(DATA / "particles_nanoaod.root", particles="PFCands", t_cut=1e6)


def test_cluster_events_friend_tree_per_event(tmp_path, capsys):
    pytest.importorskip("fastjet", reason="jet finding needs the optional fastjet")
    counts, cols = _particles(11, 9, lo=10, hi=40)
    rng = np.random.default_rng(12)
    cols["phi"] = rng.uniform(-math.pi, math.pi, cols["pt"].shape[0])
    counts[4] = 0  # an empty event: no jets, still one entry
    n = int(counts.sum())
    cols = {k: v[:n] for k, v in cols.items()}
    path = tmp_path / "events.root"
    _nanoaod(path, counts, cols)
    for ext in ("root", "h5"):
        out = tmp_path / f"res.{ext}"
        assert main(["cluster", str(path), "--particles", "PFCands", "--jet-r", "0.4",
                     "--jet-ptmin", "5", "--t-cut", "0.01", "--algorithms", "greedy",
                     "--no-progress", "-o", str(out)]) == 0
        said = capsys.readouterr().out
        if ext == "root":
            # the friend of the input is the per-event tree; 'clusters' has a row per jet
            assert "friend tree 'clusters_events' (one entry per input event" in said
            assert "'clusters' has one entry per jet: greedy_*" in said
        else:  # (it described the ROOT trees for an HDF5 output too)
            assert "friend tree" not in said
            assert "group '/clusters' (one row per input jet): /clusters/greedy" in said
            assert "/clusters/events has one row per input event" in said
    jets = read_particles(path, particles="PFCands", layout="event", jet_r=0.4, jet_ptmin=5.0,
                          t_cut=0.01, validate=False)
    per_event = np.bincount(jets.jet_columns["entry"].astype(int), minlength=9)
    assert per_event[4] == 0 and per_event.sum() == len(jets)
    with uproot.open(tmp_path / "res.root") as f:
        events = f["clusters_events"].arrays(library="np")
        rows = f["clusters"].arrays(["entry", "jet_in_event", "greedy_log_likelihood"],
                                    library="np")
    assert np.array_equal(events["entry"], np.arange(9))  # one entry per input event
    assert np.array_equal(events["n_jets"], per_event)
    for e in range(9):
        a = events["first_jet"][e]
        sel = slice(a, a + per_event[e])
        assert np.all(rows["entry"][sel] == e)
        assert np.array_equal(rows["jet_in_event"][sel], np.arange(per_event[e]))
        np.testing.assert_array_equal(events["jet_greedy_log_likelihood"][e],
                                      rows["greedy_log_likelihood"][sel])
    with h5py.File(tmp_path / "res.h5", "r") as f:
        assert np.array_equal(f["clusters/events/entry"][()], np.arange(9))
        assert np.array_equal(f["clusters/events/n_jets"][()], per_event)
        assert np.array_equal(f["clusters/entry"][()], rows["entry"])


def test_iterate_progress_bar_and_tqdm_disable(tmp_path, capsys, monkeypatch):
    counts, cols = _particles(13, 20)
    path = tmp_path / "nano.root"
    _nanoaod(path, counts, cols)
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    assert sum(len(c) for c in iterate_particles(path, 7, particles="PFCands", t_cut=0.01,
                                                  progress=True)) == 20
    assert "20/20" in capsys.readouterr().err
    monkeypatch.setenv("TQDM_DISABLE", "1")
    assert sum(len(c) for c in iterate_particles(path, 7, particles="PFCands", t_cut=0.01,
                                                  progress=True)) == 20
    assert "20/20" not in capsys.readouterr().err


def test_hdf5_group_written_by_awkward_to_buffers(tmp_path):
    counts, cols = _particles(14, 15)
    jets_ak = ak.zip({"constituents": ak.unflatten(ak.zip(cols), counts),
                      "label": np.arange(15) % 2}, depth_limit=1)
    path = tmp_path / "ak.h5"
    with h5py.File(path, "w") as f:
        g = f.create_group("jets")
        form, length, _ = ak.to_buffers(ak.to_packed(jets_ak), container=g)
        g.attrs["form"] = form.to_json()
        g.attrs["length"] = length
    jets = read_particles(path, particles="jets", t_cut=0.01, mass_policy="keep",
                          entry_start=3, entry_stop=11)
    p4 = _vector_p4(cols)
    off = np.r_[0, np.cumsum(counts)]
    assert np.array_equal(jets.n_leaves, counts[3:11])
    np.testing.assert_allclose(jets.leaves, p4[off[3]:off[11]], rtol=1e-13, atol=1e-10)


def test_info_on_foreign_files_says_how_to_read_them(capsys):
    assert main(["info", str(DATA / "particles_nanoaod.root")]) == 0
    out = capsys.readouterr().out
    assert "not a jetastar file" in out
    assert "--tree Events --particles PFCands" in out and "200 entries" in out
    assert "[pt, eta, phi, mass]" in out
    assert main(["info", str(DATA / "particles_dense.h5")]) == 0
    out = capsys.readouterr().out
    assert "--particles constituents --components E,px,py,pz --mask mask" in out


@pytest.mark.parametrize("layout", ["jet", "event"])
def test_particle_run_resumes_after_interrupt(tmp_path, monkeypatch, layout):
    if layout == "event":
        pytest.importorskip("fastjet", reason="jet finding needs the optional fastjet")
    import jetastar.batch.runner as batch
    from jetastar.batch import BatchConfig, run_batch
    from jetastar.io import ParticleSource

    counts, cols = _particles(15, 23, lo=2, hi=30)
    cols["mass"][:] = 0.0
    path = tmp_path / "events.root"
    _nanoaod(path, counts, cols)
    source = ParticleSource(path="", particles="PFCands", layout=layout, jet_r=0.4, t_cut=0.01)
    config = BatchConfig(["greedy", "kt"], chunk_size=4)
    kw = {"particles": source, "progress": False, "step_size": 5}
    ref = tmp_path / "ref.h5"
    (s,) = run_batch([path], config, output=ref, **kw)
    assert s.ok
    real = batch.write_part
    calls = {"n": 0}

    def flaky(*args):
        if calls["n"] == 2:
            raise KeyboardInterrupt
        calls["n"] += 1
        real(*args)

    out = tmp_path / "res.h5"
    monkeypatch.setattr(batch, "write_part", flaky)
    with pytest.raises(KeyboardInterrupt):
        run_batch([path], config, output=out, **kw)
    monkeypatch.setattr(batch, "write_part", real)
    assert not out.exists()
    (s,) = run_batch([path], config, output=out, **{**kw, "particles": ParticleSource(
        path="", particles="PFCands", layout=layout, jet_r=0.4, t_cut=0.01, mass_policy="keep")})
    assert "different settings" in s.error and "particles" in s.error
    (s,) = run_batch([path], config, output=out, **kw)
    assert s.ok and s.chunks_reused == 2
    a, b = jio.read_results(ref), jio.read_results(out)
    for name in ("greedy", "kt"):
        np.testing.assert_array_equal(a[name].log_likelihood, b[name].log_likelihood)
        np.testing.assert_array_equal(a[name].children, b[name].children)
    with h5py.File(ref, "r") as f1, h5py.File(out, "r") as f2:
        np.testing.assert_array_equal(f1["clusters/entry"][()], f2["clusters/entry"][()])


def test_cluster_entry_range_and_reading_options_are_checked(tmp_path, capsys):
    """Entry ranges that hold nothing and impossible numbers end with one line naming the
    options, before anything is written (a stop before the start was numpy's "negative
    dimensions", a start beyond the file an empty output with exit code 0)."""
    nano = DATA / "particles_nanoaod.root"
    out = tmp_path / "res.h5"
    base = ["cluster", str(nano), "--particles", "PFCands", "--algorithms", "greedy",
            "--no-progress", "-o", str(out)]
    for extra, text in ((["--entry-start", "150", "--entry-stop", "100"], "no entry between"),
                        (["--step-size", "0"], "--step-size must be >= 1"),
                        (["--jet-r", "-1"], "--jet-r must be > 0")):
        assert main([*base, *extra]) == 2
        assert text in capsys.readouterr().err
    assert main([*base, "--entry-start", "500"]) == 1
    assert "holds none of its 200 entries" in capsys.readouterr().out
    assert not list(tmp_path.iterdir())
    assert main([*base, "--entry-start", "-5"]) == 0
    assert len(jio.read(out, validate=False)) == 5
    assert len(read_particles(nano, particles="PFCands", entry_start=150, entry_stop=100)) == 0


def test_particle_options_on_jet_files_are_refused(tmp_path, capsys):
    """--entry-stop, --t-cut ... without an option that switches particles on were ignored: the
    whole jet file was clustered with its own t_cut, exit code 0."""
    out = tmp_path / "res.h5"
    jets = DATA / "ginkgo_qcd.h5"
    for extra in (["--entry-start", "10", "--entry-stop", "20"], ["--t-cut", "4"],
                  ["--mass-policy", "keep", "--lam", "2"]):
        assert main(["cluster", str(jets), "--algorithms", "greedy", "--no-progress",
                     "-o", str(out), *extra]) == 2
        err = capsys.readouterr().err
        assert err.startswith("jetastar: error: --") and err.count("\n") == 1
        assert all(o in err for o in extra if o.startswith("--"))
        assert f"{jets} is a jetastar file, whose jets carry their own parameters" in err
    assert not list(tmp_path.iterdir())


def test_every_jet_failed_is_a_failed_run_with_the_right_advice(tmp_path, capsys):
    """Coordinates in the wrong order: every jet fails; the run says so with exit code 1, and
    the mass-policy line points at the order instead of at the policy already in use."""
    out = tmp_path / "wrong.h5"
    code = main(["cluster", str(DATA / "particles_dense.h5"), "--particles", "constituents",
                 "--mask", "mask", "--components", "px,py,pz,E", "--algorithms", "greedy",
                 "--no-progress", "-o", str(out)])
    text = capsys.readouterr().out
    assert code == 1 and "FAILED" in text and "every jet failed with every algorithm" in text
    assert "check the coordinates' order (--components)" in text
    assert "use --mass-policy clamp" not in text
    assert set(jio.read_results(out)["greedy"].status) == {"failed"}
    code = main(["cluster", str(DATA / "particles_dense.h5"), "--particles", "constituents",
                 "--mask", "mask", "--algorithms", "greedy", "--no-progress",
                 "-o", str(tmp_path / "right.h5")])
    assert code == 0 and "FAILED" not in capsys.readouterr().out


def test_branches_named_by_their_coordinates_are_found(tmp_path, capsys):
    """A tree whose jagged branches are ``pt, eta, phi, mass`` themselves (no collection prefix,
    as ``uproot.recreate(...)["tree"] = {...}`` writes): ``jetastar info`` lists the options that
    read it, a run without them uses them, and a run with only some names the others (it said only
    "give the prefix")."""
    counts, cols = _particles(21, 6, lo=3, hi=8)
    path = tmp_path / "plain.root"
    _write_tree(path, "tree", {k: ak.unflatten(v, counts) for k, v in cols.items()})
    options = "--tree tree --branch pt=pt --branch eta=eta --branch phi=phi --branch mass=mass"
    assert main(["info", str(path)]) == 0
    assert options in capsys.readouterr().out
    out = tmp_path / "res.h5"
    base = ["cluster", str(path), "--algorithms", "greedy", "--t-cut", "0.01", "--no-progress"]
    # the one collection detected is read without options, saying which (issue 61 point 5)
    assert main([*base, "-o", str(tmp_path / "auto.h5")]) == 0
    assert f"reading particles with {options} (detected" in capsys.readouterr().out
    assert len(jio.read(tmp_path / "auto.h5", validate=False)) == 6
    assert main([*base, "--tree", "tree", "-o", str(out)]) == 1
    assert f"read them with {options.split(' ', 2)[2]}" in capsys.readouterr().out
    assert main([*base, *options.split(), "-o", str(out)]) == 0
    assert len(jio.read(out, validate=False)) == 6
    assert main(["info", str(path), "--check", "--t-cut", "0.01"]) == 0
    assert "6 of 6 jets" in capsys.readouterr().out


def test_dense_files_name_the_bad_input_value_of_a_failed_jet(tmp_path, capsys):
    """A dense HDF5 file's failed jet says which input value is bad (it said "leaf 2 has a
    non-finite E (nan)" for a negative pt, which the file does not hold)."""
    rng = np.random.default_rng(0)
    dense = np.zeros((3, 5, 4))
    dense[:, :, 0] = rng.uniform(5, 50, (3, 5))
    dense[:, :, 1:3] = rng.normal(0, 0.2, (3, 5, 2))
    dense[1, 2, 0] = -50.0
    dense[2, 1, 1] = np.nan
    path = tmp_path / "dense.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("p", data=dense).attrs["components"] = "pt,eta,phi,mass"
    out = tmp_path / "res.h5"
    assert main(["cluster", str(path), "--particles", "p", "--algorithms", "greedy",
                 "--t-cut", "1", "--no-progress", "-o", str(out)]) == 0
    table = jio.read_results(out)["greedy"]
    assert table.status.tolist() == ["ok", "failed", "failed"]
    assert table.message[1] == (f"{path}: entry 1: jet 1, field 'p[..., 0] (pt)': particle 2 "
                                "has a negative transverse momentum (-50.0); pt must be >= 0")
    assert table.message[2] == (f"{path}: entry 2: jet 2, field 'p[..., 1] (eta)': particle 1 "
                                "has a non-finite value (nan)")
