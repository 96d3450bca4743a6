"""``make calibrate``: measure the simulated clock's costs on this machine up front, for every simulated job of a
profile (gradients per problem and batch size, master updates per rule, each transport's message latency and master
overhead per dimension, and the wake-up lateness of each emulated base time; experiments/clock/measure.py).

    python -m experiments.calibrate [--profile quick] [--only ID ...] [--force] [--file PATH]

Writes the machine's calibration file (experiments/clock/calibration.py: ``--file`` or ``$APAM_CALIBRATION`` name
another); entries that exist are kept unless ``--force`` (``make calibrate FORCE=1``) drops them first. Prints the
entries it used with their repeats' spread.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from experiments.clock.calibration import Calibration
from experiments.clock.resolve import resolve
from experiments.errors import ConfigError
from experiments.reproduce import EXPERIMENTS
from experiments.runner import make_problem, resolve_device
from experiments.settings.build import build_settings, make_rule
from experiments.settings.compose import compose_jobs, job_overrides, profile_sweep


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m experiments.calibrate", description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="quick", choices=["smoke", "quick", "long", "paper"])
    ap.add_argument("--only", nargs="*", default=None, metavar="ID")
    ap.add_argument("--force", action="store_true", help="measure every cost anew (drop the existing entries first)")
    ap.add_argument("--file", type=Path, default=None, help="the calibration file (default: this machine's)")
    args = ap.parse_args(argv)
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
                settings = build_settings(cfg)
                if settings.engine.name != "simulated":
                    continue
                key = (settings.problem.name, settings.problem.max_train)
                if key not in problems:
                    problems[key] = make_problem(settings, resolve_device(settings.device))
                resolve(settings, problems[key], make_rule(settings), cal)
        except ConfigError as exc:
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
