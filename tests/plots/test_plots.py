"""Figures from CSV alone (plots/): every figure family drawn from the tiny experiment folders kept under
tests/fixtures/plots/ (written by make_fixtures.py there), the CLI, errors and the numeric helpers."""

import filecmp
import importlib.util
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # bare `pytest` (not `python -m pytest`) with an editable install made before plots/
    sys.path.insert(0, str(ROOT))

import matplotlib.pyplot as plt  # noqa: E402  (after plots, which selects the Agg backend)

import plots  # noqa: E402
from plots import style  # noqa: E402
from plots.aggregate import mean_band, seed_stats  # noqa: E402
from plots.curves import paper_accuracies  # noqa: E402
from plots.data import load_experiment  # noqa: E402
from plots.speedup import _paper_relative_times  # noqa: E402
from plots.staleness import histogram_fractions  # noqa: E402
from plots.tau import tau_ratio  # noqa: E402
from plots.validation import pair_clocks  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "plots"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

# For each fixture experiment: the files each figure function must write (every other function writes none).
EXPECTED = {
    "lr_speedup": {
        "draw_speedup": ["speedup-logreg_fmnist-time_per_epoch"],
        "draw_time_per_epoch": ["time_per_epoch-logreg_fmnist"],
        "draw_curves_by_workers": [
            "curves-logreg_fmnist-apam-shared_memory-wall",
            "curves-logreg_fmnist-apam-simulated-simulated",
        ],
        "draw_staleness": ["staleness-logreg_fmnist-apam"],
        "draw_model_validation": ["model_validation-logreg_fmnist"],
    },
    "lenet5_speedup": {
        "draw_speedup": ["speedup-lenet5_fmnist-time_per_epoch"],
        "draw_time_per_epoch": ["time_per_epoch-lenet5_fmnist"],
        "draw_curves_by_workers": [
            "curves-lenet5_fmnist-apam-simulated-simulated",
            "curves-lenet5_fmnist-async_sgd-simulated-simulated",
        ],
        "draw_algorithm_comparison": [
            "compare-lenet5_fmnist-simulated-simulated-epochs",
            "compare-lenet5_fmnist-simulated-simulated-time",
        ],
        "draw_staleness": ["staleness-lenet5_fmnist-apam", "staleness-lenet5_fmnist-async_sgd"],
    },
    "large_time_per_epoch": {"draw_time_per_epoch": ["time_per_epoch-resnet18_cinic10"]},
    "artificial_delay": {
        "draw_delay_sweep": ["delay_sweep-allcnn_cifar10-apam-simulated-simulated-P1"],
        "draw_staleness": ["staleness-allcnn_cifar10-apam"],
    },
    "tau_threshold": {"draw_tau_threshold": ["tau_threshold-lenet5_fmnist", "tau_threshold-logreg_fmnist"]},
    "stragglers": {"draw_stragglers": ["stragglers-logreg_fmnist"]},
    "model_validation": {
        "draw_time_per_epoch": ["time_per_epoch-logreg_fmnist"],
        "draw_staleness": ["staleness-logreg_fmnist-apam"],
        "draw_model_validation": ["model_validation-logreg_fmnist"],
    },
}
PDF_FAMILIES = ("lenet5_speedup",)


def copy_fixtures(dest, families=tuple(EXPECTED)):
    """Copy fixture experiments (and paper/) to dest, so that figures are written outside the repository."""
    dest = Path(dest)
    for name in (*families, "paper"):
        shutil.copytree(FIXTURES / name, dest / name)
    return dest


def edited_fixture(dest, family, edit):
    """Copy one fixture experiment to dest with its summary.csv changed by ``edit(df)`` (in place); returns the
    experiment folder and the edited table."""
    exp = copy_fixtures(dest, [family]) / family
    df = pd.read_csv(exp / "summary.csv")
    edit(df)
    df.to_csv(exp / "summary.csv", index=False)
    return exp, df


@pytest.fixture(scope="module")
def drawn(tmp_path_factory):
    """Draw every figure function over every fixture experiment (PNG), then the PDF families, in one process with
    every warning turned into an error. Returns the written paths, per experiment and function, and the figures
    still open afterwards."""
    root = copy_fixtures(tmp_path_factory.mktemp("results"))
    produced = {}
    pdfs = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for family in EXPECTED:
            exp = load_experiment(root / family)
            produced[family] = {f.__name__: f(exp, "png") for f in plots.FIGURES}
        pdf_root = copy_fixtures(tmp_path_factory.mktemp("pdf"), PDF_FAMILIES)
        for family in PDF_FAMILIES:
            pdfs += plots.draw_experiment(pdf_root / family, fmt="pdf")
    return {"root": root, "produced": produced, "pdfs": pdfs, "open": plt.get_fignums()}


def test_agg_backend_selected_by_package():
    assert matplotlib.get_backend().lower() == "agg"


def test_thirty_figures_no_warning_no_open_figure(drawn):
    count = sum(len(paths) for per in drawn["produced"].values() for paths in per.values()) + len(drawn["pdfs"])
    assert count >= 30
    assert drawn["open"] == []


@pytest.mark.parametrize("family", list(EXPECTED))
def test_each_figure_function_writes_its_files(drawn, family):
    produced = drawn["produced"][family]
    for name, paths in produced.items():
        expected = [family + "/figures/" + stem + ".png" for stem in EXPECTED[family].get(name, [])]
        got = [p.relative_to(drawn["root"]).as_posix() for p in paths]
        assert sorted(got) == sorted(expected), name
    on_disk = sorted(p.name for p in (drawn["root"] / family / "figures").iterdir())
    assert on_disk == sorted(s + ".png" for stems in EXPECTED[family].values() for s in stems)


@pytest.mark.parametrize("family", list(EXPECTED))
def test_written_pngs_are_valid_images(drawn, family):
    for paths in drawn["produced"][family].values():
        for path in paths:
            assert path.read_bytes()[:8] == PNG_SIGNATURE, path
            image = plt.imread(path)
            height, width = image.shape[:2]
            assert image.ndim == 3 and image.shape[2] in (3, 4)
            # figure size (inches) x style.DPI: at least one 4.8 x 3.5 in panel plus legend, nothing absurd
            assert 4.8 * style.DPI <= width <= 20 * style.DPI, (path, width)
            assert 3.5 * style.DPI <= height <= 25 * style.DPI, (path, height)
            assert image[..., :3].std() > 0.05  # not a blank canvas


def test_pdf_format(drawn):
    assert len(drawn["pdfs"]) == sum(len(v) for f in PDF_FAMILIES for v in EXPECTED[f].values())
    for path in drawn["pdfs"]:
        assert path.suffix == ".pdf"
        assert path.read_bytes()[:5] == b"%PDF-"
        assert path.stat().st_size > 1000


def test_draw_experiment_is_every_figure_function(tmp_path):
    root = copy_fixtures(tmp_path, ["tau_threshold"])
    written = plots.draw_experiment(root / "tau_threshold")
    assert [p.name for p in written] == [s + ".png" for s in EXPECTED["tau_threshold"]["draw_tau_threshold"]]


def _cli(*args):
    env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [sys.executable, "-m", "plots", *map(str, args)], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120
    )


def test_cli_over_results_folder_writes_expected_files(tmp_path):
    families = ["large_time_per_epoch", "stragglers", "tau_threshold"]
    root = copy_fixtures(tmp_path / "results", families)
    proc = _cli(root)
    assert proc.returncode == 0, proc.stderr
    expected = sorted(
        str(root / f / "figures" / (s + ".png")) for f in families for stems in EXPECTED[f].values() for s in stems
    )
    assert sorted(proc.stdout.split()) == expected
    assert not (root / "paper" / "figures").exists()  # the paper folder is no experiment
    for line in expected:
        assert Path(line).read_bytes()[:8] == PNG_SIGNATURE


def test_cli_missing_folder_exits_2_with_one_line(tmp_path):
    proc = _cli(tmp_path / "nowhere")
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "nowhere" in proc.stderr


def test_cli_missing_column_exits_2_naming_column_and_file(tmp_path):
    root = copy_fixtures(tmp_path, ["stragglers", "tau_threshold"])
    summary = root / "stragglers" / "summary.csv"
    pd.read_csv(summary).drop(columns=["workers"]).to_csv(summary, index=False)
    proc = _cli(root, "--format", "pdf")
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1
    assert "'workers'" in proc.stderr and str(summary) in proc.stderr
    # the other experiment below the results folder is still drawn
    expected = sorted(
        str(root / "tau_threshold" / "figures" / (s + ".pdf")) for s in EXPECTED["tau_threshold"]["draw_tau_threshold"]
    )
    assert sorted(proc.stdout.split()) == expected


@pytest.mark.parametrize(
    "family, relpath, column",
    [
        ("lenet5_speedup", "runs/apam-simulated-P2-s0/trace.csv", "test_acc"),
        ("artificial_delay", "runs/apam-simulated-P1-s0-d5/staleness.csv", "count"),
        ("stragglers", "summary.csv", "time_to_target_s"),  # required once the stragglers figure applies
        ("tau_threshold", "summary.csv", "updates"),  # required once the tau figure applies
    ],
)
def test_missing_column_error_names_column_and_file(tmp_path, family, relpath, column):
    root = copy_fixtures(tmp_path, [family])
    path = root / family / relpath
    pd.read_csv(path).drop(columns=[column]).to_csv(path, index=False)
    with pytest.raises(plots.PlotError) as info:
        plots.draw_experiment(root / family)
    err = info.value
    if isinstance(err, plots.FigureError):  # one figure family needs the column: the others were drawn
        assert err.bad_input and len(err.exceptions) == 1
        assert str(path) in str(err) and f"'{column}'" in str(err)
        err = err.exceptions[0]
    assert isinstance(err, plots.MissingColumnError) and isinstance(err, ValueError)
    assert err.column == column and Path(err.path) == path
    assert f"'{column}'" in str(err) and str(path) in str(err)
    assert plt.get_fignums() == []  # a figure begun before the error is not left open


def _cut_inside_last_row(path):
    path.write_bytes(path.read_bytes()[:-5])


def _twice_a_row(path):
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines + lines[1:2]))


@pytest.mark.parametrize("damage", [_cut_inside_last_row, _twice_a_row])
def test_cli_refuses_a_damaged_summary_as_the_report_does(tmp_path, damage):
    """A summary cut inside a row or with a row twice: one line naming it, exit 2 (the figures were drawn from it
    without a word), the report's check (experiments/store/table.py read_summary_frame)."""
    root = copy_fixtures(tmp_path, ["lr_speedup"])
    summary = root / "lr_speedup" / "summary.csv"
    damage(summary)
    proc = _cli(root / "lr_speedup")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith(f"error: {summary}: damaged summary (") and proc.stderr.count("\n") == 1


def _without_speedup(path):
    pd.read_csv(path).drop(columns=["speedup"]).to_csv(path, index=False)


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (_cut_inside_last_row, "the last row does not end with a newline (truncated)"),
        (_without_speedup, "not the speed-up table's columns"),  # was a MissingColumnError, while the report rewrote it
    ],
)
def test_cli_writes_a_damaged_speedup_table_again_as_the_report_does(tmp_path, damage, why):
    """A speedup.csv cut inside a row (its rows were drawn without a word) or without its columns is written again
    from the summary with a line saying so, the report's repair (experiments/analysis/speedup.py speedup_frame)."""
    root = copy_fixtures(tmp_path, ["lr_speedup"])
    path = root / "lr_speedup" / "speedup.csv"
    damage(path)
    proc = _cli(root / "lr_speedup")
    assert proc.returncode == 0, proc.stderr
    assert f"{path}: damaged ({why}); written again from summary.csv" in proc.stderr
    assert path.read_text().endswith("\n") and len(pd.read_csv(path)) > 0


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (lambda p: p.write_bytes(bytes(range(256)) * 4 + b"\n"), "not a readable CSV file"),  # was exit 2, no figure
        (_cut_inside_last_row, "the last row does not end with a newline (truncated)"),  # these were drawn silently
        (lambda p: (p.unlink(), p.mkdir()), "a folder, not a regular file"),
        (lambda p: (p.unlink(), os.mkfifo(p)), "a named pipe, not a regular file"),
    ],
)
def test_a_damaged_staleness_histogram_leaves_its_run_out_with_one_line(tmp_path, damage, why):
    """A run's staleness.csv that cannot be read: its run is left out of the staleness figure, one line names it, and
    every figure is drawn (as an unreadable trace.csv is left out of the curves)."""
    root = copy_fixtures(tmp_path, ["artificial_delay"])
    expected = _cli(root / "artificial_delay").stdout.split()
    path = sorted((root / "artificial_delay").glob("runs/*/staleness.csv"))[0]
    damage(path)
    proc = _cli(root / "artificial_delay")
    assert proc.returncode == 0 and proc.stdout.split() == expected, proc.stderr
    assert proc.stderr.count(f"{path}: {why}") == 1 and proc.stderr.count("\n") == 1, proc.stderr


def test_missing_paper_file_is_fine_and_paper_dir_option(tmp_path):
    root = copy_fixtures(tmp_path, ["large_time_per_epoch"])
    shutil.move(root / "paper", tmp_path / "elsewhere")
    assert load_experiment(root / "large_time_per_epoch").paper is None
    exp = load_experiment(root / "large_time_per_epoch", paper_dir=tmp_path / "elsewhere")
    assert exp.paper is not None and set(exp.paper["metric"]) == {"time_per_epoch_h"}
    assert len(plots.draw_time_per_epoch(exp)) == 1


@pytest.mark.parametrize("kind", ["fifo", "folder"])
def test_a_paper_file_that_is_no_regular_file_is_named(tmp_path, kind):
    """A named pipe or a folder in the place of ``paper/<experiment>.csv``: named (the paper's points vanished from
    the figures without a word; a pipe would block the reader)."""
    import os

    root = copy_fixtures(tmp_path, ["large_time_per_epoch"])
    paper = root / "paper" / "large_time_per_epoch.csv"
    paper.unlink()
    os.mkfifo(paper) if kind == "fifo" else paper.mkdir()
    shown = "a named pipe" if kind == "fifo" else "a folder"
    with pytest.raises(plots.PlotError, match=f"large_time_per_epoch.csv: {shown}, not a regular file"):
        load_experiment(root / "large_time_per_epoch")


def test_unknown_format_is_an_error(tmp_path):
    root = copy_fixtures(tmp_path, ["stragglers"])
    with pytest.raises(plots.PlotError, match="svg"):
        plots.draw_experiment(root / "stragglers", fmt="svg")


def test_speedup_needs_two_worker_counts(tmp_path):
    root = copy_fixtures(tmp_path, ["lenet5_speedup"])
    path = root / "lenet5_speedup" / "speedup.csv"
    df = pd.read_csv(path)
    df[df["workers"] == 1].to_csv(path, index=False)
    assert plots.draw_speedup(root / "lenet5_speedup") == []
    df[df["workers"] <= 2].to_csv(path, index=False)
    assert len(plots.draw_speedup(root / "lenet5_speedup")) == 1


def test_delay_sweep_needs_several_max_delays(tmp_path):
    root = copy_fixtures(tmp_path, ["artificial_delay"])
    runs = root / "artificial_delay" / "runs"
    for run in runs.iterdir():
        if not run.name.endswith("-d5"):
            shutil.rmtree(run)
    assert plots.draw_delay_sweep(root / "artificial_delay") == []


def test_curves_skip_when_a_sweep_column_varies(tmp_path):
    """Curves per worker count pool nothing: a run with another tau in the same group switches them off."""
    root = copy_fixtures(tmp_path, ["lenet5_speedup"])
    trace = root / "lenet5_speedup" / "runs" / "apam-simulated-P2-s0" / "trace.csv"
    df = pd.read_csv(trace)
    df["tau"] = 3
    df.to_csv(trace, index=False)
    names = [p.name for p in plots.draw_curves_by_workers(root / "lenet5_speedup")]
    assert names == ["curves-lenet5_fmnist-async_sgd-simulated-simulated.png"]


def test_fixtures_match_their_generator(tmp_path):
    spec = importlib.util.spec_from_file_location("make_fixtures", FIXTURES / "make_fixtures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(tmp_path)
    made = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*.csv"))
    kept = sorted(p.relative_to(FIXTURES) for p in FIXTURES.rglob("*.csv"))
    assert made == kept
    _, mismatch, errors = filecmp.cmpfiles(tmp_path, FIXTURES, [str(p) for p in made], shallow=False)
    assert mismatch == [] and errors == []


# --- numeric helpers -------------------------------------------------------------------------------------------


def test_mean_band_same_grid_is_pointwise():
    x = np.array([0.0, 1.0, 2.0])
    x_out, mean, lo, hi = mean_band([(x, [1.0, 2.0, 3.0]), (x[::-1], [1.0, 2.0, 3.0]), (x, [2.0, 5.0, 0.0])])
    np.testing.assert_array_equal(x_out, x)
    np.testing.assert_allclose(mean, [2.0, 3.0, 4.0 / 3.0])
    np.testing.assert_allclose(lo, [1.0, 2.0, 0.0])
    np.testing.assert_allclose(hi, [3.0, 5.0, 3.0])


def test_mean_band_drops_non_finite_points():
    x = np.array([0.0, 1.0, 2.0])
    # the NaN drops x=2 from the third curve: the grids differ, so the band covers the common range [0, 1]
    x_out, mean, lo, hi = mean_band([(x, [1.0, 2.0, 3.0]), (x, [3.0, 2.0, 1.0]), (x, [2.0, 5.0, np.nan])])
    np.testing.assert_array_equal(x_out, x[:2])
    np.testing.assert_allclose(mean, [2.0, 3.0])
    np.testing.assert_allclose(lo, [1.0, 2.0])
    np.testing.assert_allclose(hi, [3.0, 5.0])


def test_mean_band_interpolates_on_the_common_range():
    # y = x sampled at 0,2,4 and y = 2x sampled at 1,3: common range [1, 3], grid {1, 2, 3}
    x, mean, lo, hi = mean_band([([0.0, 2.0, 4.0], [0.0, 2.0, 4.0]), ([3.0, 1.0], [6.0, 2.0])])
    np.testing.assert_allclose(x, [1.0, 2.0, 3.0])
    np.testing.assert_allclose(mean, [1.5, 3.0, 4.5])
    np.testing.assert_allclose(lo, [1.0, 2.0, 3.0])
    np.testing.assert_allclose(hi, [2.0, 4.0, 6.0])


def test_mean_band_disjoint_ranges_and_empty():
    x, mean, lo, hi = mean_band([([0.0, 1.0], [1.0, 1.0]), ([2.0, 3.0], [5.0, 7.0])])
    np.testing.assert_allclose(x, [0.0, 1.0, 2.0, 3.0])
    np.testing.assert_allclose(mean, [1.0, 1.0, 5.0, 7.0])
    assert all(a.size == 0 for a in mean_band([([1.0], [np.inf])]))


def test_seed_stats():
    df = pd.DataFrame({"workers": [1, 1, 2, 2, 4], "t": [2.0, 4.0, 1.0, np.nan, np.nan]})
    out = seed_stats(df, ["workers"], "t")
    assert out["workers"].tolist() == [1, 2]
    assert out["mean"].tolist() == [3.0, 1.0] and out["median"].tolist() == [3.0, 1.0]
    assert out["min"].tolist() == [2.0, 1.0]
    assert out["max"].tolist() == [4.0, 1.0] and out["n"].tolist() == [2, 1]


def test_pair_clocks_percent_error():
    summary = pd.DataFrame(
        {
            "problem": ["p"] * 5,
            "algorithm": ["apam"] * 4 + ["sync_amsgrad"],
            "engine": ["shared_memory", "shared_memory", "simulated", "simulated", "simulated"],
            "clock": ["wall", "wall", "simulated", "simulated", "simulated"],
            "workers": [2.0, 2.0, 2.0, 2.0, 2.0],
            "time_per_epoch_s": [2.0, 2.2, 2.31, 2.31, 9.0],
        }
    )
    pairs = pair_clocks(summary)
    assert len(pairs) == 1  # sync_amsgrad has no measured partner
    row = pairs.iloc[0]
    assert row["measured_s"] == pytest.approx(2.1) and row["simulated_s"] == pytest.approx(2.31)
    assert row["measured_min"] == 2.0 and row["measured_max"] == 2.2 and row["n"] == 2
    assert row["percent_error"] == pytest.approx(10.0)


def test_pair_clocks_takes_the_median_over_seeds_so_one_slow_seed_is_left_out():
    summary = pd.DataFrame(
        {
            "problem": ["p"] * 6,
            "algorithm": ["apam"] * 6,
            "engine": ["shared_memory"] * 3 + ["simulated"] * 3,
            "clock": ["wall"] * 3 + ["simulated"] * 3,
            "workers": [1.0] * 6,
            "seed": [0, 1, 2] * 2,
            "time_per_epoch_s": [1.9, 2.0, 3.8, 2.0, 2.0, 2.0],
        }
    )
    row = pair_clocks(summary).iloc[0]
    assert row["measured_s"] == 2.0 and row["measured_max"] == 3.8  # the mean (2.57) would give -22%
    assert row["percent_error"] == 0.0


def test_tau_ratio():
    np.testing.assert_allclose(tau_ratio([0, 16, 256], [65536, 65536, 65536]), [0.0, 1.0, 16.0])
    assert np.isnan(tau_ratio([4], [0])[0])


def test_histogram_fractions():
    runs = pd.DataFrame(
        {"run_id": ["a", "a", "b", "b"], "staleness": [0.0, 2.0, 0.0, 1.0], "count": [3.0, 1.0, 2.0, 2.0]}
    )
    values, fractions, mean_tau, max_tau = histogram_fractions(runs)
    assert values.tolist() == [0, 1, 2]
    np.testing.assert_allclose(fractions, [[0.75, 0.0, 0.25], [0.5, 0.5, 0.0]])
    assert mean_tau == pytest.approx((2 * 1 + 1 * 2) / 8) and max_tau == 2


def test_paper_relative_times_from_fixture():
    exp = load_experiment(FIXTURES / "large_time_per_epoch")
    rel = {(a, tuple(w)): r for _, a, w, r in _paper_relative_times(exp.paper)}
    np.testing.assert_allclose(rel[("apam", (5, 10, 20))], np.array([0.39, 0.25, 0.17]) / 1.79)
    # sync AMSGrad has no 1-worker row in the paper: it is relative to the problem's serial time
    np.testing.assert_allclose(rel[("sync_amsgrad", (5, 10, 20))], np.array([0.68, 0.77, 1.08]) / 1.79)


def test_paper_accuracies_from_fixture():
    levels = paper_accuracies(load_experiment(FIXTURES / "artificial_delay").paper)
    assert [v for v, _ in levels] == [0.88, 0.89]
    assert all("allcnn_cifar10" in label for _, label in levels)
    # five rows of the same 0.99 are one level; speed-up rows are no accuracy
    assert [v for v, _ in paper_accuracies(load_experiment(FIXTURES / "lenet5_speedup").paper)] == [0.99]
    assert paper_accuracies(None) == []


def test_colours_fixed_per_algorithm():
    fixed = [style.color_for(a) for a in ("apam", "sync_amsgrad", "async_sgd")]
    assert len(set(fixed)) == 3
    other = style.color_for("my_rule")
    assert other == style.color_for("my_rule") and other in style.FALLBACK_CYCLE and other not in fixed
    assert style.linestyle_for("wall") != style.linestyle_for("simulated")


@pytest.fixture
def captured(monkeypatch):
    """Figures passed to style.save, kept open (closed at teardown) for inspection."""
    figs = []
    monkeypatch.setattr(style, "save", lambda fig, out_dir, name, fmt: figs.append(fig) or name)
    yield figs
    for fig in figs:
        plt.close(fig)


def legend_texts(fig):
    return [t.get_text() for leg in fig.legends for t in leg.get_texts()]


def test_stragglers_none_reached_every_algorithm_identifiable(tmp_path, captured):
    exp, _ = edited_fixture(tmp_path, "stragglers", lambda df: df.__setitem__("time_to_target_s", np.nan))
    plots.draw_stragglers(exp)
    (fig,) = captured
    texts = legend_texts(fig)
    for algorithm in ("apam", "async_sgd", "sync_amsgrad"):
        assert style.series_label(algorithm, "simulated", "simulated") in texts
    assert any(t.startswith("target not reached") for t in texts)
    fig.canvas.draw()
    for ax in fig.axes:
        marks = [ln for ln in ax.get_lines() if ln.get_label() == "_missing"]
        assert len(marks) == 3
        assert {matplotlib.colors.to_hex(ln.get_color()) for ln in marks} == {
            matplotlib.colors.to_hex(style.color_for(a)) for a in ("apam", "async_sgd", "sync_amsgrad")
        }
        x0 = float(marks[0].get_xdata()[0])  # same data x, drawn 7 pt apart on screen
        px = sorted(ln.get_transform().transform((x0, 0.97))[0] for ln in marks)
        assert np.allclose(np.diff(px), 7.0 * fig.dpi / 72.0)
        assert any(t.get_text() == "no run reached the target loss" for t in ax.texts)


def test_tau_threshold_no_target_reached_has_note_and_no_y_ticks(tmp_path, captured):
    exp, _ = edited_fixture(tmp_path, "tau_threshold", lambda df: df.__setitem__("updates_to_target", np.nan))
    plots.draw_tau_threshold(exp)
    assert len(captured) == 2
    for fig in captured:
        fig.canvas.draw()
        loss_ax, target_ax = fig.axes[:2]
        assert [t.get_text() for t in target_ax.texts] == ["no run reached the target loss"]
        assert not any(lab.get_visible() and lab.get_text() for lab in target_ax.get_yticklabels())
        assert not loss_ax.texts and any(lab.get_text() for lab in loss_ax.get_yticklabels())


def test_speedup_time_to_target_marks_unreached_worker_counts(tmp_path, captured):
    root = copy_fixtures(tmp_path, ["lr_speedup"])
    path = root / "lr_speedup" / "speedup.csv"
    df = pd.read_csv(path)
    ttt = df[~((df["engine"] == "simulated") & (df["workers"] == 4))].assign(basis="time_to_target")
    pd.concat([df, ttt]).to_csv(path, index=False)
    plots.draw_speedup(root / "lr_speedup")
    by_title = {fig._suptitle.get_text().split("\n")[0]: fig for fig in captured}
    ttt_fig = next(f for t, f in by_title.items() if "time to target" in t)
    tpe_fig = next(f for t, f in by_title.items() if "time per epoch" in t)
    for ax in ttt_fig.axes[:2]:
        marks = [ln for ln in ax.get_lines() if ln.get_label() == "_missing"]
        assert len(marks) == 1 and list(marks[0].get_xdata()) == [4.0]
        assert matplotlib.colors.to_hex(marks[0].get_color()) == matplotlib.colors.to_hex(style.color_for("apam"))
    assert any(t.startswith("target not reached") for t in legend_texts(ttt_fig))
    assert not any(ln.get_label() == "_missing" for ax in tpe_fig.axes for ln in ax.get_lines())
    # the paper's speed-ups (time for fixed epochs) beside the time-per-epoch line only, never a speed-up to target
    assert any(t.startswith("paper: ") for t in legend_texts(tpe_fig))
    assert not any(t.startswith("paper: ") for t in legend_texts(ttt_fig))


def test_stragglers_shared_y_scale_shows_every_panels_largest_value(tmp_path, captured):
    # the panels share y; the scale must come from all of them, not freeze at the first panel's range
    def tenfold_last_column(df):  # the last column of panels is far higher than the first
        last = df["workers"] == df["workers"].max()
        df.loc[last, "time_to_target_s"] *= 10

    exp, df = edited_fixture(tmp_path, "stragglers", tenfold_last_column)
    plots.draw_stragglers(exp)
    (fig,) = captured
    top = fig.axes[0].get_ylim()[1]
    assert top >= 1.1 * np.nanmax(df["time_to_target_s"])  # with room for the "not reached" marks at the edge
    for ax in fig.axes:
        for ln in ax.get_lines():
            y = np.asarray(ln.get_ydata(), dtype=float)
            if ln.get_label() != "_missing" and y.size:
                assert np.nanmax(y) <= top


# --- a figure that cannot be drawn is named, never dropped -------------------------------------------------------


def test_whiskers_are_clipped_at_zero():
    x = 0.8132702392002724  # the mean of three copies of x is x + 1.1e-16 (float rounding)
    fractions = np.array([[x, 1 - x]] * 3)
    mean = fractions.mean(axis=0)
    assert mean[0] > fractions[:, 0].max()  # the case that made matplotlib reject yerr
    err = style.whiskers(mean, fractions.min(axis=0), fractions.max(axis=0))
    assert err.shape == (2, 2) and (err >= 0).all()
    np.testing.assert_array_equal(style.whiskers([2.0], [1.0], [5.0]), [[1.0], [3.0]])


def test_staleness_bars_of_equal_seeds_draw(tmp_path):
    from plots.staleness import _draw_histogram

    x = 0.8132702392002724
    fig, ax = plt.subplots()
    _draw_histogram(ax, np.array([0, 1]), np.array([[x, 1 - x]] * 3), "C0", hatched=False)
    plt.close(fig)


def _failing_figure(exp, fmt):
    raise ZeroDivisionError("boom\nsecond line")


def test_failed_figure_is_named_after_the_others_are_drawn(tmp_path, monkeypatch):
    root = copy_fixtures(tmp_path, ["tau_threshold"])
    monkeypatch.setattr(plots.draw, "FIGURES", (_failing_figure,) + plots.FIGURES)
    with pytest.raises(plots.FigureError) as info:
        plots.draw_experiment(root / "tau_threshold")
    exc = info.value
    assert [p.name for p in exc.written] == [s + ".png" for s in EXPECTED["tau_threshold"]["draw_tau_threshold"]]
    assert exc.failures == [("_failing_figure", "ZeroDivisionError: boom")] and not exc.bad_input
    assert str(exc) == f"{root / 'tau_threshold'}: figure _failing_figure not drawn: ZeroDivisionError: boom"


def test_cli_failed_figure_exits_1_after_drawing_the_rest(tmp_path, monkeypatch, capsys):
    from plots.__main__ import main

    root = copy_fixtures(tmp_path, ["stragglers", "tau_threshold"])
    monkeypatch.setattr(plots.draw, "FIGURES", plots.FIGURES + (_failing_figure,))
    assert main([str(root)]) == 1
    out, err = capsys.readouterr()
    expected = sorted(
        str(root / f / "figures" / (s + ".png"))
        for f in ("stragglers", "tau_threshold")
        for stems in EXPECTED[f].values()
        for s in stems
    )
    assert sorted(out.split()) == expected
    assert err.splitlines() == [
        f"error: {root / f}: figure _failing_figure not drawn: ZeroDivisionError: boom"
        for f in ("stragglers", "tau_threshold")
    ]


def test_cli_bad_input_in_one_figure_exits_2(tmp_path, monkeypatch, capsys):
    from plots.__main__ import main

    def needs_column(exp, fmt):
        raise plots.MissingColumnError("nope", Path("x.csv"))

    root = copy_fixtures(tmp_path, ["tau_threshold"])
    monkeypatch.setattr(plots.draw, "FIGURES", plots.FIGURES + (needs_column,))
    assert main([str(root / "tau_threshold")]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def _timing_summary():
    """A paper_timing-like summary: simulated twins of both transports, two measured engines, one flagged run."""
    import pandas as pd

    rows = []
    for p in (1, 2, 4):
        for engine, clock, transport, overruns in (
            ("simulated", "simulated", "shared_memory", np.nan),
            ("simulated", "simulated", "distributed", np.nan),
            ("shared_memory", "wall", "shared_memory", 30 if p == 4 else 0),
            ("distributed", "wall", "distributed", 20),
        ):
            rows.append(
                {
                    "run_id": f"{engine}-{transport}-{p}",
                    "problem": "q",
                    "algorithm": "apam",
                    "engine": engine,
                    "clock": clock,
                    "workers": p,
                    "seed": 0,
                    "transport": transport,
                    "overruns": overruns,
                    "gradients": 400,
                    "compute": "emulated",
                    "compute_base_s": 0.01,
                }
            )
    return pd.DataFrame(rows)


def test_simulated_rows_are_named_after_the_transport_they_modelled():
    from plots.data import engine_names

    named = engine_names(_timing_summary())
    sim = named[named["clock"] == "simulated"]
    assert sorted(sim["engine"].unique()) == ["simulated", "simulated_distributed"]
    assert (named.loc[named["clock"] == "wall", "engine"] == named.loc[named["clock"] == "wall", "transport"]).all()
    legacy = _timing_summary().drop(columns="transport")
    assert engine_names(legacy).equals(legacy)  # older summaries: unchanged


def test_overrun_workers_are_the_measured_runs_past_the_flag():
    from plots.validation import overrun_workers

    s = _timing_summary()
    assert overrun_workers(s, engine="shared_memory") == [4]  # 30 of 400 = 7.5% > 5%
    assert overrun_workers(s, engine="distributed") == []  # 20 of 400 = 5%: not above the flag
    assert overrun_workers(s, engine="simulated") == []  # simulated runs never overrun
    assert overrun_workers(s.drop(columns="overruns"), engine="shared_memory") == []


def test_late_wake_ups_flag_a_run_only_beyond_the_calibrated_ones():
    """overrun_count: overruns + late wake-ups beyond the calibrated expectation (all of them when it is unknown);
    summaries from before late wake-ups were counted apart keep their overruns as they were."""
    import pandas as pd

    from plots.validation import overrun_count, overrun_fraction

    s = pd.DataFrame(
        {
            "overruns": [0, 0, 10, 0, np.nan, 3],
            "late_wakeups": [30, 30, 0, 30, np.nan, np.nan],
            "late_expected": [28.0, 5.0, 1.0, np.nan, np.nan, np.nan],
            "gradients": [400, 400, 400, 400, 400, 400],
        }
    )
    assert overrun_count(s).tolist()[:4] == [2.0, 25.0, 10.0, 30.0] and np.isnan(overrun_count(s)[4])
    assert overrun_count(s)[5] == 3.0  # no late wake-up count: the overruns as recorded
    flagged = (overrun_fraction(s) > 0.05).tolist()
    assert flagged == [False, True, False, True, False, False]  # 0.5%, 6.25%, 2.5%, 7.5%, NaN, 0.75%
    assert overrun_count(s.drop(columns=["late_wakeups", "late_expected"])).tolist()[:3] == [0, 0, 10]


def test_a_long_legend_gets_room_instead_of_covering_the_panel(tmp_path):
    """21 legend lines under one panel: the figure widens to keep the legend to LEGEND_MAX_ROWS rows and grows by its
    rows, so constrained layout never collapses the axes (it warns when it does)."""
    fig, axes = style.new_figure(1, 1)
    for k in range(21):
        axes[0][0].plot([0, 1], [k, k + 1], label=f"algorithm_{k:02d} · simulated_distributed · simulated clock")
    w0, h0 = fig.get_figwidth(), fig.get_figheight()
    style.legend_outside(fig, axes)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fig.savefig(tmp_path / "f.png")
    rows = -(-21 // fig.legends[0]._ncols)
    assert fig.get_figwidth() > w0 and rows <= style.LEGEND_MAX_ROWS
    assert fig.get_figheight() == pytest.approx(h0 + style.LEGEND_ROW_IN * rows + 0.1)
    plt.close(fig)


def test_speedup_and_time_per_epoch_draw_one_figure_per_compute_setting(tmp_path):
    # the same runs twice, once as real compute and once emulated at 2 ms (model_validation holds both): pooled, the
    # seeds of two settings would make one line zigzag and one band span both
    exp = copy_fixtures(tmp_path, ["lr_speedup"]) / "lr_speedup"
    for name in ("summary.csv", "speedup.csv"):
        df = pd.read_csv(exp / name)
        both = pd.concat(
            [
                df.assign(compute="real", compute_base_s=np.nan),
                df.assign(
                    compute="emulated",
                    compute_base_s=0.002,
                    **(  # a run id of its own: a summary's run ids are each once (read_summary_frame)
                        {"time_per_epoch_s": df["time_per_epoch_s"] * 3, "run_id": df["run_id"] + "-emulated"}
                        if name == "summary.csv"
                        else {}
                    ),
                ),
            ],
            ignore_index=True,
        )
        both.to_csv(exp / name, index=False)
    names = sorted(p.name for p in plots.draw_speedup(exp) + plots.draw_time_per_epoch(exp))
    assert names == [
        "speedup-logreg_fmnist-time_per_epoch-emulated_0.002s.png",
        "speedup-logreg_fmnist-time_per_epoch-real.png",
        "time_per_epoch-logreg_fmnist-emulated_0.002s.png",
        "time_per_epoch-logreg_fmnist-real.png",
    ]
    settings = plots.data.compute_settings(load_experiment(exp), "logreg_fmnist")
    assert [(s, t) for s, t, _ in settings] == [
        ("emulated-0.002s", "emulated compute, 2 ms a gradient"),
        ("real", "real compute"),
    ]
    real = settings[1][2].summary
    assert set(real["compute"]) == {"real"} and len(real) == len(pd.read_csv(exp / "summary.csv")) // 2


def test_a_complete_drawing_removes_figures_the_csvs_no_longer_give(tmp_path):
    exp = copy_fixtures(tmp_path, ["lr_speedup"]) / "lr_speedup"
    stale = exp / "figures" / "speedup-logreg_fmnist-time_per_epoch-old_name.png"
    stale.parent.mkdir(parents=True, exist_ok=True)
    stale.write_bytes(PNG_SIGNATURE)
    pdf = exp / "figures" / "kept.pdf"  # another format: not this call's to judge
    pdf.write_bytes(b"%PDF")
    written = plots.draw_experiment(exp)
    assert not stale.exists() and pdf.exists() and all(p.exists() for p in written)
    assert sorted(p.name for p in (exp / "figures").glob("*.png")) == sorted(p.name for p in written)


@pytest.mark.parametrize(
    "lo, hi, labelled", [(400.0, 3500.0, {"500", "1000", "2000"}), (0.003, 20.0, {"0.01", "0.1", "1", "10"})]
)
def test_plain_log_axis_labels_minor_ticks_only_on_a_short_range(lo, hi, labelled):
    """Under 1.5 decades the 2x and 5x minor ticks get labels too (one label alone cannot be read as a scale); over
    it only the powers of ten are labelled, as plain numbers."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    try:
        ax.plot([1, 2], [lo, hi])
        style.plain_log_axis(ax)
        ax.set_ylim(lo, hi)
        fig.canvas.draw()
        shown = {
            t.get_text()
            for t in ax.yaxis.get_majorticklabels() + ax.yaxis.get_minorticklabels()
            if t.get_text() and lo <= t.get_position()[1] <= hi
        }
    finally:
        plt.close(fig)
    assert shown == labelled


def test_a_paper_dir_that_is_no_folder_is_one_line_and_exit_2(tmp_path, capsys):
    """A typo in --paper-dir drew the figures without the paper's curves and exited 0."""
    from plots.__main__ import main

    root = copy_fixtures(tmp_path, ["large_time_per_epoch"])
    assert main([str(root / "large_time_per_epoch"), "--paper-dir", str(tmp_path / "nope")]) == 2
    assert capsys.readouterr().err == f"error: --paper-dir {tmp_path / 'nope'}: no such folder\n"
    assert not list((root / "large_time_per_epoch").rglob("*.png.tmp"))


def test_a_paper_dir_without_the_experiments_numbers_is_said(tmp_path, capsys):
    """A folder given as --paper-dir without <experiment>.csv drew the figures without the paper's numbers, silent."""
    from plots.__main__ import main

    root = copy_fixtures(tmp_path, ["large_time_per_epoch"])
    (tmp_path / "other").mkdir()
    exp = root / "large_time_per_epoch"
    assert main([str(exp), "--paper-dir", str(tmp_path / "other")]) == 0
    assert capsys.readouterr().err == (
        f"warning: --paper-dir {tmp_path / 'other'} has no large_time_per_epoch.csv: {exp}'s figures show no paper "
        "numbers\n"
    )


def test_aggregate_refuses_a_folder_in_speedup_csvs_place_before_writing(tmp_path, capsys):
    from experiments.aggregate import main

    root = copy_fixtures(tmp_path, ["lenet5_speedup"])
    exp = root / "lenet5_speedup"
    (exp / "speedup.csv").unlink()
    (exp / "speedup.csv").mkdir()
    assert main([str(exp)]) == 2  # plots and the report say 2 for it too (it was 1)
    assert "speedup.csv: a folder, not a regular file; move it away" in capsys.readouterr().err
