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
process sentinel); a silent one is killed after ``engine.timeout_s`` (while starting, one that stalls or takes too
long fails the run: :class:`experiments.engines.startup.StartupWatch`). Ctrl-C or SIGTERM in the master: every worker
is stopped (then terminated, then killed) before the exception propagates; a worker whose master dies sees its pipe
close and exits.
"""

from __future__ import annotations

import math
import os
import signal
import time
from contextlib import nullcontext

import torch

from experiments.engines.driver import drive
from experiments.engines.emulation import with_emulation
from experiments.engines.processes import describe_exit, process_context, reap, sigterm_as_interrupt
from experiments.engines.shm_handoff import choose_handoff, master_beside
from experiments.engines.shm_layout import (
    GRAD_MSG,
    ONE,
    REPLY,
    REPLY_DONE,
    ROW,
    SEQ,
    SPIN_S,
    VERSION,
    ReadPoller,
    wake_channel,
    words,
)
from experiments.engines.shm_worker import worker_main
from experiments.engines.startup import (
    PassedFd,
    StartupWatch,
    await_ready,
    deliver,
    split_problem,
    start_processes,
)
from experiments.engines.transport import Arrival, Lost, NoWorkers
from experiments.engines.workers import WorkerSpec

LAST_WORKER_PIDS: list[int] = []  # process ids of the latest run's workers (tests check that none is left)


class SharedMemoryTransport:
    """Starts P worker processes and moves iterates/gradients through shared buffers (see the module docstring).

    Args:
        problem: the run's problem (sent to every worker at start).
        specs: one :class:`WorkerSpec` per worker.
        x0: an iterate like the master's (shape (d,), dtype and device of the buffers).
        start_method: ``spawn`` or ``forkserver``.
        handoff: ``spin`` or ``block`` (see :func:`choose_handoff`; the module docstring).
        timeout_s: ``engine.timeout_s``: bounds a worker's silence while it starts (startup.StartupWatch).

    Raises:
        WorkerLost: a worker did not come up (died, or stalled or out of time while starting: startup.StartupWatch).
        RuntimeError: a worker raised (its message is included).
    """

    cuts_off_silent = True

    def __init__(
        self,
        problem,
        specs: list[WorkerSpec],
        x0: torch.Tensor,
        start_method: str = "spawn",
        handoff: str = "block",
        timeout_s: float = 60.0,
    ) -> None:
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
        self._ctl = words(self.ctrl)
        self.wakes = [wake_channel() for _ in range(P)]
        # spin: replies through shared memory (row w: version, loss, compute_s, target_s, timing code, done count) and
        # one wake-up channel for the master, written after every reply
        self.replies = torch.zeros(P, ROW, dtype=torch.int64).share_memory_() if self._spin_s else None
        self._rep = words(self.replies) if self.replies is not None else None
        self._rep_bytes = self._rep.cast("B") if self._rep is not None else None
        self._seen = [0] * P
        self._dropped: set[int] = set()
        self._mwake = wake_channel() if self._spin_s else None
        ctx = process_context(start_method, problem)
        self.procs, self.conns = [], []
        self._poller = ReadPoller()  # pipe ends and process sentinels (registered once: cheaper than mp_wait)
        self._fd_owner: dict[int, int] = {}
        self._closed = False
        self._started = False
        tensors, payload = split_problem(problem)  # the Process arguments stay small: see workers.py (start-up)
        children = []
        try:
            for spec in specs:
                parent, child = ctx.Pipe(duplex=True)
                wake = PassedFd(self.wakes[spec.worker][0])
                p = ctx.Process(
                    target=worker_main,
                    args=(
                        spec,
                        tensors,
                        self.xs,
                        self.grads,
                        self.ctrl,
                        wake,
                        child,
                        self._spin_s,
                        self.replies,
                        PassedFd(self._mwake[1]) if self._mwake else None,
                    ),
                    name=f"apam-worker-{spec.worker}",
                    daemon=True,
                )
                self.procs.append(p)
                self.conns.append(parent)
                children.append(child)
            try:
                start_processes(self.procs, start_method, timeout_s)
            finally:
                for child in children:
                    child.close()  # the master keeps no copy of the child's end: its death breaks the pipe
            for w, (p, parent) in enumerate(zip(self.procs, self.conns)):
                for fd in (parent.fileno(), p.sentinel):
                    self._poller.register(fd)
                    self._fd_owner[fd] = w
            if self._mwake:
                self._poller.register(self._mwake[0])
            watch = StartupWatch(self.procs, timeout_s)
            deliver(payload, [c.fileno() for c in self.conns], self.procs, watch)
            await_ready(self.conns, self.procs, watch)
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
            os.write(self.wakes[w][1], ONE)

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
                    version, loss, compute_s, target_s, sent_s, timing = REPLY.unpack_from(self._rep_bytes, w * ROW * 8)
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
                _, version, loss, compute_s, target_s, sent_s, timing, seq = GRAD_MSG.unpack(msg)
                events.append(
                    Arrival(w, version, loss, compute_s, target_s, timing, sent_s, seq != self._ctl[w * ROW + SEQ])
                )
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
    specs = with_emulation(
        [WorkerSpec.of(settings, w, pin=True) for w in range(P)],
        settings,
        *((costs.base_s, costs.xi) if costs is not None else (None, None)),
    )
    # stops (a policy's restart) need the blocking hand-off's one message per reply (module docstring)
    handoff = "block" if settings.algorithm.policy.stops and e.handoff == "auto" else choose_handoff(e.handoff, specs)
    x0 = problem.init_params(settings.seed)
    with sigterm_as_interrupt():
        transport = None
        try:
            transport = SharedMemoryTransport(problem, specs, x0, e.start_method, handoff, float(e.timeout_s))
            LAST_WORKER_PIDS[:] = transport.pids
            beside = handoff == "block" and P == 1 and e.colocate
            with master_beside(specs[0].cpus if beside else None):
                result = drive(problem, rule, settings, recorder, transport)
            result.handoff = handoff
            return result
        finally:
            if transport is not None:
                transport.close()
