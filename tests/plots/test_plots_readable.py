"""Figures that follow the data and can be read: compute agents on the x-axis, one line per cores setting, the
master alone (workers = 0), at most 8 legend entries and 2,400 px of width, titles from the CSVs' experiment id,
no line hidden under another (plots/style.py). Columns the committed fixtures lack are made from them
(tests/fixtures/plots/) the way the runner writes them: ``agents``, ``cores``, ``master_computes`` in summary.csv,
speedup.csv from experiments.analysis.speedup."""

import shutil
import warnings
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

import plots
from experiments.analysis.speedup import speedup_table
from plots import style
from plots.data import load_experiment

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "plots"
FAMILIES = (
    "lr_speedup",
    "lenet5_speedup",
    "large_time_per_epoch",
    "artificial_delay",
    "tau_threshold",
    "stragglers",
    "model_validation",
)


@pytest.fixture
def captured(monkeypatch):
    """Figures passed to style.save, kept open for inspection (closed at teardown); style.save returns the name."""
    figs = []
    monkeypatch.setattr(style, "save", lambda fig, out_dir, name, fmt: figs.append((name, fig)) or name)
    yield figs
    for _, fig in figs:
        plt.close(fig)


def _copy(dest, family):
    shutil.copytree(FIXTURES / family, Path(dest) / family)
    if not (Path(dest) / "paper").exists():
        shutil.copytree(FIXTURES / "paper", Path(dest) / "paper")
    return Path(dest) / family


def agents_experiment(dest, slower_on_two_cores=1.4):
    """lr_speedup as the runner writes it: the master computes (``agents`` = workers + 1, so the one-agent runs
    have workers = 0), the simulated clock twice -- on this machine's 2 cores (times of 4 agents x
    ``slower_on_two_cores``) and with a core each -- and shared_memory measured on the machine's 2 cores; each
    simulated run a trace of its own."""
    exp = _copy(dest, "lr_speedup")
    s = pd.read_csv(exp / "summary.csv")
    s["agents"], s["workers"], s["master_computes"], s["cores"] = s["workers"], s["workers"] - 1, True, "2"
    sim = s["engine"] == "simulated"
    dedicated = s[sim].copy()
    dedicated["cores"] = "dedicated"
    dedicated["run_id"] = dedicated["run_id"] + "-dedicated"
    s.loc[sim & (s["agents"] > 2), "time_per_epoch_s"] *= slower_on_two_cores
    for rid in s.loc[sim, "run_id"]:
        shutil.copytree(exp / "runs" / rid, exp / "runs" / f"{rid}-dedicated")
        trace = pd.read_csv(exp / "runs" / f"{rid}-dedicated" / "trace.csv").assign(run_id=f"{rid}-dedicated")
        trace.to_csv(exp / "runs" / f"{rid}-dedicated" / "trace.csv", index=False)
    pd.concat([s, dedicated], ignore_index=True).to_csv(exp / "summary.csv", index=False)
    speedup_table(pd.read_csv(exp / "summary.csv")).to_csv(exp / "speedup.csv", index=False)
    return exp


@pytest.fixture
def measured(monkeypatch):
    """What each figure passed to style.save shows -- (name, legend texts, legend entries, width in px, title) --
    the figure closed at once (the tests that draw every family open many)."""
    rows = []

    def save(fig, out_dir, name, fmt):
        fig.canvas.draw()  # the legend's final layout
        rows.append(
            (
                name,
                legend_texts(fig),
                len(legend_entries(fig)),
                fig.get_figwidth() * style.DPI,
                fig._suptitle.get_text() if fig._suptitle else "",
            )
        )
        plt.close(fig)
        return name

    monkeypatch.setattr(style, "save", save)
    return rows


def legend_entries(fig):
    """The handles of every legend of a figure (the figure's own and any panel's)."""
    handles = [h for leg in fig.legends for h in leg.legend_handles]
    return handles + [h for ax in fig.axes if ax.get_legend() for h in ax.get_legend().legend_handles]


def legend_texts(fig):
    return [t.get_text() for leg in fig.legends for t in leg.get_texts()]


def by_name(captured, prefix):
    return [(n, f) for n, f in captured if n.startswith(prefix)]


def series_markers(ax):
    """A panel's marker artists of style.draw_series (labelled, no line drawn), by label."""
    return {
        ln.get_label(): ln
        for ln in ax.get_lines()
        if not ln.get_label().startswith("_")
        and ln.get_linestyle() in ("None", "none", "")
        and ln.get_marker() not in (None, "None", "none", "")
    }


# --- the x-axis counts compute agents where the column exists -------------------------------------------------


def test_x_axis_is_compute_agents_where_the_column_exists(tmp_path, captured):
    exp = agents_experiment(tmp_path)
    plots.draw_speedup(exp)
    plots.draw_time_per_epoch(exp)
    for name, fig in captured:
        for ax in fig.axes[:2]:
            assert ax.get_xlabel() == "compute agents (threads)", name
            xs = {
                float(x)
                for ln in ax.get_lines()
                if not ln.get_label().startswith("_")
                for x in np.asarray(ln.get_xdata(), dtype=float)
            }
            agents = set(pd.read_csv(exp / "summary.csv")["agents"].astype(float))
            data = xs - {8.0, 16.0, 32.0}  # the paper's threads beyond ours and the ideal's end
            assert data <= agents and {1.0, 2.0, 4.0} <= xs, (name, xs)


def test_x_axis_is_workers_in_older_files(tmp_path, captured):
    exp = _copy(tmp_path, "lr_speedup")
    assert "agents" not in pd.read_csv(exp / "speedup.csv").columns
    plots.draw_speedup(exp)
    ((_, fig),) = captured
    assert [ax.get_xlabel() for ax in fig.axes[:2]] == ["workers", "workers"]
    assert any(t.startswith("ideal (speed-up = workers)") for t in legend_texts(fig))


# --- two cores settings are two lines ---------------------------------------------------------------------------


def test_two_cores_settings_are_two_lines_never_averaged(tmp_path, captured):
    exp = agents_experiment(tmp_path)
    plots.draw_speedup(exp)
    fig = dict(captured)["speedup-logreg_fmnist-time_per_epoch"]
    texts = legend_texts(fig)
    for label in ("apam, simulated (2 cores)", "apam, simulated (a core each)", "apam, shared_memory (measured)"):
        assert any(t.startswith(label) for t in texts), (label, texts)
    marks = series_markers(fig.axes[0])
    two = next(v for k, v in marks.items() if k.startswith("apam, simulated (2 cores)"))
    each = next(v for k, v in marks.items() if k.startswith("apam, simulated (a core each)"))
    sp = pd.read_csv(exp / "speedup.csv")
    sp = sp[(sp["basis"] == "time_per_epoch") & (sp["engine"] == "simulated")]
    for line, cores in ((two, "2"), (each, "dedicated")):
        want = sp[sp["cores"].astype(str) == cores].sort_values("agents")["speedup"].to_numpy()
        np.testing.assert_allclose(line.get_ydata(), want)  # each its own prediction, not their mean
    assert two.get_ydata()[-1] < each.get_ydata()[-1]


def test_two_cores_settings_give_two_curve_figures_and_two_staleness_columns(tmp_path, captured):
    exp = agents_experiment(tmp_path)
    names = [n for n in plots.draw_curves_by_workers(exp)]
    assert names == [
        "curves-logreg_fmnist-apam-shared_memory-wall",
        "curves-logreg_fmnist-apam-simulated-simulated-2cores",
        "curves-logreg_fmnist-apam-simulated-simulated-dedicated",
    ]
    plots.draw_staleness(exp)
    ((_, fig),) = captured[3:]
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    assert titles == [
        "measured (wall clock), shared_memory engine",
        "simulated clock, simulated engine, 2 cores",
        "simulated clock, simulated engine, a core each",
    ]


def test_measured_points_have_whiskers_and_no_line_predictions_are_lines(tmp_path, captured):
    exp = agents_experiment(tmp_path)
    plots.draw_speedup(exp)
    ax = dict(captured)["speedup-logreg_fmnist-time_per_epoch"].axes[0]
    measured = [c for c in ax.containers if c.get_label().startswith("apam, shared_memory (measured)")]
    assert len(measured) == 1 and measured[0].has_yerr  # the seeds' min-max
    assert measured[0].lines[0].get_linestyle() in ("None", "none")
    predictions = [ln for ln in ax.get_lines() if ln.get_label() == "_line"]
    assert len(predictions) == 2 and all(ln.get_linestyle() not in ("None", "none") for ln in predictions)


# --- workers = 0 (the master alone) draws ------------------------------------------------------------------------


def test_workers_zero_draws_without_a_division_by_zero(tmp_path, captured):
    exp = agents_experiment(tmp_path)
    assert (pd.read_csv(exp / "speedup.csv")["workers"] == 0).any()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a division by zero warns (numpy) before it makes an inf
        written = plots.draw_experiment(exp)
    assert len(written) >= 6
    fig = dict(captured)["speedup-logreg_fmnist-time_per_epoch"]
    for ax in fig.axes[:2]:
        for ln in series_markers(ax).values():
            x, y = np.asarray(ln.get_xdata(), float), np.asarray(ln.get_ydata(), float)
            assert x[0] == 1.0 and y[0] == pytest.approx(1.0) and np.isfinite(y).all()


# --- legends and widths -------------------------------------------------------------------------------------------


def _many_methods(dest):
    """model_validation with ten algorithms and both real engines: lines enough to need splitting."""
    exp = _copy(dest, "model_validation")
    s = pd.read_csv(exp / "summary.csv")
    twin = s[s["engine"] == "shared_memory"].assign(engine="distributed", run_id=lambda d: d["run_id"] + "-d")
    sim = s[s["engine"] == "simulated"].assign(transport="distributed", run_id=lambda d: d["run_id"] + "-sd")
    s = pd.concat(
        [
            s.assign(transport=np.where(s["engine"] == "simulated", "shared_memory", s["engine"])),
            twin.assign(transport="distributed"),
            sim,
        ],
        ignore_index=True,
    )
    s = pd.concat(
        [
            s.assign(algorithm=a, run_id=s["run_id"] + f"-{k}", time_per_epoch_s=s["time_per_epoch_s"] * (1 + 0.1 * k))
            for k, a in enumerate(plots.async_methods.METHODS)
        ],
        ignore_index=True,
    )
    s.to_csv(exp / "summary.csv", index=False)
    speedup_table(pd.read_csv(exp / "summary.csv")).to_csv(exp / "speedup.csv", index=False)
    return exp


def _draw_all(folders):
    for folder in folders:
        exp = load_experiment(folder)
        for figure in plots.FIGURES:
            figure(exp, "png")


def test_every_figure_has_at_most_8_legend_entries_and_2400_px(tmp_path, measured):
    folders = [_copy(tmp_path / "old", f) for f in FAMILIES]
    folders += [agents_experiment(tmp_path / "new"), _many_methods(tmp_path / "many")]
    _draw_all(folders)
    assert len(measured) >= 40
    for name, texts, entries, width, _ in measured:
        assert entries <= style.MAX_LEGEND_ENTRIES, (name, texts)
        assert width <= style.MAX_WIDTH_PX + 0.5, (name, width)
    names = [n for n, *_ in measured]
    # ten methods on two real engines: split per engine, then per group of methods, never dropped
    split = [n for n in names if n.startswith("speedup-logreg_fmnist-time_per_epoch-")]
    assert {n.split("-")[3] for n in split} == {"distributed", "shared_memory"}
    assert len([n for n in names if n.startswith("model_validation-")]) >= 3


def test_the_comparison_wraps_its_panels_instead_of_widening(tmp_path, captured):
    exp = _copy(tmp_path, "lenet5_speedup")
    s = pd.read_csv(exp / "summary.csv")
    runs = exp / "runs"
    for p in (10, 20, 40):  # eight worker counts where there were three
        for run in sorted(runs.glob("*-P5-s0")):
            rid = run.name.replace("-P5-", f"-P{p}-")
            shutil.copytree(run, runs / rid)
            pd.read_csv(run / "trace.csv").assign(run_id=rid, workers=p).to_csv(runs / rid / "trace.csv", index=False)
            s = pd.concat([s, s[s["run_id"] == run.name].assign(run_id=rid, workers=p)], ignore_index=True)
    s.to_csv(exp / "summary.csv", index=False)
    plots.draw_algorithm_comparison(exp)
    for name, fig in captured:
        visible = [ax for ax in fig.axes if ax.get_visible()]
        assert len(visible) == 2 * 6 and fig.get_figwidth() * style.DPI <= style.MAX_WIDTH_PX, name


# --- titles -------------------------------------------------------------------------------------------------------


def test_every_title_starts_with_the_experiment_id_of_its_csvs(tmp_path, measured):
    folders = [_copy(tmp_path / "old", f) for f in FAMILIES] + [agents_experiment(tmp_path / "new")]
    for folder in folders:
        measured.clear()
        _draw_all([folder])
        ids = pd.read_csv(folder / "summary.csv")["experiment"].unique()
        assert len(ids) == 1 and measured, folder
        for name, *_, title in measured:
            assert title.startswith(f"{ids[0]} — "), name


def test_titles_come_from_the_csvs_not_the_folder_or_another_experiment(tmp_path, measured):
    """An async_methods-style figure drawn for model_validation once said async_methods_real; a folder renamed
    keeps its CSVs' experiment id."""
    exp = _many_methods(tmp_path)
    s = pd.read_csv(exp / "summary.csv")
    s.assign(policy="none").to_csv(exp / "summary.csv", index=False)  # the column the async_methods figures need
    renamed = exp.rename(tmp_path / "copied_elsewhere")
    _draw_all([renamed])
    assert any(name.startswith("engine_check-") for name, *_ in measured)  # the figure that had the wrong title
    for name, *_, title in measured:
        assert title.startswith("model_validation — "), name


def test_a_stand_in_problem_is_named_in_the_title(tmp_path, captured):
    exp = _copy(tmp_path, "lenet5_speedup").rename(tmp_path / "allcnn_sync_vs_async")
    for name in ("summary.csv", "speedup.csv"):
        pd.read_csv(exp / name).assign(experiment="allcnn_sync_vs_async").to_csv(exp / name, index=False)
    plots.draw_speedup(exp)
    ((_, fig),) = captured
    title = fig._suptitle.get_text()
    assert title.startswith("allcnn_sync_vs_async — LeNet5 (standing in for AllCNN), lenet5_fmnist: "), title


# --- no line hidden under another ---------------------------------------------------------------------------------


def test_overlapping_lines_keep_visible_markers_and_a_legend_note(tmp_path, captured):
    """APAM and async SGD at the ideal speed-up (the LeNet5 figure where APAM's line was hidden): every line has its
    own marker, markers above every line and the ideal, the overlapping ones drawn apart and told in the legend."""
    exp = _copy(tmp_path, "lenet5_speedup")
    sp = pd.read_csv(exp / "speedup.csv")
    sp["speedup"] = sp["workers"].astype(float)
    sp.to_csv(exp / "speedup.csv", index=False)
    plots.draw_speedup(exp)
    ((_, fig),) = captured
    fig.canvas.draw()
    assert any(
        t.startswith("lines overlap (within 1%): ") and "apam" in t and "async_sgd" in t and "ideal" in t
        for t in legend_texts(fig)
    )
    for ax in fig.axes[:2]:
        marks = series_markers(ax)
        assert len(marks) == 2
        assert len({m.get_marker() for m in marks.values()}) == 2  # each line its own marker
        others = [a for a in ax.get_lines() if a not in marks.values()]
        assert others and min(m.get_zorder() for m in marks.values()) > max(a.get_zorder() for a in others)
        a, b = marks.values()
        assert a.get_markersize() != b.get_markersize()  # the lower one's markers ring the upper one's
        pa = a.get_transform().transform((a.get_xdata()[1], a.get_ydata()[1]))
        pb = b.get_transform().transform((b.get_xdata()[1], b.get_ydata()[1]))
        assert np.hypot(*(pa - pb)) >= 0.9 * style.OVERLAP_SHIFT_PT * fig.dpi / 72.0  # drawn apart on screen
        assert np.allclose(a.get_ydata(), b.get_ydata())  # the data themselves unchanged


def test_lines_apart_are_not_called_overlapping():
    x = np.array([1.0, 2.0, 4.0])
    lines = [
        style.Series(x, x, "a", "C0", "o"),
        style.Series(x, x * 1.005, "b", "C1", "s"),
        style.Series(x, x * 0.5, "c", "C2", "^"),
    ]
    assert style.overlap_groups(lines) == [[0, 1]]
    assert style.overlap_groups(lines, ideal=lambda v: v) == [[0, 1, -1]]
    assert style.overlap_groups([lines[2]], ideal=lambda v: v) == []
    assert matplotlib.colors.to_hex(style.color_for("apam")) == style.ALGORITHM_COLORS["apam"]
