"""The entry point's standard streams and environment: a closed stream, a pipe closed by its reader (``| head -1``)
and a math library's thread count set to a bad value (experiments/run.py)."""

from __future__ import annotations

import csv
import os
import subprocess
import sys

import pytest

from conftest import FIXED_CLOCK, REPO, needs_fmnist

# a tiny logistic regression on the simulated clock at fixed costs: no calibration is read or measured
RUN = [
    sys.executable,
    "-m",
    "experiments.run",
    "problem=logreg_fmnist",
    "problem.max_train=2000",
    "algorithm=apam",
    "updates=20",
    "eval_every=0.5",
    *FIXED_CLOCK,
]


def _rows(results_dir) -> list[dict]:
    with open(results_dir / "adhoc" / "summary.csv") as f:
        return list(csv.DictReader(f))


@needs_fmnist
@pytest.mark.parametrize("closed", ["2>&-", ">&- 2>&- <&-"])
def test_a_closed_standard_stream_leaves_the_run_unchanged(tmp_path, closed):
    """``2>&-`` was an AttributeError traceback (Python leaves ``sys.stderr`` None), exit 1 and no summary row."""
    proc = subprocess.run(["bash", "-c", f'"$@" {closed}', "_", *RUN, f"results_dir={tmp_path}"], cwd=REPO, timeout=300)
    assert proc.returncode == 0
    (row,) = _rows(tmp_path)
    assert row["status"] == "ok" and int(row["updates"]) == 20


@needs_fmnist
def test_a_sweep_whose_reader_closed_the_pipe_logs_nothing_more_and_records_every_run(tmp_path):
    """Piped into ``head -1``: each later line of Hydra's logger was a "--- Logging error ---" traceback."""
    err = tmp_path / "stderr.txt"
    with open(err, "w") as ferr:
        proc = subprocess.Popen(
            [*RUN[:3], "-m", *RUN[3:], "seed=0,1", f"results_dir={tmp_path}/res"],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=ferr,
        )
        proc.stdout.close()  # the reader is gone before the first line: every write to stdout fails (EPIPE)
        assert proc.wait(300) == 0
    text = err.read_text()
    assert "Logging error" not in text and "Traceback" not in text, text
    assert sorted(r["seed"] for r in _rows(tmp_path / "res")) == ["0", "1"]


@pytest.mark.parametrize(
    ("var", "value"),
    [
        ("OMP_NUM_THREADS", "abc"),
        ("OMP_NUM_THREADS", "0"),
        ("OMP_NUM_THREADS", "-1"),
        ("OMP_NUM_THREADS", ""),
        ("OMP_NUM_THREADS", "4,0"),
        ("MKL_NUM_THREADS", "two"),
        ("OPENBLAS_NUM_THREADS", "0"),
    ],
)
def test_a_bad_thread_count_variable_is_one_line_exit_2(tmp_path, entry_point, var, value):
    """They were taken silently (OpenMP printed "Invalid value" twice and ran on its default)."""
    code, err = entry_point([f"results_dir={tmp_path}/res", "updates=5"], env={var: value})
    assert (code, err) == (
        2,
        f"error: {var}={value}: must be a whole number >= 1 (the threads of the math libraries)\n",
    )
    assert not (tmp_path / "res").exists()


def test_a_good_thread_count_variable_is_taken(tmp_path, entry_point):
    """A whole number, and OpenMP's list per nesting level, pass (``--cfg job`` shows the config, runs nothing)."""
    for value in ("2", "4,2"):
        code, err = entry_point(["--cfg", "job", f"results_dir={tmp_path}/res"], env={"OMP_NUM_THREADS": value})
        assert (code, err) == (0, ""), err
    assert os.environ["OMP_NUM_THREADS"] == "1"  # the calls' variables stay in their processes


def _file_size_limit() -> None:  # ``ulimit -f 8``: 8 KiB, less than the run's trace
    import resource

    resource.setrlimit(resource.RLIMIT_FSIZE, (8192, 8192))


@needs_fmnist
def test_a_result_file_over_the_file_size_limit_is_one_plain_line(tmp_path):
    """Under ``ulimit -f`` the trace cannot be written: one line naming the file and the limit, exit 1 (it was
    Python's ``[Errno 27] File too large: '<file>'``)."""
    args = [a for a in RUN if a not in ("updates=20", "eval_every=0.5")]
    args += ["updates=400", "eval_every=0.002", f"results_dir={tmp_path}"]
    proc = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=300, preexec_fn=_file_size_limit)
    lines = proc.stderr.splitlines()
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert lines[-1].startswith(f"error: {tmp_path}/adhoc/runs/"), lines
    assert lines[-1].endswith(": larger than the file size limit (ulimit -f)"), lines


@pytest.mark.parametrize(
    ("var", "said"),
    [
        ("TORCH_LOGS", "Invalid log settings: bogus, must be a comma separated list of fully qualified module names"),
        ("TORCH_DISTRIBUTED_DEBUG", "The value of TORCH_DISTRIBUTED_DEBUG must be OFF, INFO, or DETAIL."),
    ],
)
def test_a_bad_torch_variable_is_one_line_and_exit_2(tmp_path, var, said):
    """torch reads these as it loads: a bad value was torch's traceback (or a page of its help) and exit 1."""
    env = {**os.environ, var: "bogus"}
    proc = subprocess.run(
        [*RUN, f"results_dir={tmp_path}/res"], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr[-2000:]
    assert proc.stderr.startswith(f"error: torch cannot be loaded: {said}"), proc.stderr
    assert proc.stderr.rstrip().endswith(f"(set here: {var}=bogus)")
    assert not (tmp_path / "res").exists()
