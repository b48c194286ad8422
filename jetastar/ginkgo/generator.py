"""The Ginkgo toy parton shower generator (float64, numba).

The process follows the reference generator (``ginkgo`` HEAD, ``invMass_ginkgo``) step by step:

1. a node with 4-vector ``P`` and nominal squared mass ``t_P`` is a leaf if ``t_P <= t_cut``;
2. otherwise draw a direction ``r̂`` uniformly on the sphere and two truncated-exponential draws
   ``r1, r2`` on ``[0, 0.999)`` with rate ``λ_R`` at the root and ``λ`` elsewhere;
3. ``t1 = t_P r1`` and ``t2 = (√t_P − √t1)² r2``;
4. two-body decay in the parent rest frame (masses ``√t1``, ``√t2``, parent mass ``√t_P``), child 1
   along ``+r̂``, child 2 along ``−r̂``, boosted along ``P``;
5. a fair coin decides whether child 1 is the left or the right child; recurse left, then right.

Nodes are numbered in pre-order; leaves are numbered in node order. Differences from the reference,
all deliberate: everything is float64 (the reference draws in float32), so momentum is conserved to
rounding and no leaf mass comes out negative; the truncated exponential is drawn by inverting its CDF
(same distribution as the reference's redraw-until-below-0.999 loop); the direction is drawn as
``(cos θ, φ)`` uniform (same distribution as a normalised Gaussian vector). Individual jets therefore
differ from the reference's torch stream; the distributions are the same (tested with KS tests).

Reproducibility: jet ``i`` of ``generate(..., seed=s)`` is drawn from a random stream that depends
only on ``(s, i, attempt)`` (a SplitMix64 counter-based generator), so it is the same whatever the
batch size, ``first_index`` split or number of workers. With a leaf-count filter, jet ``i`` is the
first attempt ``0, 1, 2, …`` whose leaf count passes (both bounds inclusive).

Example:
    >>> from jetastar.ginkgo import ShowerParams, generate
    >>> jets = generate(100, ShowerParams.qcd(), seed=1)
    >>> jets[5].n_leaves == generate(1, ShowerParams.qcd(), seed=1, first_index=5)[0].n_leaves
    True
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numba as nb
import numpy as np

from .._jit import kernel_helper
from .._text import text_column
from ..errors import JetastarError
from ..jet import JetCollection
from .params import ShowerParams

__all__ = ["SEED_LIMIT", "generate"]

#: seeds are integers in ``[0, SEED_LIMIT)``
SEED_LIMIT = 2**63

_A = 0.999
_MAX_NODES_PER_JET = 1 << 22  # ~4 million nodes: far beyond any sane t_cut

# error codes of the kernel
_OK, _ERR_FILTER, _ERR_TOO_BIG = 0, 1, 2


@kernel_helper
def _splitmix(state: np.uint64) -> tuple[np.uint64, np.uint64]:
    """One SplitMix64 step: (new state, 64 random bits)."""
    state = state + np.uint64(0x9E3779B97F4A7C15)
    z = state
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return state, z ^ (z >> np.uint64(31))


@kernel_helper
def _uniform(state: np.uint64) -> tuple[np.uint64, float]:
    """Uniform double in [0, 1) with 53 random bits."""
    state, bits = _splitmix(state)
    return state, float(bits >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@kernel_helper
def _stream_state(seed: np.uint64, index: np.int64, attempt: np.int64) -> np.uint64:
    """Initial RNG state for (seed, jet index, attempt): hashed so nearby inputs are independent."""
    _, a = _splitmix(seed)
    _, b = _splitmix(a ^ np.uint64(index) * np.uint64(0xD1B54A32D192ED03))
    _, c = _splitmix(b ^ np.uint64(attempt) * np.uint64(0x8CB92BA72F3D8DD7))
    return c


@kernel_helper
def _truncated_exponential(state: np.uint64, rate: float) -> tuple[np.uint64, float]:
    """Draw r on [0, 0.999) with density ∝ exp(−rate·r), by inverting the CDF."""
    state, u = _uniform(state)
    r = -math.log1p(u * math.expm1(-_A * rate)) / rate
    if r >= _A:  # only reachable through rounding of u → 1
        r = math.nextafter(_A, 0.0)
    return state, r


@kernel_helper
def _shower_one(
    state, root_p, t_root, t_cut, lam, lam_root, content, children, node_t, draws, stack_p,
    stack_info,
):  # pragma: no cover - numba
    """Generate one jet into the scratch arrays; returns (n_nodes, state) or (-1, state) if too big."""
    cap = content.shape[0]
    n_nodes = 0
    # stack entries: 4-vector in stack_p, (nominal t, draw, parent, side, is_root) in stack_info
    top = 0
    for d in range(4):
        stack_p[0, d] = root_p[d]
    stack_info[0, 0] = t_root
    stack_info[0, 1] = np.nan
    stack_info[0, 2] = -1.0
    stack_info[0, 3] = 0.0
    top = 1
    while top > 0:
        top -= 1
        p0 = stack_p[top, 0]
        p1 = stack_p[top, 1]
        p2 = stack_p[top, 2]
        p3 = stack_p[top, 3]
        t_p = stack_info[top, 0]
        draw = stack_info[top, 1]
        parent = int(stack_info[top, 2])
        side = int(stack_info[top, 3])
        if n_nodes >= cap:
            return -1, state
        node = n_nodes
        n_nodes += 1
        content[node, 0] = p0
        content[node, 1] = p1
        content[node, 2] = p2
        content[node, 3] = p3
        node_t[node] = t_p
        draws[node] = draw
        children[node, 0] = -1
        children[node, 1] = -1
        if parent >= 0:
            children[parent, side] = node
        if t_p <= t_cut:
            # leaf: guarantee a non-negative mass after rounding (raise E by ulps if needed)
            p2sum = p1 * p1 + p2 * p2 + p3 * p3
            e = content[node, 0]
            while e * e - p2sum < 0.0:
                e = math.nextafter(max(e, math.sqrt(p2sum)), math.inf)
            content[node, 0] = e
            node_t[node] = 0.0
            continue
        rate = lam_root if node == 0 else lam
        # direction uniform on the sphere
        state, u1 = _uniform(state)
        state, u2 = _uniform(state)
        cos_t = 2.0 * u1 - 1.0
        sin_t = math.sqrt(max(0.0, 1.0 - cos_t * cos_t))
        phi = 2.0 * math.pi * u2
        rx = sin_t * math.cos(phi)
        ry = sin_t * math.sin(phi)
        rz = cos_t
        state, r1 = _truncated_exponential(state, rate)
        state, r2 = _truncated_exponential(state, rate)
        sqrt_tp = math.sqrt(t_p)
        t1 = t_p * r1
        d = sqrt_tp - math.sqrt(t1)
        t2 = d * d * r2
        # two-body decay in the rest frame (nominal parent mass)
        e1 = 0.5 * sqrt_tp * (1.0 + (t1 - t2) / t_p)
        e2 = 0.5 * sqrt_tp * (1.0 + (t2 - t1) / t_p)
        kallen = (t_p - t1 - t2) * (t_p - t1 - t2) - 4.0 * t1 * t2
        pstar = 0.5 * math.sqrt(max(kallen, 0.0)) / sqrt_tp
        # boost along the parent direction
        pabs = math.sqrt(p1 * p1 + p2 * p2 + p3 * p3)
        gamma = p0 / sqrt_tp
        betagamma = pabs / sqrt_tp
        if pabs > 0.0:
            nx, ny, nz = p1 / pabs, p2 / pabs, p3 / pabs
        else:
            nx, ny, nz = 0.0, 0.0, 1.0
        state, u3 = _uniform(state)
        flip = u3 < 0.5
        # child 1 (+r̂) and child 2 (−r̂); boosted independently so each keeps its mass
        for k in range(2):
            sign = 1.0 if k == 0 else -1.0
            estar = e1 if k == 0 else e2
            qx, qy, qz = sign * pstar * rx, sign * pstar * ry, sign * pstar * rz
            qn = qx * nx + qy * ny + qz * nz
            coef = (gamma - 1.0) * qn + betagamma * estar
            # left child must be popped first: store right at `top`, left at `top + 1`
            slot = top + 1 - (1 - k if flip else k)
            stack_p[slot, 0] = gamma * estar + betagamma * qn
            stack_p[slot, 1] = qx + coef * nx
            stack_p[slot, 2] = qy + coef * ny
            stack_p[slot, 3] = qz + coef * nz
            stack_info[slot, 0] = t1 if k == 0 else t2
            stack_info[slot, 1] = r1 if k == 0 else r2
            stack_info[slot, 2] = node
            stack_info[slot, 3] = 0.0 if (k == 0) != flip else 1.0
        top += 2
    return n_nodes, state


@nb.njit(cache=True)
def _generate_kernel(
    seed, first_index, n_jets, root_p, t_root, t_cut, lam, lam_root, min_leaves, max_leaves,
    max_tries, max_nodes,
):  # pragma: no cover - numba
    """Generate ``n_jets`` accepted jets; returns flat node arrays, per-jet node counts and status."""
    cap = 1024
    content = np.empty((cap, 4), dtype=np.float64)
    children = np.empty((cap, 2), dtype=np.int64)
    node_t = np.empty(cap, dtype=np.float64)
    draws = np.empty(cap, dtype=np.float64)
    stack_p = np.empty((cap + 2, 4), dtype=np.float64)
    stack_info = np.empty((cap + 2, 4), dtype=np.float64)
    out_cap = max(16, n_jets * 16)
    out_content = np.empty((out_cap, 4), dtype=np.float64)
    out_children = np.empty((out_cap, 2), dtype=np.int64)
    out_t = np.empty(out_cap, dtype=np.float64)
    out_draws = np.empty(out_cap, dtype=np.float64)
    counts = np.zeros(n_jets, dtype=np.int64)
    attempts = np.zeros(n_jets, dtype=np.int64)
    total = 0
    for j in range(n_jets):
        index = first_index + j
        accepted = False
        for attempt in range(max_tries):
            state = _stream_state(seed, index, attempt)
            while True:
                n, _ = _shower_one(
                    state, root_p, t_root, t_cut, lam, lam_root, content, children, node_t,
                    draws, stack_p, stack_info,
                )
                if n >= 0:
                    break
                if cap >= max_nodes:
                    return out_content, out_children, out_t, out_draws, counts, attempts, \
                        _ERR_TOO_BIG, j
                cap *= 2
                content = np.empty((cap, 4), dtype=np.float64)
                children = np.empty((cap, 2), dtype=np.int64)
                node_t = np.empty(cap, dtype=np.float64)
                draws = np.empty(cap, dtype=np.float64)
                stack_p = np.empty((cap + 2, 4), dtype=np.float64)
                stack_info = np.empty((cap + 2, 4), dtype=np.float64)
            n_leaves = (n + 1) // 2
            attempts[j] = attempt + 1
            if n_leaves < min_leaves or n_leaves > max_leaves:
                continue
            accepted = True
            if total + n > out_cap:
                new_cap = max(2 * out_cap, total + n)
                tmp4 = np.empty((new_cap, 4), dtype=np.float64)
                tmp2 = np.empty((new_cap, 2), dtype=np.int64)
                tmp_t = np.empty(new_cap, dtype=np.float64)
                tmp_d = np.empty(new_cap, dtype=np.float64)
                for i in range(total):  # loops, not slice assignments: much less to compile
                    for k in range(4):
                        tmp4[i, k] = out_content[i, k]
                    tmp2[i, 0] = out_children[i, 0]
                    tmp2[i, 1] = out_children[i, 1]
                    tmp_t[i] = out_t[i]
                    tmp_d[i] = out_draws[i]
                out_content = tmp4
                out_children = tmp2
                out_t = tmp_t
                out_draws = tmp_d
                out_cap = new_cap
            for i in range(n):
                for k in range(4):
                    out_content[total + i, k] = content[i, k]
                out_children[total + i, 0] = children[i, 0]
                out_children[total + i, 1] = children[i, 1]
                out_t[total + i] = node_t[i]
                out_draws[total + i] = draws[i]
            counts[j] = n
            total += n
            break
        if not accepted:
            return out_content, out_children, out_t, out_draws, counts, attempts, _ERR_FILTER, j
    return (
        out_content[:total], out_children[:total], out_t[:total], out_draws[:total], counts,
        attempts, _OK, n_jets,
    )


#: unfiltered jets per t_cut tried by :func:`_t_cut_hint`
_HINT_JETS = 300


def _t_cut_hint(params: ShowerParams, lo: int, hi: int, seed: int) -> str:
    """``"t_cut 0.025 (93 % of its jets have 40..100 leaves; ...)"``: the t_cut, among smaller and larger
    multiples of ``params.t_cut``, whose unfiltered jets fall in the range most often (empty when
    none does in a few hundred jets)."""
    best: tuple[float, float] | None = None
    for factor in (0.5, 0.25, 0.1, 0.05, 0.025, 0.01, 2.0, 4.0, 10.0):
        t_cut = params.t_cut * factor
        if not t_cut < params.t_root:  # type: ignore[operator]
            continue
        trial = dataclasses.replace(params, t_cut=t_cut)
        try:
            jets = generate(_HINT_JETS, trial, seed=seed + 1, max_tries=1)
        except JetastarError:  # far too small a t_cut: jets too large to generate
            continue
        n = jets.n_leaves
        share = float(np.mean((n >= lo) & (n <= hi)))
        if best is None or share > best[1]:
            best = (t_cut, share)
    if best is None or best[1] == 0.0:
        return ""
    shown = "inf" if hi == np.iinfo(np.int64).max else hi
    size = "larger" if best[0] < params.t_cut else "smaller"
    return (f"t_cut {best[0]:.3g} ({100 * best[1]:.0f} % of its jets have {lo}..{shown} leaves; "
            f"a {'smaller' if size == 'larger' else 'larger'} t_cut gives {size} jets)")


def generate(
    n_jets: int,
    params: ShowerParams | None = None,
    seed: int = 0,
    min_leaves: int | None = None,
    max_leaves: int | None = None,
    *,
    first_index: int = 0,
    max_tries: int = 10_000,
    return_details: bool = False,
) -> Any:
    """Generate Ginkgo jets with their truth trees.

    Args:
        n_jets: number of jets to return.
        params: shower parameters (default :meth:`ShowerParams.qcd`).
        seed: master seed; jet ``i`` depends only on ``(seed, i)``.
        min_leaves, max_leaves: optional leaf-count filter, both bounds inclusive.
        first_index: index of the first jet (jets ``first_index … first_index + n_jets − 1``), so a
            large sample can be produced in independent pieces.
        max_tries: attempts per jet before giving up on the filter.
        return_details: also return a dict with the per-node nominal ``t`` (``node_t``, 0 for
            leaves), the accepted draws (``draws``, NaN at the root) and ``attempts`` per jet.

    Returns:
        A :class:`~jetastar.JetCollection` whose jets carry the truth tree and the per-node
        4-vectors (``node_momenta``); jet ids are the indices, ``seed`` is the master seed.
        With ``return_details=True``: ``(collection, details)``.

    Raises:
        JetastarError: if the filter cannot be met within ``max_tries`` attempts for some jet, or a
            jet would exceed ~4 million nodes (t_cut far too small).

    Example:
        >>> from jetastar.ginkgo import ShowerParams, generate
        >>> jets = generate(10, ShowerParams.w(), seed=3, min_leaves=10, max_leaves=12)
        >>> all(10 <= j.n_leaves <= 12 for j in jets)
        True
    """
    if params is None:
        params = ShowerParams.qcd()
    if not isinstance(params, ShowerParams):
        raise TypeError(f"params must be a ShowerParams, got {type(params).__name__}")
    n_jets = int(n_jets)
    if n_jets < 0:
        raise ValueError(f"n_jets must be >= 0, got {n_jets}")
    if int(max_tries) < 1:
        raise ValueError(f"max_tries must be >= 1, got {max_tries}")
    if not 0 <= int(seed) < SEED_LIMIT:
        raise ValueError(f"seed must be an integer in [0, 2**63), got {seed}")
    if int(first_index) < 0:
        raise ValueError(f"first_index must be >= 0, got {first_index}")
    lo = 1 if min_leaves is None else int(min_leaves)
    hi = np.iinfo(np.int64).max if max_leaves is None else int(max_leaves)
    if lo < 1 or hi < lo:
        raise ValueError(
            f"need 1 <= min_leaves <= max_leaves, got min_leaves={min_leaves}, "
            f"max_leaves={max_leaves}"
        )
    content, children, node_t, draws, counts, attempts, status, where = _generate_kernel(
        np.uint64(int(seed)),
        np.int64(first_index),
        np.int64(n_jets),
        np.asarray(params.root_momentum, dtype=np.float64),
        float(params.t_root),  # type: ignore[arg-type]
        float(params.t_cut),
        float(params.lam),
        float(params.lam_root),
        np.int64(lo),
        np.int64(hi),
        np.int64(max_tries),
        np.int64(_MAX_NODES_PER_JET),
    )
    if status == _ERR_FILTER:
        shown = max_leaves if max_leaves is not None else "inf"
        tried = int(attempts[:where].sum()) + int(max_tries)
        share = 100.0 * where / tried
        raise JetastarError(
            f"jet {first_index + where}: no jet with {lo} <= n_leaves <= {shown} in {max_tries} "
            f"tries (seed={seed}, t_cut={params.t_cut}). Such jets are rare at this t_cut: "
            f"{where} of the {tried} jets generated had {lo}..{shown} leaves "
            f"({'< ' if where == 0 else ''}{max(share, 100.0 / tried):.2g} %). Try "
            f"{_t_cut_hint(params, lo, hi, seed) or 'another t_cut'}, a wider leaf range, or more "
            "tries (max_tries; command line: --max-tries)"
        )
    if status == _ERR_TOO_BIG:
        raise JetastarError(
            f"jet {first_index + where}: more than {_MAX_NODES_PER_JET} nodes; t_cut = "
            f"{params.t_cut} GeV² is far too small"
        )
    node_offsets = np.concatenate([[0], np.cumsum(counts)])
    is_leaf = children[:, 0] < 0
    n_leaves = (counts + 1) // 2
    leaf_offsets = np.concatenate([[0], np.cumsum(n_leaves)])
    # leaf numbering in node order, restarting in every jet
    leaf_rank = np.cumsum(is_leaf) - 1
    jet_of_node = np.repeat(np.arange(n_jets), counts)
    leaf_of_node = np.where(is_leaf, leaf_rank - leaf_offsets[jet_of_node], -1)
    # children indices are global in the kernel output only within a jet: they are local already
    leaves = content[is_leaf]
    ones = np.ones(n_jets)
    collection = JetCollection(
        leaves=leaves,
        leaf_offsets=leaf_offsets,
        children=children,
        leaf_of_node=leaf_of_node,
        node_offsets=node_offsets,
        node_momenta=content,
        jet_id=np.arange(first_index, first_index + n_jets, dtype=np.int64),
        seed=np.full(n_jets, int(seed), dtype=np.int64),
        jet_type=text_column(n_jets, params.jet_type),
        params={
            "m_hard": params.m_hard * ones,
            "lam": params.lam * ones,
            "lam_root": params.lam_root * ones,
            "t_cut": params.t_cut * ones,
            "t_root": params.t_root * ones,  # type: ignore[operator]
            "root_momentum": np.tile(np.asarray(params.root_momentum), (n_jets, 1)),
        },
    )
    if return_details:
        return collection, {"node_t": node_t, "draws": draws, "attempts": attempts}
    return collection
