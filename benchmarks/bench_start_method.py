"""Start-up time and peak memory of the real engines' two start methods, ``spawn`` and ``forkserver``, at P workers.

For every (engine, start method, P) a fresh Python process (``--child``) composes the run's config, builds the
problem and runs the engine: logistic regression on Fashion-MNIST, ``algorithm=apam``, emulated 2 ms gradients,
``updates`` updates, no evaluation but the first and the last. Meanwhile this process samples the child's whole
process tree from /proc every 0.1 s and keeps the peak of the summed PSS (shared pages split between the processes
that map them: what the machine spends) and of the summed RSS (shared pages counted once per process: an upper
bound). Start-up is the child's seconds from calling the engine to the run's first evaluation (the workers are up
and hold their data then): starting the processes, importing torch in each (spawn) or forking them from a server
that imported it once (forkserver), handing over the problem.

    python benchmarks/bench_start_method.py [--workers 8 32] [--engines shared_memory distributed]
                                            [--methods spawn forkserver] [--out FILE]
    python benchmarks/bench_start_method.py --table [FILE]     the CSV as a Markdown table (docs/engines.md)

Writes ``benchmarks/results/start_method.csv`` (one row per configuration). Linux only (/proc); needs
Fashion-MNIST staged (``make data``). Run it on a quiet machine: start-up under load is the load's.
"""

from __future__ import annotations

import csv
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from benchmarks.common import parser, peak_memory, write_csv  # noqa: E402 (after the sys.path line)
from experiments.cli import count_arg  # noqa: E402
from experiments.store.table import file_problem  # noqa: E402

DEFAULT_OUT = REPO / "benchmarks" / "results" / "start_method.csv"
COLUMNS = [
    "engine",
    "start_method",
    "workers",
    "returncode",
    "processes",
    "startup_s",
    "run_s",
    "peak_pss_mib",
    "peak_rss_mib",
    "cpu_count",
    "load_1min_before",
]


def child(engine: str, method: str, workers: int, updates: int) -> int:
    """One run in this process; prints ``{"startup_s", "run_s"}`` as JSON on stdout's last line."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from experiments.engines import get_engine
    from experiments.settings.validate import build_rule_from_config
    from experiments.training.recorder import Recorder
    from problems import build_problem
    from problems.data import data_root

    torch.set_num_threads(1)
    overrides = [
        f"engine={engine}",
        f"engine.start_method={method}",
        f"workers={workers}",
        "problem=logreg_fmnist",
        "algorithm=apam",
        "engine.compute=emulated",
        "engine.compute_base_s=0.002",
        f"updates={updates}",
        "eval_every=1000000",
        "engine.warmup_updates=0",
        "results_dir=/nonexistent",
    ]
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3", job_name="bench"):
        cfg = OmegaConf.create(OmegaConf.to_container(compose(config_name="config", overrides=overrides), resolve=True))
    problem = build_problem(cfg.problem, data_root=data_root(), device="cpu")
    first = []

    class FirstEvaluation(Recorder):
        def record(self, *args, **kwargs):
            if not first:
                first.append(time.perf_counter())
            return super().record(*args, **kwargs)

    rec = FirstEvaluation(
        problem,
        {"run_id": "bench"},
        eval_every=cfg.eval_every,
        total_epochs=None,
        f_star=None,
        clock="wall",
        progress=False,
    )
    t0 = time.perf_counter()
    result = get_engine(engine).run(problem, build_rule_from_config(cfg.algorithm), cfg, rec)
    t1 = time.perf_counter()
    if result.status != "ok":
        print(f"run {result.status}: {result.message}", file=sys.stderr)
        return 1
    print(json.dumps({"startup_s": first[0] - t0, "run_s": t1 - t0}))
    return 0


def measure(engine: str, method: str, workers: int, updates: int) -> dict:
    """Run one configuration in a fresh process and sample its process tree; one CSV row."""
    load = os.getloadavg()[0]
    cmd = [sys.executable, __file__, "--child", engine, method, str(workers), str(updates)]
    proc = subprocess.Popen(
        cmd,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    memory = peak_memory(proc, every_s=0.1)
    out, err = proc.communicate()
    times = json.loads(out.strip().splitlines()[-1]) if proc.returncode == 0 else {}
    if proc.returncode != 0:
        print(f"{engine} {method} P={workers}: exit {proc.returncode}: {err.strip()[-500:]}", file=sys.stderr)
    return {
        "engine": engine,
        "start_method": method,
        "workers": workers,
        "returncode": proc.returncode,
        "processes": memory["processes"],
        "startup_s": round(times.get("startup_s", float("nan")), 2),
        "run_s": round(times.get("run_s", float("nan")), 2),
        "peak_pss_mib": memory["peak_pss_mib"],
        "peak_rss_mib": memory["peak_rss_mib"],
        "cpu_count": os.cpu_count(),
        "load_1min_before": round(load, 2),
    }


def markdown(path: Path) -> str:
    """The CSV at ``path`` as a Markdown table (what docs/engines.md shows)."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    head = ["engine", "start method", "P", "start-up (s)", "run (s)", "peak PSS (MiB)", "peak RSS (MiB)", "processes"]
    keys = ["engine", "start_method", "workers", "startup_s", "run_s", "peak_pss_mib", "peak_rss_mib", "processes"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r[k] for k in keys) + " |" for r in rows]
    return "\n".join(lines)


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        engine, method, workers, updates = sys.argv[2:6]
        return child(engine, method, int(workers), int(updates))
    ap = parser(__file__, __doc__)
    ap.add_argument("--workers", type=count_arg, nargs="+", default=[8, 32])
    ap.add_argument("--engines", nargs="+", default=["shared_memory", "distributed"])
    ap.add_argument("--methods", nargs="+", default=["spawn", "forkserver"])
    ap.add_argument("--updates", type=count_arg, default=200)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument(
        "--table",
        type=Path,
        nargs="?",
        const=DEFAULT_OUT,
        default=None,
        help="print the CSV (default: --out's) as a Markdown table and stop",
    )
    args = ap.parse_args()
    if args.table is not None:
        why = file_problem(args.table) or (None if args.table.is_file() else "no such file (run the benchmark first)")
        try:
            table = None if why else markdown(args.table)
        except (OSError, KeyError, UnicodeDecodeError, csv.Error) as exc:  # another CSV, a damaged one
            why = (
                f"not this benchmark's CSV ({type(exc).__name__}: {str(exc).splitlines()[0][:80] if str(exc) else ''})"
            )
        if why:
            print(f"error: --table {args.table}: {why}", file=sys.stderr)
            return 2
        print(table)
        return 0
    if platform.system() != "Linux":
        print("error: needs Linux (/proc)", file=sys.stderr)
        return 2
    rows = []
    for engine in args.engines:
        for workers in args.workers:
            for method in args.methods:
                rows.append(measure(engine, method, workers, args.updates))
                print(rows[-1], flush=True)
    write_csv(args.out, rows, COLUMNS)
    print(f"wrote {args.out}")
    return 0 if all(r["returncode"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
