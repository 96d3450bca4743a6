"""Ad-hoc runs (``python -m experiments.run`` without ``experiment=``) change no committed file: they go to
results/adhoc/, which git ignores, and a ``make reproduce`` folder's report never reads that folder (nor counts its
runs in its header)."""

import json
import shutil
import subprocess

import pytest

from conftest import REPO, compose_cfg
from experiments.report import write_report
from experiments.report.load import ADHOC, experiment_folders, run_commits

FIXTURES = REPO / "tests" / "fixtures" / "plots"


def _run(folder, run_id, commit):
    run = folder / "runs" / run_id
    run.mkdir(parents=True)
    (run / "provenance.json").write_text(json.dumps({"git_commit": commit}))
    (run / "config.yaml").write_text("profile: smoke\n")


def test_ad_hoc_runs_go_to_a_folder_git_ignores():
    cfg = compose_cfg([])
    assert (cfg.results_dir, cfg.experiment_id) == ("results", ADHOC)
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    paths = [f"results/{ADHOC}/summary.csv", f"results/{ADHOC}/runs/x/trace.csv"]
    ignored = subprocess.run(
        ["git", "check-ignore", "--no-index", *paths], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert ignored.stdout.split() == paths
    tracked = subprocess.run(
        ["git", "ls-files", f"results/{ADHOC}"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    assert tracked == ""


def test_the_report_of_a_reproduce_folder_does_not_read_ad_hoc_runs(tmp_path):
    shutil.copytree(FIXTURES / "tau_threshold", tmp_path / "tau_threshold")
    _run(tmp_path / "tau_threshold", "r1", "aaa")
    statuses = {"tau_threshold": {"status": "ran", "message": "", "wall_s": 1.0, "profile": "quick"}}
    (tmp_path / "reproduce_status.json").write_text(json.dumps(statuses))
    report = write_report(tmp_path, "quick", statuses)
    before = {p.name: p.read_bytes() for p in (report, tmp_path / "verdicts.csv")}
    mtime = report.stat().st_mtime_ns
    assert "`aaa` (1 runs)" in before["REPORT.md"].decode()
    # an ad-hoc run lands beside the experiments
    shutil.copytree(FIXTURES / "tau_threshold", tmp_path / ADHOC)
    _run(tmp_path / ADHOC, "r2", "bbb")
    assert experiment_folders(tmp_path) == ["tau_threshold"] and run_commits(tmp_path) == "`aaa` (1 runs)"
    write_report(tmp_path, "quick", statuses)
    assert {p.name: p.read_bytes() for p in (report, tmp_path / "verdicts.csv")} == before
    assert report.stat().st_mtime_ns == mtime  # same content: not even rewritten


def test_a_folder_of_ones_own_runs_still_reports_them(tmp_path):
    shutil.copytree(FIXTURES / "tau_threshold", tmp_path / ADHOC)
    _run(tmp_path / ADHOC, "r2", "bbb")
    assert experiment_folders(tmp_path) == [ADHOC] and run_commits(tmp_path) == "`bbb` (1 runs)"
