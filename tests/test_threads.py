"""Thread policy of the exact engines (``jetastar.clustering.threads``): small work on one thread,
idle OpenMP threads sleeping, and results that do not depend on threads or on the serial/parallel
choice."""

from __future__ import annotations

import os
import subprocess
import sys

import numba as nb
import numpy as np
import pytest

from jetastar.clustering import exact_map, exact_trellis
from jetastar.clustering import threads as thread_policy
from jetastar.clustering.exact.trellis import Trellis
from jetastar.clustering.threads import SERIAL_BELOW, Threads, check_threads, parallel_worth_it
from jetastar.ginkgo import ShowerParams, generate


@pytest.fixture(scope="module")
def jets():
    out = []
    for n, seed in ((11, 1), (13, 2), (14, 3)):
        out += generate(2, ShowerParams.w(), seed=seed, min_leaves=n, max_leaves=n,
                        max_tries=100_000)
    return out


@pytest.mark.parametrize("likelihood", ["symmetric", "legacy"])
def test_exact_map_same_result_serial_parallel_and_any_thread_count(jets, likelihood, monkeypatch):
    results = {}
    for label, below, threads in (("serial", 1 << 62, None), ("parallel", 0, None),
                                  ("one thread", 0, 1),
                                  ("all threads", 0, nb.config.NUMBA_NUM_THREADS)):
        monkeypatch.setattr(thread_policy, "SERIAL_BELOW", below)
        results[label] = [exact_map(j, likelihood, threads=threads, progress=False)
                          for j in jets]
    ref = results["serial"]
    for label, rows in results.items():
        for a, b in zip(ref, rows, strict=True):
            assert a.log_likelihood == b.log_likelihood, label
            assert a.tree == b.tree, label
            assert a.stats["splits_evaluated"] == b.stats["splits_evaluated"], label


def test_trellis_same_result_serial_and_parallel(jets, monkeypatch):
    jet = jets[2]
    monkeypatch.setattr(thread_policy, "SERIAL_BELOW", 1 << 62)
    a = Trellis(jet)
    ma = a.marginals_array()
    monkeypatch.setattr(thread_policy, "SERIAL_BELOW", 0)
    b = Trellis(jet, threads=nb.config.NUMBA_NUM_THREADS)
    mb = b.marginals_array()
    assert a.map_log_likelihood() == b.map_log_likelihood()
    assert a.log_partition() == b.log_partition()
    assert np.array_equal(a.map_array(), b.map_array())
    assert np.allclose(ma, mb, rtol=0, atol=1e-12)
    assert exact_trellis(jet, threads=1).log_likelihood == a.map_log_likelihood()


def test_small_work_is_serial():
    # a 12-leaf jet has at most ~63 000 splits per cluster size: never worth a parallel launch
    assert SERIAL_BELOW > 63_000
    assert not parallel_worth_it(63_000)
    with Threads(1):
        assert not parallel_worth_it(10 * SERIAL_BELOW)
    if nb.config.NUMBA_NUM_THREADS > 1:
        assert parallel_worth_it(SERIAL_BELOW)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2", 10**6])
def test_check_threads_rejects(bad):
    with pytest.raises(ValueError, match=r"threads must be an integer in 1\.\.\d+ \(numba's "
                                          r"thread count, NUMBA_NUM_THREADS\)"):
        check_threads(bad)
    assert check_threads(None) is None and check_threads(1) == 1


def _omp_policy(env: dict[str, str]) -> str:
    code = "import jetastar, os; print(os.environ.get('OMP_WAIT_POLICY'))"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=120, check=True)
    return done.stdout.strip()


def test_idle_openmp_threads_sleep_unless_the_user_says_otherwise():
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    assert _omp_policy(env) == "PASSIVE"
    assert _omp_policy({**env, "OMP_WAIT_POLICY": "active"}) == "active"
