"""Benchmark: ``jetastar cluster`` killed with SIGKILL at random moments leaves no process behind,
and the resumed run ends with the output of a clean run (issue 33).

Run on demand (not collected by pytest)::

    python tests/benchmarks/bench_kill.py                       # 50 000 jets, ROOT, 10 trials
    python tests/benchmarks/bench_kill.py --n 100000 --trials 20 --format h5 --dir /tmp/bench-kill
    python tests/benchmarks/bench_kill.py --dask                # a local Dask cluster (--scheduler)

It makes ``--n`` default QCD jets once (``jetastar generate``, kept in ``--dir``), runs a clean
``jetastar cluster`` (greedy, kt, cambridge, antikt; ``--workers 2``) for the reference output and
its duration ``T`` (the shorter of two runs, one that compiled the kernels not counted: the machine
may be shared, and a run slowed by others would put many kills after the end), then per trial:

1. starts the same command into a fresh output and SIGKILLs its main process only (what ``kill
   -9`` or the OOM killer does: nothing runs in it any more) at a moment drawn uniformly from
   ``[0, T]``: start-up (imports, worker start, warm-up), clustering or the merge;
2. 5 s later, looks for any process of the run still alive: the command runs in a session of its
   own, and its process tree (pool workers, multiprocessing's resource tracker, ...) is recorded by
   polling while it runs; a survivor is a recorded process (same pid and start time, not a zombie)
   or any process of that session. Each survivor is printed with its pid, command line and how long
   it lived on after the kill (watched for ``--linger`` s more, then killed by the benchmark);
3. resumes: runs the command again, killed again with probability ``--rekill`` at another moment of
   ``[0, T]`` (and checked as in 2), until a run completes (at most ``--max-kills`` kills a trial);
4. checks that the run exited 0, left no temporary file, lock or part folder, and that its output
   equals the clean one: every dataset/branch and attribute, except the provenance that differs
   by nature (``created``, ``command``: the output name) and the measured ``time_s`` of each row.

Per trial it prints each kill (moment, phase from the progress output, the part files written and
whether this run's temporary output exists, and ``[gone X s]``: when the last recorded process of
the run had exited), or ``done at X before Y`` for a run that ended before its kill; the survivors
after 5 s, the time of the run that completed (the resume), and whether the output is equal; then a
summary. Exit status 1 if any check failed. Logs of the last runs are kept in ``--dir``.

With ``--dask`` the command gets ``--scheduler`` of a ``distributed.LocalCluster`` started here (2
worker processes): those workers belong to the cluster, not to the run, and stay; the benchmark
reports how many tasks the scheduler still holds 5 s after the kill (the killed client's work).
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import psutil

ALGORITHMS = "greedy,kt,cambridge,antikt"
#: provenance attributes that differ between two runs of one command (when; the output's name)
IGNORED_ATTRS = ("created", "command")
#: result columns measured, not computed (seconds per row)
IGNORED_COLUMN_SUFFIX = "time_s"
POLL_S = 0.02
SURVIVOR_WAIT_S = 5.0


# ---------------------------------------------------------------------- a watched run
@dataclass
class Kill:
    at: float  # seconds after the start
    phase: str
    survivors: list[str] = field(default_factory=list)
    dask_tasks: int | None = None
    #: seconds after the kill when no recorded process of the run was alive (None: survivors)
    gone_after: float | None = None


class WatchedRun:
    """The command in a session of its own, stdout/stderr to files; :meth:`poll` records its process
    tree and the phase it is in (from the progress bars on stderr and the part folder)."""

    MARKERS = (("compiling numba kernels", "start-up (compiling)"),
               ("checking finished parts", "start-up (checking parts)"),
               ("merging ", "merging"))
    #: after the merge: the output has its final name; the summary is printed
    LATE = ("output renamed", "exiting")

    def __init__(self, cmd: list[str], logs: Path, inp: Path, out: Path) -> None:
        self.out, self.parts = out, out.with_name(out.name + ".parts")
        self.markers = ((f"{inp.name}:", "clustering"), *self.MARKERS)
        self.err_path, self.out_path = logs / "stderr.txt", logs / "stdout.txt"
        self._err = open(self.err_path, "wb")
        self._stdout = open(self.out_path, "wb")
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(cmd, start_new_session=True, stdin=subprocess.DEVNULL,
                                     stdout=self._stdout, stderr=self._err)
        self.pid = self.proc.pid
        self.tree: dict[int, tuple[float, str]] = {}
        self.phase = "start-up"
        self.timeline: list[tuple[float, str]] = [(0.0, "start-up")]
        self._offset, self._carry = 0, ""
        try:
            self._ps = psutil.Process(self.pid)
            self.tree[self.pid] = (self._ps.create_time(), " ".join(self._ps.cmdline()))
        except psutil.Error:
            self._ps = None

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def poll(self) -> int | None:
        if self._ps is not None:
            try:
                kids = self._ps.children(recursive=True)
            except psutil.Error:
                kids = []
            for k in kids:
                if k.pid not in self.tree:
                    try:
                        self.tree[k.pid] = (k.create_time(), " ".join(k.cmdline()))
                    except psutil.Error:
                        pass
        self._read_phase()
        if self.phase not in self.LATE:
            if self.out.exists():
                self._set(self.LATE[0])
        elif self.phase != self.LATE[1] and self.out_path.stat().st_size:
            self._set(self.LATE[1])  # the summary on stdout: the output is complete
        return self.proc.poll()

    def _read_phase(self) -> None:
        with open(self.err_path, "rb") as fh:
            fh.seek(self._offset)
            new = fh.read()
        if not new:
            return
        self._offset += len(new)
        text = self._carry + new.decode("utf-8", "replace")
        self._carry = text[-64:]
        found = [(text.rfind(m), name) for m, name in self.markers if m in text]
        if found and self.phase not in self.LATE:
            self._set(max(found)[1])

    def _set(self, phase: str) -> None:
        if phase != self.phase:
            self.phase = phase
            self.timeline.append((self.elapsed(), phase))

    def state(self) -> str:
        """The phase and the part folder (parts written, a temporary output) right now."""
        try:
            names = [p.name for p in self.parts.iterdir()]
        except OSError:
            names = []
        n = sum(name.startswith("part-") and not name.endswith(".tmp") for name in names)
        bits = [f"{n} parts"] if n else []
        mine = f".{self.out.name}.{self.pid}."  # (an earlier run's is left until this one starts)
        if any(p.name.endswith(".tmp") for p in self.out.parent.glob(f"{mine}*")):
            bits.append("temporary output")
        return self.phase + (f" ({', '.join(bits)})" if bits else "")

    def run_until(self, moment: float | None) -> bool:
        """Wait until the run ends (True) or ``moment`` s after its start (False)."""
        while self.poll() is None:
            if moment is not None and self.elapsed() >= moment:
                return False
            time.sleep(POLL_S)
        self._read_phase()
        return True

    def close(self) -> None:
        self._err.close()
        self._stdout.close()

    def stderr(self) -> str:
        return self.err_path.read_text(errors="replace")

    def stdout(self) -> str:
        return self.out_path.read_text(errors="replace")


def _alive(pid: int, created: float | None = None) -> bool:
    try:
        p = psutil.Process(pid)
        if created is not None and abs(p.create_time() - created) > 0.01:
            return False  # the pid was reused
        return p.status() != psutil.STATUS_ZOMBIE  # a zombie has exited
    except psutil.Error:
        return False


def _survivors(run: WatchedRun) -> dict[int, tuple[float, str]]:
    """Processes of ``run`` (its main process excluded) alive now: recorded in its tree, or in its
    session (started between two polls)."""
    found = {pid: info for pid, info in run.tree.items() if pid != run.pid and _alive(pid, info[0])}
    for p in psutil.process_iter(["pid", "create_time", "cmdline"]):
        try:
            if p.pid != run.pid and p.pid not in found and os.getsid(p.pid) == run.pid \
                    and _alive(p.pid):
                found[p.pid] = (p.info["create_time"], " ".join(p.info["cmdline"] or []))
        except (OSError, psutil.Error):
            pass
    return found


def kill_and_check(run: WatchedRun, linger: float, dask_client=None) -> Kill:
    """SIGKILL the main process of ``run``; 5 s later, the processes of the run still alive."""
    kill = Kill(run.elapsed(), run.state())
    os.kill(run.pid, signal.SIGKILL)
    killed_at = time.time()
    run.proc.wait()
    run.close()
    others = {pid: c for pid, (c, _) in run.tree.items() if pid != run.pid}
    while time.time() < killed_at + SURVIVOR_WAIT_S:
        if kill.gone_after is None and not any(_alive(pid, c) for pid, c in others.items()):
            kill.gone_after = time.time() - killed_at
        time.sleep(0.05)
    left = _survivors(run)
    if left:
        kill.gone_after = None
    if dask_client is not None:
        kill.dask_tasks = dask_client.run_on_scheduler(_dask_tasks)
    gone: dict[int, float] = {}
    deadline = time.time() + linger
    while left and len(gone) < len(left) and time.time() < deadline:
        for pid, (created, _) in left.items():
            if pid not in gone and not _alive(pid, created):
                gone[pid] = time.time() - killed_at
        time.sleep(0.1)
    for pid, (created, cmd) in sorted(left.items()):
        lived = f"exited {gone[pid]:.1f} s after the kill" if pid in gone else \
            f"alive {time.time() - killed_at:.0f} s after the kill, killed by the benchmark"
        kill.survivors.append(f"pid {pid} (started {created - run.tree[run.pid][0]:+.1f} s after "
                              f"the main process; {lived}): {cmd[:200]}")
        if pid not in gone:
            try:
                os.kill(pid, signal.SIGKILL)  # a descendant of a command this benchmark started
            except OSError:
                pass
    return kill


def _dask_tasks(dask_scheduler) -> int:
    return len(dask_scheduler.tasks)


# ---------------------------------------------------------------------- outputs
def _same(x, y) -> bool:
    x, y = np.asarray(x), np.asarray(y)
    if x.shape != y.shape or x.dtype != y.dtype:
        return False
    if x.dtype.kind in "fc":
        return bool(np.array_equal(x, y, equal_nan=True))
    if x.dtype.kind == "O":
        return x.tolist() == y.tolist()
    return bool(np.array_equal(x, y))


def _ignored_column(name: str) -> bool:
    return name.rsplit("/", 1)[-1].endswith(IGNORED_COLUMN_SUFFIX)


def differences(a: Path, b: Path) -> list[str]:
    """What differs between two outputs (every dataset/branch and attribute), but for
    :data:`IGNORED_ATTRS` and the ``time_s`` columns. The same rule as ``_h5_content`` /
    ``_root_content`` of tests/test_batch.py (which also leave out ``created`` and ``command``),
    comparing arrays instead of their lists (fast for 10⁵ jets)."""
    return _h5_differences(a, b) if a.suffix in (".h5", ".hdf5") else _root_differences(a, b)


def _h5_differences(a: Path, b: Path) -> list[str]:
    import h5py

    diffs: list[str] = []

    def attrs(name: str, x, y) -> None:
        skip = IGNORED_ATTRS if name == "/" else ()
        kx, ky = set(x.attrs) - set(skip), set(y.attrs) - set(skip)
        if kx != ky:
            diffs.append(f"{name} attributes {sorted(kx ^ ky)}")
        for k in sorted(kx & ky):
            if not _same(x.attrs[k], y.attrs[k]):
                diffs.append(f"{name}@{k}: {x.attrs[k]!r} != {y.attrs[k]!r}")

    with h5py.File(a, "r") as fa, h5py.File(b, "r") as fb:
        attrs("/", fa, fb)
        na, nb = [], []
        fa.visit(na.append)
        fb.visit(nb.append)
        if set(na) != set(nb):
            diffs.append(f"objects only in one file: {sorted(set(na) ^ set(nb))}")
        for name in sorted(set(na) & set(nb)):
            x, y = fa[name], fb[name]
            attrs(name, x, y)
            if isinstance(x, h5py.Dataset) and not _ignored_column(name):
                if x.dtype != y.dtype or x.shape != y.shape:
                    diffs.append(f"{name}: {x.dtype}{x.shape} != {y.dtype}{y.shape}")
                elif not _same(x[()], y[()]):
                    diffs.append(f"{name}: values differ")
    return diffs


def _root_differences(a: Path, b: Path) -> list[str]:
    import awkward as ak
    import uproot

    diffs: list[str] = []
    with uproot.open(a) as fa, uproot.open(b) as fb:
        if set(fa.keys()) != set(fb.keys()):
            diffs.append(f"keys {sorted(set(fa.keys()) ^ set(fb.keys()))}")
        for key in sorted(set(fa.keys(cycle=False)) & set(fb.keys(cycle=False))):
            x, y = fa[key], fb[key]
            if not hasattr(x, "branches"):  # meta: a JSON TObjString
                mx, my = json.loads(str(x)), json.loads(str(y))
                for k in sorted(set(mx) | set(my)):
                    if k not in IGNORED_ATTRS and mx.get(k) != my.get(k):
                        diffs.append(f"{key}.{k}: {mx.get(k)!r} != {my.get(k)!r}")
                continue
            if x.num_entries != y.num_entries:
                diffs.append(f"{key}: {x.num_entries} != {y.num_entries} entries")
                continue
            bx, by = {br.name: br for br in x.branches}, {br.name: br for br in y.branches}
            if set(bx) != set(by):
                diffs.append(f"{key}: branches only in one file {sorted(set(bx) ^ set(by))}")
            for name in sorted(set(bx) & set(by)):
                if _ignored_column(name):
                    continue
                if bx[name].typename != by[name].typename:
                    diffs.append(f"{key}.{name}: {bx[name].typename} != {by[name].typename}")
                elif not ak.array_equal(bx[name].array(), by[name].array(), equal_nan=True):
                    diffs.append(f"{key}.{name}: values differ")
    return diffs


def leftovers(out: Path) -> list[str]:
    """Temporary files, locks and the part folder of ``out`` left after a completed run."""
    left = [p.name for p in out.parent.iterdir()
            if p.name.startswith(("." + out.name, out.name)) and p.name != out.name]
    return sorted(left)


# ---------------------------------------------------------------------- the benchmark
def _command(inp: Path, out: Path, args, scheduler: str | None) -> list[str]:
    cmd = [sys.executable, "-m", "jetastar", "cluster", str(inp), "--algorithms", args.algorithms,
           "-o", str(out)]
    return cmd + (["--scheduler", scheduler] if scheduler else ["--workers", str(args.workers)])


def _make_input(args, folder: Path) -> Path:
    inp = folder / f"qcd-{args.n}.{args.format}"
    if not inp.exists():
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "jetastar", "generate", "--n", str(args.n), "-o",
                        str(inp)], check=True, capture_output=True)
        print(f"generated {inp} in {time.perf_counter() - t:.1f} s")
    return inp


def _clean_run(inp: Path, args, folder: Path, scheduler: str | None) -> tuple[Path, float]:
    clean = folder / f"clean.{args.format}"
    walls = []
    for attempt in range(3):
        if clean.exists():
            clean.unlink()  # (the phases of the run see the output appear)
        logs = folder / f"logs-clean-{attempt}"
        logs.mkdir(exist_ok=True)
        run = WatchedRun([*_command(inp, clean, args, scheduler), "--fresh"], logs, inp, clean)
        run.run_until(None)
        wall = run.elapsed()
        run.close()
        if run.proc.returncode:
            sys.exit(f"clean run failed (rc {run.proc.returncode}):\n{run.stderr()[-3000:]}")
        phases = ", ".join(f"{name} from {t:.1f} s" for t, name in run.timeline)
        print(f"clean run: {wall:.1f} s ({phases}); processes of the run: {len(run.tree)}")
        if "compiling numba kernels" in run.stderr():
            print("  (it compiled the kernels: not a duration of a run)")
        else:
            walls.append(wall)
        if len(walls) == 2:
            break
    return clean, min(walls)


def trial(k: int, inp: Path, out: Path, clean: Path, span: float, args, rng, folder: Path,
          scheduler: str | None, client) -> dict:
    for p in [out, out.with_name(out.name + ".parts")]:
        if p.is_dir():
            shutil.rmtree(p)
        elif p.exists():
            p.unlink()
    kills: list[Kill] = []
    result = {"kills": kills, "rc": None, "resume_s": None, "equal": None, "leftovers": [],
              "runs": 0}
    while True:
        logs = folder / f"logs-trial-{k}"
        logs.mkdir(exist_ok=True)
        kill_this = result["runs"] == 0 or (len(kills) < args.max_kills and
                                             rng.random() < args.rekill)
        moment = float(rng.uniform(0.0, span)) if kill_this else None
        run = WatchedRun(_command(inp, out, args, scheduler), logs, inp, out)
        result["runs"] += 1
        if not run.run_until(moment):
            kills.append(kill_and_check(run, args.linger, client))
            continue
        wall = run.elapsed()
        if moment is not None:
            result["missed"] = (wall, moment)
        run.close()
        result["rc"] = run.proc.returncode
        if result["runs"] > 1:
            result["resume_s"] = wall
        if run.proc.returncode:
            result["error"] = run.stderr()[-2000:]
            return result
        break
    result["leftovers"] = leftovers(out)
    t = time.perf_counter()
    result["diffs"] = differences(clean, out)
    result["compare_s"] = time.perf_counter() - t
    result["equal"] = not result["diffs"]
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=50000, help="default QCD jets in the input")
    parser.add_argument("--format", choices=("root", "h5"), default="root",
                        help="input and output format")
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--algorithms", default=ALGORITHMS)
    parser.add_argument("--dask", action="store_true",
                        help="run on a local Dask cluster (--scheduler) instead of a process pool")
    parser.add_argument("--rekill", type=float, default=0.5,
                        help="probability that a resuming run is killed again")
    parser.add_argument("--max-kills", type=int, default=3, help="kills per trial at most")
    parser.add_argument("--linger", type=float, default=30.0,
                        help="seconds a survivor is watched before the benchmark kills it")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--dir", default=None,
                        help="folder of the input (kept for later runs) and of a new folder per "
                             "run with its outputs and logs (default: jetastar-bench-kill-<user> "
                             "in the temporary directory)")
    args = parser.parse_args()
    folder = Path(args.dir or Path(tempfile.gettempdir()) / f"jetastar-bench-kill-{getpass.getuser()}")
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    print(f"{os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f}; {args.n} jets, "
          f"{args.format}, {'Dask' if args.dask else f'{args.workers} workers'}, "
          f"{args.trials} trials")
    inp = _make_input(args, folder)
    # this run's outputs and logs in a folder of its own: two runs sharing the input do not write
    # over each other's outputs
    folder = Path(tempfile.mkdtemp(prefix="run-", dir=folder))
    print(f"outputs and logs in {folder}")
    cluster = client = scheduler = None
    if args.dask:
        import distributed

        cluster = distributed.LocalCluster(n_workers=args.workers, threads_per_worker=1,
                                           processes=True, dashboard_address=":0")
        client = distributed.Client(cluster)
        scheduler = cluster.scheduler_address
    try:
        clean, span = _clean_run(inp, args, folder, scheduler)
        out = folder / f"out.{args.format}"
        print(f"\nkill moments uniform in [0, {span:.1f} s]; survivors: processes of the run "
              f"alive {SURVIVOR_WAIT_S:.0f} s after the kill\n")
        print(f"{'trial':>5}  {'kills: moment s @ phase':<70} {'surv':>4} {'resume s':>8} "
              f"{'equal':>5}")
        results = []
        for k in range(1, args.trials + 1):
            r = trial(k, inp, out, clean, span, args, rng, folder, scheduler, client)
            results.append(r)
            kills = "; ".join(f"{x.at:.2f} @ {x.phase}" + (
                f" [gone {x.gone_after:.1f} s]" if x.gone_after is not None else "")
                for x in r["kills"])
            if "missed" in r:
                kills += ("; " if kills else "") + "done at {:.1f} before {:.1f}".format(*r["missed"])
            n_surv = sum(len(x.survivors) for x in r["kills"])
            resume = f"{r['resume_s']:.1f}" if r["resume_s"] is not None else "-"
            equal = {True: "yes", False: "NO", None: "-"}[r["equal"]]
            print(f"{k:>5}  {kills:<70} {n_surv:>4} {resume:>8} {equal:>5}", flush=True)
            for x in r["kills"]:
                for s in x.survivors:
                    print(f"         survivor: {s}")
                if x.dask_tasks:
                    print(f"         dask: the scheduler holds {x.dask_tasks} tasks 5 s after "
                          f"the kill at {x.at:.2f} s")
            if r["rc"]:
                print(f"         the completing run failed (rc {r['rc']}):\n{r.get('error', '')}")
            for d in r.get("diffs", [])[:10]:
                print(f"         differs: {d}")
            if r["leftovers"]:
                print(f"         left after the completed run: {r['leftovers']}")
        kills = [x for r in results for x in r["kills"]]
        phases = Counter(x.phase.split(" (")[0] for x in kills)
        survivors = sum(len(x.survivors) for x in kills)
        unequal = sum(r["equal"] is False for r in results)
        failed = sum(bool(r["rc"]) for r in results)
        left = sum(bool(r["leftovers"]) for r in results)
        resumes = [r["resume_s"] for r in results if r["resume_s"] is not None]
        ok = not (survivors or unequal or failed or left)
        print(f"\n{len(results)} trials, {len(kills)} kills ("
              f"{', '.join(f'{p} {c}' for p, c in sorted(phases.items()))}); "
              f"survivors {survivors}; unequal outputs {unequal}; failed runs {failed}; "
              f"leftovers {left}; resume median "
              f"{np.median(resumes) if resumes else float('nan'):.1f} s (clean {span:.1f} s): "
              f"{'OK' if ok else 'FAILED'}")
        return 0 if ok else 1
    finally:
        if client is not None:
            client.close()
            cluster.close()


if __name__ == "__main__":
    sys.exit(main())
