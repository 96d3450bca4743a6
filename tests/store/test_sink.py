"""The results sink: deterministic run ids, atomic files, a summary.csv that survives concurrent writers."""
import csv
import subprocess
import sys
from collections import Counter

import pytest

from conftest import REPO
from experiments.store.sink import SUMMARY_COLUMNS, TRACE_COLUMNS, RunSink, make_run_id


def test_run_id_is_deterministic_sorted_and_ignores_output_keys():
    a = make_run_id(["workers=4", "algorithm=apam", "results_dir=/tmp/x", "progress=true"], seed=3)
    b = make_run_id(["algorithm=apam", "workers=4"], seed=3)
    assert a == b == "algorithm-apam_workers-4_seed-3"
    assert make_run_id([], seed=0) == "seed-0"
    assert make_run_id(["seed=5"], seed=5) == "seed-5"
    long = make_run_id([f"k{i}=v{i}" for i in range(40)], seed=0)
    assert len(long) <= 113 and long != make_run_id([f"k{i}=v{i}" for i in range(41)], seed=0)


def test_trace_and_staleness_files(tmp_path):
    sink = RunSink(tmp_path, "exp", "r1")
    sink.write_trace([{"run_id": "r1", "epoch": 0.5, "train_loss": float("nan")}], Counter({0: 3, 2: 1}))
    with open(sink.run_dir / "trace.csv") as f:
        rows = list(csv.reader(f))
    assert rows[0][: len(TRACE_COLUMNS)] == TRACE_COLUMNS
    assert rows[1][TRACE_COLUMNS.index("train_loss")] == ""  # NaN written as empty
    assert (sink.run_dir / "staleness.csv").read_text() == "staleness,count\n0,3\n2,1\n"


def test_rerun_replaces_its_row_and_finished_needs_trace(tmp_path):
    sink = RunSink(tmp_path, "exp", "r1")
    sink.append_summary({"run_id": "r1", "status": "failed", "message": "boom"})
    assert not sink.finished()
    sink.append_summary({"run_id": "r1", "status": "ok"})
    RunSink(tmp_path, "exp", "r2").append_summary({"run_id": "r2", "status": "ok"})
    with open(sink.summary_path) as f:
        rows = list(csv.DictReader(f))
    assert [r["run_id"] for r in rows] == ["r1", "r2"] and rows[0]["status"] == "ok"
    assert not sink.finished()  # no trace yet
    sink.write_trace([{"run_id": "r1"}], Counter())
    assert sink.finished()


WRITER = """
import sys
from experiments.store.sink import RunSink
rid = sys.argv[2]
RunSink(sys.argv[1], "exp", rid).append_summary({"run_id": rid, "status": "ok", "message": "x" * 2000 + rid})
"""


def test_eight_runs_appending_at_once_leave_one_header_and_eight_whole_rows(tmp_path):
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), f"run{i}"], cwd=REPO) for i in range(8)]
    assert all(p.wait(timeout=60) == 0 for p in procs)
    text = (tmp_path / "exp" / "summary.csv").read_text()
    assert text.count("experiment,run_id") == 1
    with open(tmp_path / "exp" / "summary.csv") as f:
        rows = list(csv.DictReader(f))
    assert sorted(r["run_id"] for r in rows) == [f"run{i}" for i in range(8)]
    assert all(r["message"] == "x" * 2000 + r["run_id"] for r in rows)
    assert list(rows[0].keys())[: len(SUMMARY_COLUMNS)] == SUMMARY_COLUMNS
    assert not list((tmp_path / "exp").glob(".*.tmp"))


def test_git_commit_is_dirty_for_code_changes_but_not_for_rewritten_results(tmp_path):
    import subprocess

    from experiments.store.provenance import git_commit

    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    for folder in ("results", "results-long"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "REPORT.md").write_text("old\n")
    (tmp_path / "results_notes.py").write_text("y = 1\n")  # code whose name starts like a results folder
    (tmp_path / "code.py").write_text("x = 1\n")
    git("add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "init")
    sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True).stdout.strip()
    assert git_commit(tmp_path) == sha
    (tmp_path / "results" / "REPORT.md").write_text("new\n")  # make reproduce rewrote the reference results
    (tmp_path / "results-long" / "REPORT.md").write_text("new\n")  # ... and the long profile's
    assert git_commit(tmp_path) == sha
    (tmp_path / "results_notes.py").write_text("y = 2\n")
    assert git_commit(tmp_path) == sha + "-dirty"
    (tmp_path / "results_notes.py").write_text("y = 1\n")
    (tmp_path / "code.py").write_text("x = 2\n")
    assert git_commit(tmp_path) == sha + "-dirty"
    assert git_commit(tmp_path / "results" / "nonexistent") == "unknown"


def test_config_changes_name_changed_values_and_ignore_tables_and_new_keys(tmp_path):
    import yaml

    from experiments.store.sink import RunSink

    sink = RunSink(tmp_path, "e", "r")
    assert sink.config_changes({"updates": 1}) == []  # no config.yaml: nothing to compare
    sink.run_dir.mkdir(parents=True)
    old = {"updates": 400, "engine": {"compute_base_s": 0.05, "handoff": "block"}, "results_dir": "a",
           "profiles": {"quick": {"seed": 0}}, "points": {"p1": {"workers": 1}}}
    (sink.run_dir / "config.yaml").write_text(yaml.safe_dump(old))
    new = {"updates": 416, "engine": {"compute_base_s": 0.05, "handoff": "block", "warmup_updates": 5},
           "results_dir": "b", "profiles": {"quick": {"seed": "0,1,2"}}, "points": {"p1": {"workers": 2}}}
    assert sink.config_changes(new) == ["updates: 400 -> 416"]
    assert sink.config_changes(dict(new, updates=400)) == []
