"""The typed settings (experiments/settings/schema.py, build.py): built once from a composed config or a plain mapping,
one ConfigError line on bad input, the quantities derived from them computed in one place, and the option defaults
read from conf/ (defaults.py)."""

import math

import pytest

from conftest import compose_cfg, settings_for
from experiments.engines import warmup_updates
from experiments.errors import ConfigError
from experiments.settings.build import build_settings, make_rule, resolved
from experiments.settings.defaults import option, options
from experiments.settings.schema import RunSettings, Simulated


def test_built_from_a_composed_config_or_the_same_mapping_alike():
    cfg = compose_cfg(["workers=4", "algorithm=async_sgd"])
    from_cfg, from_dict = build_settings(cfg), build_settings(resolved(cfg))
    assert isinstance(from_cfg, RunSettings) and from_cfg == from_dict
    assert isinstance(from_cfg.engine, Simulated) and from_cfg.engine.name == "simulated"
    assert from_cfg.algorithm.rule == "sgd" and from_cfg.workers == 4
    # an experiment's lookup tables are left out of the settings (a sweep's point and profiles index into them)
    assert build_settings(compose_cfg(["experiment=async_methods"])).experiment_id == "async_methods"


@pytest.mark.parametrize(
    "mutate,named",
    [
        (lambda d: d.update(workers=2.5), "workers=2.5"),
        (lambda d: d["engine"].update(warmup_updates="3"), "engine.warmup_updates='3'"),  # strict: a string is no int
        (lambda d: d.update(colour="red"), "colour=red"),
        (lambda d: d["engine"].update(name="gpu"), "engine=gpu"),
    ],
)
def test_a_bad_mapping_is_one_line_naming_the_key_and_the_value(mutate, named):
    data = resolved(compose_cfg([]))
    mutate(data)
    with pytest.raises(ConfigError) as info:
        build_settings(data)
    assert "\n" not in str(info.value) and named in str(info.value), str(info.value)


@pytest.mark.parametrize(
    "overrides,batches,per_update",
    [
        (["workers=3", "batch_size=10", "algorithm=sync_amsgrad"], [4, 3, 3], 10),
        (["workers=3", "batch_size=10", "algorithm=sync_amsgrad", "algorithm.sync_batch=full"], [10, 10, 10], 30),
        (["workers=3", "batch_size=10", "algorithm=async_sgd"], [10, 10, 10], 10),
    ],
)
def test_worker_batches_and_samples_per_update(overrides, batches, per_update):
    s = settings_for(overrides)
    assert s.worker_batches == batches and s.samples_per_update == per_update


def test_a_run_s_length_in_updates_samples_and_epochs():
    s = settings_for(["epochs=1.5", "batch_size=8"])
    assert s.planned_updates(100) == math.ceil(1.5 * 100 / 8) == 19
    assert s.run_limits(100) == (math.inf, 150.0) and s.total_epochs(100) == 1.5
    k = settings_for(["updates=40", "batch_size=8"])
    assert k.planned_updates(100) == 40 and k.run_limits(100) == (40.0, math.inf)
    assert k.total_epochs(100) == pytest.approx(3.2)
    sync = settings_for(
        ["epochs=2", "batch_size=10", "workers=2", "algorithm=sync_amsgrad", "algorithm.sync_batch=full"]
    )
    assert sync.planned_updates(100) == 10  # a round of two full batches takes 20 samples


def test_warm_up_updates_are_at_least_a_round_and_at_most_half_the_run():
    """engines.warmup_updates: engine.warmup_updates, for async at least P (one whole round), at most half the
    run's planned updates; sync rounds take it as it is."""
    assert warmup_updates(settings_for(["updates=100", "workers=8", "engine.warmup_updates=5"]), 256) == 8
    assert warmup_updates(settings_for(["updates=100", "workers=2", "engine.warmup_updates=5"]), 256) == 5
    assert warmup_updates(settings_for(["updates=100", "workers=8", "engine.warmup_updates=0"]), 256) == 0
    assert warmup_updates(settings_for(["updates=12", "workers=8", "engine.warmup_updates=5"]), 256) == 6
    sync = settings_for(
        ["updates=100", "workers=8", "batch_size=64", "engine.warmup_updates=5", "algorithm=sync_amsgrad"]
    )
    assert warmup_updates(sync, 256) == 5
    assert warmup_updates(settings_for(["epochs=1", "batch_size=64", "engine.warmup_updates=5"]), 256) == 2


def test_lr_factor_scales_the_rule_s_steps_once():
    s = settings_for(
        [
            "algorithm=async_sgd",
            "algorithm.lr_schedule=constant",
            "algorithm.lr=0.01",
            "algorithm.alpha_max=null",
            "algorithm.lr_factor=3",
        ]
    )
    assert s.algorithm.lr == 0.01 and s.algorithm.hyperparameters["lr"] == pytest.approx(0.03)
    assert make_rule(s).lr_at(1) == pytest.approx(0.03)


def test_option_reads_a_config_group_option_with_its_parent():
    engine = option("engine", "shared_memory")
    assert engine["name"] == "shared_memory" and engine["clock"] == "wall"
    twin = option("engine", "simulated_distributed")  # extends simulated.yaml
    assert twin["name"] == "simulated" and twin["transport"] == "distributed" and "costs" in twin
    assert {"simulated", "shared_memory", "distributed"} <= set(options("engine"))
    with pytest.raises(FileNotFoundError):
        option("engine", "nope")


def test_a_data_path_says_what_it_is_when_it_is_no_regular_file(tmp_path):
    """A named pipe was called "no such file"; it is never opened (a read would wait for a writer)."""
    import os

    from experiments.settings.fields import file_problem

    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "file").write_text("1 1:1\n")
    assert file_problem(str(tmp_path / "pipe")) == "a named pipe, not a regular file"
    assert file_problem(str(tmp_path)) == "a folder, not a regular file"
    assert file_problem(str(tmp_path / "nothing")) == "no such file"
    assert file_problem(str(tmp_path / "file")) is None
