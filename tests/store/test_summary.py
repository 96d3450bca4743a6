"""A run's summary row and its trace rows' constant columns from its typed settings (experiments/store/summary.py):
the columns every summary.csv row has, the delay model's columns, the compute mode that pairs measured and simulated
rows, and the numbers that come from the trace and the engine's result."""

import math
from collections import Counter

import pytest

from conftest import settings_for
from experiments.clock.costmodel import CostModel
from experiments.engines import EngineResult
from experiments.store.sink import SUMMARY_COLUMNS
from experiments.store.summary import compute_columns, constant_columns, crossing, summary_row


@pytest.mark.parametrize(
    "overrides,expect",
    [
        (
            ["workers=3", "delay=fixed", "delay.tau=3"],
            dict(delay_model="fixed", max_delay=3, tau=3, straggler_sigma=0.0, compute_law="constant"),
        ),
        (["delay=uniform", "delay.max_delay=7"], dict(delay_model="uniform", max_delay=7, straggler_slowdown=1.0)),
        (["delay=none"], dict(delay_model="none", max_delay=0, tau=0)),
        (
            [
                "workers=4",
                "delay.law=lognormal",
                "delay.sigma=0.5",
                "delay.slow_workers=1",
                "delay.slowdown=8",
                "delay.spread=sqrt",
            ],
            dict(
                delay_model="timing",
                max_delay=0,
                straggler_sigma=0.5,
                straggler_slowdown=8.0,
                compute_law="lognormal",
                compute_spread="sqrt",
            ),
        ),
    ],
)
def test_the_constant_columns_describe_the_run_s_setting(overrides, expect):
    s = settings_for(["experiment_id=e", "seed=5", "batch_size=16", "algorithm.lr_factor=2", *overrides])
    cols = constant_columns(s, "r1")
    assert (cols["experiment"], cols["run_id"], cols["problem"], cols["algorithm"], cols["engine"]) == (
        "e",
        "r1",
        "logreg_fmnist",
        "apam",
        "simulated",
    )
    assert (cols["workers"], cols["seed"], cols["batch_size"], cols["lr_factor"]) == (s.workers, 5, 16, 2.0)
    for k, v in expect.items():
        assert cols[k] == v, k
    if s.delay.model == "uniform":
        assert math.isnan(cols["tau"])  # a uniform delay has no one tau


@pytest.mark.parametrize(
    "overrides,expect",
    [
        ([], ("real", None, "shared_memory")),  # calibrated gradients
        (["engine.costs.grad_s=0.002"], ("emulated", 0.002, "shared_memory")),  # a given gradient time
        (
            ["engine.compute=emulated", "engine.compute_base_s=0.02", "engine.transport=distributed"],
            ("emulated", 0.02, "distributed"),
        ),  # the twin of an emulated run
        (["engine=shared_memory"], ("real", None, "shared_memory")),
        (
            ["engine=distributed", "engine.compute=emulated", "engine.compute_base_s=0.03"],
            ("emulated", 0.03, "distributed"),
        ),
    ],
)
def test_the_compute_columns_pair_measured_and_simulated_rows(overrides, expect):
    cols = compute_columns(settings_for(overrides))
    mode, base, transport = expect
    assert (cols["compute"], cols["transport"]) == (mode, transport)
    assert math.isnan(cols["compute_base_s"]) if base is None else cols["compute_base_s"] == base


def test_a_summary_row_has_every_column_and_its_numbers_come_from_the_trace_and_the_result():
    s = settings_for(["workers=2", "problem.target_loss=0.5"])
    rows = [
        dict(
            constant_columns(s, "r"),
            epoch=e,
            updates=u,
            gradients=u,
            time_s=t,
            train_loss=loss,
            train_acc=0.0,
            test_loss=loss,
            test_acc=0.0,
            opt_gap=math.nan,
        )
        for e, u, t, loss in ((0.0, 0, 0.0, 0.7), (0.5, 10, 1.0, 0.55), (1.0, 20, 2.0, 0.5), (1.5, 30, 3.0, 0.4))
    ]
    costs = CostModel(grad={64: 1e-3}, update_s=1e-5, latency_s=2e-5, overhead_s=3e-5).as_dict(64)
    result = EngineResult(
        updates=30, gradients=30, samples=600, time_s=3.0, histogram=Counter({0: 10, 1: 20}), costs=costs
    )
    row = summary_row(s, "r", rows, result, "ok", "", num_train=400)
    assert set(SUMMARY_COLUMNS) <= set(row)  # a simulated run's row: its costs (cost_*) too
    assert row["cost_grad_s"] == 1e-3 and row["cost_master_s"] == pytest.approx(4e-5)
    assert (row["status"], row["clock"], row["updates"], row["gradients"]) == ("ok", "simulated", 30, 30)
    assert row["epochs"] == 1.5 and row["time_s"] == 3.0
    assert (row["time_to_target_s"], row["updates_to_target"]) == (
        2.0,
        20,
    )  # interpolated: the last row above 0.5 is at 1.0 s, the first after it at 2.0 s
    assert row["staleness_mean"] == pytest.approx(20 / 30) and row["staleness_max"] == 1
    assert row["final_train_loss"] == 0.4 and row["target_loss"] == 0.5
    assert crossing(rows, None) is None and crossing(rows, 0.1) is None
    # stopped before the engine returned: the row stops where the trace does
    cut = summary_row(s, "r", rows[:2], None, "failed", "interrupted (SIGTERM)", num_train=400)
    assert (cut["updates"], cut["epochs"], cut["time_s"], cut["status"]) == (10, 0.5, 1.0, "failed")
    assert math.isnan(cut["time_to_target_s"]) and cut["message"] == "interrupted (SIGTERM)"
