"""The last step of an input's batch run: its part files merged into the output file.

:func:`merge_parts` follows the protocol of :mod:`jetastar.batch.resume`: every jet exactly once
per algorithm, the input unchanged since its hash was taken, one atomic write, then the part folder
is removed. :func:`status_counts_of` reads back what an output holds.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np

from .. import io
from .._progress import progress_bar
from ..errors import BatchError
from ..io.hdf5 import read_hdf5_results
from ..jet import JetCollection
from ..result_tables import AlgorithmResults
from .config import BatchConfig
from .resume import part_name
from .sources import JetSource

__all__ = ["check_unchanged", "merge_parts", "status_counts_of"]


def merge_parts(
    reader: JetSource, out: Path, parts: Path, chunks: list[tuple[int, int]], config: BatchConfig,
    attrs: dict[str, Any] | None, *, progress: bool = False,
) -> None:
    """Write the output of an input whose chunks are all done, and remove its part folder.

    Args:
        reader: the input.
        out: the output file.
        parts: its part folder.
        chunks: every chunk ``(start, stop)`` of the input, in order.
        config: the run's settings.
        attrs: attributes of the output (``input_identity``: the identity taken at the start).
        progress: a bar over the part files read, shown when the merge takes over 2 s (after the
            clustering bar has reached 100 %, a long merge is then not silent).

    Raises:
        BatchError: a part without an algorithm, jets missing or duplicated, or an input that
            changed while it was clustered.
    """
    tables: dict[str, list[AlgorithmResults]] = {a: [] for a in config.algorithms}
    with progress_bar(total=len(chunks), desc=f"merging {out.name}", unit="part", show=progress,
                      delay=2.0) as bar:
        for a, b in chunks:
            part = read_hdf5_results(parts / part_name(a, b))
            for name in config.algorithms:
                if name not in part:
                    raise BatchError(f"{parts / part_name(a, b)}: has no results for {name!r}")
                tables[name].append(part[name])
            bar.update(1)
    n = reader.n_jets
    merged = {}
    for name, pieces in tables.items():
        table = AlgorithmResults.concatenate(pieces) if pieces else None
        if table is None:
            table = AlgorithmResults.from_results(name, [], jet_index=[])
        idx = table.jet_index
        if idx.shape[0] != n or not np.array_equal(np.sort(idx), np.arange(n)):
            counts = np.bincount(idx, minlength=n) if idx.size else np.zeros(n, np.int64)
            raise BatchError(
                f"{out}: results of {name!r} are inconsistent: {int(np.sum(counts == 0))} jets "
                f"missing, {int(np.sum(counts > 1))} duplicated"
            )
        merged[name] = table
    collection = reader.whole()
    check_unchanged(reader, collection, (attrs or {}).get("input_identity"))
    meta = {
        "input": str(reader.path),
        "batch": {**config.fingerprint(), "plugins": list(config.plugins)},
        **(attrs or {}),
    }
    io.write(out, collection, merged, attrs=meta)
    shutil.rmtree(parts, ignore_errors=True)


def check_unchanged(reader: JetSource, collection: JetCollection,
                    identity: dict[str, Any] | None) -> None:
    """The jets written with the results are the jets whose hash was taken at the start.

    Raises:
        BatchError: the input's content hash differs from ``identity["sha256"]``.
    """
    if identity is None:
        return
    if reader.digest(collection) != identity["sha256"]:
        raise BatchError(
            f"{reader.path}: the input changed while it was being clustered; rerun with --fresh"
        )


def status_counts_of(out: Path) -> dict[str, dict[str, int]]:
    """Per algorithm of a results file: status -> number of jets."""
    info = io.file_info(out)
    return {k: dict(v["status"]) for k, v in info.get("results", {}).items()}
