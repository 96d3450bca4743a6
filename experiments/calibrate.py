"""``make calibrate``: measure the simulated clock's costs on this machine up front, for every simulated job of a
profile (gradients per problem and batch size, master updates per rule, each transport's message latency and master
overhead per dimension, and the wake-up lateness of each emulated base time; experiments/clock/measure.py).

    python -m experiments.calibrate [--profile quick] [--only ID ...] [--force] [--file PATH]

Writes the machine's calibration file (experiments/clock/calibration.py: ``--file`` or ``$APAM_CALIBRATION`` name
another); entries that exist are kept unless ``--force`` (``make calibrate FORCE=1``) drops them first. Prints the
entries the experiments use (``--only``: those of the experiments named) with their repeats' spread and when they
were measured, flagging those above the bound (experiments/clock/spread.py ``SPREAD_BOUND``; a wide entry is
measured again, up to ``POOL_ROUNDS`` rounds of repeats pooled), after one line naming the file, its age and the
worst spread. A calibration file that is not a regular file (a named pipe, a folder) or cannot be read: one line
naming it, exit 2; a damaged one (not JSON, cut short, empty, wrong shape) is set aside as ``<name>.damaged-<n>``
with one line, and measured anew.
"""

from __future__ import annotations

import signal
import sys

import torch
from tqdm.auto import tqdm

from experiments.cli import Parser, file_arg
from experiments.clock.calibration import Calibration, used_line, used_summary
from experiments.clock.resolve import resolve
from experiments.clock.spread import above_bound
from experiments.errors import TERM_SIGNALS, CalibrationError, ConfigError, Interrupted
from experiments.log import get_logger
from experiments.reproduce import EXPERIMENTS
from experiments.settings.build import build_settings, make_rule
from experiments.settings.compose import compose_jobs, job_overrides, profile_sweep
from experiments.settings.preflight import make_problem, resolve_device
from experiments.stops import as_interrupt, loaded

log = get_logger(__name__)


def main(argv: list[str] | None = None) -> int:
    ap = Parser("python -m experiments.calibrate", __doc__)
    ap.add_argument("--profile", default="quick", choices=["smoke", "quick", "long", "paper"])
    ap.add_argument(
        "--only",
        nargs="+",
        default=None,
        metavar="ID",
        help="these experiments only (and print only the entries they use)",
    )
    ap.add_argument("--force", action="store_true", help="measure every cost anew (drop the existing entries first)")
    ap.add_argument("--file", type=file_arg, default=None, help="the calibration file (default: this machine's)")
    ap.add_argument(
        "--progress",
        choices=["auto", "on", "off"],
        default="auto",
        help="a progress bar with an ETA on stderr (auto: on a terminal)",
    )
    args = ap.parse_args(argv)
    unknown = [e for e in args.only or [] if e not in EXPERIMENTS]
    if unknown:
        log.error(f"--only {unknown[0]}: unknown experiment (known: {', '.join(EXPERIMENTS)})")
        return 2
    torch.set_num_threads(1)
    # a job scheduler's stop, a closed terminal: as Ctrl-C (exit 128 + the signal); the caller's handlers come back
    before = {sig: signal.signal(sig, as_interrupt) for sig in TERM_SIGNALS}
    try:
        return _calibrate(args)
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def _calibrate(args) -> int:
    """:func:`main` after its arguments are checked: measure, then print the entries used."""
    try:
        cal = Calibration(args.file)  # an empty $APAM_CALIBRATION without --file: refused
        cal.read()  # a file that is not a regular file, or unreadable: one line naming it, before anything runs
        if args.force:
            cal.drop()
            log.info(f"dropped every entry of {cal.path}: measuring anew")
    except ConfigError as exc:
        log.error(f"{str(exc).splitlines()[0]}")
        return 2
    jobs, used = [], {}
    for exp in args.only or EXPERIMENTS:
        base = [f"experiment={exp}", f"profile={args.profile}"]
        try:
            combos, _ = job_overrides(base + profile_sweep(base), multirun=True)
            jobs += [
                (exp, s) for s in (build_settings(c) for c in compose_jobs(combos)) if s.engine.name == "simulated"
            ]
        except ConfigError as exc:
            log.info(f"skip {exp}: {str(exc).splitlines()[0]}")
    for exp in args.only or ():  # a wall-clock experiment: nothing to measure, which the empty list left unsaid
        if exp not in {e for e, _ in jobs}:
            log.info(f"{exp}: no run of profile {args.profile} is on the simulated clock: nothing to measure for it")
    problems = {}
    show = {"on": True, "off": False}.get(args.progress, sys.stderr.isatty())
    try:
        for exp, settings in tqdm(jobs, desc="calibrate", unit="job", disable=not show, file=sys.stderr):
            key = (settings.problem.name, settings.problem.max_train)
            try:
                if key not in problems:
                    problems[key] = make_problem(settings, resolve_device(settings.device))
                costs = resolve(settings, problems[key], make_rule(settings), cal)
            except CalibrationError:  # the calibration file itself is unusable: every job shares it, handled below
                raise
            except ConfigError as exc:
                log.info(f"skip a job of {exp}: {str(exc).splitlines()[0]}")
                continue
            for k in (costs.used or {}).get("entries", {}):
                used[k] = exp
    except ConfigError as exc:
        log.error(f"{str(exc).splitlines()[0]}")
        return 2
    except KeyboardInterrupt as exc:
        log.info(
            f"interrupted: entries measured so far are kept in {cal.path}; a rerun measures only the missing ones"
            if cal.path.exists()
            else "interrupted before any entry was measured"
        )
        return 128 + Interrupted.signum_of(exc)
    entries = cal.read()["entries"]
    shown = {k: entries[k] for k in used if k in entries}
    if shown:
        log.info(used_line(used_summary(cal.path, shown)))
    print(f"# {cal.path}" + (f" (entries used by {', '.join(args.only)})" if args.only else ""))
    for k in sorted(shown):
        e = shown[k]
        flag = "  ABOVE BOUND" if above_bound(k, e) else ""
        print(
            f"{k}\t{e['value'] * 1e6:.1f} us\tspread {100 * e['spread']:.1f}% over {len(e['samples'])} repeats"
            f"\tmeasured {e.get('measured', '?')}{flag}"
        )
    return 0


if __name__ == "__main__":
    loaded()  # a stop signal from here on is the command's own (experiments.stops.while_loading)
    sys.exit(main())
