"""ROOT jet/result files: round trips, plain-uproot reading of the documented layout, bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest
import uproot
from helpers.refdata import reference_jets
from test_io_hdf5 import _assert_same_jets, _assert_same_results, _results_for

from jetastar import JetCollection, Tree
from jetastar import io as jio
from jetastar.io import FileFormatError, InvalidJetInFileError, set_extras


@pytest.fixture(scope="module")
def ref_collection() -> JetCollection:
    return JetCollection.from_jets([j for _, j in reference_jets(max_leaves=9)[:40]])


def test_round_trip_jets_and_results(tmp_path, ref_collection):
    results = _results_for(ref_collection)
    path = tmp_path / "jets.root"
    jio.write(path, ref_collection, results, attrs={"seed": 4})
    back = jio.read(path)
    _assert_same_jets(ref_collection, back)
    _assert_same_results(jio.read_results(path), results)
    info = jio.file_info(path)
    assert info["n_jets"] == 40 and info["attrs"]["seed"] == 4
    assert info["results"]["beta"]["status"] == {"failed": 10, "ok": 20, "skipped": 10}
    # slices and index lists
    _assert_same_jets(ref_collection[7:12], jio.read(path, slice(7, 12)))
    _assert_same_jets(ref_collection[[9, 1]], jio.read(path, [9, 1]))
    sub = jio.read_results(path, ["alpha"], jets=slice(0, 5))
    assert list(sub["alpha"].jet_index) == [0, 1, 2, 3, 4]


def test_extras_and_legacy_round_trip(tmp_path):
    legacy = jio.import_legacy_pickle("tests/data/legacy_ginkgo_W_sample.pkl")
    path = tmp_path / "legacy.root"
    jio.write(path, legacy)
    back = jio.read(path)
    _assert_same_jets(legacy, back)
    for k, v in legacy.node_columns.items():
        assert np.array_equal(back.node_columns[k], v, equal_nan=True), k
    assert np.array_equal(back.jet_columns["logLH_total"], legacy.jet_columns["logLH_total"])


def test_plain_uproot_reads_documented_layout(tmp_path, ref_collection):
    results = _results_for(ref_collection)
    path = tmp_path / "plain.root"
    jio.write(path, ref_collection, results)
    with uproot.open(path) as f:
        assert f.classnames()["jets;1"] == "TTree"
        assert f.classnames()["results;1"] == "TTree"
        assert f.classnames()["meta;1"] == "TObjString"
        meta = json.loads(str(f["meta"]))
        assert meta["format"] == "jetastar" and meta["schema_version"] == 1
        assert meta["n_jets"] == 40 and meta["results"]["beta"]["algorithm"] == "beta"
        jets = f["jets"].arrays(library="np")
        i = 6
        leaves = np.stack([jets[f"leaf_{c}"][i] for c in ("E", "px", "py", "pz")], axis=1)
        assert np.array_equal(leaves, ref_collection[i].leaves)
        assert jets["nleaf"][i] == ref_collection[i].n_leaves
        tree = Tree.from_children(np.stack([jets["node_left"][i], jets["node_right"][i]], 1),
                                  jets["node_leaf"][i])
        assert tree == ref_collection[i].truth
        assert np.array_equal(np.stack([jets[f"node_{c}"][i] for c in ("E", "px", "py", "pz")],
                                       axis=1), ref_collection[i].node_momenta)
        assert jets["jet_type"][i] == "QCD" and jets["t_cut"][i] == 16.0
        res = f["results"].arrays(library="np")
        rows = np.flatnonzero((res["label"] == "beta") & (res["jet_index"] == 2))
        assert rows.size == 1
        r = rows[0]
        assert res["status"][r] == "ok" and bool(res["exact"][r])
        t = Tree.from_children(np.stack([res["node_left"][r], res["node_right"][r]], 1),
                               res["node_leaf"][r])
        assert t == ref_collection[2].truth
        alpha0 = np.flatnonzero(res["label"] == "alpha")[0]
        assert json.loads(res["options"][alpha0]) == {"mode": "x", "width": 3}
        assert res["counter_splits_evaluated"][alpha0] == 10 * ref_collection[0].n_leaves


def test_chunked_iteration(tmp_path, ref_collection):
    path = tmp_path / "many.root"
    big = JetCollection.concatenate([ref_collection] * 3)
    jio.write(path, big)
    pieces = list(jio.iterate(path, step_size=17))
    assert [len(p) for p in pieces] == [17] * 7 + [1]
    _assert_same_jets(big, JetCollection.concatenate(pieces))
    h5 = tmp_path / "many.h5"
    jio.write(h5, big)
    assert [len(p) for p in jio.iterate(h5, step_size=50)] == [50, 50, 20]


def test_bad_files(tmp_path, ref_collection):
    with pytest.raises(FileNotFoundError, match=r"absent\.root"):
        jio.read(tmp_path / "absent.root")
    text = tmp_path / "text.root"
    text.write_text("definitely not ROOT")
    with pytest.raises(FileFormatError, match=r"text\.root: not a ROOT file"):
        jio.read(text)
    good = tmp_path / "good.root"
    coll = set_extras(JetCollection.concatenate([ref_collection] * 20), {},
                      {"truth_llh_symmetric": np.zeros(800), "truth_llh_legacy": np.zeros(800)})
    jio.write(good, coll)
    data = good.read_bytes()
    trunc = tmp_path / "trunc.root"
    trunc.write_bytes(data[: len(data) // 2])
    with pytest.raises(FileFormatError, match=r"trunc\.root: ") as exc:
        jio.read(trunc)
    assert "\n" not in str(exc.value)
    # a ROOT file that is not jetastar's
    with uproot.recreate(tmp_path / "foreign.root") as f:
        f.mktree("t", {"x": np.float64}).extend({"x": np.arange(3.0)})
    with pytest.raises(FileFormatError, match="not a jetastar ROOT file"):
        jio.read(tmp_path / "foreign.root")


def test_unknown_schema_version(tmp_path, ref_collection):
    path = tmp_path / "future.root"
    jio.write(path, ref_collection[:2])
    with uproot.open(path) as f:
        meta = json.loads(str(f["meta"]))
        arrays = f["jets"].arrays(library="ak")
    meta["schema_version"] = 7
    with uproot.recreate(path) as f:
        f["meta"] = json.dumps(meta)
        f.mktree("jets", {k: arrays[k].type.content for k in ["jet_id"]}).extend(
            {"jet_id": arrays["jet_id"]})
    with pytest.raises(FileFormatError, match="unknown schema version 7"):
        jio.read(path)


def test_bad_jet_inside_good_file(tmp_path, ref_collection):
    coll = ref_collection[:5]
    coll.leaves[coll.leaf_offsets[2], 0] = np.nan
    path = tmp_path / "bad.root"
    jio.write(path, coll)
    with pytest.raises(InvalidJetInFileError) as exc:
        jio.read(path)
    msg = str(exc.value)
    assert "bad.root" in msg and "entry 2" in msg and f"jet {coll.jet_id[2]}" in msg
    assert "field 'leaves.E'" in msg and "non-finite E" in msg
    with pytest.raises(InvalidJetInFileError, match="entry 2"):
        list(jio.iterate(path, step_size=2))
    assert len(jio.read(path, validate=False)) == 5
