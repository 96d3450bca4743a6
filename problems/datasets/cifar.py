"""CIFAR-10: verification of the pickled batches and staging into torchvision's layout.

Layout (what `torchvision.datasets.CIFAR10(root, download=False)` reads): `root/cifar-10-batches-py/` holding
`data_batch_1` .. `data_batch_5`, `test_batch` (each a pickled dict: `data` uint8 (n, 3072) rows of R, G, B planes of
32x32, `labels` list of n ints in 0..9) and `batches.meta` (`label_names`: the 10 class names).
Source: https://www.cs.toronto.edu/~kriz/cifar.html (the "python version").
"""

from __future__ import annotations

import pickle
import tarfile
from pathlib import Path, PurePosixPath

import numpy as np

from .files import DataError, looks_like_html, move_into_place, one_line, scratch_dir, staging_lock

FOLDER = "cifar-10-batches-py"
ARCHIVE = "cifar-10-python.tar.gz"
URL = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
TRAIN_FILES = tuple(f"data_batch_{i}" for i in range(1, 6))
TEST_FILES = ("test_batch",)
META_FILE = "batches.meta"
NUM_CLASSES = 10
ROW_BYTES = 3 * 32 * 32


# What a CIFAR-10 pickle holds: dicts, lists, str/bytes and numpy arrays. Any other global a pickle names (a function
# it would call while loading: os.system, ...) is refused before anything runs, as Python's docs advise for data
# from elsewhere ("Restricting Globals", the pickle module's documentation).
_ARRAY_GLOBALS = {
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"),
    ("numpy._core.multiarray", "scalar"),
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("_codecs", "encode"),
}


class _ArraysOnly(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        if (module, name) not in _ARRAY_GLOBALS:
            raise pickle.UnpicklingError(f"names {module}.{name}, which a CIFAR-10 batch never holds")
        return super().find_class(module, name)


def _unpickle(path: Path, shown: str) -> object:
    with open(path, "rb") as f:
        head = f.read(64)
        f.seek(0)
        if looks_like_html(head):
            raise DataError(f"{shown}: an HTML page, not a CIFAR-10 pickle (a failed download?)")
        try:
            return _ArraysOnly(f, encoding="latin1").load()  # as torchvision reads it, its globals restricted
        except Exception as e:  # noqa: BLE001 -- UnpicklingError, EOFError, ValueError, ...: all mean corrupt
            raise DataError(
                f"{shown}: not a readable CIFAR-10 pickle, truncated or corrupt "
                f"({type(e).__name__}: {one_line(e, 100)})"
            ) from None


def verify_batch(path: Path, shown: str | None = None) -> int:
    """Check one pickled CIFAR-10 batch file; return its number of images.

    Checks: a dict with `data` a uint8 array (n, 3072), n >= 1, and `labels` n ints in 0..9.
    Raises DataError naming the file. (Structure only, no MD5: tiny files in the real format pass too.)
    """
    shown = shown or str(path)
    d = _unpickle(Path(path), shown)
    if not isinstance(d, dict) or "data" not in d or "labels" not in d:
        raise DataError(f"{shown}: not a CIFAR-10 batch (a dict with 'data' and 'labels' expected)")
    data, labels = d["data"], d["labels"]
    if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != ROW_BYTES:
        got = f"{type(data).__name__} {getattr(data, 'dtype', '')} {getattr(data, 'shape', '')}"
        raise DataError(f"{shown}: 'data' must be a uint8 array (n, {ROW_BYTES}), got {one_line(got, 80)}")
    n = data.shape[0]
    lab = np.asarray(labels)
    if n == 0 or lab.shape != (n,) or not np.issubdtype(lab.dtype, np.integer):
        raise DataError(f"{shown}: {n} images but 'labels' is not {n} integers")
    if lab.min() < 0 or lab.max() >= NUM_CLASSES:
        raise DataError(f"{shown}: labels outside 0..{NUM_CLASSES - 1} (min {lab.min()}, max {lab.max()})")
    return n


def verify_meta(path: Path, shown: str | None = None) -> list[str]:
    """Check `batches.meta`: a dict whose `label_names` are 10 strings; return them. Raises DataError."""
    shown = shown or str(path)
    d = _unpickle(Path(path), shown)
    names = d.get("label_names") if isinstance(d, dict) else None
    if not isinstance(names, list) or len(names) != NUM_CLASSES or not all(isinstance(s, str) for s in names):
        raise DataError(f"{shown}: not a CIFAR-10 batches.meta ('label_names', {NUM_CLASSES} strings, expected)")
    return names


def verify_folder(folder: Path, shown: str | None = None, hint: str = "") -> dict[str, int]:
    """Check every file of an extracted `cifar-10-batches-py` folder; return {file: image count}.

    Raises DataError naming the first missing or bad file (`hint`, if given, is appended to a missing file's message).
    """
    folder = Path(folder)
    shown = shown or str(folder)
    counts = {}
    for f in TRAIN_FILES + TEST_FILES + (META_FILE,):
        if not (folder / f).is_file():
            raise DataError(f"{shown}/{f}: missing; the CIFAR-10 folder is incomplete{hint}")
        if f == META_FILE:
            verify_meta(folder / f, f"{shown}/{f}")
        else:
            counts[f] = verify_batch(folder / f, f"{shown}/{f}")
    return counts


def how_to_get(root: Path) -> str:
    """The part of an error message that says how to get CIFAR-10 under `root`."""
    return (
        f"download {URL} and put it at {Path(root) / ARCHIVE} (or extract it, giving {Path(root) / FOLDER}/), "
        f"or let torchvision download it (network), or set APAM_DATA to a folder holding {FOLDER}/"
    )


def _torchvision_download(where: Path) -> str | None:
    try:
        import torchvision.datasets as tvd  # lazy: torchvision only when downloading

        tvd.CIFAR10(str(where), train=False, download=True)
    except Exception as e:  # noqa: BLE001 -- URLError, RuntimeError, OSError, ...: all mean "no download"
        return f"torchvision download failed: {one_line(e, 200)}"
    return None


def extract(archive: Path, scratch: Path) -> None:
    """Extract the CIFAR-10 archive `archive` (a tar file, any compression) into the folder `scratch`, with
    :mod:`tarfile`'s ``data`` filter (PEP 706: no absolute path, no ``..``, no link or device out of the folder) and
    only entries under `cifar-10-batches-py/`, the archive's layout.

    Raises:
        DataError: one line naming the archive and the entry that is not CIFAR-10's (nothing extracted), or the
            archive cannot be read whole (truncated, corrupt, not a tar file).
    """
    try:
        with tarfile.open(archive, "r:*") as tar:
            members = tar.getmembers()
            for m in members:
                if PurePosixPath(m.name).parts[:1] != (FOLDER,) or ".." in PurePosixPath(m.name).parts:
                    raise DataError(f"{archive}: entry {m.name!r} is not under {FOLDER}/; not extracted")
                if not (m.isfile() or m.isdir()):  # a link or a device: CIFAR-10's archive holds files only
                    raise DataError(f"{archive}: entry {m.name!r} is a link or a device, not a file; not extracted")
            tar.extractall(scratch, members=members, filter="data")
    except DataError:
        raise
    except Exception as e:  # noqa: BLE001 -- tarfile.ReadError/FilterError, EOFError, zlib.error, OSError
        raise DataError(
            f"{archive}: not a readable CIFAR-10 archive, truncated or corrupt ({type(e).__name__}: {one_line(e, 100)})"
        ) from None


def stage_cifar10(root: Path, *, download: bool = True) -> Path:
    """Make CIFAR-10 present and valid under `root/cifar-10-batches-py/`; return that folder.

    Sources in order: the folder already there (verified, never overwritten); the archive `root/cifar-10-python.tar.gz`
    (extracted by :func:`extract`); torchvision's download (when `download`). A new folder is
    extracted into a scratch folder under `root`, verified, then renamed into place, so a failure leaves nothing
    behind. Raises DataError (one line, naming the bad file, or saying how to get the data).
    """
    root = Path(root)
    dest = root / FOLDER
    if dest.is_dir():
        verify_folder(dest, hint=f". Get it: {how_to_get(root)}")
        return dest
    with staging_lock(root, ".cifar-10.lock", dest), scratch_dir(root, ".cifar-10-staging-") as scratch:
        if dest.is_dir():  # staged by another process while we waited for the lock
            verify_folder(dest, hint=f". Get it: {how_to_get(root)}")
            return dest
        notes = []
        archive = root / ARCHIVE
        if archive.is_file():
            extract(archive, scratch)
            verify_folder(scratch / FOLDER, f"{archive}:{FOLDER}")
        elif download:
            why = _torchvision_download(scratch)
            if why:
                notes.append(why)
            else:
                verify_folder(scratch / FOLDER, f"torchvision's download:{FOLDER}")
        else:
            notes.append("download disabled")
        if not (scratch / FOLDER).is_dir() or notes:
            raise DataError(
                f"CIFAR-10 not found: no {dest} nor {archive} ({'; '.join(notes)}). Get it: {how_to_get(root)}"
            )
        move_into_place(scratch / FOLDER, dest)
    return dest
