"""The authors' master on a real engine: speed of 2 compute agents (one worker and the master computing when no
worker gradient waits, ``algorithm.master_computes=true``) over 1 (one worker, the master only applying updates).

APAM on logistic regression (``problem=logreg_fmnist``, the paper's Sec. 5.1 rule) on ``engine=shared_memory``,
real compute, a fixed number of epochs. The two settings run interleaved, ``--repeats`` times each, as whole
``python -m experiments.run`` processes into a temporary results folder; the speed is the summary's
``time_per_epoch_s`` (wall clock, evaluation excluded).

Writes benchmarks/results/bench_authors_master.csv: one row per run (``setting, repeat, time_per_epoch_s``) and a
last row ``ratio`` with the median time per epoch of 1 agent over that of 2 agents
(goal: >= 1.5 on a 2-core machine). Run it on a quiet machine.

Usage: python benchmarks/bench_authors_master.py [--repeats 5] [--epochs 5] [--engine shared_memory]
"""

from __future__ import annotations

import csv
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from benchmarks.common import parser, write_csv  # noqa: E402 (after the sys.path line)
from experiments.cli import amount_arg, count_arg  # noqa: E402

SETTINGS = {"1 agent": ["algorithm.master_computes=false"], "2 agents": ["algorithm.master_computes=true"]}
GOAL = 1.5


def one_run(results: Path, engine: str, epochs: float, extra: list[str], seed: int) -> dict:
    """One run; its summary row (as strings)."""
    cmd = [
        sys.executable,
        "-m",
        "experiments.run",
        "problem=logreg_fmnist",
        "algorithm=apam",
        f"engine={engine}",
        "workers=1",
        f"epochs={epochs}",
        "eval_every=1000",
        f"seed={seed}",
        f"results_dir={results}",
        "force=true",
        *extra,
    ]
    subprocess.run(cmd, cwd=REPO, check=True, capture_output=True, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    with open(results / "adhoc" / "summary.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    return rows[-1]


def main(argv: list[str] | None = None) -> int:
    ap = parser(__file__, __doc__)
    ap.add_argument("--repeats", type=count_arg, default=5)
    ap.add_argument("--epochs", type=amount_arg, default=5.0)
    ap.add_argument("--engine", default="shared_memory", choices=["shared_memory", "distributed"])
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "bench_authors_master.csv")
    args = ap.parse_args(argv)
    rows, times = [], {k: [] for k in SETTINGS}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeats):
            for name, extra in SETTINGS.items():
                row = one_run(Path(tmp), args.engine, args.epochs, extra, seed=r)
                t = float(row["time_per_epoch_s"])
                times[name].append(t)
                rows.append({"setting": name, "repeat": r, "time_per_epoch_s": t})
                print(f"{name} repeat {r}: {t:.4f} s/epoch", file=sys.stderr)
    ratio = statistics.median(times["1 agent"]) / statistics.median(times["2 agents"])
    rows.append({"setting": "ratio", "repeat": "", "time_per_epoch_s": ratio})
    write_csv(args.out, rows, ["setting", "repeat", "time_per_epoch_s"])
    print(f"2 agents over 1: {ratio:.2f}x (goal >= {GOAL}) -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
