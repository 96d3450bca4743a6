"""``make reproduce``'s bookkeeping (experiments/reproduce.py): a figure that cannot be drawn
is named in reproduce_status.json and in the report; a call that reran nothing keeps the status file's timings."""
import json
import shutil

import pytest

import plots
from conftest import REPO
from experiments import reproduce
from experiments.report import write_report

FIXTURES = REPO / "tests" / "fixtures" / "plots"


def _row(markdown: str, first: str) -> list[str]:
    """The cells of the first Markdown table line of ``markdown`` whose first cell is ``first``."""
    return next(cells for cells in ([c.strip() for c in line.strip().strip("|").split("|")]
                                    for line in markdown.splitlines() if line.startswith("|")) if cells[0] == first)


def _broken(exp, fmt):
    raise ValueError("'yerr' must not contain negative values")


def test_a_figure_that_cannot_be_drawn_is_named(tmp_path, monkeypatch):
    shutil.copytree(FIXTURES / "tau_threshold", tmp_path / "tau_threshold")
    monkeypatch.setattr(plots.draw, "FIGURES", (_broken,) + plots.FIGURES)
    st = reproduce.draw_figures(tmp_path / "tau_threshold", tmp_path)
    assert st["figures_missing"] == [
        {"figure": "_broken", "reason": "ValueError: 'yerr' must not contain negative values"}
    ]
    assert st["figures"] == [
        "tau_threshold/figures/tau_threshold-lenet5_fmnist.png",  # the others are drawn
        "tau_threshold/figures/tau_threshold-logreg_fmnist.png",
    ]
    statuses = {"tau_threshold": {"status": "ran", "message": "", "wall_s": 1.0, "profile": "quick", **st}}
    report = write_report(tmp_path, "quick", statuses).read_text()
    assert "**Figures not drawn:**" in report
    assert "- `_broken`: ValueError: 'yerr' must not contain negative values" in report
    overview = report.split("## Experiments")[1]
    assert _row(overview, "tau_threshold")[:2] == ["tau_threshold", "ran (1 figure(s) not drawn)"]


def test_all_figures_drawn_has_no_missing_key(tmp_path):
    shutil.copytree(FIXTURES / "tau_threshold", tmp_path / "tau_threshold")
    st = reproduce.draw_figures(tmp_path / "tau_threshold", tmp_path)
    assert "figures_missing" not in st and st["figures"]


def test_report_is_the_same_bytes_when_redrawn(tmp_path):
    shutil.copytree(FIXTURES / "tau_threshold", tmp_path / "tau_threshold")
    statuses = {"tau_threshold": {"status": "ran", "message": "", "wall_s": 12.0, "profile": "quick"}}
    first = write_report(tmp_path, "quick", statuses).read_bytes()
    assert write_report(tmp_path, "quick", statuses).read_bytes() == first
    assert b"on 20" not in first  # no date of the day it was drawn


@pytest.mark.parametrize("before,after,keeps", [(b"a", b"a", True), (b"a", b"b", False), (None, b"a", False)])
def test_timing_kept_only_when_no_run_changed(before, after, keeps):
    old = {"status": "ran", "message": "", "wall_s": 30.0, "figures": ["x.png"]}
    new = dict(old, wall_s=2.0)
    assert reproduce._keep_timing_if_unchanged(old, new, before, after)["wall_s"] == (30.0 if keeps else 2.0)
    assert reproduce._keep_timing_if_unchanged(old, dict(new, figures=[]), b"a", b"a")["wall_s"] == 30.0  # redrawn only
    assert reproduce._keep_timing_if_unchanged(old, dict(new, status="crashed"), b"a", b"a")["wall_s"] == 2.0
    assert reproduce._keep_timing_if_unchanged(None, new, b"a", b"a")["wall_s"] == 2.0


def test_an_unfinished_or_crashed_experiment_never_reads_as_not_runnable(tmp_path):
    """A long profile part-way: experiments it has not reached say "not run yet", a crash says so; only a sweep that
    was skipped (bad input for this machine) is "not runnable here"."""
    statuses = {
        "tau_threshold": {
            "status": "crashed",
            "message": "exit code 1: python -m experiments.run",
            "wall_s": 3.0,
            "profile": "long",
        },
        "stragglers": {"status": "skipped", "message": "data/cifar10: not found", "wall_s": 1.0, "profile": "long"},
    }
    shutil.copytree(FIXTURES / "tau_threshold", tmp_path / "tau_threshold_lenet5")  # runs, status never written
    report = write_report(tmp_path, "long", statuses).read_text()
    overview = report.split("## Experiments")[1].split("\n## ")[0]
    assert _row(overview, "tau_threshold") == ["tau_threshold", "crashed", "0", "crashed"]
    assert _row(overview, "stragglers") == ["stragglers", "skipped", "0", "not runnable here"]
    assert _row(overview, "artificial_delay") == ["artificial_delay", "not run", "0", "not run yet"]
    assert "**Crashed:** exit code 1" in report and "**Not runnable here:** data/cifar10: not found" in report
    assert "**Not run yet:** not part of this call" in report
    assert _row(overview, "tau_threshold_lenet5")[1] == "part-way (its sweep has not finished)"


@pytest.mark.parametrize("flags", [[], ["--extended"]])
def test_long_leaves_the_extended_experiments_out_unless_asked(tmp_path, monkeypatch, flags):
    """PROFILE=long runs the paper's claims at scale (its 3-hour budget); EXTENDED=1 adds the rest.
    Left out, an experiment keeps the status of an earlier extended call, or reads "left out" in the report."""
    ran = []
    monkeypatch.setattr(
        reproduce,
        "run_experiment",
        lambda exp, *a, **k: ran.append(exp) or {"status": "skipped", "message": "stub", "wall_s": 0.0},
    )
    out = tmp_path / "res"
    out.mkdir()
    earlier = {"status": "ran", "message": "", "wall_s": 1716.0, "profile": "long"}
    (out / "reproduce_status.json").write_text(json.dumps({"model_validation": earlier}))
    assert reproduce.main(["--profile", "long", "--results-dir", str(out), "--jobs", "1", *flags]) == 0
    extended = set(reproduce.EXTENDED["long"])
    assert ran == (reproduce.EXPERIMENTS if flags else [e for e in reproduce.EXPERIMENTS if e not in extended])
    statuses = json.loads((out / "reproduce_status.json").read_text())
    if not flags:
        assert statuses["model_validation"] == earlier
        assert statuses["stragglers"]["status"] == "left out"
        overview = (out / "REPORT.md").read_text().split("## Experiments")[1].split("\n## ")[0]
        assert _row(overview, "stragglers") == ["stragglers", "left out", "0", "left out (EXTENDED=1 runs it)"]
        assert "EXTENDED=1` runs it" in (out / "REPORT.md").read_text()
    # quick has nothing to leave out
    ran.clear()
    assert reproduce.main(["--profile", "quick", "--results-dir", str(tmp_path / "q"), "--jobs", "1"]) == 0
    assert ran == reproduce.EXPERIMENTS


def test_figures_are_drawn_side_by_side_after_the_runs(tmp_path, monkeypatch):
    """With --jobs 2 the figures of every experiment are drawn after all runs, two experiments at a time in spawned
    processes: the same figures as drawing them one after another here, named in the status file."""
    import subprocess

    out = tmp_path / "res"
    for exp in ("tau_threshold", "lr_speedup"):
        shutil.copytree(FIXTURES / exp, out / exp)
    monkeypatch.setattr(
        reproduce, "run_experiment", lambda exp, *a, **k: {"status": "ran", "message": "", "wall_s": 1.0}
    )
    monkeypatch.setattr(
        reproduce.subprocess, "run", lambda cmd, **k: subprocess.CompletedProcess(cmd, 0)
    )  # calibration
    assert (
        reproduce.main(
            ["--profile", "quick", "--results-dir", str(out), "--jobs", "2", "--only", "tau_threshold", "lr_speedup"]
        )
        == 0
    )
    statuses = json.loads((out / "reproduce_status.json").read_text())
    for exp in ("tau_threshold", "lr_speedup"):
        here = reproduce.draw_figures(out / exp, out)
        assert statuses[exp]["figures"] == here["figures"] and len(here["figures"]) >= 2
        assert "figures_missing" not in statuses[exp]
