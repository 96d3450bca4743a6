"""Sweeps through Hydra's launchers land exactly as serial ones, and `make reproduce JOBS=N` runs simulated-clock
jobs side by side while wall-clock jobs run alone (observed through the start/end events the jobs write)."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO
from experiments import reproduce
from problems.data import data_root

needs_data = pytest.mark.skipif(
    not (data_root() / "FashionMNIST" / "raw").exists() and not (REPO / "data" / "FashionMNIST" / "raw").exists(),
    reason="Fashion-MNIST not staged (make data)",
)
# fixed costs: a simulated clock independent of the machine and of what runs beside it
COSTS = [
    "engine.costs.grad_s=0.001",
    "engine.costs.update_s=0.00001",
    "engine.costs.latency_s=0.00001",
    "engine.costs.overhead_s=0.00001",
]
SWEEP = [
    "problem=logreg_fmnist",
    "algorithm=apam,async_sgd",
    "engine=simulated",
    "delay=timing",
    "workers=1,4",
    "epochs=0.25",
    "eval_every=0.125",
    *COSTS,
]


def _sweep(results_dir: Path, *extra: str, events: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, **({"APAM_JOB_EVENTS": str(events)} if events else {}))
    cmd = [sys.executable, "-m", "experiments.run", "-m", *SWEEP, f"results_dir={results_dir}", *extra]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300, env=env)


def _table(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return sorted(csv.DictReader(f), key=lambda r: [r.get("run_id", "")] + list(r.values()))


def _events(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _intervals(events: list[dict]) -> dict[str, tuple]:
    """run_id -> (start, end, clock, pid)."""
    start = {e["run_id"]: e for e in events if e["event"] == "start"}
    end = {e["run_id"]: e for e in events if e["event"] == "end"}
    assert set(start) == set(end)
    return {r: (start[r]["t"], end[r]["t"], start[r]["clock"], start[r]["pid"]) for r in start}


def _overlap(a: tuple, b: tuple) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def _assert_same_results(serial: Path, other: Path) -> None:
    """Every file a serial sweep wrote, equal in the other sweep (summary rows in any order; provenance aside)."""
    assert _table(other / "adhoc" / "summary.csv") == _table(serial / "adhoc" / "summary.csv")
    assert _table(other / "adhoc" / "speedup.csv") == _table(serial / "adhoc" / "speedup.csv")
    runs = sorted(p.relative_to(serial) for p in (serial / "adhoc" / "runs").glob("*/*") if p.name != "provenance.json")
    assert len(runs) == 4 * 4  # config.yaml, trace.csv, staleness.csv, summary_row.json of each run
    for rel in runs:
        text = (serial / rel).read_text()
        assert (other / rel).read_text() == text.replace(str(serial), str(other)), rel


@pytest.fixture(scope="module")
def serial_sweep(tmp_path_factory) -> Path:
    """The results folder of the sweep run serially (Hydra's basic launcher), shared by the launcher tests."""
    out = tmp_path_factory.mktemp("serial")
    proc = _sweep(out)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out


@needs_data
def test_a_joblib_sweep_lands_exactly_as_a_serial_one_and_runs_side_by_side(tmp_path, serial_sweep):
    events = tmp_path / "events.jsonl"
    par = _sweep(tmp_path / "parallel", "hydra/launcher=parallel", "hydra.launcher.n_jobs=2", events=events)
    assert par.returncode == 0, par.stderr[-2000:]
    _assert_same_results(serial_sweep, tmp_path / "parallel")
    rows = _table(tmp_path / "parallel" / "adhoc" / "summary.csv")
    assert len(rows) == 4 and all(r["status"] == "ok" and r["clock"] == "simulated" for r in rows)
    spans = _intervals(_events(events))
    assert len(spans) == 4 and len({s[3] for s in spans.values()}) == 2  # two worker processes
    assert f"wrote {tmp_path / 'parallel' / 'adhoc' / 'speedup.csv'}" in par.stderr  # written by the parent
    prov = json.loads(next((tmp_path / "parallel" / "adhoc" / "runs").glob("*/provenance.json")).read_text())
    assert prov["lock"]["file"] == "requirements-lock.txt" and len(prov["lock"]["sha256"]) == 64


@needs_data
@pytest.mark.slow
def test_a_submitit_local_sweep_lands_exactly_as_a_serial_one(tmp_path, serial_sweep):
    """Hydra's submitit launcher with its local executor (what `hydra/launcher=slurm` runs on a cluster)."""
    sub = _sweep(tmp_path / "submitit", "hydra/launcher=submitit_local", "hydra.launcher.timeout_min=10")
    assert sub.returncode == 0, sub.stderr[-2000:]
    _assert_same_results(serial_sweep, tmp_path / "submitit")
    assert list((tmp_path / "submitit" / ".hydra" / "sweep" / ".submitit").glob("*/*_log.out"))


def test_the_slurm_and_parallel_launcher_configs_compose():
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        slurm = compose(
            "config", overrides=["hydra/launcher=slurm", "hydra.launcher.partition=p"], return_hydra_config=True
        ).hydra.launcher
        par = compose("config", overrides=["hydra/launcher=parallel"], return_hydra_config=True).hydra.launcher
    assert slurm._target_ == "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher"
    assert (slurm.partition, slurm.cpus_per_task, slurm.nodes, slurm.tasks_per_node) == ("p", 1, 1, 1)
    assert par._target_ == "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher"
    assert par.n_jobs == 2


def test_plan_splits_a_mixed_experiment_by_clock_and_keeps_the_others_whole(tmp_path):
    plan = reproduce.plan_sweeps("paper_timing", "quick", tmp_path)
    base = ["experiment=paper_timing", "profile=quick", f"results_dir='{tmp_path}'"]
    assert plan == [
        (base + ["engine=simulated,simulated_distributed"], True),
        (base + ["engine=shared_memory,distributed"], False),
    ]
    assert reproduce.plan_sweeps("large_time_per_epoch", "quick", tmp_path) == [
        (["experiment=large_time_per_epoch", "profile=quick", f"results_dir='{tmp_path}'"], True)
    ]
    assert reproduce.plan_sweeps("model_validation", "quick", tmp_path) == [
        (["experiment=model_validation", "profile=quick", f"results_dir='{tmp_path}'"], False)
    ]
    assert reproduce.plan_sweeps("large_time_per_epoch", "quick", tmp_path, ["engine=shared_memory"])[0][1] is False


def test_a_profile_s_wall_block_sets_keys_of_its_wall_clock_sweep_only(tmp_path):
    """lr_speedup quick predicts P = 0..31 on the simulated clocks and measures P = 0, 1 (``wall: {workers: "0,1"}``);
    a key given on the command line wins over the block."""
    base = ["experiment=lr_speedup", "profile=quick", f"results_dir='{tmp_path}'"]
    assert reproduce.plan_sweeps("lr_speedup", "quick", tmp_path) == [
        (base + ["engine=simulated,simulated_dedicated"], True),
        (base + ["engine=shared_memory", "workers=0,1"], False),
    ]
    assert reproduce.plan_sweeps("lr_speedup", "quick", tmp_path, ["workers=3"]) == [
        (base + ["workers=3", "engine=simulated,simulated_dedicated"], True),
        (base + ["workers=3", "engine=shared_memory"], False),
    ]


@needs_data
@pytest.mark.slow
def test_reproduce_jobs_runs_simulated_jobs_side_by_side_and_wall_clock_jobs_alone(tmp_path):
    """lr_speedup (smoke, three seeds) with JOBS=2: its simulated jobs overlap, its shared_memory jobs overlap
    nothing; its sweeps run again one job at a time find every run finished (same run ids)."""
    from experiments import calibrate

    out, events = tmp_path / "res", tmp_path / "events.jsonl"
    assert calibrate.main(["--profile", "smoke", "--only", "lr_speedup"]) == 0
    os.environ["APAM_JOB_EVENTS"] = str(events)
    try:
        # nine simulated jobs (about a second each): more work than the stagger of the workers' start
        st = reproduce.run_experiment("lr_speedup", "smoke", out, False, jobs=2, extra=["seed=0,1,2"])
    finally:
        del os.environ["APAM_JOB_EVENTS"]
    assert st["status"] == "ran", st
    spans = _intervals(_events(events))
    sim = [s for s in spans.values() if s[2] == "simulated"]
    wall = [s for s in spans.values() if s[2] == "wall"]
    assert len(sim) == 9 and len(wall) == 6
    assert any(_overlap(a, b) for i, a in enumerate(sim) for b in sim[i + 1 :]), spans
    assert len({s[3] for s in sim}) == 2, spans  # two joblib worker processes
    for w in wall:
        assert not any(_overlap(w, o) for o in spans.values() if o is not w)
    traces = {p: p.stat().st_mtime_ns for p in (out / "lr_speedup" / "runs").glob("*/trace.csv")}
    assert len(traces) == 15
    assert reproduce.run_experiment("lr_speedup", "smoke", out, False, jobs=1, extra=["seed=0,1,2"])["status"] == "ran"
    assert {p: p.stat().st_mtime_ns for p in traces} == traces  # every run skipped: finished under the same id
    assert len(_table(out / "lr_speedup" / "summary.csv")) == 15


@needs_data
@pytest.mark.slow
def test_reproduce_runs_experiments_side_by_side_with_wall_clock_sweeps_alone(tmp_path):
    """Two experiments with JOBS=2 (experiments/sweeps/launch.py): their simulated jobs overlap each other, in two
    sweep processes of one job at a time; every wall-clock job overlaps nothing."""
    from experiments import calibrate
    from experiments.sweeps.launch import side_by_side

    out, events = tmp_path / "res", tmp_path / "events.jsonl"
    both = ["lr_speedup", "tau_threshold"]
    assert calibrate.main(["--profile", "smoke", "--only", *both]) == 0
    extra = {"lr_speedup": ["seed=0,1"], "tau_threshold": ["seed=0,1"]}
    os.environ["APAM_JOB_EVENTS"] = str(events)
    try:
        done = dict(
            side_by_side(
                both, lambda exp, jobs: reproduce.run_experiment(exp, "smoke", out, False, jobs, extra[exp]), 2
            )
        )
    finally:
        del os.environ["APAM_JOB_EVENTS"]
    assert {exp: st["status"] for exp, st in done.items()} == {exp: "ran" for exp in both}, done
    spans = list(_intervals(_events(events)).values())
    sim = [s for s in spans if s[2] == "simulated"]
    wall = [s for s in spans if s[2] == "wall"]
    assert sim and wall
    assert any(_overlap(a, b) for a in sim for b in sim if a[3] != b[3]), spans  # two sweeps' jobs at once
    for w in wall:
        assert not any(_overlap(w, o) for o in spans if o is not w)


class _Launcher:
    """A launcher that records the batches it is handed and returns ``statuses`` (one per job, in order): a return
    value, or an exception for a job that raised."""

    def __init__(self, *statuses) -> None:
        self.launched, self.statuses = [], list(statuses)

    def launch(self, batch, initial_job_idx):
        from hydra.core.utils import JobReturn, JobStatus

        self.launched.append(([list(job) for job in batch], initial_job_idx))
        out = []
        for job in batch:
            status = self.statuses.pop(0) if self.statuses else "ok"
            failed = isinstance(status, Exception)
            out.append(
                JobReturn(
                    overrides=list(job),
                    status=JobStatus.FAILED if failed else JobStatus.COMPLETED,
                    _return_value=status,
                )
            )
        return out


def test_the_sweeper_launches_the_checked_jobs_and_composes_only_unchecked_ones(monkeypatch):
    """hydra/sweeper=checked (the default) launches the jobs of job_overrides in Hydra's basic order, in batches of
    max_batch_size; it leaves out composing a batch first only when experiments.run's precheck has composed and
    checked this very command line."""
    from hydra import compose, initialize_config_dir
    from hydra.plugins.sweeper import Sweeper

    from experiments.sweeps import OUTCOME
    from hydra_plugins.apam_sweeper import ENV, CheckedSweeper, fingerprint

    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        sweeper = compose("config", return_hydra_config=True).hydra.sweeper
    assert sweeper._target_ == "hydra_plugins.apam_sweeper.CheckedSweeper"
    composed = []
    monkeypatch.setattr(
        Sweeper, "validate_batch_is_legal", lambda self, batch: composed.append([list(job) for job in batch])
    )
    monkeypatch.setattr(sys, "argv", ["run.py", "-m", "workers=1,2"])
    jobs = [["workers=1"], ["workers=2"]]

    def sweep(max_batch_size=None, *statuses):
        s = CheckedSweeper(max_batch_size=max_batch_size)
        s.launcher = _Launcher(*statuses)
        s.sweep(["workers=1,2"])
        return s.launcher.launched

    monkeypatch.setenv(ENV, fingerprint(["-m", "workers=1,2"]))
    assert sweep() == [(jobs, 0)] and composed == []
    assert OUTCOME == {"jobs": 2, "failed": 0, "diverged": 0}
    monkeypatch.setenv(ENV, fingerprint(["-m", "workers=1,4"]))  # checked another command line
    assert sweep() == [(jobs, 0)] and composed == [jobs]
    monkeypatch.delenv(ENV)
    assert sweep(1) == [([jobs[0]], 0), ([jobs[1]], 1)]  # batches of one, numbered as Hydra numbers jobs
    assert composed == [jobs, [jobs[0]], [jobs[1]]]
    # a job that returned "failed" or raised counts as failed: the entry point exits 1 on it
    sweep(None, "failed", RuntimeError("boom"))
    assert OUTCOME == {"jobs": 2, "failed": 2, "diverged": 0}
    sweep(None, "ok", "diverged")  # a diverged run is a result: counted apart, named in the sweep's last line
    assert OUTCOME == {"jobs": 2, "failed": 0, "diverged": 1}
    with pytest.raises(ValueError, match="hydra.sweeper.params"):
        CheckedSweeper(params={"workers": "1,2"})


@needs_data
@pytest.mark.timeout(300)
def test_a_sweep_with_a_failed_run_runs_the_others_and_exits_1(tmp_path):
    """The second job's worker is killed at its first iterate with engine.on_worker_loss=fail: its run is recorded as
    failed, the other runs to its end, and the sweep's exit code says a run failed."""
    cmd = [
        sys.executable,
        "-m",
        "experiments.run",
        "-m",
        "problem=logreg_fmnist",
        "engine=shared_memory",
        "workers=1",
        "updates=20",
        "engine.on_worker_loss=fail",
        "engine.fault.kill_worker=null,0",  # the first job without a fault; the second's worker dies at once
        f"results_dir={tmp_path}",
    ]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=280)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "1 of 2 runs failed" in proc.stderr
    rows = _table(tmp_path / "adhoc" / "summary.csv")
    assert sorted(r["status"] for r in rows) == ["failed", "ok"]
    failed = next(r for r in rows if r["status"] == "failed")
    assert failed["run_id"].startswith("engine.fault.kill-worker-0_") and failed["message"].startswith(
        "WorkerLost: worker 0"
    )


def _start_a_process_here(method):
    import os

    from experiments.engines.processes import process_context

    proc = process_context(method).Process(target=os.getpid)
    proc.start()
    proc.join(120)
    return proc.exitcode


@pytest.mark.timeout(300)
def test_a_real_engine_process_starts_inside_a_parallel_launchers_worker():
    """In a loky worker (hydra/launcher=parallel) the default start method is 'loky': a child started there was told
    to set it and died ("cannot find context for 'loky'"), so every job that measured a calibration entry failed."""
    from joblib import Parallel, delayed

    assert Parallel(n_jobs=2, backend="loky")(delayed(_start_a_process_here)(m) for m in ("spawn", "spawn")) == [0, 0]


@needs_data
@pytest.mark.timeout(300)
@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP"])
def test_a_stop_signal_to_a_parallel_sweep_records_every_run_in_flight_and_leaves_no_worker(tmp_path, sig):
    """SIGTERM or SIGHUP to the master of a parallel sweep (2 jobs at a time): each launcher worker records its run
    in flight and exits before the master does (one of the two was lost, killed by the master's exit part-way);
    loky's resource tracker is left alone (a SIGHUP passed on to it gave KeyError tracebacks), no worker is left,
    and stderr has no traceback or leaked-semaphore warning."""
    import signal
    import time

    cmd = [
        sys.executable,
        "-m",
        "experiments.run",
        "-m",
        "hydra/launcher=parallel",
        "hydra.launcher.n_jobs=2",
        "problem=logreg_fmnist",
        "engine=simulated",
        "delay=timing",
        "workers=1,2,4",
        "updates=100000000",
        f"results_dir={tmp_path}",
        *COSTS,
    ]
    err = tmp_path / "stderr.txt"
    with open(err, "w") as ferr:
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=ferr, start_new_session=True)
    try:
        deadline = time.monotonic() + 200
        while time.monotonic() < deadline and len(list(tmp_path.glob("adhoc/runs/*/config.yaml"))) < 2:
            assert proc.poll() is None, err.read_text()[-2000:]
            time.sleep(0.2)
        time.sleep(1.0)  # both runs past their start
        proc.send_signal(getattr(signal, sig))
        proc.wait(120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    text = err.read_text()
    assert proc.returncode == 128 + getattr(signal, sig), text[-2000:]
    assert "Traceback" not in text and "leaked" not in text, text[-3000:]
    rows = _table(tmp_path / "adhoc" / "summary.csv")
    assert sorted(r["workers"] for r in rows) == ["1", "2"]  # both runs in flight, the third never started
    assert all(r["status"] == "failed" and r["message"].startswith(f"interrupted ({sig})") for r in rows), rows
    # no launcher worker, forkserver or resource tracker left in the sweep's session (the trackers end when the
    # master's pipe closes, at its exit: a moment later)
    deadline, left = time.monotonic() + 5, ["?"]
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = subprocess.run(["pgrep", "-a", "-s", str(proc.pid)], capture_output=True, text=True).stdout.split("\n")
        left = [p for p in left if p]
    assert left == [], left
