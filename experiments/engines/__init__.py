"""Engines: how gradients travel from workers to the master and how time is measured.

Every engine has ``run(problem, rule, settings, recorder, costs=None) -> EngineResult`` (``settings``: the run's
:class:`~experiments.settings.schema.RunSettings`; ``costs``: what the runner resolved from the calibration before
the engine started, :class:`experiments.clock.resolve.RunCosts`) and uses :class:`experiments.training.master.Master`
for the update logic, so the engines differ only in transport and clock:

- ``simulated``: one process, event-driven, exact staleness, simulated clock from the calibrated cost model;
- ``shared_memory``: a master and P worker processes on one machine, wall clock;
- ``distributed``: torch.distributed master (rank 0) and P worker ranks, wall clock.

Modules: the real engines share the master loop (``driver``, timed by ``timeline``), the transport interface
(``transport``; ``loopback`` for tests), the workers' spec and set-up (``workers``), their processes' lives
(``processes``), their start-up data (``startup``) and emulated compute (``emulation``). ``shared_memory`` keeps its
transport and run, with ``shm_layout`` (shared blocks, wake-ups), ``shm_handoff`` (spin or block) and ``shm_worker``;
``distributed`` likewise, with ``dist_wire`` (messages), ``dist_group`` (process group) and ``dist_worker``.
``simulated`` runs on the clock of ``cores`` (CPU sharing) or replays a measured run (``twin``).
"""

from __future__ import annotations

import importlib
from collections import Counter
from dataclasses import dataclass, field

ENGINES = ("simulated", "shared_memory", "distributed")


@dataclass
class EngineResult:
    """What an engine reports at the end of a run.

    Attributes:
        updates: master updates applied; gradients: gradients received by the master.
        samples: training samples consumed (epochs = samples / num_train).
        time_s: seconds on the engine's clock, evaluation excluded.
        histogram: staleness -> number of updates.
        status: ``ok`` or ``failed`` (divergence is raised as :class:`experiments.training.recorder.Diverged`).
        message: what happened, when something did (a lost worker, a fault).
        timed_samples: samples consumed while the clock ran (None: all of them); a wall clock starts after a few
            warm-up updates, so time per epoch is ``time_s / (timed_samples / num_train)``.
        costs: the simulated clock's cost model of the run (``grad_s``, ``update_s``, ``latency_s``, ``overhead_s``,
            ``master_s``; seconds, :mod:`experiments.clock.costmodel`), empty on
            wall-clock engines.
        handoff: how the shared_memory engine handed work to its workers in this run (``spin`` or ``block``,
            :func:`experiments.engines.shared_memory.choose_handoff`); empty for the other engines.
        overruns: emulated compute only: gradients whose computation alone took > 10% over their target;
            late_wakeups: those whose wait ended > 10% of the target after it (emulation.py).
        compute_times: real engines: ``(worker, index, compute_s, target_s)`` per gradient (``compute_times.csv``).
        master_busy_s: real engines: the master's mean seconds per timed update outside its waits for arrivals
            (receive, update, hand out work, bookkeeping; the measured counterpart of the model's ``master_s``
            for async, ``update_s + P overhead_s`` for sync); None on the simulated engine.
        provenance: what the run's provenance.json should add (the simulated clock: calibration file and spreads).
        timeline: real engines: one row per gradient the master took (engines/timeline.py:TIMELINE_COLUMNS), the
            input of the trace-driven twin (engines/twin.py).
    """

    updates: int
    gradients: int
    samples: int
    time_s: float
    histogram: Counter = field(default_factory=Counter)
    status: str = "ok"
    message: str = ""
    costs: dict = field(default_factory=dict)
    timed_samples: int | None = None
    handoff: str = ""
    overruns: int | None = None
    late_wakeups: int | None = None
    compute_times: list | None = None
    master_busy_s: float | None = None
    provenance: dict = field(default_factory=dict)
    timeline: list | None = None


def get_engine(name: str):
    """The engine module ``experiments.engines.<name>`` (it has ``run``). Raises ValueError for an unknown name."""
    if name not in ENGINES:
        raise ValueError(f"engine={name!r}: must be one of {', '.join(ENGINES)}")
    return importlib.import_module(f"experiments.engines.{name}")


def warmup_updates(settings, num_train: int) -> int:
    """Updates applied before a run's clock starts: ``engine.warmup_updates`` (0: none), for the async protocol at
    least P (one whole round), at most half the run's planned updates.

    Why a whole round: P workers handed their first iterates together deliver their first gradients in one burst
    about one gradient later. A clock started inside that burst and stopped at the last arrival times K - w updates
    over (K / P - 1) gradient cycles, optimistic by about (P - w) / K; started at the burst's end it times the steady
    state. The real engines (engines/driver.py) and the simulated one use this rule, so a simulated twin times the
    same updates as its measured run.

    Args:
        settings: the run's :class:`~experiments.settings.schema.RunSettings`.
        num_train: N, samples per epoch.
    """
    warm = int(settings.engine.warmup_updates)
    if warm > 0 and settings.algorithm.protocol == "async":
        warm = max(warm, int(settings.workers))
    return min(warm, settings.planned_updates(num_train) // 2)
