"""Simulated engine against a plain serial loop: gradients per second and peak memory.

    .venv/bin/python benchmarks/bench_simulated.py [--updates N] [--repeats 5]

For LeNet5 (B=40) and logistic regression (B=64) on Fashion-MNIST, one thread: the serial loop (minibatch, gradient,
AMSGrad step) against ``engine=simulated`` with P = 1 and P = 32 equal workers (``delay=timing``) and with the
uniform artificial delay (D = 33), for the same number of updates (default 5000 for logistic regression, whose
gradient takes about 0.1 ms, so the engine's bookkeeping per gradient shows; 600 for LeNet5). Evaluation is
switched off (a stub) so both time only training. Each case runs in a fresh process: peak RSS (mostly the data)
and the resident memory the run added (in-flight gradients, ring, optimizer state). Writes
``benchmarks/results/bench_simulated.csv``: medians over repeats and the rate ratio engine / serial (target >= 0.95).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from benchmarks.common import parser, write_csv  # noqa: E402 (after the sys.path line)
from experiments.cli import count_arg  # noqa: E402

PROBLEMS = {"logreg_fmnist": 64, "lenet5_fmnist": 40}  # batch size
UPDATES = {"logreg_fmnist": 5000, "lenet5_fmnist": 600}  # default run length


class _NoEval:
    """Wraps a problem; ``evaluate`` returns zeros so the benchmark times training only."""

    def __init__(self, problem):
        self._p = problem

    def __getattr__(self, name):
        return getattr(self._p, name)

    def evaluate(self, x):
        return {"train_loss": 0.0, "train_acc": 0.0, "test_loss": 0.0, "test_acc": 0.0}


def one(problem_name: str, mode: str, updates: int) -> dict:
    import torch

    from experiments.engines import simulated
    from experiments.run import build_rule_from_config
    from experiments.training.recorder import Recorder
    from experiments.training.sampling import BatchStream
    from problems import build_problem
    from problems.data import data_root

    sys.path.insert(0, str(REPO / "tests"))
    from conftest import compose_cfg

    torch.set_num_threads(1)
    B = PROBLEMS[problem_name]
    over = [
        f"problem={problem_name}",
        f"batch_size={B}",
        f"updates={updates}",
        "eval_every=1000000",
        "engine.costs.grad_s=0.001",
        "engine.costs.update_s=0.00001",
        "engine.costs.latency_s=0.00001",
        "engine.costs.overhead_s=0",
    ]
    if mode == "serial":
        over += ["workers=1", "delay=none"]
    elif mode.startswith("timing"):
        over += [f"workers={mode.split('-P')[1]}", "delay=timing"]
    else:
        over += ["workers=1", "delay=uniform", "delay.max_delay=32"]
    cfg = compose_cfg(over)
    problem = _NoEval(build_problem(cfg.problem, data_root=data_root(), device=torch.device("cpu")))
    rule = build_rule_from_config(cfg.algorithm)
    rss0 = _rss_mb()
    t0 = time.perf_counter()
    if mode == "serial":
        x = problem.init_params(0)
        state = rule.init(x)
        stream = BatchStream(problem.num_train, B, 0)
        for _ in range(updates):
            _, g = problem.loss_grad(x, stream.next())
            x, state = rule.step(x, g, state)
    else:
        rec = Recorder(
            problem,
            {"run_id": "bench"},
            eval_every=1e6,
            total_epochs=None,
            f_star=None,
            clock="simulated",
            progress=False,
        )
        res = simulated.run(problem, rule, cfg, rec)
        assert res.updates == updates
    wall = time.perf_counter() - t0
    rss1 = _rss_mb()
    return {
        "problem": problem_name,
        "mode": mode,
        "updates": updates,
        "wall_s": wall,
        "grads_per_s": updates / wall,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "rss_growth_mb": rss1 - rss0,
        "dim": problem.dim,
    }


def _rss_mb() -> float:
    """Resident memory now (MiB), from /proc (the run's growth over the loaded data and model)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def main() -> int:
    ap = parser(__file__, __doc__)
    ap.add_argument(
        "--updates",
        type=count_arg,
        default=None,
        help="updates per run (default: " + ", ".join(f"{p} {n}" for p, n in UPDATES.items()) + ")",
    )
    ap.add_argument("--repeats", type=count_arg, default=5, help="runs of each case, interleaved; medians reported")
    ap.add_argument(
        "--problems",
        nargs="+",
        choices=list(PROBLEMS),
        default=list(PROBLEMS),
        help="which problems (default: both; the CSV holds only those run)",
    )
    ap.add_argument("--one", nargs=2, metavar=("PROBLEM", "MODE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.one[0], args.one[1], args.updates or UPDATES[args.one[0]])))
        return 0
    rows = []
    for prob in args.problems:
        per_mode = {}
        updates = args.updates or UPDATES[prob]
        for _rep in range(args.repeats):
            for mode in ("serial", "timing-P1", "timing-P32", "uniform-D33"):  # interleaved: load hits all alike
                out = subprocess.run(
                    [sys.executable, __file__, "--updates", str(updates), "--one", prob, mode],
                    capture_output=True,
                    text=True,
                    check=True,
                    cwd=REPO,
                )
                per_mode.setdefault(mode, []).append(json.loads(out.stdout.strip().splitlines()[-1]))
        serial = statistics.median(r["grads_per_s"] for r in per_mode["serial"])
        for mode, runs in per_mode.items():
            rate = statistics.median(r["grads_per_s"] for r in runs)
            rows.append(
                {
                    "problem": prob,
                    "mode": mode,
                    "updates": updates,
                    "repeats": args.repeats,
                    "grads_per_s_median": round(rate, 1),
                    "ratio_to_serial": round(rate / serial, 3),
                    "peak_rss_mb_median": round(statistics.median(r["peak_rss_mb"] for r in runs), 1),
                    "rss_growth_mb_median": round(statistics.median(r["rss_growth_mb"] for r in runs), 1),
                }
            )
    out = REPO / "benchmarks" / "results" / "bench_simulated.csv"
    write_csv(out, rows)
    print(" ".join(f"{c:>20}" for c in rows[0]))
    for r in rows:
        print(" ".join(f"{r[c]!s:>20}" for c in rows[0]))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
