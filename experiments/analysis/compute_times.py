"""Per measured run, what its gradients' compute times say (``runs/<run_id>/compute_times.csv``, written by
experiments/engines/emulation.py: one row per gradient with ``compute_s`` and, when emulated, ``target_s``)."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from experiments.store.table import run_frames


def lateness(exp_dir: Path) -> pd.DataFrame:
    """Per measured run of ``exp_dir`` with ``<run>/compute_times.csv``: ``late us``, the median of
    ``compute_s - target_s`` over its gradients (microseconds its emulated waits ended after their targets; NaN with
    real compute), and ``grad us``, the median ``compute_s`` of its gradients with real compute (microseconds; NaN
    when emulated). Columns run_id, late us, grad us; empty when no run has compute times. A file that cannot be
    read whole is left out, named (experiments/store/table.py :func:`run_frames`)."""
    rows = []
    for c in run_frames(exp_dir, "compute_times.csv", ("compute_s", "target_s"), ("compute_s", "target_s")):
        if c.empty:
            continue
        target = pd.to_numeric(c["target_s"], errors="coerce")
        emulated = target.notna().any()
        rows.append(
            {
                "run_id": c["run_id"].iloc[0],
                "late us": 1e6 * float((c["compute_s"] - target).median()) if emulated else math.nan,
                "grad us": math.nan if emulated else 1e6 * float(c["compute_s"].median()),
            }
        )
    return pd.DataFrame(rows, columns=["run_id", "late us", "grad us"])
