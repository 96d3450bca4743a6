"""async_methods: time to target of APAM and today's asynchronous methods, per compute-time model.

The figure (:func:`draw_async_methods`) draws experiments.analysis.comparisons' table: per problem, worker count and
compute-time model, each method's mean time to each target over its seeds with its 95% bootstrap interval and its
shared rank (identical methods merged). :func:`best_times` is the older table of an untuned grid swept by hand (the
factor with the lowest mean time over the seeds every factor ran), which the real-engine check (async_methods_real,
default steps) still reads.
"""

import math

import numpy as np
import pandas as pd
from matplotlib.patches import Patch

from experiments.analysis.comparisons import comparison, compute_model, replication_seeds, split_replication
from experiments.analysis.targets import FRACTIONS, label
from experiments.sweeps.tuning import time_to_target

from . import style
from .data import as_experiment
from .validation import _with_setting, overrun_count

MODELS = ("equal", "sqrt", "linear", "straggler8", "lognormal1")
MODEL_LABELS = {
    "equal": "equal",
    "sqrt": "sqrt(i) x base",
    "linear": "i x base",
    "straggler8": "one 8x straggler",
    "lognormal1": "lognormal sigma=1",
}
METHODS = (
    "apam",
    "apam_mishchenko",
    "apam_koloskova",
    "apam_wu",
    "apam_ringmaster",
    "async_sgd",
    "async_sgd_mishchenko",
    "async_sgd_koloskova",
    "async_sgd_wu",
    "ringmaster_asgd",
    "rennala_sgd",
    "sync_amsgrad",
)
MODEL_COLORS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c")
"""Bar colours of the compute-time models, in ``MODELS`` order (a categorical palette apart from the algorithms')."""


def best_times(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per (problem, workers, compute_model, algorithm): the best step factor and its time to target.

    For a grid swept by hand (``algorithm.lr_factor=a,b,c``; a tuned sweep's reported runs have one factor each,
    experiments/sweeps/tuning.py): the factor is chosen by the mean time over the seeds every factor ran, ties to the
    smaller factor; the columns describe all the seeds of the chosen factor. The real-engine check
    (:func:`engine_pairs`) reads it; async_methods' own table is experiments.analysis.comparisons'.

    Columns: problem, workers, compute_model, algorithm, lr_factor (the best), seeds, reached (seeds that reached
    the target with that factor), time_mean, time_min, time_max (seconds on the run's clock; inf when a seed did
    not reach the target), discarded_frac (discarded / gradients, mean over seeds), factors (how many were tried),
    factor_min, factor_max (the grid's ends: a choice at an end may have its optimum outside the grid).
    Failed runs are left out; diverged runs count as not reaching the target.
    """
    s = summary[summary["status"].isin(["ok", "diverged"])].copy()
    if s.empty:
        return pd.DataFrame()
    s["compute_model"] = [compute_model(r) for r in s.to_dict("records")]
    if "lr_factor" not in s:
        s["lr_factor"] = 1.0
    s["t"] = [time_to_target(r) for r in s.to_dict("records")]  # inf unless reached by a run that ended ok
    s["discarded_frac"] = s.get("discarded", 0) / s["gradients"].where(s["gradients"] > 0)
    keys = ["problem", "workers", "compute_model", "algorithm"]
    # the factor is chosen on the seeds that every factor of the setting ran
    n_factors = s.groupby(keys)["lr_factor"].transform("nunique")
    s["common"] = s.groupby(keys + ["seed"])["lr_factor"].transform("nunique") == n_factors
    choice = (
        s[s["common"]]
        .groupby(keys + ["lr_factor"], sort=True)["t"]
        .mean()
        .rename("choice_mean")
        .reset_index()
        .sort_values(keys + ["choice_mean", "lr_factor"])
        .groupby(keys, sort=True)
        .head(1)
    )
    per_factor = (
        s.groupby(keys + ["lr_factor"], sort=True)
        .agg(
            seeds=("seed", "nunique"),
            reached=("t", lambda t: int(np.isfinite(t).sum())),
            time_mean=("t", "mean"),
            time_min=("t", "min"),
            time_max=("t", "max"),
            discarded_frac=("discarded_frac", "mean"),
        )
        .reset_index()
    )
    per_factor["factors"] = per_factor.groupby(keys)["lr_factor"].transform("nunique")
    per_factor["factor_min"] = per_factor.groupby(keys)["lr_factor"].transform("min")
    per_factor["factor_max"] = per_factor.groupby(keys)["lr_factor"].transform("max")
    best = per_factor.merge(choice[keys + ["lr_factor"]], on=keys + ["lr_factor"])
    return best.sort_values(keys).reset_index(drop=True)


def ranks(best: pd.DataFrame) -> pd.DataFrame:
    """``best`` with ``rank`` (1 = fastest to target within its problem, workers and compute model; methods that
    never reach it share the last rank)."""
    if best.empty:
        return best
    out = best.copy()
    out["rank"] = out.groupby(["problem", "workers", "compute_model"])["time_mean"].rank(method="min")
    return out


def _order(values, order):
    return [v for v in order if v in values] + sorted(v for v in values if v not in order)


def engine_pairs(summary: pd.DataFrame) -> pd.DataFrame:
    """The real-engine check of the async_methods ranking (async_methods_real): each method's time to target
    measured on a real engine beside its simulated twin (the simulated runs whose clock modelled that engine).

    Args:
        summary: summary.csv of a sweep over ``engine`` with both clocks (columns as :func:`best_times`, plus
            ``clock``, ``engine``, optional ``transport`` and ``overruns``).
    Returns:
        DataFrame, one row per (problem, workers, compute_model, engine, algorithm) with a measured and a simulated
        side: ``measured_s`` / ``simulated_s`` (mean time to target over seeds, seconds, inf when a seed never
        reached it), ``rank_measured`` / ``rank_simulated`` (1 = fastest within problem, workers, compute model and
        engine; ties share the lower rank), ``overrun_frac`` (emulated gradients that did not run as asked,
        :func:`plots.validation.overrun_count`, over all gradients of the measured runs). Empty when no measured
        run has a simulated twin.
    """
    if summary is None or summary.empty or "clock" not in summary:
        return pd.DataFrame()
    s = _with_setting(summary)  # its transport: the real engine a row measured or modelled
    s["side"] = s["transport"]
    sides = []
    for clock, name in (("wall", "measured"), ("simulated", "simulated")):
        part = s[s["clock"] == clock]
        per = [best_times(rows).assign(engine=eng) for eng, rows in part.groupby("side", sort=True)]
        per = [b for b in per if not b.empty]
        if not per:
            return pd.DataFrame()
        b = pd.concat(per, ignore_index=True).rename(columns={"time_mean": f"{name}_s"})
        sides.append(b[["problem", "workers", "compute_model", "engine", "algorithm", f"{name}_s"]])
    keys = ["problem", "workers", "compute_model", "engine", "algorithm"]
    out = sides[0].merge(sides[1], on=keys, how="inner")
    for name in ("measured", "simulated"):
        out[f"rank_{name}"] = out.groupby(keys[:-1])[f"{name}_s"].rank(method="min")
    wall = s[s["clock"] == "wall"].copy()
    wall["compute_model"] = [compute_model(r) for r in wall.to_dict("records")]
    wall["_over"], wall["engine"] = overrun_count(wall).fillna(0), wall["side"]
    frac = wall.groupby(keys)[["_over", "gradients"]].sum()
    frac = (frac["_over"] / frac["gradients"].where(frac["gradients"] > 0)).rename("overrun_frac").reset_index()
    out = out.merge(frac, on=keys, how="left")
    order = {m: i for i, m in enumerate(METHODS)}
    return out.sort_values(
        keys[:-1] + ["algorithm"], key=lambda c: c.map(order) if c.name == "algorithm" else c
    ).reset_index(drop=True)


def _hide_unused(axes, used):
    """Hide the panels of a grid past the first ``used``."""
    for k, ax in enumerate(np.ravel(axes)):
        if k >= used:
            ax.set_visible(False)


def draw_engine_check(exp, fmt="png"):
    """The real-engine check of async_methods: per problem, one panel per worker count and compute-time model; per
    method, one bar per real engine (measured, solid) beside its simulated twin (hatched); x: never reached the
    target. Applies to an async_methods-style sweep (summary.csv has a ``policy`` column) that pairs measured and
    simulated runs of several methods (:func:`engine_pairs`). Panels wrap onto further rows where they would make
    the figure wider than ``style.MAX_WIDTH_PX``.

    Returns:
        list of written paths (``figures/engine_check-<problem>.<fmt>``).
    """
    exp = as_experiment(exp)
    if exp.summary is None or "policy" not in exp.summary:
        return []
    pairs = engine_pairs(exp.summary)
    if pairs.empty or pairs["algorithm"].nunique() < 2 or not np.isfinite(pairs["measured_s"]).any():
        return []  # nothing reached a target (e.g. model_validation, which has none)
    written = []
    for problem, rows in pairs.groupby("problem", sort=True):
        models = _order(set(rows["compute_model"]), MODELS)
        panels = [
            (p, m)
            for p in sorted(rows["workers"].unique())
            for m in models
            if not rows[(rows["workers"] == p) & (rows["compute_model"] == m)].empty
        ]
        engines = sorted(rows["engine"].unique())
        methods = _order(set(rows["algorithm"]), METHODS)
        finite = np.concatenate([rows[c].to_numpy(dtype=float) for c in ("measured_s", "simulated_s")])
        finite = finite[np.isfinite(finite)]
        top = float(finite.max()) * 1.15 if len(finite) else 1.0
        panel_w = 1.2 + 0.2 * len(methods) * len(engines)
        nrows, ncols = style.grid_shape(len(panels), panel_w)
        fig, axes = style.new_figure(nrows, ncols, panel_size=(panel_w, 3.6), sharey=True)
        bars = [(e, side) for e in engines for side in ("measured", "simulated")]
        width = 0.8 / len(bars)
        shades = dict(zip(engines, ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728")))
        for j, (p, model) in enumerate(panels):
            ax = axes[j // ncols][j % ncols]
            panel = rows[(rows["workers"] == p) & (rows["compute_model"] == model)]
            for k, (eng, side) in enumerate(bars):
                r = panel[panel["engine"] == eng].set_index("algorithm").reindex(methods)
                xs = np.arange(len(methods)) + (k - (len(bars) - 1) / 2) * width
                t = r[f"{side}_s"].to_numpy(dtype=float)
                ok = np.isfinite(t)
                ax.bar(
                    xs[ok],
                    t[ok],
                    width,
                    color=shades[eng] if side == "measured" else "white",
                    edgecolor=shades[eng],
                    hatch=None if side == "measured" else "///",
                    linewidth=0.8,
                )
                miss = ~ok & r[f"{side}_s"].notna().to_numpy()
                if miss.any():
                    ax.plot(xs[miss], [top * 0.97] * int(miss.sum()), "x", color=shades[eng], markersize=5)
            ax.set_xticks(range(len(methods)))
            ax.set_xticklabels(methods, rotation=30, ha="right", fontsize=8)
            ax.set_title(f"P = {int(p)}, {MODEL_LABELS.get(model, model)}")
            ax.set_ylim(0, top)
            if j % ncols == 0:
                ax.set_ylabel("time to target (s)")
        _hide_unused(axes, len(panels))
        handles = [
            Patch(
                facecolor=shades[e] if side == "measured" else "white",
                edgecolor=shades[e],
                hatch=None if side == "measured" else "///",
            )
            for e, side in bars
        ]
        labels = [f"{e} {'measured (wall)' if side == 'measured' else 'simulated twin'}" for e, side in bars]
        fig.legend(
            handles, labels, loc="outside lower center", ncols=min(4, len(labels)), fontsize="small", frameon=False
        )
        n = int(exp.summary["seed"].nunique()) if "seed" in exp.summary else 1
        style.figure_title(
            fig,
            exp,
            problem,
            "time to target, real engines beside the simulated clock",
            note="emulated compute; x: never reached" + (f"; {style.seeds_note(n).strip(' ()')}" if n > 1 else ""),
        )
        written.append(style.save(fig, exp.path / "figures", style.slug("engine_check", problem), fmt))
    return written


def draw_async_methods(exp, fmt="png"):
    """Grouped bars of time to target with 95% bootstrap intervals (experiments.analysis.comparisons): per problem,
    one panel per (target, worker count) -- targets: the serial runs' T(1/2) and T(9/10), or the configured one --
    groups = methods (named on the x-axis, identical methods merged), one bar per compute-time model (the legend: at
    most ``len(MODELS)`` entries however many methods ran), its shared rank above it; x: never reached on any seed;
    an arrow: the interval's top is "not reached" (some seeds missed). Panels wrap onto further rows where they would
    make the figure wider than ``style.MAX_WIDTH_PX``.
    Applies to each problem of summary.csv that has a ``policy`` column (the async_methods sweep).

    Returns:
        list of written paths (``figures/async_methods-<problem>.<fmt>``).
    """
    exp = as_experiment(exp)
    summary = exp.summary
    if summary is None or "policy" not in summary or "time_to_target_s" not in summary:
        return []
    if "clock" in summary and summary["clock"].nunique() > 1:
        return []  # measured and simulated runs side by side: draw_engine_check draws them, never mixed here
    (summary, traces), _ = split_replication(summary, exp.traces, replication_seeds(exp.name))  # reported seeds
    table, targets = comparison(summary, traces)
    if table.empty or table["algorithm"].nunique() < 2:
        return []
    names = [c.removeprefix("time ") for c in table.columns if c.startswith("time ")]
    if not any(math.isfinite(iv.point) for n in names for iv in table[f"time {n}"]):
        return []  # no method reached a target (e.g. a timing-only problem, which has none)
    written = []
    for problem, rows in table.groupby("problem", sort=True):
        workers = sorted(rows["workers"].unique())
        models = _order(set(rows["compute_model"]), MODELS)
        methods = list(dict.fromkeys(sorted(rows["algorithm"], key=lambda m: _first_index(m))))
        colors = {m: MODEL_COLORS[i % len(MODEL_COLORS)] for i, m in enumerate(models)}
        panels = [(name, p) for name in names for p in workers]
        panel_w = 1.2 + 0.15 * len(models) * len(methods) + 0.1 * len(methods)
        nrows, ncols = style.grid_shape(len(panels), panel_w)
        fig, axes = style.new_figure(nrows, ncols, panel_size=(panel_w, 3.6), sharey=False)
        width = 0.8 / len(models)
        for j, (name, p) in enumerate(panels):
            ax = axes[j // ncols][j % ncols]
            col = rows[f"time {name}"]
            finite = [v for iv in col for v in (iv.point, iv.hi) if isinstance(iv, tuple) and math.isfinite(v)]
            top = max(finite) * 1.2 if finite else 1.0
            panel = rows[rows["workers"] == p]
            for k, model in enumerate(models):
                r = panel[panel["compute_model"] == model].set_index("algorithm").reindex(methods)
                xs = np.arange(len(methods)) + (k - (len(models) - 1) / 2) * width
                for x, iv, rank in zip(xs, r[f"time {name}"], r[f"rank {name}"]):
                    if not isinstance(iv, tuple):
                        continue  # the method did not run under this compute model
                    if not math.isfinite(iv.point):
                        ax.plot([x], [top * 0.95], "x", color=colors[model], markersize=5)
                        continue
                    hi = iv.hi if math.isfinite(iv.hi) else top * 0.97
                    ax.bar(
                        [x],
                        [iv.point],
                        width,
                        color=colors[model],
                        yerr=style.whiskers([iv.point], [iv.lo], [hi]),
                        error_kw={"linewidth": 0.8},
                    )
                    if not math.isfinite(iv.hi):
                        ax.annotate("", xy=(x, top), xytext=(x, hi), arrowprops={"arrowstyle": "->", "lw": 0.8})
                    ax.text(x, min(hi, top * 0.9) * 1.02, f"{int(rank)}", ha="center", va="bottom", fontsize=6)
            ax.set_xticks(range(len(methods)))
            ax.set_xticklabels(methods, rotation=30, ha="right", fontsize=8)
            ax.set_title(
                f"P = {int(p)}, {name}" + (f" = {_target(targets, problem, name):.3g}" if name != "configured" else ""),
                fontsize="small",
            )
            ax.set_ylim(0, top)
            if j % ncols == 0:
                clock = str(summary["clock"].iloc[0]) if "clock" in summary else "simulated"
                ax.set_ylabel(f"time to target ({clock} s)")
        _hide_unused(axes, len(panels))
        n_seeds = int(rows["seeds"].max()) if len(rows) else 1
        what = (
            "T(1/2), T(9/10): the best serial method's loss at 1/2, 9/10 of the budget"
            if names != ["configured"]
            else f"target train loss {summary.loc[summary['problem'] == problem, 'target_loss'].iloc[0]:g}"
        )
        style.figure_title(
            fig,
            exp,
            problem,
            "time to target per method and compute-time model (tuned steps)",
            note=f"{what}\nmean of {n_seeds} seed(s); whiskers: 95% bootstrap interval; numbers: "
            "shared rank; x: never reached",
        )
        fig.legend(
            [Patch(color=colors[m]) for m in models],
            [MODEL_LABELS.get(m, m) for m in models],
            loc="outside lower center",
            ncols=min(5, len(models)),
            title="compute-time model",
            fontsize="small",
            title_fontsize="small",
            frameon=False,
        )
        written.append(style.save(fig, exp.path / "figures", style.slug("async_methods", problem), fmt))
    return written


def _first_index(method: str) -> int:
    """A (possibly merged) method's place in METHODS (its first name's), unknown methods last."""
    first = method.split(" = ")[0]
    return METHODS.index(first) if first in METHODS else len(METHODS)


def _target(targets: pd.DataFrame, problem: str, name: str) -> float:
    """The loss of target ``name`` (``T(1/2)``) of ``problem`` in experiments.analysis.targets' frame."""
    col = next(f"target_{f:g}" for f in FRACTIONS if label(f) == name)
    return float(targets.set_index("problem").loc[problem, col])


def fmt_time(t: float) -> str:
    """Seconds as text; ``not reached`` for inf/NaN."""
    return "not reached" if not math.isfinite(t) else f"{t:.3g}"
