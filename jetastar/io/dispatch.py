"""The format-independent functions of :mod:`jetastar.io`: each finds the file's format in the
registry of :mod:`jetastar.io.formats` and calls it.

Example:
    >>> import os, tempfile
    >>> from jetastar import JetCollection
    >>> path = os.path.join(tempfile.mkdtemp(), "none.root")
    >>> write(path, JetCollection.from_jets([]))
    >>> n_jets(path)
    0
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..clustering.result import ClusteringResult
from ..jet import JetCollection
from ..result_tables import AlgorithmResults
from . import hdf5, legacy, root  # noqa: F401  (importing a format module registers it)
from ._common import check_exists
from .formats import ColumnReader, format_of, writable_format

__all__ = ["columns", "file_info", "iterate", "iterate_status_columns", "n_jets", "read",
           "read_results", "read_results_rows", "results_table", "status_columns", "stream_writer",
           "write"]


def written_attrs(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The provenance attributes of a file jetastar wrote (an HDF5 file's root attributes, a ROOT
    file's ``meta`` JSON); ``None`` for any other file, or one that cannot be read.

    Example:
        >>> written_attrs("no-such-file.h5") is None
        True
    """
    p = Path(path)
    try:
        with open(p, "rb") as f:
            head = f.read(8)
        if head == b"\x89HDF\r\n\x1a\n":
            import h5py

            with h5py.File(p, "r") as h:
                attrs = {k: h.attrs[k] for k in h.attrs}
        elif head[:4] == b"root":
            import uproot

            with uproot.open(p) as f:
                attrs = json.loads(str(f["meta"])) if "meta" in f else None
        else:
            return None
    except Exception:  # (unreadable: not jetastar's to judge)
        return None
    if not isinstance(attrs, dict) or "jetastar_version" not in attrs:
        return None
    return attrs


def read(
    path: str | os.PathLike[str], jets: Any = None, *, validate: bool = True
) -> JetCollection:
    """Read a jet collection from an HDF5, ROOT or legacy pickle file.

    Args:
        path: the file (format from the extension).
        jets: ``None`` for all jets, or a slice / index / array of positions; HDF5 and ROOT read only
            the parts of the file that hold them.
        validate: check every selected jet (finite, positive energies, leaf counts, tree sizes)
            and raise :class:`InvalidJetInFileError` for the first bad one.

    Returns:
        A :class:`~jetastar.JetCollection`; extra columns (legacy ``deltas``, cached truth
        log-likelihoods) are in ``collection.node_columns`` / ``collection.jet_columns``.

    Example:
        >>> from jetastar import io
        >>> jets = io.read("tests/data/legacy_ginkgo_W_sample.pkl")  # doctest: +SKIP
    """
    return format_of(check_exists(path)).read(path, jets, validate=validate)


def n_jets(path: str | os.PathLike[str]) -> int:
    """Number of jets in a file (reads only metadata for HDF5/ROOT)."""
    return format_of(check_exists(path)).n_jets(path)


def iterate(
    path: str | os.PathLike[str], step_size: int = 10000, *, validate: bool = True
) -> Iterator[JetCollection]:
    """Yield the jets of a file in consecutive collections of at most ``step_size`` jets.

    ROOT files are read with ``uproot.iterate``; HDF5 files slice by slice.
    """
    yield from format_of(check_exists(path)).iterate(path, step_size, validate=validate)


def iterate_status_columns(path: str | os.PathLike[str], step_size: int = 200_000
                           ) -> Iterator[tuple[str, dict[str, Any]]]:
    """The columns that say what each row of a file's results is, without its tree and texts:
    ``(label, block)`` pairs, each table's rows in order, at most ``step_size`` rows a block, so
    memory does not grow with the file (the tables are those :func:`read_results` finds, in
    the order written: a table without rows gives one empty block).

    A block holds ``jet_index`` (int64), ``status`` (str), ``log_likelihood``, ``time_s``
    (float64), ``exact`` (bool), ``counters`` (name -> float64) and the table's ``algorithm``,
    ``likelihood`` and ``exact_method``. :func:`jetastar.comparison.status_counts` and
    :func:`~jetastar.comparison.comparison_table` of a file read them block by block.

    Example:
        >>> import os, tempfile
        >>> import jetastar
        >>> from jetastar.ginkgo import ShowerParams, generate
        >>> jets = generate(3, ShowerParams.qcd(), seed=1)
        >>> path = os.path.join(tempfile.mkdtemp(), "results.h5")
        >>> write(path, jets, {"greedy": jetastar.cluster(jets, "greedy")})
        >>> [(label, block["status"].tolist()) for label, block in iterate_status_columns(path)]
        [('greedy', ['ok', 'ok', 'ok'])]
    """
    fmt = format_of(check_exists(path))
    if fmt.name == "hdf5":
        yield from hdf5.hdf5_status_columns(path, step_size)
    elif fmt.name == "root":
        yield from root.root_status_columns(path, step_size)
    else:  # formats without their own reader: the whole tables
        for label, t in fmt.read_results(path, None, None).items():
            yield label, status_columns(t)


def read_results_rows(path: str | os.PathLike[str], label: str, start: int,
                      stop: int) -> AlgorithmResults:
    """Rows ``start:stop`` of one results table of a file, with their trees, without reading the
    other rows (to go through a large file a block of rows at a time).

    Example:
        >>> import os, tempfile
        >>> import jetastar
        >>> from jetastar.ginkgo import ShowerParams, generate
        >>> jets = generate(5, ShowerParams.qcd(), seed=1)
        >>> path = os.path.join(tempfile.mkdtemp(), "results.root")
        >>> write(path, jets, {"greedy": jetastar.cluster(jets, "greedy")})
        >>> read_results_rows(path, "greedy", 1, 3).jet_index.tolist()
        [1, 2]
    """
    fmt = format_of(check_exists(path))
    if fmt.name == "hdf5":
        return hdf5.hdf5_results_rows(path, label, start, stop)
    if fmt.name == "root":
        return root.root_results_rows(path, label, start, stop)
    table = fmt.read_results(path, [label], None)[label]
    return table.take(np.arange(max(0, start), max(0, min(stop, len(table)))))


def status_columns(table: AlgorithmResults) -> dict[str, Any]:
    """The block of :func:`iterate_status_columns` of a whole table."""
    return {"jet_index": table.jet_index, "status": table.status,
            "log_likelihood": table.log_likelihood, "time_s": table.time_s,
            "exact": table.exact, "counters": table.counters, "algorithm": table.algorithm,
            "likelihood": table.likelihood, "exact_method": table.exact_method}


def results_table(
    algorithm: str, results: Sequence[ClusteringResult], jet_index: Any = None, **kw: Any
) -> AlgorithmResults:
    """An :class:`AlgorithmResults` from a list of results (row ``k`` = jet ``jet_index[k]``,
    default ``k``)."""
    if jet_index is None:
        jet_index = range(len(results))
    return AlgorithmResults.from_results(algorithm, list(results), jet_index=list(jet_index), **kw)


def _labelled(results: Any) -> Mapping[str, Any]:
    """``results`` as label -> results: a mapping as it is; one table (``jetastar.cluster(jets,
    name)``), a sequence of tables, or one algorithm's list of results under their algorithm's
    name."""
    if results is None:
        return {}
    if isinstance(results, Mapping) or callable(getattr(results, "items", None)):
        return results  # a mapping, or a JetResults (cluster_jets)
    if isinstance(results, AlgorithmResults):
        return {results.algorithm: results}
    if isinstance(results, (list, tuple)):
        if all(isinstance(r, AlgorithmResults) for r in results):
            names = [r.algorithm for r in results]
            twice = sorted({n for n in names if names.count(n) > 1})
            if twice:
                raise ValueError(f"two results tables of {', '.join(twice)}: pass a mapping "
                                 "label -> table to write both")
            return dict(zip(names, results, strict=True))
        if results and all(isinstance(r, ClusteringResult) for r in results):
            return {results[0].algorithm: results}
    raise TypeError(
        "results must be a mapping label -> AlgorithmResults (or a list of ClusteringResult), one "
        f"AlgorithmResults table, or a list of them; got {type(results).__name__}"
    )


def _as_tables(
    results: Any, collection: JetCollection | None
) -> dict[str, AlgorithmResults]:
    out: dict[str, AlgorithmResults] = {}
    for label, value in _labelled(results).items():
        if isinstance(value, AlgorithmResults):
            # rows re-indexed to the positions of their jets in what is written (schema: /jets)
            out[label] = value if collection is None else value.for_jets(collection)
            continue
        value = list(value)
        if collection is not None and len(value) != len(collection):
            raise ValueError(
                f"results of {label!r}: {len(value)} results for {len(collection)} jets; pass an "
                "AlgorithmResults (with jet_index) for a subset"
            )
        ids = None if collection is None else collection.jet_id
        out[label] = AlgorithmResults.from_results(
            value[0].algorithm if value else label, value, jet_index=range(len(value)), jet_id=ids
        )
    return out


def _check_folder(path: str | os.PathLike[str]) -> None:
    """Refuse to write ``path`` into a folder that does not exist (:class:`FileNotFoundError`)."""
    parent = Path(path).parent
    if not parent.is_dir():
        raise FileNotFoundError(f"{path}: directory {parent} does not exist")


def write(
    path: str | os.PathLike[str],
    collection: JetCollection | None,
    results: Any = None,
    *,
    attrs: Mapping[str, Any] | None = None,
) -> None:
    """Write jets (and optionally clustering results) to an HDF5 or ROOT file, atomically.

    Args:
        path: ``.h5``/``.hdf5`` or ``.root``; an existing file is replaced only once the new one is
            complete.
        collection: the jets (``None``: results only; a list of :class:`~jetastar.Jet` is
            collected), or the results of :func:`jetastar.cluster_jets`, which hold their jets
            (then ``results`` is left out).
        results: label (usually the algorithm name) -> :class:`AlgorithmResults` or a list of
            :class:`~jetastar.clustering.ClusteringResult`, one per jet in collection order; or
            one table (``jetastar.cluster(jets, "greedy")``), a list of tables, or one
            algorithm's list of results, each under its algorithm's name.
        attrs: provenance to record (``seed``, ``command``, ``generator``, ...); jetastar version,
            date and command line are added automatically.

    Example:
        >>> import os, tempfile
        >>> from jetastar import io, JetCollection
        >>> io.write(os.path.join(tempfile.mkdtemp(), "x.root"), JetCollection.from_jets([]))
    """
    fmt = writable_format(path)
    if results is None and isinstance(collection, Mapping) and hasattr(collection, "jets"):
        collection, results = collection.jets, dict(collection)  # cluster_jets' results
    if isinstance(collection, Sequence) and not isinstance(collection, (str, JetCollection)):
        collection = JetCollection.from_jets(list(collection))
    if collection is not None and not isinstance(collection, JetCollection):
        raise TypeError(
            f"io.write needs the jets as a JetCollection (or a list of Jets, or cluster_jets' "
            f"results, which hold them), got {type(collection).__name__}")
    tables = _as_tables(results, collection)
    _check_folder(path)
    fmt.write(path, collection, tables, attrs=attrs)


def columns(path: str | os.PathLike[str]) -> ColumnReader:
    """A :class:`~jetastar.io.formats.ColumnReader` of a jet file: some columns of a range of jets
    without reading the others (close it when done).

    Example:
        >>> import os, tempfile
        >>> from jetastar.ginkgo import ShowerParams, generate
        >>> path = os.path.join(tempfile.mkdtemp(), "jets.h5")
        >>> write(path, generate(3, ShowerParams.qcd(), seed=1))
        >>> with columns(path) as cols:
        ...     cols.read(["leaf_offsets"], 0, 2)["leaf_offsets"].shape
        (3,)
    """
    return format_of(check_exists(path)).columns(path)


def stream_writer(path: str | os.PathLike[str], attrs: Mapping[str, Any] | None = None,
                  need: int = 0) -> Any:
    """A writer of an HDF5 or ROOT file block by block (``add_jets``, ``add_results``, ``close``;
    see :class:`~jetastar.io.hdf5.HDF5StreamWriter`), atomic like :func:`write`.

    Args:
        path: the file (``.h5``/``.root``).
        attrs: provenance to record (as :func:`write`).
        need: an upper estimate of the file's size, checked against the free space.
    """
    fmt = writable_format(path)
    _check_folder(path)
    return fmt.stream_writer(path, attrs, need)


def read_results(
    path: str | os.PathLike[str], algorithms: Any = None, *, jets: Any = None
) -> dict[str, AlgorithmResults]:
    """Clustering results stored in a file: label -> :class:`AlgorithmResults`.

    Use ``table.result(row)`` / ``table.results()`` for :class:`ClusteringResult` objects and
    ``table.jet_index`` to find each row's jet.

    Args:
        path: an HDF5 or ROOT file written by jetastar.
        algorithms: labels to read (default: all).
        jets: only rows of these jet positions (slice or array).
    """
    return format_of(check_exists(path)).read_results(path, algorithms, jets)


def file_info(path: str | os.PathLike[str], *, results: bool = True) -> dict[str, Any]:
    """A summary of a file: format, schema version, provenance, jet counts, leaf counts
    (``n_leaves`` array), jet types, extra columns and, per result label, rows per status.

    Args:
        path: a file jetastar reads.
        results: count the results' rows by status (``False``: each table's ``algorithm``,
            ``likelihood`` and ``rows`` as its metadata says, without ``status``; no row of the
            results is read, a fraction of the time for a file of millions of rows;
            :func:`jetastar.comparison.results_summary` counts them in one pass).
    """
    return format_of(check_exists(path)).info(path, results=results)
