"""Bootstrap intervals, shared ranks and identical runs (experiments.analysis.statistics), and async_methods'
comparison table that uses them (experiments.analysis.comparisons)."""

import math

import numpy as np
import pandas as pd
import pytest

from experiments.analysis.comparisons import comparison
from experiments.analysis.statistics import (
    Interval,
    bootstrap_ci,
    identical_groups,
    shared_ranks,
)

SAMPLE = [1.0, 2.0, 3.0, 4.0, 10.0]


def test_bootstrap_interval_of_a_known_sample_is_numpys_percentile_of_seeded_resample_means():
    iv = bootstrap_ci(SAMPLE, resamples=2000, seed=7)
    rng = np.random.default_rng(7)
    means = np.asarray(SAMPLE)[rng.integers(0, 5, size=(2000, 5))].mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    assert (iv.point, iv.lo, iv.hi, iv.n) == (4.0, float(lo), float(hi), 5)  # exact, bit for bit
    assert bootstrap_ci(SAMPLE, resamples=2000, seed=7) == iv  # seeded: the same interval on every call
    assert 1.0 <= iv.lo < 4.0 < iv.hi <= 10.0


def test_degenerate_and_infinite_samples():
    assert bootstrap_ci([0.5, 0.5, 0.5]) == Interval(0.5, 0.5, 0.5, 3)
    assert bootstrap_ci([2.0]) == Interval(2.0, 2.0, 2.0, 1)
    assert bootstrap_ci([math.nan, 1.0]).n == 1  # NaN dropped
    assert bootstrap_ci([]).n == 0 and math.isnan(bootstrap_ci([]).point)
    # one seed missed the target: the mean is infinite, the interval's top too, its bottom is the other seeds'
    iv = bootstrap_ci([1.0, 2.0, 3.0, 4.0, math.inf])
    assert math.isinf(iv.point) and math.isinf(iv.hi) and 1.0 <= iv.lo < 4.0
    assert bootstrap_ci([math.inf] * 3) == Interval(math.inf, math.inf, math.inf, 3)
    assert iv.text() == f"not reached [{iv.lo:.3g}, not reached]"
    with pytest.raises(ValueError, match="2,000"):
        bootstrap_ci(SAMPLE, resamples=1999)


def test_methods_whose_intervals_overlap_share_a_rank():
    # a and b overlap, c lies wholly above both: 1, 1, 3 (competition ranking)
    assert shared_ranks([(1.0, 2.0), (1.5, 2.5), (3.0, 4.0)]) == [1, 1, 3]
    # a chain: b overlaps a and c, c does not overlap a -- c is behind a only
    assert shared_ranks([(1.0, 2.0), (1.5, 3.0), (2.5, 4.0)]) == [1, 1, 2]
    # methods 0.1% apart with wide intervals are not told apart
    assert shared_ranks([Interval(1.000, 0.9, 1.1, 5), Interval(1.001, 0.9, 1.1, 5)]) == [1, 1]
    # never reached ([inf, inf]): behind every method with a finite top; a partial miss [lo, inf] overlaps what lies
    # above lo, the never-reached ones included
    assert shared_ranks([(1.0, 2.0), (math.inf, math.inf), (math.inf, math.inf), (1.5, math.inf)]) == [1, 2, 2, 1]


def _runs(losses: dict, seeds=(0, 1, 2)):
    """Summary rows of one comparison: per method, one run per seed with the given final losses and times."""
    rows = []
    for alg, per_seed in losses.items():
        for s, (loss, t) in zip(seeds, per_seed):
            rows.append(
                {
                    "run_id": f"{alg}-{s}",
                    "algorithm": alg,
                    "seed": s,
                    "final_train_loss": loss,
                    "time_s": t,
                    "updates": 100,
                    "gradients": 100,
                    "time_to_target_s": t / 2,
                }
            )
    return pd.DataFrame(rows)


def test_identical_runs_are_found_to_the_last_bit():
    same = [(0.3, 1.0), (0.31, 1.1), (0.29, 0.9)]
    runs = _runs(
        {
            "apam": same,
            "apam_mishchenko": same,
            "apam_ringmaster": same,
            "async_sgd": [(0.3, 1.0), (0.31, 1.1), (0.29 + 1e-15, 0.9)],
        }
    )  # one bit off on one seed
    assert identical_groups(runs) == [["apam", "apam_mishchenko", "apam_ringmaster"]]
    # traces tell runs apart that the summary does not
    traces = pd.DataFrame(
        [{"run_id": r, "time_s": 0.5, "train_loss": 0.5 + (r == "apam_ringmaster-1") * 1e-9} for r in runs["run_id"]]
    )
    assert identical_groups(runs, traces=traces) == [["apam", "apam_mishchenko"]]
    assert identical_groups(runs.iloc[:3]) == []


def _comparison_summary():
    """P = 1 reference runs and a P = 8 comparison under equal compute: apam and apam_ringmaster identical."""
    rows, traces = [], []
    for alg, p, slope in [("apam", 1, 0.06), ("apam", 8, 0.05), ("apam_ringmaster", 8, 0.05), ("async_sgd", 8, 0.02)]:
        for s in range(5):
            rid = f"{alg}-{p}-{s}"
            curve = [1.0 - slope * (1 + 0.01 * s) * e for e in range(11)]
            rows.append(
                {
                    "run_id": rid,
                    "problem": "q",
                    "algorithm": alg,
                    "workers": p,
                    "seed": s,
                    "status": "ok",
                    "epochs": 10.0,
                    "final_train_loss": curve[-1],
                    "time_s": 10.0 / p,
                    "updates": 100,
                    "gradients": 100,
                    "discarded": 0,
                    "time_to_target_s": math.nan,
                    "target_loss": 0.5,
                    "lr_factor": 1.0,
                    "compute_spread": "equal",
                    "compute_law": "constant",
                    "straggler_sigma": 0.0,
                    "straggler_slowdown": 1.0,
                    "policy": "none",
                }
            )
            traces += [
                {"run_id": rid, "epoch": float(e), "time_s": e / p, "updates": 10 * e, "train_loss": v}
                for e, v in enumerate(curve)
            ]
    return pd.DataFrame(rows), pd.DataFrame(traces)


def test_comparison_merges_identical_methods_and_ranks_them_by_intervals():
    summary, traces = _comparison_summary()
    table, targets = comparison(summary, traces)
    assert list(targets["reference"]) == ["apam"]
    t = table.set_index("algorithm")
    assert list(t.index) == ["apam = apam_ringmaster", "async_sgd"] and t.loc["apam = apam_ringmaster", "merged"] == 2
    assert t.loc["apam = apam_ringmaster", "rank T(1/2)"] == 1 and t.loc["async_sgd", "rank T(1/2)"] == 2
    assert math.isinf(t.loc["async_sgd", "time T(9/10)"].point)  # async SGD never gets that far
    assert t.loc["apam = apam_ringmaster", "loss"].point < t.loc["async_sgd", "loss"].point
