"""Test-wide settings: headless matplotlib, the CUDA simulator for the GPU backend, the kernel
cache folder kept from test to test."""

from __future__ import annotations

import os
import signal

import pytest

os.environ.setdefault("MPLBACKEND", "Agg")
# The GPU backend's kernels run in numba's CUDA simulator in the test suite (CI has no GPU); set
# NUMBA_ENABLE_CUDASIM=0 to run tests/test_gpu.py on a real GPU instead. Set before numba loads.
os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")


@pytest.fixture
def python_sigint():
    """SIGINT handled by Python (``KeyboardInterrupt``) during the test, also when the test run was
    started with SIGINT ignored (``pytest &`` or ``nohup`` from a shell without job control)."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


@pytest.fixture(autouse=True)
def _kernel_cache_folder_kept():
    """The kernel cache folder of this process (``NUMBA_CACHE_DIR`` and numba's setting) as it was
    before each test. Tests of jetastar's choice of a folder (tests/test_jit.py) make it choose
    another one, which it writes into ``NUMBA_CACHE_DIR`` for worker processes; left there, every
    later test of the same pytest worker that starts a Python process (the docs build, the
    notebooks, the command line) compiled all its kernels again into an empty folder: minutes per
    such test on a 2-core machine (the suite took 16-22 minutes instead of about 9)."""
    from numba.core import config

    env = os.environ.get("NUMBA_CACHE_DIR")
    setting = config.CACHE_DIR
    yield
    if env is None:
        os.environ.pop("NUMBA_CACHE_DIR", None)
    else:
        os.environ["NUMBA_CACHE_DIR"] = env
    config.CACHE_DIR = setting
