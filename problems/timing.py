"""Timing-only problems: a net at its true size and gradient cost, without its data (paper Sec. 5.5, Fig. 10).

Fig. 10 of the paper is a time per epoch, nothing else: how long one epoch of ResNet18 on CINIC-10 (90,000 training
images, 32 x 32 x 3) takes at P workers. That time depends on the net (its dimension d, the cost of one gradient at
the minibatch size) and the epoch's length, not on the pixels. A :class:`TimingOnlyCNN` therefore holds a small pool
of images from torchvision's ``FakeData`` (random pixels, random labels) and declares the paper's training-set size
as its ``num_train``:

- :meth:`TimingOnlyCNN.timed_loss_grad` computes the real gradient of a minibatch drawn from the pool (indices are
  taken modulo the pool): it is what the calibration times (experiments/clock/calibration.py), so the simulated clock
  charges the net's true gradient cost;
- :meth:`TimingOnlyCNN.loss_grad` -- what the engines call -- returns a zero gradient and a NaN loss at no cost, so a
  simulated run of 100 updates takes seconds instead of the net's minutes; the master still applies every update
  for real (its cost is the rule's at the true d);
- :meth:`TimingOnlyCNN.evaluate` returns NaN metrics: nothing is learned, and the recorder does not treat NaN as
  divergence on a timing-only problem (``timing_only = True``).

The simulated engine runs one at the calibrated cost of its real gradient; a real engine only with
``engine.compute=emulated`` (experiments/settings/engine.py), where each free gradient waits for its emulated target
(the paper's Fig. 10: the paper's serial cost); with real compute it would time the free zero gradients.
"""

from __future__ import annotations

import math

import torch

from problems.cnn import CNNProblem


class TimingOnlyCNN(CNNProblem):
    """A CNNProblem whose engine-facing gradient is free; see the module docstring.

    Args:
        model: as :class:`problems.cnn.CNNProblem` (a zero-argument module factory).
        pool_x: (M, C, H, W) float32 images, pool_y: (M,) int64 labels (e.g. from torchvision's FakeData).
        num_train: the epoch length to declare (the real data set's training-set size, e.g. 90,000 for CINIC-10).
        device, name, eval_batch_size: as CNNProblem.
    Raises ValueError when ``num_train`` < 1 (and as CNNProblem for bad shapes).
    """

    timing_only = True

    def __init__(
        self,
        model,
        pool_x: torch.Tensor,
        pool_y: torch.Tensor,
        num_train: int,
        *,
        device=None,
        name: str = "timing_only",
        eval_batch_size: int = 1000,
    ) -> None:
        super().__init__(
            model, pool_x, pool_y, pool_x[:1], pool_y[:1], device=device, name=name, eval_batch_size=eval_batch_size
        )
        if int(num_train) < 1:
            raise ValueError(f"num_train={num_train}: must be >= 1")
        self.pool_size = int(pool_x.shape[0])
        self.num_train = int(num_train)
        self.batch_separable = False  # the sync round below never takes CNNProblem's real weighted pass

    def timed_loss_grad(self, x: torch.Tensor, idx) -> tuple[float, torch.Tensor]:
        """The real minibatch loss and gradient (the net's true cost), on pool images ``idx mod pool size``."""
        return super().loss_grad(x, torch.as_tensor(idx, dtype=torch.int64) % self.pool_size)

    def loss_grad(self, x: torch.Tensor, idx) -> tuple[float, torch.Tensor]:
        """NaN loss and a zero (dim,) float32 gradient, at no cost (the engines' call)."""
        self._check_x(x)
        return math.nan, torch.zeros(self.dim, dtype=torch.float32, device=self.device)

    def loss_grad_mean(self, x: torch.Tensor, groups) -> tuple[float, torch.Tensor]:
        """A sync round's mean of free gradients: NaN loss and one zero (dim,) float32 gradient (not P of them, then
        summed: at ResNet18's 11 M parameters each is a fresh 44 MB page-faulted allocation)."""
        if len(groups) == 0:
            raise ValueError("loss_grad_mean needs at least one group")
        return self.loss_grad(x, groups[0])

    def evaluate(self, x: torch.Tensor) -> dict:
        """NaN for every metric: a timing-only problem learns nothing."""
        return {"train_loss": math.nan, "train_acc": math.nan, "test_loss": math.nan, "test_acc": math.nan}


def fake_images(size: int, shape: tuple[int, int, int], classes: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``size`` random images of ``shape`` (C, H, W), pixels in [0, 1], and random labels in [0, classes), from
    torchvision's ``FakeData`` (deterministic in ``seed``). Returns (x float32 (size, C, H, W), y int64 (size,))."""
    from torchvision.datasets import FakeData  # lazy: torchvision only for the timing-only problem
    from torchvision.transforms.functional import pil_to_tensor

    data = FakeData(size=int(size), image_size=tuple(shape), num_classes=int(classes), random_offset=int(seed))
    xs, ys = zip(*((pil_to_tensor(img), int(label)) for img, label in data))
    x = torch.stack(xs).to(torch.float32) / 255.0
    return x.reshape(int(size), *shape), torch.tensor(ys, dtype=torch.int64)
