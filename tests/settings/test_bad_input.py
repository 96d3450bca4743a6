"""Bad input: a one-line error naming the key and the value, exit code 2, nothing written (issue 2, item 6)."""
import subprocess
import sys

import pytest

from conftest import REPO

CASES = [
    (["algorithm=nope"], "algorithm=nope"),
    (["problem=nope"], "problem=nope"),
    (["wokers=2"], "wokers=2"),
    (["workers=0"], "workers=0"),
    (["workers=-3"], "workers=-3"),
    (["delay=fixed", "delay.tau=-1"], "delay.tau=-1"),
    (["delay=uniform", "delay.max_delay=-2"], "delay.max_delay=-2"),
    (["algorithm.lr=0"], "algorithm.lr=0"),
    (["algorithm.lr=-0.1"], "algorithm.lr=-0.1"),
    (["algorithm.beta1=1.0"], "algorithm.beta1=1.0"),
    (["algorithm.beta2=-0.1"], "algorithm.beta2=-0.1"),
    (["algorithm=sync_amsgrad", "delay=fixed"], "delay=fixed"),
    (["algorithm=sync_amsgrad", "delay=uniform"], "delay=uniform"),
    (["problem=logreg_libsvm", "problem.path=/no/such/file.svm"], "problem.path=/no/such/file.svm"),
    (["problem=logreg_libsvm"], "problem.path=None"),
    (["device=tpu"], "device=tpu"),
    (["workers=1,2"], "workers=1,2"),
    (["-m", "workers=1,0"], "workers=0"),
    (["-m", "algorithm=apam,sync_amsgrad", "delay=none,fixed"], "delay=fixed"),
    (["results_dir=/proc/forbidden"], "results_dir=/proc/forbidden"),
    (["results_dir=/etc/hostname/x"], "results_dir=/etc/hostname/x"),
    (["results_dir=/etc/hostname"], "results_dir=/etc/hostname"),
    (["engine=shared_memory", "engine.fault.mode=explode"], "engine.fault.mode=explode"),
    (["problem=logreg_fmnist", "algorithm.impl=fused"], "impl='fused'"),  # the torch variant's, not the paper's
    (["problem=lenet5_fmnist", "algorithm.impl=compiled"], "impl='compiled'"),
    (["algorithm.impl=bogus"], "impl='bogus'"),
    (["algorithm.variant=adam"], "variant='adam'"),
    (["algorithm.bounds=[1,0]"], "bounds=(1, 0)"),
]


@pytest.mark.parametrize("args,named", CASES, ids=[" ".join(a) for a, _ in CASES])
def test_bad_input_exits_2_with_one_line_naming_it(tmp_path, args, named):
    proc = subprocess.run([sys.executable, "-m", "experiments.run", f"results_dir={tmp_path}/res", *args],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: ") and named in lines[0]
    assert not (tmp_path / "res").exists()


@pytest.mark.parametrize("problem,variant,eps", [("logreg_fmnist", "paper", 0.0), ("logreg_fmnist", "torch", 1e-8),
                                                 ("lenet5_fmnist", "torch", 1e-8)])
def test_a_problem_leaves_eps_to_the_variant_it_runs(problem, variant, eps):
    # logistic regression's paper rule has no eps; switched to the torch variant it must get torch's, not 0
    # (never-touched pixels would give 0/0 on the first step)
    from conftest import compose_cfg

    from experiments.settings.validate import build_rule_from_config

    cfg = compose_cfg([f"problem={problem}", f"algorithm.variant={variant}"])
    assert build_rule_from_config(cfg.algorithm).eps == eps
