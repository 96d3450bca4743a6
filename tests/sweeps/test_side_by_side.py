"""`make reproduce JOBS=N` runs experiments side by side (experiments/sweeps/launch.py): simulated-clock sweeps overlap,
a wall-clock sweep runs with no other sweep beside it, and an interrupt starts nothing more. Ordered by events, not by
sleeping."""

from __future__ import annotations

import threading

import pytest

from experiments.sweeps import launch
from experiments.sweeps.launch import ClockGate, Stopped, side_by_side

WAIT_S = 30  # an upper bound on waiting for an event that must come (a loaded machine is slow, never this slow)


def _until(predicate) -> None:
    """Wait until ``predicate()`` holds (checked every millisecond, at most WAIT_S); fail otherwise."""
    done = threading.Event()
    for _ in range(WAIT_S * 1000):
        if predicate():
            return
        done.wait(0.001)
    pytest.fail("the event never came")


def _holder(gate, simulated, order, name, release):
    def body():
        with gate.hold(simulated):
            order.append(f"{name} in")
            release.wait(WAIT_S)
            order.append(f"{name} out")

    t = threading.Thread(target=body, daemon=True)
    t.start()
    return t


def test_a_wall_clock_sweep_waits_for_the_running_simulated_ones_and_holds_back_new_ones():
    gate, order = ClockGate(), []
    release = {k: threading.Event() for k in ("sim1", "wall", "sim2")}
    sim1 = _holder(gate, True, order, "sim1", release["sim1"])
    _until(lambda: order == ["sim1 in"])
    wall = _holder(gate, False, order, "wall", release["wall"])
    _until(lambda: gate._wall_waiting == 1)
    sim2 = _holder(gate, True, order, "sim2", release["sim2"])  # a wall-clock sweep waits: sim2 may not start
    release["sim1"].set()
    sim1.join(WAIT_S)
    _until(lambda: order[-1] == "wall in")
    assert order == ["sim1 in", "sim1 out", "wall in"]  # sim2 still held back while the wall sweep runs
    release["wall"].set()
    wall.join(WAIT_S)
    release["sim2"].set()
    sim2.join(WAIT_S)
    assert order == ["sim1 in", "sim1 out", "wall in", "wall out", "sim2 in", "sim2 out"]


def test_simulated_sweeps_run_together():
    gate, order = ClockGate(), []
    release = threading.Event()
    threads = [_holder(gate, True, order, f"sim{i}", release) for i in range(3)]
    _until(lambda: len(order) == 3)  # all three inside at once
    release.set()
    for t in threads:
        t.join(WAIT_S)
    assert sorted(order) == sorted([f"sim{i} {w}" for i in range(3) for w in ("in", "out")])


def test_a_stopped_gate_starts_nothing_and_wakes_the_waiting():
    gate, order = ClockGate(), []
    release = threading.Event()
    running = _holder(gate, True, order, "sim", release)
    _until(lambda: order == ["sim in"])
    refused = []

    def waiter():
        try:
            with gate.hold(False):
                order.append("wall in")
        except Stopped:
            refused.append("wall")

    t = threading.Thread(target=waiter, daemon=True)
    t.start()
    _until(lambda: gate._wall_waiting == 1)
    gate.stop()
    t.join(WAIT_S)
    assert refused == ["wall"] and "wall in" not in order
    with pytest.raises(Stopped):
        with gate.hold(True):
            pass
    release.set()
    running.join(WAIT_S)


@pytest.mark.parametrize(("experiments", "jobs", "per_sweep"), [(["a", "b", "c"], 2, 1), (["a"], 2, 2), (["a"], 1, 1)])
def test_jobs_are_shared_among_the_experiments_that_run_together(experiments, jobs, per_sweep, monkeypatch):
    monkeypatch.setattr(launch, "GATE", ClockGate())
    lock, inside, most = threading.Lock(), [0], [0]
    both_in = threading.Barrier(min(jobs, len(experiments)), timeout=WAIT_S)

    def run(exp, sweep_jobs):
        with lock:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        if exp != "c":
            both_in.wait()  # the first experiments run at the same time (a deadlock fails the barrier's timeout)
        with lock:
            inside[0] -= 1
        return {"status": "ran", "jobs": sweep_jobs}

    out = dict(side_by_side(experiments, run, jobs))
    assert sorted(out) == sorted(experiments)
    assert {st["jobs"] for st in out.values()} == {per_sweep}
    assert most[0] == min(jobs, len(experiments))


def test_an_interrupt_stops_the_gate_and_propagates(monkeypatch):
    gate = ClockGate()
    monkeypatch.setattr(launch, "GATE", gate)

    def run(exp, sweep_jobs):
        if exp == "a":
            raise KeyboardInterrupt
        with gate.hold(True):  # refused once the gate is stopped, or finished before: both end the thread
            return {"status": "ran"}

    with pytest.raises(KeyboardInterrupt):
        for _ in side_by_side(["a", "b"], run, 2):
            pass
    assert gate.stopped
    with pytest.raises(Stopped):
        with gate.hold(False):
            pass


def test_a_stop_reaches_a_sweep_that_started_with_sigint_ignored():
    """A job started in the background (``cmd &`` in a script, ``nohup``: how tests/stress.sh and many schedulers
    start work) begins with SIGINT ignored, and so does each process it starts until one installs a handler. The
    gate's SIGINT reached a sweep still starting up, was ignored, and the stopped reproduce waited for the whole
    sweep (the stress run's flaky failure). The gate's signal must end such a child."""
    import signal
    import sys
    import time

    gate, codes = ClockGate(), []
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)  # inherited by the child, as from a background shell
    try:
        runner = threading.Thread(
            target=lambda: codes.append(gate.run([sys.executable, "-c", "import time; time.sleep(60)"]))
        )
        runner.start()
        deadline = time.monotonic() + 30
        while not gate._children and time.monotonic() < deadline:
            time.sleep(0.01)
        gate.stop()
        runner.join(20)
    finally:
        signal.signal(signal.SIGINT, old)
    assert not runner.is_alive() and codes == [-launch.STOP] and launch.STOP != signal.SIGINT
