"""Data: where it lives, staging (getting the files into torchvision's layout), and loading.

    data_root()                         -> Path: $APAM_DATA, else <repo>/data
    stage(name, root)                   -> Path: the staged folder of `fashion_mnist`, `mnist` or `cifar10`
    load_vision(name, root)             -> VisionData: float32 (N, C, H, W) images in [0, 1], int64 labels
    load_libsvm(path, n_features, zero_based, test_path, cache_dir=None) -> LibsvmData: CSR matrices, {0,1} labels

Every failure is a `DataError` (a ValueError) with a one-line message naming the file and saying how to get it.
Command line: `python -m problems.data [fashion_mnist|mnist|cifar10] [--root DIR] [--no-download]` stages one
data set and prints where it is; exit status 2 with the one-line error when it cannot.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

from problems.datasets.cifar import stage_cifar10
from problems.datasets.files import DataError, stat_signature
from problems.datasets.idx import FASHION_MNIST, MNIST, stage_idx
from problems.datasets.libsvm import LibsvmData, load_libsvm

__all__ = [
    "DataError",
    "LibsvmData",
    "VisionData",
    "VISION_DATASETS",
    "data_root",
    "load_libsvm",
    "load_vision",
    "stage",
    "stage_cifar10",
    "stage_fashion_mnist",
    "stage_mnist",
]

VISION_DATASETS = ("fashion_mnist", "mnist", "cifar10")
DEBIAN_FASHION_MNIST = FASHION_MNIST.debian_dir


def data_root() -> Path:
    """The data folder: the environment variable `APAM_DATA` if set and non-empty, else `<repo root>/data`.

    The repository root is the folder above the `problems` package. The folder need not exist yet.
    """
    env = os.environ.get("APAM_DATA", "").strip()
    if env:
        return Path(env).expanduser()
    return Path(__file__).resolve().parent.parent / "data"


def stage_fashion_mnist(
    root: str | Path | None = None,
    *,
    debian_dir: Path | None = DEBIAN_FASHION_MNIST,
    apt_package: str | None = FASHION_MNIST.apt_package,
    download: bool = True,
) -> Path:
    """Stage Fashion-MNIST (60,000 train / 10,000 test, 28x28 grey) under `root/FashionMNIST/raw/`; return it.

    Sources in order: files already in `raw/` (decompressed, or .gz beside them); Debian's `debian_dir/*.gz`
    (installing `apt_package` with apt-get first when they are missing, we are root and `APAM_NO_APT` is unset;
    `None` disables either); torchvision's download (`download=True`). Files are validated (gzip CRC, IDX magic,
    dimensions, byte length, label range, image/label counts agree) and moved into place atomically.
    `root` defaults to `data_root()`. Raises DataError naming the bad file, or saying how to get the data.
    """
    root = Path(root) if root is not None else data_root()
    return stage_idx(FASHION_MNIST, root, debian_dir=debian_dir, apt_package=apt_package, download=download)


def stage_mnist(root: str | Path | None = None, *, download: bool = True) -> Path:
    """Stage MNIST under `root/MNIST/raw/` (files already there, or .gz beside them, or torchvision's download).

    Same validation and errors as `stage_fashion_mnist`; Debian has no MNIST package.
    """
    root = Path(root) if root is not None else data_root()
    return stage_idx(MNIST, root, download=download)


def stage(name: str, root: str | Path | None = None, *, download: bool = True) -> Path:
    """Stage vision data set `name` (one of VISION_DATASETS) under `root` (default `data_root()`); return its folder.

    Raises ValueError for an unknown name, DataError when the data cannot be staged (an OSError on the way, e.g.
    `root` is a file or read-only, becomes a DataError naming the path).
    """
    root = Path(root) if root is not None else data_root()
    stagers = {"fashion_mnist": stage_fashion_mnist, "mnist": stage_mnist, "cifar10": stage_cifar10}
    if name not in stagers:
        raise ValueError(f"unknown data set {name!r}; expected one of {', '.join(VISION_DATASETS)}")
    try:
        return stagers[name](root, download=download)
    except OSError as exc:  # APAM_DATA is a file or not writable, a folder stands where a data file should, ...
        where = exc.filename2 or exc.filename or root
        raise DataError(
            f"{name} cannot be staged under {root} ($APAM_DATA or the data folder): {where}: {exc.strerror or exc}"
        ) from None


@dataclass
class VisionData:
    """An image classification data set as whole tensors (CPU).

    train_x, test_x: float32 (N, C, H, W) in [0, 1] (pixel byte / 255); C, H, W = 1, 28, 28 for (Fashion-)MNIST,
    3, 32, 32 for CIFAR-10. train_y, test_y: int64 (N,) class indices. classes: the class names, index order.
    """

    name: str
    train_x: torch.Tensor
    train_y: torch.Tensor
    test_x: torch.Tensor
    test_y: torch.Tensor
    classes: list[str]


def _images_to_float(data: torch.Tensor, channels_last: bool) -> torch.Tensor:
    """uint8 (N, H, W) or (N, H, W, C) -> float32 (N, C, H, W) in [0, 1]."""
    x = data.permute(0, 3, 1, 2) if channels_last else data.unsqueeze(1)
    return x.to(torch.float32).div_(255.0).contiguous()


def load_vision(name: str, root: str | Path | None = None, *, download: bool = True) -> VisionData:
    """Load `fashion_mnist`, `mnist` or `cifar10` as tensors: stage (see `stage`), then read with torchvision.

    Reads `torchvision.datasets.{FashionMNIST, MNIST, CIFAR10}(root, train=..., download=False)` and converts their
    `.data` / `.targets` directly (no DataLoader, no transforms). `root` defaults to `data_root()`. The last data set
    read is kept in this process and returned again while its staged files are unchanged (size and modification
    time): the same tensors, which callers must not modify in place.
    Raises ValueError for an unknown name, DataError when the data is missing or bad.
    """
    root = Path(root) if root is not None else data_root()
    folder = stage(name, root, download=download)
    key = (name, stat_signature(sorted(f for f in Path(folder).rglob("*") if f.is_file())))
    if _LOADED.get("key") != key:
        _LOADED.clear()  # at most one data set held: a sweep's jobs use one
        _LOADED.update(key=key, data=_read_vision(name, root))
    return _LOADED["data"]


# The last data set `load_vision` read, in this process: every job of a sweep (Hydra runs them one after another in
# one process, or in a few joblib workers) builds its problem from it instead of reading and converting the IDX
# files again (a fraction of a second a job). Keyed by the staged files' paths, sizes and modification times, so a
# changed file is read again. Callers take slices or copies and never write into these tensors.
_LOADED: dict = {}


def _read_vision(name: str, root: Path) -> VisionData:
    """Read staged data set ``name`` under ``root`` with torchvision (see :func:`load_vision`)."""
    import torchvision.datasets as tvd  # lazy: torchvision only for image data

    if name in ("fashion_mnist", "mnist"):
        cls = tvd.FashionMNIST if name == "fashion_mnist" else tvd.MNIST
        tr, te = cls(str(root), train=True, download=False), cls(str(root), train=False, download=False)
        return VisionData(
            name,
            _images_to_float(tr.data, False),
            tr.targets.to(torch.int64),
            _images_to_float(te.data, False),
            te.targets.to(torch.int64),
            list(tr.classes),
        )
    cifar = _cifar10_staged_class()
    tr, te = cifar(str(root), train=True, download=False), cifar(str(root), train=False, download=False)
    to_x = lambda d: _images_to_float(torch.from_numpy(d), True)  # noqa: E731
    to_y = lambda t: torch.as_tensor(t, dtype=torch.int64)  # noqa: E731
    return VisionData(name, to_x(tr.data), to_y(tr.targets), to_x(te.data), to_y(te.targets), list(tr.classes))


@functools.cache
def _cifar10_staged_class() -> type:
    import torchvision.datasets as tvd  # lazy: torchvision only for image data

    class CIFAR10Staged(tvd.CIFAR10):
        """torchvision's CIFAR10 without its MD5 checks (the way CIFAR100 overrides the file lists): `stage_cifar10`
        has verified every file's structure, and this lets files in the real format but of any size load."""

        train_list = [[f, None] for f, _ in tvd.CIFAR10.train_list]
        test_list = [[f, None] for f, _ in tvd.CIFAR10.test_list]
        meta = {**tvd.CIFAR10.meta, "md5": None}

    return CIFAR10Staged


def main(argv: list[str] | None = None) -> int:
    """CLI: stage one vision data set, print its folder; exit 2 with a one-line message on DataError."""
    p = argparse.ArgumentParser(prog="python -m problems.data", description="Stage a vision data set.")
    p.add_argument("dataset", nargs="?", default="fashion_mnist", choices=VISION_DATASETS)
    p.add_argument("--dataset", dest="dataset_opt", choices=VISION_DATASETS, help="same as the positional name")
    p.add_argument("--root", type=Path, default=None, help="data folder (default: $APAM_DATA, else <repo>/data)")
    p.add_argument("--no-download", action="store_true", help="never use torchvision's download")
    a = p.parse_args(argv)
    name = a.dataset_opt or a.dataset
    try:
        where = stage(name, a.root, download=not a.no_download)
    except DataError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"{name}: {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
