"""numba's compiler flags compared in the time it takes to read the options that are set.

numba types every call in a kernel by trying each registered template for the called function.
A template made with ``@overload`` looks up its implementation in a cache keyed by the argument
types *and the compiler flags* of the compilation under way (``numba.core.compiler.Flags``, a
``TargetConfig``). ``TargetConfig.__hash__`` hashes only the option *names* (it sorts a dict, which
yields its keys), so the flags of every compilation have the same hash and each lookup compares
them with ``TargetConfig.__eq__``, which builds ``values()``: a dict of all 22 options, each read
through a Python property. Every ``a[i]`` in a kernel tries about seven ``@overload`` templates of
``operator.getitem`` (strings, char sequences, literal lists and dicts, ...) before the one for
arrays, twice each, at every round of type inference; measured 2026-12-07 (numba 0.68.1), these
lookups were 4.0 of the 8.6 CPU-s of compiling greedy search's kernels, three quarters of it in
``values()``.

:func:`install` gives ``TargetConfig`` a ``values()`` that returns the same dict (same keys, same
order, same values) from the class's defaults overlaid with the options set on the instance
(``_values``, which numba's property setters fill). The option lookups then cost 0.8 instead of
4.0 CPU-s, and a first ``jetastar run``'s kernels compiled in 40.0-43.3 instead of 47.9-49.5
CPU-s (three rounds, the two versions side by side on the two cores). What numba compiles is
unchanged: flags compare and hash exactly as before. A ``TargetConfig`` class whose options are not
numba's generated properties (another package's subclass that overrides one) keeps numba's own
``values()``; so does everything when the check at installation finds the two differ, when this
numba has no ``TargetConfig`` of the expected shape, or with ``JETASTAR_FAST_FLAGS=0``.

Example:
    >>> from numba.core.compiler import Flags
    >>> from jetastar._numba_flags import numba_values
    >>> flags = Flags()
    >>> flags.nrt = True
    >>> flags.values() == numba_values(flags)
    True
"""

from __future__ import annotations

from typing import Any

from ._compile_lock import switched_on

__all__ = ["install", "installed", "numba_values"]

#: the environment switch (``0`` / ``off`` / ``no`` / ``false``: numba's own ``values()``)
_SWITCH_ENV = "JETASTAR_FAST_FLAGS"

#: numba's ``TargetConfig.values`` (set by :func:`install`)
_original: Any = None
#: per ``TargetConfig`` class: its options' defaults in option order, or ``None`` where the class
#: overrides an option's property (numba's ``values()`` is used for it)
_defaults: dict[type, dict[str, Any] | None] = {}


def _is_generated(prop: Any) -> bool:
    """Whether ``prop`` is the property numba's ``TargetConfig`` metaclass made for an option
    (its getter reads ``self._values`` with the option's default)."""
    getter = getattr(prop, "fget", None)
    return isinstance(prop, property) and getattr(getter, "__qualname__", "").endswith(
        "make_prop.<locals>.getter")


def _class_defaults(cls: type) -> dict[str, Any] | None:
    try:
        return _defaults[cls]
    except KeyError:
        pass
    options = cls.options  # type: ignore[attr-defined]
    if all(_is_generated(getattr(cls, name, None)) for name in options):
        found: dict[str, Any] | None = {name: opt.default for name, opt in options.items()}
    else:
        found = None
    _defaults[cls] = found
    return found


def _values(self: Any) -> dict[str, Any]:
    """``TargetConfig.values()``: every option's value, in option order."""
    defaults = _class_defaults(type(self))
    if defaults is None:
        return _original(self)
    out = dict(defaults)
    out.update(self._values)
    return out


def numba_values(config: Any) -> dict[str, Any]:
    """``config.values()`` as numba computes it (each option read through its property)."""
    return {name: getattr(config, name) for name in config.options}


def installed() -> bool:
    """Whether ``TargetConfig.values`` is this module's."""
    try:
        from numba.core.targetconfig import TargetConfig
    except ImportError:
        return False
    return TargetConfig.__dict__.get("values") is _values


def _agrees(flags_cls: type) -> bool:
    """The installation check: default flags, flags with options set (some to their defaults)
    and a copy give numba's dict, key order included."""
    samples = [flags_cls()]
    flags = flags_cls()
    for name, opt in list(flags_cls.options.items())[::3]:  # type: ignore[attr-defined]
        try:
            setattr(flags, name, opt.default)
        except Exception:  # an option whose type does not take its own default: leave it unset
            continue
    samples += [flags, flags.copy()]
    for sample in samples:
        ours = _values(sample)
        theirs = numba_values(sample)
        if ours != theirs or list(ours) != list(theirs):
            return False
    return True


def install() -> None:
    """Give numba's ``TargetConfig`` the fast ``values()`` (once per process; see the module's
    docstring for when numba's own is kept)."""
    global _original
    if not switched_on(_SWITCH_ENV) or installed():
        return
    try:
        from numba.core.compiler import Flags
        from numba.core.targetconfig import TargetConfig
    except ImportError:  # another numba layout
        return
    original = TargetConfig.__dict__.get("values")
    if original is None or not hasattr(Flags, "options") or not hasattr(Flags(), "_values"):
        return
    _original = original
    _defaults.clear()
    if not _agrees(Flags):
        return
    TargetConfig.values = _values  # type: ignore[method-assign]
