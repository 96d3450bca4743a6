"""f* and x* of a full-batch objective: scipy.optimize.minimize in float64, cached on disk.

    key = data_key(name, l2, arrays...)                        # sha256 of the data, l2 and the problem name
    res = cached_optimum(fun, x0, cache_dir, name, key, hess)  # Optimum(f_star, x_star, grad_norm, nit, ...)

Solver (`minimize_full`): with an exact Hessian, scipy's `trust-exact` (a trust-region Newton method; quadratic
convergence, so f* is exact to rounding even on ill-conditioned data); without one, `L-BFGS-B` with tight
tolerances. Why both: on binary Fashion-MNIST logistic regression (12,000 x 784 raw pixels, no l2) L-BFGS-B stops
after 20,000 iterations with |grad| ~ 1e-6 and f 2e-5 above the optimum that trust-exact reaches in 18 Newton
steps (|grad| ~ 1e-14), while on sparse, high-dimensional data (rcv1-like, where a d x d Hessian is
out of reach) L-BFGS-B converges in tens of iterations.

The cache is one `.npz` per key (`<cache_dir>/optimum-<name>-<key[:16]>.npz`), written atomically (temporary
file, then `os.replace`), so concurrent runs never read half a file; a file that cannot be read is recomputed.
Keys also cover CACHE_VERSION (bumped whenever the solver changes, so older, less exact results are not reused).
When the infimum is not attained (e.g. separable data without l2 regularisation: f* = 0 only at infinity), the
solver stops at its iteration limit or once f is negligible; f_star is then an upper bound on the infimum.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.optimize

__all__ = ["CACHE_VERSION", "LBFGS_OPTIONS", "TRUST_OPTIONS", "Optimum", "cached_optimum", "data_key", "minimize_full"]

log = logging.getLogger(__name__)

# ftol: stop when the relative decrease of f is below ~5 machine epsilons; gtol: max |projected gradient|.
LBFGS_OPTIONS = {"maxiter": 20000, "maxfun": 40000, "maxcor": 20, "ftol": 1e-15, "gtol": 1e-10}
TRUST_OPTIONS = {"gtol": 1e-11, "maxiter": 300}  # gtol: Euclidean norm of the gradient
CONVERGED_GRAD = 1e-8  # a result whose gradient max-norm is at most this counts as converged
CACHE_VERSION = 2  # part of every cache key


@dataclass
class Optimum:
    """A minimizer of a full-batch objective.

    f_star: float, the objective at x_star (float64 evaluation). x_star: (d,) float64 numpy array.
    grad_norm: max-norm of the gradient at x_star. nit: solver iterations. converged: grad_norm <= 1e-8.
    message: scipy's termination message.
    """

    f_star: float
    x_star: np.ndarray
    grad_norm: float
    nit: int
    converged: bool
    message: str


def data_key(name: str, l2: float, *arrays: np.ndarray) -> str:
    """Hex sha256 of CACHE_VERSION, the problem name, l2 (its float64 repr) and each array's dtype, shape and bytes.

    Pass the arrays that define the objective exactly (e.g. the float32 features as stored and the +-1 labels;
    for CSR data its indptr, indices and data). Equal inputs give equal keys; any change of a value changes it.
    """
    h = hashlib.sha256()
    h.update(f"v{CACHE_VERSION}\0{name}\0{float(l2)!r}\0".encode())
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype.str}{a.shape}\0".encode())
        h.update(memoryview(a).cast("B"))
    return h.hexdigest()


def minimize_full(
    fun: Callable[[np.ndarray], tuple[float, np.ndarray]],
    x0: np.ndarray,
    hess: Callable[[np.ndarray], np.ndarray] | None = None,
) -> Optimum:
    """Minimize `fun` (float64 x -> (f, grad)) from x0: trust-exact when `hess` (x -> (d, d) Hessian) is given,
    else L-BFGS-B (see the module docstring; options TRUST_OPTIONS / LBFGS_OPTIONS).

    x0: (d,) array, converted to float64. Returns an Optimum; f_star and the gradient are re-evaluated at the
    returned point. Raises ValueError when fun returns a non-finite value at x0.
    """
    x0 = np.asarray(x0, dtype=np.float64).copy()
    f0, _ = fun(x0)
    if not np.isfinite(f0):
        raise ValueError(f"objective is not finite at the starting point (f = {f0})")
    if hess is not None:
        res = scipy.optimize.minimize(fun, x0, jac=True, hess=hess, method="trust-exact", options=TRUST_OPTIONS)
    else:
        res = scipy.optimize.minimize(fun, x0, jac=True, method="L-BFGS-B", options=LBFGS_OPTIONS)
    x = np.asarray(res.x, dtype=np.float64)
    f, g = fun(x)
    gnorm = float(np.max(np.abs(g))) if g.size else 0.0
    return Optimum(float(f), x, gnorm, int(res.nit), gnorm <= CONVERGED_GRAD, str(res.message))


def _cache_path(cache_dir: Path, name: str, key: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name) or "problem"
    return Path(cache_dir) / f"optimum-{safe}-{key[:16]}.npz"


def _load(path: Path, key: str) -> Optimum | None:
    try:
        with np.load(path, allow_pickle=False) as z:
            if str(z["key"]) != key:
                return None
            return Optimum(
                float(z["f_star"]),
                np.array(z["x_star"], dtype=np.float64),
                float(z["grad_norm"]),
                int(z["nit"]),
                bool(z["converged"]),
                str(z["message"]),
            )
    except FileNotFoundError:
        return None
    except Exception as exc:  # noqa: BLE001 -- a damaged cache file is recomputed, never fatal
        log.warning("optimum cache %s unreadable (%s); recomputing", path, exc)
        return None


def _save(path: Path, key: str, opt: Optimum) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.stem + ".", suffix=".tmp.npz", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            np.savez(
                fh,
                key=np.array(key),
                f_star=np.float64(opt.f_star),
                x_star=opt.x_star,
                grad_norm=np.float64(opt.grad_norm),
                nit=np.int64(opt.nit),
                converged=np.bool_(opt.converged),
                message=np.array(opt.message),
            )
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def cached_optimum(
    fun: Callable[[np.ndarray], tuple[float, np.ndarray]],
    x0: np.ndarray,
    cache_dir: str | Path | None,
    name: str,
    key: str,
    hess: Callable[[np.ndarray], np.ndarray] | None = None,
) -> Optimum:
    """The optimum of `fun` (see `minimize_full`), read from / written to `cache_dir` under `key`.

    cache_dir None: no disk cache (computed every call). The file stores the full key, so a 16-hex-digit prefix
    collision is detected and recomputed. Logs a warning when the result did not converge.
    """
    path = _cache_path(Path(cache_dir), name, key) if cache_dir is not None else None
    if path is not None:
        hit = _load(path, key)
        if hit is not None:
            return hit
    opt = minimize_full(fun, x0, hess)
    if not opt.converged:
        log.warning(
            "optimum of %s: the solver stopped with gradient max-norm %.3g after %d iterations (%s); "
            "f* = %.10g is an upper bound",
            name,
            opt.grad_norm,
            opt.nit,
            opt.message,
            opt.f_star,
        )
    if path is not None:
        _save(path, key, opt)
    return opt
