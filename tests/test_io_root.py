"""ROOT jet/result files: plain-uproot reading of the documented layout, bad input.

What HDF5 and ROOT files share (round trips, slices, chunked iteration, a bad jet inside a good
file, ...) is tested once for both formats in ``test_io_formats.py``."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import uproot
from helpers.io_builders import reference_collection, results_for

from jetastar import JetCollection, Tree
from jetastar import io as jio
from jetastar.io import FileFormatError


@pytest.fixture(scope="module")
def ref_collection() -> JetCollection:
    return reference_collection()


def test_plain_uproot_reads_documented_layout(tmp_path, ref_collection):
    results = results_for(ref_collection)
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
        # node indices are Long64_t in both trees, as documented (C++ readers bind them so)
        for name in ("jets", "results"):
            for branch in ("node_left", "node_right", "node_leaf"):
                assert f[name][branch].interpretation.content.from_dtype == np.dtype(">i8")
        alpha0 = np.flatnonzero(res["label"] == "alpha")[0]
        assert json.loads(res["options"][alpha0]) == {"mode": "x", "width": 3}
        assert res["counter_splits_evaluated"][alpha0] == 10 * ref_collection[0].n_leaves


def test_bad_files(tmp_path):
    # (missing and truncated files: test_io_formats.py)
    text = tmp_path / "text.root"
    text.write_text("definitely not ROOT")
    with pytest.raises(FileFormatError, match=r"text\.root: not a ROOT file"):
        jio.read(text)
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


def test_root_outputs_are_zlib_compressed(tmp_path, ref_collection):
    from jetastar.io.root import root_compression

    path = tmp_path / "jets.root"
    jio.write(path, ref_collection)
    with uproot.open(path) as f:
        assert isinstance(f.file.compression, uproot.ZLIB)  # what every ROOT reader decodes
    assert isinstance(root_compression(), uproot.ZLIB)
    assert uproot.ZLIB.library == "zlib"  # uproot's own default is left alone


def test_extra_columns_keep_their_order_whatever_the_hash_seed(tmp_path):
    """The extra columns of jets read from a ROOT or HDF5 file, and of collections joined, come in the
    file's order in every process (a set's order changes with PYTHONHASHSEED: the branches of a
    run's outputs came out in another order from one run to the next)."""
    import subprocess
    import sys

    from jetastar.ginkgo import ShowerParams, generate
    from jetastar.io import set_extras

    jets = generate(4, ShowerParams.qcd(), seed=2)
    nodes = jets.children.shape[0]
    jets = set_extras(jets, {k: np.arange(nodes, dtype=float) for k in ("zeta", "alpha", "mid")},
                      {k: np.ones(4) for k in ("omega", "beta", "kappa")})
    path = tmp_path / "extras.root"
    jio.write(path, jets)
    # HDF5 files keep the order too, written whole or block by block
    for name in ("whole.h5", "blocks.h5"):
        h5 = tmp_path / name
        if name == "whole.h5":
            jio.write(h5, jets)
        else:
            with jio.FORMATS["hdf5"].stream_writer(h5) as writer:
                writer.add_jets(jets[:2])
                writer.add_jets(jets[2:])
        back = jio.read(h5)
        assert list(back.node_columns) == ["zeta", "alpha", "mid"]
        assert [k for k in back.jet_columns if not k.startswith("truth")] == [
            "omega", "beta", "kappa"]
    code = ("import sys; from jetastar import io, JetCollection; c = io.read(sys.argv[1]); "
            "j = JetCollection.concatenate([c[:2], c[2:]]); "
            "print(list(c.node_columns), list(j.node_columns), "
            "[k for k in j.jet_columns if not k.startswith('truth')])")
    seen = set()
    for seed in ("1", "2", "3", "4"):
        out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True,
                             text=True, check=True, env={**os.environ, "PYTHONHASHSEED": seed})
        seen.add(out.stdout.strip())
    assert seen == {"['zeta', 'alpha', 'mid'] ['zeta', 'alpha', 'mid'] "
                    "['omega', 'beta', 'kappa']"}


def test_baskets_are_inflated_on_threads_that_end_with_the_file(tmp_path, monkeypatch):
    """With 2 numba threads a ROOT file is decompressed on a pool of 2 threads (its own, shut down
    when the file closes); the jets read are those of a serial read."""
    import numba

    from jetastar.clustering.threads import Threads
    from jetastar.ginkgo import ShowerParams, generate
    from jetastar.io import _common, root

    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("needs 2 numba threads")
    jets = generate(3000, ShowerParams.qcd(), seed=4)
    path = tmp_path / "jets.root"
    jio.write(path, jets)
    pools: list = []

    def recording() -> object:
        pool = _common.decompression_executor()
        pools.append(pool)
        return pool

    monkeypatch.setattr(root, "decompression_executor", recording)
    with Threads(1):
        serial = jio.read(path)
    assert pools == [None]
    with Threads(2):
        threaded = jio.read(path)
    pool = pools[-1]
    assert pool is not None and pool._max_workers == 2
    assert pool._threads and pool._shutdown  # it inflated baskets, and closed with the file
    assert not any(t.is_alive() for t in pool._threads)
    assert np.array_equal(threaded.leaves, serial.leaves)
    assert np.array_equal(threaded.leaf_offsets, serial.leaf_offsets)
    assert np.array_equal(threaded.children, serial.children)
    assert threaded.jet_type.tolist() == serial.jet_type.tolist()
    # iterating: uproot.iterate does not own the pool; it ends with the iteration, or when the
    # iteration is left early
    with Threads(2):
        blocks = list(jio.iterate(path, 1000))
        assert pools[-1] is not pool and pools[-1]._threads and pools[-1]._shutdown
        assert np.array_equal(np.concatenate([b.leaves for b in blocks]), serial.leaves)
        assert not any(t.is_alive() for t in pools[-1]._threads)
        first = jio.iterate(path, 1000)
        next(first)
        first.close()
        assert pools[-1]._shutdown and not any(t.is_alive() for t in pools[-1]._threads)


def test_read_asks_uproot_for_one_branch_at_a_time(tmp_path, monkeypatch):
    """uproot holds every basket of a read and the joined array at once: reading all branches of
    1 000 000 jets in one call peaked at 3.1 GB, one branch at a time at 2.0 GB."""
    from jetastar.ginkgo import ShowerParams, generate
    from jetastar.io import root

    jets = generate(40, ShowerParams.w(), seed=3)
    path = tmp_path / "jets.root"
    jio.write(path, jets)
    asked: list = []
    arrays = root._RootFile.arrays

    def recording(self, tree, start=None, stop=None, filter_name=None):
        asked.append(filter_name)
        return arrays(self, tree, start, stop, filter_name=filter_name)

    monkeypatch.setattr(root._RootFile, "arrays", recording)
    monkeypatch.setattr(root, "_BRANCH_BY_BRANCH", 40)  # (a large read; smaller ones take one call)
    back = jio.read(path)
    with uproot.open(path) as f:
        branches = f["jets"].keys()
    assert all(isinstance(a, list) and len(a) == 1 for a in asked)
    assert [a[0] for a in asked] == branches
    for name in ("leaves", "leaf_offsets", "children", "leaf_of_node", "node_momenta"):
        assert np.array_equal(getattr(back, name), getattr(jets, name)), name
    assert np.array_equal(back.params["root_momentum"], jets.params["root_momentum"])
    asked.clear()
    assert np.array_equal(jio.read(path, slice(1, 40)).leaves, jets[1:40].leaves)
    assert asked == [None]


def test_status_columns_follow_the_metadata_and_read_labels_only_without_it(
        tmp_path, ref_collection, monkeypatch):
    """The status pass takes each table's rows from the metadata's ``n_rows`` (the ``label``
    branch is not read); a file whose metadata does not count the rows is read through its labels,
    with the same blocks per table, whatever the block size."""
    from jetastar.io import root
    from jetastar.io.dispatch import results_table

    tables = {label: results_table(label, rows) for label, rows in
              results_for(ref_collection).items()}
    tables = {"alpha": tables["alpha"], "none": results_table("none", [], jet_index=[]),
              "beta": tables["beta"]}
    counted = tmp_path / "counted.root"
    jio.write(counted, ref_collection, tables)
    uncounted = tmp_path / "uncounted.root"
    jio.write(uncounted, ref_collection, tables)
    with uproot.update(uncounted) as f:
        meta = json.loads(str(f["meta"]))
        for m in meta["results"].values():
            del m["n_rows"]
        del f["meta"]
        f["meta"] = json.dumps(meta)

    def joined(path, step):
        out = {}
        for label, block in root.root_status_columns(path, step):
            got = out.setdefault(label, {"status": [], "jet_index": [], "log_likelihood": []})
            for k in got:
                got[k] += np.asarray(block[k]).astype(str).tolist()  # (nan as "nan")
            assert block["algorithm"] == label
        return out

    asked = []
    arrays = root._RootFile.arrays
    monkeypatch.setattr(root._RootFile, "arrays", lambda self, tree, *a, filter_name=None:
                        asked.append(filter_name) or arrays(self, tree, *a, filter_name=filter_name))
    want = {label: {k: np.asarray(getattr(t, k)).astype(str).tolist()
                    for k in ("status", "jet_index", "log_likelihood")}
            for label, t in tables.items()}
    for step in (1, 2, 1000):
        asked.clear()
        assert joined(counted, step) == want
        assert asked and not any("label" in names for names in asked)
        asked.clear()
        # (a table without rows has no label to be found by, when nothing counts its rows)
        assert joined(uncounted, step) == {k: v for k, v in want.items() if k != "none"}
        assert all("label" in names for names in asked)
