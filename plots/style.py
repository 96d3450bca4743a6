"""Fixed visual conventions shared by every figure.

Colours are fixed per algorithm across all figures (``ALGORITHM_COLORS``; unknown names get a colour from
``FALLBACK_CYCLE`` chosen by a stable hash of the name, so a name keeps its colour across figures and runs).
Line style encodes the clock (wall: solid, simulated: dashed) and the marker encodes the engine. Where the
curves of one panel differ by a numeric sweep value (worker count, max delay) and not by algorithm, the colour
comes from the sequential map ``SWEEP_CMAP`` instead, so the order of the values reads at a glance.
"""

import math
import re
import zlib
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib import colormaps

DPI = 130
PANEL_SIZE = (4.8, 3.5)  # inches per panel
SWEEP_CMAP = "viridis"

ALGORITHM_COLORS = {
    "apam": "#1f77b4",  # blue
    "sync_amsgrad": "#d62728",  # red
    "async_sgd": "#2ca02c",  # green
}
FALLBACK_CYCLE = ("#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf", "#ff7f0e", "#7f7f7f")

CLOCK_LINESTYLES = {"wall": "-", "simulated": "--"}
ENGINE_MARKERS = {"simulated": "o", "shared_memory": "s", "distributed": "^"}
FALLBACK_MARKERS = ("D", "v", "P", "X", "<", ">")
PAPER_MARKER = "*"
IDEAL_STYLE = {"color": "0.45", "linestyle": ":", "linewidth": 1.4}
BAND_ALPHA = 0.2


def color_for(algorithm):
    """Colour (hex string) of an algorithm: fixed for apam, sync_amsgrad, async_sgd; stable fallback otherwise."""
    name = str(algorithm)
    if name in ALGORITHM_COLORS:
        return ALGORITHM_COLORS[name]
    return FALLBACK_CYCLE[zlib.crc32(name.encode()) % len(FALLBACK_CYCLE)]


def linestyle_for(clock):
    """Line style of a clock: ``wall`` solid, ``simulated`` dashed, anything else dash-dot."""
    return CLOCK_LINESTYLES.get(str(clock), "-.")


def marker_for(engine):
    """Marker of an engine: simulated o, shared_memory s, distributed ^; stable fallback otherwise."""
    name = str(engine)
    if name in ENGINE_MARKERS:
        return ENGINE_MARKERS[name]
    return FALLBACK_MARKERS[zlib.crc32(name.encode()) % len(FALLBACK_MARKERS)]


def sweep_colors(values):
    """Map sorted numeric sweep values to colours of ``SWEEP_CMAP`` (light yellow end left out for contrast)."""
    values = list(values)
    cmap = colormaps[SWEEP_CMAP]
    if len(values) == 1:
        return {values[0]: cmap(0.0)}
    return {v: cmap(0.85 * i / (len(values) - 1)) for i, v in enumerate(values)}


def slug(*parts):
    """File-name-safe join of parts with '-': anything outside [A-Za-z0-9._] becomes '_'."""
    return "-".join(re.sub(r"[^A-Za-z0-9._]+", "_", str(p)) for p in parts if str(p) != "")


def fmt_num(value):
    """Short text for a number: integral values without a decimal point, NaN as 'none'."""
    if value is None:
        return "none"
    try:
        v = float(value)
    except (TypeError, ValueError):
        return str(value)
    if np.isnan(v):
        return "none"
    if v.is_integer():
        return str(int(v))
    return f"{v:.3g}"


def workers_text(workers):
    """'1 worker', '4 workers'."""
    text = fmt_num(workers)
    return f"{text} worker" if text == "1" else f"{text} workers"


def new_figure(nrows=1, ncols=1, panel_size=PANEL_SIZE, **kwargs):
    """A constrained-layout figure with a 2-D array of axes (shape (nrows, ncols))."""
    fig, axes = plt.subplots(
        nrows,
        ncols,
        figsize=(panel_size[0] * ncols + 1.8, panel_size[1] * nrows + 0.6),
        layout="constrained",
        squeeze=False,
        **kwargs,
    )
    return fig, axes


LEGEND_MAX_ROWS = 8     # rows a figure legend may take before the figure widens to give it more columns
LEGEND_ROW_IN = 0.2     # inches of figure height per legend row (small font)


def legend_outside(fig, axes, title=None, ncols=None):
    """One legend for the whole figure, below the panels (never over data), duplicates removed."""
    seen = {}
    for ax in np.ravel(axes):
        for handle, label in zip(*ax.get_legend_handles_labels()):
            if label and not label.startswith("_") and label not in seen:
                seen[label] = handle
    if seen:
        column_pt = 4.7 * max(len(label) for label in seen) + 45.0  # small font: ~4.7 pt per character
        if ncols is None:  # as many columns as fit the figure's width
            ncols = int(min(4, max(1, fig.get_figwidth() * 72.0 * 0.95 // column_pt)))
            need = min(4, -(-len(seen) // LEGEND_MAX_ROWS))
            if need > ncols:  # a long legend: widen the figure so that it keeps to LEGEND_MAX_ROWS rows
                fig.set_figwidth(max(fig.get_figwidth(), need * column_pt / 72.0 / 0.95))
                ncols = need
        ncols = min(len(seen), ncols)
        rows = -(-len(seen) // ncols)
        # room below the panels for the legend's rows (constrained layout otherwise squeezes the axes to nothing
        # and draws the legend over them)
        fig.set_figheight(fig.get_figheight() + LEGEND_ROW_IN * rows + (0.3 if title else 0.1))
        fig.legend(list(seen.values()), list(seen.keys()), loc="outside lower center", ncols=ncols, title=title,
                   fontsize="small", title_fontsize="small", frameon=False)


OVERRUN_LABEL = ("did not run its emulated compute (> 5% of gradients overran or woke up late beyond calibration): "
                 "not a valid measurement")


def mark_overrun(ax, xs, ys):
    """Ring the measured points at ``xs, ys`` whose runs overran their emulated compute (see
    :func:`plots.validation.overrun_workers`), so a reader does not take them for measurements of the model."""
    if len(xs):
        ax.scatter(xs, ys, s=170, facecolors="none", edgecolors="red", linewidths=1.3, zorder=6, label=OVERRUN_LABEL)


def seeds_note(n_seeds, stat: str = "mean"):
    """Caption fragment saying how several seeds are shown ('' for a single seed); ``stat``: the centre drawn
    (``mean`` or ``median``)."""
    n = int(n_seeds) if n_seeds else 1
    return f" ({stat} of {n} seeds; band: min-max)" if n > 1 else ""


def whiskers(center, lo, hi):
    """Error-bar lengths ``(2, n)`` for matplotlib's ``xerr``/``yerr``: ``center - lo`` and ``hi - center``, clipped
    at 0 (a mean of equal seeds can lie an ulp outside their [min, max], and matplotlib rejects negative lengths)."""
    center, lo, hi = (np.asarray(a, dtype=float) for a in (center, lo, hi))
    return np.clip(np.vstack([center - lo, hi - center]), 0.0, None)


def save(fig, out_dir, name, fmt):
    """Save ``fig`` as ``out_dir/name.fmt`` at ``DPI`` and close it (also on error). Returns the path."""
    out_dir = Path(out_dir)
    path = out_dir / f"{name}.{fmt}"
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        # no creation date in a PDF (PNG has none by default): the same CSVs give the same bytes
        fig.savefig(path, dpi=DPI, format=fmt, metadata={"CreationDate": None} if fmt == "pdf" else None)
    finally:
        plt.close(fig)
    return path


def log2_workers_axis(ax, workers):
    """Log2 x-axis with ticks at exactly the given worker counts, labelled as plain integers."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    ticks = sorted({int(w) for w in workers if np.isfinite(w) and w > 0})
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _pos: f"{x:g}"))
    if ticks:
        ax.set_xlim(ticks[0] / 1.25, ticks[-1] * 1.25)
    ax.set_xlabel("workers")


def plain_log_axis(ax, axis="y", base=10):
    """Log scale on ``axis`` with tick labels written as plain numbers (1, 2, 4 or 0.01, 10). With base 10, an axis
    that spans less than 1.5 decades when drawn also labels its minor ticks at 2 and 5 times a power of ten (one
    major label alone, or none, cannot be read as a scale)."""
    from matplotlib.ticker import FuncFormatter, LogLocator

    target = ax.yaxis if axis == "y" else ax.xaxis
    (ax.set_yscale if axis == "y" else ax.set_xscale)("log", base=base)
    target.set_major_locator(LogLocator(base=base))
    target.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))

    def minor(v, _pos):
        lo, hi = sorted(target.get_view_interval())
        if base != 10 or not (v > 0 and lo > 0) or hi / lo >= 10**1.5:
            return ""
        mantissa = v / 10 ** math.floor(math.log10(v) + 1e-9)
        return f"{v:g}" if any(abs(mantissa - m) < 1e-6 for m in (2, 5)) else ""
    target.set_minor_formatter(FuncFormatter(minor))


def wants_log(values, ratio=20.0):
    """True when all finite values are positive and span more than ``ratio`` (max/min)."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    return bool(v.size and v.min() > 0 and v.max() / v.min() > ratio)


def mark_missing(ax, xs, color, marker="x", label=None, offset_pt=0.0):
    """Mark x positions whose y is missing (target not reached, diverged) at the top edge of the panel.

    Drawn with ``ax.plot`` in the x-data / y-axes blended transform, so the x positions count for autoscaling.
    ``offset_pt`` shifts the markers sideways by that many points (to keep several lines' markers apart).
    """
    from matplotlib.transforms import ScaledTranslation

    xs = [x for x in xs if np.isfinite(x)]
    if not xs:
        return
    kw = {"linestyle": "none", "marker": marker, "markersize": 7, "markeredgewidth": 1.6}
    transform = ax.get_xaxis_transform()
    (marks,) = ax.plot(xs, [0.97] * len(xs), transform=transform, color=color, clip_on=False, zorder=5,
                       label="_missing", **kw)
    if offset_pt:  # after plotting, so the unshifted x positions have counted for autoscaling
        marks.set_transform(transform + ScaledTranslation(offset_pt / 72.0, 0.0, ax.figure.dpi_scale_trans))
    if label:
        ax.plot([], [], color="0.35", label=label, **kw)  # one grey legend entry whatever the colour


def no_data_note(ax, text):
    """Centre ``text`` in a panel that has no values and hide its (meaningless) y tick labels."""
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", color="0.35")
    ax.tick_params(axis="y", which="both", labelleft=False, left=False)


def line_label(algorithm, engine, clock, delay=""):
    """Legend text of one algorithm x engine x clock line, with ``delay`` (:func:`delay_text`) when given."""
    return f"{algorithm} · {engine} · {clock} clock" + (f" · {delay}" if delay else "")


def delay_text(summary, **match):
    """What made the staleness of the runs of summary.csv whose columns equal ``match`` (e.g. ``problem=...,
    algorithm=...``): ``delay=timing, mean tau 0.9-29.8`` (the delay model(s), then the range over those runs of
    their mean staleness, in updates; one value when all agree). '' when the summary or its columns are missing or
    nothing matches (so that a legend names the delay model and the mean staleness)."""
    if summary is None or "delay_model" not in summary or "staleness_mean" not in summary:
        return ""
    rows = summary
    for col, value in match.items():
        if col not in rows:
            return ""
        rows = rows[rows[col] == value]
    if rows.empty:
        return ""
    models = "/".join(sorted(str(m) for m in rows["delay_model"].dropna().unique())) or "?"
    tau = pd.to_numeric(rows["staleness_mean"], errors="coerce").dropna()
    if tau.empty:
        return f"delay={models}"
    lo, hi = float(tau.min()), float(tau.max())
    span = fmt_num(round(lo, 1)) if round(lo, 1) == round(hi, 1) else f"{fmt_num(round(lo, 1))}-{fmt_num(round(hi, 1))}"
    return f"delay={models}, mean tau {span}"


def time_label(clock):
    """Axis label of time_s on a clock."""
    return f"time (seconds, {clock} clock)"


def title(fig, experiment, problem, what, note=""):
    """Figure title naming experiment and problem, with an optional second line (seeds, settings)."""
    text = f"{experiment} — {problem}: {what}"
    if note:
        text += "\n" + note.strip()
    fig.suptitle(text, fontsize="medium")
