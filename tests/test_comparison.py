"""The comparison table: same jets in every row, relative to the best tree, -inf counted."""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from pathlib import Path

import matplotlib
import numpy as np
import pytest

from jetastar import JetCollection
from jetastar import io as jio
from jetastar.clustering import ClusteringResult, exact_map, greedy, kt
from jetastar.comparison import (
    comparison_table,
    format_comparison,
    median_interval,
    results_summary,
    status_counts,
)
from jetastar.ginkgo import ShowerParams, generate, log_likelihood
from jetastar.io import AlgorithmResults

matplotlib.use("Agg")

BANDS = (2, 6, 9, 12)


@pytest.fixture(scope="module")
def results_file(tmp_path_factory: pytest.TempPathFactory):
    qcd = generate(24, ShowerParams.qcd(), seed=21, max_leaves=11)
    w = generate(16, ShowerParams.w(), seed=22, max_leaves=11)
    w.jet_id = w.jet_id + 100
    jets = JetCollection.concatenate([qcd, w])
    n = len(jets)
    idx = np.arange(n)
    tables = {}
    exact_rows = []
    for j in jets:
        if j.n_leaves > 9:  # an exact method with a size limit
            exact_rows.append(ClusteringResult(None, -math.inf, "exact", status="skipped",
                                               jet_id=j.jet_id))
        else:
            exact_rows.append(dataclasses.replace(exact_map(j), algorithm="exact"))
    tables["exact"] = AlgorithmResults.from_results("exact", exact_rows, jet_index=idx,
                                                    jet_id=jets.jet_id, exact_method=True)
    tables["greedy"] = AlgorithmResults.from_results("greedy", [greedy(j) for j in jets],
                                                     jet_index=idx, jet_id=jets.jet_id)
    tables["kt"] = AlgorithmResults.from_results("kt", [kt(j) for j in jets], jet_index=idx,
                                                 jet_id=jets.jet_id)
    path = tmp_path_factory.mktemp("cmp") / "res.h5"
    jio.write(path, jets, tables)
    return path, jets, tables


def _rows(rows, **kw):
    return [r for r in rows if all(r[k] == v for k, v in kw.items())]


def test_same_jets_in_every_row(results_file) -> None:
    path, jets, _ = results_file
    rows = comparison_table(path, bands=BANDS)
    assert {r["jet_type"] for r in rows} == {"QCD", "W"}
    for jt in ("QCD", "W"):
        n_type = int(np.sum(jets.jet_type == jt))
        all_rows = _rows(rows, jet_type=jt, band="all")
        assert {r["algorithm"] for r in all_rows} == {"exact", "greedy", "kt", "truth"}
        # one compared set per band, the same in every row; 'all' = the union of the bands
        bands = {r["band"] for r in rows if r["jet_type"] == jt} - {"all"}
        total = 0
        for band in bands:
            cmp = {r["compared"] for r in _rows(rows, jet_type=jt, band=band)}
            assert len(cmp) == 1
            total += cmp.pop()
        assert {r["compared"] for r in all_rows} == {total}
        assert total == n_type  # skipped exact rows do not shrink the compared jets
        exact_all = _rows(rows, jet_type=jt, band="all", algorithm="exact")[0]
        big = int(np.sum((jets.jet_type == jt) & (jets.n_leaves > 9)))
        assert exact_all["partial"] == (big > 0) and exact_all["skipped"] == big
        if big:
            assert math.isnan(exact_all["d_median"])


def test_relative_to_the_proven_map_with_minus_inf(results_file) -> None:
    path, jets, tables = results_file
    rows = comparison_table(path, bands=BANDS)
    sel = (jets.jet_type == "QCD") & (jets.n_leaves <= 9)
    band_rows = [r for r in _rows(rows, jet_type="QCD") if r["band"] in ("2-5", "6-8")]
    ex = tables["exact"].log_likelihood
    for alg in ("greedy", "kt"):
        mine = tables[alg].log_likelihood
        for r in _rows(band_rows, algorithm=alg):
            lo, hi = (2, 6) if r["band"] == "2-5" else (6, 9)
            in_band = sel & (jets.n_leaves >= lo) & (jets.n_leaves < hi)
            d = mine[in_band] - ex[in_band]
            med, dlo, dhi = median_interval(d)
            assert r["d_median"] == med and r["d_lo"] == dlo and r["d_hi"] == dhi
            assert r["finite"] == int(np.isfinite(mine[in_band]).sum())
            assert r["ran"] == r["jets"] == int(in_band.sum())
            assert r["map_known"] == int(in_band.sum())
            assert r["n_minus_inf"] == int(np.sum(mine[in_band] == -np.inf))
    # kt trees are mostly -inf on these jets: the median says so instead of averaging the rest
    kt_all = _rows(rows, jet_type="QCD", band="all", algorithm="kt")[0]
    assert kt_all["finite"] < kt_all["ran"]
    if kt_all["n_minus_inf"] * 2 > kt_all["compared"]:
        assert kt_all["d_median"] == -math.inf
    # where no exact MAP is known the best tree found is the reference: greedy is 0 there
    big = _rows(rows, jet_type="QCD", band="9-11", algorithm="greedy")
    if big and _rows(rows, jet_type="QCD", band="9-11", algorithm="kt")[0]["finite"] == 0:
        assert big[0]["d_median"] == 0.0
    # the truth tree is a row, below the MAP
    truth = _rows(rows, jet_type="W", band="all", algorithm="truth")[0]
    assert truth["d_median"] < 0
    w = jets.jet_type == "W"
    truth_ll = np.array([log_likelihood(j) for j in jets])
    assert truth["ran"] == int(w.sum()) and truth["finite"] == int(np.isfinite(truth_ll[w]).sum())


def test_reference_algorithm_and_errors(results_file) -> None:
    path, _, _ = results_file
    rows = comparison_table(path, bands=BANDS, reference="greedy")
    assert all(r["d_median"] == 0.0 for r in _rows(rows, algorithm="greedy"))
    with pytest.raises(ValueError, match="unknown reference"):
        comparison_table(path, reference="nope")
    # a results table alone does not hold the jets: the error says what does
    import jetastar.io as jio

    table = jio.read_results(path)["greedy"]
    for wrong in (table, [table], {"greedy": table}):
        with pytest.raises(TypeError, match=r"needs the jets .* jetastar\.cluster_jets"):
            comparison_table(wrong)


def test_format_and_plot(results_file, tmp_path) -> None:
    from jetastar.plotting import plot_comparison

    path, _, _ = results_file
    rows = comparison_table(path, bands=BANDS)
    text = format_comparison(rows)
    assert max(len(line) for line in text.splitlines()) <= 100
    assert "QCD jets" in text and "W jets" in text and "partial" in text and "-inf" in text
    fig = plot_comparison(rows, tmp_path / "c.png")
    assert (tmp_path / "c.png").stat().st_size > 10000
    assert len(fig.axes) == 6
    labels = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert labels[-1].startswith("all\nn=")
    # counts of a million jets stay short enough not to run into the next band's label
    big = [{**r, "compared": r["compared"] * 31_000, "jets": r["jets"] * 31_000} for r in rows]
    fig = plot_comparison(big, tmp_path / "big.png")
    labels = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert max(len(line) for label in labels for line in label.splitlines()) <= 12
    from jetastar.plotting import _count

    shown = {f"all\nn={_count(r['compared'])}/{_count(r['jets'])}" for r in big
             if r["band"] == "all"}
    assert labels[-1] in shown and "k/" in labels[-1]


def test_counts_in_tick_labels_are_short() -> None:
    from jetastar.plotting import _count

    assert [_count(n) for n in (0, 9999, 10_000, 135_085, 999_499, 999_500, 1_234_567,
                                999_500_000)] == ["0", "9999", "10k", "135k", "999k", "1M",
                                                  "1.23M", "1G"]


def test_status_counts(results_file) -> None:
    path, jets, tables = results_file
    counts = status_counts(path)
    kt_ll = tables["kt"].log_likelihood
    assert counts["kt"]["ran"] == len(jets)
    assert counts["kt"]["finite"] == int(np.isfinite(kt_ll).sum())
    assert counts["kt"]["minus_inf"] == int(np.sum(kt_ll == -np.inf)) > 0
    assert counts["exact"]["skipped"] == int(np.sum(jets.n_leaves > 9))
    # the same from the tables in memory: all of them, or one under its algorithm's name
    assert status_counts(tables) == {label: counts[label] for label in tables}
    assert status_counts(tables["kt"]) == {tables["kt"].algorithm: counts["kt"]}
    with pytest.raises(TypeError, match="status_counts needs a results file"):
        status_counts(42)


def test_median_interval() -> None:
    assert all(math.isnan(x) for x in median_interval([]))
    med, lo, hi = median_interval([-np.inf, -np.inf, 1.0])
    assert med == -np.inf and lo == -np.inf and hi <= 1.0
    med, lo, hi = median_interval(np.arange(101.0))
    assert med == 50.0 and 42 <= lo < 50 < hi <= 58
    assert median_interval([-np.inf, 1.0])[0] == -np.inf
    assert median_interval([1.0, 3.0])[0] == 2.0


def test_budget_stopped_exact_runs_and_skipped_methods_are_marked(tmp_path) -> None:
    """Issue 35 point 3: exact runs stopped by their budget were shown as exact (a "trellis" row
    below the window search with nothing saying so), and a skipped method was drawn at fraction 0
    in the "finite / any tree" panel (reading as "found no tree")."""
    from jetastar.plotting import plot_comparison

    jets = generate(12, ShowerParams.qcd(), seed=23, max_leaves=11)
    idx = np.arange(len(jets))
    exact_rows, big_only = [], []
    for j in jets:
        res = dataclasses.replace(exact_map(j), algorithm="exact")
        if j.n_leaves >= 6:  # cut off by the budget: the greedy tree as its incumbent
            g = greedy(j)
            res = dataclasses.replace(res, tree=g.tree, log_likelihood=g.log_likelihood,
                                      exact=False, status="budget", upper_bound=None)
        exact_rows.append(res)
        big_only.append(ClusteringResult(None, -math.inf, "big", status="skipped", jet_id=j.jet_id)
                        if j.n_leaves < 6 else dataclasses.replace(kt(j), algorithm="big"))
    n_cut = sum(r.status == "budget" for r in exact_rows)
    n_small = int((jets.n_leaves < 6).sum())
    assert 0 < n_cut < len(jets) and n_small > 0
    tables = {
        "exact": AlgorithmResults.from_results("exact", exact_rows, jet_index=idx,
                                               jet_id=jets.jet_id, exact_method=True),
        "greedy": AlgorithmResults.from_results("greedy", [greedy(j) for j in jets],
                                                jet_index=idx, jet_id=jets.jet_id),
        "big": AlgorithmResults.from_results("big", big_only, jet_index=idx, jet_id=jets.jet_id),
    }
    path = tmp_path / "res.h5"
    jio.write(path, jets, tables)
    rows = comparison_table(path, bands=(2, 6))
    [every] = _rows(rows, algorithm="exact", band="all")
    assert every["exact_method"] and every["budget"] == n_cut
    text = format_comparison(rows)
    assert max(len(line) for line in text.splitlines()) <= 100
    assert f"* exact: stopped by the time/memory budget on {n_cut} of the {len(jets)} jets" in text
    cut_lines = [line for line in text.splitlines() if line.startswith("exact*")]
    assert cut_lines and all(f" {n_cut} " in line or "6+" in line for line in cut_lines)
    assert not any(line.startswith("greedy*") for line in text.splitlines())
    fig = plot_comparison(rows, tmp_path / "c.png")
    legend = [t.get_text() for leg in fig.legends for t in leg.get_texts()]
    assert any(t.startswith("exact\n(stopped by budget on") and f"{n_cut} of {len(jets)}" in t
               for t in legend), legend
    assert any(t.get_text().endswith("stopped") for t in fig.axes[0].texts)
    ax_c = fig.axes[1]  # coverage panel: "big" skipped on the 2-5 band
    assert any(t.get_text() == "skipped" for t in ax_c.texts)
    big_k = list(dict.fromkeys(r["algorithm"] for r in rows)).index("big")
    fin_line = ax_c.get_lines()[2 * big_k]
    assert math.isnan(fin_line.get_ydata()[0]) and fin_line.get_ydata()[1] > 0


def test_verdicts_proven_window_optimal_budget(tmp_path) -> None:
    """Per jet: proven, window optimal or stopped by the budget; the table and the counts say how
    many of each."""
    from jetastar.clustering import window_search
    from jetastar.comparison import tree_verdicts

    params = ShowerParams.qcd(t_cut=1.0)
    jets = JetCollection.concatenate([
        generate(3, params, seed=32, min_leaves=19, max_leaves=19),
        generate(3, params, seed=31, min_leaves=12, max_leaves=12)])
    jets.jet_id = np.arange(len(jets))
    rows = []
    for i, j in enumerate(jets):
        if i == 0:
            rows.append(window_search(j, max_time=1e-6))  # stopped by the budget
        elif i == 2:
            rows.append(ClusteringResult(None, -math.inf, "window-search", status="failed",
                                         jet_id=j.jet_id))
        else:
            rows.append(window_search(j))
    idx = np.arange(len(jets))
    table = AlgorithmResults.from_results("window-search", rows, jet_index=idx,
                                          jet_id=jets.jet_id)
    greedy_table = AlgorithmResults.from_results("greedy", [greedy(j) for j in jets],
                                                 jet_index=idx, jet_id=jets.jet_id)
    expected = ["budget", "window optimal", "", "proven", "proven", "proven"]
    assert [r.status for r in rows] == ["budget", "ok", "failed", "ok", "ok", "ok"]
    assert [r.exact for r in rows] == [False, False, False, True, True, True]
    assert rows[1].stats["window_optimal"] and not rows[0].stats["window_optimal"]
    path = tmp_path / "v.h5"
    jio.write(path, jets, {"window-search": table, "greedy": greedy_table})
    back = jio.read_results(path)
    assert tree_verdicts(back["window-search"]).tolist() == expected
    assert set(tree_verdicts(back["greedy"]).tolist()) == {""}
    from jetastar.cli.shared import format_tree_counts

    line = format_tree_counts(status_counts(path))
    assert "; proven 3, window optimal 1" in line["window-search"]
    assert "proven" not in line["greedy"]
    counts = status_counts(path)["window-search"]
    assert counts["proven"] == expected.count("proven")
    assert counts["window_optimal"] == expected.count("window optimal")
    assert counts["budget"] == 1
    all_row = _rows(comparison_table(path), algorithm="window-search", band="all")[0]
    assert (all_row["proven"], all_row["window_optimal"], all_row["budget"]) == (
        expected.count("proven"), expected.count("window optimal"), 1)
    # the window search's proofs are proven MAPs for the table (no exact method ran here)
    assert all_row["map_known"] == all_row["map_found"] == expected.count("proven")
    text = format_comparison(comparison_table(path))
    assert "prov/wopt" in text and max(len(line) for line in text.splitlines()) <= 100
    assert f"{expected.count('proven')}/{expected.count('window optimal')}" in text


@pytest.mark.parametrize("ext", ["h5", "root"])
def test_status_counts_of_a_file_are_counted_block_by_block(tmp_path, results_file, ext) -> None:
    """A file's counts come from its status columns a block at a time (no trees, no texts): the
    same as the counts of its tables read whole, whatever the blocks, for every status, the
    verdicts (proven, window optimal, budget) and a table without rows."""
    from jetastar.io.dispatch import iterate_status_columns

    _, jets, tables = results_file
    tables = dict(tables)
    n = len(jets)
    idx = np.arange(n)
    wopt = np.where(idx % 3 == 0, 1.0, 0.0)
    status = np.where(idx % 5 == 0, "budget", "ok").astype(object)
    tables["window-search"] = AlgorithmResults(
        "window-search", jet_index=idx, jet_id=jets.jet_id,
        log_likelihood=tables["greedy"].log_likelihood, exact=idx % 7 == 0,
        log_z=np.full(n, np.nan), upper_bound=np.full(n, np.nan), n_trees=np.full(n, np.nan),
        time_s=np.zeros(n), status=status, message=[""] * n, options=["{}"] * n,
        node_offsets=tables["greedy"].node_offsets, children=tables["greedy"].children,
        leaf_of_node=tables["greedy"].leaf_of_node, counters={"window_optimal": wopt})
    # a table without rows between two others (kept by both formats, in its place)
    first = next(iter(tables))
    tables = {first: tables[first], "none": AlgorithmResults.from_results("none", [], jet_index=[]),
              **{k: v for k, v in tables.items() if k != first}}
    path = tmp_path / f"res.{ext}"
    jio.write(path, jets, tables)
    assert list(jio.read_results(path)) == list(tables)
    whole = {label: status_counts(t)[t.algorithm] for label, t in jio.read_results(path).items()}
    assert whole["window-search"]["window_optimal"] > 0 and whole["window-search"]["budget"] > 0
    assert whole["window-search"]["proven"] > 0 and whole["exact"]["skipped"] > 0
    assert whole["none"]["jets"] == 0
    assert jio.file_info(path)["results"]["none"]["rows"] == 0
    import jetastar.comparison as comparison

    def whole_tables(*args, **kwargs):
        raise AssertionError("status_counts read the whole tables")

    with pytest.MonkeyPatch.context() as m:
        m.setattr(comparison.io, "read_results", whole_tables)
        assert status_counts(path) == whole
        passes = []
        m.setattr(comparison, "iterate_status_columns",
                  lambda *a, **k: passes.append(1) or iterate_status_columns(*a, **k))
        summary = results_summary(path)
    assert passes == [1]
    # the summary's statuses and rows are file_info's, its counts status_counts', in one pass
    info = jio.file_info(path)["results"]
    assert list(summary) == list(info) == list(tables)
    for label, s in summary.items():
        assert {k: s[k] for k in ("algorithm", "likelihood", "rows", "status")} == info[label]
        assert s["counts"] == whole[label]
        assert s["status"] == dict(sorted(Counter(tables[label].status.tolist()).items()))
    # file_info without the results: no entry for them, and no row of them read
    with pytest.MonkeyPatch.context() as m:
        m.setattr(jio.root, "root_status_columns", whole_tables)
        read = jio.hdf5._File.read
        m.setattr(jio.hdf5._File, "read", lambda f, name, *a: whole_tables()
                  if name.startswith("results/") else read(f, name, *a))
        lean = jio.file_info(path, results=False)
    assert lean["results"] == {label: {k: s[k] for k in ("algorithm", "likelihood", "rows")}
                               for label, s in summary.items()}
    assert lean["n_jets"] == n and lean["attrs"] == jio.file_info(path)["attrs"]
    # blocks of 7 rows: a block of the ROOT results tree holds the end of one table and the
    # start of the next
    seen: dict[str, list[str]] = {}
    for label, block in iterate_status_columns(path, step_size=7):
        assert len(block["status"]) <= 7
        seen.setdefault(label, []).extend(str(s) for s in block["status"])
    assert seen == {label: [str(s) for s in t.status] for label, t in tables.items()}
    assert list(seen) == list(tables)


@pytest.mark.parametrize("ext", ["h5", "root"])
def test_comparison_of_a_file_reads_columns_not_trees(tmp_path, results_file, ext) -> None:
    """comparison_table of a file reads the jets' and results' columns it needs, block by block
    (not the leaves, trees or texts), and gives the rows of the same jets and tables in memory."""
    import jetastar.comparison as comparison
    from jetastar.inmemory import JetResults

    _, jets, tables = results_file
    path = tmp_path / f"res.{ext}"
    jio.write(path, jets, tables)
    expected = comparison_table(JetResults(jets, tables), bands=BANDS)
    assert any(r["algorithm"] == "truth" for r in expected)
    assert any(r["proven"] for r in expected if r["algorithm"] == "exact")

    def whole(*args, **kwargs):
        raise AssertionError("comparison_table read the whole file")

    with pytest.MonkeyPatch.context() as m:
        m.setattr(comparison.io, "read_results", whole)
        m.setattr(comparison.io, "read", whole)
        m.setattr(comparison, "_JET_BLOCK", 7)  # the jets in blocks
        rows = comparison_table(path, bands=BANDS)

    def plain(rows):
        return [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()}
                for r in rows]

    assert plain(rows) == plain(expected)


def test_mixed_likelihood_forms_are_said(tmp_path):
    """Algorithms scored in different forms are each compared within their own form: the table
    says so (two rows of 0.00 looked like two algorithms that agree)."""
    from jetastar.batch import BatchConfig, run_batch

    data = Path(__file__).resolve().parents[1] / "data" / "ginkgo_qcd.h5"
    mixed = BatchConfig(["greedy", "beam"], options={"*": {"likelihood": "legacy"},
                                                     "greedy": {"likelihood": "symmetric"}})
    (s,) = run_batch([data], mixed, output=tmp_path / "mixed.h5", progress=False)
    assert s.ok
    text = format_comparison(comparison_table(tmp_path / "mixed.h5"))
    assert "different likelihood forms (greedy: symmetric, beam: legacy)" in " ".join(
        text.split())
    assert max(len(line) for line in text.splitlines()) <= 110
    (s,) = run_batch([data], BatchConfig(["greedy", "beam"]), output=tmp_path / "one.h5",
                     progress=False)
    assert "different likelihood forms" not in format_comparison(
        comparison_table(tmp_path / "one.h5"))
