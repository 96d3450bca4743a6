"""The report and experiments.aggregate on odd results folders: a file with an experiment's name, a summary without
a column the tools read, a folder renamed to another experiment's name, an edited speed-up table, a path that the
output's encoding cannot show or that reached Python as undecodable bytes. Each is one line and exit 2 (bad input) or
a report written, never a traceback."""

import io
import json
import shutil
import sys

import pandas as pd
import pytest

from conftest import REPO
from experiments import aggregate
from experiments.report.__main__ import main

SMALL = "artificial_delay"  # 7 runs, 2 figures


def _results(root, name=SMALL):
    """A results folder ``root`` holding a copy of the committed SMALL experiment (without figures) as ``name``."""
    shutil.copytree(REPO / "results" / SMALL, root / name, ignore=shutil.ignore_patterns("figures"))
    return root


def _files(root):
    return {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize("name", [SMALL, "lr_speedup"])
def test_a_file_with_an_experiments_name_is_one_line_and_exit_2(tmp_path, capsys, name):
    """A make reproduce folder lists every experiment of its profile: a file where one's folder goes (its own
    experiment's, or one its status file does not name) was a traceback (ConfigError: ``Not a directory``)."""
    root = _results(tmp_path / "res")
    statuses = {SMALL: {"status": "ran", "message": "", "profile": "quick", "wall_s": 1.0}}
    (root / "reproduce_status.json").write_text(json.dumps(statuses))
    if name == SMALL:
        shutil.rmtree(root / SMALL)
    (root / name).write_text("x\n")
    before = _files(root)
    assert main([str(root), "--no-figures"]) == 2
    assert capsys.readouterr().err == (
        f"error: {root / name}: a file, not a folder (experiment {name}'s runs go in a folder of that name); "
        "move it away\n"
    )
    assert _files(root) == before  # no REPORT.md, no verdicts.csv


@pytest.mark.parametrize("column", ["final_train_loss", "time_per_epoch_s", "engine", "experiment", "tau", "message"])
def test_a_summary_without_a_column_the_tools_read_is_one_line_and_exit_2(tmp_path, capsys, column):
    """Without final_train_loss the report was a KeyError traceback after rewriting speedup.csv; without
    time_per_epoch_s or engine aggregate wrote a speed-up table of empty cells, exit 0."""
    root = _results(tmp_path / "res")
    summary = root / SMALL / "summary.csv"
    pd.read_csv(summary, dtype=str, keep_default_na=False).drop(columns=[column]).to_csv(summary, index=False)
    before = _files(root)
    assert main([str(root), "--no-figures"]) == 2
    assert aggregate.main([str(root / SMALL)]) == 2
    why = f"error: {summary}: not a summary this harness writes (no column {column})"
    assert capsys.readouterr().err.splitlines() == [why, why]
    assert _files(root) == before


def test_a_summary_of_another_tables_columns_names_a_few_of_them(tmp_path, capsys):
    root = _results(tmp_path / "res")
    summary = root / SMALL / "summary.csv"
    pd.read_csv(summary)[["run_id", "problem", "algorithm", "workers", "seed", "status"]].to_csv(summary, index=False)
    assert aggregate.main([str(root / SMALL)]) == 2
    assert capsys.readouterr().err == (
        f"error: {summary}: not a summary this harness writes (no column experiment, engine, clock, delay_model, "
        "max_delay, tau and 19 more)\n"
    )


def test_a_folder_renamed_to_another_experiments_name_is_one_line_and_exit_2(tmp_path, capsys):
    """artificial_delay's runs in a folder named tau_threshold were judged by tau_threshold's rules (an IndexError
    traceback), and aggregate wrote a speedup.csv saying artificial_delay in tau_threshold/."""
    root = _results(tmp_path / "res", "tau_threshold")
    exp = root / "tau_threshold"
    before = _files(root)
    assert main([str(root), "--no-figures"]) == 2
    assert aggregate.main([str(exp)]) == 2
    why = (
        f"error: {exp}: holds the runs of experiment {SMALL} (its summary.csv's experiment column), not of "
        f"tau_threshold, whose name the folder has: give it back its name ({SMALL})"
    )
    assert capsys.readouterr().err.splitlines() == [why, why]
    assert _files(root) == before


def test_an_edited_speedup_table_is_named_with_plain_numbers(tmp_path, capsys):
    """The warning that speedup.csv is not what summary.csv gives showed numpy's reprs (``np.float64(1.09)``)."""
    root = _results(tmp_path / "res")
    path = root / SMALL / "speedup.csv"
    table = pd.read_csv(path)
    want = repr(float(table.loc[0, "time_s"]))
    table.loc[0, "time_s"] = 0.5
    table.to_csv(path, index=False)
    assert main([str(root), "--no-figures"]) == 0
    assert capsys.readouterr().err == (
        f"warning: {path}: not what summary.csv gives (row 2, time_s: 0.5 where summary.csv gives {want}: out of "
        "date, or edited); written again from summary.csv\n"
    )
    assert path.read_bytes() == (REPO / "results" / SMALL / "speedup.csv").read_bytes()


def test_a_path_of_undecodable_bytes_is_written_with_its_bytes(tmp_path, capsys):
    """Under ``LC_ALL=C PYTHONUTF8=0`` the command line's ``ünï`` reaches Python as lone surrogates
    (surrogateescape): writing REPORT.md, which quotes the results folder, was a UnicodeEncodeError."""
    _results(tmp_path / "ünï ☃")
    root = tmp_path / "ünï ☃".encode().decode("ascii", "surrogateescape")  # the same folder, as argv decodes it
    assert main([str(root), "--no-figures"]) == 0
    report = (tmp_path / "ünï ☃" / "REPORT.md").read_bytes()
    assert f"runs under `{tmp_path.as_posix()}/ünï ☃/`".encode() in report


def test_a_path_an_ascii_stdout_cannot_show_is_printed_escaped(tmp_path, monkeypatch):
    """With ``LC_ALL=C PYTHONIOENCODING=ascii`` the report and aggregate wrote their files, then crashed printing
    their path (UnicodeEncodeError); the streams now write such a character as an escape (experiments/cli.py)."""
    root = _results(tmp_path / "ü")
    out = io.TextIOWrapper(io.BytesIO(), encoding="ascii", errors="strict", write_through=True)
    monkeypatch.setattr(sys, "stdout", out)
    assert main([str(root), "--no-figures"]) == 0
    assert aggregate.main([str(root / SMALL)]) == 0
    shown = str(tmp_path).encode("ascii", "backslashreplace").decode()
    assert out.buffer.getvalue().decode().splitlines() == [
        f"{shown}/\\xfc/REPORT.md",
        f"{shown}/\\xfc/{SMALL}/speedup.csv",
    ]
