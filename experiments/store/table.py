"""CSV tables written whole (experiments/store/atomic.py) and read strictly: a row put in by key under the
table's file lock (:func:`upsert_row`), a summary parsed with its damage named (:func:`parse_summary`), a damaged
file set aside under a free name (:func:`set_aside`)."""

from __future__ import annotations

import csv
import io
import math
import os
import re
from pathlib import Path

from filelock import FileLock

from experiments.errors import ConfigError
from experiments.log import get_logger
from experiments.settings.fields import MAX_WORKERS, SEED_LIMIT
from experiments.store.atomic import atomic_write_text
from problems.datasets.files import special_kind


def upsert_row(path: Path, key: str, row: dict, columns: list[str], check=None) -> None:
    """Put ``row`` into the CSV table ``path`` (``columns`` first), replacing the row with the same ``key`` value,
    under the table's file lock (several jobs may write it at once; e.g. experiments/sweeps/tuning.py's tuning.csv).
    A damaged table is set aside first (:func:`read_rows`; ``check`` as there)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path) + ".lock", timeout=120):
        rows = [r for r in read_rows(path, key, check) if r.get(key) != str(row[key])]
        write_atomically(path, csv_text(rows + [row], columns))


def read_rows(path: Path, key: str, check=None) -> list[dict]:
    """The rows of the CSV table ``path`` ([] when there is none). A table that is damaged -- not text, not CSV,
    without its ``key`` column, or with a row ``check(row)`` refuses (it raises ValueError) -- is set aside as
    ``<path>.damaged-<n>`` with a line saying so, and read as empty: the harness writes such a table again.

    Raises:
        ConfigError: ``path`` is a folder, a special file or unreadable (one line naming it).
    """
    path = Path(path)
    if why := file_problem(path):
        raise ConfigError(f"{path}: {why}; remove it")
    if not path.exists():
        return []
    try:
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            rows = list(reader)
            if key not in (reader.fieldnames or ()):
                raise ValueError(f"no {key} column")
        for r in rows:
            if check is not None:
                check(r)
    except (ValueError, csv.Error, KeyError, TypeError) as exc:  # UnicodeDecodeError is a ValueError
        dest = set_aside(path)
        get_logger(__name__).warning(f"{path}: damaged ({str(exc).splitlines()[0][:120]}); set aside as {dest.name}")
        return []
    return rows


def write_atomically(path: Path, text: str) -> None:
    atomic_write_text(path, text)


def csv_text(rows: list[dict], columns: list[str]) -> str:
    cols = columns + sorted({k for r in rows for k in r} - set(columns))
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: csv_cell(r.get(k)) for k in cols})
    return buf.getvalue()


def csv_cell(v):
    if v is None:
        return ""
    if isinstance(v, float):
        return "" if math.isnan(v) else repr(v)
    return v


def file_problem(path: Path) -> str | None:
    """Why ``path`` cannot be read as a file (``a named pipe, not a regular file``, ``permission denied``, ``a link to
    nothing``: a symlink whose target is gone), None when it can or when it does not exist. Checked before opening, so
    a named pipe never blocks the reader."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return "a link to nothing (its target is gone)" if os.path.islink(path) else None
    except OSError as exc:
        return exc.strerror or str(exc)
    if kind := special_kind(st.st_mode):
        return f"{kind}, not a regular file"
    if not os.access(path, os.R_OK):
        return "permission denied"
    return None


_NAMED: set[str] = set()  # the run files already named by run_files: one warning each per process


def run_files(exp_dir: Path, name: str) -> list[Path]:
    """The runs' files ``<exp_dir>/runs/*/<name>`` (trace.csv, staleness.csv, provenance.json, ...) that can be read,
    sorted; one that cannot (:func:`file_problem`: a folder, a named pipe, unreadable) is never opened: it is left
    out with one warning naming it (once per process, however many readers ask)."""
    out = []
    for path in _run_paths(Path(exp_dir) / "runs", name):
        if why := file_problem(path):  # a path past the system's limit too: "File name too long"
            _left_out(path, why)
            continue
        out.append(path)
    return out


def _run_paths(runs: Path, name: str) -> list[Path]:
    """The paths ``<runs>/*/<name>`` there are, sorted, found by listing the folders: pathlib's glob stats each whole
    path, and one past the system's limit on a path's length (a results folder nested deep) was a traceback
    (``File name too long``); listed, it is named by the reader that cannot open it. A folder that cannot be listed
    holds none, as for glob."""
    try:
        with os.scandir(runs) as entries:
            folders = [e.path for e in entries if _is_folder(e)]
    except OSError:
        return []
    out = []
    for folder in folders:
        try:
            with os.scandir(folder) as entries:
                out += [Path(folder) / name for e in entries if e.name == name]
        except OSError:
            continue
    return sorted(out)


def _is_folder(entry: os.DirEntry) -> bool:
    """Whether ``entry`` is a folder or a link to one (False when that cannot be told)."""
    try:
        return entry.is_dir()
    except OSError:
        return False


def _left_out(path: Path, why: str) -> None:
    """Warn, once per process however many readers ask, that the run file ``path`` is left out, and why."""
    if str(path) not in _NAMED:
        _NAMED.add(str(path))
        get_logger(__name__).warning(f"{path}: {why}; left out")


def run_frames(exp_dir: Path, name: str, columns: tuple[str, ...], numbers: tuple[str, ...] = ()) -> list:
    """The runs' CSV files ``<exp_dir>/runs/*/<name>`` (trace.csv, staleness.csv, compute_times.csv, ...), each as a
    ``pandas.DataFrame`` with a ``run_id`` column (the folder's name where the file has none), in path order. A file
    that cannot be read whole is left out with one warning naming it, as :func:`run_files` leaves out what is not a
    regular file: not UTF-8 CSV, empty, its last row cut short (no final newline), without one of ``columns``, or a
    column of ``numbers`` (where present) holding a value that is not a number. The reports and tables read these
    files after the runs: a damaged one was a traceback there, or numbers read from half a file."""
    import pandas as pd

    frames = []
    for path in run_files(exp_dir, name):
        frame, why = None, None
        try:
            data = path.read_bytes()
            frame = pd.read_csv(io.BytesIO(data), encoding="utf-8")
        except OSError as exc:
            why = exc.strerror or str(exc)
        except (UnicodeDecodeError, ValueError) as exc:  # pandas' ParserError and EmptyDataError are ValueErrors
            why = f"not UTF-8 CSV ({' '.join(str(exc).split())[:80]})"
        if why is None and not data.endswith(b"\n"):
            why = "the last row does not end with a newline (truncated)"
        if why is None and (missing := [c for c in columns if c not in frame]):
            why = f"no column {', '.join(missing)}"
        if why is None:
            bad = next((c for c in numbers if c in frame and _not_numbers(frame[c])), None)
            why = None if bad is None else f"column {bad} holds a value that is not a number"
        if why is not None:
            _left_out(path, why)
            continue
        frames.append(frame if "run_id" in frame else frame.assign(run_id=path.parent.name))
    return frames


def _not_numbers(column) -> bool:
    """Whether a pandas Series holds a cell that is not a number (an empty cell is none)."""
    import pandas as pd

    return bool((pd.to_numeric(column, errors="coerce").isna() & column.notna()).any())


SUMMARY_COLUMNS = (
    "experiment", "run_id", "problem", "algorithm", "engine", "clock", "workers", "delay_model", "max_delay", "tau",
    "straggler_sigma", "straggler_slowdown", "batch_size", "seed", "epochs", "updates", "gradients", "time_s",
    "time_per_epoch_s", "target_loss", "time_to_target_s", "updates_to_target", "final_train_loss", "final_train_acc",
    "final_test_loss", "final_test_acc", "final_opt_gap", "staleness_mean", "staleness_max", "status", "message",
)  # fmt: skip
"""The columns every summary has (docs/INTERFACES.md, ``summary.csv``): the read-only tools (aggregate's speed-up
groups and times, the report's sections, the figures) read them, so a summary without one is refused, not read as a
column of NaN (it was a traceback in the report, or a speed-up table of empty times)."""
SUMMARY_REQUIRED = ("run_id", "problem", "algorithm", "workers", "seed", "status")
"""The columns every run's row fills: a read-only tool (aggregate, report, ``experiments.load``) groups by them."""
SUMMARY_INTEGERS = {
    "workers": (0, MAX_WORKERS),
    "agents": (1, MAX_WORKERS + 1),
    "seed": (0, SEED_LIMIT - 1),
    "batch_size": (1, SEED_LIMIT - 1),
}
"""Columns that every row fills with a whole number in the range given here (the bounds of the run settings,
experiments/settings/schema.py; ``agents``: the workers and a master that computes); tables group and divide by
them."""
SUMMARY_NUMBERS = (
    "epochs", "updates", "gradients", "time_s", "time_per_epoch_s", "target_loss", "time_to_target_s",
    "updates_to_target", "final_train_loss", "final_train_acc", "final_test_loss", "final_test_acc", "final_opt_gap",
    "staleness_mean", "staleness_max",
)  # fmt: skip
"""Columns that hold a number where they hold anything (an empty cell: not measured); tables compute with them."""
SUMMARY_NON_NEGATIVE = (
    "epochs", "updates", "gradients", "time_s", "time_per_epoch_s", "time_to_target_s", "updates_to_target",
    "staleness_mean", "staleness_max",
)  # fmt: skip
"""Numbers of :data:`SUMMARY_NUMBERS` that are counts or seconds: never below 0, and finite except in a ``failed``
row (a run whose clock overflowed is failed with the time it reached, inf)."""
SUMMARY_FRACTIONS = ("final_train_acc", "final_test_acc")
"""Numbers of :data:`SUMMARY_NUMBERS` that are fractions: from 0 to 1."""
SUMMARY_STATUSES = ("ok", "diverged", "failed")
"""The statuses a run's row can have (experiments/runner.py)."""


def row_problem(header: list[str], row: list[str]) -> str | None:
    """Why the cells of one summary row (``row``, as wide as ``header``) cannot be what the runner wrote: a whole number
    out of its range (:data:`SUMMARY_INTEGERS`), a cell that is not a number where one belongs
    (:data:`SUMMARY_NUMBERS`; empty and ``nan`` mean not measured; an empty whole number is left to the readers), a
    count or seconds below 0, an accuracy outside [0, 1], a status not in :data:`SUMMARY_STATUSES`; None when none
    is. A hand edit such as ``workers=-5`` is damage the runner repairs (experiments/store/sink.py) and a reader
    names (:func:`read_summary_frame`)."""
    cells = dict(zip(header, row))
    failed = cells.get("status") == "failed"  # a failed run's clock may have overflowed: its time can be inf
    for column, (low, top) in SUMMARY_INTEGERS.items():
        if cells.get(column, "") != "":  # empty: a reader that needs it says so (read_summary_frame)
            text = cells[column]
            if not re.fullmatch(r"\s*\+?[0-9]+\s*", text) or not low <= int(text) <= top:
                return f"column {column}: {text!r} is not a whole number from {low} to {top}"
    for column in (c for c in SUMMARY_NUMBERS if cells.get(c, "") != ""):
        try:
            value = float(cells[column])
        except ValueError:
            return f"column {column}: {cells[column]!r} is not a number"
        seconds = math.isnan(value) or 0 <= value < math.inf or (failed and value == math.inf)
        if column in SUMMARY_NON_NEGATIVE and not seconds:
            return f"column {column}: {cells[column]!r} is not a count or seconds (a finite number >= 0)"
        if column in SUMMARY_FRACTIONS and not (math.isnan(value) or 0 <= value <= 1):
            return f"column {column}: {cells[column]!r} is not an accuracy from 0 to 1"
    if "status" in cells and cells["status"] not in SUMMARY_STATUSES:
        return f"column status: {cells['status']!r} is not one of {', '.join(SUMMARY_STATUSES)}"
    return None


def _summary_text(path: Path) -> tuple[str | None, str | None]:
    """The text of ``summary.csv`` at ``path`` (read once: the checks and the frame see the same bytes), and why it
    cannot be decoded (the text then None); ``(None, None)`` when there is no file.

    Raises:
        ConfigError: the file exists but cannot be read (permissions, a folder or a named pipe at its name).
    """
    why = file_problem(path)
    if why is not None:
        raise ConfigError(f"{path}: cannot read this summary ({why}); fix its permissions or move it away")
    try:
        with open(path, newline="", encoding="utf-8") as f:
            return f.read(), None
    except FileNotFoundError:
        return None, None
    except PermissionError as exc:
        raise ConfigError(
            f"{path}: cannot read this summary ({exc.strerror}); fix its permissions or move it away"
        ) from None
    except UnicodeDecodeError as exc:
        return None, f"not UTF-8 CSV ({' '.join(str(exc).split())[:120]})"


def parse_summary(path: Path, runs_dir: Path | None = None) -> tuple[list[str], list[list[str]], str | None]:
    """Read ``summary.csv`` strictly: its header, its data rows (blank lines skipped; a last row cut before its
    newline left out), and why it is damaged (None when it parses cleanly: a header with ``run_id``, every row as
    wide as the header and ended by a newline, each run id non-empty and once, and -- with ``runs_dir`` -- each
    row's run folder present). A missing file is clean and empty.

    Raises:
        ConfigError: the file exists but cannot be read (permissions, a folder or a named pipe at its name).
    """
    text, why = _summary_text(path)
    return ([], [], why) if text is None else _parse_summary_text(text, runs_dir)


def _parse_summary_text(text: str, runs_dir: Path | None) -> tuple[list[str], list[list[str]], str | None]:
    """:func:`parse_summary` on the file's text."""
    try:
        table = [r for r in csv.reader(io.StringIO(text)) if r]
    except csv.Error as exc:
        return [], [], f"not UTF-8 CSV ({' '.join(str(exc).split())[:120]})"
    if not table:
        return [], [], "empty (no header)"
    if not text.endswith("\n"):  # every row is written with its newline: a file cut inside its last field
        return table[0], table[1:-1], "the last row does not end with a newline (truncated)"  # that row left out
    header, rows = table[0], table[1:]
    if "run_id" not in header:
        return header, rows, "no run_id column in the header"
    if len(set(header)) != len(header):
        return header, rows, "a column named twice in the header"
    at, seen = header.index("run_id"), set()
    for n, r in enumerate(rows, start=2):
        if len(r) != len(header):
            return header, rows, f"row {n} has {len(r)} fields, the header {len(header)}"
        rid = r[at]
        if not rid or rid in seen:
            return header, rows, f"row {n}: {'empty' if not rid else 'duplicate'} run id {rid!r}"
        if "/" in rid or rid in (".", ".."):  # a run id is a folder's name under runs/, never a path
            return header, rows, f"row {n}: run id {rid!r} is a path, not a run folder's name"
        seen.add(rid)
        if why := row_problem(header, r):
            return header, rows, f"row {n}, {why}"
        if runs_dir is not None and not (runs_dir / rid).is_dir():
            return header, rows, f"row {n}: no run folder for run id {rid!r}"
    return header, rows, None


def free_name(path: Path, tag: str) -> Path:
    """``<path>.<tag>-<n>`` with the smallest n >= 1 that is not taken."""
    n = 1
    while path.with_name(f"{path.name}.{tag}-{n}").exists() or path.with_name(f"{path.name}.{tag}-{n}").is_symlink():
        n += 1
    return path.with_name(f"{path.name}.{tag}-{n}")


def set_aside(path: Path, tag: str = "damaged") -> Path:
    """Rename a damaged file to ``<path>.<tag>-<n>`` (first free n); return the new name.

    Raises:
        OSError: the rename failed (one line naming ``path``).
    """
    dest = free_name(path, tag)
    try:
        os.rename(path, dest)
    except OSError as exc:
        raise OSError(exc.errno, f"cannot set aside a damaged file ({exc.strerror})", str(path)) from None
    return dest


def read_summary_frame(path: Path):
    """``summary.csv`` at ``path`` as a ``pandas.DataFrame`` for the tools that only read it (speed-up tables, the
    report, ``experiments.load``); an empty frame when there is none. Checked as the runner checks it
    (:func:`parse_summary`), plus the columns of :data:`SUMMARY_COLUMNS` and the cells of :data:`SUMMARY_REQUIRED`;
    the runner, not a reader, repairs it.

    Raises:
        ConfigError: one line naming the file and what is wrong with it: a row of another width, a last row cut
            short, no ``run_id``, bytes that are not CSV, a missing column, a cell the runner cannot have written
            (:func:`row_problem`), or a file that cannot be read.
    """
    import pandas as pd

    text, why = _summary_text(path)
    header, _, why = ([], [], why) if text is None else _parse_summary_text(text, None)
    if why is not None:
        raise ConfigError(
            f"{path}: damaged summary ({why}); rerunning its sweep sets it aside and rebuilds it from the run folders"
        )
    if missing := [c for c in SUMMARY_REQUIRED if header and c not in header]:
        raise ConfigError(f"{path}: not a summary this harness writes (no column {_listed(missing)})")
    if not header:
        return pd.DataFrame()
    frame = pd.read_csv(io.StringIO(text))
    empty = frame[list(SUMMARY_REQUIRED)].isna()
    if empty.any().any():
        rows, columns = empty.to_numpy().nonzero()  # row-major: the first empty cell of the file
        row, column = rows[0], columns[0]
        raise ConfigError(
            f"{path}: damaged summary (row {row + 2}, column {SUMMARY_REQUIRED[column]}: empty, and every run fills it)"
        )
    if missing := [c for c in SUMMARY_COLUMNS if c not in header]:  # after the cells every run fills: those first
        raise ConfigError(f"{path}: not a summary this harness writes (no column {_listed(missing)})")
    return frame


def _listed(columns: list[str], most: int = 6) -> str:
    """``columns`` joined by commas, the first ``most`` of them and how many more (a file of another table lacks
    dozens)."""
    more = f" and {len(columns) - most} more" if len(columns) > most else ""
    return ", ".join(columns[:most]) + more


def read_experiment_summary(folder: Path):
    """:func:`read_summary_frame` of the experiment folder ``folder``'s summary.csv. A folder named for an experiment
    of the harness (``conf/experiment/<name>.yaml``) must hold that experiment's runs: the report judges them by its
    rules, the figures and speedup.csv are drawn under its name, so a folder renamed to another experiment's name was
    a traceback in the report's section (``mv lr_speedup tau_threshold``) and a speedup.csv saying
    ``experiment=lr_speedup`` in ``tau_threshold/``. A folder of another name (a copy of one's own, ``my_delays``) is
    read as its runs say (the figures' titles name the experiment of its CSVs; the report gives it its runs' means).

    Raises:
        ConfigError: as :func:`read_summary_frame`, or the folder has an experiment's name and a row's
            ``experiment`` is another (one line naming the folder and the experiment its runs belong to).
    """
    from experiments.settings.defaults import options

    folder = Path(folder)
    frame = read_summary_frame(folder / "summary.csv")
    name = Path(os.path.abspath(folder)).name  # "." or "lr_speedup/.." named as the folder they are
    if "experiment" in frame and name in options("experiment"):
        theirs = frame["experiment"].dropna().astype(str)
        if len(other := theirs[theirs != name]):
            raise ConfigError(
                f"{folder}: holds the runs of experiment {other.iloc[0]} (its summary.csv's experiment column), not "
                f"of {name}, whose name the folder has: give it back its name ({other.iloc[0]})"
            )
    return frame
