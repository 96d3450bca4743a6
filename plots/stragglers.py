"""stragglers (our experiment, APAM.md Sec. 3): time to target when workers are unequal."""

import numpy as np

from . import style
from .aggregate import seed_stats
from .data import as_experiment, distinct

X_LABELS = {
    "straggler_slowdown": "straggler slowdown (slow worker's compute time, × the others')",
    "straggler_sigma": "straggler sigma (lognormal spread of compute times)",
}
MISSING_SPREAD_PT = 7.0  # sideways spacing (points) of different lines' not-reached markers at one x
SHORT = {"straggler_slowdown": "slowdown", "straggler_sigma": "sigma"}


def draw_stragglers(exp, fmt="png"):
    """Time to target against straggler_slowdown (or straggler_sigma when only it varies), per algorithm.

    Applies to each problem of summary.csv whose straggler_slowdown (else straggler_sigma) has >= 2 distinct
    values. One panel per value of the other straggler column (when it varies) x worker count (when it varies);
    one line per algorithm x engine x clock; runs that never reach the target are marked x at the top edge in the
    line's colour, spread sideways so lines stay apart (with a note and no y ticks when no run reached it).
    Several seeds: mean with a min-max band.

    Raises:
        MissingColumnError: summary.csv lacks ``time_to_target_s``.
    Returns:
        list of written paths (``figures/stragglers-<problem>.<fmt>``).
    """
    exp = as_experiment(exp)
    summary = exp.summary
    if summary is None:
        return []
    xcol = next((c for c in X_LABELS if len(distinct(summary, c)) >= 2), None)
    if xcol is None:
        return []
    exp.require("summary", "time_to_target_s")
    other = next((c for c in X_LABELS if c != xcol and len(distinct(summary, c)) >= 2), None)
    written = []
    for problem, rows in summary.groupby("problem", sort=True):
        rows = rows[np.isfinite(rows[xcol])]
        if len(distinct(rows, xcol)) < 2:
            continue
        row_vals = distinct(rows, other) if other else [None]
        workers = distinct(rows, "workers")
        col_vals = workers if len(workers) >= 2 else [None]
        fig, axes = style.new_figure(len(row_vals), len(col_vals), panel_size=(4.4, 3.3), sharey=True)
        clocks = distinct(rows, "clock")
        n_seeds = 1
        reached = bool(np.isfinite(rows["time_to_target_s"]).any())
        for i, rv in enumerate(row_vals):
            for j, cv in enumerate(col_vals):
                ax = axes[i][j]
                panel = rows
                parts = []
                if rv is not None:
                    panel = panel[panel[other] == rv]
                    parts.append(f"{SHORT[other]} {style.fmt_num(rv)}")
                if cv is not None:
                    panel = panel[panel["workers"] == cv]
                    parts.append(style.workers_text(cv))
                elif len(workers) == 1:
                    parts.append(style.workers_text(workers[0]))
                ax.set_title(", ".join(parts), fontsize="medium")
                groups = list(panel.groupby(["algorithm", "engine", "clock"], sort=True))
                for k, ((algorithm, engine, clock), line) in enumerate(groups):
                    color = style.color_for(algorithm)
                    kw = {"color": color, "linestyle": style.linestyle_for(clock), "marker": style.marker_for(engine),
                              "label": style.line_label(algorithm, engine, clock)}
                    stats = seed_stats(line, [xcol], "time_to_target_s")
                    if stats.empty:  # legend entry for a line with no reached point
                        ax.plot([], [], **kw)
                    else:
                        n_seeds = max(n_seeds, int(stats["n"].max()))
                        ax.plot(stats[xcol], stats["mean"], **kw)
                        if stats["n"].max() > 1:
                            ax.fill_between(stats[xcol], stats["min"], stats["max"], color=color,
                                            alpha=style.BAND_ALPHA, linewidth=0)
                    missing = sorted(set(distinct(line, xcol)) - set(stats[xcol].astype(float)))
                    style.mark_missing(ax, missing, color, label="target not reached (x at top edge, line's colour)",
                                       offset_pt=MISSING_SPREAD_PT * (k - (len(groups) - 1) / 2))
                ax.set_xlabel(X_LABELS[xcol])
                if j == 0:
                    unit = f"seconds, {clocks[0]} clock" if len(clocks) == 1 else "seconds"
                    ax.set_ylabel(f"time to target loss ({unit})")
                ax.grid(True, alpha=0.3)
                if not reached:
                    style.no_data_note(ax, "no run reached the target loss")
        # the panels share y: set the limits once, from every panel's data (a limit set on the first panel alone
        # would freeze the scale before the others are drawn), with head room for the "not reached" marks
        tops = [a.dataLim.y1 for row in axes for a in row if np.isfinite(a.dataLim.y1) and a.has_data()]
        if reached and tops:
            axes[0][0].set_ylim(0, 1.12 * max(tops))
        style.legend_outside(fig, axes)
        style.title(fig, exp.name, problem, f"time to target against {SHORT[xcol]}", style.seeds_note(n_seeds))
        written.append(style.save(fig, exp.figures_dir, style.slug("stragglers", problem), fmt))
    return written
