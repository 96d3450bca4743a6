"""Image classifiers as flat-vector objectives: LeNet5, AllCNN-C and ResNet18 (paper Sec. 5.2-5.5), cross entropy.

    problem = CNNProblem(LeNet5, train_x, train_y, test_x, test_y, device=..., name="lenet5_fmnist")
    loss, g = problem.loss_grad(x, idx)      # x: (dim,) float32, order of torch.nn.utils.parameters_to_vector

Gradients (``grad_path``): ``"module"`` (default) copies x into one flat buffer whose slices *are* the parameters
of a private copy of the module, runs that module, and takes the gradient with respect to those parameters
(``torch.autograd.grad``), concatenated into a new flat vector. For models without batch normalization it runs in
channels-last memory format (images and convolution weights), where oneDNN's convolutions and max-pooling are
faster on CPU; with batch normalization it stays NCHW (batch statistics of small batches amplify the reordered
sums). ``"functional"`` is the reference: the module evaluated at x itself with `torch.func.functional_call`
(NCHW) and autograd through the flat vector. The two agree to float32 rounding, not bit for bit (tests check it);
each path alone is deterministic. LeNet5, batch 40, one thread (benchmarks/bench_engines.py ``--only grad``, CPU
time, machine under load): module path 0.85x and functional path 0.95x the per-step cost of a plain nn.Module +
fused Adam(amsgrad) loop. Evaluation always uses the functional call (no gradient, large batches: its overhead
does not matter there). No optimizer, no DataLoader: minibatches are index_select on tensors held on the device.

Every model here is free of state outside x: batch normalization uses the statistics of the current batch
(`track_running_stats=False`, as the authors' AllCNN code does), and there is no dropout. So a gradient depends
only on (x, minibatch), and evaluation (in fixed batches of `eval_batch_size`, in data order) is deterministic.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call

from problems.base import Problem, as_index_tensor

__all__ = ["AllCNN", "CNNProblem", "GRAD_PATHS", "LeNet5", "MODELS", "resnet18_cifar"]

GRAD_PATHS = ("module", "functional")


class LeNet5(nn.Module):
    """LeNet5 (APAM.md Sec. 2): conv6@5x5 -> ReLU -> maxpool2 -> conv16@5x5 -> ReLU -> maxpool2 -> fc120 -> ReLU
    -> fc84 -> ReLU -> fc10 (logits).

    Input (B, in_channels, image_size, image_size) float32; output (B, num_classes) logits.
    The classic 28x28 form pads the first convolution by 2 (28 -> 28 -> 14 -> 10 -> 5; fc1 has 16*5*5 = 400
    inputs) and has 61,706 parameters for 1 channel and 10 classes. `padding=0` gives the authors' C++ variant
    (RPI-OPT/APAM MPI/APAM_LeNet5.cpp: fc1 has 16*4*4 = 256 inputs, 44,426 parameters).
    Raises ValueError when the image is too small for the two convolutions and pools.
    """

    def __init__(self, in_channels: int = 1, num_classes: int = 10, image_size: int = 28, padding: int = 2) -> None:
        super().__init__()
        side = ((image_size + 2 * padding - 4) // 2 - 4) // 2
        if side < 1:
            raise ValueError(f"LeNet5: image size {image_size} with padding {padding} is too small")
        self.conv1 = nn.Conv2d(in_channels, 6, 5, padding=padding)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * side * side, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


class _ConvBN(nn.Sequential):
    """conv (no bias) -> BatchNorm2d(track_running_stats=False) -> ReLU."""

    def __init__(self, c_in: int, c_out: int, kernel_size: int = 3, stride: int = 1, padding: int = 1) -> None:
        super().__init__(
            nn.Conv2d(c_in, c_out, kernel_size, stride=stride, padding=padding, bias=False),
            nn.BatchNorm2d(c_out, track_running_stats=False),
            nn.ReLU(),
        )


class AllCNN(nn.Module):
    """AllCNN-C (Springenberg et al. 2015, "Striving for simplicity") in the APAM authors' variant (paper Sec. 5.3-5.4,
    RPI-OPT/APAM MPI4PY/models/all_cnn_cifar.py).

    Nine conv -> BN -> ReLU blocks, 3x3 kernels, no conv bias, BN without running statistics:
    96, 96, 96/stride 2, 192, 192, 192/stride 2, 192 (no padding), 192, num_classes; then 6x6 average pooling
    and the logits scaled by 0.125. Differences from Springenberg's AllCNN-C, all as in the authors' code: batch
    normalization, no dropout, layers 8-9 are 3x3 (not 1x1) and the last block keeps its BN and ReLU.
    Input (B, in_channels, 32, 32) float32; output (B, num_classes) logits. 1,681,268 parameters for 3 channels and
    10 classes.
    """

    def __init__(self, in_channels: int = 3, num_classes: int = 10, logit_scale: float = 0.125) -> None:
        super().__init__()
        self.features = nn.Sequential(
            _ConvBN(in_channels, 96),
            _ConvBN(96, 96),
            _ConvBN(96, 96, stride=2),
            _ConvBN(96, 192),
            _ConvBN(192, 192),
            _ConvBN(192, 192, stride=2),
            _ConvBN(192, 192, padding=0),
            _ConvBN(192, 192),
            _ConvBN(192, num_classes),
        )
        self.logit_scale = float(logit_scale)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x)
        return self.logit_scale * F.adaptive_avg_pool2d(x, 1).flatten(1)


def resnet18_cifar(in_channels: int = 3, num_classes: int = 10) -> nn.Module:
    """torchvision's ResNet18 (`torchvision.models.resnet18(num_classes=...)`) adapted to 32x32 images.

    Changes: the stem is a 3x3 stride-1 convolution (no bias; Kaiming-normal init like torchvision's other convs)
    and the stem max-pool is removed (the usual CIFAR adaptation); every BatchNorm2d has track_running_stats=False
    (batch statistics always, so the flat vector holds the whole state). Input (B, in_channels, H, W) with
    H, W >= 8 (32x32 intended); output (B, num_classes) logits.
    """
    from torchvision.models import resnet18  # lazy: torchvision only for this model

    model = resnet18(num_classes=num_classes, norm_layer=functools.partial(nn.BatchNorm2d, track_running_stats=False))
    model.conv1 = nn.Conv2d(in_channels, 64, kernel_size=3, stride=1, padding=1, bias=False)
    nn.init.kaiming_normal_(model.conv1.weight, mode="fan_out", nonlinearity="relu")
    model.maxpool = nn.Identity()
    return model


MODELS = {"lenet5": LeNet5, "allcnn": AllCNN, "resnet18": resnet18_cifar}


def _built(factory: Callable[[], nn.Module]) -> nn.Module:
    """``factory()``, checked: an ``nn.Module`` (a user's ``_target_`` may name any callable).

    Raises:
        ValueError: one line naming the callable: calling it raised (its exception's first line), or it returned
            something else than a module.
    """
    func = getattr(factory, "func", factory)
    name = f"{getattr(func, '__module__', '') or ''}.{getattr(func, '__qualname__', type(func).__name__)}".lstrip(".")
    try:
        module = factory()
    except Exception as exc:  # noqa: BLE001 -- a user's net: TypeError (its arguments), anything else it raises
        why = (str(exc).splitlines() or [""])[0][:160]
        raise ValueError(f"problem.model {name}: building it failed ({type(exc).__name__}: {why})") from None
    if not isinstance(module, nn.Module):
        raise ValueError(f"problem.model {name}: returned a {type(module).__name__}, not a torch.nn.Module")
    return module


def _reinit_copy(module: nn.Module) -> nn.Module:
    """A deep copy of `module` with `reset_parameters()` called on every submodule that has one, in module order."""
    m = copy.deepcopy(module)
    for sub in m.modules():
        if hasattr(sub, "reset_parameters"):
            sub.reset_parameters()
    return m


def _stateful_modules(module: nn.Module) -> list[str]:
    """Names of submodules that keep state outside the parameters during training (running stats, dropout)."""
    bad = []
    for name, sub in module.named_modules():
        if isinstance(sub, nn.modules.batchnorm._NormBase) and sub.track_running_stats:
            bad.append(f"{name or type(sub).__name__} (BatchNorm with track_running_stats=True)")
        if isinstance(sub, nn.modules.dropout._DropoutNd) and sub.p > 0:
            bad.append(f"{name or type(sub).__name__} (dropout)")
    return bad


class CNNProblem(Problem):
    """Cross-entropy classification with a torch module, as an objective over its flat parameter vector.

    Args:
        model: a zero-argument callable returning the nn.Module (e.g. `LeNet5` or `functools.partial(AllCNN, 3)`),
            or a module instance (then `init_params` re-initializes a copy with each submodule's
            `reset_parameters`). The module must hold no state outside its parameters (no BatchNorm running
            statistics, no dropout): ValueError otherwise.
        train_x, test_x: (N, C, H, W) float tensors (pixels in [0, 1]); train_y, test_y: (N,) int64 class indices.
        device: where data, the template module, x and gradients live (default CPU).
        name: the problem's name.
        eval_batch_size: images per forward pass in `evaluate` (bounds memory; batch statistics are per batch).
        grad_path: ``"module"`` (default, fast) or ``"functional"`` (reference); see the module docstring.
    Flat layout: parameters in `model.parameters()` order, each flattened row-major, exactly as
    torch.nn.utils.parameters_to_vector. dim = number of parameters.
    Raises ValueError for mismatched shapes, labels outside the model's classes, a bad eval_batch_size or
    grad_path. ``loss_grad`` is not reentrant (one flat buffer per process); the buffer is built lazily in each
    process and never pickled, so worker processes that receive the problem each get their own.
    """

    def __init__(
        self,
        model: nn.Module | Callable[[], nn.Module],
        train_x: torch.Tensor,
        train_y: torch.Tensor,
        test_x: torch.Tensor,
        test_y: torch.Tensor,
        *,
        device: torch.device | str | None = None,
        name: str = "cnn",
        eval_batch_size: int = 1000,
        grad_path: str = "module",
    ) -> None:
        self.name = str(name)
        if grad_path not in GRAD_PATHS:
            raise ValueError(f"grad_path={grad_path!r}: must be one of {', '.join(GRAD_PATHS)}")
        self.grad_path = grad_path
        self._grad_module: tuple | None = None  # (module, flat buffer, params, conv), built lazily per process
        self.device = torch.device(device) if device is not None else torch.device("cpu")
        if int(eval_batch_size) < 1:
            raise ValueError(f"eval_batch_size must be >= 1, got {eval_batch_size}")
        self.eval_batch_size = int(eval_batch_size)
        self._factory = model if not isinstance(model, nn.Module) else functools.partial(_reinit_copy, model)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            template = _built(self._factory) if not isinstance(model, nn.Module) else copy.deepcopy(model)
        # channels-last only without batch normalization: batch statistics of small batches amplify the rounding
        # differences of the reordered convolution sums (ResNet18 at batch 4: 7e-4 absolute on the gradient)
        batch_norm = any(isinstance(m, nn.modules.batchnorm._NormBase) for m in template.modules())
        self.channels_last = not batch_norm
        self.batch_separable = not batch_norm  # no batch statistics: a minibatch's loss is a mean over examples
        bad = _stateful_modules(template)
        if bad:
            raise ValueError(f"model {type(template).__name__} keeps state outside its parameters: {', '.join(bad)}")
        self._model = template.to(self.device).train()
        for p in self._model.parameters():
            p.requires_grad_(False)
        named = list(self._model.named_parameters())
        self._names = [n for n, _ in named]
        self._shapes = [p.shape for _, p in named]
        self._numels = [p.numel() for _, p in named]
        self.dim = int(sum(self._numels))
        if self.dim == 0:
            raise ValueError(f"problem.model {type(template).__name__}: no parameters to train")

        self._train_x, self._train_y = self._data(train_x, train_y, "train")
        self._test_x, self._test_y = self._data(test_x, test_y, "test")
        self.num_train = int(self._train_x.shape[0])
        if self.num_train == 0:
            raise ValueError("train_x is empty")
        if self._test_x.shape[1:] != self._train_x.shape[1:]:
            raise ValueError(
                f"test images {tuple(self._test_x.shape[1:])} differ from train images {tuple(self._train_x.shape[1:])}"
            )
        self._check_classes()

    def _data(self, x: torch.Tensor, y: torch.Tensor, what: str) -> tuple[torch.Tensor, torch.Tensor]:
        x, y = torch.as_tensor(x), torch.as_tensor(y)
        if x.ndim != 4 or not x.dtype.is_floating_point:
            raise ValueError(f"{what}_x must be a float (N, C, H, W) tensor, got {tuple(x.shape)} {x.dtype}")
        if y.shape != (x.shape[0],) or y.dtype.is_floating_point:
            raise ValueError(f"{what}_y must be an integer ({x.shape[0]},) tensor, got {tuple(y.shape)} {y.dtype}")
        return x.to(self.device, torch.float32).contiguous(), y.to(self.device, torch.int64).contiguous()

    def _check_classes(self) -> None:
        with torch.no_grad():
            out = self._model(self._train_x[:2])
        if out.ndim != 2:
            raise ValueError(f"model output must be (B, classes) logits, got shape {tuple(out.shape)}")
        k = out.shape[1]
        for what, y in (("train_y", self._train_y), ("test_y", self._test_y)):
            if y.numel() and (int(y.min()) < 0 or int(y.max()) >= k):
                raise ValueError(
                    f"{what} has labels outside [0, {k}) (the model's {k} classes): "
                    f"min {int(y.min())}, max {int(y.max())}"
                )

    def params_dict(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """Views of the flat vector x as the module's named parameters (no copy)."""
        return {n: t.view(s) for n, t, s in zip(self._names, x.split(self._numels), self._shapes)}

    def _check_x(self, x: torch.Tensor) -> None:
        if x.shape != (self.dim,) or x.dtype != torch.float32:
            raise ValueError(f"x must be a ({self.dim},) float32 tensor, got {tuple(x.shape)} {x.dtype}")

    def forward(self, x: torch.Tensor, images: torch.Tensor) -> torch.Tensor:
        """Logits (B, classes) of `images` (B, C, H, W) under the flat parameters x."""
        return functional_call(self._model, self.params_dict(x), (images,))

    # ------------------------------------------------------------------------------------------ interface
    def init_params(self, seed: int) -> torch.Tensor:
        """The model's default initialization under torch.manual_seed(seed), flattened: (dim,) float32 on device.

        Runs inside torch.random.fork_rng (CPU generator), so the caller's random state is untouched.
        """
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(seed))
            module = self._factory()
        flat = nn.utils.parameters_to_vector(module.parameters()).detach()
        if flat.numel() != self.dim:
            raise ValueError(f"model factory built {flat.numel()} parameters, expected {self.dim}")
        return flat.to(device=self.device, dtype=torch.float32).clone()

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_grad_module"] = None  # never shared between processes: each builds its own buffer
        return state

    def _module_at(self) -> tuple[nn.Module, torch.Tensor, list[torch.Tensor], list[tuple[torch.Tensor, torch.Tensor]]]:
        """(module, flat, params, conv): a private copy of the template in channels-last memory format whose
        parameters are views of ``flat`` (dim,) in the flat layout, except the 4-D (convolution) weights, which are
        channels-last tensors of their own, refreshed from their ``flat`` slice (``conv``: (param, slice view)
        pairs). Built on first use in this process."""
        if self._grad_module is None:
            module = copy.deepcopy(self._model)
            flat = torch.zeros(self.dim, dtype=torch.float32, device=self.device)
            params, conv = list(module.parameters()), []
            for p, view in zip(params, flat.split(self._numels)):
                view = view.view(p.shape)
                if p.dim() == 4 and self.channels_last:
                    p.data = torch.empty_like(p.data, memory_format=torch.channels_last)
                    conv.append((p, view))
                else:
                    p.data = view
                p.requires_grad_(True)
            self._grad_module = (module, flat, params, conv)
        return self._grad_module

    def loss_grad(self, x: torch.Tensor, idx) -> tuple[float, torch.Tensor]:
        """Mean cross entropy of the minibatch and its gradient, a new (dim,) float32 tensor.

        ``grad_path="module"``: x is copied into the private module's flat parameter buffer (one copy of d floats),
        then forward (channels-last) and ``torch.autograd.grad`` with respect to the parameters, concatenated (one
        more copy). ``grad_path="functional"``: autograd through `functional_call` at x (contiguous NCHW). The two
        agree to float32 rounding (the convolution kernels sum in another order), not bit for bit.
        """
        self._check_x(x)
        return self._loss_grad(x, as_index_tensor(idx, self._train_x.shape[0], self.device))

    def loss_grad_mean(self, x: torch.Tensor, groups) -> tuple[float, torch.Tensor]:
        """A sync round's mean (:meth:`problems.base.Problem.loss_grad_mean`) in one forward and backward pass over
        the P groups together, each example weighted 1 / (P b_w) (b_w: its group's size), when the model is
        ``batch_separable`` (no batch normalization); with equal groups this is exactly ``loss_grad`` of their
        concatenation. With batch normalization each group is its own minibatch (the default loop).
        LeNet5, batch 40 split over 20 workers: one batch-40 pass instead of 20 batch-2 passes: the same
        arithmetic in one pass, without 19 passes' fixed costs."""
        if not self.batch_separable or len(groups) == 1:
            return super().loss_grad_mean(x, groups)
        self._check_x(x)
        num = self._train_x.shape[0]
        idx = [as_index_tensor(g, num, self.device) for g in groups]
        sizes = [int(i.numel()) for i in idx]
        if len(set(sizes)) == 1:
            return self._loss_grad(x, torch.cat(idx))
        weights = torch.cat(
            [torch.full((b,), 1.0 / (len(sizes) * b), dtype=self._train_x.dtype, device=self.device) for b in sizes]
        )
        return self._loss_grad(x, torch.cat(idx), weights)

    def _loss_grad(
        self, x: torch.Tensor, i: torch.Tensor, weights: torch.Tensor | None = None
    ) -> tuple[float, torch.Tensor]:
        """Loss and gradient at x over the checked indices i: the mean cross entropy, or with ``weights`` ((B,),
        summing to 1) the weighted sum of the per-example cross entropies."""
        images, labels = self._train_x.index_select(0, i), self._train_y.index_select(0, i)

        def criterion(logits: torch.Tensor) -> torch.Tensor:
            if weights is None:
                return F.cross_entropy(logits, labels)
            return F.cross_entropy(logits, labels, reduction="none") @ weights

        if self.grad_path == "functional":
            with torch.enable_grad():
                flat = x.detach().requires_grad_(True)
                loss = criterion(self.forward(flat, images))
                (g,) = torch.autograd.grad(loss, flat)
            return float(loss.detach()), g
        module, params = self._module_loaded(x)
        if self.channels_last:
            images = images.contiguous(memory_format=torch.channels_last)
        with torch.enable_grad():
            loss = criterion(module(images))
            grads = torch.autograd.grad(loss, params)
        return float(loss.detach()), torch.cat([g.reshape(-1) for g in grads])

    def _module_loaded(self, x: torch.Tensor) -> tuple[nn.Module, list[torch.Tensor]]:
        """The private module (:meth:`_module_at`) with its parameters set to the flat vector x (one copy of d
        floats, plus the channels-last convolution weights): (module, params)."""
        module, buf, params, conv = self._module_at()
        with torch.no_grad():
            buf.copy_(x)
            for p, view in conv:
                p.copy_(view)
        return module, params

    @torch.no_grad()
    def _set_metrics(self, x: torch.Tensor, images: torch.Tensor, labels: torch.Tensor) -> tuple[float, float]:
        """(mean loss, accuracy) over ``images`` in batches of eval_batch_size, on the path of ``grad_path``: the
        private channels-last module (``module``; faster than ``functional_call`` in NCHW for LeNet5) or
        ``functional_call`` at x (``functional``, the reference)."""
        n = images.shape[0]
        if self.grad_path == "functional":

            def forward(batch):
                return self.forward(x, batch)
        else:
            module, _ = self._module_loaded(x)

            def forward(batch):
                return module(batch.contiguous(memory_format=torch.channels_last) if self.channels_last else batch)

        loss_sum, correct = 0.0, 0
        for s in range(0, n, self.eval_batch_size):
            out = forward(images[s : s + self.eval_batch_size])
            lab = labels[s : s + self.eval_batch_size]
            loss_sum += float(F.cross_entropy(out.double(), lab, reduction="sum"))
            correct += int((out.argmax(1) == lab).sum())
        return loss_sum / n, correct / n

    def evaluate(self, x: torch.Tensor) -> dict[str, float]:
        """Mean cross entropy and accuracy on the full train and test sets (no_grad, batches of eval_batch_size; on
        the ``grad_path``'s forward: the two agree to float32 rounding)."""
        self._check_x(x)
        x = x.detach()
        tr_loss, tr_acc = self._set_metrics(x, self._train_x, self._train_y)
        te_loss, te_acc = (
            self._set_metrics(x, self._test_x, self._test_y) if self._test_x.shape[0] else (float("nan"), float("nan"))
        )
        return {"train_loss": tr_loss, "train_acc": tr_acc, "test_loss": te_loss, "test_acc": te_acc}
