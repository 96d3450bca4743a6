"""Speed-up, efficiency and time per epoch against the number of compute agents (paper Sec. 5.1-5.2 table, Fig. 10).

The x-axis counts compute agents (``agents`` of summary.csv and speedup.csv: the workers, plus the master where it
computes gradients too, the paper's threads; older files without the column count workers). One line per
algorithm x engine x clock x cores (:data:`LINE_KEYS`): the simulated clock on this machine's cores and on a
machine with a core per process are two predictions, never seeds of one. Predictions are lines (with a min-max
band over seeds); a real engine's measurements are points with their seeds' min-max whiskers.
"""

import numpy as np

from . import style
from .aggregate import seed_stats
from .data import (
    as_experiment,
    compute_settings,
    distinct,
    master_computes,
    varying_sweeps,
)
from .validation import overrun_workers

BASIS_COLUMN = {"time_per_epoch": "time_per_epoch_s", "time_to_target": "time_to_target_s"}
PAPER_MARKERS = ("*", "P", "X", "h", "p")
PAPER_TIME_METRICS = ("time_per_epoch_s", "time_per_epoch_h")
LINE_KEYS = ["algorithm", "engine", "clock", "cores", "master_computes"]
"""A line's identity (docs/INTERFACES.md, summary.csv): the master computing or not is one too, named in the label
only where a figure has both."""
UNREACHED_LABEL = "target not reached (x at top edge, line's colour)"


def _finite(df, column):
    return df[np.isfinite(df[column]) & (df[column] > 0)]


def _ok(summary):
    """The runs that ended ``ok`` (all rows where the summary has no ``status``): the ones speedup.csv averages."""
    if summary is None or "status" not in summary.columns:
        return summary
    return summary[summary["status"].isin(["ok", ""])]


def _seed_speedup_bands(summary, problem, basis):
    """Per line (:data:`LINE_KEYS`): min and max over seeds of mean T(1 agent) / T_seed(P agents).

    Returns {line key: DataFrame(agents, lo, hi, n)} for lines with >= 2 seeds at some P (seconds cancel: a ratio).
    """
    column = BASIS_COLUMN.get(basis)
    if summary is None or column not in summary.columns:
        return {}
    rows = _finite(_ok(summary[summary["problem"] == problem]), column)
    bands = {}
    for key, line in rows.groupby(LINE_KEYS, sort=True):
        base = line.loc[line["agents"] == 1, column]
        if base.empty:
            continue
        stats = seed_stats(line, ["agents"], column)
        if stats["n"].max() < 2:
            continue
        base_mean = float(base.mean())
        stats["lo"] = base_mean / stats["max"]
        stats["hi"] = base_mean / stats["min"]
        bands[key] = stats
    return bands


def _unreached(summary, problem, basis, key, line):
    """Agent counts of one line's summary rows with no speed-up on the time_to_target basis (target not reached).

    ``line`` holds the speedup.csv rows of the line ``key``; [] for other bases or without summary.
    """
    column = BASIS_COLUMN.get(basis)
    if basis != "time_to_target" or summary is None or column not in summary.columns:
        return []
    mask = (summary["problem"] == problem) & np.isfinite(summary["agents"])
    for col, value in zip(LINE_KEYS, key):
        mask &= summary[col] == value
    return sorted(set(distinct(summary[mask], "agents")) - set(distinct(line, "agents")))


def _paper_rows(paper, metrics, problem=None):
    """The paper's rows of ``metrics`` with a positive value: those of ``problem`` where the paper's CSV has any,
    else all of them (the run stands in for the paper's problem)."""
    if paper is None:
        return paper
    rows = paper[paper["metric"].isin(metrics)]
    rows = rows[np.isfinite(rows["value"]) & np.isfinite(rows["workers"]) & (rows["value"] > 0)]
    if problem is not None and (rows["problem"] == problem).any():
        rows = rows[rows["problem"] == problem]
    return rows


def line_label(key, both_masters=False):
    """Legend text of a line: :func:`style.series_label`, with whether the master computes where a figure has
    both."""
    algorithm, engine, clock, cores, master = key
    label = style.series_label(algorithm, engine, clock, cores)
    if both_masters:
        label += ", master computes" if master else ", master only applies"
    return label


def _with_delay(summary, problem, key, label):
    """``label`` · what made the line's staleness (:func:`style.delay_text`: delay model, mean tau range)."""
    delay = style.delay_text(summary, problem=problem, **dict(zip(LINE_KEYS, key)))
    return f"{label} · {delay}" if delay else label


def _markers(keys):
    """A distinct marker per line of a figure (``style.LINE_MARKERS``, in drawing order)."""
    return {k: style.LINE_MARKERS[i % len(style.LINE_MARKERS)] for i, k in enumerate(keys)}


def _linestyle(key):
    return "none" if key[2] == "wall" else style.prediction_linestyle(key[3])


def draw_speedup(exp, fmt="png"):
    """Speed-up (log2-log2) with the ideal line and the paper's points, and efficiency per compute agent beside it.

    One figure per (problem, basis) of speedup.csv that has >= 2 agent counts (one per compute setting where a
    problem has several, :func:`plots.data.compute_settings`; one per real engine, and then per group of
    algorithms, where its lines would need more than ``style.MAX_LEGEND_ENTRIES`` legend entries,
    :func:`style.fit_legend`); one line per :data:`LINE_KEYS`. x: compute agents (``agents``; workers in older
    files), labelled "compute agents (threads)" where the master computes. Predictions are lines with a min-max
    band of the per-seed speed-up (mean T(1) / T_seed(P)) where several seeds ran; measurements are points with
    whiskers of the same. On the time_to_target basis, agent counts of summary.csv without a speed-up row (the target
    was not reached) are marked x at the top edge. Paper points (metric ``speedup`` of the paper's CSV: time for a
    fixed number of epochs; its ``workers`` are the paper's threads) on the time_per_epoch basis only.

    Args:
        exp: ``ExperimentData`` or an experiment folder path.
        fmt: "png" or "pdf".
    Returns:
        list of written paths (``figures/speedup-<problem>-<basis>[-<setting>][-<engine>][-<algorithms>].<fmt>``);
        [] when the figure does not apply.
    """
    exp = as_experiment(exp)
    if exp.speedup is None:
        return []
    written = []
    for problem in sorted(exp.speedup["problem"].unique()):
        for suffix, text, sub in compute_settings(exp, problem):
            sp = sub.speedup[sub.speedup["problem"] == problem]
            for basis, rows in sp.groupby("basis", sort=True):
                rows = _finite(rows[np.isfinite(rows["agents"]) & (rows["agents"] > 0)], "speedup")
                if len(distinct(rows, "agents")) < 2:
                    continue
                keys = list(rows.groupby(LINE_KEYS, sort=True).groups)
                extras = _speedup_extras(sub, problem, basis, rows)
                parts = style.fit_legend(
                    keys,
                    lambda part, rows=rows, extras=extras: len(part) + extras + _note_entries(rows, part),
                    family_of=lambda k: style.family(k[1], k[2]),
                )
                for more, part in parts:
                    mask = np.zeros(len(rows), dtype=bool)
                    for key in part:
                        mask |= (rows[LINE_KEYS] == list(key)).all(axis=1).to_numpy()
                    name = style.slug("speedup", problem, basis, *([suffix] if suffix else []), *more)
                    written.append(_speedup_figure(sub, problem, basis, rows[mask], fmt, name, text))
    return written


def _speedup_extras(exp, problem, basis, rows):
    """Legend entries of a speed-up figure besides its lines: the ideal, the paper's points, the overrun ring."""
    n = 1
    paper = _paper_rows(exp.paper, ["speedup"], problem) if basis == "time_per_epoch" else None
    if paper is not None and not paper.empty:
        n += len(paper.groupby(["problem", "algorithm"]))
    if any(
        overrun_workers(exp.summary, "agents", problem=problem, algorithm=a, engine=e)
        for a, e in rows[["algorithm", "engine"]].drop_duplicates().itertuples(index=False)
    ):
        n += 1
    if basis == "time_to_target" and exp.summary is not None:
        n += 1  # room for the "target not reached" entry
    return n


def _note_entries(rows, part):
    """1 where the lines of ``part`` overlap (a "lines overlap" note in the legend), else 0."""
    series = [
        style.Series(g["agents"].to_numpy(float), g["speedup"].to_numpy(float), "", "", "")
        for key, g in rows.groupby(LINE_KEYS, sort=True)
        if key in set(part)
    ]
    return int(bool(style.overlap_groups(series, ideal=lambda x: x)))


def _speedup_figure(exp, problem, basis, rows, fmt, name, setting=""):
    fig, axes = style.new_figure(1, 2)
    ax_s, ax_e = axes[0]
    bands = _seed_speedup_bands(exp.summary, problem, basis)
    n_seeds = 1
    if "n_seeds" in rows.columns and np.isfinite(rows["n_seeds"]).any():
        n_seeds = int(np.nanmax(rows["n_seeds"]))
    all_x = list(distinct(rows, "agents"))
    groups = list(rows.groupby(LINE_KEYS, sort=True))
    markers = _markers([k for k, _ in groups])
    both = len({k[4] for k, _ in groups}) > 1
    speedups, efficiencies, marks = [], [], []
    for key, line in groups:
        algorithm, engine, clock = key[:3]
        line = line.sort_values("agents")
        x = line["agents"].to_numpy(float)
        sp = line["speedup"].to_numpy(float)
        short = line_label(key, both)
        kw = {
            "label": _with_delay(exp.summary, problem, key, short),
            "color": style.color_for(algorithm),
            "marker": markers[key],
            "linestyle": _linestyle(key),
            "measured": clock == "wall",
            "short": short,
        }
        band = bands.get(key)
        lo = hi = None
        if band is not None:
            n_seeds = max(n_seeds, int(band["n"].max()))
            band = band.set_index("agents").reindex(x)
            lo, hi = band["lo"].to_numpy(float), band["hi"].to_numpy(float)
            if np.isnan(lo).any():  # a count one seed alone reached: no range there
                lo, hi = np.where(np.isnan(lo), sp, lo), np.where(np.isnan(hi), sp, hi)
        speedups.append(style.Series(x, sp, lo=lo, hi=hi, **kw))
        efficiencies.append(
            style.Series(x, sp / x, lo=None if lo is None else lo / x, hi=None if hi is None else hi / x, **kw)
        )
        bad = line["agents"].isin(
            overrun_workers(exp.summary, "agents", problem=problem, algorithm=algorithm, engine=engine)
        )
        unreached = _unreached(exp.summary, problem, basis, key, line)
        marks.append((line[bad], unreached, kw["color"]))
        all_x += unreached
    xlabel = style.agents_label(master_computes(rows))
    unit = "agents" if master_computes(rows) else "workers"
    style.draw_series(ax_s, speedups, ideal=lambda v: v)
    style.draw_series(ax_e, efficiencies, ideal=np.ones_like)
    for bad, unreached, color in marks:
        style.mark_overrun(ax_s, bad["agents"], bad["speedup"])
        style.mark_overrun(ax_e, bad["agents"], bad["speedup"] / bad["agents"])
        for ax in (ax_s, ax_e):
            style.mark_missing(ax, unreached, color, label=UNREACHED_LABEL)
    # the paper's speed-ups are of time for a fixed number of epochs: drawn on that basis only, never beside a
    # speed-up to a target loss, which measures something else
    paper = _paper_rows(exp.paper, ["speedup"], problem) if basis == "time_per_epoch" else None
    if paper is not None and not paper.empty:
        all_x += distinct(paper, "workers")
    ideal = np.array([min(all_x), max(all_x)], dtype=float)
    style.draw_ideal(ax_s, ideal, ideal, f"ideal (speed-up = {unit})")
    style.draw_ideal(ax_e, ideal, [1.0, 1.0], "_ideal")
    if paper is not None and not paper.empty:
        pmarkers = {p: PAPER_MARKERS[i % len(PAPER_MARKERS)] for i, p in enumerate(distinct(paper, "problem"))}
        for (pproblem, algorithm), pts in paper.groupby(["problem", "algorithm"], sort=True):
            pts = pts.sort_values("workers")
            kw = {
                "marker": pmarkers[pproblem],
                "s": 110,
                "facecolors": "none",
                "edgecolors": style.color_for(algorithm),
                "linewidths": 1.4,
                "zorder": style.MARKER_Z - 0.5,
                "label": f"paper: {algorithm} ({pproblem})",
            }
            ax_s.scatter(pts["workers"], pts["value"], **kw)
            ax_e.scatter(pts["workers"], pts["value"] / pts["workers"], **kw)
    style.log2_workers_axis(ax_s, all_x, xlabel)
    style.log2_workers_axis(ax_e, all_x, xlabel)
    style.plain_log_axis(ax_s, "y", base=2)
    ax_s.set_ylabel(f"speed-up T(1) / T(P)  ({basis.replace('_', ' ')})")
    ax_e.set_ylabel(f"efficiency = speed-up / {unit}")
    ax_e.set_ylim(bottom=0)
    for ax in (ax_s, ax_e):
        ax.grid(True, which="major", alpha=0.3)
    ax_s.set_title("speed-up")
    ax_e.set_title(f"efficiency per {'compute agent' if unit == 'agents' else 'worker'}")
    style.legend_outside(fig, axes)
    note = style.seeds_note(n_seeds).replace("band:", "band or whiskers:")
    style.figure_title(
        fig,
        exp,
        problem,
        f"speed-up on the {basis.replace('_', ' ')} basis" + (f", {setting}" if setting else ""),
        note,
    )
    return style.save(fig, exp.figures_dir, name, fmt)


def draw_time_per_epoch(exp, fmt="png"):
    """Time per epoch (seconds) against compute agents, one line per :data:`LINE_KEYS` (paper Fig. 10 style).

    Applies to each problem of summary.csv whose ``time_per_epoch_s`` has values at >= 2 agent counts and where
    no sweep column (max_delay, tau, straggler_*) varies within a line. Left: seconds per epoch (mean over seeds;
    predictions as lines with a min-max band, measurements as points with min-max whiskers). Right, where a
    one-agent time exists: time per epoch relative to one agent, T(P) / T(1), with the ideal 1/P and the paper's
    relative times (metrics ``time_per_epoch_h`` / ``time_per_epoch_s`` divided by the paper's 1-worker value of
    the same problem). Split as :func:`draw_speedup` where the legend would be too long.

    Returns:
        list of written paths (``figures/time_per_epoch-<problem>[-<setting>][-<engine>][-<algorithms>].<fmt>``).
    """
    exp = as_experiment(exp)
    summary = exp.summary
    if summary is None or "time_per_epoch_s" not in summary.columns:
        return []
    written = []
    for problem in sorted(summary["problem"].unique()):
        for suffix, text, sub in compute_settings(exp, problem):
            rows = _finite(sub.summary[sub.summary["problem"] == problem], "time_per_epoch_s")
            rows = rows[np.isfinite(rows["agents"]) & (rows["agents"] > 0)]
            if len(distinct(rows, "agents")) < 2 or varying_sweeps(rows, within=LINE_KEYS):
                continue
            keys = list(rows.groupby(LINE_KEYS, sort=True).groups)
            extras = 1 + len(_paper_relative_times(sub.paper, problem))
            parts = style.fit_legend(
                keys, lambda part, extras=extras: len(part) + extras + 1, family_of=lambda k: style.family(k[1], k[2])
            )
            for more, part in parts:
                mask = np.zeros(len(rows), dtype=bool)
                for key in part:
                    mask |= (rows[LINE_KEYS] == list(key)).all(axis=1).to_numpy()
                name = style.slug("time_per_epoch", problem, *([suffix] if suffix else []), *more)
                written.append(_time_per_epoch_figure(sub, problem, rows[mask], fmt, name, text))
    return written


def _paper_relative_times(paper, problem=None):
    """Paper's time per epoch divided by its 1-worker value (same problem; same algorithm where listed); of
    ``problem`` only where the paper has it (:func:`_paper_rows`)."""
    rows = _paper_rows(paper, PAPER_TIME_METRICS, problem)
    out = []
    if rows is None or rows.empty:
        return out
    for (pproblem, _metric), prow in rows.groupby(["problem", "metric"], sort=True):
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


def _time_per_epoch_figure(exp, problem, rows, fmt, name, setting=""):
    stats = seed_stats(rows, LINE_KEYS + ["agents"], "time_per_epoch_s")
    paper_rel = _paper_relative_times(exp.paper, problem)
    has_base = bool((stats["agents"] == 1).any())
    ncols = 2 if (has_base or paper_rel) else 1
    fig, axes = style.new_figure(1, ncols)
    ax_t = axes[0][0]
    ax_r = axes[0][1] if ncols == 2 else None
    all_x = list(distinct(stats, "agents"))
    groups = list(stats.groupby(LINE_KEYS, sort=True))
    markers = _markers([k for k, _ in groups])
    both = len({k[4] for k, _ in groups}) > 1
    times, relative = [], []
    for key, line in groups:
        short = line_label(key, both)
        kw = {
            "label": _with_delay(exp.summary, problem, key, short),
            "short": short,
            "color": style.color_for(key[0]),
            "marker": markers[key],
            "linestyle": _linestyle(key),
            "measured": key[2] == "wall",
        }
        x = line["agents"].to_numpy(float)
        several = line["n"].max() > 1
        times.append(
            style.Series(
                x,
                line["mean"].to_numpy(float),
                lo=line["min"].to_numpy(float) if several else None,
                hi=line["max"].to_numpy(float) if several else None,
                **kw,
            )
        )
        base = line.loc[line["agents"] == 1, "mean"]
        if ax_r is not None and not base.empty:
            relative.append(style.Series(x, line["mean"].to_numpy(float) / float(base.iloc[0]), **kw))
    style.draw_series(ax_t, times)
    xlabel = style.agents_label(master_computes(rows))
    unit = "agent" if master_computes(rows) else "worker"
    if ax_r is not None:
        markers_p = {p: PAPER_MARKERS[i % len(PAPER_MARKERS)] for i, p in enumerate(sorted({r[0] for r in paper_rel}))}
        for pproblem, algorithm, workers, rel in paper_rel:
            ax_r.scatter(
                workers,
                rel,
                marker=markers_p[pproblem],
                s=110,
                facecolors="none",
                edgecolors=style.color_for(algorithm),
                linewidths=1.4,
                zorder=style.MARKER_Z - 0.5,
                label=f"paper: {algorithm} ({pproblem})",
            )
            all_x += list(workers)
        w = np.array(sorted(set(all_x)), dtype=float)
        style.draw_ideal(ax_r, w, 1.0 / w, f"ideal 1 / {unit}s")
        style.draw_series(ax_r, relative, ideal=lambda v: 1.0 / v)
        style.log2_workers_axis(ax_r, all_x, xlabel)
        style.plain_log_axis(ax_r, "y", base=2)
        ax_r.set_ylabel(f"time per epoch relative to 1 {unit}")
        ax_r.set_title("T(P) / T(1)")
        ax_r.grid(True, alpha=0.3)
    style.log2_workers_axis(ax_t, all_x, xlabel)
    if style.wants_log(stats["mean"]):
        style.plain_log_axis(ax_t, "y")
    else:
        ax_t.set_ylim(bottom=0)
    ax_t.set_ylabel("time per epoch (seconds)")
    ax_t.set_title("seconds per epoch")
    ax_t.grid(True, alpha=0.3)
    style.legend_outside(fig, axes)
    note = style.seeds_note(stats["n"].max()).replace("band:", "band or whiskers:")
    style.figure_title(
        fig, exp, problem, f"time per epoch against {xlabel.split(' (')[0]}" + (f", {setting}" if setting else ""), note
    )
    return style.save(fig, exp.figures_dir, name, fmt)
