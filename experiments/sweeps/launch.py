"""Starting an experiment's sweeps: each sweep a child ``python -m experiments.run -m ...``, and several experiments
side by side with simulated-clock sweeps overlapping and every wall-clock sweep alone.

Why side by side by experiment: a sweep's child costs seconds before its first job (imports, composing its jobs), and
Hydra's joblib launcher seconds more (each worker process imports torch again); on small sweeps -- the smoke profile's
two to twelve short jobs -- that fixed cost is most of the sweep. Two experiments' sweeps at once, each running its
jobs in its own process, keep the cores busy without it; an experiment alone (``--only ID``) still gets the joblib
launcher with every job slot. :class:`ClockGate` keeps measurements honest: a sweep that measures wall time waits until
no other sweep runs and holds back new ones until it ends.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from contextlib import contextmanager
from pathlib import Path

from experiments.results_folder import path_override

REPO = Path(__file__).resolve().parents[2]


STOP = signal.SIGTERM
"""The signal a stopped gate sends its sweeps. Not SIGINT: a job started in the background (``cmd &`` in a script,
``nohup``) starts with SIGINT ignored, and so does every process it starts until one installs its own handler, so a
sweep in its first seconds (the interpreter starting, its imports: seconds on a loaded machine) ignored the gate's
SIGINT and ran on to its end while the stopped ``reproduce`` waited for it. No shell ignores SIGTERM for background
jobs; the sweep takes it as Ctrl-C (experiments/stops.py), and before its handlers exist it simply ends."""


class ClockGate:
    """Who may run now: any number of simulated-clock sweeps together, a wall-clock sweep alone (a readers-writer
    lock, the writer first: a waiting wall-clock sweep holds back simulated sweeps that have not started).
    ``stop()`` makes every later :meth:`hold` raise :class:`Stopped` and sends SIGTERM to the children it knows."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._simulated = 0  # simulated sweeps running
        self._wall = False  # a wall-clock sweep running
        self._wall_waiting = 0
        self._children: set[subprocess.Popen] = set()
        self.stopped = False

    @contextmanager
    def hold(self, simulated: bool) -> Iterator[None]:
        """Wait until a sweep of this clock may run, then hold its place until the block ends.

        Raises:
            Stopped: :meth:`stop` was called (before or while waiting).
        """
        with self._cond:
            if simulated:
                self._cond.wait_for(lambda: self.stopped or not (self._wall or self._wall_waiting))
            else:
                self._wall_waiting += 1
                self._cond.wait_for(lambda: self.stopped or not (self._wall or self._simulated))
                self._wall_waiting -= 1
            if self.stopped:
                raise Stopped
            if simulated:
                self._simulated += 1
            else:
                self._wall = True
        try:
            yield
        finally:
            with self._cond:
                if simulated:
                    self._simulated -= 1
                else:
                    self._wall = False
                self._cond.notify_all()

    def run(self, cmd: list[str], **kwargs) -> int:
        """``subprocess.run(cmd, **kwargs).returncode``, the child known to :meth:`stop` while it runs."""
        with subprocess.Popen(cmd, **kwargs) as proc:
            with self._cond:
                self._children.add(proc)
                stopped = self.stopped
            if stopped:
                proc.send_signal(STOP)
            try:
                return proc.wait()
            finally:
                with self._cond:
                    self._children.discard(proc)

    def stop(self) -> None:
        """No sweep starts from now on; the running children get :data:`STOP` (each records its run in flight as
        interrupted and exits, as from Ctrl-C in a terminal)."""
        with self._cond:
            self.stopped = True
            children = list(self._children)
            self._cond.notify_all()
        for proc in children:
            try:
                proc.send_signal(STOP)
            except OSError:
                pass


class Stopped(Exception):
    """Raised by :meth:`ClockGate.hold` once the gate is stopped: the sweep is not started."""


GATE = ClockGate()
"""The gate of this process's sweeps (:func:`run_sweep` holds it)."""


def run_sweep(
    experiment: str,
    profile: str,
    results_dir: Path,
    force: bool,
    overrides: list[str] | None = None,
    jobs: int = 1,
    simulated: bool = False,
) -> dict:
    """Run one experiment's sweep in a child process once :data:`GATE` lets a sweep of its clock run (``simulated``:
    beside other simulated sweeps; otherwise alone); return ``{status, message, wall_s}``.

    ``overrides``: the sweep's command line (default: ``experiment=<id> profile=<p> results_dir='<dir>'``, the folder
    quoted: experiments/results_folder.py ``path_override``);
    ``jobs`` > 1 runs its jobs that many at a time with Hydra's joblib launcher (simulated-clock jobs only).
    ``status`` is ``ran``, ``skipped`` (bad input for this machine, e.g. missing data: the child's one-line error is
    the message), ``crashed``, or ``interrupted`` (the gate was stopped before the sweep started).
    """
    exp_dir = results_dir / experiment
    exp_dir.mkdir(parents=True, exist_ok=True)
    err_file = exp_dir / ".sweep_error"
    overrides = overrides or [
        f"experiment={experiment}",
        f"profile={profile}",
        path_override("results_dir", results_dir),
    ]
    launcher = ["hydra/launcher=parallel", f"hydra.launcher.n_jobs={jobs}"] if jobs > 1 else []
    cmd = [sys.executable, "-m", "experiments.run", "-m", *overrides, *launcher] + (["force=true"] if force else [])
    env = dict(os.environ, APAM_ERROR_FILE=str(err_file), PYTHONUNBUFFERED="1")
    try:
        with GATE.hold(simulated):
            err_file.unlink(missing_ok=True)
            t0 = time.perf_counter()
            code = GATE.run(cmd, cwd=REPO, env=env)
            wall = time.perf_counter() - t0
    except Stopped:
        return {"status": "interrupted", "message": "not started: the call was interrupted", "wall_s": 0.0}
    if code == 2 and err_file.exists():
        # paths inside the checkout are written relative to it, so the committed status and report do not depend
        # on where the repository was cloned
        msg = err_file.read_text().strip().replace(f"{REPO}{os.sep}", "")
        err_file.unlink()
        return {"status": "skipped", "message": msg, "wall_s": wall}
    if code != 0:
        return {"status": "crashed", "message": f"exit code {code}: {' '.join(cmd)}", "wall_s": wall}
    return {"status": "ran", "message": "", "wall_s": wall}


def reference_sweep(experiment: str, profile: str) -> dict:
    """The ``reference_sweep.<profile>`` block of conf/experiment/<experiment>.yaml ({} without one): the keys of the
    sweep that experiments/reproduce.py ``plan_sweeps`` runs first."""
    from omegaconf import OmegaConf

    path = REPO / "conf" / "experiment" / f"{experiment}.yaml"
    if not path.exists():
        return {}
    block = OmegaConf.load(path).get("reference_sweep") or {}
    return dict(OmegaConf.to_container(block.get(profile) or OmegaConf.create({})))


def side_by_side(experiments: list[str], run: Callable[[str, int], dict], jobs: int) -> Iterator[tuple[str, dict]]:
    """Run ``run(experiment, sweep_jobs)`` for every experiment, up to ``jobs`` experiments at a time (in order of
    the list), and yield ``(experiment, its result)`` as each ends. ``sweep_jobs``, the jobs each of its simulated
    sweeps may run at a time, is ``jobs`` shared among the experiments that run together: with as many experiments
    as jobs, one (no joblib workers to start); with one experiment, all. ``run`` holds :data:`GATE` around each
    sweep, so wall-clock sweeps still run alone. On KeyboardInterrupt (or any exception here) the gate is stopped:
    no further sweep starts, the running children are interrupted and awaited, and the exception propagates."""
    at_once = max(1, min(jobs, len(experiments)))
    per_sweep = max(1, jobs // at_once)
    GATE.stopped = False
    pool = ThreadPoolExecutor(max_workers=at_once, thread_name_prefix="experiment")
    try:
        futures = {pool.submit(run, exp, per_sweep): exp for exp in experiments}
        pending = set(futures)
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in sorted(done, key=lambda f: experiments.index(futures[f])):
                yield futures[future], future.result()
    except BaseException:
        GATE.stop()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
