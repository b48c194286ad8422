"""Per-jet twins of the algorithms of the columnar path ("perjet-greedy", "perjet-kt", ...):
the same functions registered under other names, so that a batch run sends them through the
per-jet path (``run_one``) while the originals go through the columnar kernel, and the two tables
can be compared row by row."""

from __future__ import annotations

from jetastar.clustering import (
    beam_search,
    exact_map,
    exact_trellis,
    greedy,
    kt,
    mcts,
    register,
    window_search,
)

#: per-jet twin name -> the algorithm it repeats
TWINS = {"perjet-greedy": "greedy", "perjet-kt": "kt", "perjet-cambridge": "cambridge",
         "perjet-antikt": "antikt"}


@register("perjet-greedy", description="test: greedy through the per-jet path")
def _perjet_greedy(jet, likelihood: str = "symmetric"):
    return greedy(jet, likelihood=likelihood)


@register("perjet-kt", description="test: kt through the per-jet path")
def _perjet_kt(jet, likelihood: str = "symmetric", R: float = 1000.0):
    return kt(jet, algorithm="kt", likelihood=likelihood, R=R)


@register("perjet-cambridge", description="test: Cambridge through the per-jet path")
def _perjet_cambridge(jet, likelihood: str = "symmetric", R: float = 1000.0):
    return kt(jet, algorithm="cambridge", likelihood=likelihood, R=R)


@register("perjet-antikt", description="test: anti-kt through the per-jet path")
def _perjet_antikt(jet, likelihood: str = "symmetric", R: float = 1000.0):
    return kt(jet, algorithm="antikt", likelihood=likelihood, R=R)


#: per-jet twin of the registry's "trellis" (the exact MAP engine, or with log_z the full trellis)
EXACT_TWINS = {"perjet-trellis": "trellis"}


@register("perjet-trellis", exact=True, max_leaves=24,
          description="test: the exact MAP engine / full trellis through the per-jet path")
def _perjet_trellis(jet, likelihood: str | None = None, *, log_z: bool = False,
                    max_time: float | None = None, max_memory: int | None = None,
                    threads: int | None = None, progress: bool | None = None,
                    device: str = "auto"):
    if log_z:
        return exact_trellis(jet, likelihood, max_memory, threads=threads, progress=progress,
                             device=device)
    return exact_map(jet, likelihood, max_time=max_time, max_memory=max_memory, threads=threads,
                     progress=progress, device=device)


#: per-jet twin of beam search
BEAM_TWINS = {"perjet-beam": "beam"}


@register("perjet-beam", description="test: beam search through the per-jet path")
def _perjet_beam(jet, beam_size: int | None = None, likelihood: str = "symmetric",
                 greedy_guard: bool = True, max_time: float | None = None):
    return beam_search(jet, beam_size=beam_size, likelihood=likelihood,
                       greedy_guard=greedy_guard, max_time=max_time)


#: per-jet twin of MCTS
MCTS_TWINS = {"perjet-mcts": "mcts"}


@register("perjet-mcts", description="test: MCTS through the per-jet path")
def _perjet_mcts(jet, n_rollouts: int = 20, seed=0, likelihood: str = "symmetric", *,
                 n_mc_target: int = 1, n_mc_min: int = 0, beam_size: int = 5,
                 c_puct: float = 1.0, planning: str = "mean", decision: str = "max_reward",
                 prior: str = "likelihood", rollout: str = "greedy",
                 reward_range=(-500.0, 0.0), max_time: float | None = None):
    return mcts(jet, n_rollouts, seed, likelihood, n_mc_target=n_mc_target, n_mc_min=n_mc_min,
                beam_size=beam_size, c_puct=c_puct, planning=planning, decision=decision,
                prior=prior, rollout=rollout, reward_range=reward_range, max_time=max_time)


#: per-jet twin of the window search
WINDOW_TWINS = {"perjet-window-search": "window-search"}


@register("perjet-window-search", description="test: the window search through the per-jet path")
def _perjet_window(jet, likelihood: str | None = None, *, window_size: int = 13,
                   n_random: int | None = None, n_starts: int = 6, n_sampled: int | None = None,
                   skip_duplicates: bool | None = None, widen: int | None = None,
                   widen_unsure: int = 0, top_size: int | None = None,
                   root_size: int | None = None, start: str = "beam",
                   beam_size: int | None = None, trees=None, seed: int = 0,
                   max_time: float | None = None, max_sweeps: int | None = None,
                   prove: bool = False, exact_first: bool | None = None,
                   progress: bool | None = None, device: str = "auto"):
    return window_search(
        jet, likelihood, window_size=window_size, n_random=n_random, n_starts=n_starts,
        n_sampled=n_sampled, skip_duplicates=skip_duplicates, widen=widen,
        widen_unsure=widen_unsure, top_size=top_size, root_size=root_size, start=start,
        beam_size=beam_size, trees=trees, seed=seed, max_time=max_time, max_sweeps=max_sweeps,
        prove=prove, exact_first=exact_first, progress=progress, device=device)
