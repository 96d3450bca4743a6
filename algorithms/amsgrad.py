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

Implementations (hyperparameter ``impl``; the arithmetic above is the same, the rounding differs by a few ulps):

- ``eager``: the seven in-place tensor ops below, one pass over memory each. The torch variant uses torch's own
  order of ops, so it is bit-identical to ``torch.optim.Adam(amsgrad=True)`` (single-tensor) on CPU.
- ``fused`` (torch variant): torch's fused Adam kernel through its functional API
  (``torch.optim.adam.adam(..., fused=True, amsgrad=True)``, the kernel behind ``Adam(fused=True)``): one pass.
  CPU and CUDA, float32/float64.
- ``compiled`` (paper variant): the update written once as tensor ops and fused into one loop by
  ``torch.compile`` (inductor; needs a C++ compiler on CPU, triton on CUDA). The first step of a process compiles
  (a few seconds, cached on disk by torch); one compiled kernel serves every dimension.
- ``native`` (paper variant): the update as one C loop (algorithms/amsgrad_kernel.c, in the eager ops' order,
  with fused multiply-adds where torch's vectorized kernels use them: eager's bits with eps = 0), built once per
  machine by the system's C compiler and called through ctypes
  (algorithms/native.py): a fraction of the eager ops' cost at small d (benchmarks/bench_rules.py), and one pass
  over memory at any d. CPU, contiguous float32/float64.
- ``auto`` (default): ``fused`` for the torch variant where the fused kernel exists; for the paper variant on CPU
  ``compiled`` from d = 2**19 on (where benchmarks/bench_rules.py finds compiled faster than native, and native
  faster below), below that ``native`` (contiguous float32/float64)
  where a C compiler builds it, else ``compiled`` from d = 2**17 on (eager makes 2.2x the memory passes of a fused
  step at d = 10**6, benchmarks/bench_rules.py) and ``eager`` below (there the eager ops cost less than a compiled
  call's guards). If building the C kernel or compiling fails under ``auto``, the rule warns once and falls back
  (compiled to native, native to the torch ops).

Hyperparameters: ``variant`` (required: "paper" or "torch"), ``lr`` (default 1e-3), ``beta1`` (0.9),
``beta2`` (0.999), ``eps`` (None: 0 for paper, 1e-8 for torch), ``vhat_floor`` (paper only; None: 1e-11),
``impl`` ("auto"), ``lr_schedule``, ``alpha_max``, ``bounds`` (see algorithms.base.UpdateRule).
Errors: HyperparameterError (a ValueError) naming the key and value for beta outside [0, 1), eps < 0, eps = 0 with
the torch variant (0/0 on a coordinate whose gradients are all 0), lr <= 0, vhat_floor < 0, an unknown variant or
impl, an impl the variant has not (``fused`` is torch's, ``compiled`` and ``native`` the paper's), or vhat_floor
given with the torch variant. ``init`` raises RuntimeError for
``impl=fused`` on a device the fused kernel does not support, and for ``impl=native`` off the CPU, for another
dtype, a non-contiguous x, or where the C kernel cannot be built (the message gives the compiler's reason).
"""

from __future__ import annotations

import functools
import logging
import warnings
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.optim.adam import adam as torch_adam_functional

from algorithms import native
from algorithms.base import REQUIRED, HyperparameterError, UpdateRule, nonnegative, unit_interval
from algorithms.registry import register_rule
from algorithms.state import scratch_field

VARIANTS = ("paper", "torch")
IMPLS = {"paper": ("auto", "eager", "compiled", "native"), "torch": ("auto", "eager", "fused")}
PAPER_VHAT_FLOOR = 1e-11
AUTO_COMPILE_MIN_DIM = 2**19
"""``impl=auto`` compiles the paper variant on CPU from this dimension on (see the module docstring)."""
AUTO_COMPILE_MIN_DIM_NO_C = 2**17
"""... and from this one where the C kernel (``native``) cannot be built."""
FUSED_DEVICES = ("cpu", "cuda")
_INF = float("inf")


@dataclass(eq=False)
class AMSGradState:
    """State of AMSGrad: ``m``, ``v``, ``vhat`` (shape/dtype/device of x) and ``k``, the number of steps applied.

    ``impl`` names the implementation that steps it. ``work`` is a scratch buffer like x (eager), or the scalars
    the fused or compiled kernel reads (torch's float32 step tensor; lr and the constants as 0-d tensors); it is
    not state.
    """

    m: torch.Tensor
    v: torch.Tensor
    vhat: torch.Tensor
    k: int = 0
    impl: str = field(default="eager", compare=False)  # the implementation init() chose: eager, fused or compiled
    work: Any = scratch_field()


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
        "impl": "auto",
    }

    def __init__(
        self, *, variant: Any, beta1: Any, beta2: Any, eps: Any, vhat_floor: Any, impl: Any, **common: Any
    ) -> None:
        super().__init__(**common)
        if variant not in VARIANTS:
            raise HyperparameterError(f"variant must be one of {', '.join(VARIANTS)}, got variant={variant!r}")
        self.variant = variant
        self.beta1 = unit_interval("beta1", beta1)
        self.beta2 = unit_interval("beta2", beta2)
        if eps is None:
            eps = 0.0 if variant == "paper" else 1e-8
        self.eps = nonnegative("eps", eps)
        # m / (sqrt(vhat) + 0) is 0/0 = NaN where every gradient was 0; an eps below float32's smallest number
        # (about 1.4e-45) is 0 in the parameters' float32 arithmetic
        if variant == "torch" and torch.tensor(self.eps, dtype=torch.float32).item() == 0.0:
            raise HyperparameterError(
                f"eps must be > 0 for variant 'torch' (a coordinate whose gradients are all 0 would become NaN: "
                f"0/0), got eps={eps!r}" + (" (0 in float32, the parameters' type)" if self.eps else "")
            )
        if variant == "torch":
            if vhat_floor is not None:
                raise HyperparameterError(
                    f"vhat_floor applies to variant 'paper' only, got vhat_floor={vhat_floor!r} with variant='torch'"
                )
            self.vhat_floor = None
        else:
            self.vhat_floor = nonnegative("vhat_floor", PAPER_VHAT_FLOOR if vhat_floor is None else vhat_floor)
        if impl not in IMPLS[variant]:
            raise HyperparameterError(
                f"impl for variant {variant!r} must be one of {', '.join(IMPLS[variant])}, got impl={impl!r}"
            )
        self.impl = impl
        self.hyperparams.update(
            variant=variant, beta1=self.beta1, beta2=self.beta2, eps=self.eps, vhat_floor=self.vhat_floor, impl=impl
        )
        self._torch_variant = variant == "torch"
        self._compile_failed = False
        self._native_failed = False

    def impl_for(self, x: torch.Tensor) -> str:
        """The implementation that steps x (``eager``, ``fused``, ``compiled`` or ``native``): ``impl`` with ``auto``
        resolved for x's device and size (module docstring). RuntimeError for ``impl=fused`` where torch has no fused
        kernel (a device other than CPU/CUDA), and for ``impl=native`` where x is not a contiguous float32/float64
        CPU vector or the C kernel cannot be built."""
        fused_ok = x.device.type in FUSED_DEVICES
        native_ok = _native_fits(x)
        if self.impl == "auto":
            if self._torch_variant:
                return "fused" if fused_ok else "eager"
            cpu, d = x.device.type == "cpu", x.numel()
            if cpu and d >= AUTO_COMPILE_MIN_DIM and not self._compile_failed:
                return "compiled"
            if native_ok and self._native_builds():
                return "native"
            return "compiled" if cpu and d >= AUTO_COMPILE_MIN_DIM_NO_C and not self._compile_failed else "eager"
        if self.impl == "fused" and not fused_ok:
            raise RuntimeError(f"amsgrad impl=fused: torch has no fused Adam kernel for device {x.device.type!r}")
        if self.impl == "native":
            if not native_ok:
                raise RuntimeError(
                    f"amsgrad impl=native: needs a contiguous float32/float64 CPU vector, got "
                    f"{x.dtype} on {x.device.type} (contiguous={x.is_contiguous()})"
                )
            try:
                native.kernels()
            except native.NativeUnavailable as exc:
                raise RuntimeError(f"amsgrad impl=native: {exc}") from exc
        return self.impl

    def _native_builds(self) -> bool:
        """Whether the C kernel is there (built once per machine); under ``auto`` a failure warns once."""
        if self._native_failed:
            return False
        try:
            native.kernels()
            return True
        except native.NativeUnavailable as exc:
            warnings.warn(
                f"amsgrad impl=auto: the C kernel is unavailable ({exc}); using torch ops", RuntimeWarning, stacklevel=4
            )
            self._native_failed = True
            return False

    def init(self, x: torch.Tensor) -> AMSGradState:
        """Zero m, v, vhat like x (1-D float32/float64; ValueError otherwise), k = 0, and ``impl_for(x)``.

        Raises RuntimeError for ``impl=fused`` where torch has no fused kernel (device other than CPU/CUDA).
        """
        self.check_x(x)
        z = torch.zeros_like
        return AMSGradState(m=z(x), v=z(x), vhat=z(x), k=0, impl=self.impl_for(x))

    def step(self, x: torch.Tensor, g: torch.Tensor, state: AMSGradState) -> tuple[torch.Tensor, AMSGradState]:
        """Apply one update with gradient g (shape/dtype/device of x; ValueError otherwise); x and state in place.

        No allocation after the first step (the scratch in ``state.work``). Raises RuntimeError when
        ``impl=compiled`` was asked for and torch.compile fails (under ``impl=auto`` the rule warns and goes eager).
        """
        if g.shape != x.shape or g.dtype != x.dtype or g.device != x.device:
            self.check_g(x, g)
        impl = state.impl
        if impl == "fused":
            self._step_fused(x, g, state)
        elif impl == "native":
            self._step_native(x, g, state)
        elif impl == "compiled":
            self._step_compiled(x, g, state)
        else:
            self._step_eager(x, g, state)
        if self.bounds is not None:
            x.clamp_(self.bounds[0], self.bounds[1])
        return x, state

    def _step_fused(self, x: torch.Tensor, g: torch.Tensor, state: AMSGradState) -> None:
        """torch's fused Adam kernel (amsgrad, no weight decay): one pass over x, g, m, v, vhat."""
        step_t = state.work
        if step_t is None:  # torch's own step counter: a float32 scalar tensor on x's device, bumped by the kernel
            step_t = state.work = torch.zeros((), dtype=torch.float32, device=x.device)
        k = state.k = state.k + 1
        step_t.fill_(k - 1)
        torch_adam_functional(
            [x],
            [g],
            [state.m],
            [state.v],
            [state.vhat],
            [step_t],
            foreach=False,
            capturable=False,
            differentiable=False,
            fused=True,
            grad_scale=None,
            found_inf=None,
            has_complex=False,
            amsgrad=True,
            beta1=self.beta1,
            beta2=self.beta2,
            lr=self.schedule(k),
            weight_decay=0.0,
            eps=self.eps,
            maximize=False,
        )

    def _step_native(self, x: torch.Tensor, g: torch.Tensor, state: AMSGradState) -> None:
        """The paper variant as one C loop (algorithms/native.py); x and the state are contiguous by init."""
        if not x.is_contiguous():
            raise RuntimeError("amsgrad impl=native: x is not contiguous")
        g = g.contiguous()  # itself when it already is
        k = state.k = state.k + 1
        native.paper_step(
            x,
            g,
            state.m,
            state.v,
            state.vhat,
            lr=self.schedule(k),
            one_minus_beta1=1 - self.beta1,
            beta2=self.beta2,
            one_minus_beta2=1 - self.beta2,
            vhat_floor=self.vhat_floor,
            eps=self.eps,
        )

    def _step_compiled(self, x: torch.Tensor, g: torch.Tensor, state: AMSGradState) -> None:
        """The paper variant as one torch.compile'd kernel (under auto, eager from now on if compiling fails)."""
        scalars = state.work
        if scalars is None:  # lr (filled each step) and the constants as 0-d tensors (no recompiles), 1 - beta
            # computed in double as the eager ops do (1 - float32(0.999) is 1.3e-5 off 0.001 in relative terms)
            scalars = state.work = tuple(
                torch.tensor(c, dtype=x.dtype, device=x.device)
                for c in (0.0, 1 - self.beta1, self.beta2, 1 - self.beta2, self.vhat_floor, self.eps)
            )
        k = state.k + 1
        scalars[0].fill_(self.schedule(k))
        try:
            _compiled_paper_kernel()(x, g, state.m, state.v, state.vhat, *scalars)
        except Exception as exc:  # noqa: BLE001 - any compiler failure: a toolchain problem, not ours to type
            if self.impl == "compiled":
                raise RuntimeError(f"amsgrad impl=compiled: torch.compile failed: {exc}") from exc
            fallback = "native" if _native_fits(x) and self._native_builds() else "eager"
            warnings.warn(
                f"amsgrad impl=auto: torch.compile failed ({type(exc).__name__}: {exc}); stepping with impl={fallback}",
                RuntimeWarning,
                stacklevel=3,
            )
            self._compile_failed = True
            state.impl, state.work = fallback, None
            self._step_native(x, g, state) if fallback == "native" else self._step_eager(x, g, state)
            return
        state.k = k

    def _step_eager(self, x: torch.Tensor, g: torch.Tensor, state: AMSGradState) -> None:
        """Seven in-place tensor ops (torch's order for the torch variant)."""
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


def _native_fits(x: torch.Tensor) -> bool:
    """Whether the C kernel can step x: a contiguous float32/float64 vector on the CPU."""
    return x.device.type == "cpu" and x.dtype in native.DTYPES and x.is_contiguous()


def _paper_kernel(x, g, m, v, vhat, lr, one_minus_beta1, beta2, one_minus_beta2, vhat_floor, eps) -> None:
    """The paper variant's update in place (scalars as 0-d tensors), written for torch.compile to fuse."""
    m.lerp_(g, one_minus_beta1)
    v.mul_(beta2).add_(one_minus_beta2 * g * g)
    vhat.copy_(torch.maximum(vhat, v))
    x.sub_(lr * m * torch.where(vhat > vhat_floor, (vhat.sqrt() + eps).reciprocal(), 0.0))


@functools.cache
def _compiled_paper_kernel():
    """``torch.compile(_paper_kernel)``, made once per process: dynamic shapes (one kernel for every d), one graph,
    and inductor compiling in this process (no pool of compile workers left behind)."""
    import torch._inductor.config as inductor_config  # lazy: inductor loads only when compiling

    inductor_config.compile_threads = 1
    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)  # "no CUDA runtime" on CPU hosts
    return torch.compile(_paper_kernel, dynamic=True, fullgraph=True)
