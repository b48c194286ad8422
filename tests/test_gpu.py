"""The GPU backend (jetastar.clustering.gpu) against the CPU trellis.

Without a GPU the kernels run in numba's CUDA simulator (tests/conftest.py switches it on), on small
jets; the same checks run on a real GPU with ``NUMBA_ENABLE_CUDASIM=0``.
"""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from helpers.gpu import NEEDS_GPU_OR_SIMULATOR

from jetastar import TooLargeError
from jetastar._cuda import check_device, resolve_device, simulator_enabled
from jetastar.clustering import Trellis, cluster, exact_map, exact_trellis, exact_trellis_batch
from jetastar.clustering import gpu as gpu_mod
from jetastar.errors import GpuUnavailableError, OptionError
from jetastar.ginkgo import ShowerParams, generate

pytestmark = NEEDS_GPU_OR_SIMULATOR

#: deal each cluster's splits to several threads, so the partial-result path runs on small jets
SHARED = {"target_threads": 64, "min_free_bits": 1}


def _jets(n_leaves, count=2, seed=11):
    out = []
    for params in (ShowerParams.qcd(), ShowerParams.w()):
        out += generate(count, params, seed=seed, min_leaves=n_leaves, max_leaves=n_leaves)
    return out


def _same_table(sol, tr, b=0):
    """GPU tables equal to the CPU trellis's: t, MAP, log Z (1e-9 relative) and the arg-max."""
    node, cpu = sol.node[b], tr._node
    for col in (0, 1, 2):
        a, c = node[1:, col], cpu[1:, col]
        assert np.array_equal(np.isneginf(a), np.isneginf(c))
        fin = np.isfinite(c)
        np.testing.assert_allclose(a[fin], c[fin], rtol=1e-9, atol=1e-9)
    m = node.shape[0]
    finite = np.isfinite(cpu[:, 1])
    assert np.array_equal(sol.best[b][finite], tr._best[finite])
    if sol.exact_count:
        assert np.array_equal(node.view(np.int64)[1:, 3], tr._node_i[1:, 3])
    return m


@pytest.mark.parametrize("likelihood", ["symmetric", "legacy"])
@pytest.mark.parametrize("shared", [False, True])
def test_tables_equal_the_cpu_trellis(likelihood, shared):
    kw = SHARED if shared else {}
    for jet in _jets(7, count=1):
        tr = Trellis(jet, likelihood, device="cpu")
        sol = gpu_mod.solve_on_gpu([jet.leaves], jet.likelihood_constants(likelihood)[None], **kw)
        _same_table(sol, tr)
        assert sol.finished and sol.stats["device"] == "gpu"


def test_unpruned_and_map_only_passes():
    jet = _jets(6, count=1)[1]
    tr = Trellis(jet, device="cpu")
    c = jet.likelihood_constants("symmetric")[None]
    _same_table(gpu_mod.solve_on_gpu([jet.leaves], c, prune=False, **SHARED), tr)
    only = gpu_mod.solve_on_gpu([jet.leaves], c, log_z=False)
    full = (1 << jet.n_leaves) - 1
    assert only.node[0, full, 1] == pytest.approx(tr.map_log_likelihood(), rel=1e-12)
    assert not only.exact_count


@pytest.mark.parametrize("likelihood", ["symmetric", "legacy"])
def test_public_api_on_the_gpu(likelihood):
    jet = _jets(7, count=1, seed=5)[0]
    cpu = exact_trellis(jet, likelihood, device="cpu")
    gpu = exact_trellis(jet, likelihood, device="gpu")
    assert gpu.stats["device"] == "gpu" and gpu.options["device"] == "gpu"
    assert gpu.log_likelihood == pytest.approx(cpu.log_likelihood, rel=1e-9)
    assert gpu.log_z == pytest.approx(cpu.log_z, rel=1e-9)
    assert gpu.n_trees == cpu.n_trees and isinstance(gpu.n_trees, int)
    assert gpu.tree == cpu.tree
    fast = exact_map(jet, likelihood, device="gpu")
    assert fast.tree == cpu.tree and fast.log_z is None and fast.options["device"] == "gpu"
    assert fast.log_likelihood == pytest.approx(cpu.log_likelihood, rel=1e-9)
    by_name = cluster(jet, "trellis", likelihood=likelihood, log_z=True, device="gpu")
    assert by_name.log_z == pytest.approx(cpu.log_z, rel=1e-9)
    # sub-cluster queries read the copied-back table
    tg, tc = Trellis(jet, likelihood, device="gpu"), Trellis(jet, likelihood, device="cpu")
    assert tg.cluster_log_z([0, 1, 2]) == pytest.approx(tc.cluster_log_z([0, 1, 2]), rel=1e-9)


@pytest.mark.parametrize("shared", [False, True])
def test_density_form_on_the_gpu_is_the_cpu_evidence(shared):
    """The density form's sums over trees on the GPU: tables, log Z = log_evidence's, no MAP engine."""
    from jetastar.inference import log_evidence

    for jet in _jets(6, count=1, seed=13):
        tr = Trellis(jet, "density", device="cpu")
        sol = gpu_mod.solve_on_gpu([jet.leaves], jet.likelihood_constants("density")[None],
                                   **(SHARED if shared else {}))
        _same_table(sol, tr)
        gpu = exact_trellis(jet, "density", device="gpu")
        assert gpu.stats["device"] == "gpu"
        assert gpu.log_z == pytest.approx(log_evidence(jet).log_z[0], rel=1e-12)
        assert gpu.tree == exact_trellis(jet, "density", device="cpu").tree
    with pytest.raises(ValueError, match="'density' form's Jacobian is unbounded"):
        exact_map(jet, "density", device="gpu")


@pytest.mark.parametrize("likelihood", ["density", "symmetric", "legacy"])
def test_scans_on_the_gpu_equal_the_cpus(likelihood):
    """log Z and the MAP value on a grid of (λ, λ_R) by the batched GPU trellis (one pass per
    point, jets of a size sharing launches) equal the CPU's one-pass grid; invalid jets, one-leaf
    jets and jets over max_leaves take the CPU's path and say so the same way."""
    from jetastar import JetCollection
    from jetastar.clustering.exact.evidence import log_z_grid
    from jetastar.inference import scan

    jets = generate(9, ShowerParams.qcd(), seed=21, max_leaves=5)
    single = JetCollection.from_momenta([np.asarray(jets[0].leaves)[:1]], validate=False)
    big = generate(1, ShowerParams.qcd(), seed=22, min_leaves=7, max_leaves=7)
    jets = JetCollection.concatenate([jets, single, big])
    bad = np.array(jets.leaves, copy=True)
    bad[jets.leaf_offsets[1], 0] = -1.0  # jet 1: a leaf of negative energy
    jets = JetCollection(
        leaves=bad, leaf_offsets=jets.leaf_offsets, children=jets.children,
        leaf_of_node=jets.leaf_of_node, node_offsets=jets.node_offsets, jet_id=jets.jet_id,
        seed=jets.seed, jet_type=jets.jet_type, params=jets.params)
    grid = {"lam": np.array([1.2, 2.3]), "lam_root": np.array([1.5, 3.0])}
    cpu = log_z_grid(jets, likelihood, want_map=True, max_leaves=6, **grid)
    gpu = log_z_grid(jets, likelihood, want_map=True, max_leaves=6, device="gpu",
                     batch_memory=1, **grid)  # one jet per batch: the batching's seams too
    assert np.array_equal(cpu.outcome, gpu.outcome)
    assert set(cpu.outcome.tolist()) >= {0, 1}
    for a, b in ((cpu.log_z, gpu.log_z), (cpu.map_log_likelihood, gpu.map_log_likelihood)):
        assert np.array_equal(np.isnan(a), np.isnan(b)) and np.array_equal(np.isinf(a), np.isinf(b))
        fin = np.isfinite(a)
        assert fin.sum() >= 8 * 4
        np.testing.assert_allclose(b[fin], a[fin], rtol=1e-9)
    s_cpu = scan(jets[2:9], lam=grid["lam"], likelihood=likelihood)
    s_gpu = scan(jets[2:9], lam=grid["lam"], likelihood=likelihood, device="gpu")
    np.testing.assert_allclose(s_gpu.total, s_cpu.total, rtol=1e-9)


@pytest.mark.parametrize("shared", [False, True])
@pytest.mark.parametrize("likelihood", ["symmetric", "legacy"])
def test_marginals_equal_the_cpu(shared, likelihood):
    jet = _jets(7, count=1, seed=8)[1]
    tc = Trellis(jet, likelihood, device="cpu")
    tg = Trellis(jet, likelihood, device="gpu")
    c = jet.likelihood_constants(likelihood)[None]
    margs, walked = gpu_mod.gpu_marginals(tg._node[None], c, **(SHARED if shared else {}))
    marg = margs[0]
    np.testing.assert_allclose(marg, tc.marginals_array(), rtol=1e-9, atol=1e-12)
    assert marg.max() == 1.0 and (marg > 0).sum() > 2 * 7
    np.testing.assert_allclose(tg.marginals_array(), tc.marginals_array(), rtol=1e-9, atol=1e-12)
    # the kernels count the (cluster, parent) pairs they walked: every pair of a cluster whose
    # log Z is finite (counted here from the table, not from the formula the code uses)
    n, full = 7, (1 << 7) - 1
    want = sum((1 << (n - bin(s).count("1"))) - 1 for s in range(1, full)
               if np.isfinite(tc.log_z_array()[s]))
    assert 0 < want < 3**n - 2 * 2**n + 1  # some clusters cannot split: fewer than every pair
    assert walked == want and tg.stats["marginal_splits_evaluated"] == want


def test_samples_follow_the_posterior():
    """Sample frequencies of a GPU-solved trellis match the exact posterior of each tree."""
    jet = _jets(4, count=1, seed=2)[0]
    tg = Trellis(jet, device="gpu")
    n = 6000
    trees = tg.sample(n, seed=3)
    counts: dict = {}
    for t in trees:
        counts[t.to_nested()] = counts.get(t.to_nested(), 0) + 1
    from jetastar.ginkgo import log_likelihood

    chi2 = 0.0
    for nested, k in counts.items():
        tree = next(t for t in trees if t.to_nested() == nested)
        p = math.exp(log_likelihood(jet, tree) - tg.log_partition())
        chi2 += (k - n * p) ** 2 / (n * p)
    # 15 trees of 4 leaves: chi2 with <= 14 degrees of freedom; 36 is its 0.1 % tail
    assert chi2 < 36.0, chi2


def test_batched_many_jets_per_launch():
    jets = _jets(6, count=3, seed=21) + _jets(5, count=2, seed=4)
    for likelihood in ("symmetric", "legacy"):
        res = exact_trellis_batch(jets, likelihood, device="gpu")
        assert len(res) == len(jets)
        for r, jet in zip(res, jets, strict=True):
            cpu = exact_trellis(jet, likelihood, device="cpu")
            assert r.stats["device"] == "gpu" and r.stats["batch_jets"] >= 2
            assert r.log_z == pytest.approx(cpu.log_z, rel=1e-9)
            assert r.log_likelihood == pytest.approx(cpu.log_likelihood, rel=1e-9)
            assert r.tree == cpu.tree and r.n_trees == cpu.n_trees and r.status == cpu.status
    # several jets in one solve give each jet's own table
    sub = jets[:3]
    c = np.stack([j.likelihood_constants("symmetric") for j in sub])
    sol = gpu_mod.solve_on_gpu([j.leaves for j in sub], c, **SHARED)
    for b, jet in enumerate(sub):
        _same_table(sol, Trellis(jet, device="cpu"), b)


def test_batch_reads_trees_on_the_gpu_and_collections_as_columns():
    """``tables=False`` brings back each jet's MAP tree (read on the device), root record and
    impossible-cluster count; they equal what the copied-back tables give. A JetCollection goes
    through the columnar path and gives the same results as its Jet objects."""
    from jetastar import Jet, JetCollection
    from jetastar.clustering._engine import tree_from_best

    collinear = np.array([[5.0, 0.0, 0.0, 4.999], [5.0, 0.0, 0.01, 4.998],
                          [5.0, 0.01, 0.0, 4.997], [5.0, 0.0, 0.0, 4.996]])
    jets = [*_jets(4, count=2, seed=31), Jet(collinear, ShowerParams.qcd(), jet_id=77)]
    for likelihood in ("symmetric", "legacy"):
        c = np.stack([j.likelihood_constants(likelihood) for j in jets])
        full = gpu_mod.solve_on_gpu([j.leaves for j in jets], c, **SHARED)
        small = gpu_mod.solve_on_gpu([j.leaves for j in jets], c, tables=False, **SHARED)
        assert small.node is None and small.best is None
        m = full.node.shape[1]
        for b in range(len(jets)):
            want = tree_from_best(full.best[b], m - 1, b)
            assert np.array_equal(small.children[b], want.children)
            assert np.array_equal(small.root[b].view(np.int64), full.node[b, -1].view(np.int64))
            assert small.impossible[b] == np.count_nonzero(full.node[b, 1:, 1] == -np.inf)
        assert small.impossible[-1] > 0 and small.root[-1, 1] == -np.inf
        collection = JetCollection.from_jets(jets)
        from_list = exact_trellis_batch(jets, likelihood, device="gpu")
        from_columns = exact_trellis_batch(collection, likelihood, device="gpu")
        for a, b, jet in zip(from_list, from_columns, jets, strict=True):
            one = Trellis(jet, likelihood, device="gpu").result()
            for r in (a, b):
                assert r.tree == one.tree and r.tree.to_nested() == one.tree.to_nested()
                assert r.log_likelihood == one.log_likelihood and r.n_trees == one.n_trees
                assert r.log_z == one.log_z or (r.log_z == one.log_z == -math.inf)
                assert (r.status, r.message, r.jet_id) == (one.status, one.message, jet.jet_id)
                assert r.options == one.options and r.exact and r.upper_bound == one.upper_bound
                assert r.stats["clusters_impossible"] == one.stats["clusters_impossible"]
        assert from_columns[-1].status == "all_inf" and from_columns[-1].jet_id == 77


def test_batch_of_a_collection_with_an_invalid_jet_names_it():
    from jetastar import InvalidJetError, JetCollection

    collection = JetCollection.from_jets(_jets(5, count=1, seed=5))
    bad = np.array(collection.leaves, copy=True)
    bad[collection.leaf_offsets[1] + 2, 0] = np.nan
    collection.leaves = bad
    with pytest.raises(InvalidJetError, match=f"jet {collection.jet_id[1]}") as info:
        exact_trellis_batch(collection, device="gpu")
    assert "finite" in str(info.value)


def test_launches_silence_only_numba_cudas_low_occupancy_warning():
    """On an H100 every small grid (the first cluster sizes) printed numba-cuda's low-occupancy
    warning, which ``-W error`` turns into a failure; other warnings still come through."""
    import warnings

    from numba.core.errors import NumbaPerformanceWarning

    class FakeKernel:
        def __init__(self, message):
            self.message, self.launched = message, 0

        def __getitem__(self, config):
            def run(*args):
                self.launched += 1
                warnings.warn(NumbaPerformanceWarning(self.message), stacklevel=1)
            return run

    quiet = FakeKernel("\x1b[1mGrid size 3 will likely result in GPU under-utilization due to "
                       "low occupancy.\x1b[0m")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gpu_mod._launch(quiet, 10)
    assert quiet.launched == 1
    loud = FakeKernel("Host array used in CUDA kernel will incur copy overhead to/from device.")
    with pytest.warns(NumbaPerformanceWarning, match="Host array"):
        gpu_mod._launch(loud, 10)


def test_all_inf_jet():
    # three nearly collinear light leaves: the whole jet's t is below t_cut, no tree is possible
    from jetastar import Jet

    leaves = np.array([[5.0, 0.0, 0.0, 4.999], [5.0, 0.0, 0.01, 4.998], [5.0, 0.01, 0.0, 4.997]])
    jet = Jet(leaves, ShowerParams.qcd())
    cpu, gpu = exact_trellis(jet, device="cpu"), exact_trellis(jet, device="gpu")
    assert cpu.status == gpu.status == "all_inf"
    assert cpu.log_z == gpu.log_z == -math.inf and gpu.n_trees == 0
    assert not Trellis(jet, device="gpu").marginals_array().any()


def test_budget_and_memory_planner():
    jet = _jets(8, count=1)[0]
    res = exact_map(jet, device="gpu", max_time=1e-9)
    assert res.status == "budget" and not res.exact and res.stats["device"] == "gpu"
    with pytest.raises(TooLargeError, match="GPU trellis limit of 30 leaves"):
        gpu_mod.solve_on_gpu([np.zeros((31, 4))], np.zeros((1, 2, 5)))
    with pytest.raises(TooLargeError, match="max_memory"):
        exact_trellis(jet, device="gpu", max_memory=1000)
    assert gpu_mod.estimate_gpu_memory(30) > 36 * 2**30
    assert gpu_mod.estimate_gpu_memory(12, 1000) > 1000 * 36 * 2**12


def test_gpu_trellis_honours_max_time():
    """``max_time`` stops the GPU trellis between launches (after the first) on every path that
    takes one, and a stopped solve is never read as exact."""
    jets = _jets(6, count=2, seed=21)
    jet = jets[0]
    res = exact_trellis(jet, device="gpu", max_time=1e-9)
    assert (res.status, res.exact, res.log_z) == ("budget", False, None)
    assert "GPU stopped by max_time" in res.message and res.tree.n_leaves == 6
    with pytest.raises(TimeoutError, match="on the GPU stopped by max_time=1e-09 s"):
        Trellis(jet, device="gpu", max_time=1e-9)
    sol = gpu_mod.solve_on_gpu([jet.leaves], jet.likelihood_constants("symmetric")[None],
                               max_time=1e-9)
    assert not sol.finished and sol.stats["launches"] == 1
    stopped = exact_trellis_batch(jets, device="gpu", max_time=1e-9)
    assert [r.status for r in stopped] == ["budget"] * len(jets)
    assert all(not r.exact and r.log_z is None and "GPU batch" in r.message for r in stopped)
    # a generous budget changes nothing
    done = exact_trellis_batch(jets, device="gpu", max_time=600)
    for r, j in zip(done, jets, strict=True):
        want = exact_trellis(j, device="cpu")
        assert r.status == want.status and r.exact and r.tree == want.tree
        assert r.log_z == pytest.approx(want.log_z, rel=1e-9)
    # the registry's GPU batch (how a batch run clusters a chunk) passes the option on
    from jetastar import JetCollection
    from jetastar.clustering import algorithm_info

    via = algorithm_info("trellis").device_batch.run(
        JetCollection.from_jets(jets), {"log_z": True, "device": "gpu", "max_time": 1e-9})
    assert [r.status for r in via] == ["budget"] * len(jets)


def test_t_is_made_on_the_host():
    """The ``t`` column comes from the CPU's own ``fill_subset_t`` (no fused multiply-add on the
    device can move a cut decision): the GPU table holds exactly what the host made."""
    from jetastar.clustering._subsets import subset_t

    jet = _jets(6, count=1, seed=4)[1]
    c = jet.likelihood_constants("legacy")[None]
    sol = gpu_mod.solve_on_gpu([jet.leaves], c)
    assert np.array_equal(sol.node[0, :, 0], subset_t(jet.leaves, c[0, 0]))
    real = gpu_mod._host_t
    marked = real(jet.leaves[None], c) * (1 + 2**-40)
    try:
        gpu_mod._host_t = lambda stacked, consts: marked
        sol = gpu_mod.solve_on_gpu([jet.leaves], c)
    finally:
        gpu_mod._host_t = real
    assert np.array_equal(sol.node[0, :, 0], marked[0])


def test_memory_planner_refuses_what_the_gpu_cannot_hold(monkeypatch):
    """The planner's refusal (skipped by the simulator, which has no memory to ask about) with
    the free memory a small GPU would report."""
    jet = _jets(6, count=1)[0]
    c = jet.likelihood_constants("symmetric")[None]
    monkeypatch.setattr(gpu_mod, "_free_gpu_memory", lambda: 10_000)
    with pytest.raises(TooLargeError, match=r"above the free GPU memory of 9\.8 KiB"):
        gpu_mod.solve_on_gpu([jet.leaves], c)
    with pytest.raises(TooLargeError, match="free GPU memory"):
        exact_trellis(jet, device="gpu")
    with pytest.raises(TooLargeError, match="the exact MAP of 6 leaves on the GPU"):
        exact_map(jet, device="gpu")
    monkeypatch.setattr(gpu_mod, "_free_gpu_memory", lambda: 2**40)
    assert gpu_mod.solve_on_gpu([jet.leaves], c).finished


def test_auto_proves_a_kernel_runs_and_falls_back_in_one_line(monkeypatch, capsys):
    """``device="auto"`` chooses a GPU only where a test kernel compiled and ran; where a GPU was
    found but that failed (a driver without NVRTC), it says so once and runs on the CPU."""
    from jetastar import _cuda

    assert _cuda._test_kernel(_cuda.load_cuda()) is None  # runs (here in the simulator)
    broken = _cuda._Probe(False, "NVIDIA H100 (compute capability 9.0)",
                          "a test kernel did not compile and run (OSError: libnvrtc.so.13)", True)
    monkeypatch.setattr(_cuda, "_probe", lambda: broken)
    _cuda._say_cpu_fallback.cache_clear()
    assert resolve_device("auto") == "cpu" and resolve_device("auto") == "cpu"
    err = capsys.readouterr().err.splitlines()
    assert err == ["jetastar: device='auto' runs on the CPU: a test kernel did not compile and "
                   "run (OSError: libnvrtc.so.13)"]
    with pytest.raises(GpuUnavailableError, match="libnvrtc"):
        resolve_device("gpu")
    nothing = _cuda._Probe(False, "", "no GPU", False)
    monkeypatch.setattr(_cuda, "_probe", lambda: nothing)
    assert resolve_device("auto") == "cpu" and capsys.readouterr().err == ""  # no GPU: quiet
    _cuda._say_cpu_fallback.cache_clear()


def test_gpu_extra_brings_the_compiler_libraries():
    """``pip install ".[gpu]"`` must bring NVVM and NVRTC (numba-cuda's toolkit extras), not
    numba-cuda alone, which fails at the first compile on a machine with only a driver."""
    import re
    from pathlib import Path

    text = (Path(__file__).parents[1] / "pyproject.toml").read_text()  # (no tomllib on 3.10)
    extras = dict(re.findall(r"^([\w-]+)\s*=\s*\[(.*)\]\s*$", text, flags=re.M))
    assert re.fullmatch(r'"numba-cuda\[cu12\][^"]*"', extras["gpu"].strip())
    assert re.fullmatch(r'"numba-cuda\[cu13\][^"]*"', extras["gpu-cu13"].strip())


def test_device_option():
    assert check_device(None) == "auto" and check_device("GPU") == "gpu"
    with pytest.raises(OptionError, match="device must be one of cpu, gpu, auto"):
        check_device("cuda")
    assert resolve_device("cpu") == "cpu"
    # auto never runs the simulator, nor a GPU for a small problem
    assert resolve_device("auto", worth_it=False) == "cpu"
    if simulator_enabled():
        assert resolve_device("auto") == "cpu"
        assert resolve_device("gpu") == "gpu"
    jet = _jets(5, count=1)[0]
    assert exact_trellis(jet).stats["device"] == "cpu"
    with pytest.raises(ValueError, match="unknown device 'tpu'"):
        cluster(jet, "trellis", device="tpu")
    from jetastar.costs import HCCCost

    w = np.array([[0, 2, -1], [2, 0, -1], [-1, -1, 0]], dtype=float)
    with pytest.raises(OptionError, match="cost models run on the CPU"):
        Trellis(HCCCost(w), device="gpu")


def _run(code: str, env_extra: dict) -> subprocess.CompletedProcess:
    import os

    env = {**os.environ, **env_extra}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env=env, timeout=120)


def test_without_numba_cuda_auto_falls_back_and_gpu_says_what_to_install():
    """A numba without its CUDA target: auto runs on the CPU, device='gpu' is one clear error."""
    code = """
        import sys
        sys.modules["numba.cuda"] = None  # as if numba-cuda were not installed
        from jetastar.ginkgo import ShowerParams, generate
        from jetastar.clustering import exact_trellis, gpu_status
        jet = generate(1, ShowerParams.qcd(), seed=1, min_leaves=5, max_leaves=5)[0]
        print(exact_trellis(jet, device="auto").stats["device"])
        print(gpu_status()["available"])
        try:
            exact_trellis(jet, device="gpu")
        except Exception as exc:
            print(type(exc).__name__, "|", exc)
    """
    out = _run(code, {"NUMBA_ENABLE_CUDASIM": "0"})
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines[0] == "cpu" and lines[1] == "False"
    assert lines[2].startswith("GpuUnavailableError |")
    assert 'pip install "jetastar[gpu]"' in lines[2] and "\n" not in lines[2]


def test_an_installed_cuda_target_without_a_gpu_is_not_told_to_install_it(monkeypatch):
    from jetastar import _cuda

    reason = ("numba's CUDA target is installed but finds no usable GPU (no NVIDIA driver or "
              "device visible to this process)")
    monkeypatch.setattr(_cuda, "_probe", lambda: _cuda._Probe(False, "", reason, False))
    with pytest.raises(GpuUnavailableError, match="finds no usable GPU") as info:
        _cuda.resolve_device("gpu")
    assert "pip install" not in str(info.value)


def test_real_gpu_if_present():
    """On a machine with a GPU, the compiled kernels (not the simulator) agree with the CPU."""
    code = """
        from jetastar.clustering import gpu_status, exact_trellis
        from jetastar.ginkgo import ShowerParams, generate
        if not gpu_status()["available"]:
            print("NOGPU", gpu_status()["reason"])
            raise SystemExit(0)
        jet = generate(1, ShowerParams.w(), seed=7, min_leaves=12, max_leaves=12)[0]
        a, b = exact_trellis(jet, device="cpu"), exact_trellis(jet, device="gpu")
        assert abs(a.log_z - b.log_z) <= 1e-9 * abs(a.log_z), (a.log_z, b.log_z)
        assert a.tree == b.tree and a.n_trees == b.n_trees
        print("OK")
    """
    out = _run(code, {"NUMBA_ENABLE_CUDASIM": "0"})
    assert out.returncode == 0, out.stderr
    if out.stdout.startswith("NOGPU"):
        pytest.skip(f"no real GPU here: {out.stdout[6:].strip()}")
    assert out.stdout.strip() == "OK"


def test_gpu_unavailable_error_is_a_jetastar_error():
    from jetastar import JetastarError

    assert issubclass(GpuUnavailableError, JetastarError)


def test_cli_device_option_and_info(tmp_path):
    """``--device`` reaches the exact trellis; ``jetastar info`` names the device; a GPU asked for
    where there is none is one clean error line before any work."""
    import json

    from jetastar import io

    jets = generate(3, ShowerParams.qcd(), seed=3, min_leaves=5, max_leaves=6)
    src = tmp_path / "jets.h5"
    io.write(src, jets)
    out = tmp_path / "out.h5"
    cmd = [sys.executable, "-m", "jetastar", "cluster", str(src), "--algorithms", "trellis",
           "--option", "trellis.log_z=true", "--device", "gpu", "-o", str(out), "--no-progress"]
    import os

    sim = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "NUMBA_ENABLE_CUDASIM": "1"})
    assert sim.returncode == 0, sim.stderr
    res = io.read_results(out)["trellis"]
    cpu = [exact_trellis(j, device="cpu") for j in jets]
    np.testing.assert_allclose(res.log_z, [r.log_z for r in cpu], rtol=1e-9)
    none = subprocess.run([*cmd[:-3], "-o", str(tmp_path / "x.h5")], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "NUMBA_ENABLE_CUDASIM": "0"})
    real_gpu = _run("from jetastar.clustering import gpu_status as g; "
                    "print(g()['available'])", {"NUMBA_ENABLE_CUDASIM": "0"}).stdout.strip()
    if real_gpu == "False":
        assert none.returncode != 0
        lines = none.stderr.strip().splitlines()
        assert len(lines) == 1 and "--device" in lines[0], lines
        # what to install where numba's CUDA target is missing; where it is there, what it lacks
        assert "jetastar[gpu]" in lines[0] or "finds no usable GPU" in lines[0], lines
        assert not (tmp_path / "x.h5").exists()
    info = subprocess.run([sys.executable, "-m", "jetastar", "info", "--json"], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "NUMBA_ENABLE_CUDASIM": "1"})
    assert info.returncode == 0, info.stderr
    got = json.loads(info.stdout)
    assert got["device_auto"] == "cpu" and "simulator" in got["device_reason"]
    # what the GPU path costs per size, from the H100 measurements (docs/gpu.md)
    assert got["gpu_cost_measured"]["map_and_log_z_s"]["26"] == gpu_mod.GPU_MEASURED[
        "map_and_log_z_s"][26]
    text = subprocess.run([sys.executable, "-m", "jetastar", "info"], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "NUMBA_ENABLE_CUDASIM": "1"})
    assert "GPU cost:        MAP + log Z 0.09 s at 20" in text.stdout
    assert "(measured on one NVIDIA H100 80GB HBM3, 2026-11-27)" in text.stdout


def test_one_gpu_per_worker_process():
    """Pool workers are dealt the visible GPUs round robin, before CUDA starts in them."""
    code = """
        import multiprocessing, os
        from jetastar.batch.executors import _worker_setup
        counter = multiprocessing.get_context("spawn").Value("i", 0)
        seen = []
        for _ in range(3):
            _worker_setup([], None, ["3", "5"], counter)
            seen.append(os.environ["CUDA_VISIBLE_DEVICES"])
        print(",".join(seen))
        from jetastar._cuda import gpus_for_workers
        print(gpus_for_workers(None), gpus_for_workers("cpu"))
    """
    out = _run(code, {})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["3,5,3", "[]", "[]"]


@pytest.mark.parametrize("likelihood", ["symmetric", "legacy"])
def test_bound_pruned_map_on_the_gpu_is_the_cpu_engine(likelihood):
    """exact_map(device='gpu') runs the CPU engine's own per-cluster scan: same value, same tree,
    also with the splits of a cluster shared by several threads and with an incumbent."""
    from jetastar.clustering import exact_map as em
    from jetastar.clustering.exact.exact_map import _MapSolver, root_slack

    for jet in _jets(8, count=2, seed=31):
        cpu = em(jet, likelihood, device="cpu")
        gpu = em(jet, likelihood, device="gpu")
        assert gpu.stats["device"] == "gpu" and gpu.stats["engine"] == "bound-pruned"
        assert gpu.log_likelihood == cpu.log_likelihood and gpu.tree == cpu.tree
        inc = em(jet, likelihood, device="gpu", incumbent=cpu.tree)
        assert inc.log_likelihood == cpu.log_likelihood
        c = jet.likelihood_constants(likelihood)
        for prune in (True, False):
            cpu_tab = _MapSolver(jet.leaves, c, None)
            cpu_tab.solve(prune, -math.inf, False, None, None, "jet")
            gpu_tab = _MapSolver(jet.leaves, c, None)
            finished, stats = gpu_mod.solve_map_on_gpu(
                gpu_tab.rec, gpu_tab.wq, gpu_tab.best, gpu_tab.consts, gpu_tab.scale,
                root_slack=root_slack(gpu_tab.consts), prune=prune, **SHARED)
            assert finished and stats["launches"] >= jet.n_leaves - 1
            ok = np.isfinite(cpu_tab.rec[:, 1])
            assert np.array_equal(ok, np.isfinite(gpu_tab.rec[:, 1]))
            assert np.array_equal(cpu_tab.rec[ok], gpu_tab.rec[ok])
            assert np.array_equal(cpu_tab.best[ok], gpu_tab.best[ok])
            assert np.array_equal(cpu_tab.wq, gpu_tab.wq)


def test_batch_runs_solve_a_chunk_per_gpu_launch(monkeypatch):
    """A batch chunk's exact trellises with log Z go to the GPU together (one batch call), and the
    table equals the CPU's; invalid and over-limit jets keep their per-jet rows."""
    import importlib

    from jetastar import JetCollection
    from jetastar.batch import BatchConfig, cluster_collection

    trellis = importlib.import_module("jetastar.clustering.exact.trellis")

    jets = _jets(5, count=3, seed=41) + _jets(6, count=2, seed=42) + _jets(9, count=1, seed=43)
    coll = JetCollection.from_jets(jets)
    bad = np.array(coll.leaves, copy=True)
    bad[coll.leaf_offsets[1], 0] = np.nan  # jet 1 is invalid: left to the per-jet path
    coll.leaves = bad
    calls = []
    real = trellis.exact_trellis_batch

    def spy(batch, *args, **kwargs):
        calls.append(len(batch))
        return real(batch, *args, **kwargs)

    # (the trellis' device batch, which batch runs ask for whole chunks on a GPU)
    monkeypatch.setattr(trellis, "exact_trellis_batch", spy)
    opts = {"trellis": {"log_z": True}}
    limits = {"trellis": 8}
    gpu = cluster_collection(coll, BatchConfig(["trellis"], options=opts, max_leaves=limits,
                                               device="gpu"))["trellis"]
    assert calls == [len(jets) - 3]  # the two 9-leaf jets are over the size limit
    cpu = cluster_collection(coll, BatchConfig(["trellis"], options=opts, max_leaves=limits,
                                               device="cpu"))["trellis"]
    assert calls == [len(jets) - 3]
    assert list(gpu.status) == list(cpu.status) and gpu.status[1] == "failed"
    fin = np.isfinite(cpu.log_likelihood)
    np.testing.assert_allclose(gpu.log_likelihood[fin], cpu.log_likelihood[fin], rtol=1e-12)
    np.testing.assert_allclose(gpu.log_z[fin], cpu.log_z[fin], rtol=1e-9)


def test_window_search_proves_on_the_gpu():
    """The window search's exact_map (prove, exact_first) runs where ``device`` says."""
    from jetastar.clustering import window_search

    jet = _jets(9, count=1, seed=51)[1]
    cpu = window_search(jet, exact_first=True, device="cpu")
    gpu = window_search(jet, exact_first=True, device="gpu")
    assert gpu.exact and gpu.stats["path"] == "exact_map" and gpu.options["device"] == "gpu"
    assert gpu.log_likelihood == cpu.log_likelihood and gpu.tree == cpu.tree
    proved = window_search(jet, exact_first=False, prove=True, device="gpu")
    assert proved.exact and proved.log_likelihood == pytest.approx(cpu.log_likelihood, rel=1e-12)
    assert cluster(jet, "window-search", exact_first=True, device="gpu").exact


def test_an_import_failure_is_not_answered_with_pip_install():
    """With warnings as errors, numba-cuda's own DeprecationWarning stopped its import and the
    message told the user to install what they had."""
    from jetastar._cuda import INSTALL_HINT, _import_failure

    warned = _import_failure(DeprecationWarning("The 'generic' unit for NumPy timedelta is deprecated"))
    assert "turned into an error" in warned and INSTALL_HINT not in warned
    missing = _import_failure(ModuleNotFoundError("No module named 'numba.cuda'"))
    assert INSTALL_HINT in missing
