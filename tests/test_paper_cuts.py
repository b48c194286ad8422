"""Small things a new user ran into (issue: results a physicist can use), one test each."""

from __future__ import annotations

import json

import awkward as ak
import h5py
import matplotlib
import numpy as np
import pytest
import uproot

from jetastar import io as jio
from jetastar.cli import main
from jetastar.ginkgo import ShowerParams, generate

matplotlib.use("Agg")


@pytest.fixture(scope="module")
def event_file(tmp_path_factory: pytest.TempPathFactory):
    """A NanoAOD-like TTree: a particle collection PFCands and one fat jet per event (scalars)."""
    rng = np.random.default_rng(3)
    n = 6
    counts = rng.integers(4, 8, n)
    total = int(counts.sum())
    parts = ak.unflatten(ak.zip({
        "pt": rng.uniform(5, 50, total), "eta": rng.normal(0, 0.3, total),
        "phi": rng.normal(0, 0.3, total), "mass": np.full(total, 0.14),
    }), counts)
    path = tmp_path_factory.mktemp("evt") / "events.root"
    with uproot.recreate(path) as f:
        f.mktree("Events", {"PFCands": parts.type.content, "FatJet_pt": "f8", "FatJet_eta": "f8",
                            "FatJet_phi": "f8", "FatJet_mass": "f8"})
        f["Events"].extend({"PFCands": parts, "FatJet_pt": rng.uniform(200, 300, n),
                            "FatJet_eta": np.zeros(n), "FatJet_phi": np.zeros(n),
                            "FatJet_mass": np.full(n, 80.0)})
    return path


def test_output_with_a_foreign_extension_is_refused(tmp_path, capsys) -> None:
    jets = tmp_path / "j.h5"
    assert main(["generate", "--n", "3", "-o", str(jets)]) == 0
    code = main(["cluster", str(jets), "--algorithms", "greedy", "--no-progress",
                 "-o", str(tmp_path / "results.txt")])
    assert code == 2
    assert ".h5, .hdf5 or .root" in capsys.readouterr().err
    assert not (tmp_path / "results.txt").exists()
    # an existing folder with a dot in its name is still a folder
    (tmp_path / "out.v2").mkdir()
    assert main(["cluster", str(jets), "--algorithms", "greedy", "--no-progress",
                 "-o", str(tmp_path / "out.v2")]) == 0
    assert (tmp_path / "out.v2" / "j.results.h5").is_file()


def test_scalar_branches_are_not_particles(event_file, tmp_path, capsys) -> None:
    assert main(["info", str(event_file)]) == 0
    out = capsys.readouterr().out
    assert "--particles PFCands" in out and "FatJet" not in out
    out_file = tmp_path / "fj.root"
    assert main(["cluster", str(event_file), "--particles", "FatJet", "--algorithms", "greedy",
                 "--no-progress", "-o", str(out_file)]) == 1
    text = capsys.readouterr().out
    assert "one value per entry" in text and "PFCands" in text
    # refused before any work: no part folder is left behind
    assert not out_file.exists() and not (tmp_path / "fj.root.parts").exists()


def test_particle_prefix_suggestion(event_file) -> None:
    with pytest.raises(jio.FileFormatError, match="did you mean 'PFCands'"):
        jio.read_particles(event_file, particles="PFCand")
    with pytest.raises(jio.FileFormatError, match="did you mean 'PFCands'"):
        jio.read_particles(event_file, particles="PFCandz")


def test_friend_tree_names_and_reasons(event_file, tmp_path, capsys) -> None:
    out_file = tmp_path / "r.root"
    assert main(["cluster", str(event_file), "--particles", "PFCands", "--t-cut", "1",
                 "--algorithms", "greedy,kt,astar-approx", "--option",
                 "astar-approx.max_time=0.5", "--no-progress", "-o", str(out_file)]) == 0
    out = capsys.readouterr().out
    assert "astar_approx_* (astar-approx)" in out
    assert "finite" in out
    clusters = uproot.open(out_file)["clusters"].arrays(library="np")
    res = jio.read_results(out_file)
    for label, prefix in (("greedy", "greedy"), ("kt", "kt"), ("astar-approx", "astar_approx")):
        fin = clusters[f"{prefix}_finite"]
        np.testing.assert_array_equal(fin, np.isfinite(res[label].log_likelihood))
        reasons = clusters[f"{prefix}_reason"]
        assert all((r == "") == bool(f) for r, f in zip(reasons, fin, strict=True))
    bad = [r for r in clusters["kt_reason"] if r]
    assert all(r.split(":")[0] in ("parent_below_cut", "child_too_heavy", "masses_exceed",
                                   "spacelike_child") for r in bad)
    # HDF5 output: the same columns
    out_h5 = tmp_path / "r.h5"
    assert main(["cluster", str(event_file), "--particles", "PFCands", "--t-cut", "1",
                 "--algorithms", "kt", "--no-progress", "-o", str(out_h5)]) == 0
    with h5py.File(out_h5) as f:
        fin = f["clusters/kt/finite"][()].astype(bool)
        reason = [x.decode() if isinstance(x, bytes) else x for x in f["clusters/kt/reason"][()]]
    np.testing.assert_array_equal(fin, clusters["kt_finite"])
    assert reason == list(clusters["kt_reason"])


def test_one_parameter_set_for_measured_jets(event_file, tmp_path) -> None:
    out_file = tmp_path / "m.h5"
    assert main(["cluster", str(event_file), "--particles", "PFCands", "--algorithms", "greedy",
                 "--no-progress", "-o", str(out_file)]) == 0
    with h5py.File(out_file) as f:
        params = json.loads(f.attrs["generator_params"])
    assert len(params) == 1 and "per_jet" in params[0] and "m_hard" not in params[0]
    # generated jets keep their generator settings
    gen = tmp_path / "g.h5"
    assert main(["generate", "--n", "20", "-o", str(gen)]) == 0
    with h5py.File(gen) as f:
        params = json.loads(f.attrs["generator_params"])
    assert len(params) == 1 and params[0]["m_hard"] == 30.0


def test_large_tree_drawing_is_readable() -> None:
    from jetastar.plotting import draw_tree

    jets = generate(60, ShowerParams.w(t_cut=1.0), seed=3)
    jet = max(jets, key=lambda j: j.n_leaves)
    assert jet.n_leaves > 60
    ax = draw_tree(jet.truth, jet)
    labels = ax.get_xticklabels()
    assert len(labels) <= 60
    assert all(lab.get_rotation() == 90 for lab in labels)
    assert "one label per" in ax.get_xlabel()
    small = generate(1, ShowerParams.qcd(), seed=1)[0]
    ax = draw_tree(small.truth, small)
    assert len(ax.get_xticklabels()) == small.n_leaves and ax.get_xlabel() == "leaf"


def test_info_check_and_observables_command(tmp_path, capsys) -> None:
    jets = tmp_path / "q.root"
    assert main(["generate", "--n", "12", "--max-leaves", "12", "-o", str(jets)]) == 0
    capsys.readouterr()
    assert main(["info", str(jets), "--check", "--t-cut", "16,2000"]) == 0
    out = capsys.readouterr().out
    assert "12 of 12 jets (100.0 %)" in out and "0 of 12 jets (0.0 %)" in out
    assert "jet mass² <= t_cut: 12" in out
    res = tmp_path / "res.root"
    assert main(["cluster", str(jets), "--algorithms", "greedy,kt", "--no-progress",
                 "-o", str(res)]) == 0
    obs = tmp_path / "obs.root"
    assert main(["observables", str(res), "-o", str(obs), "--z-cut", "0.2"]) == 0
    tree = uproot.open(obs)["observables"]
    assert tree.num_entries == 12
    arr = tree.arrays(["jet_id", "kt_sd_mass", "truth_m_heavy", "greedy_lund_kt"])
    from jetastar.observables import soft_drop

    coll = jio.read(res)
    sd = soft_drop(coll, jio.read_results(res)["kt"], z_cut=0.2)
    np.testing.assert_allclose(ak.to_numpy(arr.kt_sd_mass), ak.to_numpy(sd.mass))
    assert ak.all(ak.num(arr.greedy_lund_kt) >= 1)
    meta = json.loads(str(uproot.open(obs)["meta"]))
    assert meta["soft_drop"]["z_cut"] == 0.2 and meta["schema_version"] == 1
    h5 = tmp_path / "obs.h5"
    assert main(["observables", str(res), "-o", str(h5), "--algorithms", "kt", "--no-truth"]) == 0
    with h5py.File(h5) as f:
        assert sorted(f["observables"]) == ["jet_id", "kt"]
        off = f["observables/kt/lund_offsets"][()]
        assert off[-1] == f["observables/kt/lund_kt"].shape[0]
    assert main(["observables", str(res), "-o", str(tmp_path / "o.txt")]) == 2  # a usage error
