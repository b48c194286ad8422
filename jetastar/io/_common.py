"""Helpers shared by the HDF5, ROOT and legacy readers/writers (errors, validation, provenance)."""

from __future__ import annotations

import datetime as _dt
import os
import shlex
import sys
from pathlib import Path
from typing import Any

import numba as nb
import numpy as np

from .._version import __version__
from ..errors import FileFormatError, InvalidJetInFileError
from ..ginkgo.likelihood import split_llh, t_of
from ..jet import SPACELIKE_TOLERANCE, JetCollection

__all__ = [
    "SCHEMA_VERSION",
    "FileFormatError",
    "InvalidJetInFileError",
    "check_exists",
    "get_extras",
    "jet_slice",
    "provenance",
    "set_extras",
    "take_with_extras",
    "truth_log_likelihoods",
    "validate_columns",
]

#: Version of the on-disk layout written by this jetastar (HDF5 attribute / ROOT meta field).
SCHEMA_VERSION = 1
FORMAT_NAME = "jetastar"


def check_exists(path: str | os.PathLike[str]) -> Path:
    """``Path(path)``, raising a one-line :class:`FileNotFoundError` when it is not a file."""
    p = Path(path)
    try:
        p.stat()
    except PermissionError:
        raise PermissionError(f"{p}: permission denied (cannot reach the file)") from None
    except OSError:
        raise FileNotFoundError(f"{p}: no such file") from None
    if p.is_dir():
        raise FileFormatError(f"{p}: is a directory, not a jet file")
    if not p.is_file():  # reading a FIFO would block, a device would never end
        raise FileFormatError(f"{p}: not a regular file (a pipe, socket or device)")
    if not os.access(p, os.R_OK):
        raise PermissionError(f"{p}: permission denied (cannot read the file)")
    return p


def provenance(
    *, seed: int | None = None, command: str | None = None, **extra: Any
) -> dict[str, Any]:
    """Provenance attributes: jetastar version, creation date (UTC ISO 8601), command, seed.

    Args:
        seed: the generator seed, if any.
        command: the command line (default: this process's ``sys.argv``).
        **extra: further JSON-serialisable entries.

    Example:
        >>> provenance(seed=3)["seed"]
        3
    """
    if command is None:
        command = shlex.join([Path(sys.argv[0]).name, *sys.argv[1:]]) if sys.argv else ""
    out: dict[str, Any] = {
        "jetastar_version": __version__,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": command,
        "seed": -1 if seed is None else int(seed),
    }
    out.update(extra)
    return out


def get_extras(collection: JetCollection) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Extra columns of a collection: ``(per_node, per_jet)`` name -> array (copies of the dicts).

    They live in ``collection.node_columns`` / ``collection.jet_columns`` (e.g. the nominal
    ``deltas`` of legacy Ginkgo pickles) and follow the collection's node / jet order.
    """
    return dict(collection.node_columns), dict(collection.jet_columns)


def set_extras(
    collection: JetCollection,
    node: dict[str, Any] | None = None,
    jet: dict[str, Any] | None = None,
) -> JetCollection:
    """Replace the extra per-node / per-jet columns of ``collection`` (in place; returned).

    Raises:
        ValueError: if a column's length does not match the nodes / jets.
    """
    collection.node_columns = {}
    collection.jet_columns = {}
    return collection.with_columns(node, jet)


def jet_slice(collection: JetCollection, start: int, stop: int) -> JetCollection:
    """Jets ``start:stop`` of a collection, with their extra columns."""
    return collection.take(np.arange(start, stop))


def take_with_extras(collection: JetCollection, indices: Any) -> JetCollection:
    """``collection.take(indices)`` (extra columns included)."""
    return collection.take(indices)


def truth_log_likelihoods(collection: JetCollection, likelihood: str) -> np.ndarray:
    """Truth-tree log-likelihood of every jet (internal momenta = sums of leaf momenta).

    NaN where a jet has no truth tree, non-finite or non-positive-energy leaves, a malformed tree
    or invalid parameters. Computed for all jets in one compiled loop over the flat columns with
    the likelihood kernels of :mod:`jetastar.ginkgo.likelihood` (same values as
    :func:`~jetastar.ginkgo.log_likelihood` up to the order of the final summation).
    """
    from ..ginkgo.likelihood import likelihood_constants

    cached = get_extras(collection)[1].get(f"truth_llh_{likelihood}")
    if cached is not None:
        return cached
    n_jets = len(collection)
    table: dict[tuple[float, float, float], int] = {}
    rows: list[np.ndarray] = []
    which = np.full(n_jets, -1, dtype=np.int64)
    prm = collection.params
    for i in range(n_jets):
        key = (float(prm["t_cut"][i]), float(prm["lam"][i]), float(prm["lam_root"][i]))
        k = table.get(key)
        if k is None:
            try:
                rows.append(likelihood_constants(*key, likelihood))
            except ValueError:
                continue
            k = table[key] = len(rows) - 1
        which[i] = k
    consts = np.stack(rows) if rows else np.zeros((1, 2, 5))
    out = np.full(n_jets, np.nan)
    _truth_llh_kernel(
        np.ascontiguousarray(collection.leaves), collection.leaf_offsets,
        np.ascontiguousarray(collection.children), collection.leaf_of_node,
        collection.node_offsets, which, consts, SPACELIKE_TOLERANCE, out,
    )
    return out


@nb.njit(cache=True)
def _truth_llh_kernel(leaves, loff, children, leaf_of_node, noff, which, consts, tol, out):
    for j in range(out.shape[0]):
        a = noff[j]
        m = noff[j + 1] - a
        la = loff[j]
        n = loff[j + 1] - la
        if m == 0 or m != 2 * n - 1 or which[j] < 0:
            continue
        ok = True
        for q in range(la, la + n):
            if not (leaves[q, 0] > 0.0):
                ok = False
            for c in range(4):
                if not np.isfinite(leaves[q, c]):
                    ok = False
            e = leaves[q, 0]
            if ok and t_of(e, leaves[q, 1], leaves[q, 2], leaves[q, 3]) < -tol * e * e:
                ok = False
        parent = np.full(m, -1, dtype=np.int64)
        seen_leaf = np.zeros(n, dtype=np.bool_)
        for k in range(m):
            left = children[a + k, 0]
            right = children[a + k, 1]
            if left < 0 or right < 0:
                lf = leaf_of_node[a + k]
                if left != -1 or right != -1 or lf < 0 or lf >= n or seen_leaf[lf]:
                    ok = False
                    break
                seen_leaf[lf] = True
            else:
                if left >= m or right >= m or left == right or left == k or right == k:
                    ok = False
                    break
                if parent[left] != -1 or parent[right] != -1:
                    ok = False
                    break
                parent[left] = k
                parent[right] = k
        if not ok:
            continue
        root = -1
        for k in range(m):
            if parent[k] == -1:
                if root != -1:
                    ok = False
                root = k
        if not ok or root < 0:
            continue
        # post-order without recursion; a cycle shows up as a wrong visit count
        order = np.empty(m, dtype=np.int64)
        stack = np.empty(2 * m + 2, dtype=np.int64)
        done = np.zeros(m, dtype=np.bool_)
        top = 0
        stack[0] = root
        count = 0
        while top >= 0 and count <= m:
            node = stack[top]
            top -= 1
            if children[a + node, 0] < 0 or done[node]:
                if count < m:
                    order[count] = node
                count += 1
            else:
                done[node] = True
                if top + 3 >= stack.shape[0]:
                    count = m + 1
                    break
                top += 1
                stack[top] = node
                top += 1
                stack[top] = children[a + node, 1]
                top += 1
                stack[top] = children[a + node, 0]
        if count != m:
            continue
        c = consts[which[j]]
        legacy = c[0, 4] != 0.0
        p = np.empty((m, 4))
        t = np.empty(m)
        total = 0.0
        for idx in range(m):
            node = order[idx]
            left = children[a + node, 0]
            if left < 0:
                for q in range(4):
                    p[node, q] = leaves[la + leaf_of_node[a + node], q]
                t[node] = 0.0 if legacy else t_of(p[node, 0], p[node, 1], p[node, 2], p[node, 3])
            else:
                right = children[a + node, 1]
                for q in range(4):
                    p[node, q] = p[left, q] + p[right, q]
                t[node] = t_of(p[node, 0], p[node, 1], p[node, 2], p[node, 3])
                row = 1 if node == root else 0
                total += split_llh(t[left], t[right], t[node], c[row])
        out[j] = total


def validate_columns(collection: JetCollection, path: str, offset: int = 0) -> None:
    """Fast (vectorised) checks of every jet of a collection read from ``path``.

    Checks: at least 2 leaves, finite leaf 4-vectors, positive energies, no clearly spacelike leaf,
    a truth tree of ``2n - 1`` nodes (or none), finite positive parameters.

    Raises:
        InvalidJetInFileError: for the first bad jet, naming file, entry, jet id and field.
    """
    n_leaves = collection.n_leaves
    ids = collection.jet_id

    def fail(i: int, field: str, msg: str) -> None:
        raise InvalidJetInFileError(
            msg, path=path, entry=int(i) + offset, jet=int(ids[i]), field=field
        )

    small = np.flatnonzero(n_leaves < 2)
    if small.size:
        i = int(small[0])
        fail(i, "leaves", f"a jet needs at least 2 leaves, got {int(n_leaves[i])}")
    p = collection.leaves
    if p.shape[0]:
        jet_of_leaf = np.repeat(np.arange(len(collection)), n_leaves)
        first_leaf = collection.leaf_offsets[:-1]
        bad = ~np.isfinite(p)
        if bad.any():
            k, j = np.argwhere(bad)[0]
            i = int(jet_of_leaf[k])
            comp = ("E", "px", "py", "pz")[j]
            fail(i, f"leaves.{comp}",
                 f"leaf {int(k - first_leaf[i])} has a non-finite {comp} ({p[k, j]})")
        nonpos = np.flatnonzero(p[:, 0] <= 0.0)
        if nonpos.size:
            k = int(nonpos[0])
            i = int(jet_of_leaf[k])
            fail(i, "leaves.E",
                 f"leaf {k - int(first_leaf[i])} has non-positive energy E = {p[k, 0]} GeV")
        t = p[:, 0] ** 2 - (p[:, 1] ** 2 + p[:, 2] ** 2 + p[:, 3] ** 2)
        spacelike = np.flatnonzero(t < -SPACELIKE_TOLERANCE * p[:, 0] ** 2)
        if spacelike.size:
            k = int(spacelike[0])
            i = int(jet_of_leaf[k])
            fail(i, "leaves",
                 f"leaf {k - int(first_leaf[i])} is spacelike: E² − |p|² = {t[k]:.6g} GeV²")
    n_nodes = np.diff(collection.node_offsets)
    wrong = np.flatnonzero((n_nodes != 0) & (n_nodes != 2 * n_leaves - 1))
    if wrong.size:
        i = int(wrong[0])
        fail(i, "tree", f"the truth tree has {int(n_nodes[i])} nodes, "
             f"a binary tree over {int(n_leaves[i])} leaves has {2 * int(n_leaves[i]) - 1}")
    for name in ("lam", "lam_root", "t_cut", "t_root", "m_hard"):
        v = collection.params[name]
        badp = np.flatnonzero(~(np.isfinite(v) & (v > 0)))
        if badp.size:
            i = int(badp[0])
            fail(i, f"params.{name}", f"must be finite and > 0, got {v[i]}")
    rm = collection.params["root_momentum"]
    badr = np.flatnonzero(~np.all(np.isfinite(rm), axis=1)) if rm.size else np.empty(0, np.int64)
    if badr.size:
        i = int(badr[0])
        fail(i, "params.root_momentum", f"has non-finite values {rm[i].tolist()}")

