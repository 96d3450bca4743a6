"""Peak memory of one real-engine run at P workers (up to P = 32, on each engine): the run's whole process tree is
sampled every 0.2 s from /proc; the peak of the summed RSS (shared pages counted once per process: an upper bound) and
of the summed PSS (shared pages split between the processes that map them: what the machine actually spends) are written
to a CSV.

    python benchmarks/bench_memory.py [--workers 32] [--engines shared_memory distributed] [--out FILE]

Runs ``experiment=model_validation workers=<P> engine.compute=emulated engine.compute_base_s=0.002`` (emulated 2 ms
gradients, logistic regression, forkserver workers, no predictions) with ``results_dir`` under /tmp. Linux only (/proc).
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _tree(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for t in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{t}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return out


def _kb(path: str, key: str) -> int:
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def measure(engine: str, workers: int, updates: int) -> dict:
    """Run one job and sample its process tree; return peak RSS/PSS sums (MiB), process count, wall seconds."""
    with tempfile.TemporaryDirectory(prefix="apam-mem-") as tmp:
        cmd = [
            sys.executable,
            "-m",
            "experiments.run",
            "experiment=model_validation",
            f"engine={engine}",
            f"workers={workers}",
            "engine.compute=emulated",
            "engine.compute_base_s=0.002",
            "engine.predict=false",
            f"updates={updates}",
            f"results_dir={tmp}",
        ]
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        peak_rss = peak_pss = nproc = 0
        while proc.poll() is None:
            pids = _tree(proc.pid)
            rss = sum(_kb(f"/proc/{p}/status", "VmRSS:") for p in pids)
            pss = sum(_kb(f"/proc/{p}/smaps_rollup", "Pss:") for p in pids)
            peak_rss, peak_pss, nproc = max(peak_rss, rss), max(peak_pss, pss), max(nproc, len(pids))
            time.sleep(0.2)
        err = proc.stderr.read()
        return {
            "engine": engine,
            "workers": workers,
            "returncode": proc.returncode,
            "processes": nproc,
            "peak_rss_mib": round(peak_rss / 1024, 1),
            "peak_pss_mib": round(peak_pss / 1024, 1),
            "wall_s": round(time.perf_counter() - t0, 1),
            "last_line": (err.strip().splitlines() or [""])[-1],
        }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=32)
    ap.add_argument("--updates", type=int, default=400)
    ap.add_argument("--engines", nargs="+", default=["shared_memory", "distributed"])
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "memory.csv")
    args = ap.parse_args()
    rows = [measure(e, args.workers, args.updates) for e in args.engines]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    for r in rows:
        print(r)
    return 0


if __name__ == "__main__":
    sys.exit(main())
