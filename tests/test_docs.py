"""The documentation site: it builds with zero warnings (nitpicky, notebooks executed), every public
name has a page with an example, the examples run, and the CLI reference is the parser's ``--help``."""

from __future__ import annotations

import doctest
import html
import importlib
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
sys.path.insert(0, str(DOCS / "_ext"))

from api_examples import CONSTANTS, EXAMPLES  # noqa: E402
from jetastar_docs import FACES, HELP_COLUMNS  # noqa: E402  (needs sphinx: pip install -e ".[test]")

from jetastar.clustering import registry  # noqa: E402


def _build_site(out: Path) -> dict[str, Any]:
    """Build the site as CONTRIBUTING.md says into ``out/html``; the outcome of the build."""
    env = {**os.environ, "TQDM_DISABLE": "1"}
    env.pop("JETASTAR_DOCS_EXECUTE", None)  # the notebooks are executed
    cmd = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-n", "-q", "-b", "html",
           "-d", str(out / "doctrees"), str(DOCS), str(out / "html")]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    # Sphinx's own messages ("<file>:<line>: WARNING: ..." or "WARNING: ...", a space after the
    # colon), not the notebook kernels' log lines: ipykernel sometimes logs, through Python's
    # logging ("ERROR:tornado.general:..."), a ZMQError of its own shutdown after a notebook has run
    # (seen once in CI, 2026-11-27); a failing cell is still Sphinx's error
    warnings = [line for line in proc.stderr.splitlines()
                if re.search(r"(^|: )(WARNING|ERROR|CRITICAL): ", line)]
    return {"returncode": proc.returncode, "warnings": warnings, "stderr": proc.stderr[-6000:],
            "seconds": time.perf_counter() - start}


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site, built once (the notebooks are executed: about 2 minutes on 2 cores). Only
    :func:`test_the_site` uses it: one test, so that one pytest worker builds it while the other
    runs other tests, instead of waiting for it."""
    out = tmp_path_factory.mktemp("docs-site")
    outcome = _build_site(out)
    assert outcome["returncode"] == 0 and not outcome["warnings"], (
        f"docs build failed (rc {outcome['returncode']}, {outcome['seconds']:.0f} s):\n"
        + outcome["stderr"])
    return out / "html"


@pytest.mark.slow
def test_the_site(site):
    """Every check of the built site, each reported by name: the pages are there, the options
    page is every declaration, every public name has a page with an example, the notebooks ran top
    to bottom and show their outputs, and the CLI reference is the ``--help`` output."""
    failures = []
    for check in (_pages_are_there, _algorithm_options_page_is_every_declaration,
                  _every_public_name_has_a_page_with_an_example, _notebook_pages_show_outputs,
                  _notebooks_ran_top_to_bottom, _cli_reference_is_the_help_output):
        try:
            check(site)
        except AssertionError as exc:
            failures.append(f"{check.__name__}: {exc}")
    assert not failures, "\n\n".join(failures)


def _pages_are_there(site: Path) -> None:
    pages = [p.stem for p in (ROOT / "docs").iterdir() if p.suffix in (".md", ".rst")]
    assert {"index", "getting_started", "algorithms", "algorithm_options", "cli"} <= set(pages)
    for page in [*pages, "notebooks/quickstart", "notebooks/map_vs_truth"]:
        assert (site / f"{page}.html").is_file(), page


def _algorithm_options_page_is_every_declaration(site: Path) -> None:
    """The option tables are written from the algorithms' declarations: every registered algorithm
    has its section, every option its row with its default and allowed values."""
    from jetastar.clustering import algorithm_info, algorithms
    from jetastar.clustering.options import option_table

    page = (site / "algorithm_options.html").read_text(encoding="utf-8")
    words = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())
    for quote in "‘’":
        words = words.replace(quote, "'")
    for name in algorithms():
        if not algorithm_info(name).func.__module__.startswith("jetastar."):
            continue  # (test algorithms registered by other test modules)
        assert f'id="algorithm-{name}"' in page, name
        for option, default, allowed, meaning in option_table(algorithm_info(name).declared):
            row = " ".join(f"{option} {default} {allowed} {meaning}".split())
            assert row in words, (name, row)


def _page_of(face: str, name: str, site: Path) -> Path:
    if f"{face}.{name}" in FACES:
        return site / "api" / f"{face}.{name}.html"
    return site / "api" / "generated" / f"{face}.{name}.html"


def _every_public_name_has_a_page_with_an_example(site: Path) -> None:
    missing = []
    for face in FACES:
        module = importlib.import_module(face)
        assert (site / "api" / f"{face}.html").is_file(), face
        for name in module.__all__:
            page = _page_of(face, name, site)
            if not page.is_file():
                missing.append(f"{face}.{name}: no page")
                continue
            text = page.read_text(encoding="utf-8")
            if not re.search(r'class="rubric">Examples?<', text) or "&gt;&gt;&gt;" not in text:
                missing.append(f"{face}.{name}: no example")
    assert not missing, missing


def _notebook_pages_show_outputs(site: Path) -> None:
    quickstart = (site / "notebooks" / "quickstart.html").read_text(encoding="utf-8")
    assert "cell_output" in quickstart and "available:" in quickstart  # printed by a cell
    assert "<img" in (site / "notebooks" / "map_vs_truth.html").read_text(encoding="utf-8")


def _notebooks_ran_top_to_bottom(site: Path) -> None:
    """Every notebook of ``notebooks/`` ran top to bottom in the site's build (which executes
    them at small sizes, fails on an error in a cell, 10 minutes a cell at most): each code cell
    ran, in order, and none has an error output."""
    import nbformat

    names = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
    assert len(names) >= 3, names
    for name in names:
        assert (ROOT / "docs" / "notebooks" / name).resolve() == (ROOT / "notebooks" / name).resolve()
        nb = nbformat.read(site.parent / "jupyter_execute" / "notebooks" / name, as_version=4)
        code = [cell for cell in nb.cells if cell.cell_type == "code"]
        assert code and [cell.execution_count for cell in code] == list(range(1, len(code) + 1)), name
        errors = [out for cell in code for out in cell.get("outputs", [])
                  if out.get("output_type") == "error"]
        assert not errors, (name, errors[:1])


_PRINT_HELP = """
import sys
from jetastar.__main__ import main
for command in sys.argv[1:]:
    print("@@@ " + command, flush=True)
    try:
        main([command, "--help"] if command != "-" else ["--help"])
    except SystemExit:
        pass
    sys.stdout.flush()
"""


def _help_texts() -> dict[str, str]:
    """What ``jetastar [COMMAND] --help`` prints (the console script's entry point, in one process),
    at the width the docs use."""
    from jetastar.cli.command import build_parser

    parser = build_parser()
    commands = [name for action in parser._actions if isinstance(getattr(action, "choices", None), dict)
                for name in action.choices]
    env = {**os.environ, "COLUMNS": str(HELP_COLUMNS)}
    proc = subprocess.run([sys.executable, "-c", _PRINT_HELP, "-", *commands], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    texts = {}
    for chunk in proc.stdout.split("@@@ ")[1:]:
        command, _, text = chunk.partition("\n")
        texts["" if command == "-" else command] = text
    assert set(texts) == {"", *commands}
    return texts


def _pre_blocks(page: Path) -> list[str]:
    text = page.read_text(encoding="utf-8")
    blocks = re.findall(r"<pre>(.*?)</pre>", text, flags=re.S)
    return [html.unescape(re.sub(r"<[^>]+>", "", block)) for block in blocks]


def _cli_reference_is_the_help_output(site: Path) -> None:
    blocks = [block.strip("\n") for block in _pre_blocks(site / "cli.html")]
    for command, text in _help_texts().items():
        assert text.strip("\n") in blocks, f"jetastar {command} --help differs from docs/cli"


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_api_example_runs(name, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)  # the examples read the sample files in data/
    monkeypatch.setenv("TQDM_DISABLE", "1")
    # an example may register an algorithm: it is gone again after the test
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    globs = {"__name__": "jetastar_api_example"}
    test = doctest.DocTestParser().get_doctest(EXAMPLES[name], globs, name, None, 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report: list[str] = []
    runner.run(test, out=report.append)
    assert runner.failures == 0, "".join(report)


def test_examples_and_constants_name_public_names():
    public = {f"{face}.{name}" for face in FACES for name in importlib.import_module(face).__all__}
    assert set(EXAMPLES) <= public and set(CONSTANTS) <= public
    constants = {full for full in public if not callable(_resolve(full))
                 and not hasattr(_resolve(full), "__path__")}
    assert constants <= set(CONSTANTS), constants - set(CONSTANTS)


def _resolve(full: str):
    module, _, name = full.rpartition(".")
    return getattr(importlib.import_module(module), name)
