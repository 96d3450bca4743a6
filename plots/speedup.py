"""Speed-up, efficiency and time per epoch against the number of workers (paper Sec. 5.1-5.2 table, Fig. 10)."""

import numpy as np

from . import style
from .aggregate import seed_stats
from .data import as_experiment, compute_settings, distinct, varying_sweeps
from .validation import overrun_workers

BASIS_COLUMN = {"time_per_epoch": "time_per_epoch_s", "time_to_target": "time_to_target_s"}
PAPER_MARKERS = ("*", "P", "X", "h", "p")
PAPER_TIME_METRICS = ("time_per_epoch_s", "time_per_epoch_h")


def _finite(df, column):
    return df[np.isfinite(df[column]) & (df[column] > 0)]


def _seed_speedup_bands(summary, problem, basis):
    """Per (algorithm, engine, clock): min and max over seeds of mean T(1 worker) / T_seed(P workers).

    Returns {(algorithm, engine, clock): DataFrame(workers, lo, hi, n)} for lines with >= 2 seeds at some P.
    """
    column = BASIS_COLUMN.get(basis)
    if summary is None or column not in summary.columns:
        return {}
    rows = _finite(summary[summary["problem"] == problem], column)
    bands = {}
    for key, line in rows.groupby(["algorithm", "engine", "clock"], sort=True):
        base = line.loc[line["workers"] == 1, column]
        if base.empty:
            continue
        stats = seed_stats(line, ["workers"], column)
        if stats["n"].max() < 2:
            continue
        base_mean = float(base.mean())
        stats["lo"] = base_mean / stats["max"]
        stats["hi"] = base_mean / stats["min"]
        bands[key] = stats
    return bands


def _unreached_workers(summary, problem, basis, line):
    """Worker counts of one line's summary rows with no speed-up on the time_to_target basis (target not reached).

    ``line`` holds the speedup.csv rows of one (algorithm, engine, clock); [] for other bases or without summary.
    """
    column = BASIS_COLUMN.get(basis)
    if basis != "time_to_target" or summary is None or column not in summary.columns:
        return []
    first = line.iloc[0]
    mask = (summary["problem"] == problem) & np.isfinite(summary["workers"])
    for key in ("algorithm", "engine", "clock"):
        mask &= summary[key] == first[key]
    return sorted(set(distinct(summary[mask], "workers")) - set(distinct(line, "workers")))


def _paper_rows(paper, metrics):
    if paper is None:
        return paper
    rows = paper[paper["metric"].isin(metrics)]
    return rows[np.isfinite(rows["value"]) & np.isfinite(rows["workers"]) & (rows["value"] > 0)]


def draw_speedup(exp, fmt="png"):
    """Speed-up (log2-log2) with the ideal line and the paper's points, and efficiency beside it.

    One figure per (problem, basis) of speedup.csv that has >= 2 worker counts; one line per algorithm x engine x
    clock. On the time_to_target basis, worker counts of summary.csv without a speed-up row (the target was not
    reached) are marked x at the top edge. With several seeds in summary.csv, a min-max band of the per-seed speed-up
    (mean T(1) / T_seed(P)) surrounds each line. Paper points (metric ``speedup`` of the paper's CSV: time for a
    fixed number of epochs) on the time_per_epoch basis only.

    Args:
        exp: ``ExperimentData`` or an experiment folder path.
        fmt: "png" or "pdf".
    Returns:
        list of written paths (``figures/speedup-<problem>-<basis>.<fmt>``, one per compute setting where a problem
        has several: ``...-<basis>-<setting>.<fmt>``, :func:`plots.data.compute_settings`); [] when the figure does
        not apply.
    """
    exp = as_experiment(exp)
    if exp.speedup is None:
        return []
    written = []
    for problem in sorted(exp.speedup["problem"].unique()):
        for suffix, text, sub in compute_settings(exp, problem):
            sp = sub.speedup[sub.speedup["problem"] == problem]
            for basis, rows in sp.groupby("basis", sort=True):
                rows = _finite(rows[np.isfinite(rows["workers"])], "speedup")
                if len(distinct(rows, "workers")) < 2:
                    continue
                written.append(_speedup_figure(sub, problem, basis, rows, fmt, suffix, text))
    return written


def _speedup_figure(exp, problem, basis, rows, fmt, suffix="", setting=""):
    fig, axes = style.new_figure(1, 2)
    ax_s, ax_e = axes[0]
    bands = _seed_speedup_bands(exp.summary, problem, basis)
    n_seeds = 1
    if "n_seeds" in rows.columns and np.isfinite(rows["n_seeds"]).any():
        n_seeds = int(np.nanmax(rows["n_seeds"]))
    all_workers = list(distinct(rows, "workers"))
    for (algorithm, engine, clock), line in rows.groupby(["algorithm", "engine", "clock"], sort=True):
        line = line.sort_values("workers")
        kw = {"color": style.color_for(algorithm), "linestyle": style.linestyle_for(clock),
                  "marker": style.marker_for(engine), "label": style.line_label(algorithm, engine, clock, style.delay_text(
                      exp.summary, problem=problem, algorithm=algorithm, engine=engine, clock=clock))}
        ax_s.plot(line["workers"], line["speedup"], **kw)
        eff = line["speedup"] / line["workers"]
        ax_e.plot(line["workers"], eff, **kw)
        bad = line["workers"].isin(overrun_workers(exp.summary, problem=problem, algorithm=algorithm, engine=engine))
        style.mark_overrun(ax_s, line.loc[bad, "workers"], line.loc[bad, "speedup"])
        style.mark_overrun(ax_e, line.loc[bad, "workers"], eff[bad])
        unreached = _unreached_workers(exp.summary, problem, basis, line)
        for ax in (ax_s, ax_e):
            style.mark_missing(ax, unreached, kw["color"], label="target not reached (x at top edge, line's colour)")
        all_workers += unreached
        band = bands.get((algorithm, engine, clock))
        if band is not None:
            n_seeds = max(n_seeds, int(band["n"].max()))
            ax_s.fill_between(band["workers"], band["lo"], band["hi"], color=kw["color"], alpha=style.BAND_ALPHA,
                              linewidth=0)
            ax_e.fill_between(band["workers"], band["lo"] / band["workers"], band["hi"] / band["workers"],
                              color=kw["color"], alpha=style.BAND_ALPHA, linewidth=0)
    # the paper's speed-ups are of time for a fixed number of epochs: drawn on that basis only, never beside a
    # speed-up to a target loss, which measures something else
    paper = _paper_rows(exp.paper, ["speedup"]) if basis == "time_per_epoch" else None
    if paper is not None and not paper.empty:
        markers = {p: PAPER_MARKERS[i % len(PAPER_MARKERS)] for i, p in enumerate(distinct(paper, "problem"))}
        for (pproblem, algorithm), pts in paper.groupby(["problem", "algorithm"], sort=True):
            pts = pts.sort_values("workers")
            kw = {"marker": markers[pproblem], "s": 110, "facecolors": "none", "edgecolors": style.color_for(algorithm),
                      "linewidths": 1.4, "zorder": 4, "label": f"paper: {algorithm} ({pproblem})"}
            ax_s.scatter(pts["workers"], pts["value"], **kw)
            ax_e.scatter(pts["workers"], pts["value"] / pts["workers"], **kw)
        all_workers += distinct(paper, "workers")
    lo_w, hi_w = min(all_workers), max(all_workers)
    ideal = np.array([lo_w, hi_w], dtype=float)
    ax_s.plot(ideal, ideal, label="ideal (speed-up = workers)", **style.IDEAL_STYLE)
    ax_e.plot(ideal, [1.0, 1.0], label="_ideal", **style.IDEAL_STYLE)
    style.log2_workers_axis(ax_s, all_workers)
    style.log2_workers_axis(ax_e, all_workers)
    style.plain_log_axis(ax_s, "y", base=2)
    ax_s.set_ylabel(f"speed-up T(1) / T(P)  ({basis.replace('_', ' ')})")
    ax_e.set_ylabel("efficiency = speed-up / workers")
    ax_e.set_ylim(bottom=0)
    for ax in (ax_s, ax_e):
        ax.grid(True, which="major", alpha=0.3)
    ax_s.set_title("speed-up")
    ax_e.set_title("efficiency")
    style.legend_outside(fig, axes)
    style.title(fig, exp.name, problem, f"speed-up on the {basis.replace('_', ' ')} basis"
                + (f", {setting}" if setting else ""), style.seeds_note(n_seeds))
    return style.save(fig, exp.figures_dir, style.slug("speedup", problem, basis, *([suffix] if suffix else [])), fmt)


def draw_time_per_epoch(exp, fmt="png"):
    """Time per epoch (seconds) against workers, one line per algorithm x engine x clock (paper Fig. 10 style).

    Applies to each problem of summary.csv whose ``time_per_epoch_s`` has values at >= 2 worker counts and where
    no sweep column (max_delay, tau, straggler_*) varies within an algorithm x engine x clock. Left:
    seconds per epoch (mean over seeds, min-max band). Right, where a 1-worker time exists: time per epoch
    relative to 1 worker, T(P) / T(1), with the ideal 1/P and the paper's relative times (metrics
    ``time_per_epoch_h`` / ``time_per_epoch_s`` divided by the paper's 1-worker value of the same problem).

    Returns:
        list of written paths (``figures/time_per_epoch-<problem>.<fmt>``; one per compute setting where a problem
        has several, ``...-<problem>-<setting>.<fmt>``, :func:`plots.data.compute_settings`).
    """
    exp = as_experiment(exp)
    summary = exp.summary
    if summary is None or "time_per_epoch_s" not in summary.columns:
        return []
    written = []
    for problem in sorted(summary["problem"].unique()):
        for suffix, text, sub in compute_settings(exp, problem):
            rows = _finite(sub.summary[sub.summary["problem"] == problem], "time_per_epoch_s")
            if len(distinct(rows, "workers")) < 2 or varying_sweeps(rows, within=("algorithm", "engine", "clock")):
                continue
            written.append(_time_per_epoch_figure(sub, problem, rows, fmt, suffix, text))
    return written


def _paper_relative_times(paper):
    """Paper's time per epoch divided by its 1-worker value (same problem; same algorithm where listed)."""
    rows = _paper_rows(paper, PAPER_TIME_METRICS)
    out = []
    if rows is None or rows.empty:
        return out
    for (pproblem, metric), prow in rows.groupby(["problem", "metric"], sort=True):
        base_any = prow.loc[prow["workers"] == 1, "value"]
        if base_any.empty:
            continue
        for algorithm, pts in prow.groupby("algorithm", sort=True):
            base = pts.loc[pts["workers"] == 1, "value"]
            b = float(base.iloc[0]) if not base.empty else float(base_any.iloc[0])
            pts = pts[pts["workers"] > 1].sort_values("workers")
            if not pts.empty:
                out.append((pproblem, algorithm, pts["workers"].to_numpy(), pts["value"].to_numpy() / b))
    return out


def _time_per_epoch_figure(exp, problem, rows, fmt, suffix="", setting=""):
    stats = seed_stats(rows, ["algorithm", "engine", "clock", "workers"], "time_per_epoch_s")
    paper_rel = _paper_relative_times(exp.paper)
    has_base = bool((stats["workers"] == 1).any())
    ncols = 2 if (has_base or paper_rel) else 1
    fig, axes = style.new_figure(1, ncols)
    ax_t = axes[0][0]
    ax_r = axes[0][1] if ncols == 2 else None
    all_workers = list(distinct(stats, "workers"))
    for (algorithm, engine, clock), line in stats.groupby(["algorithm", "engine", "clock"], sort=True):
        kw = {"color": style.color_for(algorithm), "linestyle": style.linestyle_for(clock),
                  "marker": style.marker_for(engine), "label": style.line_label(algorithm, engine, clock, style.delay_text(
                      exp.summary, problem=problem, algorithm=algorithm, engine=engine, clock=clock))}
        ax_t.plot(line["workers"], line["mean"], **kw)
        if line["n"].max() > 1:
            ax_t.fill_between(line["workers"], line["min"], line["max"], color=kw["color"], alpha=style.BAND_ALPHA,
                              linewidth=0)
        base = line.loc[line["workers"] == 1, "mean"]
        if ax_r is not None and not base.empty:
            ax_r.plot(line["workers"], line["mean"] / float(base.iloc[0]), **kw)
    if ax_r is not None:
        markers = {p: PAPER_MARKERS[i % len(PAPER_MARKERS)] for i, p in enumerate(sorted({r[0] for r in paper_rel}))}
        for pproblem, algorithm, workers, rel in paper_rel:
            ax_r.scatter(workers, rel, marker=markers[pproblem], s=110, facecolors="none",
                         edgecolors=style.color_for(algorithm), linewidths=1.4, zorder=4,
                         label=f"paper: {algorithm} ({pproblem})")
            all_workers += list(workers)
        w = np.array(sorted(set(all_workers)), dtype=float)
        ax_r.plot(w, 1.0 / w, label="ideal 1 / workers", **style.IDEAL_STYLE)
        style.log2_workers_axis(ax_r, all_workers)
        style.plain_log_axis(ax_r, "y", base=2)
        ax_r.set_ylabel("time per epoch relative to 1 worker")
        ax_r.set_title("T(P) / T(1)")
        ax_r.grid(True, alpha=0.3)
    style.log2_workers_axis(ax_t, all_workers)
    if style.wants_log(stats["mean"]):
        style.plain_log_axis(ax_t, "y")
    else:
        ax_t.set_ylim(bottom=0)
    ax_t.set_ylabel("time per epoch (seconds)")
    ax_t.set_title("seconds per epoch")
    ax_t.grid(True, alpha=0.3)
    style.legend_outside(fig, axes)
    style.title(fig, exp.name, problem, "time per epoch against workers" + (f", {setting}" if setting else ""),
                style.seeds_note(stats["n"].max()))
    return style.save(fig, exp.figures_dir, style.slug("time_per_epoch", problem, *([suffix] if suffix else [])), fmt)
