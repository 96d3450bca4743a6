"""Targets set by the runs themselves, and the time each run took to reach any target, from trace.csv.

A fixed target in a yaml can be too easy (passed on the way off the initial plateau) or out of reach. Here the
targets come from the serial runs: per problem, the *reference* is the P = 1 method with the lowest mean final
training loss over its seeds, and the targets are the training loss it reached at half and at nine tenths of its
budget (linear in epochs between evaluation points; the mean over its seeds). A run of the same budget at P > 1
reaches the first target if it gets as far as the best serial method did with half the gradients, the second if it
gets nearly as far as that method's whole run.

The time to a target is the rule of the summary's ``time_to_target_s`` (experiments.store.summary.crossing:
interpolated between the last evaluation above the target and the next one, counted only when the run stays at or
below from there on), applied to a run's trace for any target. Seconds are on the run's clock (``time_s``),
evaluation excluded; losses are the full training set's (nats).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from experiments.store.summary import crossing

FRACTIONS = (0.5, 0.9)
"""The fractions of the reference's budget at which its loss sets the targets."""
LABELS = {0.5: "T(1/2)", 0.9: "T(9/10)"}


def label(fraction: float) -> str:
    """A target's short name: ``T(1/2)`` for the loss at half the budget, ``T(9/10)``, else ``T(0.75)``."""
    return LABELS.get(fraction, f"T({fraction:g})")


def time_to_target(trace: pd.DataFrame, target: float, status: str = "ok") -> tuple[float, float]:
    """(seconds, updates) at which one run's trace reached ``target`` for good (NaN, NaN: never; a run that
    diverged never did). ``trace``: its rows in the order recorded, with ``train_loss``, ``time_s``, ``updates``."""
    if status == "diverged" or trace.empty or target is None or math.isnan(target):
        return math.nan, math.nan
    rows = trace[["train_loss", "time_s", "updates"]].to_dict("records")
    hit = crossing(rows, float(target))
    return (hit["time_s"], hit["updates"]) if hit else (math.nan, math.nan)


def loss_at(trace: pd.DataFrame, epoch: float) -> float:
    """The training loss of one run at ``epoch`` (linear between its evaluation points; NaN past its last one)."""
    t = trace.sort_values("epoch")
    e, loss = t["epoch"].to_numpy(dtype=float), t["train_loss"].to_numpy(dtype=float)
    if e.size == 0 or epoch > e[-1] + 1e-9 or epoch < e[0] - 1e-9:
        return math.nan
    return float(np.interp(epoch, e, loss))


def reference_targets(
    summary: pd.DataFrame, traces: pd.DataFrame, fractions: Sequence[float] = FRACTIONS
) -> pd.DataFrame:
    """Per problem, the targets the best serial method sets (module docstring).

    Args:
        summary: summary rows (status, problem, algorithm, workers, seed, epochs, run_id, final_train_loss).
        traces: every run's trace rows (run_id, epoch, train_loss).
        fractions: fractions of the budget (the reference runs' ``epochs``) at which the loss is read.
    Returns:
        One row per problem with P = 1 runs that ended ok: ``problem``, ``reference`` (the algorithm; ties to the
        first name), ``seeds``, ``epochs`` (the budget), ``final_loss`` (its mean final training loss), and one
        column ``target_<fraction>`` per fraction (nats). Empty without P = 1 runs or traces.
    """
    cols = ["problem", "reference", "seeds", "epochs", "final_loss"] + [f"target_{f:g}" for f in fractions]
    if (
        summary.empty
        or traces is None
        or traces.empty
        or "workers" not in summary
        or not {"run_id", "epoch", "train_loss", "time_s", "updates"} <= set(traces.columns)
    ):
        return pd.DataFrame(columns=cols)
    one = summary[(summary["workers"] == 1) & (summary["status"] == "ok")]
    rows = []
    for problem, runs in one.groupby("problem", sort=True):
        means = runs.groupby("algorithm")["final_train_loss"].mean().dropna()
        if means.empty:
            continue
        best = means.sort_values(kind="stable").index[0]
        ref = runs[runs["algorithm"] == best]
        row = {
            "problem": problem,
            "reference": best,
            "seeds": int(ref["seed"].nunique()),
            "epochs": float(ref["epochs"].mean()),
            "final_loss": float(means[best]),
        }
        for f in fractions:
            losses = [loss_at(traces[traces["run_id"] == r.run_id], f * float(r.epochs)) for r in ref.itertuples()]
            losses = [v for v in losses if not math.isnan(v)]
            row[f"target_{f:g}"] = float(np.mean(losses)) if losses else math.nan
        rows.append(row)
    return pd.DataFrame(rows, columns=cols)


def run_times(
    summary: pd.DataFrame, traces: pd.DataFrame, targets: pd.DataFrame, fractions: Sequence[float] = FRACTIONS
) -> pd.DataFrame:
    """Every run's time and updates to each target of its problem (:func:`reference_targets`).

    Returns:
        ``summary`` with, per fraction f, columns ``time_to_<f>`` (seconds on the run's clock, +inf when the run
        never reached the target, NaN for a run that did not end ok or diverge, or whose problem has no target) and
        ``updates_to_<f>`` (master updates, interpolated; NaN when not reached).
    """
    out = summary.copy()
    by_problem = targets.set_index("problem") if not targets.empty else pd.DataFrame()
    grouped = dict(tuple(traces.groupby("run_id", sort=False))) if traces is not None and not traces.empty else {}
    for f in fractions:
        times, updates = [], []
        for r in out.itertuples():
            target = by_problem[f"target_{f:g}"].get(r.problem, math.nan) if not by_problem.empty else math.nan
            if math.isnan(target) or r.status not in ("ok", "diverged"):
                times.append(math.nan)
                updates.append(math.nan)
                continue
            t, u = time_to_target(
                grouped.get(r.run_id, pd.DataFrame(columns=["train_loss", "time_s", "updates"])), target, r.status
            )
            times.append(math.inf if math.isnan(t) else t)
            updates.append(u)
        out[f"time_to_{f:g}"] = times
        out[f"updates_to_{f:g}"] = updates
    return out
