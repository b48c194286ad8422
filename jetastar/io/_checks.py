"""Checks of a file's columns against each other and against sane sizes, before anything is read.

A corrupt or hostile file must give a one-line :class:`FileFormatError` naming the file and the
column, never a silently wrong collection (a per-jet column shorter than the offsets say, a ROOT
``nleaf`` that disagrees with the jagged leaf branches) and never a huge allocation (a few kB on
disk that claim 10⁸ leaves).

Example:
    >>> check_declared_size("x.h5", "jets/E", 10, 8, 80)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._common import FileFormatError

__all__ = [
    "MAX_EXPANSION",
    "check_counts",
    "check_declared_size",
    "check_hdf5_dataset_sizes",
    "check_hdf5_jet_columns",
]

#: Largest ratio of data size to stored size accepted for a compressed HDF5 dataset (deflate
#: cannot expand by more than about 1032; the shuffle filter does not change the size).
MAX_EXPANSION = 1100
#: Data size below which no check is made.
_SLACK_BYTES = 1 << 20

_PER_JET = ("jet_id", "seed", "n_leaves", "jet_type", "m_hard", "lam", "lam_root", "t_cut", "t_root",
            "root_E", "root_px", "root_py", "root_pz", "truth_llh_symmetric", "truth_llh_legacy")
_PER_LEAF = ("E", "px", "py", "pz")
_PER_NODE = ("left", "right", "leaf_of_node", "node_E", "node_px", "node_py", "node_pz")


def _bytes(n: int) -> str:
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("kB", 1 << 10)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n} B"


def check_declared_size(path: str, name: str, n_elements: int, itemsize: int,
                        stored_bytes: int) -> None:
    """Refuse a dataset whose data would be far larger than what the file stores for it.

    Args:
        path: the file (for the message).
        name: the dataset.
        n_elements: elements it declares.
        itemsize: bytes per element.
        stored_bytes: bytes the file holds for it (compressed chunks).

    Raises:
        FileFormatError: when ``n_elements * itemsize`` exceeds ``MAX_EXPANSION`` times the stored
            size (plus 1 MB).
    """
    need = int(n_elements) * int(itemsize)
    if need > MAX_EXPANSION * int(stored_bytes) + _SLACK_BYTES:
        raise FileFormatError(
            f"{path}: dataset '{name}' declares {int(n_elements)} values ({_bytes(need)}) but the "
            f"file holds only {_bytes(int(stored_bytes))} of data for it (corrupt file; refusing "
            "to allocate)"
        )


def check_hdf5_dataset_sizes(path: str, group: Any) -> None:
    """:func:`check_declared_size` for every dataset under an HDF5 group."""
    import h5py

    def visit(name: str, obj: Any) -> None:
        if not isinstance(obj, h5py.Dataset) or obj.shape is None or obj.dtype.kind == "O":
            return  # variable-length strings: their size is not in the shape
        try:
            stored = obj.id.get_storage_size()
        except Exception:  # (external or virtual storage: nothing to compare)
            return
        check_declared_size(path, f"{group.name.strip('/')}/{name}".strip("/"),
                            int(np.prod(obj.shape, dtype=np.float64)), obj.dtype.itemsize,
                            stored)

    group.visititems(visit)


def check_hdf5_jet_columns(path: str, jets: Any) -> int:
    """Check the ``/jets`` group of a jetastar HDF5 file; return the number of jets.

    Every column must be one-dimensional; per-jet columns have ``J`` entries, the offsets
    ``J + 1`` starting at 0, the leaf columns ``leaf_offsets[-1]`` and the node columns
    ``node_offsets[-1]`` entries; the ``n_jets`` attribute (if any) is ``J``; and no dataset
    declares far more data than the file stores.

    Raises:
        FileFormatError: naming the file and the first inconsistent column.
    """
    import h5py

    for name in ("jet_id", "leaf_offsets"):
        if not isinstance(jets.get(name), h5py.Dataset):
            raise FileFormatError(f"{path}: dataset 'jets/{name}' is missing")
    loff = jets["leaf_offsets"]
    n = loff.shape[0] - 1 if loff.ndim == 1 and loff.shape[0] >= 1 else -1

    def expect(name: str, length: int, what: str) -> None:
        ds = jets.get(name)
        if ds is None or not isinstance(ds, h5py.Dataset):
            if name in ("node_E", "node_px", "node_py", "node_pz", "truth_llh_symmetric",
                        "truth_llh_legacy"):
                return
            raise FileFormatError(f"{path}: dataset 'jets/{name}' is missing")
        if ds.shape != (length,):
            raise FileFormatError(
                f"{path}: inconsistent columns: 'jets/{name}' has shape {ds.shape}, expected "
                f"({length},) ({what})"
            )

    if n < 0:
        raise FileFormatError(f"{path}: inconsistent columns: 'jets/leaf_offsets' has shape "
                              f"{loff.shape}, expected (number of jets + 1,)")
    check_hdf5_dataset_sizes(path, jets)
    for name in _PER_JET:
        expect(name, n, f"one per jet; leaf_offsets describe {n} jets")
    for name in ("leaf_offsets", "node_offsets"):
        expect(name, n + 1, f"number of jets + 1; leaf_offsets describe {n} jets")
    ends = {}
    for name in ("leaf_offsets", "node_offsets"):
        ds = jets[name]
        first, last = (int(ds[0]), int(ds[n])) if n >= 0 else (0, 0)
        if first != 0 or last < 0:
            raise FileFormatError(
                f"{path}: inconsistent columns: 'jets/{name}' runs from {first} to {last}"
            )
        ends[name] = last
    for name in _PER_LEAF:
        expect(name, ends["leaf_offsets"], f"leaf_offsets end at {ends['leaf_offsets']}")
    for name in _PER_NODE:
        expect(name, ends["node_offsets"], f"node_offsets end at {ends['node_offsets']}")
    for sub, length, what in (("jet_extra", n, f"one per jet, {n} jets"),
                              ("node_extra", ends["node_offsets"],
                               f"node_offsets end at {ends['node_offsets']}")):
        if sub in jets:
            for k, ds in jets[sub].items():
                if getattr(ds, "shape", None) != (length,):
                    raise FileFormatError(
                        f"{path}: inconsistent columns: 'jets/{sub}/{k}' has shape "
                        f"{getattr(ds, 'shape', None)}, expected ({length},) ({what})"
                    )
    stated = jets.attrs.get("n_jets")
    if stated is not None and int(stated) != n:
        raise FileFormatError(
            f"{path}: inconsistent columns: the group says {int(stated)} jets, the columns {n}"
        )
    return n


def check_counts(path: str, what: str, counts: np.ndarray, name: str, jagged_counts: np.ndarray,
                 jagged: str, offset: int = 0) -> None:
    """Refuse a count branch that disagrees with the lengths of a jagged branch (ROOT).

    Raises:
        FileFormatError: naming the file, the first entry and both branches.
    """
    counts = np.asarray(counts, dtype=np.int64)
    jagged_counts = np.asarray(jagged_counts, dtype=np.int64)
    if counts.shape != jagged_counts.shape:
        raise FileFormatError(f"{path}: {what}: '{name}' and '{jagged}' have different lengths")
    bad = np.flatnonzero(counts != jagged_counts)
    if bad.size:
        i = int(bad[0])
        raise FileFormatError(
            f"{path}: {what}: entry {i + offset}: '{name}' is {int(counts[i])} but '{jagged}' has "
            f"{int(jagged_counts[i])} values ({bad.size} entries disagree; corrupt file)"
        )
