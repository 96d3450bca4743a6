"""``python -m experiments.report DIR [--profile P] [--no-figures]``: write DIR/REPORT.md and DIR/verdicts.csv from
the CSVs of a results folder (``make reproduce``'s, or a folder of your own runs: ``results_dir=DIR``), after
redrawing its figures (``python -m plots DIR``).

DIR holds one folder per experiment (``DIR/<experiment>/summary.csv``, docs/INTERFACES.md). The paper's claims are
judged for the experiments of conf/experiment/ (their rules: experiments/report/sections); any other experiment
folder gets a section of its runs' means and speed-ups. With ``DIR/reproduce_status.json`` (written by ``make
reproduce``) the report lists every experiment of the profile, present or not, as ``make reproduce`` does; without
it, the folders present. Exit status: 0 report written (and every figure drawn); 1 a figure could not be drawn
(the report names it); 2 bad input (no such folder, not a results folder, a REPORT.md or verdicts.csv that cannot
be replaced: nothing written), with a one-line error; 130 Ctrl-C, one line.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from experiments.aggregate import output_problem
from experiments.analysis.speedup import speedup_frame
from experiments.cli import Parser, folder_arg
from experiments.errors import ConfigError, Interrupted
from experiments.figures import draw_figures
from experiments.log import get_logger
from experiments.report.load import (
    experiment_folder,
    experiment_folders,
    restore_summaries,
    results_folder_problem,
    run_profile,
    statuses,
)
from experiments.report.writer import ORDER, write_report
from experiments.stops import loaded
from experiments.store.atomic import writable
from experiments.store.table import read_experiment_summary

log = get_logger(__name__)

PROFILES = ("smoke", "quick", "long", "paper")
OUTPUTS = ("REPORT.md", "verdicts.csv")  # what write_report writes in the results folder


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = Parser(
        "python -m experiments.report",
        description="Write DIR/REPORT.md (every claim's verdict first, then one section per experiment) and "
        "DIR/verdicts.csv from the CSVs of a results folder, after redrawing its figures.",
        epilog="DIR is a results folder: results/ (make reproduce), results-long/, or the results_dir of your own "
        "runs (python -m experiments.run ... results_dir=DIR). Exit status: 0 written, 1 a figure not drawn "
        "(named in the report), 2 bad input.",
    )
    ap.add_argument(
        "results_dir", type=folder_arg, metavar="DIR", help="results folder holding <experiment>/summary.csv"
    )
    ap.add_argument(
        "--profile",
        choices=PROFILES,
        default=None,
        help="the profile the runs were made with, when neither their status file nor their configs name it "
        "(else quick); names the report and its column in the verdicts per profile. Another profile than the "
        "one they name is refused",
    )
    ap.add_argument("--no-figures", action="store_true", help="write the report without redrawing the figures")
    return ap.parse_args(argv)


def check(results_dir: Path) -> str | None:
    """Why the report cannot be written in ``results_dir`` (None when it can): no results folder
    (:func:`~experiments.report.load.results_folder_problem`), not writable, or a REPORT.md or verdicts.csv there
    that cannot be replaced (:func:`~experiments.aggregate.output_problem`): checked before anything is written, so
    a report is never written without its verdicts, nor the other way round."""
    if why := results_folder_problem(results_dir):
        return why
    if not writable(results_dir):
        return f"{results_dir}: not writable (REPORT.md, verdicts.csv and the figures are written there)"
    return next((why for name in OUTPUTS if (why := output_problem(Path(results_dir) / name))), None)


def main(argv: list[str] | None = None) -> int:
    """Console entry (module docstring); Ctrl-C ends it with one line and exit 130 (every file it wrote is whole:
    experiments/store/atomic.py)."""
    try:
        return _report(parse(argv))
    except KeyboardInterrupt as exc:  # as experiments.reproduce: one line, 128 + the signal
        log.info("interrupted: the files written so far are whole; run it again to finish the report and figures")
        return 128 + Interrupted.signum_of(exc)


def _report(args: argparse.Namespace) -> int:
    """:func:`main` after its arguments are parsed."""
    problem = check(args.results_dir)
    if problem:
        log.error(f"{problem}")
        return 2
    results_dir = args.results_dir
    try:  # a damaged summary or status file: one line naming it, before any figure is drawn
        restore_summaries(results_dir)  # a summary lost while its runs are there: rebuilt from them
        present = experiment_folders(results_dir)
        status = statuses(results_dir)
        # a make reproduce folder lists its whole profile; a folder of one's own runs, the experiments it holds
        names = list(ORDER) if status else [e for e in ORDER if e in present]
        names += [e for e in present if e not in names]
        for name in names:  # a file with an experiment's name: one line, as aggregate says it
            experiment_folder(results_dir, name)
        frames = {name: read_experiment_summary(results_dir / name) for name in present}
        for name in present:  # a damaged speed-up table is written again before any figure reads it
            speedup_frame(results_dir / name)
        made_with = run_profile(results_dir)
        if args.profile and made_with and args.profile != made_with:  # it titled quick runs "long", and put their
            raise ConfigError(  # verdicts in the long column of the verdicts per profile
                f"--profile {args.profile}: the runs under {results_dir} were made with profile {made_with} "
                "(their status file and configs say so); leave --profile out"
            )
        profile = args.profile or made_with or "quick"
    except ConfigError as exc:
        log.error(f"{exc}")
        return 2
    for name in present:  # runs without a make reproduce call behind them: no status to tell
        status.setdefault(
            name,
            {"status": "not run", "message": f"no run in {name}/summary.csv yet"}
            if frames[name].empty
            else {"status": "runs found", "message": ""},
        )
    missing = []
    if not args.no_figures:
        for name in present:
            drawn = draw_figures(results_dir / name, results_dir)
            entry = {k: v for k, v in status[name].items() if k not in ("figures", "figures_missing")}
            status[name] = entry | ({"figures_missing": drawn["figures_missing"]} if "figures_missing" in drawn else {})
            missing += [f"{name}/{m['figure']}" for m in drawn.get("figures_missing", [])]
    try:
        path = write_report(results_dir, profile, status, names)
    except OSError as exc:  # a full disk, a file made read-only: one line naming it
        log.error(f"{exc.filename or results_dir}: cannot write the report ({exc.strerror or exc})")
        return 1
    print(path)
    if missing:
        log.error(f"{len(missing)} figure(s) not drawn (named in {path}): {', '.join(missing)}")
        return 1
    return 0


if __name__ == "__main__":
    loaded()  # a stop signal from here on is the command's own (experiments.stops.while_loading)
    sys.exit(main())
