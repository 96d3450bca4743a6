"""Delay models (APAM.md §1-2): which iterate a gradient is computed at, and how long workers take.

Two kinds:
- artificial delays (``fixed``, ``uniform``; the paper's Sec. 5.4): the staleness of each gradient is drawn by rule,
  whatever the workers' timing; the async algorithms only.
- ``timing``: each worker's compute time is drawn from a law; staleness then comes out of the arrival order in the
  event queue of the simulated engine (and, on real engines, out of the real arrival order).
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np
import torch

from experiments.log import get_logger


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


LAWS = ("constant", "exponential", "lognormal", "pareto", "replay", "measured")
SPREADS = ("equal", "sqrt", "linear")
REPLAY_COLUMNS = ("worker", "index", "compute_s", "target_s")


class ComputeTimes:
    """Per-gradient compute times of P workers on the simulated clock (seconds), and emulated compute on real engines.

    The time of one gradient of worker w (w = 0, ..., P-1) is ``base_s * spread_w * slowdown_w * xi``:

    - ``spread_w``: fixed heterogeneity of the asynchronous-SGD literature (Tyurin and Richtarik NeurIPS 2023;
      Maranjyan et al. ICML 2025): ``equal`` 1, ``sqrt`` sqrt(w + 1), ``linear`` w + 1 (worker i = w + 1 takes
      sqrt(i) or i times the base);
    - ``slowdown_w``: ``slowdown`` for the first ``slow_workers`` workers, 1 otherwise (stragglers);
    - xi, mean 1 under every random law: ``constant`` (xi = 1), ``exponential`` (Exp(1)), ``lognormal``
      (exp(sigma Z - sigma^2/2), Z ~ N(0,1)), ``pareto`` (heavy-tailed: xi = (a-1)/a * (1 + Lomax(a)), a classical
      Pareto with tail index a = ``shape`` > 1 and mean 1; infinite variance for a <= 2).
    - ``measured``: xi drawn uniformly from ``samples``, this machine's measured gradient times over their median
      (:func:`experiments.clock.resolve.measured_law`): the measured distribution's shape, tail included, at the
      calibrated median ``base_s``;
    - ``replay``: the compute times recorded from a real-engine run (``<run_dir>/compute_times.csv``, columns
      ``worker,index,compute_s,target_s``): worker w's ``compute_s`` in ``index`` order, in seconds as recorded
      (``base_s``, spread and slowdown are ignored: the recording already has them). When a worker's recording is
      exhausted it starts over from its first entry and a RuntimeWarning says so once per worker
      (``cycled`` lists the workers that wrapped).

    Args:
        workers: P.
        law: one of LAWS.
        sigma: lognormal spread (>= 0).
        slow_workers: how many workers are slowed (>= 0).
        slowdown: their factor s (>= 1 slows them).
        seed: seed of the draws (one generator; draws happen in event order, so a run is reproducible).
        spread: one of SPREADS.
        shape: Pareto tail index a (> 1).
        replay: path of the recorded compute times (``law=replay`` only).
        samples: the draws of xi (``law=measured`` only).

    Raises:
        ValueError naming ``delay.<key>`` (or the replay file) and the value: an unknown law or spread, shape <= 1,
        ``law=replay`` without a file, a file without the columns, with a non-finite or negative ``compute_s``, or
        without rows for a worker in [0, P).
    """

    def __init__(
        self,
        workers: int,
        law: str = "constant",
        sigma: float = 0.0,
        slow_workers: int = 0,
        slowdown: float = 1.0,
        seed: int = 0,
        spread: str = "equal",
        shape: float = 1.5,
        replay: str | None = None,
        samples=None,
    ) -> None:
        if law not in LAWS:
            raise ValueError(f"delay.law={law!r}: must be one of {', '.join(LAWS)}")
        if spread not in SPREADS:
            raise ValueError(f"delay.spread={spread!r}: must be one of {', '.join(SPREADS)}")
        if law == "pareto" and not float(shape) > 1.0:
            raise ValueError(f"delay.shape={shape!r}: the Pareto tail index must be > 1 (finite mean)")
        self.workers = int(workers)
        self.law = law
        self.sigma = float(sigma)
        self.shape = float(shape)
        self.spread = spread
        self.factor = np.ones(self.workers)
        if spread == "sqrt":
            self.factor = np.sqrt(np.arange(1, self.workers + 1, dtype=float))
        elif spread == "linear":
            self.factor = np.arange(1, self.workers + 1, dtype=float)
        self.factor[: int(slow_workers)] *= float(slowdown)
        self._rng = np.random.default_rng(seed)
        if law == "measured" and not samples:
            raise ValueError("delay.law=measured: no measured gradient times to draw from")
        self._samples = np.asarray(samples, dtype=float) if samples else None
        self.cycled: set[int] = set()
        self._replay: list[list[float]] = []
        self._next: list[int] = []
        if law == "replay":
            if not replay:
                raise ValueError("delay.replay=null: law=replay needs the path of a compute_times.csv")
            self._replay = load_compute_times(replay, self.workers)
            self._next = [0] * self.workers

    @classmethod
    def of_delay(cls, workers: int, delay, seed: int, xi=None) -> ComputeTimes:
        """The compute-time law of a run's ``delay`` settings block (:mod:`experiments.settings.schema`): its law,
        sigma, slow workers, slowdown, spread, shape and replay file under ``delay=timing``; constant equal workers
        under every other delay model (the artificial delays choose staleness by rule, not by timing). ``xi``: the
        ``measured`` law's draws. One builder for the simulated engine and the emulated compute of the real engines,
        so both draw from the same law."""
        if delay.model != "timing":
            return cls(int(workers), seed=int(seed))
        return cls(
            int(workers),
            law=delay.law,
            sigma=delay.sigma,
            slow_workers=delay.slow_workers,
            slowdown=delay.slowdown,
            seed=int(seed),
            spread=delay.spread,
            shape=delay.shape,
            replay=delay.replay,
            samples=xi,
        )

    def mean_s(self, worker: int, base_s: float) -> float:
        """Expected seconds of one gradient of ``worker`` (the replayed mean under ``law=replay``)."""
        if self.law == "replay":
            return float(np.mean(self._replay[worker]))
        return float(base_s * self.factor[worker])

    def draw(self, worker: int, base_s: float) -> float:
        """Seconds worker ``worker`` needs for one gradient whose mean cost (equal workers) is ``base_s``."""
        if self.law == "constant":
            xi = 1.0
        elif self.law == "exponential":
            xi = float(self._rng.exponential(1.0))
        elif self.law == "lognormal":
            xi = math.exp(self.sigma * float(self._rng.standard_normal()) - 0.5 * self.sigma**2)
        elif self.law == "pareto":
            a = self.shape
            xi = (a - 1.0) / a * (1.0 + float(self._rng.pareto(a)))
        elif self.law == "measured":
            xi = float(self._samples[self._rng.integers(len(self._samples))])
        else:
            return self._draw_replay(worker)
        return float(base_s * self.factor[worker] * xi)

    def _draw_replay(self, worker: int) -> float:
        times, i = self._replay[worker], self._next[worker]
        if i == len(times):
            i = 0
            if worker not in self.cycled:
                self.cycled.add(worker)
                get_logger(__name__).warning(
                    f"delay.law=replay: worker {worker}'s {len(times)} recorded compute times are used "
                    "up; replaying them again from the first"
                )
        self._next[worker] = i + 1
        return times[i]


MAX_COMPUTE_S = 86400.0
"""The longest recorded gradient a replay takes (a day, as experiments/settings/fields.py ``MAX_COST_S``)."""


def load_compute_times(path, workers: int) -> list[list[float]]:
    """Per worker w in [0, workers): its recorded ``compute_s`` (seconds) in ``index`` order, from a CSV with the
    columns ``worker,index,compute_s,target_s`` (written by the real engines as ``<run_dir>/compute_times.csv``;
    ``target_s`` is not used here). Extra workers in the file are ignored.

    Raises:
        ValueError naming the file: unreadable, missing columns or one given twice, a worker or index that is not a
        whole number >= 0, a (worker, index) recorded twice, a compute_s that is not seconds from 0 to
        :data:`MAX_COMPUTE_S`, or a worker in [0, workers) without rows.
    """
    import pandas as pd  # lazy: pandas only to read a compute-times file; worker processes import this module

    try:
        df = pd.read_csv(path)
    except (OSError, ValueError) as exc:
        raise ValueError(f"delay.replay={path}: cannot read ({exc})") from None
    missing = [c for c in REPLAY_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(
            f"delay.replay={path}: missing column(s) {', '.join(missing)} (expected {','.join(REPLAY_COLUMNS)})"
        )
    twice = [c for c in df.columns if isinstance(c, str) and c.rsplit(".", 1)[0] in REPLAY_COLUMNS and c[-2:] == ".1"]
    if twice:  # pandas names a repeated column compute_s.1: which one the run would take is a guess
        raise ValueError(f"delay.replay={path}: column {twice[0][:-2]} given twice")
    for col in ("worker", "index"):
        v = pd.to_numeric(df[col], errors="coerce")
        if not (np.isfinite(v) & (v == np.round(v)) & (v >= 0)).all():
            raise ValueError(f"delay.replay={path}: {col} must be whole numbers >= 0 on every row")
    twice = df[df.duplicated(["worker", "index"])]
    if len(twice):  # two times for one gradient: which one the run replays would be a guess
        w, i = (int(twice.iloc[0][c]) for c in ("worker", "index"))
        raise ValueError(f"delay.replay={path}: worker {w}'s gradient {i} is recorded twice")
    t = pd.to_numeric(df["compute_s"], errors="coerce")
    if not (np.isfinite(t) & (t >= 0) & (t <= MAX_COMPUTE_S)).all():
        raise ValueError(f"delay.replay={path}: compute_s must be seconds from 0 to {MAX_COMPUTE_S:g} (a day)")
    out = []
    for w in range(int(workers)):
        rows = df[df["worker"] == w].sort_values("index", kind="stable")
        if rows.empty:
            raise ValueError(
                f"delay.replay={path}: no recorded compute times for worker {w} "
                f"(the run has {workers} workers; the file has {sorted(df['worker'].unique().tolist())})"
            )
        out.append([float(v) for v in rows["compute_s"]])
    return out
