"""Progress bars: every way of switching tqdm off works, and no algorithm reads a disabled bar."""

from __future__ import annotations

import functools

import pytest
import tqdm
import tqdm.auto

from jetastar._progress import progress_bar, tqdm_disabled_by_env
from jetastar.batch import BatchConfig, run_batch
from jetastar.clustering import astar, astar_approx, exact_trellis
from jetastar.clustering.warmup import warm_up_jets


@pytest.mark.parametrize(("value", "disabled"), [
    ("1", True), ("true", True), ("True", True), ("yes", True), ("0", False), ("", False),
    ("false", False), ("off", False), (None, False),
])
def test_tqdm_disable_values(monkeypatch, value, disabled):
    if value is None:
        monkeypatch.delenv("TQDM_DISABLE", raising=False)
    else:
        monkeypatch.setenv("TQDM_DISABLE", value)
    assert tqdm_disabled_by_env() is disabled
    bar = progress_bar(total=2, desc="x", show=True)
    assert bar.shown is not disabled
    bar.update(2)
    bar.set_postfix(a=1)
    bar.close()
    bar.close()
    assert bar.n == 2


def test_show_false_is_no_bar(monkeypatch, capsys):
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    with progress_bar(total=3, desc="quiet", show=False) as bar:
        bar.update(3)
    assert not bar.shown and bar.n == 3
    assert "quiet" not in capsys.readouterr().err


def _patch_tqdm_disabled(monkeypatch):
    """What users (and some batch wrappers) do to silence tqdm: default ``disable=True``."""
    patched = functools.partialmethod(tqdm.tqdm.__init__, disable=True)
    monkeypatch.setattr(tqdm.auto.tqdm, "__init__", patched)


@pytest.mark.parametrize("how", ["env", "patched", "non-tty"])
def test_algorithms_and_batch_with_tqdm_disabled(monkeypatch, tmp_path, how):
    """The reported crash: ``astar_approx`` read ``bar.unit`` of a disabled bar."""
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    if how == "env":
        monkeypatch.setenv("TQDM_DISABLE", "1")
    elif how == "patched":
        _patch_tqdm_disabled(monkeypatch)
    else:  # disable=None: tqdm disables itself when stderr is not a terminal (as under pytest)
        patched = functools.partialmethod(tqdm.tqdm.__init__, disable=None)
        monkeypatch.setattr(tqdm.auto.tqdm, "__init__", patched)
    small, large = warm_up_jets()
    for jet in (small, large):
        res = astar_approx(jet, progress=True, rounds=2)
        assert res.status == "ok" and res.tree is not None
    res = astar(small, progress=True)
    assert res.exact
    assert exact_trellis(small, progress=True).log_likelihood == pytest.approx(res.log_likelihood)
    from jetastar import JetCollection
    from jetastar import io as jio

    path = tmp_path / "jets.h5"
    jio.write(path, JetCollection.from_jets([small, small]))
    (summary,) = run_batch([path], BatchConfig(["astar-approx", "greedy"]),
                           output=tmp_path / "out.h5", progress=True)
    assert summary.ok, summary.error
    assert summary.status_counts["astar-approx"] == {"ok": 2}


def test_disabled_bars_print_nothing(monkeypatch, capsys):
    monkeypatch.setenv("TQDM_DISABLE", "1")
    small, _ = warm_up_jets()
    astar_approx(small, progress=True, rounds=1)
    astar(small, progress=True)
    exact_trellis(small, progress=True)
    assert capsys.readouterr().err == ""


def _record_bars(monkeypatch) -> list[dict]:
    """Replace tqdm by a recorder of the bars created (their keyword arguments)."""
    made: list[dict] = []

    class Recorder:
        def __init__(self, **kw):
            made.append(kw)

        def update(self, k=1):
            pass

        def set_postfix(self, **kw):
            pass

        def close(self):
            pass

    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    monkeypatch.setattr(tqdm.auto, "tqdm", Recorder)
    return made


def test_single_jets_in_a_loop_show_no_bars_by_default(monkeypatch):
    """Issue 35 point 9: the Python API showed a bar per jet (after 2 s, or at once for exact
    engines from 19 leaves). A jet's own bar now appears only once that jet took PER_JET_DELAY
    seconds; asked for (progress=True) at once; collection-level work at once."""
    import jetastar
    import jetastar.clustering.exact.trellis as trellis_module
    from jetastar._progress import PER_JET_DELAY
    from jetastar.ginkgo import ShowerParams, generate
    from jetastar.inmemory import cluster_jets

    assert PER_JET_DELAY >= 5.0
    jets = generate(3, ShowerParams.qcd(), seed=4, min_leaves=6, max_leaves=8)
    monkeypatch.setattr(trellis_module, "_PROGRESS_FROM", 2)  # these small jets count as large
    made = _record_bars(monkeypatch)
    for jet in jets:
        for name in ("astar", "astar-approx", "window-search", "trellis"):
            jetastar.cluster(jet, name)
    assert made and all(kw.get("delay", 0.0) >= PER_JET_DELAY for kw in made), made
    made.clear()
    astar(jets[0], progress=True)
    exact_trellis(jets[0], progress=True)
    assert len(made) == 2 and all(kw.get("delay", 0.0) == 0.0 for kw in made)
    made.clear()
    cluster_jets(jets, ["greedy"])  # work over a collection: its bar at once
    assert [kw["desc"] for kw in made] == ["clustering"] and made[0].get("delay", 0.0) == 0.0
    made.clear()
    monkeypatch.setenv("TQDM_DISABLE", "1")
    cluster_jets(jets, ["greedy"])
    astar(jets[0], progress=True)
    assert made == []


def test_a_bar_into_a_log_is_plain_lines(monkeypatch):
    """With standard error a file (a batch job's log) a bar was one endless line of carriage
    returns, redrawn twice a second; it is a plain line every LOG_INTERVAL seconds."""
    import io

    from jetastar import _progress

    log = io.StringIO()  # not a terminal
    monkeypatch.setattr("sys.stderr", log)
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    monkeypatch.setattr(_progress, "LOG_INTERVAL", 0.0)  # every update a line
    with progress_bar(total=3, desc="jets.h5", unit="jet", leave=True) as bar:
        for _ in range(3):
            bar.update(1)
    text = log.getvalue()
    assert "\r" not in text and text.endswith("\n"), repr(text)
    lines = text.splitlines()
    assert lines[0].startswith("jets.h5:   0%") and lines[-1].startswith("jets.h5: 100%")
    assert len(lines) == len(set(lines))  # the finished bar once
