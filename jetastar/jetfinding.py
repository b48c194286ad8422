"""Whole events -> jets, with FastJet (the optional ``fastjet`` package; jetastar finds no jets itself).

Example:
    >>> import numpy as np
    >>> p4 = np.array([[10.1, 10.0, 0.0, 1.0], [9.2, 9.0, 1.0, 1.0], [10.1, -10.0, 0.0, 1.0]])
    >>> jets = find_jets(p4, np.array([3]), r=0.4, ptmin=5.0)
    >>> jets.counts.tolist(), jets.jet_in_event.tolist(), jets.index.tolist()
    ([2, 1], [0, 1], [0, 1, 2])
    >>> bool(np.array_equal(jets.p4, p4[jets.index]))
    True
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from .errors import JetastarError

__all__ = ["FoundJets", "find_jets", "load_fastjet"]

_ALGORITHMS = {"antikt": "antikt_algorithm", "kt": "kt_algorithm",
               "cambridge": "cambridge_algorithm"}


@dataclasses.dataclass
class FoundJets:
    """Jets found in a batch of events.

    Attributes:
        p4: ``(M, 4)`` constituents ``(E, px, py, pz)``, jet after jet (each jet's constituents in
            their input order).
        counts: ``(J,)`` constituents per jet.
        event: ``(J,)`` position of each jet's event in the input.
        jet_in_event: ``(J,)`` rank of the jet in its event by decreasing pT (0 = hardest).
        index: ``(M,)`` position of each constituent in the input ``p4`` (``p4`` is
            ``input[index]``).
    """

    p4: np.ndarray
    counts: np.ndarray
    event: np.ndarray
    jet_in_event: np.ndarray
    index: np.ndarray


def load_fastjet() -> Any:
    """The ``fastjet`` module, or a :class:`~jetastar.JetastarError` saying how to install it
    (the command line asks before any file is read)."""
    try:
        import fastjet
    except ImportError:
        raise JetastarError(
            "finding jets in events needs FastJet: pip install 'jetastar[fastjet]' "
            "(or: pip install fastjet)"
        ) from None
    return fastjet


def find_jets(
    p4: np.ndarray, counts: np.ndarray, *, algorithm: str = "antikt", r: float = 0.4,
    ptmin: float = 0.0,
) -> FoundJets:
    """Cluster each event's particles into inclusive jets with FastJet (E-scheme).

    Args:
        p4: ``(M, 4)`` particles ``(E, px, py, pz)`` of all events, event after event.
        counts: ``(n_events,)`` particles per event.
        algorithm: ``"antikt"`` (default), ``"kt"`` or ``"cambridge"``.
        r: jet radius R.
        ptmin: keep jets with pT >= ``ptmin`` (GeV).

    Returns:
        :class:`FoundJets`, hardest jet of each event first.
    """
    import awkward as ak
    import vector

    if algorithm not in _ALGORITHMS:
        raise ValueError(f"unknown jet algorithm {algorithm!r}; use {', '.join(_ALGORITHMS)}")
    if not (math.isfinite(r) and r > 0):
        raise ValueError(f"the jet radius R must be > 0, got {r}")
    fastjet = load_fastjet()
    vector.register_awkward()
    counts = np.asarray(counts, dtype=np.int64)
    offsets = np.zeros(counts.shape[0] + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    empty = FoundJets(np.empty((0, 4)), np.empty(0, np.int64), np.empty(0, np.int64),
                      np.empty(0, np.int64), np.empty(0, np.int64))
    if counts.shape[0] == 0 or offsets[-1] == 0:
        return empty
    flat = ak.zip({"px": p4[:, 1], "py": p4[:, 2], "pz": p4[:, 3], "E": p4[:, 0]},
                  with_name="Momentum4D")
    events = ak.unflatten(flat, counts)
    jet_def = fastjet.JetDefinition(getattr(fastjet, _ALGORITHMS[algorithm]), float(r))
    sequence = fastjet.ClusterSequence(events, jet_def)
    jets = sequence.inclusive_jets(float(ptmin))
    index = sequence.constituent_index(float(ptmin))
    order = ak.argsort(jets.pt, axis=1, ascending=False, stable=True)
    index = ak.sort(index[order], axis=2)
    n_jets = ak.to_numpy(ak.num(index, axis=1)).astype(np.int64)
    if n_jets.sum() == 0:
        return empty
    per_jet = ak.to_numpy(ak.flatten(ak.num(index, axis=2), axis=1)).astype(np.int64)
    event = np.repeat(np.arange(counts.shape[0]), n_jets)
    local = ak.to_numpy(ak.flatten(index, axis=None)).astype(np.int64)
    glob = local + np.repeat(offsets[:-1][event], per_jet)
    first = np.zeros(n_jets.shape[0] + 1, np.int64)
    np.cumsum(n_jets, out=first[1:])
    rank = np.arange(event.shape[0]) - first[:-1][event]
    return FoundJets(np.ascontiguousarray(p4[glob]), per_jet, event, rank, glob)
