"""How many jobs a command line's sweep asks for, counted from the parsed overrides before any value is listed or
any job composed: ``workers=range(1,1000000)`` was a million values listed and composed (a hang), and a sweep of
hundreds of jobs was composed whole before its first bad job was named."""

from __future__ import annotations

import math

from hydra.core.override_parser.types import ChoiceSweep, Override, RangeSweep

from experiments.errors import ConfigError

MAX_JOBS = 10_000
"""The most jobs one command line may ask for. Every job is composed and checked before any runs, each taking time
and memory, and a sweep of more is rather a typo (``range(1,1000000)``) than a plan: split it into several command
lines (each skips the runs already in the summary)."""


def count_values(override: Override) -> int:
    """The number of values of one override: 1 for a plain one, the length of a list sweep or a ``choice()``, the
    length of a ``range()`` counted without listing it (0 for an empty one). A sweep that cannot be counted here
    (``glob()``, ``interval()``) counts 1: listing it names the problem."""
    if not override.is_sweep_override():
        return 1
    value = override.value()
    if isinstance(value, ChoiceSweep):
        return len(value.list)
    if isinstance(value, RangeSweep) and value.start is not None and value.stop is not None and value.step:
        return max(0, math.ceil((value.stop - value.start) / value.step))
    return 1


def check_size(overrides: list[Override]) -> None:
    """The product of the overrides' value counts (:func:`count_values`) is at most :data:`MAX_JOBS`.

    Raises:
        ConfigError: ``<the sweeps as typed>: a sweep of N jobs, more than the 10000 ...``.
    """
    total = math.prod(count_values(o) for o in overrides)
    if total > MAX_JOBS:
        swept = " ".join(o.input_line or o.get_key_element() for o in overrides if count_values(o) > 1)
        raise ConfigError(
            f"{swept}: a sweep of {total} jobs, more than the {MAX_JOBS} one command line may run (each is checked "
            "before any runs); split it into several command lines"
        )
