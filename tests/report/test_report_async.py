"""The async_methods and async_methods_real sections: APAM's rank among today's asynchronous methods, and whether
the simulated clock ranks them as the real engines do; from summary.csv alone."""

import pandas as pd
from test_async_methods import _engine_summary, _summary  # the summaries the figures' tests draw (tests/)

from experiments.report.load import Experiment
from experiments.report.sections.async_methods import section_async_methods, section_async_methods_real
from experiments.report.verdict import FINDING, INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED
from mdtable import row


def _section(fn, name, summary: pd.DataFrame):
    section = fn(Experiment(name, summary))
    return section.body, section.claims


def test_section_ranks_the_methods_from_the_summary_alone():
    """Ranks from the summary alone: mean time to target over seeds with its bootstrap interval and a shared rank;
    a method that never reached it ranks last; the finding says where APAM stands and who is ahead."""
    text, claims = _section(section_async_methods, "async_methods", _summary())
    assert row(text, "apam")[:2] == ["apam", "1.1 [1, 1.2] #2"]  # seeds at 1.0 and 1.2 s: mean 1.1, interval both
    assert row(text, "rennala_sgd")[1] == "0.8 #1" and row(text, "rennala_sgd")[-1] == "50%"  # half discarded
    assert row(text, "sync_amsgrad")[1] == "not reached #3"
    assert "rennala_sgd (1.0), apam (2.0); never reached it: sync_amsgrad." in text
    assert "Why never: the problem's configured target_loss; with P = 8 workers the gradients are stale" in text
    assert text.split("Why never:")[1].split("\n")[0].endswith("compute models: sync_amsgrad (1.0).")
    [claim] = claims
    assert claim.verdict.cls == FINDING and "ahead of it by mean rank: rennala_sgd" in claim.evidence
    assert str(claim.verdict) == "finding (APAM mean rank 2.0, 1 method(s) ahead; 2 seed(s) < 3)"
    never = _summary().assign(time_to_target_s=lambda d: d["time_to_target_s"].where(d["algorithm"] != "apam"))
    [claim] = _section(section_async_methods, "async_methods", never)[1]
    assert "APAM did not reach" in claim.evidence and "rennala_sgd" in claim.evidence


def _goal(claims):
    return next(c for c in claims if c.key.startswith("goal"))


def test_engine_check_section_judges_rank_agreement_and_skips_overrun_columns():
    text, claims = _section(section_async_methods_real, "async_methods_real", _engine_summary())
    assert row(text, "apam") == ["apam", "1 (#2)", "1 (#2)", "1 (#2)", "1 (#2)"]
    assert "distributed: Kendall tau 1.00, fastest measured rennala_sgd, simulated rennala_sgd" in text
    goal = _goal(claims)
    assert goal.verdict.cls == REPRODUCED and goal.evidence.startswith("2 of 2 columns counted")
    # the same agreement from one seed: a ranking that may turn on a millisecond
    goal = _goal(_section(section_async_methods_real, "async_methods_real", _engine_summary(seeds=1))[1])
    assert str(goal.verdict) == "inconclusive (1 seed(s) < 3; agreement on every counted column)"
    goal = _goal(
        _section(section_async_methods_real, "async_methods_real", _engine_summary(swap_on_distributed=True))[1]
    )
    assert goal.verdict.cls == NOT_REPRODUCED
    assert "distributed / equal: tau 0.33, fastest apam measured, rennala_sgd simulated" in goal.evidence
    # 10% of apam's gradients overran on both engines: no column tests the clock
    text, claims = _section(section_async_methods_real, "async_methods_real", _engine_summary(overrun_apam=10))
    assert "10% not run as asked" in text and "**Flagged:**" in text
    goal = _goal(claims)
    assert goal.verdict.cls == INCONCLUSIVE and goal.verdict.conditions.startswith("every column")


def test_engine_check_counts_a_tie_for_fastest_as_agreement():
    s = _engine_summary()
    sim_rennala = (s["clock"] == "simulated") & (s["algorithm"] == "rennala_sgd")
    s.loc[sim_rennala, "time_to_target_s"] = 1.0  # simulated: rennala and apam tie; measured: rennala fastest
    text, claims = _section(section_async_methods_real, "async_methods_real", s)
    assert "fastest measured rennala_sgd, simulated apam = rennala_sgd" in text
    assert _goal(claims).verdict.cls == REPRODUCED
