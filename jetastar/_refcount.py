"""Array views that numba does not reference-count, for arrays handed down a kernel's hot calls.

numba gives every array a reference count (its ``meminfo``) and, when an array is passed to a
function that it does not inline at its own level, increments and decrements that count around the
call with *atomic* instructions (about 20 cycles each, and a cache line that parallel threads fight
over when they share the array). LLVM inlines the small callees afterwards but cannot remove these
operations, so a kernel that passes its tables and its constants row to a helper per cluster or per
split spends much of its time on them: 30–45 % of the exact MAP engine's time on 10-leaf jets.

:func:`borrowed` returns the same array (same data, shape, strides and type) without a
``meminfo``: numba's reference-count calls on it reduce to a test of a null pointer. The view owns
nothing, so the array it was made from must stay alive while the view is in use: take views of a
kernel's arguments (the Python caller holds them), or of an array the kernel allocates and then
hands to :func:`keep_alive` (or reads) after its last use of the view (numba frees an array after
its last use). Never let a view outlive its array: do not return one to Python or to a caller
that does not hold the array.

Example:
    >>> import numba as nb
    >>> import numpy as np
    >>> from jetastar._refcount import borrowed, keep_alive
    >>> @nb.njit
    ... def total(a):
    ...     view = borrowed(a)
    ...     out = view.sum()
    ...     keep_alive(a)
    ...     return out
    >>> float(total(np.arange(4.0)))
    6.0
"""

from __future__ import annotations

from typing import Any

from numba import types
from numba.core import cgutils, config
from numba.extending import intrinsic


def _borrowable(typ: Any) -> bool:
    """An array, or a tuple whose items are all borrowable."""
    if isinstance(typ, types.Array):
        return True
    return isinstance(typ, types.BaseTuple) and all(_borrowable(t) for t in typ.types)


def _borrow_value(context: Any, builder: Any, typ: Any, value: Any) -> Any:
    """The code of :func:`borrowed` for one value of type ``typ``."""
    if isinstance(typ, types.Array):
        view = cgutils.create_struct_proxy(typ)(context, builder, value=value)
        view.meminfo = cgutils.get_null_value(view.meminfo.type)
        view.parent = cgutils.get_null_value(view.parent.type)
        return view._getvalue()
    out = value
    for i, item in enumerate(typ.types):
        out = builder.insert_value(
            out, _borrow_value(context, builder, item, builder.extract_value(value, i)), i)
    return out


def _borrowed_typing(typingctx: Any, arrays: Any) -> Any:
    """The typing and code of :func:`borrowed` (numba's ``intrinsic`` protocol).

    Args:
        arrays: a numba array (any dtype, dimension and layout), or a tuple of arrays (nested
            tuples too), e.g. a kernel's state.

    Returns:
        The same type: each array with a null ``meminfo`` and ``parent``.
    """
    if not _borrowable(arrays):
        return None

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return _borrow_value(context, builder, signature.args[0], args[0])

    return arrays(arrays), codegen


def _keep_alive_typing(typingctx: Any, owner: Any) -> Any:
    """The typing and code of :func:`keep_alive` (numba's ``intrinsic`` protocol).

    Args:
        owner: the array the view was made from, or a tuple holding it.

    Returns:
        None.
    """

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return context.get_dummy_value()

    return types.none(owner), codegen


def _same(arrays: Any) -> Any:
    """``borrowed`` with numba's compiler switched off (``NUMBA_DISABLE_JIT=1``): the value."""
    return arrays


def _nothing(owner: Any) -> None:
    """``keep_alive`` with numba's compiler switched off: nothing to do."""


if config.DISABLE_JIT:  # kernels run as Python, where an intrinsic cannot be called
    borrowed = _same
    keep_alive = _nothing
else:
    borrowed = intrinsic(_borrowed_typing)
    keep_alive = intrinsic(_keep_alive_typing)
borrowed.__doc__ = """``arrays`` without reference counts (module docstring): views the caller keeps
alive. ``arrays``: a numba array (any dtype, dimension and layout), or a tuple of arrays (nested
tuples too), e.g. a kernel's state. Returns the same type, each array with a null ``meminfo`` and
``parent`` (with ``NUMBA_DISABLE_JIT=1``: the value itself)."""
keep_alive.__doc__ = """A use of ``owner`` (an array, or a tuple holding it) that compiles to
nothing: numba keeps a value alive until its last use, so calling this after the last use of a
:func:`borrowed` view keeps the view valid."""
