"""Commands started and signalled as a terminal does (the interrupt tests of batch runs)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from typing import Any


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_like_a_terminal(cmd: Sequence[str], env: dict[str, str]) -> subprocess.Popen[str]:
    """``cmd`` in a new process group with SIGINT at its default: Ctrl-C reaches a command
    started from a terminal, while a test run in the background of a shell (``pytest &``)
    ignores SIGINT, and its children would inherit that. Its stderr is a text pipe."""
    return subprocess.Popen(list(cmd), env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_default_sigint)


def signal_group_and_wait(proc: subprocess.Popen[str], sig: int) -> tuple[int, str, float]:
    """Send ``sig`` to the whole process group (what a terminal's Ctrl-C or a batch system does)
    and wait (60 s at most, then SIGKILL). Returns ``(returncode, stderr, seconds to stop)``."""
    os.killpg(proc.pid, sig)
    start = time.monotonic()
    try:
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    stopped_after = time.monotonic() - start
    assert proc.stderr is not None
    err = proc.stderr.read()
    proc.stderr.close()
    return proc.returncode, err, stopped_after


def interrupted_on_call(kernel: Callable[..., Any], calls: list[int], at: int = 2
                        ) -> Callable[..., Any]:
    """``kernel`` wrapped so that each call is appended to ``calls`` and call number ``at`` raises
    SIGINT in this process before it runs (a Ctrl-C that arrives "during" that call)."""

    def wrapped(*args: Any) -> Any:
        calls.append(1)
        if len(calls) == at:
            signal.raise_signal(signal.SIGINT)
        return kernel(*args)

    return wrapped


def stops_at_second_call(monkeypatch: Any, module: Any, name: str, run: Callable[[], Any]) -> None:
    """``run()`` with ``module.name`` wrapped by :func:`interrupted_on_call`: it raises
    ``KeyboardInterrupt`` after exactly two calls of that kernel (the interrupt is seen between
    calls, not after all of them). Needs the ``python_sigint`` fixture."""
    import pytest

    calls: list[int] = []
    monkeypatch.setattr(module, name, interrupted_on_call(getattr(module, name), calls))
    with pytest.raises(KeyboardInterrupt):
        run()
    assert len(calls) == 2
