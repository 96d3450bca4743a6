"""The section of an experiment the report has no rules for (a user's own ``experiment_id``): its runs' means per
setting and its speed-ups, no claims."""

from __future__ import annotations

from experiments.analysis.speedup import speedup_table
from experiments.report.load import Experiment
from experiments.report.markdown import table
from experiments.report.sections.base import Section, target_note
from plots.data import varying_sweeps

SETTING = ["problem", "algorithm", "engine", "clock", "workers"]


def section_generic(data: Experiment) -> Section:
    """Per problem, algorithm, engine, clock, worker count and swept setting (max delay, tau, stragglers: those the
    runs vary, plots.data.varying_sweeps; the columns the summary has): runs, seeds, mean time
    per epoch (seconds on that clock), final training loss (nats) and test accuracy, and the speed-up in time per
    epoch (speedup.csv, or computed from the summary when the folder has none)."""
    ok = data.ok
    if ok.empty:
        return Section()
    keys = [c for c in SETTING if c in ok] + varying_sweeps(ok)
    sp = data.speedup if not data.speedup.empty else speedup_table(data.summary)
    g = (
        ok.groupby(keys, dropna=False)
        .agg(
            runs=("run_id", "size"),
            seeds=("seed", "nunique"),
            **{
                "time/epoch (s)": ("time_per_epoch_s", "mean"),
                "train loss": ("final_train_loss", "mean"),
                "test acc": ("final_test_acc", "mean"),
            },
        )
        .reset_index()
    )
    if not sp.empty and set(keys) <= set(sp.columns) and "tau" not in keys:  # speedup.csv has no tau column
        per_epoch = sp[sp["basis"] == "time_per_epoch"].groupby(keys, dropna=False)["speedup"].mean()
        g = g.join(per_epoch.rename("speed-up (time/epoch)"), on=keys)
    return Section(table(g) + target_note(ok))
