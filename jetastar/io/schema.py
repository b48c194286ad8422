"""Constants of jetastar's on-disk layout, shared by the HDF5 and ROOT formats.

The layout itself is documented in ``jetastar/io/schema.md``.

Example:
    >>> from jetastar.io.schema import SCHEMA_VERSION, TRUTH_LIKELIHOODS
    >>> SCHEMA_VERSION, TRUTH_LIKELIHOODS
    (1, ('symmetric', 'legacy'))
"""

from __future__ import annotations

__all__ = [
    "FORMAT_NAME",
    "P4_COLUMNS",
    "PARAM_COLUMNS",
    "ROOT_MOMENTUM_COLUMNS",
    "SCHEMA_VERSION",
    "TRUTH_LIKELIHOODS",
]

#: Version of the on-disk layout written by this jetastar (HDF5 attribute / ROOT meta field).
SCHEMA_VERSION = 1
#: The ``format`` attribute / meta field of every file jetastar writes.
FORMAT_NAME = "jetastar"
#: Per-jet shower-parameter columns.
PARAM_COLUMNS = ("m_hard", "lam", "lam_root", "t_cut", "t_root")
#: Per-jet columns of the root 4-vector.
ROOT_MOMENTUM_COLUMNS = ("root_E", "root_px", "root_py", "root_pz")
#: Components of a 4-vector, in jetastar's order.
P4_COLUMNS = ("E", "px", "py", "pz")
#: Likelihood forms whose truth-tree log-likelihoods are stored per jet (``truth_llh_<form>``).
TRUTH_LIKELIHOODS = ("symmetric", "legacy")
