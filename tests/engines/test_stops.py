"""Stops on the real engines (a staleness policy's ``restart``): the master loop hands a worker whose request became
too stale the current iterate through the transport's ``restart``, counts a stopped computation's late reply as
discarded, and a shared-memory or locally started distributed worker abandons its computation on SIGUSR1."""

from __future__ import annotations

import multiprocessing
import os
import time

import pytest

from algorithms import build_rule
from conftest import QuadraticProblem, recorder_for, run_engine, settings_for
from experiments.engines import distributed, shared_memory
from experiments.engines.driver import drive
from experiments.engines.loopback import LoopbackTransport

ENGINES = {"shared_memory": shared_memory, "distributed": distributed}


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:  # a zombie answers kill(0) until it is reaped
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1].startswith("Z")
    except OSError:
        return True


def test_the_master_loop_restarts_stale_requests_and_discards_their_late_replies(tmp_path):
    """Loopback answers every request at once, so each wait returns one reply per worker, all at the same version:
    the first is applied (R = 1: only fresh gradients count), which makes the other two requests stale -- both are
    restarted at the new version, and their replies, already in hand (sent before the stop), are counted and
    discarded unread while the restarted requests stay outstanding."""
    problem = QuadraticProblem()
    settings = settings_for(
        [
            f"results_dir={tmp_path}",
            "engine=shared_memory",
            "workers=3",
            "epochs=1",
            "batch_size=8",
            "engine.warmup_updates=0",
            "algorithm=ringmaster_asgd",
            "algorithm.policy.R=1",
            "algorithm.policy.restart=true",
            "algorithm.lr=0.01",
            "algorithm.lr_schedule=constant",
            "eval_every=1e9",
        ]
    )
    rec = recorder_for(problem, settings, "wall")
    transport = LoopbackTransport(problem.dim)
    result = drive(problem, build_rule("sgd", lr=0.01), settings, rec, transport)
    m = rec.master
    assert result.status == "ok" and dict(m.histogram) == {0: result.updates}
    assert m.restarts == len(transport.restarts) > 0
    assert result.updates == result.gradients - m.discarded
    assert result.samples == 8 * result.gradients >= 256  # every gradient that reached the master, discarded too
    assert all(v > 0 for _, v in transport.restarts)
    assert m.discarded == m.restarts  # each stop's old reply was already in hand


@pytest.mark.timeout(120)
@pytest.mark.parametrize("engine", ENGINES)
def test_a_worker_restarted_mid_computation_on_a_real_engine(tmp_path, engine):
    """Two workers, Ringmaster with R = 1 and stops: every update makes the other worker's request stale, so it is
    restarted while it computes (an emulated 30 ms gradient: the stop's SIGUSR1 ends its wait). The run applies every
    gradient that was not stale, the stopped computations whose reply never came were interrupted, and no worker
    process is left."""
    problem = QuadraticProblem()
    settings = settings_for(
        [
            f"results_dir={tmp_path}",
            f"engine={engine}",
            "++engine.start_method=forkserver",
            "engine.timeout_s=30",
            "workers=2",
            "epochs=1",
            "batch_size=8",
            "delay=timing",
            "delay.spread=sqrt",
            "engine.compute=emulated",
            "engine.compute_base_s=0.03",
            "algorithm=ringmaster_asgd",
            "algorithm.policy.R=1",
            "algorithm.policy.restart=true",
            "algorithm.lr=0.05",
            "algorithm.lr_schedule=constant",
            "eval_every=0.5",
        ]
    )
    rec = recorder_for(problem, settings, "wall")
    t0 = time.monotonic()
    result = run_engine(problem, build_rule("sgd", lr=0.05), settings, rec)
    m = rec.master
    assert (result.status, result.message) == ("ok", "")
    assert dict(m.histogram) == {0: result.updates}  # R = 1: only fresh gradients applied
    assert result.updates == result.gradients - m.discarded
    assert result.samples == 8 * result.gradients >= 256
    interrupted = m.restarts - m.discarded  # stops whose old reply never came: the worker abandoned it
    assert m.restarts > 0 and interrupted > 0
    assert rec.rows[-1]["stopped"] == m.restarts
    assert time.monotonic() - t0 < 60
    pids = ENGINES[engine].LAST_WORKER_PIDS
    assert pids and multiprocessing.active_children() == []
    deadline = time.monotonic() + 5
    while not all(map(_gone, pids)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(map(_gone, pids))
