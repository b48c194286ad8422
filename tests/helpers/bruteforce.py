"""Brute-force enumeration of every binary tree over a jet's leaves (test oracle, small n only).

Independent of the trellis: enumerates all (2n − 3)!! trees and scores each with
:func:`jetastar.ginkgo.log_likelihood`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from jetastar import Tree
from jetastar.ginkgo import log_likelihood


def double_factorial_trees(n: int) -> int:
    """Number of rooted binary trees with n labelled leaves: (2n − 3)!!."""
    out = 1
    for k in range(3, 2 * n - 2, 2):
        out *= k
    return out


def all_nested(leaves: tuple[int, ...]) -> Iterator[Any]:
    """Every binary hierarchy over ``leaves`` as nested tuples (each exactly once)."""
    if len(leaves) == 1:
        yield leaves[0]
        return
    first, rest = leaves[0], leaves[1:]
    m = len(rest)
    # the part containing `first` takes a subset of `rest` (not all of it)
    for bits in range(1 << m):
        if bits == (1 << m) - 1:
            continue
        left = (first, *(rest[i] for i in range(m) if bits >> i & 1))
        right = tuple(rest[i] for i in range(m) if not bits >> i & 1)
        for a in all_nested(left):
            for b in all_nested(right):
                yield (a, b)


def brute_force(jet: Any, likelihood: str = "symmetric") -> dict[str, Any]:
    """MAP, log Z, non-zero tree count and cluster marginals by enumerating all trees.

    Returns:
        dict with ``map_ll``, ``map_trees`` (all trees within 1e-12 of the MAP), ``log_z``,
        ``n_nonzero``, ``n_trees``, ``marginals`` ({frozenset: probability}) and ``trees`` /
        ``lls`` (every tree and its log-likelihood).
    """
    n = jet.n_leaves
    trees, lls = [], []
    for nested in all_nested(tuple(range(n))):
        tree = Tree.from_nested(nested)
        trees.append(tree)
        lls.append(log_likelihood(jet, tree, likelihood=likelihood))
    lls_arr = np.asarray(lls)
    best = float(lls_arr.max())
    finite = np.isfinite(lls_arr)
    if best == -math.inf:
        log_z = -math.inf
        marg: dict[frozenset[int], float] = {}
    else:
        log_z = float(best + np.log(np.sum(np.exp(lls_arr[finite] - best))))
        w = np.exp(lls_arr - log_z)
        marg = {}
        for tree, wi in zip(trees, w, strict=True):
            for c in tree.clusters():
                marg[c] = marg.get(c, 0.0) + float(wi)
    map_trees = [
        t for t, v in zip(trees, lls, strict=True)
        if np.isfinite(best) and abs(v - best) <= 1e-12 * max(1.0, abs(best))
    ]
    return {
        "map_ll": best,
        "map_trees": map_trees,
        "log_z": log_z,
        "n_nonzero": int(finite.sum()),
        "n_trees": len(trees),
        "marginals": marg,
        "trees": trees,
        "lls": lls_arr,
    }


def brute_force_map(jet: Any, likelihood: str = "symmetric") -> tuple[float, list[Tree]]:
    """MAP value and all MAP trees (within 1e-12) by scoring every tree, fast enough for 8 leaves.

    Every one of the (2n − 3)!! trees is built from :func:`all_nested`'s recursion and scored as
    the sum of its split log-likelihoods (:func:`jetastar.ginkgo.kernels.split_llh` on the clusters'
    summed 4-momenta, λ_R at the root), with each distinct split scored once; no maximisation
    happens below the whole jet, so it shares nothing with the trellis' dynamic programme.
    """
    from jetastar.ginkgo.kernels import cluster_t, split_llh

    consts = jet.likelihood_constants(likelihood)
    leaves = jet.leaves

    @functools.cache
    def t_of(cluster: frozenset[int]) -> float:
        p = leaves[sorted(cluster)].sum(axis=0)
        return float(cluster_t(p[0], p[1], p[2], p[3], len(cluster), consts[0]))

    @functools.cache
    def psi(a: frozenset[int], b: frozenset[int], root: bool) -> float:
        return float(split_llh(t_of(a), t_of(b), t_of(a | b), consts[1 if root else 0]))

    def flat(nested: Any) -> frozenset[int]:
        return frozenset([nested]) if isinstance(nested, int) else flat(nested[0]) | flat(nested[1])

    def score(nested: Any, root: bool) -> float:
        if isinstance(nested, int):
            return 0.0
        a, b = flat(nested[0]), flat(nested[1])
        return psi(a, b, root) + score(nested[0], False) + score(nested[1], False)

    scored = [(score(nested, True), nested) for nested in all_nested(tuple(range(jet.n_leaves)))]
    best = max(v for v, _ in scored)
    trees = [Tree.from_nested(nd) for v, nd in scored
             if math.isfinite(best) and abs(v - best) <= 1e-12 * max(1.0, abs(best))]
    return best, trees
