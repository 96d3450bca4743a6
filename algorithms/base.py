"""The base class of every update rule, and the checks its hyperparameters go through.

An update rule works on one flat parameter vector x, shape (d,), float32 or float64, on any device.
``state = rule.init(x)``; ``x, state = rule.step(x, g, state)`` (may update x and state in place; returns both);
``rule.lr_at(k)`` is the schedule's alpha_k for logging. See docs/INTERFACES.md, "Update rules".
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import torch

from algorithms.schedules import build_schedule

REQUIRED = object()
"""Marker in ``UpdateRule.DEFAULTS`` for a hyperparameter that has no default and must be given."""


class HyperparameterError(ValueError):
    """A bad hyperparameter of an update rule; the message names the key and the value."""


def number(key: str, value: Any) -> float:
    """``value`` as a float; HyperparameterError naming ``key`` if it is not a real number (bool and str rejected)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise HyperparameterError(f"{key} must be a number, got {key}={value!r}")
    return float(value)


def positive(key: str, value: Any) -> float:
    """A finite float > 0, else HyperparameterError naming ``key`` and ``value``."""
    x = number(key, value)
    if not (math.isfinite(x) and x > 0):
        raise HyperparameterError(f"{key} must be a finite number > 0, got {key}={value!r}")
    return x


def nonnegative(key: str, value: Any) -> float:
    """A finite float >= 0, else HyperparameterError naming ``key`` and ``value``."""
    x = number(key, value)
    if not (math.isfinite(x) and x >= 0):
        raise HyperparameterError(f"{key} must be a finite number >= 0, got {key}={value!r}")
    return x


def unit_interval(key: str, value: Any) -> float:
    """A float in [0, 1) (a momentum coefficient beta), else HyperparameterError naming ``key`` and ``value``."""
    x = number(key, value)
    if not (0.0 <= x < 1.0):
        raise HyperparameterError(f"{key} must be in [0, 1), got {key}={value!r}")
    return x


FLOAT32_MAX = 3.4028234663852886e38
"""The largest finite float32 (``torch.finfo(torch.float32).max``): the parameters' dtype."""


def bounds_pair(value: Any) -> tuple[float, float] | None:
    """None, or (lo, hi) floats with lo < hi (either may be infinite); else HyperparameterError."""
    if value is None:
        return None
    try:
        lo, hi = value
    except (TypeError, ValueError):
        raise HyperparameterError(f"bounds must be None or a pair (lo, hi), got bounds={value!r}") from None
    lo, hi = number("bounds[0]", lo), number("bounds[1]", hi)
    if math.isnan(lo) or math.isnan(hi) or not lo < hi:
        raise HyperparameterError(f"bounds must satisfy lo < hi, got bounds={value!r}")
    for name, v in (("bounds[0]", lo), ("bounds[1]", hi)):
        if math.isfinite(v) and abs(v) > FLOAT32_MAX:  # the clip of float32 parameters cannot take it
            raise HyperparameterError(f"{name}={v:g}: beyond float32's range (3.4e+38); -inf or inf is no bound")
    return lo, hi


class UpdateRule:
    """Base class: hyperparameter bookkeeping, the step-size schedule, the projection (clip), input checks.

    Subclasses set ``name`` (the registry name), ``DEFAULTS`` (every accepted hyperparameter with its default,
    or ``REQUIRED``), and implement ``init`` and ``step``. The constructor receives every key of DEFAULTS.

    Staleness: a rule that needs the staleness of the gradient it applies sets ``needs_staleness = True`` and
    defines ``step(self, x, g, state, *, tau, worker)`` with required keywords: the master
    (experiments/training/master.py, shared by every engine) then passes ``tau`` (int >= 0: updates applied since the
    gradient's iterate) and ``worker`` (the sending worker's id, or None for an update that averages several
    gradients); a caller that does not pass them gets a TypeError, never a silent tau-less step. Rules with
    ``needs_staleness = False`` (the default; amsgrad, sgd) are stepped as ``step(x, g, state)``.
    A staleness policy of the master that scales the step (experiments/training/policies.py) multiplies
    ``self.schedule``, so a rule must take its alpha_k from ``self.schedule(k)`` to compose with it.

    Common hyperparameters: ``lr`` (> 0), ``lr_schedule`` ("constant" or "inv_sqrt", see algorithms.schedules),
    ``alpha_max`` (None or > 0: cap of alpha_k), ``bounds`` (None or (lo, hi): after each step x is clipped to
    [lo, hi]; this is the convex case's projection onto the box X in the vhat^(1/2)-weighted norm, which for a
    diagonal weight and a box is exactly a coordinate-wise clip; APAM.md section 1).
    """

    name: ClassVar[str] = ""
    needs_staleness: ClassVar[bool] = False
    DEFAULTS: ClassVar[dict[str, Any]] = {"lr": REQUIRED, "lr_schedule": "constant", "alpha_max": None, "bounds": None}

    def __init__(self, *, lr: Any, lr_schedule: Any, alpha_max: Any, bounds: Any, **_: Any) -> None:
        lr = positive("lr", lr)
        if alpha_max is not None:
            alpha_max = positive("alpha_max", alpha_max)
        if not isinstance(lr_schedule, str):
            raise HyperparameterError(f"lr_schedule must be a string, got lr_schedule={lr_schedule!r}")
        try:
            self.schedule = build_schedule(lr_schedule, lr, alpha_max)
        except ValueError as e:
            raise HyperparameterError(str(e)) from None
        self.bounds = bounds_pair(bounds)
        self.hyperparams: dict[str, Any] = {
            "lr": lr,
            "lr_schedule": lr_schedule,
            "alpha_max": alpha_max,
            "bounds": self.bounds,
        }

    def lr_at(self, k: int) -> float:
        """alpha_k of the schedule for step number k >= 1 (before any bias correction of the rule)."""
        return self.schedule(k)

    def check_x(self, x: torch.Tensor) -> None:
        """ValueError unless x is a 1-D float32/float64 tensor."""
        if not isinstance(x, torch.Tensor) or x.dim() != 1 or x.dtype not in (torch.float32, torch.float64):
            desc = f"shape {tuple(x.shape)} dtype {x.dtype}" if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(f"{self.name}: x must be a 1-D float32 or float64 tensor, got {desc}")

    def check_g(self, x: torch.Tensor, g: torch.Tensor) -> None:
        """ValueError unless g has the shape, dtype and device of x (cheap: runs on every step)."""
        if g.shape != x.shape or g.dtype != x.dtype or g.device != x.device:
            raise ValueError(
                f"{self.name}: gradient g (shape {tuple(g.shape)}, {g.dtype}, {g.device}) does not match "
                f"x (shape {tuple(x.shape)}, {x.dtype}, {x.device})"
            )

    def project(self, x: torch.Tensor) -> None:
        """Clip x in place to ``bounds`` (no-op when bounds is None)."""
        if self.bounds is not None:
            x.clamp_(self.bounds[0], self.bounds[1])

    def init(self, x: torch.Tensor) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def step(self, x: torch.Tensor, g: torch.Tensor, state: Any) -> tuple[torch.Tensor, Any]:  # pragma: no cover
        raise NotImplementedError

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.hyperparams.items())
        return f"{type(self).__name__}({args})"
