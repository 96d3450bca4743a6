"""``speedup.csv`` from ``summary.csv`` (docs/INTERFACES.md): speed-up and efficiency against P = 1.

For every (problem, algorithm, engine, clock, delay and straggler settings, batch size, compute mode and emulated
base, transport, shared cores, master computing) group that has a run with one compute agent,
``speedup = T(1) / T(P)`` and ``efficiency = speedup / P``, P counting compute agents (``agents``: the workers,
plus the master where it computes gradients too, ``algorithm.master_computes``; the speed-up of the paper's threads),
where T is the mean over seeds of either the time per
epoch (``basis=time_per_epoch``, the paper's basis: time for a fixed number of epochs) or the time to reach the
problem's target loss (``basis=time_to_target``; rows only where every seed reached it). Runs whose status is not
``ok`` are left out of T and counted in ``n_failed``. Times are seconds on the runs' clock.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from experiments.errors import ConfigError
from experiments.log import get_logger
from experiments.store.atomic import atomic_write_text
from experiments.store.table import read_summary_frame

log = get_logger(__name__)

GROUP = [
    "experiment",
    "problem",
    "algorithm",
    "engine",
    "clock",
    "delay_model",
    "max_delay",
    "straggler_sigma",
    "straggler_slowdown",
    "batch_size",
    "compute",
    "compute_base_s",
    "transport",
    "cores",
    "master_computes",
]
COLUMNS = [
    "experiment",
    "problem",
    "algorithm",
    "engine",
    "clock",
    "workers",
    "basis",
    "time_s",
    "speedup",
    "efficiency",
    "final_train_loss",
    "final_test_acc",
    "n_seeds",
    "n_failed",
    "delay_model",
    "max_delay",
    "straggler_sigma",
    "straggler_slowdown",
    "batch_size",
    "compute",
    "compute_base_s",
    "transport",
    "cores",
    "master_computes",
    "agents",
]
BASES = {"time_per_epoch": "time_per_epoch_s", "time_to_target": "time_to_target_s"}


def speedup_table(summary: pd.DataFrame) -> pd.DataFrame:
    """The speed-up rows of one summary table (see module docstring); empty when no group has a P = 1 run."""
    if summary.empty:
        return pd.DataFrame(columns=COLUMNS)
    df = summary.copy()
    for col in GROUP:
        if col not in df:
            df[col] = ""
    for col in (*BASES.values(), "final_train_loss", "final_test_acc"):  # measures a summary may lack: none
        if col not in df:
            df[col] = float("nan")
    keys = [c for c in GROUP]
    for col in keys:  # a missing key reads "" (such a column becomes object, as pandas' own upcast did)
        if df[col].isna().any():
            df[col] = df[col].astype(object).where(df[col].notna(), "")
    if "agents" not in df:  # runs recorded before the authors' master: every worker a compute agent
        df["agents"] = df["workers"]
    df["agents"] = pd.to_numeric(df["agents"], errors="coerce").fillna(pd.to_numeric(df["workers"]))
    out = []
    for gkey, g in df.groupby(keys, dropna=False, sort=True):
        ok = g[g["status"] == "ok"]
        for basis, col in BASES.items():
            per_p = {}
            for p, gp in g.groupby("agents"):
                okp = ok[ok["agents"] == p]
                vals = pd.to_numeric(okp[col], errors="coerce")
                if basis == "time_to_target" and (vals.isna().any() or okp.empty):
                    continue
                if okp.empty:
                    continue
                per_p[int(p)] = (vals.mean(), okp, len(gp) - len(okp))
            if 1 not in per_p:
                continue
            t1 = per_p[1][0]
            for p in sorted(per_p):
                t, okp, failed = per_p[p]
                sp = t1 / t if t > 0 else float("nan")
                out.append(
                    {
                        **dict(zip(keys, gkey)),
                        "workers": int(okp["workers"].iloc[0]),
                        "agents": p,
                        "basis": basis,
                        "time_s": t,
                        "speedup": sp,
                        "efficiency": sp / p,
                        "final_train_loss": pd.to_numeric(okp["final_train_loss"], errors="coerce").mean(),
                        "final_test_acc": pd.to_numeric(okp["final_test_acc"], errors="coerce").mean(),
                        "n_seeds": okp["seed"].nunique(),
                        "n_failed": failed,
                    }
                )
    return pd.DataFrame(out, columns=COLUMNS)


def write_speedup(exp_dir: Path) -> Path | None:
    """Read ``exp_dir/summary.csv`` and write ``exp_dir/speedup.csv``; return its path (None without a summary).

    Raises:
        ConfigError: the summary is damaged (experiments/store/table.py ``read_summary_frame``), one line naming it.
    """
    summary_path = Path(exp_dir) / "summary.csv"
    if not summary_path.exists():
        return None
    table = speedup_table(read_summary_frame(summary_path))
    path = Path(exp_dir) / "speedup.csv"
    atomic_write_text(path, table.to_csv(index=False))  # a temporary name of its own: sweeps may write at once
    return path


def say_if_no_row(path: Path | None) -> None:
    """One warning when the speedup.csv just written at ``path`` is its header alone (the summary has no P = 1 run
    of an algorithm and engine): the commands a user runs (``experiments.aggregate``, a sweep's end) say why."""
    if path is not None and len(path.read_text().splitlines()) <= 1:
        log.warning(f"{path}: no row: a speed-up needs a P = 1 run of the same algorithm and engine in the summary")


SPEEDUP_REQUIRED = ("problem", "algorithm", "engine", "clock", "workers", "basis", "time_s", "speedup", "efficiency")
"""The columns every speedup.csv has had (newer ones add more): those the figures need (plots/data.py)."""
SPEEDUP_NUMBERS = ("workers", "time_s", "speedup", "efficiency")
"""Its columns that hold numbers (empty cells read as NaN, which is a number)."""


def speedup_frame(folder: Path, compare: bool = True) -> pd.DataFrame:
    """An experiment folder's speedup.csv; empty when there is none. The file is derived from the folder's summary, so
    one that is damaged (a link rather than a file, not text, a last row without its newline, not a table, without the
    columns it always has, a value that is not a number) or not what summary.csv gives (its header alone where the
    summary gives rows, or -- with ``compare`` -- any cell or row: :func:`speedup_difference`; out of date while a
    sweep runs, or edited) is written again from summary.csv (:func:`write_speedup`; a link is replaced by a file,
    never written through), with a line saying which, and then read. ``compare`` False: the figures' reader
    (plots/data.py), whose tests draw tables edited by hand.

    Raises:
        ConfigError: speedup.csv is a folder, a special file or unreadable (one line naming it), or the summary it
            would be written from is damaged.
    """
    from experiments.store.table import file_problem

    path = Path(folder) / "speedup.csv"
    if path.is_symlink():  # another experiment's table, or nothing: the summary's own is written in its place
        why = "damaged (a link, not a file of this experiment)"
    elif problem := file_problem(path):
        raise ConfigError(f"{path}: {problem}; remove it (experiments.aggregate writes it again from summary.csv)")
    elif not path.exists():
        return pd.DataFrame()
    elif damage := _speedup_damage(path):
        why = f"damaged ({damage})"
    else:
        frame = pd.read_csv(path)
        if (not compare and not frame.empty) or (diff := speedup_difference(folder, frame)) is None:
            return frame
        # a whole table the summary has moved past (a sweep writes it when its last job ends) or one edited by hand:
        # the two look the same, and neither is damage
        why = f"not what summary.csv gives ({diff}: out of date, or edited)"
    log.warning(f"{path}: {why}; written again from summary.csv")
    if write_speedup(folder) is None:  # no summary to write it from
        path.unlink()
        return pd.DataFrame()
    return pd.read_csv(path)


def _speedup_damage(path: Path) -> str | None:
    """Why the regular file speedup.csv at ``path`` is damaged (:func:`speedup_frame`); None when it is a whole table
    (its rows are compared with the summary's apart: :func:`speedup_difference`)."""
    try:
        if not path.read_bytes().endswith(b"\n"):  # every row is written with its newline
            return "the last row does not end with a newline (truncated)"
        frame = pd.read_csv(path)
    except (ValueError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:  # UnicodeDecodeError included
        return f"not a readable CSV table: {type(exc).__name__}"
    if not set(SPEEDUP_REQUIRED) <= set(frame.columns):
        return "not the speed-up table's columns"
    if len(frame) and any(not pd.api.types.is_numeric_dtype(frame[c]) for c in SPEEDUP_NUMBERS):
        return f"a value of {', '.join(SPEEDUP_NUMBERS)} that is not a number"
    return None


def speedup_difference(folder: Path, frame: pd.DataFrame) -> str | None:
    """How the speed-up table ``frame`` (speedup.csv as read) differs from the one the folder's summary.csv gives
    (:func:`speedup_table`), compared on the columns ``frame`` has (a file written before
    a column was added is not different for lacking it), numbers to a relative 1e-9: e.g. ``3 rows, while summary.csv
    gives 12``, ``row 4, speedup: -1.0 where summary.csv gives 1.48``; None when it does not differ or there is no
    summary.

    Raises:
        ConfigError: summary.csv is damaged (one line naming it).
    """
    import io

    import numpy as np

    summary = Path(folder) / "summary.csv"
    if not summary.exists():
        return None
    want = pd.read_csv(io.StringIO(speedup_table(read_summary_frame(summary)).to_csv(index=False)))
    if len(frame) != len(want):
        return f"{len(frame)} rows, while summary.csv gives {len(want)}"
    for column in (c for c in frame.columns if c in want.columns):
        got, exp = frame[column].reset_index(drop=True), want[column].reset_index(drop=True)
        g, w = pd.to_numeric(got, errors="coerce"), pd.to_numeric(exp, errors="coerce")
        if (g.isna() == got.isna()).all() and (w.isna() == exp.isna()).all():  # numbers (or empty) on both sides
            same = np.isclose(g.astype(float), w.astype(float), rtol=1e-9, atol=0.0, equal_nan=True)
        else:
            same = got.fillna("").astype(str).to_numpy() == exp.fillna("").astype(str).to_numpy()
        if not same.all():
            at = int(np.flatnonzero(~same)[0])
            return f"row {at + 2}, {column}: {_shown(got[at])} where summary.csv gives {_shown(exp[at])}"
    return None


def _shown(cell) -> str:
    """One cell of a speed-up table as a message shows it: a number as written (``0.0543``, ``4``; ``empty`` for an
    empty cell), text quoted (``'apam'``); never numpy's repr (``np.float64(0.0543)``)."""
    if isinstance(cell, str):
        return repr(cell)
    if pd.isna(cell):
        return "empty"
    if pd.api.types.is_integer(cell) or pd.api.types.is_bool(cell):
        return str(cell.item() if hasattr(cell, "item") else cell)
    return repr(float(cell))


def mean_speedup(sp: pd.DataFrame, algorithm: str, basis: str = "time_per_epoch") -> pd.Series:
    """``algorithm``'s speed-up on ``basis`` by worker count (the mean over the speed-up rows of every group of that
    P, e.g. two problems or two delay settings): a Series indexed by workers; empty without rows."""
    if sp.empty:
        return pd.Series(dtype=float)
    s = sp[(sp["algorithm"] == algorithm) & (sp["basis"] == basis)]
    return s.groupby("workers")["speedup"].mean()
