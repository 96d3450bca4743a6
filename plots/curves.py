"""Training curves from trace.csv: per worker count (paper Sec. 5.2, Figs. 11-12), algorithms side by side
(APAM vs async SGD / sync AMSGrad), and the artificial-delay sweep (paper Fig. 9)."""

from . import style
from .aggregate import mean_band
from .data import SWEEP_COLUMNS, as_experiment, distinct, master_computes

METRICS = (("train_loss", "train loss"), ("test_acc", "test accuracy"))
EPOCH_LABEL = "epochs"
PAPER_ACC_METRICS = ("test_acc", "test_acc_top1", "test_acc_min", "test_acc_max")
PAPER_ACC_STYLE = {"color": "0.35", "linestyle": (0, (1, 2.5)), "linewidth": 1.2}
MAX_COLUMNS = 4  # panels side by side in the comparison figure; more worker counts wrap onto further rows


def paper_accuracies(paper, problems=None):
    """The paper's final test accuracies as reference levels: [(value, label)], distinct values (3 decimals), at
    most 3, from metrics ``PAPER_ACC_METRICS`` of the paper's CSV; [] when there is none. ``problems``: the
    problems the runs solved; a paper line is drawn only for those (none over a stand-in such as Fashion-MNIST)."""
    if paper is None:
        return []
    rows = paper[paper["metric"].isin(PAPER_ACC_METRICS) & paper["value"].between(0, 1)]
    if problems is not None:
        rows = rows[rows["problem"].isin(set(problems))]
    levels = {}
    for _, r in rows.iterrows():
        levels.setdefault(round(float(r["value"]), 3), r["problem"])
    return [(v, f"paper: final test acc {v:g} ({p})") for v, p in sorted(levels.items())[:3]]


def _paper_levels(ax, levels):
    for value, label in levels:
        ax.axhline(value, label=label, **PAPER_ACC_STYLE)


def _fit_levels(levels, n_lines):
    """The paper's levels that still fit the legend beside ``n_lines`` curves (``style.MAX_LEGEND_ENTRIES``)."""
    return levels[: max(0, style.MAX_LEGEND_ENTRIES - n_lines)]


def _setting_parts(traces, engine, clock, cores, setting):
    """File-name parts of the cores and compute setting of a figure, each where the traces of the same engine and
    clock hold several (else none: the figure keeps its name): ``2cores``, ``dedicated``; ``emulated-0.002s``."""
    same = traces[(traces["engine"] == engine) & (traces["clock"] == clock)]
    parts = [style.cores_slug(cores)] if same["cores"].nunique() > 1 and style.cores_slug(cores) else []
    return parts + ([setting] if same["compute_setting"].nunique() > 1 and setting else [])


def _setting_note(setting):
    """Title text of a compute setting (``emulated-0.002s``: ``emulated compute, 2 ms a gradient``); '' if none."""
    if not setting or setting == "real":
        return "real compute" if setting else ""
    compute, _, base = setting.partition("-")
    return f"{compute} compute, {float(base.rstrip('s')) * 1e3:g} ms a gradient" if base else f"{compute} compute"


MARKS_PER_CURVE = 8  # markers along a curve of many evaluation points (one every len / 8 points)


def _mean_band_series(runs, xcol, ycol, color, label, marker):
    """The seed-mean of ycol(xcol) over the runs in ``runs``, with a min-max band where several seeds ran, as a
    :class:`style.Series` (about ``MARKS_PER_CURVE`` markers on it), and the number of seeds; (None, 0) when
    nothing is finite."""
    curves = [(r[xcol].to_numpy(), r[ycol].to_numpy()) for _, r in runs.groupby("run_id", sort=True)]
    x, mean, lo, hi = mean_band(curves)
    if x.size == 0:
        return None, 0
    several = len(curves) > 1
    return style.Series(
        x,
        mean,
        label,
        color,
        marker,
        lo=lo if several else None,
        hi=hi if several else None,
        short=label.split(", ")[0],
        markevery=max(1, x.size // MARKS_PER_CURVE),
    ), len(curves)


def _draw_curves(ax, items, xcol, ycol):
    """Draw ``[(runs, color, label, marker)]`` on ``ax`` (style.draw_series: no curve hidden under another);
    returns the largest number of seeds drawn."""
    series, n_seeds = [], 0
    for runs, color, label, marker in items:
        one, n = _mean_band_series(runs, xcol, ycol, color, label, marker)
        if one is not None:
            series.append(one)
            n_seeds = max(n_seeds, n)
    style.draw_series(ax, series)
    return n_seeds


def _finish_metric_axis(ax, data, ycol, xlabel, ylabel):
    if ycol == "train_loss" and style.wants_log(data[ycol]):
        style.plain_log_axis(ax, "y")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)


def _sweeps_constant(group):
    """True when no sweep column (max_delay, tau, straggler_*) takes >= 2 values in ``group`` (missing is one)."""
    return all(group[c].nunique(dropna=False) < 2 for c in SWEEP_COLUMNS if c in group.columns)


def _simple_groups(traces, keys):
    """Groups of ``keys`` in which nothing but workers/algorithm/seed varies (no sweep column varies within the
    (problem, algorithm, engine, clock, cores) sub-groups)."""
    for key, group in traces.groupby(list(keys), sort=True):
        if all(group[c].isna().all() for c in ("train_loss", "test_acc") if c in group):
            continue  # nothing to draw (a timing-only problem's metrics are NaN by design)
        subs = group.groupby(["problem", "algorithm", "engine", "clock", "cores", "compute_setting"], sort=True)
        if all(_sweeps_constant(sub) for _, sub in subs):
            yield key, group


def draw_curves_by_workers(exp, fmt="png"):
    """Train loss and test accuracy against epochs (top) and time_s (bottom), one curve per worker count (compute
    agents where the master computes too: ``agents``, the paper's threads).

    One figure per (problem, algorithm, engine, clock, cores, compute setting) of the traces with >= 2 counts,
    where no sweep column (max_delay, tau, straggler_*) varies: the simulated clock on this machine's cores and on a
    core per process are two figures, and so are real and emulated compute, never seeds of one. Several seeds: mean
    curve with a min-max band. Test-accuracy panels show the paper's final test accuracies as dotted levels
    (``paper_accuracies``, as many as the legend has room for).

    Returns:
        list of written paths (``figures/curves-<problem>-<algorithm>-<engine>-<clock>[-<cores>][-<setting>].<fmt>``,
        each part where the traces hold several: ``2cores``, ``dedicated``; ``real``, ``emulated-0.002s``).
    """
    exp = as_experiment(exp)
    traces = exp.traces
    if traces is None:
        return []
    written = []
    all_levels = paper_accuracies(exp.paper, traces["problem"].unique())
    for (problem, algorithm, engine, clock, cores, setting), group in _simple_groups(
        traces, ["problem", "algorithm", "engine", "clock", "cores", "compute_setting"]
    ):
        counts = distinct(group, "agents")
        if len(counts) < 2:
            continue
        master = master_computes(group)
        colors = style.sweep_colors(counts)
        levels = _fit_levels(all_levels, len(counts))
        fig, axes = style.new_figure(2, 2)
        n_seeds = 1
        for row, (xcol, xlabel) in enumerate((("epoch", EPOCH_LABEL), ("time_s", style.time_label(clock)))):
            for col, (ycol, ylabel) in enumerate(METRICS):
                ax = axes[row][col]
                items = [
                    (
                        group[group["agents"] == a],
                        colors[a],
                        ", ".join(
                            t
                            for t in (
                                style.agents_text(a, master),
                                style.delay_text(
                                    exp.summary,
                                    problem=problem,
                                    algorithm=algorithm,
                                    engine=engine,
                                    clock=clock,
                                    cores=cores,
                                    agents=a,
                                ),
                            )
                            if t
                        ),
                        style.LINE_MARKERS[i % len(style.LINE_MARKERS)],
                    )
                    for i, a in enumerate(counts)
                ]
                n_seeds = max(n_seeds, _draw_curves(ax, items, xcol, ycol))
                if ycol == "test_acc":
                    _paper_levels(ax, levels)
                _finish_metric_axis(ax, group, ycol, xlabel, ylabel)
                ax.set_title(f"{ylabel} against {xlabel.split(' (')[0]}")
        style.legend_outside(fig, axes)
        per = "count of compute agents" if master else "worker count"
        parts = _setting_parts(traces, engine, clock, cores, setting)
        how = ", ".join(
            t
            for t in (style.engine_text(engine, clock, cores), _setting_note(setting) if setting in parts else "")
            if t
        )
        style.figure_title(fig, exp, problem, f"{algorithm} ({how}), one curve per {per}", style.seeds_note(n_seeds))
        name = style.slug("curves", problem, algorithm, engine, clock, *parts)
        written.append(style.save(fig, exp.figures_dir, name, fmt))
    return written


def draw_algorithm_comparison(exp, fmt="png"):
    """Algorithms on the same axes (APAM against async SGD or sync AMSGrad): train loss and test accuracy.

    One pair of figures (x = epochs, x = time_s) per (problem, engine, clock, cores, compute setting) of the traces
    in which >= 2 algorithms ran at the same worker count (compute agents where the master computes) and no sweep
    column varies; one column of panels per such count, at most ``MAX_COLUMNS`` side by side (more wrap onto
    further rows).
    Several seeds: mean curve with a min-max band. The paper's final test accuracies as dotted levels.

    Returns:
        list of written paths
        (``figures/compare-<problem>-<engine>-<clock>[-<cores>][-<setting>]-{epochs,time}.<fmt>``).
    """
    exp = as_experiment(exp)
    traces = exp.traces
    if traces is None:
        return []
    written = []
    all_levels = paper_accuracies(exp.paper, traces["problem"].unique())
    for (problem, engine, clock, cores, setting), group in _simple_groups(
        traces, ["problem", "engine", "clock", "cores", "compute_setting"]
    ):
        per_count = group.groupby("agents")["algorithm"].nunique()
        counts = sorted(float(a) for a in per_count[per_count >= 2].index)
        if not counts:
            continue
        master = master_computes(group)
        algorithms = distinct(group, "algorithm")
        levels = _fit_levels(all_levels, len(algorithms))
        ncols = min(len(counts), MAX_COLUMNS)
        blocks = -(-len(counts) // ncols)
        for xcol, xlabel, tag in (("epoch", EPOCH_LABEL, "epochs"), ("time_s", style.time_label(clock), "time")):
            fig, axes = style.new_figure(2 * blocks, ncols, panel_size=(3.9, 3.0), sharey="row")
            n_seeds = 1
            for k in range(blocks * ncols):
                if k >= len(counts):
                    for row in range(2):
                        axes[2 * (k // ncols) + row][k % ncols].set_visible(False)
                    continue
                a = counts[k]
                for row, (ycol, ylabel) in enumerate(METRICS):
                    ax = axes[2 * (k // ncols) + row][k % ncols]
                    items = [
                        (
                            group[(group["agents"] == a) & (group["algorithm"] == algorithm)],
                            style.color_for(algorithm),
                            ", ".join(
                                t
                                for t in (
                                    algorithm,
                                    style.delay_text(
                                        exp.summary,
                                        problem=problem,
                                        algorithm=algorithm,
                                        engine=engine,
                                        clock=clock,
                                        cores=cores,
                                    ),
                                )
                                if t
                            ),
                            style.LINE_MARKERS[i % len(style.LINE_MARKERS)],
                        )
                        for i, algorithm in enumerate(algorithms)
                    ]
                    n_seeds = max(n_seeds, _draw_curves(ax, items, xcol, ycol))
                    if ycol == "test_acc":
                        _paper_levels(ax, levels)
                    _finish_metric_axis(ax, group[group["agents"] == a], ycol, xlabel if row == 1 else "", ylabel)
                    if row == 0:
                        ax.set_title(style.agents_text(a, master))
            style.legend_outside(fig, axes)
            parts = _setting_parts(traces, engine, clock, cores, setting)
            how = ", ".join(
                t
                for t in (style.engine_text(engine, clock, cores), _setting_note(setting) if setting in parts else "")
                if t
            )
            style.figure_title(fig, exp, problem, f"{' vs '.join(algorithms)} ({how})", style.seeds_note(n_seeds))
            name = style.slug("compare", problem, engine, clock, *parts, tag)
            written.append(style.save(fig, exp.figures_dir, name, fmt))
    return written


def draw_delay_sweep(exp, fmt="png"):
    """Artificial-delay sweep (paper Fig. 9): test accuracy and train loss against epochs, one curve per max_delay.

    One figure per (problem, algorithm, engine, clock, workers, other sweep values) of the traces with >= 2
    distinct non-missing max_delay values. Several seeds: mean curve with a min-max band. The paper's final test
    accuracies (e.g. its 0.88-0.89 band) as dotted levels.

    Returns:
        list of written paths (``figures/delay_sweep-<problem>-<algorithm>-<engine>-<clock>-P<workers>[...].<fmt>``).
    """
    exp = as_experiment(exp)
    traces = exp.traces
    if traces is None or "max_delay" not in traces.columns:
        return []
    others = [c for c in SWEEP_COLUMNS if c != "max_delay" and c in traces.columns]
    named = [c for c in others if traces[c].nunique(dropna=False) >= 2]
    keys = ["problem", "algorithm", "engine", "clock", "cores", "compute_setting", "workers"] + others
    written = []
    all_levels = paper_accuracies(exp.paper, traces["problem"].unique())
    for key, group in traces.groupby(keys, sort=True, dropna=False):
        problem, algorithm, engine, clock, cores, setting, workers = key[:7]
        delays = distinct(group, "max_delay")
        if len(delays) < 2:
            continue
        master = master_computes(group)
        colors = style.sweep_colors(delays)
        levels = _fit_levels(all_levels, len(delays))
        fig, axes = style.new_figure(1, 2)
        n_seeds = 1
        for col, (ycol, ylabel) in enumerate(reversed(METRICS)):
            ax = axes[0][col]
            items = [
                (
                    group[group["max_delay"] == d],
                    colors[d],
                    ", ".join(
                        t
                        for t in (
                            f"max delay {style.fmt_num(d)} updates",
                            style.delay_text(
                                exp.summary,
                                problem=problem,
                                algorithm=algorithm,
                                engine=engine,
                                clock=clock,
                                cores=cores,
                                workers=workers,
                                max_delay=d,
                            ),
                        )
                        if t
                    ),
                    style.LINE_MARKERS[i % len(style.LINE_MARKERS)],
                )
                for i, d in enumerate(delays)
            ]
            n_seeds = max(n_seeds, _draw_curves(ax, items, "epoch", ycol))
            if ycol == "test_acc":
                _paper_levels(ax, levels)
            _finish_metric_axis(ax, group, ycol, EPOCH_LABEL, ylabel)
            ax.set_title(f"{ylabel} against epochs")
        extra = dict(zip(others, key[7:]))
        setting = ", ".join(f"{c} {style.fmt_num(extra[c])}" for c in named)
        style.legend_outside(fig, axes)
        count = style.agents_text(float(group["agents"].iloc[0]), master)
        what = f"{algorithm}, {count} ({style.engine_text(engine, clock, cores)}), artificial delay sweep"
        style.figure_title(fig, exp, problem, what, (setting + style.seeds_note(n_seeds)).strip())
        suffix = [f"{c}{style.fmt_num(extra[c])}" for c in named]
        name = style.slug(
            "delay_sweep",
            problem,
            algorithm,
            engine,
            clock,
            *_setting_parts(traces, engine, clock, cores, setting),
            f"P{style.fmt_num(workers)}",
            *suffix,
        )
        written.append(style.save(fig, exp.figures_dir, name, fmt))
    return written
