"""One compiler per kernel across processes (jetastar._compile_lock)."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from jetastar import _compile_lock
from jetastar._compile_lock import kernel_lock, lock_path

fcntl = pytest.importorskip("fcntl")  # (no flock on Windows: kernels compile without the lock)


def _python(code: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=dict(os.environ, **(env or {})))


def test_a_lock_this_process_holds_is_not_taken_again(tmp_path):
    path = str(tmp_path / "k.lock")
    with kernel_lock(path) as outer:
        with kernel_lock(path, wait_limit_s=0.0) as inner:  # would time out if it were taken
            assert outer and inner
        assert path in _compile_lock._held
    assert path not in _compile_lock._held


def test_another_process_waits_for_the_lock_and_at_most_the_limit(tmp_path):
    path = str(tmp_path / "k.lock")
    code = f"""
        import time
        from jetastar._compile_lock import kernel_lock
        print("ready", flush=True)
        t = time.monotonic()
        with kernel_lock({path!r}, wait_limit_s=LIMIT) as got:
            print(got, round(time.monotonic() - t, 2), flush=True)
    """
    with kernel_lock(path):
        waits = _python(code.replace("LIMIT", "30.0"))
        gives_up = _python(code.replace("LIMIT", "0.3"))
        assert waits.stdout.readline().strip() == "ready"
        assert gives_up.stdout.readline().strip() == "ready"
        time.sleep(1.0)
    got, waited = waits.communicate(timeout=60)[0].split()
    assert got == "True" and float(waited) >= 0.5  # it waited until this process let go
    got, waited = gives_up.communicate(timeout=60)[0].split()
    assert got == "False" and 0.25 <= float(waited) < 1.0  # it went on without the lock


def test_no_lock_and_no_wait_where_flock_fails_or_the_folder_is_read_only(tmp_path, monkeypatch):
    def unsupported(fd, op):
        raise OSError(errno.ENOLCK, "no locks available")

    monkeypatch.setattr(fcntl, "flock", unsupported)
    start = time.monotonic()
    with kernel_lock(str(tmp_path / "k.lock")) as got:
        assert not got
    assert time.monotonic() - start < 0.5
    monkeypatch.undo()
    with kernel_lock(str(tmp_path / "missing" / "k.lock")) as got:  # cannot create the file
        assert not got


def test_which_kernels_get_a_lock(monkeypatch):
    import numba as nb

    from jetastar._sorting import argsort_stable

    path = lock_path(argsort_stable)
    assert path is not None and path.endswith(".lock")
    assert Path(path).parent == Path(argsort_stable._cache._cache_path)
    assert lock_path(nb.njit(lambda x: x)) is None  # not jetastar's, not cached
    monkeypatch.setenv("JETASTAR_COMPILE_LOCK", "0")
    assert lock_path(argsort_stable) is None


@pytest.mark.parametrize("switch", ["1", "0"])
def test_two_processes_on_a_cold_cache_compile_a_kernel_once(tmp_path, switch):
    # both start the same kernel at the same moment (a file they wait for): with the lock one
    # compiles it and the other loads it; switched off, both compile it (numba by itself)
    go = tmp_path / "go"
    code = f"""
        import json, os, time
        import numpy as np
        from numba.core import event
        from jetastar._sorting import argsort_stable

        compiled = []

        class Count(event.Listener):
            def on_start(self, e):
                pass

            def on_end(self, e):
                compiled.append(e.data["dispatcher"].py_func.__qualname__)

        event.register("numba:compile", Count())
        print("ready", flush=True)
        while not os.path.exists({str(go)!r}):
            time.sleep(0.005)
        argsort_stable(np.array([2.0, 1.0, 3.0]))
        print(json.dumps(compiled.count("argsort_stable")), flush=True)
    """
    env = {"NUMBA_CACHE_DIR": str(tmp_path / "cache"), "JETASTAR_COMPILE_LOCK": switch}
    procs = [_python(code, env) for _ in range(2)]
    for p in procs:
        assert p.stdout.readline().strip() == "ready", p.stderr.read()
    go.touch()
    counts = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    assert sum(counts) == (1 if switch == "1" else 2), counts
