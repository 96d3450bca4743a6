"""Delay models (APAM.md §1-2): which iterate a gradient is computed at, and how long workers take.

Two kinds:
- artificial delays (``fixed``, ``uniform``; the paper's Sec. 5.4): the staleness of each gradient is drawn by rule,
  whatever the workers' timing; the async algorithms only.
- ``timing``: each worker's compute time is drawn from a law; staleness then comes out of the arrival order in the
  event queue of the simulated engine (and, on real engines, out of the real arrival order).
"""
from __future__ import annotations

import inspect
import math
from collections import deque

import numpy as np
import torch


class ArtificialDelay:
    """Chooses the staleness of the next gradient under an artificial delay model.

    ``none``: tau = 0. ``fixed``: tau exactly, once ``tau`` updates exist (tau_k = min(tau, k)).
    ``uniform``: the gradient is taken at one of the min(D, k+1) newest iterates, uniformly, D = max_delay + 1
    (paper Sec. 5.4), so tau_k is uniform on {0, ..., min(D, k+1) - 1}.

    Args:
        model: ``none``, ``fixed`` or ``uniform``.
        tau: the fixed delay (``fixed``), >= 0.
        max_delay: the maximum delay D - 1 (``uniform``), >= 0.
        seed: seed of the uniform draws.
    """

    BLOCK = 4096

    def __init__(self, model: str, tau: int = 0, max_delay: int = 0, seed: int = 0) -> None:
        if model not in ("none", "fixed", "uniform"):
            raise ValueError(f"delay.model={model!r}: not an artificial delay model")
        self.model = model
        self.tau = int(tau)
        self.max_delay = int(max_delay)
        self._rng = np.random.default_rng(seed)
        self._block: list[int] = []  # uniform: pending draws on {0, ..., D - 1}, the next one last

    @property
    def window(self) -> int:
        """How many newest iterates must be kept (the ring size)."""
        return {"none": 1, "fixed": self.tau + 1, "uniform": self.max_delay + 1}[self.model]

    def choose(self, k: int) -> int:
        """Staleness for a gradient used at master version k (k updates applied so far).

        ``uniform`` draws from the seeded generator one at a time while k + 1 < D, then in blocks of
        ``BLOCK`` draws on {0, ..., D - 1} (a numpy call costs microseconds; the engine asks once per update)."""
        if self.model == "none":
            return 0
        if self.model == "fixed":
            return min(self.tau, k)
        window = self.max_delay + 1
        if k + 1 < window:
            return int(self._rng.integers(0, k + 1))
        if not self._block:
            self._block = self._rng.integers(0, window, size=self.BLOCK).tolist()[::-1]
        return self._block.pop()


class IterateRing:
    """The ``size`` newest iterates, by version; bounded memory (size * d floats).

    Args:
        size: number of iterates kept (>= 1).
    """

    def __init__(self, size: int) -> None:
        self.size = max(1, int(size))
        self._ring: deque[tuple[int, torch.Tensor]] = deque(maxlen=self.size)

    def push(self, version: int, x: torch.Tensor) -> None:
        """Keep a copy of iterate ``x`` at ``version`` (reuses the buffer of the iterate that falls out)."""
        if len(self._ring) == self.size:
            _, buf = self._ring.popleft()
            buf.copy_(x)
        else:
            buf = x.detach().clone()
        self._ring.append((version, buf))

    def get(self, version: int) -> torch.Tensor:
        """The iterate at ``version``; raises KeyError when it is no longer kept."""
        newest = self._ring[-1][0]
        pos = len(self._ring) - 1 - (newest - version)
        if pos < 0 or pos >= len(self._ring):
            raise KeyError(f"iterate version {version} not kept (newest {newest}, ring size {self.size})")
        v, x = self._ring[pos]
        assert v == version
        return x


class ComputeTimes:
    """Per-gradient compute times of P workers on the simulated clock (seconds).

    The time of one gradient of worker w is ``base_s * slowdown_w * xi``, where ``slowdown_w`` is ``slowdown`` for
    the first ``slow_workers`` workers and 1 otherwise, and xi has mean 1 under every law:
    ``constant`` (xi = 1), ``exponential`` (xi ~ Exp(1)), ``lognormal`` (xi = exp(sigma Z - sigma^2/2), Z ~ N(0,1)).

    Args:
        workers: P.
        law: ``constant``, ``exponential`` or ``lognormal``.
        sigma: lognormal spread (>= 0).
        slow_workers: how many workers are slowed (>= 0).
        slowdown: their factor s (>= 1 slows them).
        seed: seed of the draws (one generator; draws happen in event order, so a run is reproducible).
    """

    def __init__(self, workers: int, law: str = "constant", sigma: float = 0.0, slow_workers: int = 0,
                 slowdown: float = 1.0, seed: int = 0) -> None:
        if law not in ("constant", "exponential", "lognormal"):
            raise ValueError(f"delay.law={law!r}: must be constant, exponential or lognormal")
        self.workers = int(workers)
        self.law = law
        self.sigma = float(sigma)
        self.factor = np.ones(self.workers)
        self.factor[: int(slow_workers)] = float(slowdown)
        self._rng = np.random.default_rng(seed)

    def draw(self, worker: int, base_s: float) -> float:
        """Seconds worker ``worker`` needs for one gradient whose mean cost is ``base_s``."""
        if self.law == "constant":
            xi = 1.0
        elif self.law == "exponential":
            xi = float(self._rng.exponential(1.0))
        else:
            xi = math.exp(self.sigma * float(self._rng.standard_normal()) - 0.5 * self.sigma**2)
        return float(base_s * self.factor[worker] * xi)


def compute_times(cfg, seed: int) -> ComputeTimes:
    """The run's compute-time law: a :class:`ComputeTimes` for ``cfg.workers`` workers built from ``cfg.delay``
    (every key of ``cfg.delay`` that the constructor takes: ``law``, ``sigma``, ``slow_workers``, ``slowdown``, ...)
    when ``delay.model`` is ``timing``, else constant equal workers. One builder for the simulated engine and the
    emulated compute of the real engines (:mod:`experiments.engines.emulation`), so both draw from the same law."""
    d = cfg.delay
    kwargs = {}
    if d.model == "timing":
        params = inspect.signature(ComputeTimes).parameters
        kwargs = {k: d[k] for k in d if k in params and k not in ("workers", "seed")}
    return ComputeTimes(int(cfg.workers), seed=int(seed), **kwargs)
