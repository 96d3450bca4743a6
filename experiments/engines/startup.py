"""How a worker gets its start-up data without ever blocking the master. With the spawn start
method, multiprocessing writes a new process's pickled arguments into a pipe whose read end the master itself
still holds until the write is done: when the child dies before reading them all (more than a pipe holds: 64 KiB),
the write never fails and never ends. So the Process arguments stay small (the worker's spec, shared buffers,
file descriptors, and the problem's tensors, which travel as shared-memory handles), and the rest of the problem
(numpy arrays, Python objects) goes afterwards through the worker's own pipe, whose child end the master has
closed: :func:`deliver` writes it without blocking, watching each worker's process sentinel, and a worker that
dies is reported at once (:class:`experiments.errors.WorkerLost`, naming the worker and how it died).

A worker that neither dies nor says it is ready is judged by a :class:`StartupWatch` (docs/engines.md, "Faults"):
before it is ready it has nothing to send, so its silence is using no CPU time (a stopped or deadlocked process)."""

from __future__ import annotations

import io
import math
import os
import pickle
import select
import struct
import sys
import threading
import time
import traceback
from multiprocessing import reduction
from multiprocessing.connection import wait as mp_wait

import torch

from experiments.engines.processes import child_pids, describe_exit, forkserver_pid, kill_forkserver
from experiments.errors import WorkerLost


class PassedFd:
    """A file descriptor that travels to a spawned/forkserver child (duplicated there, as multiprocessing does for
    pipes): ``PassedFd(fd)`` in the Process arguments, ``.fd`` in the child."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __reduce__(self):
        return _rebuild_fd, (reduction.DupFd(self.fd),)


def _rebuild_fd(dup) -> PassedFd:
    return PassedFd(dup.detach())


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


STALL_FLOOR_S = 10.0
"""A worker not ready yet is lost once it has used no CPU time for ``max(engine.timeout_s, STALL_FLOOR_S)`` seconds:
at least this, because a busy machine may keep a runnable process waiting for a moment and a small timeout_s is
meant for gradients. The forkserver, while a worker's start waits on it, likewise."""
STARTUP_CAP_S = 300.0
"""A worker that keeps running (using CPU time) but is not ready ``max(engine.timeout_s, STARTUP_CAP_S)`` seconds
after the workers were started is lost too: spawn's 32 workers importing torch on 2 cores took 279 s."""
SAMPLE_S = 0.5  # how often the master reads the CPU times it watches (and the longest it blocks meanwhile)
MASTER_GAP_S = 5.0  # a longer gap between two reads: the master itself did not run, silence counts from now
START_GRACE_S = 1.0  # a start under way when the starts are given up may finish within this, before it is broken
_STATES = {"T": "process stopped", "t": "process stopped by a debugger", "D": "waiting in the kernel", "S": "asleep"}


def _cpu_state(pid: int) -> tuple[str, int] | None:
    """(state letter, CPU clock ticks used by all its threads) of process ``pid`` from Linux's ``/proc/PID/stat``;
    None where that cannot be read (not Linux, the process gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return fields[0], int(fields[11]) + int(fields[12])  # state; utime + stime
    except (OSError, IndexError, ValueError):
        return None


def _describe(pid: int) -> str:
    """Process ``pid``'s state in words, and a stopped child it may be waiting on (``asleep, its child 4242
    stopped``)."""
    state = _cpu_state(pid)
    words = "state unknown" if state is None else _STATES.get(state[0], f"state {state[0]}")
    stopped = [c for c in child_pids(pid) if (_cpu_state(c) or ("",))[0] in ("T", "t")]
    return words + (f", its child {stopped[0]} stopped" if stopped else "")


class CpuSilence:
    """For how long each of some processes has used no CPU time, as seen by this one: their times are read every
    SAMPLE_S at most (a process first seen, or whose times cannot be read, counts as running now); after a gap
    longer than MASTER_GAP_S between two reads (this process did not run: stopped) every silence restarts."""

    def __init__(self) -> None:
        self._ticks: dict[int, int | None] = {}
        self._since: dict[int, float] = {}
        self._sampled = -math.inf

    def quiet_s(self, pids) -> list[float]:
        """Seconds since each of ``pids`` was last seen using CPU time."""
        now = time.monotonic()
        if now - self._sampled >= SAMPLE_S:
            if now - self._sampled > MASTER_GAP_S:
                self._since = dict.fromkeys(self._since, now)
            self._sampled = now
            for pid in pids:
                state = _cpu_state(pid)
                ticks = state[1] if state is not None else None
                if ticks is None or self._ticks.get(pid) != ticks:
                    self._ticks[pid], self._since[pid] = ticks, now
        return [now - self._since.get(pid, now) for pid in pids]


class StartupWatch:
    """Master side, while the workers start: when a worker that is not ready yet counts as lost. It is when it has
    used no CPU time for ``max(timeout_s, STALL_FLOOR_S)`` seconds (stopped, deadlocked: before it is ready it has
    nothing to send, so this is its silence), or when it is still not ready ``max(timeout_s, STARTUP_CAP_S)``
    seconds after the watch began (just after the workers were started: a forkserver's own start is not counted).
    Where CPU times cannot be read (not Linux) only the second bound applies.

    Args:
        procs: the worker processes (multiprocessing.Process, started). timeout_s: ``engine.timeout_s``.
    """

    def __init__(self, procs, timeout_s: float) -> None:
        self.procs = procs
        self.stall_s = max(float(timeout_s), STALL_FLOOR_S)
        self.cap_s = max(float(timeout_s), STARTUP_CAP_S)
        self.deadline = time.monotonic() + self.cap_s
        self._silence = CpuSilence()
        self._silence.quiet_s([p.pid for p in procs])  # silence counts from now

    def wait_s(self) -> float:
        """How long the caller may block before it calls :meth:`check` again (seconds)."""
        return max(0.0, min(SAMPLE_S, self.deadline - time.monotonic()))

    def check(self, waiting) -> None:
        """Raise for the workers of ``waiting`` (not ready yet) past a bound; return otherwise.

        Raises:
            WorkerLost: one line naming each such worker (``worker 0 stalled while starting: process stopped, no
            CPU time for 10 s (the start-up bound, max(engine.timeout_s, 10 s))``).
        """
        waiting = sorted(waiting)
        quiet = self._silence.quiet_s([self.procs[w].pid for w in waiting])
        stalled = [w for w, q in zip(waiting, quiet) if q >= self.stall_s]
        if stalled:
            raise WorkerLost(
                "; ".join(
                    f"worker {w} stalled while starting: {_describe(self.procs[w].pid)}, no CPU time for "
                    f"{self.stall_s:g} s (the start-up bound, max(engine.timeout_s, {STALL_FLOOR_S:g} s))"
                    for w in stalled
                )
            )
        if waiting and time.monotonic() >= self.deadline:
            raise WorkerLost(
                f"worker(s) {waiting} not ready {self.cap_s:g} s after starting "
                f"(the start-up bound, max(engine.timeout_s, {STARTUP_CAP_S:g} s))"
            )


def start_processes(procs, method: str, timeout_s: float) -> None:
    """Start ``procs`` (multiprocessing.Process, not started yet) in order. With the forkserver start method every
    start waits for the forkserver (the first for its preload: torch's import, and the processes that runs, such as
    ``ldconfig``), which stalls when what it waits on is stopped or hung; so the starts run in a helper thread while
    this one watches the forkserver as :class:`StartupWatch` watches a worker (the same bounds). A forkserver past
    them is ended with what it started (:func:`experiments.engines.processes.kill_forkserver`), which breaks the
    waiting start. A stop signal ends the starts as well (the one under way may finish first).

    Raises:
        WorkerLost: the forkserver stalled or took too long (``the forkserver stalled while starting worker 0:
            asleep, its child 4242 stopped, no CPU time for 10 s (the start-up bound, ...)``).
        KeyboardInterrupt: a stop signal. BaseException: what a start raised.
    """
    if method != "forkserver":  # spawn: a start only forks and writes a few KiB into the new process's pipe
        for p in procs:
            p.start()
        return
    stop, failed, current = threading.Event(), [], [0]

    def starts() -> None:
        try:
            for w, p in enumerate(procs):
                if stop.is_set():
                    return
                current[0] = w
                p.start()
        except BaseException as exc:  # noqa: BLE001 - raised again in the calling thread
            failed.append(exc)

    helper = threading.Thread(target=starts, name="apam-start", daemon=True)
    helper.start()
    stall_s, cap_s = max(float(timeout_s), STALL_FLOOR_S), max(float(timeout_s), STARTUP_CAP_S)
    deadline, silence = time.monotonic() + cap_s, CpuSilence()
    try:
        while helper.is_alive():
            helper.join(SAMPLE_S)
            pid = forkserver_pid()
            if not helper.is_alive() or pid is None:
                continue
            if silence.quiet_s([pid])[0] >= stall_s:
                why = f"{_describe(pid)}, no CPU time for {stall_s:g} s"
                bound = f"max(engine.timeout_s, {STALL_FLOOR_S:g} s)"
            elif time.monotonic() >= deadline:
                why, bound = (
                    f"not done {cap_s:g} s after the first start",
                    f"max(engine.timeout_s, {STARTUP_CAP_S:g} s)",
                )
            else:
                continue
            raise WorkerLost(
                f"the forkserver stalled while starting worker {current[0]}: {why} (the start-up bound, {bound})"
            )
    except BaseException:
        stop.set()
        helper.join(START_GRACE_S)
        if helper.is_alive():  # its start waits on the forkserver: ending it breaks the start's pipes
            kill_forkserver()
            helper.join(START_GRACE_S)
        raise
    if failed:
        raise failed[0]


def deliver(payload: bytes, fds: list[int], procs, watch: StartupWatch) -> None:
    """Master side: write ``payload`` (length-prefixed) to every worker w's start-up pipe ``fds[w]`` (its child end
    closed in the master), all at once and never blocking (non-blocking writes, polled with each process's
    sentinel). Restores blocking mode on the way out.

    Args:
        payload: bytes (:func:`split_problem`). fds: one pipe/socket file descriptor per worker.
        procs: the worker processes (multiprocessing.Process, started). watch: their :class:`StartupWatch`.

    Raises:
        WorkerLost: a worker died (``worker W died while starting (killed by SIGKILL)``), or one still taking its
        data stalled or ran out of time (:meth:`StartupWatch.check`).
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
            watch.check(pos)  # only those still taking data: one that took it all may be idle, ready
            for fd, _ in poller.poll(math.ceil(watch.wait_s() * 1000)):
                w = owner[fd]
                if w not in pos:
                    continue
                if fd == procs[w].sentinel:
                    raise _died(w, procs[w])
                try:
                    pos[w] += os.write(fd, frame[pos[w] : pos[w] + (1 << 20)])
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


def await_ready(conns, procs, watch: StartupWatch) -> None:
    """Master side: wait until every worker w has sent ``b"R"`` on ``conns[w]`` (multiprocessing Connection).

    Raises:
        WorkerLost: a worker died first (its sentinel, or its pipe closed), or one not ready stalled or ran out of
        time (``watch``, :meth:`StartupWatch.check`). RuntimeError: a worker reported an error (``b"E"`` + its
        message) or sent something else.
    """
    waiting = set(range(len(conns)))
    owner = {}
    for w in waiting:
        owner[conns[w]], owner[procs[w].sentinel] = w, w
    while waiting:
        ready = mp_wait([conns[w] for w in waiting] + [procs[w].sentinel for w in waiting], watch.wait_s())
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
        watch.check(waiting)  # after the messages that came: a worker that said ready may idle meanwhile


def report_worker_error(conn, exc: BaseException) -> None:
    """In a worker process: print ``exc``'s traceback on stderr, send its first line to the master on ``conn`` as an
    error message (``b"E"`` + text, at most 2,000 bytes; the master raises it), and exit the process with status 1."""
    traceback.print_exc(file=sys.stderr)
    try:
        conn.send_bytes(b"E" + f"{type(exc).__name__}: {exc}".splitlines()[0].encode()[:2000])
    except OSError:
        pass
    sys.exit(1)
