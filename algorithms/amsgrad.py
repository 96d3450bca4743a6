"""AMSGrad, the update rule of APAM, in two variants that must be named: ``paper`` and ``torch``.

Source: APAM.md section 1 (Xu et al., arXiv:2002.09095, Alg. 1; Reddi et al., "On the convergence of Adam and
beyond", 2018) and torch.optim.Adam(amsgrad=True) (torch 2.14, ``_single_tensor_adam``).

With g_k the (possibly stale) gradient of step k = 1, 2, ... and alpha_k from the schedule:

    m_k    = beta1 * m_{k-1} + (1 - beta1) * g_k
    v_k    = beta2 * v_{k-1} + (1 - beta2) * g_k**2
    vhat_k = max(vhat_{k-1}, v_k)                          (elementwise; vhat never decreases)

- ``paper``:  x_{k+1} = x_k - alpha_k * m_k / sqrt(vhat_k), no bias correction, no eps. A coordinate with
  vhat_k <= ``vhat_floor`` (default 1e-11, compared in x's dtype) is not moved, as in the authors'
  logistic-regression code, so a coordinate that never saw a nonzero gradient never moves and never becomes NaN.
  Computed as x -= alpha_k * m_k * rsqrt(vhat_k) (rsqrt = 1/sqrt, one extra rounding: results differ from
  m_k / sqrt(vhat_k) by about one ulp of the update); eps defaults to 0, a positive eps gives
  x -= alpha_k * m_k / (sqrt(vhat_k) + eps).
- ``torch``:  x_{k+1} = x_k - alpha_k / (1 - beta1**k) * m_k / (sqrt(vhat_k) / sqrt(1 - beta2**k) + eps), with
  the operations in torch's own order (lerp for m, mul+addcmul for v, maximum, sqrt, div, add, addcdiv), so that
  for the same inputs it equals torch.optim.Adam(amsgrad=True, weight_decay=0) to float rounding (bit-identical on
  CPU in our tests). vhat is the running max of the raw v. eps defaults to 1e-8.

Hyperparameters: ``variant`` (required: "paper" or "torch"), ``lr`` (default 1e-3), ``beta1`` (0.9),
``beta2`` (0.999), ``eps`` (None: 0 for paper, 1e-8 for torch), ``vhat_floor`` (paper only; None: 1e-11),
``lr_schedule``, ``alpha_max``, ``bounds`` (see algorithms.base.UpdateRule).
Errors: HyperparameterError (a ValueError) naming the key and value for beta outside [0, 1), eps < 0, lr <= 0,
vhat_floor < 0, an unknown variant, or vhat_floor given with the torch variant.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from algorithms.base import REQUIRED, HyperparameterError, UpdateRule, nonnegative, unit_interval
from algorithms.registry import register_rule
from algorithms.state import scratch_field

VARIANTS = ("paper", "torch")
PAPER_VHAT_FLOOR = 1e-11
_INF = float("inf")


@dataclass(eq=False)
class AMSGradState:
    """State of AMSGrad: ``m``, ``v``, ``vhat`` (shape/dtype/device of x) and ``k``, the number of steps applied.

    ``work`` is a scratch buffer like x, reused by every step; it is not state.
    """

    m: torch.Tensor
    v: torch.Tensor
    vhat: torch.Tensor
    k: int = 0
    work: torch.Tensor | None = scratch_field()


@register_rule
class AMSGrad(UpdateRule):
    """AMSGrad on a flat vector; see the module docstring for the two variants and the hyperparameters."""

    name = "amsgrad"
    DEFAULTS = {
        **UpdateRule.DEFAULTS,
        "lr": 1e-3,
        "variant": REQUIRED,
        "beta1": 0.9,
        "beta2": 0.999,
        "eps": None,
        "vhat_floor": None,
    }

    def __init__(self, *, variant: Any, beta1: Any, beta2: Any, eps: Any, vhat_floor: Any, **common: Any) -> None:
        super().__init__(**common)
        if variant not in VARIANTS:
            raise HyperparameterError(f"variant must be one of {', '.join(VARIANTS)}, got variant={variant!r}")
        self.variant = variant
        self.beta1 = unit_interval("beta1", beta1)
        self.beta2 = unit_interval("beta2", beta2)
        if eps is None:
            eps = 0.0 if variant == "paper" else 1e-8
        self.eps = nonnegative("eps", eps)
        if variant == "torch":
            if vhat_floor is not None:
                raise HyperparameterError(
                    f"vhat_floor applies to variant 'paper' only, got vhat_floor={vhat_floor!r} with variant='torch'"
                )
            self.vhat_floor = None
        else:
            self.vhat_floor = nonnegative("vhat_floor", PAPER_VHAT_FLOOR if vhat_floor is None else vhat_floor)
        self.hyperparams.update(
            variant=variant, beta1=self.beta1, beta2=self.beta2, eps=self.eps, vhat_floor=self.vhat_floor
        )
        self._torch_variant = variant == "torch"

    def init(self, x: torch.Tensor) -> AMSGradState:
        """Zero m, v, vhat like x (1-D float32/float64; ValueError otherwise), k = 0."""
        self.check_x(x)
        return AMSGradState(m=torch.zeros_like(x), v=torch.zeros_like(x), vhat=torch.zeros_like(x), k=0)

    def step(self, x: torch.Tensor, g: torch.Tensor, state: AMSGradState) -> tuple[torch.Tensor, AMSGradState]:
        """Apply one update with gradient g (shape/dtype/device of x; ValueError otherwise); x and state in place.

        Seven in-place tensor ops per step, no allocation after the first step (scratch buffer ``state.work``).
        """
        if g.shape != x.shape or g.dtype != x.dtype or g.device != x.device:
            self.check_g(x, g)
        work = state.work
        if work is None:
            work = state.work = torch.empty_like(x)
        k = state.k = state.k + 1
        m, v, vhat = state.m, state.v, state.vhat
        beta1, beta2 = self.beta1, self.beta2
        # moments, in torch's order: m.lerp_(g, 1 - beta1); v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
        m.lerp_(g, 1 - beta1)
        v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
        torch.maximum(vhat, v, out=vhat)
        if self._torch_variant:
            # torch 2.14 _single_tensor_adam, amsgrad branch, same Python-float scalars and tensor ops
            step_size = self.schedule(k) / (1 - beta1**k)
            bias_correction2_sqrt = (1 - beta2**k) ** 0.5
            torch.sqrt(vhat, out=work)
            work.div_(bias_correction2_sqrt).add_(self.eps)
            x.addcdiv_(m, work, value=-step_size)
        elif self.eps == 0.0:
            # coordinates with vhat <= floor -> inf -> rsqrt 0 -> m * 0 = 0: no move, no NaN (m is finite)
            torch.threshold(vhat, self.vhat_floor, _INF, out=work)
            work.rsqrt_()
            x.addcmul_(m, work, value=-self.schedule(k))
        else:
            torch.threshold(vhat, self.vhat_floor, _INF, out=work)
            work.sqrt_().add_(self.eps)
            x.addcdiv_(m, work, value=-self.schedule(k))
        if self.bounds is not None:
            x.clamp_(self.bounds[0], self.bounds[1])
        return x, state
