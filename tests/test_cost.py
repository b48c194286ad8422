"""The cost model (jetastar.clustering.cost) and the cost preview of a run (jetastar.batch.preview):
issue 61's "say what a run costs before it starts"."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from jetastar.batch import BatchConfig, preview_inputs, preview_jets
from jetastar.cli import main
from jetastar.clustering import algorithm_info, algorithms
from jetastar.clustering.cost import cost_features, cost_model, predicted_cpu
from jetastar.ginkgo import ShowerParams, generate

DATA = Path(__file__).resolve().parents[1] / "data"


def test_every_registered_algorithm_has_a_fitted_cost():
    """A new algorithm fails here until analysis/cost_model.py has measured it."""
    fitted = cost_model()["algorithms"]
    builtin = [a for a in algorithms() if algorithm_info(a).family != "plugin"]
    assert sorted(fitted) == sorted(builtin)
    for name, entry in fitted.items():
        assert entry["size"] in ("log", "linear"), name
        assert len(entry["coef"]) == 3 and np.all(np.isfinite(entry["coef"])), name
        assert 0 < entry["sigma"] < 3, name
        assert entry["jets"] >= 10, name
    provenance = cost_model()["provenance"]
    assert {"jetastar", "samples", "machine", "date"} <= set(provenance)


def test_pair_fraction_counts_pairs_above_t_cut():
    """The shape feature, against a direct count over pairs."""
    jet = generate(1, ShowerParams.w(), seed=4, min_leaves=9, max_leaves=9)[0]
    n, shape = cost_features([jet])
    leaves = jet.leaves
    above = 0
    for i in range(9):
        for j in range(i + 1, 9):
            p = leaves[i] + leaves[j]
            above += p[0] ** 2 - p[1] ** 2 - p[2] ** 2 - p[3] ** 2 >= jet.params.t_cut
    assert n.tolist() == [9]
    assert shape[0] == pytest.approx(above / 36)


def test_the_prediction_grows_with_size_and_a_time_limit_caps_it():
    n = np.arange(10, 61, 5)
    shape = np.full(n.shape, 0.5)
    free = predicted_cpu("window-search", n, shape, {})
    assert np.all(np.diff(free.per_jet) > 0)
    capped = predicted_cpu("window-search", n, shape, {}, time_limit=1.0)
    assert np.all(capped.per_jet <= np.minimum(free.per_jet, 1.0) + 1e-12)
    assert np.all((capped.p_over_limit >= 0) & (capped.p_over_limit <= 1))
    assert np.all(np.diff(capped.p_over_limit) >= 0)
    # the time option of the options is the limit when none is given
    assert predicted_cpu("window-search", n, shape, {"max_time": 1.0}).total == capped.total
    # greedy cannot stop: a limit does not cap it
    greedy = predicted_cpu("greedy", n, shape, {}, time_limit=1e-9)
    assert greedy.time_limit is None and greedy.over_limit == 0


def test_exact_methods_run_only_within_their_size_limit():
    n = np.array([10, 18, 19, 24, 25, 80])
    shape = np.full(n.shape, 0.8)
    astar = predicted_cpu("astar", n, shape, {})
    assert astar.runs.tolist() == [True, True, False, False, False, False]
    assert astar.per_jet[2:].tolist() == [0.0] * 4
    trellis = predicted_cpu("trellis", n, shape, {}, max_leaves=19)
    assert trellis.n_run == 3


def test_options_the_cost_is_proportional_to_scale_it():
    assert algorithm_info("mcts").cost_scales_with == ("n_rollouts",)
    n, shape = np.array([30, 40]), np.array([0.5, 0.5])
    base = predicted_cpu("mcts", n, shape, {}).total
    assert predicted_cpu("mcts", n, shape, {"n_rollouts": 40}).total == pytest.approx(2 * base)


def test_an_algorithm_without_a_model_is_said_to_have_none():
    from helpers.batch_algorithms import PLUGIN  # noqa: F401  (registers the test algorithms)

    cost = predicted_cpu("test-chain", np.array([5, 6]), np.array([1.0, 1.0]), {})
    assert cost.model == "none" and np.isnan(cost.total)
    preview = preview_jets(generate(5, seed=1), BatchConfig(["greedy", "test-chain"]))
    assert "no cost model" in "\n".join(preview.lines())


def test_preview_lines_and_warnings():
    jets = generate(40, ShowerParams.w(), seed=9)
    preview = preview_jets(jets, BatchConfig(["greedy", "trellis"], time_limit=1e-3),
                           n_jets=4000)
    assert preview.scale == 100
    text = "\n".join(preview.lines())
    assert "predicted CPU time on 4000 jets (scaled from the first 40), --time-limit 0.001 s" in text
    assert "trellis" in text and "total" in text
    warnings = preview.warnings(threshold=1e-6)
    assert any("predicted to take" in w and "most of it trellis" in w for w in warnings)
    assert any("hit --time-limit 0.001 with trellis" in w for w in warnings)
    assert preview_jets(jets, BatchConfig(["greedy"])).warnings() == []


def test_preview_of_files_reads_the_first_jets_and_scales():
    config = BatchConfig(["greedy", "beam"])
    whole = preview_inputs([DATA / "ginkgo_qcd.h5"], config)
    part = preview_inputs([DATA / "ginkgo_qcd.h5"], config, sample=20)
    assert part.n_looked_at == 50 and whole.n_jets == part.n_jets  # (at least 50 per file)
    # (the model's predictions, deterministic: the first 50 jets scaled stand for all 100; nothing
    # here is timed)
    assert part.cpu_seconds() == pytest.approx(whole.cpu_seconds(), rel=0.5)
    assert preview_inputs([DATA / "no_such_file.h5"], config) is None


def test_cluster_prints_the_preview_before_the_run(tmp_path, capsys):
    argv = ["cluster", str(DATA / "pythia_jets.root"), "--algorithms", "greedy,trellis",
            "--time-limit", "5", "--no-progress", "-o", str(tmp_path / "r.h5")]
    assert main([*argv, "--entry-stop", "8"]) == 0
    out = capsys.readouterr().out
    preview = out.index("cost preview: predicted CPU time on 8 jets, --time-limit 5 s")
    assert preview < out.index(" -> ")  # (before the run's summary)
    assert "trellis" in out[preview:out.index(" -> ")]
    assert main([*argv, "--entry-stop", "8", "--no-preview", "--fresh"]) == 0
    assert "cost preview" not in capsys.readouterr().out


def test_info_check_shows_the_same_preview(capsys):
    path = str(DATA / "ginkgo_w.h5")
    assert main(["info", path, "--check", "--max-jets", "40", "--time-limit", "2"]) == 0
    out = capsys.readouterr().out
    assert "cost preview: predicted CPU time on " in out and "--time-limit 2 s" in out
    for name in algorithms():
        if algorithm_info(name).family != "plugin":
            assert f"\n  {name} " in out
