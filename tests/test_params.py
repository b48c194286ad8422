from __future__ import annotations

import math

import pytest

from jetastar import InvalidJetError
from jetastar.ginkgo import ShowerParams


def test_presets_equal_reference_defaults():
    q, w = ShowerParams.qcd(), ShowerParams.w()
    assert (q.m_hard, q.lam, q.lam_root, q.t_cut, q.t_root) == (30.0, 1.5, 1.5, 16.0, 900.0)
    assert (w.m_hard, w.lam, w.lam_root, w.t_cut, w.t_root) == (80.0, 1.5, 3.0, 16.0, 6400.0)
    for p, mass in ((q, 30.0), (w, 80.0)):
        e, px, py, pz = p.root_momentum
        assert math.isclose(px, 400 / math.sqrt(3)) and px == py == pz
        assert math.isclose(e, math.sqrt(400**2 + mass**2))
    assert q.jet_type == "QCD" and w.jet_type == "W"


def test_overrides_and_replace():
    p = ShowerParams.qcd(t_cut=1.0, lam=2.0)
    assert p.t_cut == 1.0 and p.lam == 2.0 and p.lam_root == 1.5
    r = p.replace(m_hard=40.0)
    assert r.t_root == 1600.0
    custom = ShowerParams(m_hard=30.0, lam=1.5, lam_root=1.5, t_cut=16.0,
                          root_momentum=(50.0, 0.0, 0.0, 40.0))
    assert custom.root_momentum == (50.0, 0.0, 0.0, 40.0) and custom.t_root == 900.0
    assert ShowerParams.from_dict(p.to_dict()) == p
    assert ShowerParams.preset("W") == ShowerParams.w()


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"lam": 0.0}, "params.lam"),
        ({"lam_root": -1.0}, "params.lam_root"),
        ({"t_cut": math.nan}, "params.t_cut"),
        ({"t_cut": 900.0}, "params.t_cut"),
        ({"m_hard": "heavy"}, "params.m_hard"),
        ({"root_momentum": (10.0, 0.0, 0.0, 20.0)}, "params.root_momentum"),
        ({"root_momentum": (-50.0, 0.0, 0.0, 1.0)}, "params.root_momentum"),
        ({"root_momentum": (1.0, 2.0)}, "params.root_momentum"),
        ({"t_root": -4.0}, "params.t_root"),
    ],
)
def test_invalid_parameters(kwargs, field):
    with pytest.raises(InvalidJetError, match=field.replace(".", r"\.")):
        ShowerParams.qcd(**kwargs)


def test_unknown_preset_and_keys():
    with pytest.raises(InvalidJetError, match="valid: 'qcd', 'w'"):
        ShowerParams.preset("top")
    with pytest.raises(InvalidJetError, match="unknown keys"):
        ShowerParams.from_dict({"t_cut": 16.0, "colour": "red"})
