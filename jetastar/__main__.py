"""``python -m jetastar`` and the ``jetastar`` console script: see :mod:`jetastar.cli`."""

from __future__ import annotations

import sys

from ._jit import skip_last_collection, skip_numba_extensions
from .cli import main as _cli_main

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``jetastar`` command.

    Args:
        argv: arguments without the program name (default ``sys.argv[1:]``).

    Returns:
        The exit code.
    """
    if argv is None:  # the program itself: the process ends with this command
        skip_last_collection()
    args = list(sys.argv[1:] if argv is None else argv)
    if not any(a == "--plugin" or a.startswith("--plugin=") for a in args):
        skip_numba_extensions()  # the command runs jetastar's kernels only
    return _cli_main(args)


if __name__ == "__main__":
    sys.exit(main())
