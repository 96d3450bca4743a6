"""Tests of algorithms/: AMSGrad (paper and torch variants), SGD, schedules, bounds, validation, registry.

References: torch.optim.Adam(amsgrad=True) and torch.optim.SGD (same inputs, compared over 100 steps), the paper's
update written out in plain Python floats, and invariants (vhat never decreases, zero-gradient coordinates).
"""

from __future__ import annotations

import math

import pytest
import torch

from algorithms import (
    HyperparameterError,
    UnknownRuleError,
    UpdateRule,
    build_rule,
    build_schedule,
    clone_state,
    register_rule,
    rule_names,
)
from algorithms import registry as registry_module

TOL = {torch.float32: dict(rtol=1e-6, atol=1e-7), torch.float64: dict(rtol=1e-12, atol=1e-12)}


def random_grads(n_steps: int, d: int, dtype: torch.dtype, seed: int) -> list[torch.Tensor]:
    """Gradients with varied scales, random zeros, and two coordinates that are always zero."""
    gen = torch.Generator().manual_seed(seed)
    grads = []
    for _ in range(n_steps):
        scale = 10.0 ** torch.empty(d, dtype=torch.float64).uniform_(-3, 1, generator=gen)
        g = torch.randn(d, dtype=torch.float64, generator=gen) * scale
        g[torch.rand(d, generator=gen) < 0.3] = 0.0
        g[:2] = 0.0
        grads.append(g.to(dtype))
    return grads


# ---------------------------------------------------------------- torch variant vs torch.optim.Adam(amsgrad=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("ours", ["eager", "fused"])
@pytest.mark.parametrize("impl", ["foreach", "single_tensor"])
@pytest.mark.parametrize(
    "lr,beta1,beta2,eps",
    [(1e-3, 0.9, 0.999, 1e-8), (3e-2, 0.5, 0.99, 1e-6), (1e-1, 0.0, 0.9, 1e-30), (1e-2, 0.95, 0.0, 1e-8)],
)
def test_torch_variant_matches_torch_adam_amsgrad(dtype, ours, impl, lr, beta1, beta2, eps):
    """eps = 1e-30 stands for eps = 0, which the rule refuses (0/0 on an untouched coordinate)."""
    d, n_steps = 257, 100
    x0 = torch.randn(d, dtype=dtype, generator=torch.Generator().manual_seed(1))
    grads = random_grads(n_steps, d, dtype, seed=2)
    if eps < 1e-20:  # as good as no eps: keep every coordinate's vhat away from 0 (every coordinate touched once)
        grads[0][:] = 1.0

    p = x0.clone().requires_grad_(True)
    opt = torch.optim.Adam([p], lr=lr, betas=(beta1, beta2), eps=eps, amsgrad=True, foreach=(impl == "foreach"))
    rule = build_rule("amsgrad", variant="torch", lr=lr, beta1=beta1, beta2=beta2, eps=eps, impl=ours)
    x = x0.clone()
    state = rule.init(x)
    assert state.impl == ours
    for g in grads:
        p.grad = g.clone()
        opt.step()
        x_out, state_out = rule.step(x, g.clone(), state)
        assert x_out is x and state_out is state
    ts = opt.state[p]
    assert state.k == n_steps == int(ts["step"].item())
    if ours == "eager" and impl == "single_tensor":  # the same ops in the same order: the same bits
        assert torch.equal(x, p.detach()) and torch.equal(state.vhat, ts["max_exp_avg_sq"])
    torch.testing.assert_close(x, p.detach(), **TOL[dtype])
    torch.testing.assert_close(state.m, ts["exp_avg"], **TOL[dtype])
    torch.testing.assert_close(state.v, ts["exp_avg_sq"], **TOL[dtype])
    torch.testing.assert_close(state.vhat, ts["max_exp_avg_sq"], **TOL[dtype])
    assert torch.isfinite(x).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("ours", ["eager", "fused"])
def test_torch_variant_against_fused_torch_adam(dtype, ours):
    """Our fused impl is torch's fused kernel: the same bits. Eager rounds like torch's single-tensor code, which
    differs from the fused kernel by a few ulps."""
    d = 300
    x0 = torch.randn(d, dtype=dtype, generator=torch.Generator().manual_seed(3))
    grads = random_grads(100, d, dtype, seed=4)
    p = x0.clone().requires_grad_(True)
    opt = torch.optim.Adam([p], lr=1e-2, amsgrad=True, fused=True)
    rule = build_rule("amsgrad", variant="torch", lr=1e-2, impl=ours)
    x = x0.clone()
    state = rule.init(x)
    for g in grads:
        p.grad = g.clone()
        opt.step()
        rule.step(x, g, state)
    if ours == "fused":
        assert torch.equal(x, p.detach()) and torch.equal(state.vhat, opt.state[p]["max_exp_avg_sq"])
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == torch.float32 else dict(rtol=1e-12, atol=1e-13)
    torch.testing.assert_close(x, p.detach(), **tol)


def test_auto_impl_picks_fused_for_torch_and_the_c_kernel_for_the_paper_variant(monkeypatch):
    small, large, huge = torch.zeros(1000), torch.zeros(2**17), torch.zeros(2**19)
    assert build_rule("amsgrad", variant="torch").init(small).impl == "fused"
    assert build_rule("amsgrad", variant="torch").init(large).impl == "fused"
    assert build_rule("amsgrad", variant="paper").init(small).impl == "native"
    assert build_rule("amsgrad", variant="paper").init(large).impl == "native"
    assert build_rule("amsgrad", variant="paper").init(huge).impl == "compiled"
    assert build_rule("amsgrad", variant="paper").init(torch.zeros(2**18)[::2]).impl == "compiled"  # strided
    assert build_rule("amsgrad", variant="paper", impl="eager").init(large).impl == "eager"
    # no C compiler: auto warns once and picks what it picked before the C kernel (compiled from 2**17 on)
    from algorithms import native

    monkeypatch.setattr(native, "_LOADED", {"error": "no C compiler 'cc' on PATH (set CC to one)"})
    auto = build_rule("amsgrad", variant="paper")
    with pytest.warns(RuntimeWarning, match="C kernel is unavailable \\(no C compiler"):
        assert auto.init(small).impl == "eager"
    assert auto.init(large).impl == "compiled"
    with pytest.raises(RuntimeError, match="impl=native: no C compiler 'cc'"):
        build_rule("amsgrad", variant="paper", impl="native").init(small)


def test_native_impl_refuses_what_it_cannot_step():
    rule = build_rule("amsgrad", variant="paper", impl="native")
    with pytest.raises(RuntimeError, match="impl=native: needs a contiguous .*contiguous=False"):
        rule.init(torch.zeros(16)[::2])


def test_native_build_failure_names_the_compiler_and_is_tried_once(monkeypatch, tmp_path):
    from algorithms import native

    monkeypatch.setattr(native, "_LOADED", {})
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("CC", "no-such-compiler-xyz")
    with pytest.raises(native.NativeUnavailable, match="no C compiler 'no-such-compiler-xyz'"):
        native.kernels()
    monkeypatch.setenv("CC", "cc")  # remembered: the process does not try again
    with pytest.raises(native.NativeUnavailable, match="no-such-compiler-xyz"):
        native.kernels()
    assert not native.available()


def test_native_build_is_cached_per_machine_and_written_atomically(monkeypatch, tmp_path):
    from algorithms import native

    monkeypatch.setattr(native, "_LOADED", {})
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert set(native.kernels()) == {torch.float32, torch.float64}
    built = list((tmp_path / "apam-harness" / "native").iterdir())
    assert len(built) == 1 and built[0].suffix == ".so" and built[0].name.startswith("amsgrad-")
    stamp = built[0].stat().st_mtime_ns
    monkeypatch.setattr(native, "_LOADED", {})
    native.kernels()  # a second process finds the build
    assert [p.stat().st_mtime_ns for p in (tmp_path / "apam-harness" / "native").iterdir()] == [stamp]


def test_torch_variant_with_inv_sqrt_schedule_matches_torch_with_same_lrs():
    dtype, d = torch.float64, 64
    x0 = torch.randn(d, dtype=dtype, generator=torch.Generator().manual_seed(5))
    grads = random_grads(50, d, dtype, seed=6)
    rule = build_rule("amsgrad", variant="torch", lr=0.5, lr_schedule="inv_sqrt", alpha_max=0.2)
    p = x0.clone().requires_grad_(True)
    opt = torch.optim.Adam([p], lr=1.0, amsgrad=True, foreach=False)
    x = x0.clone()
    state = rule.init(x)
    for k, g in enumerate(grads, start=1):
        opt.param_groups[0]["lr"] = min(0.5 / math.sqrt(k), 0.2)
        p.grad = g.clone()
        opt.step()
        rule.step(x, g, state)
    torch.testing.assert_close(x, p.detach(), **TOL[dtype])


# ---------------------------------------------------------------- paper variant


def paper_by_hand(x, grads, lr, beta1, beta2, floor):
    """APAM.md section 1 in plain Python floats: no bias correction, no eps, skip vhat <= floor."""
    d = len(x)
    x, m, v, vhat = list(x), [0.0] * d, [0.0] * d, [0.0] * d
    for g in grads:
        for i in range(d):
            m[i] = beta1 * m[i] + (1 - beta1) * g[i]
            v[i] = beta2 * v[i] + (1 - beta2) * g[i] ** 2
            vhat[i] = max(vhat[i], v[i])
            if vhat[i] > floor:
                x[i] = x[i] - lr * m[i] / math.sqrt(vhat[i])
    return x, m, v, vhat


@pytest.mark.parametrize("paper_impl", ["eager", "compiled", "native"])
@pytest.mark.parametrize("dtype,rtol", [(torch.float64, 1e-13), (torch.float32, 2e-6)])
def test_paper_variant_three_steps_by_hand(dtype, rtol, paper_impl):
    x0 = [1.0, -2.0, 0.5, 3.0, 0.25]
    # coordinate 3: always zero; coordinate 4: so small that vhat stays below the 1e-11 floor
    grads = [[0.5, -1.0, 2.0, 0.0, 1e-5], [-0.25, 0.0, 1.5, 0.0, 2e-5], [1.0, 3.0, -0.5, 0.0, 1e-5]]
    lr, beta1, beta2 = 0.1, 0.9, 0.99
    rule = build_rule("amsgrad", variant="paper", lr=lr, beta1=beta1, beta2=beta2, impl=paper_impl)
    x = torch.tensor(x0, dtype=dtype)
    state = rule.init(x)
    for g in grads:
        rule.step(x, torch.tensor(g, dtype=dtype), state)
    ex, em, ev, evhat = paper_by_hand(x0, grads, lr, beta1, beta2, 1e-11)
    for got, want in ((x, ex), (state.m, em), (state.v, ev), (state.vhat, evhat)):
        torch.testing.assert_close(got, torch.tensor(want, dtype=dtype), rtol=rtol, atol=0.0)
    assert x[3].item() == 3.0 and x[4].item() == 0.25  # skipped coordinates did not move
    assert x[0].item() != 1.0  # and the others did


def test_paper_variant_first_step_is_signed_step_of_size_lr_over_sqrt_one_minus_beta2():
    # k=1: m = (1-b1) g, vhat = (1-b2) g^2  =>  x1 = x0 - lr (1-b1)/sqrt(1-b2) sign(g)
    lr, beta1, beta2 = 0.01, 0.9, 0.999
    rule = build_rule("amsgrad", variant="paper", lr=lr, beta1=beta1, beta2=beta2)
    x = torch.zeros(4, dtype=torch.float64)
    state = rule.init(x)
    rule.step(x, torch.tensor([3.0, -0.5, 100.0, 0.0], dtype=torch.float64), state)
    s = lr * (1 - beta1) / math.sqrt(1 - beta2)
    torch.testing.assert_close(x, torch.tensor([-s, s, -s, 0.0], dtype=torch.float64), rtol=1e-14, atol=0.0)


@pytest.mark.parametrize("paper_impl", ["eager", "compiled", "native"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_paper_variant_zero_gradient_coordinates_never_move_nor_nan(dtype, paper_impl):
    d, n = 64, 300
    x0 = torch.randn(d, dtype=dtype, generator=torch.Generator().manual_seed(7))
    grads = random_grads(n, d, dtype, seed=8)  # coordinates 0 and 1 are always zero
    for g in grads:
        g[2] = 1e-7  # vhat -> 1e-14 < floor: never moves either
    rule = build_rule("amsgrad", variant="paper", lr=0.05, impl=paper_impl)
    x = x0.clone()
    state = rule.init(x)
    for g in grads:
        rule.step(x, g, state)
        assert torch.isfinite(x).all()
    assert torch.equal(x[:3], x0[:3])
    assert not torch.equal(x[3:], x0[3:])


@pytest.mark.parametrize("paper_impl", ["eager", "compiled", "native"])
def test_paper_variant_vhat_floor_is_configurable(paper_impl):
    g = torch.tensor([1e-7, 1.0], dtype=torch.float64)  # vhat = 1e-3 * 1e-14 = 1e-17 after one step
    for floor, moves in ((1e-11, False), (1e-20, True), (0.0, True)):
        rule = build_rule("amsgrad", variant="paper", lr=0.1, vhat_floor=floor, impl=paper_impl)
        x = torch.zeros(2, dtype=torch.float64)
        rule.step(x, g.clone(), rule.init(x))
        assert (x[0].item() != 0.0) is moves
        assert x[1].item() != 0.0


@pytest.mark.parametrize("paper_impl", ["eager", "compiled", "native"])
def test_paper_variant_positive_eps_enters_the_denominator(paper_impl):
    rule = build_rule("amsgrad", variant="paper", lr=0.1, beta1=0.0, beta2=0.0, eps=0.5, impl=paper_impl)
    x = torch.zeros(1, dtype=torch.float64)
    rule.step(x, torch.tensor([4.0], dtype=torch.float64), rule.init(x))
    # m = 4, vhat = 16: x = -0.1 * 4 / (4 + 0.5)
    assert x.item() == pytest.approx(-0.4 / 4.5, rel=1e-15)


@pytest.mark.parametrize(
    "variant,impl",
    [("paper", "eager"), ("paper", "compiled"), ("paper", "native"), ("torch", "eager"), ("torch", "fused")],
)
def test_vhat_never_decreases_and_is_the_running_max_of_v(variant, impl):
    d = 200
    gen = torch.Generator().manual_seed(9)
    rule = build_rule("amsgrad", variant=variant, lr=1e-2, beta1=0.9, beta2=0.9, impl=impl)
    x = torch.zeros(d)
    state = rule.init(x)
    running_max = torch.zeros(d)
    decreased_v = False
    for k in range(400):
        scale = 3.0 if k % 50 < 5 else 0.1  # bursts, so v rises and then decays
        g = torch.randn(d, generator=gen) * scale
        g[torch.rand(d, generator=gen) < 0.2] = 0.0
        prev_vhat, prev_v = state.vhat.clone(), state.v.clone()
        rule.step(x, g, state)
        assert (state.vhat >= prev_vhat).all()
        running_max = torch.maximum(running_max, state.v)
        assert torch.equal(state.vhat, running_max)
        decreased_v |= bool((state.v < prev_v).any())
    assert decreased_v  # the invariant was exercised: v did fall while vhat held


@pytest.mark.parametrize("eps", [0.0, 1e-3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_paper_variant_native_equals_eager(dtype, eps):
    """The C loop does the eager ops' arithmetic in their order; with eps = 0 (the paper's) it rounds as torch's
    vectorized CPU kernels do (lerp and addcmul with fused multiply-adds): the same bits where torch runs them
    (AVX2/AVX-512); otherwise, and with eps > 0 (a division torch rounds its own way), to a few ulps."""
    d = 1031  # not a multiple of any vector width: the loop's tail runs too
    x0 = torch.randn(d, dtype=dtype, generator=torch.Generator().manual_seed(21))
    grads = random_grads(150, d, dtype, seed=22)
    for k, g in enumerate(grads):
        g.mul_(10.0 ** (k % 5 - 2))  # magnitudes that make vhat hold, rise, and v decay
        g[2] = 1e-7  # under the vhat floor
    xs, states = {}, {}
    for impl in ("eager", "native"):
        rule = build_rule("amsgrad", variant="paper", lr=1e-2, eps=eps, impl=impl)
        xs[impl] = x0.clone()
        states[impl] = rule.init(xs[impl])
        for g in grads:
            rule.step(xs[impl], g, states[impl])
    assert states["native"].impl == "native" and states["native"].k == 150
    for name in ("m", "v", "vhat"):  # no division here: the same bits
        assert torch.equal(getattr(states["native"], name), getattr(states["eager"], name)), name
    assert torch.equal(xs["native"][:3], x0[:3])
    if eps == 0.0 and torch.backends.cpu.get_cpu_capability() in ("AVX2", "AVX512"):
        assert torch.equal(xs["native"], xs["eager"])
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == torch.float32 else dict(rtol=1e-12, atol=1e-13)
    torch.testing.assert_close(xs["native"], xs["eager"], **tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_paper_variant_native_propagates_nan_as_eager(dtype):
    rule = {impl: build_rule("amsgrad", variant="paper", lr=0.1, impl=impl) for impl in ("eager", "native")}
    out = {}
    for impl, r in rule.items():
        x = torch.ones(4, dtype=dtype)
        state = r.init(x)
        r.step(x, torch.tensor([1.0, float("nan"), 0.0, float("inf")], dtype=dtype), state)
        out[impl] = (x, state.vhat)
    for a, b in zip(out["native"], out["eager"]):
        assert torch.equal(a.isnan(), b.isnan()) and torch.equal(a.nan_to_num(), b.nan_to_num())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_paper_variant_compiled_equals_eager_to_rounding(dtype):
    d = 333
    x0 = torch.randn(d, dtype=dtype, generator=torch.Generator().manual_seed(11))
    grads = random_grads(100, d, dtype, seed=12)
    xs, states = {}, {}
    for impl in ("eager", "compiled"):
        rule = build_rule("amsgrad", variant="paper", lr=1e-2, impl=impl)
        xs[impl] = x0.clone()
        states[impl] = rule.init(xs[impl])
        for g in grads:
            rule.step(xs[impl], g, states[impl])
    assert states["compiled"].impl == "compiled" and states["compiled"].k == 100
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == torch.float32 else dict(rtol=1e-12, atol=1e-13)
    torch.testing.assert_close(xs["compiled"], xs["eager"], **tol)
    torch.testing.assert_close(states["compiled"].vhat, states["eager"].vhat, **tol)
    assert torch.equal(xs["compiled"][:2], x0[:2])  # the always-zero coordinates


def test_compile_failure_warns_and_steps_eagerly_under_auto_and_raises_when_asked(monkeypatch):
    from algorithms import amsgrad as amsgrad_module

    def broken():
        def kernel(*args):
            raise RuntimeError("no C++ compiler")

        return kernel

    monkeypatch.setattr(amsgrad_module, "_compiled_paper_kernel", broken)
    monkeypatch.setattr(amsgrad_module.native, "_LOADED", {"error": "no C compiler"})  # auto goes to compiled
    g = torch.randn(2**17, generator=torch.Generator().manual_seed(13))
    auto, eager = (
        build_rule("amsgrad", variant="paper", lr=0.1),
        build_rule("amsgrad", variant="paper", lr=0.1, impl="eager"),
    )
    xa, xe = torch.ones(2**17), torch.ones(2**17)
    with pytest.warns(RuntimeWarning, match="C kernel is unavailable"):
        sa = auto.init(xa)
    se = eager.init(xe)
    assert sa.impl == "compiled"
    with pytest.warns(RuntimeWarning, match="no C\\+\\+ compiler"):
        auto.step(xa, g, sa)
    eager.step(xe, g, se)
    assert sa.impl == "eager" and sa.k == 1 and torch.equal(xa, xe)
    assert auto.init(torch.ones(2**17)).impl == "eager"  # the rule does not try again
    # with the C kernel there, a failed compile falls back to it (the same bits as eager with eps = 0)
    monkeypatch.setattr(amsgrad_module.native, "_LOADED", {})
    auto2, eager2 = (
        build_rule("amsgrad", variant="paper", lr=0.1),
        build_rule("amsgrad", variant="paper", lr=0.1, impl="eager"),
    )
    gh = torch.randn(2**19, generator=torch.Generator().manual_seed(14))
    xa2, xe2 = torch.ones(2**19), torch.ones(2**19)
    sa2, se2 = auto2.init(xa2), eager2.init(xe2)
    assert sa2.impl == "compiled"
    with pytest.warns(RuntimeWarning, match="stepping with impl=native"):
        auto2.step(xa2, gh, sa2)
    eager2.step(xe2, gh, se2)
    assert sa2.impl == "native" and sa2.k == 1
    torch.testing.assert_close(xa2, xe2, rtol=1e-6, atol=1e-7)
    asked = build_rule("amsgrad", variant="paper", lr=0.1, impl="compiled")
    x = torch.ones(8)
    with pytest.raises(RuntimeError, match="impl=compiled: torch.compile failed: no C"):
        asked.step(x, g[:8], asked.init(x))
    assert torch.equal(x, torch.ones(8))


# ---------------------------------------------------------------- SGD


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_sgd_exact_values_and_match_torch_sgd(dtype):
    rule = build_rule("sgd", lr=0.25)
    x = torch.tensor([1.0, -2.0, 0.5], dtype=dtype)
    state = rule.init(x)
    rule.step(x, torch.tensor([2.0, 4.0, 0.0], dtype=dtype), state)
    assert x.tolist() == [0.5, -3.0, 0.5] and state.k == 1  # exact in binary floating point

    x0 = torch.randn(100, dtype=dtype, generator=torch.Generator().manual_seed(10))
    grads = random_grads(100, 100, dtype, seed=11)
    p = x0.clone().requires_grad_(True)
    opt = torch.optim.SGD([p], lr=0.01)
    rule = build_rule("sgd", lr=0.01)
    x = x0.clone()
    state = rule.init(x)
    for g in grads:
        p.grad = g.clone()
        opt.step()
        rule.step(x, g, state)
    torch.testing.assert_close(x, p.detach(), **TOL[dtype])


def test_sgd_inv_sqrt_schedule_values():
    rule = build_rule("sgd", lr=1.0, lr_schedule="inv_sqrt")
    x = torch.zeros(1, dtype=torch.float64)
    state = rule.init(x)
    for _ in range(4):
        rule.step(x, torch.ones(1, dtype=torch.float64), state)
    assert x.item() == pytest.approx(-(1 + 1 / math.sqrt(2) + 1 / math.sqrt(3) + 0.5), rel=1e-15)


# ---------------------------------------------------------------- schedules


def test_schedule_values():
    const = build_schedule("constant", 0.3)
    assert [const(k) for k in (1, 2, 100)] == [0.3, 0.3, 0.3]
    assert build_schedule("constant", 0.1, alpha_max=0.3)(5) == 0.1  # at or under its cap: the step as given
    with pytest.raises(ValueError, match="alpha_max=0.1: a constant step lr=0.3 above its cap"):
        build_schedule("constant", 0.3, alpha_max=0.1)  # above it: refused, not silently capped (434facae)
    inv = build_schedule("inv_sqrt", 10.0, alpha_max=0.01)  # the paper's logistic regression
    assert inv(1) == 0.01 and inv(10**6) == 0.01
    assert inv(10**6 + 1) == pytest.approx(10 / math.sqrt(10**6 + 1), rel=1e-15)
    assert inv(4 * 10**6) == pytest.approx(0.005, rel=1e-15)
    nocap = build_schedule("inv_sqrt", 2.0)
    assert [nocap(k) for k in (1, 4, 16)] == [2.0, 1.0, 0.5]
    with pytest.raises(ValueError, match="k=0"):
        nocap(0)


def test_lr_at_reports_the_schedule():
    rule = build_rule("amsgrad", variant="paper", lr=10.0, lr_schedule="inv_sqrt", alpha_max=0.01)
    assert rule.lr_at(1) == 0.01 and rule.lr_at(4 * 10**6) == pytest.approx(0.005)
    assert build_rule("sgd", lr=0.2).lr_at(7) == 0.2


# ---------------------------------------------------------------- bounds (projection)


@pytest.mark.parametrize("name,kw", [("sgd", {}), ("amsgrad", {"variant": "paper"}), ("amsgrad", {"variant": "torch"})])
def test_bounds_clip_after_each_step(name, kw):
    d = 50
    x0 = torch.randn(d, dtype=torch.float64, generator=torch.Generator().manual_seed(12)).clamp_(-0.5, 0.5)
    grads = random_grads(20, d, torch.float64, seed=13)
    free = build_rule(name, lr=0.3, **kw)
    boxed = build_rule(name, lr=0.3, bounds=(-0.5, 0.5), **kw)
    xb = x0.clone()
    sb = boxed.init(xb)
    for g in grads:
        # one unconstrained step from the bounded run's current point and state, then clip == the bounded step
        xf, sf = free.step(xb.clone(), g, clone_state(sb))
        boxed.step(xb, g, sb)
        assert xb.min() >= -0.5 and xb.max() <= 0.5
        assert torch.equal(xb, xf.clamp(-0.5, 0.5))
    assert (xb.abs() == 0.5).any()  # the box was active


# ---------------------------------------------------------------- state cloning


def test_clone_state_is_independent_and_reproduces_the_trajectory():
    rule = build_rule("amsgrad", variant="torch", lr=1e-2)
    grads = random_grads(20, 30, torch.float32, seed=14)
    x = torch.randn(30, generator=torch.Generator().manual_seed(15))
    state = rule.init(x)
    for g in grads[:10]:
        rule.step(x, g, state)
    snap, x_snap = clone_state(state), x.clone()
    assert snap.k == 10 and snap.work is None
    for name in ("m", "v", "vhat"):
        assert torch.equal(getattr(snap, name), getattr(state, name))
        assert getattr(snap, name).data_ptr() != getattr(state, name).data_ptr()
    for g in grads[10:]:
        rule.step(x, g, state)
    assert snap.k == 10 and not torch.equal(snap.m, state.m)
    for g in grads[10:]:
        rule.step(x_snap, g, snap)
    assert torch.equal(x_snap, x) and torch.equal(snap.vhat, state.vhat)
    with pytest.raises(TypeError):
        clone_state({"m": x})


# ---------------------------------------------------------------- validation and registry


@pytest.mark.parametrize(
    "name,kw,words",
    [
        ("amsgrad", dict(variant="paper", lr=0.0), ["lr", "0.0"]),
        ("amsgrad", dict(variant="torch", lr=-1e-3), ["lr", "-0.001"]),
        ("sgd", dict(lr=float("nan")), ["lr", "nan"]),
        ("amsgrad", dict(variant="torch", beta1=1.0), ["beta1", "1.0"]),
        ("amsgrad", dict(variant="torch", beta2=-0.1), ["beta2", "-0.1"]),
        ("amsgrad", dict(variant="torch", eps=-1e-8), ["eps", "-1e-08"]),
        ("amsgrad", {"variant": "torch", "eps": 0}, ["eps=0", "torch", "NaN"]),
        ("amsgrad", {"variant": "torch", "eps": 0.0, "impl": "fused"}, ["eps=0.0", "torch"]),
        # below float32's smallest number: 0 in the parameters' arithmetic (it ran, and diverged to NaN)
        ("amsgrad", {"variant": "torch", "eps": 1e-46}, ["eps=1e-46", "0 in float32"]),
        ("amsgrad", {"variant": "torch", "eps": 1e-300}, ["eps=1e-300", "0 in float32"]),
        ("amsgrad", dict(variant="paper", vhat_floor=-1.0), ["vhat_floor", "-1.0"]),
        ("amsgrad", dict(variant="torch", vhat_floor=1e-11), ["vhat_floor", "torch"]),
        ("amsgrad", dict(variant="adam"), ["variant", "'adam'"]),
        ("amsgrad", dict(variant="paper", impl="fused"), ["impl", "'fused'", "paper"]),
        ("amsgrad", dict(variant="torch", impl="compiled"), ["impl", "'compiled'", "torch"]),
        ("amsgrad", dict(variant="torch", impl="cuda"), ["impl", "'cuda'"]),
        ("amsgrad", dict(), ["variant"]),
        ("amsgrad", dict(variant="paper", beta1="0.9"), ["beta1", "'0.9'"]),
        ("sgd", dict(lr_schedule="cosine"), ["lr_schedule", "'cosine'"]),
        ("sgd", dict(alpha_max=0.0), ["alpha_max", "0.0"]),
        ("sgd", dict(bounds=(1.0, -1.0)), ["bounds", "(1.0, -1.0)"]),
        ("sgd", dict(bounds=3.0), ["bounds", "3.0"]),
        ("sgd", dict(momentum=0.9), ["momentum"]),
        ("sgd", dict(beta1=0.9), ["beta1"]),
    ],
)
def test_bad_hyperparameters_raise_value_error_naming_key_and_value(name, kw, words):
    with pytest.raises(ValueError) as err:
        build_rule(name, **kw)
    assert isinstance(err.value, HyperparameterError)
    for w in words:
        assert w in str(err.value)


def test_unknown_rule_name():
    with pytest.raises(UnknownRuleError, match="'adamw'.*amsgrad.*sgd"):
        build_rule("adamw", lr=1e-3)
    assert {"amsgrad", "sgd"} <= set(rule_names())


def test_step_rejects_mismatched_gradient_and_init_rejects_bad_x():
    rule = build_rule("amsgrad", variant="paper")
    x = torch.zeros(5)
    state = rule.init(x)
    with pytest.raises(ValueError, match="shape"):
        rule.step(x, torch.zeros(4), state)
    with pytest.raises(ValueError, match="float64"):
        rule.step(x, torch.zeros(5, dtype=torch.float64), state)
    for bad in (torch.zeros(2, 3), torch.zeros(3, dtype=torch.int64)):
        with pytest.raises(ValueError, match="1-D float32 or float64"):
            rule.init(bad)
    assert state.k == 0


def test_a_registered_rule_is_built_by_name_and_names_are_unique():
    @register_rule
    class SignSGD(UpdateRule):
        name = "test_signsgd"

        def init(self, x):
            return build_rule("sgd").init(x)

        def step(self, x, g, state):
            state.k += 1
            x.sub_(self.schedule(state.k) * torch.sign(g))
            return x, state

    try:
        rule = build_rule("test_signsgd", lr=0.5)
        x = torch.zeros(3)
        rule.step(x, torch.tensor([2.0, -3.0, 0.0]), rule.init(x))
        assert x.tolist() == [-0.5, 0.5, 0.0]
        with pytest.raises(ValueError, match="already registered"):

            @register_rule
            class Other(UpdateRule):
                name = "test_signsgd"

    finally:
        registry_module._RULES.pop("test_signsgd", None)


@pytest.mark.parametrize(
    "name,kw",
    [
        ("sgd", {"bounds": (-1.0, 1.0)}),
        ("amsgrad", {"variant": "paper"}),
        ("amsgrad", {"variant": "torch", "lr_schedule": "inv_sqrt", "alpha_max": 0.1}),
    ],
)
def test_rules_and_states_survive_pickling(name, kw):
    """Engines may ship a rule or a state snapshot to another process."""
    import pickle

    rule = build_rule(name, lr=0.05, **kw)
    grads = random_grads(6, 8, torch.float64, seed=16)
    x = torch.zeros(8, dtype=torch.float64)
    state = rule.init(x)
    for g in grads[:3]:
        rule.step(x, g, state)
    rule2, state2, x2 = pickle.loads(pickle.dumps((rule, clone_state(state), x.clone())))
    assert rule2.hyperparams == rule.hyperparams and state2.k == 3
    for g in grads[3:]:
        rule.step(x, g, state)
        rule2.step(x2, g, state2)
    assert torch.equal(x, x2)


def test_torch_variant_with_a_positive_eps_keeps_zero_gradient_coordinates_finite():
    """The reason eps = 0 is refused: a coordinate whose gradients are all 0 stays put (0 / (0 + eps) = 0)."""
    rule = build_rule("amsgrad", variant="torch", eps=1e-12, lr=0.1)
    x = torch.tensor([1.0, 2.0])
    state = rule.init(x)
    for _ in range(3):
        x, state = rule.step(x, torch.tensor([0.5, 0.0]), state)
    assert torch.isfinite(x).all() and x[1].item() == 2.0 and x[0].item() < 1.0
    assert build_rule("amsgrad", variant="paper", eps=0).eps == 0.0  # the paper's rule skips such coordinates
