"""Each algorithm option's master update time, as benchmarks/bench_update_cost.py measured it.

A method's update cost depends on its implementation (APAM's paper rule is one C loop of a few microseconds at
d = 784, a plain-torch rule takes tens, a staleness policy adds its own work), and on the simulated clock a method
pays it on every update; so a comparison of methods shows each one's update cost beside its rank, and a method
added to a comparison brings its cost in the open.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

UPDATE_COST_CSV = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "bench_update_cost.csv"
"""Where benchmarks/bench_update_cost.py writes its table."""
COLUMNS = (
    "algorithm",
    "problem",
    "d",
    "rule",
    "variant",
    "impl",
    "policy",
    "scale",
    "gradients_per_update",
    "median_us",
    "p10_us",
    "p90_us",
    "us_per_gradient",
)


def update_cost_table(
    path: str | Path | None = None, problem: str | None = None, d: int | None = None, wide: bool = False
) -> pd.DataFrame:
    """The update cost of every algorithm option, one row per (algorithm, problem, d).

    Args:
        path: the benchmark's CSV (default :data:`UPDATE_COST_CSV`).
        problem: keep the rows of this problem's hyperparameters only (``logreg_fmnist``: AMSGrad's paper variant;
            ``lenet5_fmnist``: the torch variant), as a run on that problem composes the algorithm.
        d: keep the rows of this dimension only (784, 61706, 1000000 as measured).
        wide: one row per algorithm (and problem), one column ``median_us@<d>`` per dimension, instead.

    Returns:
        The columns of :data:`COLUMNS`: ``median_us`` (the median microseconds of one master update: the rule's step
        on a flat float32 vector with the policy's work, P = 8; one update is one gradient, or S = P gradients for
        Rennala and a sync round), ``p10_us`` and ``p90_us`` (the spread over the repeats), ``us_per_gradient``
        (``median_us / gradients_per_update``), ``impl`` (the rule's implementation at that d: native, compiled,
        fused, eager, or empty for SGD), ``policy`` and ``scale`` (what the delay-adaptive factor multiplies).
        Sorted by problem, d, algorithm. An empty frame with these columns when the benchmark has not been run.

    Raises:
        ValueError: the file lacks a column of :data:`COLUMNS` (written by another version of the benchmark).
    """
    path = Path(path) if path is not None else UPDATE_COST_CSV
    if not path.exists():
        return pd.DataFrame(columns=list(COLUMNS))
    table = pd.read_csv(path, keep_default_na=False)  # an empty impl or scale stays ""
    missing = [c for c in COLUMNS if c not in table.columns]
    if missing:
        raise ValueError(f"{path}: no column {missing[0]} (rerun benchmarks/bench_update_cost.py)")
    table = table[list(COLUMNS)]
    if problem is not None:
        table = table[table["problem"] == problem]
    if d is not None:
        table = table[table["d"] == int(d)]
    table = table.sort_values(["problem", "d", "algorithm"]).reset_index(drop=True)
    if wide:
        table = (
            table.pivot_table(index=["algorithm", "problem"], columns="d", values="median_us")
            .add_prefix("median_us@")
            .reset_index()
        )
        table.columns.name = None
    return table
