"""The cost preview of a batch run: each algorithm's predicted CPU time on the inputs, said before
the work starts (``jetastar cluster``, ``jetastar info --check``).

The prediction is :func:`jetastar.clustering.cost.predicted_cpu` on the jets' sizes and shapes;
for large inputs it is made on the first jets of each file and scaled to the file's jet count.

Example:
    >>> from jetastar.batch import BatchConfig
    >>> from jetastar.ginkgo import ShowerParams, generate
    >>> preview = preview_jets(generate(50, ShowerParams.qcd(), seed=2),
    ...                        BatchConfig(["greedy", "trellis"], time_limit=5.0))
    >>> [c.name for c in preview.costs], preview.n_jets
    (['greedy', 'trellis'], 50)
    >>> preview.lines()[0].startswith("cost preview: predicted CPU time on 50 jets, --time-limit 5 s")
    True
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..clustering.cost import PredictedCost, cost_features, predicted_cpu
from .config import BatchConfig, options_for, size_limit
from .sources import JetFileReader, ParticleFileSource

__all__ = ["WARN_CPU_S", "RunPreview", "preview_inputs", "preview_jets"]

#: a run predicted to take more CPU seconds than this gets a warning before it starts
WARN_CPU_S = 600.0
#: jets per input the preview reads (the first ones; the rest are scaled from them)
SAMPLE_JETS = 1000


def _duration(seconds: float) -> str:
    """``0.02 s``, ``12 s``, ``3.4 min``, ``2.1 h``."""
    if not np.isfinite(seconds):
        return "unknown"
    if seconds < 1:
        return f"{seconds:.2g} s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


@dataclass(frozen=True)
class RunPreview:
    """The predicted cost of a run (what :func:`preview_jets` and :func:`preview_inputs` return).

    Example:
        >>> from jetastar.batch import BatchConfig
        >>> from jetastar.ginkgo import generate
        >>> preview = preview_jets(generate(20, seed=3), BatchConfig(["beam"]), n_jets=2000)
        >>> preview.scale, preview.cpu_seconds("beam") == 100 * preview.costs[0].total
        (100.0, True)
        >>> preview.warnings(threshold=1e9)
        []

    Attributes:
        costs: each algorithm's prediction on the jets looked at.
        n_jets: the jets of the run.
        n_looked_at: the jets whose sizes and shapes were read (the prediction is scaled by
            ``n_jets / n_looked_at``).
        time_limit: the run's ``--time-limit`` (``None``: none).
        workers: worker processes of the run.
    """

    costs: list[PredictedCost]
    n_jets: int
    n_looked_at: int
    time_limit: float | None
    workers: int = 1

    @property
    def scale(self) -> float:
        """Jets of the run per jet looked at."""
        return self.n_jets / self.n_looked_at if self.n_looked_at else 0.0

    def cpu_seconds(self, name: str | None = None) -> float:
        """Predicted CPU seconds of algorithm ``name`` (``None``: all) on the whole run."""
        costs = [c for c in self.costs if name is None or c.name == name]
        return self.scale * float(sum(c.total for c in costs))

    def lines(self) -> list[str]:
        """The preview as printed: a head line and one line per algorithm."""
        looked = ("" if self.n_looked_at == self.n_jets else
                  f" (scaled from the first {self.n_looked_at})")
        limit = "" if self.time_limit is None else f", --time-limit {self.time_limit:g} s"
        out = [f"cost preview: predicted CPU time on {self.n_jets} jets{looked}{limit} "
               "(a model of real and Ginkgo jets, typically within a factor 2):"]
        width = max((len(c.name) for c in self.costs), default=0)
        for c in self.costs:
            n_run = round(self.scale * c.n_run)
            text = f"  {c.name:<{width}}  {_duration(self.scale * c.total):>9}"
            notes = []
            if n_run < self.n_jets:
                notes.append(f"on the {n_run} of {self.n_jets} jets within its size limit")
            if c.model == "none":
                notes.append("no cost model (not measured)")
            over = self.scale * c.over_limit
            if c.time_limit is not None and over >= 0.5:
                notes.append(f"~{over:.0f} jets stopped at the time limit")
            if notes:
                text += f"  ({'; '.join(notes)})"
            out.append(text)
        total = self.cpu_seconds()
        wall = ("" if self.workers <= 1 else
                f", about {_duration(total / self.workers)} of wall time on {self.workers} "
                "workers")
        out.append(f"  {'total':<{width}}  {_duration(total):>9}{wall}")
        return out

    def warnings(self, threshold: float = WARN_CPU_S) -> list[str]:
        """One line per reason to think again before starting: a run over ``threshold`` CPU
        seconds, or an algorithm with which most jets will hit the time limit."""
        out = []
        total = self.cpu_seconds()
        if np.isfinite(total) and total > threshold:
            costly = max(self.costs, key=lambda c: c.total if np.isfinite(c.total) else -1.0)
            hint = ("set --time-limit SECONDS" if self.time_limit is None else
                    "lower --time-limit")
            out.append(f"warning: this run is predicted to take {_duration(total)} of CPU time, "
                       f"most of it {costly.name} ({_duration(self.scale * costly.total)}); "
                       f"to shorten it {hint}, leave out {costly.name}, limit the jets it takes "
                       f"(--max-leaves {costly.name}=N) or read fewer entries (--entry-stop)")
        for c in self.costs:
            if c.time_limit is not None and c.n_run and c.over_limit > 0.5 * c.n_run:
                n_run = round(self.scale * c.n_run)
                out.append(f"warning: most jets ({self.scale * c.over_limit:.0f} of {n_run}) "
                           f"are predicted to hit --time-limit {c.time_limit:g} with {c.name}: "
                           "its results on them are what it had found when stopped (status "
                           "'budget', not proven)")
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines() + self.warnings())


def preview_jets(jets: Iterable[Any], config: BatchConfig, *, n_jets: int | None = None,
                 workers: int = 1) -> RunPreview:
    """The cost preview of running ``config`` on ``jets``.

    Args:
        jets: the jets (or the first ones of the run's inputs).
        config: the run's settings (algorithms, options, time and size limits).
        n_jets: the run's number of jets when ``jets`` are only the first of them (default:
            ``len(jets)``).
        workers: the run's worker processes (for the wall-time line).

    Returns:
        A :class:`RunPreview`.

    Example:
        >>> from jetastar.batch import BatchConfig
        >>> from jetastar.ginkgo import generate
        >>> preview = preview_jets(generate(10, seed=4), BatchConfig(["greedy", "beam"]))
        >>> preview.n_jets, preview.n_looked_at, preview.cpu_seconds() > 0
        (10, 10, True)
    """
    n_leaves, shape = cost_features(jets)
    costs = [predicted_cpu(name, n_leaves, shape, options_for(name, config, workers),
                           time_limit=None, max_leaves=size_limit(name, config))
             for name in config.algorithms]
    total = int(n_leaves.size if n_jets is None else n_jets)
    return RunPreview(costs, total, int(n_leaves.size), config.time_limit, workers)


def preview_inputs(inputs: Sequence[str | Path], config: BatchConfig, *, particles: Any = None,
                   entry_start: int | None = None, entry_stop: int | None = None,
                   workers: int = 1, sample: int = SAMPLE_JETS) -> RunPreview | None:
    """The cost preview of a batch run on files (what :func:`~jetastar.batch.run_batch` would
    do with the same arguments), from the first ``sample`` jets of each input.

    Args:
        inputs: the input files.
        config: the run's settings.
        particles: a :class:`~jetastar.io.ParticleSource` for particle files (its path is
            replaced by each input), ``None`` for jetastar files.
        entry_start, entry_stop: the entry range of particle files.
        workers: the run's worker processes.
        sample: jets read per input.

    Returns:
        A :class:`RunPreview`, or ``None`` when no input could be read (the run reports why).

    Example:
        >>> from jetastar.batch import BatchConfig
        >>> preview = preview_inputs(["data/ginkgo_w.h5"], BatchConfig(["greedy", "window-search"]))
        >>> preview.n_jets, [c.name for c in preview.costs]  # doctest: +SKIP
        (100, ['greedy', 'window-search'])
    """
    looked: list[Any] = []
    n_total = 0
    per_file = max(50, sample // max(1, len(inputs)))
    for path in inputs:
        try:
            source = (JetFileReader(path) if particles is None else
                      ParticleFileSource(dataclasses.replace(particles, path=str(path)),
                                         entry_start=entry_start, entry_stop=entry_stop))
        except Exception:  # (an unreadable input: the run itself says why)
            continue
        try:
            n = int(source.n_jets)
            if n:
                looked.extend(source.chunk(0, min(n, per_file), node_data=False))
            n_total += n
        except Exception:
            continue
        finally:
            source.close()
    if not looked:
        return None
    return preview_jets(looked, config, n_jets=n_total, workers=workers)
