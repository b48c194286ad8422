"""Test-wide settings: headless matplotlib, the CUDA simulator for the GPU backend."""

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
