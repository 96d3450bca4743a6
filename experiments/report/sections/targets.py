"""The targets the serial runs set and each algorithm's time to them, for sections that compare algorithms over
worker counts (lenet5_speedup): experiments.analysis.targets for the targets and times, experiments.analysis.
statistics for the intervals."""

from __future__ import annotations

import pandas as pd

from experiments.analysis.statistics import LEVEL, RESAMPLES, bootstrap_ci
from experiments.analysis.targets import FRACTIONS, label, reference_targets, run_times
from experiments.report.markdown import table


def targets_table(ok: pd.DataFrame, traces: pd.DataFrame, algorithms: list[str]) -> str:
    """Per problem, the targets (the best P = 1 algorithm's training loss at half and at nine tenths of its budget)
    and, per worker count, each algorithm's time to each (seconds on the runs' clock, mean over seeds [95%
    bootstrap interval]; ``not reached`` when a seed missed it). "" without P = 1 runs or traces."""
    targets = reference_targets(ok, traces)
    if targets.empty:
        return ""
    times = run_times(ok, traces, targets)
    out = []
    for t in targets.to_dict("records"):
        prob = t["problem"]
        levels = ", ".join(f"{label(f)} = {t[f'target_{f:g}']:.4g}" for f in FRACTIONS)
        out.append(
            f"\nTargets set by the runs ({prob}; experiments/analysis/targets.py): the training loss the best "
            f"serial algorithm ({t['reference']}, lowest mean final loss at P = 1, {t['seeds']} seed(s)) "
            f"reached at half and at nine tenths of its {t['epochs']:.3g} epochs: {levels}. Time to each "
            f"(s, mean [{LEVEL:.0%} bootstrap interval, {RESAMPLES:,} resamples], reached for good):\n"
        )
        rows = []
        q = times[times["problem"] == prob]
        for p in sorted(q["workers"].unique()):
            row = {"workers": int(p)}
            for a in algorithms:
                sel = q[(q["workers"] == p) & (q["algorithm"] == a)]
                for f in FRACTIONS:
                    row[f"{a} to {label(f)}"] = (
                        bootstrap_ci(sel[f"time_to_{f:g}"].to_numpy(dtype=float)).text() if len(sel) else "--"
                    )
            rows.append(row)
        out.append(table(pd.DataFrame(rows)))
    return "\n".join(out)
