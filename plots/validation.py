"""model_validation (our experiment, APAM.md Sec. 3): measured runs against the simulated clock's predictions of them.

Two shapes of summary are read. Runs made with ``engine.predict`` carry their predictions in their own row
(``pred_time_per_epoch_s``, ``sitting_time_per_epoch_s``, ``twin_time_per_epoch_s``; experiments/clock/predict.py)
and a ``predicted_staleness.csv`` beside their ``staleness.csv``: :func:`prediction_rows`,
:func:`draw_predictions`, :func:`draw_predicted_staleness`. Older summaries hold separate simulated runs of the same
settings: :func:`pair_clocks` pairs them, :func:`draw_model_validation` draws them.
"""

import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from . import style
from .aggregate import seed_stats
from .data import as_experiment

KEYS = ["problem", "algorithm", "workers"]
SETTING = ["compute", "compute_base_s", "transport"]
"""How a gradient's time was made and which real engine's costs: a measured row pairs with the simulated row of the
same setting (older summaries without these columns: real compute, shared_memory costs)."""


def _with_setting(summary):
    """A copy of ``summary`` with the SETTING columns filled: ``compute`` real, ``compute_base_s`` 0 for none,
    ``transport`` the engine itself (wall rows) or shared_memory (simulated rows)."""
    s = summary.copy()
    if "compute" not in s:
        s["compute"] = "real"
    s["compute"] = s["compute"].fillna("real").astype(str)
    if "compute_base_s" not in s:
        s["compute_base_s"] = 0.0
    s["compute_base_s"] = pd.to_numeric(s["compute_base_s"], errors="coerce").fillna(0.0)
    wall = s["clock"] == "wall"
    if "transport" not in s:
        s["transport"] = np.where(wall, s["engine"], "shared_memory")
    s["transport"] = s["transport"].fillna("shared_memory").astype(str)
    s.loc[wall, "transport"] = s.loc[wall, "engine"]
    if "cores" in s:  # text, as plots.data reads it: a count written through a float column ("2.0") is the count
        s["cores"] = (
            s["cores"]
            .astype(object)
            .where(s["cores"].notna(), "")
            .astype(str)
            .str.replace(r"^(\d+)\.0*$", r"\1", regex=True)
        )
    return s


def overrun_count(rows):
    """Per row of a summary: its emulated gradients that did not run as asked -- ``overruns`` (computation over its
    target) plus the late wake-ups beyond those the calibrated wake-ups explain (``late_wakeups - late_expected``,
    at least 0; all of them when ``late_expected`` is unknown); :mod:`experiments.engines.emulation`. Rows written
    before late wake-ups were counted apart (no ``late_wakeups`` column or value) counted them in ``overruns``.
    NaN without an overrun count (simulated or real-compute rows)."""
    if "overruns" not in rows:
        return pd.Series(np.nan, index=rows.index)
    count = pd.to_numeric(rows["overruns"], errors="coerce")
    if "late_wakeups" in rows:
        late = pd.to_numeric(rows["late_wakeups"], errors="coerce")
        expected = pd.to_numeric(rows["late_expected"], errors="coerce") if "late_expected" in rows else np.nan
        count = count + (late - pd.Series(expected, index=rows.index).fillna(0.0)).clip(lower=0.0).fillna(0.0)
    return count


FLAG_MEANING = (
    "the run did not emulate the compute it was asked for: its gradients overran their target times or "
    "woke up late beyond the calibrated wake-ups; runs recorded before the two were told apart count "
    "every late gradient"
)
"""What an overrun flag means, in the words every report section uses (:func:`overrun_count`)."""


def overrun_fraction(rows):
    """Per row of a summary: :func:`overrun_count` over ``gradients`` (NaN without an overrun count or gradients,
    e.g. simulated or real-compute rows); above ``emulation.OVERRUN_FLAG`` the run is flagged."""
    return overrun_count(rows) / rows["gradients"].where(rows["gradients"] > 0)


def overrun_flagged(rows):
    """Per row of a summary: did its emulated gradients overrun on more than ``emulation.OVERRUN_FLAG`` of them
    (:func:`overrun_fraction`)? False where there is no overrun count or no ``gradients`` column."""
    from experiments.engines.emulation import OVERRUN_FLAG  # lazy: the engines import torch; figures need not

    if "overruns" not in rows or "gradients" not in rows:
        return pd.Series(False, index=rows.index)
    return overrun_fraction(rows) > OVERRUN_FLAG


def overrun_workers(summary, column="workers", **match):
    """Worker counts (or the values of ``column``, e.g. ``agents``) of the measured (``clock=wall``) rows of
    ``summary`` whose columns equal ``match`` and whose emulated gradients overran their targets on more than
    ``OVERRUN_FLAG`` of them (:mod:`experiments.engines.emulation`): the machine did not run the requested compute
    there. [] without an ``overruns`` column or a matching row."""
    from experiments.engines.emulation import OVERRUN_FLAG  # lazy: the engines import torch; figures need not

    if summary is None or "overruns" not in summary:
        return []
    rows = _with_setting(summary)
    rows = rows[rows["clock"] == "wall"]
    for col, value in match.items():
        rows = rows[rows[col] == value]
    return sorted({int(w) for w in rows.loc[overrun_fraction(rows) > OVERRUN_FLAG, column]})


def setting_label(compute, base_s):
    """``real compute`` or ``emulated 2 ms`` (base seconds shown in ms)."""
    return "real compute" if compute != "emulated" else f"emulated {style.fmt_num(1e3 * float(base_s))} ms"


def pair_clocks(summary, column="time_per_epoch_s"):
    """Pair measured (clock=wall) and simulated (clock=simulated) values of the same problem, algorithm, workers and
    setting (compute mode, emulated base seconds, the transport the simulated clock modelled = the measured engine).
    Simulated rows on a core per process (``cores`` = ``dedicated``) are no partner: a measured run shared this
    machine's cores.

    Args:
        summary: summary.csv frame (columns problem, algorithm, engine, clock, workers, ``column``; optional
            compute, compute_base_s, transport).
        column: the compared quantity (seconds, or updates for ``staleness_mean``).
    Returns:
        DataFrame, one row per (problem, algorithm, workers, setting, measured engine): ``measured_s, measured_min,
        measured_max, simulated_s, simulated_min, simulated_max`` (medians and min-max over seeds: this machine's
        speed drifts in phases of seconds, which a run of one second can fall into -- the median leaves out one slow
        seed of three), ``n`` (largest seed count of the two sides) and
        ``percent_error = 100 * (simulated_s - measured_s) / measured_s``.
        Empty when no pair exists.
    """
    s = _with_setting(summary)
    rows = s[np.isfinite(pd.to_numeric(s[column], errors="coerce"))]
    if column != "staleness_mean":
        rows = rows[rows[column] > 0]
    keys = KEYS + SETTING
    simulated = rows[rows["clock"] == "simulated"]
    if "cores" in simulated:  # a measured run shared this machine's cores: the clock on a core per process is no twin
        simulated = simulated[simulated["cores"].astype(str) != "dedicated"]
    wall = seed_stats(rows[rows["clock"] == "wall"], keys + ["engine"], column)
    sim = seed_stats(simulated, keys, column)
    if wall.empty or sim.empty:
        return pd.DataFrame(
            columns=keys
            + [
                "engine",
                "measured_s",
                "measured_min",
                "measured_max",
                "simulated_s",
                "simulated_min",
                "simulated_max",
                "n",
                "percent_error",
            ]
        )
    wall = wall.drop(columns="mean").rename(
        columns={"median": "measured_s", "min": "measured_min", "max": "measured_max", "n": "n_w"}
    )
    sim = sim.drop(columns="mean").rename(
        columns={"median": "simulated_s", "min": "simulated_min", "max": "simulated_max", "n": "n_s"}
    )
    out = wall.merge(sim, on=keys, how="inner")
    out["n"] = np.maximum(out.pop("n_w"), out.pop("n_s"))
    with np.errstate(divide="ignore", invalid="ignore"):
        out["percent_error"] = 100.0 * (out["simulated_s"] - out["measured_s"]) / out["measured_s"]
    return out.sort_values(keys + ["engine"]).reset_index(drop=True)


KINDS = ("pred", "sitting", "twin")
"""The three predictions of a measured run (experiments/clock/predict.py): ``pred`` the clock on this machine's cores
with the stored calibration, ``sitting`` with costs measured in the run's own sitting, ``twin`` the trace-driven twin
fed the run's timeline."""
PREDICTED = {k: f"{k}_time_per_epoch_s" for k in KINDS}
"""The summary column of each prediction (seconds per epoch)."""
ROW = ["problem", "algorithm", "engine", "workers", "compute", "compute_base_s"]
"""What one validation row is: a measured setting, its seeds pooled."""
KIND_MARKERS = {"pred": "o", "sitting": "s", "twin": "^"}


def has_predictions(summary):
    """Does ``summary`` carry the measured runs' own predictions (any of the :data:`PREDICTED` columns)?"""
    return summary is not None and any(c in summary for c in PREDICTED.values())


def prediction_rows(summary):
    """One row per measured setting (:data:`ROW`) of a summary with predictions: the median over its seeds of the
    measured time per epoch (``measured_s``) and of each prediction (``<kind>_s``, seconds), each prediction's error
    ``<kind>_err = 100 (<kind>_s - measured_s) / measured_s`` (percent; NaN where the kind is missing), ``drift`` =
    ``pred_err - sitting_err`` (percent of the measurement: how far the stored calibration is from the sitting's
    costs), ``n`` (seeds) and ``run_ids`` (the runs pooled, ``;``-joined).

    Rows are measured (``clock`` = wall), finished (``status`` ok when the column exists) runs; emulated runs that
    overran on more than ``emulation.OVERRUN_FLAG`` of their gradients are left out (they did not run the compute
    they were asked for). Empty (with these columns) when none.
    """
    cols = ROW + ["n", "run_ids", "measured_s"] + [f"{k}_{x}" for k in KINDS for x in ("s", "err")] + ["drift"]
    if not has_predictions(summary):
        return pd.DataFrame(columns=cols)
    s = _with_setting(summary)
    s = s[s["clock"] == "wall"]
    if "status" in s:
        s = s[s["status"] == "ok"]
    s = s[~overrun_flagged(s)]
    s = s[pd.to_numeric(s["time_per_epoch_s"], errors="coerce") > 0]
    if s.empty:
        return pd.DataFrame(columns=cols)
    s = s.assign(
        measured_s=pd.to_numeric(s["time_per_epoch_s"], errors="coerce"),
        **{f"{k}_s": pd.to_numeric(s[c], errors="coerce") if c in s else np.nan for k, c in PREDICTED.items()},
    )
    g = s.groupby(ROW, dropna=False, sort=True)
    out = g[["measured_s"] + [f"{k}_s" for k in KINDS]].median()
    out["n"] = g["seed"].nunique() if "seed" in s else g.size()
    out["run_ids"] = g["run_id"].agg(lambda r: ";".join(sorted(map(str, r))))
    out = out.reset_index()
    with np.errstate(divide="ignore", invalid="ignore"):
        for k in KINDS:
            out[f"{k}_err"] = 100.0 * (out[f"{k}_s"] - out["measured_s"]) / out["measured_s"]
    out["drift"] = out["pred_err"] - out["sitting_err"]
    return out[cols].reset_index(drop=True)


def tv_distance(a, b):
    """Total variation distance ``0.5 * sum |p - q|`` between two histograms given as counts indexed by value (pandas
    Series; each normalised to sum 1): 0 the same shape, 1 disjoint. NaN when either is empty."""
    a, b = pd.Series(a, dtype=float), pd.Series(b, dtype=float)
    if a.sum() <= 0 or b.sum() <= 0:
        return float("nan")
    p, q = a.groupby(level=0).sum() / a.sum(), b.groupby(level=0).sum() / b.sum()
    return 0.5 * float(p.sub(q, fill_value=0.0).abs().sum())


def pooled_histograms(run_ids, hists, predicted=None, kind="sitting"):
    """(measured, predicted) staleness histograms of ``run_ids`` pooled over the runs (Series of counts indexed by
    staleness, updates): ``hists`` the runs' staleness.csv rows (run_id, staleness, count), ``predicted`` their
    predicted_staleness.csv rows (run_id, prediction, staleness, count) of prediction ``kind``."""

    def pool(df):
        if df is None or df.empty:
            return pd.Series(dtype=float)
        d = df[df["run_id"].isin(list(run_ids))]
        return d.groupby(pd.to_numeric(d["staleness"]))["count"].sum().astype(float)

    if predicted is not None and not predicted.empty:
        predicted = predicted[predicted["prediction"].astype(str) == kind]
    return pool(hists), pool(predicted)


def _legend_proxies(ax, algorithms, kinds):
    """Legend entries: a colour per algorithm, a marker per prediction kind (at most len(algorithms) + 3)."""
    for a in algorithms:
        ax.add_line(Line2D([], [], color=style.color_for(a), linewidth=6, label=a))
    for k in kinds:  # pred drawn open, as on the panels
        ax.add_line(
            Line2D(
                [],
                [],
                color="black",
                marker=KIND_MARKERS[k],
                linestyle="none",
                markerfacecolor="none" if k == "pred" else "black",
                label=f"{k} prediction",
            )
        )


def draw_predictions(exp, fmt="png"):
    """Per problem: the three predictions of each measured setting against its measured time per epoch (one panel
    per measured engine, log-log, the diagonal and the +-10% band), and below each its errors against workers.
    Colour: algorithm; marker: prediction kind (``pred``, ``sitting``, ``twin``; :data:`KINDS`). Medians over seeds
    (:func:`prediction_rows`).

    Returns:
        list of written paths (``figures/model_validation-<problem>.<fmt>``); [] without predictions.
    """
    exp = as_experiment(exp)
    rows = prediction_rows(exp.summary)
    written = []
    for problem, pp in rows.groupby("problem", sort=True):
        engines = sorted(pp["engine"].astype(str).unique())
        kinds = [k for k in KINDS if pp[f"{k}_s"].notna().any()]
        fig, axes = style.new_figure(2, len(engines), panel_size=(4.4, 3.6))
        for col, engine in enumerate(engines):
            ax, ax_err = axes[0][col], axes[1][col]
            rows_e = pp[pp["engine"].astype(str) == engine]
            for algorithm, line in rows_e.groupby("algorithm", sort=True):
                color = style.color_for(algorithm)
                for k in kinds:
                    filled = k != "pred"
                    ax.scatter(
                        line["measured_s"],
                        line[f"{k}_s"],
                        marker=KIND_MARKERS[k],
                        s=28,
                        facecolors=color if filled else "none",
                        edgecolors=color,
                        zorder=3,
                    )
                    ax_err.plot(
                        line["workers"],
                        line[f"{k}_err"],
                        color=color,
                        marker=KIND_MARKERS[k],
                        linestyle="-" if k == "sitting" else ":",
                        markerfacecolor=color if filled else "none",
                    )
            both = pd.concat([rows_e["measured_s"]] + [rows_e[f"{k}_s"] for k in kinds]).dropna()
            both = both[both > 0]
            if len(both):
                lo, hi = float(both.min()) / 1.3, float(both.max()) * 1.3
                x = np.geomspace(lo, hi, 50)
                ax.plot(x, x, **style.IDEAL_STYLE)
                ax.fill_between(x, 0.9 * x, 1.1 * x, color="grey", alpha=0.15, linewidth=0)
                ax.set_xlim(lo, hi)
                ax.set_ylim(lo, hi)
            style.plain_log_axis(ax, "x")
            style.plain_log_axis(ax, "y")
            ax.set_xlabel("measured time per epoch (seconds)")
            ax.set_ylabel("predicted time per epoch (seconds)")
            ax.set_title(f"{engine}: predicted against measured (band: +-10%)", fontsize="small")
            ax.grid(True, alpha=0.3)
            ax_err.axhline(0.0, **style.IDEAL_STYLE)
            for lim in (-10, 10):
                ax_err.axhline(lim, color="grey", linewidth=0.6, linestyle=":")
            style.log2_workers_axis(ax_err, rows_e["workers"])
            ax_err.set_ylabel("error (percent of measured)")
            ax_err.set_title(f"{engine}: 100 (predicted - measured) / measured", fontsize="small")
            ax_err.grid(True, alpha=0.3)
        _legend_proxies(axes[0][0], sorted(pp["algorithm"].astype(str).unique()), kinds)
        style.legend_outside(fig, axes)
        note = "; ".join(f"{k} mean |error| {np.nanmean(np.abs(pp[f'{k}_err'])):.1f}%" for k in kinds)
        seeds = f" (medians of {int(pp['n'].max())} seeds)" if pp["n"].max() > 1 else ""
        style.title(fig, exp.name, problem, "the simulated clock's predictions of measured runs", note + seeds)
        written.append(style.save(fig, exp.figures_dir, style.slug("model_validation", problem), fmt))
    return written


STALENESS_PANELS = 4
"""Rows whose staleness histograms :func:`draw_predicted_staleness` draws, at most."""


def draw_predicted_staleness(exp, fmt="png"):
    """The staleness histograms of a few async rows with P > 1 (per problem and engine, the row of the largest
    worker count, up to :data:`STALENESS_PANELS`): measured (bars) and the ``sitting`` prediction (steps), pooled over
    seeds, with their total variation distance (:func:`tv_distance`).

    Returns:
        list of written paths (``figures/model_validation-staleness.<fmt>``); [] without predicted histograms.
    """
    exp = as_experiment(exp)
    rows = prediction_rows(exp.summary)
    predicted = getattr(exp, "predicted_staleness", None)
    if rows.empty or predicted is None or exp.staleness is None:
        return []
    rows = rows[(rows["workers"] > 1) & ~rows["algorithm"].astype(str).str.startswith("sync")]
    if rows.empty:
        return []
    picks = (
        rows.sort_values("workers")
        .groupby(["problem", "engine"], sort=True)
        .tail(1)
        .sort_values(["problem", "engine"])
        .head(STALENESS_PANELS)
    )
    fig, axes = style.new_figure(1, len(picks), panel_size=(4.0, 3.2))
    for ax, r in zip(axes[0], picks.itertuples(index=False)):
        measured, pred = pooled_histograms(str(r.run_ids).split(";"), exp.staleness, predicted)
        if measured.sum() > 0:
            ax.bar(
                measured.index,
                measured / measured.sum(),
                width=0.8,
                color=style.color_for(r.algorithm),
                alpha=0.5,
                label="measured",
            )
        if pred.sum() > 0:
            ax.step(pred.index, pred / pred.sum(), where="mid", color="black", label="sitting prediction")
        tv = tv_distance(measured, pred)
        ax.set_title(f"{r.problem}, {r.algorithm}, {r.engine}, P = {int(r.workers)}: TV {tv:.3f}", fontsize="small")
        ax.set_xlabel("staleness (updates)")
        ax.set_ylabel("share of updates")
        ax.grid(True, alpha=0.3)
    style.legend_outside(fig, axes)
    style.title(
        fig,
        exp.name,
        "async rows",
        "staleness measured against the sitting prediction",
        "TV: total variation distance (0 = same shape, 1 = disjoint); pooled over seeds",
    )
    return [style.save(fig, exp.figures_dir, "model_validation-staleness", fmt)]


def _setting_part(compute, base):
    """File-name part of a compute setting (as :func:`plots.data.compute_settings` names them): ``real``,
    ``emulated-0.002s``."""
    return f"{compute}-{float(base):g}s" if compute == "emulated" else str(compute)


def draw_model_validation(exp, fmt="png"):
    """Per problem and compute setting: one row of panels per measured engine -- time per epoch against workers,
    the simulated clock as lines and the measured runs as points over them (colour and marker = algorithm), and
    beside it the percent error of every pair against workers.

    Applies to each problem of summary.csv with at least one pair of measured and simulated runs of the same
    setting (:func:`pair_clocks`). Several seeds: the median, with min-max whiskers. A summary whose measured runs
    carry their own predictions (:func:`has_predictions`) is drawn by :func:`draw_predictions` and
    :func:`draw_predicted_staleness` instead. A problem with several compute
    settings (real, emulated at 2 ms, at 50 ms) gets one figure per setting; one whose algorithms would need more
    than ``style.MAX_LEGEND_ENTRIES`` legend entries, one per group of algorithms (:func:`style.fit_legend`).

    Raises:
        MissingColumnError: summary.csv lacks ``time_per_epoch_s`` while both clocks are present.
    Returns:
        list of written paths (``figures/model_validation-<problem>[-<setting>][-<algorithms>].<fmt>``).
    """
    exp = as_experiment(exp)
    summary = exp.summary
    if has_predictions(summary):
        return draw_predictions(exp, fmt) + draw_predicted_staleness(exp, fmt)
    if summary is None or not {"wall", "simulated"} <= set(summary["clock"]):
        return []
    exp.require("summary", "time_per_epoch_s")
    pairs = pair_clocks(summary)
    written = []
    for problem, pp in pairs.groupby("problem", sort=True):
        settings = sorted({(c, b) for c, b in zip(pp["compute"], pp["compute_base_s"])})
        for compute, base in settings:
            rows = pp[(pp["compute"] == compute) & (pp["compute_base_s"] == base)]
            algorithms = sorted(rows["algorithm"].unique())
            flagged = int(
                any(
                    overrun_workers(summary, problem=problem, algorithm=a, compute=compute, compute_base_s=base)
                    for a in algorithms
                )
            )
            parts = style.fit_legend([(a,) for a in algorithms], lambda part, f=flagged: 2 * len(part) + f + 1)
            for more, part in parts:
                mine = rows[rows["algorithm"].isin([k[0] for k in part])]
                name = style.slug(
                    "model_validation", problem, *([_setting_part(compute, base)] if len(settings) > 1 else []), *more
                )
                written.append(_validation_figure(exp, problem, mine, compute, base, fmt, name))
    return written


def _validation_figure(exp, problem, pp, compute, base, fmt, name):
    summary = exp.summary
    engines = sorted(pp["engine"].unique())
    fig, axes = style.new_figure(len(engines), 2, panel_size=(4.6, 3.4))
    algorithms = sorted(pp["algorithm"].unique())
    markers = {a: style.LINE_MARKERS[i % len(style.LINE_MARKERS)] for i, a in enumerate(algorithms)}
    for row, engine in enumerate(engines):
        ax, ax_err = axes[row]
        series, errors, bad = [], [], []
        for algorithm, line in pp[pp["engine"] == engine].groupby("algorithm", sort=True):
            color, marker = style.color_for(algorithm), markers[algorithm]
            x = line["workers"].to_numpy(float)
            series.append(
                style.Series(
                    x,
                    line["simulated_s"].to_numpy(float),
                    f"{algorithm} · simulated clock",
                    color,
                    marker,
                    linestyle="--",
                    short=f"{algorithm} simulated",
                )
            )
            series.append(
                style.Series(
                    x,
                    line["measured_s"].to_numpy(float),
                    f"{algorithm} · measured",
                    color,
                    marker,
                    lo=line["measured_min"].to_numpy(float),
                    hi=line["measured_max"].to_numpy(float),
                    measured=True,
                    short=f"{algorithm} measured",
                )
            )
            errors.append(
                style.Series(
                    x,
                    line["percent_error"].to_numpy(float),
                    f"_{algorithm} error",
                    color,
                    marker,
                    linestyle="-",
                    short=algorithm,
                )
            )
            bad.append(
                line[
                    line["workers"].isin(
                        overrun_workers(
                            summary,
                            problem=problem,
                            algorithm=algorithm,
                            engine=engine,
                            compute=compute,
                            compute_base_s=base,
                        )
                    )
                ]
            )
        # a measurement may well equal its own prediction: predictions and measurements are checked apart
        style.draw_series(ax, [s for s in series if not s.measured])
        style.draw_series(ax, [s for s in series if s.measured])
        style.draw_series(ax_err, errors)
        for rows in bad:
            style.mark_overrun(ax, rows["workers"], rows["measured_s"])
        ax.set_yscale("log")
        style.log2_workers_axis(ax, pp["workers"])
        ax.set_ylabel("time per epoch (seconds)")
        ax.set_title(f"{engine}: measured (points) over the simulated clock (lines)", fontsize="small")
        ax.grid(True, alpha=0.3)
        ax_err.axhline(0.0, zorder=style.IDEAL_Z, **style.IDEAL_STYLE)
        for lim in (-10, 10):
            ax_err.axhline(lim, color="grey", linewidth=0.6, linestyle=":")
        style.log2_workers_axis(ax_err, pp["workers"])
        ax_err.set_ylabel("model error (percent)")
        ax_err.set_title(f"{engine}: 100 (simulated - measured) / measured; goal +-10%", fontsize="small")
        ax_err.grid(True, alpha=0.3)
    style.legend_outside(fig, axes)
    err = np.abs(pp["percent_error"].to_numpy(dtype=float))
    seeds = style.seeds_note(pp["n"].max(), "median").replace("band", "whiskers")
    note = f"mean |error| {np.nanmean(err):.1f}%, max {np.nanmax(err):.1f}% over {len(pp)} pairs{seeds}"
    style.figure_title(fig, exp, problem, f"simulated clock against measurement, {setting_label(compute, base)}", note)
    return style.save(fig, exp.figures_dir, name, fmt)
