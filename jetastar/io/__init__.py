"""Jet collections and clustering results on disk: HDF5, ROOT and legacy Ginkgo pickles.

:func:`read` and :func:`write` pick the format from the file extension (the registry of
:mod:`jetastar.io.formats`; the functions are in :mod:`jetastar.io.dispatch`):

* ``.h5`` / ``.hdf5`` — HDF5 via h5py (:mod:`jetastar.io.hdf5`);
* ``.root`` — ROOT TTrees via uproot (:mod:`jetastar.io.root`);
* ``.pkl`` / ``.pickle`` — read-only import of the reference Ginkgo generator's pickles, without
  torch and without executing code (:mod:`jetastar.io.legacy`).

The on-disk layouts are documented in ``jetastar/io/schema.md`` and can be read with plain h5py /
uproot. Writes are atomic (temporary file in the same directory + fsync + rename).

Errors are one line and name the file (and the jet and field for a bad jet):
:class:`FileNotFoundError`, :class:`FileFormatError` (wrong format, corrupt or truncated file,
unknown schema version), :class:`InvalidJetInFileError` (a bad jet inside a good file).

Example:
    >>> import os, tempfile
    >>> import numpy as np
    >>> from jetastar import Jet, JetCollection, Tree
    >>> from jetastar import io
    >>> jet = Jet(np.array([[10.0, 0, 0, 9.0], [10.0, 0, 0, -9.0]]), truth=Tree.from_nested((0, 1)))
    >>> path = os.path.join(tempfile.mkdtemp(), "jets.h5")
    >>> io.write(path, JetCollection.from_jets([jet]))
    >>> len(io.read(path)), io.file_info(path)["n_jets"]
    (1, 1)
"""

from __future__ import annotations

import sys
from typing import Any

from .. import result_tables
from ..ginkgo.likelihood import truth_log_likelihoods
from ..result_tables import AlgorithmResults
from . import particle_files
from ._by_entry import column_prefix
from ._common import (
    FileFormatError,
    InvalidJetInFileError,
    get_extras,
    jet_slice,
    provenance,
    set_extras,
)
from .dispatch import file_info, iterate, n_jets, read, read_results, results_table, write
from .formats import FORMATS, Format, file_format, register_format
from .legacy import UnsafePickleError, import_legacy_pickle
from .particle_files import ParticleSource, iterate_particles, particle_entries, read_particles
from .schema import SCHEMA_VERSION

__all__ = [
    "FORMATS",
    "SCHEMA_VERSION",
    "AlgorithmResults",
    "FileFormatError",
    "Format",
    "InvalidJetInFileError",
    "ParticleSource",
    "UnsafePickleError",
    "column_prefix",
    "file_format",
    "file_info",
    "get_extras",
    "import_legacy_pickle",
    "iterate",
    "iterate_particles",
    "jet_slice",
    "n_jets",
    "particle_entries",
    "provenance",
    "read",
    "read_particles",
    "read_results",
    "register_format",
    "results_table",
    "set_extras",
    "truth_log_likelihoods",
    "write",
]

# Old import paths that still work, as aliases (not second module files): the foreign-file readers
# (particle_files) were ``jetastar.io.particles``; the results table (:mod:`jetastar.result_tables`,
# below io because the observables and diagnostics use it) was ``jetastar.io.results``.
_OLD_PATHS = {"particles": particle_files, "results": result_tables}
for _name, _module in _OLD_PATHS.items():
    sys.modules[f"{__name__}.{_name}"] = _module


def __getattr__(name: str) -> Any:
    if name in _OLD_PATHS:
        return _OLD_PATHS[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return list(__all__)
