"""The Claim and Verdict types (experiments.report.verdict): a short class plus its conditions, read back from its
string, and a claim's clock in a word."""

from dataclasses import FrozenInstanceError

import pytest

from experiments.report.verdict import (
    ABOVE,
    CLASSES,
    FINDING,
    LEFT_OUT,
    NOT_REPRODUCED,
    NOT_RUNNABLE,
    OUTSIDE,
    REPRODUCED,
    Claim,
    Verdict,
    finding,
    outside,
)


def test_a_verdict_is_a_short_class_and_its_conditions():
    v = outside("K = 750, tau = 0, 19: 1 seed(s) < 3")
    assert (v.cls, v.conditions) == (OUTSIDE, "K = 750, tau = 0, 19: 1 seed(s) < 3")
    assert str(v) == "outside regime (K = 750, tau = 0, 19: 1 seed(s) < 3)" and v.slug == "outside_regime"
    assert str(Verdict(REPRODUCED)) == "reproduced" and Verdict.judged(False).cls == NOT_REPRODUCED
    assert Verdict.judged(None).cls == NOT_RUNNABLE
    assert (
        str(Verdict(REPRODUCED).qualified("at P = 2, 4").qualified("2 seeds in all"))
        == "reproduced (at P = 2, 4; 2 seeds in all)"
    )
    assert all(len(cls.split()) <= 3 for cls in CLASSES)  # one to three words
    with pytest.raises(ValueError, match="not one of"):
        Verdict("reproduced-ish")
    with pytest.raises(FrozenInstanceError):
        v.cls = REPRODUCED


def test_a_verdict_reads_back_from_its_string_and_the_older_long_words():
    for v in (
        Verdict(REPRODUCED),
        finding("APAM x1.10, sync AMSGrad x5.47"),
        Verdict(ABOVE, "finding: more than 25% above it"),
    ):
        assert Verdict.parse(str(v)) == v
    assert Verdict.parse("outside the claim's regime (epochs = 20 < 100, K = 3750)") == outside(
        "epochs = 20 < 100, K = 3750"
    )
    assert Verdict.parse("left out (EXTENDED=1 runs it)").cls == LEFT_OUT
    assert Verdict.parse("not reproduced (under the cost model)").cls == NOT_REPRODUCED  # not "not" + "reproduced"
    with pytest.raises(ValueError, match="no known class"):
        Verdict.parse("splendid")


def test_a_claim_names_itself_shortly_and_its_clock_in_a_word():
    c = Claim(
        key="apam: the training loss reached is the same at every worker count (long words)",
        text="t",
        verdict=Verdict(REPRODUCED),
        name="apam: same loss at every P",
        timed=True,
    )
    assert c.title == "apam: same loss at every P" and Claim("k", "t", finding()).title == "k"
    assert c.clock_word == "measured"  # a time claim without a simulated clock
    assert Claim("k", "t", finding(), timed=True, clock="prediction; ...").clock_word == "prediction"
    assert (
        Claim("k", "t", finding(), timed=True, clock="simulated clock backed by model_validation (...)").clock_word
        == "backed"
    )
    assert Claim("k", "t", Verdict(FINDING), clock="x").clock_word == ""  # not about times
