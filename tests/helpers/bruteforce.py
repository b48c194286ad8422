"""Brute-force enumeration of every binary tree over a jet's leaves (test oracle, small n only).

Independent of the trellis and of every search: enumerates all (2n − 3)!! trees and scores each as
the sum of its split log-likelihoods (the likelihood's own split function on the clusters' summed
4-momenta, each distinct split scored once); a sample of the trees of every jet is also scored
with :func:`jetastar.ginkgo.log_likelihood` and must agree.
"""

from __future__ import annotations

import functools
import math
import random
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


def _scorer(jet: Any, likelihood: str) -> Any:
    """``score(nested)``: a tree's log-likelihood as the sum of its split log-likelihoods (λ_R at
    the root), every distinct split of the jet's clusters scored once; with the tree's clusters
    of two or more leaves (those of :meth:`jetastar.Tree.clusters`)."""
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

    def walk(nested: Any, root: bool, clusters: list[frozenset[int]]) -> tuple[frozenset[int], float]:
        if isinstance(nested, int):
            return frozenset([nested]), 0.0
        a, va = walk(nested[0], False, clusters)
        b, vb = walk(nested[1], False, clusters)
        clusters.append(a | b)
        return a | b, psi(a, b, root) + va + vb

    def score(nested: Any) -> tuple[float, list[frozenset[int]]]:
        clusters: list[frozenset[int]] = []
        return walk(nested, True, clusters)[1], clusters

    return score


def brute_force(jet: Any, likelihood: str = "symmetric", with_trees: bool = False) -> dict[str, Any]:
    """MAP, log Z, non-zero tree count and cluster marginals by enumerating all trees.

    Every tree is scored as the sum of its split log-likelihoods (each distinct split once); the
    MAP trees and ten trees drawn at random are scored again with
    :func:`jetastar.ginkgo.log_likelihood`, which must give the same values (relative 1e-12).

    Args:
        jet: the jet.
        likelihood: the form.
        with_trees: also return every tree (``trees``), as :class:`jetastar.Tree` objects.

    Returns:
        dict with ``map_ll``, ``map_trees`` (all trees within 1e-12 of the MAP), ``log_z``,
        ``n_nonzero``, ``n_trees``, ``marginals`` ({frozenset: probability}), ``lls`` (every
        tree's log-likelihood, in :func:`all_nested`'s order) and, ``with_trees``, ``trees``.
    """
    n = jet.n_leaves
    score = _scorer(jet, likelihood)
    nested_all, lls, clusters = [], [], []
    for nested in all_nested(tuple(range(n))):
        value, cl = score(nested)
        nested_all.append(nested)
        lls.append(value)
        clusters.append(cl)
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
        for cl, wi in zip(clusters, w, strict=True):
            for c in cl:
                marg[c] = marg.get(c, 0.0) + float(wi)
    at_map = [k for k, v in enumerate(lls)
              if np.isfinite(best) and abs(v - best) <= 1e-12 * max(1.0, abs(best))]
    map_trees = [Tree.from_nested(nested_all[k]) for k in at_map]
    drawn = random.Random(n * 7919 + len(lls)).sample(range(len(lls)), min(10, len(lls)))
    for k in [*at_map, *drawn]:
        direct = log_likelihood(jet, Tree.from_nested(nested_all[k]), likelihood=likelihood)
        assert direct == lls[k] or abs(direct - lls[k]) <= 1e-12 * max(1.0, abs(direct)), (
            f"tree {nested_all[k]}: log_likelihood {direct!r}, sum of splits {lls[k]!r}")
    out = {
        "map_ll": best,
        "map_trees": map_trees,
        "log_z": log_z,
        "n_nonzero": int(finite.sum()),
        "n_trees": len(lls),
        "marginals": marg,
        "lls": lls_arr,
    }
    if with_trees:
        out["trees"] = [Tree.from_nested(nested) for nested in nested_all]
    return out


def brute_force_map(jet: Any, likelihood: str = "symmetric") -> tuple[float, list[Tree]]:
    """MAP value and all MAP trees (within 1e-12) by scoring every tree, fast enough for 8 leaves.

    Every one of the (2n − 3)!! trees is built from :func:`all_nested`'s recursion and scored as
    the sum of its split log-likelihoods (:func:`jetastar.ginkgo.kernels.split_llh` on the clusters'
    summed 4-momenta, λ_R at the root), with each distinct split scored once; no maximisation
    happens below the whole jet, so it shares nothing with the trellis' dynamic programme.
    """
    score = _scorer(jet, likelihood)
    scored = [(score(nested)[0], nested) for nested in all_nested(tuple(range(jet.n_leaves)))]
    best = max(v for v, _ in scored)
    trees = [Tree.from_nested(nd) for v, nd in scored
             if math.isfinite(best) and abs(v - best) <= 1e-12 * max(1.0, abs(best))]
    return best, trees
