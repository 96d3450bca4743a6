"""The replication paragraph of a compared experiment (async_methods): its rankings rerun on new seeds
(``report.replication_seeds`` of the yaml) against the reported seeds' (experiments.analysis.comparisons
:func:`~experiments.analysis.comparisons.replication_check`), and the goal claim they decide."""

from __future__ import annotations

import pandas as pd

from experiments.analysis.comparisons import ranking, replication_check
from experiments.report.verdict import Claim, Verdict

REPLICATION_GOAL = (
    "goal (ours): a rerun with five new seeds keeps each ranking's top three in the same order, or the order is "
    "within noise"
)


def replication_text(tab: pd.DataFrame, names: list[str], replica: tuple[pd.DataFrame, pd.DataFrame]):
    """The replication paragraph and its goal claim: per problem and P, the top three of the reported seeds'
    ranking (:func:`experiments.analysis.comparisons.ranking` at the hardest target, methods that never reached it
    by final loss) against the same ranking of the replication seeds (``report.replication_seeds`` of the yaml), its
    targets from its own serial runs (:func:`experiments.analysis.comparisons.replication_check`). ("", None)
    without replication runs."""
    rtab, _ = replica
    if rtab.empty:
        return "", None
    rnames = [c.removeprefix("time ") for c in rtab.columns if c.startswith("time ")]
    lines, said, holds = [], [], []
    for (problem, p), rows in tab.groupby(["problem", "workers"], sort=True):
        other = rtab[(rtab["problem"] == problem) & (rtab["workers"] == p)]
        if other.empty:
            continue
        ok, words = replication_check(ranking(rows, names[-1]), ranking(other, rnames[-1]))
        holds.append(ok)
        seeds = int(other["seeds"].min())
        lines.append(f"- {problem}, P = {p} ({seeds} new seeds): {words}.")
        said.append(f"{problem} P={p}: {'holds' if ok else 'fails'}")
    if not holds:
        return "", None
    text = (
        "\n**Replication on new seeds** (`report.replication_seeds`; not in the tables above, their targets from "
        "their own serial runs): each ranking's top three, as ranked above (by time to the hardest target, then the "
        "methods that never reached it by final loss):\n\n" + "\n".join(lines) + "\n"
    )
    claim = Claim(
        key=REPLICATION_GOAL,
        text=REPLICATION_GOAL,
        verdict=Verdict.judged(all(holds)),
        name="goal: top three kept on five new seeds",
        evidence="; ".join(said),
        decided_by="rankings whose top three hold (rule: all)",
        ours=f"{sum(holds)} of {len(holds)}",
    )
    return text, claim
