"""Drawing every figure that applies to an experiment folder, or to every experiment below a results folder."""

import os
from pathlib import Path

from experiments.settings.fields import folder_problem

from .async_methods import draw_async_methods, draw_engine_check
from .curves import draw_algorithm_comparison, draw_curves_by_workers, draw_delay_sweep
from .data import is_experiment_dir, load_experiment
from .errors import FigureError, PlotError
from .speedup import draw_speedup, draw_time_per_epoch
from .staleness import draw_staleness
from .stragglers import draw_stragglers
from .tau import draw_tau_threshold
from .validation import draw_model_validation

FORMATS = ("png", "pdf")
# Each takes (ExperimentData, fmt) and returns the paths it wrote ([] when its data is not there).
FIGURES = (
    draw_speedup,
    draw_time_per_epoch,
    draw_curves_by_workers,
    draw_algorithm_comparison,
    draw_delay_sweep,
    draw_staleness,
    draw_tau_threshold,
    draw_stragglers,
    draw_model_validation,
    draw_async_methods,
    draw_engine_check,
)


def _check_format(fmt):
    if fmt not in FORMATS:
        raise PlotError(f"format '{fmt}' not supported: use one of {', '.join(FORMATS)}")


def draw_experiment(path, fmt="png", paper_dir=None):
    """Redraw every figure that applies to experiment folder ``path`` from its CSV files alone.

    Args:
        path: ``results/<experiment>`` (holding summary.csv, speedup.csv and/or runs/).
        fmt: "png" (default) or "pdf".
        paper_dir: folder with ``<experiment>.csv`` holding the paper's numbers; default ``path/../paper``.
    Returns:
        list of ``Path`` written under ``path/figures/``, in drawing order. When every figure was drawn, the other
        files of format ``fmt`` in ``path/figures/`` (stale: no longer given by the CSVs) are deleted -- unless none
        was drawn because the runs' traces are not there (they are kept).
    Raises:
        PlotError: missing folder or unknown format; MissingColumnError: a CSV every figure needs lacks a column.
        FigureError: one or more figures could not be drawn (a figure's missing column, or any exception while
            drawing it); raised after every other figure was drawn, naming each failed figure and its reason
            (``exc.written`` holds the files that were drawn).
    """
    _check_format(fmt)
    exp = load_experiment(path, paper_dir)
    written, failures, exceptions = [], [], []
    for figure in FIGURES:
        try:
            written.extend(figure(exp, fmt))
        except Exception as exc:  # noqa: BLE001 -- named in the FigureError below, never dropped
            failures.append((figure_name(figure), _reason(exc)))
            exceptions.append(exc)
    if failures:
        raise FigureError(path, written, failures, exceptions)
    if written or trace_gaps(path)[0] is None:  # no figure because the traces are gone: the old ones are kept
        _remove_stale(exp.figures_dir, fmt, written)
    return written


def _remove_stale(figures_dir, fmt, written):
    """Delete the ``*.fmt`` files of ``figures_dir`` that a complete drawing did not write: figures that today's CSVs
    no longer give (a figure split or renamed, a line that left), which the report would otherwise still show."""
    keep = {Path(p).resolve() for p in written}
    for f in Path(figures_dir).glob(f"*.{fmt}"):
        if f.resolve() not in keep:
            f.unlink()


def figure_name(figure):
    """The name of a figure family: its drawing function without ``draw_`` (``draw_staleness`` -> ``staleness``)."""
    return figure.__name__.removeprefix("draw_")


def _reason(exc):
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else '(no message)'}"


def find_experiments(path):
    """``[path]`` when it is an experiment folder, else its sub-folders that are (``paper/`` excluded), sorted.

    Raises:
        PlotError: ``path`` is not a folder, or holds no experiment folder.
    """
    path = Path(path)
    if why := folder_problem(path):
        raise PlotError(f"{path}: {why}")
    if is_experiment_dir(path):
        return [path]
    found = sorted(p for p in path.iterdir() if p.is_dir() and p.name != "paper" and is_experiment_dir(p))
    if not found:
        raise PlotError(f"{path}: no experiment folder here (expected summary.csv, speedup.csv or runs/)")
    return found


def draw_path(path, fmt="png", paper_dir=None):
    """``draw_experiment`` for the experiment folder ``path``, or for every experiment folder below ``path``
    (e.g. ``results/``). Returns all written paths; raises at the first experiment that fails (PlotError,
    FigureError)."""
    _check_format(fmt)
    written = []
    for folder in find_experiments(path):
        written.extend(draw_experiment(folder, fmt, paper_dir))
    return written


def _there(folder: Path) -> bool:
    """Whether the run folder ``folder`` is there: a folder, or a path that cannot be looked at (too long: named as a
    run without a readable trace, not as one never copied)."""
    try:
        os.stat(folder)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError:
        return True
    return os.path.isdir(folder)


def trace_gaps(exp_dir: Path) -> tuple[str | None, str | None]:
    """What the runs' missing trace.csv files keep from being drawn, from one read of ``exp_dir``'s summary.csv:
    ``(nothing, curves)``. ``nothing``: why an experiment that drew no figure drew none, when runs of its summary
    have no trace.csv file under runs/ (the caller uses it only when nothing was drawn). ``curves``: the runs, not
    failed, whose folder is there without a readable trace.csv file (deleted, not copied, a folder or a pipe in its
    place, damaged: experiments/store/sink.py :func:`trace_problem`):
    the figures drawn from traces leave them out, so they are named. A folder of summaries alone (no run folders) has
    no ``curves`` line; (None, None) when the summary cannot be read (the drawing says so) or lists no run."""
    from experiments.errors import ConfigError
    from experiments.store.damage import trace_problem
    from experiments.store.table import read_summary_frame

    exp_dir = Path(exp_dir)
    try:
        summary = read_summary_frame(exp_dir / "summary.csv")
    except (ConfigError, OSError):
        return None, None
    if summary.empty:
        return None, None
    ids = [str(r) for r in summary["run_id"]]
    # os.path: False where a path is past the system's length limit (pathlib raised): such a run is lost, named
    gone = [r for r in ids if not os.path.isfile(exp_dir / "runs" / r / "trace.csv")]
    finished = {str(r) for r in summary["run_id"][summary["status"] != "failed"]}  # a failed run may lack its trace
    lost = [r for r in gone if r in finished and _there(exp_dir / "runs" / r)]
    lost += [r for r in ids if r not in gone and trace_problem(exp_dir / "runs" / r / "trace.csv")]
    nothing = (
        f"{exp_dir}: no figure drawn: its figures are drawn from the runs' trace.csv, and {len(gone)} of the "
        f"{len(ids)} runs of summary.csv have none under runs/ (first: {gone[0]})"
        if gone
        else None
    )
    curves = (
        f"{len(lost)} run(s) of summary.csv have no trace.csv that is a readable file (first: {lost[0]}): their curves "
        "are not drawn"
        if lost
        else None
    )
    return nothing, curves
