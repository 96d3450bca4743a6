"""The staleness policies as their sources state them (experiments/training/policies.py), checked against hand
computations: Ringmaster's threshold (tau < R kept), its stops and Rennala's restarts on the simulated engine's two
loops, Koloskova et al.'s and Wu et al.'s (our reading) step factors on a known delay sequence, step against gradient
scaling on AMSGrad, and the policy keys as typed, swept and refused settings."""

from __future__ import annotations

import pytest
import torch

from algorithms import build_rule
from conftest import run_sim, settings_for
from experiments.errors import ConfigError
from experiments.settings.build import build_settings
from experiments.settings.compose import compose_jobs, job_overrides
from experiments.training.master import Master
from experiments.training.policies import build_policy

LR = 0.5
ZERO_COSTS = [
    "engine.costs.update_s=0",
    "engine.costs.latency_s=0",
    "engine.costs.overhead_s=0",
    "engine.costs.overhead_idle_s=0",
]
"""No message or master time: an update happens at its gradient's arrival, so at an update every other computation
is still running (lognormal compute times: no ties) and a stop always finds it unfinished."""


def _sgd_master(policy, P=4):
    return Master(build_rule("sgd", lr=LR), torch.zeros(1), "async", P, policy=policy)


def _feed(m, read_versions):
    """Receive a gradient of 1 computed at each read version in turn; return the taus and whether each applied."""
    taus, applied = [], []
    for rv in read_versions:
        taus.append(m.version - rv)
        applied.append(m.receive(torch.ones(1), rv))
    return taus, applied


# ------------------------------------------------------------------ Ringmaster: tau < R kept, tau >= R discarded


@pytest.mark.parametrize("R", [1, 3])
def test_ringmaster_keeps_delay_r_minus_1_and_discards_delay_r(R):
    m = _sgd_master({"name": "ringmaster", "R": R})
    for _ in range(R):  # R fresh updates: the master is at version R
        m.receive(torch.ones(1), m.version)
    taus, applied = _feed(m, [m.version - (R - 1), m.version + 1 - R, m.version + 1 - R - 1])
    # version R: a gradient read at 1 has tau R - 1 (kept, version R + 1); read at 1 again: tau R (discarded);
    # read at 0: tau R + 1 (discarded)
    assert taus == [R - 1, R, R + 1] and applied == [True, False, False]
    assert m.version == R + 1 and m.discarded == 2 and max(m.histogram) == R - 1


def test_ringmaster_stop_delay_is_r_only_with_restart():
    assert build_policy({"name": "ringmaster", "R": 3}, 4).stop_delay is None
    assert build_policy({"name": "ringmaster", "R": 3, "restart": True}, 4).stop_delay == 3
    assert build_policy({"name": "rennala", "S": 2}, 4).stop_delay == 1  # the source's restarts by default
    assert build_policy({"name": "rennala", "S": 2, "restart": False}, 4).stop_delay is None
    m = _sgd_master({"name": "ringmaster", "R": 2, "restart": True})
    m.receive(torch.ones(1), 0)
    assert not m.must_stop(0)  # delay 1 < R
    m.receive(torch.ones(1), 1)
    assert m.must_stop(0) and not m.must_stop(1)  # delay 2 = R: stop
    assert not m.receive_stopped(0, worker=3)  # a stopped computation's late gradient: counted, discarded
    assert (m.gradients, m.discarded, m.version, m.per_worker[3]) == (3, 1, 2, (2, 1))


# ------------------------------------------------------------------ stops on the simulated engine


def _spy(monkeypatch):
    """Log every restart (worker, read version of the stopped computation, version handed out) and every gradient
    received (worker, read version, tau), in the engine's order."""
    log = []
    receive, restarted = Master.receive, Master.restarted

    def spy_receive(self, g, read_version, worker=None):
        log.append(("receive", worker, int(read_version), self.version - int(read_version)))
        return receive(self, g, read_version, worker)

    def spy_restarted(self, worker, read_version):
        log.append(("restart", worker, int(read_version), self.version))
        return restarted(self, worker, read_version)

    monkeypatch.setattr(Master, "receive", spy_receive)
    monkeypatch.setattr(Master, "restarted", spy_restarted)
    return log


@pytest.mark.parametrize("cores", [[], ["engine.cores=2"]], ids=["dedicated", "shared-cores"])
def test_a_ringmaster_stop_restarts_the_worker_at_the_current_iterate(tmp_path, monkeypatch, cores):
    log = _spy(monkeypatch)
    result, rec, _ = run_sim(
        tmp_path,
        [
            "delay=timing",
            "delay.law=lognormal",
            "delay.sigma=0.5",
            "workers=4",
            "epochs=2",
            "algorithm=ringmaster_asgd",
            "algorithm.policy.R=2",
            "algorithm.policy.restart=true",
            *ZERO_COSTS,
            *cores,
        ],
    )
    m = rec.master
    restarts = [e for e in log if e[0] == "restart"]
    received = [e for e in log if e[0] == "receive"]
    assert len(restarts) == m.restarts > 10 and rec.rows[-1]["stopped"] == m.restarts
    for _, _w, read, now in restarts:
        assert now - read >= 2  # stopped once its delay reached R
    # after a restart at version V, the worker's next gradient is computed at V (unless it is stopped again first)
    for i, (kind, w, _, now) in enumerate(log):
        if kind == "restart":
            nxt = next(e for e in log[i + 1 :] if e[1] == w)
            assert nxt[0] == "restart" or nxt[2] == now, (log[i], nxt)
    # a stopped computation never reaches the master: no gradient of delay >= R arrives, none is discarded
    stopped = {(w, read) for _, w, read, _ in restarts}
    assert not stopped & {(w, read) for _, w, read, _ in received}
    assert max(tau for *_, tau in received) < 2 and m.discarded == 0
    assert result.updates == result.gradients == len(received) == 2 * 256 // 8


@pytest.mark.parametrize("cores", [[], ["engine.cores=2"]], ids=["dedicated", "shared-cores"])
def test_rennala_restarts_every_worker_when_a_round_ends(tmp_path, monkeypatch, cores):
    log = _spy(monkeypatch)
    common = [
        "delay=timing",
        "delay.law=lognormal",
        "delay.sigma=0.5",
        "workers=4",
        "epochs=2",
        "algorithm=rennala_sgd",
        "algorithm.policy.S=4",
        *ZERO_COSTS,
        *cores,
    ]
    result, rec, _ = run_sim(tmp_path / "stops", common)
    received = [e for e in log if e[0] == "receive"]
    # every gradient reaching the master was computed at the current iterate: none computed at an old point is
    # discarded after a round end (the only gradients not applied are the last, incomplete round's)
    assert all(tau == 0 for *_, tau in received)
    assert rec.master.discarded == rec.master.policy.pending == result.gradients - 4 * result.updates < 4
    # each round's end stops the 3 workers still computing at the old iterate (the round's last sender is idle)
    restarts = [e for e in log if e[0] == "restart"]
    rounds = [
        i for i, e in enumerate(log) if e[0] == "receive" and sum(x[0] == "receive" for x in log[: i + 1]) % 4 == 0
    ]
    assert len(restarts) == rec.master.restarts
    assert all(now - read == 1 for *_, read, now in restarts)
    for i in rounds[:-1]:
        after = log[i + 1 : i + 4]
        assert [e[0] for e in after] == ["restart"] * 3 and {e[1] for e in after} == {0, 1, 2, 3} - {log[i][1]}
    # without restarts the stale computations run on and are discarded
    log.clear()
    result_off, rec_off, _ = run_sim(tmp_path / "off", [*common, "algorithm.policy.restart=false"])
    stale = sum(1 for e in log if e[0] == "receive" and e[3] > 0)
    assert stale > 0.3 * result_off.gradients and rec_off.master.restarts == 0


def test_stops_refused_where_no_computation_can_be_stopped(tmp_path, monkeypatch):
    base = [f"results_dir={tmp_path}", "workers=4", "algorithm=ringmaster_asgd", "algorithm.policy.restart=true"]
    with pytest.raises(
        ConfigError,
        match=r"^algorithm.policy.restart=true: ringmaster stops computations, which "
        r"needs delay=timing \(delay=uniform",
    ):
        settings_for([*base, "delay=uniform", "delay.max_delay=3"])
    with pytest.raises(ConfigError, match=r"^algorithm.policy.restart=true: engine.handoff=spin"):
        settings_for([*base, "engine=shared_memory", "engine.handoff=spin"])
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "5")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    with pytest.raises(ConfigError, match=r"^algorithm.policy.restart=true: torchrun's worker ranks"):
        settings_for([*base, "engine=distributed"])
    settings_for([f"results_dir={tmp_path}", "workers=4", "algorithm=ringmaster_asgd", "engine=distributed"])


# ------------------------------------------------------------------ delay-adaptive steps on a known delay sequence


@pytest.mark.parametrize("stale_step,expected", [("zero", [1, 1, 1, 0, 0, 1]), ("inverse", [1, 1, 1, 1 / 3, 1 / 3, 1])])
def test_koloskova2022_steps_on_a_known_delay_sequence(stale_step, expected):
    m = _sgd_master({"name": "koloskova2022", "tau_c": 2, "stale_step": stale_step})
    scales, x = [], 0.0
    for rv in (0, 0, 0, 0, 1, 5):  # taus 0, 1, 2, 3, 3, 0: tau_c = 2 keeps the first three full
        m.receive(torch.ones(1), rv)
        scales.append(m.policy.last_scale)
    assert scales == pytest.approx(expected)
    x = -LR * sum(expected)
    assert m.x.item() == pytest.approx(x, rel=1e-6)
    assert m.version == 6 and m.discarded == 0  # a zero step is still an update (Algorithm 1: t advances)
    assert dict(m.histogram) == {0: 2, 1: 1, 2: 1, 3: 2}


def test_wu2022_steps_on_a_known_delay_sequence():
    m = _sgd_master({"name": "wu2022"})
    taus, scales = [], []
    for rv in (0, 1, 0, 2, 1, 4):
        taus.append(m.version - rv)
        m.receive(torch.ones(1), rv)
        scales.append(m.policy.last_scale)
    # by hand, s_k = max(0, 1 - (s_{k - tau_k} + ... + s_{k-1})): taus 0, 0, 2, 1, 3, 1 give
    # s0 = 1, s1 = 1, s2 = 1 - (s0 + s1) -> 0, s3 = 1 - s2 = 1, s4 = 1 - (s1 + s2 + s3) -> 0, s5 = 1 - s4 = 1
    assert taus == [0, 0, 2, 1, 3, 1]
    assert scales == [1.0, 1.0, 0.0, 1.0, 0.0, 1.0]
    assert m.x.item() == pytest.approx(-LR * 4)


# ------------------------------------------------------------------ step against gradient scaling


@pytest.mark.parametrize("scale", ["step", "gradient"])
def test_amsgrad_moments_see_the_scaled_gradient_only_with_gradient_scaling(scale):
    """Mishchenko's factor with tau_c = 1: the third gradient, read at version 0 when the master is at 2 (tau 2),
    gets s = 1/2. Step scaling halves alpha_3 and feeds g3 to m, v; gradient scaling feeds g3 / 2."""
    b1, b2, lr, eps = 0.9, 0.999, 1e-2, 1e-8
    rule = build_rule("amsgrad", variant="torch", lr=lr, beta1=b1, beta2=b2, eps=eps, impl="eager")
    m = Master(rule, torch.zeros(3), "async", 2, policy={"name": "mishchenko2022", "tau_c": 1, "scale": scale})
    g = [torch.tensor([1.0, -2.0, 0.5]), torch.tensor([0.5, 1.0, -1.0]), torch.tensor([2.0, 2.0, -4.0])]
    g3 = g[2].clone()
    for gk in g:
        m.receive(gk, 0)
    assert m.policy.last_scale == 0.5 and torch.equal(g[2], g3)  # the transport's gradient is not modified
    s = 0.5 if scale == "gradient" else 1.0
    m_hand = b1**2 * (1 - b1) * g[0] + b1 * (1 - b1) * g[1] + (1 - b1) * s * g[2]
    v_hand = b2**2 * (1 - b2) * g[0] ** 2 + b2 * (1 - b2) * g[1] ** 2 + (1 - b2) * (s * g[2]) ** 2
    assert torch.allclose(m.state.m, m_hand, rtol=1e-6, atol=0)
    assert torch.allclose(m.state.v, v_hand, rtol=1e-6, atol=0)
    # the steps: s multiplies alpha_3 with step scaling; with gradient scaling the step is the rule's own
    x = torch.zeros(3, dtype=torch.float64)
    mm, vv, vh = (torch.zeros(3, dtype=torch.float64) for _ in range(3))
    for k, gk in enumerate(g, start=1):
        gk = gk.double() * (s if k == 3 else 1.0)
        mm = b1 * mm + (1 - b1) * gk
        vv = b2 * vv + (1 - b2) * gk**2
        vh = torch.maximum(vh, vv)
        step = lr * (0.5 if scale == "step" and k == 3 else 1.0)
        x = x - step / (1 - b1**k) * mm / (vh.sqrt() / (1 - b2**k) ** 0.5 + eps)
    assert torch.allclose(m.x.double(), x, rtol=1e-5, atol=1e-7)


def test_for_sgd_step_and_gradient_scaling_are_the_same_update():
    xs = []
    for scale in ("step", "gradient"):
        m = Master(
            build_rule("sgd", lr=LR),
            torch.zeros(2),
            "async",
            2,
            policy={"name": "koloskova2022", "tau_c": 1, "stale_step": "inverse", "scale": scale},
        )
        for rv in (0, 0, 0, 1, 0):
            m.receive(torch.tensor([1.0, -3.0]), rv)
        xs.append(m.x)
    assert torch.allclose(xs[0], xs[1], rtol=1e-6)


# ------------------------------------------------------------------ typed, swept and refused keys


def test_r_and_s_sweep_from_the_command_line_and_default_to_p(tmp_path):
    base = [f"results_dir={tmp_path}", "workers=6"]
    combos, n = job_overrides([*base, "algorithm=ringmaster_asgd", "algorithm.policy.R=1,2,4,8"], multirun=True)
    assert n == 4
    assert [build_settings(c).algorithm.policy.R for c in compose_jobs(combos)] == [1, 2, 4, 8]
    combos, _ = job_overrides([*base, "algorithm=rennala_sgd", "algorithm.policy.S=2,3"], multirun=True)
    assert [build_settings(c).algorithm.policy.S for c in compose_jobs(combos)] == [2, 3]
    assert settings_for([*base, "algorithm=ringmaster_asgd"]).algorithm.policy.R == 6
    assert settings_for([*base, "algorithm=rennala_sgd"]).algorithm.policy.S == 6
    s = settings_for([*base, "algorithm=apam_koloskova"]).algorithm.policy
    assert (s.name, s.tau_c, s.stale_step, s.scale) == ("koloskova2022", None, "zero", "step")
    assert build_policy(s, 6).tau_c == 6


@pytest.mark.parametrize(
    "override,message",
    [
        ("algorithm.policy.R=0", "algorithm.policy.R=0: must be an integer >= 1"),
        ("algorithm.policy.R=2.5", "algorithm.policy.R=2.5: must be an integer"),
        ("algorithm.policy.scale=step", "algorithm.policy.scale=step: not a key of policy 'ringmaster'"),
        ("algorithm.policy.restart=maybe", "algorithm.policy.restart=maybe: must be true or false"),
    ],
)
def test_bad_policy_keys_are_one_line_exit_2(tmp_path, entry_point, override, message):
    code, err = entry_point([f"results_dir={tmp_path}", "algorithm=ringmaster_asgd", override])
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and message in lines[0], err
    assert not any(tmp_path.iterdir())


def test_bad_koloskova_and_scale_values_are_refused(tmp_path):
    base = [f"results_dir={tmp_path}", "workers=4"]
    with pytest.raises(ConfigError, match=r"algorithm.policy.stale_step=half: must be zero or inverse"):
        settings_for([*base, "algorithm=apam_koloskova", "algorithm.policy.stale_step=half"])
    with pytest.raises(ConfigError, match=r"algorithm.policy.scale=moments: must be step or gradient"):
        settings_for([*base, "algorithm=apam_wu", "algorithm.policy.scale=moments"])
    with pytest.raises(ConfigError, match=r"algorithm.policy.stale_step=zero: not a key of policy 'wu2022'"):
        settings_for([*base, "algorithm=apam_wu", "algorithm.policy.stale_step=zero"])
