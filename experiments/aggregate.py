"""``python -m experiments.aggregate PATH...``: write speedup.csv for each experiment folder given.

The table itself (speed-up and efficiency against P = 1, docs/INTERFACES.md) is :mod:`experiments.analysis.speedup`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from experiments.analysis.speedup import (
    BASES,
    COLUMNS,
    GROUP,
    say_if_no_row,
    speedup_table,
    write_speedup,
)
from experiments.cli import Parser
from experiments.errors import ConfigError, Interrupted
from experiments.log import get_logger
from experiments.stops import loaded
from experiments.store.atomic import writable
from experiments.store.table import file_problem, read_experiment_summary

log = get_logger(__name__)

__all__ = ["BASES", "COLUMNS", "GROUP", "main", "speedup_table", "write_speedup"]  # the callers' old names


def output_problem(path: Path) -> str | None:
    """Why a command cannot write the file ``path`` (it replaces the file by a new one: experiments/store/atomic.py),
    in one line naming it: something other than a regular file is there (a folder, a named pipe, a link to nothing),
    or a file this process may not write (a read-only mode, an immutable flag: refused rather than replaced); None
    when it can or there is none. Checked for every output before any is written (this command, the report's)."""
    if (path.exists() or path.is_symlink()) and not path.is_file():
        return f"{path}: {file_problem(path) or 'not a regular file'}; move it away"
    if path.is_file() and not os.access(path, os.W_OK):
        return f"{path}: not writable (read-only or immutable); make it writable or move it away"
    return None


def main(argv: list[str] | None = None) -> int:
    """Write speedup.csv for each experiment folder given; exit 2 (one-line error, nothing written) when any folder
    has no summary, a damaged one, or cannot be written; 130 on Ctrl-C (one line; each file whole or as it was)."""
    try:
        return _aggregate(argv)
    except KeyboardInterrupt as exc:  # as experiments.reproduce: one line, 128 + the signal
        log.info("interrupted: each speedup.csv is written whole or left as it was; run it again for the rest")
        return 128 + Interrupted.signum_of(exc)


def _aggregate(argv: list[str] | None) -> int:
    """:func:`main` without its Ctrl-C."""
    ap = Parser(
        "python -m experiments.aggregate",
        description="Write speedup.csv (speed-up and efficiency against P = 1) from the "
        "summary.csv of each experiment folder given.",
    )
    ap.add_argument("paths", nargs="+", type=Path, help="experiment folders (results/<experiment>)")
    args = ap.parse_args(argv)
    for p in args.paths:  # every folder checked before any is written: one bad path leaves every folder as it was
        if p.is_file():
            log.error(f"{p}: a file, not an experiment folder (give {p.parent})")
            return 2
        if not (p / "summary.csv").is_file():
            why = file_problem(p / "summary.csv") or "no such file"
            log.error(f"{p / 'summary.csv'}: {why}")
            return 2
        if not writable(p):
            log.error(f"{p}: not writable (speedup.csv is written there)")
            return 2
        if why := output_problem(p / "speedup.csv"):  # a folder there: as plots and report
            log.error(why)
            return 2
        try:
            read_experiment_summary(p)
        except ConfigError as exc:  # a damaged summary, another experiment's runs: one line naming it
            log.error(f"{exc}")
            return 2
    for p in args.paths:
        try:
            out = write_speedup(p)
        except ConfigError as exc:  # the summary was damaged since the check
            log.error(f"{exc}")
            return 2
        except OSError as exc:  # a full disk: one line naming the file
            log.error(f"{exc.filename or p}: cannot write speedup.csv ({exc.strerror or exc})")
            return 1
        print(out)
        say_if_no_row(out)
    return 0


if __name__ == "__main__":
    loaded()  # a stop signal from here on is the command's own (experiments.stops.while_loading)
    sys.exit(main())
