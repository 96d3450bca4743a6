"""A calibration you can see (experiments/clock/calibration.py, resolve.py, experiments/calibrate.py): the entries a
run uses are named with their file, age and worst spread, on stderr and in provenance.json; an entry whose spread (the
width of its median's confidence interval) is above SPREAD_BOUND is measured again in rounds pooled with its repeats
and, still above after POOL_ROUNDS, used with a warning; ``calibrate --only`` prints the entries of the experiments
named; an unusable calibration file is one line, never a traceback or a hang."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from algorithms import build_rule
from conftest import GRAD, LAT, OVER, REPO, QuadraticProblem, compose_cfg, needs_fmnist, pinned, settings_for
from experiments import calibrate
from experiments.clock import calibration as cal_mod
from experiments.clock import resolve as resolve_mod
from experiments.clock.calibration import Calibration, age_text, grad_key, used_line
from experiments.clock.resolve import RunCosts, resolve
from experiments.clock.spread import POOL_ROUNDS, SPREAD_BOUND, above_bound

FIXED = ["engine.costs.update_s=1e-6", f"engine.costs.latency_s={LAT}", f"engine.costs.overhead_s={OVER}"]
NARROW = [1e-3] * 5
STAMP = "2026-12-03T10:00:00Z"  # the fixture entries' ``measured`` time (any UTC stamp of that format)
FIRST = [0.7e-3, 0.9e-3, 1e-3, 1.05e-3, 1.3e-3]  # (1.3 - 0.7) / 1: 60 %
WIDE = [1e-3, 2e-3, 3e-3, 4e-3, 5e-3]  # (5 - 1) / 3: 133 %


def _file(tmp_path, problem, spread, samples=None):
    path = tmp_path / "cal.json"
    path.write_text(
        json.dumps(
            {
                "machine": {},
                "entries": {
                    grad_key(problem, 8): {
                        "value": GRAD,
                        "samples": samples or [GRAD],
                        "spread": spread,
                        "measured": STAMP,
                    }
                },
            }
        )
    )
    return path


def _p1(samples, calls):
    def p1(settings, transport, problem, b, handoff=None):
        calls.append(b)
        return list(samples), [], list(samples)

    return p1


def test_the_bound_covers_repeats_of_one_cost_not_distributions():
    assert 0.1 <= SPREAD_BOUND <= 0.5
    assert above_bound("grad|x|B=8", {"spread": SPREAD_BOUND + 0.01})
    assert not above_bound("grad|x|B=8", {"spread": SPREAD_BOUND})
    assert not above_bound("gradtimes|x|B=8", {"spread": 20.0}) and not above_bound("late|sleep|s=0.02", {"spread": 9})


def test_a_narrow_entry_is_used_as_it_is(tmp_path, monkeypatch, capsys):
    problem, calls = QuadraticProblem(), []
    path = _file(tmp_path, problem, 0.1)
    monkeypatch.setattr(resolve_mod, "p1_run_samples", _p1(NARROW, calls))
    costs = resolve(
        settings_for(pinned(["batch_size=8", *FIXED])), problem, build_rule("sgd", lr=0.1), Calibration(path)
    )
    assert calls == [] and costs.costs.grad == {8: GRAD} and "more repeats" not in capsys.readouterr().err
    used = costs.used
    assert used["file"] == str(path) and used["measured_oldest"] == STAMP
    assert used["worst_spread"] == 0.1 and used["spread_above_bound"] == []
    assert list(used["entries"]) == [grad_key(problem, 8)]


def test_a_wide_entry_is_measured_again_and_pooled(tmp_path, monkeypatch, capsys):
    problem, calls = QuadraticProblem(), []
    path = _file(tmp_path, problem, 0.6, FIRST)
    monkeypatch.setattr(resolve_mod, "p1_run_samples", _p1(NARROW, calls))
    costs = resolve(
        settings_for(pinned(["batch_size=8", *FIXED])), problem, build_rule("sgd", lr=0.1), Calibration(path)
    )
    err = [ln for ln in capsys.readouterr().err.strip().splitlines() if "costs this run lacks" not in ln]
    assert len(err) == 1 and "spread above the 25% bound (worst 60%" in err[0]
    assert err[0].endswith(
        f"measuring 5 more repeats of it, pooled with the stored ones (round 2 of at most {POOL_ROUNDS})"
    )
    entry = json.loads(path.read_text())["entries"][grad_key(problem, 8)]
    # the five stored and the five new: median 1e-3; ten samples' interval runs from the 2nd to the 9th (15 %)
    assert entry["samples"] == [*FIRST, *NARROW] and entry["value"] == 1e-3 == costs.costs.grad[8]
    assert entry["spread"] == pytest.approx(0.15) and entry["remeasured"] == 1
    assert entry["first_measured"] == STAMP and calls == [8]
    assert costs.used["spread_above_bound"] == [] and costs.used["entries"][grad_key(problem, 8)]["remeasured"] == 1


def test_still_wide_after_the_last_round_it_is_used_with_a_warning(tmp_path, monkeypatch, capsys):
    problem, calls = QuadraticProblem(), []
    path = _file(tmp_path, problem, 0.6)
    monkeypatch.setattr(resolve_mod, "p1_run_samples", _p1(WIDE, calls))
    settings = settings_for(pinned(["batch_size=8", *FIXED]))
    costs = resolve(settings, problem, build_rule("sgd", lr=0.1), Calibration(path))
    err = [ln for ln in capsys.readouterr().err.strip().splitlines() if "costs this run lacks" not in ln]
    more = POOL_ROUNDS - 1  # rounds pooled with the stored one
    assert [line[-15:] for line in err] == [f"{r} of at most {POOL_ROUNDS})" for r in range(2, POOL_ROUNDS + 1)]
    assert calls == [8] * more
    entry = json.loads(path.read_text())["entries"][grad_key(problem, 8)]
    assert len(entry["samples"]) == 1 + 5 * more and entry["remeasured"] == more
    assert costs.costs.grad == {8: entry["value"]}
    assert costs.used["spread_above_bound"] == [grad_key(problem, 8)]
    line = used_line(costs.used)
    assert line.startswith(f"calibration: {path}, measured ") and "WARNING: 1 above the 25% bound" in line
    # its rounds spent: the next run uses it without measuring again
    costs = resolve(settings, problem, build_rule("sgd", lr=0.1), Calibration(path))
    assert calls == [8] * more and "more repeats" not in capsys.readouterr().err
    assert costs.used["spread_above_bound"] == [grad_key(problem, 8)]


def test_an_older_files_remeasured_true_counts_no_pooled_round(tmp_path, monkeypatch, capsys):
    """Before pooling, ``"remeasured": true`` marked an entry measured once more from scratch (its 5 samples are
    that second round alone): it gets every pooled round, 25 repeats in all (it stopped at 20)."""
    problem, calls = QuadraticProblem(), []
    path = _file(tmp_path, problem, 1.33, WIDE)
    data = json.loads(path.read_text())
    data["entries"][grad_key(problem, 8)]["remeasured"] = True
    path.write_text(json.dumps(data))
    monkeypatch.setattr(resolve_mod, "p1_run_samples", _p1(WIDE, calls))
    resolve(settings_for(pinned(["batch_size=8", *FIXED])), problem, build_rule("sgd", lr=0.1), Calibration(path))
    err = [ln for ln in capsys.readouterr().err.strip().splitlines() if "costs this run lacks" not in ln]
    assert [line[-15:] for line in err] == [f"{r} of at most {POOL_ROUNDS})" for r in range(2, POOL_ROUNDS + 1)]
    entry = json.loads(path.read_text())["entries"][grad_key(problem, 8)]
    assert len(entry["samples"]) == 5 * POOL_ROUNDS and entry["remeasured"] == POOL_ROUNDS - 1


def test_the_spread_is_the_width_of_the_medians_confidence_interval():
    """Order statistics x_(j), x_(n+1-j) with coverage 1 - 2 P(Bin(n, 1/2) <= j - 1) >= 93.75 % (Conover 3.2)."""
    from experiments.clock.spread import SPREAD_LEVEL, median_interval, spread_of

    assert SPREAD_LEVEL == 0.9375
    assert median_interval([5.0, 1.0, 3.0, 2.0, 4.0]) == (1.0, 5.0) and spread_of([1, 2, 3, 4, 5]) == 4 / 3
    xs = [float(i) for i in range(1, 16)]
    assert median_interval(xs) == (4.0, 12.0) and spread_of(xs) == 1.0  # n = 15: the 4th to the 12th
    assert median_interval([float(i) for i in range(1, 11)]) == (2.0, 9.0)  # n = 10: coverage 97.9 %
    # a single outlier among fifteen repeats does not widen the interval
    assert spread_of([1.0] * 14 + [9.0]) == 0.0 and spread_of([1.0] * 4 + [9.0]) == 8.0
    with pytest.raises(ValueError, match="no samples"):
        median_interval([])


def test_a_wide_entry_found_pooled_by_another_process_is_used_as_stored(tmp_path):
    cal = Calibration(tmp_path / "cal.json")
    cal.entry("grad|x", lambda: WIDE)
    cal.pooling["grad|x"] = 1  # this process saw it after one pooled round; the file has none: someone else pooled?
    entry = cal.entry("grad|x", lambda: pytest.fail("measured again"))
    assert entry["samples"] == WIDE and "grad|x" not in cal.pooling


def test_age_text():
    now = time.time()
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now - 3 * 3600))
    assert age_text(stamp, now) == "3 h" and age_text("garbage") == "unknown"
    assert age_text(time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now - 5 * 86400)), now) == "5 days"


@needs_fmnist
def test_a_run_names_its_calibration_and_keeps_it_in_provenance(tmp_path, capfd):
    from experiments import runner

    cal = tmp_path / "cal.json"
    overrides = pinned(
        [
            f"results_dir={tmp_path}",
            "problem.max_train=256",
            "batch_size=8",
            "workers=1",
            "updates=20",
            f"engine.calibration={cal}",
            f"engine.costs.grad_s={GRAD}",
            f"engine.costs.latency_s={LAT}",
            f"engine.costs.overhead_s={OVER}",
        ]
    )
    assert runner.execute(compose_cfg(overrides), overrides) == "ok"
    lines = [line for line in capfd.readouterr().err.splitlines() if line.startswith(f"calibration: {cal}, measured")]
    assert len(lines) == 1 and "1 entry used, worst spread" in lines[0]
    prov = json.loads(next((tmp_path / "adhoc" / "runs").glob("*/provenance.json")).read_text())
    used = prov["calibration_used"]
    assert used["file"] == str(cal) and [k.split("|")[0] for k in used["entries"]] == ["update"]
    assert used["measured_newest"] and used["spread_bound"] == SPREAD_BOUND


# ---------------------------------------------------------------------- the command line
def _fake_resolve(settings, problem, rule, cal):
    """One entry per experiment (no measuring, no data): what calibrate does with what resolve used."""
    cal.used.clear()
    cal.entry(f"update|{settings.experiment_id}", lambda: [1e-6] * 5)
    return RunCosts(used=cal_mod.used_summary(cal.path, cal.used))


@pytest.fixture
def cheap_calibrate(monkeypatch):
    monkeypatch.setattr(calibrate, "resolve", _fake_resolve)
    monkeypatch.setattr(calibrate, "make_problem", lambda *a, **k: None)


def test_only_prints_the_entries_of_the_experiments_named(tmp_path, cheap_calibrate, capsys):
    path = tmp_path / "cal.json"
    path.write_text(
        json.dumps(
            {
                "machine": {},
                "entries": {
                    "update|lr_speedup": {
                        "value": 1e-6,
                        "samples": [1e-6],
                        "spread": 0.0,
                        "measured": STAMP,
                    }
                },
            }
        )
    )
    assert calibrate.main(["--file", str(path), "--only", "tau_threshold", "--progress", "off"]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[0] == f"# {path} (entries used by tau_threshold)"
    assert [line.split("\t")[0] for line in out.splitlines()[1:]] == ["update|tau_threshold"]
    assert sorted(json.loads(path.read_text())["entries"]) == ["update|lr_speedup", "update|tau_threshold"]
    assert err.splitlines()[-1].startswith(f"calibration: {path}, measured ")


def test_only_an_experiment_with_no_simulated_run_says_so(tmp_path, cheap_calibrate, capsys):
    """Long model_validation runs on the real engines only: the list of entries it uses is empty, and a line says
    why (it was an empty list with no word)."""
    path = tmp_path / "cal.json"
    args = ["--file", str(path), "--profile", "long", "--only", "model_validation", "--progress", "off"]
    assert calibrate.main(args) == 0
    out, err = capsys.readouterr()
    assert out.splitlines() == [f"# {path} (entries used by model_validation)"]
    assert err.splitlines() == [
        "model_validation: no run of profile long is on the simulated clock: nothing to measure for it"
    ]
    assert not path.exists()


def _entry(**fields) -> bytes:
    return json.dumps({"entries": {"grad|x|B=8": {"value": 1e-3, "samples": [1e-3], **fields}}}).encode()


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b'{"entries": {"k": {"val',
        b"[1, 2]",
        b"\xff\xfe",
        b'{"entries": 3}',
        # values a run would turn into negative, infinite or undefined times
        _entry(value=-0.001),
        b'{"entries": {"grad|x|B=8": {"value": NaN}}}',
        b'{"entries": {"grad|x|B=8": {"value": 1e400}}}',
        _entry(value=0.0, samples=[0.0]),  # a gradient that takes no time
        _entry(samples=[]),
        _entry(samples=[1e-3, -1.0]),
        _entry(spread="wide"),
        _entry(remeasured="yes"),
        _entry(measured=12345),
    ],
)
def test_a_damaged_file_is_set_aside_and_rebuilt_in_one_line(tmp_path, cheap_calibrate, capsys, content):
    path = tmp_path / "cal.json"
    path.write_bytes(content)
    assert calibrate.main(["--file", str(path), "--only", "tau_threshold", "--progress", "off"]) == 0
    err = capsys.readouterr().err
    assert "Traceback" not in err
    warned = [line for line in err.splitlines() if line.startswith("warning:")]
    assert len(warned) == 1 and warned[0].startswith(f"warning: {path}: damaged calibration file (")
    assert warned[0].endswith("; set aside as cal.json.damaged-1, its entries are measured again")
    assert (tmp_path / "cal.json.damaged-1").read_bytes() == content
    assert list(json.loads(path.read_text())["entries"]) == ["update|tau_threshold"]


@pytest.mark.parametrize("kind", ["fifo", "folder"])
def test_a_file_that_is_not_regular_is_one_line_and_exit_2(tmp_path, kind):
    path = tmp_path / "cal.json"
    os.mkfifo(path) if kind == "fifo" else path.mkdir()
    p = subprocess.run(
        [sys.executable, "-m", "experiments.calibrate", "--file", str(path), "--only", "tau_threshold"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.splitlines() == [
        f"error: {path}: the calibration file is "
        f"{'a named pipe' if kind == 'fifo' else 'a folder'}, not a regular file "
        "(engine.calibration / APAM_CALIBRATION must name a JSON file)"
    ]


@pytest.mark.parametrize("how", ["key", "env"])
def test_a_run_whose_calibration_is_not_a_regular_file_writes_nothing(tmp_path, how):
    """The check comes before the run's folder is made (experiments/settings/preflight.py ``check_calibration``):
    exit 2, one line, nothing under results_dir."""
    fifo = tmp_path / "cal.json"
    os.mkfifo(fifo)
    out = tmp_path / "res"
    key = [f"engine.calibration={fifo}"] if how == "key" else []
    env = dict(os.environ, **({"APAM_CALIBRATION": str(fifo)} if how == "env" else {}))
    p = subprocess.run(
        [sys.executable, "-m", "experiments.run", "engine=simulated", "updates=20", f"results_dir={out}", *key],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert p.returncode == 2, p.stderr
    assert p.stderr.splitlines() == [
        f"error: {fifo}: the calibration file is a named pipe, not a regular file "
        "(engine.calibration / APAM_CALIBRATION must name a JSON file)"
    ]
    assert not out.exists() or not any(out.rglob("*"))


def test_a_calibration_that_cannot_be_written_is_one_line(tmp_path, monkeypatch):
    """A missing entry to store in a folder that cannot be written (root ignores file modes: the lock's creation is
    made to fail): ConfigError naming the file, which the runner and calibrate print as one line, exit 2."""
    from filelock import FileLock

    from experiments.errors import ConfigError

    def denied(self, *a, **k):
        raise PermissionError(13, "Permission denied", self.lock_file)

    monkeypatch.setattr(FileLock, "acquire", denied)
    cal = Calibration(tmp_path / "cal.json")
    with pytest.raises(ConfigError, match=r"cal.json: cannot write this calibration file \(Permission denied\)"):
        cal.entry("update|x", lambda: [1e-6] * 5)


def test_calibrate_only_needs_an_experiment(capsys):
    with pytest.raises(SystemExit) as exc:
        calibrate.main(["--only"])
    assert exc.value.code == 2 and "--only: expected at least one argument" in capsys.readouterr().err


@needs_fmnist
@pytest.mark.timeout(120)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_calibrate_stopped_by_a_signal_exits_128_plus_it_and_says_what_it_kept(tmp_path, sig):
    """SIGTERM and SIGHUP are taken as Ctrl-C: exit 128 + the signal, one line that is true of the file."""
    path = tmp_path / "cal.json"
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "experiments.calibrate",
            "--file",
            str(path),
            "--only",
            "lr_speedup",
            "--progress",
            "off",
        ],
        cwd=REPO,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not path.exists() and time.monotonic() < deadline:  # a first entry measured
            time.sleep(0.2)
        p.send_signal(sig)
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 128 + sig, err
    assert err.splitlines()[-1] == (
        f"interrupted: entries measured so far are kept in {path}; a rerun measures only the missing ones"
    )


def test_a_lock_file_that_cannot_be_made_is_one_line_at_once():
    """A calibration under a folder of /proc: filelock retried its lock file for its 600 s timeout, as if another
    process held it (make reproduce and the run hung, silent); the lock file is opened first, and the error is
    immediate."""
    import time

    from experiments.errors import ConfigError

    cal = Calibration("/proc/1/apam-test-calibration.json")
    start = time.monotonic()
    with pytest.raises(ConfigError, match=r"apam-test-calibration.json: cannot write this calibration file"):
        cal.entry("update|x", lambda: [1e-6] * 5)
    assert time.monotonic() - start < 30


def test_a_first_measurement_is_said_once_before_it_starts(tmp_path, capsys):
    """An AllCNN run's first calibration measured for minutes without a line: one line before the first new entry,
    none for the next ones nor for entries already stored."""
    cal = Calibration(tmp_path / "cal.json")
    cal.entry("update|a", lambda: [1e-6] * 5)
    cal.entry("update|b", lambda: [1e-6] * 5)
    assert capsys.readouterr().err == (
        f"calibration: measuring the costs this run lacks into {tmp_path / 'cal.json'} (first: update|a) ...\n"
    )
    Calibration(tmp_path / "cal.json").entry("update|a", lambda: [2e-6] * 5)
    assert capsys.readouterr().err == ""
