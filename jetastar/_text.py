"""Columns of text between numpy and awkward, fast: object arrays of ``str`` to awkward arrays of
strings (each distinct value encoded once, the bytes gathered with numpy) and back (each run of
equal strings decoded once). ``ak.Array(list)`` and ``ak.to_list`` look at every element; the text
columns of results tables (statuses, labels, options, messages) are a few values repeated.

Example:
    >>> import numpy as np
    >>> text = awkward_strings(np.array(["ok", "ok", "budget"], dtype=object))
    >>> str_array(text).tolist()
    ['ok', 'ok', 'budget']
    >>> str_array(awkward_strings(Repeated("kt", 2))).tolist()
    ['kt', 'kt']
    >>> column = shared_text(np.array(["ok", "budget", "ok"]))
    >>> column.tolist(), column[0] is column[2]
    (['ok', 'budget', 'ok'], True)
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

__all__ = ["Repeated", "awkward_strings", "distinct_texts", "shared_text", "str_array", "text_column"]


def text_column(n: int, value: str) -> np.ndarray:
    """``n`` rows of one ``str``, as an object array holding that one object ``n`` times.

    ``np.full(n, value, dtype=object)`` makes a new ``str`` per row (numpy casts the value through a
    unicode array): ~50 bytes more per row, and every consumer that hashes the rows hashes each.

    Example:
        >>> column = text_column(3, "ok")
        >>> column.tolist(), column[0] is column[2]
        (['ok', 'ok', 'ok'], True)
    """
    out = np.empty(n, dtype=object)
    out.fill(str(value))
    return out


def shared_text(values: np.ndarray) -> np.ndarray:
    """A numpy array of strings (``U``) as a 1-d object array of ``str``, one object per distinct
    value (``astype(object)`` makes a ``str`` per row: for a results table's statuses, 51 bytes a
    row where a few values repeat)."""
    flat = np.asarray(values).ravel()
    if flat.shape[0] == 0:
        return np.empty(0, dtype=object)
    if (flat == flat[0]).all():
        return text_column(flat.shape[0], str(flat[0]))
    unique, which = np.unique(flat, return_inverse=True)
    return unique.astype(object)[which.ravel()]


def distinct_texts(values: Any) -> tuple[list[Any], dict[Any, None]]:
    """The values as a list and their distinct values in order of appearance (a ``dict``: a
    column of a results table repeats a few, each to be converted once). Values that are not all
    ``str`` are replaced by ``str`` of each first: ``1``, ``1.0`` and ``True`` are equal keys but
    different texts.

    Example:
        >>> distinct_texts(["ok", "ok", "budget"])
        (['ok', 'ok', 'budget'], {'ok': None, 'budget': None})
        >>> list(distinct_texts([1, 1.0, True])[1])
        ['1', '1.0', 'True']
    """
    items = values.tolist() if isinstance(values, np.ndarray) else list(values)
    distinct = dict.fromkeys(items)
    if not all(type(k) is str for k in distinct):
        items = [str(v) for v in items]
        distinct = dict.fromkeys(items)
    return items, distinct


def awkward_strings(values: Any) -> Any:
    """An awkward array of strings from Python values (``str`` of each), built from their UTF-8
    bytes at once (``ak.Array`` of a list looks at every element: seconds per 100 000). Each
    distinct value is encoded once; the rows are gathered from those bytes with numpy (the columns
    of a results table repeat a few values: statuses, options, empty messages)."""
    if isinstance(values, Repeated):
        value = str(values.value).encode("utf-8")
        offsets = np.arange(values.n + 1, dtype=np.int64) * len(value)
        chars = np.tile(np.frombuffer(value, np.uint8), values.n)
        return _string_array(offsets, chars)
    items, distinct = distinct_texts(values)
    index = {k: i for i, k in enumerate(distinct)}
    codes = np.fromiter(map(index.__getitem__, items), np.int64, len(items))
    encoded = [k.encode("utf-8") for k in index]
    sizes = np.fromiter(map(len, encoded), np.int64, len(encoded))
    starts = np.zeros(len(encoded), dtype=np.int64)
    np.cumsum(sizes[:-1], out=starts[1:])
    row_sizes = sizes[codes]
    offsets = np.zeros(codes.shape[0] + 1, dtype=np.int64)
    np.cumsum(row_sizes, out=offsets[1:])
    # byte k of the output is byte (start of its row's value) + (k - offset of its row) of the pool
    where = np.repeat(starts[codes] - offsets[:-1], row_sizes) + np.arange(offsets[-1])
    chars = np.frombuffer(b"".join(encoded), np.uint8)[where]
    return _string_array(offsets, chars)


class Repeated(NamedTuple):
    """``n`` rows of one ``value`` (for :func:`awkward_strings`)."""

    value: Any
    n: int


def _string_array(offsets: np.ndarray, chars: np.ndarray) -> Any:
    import awkward as ak

    return ak.Array(ak.contents.ListOffsetArray(
        ak.index.Index64(offsets),
        ak.contents.NumpyArray(chars, parameters={"__array__": "char"}),
        parameters={"__array__": "string"},
    ))


def str_array(arr: Any) -> np.ndarray:
    """The strings of an awkward array of strings, as an object array of ``str``.

    Each run of equal consecutive strings is decoded once (``ak.to_list`` converts element by
    element): the ``label`` and ``status`` columns of a results tree are long runs, so a block of
    200 000 rows costs a few ms, not a decode per row.
    """
    import awkward as ak

    layout = ak.to_layout(ak.to_packed(arr))
    if not (isinstance(layout, ak.contents.ListOffsetArray)
            and layout.parameter("__array__") == "string"):
        out = np.empty(len(arr), dtype=object)
        out[:] = ak.to_list(arr)
        return out
    offsets = np.asarray(layout.offsets, dtype=np.int64)
    data = np.asarray(layout.content.data).view(np.uint8)
    n = offsets.shape[0] - 1
    starts, lengths = offsets[:-1], np.diff(offsets)
    same = np.zeros(n, dtype=bool)  # row i equals row i - 1
    change = np.flatnonzero(lengths[1:] != lengths[:-1]) + 1
    if n and change.shape[0] < _MAX_RUNS:
        _same_in_runs(data, starts, lengths, np.r_[0, change], np.r_[change, n], same)
    elif n:
        _same_by_gather(data, starts, lengths, same)
    heads = np.flatnonzero(~same)
    raw = data.tobytes()
    decoded: dict[bytes, str] = {}
    values = []
    for i in heads.tolist():
        text = raw[offsets[i]:offsets[i + 1]]
        value = decoded.get(text)
        if value is None:
            value = decoded[text] = text.decode("utf-8", "surrogateescape")
        values.append(value)
    unique = np.empty(len(values), dtype=object)
    unique[:] = values
    return np.repeat(unique, np.diff(np.append(heads, n)))


#: strings of one length in a row are compared as one 2-D block (fewer runs than this), else
#: byte by byte through gathered indices
_MAX_RUNS = 256
#: bytes compared at a time
_BLOCK_BYTES = 1 << 22


def _same_in_runs(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray,
                  run_starts: np.ndarray, run_ends: np.ndarray, same: np.ndarray) -> None:
    """``same[i]`` (row ``i`` equals row ``i - 1``) within each run of rows of one length: such
    rows lie one after the other in ``data``, a ``(rows, length)`` block compared row by row."""
    for a, b in zip(run_starts.tolist(), run_ends.tolist(), strict=True):
        size = int(lengths[a])
        if b - a < 2:
            continue
        if size == 0:
            same[a + 1:b] = True
            continue
        step = max(2, _BLOCK_BYTES // size)
        for lo in range(a, b - 1, step - 1):  # rows lo .. hi - 1, each against the one before
            hi = min(b, lo + step)
            block = data[starts[lo]:starts[lo] + (hi - lo) * size].reshape(hi - lo, size)
            same[lo + 1:hi] = ~(block[1:] != block[:-1]).any(axis=1)


def _same_by_gather(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray,
                    same: np.ndarray) -> None:
    """``same[i]`` for rows of the length of the row before, their bytes gathered and compared
    (at most :data:`_BLOCK_BYTES` at a time): for columns of many short runs of lengths."""
    candidates = np.flatnonzero(lengths[1:] == lengths[:-1]) + 1
    same[candidates[lengths[candidates] == 0]] = True
    candidates = candidates[lengths[candidates] > 0]
    ends = np.cumsum(lengths[candidates])
    a = 0
    while a < candidates.shape[0]:
        b = max(a + 1, int(np.searchsorted(ends, (ends[a - 1] if a else 0) + _BLOCK_BYTES)))
        rows = candidates[a:b]
        size = lengths[rows]
        first = np.cumsum(size) - size
        which = np.repeat(np.arange(rows.shape[0]), size)
        k = np.arange(int(size.sum())) - first[which]
        differs = data[starts[rows][which] + k] != data[starts[rows - 1][which] + k]
        same[rows] = np.add.reduceat(differs, first) == 0
        a = b
