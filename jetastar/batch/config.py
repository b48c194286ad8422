"""What a batch run does to every jet: :class:`BatchConfig`, its checks and the option strings.

A :class:`BatchConfig` names the algorithms, their options, the time and size limits, the plugin
modules and the chunk size. :func:`check_config` validates it against the algorithm registry (and
converts every option to its declared type) before any work starts; :func:`options_for` gives the
keyword options one algorithm receives. The ``--option`` / ``--max-leaves`` strings of the command
line are parsed by :func:`parse_options`, :func:`parse_option_value` and :func:`parse_limits`.

Example:
    >>> from jetastar.batch import BatchConfig, check_config, parse_options
    >>> config = BatchConfig(["beam"], options=parse_options(["beam.beam_size=10"]))
    >>> check_config(config)
    >>> config.options
    {'beam': {'beam_size': 10}}
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import math
import os
from collections.abc import Iterable
from typing import Any

import numpy as np

from .._cuda import resolve_device
from ..clustering import algorithm_info, algorithms
from ..clustering.chunks import COSTLY_CHUNK_SIZE, SHORT_CHUNK_SIZE
from ..clustering.options import unknown_options_message
from ..clustering.registry import TIME_OPTIONS
from ..clustering.threads import check_threads
from ..errors import BatchError, GpuUnavailableError, OptionError
from ..result_tables import unit_options

__all__ = [
    "COLUMNAR_CHUNK_SIZE",
    "COSTLY_COLUMNAR_CHUNK_SIZE",
    "DEFAULT_CHUNK_SIZE",
    "TIME_OPTIONS",
    "BatchConfig",
    "accepted_options",
    "auto_chunk_size",
    "check_config",
    "estimated_costs",
    "import_plugins",
    "load_registry",
    "options_for",
    "parse_limits",
    "parse_option_value",
    "parse_options",
    "size_limit",
]

#: jets per chunk of a run with an algorithm that clusters jet by jet (each jet costs 0.1 ms or
#: more, so a chunk's fixed cost is small already, and small chunks keep the workers balanced)
DEFAULT_CHUNK_SIZE = 50
#: jets per chunk when every algorithm runs on the columnar path with cheap jets (greedy and the kt
#: family: :data:`~jetastar.clustering.chunks.SHORT_CHUNK_SIZE`, which says how it was measured)
COLUMNAR_CHUNK_SIZE = SHORT_CHUNK_SIZE
#: the first chunks' size when every algorithm runs on the columnar path but some cost up to
#: 10 ms a jet (beam search, MCTS, the exact MAP of small jets; later chunks are sized by the
#: measured cost)
COSTLY_COLUMNAR_CHUNK_SIZE = COSTLY_CHUNK_SIZE


@dataclasses.dataclass
class BatchConfig:
    """What to run on every jet.

    Args:
        algorithms: registry names, in output order (a comma-separated string works too).
        options: per algorithm name, keyword options (``{"beam": {"beam_size": 10}}``); the key
            ``"*"`` holds options for every algorithm that accepts them.
        time_limit: seconds per jet and algorithm (see :mod:`jetastar.batch`), ``None`` = none.
        max_leaves: per algorithm name, a size limit overriding the registry's ``max_leaves``
            (jets with more leaves are recorded as ``"skipped"``).
        plugins: modules to import (in the master and every worker) before running, e.g. modules
            that register extra algorithms.
        chunk_size: jets per work unit (and per part file); ``None``: chosen by
            :func:`check_config` from the algorithms' cost (:func:`auto_chunk_size`), and in
            :func:`~jetastar.batch.run_batch` only for the first chunks: later chunks are sized by
            the measured cost of the finished ones (about two seconds of work each).
        threads: numba threads per process for the algorithms with a ``threads`` option (the exact
            engines); default: all cores with one worker, one per worker with several. Results do
            not depend on it, so it is not part of the settings a resumed run must repeat.
        device: ``"cpu"``, ``"gpu"`` or ``"auto"`` (``None``: each algorithm's default, auto) for
            the algorithms with a ``device`` option (the exact trellis); like ``threads`` it does
            not change results and is not part of what a resumed run must repeat. Each worker
            process uses its current CUDA device (set ``CUDA_VISIBLE_DEVICES`` per process to
            spread workers over several GPUs).
    """

    algorithms: list[str]
    options: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    time_limit: float | None = None
    max_leaves: dict[str, int] = dataclasses.field(default_factory=dict)
    plugins: list[str] = dataclasses.field(default_factory=list)
    chunk_size: int | None = 50
    threads: int | None = None
    device: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.algorithms, str):  # "greedy" or "greedy,kt": names, not letters
            self.algorithms = [a.strip() for a in self.algorithms.split(",") if a.strip()]

    def fingerprint(self) -> dict[str, Any]:
        """The settings of a run, recorded with its parts and its output; all but ``chunk_size``
        must match for them to be reused (parts of any chunking are)."""
        return {
            "algorithms": list(self.algorithms),
            "options": unit_options(self.options),
            "time_limit": self.time_limit,
            "max_leaves": dict(self.max_leaves),
            "chunk_size": None if self.chunk_size is None else int(self.chunk_size),
        }


def import_plugins(modules: Iterable[str]) -> None:
    """Import modules (that register algorithms); a missing one raises a clear error."""
    for name in modules:
        hint = ""
        if name.endswith(".py") or "/" in name or os.sep in name:
            # a file path (./myplug.py): importlib's own error is about relative imports
            raise BatchError(
                f"plugin {name!r}: give a module name, not a file (--plugin "
                f"{os.path.splitext(os.path.basename(name))[0]}, with its folder on PYTHONPATH, "
                "e.g. PYTHONPATH=. for the current one)")
        try:
            importlib.import_module(name)
        except ImportError as exc:
            if getattr(exc, "name", None) == name.split(".")[0] and os.path.exists(
                    f"{name.split('.')[0]}.py"):
                hint = (f" ({name.split('.')[0]}.py is in the current folder, which is not on "
                        "Python's path for the jetastar command: PYTHONPATH=. jetastar ...)")
            raise BatchError(f"cannot import plugin module {name!r}: {exc}{hint}") from None


def load_registry(plugins: Iterable[str]) -> None:
    """Make every algorithm known to the registry: jetastar's own (registered when
    :mod:`jetastar.clustering` is imported, as this module does) and those of the plugin modules.

    Args:
        plugins: module names to import.

    Raises:
        BatchError: a plugin that cannot be imported.
    """
    import_plugins(plugins)


def accepted_options(name: str) -> list[str]:
    """The keyword options algorithm ``name`` accepts."""
    return algorithm_info(name).options()


def options_for(name: str, config: BatchConfig, n_workers: int) -> dict[str, Any]:
    """The keyword options algorithm ``name`` gets: its own, the shared ones (``"*"``) it accepts,
    the time limit as its time option, ``threads`` (1 when several workers share the cores) and
    ``progress=False``.

    Args:
        name: a registry name.
        config: the run's settings.
        n_workers: how many processes cluster at the same time.
    """
    info = algorithm_info(name)
    accepted = set(info.options())
    opts = {k: v for k, v in config.options.get("*", {}).items() if k in accepted}
    opts.update(config.options.get(name, {}))
    if config.time_limit is not None and info.time_option not in (None, *opts):
        opts[info.time_option] = float(config.time_limit)
    if "threads" in accepted and "threads" not in opts:
        if config.threads is not None:
            opts["threads"] = int(config.threads)
        elif n_workers > 1:
            opts["threads"] = 1
    if "device" in accepted and "device" not in opts and config.device is not None:
        opts["device"] = config.device
    if "progress" in accepted and "progress" not in opts:
        opts["progress"] = False
    return opts


def auto_chunk_size(config: BatchConfig) -> int:
    """The chunk size for a run that does not set one: when every algorithm runs on the columnar
    path (one kernel call per chunk, whose fixed cost would otherwise dominate), the smallest of
    their chunk paths' sizes (:data:`COLUMNAR_CHUNK_SIZE` for greedy and the kt family,
    :data:`COSTLY_COLUMNAR_CHUNK_SIZE` for beam search, MCTS and the exact MAP), else
    :data:`DEFAULT_CHUNK_SIZE`. Later chunks are sized by the measured cost.

    Example:
        >>> auto_chunk_size(BatchConfig(["greedy", "kt"])), auto_chunk_size(BatchConfig(["astar"]))
        (5000, 50)
        >>> auto_chunk_size(BatchConfig(["greedy", "window-search"]))  # (its large jets: per jet)
        50
        >>> auto_chunk_size(BatchConfig(["greedy", "beam"]))
        200
    """
    sizes = []
    for name in config.algorithms:
        info = algorithm_info(name)
        flat = info.chunk_options(options_for(name, config, 1))
        if flat is None or not info.chunk.whole:  # jet by jet, or only some jets in chunks
            return DEFAULT_CHUNK_SIZE
        sizes.append(info.chunk.batch_chunk_size(flat))
    return min(sizes, default=DEFAULT_CHUNK_SIZE)


def estimated_costs(n_leaves: np.ndarray, config: BatchConfig) -> np.ndarray | None:
    """Each jet's typical CPU seconds under the run's algorithms whose cost grows fast with the
    jet (those that declare an :attr:`~jetastar.clustering.AlgorithmInfo.expected_cpu`: the
    exact MAP engine, the window search), for the jets within their size limit; ``None`` when no
    algorithm of the run has such an estimate (the cost of the others is measured as chunks
    finish).

    Example:
        >>> estimated_costs(np.array([6, 20, 30]), BatchConfig(["greedy"])) is None
        True
        >>> costs = estimated_costs(np.array([6, 20, 30]), BatchConfig(["trellis"]))
        >>> bool(costs[0] < 0.01 < 1 < costs[1]), float(costs[2])  # (30 leaves: over the limit)
        (True, 0.0)
    """
    timed = [(algorithm_info(name).expected_cpu, options_for(name, config, 1),
              size_limit(name, config))
             for name in config.algorithms if algorithm_info(name).expected_cpu is not None]
    if not timed:
        return None
    sizes, where = np.unique(np.asarray(n_leaves, dtype=np.int64), return_inverse=True)
    per_size = np.zeros(sizes.shape[0], dtype=np.float64)
    for k, n in enumerate(sizes.tolist()):
        for expected_cpu, opts, limit in timed:
            if 2 <= n and (limit is None or n <= limit):
                per_size[k] += expected_cpu(n, opts) or 0.0
    return per_size[where]


def size_limit(name: str, config: BatchConfig) -> int | None:
    """The largest jet (in leaves) algorithm ``name`` runs on: the config's override, else the
    registry's ``max_leaves`` of an exact method, else ``None`` (no limit)."""
    if name in config.max_leaves:
        return int(config.max_leaves[name])
    info = algorithm_info(name)
    return info.max_leaves if info.exact else None


def check_config(config: BatchConfig) -> None:
    """Validate algorithm names and options against the registry (raises a one-line error).

    Option values are converted to their declared types in place (``"false"`` becomes ``False``).

    Raises:
        BatchError: an unknown algorithm or option, a bad value or limit.
    """
    load_registry(config.plugins)
    if not config.algorithms:
        raise BatchError(f"no algorithms given; available: {', '.join(algorithms())}")
    for name in config.algorithms:
        try:
            algorithm_info(name)
        except (ValueError, TypeError) as exc:
            raise BatchError(str(exc)) from None
    twice = sorted({a for a in config.algorithms if config.algorithms.count(a) > 1})
    if twice:
        raise BatchError(f"algorithm(s) given more than once: {', '.join(twice)}")
    for name, opts in config.options.items():
        if name == "*":
            for key in opts:
                if not any(key in algorithm_info(a).options() for a in config.algorithms):
                    raise BatchError(
                        f"option {key!r} is not accepted by any of {', '.join(config.algorithms)}"
                    )
            continue
        if name not in config.algorithms:
            raise BatchError(f"options given for {name!r}, which is not among the algorithms run")
        valid = algorithm_info(name).options()
        unknown = sorted(set(opts) - set(valid))
        if unknown:
            raise BatchError(unknown_options_message(name, unknown, valid))
    if config.chunk_size is None:
        config.chunk_size = auto_chunk_size(config)
    if config.chunk_size < 1:
        raise BatchError("chunk size must be >= 1")
    if config.device is not None:
        try:
            resolve_device(config.device)
        except (OptionError, GpuUnavailableError) as exc:
            raise BatchError(f"--device: {exc}") from None
    if config.threads is not None:
        try:
            check_threads(config.threads)
        except ValueError as exc:
            raise BatchError(f"--threads: {exc}") from None
    if config.time_limit is not None and not (
            isinstance(config.time_limit, (int, float)) and 0 < config.time_limit < math.inf):
        raise BatchError(f"the time limit must be a finite number > 0 seconds, got "
                         f"{config.time_limit!r}")
    _check_values(config)


def _check_values(config: BatchConfig) -> None:
    """Option values (converted to their declared types, in place) and size limits are valid
    for every algorithm they reach — before any work starts."""
    for name in config.algorithms:
        info = algorithm_info(name)
        accepted = set(info.options())
        shared = {k: v for k, v in config.options.get("*", {}).items() if k in accepted}
        try:
            checked = info.check_options({**shared, **config.options.get(name, {})},
                                         unknown=False)
        except ValueError as exc:
            raise BatchError(str(exc)) from None
        if name in config.options:
            config.options[name] = {k: checked[k] for k in config.options[name]}
    for key, value in list(config.options.get("*", {}).items()):
        users = [a for a in config.algorithms if key in algorithm_info(a).options()
                 and key not in config.options.get(a, {})]
        if users:
            config.options["*"][key] = algorithm_info(users[0]).check_options(
                {key: value}, unknown=False)[key]
    for name, limit in config.max_leaves.items():
        if name not in config.algorithms:
            raise BatchError(f"size limit given for {name!r}, which is not among the algorithms "
                             f"run ({', '.join(config.algorithms)})")
        if isinstance(limit, bool) or not isinstance(limit, (int, np.integer)) or limit < 0:
            raise BatchError(f"the size limit of {name!r} must be an integer >= 0, got {limit!r}")


def parse_option_value(text: str) -> Any:
    """A ``--option`` value: JSON when it parses (numbers, true/false/null, lists), else text.

    Example:
        >>> parse_option_value("10"), parse_option_value("true"), parse_option_value("abc")
        (10, True, 'abc')
    """
    try:
        return json.loads(text)
    except ValueError:
        lowered = text.strip().lower()
        if lowered in ("none", "null"):
            return None
        if lowered in ("inf", "+inf", "infinity"):
            return math.inf
        return text


def parse_options(items: Iterable[str]) -> dict[str, dict[str, Any]]:
    """``["beam.beam_size=10", "likelihood=legacy"]`` -> ``{"beam": {...}, "*": {...}}``.

    ``name.key=value`` applies to algorithm ``name``; ``key=value`` to every algorithm that accepts
    ``key``.

    Raises:
        BatchError: for an item without ``=``.
    """
    out: dict[str, dict[str, Any]] = {}
    for item in items:
        if "=" not in item:
            raise BatchError(f"option {item!r} is not of the form key=value or algorithm.key=value")
        key, value = item.split("=", 1)
        key = key.strip()
        alg, _, name = key.rpartition(".")
        if not name:
            raise BatchError(f"option {item!r} has an empty name")
        out.setdefault(alg or "*", {})[name] = parse_option_value(value)
    return out


def parse_limits(items: Iterable[str]) -> dict[str, int]:
    """``["trellis=12"]`` -> ``{"trellis": 12}`` (``--max-leaves``)."""
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        try:
            if not sep:
                raise ValueError
            out[name.strip()] = int(value)
        except ValueError:
            raise BatchError(f"size limit {item!r} is not of the form algorithm=N") from None
    return out
