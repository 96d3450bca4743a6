"""Step-size schedules alpha_k for the update rules, k = 1, 2, ... (the number of the step being applied).

Source: APAM.md section 1 (Xu et al., arXiv:2002.09095, Sec. 5.1; the authors' logistic-regression code uses
``inv_sqrt`` with lr = alpha0 = 10, alpha_max = 0.01).

- ``constant``: alpha_k = lr, or min(lr, alpha_max) when alpha_max is given.
- ``inv_sqrt``: alpha_k = min(lr / sqrt(k), alpha_max); no cap when alpha_max is None.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

SCHEDULES = ("constant", "inv_sqrt")


@dataclass(frozen=True)
class Schedule:
    """A step-size schedule: ``schedule(k)`` is alpha_k (a Python float, units of the parameters per gradient unit).

    Attributes: ``name`` ("constant" or "inv_sqrt"), ``lr`` (> 0), ``alpha_max`` (> 0 or None: no cap).
    Raises ValueError (from ``__call__``) for k < 1.
    """

    name: str
    lr: float
    alpha_max: float | None = None

    def __call__(self, k: int) -> float:
        if k < 1:
            raise ValueError(f"step number k must be >= 1, got k={k}")
        if self.name == "constant":
            alpha = self.lr
        else:  # inv_sqrt
            alpha = self.lr / math.sqrt(k)
        if self.alpha_max is not None and alpha > self.alpha_max:
            alpha = self.alpha_max
        return alpha


def build_schedule(name: str, lr: float, alpha_max: float | None = None) -> Schedule:
    """Return the schedule ``name`` (one of SCHEDULES) with base step ``lr`` and optional cap ``alpha_max``.

    Raises ValueError naming the bad value: unknown name, lr <= 0 or non-finite, alpha_max <= 0 or non-finite, or a
    constant step above its cap (``lr > alpha_max``: the cap would silently replace the step given).
    """
    if name not in SCHEDULES:
        raise ValueError(f"unknown lr_schedule {name!r}; known: {', '.join(SCHEDULES)}")
    if not (math.isfinite(lr) and lr > 0):
        raise ValueError(f"lr must be a finite number > 0, got lr={lr!r}")
    if alpha_max is not None and not (math.isfinite(alpha_max) and alpha_max > 0):
        raise ValueError(f"alpha_max must be None or a finite number > 0, got alpha_max={alpha_max!r}")
    if name == "constant" and alpha_max is not None and lr > alpha_max:
        raise ValueError(
            f"alpha_max={alpha_max!r}: a constant step lr={lr!r} above its cap would be replaced by it "
            "(set alpha_max=null, or lr <= alpha_max)"
        )
    return Schedule(name=name, lr=float(lr), alpha_max=None if alpha_max is None else float(alpha_max))
