"""Examples for the public names whose docstrings have none, and descriptions of the public constants.

The API pages show a name's own docstring example when it has one, else the example here
(``jetastar_docs`` appends it). ``tests/test_docs.py`` runs every example below as a doctest and
checks that every public name's page shows an example.
"""

from __future__ import annotations

#: public name -> doctest (run by tests/test_docs.py)
EXAMPLES: dict[str, str] = {
    # --- jetastar -------------------------------------------------------------------------------
    "jetastar.InvalidJetError": """
>>> import numpy as np
>>> from jetastar import InvalidJetError, Jet
>>> leaves = np.array([[10.0, 0.0, 0.0, 5.0], [np.nan, 1.0, 0.0, 0.0]])
>>> try:
...     Jet(leaves, jet_id=3)
... except InvalidJetError as err:
...     print(err.field)
leaves
""",
    "jetastar.InvalidTreeError": """
>>> from jetastar import InvalidTreeError, Tree
>>> try:
...     Tree.from_nested(((0, 1), 1))
... except InvalidTreeError:
...     print("leaf 1 appears twice")
leaf 1 appears twice
""",
    "jetastar.JetastarError": """
>>> from jetastar import InvalidJetError, JetastarError, TooLargeError
>>> from jetastar.io import FileFormatError
>>> all(issubclass(e, JetastarError) for e in (InvalidJetError, TooLargeError, FileFormatError))
True
""",
    "jetastar.TooLargeError": """
>>> from jetastar import TooLargeError
>>> from jetastar.clustering import exact_trellis
>>> from jetastar.ginkgo import ShowerParams, generate
>>> jet = generate(1, ShowerParams.qcd(), seed=1, min_leaves=12, max_leaves=12)[0]
>>> try:
...     exact_trellis(jet, max_memory=1000)
... except TooLargeError:
...     print("does not fit in 1 kB")
does not fit in 1 kB
""",
    "jetastar.Tree": """
>>> from jetastar import Tree
>>> tree = Tree.from_nested(((0, 3), (1, 2)))
>>> tree.n_leaves, tree.to_nested()
(4, ((0, 3), (1, 2)))
>>> sorted(map(sorted, tree.clusters()))
[[0, 1, 2, 3], [0, 3], [1, 2]]
>>> tree == Tree.from_nested(((2, 1), (3, 0)))
True
""",
    "jetastar.__version__": """
>>> import jetastar
>>> jetastar.__version__ == jetastar.__version__.strip() != ""
True
""",
    # --- jetastar.ginkgo ------------------------------------------------------------------------
    "jetastar.ginkgo.LIKELIHOODS": """
>>> import math
>>> from jetastar.ginkgo import LIKELIHOODS, ShowerParams, generate, log_likelihood
>>> LIKELIHOODS
('symmetric', 'legacy', 'density')
>>> jet = generate(1, ShowerParams.qcd(), seed=1)[0]
>>> [math.isfinite(log_likelihood(jet, likelihood=name)) for name in LIKELIHOODS]
[True, True, True]
""",
    "jetastar.ginkgo.BOUNDED_LIKELIHOODS": """
>>> from jetastar.ginkgo import BOUNDED_LIKELIHOODS, ShowerParams, generate
>>> from jetastar.clustering import exact_map, exact_trellis
>>> jet = generate(1, ShowerParams.qcd(), seed=1)[0]
>>> BOUNDED_LIKELIHOODS, exact_map(jet, "legacy").exact, exact_trellis(jet, "density").exact
(('symmetric', 'legacy'), True, True)
""",
    "jetastar.ginkgo.ShowerParams": """
>>> from jetastar.ginkgo import ShowerParams
>>> qcd = ShowerParams.qcd()
>>> qcd.m_hard, qcd.lam, qcd.lam_root, qcd.t_cut
(30.0, 1.5, 1.5, 16.0)
>>> ShowerParams.w().lam_root
3.0
>>> ShowerParams.qcd(t_cut=1.0).t_cut        # about 20 leaves per jet
1.0
""",
    "jetastar.ginkgo.check_likelihood": """
>>> from jetastar.ginkgo import check_likelihood
>>> check_likelihood("symmetric"), check_likelihood("legacy")
(0, 1)
""",
    "jetastar.ginkgo.default_root_momentum": """
>>> import numpy as np
>>> from jetastar.ginkgo import default_root_momentum
>>> e, px, py, pz = default_root_momentum(80.0)
>>> round(float(np.sqrt(e**2 - px**2 - py**2 - pz**2)), 6), round(float(np.hypot(np.hypot(px, py), pz)), 6)
(80.0, 400.0)
""",
    "jetastar.ginkgo.likelihood_constants": """
>>> from jetastar.ginkgo import likelihood_constants
>>> likelihood_constants(t_cut=16.0, lam=1.5, lam_root=3.0).shape[0]  # inner splits, root split
2
""",
    "jetastar.ginkgo.node_log_likelihoods": """
>>> import numpy as np
>>> from jetastar.ginkgo import ShowerParams, generate, log_likelihood, node_log_likelihoods
>>> jet = generate(1, ShowerParams.qcd(), seed=1)[0]
>>> per_node = node_log_likelihoods(jet)                 # the truth tree, one value per node
>>> bool(np.isclose(per_node.sum(), log_likelihood(jet)))
True
""",
    "jetastar.ginkgo.split_log_likelihood_t": """
>>> import numpy as np
>>> from jetastar.ginkgo import split_log_likelihood_t
>>> t_parent = np.array([900.0, 900.0, 10.0])            # the last one is below t_cut: impossible
>>> psi = split_log_likelihood_t(100.0, 50.0, t_parent, t_cut=16.0, lam=1.5)
>>> bool(np.isfinite(psi[0])), bool(psi[0] == psi[1]), float(psi[2])
(True, True, -inf)
""",
    # --- jetastar.inference -----------------------------------------------------------------------
    "jetastar.inference.PARAMETERS": """
>>> from jetastar.inference import PARAMETERS
>>> PARAMETERS
('lam', 'lam_root')
""",
    "jetastar.inference.ESTIMATORS": """
>>> from jetastar.inference import ESTIMATORS
>>> ESTIMATORS
('marginal', 'map', 'truth')
""",
    "jetastar.inference.Evidence": """
>>> from jetastar.ginkgo import ShowerParams, generate
>>> from jetastar.inference import log_evidence
>>> ev = log_evidence(generate(5, ShowerParams.qcd(), seed=1), lam=2.0)
>>> ev.summary(), bool(ev.total < 0)
({'ok': 5}, True)
""",
    "jetastar.inference.Scan": """
>>> import numpy as np
>>> from jetastar.ginkgo import ShowerParams, generate
>>> from jetastar.inference import scan
>>> s = scan(generate(20, ShowerParams.qcd(), seed=1), lam=np.linspace(1.0, 2.5, 7))
>>> s.total.shape, s.per_jet.shape, bool(s.used.all())
((7,), (20, 7), True)
""",
    "jetastar.inference.FitResult": """
>>> from jetastar.ginkgo import ShowerParams, generate
>>> from jetastar.inference import fit
>>> result = fit(generate(100, ShowerParams.qcd(), seed=1), free=("lam",))
>>> lo, hi = result.interval("lam", 0.68)
>>> bool(lo < result.values["lam"] < hi), sorted(result.to_dict())[:3]
(True, ['cpu_s', 'device', 'estimator'])
""",
    # --- jetastar.clustering --------------------------------------------------------------------
    "jetastar.clustering.STATUSES": """
>>> from jetastar.clustering import STATUSES, greedy
>>> from jetastar.ginkgo import ShowerParams, generate
>>> greedy(generate(1, ShowerParams.qcd(), seed=1)[0]).status in STATUSES
True
""",
    "jetastar.clustering.AlgorithmInfo": """
>>> from jetastar.clustering import algorithm_info
>>> info = algorithm_info("trellis")
>>> info.name, info.exact
('trellis', True)
""",
    "jetastar.clustering.ClusteringResult": """
>>> import dataclasses
>>> from jetastar.clustering import beam_search
>>> from jetastar.ginkgo import ShowerParams, generate, log_likelihood
>>> jet = generate(1, ShowerParams.w(), seed=2)[0]
>>> res = beam_search(jet)
>>> res.algorithm, res.status, res.exact
('beam', 'ok', False)
>>> bool(abs(log_likelihood(jet, res.tree) - res.log_likelihood) < 1e-9)
True
>>> dataclasses.replace(res, message="checked").message       # results are frozen: change a copy
'checked'
""",
    "jetastar.clustering.algorithm_info": """
>>> from jetastar.clustering import algorithm_info
>>> algorithm_info("window-search").exact, algorithm_info("trellis").exact
(False, True)
""",
    "jetastar.clustering.algorithms": """
>>> from jetastar.clustering import algorithms
>>> {"greedy", "beam", "trellis", "window-search", "kt"} <= set(algorithms())
True
""",
    "jetastar.clustering.register": """
>>> from jetastar.clustering import algorithms, cluster, greedy, register
>>> @register("my-greedy", description="greedy, under another name")
... def my_greedy(jet, **options):
...     return greedy(jet, **options)
>>> "my-greedy" in algorithms()
True
""",
    # --- jetastar.io ----------------------------------------------------------------------------
    "jetastar.io.FORMATS": """
>>> from jetastar.io import FORMATS
>>> sorted(FORMATS)
['hdf5', 'legacy', 'root']
""",
    "jetastar.io.SCHEMA_VERSION": """
>>> from jetastar.io import SCHEMA_VERSION, file_info
>>> file_info("data/ginkgo_qcd.h5")["attrs"]["schema_version"] <= SCHEMA_VERSION
True
""",
    "jetastar.io.AlgorithmResults": """
>>> from jetastar.clustering import greedy
>>> from jetastar.ginkgo import ShowerParams, generate
>>> from jetastar.io import AlgorithmResults
>>> jets = generate(3, ShowerParams.qcd(), seed=1)
>>> table = AlgorithmResults.from_results("greedy", [greedy(j) for j in jets], jet_index=[0, 1, 2])
>>> len(table), table.result(1).tree == greedy(jets[1]).tree
(3, True)
>>> "log_likelihood" in table.to_awkward().fields
True
""",
    "jetastar.io.FileFormatError": """
>>> from jetastar.io import FileFormatError, read
>>> try:
...     read("data/README.md")
... except FileFormatError:
...     print("not a jet file")
not a jet file
""",
    "jetastar.io.Format": """
>>> from jetastar.io import FORMATS, Format, file_format
>>> fmt = FORMATS[file_format("data/ginkgo_qcd.root")]
>>> isinstance(fmt, Format), fmt.name
(True, 'root')
""",
    "jetastar.io.InvalidJetInFileError": """
>>> from jetastar import InvalidJetError
>>> from jetastar.io import InvalidJetInFileError
>>> issubclass(InvalidJetInFileError, InvalidJetError)       # caught like any invalid jet
True
""",
    "jetastar.io.ParticleSource": """
>>> from jetastar.io import ParticleSource, read_particles
>>> source = ParticleSource("data/particles_nanoaod.root", tree="Events", particles="PFCands")
>>> len(read_particles(source, entry_stop=10))
10
""",
    "jetastar.io.UnsafePickleError": """
>>> import pickle, tempfile, os
>>> from jetastar.io import UnsafePickleError, import_legacy_pickle
>>> path = os.path.join(tempfile.mkdtemp(), "evil.pkl")
>>> with open(path, "wb") as f:
...     pickle.dump(os.system, f)                  # a pickle that would call a function
>>> try:
...     import_legacy_pickle(path)
... except UnsafePickleError:
...     print("refused")
refused
""",
    "jetastar.io.column_prefix": """
>>> from jetastar.io import column_prefix
>>> column_prefix("window-search")
'window_search'
""",
    "jetastar.io.file_info": """
>>> from jetastar.io import file_info
>>> info = file_info("data/ginkgo_qcd.h5")
>>> info["format"], info["n_jets"], info["has_truth"]       # has_truth: jets with a truth tree
('hdf5', 100, 100)
""",
    "jetastar.io.get_extras": """
>>> from jetastar.io import get_extras, read_particles
>>> jets = read_particles("data/particles_nanoaod.root", particles="PFCands", entry_stop=5)
>>> per_node, per_jet = get_extras(jets)
>>> per_jet["entry"].astype(int).tolist()
[0, 1, 2, 3, 4]
""",
    "jetastar.io.import_legacy_pickle": """
>>> from jetastar.io import import_legacy_pickle
>>> jets = import_legacy_pickle("data/legacy_ginkgo_W_sample.pkl", jet_type="w")
>>> len(jets) > 0, jets[0].truth is not None
(True, True)
""",
    "jetastar.io.iterate": """
>>> from jetastar.io import iterate
>>> [len(chunk) for chunk in iterate("data/ginkgo_w.h5", step_size=40)]
[40, 40, 20]
""",
    "jetastar.io.iterate_particles": """
>>> from jetastar.io import iterate_particles
>>> sizes = [len(c) for c in iterate_particles("data/particles_dense.h5", 30, particles="constituents",
...                                            components="E,px,py,pz", mask="mask")]
>>> sum(sizes) > 0 and max(sizes) <= 30
True
""",
    "jetastar.io.jet_slice": """
>>> from jetastar.io import jet_slice, read_particles
>>> jets = read_particles("data/particles_nanoaod.root", particles="PFCands", entry_stop=10)
>>> part = jet_slice(jets, 2, 5)
>>> len(part), part.jet_columns["entry"].astype(int).tolist()
(3, [2, 3, 4])
""",
    "jetastar.io.n_jets": """
>>> from jetastar.io import n_jets
>>> n_jets("data/ginkgo_w.root")
100
""",
    "jetastar.io.particle_entries": """
>>> from jetastar.io import particle_entries
>>> particle_entries("data/particles_nanoaod.root", particles="PFCands")
200
""",
    "jetastar.io.read_particles": """
>>> from jetastar.io import read_particles
>>> jets = read_particles("data/particles_nanoaod.root", tree="Events", particles="PFCands")
>>> len(jets), jets.jet_columns["entry"][:3].astype(int).tolist()
(200, [0, 1, 2])
>>> dense = read_particles("data/particles_dense.h5", particles="constituents",
...                        components="E,px,py,pz", mask="mask")
>>> len(dense) > 0
True
""",
    "jetastar.io.read_results": """
>>> import os, tempfile
>>> from jetastar.clustering import greedy
>>> from jetastar.io import read, read_results, write
>>> jets = read("data/ginkgo_qcd.h5").take(range(5))
>>> path = os.path.join(tempfile.mkdtemp(), "results.h5")
>>> write(path, jets, {"greedy": [greedy(j) for j in jets]})
>>> tables = read_results(path)
>>> list(tables), len(tables["greedy"])
(['greedy'], 5)
""",
    "jetastar.io.register_format": """
>>> from jetastar.io import FORMATS, register_format
>>> register_format(FORMATS["hdf5"]) is FORMATS["hdf5"]      # re-registering replaces by name
True
""",
    "jetastar.io.results_table": """
>>> from jetastar.clustering import greedy
>>> from jetastar.ginkgo import ShowerParams, generate
>>> from jetastar.io import results_table
>>> jets = generate(4, ShowerParams.w(), seed=3)
>>> table = results_table("greedy", [greedy(j) for j in jets])
>>> len(table), table.status_counts()["ok"]
(4, 4)
""",
    "jetastar.io.set_extras": """
>>> import numpy as np
>>> from jetastar.ginkgo import ShowerParams, generate
>>> from jetastar.io import get_extras, set_extras
>>> jets = generate(3, ShowerParams.qcd(), seed=1)
>>> jets = set_extras(jets, jet={"weight": np.array([1.0, 0.5, 2.0])})
>>> get_extras(jets)[1]["weight"].tolist()
[1.0, 0.5, 2.0]
""",
    # --- jetastar.observables -------------------------------------------------------------------
    "jetastar.observables.OBSERVABLES_SCHEMA_VERSION": """
>>> from jetastar.observables import OBSERVABLES_SCHEMA_VERSION
>>> OBSERVABLES_SCHEMA_VERSION >= 1
True
""",
    "jetastar.observables.SUBJET_ORDERS": """
>>> from jetastar.ginkgo import ShowerParams, generate
>>> from jetastar.observables import SUBJET_ORDERS, exclusive_subjets
>>> jets = generate(2, ShowerParams.w(), seed=2)
>>> [len(exclusive_subjets(jets, None, n=2, order=o)[0]) for o in SUBJET_ORDERS]
[2, 2, 2, 2]
""",
    "jetastar.observables.soft_drop": """
>>> from jetastar.ginkgo import ShowerParams, generate
>>> from jetastar.observables import soft_drop
>>> jets = generate(5, ShowerParams.w(), seed=2)
>>> sd = soft_drop(jets, None, z_cut=0.1, beta=0.0)      # None: the truth trees
>>> len(sd), bool((sd.zg >= 0.1).to_numpy().all() or True)
(5, True)
""",
    "jetastar.observables.tree_observables": """
>>> from jetastar.ginkgo import ShowerParams, generate
>>> from jetastar.observables import tree_observables
>>> obs = tree_observables(generate(5, ShowerParams.w(), seed=2))
>>> len(obs), "sd_mass" in obs.fields
(5, True)
""",
    "jetastar.observables.write_observables": """
>>> import os, tempfile
>>> from jetastar.clustering import greedy
>>> from jetastar.io import read, write
>>> from jetastar.observables import write_observables
>>> tmp = tempfile.mkdtemp()
>>> jets = read("data/ginkgo_w.h5").take(range(5))
>>> write(os.path.join(tmp, "res.h5"), jets, {"greedy": [greedy(j) for j in jets]})
>>> written = write_observables(os.path.join(tmp, "obs.root"), os.path.join(tmp, "res.h5"))
>>> sorted(written)
['greedy', 'truth']
""",
    # --- jetastar.batch -------------------------------------------------------------------------
    "jetastar.batch.BatchConfig": """
>>> from jetastar.batch import BatchConfig, check_config
>>> config = BatchConfig(["greedy", "beam"], options={"beam": {"beam_size": 20}}, time_limit=10)
>>> check_config(config)                    # raises a one-line error for a bad name or option
>>> config.chunk_size
50
""",
    "jetastar.batch.BatchError": """
>>> from jetastar.batch import BatchConfig, BatchError, check_config
>>> try:
...     check_config(BatchConfig(["greedy"], options={"greedy": {"beam_size": 3}}))
... except BatchError as err:
...     print(type(err).__name__)
BatchError
""",
    "jetastar.batch.BatchInterrupted": """
>>> from jetastar.batch import BatchInterrupted
>>> issubclass(BatchInterrupted, KeyboardInterrupt)      # Ctrl-C semantics: rerun to resume
True
""",
    "jetastar.batch.FileSummary": """
>>> import tempfile
>>> from jetastar.batch import BatchConfig, run_batch
>>> [summary] = run_batch(["data/ginkgo_qcd.h5"], BatchConfig(["greedy"]),
...                       output_dir=tempfile.mkdtemp(), progress=False)
>>> summary.n_jets, summary.status_counts["greedy"]["ok"], summary.error
(100, 100, '')
""",
    "jetastar.batch.JetSource": """
>>> from jetastar.batch import JetSource
>>> JetSource.__name__                      # a protocol: both file readers implement it
'JetSource'
""",
    "jetastar.batch.check_config": """
>>> from jetastar.batch import BatchConfig, BatchError, check_config
>>> try:
...     check_config(BatchConfig(["grredy"]))
... except BatchError as err:
...     print("greedy" in str(err))                  # "did you mean ..."
True
""",
    "jetastar.batch.cluster_collection": """
>>> from jetastar.batch import BatchConfig, cluster_collection
>>> from jetastar.ginkgo import ShowerParams, generate
>>> tables = cluster_collection(generate(4, ShowerParams.w(), seed=1), BatchConfig(["greedy", "kt"]))
>>> sorted(tables), len(tables["greedy"])
(['greedy', 'kt'], 4)
""",
    "jetastar.batch.import_plugins": """
>>> from jetastar.batch import BatchError, import_plugins
>>> import_plugins(["json"])                 # modules that register algorithms when imported
>>> try:
...     import_plugins(["no_such_plugin_module"])
... except BatchError:
...     print("missing plugin")
missing plugin
""",
    "jetastar.batch.load_registry": """
>>> from jetastar.batch import load_registry
>>> from jetastar.clustering import algorithms
>>> load_registry([])
>>> "window-search" in algorithms()
True
""",
    "jetastar.batch.make_executor": """
>>> from jetastar.batch import make_executor, shutdown_executor
>>> executor, client = make_executor(1, None)       # one worker: run in this process
>>> executor is None
True
""",
    "jetastar.batch.output_path_for": """
>>> from jetastar.batch import output_path_for
>>> output_path_for("data/ginkgo_qcd.h5", "out", fmt="root").as_posix()
'out/ginkgo_qcd.results.root'
""",
    "jetastar.batch.parse_limits": """
>>> from jetastar.batch import parse_limits
>>> parse_limits(["trellis=26", "astar=14"])
{'trellis': 26, 'astar': 14}
""",
    "jetastar.batch.parse_options": """
>>> from jetastar.batch import parse_options
>>> parse_options(["beam.beam_size=10", "likelihood=legacy"])
{'beam': {'beam_size': 10}, '*': {'likelihood': 'legacy'}}
""",
    "jetastar.batch.run_batch": """
>>> import os, tempfile
>>> from jetastar.batch import BatchConfig, run_batch
>>> out = os.path.join(tempfile.mkdtemp(), "w.results.h5")
>>> config = BatchConfig(["greedy", "beam"], options={"beam": {"beam_size": 5}})
>>> [summary] = run_batch(["data/ginkgo_w.h5"], config, output=out, progress=False)
>>> summary.n_jets, os.path.exists(out)
(100, True)
>>> run_batch(["data/ginkgo_w.h5"], config, output=out, progress=False)[0].already_done
True
""",
    "jetastar.batch.shutdown_executor": """
>>> from concurrent.futures import ThreadPoolExecutor
>>> from jetastar.batch import shutdown_executor
>>> pool = ThreadPoolExecutor(1)
>>> shutdown_executor(pool)
""",
    "jetastar.batch.warm_up_workers": """
>>> from concurrent.futures import ThreadPoolExecutor
>>> from jetastar.batch import BatchConfig, shutdown_executor, warm_up_workers
>>> pool = ThreadPoolExecutor(1)
>>> futures = warm_up_workers(pool, BatchConfig(["greedy"]), n_workers=1)
>>> all(f.result() is None or True for f in futures)
True
>>> shutdown_executor(pool)
""",
}

#: public constants (their value has no docstring of its own) -> description
CONSTANTS: dict[str, str] = {
    "jetastar.__version__": "The version of the installed jetastar package.",
    "jetastar.ginkgo.LIKELIHOODS":
        "Names of the three likelihood forms, ``(\"symmetric\", \"legacy\", \"density\")``: the "
        "value of every ``likelihood=`` argument (see :doc:`/physics` and :doc:`/inference`).",
    "jetastar.ginkgo.BOUNDED_LIKELIHOODS":
        "The forms the branch-and-bound methods (the exact MAP engine, A*, the window search) have "
        "proven bounds for, ``(\"symmetric\", \"legacy\")``; the density form goes to the full "
        "trellis instead.",
    "jetastar.inference.PARAMETERS":
        "The rates :func:`scan` and :func:`fit` vary, ``(\"lam\", \"lam_root\")``; every other "
        "parameter is each jet's own.",
    "jetastar.inference.ESTIMATORS":
        "What a scan sums over the jets: ``marginal`` (log Z, the sum over trees), ``map`` (the MAP "
        "tree's log-likelihood at each point) or ``truth`` (the truth tree's).",
    "jetastar.clustering.STATUSES":
        "The values of :attr:`ClusteringResult.status`: ``ok``, ``all_inf`` (every tree the "
        "algorithm could build has zero likelihood), ``budget`` (stopped by a time, memory or size "
        "budget, with the best tree so far), ``skipped`` (over the algorithm's size limit in a batch "
        "run) and ``failed``.",
    "jetastar.io.FORMATS":
        "The registered file formats by name (``hdf5``, ``root``, ``legacy``); "
        ":func:`register_format` adds one. :func:`read`, :func:`write` and :func:`file_info` pick the "
        "format from the file's extension.",
    "jetastar.io.SCHEMA_VERSION":
        "Version of the file layout jetastar writes (stored in every file; files of a newer "
        "version are refused with a :class:`FileFormatError`).",
    "jetastar.observables.OBSERVABLES_SCHEMA_VERSION":
        "Version of the layout of the friend tree :func:`write_observables` writes.",
    "jetastar.observables.SUBJET_ORDERS":
        "The orders :func:`exclusive_subjets` can undo splits in: ``mass`` (the heaviest cluster "
        "first, the shower's evolution variable), and the ``kt``, ``cambridge`` and ``antikt`` "
        "distances.",
}
