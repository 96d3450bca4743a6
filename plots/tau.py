"""tau_threshold (our experiment, APAM.md Sec. 3): does APAM stay on course while tau = o(K^(1/4))?"""

import numpy as np
from matplotlib.ticker import FuncFormatter

from . import style
from .data import as_experiment, distinct, master_computes

GAP, LOSS = "final_opt_gap", "final_train_loss"


def tau_ratio(tau, updates):
    """tau / K^(1/4) with K = updates (float arrays; NaN where K <= 0)."""
    tau = np.asarray(tau, dtype=float)
    k = np.asarray(updates, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(k > 0, tau / np.where(k > 0, k, 1.0) ** 0.25, np.nan)


def _finite_stat(func, values):
    """func over the finite values (NaN when there are none)."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    return float(func(v)) if v.size else float("nan")


def _x_scale(ax, x):
    """Log x (symlog when tau = 0 is present) for values spanning > 10x, else linear; limits cover every x."""
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    if not x.size:
        return
    pos = x[x > 0]
    if pos.size and pos.max() / pos.min() > 10:
        if (x <= 0).any():
            thresh = float(pos.min())
            ax.set_xscale("symlog", linthresh=thresh, linscale=0.6)
            ax.set_xlim(-0.3 * thresh, pos.max() * 1.4)
        else:
            ax.set_xscale("log")
            ax.set_xlim(pos.min() / 1.4, pos.max() * 1.4)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    else:
        pad = 0.05 * (x.max() - x.min() or 1.0)
        ax.set_xlim(x.min() - pad, x.max() + pad)


def _line_stats(line, ycol):
    """Per tau: mean x, mean/min/max of y over seeds with a finite (and, for log axes, any) y; and missing taus."""
    out, missing = [], []
    for _tau, g in line.groupby("tau", sort=True):
        x = float(np.nanmean(g["x"])) if np.isfinite(g["x"]).any() else np.nan
        y = g[ycol].to_numpy(dtype=float)
        y = y[np.isfinite(y)]
        if y.size:
            out.append((x, y.mean(), y.min(), y.max(), y.size))
        else:
            missing.append(x)
    arr = np.array(out, dtype=float).reshape(-1, 5)
    return arr, missing


def draw_tau_threshold(exp, fmt="png"):
    """Loss after K updates and updates-to-target against tau / K^(1/4), K = updates of each run.

    Applies to each problem of summary.csv whose ``tau`` has >= 2 distinct values. Left: ``final_opt_gap``
    (``final_train_loss`` where the gap is empty for the whole problem). Right (when ``updates_to_target`` exists):
    updates to reach the target loss; runs that never reach it (or diverge) are marked x at the top edge (a centred
    note and no y ticks when no run reached it).
    One line per algorithm x engine x clock x cores (x compute agents where several), each with its own marker
    (:func:`style.draw_series`); dotted verticals at tau = K^(1/4) and
    tau = K^(1/2). Several seeds: mean with a min-max band.

    Raises:
        MissingColumnError: summary.csv lacks ``updates`` or both final_opt_gap and final_train_loss.
    Returns:
        list of written paths (``figures/tau_threshold-<problem>.<fmt>``).
    """
    exp = as_experiment(exp)
    summary = exp.summary
    if summary is None or "tau" not in summary.columns:
        return []
    written = []
    for problem, rows in summary.groupby("problem", sort=True):
        rows = rows[np.isfinite(rows["tau"])].copy()
        if len(distinct(rows, "tau")) < 2:
            continue
        exp.require("summary", "updates")
        if GAP in rows.columns and np.isfinite(rows[GAP]).any():
            ycol, ylabel = GAP, "optimality gap f(x_K) - f* after K updates"
        else:
            exp.require("summary", LOSS)
            ycol, ylabel = LOSS, "train loss after K updates"
        rows["x"] = tau_ratio(rows["tau"], rows["updates"])
        has_target = "updates_to_target" in rows.columns
        fig, axes = style.new_figure(1, 2 if has_target else 1)
        panels = [(axes[0][0], ycol, ylabel)]
        if has_target:
            panels.append((axes[0][1], "updates_to_target", "updates to target loss (updates)"))
        line_keys = ["algorithm", "engine", "clock", "cores"] + (["agents"] if rows["agents"].nunique() >= 2 else [])
        master = master_computes(rows)
        n_seeds = 1
        series = {id(ax): [] for ax, _, _ in panels}
        misses = []
        for i, (key, line) in enumerate(rows.groupby(line_keys, sort=True)):
            algorithm, engine, clock, cores = key[:4]
            label = style.series_label(algorithm, engine, clock, cores)
            if len(key) > 4:
                label += f" · {style.agents_text(key[4], master)}"
            color = style.color_for(algorithm)
            marker = style.LINE_MARKERS[i % len(style.LINE_MARKERS)]
            for ax, col, _ in panels:
                stats, missing = _line_stats(line, col)
                if stats.size:
                    n_seeds = max(n_seeds, int(stats[:, 4].max()))
                    several = stats[:, 4].max() > 1
                    series[id(ax)].append(
                        style.Series(
                            stats[:, 0],
                            stats[:, 1],
                            label,
                            color,
                            marker,
                            linestyle=style.linestyle_for(clock),
                            lo=stats[:, 2] if several else None,
                            hi=stats[:, 3] if several else None,
                            measured=clock == "wall",
                        )
                    )
                misses.append((ax, missing, color))
        for ax, _, _ in panels:
            style.draw_series(ax, series[id(ax)])
        for ax, missing, color in misses:
            style.mark_missing(ax, missing, color, label="not reached / diverged (top edge)")
        k = _finite_stat(np.median, rows["updates"])
        xmax = _finite_stat(np.max, rows["x"])
        for ax, col, lab in panels:
            ax.axvline(1.0, label="τ = K^(1/4)", **style.IDEAL_STYLE)
            if np.isfinite(k) and k**0.25 <= xmax * 1.05:
                ax.axvline(k**0.25, color="0.3", linestyle="-.", linewidth=1.0, label="τ = K^(1/2)")
            _x_scale(ax, rows["x"])
            if style.wants_log(rows[col] if col in rows.columns else [], ratio=10):
                style.plain_log_axis(ax, "y")
            ax.set_xlabel("τ / K^(1/4)  (τ: fixed delay in updates, K: updates)")
            ax.set_ylabel(lab)
            ax.grid(True, alpha=0.3)
            if col == "updates_to_target" and not np.isfinite(rows[col].to_numpy(dtype=float)).any():
                style.no_data_note(ax, "no run reached the target loss")
        panels[0][0].set_title("final loss after K updates")
        if has_target:
            panels[1][0].set_title("updates to reach the target loss")
        style.legend_outside(fig, axes)
        style.figure_title(
            fig, exp, problem, f"staleness threshold (K = {style.fmt_num(k)} updates)", style.seeds_note(n_seeds)
        )
        written.append(style.save(fig, exp.figures_dir, style.slug("tau_threshold", problem), fmt))
    return written
