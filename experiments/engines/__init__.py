"""Engines: how gradients travel from workers to the master and how time is measured.

Every engine has ``run(problem, rule, cfg, recorder) -> EngineResult`` and uses :class:`experiments.master.Master`
for the update logic, so the engines differ only in transport and clock:

- ``simulated``: one process, event-driven, exact staleness, simulated clock from the calibrated cost model;
- ``shared_memory``: a master and P worker processes on one machine, wall clock;
- ``distributed``: torch.distributed master (rank 0) and P worker ranks, wall clock.
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
        status: ``ok`` or ``failed`` (divergence is raised as :class:`experiments.recorder.Diverged`).
        message: what happened, when something did (a lost worker, a fault).
        timed_samples: samples consumed while the clock ran (None: all of them); a wall clock starts after a few
            warm-up updates, so time per epoch is ``time_s / (timed_samples / num_train)``.
        costs: the simulated clock's cost model of the run (``grad_s``, ``update_s``, ``latency_s``, ``overhead_s``,
            ``master_s``; seconds, :mod:`experiments.costmodel`), empty on
            wall-clock engines.
        handoff: how the shared_memory engine handed work to its workers in this run (``spin`` or ``block``,
            :func:`experiments.engines.shared_memory.choose_handoff`); empty for the other engines.
        overruns: emulated compute only: gradients that ended > 10% after their target (emulation.py).
        compute_times: real engines: ``(worker, index, compute_s, target_s)`` per gradient (``compute_times.csv``).
        provenance: what the run's provenance.json should add (the simulated clock: calibration file and spreads).
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
    compute_times: list | None = None
    provenance: dict = field(default_factory=dict)


def get_engine(name: str):
    """The engine module ``experiments.engines.<name>`` (it has ``run``). Raises ValueError for an unknown name."""
    if name not in ENGINES:
        raise ValueError(f"engine={name!r}: must be one of {', '.join(ENGINES)}")
    return importlib.import_module(f"experiments.engines.{name}")
