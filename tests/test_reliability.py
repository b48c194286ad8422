"""Regression tests: never a stale, partial or silently wrong result (one test per known hole).

1 stale outputs, 4 one bad file in a multi-file run, 5 inconsistent columns, 6 text booleans,
7 tiny files claiming huge sizes, 8 options checked before any work, 9 leftovers, 10 messages,
3 unbounded work. The fault-injection tests (kills, full disk, read-only folders, concurrent
writers) are in ``test_faults.py``.
"""

from __future__ import annotations

import collections
import io
import math
import os
import pickle
import struct
import subprocess
import sys
import types
from pathlib import Path

import h5py
import numpy as np
import pytest

from jetastar import Jet
from jetastar import io as jio
from jetastar.batch import BatchConfig, BatchError, check_config, run_batch
from jetastar.batch.config import options_for
from jetastar.batch.resume import input_identity, is_complete_output, jets_digest, parts_dir
from jetastar.cli import main
from jetastar.clustering import cluster
from jetastar.errors import InvalidJetError, TooLargeError
from jetastar.ginkgo import ShowerParams, generate
from jetastar.io import FileFormatError

TESTS = Path(__file__).parent


@pytest.fixture(autouse=True)
def _no_bars(monkeypatch):
    monkeypatch.setenv("TQDM_DISABLE", "1")


def _jets(tmp_path: Path, name: str, n: int = 6, seed: int = 1, kind: str = "w") -> Path:
    path = tmp_path / name
    jio.write(path, generate(n, ShowerParams.preset(kind), seed=seed, max_leaves=14))
    return path


def _greedy() -> BatchConfig:
    return BatchConfig(algorithms=["greedy"], chunk_size=4)


# ---------------------------------------------------------------------- 1 stale results
def test_output_of_another_input_is_neither_reused_nor_replaced(tmp_path):
    """The finished result of another input file is kept (it was replaced, exit code 0: two
    inputs of the same name into one output folder lost the first one's results); fresh=True
    replaces it."""
    a = _jets(tmp_path, "a.h5", seed=1)
    b = _jets(tmp_path, "b.h5", seed=2)
    out = tmp_path / "out.h5"
    [first] = run_batch([a], _greedy(), output=out, progress=False)
    assert first.ok and not first.already_done
    kept = out.read_bytes()
    [second] = run_batch([b], _greedy(), output=out, progress=False)
    assert not second.ok and "holds the finished result of another input file" in second.error
    assert str(a.resolve()) in second.error and out.read_bytes() == kept
    [forced] = run_batch([b], _greedy(), output=out, progress=False, fresh=True)
    assert forced.ok and jets_digest(jio.read(out)) == jets_digest(jio.read(b))
    [third] = run_batch([b], _greedy(), output=out, progress=False)
    assert third.already_done


def test_regenerated_input_is_clustered_again(tmp_path):
    a = _jets(tmp_path, "a.h5", seed=1)
    out = tmp_path / "out.h5"
    run_batch([a], _greedy(), output=out, progress=False)
    st = a.stat()
    jio.write(a, generate(6, ShowerParams.w(), seed=9, max_leaves=14))
    os.utime(a, ns=(st.st_atime_ns, st.st_mtime_ns))  # same time stamp, other jets
    [again] = run_batch([a], _greedy(), output=out, progress=False)
    assert not again.already_done
    assert jets_digest(jio.read(out)) == jets_digest(jio.read(a))


def test_finished_output_of_other_settings_is_not_replaced(tmp_path):
    """Issue 35 point 4: rerunning into the same output with other algorithms (or options, time
    limit, reading settings) replaced the finished result; now the file is kept and the input
    fails naming the differences and how to replace it."""
    a = _jets(tmp_path, "a.h5")
    out = tmp_path / "out.h5"
    [first] = run_batch([a], _greedy(), output=out, progress=False)
    assert first.ok
    before = out.read_bytes()
    other = BatchConfig(algorithms=["kt"], chunk_size=4, time_limit=5.0)
    [second] = run_batch([a], other, output=out, progress=False)
    assert not second.ok and out.read_bytes() == before
    assert "algorithms: greedy -> kt" in second.error and "time_limit: (none) -> 5.0" in second.error
    assert "--fresh" in second.error
    assert not parts_dir(out).exists()
    [third] = run_batch([a], other, output=out, progress=False, fresh=True)
    assert third.ok and list(jio.read_results(out)) == ["kt"]


def test_reuse_needs_the_same_jets_hash(tmp_path):
    a = _jets(tmp_path, "a.h5")
    out = tmp_path / "out.h5"
    run_batch([a], _greedy(), output=out, progress=False)
    identity = input_identity(a, jets_digest(jio.read(a)))
    stored = jio.file_info(out)["attrs"]["input_identity"]
    assert '"sha256"' in stored
    assert is_complete_output(out, 6, _greedy(), {}, identity)
    assert not is_complete_output(out, 6, _greedy(), {}, {**identity, "sha256": "0" * 64})


# ---------------------------------------------------------------------- 4 one bad file
def _two_d_offsets(tmp_path: Path) -> Path:
    bad = _jets(tmp_path, "bad.h5", seed=5)
    with h5py.File(bad, "r+") as f:
        lo = f["jets/leaf_offsets"][()]
        del f["jets/leaf_offsets"]
        f["jets/leaf_offsets"] = np.stack([lo, lo], axis=1)
    return bad


def test_one_bad_file_does_not_stop_the_run(tmp_path, capsys):
    a1 = _jets(tmp_path, "a1.h5", seed=1)
    bad = _two_d_offsets(tmp_path)
    z9 = _jets(tmp_path, "z9.h5", seed=3)
    code = main(["cluster", str(a1), str(bad), str(z9), "--algorithms", "greedy", "-o",
                 str(tmp_path / "out"), "--no-progress"])
    out = capsys.readouterr().out
    assert code == 1
    lines = [ln for ln in out.splitlines() if ln.startswith("FAILED")]
    assert lines == [f"FAILED {bad}: inconsistent columns: 'jets/leaf_offsets' has shape (7, 2), "
                     "expected (number of jets + 1,)"]
    assert (tmp_path / "out" / "a1.results.h5").is_file()
    assert (tmp_path / "out" / "z9.results.h5").is_file()


@pytest.mark.parametrize("error", [RuntimeError("boom\nsecond line"), MemoryError(),
                                   TypeError("only 0-dimensional arrays"), KeyError("x")])
def test_any_error_of_a_file_becomes_one_line(tmp_path, monkeypatch, error):
    import jetastar.batch.runner as batch

    good = _jets(tmp_path, "good.h5")
    bad = _jets(tmp_path, "bad.h5", seed=2)
    class Flaky(batch.JetFileReader):
        def __init__(self, path):
            if path.name == "bad.h5":
                raise error
            super().__init__(path)

    monkeypatch.setattr(batch, "JetFileReader", Flaky)
    s_bad, s_good = run_batch([bad, good], _greedy(), output_dir=tmp_path / "o", progress=False)
    assert s_good.ok and s_good.status_counts == {"greedy": {"ok": 6}}
    assert s_bad.error and "\n" not in s_bad.error
    assert type(error).__name__ in s_bad.error or "out of memory" in s_bad.error


# ---------------------------------------------------------------------- 5 inconsistent columns
def test_hdf5_per_jet_column_shorter_than_the_offsets(tmp_path, capsys):
    cut = _jets(tmp_path, "cut.h5")
    with h5py.File(cut, "r+") as f:
        ids = f["jets/jet_id"][()]
        del f["jets/jet_id"]
        f["jets/jet_id"] = ids[:3]
    with pytest.raises(FileFormatError, match=r"'jets/jet_id' has shape \(3,\), expected \(6,\)"):
        jio.read(cut)
    with pytest.raises(FileFormatError):
        jio.n_jets(cut)
    assert main(["info", str(cut)]) == 1
    [s] = run_batch([cut], _greedy(), output=tmp_path / "o.h5", progress=False)
    assert "jet_id" in s.error and not (tmp_path / "o.h5").exists()


def test_hdf5_n_leaves_disagreeing_with_offsets(tmp_path):
    path = _jets(tmp_path, "nl.h5")
    with h5py.File(path, "r+") as f:
        f["jets/n_leaves"][0] += 1
    with pytest.raises(FileFormatError, match="entry 0: 'jets/n_leaves'"):
        jio.read(path)


def _root_with_wrong_counts(tmp_path: Path) -> Path:
    import awkward as ak
    import uproot

    src = tmp_path / "ok.root"
    jio.write(src, generate(6, ShowerParams.w(), seed=4, max_leaves=14))
    with uproot.open(src) as f:
        meta = str(f["meta"])
        arr = f["jets"].arrays(library="ak")
    kinds, data = {}, {}
    for k in ak.fields(arr):
        if k in ("nleaf", "nnode"):
            continue
        data[k] = arr[k]
        kinds[k] = "string" if k == "jet_type" else (
            arr[k].type.content if arr[k].ndim > 1 else np.asarray(arr[k]).dtype)
    nleaf = np.asarray(arr["nleaf"])
    assert len(set(nleaf.tolist())) > 1
    # the same total, other jets: every jet would get leaves of its neighbour
    data["nleaf"] = np.roll(nleaf, 1).astype(np.int32)
    data["nnode"] = np.asarray(arr["nnode"]).astype(np.int32)
    kinds["nleaf"] = kinds["nnode"] = np.int32
    bad = tmp_path / "bad.root"
    with uproot.recreate(bad) as g:
        g["meta"] = meta
        tree = g.mktree("jets", kinds, counter_name=lambda c: "n_" + c)
        tree.extend(data)
    return bad


def test_root_count_branch_disagreeing_with_jagged_leaves(tmp_path):
    bad = _root_with_wrong_counts(tmp_path)
    with pytest.raises(FileFormatError, match=r"entry 0: 'nleaf' is \d+ but 'leaf_E' has"):
        jio.read(bad, validate=False)
    [s] = run_batch([bad], _greedy(), output=tmp_path / "o.h5", progress=False)
    assert "'nleaf'" in s.error


# ---------------------------------------------------------------------- 7 sane sizes
def test_hdf5_fill_value_columns_are_not_allocated(tmp_path):
    path = _jets(tmp_path, "huge.h5")
    big = 10**7
    with h5py.File(path, "r+") as f:
        g = f["jets"]
        for c in ("E", "px", "py", "pz"):
            del g[c]
            g.create_dataset(c, shape=(big,), dtype="f8", chunks=(16384,), compression="gzip")
        lo = g["leaf_offsets"][()]
        g["n_leaves"][-1] += big - lo[-1]
        lo[-1] = big
        g["leaf_offsets"][...] = lo
    assert path.stat().st_size < 200_000
    with pytest.raises(FileFormatError, match=r"'jets/E' declares 10000000 values .* refusing"):
        jio.read(path, validate=False)


class _Storage:
    pass


def _fake_module(name: str, **attrs: object) -> types.ModuleType:
    mod = types.ModuleType(name)
    for key, value in attrs.items():
        value.__module__ = name  # type: ignore[attr-defined]
        value.__qualname__ = key  # type: ignore[attr-defined]
        setattr(mod, key, value)
    return mod


def _zero_stride_pickle() -> bytes:
    """A torch-style legacy pickle of one tensor of shape (10^8, 4) viewing ONE double."""

    class DoubleStorage:
        pass

    def _load_from_bytes(b):  # pragma: no cover - never called, only pickled by name
        raise AssertionError

    def _rebuild_tensor_v2(*a):  # pragma: no cover
        raise AssertionError

    mods = {"torch": _fake_module("torch", DoubleStorage=DoubleStorage),
            "torch.storage": _fake_module("torch.storage", _load_from_bytes=_load_from_bytes),
            "torch._utils": _fake_module("torch._utils", _rebuild_tensor_v2=_rebuild_tensor_v2)}
    saved = {k: sys.modules.get(k) for k in mods}
    sys.modules.update(mods)
    try:
        class Inner(pickle.Pickler):
            def persistent_id(self, obj):
                if obj is _Storage:
                    return ("storage", DoubleStorage, "0", "cpu", 1, None)
                return None

        record = io.BytesIO()
        for header in (0x1950A86A20F9469CFC6C, 1001, {"little_endian": True}):
            pickle.dump(header, record, protocol=2)
        Inner(record, protocol=2).dump(_Storage)
        pickle.dump(["0"], record, protocol=2)
        record.write(struct.pack("<q", 1) + struct.pack("<d", 1.0))

        class Outer:
            def __reduce__(self):
                storage = _Reduce(_load_from_bytes, (record.getvalue(),))
                return (_rebuild_tensor_v2, (storage, 0, (10**8, 4), (0, 0), False,
                                             collections.OrderedDict()))

        class _Reduce:
            def __init__(self, f, args):
                self.f, self.args = f, args

            def __reduce__(self):
                return (self.f, self.args)

        return pickle.dumps([{"leaves": Outer()}], protocol=2)
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v


def test_zero_stride_tensor_in_a_tiny_pickle_is_refused(tmp_path):
    path = tmp_path / "tiny.pkl"
    path.write_bytes(_zero_stride_pickle())
    assert path.stat().st_size < 1000
    with pytest.raises(FileFormatError, match=r"tiny\.pkl: .*shape \(100000000, 4\).*refusing"):
        jio.read(path)


# ---------------------------------------------------------------------- 6 text booleans
@pytest.fixture(scope="module")
def small_jet() -> Jet:
    return generate(1, ShowerParams.qcd(), seed=3, max_leaves=8)[0]


@pytest.mark.parametrize("text", ["False", "false", "no", "0", "off", 0, False])
def test_text_false_is_false(small_jet, text):
    res = cluster(small_jet, "trellis", log_z=text)
    assert res.log_z is None and res.n_trees is None


@pytest.mark.parametrize("text", ["True", "yes", "1", 1, True])
def test_text_true_is_true(small_jet, text):
    assert cluster(small_jet, "trellis", log_z=text).log_z is not None


def test_text_booleans_in_batch_options_are_stored_as_booleans():
    config = BatchConfig(algorithms=["trellis"], options={"trellis": {"log_z": "False"}})
    check_config(config)
    assert config.options["trellis"]["log_z"] is False
    with pytest.raises(BatchError, match="log_z must be true or false, got 'maybe'"):
        check_config(BatchConfig(algorithms=["trellis"], options={"trellis": {"log_z": "maybe"}}))


# ---------------------------------------------------------------------- 8 options before work
@pytest.mark.parametrize(("argv", "code", "message"), [
    (["--algorithms", "beam", "--option", "beam.beam_size=0"], 2, "beam_size must be >= 1"),
    (["--algorithms", ""], 2, "--algorithms is empty"),
    (["--algorithms", "greedy,greedy"], 2, "given more than once: greedy"),
    (["--algorithms", "greedy", "--workers", "0"], 2, "workers must be an integer >= 1"),
    (["--algorithms", "greedy", "--max-leaves", "unknown=3"], 2, "size limit given for 'unknown'"),
    (["--algorithms", "greedy", "--time-limit", "inf"], 2, "finite number > 0"),
    (["--algorithms", "mcts", "--option", "n_rollouts=many"], 2, "n_rollouts must be an integer"),
])
def test_bad_settings_fail_before_any_work(tmp_path, capsys, argv, code, message):
    jets = _jets(tmp_path, "j.h5")
    out = tmp_path / "out"
    assert main(["cluster", str(jets), *argv, "-o", str(out), "--no-progress"]) == code
    assert message in capsys.readouterr().err
    assert not out.exists()


# ---------------------------------------------------------------------- 9 leftovers
def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_temporaries_of_dead_runs_are_removed_live_ones_kept(tmp_path):
    jets = _jets(tmp_path, "j.h5")
    out = tmp_path / "r.h5"
    dead = tmp_path / f".r.h5.{_dead_pid()}.0123abcd.tmp"
    dead.write_bytes(b"half a file")
    live_proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        live = tmp_path / f".r.h5.{live_proc.pid}.4567abcd.tmp"
        live.write_bytes(b"being written")
        [s] = run_batch([jets], _greedy(), output=out, progress=False)
        assert s.ok
        assert not dead.exists() and live.exists()
    finally:
        live_proc.kill()
        live_proc.wait()


@pytest.mark.parametrize("what", ["generate", "observables", "jets h5", "jets root"])
def test_every_writer_removes_what_killed_writers_of_its_file_left(tmp_path, what):
    """A SIGKILLed `jetastar generate` / `observables` left its hidden temporary file (78 MB in a
    probe) for good: the next write of the same file removes it (a live writer's is kept)."""
    from jetastar import io as jio
    from jetastar.cli import main
    from jetastar.ginkgo import ShowerParams, generate

    jets = _jets(tmp_path, "j.h5")
    name = {"generate": "g.h5", "observables": "o.root", "jets h5": "w.h5",
            "jets root": "w.root"}[what]
    dead = tmp_path / f".{name}.{_dead_pid()}.0123abcd.tmp"
    dead.write_bytes(b"half a file")
    other = tmp_path / f".other.h5.{_dead_pid()}.0123abcd.tmp"  # another file's: not ours
    other.write_bytes(b"x")
    out = tmp_path / name
    if what == "generate":
        assert main(["generate", "--n", "3", "--no-progress", "-o", str(out)]) == 0
    elif what == "observables":
        res = tmp_path / "res.h5"
        assert run_batch([jets], _greedy(), output=res, progress=False)[0].ok
        assert main(["observables", str(res), "-o", str(out)]) == 0
    else:
        jio.write(out, generate(2, ShowerParams.qcd(), seed=1))
    assert out.exists() and not dead.exists() and other.exists()


def test_notice_folders_of_dead_runs_are_removed(tmp_path):
    from jetastar._leftovers import NOTICE_PREFIX, remove_dead_notice_folders

    dead = tmp_path / f"{NOTICE_PREFIX}{_dead_pid()}-abc"
    mine = tmp_path / f"{NOTICE_PREFIX}{os.getpid()}-abc"
    dead.mkdir()
    mine.mkdir()
    assert remove_dead_notice_folders(tmp_path) == 1
    assert not dead.exists() and mine.exists()


def test_a_damaged_part_file_is_recomputed(tmp_path, monkeypatch):
    import jetastar.batch.runner as batch

    jets = _jets(tmp_path, "j.h5", n=8)
    out = tmp_path / "r.h5"
    config = BatchConfig(algorithms=["greedy"], chunk_size=2)

    def killed(*a, **k):
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(batch, "merge_parts", killed)
        with pytest.raises(KeyboardInterrupt):
            run_batch([jets], config, output=out, progress=False)
    parts = sorted((tmp_path / "r.h5.parts").glob("part-*.h5"))
    assert len(parts) == 4
    data = parts[1].read_bytes()
    parts[1].write_bytes(data[: len(data) // 2])
    [s] = run_batch([jets], config, output=out, progress=False)
    assert s.ok, s.error
    assert (s.chunks_total, s.chunks_reused) == (4, 3)
    assert s.status_counts == {"greedy": {"ok": 8}}


def test_output_problems_are_found_before_clustering(tmp_path):
    jets = _jets(tmp_path, "j.h5")
    with pytest.raises(BatchError, match="would overwrite the input"):
        run_batch([jets], _greedy(), output=jets, progress=False)
    with pytest.raises(BatchError, match="file name is too long"):
        run_batch([jets], _greedy(), output=tmp_path / ("x" * 240 + ".h5"), progress=False)
    assert jio.file_info(jets)["results"] == {}


# ---------------------------------------------------------------------- 10 messages
def test_truncated_root_file_is_refused_by_info(tmp_path, capsys):
    path = tmp_path / "r.root"
    jio.write(path, generate(40, ShowerParams.qcd(), seed=2))
    data = path.read_bytes()
    for frac in (0.75, 0.9, 0.99):
        cut = tmp_path / f"cut{int(frac * 100)}.root"
        cut.write_bytes(data[: int(len(data) * frac)])
        assert main(["info", str(cut)]) == 1
        assert "truncated ROOT file" in capsys.readouterr().err


def test_tiny_energies_give_a_clear_error_in_the_kt_family():
    jet = Jet(np.array([[1e-300, 0, 0, 0], [1e-300, 0, 0, 0], [1.0, 0, 0, 0.5]]))
    for name in ("kt", "cambridge", "antikt"):
        with pytest.raises(InvalidJetError, match=r"leaf 0 .* has no computable rapidity"):
            cluster(jet, name)


def test_a_beam_that_cannot_fit_in_memory_is_refused(small_jet):
    jet = generate(1, ShowerParams.qcd(t_cut=1.0), seed=1, min_leaves=20)[0]
    with pytest.raises(TooLargeError, match=r"needs about .* of memory"):
        cluster(jet, "beam", beam_size=10**9)


def test_huge_sizes_are_printed_compactly():
    from jetastar.clustering._engine import format_bytes as _format_bytes

    assert len(_format_bytes(2.0**1000)) < 20
    assert len(_format_bytes(3**700)) < 20


def test_unknown_generator_parameter(tmp_path, capsys):
    assert main(["generate", "--n", "2", "--param", "foo=1", "-o", str(tmp_path / "x.h5")]) == 2
    assert "unknown parameter 'foo'" in capsys.readouterr().err


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_a_fifo_is_refused_not_read(tmp_path):
    fifo = tmp_path / "jets.h5"
    os.mkfifo(fifo)
    proc = subprocess.run([sys.executable, "-m", "jetastar", "info", str(fifo)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "not a regular file" in proc.stderr


def test_non_utf8_file_names(tmp_path):
    jets = _jets(tmp_path, "j.h5")
    odd = Path(os.fsdecode(os.fsencode(str(tmp_path)) + b"/n\xe9.h5"))
    os.rename(jets, odd)
    [s] = run_batch([odd], _greedy(), output_dir=tmp_path / "o", progress=False)
    assert s.ok, s.error
    assert jio.n_jets(s.output) == 6


def test_permission_denied_is_not_called_corrupt(tmp_path):
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp())  # reachable by another user (pytest's folders are not)
    os.chmod(folder, 0o755)
    jets = _jets(folder, "j.h5")
    jets.chmod(0)
    try:
        if os.geteuid() == 0:
            if shutil.which("setpriv") is None:
                pytest.skip("running as root (permissions not enforced) and no setpriv")
            code = ("import sys; from jetastar.io.hdf5 import read_hdf5\n"
                    "try:\n    read_hdf5(sys.argv[1])\nexcept PermissionError as e:\n"
                    "    print('PE', e)\n")
            proc = subprocess.run(
                ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable,
                 "-c", code, str(jets)], capture_output=True, text=True, timeout=120,
                env={**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "nocache")})
            if "PE" not in proc.stdout and "ModuleNotFoundError" in proc.stderr:
                pytest.skip("the package is not readable as an unprivileged user")
            assert "PE" in proc.stdout and "permission denied" in proc.stdout, proc.stderr
        else:
            with pytest.raises(PermissionError, match="permission denied"):
                jio.read(jets)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# ---------------------------------------------------------------------- 3 unbounded work
def test_hopeless_jets_are_refused_under_a_time_limit_with_an_estimate():
    from jetastar.batch.work import run_one as _run_one

    rng = np.random.default_rng(1)
    p = rng.normal(size=(1000, 3)) * 0.3 + np.array([0, 0, 10.0])
    jet = Jet(np.column_stack([np.sqrt((p**2).sum(1) + 0.01), p]), jet_id=7)
    config = BatchConfig(algorithms=["greedy"], time_limit=0.01)
    res = _run_one(jet, "greedy", {}, config)
    assert res.status == "skipped"
    assert "estimated at" in res.message and "time limit of 0.01 s" in res.message
    assert math.isinf(res.log_likelihood)
    # beam search and MCTS have a time option of their own: they get the limit and stop at it
    small = Jet(jet.leaves[:200], jet_id=7)
    for name in ("beam", "mcts"):
        config = BatchConfig(algorithms=[name], time_limit=0.2)
        res = _run_one(small, name, options_for(name, config, 1), config)
        # (MCTS: not started, since even a lower estimate of its search is over the limit)
        assert res.status == "budget" and "max_time=0.2 s" in res.message, res.message
