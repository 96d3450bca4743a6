"""The `Problem` interface: a finite-sum objective f(x) = (1/N) sum_i F(x; i) over a flat parameter vector.

Every engine talks to an objective through this class alone (docs/INTERFACES.md, "Problems"):

    problem.name, problem.dim, problem.num_train, problem.device
    x0 = problem.init_params(seed)          # (dim,) float32 on problem.device
    loss, g = problem.loss_grad(x, idx)     # minibatch mean loss (float) and a new (dim,) gradient tensor
    metrics = problem.evaluate(x)           # train_loss, train_acc, test_loss, test_acc on the full sets
    opt = problem.optimum()                 # None, or (f_star, x_star)
"""

from __future__ import annotations

import abc
from collections.abc import Sequence

import numpy as np
import torch

__all__ = ["Problem", "as_index_tensor", "as_index_array"]


def as_index_tensor(idx, num: int, device: torch.device) -> torch.Tensor:
    """Minibatch indices as an int64 (B,) tensor on `device`.

    idx: int64/int32 torch tensor, numpy array or sequence of ints, shape (B,), each in [0, num).
    Raises ValueError for a wrong shape, an empty batch, a non-integer dtype or an index outside [0, num).
    """
    t = idx if isinstance(idx, torch.Tensor) else torch.as_tensor(np.asarray(idx))
    if t.ndim != 1 or t.numel() == 0:
        raise ValueError(f"minibatch indices must be a non-empty 1-D array, got shape {tuple(t.shape)}")
    if t.dtype.is_floating_point or t.dtype == torch.bool or t.is_complex():
        raise ValueError(f"minibatch indices must be integers, got dtype {t.dtype}")
    lo, hi = int(t.min()), int(t.max())
    if lo < 0 or hi >= num:
        raise ValueError(f"minibatch index {lo if lo < 0 else hi} outside the training set [0, {num})")
    return t.to(device=device, dtype=torch.int64)


def as_index_array(idx, num: int) -> np.ndarray:
    """Minibatch indices as an int64 (B,) numpy array, checked like `as_index_tensor` (same ValueErrors)."""
    if isinstance(idx, torch.Tensor):
        idx = idx.detach().cpu().numpy()
    a = np.asarray(idx)
    if a.ndim != 1 or a.size == 0:
        raise ValueError(f"minibatch indices must be a non-empty 1-D array, got shape {a.shape}")
    if a.dtype.kind not in "iu":
        raise ValueError(f"minibatch indices must be integers, got dtype {a.dtype}")
    lo, hi = int(a.min()), int(a.max())
    if lo < 0 or hi >= num:
        raise ValueError(f"minibatch index {lo if lo < 0 else hi} outside the training set [0, {num})")
    return a.astype(np.int64, copy=False)


class Problem(abc.ABC):
    """An objective over flat parameter vectors, with its training and test sets.

    Attributes (set by subclasses): name (str), dim (int, length of x), num_train (int, training examples N),
    device (torch.device where x, gradients and data live).
    Conventions: x is a (dim,) float32 tensor on `device` (float64 where a subclass is built with that dtype);
    `loss_grad` never keeps or mutates x, and returns a freshly allocated gradient each call.
    """

    name: str
    dim: int
    num_train: int
    device: torch.device

    @abc.abstractmethod
    def init_params(self, seed: int) -> torch.Tensor:
        """The starting point: (dim,) float32 tensor on `device`; the same seed gives the same vector."""

    @abc.abstractmethod
    def loss_grad(self, x: torch.Tensor, idx) -> tuple[float, torch.Tensor]:
        """Minibatch mean loss (1/B) sum_{i in idx} F(x; i) and its gradient at x.

        x: (dim,) tensor; idx: int64 (B,) training-set indices (repeats allowed).
        Returns (loss: Python float, g: new (dim,) tensor, same dtype/device as the problem's parameters).
        Raises ValueError for indices outside [0, num_train).
        """

    @abc.abstractmethod
    def evaluate(self, x: torch.Tensor) -> dict[str, float]:
        """Full-set metrics at x: train_loss, train_acc, test_loss, test_acc (floats; accuracy in [0, 1])."""

    def optimum(self) -> tuple[float, torch.Tensor] | None:
        """(f_star, x_star) of the full training loss when it is known (convex problems); None otherwise."""
        return None

    #: True when a minibatch's mean loss is the plain mean of per-example terms (no batch statistics), so that a sync
    #: round's groups may be computed as one weighted minibatch (:meth:`loss_grad_mean`).
    batch_separable: bool = False

    def loss_grad_mean(self, x: torch.Tensor, groups: Sequence) -> tuple[float, torch.Tensor]:
        """A sync round at one point: the mean over P groups of their minibatch mean losses and of their gradients,
        (1/P) sum_w loss_grad(x, groups[w]) (APAM.md §1, sync AMSGrad: worker w computes at x on its minibatch
        groups[w], the master averages the P gradients).

        x: (dim,) tensor; groups: non-empty sequence of P int64 index arrays (sizes may differ by worker).
        Returns (mean of the P minibatch losses: float, a new (dim,) gradient tensor).
        This default computes the P gradients one by one and sums them in worker order, then divides by P: the
        arithmetic of :class:`experiments.training.master.Master`'s sync round, bit for bit. Subclasses with
        ``batch_separable`` may compute it in one weighted pass (equal to float32 rounding).
        Raises ValueError for an empty ``groups`` or indices outside [0, num_train).
        """
        if len(groups) == 0:
            raise ValueError("loss_grad_mean needs at least one group")
        loss_sum, g = 0.0, None
        for idx in groups:
            loss, gw = self.loss_grad(x, idx)
            loss_sum += loss
            g = gw if g is None else g.add_(gw)
        return loss_sum / len(groups), (g if len(groups) == 1 else g.div_(len(groups)))

    def grad_many(self, xs: Sequence[torch.Tensor], idx_list: Sequence) -> list[tuple[float, torch.Tensor]]:
        """Gradients at several points, one minibatch each: [loss_grad(x, idx) for x, idx in zip(xs, idx_list)].

        xs: sequence of (dim,) tensors; idx_list: sequence of index arrays, same length. Subclasses may override
        with a batched computation that returns the same values. Raises ValueError when the lengths differ.
        """
        if len(xs) != len(idx_list):
            raise ValueError(f"grad_many: {len(xs)} points but {len(idx_list)} minibatches")
        return [self.loss_grad(x, idx) for x, idx in zip(xs, idx_list)]

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(name={self.name!r}, dim={self.dim}, num_train={self.num_train}, "
            f"device={self.device})"
        )
