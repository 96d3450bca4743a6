"""``python -m plots`` on odd experiment folders: a summary without a column the tools read, a folder renamed to
another experiment's name, a results folder nested past the system's limit on a path's length, a path an ASCII
stdout cannot show. One line per problem, never a traceback."""

import io
import os
import shutil
import sys
from pathlib import Path

import pandas as pd

from conftest import REPO
from plots.__main__ import main

FIXTURE = REPO / "tests" / "fixtures" / "plots" / "lr_speedup"  # 12 runs with ids of 20 and 24 characters
PATH_MAX = os.pathconf("/", "PC_PATH_MAX")  # 4096 on Linux: a path this long (with its NUL) cannot be opened


def test_a_summary_without_a_column_the_tools_read_is_one_line_and_exit_2(tmp_path, capsys):
    """The figures were drawn from a summary without final_train_loss, which the report and aggregate refuse."""
    exp = tmp_path / "lr_speedup"
    shutil.copytree(FIXTURE, exp)
    summary = exp / "summary.csv"
    pd.read_csv(summary, dtype=str, keep_default_na=False).drop(columns=["final_train_loss"]).to_csv(
        summary, index=False
    )
    assert main([str(exp)]) == 2
    assert capsys.readouterr().err == f"error: {summary}: missing required column 'final_train_loss'\n"
    assert not (exp / "figures").exists()


def test_a_folder_renamed_to_another_experiments_name_is_one_line_and_exit_2(tmp_path, capsys):
    """lr_speedup's runs in a folder named tau_threshold were drawn without a word (exit 0)."""
    exp = tmp_path / "tau_threshold"
    shutil.copytree(FIXTURE, exp)
    assert main([str(exp)]) == 2
    assert capsys.readouterr().err == (
        f"error: {exp}: holds the runs of experiment lr_speedup (its summary.csv's experiment column), not of "
        "tau_threshold, whose name the folder has: give it back its name (lr_speedup)\n"
    )
    assert not (exp / "figures").exists()


def _deep_folder(root: Path, length: int) -> Path:
    """A folder below ``root`` whose absolute path is ``length`` characters long, made one level at a time."""
    here, cwd = str(root), os.getcwd()
    try:
        os.chdir(root)
        while len(here) < length:
            rest = length - len(here)
            name = "d" * min(250, rest - 1)
            if rest - len(name) - 1 == 1:  # no room for a last level of one character and its slash
                name = name[:-1]
            os.mkdir(name)
            os.chdir(name)
            here += "/" + name
    finally:
        os.chdir(cwd)
    return Path(here)


def test_a_results_folder_nested_past_the_path_limit_names_what_it_cannot_open(tmp_path, capsys):
    """Its summary.csv can be read, its runs' files cannot (``File name too long``): pathlib's exists() raised it
    out of ``python -m plots`` (a traceback), where the report named the figures not drawn."""
    root = _deep_folder(tmp_path, PATH_MAX - 46)  # runs/<id>/ can be listed; runs/<id>/trace.csv cannot be opened
    cwd = os.getcwd()
    try:
        os.chdir(tmp_path)
        shutil.copytree(FIXTURE, os.path.relpath(root / "lr_speedup", tmp_path))  # relative: each path short enough
    finally:
        os.chdir(cwd)
    exp = root / "lr_speedup"
    assert main([str(exp)]) == 1  # every figure's file is too long to write: not drawn, each named
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert out == "" and all(line.startswith(("warning: ", "error: ")) for line in lines), err[-2000:]
    runs = sorted(p.name for p in FIXTURE.glob("runs/*"))
    assert [line for line in lines if "staleness.csv" in line] == [
        f"warning: {exp}/runs/{run}/staleness.csv: File name too long; its run is left out of the staleness figure"
        for run in runs
    ]
    first = pd.read_csv(FIXTURE / "summary.csv")["run_id"][0]
    assert lines[-1] == (
        f"error: {exp}: 12 run(s) of summary.csv have no trace.csv that is a readable file (first: {first}): their "
        "curves are not drawn"
    )
    assert all("File name too long" in line for line in lines if " not drawn: " in line)


def test_a_path_an_ascii_stdout_cannot_show_is_printed_escaped(tmp_path, monkeypatch, capsys):
    """With ``LC_ALL=C PYTHONIOENCODING=ascii`` plots drew its figures, then crashed printing their path."""
    exp = tmp_path / "ünï ☃" / "lr_speedup"
    shutil.copytree(FIXTURE, exp)
    out = io.TextIOWrapper(io.BytesIO(), encoding="ascii", errors="strict", write_through=True)
    monkeypatch.setattr(sys, "stdout", out)
    assert main([str(exp)]) == 0
    shown = str(exp).encode("ascii", "backslashreplace").decode()
    printed = out.buffer.getvalue().decode().splitlines()
    assert printed == [f"{shown}/figures/{p.name}" for p in sorted((exp / "figures").glob("*.png"), key=printed_order)]


def printed_order(path: Path) -> int:
    """Where plots prints a figure of the fixture (its drawing order)."""
    order = [
        "speedup-",
        "time_per_epoch-",
        "curves-logreg_fmnist-apam-shared_memory",
        "curves-logreg_fmnist-apam-simulated",
        "staleness-",
        "model_validation-",
    ]
    return next(i for i, start in enumerate(order) if path.name.startswith(start))
