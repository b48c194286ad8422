"""Numeric HDF5 datasets written as whole compressed chunks (libdeflate), for :mod:`.hdf5`.

jetastar's HDF5 arrays are chunked and gzip-compressed with the shuffle filter (``schema.md``).
HDF5 would compress every chunk with its own zlib while holding Python's interpreter lock; here each
chunk is shuffled with numpy, compressed with libdeflate (the ``deflate`` package, which ROOT
outputs use as well: about twice as fast at the same level, and it releases the lock, so a jets
copy beside the clustering no longer stalls it) and stored with ``write_direct_chunk``. The file is
the same to every reader: the dataset declares the same filters, and a chunk is the zlib stream of
the shuffled bytes, as HDF5's deflate filter writes it. Text (fixed-width bytes, variable-length
strings) keeps h5py's own path. :class:`ChunkReader` reads rows of such datasets back the same way
(raw chunks, libdeflate, numpy), whoever wrote them; other layouts go through h5py.

Example:
    >>> import os, tempfile
    >>> import h5py
    >>> path = os.path.join(tempfile.mkdtemp(), "x.h5")
    >>> with h5py.File(path, "w") as f:
    ...     appends = ChunkedAppends()
    ...     for part in np.array_split(np.arange(40_000.0), 7):
    ...         appends.append(f, "x", part)
    ...     appends.finish()
    ...     _ = write_whole(f, "y", np.arange(5))
    >>> with h5py.File(path) as f:
    ...     bool(np.array_equal(f["x"][:], np.arange(40_000.0))), f["x"].compression, f["y"][:].tolist()
    (True, 'gzip', [0, 1, 2, 3, 4])
"""

from __future__ import annotations

import concurrent.futures as cf
import os
import threading
from collections import deque
from typing import Any

import deflate
import numpy as np

__all__ = [
    "CHUNK_ROWS", "LEVEL", "ChunkReader", "ChunkedAppends", "compressed_chunk", "direct",
    "new_dataset", "write_whole",
]

#: rows per chunk of a dataset (schema.md: at most 16384 elements per chunk)
CHUNK_ROWS = 16384
#: the gzip level the datasets declare and their chunks are compressed with
LEVEL = 4


def direct(arr: np.ndarray) -> bool:
    """Whether ``arr`` goes through the direct-chunk path: numeric or boolean, with rows."""
    return arr.dtype.kind in "fiub" and arr.ndim >= 1 and arr.shape[0] > 0


def _native(data: Any) -> np.ndarray:
    """``data`` as a C-contiguous array in this machine's byte order (new datasets are native;
    :func:`compressed_chunk` writes each chunk in the byte order its dataset declares)."""
    arr = np.asarray(data)
    return np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("="))


def compressed_chunk(block: np.ndarray, rows: int, dtype: Any = None) -> bytes:
    """The stored bytes of one chunk of ``rows`` rows holding ``block`` (padded with zeros) in a
    dataset of ``dtype`` (default: the block's; its byte order is the file's): the shuffle
    filter's byte planes, then zlib at :data:`LEVEL`."""
    dtype = block.dtype if dtype is None else np.dtype(dtype)
    if block.shape[0] < rows:
        pad = np.zeros((rows - block.shape[0], *block.shape[1:]), dtype=block.dtype)
        block = np.concatenate([block, pad])  # (numpy returns it in native byte order)
    data = np.ascontiguousarray(block, dtype=dtype)
    planes = data.view(np.uint8).reshape(-1, dtype.itemsize)
    return deflate.zlib_compress(planes.T.tobytes() if planes.shape[1] > 1 else planes.tobytes(),
                                 LEVEL)


def new_dataset(group: Any, name: str, arr: np.ndarray, rows: int, chunk_rows: int,
                resizable: bool) -> Any:
    """A new dataset ``group[name]`` of ``rows`` rows shaped and typed as ``arr``'s, in the
    layout of every jetastar array (``chunk_rows``-row chunks, gzip at :data:`LEVEL` with the
    shuffle filter); ``resizable``: along its first axis."""
    rest = arr.shape[1:]
    return group.create_dataset(
        name, shape=(rows, *rest), maxshape=(None, *rest) if resizable else None, dtype=arr.dtype,
        chunks=(chunk_rows, *rest), compression="gzip", compression_opts=LEVEL, shuffle=True,
    )


#: threads that compress chunks (libdeflate releases the interpreter lock)
_THREADS = 2
#: the pool of this process, made on first use
_POOL: list[cf.ThreadPoolExecutor] = []
_POOL_LOCK = [threading.Lock()]


def _pool() -> cf.ThreadPoolExecutor:
    with _POOL_LOCK[0]:  # writers on two threads (a jets copy, the merge) share it
        if not _POOL:
            _POOL.append(cf.ThreadPoolExecutor(_THREADS, thread_name_prefix="jetastar-deflate"))
        return _POOL[0]


def _forget_pool() -> None:
    """In a forked child: the parent's threads (and perhaps a held lock) did not come along."""
    _POOL.clear()
    _POOL_LOCK[0] = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


class _Stores:
    """Chunks compressed on the pool, at most ``2 * _THREADS`` at a time, and stored by the
    calling thread (every h5py call stays on it), in the order they were given."""

    def __init__(self) -> None:
        self._queue: deque[tuple[Any, tuple[int, ...], cf.Future]] = deque()

    def put(self, ds: Any, start: int, arr: np.ndarray, chunk_rows: int) -> None:
        """Chunks of ``arr`` for rows ``start, start + chunk_rows, ...`` (``start`` on a chunk
        boundary; the last one padded)."""
        tail = (0,) * (arr.ndim - 1)
        for a in range(0, arr.shape[0], chunk_rows):
            self._queue.append((ds, (start + a, *tail), _pool().submit(
                compressed_chunk, arr[a:a + chunk_rows], chunk_rows, ds.dtype)))
            while len(self._queue) > 2 * _THREADS:
                self._store_first()

    def _store_first(self) -> None:
        ds, offset, chunk = self._queue.popleft()
        ds.id.write_direct_chunk(offset, chunk.result())

    def drain(self) -> None:
        """Store every chunk given so far."""
        while self._queue:
            self._store_first()


def write_whole(group: Any, name: str, data: Any) -> Any:
    """A new dataset holding ``data`` (numeric, with rows), chunked by up to :data:`CHUNK_ROWS`
    rows, gzip + shuffle."""
    arr = _native(data)
    chunk_rows = min(arr.shape[0], CHUNK_ROWS)
    ds = new_dataset(group, name, arr, arr.shape[0], chunk_rows, False)
    stores = _Stores()
    stores.put(ds, 0, arr, chunk_rows)
    stores.drain()
    return ds


class ChunkedAppends:
    """Appends to resizable datasets, stored a whole chunk at a time: the rows short of a full
    chunk wait (at most one chunk per dataset) until more come or :meth:`finish` writes them.

    A dataset's shape always counts every row appended; its values are complete once
    :meth:`finish` has run (call it before the file closes). Chunks are compressed on a small
    thread pool while the caller goes on.
    """

    def __init__(self) -> None:
        #: dataset path -> [dataset, rows given to the stores, waiting arrays, rows waiting]
        self._open: dict[str, list[Any]] = {}
        self._stores = _Stores()

    def append(self, group: Any, name: str, data: Any) -> None:
        """Append the rows ``data`` (numeric; see :func:`direct`) to ``group[name]`` (created
        on first use with :data:`CHUNK_ROWS`-row chunks)."""
        arr = _native(data)
        ds = group.get(name)
        if ds is None:
            ds = new_dataset(group, name, arr, 0, CHUNK_ROWS, True)
        state = self._open.get(ds.name)
        if state is None:
            state = self._open[ds.name] = [ds, 0, [], 0]
        if arr.shape[0] == 0:
            return
        state[2].append(arr)
        state[3] += arr.shape[0]
        ds.resize(state[1] + state[3], axis=0)
        if state[3] >= CHUNK_ROWS:
            waiting = np.concatenate(state[2]) if len(state[2]) > 1 else state[2][0]
            full = state[3] - state[3] % CHUNK_ROWS
            self._stores.put(ds, state[1], waiting[:full], CHUNK_ROWS)
            state[1] += full
            state[2] = [waiting[full:]] if full < state[3] else []
            state[3] -= full

    def finish(self) -> None:
        """Store every dataset's waiting rows (its last, partial chunk)."""
        for state in self._open.values():
            if state[3]:
                waiting = np.concatenate(state[2]) if len(state[2]) > 1 else state[2][0]
                self._stores.put(state[0], state[1], waiting, CHUNK_ROWS)
                state[1] += state[3]
                state[2], state[3] = [], 0
        self._stores.drain()


class ChunkReader:
    """Rows of numeric gzip (+ shuffle) datasets chunked along their first axis, read as raw
    chunks (``read_direct_chunk``), decompressed with libdeflate (outside the interpreter lock)
    and unshuffled with numpy: the values h5py would return, about twice as fast. With
    ``threads`` > 1, a read of several chunks decompresses them on a pool of that many threads
    (started on the first such read; libdeflate and numpy's copies release the interpreter lock),
    ``16 * threads`` chunks at a time, each unshuffled straight into its rows of the result. The
    last chunk read of each dataset is kept, so consecutive slices decompress a boundary chunk
    once.

    :meth:`rows` returns ``None`` where it cannot read a dataset this way (another layout or
    filter, a chunk stored without its filters or not at all); the caller then reads it with h5py.

    Args:
        threads: threads to decompress the chunks of one read on.
    """

    def __init__(self, threads: int = 1) -> None:
        #: dataset path -> whether it has a layout read here
        self._layout: dict[str, bool] = {}
        #: dataset path -> (chunk index, its rows)
        self._last: dict[str, tuple[int, np.ndarray]] = {}
        self._threads = max(1, int(threads))
        self._pool: cf.ThreadPoolExecutor | None = None

    def close(self) -> None:
        """Shut the thread pool down (waiting for its threads)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def _readable(self, ds: Any) -> bool:
        ok = self._layout.get(ds.name)
        if ok is None:
            ok = False
            chunks = ds.chunks
            if chunks is not None and ds.dtype.kind in "fiub" and ds.ndim >= 1 and \
                    tuple(chunks[1:]) == tuple(ds.shape[1:]):
                import h5py

                plist = ds.id.get_create_plist()
                filters = [plist.get_filter(i)[0] for i in range(plist.get_nfilters())]
                ok = filters in ([h5py.h5z.FILTER_SHUFFLE, h5py.h5z.FILTER_DEFLATE],
                                 [h5py.h5z.FILTER_DEFLATE])
            self._layout[ds.name] = ok
        return ok

    def _map(self, func: Any, *args: list[Any]) -> Any:
        """``map(func, *args)``: on the pool when there are several calls."""
        if self._threads == 1 or len(args[0]) < 2:
            return map(func, *args)
        if self._pool is None:
            self._pool = cf.ThreadPoolExecutor(self._threads, thread_name_prefix="jetastar-inflate")
        return self._pool.map(func, *args)

    @staticmethod
    def _raw(ds: Any, index: int) -> bytes | None:
        """Chunk ``index`` of ``ds`` as stored (``None``: not stored, or a filter skipped)."""
        try:
            mask, raw = ds.id.read_direct_chunk((index * ds.chunks[0], *(0,) * (ds.ndim - 1)))
        except (OSError, RuntimeError, KeyError, ValueError):  # e.g. a chunk never written
            return None
        return None if mask != 0 else raw

    def rows(self, ds: Any, start: int, stop: int) -> np.ndarray | None:
        """``ds[start:stop]`` (``0 <= start <= stop <= len(ds)``), or ``None`` (see above).

        Raises:
            deflate.DeflateError: a chunk that does not decompress (a corrupt file).
        """
        if not self._readable(ds):
            return None
        rows = ds.chunks[0]
        out = np.empty((stop - start, *ds.shape[1:]), dtype=ds.dtype)
        shape = (rows, *ds.shape[1:])
        unshuffle = ds.dtype.itemsize > 1 and ds.shuffle
        indices = list(range(start // rows, (stop - 1) // rows + 1 if stop > start else 0))
        last = self._last.get(ds.name)

        def place(index: int, raw: bytes | None) -> np.ndarray | None:
            """Chunk ``index`` into its rows of ``out``: decoded in place when all its rows are
            wanted (not the last, which is kept), else through a block (returned)."""
            a, b = max(start, index * rows), min(stop, (index + 1) * rows)
            if raw is None:  # the kept chunk
                block = last[1]
            elif b - a == rows and index != indices[-1]:
                _decoded_chunk(raw, ds.dtype, shape, unshuffle, out[a - start:b - start])
                return None
            else:
                block = _decoded_chunk(raw, ds.dtype, shape, unshuffle)
            out[a - start:b - start] = block[a - index * rows:b - index * rows]
            return block

        window = 16 * self._threads  # chunks read, then decoded, at a time
        for w in range(0, len(indices), window):
            todo = indices[w:w + window]
            raws = [None if last is not None and last[0] == i else self._raw(ds, i)
                    for i in todo]
            if any(raw is None and (last is None or last[0] != i)
                   for i, raw in zip(todo, raws, strict=True)):
                return None
            blocks = list(self._map(place, todo, raws))
            if blocks[-1] is not None:
                last = (todo[-1], blocks[-1])
        if last is not None:
            self._last[ds.name] = last
        return out


def _decoded_chunk(raw: bytes, dtype: np.dtype, shape: tuple[int, ...], unshuffle: bool,
                   into: np.ndarray | None = None) -> np.ndarray:
    """A stored chunk's values: libdeflate, then the shuffle filter's byte planes put back, into
    ``into`` (an array of ``shape`` and ``dtype``) or a new array."""
    n_items = int(np.prod(shape, dtype=np.int64))
    planes = np.frombuffer(deflate.zlib_decompress(raw, n_items * dtype.itemsize), dtype=np.uint8)
    if into is None:
        into = np.empty(shape, dtype=dtype)
    item_bytes = into.reshape(-1).view(np.uint8).reshape(n_items, dtype.itemsize)
    item_bytes[...] = planes.reshape(dtype.itemsize, n_items).T if unshuffle else \
        planes.reshape(n_items, dtype.itemsize)
    return into
