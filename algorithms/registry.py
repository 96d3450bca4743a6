"""Registry of update rules: ``@register_rule`` on a class, ``build_rule(name, **hyperparams)`` to make one.

Every module of the ``algorithms`` package is imported once, on the first lookup, so a rule module registers
itself just by existing (no import list to edit).
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path
from typing import Any

from algorithms.base import REQUIRED, HyperparameterError, UpdateRule

_RULES: dict[str, type[UpdateRule]] = {}
_discovered = False


class UnknownRuleError(ValueError):
    """``build_rule`` was given a name no module registered; the message names it and lists the known ones."""


def register_rule(cls: type[UpdateRule]) -> type[UpdateRule]:
    """Class decorator: register ``cls`` under ``cls.name``. ValueError if the name is empty or already taken."""
    if not cls.name:
        raise ValueError(f"{cls.__qualname__} has no rule name (set the class attribute `name`)")
    other = _RULES.get(cls.name)
    if other is not None and other is not cls:
        raise ValueError(f"rule name {cls.name!r} already registered by {other.__module__}.{other.__qualname__}")
    _RULES[cls.name] = cls
    return cls


def _discover() -> None:
    global _discovered
    if _discovered:
        return
    package = __name__.rpartition(".")[0]  # "algorithms": this module's own folder, without importing the package
    for info in pkgutil.iter_modules([str(Path(__file__).parent)]):
        importlib.import_module(f"{package}.{info.name}")
    _discovered = True


def rule_names() -> list[str]:
    """Sorted names of every registered rule."""
    _discover()
    return sorted(_RULES)


def build_rule(name: str, **hyperparams: Any) -> UpdateRule:
    """Make the update rule ``name`` with ``hyperparams``; defaults fill the rest (see each rule's DEFAULTS).

    Raises UnknownRuleError (a ValueError) for an unknown name, HyperparameterError (a ValueError) for an
    unknown hyperparameter, a missing required one, or a bad value (the message names key and value).
    """
    _discover()
    cls = _RULES.get(name)
    if cls is None:
        raise UnknownRuleError(f"unknown update rule {name!r}; known: {', '.join(sorted(_RULES))}")
    unknown = sorted(set(hyperparams) - set(cls.DEFAULTS))
    if unknown:
        raise HyperparameterError(
            f"unknown hyperparameter(s) {', '.join(map(repr, unknown))} for rule {name!r}; "
            f"accepted: {', '.join(sorted(cls.DEFAULTS))}"
        )
    merged = {**cls.DEFAULTS, **hyperparams}
    missing = sorted(k for k, v in merged.items() if v is REQUIRED)
    if missing:
        raise HyperparameterError(f"rule {name!r} needs hyperparameter(s) {', '.join(map(repr, missing))}")
    return cls(**merged)
