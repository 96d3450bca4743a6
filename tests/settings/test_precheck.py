"""The precheck (experiments/settings/compose.py): every job of a sweep is composed and built
into typed settings as a whole before any runs, whatever the sweep's size; bad values and unknown keys are refused
with one line naming them (the table of bad input: tests/settings/test_bad_input.py); the data of every job is
checked first."""

import itertools
import os
import subprocess
import sys

import pytest
import torch

from conftest import REPO, compose_cfg, settings_for
from experiments.errors import ConfigError
from experiments.settings.build import make_rule
from experiments.settings.compose import compose_jobs, job_overrides, precheck
from experiments.settings.schema import RunSettings


def _refused(overrides, named, multirun=False, tmp_path=None):
    results = [f"results_dir={tmp_path}/res"] if tmp_path is not None else []
    with pytest.raises(ConfigError) as info:
        precheck(results + overrides, multirun)
    msg = str(info.value)
    assert "\n" not in msg and named in msg, msg
    return msg


def test_composition_matches_hydra_compose_job_by_job():
    overrides = [
        "problem=logreg_fmnist,lenet5_fmnist",
        "algorithm=apam,sync_amsgrad",
        "workers=2,8",
        "delay=timing",
        "delay.slow_workers=1",
        "algorithm.lr=0.001",
        "seed=3",
    ]
    combos, total = job_overrides(overrides, multirun=True)
    assert total == len(combos) == 8
    for combo, cfg in zip(combos, compose_jobs(combos)):
        assert cfg == compose_cfg(combo), combo


def test_every_job_of_a_large_sweep_is_checked_as_a_whole(tmp_path):
    # 2 x 7 x 3 x 2 = 84 jobs; only sync + P = 64 + batch 32 is invalid (a split sync batch needs batch >= P), which
    # no pair of keys shows with the third at its first value
    sweep = ["algorithm=apam,sync_amsgrad", "workers=1,2,4,8,16,32,64", "batch_size=128,64,32", "seed=0,1"]
    combos, total = job_overrides(sweep, multirun=True)
    assert total == len(combos) == 84
    assert sorted(map(tuple, combos)) == sorted(
        itertools.product(*[[f"{s.split('=')[0]}={v}" for v in s.split("=")[1].split(",")] for s in sweep])
    )
    _refused(sweep, "batch_size=32", multirun=True, tmp_path=tmp_path)


def test_a_key_one_option_of_a_group_lacks_is_named_with_that_option(tmp_path):
    """``engine.colocate`` is a key of the shared_memory engine only: in a sweep over engines the message names the
    job's engine that lacks it (it said ``"Key 'engine.colocate' is not in the config"``, whatever the job)."""
    msg = _refused(["engine=shared_memory,simulated", "engine.colocate=true"], "engine.colocate", True, tmp_path)
    assert msg.endswith(": not a key of engine=simulated"), msg
    msg = _refused(["problem.no_such_key=1"], "problem.no_such_key=1", tmp_path=tmp_path)
    assert msg.endswith(": not a key of problem=logreg_fmnist"), msg
    assert _refused(["no_such.key=1"], "no_such.key=1", tmp_path=tmp_path).endswith(": no such config key")


@pytest.mark.parametrize(
    ("place", "make", "what"),
    [
        (".hydra", lambda p: p.write_text("x"), "a regular file, not the folder"),
        (".hydra", lambda p: p.symlink_to(p.parent / "nowhere"), "a link to nothing, not the folder"),
        ("adhoc", lambda p: p.write_text("x"), "a regular file, not the folder"),
        ("adhoc/runs", lambda p: p.write_text("x"), "a regular file, not the folder"),
        ("adhoc/runs/updates-5_seed-0", lambda p: p.write_text("x"), "a regular file, not the folder"),  # the run's
        # a single run's folder is named by the number Hydra reads (1e-5 is 1e-05, as in a sweep: the check once
        # looked at another folder than the run and the run ended in '[Errno 17] File exists')
        (
            "adhoc/runs/engine.costs.grad-s-1e-05_updates-5_seed-0",
            lambda p: p.write_text("x"),
            "a regular file, not the folder",
        ),
        ("adhoc/runs/updates-5_seed-0/config.yaml", lambda p: p.mkdir(), "a folder, not the file"),  # a rerun's file
        ("adhoc/runs/updates-5_seed-0/trace.csv", lambda p: os.mkfifo(p), "a special file, not the file"),
        ("adhoc/summary.csv.lock", lambda p: p.mkdir(), "a folder, not the file"),
        ("adhoc/summary.csv.lock", lambda p: p.symlink_to(p.parent / "elsewhere"), "a link to nothing, not the file"),
    ],
)
def test_a_place_a_run_writes_that_is_of_another_kind_is_refused_before_the_run(tmp_path, place, make, what):
    """Each was found after the run: a traceback, or a run trained and then left without its summary row."""
    res = tmp_path / "res"
    (res / place).parent.mkdir(parents=True, exist_ok=True)
    make(res / place)
    args = ["updates=5"] + (["engine.costs.grad_s=1e-5"] if "grad-s" in place else [])
    msg = _refused(args, f"{res / place}: {what} a run writes there; remove it", tmp_path=tmp_path)
    assert msg == f"{res / place}: {what} a run writes there; remove it"


def test_a_backend_the_job_or_machine_cannot_use_is_refused_before_any_job_runs(tmp_path):
    """nccl was found when the engine started: after the run's folder was written, and in a sweep after the gloo job
    before it had run."""
    sweep = ["engine=distributed", "engine.backend=gloo,nccl", "updates=5"]
    _refused(sweep, "engine.backend=nccl: NCCL has no receive-from-any-worker; async needs gloo", True, tmp_path)
    if not torch.cuda.is_available():
        sync = ["engine=distributed", "engine.backend=nccl", "algorithm=sync_amsgrad", "workers=2"]
        _refused(sync, "engine.backend=nccl: needs a GPU per rank (3), found 0", tmp_path=tmp_path)
    assert not (tmp_path / "res").exists()


def test_more_real_workers_than_the_machine_allows_are_refused_before_any_start(tmp_path, monkeypatch):
    """shared_memory at P = 100000 died part-way (too many open files) leaving a failed run; distributed kept
    starting processes. The bound is the master's open files (ulimit -n), the user's processes (ulimit -u) and, for
    spawn, the memory available; the simulated engine has no such bound."""
    import resource

    from experiments.settings import preflight

    files = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    too_many = (files - preflight.MASTER_FILES_BASE) // preflight.MASTER_FILES_PER_WORKER + 1
    for engine in ("shared_memory", "distributed"):
        msg = _refused(
            [f"engine={engine}", f"workers={too_many}", f"updates={10 * too_many}"],
            f"workers={too_many}: ",
            False,
            tmp_path,
        )
        assert msg.endswith(f"this process may open {files} (ulimit -n)"), msg
    monkeypatch.setattr(preflight, "_available_mib", lambda: 1000)
    spawn = ["engine=distributed", "engine.start_method=spawn", "workers=4", "updates=5"]
    assert "spawn workers need about 1100 MiB (275 each), 1000 MiB available" in _refused(
        spawn, "workers=4", False, tmp_path
    )
    assert not (tmp_path / "res").exists()
    assert precheck([f"results_dir={tmp_path}/res", f"workers={too_many}", f"updates={10 * too_many}"], False)


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"RANK": "abc", "WORLD_SIZE": "3"}, "RANK=abc: torchrun's RANK must be an integer"),
        ({"RANK": "0", "WORLD_SIZE": "abc"}, "WORLD_SIZE=abc: torchrun's WORLD_SIZE must be an integer"),
        ({"RANK": "-1", "WORLD_SIZE": "3"}, "RANK=-1: must be in 0 .. WORLD_SIZE - 1 (WORLD_SIZE=3)"),
        ({"RANK": "0", "WORLD_SIZE": "5"}, "workers=2: torchrun started 5 processes, needs workers + 1 = 3"),
    ],
)
def test_torchrun_variables_are_checked_before_anything_is_written(tmp_path, monkeypatch, env, named):
    """They were a ValueError traceback, or an error after the run's config.yaml was written."""
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    _refused(["engine=distributed", "workers=2", "updates=5"], named, False, tmp_path)
    assert not (tmp_path / "res").exists()


def test_a_stray_rank_variable_leaves_the_shared_memory_engine_checked(tmp_path, monkeypatch):
    """RANK set (a shell left it, a torchrun script) turned off the bounds of a shared_memory run's processes."""
    import resource

    from experiments.settings import preflight

    monkeypatch.setenv("RANK", "0")
    files = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    too_many = (files - preflight.MASTER_FILES_BASE) // preflight.MASTER_FILES_PER_WORKER + 1
    overrides = ["engine=shared_memory", f"workers={too_many}", f"updates={10 * too_many}"]
    _refused(overrides, f"workers={too_many}: engine=shared_memory's master would hold", False, tmp_path)


def test_add_or_override_of_an_existing_key_is_an_override(tmp_path):
    """``++key=v`` (Hydra's add-or-override) of a key the config has was refused as "no such config key"."""
    (top,) = precheck([f"results_dir={tmp_path}/res", "updates=5", "++workers=2"], False)
    (nested,) = precheck([f"results_dir={tmp_path}/res", "updates=5", "++problem.max_train=2000"], False)
    assert (top.workers, nested.problem.max_train) == (2, 2000)
    _refused(["updates=5", "++problem.bogus=1"], "++problem.bogus=1: no such config key", False, tmp_path)


def test_allowed_values_pass(tmp_path):
    # the cap is the inv_sqrt schedule's; a constant step at or under alpha_max is used as given; + of a read key
    jobs = precheck(
        [
            f"results_dir={tmp_path}/res",
            "algorithm.lr_schedule=constant",
            "algorithm.lr=0.005",
            "+problem.init_std=0.01",
            "problem=logreg_fmnist",
            "algorithm.eps=0",
        ],
        False,
    )
    assert len(jobs) == 1 and isinstance(jobs[0], RunSettings)
    assert (jobs[0].problem.init_std, jobs[0].algorithm.lr, jobs[0].algorithm.eps) == (0.01, 0.005, 0.0)
    jobs = precheck(
        [
            f"results_dir={tmp_path}/res",
            "problem=lenet5_fmnist",
            "delay=timing",
            "workers=2",
            "delay.slow_workers=2",
            "divergence_factor=1.5",
        ],
        False,
    )
    assert len(jobs) == 1 and (jobs[0].delay.slow_workers, jobs[0].divergence_factor) == (2, 1.5)
    assert not (tmp_path / "res").exists()  # checked, nothing written


def test_precheck_returns_every_job_s_settings_in_launch_order(tmp_path):
    jobs = precheck([f"results_dir={tmp_path}", "algorithm=apam,sync_amsgrad", "workers=1,4"], True)
    assert [(s.algorithm.name, s.workers) for s in jobs] == [
        ("apam", 1),
        ("apam", 4),
        ("sync_amsgrad", 1),
        ("sync_amsgrad", 4),
    ]
    assert all(s.results_dir == str(tmp_path) for s in jobs)


def test_constant_step_is_not_capped():
    settings = settings_for(["algorithm.lr_schedule=constant", "algorithm.lr=0.005"])
    assert settings.algorithm.alpha_max == 0.01
    assert make_rule(settings).lr_at(1) == 0.005


def test_missing_data_of_a_later_job_is_found_before_any_runs(tmp_path):
    # job 1 (Fashion-MNIST) could run; job 2 needs CIFAR-10, absent: the sweep stops before job 1, nothing written
    from problems.data import data_root

    staged = data_root() / "FashionMNIST"
    if not staged.is_dir():
        pytest.skip(f"Fashion-MNIST not staged in {staged.parent} (make data)")
    env = dict(os.environ, APAM_DATA=str(tmp_path / "data"), APAM_NO_APT="1")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "FashionMNIST").symlink_to(staged)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "experiments.run",
            "-m",
            "problem=lenet5_fmnist,allcnn_cifar10",
            "updates=2",
            f"results_dir={tmp_path}/res",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: problem=allcnn_cifar10: ") and "CIFAR-10" in lines[0]
    assert not (tmp_path / "res").exists()  # no run, no empty .hydra/


def test_apam_data_naming_a_file_is_one_line(tmp_path):
    bad = tmp_path / "afile"
    bad.write_text("x")
    env = dict(os.environ, APAM_DATA=str(bad), APAM_NO_APT="1")
    proc = subprocess.run(
        [sys.executable, "-m", "experiments.run", "updates=2", f"results_dir={tmp_path}/res"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and str(bad) in lines[0], proc.stderr
    assert not (tmp_path / "res").exists()


def test_data_error_inside_a_run_is_one_line_and_leaves_nothing(tmp_path):
    # non-finite LIBSVM values are found when the file is parsed (in the run, not the precheck): one line naming
    # the file, exit 2, no empty <results_dir>/.hydra/ left behind
    bad = tmp_path / "bad.svm"
    bad.write_text("1 1:0.5 2:nan\n-1 1:0.25\n")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "experiments.run",
            "problem=logreg_libsvm",
            f"problem.path={bad}",
            "updates=2",
            f"results_dir={tmp_path}/res",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and str(bad) in lines[0] and "non-finite" in lines[0], proc.stderr
    assert not (tmp_path / "res").exists()


@pytest.mark.parametrize(
    "overrides",
    [
        ["problem=logreg_fmnist", "algorithm.beta1=0", "algorithm.beta2=0"],  # paper variant, eps 0
        ["problem=logreg_fmnist", "algorithm.variant=torch"],
        ["problem=lenet5_fmnist", "algorithm.beta1=0", "algorithm.beta2=0", "algorithm.eps=1e-30"],
        ["problem=lenet5_fmnist", "algorithm=sync_amsgrad", "workers=2"],
        ["problem=lenet5_fmnist", "algorithm=async_sgd"],
    ],
)
def test_accepted_optimizer_settings_give_a_finite_first_step(tmp_path, overrides):
    # whatever validation lets through moves finitely on the first step, also where a gradient coordinate is 0
    import torch

    rule = make_rule(settings_for([f"results_dir={tmp_path}"] + overrides))
    x = torch.zeros(6)
    g = torch.tensor([0.0, 1.0, -2.0, 0.0, 1e-30, 3.0])
    state = rule.init(x)
    x, state = rule.step(x, g, state)
    assert torch.isfinite(x).all() and x[0] == 0 and x[3] == 0


@pytest.mark.parametrize(
    "overrides,named",
    [
        (["updates=0", "updates=20"], "updates: given twice (updates=0 and updates=20)"),
        (["workers=2", "+workers=4"], "workers: given twice"),
        (["engine=simulated", "engine=shared_memory"], "engine: given twice"),
    ],
)
def test_a_key_given_twice_is_refused(tmp_path, overrides, named):
    """Hydra lets the last value win; the harness refuses a key given twice (both would name the run), in one line
    naming both values, before anything is written."""
    _refused(overrides, named, tmp_path=tmp_path)
    assert not (tmp_path / "res").exists()


@pytest.mark.parametrize(
    "overrides,named",
    [
        (["algorithm=glob(sync_*)"], "algorithm=glob(sync_*): this sweep cannot be listed here"),
        (["algorithm.lr=interval(0,1)"], "algorithm.lr=interval(0,1): this sweep cannot be listed here"),
        (["seed=range(3,0)"], "seed=range(3,0): an empty sweep"),
        (["hydra.searchpath=[file:///nonexistent/conf]"], "hydra.searchpath: /nonexistent/conf: no such config folder"),
        (
            ["updates=99999999999999999999999"],
            "updates=99999999999999999999999: must be an integer < 4611686018427387904",
        ),
    ],
)
def test_sweeps_that_cannot_be_listed_and_paths_that_are_not_there_are_refused(tmp_path, overrides, named):
    """Hydra's glob() and interval() (which its basic sweeper cannot enumerate here), an empty range, a search path
    to a folder that is not there (Hydra only warns), a count beyond the engines' 64-bit counters: one line each,
    before anything is written."""
    _refused(overrides, named, multirun=True, tmp_path=tmp_path)
    assert not (tmp_path / "res").exists()


def test_cfg_with_multirun_is_one_line(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "experiments.run", "-m", "updates=3", f"results_dir={tmp_path}", "--cfg", "job"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == "error: --cfg and --info show one job's config: drop -m (and give one value per key)"


@pytest.mark.parametrize(
    "overrides,said",
    [
        (["seed=${nowhere}"], "error: seed=${nowhere}: Interpolation key 'nowhere' not found"),
        (["~problem"], "error: ~problem: a key the config needs (key 'problem.batch_size' not found)"),
        (["~algorithm.lr"], "error: ~algorithm.lr: every key of a run is read; set it"),
    ],
)
def test_unresolved_and_deleted_keys_are_named_as_written(tmp_path, overrides, said):
    """An interpolation to nowhere or a deleted key the config needs: the message names the override as the user
    wrote it (no escapes, not the whole command line); a deleted step size is refused, not replaced by a default."""
    msg = "error: " + _refused(overrides, said.split(": ")[1].split("=")[0].lstrip("~"), tmp_path=tmp_path)
    assert msg.startswith(said), msg


def test_compositions_in_threads_side_by_side_leave_hydra_as_they_found_it():
    """make reproduce JOBS=2 plans two experiments in two threads; Hydra's global state is one per process, and two
    compositions clearing and restoring it under each other left it initialized after both ended (a later
    ``initialize_config_dir`` then failed: "GlobalHydra is already initialized") or failed one of them."""
    from concurrent.futures import ThreadPoolExecutor

    from hydra.core.global_hydra import GlobalHydra

    def compose_many(seed):
        return [len(compose_jobs([[f"seed={seed}", f"workers={w}"]])) for w in range(1, 9)]

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(compose_many, range(8)))
    assert results == [[1] * 8] * 8
    assert not GlobalHydra.instance().is_initialized()
