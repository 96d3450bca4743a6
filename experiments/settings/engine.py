"""The ``delay`` and ``engine`` blocks: how staleness arises and which engine runs the protocol, with its clock
(conf/delay/*.yaml, conf/engine/*.yaml)."""

from __future__ import annotations

import functools
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from experiments.settings.fields import (
    MAX_COST_S,
    Frozen,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    Seconds,
    file_problem,
    not_blank,
)


class NoDelay(Frozen):
    """Every gradient at the newest iterate (tau = 0)."""

    model: Literal["none"]


class FixedDelay(Frozen):
    """Artificial fixed delay: every gradient computed at x_{k - tau} once k >= tau."""

    model: Literal["fixed"]
    tau: NonNegativeInt


class UniformDelay(Frozen):
    """The paper's artificial delay (Sec. 5.4): each gradient at one of the min(D, k+1) newest iterates, uniformly,
    D = max_delay + 1."""

    model: Literal["uniform"]
    max_delay: NonNegativeInt


class TimingDelay(Frozen):
    """Staleness from the workers' compute-time law (experiments/training/delays.py:ComputeTimes)."""

    model: Literal["timing"]
    law: Literal["constant", "exponential", "lognormal", "pareto", "replay", "measured"]
    sigma: Annotated[float, Field(ge=0, le=5)]
    """lognormal: the spread of log(compute time); mean 1 at every sigma, so beyond 5 nearly every draw is below
    exp(-12.5) of the mean and a rare one holds the rest (above about 38 every draw underflows to 0)."""
    slow_workers: NonNegativeInt
    slowdown: Annotated[float, Field(gt=0, le=1e6)]
    """How many times slower the slow workers are (a million: a worker that, in practice, never answers)."""
    spread: Literal["equal", "sqrt", "linear"]
    shape: float = Field(gt=1)
    replay: str | None

    @model_validator(mode="after")
    def _read_by_the_law(self) -> TimingDelay:
        """A key the law does not read keeps the value that changes nothing (sigma 0: the experiments' own configs
        write it beside law=constant; shape: conf/delay/timing.yaml's; slowdown 1): another value was accepted,
        ignored, and named a run of its own. (Their yaml defaults are numbers, so only the value tells a key set.)"""
        if self.law != "lognormal" and self.sigma != 0:
            raise ValueError(
                f"delay.sigma={self.sigma}: only delay.law=lognormal reads it, not law={self.law} (choose "
                "delay.law=lognormal, or leave delay.sigma at 0)"
            )
        if self.law != "pareto" and self.shape != _timing_default("shape"):
            raise ValueError(
                f"delay.shape={self.shape}: only delay.law=pareto reads it, not law={self.law} (choose "
                f"delay.law=pareto, or leave delay.shape at {_timing_default('shape')})"
            )
        if self.slow_workers == 0 and self.slowdown != 1:
            raise ValueError(
                f"delay.slowdown={self.slowdown}: slows the first delay.slow_workers workers, and delay.slow_workers=0 "
                "(set delay.slow_workers, or leave delay.slowdown at 1)"
            )
        return self

    @model_validator(mode="after")
    def _replay_file(self) -> TimingDelay:
        if self.law != "replay" and self.replay is not None:
            raise ValueError(f"delay.replay={self.replay}: only delay.law=replay reads it, not law={self.law}")
        if self.law == "replay":
            if self.replay is None:
                raise ValueError("delay.replay=null: law=replay needs one (a run's compute_times.csv)")
            why = file_problem(self.replay)
            if why is not None:
                raise ValueError(f"delay.replay={self.replay}: {why} (law=replay replays a compute_times.csv)")
        return self


@functools.cache
def _timing_default(key: str):
    """conf/delay/timing.yaml's value of ``key`` (read once per process)."""
    from experiments.settings.defaults import option

    return option("delay", "timing")[key]


Delay = Annotated[NoDelay | FixedDelay | UniformDelay | TimingDelay, Field(discriminator="model")]
ARTIFICIAL = ("fixed", "uniform")


# ---------------------------------------------------------------------------------------------------- engine
class Costs(Frozen):
    """Fixed costs of the simulated clock, seconds (null: from the calibration). ``grad_s`` is at batch_size."""

    grad_s: Annotated[float, Field(gt=0, le=MAX_COST_S)] | None
    """A gradient with no cost leaves the clock nothing to time (every time 0, every speed-up undefined)."""
    update_s: Seconds | None
    latency_s: Seconds | None
    overhead_s: Seconds | None
    overhead_idle_s: Seconds | None
    late_s: Seconds | None


class Fault(Frozen):
    """Fault injection for tests: worker ``kill_worker`` fails (``mode``) once handed an iterate of version >=
    ``at_update``."""

    mode: Literal["kill", "hang"]
    kill_worker: NonNegativeInt | None
    at_update: NonNegativeInt | None

    @model_validator(mode="after")
    def _fault_has_a_worker(self) -> Fault:
        if self.at_update is not None and self.kill_worker is None:
            raise ValueError(
                f"engine.fault.at_update={self.at_update}: says when engine.fault.kill_worker fails, which is null "
                "(name the worker)"
            )
        return self


class EngineBase(Frozen):
    """Keys every engine has."""

    warmup_updates: NonNegativeInt
    compute: Literal["real", "emulated"]
    compute_base_s: Annotated[float, Field(gt=0, le=MAX_COST_S)] | None
    """An emulated gradient's base seconds: above 0, at most a day (as the simulated clock's costs)."""

    @model_validator(mode="after")
    def _base_only_emulated(self) -> EngineBase:
        if self.compute == "real" and self.compute_base_s is not None:
            raise ValueError(
                f"engine.compute_base_s={self.compute_base_s}: only engine.compute=emulated reads it (real compute "
                "times the gradients themselves; set engine.compute_base_s=null)"
            )
        return self


class Simulated(EngineBase):
    """One process, event-driven, exact staleness, the simulated clock (experiments/engines/simulated.py)."""

    name: Literal["simulated"]
    clock: Literal["simulated"]
    transport: Literal["shared_memory", "distributed"]
    calibration: str | None
    handoff: Literal["auto", "spin", "block"]
    """The hand-off of the modelled shared_memory engine: ``auto`` as that engine does (it spins when every process
    has a core of its own, else blocks), or fixed."""
    cores: PositiveInt | Literal["dedicated"] | None
    """Cores the master and the P workers share: null = this machine's, ``dedicated`` = one per process (as many
    as it takes; the dedicated-core clock), or a number (>= P + 1 gives every process its own)."""
    costs: Costs
    trace: str | None
    """A real run's timeline.csv: the trace-driven twin replays its times (experiments/engines/twin.py)."""

    @model_validator(mode="after")
    def _emulated(self) -> Simulated:
        if self.calibration is not None and not self.calibration.strip():
            raise ValueError(
                f"engine.calibration={self.calibration!r}: must name a file (null: this machine's, "
                "experiments/clock/calibration.py)"
            )
        why = None if self.trace is None else file_problem(self.trace)
        if why is not None:
            raise ValueError(f"engine.trace={self.trace}: {why} (a real run's timeline.csv)")
        if self.compute == "real" and self.costs.late_s is not None:
            raise ValueError(
                f"engine.costs.late_s={self.costs.late_s}: only engine.compute=emulated reads it (real compute has no "
                "emulated wait to end late; set engine.costs.late_s=null)"
            )
        if self.compute == "emulated":
            if self.compute_base_s is None:
                raise ValueError(
                    "engine.compute_base_s=null: engine=simulated with engine.compute=emulated needs "
                    "the base seconds of a gradient"
                )
            if self.costs.grad_s is not None:
                raise ValueError(
                    f"engine.costs.grad_s={self.costs.grad_s}: set either engine.costs.grad_s or "
                    "engine.compute_base_s, not both"
                )
        return self


MAX_TIMEOUT_S = 1e6
"""``engine.timeout_s``'s bound: 11.6 days (``epoll`` takes milliseconds in a C int: 24.8 days)."""


class RealEngine(EngineBase):
    """Keys of both real engines (master and P worker processes, wall clock)."""

    clock: Literal["wall"]
    threads_per_worker: PositiveInt
    pin_workers: bool
    start_method: Literal["spawn", "forkserver"]
    timeout_s: Annotated[float, Field(gt=0, le=MAX_TIMEOUT_S)]
    """Seconds the master and the workers wait on one another before a peer counts as lost; at most
    :data:`MAX_TIMEOUT_S` (a wait longer than about 24 days overflows the poll and timestamp calls that take it)."""
    evaluation: Literal["snapshot", "drain"]
    snapshot_mb: PositiveFloat
    on_worker_loss: Literal["continue", "fail"]
    fault: Fault
    compute_wait: Literal["sleep", "spin"]
    predict: bool
    """After the run, the simulated clock's predictions of it (experiments/clock/predict.py) in its summary row."""


class SharedMemory(RealEngine):
    """A master and P worker processes on one machine, shared buffers (experiments/engines/shared_memory.py)."""

    name: Literal["shared_memory"]
    handoff: Literal["auto", "spin", "block"]
    colocate: bool


class Distributed(RealEngine):
    """torch.distributed master (rank 0) and P worker ranks (experiments/engines/distributed.py)."""

    name: Literal["distributed"]
    backend: Literal["auto", "gloo", "nccl"]
    master_addr: str
    master_port: int = Field(ge=1, le=65535)

    @field_validator("master_addr")
    @classmethod
    def _an_address(cls, v: str) -> str:  # '' resolved to nothing: "does not resolve (Name or service not known)"
        return not_blank("engine.master_addr", v, "be an address of this machine (the default 127.0.0.1: loopback)")


Engine = Annotated[Simulated | SharedMemory | Distributed, Field(discriminator="name")]
WALL_ENGINES = ("shared_memory", "distributed")
