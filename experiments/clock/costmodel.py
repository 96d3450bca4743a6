"""The simulated clock's cost model, in closed form. No measuring here: the costs come from
:mod:`experiments.clock.calibration` (measured once per machine) or from the config (``engine.costs.*``).

Terms (seconds; each is charged where it occurs):
- ``grad_s(B)``: one stochastic gradient at minibatch size B, as a worker process sees it (one math thread);
- ``latency_s``: in-flight time of one message of d floats (an iterate to a worker, a gradient to the master):
  it delays the worker that waits for it, not the master;
- ``overhead_s``: the master's busy time per gradient besides the update itself: receive it, reply with the new
  iterate, bookkeeping (engine-dependent, rule-independent), when the gradient was already waiting for it (a busy,
  "hot" master: measured with the master saturated);
- ``overhead_idle_s``: the same when the master had been waiting for the gradient (blocked, woken by it): its own
  return from the wait, and caches that the worker's gradient -- the problem's data -- has since filled with other
  lines (measured in P = 1 runs, where the master always waits: charged where it occurs);
- ``update_s``: one master update (the rule's ``step`` at dimension d).

The master is busy ``update_s + overhead_idle_s`` for a gradient it waited for and ``master_s = update_s +
overhead_s`` for one that waited for it. An async worker's cycle is ``grad + latency + update_s + overhead_idle_s +
latency`` (gradient out, served by a waiting master, iterate back), so with P equal constant-time workers an update
takes ``cycle / P`` while the master keeps waiting and ``master_s`` once gradients queue; the closed form takes
``max(cycle / P, master_s)`` (exact on both sides; between ``master_s`` and ``update_s + overhead_idle_s`` the
event simulation mixes the two) and the master saturates at ``P* = cycle / master_s`` (:func:`saturation_workers`).
A sync round (global batch split across the P workers) costs ``latency + slowest grad + latency + overhead_idle +
(P - 1) overhead + update`` (the master waited for the round's first gradient) -- with P = 1 one async update.
The simulated engine (:mod:`experiments.engines.simulated`) plays exactly these charges event by event;
:func:`predicted_time_per_epoch` is its closed form (tests check they agree for fixed costs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

COST_KEYS = ("grad_s", "update_s", "latency_s", "overhead_s", "overhead_idle_s")
"""The keys of ``engine.costs`` (each null = calibrated) and of the ``cost_*`` summary columns."""


@dataclass
class CostModel:
    """Costs of the simulated clock for one run (seconds).

    Attributes:
        grad: minibatch size -> seconds of one gradient (worker process, one math thread).
        update_s: one master update.
        latency_s: in-flight time of one message (delays the worker).
        overhead_s: master busy time per gradient besides the update (receive, reply, bookkeeping), the gradient
            having waited for the master.
        overhead_idle_s: the same for a gradient the master waited for (None: ``overhead_s``).
        transport: which real engine the message terms were measured on (``shared_memory`` or ``distributed``),
            or ``config`` when fixed by the config.
        spread: relative spread (max - min) / median of each calibrated term's repeats (empty for fixed terms).
    """

    grad: dict
    update_s: float
    latency_s: float
    overhead_s: float
    transport: str = "shared_memory"
    spread: dict = field(default_factory=dict)
    overhead_idle_s: float | None = None
    round_s: float | None = None
    """Sync rounds on shared cores: one measured zero-cost round at the run's P (hand-out, replies, gather and
    bookkeeping; no update), replacing ``2 latency + overhead_idle + (P - 1) overhead`` (None: that formula)."""

    def __post_init__(self) -> None:
        if self.overhead_idle_s is None:
            self.overhead_idle_s = self.overhead_s

    @property
    def master_s(self) -> float:
        """The master's busy seconds per gradient that waited for it: ``update_s + overhead_s``."""
        return self.update_s + self.overhead_s

    @property
    def master_idle_s(self) -> float:
        """The master's busy seconds per gradient it waited for: ``update_s + overhead_idle_s``."""
        return self.update_s + self.overhead_idle_s

    @property
    def busy_table(self) -> tuple:
        """The master's busy seconds per gradient, ``[waited][applied]``: ``waited`` when the master had been
        waiting for the gradient, ``applied`` when it updated with it (a staleness policy may discard or hold it:
        the overhead alone)."""
        return ((self.overhead_s, self.master_s), (self.overhead_idle_s, self.master_idle_s))

    def sync_round_s(self, slowest_s: float, workers: int) -> float:
        """One sync round whose gradients took ``slowest_s`` (the last one done): ``2 latency + slowest +
        overhead_idle + (P - 1) overhead + update`` (the master waited for the round's first gradient), or with a
        measured round, ``slowest + round_s + update``."""
        if self.round_s is not None:
            return slowest_s + self.round_s + self.update_s
        return (
            2 * self.latency_s + slowest_s + self.overhead_idle_s + (int(workers) - 1) * self.overhead_s + self.update_s
        )

    def grad_s(self, batch_size: int) -> float:
        """Seconds of one gradient at minibatch size ``batch_size`` (KeyError if the run did not price it)."""
        return self.grad[int(batch_size)]

    def cycle_s(self, batch_size: int) -> float:
        """One async worker's cycle with a constant compute time, served by a waiting master: ``grad + 2 latency +
        master_idle_s`` (seconds)."""
        return self.grad_s(batch_size) + 2 * self.latency_s + self.master_idle_s

    def as_dict(self, batch_size: int) -> dict:
        """The run's costs as flat numbers (seconds) for summary columns and provenance: ``grad_s`` at
        ``batch_size``, ``update_s``, ``latency_s``, ``overhead_s``, ``master_s``, ``overhead_idle_s`` (and
        ``round_s`` where a sync round was measured)."""
        out = {
            "grad_s": self.grad_s(batch_size),
            "update_s": self.update_s,
            "latency_s": self.latency_s,
            "overhead_s": self.overhead_s,
            "master_s": self.master_s,
            "overhead_idle_s": self.overhead_idle_s,
        }
        if self.round_s is not None:
            out["round_s"] = self.round_s
        return out


def predicted_time_per_epoch(costs: CostModel, workers: int, batch_size: int, num_train: int, protocol: str) -> float:
    """Seconds per epoch for P equal constant-time workers, in steady state (the closed form of the model above).

    Args:
        costs: the run's :class:`CostModel` (for sync it must price ``ceil(batch_size / workers)``).
        workers: P >= 1.
        batch_size: B, samples per gradient (async) or per round (sync, split across the workers).
        num_train: N, samples per epoch.
        protocol: ``async`` or ``sync``.

    Returns:
        ``N / B`` updates times ``max(cycle / P, master_s)`` (async) or times the round cost (sync).
    """
    steps = num_train / batch_size
    P = int(workers)
    if protocol == "sync":
        slowest = costs.grad_s(math.ceil(batch_size / P))
        return steps * costs.sync_round_s(slowest, P)
    return steps * max(costs.cycle_s(batch_size) / P, costs.master_s)


def saturation_workers(costs: CostModel, batch_size: int) -> float:
    """P* = cycle / master_s: the worker count past which the async master is the bottleneck (an update can not
    take less than ``master_s``). Infinite when the master costs nothing."""
    return costs.cycle_s(batch_size) / costs.master_s if costs.master_s > 0 else math.inf
