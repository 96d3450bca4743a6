"""Optimizer state objects and ``clone_state``.

A rule's state is a dataclass of tensors (shape/dtype/device of x) and the step count ``k``. A field declared
with ``scratch_field()`` is a work buffer a rule reuses between steps to avoid allocations: it holds no
information, is left out of comparisons and repr, and ``clone_state`` does not copy it.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

import torch

S = TypeVar("S")


def scratch_field() -> Any:
    """A dataclass field for a work buffer (default None; allocated by the rule on first use)."""
    return dataclasses.field(default=None, repr=False, compare=False, metadata={"scratch": True})


def clone_state(state: S) -> S:
    """An independent deep copy of a rule's ``state``: tensors cloned, scalars copied, scratch buffers dropped.

    Engines use it to snapshot the master's optimizer state. Raises TypeError if ``state`` is not a dataclass
    instance.
    """
    if not dataclasses.is_dataclass(state) or isinstance(state, type):
        raise TypeError(f"clone_state expects a rule's state dataclass, got {type(state).__name__}")
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(state):
        if not f.init:
            continue
        value = getattr(state, f.name)
        if f.metadata.get("scratch"):
            changes[f.name] = None
        elif isinstance(value, torch.Tensor):
            changes[f.name] = value.clone()
    return dataclasses.replace(state, **changes)
