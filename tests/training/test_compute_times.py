"""Delay models of experiments/training/delays.py: the compute-time laws of ComputeTimes (spreads, heavy
tails, replay; built from a run's delay settings) and the artificial delays' choice of iterate."""

import math

import numpy as np
import pytest

from conftest import run_sim, settings_for
from experiments.training.delays import ComputeTimes, load_compute_times


def test_sqrt_and_linear_spreads_give_worker_i_sqrt_i_or_i_times_the_base():
    base = 0.02
    sq = ComputeTimes(5, spread="sqrt")
    lin = ComputeTimes(5, spread="linear", slow_workers=1, slowdown=3.0)
    for w in range(5):
        assert sq.draw(w, base) == pytest.approx(base * math.sqrt(w + 1), rel=1e-15)
        assert sq.mean_s(w, base) == pytest.approx(base * math.sqrt(w + 1), rel=1e-15)
        assert lin.draw(w, base) == pytest.approx(base * (w + 1) * (3.0 if w == 0 else 1.0), rel=1e-15)


def test_sqrt_spread_mean_times_under_a_random_law():
    t = ComputeTimes(4, law="lognormal", sigma=0.5, spread="sqrt", seed=3)
    n = 40_000
    for w in range(4):
        mean = np.mean([t.draw(w, 1.0) for _ in range(n)])
        assert mean == pytest.approx(math.sqrt(w + 1), rel=0.02)  # lognormal xi has mean 1; sd 0.53 / sqrt(n)


def test_pareto_has_mean_one_and_a_heavy_tail():
    t = ComputeTimes(1, law="pareto", shape=3.0, seed=0)
    x = np.array([t.draw(0, 1.0) for _ in range(100_000)])
    assert x.mean() == pytest.approx(1.0, rel=0.02)
    assert x.min() >= 2 / 3 - 1e-12  # x_m = (a - 1) / a
    assert (x > 10 * 2 / 3).mean() == pytest.approx(10.0**-3, rel=0.3)  # P(X > 10 x_m) = 10^-a
    with pytest.raises(ValueError, match="delay.shape=1.0"):
        ComputeTimes(1, law="pareto", shape=1.0)


def test_the_law_is_the_run_s_delay_settings_and_constant_under_an_artificial_delay():
    """ComputeTimes.of_delay: one builder from a run's delay settings for the simulated engine and emulated compute."""
    timing = settings_for(
        [
            "workers=3",
            "delay=timing",
            "delay.law=lognormal",
            "delay.sigma=0.5",
            "delay.spread=sqrt",
            "delay.slow_workers=1",
            "delay.slowdown=4",
        ]
    )
    t = ComputeTimes.of_delay(3, timing.delay, seed=7)
    ref = ComputeTimes(3, law="lognormal", sigma=0.5, slow_workers=1, slowdown=4.0, spread="sqrt", seed=7)
    order = [0, 1, 2] * 20
    assert [t.draw(w, 1.0) for w in order] == [ref.draw(w, 1.0) for w in order]
    assert len({t.draw(0, 1.0) for _ in range(5)}) == 5  # really drawn
    fixed = settings_for(["workers=3", "delay=fixed", "delay.tau=2"])
    equal = ComputeTimes.of_delay(3, fixed.delay, seed=7)
    assert [equal.draw(w, 0.5) for w in order] == [0.5] * len(order)


def _write(tmp_path, rows, name="compute_times.csv"):
    p = tmp_path / name
    p.write_text("worker,index,compute_s,target_s\n" + "".join(f"{w},{i},{c},{c}\n" for w, i, c in rows))
    return p


def test_replay_reproduces_the_recorded_order_per_worker_and_says_when_it_cycles(tmp_path, capsys):
    # rows out of order on purpose: replay follows `index`, per worker
    p = _write(tmp_path, [(1, 1, 0.5), (0, 2, 0.3), (0, 0, 0.1), (1, 0, 0.4), (0, 1, 0.2), (2, 0, 9.0)])
    t = ComputeTimes(2, law="replay", replay=str(p))
    assert [t.draw(0, 123.0) for _ in range(3)] == [0.1, 0.2, 0.3]  # base_s ignored: recorded seconds
    assert [t.draw(1, 1.0) for _ in range(2)] == [0.4, 0.5]
    assert t.cycled == set()
    assert t.draw(1, 1.0) == 0.4  # one line through the harness's logger (a RuntimeWarning printed its source line)
    assert capsys.readouterr().err == (
        "warning: delay.law=replay: worker 1's 2 recorded compute times are used up; replaying them again from the "
        "first\n"
    )
    assert t.cycled == {1}
    assert t.mean_s(0, 1.0) == pytest.approx(0.2)


def test_replay_file_errors_name_the_file(tmp_path):
    p = _write(tmp_path, [(0, 0, 0.1)])
    with pytest.raises(ValueError, match=r"no recorded compute times for worker 1"):
        load_compute_times(p, 2)
    bad = tmp_path / "bad.csv"
    bad.write_text("worker,compute_s\n0,1\n")
    with pytest.raises(ValueError, match=r"bad.csv: missing column\(s\) index, target_s"):
        load_compute_times(bad, 1)
    neg = _write(tmp_path, [(0, 0, -1.0)], "neg.csv")
    with pytest.raises(ValueError, match="neg.csv: compute_s must be seconds from 0 to 86400"):
        load_compute_times(neg, 1)
    with pytest.raises(ValueError, match="delay.replay=null"):
        ComputeTimes(1, law="replay")


def test_the_simulated_engine_replays_the_recorded_times(tmp_path, monkeypatch, capsys):
    p = _write(tmp_path, [(0, 0, 0.010), (0, 1, 0.030), (1, 0, 0.020)])
    drawn = []
    original = ComputeTimes.draw

    def spy(self, worker, base_s):
        v = original(self, worker, base_s)
        drawn.append((worker, v))
        return v

    monkeypatch.setattr(ComputeTimes, "draw", spy)
    result, rec, _ = run_sim(
        tmp_path, ["delay=timing", "delay.law=replay", f"delay.replay={p}", "workers=2", "updates=8"]
    )
    assert "replaying them again" in capsys.readouterr().err
    per_worker = {w: [v for ww, v in drawn if ww == w] for w in (0, 1)}
    assert per_worker[0] == [0.010, 0.030, 0.010, 0.030, 0.010, 0.030][: len(per_worker[0])]
    assert set(per_worker[1]) == {0.020}
    assert len(drawn) == 8


def test_uniform_choice_respects_the_warm_up_window_and_is_flat():
    from collections import Counter

    from experiments.training.delays import ArtificialDelay

    delay = ArtificialDelay("uniform", max_delay=4, seed=0)
    for k in range(4):  # fewer than D iterates exist yet: tau in {0, ..., k}
        assert all(0 <= delay.choose(k) <= k for _ in range(50))
    n = 20000  # several blocks of draws
    late = Counter(delay.choose(1000) for _ in range(n))
    assert set(late) == set(range(5)) and all(abs(c / n - 0.2) < 0.015 for c in late.values())
    a, b = ArtificialDelay("uniform", max_delay=4, seed=3), ArtificialDelay("uniform", max_delay=4, seed=3)
    ks = [0, 1, 2, 3] * 10 + [1000] * 9000
    assert [a.choose(k) for k in ks] == [b.choose(k) for k in ks]  # the same seed, the same staleness sequence
