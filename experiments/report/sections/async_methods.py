"""Sections ``async_methods`` and ``async_methods_real`` (beyond the paper): APAM ranked among today's asynchronous
methods by time to target on the simulated clock, and the same ranking measured on the real engines.

async_methods' numbers come from experiments.analysis.comparisons: per problem, P and compute-time model, each
method's mean time to each target over its seeds with a 95% bootstrap interval, ranks shared where intervals
overlap, identical methods merged; the targets from the serial runs (experiments.analysis.targets); the tuned
step factors and policy sizes from tuning.csv (experiments/sweeps/tuning.py). async_methods_real's from summary.csv
through plots.async_methods (``engine_pairs``: each measured time beside its simulated twin's).
"""

from __future__ import annotations

import math

import pandas as pd
from scipy.stats import kendalltau

from experiments.analysis.comparisons import (
    CONFIGURED,
    comparison,
    compute_model,
    replication_seeds,
    split_replication,
)
from experiments.analysis.statistics import LEVEL, RESAMPLES
from experiments.analysis.targets import FRACTIONS, label
from experiments.engines.emulation import OVERRUN_FLAG
from experiments.report.load import Experiment
from experiments.report.markdown import table
from experiments.report.rules import MIN_SEEDS
from experiments.report.sections.base import Section
from experiments.report.sections.replication import replication_text
from experiments.report.verdict import REPRODUCED, Claim, Verdict, finding, inconclusive
from plots.async_methods import METHODS, MODEL_LABELS, MODELS, engine_pairs, fmt_time
from plots.validation import FLAG_MEANING

WU_READING = (
    "\nThe `*_wu` methods use our reading of Wu et al. (ICML 2022)'s step-size principle, not checked "
    "against their text or code: each update's step is the method's own times s_k = max(0, 1 - the sum "
    "of the factors s of the tau_k updates applied while its gradient was computed).\n"
)
"""One sentence: what the harness's wu2022 policy does (experiments/training/policies.py)."""

RANK_AGREEMENT = 0.8
"""Kendall tau-b between the measured and the simulated times to target at or above which the rankings agree."""


def _order(values, order):
    """``values`` in the order of ``order``, the others after them, sorted."""
    return [v for v in order if v in values] + sorted(v for v in values if v not in order)


def _label(model: str) -> str:
    """A compute-time model's name in the report (``straggler8`` -> ``one 8x straggler``)."""
    return MODEL_LABELS.get(model, model)


def _method_order(methods) -> list[str]:
    """Methods (merged ones as ``a = b``) in METHODS order of their first name, the others after them."""

    def key(m):
        first = m.split(" = ")[0]
        return (METHODS.index(first) if first in METHODS else len(METHODS), m)

    return sorted(set(methods), key=key)


def targets_text(summary: pd.DataFrame, targets: pd.DataFrame, names: list[str]) -> str:
    """What the targets are, per problem, and the rules of the numbers in the tables."""
    if names == [CONFIGURED]:
        parts = [
            f"{prob}: training loss {float(t.iloc[0]):g}"
            for prob, t in summary.groupby("problem", sort=True)["target_loss"]
        ]
        head = (
            "Target: the configured `target_loss` of each problem (no serial runs here to set targets from): "
            + "; ".join(parts)
            + "."
        )
    else:
        parts = []
        for r in targets.to_dict("records"):
            levels = ", ".join(f"{label(f)} = {r[f'target_{f:g}']:.4g}" for f in FRACTIONS)
            parts.append(
                f"{r['problem']}: {levels} (reference {r['reference']} at P = 1, {r['seeds']} seed(s), "
                f"{r['epochs']:.3g} epochs; its final loss {r['final_loss']:.4g})"
            )
        head = (
            "Targets, set by the runs (experiments/analysis/targets.py): the training loss the best serial method "
            "(lowest mean final loss at P = 1) reached at half and at nine tenths of its budget, mean over its "
            "seeds -- " + "; ".join(parts) + "."
        )
    return (
        head + " Time to a target: seconds on the simulated clock, interpolated between the last evaluation "
        "above the target and the next one, and counted only when the run stays at or below it from there on "
        "(a run that diverged never reached it); each cell is the mean over the reported seeds with its "
        f"{LEVEL:.0%} bootstrap interval (percentile, {RESAMPLES:,} resamples, seeded; `not reached` when a seed "
        "missed it) and #rank, shared by methods whose intervals overlap (1 + the methods wholly faster); "
        "methods whose runs are identical to the last bit on every seed are one row (`a = b`).\n"
    )


def _cell(row: pd.Series, col: str, rank: str) -> str:
    """``mean [lo, hi] #rank`` of one method in one comparison."""
    return f"{row[col].text()} #{int(row[rank])}"


def _words(name: str) -> str:
    """A target's name in prose: ``T(9/10)``, or ``the configured target``."""
    return "the configured target" if name == CONFIGURED else name


def tuning_text(tuning: pd.DataFrame) -> str:
    """The tuned values, one row per setting (tuning.csv), and the choices at an edge the extension could not
    leave, named; "" without a tuning."""
    if tuning.empty:
        return ""
    t = tuning.copy()
    t["compute model"] = [_label(_model_of(r)) for r in t.to_dict("records")]
    t["R / S"] = [
        " ".join(f"{k}={int(float(r[k]))}" for k in ("R", "S") if k in r and _given(r[k])) for r in t.to_dict("records")
    ]
    t["at edge"] = t["at_edge"].astype(object).fillna("").astype(str).replace("nan", "")
    t = t.sort_values(["problem", "workers", "algorithm", "compute model"])
    rows = t.rename(
        columns={"lr_factor": "factor", "factors_tried": "factors tried", "policy_tried": "R / S tried", "workers": "P"}
    )[["problem", "algorithm", "P", "compute model", "factor", "R / S", "at edge", "factors tried", "R / S tried"]]
    rows["R / S tried"] = rows["R / S tried"].astype(object).fillna("").astype(str).replace("nan", "")
    edges = t[t["at edge"] != ""]
    seed = int(t["tuning_seed"].iloc[0]) if "tuning_seed" in t else None
    trials = int(pd.to_numeric(t["trials"], errors="coerce").sum())
    intro = (
        f"\nStep sizes tuned on seed {seed} (never a reported seed; experiments/sweeps/tuning.py): per method, "
        "problem, P and compute model, the factors of the default step in `factors tried` (the grid of "
        "`tuning`, extended by one factor while the best was the smallest or largest tried, up to its limit), "
        "then Ringmaster's R / Rennala's S at the chosen step; the choice is the shortest time to the problem's "
        "`target_loss` (staying below it), ties by the loss reached, then by the run's time. "
        f"{len(t)} settings, {trials} trials."
    )
    out = [intro, ""]
    if len(edges):
        out.append(
            f"**Choices at an edge the extension could not leave ({len(edges)}; the best step may lie beyond "
            "the factors tried):** "
            + "; ".join(
                f"{r['problem']} {r['algorithm']} P = {int(r['workers'])} {r['compute model']}: "
                f"x{r['lr_factor']:g} ({r['at edge']})"
                for r in edges.to_dict("records")
            )
            + "."
        )
    else:
        out.append("No choice is at an edge of the factors tried.")
    out.append("\n<details><summary>The tuned values (tuning.csv)</summary>\n\n" + table(rows) + "\n</details>\n")
    return "\n".join(out)


def _given(v) -> bool:
    """A tuning.csv cell holds a value (not empty, not NaN)."""
    return v is not None and str(v) not in ("", "nan")


def _model_of(row: dict) -> str:
    return compute_model(row)


def section_async_methods(data: Experiment) -> Section:
    """Per problem, P and compute-time model, one table: the methods (identical ones merged) with their time to each
    target and final training loss (mean [95% bootstrap interval] #shared rank) and the step factor (and R / S)
    their runs used; per problem and P the ranking by mean rank over the compute models at the hardest target and
    one finding saying where APAM stands; then the tuned values (tuning.csv) and the choices left at an edge."""
    (summary, traces), (replica, replica_traces) = split_replication(
        data.summary, data.traces, replication_seeds(data.name)
    )
    tab, targets = comparison(summary, traces)
    if tab.empty:
        return Section()
    names = [c.removeprefix("time ") for c in tab.columns if c.startswith("time ")]
    hardest = names[-1]
    out, claims = [targets_text(summary, targets, names)], []
    for (problem, p), rows in tab.groupby(["problem", "workers"], sort=True):
        models = _order(set(rows["compute_model"]), MODELS)
        for model in models:
            col = rows[rows["compute_model"] == model]
            lines = []
            for meth in _method_order(col["algorithm"]):
                r = col[col["algorithm"] == meth].iloc[0]
                disc = f"{r['discarded_frac']:.0%}" if r["discarded_frac"] > 0 else ""
                lines.append(
                    {
                        "method": meth,
                        **{
                            f"time to {n} (s)" if n != CONFIGURED else "time to target (s)": _cell(
                                r, f"time {n}", f"rank {n}"
                            )
                            for n in names
                        },
                        "final loss": _cell(r, "loss", "rank loss"),
                        "step factor": r["lr_factor"],
                        "R / S": r["policy_size"],
                        "discarded": disc,
                    }
                )
            lo, hi = int(col["seeds"].min()), int(col["seeds"].max())
            seeds = f"{lo} seed{'s' if hi > 1 else ''}" if lo == hi else f"{lo}-{hi} seeds"
            out.append(
                f"\n**{problem}, P = {p}, {_label(model)}** ({seeds}; simulated s and nats; mean "
                f"[{LEVEL:.0%} interval] #shared rank):\n"
            )
            out.append(table(pd.DataFrame(lines)))
            merged = col[col["merged"] > 1]
            if len(merged):
                out.append(
                    "Identical runs, one row (the same losses and times to the last bit on every seed): "
                    + "; ".join(merged["algorithm"])
                    + ".\n"
                )
        member = rows.assign(algorithm=rows["algorithm"].str.split(" = ")).explode("algorithm")
        mean_rank = member.groupby("algorithm")[f"rank {hardest}"].mean()
        reached = set(member.loc[[math.isfinite(iv.lo) for iv in member[f"time {hardest}"]], "algorithm"])
        methods = _method_order(member["algorithm"])
        order = sorted((v, k) for k, v in mean_rank.items() if k in reached)
        never = [k for k in methods if k not in reached]
        out.append(
            f"\n**{problem}, P = {p}:** ranking by mean shared rank at {_words(hardest)} over the compute "
            "models (methods that reached it on some seed): "
            + (", ".join(f"{k} ({v:.1f})" for v, k in order) or "none")
            + (f"; never reached it: {', '.join(never)}" if never else "")
            + ".\n"
        )
        if never and int(p) > 1:  # why, and how those methods compare among themselves
            loss_rank = member.groupby("algorithm")["rank loss"].mean()
            by_loss = sorted((loss_rank[k], k) for k in never if k in loss_rank)
            source = (
                "the problem's configured target_loss"
                if hardest == CONFIGURED
                else "the targets are losses the serial reference reached at half and nine tenths of this same "
                "budget of samples"
            )
            out.append(
                f"Why never: {source}; with P = {p} workers the gradients are stale, and these methods end the "
                "budget above the target on every seed. Among them, by mean shared rank of the final loss over the "
                "compute models: " + ", ".join(f"{k} ({v:.1f})" for v, k in by_loss) + ".\n"
            )
        if "apam" not in mean_rank:
            continue
        key = f"finding ({problem}, P={p}): where APAM stands among {len(methods)} methods"
        common = {
            "key": key,
            "text": key,
            "timed": True,
            "problem": problem,
            "decided_by": f"APAM's mean shared rank at {hardest}",
            "name": f"finding: APAM's rank ({problem}, P={p})",
        }
        seeds = int(rows["seeds"].min())
        few = f"; {seeds} seed(s) < {MIN_SEEDS}" if seeds < MIN_SEEDS else ""
        if "apam" not in reached:
            claims.append(
                Claim(
                    verdict=finding("APAM never reached the target" + few),
                    ours="never reached",
                    evidence=f"APAM did not reach {_words(hardest)} on any seed under any compute model; "
                    f"methods that did: {', '.join(k for _, k in order) or 'none'}",
                    **common,
                )
            )
            continue
        better = [k for k, v in mean_rank.items() if v < mean_rank["apam"]]
        per_model = []
        for r in member[member["algorithm"] == "apam"].itertuples():
            row = rows[
                (rows["compute_model"] == r.compute_model)
                & rows["algorithm"].str.split(" = ").map(lambda ms: "apam" in ms)
            ].iloc[0]
            same = [m for m in row["algorithm"].split(" = ") if m != "apam"]
            identical = "; identical to " + ", ".join(same) if same else ""
            per_model.append(
                f"{_label(r.compute_model)} #{int(row[f'rank {hardest}'])} "
                f"({row[f'time {hardest}'].text()} s{identical})"
            )
        gist = f"APAM mean rank {mean_rank['apam']:.1f}, {len(better)} method(s) ahead" + few
        claims.append(
            Claim(
                verdict=finding(gist),
                ours=f"mean rank {mean_rank['apam']:.1f}",
                evidence="APAM at "
                + _words(hardest)
                + ": "
                + "; ".join(per_model)
                + (f"; ahead of it by mean rank: {', '.join(better)}" if better else ""),
                **common,
            )
        )
    if any(str(a).endswith("_wu") for a in data.summary["algorithm"].unique()):
        out.append(WU_READING)
    text, claim = replication_text(tab, names, comparison(replica, replica_traces))
    out.append(text)
    claims += [claim] if claim is not None else []
    out.append(tuning_text(data.tuning))
    return Section("\n".join(out), tuple(claims))


def section_async_methods_real(data: Experiment) -> Section:
    """Per problem, P and compute-time model, each method's time to target (seconds) measured on each real engine
    beside its simulated twin, with ranks; per engine and compute model the rank agreement (Kendall tau-b, the
    fastest method on each side; tied fastest methods joined by " = ", agreeing when the two sets share one). The
    claims: our goal (tau >= RANK_AGREEMENT and the same fastest method in every column; columns whose measured runs
    overran more than OVERRUN_FLAG of their gradients do not test the clock and are named) and one finding per
    column on where APAM stands."""
    summary = data.summary
    pairs = engine_pairs(summary)
    if pairs.empty:
        return Section("_No measured run has a simulated twin._\n")
    out, verdicts, flagged, claims = [], [], [], []
    for (problem, p, model), rows in pairs.groupby(["problem", "workers", "compute_model"], sort=True):
        engines = sorted(rows["engine"].unique())
        methods = _order(set(rows["algorithm"]), METHODS)
        lines = []
        for meth in methods:
            cells = {"method": meth}
            for e in engines:
                r = rows[(rows["engine"] == e) & (rows["algorithm"] == meth)]
                if r.empty:
                    cells.update({f"{e} measured": "--", f"{e} simulated": "--"})
                    continue
                r = r.iloc[0]
                over = r["overrun_frac"]
                flag = f", {over:.0%} not run as asked" if not math.isnan(over) and over > OVERRUN_FLAG else ""
                cells[f"{e} measured"] = f"{fmt_time(r['measured_s'])} (#{int(r['rank_measured'])}{flag})"
                cells[f"{e} simulated"] = f"{fmt_time(r['simulated_s'])} (#{int(r['rank_simulated'])})"
            lines.append(cells)
        agree = []
        for e in engines:
            col = rows[rows["engine"] == e]
            big = 1e6  # a method that never reached the target ranks last on its side
            m = col["measured_s"].replace(math.inf, big).to_numpy(dtype=float)
            s = col["simulated_s"].replace(math.inf, big).to_numpy(dtype=float)
            tau = float(kendalltau(m, s).statistic) if len(col) > 1 else math.nan
            fm = " = ".join(col.loc[col["measured_s"] == col["measured_s"].min(), "algorithm"])  # ties shown
            fs = " = ".join(col.loc[col["simulated_s"] == col["simulated_s"].min(), "algorithm"])
            bad = col[col["overrun_frac"] > OVERRUN_FLAG]["algorithm"].tolist()
            if bad:
                flagged.append(f"{e}, {_label(model)}: {', '.join(bad)}")
            ok = bool(tau >= RANK_AGREEMENT and set(fm.split(" = ")) & set(fs.split(" = ")))
            said = f"{e} / {_label(model)}: tau {tau:.2f}, fastest {fm} measured, {fs} simulated"
            verdicts.append((ok, bool(bad), said))
            agree.append(f"{e}: Kendall tau {tau:.2f}, fastest measured {fm}, simulated {fs}")
        out.append(
            f"\n**{problem}, P = {p}, {_label(model)}** -- time to target train loss "
            f"{summary.loc[summary['problem'] == problem, 'target_loss'].iloc[0]:g} (s; #rank among "
            f"{len(methods)} methods on that side):\n"
        )
        out.append(
            table(
                pd.DataFrame(
                    lines, columns=["method"] + [f"{e} {side}" for e in engines for side in ("measured", "simulated")]
                )
            )
        )
        out.append("Rank agreement: " + "; ".join(agree) + ".\n")
        if "apam" in methods:
            apam = rows[rows["algorithm"] == "apam"]
            ranks_txt = ", ".join(
                f"{r.engine} #{int(r.rank_measured)} measured / #{int(r.rank_simulated)} simulated"
                for r in apam.itertuples()
            )
            key = f"finding ({problem}, P={p}, {_label(model)}): APAM's rank on real engines and on the simulated clock"
            claims.append(
                Claim(
                    key=key,
                    text=key,
                    verdict=finding(),
                    evidence=ranks_txt,
                    name=f"finding: APAM's rank, measured vs simulated ({_label(model)})",
                    decided_by="APAM's rank, measured / simulated",
                    ours=", ".join(
                        f"#{int(r.rank_measured)}/#{int(r.rank_simulated)} {r.engine}" for r in apam.itertuples()
                    ),
                )
            )
    tested = [v for v in verdicts if not v[1]]
    verdict = (
        Verdict.judged(all(v[0] for v in tested))
        if tested
        else inconclusive("every column had runs above the overrun flag: none could be counted")
    )
    seeds = int(summary.groupby(["problem", "workers", "algorithm", "engine"])["seed"].nunique().min())
    if verdict.cls == REPRODUCED and seeds < MIN_SEEDS:  # a ranking from one seed can turn on a millisecond
        verdict = inconclusive(f"{seeds} seed(s) < {MIN_SEEDS}; agreement on every counted column")
    goal = (
        f"goal (ours): the simulated clock ranks the methods as the real engines do (Kendall tau-b >= "
        f"{RANK_AGREEMENT:g} and the same fastest method, per engine and compute-time model, >= {MIN_SEEDS} seeds; "
        f"columns with overruns above {100 * OVERRUN_FLAG:.0f}% do not count)"
    )
    claims.append(
        Claim(
            key=goal,
            text=goal,
            verdict=verdict,
            name="goal: simulated clock ranks methods as measured",
            evidence=f"{len(tested)} of {len(verdicts)} columns counted: "
            + "; ".join(v[2] + (" (overruns: not counted)" if v[1] else "") for v in verdicts),
            decided_by=f"counted columns that agree (rule: all, tau >= {RANK_AGREEMENT:g})",
            ours=f"{sum(v[0] for v in tested)} of {len(tested)}",
        )
    )
    if flagged:
        out.append(
            f"\n**Flagged:** measured runs with more than {100 * OVERRUN_FLAG:.0f}% of their gradients off "
            f"target ({FLAG_MEANING}): " + "; ".join(flagged) + ".\n"
        )
    return Section("\n".join(out), tuple(claims))
