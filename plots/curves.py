"""Training curves from trace.csv: per worker count (paper Sec. 5.2, Figs. 11-12), algorithms side by side
(APAM vs async SGD / sync AMSGrad), and the artificial-delay sweep (paper Fig. 9)."""

from . import style
from .aggregate import mean_band
from .data import SWEEP_COLUMNS, as_experiment, distinct

METRICS = (("train_loss", "train loss"), ("test_acc", "test accuracy"))
EPOCH_LABEL = "epochs"
PAPER_ACC_METRICS = ("test_acc", "test_acc_top1", "test_acc_min", "test_acc_max")
PAPER_ACC_STYLE = {"color": "0.35", "linestyle": (0, (1, 2.5)), "linewidth": 1.2}


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


def _plot_mean_band(ax, runs, xcol, ycol, color, label, linestyle="-"):
    """Plot the seed-mean of ycol(xcol) over the runs in ``runs`` with a min-max band; returns #seeds drawn."""
    curves = [(r[xcol].to_numpy(), r[ycol].to_numpy()) for _, r in runs.groupby("run_id", sort=True)]
    x, mean, lo, hi = mean_band(curves)
    if x.size == 0:
        return 0
    ax.plot(x, mean, color=color, linestyle=linestyle, label=label, linewidth=1.6)
    if len(curves) > 1:
        ax.fill_between(x, lo, hi, color=color, alpha=style.BAND_ALPHA, linewidth=0)
    return len(curves)


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
    (problem, algorithm, engine, clock) sub-groups)."""
    for key, group in traces.groupby(list(keys), sort=True):
        if all(group[c].isna().all() for c in ("train_loss", "test_acc") if c in group):
            continue  # nothing to draw (a timing-only problem's metrics are NaN by design)
        subs = group.groupby(["problem", "algorithm", "engine", "clock"], sort=True)
        if all(_sweeps_constant(sub) for _, sub in subs):
            yield key, group


def draw_curves_by_workers(exp, fmt="png"):
    """Train loss and test accuracy against epochs (top) and time_s (bottom), one curve per worker count.

    One figure per (problem, algorithm, engine, clock) of the traces with >= 2 worker counts, where no sweep
    column (max_delay, tau, straggler_*) varies. Several seeds: mean curve with a min-max band. Test-accuracy
    panels show the paper's final test accuracies as dotted levels (``paper_accuracies``).

    Returns:
        list of written paths (``figures/curves-<problem>-<algorithm>-<engine>-<clock>.<fmt>``).
    """
    exp = as_experiment(exp)
    traces = exp.traces
    if traces is None:
        return []
    written = []
    levels = paper_accuracies(exp.paper, traces["problem"].unique())
    for (problem, algorithm, engine, clock), group in _simple_groups(traces, ["problem", "algorithm", "engine",
                                                                                "clock"]):
        workers = distinct(group, "workers")
        if len(workers) < 2:
            continue
        colors = style.sweep_colors(workers)
        fig, axes = style.new_figure(2, 2)
        n_seeds = 1
        for row, (xcol, xlabel) in enumerate((("epoch", EPOCH_LABEL), ("time_s", style.time_label(clock)))):
            for col, (ycol, ylabel) in enumerate(METRICS):
                ax = axes[row][col]
                for w in workers:
                    runs = group[group["workers"] == w]
                    label = ", ".join(t for t in (style.workers_text(w), style.delay_text(
                        exp.summary, problem=problem, algorithm=algorithm, engine=engine, clock=clock, workers=w)) if t)
                    n = _plot_mean_band(ax, runs, xcol, ycol, colors[w], label)
                    n_seeds = max(n_seeds, n)
                if ycol == "test_acc":
                    _paper_levels(ax, levels)
                _finish_metric_axis(ax, group, ycol, xlabel, ylabel)
                ax.set_title(f"{ylabel} against {xlabel.split(' (')[0]}")
        style.legend_outside(fig, axes)
        style.title(fig, exp.name, problem, f"{algorithm} ({engine} engine, {clock} clock), one curve per worker count",
                    style.seeds_note(n_seeds))
        written.append(style.save(fig, exp.figures_dir, style.slug("curves", problem, algorithm, engine, clock), fmt))
    return written


def draw_algorithm_comparison(exp, fmt="png"):
    """Algorithms on the same axes (APAM against async SGD or sync AMSGrad): train loss and test accuracy.

    One pair of figures (x = epochs, x = time_s) per (problem, engine, clock) of the traces in which >= 2
    algorithms ran at the same worker count and no sweep column varies; one column of panels per such worker
    count. Several seeds: mean curve with a min-max band. The paper's final test accuracies as dotted levels.

    Returns:
        list of written paths (``figures/compare-<problem>-<engine>-<clock>-{epochs,time}.<fmt>``).
    """
    exp = as_experiment(exp)
    traces = exp.traces
    if traces is None:
        return []
    written = []
    levels = paper_accuracies(exp.paper, traces["problem"].unique())
    for (problem, engine, clock), group in _simple_groups(traces, ["problem", "engine", "clock"]):
        per_w = group.groupby("workers")["algorithm"].nunique()
        workers = sorted(float(w) for w in per_w[per_w >= 2].index)
        if not workers:
            continue
        algorithms = distinct(group, "algorithm")
        for xcol, xlabel, tag in (("epoch", EPOCH_LABEL, "epochs"), ("time_s", style.time_label(clock), "time")):
            fig, axes = style.new_figure(2, len(workers), panel_size=(3.9, 3.0), sharex="col",
                                         sharey="row")
            n_seeds = 1
            for col, w in enumerate(workers):
                for row, (ycol, ylabel) in enumerate(METRICS):
                    ax = axes[row][col]
                    for algorithm in algorithms:
                        runs = group[(group["workers"] == w) & (group["algorithm"] == algorithm)]
                        label = ", ".join(t for t in (algorithm, style.delay_text(
                            exp.summary, problem=problem, algorithm=algorithm, engine=engine, clock=clock)) if t)
                        n = _plot_mean_band(ax, runs, xcol, ycol, style.color_for(algorithm), label)
                        n_seeds = max(n_seeds, n)
                    if ycol == "test_acc":
                        _paper_levels(ax, levels)
                    _finish_metric_axis(ax, group[group["workers"] == w], ycol, xlabel if row == 1 else "", ylabel)
                    if row == 0:
                        ax.set_title(style.workers_text(w))
            style.legend_outside(fig, axes)
            style.title(fig, exp.name, problem, f"{' vs '.join(algorithms)} ({engine} engine, {clock} clock)",
                        style.seeds_note(n_seeds))
            written.append(style.save(fig, exp.figures_dir, style.slug("compare", problem, engine, clock, tag), fmt))
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
    keys = ["problem", "algorithm", "engine", "clock", "workers"] + others
    written = []
    levels = paper_accuracies(exp.paper, traces["problem"].unique())
    for key, group in traces.groupby(keys, sort=True, dropna=False):
        problem, algorithm, engine, clock, workers = key[:5]
        delays = distinct(group, "max_delay")
        if len(delays) < 2:
            continue
        colors = style.sweep_colors(delays)
        fig, axes = style.new_figure(1, 2)
        n_seeds = 1
        for col, (ycol, ylabel) in enumerate(reversed(METRICS)):
            ax = axes[0][col]
            for d in delays:
                runs = group[group["max_delay"] == d]
                label = ", ".join(t for t in (f"max delay {style.fmt_num(d)} updates", style.delay_text(
                    exp.summary, problem=problem, algorithm=algorithm, engine=engine, clock=clock, workers=workers,
                    max_delay=d)) if t)
                n_seeds = max(n_seeds, _plot_mean_band(ax, runs, "epoch", ycol, colors[d], label))
            if ycol == "test_acc":
                _paper_levels(ax, levels)
            _finish_metric_axis(ax, group, ycol, EPOCH_LABEL, ylabel)
            ax.set_title(f"{ylabel} against epochs")
        extra = {c: v for c, v in zip(others, key[5:])}
        setting = ", ".join(f"{c} {style.fmt_num(extra[c])}" for c in named)
        style.legend_outside(fig, axes)
        what = f"{algorithm}, {style.workers_text(workers)} ({engine} engine, {clock} clock), artificial delay sweep"
        style.title(fig, exp.name, problem, what, (setting + style.seeds_note(n_seeds)).strip())
        suffix = [f"{c}{style.fmt_num(extra[c])}" for c in named]
        name = style.slug("delay_sweep", problem, algorithm, engine, clock, f"P{style.fmt_num(workers)}", *suffix)
        written.append(style.save(fig, exp.figures_dir, name, fmt))
    return written
