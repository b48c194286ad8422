"""Batch processing: statuses, limits, bad jets, resuming after a kill, process pools and dask.

The small algorithms of ``helpers.batch_algorithms`` ("test-chain", "test-exact") make the tests
independent of the real algorithms; workers import that module through the ``plugins`` mechanism.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from helpers.batch_algorithms import PLUGIN, SLEEP_SCALE, caterpillar
from helpers.processes import signal_group_and_wait, start_like_a_terminal

from jetastar import io as jio
from jetastar.batch import (
    BatchConfig,
    BatchError,
    cluster_collection,
    parse_limits,
    parse_options,
    run_batch,
)
from jetastar.batch.sources import JetFileReader
from jetastar.ginkgo import ShowerParams, generate, log_likelihood

TESTS = Path(__file__).parent


@pytest.fixture(scope="module")
def jets_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("batch") / "qcd.h5"
    jio.write(path, generate(60, ShowerParams.qcd(), seed=11))
    return path


def _check_complete(out: Path, n: int, algorithms=("test-chain",)) -> dict:
    jets = jio.read(out, validate=False)
    tables = jio.read_results(out)
    assert len(jets) == n
    for name in algorithms:
        t = tables[name]
        assert np.array_equal(t.jet_index, np.arange(n)), "every jet exactly once, in order"
        assert np.array_equal(t.jet_id, jets.jet_id)
    if "test-chain" in algorithms:
        t = tables["test-chain"]
        for row in range(0, n, 7):
            jet = jets[row]
            assert t.tree(row) == caterpillar(jet.n_leaves)
            assert t.log_likelihood[row] == log_likelihood(jet, caterpillar(jet.n_leaves))
    return tables


def test_parse_options_and_limits():
    opts = parse_options(["beam.beam_size=10", "likelihood=legacy", "x.flag=true", "y.v=[1,2]"])
    assert opts == {"beam": {"beam_size": 10}, "*": {"likelihood": "legacy"},
                    "x": {"flag": True}, "y": {"v": [1, 2]}}
    with pytest.raises(BatchError, match="key=value"):
        parse_options(["oops"])
    assert parse_limits(["trellis=12"]) == {"trellis": 12}
    with pytest.raises(BatchError, match="algorithm=N"):
        parse_limits(["trellis"])


def test_statuses_limits_and_options(jets_file):
    jets = jio.read(jets_file)
    config = BatchConfig(
        ["test-chain", "test-exact"],
        options={"test-chain": {"fail_id": int(jets.jet_id[3])},
                 "test-exact": {"too_large_above": 5}},
        time_limit=0.5, plugins=[PLUGIN],
    )
    tables = cluster_collection(jets, config, source=str(jets_file))
    chain, exact = tables["test-chain"], tables["test-exact"]
    assert chain.status[3] == "failed" and "deliberate failure" in chain.message[3]
    assert chain.result(3).tree is None
    # the time limit reaches algorithms with a max_time option
    import json

    assert json.loads(chain.options[0])["max_time"] == 0.5
    assert chain.counters["calls"][0] == 1
    n = jets.n_leaves
    # exact method: jets over its registry size limit are skipped; TooLargeError -> skipped
    assert np.all(exact.status[n > 6] == "skipped")
    assert all("size limit 6" in m for m in exact.message[n > 6])
    assert np.all(exact.status[n == 6] == "skipped")
    assert "too large" in exact.message[np.flatnonzero(n == 6)[0]]
    assert np.all(exact.status[n <= 5] == "ok") and np.all(exact.exact[n <= 5])
    assert exact.exact_method and not chain.exact_method
    # size-limit override
    config2 = BatchConfig(["test-exact"], max_leaves={"test-exact": 4}, plugins=[PLUGIN])
    t2 = cluster_collection(jets, config2)["test-exact"]
    assert np.all((t2.status == "skipped") == (n > 4))


def test_time_limit_without_time_option_is_noted(jets_file):
    jets = jio.read(jets_file, slice(0, 3))
    config = BatchConfig(["test-exact", "test-chain"], max_leaves={"test-exact": 100},
                         options={"test-exact": {"delay": 0.03}, "test-chain": {"delay": 0.03}},
                         time_limit=0.01, plugins=[PLUGIN])
    tables = cluster_collection(jets, config)
    assert all(s == "ok" for s in tables["test-exact"].status)
    assert all("over the time limit" in m for m in tables["test-exact"].message)
    assert all(s == "budget" for s in tables["test-chain"].status)


def test_bad_jets_are_recorded_and_the_rest_goes_on(tmp_path, jets_file):
    jets = jio.read(jets_file)
    jets.leaves[jets.leaf_offsets[5], 0] = np.nan
    jets.leaves[jets.leaf_offsets[9] + 1, 0] = -2.0
    bad = tmp_path / "bad.h5"
    jio.write(bad, jets)
    config = BatchConfig(["test-chain"], plugins=[PLUGIN], chunk_size=8)
    (summary,) = run_batch([bad], config, output_dir=tmp_path / "out", progress=False)
    assert summary.ok, summary.error
    assert summary.status_counts["test-chain"] == {"failed": 2, "ok": 58}
    t = jio.read_results(summary.output)["test-chain"]
    msg5, msg9 = t.message[5], t.message[9]
    assert "bad.h5: entry 5" in msg5 and "field 'leaves'" in msg5 and "non-finite E" in msg5
    assert f"jet {jets.jet_id[9]}" in msg9 and "non-positive energy" in msg9
    assert t.status[4] == "ok" and t.status[10] == "ok"


def test_file_level_errors_do_not_stop_other_files(tmp_path, jets_file):
    broken = tmp_path / "broken.h5"
    broken.write_text("not hdf5")
    config = BatchConfig(["test-chain"], plugins=[PLUGIN], chunk_size=20)
    summaries = run_batch([broken, tmp_path / "missing.root", jets_file], config,
                          output_dir=tmp_path / "out", progress=False)
    assert "not an HDF5 file" in summaries[0].error
    assert "no such file" in summaries[1].error
    assert summaries[2].ok and Path(summaries[2].output).name == "qcd.results.h5"
    _check_complete(Path(summaries[2].output), 60)
    with pytest.raises(ValueError, match="unknown algorithm 'nope'"):
        run_batch([jets_file], BatchConfig(["nope"]), output_dir=tmp_path)
    with pytest.raises(BatchError, match="unknown option"):
        run_batch([jets_file], BatchConfig(["test-chain"], options={"test-chain": {"zz": 1}},
                                           plugins=[PLUGIN]), output_dir=tmp_path)


def test_one_input_path_is_one_file(tmp_path, jets_file):
    # a path given as a string (or Path) is one input, not a sequence of one-letter files
    config = BatchConfig(["test-chain"], plugins=[PLUGIN], chunk_size=20)
    for given, out in ((str(jets_file), tmp_path / "a.h5"), (jets_file, tmp_path / "b.h5")):
        (summary,) = run_batch(given, config, output=out, progress=False)
        assert summary.ok and summary.input == str(jets_file) and Path(summary.output) == out
        _check_complete(out, 60)
    (summary,) = run_batch(str(jets_file), config, output_dir=tmp_path / "folder", progress=False)
    assert Path(summary.output) == tmp_path / "folder" / "qcd.results.h5"
    # and algorithms given as one string are names, as in cluster_jets and on the command line
    assert BatchConfig("greedy").algorithms == ["greedy"]
    assert BatchConfig(" greedy, kt ,").algorithms == ["greedy", "kt"]


def _interrupted_run(monkeypatch, parts: int, inputs, config, out, **kw) -> None:
    """A batch run interrupted (Ctrl-C) as it writes its part number ``parts + 1`` (``kw``: more
    arguments of :func:`run_batch`)."""
    import jetastar.batch.runner as batch

    real = batch.write_part
    calls = {"n": 0}

    def flaky(*args):
        if calls["n"] == parts:
            raise KeyboardInterrupt
        calls["n"] += 1
        real(*args)

    with monkeypatch.context() as m:
        m.setattr(batch, "write_part", flaky)
        with pytest.raises(KeyboardInterrupt):
            run_batch(inputs, config, output=out, progress=False, **kw)


def test_resume_after_interrupt_in_process(tmp_path, jets_file, monkeypatch):

    config = BatchConfig(["test-chain", "test-exact"], plugins=[PLUGIN], chunk_size=7)
    out = tmp_path / "res.root"
    _interrupted_run(monkeypatch, 3, [jets_file], config, out)
    assert not out.exists()
    # the copy of the jets into the output stopped, and its temporary file is gone
    assert not [t for t in threading.enumerate() if t.name.startswith("jetastar copy")]
    assert not list(tmp_path.glob(".res.root.*"))
    parts = out.with_name(out.name + ".parts")
    assert len(list(parts.glob("part-*.h5"))) == 3
    # other settings cannot reuse the parts; the message says what differs
    other = BatchConfig(["test-chain", "test-exact"], plugins=[PLUGIN], chunk_size=7,
                        time_limit=100.0)
    (s,) = run_batch([jets_file], other, output=out, progress=False)
    assert "different settings (time_limit: (none) -> 100.0)" in s.error and "--fresh" in s.error
    assert len(list(parts.glob("part-*.h5"))) == 3
    # another chunking reuses them (the rest is cut into chunks of 5)
    rechunked = BatchConfig(["test-chain", "test-exact"], plugins=[PLUGIN], chunk_size=5)
    (s,) = run_batch([jets_file], rechunked, output=out, progress=False)
    assert s.ok and s.chunks_reused == 3 and s.chunks_total == 3 + 8
    assert not parts.exists()
    _check_complete(out, 60, ("test-chain", "test-exact"))
    # a finished output is not recomputed
    (s,) = run_batch([jets_file], config, output=out, progress=False)
    assert s.already_done
    # --fresh with other settings recomputes
    (s,) = run_batch([jets_file], other, output=out, progress=False, fresh=True)
    assert s.ok and not s.already_done and s.chunks_reused == 0


def test_parts_of_other_jets_or_without_a_chunk_do_not_block_a_run(tmp_path, monkeypatch):
    """A part folder that holds nothing (its run ended before its first chunk: a bad file, a
    wrong option) or only parts of other jets (the input regenerated since) is discarded, not
    refused: there is nothing in it to resume."""
    inp = tmp_path / "jets.h5"
    jio.write(inp, generate(30, ShowerParams.qcd(), seed=2))
    config = BatchConfig(["test-chain"], plugins=[PLUGIN], chunk_size=5)
    out = tmp_path / "res.h5"
    parts = out.with_name(out.name + ".parts")
    # a run with other settings that ended before its first part
    _interrupted_run(monkeypatch, 0, [inp], BatchConfig(["test-chain"], plugins=[PLUGIN],
                                                        chunk_size=5, time_limit=50.0), out)
    assert (parts / "manifest.json").is_file() and _parts(out) == []
    (s,) = run_batch([inp], config, output=out, progress=False)
    assert s.ok and s.chunks_reused == 0
    _check_complete(out, 30)
    # an interrupted run, then other jets under the same name: its parts are stale
    out.unlink()
    _interrupted_run(monkeypatch, 2, [inp], config, out)
    assert len(_parts(out)) == 2
    jio.write(inp, generate(30, ShowerParams.w(), seed=3))
    (s,) = run_batch([inp], config, output=out, progress=False)
    assert s.ok and s.chunks_reused == 0 and not parts.exists()
    _check_complete(out, 30)  # (the trees of the output's jets)
    assert np.array_equal(jio.read(out, validate=False).leaves, jio.read(inp).leaves)


def _parts(out: Path) -> list[Path]:
    return list(out.with_name(out.name + ".parts").glob("part-*.h5"))


def _cluster_command(tmp_path: Path, n_jets: int, seed: int, delay: float, chunk_size: int,
                     ) -> tuple[list[str], dict[str, str], Path]:
    """``jetastar cluster`` of ``n_jets`` W jets with test-chain on 2 workers: command, environment
    (the workers import the test algorithms as a plugin) and output file."""
    inp = tmp_path / "jets.h5"
    jio.write(inp, generate(n_jets, ShowerParams.w(), seed=seed))
    out = tmp_path / "out.h5"
    cmd = [sys.executable, "-m", "jetastar", "cluster", str(inp), "--algorithms", "test-chain",
           "--plugin", PLUGIN, "--option", f"test-chain.delay={delay}", "--chunk-size",
           str(chunk_size), "--workers", "2", "-o", str(out), "--no-progress"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH",
                                                                                     "")]))
    return cmd, env, out


def test_killed_subprocess_resumes_exactly_once(tmp_path):
    cmd, env, out = _cluster_command(tmp_path, 120, seed=5, delay=0.02, chunk_size=4)
    killed_with = []
    for target in (3, 12):
        proc = subprocess.Popen(cmd, env=env, start_new_session=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None and len(_parts(out)) < target:
            time.sleep(0.05)
        assert proc.poll() is None, proc.stderr.read().decode()
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stderr.close()
        killed_with.append(len(_parts(out)))
    assert not out.exists()
    assert 3 <= killed_with[0] <= killed_with[1] < 30
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "chunks resumed" in done.stdout
    assert not out.with_name(out.name + ".parts").exists()
    _check_complete(out, 120)


def test_process_pool_matches_in_process(tmp_path, jets_file):
    config = BatchConfig(["test-chain", "test-exact"], plugins=[PLUGIN], chunk_size=9)
    (a,) = run_batch([jets_file], config, output=tmp_path / "one.h5", progress=False)
    (b,) = run_batch([jets_file], config, output=tmp_path / "two.h5", workers=2, progress=False)
    assert a.ok and b.ok, (a.error, b.error)
    ta, tb = jio.read_results(a.output), jio.read_results(b.output)
    for name in ta:
        assert np.array_equal(ta[name].log_likelihood, tb[name].log_likelihood, equal_nan=True)
        assert list(ta[name].status) == list(tb[name].status)


def test_the_workers_compile_estimate_does_not_outlive_their_warm_up(monkeypatch):
    # the workers take the estimate from the environment when a submission starts them; this
    # process's later compilations (a Trellis after the run) must not be announced with it
    from jetastar import _jit
    from jetastar.batch import warm_up_workers

    monkeypatch.delenv("_JETASTAR_COMPILE_ESTIMATE", raising=False)
    monkeypatch.delenv("_JETASTAR_COMPILE_WHAT", raising=False)
    seen = []

    class Recorder:  # an executor that only records the notice each submission would show
        def submit(self, fn, *args):
            seen.append(_jit.notice_text())
            return None

    config = BatchConfig(["greedy", "beam"])
    warm_up_workers(Recorder(), config, 2)
    assert seen and all("those of greedy, beam; this takes roughly" in text for text in seen)
    assert _jit.notice_text() == _jit.COMPILE_NOTICE
    # an estimate given by a parent process is kept, and left in place
    monkeypatch.setenv("_JETASTAR_COMPILE_ESTIMATE", "20.0")
    warm_up_workers(Recorder(), config, 2)
    assert os.environ["_JETASTAR_COMPILE_ESTIMATE"] == "20.0"


def test_workers_warm_up_on_jets_as_large_as_the_run_has():
    from jetastar.batch import warm_up_workers

    sent = []

    class Recorder:  # (weak references: the warm-up tasks sent are remembered per executor)
        def submit(self, fn, *args):
            sent.append(args[-1])  # the largest jet the task warms up for
            return len(sent)

    pool, config = Recorder(), BatchConfig(["greedy", "beam"])
    first = warm_up_workers(pool, config, 2, largest_jet=16)
    assert sent == [16, 16]
    # the same warm-up jets (only the 7-leaf one): the tasks already sent
    assert warm_up_workers(pool, config, 2, largest_jet=12) == first and len(sent) == 2
    warm_up_workers(pool, config, 2, largest_jet=30)  # the 18-leaf one too: new tasks
    assert sent[2:] == [30, 30]


def test_a_jet_file_knows_its_largest_jet(jets_file):
    from jetastar.batch.runner import _largest_jet

    jets = jio.read(jets_file, validate=False)
    reader = JetFileReader(jets_file)
    assert _largest_jet(reader) == int(jets.n_leaves.max())
    assert _largest_jet(object()) is None  # a source that cannot tell: every warm-up jet


def test_dask_local_cluster(tmp_path, jets_file):
    distributed = pytest.importorskip("distributed")
    config = BatchConfig(["test-chain", "test-exact"], plugins=[PLUGIN], chunk_size=10)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as cluster, \
            distributed.Client(cluster) as client:
        (s,) = run_batch([jets_file], config, output=tmp_path / "dask.h5",
                         executor=client.get_executor(), progress=False)
        # the --scheduler path: connect by address
        (s2,) = run_batch([jets_file], config, output=tmp_path / "dask2.root",
                          scheduler=cluster.scheduler_address, progress=False)
    assert s.ok, s.error
    assert s2.ok, s2.error
    _check_complete(tmp_path / "dask.h5", 60, ("test-chain", "test-exact"))
    _check_complete(tmp_path / "dask2.root", 60, ("test-chain", "test-exact"))


def test_dask_workers_read_an_input_they_see_and_are_sent_one_they_do_not(
        tmp_path, jets_file, monkeypatch, capfd):
    """Dask workers that find the input at its path (same size and contents) read their chunks
    themselves; otherwise this process reads them and sends the jets, says so once, and Dask's
    warning about large task graphs is not repeated at every chunk. Same results either way."""
    import dask

    distributed = pytest.importorskip("distributed")
    from jetastar.batch import runner

    config = BatchConfig(["test-chain"], plugins=[PLUGIN], chunk_size=10)
    (here,) = run_batch([jets_file], config, output=tmp_path / "here.h5", progress=False)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=2, processes=True,
                                  dashboard_address=":0") as cluster, \
            distributed.Client(cluster) as client:
        with monkeypatch.context() as m:
            real_chunk = JetFileReader.chunk

            def read_here(self, start, stop, *, node_data=True):
                # (the output's copy of the jets reads them with their node data)
                assert node_data, "the main process read a chunk to cluster"
                return real_chunk(self, start, stop, node_data=node_data)

            m.setattr(JetFileReader, "chunk", read_here)
            (seen,) = run_batch([jets_file], config, output=tmp_path / "seen.h5",
                                executor=client.get_executor(), progress=False)
        assert seen.ok, seen.error
        assert "cannot read" not in capfd.readouterr().err
        # the workers find another file at the path: this process's stamp differs from theirs
        main, real = os.getpid(), runner.file_stamp
        monkeypatch.setattr(runner, "file_stamp",
                            lambda path: (0, "x") if os.getpid() == main else real(path))
        # (a chunk of 10 jets is ~8 kB, every other task far less)
        with dask.config.set({"distributed.admin.large-graph-warning-threshold": "6kB"}):
            (sent,) = run_batch([jets_file], config, output=tmp_path / "sent.h5",
                                executor=client.get_executor(), progress=False)
        assert sent.ok, sent.error
    err = capfd.readouterr().err
    assert err.count("the Dask workers cannot read") == 1 and "large graph" not in err
    expected = jio.read_results(here.output)["test-chain"]
    for out in (seen.output, sent.output):
        got = jio.read_results(out)["test-chain"]
        assert got.log_likelihood.tolist() == expected.log_likelihood.tolist()
        assert got.children.tolist() == expected.children.tolist()


def test_a_worker_reading_another_file_fails_its_chunk(tmp_path, jets_file):
    from jetastar.batch.runner import file_stamp, timed_file_chunk_task

    config = BatchConfig(["test-chain"], plugins=[PLUGIN])
    stamp = file_stamp(jets_file)
    assert stamp is not None and file_stamp(tmp_path / "none.h5") is None
    first, tables, _ = timed_file_chunk_task(str(jets_file), 0, 3, config, 1, stamp)
    assert first == 0 and len(tables["test-chain"]) == 3
    other = tmp_path / "other.h5"
    jio.write(other, generate(5, ShowerParams.qcd(), seed=2))
    with pytest.raises(BatchError, match="not the input of the run"):
        timed_file_chunk_task(str(other), 0, 3, config, 1, stamp)


def test_dask_says_when_a_worker_was_lost(tmp_path, capfd):
    import threading

    distributed = pytest.importorskip("distributed")
    inp = tmp_path / "jets.h5"
    jio.write(inp, generate(60, ShowerParams.w(), seed=12))
    out = tmp_path / "out.h5"
    config = BatchConfig(["test-chain"], options={"test-chain": {"delay": 0.1}}, plugins=[PLUGIN],
                         chunk_size=4)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as cluster, \
            distributed.Client(cluster) as client:
        pids = client.run(os.getpid)
        victim = sorted(pids)[0]

        def kill() -> None:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not _parts(out):
                time.sleep(0.05)
            os.kill(pids[victim], signal.SIGKILL)

        killer = threading.Thread(target=kill)
        killer.start()
        (s,) = run_batch([inp], config, output=out, executor=client.get_executor(),
                         progress=False)
        killer.join()
    assert s.ok, s.error
    assert f"Dask worker {victim} was lost" in capfd.readouterr().err
    _check_complete(out, 60)


def test_scheduler_needs_dask(tmp_path, jets_file, monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(BatchError, match=r"pip install 'jetastar\[dask\]'"):
        run_batch([jets_file], BatchConfig(["test-chain"], plugins=[PLUGIN]),
                  output=tmp_path / "x.h5", scheduler="tcp://127.0.0.1:1")


@pytest.mark.parametrize(("sig", "code", "word"), [(signal.SIGINT, 130, "interrupted"),
                                                   (signal.SIGTERM, 143, "terminated")])
def test_interrupt_with_workers_stops_keeps_finished_chunks_and_resumes(tmp_path, sig, code, word):
    # 48 jets x 0.5 s on 2 workers: ~12 s of work; the workers sleep through the signal, as a
    # compiled kernel would
    cmd, env, out = _cluster_command(tmp_path, 48, seed=6, delay=0.5, chunk_size=2)
    proc = start_like_a_terminal(cmd, env)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and proc.poll() is None and len(_parts(out)) < 2:
        time.sleep(0.05)
    assert proc.poll() is None, proc.stderr.read()
    kept_before = len(_parts(out))
    returncode, err, stopped_after = signal_group_and_wait(proc, sig)
    assert returncode == code, err
    assert stopped_after < 5.0, f"took {stopped_after:.1f} s to stop (work left: ~10 s)"
    assert f"jetastar: {word}:" in err and "kept in" in err and "rerun" in err, err
    assert "Traceback" not in err and "InvalidStateError" not in err, err
    parts = _parts(out)
    assert kept_before <= len(parts) < 24
    assert f"{2 * len(parts)} of 48 jets" in err
    assert not out.exists()
    # the rest without the sleeps (the same options, so the run resumes)
    done = subprocess.run(cmd, env={**env, SLEEP_SCALE: "0"}, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"{len(parts)}/24 chunks resumed" in done.stdout
    _check_complete(out, 48)


def test_interrupted_shutdown_after_cancelling_futures_raises_nothing(monkeypatch):
    """Issue 35 point 5: cancelled futures still queued in a process pool made its manager thread
    raise InvalidStateError (a traceback next to "interrupted") once the workers were killed."""
    import concurrent.futures as cf
    import threading

    from jetastar.batch.executors import shutdown_executor

    errors: list[BaseException] = []
    monkeypatch.setattr(threading, "excepthook", lambda a: errors.append(a.exc_value))
    pool = cf.ProcessPoolExecutor(2)
    futures = [pool.submit(time.sleep, 0.5) for _ in range(20)]
    futures[0].result()  # the workers run; most of the rest wait in the pool's table
    assert sum(f.cancel() for f in futures) >= 10
    shutdown_executor(pool, interrupted=True)
    time.sleep(0.5)  # the manager thread notices the killed workers
    assert errors == []
    assert all(f.done() for f in futures)


def test_an_interrupted_shutdown_waits_for_the_pools_manager_thread():
    """On Python < 3.12 the manager thread of a process pool closes its wake-up pipe as it ends,
    racing the interpreter's exit hook, which writes to it ("OSError: Bad file descriptor" after
    "interrupted", seen once in CI): the shutdown after an interrupt waits for that thread."""
    import concurrent.futures as cf

    from jetastar.batch.executors import shutdown_executor

    pool = cf.ProcessPoolExecutor(2)
    futures = [pool.submit(time.sleep, 0.5) for _ in range(6)]
    futures[0].result()
    manager = pool._executor_manager_thread
    shutdown_executor(pool, interrupted=True)
    assert manager is not None and not manager.is_alive()


def test_progress_moves_per_jet_with_workers(tmp_path, jets_file, monkeypatch):
    import jetastar._progress as progress_module

    updates: list[int] = []

    class Recorder:
        def __init__(self, **kwargs):
            self.n = kwargs.get("initial", 0)

        def update(self, k):
            updates.append(k)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            pass

    monkeypatch.setattr(progress_module, "progress_bar", lambda **kw: Recorder(**kw))
    config = BatchConfig(["test-chain"], options={"test-chain": {"delay": 0.1}},
                         plugins=[PLUGIN], chunk_size=10)
    (s,) = run_batch([jets_file], config, output=tmp_path / "p.h5", workers=2)
    assert s.ok
    assert sum(updates) == 60
    assert min(updates) < 10, updates  # jets reported before their chunk was done

    updates.clear()
    (s,) = run_batch([jets_file], config, output=tmp_path / "q.h5", workers=1)
    assert s.ok and updates == [1] * 60


def test_threads_setting_reaches_exact_engines_and_is_validated(tmp_path, jets_file):
    from jetastar.batch.config import options_for as _options_for

    config = BatchConfig(["trellis", "greedy"], threads=1)
    assert _options_for("trellis", config, 1)["threads"] == 1
    assert "threads" not in _options_for("greedy", config, 1)
    assert _options_for("trellis", BatchConfig(["trellis"]), 2)["threads"] == 1
    assert "threads" not in _options_for("trellis", BatchConfig(["trellis"]), 1)
    assert "threads" not in config.fingerprint()  # results do not depend on it
    with pytest.raises(BatchError, match="threads"):
        run_batch([jets_file], BatchConfig(["trellis"], threads=0), output=tmp_path / "t.h5")


def test_both_readers_are_jet_sources(tmp_path, jets_file):
    """The run loop reads jetastar files and particle files through the same JetSource methods:
    a jetastar file is identified by the hash of its jets, a particle file by its bytes."""
    import h5py

    from jetastar.batch import JetSource
    from jetastar.batch.resume import file_digest, jets_digest
    from jetastar.batch.sources import ParticleFileSource
    from jetastar.io import ParticleSource

    reader = JetFileReader(jets_file)
    assert isinstance(reader, JetSource)
    jets = jio.read(jets_file, validate=False)
    assert reader.n_jets == len(jets) and len(reader.chunk(5, 9)) == 4
    assert reader.digest() == reader.digest(jets) == jets_digest(jets)
    assert reader.reading() == {} and reader.problems(0, 4) == {}
    reader.close()

    path = tmp_path / "dense.h5"
    rng = np.random.default_rng(3)
    p = rng.normal(size=(6, 5, 3))
    with h5py.File(path, "w") as f:
        f["particles"] = np.concatenate([np.sqrt((p**2).sum(-1, keepdims=True) + 1.0), p], -1)
    source = ParticleFileSource(ParticleSource(path=str(path), particles="particles",
                                               components="E,px,py,pz"))
    try:
        assert isinstance(source, JetSource)
        assert source.n_jets == 6 and len(source.chunk(2, 5)) == 3
        assert source.digest() == file_digest(path)
        assert source.reading() == {"particles": source.settings()}
    finally:
        source.close()


def test_pool_workers_exit_when_the_master_is_killed(tmp_path):
    """SIGKILL of the process that owns a local pool (nothing can run in it then) leaves no worker
    behind: each worker watches its parent and leaves within a second of it going."""
    import signal
    import subprocess
    import sys
    import textwrap
    import time

    code = textwrap.dedent("""
        import os, sys, time
        from jetastar.batch import make_executor
        pool, _ = make_executor(2, None)
        futures = [pool.submit(time.sleep, 60) for _ in range(2)]
        time.sleep(0.5)
        print(" ".join(str(p) for p in pool._processes), flush=True)
        time.sleep(120)
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        pids = [int(p) for p in proc.stdout.readline().split()]
        assert len(pids) == 2
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)

        def alive(pid: int) -> bool:
            try:
                with open(f"/proc/{pid}/status") as f:
                    state = next(line for line in f if line.startswith("State:"))
            except (FileNotFoundError, ProcessLookupError, StopIteration):
                return False
            return "Z" not in state.split()[1]  # a zombie has exited

        deadline = time.monotonic() + 5.0
        while any(alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(alive(p) for p in pids), [p for p in pids if alive(p)]
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()


def test_an_interrupt_inside_a_weakref_callback_is_latched_not_printed():
    """A signal handled while a weakref callback or a __del__ runs: Python would print the
    exception there ("Exception ignored in ...") and swallow it; the latch keeps it for the chunk
    loop instead, without raising in that frame."""
    import sys
    import weakref

    from jetastar.batch.runner import _InterruptLatch, _swallowed_there

    frames = []

    class Probe:
        def __del__(self):
            frames.append(sys._getframe())

    Probe()
    assert frames and _swallowed_there(frames[0])
    assert not _swallowed_there(sys._getframe())
    # weakref's removal callbacks live in weakref.py / _weakrefset.py
    weak = weakref.WeakValueDictionary()
    assert _swallowed_there(type("F", (), {"f_code": weak._remove.__code__})())

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    latch = _InterruptLatch()
    handler = latch._latched(interrupt)
    assert handler(2, frames[0]) is None  # in a __del__: latched, not raised
    assert isinstance(latch.raised, KeyboardInterrupt)
    with pytest.raises(KeyboardInterrupt):
        latch.check()
    latch.raised = None
    with pytest.raises(KeyboardInterrupt):
        handler(2, sys._getframe())  # anywhere else: raised at once


# ---------------------------------------------------------------------- the streaming pipeline
def _mixed_jets(n_w: int = 25, n_qcd: int = 40):
    """W jets first (type 'W'), then QCD jets (a wider type): the merge widens ``jet_type``."""
    from jetastar.jet import JetCollection

    return JetCollection.concatenate([generate(n_w, ShowerParams.w(), seed=3),
                                      generate(n_qcd, ShowerParams.qcd(), seed=4)])


def _h5_content(path: Path) -> dict:
    import h5py

    out = {}
    with h5py.File(path, "r") as f:
        out["/"] = {k: v for k, v in f.attrs.items() if k not in ("created", "command")}

        def visit(name, obj):
            if isinstance(obj, h5py.Dataset):
                out[name] = (obj.dtype.str, obj.shape, repr(obj[()].tolist()))
            out[name + "@"] = dict(obj.attrs.items())

        f.visititems(visit)
    return out


def _root_content(path: Path) -> dict:
    import json

    import awkward as ak
    import uproot

    out = {}
    with uproot.open(path) as f:
        meta = json.loads(str(f["meta"]))
        out["meta"] = {k: v for k, v in meta.items() if k not in ("created", "command")}
        for name in ("jets", "results", "clusters", "clusters_events"):
            if name not in f:
                continue
            tree = f[name]
            out[name] = {b.name: (b.typename, repr(ak.to_list(b.array()))) for b in tree.branches}
            out[name + "#"] = tree.num_entries
    return out


def _merge_also_in_memory(monkeypatch, tmp_path: Path, memory: Path, before=None, after=None):
    """Make every merge of a run also write ``memory`` from a copy of its parts, with the
    in-memory merge (every jet and part at once, one write); ``before(reader, kwargs)`` and
    ``after()`` run around the run's own (streamed) merge."""
    import shutil

    import jetastar.batch.merge as merge
    import jetastar.batch.runner as batch

    real = batch.merge_parts

    def both(reader, out, parts, *args, **kwargs):
        copy = tmp_path / "copy.parts"
        shutil.copytree(parts, copy)
        if before is not None:
            before(reader, kwargs)
        counts = real(reader, out, parts, *args, **kwargs)
        if after is not None:
            after()
        with monkeypatch.context() as m:
            m.setattr(merge, "_merge_streaming", merge._merge_in_memory)
            real(reader, memory, copy, *args, **{**kwargs, "jets_copy": None})
        return counts

    monkeypatch.setattr(batch, "merge_parts", both)


@pytest.mark.parametrize("ext", ["h5", "root"])
def test_streamed_merge_equals_the_in_memory_merge(tmp_path, ext, monkeypatch):

    import jetastar.batch.merge as merge

    inp = tmp_path / f"jets.{ext}"
    jio.write(inp, _mixed_jets())
    config = BatchConfig(["greedy", "kt", "test-chain"], plugins=[PLUGIN], chunk_size=9)
    monkeypatch.setattr(merge, "MERGE_BLOCK", 7)  # many blocks of jets
    monkeypatch.setattr(merge, "MERGE_ROWS", 20)  # rows written in blocks of three parts
    memory = tmp_path / f"memory.{ext}"
    copied = []
    # the run copied the jets into its output while it clustered
    _merge_also_in_memory(monkeypatch, tmp_path, memory,
                          before=lambda reader, kw: copied.append(kw["jets_copy"] is not None))
    (s,) = run_batch([inp], config, output=tmp_path / f"streamed.{ext}", progress=False)
    assert s.ok, s.error
    assert copied == [True]
    content = _h5_content if ext == "h5" else _root_content
    assert content(tmp_path / f"streamed.{ext}") == content(memory)
    jets = jio.read(tmp_path / f"streamed.{ext}")
    assert list(jets.jet_type[:2]) == ["W", "W"] and jets.jet_type[-1] == "QCD"


def test_merge_holds_two_blocks_of_rows_and_one_block_of_jets_at_a_time(tmp_path, monkeypatch):
    import weakref

    import jetastar.batch.merge as merge
    import jetastar.batch.sources as sources
    from jetastar.io.root import RootStreamWriter

    inp = tmp_path / "jets.root"
    jio.write(inp, generate(200, ShowerParams.qcd(), seed=5))
    monkeypatch.setattr(merge, "MERGE_BLOCK", 30)
    monkeypatch.setattr(merge, "MERGE_ROWS", 50)
    alive: list = []
    real_read = merge.read_part

    def counted(path, algorithms=None):
        tables = real_read(path, algorithms)
        alive[:] = [r for r in alive if r() is not None]
        held = sum(len(r()) for r in alive if r() is not None)
        # blocks of three 20-jet parts: the block being written and the parts read so far of
        # the next one
        assert held <= 60 + 40, "the merge holds two blocks of rows at most"
        alive.extend(weakref.ref(t) for t in tables.values())
        return tables

    writes: list[tuple[str, int]] = []
    real_add = RootStreamWriter.add_results

    def add_results(self, label, table):
        writes.append((label, len(table)))
        return real_add(self, label, table)

    monkeypatch.setattr(RootStreamWriter, "add_results", add_results)

    biggest = []
    real_chunk = sources.JetFileReader.chunk

    def chunk(self, a, b, **kw):
        biggest.append(b - a)
        return real_chunk(self, a, b, **kw)

    def whole(self):
        raise AssertionError("the streaming merge never reads the whole input")

    monkeypatch.setattr(merge, "read_part", counted)
    monkeypatch.setattr(sources.JetFileReader, "chunk", chunk)
    monkeypatch.setattr(sources.JetFileReader, "whole", whole)
    config = BatchConfig(["greedy", "antikt"], chunk_size=20)
    (s,) = run_batch([inp], config, output=tmp_path / "out.root", progress=False)
    assert s.ok, s.error
    assert max(biggest) <= 30 and len(alive) >= 1
    # ten parts of 20 rows per algorithm: written as three blocks of 60 rows and the last part
    assert writes == [(name, n) for name in ("greedy", "antikt") for n in (60, 60, 60, 20)]
    _check_complete(tmp_path / "out.root", 200, ("greedy", "antikt"))


def test_streamed_digest_equals_the_digest_of_the_whole_collection(tmp_path):
    from jetastar.batch.resume import jets_digest, stream_jets_digest
    from jetastar.io.dispatch import columns

    jets = _mixed_jets(7, 12)
    for ext in ("h5", "root"):
        path = tmp_path / f"j.{ext}"
        jio.write(path, jets)
        want = jets_digest(jets)
        for block in (1, 5, 100):
            with columns(path) as cols:
                assert stream_jets_digest(cols, len(jets), block) == want
        assert JetFileReader(path).digest() == want


def test_generator_params_streamed_equal_the_whole(tmp_path):
    from jetastar.io._common import GeneratorParamsStream, generator_params
    from jetastar.jet import JetCollection

    jets = _mixed_jets(6, 9)
    measured = generate(8, ShowerParams.qcd(), seed=9)
    measured.params["root_momentum"] = measured.params["root_momentum"] * np.linspace(
        1, 2, 8).reshape(-1, 1)  # every jet its own 4-vector: one "per_jet" set
    both = JetCollection.concatenate([jets, measured])
    for block in (1, 4, 100):
        stream = GeneratorParamsStream()
        for a in range(0, len(both), block):
            stream.add(both.take(np.arange(a, min(len(both), a + block))))
        assert stream.result() == generator_params(both)


@pytest.mark.parametrize("ext", ["h5", "root"])
def test_a_failed_copy_of_the_jets_fails_the_file_and_a_rerun_resumes(tmp_path, ext, monkeypatch):
    """The jets are copied into the output while the chunks are clustered; an error there (a
    full disk) is the file's error, leaves no output or temporary file, and keeps the parts. The
    input is of the other format: its jets are read and written again."""
    import jetastar.batch.merge as merge
    import jetastar.io.hdf5 as hdf5
    import jetastar.io.root as root

    inp = tmp_path / f"jets.{'root' if ext == 'h5' else 'h5'}"
    jio.write(inp, generate(30, ShowerParams.qcd(), seed=6))
    config = BatchConfig(["greedy", "kt"], chunk_size=10)
    (clean,) = run_batch([inp], config, output=tmp_path / f"clean.{ext}", progress=False)
    monkeypatch.setattr(merge, "MERGE_BLOCK", 7)
    writer = hdf5.HDF5StreamWriter if ext == "h5" else root.RootStreamWriter
    real = writer.add_jets
    calls = []

    def full(self, collection):
        calls.append(threading.current_thread().name)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        real(self, collection)

    monkeypatch.setattr(writer, "add_jets", full)
    out = tmp_path / f"out.{ext}"
    (s,) = run_batch([inp], config, output=out, progress=False)
    assert "no space left on the device" in s.error and "rerun the same command" in s.error, s
    assert all(name.startswith("jetastar copy") for name in calls), calls
    assert not out.exists() and not list(tmp_path.glob(f".out.{ext}.*"))
    assert len(_parts(out)) == 3
    monkeypatch.undo()
    (s,) = run_batch([inp], config, output=out, progress=False)
    assert s.ok and s.chunks_reused == 3, s
    a, b = jio.read(clean.output), jio.read(out)
    assert np.array_equal(a.leaves, b.leaves) and np.array_equal(a.children, b.children)
    a, b = jio.read_results(clean.output), jio.read_results(out)
    for name in a:
        assert np.array_equal(a[name].log_likelihood, b[name].log_likelihood, equal_nan=True)
        assert np.array_equal(a[name].children, b[name].children)


@pytest.mark.parametrize("ext", ["h5", "root"])
def test_an_input_of_the_output_format_holding_only_jets_is_copied_byte_for_byte(tmp_path, ext,
                                                                                monkeypatch):
    """Its bytes are copied and the results added: the output equals one whose jets were read
    and written again. A failed byte copy (a full disk) fails the file and keeps the parts; an
    input that holds results too is read and written again, and only this run's results are in
    the output."""
    import jetastar.io._stream as stream
    import jetastar.io.hdf5 as hdf5
    import jetastar.io.root as root

    writer = hdf5.HDF5StreamWriter if ext == "h5" else root.RootStreamWriter

    def content(path):  # without the timings, and the input's state when the run began
        out = (_h5_content if ext == "h5" else _root_content)(path)
        if "results" in out:  # ROOT: one tree
            out["results"] = {k: v for k, v in out["results"].items() if k != "time_s"}
        if "meta" in out:  # (recorded only by runs that began SETTLED_NS after the input's write)
            out["meta"] = {k: v for k, v in out["meta"].items() if k != "input_state"}
        return {k: v for k, v in out.items() if not k.endswith("/time_s")}

    inp = tmp_path / f"jets.{ext}"
    jio.write(inp, _mixed_jets(7, 12))
    config = BatchConfig(["greedy", "kt"], chunk_size=6)
    real_copy = writer.copy_jets_file
    copied = []
    monkeypatch.setattr(writer, "copy_jets_file", lambda self, path, stop=None: copied.append(
        real_copy(self, path, stop)) or copied[-1])
    (s,) = run_batch([inp], config, output=tmp_path / f"bytes.{ext}", progress=False)
    assert s.ok, s.error
    assert copied == [True]
    with monkeypatch.context() as m:
        m.setattr(writer, "copy_jets_file", lambda self, path, stop=None: False)
        (s,) = run_batch([inp], config, output=tmp_path / f"decoded.{ext}", progress=False)
    assert s.ok, s.error
    assert content(tmp_path / f"bytes.{ext}") == content(tmp_path / f"decoded.{ext}")
    _check_complete(tmp_path / f"bytes.{ext}", 19, ("greedy", "kt"))

    real_bytes = stream.copy_bytes  # (the writers' byte copy)

    def full(src, dst, *args, **kwargs):
        if Path(src) == inp:
            raise OSError(28, "No space left on device")
        return real_bytes(src, dst, *args, **kwargs)

    out = tmp_path / f"out.{ext}"
    with monkeypatch.context() as m:
        m.setattr(stream, "copy_bytes", full)
        (s,) = run_batch([inp], config, output=out, progress=False)
    assert "no space left on the device" in s.error and "rerun the same command" in s.error, s
    assert not out.exists() and not list(tmp_path.glob(f".out.{ext}.*"))
    assert len(_parts(out)) == 4
    (s,) = run_batch([inp], config, output=out, progress=False)
    assert s.ok and s.chunks_reused == 4, s
    assert content(out) == content(tmp_path / f"decoded.{ext}")

    copied.clear()
    (s,) = run_batch([out], BatchConfig(["antikt"]), output=tmp_path / f"again.{ext}",
                     progress=False)
    assert s.ok, s.error
    assert copied == [False]
    assert set(jio.read_results(tmp_path / f"again.{ext}")) == {"antikt"}
    _check_complete(tmp_path / f"again.{ext}", 19, ("antikt",))


def test_an_aborted_jets_copy_stops_the_byte_copy(tmp_path, monkeypatch):
    """An interrupted run aborts the copy thread: a byte copy in progress is handed the thread's
    stop event and told to stop (it stops within a block, :func:`jetastar.io._common.copy_bytes`),
    so the abort does not wait for a large file to be copied, and no temporary file is left."""
    import jetastar.io._stream as stream
    from jetastar.batch.merge import JetsCopy

    inp = tmp_path / "in.h5"
    jio.write(inp, generate(20, ShowerParams.qcd(), seed=2))
    real = stream.copy_bytes
    started = threading.Event()
    told: list = []

    def slow(src, dst, stop=None):  # a copy of a large file on a slow disk: until told to stop
        started.set()
        told.append(None if stop is None else stop.wait(60))
        return real(src, dst, stop)

    monkeypatch.setattr(stream, "copy_bytes", slow)
    copy = JetsCopy(JetFileReader, inp, 20, tmp_path / "out.h5", {})
    assert started.wait(60)
    copy.abort()
    assert told == [True], "the copy was handed the stop event and the abort set it"
    assert not (tmp_path / "out.h5").exists() and not list(tmp_path.glob(".out.h5.*"))


def test_a_torn_part_is_not_trusted_and_a_resume_equals_a_clean_run(tmp_path, monkeypatch):
    import jetastar.batch.runner as batch

    inp = tmp_path / "jets.h5"
    jio.write(inp, generate(50, ShowerParams.qcd(), seed=6))
    config = BatchConfig(["greedy", "cambridge"], chunk_size=10)
    (clean,) = run_batch([inp], config, output=tmp_path / "clean.h5", progress=False)
    out = tmp_path / "out.h5"
    monkeypatch.setattr(batch, "merge_parts", lambda *a, **k: (_ for _ in ()).throw(
        KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        run_batch([inp], config, output=out, progress=False)
    monkeypatch.undo()
    parts = sorted(_parts(out))
    assert len(parts) == 5
    data = parts[1].read_bytes()
    parts[1].write_bytes(data[: len(data) // 2])  # a part torn by a crash of the disk
    (tmp_path / "out.h5.parts" / ".part-x.123.abcd.tmp").write_bytes(b"half")  # a killed write
    (s,) = run_batch([inp], config, output=out, progress=False)
    assert s.ok and s.chunks_reused == 4, s
    a, b = jio.read_results(clean.output), jio.read_results(out)
    for name in a:
        assert np.array_equal(a[name].log_likelihood, b[name].log_likelihood, equal_nan=True)
        assert a[name].tree(3) == b[name].tree(3)


def test_the_part_folder_is_smaller_than_the_output(tmp_path, monkeypatch):
    import jetastar.batch.runner as batch

    inp = tmp_path / "jets.root"
    jio.write(inp, generate(3000, ShowerParams.qcd(), seed=7))
    config = BatchConfig(["greedy", "kt", "cambridge", "antikt"], chunk_size=500)
    out = tmp_path / "out.root"
    real = batch.merge_parts
    sizes = {}

    def measured(reader, out_, parts, *args, **kwargs):
        sizes["parts"] = sum(p.stat().st_size for p in parts.iterdir())
        return real(reader, out_, parts, *args, **kwargs)

    monkeypatch.setattr(batch, "merge_parts", measured)
    (s,) = run_batch([inp], config, output=out, progress=False)
    assert s.ok, s.error
    assert sizes["parts"] < out.stat().st_size


def test_part_writer_raises_a_write_error_in_the_caller():
    from jetastar.batch.resume import PartWriter

    done = []

    def write(parts, a, b, tables):
        if a == 1:
            raise OSError("disk full")
        done.append(a)

    with pytest.raises(OSError, match="disk full"), PartWriter(write) as w:
        for a in range(4):
            w.put(Path("."), a, a + 1, {})
    assert done == [0], "nothing is written after a failed part"


def test_reader_reads_ahead(tmp_path):
    path = tmp_path / "jets.root"
    jets = generate(100, ShowerParams.qcd(), seed=8)
    jio.write(path, jets)
    reader = JetFileReader(path, read_ahead=40)
    got = [reader.chunk(a, min(100, a + 10)) for a in range(0, 100, 10)]
    assert reader.reads == 3
    from jetastar.batch.resume import jets_digest
    from jetastar.jet import JetCollection

    assert jets_digest(JetCollection.concatenate(got)) == jets_digest(jets)


def test_chunks_sized_by_cost_and_a_resume_with_other_chunks_is_exact(tmp_path, monkeypatch):
    import jetastar.batch.resume as resume
    import jetastar.batch.runner as batch

    inp = tmp_path / "jets.h5"
    jio.write(inp, generate(200, ShowerParams.qcd(), seed=13))
    (clean,) = run_batch([inp], BatchConfig(["test-chain", "greedy"], plugins=[PLUGIN],
                                            chunk_size=200), output=tmp_path / "clean.h5",
                         progress=False)
    out = tmp_path / "out.h5"
    real = batch.write_part
    sizes = []

    def flaky(parts, a, b, tables):
        sizes.append(b - a)
        if len(sizes) == 4:
            raise KeyboardInterrupt
        real(parts, a, b, tables)

    monkeypatch.setattr(resume, "CHUNK_SECONDS", 1e-9)  # cheap jets: the smallest chunks
    monkeypatch.setattr(batch, "write_part", flaky)
    config = BatchConfig(["test-chain", "greedy"], plugins=[PLUGIN], chunk_size=None)
    with pytest.raises(KeyboardInterrupt):
        run_batch([inp], config, output=out, progress=False)
    assert sizes[0] == 50 and sizes[1:] == [10, 10, 10], "sized by the first chunk's cost"
    monkeypatch.setattr(resume, "CHUNK_SECONDS", 1e9)  # now the largest
    monkeypatch.setattr(batch, "write_part", real)
    config = BatchConfig(["test-chain", "greedy"], plugins=[PLUGIN], chunk_size=None)
    (s,) = run_batch([inp], config, output=out, progress=False)
    assert s.ok and s.chunks_reused == 3 and s.chunks_total == 5, s
    a, b = jio.read_results(clean.output), jio.read_results(out)
    for name in a:
        assert np.array_equal(a[name].jet_index, b[name].jet_index)
        assert np.array_equal(a[name].log_likelihood, b[name].log_likelihood, equal_nan=True)
        assert list(a[name].status) == list(b[name].status)


def test_chunk_plan_keeps_parts_that_do_not_overlap():
    from jetastar.batch.resume import ChunkPlan

    plan = ChunkPlan(100, {(0, 30), (20, 40), (40, 50), (90, 120)}, 25)
    assert plan.kept == [(0, 30), (40, 50)]
    got = []
    while (c := plan.next()) is not None:
        got.append(c)
    assert got == [(30, 40), (50, 75), (75, 100)]
    assert plan.chunks == [(0, 30), (30, 40), (40, 50), (50, 75), (75, 100)]
    tail = ChunkPlan(100, set(), 80, adaptive=True, n_workers=2)
    assert tail.next() == (0, 50) and tail.next() == (50, 75)


def test_the_merge_counts_statuses_as_the_output_holds(tmp_path, monkeypatch):
    import jetastar.comparison as comparison
    from jetastar.batch.merge import counts_of

    inp = tmp_path / "jets.root"
    out = tmp_path / "out.root"
    jio.write(inp, generate(40, ShowerParams.qcd(), seed=14))
    config = BatchConfig(["greedy", "test-exact"], plugins=[PLUGIN],
                         max_leaves={"test-exact": 6}, chunk_size=15)
    (s,) = run_batch([inp], config, output=out, progress=False)
    assert s.ok, s.error
    assert s.status_counts == {k: v["status"] for k, v in jio.file_info(out)["results"].items()}
    assert s.status_counts["test-exact"].get("skipped", 0) > 0
    # and the tree counts the command line prints, without reading the output back
    assert s.tree_counts == comparison.status_counts(out)
    assert 0 < s.tree_counts["greedy"]["finite"] and s.tree_counts["test-exact"]["skipped"] > 0
    assert counts_of(out) == (s.status_counts, s.tree_counts)
    # a run whose output is already done reads the output's rows once, for both counts
    passes = []
    rows = comparison.iterate_status_columns
    monkeypatch.setattr(comparison, "iterate_status_columns",
                        lambda *a, **k: passes.append(1) or rows(*a, **k))
    (again,) = run_batch([inp], config, output=out, progress=False)
    assert again.already_done and passes == [1], (again, passes)
    assert (again.status_counts, again.tree_counts) == (s.status_counts, s.tree_counts)


def test_a_pool_worker_reads_its_chunk_from_the_file(jets_file):
    from jetastar.batch.runner import timed_file_chunk_task

    config = BatchConfig(["greedy", "kt"], chunk_size=10)
    first, tables, seconds = timed_file_chunk_task(str(jets_file), 10, 25, config, 1)
    want = cluster_collection(jio.read(jets_file, slice(10, 25)), config, first_index=10)
    # the chunk's measured cost comes back with it (chunk sizing reads it; its size is not tested)
    assert first == 10 and isinstance(seconds, float) and np.isfinite(seconds)
    for name in want:
        assert np.array_equal(tables[name].jet_index, np.arange(10, 25))
        assert np.array_equal(tables[name].log_likelihood, want[name].log_likelihood,
                              equal_nan=True)


def test_the_streaming_merge_refuses_missing_and_duplicated_jets(tmp_path):
    from jetastar.batch.merge import merge_parts
    from jetastar.batch.resume import write_part

    inp = tmp_path / "jets.h5"
    jets = generate(20, ShowerParams.qcd(), seed=15)
    jio.write(inp, jets)
    config = BatchConfig(["greedy"], chunk_size=10)
    parts = tmp_path / "out.h5.parts"
    parts.mkdir()
    first = cluster_collection(jets.take(np.arange(10)), config)
    second = cluster_collection(jets.take(np.arange(10)), config, first_index=5)  # 5..14
    write_part(parts, 0, 10, first)
    write_part(parts, 10, 20, second)
    with pytest.raises(BatchError, match="5 jets missing, 5 duplicated"):
        merge_parts(JetFileReader(inp), tmp_path / "out.h5", parts, [(0, 10), (10, 20)], config,
                    None)
    assert not (tmp_path / "out.h5").exists() and not list(tmp_path.glob(".out.h5*"))


def test_the_merge_hashes_the_input_again_only_when_the_file_was_touched(tmp_path, monkeypatch):
    from jetastar.batch.merge import merge_parts
    from jetastar.batch.resume import file_state, input_identity, write_part

    inp = tmp_path / "jets.h5"
    jets = generate(20, ShowerParams.qcd(), seed=16)
    jio.write(inp, jets)
    config = BatchConfig(["greedy"], chunk_size=20)
    state = file_state(inp)
    identity = input_identity(inp, JetFileReader(inp).digest())
    hashed = []
    real = JetFileReader.digest
    monkeypatch.setattr(JetFileReader, "digest", lambda self, j=None: hashed.append(1) or real(self, j))

    def merge(out: str) -> None:
        parts = tmp_path / f"{out}.parts"
        parts.mkdir()
        write_part(parts, 0, 20, cluster_collection(jets, config))
        merge_parts(JetFileReader(inp), tmp_path / out, parts, [(0, 20)], config,
                    {"input_identity": identity}, input_state=state)

    merge("a.h5")  # untouched since its state was taken: not hashed again
    assert hashed == [] and (tmp_path / "a.h5").exists()
    os.utime(inp)  # touched, same content: hashed again, and accepted
    merge("b.h5")
    assert hashed == [1] and (tmp_path / "b.h5").exists()
    jio.write(inp, generate(20, ShowerParams.qcd(), seed=17))  # other jets: refused
    with pytest.raises(BatchError, match="changed while it was being clustered"):
        merge("c.h5")
    assert not (tmp_path / "c.h5").exists()


@pytest.mark.parametrize("ext", ["h5", "root"])
def test_a_rerun_takes_the_recorded_hash_of_an_input_nothing_wrote_to(tmp_path, monkeypatch, ext):
    """A finished output and a part folder record the input's state with its hash; a rerun
    whose input still has that state takes the recorded hash instead of reading the input
    again, while any write to the input (even of the same jets, or only a touch), a state taken
    too soon after the input changed, or --fresh mean a new hash."""
    import jetastar.batch.resume as resume

    inp = tmp_path / f"jets.{ext}"
    out = tmp_path / f"out.{ext}"
    jets = generate(30, ShowerParams.qcd(), seed=18)
    jio.write(inp, jets)
    config = BatchConfig(["greedy", "kt"], chunk_size=10)
    hashed = []
    real = JetFileReader.digest
    monkeypatch.setattr(JetFileReader, "digest",
                        lambda self, j=None: hashed.append(1) or real(self, j))

    def run(**kw):
        hashed.clear()
        (s,) = run_batch([inp], config, output=out, progress=False, **kw)
        assert s.ok, s.error
        return s

    # a state taken less than SETTLED_NS after the input's last change is not recorded (here
    # a long SETTLED_NS, so that a slow machine cannot make the input settled), so reruns hash it
    monkeypatch.setattr(resume, "SETTLED_NS", 10**15)
    run()
    assert hashed == [1] and "input_state" not in jio.file_info(out)["attrs"]
    assert run().already_done and hashed == [1]
    # a state taken long enough after the input's last change is recorded
    monkeypatch.setattr(resume, "SETTLED_NS", 0)
    run(fresh=True)
    attrs = jio.file_info(out)["attrs"]
    recorded = resume._json_attr(attrs["input_state"])
    assert recorded == resume.settled_state(resume.file_state(inp))
    assert run().already_done and hashed == []
    assert run(fresh=True).chunks_reused == 0 and hashed == [1]
    # anything done to the file changes its change time (here a chmod, which keeps the
    # identity's size and modification time): hashed again, and still the same jets
    os.chmod(inp, 0o640)
    assert run().already_done and hashed == [1]
    # other jets under the same name: hashed, found stale, clustered again
    jio.write(inp, generate(30, ShowerParams.qcd(), seed=19))
    s = run()
    assert hashed == [1] and not s.already_done and s.chunks_reused == 0
    # a part folder records the state too: a resume takes its hash
    out.unlink()
    _interrupted_run(monkeypatch, 1, [inp], config, out)
    manifest = json.loads((tmp_path / f"out.{ext}.parts" / "manifest.json").read_text())
    assert manifest["input_state"] == resume.settled_state(resume.file_state(inp))
    s = run()
    assert hashed == [] and s.chunks_reused == 1
    stored = resume._json_attr(jio.file_info(out)["attrs"]["input_identity"])
    assert stored["sha256"] == manifest["sha256"] == JetFileReader(inp).digest()
    # the recorded hash is only taken for the same file, in the same state
    state = resume.file_state(inp)
    identity = {"path": str(inp.resolve()), "sha256": "0" * 64}
    recorded = resume.settled_state(state)
    assert resume.recorded_digest(inp, state, identity, recorded) == "0" * 64
    assert resume.recorded_digest(inp, state, json.dumps(identity), json.dumps(recorded))
    assert resume.recorded_digest(out, state, identity, recorded) is None
    assert resume.recorded_digest(inp, state, identity, {**recorded, "ctime_ns": 1}) is None
    assert resume.recorded_digest(inp, state, identity, None) is None
    assert resume.recorded_digest(inp, state, {**identity, "sha256": ""}, recorded) is None


def test_the_input_state_is_settled_as_of_when_it_was_taken(tmp_path, monkeypatch):
    """Whether a state is recorded is judged at the moment it was taken, before the hash: an input
    changed just before the run is not recorded however long its hash then takes."""
    import types

    import jetastar.batch.resume as resume

    inp = tmp_path / "jets.h5"
    jio.write(inp, generate(20, ShowerParams.qcd(), seed=20))
    clock = {"now": resume.file_state(inp)[4] + 1_000_000_000}  # 1 s after the last change
    monkeypatch.setattr(resume, "_time", types.SimpleNamespace(time_ns=lambda: clock["now"]))
    real = JetFileReader.digest

    def slow_digest(self, jets=None):
        clock["now"] += 60_000_000_000  # a hash of a minute
        return real(self, jets)

    monkeypatch.setattr(JetFileReader, "digest", slow_digest)
    (s,) = run_batch([inp], BatchConfig(["greedy"]), output=tmp_path / "out.h5", progress=False)
    assert s.ok, s.error
    assert "input_state" not in jio.file_info(tmp_path / "out.h5")["attrs"]


def test_a_first_run_warms_the_kernels_while_the_input_is_hashed(tmp_path, monkeypatch):
    import jetastar.batch.runner as batch

    inp = tmp_path / "jets.h5"
    jio.write(inp, generate(30, ShowerParams.qcd(), seed=9))
    events: list[tuple[str, str]] = []
    real_digest = JetFileReader.digest
    real_warm = batch.warm_up_for

    def digest(self, *args, **kwargs):
        events.append(("digest", threading.current_thread().name))
        return real_digest(self, *args, **kwargs)

    def warm(*args, **kwargs):
        events.append(("warm-up", threading.current_thread().name))
        return real_warm(*args, **kwargs)

    monkeypatch.setattr(JetFileReader, "digest", digest)
    monkeypatch.setattr(batch, "warm_up_for", warm)
    config = BatchConfig(["greedy"])
    out = tmp_path / "out.h5"
    (s,) = run_batch([inp], config, output=out, progress=False)
    assert s.ok, s.error
    # the hash on a thread of its own, the warm-up on this one meanwhile (and once more before
    # the chunks, which costs nothing once warm)
    (hashed,) = [where for what, where in events if what == "digest"]
    assert hashed.startswith("jetastar-digest")
    assert ("warm-up", "MainThread") in events
    _check_complete(out, 30, ("greedy",))
    # an output that exists may be finished: hashed first, nothing warmed for nothing
    events.clear()
    (again,) = run_batch([inp], config, output=out, progress=False)
    assert again.ok and again.already_done
    assert events == [("digest", "MainThread")]
    # a fresh run replaces it: every jet is clustered again, so the warm-up goes beside the hash
    events.clear()
    (fresh,) = run_batch([inp], config, output=out, progress=False, fresh=True)
    assert fresh.ok and not fresh.already_done
    (hashed,) = [where for what, where in events if what == "digest"]
    assert hashed.startswith("jetastar-digest") and ("warm-up", "MainThread") in events


@pytest.mark.parametrize("ext", ["h5", "root"])
def test_a_first_run_copies_the_jets_while_the_input_is_hashed(tmp_path, ext, monkeypatch):
    """On a first run the output's jets are copied beside the hash (it reads every jet too); the
    hash joins the output's provenance once known. A failure before the clustering leaves no
    temporary file, and a rerun with the part folder there hashes first. The input is of the
    other format: its jets are read and written again."""
    import jetastar.batch.runner as batch
    import jetastar.io.hdf5 as hdf5
    import jetastar.io.root as root

    inp = tmp_path / f"jets.{'root' if ext == 'h5' else 'h5'}"
    jio.write(inp, generate(30, ShowerParams.qcd(), seed=12))
    writer = hdf5.HDF5StreamWriter if ext == "h5" else root.RootStreamWriter
    real_add, real_digest = writer.add_jets, JetFileReader.digest
    copying = threading.Event()
    seen: list[bool] = []

    def add_jets(self, collection):
        copying.set()
        real_add(self, collection)

    def digest(self, *args, **kwargs):
        # the copy writes its first jets while the hash waits for them (never, if it starts later)
        seen.append(copying.wait(timeout=20))
        return real_digest(self, *args, **kwargs)

    monkeypatch.setattr(writer, "add_jets", add_jets)
    monkeypatch.setattr(JetFileReader, "digest", digest)
    config = BatchConfig(["greedy"], chunk_size=10)
    out = tmp_path / f"out.{ext}"
    (s,) = run_batch([inp], config, output=out, progress=False)
    assert s.ok, s.error
    assert seen == [True]
    _check_complete(out, 30, ("greedy",))
    identity = jio.file_info(out)["attrs"]["input_identity"]
    identity = json.loads(identity) if isinstance(identity, str) else identity
    assert identity["sha256"] == real_digest(JetFileReader(inp))
    (again,) = run_batch([inp], config, output=out, progress=False)
    assert again.ok and again.already_done

    # an error after the copy started and before the clustering: no temporary file is left
    monkeypatch.setattr(JetFileReader, "digest", real_digest)

    def broken(*args, **kwargs):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(batch, "prepare_parts", broken)
    (failed,) = run_batch([inp], config, output=out, progress=False, fresh=True)
    assert "Input/output error" in failed.error
    assert out.exists() and not list(tmp_path.glob(f".out.{ext}.*"))
    assert not [t for t in threading.enumerate() if t.name.startswith("jetastar copy")]


@pytest.mark.parametrize("layout", ["jet", "event"])
@pytest.mark.parametrize("ext", ["h5", "root"])
def test_particle_outputs_are_streamed_equal_to_the_in_memory_merge(tmp_path, ext, layout,
                                                                     monkeypatch):
    """Jets read from a particle file: the tables by input entry (and by event) are written block
    by block, with events whose jets span two blocks and events without jets, equal to writing
    every jet at once; the merge never holds the whole input."""

    import uproot

    import jetastar.batch.merge as merge
    from jetastar.io import ParticleSource

    if layout == "event":
        pytest.importorskip("fastjet", reason="jet finding needs the optional fastjet")
    import awkward as ak

    rng = np.random.default_rng(21)
    counts = rng.integers(2, 40, 31)
    if layout == "event":
        counts[[3, 10, 11]] = 0  # events without particles, hence without jets
    m = int(counts.sum())
    cols = {"pt": rng.exponential(15.0, m) + 0.5, "eta": rng.normal(0.0, 1.0, m),
            "phi": rng.uniform(-np.pi, np.pi, m), "mass": np.zeros(m)}
    path = tmp_path / "events.root"
    with uproot.recreate(path) as f:
        cands = ak.unflatten(ak.zip(cols), counts)
        f.mktree("Events", {"PFCands": cands.type.content})
        f["Events"].extend({"PFCands": cands})
    source = ParticleSource(path="", particles="PFCands", layout=layout, jet_r=0.4,
                            jet_ptmin=5.0, t_cut=0.01)
    config = BatchConfig(["greedy", "kt"], chunk_size=4)
    monkeypatch.setattr(merge, "MERGE_BLOCK", 7)  # blocks of two chunks: events span them
    memory = tmp_path / f"memory.{ext}"
    wholes = []

    def count_wholes(reader, kwargs):
        whole = reader.whole
        reader.whole = lambda: wholes.append(1) or whole()

    def no_whole():
        assert wholes == [], "the streamed merge read every jet at once"

    _merge_also_in_memory(monkeypatch, tmp_path, memory, before=count_wholes, after=no_whole)
    out = tmp_path / f"streamed.{ext}"
    (s,) = run_batch([path], config, output=out, progress=False, particles=source, step_size=5)
    assert s.ok, s.error
    assert s.n_jets > 14
    content = _h5_content if ext == "h5" else _root_content
    streamed, whole = content(out), content(memory)
    assert streamed == whole
    if layout == "event":
        import ast

        n_jets = ast.literal_eval(streamed["clusters/events/n_jets"][2] if ext == "h5"
                                  else streamed["clusters_events"]["n_jets"][1])
        assert 0 in n_jets and max(n_jets) >= 2  # events without jets and with two or more


def test_an_invalid_jet_found_in_an_event_is_named_by_entry_and_jet_in_event():
    """Jets found in events share their entry (and jet_id): the message of one that cannot be
    clustered says which of the entry's jets it is, as the 'clusters' tree numbers them."""
    from jetastar import JetCollection
    from jetastar.batch import cluster_collection

    good = generate(3, ShowerParams.qcd(), seed=8)
    one = JetCollection(
        leaves=good.leaves[:1], leaf_offsets=np.array([0, 1]), children=np.empty((0, 2)),
        leaf_of_node=np.empty(0), node_offsets=np.array([0, 0]), jet_id=np.array([7]),
        seed=np.array([-1]), jet_type=np.array(["QCD"], dtype=object),
        params={k: v[:1] for k, v in good.params.items()})
    bare = JetCollection(
        leaves=good.leaves, leaf_offsets=good.leaf_offsets, children=good.children,
        leaf_of_node=good.leaf_of_node, node_offsets=good.node_offsets, jet_id=good.jet_id,
        seed=good.seed, jet_type=good.jet_type, params=good.params)
    both = JetCollection.concatenate([bare, one])
    cols = {"entry": np.array([5, 6, 7, 7]), "jet_in_event": np.array([0, 0, 0, 1])}
    events = JetCollection(
        leaves=both.leaves, leaf_offsets=both.leaf_offsets, children=both.children,
        leaf_of_node=both.leaf_of_node, node_offsets=both.node_offsets,
        jet_id=np.array([5, 6, 7, 7]), seed=both.seed, jet_type=both.jet_type,
        params=both.params, jet_columns=cols)
    tables = cluster_collection(events, BatchConfig(["greedy"]), source="events.root")
    t = tables["greedy"]
    assert list(t.status) == ["ok", "ok", "ok", "failed"]
    assert t.message[3].startswith("events.root: entry 7, jet_in_event 1: ")
    assert "at least 2 leaves" in t.message[3]


def test_costly_jets_are_chunks_of_their_own(tmp_path, monkeypatch):
    """With an exact method, chunks end before their jets' estimated costs (×3 a leaf) add up
    to ``CHUNK_SECONDS``: a run of a few large jets is not one chunk that an interrupt loses
    (a 200-jet first chunk held every jet of a 100-jet file)."""
    import jetastar.batch.resume as resume

    inp = tmp_path / "w.h5"
    jets = generate(12, ShowerParams.w(), seed=4, max_leaves=9)
    jio.write(inp, jets)
    (s,) = run_batch([inp], BatchConfig(["greedy", "trellis"], chunk_size=None),
                     output=tmp_path / "a.h5", progress=False)
    assert s.ok and s.chunks_total == 1  # (cheap jets: one chunk)
    # every jet alone once its estimate is over the chunk's budget
    monkeypatch.setattr(resume, "CHUNK_SECONDS", 1e-9)
    (s,) = run_batch([inp], BatchConfig(["greedy", "trellis"], chunk_size=None),
                     output=tmp_path / "b.h5", progress=False)
    assert s.ok and s.chunks_total == 12
    a, b = (jio.read_results(tmp_path / n) for n in ("a.h5", "b.h5"))
    for name in ("greedy", "trellis"):
        assert np.array_equal(a[name].log_likelihood, b[name].log_likelihood)
    # the counts come from the leaf offsets, in both formats
    jio.write(tmp_path / "w.root", jets)
    for path in (inp, tmp_path / "w.root"):
        reader = JetFileReader(path)
        assert np.array_equal(reader.leaf_counts(), jets.n_leaves)
        reader.close()


def test_another_entry_range_is_refused_not_discarded(tmp_path, monkeypatch):
    """The same particle file read with another entry range has other jets (``n_jets``): its
    parts are refused, naming the settings, not silently dropped."""
    from jetastar.io import ParticleSource

    src = ParticleSource(path="", tree="Events", particles="PFCands", t_cut=1.0)
    nano = Path(__file__).resolve().parents[1] / "data" / "particles_nanoaod.root"
    config = BatchConfig(["greedy"], chunk_size=20)
    out = tmp_path / "res.h5"
    _interrupted_run(monkeypatch, 2, [nano], config, out, particles=src)
    assert len(_parts(out)) == 2
    (s,) = run_batch([nano], BatchConfig(["greedy"], chunk_size=20), output=out,
                     progress=False, particles=src, entry_stop=100)
    assert "different settings" in s.error and "n_jets: 200 -> 100" in s.error
    assert len(_parts(out)) == 2
    (s,) = run_batch([nano], BatchConfig(["greedy"], chunk_size=20), output=out,
                     progress=False, particles=src)
    assert s.ok and s.chunks_reused == 2


def test_plugins_given_as_files_or_not_on_the_path_say_how_to_name_them(tmp_path, monkeypatch):
    """--plugin ./myplug.py gave importlib's "the 'package' argument is required to perform a
    relative import"; --plugin myplug (in the current folder) gave only "No module named"."""
    from jetastar.batch.config import import_plugins

    monkeypatch.chdir(tmp_path)
    # as for the jetastar command: the current folder is not on the path
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".", str(tmp_path))])
    (tmp_path / "myplug_probe.py").write_text("X = 1\n")
    with pytest.raises(BatchError, match=r"give a module name, not a file \(--plugin "
                                         r"myplug_probe, with its folder on PYTHONPATH"):
        import_plugins(["./myplug_probe.py"])
    with pytest.raises(BatchError, match=r"No module named 'myplug_probe' \(myplug_probe\.py is in "
                                         r"the current folder.*PYTHONPATH=\."):
        import_plugins(["myplug_probe"])


def test_an_interrupt_before_any_jet_was_done_says_so():
    """ "terminated: 0 of 100000 jets ... are done and kept in ....parts" read as if there were
    something to resume."""
    from jetastar.errors import BatchInterrupted

    assert str(BatchInterrupted("in.root", "out.h5.parts", 0, 100000)) == (
        "interrupted: none of the 100000 jets of in.root was done yet; rerun the same command to "
        "start again")
    assert "3 of 10 jets of in.root are done and kept in out.h5.parts" in str(
        BatchInterrupted("in.root", "out.h5.parts", 3, 10))
