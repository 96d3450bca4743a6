"""Peak memory of one real-engine run at P workers (up to P = 32, on each engine): the run's whole process tree is
sampled every 0.2 s from /proc; the peak of the summed RSS (shared pages counted once per process: an upper bound) and
of the summed PSS (shared pages split between the processes that map them: what the machine actually spends) are written
to a CSV.

    python benchmarks/bench_memory.py [--workers 32] [--engines shared_memory distributed] [--out FILE]

Runs ``experiment=model_validation workers=<P> engine.compute=emulated engine.compute_base_s=0.002`` (emulated 2 ms
gradients, logistic regression, forkserver workers, no predictions) with ``results_dir`` under /tmp. Linux only (/proc).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from benchmarks.common import parser, peak_memory, write_csv  # noqa: E402 (after the sys.path line)
from experiments.cli import count_arg  # noqa: E402


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
        memory = peak_memory(proc)
        err = proc.stderr.read()
        return {
            "engine": engine,
            "workers": workers,
            "returncode": proc.returncode,
            **memory,
            "wall_s": round(time.perf_counter() - t0, 1),
            "last_line": (err.strip().splitlines() or [""])[-1],
        }


def main() -> int:
    ap = parser(__file__, __doc__)
    ap.add_argument("--workers", type=count_arg, default=32)
    ap.add_argument("--updates", type=count_arg, default=400)
    ap.add_argument("--engines", nargs="+", default=["shared_memory", "distributed"])
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "memory.csv")
    args = ap.parse_args()
    rows = [measure(e, args.workers, args.updates) for e in args.engines]
    write_csv(args.out, rows)
    for r in rows:
        print(r)
    return 0


if __name__ == "__main__":
    sys.exit(main())
