"""The run's costs are resolved from the calibration before its engine starts (experiments/clock/resolve.py): the
simulated engine takes the cost model it is handed and never reads or measures anything; the runner resolves first;
a real engine with emulated compute gets its base seconds from the calibration."""

import json

import pytest

from algorithms import build_rule
from conftest import (
    GRAD,
    LAT,
    OVER,
    UPD,
    QuadraticProblem,
    compose_cfg,
    needs_fmnist,
    pinned,
    recorder_for,
    settings_for,
)
from experiments.clock import measure
from experiments.clock import resolve as resolve_mod
from experiments.clock.calibration import Calibration, grad_key, lateness_key
from experiments.clock.costmodel import CostModel
from experiments.clock.resolve import RunCosts, resolve
from experiments.engines import simulated

MODEL = CostModel(grad={8: GRAD}, update_s=UPD, latency_s=LAT, overhead_s=OVER)


@pytest.fixture
def no_calibration(monkeypatch):
    """Any read, entry or measurement of a calibration fails the test."""

    def refuse(*args, **kwargs):
        raise AssertionError("the calibration was touched after the costs were resolved")

    for name in ("read", "entry", "drop"):
        monkeypatch.setattr(Calibration, name, refuse)
    for name in (
        "p1_run_samples",
        "measure_message_terms",
        "measure_update_s",
        "measure_grad_samples",
        "measure_lateness_samples",
        "probe_grad_samples",
    ):
        monkeypatch.setattr(resolve_mod, name, refuse)
        monkeypatch.setattr(measure, name, refuse)
    monkeypatch.setattr(resolve_mod, "resolve", refuse)


def test_a_simulated_run_takes_the_costs_it_is_handed_and_never_touches_the_calibration(tmp_path, no_calibration):
    # no engine.costs.* set: every cost would come from the calibration, were the engine to look
    settings = settings_for(
        pinned(
            [
                f"results_dir={tmp_path}",
                "batch_size=8",
                "algorithm=async_sgd",
                "algorithm.lr=0.05",
                "algorithm.lr_schedule=constant",
                "workers=1",
                "updates=50",
                "eval_every=1",
                f"engine.calibration={tmp_path}/cal.json",
            ]
        )
    )
    assert settings.engine.costs.grad_s is None and settings.engine.costs.update_s is None
    problem = QuadraticProblem()
    costs = RunCosts(costs=MODEL, calibration="resolved-before")
    result = simulated.run(
        problem, build_rule("sgd", lr=0.05), settings, recorder_for(problem, settings, "simulated"), costs
    )
    assert result.updates == 50
    # P = 1: every update is one cycle of the handed model (grad + 2 latency + update + overhead), exactly
    assert result.time_s == pytest.approx(50 * (GRAD + 2 * LAT + UPD + OVER))
    assert result.costs == MODEL.as_dict(8) and result.provenance["calibration"] == "resolved-before"
    assert not (tmp_path / "cal.json").exists()


@needs_fmnist
def test_the_runner_resolves_the_costs_before_the_engine_starts(tmp_path, monkeypatch):
    from experiments import runner

    order = []

    def resolved(settings, problem, rule, calibration=None):
        order.append("resolve")
        return RunCosts(costs=MODEL, calibration="resolved-before")

    real_run = simulated.run

    def run(problem, rule, settings, recorder, costs):
        order.append("engine")
        assert costs.costs is MODEL
        for name in ("read", "entry"):  # from here on nothing reads the calibration
            monkeypatch.setattr(Calibration, name, lambda *a, **k: pytest.fail("touched while the engine ran"))
        return real_run(problem, rule, settings, recorder, costs)

    monkeypatch.setattr(runner, "resolve", resolved)
    monkeypatch.setattr(simulated, "run", run)
    overrides = pinned([f"results_dir={tmp_path}", "problem.max_train=256", "batch_size=8", "workers=1", "updates=20"])
    assert runner.execute(compose_cfg(overrides), overrides) == "ok"
    assert order == ["resolve", "engine"]
    provenance = json.loads(next((tmp_path / "adhoc" / "runs").glob("*/provenance.json")).read_text())
    assert provenance["calibration"] == "resolved-before"


def test_resolve_gives_each_engine_what_it_needs_from_the_calibration(tmp_path, monkeypatch):
    problem = QuadraticProblem()
    rule = build_rule("sgd", lr=0.1)
    path = tmp_path / "cal.json"
    path.write_text(
        json.dumps(
            {
                "machine": {},
                "entries": {
                    grad_key(problem, 8): {"value": 3e-3, "samples": [3e-3], "spread": 0.0},
                    lateness_key(0.02): {"value": 1e-4, "samples": [1e-4, 2e-4], "spread": 1.0},
                },
            }
        )
    )
    for name in ("p1_run_samples", "measure_message_terms", "measure_grad_samples", "measure_lateness_samples"):
        monkeypatch.setattr(resolve_mod, name, lambda *a, **k: pytest.fail("must reuse the file"))
    cal = Calibration(path)
    costs = ["engine.costs.update_s=1e-6", "engine.costs.latency_s=2e-6", "engine.costs.overhead_s=3e-6"]
    # simulated: the cost model, gradients from the file; an emulated twin's lateness samples too
    sim = resolve(settings_for(pinned(["batch_size=8", *costs])), problem, rule, cal)
    assert sim.costs.grad == {8: 3e-3} and sim.lateness is None and sim.base_s is None
    assert sim.calibration == str(path)
    twin = resolve(
        settings_for(pinned(["batch_size=8", *costs, "engine.compute=emulated", "engine.compute_base_s=0.02"])),
        problem,
        rule,
        cal,
    )
    assert twin.costs.grad == {8: 0.02} and twin.lateness == (1e-4, 2e-4)
    # a real engine: nothing for real compute, the calibrated gradient as the base of emulated compute
    real = resolve(settings_for(pinned(["engine=shared_memory", "batch_size=8"])), problem, rule, cal)
    assert (real.costs, real.lateness, real.base_s) == (None, None, None)
    emulated = resolve(
        settings_for(pinned(["engine=shared_memory", "batch_size=8", "engine.compute=emulated"])), problem, rule, cal
    )
    assert emulated.base_s == 3e-3 and emulated.costs is None
    given = resolve(
        settings_for(
            pinned(["engine=shared_memory", "batch_size=8", "engine.compute=emulated", "engine.compute_base_s=0.05"])
        ),
        problem,
        rule,
        cal,
    )
    assert given.base_s == 0.05
