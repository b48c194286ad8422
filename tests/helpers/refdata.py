"""Loaders for the reference numbers in ``tests/data`` (copied from the public reference code's outputs)."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import numpy as np

from jetastar import Jet, Tree
from jetastar.ginkgo import ShowerParams

DATA = Path(__file__).parents[1] / "data"


@functools.cache
def _load(name: str) -> Any:
    with open(DATA / name) as f:
        return json.load(f)


def split_cases() -> list[dict[str, Any]]:
    """Single-split cases (``ginkgo_split_cases.json``)."""
    return _load("ginkgo_split_cases.json")["cases"]


def reference_jet_records() -> list[dict[str, Any]]:
    """Raw records of ``ginkgo_reference_jets.json``."""
    return _load("ginkgo_reference_jets.json")["jets"]


def baseline_records() -> list[dict[str, Any]]:
    """Raw records of ``baseline_reference.json`` (legacy likelihood, QCD)."""
    return _load("baseline_reference.json")["jets"]


def params_from_record(params: dict[str, Any], jet_type: str) -> ShowerParams:
    """ShowerParams of a reference record (``ginkgo_reference_jets`` or ``baseline_reference``)."""
    t_cut = params.get("t_cut", params.get("pt_cut"))
    root = params.get("root_4vec")
    m_hard = params.get("M_hard", params.get("M_Hard", 30.0))
    return ShowerParams(
        m_hard=m_hard,
        lam=params["Lambda"],
        lam_root=params["LambdaRoot"],
        t_cut=t_cut,
        t_root=params.get("Delta_0", m_hard**2),
        root_momentum=root,
        jet_type=jet_type,
    )


def jet_from_record(rec: dict[str, Any], **param_overrides: Any) -> Jet:
    """A :class:`Jet` (truth tree and node momenta when present) from a reference record."""
    params = params_from_record(rec["params"], rec.get("jetType", "QCD"))
    if param_overrides:
        params = params.replace(**param_overrides)
    truth = None
    node_momenta = None
    if "tree" in rec:
        truth = Tree.from_children(np.asarray(rec["tree"]))
        node_momenta = np.asarray(rec["content"], dtype=np.float64)
    return Jet(
        np.asarray(rec["leaves"], dtype=np.float64),
        params,
        truth,
        node_momenta,
        jet_id=rec.get("seed"),
        jet_type=rec.get("jetType", "QCD"),
    )


def reference_jets(max_leaves: int | None = None, with_map: bool = False) -> list[tuple[dict, Jet]]:
    """(record, Jet) pairs of the reference jets, optionally filtered."""
    out = []
    for rec in reference_jet_records():
        if max_leaves is not None and rec["n_leaves"] > max_leaves:
            continue
        if with_map and "map" not in rec:
            continue
        out.append((rec, jet_from_record(rec)))
    return out


def close(a: float, b: float, rel: float) -> bool:
    """Equal within ``rel`` relative tolerance, with -inf only equal to -inf."""
    if np.isinf(a) or np.isinf(b):
        return a == b
    return abs(a - b) <= rel * max(1.0, abs(a), abs(b))
