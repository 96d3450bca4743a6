"""Step time of our AMSGrad (variants paper and torch) against torch.optim.Adam(amsgrad=True, fused=True).

One run, one math thread (torch.set_num_threads(1)), float32, d = 784 (logistic regression on Fashion-MNIST),
47,236 (rcv1's dimension), 61,706 (LeNet5) and 1,000,000. Every
contender keeps its own x, gradient and state alive for the whole run; the contenders are timed in interleaved
rounds (so drift hits all alike), each call timed alone with perf_counter_ns, after a warm-up; we report the
median per call in microseconds. The gradient is a fixed dense N(0, 1) vector (no zeros). torch's side is a full
``optimizer.step()`` (its Python overhead included), our side a full ``rule.step(x, g, state)``.
If fused Adam is unavailable on this CPU build, torch's foreach implementation is used and ``torch_impl`` says so.
Each variant is timed with the implementation ``impl=auto`` picks at that d (the default: the target applies to
these rows: the paper variant's C loop, ``native``, where a C compiler builds it) and with ``impl=eager`` (the
reference ops, for comparison); the compiled kernel is compiled during the warm-up.

Writes benchmarks/results/bench_rules.csv (columns: rule, variant, impl, d, median_us, torch_median_us, ratio,
torch_impl; ratio = median_us / torch_median_us, target <= 1.2 for impl=auto) and prints the table.

Usage: python benchmarks/bench_rules.py [--quick] [--out PATH]
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from algorithms import build_rule  # noqa: E402
from benchmarks.common import parser, write_csv  # noqa: E402 (after the sys.path line)

DIMS = (784, 47_236, 61_706, 1_000_000)
VARIANTS = ("paper", "torch")
IMPLS = ("auto", "eager")
COLUMNS = ("rule", "variant", "impl", "d", "median_us", "torch_median_us", "ratio", "torch_impl")


def torch_adam_step(x0: torch.Tensor, g: torch.Tensor) -> tuple[Callable[[], object], str]:
    """A zero-argument closure doing one torch Adam(amsgrad=True) step, fused if possible; and the impl's name."""
    for impl, kw in (("fused", {"fused": True}), ("foreach", {"foreach": True})):
        p = x0.clone().requires_grad_(True)
        p.grad = g.clone()
        try:
            opt = torch.optim.Adam([p], lr=1e-3, amsgrad=True, **kw)
            opt.step()
        except (RuntimeError, ValueError):
            continue
        return opt.step, impl
    raise RuntimeError("neither fused nor foreach torch Adam works here")


def rule_step(variant: str, impl: str, x0: torch.Tensor, g: torch.Tensor) -> tuple[Callable[[], object], str]:
    """A zero-argument closure doing one step of our AMSGrad, and the implementation it runs (auto resolved)."""
    rule = build_rule("amsgrad", variant=variant, lr=1e-3, impl=impl)
    x = x0.clone()
    state = rule.init(x)
    return (lambda: rule.step(x, g, state)), state.impl


def time_calls(fn, n: int) -> list[int]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        fn()
        out.append(time.perf_counter_ns() - t0)
    return out


def bench_dim(d: int, reps: int, rounds: int, warmup: int) -> list[dict]:
    gen = torch.Generator().manual_seed(0)
    x0 = torch.randn(d, generator=gen)
    g = torch.randn(d, generator=gen)
    torch_fn, torch_impl = torch_adam_step(x0, g)
    ours = {(v, impl): rule_step(v, impl, x0, g) for v in VARIANTS for impl in IMPLS}
    contenders = {"torch_adam": torch_fn, **{key: fn for key, (fn, _) in ours.items()}}
    times: dict[str, list[int]] = {name: [] for name in contenders}
    for fn in contenders.values():
        time_calls(fn, warmup)
    per_round = max(1, reps // rounds)
    for _ in range(rounds):
        for name, fn in contenders.items():
            times[name] += time_calls(fn, per_round)
    torch_us = statistics.median(times["torch_adam"]) / 1e3
    rows = []
    for (v, impl), (_, resolved) in ours.items():
        us = statistics.median(times[(v, impl)]) / 1e3
        rows.append(
            dict(
                rule="amsgrad",
                variant=v,
                impl=impl if impl == resolved else f"{impl}:{resolved}",
                d=d,
                median_us=round(us, 2),
                torch_median_us=round(torch_us, 2),
                ratio=round(us / torch_us, 3),
                torch_impl=torch_impl,
            )
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = parser(__file__, __doc__)
    ap.add_argument("--quick", action="store_true", help="few repetitions (a smoke run, not a measurement)")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results" / "bench_rules.csv")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    rows = []
    for d in DIMS:
        reps = (3000 if d < 200_000 else 400) // (20 if args.quick else 1)
        rows += bench_dim(d, reps=reps, rounds=10, warmup=max(5, reps // 10))
    write_csv(args.out, rows, COLUMNS)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, float32, CPU; median per step. ratio =")
    print("ours / torch's Adam(amsgrad=True, fused=True).step(); below 1 where ours runs the same fused kernel")
    print("without Adam.step's Python bookkeeping (impl=auto:fused), a compiled kernel (auto:compiled) or our C loop")
    print("(auto:native; the paper's rule, no bias correction: the same arithmetic as eager, not torch's)")
    print(" ".join(f"{c:>16}" for c in COLUMNS))
    for r in rows:
        print(" ".join(f"{r[c]!s:>16}" for c in COLUMNS))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
