"""The real engines (shared_memory, distributed): exact update counts, staleness from versions, the serial loop at
P = 1 bit for bit, the wall clock without evaluation, worker loss (async goes on, sync fails), Ctrl-C/SIGTERM,
and no process left behind. Engine-level tests use the forkserver start method (workers fork in milliseconds);
the command-line tests use the default (spawn)."""

from __future__ import annotations

import multiprocessing
import os
import re
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest
import torch

from algorithms import build_rule
from conftest import (
    HAS_FMNIST,
    REPO,
    QuadraticProblem,
    child_pids,
    pinned,
    recorder_for,
    run_engine,
    serial_amsgrad,
    settings_for,
)
from experiments.engines import dist_group, dist_wire, distributed, shared_memory, shm_handoff
from experiments.engines.driver import drive
from experiments.engines.loopback import LoopbackTransport
from experiments.engines.timeline import WallClock
from experiments.engines.workers import FaultPlan, WorkerSpec, worker_cpus, worker_seed
from experiments.training.recorder import Recorder

ENGINES = {"shared_memory": shared_memory, "distributed": distributed}


class SlowEvalQuadratic(QuadraticProblem):
    """QuadraticProblem whose full evaluation takes at least ``eval_s`` seconds (the wall clock must not count it);
    ``spent`` holds each evaluation's measured seconds (in the process that evaluates: the master)."""

    def __init__(self, eval_s: float = 0.25) -> None:
        super().__init__()
        self.eval_s = eval_s
        self.spent: list[float] = []

    def evaluate(self, x):
        t0 = time.perf_counter()
        time.sleep(self.eval_s)
        out = super().evaluate(x)
        self.spent.append(time.perf_counter() - t0)
        return out


class FailingQuadratic(QuadraticProblem):
    """QuadraticProblem whose minibatch gradient raises once the iterate has moved far enough (in the worker).
    d = 64: the distributed engine carries the error text in the gradient message (4 d bytes)."""

    def __init__(self) -> None:
        super().__init__(d=64)

    def loss_grad(self, x, idx):
        if float(x.mean()) < 2.0:
            raise ValueError("boom at a small iterate")
        return super().loss_grad(x, idx)


class TimedRecorder(Recorder):
    """A Recorder that notes ``time.monotonic()`` at the run's first evaluation point (training starts after it)."""

    def record(self, *args, **kwargs):
        if not hasattr(self, "t_first"):
            self.t_first = time.monotonic()
        return super().record(*args, **kwargs)


def end_after_loss(monkeypatch, extra: int) -> list:
    """From the moment the driver handles a lost worker, let it hand out only ``extra`` more gradients: the run ends
    on that event, whenever the machine lets it happen. Returns a list that receives the master's version then."""
    from experiments.engines import driver

    real, lost = driver.MasterLoop._lose, []

    def lose(self, ev):
        real(self, ev)
        lost.append(self.master.version)
        self.max_updates = min(self.max_updates, self.master.version + extra)

    monkeypatch.setattr(driver.MasterLoop, "_lose", lose)
    return lost


def run_real(tmp_path, engine: str, overrides: list[str], problem=None):
    """A run of real engine ``engine`` (forkserver workers) of ``problem`` (default a QuadraticProblem) at batch 8,
    async SGD with constant step 0.05 (uncapped), equal constant compute times (:func:`conftest.pinned`), then
    ``overrides``; checks no worker process is left. Returns (EngineResult, Recorder, RunSettings)."""
    problem = problem or QuadraticProblem()
    settings = settings_for(
        pinned(
            [
                f"results_dir={tmp_path}",
                f"engine={engine}",
                "++engine.start_method=forkserver",
                "engine.timeout_s=30",
                "batch_size=8",
                "algorithm=async_sgd",
                "algorithm.lr=0.05",
                "algorithm.lr_schedule=constant",
                "algorithm.alpha_max=null",
                "eval_every=0.5",
                *overrides,
            ]
        )
    )
    lr = settings.algorithm.hyperparameters["lr"]
    if settings.algorithm.rule == "sgd":  # this module's build_rule (a test may wrap it)
        rule = build_rule("sgd", lr=lr)
    else:
        rule = build_rule("amsgrad", variant="torch", lr=lr)
    rec = recorder_for(problem, settings, "wall", TimedRecorder)
    result = run_engine(problem, rule, settings, rec)
    assert_no_leftovers(ENGINES[engine].LAST_WORKER_PIDS)
    return result, rec, settings


def descendants(pid: int) -> set[int]:
    """Every process below ``pid`` now: children, their children (forkserver workers), ..."""
    out, todo = set(), [pid]
    while todo:
        kids = child_pids(todo.pop()) - out
        out |= kids
        todo.extend(kids)
    return out


def pid_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:  # a zombie still answers kill(0); it is gone once reaped
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1].startswith("Z")
    except OSError:
        return True


def assert_no_leftovers(pids) -> None:
    assert pids, "the engine reported no worker processes"
    assert multiprocessing.active_children() == []
    deadline = time.monotonic() + 5
    while not all(map(pid_gone, pids)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(map(pid_gone, pids)), [p for p in pids if not pid_gone(p)]


def gap(problem, rows, i):
    f_star = problem.optimum()[0]
    return rows[i]["train_loss"] - f_star


# ---------------------------------------------------------------------- protocols
@pytest.mark.timeout(120)
@pytest.mark.parametrize("engine", ENGINES)
def test_async_applies_exactly_k_gradients_and_is_stale(tmp_path, engine):
    problem = QuadraticProblem()
    result, rec, _ = run_real(tmp_path, engine, ["workers=2", "updates=300"], problem)
    assert (result.status, result.message) == ("ok", "")
    assert result.updates == result.gradients == 300
    assert sum(result.histogram.values()) == 300
    assert result.samples == 300 * 8
    # both workers start at version 0, so the second gradient applied is at least 1 update stale
    assert max(result.histogram) >= 1
    assert rec.rows[-1]["updates"] == 300 and rec.rows[-1]["clock"] == "wall"
    assert gap(problem, rec.rows, -1) < 0.05 * gap(problem, rec.rows, 0)
    per_worker = rec.master.per_worker
    assert set(per_worker) == {0, 1} and sum(c for _, c in per_worker.values()) == 300


@pytest.mark.timeout(120)
@pytest.mark.parametrize("engine", ENGINES)
def test_sync_averages_p_gradients_per_update_and_is_never_stale(tmp_path, engine):
    problem = QuadraticProblem()
    result, rec, _ = run_real(
        tmp_path, engine, ["workers=2", "updates=120", "algorithm=sync_amsgrad", "algorithm.lr=0.1"], problem
    )
    assert result.status == "ok"
    assert result.updates == 120 and result.gradients == 240
    assert dict(result.histogram) == {0: 120}
    assert result.samples == 120 * 8  # the global batch of 8 split 4 + 4
    assert gap(problem, rec.rows, -1) < 0.05 * gap(problem, rec.rows, 0)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("engine", ENGINES)
def test_one_worker_is_the_serial_loop_bit_for_bit(tmp_path, engine):
    """P = 1: worker 0 draws the serial loop's batches (same seed) and the master applies every gradient at the
    version it was computed at, so x equals the single-process AMSGrad loop exactly."""
    problem = QuadraticProblem()
    result, rec, settings = run_real(
        tmp_path, engine, ["workers=1", "epochs=2", "algorithm=apam", "algorithm.lr=0.01"], problem
    )
    x = serial_amsgrad(problem, settings.seed, epochs=2, lr=0.01)
    assert result.updates == 64 and result.samples == 512
    assert dict(result.histogram) == {0: 64}
    assert torch.equal(rec.master.x, x)


@pytest.mark.timeout(120)
def test_epochs_stop_hands_out_exactly_the_samples_asked(tmp_path):
    result, rec, _ = run_real(tmp_path, "shared_memory", ["workers=2", "epochs=1.5"])
    assert result.updates == result.gradients == 48  # 1.5 x 256 / 8
    epochs = [r["epoch"] for r in rec.rows]
    assert epochs[-1] == 1.5 and epochs == sorted(epochs) and len(epochs) >= 4


@pytest.mark.timeout(120)
def test_wall_clock_excludes_evaluation(tmp_path):
    """Four evaluations of at least 0.25 s each (their time measured): the clock must not see them -- it stays
    below their total, which 24 updates of microsecond gradients cannot reach however loaded the machine."""
    problem = SlowEvalQuadratic(0.25)
    spent = problem.spent
    result, rec, _ = run_real(
        tmp_path, "shared_memory", ["workers=2", "updates=24", "engine.warmup_updates=0", "eval_every=0.25"], problem
    )
    updates = [r["updates"] for r in rec.rows]  # an evaluation waits for the gradient still being computed
    assert len(updates) == len(spent) == 4 and updates[0] == 0 and updates[-1] == 24
    assert all(0 <= u - 8 * i <= 1 for i, u in enumerate(updates))
    assert sum(spent) >= 1.0
    assert 0 < result.time_s < sum(spent)
    times = [r["time_s"] for r in rec.rows]
    assert times == sorted(times) and times[0] == 0.0


@pytest.mark.timeout(180)
@pytest.mark.parametrize("engine", ENGINES)
def test_snapshot_evaluation_keeps_the_steady_state_staleness_that_draining_lowers(tmp_path, engine):
    """P = 4 equal emulated workers: in steady state every gradient has staleness P - 1 = 3. Evaluating every 8
    updates by draining restarts the pipeline each time (staleness 0, 1, 2 after it); snapshots keep the workers
    going, so only the start ramps up. Both evaluate at the same points (the snapshot's copy is the x of then)."""
    common = [
        "workers=4",
        "updates=96",
        "engine.warmup_updates=0",
        "eval_every=0.25",
        "engine.compute=emulated",
        "engine.compute_base_s=0.004",
    ]
    snap, rec_s, _ = run_real(tmp_path / "s", engine, common + ["engine.evaluation=snapshot"])
    drain, rec_d, _ = run_real(tmp_path / "d", engine, common + ["engine.evaluation=drain"])
    assert [r["updates"] for r in rec_s.rows] == [0, 8, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96]
    assert [r["updates"] for r in rec_d.rows][1:] >= [8, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96]
    tau_s = sum(k * n for k, n in snap.histogram.items()) / snap.updates
    tau_d = sum(k * n for k, n in drain.histogram.items()) / drain.updates
    assert tau_s > 2.8 and tau_d < 2.5, (tau_s, tau_d)  # snapshot: (0+1+2+3*93)/96 = 2.94; drain: (0+1+2+3*5)/8 = 2.25
    assert [r["time_s"] for r in rec_s.rows] == sorted(r["time_s"] for r in rec_s.rows)
    for rows in (rec_s.rows, rec_d.rows):  # every row evaluates the x of its own update count
        losses = [r["train_loss"] for r in rows]
        assert losses[0] > losses[-1] and len(set(losses)) == len(losses)


def test_recorder_snapshots_copy_x_and_flush_in_order_keeping_rows_before_a_divergence():
    import math as _m

    from experiments.training.recorder import Diverged

    problem = QuadraticProblem()
    rec = Recorder(
        problem, {"run_id": "t"}, eval_every=0.5, total_epochs=None, f_star=None, clock="wall", progress=False
    )
    x = problem.init_params(0)
    direct = problem.evaluate(x)["train_loss"]
    rec.snapshot(x, 0, 0, 0, 0.0, (0.0, 0))
    x += 1.0  # the master updates x in place: the snapshot must not see it
    rec.snapshot(x, 128, 16, 16, 0.1, (1.0, 1), overruns=2)
    assert rec.rows == [] and rec.pending_bytes == 2 * x.numel() * 4 and not rec.due(64)
    rows = rec.flush()
    assert [r["updates"] for r in rows] == [0, 16] and rows[0]["train_loss"] == direct
    assert rows[1]["overruns"] == 2 and rows[1]["train_loss"] == problem.evaluate(x)["train_loss"]
    assert rec.pending_bytes == 0 and rec.flush() == []
    rec.snapshot(x * _m.inf, 256, 32, 32, 0.2, (1.0, 1))
    rec.snapshot(x, 384, 48, 48, 0.3, (1.0, 1))
    with pytest.raises(Diverged):
        rec.flush()
    assert [r["updates"] for r in rec.rows] == [0, 16, 32] and rec.pending_bytes == 0


# ---------------------------------------------------------------------- faults
@pytest.mark.timeout(120)
@pytest.mark.parametrize("engine", ENGINES)
def test_async_goes_on_without_a_killed_worker(tmp_path, engine, monkeypatch):
    """Worker 1 dies when handed update 100's iterate (when it notices is up to the scheduler); the run goes on for
    100 more updates after the master has handled the loss."""
    lost = end_after_loss(monkeypatch, 100)
    result, rec, _ = run_real(
        tmp_path, engine, ["workers=2", "updates=1000000", "engine.fault.kill_worker=1", "engine.fault.at_update=100"]
    )
    assert result.status == "ok"
    assert f"worker 1 lost, noticed at update {lost[0]} (killed by SIGKILL)" in result.message and lost[0] >= 100
    assert "finished with 1 of 2 workers" in result.message
    assert result.updates == result.gradients == lost[0] + 100  # the lost gradient was handed to worker 0
    counts = {w: c for w, (_, c) in rec.master.per_worker.items()}
    assert counts[1] >= 1 and counts[0] + counts[1] == result.updates


@pytest.mark.timeout(120)
@pytest.mark.parametrize("engine", ENGINES)
def test_async_fails_on_worker_loss_when_configured(tmp_path, engine):
    """The loss ends the run (the update count is only a bound it never reaches), whenever it is noticed."""
    result, rec, _ = run_real(
        tmp_path,
        engine,
        [
            "workers=2",
            "updates=1000000",
            "engine.fault.kill_worker=0",
            "engine.fault.at_update=50",
            "engine.on_worker_loss=fail",
        ],
    )
    assert result.status == "failed"
    assert result.message.startswith("WorkerLost: worker 0 lost") and "on_worker_loss=fail" in result.message
    assert 50 <= result.updates < 1000000
    assert rec.rows[-1]["updates"] == result.updates  # the master's state at the failure is evaluated


@pytest.mark.timeout(120)
@pytest.mark.parametrize("engine", ENGINES)
def test_sync_fails_at_once_when_a_worker_dies(tmp_path, engine):
    result, rec, _ = run_real(
        tmp_path,
        engine,
        [
            "workers=2",
            "updates=400",
            "algorithm=sync_amsgrad",
            "engine.fault.kill_worker=1",
            "engine.fault.at_update=40",
        ],
    )
    assert time.monotonic() - rec.t_first < 30  # from the first evaluation: within engine.timeout_s=30, at once
    assert result.status == "failed"
    assert "worker 1 lost, noticed at update 40" in result.message and "sync round" in result.message
    assert result.updates == 40 and result.gradients == 80  # 40 whole rounds; the broken one is not applied


@pytest.mark.timeout(120)
def test_shared_memory_cuts_off_a_silent_worker_after_the_timeout(tmp_path, monkeypatch):
    """Worker 0 stops answering when handed update 60's iterate; worker 1 trains on until the master cuts worker 0
    off, then 50 more updates."""
    lost = end_after_loss(monkeypatch, 50)
    result, _, _ = run_real(
        tmp_path,
        "shared_memory",
        [
            "workers=2",
            "updates=1000000",
            "engine.timeout_s=1.5",
            "engine.fault.kill_worker=0",
            "engine.fault.at_update=60",
            "engine.fault.mode=hang",
        ],
    )
    assert result.status == "ok" and result.updates == lost[0] + 50
    assert "worker 0 lost" in result.message and "engine.timeout_s=1.5" in result.message
    # the wait for the silent worker is real time: most of the 1.5 s (an evaluation inside it is not timed, and the
    # timeout counts from the hand-off, a moment before the master's clock resumes: 1.4985 s was measured)
    assert result.time_s >= 1.0


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")
@pytest.mark.parametrize("handoff", ["block", "spin"])
def test_shared_memory_run_leaves_no_file_descriptor_open(tmp_path, handoff):
    """A run opens pipes, wake-up eventfds (plain ints: nothing closes them but the transport), an epoll descriptor
    and shared tensors' descriptors; after it none is left open (a sweep makes hundreds of runs in one process)."""
    if handoff == "spin" and not shm_handoff.spin_allowed():
        pytest.skip("spin needs x86-64")
    run = ["workers=2", "updates=20", f"engine.handoff={handoff}"]
    run_real(tmp_path, "shared_memory", run)  # the forkserver's own socket, imports
    before = set(os.listdir("/proc/self/fd"))
    run_real(tmp_path, "shared_memory", run)
    assert set(os.listdir("/proc/self/fd")) - before == set()


FAKE_CLOCK = [0]  # 2 ms steps of the driver's monotonic clock (test_a_silent_worker_is_cut_off...)


class SilentWorkerTransport(LoopbackTransport):
    """The loopback transport whose worker 0 never answers, 2 ms a wait; it records the timeout of every wait."""

    def __init__(self, d: int) -> None:
        super().__init__(d)
        self.timeouts = []

    def issue(self, w, x, version):
        if w != 0:
            super().issue(w, x, version)

    def wait(self, timeout):
        self.timeouts.append(timeout)
        FAKE_CLOCK[0] += 1  # 2 ms pass (the driver's clock in the test below)
        return super().wait(timeout)


def test_a_silent_worker_is_cut_off_at_its_deadline_while_the_others_keep_arriving(tmp_path, monkeypatch):
    """The driver takes the earliest deadline as the first entry of its deadline dict (insertion order): the silent
    worker's, issued first and never renewed, so the waits' timeouts count down to its cut-off while the others are
    answered, and it is lost then (300 updates in: 0.3 s at two updates per 2 ms wait), not when the others run out
    of work at update 1000. The driver's clock is the transport's: each wait advances it by 2 ms, whatever the
    machine does meanwhile."""
    from types import SimpleNamespace

    from experiments.engines import driver as driver_mod

    monkeypatch.setattr(
        driver_mod, "time", SimpleNamespace(monotonic=lambda: FAKE_CLOCK[0] * 0.002, perf_counter=time.perf_counter)
    )
    FAKE_CLOCK[0] = 0
    problem = QuadraticProblem()
    settings = settings_for(
        [
            f"results_dir={tmp_path}",
            "engine=shared_memory",
            "workers=3",
            "updates=1000",
            "engine.timeout_s=0.3",
            "engine.warmup_updates=0",
            "batch_size=8",
            "algorithm=async_sgd",
            "algorithm.lr=0.001",
            "algorithm.lr_schedule=constant",
            "algorithm.alpha_max=null",
            "eval_every=1e9",
        ]
    )
    assert settings.worker_batches == [8, 8, 8]  # what the driver hands each worker
    rec = recorder_for(problem, settings, "wall")
    transport = SilentWorkerTransport(problem.dim)
    result = drive(problem, build_rule("sgd", lr=0.001), settings, rec, transport)
    assert result.updates == 1000 and result.gradients == 1000
    lost_at = int(
        re.search(
            r"worker 0 lost, noticed at update (\d+) \(sent no gradient within engine.timeout_s=0.3 s\)", result.message
        ).group(1)
    )
    assert lost_at == 300  # 150 waits of 2 ms (two arrivals each) to the 0.3 s deadline
    t = transport.timeouts
    cut = next(i for i in range(1, len(t)) if t[i] > t[i - 1])  # the first wait after the cut-off
    assert cut > 20 and t[cut - 1] < 0.02  # one deadline counted down to its end ...
    assert min(t[cut:-1]) > 0.2  # ... then the answering workers' deadlines, renewed at every answer


@pytest.mark.timeout(120)
def test_distributed_fails_within_the_timeout_when_a_worker_is_silent(tmp_path):
    """The silence ends the run (the update count is only a bound it never reaches): soon after
    engine.timeout_s=2, counted from the first evaluation (not from the processes' start-up)."""
    result, rec, _ = run_real(
        tmp_path,
        "distributed",
        [
            "workers=2",
            "updates=1000000",
            "engine.timeout_s=2",
            "engine.fault.kill_worker=0",
            "engine.fault.at_update=60",
            "engine.fault.mode=hang",
        ],
    )
    assert result.status == "failed"
    assert "worker 0" in result.message and "engine.timeout_s=2" in result.message
    assert time.monotonic() - rec.t_first < 25


@pytest.mark.timeout(120)
@pytest.mark.parametrize("engine", ENGINES)
def test_an_error_in_a_worker_ends_the_run_with_its_message(tmp_path, engine):
    with pytest.raises(RuntimeError, match=r"worker [01] failed: ValueError: boom at a small iterate"):
        run_real(tmp_path, engine, ["workers=2", "updates=400", "algorithm.lr=0.2"], FailingQuadratic())
    assert_no_leftovers(ENGINES[engine].LAST_WORKER_PIDS)


# ---------------------------------------------------------------------- pieces
def test_wall_clock_pauses_and_starts_late(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(time, "perf_counter", lambda: now[0])
    c = WallClock()
    now[0] = 105.0
    assert c.elapsed() == 0.0 and not c.started
    c.start()
    now[0] = 107.0
    c.pause()
    now[0] = 150.0
    assert c.elapsed() == 2.0
    c.resume()
    now[0] = 151.5
    assert c.elapsed() == 3.5


def test_worker_streams_and_batches():
    assert worker_seed(7, 0) == 7 and len({worker_seed(7, w) for w in range(64)}) == 64
    assert settings_for(["workers=3", "batch_size=10", "algorithm=sync_amsgrad"]).worker_batches == [4, 3, 3]
    full = settings_for(["workers=3", "batch_size=10", "algorithm=sync_amsgrad", "algorithm.sync_batch=full"])
    assert full.worker_batches == [10, 10, 10]
    assert settings_for(["workers=2", "batch_size=10"]).worker_batches == [10, 10]
    spec = WorkerSpec.of(
        settings_for(["engine=shared_memory", "workers=3", "batch_size=10", "seed=7", "algorithm=sync_amsgrad"]), 2
    )
    assert (spec.worker, spec.batch, spec.seed) == (2, 3, worker_seed(7, 2))


def test_worker_cpus_one_block_each_or_none():
    allowed = sorted(os.sched_getaffinity(0))
    n = len(allowed)
    assert worker_cpus(n, 1) == [(c,) for c in allowed]
    assert worker_cpus(n + 1, 1) == [None] * (n + 1)  # more workers than CPUs: no pinning
    assert worker_cpus(1, n) == [tuple(allowed)]
    assert worker_cpus(2, 1, enabled=False) == [None, None]
    settings = settings_for(["engine=shared_memory", "workers=1"])
    assert WorkerSpec.of(settings, 0).cpus is None  # pinned only where the master starts the worker itself
    assert WorkerSpec.of(settings, 0, pin=True).cpus == (allowed[0],)
    unpinned = settings_for(["engine=shared_memory", "workers=1", "engine.pin_workers=false"])
    assert WorkerSpec.of(unpinned, 0, pin=True).cpus is None  # engine.pin_workers=false: never


def test_fault_plan_from_the_settings():
    from experiments.errors import ConfigError

    settings = settings_for(
        ["engine=shared_memory", "workers=2", "engine.fault.kill_worker=1", "engine.fault.at_update=5"]
    )
    plan = FaultPlan.of(settings.engine.fault)
    assert plan == FaultPlan(1, 5, "kill")
    plan.maybe_fail(0, 10)  # another worker: nothing happens
    plan.maybe_fail(1, 4)  # too early: nothing happens
    assert FaultPlan.of(settings_for(["engine=shared_memory", "engine.fault.mode=hang"]).engine.fault).mode == "hang"
    with pytest.raises(ConfigError, match="engine.fault.mode=explode"):  # refused when the settings are built
        settings_for(["engine=shared_memory", "engine.fault.mode=explode"])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_distributed_message_header_round_trip(dtype):
    buf = torch.zeros(dist_wire.HEADER + 50, dtype=dtype)
    dist_wire.put_header(buf, dist_wire.GRADIENT, 2**31 - 5, 1.25, 3)
    assert dist_wire.get_header(buf) == (dist_wire.GRADIENT, 2**31 - 5, 1.25, 3)
    dist_wire.put_text(buf, "ValueError: bad index 99")
    cmd, _, _, n = dist_wire.get_header(buf)
    assert cmd == dist_wire.ERROR and dist_wire.get_text(buf, n) == "ValueError: bad index 99"


def test_loopback_detection():
    assert dist_group.is_loopback("127.0.0.1") and dist_group.is_loopback("localhost")
    assert not dist_group.is_loopback("192.0.2.1")
    name = dist_group.loopback_interface()
    assert name is None or name.startswith("lo")


def _local_ip() -> str | None:
    import socket

    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.200", 9))  # no packet is sent: this only picks the outgoing interface
            ip = s.getsockname()[0]
    except OSError:
        return None
    return None if ip.startswith("127.") else ip


@pytest.mark.timeout(120)
def test_distributed_on_a_named_address_takes_a_free_port_when_the_configured_one_is_taken(tmp_path):
    import socket

    ip = _local_ip()
    if ip is None:
        pytest.skip("no non-loopback interface")
    with socket.socket() as taken:
        taken.bind((ip, 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        settings = settings_for(["engine=distributed", f"engine.master_addr={ip}", f"engine.master_port={port}"])
        store, spec, tmpdir = dist_group.store_for_local(settings.engine, 3)
        assert spec[:2] == ("tcp", ip) and spec[2] != port and tmpdir is None
        del store
        result, _, _ = run_real(
            tmp_path,
            "distributed",
            ["workers=2", "updates=50", f"engine.master_addr={ip}", f"engine.master_port={port}"],
        )
    assert result.status == "ok" and result.updates == 50


def test_bad_start_method_is_a_config_error(tmp_path):
    from experiments.engines.processes import process_context
    from experiments.errors import ConfigError

    with pytest.raises(ConfigError, match="engine.start_method=fork"):  # refused before any engine starts
        settings_for([f"results_dir={tmp_path}", "engine=shared_memory", "engine.start_method=fork"])
    with pytest.raises(ValueError, match="engine.start_method=fork"):  # and by the engines' own context
        process_context("fork")


# ---------------------------------------------------------------------- command line
@pytest.mark.timeout(600)
@pytest.mark.skipif(not HAS_FMNIST, reason="Fashion-MNIST not staged (make data)")
@pytest.mark.parametrize("sig", [signal.SIGINT, pytest.param(signal.SIGTERM, marks=pytest.mark.slow)])
def test_interrupting_the_runner_keeps_the_partial_trace_and_ends_every_worker(tmp_path, sig):
    err = tmp_path / "stderr.txt"
    cmd = [
        sys.executable,
        "-m",
        "experiments.run",
        "problem=logreg_fmnist",
        "algorithm=apam",
        "engine=shared_memory",
        "workers=2",
        "epochs=200",
        "eval_every=0.02",
        "progress=true",
        f"results_dir={tmp_path}",
    ]
    with open(err, "w") as ferr:
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=ferr)
    try:
        workers: set[int] = set()
        # the event is the progress bar; the deadline only guards a run that never trains (a loaded machine may
        # first measure the session's calibration for minutes: signalled then, no worker had started)
        deadline, reached = time.monotonic() + 420, False
        while time.monotonic() < deadline and proc.poll() is None and not reached:
            workers |= descendants(proc.pid)
            # the bar's total is the settings' epochs, a float: "0.30/200.0 epochs"
            done = [float(e) for e in re.findall(r"([0-9.]+)/200(?:\.0)? epochs", err.read_text())]
            reached = bool(done) and max(done) >= 0.1  # trained past the first evaluation points (the bar says)
            time.sleep(0.2)
        assert proc.poll() is None, err.read_text()[-2000:]
        assert reached, f"no progress past 0.1 epochs in 420 s:\n{err.read_text()[-2000:]}"
        workers |= descendants(proc.pid)
        proc.send_signal(sig)
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode != 0
    summary = pd.read_csv(tmp_path / "adhoc" / "summary.csv")
    assert list(summary["status"]) == ["failed"]
    assert "interrupted" in summary["message"][0]
    run_dir = tmp_path / "adhoc" / "runs" / summary["run_id"][0]
    trace = pd.read_csv(run_dir / "trace.csv")
    assert len(trace) >= 2 and (trace["clock"] == "wall").all()
    assert trace["updates"].iloc[-1] > 0
    assert len(workers) >= 3  # two workers and the helpers (resource tracker; with forkserver, their parent)
    # the runner ended its workers and reaped its helpers before it exited: nothing to wait for
    assert all(map(pid_gone, workers)), sorted(p for p in workers if not pid_gone(p))


@pytest.mark.timeout(180)
@pytest.mark.skipif(not HAS_FMNIST, reason="Fashion-MNIST not staged (make data)")
def test_distributed_from_the_command_line_starts_its_own_workers(tmp_path):
    cmd = [
        sys.executable,
        "-m",
        "experiments.run",
        "problem=logreg_fmnist",
        "algorithm=sync_amsgrad",
        "engine=distributed",
        "workers=2",
        "updates=60",
        "eval_every=10",
        f"results_dir={tmp_path}",
    ]
    out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=170)
    assert out.returncode == 0, out.stderr[-3000:]
    row = pd.read_csv(tmp_path / "adhoc" / "summary.csv").iloc[0]
    assert (row["status"], row["engine"], row["clock"]) == ("ok", "distributed", "wall")
    assert (row["updates"], row["gradients"], row["staleness_max"]) == (60, 120, 0)


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.skipif(not HAS_FMNIST, reason="Fashion-MNIST not staged (make data)")
def test_torchrun_ranks_above_zero_are_workers_and_write_nothing(tmp_path):
    torchrun = REPO / ".venv" / "bin" / "torchrun"
    if not torchrun.exists():
        pytest.skip("no torchrun in .venv")
    cmd = [
        str(torchrun),
        "--standalone",
        "--nproc_per_node=3",
        "-m",
        "experiments.run",
        "problem=logreg_fmnist",
        "algorithm=apam",
        "engine=distributed",
        "workers=2",
        "updates=80",
        "eval_every=10",
        f"results_dir={tmp_path}",
    ]
    out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=280)
    assert out.returncode == 0, out.stderr[-3000:]
    summary = pd.read_csv(tmp_path / "adhoc" / "summary.csv")
    assert len(summary) == 1  # rank 0 alone writes
    row = summary.iloc[0]
    assert (row["status"], row["updates"], row["gradients"], row["workers"]) == ("ok", 80, 80, 2)
    assert row["staleness_max"] >= 1


# ---------------------------------------------------------------------- the workers' CNN gradient
def test_cnn_module_gradient_path_matches_the_functional_reference():
    """The fast path (module with parameters in one flat buffer, channels-last) against the eager functional_call
    reference, at several points and minibatches; a fresh gradient each call; a pickled problem (what a worker
    receives) builds its own buffer."""
    import pickle

    from problems.cnn import CNNProblem, LeNet5

    gen = torch.Generator().manual_seed(5)
    xtr, ytr = torch.rand(64, 1, 28, 28, generator=gen), torch.randint(0, 10, (64,), generator=gen)
    fast = CNNProblem(LeNet5, xtr, ytr, xtr[:8], ytr[:8])
    ref = CNNProblem(LeNet5, xtr, ytr, xtr[:8], ytr[:8], grad_path="functional")
    assert fast.grad_path == "module" and fast.channels_last
    x = fast.init_params(2)
    for _step in range(3):
        idx = torch.randint(0, 64, (40,), generator=gen)
        x_before = x.clone()
        loss, g = fast.loss_grad(x, idx)
        ref_loss, ref_g = ref.loss_grad(x, idx)
        assert torch.equal(x, x_before)
        assert loss == pytest.approx(ref_loss, rel=1e-6)
        torch.testing.assert_close(g, ref_g, rtol=1e-5, atol=1e-6)
        assert g.abs().max() > 1e-3  # a real gradient, not zeros
        loss2, g2 = fast.loss_grad(x, idx)
        assert loss2 == loss and torch.equal(g2, g) and g2.data_ptr() != g.data_ptr()  # deterministic, fresh
        x = x - 0.5 * g  # a new point for the next round
    # evaluation runs on the same private module (channels-last): it agrees with the reference to float32 rounding,
    # and a gradient after it is the one before it (evaluate leaves nothing behind in the shared buffer)
    g_before = fast.loss_grad(x, idx)[1]
    m_fast, m_ref = fast.evaluate(0.9 * x), ref.evaluate(0.9 * x)
    assert m_fast.keys() == m_ref.keys() and all(m_fast[k] == pytest.approx(m_ref[k], rel=1e-6) for k in m_ref)
    assert torch.equal(fast.loss_grad(x, idx)[1], g_before)
    copy = pickle.loads(pickle.dumps(fast))
    assert copy._grad_module is None
    assert torch.equal(copy.loss_grad(x, idx)[1], fast.loss_grad(x, idx)[1])
    with pytest.raises(ValueError, match="grad_path"):
        CNNProblem(LeNet5, xtr, ytr, xtr, ytr, grad_path="compiled")


class _SlowStep:
    """An update rule whose every step also sleeps ``pause`` seconds (everything else forwarded to ``rule``)."""

    def __init__(self, rule, pause: float) -> None:
        self._rule, self._pause = rule, pause

    def step(self, x, g, state):
        time.sleep(self._pause)
        return self._rule.step(x, g, state)

    def __getattr__(self, name):
        return getattr(self._rule, name)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("engine", ENGINES)
def test_master_busy_counts_the_update_and_not_the_wait_for_gradients(tmp_path, engine, monkeypatch):
    """P = 1 with 20 ms emulated gradients and a 4 ms update: the master is busy at least the update's 4 ms per
    update and well under the 24+ ms an update takes (it waits for the gradient the rest of the time)."""
    real_build = build_rule
    monkeypatch.setattr(sys.modules[__name__], "build_rule", lambda *a, **k: _SlowStep(real_build(*a, **k), 0.004))
    result, _, _ = run_real(
        tmp_path, engine, ["workers=1", "updates=30", "engine.compute=emulated", "engine.compute_base_s=0.02"]
    )
    per_update = result.time_s / (result.timed_samples / 8)  # batch 8: the clock starts after the warm-up
    assert per_update > 0.024
    assert 0.004 <= result.master_busy_s < 0.5 * per_update
