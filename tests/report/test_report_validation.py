"""model_validation's section: why rows miss the clock's goal, and the master's busy time beside what the simulated
twin charges (experiments.report.sections.misses); which clock a time claim rests on (experiments.report.clock)."""

import pandas as pd
import pytest

from experiments.report import clock as C
from experiments.report.sections.misses import master_busy, why_misses
from helpers import run


def test_why_misses_names_each_group_with_its_numbers():
    df = pd.DataFrame(
        [
            {
                "algorithm": "apam",
                "compute": "real",
                "workers": 2,
                "percent_error": -33.0,
                "compute_base_s": 0.0,
                "late us": float("nan"),
            },
            {
                "algorithm": "sync_amsgrad",
                "compute": "emulated",
                "workers": 16,
                "percent_error": -24.5,
                "compute_base_s": 0.05,
                "late us": 85.0,
            },
            {
                "algorithm": "apam",
                "compute": "emulated",
                "workers": 1,
                "percent_error": -14.5,
                "compute_base_s": 0.002,
                "late us": 100.0,
            },
            {
                "algorithm": "apam",
                "compute": "emulated",
                "workers": 8,
                "percent_error": -2.0,
                "compute_base_s": 0.05,
                "late us": 150.0,
            },
        ]
    )
    text = why_misses(df)
    assert "**Why 3 row(s) miss the 10% goal** (in each the simulated clock is faster than measured)" in text
    assert "real compute at P = 2-2 (1 rows, 33-33%)" in text
    assert "sync AMSGrad with emulated compute at P = 16-16 (1 rows, 24-24%)" in text
    assert "one worker or async (1 rows, 14-14%)" in text and "100-100 us, 5-5% of the base" in text
    assert why_misses(df[df["percent_error"].abs() <= 10]) == ""
    one = pd.DataFrame(
        [
            {
                "algorithm": "apam",
                "compute": "real",
                "workers": 1,
                "percent_error": -21.0,
                "compute_base_s": 0.0,
                "late us": float("nan"),
                "grad us": g,
                "grad us calibrated": 145.0,
            }
            for g in (149.0, 205.0)
        ]
    )
    assert "took 149-205 us (median per run) against the calibrated 145 us" in why_misses(one)


def test_why_misses_names_the_master_busy_time_where_it_departs_from_the_model():
    row = {
        "algorithm": "apam",
        "compute": "real",
        "workers": 2,
        "percent_error": -39.0,
        "compute_base_s": 0.0,
        "late us": float("nan"),
        "engine": "distributed",
        "master us": 402.0,
        "master us model": 233.0,
    }
    text = why_misses(
        pd.DataFrame(
            [
                row,
                {
                    **row,
                    "workers": 1,
                    "percent_error": -12.8,
                    "master us": 125.0,
                    "engine": "shared_memory",
                    "master us model": 80.0,
                },
            ]
        )
    )
    assert "from P = 2 on, the P + 1 processes" in text and "distributed apam P = 2: 402 us against 233 us" in text
    assert "a P = 1 row that misses measures this machine's run-to-run spread" in text
    assert "shared_memory apam P = 1: 125 us against 80 us" in text


def test_master_busy_beside_what_the_twin_charges_async_and_sync():
    """`master us`: the measured runs' master_busy_s over seeds; `master us model`: what the twin charges a master
    that waited for the gradient (update + idle overhead; sync: plus P - 1 overheads), in microseconds."""
    base = {"problem": "q", "workers": 2, "compute": "real", "compute_base_s": float("nan"), "status": "ok"}
    rows = []
    for alg in ("apam", "sync_amsgrad"):
        rows.append(
            {
                **base,
                "algorithm": alg,
                "run_id": f"{alg}-sim",
                "clock": "simulated",
                "engine": "simulated",
                "transport": "shared_memory",
                "seed": 0,
                "cost_master_s": 60e-6,
                "cost_update_s": 10e-6,
                "cost_overhead_s": 50e-6,
                "cost_overhead_idle_s": 70e-6,
                "master_busy_s": float("nan"),
            }
        )
        rows += [
            {
                **base,
                "algorithm": alg,
                "run_id": f"{alg}-shm-{s}",
                "clock": "wall",
                "engine": "shared_memory",
                "transport": None,
                "seed": s,
                "master_busy_s": b,
            }
            for s, b in ((0, 80e-6), (1, 100e-6))
        ]
    ok = pd.DataFrame(rows)
    df = pd.DataFrame(
        [
            {
                "problem": "q",
                "algorithm": a,
                "workers": 2,
                "compute": "real",  # as pair_clocks gives
                "compute_base_s": 0.0,
                "transport": "shared_memory",
                "engine": "shared_memory",
            }
            for a in ("apam", "sync_amsgrad")
        ]
    )
    from plots.validation import _with_setting

    wall, sim = (_with_setting(ok[ok["clock"] == c]) for c in ("wall", "simulated"))
    out = master_busy(df, wall, sim).set_index("algorithm")
    assert out.loc["apam", "master us"] == pytest.approx(90.0)
    assert out.loc["apam", "master us model"] == pytest.approx(80.0)  # update + idle overhead
    assert out.loc["sync_amsgrad", "master us model"] == pytest.approx(130.0)  # 10 + 70 + (2 - 1) x 50
    assert "master us" not in master_busy(df, wall.drop(columns="master_busy_s"), sim)


def test_an_older_model_validation_labels_the_simulated_clock_but_never_backs_it(tmp_path):
    """An older model_validation (measured runs paired with separate simulated runs of the same setting) gives its
    pairs' errors as the ``pred`` prediction's; without a sitting prediction it backs nothing (the rule on the new
    columns: tests/report/test_report_measured.py)."""
    summary = pd.DataFrame([run("apam", 1, 0, 0.9)])
    assert C.clock_label(summary, tmp_path) == "prediction"
    mv = tmp_path / "model_validation"
    mv.mkdir()
    # each measured run pairs with the simulated run of its own setting (compute mode, base, modelled engine); a
    # measured run whose emulated gradients overran on > 5% of them tests nothing and is left out
    rows = [
        ("simulated", "simulated", "shared_memory", "real", None, 1.05, 0),
        ("simulated", "simulated_distributed", "distributed", "real", None, 1.21, 0),
        ("simulated", "simulated", "shared_memory", "emulated", 0.05, 5.0, 0),
        ("wall", "shared_memory", None, "real", None, 1.0, 0),
        ("wall", "distributed", None, "real", None, 1.1, 0),
        ("wall", "shared_memory", None, "emulated", 0.05, 9.0, 10),
    ]  # 10 of 100 gradients overran
    pd.DataFrame(
        [
            {
                "problem": "q",
                "algorithm": "apam",
                "workers": 2,
                "clock": c,
                "engine": e,
                "transport": t,
                "compute": comp,
                "compute_base_s": b,
                "status": "ok",
                "time_per_epoch_s": v,
                "overruns": o,
                "gradients": 100,
            }
            for c, e, t, comp, b, v, o in rows
        ]
    ).to_csv(mv / "summary.csv")
    assert C.clock_backing(tmp_path) == (False, None)  # no sitting prediction
    rows = C.read_validation(tmp_path)
    assert sorted(rows["pred_err"].round(6)) == [5.0, 10.0] and rows["sitting_err"].isna().all()  # overrun left out
    # validation rows of another problem back nothing (LeNet5 curves are not backed by logistic regression)
    assert C.clock_label(summary.assign(workers=2), tmp_path) == (
        "prediction; model_validation has no real-compute async row on any engine for lenet5_fmnist"
    )
    summary = summary.assign(workers=2, problem="q")
    assert C.clock_label(summary.assign(transport="shared_memory"), tmp_path) == (
        "prediction; model_validation, real compute, async on shared_memory, at P <= 2: mean abs. error sitting --, "
        "pred 5.0%, twin --"
    )
    assert C.clock_label(summary.assign(algorithm="sync_amsgrad"), tmp_path) == (
        "prediction; model_validation has no real-compute sync row on any engine for q"
    )
    assert C.clock_label(summary.assign(clock="wall"), tmp_path) == ""
