"""Benchmark: reading + converting particle files in foreign layouts, and `jetastar cluster` on them.

Writes (with plain uproot / h5py) 100 000 jets of ~30 massless particles:

* a NanoAOD-like ROOT TTree ``Events`` with ``nPFCands`` + ``PFCands_pt/eta/phi/mass`` (float32);
* a dense HDF5 dataset ``(n_jets, 60, 4)`` float32 ``(E, px, py, pz)``, zero padded, plus a mask;

then measures, in jets/s:

* the plain reading (uproot ``arrays`` / h5py slicing), i.e. the floor;
* :func:`jetastar.io.read_particles` (read + convert with vector + mass policy + validation), in
  one go and with :func:`jetastar.io.iterate_particles` in steps of 10 000 entries;
* ``jetastar cluster FILE ... --algorithms greedy`` end to end (reading, clustering, part files,
  merge, output with the by-entry table), one worker process, in this process.

Usage::

    python tests/benchmarks/bench_particles.py [--n 100000] [--skip-cluster]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import awkward as ak
import h5py
import numpy as np
import uproot
import vector


def _particles(n: int, seed: int = 1) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    counts = np.clip(rng.poisson(30, n), 2, 60)
    m = int(counts.sum())
    axis_eta = np.repeat(rng.uniform(-2, 2, n), counts)
    axis_phi = np.repeat(rng.uniform(-np.pi, np.pi, n), counts)
    cols = {
        "pt": (rng.exponential(12.0, m) + 0.5).astype(np.float32),
        "eta": (axis_eta + rng.normal(0, 0.15, m)).astype(np.float32),
        "phi": (axis_phi + rng.normal(0, 0.15, m)).astype(np.float32),
        "mass": np.zeros(m, np.float32),
    }
    return counts, cols


def _rate(n: int, seconds: float) -> str:
    return f"{n / seconds:10.0f} jets/s ({seconds:6.2f} s)"


def main() -> None:
    from jetastar.batch import BatchConfig, run_batch
    from jetastar.io import ParticleSource, iterate_particles, read_particles

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--skip-cluster", action="store_true")
    parser.add_argument("--chunk-size", type=int, default=1000)
    args = parser.parse_args()
    n = args.n
    counts, cols = _particles(n)
    print(f"{n} jets, {counts.mean():.1f} particles per jet on average")
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        root = d / "events.root"
        cands = ak.unflatten(ak.zip(cols), counts)
        with uproot.recreate(root) as f:
            f.mktree("Events", {"PFCands": cands.type.content})
            for a in range(0, n, 20000):
                f["Events"].extend({"PFCands": cands[a:a + 20000]})
        v = vector.array({k: c.astype(np.float64) for k, c in cols.items()})
        p4 = np.stack([v.E, v.px, v.py, v.pz], axis=1).astype(np.float32)
        dense = np.zeros((n, 60, 4), np.float32)
        mask = np.arange(60)[None, :] < counts[:, None]
        dense[mask] = p4
        h5 = d / "dense.h5"
        with h5py.File(h5, "w") as f:
            f.create_dataset("constituents", data=dense, chunks=(1000, 60, 4),
                             compression="gzip", shuffle=True)
            f.create_dataset("mask", data=mask, chunks=(1000, 60), compression="gzip")
        print(f"ROOT {root.stat().st_size / 1e6:.1f} MB, HDF5 {h5.stat().st_size / 1e6:.1f} MB")

        read_particles(root, particles="PFCands", entry_stop=10)  # warm-up: numba kernels loaded
        read_particles(h5, particles="constituents", components="E,px,py,pz", entry_stop=10)
        t = time.perf_counter()
        with uproot.open(root) as f:
            f["Events"].arrays(["PFCands_pt", "PFCands_eta", "PFCands_phi", "PFCands_mass"])
        print(f"ROOT plain uproot arrays          {_rate(n, time.perf_counter() - t)}")
        t = time.perf_counter()
        jets = read_particles(root, particles="PFCands")
        print(f"ROOT read_particles               {_rate(n, time.perf_counter() - t)}")
        touched = int(jets.jet_columns["n_mass_adjusted"].sum())
        print(f"     (mass policy clamp changed {touched} of {jets.leaves.shape[0]} particles)")
        t = time.perf_counter()
        total = sum(len(c) for c in iterate_particles(root, 10000, particles="PFCands"))
        print(f"ROOT iterate_particles (10 000)   {_rate(total, time.perf_counter() - t)}")

        t = time.perf_counter()
        with h5py.File(h5, "r") as f:
            f["constituents"][()]
            f["mask"][()]
        print(f"HDF5 plain h5py read              {_rate(n, time.perf_counter() - t)}")
        t = time.perf_counter()
        jets = read_particles(h5, particles="constituents", components="E,px,py,pz", mask="mask")
        print(f"HDF5 read_particles (dense+mask)  {_rate(n, time.perf_counter() - t)}")
        t = time.perf_counter()
        total = sum(len(c) for c in iterate_particles(h5, 10000, particles="constituents",
                                                      components="E,px,py,pz", mask="mask"))
        print(f"HDF5 iterate_particles (10 000)   {_rate(total, time.perf_counter() - t)}")

        if args.skip_cluster:
            return
        config = BatchConfig(algorithms=["greedy"], chunk_size=args.chunk_size)
        for path, source in (
            (root, ParticleSource(path="", particles="PFCands")),
            (h5, ParticleSource(path="", particles="constituents", components="E,px,py,pz",
                                mask="mask")),
        ):
            out = d / f"{path.stem}.results.h5"
            t = time.perf_counter()
            [summary] = run_batch([path], config, output=out, particles=source, progress=False)
            seconds = time.perf_counter() - t
            assert summary.ok, summary.error
            print(f"cluster greedy {path.suffix:5s} end to end   {_rate(n, seconds)}  "
                  f"{summary.status_counts['greedy']}")


if __name__ == "__main__":
    main()
