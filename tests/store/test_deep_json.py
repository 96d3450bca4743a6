"""JSON nested deeper than the decoder recurses (``{"a":{"a":...}}`` 100000 deep) is a damaged file for every reader
of the harness's JSON files, as text that is not JSON is: never a RecursionError traceback."""

import json
import shutil

import pytest

from conftest import REPO
from experiments import prune
from experiments.clock.calibration import Calibration
from experiments.report.__main__ import main as report
from experiments.store.damage import provenance_problem, read_provenance
from experiments.store.sink import SUMMARY_ROW_FILE, _read_row_file

DEEP = '{"a":' * 100000 + "1" + "}" * 100000


def test_the_text_is_deeper_than_the_decoder_recurses():
    with pytest.raises(RecursionError):
        json.loads(DEEP)


def test_a_deep_provenance_is_a_damaged_one(tmp_path):
    path = tmp_path / "provenance.json"
    path.write_text(DEEP)
    assert read_provenance(path) == (None, "is not valid JSON (truncated?)")
    assert provenance_problem(path) == "is not valid JSON (truncated?)"


def test_a_deep_summary_row_file_holds_no_row(tmp_path):
    (tmp_path / SUMMARY_ROW_FILE).write_text(DEEP)
    assert _read_row_file(tmp_path) is None


def test_a_deep_status_file_is_one_line_and_exit_2_for_report_and_prune(tmp_path, capsys):
    shutil.copytree(REPO / "results" / "tau_threshold", tmp_path / "tau_threshold", ignore=shutil.ignore_patterns("*"))
    shutil.copy(REPO / "results" / "tau_threshold" / "summary.csv", tmp_path / "tau_threshold")
    status = tmp_path / "reproduce_status.json"
    status.write_text(DEEP)
    capsys.readouterr()
    assert report([str(tmp_path), "--no-figures"]) == 2
    assert prune.main([str(tmp_path), "--profile", "quick"]) == 2
    err = capsys.readouterr().err.splitlines()
    want = f"error: {status}: damaged status file (not JSON (maximum recursion depth exceeded"
    assert len(err) == 2 and all(line.startswith(want) for line in err), err
    assert not (tmp_path / "REPORT.md").exists() and not (tmp_path / "verdicts.csv").exists()
    prune._forget_status(tmp_path, "tau_threshold", whole=True)  # after a removal: a damaged file is left alone
    assert status.read_text() == DEEP


def test_a_deep_calibration_file_is_set_aside_and_read_as_empty(tmp_path, capsys):
    path = tmp_path / "calibration.json"
    path.write_text(DEEP)
    assert Calibration(path).read()["entries"] == {}
    assert [p.name for p in tmp_path.glob("calibration.json.damaged-*")] == ["calibration.json.damaged-1"]
    assert "maximum recursion depth exceeded" in capsys.readouterr().err
