"""Values that name nothing or change nothing, through the real entry point (``python -m experiments.run``): an empty
name, a delay of 0 (delay=none by another name), a fixed delay a staleness policy discards or steps 0 from its first
updates on, a key the chosen law or compute does not read. Each is one line naming the key and the value, exit 2,
nothing written under results_dir."""

import pytest

from conftest import settings_for

# costs fixed and a small training set: a case the settings accept runs in a fraction of a second
FAST = [
    "problem.max_train=1000",
    "epochs=1",
    "engine.costs.grad_s=0.001",
    "engine.costs.update_s=1e-5",
    "engine.costs.latency_s=1e-5",
    "engine.costs.overhead_s=1e-5",
]
FREE_LUNCH = "every gradient at the newest iterate is a free lunch no real system has"

CASES = [
    # --------------------------------------------------------------- empty or blank free text (it ran: the harness
    # then called its own summary.csv damaged, its algorithm column empty)
    (
        ["-m", "algorithm.name=''", "workers=1,2"],
        "algorithm.name='': must be a name (the summary's algorithm column; leave algorithm.name out for the "
        "option's own)",
    ),
    (
        ["problem.name=' '"],
        "problem.name=' ': must be a name (the summary's problem column; leave problem.name out for the option's own)",
    ),
    (["algorithm.rule=''"], "algorithm.rule='': must name an update rule (amsgrad, sgd)"),
    (
        ["problem.dataset=''"],
        "problem.dataset='': must name a data set (fashion_mnist, mnist, cifar10) or be a mapping with _target_",
    ),
    (
        ["problem=lenet5_fmnist", "problem.model=''"],
        "problem.model='': must name a built-in net (lenet5, allcnn, resnet18) or be a mapping with _target_",
    ),
    (
        ["engine=distributed", "engine.master_addr=''"],
        "engine.master_addr='': must be an address of this machine (the default 127.0.0.1: loopback)",
    ),
    # --------------------------------------------------------------- a delay of 0 with P > 1 async workers
    (
        ["workers=3", "delay=fixed", "delay.tau=0"],
        f"delay.tau=0 with workers=3: {FREE_LUNCH}; use delay.tau >= 1 or delay=timing (staleness from the timing "
        "model)",
    ),
    (
        ["workers=3", "delay=uniform", "delay.max_delay=0"],
        f"delay.max_delay=0 with workers=3: {FREE_LUNCH}; use delay.max_delay >= 1 or delay=timing (staleness from "
        "the timing model)",
    ),
    # --------------------------------------------------------------- a fixed delay at a policy's threshold (it ran:
    # 3 updates, then 44 of 47 gradients discarded; or 43 updates of step 0)
    (
        ["workers=3", "algorithm=ringmaster_asgd", "delay=fixed"],
        "delay.tau=4: at or above policy ringmaster's threshold R=3 (algorithm.policy.R; null: workers): every "
        "gradient after the first 3 updates would be discarded (a delay.tau below R, a larger R, or delay=uniform)",
    ),
    (
        ["workers=8", "algorithm=apam_ringmaster", "algorithm.policy.R=2", "delay=fixed", "delay.tau=2"],
        "delay.tau=2: at or above policy ringmaster's threshold R=2 (algorithm.policy.R; null: workers): every "
        "gradient after the first 2 updates would be discarded (a delay.tau below R, a larger R, or delay=uniform)",
    ),
    (
        ["workers=3", "algorithm=apam_koloskova", "delay=fixed"],
        "delay.tau=4: above policy koloskova2022's threshold tau_c=3 (algorithm.policy.tau_c; null: workers): every "
        "update after the first 4 would take step 0 (a delay.tau <= tau_c, algorithm.policy.stale_step=inverse, or "
        "delay=uniform)",
    ),
    (
        ["workers=3", "algorithm=rennala_sgd", "algorithm.policy.restart=false", "delay=fixed", "delay.tau=1"],
        "delay.tau=1: policy rennala applies gradients of staleness 0 only: every gradient after its first round of "
        "S=3 would be discarded (use delay=uniform or delay=timing)",
    ),
    # --------------------------------------------------------------- a key the law or the compute does not read
    (
        ["delay.law=constant", "delay.sigma=2"],
        "delay.sigma=2: only delay.law=lognormal reads it, not law=constant (choose delay.law=lognormal, or leave "
        "delay.sigma at 0)",
    ),
    (
        ["delay.law=exponential", "delay.shape=7"],
        "delay.shape=7: only delay.law=pareto reads it, not law=exponential (choose delay.law=pareto, or leave "
        "delay.shape at 1.5)",
    ),
    (
        ["delay.law=measured", "delay.slowdown=3"],
        "delay.slowdown=3: slows the first delay.slow_workers workers, and delay.slow_workers=0 (set "
        "delay.slow_workers, or leave delay.slowdown at 1)",
    ),
    (
        ["engine.costs.late_s=0.001"],
        "engine.costs.late_s=0.001: only engine.compute=emulated reads it (real compute has no emulated wait to end "
        "late; set engine.costs.late_s=null)",
    ),
]


def _argv(args: list[str], results_dir: str) -> list[str]:
    """The flags first, then the results folder, the fast costs (for the simulated engine) and the case's overrides."""
    flags = [a for a in args if a.startswith("-")]
    overrides = [a for a in args if not a.startswith("-")]
    fast = [] if "engine=distributed" in overrides else FAST
    fast = [f for f in fast if f.split("=")[0] not in {o.split("=")[0] for o in overrides}]
    return [*flags, f"results_dir={results_dir}", *fast, *overrides]


@pytest.mark.parametrize("args,message", CASES, ids=[" ".join(a) for a, _ in CASES])
def test_a_value_that_names_or_changes_nothing_is_one_line_exit_2(tmp_path, entry_point, args, message):
    code, stderr = entry_point(_argv(args, f"{tmp_path}/res"))
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert code == 2, stderr[-3000:]
    assert lines == [f"error: {message}"], stderr[-3000:]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "args",
    [
        ["workers=1", "delay=fixed", "delay.tau=0"],  # tau_threshold's tau=0 (one worker: no free lunch)
        ["workers=1", "delay=uniform", "delay.max_delay=0"],  # artificial_delay's max_delay=0
        ["workers=3", "algorithm=ringmaster_asgd", "algorithm.policy.R=5", "delay=fixed"],  # tau 4 < R 5
        ["workers=3", "algorithm=apam_koloskova", "algorithm.policy.stale_step=inverse", "delay=fixed"],  # 1/tau
        ["workers=3", "algorithm=apam_koloskova", "algorithm.policy.tau_c=4", "delay=fixed"],  # tau 4 <= tau_c
        ["workers=3", "algorithm=apam_mishchenko", "delay=fixed"],  # tau_c / tau > 0
        ["workers=3", "algorithm=ringmaster_asgd", "delay=uniform"],  # staleness 0 is drawn too
        ["delay.law=lognormal", "delay.sigma=1"],
        ["delay.law=pareto", "delay.shape=3"],
        ["delay.slow_workers=1", "delay.slowdown=3"],
        ["delay.law=constant", "delay.sigma=0"],  # the value that changes nothing: the experiments' configs write it
        ["engine.compute=emulated", "engine.compute_base_s=0.01", "engine.costs.late_s=0.001"],
    ],
    ids=" ".join,
)
def test_the_settings_that_apply_still_build(args):
    given = dict(a.split("=", 1) for a in args)
    settings = settings_for(args)  # no ConfigError
    assert settings.delay.model == given.get("delay", "timing")
    assert settings.workers == int(given.get("workers", 1))
