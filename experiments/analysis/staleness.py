"""The runs' staleness histograms (``runs/<run_id>/staleness.csv``) and how far a measured run's lies from its
simulated twin's.

Staleness is counted in master updates: the number of updates applied between the iterate a gradient was computed
at and the update that applies it (paper Sec. 2, tau_k).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from experiments.store.table import run_frames
from plots.validation import KEYS, SETTING, _with_setting

TV_COLUMN = "tau hist TV"


def histograms(exp_dir: Path) -> pd.DataFrame:
    """Every run's staleness histogram below ``exp_dir/runs``: columns run_id, staleness (updates), count (empty
    when no run has one). A file that cannot be read whole is left out, named (experiments/store/table.py
    :func:`run_frames`)."""
    frames = run_frames(exp_dir, "staleness.csv", ("staleness", "count"), ("staleness", "count"))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["run_id", "staleness", "count"])


def staleness_tv(ok: pd.DataFrame, hists: pd.DataFrame) -> pd.DataFrame:
    """The shape of the staleness histogram, measured against simulated: for each measured run (clock ``wall``) of
    the summary rows ``ok``, the total variation distance 0.5 * sum |p - q| between its staleness distribution and
    that of its simulated twin (same problem, algorithm, workers, setting, seed; the clock modelled the measured
    engine). 0: the same shape; 1: disjoint. ``hists``: :func:`histograms`. Returns KEYS + SETTING + engine +
    ``tau hist TV`` (mean over seeds; plots.validation names KEYS and SETTING)."""
    cols = KEYS + SETTING + ["engine", TV_COLUMN]
    if ok.empty or hists.empty:
        return pd.DataFrame(columns=cols)
    s = _with_setting(ok)
    dist = {rid: g.set_index("staleness")["count"] / g["count"].sum() for rid, g in hists.groupby("run_id")}
    key = KEYS + SETTING + ["seed"]
    sim = {tuple(r[k] for k in key): r["run_id"] for r in s[s["clock"] == "simulated"].to_dict("records")}
    rows = []
    for r in s[s["clock"] == "wall"].to_dict("records"):
        twin = sim.get(tuple(r[k] for k in key))
        if twin not in dist or r["run_id"] not in dist:
            continue
        p, q = dist[r["run_id"]], dist[twin]
        tv = 0.5 * float(p.sub(q, fill_value=0.0).abs().sum())
        rows.append({**{k: r[k] for k in KEYS + SETTING + ["engine"]}, TV_COLUMN: tv})
    if not rows:
        return pd.DataFrame(columns=cols)
    return pd.DataFrame(rows).groupby(KEYS + SETTING + ["engine"], dropna=False, as_index=False)[TV_COLUMN].mean()
