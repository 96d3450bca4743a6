"""model_validation (our experiment, APAM.md Sec. 3): simulated against measured time per epoch."""

import numpy as np
import pandas as pd

from . import style
from .aggregate import seed_stats
from .data import as_experiment

KEYS = ["problem", "algorithm", "workers"]


def pair_clocks(summary, column="time_per_epoch_s"):
    """Pair measured (clock=wall) and simulated (clock=simulated) values with the same problem, algorithm, workers.

    Args:
        summary: summary.csv frame (columns problem, algorithm, engine, clock, workers, ``column``).
        column: the compared quantity, seconds.
    Returns:
        DataFrame, one row per (problem, algorithm, workers, measured engine): ``measured_s, measured_min,
        measured_max, simulated_s, simulated_min, simulated_max`` (means and min-max over seeds), ``n`` (largest
        seed count of the two sides) and ``percent_error = 100 * (simulated_s - measured_s) / measured_s``.
        Empty when no pair exists.
    """
    rows = summary[np.isfinite(summary[column]) & (summary[column] > 0)]
    wall = seed_stats(rows[rows["clock"] == "wall"], KEYS + ["engine"], column)
    sim = seed_stats(rows[rows["clock"] == "simulated"], KEYS, column)
    if wall.empty or sim.empty:
        return pd.DataFrame(columns=KEYS + ["engine", "measured_s", "measured_min", "measured_max", "simulated_s",
                                            "simulated_min", "simulated_max", "n", "percent_error"])
    wall = wall.rename(columns={"mean": "measured_s", "min": "measured_min", "max": "measured_max", "n": "n_w"})
    sim = sim.rename(columns={"mean": "simulated_s", "min": "simulated_min", "max": "simulated_max", "n": "n_s"})
    out = wall.merge(sim, on=KEYS, how="inner")
    out["n"] = np.maximum(out.pop("n_w"), out.pop("n_s"))
    out["percent_error"] = 100.0 * (out["simulated_s"] - out["measured_s"]) / out["measured_s"]
    return out.sort_values(KEYS + ["engine"]).reset_index(drop=True)


def draw_model_validation(exp, fmt="png"):
    """Simulated against measured time per epoch with the y = x line, each point annotated with its percent error;
    beside it the percent error against workers.

    Applies to each problem of summary.csv with at least one (algorithm, workers) run on both clocks (wall and
    simulated). Several seeds: the mean, with min-max whiskers on both axes.

    Raises:
        MissingColumnError: summary.csv lacks ``time_per_epoch_s`` while both clocks are present.
    Returns:
        list of written paths (``figures/model_validation-<problem>.<fmt>``).
    """
    exp = as_experiment(exp)
    summary = exp.summary
    if summary is None or not {"wall", "simulated"} <= set(summary["clock"]):
        return []
    exp.require("summary", "time_per_epoch_s")
    pairs = pair_clocks(summary)
    written = []
    for problem, pp in pairs.groupby("problem", sort=True):
        fig, axes = style.new_figure(1, 2, panel_size=(4.8, 4.0))
        ax, ax_err = axes[0]
        for (algorithm, engine), line in pp.groupby(["algorithm", "engine"], sort=True):
            color = style.color_for(algorithm)
            label = f"{algorithm} · measured on {engine}"
            xerr = style.whiskers(line["measured_s"], line["measured_min"], line["measured_max"])
            yerr = style.whiskers(line["simulated_s"], line["simulated_min"], line["simulated_max"])
            ax.errorbar(line["measured_s"], line["simulated_s"], xerr=xerr, yerr=yerr, fmt=style.marker_for(engine),
                        color=color, ecolor=color, elinewidth=0.8, capsize=2, label=label, markersize=6)
            for _, r in line.iterrows():
                ax.annotate(f"{style.fmt_num(r['workers'])}w: {r['percent_error']:+.1f}%",
                            (r["measured_s"], r["simulated_s"]), textcoords="offset points", xytext=(5, -11),
                            fontsize="x-small", color=color)
            ax_err.plot(line["workers"], line["percent_error"], color=color, marker=style.marker_for(engine),
                        label=label)
        both = np.concatenate([pp["measured_min"], pp["measured_max"], pp["simulated_min"], pp["simulated_max"]])
        lo, hi = float(both.min()), float(both.max())
        if hi / lo > 10:
            ax.set_xscale("log")
            ax.set_yscale("log")
            lim = (lo / 1.5, hi * 1.5)
        else:
            pad = 0.12 * (hi - lo) if hi > lo else 0.2 * hi
            lim = (max(0.0, lo - pad), hi + pad)
        ax.plot(lim, lim, label="y = x (perfect model)", **style.IDEAL_STYLE)
        ax.set_xlim(lim)
        ax.set_ylim(lim)
        ax.set_aspect("equal", adjustable="box")
        ax.set_xlabel("measured time per epoch (seconds, wall clock)")
        ax.set_ylabel("simulated time per epoch (seconds, simulated clock)")
        ax.set_title("simulated against measured")
        ax.grid(True, alpha=0.3)
        ax_err.axhline(0.0, **style.IDEAL_STYLE)
        style.log2_workers_axis(ax_err, pp["workers"])
        ax_err.set_ylabel("model error (percent)")
        ax_err.set_title("100 (simulated - measured) / measured", fontsize="medium")
        ax_err.grid(True, alpha=0.3)
        style.legend_outside(fig, axes)
        med = float(np.median(np.abs(pp["percent_error"])))
        seeds = style.seeds_note(pp["n"].max()).replace("band", "whiskers")
        note = f"median |error| {med:.1f}% over {len(pp)} pairs{seeds}"
        style.title(fig, exp.name, problem, "performance model against measurement", note)
        written.append(style.save(fig, exp.figures_dir, style.slug("model_validation", problem), fmt))
    return written
