"""Small jets built for particular checks (shared by several test modules)."""

from __future__ import annotations

import numpy as np

from jetastar import Jet
from jetastar.ginkgo import ShowerParams


def collinear_jet(n: int) -> Jet:
    """Massless leaves within 1 mrad of each other: every cluster has t far below t_cut."""
    rng = np.random.default_rng(n)
    theta = rng.uniform(0, 1e-3, n)
    phi = rng.uniform(0, 2 * np.pi, n)
    e = rng.uniform(5.0, 50.0, n)
    p = np.stack(
        [e, e * np.sin(theta) * np.cos(phi), e * np.sin(theta) * np.sin(phi),
         e * np.cos(theta)], axis=1,
    )
    return Jet(p, ShowerParams.qcd(), jet_id=900 + n)
