"""A* search on the cluster trellis: certified-exact MAP trees, and an approximate sparse variant.

The algorithm is the one of the A* clustering paper (Algorithm 1): a state is a partial hierarchy
encoded as paths in a lazily built trellis; every explored trellis vertex holds a min-heap of its
splits with a lower bound ``f`` on the cost (−log-likelihood) of the best sub-hierarchy that starts
with that split; each iteration walks the current best partial tree from the root, explores all of
its open (frontier) clusters, and refreshes the walked heaps bottom-up. The search stops when the best
partial tree is complete.

:func:`astar` (exact) explores every 2-partition of a vertex and uses the admissible heuristic
``h0`` (:mod:`jetastar.ginkgo.heuristics`), so its tree is a proven MAP tree (``exact=True``).
Refinements that keep the optimality proof:

* *pathmax*: a child's bound is ``max(h(child), f(best entry of child))``, both valid, so values never
  decrease and stale heap entries stay valid lower bounds;
* *solved vertices*: a vertex whose best entry is complete has its exact optimum (every other entry
  is a lower bound at least as large); it is frozen and never walked again;
* *tie-breaking*: equal ``f`` prefers complete entries (no re-expansion of solved ties);
* *exact small clusters*: ``h0`` is exact on clusters of up to ``EXACT_MAX_LEAVES`` (5) leaves (a
  subset DP; 3 leaves for ``h1``), so they are solved when created and never explored; clusters that
  no finite tree can cover (``h = −∞``, e.g. ``t ≤ t_cut``) are dead at once and their splits are
  never stored.

Memory: 24 bytes per stored split (``f`` as float64; child ids and heap positions as int32; ψ is
recomputed when an entry is refreshed) plus ~140 bytes per vertex; exact searches on up to 24
leaves index vertices by bit mask. Arrays grow in place (``ndarray.resize``), and near the budget
they grow once to what it allows, so the budget is the peak of the search arrays.

Speed: scoring a split reads one 64-byte row per child (its ``t``, current lower bound and solved
value, kept up to date whenever the child's state or heap top changes), never the child's heap; the
parent's part of ψ is computed once per vertex, and splits are scored in chunks by a kernel without
per-split reference counting. About 170–220 ns per split at 16–18 leaves on one core (the trellis
scores a split in ~30–45 ns on two), plus the heuristic of every new vertex (~20 µs).

With a budget (``max_time``, ``max_vertices``, ``max_memory``) the search stops early and returns
the best complete tree it can build (the current best partial tree completed greedily, or the greedy
tree) together with the proven upper bound on the MAP log-likelihood (``upper_bound``), flagged
``status="budget"``, ``exact=False``.

:func:`astar_approx` runs the same machine on a *sparse* trellis seeded with every tree of a beam
search, the greedy tree and any user trees. Clusters with at most ``all_pairs_max_size`` leaves get
all their 2-partitions — equivalently their exact optimum, computed on demand by a local subset DP;
larger vertices get ``n_samples`` random 2-partitions of which the ``top_k`` with the best split
likelihood are kept (plus every split already known there, e.g. from the seeds); the root of a jet
with at most 16 leaves gets all its 2-partitions, and such a jet's small clusters are valued from one
subset DP over the whole jet (instead of one DP per cluster). The search is a
weighted A* (heuristic cost × ``weight``) capped at ``max_explored`` explored vertices per round; a
round ends with the best complete tree represented in the explored trellis (a DP over heap entries
and candidate splits, seeds included). Rounds re-run A* on the growing trellis with fresh samples
(paper §4); the result never decreases from round to round and is never below the best seed tree.

Example:
    >>> from jetastar.ginkgo import ShowerParams, generate
    >>> from jetastar.clustering import astar, exact_trellis
    >>> jet = generate(1, ShowerParams.qcd(), seed=5, min_leaves=8, max_leaves=8)[0]
    >>> res = astar(jet)
    >>> res.exact, abs(res.log_likelihood - exact_trellis(jet).log_likelihood) < 1e-9
    (True, True)
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ..._jit import Stopwatch
from ..._progress import ProgressBar
from ...costs import CostModel
from ...errors import InvalidJetError, TooLargeError
from ...ginkgo.heuristics import (
    EXACT_MAX_LEAVES,
    HEURISTICS,
    bound_value,
    check_heuristic,
    heuristic_tables,
    root_rate_slack,
)
from ...ginkgo.likelihood import BOUNDED_LIKELIHOODS, log_likelihood
from ...jet import Jet
from ...tree import Tree
from .._engine import bounded_likelihood, check_budget, format_bytes, search_progress
from ..agglomerative.cost_baselines import average_linkage
from ..agglomerative.greedy import greedy
from ..options import Option, anything, choice, flag, integer, likelihood_option, number
from ..registry import AlgorithmInfo, WarmUp, register
from ..result import ClusteringResult
from ..search.beam import beam_search, default_beam_size
from . import _astar_kernels as _k

__all__ = ["ASTAR", "ASTAR_APPROX", "MAX_ASTAR_LEAVES", "astar", "astar_approx"]

#: Largest jet the A* kernels accept (128-bit cluster masks).
MAX_ASTAR_LEAVES = 128

#: Split evaluations between two returns of the kernel to Python (time checks, progress).
_QUOTA = 1 << 18
#: Time kept back from a ``max_time`` for reading the result out (:meth:`_Search.finish_seconds`):
#: a share of the budget plus, per recorded vertex, a little more than best_known takes (0.5 µs
#: of CPU per vertex measured on 20-65 leaves; twice that wall time on a busy node)
_FINISH_SHARE = 0.03
_FINISH_PER_VERTEX = 1.0e-6
#: ... and per split of the local DPs of small unexplored clusters (1-2 ns of CPU measured, an
#: upper estimate: not every such cluster is reached)
_FINISH_PER_DP_SPLIT = 4.0e-9
#: A lower estimate of the seconds exact A* spends per split of the root when it expands it (each
#: child is scored with h0): about half the least measured, 15-43 µs per split on W and QCD jets of
#: 10-20 leaves (2026-11-28, growing with the jet). When a budget still runs out during the
#: expansion, the result carries the bound of the whole jet (:func:`_whole_bound`).
_ROOT_SECONDS_PER_SPLIT = 8.0e-6
#: Seconds per split of astar_approx's up-front subset DP of a small jet's small clusters (33 ns
#: measured: 0.19 s for the 5.6 million splits of 16 leaves up to 9, 2026-11-28).
_SMALL_TABLE_SECONDS_PER_SPLIT = 30e-9
#: The smallest quota when a time budget shortens the calls.
_MIN_QUOTA = 1 << 10
#: Exact searches on at most this many leaves use a direct mask -> vertex table (8 * 2**n bytes).
_DIRECT_MAX = 24
#: Bytes per heap entry: ``ef`` (f) float64, ``ei`` (left, right, complete) and ``hp`` int32.
_ENTRY_BYTES = 8 + 4 * 3 + 4
#: Entry and vertex ids are int32 in the heap arrays.
_MAX_IDS = 2**31 - 1
_VERTEX_BYTES = 8 * 7 + 8 * 7 + 2 * 8
_CAND_BYTES = 8 * 3


def _grow(a: np.ndarray, rows: int) -> None:
    """Enlarge ``a`` in place to ``rows`` rows; new rows are zero.

    ``ndarray.resize`` reallocates the buffer (on Linux, large blocks are moved by remapping pages
    rather than copied), so growing never holds the old and the new array at once. No views of
    the search arrays exist (the reference-count check would still count the search object and
    this argument, hence ``refcheck=False``).
    """
    a.resize((rows, *a.shape[1:]), refcheck=False)


# approximate A* defaults (documented in astar_approx)
DEFAULT_ALL_PAIRS_MAX_SIZE = 9
DEFAULT_N_SAMPLES = 100
DEFAULT_TOP_K = 8
DEFAULT_ROUNDS = 4
DEFAULT_PATIENCE = 1
DEFAULT_WEIGHT = 1.15
DEFAULT_MAX_EXPLORED = 1500
#: approximate A* defaults that differ for cost models (tuned on the ALOI samples, n = 30-60: their
#: admissible heuristics are tight enough for plain A*, and ranking sampled splits by their estimated
#: value finds better trees than ranking by split cost alone)
COST_DEFAULTS = {"top_k": 10, "n_samples": 300, "rounds": 10, "patience": 3, "weight": 1.0,
                 "rank": "estimate"}
JET_DEFAULTS = {"top_k": DEFAULT_TOP_K, "n_samples": DEFAULT_N_SAMPLES, "rounds": DEFAULT_ROUNDS,
                "patience": DEFAULT_PATIENCE, "weight": DEFAULT_WEIGHT, "rank": "split"}
_ROOT_ALL_MAX = 16
_SMALL_JET_ALL_PAIRS = 12


#: With a ``max_time`` (and no ``beam_size``), the share of it that seeding with beam search may use.
_SEED_SHARE = 0.25
#: Beam size of the timing probe of :func:`_beam_size_within`.
_PROBE_BEAM = 8


def _beam_size_within(problem: _Problem, seconds: float) -> int:
    """The largest beam size (at most the default) whose seeding (beam search and reading the
    splits of its trees) should take about ``seconds``, from a probe with a small beam: a beam of
    1000 on 80 leaves takes seconds, more than a short ``max_time``."""
    n = problem.n
    full = default_beam_size(n)
    if full <= _PROBE_BEAM:
        return full
    watch = Stopwatch()
    probe = beam_search(problem.jet, beam_size=_PROBE_BEAM, likelihood=problem.likelihood)
    for r in probe.beam or [probe]:
        if r.tree is not None:
            _tree_splits(r.tree)
    per_tree = max(watch.seconds(), 1e-6) / _PROBE_BEAM
    return int(min(full, max(_PROBE_BEAM, seconds / per_tree)))


def _quota_within(quota: int, done: int, seconds: float, left: float, max_time: float) -> int:
    """The split quota of the next kernel call under a time budget: at the measured rate, a call
    takes at most 5 % of ``max_time`` and half of what is ``left`` (kernel calls of large jets
    otherwise take tenths of a second, past a short budget)."""
    if done <= 0 or seconds <= 0.0:
        return quota
    target = min(0.05 * max_time, 0.5 * max(left, 0.0))
    return int(min(_QUOTA, max(_MIN_QUOTA, done / seconds * target)))


def _default_memory() -> int:
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = 8 << 30
    return int(min(total // 3, 8 << 30))


#: The heuristic of a cost model (its admissible bound, see :mod:`jetastar.costs`).
COST_HEURISTIC = "admissible"


class _Problem:
    """What an A* search is over: a jet under a likelihood form, or a cost model.

    Holds the kernel tables ``(p, tl, mt, w, d, consts, phys, cm)`` (see
    :mod:`jetastar.clustering._astar_kernels`), the model code and how to score a tree.
    """

    def __init__(self, target: Any, likelihood: str | None, heuristic: str | None,
                 default_heuristic: str) -> None:
        if isinstance(target, CostModel):
            if likelihood is not None and likelihood != target.name:
                raise ValueError(
                    f"{target.label}: a cost model has no likelihood option (got likelihood="
                    f"{likelihood!r}); A* scores its splits with -cost"
                )
            if heuristic not in (None, COST_HEURISTIC, "h0"):
                raise ValueError(
                    f"{target.label}: a cost model has one heuristic, its admissible bound "
                    f"({COST_HEURISTIC!r}); got heuristic={heuristic!r}"
                )
            n = target.n_points
            self.jet: Jet | None = None
            self.cost_model: CostModel | None = target
            self.n = n
            self.label: object = target.label
            self.who = target.label
            self.jet_id = None
            self.likelihood = target.name
            self.heuristic = COST_HEURISTIC
            self.kind = 0
            self.code = int(target.code)
            placeholder = np.zeros((n, 4))
            # read-only, as a jet's leaves are: jets and cost models share one compiled A* (a
            # writable array here made numba compile every A* kernel again, ~40 s on first use)
            placeholder.flags.writeable = False
            self.tables = (
                placeholder, np.zeros(n), np.zeros(n), np.zeros((n, n)), np.zeros((n, n)),
                np.zeros((2, 5)), np.ones(1, dtype=np.int64),
                np.ascontiguousarray(np.stack(
                    [target.positive_weights, target.negative_weights, target.weights])),
            )
        elif isinstance(target, Jet):
            likelihood = bounded_likelihood(likelihood, "A*")
            heuristic = default_heuristic if heuristic is None else heuristic
            self.kind = check_heuristic(heuristic)
            self.jet = target
            self.cost_model = None
            self.n = n = target.n_leaves
            self.label = target.label
            self.who = f"jet {target.label}"
            self.jet_id = target.jet_id
            self.likelihood = likelihood
            self.heuristic = heuristic
            self.code = 0
            self.tables = (*heuristic_tables(target, likelihood), np.zeros((3, 1, 1)))
        else:
            raise InvalidJetError(
                "A* needs a jetastar.Jet or a cost model (jetastar.costs.HCCCost, DasguptaCost), "
                f"got {type(target).__name__}", field="jet",
            )
        if n > MAX_ASTAR_LEAVES:
            raise TooLargeError(
                f"{self.who}: {n} {self.unit}, A* handles at most {MAX_ASTAR_LEAVES}"
            )

    @property
    def unit(self) -> str:
        return "leaves" if self.jet is not None else "points"

    def score(self, tree: Tree) -> float:
        """Log-likelihood of a tree (minus its cost for a cost model)."""
        if self.cost_model is not None:
            return -self.cost_model.tree_cost(tree)
        return float(log_likelihood(self.jet, tree, likelihood=self.likelihood))

    def baselines(self) -> list[ClusteringResult]:
        """Cheap complete trees: greedy (and average linkage for a cost model)."""
        if self.cost_model is not None:
            return [average_linkage(self.cost_model), greedy(self.cost_model)]
        return [greedy(self.jet, likelihood=self.likelihood)]

    def nothing_finite(self) -> str:
        return f"every tree of {self.who} has likelihood zero"


def _mask_words(leaves: Iterable[int]) -> tuple[int, int]:
    lo = 0
    hi = 0
    for i in leaves:
        if i < 64:
            lo |= 1 << i
        else:
            hi |= 1 << (i - 64)
    return _signed(lo), _signed(hi)


def _signed(x: int) -> int:
    return x - (1 << 64) if x >= (1 << 63) else x


def _unsigned(x: int) -> int:
    return x + (1 << 64) if x < 0 else x


def _leaves_of(lo: int, hi: int) -> list[int]:
    a = _unsigned(int(lo))
    b = _unsigned(int(hi))
    out = [i for i in range(64) if a >> i & 1]
    out += [64 + i for i in range(64) if b >> i & 1]
    return out


class _Search:
    """State of one A* search (arrays owned by Python, advanced by the numba kernels)."""

    def __init__(
        self,
        problem: _Problem,
        all_max: int,
        n_samples: int,
        top_k: int,
        max_vertices: int | None,
        max_memory: int,
        weight: float = 1.0,
        dp_max: int = 0,
    ) -> None:
        self.problem = problem
        self.n = n = problem.n
        self.tables = problem.tables
        self.max_vertices = max_vertices
        self.max_memory = max_memory
        vcap = 1 << 12
        ecap = 1 << 14
        self.vf = np.zeros((vcap, _k.N_VF))
        self.vi = np.zeros((vcap, _k.N_VI), dtype=np.int64)
        # exact searches on up to _DIRECT_MAX leaves index vertices by mask (odd-sized table)
        self.direct = all_max < 0 and n <= _DIRECT_MAX
        self.ht = np.full((1 << n) + 1 if self.direct else 2 * vcap, -1, dtype=np.int64)
        self.ef = np.zeros((ecap, 1))
        self.ei = np.zeros((ecap, 3), dtype=np.int32)
        self.hp = np.zeros(ecap, dtype=np.int32)
        self.cp = np.zeros((1 << 10, 3), dtype=np.int64)
        self.ctr = np.zeros(_k.N_CTR, dtype=np.int64)
        # exact values of the small clusters of a small jet (approximate search only), by mask
        self.small_table = np.zeros(0)
        self.walk = np.zeros(2 * n + 8, dtype=np.int64)
        self.front = np.zeros(2 * n + 8, dtype=np.int64)
        self.scratch = np.zeros(max(2 * n + 8, 256), dtype=np.int64)
        self.elems = np.zeros(128, dtype=np.int64)
        self.ip = np.zeros(_k.N_IP, dtype=np.int64)
        self.ip[_k.P_KIND] = problem.kind
        self.ip[_k.P_MODEL] = problem.code
        self.ip[_k.P_ALLMAX] = all_max
        self.ip[_k.P_NSAMPLES] = n_samples
        self.ip[_k.P_TOPK] = top_k
        self.ip[_k.P_N] = n
        # h0 is exact up to EXACT_MAX_LEAVES leaves (a small DP), h1 / paper up to 3, a cost
        # heuristic on pairs: such clusters are solved when they are created
        if problem.code != 0:
            self.ip[_k.P_SMALL] = 2
        else:
            self.ip[_k.P_SMALL] = EXACT_MAX_LEAVES if problem.kind == 0 else 3
        self.ip[_k.P_WEIGHT] = round(weight * 1_000_000)
        self.ip[_k.P_EXPLORE_MAX] = 0
        self.ip[_k.P_DPMAX] = dp_max
        lo, hi = _mask_words(range(n))
        root = _k.new_vertex(lo, hi, self.vf, self.vi, self.ht, self.ctr, self.ip, *self.tables,
                             self.scratch)
        # the root is scored with λ_R by exploring it, never by the (inner-λ) heuristic
        self.vi[root, _k.V_STATE] = _k.UNEXPLORED
        self.vf[root, _k.V_VAL] = math.inf
        self.vf[root, _k.V_LB] = self.vf[root, _k.V_H]
        self.ctr[_k.C_ROOT] = root

    # ------------------------------------------------------------------ sizes
    def memory(self) -> int:
        return sum(a.nbytes for a in (self.vf, self.vi, self.ht, self.ef, self.ei, self.hp,
                                      self.cp))

    def _grow_vertices(self, need: int) -> bool:
        nv = int(self.ctr[_k.C_NV])
        if self.max_vertices is not None and nv + need > self.max_vertices:
            return False
        cap = self.vf.shape[0]
        new = min(max(2 * cap, nv + need + 16), _MAX_IDS)
        if new < nv + need + 16:
            return False
        extra = (new - cap) * (_VERTEX_BYTES + 16)
        if self.memory() + extra > self.max_memory:
            return False
        _grow(self.vf, new)
        _grow(self.vi, new)
        return self._rehash()

    def _rehash(self) -> bool:
        if self.direct:
            return True
        cap = self.ht.shape[0]
        while cap < 2 * self.vf.shape[0]:
            cap *= 2
        if self.memory() + 8 * (cap - self.ht.shape[0]) > self.max_memory:
            return False
        self.ht = np.full(cap, -1, dtype=np.int64)
        _k.rehash(self.vi, int(self.ctr[_k.C_NV]), self.ht)
        return True

    def _grow_entries(self, need: int) -> bool:
        ne = int(self.ctr[_k.C_NE])
        cap = self.ef.shape[0]
        want = ne + need + 16
        # the largest capacity the budget allows; near it, grow once to that instead of by `need`
        room = min(cap + (self.max_memory - self.memory()) // _ENTRY_BYTES, _MAX_IDS)
        if want > room:
            return False
        new = min(max(2 * cap, want), room)
        _grow(self.ef, new)
        _grow(self.ei, new)
        _grow(self.hp, new)
        return True

    def _grow_cands(self, need: int) -> bool:
        cap = self.cp.shape[0]
        new = max(2 * cap, int(self.ctr[_k.C_NCAND]) + need + 16)
        if self.memory() + (new - cap) * _CAND_BYTES > self.max_memory:
            return False
        _grow(self.cp, new)
        return True

    # ------------------------------------------------------------------ running
    def add_splits(self, splits: np.ndarray) -> None:
        """Register seed splits (rows ``par_lo, par_hi, l_lo, l_hi``)."""
        if splits.shape[0] == 0:
            return
        need = 3 * splits.shape[0]
        while self.ctr[_k.C_NV] + need >= self.vf.shape[0]:
            if not self._grow_vertices(need):
                raise MemoryError("the seed trees do not fit in the memory budget")
        while self.ctr[_k.C_NCAND] + splits.shape[0] >= self.cp.shape[0]:
            if not self._grow_cands(splits.shape[0]):
                raise MemoryError("the seed trees do not fit in the memory budget")
        _k.add_splits(
            np.ascontiguousarray(splits[:, 0]), np.ascontiguousarray(splits[:, 1]),
            np.ascontiguousarray(splits[:, 2]), np.ascontiguousarray(splits[:, 3]),
            self.vf, self.vi, self.ht, self.cp, self.ctr, self.ip, *self.tables, self.scratch,
        )

    def run(
        self, watch: Stopwatch, max_time: float | None, bar: ProgressBar | None = None,
        tick: bool = False,
    ) -> str:
        """Run until solved ("solved"), impossible ("all_inf") or out of budget ("budget").

        The time budget ``max_time`` is checked against ``watch.seconds()`` (run time: numba
        compiling a kernel for the first time does not use it up).
        ``bar`` gets the search counters after every kernel return, and one step each when
        ``tick`` (exact A*: a step per update; approximate A* counts rounds itself).
        """
        quota = _QUOTA if max_time is None else _MIN_QUOTA  # grows at the measured rate
        while True:
            splits_before, t_before = int(self.ctr[_k.C_SPLITS]), watch.seconds()
            st = _k.run(
                quota, self.vf, self.vi, self.ht, self.ef, self.ei, self.hp, self.cp, self.ctr,
                self.walk, self.front, self.ip, *self.tables, self.scratch, self.elems,
                self.small_table,
            )
            if st == _k.ST_SOLVED:
                return "solved"
            if st == _k.ST_ALLINF:
                return "all_inf"
            if st == _k.ST_EXPLORE:
                return "explore"
            if max_time is not None:
                done, took = int(self.ctr[_k.C_SPLITS]) - splits_before, watch.seconds() - t_before
                quota = _quota_within(quota, done, took, max_time - watch.seconds(), max_time)
            need = int(self.ctr[_k.C_NEED])
            ok = True
            if st == _k.ST_NEED_V:
                ok = self._grow_vertices(max(need, 2))
            elif st == _k.ST_NEED_H:
                ok = self._rehash() if self.ht.shape[0] < 2 * self.vf.shape[0] else (
                    self._grow_vertices(2)
                )
            elif st == _k.ST_NEED_E:
                ok = self._grow_entries(need)
            elif st == _k.ST_NEED_C:
                ok = self._grow_cands(need)
            if not ok:
                self.budget_reason = "memory" if self.max_vertices is None or (
                    self.ctr[_k.C_NV] + 2 <= self.max_vertices
                ) else "max_vertices"
                return "budget"
            if bar is not None:
                bar.set_postfix(
                    explored=int(self.ctr[_k.C_EXPLORED]), splits=int(self.ctr[_k.C_SPLITS]),
                    bound=f"{-self.lower_bound():.4g}",
                )
                if tick:
                    bar.update(1)
            if max_time is not None and (
                    watch.seconds() + self.finish_seconds(max_time) > max_time):
                self.budget_reason = "max_time"
                return "budget"

    def finish_seconds(self, max_time: float) -> float:
        """Time kept back from a ``max_time`` for what follows the search: reading the best tree
        out of the trellis (:meth:`best_known`: a walk over the vertices recorded, and a local DP
        over the ~3^k/2 splits of each unexplored cluster of k <= ``all_pairs_max_size`` leaves)
        and scoring it."""
        nv = int(self.ctr[_k.C_NV])
        seconds = _FINISH_SHARE * max_time + _FINISH_PER_VERTEX * nv
        dp_max = int(self.ip[_k.P_DPMAX])
        if dp_max > 1:
            size = self.vi[:nv, _k.V_SIZE]
            small = (size > 1) & (size <= dp_max) & (self.vi[:nv, _k.V_STATE] == _k.UNEXPLORED)
            seconds += float(np.sum(3.0 ** size[small])) / 2.0 * _FINISH_PER_DP_SPLIT
        return seconds

    def lower_bound(self) -> float:
        return float(_k.root_bound(self.vf, self.vi, self.ef, self.hp, self.ctr))

    def tree(self) -> tuple[Tree, int]:
        """The current best tree (completed greedily where still open) and # greedy fills."""
        out_lo = np.zeros(self.n, dtype=np.int64)
        out_hi = np.zeros(self.n, dtype=np.int64)
        k, n_greedy = _k.extract(
            int(self.ctr[_k.C_ROOT]), self.vf, self.vi, self.ht, self.ef, self.ei, self.hp,
            self.tables[0], self.tables[1], self.tables[5], self.tables[7], self.problem.code,
            out_lo, out_hi,
        )
        clusters = [_leaves_of(out_lo[i], out_hi[i]) for i in range(k)]
        return Tree.from_clusters(clusters, self.n, jet=self.problem.label), int(n_greedy)

    def best_known(self) -> tuple[float, Tree | None]:
        """Best complete tree represented in the explored trellis (seeds included)."""
        out_lo = np.zeros(self.n, dtype=np.int64)
        out_hi = np.zeros(self.n, dtype=np.int64)
        value, k = _k.best_known(
            self.vf, self.vi, self.ef, self.ei, self.hp, self.cp, self.ctr, self.ip,
            self.tables[0], self.tables[1], self.tables[5], self.tables[7], self.problem.code,
            out_lo, out_hi, self.small_table,
        )
        if k == 0:
            return -math.inf, None
        clusters = [_leaves_of(out_lo[i], out_hi[i]) for i in range(k)]
        return float(value), Tree.from_clusters(clusters, self.n, jet=self.problem.label)

    def stats(self) -> dict[str, Any]:
        c = self.ctr
        n = self.n
        total = (3**n + 1) // 2 - 2**n
        return {
            "vertices_explored": int(c[_k.C_EXPLORED]),
            "vertices_recorded": int(c[_k.C_NV]),
            "splits_evaluated": int(c[_k.C_SPLITS]),
            "split_fraction": float(c[_k.C_SPLITS]) / total if total > 0 else 0.0,
            "heap_pushes": int(c[_k.C_PUSHES]),
            "heap_pops": int(c[_k.C_POPS]),
            "heap_entries": int(c[_k.C_NE]),
            "iterations": int(c[_k.C_ITER]),
            "tiny_clusters_solved": int(c[_k.C_NSOLVED_SMALL]),
            "memory_bytes": int(self.memory()),
        }


def astar(
    jet: Jet | CostModel,
    heuristic: str | None = None,
    likelihood: str | None = None,
    max_time: float | None = None,
    max_vertices: int | None = None,
    max_memory: int | None = None,
    progress: bool | None = None,
) -> ClusteringResult:
    """Exact MAP hierarchy by A* on the cluster trellis.

    Args:
        jet: a :class:`jetastar.Jet` (at most 128 leaves; in practice ~20 for a proof of optimality),
            or a cost model (:class:`jetastar.costs.HCCCost`, :class:`jetastar.costs.DasguptaCost`):
            then the search minimises the cost with the model's admissible heuristic and every
            "log-likelihood" below is minus a cost.
        heuristic: for a jet ``"h0"`` (default; admissible: the result is a proven MAP tree,
            ``exact=True``), ``"h1"`` (the paper's approximate heuristic: faster, not guaranteed,
            ``exact=False``) or ``"paper"`` (the reference "proof" bound; admissible in tests but
            unproven here). For a cost model leave it unset (``"admissible"``).
        likelihood: ``"symmetric"`` (default) or ``"legacy"``; unset for a cost model.
        max_time: run-time budget in seconds (``None``: none; compiling kernels does not count).
        max_vertices: maximum number of trellis vertices explored (``None``: none).
        max_memory: memory budget in bytes for the search arrays (default: a third of the RAM,
            at most 8 GiB).
        progress: tqdm progress bar: ``True`` always, ``False`` never, ``None`` once the jet
            has taken 10 s (loops over jets stay quiet).

    Returns:
        :class:`ClusteringResult` (``algorithm="astar"``). ``stats``: ``vertices_explored``,
        ``vertices_recorded``, ``splits_evaluated``, ``split_fraction`` (of the
        ``(3^N+1)/2 − 2^N`` splits of the full trellis), ``heap_pushes``, ``heap_pops``,
        ``iterations``, ``time_s``. ``upper_bound`` is a proven upper bound on the MAP
        log-likelihood with ``h0`` (equal to ``log_likelihood`` when exact). On a budget stop:
        ``status="budget"``, ``exact=False``, the best complete tree found and the bound;
        ``message`` names the budget. When no tree has a finite likelihood: ``status="all_inf"``.
        For a cost model ``cost`` is the (minimum) cost, ``likelihood`` the cost's name and
        ``jet_id`` is ``None``.

    Raises:
        InvalidJetError: ``jet`` is neither a Jet nor a cost model.
        TooLargeError: more than 128 leaves (points).
        ValueError: unknown heuristic or likelihood (listing the valid ones), budgets ≤ 0.

    Example:
        >>> import numpy as np
        >>> from jetastar.ginkgo import ShowerParams, generate
        >>> jet = generate(1, ShowerParams.w(), seed=2, min_leaves=9, max_leaves=9)[0]
        >>> res = astar(jet)
        >>> res.exact, res.stats["split_fraction"] < 1.0
        (True, True)
        >>> from jetastar.costs import HCCCost
        >>> W = np.array([[0, 2, -1, -1], [2, 0, -1, -1], [-1, -1, 0, 3], [-1, -1, 3, 0]])
        >>> res = astar(HCCCost(W))
        >>> res.tree.to_nested(), res.cost, res.exact
        (((0, 1), (2, 3)), 5.0, True)
    """
    watch = Stopwatch()
    problem = _Problem(jet, likelihood, heuristic, "h0")
    max_time = check_budget(max_time, "max_time")
    max_vertices = check_budget(max_vertices, "max_vertices", integer=True)
    max_memory = check_budget(max_memory, "max_memory", integer=True) or _default_memory()
    options = {
        "heuristic": problem.heuristic, "max_time": max_time, "max_vertices": max_vertices,
        "max_memory": max_memory,
    }
    exact_kind = problem.kind == 0
    if problem.n == 1:
        return _single_leaf(problem, "astar", options, watch, exact=exact_kind)
    search = _Search(problem, -1, 0, 0, None, max_memory)
    root_bytes = _root_bytes(problem.n)
    splits = f"its 2^{problem.n - 1}-1 splits"
    if root_bytes > max_memory - search.memory():
        why = (f"expanding the root of {problem.n} {problem.unit} needs {splits} "
               f"(~{format_bytes(root_bytes)}) on top of the search's "
               f"{format_bytes(search.memory())}, above max_memory={format_bytes(max_memory)}")
        return _root_does_not_fit(jet, problem, search, options, watch, max_time, why)
    root_seconds = root_bytes / _ENTRY_BYTES * _ROOT_SECONDS_PER_SPLIT
    if max_time is not None and root_seconds > max_time:
        why = (f"expanding the root of {problem.n} {problem.unit} scores {splits} (at least "
               f"~{root_seconds:.3g} s), beyond max_time={max_time:g} s")
        return _root_does_not_fit(jet, problem, search, options, watch, max_time, why)
    if max_vertices is not None:
        search.ip[_k.P_EXPLORE_MAX] = max_vertices
    bar = search_progress(progress, f"A* {problem.who}", " updates")
    try:
        outcome = search.run(watch, max_time, bar, tick=True)
    finally:
        if bar is not None:
            bar.close()
    if outcome == "explore":
        outcome = "budget"
        search.budget_reason = "max_vertices"

    tree, n_greedy = search.tree()
    ll = problem.score(tree)
    lb = search.lower_bound()
    stats = search.stats()
    status, message, exact = "ok", "", False
    upper = None
    if outcome == "solved":
        exact = exact_kind
        upper = ll if exact else None
        if ll == -math.inf:
            status, message = "all_inf", problem.nothing_finite()
    elif outcome == "all_inf":
        status, message = "all_inf", problem.nothing_finite()
        exact = exact_kind
        upper = -math.inf if exact else None
    else:
        status = "budget"
        reason = getattr(search, "budget_reason", "budget")
        message = (
            f"stopped by {reason} after {stats['vertices_explored']} explored vertices; the tree "
            f"is the best of the greedy baselines and the search's best partial tree (its "
            f"{n_greedy} open cluster{'s' if n_greedy != 1 else ''} completed greedily)"
        )
        for alt in problem.baselines():
            if alt.tree is not None and alt.log_likelihood > ll:
                tree, ll = alt.tree, alt.log_likelihood
        _, known = search.best_known()
        if known is not None:
            known_ll = problem.score(known)
            if known_ll > ll:
                tree, ll = known, known_ll
        if exact_kind and lb > -math.inf:
            upper = max(-lb, ll)
        elif exact_kind:
            # stopped before the root's splits were all scored: no search bound yet
            upper, note = _whole_bound(problem, search, ll)
            message += f"; the root was not fully expanded, so {note}"
    stats["time_s"] = watch.seconds()
    return ClusteringResult(
        tree, ll, "astar", exact=exact, likelihood=problem.likelihood, options=options,
        stats=stats, upper_bound=upper, status=status, message=message, jet_id=problem.jet_id,
    )


def _small_table_fits(n: int, size: int, watch: Stopwatch, max_time: float | None) -> bool:
    """Whether the one subset DP over the clusters of up to ``size`` of ``n`` leaves (what
    :func:`astar_approx` computes up front for a small jet, not in budgeted slices) fits in half of
    what is left of ``max_time``; without it the search solves those clusters as it meets them."""
    if max_time is None:
        return True
    splits = sum(math.comb(n, k) * ((1 << (k - 1)) - 1) for k in range(2, size + 1))
    return splits * _SMALL_TABLE_SECONDS_PER_SPLIT <= 0.5 * (max_time - watch.seconds())


def _root_bytes(n: int) -> float:
    """Bytes of the heap entries exact A* needs to expand the root of ``n`` leaves (every one of
    its ``2^(n-1) - 1`` splits)."""
    return float((1 << (n - 1)) - 1) * _ENTRY_BYTES


def _root_does_not_fit(
    target: Any, problem: _Problem, search: _Search, options: dict[str, Any], watch: Stopwatch,
    max_time: float | None, why: str,
) -> ClusteringResult:
    """Exact A* on a jet whose root alone does not fit in memory (e.g. 81 leaves: 2^80 splits) or
    cannot be expanded within ``max_time`` (``why`` says which).

    No exact search can start, so this says so instead of "stopped by memory after 0 explored
    vertices" (or stopping long after ``max_time``, allocating the root's entries). The tree is
    the best of the cheap baselines and, with a ``max_time``, of :func:`astar_approx` run within
    it. The upper bound is the admissible heuristic of the whole jet (:func:`_whole_bound`).
    """
    best = max((r for r in problem.baselines() if r.tree is not None),
               key=lambda r: r.log_likelihood, default=None)
    tree, ll = (best.tree, best.log_likelihood) if best is not None else (None, -math.inf)
    used = "the greedy baselines"
    left = None if max_time is None else max_time - watch.seconds()
    if left is not None and left > 0.0:
        approx = astar_approx(target, likelihood=problem.likelihood if problem.jet is not None
                              else None, max_time=left, progress=False)
        used = f"astar_approx within max_time={max_time:g} s"
        if approx.tree is not None and approx.log_likelihood > ll:
            tree, ll = approx.tree, approx.log_likelihood
    upper, bound_note = _whole_bound(problem, search, ll)
    stats = search.stats()
    stats["time_s"] = watch.seconds()
    message = (
        f"exact A* cannot start: {why}; exact A* proves the MAP up to ~18 leaves. The tree is the "
        f"best of {used}; {bound_note}"
    )
    return ClusteringResult(
        tree, ll, "astar", exact=False, likelihood=problem.likelihood, options=options,
        stats=stats, upper_bound=upper, status="budget", message=message, jet_id=problem.jet_id,
    )


def _whole_bound(problem: _Problem, search: _Search, ll: float) -> tuple[float | None, str]:
    """A proven upper bound on the MAP log-likelihood that needs no search (``None`` where there is
    none) and a note saying what it is, for a tree of log-likelihood ``ll``.

    h0 bounds every sub-hierarchy scored with the inner rate λ, and
    :func:`~jetastar.ginkgo.heuristics.root_rate_slack` bounds what the root rate λ_R adds to the
    jet's own split, so their sum is a proven bound (for a cost model h0 alone); none is claimed in
    the legacy form with λ_R < λ, nor with a heuristic other than h0.
    """
    if problem.kind != 0:
        return None, f"no proven bound with heuristic={problem.heuristic!r}"
    # h0 scores the jet's own split with λ; with λ_R it can score at most `slack` more
    slack = 0.0 if problem.cost_model is not None else root_rate_slack(problem.tables[5])
    if slack is None:
        return None, ("no proven bound: the root rate λ_R is below λ in the legacy form and the "
                      "root's splits were not all scored")
    root = int(search.ctr[_k.C_ROOT])
    h_root = float(search.vf[root, _k.V_H])  # a lower bound on the cost (minus log-likelihood)
    if not math.isfinite(h_root):
        return None, "no proven bound: h0 of the whole jet is not finite"
    upper = max(-h_root + slack, ll)
    whole = "jet" if problem.jet is not None else "set of points"
    plus = f" + {slack:.3g} for the root rate λ_R" if slack else ""
    return upper, f"upper_bound {upper:.6g} is h0 of the whole {whole}{plus} (proven)"


def _single_leaf(
    problem: _Problem, algorithm: str, options: dict[str, Any], watch: Stopwatch, exact: bool
) -> ClusteringResult:
    """The only hierarchy over one leaf (nothing to search)."""
    tree = Tree.from_clusters([], 1, jet=problem.label)
    ll = problem.score(tree)
    return ClusteringResult(
        tree, ll, algorithm, exact=exact, likelihood=problem.likelihood, options=options,
        stats={"time_s": watch.seconds()}, upper_bound=ll if exact else None,
        jet_id=problem.jet_id,
    )


def _tree_splits(tree: Tree) -> list[tuple[int, int, int, int]]:
    """(parent lo, parent hi, left lo, left hi) for every internal node of a tree."""
    ch = tree.children
    leaf = tree.leaf_of_node
    sets: dict[int, list[int]] = {}
    out = []
    for node in tree.postorder():
        a, b = ch[node]
        if a < 0:
            sets[int(node)] = [int(leaf[node])]
            continue
        sets[int(node)] = sets[int(a)] + sets[int(b)]
        plo, phi = _mask_words(sets[int(node)])
        llo, lhi = _mask_words(sets[int(a)])
        out.append((plo, phi, llo, lhi))
    return out


def astar_approx(
    jet: Jet | CostModel,
    beam_size: int | None = None,
    top_k: int | None = None,
    n_samples: int | None = None,
    rounds: int | None = None,
    heuristic: str | None = None,
    seed: int = 0,
    likelihood: str | None = None,
    all_pairs_max_size: int | None = DEFAULT_ALL_PAIRS_MAX_SIZE,
    patience: int | None = None,
    weight: float | None = None,
    max_explored: int | None = DEFAULT_MAX_EXPLORED,
    rank: str | None = None,
    trees: Sequence[Tree] | None = None,
    max_time: float | None = None,
    max_vertices: int | None = None,
    max_memory: int | None = None,
    progress: bool | None = None,
) -> ClusteringResult:
    """Approximate MAP hierarchy: A* on a sparse trellis grown from beam-search trees.

    Args:
        jet: a :class:`jetastar.Jet` (at most 128 leaves), or a cost model
            (:class:`jetastar.costs.HCCCost`, :class:`jetastar.costs.DasguptaCost`, at most 128
            points): the trellis is then seeded with the average-linkage and greedy trees (and
            ``trees``) instead of a beam search, and the search minimises the cost.
        beam_size: beam size of the seeding beam search (``None``: the paper's default,
            ``N(N−1)/2`` up to 40 leaves, 1000 above); every tree of its final beam seeds the trellis,
            as do the greedy tree and ``trees``. Not used for a cost model.
        top_k: splits kept per sampled vertex (the best ``top_k`` by ``rank``). Default 8 for a jet,
            10 for a cost model (the defaults of the next five options differ for cost models,
            see ``JET_DEFAULTS`` and ``COST_DEFAULTS``).
        n_samples: random 2-partitions drawn per sampled vertex and round. Default 100 (cost: 300).
        rounds: maximum number of A* rounds (each one extends the trellis). Default 4 (cost: 10).
        heuristic: ``"h1"`` (default for a jet, the paper's), ``"h0"`` or ``"paper"``; unset for
            a cost model (its admissible bound).
        seed: random seed (same seed, same result).
        likelihood: ``"symmetric"`` (default) or ``"legacy"``; unset for a cost model.
        all_pairs_max_size: clusters with at most this many leaves get all their 2-partitions,
            i.e. their exact optimum (solved by a local subset DP, default 9); in a jet of at most
            16 leaves the root and every cluster of at most 12 leaves also get all their
            2-partitions (as A* children, no sampling); ``None``: every vertex
            gets all 2-partitions (with ``heuristic="h0"``, ``weight=1`` and
            ``max_explored=None`` the search is then exact A*).
        patience: stop after this many rounds without improvement. Default 1 (cost: 3).
        weight: weighted A* factor on the heuristic cost (default 1.15, cost: 1 = plain A*): > 1
            makes the search complete promising partial trees sooner.
        max_explored: trellis vertices explored per round (default 1500; ``None``: no limit). When
            a round stops, the best complete tree of the explored trellis is taken.
        rank: how sampled splits are ranked for the top-K: ``"split"`` (default for a jet, the
            paper's: split log-likelihood ψ) or ``"estimate"`` (ψ plus the children's heuristic
            values; default for a cost model).
        trees: extra seed trees.
        max_time: run-time budget in seconds for the A* rounds (``None``: none; compiling kernels
            does not count).
        max_vertices: cap on the number of trellis vertices recorded (``None``: none).
        max_memory: as for :func:`astar`.
        progress: tqdm progress bar: ``True`` always, ``False`` never, ``None`` once the jet
            has taken 10 s (loops over jets stay quiet).

    Returns:
        :class:`ClusteringResult` (``algorithm="astar-approx"``), never below the best seed tree;
        ``stats`` adds ``rounds``, ``seed_log_likelihood``, ``beam_log_likelihood``,
        ``greedy_log_likelihood`` and ``round_log_likelihoods``. ``exact=True`` only with
        ``all_pairs_max_size=None``, ``max_explored=None``, ``weight=1`` and ``heuristic="h0"``.
        ``status="budget"`` when the time or memory budget cut the rounds short. For a cost model
        ``cost`` is the cost found, the seed statistics are ``average_linkage_log_likelihood``
        and ``greedy_log_likelihood`` (minus costs), and ``jet_id`` is ``None``.

    Raises:
        InvalidJetError: ``jet`` is neither a Jet nor a cost model, or a seed tree does not match.
        TooLargeError: more than 128 leaves.
        ValueError: unknown heuristic or likelihood, non-positive sizes, rounds or budgets.

    Example:
        >>> from jetastar.ginkgo import ShowerParams, generate
        >>> from jetastar.clustering import beam_search
        >>> jet = generate(1, ShowerParams.qcd(t_cut=1.0), seed=1, min_leaves=20)[0]
        >>> res = astar_approx(jet, seed=0)
        >>> res.log_likelihood >= beam_search(jet).log_likelihood
        True
        >>> from jetastar.costs import HCCCost
        >>> from jetastar.clustering import average_linkage
        >>> W = np.random.default_rng(1).normal(size=(30, 30))
        >>> model = HCCCost(W + W.T)
        >>> astar_approx(model).cost <= average_linkage(model).cost
        True
    """
    watch = Stopwatch()
    problem = _Problem(jet, likelihood, heuristic, "h1")
    kind = problem.kind
    if problem.cost_model is not None and beam_size is not None:
        raise ValueError(f"{problem.who}: beam_size applies to jets only (cost models are seeded "
                         "with average linkage and greedy)")
    defaults = COST_DEFAULTS if problem.cost_model is not None else JET_DEFAULTS
    top_k = defaults["top_k"] if top_k is None else top_k
    n_samples = defaults["n_samples"] if n_samples is None else n_samples
    rounds = defaults["rounds"] if rounds is None else rounds
    patience = defaults["patience"] if patience is None else patience
    weight = defaults["weight"] if weight is None else weight
    rank = defaults["rank"] if rank is None else rank
    top_k = check_budget(top_k, "top_k", integer=True)
    n_samples = check_budget(n_samples, "n_samples", integer=True)
    rounds = check_budget(rounds, "rounds", integer=True)
    patience = check_budget(patience, "patience", integer=True)
    if all_pairs_max_size is not None:
        all_pairs_max_size = check_budget(all_pairs_max_size, "all_pairs_max_size", integer=True)
    weight = check_budget(weight, "weight")
    if weight < 1.0:
        raise ValueError(f"weight must be >= 1, got {weight!r}")
    max_explored = check_budget(max_explored, "max_explored", integer=True)
    if rank not in ("split", "estimate"):
        raise ValueError(f"unknown rank {rank!r}; valid: 'split', 'estimate'")
    max_time = check_budget(max_time, "max_time")
    max_vertices = check_budget(max_vertices, "max_vertices", integer=True)
    max_memory = check_budget(max_memory, "max_memory", integer=True) or _default_memory()
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise ValueError(f"seed must be an integer, got {seed!r}")
    options = {
        "beam_size": beam_size, "top_k": top_k, "n_samples": n_samples, "rounds": rounds,
        "heuristic": problem.heuristic, "seed": int(seed), "all_pairs_max_size": all_pairs_max_size,
        "patience": patience, "max_time": max_time, "weight": weight,
        "max_explored": max_explored, "rank": rank,
    }
    n = problem.n
    seeds: list[tuple[Tree, float]] = []
    seed_stats: dict[str, float] = {}
    if problem.jet is not None:
        if beam_size is None and max_time is not None:
            beam_size = _beam_size_within(problem, max_time * _SEED_SHARE)
        beam = beam_search(problem.jet, beam_size=beam_size, likelihood=problem.likelihood)
        for r in beam.beam or [beam]:
            if r.tree is not None:
                seeds.append((r.tree, r.log_likelihood))
        seed_stats["beam_log_likelihood"] = beam.log_likelihood
        seed_stats["beam_size"] = float(beam_size or default_beam_size(n))
    baselines = problem.baselines()
    for res in baselines:
        if res.tree is not None:
            seeds.append((res.tree, res.log_likelihood))
        name = res.algorithm.replace("-", "_").replace(" ", "_")
        seed_stats[f"{name}_log_likelihood"] = res.log_likelihood
    for t in trees or ():
        if not isinstance(t, Tree) or t.n_leaves != n:
            raise InvalidJetError(
                f"seed trees must be Trees over the {n} {problem.unit}, got {t!r}",
                jet=problem.label, field="trees",
            )
        seeds.append((t, problem.score(t)))
    if n == 1:
        return _single_leaf(problem, "astar-approx", options, watch, exact=False)
    best_tree, best_ll = max(seeds, key=lambda s: s[1])
    seed_ll = best_ll
    splits = np.array(
        sorted({s for t, _ in seeds for s in _tree_splits(t)}), dtype=np.int64
    ).reshape(-1, 4)
    all_max = -1 if all_pairs_max_size is None else int(all_pairs_max_size)
    search = _Search(
        problem, all_max, n_samples, top_k, max_vertices, max_memory,
        weight=weight, dp_max=max(all_max, 0),
    )
    search.ip[_k.P_RANK] = 1 if rank == "estimate" else 0
    # the root of a small jet gets all its 2-partitions (at most 2**15 of them)
    search.ip[_k.P_ROOTALL] = _ROOT_ALL_MAX
    if 0 <= all_max < _SMALL_JET_ALL_PAIRS and n <= _ROOT_ALL_MAX:
        # small jets: vertices up to 12 leaves get every 2-partition (at most 2047) instead of a
        # sample (W jets of 16 leaves: 11/12 instead of 9/12 exact MAPs, ~+0.3 s)
        search.ip[_k.P_ALLMAX] = _SMALL_JET_ALL_PAIRS
    if all_max >= 2 and n <= _ROOT_ALL_MAX and _small_table_fits(n, all_max, watch, max_time):
        # one subset DP values every small cluster of the jet (instead of a DP per cluster)
        tab = search.tables
        search.small_table = _k.small_cluster_table(
            n, all_max, tab[0], tab[1], tab[5], tab[7], problem.code, search.ctr
        )
    search.add_splits(splits)
    bar = search_progress(progress, f"approx A* {problem.who}", " rounds")
    round_lls: list[float] = []
    status, message = "ok", ""
    stale = 0
    solved_exact = False
    try:
        for r in range(rounds):
            if r > 0:
                _k.reset_round(search.vf, search.vi, search.ctr)
            _k.seed_rng(int(seed) * 1_000_003 + r)
            if max_explored is not None:
                search.ip[_k.P_EXPLORE_MAX] = int(search.ctr[_k.C_EXPLORED]) + max_explored
            outcome = search.run(watch, max_time, bar)
            _, tree = search.best_known()
            ll = problem.score(tree) if tree is not None else -math.inf
            round_lls.append(ll)
            if bar is not None:
                bar.update(1)
            if ll > best_ll:
                best_tree, best_ll = tree, ll
                stale = 0
            else:
                stale += 1
            if outcome == "budget":
                status = "budget"
                message = f"stopped by {getattr(search, 'budget_reason', 'budget')} in round {r}"
                break
            if all_max < 0 and max_explored is None:
                solved_exact = kind == 0 and weight == 1.0 and outcome in ("solved", "all_inf")
                break
            if stale >= patience:
                break
    finally:
        if bar is not None:
            bar.close()
    stats = search.stats()
    stats.update(
        rounds=len(round_lls), round_log_likelihoods=round_lls, seed_log_likelihood=seed_ll,
        **seed_stats, time_s=watch.seconds(),
    )
    if best_ll == -math.inf and status == "ok":
        status, message = "all_inf", "no tree with a finite likelihood was found"
    return ClusteringResult(
        best_tree, best_ll, "astar-approx", exact=solved_exact, likelihood=problem.likelihood,
        options=options, stats=stats, upper_bound=best_ll if solved_exact else None,
        status=status, message=message, jet_id=problem.jet_id,
    )


# ---------------------------------------------------------------------- the registry
def _warm_heuristics(jets: list[Jet]) -> None:
    """Compile (or load) the heuristic kernel, with the argument types the search passes
    (:func:`~._astar_kernels.new_vertex`), before anything else of A* (``jets``: the warm-up
    jets; the largest is used).

    It is a quarter of A*'s compile time and what the search needs first, while approximate A*
    first runs a beam search and greedy: in a batch run another worker compiles those meanwhile
    (approximate A* is warmed up first), and this one loads them from the cache.
    """
    jet = max(jets, key=lambda j: j.n_leaves)
    p, tl, mt, w, d, consts, phys = heuristic_tables(jet)
    idx = np.arange(jet.n_leaves, dtype=np.int64)
    bound_value(0, idx, idx.size, float(w[0, 1]), p, tl, mt, w, d, consts[0], phys)


def _budgets(what: str) -> tuple[Option, ...]:
    return (
        number("max_time", None, f"run-time budget in seconds {what}(None: none)", low=0.0,
               low_open=True, none=True),
        integer("max_vertices", None, "most trellis vertices (None: none)", low=1, none=True),
        integer("max_memory", None, "memory budget in bytes of the search arrays (None: a third "
                "of the RAM, at most 8 GiB)", low=1, none=True),
        flag("progress", None, "a progress bar: true, false, or None (after 10 s)", none=True),
    )


_HEURISTIC_CHOICES = (*HEURISTICS, COST_HEURISTIC)

#: exact A* in the registry
ASTAR = register(AlgorithmInfo(
    "astar", astar, exact=True, max_leaves=18,
    description="exact A* on the lazily built cluster trellis with the admissible heuristic h0",
    declared=(
        choice("heuristic", None, "h0 (admissible, the default), h1 (faster, not exact) or "
               "paper", _HEURISTIC_CHOICES, none=True),
        likelihood_option(None, BOUNDED_LIKELIHOODS),
        *_budgets(""),
    ),
    family="exact", main_job="off",
    # (compile CPU seconds measured 2026-11-27 on a 2-core machine: cheap after approximate A*,
    # whose search machine it runs; the whole of approximate A*'s without it)
    warm_up=WarmUp(compile_s=1.5, alone_s=31.0, order=2.0, group="astar",
                   prepare=_warm_heuristics),
))

#: approximate A* in the registry
ASTAR_APPROX = register(AlgorithmInfo(
    "astar-approx", astar_approx,
    description="approximate A* on a sparse trellis seeded with beam search and greedy trees",
    aliases=("astar_approx",),
    declared=(
        integer("beam_size", None, "beam size of the seeding beam search (None: its default)",
                low=1, none=True),
        integer("top_k", None, "splits kept per sampled vertex (None: 8)", low=1, none=True),
        integer("n_samples", None, "random 2-partitions per sampled vertex and round (None: 100)",
                low=1, none=True),
        integer("rounds", None, "most A* rounds, each extending the trellis (None: 4)", low=1,
                none=True),
        choice("heuristic", None, "h1 (the default), h0 or paper", _HEURISTIC_CHOICES,
               none=True),
        integer("seed", 0, "random seed (same seed, same result)"),
        likelihood_option(None, BOUNDED_LIKELIHOODS),
        integer("all_pairs_max_size", DEFAULT_ALL_PAIRS_MAX_SIZE, "clusters of at most this "
                "many leaves get all their 2-partitions (None: every cluster)", low=1,
                none=True),
        integer("patience", None, "stop after this many rounds without improvement (None: 1)",
                low=1, none=True),
        number("weight", None, "weighted-A* factor on the heuristic (None: 1.15)", low=1.0,
               none=True),
        integer("max_explored", DEFAULT_MAX_EXPLORED, "trellis vertices explored per round "
                "(None: no limit)", low=1, none=True),
        choice("rank", None, "how sampled splits are ranked: split (ψ, the default) or estimate",
               ("split", "estimate"), none=True),
        anything("trees", None, "extra seed trees"),
        *_budgets("for the A* rounds "),
    ),
    family="exact", main_job="off",
    # (compile CPU seconds measured 2026-11-27 on a 2-core machine: the A* search and its
    # heuristics, the longest chain of kernels, warmed up first)
    warm_up=WarmUp(compile_s=31.0, order=0.0, group="astar", prepare=_warm_heuristics),
))
