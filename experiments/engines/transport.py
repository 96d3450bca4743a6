"""The interface between the master loop (engines/driver.py) and a real engine's way of moving messages.

A transport moves iterates to workers and gradients back; the master loop decides who computes what. Two transports
implement it (shared_memory.py, distributed.py) and an in-process one serves tests and benchmarks (loopback.py).
"""

from __future__ import annotations

import math
from contextlib import AbstractContextManager, nullcontext
from typing import NamedTuple, Protocol

import torch


class Arrival(NamedTuple):
    """Worker ``worker`` delivered a gradient computed at master version ``version``; ``loss``: its minibatch loss.
    The gradient itself is ``transport.gradient(worker)`` (valid until the next ``issue`` to that worker).
    A NamedTuple: one is made per gradient on the master's critical path, and a NamedTuple is the cheapest immutable
    record to make."""

    worker: int
    version: int
    loss: float
    compute_s: float = math.nan  # seconds the gradient took in the worker, emulated wait included
    target_s: float = math.nan  # its emulated target (NaN: real compute)
    timing: int = 0  # timing code (emulation.ON_TIME, OVERRAN: computation over its target, LATE wake-up)
    sent_s: float = math.nan  # when the worker sent it (time.perf_counter: the same clock in every process)
    stale: bool = False  # the reply to a request the master has since superseded by ``restart``


class Lost(NamedTuple):
    """Worker ``worker`` is gone (its process died, its connection broke, or it stayed silent); ``reason`` says how."""

    worker: int
    reason: str


class Transport(Protocol):
    """What the master loop needs from an engine's transport.

    Attributes:
        cuts_off_silent: True when a silent worker can be dropped and the others continue; False when a silent peer
            breaks the whole transport (the run then fails).
    """

    cuts_off_silent: bool

    def issue(self, w: int, x: torch.Tensor, version: int) -> None:
        """Hand worker ``w`` the iterate ``x`` (shape (d,)) of master version ``version`` and ask for one gradient
        there. ``x`` may be read after the call returns only by the transport's own copy."""

    def wait(self, timeout: float | None) -> list:
        """The next events (:class:`Arrival` or :class:`Lost`, one or more); [] when ``timeout`` seconds passed
        without any (None: wait as long as it takes)."""

    def restart(self, w: int, x: torch.Tensor, version: int) -> None:
        """Worker ``w`` is computing a gradient the master no longer wants (a staleness policy's stop): hand it the
        iterate ``x`` of master version ``version`` (newer than its request's) at once, as :meth:`issue` does, and
        make it abandon its computation (the shared-memory and locally started distributed workers: SIGUSR1, whose
        handler raises in the worker between two operations of its computation; it then computes at ``x`` on the
        same minibatch). If it had already sent the old gradient, that one still arrives: an :class:`Arrival` with the
        old version (or ``stale`` set), which the master discards unread. Workers that cannot be interrupted (torchrun
        ranks) are refused by the settings (``algorithm.policy.restart``)."""

    def gradient(self, w: int) -> torch.Tensor:
        """Worker ``w``'s last gradient, shape (d,); valid until the next :meth:`issue` to ``w``."""

    def drop(self, w: int) -> None:
        """Stop worker ``w`` and forget it (it died or stayed silent)."""

    def hold(self) -> AbstractContextManager:
        """A context around an evaluation: the workers may wait a long time for their next message."""

    def close(self) -> None:
        """Stop every worker and free the transport's resources; no process is left behind."""


class NoWorkers:
    """The transport of a run without worker processes (``workers=0``: the authors' master alone computes every
    gradient): nothing to hand out, nothing ever arrives."""

    cuts_off_silent = True

    def issue(self, w: int, x: torch.Tensor, version: int) -> None:
        raise RuntimeError("a run without workers hands out no work")

    def wait(self, timeout: float | None) -> list:
        return []

    def gradient(self, w: int) -> torch.Tensor:
        raise RuntimeError("a run without workers receives no gradient")

    def drop(self, w: int) -> None:
        pass

    def hold(self) -> AbstractContextManager:
        return nullcontext()

    def close(self) -> None:
        pass
