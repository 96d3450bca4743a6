"""Every experiment config composes into valid settings for every profile; sweeps run, resume, and survive an
interruption (the async_methods experiment's own options: tests/test_async_methods.py)."""

import csv
import signal
import subprocess
import sys
import time

import pytest

from conftest import REPO
from experiments.errors import ConfigError
from experiments.reproduce import EXPERIMENTS
from experiments.settings.build import build_settings
from experiments.settings.compose import compose_jobs, job_cover, job_overrides, profile_sweep
from experiments.settings.preflight import check_problems

DATA = REPO / "data" / "FashionMNIST" / "raw"
needs_data = pytest.mark.skipif(not DATA.exists(), reason="Fashion-MNIST not staged (make data)")
FULL_CHECK = 200  # sweeps up to this many jobs are composed job by job in the test below


def test_every_experiment_file_is_in_the_reproduce_list():
    files = sorted(p.stem for p in (REPO / "conf" / "experiment").glob("*.yaml"))
    assert files == sorted(EXPERIMENTS)


@pytest.mark.parametrize("profile", ["smoke", "quick", "long", "paper"])
@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_every_job_of_every_profile_composes_and_validates(experiment, profile):
    """Every job of sweeps up to FULL_CHECK jobs; past that, a pairwise cover (every pair of values of two swept keys
    in some job: what a config error of two values together needs) -- `make reproduce` still checks every job
    before it runs any (experiments/settings/compose.py)."""
    base = [f"experiment={experiment}", f"profile={profile}"]
    sweep = profile_sweep(base)
    assert sweep, "each experiment declares a sweep for each profile"
    combos, total = job_overrides(base + sweep, multirun=True)
    assert total >= 1
    if total > FULL_CHECK:
        combos = job_cover(base + sweep, strength=2)
    built = []
    for cfg in compose_jobs(combos):
        assert cfg.experiment_id == experiment and cfg.profile == profile
        try:
            settings = build_settings(cfg)
        except ConfigError as exc:  # only a user-supplied file may be missing (rcv1 for the paper profile)
            assert cfg.problem.kind == "logreg_libsvm" and "problem.path" in str(exc)
        else:
            assert (settings.experiment_id, settings.profile) == (experiment, profile)
            built.append(settings)
    if profile != "paper" and DATA.exists():
        # the checks that need the data set's size: every delay and fault below the run's length in updates
        # (artificial_delay's smoke and quick sweeps asked for delays past their runs, and make reproduce skipped them)
        check_problems(built)


@pytest.mark.parametrize("strength", [1, 2])
def test_a_job_cover_holds_every_value_or_every_pair_of_values(strength):
    sweep = [
        "experiment=async_methods",
        "profile=long",
        "seed=0,1,2",
        "workers=8,32",
        "algorithm.lr_factor=0.5,1,2",
        "problem=logreg_fmnist,lenet5_fmnist",
        "compute_model=equal,sqrt,straggler8,lognormal1",
    ]
    full, total = job_overrides(sweep, multirun=True)
    cover = job_cover(sweep, strength)
    assert total == 144 and len(cover) < total and all(job in full for job in cover)
    keys = range(len(full[0]))

    def held(jobs):  # the (key, value) entries, or pairs of them, that these jobs hold
        if strength == 1:
            return {(i, job[i]) for job in jobs for i in keys}
        return {(i, job[i], j, job[j]) for job in jobs for i in keys for j in keys if i < j}

    assert held(cover) == held(full)
    assert len(cover) == 4 if strength == 1 else 12 <= len(cover) <= 20  # 4 x 3 pairs at least; greedy: close
    with pytest.raises(ValueError, match="strength=3"):
        job_cover(sweep, 3)


def test_a_job_cover_of_one_key_holds_its_values_and_checks_like_job_overrides():
    assert job_cover(["workers=1,2,4"], strength=2) == [["workers=1"], ["workers=2"], ["workers=4"]]
    assert job_cover([], strength=2) == [[]]
    with pytest.raises(ConfigError, match=r"\+foo=1: no such config key"):
        job_cover(["+foo=1,2", "workers=1,2"], strength=2)


# ---------------------------------------------------------------------- sweeps from the command line
def _sweep(tmp_path, *extra, timeout=300):
    cmd = [
        sys.executable,
        "-m",
        "experiments.run",
        "-m",
        "experiment=tau_threshold",
        "profile=smoke",
        f"results_dir={tmp_path}",
        "updates=150",
        *extra,
    ]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout)


def _rows(tmp_path, exp="tau_threshold"):
    with open(tmp_path / exp / "summary.csv") as f:
        return list(csv.DictReader(f))


@needs_data
def test_smoke_sweep_runs_and_resume_skips_finished_runs(tmp_path):
    first = _sweep(tmp_path)
    assert first.returncode == 0, first.stderr[-2000:]
    rows = _rows(tmp_path)
    assert sorted(r["tau"] for r in rows) == ["0", "32", "4"] and all(r["status"] == "ok" for r in rows)
    assert all(int(r["updates"]) == 150 for r in rows)
    for r in rows:
        run = tmp_path / "tau_threshold" / "runs" / r["run_id"]
        assert (run / "config.yaml").exists() and (run / "provenance.json").exists()
        assert (run / "trace.csv").read_text().startswith("run_id,problem,algorithm,engine,workers,delay_model")
    mtimes = {p: p.stat().st_mtime for p in (tmp_path / "tau_threshold" / "runs").glob("*/trace.csv")}
    second = _sweep(tmp_path)
    assert second.returncode == 0
    assert second.stderr.count("[skip]") == 3
    assert {p: p.stat().st_mtime for p in mtimes} == mtimes
    assert len(_rows(tmp_path)) == 3
    # a finished run whose stored config differs from today's (an experiment yaml edited since) runs again
    run = next(iter(mtimes)).parent
    cfg_path = run / "config.yaml"
    cfg_path.write_text(
        cfg_path.read_text()
        .replace("updates: 150", "updates: 149")
        .replace("profile: smoke", "profile: smoke\nprofiles_note: a key added later is no change")
    )
    again = _sweep(tmp_path)
    assert again.returncode == 0 and again.stderr.count("[skip]") == 2
    assert f"[rerun] tau_threshold/{run.name}: finished with another config (updates: 149 -> 150)" in again.stderr
    assert "updates: 150" in cfg_path.read_text()
    forced = _sweep(tmp_path, "force=true", "delay.tau=4")
    assert forced.returncode == 0 and "[skip]" not in forced.stderr
    assert len(_rows(tmp_path)) == 3  # the rerun replaced its row


@needs_data
def test_a_multirun_over_workers_writes_speedup_csv(tmp_path):
    cmd = [
        sys.executable,
        "-m",
        "experiments.run",
        "-m",
        "problem=logreg_fmnist",
        "algorithm=apam",
        "engine=simulated",
        "delay=timing",
        "workers=1,2",
        "epochs=0.5",
        f"results_dir={tmp_path}",
        "engine.costs.grad_s=0.001",
        "engine.costs.update_s=0.00001",
        "engine.costs.latency_s=0.00001",
        "engine.costs.overhead_s=0.00001",
    ]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    path = tmp_path / "adhoc" / "speedup.csv"
    assert f"wrote {path}" in proc.stderr
    with open(path) as f:
        rows = [r for r in csv.DictReader(f) if r["basis"] == "time_per_epoch"]
    speedup = {int(r["workers"]): float(r["speedup"]) for r in rows}
    # cycle = grad + 2 msg + update = 1.03 ms per gradient, master busy 0.02 ms: P = 2 halves the epoch
    assert speedup[1] == 1.0 and speedup[2] == pytest.approx(2.0, rel=0.02)


@needs_data
def test_an_interrupted_sweep_finishes_on_the_second_call_with_one_row_per_run(tmp_path):
    cmd = [
        sys.executable,
        "-m",
        "experiments.run",
        "-m",
        "experiment=tau_threshold",
        "profile=smoke",
        f"results_dir={tmp_path}",
        "updates=3000",
        "delay.tau=0,1,2",
    ]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    summary = tmp_path / "tau_threshold" / "summary.csv"
    deadline = time.time() + 120
    while time.time() < deadline and not (summary.exists() and len(_rows(tmp_path)) >= 1):
        time.sleep(0.2)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=60)
    assert proc.returncode != 0
    done_before = {r["run_id"]: r["status"] for r in _rows(tmp_path)}
    assert 1 <= len(done_before) <= 3
    again = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    rows = _rows(tmp_path)
    assert sorted(r["tau"] for r in rows) == ["0", "1", "2"]
    assert all(r["status"] == "ok" for r in rows)
    assert again.stderr.count("[skip]") == sum(1 for s in done_before.values() if s == "ok")


@needs_data
@pytest.mark.slow
@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_every_experiment_runs_under_smoke(tmp_path, experiment):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "experiments.reproduce",
            "--profile",
            "smoke",
            "--results-dir",
            str(tmp_path),
            "--only",
            experiment,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = (tmp_path / "REPORT.md").read_text()
    assert f"## {experiment}:" in report
