"""Emulated compute on the real engines: ``engine.compute=emulated``.

Each worker computes its gradient for real (learning is unchanged), then waits until a target wall time has passed
since it began. Targets come from the same compute-time law as ``delay=timing`` on the simulated engine
(:meth:`experiments.training.delays.ComputeTimes.of_delay`: law, sigma, slow workers, slowdown) with the base time
``engine.compute_base_s`` (seconds; null = this machine's calibrated gradient cost,
:mod:`experiments.clock.calibration`).
So a 2-core machine runs 1..32 workers whose gradients take as long as a wider machine's would, while the master,
the transport and the staleness are real.

A gradient's timing is one of three outcomes (:func:`Emulator.finish`'s code): ``ON_TIME``; ``OVERRAN``: its real
computation alone took more than ``(1 + OVERRUN_TOL)`` x its target (the worker never waited: the machine could not run
the requested compute -- no cost model charges that); ``LATE``: the computation fit, but the wait ended more than
``OVERRUN_TOL`` x target after the target (the sleep's wake-up). Late wake-ups happen on an idle machine too, and the
simulated twin of an emulated run charges them, drawn from the calibrated samples (``late|sleep``,
engines/simulated.py); a run whose late wake-ups are much more frequent than the calibrated ones is one whose cores were
oversubscribed. So the master counts both (``overruns`` and ``late_wakeups`` in trace and summary), the run adds
``late_expected`` (the count the calibrated wake-ups give for the same targets, :func:`expected_late`), and a run is
flagged when its overruns plus its late wake-ups beyond the expected ones exceed ``OVERRUN_FLAG`` of its gradients
(:func:`plots.validation.overrun_count`). Each gradient reports ``(compute_s, target_s, code)`` to the master
(``compute_s``: seconds from the start of the gradient to the end of the wait, as the worker measured them; with
``compute=real`` the target is NaN and the code ON_TIME); the run writes ``<run_dir>/compute_times.csv`` (``worker,
index, compute_s, target_s``).

Worker w draws its targets from its own generator (seed ``seed + 1 + STREAM_SEED_STRIDE * w``, the law's
draws for worker w of :class:`experiments.training.delays.ComputeTimes`). Waiting (``engine.compute_wait``): ``sleep``
(default; ``time.sleep``, no busy loop: workers share the machine's cores with the master, so 32 of them fit on 2
cores) or ``spin`` (a busy loop on ``time.perf_counter`` that holds the core as a real gradient does, for a worker
with a core of its own: the calibration of idle-dependent costs, experiments/clock/calibration.py).
"""

from __future__ import annotations

import bisect
import math
import time
from dataclasses import dataclass, replace

from experiments.engines.workers import STREAM_SEED_STRIDE
from experiments.training.delays import ComputeTimes

COMPUTE_TIMES_COLUMNS = ["worker", "index", "compute_s", "target_s"]
OVERRUN_TOL = 0.10
"""A gradient whose computation takes over ``(1 + OVERRUN_TOL) x target`` overran; one whose wait ends over
``OVERRUN_TOL x target`` after the target woke up late."""
OVERRUN_FLAG = 0.05
"""The report flags an emulated run whose overruns plus unexpected late wake-ups exceed this fraction of its
gradients."""
ON_TIME, OVERRAN, LATE = 0, 1, 2
"""Codes of a gradient's timing (:meth:`Emulator.finish`)."""


class Emulator:
    """One worker's emulated compute: targets from the law, then a wait.

    Args:
        worker: this worker's id.
        base_s: the mean target (seconds) before the law's per-worker factor and draw; None: real compute (the
            gradient is only timed).
        times: the compute-time law the targets are drawn from (None with real compute).
        wait: ``sleep`` or ``spin`` (module docstring).
    """

    def __init__(
        self, worker: int, base_s: float | None = None, times: ComputeTimes | None = None, wait: str = "sleep"
    ) -> None:
        self.worker, self.base_s, self.spin = int(worker), base_s, wait == "spin"
        self._times = times if base_s is not None else None

    def finish(self, t0: float) -> tuple[float, float, int]:
        """Called right after the gradient that began at ``t0`` (``time.perf_counter``) is computed: wait for its
        target; return (seconds since t0 after the wait, target seconds or NaN, code): ``OVERRAN`` when the
        computation alone took over ``(1 + OVERRUN_TOL)`` x target, ``LATE`` when the wait ended over
        ``OVERRUN_TOL`` x target after the target, else ``ON_TIME`` (always with real compute)."""
        now = time.perf_counter()
        if self._times is None:
            return now - t0, math.nan, ON_TIME
        target = self._times.draw(self.worker, self.base_s)
        if now - t0 > (1 + OVERRUN_TOL) * target:
            return now - t0, target, OVERRAN
        left = t0 + target - now
        if left > 0 and self.spin:
            end = t0 + target
            while now < end:
                now = time.perf_counter()
        elif left > 0:
            time.sleep(left)
            now = time.perf_counter()
        return now - t0, target, LATE if now - t0 > (1 + OVERRUN_TOL) * target else ON_TIME


@dataclass(frozen=True)
class EmulationSpec:
    """What a worker process needs to build its :class:`Emulator` (picklable): P, the run's seed, its delay
    settings block (the compute-time law), the base seconds (None: real compute) and the wait."""

    workers: int
    seed: int
    delay: object
    base_s: float | None
    wait: str = "sleep"
    xi: tuple | None = None

    def build(self, worker: int) -> Emulator:
        """Worker ``worker``'s emulator; its targets come from its own generator (module docstring)."""
        if self.base_s is None:
            return Emulator(worker)
        times = ComputeTimes.of_delay(
            self.workers, self.delay, seed=self.seed + 1 + STREAM_SEED_STRIDE * worker, xi=self.xi
        )
        return Emulator(worker, self.base_s, times, self.wait)


def with_emulation(specs: list, settings, base_s: float | None, xi=None) -> list:
    """The engine's :class:`experiments.engines.workers.WorkerSpec` list with the emulation spec attached (every
    worker reports its compute seconds; emulated ones also wait for their targets).

    Args:
        specs: one WorkerSpec per worker.
        settings: the run's :class:`~experiments.settings.schema.RunSettings`.
        base_s: the emulated base seconds of one gradient at ``batch_size`` (resolved before the run,
            :class:`experiments.clock.resolve.RunCosts`); None with real compute. A worker with a smaller minibatch
            (sync, split batch) gets ``base * b_w / batch_size``, as the simulated engine scales a fixed gradient
            cost.
        xi: the ``measured`` compute-time law's draws (:class:`experiments.clock.resolve.RunCosts`), else None.
    """
    B = settings.batch_size
    wait = getattr(settings.engine, "compute_wait", "sleep")

    def spec_for(s):
        return EmulationSpec(
            settings.workers, settings.seed, settings.delay, None if base_s is None else base_s * s.batch / B, wait, xi
        )

    return [replace(s, emulation=spec_for(s)) for s in specs]


def worker_emulator(spec) -> Emulator:
    """The worker-side emulator of a WorkerSpec (real compute, only timed, when none is attached)."""
    emu = getattr(spec, "emulation", None)
    return emu.build(spec.worker) if emu is not None else Emulator(spec.worker)


def log_arrival(log: list, counts: list, ev) -> int:
    """Master side: append ``(worker, index, compute_s, target_s)`` of arrival ``ev`` to ``log`` (index: the
    worker's gradient count, ``counts[w]``); return its timing code (ON_TIME, OVERRAN or LATE)."""
    w = ev.worker
    log.append((w, counts[w], ev.compute_s, ev.target_s))
    counts[w] += 1
    return int(ev.timing)


def expected_late(targets, lateness) -> float:
    """How many of gradients with these ``targets`` (seconds) would wake up late (over ``OVERRUN_TOL`` x target after
    it) if their waits ended as late as the calibrated ``lateness`` samples (seconds, any order; the simulated twin's
    draws: :func:`experiments.clock.resolve.emulated_lateness`): the sum over targets of the fraction of samples above
    ``OVERRUN_TOL`` x target. NaN targets (real compute) count 0; NaN without samples.

    Example: samples [0.1, 0.2, 0.3, 2.0] ms and two 10 ms targets (threshold 1 ms): 2 x 1/4 = 0.5."""
    if not lateness:
        return math.nan
    late = sorted(float(v) for v in lateness)
    n = len(late)
    return float(sum((n - bisect.bisect_right(late, OVERRUN_TOL * t)) / n for t in targets if t == t))


def compute_times_rows(log: list) -> list[dict]:
    """Rows of ``compute_times.csv`` (target empty with real compute)."""
    return [{"worker": w, "index": i, "compute_s": c, "target_s": ("" if t != t else t)} for w, i, c, t in log]
