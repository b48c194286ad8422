"""The ``jetastar`` command line: help, generate -> info -> cluster -> compare, run, demo, errors."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import uproot
from helpers.batch_algorithms import PLUGIN, caterpillar  # (registers the test algorithms)

from jetastar import io as jio
from jetastar.cli import main
from jetastar.cli.command import build_parser
from jetastar.ginkgo import log_likelihood

COMMANDS = ["run", "generate", "cluster", "compare", "observables", "fit", "info", "algorithms",
            "demo"]


@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_help(command, capsys):
    args = ["--help"] if command is None else [command, "--help"]
    with pytest.raises(SystemExit) as exc:
        main(args)
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "usage: jetastar" in out
    if command is None:
        assert all(c in out for c in COMMANDS)


def test_algorithms_are_described_from_their_declarations(capsys):
    """`jetastar algorithms` lists every algorithm with its options, `jetastar algorithms NAME` one
    algorithm's options with defaults and ranges, and `cluster --help` / `run --help` end with the
    listing: all written from the algorithms' declarations."""
    from jetastar.clustering import algorithm_info

    assert main(["algorithms"]) == 0
    listing = capsys.readouterr().out
    assert main(["algorithms", "beam", "kt"]) == 0
    out = capsys.readouterr().out
    for name in ("beam", "kt"):
        assert name in listing
        for option in algorithm_info(name).declared:
            assert option.name in out and option.allowed in " ".join(out.split()), option.name
    assert main(["algorithms", "beem"]) == 2
    assert "did you mean 'beam'" in capsys.readouterr().err
    for command in ("cluster", "run"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        text = capsys.readouterr().out
        assert "algorithms and their options (`jetastar algorithms NAME`" in text and "greedy_guard" in text
        assert max(len(line) for line in text.splitlines()) <= 100


def test_every_command_takes_debug():
    """`jetastar observables ... --debug` was refused ("unrecognized arguments") where every other
    command takes it after its name."""
    parser = build_parser()
    for command in COMMANDS:
        sub = parser._subparsers._group_actions[0].choices[command]
        assert any("--debug" in a.option_strings for a in sub._actions), command


def test_no_command_shows_the_commands(capsys):
    assert main([]) == 0
    out = capsys.readouterr().out
    assert "usage: jetastar" in out and all(c in out for c in COMMANDS)


def test_generate_info_cluster_compare(tmp_path, capsys):
    jets = tmp_path / "w.root"
    assert main(["generate", "--type", "w", "--n", "25", "--seed", "3", "--max-leaves", "12",
                 "-o", str(jets)]) == 0
    assert "wrote 25 W jets" in capsys.readouterr().out
    coll = jio.read(jets)
    assert len(coll) == 25 and coll.n_leaves.max() <= 12
    assert set(coll.node_columns) >= {"deltas"}
    assert main(["info", str(jets)]) == 0
    out = capsys.readouterr().out
    assert "schema version 1" in out and "25 (W 25)" in out and "seed:" in out
    assert "lam_root=3" in out
    res = tmp_path / "res.h5"
    assert main(["cluster", str(jets), "--algorithms", "test-chain,test-exact",
                 "--plugin", PLUGIN, "--option", "test-chain.delay=0",
                 "--max-leaves", "test-exact=8", "--no-progress", "-o", str(res)]) == 0
    out = capsys.readouterr().out
    assert "test-chain" in out and "ok 25" in out and "finite" in out
    tables = jio.read_results(res)
    assert jio.file_info(res, results=False)["attrs"]["seed"] == 3  # the generated jets' seed
    chain = tables["test-chain"]
    j = coll[4]
    assert chain.tree(4) == caterpillar(j.n_leaves)
    assert chain.log_likelihood[4] == log_likelihood(j, caterpillar(j.n_leaves))
    skipped = tables["test-exact"].status == "skipped"
    assert np.array_equal(skipped, coll.n_leaves > 8)
    plot = tmp_path / "cmp.png"
    assert main(["compare", str(res), "--plot", str(plot), "--reference", "test-chain"]) == 0
    out = capsys.readouterr().out
    assert "test-exact" in out and "MAP found" in out and plot.stat().st_size > 1000
    assert max(len(line) for line in out.splitlines()) <= 110
    # (the table's numbers are tested in test_comparison.py)
    # several inputs -> one output per input in a folder, ROOT format
    other = tmp_path / "q.h5"
    assert main(["generate", "--n", "5", "-o", str(other)]) == 0
    outdir = tmp_path / "many"
    assert main(["cluster", str(jets), str(other), "--algorithms", "test-chain", "--plugin",
                 PLUGIN, "--format", "root", "--no-progress", "-o", str(outdir)]) == 0
    assert sorted(p.name for p in outdir.iterdir()) == ["q.results.root", "w.results.root"]
    assert main(["info", str(outdir / "q.results.root")]) == 0
    assert "test-chain" in capsys.readouterr().out


def test_errors_are_one_line(tmp_path, capsys):
    code = main(["info", str(tmp_path / "missing.h5")])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("jetastar: error: ") and "missing.h5" in err
    bad = tmp_path / "bad.h5"
    bad.write_text("garbage")
    assert main(["compare", str(bad)]) == 1
    assert "not an HDF5 file" in capsys.readouterr().err
    jets = tmp_path / "j.h5"
    main(["generate", "--n", "3", "-o", str(jets)])
    capsys.readouterr()
    assert main(["cluster", str(jets), "--algorithms", "nope", "-o", str(tmp_path / "o.h5")]) == 2
    err = capsys.readouterr().err
    assert "unknown algorithm 'nope'" in err and err.count("\n") == 1
    assert main(["cluster", str(jets), "--algorithms", "test-chain", "--plugin", PLUGIN,
                 "--option", "nonsense", "-o", str(tmp_path / "o.h5")]) == 2
    assert "key=value" in capsys.readouterr().err
    assert main(["generate", "--n", "3", "-o", str(tmp_path / "x.txt")]) == 2
    assert "unknown file type" in capsys.readouterr().err
    assert main(["compare", str(jets)]) == 1
    assert "holds no clustering results" in capsys.readouterr().err
    with pytest.raises(FileNotFoundError):
        main(["--debug", "info", str(tmp_path / "missing.h5")])
    with pytest.raises(FileNotFoundError):
        main(["info", str(tmp_path / "missing.h5"), "--debug"])


NANOAOD = Path(__file__).resolve().parents[1] / "data" / "particles_nanoaod.root"


def test_new_user_messages(tmp_path, capsys, monkeypatch):
    """Issue 35 point 5: bad particle options are usage errors before any work (no manifest left
    behind), a truncated ROOT file says so (and ``info`` fails on it), no friend-tree line after a
    failed file, and a near-miss algorithm name gets a suggestion."""
    monkeypatch.chdir(tmp_path)
    base = ["cluster", str(NANOAOD), "--particles", "PFCands", "--algorithms", "greedy",
            "--no-progress"]
    for option, value in (("--t-cut", "-4"), ("--mass-policy", "banana"), ("--lam", "nan")):
        assert main([*base, option, value, "-o", "bad.root"]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"jetastar: error: {option}: ") and err.count("\n") == 1, err
        assert list(tmp_path.iterdir()) == []
    assert main([*base[:-3], "--algorithms", "anti-kt", "-o", "x.root"]) == 2
    assert "unknown algorithm 'anti-kt' (did you mean 'antikt'?)" in capsys.readouterr().err
    truncated = tmp_path / "truncated.root"
    truncated.write_bytes(NANOAOD.read_bytes()[:60000])
    assert main(["info", str(truncated)]) == 1
    err = capsys.readouterr().err
    assert "truncated ROOT file" in err and "Traceback" not in err
    assert main(["cluster", str(truncated), *base[2:], "-o", "t.root"]) == 1
    captured = capsys.readouterr()
    assert "FAILED" in captured.out and "truncated ROOT file" in captured.out
    assert "friend tree" not in captured.out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["truncated.root"]


def test_the_note_on_a_written_file_comes_before_a_later_files_failure(tmp_path, capsys):
    """Issue 61 point 2: the note on where a written file's results are (the friend tree) follows
    that file's lines, not the next file's FAILED line."""
    truncated = tmp_path / "truncated.root"
    truncated.write_bytes(NANOAOD.read_bytes()[:60000])
    out_dir = tmp_path / "out"
    assert main(["cluster", str(NANOAOD), str(truncated), "--tree", "Events", "--particles",
                 "PFCands", "--algorithms", "greedy", "--no-progress", "--format", "root",
                 "-o", str(out_dir)]) == 1
    out = capsys.readouterr().out
    note, failed = out.index("friend tree"), out.index(f"FAILED {truncated}")
    written = out.index(f"{NANOAOD} -> ")
    assert written < note < failed, out
    assert out.count("friend tree") == 1


def test_a_particle_file_with_one_collection_is_read_without_options(tmp_path, capsys):
    """Issue 61 point 5: what `jetastar info` detects, `jetastar cluster` uses, saying so."""
    assert main(["cluster", str(NANOAOD), "--algorithms", "greedy,kt", "--no-progress",
                 "-o", str(tmp_path / "r.h5")]) == 0
    out = capsys.readouterr().out
    assert "reading particles with --tree Events --particles PFCands (detected" in out
    assert "200 jets, done" in out
    # point 9: the kt family's −∞ said where a physicist looks, with where to find a t_cut
    note = f"(kt: -inf on most jets at these parameters; `jetastar info {NANOAOD} --check`"
    assert note in out
    assert main(["compare", str(tmp_path / "r.h5")]) == 0
    assert "kt: -inf on most jets at these parameters" in capsys.readouterr().out
    assert main(["info", str(tmp_path / "r.h5"), "--check", "--max-jets", "60"]) == 0
    assert "the kt family's trees are finite on most jets at t_cut <= " in capsys.readouterr().out


def test_a_particle_file_clustered_as_jets_says_which_options_read_it(tmp_path, capsys):
    """A particle file given without particle options fails with the options that read the
    particles it holds (those `jetastar info` lists); a file with no particles keeps the plain
    message."""
    dense = NANOAOD.with_name("particles_dense.h5")
    assert main(["cluster", str(NANOAOD), str(dense), "--algorithms", "greedy", "--no-progress",
                 "-o", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "this file holds particles, read with `--tree Events --particles PFCands`" in out
    assert ("read with `--particles constituents --components E,px,py,pz --mask mask`"
            in out)
    # the options it names read the file
    assert main(["cluster", str(NANOAOD), "--tree", "Events", "--particles", "PFCands",
                 "--algorithms", "greedy", "--no-progress", "-o", str(tmp_path / "p.root")]) == 0
    capsys.readouterr()
    plain = tmp_path / "plain.root"
    with uproot.recreate(plain) as f:
        f["note"] = "no particles here"
    assert main(["cluster", str(plain), "--algorithms", "greedy", "--no-progress",
                 "-o", str(tmp_path / "q.root")]) == 1
    out = capsys.readouterr().out
    assert "not a jetastar ROOT file" in out and "this file holds particles" not in out


@pytest.mark.parametrize("suffix", [".h5", ".root"])
def test_generate_writes_block_by_block_the_jets_of_one_call(tmp_path, capsys, monkeypatch,
                                                              suffix):
    """``jetastar generate`` writes blocks of jets as they are generated (memory does not grow
    with --n): the file holds the jets, truth trees, extra columns and generator attributes of one
    call for all of them, whatever the block size."""
    import json

    from jetastar.cli import cmd_generate
    from jetastar.cli.shared import generate_collection

    monkeypatch.setattr(cmd_generate, "GENERATE_BLOCK", 7)
    out = tmp_path / f"g{suffix}"
    assert main(["generate", "--type", "w", "--n", "23", "--seed", "5", "--min-leaves", "6",
                 "--t-cut", "9", "--no-progress", "-o", str(out)]) == 0
    whole = generate_collection("w", 23, 5, 6, None, {"t_cut": 9.0})
    got = jio.read(out)
    assert got.jet_id.tolist() == list(range(23))
    assert np.array_equal(got.leaves, whole.leaves)
    assert np.array_equal(got.children, whole.children)
    assert np.array_equal(got.node_momenta, whole.node_momenta)
    assert np.array_equal(got.node_offsets, whole.node_offsets)
    for name in ("deltas", "draws"):
        assert np.array_equal(got.node_columns[name], whole.node_columns[name], equal_nan=True)
    assert [got.jet_params(i) for i in range(23)] == [whole.jet_params(i) for i in range(23)]
    leaves = whole.n_leaves
    assert (f"wrote 23 W jets (leaves {leaves.min()}..{leaves.max()})"
            in capsys.readouterr().out)
    attrs = jio.file_info(out)["attrs"]
    settings = json.loads(attrs["generator_settings"])
    assert settings["n"] == 23 and settings["params"] == whole.jet_params(0).to_dict()
    reference = tmp_path / f"whole{suffix}"
    jio.write(reference, whole)
    assert attrs["generator_params"] == jio.file_info(reference)["attrs"]["generator_params"]
    # no jets: an empty file, as before
    assert main(["generate", "--n", "0", "-o", str(tmp_path / f"e{suffix}")]) == 0
    assert len(jio.read(tmp_path / f"e{suffix}")) == 0


def test_generate_names_the_reference_codes_parameters(tmp_path, capsys):
    """`--param pt_cut=16` (the reference generator's name) listed the valid names only."""
    assert main(["generate", "--n", "2", "--param", "pt_cut=16", "-o",
                 str(tmp_path / "j.h5")]) == 2
    assert "'pt_cut': the reference code's name for t_cut, in GeV²" in capsys.readouterr().err


def test_generate_rare_leaf_range_says_how_rare_and_what_to_do(tmp_path, capsys):
    """Issue 35 point 7: the message said "raise max_tries", which the command line could not."""
    out = str(tmp_path / "g.h5")
    rare = ["generate", "--t-cut", "1", "--min-leaves", "40", "--max-leaves", "100", "-o", out]
    assert main([*rare, "--n", "3", "--max-tries", "2000"]) == 1
    err = capsys.readouterr().err
    assert "in 2000 tries" in err and "rare at this t_cut" in err and "jets generated had" in err
    suggested = float(err.split("Try t_cut ")[1].split()[0])
    assert suggested < 1.0 and "--max-tries" in err and err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []  # no output, no temporary file
    assert main([*rare, "--n", "1", "--max-tries", "200000"]) == 0  # rare but reachable
    assert jio.read(out).n_leaves[0] >= 40
    assert main(["generate", "--max-tries", "0", "-o", out]) == 2


def test_demo(capsys):
    assert main(["demo"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [ln.split() for ln in lines if ln.startswith(("QCD", "W "))]
    assert len(rows) == 40
    assert sum(r[0] == "W" for r in rows) == 20
    from jetastar.ginkgo import ShowerParams, generate

    jet = generate(1, ShowerParams.w(), seed=1)[0]
    w0 = next(r for r in rows if r[0] == "W" and r[1] == "0")
    assert int(w0[2]) == jet.n_leaves
    assert float(w0[3]) == pytest.approx(log_likelihood(jet), abs=1e-6)
    assert float(w0[4]) == pytest.approx(log_likelihood(jet, likelihood="legacy"), abs=1e-6)


def test_run_main_job(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["run", "-o", str(out), "--n-qcd", "4", "--n-w", "3", "--workers", "1",
                 "--algorithms", "test-chain,test-exact", "--plugin", PLUGIN,
                 "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert sorted(p.name for p in out.iterdir()) == [
        "comparison.png", "comparison.txt", "jets.h5", "results.h5", "results.root"]
    assert "MAP found" in text
    h5, root = jio.read_results(out / "results.h5"), jio.read_results(out / "results.root")
    for name in ("test-chain", "test-exact"):
        assert np.array_equal(h5[name].log_likelihood, root[name].log_likelihood, equal_nan=True)
        assert list(h5[name].status) == list(root[name].status)
    assert len(jio.read(out / "jets.h5")) == 7
    assert sorted(set(jio.read(out / "jets.h5").jet_id.tolist())) == list(range(7))


def test_run_main_job_with_a_pool_writes_the_same_jets(tmp_path, capsys):
    """With worker processes a worker generates and writes the jets (this process compiles
    nothing): the file holds what the run without workers writes, and the results agree."""
    outs = {}
    for workers in ("1", "2"):
        outs[workers] = tmp_path / f"run{workers}"
        assert main(["run", "-o", str(outs[workers]), "--n-qcd", "3", "--n-w", "2",
                     "--max-jet-leaves", "8", "--workers", workers, "--algorithms", "greedy",
                     "--no-progress"]) == 0
    assert "generated 3 QCD + 2 W jets" in capsys.readouterr().out
    alone, pooled = (jio.read(outs[w] / "jets.h5") for w in ("1", "2"))
    for field in ("leaves", "leaf_offsets", "children", "leaf_of_node", "node_offsets", "jet_id"):
        assert np.array_equal(getattr(alone, field), getattr(pooled, field)), field
    for extra in ("deltas", "draws"):
        assert np.array_equal(alone.node_columns[extra], pooled.node_columns[extra],
                              equal_nan=True), extra
    a, b = (jio.read_results(outs[w] / "results.h5")["greedy"] for w in ("1", "2"))
    assert np.array_equal(a.log_likelihood, b.log_likelihood)


def test_python_m_and_console_script(tmp_path):
    env = dict(os.environ)
    done = subprocess.run([sys.executable, "-m", "jetastar", "info",
                           str(Path(__file__).parent / "data" / "legacy_ginkgo_W_sample.pkl")],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert "12 (W 12)" in done.stdout
    done = subprocess.run([sys.executable, "-m", "jetastar", "info", str(tmp_path / "no.h5")],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    script = shutil.which("jetastar")
    if script is None:
        pytest.skip("the jetastar console script is not installed (pip install -e .)")
    done = subprocess.run([script, "--version"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "jetastar" in done.stdout


def _jetastar(args: list[str], cwd: Path, **env_extra: str) -> subprocess.CompletedProcess:
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, **env_extra,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-m", "jetastar", *args], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=900)


@pytest.mark.slow
def test_main_job_and_astar_approx_with_tqdm_disable(tmp_path):
    """TQDM_DISABLE=1 (set by batch systems and CI): no bar, no crash (astar-approx read an
    attribute a disabled bar lacks)."""
    out = tmp_path / "run"
    done = _jetastar(["run", "-o", str(out), "--n-qcd", "2", "--n-w", "2", "--max-jet-leaves", "9",
                      "--workers", "1"], tmp_path, TQDM_DISABLE="1")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr and "jet/s" not in done.stderr
    tables = jio.read_results(out / "results.h5")
    # the demonstration leaves the slow-to-compile A* out (and says so) and shows the window search
    assert "astar-approx" not in tables and "astar" not in tables and "window-search" in tables
    assert "left out for speed: astar, astar-approx" in done.stdout
    assert "at most 9 leaves each" in done.stdout
    for name, table in tables.items():
        assert set(table.status) <= {"ok", "all_inf", "skipped"}, (name, list(table.status))
    # astar-approx with its own progress bar switched on, through `jetastar cluster`
    done = _jetastar(["cluster", str(out / "jets.h5"), "--algorithms", "astar-approx,astar",
                      "--option", "progress=true", "-o", str(tmp_path / "approx.h5")],
                     tmp_path, TQDM_DISABLE="1")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "failed" not in done.stdout and "Traceback" not in done.stderr
    table = jio.read_results(tmp_path / "approx.h5")["astar-approx"]
    assert list(table.status) == ["ok"] * 4


def test_run_defaults_keep_the_demonstration_quick():
    from jetastar.cli import build_parser

    parser = build_parser()
    assert parser.parse_args(["run"]).max_jet_leaves == 16
    assert parser.parse_args(["run", "--max-jet-leaves", "none"]).max_jet_leaves is None
    assert parser.parse_args(["run", "--max-jet-leaves", "25"]).max_jet_leaves == 25
    with pytest.raises(SystemExit):
        parser.parse_args(["run", "--max-jet-leaves", "many"])
    assert parser.parse_args(["cluster", "x.h5", "--algorithms", "greedy",
                              "--threads", "1"]).threads == 1


def test_cluster_with_window_search(tmp_path, capsys):
    """The window search through the command line: options, the legacy form, the time limit as
    its budget, and every tree at least as good as greedy and at most the exact MAP."""
    jets = tmp_path / "q.h5"
    assert main(["generate", "--type", "qcd", "--n", "4", "--seed", "5", "--t-cut", "1",
                 "--min-leaves", "15", "--max-leaves", "18", "-o", str(jets)]) == 0
    res = tmp_path / "res.root"
    assert main(["cluster", str(jets), "--algorithms", "window-search,greedy,trellis",
                 "--option", "window-search.window_size=10", "--option", "seed=3",
                 "--likelihood", "legacy", "--time-limit", "30", "--no-progress",
                 "-o", str(res)]) == 0
    assert "window-search    ok 4" in capsys.readouterr().out
    tables = jio.read_results(res)
    window, greedy_t, exact = tables["window-search"], tables["greedy"], tables["trellis"]
    coll = jio.read(jets)
    for i in range(4):
        r = window.results()[i]
        assert r.options["window_size"] == 10 and r.options["seed"] == 3
        assert r.options["max_time"] == 30 and r.likelihood == "legacy"
        # the search path scores its tree as every algorithm does; a jet proven by exact_map
        # (its stats' path) carries the engine's own sum, equal to the last bits
        score = log_likelihood(coll[i], window.tree(i), "legacy")
        assert abs(r.log_likelihood - score) <= 1e-12 * abs(score)
        assert greedy_t.log_likelihood[i] <= r.log_likelihood <= exact.log_likelihood[i] + 1e-9


def test_outputs_never_replace_a_file_jetastar_did_not_write(tmp_path, capsys):
    """``-o`` naming a user's own file (their particle data, a text file, jets made by generate)
    by mistake: every command refuses and leaves it as it was; ``cluster --fresh`` replaces it."""
    data = Path(__file__).resolve().parents[1] / "data"
    jets = tmp_path / "jets.h5"
    assert main(["generate", "--n", "6", "--max-leaves", "8", "-o", str(jets)]) == 0
    theirs = {name: tmp_path / name for name in ("nano.root", "dense.h5", "notes.h5")}
    shutil.copy(data / "particles_nanoaod.root", theirs["nano.root"])
    shutil.copy(data / "particles_dense.h5", theirs["dense.h5"])
    theirs["notes.h5"].write_text("not a jet file\n")
    theirs["made.h5"] = tmp_path / "made.h5"
    shutil.copy(jets, theirs["made.h5"])  # jets without results: data too
    before = {k: p.read_bytes() for k, p in theirs.items()}
    capsys.readouterr()
    for name, path in theirs.items():
        code = main(["cluster", str(jets), "--algorithms", "greedy", "--no-progress",
                     "-o", str(path)])
        out = capsys.readouterr().out
        assert code == 1 and f"{path} exists and is" in out and "--fresh" in out, out
        assert path.read_bytes() == before[name]
        assert not Path(f"{path}.parts").exists()
    for name in ("nano.root", "dense.h5", "notes.h5"):
        assert main(["generate", "--n", "3", "-o", str(theirs[name])]) == 2
        assert "not a file jetastar wrote" in capsys.readouterr().err
        assert theirs[name].read_bytes() == before[name]
    # a jets file may be generated again
    assert main(["generate", "--n", "3", "-o", str(theirs["made.h5"])]) == 0
    assert jio.n_jets(theirs["made.h5"]) == 3
    # results are not jets, and observables go only over observables
    res = tmp_path / "res.h5"
    assert main(["cluster", str(jets), "--algorithms", "greedy", "--no-progress",
                 "-o", str(res)]) == 0
    res_bytes = res.read_bytes()
    capsys.readouterr()
    assert main(["generate", "--n", "3", "-o", str(res)]) == 2
    assert "not a jetastar file of jets" in capsys.readouterr().err
    assert main(["observables", str(res), "-o", str(res)]) == 2
    assert "not a jetastar file of observables" in capsys.readouterr().err
    assert res.read_bytes() == res_bytes
    obs = tmp_path / "obs.root"
    assert main(["observables", str(res), "-o", str(obs)]) == 0
    assert main(["observables", str(res), "-o", str(obs)]) == 0
    # --fresh: the user says so
    assert main(["cluster", str(jets), "--algorithms", "greedy", "--no-progress", "--fresh",
                 "-o", str(theirs["notes.h5"])]) == 0
    assert "greedy" in jio.read_results(theirs["notes.h5"])
    # the finished result of another input file (run1/jets.h5, run2/jets.h5 into one folder)
    # was replaced with exit code 0; the same path regenerated is still computed again
    (tmp_path / "run2").mkdir()
    other = tmp_path / "run2" / "jets.h5"
    assert main(["generate", "--n", "4", "--seed", "9", "-o", str(other)]) == 0
    folder = tmp_path / "out"
    assert main(["cluster", str(jets), "--algorithms", "greedy", "--no-progress",
                 "-o", f"{folder}/"]) == 0
    kept = (folder / "jets.results.h5").read_bytes()
    capsys.readouterr()
    assert main(["cluster", str(other), "--algorithms", "greedy", "--no-progress",
                 "-o", f"{folder}/"]) == 1
    out = capsys.readouterr().out
    assert f"holds the finished result of another input file, {jets.resolve()}" in out, out
    assert (folder / "jets.results.h5").read_bytes() == kept
    assert main(["generate", "--n", "5", "--seed", "3", "-o", str(jets)]) == 0  # regenerated
    assert main(["cluster", str(jets), "--algorithms", "greedy", "--no-progress",
                 "-o", f"{folder}/"]) == 0
    assert jio.n_jets(folder / "jets.results.h5") == 5


def test_cluster_names_what_is_wrong_with_inputs_and_outputs(tmp_path, capsys):
    """A directory as an input, two inputs for one output, and --format against -o's extension:
    one line naming them, and no output folder made."""
    data = Path(__file__).resolve().parents[1] / "data"
    assert main(["cluster", str(data), "--algorithms", "greedy", "--no-progress",
                 "-o", str(tmp_path / "out") + "/"]) == 1
    assert f"{data}: is a directory; give the files in it" in capsys.readouterr().out
    assert not (tmp_path / "out").exists()  # (an empty output folder was left behind)
    assert main(["run", "--algorithms", "bogus", "-o", str(tmp_path / "runx")]) == 2
    assert "unknown algorithm 'bogus'" in capsys.readouterr().err
    assert not (tmp_path / "runx").exists()
    many = tmp_path / "many"
    code = main(["cluster", str(data / "ginkgo_qcd.h5"), str(data / "ginkgo_qcd.root"),
                 "--algorithms", "greedy", "--no-progress", "-o", str(many)])
    err = capsys.readouterr().err
    assert code == 1 and "ginkgo_qcd.h5 and" in err and "ginkgo_qcd.root would write the same" in err
    assert "(the same file name stem)" in err and not many.exists()
    assert main(["cluster", str(data / "ginkgo_qcd.h5"), "--algorithms", "greedy",
                 "--format", "root", "-o", str(tmp_path / "x.h5")]) == 2
    assert "the file's extension says its format" in capsys.readouterr().err
    # --workers was ignored next to --scheduler
    assert main(["cluster", str(data / "ginkgo_qcd.h5"), "--algorithms", "greedy", "--workers",
                 "2", "--scheduler", "tcp://127.0.0.1:1", "-o", str(tmp_path / "x.h5")]) == 2
    assert "the Dask cluster's workers run the chunks" in capsys.readouterr().err


def _results_of_the_sample(tmp_path: Path, algorithms: str) -> Path:
    """``jetastar cluster data/ginkgo_qcd.h5`` with ``algorithms`` into ``tmp_path/res.h5``."""
    data = Path(__file__).resolve().parents[1] / "data"
    res = tmp_path / "res.h5"
    assert main(["cluster", str(data / "ginkgo_qcd.h5"), "--algorithms", algorithms,
                 "--no-progress", "-o", str(res)]) == 0
    return res


def test_compare_bands_that_are_not_numbers(tmp_path, capsys):
    res = _results_of_the_sample(tmp_path, "greedy")
    capsys.readouterr()
    for bands in ("x", "6,2", "0,4"):
        assert main(["compare", str(res), "--bands", bands]) == 2
        assert f"--bands {bands}: give increasing positive integers" in capsys.readouterr().err


def test_outputs_in_a_missing_folder_are_refused_before_any_work(tmp_path, capsys):
    res = tmp_path / "res.h5"
    data = Path(__file__).resolve().parents[1] / "data"
    assert main(["cluster", str(data / "ginkgo_qcd.h5"), "--algorithms", "greedy",
                 "--no-progress", "-o", str(res)]) == 0
    capsys.readouterr()
    missing = tmp_path / "missing"
    for args in (["generate", "--n", "3", "-o", str(missing / "j.h5")],
                 ["observables", str(res), "-o", str(missing / "o.root")],
                 ["compare", str(res), "--plot", str(missing / "x.png")]):
        assert main(args) == 2
        out, err = capsys.readouterr()
        assert f"the folder {missing} does not exist" in err and out == ""  # (no table first)
    assert not missing.exists()


def test_cluster_expands_a_quoted_pattern(tmp_path, capsys):
    """A job script that quotes its glob passes ``"dir/*.h5"`` as it is."""
    for seed in (1, 2):
        assert main(["generate", "--n", "4", "--max-leaves", "8", "--seed", str(seed),
                     "-o", str(tmp_path / f"j{seed}.h5")]) == 0
    out = tmp_path / "out"
    assert main(["cluster", str(tmp_path / "j*.h5"), "--algorithms", "greedy", "--no-progress",
                 "-o", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["j1.results.h5", "j2.results.h5"]
    assert main(["cluster", str(tmp_path / "k*.h5"), "--algorithms", "greedy"]) == 2
    assert "no file matches it as a pattern" in capsys.readouterr().err


def test_each_file_is_reported_when_it_ends(tmp_path, capsys, monkeypatch):
    """A file that failed is reported at once: a run interrupted during a later file had lost
    that line."""
    import jetastar.batch.runner as runner

    bad = tmp_path / "bad.h5"
    bad.write_text("not jets")
    good = tmp_path / "good.h5"
    assert main(["generate", "--n", "6", "--max-leaves", "8", "-o", str(good)]) == 0
    capsys.readouterr()

    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "write_part", interrupted)
    code = main(["cluster", str(bad), str(good), "--algorithms", "greedy", "--no-progress",
                 "-o", str(tmp_path / "out")])
    out, err = capsys.readouterr()
    assert code == 130 and f"FAILED {bad}:" in out and "interrupted" in err


@pytest.mark.parametrize(("sigterm", "code", "word"), [(False, 130, "interrupted"),
                                                        (True, 143, "terminated")])
def test_a_signal_inside_a_kernel_is_an_interrupt_not_an_error(monkeypatch, capsys, sigterm,
                                                                 code, word):
    """A SIGTERM landing while numba boxed a kernel's result came out as "jetastar: error:
    SystemError: CPUDispatcher(<function _lund ...>) returned a result with an exception set",
    exit code 1 (seen in `observables`); it is the interrupt, with its exit code."""
    import signal

    from jetastar.cli import command

    def kernel_interrupted(args):
        if sigterm:
            command._Terminated.signum = int(signal.SIGTERM)
        try:
            raise command._Terminated() if sigterm else KeyboardInterrupt()
        except KeyboardInterrupt as exc:
            raise SystemError("CPUDispatcher(<function _lund>) returned a result with an "
                              "exception set") from exc

    parser = command.build_parser()
    parser._subparsers._group_actions[0].choices["info"].set_defaults(func=kernel_interrupted)
    monkeypatch.setattr(command, "build_parser", lambda: parser)
    assert main(["info", "data/ginkgo_qcd.h5"]) == code
    err = capsys.readouterr().err
    assert err == f"jetastar: {word}\n", err


def test_info_of_an_output_an_interrupted_run_has_not_written(tmp_path, capsys):
    """`jetastar info OUT` of an interrupted run said only "no such file" (and of OUT.parts "is a
    directory"); it says how far the run got and how to finish it."""
    out = tmp_path / "out.h5"
    parts = tmp_path / "out.h5.parts"
    parts.mkdir()
    (parts / "manifest.json").write_text('{"n_jets": 10}')
    (parts / "part-0000000000-0000000004.h5").write_bytes(b"")
    for name in (out, parts):
        assert main(["info", str(name)]) == 1
        err = capsys.readouterr().err
        assert f"{out}: not written yet; {parts} holds the finished parts" in err, err
        assert "(4 of 10 jets done): rerun the same command" in err


def test_compare_json_is_strict_json(tmp_path, capsys):
    """`compare --json` wrote NaN and -Infinity, which strict JSON parsers refuse."""
    import json

    out = _results_of_the_sample(tmp_path, "greedy,kt")
    capsys.readouterr()
    assert main(["compare", str(out), "--json"]) == 0

    def refuse(constant: str) -> None:
        raise ValueError(f"not strict JSON: {constant}")

    rows = json.loads(capsys.readouterr().out, parse_constant=refuse)
    assert rows and any(v is None for row in rows for v in row.values())  # (were NaN / -inf)


def test_help_in_a_terminal_without_unicode():
    """`PYTHONIOENCODING=latin-1 jetastar cluster --help` failed with UnicodeEncodeError (λ, −)."""
    env = {**os.environ, "PYTHONIOENCODING": "latin-1"}
    done = subprocess.run([sys.executable, "-m", "jetastar", "cluster", "--help"], env=env,
                          capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode("latin-1")
    assert b"--t-cut" in done.stdout and b"Traceback" not in done.stderr


def test_failed_lines_reach_a_separate_error_log(tmp_path):
    """`FAILED <file>` went to standard output only: a job whose error log is a separate file
    (Slurm --error, HTCondor error) had an empty one. It is there too, and once in a shared log."""
    cmd = [sys.executable, "-m", "jetastar", "cluster", str(tmp_path / "missing.h5"),
           "--algorithms", "greedy", "-o", str(tmp_path / "out.h5")]
    apart = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    line = f"FAILED {tmp_path / 'missing.h5'}: no such file"
    assert apart.returncode == 1 and line in apart.stdout and line in apart.stderr
    shared = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            timeout=120)
    assert shared.returncode == 1 and shared.stdout.count(line) == 1, shared.stdout


def test_jet_finding_without_fastjet_says_so_before_any_work(tmp_path, capsys, monkeypatch):
    """Without FastJet, `--jet-r` failed only after a progress bar and the compile notice."""
    monkeypatch.setitem(sys.modules, "fastjet", None)
    out = tmp_path / "res.root"
    code = main(["cluster", str(NANOAOD), "--particles", "PFCands",
                 "--jet-r", "0.8", "--algorithms", "greedy", "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 1 and "finding jets in events needs FastJet: pip install" in err
    assert "finding jets:" not in err and not out.exists()


def test_fit_prints_the_estimate_and_writes_the_plot_and_json(tmp_path, capsys):
    import json

    from jetastar.ginkgo import ShowerParams, generate

    jets = tmp_path / "jets.h5"
    jio.write(jets, generate(120, ShowerParams.qcd(lam=2.0, lam_root=2.0), seed=6))
    prefix = tmp_path / "out"
    assert main(["fit", str(jets), "-o", str(prefix), "--grid", "lam=0.5:4"]) == 0
    out = capsys.readouterr().out
    assert "lam = " in out and "95 %" in out and "120 of 120 jets" in out
    data = json.loads((tmp_path / "out.fit.json").read_text())
    assert data["values"]["lam"] > 0 and data["input"] == str(jets)
    assert (tmp_path / "out.fit.png").stat().st_size > 1000
    for bad, message in ((["--free", "t_cut"], "--free takes one or both of lam, lam_root"),
                         (["--grid", "lam=2"], "--grid 'lam=2': give NAME=LOW:HIGH"),
                         (["--grid", "lam_root=1:2"], "is not among --free"),
                         (["--selection", "5"], "give MIN:MAX"),
                         (["--max-leaves", "5"], "have more than max_leaves=5 leaves")):
        assert main(["fit", str(jets), "-o", str(prefix), *bad]) == 2, bad
        assert message in capsys.readouterr().err, bad
    # a declared selection cuts the sample and says how many jets it left out
    assert main(["fit", str(jets), "-o", str(prefix), "--max-leaves", "9",
                 "--selection", "1:9"]) == 0
    out = capsys.readouterr().out
    assert "outside_selection" in out and "selection: 1 <= n_leaves <= 9" in out


_DATA = Path(__file__).resolve().parents[1] / "data"
_QCD = str(_DATA / "ginkgo_qcd.h5")


@pytest.mark.parametrize("argv", [
    ["cluster", _QCD, "--algorithms", "nope", "-o", "o.h5"],
    ["cluster", _QCD, "--algorithms", "greedy", "--option", "beam_size=3", "-o", "o.h5"],
    ["cluster", _QCD, "--algorithms", "beam", "--option", "beam_size=-3", "-o", "o.h5"],
    ["cluster", _QCD, "--algorithms", "beam", "--option", "beam.beam_size=abc", "-o", "o.h5"],
    ["cluster", _QCD, "--algorithms", "greedy", "--option", "=3", "-o", "o.h5"],
    ["cluster", _QCD, "--algorithms", "greedy", "--max-leaves", "trellis=x", "-o", "o.h5"],
    ["cluster", _QCD, "--algorithms", "greedy", "--time-limit", "-1", "-o", "o.h5"],
    ["cluster", _QCD, "--algorithms", "greedy", "--chunk-size", "0", "-o", "o.h5"],
    ["cluster", _QCD, "--algorithms", "greedy", "--threads", "0", "-o", "o.h5"],
    ["cluster", _QCD, "--algorithms", "greedy", "-o", "o.txt"],
    ["cluster", _QCD, "--algorithms", "", "-o", "o.h5"],
    ["cluster", _QCD, "--bogus-flag"],
    ["run", "--algorithms", "bogus", "-o", "runx"],
    ["run", "--option", "beam.beam_size=abc", "-o", "runx"],
    ["run", "--seed", "-5", "-o", "runx"],
    ["run", "--n-qcd", "-3", "-o", "runx"],
    ["run", "--exact-max-leaves", "-1", "-o", "runx"],
    ["generate", "--n", "3", "--seed", "99999999999999999999", "-o", "x.h5"],
    ["generate", "--n", "3", "--min-leaves", "0", "-o", "x.h5"],
    ["demo", "--n", "2", "--seed", "-1"],
    ["generate", "--n", "3", "-o", "x.txt"],
    ["generate", "--n", "3", "--param", "lambda=2", "-o", "x.h5"],
    ["demo", "--n", "-1"],
    ["info", _QCD, "--check", "--t-cut", "-4"],
    ["info", _QCD, "--check", "--lam", "-1"],
    ["info", _QCD, "--check", "--max-jets", "0"],
    ["info", _QCD, "--check", "--time-limit", "-5"],
    ["compare", _QCD, "--bands", "a,b"],
    ["compare", _QCD, "--plot", "x.txt"],
    ["observables", _QCD, "-o", "obs.pkl"],
    ["observables", _QCD, "-o", "obs.root", "--z-cut", "-1"],
    ["observables", _QCD, "-o", "obs.root", "--r0", "0"],
    ["fit", _QCD, "--free", "t_cut"],
    ["fit", _QCD, "--grid", "lam=1"],
    ["fit", _QCD, "--selection", "1-14"],
    ["fit", _QCD, "--device", "tpu"],
    ["algorithms", "bogus"],
    ["bogus-command"],
])
def test_every_usage_error_exits_2_before_any_work(argv, tmp_path, capsys, monkeypatch):
    """Bad usage (an unknown name, option or value, an output the command cannot write) is exit
    code 2 with one line on standard error, as docs/command_line.md says, and nothing written."""
    monkeypatch.chdir(tmp_path)
    try:
        code = main(argv)
    except SystemExit as exc:  # (argparse's own errors exit by themselves)
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2, err
    assert re.search(r"^jetastar( \w+)?: error: ", err, re.M) and "Traceback" not in err, err
    assert list(tmp_path.iterdir()) == []


def test_all_inf_is_explained_for_approximate_algorithms():
    """Issue 61 point 4: greedy's all_inf is its own tree's −∞, not "no tree is possible"."""
    from jetastar.cli.shared import all_inf_note

    note = all_inf_note({"greedy": {"ok": 74, "all_inf": 26}, "beam": {"ok": 100},
                         "trellis": {"all_inf": 3, "ok": 97}})
    assert "all_inf of greedy:" in note and "other trees of the jet may be finite" in note
    assert "beam" not in note and "trellis" not in note
    assert all_inf_note({"trellis": {"all_inf": 3}, "greedy": {"ok": 2}}) == ""
    assert all_inf_note({"not-registered": {"all_inf": 1}}) == ""
