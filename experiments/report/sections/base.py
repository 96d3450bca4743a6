"""What every section returns, and the notes several sections share."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from experiments.report.verdict import Claim


@dataclass(frozen=True)
class Section:
    """A section's Markdown below its scale line (tables and their notes) and its claims, in the order judged."""

    body: str = ""
    claims: tuple[Claim, ...] = ()


def target_note(ok: pd.DataFrame, by: str = "workers", label: str = "P") -> str:
    """What "to target" means in a section's table: per problem, the training-loss target (the summary's
    ``target_loss``, nats), the rule of the time to it (experiments.store.summary.crossing: interpolated between
    evaluation points, counted only when the run stays at or below the target from there on), and where in the run
    the setting with the smallest ``by`` (``label``: P = 1, tau = 0) reached it, in updates, so that a reader sees
    whether a number to target describes the start of the run or all of it. "" without targets."""
    if "target_loss" not in ok or ok["target_loss"].isna().all():
        return ""
    parts = []
    for prob, o in ok.groupby("problem", sort=True):
        target = pd.to_numeric(o["target_loss"], errors="coerce").dropna()
        if target.empty:
            continue
        low = o[by].min()
        first = o[o[by] == low]
        hit = pd.to_numeric(first["updates_to_target"], errors="coerce").mean()
        K = pd.to_numeric(first["updates"], errors="coerce").mean()
        who = f"{label} = {low:g}"
        where = (
            f"{who} reached it after {hit:.0f} of its {K:.0f} updates ({hit / K:.0%} of the run)"
            if not math.isnan(hit) and K
            else f"{who} did not reach it"
        )
        parts.append(f"{prob}: training loss <= {target.iloc[0]:g}, {where}")
    if not parts:
        return ""
    return (
        "\nTo target: the time at which the training loss reached the target for good -- interpolated between "
        "the last evaluation above it and the next one, counted only when the run stays at or below it from "
        "there on; " + "; ".join(parts) + ".\n"
    )
