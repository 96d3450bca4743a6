"""Objective functions: `Problem` (minibatch loss and gradient at a flat vector, full-set evaluation), the logistic
regression and CNN problems, and `build_problem`, which builds one from a `problem` config (conf/problem/*.yaml).

    from problems import build_problem
    problem = build_problem(cfg.problem, data_root=Path("data"), device=torch.device("cpu"))

Data loading lives in `problems.data` (imported lazily here, only when a problem is built from files).
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path

import torch
from hydra.utils import get_object

from problems.base import Problem
from problems.cnn import MODELS, AllCNN, CNNProblem, LeNet5, resnet18_cifar
from problems.datasets.files import DataError
from problems.logreg import LogisticRegression

__all__ = [
    "KINDS",
    "MODELS",
    "AllCNN",
    "CNNProblem",
    "LeNet5",
    "LogisticRegression",
    "Problem",
    "build_problem",
    "optimum_cache_dir",
    "resnet18_cifar",
]

KINDS = ("logreg", "logreg_libsvm", "logreg_rcv1like", "cnn", "cnn_timing")
CACHE_SUBDIR = "cache"


def optimum_cache_dir(data_root: str | Path) -> Path:
    """Where optima (f*, x*) are cached: `<data_root>/cache` (created when the first one is written); also parsed
    LIBSVM files (`libsvm/`)."""
    return Path(data_root) / CACHE_SUBDIR


def _get(cfg, key: str, default=None):
    return cfg.get(key, default) if isinstance(cfg, Mapping) or hasattr(cfg, "get") else default


def _req(cfg, key: str, kind: str):
    value = _get(cfg, key)
    if value is None:
        raise ValueError(f"problem.{key} is required for problem kind {kind!r}")
    return value


def _opt_int(cfg, key: str, minimum: int = 1) -> int | None:
    value = _get(cfg, key)
    if value is None:
        return None
    if isinstance(value, bool) or int(value) != value or int(value) < minimum:
        raise ValueError(f"problem.{key} must be an integer >= {minimum} or null, got {value!r}")
    return int(value)


def _both_classes(y, shown: str, max_train: int | None, needs: str = "a binary problem needs both classes") -> None:
    """Refuse training labels of one class only: the model would learn nothing and report a perfect score (binary),
    or its share of the test set (a classifier of more classes).

    Raises:
        DataError: one line naming the data (``shown``) and, when it cut the set, ``problem.max_train``; ``needs``
            says what the problem needs.
    """
    values = torch.unique(torch.as_tensor(y)).tolist()
    if len(values) < 2:
        cut = f" (the first problem.max_train={max_train})" if max_train is not None else ""
        raise DataError(f"{shown}: every training example{cut} has label {values[0] if values else '-'}; {needs}")


def _images_vary(x: torch.Tensor, shown: str, max_train: int | None) -> None:
    """Refuse training images whose every pixel has one value (all zero, all 128): no feature tells one example from
    another, and standardizing divides by a spread of 0 (test losses of 1e10 were recorded as ``ok``).

    Raises:
        DataError: one line naming the data and, when it cut the set, ``problem.max_train``.
    """
    if x.numel() and bool((x == x.reshape(-1)[0]).all()):
        cut = f" (the first problem.max_train={max_train})" if max_train is not None else ""
        raise DataError(
            f"{shown}: every pixel of every training image{cut} is {float(x.reshape(-1)[0]):g}; nothing tells one "
            "example from another"
        )


def _vision_logreg(cfg, root: Path, device: torch.device) -> LogisticRegression:
    spec = _req(cfg, "dataset", "logreg")
    dataset = str(spec.get("_target_")) if _instantiable(spec) else str(spec)
    classes = list(_req(cfg, "classes", "logreg"))
    if len(classes) != 2 or classes[0] == classes[1]:
        raise ValueError(f"problem.classes must be two different class indices, got {classes}")
    neg, pos = (int(c) for c in classes)
    max_train = _opt_int(cfg, "max_train")
    data = _dataset(spec, root)

    def binary(x: torch.Tensor, y: torch.Tensor, what: str) -> tuple[torch.Tensor, torch.Tensor]:
        keep = (y == neg) | (y == pos)
        if not bool((y[keep] == neg).any()) or not bool((y[keep] == pos).any()):
            raise DataError(f"problem.classes {classes}: {dataset} {what} set lacks one of these classes")
        return x[keep].reshape(int(keep.sum()), -1), (y[keep] == pos).to(torch.int64)

    xtr, ytr = binary(data.train_x, data.train_y, "train")
    xte, yte = binary(data.test_x, data.test_y, "test")
    row_norm = _get(cfg, "row_norm")
    if row_norm == "unit":  # every example scaled to unit l2 norm, as rcv1's tf-idf rows are
        xtr = xtr / xtr.norm(dim=1, keepdim=True).clamp_min(1e-12)
        xte = xte / xte.norm(dim=1, keepdim=True).clamp_min(1e-12)
    elif row_norm is not None:
        raise ValueError(f"problem.row_norm={row_norm!r}: must be null or 'unit'")
    if max_train is not None:
        xtr, ytr = xtr[:max_train], ytr[:max_train]
    _both_classes(ytr, f"{dataset} classes {neg} (label 0) and {pos} (label 1)", max_train)
    _images_vary(xtr, f"{dataset} classes {neg} and {pos}", max_train)
    return LogisticRegression(
        xtr,
        ytr,
        xte,
        yte,
        l2=float(_get(cfg, "l2", 0.0) or 0.0),
        device=device,
        name=str(_get(cfg, "name") or f"logreg_{dataset}_{neg}v{pos}"),
        init_std=float(_get(cfg, "init_std", 0.0) or 0.0),
        cache_dir=optimum_cache_dir(root),
    )


def _libsvm_logreg(cfg, root: Path, device: torch.device) -> LogisticRegression:
    from problems.data import load_libsvm  # lazy: scikit-learn only for LIBSVM problems

    path = Path(str(_req(cfg, "path", "logreg_libsvm")))
    test_path = _get(cfg, "test_path")
    zero_based = _get(cfg, "zero_based", "auto")
    data = load_libsvm(
        path,
        n_features=_opt_int(cfg, "n_features"),
        zero_based=zero_based if zero_based is not None else "auto",
        test_path=Path(str(test_path)) if test_path is not None else None,
        cache_dir=optimum_cache_dir(root),
    )
    xtr, ytr = data.train_x, data.train_y
    max_train = _opt_int(cfg, "max_train")
    if max_train is not None:
        xtr, ytr = xtr[:max_train], ytr[:max_train]
        _both_classes(ytr, str(path), max_train)
    test = (data.test_x, data.test_y) if data.has_test else (None, None)
    return LogisticRegression(
        xtr,
        ytr,
        *test,
        l2=float(_get(cfg, "l2", 0.0) or 0.0),
        device=device,
        name=str(_get(cfg, "name") or f"logreg_{path.stem}"),
        init_std=float(_get(cfg, "init_std", 0.0) or 0.0),
        cache_dir=optimum_cache_dir(root),
    )


def _rcv1like_logreg(cfg, root: Path, device: torch.device) -> LogisticRegression:
    """`logreg_libsvm` on the synthetic rcv1-like files (problems.rcv1like), generated once into `<root>/cache`."""
    from problems.rcv1like import Rcv1LikeSpec, rcv1like_files  # lazy: scikit-learn only for this problem

    given = {f.name: _get(cfg, f.name) for f in fields(Rcv1LikeSpec) if _get(cfg, f.name) is not None}
    if "informative" not in given:  # rcv1's 5000 most frequent features, or every feature of a smaller set
        given["informative"] = min(Rcv1LikeSpec.informative, given.get("n_features", Rcv1LikeSpec.n_features))
    spec = Rcv1LikeSpec(**given)
    train, test = rcv1like_files(optimum_cache_dir(root), spec)
    libsvm = {k: _get(cfg, k) for k in ("l2", "max_train", "init_std", "name")}
    return _libsvm_logreg(
        {**libsvm, "path": str(train), "test_path": str(test), "n_features": spec.n_features, "zero_based": False},
        root,
        device,
    )


def _model_name(cfg, kind: str):
    """``problem.model``: a built-in net's name (one of MODELS), or a mapping with ``_target_`` (any callable that
    returns a ``torch.nn.Module``; its other keys are its arguments)."""
    model = _req(cfg, "model", kind)
    if _instantiable(model):
        return dict(model)
    if str(model) not in MODELS:
        raise ValueError(
            f"unknown problem.model {model!r}; expected one of {', '.join(MODELS)}, or a mapping with "
            "_target_ naming your own module's net"
        )
    return str(model)


def _instantiable(spec) -> bool:
    return isinstance(spec, Mapping) and "_target_" in spec


def _target(spec: Mapping):
    """The callable a ``_target_`` names (Hydra's ``get_object``), with the mapping's other keys bound to it.

    Raises:
        ValueError: the target cannot be imported (one line naming it; Hydra's own multi-line log of the failure is
            held back).
    """
    hydra_log = logging.getLogger("hydra.utils")
    was_disabled, hydra_log.disabled = hydra_log.disabled, True
    try:
        target = get_object(str(spec["_target_"]))
    except Exception as exc:  # ImportError, AttributeError: one line naming the target
        raise ValueError(f"_target_={spec['_target_']}: cannot be imported ({_cause(exc)})") from None
    finally:
        hydra_log.disabled = was_disabled
    return functools.partial(target, **{k: v for k, v in spec.items() if k != "_target_"})


def _cause(exc: BaseException) -> str:
    """The innermost cause of an import failure in one line: Hydra's ``get_object`` wraps the ImportError or
    AttributeError, whose message is on the following lines of its own or in ``__cause__``."""
    while exc.__cause__ is not None:
        exc = exc.__cause__
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[-1] if lines else type(exc).__name__


def _model_factory(model, channels: int, side: int, classes: int):
    """A zero-argument factory of net ``model`` (a built-in name or a ``_target_`` mapping) for (channels, side,
    side) images and ``classes`` classes: the shape is passed as ``in_channels``, ``num_classes`` and
    ``image_size``, each where the callable takes it and the mapping does not set it."""
    build = _target(model) if isinstance(model, Mapping) else MODELS[model]
    shape = {"in_channels": channels, "num_classes": classes, "image_size": side}
    try:
        params = inspect.signature(build).parameters
    except (TypeError, ValueError) as exc:  # a partial whose keys the callable does not take; a builtin type
        shown = f"_target_={model['_target_']}" if isinstance(model, Mapping) else model
        raise ValueError(f"problem.model {shown}: {str(exc).splitlines()[0][:160]}") from None
    takes_any = any(p.kind == p.VAR_KEYWORD for p in params.values())
    bound = getattr(build, "keywords", {})
    return functools.partial(build, **{k: v for k, v in shape.items() if (k in params or takes_any) and k not in bound})


def _dataset(spec, root: Path):
    """``problem.dataset``: a built-in image set's name (problems.data.load_vision), or a mapping with ``_target_``:
    a callable called with ``root`` (the data folder) that returns an object with ``train_x, train_y, test_x,
    test_y`` tensors (images (N, C, H, W) float in [0, 1] or uint8, labels (N,) int64), as load_vision's."""
    from problems.data import load_vision  # lazy: torchvision only for image problems

    if _instantiable(spec):
        data = _target(spec)(root=root)
        for field in ("train_x", "train_y", "test_x", "test_y"):
            if not hasattr(data, field):
                raise ValueError(f"problem.dataset _target_={spec['_target_']}: its result has no {field}")
        return data
    return load_vision(str(spec), root)


def _cnn(cfg, root: Path, device: torch.device) -> CNNProblem:
    model = _model_name(cfg, "cnn")
    spec = _req(cfg, "dataset", "cnn")
    dataset = str(spec.get("_target_")).rsplit(".", 1)[-1] if _instantiable(spec) else str(spec)
    data = _dataset(spec, root)
    xtr, ytr, xte, yte = data.train_x, data.train_y, data.test_x, data.test_y
    max_train, max_test = _opt_int(cfg, "max_train"), _opt_int(cfg, "max_test")
    if max_train is not None:
        xtr, ytr = xtr[:max_train], ytr[:max_train]
    if max_test is not None:
        xte, yte = xte[:max_test], yte[:max_test]
    _both_classes(ytr, dataset, max_train, needs="a classifier needs two classes")
    _images_vary(xtr, dataset, max_train)
    standardize = _get(cfg, "standardize", False)
    if standardize not in (True, False):
        raise ValueError(f"problem.standardize={standardize!r}: must be true or false")
    if standardize:  # per channel, with the training set's mean and std (as torchvision's Normalize is used)
        mean = xtr.mean(dim=(0, 2, 3), keepdim=True)
        std = xtr.std(dim=(0, 2, 3), keepdim=True)
        if bool((std == 0).any()):
            c = int((std.reshape(-1) == 0).nonzero()[0])
            raise DataError(f"problem.standardize=true: channel {c} of {dataset}'s training images is constant (std 0)")
        xtr, xte = (xtr - mean) / std, (xte - mean) / std
    channels, side = int(xtr.shape[1]), int(xtr.shape[2])
    classes = len(getattr(data, "classes", None) or []) or int(max(ytr.max(), yte.max())) + 1
    factory = _model_factory(model, channels, side, classes)
    label = model if isinstance(model, str) else str(model["_target_"]).rsplit(".", 1)[-1]
    return CNNProblem(
        factory,
        xtr,
        ytr,
        xte,
        yte,
        device=device,
        name=str(_get(cfg, "name") or f"{label}_{dataset}"),
        eval_batch_size=_opt_int(cfg, "eval_batch_size") or 1000,
    )


def _cnn_timing(cfg, device: torch.device):
    from problems.timing import TimingOnlyCNN, fake_images  # lazy: torchvision only for this problem

    model = _model_name(cfg, "cnn_timing")
    shape = tuple(int(v) for v in _req(cfg, "image_shape", "cnn_timing"))
    if len(shape) != 3 or min(shape) < 1:
        raise ValueError(f"problem.image_shape={list(shape)}: must be [channels, height, width], each >= 1")
    classes = int(_req(cfg, "classes", "cnn_timing"))
    pool = _opt_int(cfg, "pool") or 256
    x, y = fake_images(pool, shape, classes, seed=_opt_int(cfg, "seed", minimum=0) or 0)
    return TimingOnlyCNN(
        _model_factory(model, shape[0], shape[1], classes),
        x,
        y,
        int(_req(cfg, "num_train", "cnn_timing")),
        device=device,
        name=str(_get(cfg, "name") or f"{model}_timing"),
    )


def build_problem(cfg, data_root: str | Path, device: torch.device | str = "cpu") -> Problem:
    """Build the Problem that a `problem` config describes.

    cfg: mapping (DictConfig or dict) with `kind` and, per kind:
      - `logreg`: dataset (fashion_mnist | mnist | cifar10), classes [neg, pos] (class `pos` -> label 1), l2,
        max_train (first N of the two-class training set; null = all), optional init_std, name, row_norm
        (null: pixels in [0, 1]; ``unit``: each example scaled to unit l2 norm, like rcv1's rows). Images are
        flattened into features (784 for Fashion-MNIST), pixels in [0, 1].
      - `logreg_libsvm`: path, test_path (null: evaluate on the training set), n_features, zero_based, l2,
        max_train, optional init_std, name. Sparse.
      - `logreg_rcv1like`: `logreg_libsvm` on synthetic LIBSVM files with rcv1.binary's shape, written once under
        `<data_root>/cache/rcv1like/` (problems.rcv1like; keys: the fields of Rcv1LikeSpec, e.g. seed, n_test,
        plus l2, max_train, init_std, name).
      - `cnn`: model (lenet5 | allcnn | resnet18), dataset, max_train, optional max_test (first N test images),
        eval_batch_size (default 1000), name, standardize (default false: pixels in [0, 1]; true: each channel
        minus the training set's mean, over its std, the same constants applied to the test set).
      - `cnn_timing`: a net at its true size and gradient cost without its data (problems.timing; time per epoch
        only, engine=simulated): model, image_shape [C, H, W], classes, num_train (the epoch length to declare),
        optional pool (FakeData images actually held, default 256), seed, name.
    data_root: the data folder (problems.data.data_root()); optima are cached in `<data_root>/cache`.
    device: where data, parameters and gradients live.
    Raises ValueError for an unknown kind or model, or missing/bad keys; problems.data.DataError (a ValueError)
    when the data files are missing or bad, or degenerate: training labels of one class only (also after
    ``max_train``), a class of ``classes`` missing from a vision set, a LIBSVM file without features or too wide for
    this machine's memory (problems/datasets/libsvm.py).
    """
    kind = _get(cfg, "kind")
    root, device = Path(data_root), torch.device(device)
    if kind == "logreg":
        return _vision_logreg(cfg, root, device)
    if kind == "logreg_libsvm":
        return _libsvm_logreg(cfg, root, device)
    if kind == "logreg_rcv1like":
        return _rcv1like_logreg(cfg, root, device)
    if kind == "cnn":
        return _cnn(cfg, root, device)
    if kind == "cnn_timing":
        return _cnn_timing(cfg, device)
    raise ValueError(f"unknown problem kind {kind!r}; expected one of {', '.join(KINDS)}")
