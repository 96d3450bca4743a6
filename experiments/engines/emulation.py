"""Emulated compute on the real engines (issue 12 item 1): ``engine.compute=emulated``.

Each worker computes its gradient for real (learning is unchanged), then waits until a target wall time has passed
since it began. Targets come from the same compute-time law as ``delay=timing`` on the simulated engine
(:func:`experiments.delays.compute_times`: law, sigma, slow workers, slowdown) with the base time
``engine.compute_base_s`` (seconds; null = this machine's calibrated gradient cost, :mod:`experiments.calibration`).
So a 2-core machine runs 1..32 workers whose gradients take as long as a wider machine's would, while the master,
the transport and the staleness are real.

A gradient *overruns* when it ended more than ``OVERRUN_TOL`` (10%) after its target: its real computation alone
took longer, or the worker woke up late from its wait (a loaded machine); either way the run did not emulate what
it was asked to. Each gradient reports ``(compute_s, target_s, overran)`` to the master
(``compute_s``: seconds from the start of the gradient to the end of the wait, as the worker measured them; with
``compute=real`` the target is NaN); the master counts overruns (``overruns`` in trace and summary) and the run
writes ``<run_dir>/compute_times.csv`` (``worker, index, compute_s, target_s``).

Worker w draws its targets from its own generator (seed ``cfg.seed + 1 + STREAM_SEED_STRIDE * w``, the law's
draws for worker w of :class:`experiments.delays.ComputeTimes`). Waiting (``engine.compute_wait``): ``sleep``
(default; ``time.sleep``, no busy loop: workers share the machine's cores with the master, so 32 of them fit on 2
cores) or ``spin`` (a busy loop on ``time.perf_counter`` that holds the core as a real gradient does, for a worker
with a core of its own: the calibration of idle-dependent costs, experiments/calibration.py).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace

from experiments.delays import compute_times

COMPUTE_TIMES_COLUMNS = ["worker", "index", "compute_s", "target_s"]
OVERRUN_TOL = 0.10
"""A gradient that ends later than ``(1 + OVERRUN_TOL) x target`` is an overrun."""
OVERRUN_FLAG = 0.05
"""The report flags an emulated run whose overruns exceed this fraction of its gradients."""


class Emulator:
    """One worker's emulated compute: targets from the law, then a wait.

    Args:
        cfg: the run's config (``workers``, ``seed``, ``delay``); unused with real compute.
        worker: this worker's id.
        base_s: the mean target (seconds) before the law's per-worker factor and draw; None: real compute (the
            gradient is only timed).
        wait: ``sleep`` or ``spin`` (module docstring).
    """

    def __init__(self, cfg, worker: int, base_s: float | None, wait: str = "sleep") -> None:
        from experiments.engines._proc import STREAM_SEED_STRIDE

        self.worker, self.base_s, self.spin = int(worker), base_s, wait == "spin"
        self._times = compute_times(cfg, seed=int(cfg.seed) + 1 + STREAM_SEED_STRIDE * int(worker)) \
            if base_s is not None else None

    def finish(self, t0: float) -> tuple[float, float, bool]:
        """Called right after the gradient that began at ``t0`` (``time.perf_counter``) is computed: wait for its
        target; return (seconds since t0 after the wait, target seconds or NaN, whether it overran: ended later than
        ``(1 + OVERRUN_TOL)`` x target)."""
        now = time.perf_counter()
        if self._times is None:
            return now - t0, math.nan, False
        target = self._times.draw(self.worker, self.base_s)
        left = t0 + target - now
        if left > 0 and self.spin:
            end = t0 + target
            while now < end:
                now = time.perf_counter()
        elif left > 0:
            time.sleep(left)
            now = time.perf_counter()
        return now - t0, target, now - t0 > (1 + OVERRUN_TOL) * target


@dataclass(frozen=True)
class EmulationSpec:
    """What a worker process needs to build its :class:`Emulator` (picklable): the plain-dict config parts and
    the base seconds (None: real compute)."""

    workers: int
    seed: int
    delay: dict
    base_s: float | None
    wait: str = "sleep"

    def build(self, worker: int) -> Emulator:
        from omegaconf import OmegaConf

        cfg = OmegaConf.create({"workers": self.workers, "seed": self.seed, "delay": self.delay})
        return Emulator(cfg, worker, self.base_s, self.wait)


def base_seconds(cfg, problem, batch_size: int) -> float | None:
    """The emulated base time of one gradient: ``engine.compute_base_s``, or (null) this machine's calibrated
    gradient cost at ``batch_size`` (measured on first use); None with ``engine.compute=real``."""
    if (cfg.engine.get("compute") or "real") != "emulated":
        return None
    if cfg.engine.get("compute_base_s") is not None:
        return float(cfg.engine.compute_base_s)
    from experiments.calibration import Calibration, grad_key, measure_grad_samples  # the layer below, at call time

    cal = Calibration(cfg.engine.get("calibration") or None)
    return float(cal.entry(grad_key(problem, batch_size), lambda: measure_grad_samples(problem, batch_size))["value"])


def with_emulation(specs: list, cfg, problem) -> list:
    """The engine's :class:`experiments.engines._proc.WorkerSpec` list with the emulation spec attached (every
    worker reports its compute seconds; emulated ones also wait for their targets). The base refers to
    ``batch_size``; a worker with a smaller minibatch (sync, split batch) gets ``base * b_w / batch_size``, as the
    simulated engine scales a fixed ``engine.costs.grad_s``."""
    from omegaconf import OmegaConf

    B = int(cfg.batch_size)
    base = base_seconds(cfg, problem, B)
    delay = OmegaConf.to_container(cfg.delay, resolve=True)

    def spec_for(s):  # a split sync batch: each worker's base scales with its share (as the simulated engine's)
        return EmulationSpec(int(cfg.workers), int(cfg.seed), delay, None if base is None else base * s.batch / B,
                             cfg.engine.get("compute_wait") or "sleep")

    return [replace(s, emulation=spec_for(s)) for s in specs]


def worker_emulator(spec) -> Emulator:
    """The worker-side emulator of a WorkerSpec (real compute, only timed, when none is attached)."""
    emu = getattr(spec, "emulation", None)
    return emu.build(spec.worker) if emu is not None else Emulator(None, spec.worker, None)


def log_arrival(log: list, counts: list, ev) -> int:
    """Master side: append ``(worker, index, compute_s, target_s)`` of arrival ``ev`` to ``log`` (index: the
    worker's gradient count, ``counts[w]``); return 1 if it overran, else 0."""
    w = ev.worker
    log.append((w, counts[w], ev.compute_s, ev.target_s))
    counts[w] += 1
    return int(ev.overran)


def compute_times_rows(log: list) -> list[dict]:
    """Rows of ``compute_times.csv`` (target empty with real compute)."""
    return [{"worker": w, "index": i, "compute_s": c, "target_s": ("" if t != t else t)} for w, i, c, t in log]
