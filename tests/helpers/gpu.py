"""What the GPU test modules share: their skip mark and the jets they check."""

from __future__ import annotations

import pytest

from jetastar import Jet
from jetastar._cuda import gpu_status
from jetastar.ginkgo import ShowerParams, generate

#: the GPU tests run on a GPU or in numba's CUDA simulator (tests/conftest.py switches it on)
NEEDS_GPU_OR_SIMULATOR = pytest.mark.skipif(
    not gpu_status()["available"], reason=f"no GPU and no CUDA simulator: {gpu_status()['reason']}"
)


def ginkgo_jet(n_leaves: int, kind: str = "qcd", seed: int = 11) -> Jet:
    """The first Ginkgo jet of ``seed`` with exactly ``n_leaves`` leaves (QCD or W)."""
    params = ShowerParams.qcd() if kind == "qcd" else ShowerParams.w()
    return generate(1, params, seed=seed, min_leaves=n_leaves, max_leaves=n_leaves)[0]
