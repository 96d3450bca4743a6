"""The simulated engine: exact staleness under each delay model, sync vs async, the cost model's clock."""

import pandas as pd
import pytest
import torch

from algorithms import build_rule
from conftest import GRAD, LAT, OVER, UPD, QuadraticProblem, run_sim, serial_amsgrad, settings_for


def test_fixed_delay_gives_exactly_tau_after_warmup(tmp_path):
    tau = 5
    result, rec, _ = run_sim(tmp_path, ["delay=fixed", f"delay.tau={tau}", "updates=200", "workers=3"])
    assert result.updates == 200
    expected = {k: 1 for k in range(tau)}
    expected[tau] = 200 - tau
    assert dict(rec.master.histogram) == expected


def test_uniform_delay_stays_in_window_with_mean_near_half(tmp_path):
    D = 11
    result, rec, _ = run_sim(tmp_path, ["delay=uniform", f"delay.max_delay={D - 1}", "updates=4000"])
    hist = rec.master.histogram
    assert min(hist) == 0 and max(hist) == D - 1
    late = {k: v for k, v in hist.items()}
    mean = sum(k * v for k, v in late.items()) / sum(late.values())
    assert mean == pytest.approx((D - 1) / 2, abs=0.25)


@pytest.mark.parametrize("P", [2, 4, 8])
def test_timing_equal_workers_give_staleness_p_minus_1(tmp_path, P):
    result, rec, _ = run_sim(tmp_path, ["delay=timing", f"workers={P}", "updates=300"])
    hist = rec.master.histogram
    # the first P updates are the initial gradients, all read at version 0: staleness 0..P-1
    assert hist[P - 1] == 300 - (P - 1)
    assert sum(hist.values()) == 300 and max(hist) == P - 1


def test_p1_equals_the_serial_loop_exactly(tmp_path):
    problem = QuadraticProblem()
    result, rec, settings = run_sim(
        tmp_path, ["delay=timing", "workers=1", "epochs=3", "algorithm=apam", "algorithm.lr=0.01"], problem
    )
    x = serial_amsgrad(problem, settings.seed, epochs=3, lr=0.01)
    assert torch.equal(rec.master.x, x)
    assert set(rec.master.histogram) == {0}


def test_same_seed_same_trace_and_different_seed_differs(tmp_path):
    over = ["delay=timing", "delay.law=lognormal", "delay.sigma=0.5", "workers=4", "epochs=2"]
    _, a, _ = run_sim(tmp_path, over)
    _, b, _ = run_sim(tmp_path, over)
    _, c, _ = run_sim(tmp_path, over + ["seed=1"])
    assert pd.DataFrame(a.rows).equals(pd.DataFrame(b.rows))
    assert a.rows[-1]["train_loss"] != c.rows[-1]["train_loss"]


def test_sync_is_never_stale_and_averages_p_gradients_per_update(tmp_path):
    result, rec, _ = run_sim(
        tmp_path, ["algorithm=sync_amsgrad", "algorithm.lr=0.01", "delay=timing", "workers=4", "epochs=2"]
    )
    assert set(rec.master.histogram) == {0}
    assert result.gradients == 4 * result.updates
    assert result.samples == 2 * 256  # split batch: 8 samples a round


def test_a_slow_worker_sends_staler_gradients(tmp_path):
    _, rec, _ = run_sim(
        tmp_path, ["delay=timing", "workers=4", "delay.slow_workers=1", "delay.slowdown=4", "updates=400"]
    )
    pw = {w: s / c for w, (s, c) in rec.master.per_worker.items()}
    assert pw[0] > 2 * max(pw[w] for w in (1, 2, 3))
    counts = {w: c for w, (_, c) in rec.master.per_worker.items()}
    assert counts[0] < counts[1] / 2  # it also sends fewer


@pytest.mark.parametrize("P", [1, 2, 4, 16, 64])
def test_time_per_update_matches_the_cost_model(tmp_path, P):
    """The simulated engine against the closed form (costmodel.predicted_time_per_epoch) for fixed costs."""
    from experiments.clock.costmodel import CostModel, predicted_time_per_epoch, saturation_workers

    K, B, N = 1000, 8, 256
    result, _, _ = run_sim(tmp_path, ["delay=timing", f"workers={P}", f"updates={K}", "algorithm.lr=0.001"])
    costs = CostModel(grad={B: GRAD}, update_s=UPD, latency_s=LAT, overhead_s=OVER)
    cycle = GRAD + 2 * LAT + UPD + OVER
    assert costs.cycle_s(B) == pytest.approx(cycle)
    predicted = predicted_time_per_epoch(costs, P, B, N, "async") * K * B / N
    assert predicted == pytest.approx(K * max(cycle / P, UPD + OVER))
    # the first P gradients start together, so the run may differ from steady state by one worker cycle
    assert result.time_s == pytest.approx(predicted, abs=cycle)
    assert saturation_workers(costs, B) == pytest.approx(cycle / (UPD + OVER))
    if P < saturation_workers(costs, B):  # before the master saturates: near-linear speed-up
        assert (K * cycle) / result.time_s == pytest.approx(P, rel=0.05)
    else:  # past P*: one update per master_s, up to the first cycle
        assert result.time_s == pytest.approx(K * (UPD + OVER), abs=cycle)


@pytest.mark.parametrize("protocol", ["async_sgd", "sync_amsgrad"])
def test_the_clock_starts_after_the_warm_up_updates_as_on_the_real_engines(tmp_path, protocol):
    """engine.warmup_updates = W: time_s and the timed samples cover the updates after the warm-up, as the real
    engines' wall clock (engines/driver.py); async warms up for at least one round of P updates (P = 8 > W = 5),
    so the time per update is the closed form's steady state, cycle / P, exactly."""
    K, W, P, B = 400, 5, 8, 8
    cycle = GRAD + 2 * LAT + UPD + OVER
    base = [f"algorithm={protocol}", "delay=timing", f"workers={P}", f"updates={K}", "eval_every=1000"]
    full, rec0, _ = run_sim(tmp_path, base)
    warm, rec, _ = run_sim(tmp_path, base + [f"engine.warmup_updates={W}"])
    assert full.timed_samples is None and warm.updates == full.updates == K
    if protocol == "async_sgd":  # equal workers deliver in rounds of P, one cycle apart
        assert warm.timed_samples == (K - P) * B
        queue = P * (UPD + OVER)  # a round's arrivals wait for the master in turn
        assert full.time_s == pytest.approx(K / P * cycle, abs=queue)
        assert warm.time_s == pytest.approx((K / P - 1) * cycle, abs=queue)
        assert warm.time_s / (K - P) == pytest.approx(cycle / P, rel=0.005)
    else:  # a sync round of P split gradients: latency x 2 + slowest + P overheads + update, every round the same
        round_s = 2 * LAT + GRAD * (B // P) / B + P * OVER + UPD
        assert warm.timed_samples == (K - W) * B
        assert warm.time_s == pytest.approx((K - W) * round_s) and full.time_s == pytest.approx(K * round_s)
    assert rec.rows[0]["time_s"] == 0.0 and rec.rows[-1]["time_s"] == pytest.approx(warm.time_s)
    assert rec0.rows[-1]["time_s"] == pytest.approx(full.time_s)


def test_artificial_delay_ring_is_bounded(tmp_path):
    result, rec, _ = run_sim(tmp_path, ["delay=uniform", "delay.max_delay=3", "updates=50"])
    assert max(rec.master.histogram) <= 3
    assert result.updates == 50


@pytest.mark.parametrize("P", [1, 4])
def test_sync_round_cost_and_p1_equals_async(tmp_path, P):
    sync, _, _ = run_sim(
        tmp_path,
        [
            "algorithm=sync_amsgrad",
            "algorithm.lr=0.01",
            "algorithm.sync_batch=full",
            "delay=timing",
            f"workers={P}",
            "updates=50",
        ],
    )
    assert sync.time_s == pytest.approx(50 * (2 * LAT + GRAD + P * OVER + UPD))
    if P == 1:
        asyn, _, _ = run_sim(tmp_path, ["delay=timing", "workers=1", "updates=50"])
        # the same per-update cost: grad + 2 latency + update + overhead
        assert asyn.time_s == pytest.approx(sync.time_s)


class _IterateAsGradient(QuadraticProblem):
    """Its gradient at x is a copy of x, so the gradient an update uses names the iterate it was computed at."""

    def loss_grad(self, x, idx):
        self.grad_calls += 1
        return 0.0, x.clone()


class _Recording:
    """An update rule wrapper that keeps every iterate x_k (before update k + 1) and every gradient it applies."""

    def __init__(self, rule):
        self.rule, self.iterates, self.grads = rule, [], []

    def init(self, x):
        return self.rule.init(x)

    def step(self, x, g, state):
        self.iterates.append(x.clone())
        self.grads.append(g.clone())
        return self.rule.step(x, g, state)


@pytest.mark.parametrize("P", [3, 8])
def test_every_gradient_is_computed_at_the_iterate_its_staleness_names(tmp_path, P):
    # random compute times: workers overtake each other, staleness varies; each applied gradient must equal the
    # master's iterate exactly tau updates back (no copy of x is taken: this checks the hand-out path's aliasing)
    problem = _IterateAsGradient()
    rule = _Recording(build_rule("sgd", lr=0.05))
    _, rec, _ = run_sim(
        tmp_path,
        ["eval_every=1000", "delay=timing", "delay.law=lognormal", "delay.sigma=1.0", f"workers={P}", "updates=300"],
        problem,
        rule=rule,
    )
    taus = []
    for k, g in enumerate(rule.grads):
        v = next(v for v in range(k, -1, -1) if torch.equal(rule.iterates[v], g))
        taus.append(k - v)
    assert sorted(taus) == sorted(t for t, n in rec.master.histogram.items() for _ in range(n))
    assert len(set(taus)) > 3 and max(taus) > P - 1  # really random staleness, not the constant P - 1


@pytest.mark.parametrize("length", ["updates=250", "epochs=3"])
def test_async_hands_out_exactly_the_gradients_the_run_asks_for(tmp_path, length):
    problem = QuadraticProblem()
    result, _, _ = run_sim(tmp_path, ["delay=timing", "delay.law=exponential", "workers=16", length], problem)
    want = 250 if length == "updates=250" else -(-3 * problem.num_train // 8)
    assert result.updates == result.gradients == problem.grad_calls == want  # none computed and thrown away
    assert result.samples == 8 * want


class _NaNAfter(QuadraticProblem):
    """Its minibatch loss turns NaN from the ``bad``-th gradient on."""

    def __init__(self, bad: int) -> None:
        super().__init__()
        self.bad = bad

    def loss_grad(self, x, idx):
        loss, g = super().loss_grad(x, idx)
        return (float("nan") if self.grad_calls >= self.bad else loss), g


@pytest.mark.parametrize("delay", ["timing", "uniform"])
def test_a_non_finite_loss_stops_the_run_naming_the_epoch_of_the_gradient_applied(tmp_path, delay):
    from experiments.training.recorder import Diverged

    # N = 256, batch 8: the 10th gradient applied ends at sample 80, epoch 0.3125
    with pytest.raises(Diverged, match=r"minibatch loss nan at epoch 0\.312"):
        run_sim(tmp_path, [f"delay={delay}", "workers=1", "updates=50"], _NaNAfter(bad=10))


def test_the_free_lunch_is_refused_in_one_line(tmp_path):
    """Async P > 1 with every gradient at the newest iterate (delay=none) is refused (exit 2, one line); the default
    delay is the timing model."""
    import subprocess
    import sys

    from conftest import REPO

    assert settings_for([]).delay.model == "timing"
    proc = subprocess.run(
        [sys.executable, "-m", "experiments.run", "workers=4", "delay=none", f"results_dir={tmp_path}/r"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "delay=none with workers=4" in lines[0] and "delay=timing" in lines[0]
    assert not (tmp_path / "r").exists()


IDLE = 0.0004


@pytest.mark.parametrize("P", [1, 64])
def test_a_waiting_master_is_charged_the_idle_overhead_a_busy_one_the_queued_overhead(tmp_path, P):
    """P = 1: every gradient finds the master waiting: grad + 2 latency + update + idle overhead per update, exactly
    (the closed form). P = 64: gradients queue at a saturated master, which spends update + overhead on each (up to
    the first cycle, when it still waited)."""
    from experiments.clock.costmodel import CostModel, predicted_time_per_epoch

    K, B, N = 500, 8, 256
    result, _, _ = run_sim(
        tmp_path,
        ["delay=timing", f"workers={P}", f"updates={K}", "algorithm.lr=0.001", f"engine.costs.overhead_idle_s={IDLE}"],
    )
    assert result.costs["overhead_idle_s"] == IDLE and result.costs["master_s"] == pytest.approx(UPD + OVER)
    costs = CostModel(grad={B: GRAD}, update_s=UPD, latency_s=LAT, overhead_s=OVER, overhead_idle_s=IDLE)
    cycle = GRAD + 2 * LAT + UPD + IDLE
    predicted = predicted_time_per_epoch(costs, P, B, N, "async") * K * B / N
    if P == 1:
        assert result.time_s == pytest.approx(K * cycle) == predicted
    else:
        assert predicted == pytest.approx(K * (UPD + OVER))
        assert result.time_s == pytest.approx(predicted, abs=cycle + P * (IDLE - OVER))


def test_a_sync_round_charges_the_idle_overhead_once(tmp_path):
    """The master waited for the round: its first gradient costs the idle overhead, the other P - 1 the queued one."""
    sync, _, _ = run_sim(
        tmp_path,
        [
            "algorithm=sync_amsgrad",
            "algorithm.lr=0.01",
            "algorithm.sync_batch=full",
            "delay=timing",
            "workers=4",
            "updates=50",
            f"engine.costs.overhead_idle_s={IDLE}",
        ],
    )
    assert sync.time_s == pytest.approx(50 * (2 * LAT + GRAD + IDLE + 3 * OVER + UPD))


def test_a_timeline_shorter_than_the_run_says_where_it_ran_out(tmp_path):
    """The trace-driven twin replays a recorded run's gradients; asked for more updates than the timeline holds, the
    run ends with it and its message says so (it read as a complete run of 2 updates, status ok, without a word)."""
    from conftest import REPO

    timeline = REPO / "tests" / "fixtures" / "timeline" / "two_gradients.csv"
    result, _, _ = run_sim(tmp_path, ["workers=1", "updates=20", f"engine.trace={timeline}"])
    assert (result.updates, result.message) == (2, "the timeline (engine.trace) ran out after 2 updates")
    full, _, _ = run_sim(tmp_path, ["workers=1", "updates=2", f"engine.trace={timeline}"])
    assert (full.updates, full.message) == (2, "")


def test_the_twin_replays_a_master_that_computes_alone(tmp_path):
    """A real engine's timeline of the authors' master alone (workers=0: every gradient the master's own, its
    ``sent_s`` cell empty; the first rows of a committed lr_speedup run): the twin takes each update's recorded time,
    so the run's time is their sum (an empty cell was "cannot read a timeline", for every such committed run)."""
    from conftest import REPO

    path = REPO / "tests" / "fixtures" / "timeline" / "master_only.csv"
    rows = pd.read_csv(path)
    result, _, _ = run_sim(
        tmp_path, ["workers=0", "algorithm.master_computes=true", "updates=5", f"engine.trace={path}"]
    )
    assert result.updates == 5 and result.message == ""
    assert result.time_s == pytest.approx((rows["end_s"] - rows["start_s"]).sum(), rel=1e-12)


def test_a_clock_that_overflows_fails_the_run(tmp_path, monkeypatch):
    """Costs are bounded (a day a step), but should a run's clock still overflow, the run is failed with the reason,
    not recorded ok with a time of inf (a cost of 1e308 s gave '[ok] ... inf s' and a different training path)."""
    from experiments.engines import simulated

    real = simulated._run_timing

    def overflowing(*args):
        _, samples = real(*args)
        return float("inf"), samples

    monkeypatch.setattr(simulated, "_run_timing", overflowing)
    result, _, _ = run_sim(tmp_path, ["workers=2", "updates=10"])
    assert result.status == "failed"
    assert result.message == "the simulated clock overflowed after 10 updates (its time is not a finite number)"
