"""Regenerate the sample files in data/ (run from the repository root: python data/make_samples.py).

Every file is deterministic given the seeds below. The particle-level files are written with plain
uproot / h5py (not with jetastar's writers), in layouts other tools use.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import awkward as ak
import h5py
import numpy as np
import uproot
import vector

from jetastar import JetCollection, io
from jetastar.ginkgo import ShowerParams, generate

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
N_JETS = 100


def ginkgo_samples() -> None:
    """QCD and W jets with truth trees, in jetastar's HDF5 and ROOT layouts."""
    for name, params, seed in (("qcd", ShowerParams.qcd(), 1), ("w", ShowerParams.w(), 2)):
        jets = generate(N_JETS, params, seed=seed)
        attrs = {"seed": seed, "command": "python data/make_samples.py",
                 "generator": "jetastar.ginkgo.generate"}
        for ext in ("h5", "root"):
            io.write(HERE / f"ginkgo_{name}.{ext}", jets, attrs=attrs)


def legacy_pickle() -> None:
    """A pickle written by the reference Ginkgo generator (torch tensors inside; needs no torch)."""
    shutil.copyfile(ROOT / "tests" / "data" / "legacy_ginkgo_W_sample.pkl",
                    HERE / "legacy_ginkgo_W_sample.pkl")


def _particle_jets() -> tuple[JetCollection, np.ndarray]:
    qcd = generate(N_JETS, ShowerParams.qcd(t_cut=1.0), seed=11)
    w = generate(N_JETS, ShowerParams.w(t_cut=1.0), seed=12)
    jets = JetCollection.concatenate([qcd, w])
    order = np.random.default_rng(13).permutation(len(jets))
    jets = jets.take(order)
    is_w = (jets.jet_type == "W").astype(np.int32)
    return jets, is_w


def nanoaod_like_root() -> None:
    """One entry per jet, NanoAOD-like branches nPFCands, PFCands_pt/eta/phi/mass (float32, mass 0)."""
    jets, is_w = _particle_jets()
    p = jets.leaves
    v = vector.array({"E": p[:, 0], "px": p[:, 1], "py": p[:, 2], "pz": p[:, 3]})
    cands = ak.unflatten(ak.zip({
        "pt": v.pt.astype(np.float32), "eta": v.eta.astype(np.float32),
        "phi": v.phi.astype(np.float32), "mass": np.zeros(len(p), dtype=np.float32),
    }), jets.n_leaves)  # massless, like detector-level particles
    with uproot.recreate(HERE / "particles_nanoaod.root") as f:
        f.mktree("Events", {"PFCands": cands.type.content, "is_W": np.int32},
                 title="Ginkgo jets in a NanoAOD-like layout")
        f["Events"].extend({"PFCands": cands, "is_W": is_w})


def dense_hdf5() -> None:
    """The ML-dataset layout: (n_jets, 40, 4) float32 (E, px, py, pz), zero padded, plus a mask."""
    jets, is_w = _particle_jets()
    n_max = 40
    keep = np.flatnonzero(jets.n_leaves <= n_max)
    jets, is_w = jets.take(keep), is_w[keep]
    dense = np.zeros((len(jets), n_max, 4), dtype=np.float32)
    mask = np.zeros((len(jets), n_max), dtype=bool)
    for i in range(len(jets)):
        a, b = jets.leaf_offsets[i], jets.leaf_offsets[i + 1]
        dense[i, : b - a] = jets.leaves[a:b]
        mask[i, : b - a] = True
    with h5py.File(HERE / "particles_dense.h5", "w") as f:
        ds = f.create_dataset("constituents", data=dense, compression="gzip", shuffle=True)
        ds.attrs["components"] = "E,px,py,pz"
        f.create_dataset("mask", data=mask, compression="gzip")
        f.create_dataset("is_W", data=is_w)


if __name__ == "__main__":
    ginkgo_samples()
    legacy_pickle()
    nanoaod_like_root()
    dense_hdf5()
    for p in sorted(HERE.iterdir()):
        print(f"{p.name:32s} {p.stat().st_size / 1024:8.1f} kB")
