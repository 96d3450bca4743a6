"""The raw Hydra config stops at the edge: every function of the engines, the clock and the training loop takes the
typed, frozen settings (experiments/settings/schema.py) or plain values -- none has a parameter named ``cfg`` (or
``*_cfg``) or annotated as an OmegaConf DictConfig -- and the settings a run is built from cannot change under it."""

import importlib
import inspect
import pkgutil

import pydantic
import pytest

from conftest import settings_for

ROOMS = ("experiments.engines", "experiments.clock", "experiments.training")


def _modules():
    for room in ROOMS:
        package = importlib.import_module(room)
        yield package
        for info in pkgutil.walk_packages(package.__path__, prefix=f"{room}."):
            yield importlib.import_module(info.name)


def _functions(module):
    """Every function and method defined in ``module`` (methods of its classes included): (qualified name, fn)."""
    for name, obj in vars(module).items():
        if inspect.isfunction(obj) and obj.__module__ == module.__name__:
            yield f"{module.__name__}.{name}", obj
        elif inspect.isclass(obj) and obj.__module__ == module.__name__:
            for attr, member in vars(obj).items():
                fn = member.__func__ if isinstance(member, (classmethod, staticmethod)) else member
                if inspect.isfunction(fn):
                    yield f"{module.__name__}.{name}.{attr}", fn


def test_the_rooms_have_modules_and_functions_to_check():
    names = {m.__name__ for m in _modules()}
    assert {
        "experiments.engines.simulated",
        "experiments.engines.driver",
        "experiments.clock.resolve",
        "experiments.clock.measure",
        "experiments.training.delays",
        "experiments.training.master",
    } <= names
    assert sum(1 for m in _modules() for _ in _functions(m)) > 100


def test_no_function_of_engines_clock_or_training_takes_a_raw_config():
    offenders = []
    for module in _modules():
        for qualname, fn in _functions(module):
            for p in inspect.signature(fn).parameters.values():
                annotation = p.annotation if isinstance(p.annotation, str) else repr(p.annotation)
                if (
                    p.name == "cfg"
                    or p.name.endswith("_cfg")
                    or "DictConfig" in annotation
                    or "omegaconf" in annotation.lower()
                ):
                    offenders.append(f"{qualname}({p.name}: {annotation})")
    assert offenders == []


def test_no_module_of_engines_clock_or_training_imports_omegaconf():
    for module in _modules():
        assert "omegaconf" not in vars(module), module.__name__
        assert not [v for v in vars(module).values() if getattr(v, "__module__", "").startswith("omegaconf")], (
            module.__name__
        )


def test_the_settings_are_frozen_all_the_way_down():
    s = settings_for(["engine=shared_memory", "workers=2"])
    for block, key, value in (
        (s, "workers", 3),
        (s.engine, "timeout_s", 1.0),
        (s.engine.fault, "at_update", 1),
        (s.algorithm, "lr", 1.0),
        (s.algorithm.policy, "name", "wu2022"),
        (s.delay, "sigma", 1.0),
        (s.problem, "batch_size", 1),
    ):
        with pytest.raises(pydantic.ValidationError, match="frozen"):
            setattr(block, key, value)
    assert s.workers == 2 and s.engine.timeout_s != 1.0
