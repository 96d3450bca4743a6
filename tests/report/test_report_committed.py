"""The committed reports (results/, results-long/) are what the report code writes from the committed CSVs: the same
verdicts.csv and REPORT.md, byte for byte (so a change of the report code shows here until both are written again
with ``python -m experiments.report results`` and ``... results-long``), and, read back, every claim's verdict class
and every number (tests/report/report_numbers.py)."""

import json
from pathlib import Path

import pytest
from report_numbers import compare

from conftest import REPO
from experiments.report.writer import write_report

PROFILES = {"results": "quick", "results-long": "long"}


def _mirror(tmp_path):
    """tmp_path/<folder> for each committed results folder: its experiment folders linked, its bookkeeping copied."""
    for folder in PROFILES:
        src, dst = REPO / folder, tmp_path / folder
        dst.mkdir()
        for item in src.iterdir():
            if item.is_dir():
                (dst / item.name).symlink_to(item)
            else:
                (dst / item.name).write_bytes(item.read_bytes())


@pytest.mark.parametrize("folder", list(PROFILES))
def test_committed_report_is_what_the_code_writes(folder, tmp_path, monkeypatch):
    if not (REPO / folder / "verdicts.csv").exists():
        pytest.skip(f"{folder}/ is not committed here")
    _mirror(tmp_path)
    monkeypatch.chdir(tmp_path)  # the report names its folder as given: results/, as make reproduce gives it
    statuses = json.loads((REPO / folder / "reproduce_status.json").read_text())
    write_report(Path(folder), PROFILES[folder], statuses)
    assert compare(REPO / folder, tmp_path / folder) == []
    assert (tmp_path / folder / "verdicts.csv").read_text() == (REPO / folder / "verdicts.csv").read_text()
    assert (tmp_path / folder / "REPORT.md").read_text() == (REPO / folder / "REPORT.md").read_text()
