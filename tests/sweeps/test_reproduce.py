"""``make reproduce``'s bookkeeping (experiments/reproduce.py): a figure that cannot be drawn
is named in reproduce_status.json and in the report; a call that reran nothing keeps the status file's timings."""

import json
import shutil

import pandas as pd
import pytest

import plots
from conftest import REPO
from experiments import figures, reproduce
from experiments.report import write_report

FIXTURES = REPO / "tests" / "fixtures" / "plots"


def _row(markdown: str, first: str) -> list[str]:
    """The cells of the first Markdown table line of ``markdown`` whose first cell is ``first``."""
    return next(
        cells
        for cells in (
            [c.strip() for c in line.strip().strip("|").split("|")]
            for line in markdown.splitlines()
            if line.startswith("|")
        )
        if cells[0] == first
    )


def _broken(exp, fmt):
    raise ValueError("'yerr' must not contain negative values")


def test_a_figure_that_cannot_be_drawn_is_named(tmp_path, monkeypatch):
    shutil.copytree(FIXTURES / "tau_threshold", tmp_path / "tau_threshold")
    monkeypatch.setattr(plots.draw, "FIGURES", (_broken,) + plots.FIGURES)
    st = figures.draw_figures(tmp_path / "tau_threshold", tmp_path)
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
    st = figures.draw_figures(tmp_path / "tau_threshold", tmp_path)
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
    summary = tmp_path / "tau_threshold_lenet5" / "summary.csv"  # as that experiment's own (the report refuses a
    pd.read_csv(summary).assign(experiment="tau_threshold_lenet5").to_csv(summary, index=False)  # renamed folder)
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
    monkeypatch.setattr(reproduce, "unfinished_runs", lambda *a, **k: None)  # cannot tell: every sweep starts
    monkeypatch.setattr(
        reproduce,
        "run_experiment",
        lambda exp, *a, **k: ran.append(exp) or {"status": "ran", "message": "", "wall_s": 0.0},
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
    monkeypatch.setattr(reproduce, "unfinished_runs", lambda *a, **k: ["one"])
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
        here = figures.draw_figures(out / exp, out)
        assert statuses[exp]["figures"] == here["figures"] and len(here["figures"]) >= 2
        assert "figures_missing" not in statuses[exp]


# ---------------------------------------------------------------------- a call with nothing to run
def _finished_folder(tmp_path):
    """A results folder holding the committed quick results of tau_threshold (every planned run finished) and its
    status entry."""
    out = tmp_path / "res"
    shutil.copytree(REPO / "results" / "tau_threshold", out / "tau_threshold")
    status = json.loads((REPO / "results" / "reproduce_status.json").read_text())["tau_threshold"]
    (out / "reproduce_status.json").write_text(json.dumps({"tau_threshold": status}, indent=1, sort_keys=True))
    return out


def _tree(folder):
    return {
        p.relative_to(folder): (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.rglob("*")) if p.is_file()
    }


@pytest.fixture
def nothing_may_start(monkeypatch):
    """No sweep, no calibration, no figure: each fails the test."""

    def refuse(*a, **k):
        raise AssertionError(f"started although nothing was to run: {a[:1]}")

    monkeypatch.setattr(reproduce, "run_experiment", refuse)
    monkeypatch.setattr(reproduce, "run_sweep", refuse)
    monkeypatch.setattr(reproduce.subprocess, "run", refuse)  # experiments.calibrate and the sweeps' children
    monkeypatch.setattr(reproduce, "draw_all", lambda exps, *a: [refuse(exps) for _ in exps])


def test_finished_runs_start_nothing_and_change_no_file(tmp_path, nothing_may_start, capsys):
    out = _finished_folder(tmp_path)
    if not (out / "tau_threshold" / "summary.csv").exists():
        pytest.skip("no committed quick results")
    assert reproduce.unfinished_runs("tau_threshold", "quick", out) == []
    args = ["--profile", "quick", "--results-dir", str(out), "--only", "tau_threshold", "--jobs", "2"]
    assert reproduce.main(args) == 0  # the first call writes this folder's report
    first = _tree(out)
    capsys.readouterr()
    assert reproduce.main(args) == 0
    err = capsys.readouterr().err.splitlines()
    assert _tree(out) == first  # byte-identical, not even rewritten
    assert len(err) < 40 and not any("Traceback" in line for line in err)
    rows = len((out / "tau_threshold" / "summary.csv").read_text().splitlines()) - 1
    assert f"== [1/1] tau_threshold: nothing to run: {rows} runs already finished" in err
    assert err[0].startswith("checked 1 experiment(s) in ") and err[0].endswith("every planned run finished")
    assert err[-1].startswith(f"left unchanged {out / 'REPORT.md'} (") and not any(" ran in " in line for line in err)
    twice = [*args[:4], *args[6:], "--only", "tau_threshold", "tau_threshold"]  # named twice: one experiment
    assert reproduce.main(twice) == 0
    assert capsys.readouterr().err.splitlines()[0].startswith("checked 1 experiment(s) in ")


def test_a_missing_figure_is_drawn_again_without_running_anything(tmp_path, nothing_may_start, monkeypatch):
    out = _finished_folder(tmp_path)
    status = json.loads((out / "reproduce_status.json").read_text())["tau_threshold"]
    (out / status["figures"][0]).unlink()
    drawn = []
    monkeypatch.setattr(
        reproduce, "draw_all", lambda exps, *a: [drawn.append(e) or {"figures": status["figures"]} for e in exps]
    )
    assert (
        reproduce.main(["--profile", "quick", "--results-dir", str(out), "--only", "tau_threshold", "--jobs", "1"]) == 0
    )
    assert drawn == ["tau_threshold"]


def test_a_run_missing_from_the_summary_starts_the_sweep(tmp_path, monkeypatch):
    out = _finished_folder(tmp_path)
    summary = out / "tau_threshold" / "summary.csv"
    lines = summary.read_text().splitlines(keepends=True)
    removed = lines[1].split(",")[1]
    summary.write_text("".join(lines[:1] + lines[2:]))
    assert reproduce.unfinished_runs("tau_threshold", "quick", out) == [removed]


def test_jobs_whose_data_is_missing_are_skipped_without_starting_a_sweep(
    tmp_path, nothing_may_start, monkeypatch, capsys
):
    """large_accuracy reads CIFAR-10: without it the up-to-date check counts none of its jobs as runs to do (the sweep
    would skip them), names the reason once, and a second call leaves the status file byte-identical."""
    from experiments.settings import preflight
    from problems.datasets.files import DataError

    def missing(name, root):
        raise DataError(f"CIFAR-10 not found under {root} (test)")

    monkeypatch.setattr(preflight, "stage", missing)
    lacking = []
    assert reproduce.unfinished_runs("large_accuracy", "smoke", tmp_path, (), lacking) == []
    assert len(lacking) == 2 and lacking[0].startswith("problem=resnet18_cifar10: CIFAR-10 not found")
    args = ["--profile", "smoke", "--results-dir", str(tmp_path), "--only", "large_accuracy", "--jobs", "1"]
    assert reproduce.main(args) == 0
    status = json.loads((tmp_path / "reproduce_status.json").read_text())["large_accuracy"]
    assert status["status"] == "skipped" and "CIFAR-10 not found" in status["message"]
    assert "large_accuracy: skipped, 2 runs need data this machine lacks" in capsys.readouterr().err
    first = (tmp_path / "reproduce_status.json").read_bytes()
    assert reproduce.main(args) == 0
    assert (tmp_path / "reproduce_status.json").read_bytes() == first


def _processes_naming(text: str) -> list[int]:
    """The pids of this machine's processes whose command line contains ``text``."""
    from pathlib import Path

    pids = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if text in cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace"):
                pids.append(int(cmdline.parent.name))
        except OSError:
            pass
    return pids


@pytest.mark.timeout(240)
@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP"])
def test_a_stop_signal_to_reproduce_stops_its_running_sweep_before_it_exits(tmp_path, sig):
    """SIGTERM (a scheduler's stop) or SIGHUP (a closed terminal) sent to ``experiments.reproduce`` alone: the sweep
    it started is interrupted and awaited, then the call exits 128 + the signal; no sweep runs on, orphaned."""
    import signal
    import subprocess
    import sys
    import time

    from problems.data import data_root

    if not (data_root() / "FashionMNIST" / "raw").is_dir():
        pytest.skip("Fashion-MNIST not staged (make data)")
    res = tmp_path / "res"
    cmd = [sys.executable, "-m", "experiments.reproduce", "--profile", "smoke", "--results-dir", str(res)]
    proc = subprocess.Popen(
        [*cmd, "--only", "lenet5_speedup", "--jobs", "1"],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    sweep = f"results_dir='{res}'"  # the sweep's child, as reproduce quotes the folder for Hydra
    try:
        deadline = time.monotonic() + 150
        while not _processes_naming(sweep) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
        assert _processes_naming(sweep), "the sweep never started"
        proc.send_signal(getattr(signal, sig))
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + getattr(signal, sig), stderr[-2000:]
    assert _processes_naming(sweep) == []
    assert "interrupted: runs that finished are kept" in stderr


def test_a_folder_of_another_profiles_runs_is_refused_before_anything_runs(tmp_path, capsys):
    """reproduce --profile smoke into a folder of quick runs pooled 3 smoke runs with 30 quick ones in one summary
    and titled the report "smoke" (prune and report refused such a folder, reproduce made it)."""
    shutil.copytree(REPO / "results" / "tau_threshold", tmp_path / "tau_threshold")
    before = (tmp_path / "tau_threshold" / "summary.csv").read_bytes()
    args = ["--profile", "smoke", "--results-dir", str(tmp_path), "--only", "tau_threshold", "--jobs", "1"]
    assert reproduce.main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        f"error: --profile smoke: the runs of {tmp_path / 'tau_threshold'} were made with profile quick; give another "
        "--results-dir (or that --profile)"
    )
    assert (tmp_path / "tau_threshold" / "summary.csv").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tau_threshold"]
