"""Start-up and shutdown faults of the real engines: a worker killed while it starts
(before or while the master writes its start-up data) fails the run at once with a one-line message, leaves no
process behind and no temporary folder; a worker lost mid-run is reaped at once (no zombie while the master goes
on); and the distributed engine runs across two torchrun "nodes" (c10d rendezvous on 127.0.0.1).

These tests use the spawn start method (pinned: forkserver is the default), where the master writes each worker's
start-up data into a pipe (where a blocking write would hang on a dead worker), and where workers are the master's own
children."""

from __future__ import annotations

import glob
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
import pandas as pd
import pytest

from algorithms import build_rule
from conftest import ASYNC_SGD, REPO, QuadraticProblem, child_pids, pinned, recorder_for, run_engine, settings_for
from experiments.engines import distributed, shared_memory
from experiments.engines.startup import load_problem, split_problem
from experiments.errors import WorkerLost
from experiments.training.recorder import Recorder
from problems.data import data_root

ENGINES = {"shared_memory": shared_memory, "distributed": distributed}
HAS_FMNIST = (data_root() / "FashionMNIST" / "raw").is_dir()  # APAM_DATA, else <repo>/data


class BulkyQuadratic(QuadraticProblem):
    """QuadraticProblem carrying 1 MB of numpy data (copied to each worker at start, as the real problems' label
    arrays are): far more than a pipe holds (64 KiB), so a master that writes it into a dead worker's pipe blocks."""

    def __init__(self) -> None:
        super().__init__()
        self.blob = np.arange(2**17, dtype=np.float64)


def _settings(tmp_path, engine: str, overrides: list[str]):
    method = [] if any("engine.start_method=" in o for o in overrides) else ["engine.start_method=spawn"]
    return settings_for(
        pinned(
            [
                f"results_dir={tmp_path}",
                f"engine={engine}",
                "engine.timeout_s=30",
                *ASYNC_SGD,
                "eval_every=0.5",
                *method,
                *overrides,
            ]
        )
    )


def _run(tmp_path, engine: str, overrides: list[str], problem=None, recorder_cls=Recorder):
    """Run ``engine`` on ``problem`` (a QuadraticProblem by default) in this process; (EngineResult, recorder)."""
    problem = problem or QuadraticProblem()
    settings = _settings(tmp_path, engine, overrides)
    rec = recorder_for(problem, settings, "wall", recorder_cls)
    result = run_engine(problem, build_rule("sgd", lr=settings.algorithm.lr), settings, rec)
    return result, rec


def _proc_stat(pid: int) -> tuple[int, str, str] | None:
    """(parent pid, state letter, command line) of process ``pid``, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            rest = f.read().rsplit(")", 1)[1].split()
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return None
    return int(rest[1]), rest[0], cmd


def _children(parent: int) -> dict[int, tuple[str, str]]:
    """Every child of ``parent`` (zombies included, until reaped): pid -> (state letter, command line)."""
    out = {}
    for pid in child_pids(parent):
        st = _proc_stat(pid)
        if st is not None and st[0] == parent:
            out[pid] = st[1:]
    return out


class SpawnKiller(threading.Thread):
    """SIGKILLs the ``nth`` spawned worker (a child running multiprocessing's ``spawn_main``) of process ``parent``
    (default: this one) as soon as it appears: before it has read its start-up data, while the master writes it.

    Workers are told apart by pid (forked in worker order), counting children that are forked but not yet exec'd
    (their command line is still the parent's): under load worker 1 may exec before worker 0 does, and a scan that
    saw only worker 1's ``spawn_main`` would otherwise take it for worker 0."""

    def __init__(self, nth: int = 0, parent: int | None = None) -> None:
        super().__init__(daemon=True)
        self.nth, self.parent, self.killed, self.stop = nth, parent or os.getpid(), None, threading.Event()

    def run(self) -> None:
        st = _proc_stat(self.parent)
        forked_only = st[2] if st else None  # a child between fork and exec shows its parent's command line
        workers: set[int] = set()
        while not self.stop.is_set():
            pending = set()
            for pid, (_, cmd) in _children(self.parent).items():
                if "spawn_main" in cmd:
                    workers.add(pid)
                elif cmd == forked_only:
                    pending.add(pid)
            order = sorted(workers | pending)
            if len(order) > self.nth and order[self.nth] in workers:
                os.kill(order[self.nth], signal.SIGKILL)
                self.killed = order[self.nth]
                return
            time.sleep(0.001)


def _store_folders(tmp: str | None = None) -> list[str]:
    """The distributed engine's temporary store folders in ``tmp`` (default: tempfile's folder)."""
    return glob.glob(os.path.join(tmp or tempfile.gettempdir(), "apam-dist-*"))


def _assert_no_children_left() -> None:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        workers = {p: s for p, s in _children(os.getpid()).items() if "spawn_main" in s[1]}
        if not workers:
            return
        time.sleep(0.05)
    raise AssertionError(f"worker processes left behind: {workers}")


# ---------------------------------------------------------------------- a worker killed at start
@pytest.mark.timeout(90)
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("nth", [0, 1])
def test_a_worker_killed_while_starting_fails_the_run_at_once(tmp_path, engine, nth, monkeypatch):
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))  # where a temporary folder would go
    killer = SpawnKiller(nth)
    killer.start()
    t0 = time.monotonic()
    try:
        with pytest.raises(WorkerLost) as info:
            _run(tmp_path, engine, ["workers=2", "updates=50"], BulkyQuadratic())
    finally:
        killer.stop.set()
        killer.join()
    assert killer.killed is not None
    assert time.monotonic() - t0 < 60  # seen at once, not after the start-up timeout (300 s)
    msg = str(info.value)
    assert "\n" not in msg
    assert msg == f"worker {nth} died while starting (killed by SIGKILL)", msg
    _assert_no_children_left()
    assert _store_folders() == []


@pytest.mark.timeout(90)
@pytest.mark.parametrize("engine", ENGINES)
def test_spawn_start_up_data_fits_in_a_pipe(tmp_path, engine, monkeypatch):
    """What multiprocessing's spawn writes into the pipe the master holds open (the new process's pickled
    arguments) stays far below a pipe's 64 KiB, so that write can never block, even for a problem with 1 MB of
    numpy data; the problem's bulk goes through the worker's own pipe (deliver)."""
    import multiprocessing.reduction as mp_reduction

    sizes = []
    dump = mp_reduction.dump

    def measured(obj, file, protocol=None):
        start = file.tell()
        dump(obj, file, protocol)
        sizes.append(file.tell() - start)

    monkeypatch.setattr(mp_reduction, "dump", measured)
    result, _ = _run(tmp_path, engine, ["workers=1", "updates=5"], BulkyQuadratic())
    assert result.status == "ok" and result.updates == 5
    assert len(sizes) == 2  # spawn's preparation data and the Process object, for the one worker
    assert 0 < sum(sizes) < 16 * 1024, sizes


def test_the_problem_travels_without_its_tensors():
    """split_problem leaves the tensors out of the bytes (they go through shared memory); load_problem puts the
    very same tensors back."""
    p = BulkyQuadratic()
    tensors, payload = split_problem(p)
    assert len(tensors) == 1 and tensors[0] is p.a
    assert len(payload) < p.a.numel() * 4 + p.blob.nbytes + 4096 and len(payload) > p.blob.nbytes
    q = load_problem(tensors, payload)
    assert q.a is p.a and np.array_equal(q.blob, p.blob) and q.dim == p.dim


# ---------------------------------------------------------------------- leftovers
class ZombieWatch(Recorder):
    """A Recorder that, at every evaluation point (a snapshot, evaluated later; ``record`` takes one too), notes the
    master's version and this process's zombie children (the master goes on meanwhile); once ``after_loss``
    evaluation points have passed since the master handled the loss (``lost_at``, set by :func:`_watch_losses`), it
    ends the run: the master hands out no more work. The run's length follows the loss, whenever the loss comes."""

    zombies: list = []  # (version, zombie pids) per evaluation point
    loop = None  # the driver's MasterLoop, once it has lost a worker
    lost_at: int | None = None
    after_loss = 3

    def snapshot(self, x, samples, version, *args, **kwargs):
        ZombieWatch.zombies.append(
            (version, sorted(p for p, (state, _) in _children(os.getpid()).items() if state == "Z"))
        )
        out = super().snapshot(x, samples, version, *args, **kwargs)
        after = [v for v, _ in ZombieWatch.zombies if ZombieWatch.lost_at is not None and v > ZombieWatch.lost_at]
        if len(after) >= ZombieWatch.after_loss:
            ZombieWatch.loop.max_updates = min(ZombieWatch.loop.max_updates, version)
        return out


def _watch_losses(monkeypatch) -> None:
    """Note the driver and its version when it handles a lost worker (ZombieWatch ends the run from there)."""
    from experiments.engines import driver

    real = driver.MasterLoop._lose

    def lose(self, ev):
        real(self, ev)
        ZombieWatch.loop, ZombieWatch.lost_at = self, self.master.version

    monkeypatch.setattr(driver.MasterLoop, "_lose", lose)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("engine", ENGINES)
def test_a_lost_worker_is_reaped_while_the_master_goes_on(tmp_path, engine, monkeypatch):
    """Worker 1 dies when handed update 40's iterate; when the master notices depends on when worker 1 gets a core
    (on a loaded machine, well after update 40). The run goes on until three evaluation points after the master
    handled the loss (ZombieWatch ends it then), and none of them sees a zombie child."""
    ZombieWatch.zombies, ZombieWatch.loop, ZombieWatch.lost_at = [], None, None
    _watch_losses(monkeypatch)
    result, rec = _run(
        tmp_path,
        engine,
        [
            "++engine.start_method=forkserver",
            "workers=2",
            "updates=1000000",
            "eval_every=0.5",
            "engine.fault.kill_worker=1",
            "engine.fault.at_update=40",
            "engine.on_worker_loss=continue",
        ],
        recorder_cls=ZombieWatch,
    )
    assert result.status == "ok" and "worker 1 lost" in result.message and "killed by SIGKILL" in result.message
    lost_at = int(result.message.split("lost, noticed at update ")[1].split()[0])
    assert lost_at == ZombieWatch.lost_at >= 40 and result.updates < 1000000  # ended by ZombieWatch
    assert [v for v, _ in ZombieWatch.zombies] == [row["updates"] for row in rec.rows[: len(ZombieWatch.zombies)]]
    after = [z for v, z in ZombieWatch.zombies if v > lost_at]
    assert len(after) >= 3  # evaluations after the loss, while the master trained on
    assert after == [[]] * len(after), after


@pytest.mark.timeout(120)
@pytest.mark.parametrize("stopped", ["master", "master and workers"])
def test_a_master_stopped_past_the_timeout_reads_the_waiting_gradients_and_loses_no_worker(
    tmp_path, monkeypatch, stopped
):
    """The master (this process; with its workers, as Ctrl-Z stops them) is stopped (SIGSTOP) inside a wait for
    1.5 s, past engine.timeout_s=1 s, then continued: its wait ran out meanwhile. The workers' gradients waiting to be
    read were taken for silence ("WorkerLost: worker 1 lost ... sent no gradient within engine.timeout_s"); workers
    stopped too, and continued a little later, get a timeout from the master's continue."""
    transport_cls = shared_memory.SharedMemoryTransport
    real_wait, calls, stopper = transport_cls.wait, [0], []

    def wait(self, timeout):
        calls[0] += 1
        if calls[0] == 5:  # both workers computing (0.4 s each): the stop comes while this wait blocks
            workers = " ".join(str(p.pid) for p in self.procs) if stopped != "master" else ""
            cmd = f"sleep 0.1; kill -STOP {os.getpid()} {workers}; sleep 1.5; kill -CONT {os.getpid()}"
            if workers:  # continued after the master: it finds nothing waiting, and no worker is silent yet
                cmd += f"; sleep 0.3; kill -CONT {workers}"
            stopper.append(subprocess.Popen(["sh", "-c", cmd]))
        return real_wait(self, timeout)

    monkeypatch.setattr(transport_cls, "wait", wait)
    result, _ = _run(
        tmp_path,
        "shared_memory",
        [
            "workers=2",
            "updates=16",
            "engine.timeout_s=1",
            "engine.compute=emulated",
            "engine.compute_base_s=0.4",
            "engine.handoff=block",
        ],
    )
    assert stopper and stopper[0].wait(10) == 0
    assert (result.status, result.message, result.updates) == ("ok", "", 16)


class StopAfterLoss(ZombieWatch):
    """A Recorder that raises KeyboardInterrupt (Ctrl-C, or a stop signal as the runner turns it) at the first
    evaluation point after the master handled a lost worker."""

    def snapshot(self, x, samples, version, *args, **kwargs):
        if ZombieWatch.lost_at is not None and version > ZombieWatch.lost_at:
            raise KeyboardInterrupt
        return super().snapshot(x, samples, version, *args, **kwargs)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("engine", ENGINES)
def test_an_interrupt_after_a_lost_worker_keeps_the_loss(tmp_path, engine, monkeypatch):
    """Worker 1 is lost, the master goes on, then the run is interrupted: the interrupt carries the loss as a note
    (the runner's summary message read "interrupted (SIGTERM)" alone, and the loss was nowhere)."""
    ZombieWatch.zombies, ZombieWatch.loop, ZombieWatch.lost_at = [], None, None
    _watch_losses(monkeypatch)
    with pytest.raises(KeyboardInterrupt) as caught:
        _run(
            tmp_path,
            engine,
            [
                "workers=2",
                "updates=1000000",
                "engine.fault.kill_worker=1",
                "engine.fault.at_update=40",
                "engine.on_worker_loss=continue",
            ],
            recorder_cls=StopAfterLoss,
        )
    notes = getattr(caught.value, "__notes__", [])
    assert notes == [f"worker 1 lost, noticed at update {ZombieWatch.lost_at} (killed by SIGKILL)"], notes
    _assert_no_children_left()


class Announcing(Recorder):
    """A Recorder that prints ``evaluated`` at every evaluation point (a snapshot; ``record`` takes one too): a
    parent process learns the run is under way."""

    def snapshot(self, *args, **kwargs):
        print("evaluated", flush=True)
        return super().snapshot(*args, **kwargs)


@pytest.mark.slow  # a fresh interpreter, then spawn
@pytest.mark.timeout(120)
def test_distributed_leaves_no_store_folder_when_its_master_is_killed(tmp_path):
    """SIGKILL of the master runs no clean-up: the rendezvous store must be nothing that needs one. Its workers see
    the master gone and leave at once."""
    code = (
        "import sys, pathlib; sys.path[:0] = [sys.argv[1], sys.argv[2], sys.argv[4]];"
        "from test_engine_faults import _run, Announcing;"
        "_run(pathlib.Path(sys.argv[3]), 'distributed', ['workers=2', 'updates=100000000', 'eval_every=20'],"
        "     recorder_cls=Announcing)"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(REPO), str(REPO / "tests"), str(tmp_path), str(REPO / "tests" / "engines")],
        cwd=REPO,
        env={**os.environ, "TMPDIR": str(tmp_path)},
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    workers: set[int] = set()
    try:
        assert proc.stdout.readline() == b"evaluated\n", proc.stderr.read().decode()[-2000:]  # at update 0
        assert proc.stdout.readline() == b"evaluated\n"  # 20 epochs later: the workers compute
        workers = {p for p, (_, cmd) in _children(proc.pid).items() if "spawn_main" in cmd}
        assert len(workers) == 2
        proc.kill()
        proc.wait(10)
        deadline = time.monotonic() + 10
        while any(_proc_stat(p) for p in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(_proc_stat(p) for p in workers), "workers outlived their master"
    finally:
        for p in workers:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
    assert _store_folders(str(tmp_path)) == []


# ---------------------------------------------------------------------- two torchrun "nodes"
def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def _readme_multinode_command() -> list[str]:
    """The documented multi-node torchrun command (docs/engines.md, its bash block with ``--nnodes``), as argv."""
    text = (REPO / "docs" / "engines.md").read_text()
    block = next(b for b in text.split("```bash")[1:] if "--nnodes" in b.split("```")[0]).split("```")[0]
    return shlex.split(block.replace("\\\n", " "))


def test_the_readme_multinode_command_is_the_tested_one():
    argv = _readme_multinode_command()
    assert argv[0] == ".venv/bin/torchrun" and "--nnodes=2" in argv and "--node-rank=R" in argv
    assert "--rdzv-backend=c10d" in argv and "--rdzv-endpoint=HOST:29400" in argv
    assert argv[argv.index("-m") + 1 : argv.index("-m") + 3] == ["experiments.run", "engine=distributed"]


@pytest.mark.slow  # 6 interpreters, 4 of them load Fashion-MNIST
@pytest.mark.timeout(150)
@pytest.mark.skipif(not HAS_FMNIST, reason="Fashion-MNIST not staged (make data)")
def test_distributed_across_two_torchrun_nodes(tmp_path):
    """The documented multi-node command (docs/engines.md), run as two "nodes" on this machine (R = 0 and 1,
    HOST = 127.0.0.1 on a free port; c10d rendezvous, two ranks per node): the job runs to its end, rank 0 writes
    the one summary row, no process survives."""
    port = _free_port()
    env = {**os.environ, "TMPDIR": str(tmp_path)}  # torchrun's own torchelastic_* log folders land here
    procs = []
    try:
        for node in (0, 1):
            fill = {
                "--node-rank=R": f"--node-rank={node}",
                "--rdzv-endpoint=HOST:29400": f"--rdzv-endpoint=127.0.0.1:{port}",
            }
            cmd = [fill.get(a, a) for a in _readme_multinode_command()] + [f"results_dir={tmp_path}/results"]
            log = open(tmp_path / f"node{node}.log", "wb")
            procs.append(
                subprocess.Popen(cmd, cwd=REPO, env=env, start_new_session=True, stdout=log, stderr=subprocess.STDOUT)
            )
            log.close()
        deadline = time.monotonic() + 120
        for p in procs:
            p.wait(max(1.0, deadline - time.monotonic()))
    finally:
        for p in procs:
            _kill_group(p)  # after a normal end, nothing is left to kill
    logs = "\n".join((tmp_path / f"node{n}.log").read_text(errors="replace")[-1500:] for n in (0, 1))
    assert [p.returncode for p in procs] == [0, 0], logs
    summary = pd.read_csv(tmp_path / "results" / "adhoc" / "summary.csv")
    assert len(summary) == 1, logs
    row = summary.iloc[0]
    assert (row["status"], row["engine"], row["workers"]) == ("ok", "distributed", 3)
    assert (row["updates"], row["gradients"]) == (60, 60)
    assert row["staleness_max"] >= 1  # three workers computed at once


# ---------------------------------------------------------------------- a worker killed at start, from the command line
@pytest.mark.slow  # about 20 s: a fresh interpreter loads Fashion-MNIST, then spawns
@pytest.mark.timeout(120)
@pytest.mark.skipif(not HAS_FMNIST, reason="Fashion-MNIST not staged (make data)")
@pytest.mark.parametrize("engine", ENGINES)
def test_the_runner_records_a_worker_killed_while_starting(tmp_path, engine):
    cmd = [
        sys.executable,
        "-m",
        "experiments.run",
        "problem=logreg_fmnist",
        "algorithm=apam",
        f"engine={engine}",
        "engine.start_method=spawn",
        "workers=2",
        "updates=50",
        f"results_dir={tmp_path}",
    ]
    proc = subprocess.Popen(
        cmd,
        cwd=REPO,
        env={**os.environ, "TMPDIR": str(tmp_path)},
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    killer = SpawnKiller(0, parent=proc.pid)
    killer.start()
    try:
        _, err = proc.communicate(timeout=100)
    finally:
        killer.stop.set()
        killer.join()
        _kill_group(proc)
    assert killer.killed is not None
    assert proc.returncode == 1, err.decode()[-2000:]
    row = pd.read_csv(tmp_path / "adhoc" / "summary.csv").iloc[0]
    assert row["status"] == "failed"
    assert row["message"] == "WorkerLost: worker 0 died while starting (killed by SIGKILL)"
    assert "[failed] adhoc/" in err.decode()
    assert _store_folders(str(tmp_path)) == []


# ---------------------------------------------------------------------- nothing outlives the runner
SUBREAPER = r"""
import ctypes, json, os, signal, subprocess, sys
libc = ctypes.CDLL(None, use_errno=True)
if libc.prctl(36, 1, 0, 0, 0) != 0:  # PR_SET_CHILD_SUBREAPER: what the runner leaves behind becomes our child
    sys.exit(f"prctl: errno {ctypes.get_errno()}")
proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
err = proc.communicate()[1].decode(errors="replace")
left = {}  # taken the moment the runner has been reaped: every process it left is reparented to us by then
for tid in os.listdir("/proc/self/task"):
    with open(f"/proc/self/task/{tid}/children") as f:
        for pid in map(int, f.read().split()):
            with open(f"/proc/{pid}/stat") as s:
                state = s.read().rsplit(")", 1)[1].split()[0]
            with open(f"/proc/{pid}/cmdline", "rb") as c:
                left[pid] = [state, c.read().replace(b"\0", b" ").decode(errors="replace")[:160]]
print(json.dumps({"rc": proc.returncode, "left": left, "err": err[-3000:]}))
for pid in left:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    os.waitpid(pid, 0)
"""


@pytest.mark.timeout(240)
@pytest.mark.parametrize("engine,method", [("shared_memory", "forkserver"), ("distributed", "spawn")])
def test_no_process_outlives_the_runner_after_a_lost_worker(tmp_path, engine, method):
    """Run the runner under a subreaper: any process it leaves behind (running or defunct: the forkserver, the
    resource tracker, a worker) is reparented to the subreaper when the runner exits, and listed at that moment.
    forkserver starts both helpers, spawn the resource tracker alone."""
    import json

    data = tmp_path / "d.svm"
    data.write_text("".join(f"{1 if i % 2 else -1} 1:{(i % 7) / 7:.3f} 2:{(i % 3) / 3:.3f}\n" for i in range(64)))
    cmd = [
        sys.executable,
        "-m",
        "experiments.run",
        "problem=logreg_libsvm",
        f"problem.path={data}",
        f"engine={engine}",
        f"engine.start_method={method}",
        "workers=2",
        "updates=120",
        "batch_size=8",
        "engine.fault.kill_worker=1",
        "engine.fault.at_update=20",
        "engine.on_worker_loss=continue",
        f"results_dir={tmp_path / 'res'}",
    ]
    out = subprocess.run(
        [sys.executable, "-c", SUBREAPER, *cmd], cwd=REPO, capture_output=True, text=True, timeout=220, check=False
    )
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["rc"] == 0, report["err"]
    assert "worker 1 lost" in report["err"]
    assert report["left"] == {}, report["left"]


JOIN_ALONE = """
import signal, sys, tempfile
from experiments.engines.dist_group import init_group

def stop(signum, frame):
    raise KeyboardInterrupt

signal.signal(signal.SIGTERM, stop)
print("joining", flush=True)
try:  # rank 0 of 2, and rank 1 never comes: torch's rendezvous waits out its start-up timeout (300 s)
    init_group("gloo", 60.0, init_method="file://" + tempfile.mktemp(), rank=0, world_size=2)
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(130)
print("joined", flush=True)
"""


@pytest.mark.timeout(120)
def test_a_stop_signal_ends_a_wait_for_the_process_group_at_once():
    """experiments/engines/dist_group.py ``init_group``: a master waiting for a rank that never joins takes SIGTERM
    (as Ctrl-C) while it waits, rather than after the 300 s start-up timeout (torch's rendezvous does not return to
    Python until then)."""
    p = subprocess.Popen([sys.executable, "-c", JOIN_ALONE], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "joining"
        time.sleep(1.0)  # inside the rendezvous
        p.send_signal(signal.SIGTERM)
        out, _ = p.communicate(timeout=60)  # without the helper thread: 300 s
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 130 and out.strip() == "interrupted"
