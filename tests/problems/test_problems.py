"""Tests of problems/: logistic regression (dense and sparse), its optimum, the CNN problems and build_problem.

References: central finite differences in float64, the exact softplus formula, scipy's trust-region Newton method
with the analytic Hessian, scikit-learn's LogisticRegression, and autograd on the nn.Module itself.
"""

from __future__ import annotations

import functools
import math
from types import SimpleNamespace

import numpy as np
import pytest
import scipy.optimize
import scipy.sparse as sp
import scipy.special
import torch
import torch.nn as nn
import torch.nn.functional as F

import problems.logreg as logreg_mod
import problems.optimum as optimum_mod
from problems import AllCNN, CNNProblem, LeNet5, LogisticRegression, build_problem, resnet18_cifar


# --------------------------------------------------------------------------------------------------- helpers
def _data(n=120, d=7, seed=0, density=None):
    """Random features (N, d) float64 (optionally with zeros, for sparse tests) and {0,1} labels."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    if density is not None:
        X *= rng.random((n, d)) < density
    y = (X @ rng.standard_normal(d) + 0.8 * rng.standard_normal(n) > 0).astype(np.int64)
    return X, y


def _exact_loss(m: np.ndarray) -> np.ndarray:
    """log(1 + exp(-m)) without overflow: max(0, -m) + log1p(exp(-|m|))."""
    return np.maximum(0.0, -m) + np.log1p(np.exp(-np.abs(m)))


def _fd_grad(f, x: torch.Tensor, h: float = 1e-6) -> torch.Tensor:
    g = torch.zeros_like(x)
    for j in range(x.numel()):
        e = torch.zeros_like(x)
        e[j] = h
        g[j] = (f(x + e) - f(x - e)) / (2 * h)
    return g


# ------------------------------------------------------------------------------------------ logistic loss
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("l2", [0.0, 0.3])
def test_logistic_gradient_matches_finite_differences(sparse, l2):
    X, y = _data(density=0.4 if sparse else None)
    p = LogisticRegression(sp.csr_matrix(X) if sparse else X, y, l2=l2, dtype=torch.float64)
    x = torch.from_numpy(np.random.default_rng(1).standard_normal(p.dim))
    idx = torch.tensor([3, 17, 17, 42, 99, 0, 5], dtype=torch.int64)  # repeats allowed
    loss, g = p.loss_grad(x, idx)
    fd = _fd_grad(lambda z: p.loss_grad(z, idx)[0], x)
    torch.testing.assert_close(g, fd, rtol=1e-7, atol=1e-8)
    # and the loss itself is the mean of the exact formula over the minibatch, plus the l2 term
    ypm = 2.0 * y[idx.numpy()] - 1
    ref = _exact_loss(ypm * (X[idx.numpy()] @ x.numpy())).mean() + 0.5 * l2 * float(x @ x)
    assert loss == pytest.approx(ref, rel=1e-13)


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_extreme_margins_are_finite_and_exact(sparse, dtype):
    # one feature equal to 1; x = 1000: margin +1000 for label 1, -1000 for label 0
    X = np.ones((2, 1))
    y = np.array([1, 0])
    p = LogisticRegression(sp.csr_matrix(X) if sparse else X, y, dtype=dtype)
    x = torch.tensor([1000.0], dtype=dtype)
    loss_pos, g_pos = p.loss_grad(x, [0])
    loss_neg, g_neg = p.loss_grad(x, [1])
    assert loss_pos == 0.0 and math.isfinite(loss_neg)
    assert loss_neg == pytest.approx(1000.0, rel=1e-12)
    # d/dx log(1 + exp(-y x)) = -y sigmoid(-y x): 0 for margin +1000, exactly +1 for label -1 at margin -1000
    assert float(g_pos) == 0.0 and float(g_neg) == pytest.approx(1.0, rel=1e-7)
    m = p.evaluate(x)
    assert m["train_loss"] == pytest.approx(500.0, rel=1e-12) and m["train_acc"] == 0.5
    # -1000 the other way round
    loss_pos2, _ = p.loss_grad(-x, [0])
    assert loss_pos2 == pytest.approx(1000.0, rel=1e-12)


@pytest.mark.parametrize("sparse", [False, True])
def test_label_conventions_give_identical_results(sparse):
    X, y01 = _data(density=0.5 if sparse else None)
    Xin = sp.csr_matrix(X) if sparse else X
    ypm = 2 * y01 - 1
    a = LogisticRegression(Xin, y01, Xin[:30], y01[:30], l2=0.01)
    b = LogisticRegression(Xin, ypm, Xin[:30], ypm[:30], l2=0.01)
    x = a.init_params(0) + 0.1
    idx = np.array([1, 5, 7, 11])
    la, ga = a.loss_grad(x, idx)
    lb, gb = b.loss_grad(x, idx)
    assert la == lb and torch.equal(ga, gb)
    assert a.evaluate(x) == b.evaluate(x)
    assert a.optimum()[0] == b.optimum()[0]


@pytest.mark.parametrize("bad", [[0, 1, 2], [-1, 0, 1], [0.5, 1.0]])
def test_non_binary_labels_are_rejected(bad):
    X = np.ones((len(bad), 2))
    with pytest.raises(ValueError, match="not binary"):
        LogisticRegression(X, np.array(bad), l2=0.0)


def test_l2_term_adds_exactly_to_loss_gradient_and_metrics():
    X, y = _data()
    p0 = LogisticRegression(X, y, dtype=torch.float64)
    p1 = LogisticRegression(X, y, l2=0.25, dtype=torch.float64)
    x = torch.linspace(-1, 1, p0.dim, dtype=torch.float64)
    idx = np.arange(10)
    (l0, g0), (l1, g1) = p0.loss_grad(x, idx), p1.loss_grad(x, idx)
    assert l1 - l0 == pytest.approx(0.125 * float(x @ x), rel=1e-12)
    torch.testing.assert_close(g1 - g0, 0.25 * x, rtol=1e-12, atol=1e-14)
    m0, m1 = p0.evaluate(x), p1.evaluate(x)
    assert m1["train_loss"] - m0["train_loss"] == pytest.approx(0.125 * float(x @ x), rel=1e-12)
    assert m1["train_acc"] == m0["train_acc"]


def test_bad_inputs_raise_value_errors():
    X, y = _data()
    with pytest.raises(ValueError, match="l2"):
        LogisticRegression(X, y, l2=-1.0)
    with pytest.raises(ValueError, match="labels"):
        LogisticRegression(X, y[:-1])
    with pytest.raises(ValueError, match="features"):
        LogisticRegression(X, y, X[:, :3], y)
    p = LogisticRegression(X, y)
    x = p.init_params(0)
    with pytest.raises(ValueError, match="outside the training set"):
        p.loss_grad(x, [0, len(y)])
    with pytest.raises(ValueError, match="outside the training set"):
        p.loss_grad(x, [-1])
    with pytest.raises(ValueError, match="float32"):
        p.loss_grad(x.double(), [0])


# ----------------------------------------------------------------------------------------- dense vs sparse
def test_dense_and_sparse_versions_agree(monkeypatch):
    X, y = _data(n=300, d=40, density=0.1)
    Xte, yte = _data(n=50, d=40, seed=3, density=0.1)
    d = LogisticRegression(X, y, Xte, yte, l2=1e-3)
    s = LogisticRegression(sp.csr_matrix(X), y, sp.csr_matrix(Xte), yte, l2=1e-3)
    x = torch.from_numpy(np.random.default_rng(2).standard_normal(40).astype(np.float32))
    idx = torch.randint(0, 300, (64,), generator=torch.Generator().manual_seed(0))
    (ld, gd), (ls, gs) = d.loss_grad(x, idx), s.loss_grad(x, idx)
    assert ls == pytest.approx(ld, rel=1e-6)
    torch.testing.assert_close(gs, gd, rtol=1e-5, atol=1e-6)
    md, ms = d.evaluate(x), s.evaluate(x)
    for k in md:
        assert ms[k] == pytest.approx(md[k], rel=1e-12)
    assert s.optimum()[0] == pytest.approx(d.optimum()[0], rel=1e-10)
    # the public-scipy fallback gives the same gradient as scipy's compiled kernels
    monkeypatch.setattr(logreg_mod, "_sparsetools", None)
    lf, gf = s.loss_grad(x, idx)
    assert lf == pytest.approx(ls, rel=1e-6)
    torch.testing.assert_close(gf, gs, rtol=1e-6, atol=1e-7)


def test_gradient_is_a_new_tensor_each_call():
    X, y = _data()
    p = LogisticRegression(X, y)
    x = p.init_params(0)
    _, g1 = p.loss_grad(x, [0, 1, 2])
    g1_copy = g1.clone()
    g1.fill_(7.0)
    _, g2 = p.loss_grad(x, [0, 1, 2])
    assert torch.equal(g2, g1_copy) and torch.equal(x, torch.zeros_like(x))


def test_evaluate_matches_a_direct_computation():
    X, y = _data(n=200, d=6)
    Xte, yte = _data(n=80, d=6, seed=5)
    p = LogisticRegression(X, y, Xte, yte)
    x = torch.tensor([0.3, -1.0, 0.5, 2.0, 0.0, -0.2])
    x64 = x.double().numpy()
    m = p.evaluate(x)
    for pre, A, lab in (
        ("train", X.astype(np.float32).astype(np.float64), y),
        ("test", Xte.astype(np.float32).astype(np.float64), yte),
    ):
        z = A @ x64
        assert m[f"{pre}_loss"] == pytest.approx(_exact_loss((2 * lab - 1) * z).mean(), rel=1e-12)
        assert m[f"{pre}_acc"] == np.mean((z > 0) == (lab == 1))


@pytest.mark.parametrize("sparse", [False, True])
def test_a_diverged_point_gives_nan_without_a_warning(sparse):
    """Evaluated at a point with inf and NaN weights, the loss is NaN (the recorder's divergence check reads it) and
    numpy warns nothing: under ``-W error`` its RuntimeWarning was an exception, and the run was recorded failed."""
    import warnings

    X, y = _data(n=60, d=4, density=0.7 if sparse else None)
    p = LogisticRegression(sp.csr_matrix(X) if sparse else X, y)
    x = torch.tensor([float("inf"), float("-inf"), float("nan"), 1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        metrics = p.evaluate(x)
        loss, _ = p.loss_grad(x, np.arange(8))
    assert math.isnan(metrics["train_loss"]) and math.isnan(loss)


def test_init_params_zero_or_seeded_normal():
    X, y = _data()
    assert torch.equal(LogisticRegression(X, y).init_params(3), torch.zeros(X.shape[1]))
    p = LogisticRegression(X, y, init_std=1.0)
    a, b, c = p.init_params(1), p.init_params(1), p.init_params(2)
    assert a.dtype == torch.float32 and torch.equal(a, b) and not torch.equal(a, c)


# --------------------------------------------------------------------------------------------------- optimum
def _newton_cg_reference(X, y01, l2):
    """Minimize mean log-loss + l2/2||w||^2 with scipy's Newton-CG, objective written here: independent reference."""
    ypm = 2.0 * y01 - 1
    n = len(y01)

    def f(w):
        return _exact_loss(ypm * (X @ w)).mean() + 0.5 * l2 * w @ w

    def g(w):
        return X.T @ (-ypm * scipy.special.expit(-ypm * (X @ w))) / n + l2 * w

    def hessp(w, v):
        s = scipy.special.expit(X @ w)
        return X.T @ (s * (1 - s) * (X @ v)) / n + l2 * v

    res = scipy.optimize.minimize(
        f, np.zeros(X.shape[1]), jac=g, hessp=hessp, method="Newton-CG", options={"xtol": 1e-14, "maxiter": 1000}
    )
    return res.fun, res.x


@pytest.mark.parametrize("solver", ["trust-exact", "L-BFGS-B"])
@pytest.mark.parametrize("sparse", [False, True])
def test_optimum_matches_independent_minimizers(sparse, solver, tmp_path, monkeypatch):
    from sklearn.linear_model import LogisticRegression as SkLogReg

    if solver == "L-BFGS-B":  # the path taken for large d (rcv1): no Hessian
        monkeypatch.setattr(logreg_mod, "HESSIAN_MAX_DIM", 0)
    X, y = _data(n=150, d=5, density=0.7 if sparse else None)
    l2 = 0.05
    p = LogisticRegression(sp.csr_matrix(X) if sparse else X, y, l2=l2, dtype=torch.float64, cache_dir=tmp_path)
    f_star, x_star = p.optimum()
    assert p.optimum_info().converged
    f_ref, x_ref = _newton_cg_reference(X, y, l2)
    assert f_star == pytest.approx(f_ref, rel=1e-12, abs=1e-14)
    # Newton-CG stops with |grad| ~ 3e-8, so its x is within |grad| / l2 ~ 6e-7 of the minimizer
    np.testing.assert_allclose(x_star.numpy(), x_ref, rtol=0, atol=2e-6)
    # scikit-learn: C sum_i loss_i + 1/2||w||^2 with C = 1/(N l2) has the same minimizer
    sk = SkLogReg(C=1.0 / (len(y) * l2), fit_intercept=False, tol=1e-12, max_iter=10000).fit(X, y)
    np.testing.assert_allclose(x_star.numpy(), sk.coef_.ravel(), rtol=1e-5, atol=1e-7)
    # the full-batch gradient at x* vanishes, and evaluate reports f* there
    _, g = p.loss_grad(x_star, np.arange(len(y)))
    assert float(g.abs().max()) < 1e-8
    assert p.evaluate(x_star)["train_loss"] == pytest.approx(f_star, rel=1e-12)


@pytest.mark.parametrize("sparse", [False, True])
def test_logistic_hessian_matches_finite_differences_of_the_gradient(sparse):
    X, y = _data(n=60, d=4, density=0.6 if sparse else None)
    Xin = sp.csr_matrix(X) if sparse else X
    fun, hess = logreg_mod.logistic_objective(Xin, 2.0 * y - 1, 0.1), logreg_mod.logistic_hessian(Xin, 2.0 * y - 1, 0.1)
    w = np.array([0.5, -1.0, 2.0, 0.1])
    h = 1e-6
    fd = np.stack([(fun(w + h * e)[1] - fun(w - h * e)[1]) / (2 * h) for e in np.eye(4)], axis=1)
    np.testing.assert_allclose(hess(w), fd, rtol=1e-7, atol=1e-9)
    np.testing.assert_array_equal(hess(w), hess(w).T)


def test_optimum_is_cached_on_disk_by_data_l2_and_name(tmp_path, monkeypatch):
    X, y = _data(n=80, d=4)
    p = LogisticRegression(X, y, l2=0.1, name="tiny", cache_dir=tmp_path)
    f1, x1 = p.optimum()
    files = list(tmp_path.glob("optimum-tiny-*.npz"))
    assert len(files) == 1

    def refuse(*_a, **_k):
        raise AssertionError("recomputed despite a cache file")

    monkeypatch.setattr(optimum_mod, "minimize_full", refuse)
    f2, x2 = LogisticRegression(X, y, l2=0.1, name="tiny", cache_dir=tmp_path).optimum()
    assert f2 == f1 and torch.equal(x2, x1)
    for other in (
        LogisticRegression(X, y, l2=0.2, name="tiny", cache_dir=tmp_path),
        LogisticRegression(X, y, l2=0.1, name="tiny2", cache_dir=tmp_path),
        LogisticRegression(X[::-1].copy(), y[::-1].copy(), l2=0.1, name="tiny", cache_dir=tmp_path),
    ):
        assert other.optimum_key() != p.optimum_key()
        with pytest.raises(AssertionError, match="recomputed"):
            other.optimum()
    # a damaged file is recomputed, not fatal
    monkeypatch.undo()
    files[0].write_bytes(b"not an npz")
    f3, _ = LogisticRegression(X, y, l2=0.1, name="tiny", cache_dir=tmp_path).optimum()
    assert f3 == pytest.approx(f1, rel=1e-12)


# ------------------------------------------------------------------------------------------------------- CNNs
def _images(n, c, side, seed=0, classes=10):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, c, side, side, generator=g), torch.randint(0, classes, (n,), generator=g)


def _module_grad(model: nn.Module, x: torch.Tensor, images, labels) -> tuple[float, torch.Tensor]:
    nn.utils.vector_to_parameters(x.clone(), model.parameters())
    model.zero_grad()
    loss = F.cross_entropy(model(images), labels)
    loss.backward()
    return float(loss.detach()), nn.utils.parameters_to_vector([p.grad for p in model.parameters()])


def test_lenet5_parameter_count():
    assert sum(p.numel() for p in LeNet5().parameters()) == 61_706
    assert sum(p.numel() for p in LeNet5(padding=0).parameters()) == 44_426  # the authors' C++ variant
    assert LeNet5()(torch.zeros(2, 1, 28, 28)).shape == (2, 10)
    with pytest.raises(ValueError, match="too small"):
        LeNet5(image_size=8)


def test_allcnn_shape_and_parameter_count():
    m = AllCNN()
    convs = [(3, 96), (96, 96), (96, 96), (96, 192), (192, 192), (192, 192), (192, 192), (192, 192), (192, 10)]
    expected = sum(9 * a * b + 2 * b for a, b in convs)  # 3x3 conv weights (no bias) + BN weight and bias
    assert sum(p.numel() for p in m.parameters()) == expected
    assert m(torch.rand(2, 3, 32, 32)).shape == (2, 10)
    assert not list(m.buffers())  # no running statistics


@pytest.mark.parametrize(
    "factory, shape",
    [
        (LeNet5, (1, 28)),
        (functools.partial(AllCNN, 3), (3, 16)),
    ],
)
def test_cnn_flat_gradient_equals_module_autograd(factory, shape):
    c, side = shape
    xtr, ytr = _images(20, c, side)
    xte, yte = _images(6, c, side, seed=1)
    p = CNNProblem(factory, xtr, ytr, xte, yte, name="t")
    x = p.init_params(0)
    idx = torch.tensor([4, 0, 19, 7], dtype=torch.int64)
    loss, g = p.loss_grad(x, idx)
    torch.manual_seed(123)
    ref_loss, ref_g = _module_grad(factory(), x, xtr[idx], ytr[idx])
    assert g.shape == (p.dim,) and g.dtype == torch.float32
    assert loss == pytest.approx(ref_loss, rel=1e-6)
    torch.testing.assert_close(g, ref_g, rtol=1e-5, atol=1e-6)
    assert g.data_ptr() != x.data_ptr()
    # grad_many (the default loop) gives the same numbers
    ((l2_, g2),) = p.grad_many([x], [idx])
    assert l2_ == loss and torch.equal(g2, g)


@pytest.mark.parametrize("grad_path", ["module", "functional"])
def test_cnn_sync_round_mean_in_one_pass(grad_path):
    """loss_grad_mean (a sync round: the mean of P workers' minibatch gradients at one x) against the default loop
    of P loss_grad calls: equal groups give exactly loss_grad of their concatenation, unequal ones (batch 10 over 4
    workers: 3, 3, 2, 2) the per-group weighting, both equal to the loop to float32 rounding."""
    from problems.base import Problem

    xtr, ytr = _images(20, 1, 28)
    p = CNNProblem(LeNet5, xtr, ytr, xtr[:4], ytr[:4], grad_path=grad_path)
    assert p.batch_separable
    x = p.init_params(0)
    perm = torch.randperm(20, generator=torch.Generator().manual_seed(1))
    for sizes in ([5, 5], [3, 3, 2, 2], [2, 1, 1]):
        groups = list(torch.split(perm[: sum(sizes)], sizes))
        loss, g = p.loss_grad_mean(x, groups)
        ref_loss, ref_g = Problem.loss_grad_mean(p, x, groups)
        assert loss == pytest.approx(ref_loss, rel=1e-6)
        torch.testing.assert_close(g, ref_g, rtol=1e-5, atol=1e-7)
        if len(set(sizes)) == 1:
            cat_loss, cat_g = p.loss_grad(x, torch.cat(groups))
            assert loss == cat_loss and torch.equal(g, cat_g)
    # the loop itself: P loss_grad calls summed in worker order, then / P (the master's sync arithmetic)
    (l0, g0), (l1, g1) = p.loss_grad(x, perm[:3]), p.loss_grad(x, perm[3:5])
    loss, g = Problem.loss_grad_mean(p, x, [perm[:3], perm[3:5]])
    assert loss == (l0 + l1) / 2 and torch.equal(g, (g0 + g1) / 2)
    with pytest.raises(ValueError, match="outside the training set"):
        p.loss_grad_mean(x, [perm[:2], torch.tensor([20])])


def test_cnn_with_batch_norm_keeps_each_workers_minibatch_apart():
    """AllCNN normalizes with batch statistics: its sync round mean is the loop over the workers' own minibatches,
    which differs from one pass over their union."""
    xtr, ytr = _images(8, 3, 16)
    p = CNNProblem(functools.partial(AllCNN, 3), xtr, ytr, xtr[:2], ytr[:2])
    assert not p.batch_separable
    x = p.init_params(0)
    groups = [torch.tensor([0, 1]), torch.tensor([2, 3])]
    (l0, g0), (l1, g1) = p.loss_grad(x, groups[0]), p.loss_grad(x, groups[1])
    loss, g = p.loss_grad_mean(x, groups)
    assert loss == (l0 + l1) / 2 and torch.equal(g, (g0 + g1) / 2)
    assert not torch.allclose(g, p.loss_grad(x, torch.arange(4))[1], rtol=1e-3, atol=1e-5)


def test_resnet18_cifar_gradient_equals_module_autograd():
    xtr, ytr = _images(6, 3, 8)
    p = CNNProblem(resnet18_cifar, xtr, ytr, xtr[:2], ytr[:2])
    model = resnet18_cifar()
    assert isinstance(model.maxpool, nn.Identity) and model.conv1.stride == (1, 1)
    assert p.dim == sum(q.numel() for q in model.parameters())
    x = p.init_params(3)
    idx = torch.tensor([0, 1, 2, 5])
    loss, g = p.loss_grad(x, idx)
    ref_loss, ref_g = _module_grad(model, x, xtr[idx], ytr[idx])
    assert loss == pytest.approx(ref_loss, rel=1e-5)
    torch.testing.assert_close(g, ref_g, rtol=1e-4, atol=1e-5)


def test_cnn_init_params_seeded_like_the_module_default():
    xtr, ytr = _images(8, 1, 28)
    p = CNNProblem(LeNet5, xtr, ytr, xtr, ytr)
    state = torch.random.get_rng_state()
    a, b, c = p.init_params(7), p.init_params(7), p.init_params(8)
    assert torch.equal(torch.random.get_rng_state(), state)  # caller's RNG untouched
    assert torch.equal(a, b) and not torch.equal(a, c)
    torch.manual_seed(7)
    assert torch.equal(a, nn.utils.parameters_to_vector(LeNet5().parameters()).detach())
    # a module instance instead of a factory: reset_parameters under the seed, equally reproducible
    q = CNNProblem(LeNet5(), xtr, ytr, xtr, ytr)
    assert torch.equal(q.init_params(7), q.init_params(7)) and not torch.equal(q.init_params(7), q.init_params(8))


def test_cnn_evaluate_matches_a_direct_computation():
    xtr, ytr = _images(50, 1, 28)
    xte, yte = _images(30, 1, 28, seed=4)
    p = CNNProblem(LeNet5, xtr, ytr, xte, yte, eval_batch_size=16)
    x = p.init_params(1)
    m = p.evaluate(x)
    model = LeNet5()
    nn.utils.vector_to_parameters(x, model.parameters())
    with torch.no_grad():
        for pre, xs, ys in (("train", xtr, ytr), ("test", xte, yte)):
            out = model(xs)
            assert m[f"{pre}_loss"] == pytest.approx(float(F.cross_entropy(out, ys)), rel=1e-5)
            assert m[f"{pre}_acc"] == pytest.approx(float((out.argmax(1) == ys).double().mean()), abs=1e-12)


def test_cnn_rejects_state_outside_parameters_and_bad_labels():
    xtr, ytr = _images(8, 1, 8)
    with_stats = lambda: nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.Flatten(), nn.LazyLinear(3))  # noqa
    with pytest.raises(ValueError, match="track_running_stats"):
        CNNProblem(with_stats, xtr, ytr % 3, xtr, ytr % 3)
    with pytest.raises(ValueError, match="labels outside"):
        CNNProblem(functools.partial(LeNet5, image_size=8, padding=6), xtr, ytr + 10, xtr, ytr)
    p = CNNProblem(functools.partial(LeNet5, image_size=8, padding=6), xtr, ytr, xtr, ytr)
    with pytest.raises(ValueError, match="outside the training set"):
        p.loss_grad(p.init_params(0), [8])


# ------------------------------------------------------------------------------------------------ build_problem
def test_build_problem_unknown_kind_names_it():
    with pytest.raises(ValueError, match="'svm'"):
        build_problem({"kind": "svm"}, data_root="/nonexistent", device="cpu")
    with pytest.raises(ValueError, match="'vgg'"):
        build_problem({"kind": "cnn", "model": "vgg", "dataset": "mnist"}, data_root="/nonexistent", device="cpu")


def _fake_vision(n_train=40, n_test=20):
    """Stands in for problems.data.VisionData: random images, labels 0..9 cyclically."""
    xtr, xte = _images(n_train, 1, 28)[0], _images(n_test, 1, 28, seed=9)[0]
    ytr, yte = torch.arange(n_train) % 10, torch.arange(n_test) % 10
    return SimpleNamespace(
        name="fake", train_x=xtr, train_y=ytr, test_x=xte, test_y=yte, classes=[str(i) for i in range(10)]
    )


def test_build_problem_logreg_and_cnn_from_vision_data(monkeypatch, tmp_path):
    data_mod = pytest.importorskip("problems.data")
    fake = _fake_vision()
    monkeypatch.setattr(data_mod, "load_vision", lambda name, root=None, **kw: fake)
    cfg = {"kind": "logreg", "dataset": "fashion_mnist", "classes": [2, 7], "l2": 0.01, "max_train": 5}
    p = build_problem(cfg, data_root=tmp_path, device="cpu")
    keep = (fake.train_y == 2) | (fake.train_y == 7)
    assert p.dim == 784 and p.num_train == min(5, int(keep.sum()))
    # features are the flattened images of the two classes, labels 1 for the second class
    ref = LogisticRegression(fake.train_x[keep].reshape(-1, 784)[:5], (fake.train_y[keep] == 7).long()[:5], l2=0.01)
    x = torch.full((784,), 0.01)
    assert p.loss_grad(x, [0, 1])[0] == ref.loss_grad(x, [0, 1])[0]
    p.optimum()
    assert list((tmp_path / "cache").glob("optimum-*.npz"))
    c = build_problem(
        {"kind": "cnn", "model": "lenet5", "dataset": "fashion_mnist", "max_train": 30, "max_test": 10},
        data_root=tmp_path,
        device="cpu",
    )
    assert c.dim == 61_706 and c.num_train == 30 and c.name == "lenet5_fashion_mnist"


def test_build_problem_cnn_standardize_uses_the_training_sets_mean_and_std(monkeypatch, tmp_path):
    data_mod = pytest.importorskip("problems.data")
    fake = _fake_vision()
    monkeypatch.setattr(data_mod, "load_vision", lambda name, root=None, **kw: fake)
    base = {"kind": "cnn", "model": "lenet5", "dataset": "fashion_mnist", "max_train": 30}
    raw = build_problem(base, data_root=tmp_path, device="cpu")
    std = build_problem({**base, "standardize": True}, data_root=tmp_path, device="cpu")
    mean, sd = fake.train_x[:30].mean(), fake.train_x[:30].std()
    x = raw.init_params(0)
    idx = torch.arange(8)
    # the network sees (pixels - mean) / sd: a raw problem fed those images gives the same loss and gradient
    shifted = CNNProblem(
        functools.partial(LeNet5, in_channels=1, num_classes=10, image_size=28),
        (fake.train_x[:30] - mean) / sd,
        fake.train_y[:30],
        (fake.test_x - mean) / sd,
        fake.test_y,
    )
    (l1, g1), (l2, g2) = std.loss_grad(x, idx), shifted.loss_grad(x, idx)
    assert l1 == pytest.approx(l2, rel=1e-6) and torch.allclose(g1, g2, rtol=1e-5, atol=1e-7)
    assert std.evaluate(x)["test_loss"] == pytest.approx(shifted.evaluate(x)["test_loss"], rel=1e-6)
    assert raw.loss_grad(x, idx)[0] != pytest.approx(l1, rel=1e-3)  # and it matters
    assert torch.equal(fake.train_x, _fake_vision().train_x)  # the loaded data is not changed in place
    with pytest.raises(ValueError, match="problem.standardize='yes'"):
        build_problem({**base, "standardize": "yes"}, data_root=tmp_path, device="cpu")


def test_build_problem_libsvm(tmp_path):
    pytest.importorskip("problems.data")
    X, y = _data(n=40, d=6, density=0.5)
    from sklearn.datasets import dump_svmlight_file

    path = tmp_path / "tiny.svm"
    dump_svmlight_file(X, 2 * y - 1, str(path), zero_based=False)
    p = build_problem(
        {
            "kind": "logreg_libsvm",
            "path": str(path),
            "test_path": None,
            "zero_based": "auto",
            "l2": 0.0,
            "max_train": None,
            "n_features": 6,
        },
        data_root=tmp_path,
        device="cpu",
    )
    ref = LogisticRegression(X, y)
    assert p.sparse and p.num_train == 40
    x = torch.linspace(-1, 1, p.dim)
    assert p.evaluate(x)["train_loss"] == pytest.approx(ref.evaluate(x)["train_loss"], rel=1e-6)


def test_problems_survive_pickling_for_worker_processes():
    import pickle

    X, y = _data(n=50, d=6, density=0.5)
    xtr, ytr = _images(10, 1, 28)
    for p in (
        LogisticRegression(X, y),
        LogisticRegression(sp.csr_matrix(X), y),
        CNNProblem(LeNet5, xtr, ytr, xtr, ytr),
        CNNProblem(LeNet5(), xtr, ytr, xtr, ytr),
    ):
        q = pickle.loads(pickle.dumps(p))
        x = p.init_params(1) + 0.01
        (lp, gp), (lq, gq) = p.loss_grad(x, [0, 3, 4]), q.loss_grad(x, [0, 3, 4])
        assert lp == lq and torch.equal(gp, gq) and torch.equal(q.init_params(1), p.init_params(1))


def test_build_problem_logreg_unit_rows(monkeypatch, tmp_path):
    data_mod = pytest.importorskip("problems.data")
    fake = _fake_vision()
    monkeypatch.setattr(data_mod, "load_vision", lambda name, root=None, **kw: fake)
    cfg = {"kind": "logreg", "dataset": "fashion_mnist", "classes": [2, 7], "l2": 0.0, "row_norm": "unit"}
    p = build_problem(cfg, data_root=tmp_path, device="cpu")
    raw = build_problem({**cfg, "row_norm": None}, data_root=tmp_path, device="cpu")
    keep = (fake.train_y == 2) | (fake.train_y == 7)
    rows = fake.train_x[keep].reshape(-1, 784).double()
    x = torch.linspace(-1, 1, 784)
    # with unit rows the margin of example i is a_i.x / ||a_i||: compare the losses of one example each
    for i in range(3):
        m = float(rows[i] @ x.double() / rows[i].norm())
        y = 1.0 if fake.train_y[keep][i] == 7 else -1.0
        assert p.loss_grad(x, [i])[0] == pytest.approx(math.log1p(math.exp(-y * m)), rel=1e-5)
    assert p.loss_grad(x, [0])[0] != pytest.approx(raw.loss_grad(x, [0])[0], rel=1e-3)
    with pytest.raises(ValueError, match="row_norm"):
        build_problem({**cfg, "row_norm": "l1"}, data_root=tmp_path, device="cpu")


def test_timing_only_cnn_times_the_real_gradient_and_hands_engines_a_free_one():
    """problems/timing.py: timed_loss_grad is the net's true minibatch gradient (checked against the same net as a
    CNNProblem on the same pool images); loss_grad is a zero vector and NaN; the epoch has the declared length."""
    import functools
    import math

    from omegaconf import OmegaConf

    from problems import build_problem
    from problems.cnn import CNNProblem, LeNet5
    from problems.timing import TimingOnlyCNN, fake_images

    cfg = OmegaConf.create(
        {
            "kind": "cnn_timing",
            "model": "lenet5",
            "image_shape": [1, 28, 28],
            "classes": 10,
            "num_train": 60000,
            "pool": 32,
            "seed": 3,
            "name": "lenet5_timing",
        }
    )
    p = build_problem(cfg, data_root="unused")
    assert isinstance(p, TimingOnlyCNN) and p.timing_only and p.num_train == 60000 and p.dim == 61706
    x = p.init_params(0)
    loss, g = p.loss_grad(x, [0, 59999])
    assert math.isnan(loss) and g.shape == (61706,) and g.dtype == torch.float32 and not g.any()
    loss, g = p.loss_grad_mean(x, [[0, 1], [2], [59999]])  # a sync round: still free, never the real weighted pass
    assert math.isnan(loss) and g.shape == (61706,) and not g.any() and not p.batch_separable
    assert all(math.isnan(v) for v in p.evaluate(x).values())
    px, py = fake_images(32, (1, 28, 28), 10, seed=3)
    assert px.shape == (32, 1, 28, 28) and 0 <= float(px.min()) and float(px.max()) <= 1 and int(py.max()) < 10
    ref = CNNProblem(functools.partial(LeNet5, in_channels=1, num_classes=10, image_size=28), px, py, px, py)
    idx = torch.tensor([1, 33, 64 + 5])  # taken modulo the pool of 32: images 1, 1, 5
    l_t, g_t = p.timed_loss_grad(x, idx)
    l_r, g_r = ref.loss_grad(x, torch.tensor([1, 1, 5]))
    assert l_t == pytest.approx(l_r, rel=1e-6) and torch.allclose(g_t, g_r, atol=1e-6)
    assert p.num_train == 60000  # the declared epoch is back after the timed call


def test_a_timing_only_problem_never_diverges_on_its_nan_losses():
    from experiments.training.recorder import Recorder
    from problems.cnn import LeNet5
    from problems.timing import TimingOnlyCNN, fake_images

    px, py = fake_images(4, (1, 28, 28), 10, seed=0)
    p = TimingOnlyCNN(LeNet5, px, py, num_train=100)
    rec = Recorder(
        p, {"run_id": "t"}, eval_every=0.5, total_epochs=None, f_star=None, clock="simulated", progress=False
    )
    x = p.init_params(0)
    for k in range(3):
        rec.record(x, 50 * k, k, k, 0.1 * k, (0.0, 0))
        rec.check_loss(float("nan"), 50 * k)
    assert len(rec.rows) == 3


def test_an_evaluation_interval_past_any_run_evaluates_at_the_ends_only():
    """eval_every=1e308 (x N overflows to inf) was an OverflowError; it is an interval no run reaches."""
    from experiments.training.recorder import Recorder
    from problems.cnn import LeNet5
    from problems.timing import TimingOnlyCNN, fake_images

    px, py = fake_images(4, (1, 28, 28), 10, seed=0)
    p = TimingOnlyCNN(LeNet5, px, py, num_train=100)
    rec = Recorder(
        p, {"run_id": "t"}, eval_every=1e308, total_epochs=None, f_star=None, clock="simulated", progress=False
    )
    assert rec.eval_every_samples == 2**62


def test_degenerate_image_data_is_refused(monkeypatch, tmp_path):
    """A CNN's training labels of one class (or one example), images of one pixel value, and standardize=true on a
    constant channel were runs marked ok (test accuracy 0, test losses of 1e10); each is one line naming why."""
    data_mod = pytest.importorskip("problems.data")
    from problems.data import DataError

    fake = _fake_vision()
    monkeypatch.setattr(data_mod, "load_vision", lambda name, root=None, **kw: fake)
    cnn = {"kind": "cnn", "model": "lenet5", "dataset": "fashion_mnist"}
    with pytest.raises(
        DataError, match=r"^fashion_mnist: every training example \(the first problem.max_train=1\) has"
    ):
        build_problem({**cnn, "max_train": 1}, data_root=tmp_path, device="cpu")
    fake.train_y = torch.zeros_like(fake.train_y)
    with pytest.raises(DataError, match=r"^fashion_mnist: every training example has label 0; a classifier needs two"):
        build_problem(cnn, data_root=tmp_path, device="cpu")
    fake.train_y = torch.arange(40) % 10
    fake.train_x = torch.full_like(fake.train_x, 0.5)
    for cfg in (cnn, {"kind": "logreg", "dataset": "fashion_mnist", "classes": [2, 7]}):
        with pytest.raises(DataError, match=r"every pixel of every training image is 0.5; nothing tells one example"):
            build_problem(cfg, data_root=tmp_path, device="cpu")
    fake.train_x = _fake_vision().train_x.repeat(1, 3, 1, 1)
    fake.train_x[:, 1] = 0.25
    fake.test_x = fake.test_x.repeat(1, 3, 1, 1)
    with pytest.raises(DataError, match=r"^problem.standardize=true: channel 1 of fashion_mnist's training images is"):
        build_problem({**cnn, "standardize": True}, data_root=tmp_path, device="cpu")


def test_training_labels_of_one_class_are_refused(monkeypatch, tmp_path):
    """A vision logreg whose training labels (after max_train) are all one class, and the same for LIBSVM."""
    data_mod = pytest.importorskip("problems.data")
    from problems.data import DataError

    fake = _fake_vision()
    fake.train_y = torch.where(torch.arange(40) < 20, torch.tensor(2), fake.train_y)  # the first 20 are class 2
    monkeypatch.setattr(data_mod, "load_vision", lambda name, root=None, **kw: fake)
    cfg = {"kind": "logreg", "dataset": "fashion_mnist", "classes": [2, 7], "max_train": 20}
    with pytest.raises(DataError) as info:
        build_problem(cfg, data_root=tmp_path, device="cpu")
    assert str(info.value) == (
        "fashion_mnist classes 2 (label 0) and 7 (label 1): every training example (the "
        "first problem.max_train=20) has label 0; a binary problem needs both classes"
    )
    assert build_problem({**cfg, "max_train": 40}, data_root=tmp_path, device="cpu").num_train > 20
    fake.train_y = torch.where(fake.train_y == 7, torch.tensor(3), fake.train_y)  # no class 7 at all
    with pytest.raises(DataError, match=r"problem.classes \[2, 7\]: fashion_mnist train set lacks one"):
        build_problem({**cfg, "max_train": None}, data_root=tmp_path, device="cpu")
    path = tmp_path / "cut.svm"
    path.write_text("1 1:1\n1 2:1\n-1 1:2\n")
    with pytest.raises(DataError, match=rf"^{path}: every training example \(the first problem.max_train=2\)"):
        build_problem({"kind": "logreg_libsvm", "path": str(path), "max_train": 2}, data_root=tmp_path, device="cpu")
