"""Staleness policies of the master (experiments/training/policies.py) and staleness reaching the rule.

Each policy is checked against a trace computed by hand: on the master directly (chosen read versions), and on the
simulated engine under a fixed delay (every gradient of update k >= tau has staleness exactly tau) or timing.
"""

import math
from typing import ClassVar

import pytest
import torch

from algorithms import build_rule
from algorithms.base import UpdateRule
from conftest import QuadraticProblem, run_sim, settings_for
from experiments.training import policies
from experiments.training.master import Master
from experiments.training.policies import PolicyError, build_policy
from experiments.training.sampling import BatchStream

LR = 0.5


def _master(policy, P=4, lr=LR):
    return Master(build_rule("sgd", lr=lr), torch.zeros(1), "async", P, policy=policy)


# ------------------------------------------------------------------ on the master, by hand


def test_mishchenko2022_step_is_min_1_tau_c_over_tau():
    m = _master({"name": "mishchenko2022", "tau_c": 2})
    x = 0.0
    for rv in (0, 0, 0, 0, 1, 5):  # taus 0, 1, 2, 3, 3, 0
        tau = m.version - rv
        m.receive(torch.ones(1), rv)
        x -= LR * (1.0 if tau <= 2 else 2 / tau)
        assert m.policy.last_scale == (1.0 if tau <= 2 else 2 / tau)
    assert m.x.item() == pytest.approx(x, rel=1e-6)
    assert m.discarded == 0 and m.version == 6 and m.histogram == {0: 2, 1: 1, 2: 1, 3: 2}


def test_wu2022_step_uses_up_the_budget_of_the_steps_taken_meanwhile():
    m = _master({"name": "wu2022"})
    scales = []
    for rv in (0, 0, 1, 1, 4, 2):  # taus 0, 1, 1, 2, 0, 3
        k = m.version
        tau = k - rv
        m.receive(torch.ones(1), rv)
        s = max(0.0, 1.0 - sum(scales[k - tau : k]))
        scales.append(s)
        assert m.policy.last_scale == pytest.approx(s)
    # by hand: s0 = 1; s1 = 1 - s0 = 0; s2 = 1 - s1 = 1; s3 = 1 - (s1 + s2) = 0; s4 = 1; s5 = 1 - (s2+s3+s4) = 0
    assert scales == [1.0, 0.0, 1.0, 0.0, 1.0, 0.0]
    assert m.x.item() == pytest.approx(-LR * 3)


def test_ringmaster_discards_exactly_the_gradients_with_tau_at_least_r():
    m = _master({"name": "ringmaster", "R": 2})
    taus, applied = [], []
    for rv in (0, 0, 0, 1, 3, 2, 4):
        taus.append(m.version - rv)
        applied.append(m.receive(torch.ones(1), rv))
    assert taus == [0, 1, 2, 1, 0, 2, 0]
    assert applied == [t < 2 for t in taus]
    assert m.discarded == 2 and m.gradients == 7 and m.version == 5
    assert m.histogram == {0: 3, 1: 2}  # the staleness log describes the applied updates only
    assert m.x.item() == pytest.approx(-LR * 5)


def test_rennala_applies_the_mean_of_s_fresh_gradients_and_drops_stale_ones():
    m = _master({"name": "rennala", "S": 2})
    assert not m.receive(torch.tensor([1.0]), 0)  # fresh, held
    assert m.discarded == 1  # held: not used by an update yet
    assert m.receive(torch.tensor([3.0]), 0)  # fresh, round complete: x = -0.5 * 2
    assert not m.receive(torch.tensor([100.0]), 0)  # computed at version 0, master at 1: discarded
    assert not m.receive(torch.tensor([5.0]), 1)
    assert m.receive(torch.tensor([7.0]), 1)  # x -= 0.5 * 6
    assert m.x.item() == pytest.approx(-1.0 - 3.0)
    assert m.version == 2 and m.gradients == 5 and m.discarded == 1
    assert m.histogram == {0: 2}


def test_no_policy_and_a_never_scaling_policy_are_bit_identical_to_the_plain_rule():
    gen = torch.Generator().manual_seed(0)
    grads = [torch.randn(50, generator=gen) for _ in range(30)]
    for kw in ({"variant": "torch", "lr": 1e-2}, {"variant": "paper", "lr": 1e-2}):
        ref_rule = build_rule("amsgrad", **kw)
        x = torch.ones(50)
        state = ref_rule.init(x)
        for g in grads:
            x, state = ref_rule.step(x, g, state)
        for policy in (None, {"name": "mishchenko2022", "tau_c": 100}, {"name": "ringmaster", "R": 100}):
            m = Master(build_rule("amsgrad", **kw), torch.ones(50), "async", 4, policy=policy)
            for i, g in enumerate(grads):
                m.receive(g, max(0, i - 3))
            assert torch.equal(m.x, x), (kw, policy)


def test_build_policy_errors_name_the_key():
    with pytest.raises(PolicyError, match=r"algorithm.policy.name='fifo'"):
        build_policy("fifo", 4)
    with pytest.raises(PolicyError, match=r"algorithm.policy.R=-1"):
        build_policy({"name": "ringmaster", "R": -1}, 4)
    assert build_policy({"name": "ringmaster"}, 4).R == 4  # default R = P
    with pytest.raises(PolicyError, match=r"algorithm.policy.S=2: not a key of policy 'ringmaster'"):
        build_policy({"name": "ringmaster", "R": 1, "S": 2}, 4)
    with pytest.raises(PolicyError, match="async algorithms only"):
        build_policy({"name": "wu2022"}, 4, "sync")
    assert build_policy({"name": "none"}, 4) is None
    assert build_policy({"name": "rennala"}, 4).S == 4  # default S = P
    assert build_policy({"name": "mishchenko2022"}, 8).tau_c == 8  # default tau_c = P


def test_a_scaling_policy_needs_a_rule_with_a_schedule():
    class NoSchedule:
        def init(self, x):
            return None

        def step(self, x, g, state):
            return x, state

    with pytest.raises(ValueError, match="no `schedule`"):
        Master(NoSchedule(), torch.zeros(1), "async", 2, policy={"name": "wu2022"})


# ------------------------------------------------------------------ staleness reaches the rule


class TauLogger(UpdateRule):
    """A rule that needs the staleness: SGD whose step is lr / (1 + tau), logging (tau, worker)."""

    name = "tau_logger_test"
    needs_staleness = True
    DEFAULTS: ClassVar[dict] = {**UpdateRule.DEFAULTS, "lr": 0.1}

    def __init__(self, **kw):
        super().__init__(**kw)
        self.seen = []

    def init(self, x):
        return {"k": 0}

    def step(self, x, g, state, *, tau, worker):
        self.seen.append((tau, worker))
        state["k"] += 1
        x.add_(g, alpha=-self.schedule(state["k"]) / (1 + tau))
        return x, state


def _tau_logger():
    return TauLogger(lr=0.1, lr_schedule="constant", alpha_max=None, bounds=None)


def test_a_rule_that_needs_staleness_gets_tau_and_worker_from_the_master():
    rule = _tau_logger()
    m = Master(rule, torch.zeros(1), "async", 3)
    m.receive(torch.ones(1), 0, worker=2)
    m.receive(torch.ones(1), 0, worker=0)
    m.receive(torch.ones(1), 1)
    assert rule.seen == [(0, 2), (1, 0), (1, None)]
    assert m.x.item() == pytest.approx(-0.1 - 0.05 - 0.05)
    sync_rule = _tau_logger()
    s = Master(sync_rule, torch.zeros(1), "sync", 2)
    s.receive(torch.ones(1), 0, worker=0)
    s.receive(torch.ones(1), 0, worker=1)
    assert sync_rule.seen == [(0, None)]  # a round's mean comes from no single worker


def test_a_rule_that_needs_staleness_fails_loudly_without_it():
    rule = _tau_logger()
    with pytest.raises(TypeError, match="tau"):
        rule.step(torch.zeros(1), torch.ones(1), rule.init(torch.zeros(1)))


def test_the_simulated_engine_hands_the_rule_the_fixed_delay(tmp_path):
    rule = _tau_logger()
    run_sim(tmp_path, ["delay=fixed", "delay.tau=3", "updates=10", "workers=2"], rule=rule)
    assert [t for t, _ in rule.seen] == [0, 1, 2] + [3] * 7
    assert {w for _, w in rule.seen} <= {0, 1}


# ------------------------------------------------------------------ on the simulated engine, fixed delay / timing


def _hand_fixed_delay(problem, tau, K, lr, scale_of, seed=0, B=8):
    """SGD with every gradient of update k taken at x_{k - min(tau, k)}, step scale_of(k, tau_k, scales) * lr."""
    stream = BatchStream(problem.num_train, B, seed)
    xs = [problem.init_params(seed)]
    scales = []
    for k in range(K):
        t = min(tau, k)
        _, g = problem.loss_grad(xs[k - t], stream.next())
        s = scale_of(k, t, scales)
        scales.append(s)
        x = xs[k].clone()
        x.add_(g, alpha=-(s * lr))
        xs.append(x)
    return xs[-1], scales


def test_mishchenko2022_on_a_fixed_delay_run_equals_its_formula(tmp_path):
    problem = QuadraticProblem()
    _, rec, settings = run_sim(
        tmp_path,
        [
            "delay=fixed",
            "delay.tau=4",
            "updates=40",
            "workers=2",
            "algorithm.policy.name=mishchenko2022",
            "algorithm.policy.tau_c=2",
        ],
        problem,
    )
    x, scales = _hand_fixed_delay(problem, 4, 40, settings.algorithm.lr, lambda k, t, s: 1.0 if t <= 2 else 2 / t)
    assert scales[:5] == [1.0, 1.0, 1.0, 2 / 3, 0.5] and set(scales[5:]) == {0.5}
    assert torch.equal(rec.master.x, x)


def test_wu2022_on_a_fixed_delay_run_equals_its_formula(tmp_path):
    problem = QuadraticProblem()
    _, rec, settings = run_sim(
        tmp_path, ["delay=fixed", "delay.tau=2", "updates=30", "workers=2", "algorithm.policy.name=wu2022"], problem
    )
    x, scales = _hand_fixed_delay(
        problem, 2, 30, settings.algorithm.lr, lambda k, t, s: max(0.0, 1.0 - sum(s[k - t : k]))
    )
    assert scales[:7] == [1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0]  # one full step every tau + 1 updates
    assert torch.equal(rec.master.x, x)


def test_ringmaster_on_a_fixed_delay_run_discards_every_gradient_of_delay_r(tmp_path):
    # fixed delay 3, R = 3: updates 0, 1, 2 have tau 0, 1, 2; from then on every gradient has tau 3 and is dropped
    result, rec, _ = run_sim(
        tmp_path,
        [
            "delay=fixed",
            "delay.tau=2",  # 3 after the checks (they refuse a delay at R: every later gradient dropped)
            "epochs=1",
            "workers=2",
            "algorithm.policy.name=ringmaster",
            "algorithm.policy.R=3",
        ],
        delay_past_checks={"tau": 3},
    )
    assert result.updates == 3 and dict(rec.master.histogram) == {0: 1, 1: 1, 2: 1}
    assert rec.master.discarded == result.gradients - 3 == 256 // 8 - 3
    assert rec.rows[-1]["discarded"] == rec.master.discarded


def _spy(monkeypatch, cls):
    log = []
    original = cls.receive

    def receive(self, master, g, tau, worker):
        applied = original(self, master, g, tau, worker)
        log.append((tau, applied))
        return applied

    monkeypatch.setattr(cls, "receive", receive)
    return log


@pytest.mark.parametrize("spread", ["sqrt", "linear"])
def test_ringmaster_on_a_timing_run_applies_exactly_tau_below_r(tmp_path, monkeypatch, spread):
    log = _spy(monkeypatch, policies.Ringmaster)
    result, rec, _ = run_sim(
        tmp_path,
        [
            "delay=timing",
            f"delay.spread={spread}",
            "workers=6",
            "epochs=3",
            "algorithm.policy.name=ringmaster",
            "algorithm.policy.R=2",
        ],
    )
    assert len(log) == result.gradients
    assert [a for _, a in log] == [t < 2 for t, _ in log]
    assert any(t >= 2 for t, _ in log)  # the case is exercised
    assert rec.master.discarded == sum(t >= 2 for t, _ in log) == result.gradients - result.updates
    assert max(rec.master.histogram) < 2


def test_rennala_on_a_timing_run_applies_only_fresh_gradients_in_rounds_of_s(tmp_path, monkeypatch):
    log = _spy(monkeypatch, policies.Rennala)
    result, rec, _ = run_sim(
        tmp_path,
        [
            "delay=timing",
            "delay.spread=sqrt",
            "workers=4",
            "epochs=3",
            "algorithm.policy.name=rennala",
            "algorithm.policy.S=3",
            "algorithm.policy.restart=false",
        ],
    )
    fresh = [t == 0 for t, _ in log]
    assert any(not f for f in fresh)
    # every third fresh gradient completes a round; a stale one never does
    n_fresh = 0
    for t, applied in log:
        n_fresh += t == 0
        assert applied == (t == 0 and n_fresh % 3 == 0)
    assert result.updates == sum(fresh) // 3 and dict(rec.master.histogram) == {0: result.updates}
    assert rec.master.discarded == result.gradients - 3 * result.updates


def test_discarding_policies_refuse_a_length_in_updates(tmp_path):
    from experiments.errors import ConfigError

    with pytest.raises(ConfigError, match="updates=100"):
        settings_for([f"results_dir={tmp_path}", "algorithm.policy.name=rennala", "updates=100"])


def test_a_discarded_gradient_costs_the_master_no_update_time(tmp_path):
    # fixed delay 3, R = 3, P = 1: one worker; run_sim's costs: grad 0.01 s, latency 0.0002 s, overhead 0.00015 s,
    # update 0.0001 s
    result, _, _ = run_sim(
        tmp_path,
        [
            "delay=fixed",
            "delay.tau=2",  # 3 after the checks (they refuse a delay at R: every later gradient dropped)
            "epochs=1",
            "workers=1",
            "algorithm.policy.name=ringmaster",
            "algorithm.policy.R=3",
        ],
        delay_past_checks={"tau": 3},
    )
    n = result.gradients  # 32 gradients, one after another; 3 updates
    # the initial iterate's latency, then per gradient: compute, latency back, the master's overhead (and the update
    # only if applied), and the new iterate's latency to the worker (none after the last gradient)
    expected = 0.0002 + n * (0.01 + 0.0002 + 0.00015) + (n - 1) * 0.0002 + 3 * 0.0001
    assert math.isclose(result.time_s, expected, rel_tol=1e-12)
