"""The store's shared readers and writers on odd paths: a run folder nested past the system's limit on a path's
length (its files are named, left out, never a traceback) and a path that reached Python as undecodable bytes
(written with those bytes, never a UnicodeEncodeError)."""

import os
from pathlib import Path

from experiments.store import table
from experiments.store.atomic import atomic_write_text, write_if_changed

PATH_MAX = os.pathconf("/", "PC_PATH_MAX")  # 4096 on Linux


def test_run_files_past_the_path_limit_are_named_and_left_out(tmp_path, caplog):
    """The report's run readers (provenance.json, config.yaml) globbed the run folders, and pathlib's glob raised
    ``File name too long`` out of the report for a results folder nested deep."""
    run = "engine-simulated_epochs-2_workers-0_seed-0"
    # the run folder can be listed; its config.yaml cannot be opened (with "/config.yaml" it passes the limit)
    depth = PATH_MAX - len(f"/exp/runs/{run}/config.yaml") + 5
    here, cwd = str(tmp_path), os.getcwd()
    try:
        os.chdir(tmp_path)
        while len(here) < depth:
            name = "d" * min(250, depth - len(here) - 1)
            name = name[:-1] if depth - len(here) - len(name) - 1 == 1 else name  # no last level of 1 character
            os.mkdir(name)
            os.chdir(name)
            here += "/" + name
        os.makedirs(f"exp/runs/{run}")
        os.chdir(f"exp/runs/{run}")
        Path("config.yaml").write_text("profile: quick\n")
    finally:
        os.chdir(cwd)
    exp = Path(here) / "exp"
    assert len(str(exp / "runs" / run / "config.yaml")) >= PATH_MAX
    assert table.run_files(exp, "config.yaml") == []
    assert table.run_files(exp, "provenance.json") == []  # a file the run has not: nothing said
    assert [r.getMessage() for r in caplog.records] == [
        f"{exp / 'runs' / run / 'config.yaml'}: File name too long; left out"
    ]


def test_run_files_lists_the_runs_files_in_path_order(tmp_path):
    """The listing that replaced glob finds what it found: each run's file, sorted, a folder without it left out."""
    for run in ("b", "a", "c"):
        (tmp_path / "runs" / run).mkdir(parents=True)
    (tmp_path / "runs" / "a" / "trace.csv").write_text("epoch\n0\n")
    (tmp_path / "runs" / "b" / "trace.csv").write_text("epoch\n0\n")
    (tmp_path / "runs" / "x.csv").write_text("not a run folder\n")
    assert table.run_files(tmp_path, "trace.csv") == [tmp_path / "runs" / r / "trace.csv" for r in ("a", "b")]
    assert table.run_files(tmp_path / "nowhere", "trace.csv") == []


def test_text_quoting_a_path_of_undecodable_bytes_is_written_with_its_bytes(tmp_path):
    """Under ``LC_ALL=C PYTHONUTF8=0`` a path ``ü`` given on the command line is ``\\udcc3\\udcbc`` in Python: a text
    file quoting it (REPORT.md) was a UnicodeEncodeError ('surrogates not allowed') after the work was done."""
    path = "results/\udcc3\udcbc"
    assert write_if_changed(tmp_path / "a.md", f"runs under `{path}`\n")
    assert (tmp_path / "a.md").read_bytes() == "runs under `results/ü`\n".encode()
    assert not write_if_changed(tmp_path / "a.md", f"runs under `{path}`\n")  # the same bytes: left as it was
    atomic_write_text(tmp_path / "b.csv", f"{path}\n")
    assert (tmp_path / "b.csv").read_text(encoding="utf-8") == "results/ü\n"


def test_the_columns_a_reader_requires_are_the_first_the_runner_writes():
    """table.SUMMARY_COLUMNS (every reader refuses a summary without one) is the contract of docs/INTERFACES.md, the
    first columns of the runner's summary (experiments/store/sink.py): a column added to one is added to the other."""
    from experiments.store.sink import SUMMARY_COLUMNS

    assert SUMMARY_COLUMNS[: len(table.SUMMARY_COLUMNS)] == list(table.SUMMARY_COLUMNS)
    assert table.SUMMARY_COLUMNS[-1] == "message" and "cost_grad_s" not in table.SUMMARY_COLUMNS
