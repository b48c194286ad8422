"""Project hygiene: lint, and CI running exactly the README's test command."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    setup = text.split("## Set-up", 1)[1].split("\n## ", 1)[0]
    return [c.strip() for c in re.findall(r"```bash\n(.*?)\n\s*```", setup, flags=re.S)]


def test_readme_has_exactly_two_setup_commands_and_ci_runs_the_second():
    commands = _readme_commands()
    assert len(commands) == 2, commands
    ci = (ROOT / ".ci" / "run").read_text()
    assert commands[1].strip() in ci.splitlines()


def test_readme_is_an_entry_point_with_every_algorithm():
    """The README stays short (the manual is the docs site) and its algorithm table has one row per
    registered algorithm, in the words of nobody's memory but the registry's names."""
    from jetastar.clustering import algorithm_info, algorithms

    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 200
    table = text.split("## Algorithms", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    listed = [re.match(r"\| `([^`]+)`", row).group(1) for row in rows]
    own = [a for a in algorithms() if algorithm_info(a).func.__module__.startswith("jetastar.")]
    assert sorted(listed) == own
    for row, name in zip(rows, listed, strict=True):
        kind = "exact" if algorithm_info(name).exact else "approx"
        assert row.split("|")[2].strip().startswith(kind), row


def test_ruff_clean():
    ruff = shutil.which("ruff")
    if ruff is None:
        pytest.fail("ruff is part of the test extra; install with pip install -e '.[test]'")
    proc = subprocess.run(
        [ruff, "check", "jetastar", "tests", "analysis", "docs"], cwd=ROOT, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_main_job_runs():
    args = [sys.executable, "-m", "jetastar", "demo"]
    proc = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "QCD" in proc.stdout and "W" in proc.stdout


def test_python_classifiers_match_requires_python():
    """The classifiers name the Python versions the suite was run on, starting at the minimum
    that requires-python admits, without gaps."""
    text = (ROOT / "pyproject.toml").read_text()
    minimum = re.search(r'requires-python\s*=\s*">=\s*3\.(\d+)"', text)
    assert minimum, "requires-python must be of the form >=3.X"
    minors = sorted(int(m) for m in re.findall(r'"Programming Language :: Python :: 3\.(\d+)"', text))
    assert minors and minors[0] == int(minimum.group(1))
    assert minors == list(range(minors[0], minors[-1] + 1))
