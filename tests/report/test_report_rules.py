"""The regime rules (experiments.report.rules): tau against K^(1/4), plateau, seeds, the two-sided rule against the
paper's numbers; on synthetic summaries and traces."""

import pandas as pd

from experiments.report import rules as R
from experiments.report.verdict import ABOVE, NOT_REPRODUCED, REPRODUCED
from helpers import FLAT, RISING, run, trace


def test_tau_regime_inside_outside_and_borderline():
    K = 10000  # K^(1/4) = 10 exactly
    ok = pd.DataFrame([run("apam", p, 0, 0.9, updates=K) for p in (1, 10, 11, 12)])
    inside, out, text = R.tau_regime(ok)
    assert inside == [1, 10, 11] and out == [12]  # tau = P - 1; tau = 10 = K^(1/4) is inside (borderline)
    assert "K = 10000 (K^(1/4) = 10.0)" in text
    fixed = pd.DataFrame([run("apam", 4, 0, 0.9, updates=K, delay="fixed", staleness=11.0)])
    assert R.tau_regime(fixed)[1] == [4]  # fixed delay: its max staleness is tau


def test_plateau_rule():
    assert R.plateaued(trace(["a"], FLAT), ["a"])[0] is True
    assert R.plateaued(trace(["a"], RISING), ["a"])[0] is False
    assert R.plateaued(trace(["a"], FLAT[:3]), ["a"])[0] is None  # too few evaluations to tell
    assert round(R.plateaued(trace(["a"], RISING), ["a"]).gain, 3) == 0.08


def test_two_sided_rule_against_the_paper():
    paper = pd.Series({1: 1.0, 2: 2.02, 5: 4.49, 10: 7.11, 20: 11.42})
    within = pd.Series({2: 1.9, 5: 4.2, 10: 7.8, 20: 12.0})
    assert R.compare_to_paper(within, paper).verdict.cls == REPRODUCED
    below = within.copy()
    below[20] = 5.0
    comp = R.compare_to_paper(below, paper)
    assert comp.verdict.cls == NOT_REPRODUCED and (comp.at, comp.ours, comp.paper) == (20, 5.0, 11.42)  # the miss
    above = pd.Series({2: 1.98, 5: 4.9, 10: 9.8, 20: 19.6})  # the simulator's 0.98 efficiency at P = 20
    v = R.compare_to_paper(above, paper).verdict
    assert v.cls == ABOVE and str(v) == "above the paper (finding: more than 25% above it)"
    assert R.compare_to_paper(pd.Series({64: 50.0}), paper).verdict is None
    assert R.compare_to_paper(pd.Series({20: 11.42 * 1.24}), paper).verdict.cls == REPRODUCED  # just inside
    assert R.compare_to_paper(pd.Series({20: 11.42 * 0.76}), paper).verdict.cls == REPRODUCED
    assert R.compare_to_paper(within, paper).at == 10  # reproduced: the count farthest from the paper (+10%)


def test_degenerate_delays_are_those_at_or_above_the_updates():
    ok = pd.DataFrame([run("apam", 1, 0, 0.9, updates=300, delay="uniform", max_delay=d) for d in (0, 20, 300, 400)])
    assert R.degenerate_delays(ok) == [300, 400]
