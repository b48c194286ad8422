"""Check and convert algorithm options before any work starts.

Options reach the algorithms from Python, from ``--option key=value`` on the command line and from
stored settings, so a flag may arrive as ``"False"`` and a count as ``"10"`` or ``10.0``. Here every
option is converted to the type its algorithm declares (``bool``, ``int``, ``float``, ``str``,
possibly ``| None``) — text booleans are read as booleans, never as "a non-empty string is true" —
and checked against the range it must lie in, so that a bad value is one clear error at the start
of a run instead of a failure on every jet.

The algorithms keep their own checks; the ranges here are the same (a value accepted here is
accepted by the algorithm).

Example:
    >>> as_flag("false", "log_z"), as_flag("Yes", "prove"), as_flag(1, "prove")
    (False, True, True)
"""

from __future__ import annotations

import functools
import inspect
import math
import numbers
import types
import typing
from collections.abc import Callable
from typing import Any

from ..errors import OptionError

__all__ = ["as_flag", "check_options"]

_TRUE = ("true", "yes", "on", "1", "y", "t")
_FALSE = ("false", "no", "off", "0", "n", "f")

#: option name -> (lowest value, whether the lowest value itself is allowed); per algorithm
#: overrides below.
_LOWER: dict[str, tuple[float, bool]] = {
    "beam_size": (1, True), "max_time": (0, False), "time_limit": (0, False),
    "max_vertices": (1, True), "max_memory": (1, True), "threads": (1, True),
    "top_k": (1, True), "n_samples": (1, True), "rounds": (1, True), "patience": (1, True),
    "all_pairs_max_size": (1, True), "max_explored": (1, True), "weight": (1, True),
    "R": (0, False), "window_size": (2, True), "n_random": (0, True), "n_starts": (1, True),
    "n_sampled": (0, True), "widen": (0, True), "widen_unsure": (0, True), "top_size": (0, True),
    "root_size": (0, True),
    "max_sweeps": (1, True),
    "n_rollouts": (0, True),
    "n_mc_target": (0, True), "n_mc_min": (0, True), "c_puct": (0, True),
}
_LOWER_FOR: dict[tuple[str, str], tuple[float, bool]] = {
    ("mcts", "beam_size"): (0, True),  # 0 = no beam pre-expansion
}
_CHOICES: dict[str, tuple[str, ...]] = {
    "likelihood": ("symmetric", "legacy"), "device": ("cpu", "gpu", "auto"),
}


def as_flag(value: Any, name: str) -> bool:
    """A boolean option: ``True``/``False``, 0/1, or text (true/false, yes/no, on/off, 1/0).

    Raises:
        ValueError: for anything else (``"maybe"``, 2, None).
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, numbers.Integral) and int(value) in (0, 1):
        return bool(int(value))
    if hasattr(value, "dtype") and getattr(value, "shape", None) == () and value.dtype == bool:
        return bool(value)
    if isinstance(value, str):
        text = value.strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
    raise OptionError(f"{name} must be true or false, got {value!r}")


def _kinds(annotation: Any) -> tuple[set[type], bool]:
    """The plain types of an annotation and whether None is allowed."""
    if annotation is inspect.Parameter.empty or annotation is Any:
        return set(), True
    args = typing.get_args(annotation) if (
        isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union
    ) else (annotation,)
    plain = {a for a in args if a in (bool, int, float, str)}
    optional = type(None) in args
    if len(plain) != len([a for a in args if a is not type(None)]):
        return set(), True  # something else (a sequence, a Generator, ...): not checked here
    return plain, optional


@functools.cache
def _signature(func: Callable[..., Any]) -> dict[str, tuple[frozenset[type], bool]]:
    try:
        params = list(inspect.signature(func, eval_str=True).parameters.values())[1:]
    except (NameError, TypeError, ValueError):
        params = list(inspect.signature(func).parameters.values())[1:]
    out = {}
    for p in params:
        plain, optional = _kinds(p.annotation)
        out[p.name] = (frozenset(plain), optional)
    return out


def _convert(value: Any, kinds: frozenset[type], optional: bool, name: str) -> Any:
    if value is None:
        if optional or not kinds:
            return None
        raise OptionError(f"{name} must not be None")
    if not kinds:
        return value
    if bool in kinds:
        return as_flag(value, name)
    if int in kinds:
        if isinstance(value, numbers.Integral) and not isinstance(value, bool):
            return int(value)
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            try:
                return int(value.strip())
            except ValueError:
                pass
        if float not in kinds:
            raise OptionError(f"{name} must be an integer, got {value!r}")
    if float in kinds:
        if isinstance(value, numbers.Real) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value.strip())
            except ValueError:
                pass
        raise OptionError(f"{name} must be a number, got {value!r}")
    if str in kinds:
        if isinstance(value, str):
            return value
        raise OptionError(f"{name} must be text, got {value!r}")
    return value


def _check_range(algorithm: str, name: str, value: Any) -> None:
    if value is None:
        return
    if name in _CHOICES and isinstance(value, str) and value not in _CHOICES[name]:
        raise OptionError(
            f"unknown {name} {value!r}; valid: {', '.join(map(repr, _CHOICES[name]))}"
        )
    bound = _LOWER_FOR.get((algorithm, name), _LOWER.get(name))
    if bound is None or isinstance(value, bool) or not isinstance(value, numbers.Real):
        return
    lo, inclusive = bound
    if not math.isfinite(float(value)):
        raise OptionError(f"{name} must be finite, got {value!r}")
    if value < lo or (value == lo and not inclusive):
        raise OptionError(f"{name} must be {'>=' if inclusive else '>'} {lo:g}, got {value!r}")


def check_options(algorithm: str, func: Callable[..., Any], options: dict[str, Any]
                  ) -> dict[str, Any]:
    """Options converted to the declared types and checked against their ranges.

    Args:
        algorithm: registry name (for per-algorithm ranges and messages).
        func: the registered function (its signature gives the types).
        options: keyword options; unknown names are left for the caller to report.

    Returns:
        A new dict with converted values.

    Raises:
        ValueError: ``"<algorithm>: option <name>: ..."`` for the first bad value.
    """
    sig = _signature(func)
    out = dict(options)
    for name, value in options.items():
        if name not in sig:
            continue
        kinds, optional = sig[name]
        try:
            out[name] = _convert(value, kinds, optional, name)
            _check_range(algorithm, name, out[name])
        except OptionError as exc:
            raise OptionError(f"{algorithm!r}: option {exc}") from None
    return out
