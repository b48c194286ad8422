"""Test-wide settings: headless matplotlib, the CUDA simulator for the GPU backend."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable

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


#: the start of a script that compiles GPU kernels to PTX for an H100 (sm_90) with NVVM, no GPU
#: needed; exit 77 when NVVM is missing. Device functions ask the current device for its compute
#: capability, and numba's own CUDA target rejects the builtin min/max on floats of the physics
#: kernels (a GPU's numba-cuda takes them): both are stood in for, in the subprocess only.
_PTX_PRELUDE = textwrap.dedent("""
    import re
    import sys
    try:
        from numba.cuda.cudadrv import nvvm
        nvvm.NVVM()
    except Exception as e:
        print("no NVVM:", e)
        sys.exit(77)
    import numba.cuda.dispatcher as dispatcher
    from numba import cuda, types as t

    class Device:
        compute_capability = (9, 0)

    dispatcher.get_current_device = lambda: Device()
    import jetastar.ginkgo.kernels as physics

    physics.max = cuda.jit(device=True)(lambda a, b: a if a > b else b)
    physics.min = cuda.jit(device=True)(lambda a, b: a if a < b else b)
    from jetastar.clustering import gpu
    i8, b1 = t.int64, t.boolean
    a = lambda dt, nd: t.Array(dt, nd, "C")
""")
#: the end of it: compile each kernel of ``sigs`` and print its static shared memory
_PTX_REPORT = textwrap.dedent("""
    for kernel, sig in sigs.items():
        ptx, _ = cuda.compile_ptx(kernel.py_func, sig, cc=(9, 0))
        shared = sum(int(x) for x in re.findall(r"\\.shared \\.align \\d+ \\.b8 \\S+\\[(\\d+)\\]", ptx))
        print("shared", shared)
""")


@pytest.fixture
def sm90_shared_bytes() -> Callable[[str], list[int]]:
    """Compile GPU kernels to PTX for an H100 (sm_90) with NVVM in a subprocess, no GPU needed:
    the simulator runs kernels as Python, so what only the CUDA target rejects (types that do not
    unify, unsupported calls) would first show on a GPU. Called with code that makes a dict
    ``sigs`` (kernel -> argument types; ``i8``, ``b1``, ``a(dtype, ndim)``, ``t`` and ``gpu`` are
    defined), it returns each kernel's static shared memory in bytes; skips without NVVM."""

    def compile_(code: str) -> list[int]:
        script = _PTX_PRELUDE + textwrap.dedent(code) + _PTX_REPORT
        env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "0"}
        proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                              text=True, timeout=900)
        if proc.returncode == 77:
            pytest.skip(proc.stdout.strip())
        assert proc.returncode == 0, proc.stderr[-3000:]
        return [int(line.split()[1]) for line in proc.stdout.splitlines()
                if line.startswith("shared")]

    return compile_
