"""Loading an experiment folder's CSV files (the "Result files" of docs/INTERFACES.md) into pandas frames.

Layout read (``PATH`` = ``results/<experiment>``)::

    PATH/summary.csv                    one row per run
    PATH/speedup.csv                    one row per (algorithm, engine, clock, workers, basis)
    PATH/runs/<run_id>/trace.csv        one row per evaluation point
    PATH/runs/<run_id>/staleness.csv    histogram: staleness, count (identity from the summary row of run_id)
    PATH/runs/<run_id>/predicted_staleness.csv   a measured run's predicted histograms: prediction, staleness, count
    PATH/../paper/<experiment>.csv      the paper's numbers (optional)

Each file has a set of required columns (``REQUIRED``); a missing one raises ``MissingColumnError`` naming the
column and the file. Other columns are optional: whether they exist and how many distinct values they hold decides
which figures apply. Text columns stay text, ``master_computes`` is read as a truth value, every other column is
parsed as a number (empty cell -> NaN).

Every frame of an ``ExperimentData`` has the columns the figures group by, also when its files are older than them
(:func:`with_line_columns`): ``agents`` (compute agents: the workers, plus the master where it computes gradients
too; ``workers`` where the file has none), ``master_computes`` (False where missing), ``cores`` (text: a number,
``dedicated``, or ``""`` where missing: one setting) and ``compute_setting`` (``real``, ``emulated-0.002s``, or
``""``: how a gradient's time was made, :func:`setting_name`).
"""

import os
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from experiments.analysis.speedup import SPEEDUP_REQUIRED, speedup_frame
from experiments.store.table import SUMMARY_COLUMNS

from .errors import MissingColumnError, PlotError

TEXT_COLUMNS = frozenset(
    {
        "experiment",
        "run_id",
        "problem",
        "algorithm",
        "engine",
        "clock",
        "delay_model",
        "basis",
        "status",
        "message",
        "metric",
        "unit",
        "source",
        "policy",
        "compute_spread",
        "compute_law",
        "compute",
        "transport",
        "prediction",
        "cores",
    }
)
BOOL_COLUMNS = frozenset({"master_computes"})
TRUE_TEXT = frozenset({"true", "1", "1.0", "yes"})
# The columns of a line's identity besides algorithm, engine and clock, filled by with_line_columns (summary.csv,
# speedup.csv, trace.csv: docs/INTERFACES.md): compute agents, whether the master computes, the cores.
LINE_COLUMNS = ("agents", "master_computes", "cores")
# Sweep parameters a run may vary besides workers (docs/INTERFACES.md, summary.csv).
SWEEP_COLUMNS = ("max_delay", "tau", "straggler_sigma", "straggler_slowdown")
IDENTITY = ("problem", "algorithm", "engine", "clock", "workers", "seed")

REQUIRED = {
    "summary.csv": SUMMARY_COLUMNS,  # every column of the contract, as the report and aggregate refuse one without
    "speedup.csv": SPEEDUP_REQUIRED,
    "trace.csv": ("run_id",) + IDENTITY + ("epoch", "time_s", "train_loss", "test_acc"),
    "staleness.csv": ("staleness", "count"),
    "predicted_staleness.csv": ("prediction", "staleness", "count"),
    "paper": ("problem", "algorithm", "workers", "metric", "value"),
}


def read_csv(path, required=()):
    """Read one result CSV: text columns as str, the rest numeric (NaN for empty cells).

    Args:
        path: the CSV file.
        required: column names that must be present.
    Returns:
        ``pandas.DataFrame`` (may have zero rows).
    Raises:
        MissingColumnError: a required column is absent (names column and file).
        PlotError: the file cannot be read (an I/O error) or parsed as CSV.
    """
    path = Path(path)
    try:
        df = pd.read_csv(path, dtype=str, keep_default_na=True, skipinitialspace=True)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise PlotError(f"{path}: not a readable CSV file ({type(exc).__name__})") from None
    except OSError as exc:  # an I/O error while reading (EIO): the file, named, as a damaged one
        raise PlotError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    df.columns = [str(c).strip() for c in df.columns]
    for column in required:
        if column not in df.columns:
            raise MissingColumnError(column, path)
    for column in df.columns:
        if column in TEXT_COLUMNS:
            df[column] = df[column].fillna("").astype(str).str.strip()
            if column == "cores":  # a count written through a float column ("2.0") is the count
                df[column] = df[column].str.replace(r"^(\d+)\.0*$", r"\1", regex=True)
        elif column in BOOL_COLUMNS:
            df[column] = df[column].fillna("").astype(str).str.strip().str.lower().isin(TRUE_TEXT)
        else:
            df[column] = pd.to_numeric(df[column], errors="coerce").astype(float)
    return df


def distinct(df, column):
    """Sorted distinct non-missing values of ``df[column]`` ([] when the frame or column is absent)."""
    if df is None or column not in df.columns:
        return []
    values = df[column]
    if values.dtype == object or pd.api.types.is_string_dtype(values):
        return sorted(v for v in values.unique() if v != "")
    return sorted(float(v) for v in values.dropna().unique())


def varying_sweeps(df, within=()):
    """Sweep columns (``SWEEP_COLUMNS``) that take >= 2 distinct values (missing counts as one) inside some group
    of the ``within`` columns (or over the whole frame)."""
    out = []
    if df is None or df.empty:
        return out
    for column in SWEEP_COLUMNS:
        if column not in df.columns:
            continue
        if within:
            counts = df.groupby(list(within), dropna=False)[column].nunique(dropna=False)
            varies = bool((counts >= 2).any())
        else:
            varies = df[column].nunique(dropna=False) >= 2
        if varies:
            out.append(column)
    return out


@dataclass
class ExperimentData:
    """Everything the figures read from one experiment folder.

    Attributes:
        path: the experiment folder; figures go to ``path / "figures"``.
        name: the folder's name, used to find the paper's CSV.
        experiment: the experiment id the CSVs name (their ``experiment`` column, :func:`experiment_id`), with
            which every figure title starts; the folder's name where no CSV names one.
        summary, speedup, traces, staleness, paper: frames, or None where the file(s) do not exist.
            ``traces`` concatenates every run's trace.csv; ``staleness`` every run's histogram joined with the
            identity and sweep columns of its summary row (runs without a summary row are left out).
        predicted_staleness: every measured run's predicted_staleness.csv (run_id, prediction, staleness, count),
            or None.
        files: the file each frame came from (for error messages), keyed "summary", "speedup", "trace", "paper".
    """

    path: Path
    name: str
    experiment: str = ""
    summary: pd.DataFrame | None = None
    speedup: pd.DataFrame | None = None
    traces: pd.DataFrame | None = None
    staleness: pd.DataFrame | None = None
    paper: pd.DataFrame | None = None
    predicted_staleness: pd.DataFrame | None = None
    files: dict = field(default_factory=dict)

    def __post_init__(self):
        if not self.experiment:
            self.experiment = self.name

    @property
    def figures_dir(self):
        return self.path / "figures"

    def require(self, frame, *columns):
        """Raise ``MissingColumnError`` for the first of ``columns`` absent from frame ``frame`` (a key of files)."""
        df = getattr(self, "traces" if frame == "trace" else frame)
        for column in columns:
            if column not in df.columns:
                raise MissingColumnError(column, self.files.get(frame, self.path / f"{frame}.csv"))


def is_experiment_dir(path):
    """True when ``path`` holds summary.csv, speedup.csv or a runs/ folder."""
    path = Path(path)
    return (path / "summary.csv").is_file() or (path / "speedup.csv").is_file() or (path / "runs").is_dir()


def _nonempty(df):
    return df if df is not None and not df.empty else None


def _check_tables(path):
    """Check the experiment folder's summary.csv as the report does (experiments/store/table.py
    ``read_experiment_summary``: damage, a missing column, another experiment's runs) and repair its speedup.csv as
    the report does (experiments/analysis/speedup.py ``speedup_frame``: a link, a truncated or unreadable table is
    written again, with a line saying so).

    Raises:
        PlotError: the summary is damaged or holds another experiment's runs, or speedup.csv cannot be read (one
            line naming it).
    """
    from experiments.errors import ConfigError
    from experiments.store.table import read_experiment_summary

    try:
        read_experiment_summary(path)
        if (path / "speedup.csv").exists() or (path / "speedup.csv").is_symlink():
            speedup_frame(path, compare=False)
    except ConfigError as exc:
        raise PlotError(str(exc)) from None


def _names(folder):
    """The names in ``folder`` (empty when it cannot be listed)."""
    try:
        return set(os.listdir(folder))
    except OSError:
        return set()


def _read_histogram(path, required):
    """A run's staleness.csv (or predicted_staleness.csv) as :func:`read_csv` reads it; None when there is none, or
    when it cannot be read (not a regular file, an I/O error, a last row without its newline, not CSV): that run is
    then left out of the staleness figure, with one warning naming the file, and the other figures are drawn.

    Raises:
        MissingColumnError: the file lacks a required column (a histogram of another format: named).
    """
    from experiments.log import get_logger
    from experiments.store.table import file_problem

    path = Path(path)
    why = file_problem(path)  # a path too long to open included: "File name too long" (pathlib's exists raised it)
    if why is None and not os.path.lexists(path):
        return None
    try:
        if why is None and not path.read_bytes().endswith(b"\n"):  # every row is written with its newline
            why = "the last row does not end with a newline (truncated)"
    except OSError as exc:  # an I/O error while reading (EIO): damaged as well
        why = f"cannot be read ({exc.strerror or exc})"
    if why is None:
        try:
            return read_csv(path, required)
        except MissingColumnError:
            raise
        except PlotError as exc:
            why = str(exc).removeprefix(f"{path}: ")
    get_logger(__name__).warning(f"{path}: {why}; its run is left out of the staleness figure")
    return None


def load_experiment(path, paper_dir=None):
    """Load the CSVs of experiment folder ``path``.

    Args:
        path: ``results/<experiment>``.
        paper_dir: folder holding ``<experiment>.csv`` with the paper's numbers; default ``path/../paper``.
    Returns:
        ``ExperimentData``.
    Raises:
        PlotError: ``path`` is not a folder, its summary is damaged or its speedup.csv cannot be read
            (:func:`_check_tables`). MissingColumnError: a file lacks a required column.
    """
    path = Path(path)
    if not path.is_dir():
        raise PlotError(f"{path}: no such experiment folder")
    exp = ExperimentData(path=path, name=path.resolve().name)
    summary_path = path / "summary.csv"
    if summary_path.is_file():
        exp.summary = with_line_columns(engine_names(_nonempty(read_csv(summary_path, REQUIRED["summary.csv"]))))
        exp.files["summary"] = summary_path
    _check_tables(path)
    speedup_path = path / "speedup.csv"
    if speedup_path.is_file() and not (summary_path.is_file() and exp.summary is None):  # no run: a stale table
        exp.speedup = with_line_columns(engine_names(_nonempty(read_csv(speedup_path, REQUIRED["speedup.csv"]))))
        exp.files["speedup"] = speedup_path
    # os.path.isdir / isfile: False for a path past the system's length limit, where pathlib's raise (a results
    # folder nested deep); such a run's trace is named by plots.draw.trace_gaps, its histograms by _read_histogram
    runs = sorted(p for p in (path / "runs").glob("*") if os.path.isdir(p)) if (path / "runs").is_dir() else []
    if summary_path.is_file():  # the summary's runs only: a folder it does not list is not a run of it (yet)
        listed = set() if exp.summary is None else set(exp.summary["run_id"].astype(str))
        runs = [r for r in runs if r.name in listed]
    traces, hists, predicted = [], [], []
    for run in runs:
        trace_path = run / "trace.csv"
        if os.path.isfile(trace_path):
            try:
                df = read_csv(trace_path, REQUIRED["trace.csv"])
            except MissingColumnError:  # a trace of another format: named, with the column
                raise
            except PlotError:  # not a readable CSV: its curve is left out (and named by plots.draw.trace_gaps)
                continue
            if not df.empty:
                traces.append(df)
                exp.files.setdefault("trace", trace_path)
        there = _names(run)  # listed: a file whose whole path is too long to look at is there, named, not absent
        for name, frames in (("staleness.csv", hists), ("predicted_staleness.csv", predicted)):
            df = _read_histogram(run / name, REQUIRED[name]) if name in there else None
            if df is not None and not df.empty:
                df["run_id"] = run.name
                frames.append(df)
    if traces:
        exp.traces = _with_sweeps(pd.concat(traces, ignore_index=True), exp.summary)
        if exp.summary is not None:  # the engine a simulated run modelled, as in its summary row
            engines = exp.summary.drop_duplicates("run_id").set_index("run_id")["engine"]
            exp.traces["engine"] = exp.traces["run_id"].map(engines).fillna(exp.traces["engine"])
        exp.traces = with_line_columns(exp.traces, exp.summary)
    if hists and exp.summary is not None:
        exp.staleness = _join_summary(pd.concat(hists, ignore_index=True), exp.summary)
    if predicted:
        exp.predicted_staleness = pd.concat(predicted, ignore_index=True)
    paper_dir = Path(paper_dir) if paper_dir is not None else path.parent / "paper"
    paper_path = paper_dir / f"{exp.name}.csv"
    from experiments.store.table import file_problem

    if why := file_problem(paper_path):  # never opened: a named pipe blocks; a folder drew no paper points unsaid
        raise PlotError(f"{paper_path}: {why} (the paper's numbers for {exp.name}); remove it or give a file")
    if paper_path.is_file():
        exp.paper = _nonempty(read_csv(paper_path, REQUIRED["paper"]))
        exp.files["paper"] = paper_path
    exp.experiment = experiment_id(exp)
    return exp


def experiment_id(exp):
    """The experiment id of ``exp``'s CSVs: the distinct non-empty values of the ``experiment`` column of
    summary.csv (else speedup.csv, else the traces), joined by ``+`` where a folder holds several; the folder's
    name where none has the column."""
    for df in (exp.summary, exp.speedup, exp.traces):
        ids = distinct(df, "experiment")
        if ids:
            return "+".join(str(i) for i in ids)
    return exp.name


def with_line_columns(df, summary=None):
    """``df`` with the columns of ``LINE_COLUMNS`` filled where its file predates them: a trace row takes them from
    its run's summary row (``summary``, when it has them), else ``master_computes`` False, ``agents`` = ``workers``
    (every worker a compute agent, the master none; one more where the master computes) and ``cores`` ``""`` (one
    setting). Values present are kept."""
    if df is None:
        return df
    df = df.copy()
    lookup = (
        summary.drop_duplicates("run_id").set_index("run_id")
        if (summary is not None and "run_id" in df.columns and "run_id" in summary.columns)
        else None
    )
    for column in LINE_COLUMNS:
        if column not in df.columns and lookup is not None and column in lookup.columns:
            df[column] = df["run_id"].map(lookup[column])
    if "master_computes" not in df.columns:
        df["master_computes"] = False
    df["master_computes"] = df["master_computes"].astype(object).where(df["master_computes"].notna(), False)
    df["master_computes"] = df["master_computes"].astype(bool)
    if "agents" not in df.columns:
        df["agents"] = np.nan
    df["agents"] = (
        pd.to_numeric(df["agents"], errors="coerce")
        .astype(float)
        .fillna(df["workers"] + df["master_computes"].astype(float))
    )
    if "cores" not in df.columns:
        df["cores"] = ""
    df["cores"] = df["cores"].fillna("").astype(str)
    if lookup is not None:
        for column in COMPUTE_COLUMNS:
            if column not in df.columns and column in lookup.columns:
                df[column] = df["run_id"].map(lookup[column])
    df["compute_setting"] = [
        setting_name(c, b)
        for c, b in zip(
            df["compute"] if "compute" in df.columns else [""] * len(df),
            df["compute_base_s"] if "compute_base_s" in df.columns else [np.nan] * len(df),
        )
    ]
    return df


def setting_name(compute, base_s):
    """A compute setting as a file-name part, as :func:`compute_settings` names them: ``real``,
    ``emulated-0.002s``; ``""`` when unknown."""
    compute = "" if compute is None or (isinstance(compute, float) and np.isnan(compute)) else str(compute)
    try:
        base = float(base_s)
    except (TypeError, ValueError):
        base = float("nan")
    return f"{compute}-{base:g}s" if compute and not np.isnan(base) else compute


def master_computes(*frames):
    """True when any row of the frames has the master computing gradients too (the x-axis counts compute agents,
    the paper's threads, rather than workers)."""
    return any(
        df is not None and "master_computes" in df.columns and bool(df["master_computes"].any()) for df in frames
    )


STAND_IN_MODELS = {
    "lenet5": "LeNet5",
    "allcnn": "AllCNN",
    "resnet18": "ResNet18",
    "wrn28": "WRN-28-5",
    "logreg": "logistic regression",
}
"""Model families a problem id (``<model>_<data>``, problems/) or an experiment id may name, and their names in
the paper (Xu et al., Sec. 5)."""


def _model(text):
    """The model family named by a problem or experiment id (its first ``_``-separated token that is one of
    ``STAND_IN_MODELS``), or None."""
    return next((t for t in str(text).split("_") if t in STAND_IN_MODELS), None)


def paper_problem(exp, problem):
    """The problem the paper ran where this experiment's ``problem`` stands in for it, else None.

    From the paper's CSV when it exists (its problems; None when ``problem`` is one of them; of several, the one of
    the same model family where there is one); else from the experiment id when it names a model family other than
    ``problem``'s (``allcnn_sync_vs_async`` run on ``lenet5_fmnist``: ``allcnn``)."""
    if exp.paper is not None and "problem" in exp.paper.columns:
        theirs = distinct(exp.paper, "problem")
        if theirs:
            if problem in theirs:
                return None
            same = [p for p in theirs if _model(p) == _model(problem)]
            return (same or theirs)[0]
    named = _model(exp.experiment)
    return named if named is not None and named != _model(problem) else None


COMPUTE_COLUMNS = ("compute", "compute_base_s")


def compute_settings(exp, problem):
    """The compute settings of one problem's runs, one figure each where there are several: ``[(suffix, text,
    exp')]``, ``exp'`` the experiment with its summary and speed-up rows of that setting only (real compute beside
    emulated compute at 2 ms and at 50 ms are different experiments, whose seeds and lines must not be pooled).
    One setting (or no compute columns): ``[("", "", exp)]``. Suffix e.g. ``emulated-0.002s``; text e.g.
    ``emulated compute, 2 ms a gradient`` or ``real compute``."""
    s = exp.summary
    if s is None or "compute" not in s.columns:
        return [("", "", exp)]
    rows = s[s["problem"] == problem]
    keys = rows[[c for c in COMPUTE_COLUMNS if c in rows.columns]].drop_duplicates()
    if len(keys) < 2:
        return [("", "", exp)]
    out = []
    for key in keys.sort_values(list(keys.columns), na_position="first").itertuples(index=False):
        compute, base = key[0], (key[1] if len(key) > 1 else float("nan"))
        timed = isinstance(base, (int, float)) and not np.isnan(base)

        def pick(df, compute=compute, base=base, timed=timed):
            if df is None or "compute" not in df.columns:
                return df
            mask = (df["problem"] != problem) | (df["compute"] == compute)
            if "compute_base_s" in df.columns:
                mask &= (df["problem"] != problem) | (
                    df["compute_base_s"] == base if timed else df["compute_base_s"].isna()
                )
            return df[mask]

        suffix = f"{compute}-{base:g}s" if timed else str(compute)
        text = f"{compute} compute" + (f", {base * 1e3:g} ms a gradient" if timed else "")
        out.append((suffix, text, replace(exp, summary=pick(exp.summary), speedup=pick(exp.speedup))))
    return out


def engine_names(df):
    """``df`` with each simulated row's ``engine`` named after the transport whose costs its clock used, as the
    engine config the run chose: ``simulated`` (shared_memory costs) or ``simulated_distributed`` (gloo costs), so
    figures draw them as two lines (one sweep may hold both; a line per engine would average them as seeds).
    Frames without a ``transport`` column are returned as they are."""
    if df is None or "transport" not in df.columns or "clock" not in df.columns:
        return df
    t = df["transport"].astype(str)
    other = (df["clock"] == "simulated") & (df["engine"] == "simulated") & ~t.isin(["", "nan", "shared_memory"])
    if other.any():
        df = df.copy()
        df.loc[other, "engine"] = "simulated_" + t[other]
    return df


def _with_sweeps(traces, summary):
    """Add sweep columns a trace lacks from its run's summary row (NaN where neither has them)."""
    for column in SWEEP_COLUMNS:
        if column in traces.columns:
            continue
        if summary is not None and column in summary.columns:
            lookup = summary.drop_duplicates("run_id").set_index("run_id")[column]
            traces[column] = traces["run_id"].map(lookup).astype(float)
        else:
            traces[column] = np.nan
    return traces


def _join_summary(hists, summary):
    """Attach identity and sweep columns of the summary row with the same run_id to each histogram row."""
    columns = ["run_id", *IDENTITY] + [c for c in SWEEP_COLUMNS + LINE_COLUMNS if c in summary.columns]
    rows = summary[columns].drop_duplicates("run_id")
    out = hists.merge(rows, on="run_id", how="inner")
    for column in SWEEP_COLUMNS:
        if column not in out.columns:
            out[column] = np.nan
    return _nonempty(out)


def as_experiment(exp, paper_dir=None):
    """``exp`` itself when it is ``ExperimentData``, else ``load_experiment(exp, paper_dir)``."""
    return exp if isinstance(exp, ExperimentData) else load_experiment(exp, paper_dir)
