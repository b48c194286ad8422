"""numba's inliner copies a function's scope once per inlining (jetastar._numba_inline)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap

from numba.core import inline_closurecall, ir
from numba.core.compiler import run_frontend

from jetastar import _numba_inline
from jetastar._numba_inline import installed

# a kernel that inlines a helper of several blocks (a loop and branches), itself inlining another
_KERNELS = """
import json, sys
import numba as nb
import numpy as np
import jetastar._jit  # (installs jetastar's numba patches, or not with the switch)
from jetastar._numba_inline import installed

@nb.njit(inline="always")
def inner(x, k):
    return x * k if k > 1 else x - k

@nb.njit(inline="always")
def helper(a, k):
    total = 0.0
    for i in range(a.shape[0]):
        if a[i] > 0.5:
            total += inner(a[i], k)
        else:
            total -= a[i] / (i + 1)
    return total

@nb.njit
def kernel(a, k):
    s = helper(a, k)
    if s > 1.0:
        s += helper(a[::-1].copy(), k + 1)
    return s

a = np.linspace(0.0, 1.0, 17)
value = kernel(a, 3)
sig = kernel.signatures[0]
print(json.dumps({"installed": installed(), "value": value.hex(),
                  "llvm": kernel.inspect_llvm(sig)}))
"""


def _run(switch: str) -> dict:
    env = {**os.environ, "JETASTAR_FAST_INLINE": switch}
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(_KERNELS)], env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_jetastar_installs_it():
    assert installed()
    assert isinstance(inline_closurecall.copy, _numba_inline._CopyModule)


def test_the_same_llvm_ir_and_value_with_and_without_it():
    on, off = _run("1"), _run("0")
    assert on["installed"] and not off["installed"]  # (the switch)
    assert on["value"] == off["value"]
    # the names numba gives functions it generates carry a process's object addresses
    def normal(text: str) -> str:
        return re.sub(r"0x[0-9a-f]+", "0x", text)

    assert normal(on["llvm"]) == normal(off["llvm"])


def _function_ir():
    def f(a, k):
        total = 0.0
        for i in range(a.shape[0]):
            if a[i] > k:
                total += a[i]
            else:
                total -= 1.0
        return total

    return run_frontend(f)


def test_blocks_copied_in_one_inlining_share_one_scope_copy():
    func_ir = _function_ir()
    blocks = list(func_ir.blocks.values())
    assert len(blocks) >= 3
    scope = blocks[0].scope
    n_vars = len(scope.localvars._con)
    module = inline_closurecall.copy
    _numba_inline._copied.append({})
    try:
        copies = [module.deepcopy(b) for b in blocks]
    finally:
        _numba_inline._copied.pop()
    shared = copies[0].scope
    assert all(c.scope is shared for c in copies)
    assert shared is not scope and shared.parent is not scope.parent
    assert isinstance(shared, ir.Scope) and len(shared.localvars._con) == n_vars
    # the copy is a copy: the original's scope and statements are untouched by changes to it
    shared.redefine("new_name", loc=blocks[0].loc)
    assert "new_name" not in scope.localvars._con
    assert copies[0].body is not blocks[0].body
    assert [str(s) for s in copies[-1].body] == [str(s) for s in blocks[-1].body]
    # outside an inlining (and with a memo of the caller's) numba's own copy, scope included
    outside = module.deepcopy(blocks[1])
    assert outside.scope is not scope and outside.scope is not shared
