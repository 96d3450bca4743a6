"""Staleness histograms (staleness.csv), measured (wall clock) beside simulated, per worker count."""

import numpy as np
from matplotlib.ticker import MaxNLocator

from . import style
from .data import SWEEP_COLUMNS, as_experiment, master_computes

MAX_ROWS = 8  # at most this many settings (rows) per figure; evenly spaced ones are kept beyond that
CLOCK_ORDER = {"wall": 0, "simulated": 1}
BAR_LIMIT = 30  # histograms spanning fewer staleness values are drawn as bars, wider ones as a step outline


def _select(df, cols, values):
    """Rows of df whose ``cols`` equal ``values`` (NaN equals NaN)."""
    mask = np.ones(len(df), dtype=bool)
    for c, v in zip(cols, values):
        col = df[c]
        if isinstance(v, float) and np.isnan(v):
            mask &= col.isna().to_numpy()
        else:
            mask &= (col == v).to_numpy()
    return df[mask]


def histogram_fractions(runs):
    """Per-seed staleness histograms as fractions of updates.

    Args:
        runs: staleness rows (columns run_id, staleness, count) of one setting, one histogram per run_id.
    Returns:
        (values, fractions, mean_tau, max_tau): values int array (K,), fractions float array (runs, K) summing
        to 1 per run, and the count-weighted mean and the max staleness pooled over the runs.
    """
    runs = runs[np.isfinite(runs["staleness"]) & np.isfinite(runs["count"]) & (runs["count"] > 0)]
    values = np.array(sorted(runs["staleness"].unique()), dtype=float)
    ids = sorted(runs["run_id"].unique())
    fractions = np.zeros((len(ids), values.size))
    for i, rid in enumerate(ids):
        r = runs[runs["run_id"] == rid].groupby("staleness")["count"].sum()
        fractions[i, np.searchsorted(values, r.index.to_numpy(dtype=float))] = r.to_numpy() / r.sum()
    total = runs["count"].sum()
    mean_tau = float((runs["staleness"] * runs["count"]).sum() / total) if total > 0 else float("nan")
    max_tau = float(values.max()) if values.size else float("nan")
    return values.astype(int), fractions, mean_tau, max_tau


def _draw_histogram(ax, values, fractions, color, hatched):
    """Bars of the mean fraction per staleness value (min-max whiskers over seeds) for up to ``BAR_LIMIT``
    values; beyond that, a step line of the mean over every integer staleness with a shaded min-max band."""
    mean = fractions.mean(axis=0)
    several = fractions.shape[0] > 1
    if values.size and values.max() - values.min() < BAR_LIMIT:
        kw = {
            "color": color,
            "alpha": 0.55 if hatched else 0.85,
            "width": 1.0,
            "align": "center",
            "edgecolor": color,
            "linewidth": 0.3,
            "hatch": "//" if hatched else None,
        }
        if several:
            kw["yerr"] = style.whiskers(mean, fractions.min(axis=0), fractions.max(axis=0))
            kw["error_kw"] = {"ecolor": "0.25", "elinewidth": 0.8, "capsize": 1.5}
        ax.bar(values, mean, **kw)
        return
    grid = np.arange(values.min(), values.max() + 1)
    full = np.zeros((fractions.shape[0], grid.size))
    full[:, values - grid[0]] = fractions
    edges = np.append(grid, grid[-1] + 1) - 0.5
    lo = full.min(axis=0)
    hi = full.max(axis=0)
    if several:
        ax.fill_between(
            edges,
            np.append(lo, lo[-1]),
            np.append(hi, hi[-1]),
            step="post",
            color=color,
            alpha=style.BAND_ALPHA,
            linewidth=0,
        )
    ax.stairs(
        full.mean(axis=0),
        edges,
        color=color,
        linewidth=1.2,
        linestyle="--" if hatched else "-",
        baseline=0.0,
        fill=False,
    )


def _clock_title(engine, clock, cores=""):
    """Column title: ``measured (wall clock), shared_memory engine``; ``simulated clock, simulated engine, 2 cores``."""
    how = style.cores_text(clock, cores)
    tail = f", {how}" if how and clock != "wall" else ""
    if clock == "wall":
        return f"measured (wall clock), {engine} engine"
    if clock == "simulated":
        return f"simulated clock, {engine} engine{tail}"
    return f"{clock} clock, {engine} engine{tail}"


def draw_staleness(exp, fmt="png"):
    """Staleness histograms: one row per worker count (compute agents where the master computes; and sweep
    setting), one column per engine x clock x cores (the simulated clock on this machine's cores and on a core per
    process are two columns, never seeds of one).

    One figure per (problem, algorithm) with any update of staleness > 0 (sync runs, all 0, are left out).
    Columns: measured (clock=wall) first, simulated beside. Bars: fraction of updates with each staleness
    (several seeds: mean, with min-max whiskers), or a step line with a min-max band when the histogram spans
    >= ``BAR_LIMIT`` values (dashed for the simulated clock). Each row shares one x range; each panel notes the
    pooled mean and max staleness.

    Returns:
        list of written paths (``figures/staleness-<problem>-<algorithm>.<fmt>``).
    """
    exp = as_experiment(exp)
    st = exp.staleness
    if st is None:
        return []
    written = []
    for (problem, algorithm), group in st.groupby(["problem", "algorithm"], sort=True):
        if group.loc[group["staleness"] > 0, "count"].sum() <= 0:
            continue
        master = master_computes(group)
        row_cols = ["agents"] + [c for c in SWEEP_COLUMNS if group[c].nunique(dropna=False) >= 2]
        row_keys = sorted(
            group[row_cols].drop_duplicates().itertuples(index=False, name=None),
            key=lambda t: tuple(np.inf if np.isnan(v) else v for v in t),
        )
        shown = len(row_keys)
        if shown > MAX_ROWS:
            row_keys = [row_keys[i] for i in np.linspace(0, shown - 1, MAX_ROWS).round().astype(int)]
        col_keys = sorted(
            group[["engine", "clock", "cores"]].drop_duplicates().itertuples(index=False, name=None),
            key=lambda t: (CLOCK_ORDER.get(t[1], 2), t[1], t[0], t[2]),
        )
        fig, axes = style.new_figure(len(row_keys), len(col_keys), panel_size=(4.3, 2.3))
        color = style.color_for(algorithm)
        n_seeds = 1
        for i, rkey in enumerate(row_keys):
            rows = _select(group, row_cols, rkey)
            top = max(float(rows["staleness"].max()), 1.0)
            for j, (engine, clock, cores) in enumerate(col_keys):
                ax = axes[i][j]
                runs = _select(rows, ["engine", "clock", "cores"], (engine, clock, cores))
                if i == 0:
                    ax.set_title(_clock_title(engine, clock, cores), fontsize="medium")
                if j == 0:
                    setting = ", ".join(
                        style.agents_text(v, master).split(" (")[0] if c == "agents" else f"{c} {style.fmt_num(v)}"
                        for c, v in zip(row_cols, rkey)
                    )
                    ax.set_ylabel(f"{setting}\nfraction of updates")
                if i == len(row_keys) - 1:
                    ax.set_xlabel("staleness τ (updates)")
                ax.set_xlim(-0.7, top + 0.7)  # one x range per row: measured and simulated side by side
                ax.grid(True, axis="y", alpha=0.3)
                if runs.empty:
                    ax.text(0.5, 0.5, "no runs", transform=ax.transAxes, ha="center", va="center", color="0.5")
                    continue
                values, fractions, mean_tau, max_tau = histogram_fractions(runs)
                if values.size == 0:
                    ax.text(0.5, 0.5, "no updates", transform=ax.transAxes, ha="center", va="center", color="0.5")
                    continue
                n_seeds = max(n_seeds, fractions.shape[0])
                _draw_histogram(ax, values, fractions, color, hatched=clock != "wall")
                ax.text(
                    0.97,
                    0.93,
                    f"mean τ {mean_tau:.2f}\nmax τ {style.fmt_num(max_tau)}",
                    transform=ax.transAxes,
                    ha="right",
                    va="top",
                    fontsize="small",
                    bbox={"boxstyle": "round", "facecolor": "white", "alpha": 0.8, "edgecolor": "0.8"},
                )
                ax.set_ylim(0, 1.45 * float(fractions.max()))  # head room for the note
                ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        note = style.seeds_note(n_seeds).replace("band", "whiskers or band")
        if shown > len(row_keys):
            note += f" ({len(row_keys)} of {shown} settings shown)"
        style.figure_title(fig, exp, problem, f"staleness histograms of {algorithm}", note)
        written.append(style.save(fig, exp.figures_dir, style.slug("staleness", problem, algorithm), fmt))
    return written
