"""Tuning per setting on a seed of its own (experiments/sweeps/tuning.py): the grid and its extension while the best
factor is at an end, the choice (time to target, ties by the loss reached, then by time -- never by the step's
size), the policy sizes after the step, the settings' checks, the plan of the sweeps, and a real tuned sweep that a
rerun resumes without running anything again."""

import csv
import math
import shutil
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from conftest import HAS_FMNIST, settings_for
from experiments import reproduce
from experiments.errors import ConfigError
from experiments.store.run_id import make_run_id
from experiments.sweeps.tuning import (
    FACTOR_KEY,
    check_overrides,
    choose,
    next_exponent,
    read_choice,
    setting_key,
    split_sweep,
    tune,
    write_choice,
)

needs_fmnist = pytest.mark.skipif(not HAS_FMNIST, reason="Fashion-MNIST not staged (make data)")
COSTS = [
    "engine.costs.grad_s=0.001",
    "engine.costs.update_s=0.00001",
    "engine.costs.latency_s=0.00001",
    "engine.costs.overhead_s=0.00001",
]


def _row(t=math.nan, loss=0.5, time_s=1.0, status="ok"):
    """A trial's summary row as csv.DictReader gives it (strings)."""
    return {
        "time_to_target_s": "" if math.isnan(t) else repr(t),
        "final_train_loss": repr(loss),
        "time_s": repr(time_s),
        "status": status,
    }


def _settings(steps=3, extend=2, ratio=4.0, sizes=(), policy="none", workers=8, R=None, S=None):
    return SimpleNamespace(
        tuning=SimpleNamespace(ratio=ratio, steps=steps, extend=extend, policy_sizes=tuple(sizes)),
        workers=workers,
        algorithm=SimpleNamespace(policy=SimpleNamespace(name=policy, R=R, S=S)),
    )


def _fake(best_k: float, log: list):
    """run_trial for a summary whose time to target grows with the distance of the factor's exponent from
    ``best_k``; records the factors asked for."""

    def run_trial(values):
        f = values[FACTOR_KEY]
        log.append(values)
        return _row(t=1.0 + abs(math.log(f, 4) - best_k))

    return run_trial


def test_the_grid_is_tried_then_extended_while_the_best_is_at_an_end_and_stops_once_it_moves_inward():
    log = []
    choice = tune(_settings(), "s", _fake(best_k=4, log=log))  # the optimum 4^4 lies beyond the grid's top 4^3
    assert [v[FACTOR_KEY] for v in log] == [4.0**k for k in range(-3, 4)] + [256.0, 1024.0]
    # 4^4 was the largest when tried (still at the end: 4^5 added); 4^5 is worse, so the best moved inward: done
    assert choice.factor == 256.0 and choice.at_edge == "" and choice.trials == 9
    assert choice.factors_tried == sorted(4.0**k for k in range(-3, 6))


def test_an_optimum_in_the_grid_adds_nothing_and_one_beyond_the_limit_is_named_at_the_edge():
    log = []
    assert tune(_settings(), "s", _fake(best_k=-1, log=log)).factor == 0.25 and len(log) == 7
    log = []
    choice = tune(_settings(extend=2), "s", _fake(best_k=-9, log=log))  # far below: two more, then the limit
    assert [v[FACTOR_KEY] for v in log][-2:] == [4.0**-4, 4.0**-5]
    assert choice.factor == 4.0**-5 and choice.at_edge == "low" and choice.trials == 9


def test_next_exponent_continues_where_a_stopped_tuning_left_off():
    tried = {k: _row(t=1.0 + abs(k - 5)) for k in range(-3, 5)}  # grid done and 4^4 tried: best still at the end
    assert next_exponent(tried, steps=3, extend=2) == 5
    tried[5] = _row(t=1.0)
    assert next_exponent(tried, steps=3, extend=2) is None  # the limit (3 + 2)
    assert next_exponent({-3: _row(), -2: _row()}, steps=3, extend=2) == -1  # the grid first


def test_ties_go_to_the_loss_reached_then_to_the_time_never_to_the_size_of_the_step():
    # no trial reached the target: the lowest final loss wins, whatever its factor
    never = {-2: _row(loss=0.40), 0: _row(loss=0.35), 2: _row(loss=0.30)}
    assert choose(never) == 2
    never[-2] = _row(loss=0.20)
    assert choose(never) == -2
    # equal times to target: the loss again; equal losses too: the run's time
    assert choose({-1: _row(t=2.0, loss=0.3), 1: _row(t=2.0, loss=0.2)}) == 1
    assert choose({-1: _row(t=2.0, loss=0.3, time_s=5.0), 1: _row(t=2.0, loss=0.3, time_s=4.0)}) == 1
    # a time to target wins over any loss; a diverged trial (its time too) reaches nothing
    assert choose({-1: _row(t=3.0, loss=0.9), 1: _row(loss=0.01), 2: _row(t=1.0, loss=0.0, status="diverged")}) == -1
    # everything equal: the factor nearest the default (exponent 0), not the smallest
    assert choose({-3: _row(loss=0.5), 0: _row(loss=0.5), 3: _row(loss=0.5)}) == 0
    assert choose({0: {"status": "failed"}}) is None


def test_policy_sizes_are_tried_at_the_chosen_step_capped_at_P_reusing_the_step_trial_at_the_default():
    log = []

    def run_trial(values):
        log.append(values)
        r = values.get("algorithm.policy.R")
        k = math.log(values[FACTOR_KEY], 4)
        return _row(t=1.0 + abs(k - 1) + (0.0 if r is None else (0.5 if r != 4 else -0.5)))

    choice = tune(_settings(sizes=(1, 2, 4, 8, 16, 32), policy="ringmaster", workers=8, R=8), "s", run_trial)
    sizes = [v["algorithm.policy.R"] for v in log if "algorithm.policy.R" in v]
    assert sizes == [1, 2, 4] and all(v[FACTOR_KEY] == 4.0 for v in log[-3:])  # 8 = P is the step's own trial
    assert (choice.factor, choice.policy_key, choice.policy_value, choice.policy_tried) == (4.0, "R", 4, [1, 2, 4, 8])
    assert choice.values() == {FACTOR_KEY: 4.0, "algorithm.policy.R": 4}


def test_setting_key_ignores_the_tuned_keys_and_the_seed():
    a = ["algorithm=apam_ringmaster", "workers=8", "algorithm.lr_factor=0.5", "algorithm.policy.R=2"]
    assert setting_key(a, 100) == setting_key(["workers=8", "algorithm=apam_ringmaster"], 100)
    assert setting_key(a, 100) == make_run_id(["algorithm=apam_ringmaster", "workers=8"], 100)
    assert make_run_id(["workers=8", "tuning.steps=1"], 0) == make_run_id(["workers=8"], 0)  # tuning.* names no run


def test_the_tuning_seed_runs_first_even_when_it_is_no_reported_seed():
    assert split_sweep(["x=1"], [0, 1, 2, 3, 4], 100) == [["x=1", "seed=100"], ["x=1", "seed=0,1,2,3,4"]]
    base = ["experiment=async_methods", "profile=long", "results_dir='r'"]  # quoted: any folder name
    ref = ["workers=1", "compute_model=equal", "algorithm=apam,async_sgd"]
    assert [p for p, _ in reproduce.plan_sweeps("async_methods", "long", Path("r"))] == [
        base + ref + ["seed=100"],
        base + ref + ["seed=0,1,2,3,4,5,6,7,8,9"],  # 0-4 reported, 5-9 the replication (report.replication_seeds)
        base + ["seed=100"],
        base + ["seed=0,1,2,3,4,5,6,7,8,9"],
    ]
    # a seed given on the command line is replaced, not given twice (the precheck refuses a key twice)
    assert split_sweep(["x=1", "seed=0,1"], [0, 1], 100) == [["x=1", "seed=100"], ["x=1", "seed=0,1"]]
    plan = reproduce.plan_sweeps("lenet5_speedup", "long", Path("r"))
    assert [p[-1] for p, sim in plan if sim] == ["seed=100", "seed=0,1,2,3,4"]
    wall = [p for p, sim in plan if not sim]  # the real engine's sweep: untuned, its own seeds and worker counts
    assert len(wall) == 1
    assert {"engine=shared_memory", "workers=1,2", "seed=0,1,2", "lr_tuning_seed=null"} <= set(wall[0])


@pytest.mark.parametrize(
    "override,message",
    [
        ("tuning.ratio=1.0", "tuning.ratio=1.0: must be a number > 1"),
        ("tuning.steps=0", "tuning.steps=0: must be an integer >= 1"),
        ("tuning.policy_sizes=[4,4]", "tuning.policy_sizes=[4, 4]: values must be distinct"),
    ],
)
def test_bad_tuning_values_are_one_line_config_errors(tmp_path, override, message):
    with pytest.raises(ConfigError) as exc:
        settings_for([f"results_dir={tmp_path}", override])
    assert str(exc.value) == message


def test_a_tuned_key_on_the_command_line_is_refused():
    check_overrides(["algorithm.lr_factor=2"], None)  # without a tuning seed: an ordinary key
    with pytest.raises(ConfigError, match=r"^algorithm.lr_factor=2: with lr_tuning_seed=100 this key is tuned"):
        check_overrides(["workers=8", "algorithm.lr_factor=2"], 100)
    with pytest.raises(ConfigError, match=r"^algorithm.policy.R=4: "):
        check_overrides(["algorithm.policy.R=4"], 100)


@needs_fmnist
def test_a_tuned_sweep_runs_the_choice_on_the_reported_seeds_and_a_rerun_runs_nothing(tmp_path, capfd):
    """Logistic regression on fixed simulated costs, tuned on seed 100 over 4^-1..4^1 (one more a side at most):
    the trials lie below tuning/, tuning.csv holds the choice, seeds 0 and 1 run it; a second call finds every run
    finished; a tuning.csv without the setting stops the reported seeds with one line."""
    extra = [
        "lr_tuning_seed=100",
        "tuning.steps=1",
        "tuning.extend=1",
        "algorithm=apam",
        "workers=2",
        "compute_model=equal",
        "problem=logreg_fmnist",
        "problem.max_train=600",
        "problem.max_test=100",
        "by_kind.epochs.logreg=1",
        "by_kind.eval_every.logreg=0.05",
        "problem.target_loss=0.6",
        "seed=0,1",
        "progress=false",
        *COSTS,
    ]
    st = reproduce.run_experiment("async_methods", "smoke", tmp_path, False, 1, extra)
    assert st["status"] == "ran", st
    exp = tmp_path / "async_methods"
    trials = pd.read_csv(exp / "tuning" / "summary.csv")
    assert set(trials["seed"]) == {100} and {0.25, 1.0, 4.0} <= set(trials["lr_factor"])
    with open(exp / "tuning.csv", newline="") as f:
        [choice] = list(csv.DictReader(f))
    assert choice["factors_tried"] == ";".join(f"{v:g}" for v in sorted(trials["lr_factor"]))
    reported = pd.read_csv(exp / "summary.csv")
    assert sorted(reported["seed"]) == [0, 1] and set(reported["lr_factor"]) == {float(choice["lr_factor"])}
    assert set(reported["tuning_setting"]) == {choice["setting"]}
    assert read_choice(exp, choice["setting"]) == {FACTOR_KEY: float(choice["lr_factor"])}
    capfd.readouterr()
    st = reproduce.run_experiment("async_methods", "smoke", tmp_path, False, 1, extra)
    err = capfd.readouterr().err
    assert st["status"] == "ran" and "[ok]" not in err and err.count("[skip]") == len(trials) + 2
    # a results folder that keeps only the choices (the committed ones): a missing reported run runs again, the
    # tuning seed's job trusts tuning.csv and runs no trial
    shutil.rmtree(exp / "tuning" / "runs")
    (exp / "runs" / reported["run_id"].iloc[0] / "trace.csv").unlink()
    st = reproduce.run_experiment("async_methods", "smoke", tmp_path, False, 1, extra)
    err = capfd.readouterr().err
    assert st["status"] == "ran" and err.count("[ok]") == 1 and "tuned earlier (its choice is in tuning.csv" in err
    assert len(pd.read_csv(exp / "tuning" / "summary.csv")) == len(trials)
    (exp / "tuning.csv").write_text("setting,lr_factor" + "\n")
    st = reproduce.run_sweep(
        "async_methods",
        "smoke",
        tmp_path,
        False,
        overrides=reproduce.plan_sweeps("async_methods", "smoke", tmp_path, extra)[-1][0],
    )
    assert st["status"] == "skipped" and st["message"].startswith("lr_tuning_seed=100: ")
    assert "has no choice for" in st["message"] and "\n" not in st["message"]


@pytest.mark.parametrize(
    "content,why",
    [
        (bytes(range(256)) * 2, "codec can't decode"),
        (b"a,b\n1,2\n", "no setting column"),
        (b"setting,lr_factor\nk,abc\n", "could not convert string to float: 'abc'"),
        (b"setting,lr_factor\nk,-2\n", "lr_factor=-2: not a positive number"),
        (b"setting,lr_factor,R\nk,1,0.5\n", "R=0.5: not a whole number >= 1"),
    ],
)
def test_a_damaged_tuning_file_is_set_aside_and_written_again(tmp_path, capfd, content, why):
    """tuning.csv that is not text, not the table, or holds a choice that is no positive number: set aside with a
    line saying so and read as no choice (the reported seeds then say 'run the tuning seed first'); the tuning seed's
    job writes it again (it was a traceback with exit 1 for either seed)."""
    (tmp_path / "tuning.csv").write_bytes(content)
    assert read_choice(tmp_path, "k") is None
    err = capfd.readouterr().err
    assert f"{tmp_path / 'tuning.csv'}: damaged (" in err and why in err and "set aside as tuning.csv.damaged-1" in err
    assert (tmp_path / "tuning.csv.damaged-1").read_bytes() == content and not (tmp_path / "tuning.csv").exists()
    (tmp_path / "tuning.csv").write_bytes(content)  # damaged again: the tuning seed's write sets it aside too
    write_choice(tmp_path, {"setting": "k", "lr_factor": 2.0})
    assert read_choice(tmp_path, "k") == {FACTOR_KEY: 2.0}
    assert (tmp_path / "tuning.csv.damaged-2").exists()
    (tmp_path / "tuning.csv").unlink()
    (tmp_path / "tuning.csv").mkdir()
    with pytest.raises(ConfigError, match=r"tuning.csv: a folder, not a regular file; remove it"):
        read_choice(tmp_path, "k")


def test_a_choice_the_tuner_cannot_make_is_refused(tmp_path):
    """An lr_factor beyond ratio^(steps + extend) in tuning.csv (edited to 1e300: the other seeds ran at it, each
    diverged, exit 0) is named; the factors the tuner tries pass, to the ends of the extended grid."""
    from types import SimpleNamespace

    from experiments.sweeps.tuning import check_choice

    tuning = SimpleNamespace(ratio=4.0, steps=3, extend=2)
    for factor in (4.0**-5, 0.25, 1.0, 4.0**5):
        check_choice({FACTOR_KEY: factor}, tuning, tmp_path / "tuning.csv")
    for factor in (1e300, 4.0**6, 4.0**-6):
        with pytest.raises(ConfigError, match=r"tuning.csv: lr_factor=.* is not a factor the tuner tries \(4\^-5"):
            check_choice({FACTOR_KEY: factor}, tuning, tmp_path / "tuning.csv")
