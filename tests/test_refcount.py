"""Array views without reference counts (``jetastar._refcount``): same data, shape and strides as
the array they were made of, tuples of arrays, an error for anything else, and memory freed once
(numba's allocation statistics, in a fresh process)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numba as nb
import numpy as np
import pytest

from jetastar._refcount import borrowed, keep_alive


@nb.njit
def _twice(view, i):
    return 2.0 * view[i]


@nb.njit
def _sum_through_helper(a):
    view = borrowed(a)
    total = 0.0
    for i in range(view.shape[0]):
        total += _twice(view, i)
    return total


def test_a_view_reads_and_writes_the_same_data():
    @nb.njit
    def write_through(a):
        view = borrowed(a)
        view[1] = 7.0
        return view.shape[0], view[0]

    a = np.arange(4.0)
    assert write_through(a) == (4, 0.0)
    assert a.tolist() == [0.0, 7.0, 2.0, 3.0]
    assert _sum_through_helper(np.arange(5.0)) == 20.0


def test_strided_views_keep_their_strides():
    @nb.njit
    def column_sum(a):
        view = borrowed(a[::2, 1])
        total = 0.0
        for i in range(view.shape[0]):
            total += view[i]
        return total, view.strides[0]

    a = np.arange(24.0).reshape(6, 4)
    total, stride = column_sum(a)
    assert total == a[::2, 1].sum() and stride == a[::2, 1].strides[0]


def test_tuples_of_arrays_nested_too():
    @nb.njit
    def unpack(a, b):
        x, (y, z) = borrowed((a, (b, a)))
        x[0] = 5.0
        keep_alive((a, b))
        return x.sum() + y.sum() + z.sum()

    assert unpack(np.arange(3.0), np.ones(2)) == 18.0  # (5 + 1 + 2) * 2 + 2


@pytest.mark.parametrize("value", [1.5, (np.ones(2), 3)])
def test_anything_else_is_a_typing_error(value):
    @nb.njit
    def view_of(x):
        return borrowed(x)

    with pytest.raises(nb.core.errors.TypingError):
        view_of(value)


def test_memory_is_freed_once(tmp_path):
    # numba counts allocations only when NUMBA_NRT_STATS is set before it is imported
    script = textwrap.dedent("""
        import numba as nb, numpy as np
        from numba.core.runtime import rtsys
        from jetastar._refcount import borrowed, keep_alive

        @nb.njit
        def twice(view, i):
            return 2.0 * view[i]

        @nb.njit
        def run(n, borrow):
            total = 0.0
            for rep in range(n):
                owner = np.arange(8.0)
                scratch = (np.empty(3), np.zeros((2, 2)))
                view = borrowed(owner) if borrow else owner
                a, b = borrowed(scratch)
                for i in range(8):
                    total += twice(view, i)
                a[0] = 1.0
                b[0, 0] = 1.0
                keep_alive(owner)
                keep_alive(scratch)
            return total

        for borrow in (False, True):
            run(1, borrow)
            before = rtsys.get_allocation_stats()
            total = run(100, borrow)
            after = rtsys.get_allocation_stats()
            print(total, after.alloc - before.alloc, after.free - before.free,
                  after.mi_alloc - before.mi_alloc, after.mi_free - before.mi_free)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env={**os.environ, "NUMBA_NRT_STATS": "1"}, check=True,
                         cwd=tmp_path)
    lines = [line.split() for line in out.stdout.strip().splitlines()]
    assert len(lines) == 2
    for total, alloc, free, mi_alloc, mi_free in lines:
        assert float(total) == 100 * 56.0
        # three arrays a repetition, each allocated and freed exactly once
        assert int(alloc) == int(free) == 300 and int(mi_alloc) == int(mi_free) == 300


def test_kernels_run_as_python_with_the_compiler_switched_off(tmp_path):
    # NUMBA_DISABLE_JIT=1 (debugging a kernel with pdb, coverage of kernel code) runs the kernels
    # as Python, where the views are the arrays themselves: same values as compiled
    script = textwrap.dedent("""
        import json, sys
        import jetastar
        from jetastar.ginkgo import ShowerParams, generate
        jets = generate(2, ShowerParams.qcd(), seed=3, max_leaves=6)
        out = {name: [float(v) for v in jetastar.cluster(jets, name).log_likelihood]
               for name in ("greedy", "beam", "mcts", "trellis")}
        print(json.dumps(out))
    """)
    values = {}
    for disable in ("1", "0"):
        run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                             env={**os.environ, "NUMBA_DISABLE_JIT": disable,
                                  "TQDM_DISABLE": "1"}, cwd=tmp_path, timeout=600)
        assert run.returncode == 0, run.stderr[-2000:]
        values[disable] = run.stdout.strip().splitlines()[-1]
    assert values["1"] == values["0"]
