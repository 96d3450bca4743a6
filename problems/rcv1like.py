"""A synthetic, seeded stand-in for rcv1.binary (paper Sec. 5.1), written offline as real LIBSVM files.

rcv1 cannot be downloaded on this machine. This generator makes a sparse binary classification set with
rcv1.binary's shape and the statistics that matter to the APAM update and its messages (LIBSVM site,
https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/binary.html#rcv1.binary; Lewis et al., JMLR 2004):

- 20,242 training rows and 47,236 features (the paper's dimension d of x);
- about 74 non-zeros per row (rcv1.binary: 1,498,952 / 20,242 = 74.05), row lengths spread log-normally;
- heavy-tailed feature frequencies: feature j is drawn with probability proportional to 1 / (j + 1)^zipf_a
  (a Zipf law, as word frequencies in text), over a seeded permutation of the feature ids;
- tf-idf-like values (rcv1's "ltc" weighting): (1 + log tf) * log(N / df_j), tf a geometric term count;
- unit-norm rows (as rcv1's);
- labels from a planted linear model with noise: P(y = 1 | a) = sigmoid(snr * a^T w* - b), w* ~ N(0, 1) on the
  ``informative`` most frequent features (0 elsewhere: rare words cannot be learned from 20,242 rows), and b
  set so about 52% of the rows are positive (rcv1.binary's training set: 10,491 of 20,242).

It is synthetic: what it does NOT share with rcv1 is the text itself (which features co-occur, the real decision
boundary) and the test set (rcv1.binary's has 677,399 rows; here ``n_test`` rows, default 5,000, from the same
distribution). Numbers on it are about the update's and the messages' cost at the paper's dimension, and about
convergence on a problem of that shape, not about rcv1's accuracy.

Files are written with scikit-learn's ``dump_svmlight_file`` under ``<data_root>/cache/rcv1like/`` (named by every
generator argument, so a change of any argument gives new files), and read back by the ``logreg_libsvm`` problem's
loader: ``problem=logreg_rcv1like`` is ``logreg_libsvm`` on these files.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp

__all__ = ["RCV1", "Rcv1LikeSpec", "generate", "rcv1like_files"]

log = logging.getLogger(__name__)

# rcv1.binary (training part) as published on the LIBSVM site
TOP_UPS = 6  # rounds of redrawing a row's repeated features (see _rows)
RCV1 = {"n_train": 20242, "n_features": 47236, "nnz_per_row": 74.05, "positive_fraction": 10491 / 20242}


@dataclass(frozen=True)
class Rcv1LikeSpec:
    """Generator arguments (defaults: rcv1.binary's shape).

    n_train, n_test: rows (>= 1); n_features: columns d (>= 2); nnz_per_row: mean non-zeros per row (> 0, < d);
    row_sigma: log-normal spread of row lengths (>= 0); informative: how many of the most frequent features carry
    planted weight (1..d); zipf_a: exponent of the feature-frequency law (>= 0; 0 is
    uniform); snr: scale of the planted margin (> 0; larger = less label noise); positive_fraction in (0, 1);
    seed: integer. Units: counts, except snr and zipf_a (dimensionless).
    """

    n_train: int = RCV1["n_train"]
    n_test: int = 5000
    n_features: int = RCV1["n_features"]
    nnz_per_row: float = RCV1["nnz_per_row"]
    row_sigma: float = 0.6
    zipf_a: float = 1.1
    snr: float = 8.0
    informative: int = 5000
    positive_fraction: float = RCV1["positive_fraction"]
    seed: int = 0

    def check(self) -> None:
        """Raise ValueError naming the first bad argument."""
        bad = [
            (k, v, why)
            for k, v, ok, why in [
                ("n_train", self.n_train, int(self.n_train) == self.n_train and self.n_train >= 1, "an integer >= 1"),
                ("n_test", self.n_test, int(self.n_test) == self.n_test and self.n_test >= 1, "an integer >= 1"),
                (
                    "n_features",
                    self.n_features,
                    int(self.n_features) == self.n_features and self.n_features >= 2,
                    "an integer >= 2",
                ),
                ("nnz_per_row", self.nnz_per_row, 0 < self.nnz_per_row < self.n_features, "in (0, n_features)"),
                ("informative", self.informative, 1 <= self.informative <= self.n_features, "in [1, n_features]"),
                ("row_sigma", self.row_sigma, self.row_sigma >= 0, ">= 0"),
                ("zipf_a", self.zipf_a, self.zipf_a >= 0, ">= 0"),
                ("snr", self.snr, self.snr > 0, "> 0"),
                ("positive_fraction", self.positive_fraction, 0 < self.positive_fraction < 1, "in (0, 1)"),
            ]
            if not ok
        ]
        if bad:
            k, v, why = bad[0]
            raise ValueError(f"problem.{k}={v!r}: must be {why}")


def _rows(rng: np.random.Generator, n: int, spec: Rcv1LikeSpec, cdf: np.ndarray) -> tuple[np.ndarray, ...]:
    """(row ids, feature ids, term counts) of n rows, each row's features distinct, sorted by (row, feature).

    cdf: (d,) cumulative feature probabilities; a feature is drawn by inverting it at a uniform number."""

    def draw(size: int) -> np.ndarray:
        return np.minimum(np.searchsorted(cdf, rng.random(size), side="right"), spec.n_features - 1)

    mu = np.log(spec.nnz_per_row) - spec.row_sigma**2 / 2  # log-normal with mean nnz_per_row
    lengths = np.clip(np.rint(rng.lognormal(mu, spec.row_sigma, n)), 1, spec.n_features).astype(np.int64)
    # draw with replacement, then drop repeats inside a row; top up the rows that lost entries (TOP_UPS rounds: the
    # few long rows that still miss a frequent feature or two after that keep their shortfall, < 0.1% of entries)
    rows = np.repeat(np.arange(n, dtype=np.int64), lengths)
    cols = draw(rows.size)
    for _ in range(TOP_UPS):
        key = np.sort(rows * spec.n_features + cols)  # sort + mask: numpy 2's np.unique hashes, 10x slower here
        key = key[np.concatenate(([True], key[1:] != key[:-1]))]
        rows, cols = key // spec.n_features, key % spec.n_features
        short = lengths - np.bincount(rows, minlength=n)
        if not short.any() or _ == TOP_UPS - 1:
            break
        extra_rows = np.repeat(np.arange(n, dtype=np.int64), short)
        rows = np.concatenate([rows, extra_rows])
        cols = np.concatenate([cols, draw(extra_rows.size)])
    tf = rng.geometric(0.5, size=rows.size)  # term counts 1, 2, 3, ... (half are 1)
    return rows, cols, tf


def generate(spec: Rcv1LikeSpec = Rcv1LikeSpec()) -> tuple[sp.csr_matrix, np.ndarray, sp.csr_matrix, np.ndarray]:
    """Draw the data set: (train_X (n_train, d) CSR float64, train_y (n_train,) int64 in {0, 1}, test_X, test_y).

    Deterministic in ``spec`` (numpy's PCG64 seeded with spec.seed). Rows have unit l2 norm and non-negative
    values; the idf uses the training rows' document frequencies (as a fitted TfidfTransformer would).
    Raises ValueError for bad arguments (Rcv1LikeSpec.check).
    """
    spec.check()
    rng = np.random.default_rng(spec.seed)
    d = spec.n_features
    ranks = rng.permutation(d)  # feature id -> frequency rank (frequent features spread over the ids)
    p_feat = 1.0 / (ranks + 1.0) ** spec.zipf_a
    cdf = np.cumsum(p_feat / p_feat.sum())
    w_star = rng.standard_normal(d) * (ranks < spec.informative)  # planted weights on the frequent features
    parts = []
    for n in (spec.n_train, spec.n_test):
        rows, cols, tf = _rows(rng, n, spec, cdf)
        parts.append((n, rows, cols, tf))
    df = np.bincount(parts[0][2], minlength=d)
    idf = np.log((1.0 + spec.n_train) / (1.0 + df)) + 1.0  # smoothed idf (scikit-learn's TfidfTransformer)
    out = []
    for n, rows, cols, tf in parts:
        vals = (1.0 + np.log(tf)) * idf[cols]
        X = sp.csr_matrix((vals, (rows, cols)), shape=(n, d))
        X.sort_indices()
        norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
        X = sp.diags(1.0 / norms) @ X
        out.append(X.tocsr())
    # planted model: the bias b is the (1 - positive_fraction) quantile of the training margins
    m_train = spec.snr * (out[0] @ w_star)
    b = np.quantile(m_train, 1.0 - spec.positive_fraction)
    ys = []
    for X in out:
        m = spec.snr * (X @ w_star) - b
        ys.append((rng.random(X.shape[0]) < 1.0 / (1.0 + np.exp(-m))).astype(np.int64))
    return out[0], ys[0], out[1], ys[1]


def _key(spec: Rcv1LikeSpec) -> str:
    return hashlib.sha256(json.dumps(asdict(spec), sort_keys=True).encode()).hexdigest()[:12]


def rcv1like_files(cache_dir: str | Path, spec: Rcv1LikeSpec = Rcv1LikeSpec()) -> tuple[Path, Path]:
    """(train file, test file): LIBSVM files of ``generate(spec)`` under ``cache_dir/rcv1like/``, written once.

    Files are named by a hash of every argument; a JSON beside them holds the arguments and the sha256 of each file,
    written last. A cached pair is used only when that JSON names these arguments and both files still hold those
    bytes: a pair that was edited, cut short or left without its JSON (a crash between the writes) is generated and
    written again, with one line saying so. Each file is written under a unique temporary name and renamed
    (problems/datasets/files.py ``atomic_path``), so concurrent callers agree. Labels are written as -1/+1
    (rcv1.binary's), features 1-based (the LIBSVM convention), values to 8 significant digits.

    Raises:
        DataError: a file of the cache is not a regular file (a folder, a named pipe), or the width does not fit in
            this machine's memory (problems/datasets/libsvm.py ``check_fits``).
        ValueError: a bad argument (:meth:`Rcv1LikeSpec.check`).
        OSError: a file could not be written.
    """
    from problems.datasets.files import DataError, atomic_path, file_sha256
    from problems.datasets.libsvm import check_fits

    folder = Path(cache_dir) / "rcv1like"
    stem = f"rcv1like_{spec.n_train}x{spec.n_features}_seed{spec.seed}_{_key(spec)}"
    train, test, record = folder / f"{stem}.train.svm", folder / f"{stem}.test.svm", folder / f"{stem}.json"
    for path in (train, test, record):  # never opened: a named pipe would block the reader
        if (path.exists() or path.is_symlink()) and not path.is_file():
            raise DataError(f"{path}: not a regular file (the rcv1-like cache writes a file there); remove it")
    if train.exists() or test.exists():
        why = _cache_problem(train, test, record, spec)
        if why is None:
            return train, test
        log.warning("%s/%s: %s; generating the files again", folder, stem, why)
    from sklearn.datasets import dump_svmlight_file  # here, not above: a cached call needs no sklearn import

    spec.check()
    rows = spec.n_train + spec.n_test  # CSR bytes: a float32 value and an int32 index a non-zero, a pointer a row
    check_fits(f"problem.n_features={spec.n_features}", spec.n_features, int(rows * spec.nnz_per_row * 8 + rows * 8))
    Xtr, ytr, Xte, yte = generate(spec)
    for X, y, path in ((Xtr, ytr, train), (Xte, yte, test)):
        with atomic_path(path) as tmp, open(tmp, "wb") as f:  # unique, never a link
            dump_svmlight_file(
                X,
                2 * y - 1,
                f,
                zero_based=False,
                comment=f"synthetic rcv1-like data (problems/rcv1like.py): {json.dumps(asdict(spec))}",
            )
    sums = {"sha256": {"train": file_sha256(train), "test": file_sha256(test)}}
    with atomic_path(record) as tmp:
        tmp.write_text(json.dumps({**asdict(spec), **sums}, indent=1, sort_keys=True))
    return train, test


def _cache_problem(train: Path, test: Path, record: Path, spec: Rcv1LikeSpec) -> str | None:
    """Why the cached pair cannot be used (a file or the JSON missing or unreadable, other arguments, other bytes
    than written), None when it can."""
    from problems.datasets.files import file_sha256

    try:
        kept = json.loads(record.read_text(encoding="utf-8"))
        sums = kept.get("sha256") if isinstance(kept, dict) else None
        if not isinstance(sums, dict):
            return f"{record.name} is missing or names no sha256 (a write that did not finish)"
        if {k: kept.get(k) for k in asdict(spec)} != asdict(spec):
            return f"{record.name} names other arguments"
        for part, path in (("train", train), ("test", test)):
            if sums.get(part) != file_sha256(path):
                return f"{path.name} does not hold the bytes written (edited or cut short)"
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        return f"cannot be read ({getattr(exc, 'strerror', None) or type(exc).__name__})"
    return None
