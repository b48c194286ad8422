"""The ``jetastar`` command: its parser (one subcommand per module ``cmd_*``) and :func:`main`,
which turns errors into one line and exit codes, and SIGTERM into an interrupt."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any

from .. import __version__
from ..errors import BatchInterrupted, JetastarError
from . import (
    cmd_algorithms,
    cmd_cluster,
    cmd_compare,
    cmd_demo,
    cmd_fit,
    cmd_generate,
    cmd_info,
    cmd_observables,
    cmd_run,
)
from .shared import PROG, UsageError

__all__ = ["build_parser", "main"]

#: the commands, in the order of ``jetastar --help``
_COMMANDS = (cmd_run, cmd_generate, cmd_cluster, cmd_compare, cmd_observables, cmd_fit,
             cmd_info, cmd_algorithms, cmd_demo)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``jetastar`` command."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="jetastar: exact and approximate maximum-likelihood clustering of Ginkgo jets. "
                    "Start with `jetastar run` (the main job on built-in defaults).",
        epilog="Run `jetastar COMMAND --help` for the options of a command.",
    )
    parser.add_argument("--version", action="version", version=f"jetastar {__version__}")
    parser.add_argument("--debug", action="store_true", help="show full tracebacks on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in _COMMANDS:
        command.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (0 ok, 1 error, 2 usage error).

    Args:
        argv: arguments without the program name (default ``sys.argv[1:]``).
    """
    _tolerant_output()
    parser = build_parser()
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.command is None:  # (no command: what there is to run)
        parser.print_help()
        return 0
    debug = bool(getattr(args, "debug", False))
    _Terminated.signum = 0
    previous = _terminate_as_interrupt()
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:  # output piped into `head` etc.
        try:  # silence the flush at exit (Python docs, "Note on SIGPIPE")
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 0
    except KeyboardInterrupt as exc:
        if debug:
            raise
        return _stopped(args.command, exc)
    except UsageError as exc:
        if debug:
            raise
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        if debug:
            raise
        stop = _interrupt_inside(exc)
        if stop is not None:  # a signal that landed in a numba kernel (SystemError around it)
            return _stopped(args.command, stop)
        print(f"{PROG}: error: {_one_line(exc)}", file=sys.stderr)
        return 1
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _tolerant_output() -> None:
    """Where the terminal's encoding has no λ, −, ², ... (``LANG=C``, ``PYTHONIOENCODING=latin-1``),
    print them as ``?`` instead of failing with ``UnicodeEncodeError`` (``--help`` did)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            "λ−²∞".encode(stream.encoding or "ascii")
        except UnicodeEncodeError:
            with contextlib.suppress(AttributeError, ValueError):
                stream.reconfigure(errors="replace")
        except (AttributeError, LookupError):
            continue


def _stopped(command: str, exc: KeyboardInterrupt) -> int:
    """Say that ``command`` was stopped by Ctrl-C or SIGTERM, and return the shell's exit code for
    it (130, 143)."""
    what = "terminated" if _Terminated.signum == signal.SIGTERM else "interrupted"
    if command == "run":  # the demonstration regenerates its jets: nothing to resume
        text = f"{what} (`{PROG} run` starts afresh when rerun)"
    elif isinstance(exc, BatchInterrupted):
        text = str(exc).replace("interrupted", what, 1)
    elif command == "cluster":
        text = f"{what} (rerun the same command to resume)"
    else:  # (their outputs are written whole or not at all: nothing to resume)
        text = what
    print(f"{PROG}: {text}", file=sys.stderr)
    return 143 if what == "terminated" else 130


def _interrupt_inside(exc: BaseException) -> KeyboardInterrupt | None:
    """The Ctrl-C / signal behind ``exc`` (numba turns one raised while a kernel's result is
    boxed into "SystemError: ... returned a result with an exception set", its cause)."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, KeyboardInterrupt):
            return cur
        seen.add(id(cur))
        cur = cur.__cause__ or cur.__context__
    return None


class _Terminated(KeyboardInterrupt):
    """SIGTERM (what batch systems send before killing a job), raised like Ctrl-C so that a run
    stops the same way: finished work kept, workers stopped, exit code 143."""

    #: the signal that stopped the command (0: none; the interrupt itself may have been replaced
    #: on its way, e.g. by BatchInterrupted)
    signum = 0


def _raise_terminated(signum: int, frame: Any) -> None:
    _Terminated.signum = int(signum)
    raise _Terminated()


def _terminate_as_interrupt() -> Any:
    """Install the SIGTERM handler (main thread only); returns the previous one to restore."""
    if threading.current_thread() is not threading.main_thread():
        return None
    try:
        return signal.signal(signal.SIGTERM, _raise_terminated)
    except (ValueError, OSError):
        return None


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, (JetastarError, ValueError, OSError)):
        return text
    return f"{type(exc).__name__}: {text} (rerun with --debug for the traceback)"
