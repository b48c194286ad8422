"""The analysis scripts' command lines: what they refuse before any work starts."""
from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

ANALYSIS = Path(__file__).resolve().parents[1] / "analysis"


def _script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"_analysis_{name}", ANALYSIS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_paper_jets_plot_only_without_results_stops_and_writes_nothing(tmp_path: Path) -> None:
    paper_jets = _script("paper_jets")
    figures = tmp_path / "figures"
    with pytest.raises(SystemExit, match=r"no results in .*empty.*run the study first"):
        paper_jets.main(["--plot-only", "--out", str(tmp_path / "empty"), "--figures", str(figures)])
    assert not figures.exists()


def test_paper_jets_quick_uses_its_own_folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A quick run must not write over the committed figures of the full study."""
    paper_jets = _script("paper_jets")
    monkeypatch.setattr(paper_jets, "HERE", tmp_path)
    with pytest.raises(SystemExit, match="paper_jets_quick"):
        paper_jets.main(["--quick", "--plot-only"])
    with pytest.raises(SystemExit, match=r"results[/\\]paper_jets \(N"):
        paper_jets.main(["--plot-only"])
    assert not (tmp_path / "figures").exists()


def test_aloi_plot_only_without_results_stops(tmp_path: Path) -> None:
    aloi = _script("aloi_hcc")
    figures = tmp_path / "figures"
    with pytest.raises(SystemExit, match=r"no results at .*aloi_hcc\.json"):
        aloi.main(["--plot-only", "--results", str(tmp_path), "--figures", str(figures)])
    assert not figures.exists()


def test_aloi_with_other_settings_uses_its_own_folders(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """`aloi_hcc.py --max-exact 18` wrote over the committed figure (analysis/figures/aloi)."""
    aloi = _script("aloi_hcc")
    monkeypatch.setattr(aloi, "HERE", tmp_path)
    with pytest.raises(SystemExit, match=r"results[/\\]aloi_custom[/\\]aloi_hcc\.json"):
        aloi.main(["--max-exact", "15", "--plot-only"])
    with pytest.raises(SystemExit, match=r"results[/\\]aloi_hcc\.json"):
        aloi.main(["--plot-only"])
    assert not (tmp_path / "figures").exists()


def test_calibration_writes_its_summary_and_pulls(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Two tiny pseudo-experiments per setting: the summary, the table and the figure exist and
    say what was fitted (λ for QCD jets, λ_R for selected W jets)."""
    import json

    calibration = _script("calibration")
    monkeypatch.setattr(calibration, "HERE", tmp_path)
    assert calibration.main(["--true", "1.5", "--experiments", "2", "--jets", "60",
                             "--estimators", "density", "truth", "--tag", "tiny"]) == 0
    out = json.loads((tmp_path / "results" / "tiny.json").read_text())
    rows = out["summaries"]["density"]
    assert [r["true"] for r in rows] == [1.5] and rows[0]["experiments"] == 2
    assert 0.5 < rows[0]["mean"] < 3.0 and 0.0 <= rows[0]["coverage68"] <= 1.0
    assert "| density | 1.5 |" in (tmp_path / "results" / "tiny.md").read_text()
    assert (tmp_path / "figures" / "tiny" / "pulls.png").is_file() and out["complete"]
    assert calibration.main(["--jet-type", "w", "--max-leaves", "8", "--true", "3",
                             "--experiments", "2", "--jets", "30", "--estimators", "truth",
                             "--tag", "tiny_w"]) == 0
    assert "true λ_R" in (tmp_path / "results" / "tiny_w.md").read_text()
