"""Why a tree has zero likelihood, and how many jets the model can describe at all.

The Ginkgo likelihood of a tree is the product of its splits' likelihoods, and a split the shower
cannot produce has likelihood 0 (log-likelihood −∞). In the shower a parent of squared mass ``t_P``
splits only if ``t_P > t_cut``, and each child is lighter than the parent
(``t_child < 0.999 t_P``, ``√t_L + √t_R <= √t_P``). Sequential-recombination algorithms (kt,
Cambridge/Aachen, anti-kt) merge by angle and transverse momentum, not by mass: sooner or later they
merge two particles whose pair mass is below ``t_cut`` (a cluster the shower would have stopped
instead of splitting), or a soft wide-angle particle into a heavy cluster so that the heavy child
carries almost all of the parent's mass. One such merge makes the whole tree impossible under the
model — it says nothing about how *good* the rest of the tree is, only that the model could not have
produced that history. :func:`impossible_splits` names those splits.

A jet can also have no possible tree at all (its mass² is at or below ``t_cut``, or a particle has
``E² − |p|² < 0``, or no ordering of its particles fits the mass ordering). :func:`model_check`
counts, for a collection and a choice of ``t_cut`` / ``λ``, how many jets have a tree of non-zero
likelihood — the first thing to check before clustering real jets (``jetastar info FILE --check``).

Reason codes (:data:`REASONS`), in the order the likelihood tests them:

==  ========================  ========================================================
0   ``possible``              the split has non-zero likelihood
1   ``parent_not_timelike``   the parent's ``t <= 0``
2   ``spacelike_child``       a child has ``t < 0`` (a particle with ``E² < |p|²``)
3   ``parent_below_cut``      the parent's ``t <= t_cut``: the shower stops there, it never splits
4   ``child_too_heavy``       a child's ``t >= 0.999 t_parent`` (mass ordering violated)
5   ``masses_exceed``         ``√t_L + √t_R > √t_parent`` (no two-body decay has these masses)
6   ``other``                 −∞ for another (numerical) reason
==  ========================  ========================================================

Example:
    >>> from jetastar.clustering import kt
    >>> from jetastar.ginkgo import ShowerParams, generate
    >>> jet = generate(1, ShowerParams.qcd(), seed=4)[0]
    >>> report = impossible_splits(jet, kt(jet, algorithm="kt").tree)
    >>> report.finite, report.reasons[0] if report.reasons else None
    (False, 'parent_below_cut')
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from typing import Any

import numba as nb
import numpy as np

from ._progress import progress_bar
from ._text import text_column
from .clustering import beam_search, exact_map, greedy
from .clustering.chunks import cluster_columns, constant_rows
from .clustering.result import ClusteringResult
from .ginkgo.kernels import tree_node_llh
from .ginkgo.likelihood import check_likelihood, node_log_likelihoods
from .tree_arrays import FlatTrees, as_collection, flat_trees

__all__ = [
    "KT_FAMILY",
    "REASONS",
    "REASON_TEXT",
    "T_CUT_LADDER",
    "ModelCheck",
    "SplitReport",
    "impossible_splits",
    "kt_family_t_cut",
    "model_check",
    "result_reasons",
    "split_reasons",
    "tree_reasons",
]

#: reason codes of impossible splits (index = code)
REASONS = ("possible", "parent_not_timelike", "spacelike_child", "parent_below_cut",
           "child_too_heavy", "masses_exceed", "other")

#: one-line explanations of :data:`REASONS`
REASON_TEXT = {
    "possible": "the split has non-zero likelihood",
    "parent_not_timelike": "the parent's mass² is not positive",
    "spacelike_child": "a child has E² − |p|² < 0",
    "parent_below_cut": "the parent's mass² is at or below t_cut: the shower stops there instead "
                        "of splitting",
    "child_too_heavy": "a child is at least as heavy as 0.999 × the parent (mass ordering)",
    "masses_exceed": "the children's masses add up to more than the parent's",
    "other": "zero likelihood for a numerical reason",
}

_A = 0.999


def split_reasons(
    t_left: Any, t_right: Any, t_parent: Any, t_cut: Any, likelihood: str = "symmetric"
) -> np.ndarray:
    """Reason codes (:data:`REASONS`) of splits given their squared masses (vectorised).

    Args:
        t_left, t_right: the children's ``t`` (legacy form: 0 for single leaves).
        t_parent: the parent's ``t``.
        t_cut: the cut (broadcast).
        likelihood: ``"symmetric"`` or ``"legacy"``.

    Returns:
        int64 codes, 0 where the split is possible by these tests (a split with code 0 can still be
        −∞ for numerical reasons; :func:`tree_reasons` reports those as ``other``).
    """
    legacy = check_likelihood(likelihood) == 1
    tl, tr, tp, cut = np.broadcast_arrays(*(np.asarray(x, dtype=np.float64)
                                            for x in (t_left, t_right, t_parent, t_cut)))
    code = np.zeros(tl.shape, dtype=np.int64)

    def mark(cond: np.ndarray, value: int) -> None:
        code[(code == 0) & cond] = value

    with np.errstate(invalid="ignore"):
        if legacy:
            t_max = np.maximum(tl, tr)
            t_min = np.minimum(tl, tr)
            mark(~(tp >= cut), 3)
            mark(t_max < 0.0, 2)
            s2 = np.sqrt(np.clip(tp, 0, None)) - np.sqrt(np.clip(t_max, 0, None))
            s2 = s2 * s2
            mark(~(s2 > 0.0) & ((t_min > 0.0) | ~(s2 == 0.0)), 5)
            return code
        mark(~(tp > 0.0), 1)
        mark((tl < 0.0) | (tr < 0.0), 2)
        mark(tp <= cut, 3)
        mark((tl >= _A * tp) | (tr >= _A * tp), 4)
        mark(np.sqrt(np.clip(tl, 0, None)) + np.sqrt(np.clip(tr, 0, None))
             > np.sqrt(np.clip(tp, 0, None)), 5)
    return code


def tree_reasons(jets: Any, trees: Any = None, likelihood: str = "symmetric") -> Any:
    """Per jet: is its tree finite, and if not, which splits make it −∞ and why.

    Args:
        jets: jets in any form :mod:`jetastar.observables` accepts (a collection, a list, ...).
        trees: their trees (default: the truth trees); ``None`` entries for jets without one.
        likelihood: the likelihood form.

    Returns:
        An awkward array of records per jet: ``has_tree``, ``finite`` (bool), ``n_impossible``
        (splits with zero likelihood), ``first_reason`` (the code of the impossible split nearest
        the root, 0 if none), ``reason`` (its name, ``""`` when finite or without a tree), ``node``
        (that split's node, −1 if none), ``node_leaves`` and ``node_mass`` (its leaf count and mass
        in GeV) and ``counts`` (splits per reason code, ``var * int64``).
    """
    import awkward as ak

    check_likelihood(likelihood)
    b = flat_trees(jets, trees)
    rec = _reason_arrays(b, likelihood)
    reason = [REASONS[c] if c else "" for c in rec["first_reason"].tolist()]
    return b.finish(ak.zip({
        "has_tree": b.has_tree, "finite": rec["finite"], "n_impossible": rec["n_impossible"],
        "first_reason": rec["first_reason"], "reason": reason, "node": rec["node"],
        "node_leaves": rec["node_leaves"], "node_mass": rec["node_mass"],
        "counts": ak.from_regular(ak.unflatten(rec["counts"].ravel(), len(REASONS))),
    }, depth_limit=1))


def _reason_arrays(b: FlatTrees, likelihood: str) -> dict[str, np.ndarray]:
    """The columns of :func:`tree_reasons` as numpy arrays, one entry per jet of ``b``
    (``counts``: ``(J, len(REASONS))``)."""
    coll = b.collection
    legacy = likelihood == "legacy"
    n_jets = b.n_jets
    node_jet = np.repeat(np.arange(n_jets), np.diff(b.node_offsets))
    ch = b.children
    internal = np.flatnonzero(ch[:, 0] >= 0)
    base = b.node_offsets[node_jet[internal]]
    left = base + ch[internal, 0]
    right = base + ch[internal, 1]
    p = b.node_p

    def t(idx: np.ndarray) -> np.ndarray:
        q = p[idx]
        return q[:, 0] ** 2 - np.sum(q[:, 1:] ** 2, axis=1)

    tl, tr = t(left), t(right)
    if legacy:
        tl = np.where(b.size[left] == 1, 0.0, tl)
        tr = np.where(b.size[right] == 1, 0.0, tr)
    tp = t(internal)
    t_cut = coll.params["t_cut"][node_jet[internal]]
    codes = split_reasons(tl, tr, tp, t_cut, likelihood)
    # the likelihood itself decides what is −∞: splits it scores −∞ without a listed reason are
    # "other" (never expected; kept honest rather than hidden); one kernel call for all the trees
    which, consts = constant_rows(coll, b.has_tree, [likelihood])
    psi = _node_log_likelihoods(ch, p, b.node_offsets, b.root, which[0], consts)
    minus_inf = psi[internal] == -np.inf
    codes = np.where(minus_inf & (codes == 0), 6, codes)
    codes = np.where(~minus_inf, 0, codes)
    bad = codes > 0
    n_bad = np.bincount(node_jet[internal][bad], minlength=n_jets)
    # the impossible split nearest the root (smallest depth, then the heaviest)
    first_node = np.full(n_jets, -1, dtype=np.int64)
    first_code = np.zeros(n_jets, dtype=np.int64)
    if bad.any():
        cand = internal[bad]
        order = np.lexsort((-tp[bad], b.depth[cand], node_jet[cand]))
        cand_sorted = cand[order]
        jets_sorted = node_jet[cand_sorted]
        first = np.concatenate([[True], jets_sorted[1:] != jets_sorted[:-1]])
        first_node[jets_sorted[first]] = cand_sorted[first]
        first_code[jets_sorted[first]] = codes[bad][order][first]
    counts = np.zeros((n_jets, len(REASONS)), dtype=np.int64)
    np.add.at(counts, (node_jet[internal][bad], codes[bad]), 1)
    has = first_node >= 0
    node_local = np.where(has, first_node - b.node_offsets[:-1], -1)
    node_leaves = np.where(has, b.size[np.maximum(first_node, 0)] if b.size.size else 0, 0)
    node_mass = np.full(n_jets, np.nan)
    if has.any():
        node_mass[has] = np.sqrt(np.clip(t(first_node[has]), 0.0, None))
    return {
        "finite": b.has_tree & (n_bad == 0), "n_impossible": n_bad, "first_reason": first_code,
        "node": node_local, "node_leaves": node_leaves, "node_mass": node_mass, "counts": counts,
    }


@nb.njit(cache=True)
def _node_log_likelihoods(children, node_p, node_offsets, root, which, consts):  # pragma: no cover
    """Per node of every tree its split log-likelihood (0 for leaves and jets without a tree)."""
    out = np.zeros(children.shape[0], dtype=np.float64)
    for j in range(root.shape[0]):
        if root[j] < 0 or which[j] < 0:
            continue
        a, z = node_offsets[j], node_offsets[j + 1]
        out[a:z] = tree_node_llh(children[a:z], node_p[a:z], root[j], consts[which[j]])
    return out


@dataclasses.dataclass
class SplitReport:
    """Why one tree is −∞ (:func:`impossible_splits`): per impossible split, nearest the root
    first, its node, reason code (:data:`REASON_TEXT` says it in words), number of leaves and
    mass in GeV. ``len()`` counts the splits; iterating gives ``(node, reason, leaves, mass)``.
    """

    finite: bool
    nodes: list[int]
    reasons: list[str]
    leaves: list[int]
    masses: list[float]

    def __len__(self) -> int:
        return len(self.nodes)

    def __iter__(self) -> Iterator[tuple[int, str, int, float]]:
        return iter(zip(self.nodes, self.reasons, self.leaves, self.masses, strict=True))

    def __str__(self) -> str:
        if self.finite:
            return "every split of the tree is possible under the model"
        lines = [f"{len(self.nodes)} split(s) impossible under the model:"]
        for node, reason, n, m in self:
            lines.append(f"  node {node} ({n} leaves, mass {m:.4g} GeV): {REASON_TEXT[reason]}")
        return "\n".join(lines)


def impossible_splits(jet: Any, tree: Any = None, likelihood: str = "symmetric") -> SplitReport:
    """The splits that give one tree of one jet zero likelihood, nearest the root first.

    Args:
        jet: a :class:`~jetastar.Jet`.
        tree: a :class:`~jetastar.Tree` or a clustering result (default: the truth tree).
        likelihood: the likelihood form.

    Returns:
        A :class:`SplitReport` (``str()`` of it explains each split in words).
    """
    if isinstance(tree, ClusteringResult):
        tree = tree.tree
    if tree is None:
        tree = jet.truth
    psi = node_log_likelihoods(jet, tree, likelihood)
    bad = np.flatnonzero(psi == -np.inf)
    if bad.size == 0:
        return SplitReport(True, [], [], [], [])
    p = tree.node_momenta(jet.leaves)
    t = p[:, 0] ** 2 - np.sum(p[:, 1:] ** 2, axis=1)
    ch = tree.children
    sets = tree.leaf_sets()
    tl, tr = t[ch[bad, 0]], t[ch[bad, 1]]
    if likelihood == "legacy":
        tl = np.where([len(sets[c]) == 1 for c in ch[bad, 0]], 0.0, tl)
        tr = np.where([len(sets[c]) == 1 for c in ch[bad, 1]], 0.0, tr)
    codes = split_reasons(tl, tr, t[bad], jet.params.t_cut, likelihood)
    codes = np.where(codes == 0, 6, codes)
    depth = tree.depths()
    order = np.lexsort((-t[bad], depth[bad]))
    return SplitReport(
        False,
        [int(bad[k]) for k in order],
        [REASONS[int(codes[k])] for k in order],
        [len(sets[bad[k]]) for k in order],
        [float(math.sqrt(max(t[bad[k]], 0.0))) for k in order],
    )


# ---------------------------------------------------------------------- model check
@dataclasses.dataclass
class ModelCheck:
    """How many jets of a collection have a tree of non-zero likelihood (:func:`model_check`).

    Attributes:
        status: per jet ``"yes"`` (a finite tree was found), ``"no"`` (proven: no tree is finite)
            or ``"unknown"`` (none found, not proven).
        reason: per jet, how that was decided (``"greedy"``, ``"beam"``, ``"exact"``,
            ``"jet mass² <= t_cut"``, ``"particle with E² − |p|² < 0"``, ...).
        t_cut, lam, lam_root: the parameters checked (``None`` = each jet's own).
        likelihood: the likelihood form.
        baselines: per algorithm of the kt family (``kt``, ``cambridge``, ``antikt``), how many
            jets its tree is finite on at these parameters.
    """

    status: np.ndarray
    reason: np.ndarray
    t_cut: float | None
    lam: float | None
    lam_root: float | None
    likelihood: str
    baselines: dict[str, int] = dataclasses.field(default_factory=dict)

    @property
    def n_jets(self) -> int:
        """Number of jets checked."""
        return int(self.status.shape[0])

    def counts(self) -> dict[str, int]:
        """``{"yes": ..., "no": ..., "unknown": ...}``."""
        return {k: int(np.sum(self.status == k)) for k in ("yes", "no", "unknown")}

    def reasons(self, status: str = "no") -> dict[str, int]:
        """How many jets of a status were decided by each reason."""
        sel = self.reason[self.status == status]
        names, n = np.unique(sel.astype(str), return_counts=True)
        return {str(a): int(b) for a, b in zip(names, n, strict=True)}

    def __str__(self) -> str:
        c = self.counts()
        n = max(self.n_jets, 1)
        prm = ", ".join(f"{k} = {v:g}" for k, v in
                        (("t_cut", self.t_cut), ("λ", self.lam), ("λ_R", self.lam_root))
                        if v is not None) or "each jet's own parameters"
        text = (f"model check ({prm}, {self.likelihood} likelihood): {c['yes']} of "
                f"{self.n_jets} jets ({100.0 * c['yes'] / n:.1f} %) have a tree of non-zero "
                f"likelihood; {c['no']} have none")
        why = self.reasons("no")
        if why:
            text += " (" + ", ".join(f"{k}: {v}" for k, v in why.items()) + ")"
        if c["unknown"]:
            text += f"; {c['unknown']} undecided (no finite tree found, too large to prove)"
        if self.baselines:
            text += "; kt-family trees finite: " + ", ".join(
                f"{name} {k}" for name, k in self.baselines.items())
        return text


def _with_params(coll: Any, **values: float | None) -> Any:
    """The collection with the given parameters (those not ``None``) set on every jet."""
    for key, value in values.items():
        if value is not None and not (isinstance(value, (int, float)) and math.isfinite(value)
                                      and value > 0):
            raise ValueError(f"{key} must be a finite number > 0, got {value!r}")
    return coll.with_params(**{k: v for k, v in values.items() if v is not None})


#: the t_cut values (GeV²) :func:`kt_family_t_cut` tries, largest first
T_CUT_LADDER = (16.0, 4.0, 1.0, 0.1, 0.01, 1e-3, 1e-4, 1e-5, 1e-6)


def kt_family_t_cut(jets: Any, *, fraction: float = 0.5,
                    likelihood: str = "symmetric") -> dict[str, float | None]:
    """The largest ``t_cut`` of :data:`T_CUT_LADDER` at which each kt-family algorithm's tree is
    finite on at least ``fraction`` of the jets (``None``: at none of them).

    On real jets the kt, Cambridge/Aachen and anti-kt trees are −∞ on nearly every jet at the
    default ``t_cut`` (a merged pair lighter than ``t_cut`` is an impossible inner node); a far
    smaller ``t_cut``, where the model treats almost every pair as a splitting, makes them finite.
    One columnar kernel call per algorithm and value: milliseconds for hundreds of jets.

    Example:
        >>> from jetastar.ginkgo import ShowerParams, generate
        >>> kt_family_t_cut(generate(20, ShowerParams.qcd(), seed=1), fraction=0.0)
        {'kt': 16.0, 'cambridge': 16.0, 'antikt': 16.0}
    """
    check_likelihood(likelihood)
    coll = as_collection(jets)[0]
    out: dict[str, float | None] = dict.fromkeys(KT_FAMILY)
    if len(coll) == 0:
        return out
    for t_cut in T_CUT_LADDER:
        flat = cluster_columns(_with_params(coll, t_cut=t_cut),
                               {name: {"likelihood": likelihood} for name in KT_FAMILY
                                if out[name] is None})
        for name, res in flat.items():
            finite = (res.outcome == 0) & np.isfinite(res.log_likelihood)
            if np.mean(finite) >= fraction and (fraction > 0 or finite.any()):
                out[name] = t_cut
        if all(v is not None for v in out.values()):
            break
    return out


def model_check(
    jets: Any,
    *,
    t_cut: float | None = None,
    lam: float | None = None,
    lam_root: float | None = None,
    likelihood: str = "symmetric",
    beam_size: int = 20,
    exact_max_leaves: int = 14,
    progress: bool = False,
) -> ModelCheck:
    """Which jets have at least one tree with non-zero likelihood at the given parameters.

    A jet has none when its mass² is at or below ``t_cut`` or (symmetric form) one of its particles
    has ``E² − |p|² < 0``; otherwise the greedy tree, then the beam-search trees are tried, and a jet
    of at most ``exact_max_leaves`` leaves where both fail is settled by the exact MAP engine (which
    says ``all_inf`` exactly when no tree is finite).

    Recipe for real jets: run this for a few ``t_cut`` values (e.g. 1, 4, 16 GeV²) on a sample of
    the file and cluster with the largest ``t_cut`` that describes nearly every jet; ``t_cut`` is
    the squared mass below which the model treats a cluster as a final particle, so it must be
    below the pair masses of the particles' closest neighbours.

    Args:
        jets: a :class:`~jetastar.JetCollection` (or anything :mod:`jetastar.observables` accepts).
        t_cut, lam, lam_root: parameters to check (default: each jet's own).
        likelihood: the likelihood form.
        beam_size: the beam of the second try.
        exact_max_leaves: largest jet settled exactly when no finite tree was found.
        progress: show a progress bar.

    Returns:
        A :class:`ModelCheck`; ``str()`` of it is a one-paragraph summary.

    Example:
        >>> from jetastar.ginkgo import ShowerParams, generate
        >>> check = model_check(generate(20, ShowerParams.qcd(), seed=1))
        >>> check.counts()["yes"]
        20
    """
    check_likelihood(likelihood)
    coll = _with_params(as_collection(jets)[0], t_cut=t_cut, lam=lam, lam_root=lam_root)
    params = coll.params
    n = len(coll)
    status = text_column(n, "unknown")
    reason = text_column(n, "")
    p = coll.leaves
    leaf_t = p[:, 0] ** 2 - np.sum(p[:, 1:] ** 2, axis=1)
    leaf_jet = np.repeat(np.arange(n), coll.n_leaves)
    neg = np.bincount(leaf_jet[leaf_t < 0.0], minlength=n) > 0
    tot = np.add.reduceat(p, coll.leaf_offsets[:-1], axis=0) if p.shape[0] else np.zeros((0, 4))
    jet_t = tot[:, 0] ** 2 - np.sum(tot[:, 1:] ** 2, axis=1) if n else np.zeros(0)
    below = jet_t <= params["t_cut"] if likelihood == "symmetric" else jet_t < params["t_cut"]
    status[below] = "no"
    reason[below] = "jet mass² <= t_cut"
    if likelihood == "symmetric":
        sel = neg & ~below
        status[sel] = "no"
        reason[sel] = "particle with E² − |p|² < 0"
    todo = np.flatnonzero(status == "unknown")
    with progress_bar(total=todo.size, unit="jet", desc="model check", show=progress) as bar:
        for i in todo:
            try:
                jet = coll[int(i)]
            except Exception as exc:  # an invalid jet: say why, do not stop the check
                status[i], reason[i] = "no", f"invalid jet: {exc}"
                bar.update(1)
                continue
            if math.isfinite(greedy(jet, likelihood=likelihood).log_likelihood):
                status[i], reason[i] = "yes", "greedy"
            elif math.isfinite(beam_search(jet, beam_size=beam_size,
                                           likelihood=likelihood).log_likelihood):
                status[i], reason[i] = "yes", "beam"
            elif jet.n_leaves <= exact_max_leaves:
                res = exact_map(jet, likelihood=likelihood)
                if math.isfinite(res.log_likelihood):
                    status[i], reason[i] = "yes", "exact"
                elif res.exact:
                    status[i], reason[i] = "no", "exact search: every tree is -inf"
            else:
                reason[i] = f"over {exact_max_leaves} leaves"
            bar.update(1)
    flat = cluster_columns(coll, {name: {"likelihood": likelihood} for name in KT_FAMILY})
    baselines = {name: int(np.sum((flat[name].outcome == 0)
                                  & np.isfinite(flat[name].log_likelihood)))
                 for name in KT_FAMILY}
    return ModelCheck(status, reason, t_cut, lam, lam_root, likelihood, baselines)


#: the sequential-recombination baselines whose finiteness :func:`model_check` counts
KT_FAMILY = ("kt", "cambridge", "antikt")


def result_reasons(collection: Any, table: Any) -> tuple[np.ndarray, np.ndarray]:
    """Per jet of a collection: whether an algorithm's tree is finite, and a one-line reason if not.

    Args:
        collection: the :class:`~jetastar.JetCollection` the results belong to.
        table: an :class:`~jetastar.io.AlgorithmResults` (rows matched to jets by ``jet_index``).

    Returns:
        ``(finite, reason)``: bool and str arrays of length ``len(collection)``. ``reason`` is
        ``""`` for a finite tree; for a −∞ tree it names the impossible split nearest the root
        (:data:`REASONS`), its cluster and how many splits are impossible; for a row without a tree
        it is the status and the algorithm's message; ``"missing"`` for a jet without a row.
    """
    n = len(collection)
    finite = np.zeros(n, dtype=bool)
    reason = text_column(n, "missing")
    table = table.for_jets(collection)
    rows = np.arange(len(table))
    jets_of = table.jet_index
    ll = table.log_likelihood[rows]
    has_tree = np.diff(table.node_offsets)[rows] > 0
    fin = has_tree & np.isfinite(ll)
    finite[jets_of] = fin
    reason[jets_of[fin]] = ""
    for r, j in zip(rows[~has_tree], jets_of[~has_tree], strict=True):
        msg = str(table.message[r])
        reason[j] = f"{table.status[r]}: {msg}" if msg else str(table.status[r])
    inf = has_tree & ~fin
    if inf.any():
        sub_rows = rows[inf]
        sub_jets = jets_of[inf]
        # flat arrays throughout: the rows' trees go to one kernel call, no Tree per jet
        sub_table = table.take(sub_rows)
        sub_table.jet_index = np.arange(sub_rows.shape[0], dtype=np.int64)
        likelihood = table.likelihood if table.likelihood in ("symmetric", "legacy") else "symmetric"
        rec = _reason_arrays(flat_trees(collection.take(sub_jets), sub_table), likelihood)
        for j, code, leaves, mass, count in zip(
                sub_jets.tolist(), rec["first_reason"].tolist(), rec["node_leaves"].tolist(),
                rec["node_mass"].tolist(), rec["n_impossible"].tolist(), strict=True):
            if not code:  # -inf without an impossible split of its own tree: say so
                reason[j] = "log-likelihood -inf"
                continue
            reason[j] = (f"{REASONS[code]}: cluster of {leaves} leaves, m = {mass:.4g} GeV "
                         f"({count} impossible split(s))")
    return finite, reason
