"""Compare clustering algorithms on the same jets: log-likelihood relative to the best tree.

:func:`comparison_table` reads a results file (jets + one results table per algorithm, as written by
``jetastar cluster`` / ``jetastar run``) and returns one row per jet type (QCD, W, ...), algorithm and
leaf-count band. The rules that make it honest:

* **Relative to the best tree of each jet.** ``ΔlogL = log L(tree) − log L(best)``, where *best* is
  the proven MAP when an algorithm proved it (an exact method that finished, or the window
  search's proof, ``exact=True``), else the highest log-likelihood any
  algorithm found (``reference="best"``, the default), or a named algorithm's tree. 0 is the best
  possible value; the truth tree gets a row too (it is usually far below the MAP).
* **The same jets in every row.** Within a band, the statistics of every algorithm are over the
  ``cmp`` jets where every algorithm that ran on the band produced a tree (an exact method skipped on
  some jets of the band for their size does not shrink it: it gets no numbers there, ``partial``).
  The ``all`` row of a jet type is over the union of its bands' ``cmp`` jets; an algorithm without
  a tree on some of them gets no numbers in ``all`` (``partial``), so every ``all`` row with
  numbers covers exactly the same jets.
* **−∞ counts.** A tree with zero likelihood is −∞ nats from the best tree, not left out: the
  statistic is the median of ``ΔlogL`` over the compared jets, −∞ values included (so it is −∞ when
  more than half the trees are impossible), with an approximate 68 % confidence interval from order
  statistics. ``ran`` (jets with a tree) and ``finite`` (trees with non-zero likelihood) are counted
  apart; averaging over finite trees only would rank an algorithm by the jets where it happens to
  produce a possible tree (a selection effect).

:func:`format_comparison` prints the table (under 100 columns),
:func:`jetastar.plotting.plot_comparison` draws it, :func:`status_counts` gives the per-algorithm
counts of a results file (ran / finite / −∞ / skipped / failed / budget / proven / window
optimal). :func:`tree_verdicts` says per jet what an algorithm's tree is: ``"proven"`` (the proven
MAP), ``"window optimal"`` (the window search converged: no window it tried improves the tree, no
proof), ``"budget"`` (stopped by the time budget) or ``""`` (none of these: a heuristic's tree, or
no tree).

Example:
    >>> from jetastar.comparison import comparison_table  # doctest: +SKIP
    >>> rows = comparison_table("results.h5")  # doctest: +SKIP
"""

from __future__ import annotations

import math
import os
import textwrap
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from . import io
from ._text import text_column
from .io import truth_log_likelihoods
from .io.dispatch import columns, iterate_status_columns, status_columns
from .io.schema import TRUTH_LIKELIHOODS

__all__ = [
    "DEFAULT_BANDS",
    "TREE_STATUSES",
    "comparison_table",
    "format_comparison",
    "mass_policy_counts",
    "median_interval",
    "results_summary",
    "status_counts",
    "table_counts",
    "tree_verdicts",
]

#: leaf-count band edges (a band is ``[edge_k, edge_{k+1})``, the last one open).
DEFAULT_BANDS = (2, 6, 10, 14, 18, 25, 40, 70, 120)

#: statuses of rows that hold a tree
TREE_STATUSES = ("ok", "budget", "all_inf")

_TRUTH = "truth"


def _band_label(lo: int, hi: int | None) -> str:
    return f"{lo}+" if hi is None else (f"{lo}-{hi - 1}" if hi - 1 > lo else f"{lo}")


def median_interval(values: Any, level: float = 0.6827) -> tuple[float, float, float]:
    """Median of ``values`` (−∞ allowed) and an approximate confidence interval from order statistics.

    The interval runs between the order statistics ``n/2 ∓ z √n / 2`` (the normal approximation of
    the binomial distribution of the number of values below the median), so it needs no variance and
    works with −∞ values.

    Args:
        values: numbers, −∞ allowed (NaN is dropped).
        level: the confidence level (default 68.27 %, one standard deviation).

    Returns:
        ``(median, low, high)``; NaNs for no values.

    Example:
        >>> median_interval([1.0, 2.0, 3.0, 4.0, 5.0])
        (3.0, 2.0, 4.0)
    """
    from scipy.special import ndtri  # (scipy.stats takes ~0.6 s to import)

    v = np.asarray(values, dtype=np.float64).ravel()
    v = np.sort(v[~np.isnan(v)])
    n = v.shape[0]
    if n == 0:
        return math.nan, math.nan, math.nan
    with np.errstate(invalid="ignore"):
        med = float(np.median(v)) if np.isfinite(v).all() else float(_median_with_inf(v))
    z = float(ndtri(0.5 + level / 2.0))
    half = z * math.sqrt(n) / 2.0
    lo = int(max(0, math.floor(n / 2.0 - half)))
    hi = int(min(n - 1, math.ceil(n / 2.0 + half) - 1))
    return med, float(v[lo]), float(v[max(hi, lo)])


def _median_with_inf(v: np.ndarray) -> float:
    """Median of sorted values that may hold −∞ (the mean of two middle values, −∞ if either is)."""
    n = v.shape[0]
    if n % 2:
        return float(v[n // 2])
    a, b = v[n // 2 - 1], v[n // 2]
    if a == -np.inf or b == -np.inf:
        return -math.inf
    return float(0.5 * (a + b))


def tree_verdicts(table: Any) -> np.ndarray:
    """Per row of an algorithm's results: what its tree is.

    Args:
        table: an :class:`~jetastar.io.AlgorithmResults`.

    Returns:
        ``(R,)`` str: ``"proven"`` (``exact`` and finished: the MAP), ``"budget"`` (stopped by the
        time budget; not proven), ``"window optimal"`` (the window search's ``window_optimal``
        counter: no window it tried improves the tree, not proven) or ``""``.

    Example:
        >>> tree_verdicts(io.read_results("results.h5")["window-search"])  # doctest: +SKIP
        array(['proven', 'window optimal', ...], dtype=object)
    """
    return _verdicts(table.status, table.exact, table.counters)


def _verdicts(status: np.ndarray, exact: np.ndarray, counters: dict[str, np.ndarray]) -> np.ndarray:
    """:func:`tree_verdicts` from the columns it reads."""
    status = np.asarray(status, dtype=object)
    out = text_column(status.shape[0], "")
    wopt = counters.get("window_optimal")
    if wopt is not None:
        out[np.nan_to_num(np.asarray(wopt, dtype=np.float64)) > 0] = "window optimal"
    out[status == "budget"] = "budget"
    out[np.asarray(exact, dtype=bool) & np.isin(status, ["ok", "all_inf"])] = "proven"
    return out


def status_counts(results: Any) -> dict[str, dict[str, int]]:
    """Per algorithm: ``jets``, ``ran`` (with a tree), ``finite``, ``minus_inf``, ``skipped``,
    ``failed``, ``budget``, ``proven`` and ``window_optimal`` (:func:`tree_verdicts`).

    Args:
        results: a results file, the results of :func:`jetastar.cluster_jets` (or any mapping of
            labels to :class:`~jetastar.io.AlgorithmResults`), or one table
            (``jetastar.cluster(jets, name)``), counted under its algorithm's name.

    Example:
        >>> status_counts("results.h5")["kt"]  # doctest: +SKIP
        {'jets': 100, 'ran': 100, 'finite': 31, 'minus_inf': 69, 'skipped': 0, 'failed': 0, ...}
        >>> import jetastar
        >>> from jetastar.ginkgo import ShowerParams, generate
        >>> table = jetastar.cluster(generate(3, ShowerParams.qcd(), seed=1), "greedy")
        >>> status_counts(table)["greedy"]["ran"]
        3
    """
    if isinstance(results, (str, os.PathLike)):
        return {label: s["counts"] for label, s in results_summary(results).items()}
    if hasattr(results, "keys") and hasattr(results, "items"):
        tables = dict(results)
    elif hasattr(results, "algorithm") and hasattr(results, "status"):
        tables = {results.algorithm: results}
    else:
        raise TypeError(f"status_counts needs a results file, cluster_jets' results or one "
                        f"results table; got {type(results).__name__}")
    return {label: table_counts(t) for label, t in tables.items()}


def results_summary(path: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """What each results table of a file holds, from one pass over its status columns (block by
    block, without the trees and texts: memory does not grow with the file).

    Args:
        path: a results file.

    Returns:
        Per label: ``algorithm``, ``likelihood``, ``rows``, ``status`` (status -> rows, sorted)
        and ``counts`` (those of :func:`status_counts`).

    Example:
        >>> import os, tempfile
        >>> import jetastar
        >>> from jetastar.ginkgo import ShowerParams, generate
        >>> jets = generate(3, ShowerParams.qcd(), seed=1)
        >>> path = os.path.join(tempfile.mkdtemp(), "results.h5")
        >>> io.write(path, jets, {"greedy": jetastar.cluster(jets, "greedy")})
        >>> summary = results_summary(path)["greedy"]
        >>> summary["rows"], summary["status"], summary["counts"]["finite"]
        (3, {'ok': 3}, 3)
    """
    out: dict[str, dict[str, Any]] = {}
    for label, block in iterate_status_columns(path):
        counts = _column_counts(block["status"], block["log_likelihood"], block["exact"],
                                block["counters"])
        seen = out.setdefault(label, {
            "algorithm": block.get("algorithm", label), "likelihood": block["likelihood"],
            "rows": 0, "status": {}, "counts": dict.fromkeys(counts, 0)})
        seen["rows"] += counts["jets"]
        for k, v in counts.items():
            seen["counts"][k] += v
        for k, v in Counter(np.asarray(block["status"]).tolist()).items():
            seen["status"][str(k)] = seen["status"].get(str(k), 0) + v
    for seen in out.values():
        seen["status"] = dict(sorted(seen["status"].items()))
    return out


def table_counts(table: Any) -> dict[str, int]:
    """The counts of :func:`status_counts` for one table (an
    :class:`~jetastar.io.AlgorithmResults`; counts of several tables of one algorithm add up).

    Example:
        >>> table_counts(io.read_results("results.h5")["kt"])["finite"]  # doctest: +SKIP
        31
    """
    return _column_counts(table.status, table.log_likelihood, table.exact, table.counters)


def _column_counts(status: np.ndarray, log_likelihood: np.ndarray, exact: np.ndarray,
                   counters: dict[str, np.ndarray]) -> dict[str, int]:
    """:func:`table_counts` from the columns it reads (a block of a table's rows)."""
    status = np.asarray(status, dtype=object)
    tree = np.isin(status, TREE_STATUSES)
    fin = tree & np.isfinite(np.asarray(log_likelihood, dtype=np.float64))
    return {
        "jets": int(status.shape[0]), "ran": int(tree.sum()), "finite": int(fin.sum()),
        "minus_inf": int((tree & ~fin).sum()),
        "skipped": int((status == "skipped").sum()), "failed": int((status == "failed").sum()),
        "budget": int((status == "budget").sum()),
        **_verdict_counts(_verdicts(status, exact, counters)),
    }


def _verdict_counts(verdicts: np.ndarray | None) -> dict[str, int]:
    if verdicts is None:
        return {"proven": 0, "window_optimal": 0}
    return {"proven": int((verdicts == "proven").sum()),
            "window_optimal": int((verdicts == "window optimal").sum())}


def mass_policy_counts(path: str | os.PathLike[str]) -> dict[str, int] | None:
    """How many particles the mass policy changed, from the by-entry table (``clusters``) that a
    results file of particle-file inputs holds; ``None`` for a file without one (or unreadable).

    Returns:
        ``jets``, ``particles``, ``particles_touched`` and ``jets_touched`` (changed by the mass
        policy), ``particles_negative_t`` and ``jets_negative_t`` (left with ``E² − |p|² < 0``) — the
        keys of :func:`jetastar.particles.mass_report`.

    Example:
        >>> mass_policy_counts("events.results.root")["particles_touched"]  # doctest: +SKIP
        12
    """
    names = ("n_particles", "n_mass_adjusted", "n_negative_t")
    try:
        fmt = io.file_format(path)  # (not file_info: it reads every result row)
        columns: Any = {}
        if fmt == "hdf5":
            import h5py

            with h5py.File(path, "r") as f:
                if "clusters" in f:
                    columns = {k: f[f"clusters/{k}"][()] for k in names}
        else:
            import uproot

            with uproot.open(path) as f:
                if "clusters" in f:
                    columns = f["clusters"].arrays(list(names), library="np")
    except (OSError, ValueError, KeyError):
        return None
    if not len(columns):
        return None
    touched = np.asarray(columns["n_mass_adjusted"])
    negative = np.asarray(columns["n_negative_t"])
    return {
        "jets": int(touched.shape[0]),
        "particles": int(np.sum(columns["n_particles"])),
        "particles_touched": int(touched.sum()),
        "jets_touched": int(np.count_nonzero(touched)),
        "particles_negative_t": int(negative.sum()),
        "jets_negative_t": int(np.count_nonzero(negative)),
    }


def comparison_table(
    path: str | os.PathLike[str] | Any,
    bands: Sequence[int] = DEFAULT_BANDS,
    reference: str = "best",
    tol: float = 1e-9,
) -> list[dict[str, Any]]:
    """Per jet type, algorithm and leaf band: ΔlogL to the best tree, coverage, exact-MAP rate, time.

    Args:
        path: a results file (jets + results) written by ``jetastar cluster`` / ``run``, or the
            :class:`~jetastar.inmemory.JetResults` of :func:`~jetastar.inmemory.cluster_jets`.
        bands: increasing leaf-count edges; the last band is open; an ``"all"`` row is added per
            jet type and algorithm.
        reference: ``"best"`` (the proven MAP where known, else the best tree any algorithm found)
            or the name of an algorithm in the file.
        tol: relative tolerance for "found the exact MAP".

    Returns:
        One dict per row with ``jet_type``, ``algorithm`` (``"truth"`` for the truth trees),
        ``likelihood``, ``band``, ``jets`` (of the band), ``ran``, ``finite``, ``skipped``,
        ``failed``, ``budget`` (coverage over all jets of the band), ``proven``,
        ``window_optimal`` (jets of the band whose tree is proven / window optimal,
        :func:`tree_verdicts`), ``compared`` (the jets the
        statistics are over: the same for every algorithm of the band), ``partial`` (the algorithm
        has no tree on some compared jets: no statistics), ``d_median``, ``d_lo``, ``d_hi`` (median
        ΔlogL with its ~68 % interval, −∞ included), ``n_minus_inf`` (compared jets where the tree
        is −∞), ``time_median`` (seconds), ``map_known``, ``map_found`` (jets of the band with a
        proven MAP, and how many of them this algorithm matched), ``reference`` and
        ``exact_method`` (an exact method: its ``budget`` jets were stopped before the proof, their
        trees are incumbents, not MAPs; :func:`format_comparison` and the plot mark them).

    Raises:
        FileFormatError: for a file without results.
        ValueError: for an unknown reference algorithm.
        TypeError: for anything but a path or a JetResults (e.g. one results table).
    """
    if hasattr(path, "jets") and hasattr(path, "keys"):  # in-memory results (JetResults)
        collection, tables = path.jets, dict(path)
        blocks: Any = ((label, status_columns(t)) for label, t in tables.items())
        jets = _collection_columns(collection)
    elif not isinstance(path, (str, os.PathLike)):
        raise TypeError(
            f"comparison_table needs the jets with the results: a results file, or the JetResults "
            f"of jetastar.cluster_jets(jets, [...]); got {type(path).__name__} (a results table "
            "alone does not hold the jets: run cluster_jets with every algorithm to compare)"
        )
    else:
        # the columns it needs, block by block: memory does not grow with the file's trees
        blocks = iterate_status_columns(path)
        jets = None
    n = -1
    ll: dict[str, np.ndarray] = {}
    status: dict[str, np.ndarray] = {}
    times: dict[str, np.ndarray] = {}
    verdicts: dict[str, np.ndarray] = {}
    proven_ll: dict[str, np.ndarray] = {}  # proven MAP values, per algorithm that proved them
    forms: dict[str, str] = {}
    exact_method: dict[str, bool] = {}
    for label, block in blocks:
        if jets is None:
            jets = _file_jet_columns(path)
        n = jets.n
        if label not in ll:
            ll[label], times[label], proven_ll[label] = (np.full(n, np.nan) for _ in range(3))
            status[label] = text_column(n, "missing")
            verdicts[label] = text_column(n, "")
            forms[label] = block["likelihood"]
            exact_method[label] = block["exact_method"]
        idx = np.asarray(block["jet_index"], dtype=np.int64)
        st = np.asarray(block["status"], dtype=object)
        values = np.asarray(block["log_likelihood"], dtype=np.float64)
        tree = np.isin(st, TREE_STATUSES)
        ll[label][idx[tree]] = values[tree]
        status[label][idx] = st
        times[label][idx] = block["time_s"]
        verdicts[label][idx] = _verdicts(st, block["exact"], block["counters"])
        # a proven MAP from any algorithm: an exact method, or the window search's ``exact_map``
        # path and ``prove`` (``exact`` means proven, whoever sets it)
        good = np.asarray(block["exact"], dtype=bool) & np.isin(st, ["ok", "all_inf"])
        proven_ll[label][idx[good]] = values[good]
    if not ll:
        raise io.FileFormatError(f"{path}: holds no clustering results (run jetastar cluster)")
    if reference != "best" and reference not in ll:
        raise ValueError(f"unknown reference {reference!r}; use 'best' or one of "
                         f"{', '.join(ll)}")
    assert jets is not None
    n_leaves, jet_types = jets.n_leaves, jets.jet_type
    has = {label: ~np.isnan(v) for label, v in ll.items()}
    # per likelihood form: proven MAP where known, best found, truth
    proven: dict[str, np.ndarray] = {}
    best: dict[str, np.ndarray] = {}
    for form in set(forms.values()):
        known = np.full(n, np.nan)
        top = np.full(n, -np.inf)
        for label in ll:
            if forms[label] != form:
                continue
            top = np.fmax(top, np.where(has[label], ll[label], -np.inf))
            known = np.where(np.isnan(known), proven_ll[label], known)
        proven[form] = known
        best[form] = np.where(np.isnan(known), top, known)
    truth: dict[str, np.ndarray] = {}
    if jets.has_truth.any():
        for form in set(forms.values()):
            truth[form] = np.where(jets.has_truth, jets.truth(form), np.nan)

    edges = list(bands)
    band_of = np.searchsorted(np.asarray(edges), n_leaves, side="right") - 1
    band_list = [(_band_label(lo, edges[k + 1] if k + 1 < len(edges) else None), band_of == k)
                 for k, lo in enumerate(edges)]
    labels = list(ll)
    rows: list[dict[str, Any]] = []
    for jt in sorted(set(jet_types), key=lambda x: (x != "QCD", x)):
        of_type = jet_types == jt
        selections = [(name, sel & of_type) for name, sel in band_list if (sel & of_type).any()]
        compared: dict[str, np.ndarray] = {}
        for name, sel in selections:
            common = sel.copy()
            for label in labels:
                # an algorithm skipped on part of the band (a size limit) does not shrink it
                if (has[label] & sel).any() and not (status[label][sel] == "skipped").any():
                    common &= has[label]
            compared[name] = common
        union = np.zeros(n, dtype=bool)
        for c in compared.values():
            union |= c
        selections.append(("all", of_type))
        compared["all"] = union
        row_labels = labels + ([_TRUTH] if truth else [])
        for label in row_labels:
            form = forms[label] if label != _TRUTH else _truth_form(forms)
            values = truth[form] if label == _TRUTH else ll[label]
            have = ~np.isnan(values)
            if reference == "best":
                ref = best[form]
            else:
                ref = ll[reference] if forms[reference] == form else np.full(n, np.nan)
            for name, sel in selections:
                cmp = compared[name]
                row = _row(jt, label, form, name, sel, cmp, values, have, ref, proven[form],
                           status.get(label), times.get(label), tol, reference)
                row["exact_method"] = bool(label != _TRUTH and exact_method[label])
                vd = verdicts.get(label)
                row.update(_verdict_counts(None if vd is None else vd[sel]))
                rows.append(row)
    return rows


class _JetColumns(NamedTuple):
    """What :func:`comparison_table` reads of the jets: their number, leaf counts, types,
    which have a truth tree, and the truth trees' log-likelihood in a form."""

    n: int
    n_leaves: np.ndarray
    jet_type: np.ndarray
    has_truth: np.ndarray
    truth: Callable[[str], np.ndarray]


def _collection_columns(collection: Any) -> _JetColumns:
    _, jet_extra = io.get_extras(collection)

    def truth(form: str) -> np.ndarray:
        values = jet_extra.get(f"truth_llh_{form}")
        return (np.asarray(values, dtype=np.float64) if values is not None
                else truth_log_likelihoods(collection, form))

    return _JetColumns(len(collection), np.asarray(collection.n_leaves),
                       np.asarray([str(t) for t in collection.jet_type], dtype=object),
                       np.diff(collection.node_offsets) > 0, truth)


#: jets read at a time by :func:`_file_jet_columns`
_JET_BLOCK = 200_000


def _file_jet_columns(path: str | os.PathLike[str]) -> _JetColumns:
    """:class:`_JetColumns` of a file, read column by column a block of jets at a time (not its
    leaves, trees or node momenta)."""
    n = io.n_jets(path)
    n_leaves, has_truth = np.zeros(n, np.int64), np.zeros(n, bool)
    jet_type = np.empty(n, dtype=object)
    truth = {form: np.full(n, np.nan) for form in TRUTH_LIKELIHOODS}
    with columns(path) as cols:
        for a in range(0, n, _JET_BLOCK):
            b = min(n, a + _JET_BLOCK)
            got = cols.read(["leaf_offsets", "node_offsets", "jet_type",
                             *(f"truth_llh_{form}" for form in TRUTH_LIKELIHOODS)], a, b)
            n_leaves[a:b] = np.diff(got["leaf_offsets"])
            has_truth[a:b] = np.diff(got["node_offsets"]) > 0
            jet_type[a:b] = [str(t) for t in got["jet_type"]]
            for form in TRUTH_LIKELIHOODS:
                truth[form][a:b] = got[f"truth_llh_{form}"]
    return _JetColumns(n, n_leaves, jet_type, has_truth, truth.__getitem__)


def _truth_form(forms: dict[str, str]) -> str:
    values = list(forms.values())
    return max(set(values), key=values.count)


def _row(jt: str, label: str, form: str, band: str, sel: np.ndarray, cmp: np.ndarray,
         values: np.ndarray, have: np.ndarray, ref: np.ndarray, proven: np.ndarray,
         status: np.ndarray | None, times: np.ndarray | None, tol: float,
         reference: str) -> dict[str, Any]:
    partial = bool((cmp & ~have).any())
    use = cmp & have & ~np.isnan(ref)
    with np.errstate(invalid="ignore"):
        d = np.where(use, values - ref, np.nan)
        # −∞ minus a finite best is −∞; both −∞ (no finite tree at all) counts as 0 behind
        d = np.where(use & (values == -np.inf) & (ref == -np.inf), 0.0, d)
        known = sel & ~np.isnan(proven) & have
        found = known & ((values == proven)
                         | (np.abs(values - proven) <= tol * np.maximum(1.0, np.abs(proven))))
    med = lo = hi = math.nan
    if not partial and use.any():
        med, lo, hi = median_interval(d[use])
    st = status[sel] if status is not None else np.where(have[sel], "ok", "missing")
    ran = int(have[sel].sum())
    fin = int((have & np.isfinite(values) & sel).sum())
    t_med = math.nan
    if times is not None and not partial and cmp.any():
        tv = times[cmp]
        tv = tv[np.isfinite(tv)]
        t_med = float(np.median(tv)) if tv.size else math.nan
    return {
        "jet_type": jt, "algorithm": label, "likelihood": form, "band": band,
        "jets": int(sel.sum()), "ran": ran, "finite": fin,
        "skipped": int((st == "skipped").sum()), "failed": int((st == "failed").sum()),
        "budget": int((st == "budget").sum()), "compared": int(cmp.sum()), "partial": partial,
        "d_median": med, "d_lo": lo, "d_hi": hi,
        "n_minus_inf": int((use & (d == -np.inf)).sum()),
        "time_median": t_med, "map_known": int((sel & ~np.isnan(proven)).sum()),
        "map_found": int(found.sum()), "reference": reference,
    }


def _fmt_d(x: float) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if x == -math.inf:
        return "-inf"
    if abs(x) < 0.005:
        return "0.00"
    return f"{x:+.2f}" if abs(x) < 100 else f"{x:+.0f}"


def _fmt_time(t: float) -> str:
    if t is None or math.isnan(t):
        return "-"
    if t < 1e-3:
        return f"{t * 1e6:.0f} us"
    if t < 1.0:
        return f"{t * 1e3:.1f} ms"
    return f"{t:.2f} s"


def _fmt_verdicts(r: dict[str, Any]) -> str:
    proven, wopt = r.get("proven", 0), r.get("window_optimal", 0)
    if r["algorithm"] == _TRUTH or not (proven or wopt):
        return "-"
    return f"{proven}/{wopt}"


def format_comparison(rows: Sequence[dict[str, Any]], reference: str | None = None) -> str:
    """The comparison table as aligned text (one section per jet type, under 100 columns).

    Args:
        rows: :func:`comparison_table` rows.
        reference: only for the heading (default: the rows' ``reference``).
    """
    if not rows:
        return "(no results)"
    ref = reference or rows[0]["reference"]
    ref_text = "best tree" if ref == "best" else f"{ref} tree"
    head = ["algorithm", "leaves", "jets", "ran", "finite", "stop", "cmp", "dlogL", "68% interval",
            "MAP found", "time/jet", "prov/wopt"]
    right = {2, 3, 4, 5, 6, 7, 9, 10, 11}
    out: list[str] = []
    for jt in dict.fromkeys(r["jet_type"] for r in rows):
        sub = [r for r in rows if r["jet_type"] == jt]
        all_rows = [r for r in sub if r["band"] == "all"]
        known = max((r["map_known"] for r in all_rows), default=0)
        n_jets = max((r["jets"] for r in all_rows), default=0)
        out.append(f"{jt} jets ({n_jets}, proven MAP for {known}): "
                   f"dlogL = log L - log L({ref_text} of the jet)")
        lines = []
        cut_notes = []
        for r in sub:
            name = r["algorithm"][:13]
            if r.get("exact_method") and r["budget"]:
                name += "*"  # an exact method with runs stopped by the budget: not exact there
                if r["band"] == "all":
                    attempted = r["jets"] - r["skipped"]
                    cut_notes.append(f"* {r['algorithm']}: stopped by the time/memory budget on "
                                     f"{r['budget']} of the {attempted} jets it ran on;\n"
                                     "  there its trees are incumbents, not proven MAPs")
            interval = "-" if math.isnan(r["d_lo"]) else f"[{_fmt_d(r['d_lo'])}, {_fmt_d(r['d_hi'])}]"
            if r["partial"]:
                interval = "partial"
            found = "-" if r["map_known"] == 0 or r["algorithm"] == _TRUTH else \
                f"{r['map_found']}/{r['map_known']}"
            lines.append([
                name, r["band"], str(r["jets"]), str(r["ran"]), str(r["finite"]),
                str(r["budget"]) if r["budget"] else "-", str(r["compared"]),
                _fmt_d(r["d_median"]), interval, found,
                _fmt_time(r["time_median"]) if r["algorithm"] != _TRUTH else "-",
                _fmt_verdicts(r),
            ])
        widths = [max(len(h), *(len(x[k]) for x in lines)) for k, h in enumerate(head)]

        def fmt(cells: Sequence[str], widths: Sequence[int] = widths) -> str:
            return " ".join(c.rjust(w) if k in right else c.ljust(w)
                            for k, (c, w) in enumerate(zip(cells, widths, strict=True)))

        out.append(fmt(head))
        out.append(" ".join("-" * w for w in widths))
        prev = None
        for cells in lines:
            if prev is not None and cells[0].rstrip("*") != prev:
                out.append("")
            prev = cells[0].rstrip("*")
            out.append(fmt(cells))
        out.extend(cut_notes)
        forms = {r["algorithm"]: r["likelihood"] for r in sub
                 if r["algorithm"] != _TRUTH and r.get("likelihood")}
        if len(set(forms.values())) > 1:
            listed = ", ".join(f"{a}: {f}" for a, f in forms.items())
            out.append(textwrap.fill(
                f"note: these algorithms scored their trees in different likelihood forms "
                f"({listed}); each is compared with the {ref_text} of its own form, so values "
                "of different forms do not compare", width=96, subsequent_indent="  "))
        out.append("")
    out.append(
        "ran = jets with a tree, finite = of which with non-zero likelihood, stop = of which stopped\n"
        "by the time/memory budget (the best tree so far; * = an exact method, not exact there).\n"
        "cmp = jets the dlogL and time columns are over: every algorithm that ran on the band has a\n"
        "tree for them (the same jets in every row of a band; 'all' = the union of the bands' cmp\n"
        "jets; 'partial' = no tree on some of them). dlogL = median of log L - log L(reference)\n"
        "with -inf trees included (-inf when more than half are impossible under the model), 68%\n"
        "interval of the median from order statistics. MAP found = trees equal in log L to a\n"
        "proven MAP (to a relative 1e-9).\n"
        "prov/wopt = jets whose tree is proven the MAP / window optimal (the window search\n"
        "converged, no proof); stopped by the time budget: neither (see the stop column).\n"
        "best tree = the proven MAP where an algorithm proved it, else the highest log L found.")
    return "\n".join(out)
