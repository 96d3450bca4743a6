"""The tests never touch the user's calibration (tests/conftest.py gives the session a cache home of its own): a run
that measures a cost writes it under the cache home it is given, and the user's calibration folder is left as it
was, byte for byte."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import (
    GRAD,
    LAT,
    OVER,
    REAL_ENV,
    REPO,
    SESSION_CACHE,
    QuadraticProblem,
    pinned,
    plain_rule,
    recorder_for,
    run_engine,
    settings_for,
)
from experiments.clock import calibration as cal_mod


def _real_calibration_dir(monkeypatch) -> Path:
    """The folder of the user's calibration file, as the environment pytest started with names it."""
    for k, v in REAL_ENV.items():
        if v is None:
            monkeypatch.delenv(k, raising=False)
        else:
            monkeypatch.setenv(k, v)
    path = cal_mod.machine_path()
    monkeypatch.undo()
    return path.parent


def _snapshot(folder: Path) -> dict:
    """Every file below ``folder``: its bytes and modification time (empty when there is no folder)."""
    if not folder.is_dir():
        return {}
    return {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in sorted(folder.rglob("*")) if p.is_file()}


def test_the_session_has_a_cache_home_of_its_own():
    assert os.environ["XDG_CACHE_HOME"] == str(SESSION_CACHE) and "APAM_CALIBRATION" not in os.environ
    assert SESSION_CACHE in cal_mod.machine_path().parents
    # and every process a test starts inherits it
    out = subprocess.run(
        [sys.executable, "-c", "from experiments.clock.calibration import machine_path; print(machine_path())"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert SESSION_CACHE in Path(out.strip()).parents


@pytest.mark.parametrize("xdg", [True, False], ids=["XDG_CACHE_HOME", "HOME-only"])
def test_a_run_that_measures_writes_under_the_cache_home_it_is_given(tmp_path, monkeypatch, xdg):
    real_dir = _real_calibration_dir(monkeypatch)
    before = _snapshot(real_dir)
    home, cache = tmp_path / "home", tmp_path / "cache"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    if xdg:
        monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    else:
        monkeypatch.delenv("XDG_CACHE_HOME")
    expected = (cache if xdg else home / ".cache") / "apam-harness"
    # every cost fixed but the master's update: the run measures that one (cheap) and stores it
    settings = settings_for(
        pinned(
            [
                f"results_dir={tmp_path}",
                "batch_size=8",
                "algorithm=async_sgd",
                "algorithm.lr=0.05",
                "workers=1",
                "updates=20",
                f"engine.costs.grad_s={GRAD}",
                f"engine.costs.latency_s={LAT}",
                f"engine.costs.overhead_s={OVER}",
            ]
        )
    )
    problem = QuadraticProblem()
    result = run_engine(problem, plain_rule(settings), settings, recorder_for(problem, settings, "simulated"))
    assert result.updates == 20
    written = sorted(expected.glob("calibration-*.json"))
    assert len(written) == 1 and result.provenance["calibration"] == str(written[0])
    assert '"update|' in written[0].read_text()
    assert real_dir != expected and _snapshot(real_dir) == before


def test_an_empty_apam_calibration_is_refused_by_every_entry_point(tmp_path):
    """``APAM_CALIBRATION=`` (set, empty) meant this machine's own file, shared by every clone, where the user had
    meant another: a run, ``experiments.calibrate`` and ``experiments.reproduce`` refuse it in one line, exit 2,
    before anything is written (a tester's run wrote its measurements into the machine's file this way)."""
    env = dict(os.environ, APAM_CALIBRATION="")
    want = "error: APAM_CALIBRATION='': must name a file (unset it for this machine's file)"
    commands = [
        ["experiments.run", "updates=5", f"results_dir={tmp_path / 'a'}"],
        ["experiments.calibrate", "--only", "lr_speedup"],
        ["experiments.reproduce", "--profile", "smoke", "--only", "lr_speedup", "--results-dir", str(tmp_path / "b")],
    ]
    for cmd in commands:
        proc = subprocess.run(
            [sys.executable, "-m", *cmd], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
        )
        assert (proc.returncode, proc.stderr.strip().splitlines()) == (2, [want]), (cmd, proc.stderr[-2000:])
    assert list(tmp_path.iterdir()) == []


def test_a_process_a_test_starts_shares_the_session_s_cache_home():
    """A process that imports conftest (a spawned worker unpickling a test's function) uses the session's cache
    home: it made a folder of its own under /tmp that nothing removed (about 100 per `make test`)."""
    proc = subprocess.run(
        [sys.executable, "-c", "import conftest; print(conftest.SESSION_CACHE)"],
        cwd=REPO / "tests",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == str(SESSION_CACHE)
