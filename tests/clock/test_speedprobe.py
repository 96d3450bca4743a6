"""The speed probe (experiments/clock/speedprobe.py): a short timed loop whose time a run records beside the
calibration's, so that a machine running slower than when it was calibrated shows."""

import math

import pytest

from experiments.clock import speedprobe
from experiments.clock.calibration import Calibration, calibrated_probe


def test_speed_probe_is_a_positive_time_and_the_calibrations_is_read_never_measured(tmp_path):
    t = speedprobe.measure(calls=20)
    assert 0 < t < 0.1
    path = tmp_path / "cal.json"
    assert math.isnan(calibrated_probe(Calibration(path))) and not path.exists()  # no file written
    cal = Calibration(path)
    cal.entry("grad|x", lambda: [3e-5, 4e-5, 5e-5])
    cal.entry("update|y", lambda: [1e-6])
    probes = [e["probe_s"] for e in cal.read()["entries"].values()]
    assert len(probes) == 2 and all(0 < p < 0.1 for p in probes)  # timed right after each entry's samples
    assert calibrated_probe(cal) == pytest.approx(sum(probes) / 2)
