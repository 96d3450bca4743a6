"""Plain stochastic gradient descent, the non-adaptive baseline of async SGD: x_{k+1} = x_k - alpha_k * g_k.

Source: APAM.md section 1 ("Async SGD"); torch.optim.SGD with momentum 0, weight_decay 0 computes the same.
Hyperparameters: ``lr`` (default 1e-3), ``lr_schedule``, ``alpha_max``, ``bounds`` (see algorithms.base).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from algorithms.base import UpdateRule
from algorithms.registry import register_rule


@dataclass(eq=False)
class SGDState:
    """State of SGD: only ``k``, the number of steps applied (alpha_k depends on it)."""

    k: int = 0


@register_rule
class SGD(UpdateRule):
    """SGD on a flat vector: ``x.add_(g, alpha=-alpha_k)``, then the clip to ``bounds`` if any."""

    name = "sgd"
    DEFAULTS = {**UpdateRule.DEFAULTS, "lr": 1e-3}

    def init(self, x: torch.Tensor) -> SGDState:
        """k = 0; ValueError unless x is a 1-D float32/float64 tensor."""
        self.check_x(x)
        return SGDState(k=0)

    def step(self, x: torch.Tensor, g: torch.Tensor, state: SGDState) -> tuple[torch.Tensor, SGDState]:
        """x -= alpha_k * g in place (g: shape/dtype/device of x, else ValueError); returns (x, state)."""
        self.check_g(x, g)
        state.k += 1
        x.add_(g, alpha=-self.schedule(state.k))
        if self.bounds is not None:
            x.clamp_(self.bounds[0], self.bounds[1])
        return x, state
