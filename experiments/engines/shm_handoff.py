"""How the shared_memory engine hands work over (experiments/engines/shared_memory.py, module docstring):
spinning or blocking (:func:`choose_handoff`), and the master's placement beside a lone worker
(:func:`master_beside`)."""

from __future__ import annotations

import os
import platform
from contextlib import contextmanager

from experiments.engines.workers import WorkerSpec, busy_cpus
from experiments.errors import ConfigError


def spin_allowed() -> bool:
    """True where a plain store/load hand-off through shared memory is ordered without fences (x86-64's total store
    order; see the module docstring). Elsewhere the hand-off always blocks (system calls order memory)."""
    return platform.machine().lower() in ("x86_64", "amd64")


def choose_handoff(setting: str, specs: list[WorkerSpec], load: float | None = None) -> str:
    """``engine.handoff`` resolved to ``spin`` or ``block`` for this run.

    ``auto``: spin when every worker is pinned to CPUs of its own (:func:`experiments.engines.workers.worker_cpus`), at
    least one allowed CPU is left for the master, the machine's other work leaves those CPUs free (``load``: the CPUs'
    worth of work done on the CPUs left for the master, by default measured over 0.1 s before the workers start,
    :func:`experiments.engines.workers.busy_cpus`, else the machine's 1-minute load average; below the number of those
    CPUs), and the CPU orders memory strongly enough (:func:`spin_allowed`); block at once otherwise: processes (ours or
    other people's) would outnumber cores, and a spinning process would take the core from the one it waits for
    (benchmarks/bench_engines.py, ``handoff``, compares spinning and blocking on the machine at hand).
    ``spin`` / ``block`` force the choice.

    Raises:
        ConfigError: an unknown setting, or ``spin`` on a CPU where :func:`spin_allowed` is false.
    """
    if setting not in ("auto", "spin", "block"):
        raise ConfigError(f"engine.handoff={setting}: must be auto, spin or block")
    if setting == "spin" and not spin_allowed():
        raise ConfigError(f"engine.handoff=spin: needs an x86-64 CPU (this is {platform.machine()}); use auto or block")
    if setting != "auto":
        return setting
    if not spin_allowed() or any(s.cpus is None for s in specs) or not hasattr(os, "sched_getaffinity"):
        return "block"
    free_cpus = set(os.sched_getaffinity(0)) - {c for s in specs for c in s.cpus}
    free = len(free_cpus)
    if load is None and free:
        load = busy_cpus(free_cpus)
    if load is None:
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    return "spin" if free >= 1 and load < free else "block"


@contextmanager
def master_beside(cpus: tuple[int, ...] | None):
    """While inside, this process (the master) runs on ``cpus`` (the lone worker's); None, or no CPU affinity on
    this OS: nothing changes. Restores the previous affinity on the way out. Used by :func:`run` at P = 1 with the
    blocking hand-off when ``engine.colocate=true`` (off by default: the simulated clock's message latency is
    calibrated by a blocking P = 1 run with master and worker on different CPUs, as they are at P >= 2, so a
    co-located P = 1 run would be faster than its simulated twin).

    Why: a blocking P = 1 run alternates strictly (the master updates while the worker waits, then the reverse), so
    it needs one CPU, and on the same CPU a wake-up costs a context switch, while across CPUs it costs an
    inter-processor interrupt, which a virtual machine pays dearly for: a blocking pipe round trip between two
    processes, and the engine's blocking P = 1 hand-off, can be several times faster on one CPU than across two
    (benchmarks/bench_engines.py, ``handoff``: ``block_beside`` against ``block``, measures it on the machine at
    hand)."""
    if cpus is None or not hasattr(os, "sched_setaffinity"):
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)
