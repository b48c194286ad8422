"""The notebooks execute top to bottom (small sizes, time limit)."""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


@pytest.mark.parametrize("name", ["quickstart.ipynb", "map_vs_truth.ipynb", "inference.ipynb"])
def test_notebook_runs(name: str, monkeypatch, tmp_path):
    monkeypatch.setenv("JETASTAR_NB_JETS", "16")
    monkeypatch.setenv("JETASTAR_NB_MAX_LEAVES", "8")
    monkeypatch.setenv("JETASTAR_NB_LARGE_JETS", "2")
    monkeypatch.setenv("JETASTAR_NB_FIT_JETS", "120")
    monkeypatch.setenv("JETASTAR_NB_REAL_EVIDENCE", "0")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    client = NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()
    errors = [
        out for cell in nb.cells if cell.cell_type == "code"
        for out in cell.get("outputs", []) if out.get("output_type") == "error"
    ]
    assert not errors
    assert os.environ.get("JETASTAR_NB_JETS") == "16"
