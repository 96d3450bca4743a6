"""Methods compared over seeds: times to the targets and losses reached with bootstrap intervals, shared ranks,
identical methods merged (async_methods' table, figure and report section; experiments.analysis.statistics).

One comparison is one problem, worker count P and compute-time model; its rows are the methods (``algorithm``),
each over its reported seeds (a tuned sweep's trials live apart, below ``<experiment>/tuning/``). Times are
seconds on the runs' clock to each target of :func:`experiments.analysis.targets.reference_targets` (+inf for a
seed that never reached it, or diverged), losses the final training loss (nats; +inf for a run that diverged).
Without serial runs to set targets, the one target is the problem's configured ``target_loss`` (the summary's
``time_to_target_s``, the same rule).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from omegaconf import OmegaConf

from experiments.analysis.statistics import (
    Interval,
    bootstrap_ci,
    identical_groups,
    shared_ranks,
)
from experiments.analysis.targets import FRACTIONS, label, reference_targets, run_times
from experiments.settings.defaults import CONF_DIR

KEYS = ["problem", "workers", "compute_model"]
CONFIGURED = "configured"
"""The target name when the runs set none: the problem's ``target_loss``."""


def compute_model(row) -> str:
    """The compute-time model of a summary row: ``sqrt``/``linear`` (spread), ``straggler<s>`` (one slow worker),
    ``lognormal<sigma>``, another random law's name, or ``equal``."""
    spread = str(row.get("compute_spread", "equal"))
    if spread in ("sqrt", "linear"):
        return spread
    slow = row.get("straggler_slowdown", 1.0)
    if slow is not None and not (isinstance(slow, float) and math.isnan(slow)) and float(slow) != 1.0:
        return f"straggler{float(slow):g}"
    law = str(row.get("compute_law", "constant"))
    if law == "lognormal":
        return f"lognormal{float(row.get('straggler_sigma', 0.0)):g}"
    return "equal" if law in ("constant", "nan") else law


def targets_of(summary: pd.DataFrame, traces: pd.DataFrame | None) -> tuple[pd.DataFrame, list[str]]:
    """The targets of each problem and the target names to compare by: the serial runs' (``T(1/2)``, ``T(9/10)``,
    :func:`experiments.analysis.targets.reference_targets`) where every problem has them, else the configured one
    (:data:`CONFIGURED`)."""
    t = reference_targets(summary, traces) if traces is not None else pd.DataFrame()
    problems = set(summary["problem"]) if "problem" in summary else set()
    if not t.empty and problems <= set(t["problem"]):
        return t, [label(f) for f in FRACTIONS]
    return pd.DataFrame(), [CONFIGURED]


def comparison(summary: pd.DataFrame, traces: pd.DataFrame | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The comparison table of a summary (module docstring) and the targets it used.

    Returns:
        (table, targets). ``table``: one row per comparison and method (identical methods merged into one row whose
        ``algorithm`` joins their names with `` = ``, ``merged`` the number of methods in it): KEYS, ``algorithm``,
        ``merged``, ``seeds``, ``lr_factor`` and ``policy_size`` (the values its runs used, ``;``-joined when they
        differ), ``discarded_frac`` (mean over seeds), per target name N ``time <N>`` (:class:`Interval`, seconds)
        and ``rank <N>`` (:func:`experiments.analysis.statistics.shared_ranks` within the comparison), ``loss``
        (Interval of the final training loss) and ``rank loss``. ``targets``: :func:`targets_of`'s frame (empty
        for the configured target). Runs that failed are left out; at P = 1 (the reference runs) too.
    """
    s = summary[summary["status"].isin(["ok", "diverged"])].copy() if not summary.empty else summary
    if s.empty:
        return pd.DataFrame(), pd.DataFrame()
    s["compute_model"] = [compute_model(r) for r in s.to_dict("records")]
    targets, names = targets_of(s, traces)
    if names == [CONFIGURED]:
        t = pd.to_numeric(s["time_to_target_s"], errors="coerce")
        s[f"time {CONFIGURED}"] = t.where((s["status"] == "ok") & t.notna(), math.inf)
    else:
        s = run_times(s, traces, targets)
        for f, name in zip(FRACTIONS, names):
            s[f"time {name}"] = s[f"time_to_{f:g}"].where(s["status"] == "ok", math.inf)
    loss = pd.to_numeric(s["final_train_loss"], errors="coerce")
    s["loss"] = loss.where((s["status"] == "ok") & loss.notna(), math.inf)
    grads = pd.to_numeric(s.get("gradients", pd.Series(np.nan, index=s.index)), errors="coerce")
    disc = pd.to_numeric(s["discarded"], errors="coerce") if "discarded" in s else pd.Series(0.0, index=s.index)
    s["discarded_frac"] = disc / grads.where(grads > 0)
    s = s[s["workers"] > 1] if (s["workers"] > 1).any() else s
    s = _one_factor(s, names)
    out = []
    for key, runs in s.groupby(KEYS, sort=True):
        groups = identical_groups(runs, traces=traces)
        merged_into = {m: g for g in groups for m in g}
        rows = []
        for alg in pd.unique(runs["algorithm"]):
            group = merged_into.get(alg, [alg])
            if group[0] != alg:
                continue  # reported once, under the group's first method
            r = runs[runs["algorithm"] == alg]
            members = runs[runs["algorithm"].isin(group)]  # identical runs, possibly under other names and sizes
            row = dict(
                zip(KEYS, key),
                algorithm=" = ".join(group),
                merged=len(group),
                seeds=int(r["seed"].nunique()),
                lr_factor=_values(members.get("lr_factor")),
                policy_size=_policy_size(members),
                discarded_frac=float(r["discarded_frac"].mean()),
            )
            for name in names:
                row[f"time {name}"] = bootstrap_ci(r[f"time {name}"].to_numpy(dtype=float))
            row["loss"] = bootstrap_ci(r["loss"].to_numpy(dtype=float))
            rows.append(row)
        for col in [f"time {n}" for n in names] + ["loss"]:
            for row, rank in zip(rows, shared_ranks([row[col] for row in rows])):
                row[f"rank {col.removeprefix('time ')}"] = rank
        out += rows
    return pd.DataFrame(out), targets


def _one_factor(s: pd.DataFrame, names: list[str]) -> pd.DataFrame:
    """The runs of one step factor per comparison and method: a tuned sweep's reported runs have one already; a
    summary of a grid swept by hand (several factors of a method) keeps the factor run on the most seeds, then the
    one with the lowest mean time to the last target, then the lowest mean loss."""
    if "lr_factor" not in s or s.groupby(KEYS + ["algorithm"])["lr_factor"].nunique().max() <= 1:
        return s
    per = (
        s.groupby(KEYS + ["algorithm", "lr_factor"])
        .agg(seeds=("seed", "nunique"), t=(f"time {names[-1]}", "mean"), loss=("loss", "mean"))
        .reset_index()
        .sort_values(["seeds", "t", "loss"], ascending=[False, True, True])
        .groupby(KEYS + ["algorithm"])
        .head(1)
    )
    return s.merge(per[KEYS + ["algorithm", "lr_factor"]], on=KEYS + ["algorithm", "lr_factor"])


def _values(col) -> str:
    """The distinct values of a column, ``;``-joined (``--`` without)."""
    if col is None:
        return "--"
    vals = sorted({float(v) for v in pd.to_numeric(col, errors="coerce").dropna()})
    return ";".join(f"{v:g}" for v in vals) or "--"


def _policy_size(runs: pd.DataFrame) -> str:
    """Ringmaster's R or Rennala's S of the runs (``R=8``), "" for other policies."""
    for col, key in (("policy_R", "R"), ("policy_S", "S")):
        if col in runs and pd.to_numeric(runs[col], errors="coerce").notna().any():
            return f"{key}={_values(runs[col])}"
    return ""


def replication_seeds(experiment: str) -> list[int]:
    """The seeds experiment ``experiment`` runs as a replication (``report.replication_seeds`` of
    conf/experiment/<experiment>.yaml; [] without): its tables and figures leave them out, the report checks them
    against the reported seeds (:func:`replication_check`)."""
    path = CONF_DIR / "experiment" / f"{experiment}.yaml"
    if not path.is_file():
        return []
    block = OmegaConf.to_container(OmegaConf.load(path)).get("report") or {}
    return [int(x) for x in block.get("replication_seeds") or []]


def split_replication(
    summary: pd.DataFrame, traces: pd.DataFrame | None, seeds
) -> tuple[tuple[pd.DataFrame, pd.DataFrame | None], tuple[pd.DataFrame, pd.DataFrame | None]]:
    """The reported runs and the replication's: a comparison rerun on new seeds (``seeds``, the
    ``report.replication_seeds`` of an experiment yaml) is judged on its own, with targets from its own serial runs,
    so that the reported tables stay those of the reported seeds. Returns ``((summary, traces), (summary, traces))``,
    reported first; the traces (None stays None) keep the runs of their summary only (column ``run_id``)."""
    seeds = {int(x) for x in (seeds or ())}
    if summary.empty or "seed" not in summary or not seeds:
        return (summary, traces), (summary.iloc[0:0], None if traces is None else traces.iloc[0:0])
    repl = pd.to_numeric(summary["seed"], errors="coerce").isin(seeds)

    def part(rows: pd.DataFrame):
        if traces is None or traces.empty or "run_id" not in traces:
            return rows, traces
        return rows, traces[traces["run_id"].isin(set(rows["run_id"]))]

    return part(summary[~repl]), part(summary[repl])


def ranking(table: pd.DataFrame, hardest: str) -> tuple[list[tuple[float, str]], list[tuple[float, str]]]:
    """One problem and P of :func:`comparison`'s table, as the report ranks it: the methods that reached target
    ``hardest`` on some seed, by mean shared rank of their time over the compute models; then the others, by mean
    shared rank of their final loss. Merged rows (``a = b``) count for each of their methods. Returns
    ``(reached, never)``, each a list of ``(mean rank, method)`` in rank order (ties by name)."""
    member = table.assign(algorithm=table["algorithm"].str.split(" = ")).explode("algorithm")
    by_time = member.groupby("algorithm")[f"rank {hardest}"].mean()
    got = set(member.loc[[math.isfinite(iv.lo) for iv in member[f"time {hardest}"]], "algorithm"])
    by_loss = member.groupby("algorithm")["rank loss"].mean()
    reached = sorted((float(v), k) for k, v in by_time.items() if k in got)
    never = sorted((float(v), k) for k, v in by_loss.items() if k not in got)
    return reached, never


def replication_check(first: tuple[list, list], second: tuple[list, list], top: int = 3) -> tuple[bool, str]:
    """Whether a ranking's top ``top`` methods keep their order on new seeds. ``first``, ``second``: the reported
    seeds' and the new seeds' :func:`ranking` (methods that reached the target ahead of those that did not, each
    part by its mean shared rank). Two methods change places when each ranking puts a different one strictly ahead;
    methods tied in either ranking (equal mean shared rank, intervals that overlap on every compute model) may come
    in either order. Returns ``(holds, words)``: holds is True when no two methods of either top ``top`` change
    places (the same top in the same order, or differences within noise)."""

    def keyed(parts):
        return {m: (i, r) for i, part in enumerate(parts) for r, m in part}

    ka, kb = keyed(first), keyed(second)
    order = lambda k: sorted(k, key=lambda m: (k[m], m))  # noqa: E731
    a, b = order(ka)[:top], order(kb)[:top]
    both = [m for m in dict.fromkeys(a + b) if m in ka and m in kb]

    def sign(k, x, y):
        return (k[x] > k[y]) - (k[x] < k[y])

    flips = [f"{x} and {y}" for i, x in enumerate(both) for y in both[i + 1 :] if sign(ka, x, y) * sign(kb, x, y) < 0]
    if a == b:
        return not flips, f"the same top {top} in the same order ({', '.join(a)})"
    words = f"top {top}: {', '.join(a)} on the reported seeds, {', '.join(b)} on the new seeds"
    if not flips:
        return True, words + " (within noise: the methods that change places share a rank in one of the two)"
    return False, words + " (" + "; ".join(flips) + " change places)"


def mean_ranks(table: pd.DataFrame, column: str) -> pd.Series:
    """Each method's mean of ``column`` (a rank) over the compute models of one problem and P, indexed by method."""
    return table.groupby("algorithm", sort=False)[column].mean()


__all__ = [
    "CONFIGURED",
    "KEYS",
    "Interval",
    "comparison",
    "compute_model",
    "mean_ranks",
    "ranking",
    "replication_check",
    "replication_seeds",
    "split_replication",
    "targets_of",
]
