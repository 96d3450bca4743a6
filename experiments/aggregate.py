"""``python -m experiments.aggregate PATH...``: write speedup.csv for each experiment folder given.

The table itself (speed-up and efficiency against P = 1, docs/INTERFACES.md) is :mod:`experiments.analysis.speedup`.
"""

from __future__ import annotations

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
from experiments.errors import ConfigError
from experiments.log import get_logger
from experiments.store.atomic import writable
from experiments.store.table import file_problem, read_summary_frame

log = get_logger(__name__)

__all__ = ["BASES", "COLUMNS", "GROUP", "main", "speedup_table", "write_speedup"]  # the callers' old names


def main(argv: list[str] | None = None) -> int:
    """Write speedup.csv for each experiment folder given; exit 2 (one-line error, nothing written) when any folder
    has no summary, a damaged one, or cannot be written."""
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
        target = p / "speedup.csv"
        if (target.exists() or target.is_symlink()) and not target.is_file():  # a folder there: as plots and report
            log.error(f"{target}: {file_problem(target) or 'not a regular file'}; move it away")
            return 2
        try:
            read_summary_frame(p / "summary.csv")
        except ConfigError as exc:  # a damaged summary: one line naming it
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
    sys.exit(main())
