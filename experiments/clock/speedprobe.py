"""A fixed piece of CPU work, timed: how fast this machine runs now, against when its costs were calibrated.

The calibration times the probe right after measuring each of its entries (``probe_s``,
experiments/clock/calibration.py) and every wall-clock run times it again in its master process just before its
workers start (summary columns ``speed_probe_s`` and ``cal_probe_s``): ``speed_probe_s / cal_probe_s`` > 1 says the
machine ran that much slower than when it was calibrated. A snapshot kept for analysis, not a correction: a virtual
machine's cores may change speed faster than a run lasts, so a probe taken before a run cannot say how fast the run
went.

The work: ``A.T @ sigmoid(A @ w)`` with A a fixed 256 x 784 float32 matrix (a logistic-regression gradient's shape),
one math thread, in the calling process; :func:`measure` is the median seconds per call of :data:`CALLS` calls. A
CPU probe: it sees a slower core or a core shared with other work, not a slower wake-up or message.
"""

from __future__ import annotations

import statistics
import time

import torch

CALLS = 200
SHAPE = (256, 784)


def measure(calls: int = CALLS) -> float:
    """Median seconds per call of the probe's work over ``calls`` calls (one math thread while it runs)."""
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(*SHAPE, generator=gen)
    w = torch.randn(SHAPE[1], generator=gen) / SHAPE[1] ** 0.5
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for _ in range(5):
            a.t() @ torch.sigmoid(a @ w)
        times = []
        for _ in range(calls):
            t0 = time.perf_counter()
            a.t() @ torch.sigmoid(a @ w)
            times.append(time.perf_counter() - t0)
    finally:
        torch.set_num_threads(threads)
    return statistics.median(times)
