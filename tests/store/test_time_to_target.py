"""Time to target (experiments.store.summary.crossing; experiments.analysis.targets for any trace and target):
interpolated between the last evaluation above the target and the next, counted only when the run stays below from
there on; the targets the serial runs set; and evaluation dense enough (>= 50 points a budget) where times are
compared."""

import math

import pandas as pd
import pytest

from experiments.analysis.targets import (
    loss_at,
    reference_targets,
    run_times,
    time_to_target,
)
from experiments.settings.compose import compose_jobs, job_cover, profile_sweep
from experiments.store.summary import crossing

# a hand-made trace: (seconds, updates, training loss); it dips below 0.5 at t = 2, goes back above at t = 3, and
# crosses for good between t = 3 (0.6) and t = 4 (0.3)
POINTS = [(0.0, 0, 2.0), (1.0, 10, 1.0), (2.0, 20, 0.4), (3.0, 30, 0.6), (4.0, 40, 0.3), (5.0, 50, 0.2)]
ROWS = [{"time_s": t, "updates": u, "train_loss": loss, "epoch": u / 10} for t, u, loss in POINTS]


def test_interpolated_between_the_last_point_above_and_the_next():
    hit = crossing(ROWS, 0.45)
    # 3 + (0.6 - 0.45) / (0.6 - 0.3) * (4 - 3)
    assert hit["time_s"] == pytest.approx(3.5, abs=1e-12) and hit["updates"] == pytest.approx(35.0, abs=1e-12)
    assert crossing(ROWS, 0.7)["time_s"] == pytest.approx(1.0 + 0.3 / 0.6)  # 1.0 -> 0.4 crosses 0.7 at 1.5


def test_a_dip_that_goes_back_above_does_not_count():
    hit = crossing(ROWS, 0.5)
    assert hit["time_s"] == pytest.approx(3.0 + 0.1 / 0.3)  # not 2 - (0.5-0.4)/(1-0.4): the dip at t = 2
    assert crossing(ROWS, 0.2)["time_s"] == 5.0  # reached at the last point exactly
    assert crossing(ROWS, 0.1) is None  # never
    assert crossing(ROWS + [{"time_s": 6.0, "updates": 60, "train_loss": math.nan}], 0.5) is None  # NaN counts as above
    assert crossing(ROWS, 3.0) == {"time_s": 0.0, "updates": 0.0}  # below from the first point on
    assert crossing(ROWS, None) is None and crossing([], 0.5) is None


def test_the_analysis_applies_the_same_rule_to_any_trace_and_target():
    trace = pd.DataFrame(ROWS)
    assert time_to_target(trace, 0.5) == pytest.approx((3.0 + 0.1 / 0.3, 30.0 + 1.0 / 0.3))
    assert all(math.isnan(v) for v in time_to_target(trace, 0.1))
    assert all(math.isnan(v) for v in time_to_target(trace, 0.5, status="diverged"))
    assert loss_at(trace, 2.5) == pytest.approx(0.5) and math.isnan(loss_at(trace, 5.5))


def test_targets_come_from_the_best_serial_method_at_half_and_nine_tenths_of_its_budget():
    def run(alg, p, seed, losses):
        rid = f"{alg}-{p}-{seed}"
        summary = {
            "run_id": rid,
            "problem": "q",
            "algorithm": alg,
            "workers": p,
            "seed": seed,
            "status": "ok",
            "epochs": 10.0,
            "final_train_loss": losses[-1],
        }
        trace = [
            {"run_id": rid, "epoch": float(e), "time_s": float(e) / p, "updates": 10 * e, "train_loss": v}
            for e, v in enumerate(losses)
        ]
        return summary, trace

    curve = [1.0 - 0.05 * e for e in range(11)]  # 1.0 at epoch 0 ... 0.5 at epoch 10
    worse = [1.0 - 0.02 * e for e in range(11)]
    runs = (
        [run("apam", 1, s, [v - 0.01 * s for v in curve]) for s in (0, 1)]
        + [run("sgd", 1, 0, worse)]
        + [run("apam", 8, 0, curve)]
    )
    summary = pd.DataFrame([s for s, _ in runs])
    traces = pd.DataFrame([r for _, t in runs for r in t])
    [t] = reference_targets(summary, traces).to_dict("records")
    assert t["reference"] == "apam" and t["seeds"] == 2 and t["epochs"] == 10.0
    assert t["target_0.5"] == pytest.approx(0.75 - 0.005) and t["target_0.9"] == pytest.approx(0.55 - 0.005)
    times = run_times(summary, traces, pd.DataFrame([t])).set_index("run_id")
    # P = 8 runs seed 0's curve: T(1/2) = 0.745 lies between its epochs 5 (0.75) and 6 (0.70); time = epoch / 8
    assert times.loc["apam-8-0", "time_to_0.5"] == pytest.approx((5 + 0.005 / 0.05) / 8)
    assert math.isinf(times.loc["sgd-1-0", "time_to_0.9"])  # never reached: +inf


@pytest.mark.parametrize("experiment", ["async_methods", "lenet5_speedup"])
@pytest.mark.parametrize("profile", ["long", "paper"])
def test_compared_budgets_have_at_least_50_evaluation_points(experiment, profile, tmp_path):
    from experiments.reproduce import reference_sweep

    base = [f"experiment={experiment}", f"profile={profile}", f"results_dir={tmp_path}"]
    sweeps = [base] + (
        [base + [f"{k}={v}" for k, v in reference_sweep(experiment, profile).items()]]
        if reference_sweep(experiment, profile)
        else []
    )
    for sweep in sweeps:
        jobs = compose_jobs(job_cover(sweep + profile_sweep(sweep), strength=1))
        for cfg in jobs:
            assert cfg.epochs / cfg.eval_every >= 50 - 1e-9, (cfg.problem.name, cfg.epochs, cfg.eval_every)
