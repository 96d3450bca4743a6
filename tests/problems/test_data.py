"""Data staging and loading (problems/data.py): tiny files in the real on-disk formats, never the network or apt.

Fashion-MNIST / MNIST: IDX files (plain and gzip) written here, staged into torchvision's layout and read back
through torchvision and `load_vision` with exact pixel values; corrupt inputs give a one-line DataError naming the
file and leave nothing behind. CIFAR-10: the real pickled batch format. LIBSVM: scikit-learn's parser on the
awkward cases (label-only lines, comments, blank lines, CRLF) with values checked against hand-written arrays.
"""

from __future__ import annotations

import gzip
import io
import os
import pickle
import re
import stat
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest
import torch
import torchvision.datasets as tvd

from problems import data
from problems.data import DataError, load_libsvm, load_vision, stage_cifar10, stage_fashion_mnist, stage_mnist
from problems.datasets import idx

REPO = Path(__file__).resolve().parents[2]
FILES = idx.FILES
N_TRAIN, N_TEST = 5, 3


# ---------------------------------------------------------------- fixtures and writers


@pytest.fixture(autouse=True)
def no_network_no_apt(monkeypatch):
    """Every test: apt disabled, APAM_DATA unset, torchvision's downloads and urllib fail loudly."""
    monkeypatch.setenv("APAM_NO_APT", "1")
    monkeypatch.delenv("APAM_DATA", raising=False)

    def refuse(*args, **kwargs):
        raise RuntimeError("network access attempted in a test")

    monkeypatch.setattr(tvd.MNIST, "download", refuse)  # FashionMNIST inherits it
    monkeypatch.setattr(tvd.CIFAR10, "download", refuse)
    monkeypatch.setattr("urllib.request.urlopen", refuse)


def idx_images(images: np.ndarray) -> bytes:
    n, h, w = images.shape
    return b"".join(v.to_bytes(4, "big") for v in (2051, n, h, w)) + images.astype(np.uint8).tobytes()


def idx_labels(labels: np.ndarray) -> bytes:
    return (2049).to_bytes(4, "big") + len(labels).to_bytes(4, "big") + labels.astype(np.uint8).tobytes()


def make_idx(seed: int = 0) -> dict[str, tuple[np.ndarray, bytes]]:
    """The four files of a tiny MNIST-style data set: {file name: (array, IDX bytes)}."""
    rng = np.random.default_rng(seed)
    out = {}
    for split, n in (("train", N_TRAIN), ("t10k", N_TEST)):
        img = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        img[0, 0, 0], img[0, 0, 1] = 0, 255  # both ends of the pixel range
        lab = rng.integers(0, 10, n, dtype=np.uint8)
        out[f"{split}-images-idx3-ubyte"] = (img, idx_images(img))
        out[f"{split}-labels-idx1-ubyte"] = (lab, idx_labels(lab))
    return out


def write_idx(folder: Path, files: dict, gz: bool) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, (_, raw) in files.items():
        if gz:
            (folder / f"{name}.gz").write_bytes(gzip.compress(raw))
        else:
            (folder / name).write_bytes(raw)


def stray_files(root: Path) -> list[str]:
    """Everything under root except lock files: what a failed staging must not leave."""
    return sorted(
        str(p.relative_to(root))
        for p in root.rglob("*")
        if not p.name.endswith(".lock") and (p.is_file() or ".staging" in p.name)
    )


def assert_loaded_exactly(v: data.VisionData, files: dict, channels: int = 1) -> None:
    tr_img, tr_lab = files["train-images-idx3-ubyte"][0], files["train-labels-idx1-ubyte"][0]
    te_img, te_lab = files["t10k-images-idx3-ubyte"][0], files["t10k-labels-idx1-ubyte"][0]
    assert v.train_x.dtype == torch.float32 and v.train_y.dtype == torch.int64
    assert v.train_x.shape == (N_TRAIN, channels, 28, 28) and v.test_x.shape == (N_TEST, channels, 28, 28)
    assert torch.equal(v.train_x[:, 0] * 255, torch.from_numpy(tr_img).float())
    assert torch.equal(v.test_x[:, 0] * 255, torch.from_numpy(te_img).float())
    assert v.train_x.min() == 0.0 and v.train_x.max() == 1.0
    assert v.train_y.tolist() == tr_lab.tolist() and v.test_y.tolist() == te_lab.tolist()


# ---------------------------------------------------------------- data_root


def test_data_root_env_and_default(monkeypatch, tmp_path):
    assert data.data_root() == REPO / "data"
    monkeypatch.setenv("APAM_DATA", str(tmp_path / "elsewhere"))
    assert data.data_root() == tmp_path / "elsewhere"
    monkeypatch.setenv("APAM_DATA", "")
    assert data.data_root() == REPO / "data"


# ---------------------------------------------------------------- Fashion-MNIST / MNIST staging


def test_stage_from_debian_gz_and_load_exact(tmp_path):
    files = make_idx()
    deb, root = tmp_path / "deb", tmp_path / "root"
    write_idx(deb, files, gz=True)
    raw = stage_fashion_mnist(root, debian_dir=deb, download=False)
    assert raw == root / "FashionMNIST" / "raw"
    for name, (_, content) in files.items():
        assert (raw / name).read_bytes() == content  # decompressed in torchvision's layout
    assert stray_files(root) == sorted(f"FashionMNIST/raw/{f}" for f in FILES)
    ds = tvd.FashionMNIST(str(root), train=True, download=False)  # torchvision reads them as they are
    assert torch.equal(ds.data, torch.from_numpy(files["train-images-idx3-ubyte"][0]))
    assert ds.targets.tolist() == files["train-labels-idx1-ubyte"][0].tolist()
    v = load_vision("fashion_mnist", root)  # already staged: debian not needed
    assert_loaded_exactly(v, files)
    assert v.name == "fashion_mnist" and v.classes[0] == "T-shirt/top" and len(v.classes) == 10


def test_stage_uses_plain_files_in_place(tmp_path):
    files = make_idx(1)
    raw = tmp_path / "FashionMNIST" / "raw"
    write_idx(raw, files, gz=False)
    before = {f: (raw / f).stat().st_mtime_ns for f in FILES}
    assert stage_fashion_mnist(tmp_path, debian_dir=None, download=False) == raw
    assert {f: (raw / f).stat().st_mtime_ns for f in FILES} == before  # valid files are left alone
    assert_loaded_exactly(load_vision("fashion_mnist", tmp_path, download=False), files)


def test_load_vision_reuses_the_read_until_a_file_changes(tmp_path):
    """A sweep's jobs share one read of the data set in their process; a rewritten file is read again."""
    files = make_idx(5)
    raw = tmp_path / "FashionMNIST" / "raw"
    write_idx(raw, files, gz=False)
    first = load_vision("fashion_mnist", tmp_path, download=False)
    assert load_vision("fashion_mnist", tmp_path, download=False) is first  # no second read
    other = make_idx(6)
    write_idx(raw, other, gz=False)  # same sizes; new content and modification times
    os.utime(raw / FILES[0], ns=(1, 1))  # even with a clock too coarse to tell the writes apart
    again = load_vision("fashion_mnist", tmp_path, download=False)
    assert again is not first
    assert_loaded_exactly(again, other)
    assert_loaded_exactly(first, files)  # the earlier read is left as it was


def test_problems_built_from_the_kept_read_leave_it_unchanged(tmp_path):
    """Problems built one after another from the one kept read (row norms, standardisation, class filters, training
    steps) never write into its tensors: the next job sees the files' exact values."""
    from problems import build_problem

    files = make_idx(7)
    files["train-labels-idx1-ubyte"] = (lab := np.array([0, 6, 0, 6, 1], dtype=np.uint8), idx_labels(lab))
    files["t10k-labels-idx1-ubyte"] = (lab := np.array([6, 0, 2], dtype=np.uint8), idx_labels(lab))
    write_idx(tmp_path / "FashionMNIST" / "raw", files, gz=False)
    kept = load_vision("fashion_mnist", tmp_path, download=False)
    logreg = build_problem(
        {"kind": "logreg", "dataset": "fashion_mnist", "classes": [0, 6], "row_norm": "unit"}, tmp_path
    )
    cnn = build_problem({"kind": "cnn", "model": "lenet5", "dataset": "fashion_mnist", "standardize": True}, tmp_path)
    for problem in (logreg, cnn):
        x = problem.init_params(0)
        problem.loss_grad(x, torch.arange(2))
        problem.evaluate(x)
    assert load_vision("fashion_mnist", tmp_path, download=False) is kept
    assert_loaded_exactly(kept, files)


def test_stage_decompresses_gz_beside_and_mixes_sources(tmp_path):
    files = make_idx(2)
    raw, deb = tmp_path / "FashionMNIST" / "raw", tmp_path / "deb"
    write_idx(raw, {k: files[k] for k in FILES[:2]}, gz=True)  # train: .gz in raw
    write_idx(deb, {k: files[k] for k in FILES[2:]}, gz=True)  # test: from the debian folder
    stage_fashion_mnist(tmp_path, debian_dir=deb, download=False)
    for name, (_, content) in files.items():
        assert (raw / name).read_bytes() == content


def test_mnist_loads_through_torchvision_layout(tmp_path):
    files = make_idx(3)
    write_idx(tmp_path / "MNIST" / "raw", files, gz=True)
    assert stage_mnist(tmp_path, download=False) == tmp_path / "MNIST" / "raw"
    v = load_vision("mnist", tmp_path, download=False)
    assert_loaded_exactly(v, files)
    assert v.classes[3] == "3 - three"


def test_apam_data_respected(monkeypatch, tmp_path):
    files = make_idx(4)
    write_idx(tmp_path / "deb", files, gz=True)
    monkeypatch.setenv("APAM_DATA", str(tmp_path / "env_root"))
    raw = stage_fashion_mnist(debian_dir=tmp_path / "deb", download=False)
    assert raw == tmp_path / "env_root" / "FashionMNIST" / "raw"
    assert_loaded_exactly(load_vision("fashion_mnist", download=False), files)


def _corrupt_gzip(content: bytes) -> bytes:
    z = bytearray(gzip.compress(content))
    mid = len(z) // 2
    z[mid : mid + 16] = bytes(b ^ 0xFF for b in z[mid : mid + 16])
    return bytes(z)


HTML = b"<!DOCTYPE html>\n<html><head><title>404 Not Found</title></head><body>Not Found</body></html>\n"
BAD_SOURCES = {
    # case: (file name written in the debian folder, bytes-from-good-content, words expected in the message)
    "corrupt_gzip": ("train-images-idx3-ubyte.gz", _corrupt_gzip, ("corrupt",)),
    "truncated_gzip": ("train-images-idx3-ubyte.gz", lambda c: gzip.compress(c)[:-500], ("truncated",)),
    "html_as_gz": ("t10k-labels-idx1-ubyte.gz", lambda c: HTML, ("HTML",)),
    "truncated_idx": ("train-images-idx3-ubyte.gz", lambda c: gzip.compress(c[:-28]), ("truncated",)),
    "extra_bytes_idx": ("t10k-images-idx3-ubyte.gz", lambda c: gzip.compress(c + b"\0" * 10), ("beyond",)),
    "wrong_magic": ("train-labels-idx1-ubyte.gz", lambda c: gzip.compress(b"\0\0\x08\x03" + c[4:]), ("magic",)),
    "label_range": ("train-labels-idx1-ubyte.gz", lambda c: gzip.compress(c[:-1] + b"\x0a"), ("label 10",)),
    "html_in_gz": ("train-images-idx3-ubyte.gz", lambda c: gzip.compress(HTML), ("HTML",)),
}


@pytest.mark.parametrize("case", sorted(BAD_SOURCES))
def test_bad_debian_file_raises_naming_it_and_leaves_nothing(tmp_path, case):
    name, spoil, words = BAD_SOURCES[case]
    files = make_idx(5)
    deb, root = tmp_path / "deb", tmp_path / "root"
    write_idx(deb, files, gz=True)
    (deb / name).write_bytes(spoil(files[name.removesuffix(".gz")][1]))
    with pytest.raises(DataError) as e:
        stage_fashion_mnist(root, debian_dir=deb, download=False)
    msg = str(e.value)
    assert isinstance(e.value, ValueError) and "\n" not in msg
    assert str(deb / name) in msg and all(w in msg for w in words), msg
    assert stray_files(root) == []  # the three good files were not moved in either


def test_bad_file_in_destination_is_named_not_replaced(tmp_path):
    files = make_idx(6)
    raw = tmp_path / "FashionMNIST" / "raw"
    write_idx(raw, files, gz=False)
    (raw / "train-images-idx3-ubyte").write_bytes(HTML)
    write_idx(tmp_path / "deb", files, gz=True)
    with pytest.raises(DataError, match="HTML page") as e:
        stage_fashion_mnist(tmp_path, debian_dir=tmp_path / "deb", download=False)
    assert str(raw / "train-images-idx3-ubyte") in str(e.value)
    assert (raw / "train-images-idx3-ubyte").read_bytes() == HTML


def test_image_label_count_mismatch(tmp_path):
    files = make_idx(7)
    lab = files["train-labels-idx1-ubyte"][0][:-1]
    files["train-labels-idx1-ubyte"] = (lab, idx_labels(lab))
    write_idx(tmp_path / "deb", files, gz=True)
    with pytest.raises(DataError, match=f"holds {N_TRAIN} images but .* holds {N_TRAIN - 1} labels"):
        stage_fashion_mnist(tmp_path / "root", debian_dir=tmp_path / "deb", download=False)
    assert stray_files(tmp_path / "root") == []


def test_nothing_found_says_how_to_get_it(tmp_path):
    with pytest.raises(DataError) as e:
        stage_fashion_mnist(tmp_path, debian_dir=tmp_path / "no_debian", download=False)
    msg = str(e.value)
    assert "\n" not in msg and "apt-get install dataset-fashion-mnist" in msg and "APAM_DATA" in msg
    assert str(tmp_path / "FashionMNIST" / "raw") in msg and "APAM_NO_APT" in msg
    assert stray_files(tmp_path) == [] and list(tmp_path.iterdir()) == []  # no lock file left either
    with pytest.raises(DataError):  # a data folder that did not exist is not left behind
        stage_fashion_mnist(tmp_path / "new" / "data", debian_dir=tmp_path / "no_debian", download=False)
    assert not (tmp_path / "new").exists()
    files = make_idx(0)
    write_idx(tmp_path / "deb", {k: files[k] for k in FILES[:3]}, gz=True)
    with pytest.raises(DataError, match="raw lacks t10k-labels-idx1-ubyte .*deb lacks t10k-labels-idx1-ubyte.gz"):
        stage_fashion_mnist(tmp_path, debian_dir=tmp_path / "deb", download=False)
    assert stray_files(tmp_path) == sorted(f"deb/{f}.gz" for f in FILES[:3])  # the three good ones not moved in


def test_torchvision_download_path_is_validated_and_moved_in(tmp_path, monkeypatch):
    files = make_idx(8)
    calls = []

    def fake_download(self):  # what torchvision's download leaves: .gz files and their decompressed copies
        calls.append(self.raw_folder)
        write_idx(Path(self.raw_folder), files, gz=True)
        write_idx(Path(self.raw_folder), files, gz=False)

    monkeypatch.setattr(tvd.MNIST, "download", fake_download)
    raw = stage_fashion_mnist(tmp_path, debian_dir=None)
    assert len(calls) == 1 and str(tmp_path) in calls[0] and calls[0] != str(raw)  # downloaded to a scratch folder
    assert stray_files(tmp_path) == sorted(f"FashionMNIST/raw/{f}" for f in FILES)
    assert_loaded_exactly(load_vision("fashion_mnist", tmp_path), files)


def test_torchvision_download_of_html_page_rejected(tmp_path, monkeypatch):
    files = make_idx(9)

    def fake_download(self):
        write_idx(Path(self.raw_folder), files, gz=False)
        (Path(self.raw_folder) / "t10k-images-idx3-ubyte").write_bytes(HTML)

    monkeypatch.setattr(tvd.MNIST, "download", fake_download)
    with pytest.raises(DataError, match="t10k-images-idx3-ubyte downloaded by torchvision: an HTML page"):
        stage_mnist(tmp_path)
    assert stray_files(tmp_path) == []


def test_failed_download_reported(tmp_path):
    with pytest.raises(DataError, match="torchvision download failed: network access attempted in a test"):
        stage_mnist(tmp_path)
    assert stray_files(tmp_path) == []


FAKE_APT = """#!/bin/sh
# a stand-in for apt-get: install fails until update has run, then "installs" the .gz files
echo "$@" >> "$FAKE_APT_LOG"
case "$1" in
  update) touch "$FAKE_APT_LOG.updated"; echo "Reading package lists..."; exit "${FAKE_APT_UPDATE_RC:-0}" ;;
  install)
    if [ -e "$FAKE_APT_LOG.updated" ]; then
      mkdir -p "$FAKE_APT_DEST" && cp "$FAKE_APT_SRC"/*.gz "$FAKE_APT_DEST"/; exit 0
    fi
    echo "E: Unable to locate package dataset-fashion-mnist"; exit 100 ;;
esac
exit 1
"""


@pytest.mark.parametrize("update_rc", [0, 100])
def test_apt_install_then_update_retry(tmp_path, monkeypatch, update_rc):
    files = make_idx(10)
    write_idx(tmp_path / "pkg", files, gz=True)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "apt-get").write_text(FAKE_APT)
    (bindir / "apt-get").chmod(stat.S_IRWXU)
    log = tmp_path / "apt.log"
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_APT_LOG", str(log))
    monkeypatch.setenv("FAKE_APT_SRC", str(tmp_path / "pkg"))
    monkeypatch.setenv("FAKE_APT_DEST", str(tmp_path / "usr_share"))
    monkeypatch.setenv("FAKE_APT_UPDATE_RC", str(update_rc))
    monkeypatch.delenv("APAM_NO_APT")
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    kw = dict(debian_dir=tmp_path / "usr_share", apt_package="dataset-fashion-mnist", download=False)
    if update_rc == 0:
        stage_fashion_mnist(tmp_path / "root", **kw)
        assert_loaded_exactly(load_vision("fashion_mnist", tmp_path / "root", download=False), files)
        cmds = [ln.split()[0] for ln in log.read_text().splitlines()]
        assert cmds == ["install", "update", "install"]
    else:
        with pytest.raises(DataError, match="E: Unable to locate package .*`apt-get update` failed"):
            stage_fashion_mnist(tmp_path / "root", **kw)
        assert stray_files(tmp_path / "root") == []


# ---------------------------------------------------------------- CIFAR-10


def write_cifar(folder: Path, n_train: int = 2, n_test: int = 3, seed: int = 0) -> dict:
    """CIFAR-10's python version in its real format: pickled dicts (protocol 2), 3072-byte rows, R, G, B planes."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    names = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
    for name in names:
        n = n_test if name == "test_batch" else n_train
        rows = rng.integers(0, 256, (n, 3072), dtype=np.uint8)
        labels = [int(v) for v in rng.integers(0, 10, n)]
        batch = {
            "batch_label": f"{name} of 6",
            "labels": labels,
            "data": rows,
            "filenames": [f"img_{name}_{i}.png" for i in range(n)],
        }
        (folder / name).write_bytes(pickle.dumps(batch, protocol=2))
        out[name] = (rows, labels)
    classes = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
    meta = {"num_cases_per_batch": 10000, "label_names": classes, "num_vis": 3072}
    (folder / "batches.meta").write_bytes(pickle.dumps(meta, protocol=2))
    return out


def test_cifar10_loads_exact_pixels(tmp_path):
    batches = write_cifar(tmp_path / "cifar-10-batches-py")
    assert stage_cifar10(tmp_path, download=False) == tmp_path / "cifar-10-batches-py"
    v = load_vision("cifar10", tmp_path, download=False)
    assert v.train_x.shape == (10, 3, 32, 32) and v.test_x.shape == (3, 3, 32, 32)
    assert v.train_x.dtype == torch.float32 and v.train_y.dtype == torch.int64
    rows = np.concatenate([batches[f"data_batch_{i}"][0] for i in range(1, 6)])
    # row layout: 1024 red, 1024 green, 1024 blue, each 32x32 row-major -> pixel (c, h, w) = row[c*1024 + h*32 + w]
    assert torch.equal(v.train_x * 255, torch.from_numpy(rows.reshape(10, 3, 32, 32)).float())
    assert v.train_x[4, 1, 2, 3] * 255 == float(rows[4, 1 * 1024 + 2 * 32 + 3])
    assert torch.equal(v.test_x * 255, torch.from_numpy(batches["test_batch"][0].reshape(3, 3, 32, 32)).float())
    assert v.train_y.tolist() == sum((batches[f"data_batch_{i}"][1] for i in range(1, 6)), [])
    assert v.test_y.tolist() == batches["test_batch"][1]
    assert v.classes[0] == "airplane" and len(v.classes) == 10


@pytest.mark.parametrize("case", ["truncated", "html", "missing", "bad_labels"])
def test_cifar10_bad_batch_named(tmp_path, case):
    folder = tmp_path / "cifar-10-batches-py"
    write_cifar(folder)
    target = folder / "data_batch_3"
    if case == "truncated":
        target.write_bytes(target.read_bytes()[:-100])
    elif case == "html":
        target.write_bytes(HTML)
    elif case == "missing":
        target.unlink()
    else:
        d = pickle.loads(target.read_bytes(), encoding="latin1")
        d["labels"][0] = 10
        target.write_bytes(pickle.dumps(d, protocol=2))
    with pytest.raises(DataError) as e:
        load_vision("cifar10", tmp_path, download=False)
    assert str(target) in str(e.value) and "\n" not in str(e.value)


def test_cifar10_from_archive_and_corrupt_archive(tmp_path):
    src = tmp_path / "src"
    batches = write_cifar(src / "cifar-10-batches-py", seed=1)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(src / "cifar-10-batches-py", arcname="cifar-10-batches-py")
    good = buf.getvalue()
    root = tmp_path / "root"
    root.mkdir()
    (root / "cifar-10-python.tar.gz").write_bytes(good[: len(good) // 2])
    with pytest.raises(DataError, match="cifar-10-python.tar.gz: not a readable CIFAR-10 archive"):
        stage_cifar10(root, download=False)
    assert stray_files(root) == ["cifar-10-python.tar.gz"]
    (root / "cifar-10-python.tar.gz").write_bytes(good)
    assert stage_cifar10(root, download=False) == root / "cifar-10-batches-py"
    v = load_vision("cifar10", root, download=False)
    assert v.test_y.tolist() == batches["test_batch"][1]


@pytest.mark.parametrize(
    "entry", ["../../escaped.txt", "/tmp/absolute.txt", "cifar-10-batches-py/../../up.txt", "cifar-10-batches-py/ln"]
)
def test_a_cifar10_archive_entry_outside_its_folder_is_refused_and_nothing_is_written(tmp_path, entry):
    src = tmp_path / "src"
    write_cifar(src / "cifar-10-batches-py")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(src / "cifar-10-batches-py", arcname="cifar-10-batches-py")
        info = tarfile.TarInfo(entry)
        if entry.endswith("/ln"):  # a link out of the folder: "a link or a device" (it read "truncated or corrupt")
            info.type, info.linkname = tarfile.SYMTYPE, "../../../escaped.txt"
            tar.addfile(info)
        else:
            info.size = 3
            tar.addfile(info, io.BytesIO(b"bad"))
    root = tmp_path / "a" / "b" / "root"
    root.mkdir(parents=True)
    (root / "cifar-10-python.tar.gz").write_bytes(buf.getvalue())
    with pytest.raises(DataError, match=f"cifar-10-python.tar.gz: entry '{re.escape(entry)}' is (not|a link)"):
        stage_cifar10(root, download=False)
    assert stray_files(root) == ["cifar-10-python.tar.gz"]
    assert sorted(p.name for p in tmp_path.rglob("*.txt")) == []


class _Payload:
    """What a hostile pickle carries: loading it would call os.system."""

    def __reduce__(self):
        import os

        return (os.system, ("touch pwned",))


def test_a_cifar10_pickle_naming_a_function_is_refused_before_it_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "cifar-10-batches-py"
    write_cifar(folder)
    target = folder / "data_batch_2"
    d = pickle.loads(target.read_bytes(), encoding="latin1")
    d["labels"] = _Payload()
    target.write_bytes(pickle.dumps(d, protocol=2))
    with pytest.raises(DataError, match=r"data_batch_2: not a readable CIFAR-10 pickle.*names posix.system"):
        load_vision("cifar10", tmp_path, download=False)
    assert not (tmp_path / "pwned").exists()


def test_cifar10_missing_says_how_to_get_it(tmp_path):
    with pytest.raises(DataError, match="cifar-10-python.tar.gz.*APAM_DATA"):
        load_vision("cifar10", tmp_path)  # the (refused) download is reported too
    assert stray_files(tmp_path) == [] and list(tmp_path.iterdir()) == []  # no lock file left either


def test_unknown_dataset_name():
    with pytest.raises(ValueError, match="unknown data set 'imagenet'"):
        load_vision("imagenet", Path("/nonexistent"))


# ---------------------------------------------------------------- command line


def test_cli_stages_and_reports(tmp_path, capsys):
    files = make_idx(11)
    write_idx(tmp_path / "FashionMNIST" / "raw", files, gz=False)
    (tmp_path / "FashionMNIST" / "raw" / "train-labels-idx1-ubyte").write_bytes(HTML)
    assert data.main(["fashion_mnist", "--root", str(tmp_path), "--no-download"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "train-labels-idx1-ubyte: an HTML page" in err and err.count("\n") == 1
    write_idx(tmp_path / "MNIST" / "raw", files, gz=True)
    assert data.main(["--dataset", "mnist", "--root", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip() == f"mnist: {tmp_path / 'MNIST' / 'raw'}"


def test_cli_module_entry_point(tmp_path):
    """`python -m problems.data` (what `make data` runs): exit 2 and one line on stderr for a bad file."""
    write_idx(tmp_path / "FashionMNIST" / "raw", make_idx(12), gz=False)
    (tmp_path / "FashionMNIST" / "raw" / "t10k-labels-idx1-ubyte").write_bytes(b"\0\0\x08\x01\0\0\0\x05ab")
    env = {**os.environ, "APAM_NO_APT": "1", "APAM_DATA": str(tmp_path)}
    r = subprocess.run(
        [sys.executable, "-m", "problems.data", "fashion_mnist", "--no-download"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2 and r.stdout == "" and r.stderr.count("\n") == 1, r.stderr
    assert f"{tmp_path / 'FashionMNIST' / 'raw' / 't10k-labels-idx1-ubyte'}: truncated" in r.stderr


# ---------------------------------------------------------------- LIBSVM


def write(path: Path, text: str, newline: str = "\n") -> Path:
    path.write_bytes(text.replace("\n", newline).encode())
    return path


AWKWARD = """# a comment line
+1 1:0.5 3:2.0
-1

-1 2:1.5 # trailing comment
   \n+1 3:-1e-1
"""
AWKWARD_X = np.array([[0.5, 0, 2.0], [0, 0, 0], [0, 1.5, 0], [0, 0, -0.1]], dtype=np.float32)


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_libsvm_awkward_lines(tmp_path, newline):
    d = load_libsvm(write(tmp_path / "a.svm", AWKWARD, newline))
    assert d.train_x.format == "csr" and d.train_x.dtype == np.float32
    np.testing.assert_array_equal(d.train_x.toarray(), AWKWARD_X)
    assert d.train_y.dtype == np.int64 and d.train_y.tolist() == [1, 0, 0, 1]
    assert d.label_values == (-1, 1) and d.n_features == 3
    assert d.has_test is False and d.test_x is d.train_x and d.test_y is d.train_y and d.test_path is None


def test_libsvm_train_test_width_agree(tmp_path):
    tr = write(tmp_path / "tr", "1 1:1 2:2\n2 3:3\n")
    te = write(tmp_path / "te", "2 5:5\n1 1:1\n")
    d = load_libsvm(tr, test_path=te)
    assert d.has_test and d.train_x.shape == (2, 5) and d.test_x.shape == (2, 5) and d.n_features == 5
    np.testing.assert_array_equal(d.test_x.toarray(), [[0, 0, 0, 0, 5], [1, 0, 0, 0, 0]])
    assert d.label_values == (1, 2) and d.train_y.tolist() == [0, 1] and d.test_y.tolist() == [1, 0]
    d = load_libsvm(tr, n_features=7, test_path=te)
    assert d.train_x.shape == (2, 7) and d.test_x.shape == (2, 7)
    d = load_libsvm(tr, zero_based=True, test_path=te)  # indices taken as 0-based: one column more
    assert d.train_x.shape == (2, 6) and d.train_x[0, 1] == 1.0


def test_libsvm_parse_is_cached_until_a_file_changes(tmp_path, monkeypatch):
    """With cache_dir, the second load reads the parse from cache_dir/libsvm/ (sklearn not called) and gives the same
    data; an edited file, other parse arguments or a corrupt cache file are parsed again."""
    import sklearn.datasets

    calls = []
    real = sklearn.datasets.load_svmlight_files
    monkeypatch.setattr(sklearn.datasets, "load_svmlight_files", lambda *a, **k: calls.append(1) or real(*a, **k))
    tr = write(tmp_path / "tr", "1 1:1 2:2\n2 3:3\n")
    te = write(tmp_path / "te", "2 5:5\n1 1:1\n")
    cache = tmp_path / "cache"
    first = load_libsvm(tr, test_path=te, cache_dir=cache)
    again = load_libsvm(tr, test_path=te, cache_dir=cache)
    assert len(calls) == 1 and len(list((cache / "libsvm").glob("*.npz"))) == 1
    for a, b in ((first.train_x, again.train_x), (first.test_x, again.test_x)):
        assert b.format == "csr" and b.dtype == np.float32 and b.shape == a.shape
        np.testing.assert_array_equal(a.toarray(), b.toarray())
    assert again.train_y.tolist() == [0, 1] and again.test_y.tolist() == [1, 0] and again.label_values == (1, 2)
    load_libsvm(tr, n_features=7, test_path=te, cache_dir=cache)  # other arguments: their own parse
    assert len(calls) == 2
    os.utime(te, ns=(0, 0))  # a new time, the same bytes: the parse kept
    load_libsvm(tr, test_path=te, cache_dir=cache)
    assert len(calls) == 2
    te.write_text("2 5:6\n1 1:1\n")  # other bytes of the same size, the old time kept: parsed again (was the old)
    os.utime(te, ns=(0, 0))
    assert load_libsvm(tr, test_path=te, cache_dir=cache).test_x[0, 4] == 6.0
    assert len(calls) == 3 and not list((cache / "libsvm").glob(".*"))  # no temporary file left
    for f in (cache / "libsvm").glob("*.npz"):
        f.write_bytes(b"not an npz")
    assert load_libsvm(tr, test_path=te, cache_dir=cache).test_y.tolist() == [1, 0] and len(calls) == 4


@pytest.mark.parametrize(
    "text,why",
    [("1 1:1\n1 2:2\n", "label 1"), ("1\n-1\n", "no nonzero feature"), ("1 1:1\n-1 2:nan\n", "non-finite")],
)
def test_a_refused_libsvm_file_leaves_no_cache(tmp_path, text, why):
    """Data refused as degenerate (one class, labels only, a non-finite value) leaves nothing in the cache folder:
    only a parse that passed every check is kept."""
    cache = tmp_path / "cache"
    with pytest.raises(DataError, match=why):
        load_libsvm(write(tmp_path / "bad.svm", text), cache_dir=cache)
    assert not cache.exists()


def test_libsvm_zero_one_labels_and_gz(tmp_path):
    path = tmp_path / "z.svm.gz"
    path.write_bytes(gzip.compress(b"0 1:1\n1 2:1\n1 1:3\n"))
    d = load_libsvm(path)
    assert d.label_values == (0, 1) and d.train_y.tolist() == [0, 1, 1]
    assert d.train_x.toarray().tolist() == [[1, 0], [0, 1], [3, 0]]


def test_libsvm_bad_labels(tmp_path):
    with pytest.raises(DataError, match=r"m\.svm: labels \[1\.0, 2\.0, 3\.0\] are not binary"):
        load_libsvm(write(tmp_path / "m.svm", "1 1:1\n2 1:1\n3 1:1\n"))
    with pytest.raises(DataError, match=r"h\.svm: non-integer labels"):
        load_libsvm(write(tmp_path / "h.svm", "0.5 1:1\n1 1:1\n"))
    for label in ("inf", "1e400", "nan"):  # int() of each raised; one line naming the file instead
        with pytest.raises(DataError, match=r"i\.svm: non-finite labels \[(inf|nan)\]"):
            load_libsvm(write(tmp_path / "i.svm", f"-1 1:1\n{label} 2:1\n1 1:1\n"))
    tr = write(tmp_path / "ok.svm", "-1 1:1\n1 2:1\n")
    with pytest.raises(DataError, match=r"ok\.svm and .*te_inf: non-finite labels"):
        load_libsvm(tr, test_path=write(tmp_path / "te_inf", "inf 1:1\n1 1:1\n"))
    tr = write(tmp_path / "tr", "-1 1:1\n1 1:1\n")
    with pytest.raises(DataError, match=r"te: labels \[0\.0, 1\.0\] do not match the training file's"):
        load_libsvm(tr, test_path=write(tmp_path / "te", "0 1:1\n1 1:1\n"))


def test_libsvm_missing_and_unparsable(tmp_path):
    with pytest.raises(DataError, match=f"{tmp_path / 'nope.svm'}: no such LIBSVM file"):
        load_libsvm(tmp_path / "nope.svm")
    tr = write(tmp_path / "tr", "1 1:1\n")
    with pytest.raises(DataError, match="no_test: no such LIBSVM file"):
        load_libsvm(tr, test_path=tmp_path / "no_test")
    bad = write(tmp_path / "bad.svm", "# ok\n1 1:1\n-1 2:x\n1 3:1\n")
    with pytest.raises(DataError, match=f"{bad}:3: not a valid LIBSVM file .*could not convert") as e:
        load_libsvm(bad)
    assert "\n" not in str(e.value)
    html = tmp_path / "page.svm"
    html.write_bytes(HTML)
    with pytest.raises(DataError, match=f"{html}:1: not a valid LIBSVM file"):
        load_libsvm(html)
    with pytest.raises(DataError, match=f"{tmp_path / 'zb.svm'}:2: .*Invalid index 0"):
        load_libsvm(write(tmp_path / "zb.svm", "1 1:1\n-1 0:1\n"), zero_based=False)
    with pytest.raises(DataError, match=r"wide\.svm:2: .*n_features"):
        load_libsvm(write(tmp_path / "wide.svm", "1 1:1\n-1 9:1\n"), n_features=4)
    with pytest.raises(DataError, match="empty.svm: no examples"):
        load_libsvm(write(tmp_path / "empty.svm", "# nothing\n\n"))


# --- an OSError while staging is a one-line DataError naming the path ------------------------------


def test_data_root_that_is_a_file_is_a_data_error(tmp_path):
    from problems.data import DataError, stage

    root = tmp_path / "afile"
    root.write_text("x")
    with pytest.raises(DataError) as info:
        stage("fashion_mnist", root, download=False)
    assert str(root) in str(info.value) and "\n" not in str(info.value)


def test_a_folder_where_an_idx_file_should_be_is_a_data_error(tmp_path):
    from problems.data import DataError, stage

    raw = tmp_path / "FashionMNIST" / "raw"
    (raw / "train-images-idx3-ubyte").mkdir(parents=True)
    with pytest.raises(DataError) as info:
        stage("fashion_mnist", tmp_path, download=False)
    assert str(tmp_path) in str(info.value) and "\n" not in str(info.value)


def test_non_finite_libsvm_value_names_the_file(tmp_path):
    from problems.data import DataError, load_libsvm

    f = tmp_path / "x.svm"
    f.write_text("1 1:0.5 2:0.25\n-1 1:inf\n")
    with pytest.raises(DataError) as info:
        load_libsvm(f)
    assert str(info.value).startswith(f"{f}: 1 non-finite") and "example 2" in str(info.value)


# --- degenerate data is refused with the reason: one line naming the file -------------------------------------------


def test_single_class_libsvm_file_is_refused(tmp_path):
    one = write(tmp_path / "one.svm", "1 1:0.5\n1 2:0.25\n1 1:1\n")
    with pytest.raises(DataError) as info:
        load_libsvm(one)
    assert str(info.value) == (
        f"{one}: every example has label 1; a binary problem needs training examples of both classes"
    )
    # a test file of one class is a fair test set
    d = load_libsvm(write(tmp_path / "tr.svm", "1 1:1\n-1 2:1\n"), test_path=write(tmp_path / "te.svm", "-1 1:1\n"))
    assert d.test_y.tolist() == [0]


def test_labels_only_libsvm_file_is_refused(tmp_path):
    labels = write(tmp_path / "labels.svm", "1\n-1\n1\n")
    with pytest.raises(DataError, match=rf"^{labels}: no nonzero feature value in any example \(labels only\)"):
        load_libsvm(labels)


def test_a_huge_feature_index_is_refused_at_once_before_anything_dense(tmp_path, monkeypatch):
    import time

    from problems.datasets import libsvm

    big = write(tmp_path / "big.svm", "1 1:0.5 2000000000:1\n-1 1:0.1\n")
    monkeypatch.setattr(np, "zeros", lambda *a, **k: pytest.fail("nothing dense before the check"))
    t0 = time.monotonic()
    with pytest.raises(DataError) as info:
        load_libsvm(big)
    assert time.monotonic() - t0 < 30
    msg = str(info.value)
    assert msg.startswith(f"{big}: 2,000,000,000 features (the largest feature index) would need about 119 GiB")
    assert "\n" not in msg
    monkeypatch.undo()
    # the limit: DENSE_VECTORS float64 vectors of the width plus the data, within MEMORY_FRACTION of the memory
    memory = 2 * libsvm.DENSE_VECTORS * 8 * 1000
    libsvm.check_fits("f", 1000, 0, memory=memory)
    with pytest.raises(DataError, match=r"^f: 1,000 features"):
        libsvm.check_fits("f", 1000, 1, memory=memory)
    with pytest.raises(DataError, match=r"^g: 10 features .* more than 0.5 of this machine's"):
        libsvm.check_fits("g", 10, memory - 10 * 8 * libsvm.DENSE_VECTORS, memory=memory)
    # a given width is checked before the parse
    monkeypatch.setattr(libsvm, "_parse", lambda *a: pytest.fail("checked before parsing"))
    with pytest.raises(DataError, match="4,000,000,000 features"):
        load_libsvm(write(tmp_path / "ok.svm", "1 1:1\n-1 2:1\n"), n_features=4_000_000_000)


def test_an_unreadable_or_special_libsvm_path_is_refused(tmp_path, monkeypatch):
    from problems.datasets import libsvm

    fifo = tmp_path / "pipe.svm"
    os.mkfifo(fifo)
    with pytest.raises(DataError, match=rf"^{fifo}: a named pipe, not a LIBSVM file"):
        load_libsvm(fifo)
    with pytest.raises(DataError, match=rf"^{tmp_path}: a folder, not a LIBSVM file"):
        load_libsvm(tmp_path)
    f = write(tmp_path / "f.svm", "1 1:1\n-1 2:1\n")
    monkeypatch.setattr(libsvm.os, "access", lambda p, mode: False)  # as for chmod 000 (root reads anyway)
    with pytest.raises(DataError, match=rf"^{f}: cannot read this LIBSVM file \(permission denied\)$"):
        load_libsvm(f)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file whatever its mode")
def test_a_libsvm_file_without_read_permission_is_refused(tmp_path):
    f = write(tmp_path / "f.svm", "1 1:1\n-1 2:1\n")
    f.chmod(0)
    with pytest.raises(DataError, match="permission denied"):
        load_libsvm(f)


def test_a_libsvm_value_beyond_float32_says_so(tmp_path):
    """1e39 is finite in the file but not as a float32 feature: the message names that range, not only nan/inf."""
    from problems.data import DataError, load_libsvm

    f = tmp_path / "x.svm"
    f.write_text("1 1:0.5\n-1 1:1e39\n")
    with pytest.raises(DataError, match=r"1 non-finite feature value\(s\) \(nan, inf, or beyond float32's range"):
        load_libsvm(f)
