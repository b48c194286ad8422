"""Jets from anyone's particles: coordinate detection, conversion with ``vector``, the mass policy.

Particles come in many coordinate systems — ``px, py, pz, E`` (Delphes ``Particle.Px``...),
``pt, eta, phi, mass`` (CMS NanoAOD ``PFCands_pt``...), ``pt, eta, phi, E``, ... This module finds
which coordinates a set of field names holds (case-insensitive; ``m``/``M``/``Mass`` are the mass,
``e``/``E``/``energy`` the energy), converts them to jetastar's ``(E, px, py, pz)`` with the
`vector <https://vector.readthedocs.io>`_ package, applies the **mass policy** and builds a
:class:`~jetastar.JetCollection` of jets without truth trees.

Mass policy (``mass_policy=``). Real particles are (nearly) massless, and ``E² − |p|²`` of a massless
particle rounds to a tiny value of either sign; the symmetric Ginkgo likelihood makes every split with
a child of ``t < 0`` impossible (−∞), so one such particle can make every tree of its jet −∞.

* ``"clamp"`` (default): a particle with ``−1e-6·E² <= t < 0`` (rounding) gets its energy raised by
  the smallest float64 step that makes ``t >= 0`` exactly (a few ulps); its 3-momentum is kept.
* a number ``m`` (GeV), e.g. ``0.13957`` (a pion mass): every particle gets mass ``m``,
  ``E = sqrt(|p|² + m²)``, 3-momentum kept (and, where rounding leaves ``t < 0``, as for a mass of
  0, raised by the smallest step that makes ``t >= 0``, as ``"clamp"`` does).
* ``"keep"``: nothing is changed (reference behaviour; tiny negative ``t`` stay −∞ in the symmetric
  likelihood).

A particle below ``−1e-6·E²`` (clearly spacelike, e.g. a negative mass) is an error under every
policy. The number of particles a policy changed is stored per jet in the extra column
``jet_columns["n_mass_adjusted"]``, the number left with ``t < 0`` (under ``"keep"``: every tree
of such a jet is −∞ in the symmetric likelihood) in ``jet_columns["n_negative_t"]``; both follow the
jets into files, and :func:`mass_report` sums them up.

Ginkgo parameters: data have no shower parameters, so the caller chooses ``t_cut``, ``lam`` and
``lam_root``; the defaults are those of :meth:`ShowerParams.qcd() <jetastar.ginkgo.ShowerParams.qcd>`
(``t_cut`` 16 GeV², λ = λ_R = 1.5). Each jet's root 4-vector is the sum of its particles, its
``t_root`` the jet's squared mass. A jet whose squared mass is not above ``t_cut`` has no tree of
finite likelihood (every split needs a parent above ``t_cut``); it is reported as invalid (field
``params.t_cut``) instead of silently scoring −∞.

Example:
    >>> import awkward as ak
    >>> from jetastar import JetCollection
    >>> parts = ak.Array([[{"pt": 50.0, "eta": 0.1, "phi": 0.2, "mass": 0.0},
    ...                    {"pt": 30.0, "eta": -0.3, "phi": 0.5, "mass": 0.0}]])
    >>> jets = JetCollection.from_momenta(parts, t_cut=1.0)
    >>> jets[0].n_leaves, bool(jets[0].leaf_t.min() >= 0.0)
    (2, True)

This module is the public face of the conversion; the column-building code lives in
``jetastar/_columnar.py`` (below :mod:`jetastar.jet`, which uses it for awkward input). It also holds
:func:`rap_phi_kt2`, the rapidity / azimuth / kt² kernel shared by the kt algorithms and the
observables. The old name ``jetastar.particles`` still works.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numba as nb
import numpy as np

from ._columnar import (
    COORDINATE_SETS,
    DEFAULT_LAM,
    DEFAULT_LAM_ROOT,
    DEFAULT_MASS_POLICY,
    DEFAULT_T_CUT,
    MASS_POLICIES,
    apply_mass_policy,
    awkward_columns,
    canonical_name,
    dense_columns,
    detect_coordinates,
    flat_columns,
    nonfinite_problems,
    to_cartesian,
)
from .jet import JetCollection

__all__ = [
    "COORDINATE_SETS",
    "DEFAULT_LAM",
    "DEFAULT_LAM_ROOT",
    "DEFAULT_MASS_POLICY",
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

_TWOPI = 2.0 * math.pi
_MAX_RAP = 1.0e5


def collection_from_flat(
    components: Mapping[str, Any], counts: Any, **kw: Any
) -> JetCollection:
    """A :class:`~jetastar.JetCollection` from flat particle coordinates and particles per jet.

    Args:
        components: vector coordinate name -> flat ``(M,)`` array (all jets' particles in order).
        counts: ``(J,)`` particles per jet.
        **kw: keyword arguments:

            * ``entry``: ``(J,)`` ids of the jets (their entry numbers in a file); default
              ``0..J-1``;
            * ``fields``: vector coordinate name -> the user's field name (for error messages);
            * ``t_cut``, ``lam``, ``lam_root``: Ginkgo parameters of every jet (GeV², rates);
            * ``mass_policy``: ``"clamp"``, ``"keep"`` or a mass in GeV (module docstring);
            * ``jet_type``: label of the jets;
            * ``validate``: raise on the first invalid jet; otherwise such jets are kept
              (clustering them records ``"failed"`` with the reason);
            * ``path``: the file the particles came from (named in errors);
            * ``jet_columns``: further per-jet float columns to attach;
            * ``problems``: a dict that gets, with ``validate=False``, the message of each jet
              with a bad input value (jet position -> one line naming the input field).

    Raises:
        InvalidJetError: (:class:`~jetastar.io.InvalidJetInFileError` with ``path``) naming the
            entry, the field and the problem: non-finite coordinates, fewer than 2 particles,
            non-positive energy, a clearly spacelike particle, a jet mass² not above ``t_cut``.

    Example:
        >>> import numpy as np
        >>> comps = {"E": np.array([10.0, 10.0]), "px": np.zeros(2), "py": np.zeros(2),
        ...          "pz": np.array([9.0, -9.0])}
        >>> collection_from_flat(comps, [2], t_cut=1.0).n_leaves.tolist()
        [2]
    """
    return JetCollection(**flat_columns(components, counts, **kw))


def from_dense(array: Any, components: Any = None, **kw: Any) -> JetCollection:
    """Jets from a dense ``(n_jets, n_particles, 4)`` array (the common ML jet-dataset layout).

    Args:
        array: float array ``(J, P, 4)`` whose last axis is in ``components`` order, or a structured
            array ``(J, P)`` with named fields (coordinates detected from the names).
        components: the order of the last axis, e.g. ``"E,px,py,pz"`` or ``("pt", "eta", "phi",
            "mass")``.
        **kw: ``mask`` (optional boolean ``(J, P)``, ``True`` for real particles; without a mask a
            particle whose four components all equal ``padding`` is padding), ``padding`` (the
            value of padded slots, 0 by default; with a mask the masked-out slots must hold it
            too), ``entry`` (ids of the jets), ``path`` and ``field`` (where the array came from,
            for error messages), and the keywords of :func:`collection_from_flat` (``t_cut``,
            ``mass_policy``, ``validate``...).

    Example:
        >>> import numpy as np
        >>> dense = np.zeros((2, 3, 4))
        >>> dense[:, :2] = [[[60.0, 0.0, 0.1, 0.0], [40.0, 0.2, -0.1, 0.0]]]
        >>> from_dense(dense, "pt,eta,phi,mass", t_cut=1.0).n_leaves.tolist()
        [2, 2]
    """
    return JetCollection(**dense_columns(array, components, **kw))


def from_awkward_particles(array: Any, **kw: Any) -> JetCollection:
    """Jets from an awkward array ``n_jets * var * {coordinates...}`` in any vector coordinates.

    Args:
        array: jagged records (e.g. ``var * Momentum4D`` with vector behaviour, or plain records
            with fields such as ``pt, eta, phi, mass``); one list of particles per jet.
        **kw: ``mapping`` (vector coordinate -> field name, to override detection, e.g.
            ``{"pt": "PT", "eta": "Eta", "phi": "Phi", "E": "E"}``), ``entry`` (ids of the jets,
            default ``0..J-1``), ``path`` (origin, for error messages) and the keywords of
            :func:`collection_from_flat`.
    """
    return JetCollection(**awkward_columns(array, **kw))


def mass_report(collection: JetCollection) -> dict[str, int]:
    """How many particles (in how many jets) a mass policy changed, from ``n_mass_adjusted``.

    Example:
        >>> import numpy as np
        >>> from jetastar import JetCollection
        >>> dense = np.array([[[50.0, 0.1, 0.2, 0.0], [30.0, -0.3, 0.5, 0.0]]])
        >>> jets = JetCollection.from_momenta(dense, components="pt,eta,phi,mass", t_cut=1.0)
        >>> mass_report(jets)["particles_negative_t"]
        0
    """
    zeros = np.zeros(len(collection))
    n_touched = collection.jet_columns.get("n_mass_adjusted", zeros)
    n_negative = collection.jet_columns.get("n_negative_t", zeros)
    return {
        "jets": len(collection),
        "particles": int(collection.leaves.shape[0]),
        "particles_touched": int(np.sum(n_touched)),
        "jets_touched": int(np.count_nonzero(n_touched)),
        "particles_negative_t": int(np.sum(n_negative)),
        "jets_negative_t": int(np.count_nonzero(n_negative)),
    }


@nb.njit(cache=True)
def rap_phi_kt2(e, px, py, pz):  # pragma: no cover - numba
    """FastJet's rapidity, azimuth in [0, 2π) and kt² of a 4-vector (numba kernel).

    The conventions of FastJet's ``PseudoJet``: a massless particle along the beam gets rapidity
    ``±(1e5 + |pz|)``; a spacelike 4-vector is treated as massless for the rapidity.

    Example:
        >>> rap, phi, kt2 = rap_phi_kt2(5.0, 3.0, 0.0, 0.0)
        >>> round(rap, 12), phi, kt2
        (0.0, 0.0, 9.0)
    """
    kt2 = px * px + py * py
    phi = 0.0 if kt2 == 0.0 else math.atan2(py, px)
    if phi < 0.0:
        phi += _TWOPI
    if phi >= _TWOPI:
        phi -= _TWOPI
    if e == abs(pz) and kt2 == 0.0:
        max_rap_here = _MAX_RAP + abs(pz)
        rap = max_rap_here if pz >= 0.0 else -max_rap_here
    else:
        m2 = (e + pz) * (e - pz) - kt2
        effective_m2 = max(0.0, m2)
        e_plus_pz = e + abs(pz)
        rap = 0.5 * math.log((kt2 + effective_m2) / (e_plus_pz * e_plus_pz))
        if pz > 0.0:
            rap = -rap
    return rap, phi, kt2
