"""SIGTERM and SIGINT on every engine: the run is recorded (trace so far, staleness, summary row
``failed`` with ``interrupted (SIG...)``), in a sweep too, and the runner exits 128 + signal (143 / 130). The row
stops where the trace does: its updates, epochs and staleness histogram are those of the last evaluation."""

import re
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest

from conftest import REPO
from problems.data import data_root

needs_data = pytest.mark.skipif(
    not (data_root() / "FashionMNIST" / "raw").is_dir(), reason="Fashion-MNIST not staged (make data)"
)


WAIT_FOR_TRAINING_S = 420  # the longest a run may take to start training (calibration included) on a loaded machine
SIGNAL_TEST_TIMEOUT_S = WAIT_FOR_TRAINING_S + 180  # and then the run's stop and the checks


def _interrupt(tmp_path, sig, args, min_epochs=0.15, then=()):
    """Start a long run, send ``sig`` once it is past a few evaluation points, then each signal of ``then`` 0.15 s
    apart; returns the exit status and stderr."""
    err = tmp_path / "stderr.txt"
    flags = [a for a in args if a.startswith("-")]
    args = [a for a in args if not a.startswith("-")]
    cmd = [
        sys.executable,
        "-m",
        "experiments.run",
        *flags,
        "problem=logreg_fmnist",
        "epochs=200",
        "eval_every=0.05",
        "progress=true",
        f"results_dir={tmp_path}",
        *args,
    ]
    with open(err, "w") as ferr:
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=ferr)
    try:
        # the event is the progress bar past min_epochs; the deadline only guards a run that never gets there. A
        # loaded machine may first spend minutes measuring the session's calibration: signalled then, the run
        # stopped before its master existed ("interrupted (SIGTERM)", no "after N updates"), so it is waited for.
        deadline, reached = time.monotonic() + WAIT_FOR_TRAINING_S, False
        while time.monotonic() < deadline and proc.poll() is None and not reached:
            # the bar's total is the settings' epochs, a float: "0.30/200.0 epochs"
            done = [float(e) for e in re.findall(r"([0-9.]+)/200(?:\.0)? epochs", err.read_text())]
            reached = bool(done) and max(done) >= min_epochs  # past a few evaluation points (the progress bar says)
            time.sleep(0.2)
        assert proc.poll() is None, err.read_text()[-2000:]
        assert reached, f"no progress past {min_epochs} epochs in {WAIT_FOR_TRAINING_S} s:\n{err.read_text()[-2000:]}"
        proc.send_signal(sig)
        for later in then:
            time.sleep(0.15)
            if proc.poll() is None:
                proc.send_signal(later)
        proc.wait(90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, err.read_text()


def _check_recorded(tmp_path, sig, rows=1):
    assert not (tmp_path / ".hydra").exists()  # Hydra's empty job folders go, however the call ended
    summary = pd.read_csv(tmp_path / "adhoc" / "summary.csv")
    assert len(summary) == rows  # a sweep stops: the next job never ran
    row = summary.iloc[-1]
    assert row["status"] == "failed"
    assert row["message"].startswith(f"interrupted ({signal.Signals(sig).name}) after ")
    run_dir = tmp_path / "adhoc" / "runs" / row["run_id"]
    trace = pd.read_csv(run_dir / "trace.csv")
    assert len(trace) >= 2 and trace["updates"].iloc[-1] > 0
    # the row stops where the trace does, and its staleness is over exactly those updates
    assert row["updates"] == trace["updates"].iloc[-1]
    assert row["epochs"] == pytest.approx(trace["epoch"].iloc[-1])
    hist = pd.read_csv(run_dir / "staleness.csv")
    assert hist["count"].sum() == row["updates"]
    assert row["staleness_mean"] == pytest.approx((hist["staleness"] * hist["count"]).sum() / hist["count"].sum())
    assert (run_dir / "config.yaml").exists() and (run_dir / "provenance.json").exists()


@needs_data
@pytest.mark.timeout(SIGNAL_TEST_TIMEOUT_S)
@pytest.mark.parametrize("sig,code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_simulated_run_is_recorded_on_a_signal(tmp_path, sig, code):
    rc, err = _interrupt(tmp_path, sig, ["engine=simulated", "workers=4", "delay=timing"])
    assert rc == code, err[-2000:]
    _check_recorded(tmp_path, sig)
    run_id = pd.read_csv(tmp_path / "adhoc" / "summary.csv")["run_id"].iloc[-1]
    assert f"the run in flight ({run_id}) is recorded as failed" in err


def test_a_signal_between_runs_says_no_run_was_in_flight(tmp_path):
    """A stop signal while Hydra composes or starts a job (no run in flight): the message does not claim a
    recorded run, and the exit code is 128 + the signal's number."""
    code = (
        "import signal, sys\n"
        "import experiments.run as r\n"
        "from experiments.errors import Interrupted\n"
        "def stopped():\n"
        "    raise Interrupted(signal.SIGTERM)\n"
        "r._hydra_main = stopped\n"
        f"sys.argv = ['run', 'engine=simulated', 'updates=5', 'results_dir={tmp_path}']\n"
        "r.main()\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 143, proc.stderr
    assert "interrupted by SIGTERM between runs: no run was in flight" in proc.stderr
    assert "recorded as failed" not in proc.stderr


@needs_data
@pytest.mark.timeout(SIGNAL_TEST_TIMEOUT_S)
def test_simulated_sweep_is_recorded_on_sigterm_and_stops(tmp_path):
    rc, err = _interrupt(tmp_path, signal.SIGTERM, ["-m", "engine=simulated", "workers=4,8", "delay=timing"])
    assert rc == 143, err[-2000:]
    _check_recorded(tmp_path, signal.SIGTERM, rows=1)


@needs_data
@pytest.mark.slow
@pytest.mark.timeout(SIGNAL_TEST_TIMEOUT_S)
@pytest.mark.parametrize("engine", ["shared_memory", "distributed"])
def test_real_engine_exits_143_on_sigterm_and_records_the_run(tmp_path, engine):
    rc, err = _interrupt(tmp_path, signal.SIGTERM, [f"engine={engine}", "workers=2", "engine.pin_workers=false"])
    assert rc == 143, err[-2000:]
    _check_recorded(tmp_path, signal.SIGTERM)


@needs_data
@pytest.mark.timeout(SIGNAL_TEST_TIMEOUT_S)
def test_shared_memory_sweep_exits_143_on_sigterm(tmp_path):
    rc, err = _interrupt(
        tmp_path, signal.SIGTERM, ["-m", "engine=shared_memory", "workers=2,1", "engine.pin_workers=false"]
    )
    assert rc == 143, err[-2000:]
    _check_recorded(tmp_path, signal.SIGTERM, rows=1)


@needs_data
@pytest.mark.timeout(SIGNAL_TEST_TIMEOUT_S)
def test_a_burst_of_signals_to_a_real_engine_ends_with_the_first_ones_status_and_no_traceback(tmp_path):
    """SIGTERM, SIGINT, SIGTERM 0.15 s apart (an impatient user, a supervisor escalating): the first one decides
    (exit 143, the run recorded as interrupted by SIGTERM); the later ones neither replace it nor raise inside the
    recording or the exit hooks (it exited 130 with "Exception ignored in atexit callback")."""
    rc, err = _interrupt(
        tmp_path,
        signal.SIGTERM,
        ["engine=shared_memory", "workers=2", "engine.pin_workers=false"],
        then=(signal.SIGINT, signal.SIGTERM),
    )
    assert rc == 143, err[-2000:]
    assert "Traceback" not in err and "Exception ignored" not in err, err[-2000:]
    _check_recorded(tmp_path, signal.SIGTERM)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_after_every_run_was_recorded_lets_the_clean_up_finish_and_exits_128_plus_the_signal(sig):
    """Once the runs are recorded (experiments/stops.py ``after_the_runs``), a stop signal raises nothing inside the
    clean-up (engine helpers stopped at exit, finalizers): the clean-up goes on, then the process exits 128 + the
    signal's number, without a traceback."""
    code = (
        "import atexit, os, signal\n"
        "import experiments.run as r\n"
        "atexit.register(lambda: print('exit hook ran', flush=True))\n"
        "r.stops.after_the_runs()\n"
        f"os.kill(os.getpid(), {int(sig)})\n"
        "print('clean-up goes on', flush=True)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 128 + sig, proc.stderr
    assert proc.stdout.splitlines() == ["clean-up goes on", "exit hook ran"]
    assert "Traceback" not in proc.stderr
    name = signal.Signals(sig).name
    assert proc.stderr.splitlines() == [f"interrupted by {name} after every run was recorded: nothing was lost"]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_signal_while_the_runner_starts_is_not_lost(tmp_path, sig):
    """A signal in the runner's first half second (while torch and Hydra are imported; torch's import swallowed a
    KeyboardInterrupt, and the run then went on to the end with exit 0): exit 128 + the signal, and when it came
    before any run (as it does here unless the machine imports in well under half a second) nothing is written."""
    res = tmp_path / "res"
    proc = subprocess.Popen(
        [sys.executable, "-m", "experiments.run", "workers=2", "epochs=3", f"results_dir={res}"],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(0.5)
    proc.send_signal(sig)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 128 + sig, stderr[-2000:]
    assert f"interrupted by {signal.Signals(sig).name}" in stderr
    if "before any run" in stderr:
        assert not res.exists() or list(res.rglob("*.csv")) == []


def test_importing_the_runner_leaves_the_importers_signal_handlers_alone():
    """Only ``python -m experiments.run`` holds stop signals back while it loads; a process that imports the module
    (a notebook, pytest, a launcher's worker) keeps Ctrl-C and SIGTERM as they were."""
    code = (  # compared with the handlers before the import: a background job starts with SIGINT ignored
        "import signal\n"
        "before = [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)]\n"
        "import experiments.run\n"
        "assert [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)] == before\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_a_signal_during_the_interpreter_s_finalization_does_not_kill_a_finished_call():
    """A stop signal after the last exit hook, while Python finalizes (here sent by an object that module teardown
    deletes): every run was recorded, so the call ends as it would have (status 0); Python's finalization put the
    handler back to the default, which killed the process with status -15 and no line."""
    code = (
        "import os, signal\n"
        "import experiments.run as r\n"
        "class Late:\n"
        "    def __del__(self):\n"
        "        os.kill(os.getpid(), signal.SIGTERM)\n"
        "late = Late()\n"
        "r.stops.after_the_runs()\n"
        "print('done', flush=True)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert (proc.returncode, proc.stdout) == (0, "done\n"), proc.stderr
    assert "Traceback" not in proc.stderr


SWALLOW = """
import os, runpy, signal, sys, time
def swallowing(call):
    def wrapped(*args, **kwargs):  # the stop comes, and some code catches its exception and goes on
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
        except KeyboardInterrupt:
            pass  # as torch's import does
        return call(*args, **kwargs)
    return wrapped
PATCH
sys.argv = ["experiments.run", *sys.argv[1:]]
runpy.run_module("experiments.run", run_name="__main__", alter_sys=True)
"""
PATCHES = {
    "before the training": "import experiments.runner as r; r.resolve = swallowing(r.resolve)",
    "in a calibration measurement": (
        "import experiments.clock.calibration as c; entry = c.Calibration.entry\n"
        "c.Calibration.entry = lambda self, key, measure: entry(self, key, swallowing(measure))"
    ),
}


@pytest.mark.parametrize("where", list(PATCHES))
def test_a_stop_whose_exception_is_swallowed_still_stops_the_run(tmp_path, where):
    """The handler raises once and ignores later signals: a KeyboardInterrupt caught by other code (torch's import)
    lost the stop, and the run went on to its end with exit 0 (a reproduce stopped by SIGTERM then waited minutes
    for its sweep). Check points raise it again: the run is recorded as interrupted, exit 143; a measurement the
    stop came in is not stored."""
    cal = tmp_path / "calibration.json"
    args = ["problem=logreg_fmnist", "epochs=0.2", "problem.max_train=2000", f"results_dir={tmp_path / 'res'}"]
    args += ["engine.costs.grad_s=0.001"] if where == "before the training" else [f"engine.calibration={cal}"]
    code = SWALLOW.replace("PATCH", PATCHES[where])
    proc = subprocess.run([sys.executable, "-c", code, *args], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 143, proc.stderr[-3000:]
    assert "interrupted (SIGTERM)" in proc.stderr and "[ok]" not in proc.stderr, proc.stderr[-3000:]
    assert not cal.exists() or '"value"' not in cal.read_text()
