"""``make calibrate``: measure the simulated clock's costs for every simulated job of a profile up front
(gradients per problem and batch size, master updates, and messages measured on the shared_memory engine).

    python -m experiments.calibrate [--profile quick] [--results-dir results] [--only ID ...]

Writes ``<results_dir>/calibration.json`` (see :mod:`experiments.costmodel`); entries that exist are kept, so a
calibration is made once per machine and results directory. Runs measure a missing entry on first use anyway;
calibrating first keeps that time out of the sweeps and shows the numbers in one place.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from experiments.costmodel import Calibration, build_cost_model
from experiments.engines.simulated import split_batch
from experiments.errors import ConfigError
from experiments.precheck import compose_jobs, job_overrides, profile_sweep
from experiments.reproduce import EXPERIMENTS


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m experiments.calibrate", description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="quick", choices=["smoke", "quick", "long", "paper"])
    ap.add_argument("--results-dir", type=Path, default=None)
    ap.add_argument("--only", nargs="*", default=None, metavar="ID")
    ap.add_argument("--force", action="store_true", help="measure every cost anew (drop the existing file first)")
    args = ap.parse_args(argv)
    results_dir = args.results_dir or Path("results" if args.profile == "quick" else f"results-{args.profile}")
    if args.force:
        (results_dir / "calibration.json").unlink(missing_ok=True)
    import torch

    from experiments.run import build_rule_from_config, resolve_device
    from problems import build_problem
    from problems.data import DataError, data_root

    torch.set_num_threads(1)
    cal = Calibration(results_dir / "calibration.json")
    problems = {}
    for exp in args.only or EXPERIMENTS:
        base = [f"experiment={exp}", f"profile={args.profile}", f"results_dir={results_dir}"]
        try:
            combos, _ = job_overrides(base + profile_sweep(base), multirun=True)
            for cfg in compose_jobs(combos):
                if cfg.engine.name != "simulated":
                    continue
                key = (cfg.problem.name, cfg.problem.get("max_train"))
                if key not in problems:
                    problems[key] = build_problem(cfg.problem, data_root=data_root(), device=resolve_device(cfg.device))
                rule = build_rule_from_config(cfg.algorithm)
                P, B = int(cfg.workers), int(cfg.batch_size)
                split = cfg.algorithm.protocol == "sync" and cfg.algorithm.get("sync_batch", "split") == "split"
                build_cost_model(problems[key], rule, split_batch(B, P) if split else [B], None, cal,
                                 algorithm_cfg=cfg.algorithm, ref_batch=B)
        except (ConfigError, DataError) as exc:
            print(f"skip {exp}: {str(exc).splitlines()[0]}", file=sys.stderr)
            continue
        print(f"calibrated {exp}", file=sys.stderr)
    if cal.path.exists():
        print(json.dumps(json.loads(cal.path.read_text())["entries"], indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
