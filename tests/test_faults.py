"""Fault injection: kills at random moments, a full disk, a read-only folder, concurrent writers.

After any of these a run either reports a one-line error or ends with the same output as a clean
run; it never crashes, never leaves temporary files for good and never leaves a partial or stale
output under the final name.

The full-disk tests mount a small tmpfs in a private mount namespace (``unshare``; skipped with
the reason where that is not possible) and also inject ``ENOSPC`` into the writer in-process.
"""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

from jetastar import io as jio
from jetastar.batch import BatchConfig, run_batch
from jetastar.ginkgo import ShowerParams, generate

TESTS = Path(__file__).parent
PLUGIN = "helpers.batch_algorithms"  # registers "test-chain" (a caterpillar tree, optional delay)


def _env() -> dict[str, str]:
    return dict(os.environ, TQDM_DISABLE="1", PYTHONPATH=os.pathsep.join(
        [str(TESTS), os.environ.get("PYTHONPATH", "")]))


def _cluster_cmd(inp: Path, out: Path, delay: float = 0.01) -> list[str]:
    return [sys.executable, "-m", "jetastar", "cluster", str(inp), "--algorithms", "test-chain",
            "--plugin", PLUGIN, "--option", f"test-chain.delay={delay}", "--chunk-size", "3",
            "-o", str(out), "--no-progress"]


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith((".tmp", ".lock")))


def _results(path: Path) -> tuple[np.ndarray, np.ndarray]:
    [table] = jio.read_results(path).values()
    order = np.argsort(table.jet_index)
    return table.jet_index[order], table.log_likelihood[order]


@pytest.fixture(scope="module")
def jets_path(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("faults") / "jets.h5"
    jio.write(path, generate(45, ShowerParams.w(), seed=11, max_leaves=16))
    return path


# ---------------------------------------------------------------------- kills
def test_kills_at_random_moments_end_with_the_clean_result(tmp_path, jets_path):
    clean = tmp_path / "clean.h5"
    t0 = time.monotonic()
    done = subprocess.run(_cluster_cmd(jets_path, clean), env=_env(), capture_output=True,
                          text=True, timeout=300)
    span = time.monotonic() - t0
    assert done.returncode == 0, done.stderr
    out = tmp_path / "out.h5"
    rng = np.random.default_rng(2026)
    for delay in np.sort(rng.uniform(0.3, 1.0, size=3)) * span:
        proc = subprocess.Popen(_cluster_cmd(jets_path, out), env=_env(), start_new_session=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(float(delay))
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        if out.exists():  # finished before the kill, or killed after the rename: complete
            assert jio.n_jets(out) == 45
    final = subprocess.run(_cluster_cmd(jets_path, out), env=_env(), capture_output=True,
                           text=True, timeout=300)
    assert final.returncode == 0, final.stderr
    assert _leftovers(tmp_path) == []
    assert not (tmp_path / "out.h5.parts").exists()
    idx, ll = _results(out)
    assert np.array_equal(idx, np.arange(45))
    assert np.array_equal(ll, _results(clean)[1])


# ---------------------------------------------------------------------- full disk
def _can_mount_tmpfs() -> str | None:
    if not sys.platform.startswith("linux") or shutil.which("unshare") is None:
        return "needs Linux and unshare"
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"],
                           capture_output=True, text=True, timeout=60)
    if probe.returncode != 0:
        return f"cannot mount a tmpfs in a user namespace ({probe.stderr.strip()[:80]})"
    return None


_NO_TMPFS = _can_mount_tmpfs()


def _in_small_tmpfs(mount: Path, size_kb: int, commands: list[list[str] | str]) -> list[str]:
    """Run commands (one shell) with a tmpfs of ``size_kb`` mounted on ``mount``; the output of
    each command is followed by ``rc=<code>`` (a string is a raw shell line), then the files left
    in the tmpfs."""
    import shlex

    script = [f"mount -t tmpfs -o size={size_kb}k tmpfs {shlex.quote(str(mount))}"]
    for cmd in commands:
        script.append(cmd if isinstance(cmd, str) else f"{shlex.join(cmd)}; echo rc=$?")
    script.append(f"ls -a {shlex.quote(str(mount))}")
    proc = subprocess.run(["unshare", "-rm", "sh", "-c", "\n".join(script)], env=_env(),
                          capture_output=True, text=True, timeout=300)
    return (proc.stdout + proc.stderr).splitlines()


@pytest.mark.skipif(_NO_TMPFS is not None, reason=str(_NO_TMPFS))
def test_generate_on_a_full_disk(tmp_path):
    mount = tmp_path / "small"
    mount.mkdir()
    lines = _in_small_tmpfs(mount, 200, [
        [sys.executable, "-m", "jetastar", "generate", "--type", "w", "--n", "1000", "-o",
         str(mount / "g.h5")],
    ])
    text = "\n".join(lines)
    assert "rc=1" in lines, text
    assert "Segmentation fault" not in text and "dealloc" not in text
    assert "not enough disk space" in text or "no space left" in text.lower()
    assert not [ln for ln in lines if ln.endswith(".tmp") or ln == "g.h5"], text


@pytest.mark.skipif(_NO_TMPFS is not None, reason=str(_NO_TMPFS))
@pytest.mark.parametrize("chunk", [3, 45])
def test_cluster_when_the_disk_fills(tmp_path, jets_path, chunk):
    clean = tmp_path / "clean.h5"
    run_batch([jets_path], BatchConfig(["test-chain"], plugins=[PLUGIN], chunk_size=chunk),
              output=clean, progress=False)
    # chunk 3: the disk fills while writing the parts; chunk 45: the output's space check (before
    # the clustering, which copies the jets into the output meanwhile) fails
    size_kb = max(16, clean.stat().st_size // 1024 // 2)
    mount = tmp_path / "small"
    mount.mkdir()
    cmd = _cluster_cmd(jets_path, mount / "out.h5", 0.0)
    cmd[cmd.index("--chunk-size") + 1] = str(chunk)
    lines = _in_small_tmpfs(mount, size_kb, [
        cmd, f"ls -a {mount}; echo listed", f"mount -o remount,size=4m {mount}", cmd])
    text = "\n".join(lines)
    assert [ln for ln in lines if ln.startswith("rc=")] == ["rc=1", "rc=0"], text
    # (FAILED lines are on standard error too, which the helper appends to standard output)
    failed = sorted({ln for ln in lines if ln.startswith("FAILED")})
    assert len(failed) == 1 and ("disk space" in failed[0] or "no space" in failed[0].lower()), text
    if chunk == 45:
        assert "out.h5: not enough disk space" in failed[0], text
    assert "Traceback" not in text and "Segmentation fault" not in text
    first = lines[lines.index("rc=1") + 1:lines.index("listed")]
    assert not [ln for ln in first if ln.endswith((".tmp", ".lock")) or ln == "out.h5"], text
    assert not [ln for ln in lines[lines.index("rc=0"):] if ln.endswith((".tmp", ".lock"))]
    assert "out.h5" in lines[lines.index("rc=0"):]


def test_enospc_injected_into_the_writer(tmp_path, monkeypatch):
    import jetastar.io.hdf5 as h5mod

    class Full:
        def __init__(self, path, mode):
            self._f = open(path, mode)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self._f.close()

        def write(self, data):
            self._f.write(data[: len(data) // 2])
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(h5mod, "open", Full, raising=False)
    jets = generate(5, ShowerParams.qcd(), seed=1)
    target = tmp_path / "x.h5"
    with pytest.raises(OSError, match="No space left"):
        jio.write(target, jets)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_disk_without_room_is_refused_before_writing(tmp_path, monkeypatch):
    import jetastar.io._space as space

    monkeypatch.setattr(space, "IN_MEMORY_MAX", 0)  # the direct (large-file) path
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(space.shutil, "disk_usage",
                        lambda p: usage._replace(free=1000))
    with pytest.raises(OSError, match="not enough disk space") as exc:
        jio.write(tmp_path / "x.h5", generate(5, ShowerParams.qcd(), seed=1))
    assert exc.value.errno == errno.ENOSPC
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------------- read-only folder
def test_read_only_output_folder_fails_before_any_work(jets_path):
    base = Path(tempfile.mkdtemp())
    try:
        os.chmod(base, 0o755)
        shutil.copy(jets_path, base / "jets.h5")
        os.chmod(base / "jets.h5", 0o644)
        ro = base / "ro"
        ro.mkdir()
        os.chmod(ro, 0o555)
        cmd = _cluster_cmd(base / "jets.h5", ro / "out.h5")
        if os.geteuid() == 0:  # root writes anywhere: run as an unprivileged user
            if shutil.which("setpriv") is None:
                pytest.skip("running as root (permissions not enforced) and no setpriv")
            cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *cmd]
        proc = subprocess.run(cmd, env={**_env(), "NUMBA_CACHE_DIR": str(base / "nc")},
                              capture_output=True, text=True, timeout=300)
        if "ModuleNotFoundError" in proc.stderr:
            pytest.skip("the package is not readable by an unprivileged user here")
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert "permission denied" in proc.stdout + proc.stderr
        assert "Traceback" not in proc.stderr
        assert list(ro.iterdir()) == []
    finally:
        os.chmod(base / "ro", 0o755)
        shutil.rmtree(base, ignore_errors=True)


# ---------------------------------------------------------------------- concurrent writers
def test_concurrent_writers_of_one_output(tmp_path, jets_path):
    out = tmp_path / "out.h5"
    procs = [subprocess.Popen(_cluster_cmd(jets_path, out, 0.02), env=_env(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    results = [(p.wait(timeout=300), *p.communicate()) for p in procs]
    codes = sorted(r[0] for r in results)
    text = "\n".join(r[1] + r[2] for r in results)
    assert codes in ([0, 0], [0, 1]), text
    if codes == [0, 1]:
        assert "another jetastar run" in text
    assert "Traceback" not in text
    idx, _ = _results(out)
    assert np.array_equal(idx, np.arange(45))
    assert _leftovers(tmp_path) == []


def test_concurrent_writers_of_different_outputs_in_one_folder(tmp_path, jets_path):
    procs = [subprocess.Popen(_cluster_cmd(jets_path, tmp_path / f"out{k}.h5", 0.01),
                              env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for k in range(2)]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, out + err
    assert np.array_equal(_results(tmp_path / "out0.h5")[1], _results(tmp_path / "out1.h5")[1])
    assert _leftovers(tmp_path) == []
