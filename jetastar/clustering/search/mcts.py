"""Monte-Carlo tree search over merge sequences with a likelihood prior (PUCT).

The MCTS baseline of Brehmer et al. (ginkgo-rl ``LikelihoodMCTSAgent``), without a neural network. A
jet is clustered by ``N - 1`` *decisions*; each decision merges two of the current clusters. Before a
decision, the search runs from the current state (the *head*):

1. **beam pre-expansion** (``beam_size > 0``): a beam search of width ``beam_size`` from the head down
   to complete trees. Each beam node proposes its ``beam_size`` most likely merges, and the best
   ``beam_size`` partial sequences by accumulated log-likelihood are kept. The nodes are added to the
   search tree and the returns of the complete trees are backed up.
2. **trajectories**: ``min(max(n_mc_target · #merges − visits(head), n_mc_min), n_rollouts)`` of
   them. Each descends from the head to a complete tree. At a node visited before, it picks the merge
   ``a`` that maximises the PUCT score

       Q(a) + c_puct · P(a) · sqrt(N + 1e-9) / (1 + n(a)).

   ``P(a) ∝ exp(ψ(a))`` is the prior over the legal merges of the node: ``ψ`` is the split
   log-likelihood of the merge, and the prior is normalised; it is uniform when every ``ψ`` is
   ``-inf``, or with ``prior="uniform"``. ``N`` and ``n(a)`` are visit counts. ``Q`` is the mean
   (``planning="mean"``) or best (``"max"``) return of the child, normalised into ``[0, 1]`` via
   ``reward_range``; a child never visited gets its parent's ``Q``. At a node never visited before, the
   merge comes from the *rollout* policy instead. With ``"greedy"``, the reference behaviour, that is
   the most likely merge. With ``"sample"``, the merge is drawn from ``P`` with the seeded generator.
   Every node a trajectory passes through joins the search tree. Its return, the log-likelihood of
   the complete tree, is backed up to the head.
3. **decision** (``decision="max_reward"``): the child of the head with the best return seen through
   it; ``"most_visited"`` takes the most visited child. The search tree below the chosen child is
   kept for the next decision.

Returns are exact log-likelihoods (the final merge uses λ_R). They are clipped to ``reward_range`` only
for ``Q``, while best returns are kept unclipped. So with ``"max_reward"`` the returned tree is the best
complete tree that any trajectory or beam reached through the chosen path, and never worse than the
head's beam pre-expansion at the first decision. Split log-likelihoods come from the shared numba kernel,
and the search itself is one numba kernel: with the defaults a 20-leaf jet takes about 10 ms and a
50-leaf jet about 0.25 s.

Defaults follow the reference configuration ``mcts_likelihood``: ``n_mc_target=1``, ``n_mc_min=0``,
``n_rollouts`` (``n_mc_max``) ``= 20``, ``beam_size=5``, ``c_puct=1``, ``planning="mean"``,
``decision="max_reward"``, ``reward_range=(-500, 0)``. ``rollout="greedy"`` is the reference's
behaviour and is deterministic (the seed is not used). ``"sample"`` makes the search stochastic:
its draws use a :class:`numpy.random.Generator` made from ``seed``, so the same seed and options give
the same tree. On 10–20-leaf QCD jets ``"greedy"`` finds better trees than ``"sample"`` at equal cost
(see ``tests/benchmarks/bench_baselines.py``).

Example:
    >>> import numpy as np
    >>> from jetastar import Jet
    >>> from jetastar.ginkgo import ShowerParams
    >>> leaves = np.array([[40.0, 0, 30, 25], [30.0, 0, 25, 15], [20.0, 5, 15, 10]])
    >>> mcts(Jet(leaves, ShowerParams.qcd()), n_rollouts=5, seed=1).tree.n_leaves
    3
"""

from __future__ import annotations

import math
import numbers
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..._jit import DeferredSignals, Stopwatch
from ...errors import OptionError
from ...ginkgo.likelihood import LIKELIHOODS
from ...jet import Jet
from .._engine import check_budget
from .._merges import (
    canonical_result,
    check_jet,
    greedy_kernel,
    jet_arrays,
)
from ..chunks import (
    DONE,
    NOT_RUN,
    PER_JET,
    Chunk,
    ChunkPath,
    ChunkResults,
    done_trees,
    ok_rows,
)
from ..estimates import SPLITS_PER_S
from ..options import anything, choice, integer, likelihood_option, number
from ..registry import AlgorithmInfo, WarmUp, register
from ..result import ClusteringResult
from ._mcts_kernels import (
    R_DEC,
    R_DONE,
    R_WORK,
    mcts_advance,
    mcts_chunk,
    mcts_run,
    mcts_state,
    new_registers,
)

__all__ = ["ALL_INF_MESSAGE", "FIRST_BUDGET_SLICE_WORK", "MCTS", "MCTS_CHUNK_WORK", "mcts", "mcts_run",
           "mcts_settings", "mcts_work"]

#: the values of the options ``planning``, ``decision``, ``prior`` and ``rollout``
PLANNING = ("mean", "max")
DECISIONS = ("max_reward", "most_visited")
PRIORS = ("likelihood", "uniform")
ROLLOUTS = ("greedy", "sample")

# ---------------------------------------------------------------------- Python API
#: the message of a search whose tree has log-likelihood ``-inf`` (status ``"all_inf"``)
ALL_INF_MESSAGE = "the tree found has log-likelihood -inf (no search path reached a possible tree)"
#: A search returns to Python between slices of work of about this many seconds (see
#: :func:`_run_mcts`); the first slice is :data:`_FIRST_SLICE_WORK` units (merges looked at).
_SLICE_S = 0.1
_FIRST_SLICE_WORK = 2_000_000
#: the first slice under a ``max_time``
FIRST_BUDGET_SLICE_WORK = 100_000
#: no slice is larger than this (tests set it small to cut a search into many slices)
_MAX_SLICE_WORK = 2**62


def _run_mcts(
    args: tuple[Any, ...], watch: Stopwatch, max_time: float | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """The search kernel run in slices of work, returning to Python between them: a pending
    signal (Ctrl-C) is raised there, and the search stops once ``watch`` has passed
    ``max_time``.

    Returns:
        ``(history, steps, counters, decisions made)``.
    """
    leaves, consts = args[0], args[1]
    regs, fregs = new_registers()
    budget = _FIRST_SLICE_WORK if max_time is None else FIRST_BUDGET_SLICE_WORK
    with DeferredSignals() as held:
        ni, nf, state = mcts_state(leaves, consts)
        while True:
            started = time.perf_counter()
            ni, nf = mcts_advance(*args, ni, nf, state, regs, fregs, min(budget, _MAX_SLICE_WORK))
            if regs[R_DONE]:
                break
            held.deliver()
            took = time.perf_counter() - started
            target = _SLICE_S
            if max_time is not None:
                left = max_time - watch.seconds()
                if left <= 0.0:
                    break
                target = min(target, 0.5 * left)
            work = int(regs[R_WORK])
            if took > 0.0 and work > 0:
                budget = int(min(max(work * target / took, 1000.0), 8.0 * max(work, budget)))
    history, steps, counters = state[4], state[5], state[6]
    return history, steps, counters, int(regs[R_DEC])


def mcts_settings(
    n_rollouts: int = 20,
    seed: Any = 0,
    *,
    n_mc_target: int = 1,
    n_mc_min: int = 0,
    beam_size: int = 5,
    c_puct: float = 1.0,
    planning: str = "mean",
    decision: str = "max_reward",
    prior: str = "likelihood",
    rollout: str = "greedy",
    reward_range: Any = (-500.0, 0.0),
) -> tuple[dict[str, Any], tuple[Any, ...]]:
    """The options of :func:`mcts` checked, as its results record them, and as its kernel takes them.

    One check for the per-jet function and the columnar path (:mod:`~jetastar.clustering.chunks`),
    so both accept, refuse and record the same values. ``seed`` is recorded, not checked
    (:func:`_make_rng` checks it when it makes the generator).

    Returns:
        ``(options, settings)``: the options dict of a result (without ``max_time``) and
        ``(n_mc_target, n_mc_min, n_mc_max, beam_size, c_puct, planning, decision, uniform,
        sample, low, high)`` for :func:`mcts_run` / :func:`mcts_advance`.

    Raises:
        ValueError: an invalid value (the message lists the valid ones).

    Example:
        >>> options, settings = mcts_settings(10, rollout="sample")
        >>> options["n_rollouts"], options["rollout"], settings[8]
        (10, 'sample', True)
    """
    n_max = _count("n_rollouts", n_rollouts)
    target = _count("n_mc_target", n_mc_target)
    n_min = _count("n_mc_min", n_mc_min)
    width = _count("beam_size", beam_size)
    try:
        c = float(c_puct)
    except (TypeError, ValueError):
        raise ValueError(f"c_puct must be a number >= 0, got {c_puct!r}") from None
    if not (math.isfinite(c) and c >= 0.0):
        raise ValueError(f"c_puct must be a finite number >= 0, got {c_puct!r}")
    plan = _choice("planning", planning, PLANNING)
    dec = _choice("decision", decision, DECISIONS)
    uniform = _choice("prior", prior, PRIORS) == 1
    sample = _choice("rollout", rollout, ROLLOUTS) == 1
    try:
        lo, hi = (float(x) for x in reward_range)
    except (TypeError, ValueError):
        raise ValueError(
            f"reward_range must be two numbers (low, high), got {reward_range!r}"
        ) from None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise ValueError(f"reward_range must be finite with low < high, got {reward_range!r}")
    options = {
        "n_rollouts": n_max,
        "seed": _recorded_seed(seed),
        "n_mc_target": target,
        "n_mc_min": n_min,
        "beam_size": width,
        "c_puct": c,
        "planning": planning,
        "decision": decision,
        "prior": prior,
        "rollout": rollout,
        "reward_range": [lo, hi],
    }
    return options, (target, n_min, n_max, width, c, plan, dec, uniform, sample, lo, hi)


def _recorded_seed(seed: Any) -> Any:
    """``seed`` as a result records it: an int (numpy integers too), ``None``, or ``"Generator"``
    for anything else (a generator; :func:`_make_rng` refuses what is neither)."""
    if isinstance(seed, numbers.Integral) and not isinstance(seed, bool):
        return int(seed)
    return None if seed is None else "Generator"


def _choice(name: str, value: object, valid: tuple[str, ...]) -> int:
    if value not in valid:
        raise ValueError(f"unknown {name} {value!r}; valid: {', '.join(map(repr, valid))}")
    return valid.index(value)  # type: ignore[arg-type]


def _count(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
    return int(value)


def _make_rng(seed: Any) -> np.random.Generator:
    if isinstance(seed, np.random.Generator):
        if not isinstance(seed.bit_generator, np.random.PCG64):
            raise ValueError("seed: a Generator must use the PCG64 bit generator (default_rng)")
        return seed
    if seed is None or (isinstance(seed, numbers.Integral) and not isinstance(seed, bool)):
        return np.random.default_rng(seed)
    raise ValueError(f"seed must be an integer, None or a numpy Generator, got {seed!r}")


def mcts(
    jet: Jet,
    n_rollouts: int = 20,
    seed: Any = 0,
    likelihood: str = "symmetric",
    *,
    n_mc_target: int = 1,
    n_mc_min: int = 0,
    beam_size: int = 5,
    c_puct: float = 1.0,
    planning: str = "mean",
    decision: str = "max_reward",
    prior: str = "likelihood",
    rollout: str = "greedy",
    reward_range: tuple[float, float] = (-500.0, 0.0),
    max_time: float | None = None,
) -> ClusteringResult:
    """Cluster a jet by Monte-Carlo tree search over merge sequences (see the module docstring).

    The search runs in slices of work of about 0.1 s (cut before a decision or between two
    trajectories) and returns to Python between them, so a Ctrl-C stops it within a slice and
    ``max_time`` holds whatever the size of the jet; the slices change nothing in the result.

    Args:
        jet: the :class:`jetastar.Jet` to cluster.
        n_rollouts: maximum number of trajectories per decision (the reference's ``n_mc_max``).
        seed: integer seed (or ``None``, or a PCG64 :class:`numpy.random.Generator`) for the random
            draws of ``rollout="sample"`` (unused with the default ``rollout="greedy"``).
        likelihood: ``"symmetric"`` (default) or ``"legacy"``.
        n_mc_target: trajectories per legal merge at a decision, before subtracting the head's
            visits.
        n_mc_min: minimum number of trajectories per decision.
        beam_size: width of the beam pre-expansion before each decision (0 = none).
        c_puct: exploration constant of PUCT.
        planning: ``"mean"`` or ``"max"`` normalised return as ``Q`` in PUCT.
        decision: ``"max_reward"`` (child with the best return) or ``"most_visited"``.
        prior: ``"likelihood"`` (``P ∝ exp ψ``) or ``"uniform"``.
        rollout: policy at nodes never visited before: ``"greedy"`` (most probable merge under the
            prior, the reference behaviour) or ``"sample"`` (drawn from the prior).
        reward_range: ``(low, high)`` used to normalise returns into ``[0, 1]`` for ``Q``.
        max_time: run-time budget in seconds (``None``: none; compiling kernels does not count),
            checked between slices of work.

    Returns:
        A :class:`ClusteringResult` (``algorithm="mcts"``) with ``stats``: ``trajectories``,
        ``nodes`` (search-tree nodes created), ``beam_nodes``, ``splits_evaluated`` and
        ``time_s``. ``status="all_inf"`` when the tree found has log-likelihood ``-inf``.
        Stopped by ``max_time`` before its last decision: ``status="budget"``, the greedy tree,
        a message and ``stats["decisions"]`` (how many decisions were made).

    Raises:
        InvalidJetError: if ``jet`` is not a Jet.
        ValueError: for an invalid option value (the message lists the valid ones).

    Example:
        >>> from jetastar.ginkgo import ShowerParams, generate
        >>> jet = generate(1, ShowerParams.qcd(), seed=3)[0]
        >>> mcts(jet, seed=1).tree == mcts(jet, seed=1).tree
        True
    """
    watch = Stopwatch()
    check_jet(jet, "mcts")
    leaves, consts = jet_arrays(jet, likelihood)
    n = leaves.shape[0]
    options, settings = mcts_settings(
        n_rollouts, seed, n_mc_target=n_mc_target, n_mc_min=n_mc_min, beam_size=beam_size,
        c_puct=c_puct, planning=planning, decision=decision, prior=prior, rollout=rollout,
        reward_range=reward_range,
    )
    max_time = check_budget(max_time, "max_time")
    rng = _make_rng(seed)
    args = (leaves, consts, *settings, rng)
    # a search that cannot end within the budget ends with the greedy tree: not started (its
    # first decision's beam pre-expansion, ~beam_size n³/6 merges, is not cut into slices)
    lower = _estimate(n, options) if max_time is not None else None
    too_long = lower is not None and max_time is not None and lower > max_time
    if too_long:
        counters, done = np.zeros(4, dtype=np.int64), 0
    else:
        history, steps, counters, done = _run_mcts(args, watch, max_time)
    status, message = "ok", ""
    if done < max(n - 1, 0):  # stopped by max_time: the greedy tree
        history, steps, _, _ = greedy_kernel(leaves, consts)
        status = "budget"
        message = (f"not started: a lower estimate of its time, {lower:.3g} s, is over max_time="
                   f"{max_time:g} s; the tree is the greedy tree" if too_long else
                   f"stopped by max_time={max_time:g} s after {watch.seconds():.3g} s, after "
                   f"{done} of {n - 1} decisions; the tree is the greedy tree")
    tree, ll = canonical_result(history, steps, n, jet=jet.label)
    if status == "ok" and not math.isfinite(ll):
        status = "all_inf"
        message = ALL_INF_MESSAGE
    if max_time is not None:
        options["max_time"] = max_time
    stats = {
        "trajectories": int(counters[0]),
        "nodes": int(counters[1]),
        "beam_nodes": int(counters[3]),
        "splits_evaluated": int(counters[2]),
        "time_s": watch.seconds(),
    }
    if status == "budget":
        stats["decisions"] = int(done)
    return ClusteringResult(
        tree=tree,
        log_likelihood=ll,
        algorithm="mcts",
        likelihood=likelihood,
        options=options,
        stats=stats,
        status=status,
        message=message,
        jet_id=jet.jet_id,
    )


def _estimate(n_leaves: int, options: Mapping[str, Any]) -> float:
    """A lower estimate of the seconds of one jet: ``n_rollouts · n³ / 5`` split evaluations at
    :data:`~.estimates.SPLITS_PER_S`."""
    rollouts = max(1, int(options.get("n_rollouts", 20) or 1))
    return rollouts * n_leaves**3 / 5 / SPLITS_PER_S


# ---------------------------------------------------------------------- the columnar path
#: a jet whose search is estimated at more work units than this (:func:`mcts_work`; ~20-50 ns
#: each: ~0.5-1 s, 66 leaves with the defaults) goes to the per-jet function, which sees Ctrl-C
#: every 0.1 s
MCTS_CHUNK_WORK = 25_000_000
#: the fixed cost of a jet in :func:`~._mcts_kernels.mcts_chunk`, in work units (measured ~200 µs
#: per QCD jet of ~7 leaves with the defaults, ~50 ns per unit there)
MCTS_JET_WORK = 3000
#: the options of MCTS on the columnar path (all of them; ``rollout="sample"`` and a Generator as
#: ``seed`` go to the per-jet function, whose random draws are one generator's per jet)
_CHUNK_OPTIONS = {"likelihood", "n_rollouts", "seed", "n_mc_target", "n_mc_min", "beam_size",
                  "c_puct", "planning", "decision", "prior", "rollout", "reward_range",
                  "max_time"}


def mcts_work(n_leaves: np.ndarray, opts: Mapping[str, Any]) -> np.ndarray:
    """Estimated work of MCTS on jets of ``n_leaves`` leaves with the options ``opts`` (of its
    chunk path), in units of ~20-50 ns: ``n⁴ · (R + 1.5 B + 0.065 B²) / 22`` plus
    :data:`MCTS_JET_WORK`, with ``R = n_rollouts`` and ``B = beam_size``.

    Fitted to the CPU time of QCD jets of ~20 leaves with the defaults, 100 or 200 rollouts and beams
    of 20 and 50 (the beam's candidates cost more than the trajectories' merges); ~1.3 n⁴ with the
    defaults, where the kernel counts ~1.1 n⁴ merges looked at.
    """
    n = np.asarray(n_leaves, dtype=np.float64)
    r, b = float(opts["n_rollouts"]), float(opts["beam_size"])
    return n**4 * (r + 1.5 * b + 0.065 * b * b) / 22.0 + MCTS_JET_WORK


class _MctsChunks(ChunkPath):
    """MCTS with deterministic rollouts on the columnar path (:func:`~._mcts_kernels.mcts_chunk`),
    with the results of :func:`mcts`; jets estimated at more than :data:`MCTS_CHUNK_WORK` are left
    to that function."""

    kernel_key = "columnar-mcts"

    def options(self, options: Mapping[str, Any]) -> dict[str, Any] | None:
        """The options :func:`mcts` records (:func:`mcts_settings`), with ``likelihood`` and
        ``max_time``; ``None`` for a value it would refuse, for sampled rollouts
        (``rollout="sample"``: each jet's draws come from its own generator, on the per-jet path)
        and for a :class:`numpy.random.Generator` as ``seed``.

        With a ``max_time`` the chunk kernel stops each search after the work of the per-jet
        function's first slice, as for beam search.
        """
        if set(options) - _CHUNK_OPTIONS:
            return None
        likelihood = options.get("likelihood", "symmetric")
        if likelihood not in LIKELIHOODS:
            return None
        seed = options.get("seed", 0)
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, numbers.Integral)):
            return None
        rest = {k: v for k, v in options.items() if k not in ("likelihood", "max_time")}
        try:
            recorded, settings = mcts_settings(**rest)
            max_time = check_budget(options.get("max_time"), "max_time")
        except (OptionError, ValueError, TypeError):
            return None
        if settings[8]:  # sampled rollouts
            return None
        return {"likelihood": likelihood, **recorded, "max_time": max_time}

    def run(self, opts: dict[str, Any], chunk: Chunk) -> ChunkResults:
        n = len(chunk)
        recorded = {k: v for k, v in opts.items() if k not in ("likelihood", "max_time")}
        _, settings = mcts_settings(**recorded)
        options = recorded if opts["max_time"] is None else {**recorded,
                                                              "max_time": opts["max_time"]}
        estimate = mcts_work(chunk.counts, opts)
        over = chunk.run & (estimate > MCTS_CHUNK_WORK)
        budget = 2**62 if opts["max_time"] is None else FIRST_BUDGET_SLICE_WORK
        children, leaf_of_node, ll, outcome, cnt, work = mcts_chunk(
            chunk.leaves, chunk.loff, chunk.noff, chunk.which, chunk.consts, chunk.run & ~over,
            settings, estimate, budget, chunk.threads)
        # a jet over the cap is the per-jet function's (the kernel did not run it)
        outcome[(outcome == NOT_RUN) & over] = PER_JET
        done = outcome == DONE
        node_offsets, ch, leaf = done_trees(done, chunk.sizes, chunk.noff, children,
                                            leaf_of_node)
        status, message = ok_rows(done)
        impossible = done & ~np.isfinite(ll)
        status[impossible] = "all_inf"
        message[impossible] = ALL_INF_MESSAGE
        counters: dict[str, np.ndarray] = {}
        if done.any():
            counters = {k: np.where(done, cnt[:, q], np.nan).astype(np.float64) for k, q in
                        (("trajectories", 0), ("nodes", 1), ("beam_nodes", 3),
                         ("splits_evaluated", 2))}
        return ChunkResults(
            algorithm="mcts", likelihood=opts["likelihood"], options=options,
            collection=chunk.collection, outcome=outcome,
            log_likelihood=np.where(done, ll, np.nan), status=status, message=message,
            node_offsets=node_offsets, children=ch, leaf_of_node=leaf, counters=counters,
            work=np.where(done, work, 0).astype(np.float64), exact=np.zeros(n, dtype=bool),
            upper_bound=np.full(n, np.nan),
            rerun_options={"likelihood": opts["likelihood"], **options},
        )


#: MCTS in the registry
MCTS = register(AlgorithmInfo(
    "mcts", mcts,
    description="Monte-Carlo tree search with a likelihood prior (PUCT, beam pre-expansion)",
    cost_scales_with=("n_rollouts",),
    declared=(
        integer("n_rollouts", 20, "most trajectories per decision", low=0),
        anything("seed", 0, "seed of rollout=sample's draws: an integer, None or a numpy "
                 "Generator"),
        likelihood_option(),
        integer("n_mc_target", 1, "trajectories per legal merge at a decision, before the "
                "head's visits", low=0),
        integer("n_mc_min", 0, "fewest trajectories per decision", low=0),
        integer("beam_size", 5, "width of the beam pre-expansion before each decision (0: "
                "none)", low=0),
        number("c_puct", 1.0, "exploration constant of PUCT", low=0.0),
        choice("planning", "mean", "the normalised return used as Q in PUCT", PLANNING),
        choice("decision", "max_reward", "the child chosen at a decision", DECISIONS),
        choice("prior", "likelihood", "the prior of PUCT (likelihood: P ∝ exp ψ)", PRIORS),
        choice("rollout", "greedy", "policy at nodes never visited: the prior's most probable "
               "merge, or one drawn from it", ROLLOUTS),
        anything("reward_range", (-500.0, 0.0), "(low, high) that normalises returns into [0, 1] "
                 "for Q"),
        number("max_time", None, "run-time budget in seconds (None: none)", low=0.0,
               low_open=True, none=True),
    ),
    family="search", chunk=_MctsChunks(), estimate=_estimate,
    # (compile CPU seconds measured 2026-12-07 on a 2-core machine, cold cache; 19 on 2026-11-27)
    warm_up=WarmUp(compile_s=14.0, order=0.3),
))
