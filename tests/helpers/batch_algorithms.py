"""Two small algorithms registered for the batch and command-line tests ("test-chain",
"test-exact"), so that those tests do not depend on the real algorithms; worker processes import
this module through the ``plugins`` mechanism (:data:`PLUGIN`)."""

from __future__ import annotations

import os
import time

from jetastar import Tree
from jetastar.clustering import ClusteringResult, register
from jetastar.errors import TooLargeError
from jetastar.ginkgo import log_likelihood

#: the plugin module to name in ``BatchConfig(plugins=[...])`` / ``--plugin``
PLUGIN = __name__

#: environment variable: test-chain sleeps its ``delay`` times this (default 1); a resumed run with
#: 0 has the same options (so it resumes) and finishes at once
SLEEP_SCALE = "JETASTAR_TEST_CHAIN_SLEEP"


def caterpillar(n: int) -> Tree:
    """The tree ((((0, 1), 2), 3), ...)."""
    nested: object = 0
    for k in range(1, n):
        nested = (nested, k)
    return Tree.from_nested(nested)


@register("test-chain", description="test algorithm: the caterpillar tree")
def _test_chain(jet, delay: float = 0.0, fail_id: int = -1, max_time: float | None = None,
                likelihood: str = "symmetric"):
    start = time.perf_counter()
    if delay:
        time.sleep(delay * float(os.environ.get(SLEEP_SCALE, "1")))
    if jet.jet_id == fail_id:
        raise RuntimeError(f"deliberate failure on jet {jet.jet_id}")
    tree = caterpillar(jet.n_leaves)
    status = "budget" if (max_time is not None and delay > max_time) else "ok"
    return ClusteringResult(
        tree, log_likelihood(jet, tree, likelihood), "test-chain", likelihood=likelihood,
        options={"delay": delay}, stats={"time_s": time.perf_counter() - start, "calls": 1},
        status=status, jet_id=jet.jet_id,
    )


def reversed_caterpillar(n: int) -> Tree:
    """The tree ((((n-1, n-2), n-3), ...), 0)."""
    nested: object = n - 1
    for k in range(n - 2, -1, -1):
        nested = (nested, k)
    return Tree.from_nested(nested)


@register("test-exact", exact=True, max_leaves=6,
          description="test: claims exactness, returns the reversed caterpillar")
def _test_exact(jet, delay: float = 0.0, too_large_above: int = 1000):
    if jet.n_leaves > too_large_above:
        raise TooLargeError(f"jet {jet.jet_id}: too large for test-exact")
    if delay:
        time.sleep(delay)
    assert jet.truth is None  # batch jobs hand algorithms jets without the truth tree
    tree = reversed_caterpillar(jet.n_leaves)
    return ClusteringResult(tree, log_likelihood(jet, tree), "test-exact", exact=True,
                            stats={"time_s": delay}, jet_id=jet.jet_id)
