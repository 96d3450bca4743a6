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

from experiments.store.atomic import atomic_write_text
from experiments.store.table import read_summary_frame

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


def mean_speedup(sp: pd.DataFrame, algorithm: str, basis: str = "time_per_epoch") -> pd.Series:
    """``algorithm``'s speed-up on ``basis`` by worker count (the mean over the speed-up rows of every group of that
    P, e.g. two problems or two delay settings): a Series indexed by workers; empty without rows."""
    if sp.empty:
        return pd.Series(dtype=float)
    s = sp[(sp["algorithm"] == algorithm) & (sp["basis"] == basis)]
    return s.groupby("workers")["speedup"].mean()
