"""Exceptions raised by jetastar.

Every error about user data names *what* is wrong and *where*: the jet (index or id), the field and
the problem, so that a bad jet in a file of thousands can be found.
"""

from __future__ import annotations

__all__ = ["InvalidJetError", "InvalidTreeError", "JetastarError", "TooLargeError"]


class JetastarError(Exception):
    """Base class of all jetastar errors."""


class InvalidJetError(JetastarError, ValueError):
    """A jet (its leaves, parameters or metadata) is not valid input.

    Args:
        message: what is wrong.
        jet: index or id of the jet, when known.
        field: name of the offending field (``"leaves"``, ``"params.t_cut"``, ...).
    """

    def __init__(self, message: str, *, jet: object = None, field: str | None = None) -> None:
        self.jet = jet
        self.field = field
        where = []
        if jet is not None:
            where.append(f"jet {jet}")
        if field is not None:
            where.append(f"field '{field}'")
        prefix = (", ".join(where) + ": ") if where else ""
        super().__init__(prefix + message)


class InvalidTreeError(InvalidJetError):
    """A tree (children array, nested tuples, linkage, ...) is not a binary hierarchy over the leaves."""


class TooLargeError(JetastarError, ValueError):
    """A jet is too large for an exact method (memory or size limit); the message says what to use."""
