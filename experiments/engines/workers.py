"""Worker-process plumbing shared by the real engines (shared_memory, distributed): what a worker needs to know,
its minibatch stream, fault injection, signals, and ending child processes without leaving any behind.
"""
from __future__ import annotations

import io
import os
import pickle
import select
import signal
import struct
import sys
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing import reduction
from multiprocessing.connection import wait as mp_wait

import torch

from experiments.errors import WorkerLost

STREAM_SEED_STRIDE = 1_000_003
"""Worker w draws its minibatches from ``BatchStream(N, b_w, seed + STREAM_SEED_STRIDE * w)``: worker 0 uses the
run's own seed, so a run with P = 1 draws exactly the batches of the serial loop (and of the simulated engine)."""


def worker_seed(seed: int, worker: int) -> int:
    """The seed of worker ``worker``'s own minibatch stream (see :data:`STREAM_SEED_STRIDE`)."""
    return int(seed) + STREAM_SEED_STRIDE * int(worker)


@dataclass(frozen=True)
class FaultPlan:
    """Fault injection for tests (``engine.fault``): worker ``kill_worker`` fails when it is handed an iterate of
    version >= ``at_update``. ``mode``: ``kill`` (the process dies by SIGKILL) or ``hang`` (it stops answering)."""

    kill_worker: int | None = None
    at_update: int | None = None
    mode: str = "kill"

    @classmethod
    def of(cls, fault) -> FaultPlan:
        """From a real engine's ``engine.fault`` settings block (``mode``, ``kill_worker``, ``at_update``)."""
        return cls(fault.kill_worker, int(fault.at_update or 0), fault.mode)

    def maybe_fail(self, worker: int, version: int) -> None:
        """Called by worker ``worker`` on receiving an iterate of ``version``; fails as planned, else returns."""
        if self.kill_worker is None or worker != self.kill_worker or version < (self.at_update or 0):
            return
        if self.mode == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        while True:  # hang: alive but silent
            time.sleep(3600)


def worker_cpus(workers: int, threads: int, enabled: bool = True) -> list[tuple[int, ...] | None]:
    """The CPUs each local worker process is pinned to: worker w gets the w-th block of ``threads`` CPUs of this
    process's allowed set, when every worker fits on its own (P x threads <= allowed CPUs); else no pinning
    (None). The master is not pinned: it runs wherever a worker waits.

    Why: unpinned, the kernel now and then moves a worker onto the other worker's core when the master wakes it,
    and the two share a core for a while; on our 2-core machine APAM (LeNet5, P = 2) reached 1.69x and 1.50x over
    P = 1 unpinned against 1.87x and 1.78x pinned (two comparisons, medians of 4 runs each). On a machine shared
    with other jobs pinning can hurt instead (a pinned worker cannot leave a busy core): ``engine.pin_workers=false``.
    Where CPU affinity is not available (not Linux) nothing is pinned."""
    if not enabled or not hasattr(os, "sched_getaffinity"):
        return [None] * workers
    allowed = sorted(os.sched_getaffinity(0))
    t = max(1, int(threads))
    if workers * t > len(allowed):
        return [None] * workers
    return [tuple(allowed[w * t:(w + 1) * t]) for w in range(workers)]


def cpu_times(cpus=None) -> tuple[int, int] | None:
    """(idle + iowait, total) jiffies since boot of all CPUs (the ``cpu`` line of /proc/stat) or, given ``cpus``
    (CPU numbers), summed over their ``cpuN`` lines; None where there is no /proc/stat (not Linux)."""
    names = None if cpus is None else {f"cpu{c}" for c in cpus}
    idle = total = 0
    try:
        with open("/proc/stat") as f:
            for line in f:
                if not line.startswith("cpu"):
                    break
                name, *vals = line.split()
                if (name == "cpu") if names is None else (name in names):
                    vals = [int(v) for v in vals]
                    idle, total = idle + vals[3] + vals[4], total + sum(vals)
    except (OSError, ValueError, IndexError):
        return None
    return idle, total


def busy_cpus(cpus=None, window_s: float = 0.1) -> float | None:
    """How many CPUs' worth of work ``cpus`` (CPU numbers; None: the whole machine) did over the next ``window_s``
    seconds, this process sleeping meanwhile: (1 - their idle fraction) x their number. None where /proc/stat is
    missing. Unlike the 1-minute load average it forgets a finished run at once (our own previous run's spinning
    workers kept the load average above 1 for a minute after they ended, so the next P = 1 run of a sweep blocked),
    and it counts only the CPUs asked about, not the whole host."""
    n = len(cpus) if cpus is not None else (os.cpu_count() or 1)
    a = cpu_times(cpus)
    if a is None or n == 0:
        return None
    time.sleep(window_s)
    b = cpu_times(cpus)
    total = b[1] - a[1]
    if total <= 0:
        return 0.0
    return (1.0 - (b[0] - a[0]) / total) * n


@dataclass(frozen=True)
class WorkerSpec:
    """What one worker process needs besides the problem: its id, minibatch size, stream seed, math threads, the
    CPUs it is pinned to (None: not pinned) and the fault plan. Picklable (sent at spawn)."""

    worker: int
    batch: int
    seed: int
    threads: int
    fault: FaultPlan
    cpus: tuple[int, ...] | None = None
    emulation: object = None  # experiments.engines.emulation.EmulationSpec (None: real compute, only timed)

    @classmethod
    def of(cls, settings, worker: int, pin: bool = False) -> WorkerSpec:
        """Worker ``worker``'s spec from the run's :class:`~experiments.settings.schema.RunSettings`; ``pin``: pin
        it as :func:`worker_cpus` says when ``engine.pin_workers`` is set, for workers this process starts itself."""
        e = settings.engine
        threads = int(e.threads_per_worker)
        cpus = worker_cpus(settings.workers, threads, pin and e.pin_workers)[worker]
        return cls(worker, settings.worker_batches[worker], worker_seed(settings.seed, worker), threads,
                   FaultPlan.of(e.fault), cpus)


def process_context(method: str, problem=None):
    """The torch.multiprocessing context for ``engine.start_method`` (``spawn`` or ``forkserver``). For forkserver,
    the server (started once per master process) preloads torch, the engines and the problem's module, so that
    each worker forks from it in milliseconds.

    Raises:
        ValueError: another start method (``fork`` is refused: a forked copy of a process that already ran torch
        threads or CUDA can deadlock).
    """
    import torch.multiprocessing as tmp

    if method not in ("spawn", "forkserver"):
        raise ValueError(f"engine.start_method={method}: must be spawn or forkserver")
    ctx = tmp.get_context(method)
    if method == "forkserver":
        mods = ["torch", "experiments.engines.shared_memory", "experiments.engines.distributed"]
        if problem is not None:
            mods.append(type(problem).__module__)
        ctx.set_forkserver_preload(mods)
    if not _REAP_AT_EXIT:
        import atexit

        atexit.register(stop_helper_processes)
        _REAP_AT_EXIT.append(True)
    return ctx


_REAP_AT_EXIT: list = []  # non-empty once stop_helper_processes is registered to run at exit
HELPER_EXIT_TIMEOUT_S = 10.0  # the longest an exiting master waits for the forkserver and the resource tracker


def _wait_exit(pid: int, timeout_s: float) -> bool:
    """Reap child ``pid`` within ``timeout_s`` seconds (woken by its pidfd where Linux has one); True when reaped."""
    deadline = time.monotonic() + timeout_s
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        fd = None
    try:
        while True:
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                return True  # reaped elsewhere, or not ours
            if done:
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if fd is not None:
                select.select([fd], [], [], left)
            else:
                time.sleep(min(0.01, left))
    finally:
        if fd is not None:
            os.close(fd)


def stop_helper_processes(timeout_s: float = HELPER_EXIT_TIMEOUT_S) -> list[int]:
    """Stop and reap the helper processes multiprocessing started for the workers: the forkserver (``forkserver``
    start method) and the resource tracker (started by every spawn or forkserver start). Run at exit (registered by
    :func:`process_context`): left to themselves, both notice only after the master has gone that its pipe closed,
    exit on their own and stay behind as defunct processes until the system's init reaps them. Closing their
    "alive" pipes ends them now (the forkserver first: it holds the tracker's pipe too); each is waited for up to
    ``timeout_s`` seconds. Nothing is done while a worker process still runs (it holds the pipes; multiprocessing's
    own exit handler ends it). Uses multiprocessing's private singletons (``forkserver._forkserver``,
    ``resource_tracker._resource_tracker``, as its ``_stop`` methods do, but never waiting without a bound).
    Returns the process ids reaped."""
    import multiprocessing
    from multiprocessing import forkserver, resource_tracker, util

    if multiprocessing.active_children():
        return []
    reaped = []
    fs = getattr(forkserver, "_forkserver", None)
    pid, fd = getattr(fs, "_forkserver_pid", None), getattr(fs, "_forkserver_alive_fd", None)
    if pid is not None and fd is not None:
        address = fs._forkserver_address
        os.close(fd)
        fs._forkserver_alive_fd, fs._forkserver_pid, fs._forkserver_address = None, None, None
        if _wait_exit(pid, timeout_s):
            reaped.append(pid)
        try:
            if address and not util.is_abstract_socket_namespace(address):
                os.unlink(address)
        except OSError:
            pass
    rt = getattr(resource_tracker, "_resource_tracker", None)
    pid, fd = getattr(rt, "_pid", None), getattr(rt, "_fd", None)
    if pid is not None and fd is not None:
        os.close(fd)
        rt._fd, rt._pid = None, None
        if _wait_exit(pid, timeout_s):
            reaped.append(pid)
    return reaped


def keep_freed_memory() -> bool:
    """Ask glibc's malloc to keep freed blocks for reuse instead of returning them to the system (mallopt:
    M_MMAP_THRESHOLD 32 MiB, M_TRIM_THRESHOLD 512 MiB, M_TOP_PAD 64 MiB). In a fresh process every large
    activation buffer is otherwise mapped and unmapped anew (page faults each time): LeNet5 gradients at batch 40
    took 5.3-6.0 ms in a new worker process against 4.4-4.8 ms in the long-running runner, and 4.4 ms with this
    setting (benchmarks/bench_engines.py, 2-core machine). Returns False where mallopt is not available."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    m_trim_threshold, m_top_pad, m_mmap_threshold = -1, -2, -3
    ok = mallopt(m_mmap_threshold, 32 * 2**20) == 1
    ok &= mallopt(m_trim_threshold, 512 * 2**20) == 1
    ok &= mallopt(m_top_pad, 64 * 2**20) == 1
    return bool(ok)


def worker_process_setup(spec: WorkerSpec) -> None:
    """First thing in a worker process: ignore SIGINT (the master alone handles Ctrl-C and stops the workers; a
    terminal's Ctrl-C reaches the whole process group), pin the process to its CPUs and its math threads, keep
    freed memory for reuse."""
    import torch

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if spec.cpus is not None:
        os.sched_setaffinity(0, spec.cpus)
    torch.set_num_threads(int(spec.threads))
    keep_freed_memory()


# ---------------------------------------------------------------------- start-up
# How a worker gets its start-up data without ever blocking the master (issue 15, item 2). With the spawn start
# method, multiprocessing writes a new process's pickled arguments into a pipe whose read end the master itself
# still holds until the write is done: when the child dies before reading them all (more than a pipe holds: 64 KiB),
# the write never fails and never ends. So the Process arguments stay small (the worker's spec, shared buffers,
# file descriptors, and the problem's tensors, which travel as shared-memory handles), and the rest of the problem
# (numpy arrays, Python objects) goes afterwards through the worker's own pipe, whose child end the master has
# closed: :func:`deliver` writes it without blocking, watching each worker's process sentinel, and a worker that
# dies is reported at once (:class:`experiments.errors.WorkerLost`, naming the worker and how it died).

class _Fd:
    """A file descriptor that travels to a spawned/forkserver child (duplicated there, as multiprocessing does for
    pipes): ``_Fd(fd)`` in the Process arguments, ``.fd`` in the child."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __reduce__(self):
        return _rebuild_fd, (reduction.DupFd(self.fd),)


def _rebuild_fd(dup) -> _Fd:
    return _Fd(dup.detach())


class _TensorsApart(reduction.ForkingPickler):
    """Pickles an object with every torch.Tensor in it replaced by its index in ``tensors`` (pickle's persistent
    ids)."""

    def __init__(self, file, tensors: list) -> None:
        super().__init__(file, pickle.HIGHEST_PROTOCOL)
        self.tensors, self._index = tensors, {}

    def persistent_id(self, obj):
        if not isinstance(obj, torch.Tensor):
            return None
        if id(obj) not in self._index:
            self._index[id(obj)] = len(self.tensors)
            self.tensors.append(obj)
        return self._index[id(obj)]


class _TensorsBack(pickle.Unpickler):
    def __init__(self, file, tensors) -> None:
        super().__init__(file)
        self.tensors = tensors

    def persistent_load(self, pid):
        return self.tensors[pid]


def split_problem(problem) -> tuple[list, bytes]:
    """``(tensors, payload)``: the problem's torch tensors (each once, in the order first met; they go into the
    Process arguments, as shared-memory handles) and the pickle of everything else (bytes, for :func:`deliver`).
    :func:`load_problem` puts them back together."""
    buf, tensors = io.BytesIO(), []
    _TensorsApart(buf, tensors).dump(problem)
    return tensors, buf.getvalue()


def load_problem(tensors, payload: bytes):
    """The problem :func:`split_problem` took apart (in the worker; ``tensors`` are the very tensors, shared)."""
    return _TensorsBack(io.BytesIO(payload), tensors).load()


_LEN = struct.Struct("!Q")


def _died(w: int, proc) -> WorkerLost:
    proc.join(1.0)
    return WorkerLost(f"worker {w} died while starting ({describe_exit(proc)})")


def deliver(payload: bytes, fds: list[int], procs, deadline: float) -> None:
    """Master side: write ``payload`` (length-prefixed) to every worker w's start-up pipe ``fds[w]`` (its child end
    closed in the master), all at once and never blocking (non-blocking writes, polled with each process's
    sentinel). Restores blocking mode on the way out.

    Args:
        payload: bytes (:func:`split_problem`). fds: one pipe/socket file descriptor per worker.
        procs: the worker processes (multiprocessing.Process, started). deadline: ``time.monotonic()`` seconds.

    Raises:
        WorkerLost: a worker died (``worker W died while starting (killed by SIGKILL)``) or did not take its data by
        the deadline.
    """
    frame = memoryview(_LEN.pack(len(payload)) + payload)
    pos = dict.fromkeys(range(len(fds)), 0)
    owner, poller = {}, select.poll()
    for w, fd in enumerate(fds):
        os.set_blocking(fd, False)
        poller.register(fd, select.POLLOUT)
        poller.register(procs[w].sentinel, select.POLLIN)
        owner[fd], owner[procs[w].sentinel] = w, w
    try:
        while pos:
            left = deadline - time.monotonic()
            if left <= 0:
                raise WorkerLost(f"worker(s) {sorted(pos)} took no start-up data within the start-up timeout")
            for fd, _ in poller.poll(max(1, int(left * 1000))):
                w = owner[fd]
                if w not in pos:
                    continue
                if fd == procs[w].sentinel:
                    raise _died(w, procs[w])
                try:
                    pos[w] += os.write(fd, frame[pos[w]:pos[w] + (1 << 20)])
                except BlockingIOError:
                    continue
                except OSError:  # broken pipe / reset: the worker is gone
                    raise _died(w, procs[w]) from None
                if pos[w] == len(frame):
                    del pos[w]
                    poller.unregister(fd)
                    poller.unregister(procs[w].sentinel)
    finally:
        for fd in fds:
            try:
                os.set_blocking(fd, True)
            except OSError:
                pass


def receive(fd: int) -> bytes:
    """Worker side: the payload :func:`deliver` wrote to this worker. EOFError when the master is gone first."""
    def exactly(n: int) -> bytes:
        chunks = []
        while n:
            chunk = os.read(fd, min(n, 1 << 20))
            if not chunk:
                raise EOFError("the master closed the start-up pipe")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    return exactly(_LEN.unpack(exactly(_LEN.size))[0])


def await_ready(conns, procs, deadline: float) -> None:
    """Master side: wait until every worker w has sent ``b"R"`` on ``conns[w]`` (multiprocessing Connection).

    Raises:
        WorkerLost: a worker died first (its sentinel, or its pipe closed), or the deadline (``time.monotonic()``)
        passed. RuntimeError: a worker reported an error (``b"E"`` + its message) or sent something else.
    """
    waiting = set(range(len(conns)))
    owner = {}
    for w in waiting:
        owner[conns[w]], owner[procs[w].sentinel] = w, w
    while waiting:
        ready = mp_wait([conns[w] for w in waiting] + [procs[w].sentinel for w in waiting],
                        max(0.0, deadline - time.monotonic()))
        if not ready:
            raise WorkerLost(f"worker(s) {sorted(waiting)} not ready within the start-up timeout")
        for obj in ready:
            w = owner[obj]
            if w not in waiting:
                continue
            try:
                msg = conns[w].recv_bytes() if conns[w].poll() else None
            except (EOFError, OSError):
                msg = None
            if msg is None:
                raise _died(w, procs[w])
            if msg[:1] == b"E":
                raise RuntimeError(f"worker {w} failed: {msg[1:].decode(errors='replace')}")
            if msg != b"R":
                raise RuntimeError(f"worker {w} sent {msg[:40]!r} instead of ready")
            waiting.discard(w)


def report_worker_error(conn, exc: BaseException) -> None:
    """In a worker process: print ``exc``'s traceback on stderr, send its first line to the master on ``conn`` as an
    error message (``b"E"`` + text, at most 2,000 bytes; the master raises it), and exit the process with status 1."""
    traceback.print_exc(file=sys.stderr)
    try:
        conn.send_bytes(b"E" + f"{type(exc).__name__}: {exc}".splitlines()[0].encode()[:2000])
    except OSError:
        pass
    sys.exit(1)


def describe_exit(proc) -> str:
    """How a multiprocessing.Process ended, in words (``exit code 1``, ``killed by SIGKILL``, ``still running``)."""
    code = proc.exitcode
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def reap(processes, grace_s: float = 5.0) -> None:
    """End every process of ``processes`` (multiprocessing.Process): wait up to ``grace_s`` seconds for each to
    exit by itself, then SIGTERM, then SIGKILL; always joins, so none is left behind (nor a zombie)."""
    deadline = time.monotonic() + grace_s
    for p in processes:
        if p.pid is None:
            continue
        p.join(max(0.0, deadline - time.monotonic()))
    for p in processes:
        if p.pid is not None and p.is_alive():
            p.terminate()
            p.join(1.0)
        if p.pid is not None and p.is_alive():
            p.kill()
            p.join(5.0)


@contextmanager
def sigterm_as_interrupt():
    """While inside, SIGTERM raises :class:`experiments.errors.Interrupted` (a KeyboardInterrupt whose ``signum`` is
    SIGTERM) in the main thread, so the runner keeps the partial trace and ends its children exactly as for Ctrl-C,
    then exits 143. Does nothing outside the main thread."""
    import threading

    from experiments.errors import Interrupted

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _raise(signum, frame):
        raise Interrupted(signum)

    previous = signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
