"""Every harness command's usage errors are one line and exit 2 (experiments/cli.py), not argparse's usage block."""

import importlib
import subprocess
import sys

import pytest

from conftest import REPO


@pytest.mark.parametrize(
    "args,named",
    [
        (["experiments.reproduce", "--profile", "nosuch"], "argument --profile: invalid choice: 'nosuch'"),
        (["experiments.reproduce", "--jobs", "abc"], "argument --jobs: 'abc': must be an integer >= 1"),
        (["experiments.reproduce", "--jobs", "0"], "argument --jobs: '0': must be an integer >= 1"),
        (["experiments.reproduce", "--jobs", "100000"], "--jobs 100000: at most"),  # a process each
        (["experiments.reproduce", "--only"], "--only: name at least one experiment id"),
        (["experiments.reproduce", "--keep-calibration"], "--keep-calibration: only with --force"),  # was accepted
        (["experiments.reproduce", "--extended"], "--extended: profile quick runs every experiment already"),
        (["experiments.reproduce", "--results-dir", ""], "argument --results-dir: '': must name a folder"),
        (["experiments.reproduce", "--results-dir", " "], "argument --results-dir: ' ': must name a folder"),
        (["experiments.calibrate", "--bogus"], "unrecognized arguments: --bogus"),
        # argparse kept the last of two values without a word
        (["experiments.calibrate", "--file=/tmp/y", "--file=/tmp/z"], "--file: given twice (--file=/tmp/y and --fi"),
        (["experiments.reproduce", "--profile", "smoke", "--prof", "long"], "--profile: given twice (--profile and"),
        (["experiments.report", "results", "--profile", "quick", "--profile", "long"], "--profile: given twice"),
        (["experiments.calibrate", "--file", ""], "argument --file: '': must name a file"),
        (
            ["experiments.aggregate", "results/tau_threshold/summary.csv"],
            "results/tau_threshold/summary.csv: a file, not an experiment folder (give results/tau_threshold)",
        ),
        (["experiments.report"], "the following arguments are required: DIR"),
        (["experiments.report", ""], "argument DIR: '': must name a folder"),  # it reported on '.'
        (["experiments.prune", "", "--profile", "smoke"], "argument results_dir: '': must name a folder"),
        (["experiments.aggregate"], "the following arguments are required: paths"),
        (["experiments.prune", "results"], "the following arguments are required: --profile"),
        (  # the list took the folder too: say so
            ["experiments.prune", "--profile", "smoke", "--only", "zzz", "results"],
            "required: results_dir (--only takes every word after it: put the folder before --only)",
        ),
        (["plots"], "the following arguments are required: path"),
    ],
)
def test_usage_errors_are_one_line(args, named):
    proc = subprocess.run([sys.executable, "-m", *args], cwd=REPO, capture_output=True, text=True, timeout=120)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and named in lines[0], proc.stderr


def test_reproduce_refuses_a_results_dir_that_is_a_file(tmp_path):
    f = tmp_path / "f"
    f.write_text("x")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "experiments.reproduce",
            "--profile",
            "smoke",
            "--only",
            "tau_threshold",
            "--results-dir",
            str(f),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and proc.stderr.strip().endswith("exists and is not a folder"), proc.stderr
    assert f.read_text() == "x"


def test_a_finished_run_and_sweep_leave_no_empty_hydra_folders(tmp_path):
    """Hydra makes a job folder under results_dir/.hydra for every job (nothing is written there: output_subdir
    null); the runner removes the empty ones when its runs are done."""
    for args in (["updates=3"], ["-m", "updates=3,4"]):
        proc = subprocess.run(
            [sys.executable, "-m", "experiments.run", *args, "engine=simulated", f"results_dir={tmp_path}"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr
        assert not (tmp_path / ".hydra").exists() and (tmp_path / "adhoc" / "summary.csv").exists()


def test_a_summary_damaged_after_a_sweep_is_a_warning_not_a_traceback(tmp_path, monkeypatch, capsys):
    """After a sweep, speedup.csv is written from each folder's summary; one damaged meanwhile is named in one
    warning line and the sweep's runs stand (it was a 20-line traceback, exit 1)."""
    import experiments
    from experiments.errors import ConfigError

    entry = importlib.import_module("experiments.run")
    # importing the entry module makes it the package's attribute `run`, which would hide the API's run() from
    # `from experiments import run` in every later test of this process: the attribute goes, the module stays
    vars(experiments).pop("run", None)

    exp = tmp_path / "exp"
    exp.mkdir()
    (exp / "summary.csv").write_text("run_id\n")

    def damaged(folder):
        raise ConfigError(f"{folder / 'summary.csv'}: damaged summary (row 2, column workers: '-5' is not ...)")

    monkeypatch.setattr(entry, "write_speedup", damaged)
    monkeypatch.setattr(entry, "_SWEEP_DIRS", {exp})
    entry._write_speedups()
    assert capsys.readouterr().err.splitlines() == [
        f"warning: {exp / 'summary.csv'}: damaged summary (row 2, column workers: '-5' is not ...); speedup.csv of "
        f"{exp} not written"
    ]


def test_the_argument_types_refuse_what_is_not_their_kind():
    """Counts, amounts and durations of the command lines (the entry points' and the benchmarks'): a value of
    another kind is argparse's usage error, which experiments.cli.Parser prints as one line (exit 2)."""
    import argparse
    import math

    from experiments.cli import amount_arg, count_arg, counts_arg, seconds_arg

    assert (count_arg("3"), amount_arg("0.5"), seconds_arg("0"), counts_arg("784,61706")) == (3, 0.5, 0.0, [784, 61706])
    for kind, bad in [
        (count_arg, "0"), (count_arg, "2.5"), (count_arg, "x"),
        (amount_arg, "0"), (amount_arg, "-1"), (amount_arg, "inf"), (amount_arg, "nan"), (amount_arg, "x"),
        (seconds_arg, "-0.5"), (seconds_arg, "inf"), (seconds_arg, "nan"),
        (counts_arg, "5,x"), (counts_arg, ""), (counts_arg, "5,,6"),
    ]:  # fmt: skip
        with pytest.raises(argparse.ArgumentTypeError):
            kind(bad)
    assert math.isfinite(amount_arg("1e308"))


def test_every_benchmark_script_reads_its_command_line_with_the_one_line_parser():
    """benchmarks/bench_*.py build their command line with benchmarks.common.parser (experiments.cli.Parser):
    ``--repeats 0`` was a StatisticsError traceback, ``--epochs -1`` a CalledProcessError one."""
    import ast

    for path in sorted((REPO / "benchmarks").glob("bench_*.py")):
        calls = [
            n
            for n in ast.walk(ast.parse(path.read_text()))
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "ArgumentParser"
        ]
        assert not calls, f"{path.name}: argparse.ArgumentParser directly (use benchmarks.common.parser)"
        assert "parser(__file__, __doc__)" in path.read_text(), path.name
    proc = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench_authors_master.py"), "--repeats", "0"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        "error: benchmarks/bench_authors_master.py: argument --repeats: '0': must be an integer >= 1 (--help lists "
        "the options)"
    ]


def test_a_benchmark_table_of_a_missing_or_foreign_csv_is_one_line(tmp_path):
    """bench_start_method.py --table without its CSV (after make clean) was a FileNotFoundError traceback."""
    foreign = tmp_path / "other.csv"
    foreign.write_text("a,b\n1,2\n")
    for path, why in [(tmp_path / "none.csv", "no such file (run the benchmark first)"), (foreign, "not this")]:
        proc = subprocess.run(
            [sys.executable, str(REPO / "benchmarks" / "bench_start_method.py"), "--table", str(path)],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 2 and proc.stdout == "", proc.stderr
        assert proc.stderr.startswith(f"error: --table {path}: {why}") and proc.stderr.count("\n") == 1, proc.stderr
