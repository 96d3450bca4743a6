"""Fixed visual conventions shared by every figure.

Colours are fixed per algorithm across all figures (``ALGORITHM_COLORS``; unknown names get a colour from
``FALLBACK_CYCLE`` chosen by a stable hash of the name, so a name keeps its colour across figures and runs).
Line style encodes the clock (wall: solid, simulated: dashed; on figures against compute agents a measurement is
points without a line and a prediction's dashes tell its cores apart, :func:`prediction_linestyle`), and every
line of a figure has its own marker (``LINE_MARKERS``). Where the curves of one panel differ by a numeric sweep
value (worker count, max delay) and not by algorithm, the colour comes from the sequential map ``SWEEP_CMAP``
instead, so the order of the values reads at a glance.

Readability limits every figure keeps: at most ``MAX_LEGEND_ENTRIES`` legend entries (a figure with more lines is
split, one per problem, engine or group of algorithms) and at most ``MAX_WIDTH_PX`` pixels of width
(:func:`new_figure` narrows the panels, :func:`legend_outside` never widens past it). Lines of one panel are drawn
by :func:`draw_series`: each with its own marker, markers above every line, and lines equal within
``OVERLAP_TOL`` moved apart by a few points with a "lines overlap" note in the legend, so that no line hides
another. Every title starts with the experiment id its CSVs name (:func:`figure_title`).
"""

import io
import math
import re
import zlib
from dataclasses import dataclass
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullLocator
from matplotlib.transforms import ScaledTranslation

from experiments.store.atomic import write_if_changed

from .data import STAND_IN_MODELS, _model, paper_problem

DPI = 130
PANEL_SIZE = (4.8, 3.5)  # inches per panel
SWEEP_CMAP = "viridis"

ALGORITHM_COLORS = {
    "apam": "#1f77b4",  # blue
    "sync_amsgrad": "#d62728",  # red
    "async_sgd": "#2ca02c",  # green
}
FALLBACK_CYCLE = ("#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf", "#ff7f0e", "#7f7f7f")

MAX_LEGEND_ENTRIES = 8  # entries of a figure's legend, at most
MAX_WIDTH_PX = 2400  # a figure's width in pixels (at DPI), at most
MAX_WIDTH_IN = MAX_WIDTH_PX / DPI
MARGIN_IN = 1.8  # inches of a figure's width beside its panels (labels, padding)

CLOCK_LINESTYLES = {"wall": "-", "simulated": "--"}
PAPER_MARKER = "*"
# drawn above the data lines (z-order IDEAL_Z) but below their markers: dotted, so a line under it shows through
IDEAL_STYLE = {"color": "0.3", "linestyle": ":", "linewidth": 1.4}
BAND_ALPHA = 0.2
# distinct markers for the lines of one figure, in drawing order (the paper's points keep PAPER_MARKERS' stars)
LINE_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "h")
# z-orders: bands below the lines, the ideal above the lines, every marker above every line
BAND_Z, LINE_Z, IDEAL_Z, MARKER_Z = 1.0, 2.0, 3.0, 4.0
OVERLAP_TOL = 0.01  # two lines whose values agree within 1% at every shared x are "overlapping"
OVERLAP_SHIFT_PT = 3.0  # points between overlapping lines as drawn (diagonal shift, the data are not changed)
OVERLAP_PREFIX = f"lines overlap (within {OVERLAP_TOL:.0%}): "
MARKER_SIZE = 6.0  # points; overlapping lines' markers grow by MARKER_STEP each rank below the top one
MARKER_STEP = 3.0


def color_for(algorithm):
    """Colour (hex string) of an algorithm: fixed for apam, sync_amsgrad, async_sgd; stable fallback otherwise."""
    name = str(algorithm)
    if name in ALGORITHM_COLORS:
        return ALGORITHM_COLORS[name]
    return FALLBACK_CYCLE[zlib.crc32(name.encode()) % len(FALLBACK_CYCLE)]


def linestyle_for(clock):
    """Line style of a clock: ``wall`` solid, ``simulated`` dashed, anything else dash-dot."""
    return CLOCK_LINESTYLES.get(str(clock), "-.")


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


AGENTS_LABEL = "compute agents (threads)"


def agents_label(master_computes):
    """Label of an x-axis of counts: ``compute agents (threads)`` where the master computes gradients too (the
    paper's threads: the workers plus the master), else ``workers``."""
    return AGENTS_LABEL if master_computes else "workers"


def agents_text(agents, master_computes=False):
    """Legend text of one count: ``4 workers``, or with the master computing, ``4 compute agents (master + 3
    workers)`` and ``1 compute agent (the master alone)``."""
    if not master_computes:
        return workers_text(agents)
    n = int(agents)
    if n <= 1:
        return "1 compute agent (the master alone)"
    return f"{n} compute agents (master + {workers_text(n - 1)})"


def cores_text(clock, cores):
    """How a line's times were made, for its label: ``measured`` (a real engine's wall clock); for a prediction,
    the cores its clock gave the processes: ``a core each`` (``dedicated``), ``2 cores``; ``""`` when unknown."""
    if clock == "wall":
        return "measured"
    cores = str(cores)
    if cores == "dedicated":
        return "a core each"
    if cores in ("", "nan"):
        return ""
    return f"{cores} core" if cores == "1" else f"{cores} cores"


def series_label(algorithm, engine, clock, cores=""):
    """Label of one line of a figure against compute agents: ``apam, simulated (2 cores)``, ``apam, simulated (a core
    each)``, ``apam, shared_memory (measured)``; without cores (older files) ``apam, simulated``."""
    how = cores_text(clock, cores)
    if not how and clock not in ("simulated", "wall"):
        how = f"{clock} clock"
    return f"{algorithm}, {engine}" + (f" ({how})" if how else "")


def cores_slug(cores):
    """File-name part of a cores setting: ``2cores``, ``dedicated``; ``""`` when unknown."""
    cores = str(cores)
    if cores in ("", "nan"):
        return ""
    return cores if not cores.isdigit() else f"{cores}cores"


def engine_text(engine, clock, cores=""):
    """Engine, clock and cores of a figure, for its title: ``simulated engine, simulated clock, 2 cores``."""
    how = cores_text(clock, cores)
    return f"{engine} engine, {clock} clock" + (f", {how}" if how and how != "measured" else "")


def prediction_linestyle(cores):
    """Line style of a prediction by the cores its clock modelled: dashed for a core each (and unknown), dash-dot
    for a number of cores (this machine's), so the two predictions of one engine differ in style too."""
    return "--" if str(cores) in ("dedicated", "", "nan") else "-."


def new_figure(nrows=1, ncols=1, panel_size=PANEL_SIZE, **kwargs):
    """A constrained-layout figure with a 2-D array of axes (shape (nrows, ncols)), panels of ``panel_size``
    inches, narrowed where ncols of them would make the figure wider than ``MAX_WIDTH_PX``."""
    width = min(panel_size[0] * ncols + MARGIN_IN, MAX_WIDTH_IN)
    fig, axes = plt.subplots(
        nrows,
        ncols,
        figsize=(width, panel_size[1] * nrows + 0.6),
        layout="constrained",
        squeeze=False,
        **kwargs,
    )
    return fig, axes


def grid_shape(n_panels, panel_width):
    """(rows, columns) for ``n_panels`` panels of ``panel_width`` inches: as many side by side as fit
    ``MAX_WIDTH_PX`` (at least one), the rest on further rows."""
    ncols = max(1, min(n_panels, int((MAX_WIDTH_IN - MARGIN_IN) // panel_width)))
    return -(-n_panels // ncols), ncols


LEGEND_MAX_ROWS = 8  # rows a figure legend may take before the figure widens to give it more columns
LEGEND_ROW_IN = 0.2  # inches of figure height per legend row (small font)


def legend_outside(fig, axes, title=None, ncols=None):
    """One legend for the whole figure, below the panels (never over data), duplicates removed. A handle with a
    ``legend_proxy`` attribute (:func:`draw_series`: markers drawn apart from their line) is shown by its proxy."""
    seen, overlaps = {}, []
    for ax in np.ravel(axes):
        for handle, label in zip(*ax.get_legend_handles_labels()):
            if label.startswith(OVERLAP_PREFIX):  # one note for the figure, naming every panel's groups once
                overlaps += [g for g in label.removeprefix(OVERLAP_PREFIX).split("; ") if g not in overlaps]
            elif label and not label.startswith("_") and label not in seen:
                seen[label] = getattr(handle, "legend_proxy", handle)
    if overlaps:
        seen[OVERLAP_PREFIX + "; ".join(overlaps)] = plt.Line2D([], [], linestyle="none")
    if seen:
        column_pt = 4.7 * max(len(label) for label in seen) + 45.0  # small font: ~4.7 pt per character
        if ncols is None:  # as many columns as fit the figure's width
            ncols = int(min(4, max(1, fig.get_figwidth() * 72.0 * 0.95 // column_pt)))
            need = min(4, -(-len(seen) // LEGEND_MAX_ROWS))
            if need > ncols:  # a long legend: widen the figure (up to MAX_WIDTH_PX) to keep to LEGEND_MAX_ROWS rows
                width = min(MAX_WIDTH_IN, max(fig.get_figwidth(), need * column_pt / 72.0 / 0.95))
                fig.set_figwidth(width)
                ncols = max(ncols, min(need, int(width * 72.0 * 0.95 // column_pt)))
        ncols = min(len(seen), ncols)
        rows = -(-len(seen) // ncols)
        # room below the panels for the legend's rows (constrained layout otherwise squeezes the axes to nothing
        # and draws the legend over them)
        fig.set_figheight(fig.get_figheight() + LEGEND_ROW_IN * rows + (0.3 if title else 0.1))
        fig.legend(
            list(seen.values()),
            list(seen.keys()),
            loc="outside lower center",
            ncols=ncols,
            title=title,
            fontsize="small",
            title_fontsize="small",
            frameon=False,
        )


OVERRUN_LABEL = (
    "did not run its emulated compute (> 5% of gradients overran or woke up late beyond calibration): "
    "not a valid measurement"
)


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
    """Save ``fig`` as ``out_dir/name.fmt`` at ``DPI`` and close it (also on error). Returns the path. The file is
    written whole or not at all, under a temporary name of its own (experiments/store/atomic.py), and left untouched
    when it holds the same bytes already.

    Raises:
        OSError: the file could not be written (one line naming it); nothing is left behind.
    """
    out_dir = Path(out_dir)
    path = out_dir / f"{name}.{fmt}"
    buf = io.BytesIO()
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        # no creation date in a PDF (PNG has none by default): the same CSVs give the same bytes
        fig.savefig(buf, dpi=DPI, format=fmt, metadata={"CreationDate": None} if fmt == "pdf" else None)
    finally:
        plt.close(fig)
    write_if_changed(path, buf.getvalue())
    return path


def log2_workers_axis(ax, workers, label="workers"):
    """Log2 x-axis with ticks at exactly the given worker (or compute-agent) counts, labelled as plain integers;
    counts below 1 (workers = 0: the master alone) have no place on it and are left out. ``label``: the axis label
    (:func:`agents_label`)."""
    ticks = sorted({int(w) for w in workers if np.isfinite(w) and w > 0})
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _pos: f"{x:g}"))
    if ticks:
        ax.set_xlim(ticks[0] / 1.25, ticks[-1] * 1.25)
    ax.set_xlabel(label)


def plain_log_axis(ax, axis="y", base=10):
    """Log scale on ``axis`` with tick labels written as plain numbers (1, 2, 4 or 0.01, 10). With base 10, an axis
    that spans less than 1.5 decades when drawn also labels its minor ticks at 2 and 5 times a power of ten (one
    major label alone, or none, cannot be read as a scale)."""
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
    xs = [x for x in xs if np.isfinite(x)]
    if not xs:
        return
    kw = {"linestyle": "none", "marker": marker, "markersize": 7, "markeredgewidth": 1.6}
    transform = ax.get_xaxis_transform()
    (marks,) = ax.plot(
        xs, [0.97] * len(xs), transform=transform, color=color, clip_on=False, zorder=5, label="_missing", **kw
    )
    if offset_pt:  # after plotting, so the unshifted x positions have counted for autoscaling
        marks.set_transform(transform + ScaledTranslation(offset_pt / 72.0, 0.0, ax.figure.dpi_scale_trans))
    if label:
        ax.plot([], [], color="0.35", label=label, **kw)  # one grey legend entry whatever the colour


def no_data_note(ax, text):
    """Centre ``text`` in a panel that has no values and hide its (meaningless) y tick labels."""
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", color="0.35")
    ax.tick_params(axis="y", which="both", labelleft=False, left=False)


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


def problem_text(problem, paper=None):
    """A problem as a title names it: its id, and where it stands in for the paper's (``paper``: a problem id or a
    model family, :func:`plots.data.paper_problem`) what it stands in for -- ``LeNet5 (standing in for AllCNN),
    lenet5_fmnist`` when the model differs, ``logreg_fmnist (standing in for logreg_rcv1)`` when the data do."""
    if not paper:
        return str(problem)
    ours, theirs = _model(problem), _model(paper)
    if ours and theirs and ours != theirs:
        return f"{STAND_IN_MODELS[ours]} (standing in for {STAND_IN_MODELS[theirs]}), {problem}"
    return f"{problem} (standing in for {paper})"


def figure_title(fig, exp, problem, what, note=""):
    """:func:`title` for experiment ``exp`` (``ExperimentData``): it starts with the experiment id the CSVs name
    (``exp.experiment``) and names the problem run, with the paper's where it stands in for one."""
    title(fig, exp.experiment, problem_text(problem, paper_problem(exp, problem)), what, note)


@dataclass
class Series:
    """One line (or set of measured points) of a panel, for :func:`draw_series`.

    x, y: the values (float arrays of one length); lo, hi: the seeds' min and max at each x (a band around a line,
    whiskers on points), or None; label: the legend entry; short: its name in an overlap note (default label);
    measured: points with whiskers and no line (a real engine's measurements), else a line with its markers
    (a prediction, or any curve); markevery: a marker on every n-th point only (a curve of many points)."""

    x: np.ndarray
    y: np.ndarray
    label: str
    color: str
    marker: str
    linestyle: str = "-"
    lo: np.ndarray | None = None
    hi: np.ndarray | None = None
    measured: bool = False
    short: str = ""
    markevery: int | None = None


def _overlap(xa, ya, xb, yb, tol=OVERLAP_TOL):
    """True when two lines share at least two x values and agree within ``tol`` (relative) at every one of them."""
    common, ia, ib = np.intersect1d(np.round(xa, 9), np.round(xb, 9), return_indices=True)
    if common.size < 2:
        return False
    a, b = np.asarray(ya, dtype=float)[ia], np.asarray(yb, dtype=float)[ib]
    ok = np.isfinite(a) & np.isfinite(b)
    if ok.sum() < 2:
        return False
    scale = np.maximum(np.abs(a[ok]), np.abs(b[ok]))
    return bool(np.all(np.abs(a[ok] - b[ok]) <= tol * np.where(scale > 0, scale, 1.0)))


def overlap_groups(series, ideal=None, tol=OVERLAP_TOL):
    """Groups (lists of indices into ``series``, -1 for the ideal line ``ideal``: a function of x) of lines equal
    within ``tol`` at every shared x; only groups of two or more, in the order of their first line."""
    n = len(series)
    parent = list(range(n + 1))  # index n: the ideal

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i in range(n):
        for j in range(i + 1, n):
            if _overlap(series[i].x, series[i].y, series[j].x, series[j].y, tol):
                parent[find(j)] = find(i)
        if ideal is not None:
            x = np.asarray(series[i].x, dtype=float)
            if _overlap(x, series[i].y, x, ideal(x), tol):
                parent[find(n)] = find(i)
    groups = {}
    for i in range(n + 1):
        groups.setdefault(find(i), []).append(i)
    out = [[(-1 if i == n else i) for i in g] for g in groups.values() if len(g) >= 2]
    return sorted(out, key=lambda g: min(i for i in g if i >= 0))


def overlap_note(series, groups, ideal_name="ideal"):
    """Legend text naming the groups of overlapping lines: ``lines overlap (within 1%): a = b = ideal``."""
    parts = [" = ".join(ideal_name if i < 0 else (series[i].short or series[i].label) for i in g) for g in groups]
    return OVERLAP_PREFIX + "; ".join(parts)


def draw_series(ax, series, ideal=None, ideal_name="ideal"):
    """Draw the lines of one panel so that none hides another.

    Each series is drawn as its line (z-order ``LINE_Z``, no legend entry; none for measured points) and its markers
    (z-order ``MARKER_Z`` and up: above every line and the ideal line, which the caller draws at ``IDEAL_Z``) --
    hollow for a line, filled with min-max whiskers for measured points; a band (``BAND_Z``) for a line's seeds.
    Lines equal within ``OVERLAP_TOL`` at every shared x (:func:`overlap_groups`, the ideal ``ideal(x)`` included)
    are drawn a few points apart (``OVERLAP_SHIFT_PT``, diagonally; the data are unchanged), the lower one's markers
    larger, and the legend gets a note naming them (:func:`overlap_note`).

    Returns:
        the overlap groups (lists of indices into ``series``; -1 the ideal).
    """
    groups = overlap_groups(series, ideal)
    rank, size = {}, {}
    for g in groups:
        members = [i for i in g if i >= 0]
        for r, i in enumerate(members):
            rank[i], size[i] = r, len(members)
    for i, s in enumerate(series):
        x = np.asarray(s.x, dtype=float)
        y = np.asarray(s.y, dtype=float)
        r, n = rank.get(i, 0), size.get(i, 1)
        msize = MARKER_SIZE + MARKER_STEP * (n - 1 - r)
        shift = (r - (n - 1) / 2.0) * OVERLAP_SHIFT_PT
        artists = []
        if s.measured:
            yerr = whiskers(y, s.lo, s.hi) if s.lo is not None and s.hi is not None else None
            container = ax.errorbar(
                x,
                y,
                yerr=yerr,
                fmt=s.marker,
                color=s.color,
                markersize=msize,
                markeredgecolor=s.color,
                markerfacecolor=s.color,
                capsize=2.5,
                elinewidth=1.0,
                linestyle="none",
                zorder=MARKER_Z + r,
                label=s.label,
            )
            artists += [a for a in container.get_children() if a is not None]
        else:
            if s.lo is not None and s.hi is not None:
                ax.fill_between(x, s.lo, s.hi, color=s.color, alpha=BAND_ALPHA, linewidth=0, zorder=BAND_Z)
            (line,) = ax.plot(
                x, y, color=s.color, linestyle=s.linestyle, linewidth=1.6, zorder=LINE_Z + 0.01 * i, label="_line"
            )
            (marks,) = ax.plot(
                x,
                y,
                linestyle="none",
                marker=s.marker,
                markersize=msize,
                color=s.color,
                markerfacecolor="white",
                markeredgecolor=s.color,
                markeredgewidth=1.4,
                markevery=s.markevery,
                zorder=MARKER_Z + r,
                label=s.label,
            )
            marks.legend_proxy = Line2D(
                [],
                [],
                color=s.color,
                linestyle=s.linestyle,
                linewidth=1.6,
                marker=s.marker,
                markersize=MARKER_SIZE,
                markerfacecolor="white",
                markeredgecolor=s.color,
                markeredgewidth=1.4,
            )
            artists += [line, marks]
        if shift:  # after drawing, so that the data (not the shifted points) count for autoscaling
            offset = ScaledTranslation(shift * 0.7071 / 72.0, -shift * 0.7071 / 72.0, ax.figure.dpi_scale_trans)
            for artist in artists:
                artist.set_transform(artist.get_transform() + offset)
    if groups:
        ax.plot([], [], linestyle="none", label=overlap_note(series, groups, ideal_name))
    return groups


def draw_ideal(ax, x, y, label):
    """The ideal line (``IDEAL_STYLE``) at z-order ``IDEAL_Z``: above the data lines, below their markers."""
    ax.plot(x, y, label=label, zorder=IDEAL_Z, **IDEAL_STYLE)


def family(engine, clock):
    """The real engine a line is about: a measured line's engine; a simulated line's modelled transport
    (``simulated``: shared_memory, ``simulated_<t>``: t, :func:`plots.data.engine_names`). A figure with too many
    lines is split by it first, so that each measured engine stays beside its predictions."""
    engine = str(engine)
    if clock == "wall" or not engine.startswith("simulated"):
        return engine
    return engine.removeprefix("simulated_") if engine != "simulated" else "shared_memory"


def fit_legend(lines, entries, family_of=None, algorithm_of=lambda key: key[0]):
    """Split the lines of a figure into figures whose legends keep to ``MAX_LEGEND_ENTRIES``.

    Args:
        lines: the line keys of the figure (hashable; e.g. (algorithm, engine, clock, cores)), in drawing order.
        entries: ``entries(part) -> int``, the legend entries a figure of those lines would have (its lines plus
            the ideal, the paper's points, notes).
        family_of: key -> the family (:func:`family`) a part is split by first; None: no such split.
        algorithm_of: key -> its algorithm; a part still too long is cut into runs of whole algorithms, in order.
    Returns:
        ``[(suffix, part)]``: ``suffix`` a list of file-name parts ([] for the whole figure: the figure keeps its
        name), ``part`` the keys of one figure in their order.
    """
    parts = [([], list(lines))]
    if family_of is not None and entries(lines) > MAX_LEGEND_ENTRIES:
        fams = list(dict.fromkeys(family_of(k) for k in lines))
        if len(fams) > 1:
            parts = [([f], [k for k in lines if family_of(k) == f]) for f in fams]
    out = []
    for suffix, part in parts:
        if entries(part) <= MAX_LEGEND_ENTRIES:
            out.append((suffix, part))
            continue
        chunks, chunk = [], []
        for algorithm in dict.fromkeys(algorithm_of(k) for k in part):
            mine = [k for k in part if algorithm_of(k) == algorithm]
            if chunk and entries(chunk + mine) > MAX_LEGEND_ENTRIES:
                chunks.append(chunk)
                chunk = []
            chunk = chunk + mine
        chunks.append(chunk)
        if len(chunks) == 1:  # one algorithm's lines alone are too many: nothing to split by
            out.append((suffix, part))
            continue
        out += [(suffix + list(dict.fromkeys(algorithm_of(k) for k in c)), c) for c in chunks]
    return out
