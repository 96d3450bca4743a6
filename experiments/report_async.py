"""The report section of ``async_methods`` (issue 14): the ranking of APAM and today's async methods, in numbers.

Hooked into experiments/report.py (``TITLES`` and ``SECTIONS``). The numbers come from summary.csv alone through
:func:`plots.async_methods.best_times` (best step factor per method, problem, P and compute-time model; mean time to
target over seeds on the simulated clock).
"""
from __future__ import annotations

import math

import pandas as pd

from plots.async_methods import METHODS, MODEL_LABELS, MODELS, best_times, fmt_time, ranks
from plots.validation import FLAG_MEANING

TITLE = ("Beyond the paper -- APAM against today's asynchronous methods",
         "simulated clock; logistic regression (Fashion-MNIST 0 vs 6, full training set) and LeNet5 (a reduced "
         "Fashion-MNIST subset in the quick profile); compute-time models: equal, sqrt(i) x base, one 8x straggler, "
         "lognormal sigma = 1; delay-adaptive steps of Mishchenko et al. 2022 and Wu et al. 2022, Ringmaster's "
         "discarding (R = P), Rennala's rounds (S = P); step sizes: each method's default times the best "
         "`lr_factor` of the profile's grid (quick: the defaults only; long: the grid run on seed 0, the factor "
         "seed 0 reached the target with first run on seeds 1 and 2, times averaged over the 3 seeds)")


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
                edge = r["factors"] > 1 and r["lr_factor"] in (r["factor_min"], r["factor_max"])
                fac = (f", x{r['lr_factor']:g}" + (" edge" if edge else "")) if r["factors"] > 1 else ""
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
                   f"{len(methods)} methods within the column; xF: the step factor chosen, `edge` when it is "
                   f"the grid's smallest or largest, so the best step may lie outside the grid):\n")
        out.append("\n".join(lines))
        out.append("\nRanking by mean rank (methods that reached the target at least once): "
                   + (", ".join(f"{k} ({v:.1f})" for v, k in order) or "none")
                   + (f"; never reached it: {', '.join(never)}" if never else "") + ".\n")
        if "apam" in mean_rank and "apam" not in reached:
            claims.append((f"finding ({problem}, P={p}): where APAM stands among {len(methods)} methods",
                           "APAM never reached the target",
                           "APAM did not reach the target under any compute model within this budget; "
                           f"methods that did: {', '.join(k for _, k in order) or 'none'}",
                           {"clock": True, "problem": problem}))
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
            claims.append((f"finding ({problem}, P={p}): where APAM stands among {len(methods)} methods",
                           f"APAM {pos}. of {len(order)}, mean rank {mean_rank['apam']:.1f}",
                           f"mean rank {mean_rank['apam']:.1f}, {pos}. of the {len(order)} methods that reached "
                           f"the target; " + "; ".join(ratios), {"clock": True, "problem": problem}))
    return "\n".join(out)


TITLE_REAL = ("Beyond the paper -- the async_methods ranking on real engines",
              "logistic regression (Fashion-MNIST 0 vs 6) at P = 8 with emulated compute (every gradient computed, "
              "then padded to 20 ms x the compute-time model's factor), measured on shared_memory and gloo beside "
              "the simulated clock of each (same base, same compute-time model); time to target train loss; the "
              "default step of each method")
RANK_AGREEMENT = 0.8
"""Kendall tau-b between the measured and the simulated times to target at or above which the rankings agree."""


def section_async_methods_real(exp, summary: pd.DataFrame, sp, paper, claims: list) -> str:
    """Markdown: per problem, P and compute-time model, each method's time to target measured on each real engine
    beside its simulated twin, with ranks; per engine and compute model the rank agreement (Kendall tau-b, the
    fastest method on each side; tied fastest methods joined by " = ", agreeing when the two sets share one). ``claims`` gets our goal (tau >= RANK_AGREEMENT and the same fastest method in
    every column; columns whose measured runs overran more than OVERRUN_FLAG of their gradients do not test the
    clock and are named) and one finding on where APAM stands."""
    from scipy.stats import kendalltau

    from experiments.claims import MIN_SEEDS
    from experiments.engines.emulation import OVERRUN_FLAG
    from plots.async_methods import engine_pairs

    pairs = engine_pairs(summary)
    if pairs.empty:
        return "_No measured run has a simulated twin._\n"
    out, verdicts, flagged = [], [], []
    for (problem, p, model), rows in pairs.groupby(["problem", "workers", "compute_model"], sort=True):
        engines = sorted(rows["engine"].unique())
        methods = _order(set(rows["algorithm"]), METHODS)
        head = "| method | " + " | ".join(f"{e} measured | {e} simulated" for e in engines) + " |"
        lines = [head, "|---|" + "---|" * (2 * len(engines))]
        for meth in methods:
            cells = []
            for e in engines:
                r = rows[(rows["engine"] == e) & (rows["algorithm"] == meth)]
                if r.empty:
                    cells += ["--", "--"]
                    continue
                r = r.iloc[0]
                over = r["overrun_frac"]
                flag = f", {over:.0%} not run as asked" if over == over and over > OVERRUN_FLAG else ""
                cells += [f"{fmt_time(r['measured_s'])} (#{int(r['rank_measured'])}{flag})",
                          f"{fmt_time(r['simulated_s'])} (#{int(r['rank_simulated'])})"]
            lines.append(f"| {meth} | " + " | ".join(cells) + " |")
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
                flagged.append(f"{e}, {MODEL_LABELS.get(model, model)}: {', '.join(bad)}")
            ok = bool(tau >= RANK_AGREEMENT and set(fm.split(" = ")) & set(fs.split(" = ")))
            verdicts.append((ok, bool(bad), f"{e} / {MODEL_LABELS.get(model, model)}: tau {tau:.2f}, fastest "
                             f"{fm} measured, {fs} simulated"))
            agree.append(f"{e}: Kendall tau {tau:.2f}, fastest measured {fm}, simulated {fs}")
        out.append(f"\n**{problem}, P = {p}, {MODEL_LABELS.get(model, model)}** -- time to target train loss "
                   f"{summary.loc[summary['problem'] == problem, 'target_loss'].iloc[0]:g} (s; #rank among "
                   f"{len(methods)} methods on that side):\n")
        out.append("\n".join(lines))
        out.append("\nRank agreement: " + "; ".join(agree) + ".\n")
        if "apam" in methods:
            apam = rows[rows["algorithm"] == "apam"]
            ranks_txt = ", ".join(f"{r.engine} #{int(r.rank_measured)} measured / #{int(r.rank_simulated)} simulated"
                                  for r in apam.itertuples())
            claims.append((f"finding ({problem}, P={p}, {MODEL_LABELS.get(model, model)}): APAM's rank on real "
                           "engines and on the simulated clock", True, ranks_txt))
    tested = [v for v in verdicts if not v[1]]
    verdict = all(v[0] for v in tested) if tested else \
        "inconclusive (every column had runs above the overrun flag: none could be counted)"
    seeds = int(summary.groupby(["problem", "workers", "algorithm", "engine"])["seed"].nunique().min())
    if verdict is True and seeds < MIN_SEEDS:  # a ranking from one seed can turn on a millisecond (a comparison)
        verdict = f"inconclusive ({seeds} seed(s) < {MIN_SEEDS}; agreement on every counted column)"
    claims.append((f"goal (ours): the simulated clock ranks the methods as the real engines do (Kendall tau-b >= "
                   f"{RANK_AGREEMENT:g} and the same fastest method, per engine and compute-time model, >= "
                   f"{MIN_SEEDS} seeds; columns with overruns above {100 * OVERRUN_FLAG:.0f}% do not count)", verdict,
                   f"{len(tested)} of {len(verdicts)} columns counted: "
                   + "; ".join(v[2] + (" (overruns: not counted)" if v[1] else "") for v in verdicts)))
    if flagged:
        out.append(f"\n**Flagged:** measured runs with more than {100 * OVERRUN_FLAG:.0f}% of their gradients off "
                   f"target ({FLAG_MEANING}): "
                   + "; ".join(flagged) + ".\n")
    return "\n".join(out)
