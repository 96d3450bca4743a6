"""An in-process transport that answers every request at once: the master loop (experiments/engines/driver.py)
with no worker processes, for measuring the loop's own cost (benchmarks/bench_engines.py, ``driver``) and for
testing it (tests/engines/test_real_engines.py)."""

from __future__ import annotations

from contextlib import nullcontext

import torch

from experiments.engines.transport import Arrival


class LoopbackTransport:
    """The transport interface of :class:`experiments.engines.driver.MasterLoop`: ``issue(w, x, version)`` queues
    an arrival of worker w at that version with minibatch loss 1.0; ``wait(timeout)`` returns every queued arrival
    at once (never blocks); ``gradient(w)`` is one constant (d,) float32 tensor of 1e-3 for every worker;
    ``restart(w, x, version)`` replaces w's queued arrival, if ``wait`` has not returned it yet (the old computation
    stopped before it was sent), by one at the new version; an old arrival ``wait`` already returned reaches the master
    loop as a reply sent before the stop. ``restarts`` logs ``(worker, version)`` per restart.

    Args:
        d: the parameter dimension.
    """

    cuts_off_silent = True

    def __init__(self, d: int) -> None:
        self.pending: list[Arrival] = []
        self.g = torch.full((d,), 1e-3)
        self.restarts: list[tuple[int, int]] = []

    def issue(self, w: int, x: torch.Tensor, version: int) -> None:
        self.pending.append(Arrival(w, version, 1.0))

    def restart(self, w: int, x: torch.Tensor, version: int) -> None:
        self.restarts.append((w, version))
        self.pending = [a for a in self.pending if a.worker != w]
        self.pending.append(Arrival(w, version, 1.0))

    def wait(self, timeout: float | None) -> list:
        events, self.pending = self.pending, []
        return events

    def gradient(self, w: int) -> torch.Tensor:
        return self.g

    def drop(self, w: int) -> None:
        pass

    def hold(self):
        return nullcontext()
