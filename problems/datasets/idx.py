"""MNIST and Fashion-MNIST: IDX file validation and staging into torchvision's layout.

Layout (what `torchvision.datasets.MNIST` / `FashionMNIST(root, download=False)` read): the four decompressed IDX
files `train-images-idx3-ubyte`, `train-labels-idx1-ubyte`, `t10k-images-idx3-ubyte`, `t10k-labels-idx1-ubyte`
under `root/<MNIST|FashionMNIST>/raw/`.

IDX format (LeCun et al., http://yann.lecun.com/exdb/mnist/): big-endian int32 magic number 2051 (unsigned-byte
images, 3 dimensions) or 2049 (unsigned-byte labels, 1 dimension), then one int32 per dimension, then the bytes.
"""

from __future__ import annotations

import gzip
import shutil
import zlib
from dataclasses import dataclass
from pathlib import Path

from .apt import apt_install
from .files import DataError, looks_like_html, move_into_place, one_line, scratch_dir, staging_lock

IMAGES_MAGIC = 2051
LABELS_MAGIC = 2049
IMAGE_SIDE = 28
NUM_CLASSES = 10
SPLITS = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
FILES = tuple(f for pair in SPLITS.values() for f in pair)


@dataclass(frozen=True)
class IdxDataset:
    """Where one IDX dataset lives and how to get it."""

    key: str  # our name, e.g. "fashion_mnist"
    title: str  # for messages, e.g. "Fashion-MNIST"
    folder: str  # torchvision's class name, which is also its folder under root
    debian_dir: Path | None  # Debian's folder of *.gz files, None when Debian has no package
    apt_package: str | None
    source_hint: str  # where the files can be fetched by hand


FASHION_MNIST = IdxDataset(
    key="fashion_mnist",
    title="Fashion-MNIST",
    folder="FashionMNIST",
    debian_dir=Path("/usr/share/datasets/fashion-mnist"),
    apt_package="dataset-fashion-mnist",
    source_hint="http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
)
MNIST = IdxDataset(
    key="mnist",
    title="MNIST",
    folder="MNIST",
    debian_dir=None,
    apt_package=None,
    source_hint="https://ossci-datasets.s3.amazonaws.com/mnist/",
)


def _is_images(name: str) -> bool:
    return "-images-" in name


def validate_idx(path: Path, name: str | None = None, shown: str | None = None) -> int:
    """Check one decompressed IDX file of an MNIST-style dataset; return its number of items.

    `name` is the file's canonical name (it says images or labels; default `path.name`), `shown` how the file is
    named in messages (default `path`). Checks: magic number (2051 images / 2049 labels), images 28x28, at least one
    item, byte length exactly header + items, labels < 10.
    Raises DataError (one line, naming the file) on any failure; reads only the header, and the labels.
    """
    path = Path(path)
    name = name or path.name
    shown = shown or str(path)
    images = _is_images(name)
    magic_want, ndim = (IMAGES_MAGIC, 3) if images else (LABELS_MAGIC, 1)
    header_len = 4 + 4 * ndim
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(64)  # enough for the header and to recognise an HTML page
        magic = int.from_bytes(head[:4], "big") if len(head) >= 4 else None
        if magic != magic_want:
            if looks_like_html(head):
                raise DataError(f"{shown}: an HTML page, not an IDX file (a failed download?)")
            if magic is None:
                raise DataError(f"{shown}: truncated IDX file ({size} bytes)")
            raise DataError(
                f"{shown}: IDX magic number {magic} is not {magic_want} "
                f"({'images' if images else 'labels'}); not a {name} file"
            )
        if len(head) < header_len:
            raise DataError(f"{shown}: truncated IDX header ({size} bytes)")
        dims = [int.from_bytes(head[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim)]
        n = dims[0]
        if images and dims[1:] != [IMAGE_SIDE, IMAGE_SIDE]:
            raise DataError(f"{shown}: images are {dims[1]}x{dims[2]}, expected {IMAGE_SIDE}x{IMAGE_SIDE}")
        if n == 0:
            raise DataError(f"{shown}: holds no items")
        item = dims[1] * dims[2] if images else 1
        want = header_len + n * item
        what = f"{n} images of {dims[1]}x{dims[2]}" if images else f"{n} labels"
        if size < want:
            raise DataError(f"{shown}: truncated, {size} bytes where the header's {what} need {want}")
        if size > want:
            raise DataError(f"{shown}: {size - want} bytes beyond the header's {what} ({want} bytes); corrupt")
        if not images:
            f.seek(header_len)
            top = max(f.read(n))
            if top >= NUM_CLASSES:
                raise DataError(f"{shown}: label {top} out of range 0..{NUM_CLASSES - 1}")
    return n


def decompress_validated(src: Path, dest: Path, name: str) -> int:
    """Decompress gzip file `src` to `dest` (a scratch path), then `validate_idx` it; return its item count.

    Raises DataError naming `src` when the gzip stream is not gzip (e.g. an HTML page), corrupt, or truncated, or
    when its content is not a valid `name` file. `dest` may be left behind on error: callers use a scratch folder.
    """
    try:
        with gzip.open(src, "rb") as fin, open(dest, "wb") as fout:
            shutil.copyfileobj(fin, fout, 1 << 20)
    except gzip.BadGzipFile as e:
        with open(src, "rb") as f:
            head = f.read(64)
        if looks_like_html(head):
            raise DataError(f"{src}: an HTML page, not a gzip file (a failed download?)") from None
        raise DataError(f"{src}: corrupt or not a gzip file ({one_line(e, 120)})") from None
    except EOFError:
        raise DataError(f"{src}: truncated gzip file (the stream ends early)") from None
    except zlib.error as e:
        raise DataError(f"{src}: corrupt gzip data ({one_line(e, 120)})") from None
    return validate_idx(dest, name=name, shown=f"{src} (decompressed)")


def _check_pairs(counts: dict[str, tuple[int, str]]) -> None:
    for images, labels in SPLITS.values():
        (n_img, shown_img), (n_lab, shown_lab) = counts[images], counts[labels]
        if n_img != n_lab:
            raise DataError(f"{shown_img} holds {n_img} images but {shown_lab} holds {n_lab} labels")


def _torchvision_download(ds: IdxDataset, where: Path) -> str | None:
    """`torchvision.datasets.<folder>(where, download=True)`; None on success, else a one-line reason."""
    try:
        import torchvision.datasets as tvd  # lazy: torchvision only when downloading

        getattr(tvd, ds.folder)(str(where), train=True, download=True)
    except Exception as e:  # noqa: BLE001 -- URLError, RuntimeError, OSError, ...: all mean "no download"
        return f"torchvision download failed: {one_line(e, 200)}"
    return None


def how_to_get(ds: IdxDataset, raw: Path) -> str:
    """The part of an error message that says how to get `ds` into `raw`."""
    ways = []
    if ds.apt_package:
        ways.append(f"`apt-get install {ds.apt_package}`")
    ways.append(f"put {', '.join(FILES)} (or their .gz, from {ds.source_hint}) under {raw}")
    ways.append(f"or set APAM_DATA to a folder holding {ds.folder}/raw/")
    return "; ".join(ways)


def stage_idx(
    ds: IdxDataset, root: Path, *, debian_dir: Path | None = None, apt_package: str | None = None, download: bool = True
) -> Path:
    """Make the four IDX files of `ds` present and valid under `root/<folder>/raw/`; return that folder.

    Sources, per missing file, in order: the decompressed file already in `raw/`; its `.gz` in `raw/`; the `.gz` in
    `debian_dir` (after `apt-get install apt_package` when some are absent, see `apt.apt_install`); torchvision's
    download (when `download`). Each file is validated (`validate_idx`; gzip CRC and length), image and label counts
    must agree per split; only then are new files moved into `raw/` (each with `os.replace`), so a failure leaves no
    partial file there. Concurrent callers are serialised by a lock file `root/.<folder>.lock`.
    Raises DataError (one line, naming the bad file, or saying how to get the data when none is found).
    """
    root = Path(root)
    raw = root / ds.folder / "raw"
    if all((raw / f).is_file() for f in FILES):  # fast path: nothing to write, works on a read-only root
        _check_pairs({f: (validate_idx(raw / f), str(raw / f)) for f in FILES})
        return raw
    with staging_lock(root, f".{ds.folder}.lock", raw), scratch_dir(root, f".{ds.folder}-staging-") as scratch:
        found: dict[str, Path] = {}
        counts: dict[str, tuple[int, str]] = {}
        notes: list[str] = []

        def take_gz(f: str, gz: Path) -> None:
            counts[f] = (decompress_validated(gz, scratch / f, f), str(gz))
            found[f] = scratch / f

        for f in FILES:
            if (raw / f).is_file():
                counts[f] = (validate_idx(raw / f), str(raw / f))
                found[f] = raw / f
            elif (raw / f"{f}.gz").is_file():
                take_gz(f, raw / f"{f}.gz")
        missing = [f for f in FILES if f not in found]
        if missing and debian_dir is not None:
            debian_dir = Path(debian_dir)
            if apt_package and not all((debian_dir / f"{f}.gz").is_file() for f in missing):
                why = apt_install(apt_package)
                if why:
                    notes.append(why)
            for f in missing:
                if (debian_dir / f"{f}.gz").is_file():
                    take_gz(f, debian_dir / f"{f}.gz")
            missing = [f for f in FILES if f not in found]
            if missing:
                notes.append(f"{debian_dir} lacks {', '.join(m + '.gz' for m in missing)}")
        if missing and download:
            why = _torchvision_download(ds, scratch / "torchvision")
            if why:
                notes.append(why)
            else:
                got = scratch / "torchvision" / ds.folder / "raw"
                for f in missing:
                    if (got / f).is_file():
                        counts[f] = (validate_idx(got / f, shown=f"{f} downloaded by torchvision"), f)
                        found[f] = got / f
                missing = [f for f in FILES if f not in found]
        elif missing:
            notes.append("download disabled")
        if missing:
            detail = f" ({'; '.join(notes)})" if notes else ""
            lacks = "has none of the four IDX files" if len(missing) == len(FILES) else f"lacks {', '.join(missing)}"
            raise DataError(f"{ds.title} not found: {raw} {lacks}{detail}. Get it: {how_to_get(ds, raw)}")
        _check_pairs(counts)
        raw.mkdir(parents=True, exist_ok=True)
        for f, path in found.items():
            if path != raw / f:
                move_into_place(path, raw / f)
    return raw
