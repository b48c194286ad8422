"""Import jets pickled by the reference Ginkgo generator — without torch and without running code.

The reference generator pickles (protocol 2) a list of jet dictionaries (keys ``tree``, ``content``,
``leaves``, ``deltas``, ``draws``, ``Lambda``, ``LambdaRoot``, ``Delta_0``, ``pt_cut``, ``M_Hard``,
``logLH``, ...). Some values are torch tensors, so ``pickle.load`` would need torch — and a pickle can
run arbitrary code. :class:`RestrictedUnpickler` instead allows only the few globals such a file needs
and replaces the torch ones by torch-free re-implementations:

* numpy: ``numpy.core.multiarray._reconstruct`` / ``scalar`` (also under ``numpy._core``),
  ``numpy.ndarray``, ``numpy.dtype``, and for arrays pickled with protocol 5
  ``numpy.core.numeric._frombuffer`` (a re-implementation: the bytes read as the dtype and shape);
* ``_codecs.encode`` (only for ``latin1`` text -> bytes, how protocol 2 stores ``bytes``);
* ``collections.OrderedDict`` (torch's empty backward-hook dictionaries);
* ``torch._utils._rebuild_tensor_v2`` -> a numpy array view of the storage (copied);
* ``torch.storage._load_from_bytes`` -> a parser of torch's legacy (non-zip) serialisation of one
  storage: three header pickles, a pickle of the storage with a persistent id
  ``("storage", torch.<Type>Storage, key, location, numel, view_metadata)``, a pickle of the key list,
  then per key an int64 element count and the raw little-endian data;
* inside that, ``torch.<Type>Storage`` classes (Float, Double, Half, BFloat16, Long, Int, Short, Char,
  Byte, Bool) as dtype markers.

Any other global raises :class:`UnsafePickleError` naming it. Tensors become numpy arrays (0-d for
scalars such as ``Lambda``).

Example:
    >>> from jetastar.io.legacy import import_legacy_pickle
    >>> jets = import_legacy_pickle("tests/data/legacy_ginkgo_W_sample.pkl")  # doctest: +SKIP
    >>> len(jets)  # doctest: +SKIP
    12
"""

from __future__ import annotations

import collections
import io
import math
import os
import pickle
import struct
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..errors import InvalidJetError, UnsafePickleError
from ..ginkgo.params import ShowerParams
from ..jet import Jet, JetCollection
from ..tree import Tree
from ._common import (
    FileFormatError,
    check_exists,
    get_extras,
    jet_slice,
    normalise_selection,
    set_extras,
    take_with_extras,
)
from .formats import Format, register_format

__all__ = ["RestrictedUnpickler", "UnsafePickleError", "import_legacy_pickle", "load_legacy_pickle"]


#: A tensor larger than its storage (broadcast, zero strides) is copied only up to this size.
_MAX_VIEW_BYTES = 16 << 20


# ---------------------------------------------------------------------- torch-free replacements
_STORAGE_DTYPES = {
    "FloatStorage": np.float32,
    "DoubleStorage": np.float64,
    "HalfStorage": np.float16,
    "LongStorage": np.int64,
    "IntStorage": np.int32,
    "ShortStorage": np.int16,
    "CharStorage": np.int8,
    "ByteStorage": np.uint8,
    "BoolStorage": np.bool_,
    "BFloat16Storage": "bfloat16",
}


class _StorageType:
    """Marker standing in for ``torch.<Type>Storage`` (only its element type matters)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.dtype = _STORAGE_DTYPES[name]


class _Storage:
    """A torch storage decoded to a flat numpy array."""

    def __init__(self, data: np.ndarray) -> None:
        self.data = data


def _codecs_encode(text: Any, encoding: str = "utf-8", errors: str = "strict") -> bytes:
    if encoding not in ("latin1", "latin-1", "iso-8859-1") or not isinstance(text, str):
        raise UnsafePickleError(f"_codecs.encode is only allowed for latin1 text, got {encoding!r}")
    return text.encode("latin1", errors)


def _decode_bfloat16(raw: bytes) -> np.ndarray:
    halves = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
    return halves.view(np.float32)


class _InnerUnpickler(pickle.Unpickler):
    """Unpickler for the storage record inside torch's legacy serialisation."""

    def __init__(self, fh: Any) -> None:
        super().__init__(fh, encoding="latin1")
        self.storages: dict[str, tuple[_StorageType, int]] = {}

    def find_class(self, module: str, name: str) -> Any:
        if module == "torch" and name in _STORAGE_DTYPES:
            return _StorageType(name)
        raise UnsafePickleError(f"global '{module}.{name}' is not allowed in a torch storage record")

    def persistent_load(self, pid: Any) -> Any:
        if not (isinstance(pid, tuple) and len(pid) >= 5 and pid[0] == "storage"):
            raise UnsafePickleError(f"unexpected persistent id {pid!r:.80} in a torch storage record")
        storage_type, key, _location, numel = pid[1], str(pid[2]), pid[3], int(pid[4])
        view = pid[5] if len(pid) > 5 else None
        if not isinstance(storage_type, _StorageType):
            raise UnsafePickleError(f"unexpected storage type {storage_type!r:.80}")
        if view is not None:
            raise FileFormatError("storage views of the oldest torch format are not supported")
        self.storages[key] = (storage_type, numel)
        return key


def _load_storage_from_bytes(data: bytes) -> _Storage:
    """Torch-free version of ``torch.storage._load_from_bytes`` for torch's legacy format."""
    if not isinstance(data, (bytes, bytearray)):
        raise UnsafePickleError("a torch storage record must be bytes")
    fh = io.BytesIO(bytes(data))
    try:
        magic = _InnerUnpickler(fh).load()
        protocol = _InnerUnpickler(fh).load()
        sys_info = _InnerUnpickler(fh).load()
    except (pickle.UnpicklingError, EOFError, ValueError) as exc:
        raise FileFormatError(f"unreadable torch storage header ({exc})") from None
    if magic != 0x1950A86A20F9469CFC6C or protocol != 1001:
        raise FileFormatError("not a torch legacy storage record (wrong magic or protocol)")
    if isinstance(sys_info, dict) and not sys_info.get("little_endian", True):
        raise FileFormatError("big-endian torch storages are not supported")
    inner = _InnerUnpickler(fh)
    key = inner.load()
    keys = _InnerUnpickler(fh).load()
    if not isinstance(keys, list) or key not in inner.storages:
        raise FileFormatError("malformed torch storage record")
    result = None
    for k in keys:
        (count,) = struct.unpack("<q", fh.read(8))
        stype, numel = inner.storages[str(k)]
        if count != numel:
            raise FileFormatError(f"torch storage size mismatch ({count} != {numel})")
        if stype.dtype == "bfloat16":
            arr = _decode_bfloat16(fh.read(2 * count))
        else:
            dt = np.dtype(stype.dtype).newbyteorder("<")
            raw = fh.read(dt.itemsize * count)
            if len(raw) != dt.itemsize * count:
                raise FileFormatError("truncated torch storage data")
            arr = np.frombuffer(raw, dtype=dt).astype(dt.newbyteorder("="))
        if str(k) == key:
            result = _Storage(arr)
    if result is None:
        raise FileFormatError("malformed torch storage record (data missing)")
    return result


def _rebuild_tensor_v2(
    storage: Any, storage_offset: int, size: Any, stride: Any, requires_grad: Any = False,
    backward_hooks: Any = None, metadata: Any = None,
) -> np.ndarray:
    """Torch-free ``torch._utils._rebuild_tensor_v2``: a numpy copy of the strided view."""
    if not isinstance(storage, _Storage):
        raise UnsafePickleError("a tensor must be built from a storage")
    data = storage.data
    size = tuple(int(s) for s in size)
    stride = tuple(int(s) for s in stride)
    offset = int(storage_offset)
    if len(size) != len(stride):
        raise FileFormatError("tensor size and stride differ in length")
    if size and any(s == 0 for s in size):
        return np.empty(size, dtype=data.dtype)
    numel = math.prod(size)
    if any(s < 0 for s in size) or (
            numel > max(data.shape[0], 1) and numel * data.itemsize > _MAX_VIEW_BYTES):
        raise FileFormatError(
            f"a tensor of shape {size} ({numel} values) is a view of a storage of only "
            f"{data.shape[0]} values (a zero-stride view; refusing to allocate it)"
        )
    last = offset + sum((s - 1) * st for s, st in zip(size, stride, strict=True))
    if offset < 0 or last >= data.shape[0] or any(st < 0 for st in stride):
        raise FileFormatError("tensor view lies outside its storage")
    view = np.lib.stride_tricks.as_strided(
        data[offset:], shape=size, strides=tuple(st * data.itemsize for st in stride)
    )
    return np.array(view, copy=True)


def _numpy_global(name: str) -> Any:
    from numpy._core import multiarray  # numpy >= 2

    return getattr(multiarray, name)


def _allowed() -> dict[tuple[str, str], Any]:
    try:
        reconstruct, scalar = _numpy_global("_reconstruct"), _numpy_global("scalar")
    except ImportError:  # numpy < 2
        from numpy.core import multiarray  # type: ignore[no-redef]

        reconstruct, scalar = multiarray._reconstruct, multiarray.scalar
    table: dict[tuple[str, str], Any] = {
        ("numpy", "ndarray"): np.ndarray,
        ("numpy", "dtype"): np.dtype,
        ("_codecs", "encode"): _codecs_encode,
        ("collections", "OrderedDict"): collections.OrderedDict,
        ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor_v2,
        ("torch.storage", "_load_from_bytes"): _load_storage_from_bytes,
    }
    for mod in ("numpy.core.multiarray", "numpy._core.multiarray"):
        table[(mod, "_reconstruct")] = reconstruct
        table[(mod, "scalar")] = scalar
    for mod in ("numpy.core.numeric", "numpy._core.numeric"):  # arrays pickled with protocol 5
        table[(mod, "_frombuffer")] = _frombuffer
    return table


def _frombuffer(buffer: Any, dtype: Any, shape: Any, order: str) -> np.ndarray:
    """How numpy rebuilds an array pickled with protocol 5 (``numpy._core.numeric._frombuffer``),
    without running anything else: the bytes read as ``dtype`` in ``shape``, copied."""
    if order not in ("C", "F"):
        raise FileFormatError(f"pickled array with order {order!r}")
    data = np.frombuffer(buffer, dtype=np.dtype(dtype))
    return np.array(data.reshape(tuple(int(k) for k in shape), order=order), copy=True)


class RestrictedUnpickler(pickle.Unpickler):
    """A :class:`pickle.Unpickler` that only resolves the globals legacy Ginkgo pickles need.

    Torch tensors come out as numpy arrays; any other global raises :class:`UnsafePickleError`.

    Example:
        >>> import io, pickle
        >>> RestrictedUnpickler(io.BytesIO(pickle.dumps([1, 2.0]))).load()
        [1, 2.0]
        >>> RestrictedUnpickler(io.BytesIO(pickle.dumps(print))).load()
        Traceback (most recent call last):
        ...
        jetastar.errors.UnsafePickleError: refusing global 'builtins.print' ...
    """

    _ALLOWED: dict[tuple[str, str], Any] | None = None

    def __init__(self, fh: Any) -> None:
        super().__init__(fh, encoding="latin1")
        if RestrictedUnpickler._ALLOWED is None:
            RestrictedUnpickler._ALLOWED = _allowed()

    def find_class(self, module: str, name: str) -> Any:
        allowed = self._ALLOWED or {}
        try:
            return allowed[(module, name)]
        except KeyError:
            raise UnsafePickleError(
                f"refusing global '{module}.{name}' (a legacy Ginkgo pickle only needs numpy "
                "arrays, torch tensors and OrderedDict; this pickle may not be safe to load)"
            ) from None

    def persistent_load(self, pid: Any) -> Any:
        raise UnsafePickleError(
            f"unexpected persistent id {pid!r:.80} (torch zip files are not legacy Ginkgo pickles)"
        )


def load_legacy_pickle(path: str | os.PathLike[str]) -> Any:
    """Load a legacy Ginkgo pickle with :class:`RestrictedUnpickler` (torch tensors -> numpy).

    Args:
        path: the ``.pkl`` file.

    Returns:
        The unpickled object (a list of jet dictionaries for generator output).

    Raises:
        FileNotFoundError, FileFormatError, UnsafePickleError: naming the file.
    """
    p = check_exists(path)
    with open(p, "rb") as fh:
        try:
            return RestrictedUnpickler(fh).load()
        except UnsafePickleError as exc:
            raise UnsafePickleError(f"{p}: {exc}") from None
        except FileFormatError as exc:
            raise FileFormatError(f"{p}: {exc}") from None
        except (pickle.UnpicklingError, EOFError, ValueError, TypeError, struct.error,
                IndexError, KeyError, AttributeError) as exc:
            raise FileFormatError(
                f"{p}: not a readable legacy Ginkgo pickle ({type(exc).__name__}: {exc})"
            ) from None


def _scalar(value: Any) -> float:
    return float(np.asarray(value, dtype=np.float64).reshape(()))


def _infer_type(m_hard: float, lam_root: float, lam: float) -> str:
    for name, preset in (("QCD", ShowerParams.qcd()), ("W", ShowerParams.w())):
        if (math.isclose(m_hard, preset.m_hard) and math.isclose(lam_root, preset.lam_root)
                and math.isclose(lam, preset.lam)):
            return name
    return "legacy"


def import_legacy_pickle(
    path: str | os.PathLike[str], *, jet_type: str | None = None, first_id: int = 0
) -> JetCollection:
    """Import a reference Ginkgo pickle as a :class:`~jetastar.JetCollection` (no torch needed).

    Per jet: leaves, the truth tree (pre-order ``tree`` array; leaves numbered in node order, which is
    the order of ``leaves``), every node's stored 4-vector (``content`` -> ``node_momenta``) and the
    parameters (``Lambda``, ``LambdaRoot``, ``pt_cut`` as ``t_cut``, ``Delta_0`` as ``t_root``,
    ``M_Hard`` or else ``√Delta_0`` as ``m_hard``, ``content[0]`` as the root 4-vector).

    The nominal values the reference likelihood uses are kept as extra per-node columns
    (``collection.node_columns``): ``deltas`` (nominal sampled t of internal nodes, 0 for leaves),
    ``logLH`` (the reference per-node split log-likelihood, when present) and ``draws`` (NaN for the
    root); per-jet ``collection.jet_columns["logLH_total"]``. They are written to HDF5/ROOT files too.

    Args:
        path: the pickle.
        jet_type: label for every jet; default the dictionary's ``jetType`` if any, else
            ``"QCD"``/``"W"`` when ``M_Hard``, ``LambdaRoot`` and ``Lambda`` match a preset, else
            ``"legacy"``. A ``seed`` entry becomes the jet's seed.
        first_id: id of the first jet (ids count up from it).

    Raises:
        FileFormatError: not a list of Ginkgo jet dictionaries, or an invalid jet (the message names
            the file, the jet and the field).
    """
    data = load_legacy_pickle(path)
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list) or not all(isinstance(d, dict) for d in data):
        raise FileFormatError(f"{path}: not a list of Ginkgo jet dictionaries")
    jets: list[Jet] = []
    deltas: list[np.ndarray] = []
    llh: list[np.ndarray] = []
    draws: list[np.ndarray] = []
    totals: list[float] = []
    for i, d in enumerate(data):
        jet_id = first_id + i
        try:
            jet, extra = _jet_from_dict(d, jet_id, jet_type)
        except InvalidJetError as exc:
            raise FileFormatError(f"{path}: entry {i}: {exc}") from None
        except KeyError as exc:
            raise FileFormatError(
                f"{path}: entry {i}: jet {jet_id}: missing key {exc} in the jet dictionary"
            ) from None
        except (TypeError, ValueError) as exc:
            raise FileFormatError(f"{path}: entry {i}: jet {jet_id}: {exc}") from None
        jets.append(jet)
        deltas.append(extra["deltas"])
        llh.append(extra["logLH"])
        draws.append(extra["draws"])
        totals.append(float(np.sum(extra["logLH"])))
    collection = JetCollection.from_jets(jets)
    return set_extras(
        collection,
        node={
            "deltas": np.concatenate(deltas) if deltas else np.empty(0),
            "logLH": np.concatenate(llh) if llh else np.empty(0),
            "draws": np.concatenate(draws) if draws else np.empty(0),
        },
        jet={"logLH_total": np.array(totals, dtype=np.float64)},
    )


def _jet_from_dict(d: dict[str, Any], jet_id: int, jet_type: str | None) -> tuple[Jet, dict]:
    children = np.asarray(d["tree"], dtype=np.int64)
    content = np.asarray(d["content"], dtype=np.float64)
    leaves = np.asarray(d["leaves"], dtype=np.float64)
    n_nodes = children.shape[0]
    truth = Tree.from_children(children, jet=jet_id)
    lam = _scalar(d["Lambda"])
    lam_root = _scalar(d.get("LambdaRoot", d["Lambda"]))
    t_cut = _scalar(d["pt_cut"])
    t_root = _scalar(d.get("Delta_0", d["deltas"][0]))
    m_hard = _scalar(d["M_Hard"]) if d.get("M_Hard") else math.sqrt(t_root)
    label = jet_type or (str(d["jetType"]) if d.get("jetType") else None) \
        or _infer_type(m_hard, lam_root, lam)
    seed = int(d["seed"]) if isinstance(d.get("seed"), (int, np.integer)) else None
    params = ShowerParams(
        m_hard=m_hard, lam=lam, lam_root=lam_root, t_cut=t_cut, t_root=t_root,
        root_momentum=tuple(content[0]), jet_type=label,
    )
    jet = Jet(leaves, params, truth, content, jet_id=jet_id, seed=seed, jet_type=label)
    if not np.array_equal(content[children[:, 0] < 0], leaves):
        raise InvalidJetError(
            "'leaves' differ from the leaf rows of 'content'", jet=jet_id, field="leaves"
        )
    deltas = np.asarray(d["deltas"], dtype=np.float64).ravel()
    if deltas.shape[0] != n_nodes:
        raise InvalidJetError(f"has {deltas.shape[0]} values, need {n_nodes}", jet=jet_id,
                              field="deltas")
    if "logLH" in d:
        node_llh = np.asarray(d["logLH"], dtype=np.float64).ravel()
        if node_llh.shape[0] != n_nodes:
            raise InvalidJetError(f"has {node_llh.shape[0]} values, need {n_nodes}", jet=jet_id,
                                  field="logLH")
    else:
        node_llh = np.full(n_nodes, np.nan)
    raw_draws = d.get("draws")
    node_draws = np.full(n_nodes, np.nan)
    if raw_draws is not None:
        seq = list(raw_draws)
        if len(seq) != n_nodes:
            raise InvalidJetError(f"has {len(seq)} values, need {n_nodes}", jet=jet_id,
                                  field="draws")
        for k, v in enumerate(seq):
            if v is not None:
                node_draws[k] = _scalar(v)
    return jet, {"deltas": deltas, "logLH": node_llh, "draws": node_draws}


class LegacyFormat(Format):
    """Reference Ginkgo pickles, read-only (:func:`import_legacy_pickle`), as registered with
    :mod:`jetastar.io.formats`."""

    name = "legacy"
    suffixes = (".pkl", ".pickle")
    magic = b"\x80"
    hint = ".pkl"
    read_only = "pickles are read-only (legacy import)"

    def read(self, path: str | os.PathLike[str], jets: Any = None, *,
             validate: bool = True) -> JetCollection:
        collection = import_legacy_pickle(path)
        if jets is not None:
            start, stop, take = normalise_selection(jets, len(collection))
            collection = jet_slice(collection, start, stop)
            if take is not None:
                collection = take_with_extras(collection, take)
        return collection

    def n_jets(self, path: str | os.PathLike[str]) -> int:
        return len(import_legacy_pickle(path))

    def iterate(self, path: str | os.PathLike[str], step_size: int, *,
                validate: bool = True) -> Iterator[JetCollection]:
        collection = import_legacy_pickle(path)
        for a in range(0, len(collection), step_size):
            yield jet_slice(collection, a, min(len(collection), a + step_size))

    def read_results(self, path: str | os.PathLike[str], algorithms: Any = None,
                     jets: Any = None) -> dict[str, Any]:
        raise FileFormatError(f"{path}: legacy pickles hold no jetastar clustering results")

    def info(self, path: str | os.PathLike[str], *, results: bool = True) -> dict[str, Any]:
        collection = import_legacy_pickle(path)
        types = [str(t) for t in collection.jet_type]
        node, jet = get_extras(collection)
        return {
            "path": str(path),
            "format": "legacy",
            "attrs": {"format": "legacy Ginkgo pickle (read-only import)"},
            "n_jets": len(collection),
            "n_leaves": collection.n_leaves,
            "jet_types": {t: types.count(t) for t in sorted(set(types))},
            "has_truth": int((np.diff(collection.node_offsets) > 0).sum()),
            "extra_columns": sorted([*node, *jet]),
            "results": {},
        }


register_format(LegacyFormat())
