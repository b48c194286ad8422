"""Tree observables of a results file, written as a friend tree (``jetastar observables``).

Example:
    >>> import os, tempfile
    >>> from jetastar.clustering import greedy
    >>> from jetastar.ginkgo import ShowerParams, generate
    >>> from jetastar import io
    >>> jets = generate(3, ShowerParams.qcd(), seed=1)
    >>> d = tempfile.mkdtemp()
    >>> io.write(os.path.join(d, "r.h5"), jets, {"greedy": [greedy(j) for j in jets]})
    >>> io.write_observables(os.path.join(d, "obs.root"), os.path.join(d, "r.h5"))
    ['greedy', 'truth']
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._atomic import atomic_path
from ..observables import tree_observables
from ._by_entry import column_prefix
from ._common import provenance
from .dispatch import read, read_results
from .formats import file_format

__all__ = ["OBSERVABLES_SCHEMA_VERSION", "write_observables"]

#: schema version of files written by :func:`write_observables`
OBSERVABLES_SCHEMA_VERSION = 1


def write_observables(
    path: str | os.PathLike[str],
    results: str | os.PathLike[str],
    *,
    algorithms: Sequence[str] | None = None,
    truth: bool = True,
    z_cut: float = 0.1,
    beta: float = 0.0,
    r0: float = 1.0,
    command: str | None = None,
) -> list[str]:
    """Compute :func:`tree_observables` for every algorithm of a results file and write them as a
    friend tree: one entry per jet, in the order of the file's jets (and of its ``results`` /
    ``clusters`` rows).

    ROOT (``.root``): tree ``observables`` with ``jet_id`` and, per label ``L`` (the algorithm
    name with non-alphanumeric characters replaced by ``_``; ``truth`` for the truth trees),
    branches ``L_<field>`` for the scalar fields and ``L_lund_delta_r[nL_lund]`` etc. HDF5
    (``.h5``): group ``/observables`` with ``jet_id`` and ``/observables/<L>/<field>`` datasets,
    the Lund lists as ``lund_offsets`` plus flat ``lund_delta_r``, ``lund_kt``, ``lund_z``. Both
    carry the schema version, the soft-drop settings and provenance; the file is written
    atomically.

    Args:
        path: the output file.
        results: a results file written by ``jetastar cluster`` / ``run``.
        algorithms: which results (default: all).
        truth: also the truth trees, when the jets have them.
        z_cut, beta, r0: soft-drop settings.
        command: the command line, for provenance.

    Returns:
        The labels written.
    """
    import awkward as ak

    fmt = file_format(path, sniff=False)
    if fmt not in ("hdf5", "root"):
        raise ValueError(f"{path}: observables are written to .h5 or .root files")
    jets = read(results, validate=False)
    tables = read_results(results)
    names = list(tables) if algorithms is None else list(algorithms)
    for name in names:
        if name not in tables:
            raise ValueError(f"{results}: no results for {name!r}; it has {', '.join(tables)}")
    per: dict[str, Any] = {}
    for name in names:
        per[column_prefix(name)] = tree_observables(jets, tables[name], z_cut=z_cut, beta=beta,
                                                    r0=r0)
    if truth and jets.children.shape[0] and "truth" not in per:
        per["truth"] = tree_observables(jets, None, z_cut=z_cut, beta=beta, r0=r0)
    meta = {
        **provenance(command=command), "schema_version": OBSERVABLES_SCHEMA_VERSION,
        "content": "jetastar tree observables", "results_file": str(results),
        "soft_drop": {"z_cut": z_cut, "beta": beta, "r0": r0}, "labels": list(per),
    }
    jet_id = np.asarray(jets.jet_id, dtype=np.int64)
    scalars = [f for f in ak.fields(next(iter(per.values()))) if not f.startswith("lund_")] \
        if per else []
    with atomic_path(path) as tmp:
        if fmt == "root":
            import uproot

            branches: dict[str, Any] = {"jet_id": jet_id}
            for label, rec in per.items():
                for f in scalars:
                    branches[f"{label}_{f}"] = ak.to_numpy(rec[f])
                branches[f"{label}_lund"] = ak.zip(
                    {"delta_r": rec.lund_delta_r, "kt": rec.lund_kt, "z": rec.lund_z})
            with uproot.recreate(tmp) as f:
                f["meta"] = json.dumps(meta, default=str)
                types = {k: (v.type.content if isinstance(v, ak.Array) else np.asarray(v).dtype)
                         for k, v in branches.items()}
                tree = f.mktree("observables", types,
                                title="jetastar tree observables, one entry per jet")
                if len(jet_id):
                    tree.extend(branches)
        else:
            import h5py

            with h5py.File(tmp, "w") as f:
                for k, v in meta.items():
                    f.attrs[k] = v if isinstance(v, (int, float, str)) else json.dumps(v)
                g = f.create_group("observables")
                g.create_dataset("jet_id", data=jet_id)
                for label, rec in per.items():
                    sub = g.create_group(label)
                    for fld in scalars:
                        sub.create_dataset(fld, data=ak.to_numpy(rec[fld]))
                    counts = ak.to_numpy(ak.num(rec.lund_delta_r)).astype(np.int64)
                    sub.create_dataset("lund_offsets", data=np.concatenate([[0], np.cumsum(counts)]))
                    for fld in ("lund_delta_r", "lund_kt", "lund_z"):
                        sub.create_dataset(fld, data=ak.to_numpy(ak.flatten(rec[fld])))
    return list(per)
