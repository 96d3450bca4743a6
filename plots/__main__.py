"""``python -m plots PATH [--format png|pdf] [--paper-dir DIR]``: redraw the figures of an experiment folder (or of
every experiment below a results folder) from its CSV files; prints each file written. Exit status 2 with a
one-line error for a missing folder or a missing column (below a results folder: the other experiments are still
drawn, then one line per failed experiment)."""

import argparse
import sys

from .draw import FORMATS, draw_experiment, find_experiments
from .errors import PlotError


def main(argv=None):
    """CLI entry point; returns the exit status (0 ok, 2 bad input)."""
    parser = argparse.ArgumentParser(
        prog="python -m plots",
        description="Redraw every figure of an experiment folder (or of every experiment below a results folder) "
        "from its CSV files alone; prints the files written.")
    parser.add_argument("path", help="results/<experiment> folder, or results/ for every experiment")
    parser.add_argument("--format", default="png", choices=FORMATS, help="figure file format (default png)")
    parser.add_argument("--paper-dir", default=None,
                        help="folder with <experiment>.csv of the paper's numbers (default PATH/../paper)")
    args = parser.parse_args(argv)
    try:
        folders = find_experiments(args.path)
    except PlotError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    errors = []
    written = 0
    for folder in folders:
        try:
            paths = draw_experiment(folder, args.format, args.paper_dir)
        except PlotError as exc:
            errors.append(str(exc))
            continue
        for path in paths:
            print(path, flush=True)
        written += len(paths)
    for message in errors:
        print(f"error: {message}", file=sys.stderr)
    if errors:
        return 2
    if not written:
        print(f"no figure applies to {args.path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
