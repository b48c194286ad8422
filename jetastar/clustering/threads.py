"""How many threads the exact engines use: by the size of the work, and never spinning.

The exact engines (the trellis DP and marginals, the exact MAP engine) run each size of cluster as
one numba ``prange`` loop. Two things make that slow on a shared machine, and this module holds
the policy for both:

* **Small work runs on one thread.** A parallel loop ends at a barrier where every thread must
  arrive; on a machine whose cores are busy with other processes a thread may wait a whole
  scheduler time slice (milliseconds) to get there, which for a 10-leaf jet (~30 000 splits, 0.2 ms
  of work) made the exact MAP 50–200× slower. A slice of fewer than :data:`SERIAL_BELOW` splits
  runs in the kernel's serial twin instead; no thread is woken at all for jets up to ~12 leaves.
* **Idle threads sleep.** OpenMP's worker threads spin after a loop by default (burning CPU that
  other jobs on the node want, and stealing it from the main thread). jetastar sets
  ``OMP_WAIT_POLICY=PASSIVE`` when it is imported (see :mod:`jetastar._jit`), unless the variable
  is already set.

The thread count of one call is the engine's ``threads`` option (default: numba's, i.e. all cores
or ``NUMBA_NUM_THREADS``); the command line's ``--threads`` and batch runs pass it on. Results do
not depend on the thread count or on the serial/parallel choice (each cluster is solved by the same
code, and the reductions are over integers).

Example:
    >>> from jetastar.clustering.threads import Threads, check_threads, parallel_worth_it
    >>> check_threads(1)
    1
    >>> parallel_worth_it(1_000)
    False
    >>> with Threads(1):
    ...     pass
"""

from __future__ import annotations

import numba as nb
import numpy as np

__all__ = ["SERIAL_BELOW", "Threads", "check_threads", "parallel_worth_it"]

#: slices of fewer splits than this run on one thread (measured: a parallel launch costs ~20-50 µs
#: on a quiet machine, and a barrier on a busy one up to a scheduler time slice; 100 000 splits
#: take ~1 ms on one thread)
SERIAL_BELOW = 100_000


def parallel_worth_it(n_splits: int) -> bool:
    """Whether a slice of ``n_splits`` splits is worth a parallel launch.

    Args:
        n_splits: number of splits (parent, child pairs) the slice enumerates.

    Returns:
        ``True`` when it should run on the engine's threads, ``False`` for the serial twin (also
        when only one thread is in use).
    """
    return n_splits >= SERIAL_BELOW and nb.get_num_threads() > 1


def check_threads(threads: int | None) -> int | None:
    """Validate a ``threads`` option: ``None`` (numba's default) or an integer in 1..the limit.

    Args:
        threads: the option value.

    Returns:
        The value as an ``int`` (or ``None``).

    Raises:
        ValueError: not an integer in ``1..NUMBA_NUM_THREADS``.
    """
    if threads is None:
        return None
    limit = nb.config.NUMBA_NUM_THREADS
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or not (
        1 <= threads <= limit
    ):
        raise ValueError(f"threads must be an integer in 1..{limit} (numba's thread count, "
                         f"NUMBA_NUM_THREADS), got {threads!r}")
    return int(threads)


class Threads:
    """Context manager: numba thread count for a block (restored afterwards).

    Args:
        threads: thread count, or ``None`` to leave numba's as it is.
    """

    def __init__(self, threads: int | None) -> None:
        self.threads = threads
        self.saved = 0

    def __enter__(self) -> Threads:
        if self.threads is not None:
            self.saved = nb.get_num_threads()
            nb.set_num_threads(self.threads)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.threads is not None:
            nb.set_num_threads(self.saved)
