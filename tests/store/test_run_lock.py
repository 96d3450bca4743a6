"""One process at a time per run (experiments/store/run_lock.py): a second identical run started while the first
trains waits for it, then finds it finished and skips it; both used to train and write it, the last writer's files
silently replacing the first's."""

import subprocess
import sys
import time

import pandas as pd

from conftest import REPO, needs_fmnist
from experiments.store.run_lock import run_lock

RUN = [
    "problem=logreg_fmnist",
    "problem.max_train=2000",
    "engine=simulated_dedicated",
    "engine.costs.grad_s=0.001",
    "engine.costs.update_s=1e-5",
    "engine.costs.latency_s=1e-5",
    "engine.costs.overhead_s=1e-5",
    "eval_every=0.5",
    "updates=15000",
]


@needs_fmnist
def test_a_second_identical_run_waits_for_the_first_and_skips_it(tmp_path):
    cmd = [sys.executable, "-m", "experiments.run", *RUN, f"results_dir={tmp_path}"]
    first = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not list(tmp_path.glob("adhoc/runs/*/config.yaml")) and time.monotonic() < deadline:
            assert first.poll() is None, first.stderr.read()[-2000:]
            time.sleep(0.05)
        second = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    finally:
        first_err = first.communicate(timeout=300)[1]
    assert first.returncode == 0 and "[ok] " in first_err, first_err[-2000:]
    lines = second.stderr.splitlines()
    assert second.returncode == 0, second.stderr[-2000:]
    if "[wait]" in second.stderr:  # the usual case: the second started while the first trained
        assert [ln.split(" ", 1)[0] for ln in lines] == ["[wait]", "[skip]"], lines
    else:  # a machine so slow that the first had ended before the second started
        assert [ln.split(" ", 1)[0] for ln in lines] == ["[skip]"], lines
    assert len(pd.read_csv(tmp_path / "adhoc" / "summary.csv")) == 1


def test_the_lock_is_released_at_exit_and_a_run_that_wrote_nothing_leaves_no_folder(tmp_path):
    run_dir = tmp_path / "exp" / "runs" / "r1"
    with run_lock(run_dir, "exp/r1"):
        assert run_dir.is_dir()
    assert not (tmp_path / "exp").exists()  # created for the lock, left empty: removed up to what existed before
    with run_lock(run_dir, "exp/r1"):
        (run_dir / "config.yaml").write_text("a: 1\n")
    with run_lock(run_dir, "exp/r1"):  # taken again at once: released when the first left
        pass
    assert (run_dir / "config.yaml").is_file()
