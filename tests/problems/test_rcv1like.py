"""The synthetic rcv1-like set (problems/rcv1like.py): shape, density, unit rows, heavy tail, determinism, files."""

import json

import numpy as np
import pytest
from sklearn.datasets import load_svmlight_file

from problems.rcv1like import Rcv1LikeSpec, generate, rcv1like_files

SMALL = Rcv1LikeSpec(n_train=1500, n_test=300, n_features=4000, nnz_per_row=30, informative=500, seed=3)


@pytest.fixture(scope="module")
def small():
    return generate(SMALL)


def test_shape_density_and_unit_rows(small):
    Xtr, ytr, Xte, yte = small
    assert Xtr.shape == (1500, 4000) and Xte.shape == (300, 4000) and ytr.shape == (1500,)
    assert Xtr.nnz / Xtr.shape[0] == pytest.approx(30, rel=0.05)
    assert (Xtr.data > 0).all()
    norms = np.sqrt(np.asarray(Xtr.multiply(Xtr).sum(axis=1)).ravel())
    np.testing.assert_allclose(norms, 1.0, rtol=1e-12)
    assert set(np.unique(ytr)) == {0, 1} and abs(ytr.mean() - SMALL.positive_fraction) < 0.05


def test_heavy_tailed_feature_frequencies(small):
    df = np.sort(np.bincount(small[0].indices, minlength=4000))[::-1]
    top = df[:40].sum() / df.sum()  # the 1% most frequent features
    assert top > 0.3  # uniform frequencies would give 0.01
    assert df[0] > 50 * max(np.median(df), 1)


def test_labels_follow_the_planted_model(small):
    from sklearn.linear_model import LogisticRegression

    Xtr, ytr, Xte, yte = small
    acc = LogisticRegression(C=10, max_iter=300).fit(Xtr, ytr).score(Xte, yte)
    assert acc > 0.65  # learnable (planted model), yet noisy (not separable)


def test_deterministic_in_the_seed(small):
    again = generate(SMALL)
    assert (again[0] != small[0]).nnz == 0 and (again[1] == small[1]).all()
    other = generate(Rcv1LikeSpec(**{**SMALL.__dict__, "seed": 4}))
    assert (other[0] != small[0]).nnz > 0


def test_default_spec_is_rcv1_binary_shape():
    s = Rcv1LikeSpec()
    assert (s.n_train, s.n_features) == (20242, 47236) and s.nnz_per_row == pytest.approx(74.05)


def test_bad_argument_names_the_key():
    with pytest.raises(ValueError, match=r"problem.nnz_per_row=0: must be in \(0, n_features\)"):
        generate(Rcv1LikeSpec(nnz_per_row=0))


def test_files_are_libsvm_cached_and_read_by_the_problem(tmp_path, small):
    train, test = rcv1like_files(tmp_path / "cache", SMALL)
    X, y = load_svmlight_file(str(train), n_features=4000, zero_based=False)
    assert X.shape == (1500, 4000) and set(np.unique(y)) == {-1.0, 1.0}
    np.testing.assert_allclose(X.toarray()[:5], small[0].toarray()[:5], rtol=1e-7)
    mtime = train.stat().st_mtime_ns
    assert rcv1like_files(tmp_path / "cache", SMALL) == (train, test) and train.stat().st_mtime_ns == mtime
    from problems import build_problem

    cfg = {
        "kind": "logreg_rcv1like",
        "name": "logreg_rcv1like",
        "l2": 0.0,
        **{k: getattr(SMALL, k) for k in ("n_train", "n_test", "n_features", "nnz_per_row", "informative", "seed")},
    }
    prob = build_problem(cfg, tmp_path)
    assert prob.dim == 4000 and prob.num_train == 1500


@pytest.mark.parametrize("damage", ["edited", "cut", "no record"])
def test_a_damaged_cached_pair_is_generated_again(tmp_path, caplog, damage):
    """The cache's JSON holds each file's sha256: a training file replaced by other rows (it trained on 16 of 200
    examples), cut short, or left without its JSON (a crash between the writes) is written again, with one line."""
    train, test = rcv1like_files(tmp_path / "cache", SMALL)
    good = train.read_bytes(), test.read_bytes()
    record = train.with_name(train.name.replace(".train.svm", ".json"))
    if damage == "edited":
        train.write_bytes(b"".join(good[0].splitlines(keepends=True)[:17]))
    elif damage == "cut":
        test.write_bytes(good[1][:-100])
    else:
        record.unlink()
    with caplog.at_level("WARNING", logger="problems.rcv1like"):
        assert rcv1like_files(tmp_path / "cache", SMALL) == (train, test)
    assert (train.read_bytes(), test.read_bytes()) == good and record.is_file()
    assert len(caplog.records) == 1 and "generating the files again" in caplog.records[0].getMessage()
    caplog.clear()
    with caplog.at_level("WARNING", logger="problems.rcv1like"):
        rcv1like_files(tmp_path / "cache", SMALL)  # whole again: used as it is
    assert not caplog.records


def test_a_set_narrower_than_5000_features_plants_weight_on_every_feature(tmp_path):
    """``problem.informative`` (null: min(5000, n_features)) follows a small ``n_features``: the default could
    never run below 5000 features, and the key could not be set."""
    from problems import build_problem

    cfg = {"kind": "logreg_rcv1like", "name": "r", "l2": 0.0, "n_train": 60, "n_test": 20, "n_features": 10}
    prob = build_problem({**cfg, "nnz_per_row": 2.0, "seed": 0, "informative": None}, tmp_path)
    assert prob.dim == 10 and prob.num_train == 60
    (record,) = (tmp_path / "cache" / "rcv1like").glob("*.json")
    assert json.loads(record.read_text())["informative"] == 10
    with pytest.raises(ValueError, match=r"problem.informative=11: must be in \[1, n_features\]"):
        build_problem({**cfg, "nnz_per_row": 2.0, "seed": 0, "informative": 11}, tmp_path)


@pytest.mark.parametrize("part", ["train", "json"])
@pytest.mark.parametrize("kind", ["fifo", "folder"])
def test_a_cache_file_that_is_no_regular_file_is_named_never_opened(tmp_path, part, kind):
    """A named pipe in the cache's place hung the run; a folder was a raw IsADirectoryError."""
    import os

    from problems.datasets.files import DataError

    train, _ = rcv1like_files(tmp_path / "cache", SMALL)
    path = train if part == "train" else train.with_name(train.name.replace(".train.svm", ".json"))
    path.unlink()
    os.mkfifo(path) if kind == "fifo" else path.mkdir()
    with pytest.raises(DataError, match=f"{path.name}: not a regular file .*; remove it"):
        rcv1like_files(tmp_path / "cache", SMALL)


def test_a_width_beyond_memory_is_refused_before_anything_is_drawn(tmp_path):
    from problems.datasets.files import DataError

    with pytest.raises(DataError, match=r"problem.n_features=100000000000: 100,000,000,000 features"):
        rcv1like_files(tmp_path / "cache", Rcv1LikeSpec(n_train=10, n_test=5, n_features=10**11, nnz_per_row=2))
    assert not (tmp_path / "cache" / "rcv1like").exists() or not any((tmp_path / "cache" / "rcv1like").iterdir())
