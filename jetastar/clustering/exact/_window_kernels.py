"""Numba kernels of the window search (:mod:`jetastar.clustering.window_search`).

The tree being improved is held in flat arrays indexed by node (``2n − 1`` nodes; leaf ``i`` is node
``i``): ``left``, ``right`` (``-1`` for leaves), ``parent`` (``-1`` at the root), ``size`` (number of
leaves), ``p`` (summed 4-momentum), ``t`` (the likelihood's ``t``: legacy form 0 for a single leaf),
``psi`` (the split log-likelihood of an internal node, 0 for a leaf) and ``hsh`` (the XOR of random
64-bit codes of the node's leaves: the identity of a cluster, whatever node holds it).

A *window* is a node ``top`` and a frontier of ``k`` disjoint nodes below it that cover it (its
*parts*); its *interior* is ``top`` and the ``k − 2`` nodes between ``top`` and the parts. Replacing
the interior by the best hierarchy over the parts changes the splits of the interior nodes only, so
the tree's log-likelihood changes by the difference of the interior's ψ sums.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from ...ginkgo.likelihood import split_llh, t_of
from .._merges import leaf_ts, pair_llh

_NEG_INF = -np.inf

#: frontier policies of :func:`grow_frontier`
LARGEST, HEAVIEST, RANDOM = 0, 1, 2


_GOLD = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_INV_2_53 = 1.0 / 9007199254740992.0


@nb.njit(cache=True)
def _next_uniform(state):  # pragma: no cover - numba
    """splitmix64: ``(next state, uniform number in [0, 1))``."""
    state = state + _GOLD
    z = state
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    z = z ^ (z >> np.uint64(31))
    return state, float(z >> np.uint64(11)) * _INV_2_53


@nb.njit(cache=True)
def grow_frontier(top, k_max, policy, rseed, left, right, size, t, hsh, parts):  # pragma: no cover
    """Grow the frontier of ``top`` from its two children to at most ``k_max`` parts.

    Each step replaces one composite part by its two children: the one with the most leaves
    (``LARGEST``, ties by the larger ``t``), the one with the largest ``t`` (``HEAVIEST``) or a
    uniformly random one (``RANDOM``, random numbers from the uint64 seed ``rseed``). Children enter
    the list in the order of their codes ``hsh``, so the frontier depends only on the sub-tree's
    clusters (not on how its nodes are numbered) and on ``rseed``. A sub-tree of at most ``k_max``
    leaves ends with all its leaves as parts, whatever the policy.

    Returns:
        the number of parts ``k`` written to ``parts[:k]``.
    """
    a = left[top]
    b = right[top]
    if hsh[a] > hsh[b]:
        a, b = b, a
    parts[0] = a
    parts[1] = b
    k = 2
    state = rseed
    while k < k_max:
        pick = -1
        if policy == RANDOM:
            n_internal = 0
            for j in range(k):
                if left[parts[j]] >= 0:
                    n_internal += 1
            if n_internal > 0:
                state, u = _next_uniform(state)
                target = min(int(u * n_internal), n_internal - 1)
                for j in range(k):
                    if left[parts[j]] >= 0:
                        if target == 0:
                            pick = j
                            break
                        target -= 1
        else:
            for j in range(k):
                q = parts[j]
                if left[q] < 0:
                    continue
                if pick < 0:
                    pick = j
                    continue
                r = parts[pick]
                if policy == LARGEST:
                    better = size[q] > size[r] or (size[q] == size[r] and t[q] > t[r])
                else:
                    better = t[q] > t[r]
                if better:
                    pick = j
        if pick < 0:
            break
        q = parts[pick]
        a = left[q]
        b = right[q]
        if hsh[a] > hsh[b]:
            a, b = b, a
        parts[pick] = a
        parts[k] = b
        k += 1
    return k


@nb.njit(cache=True)
def common_frontier(top, common, k_max, left, right, parts):  # pragma: no cover - numba
    """The frontier of ``top`` made of the largest nodes below it with ``common[node] != 0``.

    Leaves count as common. Used to recombine two trees: with ``common`` marking the clusters the
    other tree has too, the window over these parts can build either tree's hierarchy between
    ``top`` and them (and any other).

    Returns:
        the number of parts, or ``-1`` if there would be more than ``k_max``.
    """
    k = 0
    stack = np.empty(k_max + 2, dtype=np.int64)
    stack[0] = left[top]
    stack[1] = right[top]
    depth = 2
    while depth > 0:
        depth -= 1
        q = stack[depth]
        if left[q] < 0 or common[q] != 0:
            parts[k] = q
            k += 1
        else:
            # every node still on the stack becomes at least one part
            if k + depth + 2 > k_max:
                return -1
            stack[depth] = right[q]
            stack[depth + 1] = left[q]
            depth += 2
    return k


@nb.njit(cache=True)
def window_interior(top, parts, k, mark, left, right, psi, interior):  # pragma: no cover - numba
    """The interior of a window (``top`` first) and the sum of its ψ.

    Args:
        mark: int64 scratch over the nodes, all 0 (left so on return).

    Returns:
        ``(number of interior nodes, sum of the finite ψ, number of ψ = −inf)``.
    """
    for j in range(k):
        mark[parts[j]] = 1
    n_int = 0
    total = 0.0
    n_inf = 0
    stack = np.empty(k, dtype=np.int64)
    stack[0] = top
    depth = 1
    while depth > 0:
        depth -= 1
        q = stack[depth]
        interior[n_int] = q
        n_int += 1
        if psi[q] == _NEG_INF:
            n_inf += 1
        else:
            total += psi[q]
        for child in (left[q], right[q]):
            if mark[child] == 0:
                stack[depth] = child
                depth += 1
    for j in range(k):
        mark[parts[j]] = 0
    return n_int, total, n_inf


@nb.njit(cache=True)
def window_parts(parts, k, p, t, part_p, part_t):  # pragma: no cover - numba
    """The 4-momenta and ``t`` of the parts, into ``part_p[:k]`` and ``part_t[:k]``."""
    for j in range(k):
        q = parts[j]
        for c in range(4):
            part_p[j, c] = p[q, c]
        part_t[j] = t[q]


@nb.njit(cache=True)
def substitute(
    best, k, parts, interior, left, right, parent, size, p, t, psi, hsh, consts, is_root
):  # pragma: no cover - numba
    """Replace a window's interior by the hierarchy over its parts that ``best`` describes.

    ``best[mask]`` is the arg-max part (holding the lowest part) of every cluster of parts (as left
    by :func:`jetastar.clustering.exact._map_kernels.solve_parts`). The interior's node ids are reused,
    ``interior[0]`` (the window's top) for the whole window, so nothing outside the window changes.
    The new nodes' momenta, ``t`` and ψ are recomputed from their children, as
    :func:`jetastar.ginkgo.log_likelihood` computes them (``consts`` row 1 at the jet's root).

    Returns:
        ``(sum of the finite ψ of the new interior, number of ψ = −inf)``.
    """
    full = (np.int64(1) << k) - 1
    n_new = k - 1
    masks = np.empty(n_new, dtype=np.int64)
    nodes = np.empty(n_new, dtype=np.int64)
    masks[0] = full
    nodes[0] = interior[0]
    used = 1
    head = 0
    # breadth-first: every internal cluster of parts gets the next free interior id
    while head < used:
        s = masks[head]
        q = nodes[head]
        head += 1
        a = np.int64(best[s])
        b = s ^ a
        for side in range(2):
            x = a if side == 0 else b
            if x & (x - 1) == 0:
                i = 0
                while (np.int64(1) << i) != x:
                    i += 1
                child = parts[i]
            else:
                child = interior[used]
                masks[used] = x
                nodes[used] = child
                used += 1
            if side == 0:
                left[q] = child
            else:
                right[q] = child
            parent[child] = q
    # bottom-up (reverse breadth-first order): momenta, t, ψ
    post = np.empty(n_new, dtype=np.int64)
    for j in range(n_new):
        post[j] = nodes[n_new - 1 - j]
    return score_tree(post, interior[0] if is_root else -1, left, right, size, p, t, psi, hsh,
                      consts)


@nb.njit(cache=True)
def _rescore(q, at_root, left, right, size, p, t, psi, hsh, consts):  # pragma: no cover - numba
    """Momentum, size, code, ``t`` and ψ of internal node ``q`` from its children; returns ψ."""
    a = left[q]
    b = right[q]
    for c in range(4):
        p[q, c] = p[a, c] + p[b, c]
    size[q] = size[a] + size[b]
    hsh[q] = hsh[a] ^ hsh[b]
    tq = p[q, 0] * p[q, 0] - (p[q, 1] * p[q, 1] + p[q, 2] * p[q, 2] + p[q, 3] * p[q, 3])
    t[q] = tq
    value = split_llh(t[a], t[b], tq, consts[1 if at_root else 0])
    psi[q] = value
    return value


@nb.njit(cache=True)
def score_tree(post, root, left, right, size, p, t, psi, hsh, consts):  # pragma: no cover - numba
    """Fill every internal node's row from its children (``post``: internal nodes, children first).

    Returns:
        ``(sum of the finite ψ, number of ψ = −inf)`` over the tree.
    """
    total = 0.0
    n_inf = 0
    for j in range(post.shape[0]):
        q = post[j]
        value = _rescore(q, q == root, left, right, size, p, t, psi, hsh, consts)
        if value == _NEG_INF:
            n_inf += 1
        else:
            total += value
    return total, n_inf


@nb.njit(cache=True)
def preorder(root, left, right, out):  # pragma: no cover - numba
    """The internal nodes below ``root`` in pre-order (``root`` first); returns their number."""
    n_out = 0
    stack = np.empty(2 * out.shape[0] + 3, dtype=np.int64)
    stack[0] = root
    depth = 1
    while depth > 0:
        depth -= 1
        q = stack[depth]
        if left[q] < 0:
            continue
        out[n_out] = q
        n_out += 1
        stack[depth] = right[q]
        stack[depth + 1] = left[q]
        depth += 2
    return n_out



@nb.njit(cache=True)
def sampled_histories(leaves, consts, count, temperature, rseed):  # pragma: no cover - numba
    """``count`` merge histories drawn at random, each merge with probability ∝ ``exp(ψ / T)``.

    Greedy merges the most likely pair; here every step draws one pair of the current clusters
    with weight ``exp((ψ − ψ_max) / temperature)`` (pairs with ``ψ = −inf`` never, unless every
    pair has it: then uniformly). The draws are start trees of :func:`window_search` from basins
    that greedy, beam search and the kt family do not reach. The leaves' pair values are computed
    once for all draws; each draw then scores only the pairs of the cluster it made (O(n²) split
    evaluations and O(n³) weights per draw). Random numbers: splitmix64 from the uint64 ``rseed``.

    Args:
        leaves: ``(n, 4)`` float64 leaves; consts: ``(2, 5)`` constants (root row last).
        count: number of histories; temperature: ``T > 0``.

    Returns:
        ``(histories (count, n − 1, 2), steps (count, n − 1))``: the merged node ids of each step
        (leaves ``0 .. n−1``, step ``k`` makes node ``n + k``) and each merge's ψ (root row at the
        last step), as :func:`jetastar.clustering._merges.canonical_results` takes them.
    """
    n = leaves.shape[0]
    m = max(2 * n - 1, 1)
    hist = np.zeros((count, max(n - 1, 0), 2), dtype=np.int64)
    steps = np.zeros((count, max(n - 1, 0)), dtype=np.float64)
    if n < 2:
        return hist, steps
    c = consts[0]
    lt = leaf_ts(leaves, c)
    base = np.full((n, n), _NEG_INF)
    for i in range(n):
        for j in range(i + 1, n):
            base[i, j] = pair_llh(leaves, lt, i, j, c)
    p = np.empty((m, 4), dtype=np.float64)
    t = np.empty(m, dtype=np.float64)
    tab = np.empty((n, n), dtype=np.float64)  # by slot: tab[low slot, high slot]
    node_of = np.empty(n, dtype=np.int64)
    live = np.empty(n, dtype=np.int64)
    weight = np.empty(n * (n - 1) // 2, dtype=np.float64)
    state = rseed
    inv_t = 1.0 / temperature
    for d in range(count):
        for i in range(n):
            for x in range(4):
                p[i, x] = leaves[i, x]
            t[i] = lt[i]
            node_of[i] = i
            live[i] = i
            for j in range(n):
                tab[i, j] = base[i, j]
        k = n
        for step in range(n - 1):
            # draw a pair (x < y: positions in ``live``)
            pick_x = 0
            pick_y = 1
            if k > 2:
                # the pairs' ψ in drawing order, then their weights relative to the largest
                top = _NEG_INF
                q = 0
                for x in range(k):
                    for y in range(x + 1, k):
                        sx = live[x]
                        sy = live[y]
                        v = tab[sx, sy] if sx < sy else tab[sy, sx]
                        weight[q] = v
                        top = max(top, v)
                        q += 1
                total = 0.0
                for r in range(q):
                    w = 1.0 if top == _NEG_INF else math.exp((weight[r] - top) * inv_t)
                    weight[r] = w
                    total += w
                state, u = _next_uniform(state)
                target = u * total
                acc = 0.0
                q = 0
                done = False
                for x in range(k):
                    for y in range(x + 1, k):
                        acc += weight[q]
                        q += 1
                        if weight[q - 1] > 0.0:
                            pick_x = x
                            pick_y = y
                            if target < acc:
                                done = True
                                break
                    if done:
                        break
            sa = live[pick_x]
            sb = live[pick_y]
            a = node_of[sa]
            b = node_of[sb]
            node = n + step
            if step == n - 2:
                value = pair_llh(p, t, a, b, consts[1])
            else:
                value = tab[sa, sb] if sa < sb else tab[sb, sa]
            hist[d, step, 0] = a
            hist[d, step, 1] = b
            steps[d, step] = value
            for x in range(4):
                p[node, x] = p[a, x] + p[b, x]
            t[node] = t_of(p[node, 0], p[node, 1], p[node, 2], p[node, 3])
            # the new cluster takes slot sa; slot sb leaves
            node_of[sa] = node
            live[pick_y] = live[k - 1]
            k -= 1
            if step < n - 2:
                for x in range(k):
                    so = live[x]
                    if so == sa:
                        continue
                    v = pair_llh(p, t, node, node_of[so], c)
                    if sa < so:
                        tab[sa, so] = v
                    else:
                        tab[so, sa] = v
    return hist, steps
