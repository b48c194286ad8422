"""Running the baselines by name: names, options, errors that list the valid choices."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from jetastar import InvalidJetError
from jetastar.clustering import (
    ClusteringResult,
    algorithm_info,
    algorithms,
    beam_search,
    cluster,
    greedy,
    kt,
    mcts,
)
from jetastar.clustering.registry import ALIASES, canonical_name, checked_options, holds_many_jets
from jetastar.ginkgo import ShowerParams, generate, log_likelihood

BASELINES = ("greedy", "beam", "kt", "cambridge", "antikt", "mcts")


@pytest.fixture(scope="module")
def jet():
    return generate(1, ShowerParams.qcd(t_cut=4.0), seed=151, min_leaves=9, max_leaves=9)[0]


def test_names_are_registered():
    names = algorithms()
    assert names == sorted(names)
    for name in BASELINES:
        assert name in names
        info = algorithm_info(name)
        assert info.exact is False and info.description


@pytest.mark.parametrize("name", BASELINES)
@pytest.mark.parametrize("likelihood", ["symmetric", "legacy"])
def test_cluster_by_name(jet, name, likelihood):
    result = cluster(jet, name, likelihood=likelihood)
    assert isinstance(result, ClusteringResult)
    assert result.algorithm == name and result.likelihood == likelihood
    assert result.log_likelihood == log_likelihood(jet, result.tree, likelihood=likelihood)
    assert result.jet_id == jet.jet_id and "time_s" in result.stats


def test_same_as_direct_calls(jet):
    assert cluster(jet, "greedy").tree == greedy(jet).tree
    assert cluster(jet, "beam", beam_size=7).tree == beam_search(jet, beam_size=7).tree
    assert cluster(jet, "cambridge").tree == kt(jet, algorithm="cambridge").tree
    assert cluster(jet, "mcts", n_rollouts=3, seed=2).tree == mcts(jet, n_rollouts=3, seed=2).tree


def test_listed_options():
    assert algorithm_info("greedy").options() == ["likelihood"]
    assert algorithm_info("beam").options() == ["beam_size", "likelihood", "greedy_guard",
                                             "max_time"]
    for name in ("kt", "cambridge", "antikt"):
        assert algorithm_info(name).options() == ["likelihood", "R"]
    assert {"n_rollouts", "seed", "likelihood", "beam_size", "c_puct"} <= set(
        algorithm_info("mcts").options()
    )


def test_unknown_algorithm_lists_valid_names(jet):
    with pytest.raises(ValueError, match="unknown algorithm 'beamsearch'") as info:
        cluster(jet, "beamsearch")
    for name in BASELINES:
        assert name in str(info.value)


def test_unknown_option_lists_valid_options(jet):
    with pytest.raises(ValueError, match="valid: beam_size, likelihood, greedy_guard, max_time"):
        cluster(jet, "beam", beam=3)
    with pytest.raises(ValueError, match="unknown option"):
        cluster(jet, "greedy", beam_size=3)
    with pytest.raises(ValueError, match="valid: likelihood, R"):
        cluster(jet, "antikt", radius=0.4)
    # shower parameters given as options: where they go instead (particles are QCD jets otherwise)
    with pytest.raises(ValueError, match=r"belong to the jets: jetastar\.Jet\.from_particles\("
                                         r"particles, params\)"):
        cluster(np.asarray(jet.leaves), "trellis", params=ShowerParams.w())
    with pytest.raises(ValueError, match=r"unknown option\(s\) t_cut .* belong to the jets"):
        checked_options("greedy", {"t_cut": 1.0})


@pytest.mark.parametrize(
    ("name", "options", "match"),
    [
        ("beam", {"beam_size": 0}, "beam_size must be >= 1"),
        ("beam", {"beam_size": "all"}, "beam_size must be an integer"),
        ("greedy", {"likelihood": "exact"}, "'symmetric', 'legacy'"),
        ("kt", {"R": -1.0}, "R must be"),
        ("mcts", {"decision": "vote"}, "'max_reward', 'most_visited'"),
    ],
)
def test_bad_option_values(jet, name, options, match):
    with pytest.raises(ValueError, match=match):
        cluster(jet, name, **options)


@pytest.mark.parametrize("name", BASELINES)
def test_not_a_jet(name):
    with pytest.raises(InvalidJetError, match=r"jetastar\.Jet"):
        cluster({"E": [10.0], "pz": [9.0]}, name)
    # a list of rows is one jet's momenta, checked as a Jet's are
    with pytest.raises(InvalidJetError, match=r"field 'leaves'.*at least 2 leaves, got 1"):
        cluster([[10.0, 0.0, 0.0, 9.0]], name)


def test_every_registered_algorithm_labels_its_results_with_its_key():
    jet = generate(1, ShowerParams.qcd(), seed=4, min_leaves=6, max_leaves=6)[0]
    # jetastar's own algorithms (other test modules register test algorithms too)
    for name in [a for a in algorithms() if algorithm_info(a).func.__module__.startswith("jetastar.")]:
        res = cluster(jet, name)
        assert res.algorithm == name
        assert canonical_name(res.algorithm) == name
    assert cluster(jet, "trellis", log_z=True).algorithm == "trellis"


def test_aliases_map_to_registry_keys():
    assert canonical_name("exact_map") == "trellis"
    assert canonical_name("astar_approx") == "astar-approx"
    assert canonical_name("window_search") == "window-search"
    assert canonical_name("beam_search") == "beam"
    for name in algorithms():
        assert canonical_name(name) == name
    for key in ALIASES.values():
        assert key in algorithms()
    # a name the registry does not know (a plugin's) is kept as given
    assert canonical_name("my_plugin") == "my_plugin"


def test_results_are_frozen(jet):
    res = cluster(jet, "greedy")
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.algorithm = "kt"  # type: ignore[misc]
    copy = dataclasses.replace(res, jet_id=12, message="note")
    assert (copy.jet_id, copy.message, copy.tree) == (12, "note", res.tree)
    assert (res.jet_id, res.message) == (jet.jet_id, "")


def test_many_jets_go_to_the_collection_entry_point(jet):
    jets = generate(3, ShowerParams.qcd(), seed=5, max_leaves=8)
    assert holds_many_jets(jets) and holds_many_jets(list(jets))
    assert not holds_many_jets(jet) and not holds_many_jets(jet.leaves)
    with pytest.raises(TypeError, match=r"runs one jet.*jetastar\.cluster\(jets, 'greedy'\)"):
        cluster(jets, "greedy")
    with pytest.raises(TypeError, match="cluster_jets"):
        cluster(list(jets), "kt")
    with pytest.raises(ValueError, match="unknown option"):  # options are checked first
        cluster(jets, "greedy", beam_size=3)
    assert checked_options("trellis", {"log_z": "false"}) == {"log_z": False}


def test_ctrl_c_during_a_kernel_is_a_keyboard_interrupt(python_sigint):
    """A Ctrl-C that lands while numba boxes a kernel's result (which runs Python code) comes out
    of cluster() as KeyboardInterrupt, not as the SystemError numba makes of it (a batch would
    record that as the algorithm failing on the jet and go on)."""
    import os
    import signal
    import threading
    import time

    from jetastar import Jet

    params = ShowerParams.qcd(t_cut=0.05)
    leaves = np.concatenate([j.leaves for j in generate(100, params, seed=7)])[:500]
    jet = Jet(leaves, params, jet_id=0)
    cluster(jet, "greedy")
    for delay in (0.05, 0.13, 0.31):
        timer = threading.Timer(delay, lambda: os.kill(os.getpid(), signal.SIGINT))
        timer.start()
        deadline = time.monotonic() + 60
        with pytest.raises(KeyboardInterrupt):
            while time.monotonic() < deadline:
                cluster(jet, "greedy")
        timer.join()


# ---------------------------------------------------------------------- every algorithm's declaration
#: jetastar's own algorithms (test modules register others)
OWN = [a for a in algorithms() if algorithm_info(a).func.__module__.startswith("jetastar.")]


@pytest.mark.parametrize("name", OWN)
def test_declared_options_are_those_of_the_function(name):
    """Names, order and defaults of the declared options are the per-jet function's keywords; an
    option that takes None is declared so, and every option has its line of help."""
    import inspect

    info = algorithm_info(name)
    params = [p for p in list(inspect.signature(info.func).parameters.values())[1:]
              if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)]
    assert info.options() == [p.name for p in params]
    for option, p in zip(info.declared, params, strict=True):
        assert option.default == p.default, option.name
        assert option.help and "\n" not in option.help, option.name
        if p.default is None:
            assert option.none or option.kind == "any", option.name
        if option.kind == "choice" and option.default is not None:
            assert option.default in option.choices, option.name
        if option.kind in ("integer", "number") and option.default is not None:
            assert option.convert(option.default) == option.default, option.name


def _round_trip_values(option):
    if option.kind == "choice":
        return list(option.choices)
    if option.kind == "flag":
        return [True, False] + ([None] if option.none else [])
    values = [] if option.default is None else [option.default]
    if option.kind == "integer":
        values.append(int(option.low if option.low is not None else 0) + 1)
    if option.kind == "number":
        values.append((option.low or 0.0) + 2.5)
    return values + ([None] if option.none else [])


@pytest.mark.parametrize("name", OWN)
def test_options_round_trip_through_the_command_line(name):
    """Every value an option declares (its default, a value in its range, each choice, None where
    allowed) given as ``--option NAME.KEY=VALUE`` text reaches the run as that value, and a value
    out of its range is refused before any work, naming the option."""
    import json

    from jetastar.batch import BatchConfig, BatchError, check_config, parse_options

    info = algorithm_info(name)
    for option in info.declared:
        if option.kind in ("any", "text"):
            continue
        for value in _round_trip_values(option):
            config = BatchConfig([name], options=parse_options(
                [f"{name}.{option.name}={json.dumps(value)}"]), chunk_size=10)
            check_config(config)
            got = config.options[name][option.name]
            assert got == value and type(got) is type(value), (option.name, value, got)
        bad = ("nope" if option.kind == "choice" else "maybe" if option.kind == "flag"
               else option.low - 1 if option.low is not None else None)
        if bad is not None:
            config = BatchConfig([name], options={name: {option.name: bad}})
            with pytest.raises(BatchError, match=option.name):
                check_config(config)


@pytest.mark.parametrize("name", OWN)
def test_estimates_are_finite(name):
    info = algorithm_info(name)
    for n in (2, 5, 10, 20, 40):
        for estimate in (info.estimate, info.expected_cpu):
            if estimate is not None:
                seconds = estimate(n, {})
                assert seconds is not None and 0.0 <= seconds < np.inf, (n, seconds)
    assert info.estimate is not None or info.time_option is not None or info.exact, (
        "an algorithm that cannot stop at a time limit needs a lower estimate of its time")


@pytest.mark.parametrize("name", OWN)
def test_family_warm_up_and_main_job(name):
    from jetastar.clustering.registry import FAMILIES, MAIN_JOB

    info = algorithm_info(name)
    assert info.family in FAMILIES[:-1]
    assert info.func.__module__.startswith(f"jetastar.clustering.{info.family}.")
    assert info.warm_up.compile_s >= 0 and info.main_job in MAIN_JOB
    for alias in info.aliases:
        assert canonical_name(alias) == name
    group = [a for a in OWN if info.warm_up.group is not None
             and algorithm_info(a).warm_up.group == info.warm_up.group]
    assert info.warm_up.group is None or len(group) >= 2


@pytest.fixture(scope="module")
def small_jets():
    from jetastar import JetCollection

    return JetCollection.concatenate([generate(12, ShowerParams.qcd(), seed=152, max_leaves=12),
                                      generate(8, ShowerParams.w(), seed=153, max_leaves=12)])


@pytest.mark.parametrize("name", [a for a in OWN if algorithm_info(a).chunk is not None])
def test_the_chunk_kernel_equals_the_per_jet_function(name, small_jets):
    """What the columnar path gives a jet is what the per-jet function gives it: tree,
    log-likelihood (bit for bit), status, message, exactness, bounds, options and counters."""
    from jetastar.clustering.chunks import DONE, cluster_columns

    flat = cluster_columns(small_jets, {name: {}}, parallel=False)[name]
    done = np.flatnonzero(flat.outcome == DONE).tolist()
    assert len(done) >= len(small_jets) // 2
    for i in done:
        got, ref = flat.result(i), cluster(small_jets[i], name)
        assert got.tree == ref.tree and got.log_likelihood == ref.log_likelihood
        assert (got.status, got.message, got.exact) == (ref.status, ref.message, ref.exact)
        assert got.upper_bound == ref.upper_bound and got.log_z == ref.log_z
        assert got.options == ref.options
        stats = {k: v for k, v in ref.stats.items() if not k.startswith("time")}
        assert {k: got.stats[k] for k in stats} == stats
