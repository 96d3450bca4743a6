"""The shared_memory hand-off: spinning and blocking, with fewer and more processes than cores. Every
request is served exactly once, in order, at the iterate and version it was handed (no torn or stale read), and
``engine.handoff=auto`` chooses as documented."""

from __future__ import annotations

import os

import pytest
import torch

from conftest import QuadraticProblem, pinned, recorder_for, run_engine, settings_for
from experiments.engines import shared_memory, shm_handoff
from experiments.engines.transport import Arrival
from experiments.engines.workers import FaultPlan, WorkerSpec, worker_cpus
from experiments.errors import ConfigError

CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


class CountingProblem:
    """g(x) = x + 1 (the whole vector: a torn read of x shows), loss = how many gradients this process has computed
    so far (a request served twice, or skipped, shows). d = 4,096 floats (16 KB per message)."""

    def __init__(self, d: int = 4096) -> None:
        self.name, self.dim, self.num_train, self.device = "counting", d, 1000, torch.device("cpu")
        self.calls = 0

    def init_params(self, seed: int) -> torch.Tensor:
        return torch.zeros(self.dim)

    def loss_grad(self, x, idx):
        self.calls += 1
        return float(self.calls), x + 1.0

    def evaluate(self, x):
        return {"train_loss": 0.0, "train_acc": 0.0, "test_loss": 0.0, "test_acc": 0.0}


def _stress(P: int, handoff: str, requests: int) -> None:
    problem = CountingProblem()
    cpus = worker_cpus(P, 1)
    specs = [WorkerSpec(w, 1, w, 1, FaultPlan(), cpus[w]) for w in range(P)]
    t = shared_memory.SharedMemoryTransport(problem, specs, problem.init_params(0), "forkserver", handoff)
    try:
        x = torch.empty(problem.dim)
        outstanding: dict[int, int] = {}  # worker -> request id it holds
        served = [0] * P  # gradients each worker returned
        next_id = 0

        def issue(w: int) -> None:
            nonlocal next_id
            x.fill_(float(next_id))  # request id k: x = k everywhere (exact in float32 below 2**24)
            t.issue(w, x, next_id)
            outstanding[w] = next_id
            next_id += 1

        for w in range(P):
            issue(w)
        answered = []
        while outstanding:
            events = t.wait(30.0)
            assert events, "no reply within 30 s"
            for ev in events:
                assert isinstance(ev, Arrival), ev
                w = ev.worker
                k = outstanding.pop(w)  # a second reply to one request would fail here (KeyError)
                assert ev.version == k
                served[w] += 1
                assert ev.loss == served[w]  # the worker computed exactly once per request
                g = t.gradient(w)
                assert torch.equal(g, torch.full_like(g, k + 1.0)), (w, k, g.min().item(), g.max().item())
                answered.append(k)
                if next_id < requests:
                    issue(w)
        assert sorted(answered) == list(range(requests))
        assert sum(served) == requests
        assert t.wait(0.2) == []  # nothing left over
    finally:
        t.close()


@pytest.mark.timeout(180)
@pytest.mark.parametrize(
    "P, handoff",
    [
        (1, "spin"),
        (1, "block"),
        (2, "block"),
        (2, "spin"),  # on a 2-core machine P = 2 is 3 processes: more than cores
        (CORES + 1, "block"),
        (CORES + 1, "spin"),
    ],
)
def test_every_request_is_served_exactly_once_in_order(P, handoff):
    if handoff == "spin" and not shm_handoff.spin_allowed():
        pytest.skip("spinning needs x86-64")
    _stress(P, handoff, requests=1500)


def _specs(cpus_per_worker):
    return [WorkerSpec(w, 1, w, 1, FaultPlan(), c) for w, c in enumerate(cpus_per_worker)]


def test_auto_spins_only_when_every_process_has_a_core(monkeypatch):
    monkeypatch.setattr(shm_handoff, "spin_allowed", lambda: True)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2}, raising=False)
    assert shm_handoff.choose_handoff("auto", _specs([(0,), (1,)]), load=0.3) == "spin"  # CPU 2 for the master
    assert shm_handoff.choose_handoff("auto", _specs([(0,), (1,)]), load=1.2) == "block"  # others use it
    assert shm_handoff.choose_handoff("auto", _specs([(0,)]), load=1.2) == "spin"  # two CPUs left
    assert shm_handoff.choose_handoff("auto", _specs([(0,), (1,), (2,)]), load=0.0) == "block"  # none left
    assert shm_handoff.choose_handoff("auto", _specs([None, None]), load=0.0) == "block"  # not pinned
    assert shm_handoff.choose_handoff("block", _specs([(0,)])) == "block"
    assert shm_handoff.choose_handoff("spin", _specs([None] * 5)) == "spin"
    monkeypatch.setattr(shm_handoff, "spin_allowed", lambda: False)
    assert shm_handoff.choose_handoff("auto", _specs([(0,)]), load=0.0) == "block"
    with pytest.raises(ConfigError, match="engine.handoff=spin"):
        shm_handoff.choose_handoff("spin", _specs([(0,)]))
    with pytest.raises(ConfigError, match="engine.handoff=fast"):
        shm_handoff.choose_handoff("fast", _specs([(0,)]))


def test_auto_reads_the_load_of_the_last_tenth_of_a_second(monkeypatch):
    """Without ``load``, auto measures the CPUs' busy time over 0.1 s (/proc/stat), not the 1-minute load average
    that still counts the previous run's workers."""
    from experiments.engines import workers as worker_procs

    samples = iter([(100, 200), (130, 240)])  # (idle + iowait, total) jiffies: 30 of 40 idle over the window
    asked = []
    monkeypatch.setattr(worker_procs, "cpu_times", lambda cpus=None: (asked.append(cpus), next(samples))[1])
    monkeypatch.setattr(worker_procs.os, "cpu_count", lambda: 4)
    monkeypatch.setattr(worker_procs.time, "sleep", lambda s: None)
    assert worker_procs.busy_cpus() == pytest.approx(1.0)  # a quarter of 4 CPUs busy
    samples = iter([(100, 200), (130, 240)])
    assert worker_procs.busy_cpus({2, 3}) == pytest.approx(0.5)  # a quarter of the 2 CPUs asked about
    assert asked == [None, None, {2, 3}, {2, 3}]
    monkeypatch.setattr(worker_procs, "cpu_times", lambda cpus=None: None)
    assert worker_procs.busy_cpus() is None  # no /proc/stat: the caller falls back to the load average

    monkeypatch.setattr(shm_handoff, "spin_allowed", lambda: True)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(os, "getloadavg", lambda: (5.0, 5.0, 5.0), raising=False)  # a busy past minute
    measured = []
    monkeypatch.setattr(shm_handoff, "busy_cpus", lambda cpus: (measured.append(cpus), 0.2)[1])
    assert shm_handoff.choose_handoff("auto", _specs([(0,)])) == "spin"  # quiet now: the past minute is ignored
    assert measured == [{1}]  # the CPU left for the master, not the worker's
    monkeypatch.setattr(shm_handoff, "busy_cpus", lambda cpus: 1.0)
    assert shm_handoff.choose_handoff("auto", _specs([(0,)])) == "block"  # another job holds CPU 1
    monkeypatch.setattr(shm_handoff, "busy_cpus", lambda cpus: None)
    assert shm_handoff.choose_handoff("auto", _specs([(0,)])) == "block"  # fallback: the load average, 5


@pytest.mark.timeout(120)
@pytest.mark.parametrize("handoff", ["spin", "block"])
def test_a_run_records_its_handoff_and_matches_the_other_mode(tmp_path, handoff):
    """The same P = 1 run spinning and blocking: the hand-off changes timing only, never the numbers."""
    if handoff == "spin" and not shm_handoff.spin_allowed():
        pytest.skip("spinning needs x86-64")
    from algorithms import build_rule

    results = {}
    for mode in (handoff, "block"):
        problem = QuadraticProblem()
        settings = settings_for(
            pinned(
                [
                    f"results_dir={tmp_path}",
                    "engine=shared_memory",
                    "++engine.start_method=forkserver",
                    f"engine.handoff={mode}",
                    "workers=1",
                    "updates=200",
                    "batch_size=8",
                    "eval_every=1e9",
                    "algorithm=apam",
                    "algorithm.lr=0.05",
                    "algorithm.lr_schedule=constant",
                    "algorithm.alpha_max=null",
                ]
            )
        )
        rec = recorder_for(problem, settings, "wall")
        result = run_engine(problem, build_rule("amsgrad", variant="torch", lr=0.05), settings, rec)
        assert result.status == "ok" and result.updates == 200 and result.handoff == mode
        results[mode] = rec.rows[-1]["train_loss"]
    assert results[handoff] == results["block"]


@pytest.mark.timeout(120)
@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="CPU affinity is Linux-only")
@pytest.mark.parametrize("handoff", ["spin", "block"])
@pytest.mark.parametrize("colocate", [True, False])
def test_a_blocking_p1_master_runs_beside_its_worker(tmp_path, monkeypatch, handoff, colocate):
    """P = 1, blocking, ``engine.colocate=true``: the master runs on its worker's CPU for the run (one CPU's worth of
    strictly alternating work; a same-CPU wake-up is a context switch, not an inter-processor interrupt) and gets its
    affinity back after. Spinning needs the two on different CPUs (colocate=true with it is refused, as with P > 1),
    and colocate=false (the default) keeps them apart: nothing changes there."""
    if handoff == "spin" and not shm_handoff.spin_allowed():
        pytest.skip("spinning needs x86-64")
    from algorithms import build_rule

    worker_cpu = worker_cpus(1, 1)[0]
    if worker_cpu is None:
        pytest.skip("no CPU to pin the worker to")
    seen, real_drive = [], shared_memory.drive

    def drive(*args, **kw):
        seen.append(os.sched_getaffinity(0))
        return real_drive(*args, **kw)

    monkeypatch.setattr(shared_memory, "drive", drive)
    before = os.sched_getaffinity(0)
    problem = QuadraticProblem()
    overrides = [
        f"results_dir={tmp_path}",
        "engine=shared_memory",
        "++engine.start_method=forkserver",
        f"engine.handoff={handoff}",
        f"engine.colocate={str(colocate).lower()}",
        "workers=1",
        "updates=50",
        "batch_size=8",
        "eval_every=1e9",
    ]
    if colocate and handoff == "spin":
        with pytest.raises(ValueError, match=r"engine.colocate=true: applies to a P = 1 run with the blocking"):
            settings_for(pinned(overrides))
        with pytest.raises(ValueError, match=r"colocate=true: .* not workers=2 "):
            settings_for(pinned([o.replace("=spin", "=block").replace("workers=1", "workers=2") for o in overrides]))
        return
    settings = settings_for(pinned(overrides))
    rec = recorder_for(problem, settings, "wall")
    result = run_engine(problem, build_rule("amsgrad", variant="torch", lr=0.05), settings, rec)
    assert result.status == "ok" and result.handoff == handoff
    assert seen == [set(worker_cpu) if handoff == "block" and colocate else before]
    assert os.sched_getaffinity(0) == before
