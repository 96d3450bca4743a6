"""The cost model's terms as the runs recorded them (the summary's ``cost_*`` columns, seconds), and what they imply.

A simulated run charges each gradient ``cost_grad_s``, each message ``cost_latency_s``, each master update
``cost_update_s`` plus ``cost_overhead_s`` of engine overhead (``cost_overhead_idle_s`` when the master waited for
the gradient); experiments/clock/costmodel.py holds the model.
"""

from __future__ import annotations

from typing import NamedTuple

import pandas as pd

from experiments.clock.costmodel import CostModel, saturation_workers

COST_COLUMNS = ("cost_grad_s", "cost_update_s", "cost_latency_s", "cost_overhead_s")


class Saturation(NamedTuple):
    """The master saturation P* (workers) and the costs it came from, in seconds."""

    workers: float
    grad_s: float
    update_s: float
    latency_s: float
    overhead_s: float
    idle_s: float


def master_saturation(runs: pd.DataFrame) -> Saturation | None:
    """The cost model's master saturation P* of one problem's P = 1 runs ``runs``
    (:func:`experiments.clock.costmodel.saturation_workers`: cycle / master_s, cycle = grad + 2 latency + update + idle
    overhead, master_s = update + overhead), from their mean ``cost_*`` columns; None without the cost columns
    (measured runs)."""
    if runs.empty or any(c not in runs or runs[c].isna().all() for c in COST_COLUMNS):
        return None
    g, u, lat, over = (float(runs[c].mean()) for c in COST_COLUMNS)
    idle = (
        float(runs["cost_overhead_idle_s"].mean())
        if "cost_overhead_idle_s" in runs and runs["cost_overhead_idle_s"].notna().any()
        else over
    )
    # cost_grad_s is already the gradient at the runs' batch size: one entry, looked up under a nominal key
    costs = CostModel(grad={1: g}, update_s=u, latency_s=lat, overhead_s=over, overhead_idle_s=idle)
    return Saturation(saturation_workers(costs, 1), g, u, lat, over, idle)
