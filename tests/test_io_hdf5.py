"""HDF5 jet/result files: round trips, plain-h5py reading of the documented layout, slices, bad input."""

from __future__ import annotations

import json
import math
import os

import h5py
import numpy as np
import pytest
from helpers.refdata import reference_jets

from jetastar import JetCollection, Tree
from jetastar import io as jio
from jetastar.clustering import ClusteringResult
from jetastar.errors import InvalidJetError
from jetastar.ginkgo import log_likelihood
from jetastar.io import FileFormatError, InvalidJetInFileError, set_extras
from jetastar.io import hdf5 as h5mod


@pytest.fixture(scope="module")
def ref_collection() -> JetCollection:
    return JetCollection.from_jets([j for _, j in reference_jets(max_leaves=9)[:40]])


def _results_for(collection: JetCollection) -> dict[str, list[ClusteringResult]]:
    """Hand-made results with every status, counters, log Z, options."""
    out: dict[str, list[ClusteringResult]] = {"alpha": [], "beta": []}
    for i, jet in enumerate(collection):
        n = jet.n_leaves
        chain = Tree.from_nested(_caterpillar(n))
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


def _caterpillar(n: int):
    t = 0
    for k in range(1, n):
        t = (t, k)
    return t


def _assert_same_jets(a: JetCollection, b: JetCollection) -> None:
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


def _assert_same_results(tables, results) -> None:
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


def test_round_trip_jets_and_results(tmp_path, ref_collection):
    results = _results_for(ref_collection)
    path = tmp_path / "jets.h5"
    jio.write(path, ref_collection, results, attrs={"seed": 17, "note": {"a": 1}})
    back = jio.read(path)
    _assert_same_jets(ref_collection, back)
    _assert_same_results(jio.read_results(path), results)
    assert set(jio.read_results(path, ["beta"])) == {"beta"}
    info = jio.file_info(path)
    assert info["n_jets"] == len(ref_collection)
    assert info["attrs"]["schema_version"] == 1
    assert info["attrs"]["seed"] == 17
    assert info["results"]["beta"]["status"] == {"failed": 10, "ok": 20, "skipped": 10}
    # the cached truth log-likelihoods are those of the jets
    for lk in ("symmetric", "legacy"):
        truth = back.jet_columns[f"truth_llh_{lk}"]
        expected = [log_likelihood(j, likelihood=lk) for j in ref_collection]
        assert np.allclose(truth, expected, rtol=1e-12, atol=0)


def test_generated_jets_round_trip_with_extras(tmp_path):
    from jetastar.ginkgo import ShowerParams, generate

    jets = generate(30, ShowerParams.w(), seed=5)
    jets = set_extras(jets, {"deltas": np.arange(jets.children.shape[0], dtype=float)},
                      {"weight": np.linspace(0, 1, len(jets))})
    path = tmp_path / "gen.hdf5"
    jio.write(path, jets)
    back = jio.read(path)
    _assert_same_jets(jets, back)
    assert np.array_equal(back.node_columns["deltas"], jets.node_columns["deltas"])
    assert np.array_equal(back.jet_columns["weight"], jets.jet_columns["weight"])
    part = jio.read(path, slice(10, 13))
    a, b = jets.node_offsets[10], jets.node_offsets[13]
    assert np.array_equal(part.node_columns["deltas"], jets.node_columns["deltas"][a:b])
    _assert_same_jets(jets[10:13], part)
    picked = jio.read(path, [7, 2])
    _assert_same_jets(jets[[7, 2]], picked)


def test_plain_h5py_reads_documented_layout(tmp_path, ref_collection):
    results = _results_for(ref_collection)
    path = tmp_path / "plain.h5"
    jio.write(path, ref_collection, results)
    i = 5
    with h5py.File(path, "r") as f:
        assert f.attrs["format"] == "jetastar" and f.attrs["schema_version"] == 1
        assert "jetastar_version" in f.attrs and "created" in f.attrs
        g = f["jets"]
        lo, hi = g["leaf_offsets"][i], g["leaf_offsets"][i + 1]
        leaves = np.stack([g[c][lo:hi] for c in ("E", "px", "py", "pz")], axis=1)
        assert np.array_equal(leaves, ref_collection[i].leaves)
        a, b = g["node_offsets"][i], g["node_offsets"][i + 1]
        children = np.stack([g["left"][a:b], g["right"][a:b]], axis=1)
        tree = Tree.from_children(children, g["leaf_of_node"][a:b])
        assert tree == ref_collection[i].truth
        assert g["n_leaves"][i] == ref_collection[i].n_leaves
        assert g["jet_type"][i].decode() == "QCD"
        assert g["lam_root"][i] == ref_collection[i].params.lam_root
        assert g["E"].chunks is not None and g["E"].compression == "gzip"
        r = f["results/beta"]
        assert r.attrs["algorithm"] == "beta"
        row = int(np.flatnonzero(r["jet_index"][:] == 2)[0])
        assert r["status"][row] == b"ok"
        a, b = r["node_offsets"][row], r["node_offsets"][row + 1]
        t = Tree.from_children(np.stack([r["left"][a:b], r["right"][a:b]], axis=1),
                               r["leaf_of_node"][a:b])
        assert t == ref_collection[2].truth
        assert r["log_z"][row] == -3.0
        assert json.loads(f["results/alpha/options"].asstr()[0]) == {"mode": "x", "width": 3}
        assert r["counters/vertices"][row] == 2


class _CountingFile:
    """A binary file object that counts the bytes read through it."""

    def __init__(self, path):
        self.fh = open(path, "rb")
        self.bytes_read = 0

    def read(self, n=-1):
        data = self.fh.read(n)
        self.bytes_read += len(data)
        return data

    def readinto(self, buf):
        n = self.fh.readinto(buf)
        self.bytes_read += n
        return n

    def seek(self, *a):
        return self.fh.seek(*a)

    def tell(self):
        return self.fh.tell()

    def close(self):
        self.fh.close()


def test_reading_a_slice_reads_only_part_of_the_file(tmp_path, monkeypatch, ref_collection):
    big = JetCollection.concatenate([ref_collection] * 600)  # 24 000 jets
    big = set_extras(big, {}, {"truth_llh_symmetric": np.zeros(len(big)),
                               "truth_llh_legacy": np.zeros(len(big))})
    path = tmp_path / "big.h5"
    jio.write(path, big)
    size = os.path.getsize(path)
    opened: list[_CountingFile] = []

    class _Shim:
        @staticmethod
        def File(p, mode="r"):
            cf = _CountingFile(p)
            opened.append(cf)
            return h5py.File(cf, mode)

    monkeypatch.setattr(h5mod, "_h5py", lambda: _Shim)
    part = jio.read(path, slice(12000, 12010))
    assert len(part) == 10
    _assert_same_jets(big[12000:12010], part)
    total = sum(c.bytes_read for c in opened)
    for c in opened:
        c.close()
    assert total < 0.3 * size, (total, size)


# ---------------------------------------------------------------------- bad input
def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"nope\.h5"):
        jio.read(tmp_path / "nope.h5")


def test_wrong_format(tmp_path):
    p = tmp_path / "text.h5"
    p.write_text("hello, not hdf5\n")
    with pytest.raises(FileFormatError, match=r"text\.h5: not an HDF5 file"):
        jio.read(p)
    q = tmp_path / "other.h5"
    with h5py.File(q, "w") as f:
        f["x"] = [1, 2]
    with pytest.raises(FileFormatError, match="not a jetastar HDF5 file"):
        jio.read(q)
    csv = tmp_path / "x.csv"
    csv.write_text("1,2\n")
    with pytest.raises(FileFormatError, match="unknown file type"):
        jio.read(csv)


def test_truncated_and_corrupt_files(tmp_path, ref_collection):
    big = JetCollection.concatenate([ref_collection] * 100)
    big = set_extras(big, {}, {"truth_llh_symmetric": np.zeros(len(big)),
                               "truth_llh_legacy": np.zeros(len(big))})
    path = tmp_path / "good.h5"
    jio.write(path, big)
    data = path.read_bytes()
    trunc = tmp_path / "trunc.h5"
    trunc.write_bytes(data[: len(data) // 2])
    with pytest.raises(FileFormatError, match=r"trunc\.h5: (truncated|corrupt)") as exc:
        jio.read(trunc)
    assert "\n" not in str(exc.value)
    # overwrite the compressed leaf-energy data with garbage
    with h5py.File(path, "r") as f:
        offset = f["jets/E"].id.get_chunk_info(0).byte_offset
    bad = bytearray(data)
    bad[offset:offset + 400] = b"\xff" * 400
    corrupt = tmp_path / "corrupt.h5"
    corrupt.write_bytes(bytes(bad))
    with pytest.raises(FileFormatError, match=r"corrupt\.h5: dataset 'jets/E' cannot be read"):
        jio.read(corrupt)


def test_unknown_schema_version(tmp_path, ref_collection):
    path = tmp_path / "future.h5"
    jio.write(path, ref_collection[:3])
    with h5py.File(path, "r+") as f:
        f.attrs["schema_version"] = 99
    with pytest.raises(FileFormatError, match="unknown schema version 99"):
        jio.read(path)
    with pytest.raises(FileFormatError, match="unknown schema version 99"):
        jio.file_info(path)


@pytest.mark.parametrize(("col", "value", "field", "text"), [
    (0, np.nan, "leaves.E", "non-finite E"),
    (2, np.inf, "leaves.py", "non-finite py"),
    (0, -3.0, "leaves.E", "non-positive energy"),
])
def test_bad_jet_inside_good_file(tmp_path, ref_collection, col, value, field, text):
    coll = ref_collection[:6]
    coll.leaves[coll.leaf_offsets[4] + 1, col] = value
    path = tmp_path / "bad.h5"
    jio.write(path, coll)
    with pytest.raises(InvalidJetInFileError) as exc:
        jio.read(path)
    msg = str(exc.value)
    assert "bad.h5" in msg and "entry 4" in msg and f"jet {coll.jet_id[4]}" in msg
    assert f"field '{field}'" in msg and text in msg and "leaf 1" in msg
    assert exc.value.entry == 4 and exc.value.field == field
    # the other jets are fine; the bad one fails on its own when built
    good = jio.read(path, validate=False)
    assert good[3].n_leaves == coll[3].n_leaves
    truth = good.jet_columns["truth_llh_symmetric"]
    assert np.isnan(truth[4]) and np.isfinite(truth[3])
    with pytest.raises(InvalidJetError):
        good[4]


def test_write_is_atomic(tmp_path, monkeypatch, ref_collection):
    path = tmp_path / "atomic.h5"
    jio.write(path, ref_collection[:2])
    before = path.read_bytes()

    def explode(group, table):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(h5mod, "_write_results", explode)
    with pytest.raises(RuntimeError, match="disk on fire"):
        jio.write(path, ref_collection, _results_for(ref_collection))
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["atomic.h5"]
    with pytest.raises(RuntimeError):
        jio.write(tmp_path / "new.h5", ref_collection, _results_for(ref_collection))
    assert not (tmp_path / "new.h5").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["atomic.h5"]


def test_pickles_are_read_only(tmp_path, ref_collection):
    with pytest.raises(FileFormatError, match="read-only"):
        jio.write(tmp_path / "x.pkl", ref_collection)
