"""The master's update time of every algorithm option (conf/algorithm/*.yaml) per dimension.

An algorithm's update cost comes from its implementation (APAM's paper rule is one C loop, a few microseconds at
d = 784; a plain-torch rule takes tens), so a method added to a comparison on the simulated clock brings its own
update cost. This measures, for every option composed as a run would compose it (the problem's hyperparameters:
``logreg_fmnist`` -- AMSGrad's paper variant -- and ``lenet5_fmnist`` -- the torch variant), at d = 784 (logistic
regression on Fashion-MNIST), 61,706 (LeNet5) and 1,000,000, the seconds of one master update: the option's rule
``step`` on a flat float32 vector through :class:`experiments.training.master.Master`, so a staleness policy's work
is included (a delay-adaptive factor, gradient scaling's multiply, Rennala's sum of S gradients, a sync round's sum
of P). P = 8 workers (the async_methods experiment's); an update is one gradient (async; staleness cycling through
0 .. P - 1, so a delay-adaptive factor is below 1 on most updates and Ringmaster applies them all), S = P fresh
gradients (Rennala) or P gradients at the current version (sync). Gradients are fixed N(0, 1) vectors. One math
thread; each update timed alone with perf_counter_ns after a warm-up (the compiled kernel compiles there); the median
over the repeats, with the 10th and 90th percentiles.

Writes benchmarks/results/bench_update_cost.csv, read by :func:`experiments.analysis.update_cost.update_cost_table`
(columns: :data:`COLUMNS`; times in microseconds) and prints it.

Usage: python benchmarks/bench_update_cost.py [--quick] [--dims 784,61706] [--out PATH]
"""

from __future__ import annotations

import platform
import statistics
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from benchmarks.common import parser, write_csv  # noqa: E402 (after the sys.path line)
from experiments.cli import counts_arg  # noqa: E402
from experiments.settings.build import build_settings, make_rule  # noqa: E402 (after the sys.path line)
from experiments.settings.compose import compose_jobs  # noqa: E402 (after the sys.path line)
from experiments.training.master import Master  # noqa: E402 (after the sys.path line)

DIMS = (784, 61_706, 1_000_000)
PROBLEMS = ("logreg_fmnist", "lenet5_fmnist")
WORKERS = 8
REPEATS = {784: 400, 61_706: 150, 1_000_000: 30}
WARMUP = 20
COLUMNS = (
    "algorithm",
    "problem",
    "rule",
    "variant",
    "impl",
    "policy",
    "scale",
    "d",
    "workers",
    "gradients_per_update",
    "repeats",
    "median_us",
    "p10_us",
    "p90_us",
    "us_per_gradient",
    "torch",
    "machine",
)
OUT = REPO / "benchmarks" / "results" / "bench_update_cost.csv"


def options() -> list[str]:
    """Every algorithm option: the names of conf/algorithm/*.yaml."""
    return sorted(p.stem for p in (REPO / "conf" / "algorithm").glob("*.yaml"))


def settings_of(algorithm: str, problem: str):
    """The typed settings of a run of ``algorithm`` on ``problem`` with P = WORKERS (nothing is loaded)."""
    cfg = compose_jobs([[f"algorithm={algorithm}", f"problem={problem}", f"workers={WORKERS}", "delay=timing"]])[0]
    return build_settings(cfg)


def one_update(master: Master, grads: list[torch.Tensor], per_update: int, k: int) -> None:
    """Feed the master the gradients of one update (see the module docstring for the staleness pattern)."""
    if per_update > 1:  # a Rennala or a sync round: fresh gradients from the workers in turn
        v = master.version
        for w in range(per_update):
            master.receive(grads[(k + w) % len(grads)], v, w % WORKERS)
        return
    tau = k % WORKERS
    master.receive(grads[k % len(grads)], max(0, master.version - tau), k % WORKERS)


def measure(algorithm: str, problem: str, d: int, repeats: int) -> dict:
    """One row of the table: the median update time of ``algorithm`` (composed with ``problem``'s hyperparameters)
    at dimension ``d``."""
    s = settings_of(algorithm, problem)
    alg = s.algorithm
    rule = make_rule(s)
    gen = torch.Generator().manual_seed(0)
    x0 = 0.01 * torch.randn(d, generator=gen)
    grads = [torch.randn(d, generator=gen) for _ in range(4)]
    master = Master(rule, x0, alg.protocol, WORKERS, policy=alg.policy)
    pol = master.policy
    per_update = WORKERS if alg.protocol == "sync" else (pol.S if pol is not None and pol.name == "rennala" else 1)
    times = []
    for k in range(WARMUP + repeats):
        t0 = time.perf_counter_ns()
        one_update(master, grads, per_update, k)
        t1 = time.perf_counter_ns()
        if k >= WARMUP:
            times.append((t1 - t0) / 1e3)
    times.sort()
    q = statistics.quantiles(times, n=10)
    med = statistics.median(times)
    hp = alg.hyperparameters
    return {
        "algorithm": algorithm,
        "problem": problem,
        "rule": alg.rule,
        "variant": hp.get("variant", ""),
        "impl": getattr(master.state, "impl", ""),
        "policy": alg.policy.name,
        "scale": pol.scale if pol is not None and pol.adaptive else "",
        "d": d,
        "workers": WORKERS,
        "gradients_per_update": per_update,
        "repeats": repeats,
        "median_us": round(med, 2),
        "p10_us": round(q[0], 2),
        "p90_us": round(q[-1], 2),
        "us_per_gradient": round(med / per_update, 2),
        "torch": torch.__version__,
        "machine": f"{platform.machine()} {platform.processor() or ''}".strip(),
    }


def main() -> None:
    ap = parser(__file__, __doc__)
    ap.add_argument("--quick", action="store_true", help="a tenth of the repeats")
    ap.add_argument("--dims", type=counts_arg, default=list(DIMS), help="comma-separated dimensions")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    torch.set_num_threads(1)
    dims = args.dims
    rows = []
    for d in dims:
        repeats = REPEATS.get(d, 100)
        repeats = max(10, repeats // 10) if args.quick else repeats
        for problem in PROBLEMS:
            for algorithm in options():
                row = measure(algorithm, problem, d, repeats)
                rows.append(row)
                print(
                    f"{algorithm:22s} {problem:14s} d={d:>9,d} {row['impl']:8s} {row['median_us']:10.1f} us "
                    f"({row['gradients_per_update']} gradient(s))",
                    flush=True,
                )
    write_csv(args.out, rows, COLUMNS)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
