"""``python -m plots PATH [--format png|pdf] [--paper-dir DIR]``: redraw the figures of an experiment folder (or of
every experiment below a results folder) from its CSV files; prints each file written.

Every figure that can be drawn is drawn; then one line per figure (or experiment) that could not be, naming it and
why, on stderr. Exit status: 0 every figure drawn; 2 bad input only (a missing folder or column, an unreadable CSV);
1 a figure failed while drawing (a bug of the plotting code: the line names the exception); 130 Ctrl-C."""

import sys
from pathlib import Path

from experiments.cli import Parser, folder_arg
from experiments.errors import Interrupted
from experiments.settings.fields import folder_problem
from experiments.stops import loaded

from .draw import FORMATS, draw_experiment, find_experiments, trace_gaps
from .errors import FigureError, PlotError


def main(argv=None):
    """CLI entry point; returns the exit status (0 every figure drawn, 2 bad input, 1 a figure failed to draw, 130
    Ctrl-C: one line, every figure written so far whole, plots/style.py)."""
    try:
        return _draw(argv)
    except KeyboardInterrupt as exc:  # as experiments.reproduce: one line, 128 + the signal
        print("interrupted: the figures drawn so far are whole; run it again to draw the rest", file=sys.stderr)
        return 128 + Interrupted.signum_of(exc)


def _draw(argv):
    """:func:`main` without its Ctrl-C."""
    parser = Parser(
        "python -m plots",
        description="Redraw every figure of an experiment folder (or of every experiment below a results folder) "
        "from its CSV files alone; prints the files written.",
    )
    parser.add_argument(  # '' (``make plots RESULTS=``) is no folder: it drew the current folder's
        "path", type=folder_arg, help="results/<experiment> folder, or results/ for every experiment"
    )
    parser.add_argument("--format", default="png", choices=FORMATS, help="figure file format (default png)")
    parser.add_argument(
        "--paper-dir", default=None, help="folder with <experiment>.csv of the paper's numbers (default PATH/../paper)"
    )
    args = parser.parse_args(argv)
    if args.paper_dir is not None and (why := folder_problem(args.paper_dir)):  # a typo drew no paper curves, exit 0
        print(f"error: --paper-dir {args.paper_dir}: {why}", file=sys.stderr)
        return 2
    try:
        folders = find_experiments(args.path)
    except PlotError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    errors = []
    bug = False  # a figure failed while drawing (exit 1), not for bad input (exit 2)
    written = 0
    for folder in folders:
        before = len(errors)
        try:
            paths = draw_experiment(folder, args.format, args.paper_dir)
        except FigureError as exc:
            paths = exc.written
            errors.extend(str(exc).splitlines())
            bug = bug or not exc.bad_input
        except PlotError as exc:
            paths = []
            errors.append(str(exc))
        nothing, curves = trace_gaps(folder)  # as the report names them: fewer curves, never without a word
        if not paths and len(errors) == before and nothing:
            errors.append(nothing)
        elif curves:
            errors.append(f"{folder}: {curves}")
        for path in paths:
            print(path, flush=True)
        written += len(paths)
        alone = len(folders) == 1  # one experiment pointed at a paper folder (a whole results folder: not all have one)
        if alone and args.paper_dir is not None and not (Path(args.paper_dir) / f"{Path(folder).name}.csv").is_file():
            print(  # a paper folder given for the paper's numbers, without this experiment's: said, not silent
                f"warning: --paper-dir {args.paper_dir} has no {Path(folder).name}.csv: {folder}'s figures show no "
                "paper numbers",
                file=sys.stderr,
            )
    for message in errors:
        print(f"error: {message}", file=sys.stderr)
    if errors:
        return 1 if bug else 2
    if not written:
        print(f"no figure applies to {args.path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    loaded()  # a stop signal from here on is the command's own (experiments.stops.while_loading)
    sys.exit(main())
