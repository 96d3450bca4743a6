"""The regime in which the paper makes each claim, and the rules that judge a claim inside it.

A claim is tested only inside the condition under which the paper makes it:

- **staleness against the budget** (paper Sec. 3, Theorem 1 and its corollary): APAM converges as with no delay
  when the delay tau <= K^(1/4), K the number of updates. A worker count P is inside the regime when the run's
  staleness tau (``staleness_max`` under a fixed or uniform delay, ``staleness_mean`` under the timing model, where
  tau is about P - 1) is <= K^(1/4). At the paper's LeNet5 budget (200 epochs of MNIST at batch 40, K = 300,000)
  K^(1/4) = 23 covers P = 20; at 2 epochs of a 15,000-image subset (K = 750) it is 5.2.
- **budget**: accuracy claims are made after the model has converged (paper: 100-400 epochs). Inside the regime
  means the P = 1 run has plateaued: its test accuracy rose by less than ``PLATEAU_GAIN`` over the last
  ``PLATEAU_TAIL`` of its epochs (evaluations in trace.csv; with fewer than 4 evaluations it cannot be told: outside).
- **seeds**: every accuracy or comparison claim needs >= ``MIN_SEEDS`` seeds at every setting it compares.
- **artificial delay** (Sec. 5.4): a max delay D draws from the min(D, k + 1) newest iterates, so D means something
  only when K >= ``DELAY_SPAN`` * D (the full range is reached within the first 1 / DELAY_SPAN of the run); D >= K is
  degenerate (never reached). "Every delay reaches the same accuracy" is said after 400 epochs, of delays the paper
  shows behind for the first 200 (D >= ``LAG_DELAY``: ``LAG_UPDATES`` updates), so those count only when K >=
  LAG_UPDATES, and a delay further off than 0.02 whose accuracy is still rising at the end of the run (not
  plateaued, as above) has not ended up anywhere yet: outside the regime, not a failure.

Outside the regime the verdict is ``outside regime`` with the reason (``K = ..., tau = ...``), never
``not reproduced``. Inside it, claims with the paper's numbers are judged two-sided (:func:`compare_to_paper`):
within ``PAPER_BAND`` of the paper is ``reproduced``, below is ``not reproduced``, above is ``above the paper`` (a
finding, not a silent pass).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import pandas as pd

from experiments.report.verdict import ABOVE, Verdict

MIN_SEEDS = 3  # seeds needed at every compared setting of an accuracy or comparison claim
PLATEAU_GAIN = 0.01  # P = 1 has plateaued: test accuracy gained < this over the last PLATEAU_TAIL of the run
PLATEAU_TAIL = 0.25  # ... fraction of the run's epochs
PAPER_BAND = 0.25  # two-sided rule: |ours - paper| <= PAPER_BAND * paper at every compared worker count
DELAY_SPAN = 10  # a max delay D is inside the regime when K >= DELAY_SPAN * D
# Sec. 5.4 (Fig. 9): delays 200 and 400 are behind over the first ~200 epochs (CIFAR-10's 50,000 images at batch 100:
# 100,000 updates) before all delays reach 0.88-0.89 after 400; "the same accuracy" speaks of D >= LAG_DELAY only
# after LAG_UPDATES updates
LAG_DELAY, LAG_UPDATES = 200, 100_000
CHANCE_MARGIN = 0.10  # accuracy claims need the best run this far above chance (1 / classes) to be decided
OUTSIDE_WORDS = "outside the claim's regime"
"""How a verdict's conditions name worker counts or delays left out of a judged claim."""


def k_quarter(updates: float) -> float:
    """K^(1/4) of a run of ``updates`` master updates (the paper's delay bound, Sec. 3)."""
    return float(updates) ** 0.25 if updates and updates > 0 else 0.0


def run_tau(rows: pd.DataFrame) -> float:
    """The staleness tau of a set of runs (one setting, several seeds), in updates.

    ``staleness_max`` when the delay is fixed or uniform (an imposed bound); ``staleness_mean`` under the timing
    model (the max there is a tail event; the mean is about P - 1 at P workers, the paper's tau). NaN without data.
    """
    if rows.empty:
        return float("nan")
    model = str(rows["delay_model"].iloc[0]) if "delay_model" in rows else "timing"
    col = "staleness_max" if model in ("fixed", "uniform") else "staleness_mean"
    v = pd.to_numeric(rows.get(col, pd.Series(dtype=float)), errors="coerce").dropna()
    return float(v.max()) if len(v) else float("nan")


def tau_regime(ok: pd.DataFrame, by: str = "workers") -> tuple[list, list, str]:
    """Split the settings of ``by`` into (inside, outside, text) by tau <= K^(1/4) (K: the runs' mean updates).

    ok: summary rows with status ok. Returns the values of ``by`` inside and outside, and a text such as
    ``K = 750 (K^(1/4) = 5.2); tau = 0 (P=1), 19 (P=20)``.
    """
    inside, out, parts = [], [], []
    K = float(pd.to_numeric(ok["updates"], errors="coerce").mean()) if len(ok) else 0.0
    for v, rows in ok.groupby(by):
        tau = run_tau(rows)
        (inside if not (tau > k_quarter(K)) else out).append(v)
        parts.append(f"{tau:.3g} ({'P' if by == 'workers' else by}={v})")
    return inside, out, f"K = {K:.0f} (K^(1/4) = {k_quarter(K):.1f}); tau = {', '.join(parts)}"


class Plateau(NamedTuple):
    """Whether runs plateaued (None: cannot be told), the sentence saying so, and the mean accuracy gain (NaN when
    it cannot be told)."""

    flat: bool | None
    text: str
    gain: float = math.nan


def plateaued(traces: pd.DataFrame, run_ids, label: str = "P = 1") -> Plateau:
    """Did these runs' test accuracy plateau? (mean over runs of the gain over the last PLATEAU_TAIL of epochs).

    ``label`` names the runs in the text (``P = 1``, ``delay 200``). Returns (True/False, text, gain) or (None,
    reason) when it cannot be told (no traces, < 4 evaluations).
    """
    if traces is None or traces.empty or "test_acc" not in traces:
        return Plateau(None, "no trace")
    tr = traces[traces["run_id"].isin(list(run_ids))].dropna(subset=["test_acc"])
    gains = []
    for _, t in tr.groupby("run_id"):
        t = t.sort_values("epoch")
        if len(t) < 4:
            return Plateau(None, f"{len(t)} evaluations")
        end = float(t["epoch"].max())
        start = end * (1 - PLATEAU_TAIL)
        before = t[t["epoch"] <= start]["test_acc"]
        if before.empty:
            return Plateau(None, "no evaluation before the last quarter")
        gains.append(float(t["test_acc"].iloc[-1]) - float(before.iloc[-1]))
    if not gains:
        return Plateau(None, "no runs")
    g = sum(gains) / len(gains)
    return Plateau(
        g < PLATEAU_GAIN, f"{label} test accuracy gained {g:+.3f} over the last {PLATEAU_TAIL:.0%} of its epochs", g
    )


def seeds_ok(ok: pd.DataFrame, keys: list[str]) -> tuple[bool, int]:
    """(every setting of ``keys`` has >= MIN_SEEDS seeds, the smallest seed count)."""
    if ok.empty:
        return False, 0
    n = int(ok.groupby(keys)["seed"].nunique().min())
    return n >= MIN_SEEDS, n


class Comparison(NamedTuple):
    """The two-sided rule's outcome: the verdict (None: nothing to compare), the evidence, and the worker count that
    decides it with our number and the paper's there (the count farthest from the paper in the verdict's
    direction)."""

    verdict: Verdict | None
    evidence: str
    at: int | None = None
    ours: float = math.nan
    paper: float = math.nan


def compare_to_paper(ours: pd.Series, paper: pd.Series, band: float = PAPER_BAND) -> Comparison:
    """Two-sided rule against the paper's numbers (e.g. speed-up per worker count, both indexed by workers).

    Compared at the common index values other than 1: ``reproduced`` within ``band`` * paper everywhere, ``not
    reproduced`` below by more than that somewhere, ``above the paper`` above by more than that somewhere and never
    below; no verdict when there is nothing to compare.
    """
    common = [p for p in ours.index.intersection(paper.index) if p != 1 and not math.isnan(ours[p])]
    if not common:
        return Comparison(None, "no worker count in common with the paper")
    rel = {p: (float(ours[p]) - float(paper[p])) / float(paper[p]) for p in common}
    ev = ", ".join(
        f"P={p}: {float(ours[p]):.2f} vs paper {float(paper[p]):.2f} ({100 * r:+.0f}%)" for p, r in rel.items()
    )
    if any(r < -band for r in rel.values()):
        verdict, at = Verdict.judged(False), min(rel, key=rel.get)
    elif any(r > band for r in rel.values()):
        verdict, at = Verdict(ABOVE, f"finding: more than {band:.0%} above it"), max(rel, key=rel.get)
    else:
        verdict, at = Verdict.judged(True), max(rel, key=lambda p: abs(rel[p]))
    return Comparison(verdict, ev, int(at), float(ours[at]), float(paper[at]))


def degenerate_delays(ok: pd.DataFrame) -> list:
    """The max delays D of ``ok`` that are >= the run's update count K (never reached: the run is degenerate)."""
    if ok.empty or "max_delay" not in ok:
        return []
    return sorted({int(r.max_delay) for r in ok.itertuples() if r.max_delay > 0 and r.max_delay >= r.updates})


def classes(ok: pd.DataFrame) -> int:
    """How many classes the runs' problem has: 2 for logistic regression (``logreg_*``), else 10 (the CNNs)."""
    return 2 if str(ok["problem"].iloc[0]).startswith("logreg") else 10


def learned(ok: pd.DataFrame, n_classes: int = 10) -> bool:
    """Did the runs learn anything? The best final test accuracy is at least CHANCE_MARGIN above chance."""
    acc = pd.to_numeric(ok.get("final_test_acc", pd.Series(dtype=float)), errors="coerce")
    return bool(len(acc.dropna())) and acc.max() >= 1.0 / n_classes + CHANCE_MARGIN


def at_chance(ok: pd.DataFrame, n_classes: int) -> str:
    """The runs whose final training loss is at chance level (>= 0.99 ln(classes): the model predicts a uniform
    distribution, e.g. 2.303 nats for 10 classes), named as ``async_sgd P=20 seed 2 (2.303)``; "" when none. Such a
    run ends with status ok but counts in a mean over seeds like any other."""
    bad = ok[pd.to_numeric(ok["final_train_loss"], errors="coerce") >= 0.99 * math.log(n_classes)]
    return ", ".join(
        f"{r.algorithm} P={int(r.workers)} seed {int(r.seed)} ({r.final_train_loss:.3f})"
        for r in bad.sort_values(["algorithm", "workers", "seed"]).itertuples()
    )


def paper_problem(ok: pd.DataFrame, paper: pd.DataFrame) -> bool:
    """Did the runs solve the paper's own problem (so the paper's accuracy is a target), not a stand-in?"""
    return not paper.empty and not ok.empty and set(ok["problem"].astype(str)) <= set(paper["problem"].astype(str))


def not_enough(seeds: int) -> str:
    """The reason a setting with ``seeds`` seeds is outside the regime: ``1 seed(s) < 3``."""
    return f"{seeds} seed(s) < {MIN_SEEDS}"
