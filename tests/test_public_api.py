"""The public API, pinned: what ``dir()`` shows on each public face of the package.

A name added to or removed from a face changes this list on purpose (and the README / docs with it);
anything else a module holds is an implementation detail.
"""

from __future__ import annotations

import importlib

import pytest

PUBLIC = {
    "jetastar": [
        "InvalidJetError", "InvalidTreeError", "Jet", "JetCollection", "JetastarError",
        "TooLargeError", "Tree", "__version__", "cluster", "cluster_jets", "ginkgo",
    ],
    "jetastar.ginkgo": [
        "BOUNDED_LIKELIHOODS", "LIKELIHOODS", "ShowerParams", "check_likelihood",
        "default_root_momentum", "generate", "heuristic", "likelihood_constants", "log_likelihood",
        "node_log_likelihoods",
        "split_log_likelihood", "split_log_likelihood_t", "truth_log_likelihoods",
    ],
    "jetastar.clustering": [
        "AlgorithmInfo", "ClusteringResult", "STATUSES", "Trellis", "algorithm_info", "algorithms",
        "astar", "astar_approx", "average_linkage", "beam_search", "canonical_name", "cluster",
        "cost_greedy", "exact_map", "exact_trellis", "exact_trellis_batch", "gpu_status", "greedy",
        "kt", "map_over_parts", "mcts", "register", "window_search",
    ],
    "jetastar.io": [
        "AlgorithmResults", "FORMATS", "FileFormatError", "Format", "InvalidJetInFileError",
        "ParticleSource", "SCHEMA_VERSION", "UnsafePickleError",
        "column_prefix", "file_format", "file_info", "get_extras", "import_legacy_pickle",
        "iterate", "iterate_particles", "jet_slice", "n_jets", "particle_entries", "provenance",
        "read", "read_particles", "read_results", "register_format", "results_table", "set_extras",
        "truth_log_likelihoods", "write",
    ],
    "jetastar.inference": [
        "ESTIMATORS", "Evidence", "FitResult", "PARAMETERS", "Scan", "fit", "log_evidence", "scan",
        "selection_log_probability",
    ],
    "jetastar.batch": [
        "BatchConfig", "BatchError", "BatchInterrupted", "FileSummary", "JetSource",
        "RunPreview", "check_config", "cluster_collection", "import_plugins", "load_registry",
        "make_executor", "output_path_for", "parse_limits", "parse_option_value", "parse_options",
        "preview_inputs", "preview_jets", "run_batch", "shutdown_executor", "warm_up_workers",
    ],
}


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_public_names(name):
    module = importlib.import_module(name)
    assert dir(module) == PUBLIC[name]
    assert sorted(module.__all__) == PUBLIC[name]
    for attr in PUBLIC[name]:
        assert getattr(module, attr) is not None, attr


def test_numba_primitives_live_in_the_kernels_module():
    import jetastar.ginkgo as ginkgo
    from jetastar.ginkgo import kernels

    for name in ("cluster_t", "split_llh", "t_of"):
        assert name in kernels.__all__
        with pytest.warns(DeprecationWarning, match=f"moved to jetastar.ginkgo.kernels.{name}"):
            assert getattr(ginkgo, name) is getattr(kernels, name)
    with pytest.raises(AttributeError, match="no attribute 'nonexistent'"):
        ginkgo.nonexistent  # noqa: B018


def test_old_module_paths_still_import():
    import jetastar.io.particles as old_readers
    import jetastar.io.results as old_results

    import jetastar.particles as old_momenta
    from jetastar import momenta, result_tables
    from jetastar.io import particle_files

    assert old_readers is particle_files and old_results is result_tables
    assert old_momenta.collection_from_flat is momenta.collection_from_flat
    from jetastar import cluster, cluster_jets
    from jetastar.inmemory import cluster as inmemory_cluster
    from jetastar.inmemory import cluster_jets as inmemory_cluster_jets

    assert cluster is inmemory_cluster and cluster_jets is inmemory_cluster_jets


def test_a_missing_dependency_is_named_at_import():
    """After `pip install --no-deps`, `import jetastar` (and so `jetastar --help`) ended in numba's
    bare ModuleNotFoundError deep in a traceback; the last line now names it and the fix."""
    import subprocess
    import sys

    code = "import sys; sys.modules['numba'] = None; import jetastar"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("ModuleNotFoundError: jetastar needs 'numba', which is not installed")


def test_documented_modules_are_attributes_of_the_package():
    """The README's `jetastar.io.read(path)` after a plain `import jetastar` raised AttributeError."""
    import subprocess
    import sys

    code = ("import jetastar; print(jetastar.io.read.__module__, "
            "jetastar.observables.root_split.__module__, jetastar.diagnostics.__name__)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.stdout.split() == ["jetastar.io.dispatch", "jetastar.observables",
                                   "jetastar.diagnostics"], proc.stderr


def test_clustering_modules_of_the_flat_layout_still_import():
    """The algorithms moved into families (``jetastar.clustering.exact``, ``.search``,
    ``.agglomerative``); the module paths users may have imported keep working, as aliases of the
    new modules (not second files)."""
    from jetastar.clustering.beam import beam_search
    from jetastar.clustering.columnar import cluster_columns
    from jetastar.clustering.exact_map import exact_map
    from jetastar.clustering.greedy import greedy_status

    from jetastar.clustering import chunks
    from jetastar.clustering.search.beam import beam_search as new_beam_search

    assert beam_search is new_beam_search and cluster_columns is chunks.cluster_columns
    assert exact_map.__module__ == "jetastar.clustering.exact.exact_map"
    assert greedy_status.__module__ == "jetastar.clustering.agglomerative.greedy"
    for old, new in [("beam", "search.beam"), ("mcts", "search.mcts"), ("kt", "agglomerative.kt"),
                     ("greedy", "agglomerative.greedy"), ("exact_map", "exact.exact_map"),
                     ("trellis", "exact.trellis"), ("window_search", "exact.window_search"),
                     ("gpu", "exact.gpu"), ("astar", "exact.astar"),
                     ("cost_baselines", "agglomerative.cost_baselines"), ("columnar", "chunks")]:
        module = importlib.import_module(f"jetastar.clustering.{old}")
        assert module is importlib.import_module(f"jetastar.clustering.{new}"), old
        assert module.__name__ == f"jetastar.clustering.{new}"
