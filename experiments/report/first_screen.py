"""The report's first screen: one table with every claim, its verdict, the number that decides it (ours beside the
paper's) and a link to its section, then a paragraph, written from the verdicts, saying what was reproduced, what
was not, and what cannot be tested on this machine."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import pandas as pd

from experiments.report.markdown import table
from experiments.report.verdict import (
    ABOVE,
    CAN_TEST,
    CLASSES,
    CRASHED,
    FINDING,
    INCONCLUSIVE,
    LEFT_OUT,
    NOT_MEASURABLE,
    NOT_REPRODUCED,
    NOT_RUN_YET,
    NOT_RUNNABLE,
    OUTSIDE,
    REPRODUCED,
    Claim,
    Verdict,
)


@dataclass(frozen=True)
class Row:
    """One line of the first screen: an experiment's claim, or the experiment itself when it has no runs (``claim``
    None, ``verdict`` why not, ``why`` the status message)."""

    experiment: str
    anchor: str
    verdict: Verdict
    claim: Claim | None = None
    title: str = ""
    why: str = ""


COLUMNS = ["section", "claim", "verdict", "decided by", "ours", "paper", "clock"]


def first_table(rows: list[Row]) -> str:
    """The first screen's table: one line per claim (or experiment without runs); cells of a few words."""
    lines = []
    for r in rows:
        c = r.claim
        lines.append(
            {
                "section": f"[{r.experiment}](#{r.anchor})",
                "claim": c.title if c else r.title,
                "verdict": f"**{r.verdict.cls}**",
                "decided by": c.decided_by if c else "",
                "ours": c.ours if c else "",
                "paper": c.paper if c else "",
                "clock": c.clock_word if c else "",
            }
        )
    return table(pd.DataFrame(lines, columns=COLUMNS))


def _names(rows: list[Row]) -> str:
    """``lr_speedup (claim a; claim b), tau_threshold (claim c)``: the claims of ``rows`` by experiment."""
    by: dict = {}
    for r in rows:
        by.setdefault(r.experiment, []).append(r.claim.title if r.claim else "")
    return ", ".join(f"{e} ({'; '.join(t for t in titles if t)})" if any(titles) else e for e, titles in by.items())


def _reason(why: str) -> str:
    """A status message cut to its first two clauses (``problem=...: CIFAR-10 not found``): the section has it all."""
    return ": ".join(str(why).split(": ")[:2]).rstrip(".")


def paragraph(rows: list[Row]) -> str:
    """What the verdicts say, in a few sentences: the claims reproduced, not reproduced, above the paper; how many
    are outside their regime or inconclusive at this budget, and which; what cannot be tested here and why; and how
    many time claims rest on a prediction of the simulated clock that model_validation does not back."""
    by = {cls: [r for r in rows if r.verdict.cls == cls] for cls in CLASSES}
    claims = [r for r in rows if r.claim is not None]
    parts = [f"**{len(claims)} claims** in {len({r.experiment for r in rows})} experiments."]
    if by[REPRODUCED]:
        parts.append(f"**Reproduced** ({len(by[REPRODUCED])}): {_names(by[REPRODUCED])}.")
    if by[NOT_REPRODUCED]:
        parts.append(f"**Not reproduced** ({len(by[NOT_REPRODUCED])}): {_names(by[NOT_REPRODUCED])}.")
    if by[ABOVE]:
        parts.append(f"**Above the paper** by more than the band ({len(by[ABOVE])}): {_names(by[ABOVE])}.")
    if by[OUTSIDE]:
        parts.append(
            f"**Outside the claim's regime** at this profile's budget ({len(by[OUTSIDE])}: "
            f"{_names(by[OUTSIDE])}): these runs can neither confirm nor refute them."
        )
    if by[INCONCLUSIVE]:
        parts.append(f"**Inconclusive** ({len(by[INCONCLUSIVE])}): {_names(by[INCONCLUSIVE])}.")
    if by[NOT_MEASURABLE]:
        parts.append(
            f"**Not measurable here** ({len(by[NOT_MEASURABLE])}: {_names(by[NOT_MEASURABLE])}): their "
            "counts need more cores than this machine has; the number shown is the simulated clock's "
            "prediction on a core per process."
        )
    if by[FINDING]:
        parts.append(f"**Findings** beyond the paper's numbers: {len(by[FINDING])}.")
    cannot = [r for r in rows if r.verdict.cls == NOT_RUNNABLE]
    if cannot:
        parts.append(
            "**Cannot be tested on this machine**: "
            + "; ".join(
                (
                    f"{r.experiment} ({_reason(r.why)})"
                    if r.claim is None and r.why
                    else r.claim.title
                    if r.claim
                    else r.experiment
                )
                for r in cannot
            )
            + "."
        )
    for cls, words in (
        (NOT_RUN_YET, "Not run yet"),
        (CRASHED, "Crashed"),
        (LEFT_OUT, ("Left out of this profile's budget (`EXTENDED=1` runs them)")),
    ):
        if by[cls]:
            parts.append(f"**{words}**: {', '.join(dict.fromkeys(r.experiment for r in by[cls]))}.")
    timed = [r.claim for r in claims if r.claim.timed and r.verdict.cls in CAN_TEST]
    model = [c for c in timed if c.clock_word == "prediction"]
    if timed:
        parts.append(
            f"{len(model)} of the {len(timed)} claims about times rest on the simulated clock's prediction "
            "without model_validation backing it for their runs (clock: prediction)."
        )
    return " ".join(parts)


def counts(verdicts: list[Verdict]) -> str:
    """``reproduced: 2, finding: 1``: how many verdicts of each class, in order of first appearance."""
    n = Counter(v.cls for v in verdicts)
    return ", ".join(f"{cls}: {n[cls]}" for cls in dict.fromkeys(v.cls for v in verdicts))
