"""The result type shared by every clustering algorithm.

Example:
    >>> from jetastar import Tree
    >>> from jetastar.clustering import ClusteringResult
    >>> r = ClusteringResult(Tree.from_nested((0, 1)), -3.5, algorithm="greedy")
    >>> r.cost
    3.5

Results are frozen: :func:`dataclasses.replace` makes a changed copy.

    >>> import dataclasses
    >>> dataclasses.replace(r, jet_id=7).jet_id
    7
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from ..tree import Tree

__all__ = ["STATUSES", "ClusteringResult"]

#: Possible values of :attr:`ClusteringResult.status`.
STATUSES = (
    "ok",  # finished normally
    "all_inf",  # its tree is −∞ (exact methods: no tree is possible; approximate: a split on
    # its own path is impossible, other trees may be finite)
    "budget",  # stopped by a time / memory / vertex budget: best tree so far, not proven optimal
    "skipped",  # not run (e.g. the jet is over the method's size limit); tree is None
    "failed",  # the jet could not be processed; message says why; tree is None
)


@dataclasses.dataclass(frozen=True, eq=False)
class ClusteringResult:
    """What a clustering algorithm returns for one jet (frozen: change a copy with
    :func:`dataclasses.replace`).

    Args:
        tree: the hierarchy found (``None`` only for ``"skipped"`` / ``"failed"``).
        log_likelihood: its log-likelihood: ``-inf`` when every tree is impossible (status
            ``"all_inf"``), and for a ``"skipped"`` / ``"failed"`` result, which has no tree (a
            results table stores NaN there; the status tells the two apart, never NaN here).
        algorithm: registry key of the algorithm (``"greedy"``, ``"trellis"``, ...; older labels
            map to it through :func:`jetastar.clustering.registry.canonical_name`). The cost-model
            baseline :func:`~jetastar.clustering.average_linkage`, which takes no jet and is not
            registered, labels its results ``"average_linkage"``.
        exact: ``True`` only when the tree is proven to be a MAP tree.
        likelihood: the likelihood form used (``"symmetric"`` or ``"legacy"``).
        options: the options the algorithm ran with (JSON-serialisable values).
        stats: counters (``splits_evaluated``, ``vertices_explored``, ...) and ``time_s`` (run
            time: compiling kernels is not counted).
        log_z: log partition function when known (exact trellis).
        n_trees: number of trees with non-zero likelihood when known.
        upper_bound: a proven upper bound on the MAP log-likelihood when known (e.g. A* stopped
            by a budget); equals ``log_likelihood`` for exact results.
        beam: for beam search, the distinct complete trees of the final beam, best first.
        status: one of :data:`STATUSES`.
        message: human-readable detail for a non-``"ok"`` status.
        jet_id: the id of the jet, when known.
    """

    tree: Tree | None
    log_likelihood: float
    algorithm: str
    exact: bool = False
    likelihood: str = "symmetric"
    options: dict[str, Any] = dataclasses.field(default_factory=dict)
    stats: dict[str, Any] = dataclasses.field(default_factory=dict)
    log_z: float | None = None
    n_trees: int | float | None = None
    upper_bound: float | None = None
    beam: list[ClusteringResult] | None = None
    status: str = "ok"
    message: str = ""
    jet_id: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "log_likelihood", float(self.log_likelihood))
        if math.isnan(self.log_likelihood):
            raise ValueError("a clustering result's log-likelihood is never NaN")
        if self.status not in STATUSES:
            raise ValueError(f"unknown status {self.status!r}; valid: {STATUSES}")

    @property
    def cost(self) -> float:
        """``-log_likelihood`` (lower is better)."""
        return -self.log_likelihood

    @property
    def time_s(self) -> float | None:
        """Run time in seconds (``stats["time_s"]``), if recorded: the wall time of the call
        without the time numba spent compiling or loading kernels (see :mod:`jetastar._jit`)."""
        value = self.stats.get("time_s")
        return None if value is None else float(value)

    def __repr__(self) -> str:
        extra = "" if self.status == "ok" else f", status={self.status!r}"
        t = self.time_s
        return (
            f"ClusteringResult({self.algorithm!r}, log_likelihood={self.log_likelihood:.6g}, "
            f"exact={self.exact}{'' if t is None else f', time_s={t:.3g}'}{extra})"
        )
