"""``make calibrate``: measure the cost model's terms on this machine up front, for every simulated job of a profile
(gradients in a worker process per problem and batch size, master updates per rule, each transport's message
latency and master overhead per dimension, measured on that engine, and the wake-up lateness of each emulated base
time; see :mod:`experiments.clock.calibration`).

    python -m experiments.calibrate [--profile quick] [--only ID ...] [--force] [--file PATH]

Writes the machine's calibration file (``~/.cache/apam-harness/calibration-<host hash>.json``; ``--file`` or
``$APAM_CALIBRATION`` name another), which every results folder reuses; entries that exist are kept unless
``--force`` (``make calibrate FORCE=1``) drops them first. Prints every entry with its repeats' spread.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from experiments.clock.calibration import Calibration, cost_model, emulated_lateness
from experiments.errors import ConfigError
from experiments.settings.compose import compose_jobs, job_overrides, profile_sweep
from experiments.reproduce import EXPERIMENTS
from experiments.training.sampling import split_batch


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m experiments.calibrate", description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="quick", choices=["smoke", "quick", "long", "paper"])
    ap.add_argument("--results-dir", type=Path, default=None, help="ignored (kept for old Makefiles): one file per "
                    "machine serves every results folder")
    ap.add_argument("--only", nargs="*", default=None, metavar="ID")
    ap.add_argument("--force", action="store_true", help="measure every cost anew (drop the existing entries first)")
    ap.add_argument("--file", type=Path, default=None, help="the calibration file (default: this machine's)")
    args = ap.parse_args(argv)
    import torch

    from experiments.run import build_rule_from_config, resolve_device
    from problems import build_problem
    from problems.data import DataError, data_root

    torch.set_num_threads(1)
    cal = Calibration(args.file)
    if args.force:
        cal.drop()
        print(f"dropped every entry of {cal.path}: measuring anew", file=sys.stderr)
    problems = {}
    for exp in args.only or EXPERIMENTS:
        base = [f"experiment={exp}", f"profile={args.profile}"]
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
                cost_model(problems[key], rule, split_batch(B, P) if split else [B], cfg.engine.get("costs"), cal,
                           algorithm_cfg=cfg.algorithm, ref_batch=B,
                           transport=cfg.engine.get("transport") or "shared_memory")
                emulated_lateness(cfg.engine, cal)  # an emulated run's twin: the waits' wake-up lateness
        except (ConfigError, DataError) as exc:
            print(f"skip {exp}: {str(exc).splitlines()[0]}", file=sys.stderr)
            continue
        print(f"calibrated {exp}", file=sys.stderr)
    entries = cal.read()["entries"]
    print(f"# {cal.path}")
    for k in sorted(entries):
        e = entries[k]
        print(f"{k}\t{e['value'] * 1e6:.1f} us\tspread {100 * e['spread']:.1f}% over {len(e['samples'])} repeats")
    return 0


if __name__ == "__main__":
    sys.exit(main())
