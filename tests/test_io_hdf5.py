"""HDF5 jet/result files: plain-h5py reading of the documented layout, partial reads, bad input.

What HDF5 and ROOT files share (round trips, slices, a bad jet inside a good file, ...) is tested
once for both formats in ``test_io_formats.py``."""

from __future__ import annotations

import json
import os

import h5py
import numpy as np
import pytest
from helpers.io_builders import assert_same_jets, reference_collection, results_for

from jetastar import JetCollection, Tree
from jetastar import io as jio
from jetastar.io import FileFormatError, set_extras
from jetastar.io import hdf5 as h5mod


@pytest.fixture(scope="module")
def ref_collection() -> JetCollection:
    return reference_collection()


def test_plain_h5py_reads_documented_layout(tmp_path, ref_collection):
    results = results_for(ref_collection)
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


@pytest.mark.parametrize("dtype, shape", [("float64", ()), ("int64", ()), ("uint8", ()),
                                          ("bool", ()), (">f8", ()), ("float64", (4,))])
def test_chunks_compressed_here_read_back_through_hdf5s_own_filters(tmp_path, dtype, shape):
    from jetastar.io._hdf5_chunks import CHUNK_ROWS, LEVEL, ChunkedAppends, write_whole

    rng = np.random.default_rng(7)
    # block sizes around the chunk: empty, partial, exactly one chunk, several chunks at once
    sizes = [0, 5, CHUNK_ROWS - 5, CHUNK_ROWS, 1, 3 * CHUNK_ROWS + 17, 0, 2]
    blocks = [(rng.normal(size=(k, *shape)) * 1000 > 0 if dtype == "bool" else
               rng.normal(size=(k, *shape)) * 1000).astype(dtype) for k in sizes]
    whole = np.concatenate(blocks)
    path = tmp_path / "chunks.h5"
    with h5py.File(path, "w") as f:
        appends = ChunkedAppends()
        for block in blocks:
            appends.append(f, "appended", block)
        assert f["appended"].shape == whole.shape  # every row counted before the last chunk
        appends.finish()
        write_whole(f, "whole", whole)
        write_whole(f, "short", whole[:3])
        # appends to a big-endian dataset made elsewhere (h5py, from an empty block) keep its order
        f.create_dataset("big-endian", shape=(0, *shape), maxshape=(None, *shape), dtype=">f8",
                         chunks=(CHUNK_ROWS, *shape), compression="gzip", compression_opts=LEVEL,
                         shuffle=True)
        more = ChunkedAppends()
        for block in blocks:
            more.append(f, "big-endian", block)
        more.finish()
    with h5py.File(path, "r") as f:
        for name, expected in (("appended", whole), ("whole", whole), ("short", whole[:3]),
                               ("big-endian", whole)):
            ds = f[name]
            # a new dataset is in this machine's byte order, whatever the order of the data
            stored = np.dtype(dtype).newbyteorder("=") if name != "big-endian" else np.dtype(">f8")
            assert ds.dtype == stored
            assert ds.shape == expected.shape
            assert np.array_equal(ds[:], expected), name
            assert (ds.compression, ds.compression_opts, ds.shuffle) == ("gzip", LEVEL, True)
            assert ds.chunks == (min(expected.shape[0], CHUNK_ROWS), *shape)
        assert np.array_equal(f["appended"][CHUNK_ROWS - 3:CHUNK_ROWS + 3],
                              whole[CHUNK_ROWS - 3:CHUNK_ROWS + 3])


@pytest.mark.parametrize("threads", [1, 3])
def test_rows_read_from_raw_chunks_equal_h5pys(tmp_path, threads):
    import threading

    from jetastar.io._hdf5_chunks import ChunkReader

    rng = np.random.default_rng(3)
    data = {"f8": rng.normal(size=40_000), "i8": rng.integers(-5, 9, 40_000),
            "u1": rng.integers(0, 2, 40_000).astype(np.uint8), "be": rng.normal(size=40_000),
            "two": rng.normal(size=(40_000, 3))}
    path = tmp_path / "layouts.h5"
    with h5py.File(path, "w") as f:  # written by h5py itself, in the layouts other tools use
        f.create_dataset("f8", data=data["f8"], chunks=(1000,), compression="gzip",
                         shuffle=True)
        f.create_dataset("i8", data=data["i8"], chunks=(777,), compression="gzip")
        f.create_dataset("u1", data=data["u1"], chunks=(4096,), compression="gzip",
                         shuffle=True)
        f.create_dataset("be", data=data["be"].astype(">f8"), chunks=(5000,),
                         compression="gzip", shuffle=True)
        f.create_dataset("two", data=data["two"], chunks=(999, 3), compression="gzip",
                         shuffle=True)
        f.create_dataset("lzf", data=data["f8"], chunks=(1000,), compression="lzf")
        f.create_dataset("plain", data=data["f8"])
        f.create_dataset("columns", data=data["two"], chunks=(999, 1), compression="gzip")
    reader = ChunkReader(threads)
    with h5py.File(path, "r") as f:
        for name in ("f8", "i8", "u1", "be", "two"):
            # consecutive reads (a boundary chunk kept from the read before), chunk-aligned ends
            for a, b in [(0, 40_000), (999, 1001), (777, 778), (39_990, 40_000), (5, 5),
                         (1000, 3000), (3000, 3001), (3001, 20_000), (20_000, 39_000),
                         (38_999, 40_000), (0, 999), (0, 1000)]:
                rows = reader.rows(f[name], a, b)
                assert rows is not None and rows.dtype == f[name].dtype, name
                assert np.array_equal(rows, f[name][a:b]), (name, a, b)
        # layouts read through h5py instead
        for name in ("lzf", "plain", "columns"):
            assert reader.rows(f[name], 0, 10) is None, name
    inflating = [t for t in threading.enumerate() if t.name.startswith("jetastar-inflate")]
    assert (1 <= len(inflating) <= threads) if threads > 1 else not inflating
    reader.close()
    assert not any(t.is_alive() for t in inflating)


def test_reads_decompress_on_numba_threads_and_stop_them(tmp_path, monkeypatch):
    """With 2 numba threads a file's chunks are decompressed on 2 threads, which stop when the
    file is closed (after ``io.read``, after a loop over ``io.iterate`` or when it is left)."""
    import numba

    from jetastar.clustering.threads import Threads
    from jetastar.ginkgo import ShowerParams, generate
    from jetastar.io._hdf5_chunks import ChunkReader

    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("needs 2 numba threads")
    jets = generate(6000, ShowerParams.qcd(), seed=4)  # ~45 000 leaves: 3 chunks of each column
    path = tmp_path / "jets.h5"
    jio.write(path, jets)
    readers: list = []

    class Recording(ChunkReader):
        def __init__(self, threads: int = 1) -> None:
            super().__init__(threads)
            self.pools: list = []
            readers.append(self)

        def _map(self, func, *args):
            out = super()._map(func, *args)
            if self._pool is not None and self._pool not in self.pools:
                self.pools.append(self._pool)
            return out

    monkeypatch.setattr(h5mod, "ChunkReader", Recording)
    with Threads(1):
        serial = jio.read(path)
    assert readers[-1].pools == []
    with Threads(2):
        threaded = jio.read(path)
    (pool,) = readers[-1].pools
    assert pool._threads and pool._shutdown and not any(t.is_alive() for t in pool._threads)
    assert_same_jets(threaded, serial)
    with Threads(2):
        blocks = list(jio.iterate(path, 3000))
        (pool,) = readers[-1].pools
        assert pool._shutdown and not any(t.is_alive() for t in pool._threads)
        assert_same_jets(JetCollection.concatenate(blocks), serial)
        first = jio.iterate(path, 5000)
        next(first)
        first.close()
        (pool,) = readers[-1].pools
        assert pool._shutdown and not any(t.is_alive() for t in pool._threads)


def test_text_columns_read_back_share_one_str_per_value(tmp_path, ref_collection):
    path = tmp_path / "r.h5"
    jio.write(path, ref_collection, results_for(ref_collection))
    jets = jio.read(path)
    assert len({id(v) for v in jets.jet_type}) == len(set(jets.jet_type.tolist())) < len(jets)
    for table in jio.read_results(path).values():
        for column in (table.status, table.message, table.options):
            assert len({id(v) for v in column}) == len(set(column.tolist()))


def test_a_compressed_chunk_is_zlib_of_the_shuffled_bytes():
    import zlib

    from jetastar.io._hdf5_chunks import compressed_chunk

    block = np.arange(10, dtype=np.int64) * 300
    raw = zlib.decompress(compressed_chunk(block, 16))
    padded = np.concatenate([block, np.zeros(6, np.int64)])
    # byte plane j holds byte j of every element (HDF5's shuffle filter)
    planes = np.frombuffer(raw, np.uint8).reshape(8, 16)
    assert np.array_equal(planes.T.copy().view(np.int64).ravel(), padded)


def test_reading_a_slice_reads_only_part_of_the_file(tmp_path, monkeypatch, ref_collection):
    # 48 000 jets: three chunks of every per-jet column (the tree columns compress to ~0.6 bytes
    # a node, so with fewer jets the file is mostly the one chunk per column any read needs)
    big = JetCollection.concatenate([ref_collection] * 1200)
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
    part = jio.read(path, slice(24000, 24010))
    assert len(part) == 10
    assert_same_jets(big[24000:24010], part)
    total = sum(c.bytes_read for c in opened)
    for c in opened:
        c.close()
    assert total < 0.3 * size, (total, size)


# ---------------------------------------------------------------------- bad input
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


def test_corrupt_file(tmp_path, ref_collection):
    # (a truncated file: test_io_formats.py)
    big = JetCollection.concatenate([ref_collection] * 100)
    big = set_extras(big, {}, {"truth_llh_symmetric": np.zeros(len(big)),
                               "truth_llh_legacy": np.zeros(len(big))})
    path = tmp_path / "good.h5"
    jio.write(path, big)
    data = path.read_bytes()
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


def test_write_is_atomic(tmp_path, monkeypatch, ref_collection):
    path = tmp_path / "atomic.h5"
    jio.write(path, ref_collection[:2])
    before = path.read_bytes()

    def explode(group, table):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(h5mod, "_write_results", explode)
    with pytest.raises(RuntimeError, match="disk on fire"):
        jio.write(path, ref_collection, results_for(ref_collection))
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["atomic.h5"]
    with pytest.raises(RuntimeError):
        jio.write(tmp_path / "new.h5", ref_collection, results_for(ref_collection))
    assert not (tmp_path / "new.h5").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["atomic.h5"]


def test_a_copied_jets_file_is_opened_again_without_a_lock(tmp_path, monkeypatch):
    """``copy_jets_file`` reopens its temporary file while a worker process being started (between
    its fork and its exec) can still hold the lock of the handle it closed: the reopening takes no
    lock (it failed now and then with 'unable to lock file, errno = 11')."""
    import fcntl

    import jetastar.io._stream as stream
    from jetastar.io import AlgorithmResults
    from jetastar.io.hdf5 import HDF5StreamWriter

    jets = reference_collection()
    inp = tmp_path / "jets.h5"
    jio.write(inp, jets)
    held = []
    real = stream.copy_bytes

    def copy_and_hold(src, dst, *args, **kwargs):
        done = real(src, dst, *args, **kwargs)
        fd = os.open(dst, os.O_RDONLY)  # another open file description, as a forked child's
        fcntl.flock(fd, fcntl.LOCK_SH)
        held.append(fd)
        return done

    monkeypatch.setattr(stream, "copy_bytes", copy_and_hold)
    out = tmp_path / "out.h5"
    writer = HDF5StreamWriter(out)
    try:
        assert writer.copy_jets_file(inp)
        writer.add_results("x", AlgorithmResults.from_results(
            "alpha", results_for(jets)["alpha"], jet_index=np.arange(len(jets))))
        writer.close()
    finally:
        for fd in held:
            os.close(fd)
    assert held and len(jio.read_results(out)["x"]) == len(jets)
    assert_same_jets(jets, jio.read(out))


def test_text_columns_convert_each_distinct_value_once_as_str_would():
    """Equal keys that are different texts (1, 1.0, True) stay apart; text that is not UTF-8
    (lone surrogates of undecodable file names) gets U+FFFD; statuses are UTF-8 bytes."""
    from jetastar.io.hdf5 import _safe_texts, _status_bytes

    values = np.array([1, 1.0, True, "a", "a", "x\udcffy", np.str_("a")], dtype=object)
    got = _safe_texts(values)
    assert got.dtype == object
    assert got.tolist() == ["1", "1.0", "True", "a", "a", "x\ufffdy", "a"]
    assert _safe_texts(["ok", "ok"]).tolist() == ["ok", "ok"] and len(_safe_texts([])) == 0
    statuses = _status_bytes(np.array(["ok", "budget", "ok"], dtype=object))
    assert statuses.dtype == np.dtype("S8") and statuses.tolist() == [b"ok", b"budget", b"ok"]


def test_a_copied_jets_file_opens_with_an_hdf5_library_without_the_locking_option(tmp_path,
                                                                                monkeypatch):
    from jetastar.io.hdf5 import HDF5StreamWriter

    jets = reference_collection()
    inp = tmp_path / "jets.h5"
    jio.write(inp, jets)
    real = h5py.File
    refused = []

    def old_library(*args, **kwargs):
        if "locking" in kwargs:
            refused.append(kwargs.pop("locking"))
            raise ValueError("HDF5 version does not support file locking")  # (as h5py says)
        return real(*args, **kwargs)

    monkeypatch.setattr(h5py, "File", old_library)
    out = tmp_path / "out.h5"
    with HDF5StreamWriter(out) as writer:
        assert writer.copy_jets_file(inp)
    monkeypatch.undo()
    assert refused == [False]
    assert_same_jets(jets, jio.read(out))


def test_text_columns_are_decoded_once_per_distinct_value():
    """Fixed-width bytes (statuses, jet types), variable-length bytes and str decode to the
    same object arrays of str as a decode row by row, one object per distinct value."""
    from jetastar.io.hdf5 import _decoded

    rows = ["ok", "all_inf", "ok", "QCD-ü", "", "ok", "budget"]
    fixed = np.array([r.encode("utf-8") for r in rows], dtype="S8")
    variable = np.array([r.encode("utf-8") for r in rows], dtype=object)
    for values in (fixed, variable, np.array(rows, dtype=object), rows):
        got = _decoded(values)
        assert got.dtype == object and got.tolist() == rows
        assert got[0] is got[2] is got[5]
    assert _decoded(np.zeros(0, dtype="S8")).tolist() == []
