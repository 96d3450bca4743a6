"""The simulated clock's predictions of a measured run, made right after it (``engine.predict=true``).

A measured run (a real engine) is compared with what the clock says it should have taken, three ways, each from the
simulated engine's own event loops on the run's settings, timing only (a stand-in problem of the run's dimension and
size whose gradients cost nothing here: the clock charges the calibrated costs; the learning does not change a
time):

- ``pred``: the clock as every simulated result uses it -- this machine's cores shared by the master and the workers
  (engine.cores = this machine's), the measured compute-time law, costs from the stored calibration;
- ``sitting``: the same model with costs measured in the same sitting as the run (a calibration file per experiment,
  problem, engine and seed, ``<experiment>/sittings/``: its entries are measured by the first run of the block that
  needs them and reused by the others), so that a change of the machine's speed between calibration and run is not
  read as the model's error;
- ``twin``: the trace-driven twin (engines/twin.py) fed the run's own timeline: the measured costs, the model's
  queueing and ordering.

``pred`` against ``sitting`` is the drift; ``twin`` against the measurement is the model's structure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from experiments.clock.calibration import Calibration
from experiments.clock.measure import ZeroCostProblem
from experiments.clock.resolve import resolve
from experiments.engines import simulated
from experiments.settings.defaults import option
from experiments.settings.schema import RunSettings
from experiments.training.recorder import Recorder

KINDS = ("pred", "sitting", "twin")


@dataclass(frozen=True)
class Prediction:
    """One prediction of a measured run: seconds on the simulated clock over the same timed updates, seconds per
    epoch, and the staleness histogram (staleness -> updates)."""

    time_s: float
    time_per_epoch_s: float
    histogram: dict = field(default_factory=dict)


def sitting_path(settings: RunSettings) -> Path:
    """The sitting's calibration file of a measured run: one per experiment, problem, engine and seed."""
    s = settings
    return Path(s.results_dir) / s.experiment_id / "sittings" / f"{s.problem.name}-{s.engine.name}-seed{s.seed}.json"


def clock_settings(settings: RunSettings, calibration: str | None, trace: str | None = None) -> RunSettings:
    """The simulated engine's settings for predicting a measured run: the run's own, on engine=simulated modelling
    the run's engine, on this machine's cores, with the measured compute-time law under real compute."""
    e = settings.engine
    engine = option("engine", "simulated")
    engine.update(
        transport=e.name,
        cores=None,
        warmup_updates=e.warmup_updates,
        compute=e.compute,
        compute_base_s=e.compute_base_s,
        calibration=calibration,
        trace=trace,
        handoff=getattr(e, "handoff", "auto"),
    )
    data = settings.model_dump()
    data.update(engine=engine, progress=False)
    if settings.delay.model == "timing" and e.compute == "real" and trace is None:  # the law's own parameters go
        neutral = {k: option("delay", "timing")[k] for k in ("sigma", "shape")}  # back to values that change nothing
        data["delay"] = {**data["delay"], "law": "measured", **neutral}
    return RunSettings.model_validate(data)


def predict(settings: RunSettings, problem, rule, kind: str, timeline: str | None = None) -> Prediction:
    """The ``kind`` prediction (module docstring) of the measured run ``settings`` of ``problem`` with ``rule``;
    ``timeline``: the run's timeline.csv (``twin`` only). Costs the calibration lacks are measured here.

    Raises:
        ValueError: an unknown kind, or ``twin`` without a timeline.
    """
    if kind not in KINDS:
        raise ValueError(f"prediction {kind!r}: must be one of {', '.join(KINDS)}")
    if kind == "twin" and timeline is None:
        raise ValueError("the trace-driven twin needs the run's timeline.csv")
    cal = str(sitting_path(settings)) if kind == "sitting" else None
    s = clock_settings(settings, cal, trace=timeline if kind == "twin" else None)
    if kind == "sitting":
        Path(cal).parent.mkdir(parents=True, exist_ok=True)
    costs = resolve(s, problem, rule, Calibration(cal) if cal else None)
    stand_in = ZeroCostProblem(problem.dim, problem.num_train)
    recorder = Recorder(
        stand_in,
        {"run_id": "prediction"},
        eval_every=1e9,
        total_epochs=None,
        f_star=None,
        clock="simulated",
        progress=False,
    )
    result = simulated.run(stand_in, rule, s, recorder, costs)
    recorder.close()
    timed = result.timed_samples if result.timed_samples is not None else result.samples
    per_epoch = result.time_s / (timed / problem.num_train) if timed else float("nan")
    return Prediction(result.time_s, per_epoch, dict(result.histogram))
