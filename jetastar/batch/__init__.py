"""Cluster many jet files with many algorithms, in parallel, resumably.

:func:`run_batch` processes each input file in chunks of jets. A chunk is clustered by every
requested algorithm in a worker (a process pool, or any :class:`concurrent.futures.Executor` such as
``dask.distributed.Client(...).get_executor()``), and its results are written *atomically* to a part
file ``<output>.parts/part-<start>-<stop>.h5``. When every chunk of a file is done the parts are
merged (checking that every jet appears exactly once) into the output file — the input jets plus one
results table per algorithm — written atomically, and the part folder is removed.

Killed at any moment and restarted with the same arguments, a run skips finished files and finished
chunks and ends with every jet processed exactly once: a part is either complete or absent, the
output file is either complete or absent, and the merge refuses gaps and duplicates. A part file
that cannot be read is computed again; temporary files of killed runs are removed by the next run.

Never stale, never silently wrong: an output records the identity of its input (path, size, time and
a SHA-256 of its jets, see :mod:`jetastar.batch.resume`) and is reused only when all of it matches.
Every option is converted to its declared type and checked before any work starts (text booleans
such as ``"false"`` are booleans). Any error of one input file — unreadable, inconsistent columns,
out of memory, a bug — ends that file with a one-line ``error`` (printed as ``FAILED <file>:
<line>``) and the other files go on. One run at a time writes a given output (a lock file
``.<output>.lock``; a second run on the same output stops at once).

Per jet and algorithm the status is recorded, never raised:

* ``"skipped"`` — an exact method on a jet above its size limit (the registry's ``max_leaves`` or a
  ``max_leaves`` override), or a method that raised :class:`~jetastar.TooLargeError`;
* ``"failed"`` — an invalid jet (NaN, negative energy, ...; the message names the file, the entry,
  the jet and the field) or an algorithm error (the message has the exception);
* ``"budget"`` — returned by algorithms that stop at their own time/size budget.

Time limit: with ``time_limit`` set, every algorithm that has a ``max_time`` (or ``time_limit``)
option gets it unless set explicitly, so it stops itself and reports ``"budget"``. Algorithms without
such an option run to completion (Python cannot interrupt a compiled kernel safely); when one takes
longer than the limit its result is kept and its message says so. A jet on which even a lower
estimate of such an algorithm's time (:mod:`jetastar.clustering.estimates`) is over the limit is
not started and recorded as ``"skipped"`` with the estimate. Exact methods on large jets are kept in
check by the size limits instead.

Threads and workers: algorithms with a ``threads`` option (the exact engines) get
``BatchConfig.threads`` when set, else ``threads=1`` when more than one worker runs (the workers
already use the cores); ``progress`` options are switched off. Small jets run on one thread anyway
(see :mod:`jetastar.clustering.threads`).

Interrupts: Ctrl-C (and SIGTERM, which the command line turns into the same) stops a run within a
second or so: the master writes the parts of chunks that had finished, kills the workers of its own
process pool (they ignore Ctrl-C and only compute) and raises :class:`BatchInterrupted`, which says
how many jets are kept. Rerunning resumes. The progress bar moves per jet (workers of the local pool
report each finished jet; other executors per chunk).

Scale-out: pass ``scheduler="tcp://host:8786"`` (needs ``pip install dask distributed``) or any
executor. On HTCondor/SLURM, start a cluster with dask-jobqueue (``SLURMCluster(...).scale(n)``), then
``Client(cluster).get_executor()``. Only the master reads and writes files: workers receive the jets
and return results, so they need no shared file system.

Modules: :mod:`~jetastar.batch.config` (:class:`BatchConfig`, option strings, checks),
:mod:`~jetastar.batch.executors` (process pools, dask, warm-up), :mod:`~jetastar.batch.work` (one
chunk: every algorithm on every jet), :mod:`~jetastar.batch.sources` (the :class:`JetSource` inputs),
:mod:`~jetastar.batch.resume` (part files, input identity and when a run resumes: the protocol),
:mod:`~jetastar.batch.merge` (parts -> output) and :mod:`~jetastar.batch.runner` (:func:`run_batch`).

Example:
    >>> from jetastar.batch import BatchConfig, run_batch
    >>> run_batch(["jets.h5"], BatchConfig(["greedy"]), workers=2)  # doctest: +SKIP
"""

from __future__ import annotations

from ..errors import BatchError, BatchInterrupted
from .config import (
    BatchConfig,
    check_config,
    import_plugins,
    load_registry,
    parse_limits,
    parse_option_value,
    parse_options,
)
from .executors import make_executor, shutdown_executor, warm_up_workers
from .preview import RunPreview, preview_inputs, preview_jets
from .runner import FileSummary, output_path_for, run_batch
from .sources import JetSource
from .work import cluster_collection

__all__ = [
    "BatchConfig",
    "BatchError",
    "BatchInterrupted",
    "FileSummary",
    "JetSource",
    "RunPreview",
    "check_config",
    "cluster_collection",
    "import_plugins",
    "load_registry",
    "make_executor",
    "output_path_for",
    "parse_limits",
    "parse_option_value",
    "parse_options",
    "preview_inputs",
    "preview_jets",
    "run_batch",
    "shutdown_executor",
    "warm_up_workers",
]


def __dir__() -> list[str]:
    return list(__all__)
