"""The shared-memory engine: a master (this process) and P worker processes on one machine, wall clock.

Processes: ``torch.multiprocessing`` with ``engine.start_method`` (``forkserver`` by default, or ``spawn``:
docs/engines.md), so nothing the calling process did before (a serial run, threads, CUDA) leaks into the workers.
The problem object is sent to each worker once, at start; its torch tensors travel through shared memory, so the
data is neither reloaded nor copied (numpy/scipy members are copied once per worker, through the worker's pipe,
never blocking the master: a worker that dies while starting fails the run at once, ``worker W died while starting
(killed by SIGKILL)``; :mod:`experiments.engines.workers`, start-up).

Buffers: two preallocated shared tensors of shape (P, d) in the problem's dtype: ``xs[w]`` is the iterate the
master last handed to worker w, ``grads[w]`` the gradient w computed there; a shared int64 block ``ctrl`` (P, ROW)
holds, per worker, the version of ``xs[w]`` and a request sequence number (each worker's row a 64-byte cache line of
its own, so that one worker's hand-off does not evict another's; read and written as 8-byte words through a
memoryview, :func:`_words`). The master writes ``xs[w]`` only while
w is idle, and w writes ``grads[w]`` only while the master waits for it, so no lock is needed.

Hand-off (``engine.handoff``, :func:`choose_handoff`; the choice is the run's ``handoff`` in summary.csv): to hand
out work the master copies x into ``xs[w]``, stores the version, then increments ``ctrl[w, SEQ]``, then writes the
worker's wake-up fd. A worker serves a request when it sees the sequence number move past the last one it served.
``spin``: a worker first re-reads the sequence number for up to SPIN_S (200 us) before it blocks on its wake-up fd,
and the master polls the reply pipes without sleeping for up to SPIN_S before it blocks: no cross-core wake-up of
a sleeping process on the critical path, a few microseconds per hand-off (benchmarks/bench_engines.py). ``block``:
both sides block at once. ``auto`` spins only when every worker is pinned to its own CPUs, one is left for the
master, and that CPU was idle over the last 0.1 s (nobody else needs it); when processes (ours or others') outnumber
cores, a spinning process would hold the very core its peer needs.
Replies: blocking, a worker reports ``(version, loss, compute_s, target_s, timing code)`` on its pipe. Spinning, it
writes them into its row of the shared ``replies`` block (one ``struct.pack_into``; a cache line per worker), then
increments the row's done count, then writes the
master's one wake-up eventfd; the master reads the done counts without a system call while it spins (a reply costs
no pipe read, no unpickling, no poll), and blocks on the eventfd (with the pipes and process sentinels) after
SPIN_S; a wake-up whose replies it already took while spinning only makes it look again (``wait`` returns [] only
when its time is up). Every ``wait`` reads the done counts before it blocks, so a reply is never left behind a
reset wake-up.
Memory ordering: blocking replies and wake-ups go through system calls (pipe write/read, eventfd write/read, poll),
which order every memory access before them. The hand-offs without a system call are the spinning ones: a worker
sees ``ctrl[w, SEQ]`` change, then reads ``ctrl[w, VERSION]`` and ``xs[w]``; the master sees a done count change,
then reads the reply's fields and ``grads[w]``. The master's stores are issued in program order (x copy, version,
sequence number: three separate, opaque calls the compiler cannot reorder), and on x86-64 (total store order) stores
become visible in program order and a load is not reordered with later loads; so a worker that sees the new sequence
number also sees the x and the version written before it; a master that sees a worker's new done count likewise sees
the gradient and the fields the worker wrote before it. CPUs with weaker ordering (ARM, POWER) would need fences
Python cannot issue, so there ``auto`` blocks and ``spin`` is a config error (:func:`spin_allowed`). A stale wake-up
(the fd written after a spinning worker already took the request) only makes the worker re-check the sequence number
once; a request is served once, because the worker compares with the last sequence number it served
(tests/engines/test_handoff.py: every gradient exactly once, in order, with its version, spinning and blocking, with
more and fewer processes than cores). Each field has one writer (the master for ``ctrl``, worker w for its ``replies``
row; aligned 8-byte stores; the reply fields, written by one C call, are complete before the done count's store).

Stops (:meth:`SharedMemoryTransport.restart`, a staleness policy's ``restart``): the master writes a new request
as for any hand-out (x, version, sequence number, wake-up), then sends the worker SIGUSR1. The worker's handler
raises only while the worker computes (its gradient, and an emulated wait) and only when the sequence number has
moved past the request being computed; the worker catches it between two operations of its computation and serves
the new request on the same minibatch. A signal that comes too late is ignored: the worker sends the old gradient,
whose reply carries the old request's sequence number, so the master tells it apart (``Arrival.stale``) and discards
it unread. Stops use the blocking hand-off (``engine.handoff=spin`` is refused with them): its replies are pipe
messages, one each, where a spinning reply row could be overwritten by the next reply before the master read it.

Only small messages go through the per-worker pipes: worker -> master ``(gradient, version, loss)`` (blocking only),
``ready``, or an error line; master -> worker ``stop``. The master wakes a blocked worker through
an eventfd (a pipe of its own where eventfd is missing), not the message pipe: a pipe write asks the kernel to
run the woken worker on the writer's core (a "synchronous" wake-up), where it then shares one core with the
master while the other core idles, which caps the master's update rate when the gradients are cheap
(benchmarks/bench_engines.py measures both wake-ups). With
P = 1 the master has nothing to do meanwhile, so there the message pipe (the faster wake-up) is used when
blocking. The optimizer state lives only in the master (:class:`experiments.training.master.Master`); the master loop,
clock and fault handling are in :mod:`experiments.engines.driver`.

Workers pin their math threads (``engine.threads_per_worker``, default 1), are pinned each to its own CPUs where
they fit (``engine.pin_workers``, default true; :func:`experiments.engines.workers.worker_cpus`), and draw minibatches
from their own seeded stream (:func:`experiments.engines.workers.worker_seed`). A dead worker is seen at once (its
process sentinel); a silent one is killed after ``engine.timeout_s``. Ctrl-C or SIGTERM in the master: every worker
is stopped (then terminated, then killed) before the exception propagates; a worker whose master dies sees its pipe
close and exits.
"""
from __future__ import annotations

import math
import os
import platform
import select
import signal
import struct
import sys
import time
from contextlib import contextmanager, nullcontext

import torch

from experiments.engines.driver import drive
from experiments.engines.emulation import with_emulation, worker_emulator
from experiments.engines.transport import Arrival, Lost, NoWorkers
from experiments.engines.workers import (
    WorkerSpec,
    _Fd,
    await_ready,
    busy_cpus,
    deliver,
    describe_exit,
    load_problem,
    process_context,
    reap,
    receive,
    report_worker_error,
    sigterm_as_interrupt,
    split_problem,
    worker_process_setup,
)
from experiments.errors import ConfigError
from experiments.training.sampling import BatchStream

_GRAD = struct.Struct("<cqddddbq")  # b"G", version, loss, compute_s, target_s, sent_s, timing code (emulation.py),
                                   # the request's sequence number (a stopped request's late reply is told apart)
ROW = 8                         # int64 words per worker row of ctrl and replies: 64 bytes, a cache line of its own
VERSION, SEQ = 0, 1             # words of worker w's row of the shared control block ctrl (P, ROW) int64
_REPLY = struct.Struct("<qddddq")  # spin: words 0-5 of a replies row: version, loss, compute_s, target_s, sent_s,
                                   # timing code
REPLY_DONE = 6                  # spin: word of a replies row counting the gradients the worker has put there
SPIN_S = 200e-6                 # how long a spinning side polls before it blocks (covers one master update)
STARTUP_TIMEOUT_S = 300.0       # a worker process must be up (imports, problem received) within this
LAST_WORKER_PIDS: list[int] = []  # process ids of the latest run's workers (tests check that none is left)


_ONE = (1).to_bytes(8, sys.byteorder)


def _words(block: torch.Tensor) -> memoryview:
    """A flat int64 memoryview of a shared (P, ROW) int64 block: item ``w * ROW + i`` is word i of row w. An item read
    or write is one aligned 8-byte load or store (CPython moves it with an 8-byte memcpy), 0.04-0.1 us against
    0.15-0.3 us for a numpy scalar."""
    return memoryview(block.numpy()).cast("B").cast("q")


def _wake_channel() -> tuple[int, int]:
    """(read end, write end) of a wake-up channel: one eventfd where the OS has them (both ends the same fd),
    else a pipe. A wake-up is one 8-byte write, read back as 8 bytes."""
    if hasattr(os, "eventfd"):
        fd = os.eventfd(0, os.EFD_CLOEXEC)
        return fd, fd
    return os.pipe()


class ReadPoller:
    """Waits for any of a set of file descriptors to become readable: ``epoll`` where the OS has it (a wait costs the
    same whatever the number of fds: 0.6 us with P = 32's 65 fds on our machine, against 2.3 us for ``poll(2)``,
    which scans them all; 0.5 against 0.7 us with P = 2's 5), else ``poll(2)``. Level-triggered, like ``poll``: a
    pipe with data, a closed pipe or an exited process's sentinel reads as ready until it is read or
    unregistered. ``poll(timeout_ms)`` (None: no timeout) returns ``(fd, event mask)`` pairs; :meth:`close` frees
    the epoll descriptor."""

    def __init__(self) -> None:
        self._epoll = select.epoll() if hasattr(select, "epoll") else None
        self._poll = None if self._epoll is not None else select.poll()

    def register(self, fd: int) -> None:
        if self._epoll is not None:
            self._epoll.register(fd, select.EPOLLIN)
        else:
            self._poll.register(fd, select.POLLIN)

    def unregister(self, fd: int) -> None:
        (self._epoll if self._epoll is not None else self._poll).unregister(fd)

    def poll(self, timeout_ms: int | None) -> list[tuple[int, int]]:
        if self._epoll is not None:
            return self._epoll.poll(-1 if timeout_ms is None else timeout_ms / 1000)
        return self._poll.poll(timeout_ms)

    def close(self) -> None:
        if self._epoll is not None:
            self._epoll.close()


class Stopped(Exception):
    """Raised in a worker by its SIGUSR1 handler: the master superseded the request being computed (a stop)."""


def _worker_main(spec: WorkerSpec, tensors: list, xs: torch.Tensor, grads: torch.Tensor, ctrl: torch.Tensor,
                 wake: _Fd, conn, spin_s: float = 0.0, replies: torch.Tensor | None = None,
                 master_wake: _Fd | None = None) -> None:
    """Body of worker process ``spec.worker``: receive the rest of the problem on the pipe (its ``tensors`` came
    with the process; workers.split_problem), say ready; then wait until ``ctrl[w, SEQ]`` moves past the last request
    served (spin on it for ``spin_s`` seconds, then block on its wake-up fd and pipe), read the version from
    ``ctrl[w, VERSION]``, compute one gradient at ``xs[w]`` on the next minibatch of its own stream (drawn while it
    waited), write it to ``grads[w]``, report (version, loss) on the pipe -- or, spinning, in its row of ``replies``
    followed by its ``done`` count and one write to the master's wake-up fd; until the pipe says stop or closes (the
    master is gone). SIGUSR1 while it computes a request the master has superseded (a stop; module docstring)
    abandons the computation for the new request, on the same minibatch."""
    worker_process_setup(spec)
    w = spec.worker
    computing = [0]  # sequence number of the request being computed; 0 while not computing

    def on_stop(signum, frame) -> None:
        current = computing[0]
        if current and ctl[seq_at] != current:
            computing[0] = 0  # raise once: a second signal while leaving finds nothing armed
            raise Stopped

    try:
        problem = load_problem(tensors, receive(conn.fileno()))
        stream = BatchStream(problem.num_train, spec.batch, spec.seed)
        x, g_slot, ctl = xs[w], grads[w], _words(ctrl)
        seq_at, version_at, row_at, done_at = w * ROW + SEQ, w * ROW + VERSION, w * ROW * 8, w * ROW + REPLY_DONE
        reply = _words(replies) if replies is not None else None  # spin: this worker's row of the replies block
        reply_bytes = reply.cast("B") if reply is not None else None
        emu = worker_emulator(spec)
        poller = select.poll()
        poller.register(wake.fd, select.POLLIN)
        poller.register(conn.fileno(), select.POLLIN)
        served = 0  # sequence number of the last request served
        idx = stream.next()  # the next request's minibatch, drawn while waiting: off the hand-off's critical path
        signal.signal(signal.SIGUSR1, on_stop)
        conn.send_bytes(b"R")
        while True:
            if spin_s > 0 and ctl[seq_at] == served:
                deadline = time.perf_counter() + spin_s
                while ctl[seq_at] == served and time.perf_counter() < deadline:
                    pass
            if ctl[seq_at] == served:  # nothing yet: block until the master writes the wake-up fd (or the pipe)
                ready = {fd for fd, _ in poller.poll()}
                if conn.fileno() in ready:
                    msg = conn.recv_bytes()
                    if msg == b"S":
                        break
                if wake.fd in ready:
                    os.read(wake.fd, 8)  # resets the eventfd counter (wake-ups already seen by spinning included)
                continue  # re-check the sequence number: a wake-up may be stale
            served = ctl[seq_at]
            version = ctl[version_at]
            spec.fault.maybe_fail(w, version)
            try:
                computing[0] = served  # from here a stop's SIGUSR1 raises Stopped
                if ctl[seq_at] != served:
                    raise Stopped  # superseded before it began
                t0 = time.perf_counter()
                loss, g = problem.loss_grad(x, idx)
                g_slot.copy_(g)
                compute_s, target_s, timing = emu.finish(t0)
                computing[0] = 0
            except Stopped:
                computing[0] = 0
                continue  # the new request, on the same minibatch
            if reply is None:
                conn.send_bytes(_GRAD.pack(b"G", version, float(loss), compute_s, target_s, time.perf_counter(),
                                           timing, served))
            else:  # the fields, then the count the master spins on (program order; see the module docstring)
                _REPLY.pack_into(reply_bytes, row_at, version, float(loss), compute_s, target_s, time.perf_counter(),
                                 timing)
                reply[done_at] += 1
                os.write(master_wake.fd, _ONE)  # wakes the master if it has stopped spinning and blocked
            idx = stream.next()
    except (EOFError, BrokenPipeError, ConnectionResetError):
        return  # the master is gone
    except BaseException as exc:  # noqa: BLE001 - reported to the master, then the process exits
        report_worker_error(conn, exc)
    finally:
        conn.close()
        os.close(wake.fd)
        if master_wake is not None:
            os.close(master_wake.fd)


def spin_allowed() -> bool:
    """True where a plain store/load hand-off through shared memory is ordered without fences (x86-64's total store
    order; see the module docstring). Elsewhere the hand-off always blocks (system calls order memory)."""
    return platform.machine().lower() in ("x86_64", "amd64")


def choose_handoff(setting: str, specs: list[WorkerSpec], load: float | None = None) -> str:
    """``engine.handoff`` resolved to ``spin`` or ``block`` for this run.

    ``auto``: spin when every worker is pinned to CPUs of its own (:func:`experiments.engines.workers.worker_cpus`),
    at least one allowed CPU is left for the master, the machine's other work leaves those CPUs free (``load``: the
    CPUs' worth of work done on the CPUs left for the master, by default measured over 0.1 s before the workers
    start, :func:`experiments.engines.workers.busy_cpus`, else the machine's 1-minute load average; below the number
    of those CPUs), and the CPU
    orders memory strongly enough (:func:`spin_allowed`); block at once otherwise: processes (ours or other
    people's) would outnumber cores, and a spinning process would take the core from the one it waits for (on our
    2-core machine under a load of about 10, spinning made a P = 1 round trip 2.7x slower than blocking).
    ``spin`` / ``block`` force the choice.

    Raises:
        ConfigError: an unknown setting, or ``spin`` on a CPU where :func:`spin_allowed` is false.
    """
    if setting not in ("auto", "spin", "block"):
        raise ConfigError(f"engine.handoff={setting}: must be auto, spin or block")
    if setting == "spin" and not spin_allowed():
        raise ConfigError(f"engine.handoff=spin: needs an x86-64 CPU (this is {platform.machine()}); use auto or block")
    if setting != "auto":
        return setting
    if not spin_allowed() or any(s.cpus is None for s in specs) or not hasattr(os, "sched_getaffinity"):
        return "block"
    free_cpus = set(os.sched_getaffinity(0)) - {c for s in specs for c in s.cpus}
    free = len(free_cpus)
    if load is None and free:
        load = busy_cpus(free_cpus)
    if load is None:
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    return "spin" if free >= 1 and load < free else "block"


@contextmanager
def master_beside(cpus: tuple[int, ...] | None):
    """While inside, this process (the master) runs on ``cpus`` (the lone worker's); None, or no CPU affinity on
    this OS: nothing changes. Restores the previous affinity on the way out. Used by :func:`run` at P = 1 with the
    blocking hand-off when ``engine.colocate=true`` (off by default: the simulated clock's message latency is
    calibrated by a blocking P = 1 run with master and worker on different CPUs, as they are at P >= 2, so a
    co-located P = 1 run would be faster than its simulated twin).

    Why: a blocking P = 1 run alternates strictly (the master updates while the worker waits, then the reverse), so
    it needs one CPU, and on the same CPU a wake-up costs a context switch, while across CPUs it costs an
    inter-processor interrupt, which a virtual machine pays dearly for: on our 2-core VM a blocking pipe round trip
    between two processes took 6-10 us on one CPU against 75-100 us across two, and the engine's blocking P = 1
    hand-off 79 us beside its worker against 460 us apart, in the same hour (benchmarks/bench_engines.py,
    ``handoff``: ``block_beside`` and ``block``)."""
    if cpus is None or not hasattr(os, "sched_setaffinity"):
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


class SharedMemoryTransport:
    """Starts P worker processes and moves iterates/gradients through shared buffers (see the module docstring).

    Args:
        problem: the run's problem (sent to every worker at start).
        specs: one :class:`WorkerSpec` per worker.
        x0: an iterate like the master's (shape (d,), dtype and device of the buffers).
        start_method: ``spawn`` or ``forkserver``.
        handoff: ``spin`` or ``block`` (see :func:`choose_handoff`; the module docstring).

    Raises:
        WorkerLost: a worker did not come up (died, or not ready within STARTUP_TIMEOUT_S).
        RuntimeError: a worker raised (its message is included).
    """

    cuts_off_silent = True

    def __init__(self, problem, specs: list[WorkerSpec], x0: torch.Tensor, start_method: str = "spawn",
                 handoff: str = "block") -> None:
        if handoff not in ("spin", "block"):
            raise ValueError(f"handoff={handoff!r}: must be spin or block")
        P, d = len(specs), x0.numel()
        self.handoff = handoff
        self._spin_s = SPIN_S if handoff == "spin" else 0.0
        self.xs = torch.zeros(P, d, dtype=x0.dtype, device=x0.device)
        self.grads = torch.zeros(P, d, dtype=x0.dtype, device=x0.device)
        if x0.device.type == "cpu":
            self.xs.share_memory_()
            self.grads.share_memory_()
        self._x_slots, self._g_slots = list(self.xs.unbind(0)), list(self.grads.unbind(0))
        self.ctrl = torch.zeros(P, ROW, dtype=torch.int64).share_memory_()  # per worker: version, request seq
        self._ctl = _words(self.ctrl)
        self.wakes = [_wake_channel() for _ in range(P)]
        # spin: replies through shared memory (row w: version, loss, compute_s, target_s, timing code, done count) and
        # one wake-up channel for the master, written after every reply
        self.replies = torch.zeros(P, ROW, dtype=torch.int64).share_memory_() if self._spin_s else None
        self._rep = _words(self.replies) if self.replies is not None else None
        self._rep_bytes = self._rep.cast("B") if self._rep is not None else None
        self._seen = [0] * P
        self._dropped: set[int] = set()
        self._mwake = _wake_channel() if self._spin_s else None
        ctx = process_context(start_method, problem)
        self.procs, self.conns = [], []
        self._poller = ReadPoller()  # pipe ends and process sentinels (registered once: cheaper than mp_wait)
        self._fd_owner: dict[int, int] = {}
        self._closed = False
        self._started = False
        tensors, payload = split_problem(problem)  # the Process arguments stay small: see workers.py (start-up)
        try:
            for spec in specs:
                parent, child = ctx.Pipe(duplex=True)
                wake = _Fd(self.wakes[spec.worker][0])
                p = ctx.Process(target=_worker_main, args=(spec, tensors, self.xs, self.grads, self.ctrl, wake, child,
                                                           self._spin_s, self.replies,
                                                           _Fd(self._mwake[1]) if self._mwake else None),
                                name=f"apam-worker-{spec.worker}", daemon=True)
                p.start()
                child.close()  # the master keeps no copy of the child's end: its death breaks the pipe
                self.procs.append(p)
                self.conns.append(parent)
                for fd in (parent.fileno(), p.sentinel):
                    self._poller.register(fd)
                    self._fd_owner[fd] = spec.worker
            if self._mwake:
                self._poller.register(self._mwake[0])
            deadline = time.monotonic() + STARTUP_TIMEOUT_S
            deliver(payload, [c.fileno() for c in self.conns], self.procs, deadline)
            await_ready(self.conns, self.procs, deadline)
            self._started = True
        except BaseException:
            self.close()
            raise

    def _read(self, w: int, ready: bool = False) -> bytes | None:
        """The next message of worker w (``ready``: its pipe is known to be readable), b"" when there is none, or
        None when its pipe is closed (process gone). Raises RuntimeError on a worker's error message."""
        conn = self.conns[w]
        try:
            if not ready and not conn.poll():
                if self.procs[w].is_alive():
                    return b""
                self.procs[w].join(1.0)
                return None
            msg = conn.recv_bytes()
        except (EOFError, OSError):
            self.procs[w].join(1.0)
            return None
        if msg[:1] == b"E":
            raise RuntimeError(f"worker {w} failed: {msg[1:].decode(errors='replace')}")
        return msg

    # ------------------------------------------------------------------ transport interface
    def issue(self, w: int, x: torch.Tensor, version: int) -> None:
        """Hand worker w the iterate x (master version ``version``) and ask for one gradient: copy x to its slot,
        write the version, then bump its request sequence number (the store a spinning worker waits for), then
        wake it (it may be blocked)."""
        self._x_slots[w].copy_(x)
        ctl, row = self._ctl, w * ROW
        ctl[row + VERSION] = version
        ctl[row + SEQ] += 1
        if len(self.procs) == 1 and not self._spin_s:
            try:
                self.conns[w].send_bytes(b"C")
            except OSError:
                pass  # the worker is gone; its sentinel reports it
        else:
            os.write(self.wakes[w][1], _ONE)

    def restart(self, w: int, x: torch.Tensor, version: int) -> None:
        """A stop: hand worker w, busy with an older request, the iterate x (master version ``version``) as
        :meth:`issue` does, then send it SIGUSR1 so that it abandons its computation (module docstring)."""
        self.issue(w, x, version)
        try:
            os.kill(self.procs[w].pid, signal.SIGUSR1)
        except ProcessLookupError:
            pass  # the worker is gone; its sentinel reports it

    def _replies_in(self) -> list:
        """Spin: the gradients whose done count moved since last seen (read after the count: module docstring)."""
        rep, seen, out = self._rep, self._seen, []
        for w in range(len(seen)):
            done = rep[w * ROW + REPLY_DONE]
            if done != seen[w]:
                seen[w] = done
                if w not in self._dropped:
                    version, loss, compute_s, target_s, sent_s, timing = _REPLY.unpack_from(self._rep_bytes,
                                                                                            w * ROW * 8)
                    out.append(Arrival(w, version, loss, compute_s, target_s, timing, sent_s))
        return out

    def wait(self, timeout: float | None) -> list:
        """Block until a gradient arrives or a worker dies (or ``timeout`` s pass); return the events ([] only when
        the time is up: a wake-up with nothing new -- the master's wake-up fd still counting replies it took while
        spinning -- waits on)."""
        end = None if timeout is None else time.perf_counter() + timeout
        while True:
            events = self._wait_once(None if end is None else max(0.0, end - time.perf_counter()))
            if events or (end is not None and time.perf_counter() >= end):
                return events

    def _wait_once(self, timeout: float | None) -> list:
        ms = None if timeout is None else max(0, math.ceil(timeout * 1000))
        events, seen = [], set()
        if self._spin_s:  # read the shared done counts without sleeping for a while: no system call, no wake-up
            deadline = time.perf_counter() + min(self._spin_s, timeout if timeout is not None else self._spin_s)
            while True:
                events = self._replies_in()
                if events or time.perf_counter() >= deadline:
                    break
            if events:
                return events
        ready = self._poller.poll(ms)
        if self._spin_s:  # replies written before a wake-up or a worker's death are in shared memory now
            events = self._replies_in()
        for fd, _ in ready:
            if self._mwake and fd == self._mwake[0]:
                os.read(fd, 8)  # reset; a reply after this read is seen by the next spin
                continue
            w = self._fd_owner.get(fd)
            if w is None or w in seen:
                continue
            seen.add(w)
            msg = self._read(w, ready=fd != self.procs[w].sentinel)
            if msg is None:
                events.append(Lost(w, describe_exit(self.procs[w])))
            elif msg:
                _, version, loss, compute_s, target_s, sent_s, timing, seq = _GRAD.unpack(msg)
                events.append(Arrival(w, version, loss, compute_s, target_s, timing, sent_s,
                                      seq != self._ctl[w * ROW + SEQ]))
                if fd == self.procs[w].sentinel:  # it sent its last gradient, then died
                    events.append(Lost(w, describe_exit(self.procs[w])))
        return events

    def gradient(self, w: int) -> torch.Tensor:
        """Worker w's last gradient (a view of its shared slot; valid until the next ``issue`` to w)."""
        return self._g_slots[w]

    def drop(self, w: int) -> None:
        """Stop listening to worker w and kill its process (it is lost: dead, or silent too long)."""
        self._dropped.add(w)
        for fd in (self.conns[w].fileno(), self.procs[w].sentinel):
            if self._fd_owner.pop(fd, None) is not None:
                self._poller.unregister(fd)
        p = self.procs[w]
        if p.is_alive():
            p.kill()
        p.join(5.0)

    def hold(self):
        """Evaluation: workers simply wait on their pipes, without a timeout."""
        return nullcontext()

    def close(self) -> None:
        """Tell every worker to stop, wait for them (then SIGTERM, then SIGKILL), close the pipes. A start-up that
        failed ends the workers at once (they may still be reading their start-up data). Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            for p, conn in zip(self.procs, self.conns):
                if self._started and p.is_alive():
                    try:
                        conn.send_bytes(b"S")
                    except OSError:
                        pass
        finally:
            if not self._started:
                for conn in self.conns:
                    conn.close()
            reap(self.procs, grace_s=5.0 if self._started else 0.0)
            for conn in self.conns:
                conn.close()
            for fd in {fd for pair in self.wakes + ([self._mwake] if self._mwake else []) for fd in pair}:
                os.close(fd)
            self._poller.close()

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]


def run(problem, rule, settings, recorder, costs=None):
    """Train with P worker processes on this machine; see the module docstring.

    Args:
        problem, rule, settings, recorder, costs: as for every engine (experiments/engines/__init__.py); ``costs``
            gives emulated compute its base seconds.

    Returns:
        EngineResult on the wall clock (``clock=wall``), ``handoff`` = ``spin`` or ``block``; status ``failed``
        with a message when a lost worker ended the run; ``message`` names the workers lost in an async run that
        went on without them.

    Raises:
        ConfigError: ``engine.handoff=spin`` on a CPU whose memory ordering does not allow it.
        experiments.training.recorder.Diverged: the loss diverged.
        KeyboardInterrupt: Ctrl-C or SIGTERM (all workers are ended first).
    """
    e = settings.engine
    P = settings.workers
    if P == 0:  # the authors' master alone: no process to start, no message to move
        return drive(problem, rule, settings, recorder, NoWorkers())
    specs = with_emulation([WorkerSpec.of(settings, w, pin=True) for w in range(P)], settings,
                           *((costs.base_s, costs.xi) if costs is not None else (None, None)))
    # stops (a policy's restart) need the blocking hand-off's one message per reply (module docstring)
    handoff = "block" if settings.algorithm.policy.stops and e.handoff == "auto" else choose_handoff(e.handoff, specs)
    x0 = problem.init_params(settings.seed)
    with sigterm_as_interrupt():
        transport = None
        try:
            transport = SharedMemoryTransport(problem, specs, x0, e.start_method, handoff)
            LAST_WORKER_PIDS[:] = transport.pids
            beside = handoff == "block" and P == 1 and e.colocate
            with master_beside(specs[0].cpus if beside else None):
                result = drive(problem, rule, settings, recorder, transport)
            result.handoff = handoff
            return result
        finally:
            if transport is not None:
                transport.close()
