"""Old name of :mod:`jetastar.momenta` (momenta conversion), kept so that old imports still work.

New code imports :mod:`jetastar.momenta`; the foreign particle-file readers are
:mod:`jetastar.io.particle_files`.
"""

from __future__ import annotations

from .momenta import (
    COORDINATE_SETS,
    DEFAULT_LAM,
    DEFAULT_LAM_ROOT,
    DEFAULT_T_CUT,
    MASS_POLICIES,
    apply_mass_policy,
    canonical_name,
    collection_from_flat,
    detect_coordinates,
    from_awkward_particles,
    from_dense,
    mass_report,
    nonfinite_problems,
    rap_phi_kt2,
    to_cartesian,
)

__all__ = [
    "COORDINATE_SETS",
    "DEFAULT_LAM",
    "DEFAULT_LAM_ROOT",
    "DEFAULT_T_CUT",
    "MASS_POLICIES",
    "apply_mass_policy",
    "canonical_name",
    "collection_from_flat",
    "detect_coordinates",
    "from_awkward_particles",
    "from_dense",
    "mass_report",
    "nonfinite_problems",
    "rap_phi_kt2",
    "to_cartesian",
]
