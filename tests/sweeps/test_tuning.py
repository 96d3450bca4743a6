"""Step sizes tuned on one seed (experiments/sweeps/tuning.py, ``lr_tuning_seed``): the choice rule, the setting key, the
split of a sweep, the report's choice on a tuned summary, and a real tuned sweep in which the other seeds run only
the factor the tuning seed chose."""
import csv
import math

import pandas as pd
import pytest

from experiments import reproduce
from experiments.store.sink import make_run_id
from experiments.sweeps.tuning import best_factor, setting_key, split_sweep, tuned_factor
from plots.async_methods import best_times
from test_launchers import COSTS, needs_data


def test_best_factor_shortest_time_misses_and_divergence_infinite_ties_to_the_smaller():
    rows = [dict(lr_factor=0.5, time_to_target_s="3.0", status="ok"),
            dict(lr_factor=1.0, time_to_target_s="2.0", status="ok"),
            dict(lr_factor=2.0, time_to_target_s="1.0", status="diverged"),  # reached, then diverged: a miss
            dict(lr_factor=4.0, time_to_target_s="", status="ok")]
    assert best_factor(rows) == 1.0
    never = [dict(lr_factor=2.0, time_to_target_s="nan", status="ok"),
             dict(lr_factor=0.5, time_to_target_s="nan", status="ok")]
    assert best_factor(never) == 0.5
    assert best_factor([dict(lr_factor=1.0, status="failed")]) is None


def test_setting_key_ignores_factor_and_seed_only():
    a = ["algorithm=apam", "workers=8", "algorithm.lr_factor=0.5"]
    assert setting_key(a, 0) == setting_key(["algorithm.lr_factor=2", "workers=8", "algorithm=apam"], 0)
    assert setting_key(a, 0) == make_run_id(["algorithm=apam", "workers=8"], 0)
    assert setting_key(a, 0) != setting_key(["algorithm=apam", "workers=32", "algorithm.lr_factor=0.5"], 0)


def test_split_sweep_puts_the_tuning_seed_first():
    assert split_sweep(["x=1"], [0, 1, 2], 0) == [["x=1", "seed=0"], ["x=1", "seed=1,2"]]
    assert split_sweep(["x=1"], [0], 0) == [["x=1", "seed=0"]]


def test_tuned_factor_reads_the_tuning_seed_of_its_setting(tmp_path):
    path = tmp_path / "summary.csv"
    rows = [dict(tuning_setting="s", seed=0, lr_factor=1.0, time_to_target_s=2.0, status="ok"),
            dict(tuning_setting="s", seed=0, lr_factor=2.0, time_to_target_s=1.5, status="ok"),
            dict(tuning_setting="s", seed=1, lr_factor=0.5, time_to_target_s=0.1, status="ok"),  # not the tuning seed
            dict(tuning_setting="t", seed=0, lr_factor=0.5, time_to_target_s=0.1, status="ok")]  # another setting
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    assert tuned_factor(path, "s", 0) == 2.0
    assert tuned_factor(path, "u", 0) is None and tuned_factor(tmp_path / "none.csv", "s", 0) is None


def test_report_chooses_on_the_tuning_seed_and_averages_all_seeds_of_the_choice():
    base = dict(problem="logreg_fmnist", workers=8, compute_spread="equal", compute_law="constant",
                straggler_sigma=0.0, straggler_slowdown=1.0, status="ok", gradients=100, discarded=0,
                algorithm="apam")
    rows = [dict(seed=0, lr_factor=1.0, time_to_target_s=10.0), dict(seed=0, lr_factor=2.0, time_to_target_s=12.0),
            dict(seed=1, lr_factor=1.0, time_to_target_s=20.0), dict(seed=2, lr_factor=1.0, time_to_target_s=30.0)]
    best = best_times(pd.DataFrame([{**base, **r} for r in rows])).iloc[0]
    # factor 1 wins on seed 0 (10 < 12); its mean over its 3 seeds (20) is not compared with factor 2's one seed
    assert best["lr_factor"] == 1.0 and best["seeds"] == 3 and best["time_mean"] == pytest.approx(20.0)
    assert best["time_min"] == 10.0 and best["time_max"] == 30.0 and best["factors"] == 2
    assert (best["factor_min"], best["factor_max"]) == (1.0, 2.0)  # factor 1 is the grid's lower edge


def test_plan_splits_a_tuned_sweep_by_seed(tmp_path):
    plan = reproduce.plan_sweeps("async_methods", "long", tmp_path)
    base = ["experiment=async_methods", "profile=long", f"results_dir={tmp_path}"]
    assert plan == [(base + ["seed=0"], True), (base + ["seed=1,2"], True)]


@needs_data
def test_a_tuned_sweep_runs_the_other_seeds_at_the_chosen_factor_only(tmp_path):
    """Logistic regression, 20 updates on fixed simulated costs, three factors and three seeds: seed 0 runs all
    three, seeds 1 and 2 only the factor with the lowest time to target on seed 0."""
    sweep = ["experiment=async_methods", "profile=smoke", "lr_tuning_seed=0", "algorithm=apam", "workers=2",
             "compute_model=equal", "problem=logreg_fmnist", "problem.max_train=600", "problem.max_test=100",
             "updates=20", "eval_every=0.25", "problem.target_loss=0.69", "algorithm.lr_factor=0.25,1,4",
             f"results_dir={tmp_path}", *COSTS]
    for overrides in split_sweep(sweep, [0, 1, 2], 0):
        st = reproduce.run_sweep("async_methods", "smoke", tmp_path, False, overrides=overrides)
        assert st["status"] == "ran", st
    s = pd.read_csv(tmp_path / "async_methods" / "summary.csv")
    tuned = s[s["seed"] == 0]
    assert sorted(tuned["lr_factor"]) == [0.25, 1.0, 4.0] and tuned["tuning_setting"].nunique() == 1
    chosen = best_factor(tuned.to_dict("records"))
    assert math.isfinite(tuned.set_index("lr_factor").loc[chosen, "time_to_target_s"])
    others = s[s["seed"] != 0]
    assert sorted(others["seed"]) == [1, 2] and set(others["lr_factor"]) == {chosen}
    assert best_times(s).iloc[0]["lr_factor"] == chosen

    # a later tuning chooses another factor (here: seed 0's chosen run made to miss the target): the other seeds'
    # runs of the old choice are removed, rows and folders, and the new choice is run
    runs = tmp_path / "async_methods" / "runs"
    old_dirs = {r: runs / r for r in others["run_id"]}
    s.loc[(s["seed"] == 0) & (s["lr_factor"] == chosen), "time_to_target_s"] = math.nan
    s.to_csv(tmp_path / "async_methods" / "summary.csv", index=False)
    st = reproduce.run_sweep("async_methods", "smoke", tmp_path, False, overrides=split_sweep(sweep, [0, 1, 2], 0)[1])
    assert st["status"] == "ran", st
    s = pd.read_csv(tmp_path / "async_methods" / "summary.csv")
    again = best_factor(s[s["seed"] == 0].to_dict("records"))
    assert again != chosen
    others = s[s["seed"] != 0]
    assert sorted(others["seed"]) == [1, 2] and set(others["lr_factor"]) == {again}
    assert not any(d.exists() for d in old_dirs.values())
    assert all((runs / r / "trace.csv").exists() for r in others["run_id"])
