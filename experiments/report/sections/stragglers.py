"""Section ``stragglers`` (beyond the paper): how one slow worker multiplies the time to target of APAM and of sync
AMSGrad, with per-gradient lognormal compute times (sigma) and one worker ``straggler_slowdown`` times slower."""

from __future__ import annotations

import math

from experiments.report.load import Experiment
from experiments.report.markdown import table
from experiments.report.sections.base import Section, target_note
from experiments.report.verdict import Claim, finding, inconclusive

SETTINGS = ("workers", "straggler_sigma", "straggler_slowdown")


def section_stragglers(data: Experiment) -> Section:
    """Time to target (seconds on the runs' clock, mean over seeds) per worker count, sigma and slowdown, one column
    per algorithm; per P, a finding: the factor by which the slowest straggler (sigma 0) multiplies each protocol's
    time to target (inconclusive when a setting never reached the target)."""
    ok = data.ok
    if ok.empty:
        return Section()
    piv = ok.pivot_table(
        index=list(SETTINGS), columns="algorithm", values="time_to_target_s", aggfunc="mean", dropna=False
    ).reset_index()
    piv.columns = [str(c) if c in SETTINGS else f"{c} time-to-target (s)" for c in piv.columns]
    a, s = "apam time-to-target (s)", "sync_amsgrad time-to-target (s)"
    claims = []
    if a in piv and s in piv:
        for p, g in piv.groupby("workers"):
            base = g[(g["straggler_slowdown"] == 1) & (g["straggler_sigma"] == 0)]
            worst = g[(g["straggler_slowdown"] == g["straggler_slowdown"].max()) & (g["straggler_sigma"] == 0)]
            if base.empty or worst.empty:
                continue
            ga, gs = worst[a].iloc[0] / base[a].iloc[0], worst[s].iloc[0] / base[s].iloc[0]
            slow = worst["straggler_slowdown"].iloc[0]
            what = f"(P={p}): factor by which one worker {slow:g}x slower (sigma 0) multiplies the time-to-target"
            common = {
                "key": f"finding {what}",
                "timed": True,
                "name": f"finding: one {slow:g}x slower worker (P={p})",
                "decided_by": "time-to-target factor, APAM and sync",
            }
            if not (math.isnan(ga) or math.isnan(gs)):
                found = f"APAM x{ga:.2f}, sync AMSGrad x{gs:.2f}"
                claims.append(
                    Claim(text=f"finding {what}", verdict=finding(found), evidence=found, ours=found, **common)
                )
            else:  # nothing found: the runs cannot decide
                claims.append(
                    Claim(
                        text=what,
                        verdict=inconclusive(),
                        ours="target not reached",
                        evidence="not measurable: the target was not reached in every setting",
                        **common,
                    )
                )
    return Section(table(piv) + target_note(ok), tuple(claims))
