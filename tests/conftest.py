"""Test-wide settings: headless matplotlib, the CUDA simulator for the GPU backend."""

from __future__ import annotations

import os

os.environ.setdefault("MPLBACKEND", "Agg")
# The GPU backend's kernels run in numba's CUDA simulator in the test suite (CI has no GPU); set
# NUMBA_ENABLE_CUDASIM=0 to run tests/test_gpu.py on a real GPU instead. Set before numba loads.
os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
