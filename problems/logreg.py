"""Binary logistic regression on dense (torch) or sparse (scipy CSR) features: the paper's convex problem (Sec. 5.1).

    f(x) = (1/N) sum_i log(1 + exp(-y_i a_i^T x)) + (l2/2) ||x||^2,     y_i in {-1, +1}, a_i in R^d

No bias term: x has exactly d entries, as in the authors' rcv1 code (RPI-OPT/APAM, OpenMP/test/LR_APAM.cc); add
a constant feature to the data if you want one. The loss is evaluated as -logsigmoid(m) (torch) or
logaddexp(0, -m) (numpy) of the margin m = y a^T x, both exact and finite for any finite margin (m = -1000 gives
1000, m = +1000 gives 0). Accuracy: the prediction is +1 where a^T x > 0, else -1 (scikit-learn's rule).

Dense features live on the problem's device as one (N, d) tensor; a minibatch gathers its rows (index_select)
and costs two matrix-vector products. Sparse features stay in scipy CSR on the CPU: a minibatch's rows are sliced
with scipy's own compiled CSR kernels (`scipy.sparse._sparsetools`: csr_row_index, csr_matvec, csc_matvec), which
skip the argument checking of the public `X[idx]` (faster for small minibatches on rcv1-like data, see
benchmarks/bench_grads.py); where that private module is missing the public scipy calls are used instead, with the
same result.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import scipy.sparse as sp
import scipy.special
import torch
import torch.nn.functional as F

from problems.base import Problem, as_index_array, as_index_tensor
from problems.optimum import Optimum, cached_optimum, data_key

try:  # scipy's compiled CSR kernels (private, but stable across scipy 1.x); see the module docstring
    from scipy.sparse import _sparsetools
except ImportError:  # pragma: no cover - depends on the scipy build
    _sparsetools = None

__all__ = ["LogisticRegression", "labels_to_pm1", "logistic_hessian", "logistic_objective"]

EVAL_CHUNK_ROWS = 4096  # rows per float64 chunk in dense evaluation (bounds the temporary to chunk x d doubles)
HESSIAN_MAX_DIM = 4096  # the optimum uses the exact Hessian (trust-exact) up to this many features ...
HESSIAN_MAX_FLOPS = 3e10  # ... and while forming it (N d^2 multiply-adds) stays below this; else L-BFGS-B
MAX_INIT_STD = 10.0  # init_std's bound, 10x the authors' N(0, 1): further out a run starts at a loss of 1e29


def labels_to_pm1(y, what: str = "labels") -> np.ndarray:
    """Binary labels as a float64 numpy array of -1/+1.

    y: (N,) torch tensor, numpy array or sequence with values in {0, 1} (0 -> -1) or in {-1, +1}.
    Raises ValueError naming the values when they are neither (e.g. {0, 1, 2} or {-1, 0, 1}).
    """
    if isinstance(y, torch.Tensor):
        y = y.detach().cpu().numpy()
    a = np.asarray(y)
    if a.ndim != 1:
        raise ValueError(f"{what} must be 1-D, got shape {a.shape}")
    vals = set(np.unique(a).tolist())
    if vals <= {0, 1}:
        return np.where(a == 1, 1.0, -1.0)
    if vals <= {-1, 1}:
        return np.where(a == 1, 1.0, -1.0)
    shown = sorted(vals)[:6]
    raise ValueError(f"{what}: values {shown} are not binary labels; expected {{0, 1}} or {{-1, +1}}")


def logistic_objective(X, y_pm: np.ndarray, l2: float):
    """The full-batch objective in float64 numpy: returns fun(w) -> (f(w), grad f(w)).

    X: (N, d) numpy array or scipy sparse matrix (converted to float64 once); y_pm: (N,) of -1/+1; l2 >= 0.
    f(w) = mean(logaddexp(0, -y * (X w))) + l2/2 ||w||^2; grad = X^T (-y * expit(-m)) / N + l2 w.
    This is what `scipy.optimize.minimize` sees in `LogisticRegression.optimum`.
    """
    Xd = X.astype(np.float64) if sp.issparse(X) else np.asarray(X, dtype=np.float64)
    y = np.asarray(y_pm, dtype=np.float64)
    n = y.shape[0]

    def fun(w: np.ndarray) -> tuple[float, np.ndarray]:
        m = y * (Xd @ w)
        f = float(np.logaddexp(0.0, -m).mean()) + 0.5 * l2 * float(w @ w)
        g = Xd.T @ (-y * scipy.special.expit(-m)) / n + l2 * w
        return f, np.asarray(g, dtype=np.float64)

    return fun


def logistic_hessian(X, y_pm: np.ndarray, l2: float):
    """The full-batch Hessian in float64: returns hess(w) -> (d, d) array (for trust-exact in `optimum`).

    H(w) = X^T diag(s (1 - s)) X / N + l2 I with s = expit(X w) (the labels drop out). X: (N, d) numpy array or
    scipy sparse matrix; dense X uses BLAS syrk on sqrt(weights) * X (half the work of a general product).
    """
    import scipy.linalg.blas as blas  # lazy: BLAS bindings only for the Hessian (optimum search)

    Xd = X.astype(np.float64) if sp.issparse(X) else np.asarray(X, dtype=np.float64)
    n, d = Xd.shape
    del y_pm  # the Hessian of log(1 + exp(-y z)) in z is s(1 - s) for either label

    def hess(w: np.ndarray) -> np.ndarray:
        s = scipy.special.expit(np.asarray(Xd @ w))
        r = np.sqrt(s * (1.0 - s) / n)
        if sp.issparse(Xd):
            Z = sp.diags(r) @ Xd
            H = np.asarray((Z.T @ Z).todense())
        else:
            Zt = (r[:, None] * Xd).T  # Fortran-ordered view: no copy inside syrk
            H = blas.dsyrk(1.0, Zt, trans=0)  # upper triangle of Zt Zt^T = Z^T Z
            H = np.triu(H) + np.triu(H, 1).T
        H[np.diag_indices(d)] += l2
        return H

    return hess


def _check_l2(l2) -> float:
    v = float(l2)
    if not math.isfinite(v) or v < 0:
        raise ValueError(f"l2 must be a finite number >= 0, got {l2!r}")
    return v


class LogisticRegression(Problem):
    """Binary logistic regression (see the module docstring for the objective and conventions).

    Args:
        train_X: (N, d) features: torch tensor, numpy array, or scipy sparse matrix (then the sparse path is used).
        train_y: (N,) labels in {0, 1} or {-1, +1} (both give identical results; normalised to -1/+1).
        test_X, test_y: the test set, same width d (converted to the train set's kind); None: the training set.
        l2: ridge coefficient >= 0 of (l2/2)||x||^2, part of every reported loss (train and test).
        device: where dense data, parameters and gradients live (default CPU). Sparse data stays on the CPU
            (scipy) and only x and the gradient cross to `device`.
        name: the problem's name (results, optimum cache key).
        dtype: torch.float32 (default; the harness's flat vectors) or torch.float64 (e.g. finite differences).
            Features are stored in this dtype; losses are reported from float64 arithmetic in `evaluate`.
        init_std: `init_params` draws N(0, init_std^2) entries from the seed; 0 (default) gives zeros for every
            seed. The authors' code starts from N(0, 1) (init_std=1). At most :data:`MAX_INIT_STD`.
        cache_dir: folder for the optimum's .npz cache (None: computed in memory, once per instance).
    Raises ValueError for mismatched shapes, non-binary labels, non-finite features, or a bad l2/dtype.
    """

    def __init__(
        self,
        train_X,
        train_y,
        test_X=None,
        test_y=None,
        *,
        l2: float = 0.0,
        device: torch.device | str | None = None,
        name: str = "logreg",
        dtype: torch.dtype = torch.float32,
        init_std: float = 0.0,
        cache_dir: str | Path | None = None,
    ) -> None:
        if dtype not in (torch.float32, torch.float64):
            raise ValueError(f"dtype must be torch.float32 or torch.float64, got {dtype}")
        if (test_X is None) != (test_y is None):
            raise ValueError("give both test_X and test_y, or neither")
        self.name = str(name)
        self.device = torch.device(device) if device is not None else torch.device("cpu")
        self.dtype = dtype
        self.l2 = _check_l2(l2)
        self.init_std = float(init_std)
        if not math.isfinite(self.init_std) or not 0 <= self.init_std <= MAX_INIT_STD:
            raise ValueError(
                f"init_std must be a number in [0, {MAX_INIT_STD:g}], got {init_std!r} (the authors' code starts from "
                "N(0, 1); a start far out is a loss of 1e29 before the first update, recorded as ok)"
            )
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.sparse = sp.issparse(train_X)
        self._np_dtype = np.float32 if dtype == torch.float32 else np.float64

        self._Xtr = self._features(train_X, "train_X")
        self.num_train, self.dim = (int(s) for s in self._Xtr.shape)
        self._ytr_np = labels_to_pm1(train_y, "train_y")
        if self._ytr_np.shape[0] != self.num_train:
            raise ValueError(f"train_y has {self._ytr_np.shape[0]} labels for {self.num_train} rows of train_X")
        if self.num_train == 0 or self.dim == 0:
            raise ValueError(f"train_X is empty (shape {tuple(self._Xtr.shape)})")
        if test_X is None:
            self._Xte, self._yte_np = self._Xtr, self._ytr_np
        else:
            self._Xte = self._features(test_X, "test_X")
            self._yte_np = labels_to_pm1(test_y, "test_y")
            if self._Xte.shape[1] != self.dim:
                raise ValueError(f"test_X has {self._Xte.shape[1]} features, train_X has {self.dim}")
            if self._yte_np.shape[0] != self._Xte.shape[0]:
                raise ValueError(f"test_y has {self._yte_np.shape[0]} labels for {self._Xte.shape[0]} test rows")
        if self.sparse:
            self._ytr = self._ytr_np.astype(self._np_dtype)
        else:
            self._ytr = torch.as_tensor(self._ytr_np, dtype=dtype, device=self.device)
        self._optimum: Optimum | None = None

    # ----------------------------------------------------------------------------------------------- data
    def _features(self, X, what: str):
        """Train/test features in this problem's kind: CSR (canonical, self dtype) or a dense device tensor."""
        if self.sparse:
            M = sp.csr_matrix(X, dtype=self._np_dtype, copy=True)
            M.sum_duplicates()  # canonical: sorted indices, no duplicates
            if M.ndim != 2:
                raise ValueError(f"{what} must be 2-D, got shape {M.shape}")
            if not np.all(np.isfinite(M.data)):
                raise ValueError(f"{what} has non-finite entries")
            if M.indptr.dtype != M.indices.dtype:  # the compiled kernels need one index dtype: the wider one
                common = np.promote_types(M.indptr.dtype, M.indices.dtype)
                M.indptr, M.indices = M.indptr.astype(common), M.indices.astype(common)
            return M
        if sp.issparse(X):
            X = X.toarray()
        t = torch.as_tensor(X.detach().cpu().numpy() if isinstance(X, torch.Tensor) else np.asarray(X))
        if t.ndim != 2:
            raise ValueError(f"{what} must be 2-D (N, d), got shape {tuple(t.shape)}")
        t = t.to(device=self.device, dtype=self.dtype).contiguous()
        if not bool(torch.isfinite(t).all()):
            raise ValueError(f"{what} has non-finite entries")
        return t

    def _check_x(self, x: torch.Tensor) -> None:
        if x.shape != (self.dim,) or x.dtype != self.dtype:
            raise ValueError(f"x must be a ({self.dim},) {self.dtype} tensor, got {tuple(x.shape)} {x.dtype}")

    # ------------------------------------------------------------------------------------------ interface
    def init_params(self, seed: int) -> torch.Tensor:
        """(dim,) zeros (init_std = 0, any seed) or N(0, init_std^2) from a CPU generator seeded with `seed`."""
        seed = int(seed)
        if self.init_std == 0.0:
            return torch.zeros(self.dim, dtype=self.dtype, device=self.device)
        gen = torch.Generator().manual_seed(seed)
        x = torch.randn(self.dim, generator=gen, dtype=torch.float64) * self.init_std
        return x.to(device=self.device, dtype=self.dtype)

    def loss_grad(self, x: torch.Tensor, idx) -> tuple[float, torch.Tensor]:
        """Minibatch mean logistic loss (+ l2 term) and its gradient; see Problem.loss_grad."""
        self._check_x(x)
        if self.sparse:
            loss, g = self._sparse_loss_grad(x, as_index_array(idx, self.num_train))
        else:
            loss, g = self._dense_loss_grad(x, as_index_tensor(idx, self.num_train, self.device))
        if self.l2:
            loss += 0.5 * self.l2 * float(x.double() @ x.double())
            g.add_(x, alpha=self.l2)
        return loss, g

    def _dense_loss_grad(self, x: torch.Tensor, i: torch.Tensor) -> tuple[float, torch.Tensor]:
        A = self._Xtr.index_select(0, i)  # (B, d)
        y = self._ytr.index_select(0, i)  # (B,)
        m = y * (A @ x)  # margins
        loss = float(-F.logsigmoid(m).mean())
        coef = torch.sigmoid(-m).mul_(y).mul_(-1.0 / i.numel())  # d loss_i / d (a_i^T x) / B
        return loss, coef @ A

    def _sparse_loss_grad(self, x: torch.Tensor, i: np.ndarray) -> tuple[float, torch.Tensor]:
        xn = x.detach().cpu().numpy()
        y = self._ytr[i]
        B = i.shape[0]
        if _sparsetools is not None:
            X = self._Xtr
            rows = i.astype(X.indptr.dtype, copy=False)
            ip = np.empty(B + 1, dtype=X.indptr.dtype)
            ip[0] = 0
            np.cumsum(X.indptr[rows + 1] - X.indptr[rows], out=ip[1:])
            cols = np.empty(int(ip[-1]), dtype=X.indices.dtype)
            vals = np.empty(int(ip[-1]), dtype=X.data.dtype)
            _sparsetools.csr_row_index(B, rows, X.indptr, X.indices, X.data, cols, vals)
            z = np.zeros(B, dtype=self._np_dtype)
            _sparsetools.csr_matvec(B, self.dim, ip, cols, vals, xn, z)
            m = y * z
            coef = (-y * scipy.special.expit(-m) / B).astype(self._np_dtype, copy=False)
            g = np.zeros(self.dim, dtype=self._np_dtype)
            _sparsetools.csc_matvec(self.dim, B, ip, cols, vals, coef, g)  # A^T coef: A's CSR is A^T's CSC
        else:  # pragma: no cover - exercised by the tests through monkeypatching
            A = self._Xtr[i]
            m = y * (A @ xn)
            coef = (-y * scipy.special.expit(-m) / B).astype(self._np_dtype, copy=False)
            g = np.asarray(A.T @ coef, dtype=self._np_dtype)
        with np.errstate(invalid="ignore", over="ignore"):  # NaN or inf: the master's divergence check judges it
            loss = float(np.logaddexp(0.0, -m.astype(np.float64)).mean())
        return loss, torch.from_numpy(g).to(self.device)

    def _scores64(self, X, x: torch.Tensor) -> np.ndarray:
        """float64 scores X x over a whole set (dense: in chunks of EVAL_CHUNK_ROWS rows)."""
        if self.sparse:
            return np.asarray(X.astype(np.float64) @ x.detach().cpu().double().numpy())
        x64 = x.detach().to(self.device, torch.float64)
        z = torch.cat([X[s : s + EVAL_CHUNK_ROWS].double() @ x64 for s in range(0, X.shape[0], EVAL_CHUNK_ROWS)])
        return z.cpu().numpy()

    def _set_metrics(self, X, y_pm: np.ndarray, x: torch.Tensor, reg: float) -> tuple[float, float]:
        z = self._scores64(X, x)
        with np.errstate(invalid="ignore", over="ignore"):  # a diverged x gives NaN, which the recorder judges: no
            loss = float(np.logaddexp(0.0, -y_pm * z).mean()) + reg  # RuntimeWarning (an error under -W error)
        acc = float(np.mean(np.where(z > 0, 1.0, -1.0) == y_pm))
        return loss, acc

    @torch.no_grad()
    def evaluate(self, x: torch.Tensor) -> dict[str, float]:
        """Full-set objective (logistic loss + l2/2||x||^2, float64 arithmetic) and accuracy on train and test."""
        self._check_x(x)
        reg = 0.5 * self.l2 * float(x.double() @ x.double()) if self.l2 else 0.0
        tr_loss, tr_acc = self._set_metrics(self._Xtr, self._ytr_np, x, reg)
        if self._Xte is self._Xtr:
            te_loss, te_acc = tr_loss, tr_acc
        else:
            te_loss, te_acc = self._set_metrics(self._Xte, self._yte_np, x, reg)
        return {"train_loss": tr_loss, "train_acc": tr_acc, "test_loss": te_loss, "test_acc": te_acc}

    # ------------------------------------------------------------------------------------------- optimum
    def optimum_key(self) -> str:
        """sha256 of the stored training features and labels, l2 and the name (the optimum cache key)."""
        y8 = self._ytr_np.astype(np.int8)
        if self.sparse:
            X = self._Xtr
            return data_key(self.name, self.l2, np.array(X.shape, dtype=np.int64), X.indptr, X.indices, X.data, y8)
        return data_key(self.name, self.l2, self._Xtr.cpu().numpy(), y8)

    def optimum_info(self) -> Optimum:
        """The full `Optimum` record (f_star, x_star as float64 numpy, grad_norm, nit, converged, message)."""
        if self._optimum is None:
            X = self._Xtr if self.sparse else self._Xtr.cpu().numpy()
            fun = logistic_objective(X, self._ytr_np, self.l2)
            exact = self.dim <= HESSIAN_MAX_DIM and self.num_train * self.dim**2 <= HESSIAN_MAX_FLOPS
            hess = logistic_hessian(X, self._ytr_np, self.l2) if exact else None
            self._optimum = cached_optimum(
                fun, np.zeros(self.dim), self.cache_dir, self.name, self.optimum_key(), hess=hess
            )
        return self._optimum

    def optimum(self) -> tuple[float, torch.Tensor]:
        """(f_star, x_star) of the full training objective, float64 (problems.optimum): scipy's trust-exact with the
        exact Hessian when d <= HESSIAN_MAX_DIM and N d^2 <= HESSIAN_MAX_FLOPS (e.g. Fashion-MNIST's 784 pixels),
        else L-BFGS-B (e.g. rcv1's 47,236 sparse features).

        x_star is a float64 (dim,) tensor on `device`. Cached on disk under `cache_dir` (when given) and in memory.
        With l2 = 0 on separable data the infimum is not attained: f_star is then the solver's last value (an upper
        bound), and a warning is logged.
        """
        opt = self.optimum_info()
        return opt.f_star, torch.as_tensor(opt.x_star, dtype=torch.float64, device=self.device)
