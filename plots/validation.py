"""model_validation (our experiment, APAM.md Sec. 3): measured points over the simulated curve."""

import numpy as np
import pandas as pd

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
        s["cores"] = s["cores"].astype(object).where(s["cores"].notna(), "").astype(str).str.replace(
            r"^(\d+)\.0*$", r"\1", regex=True)
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


FLAG_MEANING = ("the run did not emulate the compute it was asked for: its gradients overran their target times or "
                "woke up late beyond the calibrated wake-ups; runs recorded before the two were told apart count "
                "every late gradient")
"""What an overrun flag means, in the words every report section uses (:func:`overrun_count`)."""


def overrun_fraction(rows):
    """Per row of a summary: :func:`overrun_count` over ``gradients`` (NaN without an overrun count or gradients,
    e.g. simulated or real-compute rows); above ``emulation.OVERRUN_FLAG`` the run is flagged."""
    return overrun_count(rows) / rows["gradients"].where(rows["gradients"] > 0)


def overrun_workers(summary, column="workers", **match):
    """Worker counts (or the values of ``column``, e.g. ``agents``) of the measured (``clock=wall``) rows of
    ``summary`` whose columns equal ``match`` and whose emulated gradients overran their targets on more than
    ``OVERRUN_FLAG`` of them (:mod:`experiments.engines.emulation`): the machine did not run the requested compute
    there. [] without an ``overruns`` column or a matching row."""
    from experiments.engines.emulation import OVERRUN_FLAG

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
    setting (compute mode, emulated base seconds, the transport the simulated clock modelled = the measured engine),
    and, where the summary has a ``cores`` column, the same cores: a measured run shares this machine's cores, so
    it pairs with the clock on those cores, never with the prediction for a core per process (``dedicated``).

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
    keys = KEYS + SETTING + (["cores"] if "cores" in rows.columns else [])
    wall = seed_stats(rows[rows["clock"] == "wall"], keys + ["engine"], column)
    sim = seed_stats(rows[rows["clock"] == "simulated"], keys, column)
    if wall.empty or sim.empty:
        return pd.DataFrame(columns=keys + ["engine", "measured_s", "measured_min", "measured_max", "simulated_s",
                                            "simulated_min", "simulated_max", "n", "percent_error"])
    wall = wall.drop(columns="mean").rename(columns={"median": "measured_s", "min": "measured_min",
                                                     "max": "measured_max", "n": "n_w"})
    sim = sim.drop(columns="mean").rename(columns={"median": "simulated_s", "min": "simulated_min",
                                                   "max": "simulated_max", "n": "n_s"})
    out = wall.merge(sim, on=keys, how="inner")
    out["n"] = np.maximum(out.pop("n_w"), out.pop("n_s"))
    with np.errstate(divide="ignore", invalid="ignore"):
        out["percent_error"] = 100.0 * (out["simulated_s"] - out["measured_s"]) / out["measured_s"]
    return out.sort_values(keys + ["engine"]).reset_index(drop=True)


def _setting_part(compute, base):
    """File-name part of a compute setting (as :func:`plots.data.compute_settings` names them): ``real``,
    ``emulated-0.002s``."""
    return f"{compute}-{float(base):g}s" if compute == "emulated" else str(compute)


def draw_model_validation(exp, fmt="png"):
    """Per problem and compute setting: one row of panels per measured engine -- time per epoch against workers,
    the simulated clock as lines and the measured runs as points over them (colour and marker = algorithm), and
    beside it the percent error of every pair against workers.

    Applies to each problem of summary.csv with at least one pair of measured and simulated runs of the same
    setting (:func:`pair_clocks`). Several seeds: the median, with min-max whiskers. A problem with several compute
    settings (real, emulated at 2 ms, at 50 ms) gets one figure per setting; one whose algorithms would need more
    than ``style.MAX_LEGEND_ENTRIES`` legend entries, one per group of algorithms (:func:`style.fit_legend`).

    Raises:
        MissingColumnError: summary.csv lacks ``time_per_epoch_s`` while both clocks are present.
    Returns:
        list of written paths (``figures/model_validation-<problem>[-<setting>][-<algorithms>].<fmt>``).
    """
    exp = as_experiment(exp)
    summary = exp.summary
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
            flagged = int(any(overrun_workers(summary, problem=problem, algorithm=a, compute=compute,
                                              compute_base_s=base) for a in algorithms))
            parts = style.fit_legend([(a,) for a in algorithms], lambda part, f=flagged: 2 * len(part) + f + 1)
            for more, part in parts:
                mine = rows[rows["algorithm"].isin([k[0] for k in part])]
                name = style.slug("model_validation", problem,
                                  *([_setting_part(compute, base)] if len(settings) > 1 else []), *more)
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
            series.append(style.Series(x, line["simulated_s"].to_numpy(float), f"{algorithm} · simulated clock",
                                       color, marker, linestyle="--", short=f"{algorithm} simulated"))
            series.append(style.Series(x, line["measured_s"].to_numpy(float), f"{algorithm} · measured", color,
                                       marker, lo=line["measured_min"].to_numpy(float),
                                       hi=line["measured_max"].to_numpy(float), measured=True,
                                       short=f"{algorithm} measured"))
            errors.append(style.Series(x, line["percent_error"].to_numpy(float), f"_{algorithm} error", color,
                                       marker, linestyle="-", short=algorithm))
            bad.append(line[line["workers"].isin(overrun_workers(summary, problem=problem, algorithm=algorithm,
                                                                 engine=engine, compute=compute,
                                                                 compute_base_s=base))])
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
    style.figure_title(fig, exp, problem, f"simulated clock against measurement, {setting_label(compute, base)}",
                       note)
    return style.save(fig, exp.figures_dir, name, fmt)
