"""numba's inliner copies a function's variable scope once per inlining, not once per block.

numba inlines a helper marked ``inline="always"`` by copying the helper's IR into the caller, and
copies it block by block (``copy.deepcopy`` of each block on its own, twice per call site). Every
block refers to the function's scope, which lists every variable of the function, so each block's
copy copies the whole scope as well: blocks × variables copies. The exact MAP's ``solve_cluster``
inlines its warm start (66 blocks, 661 variables after its own inlining of the likelihood and its
bound) and its split scan (55 blocks, 627 variables): 265 000 variable copies. Measured 2026-12-08
(numba 0.68.1): 0.8 CPU-s in one process compiling only the exact MAP, 1.5-9 CPU-s in a worker of a
first ``jetastar run``, much of it system time (the copies are cycles, variable to scope to
variable, which only the garbage collector frees, and it is paused while kernels compile:
:class:`jetastar._jit._CollectorPause`).

:func:`install` makes the blocks of one such copy share one copy of the scope: while numba's
``InlineWorker.inline_ir`` runs, a block copied with no memo of its own gets a memo that already
maps the scopes copied for the blocks before it to their copies; everything else in the block is
copied as before. numba itself reads the scope of the first block only, and replaces every inlined
block's scope with the caller's at the end; the LLVM IR of every kernel of a first run is the same
with and without this (compared text for text, the addresses in the names numba gives generated
functions aside). In profiles of first runs the inlining of ``solve_cluster`` took 0.73 and
0.78 CPU-s instead of 8.5 and 9.0; two first runs side by side on the two cores, three rounds:
1.7, 1.7 and 4.6 CPU-s less (user + sys; system time less in every round), the wall time the same
within the machine's noise. Installed only when numba's inliner has the expected shape (its module copies
with the ``copy`` module and ``InlineWorker.inline_ir`` exists); ``JETASTAR_FAST_INLINE=0``
switches it off.

Example:
    >>> from jetastar._numba_inline import installed
    >>> installed() in (True, False)
    True
"""

from __future__ import annotations

import copy
import functools
from typing import Any

from ._compile_lock import switched_on

__all__ = ["install", "installed"]

#: the environment switch (``0`` / ``off`` / ``no`` / ``false``: numba copies as it does itself)
_SWITCH_ENV = "JETASTAR_FAST_INLINE"

#: one entry per ``inline_ir`` call under way (nested ones included): the scopes copied so far,
#: ``id(scope) -> (scope, its copy)`` (the scope kept alive, so that its id stays its own)
_copied: list[dict[int, tuple[Any, Any]]] = []


class _CopyModule:
    """What numba's inliner sees as its ``copy`` module: the real one, except that ``deepcopy`` of a
    block inside ``inline_ir`` shares the scope copies of the blocks copied before it."""

    def __init__(self, block_type: type) -> None:
        self._block_type = block_type

    def __getattr__(self, name: str) -> Any:
        return getattr(copy, name)

    def deepcopy(self, x: Any, memo: dict[int, Any] | None = None) -> Any:
        if memo is not None or not _copied or not isinstance(x, self._block_type):
            return copy.deepcopy(x, memo)
        known = _copied[-1]
        memo = {}
        scope = getattr(x, "scope", None)
        while scope is not None and id(scope) in known:  # the function's scope and its parents
            memo[id(scope)] = known[id(scope)][1]
            scope = getattr(scope, "parent", None)
        out = copy.deepcopy(x, memo)
        scope = getattr(x, "scope", None)
        while scope is not None and id(scope) not in known and id(scope) in memo:
            known[id(scope)] = (scope, memo[id(scope)])
            scope = getattr(scope, "parent", None)
        return out


def _sharing_scopes(original: Any) -> Any:
    """Wrap ``InlineWorker.inline_ir``: a fresh table of copied scopes for each call."""

    @functools.wraps(original)
    def inline_ir(self: Any, *args: Any, **kws: Any) -> Any:
        _copied.append({})
        try:
            return original(self, *args, **kws)
        finally:
            _copied.pop()

    inline_ir._jetastar_shared_scopes = True  # type: ignore[attr-defined]
    return inline_ir


def installed() -> bool:
    """Whether numba's inliner shares scope copies in this process."""
    try:
        from numba.core import inline_closurecall
    except ImportError:
        return False
    worker = getattr(inline_closurecall, "InlineWorker", None)
    method = getattr(worker, "inline_ir", None)
    return isinstance(getattr(inline_closurecall, "copy", None), _CopyModule) and bool(
        getattr(method, "_jetastar_shared_scopes", False))


def install() -> None:
    """Make numba's inliner share scope copies (once per process; see the module docstring)."""
    if not switched_on(_SWITCH_ENV) or installed():
        return
    try:
        from numba.core import inline_closurecall, ir
    except ImportError:  # another numba layout: inlining copies as numba does by itself
        return
    worker = getattr(inline_closurecall, "InlineWorker", None)
    original = getattr(worker, "__dict__", {}).get("inline_ir")
    block_type = getattr(ir, "Block", None)
    if original is None or block_type is None or getattr(inline_closurecall, "copy", None) is not copy:
        return
    inline_closurecall.copy = _CopyModule(block_type)
    worker.inline_ir = _sharing_scopes(original)
