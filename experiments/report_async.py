"""The report section of ``async_methods`` (issue 14): the ranking of APAM and today's async methods, in numbers.

Hooked into experiments/report.py (``TITLES`` and ``SECTIONS``). The numbers come from summary.csv alone through
:func:`plots.async_methods.best_times` (best step factor per method, problem, P and compute-time model; mean time to
target over seeds on the simulated clock).
"""
from __future__ import annotations

import math

import pandas as pd

from plots.async_methods import METHODS, MODEL_LABELS, MODELS, best_times, fmt_time, ranks

TITLE = ("Beyond the paper -- APAM against today's asynchronous methods",
         "simulated clock; logistic regression (Fashion-MNIST 0 vs 6, full training set) and LeNet5 (a reduced "
         "Fashion-MNIST subset in the quick profile); compute-time models: equal, sqrt(i) x base, one 8x straggler, "
         "lognormal sigma = 1; delay-adaptive steps of Mishchenko et al. 2022 and Wu et al. 2022, Ringmaster's "
         "discarding (R = P), Rennala's rounds (S = P); step sizes: each method's default times the best "
         "`lr_factor` of the profile's grid (quick: the defaults only)")


def _order(values, order):
    return [v for v in order if v in values] + sorted(v for v in values if v not in order)


def section_async_methods(exp, summary: pd.DataFrame, sp, paper, claims: list) -> str:
    """Markdown: per problem and P, a table of time to target (rows: methods, columns: compute-time models) with
    each method's rank, then its mean rank over the compute models; ``claims`` gets one finding per problem and P
    saying where APAM stands (rank, and its time over the fastest method's, per compute model)."""
    best = ranks(best_times(summary))
    if best.empty:
        return ""
    out = []
    for (problem, p), rows in best.groupby(["problem", "workers"], sort=True):
        models = _order(set(rows["compute_model"]), MODELS)
        methods = _order(set(rows["algorithm"]), METHODS)
        lines = ["| method | " + " | ".join(MODEL_LABELS.get(m, m) for m in models) + " | mean rank |",
                 "|---|" + "---|" * (len(models) + 1)]
        mean_rank, reached = {}, set()
        for meth in methods:
            cells, rk = [], []
            for model in models:
                r = rows[(rows["algorithm"] == meth) & (rows["compute_model"] == model)]
                if r.empty:
                    cells.append("--")
                    continue
                r = r.iloc[0]
                disc = f", {r['discarded_frac']:.0%} discarded" if r["discarded_frac"] > 0 else ""
                fac = f", x{r['lr_factor']:g}" if r["factors"] > 1 else ""
                cells.append(f"{fmt_time(r['time_mean'])} (#{int(r['rank'])}{fac}{disc})")
                rk.append(r["rank"])
                if math.isfinite(r["time_mean"]):
                    reached.add(meth)
            mean_rank[meth] = sum(rk) / len(rk) if rk else math.nan
            lines.append(f"| {meth} | " + " | ".join(cells) + f" | {mean_rank[meth]:.1f} |")
        order = sorted((v, k) for k, v in mean_rank.items() if v == v and k in reached)
        never = [k for k in methods if k not in reached]
        out.append(f"\n**{problem}, P = {p}** -- time to target train loss "
                   f"{summary.loc[summary['problem'] == problem, 'target_loss'].iloc[0]:g} (simulated s; #rank among "
                   f"{len(methods)} methods within the column):\n")
        out.append("\n".join(lines))
        out.append("\nRanking by mean rank (methods that reached the target at least once): "
                   + (", ".join(f"{k} ({v:.1f})" for v, k in order) or "none")
                   + (f"; never reached it: {', '.join(never)}" if never else "") + ".\n")
        if "apam" in mean_rank and "apam" not in reached:
            claims.append((f"finding ({problem}, P={p}): where APAM stands among {len(methods)} methods", True,
                           "APAM did not reach the target under any compute model within this budget; "
                           f"methods that did: {', '.join(k for _, k in order) or 'none'}"))
        elif "apam" in mean_rank:
            pos = [k for _, k in order].index("apam") + 1
            ratios = []
            for model in models:
                col = rows[rows["compute_model"] == model]
                a = col[col["algorithm"] == "apam"]["time_mean"]
                fastest = col["time_mean"].min()
                if len(a) and math.isfinite(fastest) and fastest > 0:
                    t = a.iloc[0]
                    ratios.append(f"{MODEL_LABELS.get(model, model)} "
                                  + (f"{t / fastest:.2f}x the fastest" if math.isfinite(t) else "not reached"))
            claims.append((f"finding ({problem}, P={p}): where APAM stands among {len(methods)} methods", True,
                           f"mean rank {mean_rank['apam']:.1f}, {pos}. of the {len(order)} methods that reached "
                           f"the target; " + "; ".join(ratios)))
    return "\n".join(out)
