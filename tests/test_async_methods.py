"""The async_methods experiment: its config composes for every profile, its table picks the best step factor per
method, the figures come from summary.csv alone (the report's section: tests/report/test_report_async.py)."""

import math

import pandas as pd
import pytest

from conftest import settings_for
from experiments.settings.build import make_rule
from plots.async_methods import best_times, compute_model, draw_async_methods, ranks


@pytest.mark.parametrize(
    "model,expect",
    [
        ("equal", dict(law="constant", sigma=0.0, slow_workers=0, slowdown=1.0, spread="equal")),
        ("sqrt", dict(spread="sqrt")),
        ("straggler8", dict(slow_workers=1, slowdown=8.0)),
        ("lognormal1", dict(law="lognormal", sigma=1.0)),
    ],
)
def test_compute_models_set_the_delay_block(tmp_path, model, expect):
    settings = settings_for(["experiment=async_methods", f"compute_model={model}", f"results_dir={tmp_path}"])
    for k, v in expect.items():
        assert getattr(settings.delay, k) == v


@pytest.mark.parametrize("problem,max_train,target", [("logreg_fmnist", None, 0.45), ("lenet5_fmnist", 2000, 2.15)])
def test_per_problem_sizes(tmp_path, problem, max_train, target):
    settings = settings_for(["experiment=async_methods", f"problem={problem}", f"results_dir={tmp_path}"])
    assert settings.problem.max_train == max_train and settings.problem.target_loss == target


@pytest.mark.parametrize(
    "algorithm,policy",
    [
        ("apam_ringmaster", "ringmaster"),
        ("rennala_sgd", "rennala"),
        ("async_sgd_wu", "wu2022"),
        ("apam_mishchenko", "mishchenko2022"),
    ],
)
def test_method_options_are_a_rule_plus_a_policy(tmp_path, algorithm, policy):
    settings = settings_for(
        ["experiment=async_methods", f"algorithm={algorithm}", "workers=32", f"results_dir={tmp_path}"]
    )
    assert settings.algorithm.name == algorithm and settings.algorithm.policy.name == policy
    if policy == "ringmaster":
        assert settings.algorithm.policy.R == 32


def test_lr_factor_multiplies_every_alpha_k(tmp_path):
    base = make_rule(settings_for([f"results_dir={tmp_path}"]))  # logreg: inv_sqrt, capped
    settings = settings_for([f"results_dir={tmp_path}", "algorithm.lr_factor=2"])
    twice = make_rule(settings)
    for k in (1, 10, 10**6, 10**8):
        assert twice.lr_at(k) == pytest.approx(2 * base.lr_at(k), rel=1e-15)
    hp = settings.algorithm.hyperparameters  # the factor applied once, to both alpha_k's
    assert (hp["lr"], hp["alpha_max"]) == (2 * settings.algorithm.lr, 2 * settings.algorithm.alpha_max)
    assert "lr_factor" not in hp and "policy" not in hp


def _summary():
    rows = []
    # apam: factor 1 reaches at 1.0 s (both seeds), factor 2 at 0.5 s on one seed only -> factor 1 is best (mean inf)
    for seed in (0, 1):
        rows.append(dict(algorithm="apam", lr_factor=1.0, seed=seed, time_to_target_s=1.0 + 0.2 * seed))
        rows.append(dict(algorithm="apam", lr_factor=2.0, seed=seed, time_to_target_s=0.5 if seed == 0 else math.nan))
        rows.append(dict(algorithm="rennala_sgd", lr_factor=1.0, seed=seed, time_to_target_s=0.8, discarded=50))
        rows.append(dict(algorithm="sync_amsgrad", lr_factor=1.0, seed=seed, time_to_target_s=math.nan))
    base = dict(
        problem="logreg_fmnist",
        workers=8,
        compute_spread="sqrt",
        compute_law="constant",
        straggler_sigma=0.0,
        straggler_slowdown=1.0,
        status="ok",
        gradients=100,
        discarded=0,
        policy="none",
        engine="simulated",
        clock="simulated",
        target_loss=0.45,
        run_id="r",
        final_train_loss=0.4,
    )
    return pd.DataFrame([{**base, **r, "run_id": f"r{i}"} for i, r in enumerate(rows)])  # one id per run


def test_best_times_pick_the_factor_with_the_lowest_mean_and_count_misses_as_infinite():
    best = ranks(best_times(_summary())).set_index("algorithm")
    assert best.loc["apam", "lr_factor"] == 1.0 and best.loc["apam", "time_mean"] == pytest.approx(1.1)
    assert best.loc["apam", "time_min"] == 1.0 and best.loc["apam", "time_max"] == pytest.approx(1.2)
    assert best.loc["rennala_sgd", "discarded_frac"] == pytest.approx(0.5)
    assert math.isinf(best.loc["sync_amsgrad", "time_mean"])
    assert list(best.loc[["rennala_sgd", "apam", "sync_amsgrad"], "rank"]) == [1, 2, 3]
    assert set(best["compute_model"]) == {"sqrt"}


def test_compute_model_labels():
    assert compute_model(dict(compute_spread="equal", straggler_slowdown=8.0)) == "straggler8"
    assert (
        compute_model(
            dict(compute_spread="equal", compute_law="lognormal", straggler_sigma=1.0, straggler_slowdown=1.0)
        )
        == "lognormal1"
    )
    assert compute_model(dict(compute_spread="equal", compute_law="constant", straggler_slowdown=1.0)) == "equal"


def _write(rows, exp):
    """``rows`` as ``exp/summary.csv``, as the runner writes it: every column of the contract (experiments/store/
    table.py SUMMARY_COLUMNS; those not given empty) and the runs of the experiment the folder is named for."""
    from experiments.store.table import SUMMARY_COLUMNS

    rows = rows.assign(experiment=exp.name)
    rows.reindex(columns=[*SUMMARY_COLUMNS, *(c for c in rows if c not in SUMMARY_COLUMNS)]).to_csv(
        exp / "summary.csv", index=False
    )


def test_figure_from_the_summary_alone(tmp_path):
    exp = tmp_path / "async_methods"
    exp.mkdir()
    _write(_summary(), exp)
    written = draw_async_methods(exp)
    assert [p.name for p in written] == ["async_methods-logreg_fmnist.png"] and written[0].stat().st_size > 0


def test_figure_takes_equal_seeds_whose_mean_lies_an_ulp_above_their_max(tmp_path):
    # three seeds at 0.1 s: their float mean is 0.10000000000000002 > max, once a negative error bar matplotlib refused
    rows = _summary()
    rows = pd.concat([rows, rows[rows["seed"] == 0].assign(seed=2)], ignore_index=True)
    rows["run_id"] = [f"r{i}" for i in range(len(rows))]  # the copied rows are runs of their own
    rows["time_to_target_s"] = rows["time_to_target_s"].where(rows["time_to_target_s"].isna(), 0.1)
    best = best_times(rows).set_index("algorithm")
    assert best.loc["rennala_sgd", "time_mean"] > best.loc["rennala_sgd", "time_max"]  # the case under test
    exp = tmp_path / "async_methods"
    exp.mkdir()
    _write(rows, exp)
    assert [p.name for p in draw_async_methods(exp)] == ["async_methods-logreg_fmnist.png"]


def _engine_summary(swap_on_distributed=False, overrun_apam=0, seeds=3):
    """Three methods on shared_memory and gloo (clock wall) and their simulated twins (transport = the engine the
    simulated clock modelled); times to target chosen so the simulated order is rennala < apam < sync (never)."""
    times = {"rennala_sgd": 0.8, "apam": 1.0, "sync_amsgrad": math.nan}
    rows = []
    for engine, clock, transport in (
        ("shared_memory", "wall", None),
        ("distributed", "wall", None),
        ("simulated", "simulated", "shared_memory"),
        ("simulated_distributed", "simulated", "distributed"),
    ):
        for alg, t in times.items():
            if swap_on_distributed and engine == "distributed" and alg in ("apam", "rennala_sgd"):
                t = 1.8 - t  # measured order apam < rennala on gloo
            rows.append(
                dict(
                    algorithm=alg,
                    engine=engine,
                    clock=clock,
                    transport=transport,
                    time_to_target_s=t,
                    overruns=overrun_apam if (alg == "apam" and clock == "wall") else 0,
                )
            )
    base = dict(
        problem="logreg_fmnist",
        workers=8,
        compute_spread="equal",
        compute_law="constant",
        straggler_sigma=0.0,
        straggler_slowdown=1.0,
        status="ok",
        gradients=100,
        discarded=0,
        policy="none",
        target_loss=0.45,
        run_id="r",
        lr_factor=1.0,
        final_train_loss=0.4,
    )
    runs = [{**base, **r, "seed": seed} for seed in range(seeds) for r in rows]
    return pd.DataFrame([{**run, "run_id": f"r{i}"} for i, run in enumerate(runs)])  # one id per run


def test_engine_pairs_put_each_measured_run_beside_the_simulated_clock_of_its_engine():
    from plots.async_methods import engine_pairs

    pairs = engine_pairs(_engine_summary(swap_on_distributed=True, overrun_apam=10)).set_index(["engine", "algorithm"])
    assert sorted(pairs.index.get_level_values("engine").unique()) == ["distributed", "shared_memory"]
    assert pairs.loc[("shared_memory", "apam"), ["measured_s", "simulated_s"]].tolist() == [1.0, 1.0]
    assert pairs.loc[("distributed", "apam"), ["measured_s", "simulated_s"]].tolist() == pytest.approx([0.8, 1.0])
    assert pairs.loc[("distributed", "apam"), ["rank_measured", "rank_simulated"]].tolist() == [1, 2]
    assert pairs.loc[("shared_memory", "rennala_sgd"), ["rank_measured", "rank_simulated"]].tolist() == [1, 1]
    assert math.isinf(pairs.loc[("shared_memory", "sync_amsgrad"), "measured_s"])
    assert pairs.loc[("shared_memory", "sync_amsgrad"), "rank_measured"] == 3
    assert pairs.loc[("shared_memory", "apam"), "overrun_frac"] == pytest.approx(0.1)
    assert pairs.loc[("shared_memory", "rennala_sgd"), "overrun_frac"] == 0


def test_engine_check_figure_never_mixes_measured_and_simulated_times(tmp_path):
    from plots.async_methods import draw_engine_check

    exp = tmp_path / "async_methods_real"
    exp.mkdir()
    _write(_engine_summary(), exp)
    assert [p.name for p in draw_engine_check(exp)] == ["engine_check-logreg_fmnist.png"]
    assert draw_async_methods(exp) == []  # never mixes measured and simulated times in one bar chart
