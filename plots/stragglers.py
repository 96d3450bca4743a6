"""stragglers (our experiment, APAM.md Sec. 3): time to target when workers are unequal."""

import numpy as np

from . import style
from .aggregate import seed_stats
from .data import as_experiment, distinct, master_computes

X_LABELS = {
    "straggler_slowdown": "straggler slowdown (slow worker's compute time, × the others')",
    "straggler_sigma": "straggler sigma (lognormal spread of compute times)",
}
MISSING_SPREAD_PT = 7.0  # sideways spacing (points) of different lines' not-reached markers at one x
SHORT = {"straggler_slowdown": "slowdown", "straggler_sigma": "sigma"}
LINE_KEYS = ["algorithm", "engine", "clock", "cores"]
MISSING_LABEL = "target not reached (x at top edge, line's colour)"


def draw_stragglers(exp, fmt="png"):
    """Time to target against straggler_slowdown (or straggler_sigma when only it varies), per algorithm.

    Applies to each problem of summary.csv whose straggler_slowdown (else straggler_sigma) has >= 2 distinct
    values. One panel per value of the other straggler column (when it varies) x worker count (when it varies);
    one line per algorithm x engine x clock x cores, each with its own marker (:func:`style.draw_series`); runs that
    never reach the target are marked x at the top edge in the line's colour, spread sideways so lines stay apart
    (with a note and no y ticks when no run reached it). Several seeds: mean with a min-max band. Lines that would
    need more than ``style.MAX_LEGEND_ENTRIES`` legend entries are split into one figure per real engine, then per
    group of algorithms (:func:`style.fit_legend`).

    Raises:
        MissingColumnError: summary.csv lacks ``time_to_target_s``.
    Returns:
        list of written paths (``figures/stragglers-<problem>[-<engine>][-<algorithms>].<fmt>``).
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
        keys = list(rows.groupby(LINE_KEYS, sort=True).groups)
        missing = int(bool(rows["time_to_target_s"].isna().any()))
        # a legend entry is kept for a "lines overlap" note where there are several lines
        parts = style.fit_legend(
            keys,
            lambda part, missing=missing: len(part) + missing + (len(part) > 1),
            family_of=lambda k: style.family(k[1], k[2]),
        )
        for more, part in parts:
            mask = np.zeros(len(rows), dtype=bool)
            for key in part:
                mask |= (rows[LINE_KEYS] == list(key)).all(axis=1).to_numpy()
            written.append(
                _stragglers_figure(exp, problem, rows[mask], xcol, other, fmt, style.slug("stragglers", problem, *more))
            )
    return written


def _stragglers_figure(exp, problem, rows, xcol, other, fmt, name):
    row_vals = distinct(rows, other) if other else [None]
    counts = distinct(rows, "agents")
    master = master_computes(rows)
    col_vals = counts if len(counts) >= 2 else [None]
    fig, axes = style.new_figure(len(row_vals), len(col_vals), panel_size=(4.4, 3.3), sharey=True)
    clocks = distinct(rows, "clock")
    n_seeds = 1
    reached = bool(np.isfinite(rows["time_to_target_s"]).any())
    keys = list(rows.groupby(LINE_KEYS, sort=True).groups)
    markers = {k: style.LINE_MARKERS[i % len(style.LINE_MARKERS)] for i, k in enumerate(keys)}
    for i, rv in enumerate(row_vals):
        for j, cv in enumerate(col_vals):
            ax = axes[i][j]
            panel = rows
            parts = []
            if rv is not None:
                panel = panel[panel[other] == rv]
                parts.append(f"{SHORT[other]} {style.fmt_num(rv)}")
            if cv is not None:
                panel = panel[panel["agents"] == cv]
                parts.append(style.agents_text(cv, master))
            elif len(counts) == 1:
                parts.append(style.agents_text(counts[0], master))
            ax.set_title(", ".join(parts), fontsize="medium")
            groups = list(panel.groupby(LINE_KEYS, sort=True))
            series, misses = [], []
            for k, (key, line) in enumerate(groups):
                algorithm, engine, clock, cores = key
                color = style.color_for(algorithm)
                label = style.series_label(algorithm, engine, clock, cores)
                stats = seed_stats(line, [xcol], "time_to_target_s")
                several = not stats.empty and stats["n"].max() > 1
                if not stats.empty:
                    n_seeds = max(n_seeds, int(stats["n"].max()))
                series.append(
                    style.Series(
                        stats[xcol].to_numpy(float),
                        stats["mean"].to_numpy(float),
                        label,
                        color,
                        markers[key],
                        linestyle=style.linestyle_for(clock),
                        lo=stats["min"].to_numpy(float) if several else None,
                        hi=stats["max"].to_numpy(float) if several else None,
                        measured=clock == "wall",
                    )
                )
                gone = sorted(set(distinct(line, xcol)) - set(stats[xcol].astype(float)))
                misses.append((gone, color, MISSING_SPREAD_PT * (k - (len(groups) - 1) / 2)))
            style.draw_series(ax, series)
            for gone, color, offset in misses:
                style.mark_missing(ax, gone, color, label=MISSING_LABEL, offset_pt=offset)
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
    style.figure_title(fig, exp, problem, f"time to target against {SHORT[xcol]}", style.seeds_note(n_seeds))
    return style.save(fig, exp.figures_dir, name, fmt)
