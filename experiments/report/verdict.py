"""Claims and their verdicts: the types every report section returns and the writer renders.

A :class:`Claim` is one statement of the paper (or a goal or finding of ours) as tested on one experiment's runs: its
words, its rule, the :class:`Verdict` the rule gave, the evidence, and the one number that decided it (ours beside
the paper's where the paper has one). A verdict is a short class (:data:`CLASSES`) plus its conditions: where it was
judged, why the runs fall outside the claim's regime, the finding in a few words.
"""

from __future__ import annotations

from dataclasses import dataclass

REPRODUCED = "reproduced"
NOT_REPRODUCED = "not reproduced"
ABOVE = "above the paper"
INCONCLUSIVE = "inconclusive"
OUTSIDE = "outside regime"
FINDING = "finding"
NOT_RUNNABLE = "not runnable here"
NOT_MEASURABLE = "not measurable here"
NOT_RUN_YET = "not run yet"
CRASHED = "crashed"
LEFT_OUT = "left out"

CLASSES = {
    REPRODUCED: "inside the claim's regime, the rule holds (within the band of the paper's number where it has one)",
    NOT_REPRODUCED: "inside the claim's regime, the rule fails",
    ABOVE: "inside the regime, more than the band above the paper's number: a finding, not a silent pass",
    INCONCLUSIVE: "the runs cannot decide (nothing learned, the rule finer than the seed noise, a target never "
    "reached)",
    OUTSIDE: "the runs miss the condition under which the paper makes the claim (budget K against the staleness, "
    "a plateaued P = 1, seeds, the master's saturation): they can neither confirm nor refute it",
    FINDING: "a number the paper does not state, reported as measured",
    NOT_MEASURABLE: "a speed-up or time claim whose counts beyond one compute agent all need more cores than this "
    "machine has (P workers and the master need P + 1): no wall-clock run here can decide it; its "
    "number is the simulated clock's prediction on a core per process, beside the model's "
    "validation error (model_validation)",
    NOT_RUNNABLE: "this machine cannot run it (missing data, a problem or engine not available)",
    NOT_RUN_YET: "no finished `make reproduce` call of this profile has run it",
    CRASHED: "its sweep crashed",
    LEFT_OUT: "the profile runs it only on request",
}
"""Every verdict class with its meaning (the report's legend), in the order the report counts them."""

CAN_TEST = (REPRODUCED, NOT_REPRODUCED, ABOVE, INCONCLUSIVE, OUTSIDE, FINDING, NOT_MEASURABLE)
"""Classes of claims whose runs exist on this machine (the others say why there are none)."""

# The class words of verdict strings as the report wrote them before classes had names of their own
_OLD_WORDS = {"outside the claim's regime": OUTSIDE, "left out (EXTENDED=1 runs it)": LEFT_OUT}


@dataclass(frozen=True)
class Verdict:
    """A verdict: ``cls`` one of :data:`CLASSES`; ``conditions`` what qualifies it in a few words (e.g. ``at P = 2,
    4; P = 8 outside the claim's regime: ...``, ``K = 750, tau = 0, 1: 1 seed(s) < 3``, a finding's gist)."""

    cls: str
    conditions: str = ""

    def __post_init__(self) -> None:
        if self.cls not in CLASSES:
            raise ValueError(f"verdict class {self.cls!r}: not one of {', '.join(CLASSES)}")

    def __str__(self) -> str:
        return f"{self.cls} ({self.conditions})" if self.conditions else self.cls

    @property
    def slug(self) -> str:
        """The class as an identifier (``not_reproduced``): verdicts.csv's ``verdict_class``."""
        return self.cls.replace(" ", "_")

    def qualified(self, more: str) -> Verdict:
        """The same class with ``more`` appended to its conditions."""
        return Verdict(self.cls, "; ".join(c for c in (self.conditions, more) if c))

    @classmethod
    def judged(cls, ok: bool | None) -> Verdict:
        """The verdict of a rule: True reproduced, False not reproduced, None not runnable here (no runs)."""
        return cls({True: REPRODUCED, False: NOT_REPRODUCED, None: NOT_RUNNABLE}[ok])

    @classmethod
    def parse(cls, text: str) -> Verdict:
        """A verdict from its string form ``class (conditions)``; also reads the longer class words older reports
        wrote (``outside the claim's regime (...)``). Unknown words raise ValueError."""
        text = str(text).strip()
        for words, known in sorted({**{c: c for c in CLASSES}, **_OLD_WORDS}.items(), key=lambda t: -len(t[0])):
            if text == words or text.startswith(words + " ("):
                rest = text[len(words) :].strip()
                return cls(known, rest[1:-1] if rest.startswith("(") and rest.endswith(")") else rest)
        raise ValueError(f"verdict {text!r}: no known class")


def outside(why: str) -> Verdict:
    """The verdict of runs outside the claim's regime, e.g. ``outside("K = 750, tau = 19")``."""
    return Verdict(OUTSIDE, why)


def inconclusive(why: str = "") -> Verdict:
    """The verdict of runs that cannot decide, with the reason when there is one to give."""
    return Verdict(INCONCLUSIVE, why)


def finding(gist: str = "") -> Verdict:
    """A finding, with its gist in a few words (``APAM x1.10, sync AMSGrad x5.47``) when it has one."""
    return Verdict(FINDING, gist)


@dataclass(frozen=True)
class Claim:
    """One claim as judged on one experiment's runs.

    ``key`` names it across profiles (verdicts.csv's ``claim``; the verdicts-per-profile table joins on it);
    ``name`` is its short name for tables (default: the key); ``text`` the claim in words, ``rule`` how it is judged;
    ``decided_by``, ``ours``, ``paper``: the one number that decides the verdict, ours and the paper's ("" where the
    paper has none); ``timed``: a claim about times, which carries the clock that made them; ``problem``: the problem
    whose runs it speaks of (None: every problem of the experiment); ``measured``: the deciding number comes from
    wall-clock runs alone (the writer then gives it no clock label, whatever other runs the problem has); ``clock``:
    the clock's backing, set by the writer (experiments.report.clock.clock_label; "" for measured times and claims
    not about times)."""

    key: str
    text: str
    verdict: Verdict
    evidence: str = ""
    rule: str = ""
    name: str = ""
    decided_by: str = ""
    ours: str = ""
    paper: str = ""
    timed: bool = False
    problem: str | None = None
    measured: bool = False
    clock: str = ""

    @property
    def title(self) -> str:
        return self.name or self.key

    @property
    def clock_word(self) -> str:
        """The clock in one word: ``prediction`` (the simulated clock, not backed by model_validation), ``backed``
        (simulated and backed), ``measured``; "" for claims not about times."""
        if not self.timed:
            return ""
        if not self.clock:
            return "measured"
        return "backed" if self.clock.startswith("simulated clock backed") else "prediction"
