"""Parameters of the Ginkgo toy parton shower.

Units: GeV for masses, energies and momenta; GeV² for squared masses (``t_cut``, ``t_root``).

Example:
    >>> from jetastar.ginkgo import ShowerParams
    >>> ShowerParams.w().lam_root
    3.0
    >>> ShowerParams.qcd(t_cut=1.0).t_cut
    1.0
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import InvalidJetError

__all__ = ["ShowerParams", "default_root_momentum"]

#: |p| of the reference jets (GeV) and their direction.
_JET_P = 400.0
_JET_DIR = np.ones(3) / math.sqrt(3.0)


def default_root_momentum(m_hard: float, p: float = _JET_P) -> tuple[float, float, float, float]:
    """Root 4-vector of the reference jets: ``|p|`` along ``(1, 1, 1)`` with mass ``m_hard``.

    Args:
        m_hard: root mass in GeV.
        p: magnitude of the 3-momentum in GeV (400 by default).

    Returns:
        ``(E, px, py, pz)`` in GeV.
    """
    e = math.sqrt(p * p + m_hard * m_hard)
    px, py, pz = (float(x) for x in p * _JET_DIR)
    return (e, px, py, pz)


@dataclasses.dataclass(frozen=True)
class ShowerParams:
    """Parameters of one Ginkgo shower.

    Args:
        m_hard: mass of the root (GeV); ``t_root`` defaults to ``m_hard**2``.
        lam: rate ``λ`` of the truncated-exponential draws at every split but the root.
        lam_root: rate ``λ_R`` at the root split.
        t_cut: squared-mass cut (GeV²): a node with ``t <= t_cut`` is a leaf.
        root_momentum: root 4-vector ``(E, px, py, pz)``; default 400 GeV along ``(1, 1, 1)`` with
            mass ``m_hard``.
        t_root: nominal squared mass of the root (GeV²), default ``m_hard**2``.
        jet_type: a label stored with generated jets (``"QCD"``, ``"W"`` or any string).

    Raises:
        InvalidJetError: on non-finite or non-positive rates, masses or cuts, ``t_cut >= t_root``,
            or a root 4-vector that is not future-directed timelike.
    """

    m_hard: float = 30.0
    lam: float = 1.5
    lam_root: float = 1.5
    t_cut: float = 16.0
    root_momentum: tuple[float, float, float, float] | None = None
    t_root: float | None = None
    jet_type: str = "custom"

    def __post_init__(self) -> None:
        for name in ("m_hard", "lam", "lam_root", "t_cut"):
            value = getattr(self, name)
            try:
                value = float(value)
            except (TypeError, ValueError) as exc:
                raise InvalidJetError(
                    f"must be a number, got {value!r}", field=f"params.{name}"
                ) from exc
            if not math.isfinite(value) or value <= 0.0:
                raise InvalidJetError(
                    f"must be finite and > 0, got {value!r}", field=f"params.{name}"
                )
            object.__setattr__(self, name, value)
        t_root = self.m_hard**2 if self.t_root is None else float(self.t_root)
        if not math.isfinite(t_root) or t_root <= 0.0:
            raise InvalidJetError(f"must be finite and > 0, got {t_root!r}", field="params.t_root")
        object.__setattr__(self, "t_root", t_root)
        if not self.t_cut < t_root:
            raise InvalidJetError(
                f"t_cut = {self.t_cut} GeV² must be below the root t = {t_root} GeV² "
                "(otherwise the root never splits)",
                field="params.t_cut",
            )
        root = (
            default_root_momentum(self.m_hard)
            if self.root_momentum is None
            else tuple(float(x) for x in np.asarray(self.root_momentum, dtype=np.float64).ravel())
        )
        if len(root) != 4 or not all(math.isfinite(x) for x in root):
            raise InvalidJetError(
                f"must be 4 finite numbers (E, px, py, pz), got {self.root_momentum!r}",
                field="params.root_momentum",
            )
        e, px, py, pz = root
        if e <= 0.0 or e * e - (px * px + py * py + pz * pz) <= 0.0:
            raise InvalidJetError(
                f"must be a future-directed timelike 4-vector, got {root}",
                field="params.root_momentum",
            )
        object.__setattr__(self, "root_momentum", root)
        object.__setattr__(self, "jet_type", str(self.jet_type))

    # ------------------------------------------------------------------ presets
    @classmethod
    def qcd(cls, **overrides: Any) -> ShowerParams:
        """Reference QCD-jet defaults: M_hard 30 GeV, λ = λ_R = 1.5, t_cut 16 GeV², 400 GeV jet.

        Args:
            **overrides: any field to change (e.g. ``t_cut=1.0`` for larger jets).
        """
        values: dict[str, Any] = {
            "m_hard": 30.0, "lam": 1.5, "lam_root": 1.5, "t_cut": 16.0, "jet_type": "QCD"
        }
        values.update(overrides)
        return cls(**values)

    @classmethod
    def w(cls, **overrides: Any) -> ShowerParams:
        """Reference W-jet defaults: M_hard 80 GeV, λ_R = 3.0, λ = 1.5, t_cut 16 GeV², 400 GeV jet.

        Args:
            **overrides: any field to change.
        """
        values: dict[str, Any] = {
            "m_hard": 80.0, "lam": 1.5, "lam_root": 3.0, "t_cut": 16.0, "jet_type": "W"
        }
        values.update(overrides)
        return cls(**values)

    @classmethod
    def preset(cls, jet_type: str, **overrides: Any) -> ShowerParams:
        """The preset for ``"qcd"`` or ``"w"`` (case-insensitive)."""
        key = str(jet_type).lower()
        if key == "qcd":
            return cls.qcd(**overrides)
        if key == "w":
            return cls.w(**overrides)
        raise InvalidJetError(f"unknown jet type {jet_type!r}; valid: 'qcd', 'w'", field="type")

    # ------------------------------------------------------------------ helpers
    def replace(self, **changes: Any) -> ShowerParams:
        """A copy with some fields changed (validated again)."""
        if "m_hard" in changes and "t_root" not in changes:
            changes["t_root"] = None
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """Plain-Python dictionary (JSON-serialisable)."""
        d = dataclasses.asdict(self)
        d["root_momentum"] = list(self.root_momentum)  # type: ignore[arg-type]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ShowerParams:
        """Inverse of :meth:`to_dict`; unknown keys raise."""
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - fields
        if unknown:
            raise InvalidJetError(
                f"unknown keys {sorted(unknown)}; valid: {sorted(fields)}", field="params"
            )
        return cls(**dict(d))
