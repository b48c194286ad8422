"""What every jetastar file format does the same way (HDF5 and ROOT, through :mod:`jetastar.io`):
round trips of jets and results, slices, chunked iteration, missing / truncated files and a bad
jet inside a good file. Format-specific checks are in ``test_io_hdf5.py`` and ``test_io_root.py``."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.io_builders import (
    assert_same_jets,
    assert_same_results,
    reference_collection,
    results_for,
)

from jetastar import JetCollection
from jetastar import io as jio
from jetastar.errors import InvalidJetError
from jetastar.ginkgo import ShowerParams, generate, log_likelihood
from jetastar.io import FileFormatError, InvalidJetInFileError, set_extras

SUFFIXES = {"hdf5": ".h5", "root": ".root"}


@pytest.fixture(params=sorted(SUFFIXES))
def fmt(request) -> str:
    """The name of a format jetastar writes."""
    return request.param


@pytest.fixture
def suffix(fmt) -> str:
    return SUFFIXES[fmt]


@pytest.fixture(scope="module")
def ref_collection() -> JetCollection:
    return reference_collection()


def test_formats_are_registered():
    assert list(jio.FORMATS) == ["hdf5", "legacy", "root"]
    for name, fmt in jio.FORMATS.items():
        assert fmt.name == name and isinstance(fmt, jio.Format)
        assert jio.file_format(f"x{fmt.suffixes[0]}", sniff=False) == name


def test_round_trip_jets_and_results(tmp_path, ref_collection, suffix):
    results = results_for(ref_collection)
    path = tmp_path / f"jets{suffix}"
    jio.write(path, ref_collection, results, attrs={"seed": 17, "note": {"a": 1}})
    back = jio.read(path)
    assert_same_jets(ref_collection, back)
    assert_same_results(jio.read_results(path), results)
    assert set(jio.read_results(path, ["beta"])) == {"beta"}
    info = jio.file_info(path)
    assert info["n_jets"] == len(ref_collection) == 40
    assert info["attrs"]["schema_version"] == 1
    assert info["attrs"]["seed"] == 17
    assert info["results"]["beta"]["status"] == {"failed": 10, "ok": 20, "skipped": 10}
    # the cached truth log-likelihoods are those of the jets
    for lk in ("symmetric", "legacy"):
        truth = back.jet_columns[f"truth_llh_{lk}"]
        expected = [log_likelihood(j, likelihood=lk) for j in ref_collection]
        assert np.allclose(truth, expected, rtol=1e-12, atol=0)
    # slices and index lists
    assert_same_jets(ref_collection[7:12], jio.read(path, slice(7, 12)))
    assert_same_jets(ref_collection[[9, 1]], jio.read(path, [9, 1]))
    sub = jio.read_results(path, ["alpha"], jets=slice(0, 5))
    assert list(sub["alpha"].jet_index) == [0, 1, 2, 3, 4]


def test_results_as_a_table_a_list_of_tables_or_a_list_of_results(tmp_path, suffix):
    import jetastar

    jets = generate(6, ShowerParams.qcd(), seed=3)
    greedy = jetastar.cluster(jets, "greedy")
    kt = jetastar.cluster(jets, "kt")
    cases = ((greedy, ["greedy"]), ([greedy, kt], ["greedy", "kt"]), ((kt,), ["kt"]),
             (greedy.results(), ["greedy"]))
    for i, (given, expected) in enumerate(cases):
        path = tmp_path / f"r{i}{suffix}"
        jio.write(path, jets, given)
        back = jio.read_results(path)
        assert list(back) == expected
        for name in expected:
            ref = greedy if name == "greedy" else kt
            assert back[name].log_likelihood.tolist() == ref.log_likelihood.tolist()
    with pytest.raises(ValueError, match="two results tables of greedy"):
        jio.write(tmp_path / f"x{suffix}", jets, [greedy, greedy])
    with pytest.raises(TypeError, match="results must be a mapping"):
        jio.write(tmp_path / f"x{suffix}", jets, 3.0)
    # cluster_jets' results hold their jets: io.write(path, results); the jets as a list of Jets
    both = jetastar.cluster_jets(jets, ["greedy", "kt"], progress=False)
    for i, args in enumerate(((both,), (list(jets), both))):
        path = tmp_path / f"j{i}{suffix}"
        jio.write(path, *args)
        assert list(jio.read_results(path)) == ["greedy", "kt"]
        assert jio.read(path).leaves.tolist() == jets.leaves.tolist()
    with pytest.raises(TypeError, match=r"io\.write needs the jets as a JetCollection"):
        jio.write(tmp_path / f"x{suffix}", 42)


def test_results_keep_their_order_and_tables_without_rows(tmp_path, fmt, suffix):
    """Both formats, written whole or block by block, give back the tables in the order they
    were written (not by name), a table without rows included, and say so in ``file_info``."""
    import jetastar
    from jetastar.io import AlgorithmResults

    jets = generate(6, ShowerParams.qcd(), seed=4)
    kt, greedy = jetastar.cluster(jets, "kt"), jetastar.cluster(jets, "greedy")
    tables = {"kt": kt, "none": AlgorithmResults.from_results("none", [], jet_index=[]),
              "greedy": greedy}
    whole = tmp_path / f"whole{suffix}"
    jio.write(whole, jets, tables)
    streamed = tmp_path / f"streamed{suffix}"
    writer = jio.FORMATS[fmt].stream_writer(streamed)
    writer.add_jets(jets)
    for label, table in tables.items():
        for rows in (slice(0, 2), slice(2, None)):
            writer.add_results(label, table.take(np.arange(len(table))[rows]))
    writer.close()
    for path in (whole, streamed):
        back = jio.read_results(path)
        assert list(back) == ["kt", "none", "greedy"]
        assert len(back["none"]) == 0
        assert back["greedy"].log_likelihood.tolist() == greedy.log_likelihood.tolist()
        info = jio.file_info(path)["results"]
        assert list(info) == ["kt", "none", "greedy"]
        assert (info["none"]["rows"], info["none"]["status"]) == (0, {})


def test_a_stream_writer_copies_a_file_holding_only_jets_byte_for_byte(tmp_path, fmt, suffix,
                                                                      monkeypatch):
    """``copy_jets_file`` takes the jets of a jetastar file of its format that holds nothing else
    (extras and generator parameters included) and then takes results; any other file is refused
    without changing the writer; it comes before anything else, and no jets come after it."""
    import jetastar

    other = ".root" if suffix == ".h5" else ".h5"
    jets = generate(9, ShowerParams.w(), seed=5)
    jets = set_extras(jets, {"deltas": np.arange(jets.children.shape[0], dtype=float)},
                      {"weight": np.linspace(0, 1, len(jets))})
    only = tmp_path / f"only{suffix}"
    jio.write(only, jets)
    greedy = jetastar.cluster(jets, "greedy")
    with_results = tmp_path / f"results{suffix}"
    jio.write(with_results, jets, {"greedy": greedy})
    jio.write(tmp_path / f"x{other}", jets)
    (tmp_path / "not.txt").write_text("no jets here")
    miscounted = tmp_path / f"miscounted{suffix}"  # its metadata counts one jet more than it has
    jio.write(miscounted, jets)
    if fmt == "hdf5":
        import h5py

        with h5py.File(miscounted, "r+") as f:
            f.attrs["n_jets"] = len(jets) + 1
    else:
        import json

        import uproot

        with uproot.update(miscounted) as f:
            meta = {**json.loads(str(f["meta"])), "n_jets": len(jets) + 1}
            del f["meta"]
            f["meta"] = json.dumps(meta)

    copied = tmp_path / f"copied{suffix}"
    writer = jio.FORMATS[fmt].stream_writer(copied, {"note": "copied"})
    for refused in (with_results, tmp_path / f"x{other}", tmp_path / "not.txt",
                    tmp_path / "missing.h5", miscounted):
        assert writer.copy_jets_file(refused) is False, refused.name
    assert writer.copy_jets_file(only) is True
    with pytest.raises(ValueError, match="copied from a file"):
        writer.add_jets(jets)
    writer.add_results("greedy", greedy)
    writer.close()
    written = tmp_path / f"written{suffix}"
    with jio.FORMATS[fmt].stream_writer(written, {"note": "copied"}) as writer:
        writer.add_jets(jets)
        writer.add_results("greedy", greedy)
    back = jio.read(copied)
    assert_same_jets(jets, back)
    assert np.array_equal(back.node_columns["deltas"], jets.node_columns["deltas"])
    assert np.array_equal(back.jet_columns["weight"], jets.jet_columns["weight"])
    assert jio.read_results(copied)["greedy"].log_likelihood.tolist() == \
        greedy.log_likelihood.tolist()
    a, b = jio.file_info(copied), jio.file_info(written)
    for info in (a, b):
        for key in ("created", "command", "path"):
            info["attrs"].pop(key, None)
            info.pop(key, None)
    assert list(a["n_leaves"]) == list(b["n_leaves"])
    a.pop("n_leaves"), b.pop("n_leaves")
    assert a == b

    # a copy stopped from another thread (an interrupted run) ends at the next block
    import threading

    import jetastar.io._common as common

    monkeypatch.setattr(common, "COPY_BLOCK", 1000)
    stop = threading.Event()
    stop.set()
    stopped = jio.FORMATS[fmt].stream_writer(tmp_path / f"stopped{suffix}")
    with pytest.raises(InterruptedError, match="was stopped"):
        stopped.copy_jets_file(only, stop)
    stopped.abort()
    assert not (tmp_path / f"stopped{suffix}").exists()
    assert not list(tmp_path.glob(f".stopped{suffix}.*"))

    late = jio.FORMATS[fmt].stream_writer(tmp_path / f"late{suffix}")
    late.add_jets(jets)
    with pytest.raises(ValueError, match="before anything else"):
        late.copy_jets_file(only)
    late.abort()


def test_generated_jets_round_trip_with_extras(tmp_path, fmt):
    jets = generate(30, ShowerParams.w(), seed=5)
    jets = set_extras(jets, {"deltas": np.arange(jets.children.shape[0], dtype=float)},
                      {"weight": np.linspace(0, 1, len(jets))})
    path = tmp_path / ("gen.hdf5" if fmt == "hdf5" else "gen.root")
    jio.write(path, jets)
    back = jio.read(path)
    assert_same_jets(jets, back)
    assert np.array_equal(back.node_columns["deltas"], jets.node_columns["deltas"])
    assert np.array_equal(back.jet_columns["weight"], jets.jet_columns["weight"])
    part = jio.read(path, slice(10, 13))
    a, b = jets.node_offsets[10], jets.node_offsets[13]
    assert np.array_equal(part.node_columns["deltas"], jets.node_columns["deltas"][a:b])
    assert_same_jets(jets[10:13], part)
    picked = jio.read(path, [7, 2])
    assert_same_jets(jets[[7, 2]], picked)


def test_column_readers_leave_node_data_out_when_asked(tmp_path, fmt):
    from jetastar.io.dispatch import columns

    jets = generate(30, ShowerParams.w(), seed=6)
    jets = set_extras(jets, {"deltas": np.arange(jets.children.shape[0], dtype=float)},
                      {"weight": np.linspace(0, 1, len(jets))})
    path = tmp_path / ("gen.hdf5" if fmt == "hdf5" else "gen.root")
    jio.write(path, jets)
    with columns(path) as cols:
        full = cols.collection(5, 20)
        light = cols.collection(5, 20, node_data=False)
    assert full.node_momenta is not None and "deltas" in full.node_columns
    assert light.node_momenta is None and "deltas" not in light.node_columns
    for name in ("leaves", "leaf_offsets", "children", "leaf_of_node", "node_offsets", "jet_id",
                 "seed"):
        assert np.array_equal(getattr(light, name), getattr(full, name)), name
    assert list(light.jet_type) == list(full.jet_type)
    for k, v in full.params.items():
        assert np.array_equal(light.params[k], v), k
    assert np.array_equal(light.jet_columns["weight"], full.jet_columns["weight"])


def test_extras_and_legacy_round_trip(tmp_path, suffix):
    legacy = jio.import_legacy_pickle("tests/data/legacy_ginkgo_W_sample.pkl")
    path = tmp_path / f"legacy{suffix}"
    jio.write(path, legacy)
    back = jio.read(path)
    assert_same_jets(legacy, back)
    for k, v in legacy.node_columns.items():
        assert np.array_equal(back.node_columns[k], v, equal_nan=True), k
    assert np.array_equal(back.jet_columns["logLH_total"], legacy.jet_columns["logLH_total"])


def test_chunked_iteration(tmp_path, ref_collection, suffix):
    path = tmp_path / f"many{suffix}"
    big = JetCollection.concatenate([ref_collection] * 3)
    jio.write(path, big)
    pieces = list(jio.iterate(path, step_size=17))
    assert [len(p) for p in pieces] == [17] * 7 + [1]
    assert_same_jets(big, JetCollection.concatenate(pieces))
    assert [len(p) for p in jio.iterate(path, step_size=50)] == [50, 50, 20]


# ---------------------------------------------------------------------- bad input
def test_missing_file(tmp_path, suffix):
    with pytest.raises(FileNotFoundError, match=rf"nope\{suffix}"):
        jio.read(tmp_path / f"nope{suffix}")


#: format -> (copies of the reference collection, what the error says after the file name)
TRUNCATED = {"hdf5": (100, "(truncated|corrupt)"), "root": (20, "")}


def test_truncated_file(tmp_path, ref_collection, fmt, suffix):
    copies, text = TRUNCATED[fmt]
    big = JetCollection.concatenate([ref_collection] * copies)
    big = set_extras(big, {}, {"truth_llh_symmetric": np.zeros(len(big)),
                               "truth_llh_legacy": np.zeros(len(big))})
    path = tmp_path / f"good{suffix}"
    jio.write(path, big)
    data = path.read_bytes()
    trunc = tmp_path / f"trunc{suffix}"
    trunc.write_bytes(data[: len(data) // 2])
    with pytest.raises(FileFormatError, match=rf"trunc\{suffix}: {text}") as exc:
        jio.read(trunc)
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize(("n", "jet", "leaf", "col", "value", "field", "text"), [
    (6, 4, 1, 0, np.nan, "leaves.E", "non-finite E"),
    (6, 4, 1, 2, np.inf, "leaves.py", "non-finite py"),
    (6, 4, 1, 0, -3.0, "leaves.E", "non-positive energy"),
    (5, 2, 0, 0, np.nan, "leaves.E", "non-finite E"),
])
def test_bad_jet_inside_good_file(tmp_path, ref_collection, suffix, n, jet, leaf, col, value,
                                  field, text):
    coll = ref_collection[:n]
    coll.leaves[coll.leaf_offsets[jet] + leaf, col] = value
    path = tmp_path / f"bad{suffix}"
    jio.write(path, coll)
    with pytest.raises(InvalidJetInFileError) as exc:
        jio.read(path)
    msg = str(exc.value)
    assert f"bad{suffix}" in msg and f"entry {jet}" in msg and f"jet {coll.jet_id[jet]}" in msg
    assert f"field '{field}'" in msg and text in msg and f"leaf {leaf}" in msg
    assert exc.value.entry == jet and exc.value.field == field
    with pytest.raises(InvalidJetInFileError, match=f"entry {jet}"):
        list(jio.iterate(path, step_size=2))
    # the other jets are fine; the bad one fails on its own when built
    good = jio.read(path, validate=False)
    assert len(good) == n
    assert good[jet - 1].n_leaves == coll[jet - 1].n_leaves
    truth = good.jet_columns["truth_llh_symmetric"]
    assert np.isnan(truth[jet]) and np.isfinite(truth[jet - 1])
    with pytest.raises(InvalidJetError):
        good[jet]


def test_pickles_are_read_only(tmp_path, ref_collection):
    with pytest.raises(FileFormatError, match="read-only"):
        jio.write(tmp_path / "x.pkl", ref_collection)


def test_a_format_must_implement_read_and_info():
    from jetastar.io.formats import Format

    class Incomplete(Format):
        name = "incomplete"

    with pytest.raises(TypeError, match="abstract"):
        Incomplete()


def test_copy_bytes_copies_through_a_buffer_where_the_kernel_cannot(tmp_path, monkeypatch):
    """``copy_bytes`` lets the kernel copy (``os.sendfile``) a block at a time; where that cannot
    write into a file (EINVAL at the first call), it copies through a buffer; a later error is
    raised."""
    import errno
    import os

    import jetastar.io._common as common

    data = bytes(range(256)) * 41
    (tmp_path / "a").write_bytes(data)
    monkeypatch.setattr(common, "COPY_BLOCK", 1000)
    common.copy_bytes(tmp_path / "a", tmp_path / "kernel")
    assert (tmp_path / "kernel").read_bytes() == data
    calls = []
    real = os.sendfile

    def no_files(*args):
        calls.append(args)
        raise OSError(errno.EINVAL, "Invalid argument")

    monkeypatch.setattr(os, "sendfile", no_files)
    common.copy_bytes(tmp_path / "a", tmp_path / "buffer")
    assert (tmp_path / "buffer").read_bytes() == data and len(calls) == 1

    def full_later(out, src, offset, count):
        if offset:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(out, src, offset, count)

    monkeypatch.setattr(os, "sendfile", full_later)
    with pytest.raises(OSError, match="No space left"):
        common.copy_bytes(tmp_path / "a", tmp_path / "full")


@pytest.mark.parametrize("ext", ["h5", "root"])
def test_a_results_file_keeping_a_failed_jet_says_how_to_read_it(tmp_path, ext):
    """A results file keeps the jets its run recorded as failed (a one-particle jet read with
    validate=False); reading it back said "clustering then records them as failed"."""
    import awkward as ak

    import jetastar

    parts = ak.Array([[{"pt": 50.0, "eta": 0.1, "phi": 0.2, "mass": 0.0},
                       {"pt": 30.0, "eta": -0.3, "phi": 0.5, "mass": 0.0}],
                      [{"pt": 40.0, "eta": 0.0, "phi": 0.0, "mass": 0.0}]])
    jets = JetCollection.from_momenta(parts, t_cut=1.0, validate=False)
    path = tmp_path / f"r.{ext}"
    jetastar.cluster_jets(jets, ["greedy"], progress=False).write(path)
    with pytest.raises(InvalidJetInFileError, match=r"at least 2 leaves, got 1 \(validate=False "
                                                    r"reads such jets as they are; a file of a "
                                                    r"run's results keeps"):
        jio.read(path)
    assert len(jio.read(path, validate=False)) == 2
