"""Per-call time of one minibatch gradient (`problem.loss_grad`), single thread, median over repetitions.

Cases: dense logistic regression (B=64, d=784, Fashion-MNIST-sized), sparse logistic regression on synthetic
rcv1-like data (20,242 x 47,236, density 0.16%, B=64; scipy's compiled CSR kernels and the public-scipy fallback),
LeNet5 on 28x28 images (B=32 and B=40; and, for reference, the same gradient through the nn.Module itself:
vector_to_parameters, backward, parameters_to_vector).
Writes benchmarks/results/bench_grads.csv (one row per case) and prints it.

    python benchmarks/bench_grads.py [--reps 300] [--out benchmarks/results/bench_grads.csv]
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import scipy.sparse as sp  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import problems.logreg as logreg_mod  # noqa: E402
from benchmarks.common import parser  # noqa: E402
from experiments.cli import count_arg  # noqa: E402
from problems import CNNProblem, LeNet5, LogisticRegression  # noqa: E402


def median_time(fn, batches, warmup: int = 10) -> tuple[float, float]:
    """(median, min) seconds of fn(idx) over the index arrays in `batches`, after `warmup` untimed calls."""
    for idx in batches[:warmup]:
        fn(idx)
    ts = []
    for idx in batches:
        t0 = time.perf_counter()
        fn(idx)
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts)), float(np.min(ts))


def batches_for(n: int, b: int, reps: int, seed: int = 0) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, n, (b,), generator=g) for _ in range(reps)]


def rcv1_like(n: int = 20242, d: int = 47236, density: float = 0.0016, seed: int = 0):
    """Random CSR features (rows scaled to unit norm, like rcv1's tf-idf rows) and {0,1} labels."""
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=density, format="csr", random_state=rng, dtype=np.float64)
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    X = sp.diags(1.0 / np.maximum(norms, 1e-12)) @ X
    return X.tocsr(), rng.integers(0, 2, n)


def main(argv: list[str] | None = None) -> int:
    ap = parser(__file__, __doc__)
    ap.add_argument("--reps", type=count_arg, default=300)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "bench_grads.csv")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    rows = []

    def record(case: str, problem_dim: int, b: int, fn, batches) -> None:
        med, best = median_time(fn, batches)
        rows.append(
            {
                "case": case,
                "batch_size": b,
                "dim": problem_dim,
                "reps": len(batches),
                "median_us": round(med * 1e6, 1),
                "min_us": round(best * 1e6, 1),
            }
        )
        print(f"{case:<28} B={b:<3} median {med * 1e6:9.1f} us", flush=True)

    # dense logistic regression, Fashion-MNIST-sized (12,000 x 784, pixels in [0, 1])
    g = torch.Generator().manual_seed(0)
    Xd = torch.rand(12000, 784, generator=g)
    yd = torch.randint(0, 2, (12000,), generator=g)
    dense = LogisticRegression(Xd, yd)
    xd = 0.01 * torch.randn(784, generator=g)
    record("logreg_dense", 784, 64, lambda i: dense.loss_grad(xd, i), batches_for(12000, 64, args.reps))

    # sparse logistic regression, rcv1-like
    Xs, ys = rcv1_like()
    sparse = LogisticRegression(Xs, ys)
    xs = 0.01 * torch.randn(sparse.dim, generator=g)
    bs = batches_for(sparse.num_train, 64, args.reps)
    record("logreg_sparse", sparse.dim, 64, lambda i: sparse.loss_grad(xs, i), bs)
    kernels = logreg_mod._sparsetools
    logreg_mod._sparsetools = None
    try:
        record("logreg_sparse_public_scipy", sparse.dim, 64, lambda i: sparse.loss_grad(xs, i), bs)
    finally:
        logreg_mod._sparsetools = kernels

    # LeNet5 on 28x28 images
    ximg = torch.rand(10000, 1, 28, 28, generator=g)
    yimg = torch.randint(0, 10, (10000,), generator=g)
    lenet = CNNProblem(LeNet5, ximg, yimg, ximg[:100], yimg[:100], name="lenet5")
    xl = lenet.init_params(0)
    module = LeNet5()

    def module_grad(i):  # the same gradient through the module (reference point for the functional path)
        nn.utils.vector_to_parameters(xl, module.parameters())
        module.zero_grad(set_to_none=True)
        loss = F.cross_entropy(module(ximg[i]), yimg[i])
        loss.backward()
        return float(loss), nn.utils.parameters_to_vector([p.grad for p in module.parameters()])

    for b in (32, 40):
        reps = max(20, args.reps // 3)
        record("lenet5", lenet.dim, b, lambda i: lenet.loss_grad(xl, i), batches_for(10000, b, reps))
        record("lenet5_module_reference", lenet.dim, b, module_grad, batches_for(10000, b, reps))

    df = pd.DataFrame(rows)
    df.insert(0, "threads", torch.get_num_threads())
    df["torch"] = torch.__version__
    args.out.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(args.out, index=False)
    print(f"\n{args.out}:\n{df.to_string(index=False)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
