"""Progress bars that respect every way of switching tqdm off.

All of jetastar's progress bars come from :func:`progress_bar`. The bar it returns only ever calls
tqdm's ``update``, ``set_postfix`` and ``close``; it never reads attributes of the tqdm object (a
disabled tqdm bar lacks most of them), and it is switched off

* by the caller (``show=False``); the bars of one jet's search appear only after
  :data:`PER_JET_DELAY` seconds unless the caller asked for them,
* by ``TQDM_DISABLE`` in the environment (any value except ``""``, ``0``, ``false``, ``no``,
  ``off``), read when the bar is created — also with tqdm versions that do not read it themselves,
  (tqdm reads it only once, when it is imported),
* by anything that makes tqdm itself disable the bar (``tqdm.__init__`` patched with
  ``disable=True``, ...): then tqdm's no-op bar is driven like any other.

Where standard error is a file or a pipe (a batch job's log) rather than a terminal or a
notebook, a bar is written as one plain line every :data:`LOG_INTERVAL` seconds, without the
carriage returns that redraw it on a terminal (they made a log one endless line, ~0.5 MB an hour).

Example:
    >>> from jetastar._progress import progress_bar
    >>> with progress_bar(total=3, desc="demo", unit="jet", show=False) as bar:
    ...     bar.update(3)
    >>> bar.n
    3
"""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = ["LOG_INTERVAL", "PER_JET_DELAY", "ProgressBar", "progress_bar", "tqdm_disabled_by_env"]

#: Seconds between two lines of a bar written to a log (standard error not a terminal).
LOG_INTERVAL = 30.0

#: Seconds before the bar of one jet's search appears when the caller did not ask for it
#: (``progress=None``): a loop over jets that each take less shows no bars; one long jet does.
#: Collection-level work (files, :func:`jetastar.inmemory.cluster_jets`) shows its bar at once.
PER_JET_DELAY = 10.0

_FALSE = ("", "0", "false", "no", "off")


def tqdm_disabled_by_env() -> bool:
    """Whether ``TQDM_DISABLE`` in the environment asks for no progress bars."""
    return os.environ.get("TQDM_DISABLE", "").strip().lower() not in _FALSE


class ProgressBar:
    """A tqdm bar, or nothing; counts its own progress (``n``) either way.

    Args:
        bar: the tqdm object, or ``None`` for no bar.
    """

    def __init__(self, bar: Any = None) -> None:
        self._bar = bar
        self.n = 0

    @property
    def shown(self) -> bool:
        """Whether a tqdm bar was created (it may still be disabled by tqdm itself)."""
        return self._bar is not None

    def update(self, k: int = 1) -> None:
        """Advance by ``k``."""
        self.n += k
        if self._bar is not None:
            self._bar.update(k)

    def set_postfix(self, **values: Any) -> None:
        """Show ``key=value`` pairs after the bar (without forcing a redraw)."""
        if self._bar is not None:
            self._bar.set_postfix(refresh=False, **values)

    def close(self) -> None:
        """Close the bar (idempotent)."""
        if self._bar is not None:
            bar, self._bar = self._bar, None
            bar.close()

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def progress_bar(
    *, total: int | None = None, desc: str = "", unit: str = "it", show: bool = True,
    delay: float = 0.0, initial: int = 0, unit_scale: bool = False, leave: bool = False,
) -> ProgressBar:
    """A :class:`ProgressBar` (see the module docstring for when it is switched off).

    Args:
        total: expected number of steps (``None``: unknown).
        desc: label in front of the bar.
        unit: name of a step.
        show: ``False`` for no bar.
        delay: seconds before the bar first appears.
        initial: steps already done.
        unit_scale: show large counts with k/M/G suffixes.
        leave: keep the finished bar on screen.
    """
    if not show or tqdm_disabled_by_env():
        bar = ProgressBar(None)
    else:
        from tqdm.auto import tqdm

        log: dict[str, Any] = {}
        if _writes_to_a_log(tqdm):
            log = {"file": _LogLines(sys.stderr), "mininterval": LOG_INTERVAL,
                   "maxinterval": 2 * LOG_INTERVAL}
        bar = ProgressBar(tqdm(
            total=total, desc=desc, unit=unit, delay=delay, initial=initial,
            unit_scale=unit_scale, leave=leave, **log,
        ))
    bar.n = initial
    return bar


def _writes_to_a_log(tqdm: type) -> bool:
    """Whether a bar would go to a file or pipe: standard error is not a terminal, and tqdm is
    not drawing notebook widgets."""
    if any(c.__module__.startswith("tqdm.notebook") for c in tqdm.__mro__):
        return False
    try:
        return sys.stderr is not None and not sys.stderr.isatty()
    except (AttributeError, ValueError):  # a replaced or closed stream
        return False


class _LogLines:
    """A stream for tqdm that turns each redraw into one line of ``stream`` (no carriage
    returns; blank redraws, the erasing of a bar, and repeats of the last line are dropped)."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._last = ""

    def write(self, text: str) -> int:
        line = text.replace("\r", "").strip()
        if line and line != self._last:
            self._last = line
            self._stream.write(line + "\n")
        return len(text)

    def flush(self) -> None:
        self._stream.flush()
