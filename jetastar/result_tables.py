"""Columnar storage of clustering results (one table per algorithm run), as written to files.

:class:`AlgorithmResults` holds the results of one algorithm over many jets as flat numpy columns
(one row per jet) plus the trees as flat children arrays with offsets, the same way the jets are
stored. It converts to and from lists of :class:`~jetastar.clustering.ClusteringResult`.

Example:
    >>> from jetastar import Tree
    >>> from jetastar.clustering import ClusteringResult
    >>> r = ClusteringResult(Tree.from_nested(((0, 1), 2)), -5.0, "greedy", stats={"time_s": 0.1})
    >>> table = AlgorithmResults.from_results("greedy", [r], jet_index=[0], jet_id=[7])
    >>> table.result(0).tree == r.tree, float(table.log_likelihood[0])
    (True, -5.0)
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from ._columnar import offset_ranges
from ._text import awkward_strings, shared_text
from .clustering.registry import canonical_name
from .clustering.result import STATUSES, ClusteringResult
from .errors import InvalidTreeError
from .tree import Tree

__all__ = ["AlgorithmResults", "TableAssembler", "to_json", "unit_options"]

#: stats keys that get their own column (everything numeric in ``stats`` becomes a counter column).
_TIME_KEY = "time_s"


def to_json(value: Any) -> str:
    """JSON text of options/stats; numpy scalars and arrays become plain numbers/lists."""
    return json.dumps(value, default=_json_default, sort_keys=True, allow_nan=True)


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    return repr(obj)


def unit_options(options: dict[str, Any]) -> dict[str, Any]:
    """Options as JSON-round-tripped plain values (what is stored on disk)."""
    return json.loads(to_json(options))


def _text_column(values: Any) -> np.ndarray:
    """A column of text: ``str`` of each value, as a 1-d object array. A numpy array of strings
    (the columnar path's statuses) is converted in numpy (iterating over its items makes a numpy
    scalar of each, 5× slower), each distinct value one shared ``str``."""
    if isinstance(values, np.ndarray) and values.dtype.kind == "U":
        return shared_text(values)
    if isinstance(values, np.ndarray) and values.dtype == object and \
            set(map(type, values.ravel().tolist())) <= {str}:
        return values.ravel().copy()
    return np.array([str(s) for s in values], dtype=object)


#: the per-row columns of a table besides the tree and the counters, with their types
_ROW_COLUMNS: tuple[tuple[str, Any], ...] = (
    ("jet_index", np.int64), ("jet_id", np.int64), ("log_likelihood", np.float64),
    ("exact", bool), ("log_z", np.float64), ("upper_bound", np.float64),
    ("n_trees", np.float64), ("time_s", np.float64), ("status", object), ("message", object),
    ("options", object),
)


def load_pandas() -> Any:
    """The ``pandas`` module, or an :class:`ImportError` saying how to install it."""
    try:
        import pandas
    except ImportError:
        raise ImportError("results as a DataFrame need pandas: pip install 'jetastar[pandas]' "
                          "(or: pip install pandas)") from None
    return pandas


class AlgorithmResults:
    """Results of one algorithm over many jets, stored as columns.

    Args:
        algorithm: registry name of the algorithm.
        jet_index: ``(R,)`` position of each row's jet in its collection/file.
        jet_id: ``(R,)`` id of each row's jet.
        log_likelihood, log_z, upper_bound, n_trees, time_s: ``(R,)`` float64 (NaN = unknown;
            ``log_likelihood`` is NaN only for skipped/failed rows without a tree).
        exact: ``(R,)`` bool.
        status: ``(R,)`` str, one of :data:`~jetastar.clustering.STATUSES`.
        message: ``(R,)`` str.
        options: ``(R,)`` JSON text of the options each row ran with.
        node_offsets: ``(R + 1,)``; ``children`` ``(K, 2)`` and ``leaf_of_node`` ``(K,)``: the trees
            (0 nodes for rows without a tree).
        counters: name -> ``(R,)`` float64 numeric stats (NaN where a row lacks it).
        likelihood: the likelihood form the algorithm scored with.
        exact_method: whether the algorithm is an exact method (registry flag).
    """

    def __init__(
        self,
        algorithm: str,
        *,
        jet_index: Any,
        jet_id: Any,
        log_likelihood: Any,
        exact: Any,
        log_z: Any,
        upper_bound: Any,
        n_trees: Any,
        time_s: Any,
        status: Any,
        message: Any,
        options: Any,
        node_offsets: Any,
        children: Any,
        leaf_of_node: Any,
        counters: dict[str, Any] | None = None,
        likelihood: str = "symmetric",
        exact_method: bool = False,
    ) -> None:
        self.algorithm = str(algorithm)
        self.jet_index = np.asarray(jet_index, dtype=np.int64).ravel()
        n = self.jet_index.shape[0]
        self.jet_id = np.asarray(jet_id, dtype=np.int64).ravel()
        self.log_likelihood = np.asarray(log_likelihood, dtype=np.float64).ravel()
        self.exact = np.asarray(exact, dtype=bool).ravel()
        self.log_z = np.asarray(log_z, dtype=np.float64).ravel()
        self.upper_bound = np.asarray(upper_bound, dtype=np.float64).ravel()
        self.n_trees = np.asarray(n_trees, dtype=np.float64).ravel()
        self.time_s = np.asarray(time_s, dtype=np.float64).ravel()
        self.status = _text_column(status)
        self.message = _text_column(message)
        self.options = _text_column(options)
        self.node_offsets = np.asarray(node_offsets, dtype=np.int64).ravel()
        self.children = np.asarray(children, dtype=np.int64).reshape(-1, 2)
        self.leaf_of_node = np.asarray(leaf_of_node, dtype=np.int64).ravel()
        self.counters = {
            str(k): np.asarray(v, dtype=np.float64).ravel() for k, v in (counters or {}).items()
        }
        self.likelihood = str(likelihood)
        self.exact_method = bool(exact_method)
        for name, _ in _ROW_COLUMNS:
            if getattr(self, name).shape[0] != n:
                raise ValueError(f"results of {algorithm!r}: column {name!r} has the wrong length")
        for k, v in self.counters.items():
            if v.shape[0] != n:
                raise ValueError(f"results of {algorithm!r}: counter {k!r} has the wrong length")
        if self.node_offsets.shape != (n + 1,) or self.node_offsets[-1] != self.children.shape[0]:
            raise ValueError(f"results of {algorithm!r}: tree offsets do not match the trees")
        bad = sorted(set(self.status) - set(STATUSES))
        if bad:
            raise ValueError(f"results of {algorithm!r}: unknown status {bad[0]!r}")

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_results(
        cls,
        algorithm: str,
        results: Sequence[ClusteringResult],
        *,
        jet_index: Any,
        jet_id: Any = None,
        likelihood: str | None = None,
        exact_method: bool = False,
    ) -> AlgorithmResults:
        """Columns from a list of :class:`ClusteringResult` (row ``k`` = jet ``jet_index[k]``).

        Args:
            algorithm: registry name.
            results: one result per row.
            jet_index: position of each row's jet.
            jet_id: id of each row's jet (default: ``result.jet_id`` or the index).
            likelihood: likelihood form (default: the first result's).
            exact_method: the registry's exact flag for this algorithm.
        """
        results = list(results)
        idx = np.asarray(jet_index, dtype=np.int64).ravel()
        if idx.shape[0] != len(results):
            raise ValueError("one jet_index per result is needed")
        if jet_id is None:
            jet_id = [
                r.jet_id if r.jet_id is not None else int(i)
                for r, i in zip(results, idx, strict=True)
            ]
        counter_names = sorted(
            {k for r in results for k, v in r.stats.items() if k != _TIME_KEY and _numeric(v)}
        )
        trees = [r.tree for r in results]
        sizes = np.array([0 if t is None else t.n_nodes for t in trees], dtype=np.int64)
        empty = np.empty((0, 2), np.int64)
        return cls(
            algorithm,
            jet_index=idx,
            jet_id=jet_id,
            log_likelihood=[
                math.nan if r.status in ("skipped", "failed") else r.log_likelihood
                for r in results
            ],
            exact=[bool(r.exact) for r in results],
            log_z=[_num(r.log_z) for r in results],
            upper_bound=[_num(r.upper_bound) for r in results],
            n_trees=[_num(r.n_trees) for r in results],
            time_s=[_num(r.stats.get(_TIME_KEY)) for r in results],
            status=[r.status for r in results],
            message=[r.message for r in results],
            options=[to_json(r.options) for r in results],
            node_offsets=np.concatenate([[0], np.cumsum(sizes)]),
            children=np.concatenate([t.children for t in trees if t is not None])
            if sizes.sum() else empty,
            leaf_of_node=np.concatenate([t.leaf_of_node for t in trees if t is not None])
            if sizes.sum() else np.empty(0, np.int64),
            counters={
                k: [_num(r.stats.get(k)) if _numeric(r.stats.get(k)) else math.nan
                    for r in results]
                for k in counter_names
            },
            likelihood=likelihood if likelihood is not None
            else (results[0].likelihood if results else "symmetric"),
            exact_method=exact_method,
        )

    @classmethod
    def concatenate(
        cls, parts: Iterable[AlgorithmResults], n_jets: Sequence[int] | None = None
    ) -> AlgorithmResults:
        """Join tables of the same algorithm (rows in the given order).

        Args:
            parts: the tables.
            n_jets: to join the tables of different jet collections, joined as
                :meth:`JetCollection.concatenate <jetastar.JetCollection.concatenate>` does: the
                number of jets of each part's collection. Each part's ``jet_index`` is then
                shifted by the jets before it. ``None`` (default): the parts are of one collection
                (e.g. its chunks) and ``jet_index`` is kept.

        Example:
            >>> import jetastar
            >>> from jetastar import JetCollection
            >>> from jetastar.ginkgo import ShowerParams, generate
            >>> a, b = generate(3, ShowerParams.qcd(), seed=1), generate(2, ShowerParams.w(), seed=2)
            >>> ta, tb = jetastar.cluster(a, "greedy"), jetastar.cluster(b, "greedy")
            >>> both = AlgorithmResults.concatenate([ta, tb], n_jets=[len(a), len(b)])
            >>> both.jet_index.tolist()
            [0, 1, 2, 3, 4]
            >>> len(both.for_jets(JetCollection.concatenate([a, b])))
            5
        """
        parts = list(parts)
        if not parts:
            raise ValueError("nothing to concatenate")
        if n_jets is not None:
            counts = [int(k) for k in n_jets]
            if len(counts) != len(parts):
                raise ValueError(f"n_jets: {len(counts)} counts for {len(parts)} tables")
            shifts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
            parts = [p.take(np.arange(len(p))) for p in parts]
            for p, shift in zip(parts, shifts, strict=True):
                p.jet_index = p.jet_index + shift
        names = {p.algorithm for p in parts}
        if len(names) != 1:
            raise ValueError(f"cannot concatenate results of different algorithms {sorted(names)}")
        counters = sorted({k for p in parts for k in p.counters})
        offs, base = [np.zeros(1, np.int64)], 0
        for p in parts:
            offs.append(p.node_offsets[1:] + base)
            base += int(p.node_offsets[-1])

        def cat(name: str) -> np.ndarray:
            return np.concatenate([getattr(p, name) for p in parts])

        return cls(
            parts[0].algorithm,
            **{name: cat(name) for name, _ in _ROW_COLUMNS},
            node_offsets=np.concatenate(offs),
            children=cat("children"),
            leaf_of_node=cat("leaf_of_node"),
            counters={
                k: np.concatenate([p.counters.get(k, np.full(len(p), np.nan)) for p in parts])
                for k in counters
            },
            likelihood=parts[0].likelihood,
            exact_method=parts[0].exact_method,
        )

    def take(self, rows: Any) -> AlgorithmResults:
        """A new table with the given rows (in that order)."""
        rows = np.asarray(rows, dtype=np.int64).ravel()
        nsel = offset_ranges(self.node_offsets, rows)
        return AlgorithmResults(
            self.algorithm,
            **{name: getattr(self, name)[rows] for name, _ in _ROW_COLUMNS},
            node_offsets=np.concatenate([[0], np.cumsum(np.diff(self.node_offsets)[rows])]),
            children=self.children[nsel],
            leaf_of_node=self.leaf_of_node[nsel],
            counters={k: v[rows] for k, v in self.counters.items()},
            likelihood=self.likelihood,
            exact_method=self.exact_method,
        )

    def for_jets(self, jets: Any) -> AlgorithmResults:
        """This table's rows of the jets in ``jets``, with ``jet_index`` their positions there.

        A row's ``jet_index`` is the position of its jet in the collection (or file) the table was
        made for. Selecting jets (``jets.take(p)``, ``jets[mask]``, ``io.read(path, jets=...)``,
        the blocks of ``io.iterate``) changes their positions; this matches the rows to the jets
        given: by position where each row's ``jet_id`` is that of the jet at its position,
        otherwise by ``jet_id`` (the ids of ``jets`` must then be unique), leaving out the rows of
        jets not in ``jets``. :func:`jetastar.observables.tree_observables` and the other
        functions that take a table with jets, and :func:`jetastar.io.write`, call it.

        Args:
            jets: a :class:`~jetastar.JetCollection` (anything with ``jet_id`` and ``n_leaves``
                arrays).

        Returns:
            the table itself where it lines up already, otherwise a new table.

        Raises:
            InvalidTreeError: rows that match no jet, two rows of one jet, rows that cannot be
                matched (positions and ids disagree and the ids of ``jets`` repeat), or a row
                whose tree has not its jet's number of leaves: the table is not of these jets.

        Example:
            >>> import numpy as np, jetastar
            >>> from jetastar.ginkgo import ShowerParams, generate
            >>> jets = generate(4, ShowerParams.qcd(), seed=1)
            >>> table = jetastar.cluster(jets, "greedy")
            >>> p = np.array([2, 0])
            >>> rows = table.take(p).for_jets(jets.take(p))
            >>> rows.jet_index.tolist(), rows.jet_id.tolist()
            ([0, 1], [2, 0])
        """
        ids = np.asarray(jets.jet_id, dtype=np.int64).ravel()
        n, idx = ids.shape[0], self.jet_index
        what = f"results of {self.algorithm!r}"
        if idx.size == 0:
            return self
        if idx.min() >= 0 and idx.max() < n and np.array_equal(ids[idx], self.jet_id):
            out = self
        else:
            if np.unique(ids).shape[0] != n:
                row = int(np.flatnonzero((idx < 0) | (idx >= n) |
                                         (ids[np.clip(idx, 0, max(n - 1, 0))] != self.jet_id))[0])
                raise InvalidTreeError(
                    f"{what} do not line up with these {n} jets (row {row} is of jet id "
                    f"{int(self.jet_id[row])} at position {int(idx[row])}), and their jet ids repeat, "
                    "so rows cannot be matched by id: pass the jets the table was made for",
                    field="trees",
                )
            order = np.argsort(ids, kind="stable")
            pos = np.minimum(np.searchsorted(ids[order], self.jet_id), max(n - 1, 0))
            found = ids[order][pos] == self.jet_id if n else np.zeros(idx.shape, dtype=bool)
            if not found.any():
                raise InvalidTreeError(
                    f"{what}: no row is of one of these {n} jets (jet ids "
                    f"{int(self.jet_id.min())}..{int(self.jet_id.max())} in the table)",
                    field="trees",
                )
            rows = np.flatnonzero(found)
            out = self.take(rows)
            out.jet_index = order[pos[rows]]
        seen = np.bincount(out.jet_index, minlength=n)
        if seen.max(initial=0) > 1:
            i = int(np.argmax(seen))
            raise InvalidTreeError(
                f"{what}: {int(seen[i])} rows for this jet (position {i} of {n}); a table has "
                "one row per jet (tables of different jet collections are joined with "
                "AlgorithmResults.concatenate(tables, n_jets=...))",
                jet=int(ids[i]), field="trees",
            )
        nodes = np.diff(out.node_offsets)
        has = np.flatnonzero(nodes > 0)
        want = np.asarray(jets.n_leaves, dtype=np.int64)[out.jet_index[has]]
        bad = np.flatnonzero((nodes[has] + 1) // 2 != want)
        if bad.size:
            r = int(has[bad[0]])
            i = int(out.jet_index[r])
            raise InvalidTreeError(
                f"{what}: the row's tree has {int(nodes[r] + 1) // 2} leaves and the jet at position "
                f"{i} of {n} has {int(want[bad[0]])}: the table is not of these jets ({bad.size} "
                "such rows)",
                jet=int(ids[i]), field="trees",
            )
        return out

    # ------------------------------------------------------------------ access
    def __len__(self) -> int:
        return int(self.jet_index.shape[0])

    def __getitem__(self, key: Any) -> ClusteringResult | AlgorithmResults:
        """``table[i]``: row ``i`` as a :class:`ClusteringResult` (as :meth:`result`; negative
        ``i`` counts from the end); ``table[a:b]``, an array of row numbers or a boolean mask: a
        new table of those rows (as :meth:`take`).

        Example:
            >>> from jetastar.ginkgo import ShowerParams, generate
            >>> import jetastar
            >>> table = jetastar.cluster(generate(4, ShowerParams.qcd(), seed=1), "greedy")
            >>> table[-1].jet_id, len(table[1:3]), [r.jet_id for r in table][:2]
            (3, 2, [0, 1])
        """
        if isinstance(key, (int, np.integer)) and not isinstance(key, (bool, np.bool_)):
            return self.result(int(key))
        if isinstance(key, slice):
            return self.take(np.arange(len(self))[key])
        if isinstance(key, str):
            raise TypeError(
                f"results tables are indexed by row (table[i], table[a:b]); the column "
                f"{key!r} is an attribute: table.{key}" if hasattr(self, key) else
                f"results tables are indexed by row (table[i], table[a:b]), not by {key!r}")
        rows = np.asarray(key)
        if rows.size == 0:
            rows = rows.astype(np.int64)
        if rows.dtype == bool:
            if rows.shape != (len(self),):
                raise IndexError(f"a boolean mask of {rows.shape} for a table of {len(self)} "
                                 "rows")
            rows = np.flatnonzero(rows)
        elif rows.dtype.kind not in "iu":
            raise TypeError(f"results tables are indexed by row numbers, not {rows.dtype}")
        rows = rows.ravel().astype(np.int64)
        n = len(self)
        outside = np.flatnonzero((rows < -n) | (rows >= n))
        if outside.size:
            self._row(int(rows[outside[0]]))  # the IndexError naming the first such row
        return self.take(np.where(rows < 0, rows + n, rows))

    def __iter__(self) -> Iterator[ClusteringResult]:
        """Every row as a :class:`ClusteringResult`, made as it is reached."""
        for row in range(len(self)):
            yield self.result(row)

    def _row(self, row: int) -> int:
        """``row`` as a position ``0 .. len - 1`` (negative counts from the end)."""
        n = len(self)
        if not -n <= row < n:
            raise IndexError(f"row {row} of a table of {n} rows ({self.algorithm!r})")
        return row + n if row < 0 else row

    def tree(self, row: int) -> Tree | None:
        """The tree of row ``row`` (``None`` when the row has none)."""
        row = self._row(int(row))
        a, b = self.node_offsets[row], self.node_offsets[row + 1]
        if b == a:
            return None
        return Tree(self.children[a:b], self.leaf_of_node[a:b], jet=int(self.jet_id[row]))

    def result(self, row: int) -> ClusteringResult:
        """Row ``row`` as a :class:`ClusteringResult` (negative ``row`` counts from the end)."""
        row = self._row(int(row))
        stats: dict[str, Any] = {
            k: _counter_value(v[row]) for k, v in self.counters.items() if not np.isnan(v[row])
        }
        if not np.isnan(self.time_s[row]):
            stats[_TIME_KEY] = float(self.time_s[row])
        ll = float(self.log_likelihood[row])
        return ClusteringResult(
            self.tree(row),
            -math.inf if math.isnan(ll) else ll,
            canonical_name(self.algorithm),
            exact=bool(self.exact[row]),
            likelihood=self.likelihood,
            options=json.loads(self.options[row]),
            stats=stats,
            log_z=_opt(self.log_z[row]),
            n_trees=_opt_count(self.n_trees[row]),
            upper_bound=_opt(self.upper_bound[row]),
            status=str(self.status[row]),
            message=str(self.message[row]),
            jet_id=int(self.jet_id[row]),
        )

    def results(self) -> list[ClusteringResult]:
        """Every row as a :class:`ClusteringResult`."""
        return [self.result(k) for k in range(len(self))]

    def to_awkward(self) -> Any:
        """One record per row: ``jet_index``, ``jet_id``, ``status``, ``log_likelihood``,
        ``finite`` (a tree with non-zero likelihood), ``exact``, ``time_s``, ``message`` and the
        tree as ``var * {left, right, leaf}`` (empty without a tree; ``leaf`` is the leaf index of
        leaf nodes, −1 otherwise); and ``log_z``, ``n_trees`` and ``upper_bound`` where the
        algorithm gave them for some row (the full trellis, A*; NaN in the other rows).

        Example:
            >>> from jetastar import Tree
            >>> from jetastar.clustering import ClusteringResult
            >>> r = ClusteringResult(Tree.from_nested((0, 1)), -2.0, "greedy")
            >>> arr = AlgorithmResults.from_results("greedy", [r], jet_index=[0]).to_awkward()
            >>> arr.log_likelihood.tolist(), len(arr.tree[0])
            ([-2.0], 3)
        """
        import awkward as ak

        tree = ak.unflatten(  # contiguous columns: strided buffers fail in ak.to_parquet
            ak.zip({"left": np.ascontiguousarray(self.children[:, 0]),
                    "right": np.ascontiguousarray(self.children[:, 1]),
                    "leaf": self.leaf_of_node}),
            np.diff(self.node_offsets),
        )
        has_tree = np.diff(self.node_offsets) > 0
        fields = {
            "jet_index": self.jet_index, "jet_id": self.jet_id,
            "status": awkward_strings(self.status),
            "log_likelihood": self.log_likelihood,
            "finite": has_tree & np.isfinite(self.log_likelihood),
            "exact": self.exact, "time_s": self.time_s,
            "message": awkward_strings(self.message), "tree": tree,
        }
        for name in ("log_z", "n_trees", "upper_bound"):
            values = getattr(self, name)
            if not np.isnan(values).all():
                fields[name] = values
        return ak.zip(fields, depth_limit=1)

    def to_pandas(self) -> Any:
        """One row per jet as a ``pandas.DataFrame``: the flat columns of
        :meth:`to_awkward` (``jet_index``, ``jet_id``, ``status``, ``log_likelihood``, ``finite``,
        ``exact``, ``time_s``, ``message``; ``log_z``, ``n_trees``, ``upper_bound`` where given)
        and ``n_leaves`` of each tree (0 without one). The trees themselves: :meth:`tree` or
        :meth:`to_awkward`. Needs pandas (``pip install "jetastar[pandas]"``).

        Example:
            >>> from jetastar import Tree
            >>> from jetastar.clustering import ClusteringResult
            >>> r = ClusteringResult(Tree.from_nested((0, 1)), -2.0, "greedy")
            >>> df = AlgorithmResults.from_results("greedy", [r], jet_index=[0]).to_pandas()
            >>> df[["status", "log_likelihood", "n_leaves"]].values.tolist()
            [['ok', -2.0, 2]]
        """
        pd = load_pandas()
        nodes = np.diff(self.node_offsets)
        columns: dict[str, Any] = {
            "jet_index": self.jet_index, "jet_id": self.jet_id,
            "status": self.status.astype(str), "log_likelihood": self.log_likelihood,
            "finite": (nodes > 0) & np.isfinite(self.log_likelihood),
            "exact": self.exact, "time_s": self.time_s, "message": self.message.astype(str),
            "n_leaves": np.where(nodes > 0, (nodes + 1) // 2, 0),
        }
        for name in ("log_z", "n_trees", "upper_bound"):
            values = getattr(self, name)
            if not np.isnan(values).all():
                columns[name] = values
        return pd.DataFrame(columns)

    def status_counts(self) -> dict[str, int]:
        """How many rows have each status."""
        names, counts = np.unique(self.status.astype(str), return_counts=True)
        return {str(n): int(c) for n, c in zip(names, counts, strict=True)}

    def __repr__(self) -> str:
        return f"AlgorithmResults({self.algorithm!r}, {len(self)} rows, {self.status_counts()})"


class TableAssembler:
    """One algorithm's table of ``n`` rows put together from tables of consecutive rows (chunks),
    which may arrive in any order, in columns allocated once.

    :meth:`AlgorithmResults.concatenate` of the chunks at the end holds every chunk and the joined
    table at once (``cluster_jets`` of 1 000 000 jets with four algorithms: 1.6 GB more than the
    results). Here each chunk is copied into place as it arrives and can be dropped: a tree's
    nodes go to the room the row's jet can need (``2 n - 1`` nodes for ``n`` leaves), closed up
    by :meth:`finish`.

    Args:
        algorithm: the algorithm's name.
        n_leaves: ``(n,)`` leaves of each row's jet.

    Example:
        >>> import numpy as np
        >>> from jetastar.batch import BatchConfig, cluster_collection
        >>> from jetastar.ginkgo import ShowerParams, generate
        >>> jets = generate(5, ShowerParams.qcd(), seed=1)
        >>> whole = TableAssembler("kt", np.diff(jets.leaf_offsets))
        >>> for a, b in [(3, 5), (0, 3)]:
        ...     rows = jets.take(np.arange(a, b))
        ...     whole.put(a, cluster_collection(rows, BatchConfig(["kt"]), first_index=a)["kt"])
        >>> table = whole.finish()
        >>> table.jet_index.tolist(), table.tree(4) == cluster_collection(
        ...     jets, BatchConfig(["kt"]))["kt"].tree(4)
        ([0, 1, 2, 3, 4], True)
    """

    def __init__(self, algorithm: str, n_leaves: Any) -> None:
        self.algorithm = str(algorithm)
        room = np.maximum(2 * np.asarray(n_leaves, dtype=np.int64).ravel() - 1, 0)
        n = room.shape[0]
        self._room = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(room, out=self._room[1:])
        self._columns = {name: np.empty(n, dtype=dtype) for name, dtype in _ROW_COLUMNS}
        self._counters: dict[str, np.ndarray] = {}
        self._nodes = np.zeros(n, dtype=np.int64)  # tree nodes of each row
        self._children = np.empty((int(self._room[-1]), 2), dtype=np.int64)
        self._leaf_of_node = np.empty(int(self._room[-1]), dtype=np.int64)
        self._filled = np.zeros(n, dtype=bool)
        self._chunks: list[tuple[int, int]] = []  # (first row, rows) of each chunk put
        self._first: tuple[int, str, bool] | None = None  # the first rows' likelihood, exact flag

    def put(self, first_row: int, part: AlgorithmResults) -> None:
        """Copy ``part`` (rows ``first_row ..``) into place.

        Raises:
            ValueError: another algorithm's table, rows outside the table or already put, or a
                tree with more nodes than its jet can have (naming the row and jet).
        """
        if part.algorithm != self.algorithm:
            raise ValueError(f"results of {part.algorithm!r} put into the table of "
                             f"{self.algorithm!r}")
        a, b = int(first_row), int(first_row) + len(part)
        if a < 0 or b > self._filled.shape[0] or self._filled[a:b].any():
            raise ValueError(f"rows {a}..{b - 1} of {self.algorithm!r}: outside the table's "
                             f"{self._filled.shape[0]} rows or already put")
        nodes = np.diff(part.node_offsets)
        over = np.flatnonzero(nodes > np.diff(self._room[a:b + 1]))
        if over.size:
            k = int(over[0])
            raise ValueError(
                f"results of {self.algorithm!r}, jet {int(part.jet_id[k])} (row {a + k}): a tree "
                f"of {int(nodes[k])} nodes, more than the "
                f"{int(self._room[a + k + 1] - self._room[a + k])} of a binary tree over the "
                "jet's leaves")
        for name, _ in _ROW_COLUMNS:
            self._columns[name][a:b] = getattr(part, name)
        for name, values in part.counters.items():
            if name not in self._counters:
                self._counters[name] = np.full(self._filled.shape[0], np.nan)
            self._counters[name][a:b] = values
        start, used = int(self._room[a]), int(part.node_offsets[-1])
        self._children[start:start + used] = part.children
        self._leaf_of_node[start:start + used] = part.leaf_of_node
        self._nodes[a:b] = nodes
        self._filled[a:b] = True
        self._chunks.append((a, b - a))
        if self._first is None or a < self._first[0]:
            self._first = (a, part.likelihood, part.exact_method)

    def finish(self) -> AlgorithmResults:
        """The whole table (every row must have been put); the assembler is spent.

        Raises:
            ValueError: rows never put.
        """
        missing = np.flatnonzero(~self._filled)
        if missing.size:
            raise ValueError(f"results of {self.algorithm!r}: {missing.size} rows never put "
                             f"(the first is row {int(missing[0])})")
        offsets = np.zeros(self._nodes.shape[0] + 1, dtype=np.int64)
        np.cumsum(self._nodes, out=offsets[1:])
        # close up the room left by smaller trees, chunk by chunk in row order: a chunk only moves
        # towards the start, never over rows still to move
        for a, rows in sorted(self._chunks):
            src, dst, used = int(self._room[a]), int(offsets[a]), int(offsets[a + rows] - offsets[a])
            if src != dst and used:
                self._children[dst:dst + used] = self._children[src:src + used]
                self._leaf_of_node[dst:dst + used] = self._leaf_of_node[src:src + used]
        total = int(offsets[-1])
        # shrunk in place (realloc), not copied
        self._children.resize((total, 2), refcheck=False)
        self._leaf_of_node.resize(total, refcheck=False)
        first = self._first or (0, "symmetric", False)
        table = AlgorithmResults(
            self.algorithm, node_offsets=offsets, children=self._children,
            leaf_of_node=self._leaf_of_node, counters=self._counters, likelihood=first[1],
            exact_method=first[2], **self._columns,
        )
        self._columns, self._counters = {}, {}
        return table


def _numeric(v: Any) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating, bool, np.bool_))


def _num(v: Any) -> float:
    if v is None:
        return math.nan
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def _opt(v: float) -> float | None:
    return None if np.isnan(v) else float(v)


def _opt_count(v: float) -> int | float | None:
    if np.isnan(v):
        return None
    return int(v) if float(v).is_integer() and abs(v) < 2**53 else float(v)


def _counter_value(v: float) -> int | float:
    return int(v) if float(v).is_integer() and abs(v) < 2**53 else float(v)
