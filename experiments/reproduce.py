"""``make reproduce``: every experiment of a profile as Hydra multiruns, then speed-up tables, figures, report.

    python -m experiments.reproduce --profile quick --results-dir results [--force] [--only ID ...]

Resumable: each sweep skips runs whose results exist (``force=true`` reruns them), so an interrupted call
continues where it stopped. An experiment whose data is missing (or whose settings cannot run here) is skipped with
the reason, and the report says so. Exit code 0 when every experiment ran or was skipped for a stated reason;
1 when a sweep crashed.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXPERIMENTS = ["lr_speedup", "lenet5_speedup", "allcnn_sync_vs_async", "artificial_delay", "large_time_per_epoch",
               "large_accuracy", "tau_threshold", "tau_threshold_lenet5", "stragglers", "model_validation"]


def run_sweep(experiment: str, profile: str, results_dir: Path, force: bool) -> dict:
    """Run one experiment's sweep in a child process; return ``{status, message, wall_s}``.

    ``status`` is ``ran``, ``skipped`` (bad input for this machine, e.g. missing data: the child's one-line error is
    the message) or ``crashed``.
    """
    exp_dir = results_dir / experiment
    exp_dir.mkdir(parents=True, exist_ok=True)
    err_file = exp_dir / ".sweep_error"
    err_file.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "experiments.run", "-m", f"experiment={experiment}", f"profile={profile}",
           f"results_dir={results_dir}"] + (["force=true"] if force else [])
    env = dict(os.environ, APAM_ERROR_FILE=str(err_file), PYTHONUNBUFFERED="1")
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, env=env)
    wall = time.perf_counter() - t0
    if proc.returncode == 2 and err_file.exists():
        msg = err_file.read_text().strip()
        err_file.unlink()
        return {"status": "skipped", "message": msg, "wall_s": wall}
    if proc.returncode != 0:
        return {"status": "crashed", "message": f"exit code {proc.returncode}: {' '.join(cmd)}", "wall_s": wall}
    return {"status": "ran", "message": "", "wall_s": wall}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m experiments.reproduce", description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="quick", choices=["smoke", "quick", "paper"])
    ap.add_argument("--results-dir", default=None, type=Path,
                    help="default: results (quick), results-<profile> otherwise")
    ap.add_argument("--force", action="store_true",
                    help="rerun runs whose results exist (and measure the simulated clock's costs anew)")
    ap.add_argument("--keep-calibration", action="store_true",
                    help="with --force: keep the machine's calibration (e.g. made by make calibrate just before)")
    ap.add_argument("--only", nargs="*", default=None, metavar="ID", help="a subset of experiment ids")
    args = ap.parse_args(argv)
    results_dir = args.results_dir or Path("results" if args.profile == "quick" else f"results-{args.profile}")
    experiments = args.only or EXPERIMENTS
    unknown = [e for e in experiments if e not in EXPERIMENTS]
    if unknown:
        print(f"error: --only {unknown[0]}: unknown experiment (known: {', '.join(EXPERIMENTS)})", file=sys.stderr)
        return 2
    results_dir.mkdir(parents=True, exist_ok=True)
    if args.force and not args.keep_calibration:
        from experiments.calibration import Calibration

        cal = Calibration()  # the machine's file, shared by every results folder
        cal.drop()  # a forced rerun measures this machine's costs anew (runs measure on first use)
        print(f"dropped {cal.path}: the simulated clock is calibrated anew on this machine", file=sys.stderr)
    status_path = results_dir / "reproduce_status.json"
    statuses = json.loads(status_path.read_text()) if status_path.exists() else {}
    t0 = time.perf_counter()
    for i, exp in enumerate(experiments, 1):
        print(f"== [{i}/{len(experiments)}] {exp} (profile {args.profile})", file=sys.stderr, flush=True)
        st = run_sweep(exp, args.profile, results_dir, args.force)
        st["profile"] = args.profile
        exp_dir = results_dir / exp
        if (exp_dir / "summary.csv").exists():
            from experiments.aggregate import write_speedup

            write_speedup(exp_dir)
            try:
                import plots

                drawn = plots.draw_experiment(exp_dir, paper_dir=REPO / "results" / "paper")
                st["figures"] = [str(p.relative_to(results_dir)) for p in drawn]
            except Exception as exc:  # a figure that cannot be drawn is reported, the rest goes on
                st["figures_error"] = f"{type(exc).__name__}: {exc}".splitlines()[0]
                print(f"warning: figures of {exp}: {st['figures_error']}", file=sys.stderr)
        elif st["status"] == "skipped":
            try:
                exp_dir.rmdir()
            except OSError:
                pass
        statuses[exp] = st
        status_path.write_text(json.dumps(statuses, indent=1, sort_keys=True))
        print(f"== {exp}: {st['status']} in {st['wall_s']:.0f} s" + (f" -- {st['message']}" if st["message"] else ""),
              file=sys.stderr, flush=True)
    from experiments.report import write_report

    report = write_report(results_dir, args.profile, statuses)
    print(f"wrote {report} ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    return 1 if any(s["status"] == "crashed" for s in statuses.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
