"""Combining several seeds into a mean with a min-max band."""

import numpy as np
import pandas as pd


def mean_band(curves):
    """Mean, min and max of several curves y(x), one per seed.

    Args:
        curves: list of (x, y) pairs of 1-D float arrays (any order; non-finite points are dropped).
    Returns:
        (x, mean, lo, hi): float arrays of one length. Curves sampled at the same x are combined point by point;
        otherwise every curve is linearly interpolated onto the union of the x values inside the range all curves
        cover (or, where they share no range, at each x the curves that cover it are combined).
        Empty arrays when no curve has a finite point.
    """
    clean = []
    for x, y in curves:
        x = np.asarray(x, dtype=float)
        y = np.asarray(y, dtype=float)
        keep = np.isfinite(x) & np.isfinite(y)
        x, y = x[keep], y[keep]
        if x.size:
            order = np.argsort(x, kind="stable")
            clean.append((x[order], y[order]))
    if not clean:
        empty = np.array([], dtype=float)
        return empty, empty, empty, empty
    x0 = clean[0][0]
    if all(c[0].shape == x0.shape and np.allclose(c[0], x0) for c in clean):
        ys = np.vstack([c[1] for c in clean])
        return x0, ys.mean(axis=0), ys.min(axis=0), ys.max(axis=0)
    lo_x = max(c[0][0] for c in clean)
    hi_x = min(c[0][-1] for c in clean)
    grid = np.unique(np.concatenate([c[0] for c in clean]))
    if lo_x <= hi_x:
        grid = grid[(grid >= lo_x) & (grid <= hi_x)]
    ys = np.full((len(clean), grid.size), np.nan)
    for i, (x, y) in enumerate(clean):
        inside = (grid >= x[0]) & (grid <= x[-1])
        ys[i, inside] = np.interp(grid[inside], x, y)
    have = np.isfinite(ys)
    count = have.sum(axis=0)
    mean = np.where(have, ys, 0.0).sum(axis=0) / np.maximum(count, 1)
    lo = np.where(have, ys, np.inf).min(axis=0)
    hi = np.where(have, ys, -np.inf).max(axis=0)
    ok = count > 0
    return grid[ok], mean[ok], lo[ok], hi[ok]


def seed_stats(df, by, value):
    """Mean, median, min, max and count of column ``value`` over rows sharing the ``by`` columns (seeds), NaNs
    dropped.

    Returns:
        DataFrame with the ``by`` columns then ``mean, median, min, max, n``, sorted by ``by``; groups whose values
        are all missing are left out.
    """
    by = list(by)
    d = df[by + [value]].copy()
    d = d[np.isfinite(d[value].astype(float))]
    if d.empty:
        return pd.DataFrame(columns=by + ["mean", "median", "min", "max", "n"])
    g = d.groupby(by, dropna=False, sort=True)[value]
    out = g.agg(["mean", "median", "min", "max", "count"]).reset_index().rename(columns={"count": "n"})
    return out
