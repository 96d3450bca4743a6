"""LIBSVM / SVMlight sparse text files (e.g. rcv1, news20, a9a) for binary classification.

Parsing is scikit-learn's `load_svmlight_files` (comments `# ...`, blank lines, label-only lines, CRLF endings and
.gz/.bz2 files are all handled there); this module adds file checks, one-line errors, the {0,1} label map and a cache
of the parse (numpy .npz, keyed by the files' size and modification time).
Format: https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/ -- one example a line, `label index:value ...`.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from .files import DataError, atomic_path, file_sha256, one_line, special_kind

LABEL_SETS = ((-1, 1), (0, 1), (1, 2))  # accepted binary label pairs, each mapped to (0, 1)
LOCATE_LINE_MAX_BYTES = 64 << 20  # look for the bad line (by bisection) only in files up to this size
MEMORY_FRACTION = 0.5  # a problem's dense vectors plus its data may take at most this share of the machine's memory
DENSE_VECTORS = 8  # float64-sized dense vectors of the model's width a run holds at once (x, gradient, the
# rule's m, v and vhat, a worker's copy of x and its gradient, the optimum's x*)


@dataclass
class LibsvmData:
    """A binary LIBSVM data set.

    train_x, test_x: scipy CSR matrices (n, n_features), dtype as asked (float32 by default), same width.
    train_y, test_y: int64 numpy arrays (n,) of 0/1; `label_values[j]` is the file's label mapped to j.
    has_test: False when no test file was given; then test_x/test_y are the training set itself (same objects).
    """

    train_x: sp.csr_matrix
    train_y: np.ndarray
    test_x: sp.csr_matrix
    test_y: np.ndarray
    has_test: bool
    n_features: int
    label_values: tuple[int, int]
    path: Path
    test_path: Path | None


def _first_bad_line(path: Path, kw: dict) -> int | None:
    """1-based number of the first line at which sklearn's parser fails on `path` alone, or None if unknown.

    Bisection over line prefixes (about log2(lines) parses); only for uncompressed files up to
    LOCATE_LINE_MAX_BYTES, and only called after a parse already failed.
    """
    from sklearn.datasets import load_svmlight_file  # lazy: scikit-learn only for LIBSVM files

    if path.suffix in (".gz", ".bz2") or path.stat().st_size > LOCATE_LINE_MAX_BYTES:
        return None
    lines = path.read_bytes().splitlines(keepends=True)

    def parses(k: int) -> bool:
        try:
            load_svmlight_file(io.BytesIO(b"".join(lines[:k])), **kw)
        except Exception:  # noqa: BLE001 -- whatever sklearn raises, that prefix fails
            return False
        return True

    if parses(len(lines)):
        return None
    lo, hi = 0, len(lines)  # lines[:lo] parse, lines[:hi] fail
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if parses(mid) else (lo, mid)
    return hi


def _parse_error(files: list[Path], err: Exception, kw: dict) -> DataError:
    """Turn sklearn's exception into a DataError naming the failing file (and line, when found)."""
    from sklearn.datasets import load_svmlight_file  # lazy: scikit-learn only for LIBSVM files

    for f in files:
        try:
            load_svmlight_file(str(f), **kw)
        except PermissionError as e:
            return DataError(f"{f}: cannot read this LIBSVM file ({e.strerror})")
        except Exception as e:  # noqa: BLE001
            try:
                line = _first_bad_line(f, kw)
            except OSError:
                line = None
            where = f"{f}:{line}" if line else str(f)
            return DataError(f"{where}: not a valid LIBSVM file ({one_line(e, 160)})")
    names = " and ".join(str(f) for f in files)
    return DataError(f"{names}: do not load together ({one_line(err, 160)})")


def machine_memory_bytes() -> int | None:
    """The machine's physical memory in bytes (``sysconf``: pages x page size); None where it cannot be told."""
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return None


def check_fits(shown: str, n_features: int, data_bytes: int = 0, memory: int | None = None) -> None:
    """Refuse a model width whose dense vectors (``DENSE_VECTORS`` of ``n_features`` float64 entries) plus the
    data (``data_bytes``) would take more than ``MEMORY_FRACTION`` of the machine's memory -- checked before anything
    of that width is built, so a file with one huge feature index fails at once instead of paging for minutes.

    Args:
        shown: the file(s) to name in the message.
        n_features: the model's width d (the largest feature index + 1).
        data_bytes: bytes the parsed data take (CSR values, indices and row pointers).
        memory: the machine's memory in bytes (default :func:`machine_memory_bytes`; no check when unknown).

    Raises:
        DataError: one line naming the file, the width, what it would need and the limit.
    """
    memory = machine_memory_bytes() if memory is None else memory
    if memory is None:
        return
    need = DENSE_VECTORS * 8 * int(n_features) + int(data_bytes)
    if need > MEMORY_FRACTION * memory:
        raise DataError(
            f"{shown}: {int(n_features):,} features (the largest feature index) would need about "
            f"{need / 2**30:.3g} GiB for the model's dense vectors and the data, more than "
            f"{MEMORY_FRACTION:g} of this machine's {memory / 2**30:.3g} GiB; check the file's indices "
            "or set problem.n_features"
        )


def _csr_bytes(x) -> int:
    x = sp.csr_matrix(x)
    return int(x.data.nbytes + x.indices.nbytes + x.indptr.nbytes)


def _check_readable(f: Path) -> None:
    """Refuse a path that is missing, not a regular file (a folder, a named pipe: never opened) or unreadable."""
    try:
        st = f.stat()
    except FileNotFoundError:
        raise DataError(f"{f}: no such LIBSVM file; give an existing file (problem.path=...)") from None
    except OSError as e:
        raise DataError(f"{f}: cannot read this LIBSVM file ({e.strerror})") from None
    if kind := special_kind(st.st_mode):
        raise DataError(f"{f}: {kind}, not a LIBSVM file; give a regular file (problem.path=...)")
    if not os.access(f, os.R_OK):
        raise DataError(f"{f}: cannot read this LIBSVM file (permission denied)")


def _label_map(y: np.ndarray, shown: str) -> tuple[int, int] | None:
    values = np.unique(y)
    if not np.all(np.isfinite(values)):  # inf, nan, 1e400: int() of one is an OverflowError or ValueError
        raise DataError(
            f"{shown}: non-finite labels {values[~np.isfinite(values)][:3].tolist()}; a binary LIBSVM file is expected"
        )
    if not np.all(values == np.round(values)):
        raise DataError(f"{shown}: non-integer labels {values[:10].tolist()}; a binary LIBSVM file is expected")
    vals = {int(v) for v in values}
    for pair in LABEL_SETS:
        if vals <= set(pair):
            return pair
    return None


def _parsed_cache(files: list[Path], kw: dict, cache_dir: Path | None) -> Path | None:
    """Where the parse of ``files`` with ``kw`` is kept: ``cache_dir/libsvm/<key>.npz``, the key a hash of each file's
    bytes (sha256) and of the parse arguments: an edited file is parsed again, even one whose size and modification
    time were kept (``touch -d``, a copy with ``cp -p``)."""
    if cache_dir is None:
        return None
    stats = [file_sha256(f) for f in files]
    args = {k: (np.dtype(v).name if k == "dtype" else v) for k, v in kw.items()}
    key = hashlib.sha256(json.dumps([stats, args], sort_keys=True).encode()).hexdigest()[:16]
    return Path(cache_dir) / "libsvm" / f"{key}.npz"


def _parse(files: list[Path], kw: dict, cache: Path | None) -> tuple[list, bool]:
    """sklearn's ``load_svmlight_files`` of ``files`` -- [X0, y0, X1, y1, ...], X CSR -- read from ``cache`` when it
    holds them (a text parse takes seconds at rcv1's size: 2.4-3.8 s for the rcv1-like pair, 0.05 s from the cache),
    else parsed from the text. Returns the arrays and whether they came from the cache (a fresh parse is written
    there by :func:`_write_cache` only once the data passed every check). Raises DataError for a file that does not
    parse."""
    if cache is not None and cache.is_file():
        try:
            with np.load(cache) as z:
                return [
                    m
                    for i in range(len(files))
                    for m in (
                        sp.csr_matrix((z[f"data{i}"], z[f"indices{i}"], z[f"indptr{i}"]), shape=tuple(z[f"shape{i}"])),
                        z[f"y{i}"],
                    )
                ], True
        except Exception:  # noqa: BLE001, S110 -- an unreadable cache is parsed again and rewritten
            pass
    from sklearn.datasets import load_svmlight_files  # lazy: scikit-learn only for LIBSVM files

    try:
        return load_svmlight_files([str(f) for f in files], **kw), False
    except Exception as e:  # noqa: BLE001 -- ValueError, UnicodeDecodeError, OSError (bad .gz), ...
        raise _parse_error(files, e, kw) from None


def _write_cache(cache: Path, loaded: list) -> None:
    """Keep a parse (``[X0, y0, ...]``) at ``cache``: written to a unique temporary name, then renamed
    (:func:`~problems.datasets.files.atomic_path`: concurrent jobs agree, a crash leaves no half file); a read-only
    cache folder is not an error (the files are parsed every time)."""
    arrays = {}
    for i, (x, y) in enumerate(zip(loaded[0::2], loaded[1::2])):
        x = sp.csr_matrix(x)
        arrays.update(
            {
                f"data{i}": x.data,
                f"indices{i}": x.indices,
                f"indptr{i}": x.indptr,
                f"shape{i}": np.asarray(x.shape),
                f"y{i}": y,
            }
        )
    try:
        with atomic_path(cache) as tmp, open(tmp, "wb") as f:  # a unique temporary name: a link there is not followed
            np.savez(f, **arrays)
    except OSError:
        pass


def load_libsvm(
    path: str | Path,
    n_features: int | None = None,
    zero_based: bool | str = "auto",
    test_path: str | Path | None = None,
    *,
    dtype=np.float32,
    cache_dir: str | Path | None = None,
) -> LibsvmData:
    """Load a binary LIBSVM file (and optionally its test file) with labels mapped to {0, 1}.

    Uses `sklearn.datasets.load_svmlight_files` on train and test together, so both get the same number of
    columns (the larger, or `n_features` when given) and the same `zero_based` decision ("auto": sklearn's guess;
    True/False: the files' indices start at 0/1).
    Labels: the union of train and test labels must lie within one of {-1,+1}, {0,1}, {1,2} (checked in that order),
    mapped in increasing order to 0, 1. Without `test_path` the test set is the training set (`has_test=False`).
    Raises DataError (one line) naming the file: missing path, not a regular file, unreadable, a parse failure (with
    the line number when it can be found), no examples, labels that are not binary, training labels of one class
    only, no nonzero feature value (a labels-only file), a non-finite feature value, or a width whose dense vectors
    would not fit in ``MEMORY_FRACTION`` of the machine's memory (:func:`check_fits`, checked right after the
    sparse parse and, for a given ``n_features``, before it).
    With ``cache_dir``, the parse of files that passed every check is kept under ``cache_dir/libsvm/`` and reused
    while the files are unchanged (:func:`_parsed_cache`); every check above runs on the cached arrays as on a fresh
    parse, and a refused file leaves nothing there.
    """
    files = [Path(path)] + ([Path(test_path)] if test_path is not None else [])
    for f in files:
        _check_readable(f)
    shown = " and ".join(str(f) for f in files)
    if n_features is not None:
        check_fits(shown, n_features)
    kw = {"n_features": n_features, "dtype": dtype, "zero_based": zero_based}
    cache = _parsed_cache(files, kw, None if cache_dir is None else Path(cache_dir))
    loaded, cached = _parse(files, kw, cache)
    xs, ys = loaded[0::2], loaded[1::2]
    check_fits(shown, xs[0].shape[1], sum(_csr_bytes(x) for x in xs))  # the parse is sparse: nothing dense yet
    for f, y in zip(files, ys):
        if y.shape[0] == 0:
            raise DataError(f"{f}: no examples in this LIBSVM file")
    pair = _label_map(ys[0], str(files[0]))
    if pair is None:
        raise DataError(
            f"{files[0]}: labels {np.unique(ys[0])[:10].tolist()} are not binary "
            f"(expected one of {{-1,+1}}, {{0,1}}, {{1,2}})"
        )
    if np.unique(ys[0]).size < 2:
        raise DataError(
            f"{files[0]}: every example has label {ys[0][0]:g}; a binary problem needs training "
            "examples of both classes"
        )
    if sp.csr_matrix(xs[0]).count_nonzero() == 0:
        raise DataError(
            f"{files[0]}: no nonzero feature value in any example (labels only); a LIBSVM line is "
            "'label index:value ...'"
        )
    if len(files) == 2:
        both = _label_map(np.concatenate(ys), f"{files[0]} and {files[1]}")
        if both is None:
            raise DataError(
                f"{files[1]}: labels {np.unique(ys[1])[:10].tolist()} do not match the training "
                f"file's {np.unique(ys[0]).tolist()} (one of {{-1,+1}}, {{0,1}}, {{1,2}} expected)"
            )
        pair = both
    ys01 = [(y == pair[1]).astype(np.int64) for y in ys]
    xs = [sp.csr_matrix(x) for x in xs]
    for f, x in zip(files, xs):
        bad = ~np.isfinite(x.data)
        if bad.any():  # rows of the non-finite entries, 1-based like the file's lines (comment lines aside)
            row = int(np.searchsorted(x.indptr, int(np.flatnonzero(bad)[0]), side="right"))
            raise DataError(
                f"{f}: {int(bad.sum())} non-finite feature value(s) (nan, inf, or beyond float32's range of "
                f"+-3.4e38), the first in example {row}; a LIBSVM file must hold finite numbers"
            )
    has_test = len(files) == 2
    if cache is not None and not cached:  # only data that passed every check is kept
        _write_cache(cache, loaded)
    return LibsvmData(
        train_x=xs[0],
        train_y=ys01[0],
        test_x=xs[1] if has_test else xs[0],
        test_y=ys01[1] if has_test else ys01[0],
        has_test=has_test,
        n_features=int(xs[0].shape[1]),
        label_values=pair,
        path=files[0],
        test_path=files[1] if has_test else None,
    )
