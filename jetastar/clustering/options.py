"""Declare, check and convert algorithm options.

Every algorithm declares its keyword options once, next to its code, as :class:`Option` objects
(type, default, allowed range and one line of help): :func:`flag`, :func:`integer`, :func:`number`,
:func:`choice`, :func:`text` and :func:`anything` make them. One function, :func:`validate_options`,
checks any algorithm's options against its declarations before any work starts; the command line's
``--help``, ``jetastar algorithms`` and the documentation's option tables are written from the same
declarations (:func:`option_table`).

Options reach the algorithms from Python, from ``--option key=value`` on the command line and from
stored settings, so a flag may arrive as ``"False"`` and a count as ``"10"`` or ``10.0``. Every
option is converted to its declared type — text booleans are read as booleans, never as "a
non-empty string is true" — and checked against its range, so that a bad value is one clear error
at the start of a run instead of a failure on every jet. The algorithms keep their own checks; a
value accepted here is accepted by the algorithm.

Example:
    >>> beam_size = integer("beam_size", None, "states kept per level", low=1, none=True)
    >>> validate_options("beam", (beam_size,), {"beam_size": "10"})
    {'beam_size': 10}
    >>> beam_size.allowed
    'integer >= 1, or None'
    >>> as_flag("false", "log_z"), as_flag("Yes", "prove"), as_flag(1, "prove")
    (False, True, True)
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import numbers
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ..errors import OptionError
from ..ginkgo.likelihood import LIKELIHOODS

__all__ = [
    "PARAMETER_NAMES",
    "Option",
    "anything",
    "as_flag",
    "choice",
    "flag",
    "integer",
    "likelihood_option",
    "number",
    "option_table",
    "options_from_signature",
    "text",
    "unknown_options_message",
    "validate_options",
]

_TRUE = ("true", "yes", "on", "1", "y", "t")
_FALSE = ("false", "no", "off", "0", "n", "f")

#: the kinds of value an :class:`Option` takes
KINDS = ("flag", "integer", "number", "choice", "text", "any")


@dataclasses.dataclass(frozen=True)
class Option:
    """One keyword option of an algorithm: what it is, its default and the values it takes.

    Made by :func:`flag`, :func:`integer`, :func:`number`, :func:`choice`, :func:`text` or
    :func:`anything`.

    Args:
        name: the keyword.
        default: the per-jet function's default.
        help: one line for ``--help``, ``jetastar algorithms`` and the docs.
        kind: one of ``"flag"``, ``"integer"``, ``"number"``, ``"choice"``, ``"text"``,
            ``"any"`` (not converted or checked here: sequences, generators, ...).
        low: the lowest value allowed (integers and numbers), ``None`` = no bound.
        low_open: the lowest value itself is not allowed (``> low`` instead of ``>= low``).
        high: the highest value allowed (``<=``), ``None`` = no bound.
        choices: the values a ``"choice"`` takes.
        none: ``None`` is a valid value (usually "the default for this jet" or "no budget").
    """

    name: str
    default: Any
    help: str
    kind: str = "any"
    low: float | None = None
    low_open: bool = False
    high: float | None = None
    choices: tuple[str, ...] = ()
    none: bool = False

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"option {self.name!r}: unknown kind {self.kind!r}; valid: {KINDS}")

    @property
    def allowed(self) -> str:
        """The values it takes, in words (``"integer >= 1, or None"``)."""
        if self.kind == "flag":
            words = "true or false"
        elif self.kind == "choice":
            words = " or ".join(map(repr, self.choices))
        elif self.kind in ("integer", "number"):
            words = self.kind
            if self.low is not None:
                words += f" {'>' if self.low_open else '>='} {self.low:g}"
            if self.high is not None:
                words += f"{',' if self.low is not None else ''} <= {self.high:g}"
        elif self.kind == "text":
            words = "text"
        else:
            words = "any value"
        return f"{words}, or None" if self.none and self.kind != "any" else words

    def convert(self, value: Any) -> Any:
        """``value`` converted to the option's type and checked against its range.

        Raises:
            OptionError: ``"<name> must be ..."`` for a value of the wrong type or range.
        """
        if value is None:
            if self.none or self.kind == "any":
                return None
            raise OptionError(f"{self.name} must not be None")
        if self.kind == "flag":
            return as_flag(value, self.name)
        if self.kind == "integer":
            value = _as_integer(value, self.name)
        elif self.kind == "number":
            value = _as_number(value, self.name)
        elif self.kind in ("choice", "text"):
            if not isinstance(value, str):
                raise OptionError(f"{self.name} must be text, got {value!r}")
            if self.kind == "choice" and value not in self.choices:
                raise OptionError(f"unknown {self.name} {value!r}; valid: "
                                  f"{', '.join(map(repr, self.choices))}")
            return value
        else:
            return value
        self._check_range(value)
        return value

    def _check_range(self, value: float) -> None:
        if not math.isfinite(float(value)) and (self.low is not None or self.high is not None):
            raise OptionError(f"{self.name} must be finite, got {value!r}")
        if self.low is not None and (value < self.low or (value == self.low and self.low_open)):
            raise OptionError(f"{self.name} must be {'>' if self.low_open else '>='} "
                              f"{self.low:g}, got {value!r}")
        if self.high is not None and value > self.high:
            raise OptionError(f"{self.name} must be <= {self.high:g}, got {value!r}")


def flag(name: str, default: bool | None, help: str, *, none: bool = False) -> Option:
    """A true/false option (text such as ``"false"``, ``"yes"`` and 0/1 are read as booleans)."""
    return Option(name, default, help, "flag", none=none)


def integer(name: str, default: int | None, help: str, *, low: float | None = None,
            high: float | None = None, none: bool = False) -> Option:
    """An integer option, ``low <= value <= high`` (``10.0`` and ``"10"`` are read as 10)."""
    return Option(name, default, help, "integer", low=low, high=high, none=none)


def number(name: str, default: float | None, help: str, *, low: float | None = None,
           low_open: bool = False, high: float | None = None, none: bool = False) -> Option:
    """A real-number option, ``low <= value`` (``low < value`` with ``low_open``)."""
    return Option(name, default, help, "number", low=low, low_open=low_open, high=high, none=none)


def choice(name: str, default: str | None, help: str, choices: Iterable[str], *,
           none: bool = False) -> Option:
    """An option that takes one of a few words."""
    return Option(name, default, help, "choice", choices=tuple(choices), none=none)


def text(name: str, default: str | None, help: str, *, none: bool = False) -> Option:
    """A text option without a fixed list of values."""
    return Option(name, default, help, "text", none=none)


def anything(name: str, default: Any, help: str) -> Option:
    """An option whose values are not checked here (sequences, random generators, ...): the
    algorithm checks them itself."""
    return Option(name, default, help, "any")


def likelihood_option(default: str | None = "symmetric",
                      forms: Sequence[str] = LIKELIHOODS) -> Option:
    """The ``likelihood`` option every Ginkgo algorithm takes (``None``: the symmetric form);
    ``forms``: the forms it takes (the branch-and-bound methods: those with proven bounds)."""
    return choice("likelihood", default, "the likelihood form", forms, none=default is None)


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
        word = value.strip().lower()
        if word in _TRUE:
            return True
        if word in _FALSE:
            return False
    raise OptionError(f"{name} must be true or false, got {value!r}")


def _as_integer(value: Any, name: str) -> int:
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise OptionError(f"{name} must be an integer, got {value!r}")


def _as_number(value: Any, name: str) -> float:
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            pass
    raise OptionError(f"{name} must be a number, got {value!r}")


#: Names of Ginkgo parameters, which belong to the jets rather than to an algorithm.
PARAMETER_NAMES = frozenset({"params", "t_cut", "lam", "lam_root", "m_hard", "t_root"})


def unknown_options_message(algorithm: str, unknown: Sequence[str], valid: Sequence[str]) -> str:
    """The error for options ``algorithm`` does not take, listing the ones it does (and, for
    shower parameters given as options, where they go instead).

    Example:
        >>> unknown_options_message("kt", ["beam"], ["algorithm", "R"])
        "unknown option(s) beam for algorithm 'kt'; valid: algorithm, R"
    """
    words = (f"unknown option(s) {', '.join(unknown)} for algorithm {algorithm!r}; "
             f"valid: {', '.join(valid) or '(none)'}")
    if PARAMETER_NAMES.intersection(unknown):
        words += (". The Ginkgo parameters belong to the jets: jetastar.Jet.from_particles("
                  "particles, params) for one jet's particles, JetCollection.from_momenta(..., "
                  "t_cut=, lam=, lam_root=) for many (particles get ShowerParams.qcd()'s otherwise)")
    return words


def validate_options(algorithm: str, declared: Sequence[Option], options: Mapping[str, Any], *,
                     unknown: bool = True) -> dict[str, Any]:
    """``options`` converted to their declared types and checked against their ranges.

    Args:
        algorithm: the algorithm's registry name (for the messages).
        declared: its :class:`Option` declarations.
        options: keyword options.
        unknown: refuse names that are not declared (``False``: pass them through unchecked).

    Returns:
        A new dict with the converted values.

    Raises:
        ValueError: an unknown option (listing the valid ones), or
            ``"'<algorithm>': option <name> must be ..."`` for the first bad value.
    """
    by_name = {o.name: o for o in declared}
    extra = sorted(set(options) - set(by_name))
    if extra and unknown:
        raise OptionError(unknown_options_message(algorithm, extra, list(by_name)))
    out = dict(options)
    for name, value in options.items():
        if name in by_name:
            try:
                out[name] = by_name[name].convert(value)
            except OptionError as exc:
                raise OptionError(f"{algorithm!r}: option {exc}") from None
    return out


def option_table(declared: Sequence[Option]) -> list[tuple[str, str, str, str]]:
    """One row per option: ``(name, default, allowed values, help)``, as text, for ``--help``
    listings and the documentation.

    Example:
        >>> option_table([flag("log_z", False, "also log Z")])
        [('log_z', 'False', 'true or false', 'also log Z')]
    """
    return [(o.name, repr(o.default) if isinstance(o.default, str) else str(o.default),
             o.allowed, o.help) for o in declared]


def _kind_of(annotation: Any) -> tuple[str, bool]:
    """An :class:`Option` kind for a type annotation, and whether None is allowed."""
    if annotation is inspect.Parameter.empty or annotation is Any:
        return "any", True
    is_union = isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union
    args = typing.get_args(annotation) if is_union else (annotation,)
    plain = [a for a in args if a is not type(None)]
    optional = type(None) in args
    if len(plain) != 1:
        return "any", True
    kind = {bool: "flag", int: "integer", float: "number", str: "text"}.get(plain[0])
    return (kind, optional) if kind else ("any", True)


def options_from_signature(func: Callable[..., Any]) -> tuple[Option, ...]:
    """Declarations read from a function's signature (its keywords after the jet; types from the
    annotations, no ranges): how an algorithm registered without declarations (a plugin's) gets
    its options checked.

    Example:
        >>> def mine(jet, depth: int = 3, label: str | None = None): ...
        >>> [(o.name, o.kind, o.none) for o in options_from_signature(mine)]
        [('depth', 'integer', False), ('label', 'text', True)]
    """
    try:
        params = list(inspect.signature(func, eval_str=True).parameters.values())[1:]
    except (NameError, TypeError, ValueError):
        params = list(inspect.signature(func).parameters.values())[1:]
    out = []
    for p in params:
        if p.kind not in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD):
            continue
        kind, optional = _kind_of(p.annotation)
        default = None if p.default is inspect.Parameter.empty else p.default
        out.append(Option(p.name, default, "", kind, none=optional))
    return tuple(out)
