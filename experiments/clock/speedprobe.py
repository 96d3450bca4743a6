"""How fast this machine runs a fixed piece of work now, against when the simulated clock was calibrated (issue 12).

The simulated clock's terms are measured once per machine (experiments/clock/calibration.py); a measured run comes later,
and this virtual machine's speed drifts: the same model_validation sweep (same code, same calibration) gave a mean
|error| of 28.6%, 11.6% and 21.5% three times within 40 minutes on 2026-12-01, every row moving together. The probe
was meant to tell that drift apart from the model's own error: the calibration times it right after measuring each
of its terms (``probe_s`` in every entry, experiments/clock/calibration.py), and every wall-clock run times it again in its
master process just before its workers start (summary columns ``speed_probe_s``, and ``cal_probe_s``: the median
of the calibration's). ``speed_probe_s / cal_probe_s`` > 1: the machine ran that much slower than when it was
calibrated.

What it found (2026-12-02, quick profile): a snapshot, not a correction. The probe takes about 34 us or about
50-60 us a call, nothing between, and flips between the two within a second on either core (8 probes, pinned to
core 0 and 1 in turn, machine otherwise idle: 55, 34, 52, 59, 62, 57, 34, 60 us): this VM's cores switch between
two speeds about 1.6x apart faster than a measured run lasts, so a 10 ms probe before a 1-second run cannot say how
fast the run went, and a report that scaled the simulated times by it made the errors worse (27.8% mean against
13.7%). The columns stay in the summary for analysis; the report does not use them.

The work: ``A.T @ sigmoid(A @ w)`` with A a fixed 256 x 784 float32 matrix (a logistic-regression gradient's shape),
one math thread, in the calling process; :func:`measure` is the median seconds per call of :data:`CALLS` calls
(about 10 ms in all). A CPU probe: it sees a slower core or a core shared with the host's other guests, not a
slower wake-up or message.
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


def calibrated(path=None) -> float:
    """The calibration's probe: the median ``probe_s`` of its entries, seconds per call (NaN when none has one, as
    in files written before the probe; it is never measured here: a reference taken now would not be the
    calibration's)."""
    from experiments.clock.calibration import Calibration

    probes = [e["probe_s"] for e in Calibration(path).read()["entries"].values() if e.get("probe_s") is not None]
    return statistics.median(probes) if probes else float("nan")
