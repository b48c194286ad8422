"""``python -m jetastar`` and the ``jetastar`` console script: see :mod:`jetastar.cli`."""

from __future__ import annotations

import sys

from .cli import main as _cli_main

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``jetastar`` command.

    Args:
        argv: arguments without the program name (default ``sys.argv[1:]``).

    Returns:
        The exit code.
    """
    return _cli_main(argv)


if __name__ == "__main__":
    sys.exit(main())
