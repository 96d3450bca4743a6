"""Intervals, shared ranks and identical runs: how the comparisons of several methods over seeds are judged.

- :func:`bootstrap_ci`: the percentile bootstrap (Efron and Tibshirani, *An Introduction to the Bootstrap*, 1993,
  ch. 13): resample the seeds' values with replacement ``resamples`` times (>= 2,000; numpy's PCG64 generator seeded,
  so an interval is the same on every call), take the statistic (the mean) of each resample, and read the 2.5th and
  97.5th percentiles of those statistics (numpy's ``percentile``, linear interpolation). A value may be infinite (a
  seed that never reached a target): a resample that holds it has an infinite mean, and a bound that falls on or
  between such resamples is infinite.
- :func:`shared_ranks`: a rank that does not separate what the seeds cannot: a method's rank is 1 + the number of
  methods whose interval lies wholly below (better than) its own. Methods whose intervals overlap are not told apart,
  so k methods that overlap one another share a rank and the next one gets k + 1 (competition ranking, 1-2-2-4).
- :func:`identical_groups`: methods whose runs are the same to the last bit on every seed (e.g. APAM, its
  delay-adaptive and its discarding versions under equal compute times, where no staleness differs): one method
  reported once, with a note, instead of several that tie by construction.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np
import pandas as pd

RESAMPLES = 10_000
"""Bootstrap resamples per interval (the percentile method needs >= 2,000 for stable 2.5% tails)."""
LEVEL = 0.95
SEED = 0
"""The generator's seed: intervals are reproducible, the report byte-identical when redrawn."""
_HUGE = 1e300  # an infinite statistic stands for this while percentiles are interpolated ...
_INFINITE_ABOVE = 1e250  # ... and a bound above this (interpolated towards it) is infinite again


class Interval(NamedTuple):
    """A statistic over seeds and its bootstrap interval (same unit as the values); n: the values it came from."""

    point: float
    lo: float
    hi: float
    n: int

    def text(self, fmt: str = "{:.3g}") -> str:
        """``1.23 [1.10, 1.41]``; ``inf`` as "not reached"; a single value without its interval."""

        def show(v):
            return "not reached" if math.isinf(v) else ("--" if math.isnan(v) else fmt.format(v))

        if self.n == 0:
            return "--"
        if self.n == 1 or self.lo == self.hi == self.point:
            return show(self.point)
        return f"{show(self.point)} [{show(self.lo)}, {show(self.hi)}]"


def bootstrap_ci(
    values: Sequence[float],
    resamples: int = RESAMPLES,
    level: float = LEVEL,
    seed: int = SEED,
    statistic: Callable = np.mean,
) -> Interval:
    """The percentile bootstrap interval of ``statistic`` (default the mean) of ``values`` (module docstring).

    Args:
        values: one number per seed (NaN values are dropped; +inf is kept: e.g. a target never reached).
        resamples: bootstrap resamples, >= 2,000.
        level: the interval's coverage, in (0, 1).
        seed: the seed of numpy's default generator (PCG64).
        statistic: a function of an array and ``axis=`` (numpy's mean, median).
    Returns:
        Interval(point = statistic of ``values``, lo, hi, n). With one value the interval is that value; with none,
        NaN.
    Raises:
        ValueError: fewer than 2,000 resamples, or a level outside (0, 1).
    """
    if resamples < 2000:
        raise ValueError(f"resamples={resamples}: the percentile bootstrap needs >= 2,000")
    if not 0 < level < 1:
        raise ValueError(f"level={level}: must be in (0, 1)")
    x = np.asarray(list(values), dtype=float)
    x = x[~np.isnan(x)]
    if x.size == 0:
        return Interval(math.nan, math.nan, math.nan, 0)
    point = float(statistic(x))
    if x.size == 1:
        return Interval(point, point, point, 1)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, x.size, size=(resamples, x.size))
    stats = statistic(x[idx], axis=1)
    tail = 100 * (1 - level) / 2
    big = np.isinf(stats)
    if big.any():
        stats = np.where(big, _HUGE, stats)
    lo, hi = (math.inf if b > _INFINITE_ABOVE else float(b) for b in np.percentile(stats, [tail, 100 - tail]))
    return Interval(point, lo, hi, int(x.size))


def shared_ranks(intervals: Sequence[Interval | tuple[float, float]]) -> list[int]:
    """Competition ranks that separate only what the intervals separate (smaller is better): rank_i = 1 + the
    number of j whose upper bound lies strictly below i's lower bound. ``intervals``: (lo, hi) pairs or
    :class:`Interval`; a NaN bound counts as overlapping everything."""
    bounds = [(iv.lo, iv.hi) if isinstance(iv, Interval) else (float(iv[0]), float(iv[1])) for iv in intervals]
    return [1 + sum(1 for j, (_, hj) in enumerate(bounds) if j != i and hj < lo) for i, (lo, _) in enumerate(bounds)]


def identical_groups(
    runs: pd.DataFrame,
    item: str = "algorithm",
    seed: str = "seed",
    columns: Sequence[str] = ("time_s", "final_train_loss", "updates", "gradients", "time_to_target_s"),
    traces: pd.DataFrame | None = None,
) -> list[list[str]]:
    """Groups of ``item`` values (methods) whose runs are identical: the same seeds and, seed by seed, the same
    ``columns`` of the summary to the last bit (NaN equal to NaN) and, when ``traces`` (trace rows with ``run_id``)
    are given, the same training losses and times at every evaluation point. Returns only groups of two or more,
    each sorted as the items first appear in ``runs``; ``runs`` is one comparison's rows (one problem, P and compute
    model)."""
    if runs.empty or item not in runs:
        return []
    cols = [c for c in columns if c in runs]
    curves = {}
    if traces is not None and not traces.empty and "run_id" in runs:
        for rid, t in traces[traces["run_id"].isin(set(runs["run_id"]))].groupby("run_id", sort=False):
            curves[rid] = tuple(_bits(v) for v in t[["time_s", "train_loss"]].to_numpy(dtype=float).ravel())
    signature = {}
    for name, rows in runs.groupby(item, sort=False):
        per_seed = []
        for _, r in rows.sort_values(seed).iterrows():
            per_seed.append((r[seed], tuple(_bits(r[c]) for c in cols), curves.get(r.get("run_id"))))
        signature.setdefault(tuple(per_seed), []).append(name)
    order = {name: i for i, name in enumerate(pd.unique(runs[item]))}
    return sorted((sorted(g, key=order.get) for g in signature.values() if len(g) > 1), key=lambda g: order[g[0]])


def _bits(v) -> object:
    """A value as compared to the last bit: a float's hex form (NaN equal to NaN), anything else as it is."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return v
    return "nan" if math.isnan(f) else f.hex()
