"""Exceptions raised by jetastar.

Every error about user data names *what* is wrong and *where*: the jet (index or id), the field and
the problem, so that a bad jet in a file of thousands can be found.
"""

from __future__ import annotations

import pickle

__all__ = [
    "BatchError",
    "BatchInterrupted",
    "FileFormatError",
    "GpuUnavailableError",
    "InferenceError",
    "InvalidJetError",
    "InvalidJetInFileError",
    "InvalidTreeError",
    "JetastarError",
    "OptionError",
    "OutputLockedError",
    "TooLargeError",
    "UnsafePickleError",
]


class JetastarError(Exception):
    """Base class of all jetastar errors."""


class InvalidJetError(JetastarError, ValueError):
    """A jet (its leaves, parameters or metadata) is not valid input.

    Args:
        message: what is wrong.
        jet: index or id of the jet, when known.
        field: name of the offending field (``"leaves"``, ``"params.t_cut"``, ...).

    Attributes:
        jet, field: as given; reason: the message without the jet and field prefix.
    """

    def __init__(self, message: str, *, jet: object = None, field: str | None = None) -> None:
        self.jet = jet
        self.field = field
        self.reason = message
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


class InferenceError(JetastarError, ValueError):
    """A scan or fit that cannot be made as asked (a parameter it cannot fit, a grid it cannot use,
    a sample whose selection it would ignore); the message says what to change."""


class OptionError(ValueError):
    """An option value of the wrong type or out of range."""


class GpuUnavailableError(JetastarError, RuntimeError):
    """``device="gpu"`` was asked for where no usable CUDA GPU is (the message says why and how to
    install the GPU extra)."""


class BatchError(JetastarError, ValueError):
    """A batch run cannot start or finish (bad settings, mismatching part files, ...)."""


class BatchInterrupted(KeyboardInterrupt):
    """A batch run was interrupted (Ctrl-C, or SIGTERM turned into an interrupt by the command line).

    Every chunk that had finished is kept in the output's part folder; rerunning with the same
    arguments resumes from there.

    Attributes:
        input: the file that was being processed.
        parts: its part folder.
        jets_kept: jets of that file whose results are kept.
        n_jets: jets in that file.
    """

    def __init__(self, input: str, parts: str, jets_kept: int, n_jets: int) -> None:
        self.input = input
        self.parts = parts
        self.jets_kept = jets_kept
        self.n_jets = n_jets
        super().__init__(str(self))

    def __str__(self) -> str:
        if self.jets_kept == 0:  # (nothing to resume: a rerun starts from the beginning)
            return (f"interrupted: none of the {self.n_jets} jets of {self.input} was done yet; "
                    "rerun the same command to start again")
        return (f"interrupted: {self.jets_kept} of {self.n_jets} jets of {self.input} are done and "
                f"kept in {self.parts}; rerun the same command to resume")


class OutputLockedError(JetastarError, RuntimeError):
    """Another process is writing the same output."""


class UnsafePickleError(JetastarError, pickle.UnpicklingError):
    """The pickle asks for a global that the legacy importer does not allow."""


class FileFormatError(JetastarError, ValueError):
    """A file is missing, of the wrong format, corrupt/truncated, or of an unknown schema version."""


class InvalidJetInFileError(InvalidJetError):
    """A jet stored in a file is invalid; the message names the file, the entry, the jet and the field.

    Attributes:
        path: the file.
        entry: position of the jet in the file.
        jet: its id.
        field: the offending field.
    """

    def __init__(self, message: str, *, path: str, entry: int, jet: object, field: str) -> None:
        super().__init__(message, jet=jet, field=field)
        self.path = path
        self.entry = entry
        self.args = (f"{path}: entry {entry}: {self.args[0]}",)
