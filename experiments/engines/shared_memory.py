"""The shared-memory engine: a master (this process) and P worker processes on one machine, wall clock (issue 5).

Processes: ``torch.multiprocessing`` with ``engine.start_method`` (``spawn`` by default, or ``forkserver``), so
nothing the calling process did before (a serial run, threads, CUDA) leaks into the workers. The problem object
is sent to each worker once, at start; its torch tensors travel through shared memory, so the data is neither
reloaded nor copied (numpy/scipy members are copied once per worker).

Buffers: two preallocated shared tensors of shape (P, d) in the problem's dtype: ``xs[w]`` is the iterate the
master last handed to worker w, ``grads[w]`` the gradient w computed there; a shared int64 vector holds the
version of each ``xs[w]``. The master writes ``xs[w]`` only while w is idle, and w writes ``grads[w]`` only while
the master waits for it, so no lock is needed (the system calls that hand over the turn order the memory
accesses). Only small messages go through the per-worker pipes: worker -> master ``(gradient, version, loss)``,
``ready``, or an error line; master -> worker ``stop``. The master wakes a worker for its next gradient through
an eventfd (a pipe of its own where eventfd is missing), not the message pipe: a pipe write asks the kernel to
run the woken worker on the writer's core (a "synchronous" wake-up), where it then shares one core with the
master while the other core idles; with P = 2 and trivially cheap gradients that capped the master at about
4,000 updates/s on our 2-core machine, against 5,400-6,200 with the eventfd (benchmarks/bench_engines.py). With
P = 1 the master has nothing to do meanwhile, so there the message pipe (the faster wake-up) is used. The
optimizer state lives only in the master (:class:`experiments.master.Master`); the master loop, clock and fault
handling are in :mod:`experiments.engines._driver`.

Workers pin their math threads (``engine.threads_per_worker``, default 1), are pinned each to its own CPUs where
they fit (``engine.pin_workers``, default true; :func:`experiments.engines._proc.worker_cpus`), and draw minibatches
from their own seeded stream (:func:`experiments.engines._proc.worker_seed`). A dead worker is seen at once (its
process sentinel); a silent one is killed after ``engine.timeout_s``. Ctrl-C or SIGTERM in the master: every worker
is stopped (then terminated, then killed) before the exception propagates; a worker whose master dies sees its pipe
close and exits.
"""
from __future__ import annotations

import math
import os
import select
import struct
import sys
import time
import traceback
from contextlib import nullcontext
from multiprocessing import reduction
from multiprocessing.connection import wait as mp_wait

import torch

from experiments.engines._driver import Arrival, Lost, drive
from experiments.engines.emulation import with_emulation, worker_emulator
from experiments.engines._proc import (WorkerSpec, describe_exit, process_context, reap, sigterm_as_interrupt,
                                       worker_batches, worker_process_setup)
from experiments.errors import ConfigError, WorkerLost
from experiments.sampling import BatchStream

_GRAD = struct.Struct("<cqdddb")  # b"G", version, minibatch loss, compute_s, target_s, overran (emulation.py)
STARTUP_TIMEOUT_S = 300.0       # a worker process must be up (imports, problem received) within this
LAST_WORKER_PIDS: list[int] = []  # process ids of the latest run's workers (tests check that none is left)


class _Fd:
    """A file descriptor that travels to a spawned/forkserver child (duplicated there, as multiprocessing does for
    pipes)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __reduce__(self):
        return _rebuild_fd, (reduction.DupFd(self.fd),)


def _rebuild_fd(dup) -> _Fd:
    return _Fd(dup.detach())


_ONE = (1).to_bytes(8, sys.byteorder)


def _wake_channel() -> tuple[int, int]:
    """(read end, write end) of a wake-up channel: one eventfd where the OS has them (both ends the same fd),
    else a pipe. A wake-up is one 8-byte write, read back as 8 bytes."""
    if hasattr(os, "eventfd"):
        fd = os.eventfd(0, os.EFD_CLOEXEC)
        return fd, fd
    return os.pipe()


def _worker_main(spec: WorkerSpec, problem, xs: torch.Tensor, grads: torch.Tensor, ctrl: torch.Tensor, wake: _Fd,
                 conn) -> None:
    """Body of worker process ``spec.worker``: wait for its wake-up, read (version) from ``ctrl[w]``, compute one
    gradient at ``xs[w]`` on the next minibatch of its own stream, write it to ``grads[w]``, report (version, loss)
    on the pipe; until the pipe says stop or closes (the master is gone)."""
    worker_process_setup(spec)
    w = spec.worker
    try:
        stream = BatchStream(problem.num_train, spec.batch, spec.seed)
        x, g_slot, version_of = xs[w], grads[w], ctrl.numpy()
        emu = worker_emulator(spec)
        poller = select.poll()
        poller.register(wake.fd, select.POLLIN)
        poller.register(conn.fileno(), select.POLLIN)
        conn.send_bytes(b"R")
        while True:
            ready = {fd for fd, _ in poller.poll()}
            if conn.fileno() in ready:
                msg = conn.recv_bytes()
                if msg == b"S":
                    break
            elif wake.fd in ready:
                os.read(wake.fd, 8)
            else:
                continue
            version = int(version_of[w])
            spec.fault.maybe_fail(w, version)
            t0 = time.perf_counter()
            loss, g = problem.loss_grad(x, stream.next())
            g_slot.copy_(g)
            compute_s, target_s, overran = emu.finish(t0)
            conn.send_bytes(_GRAD.pack(b"G", version, float(loss), compute_s, target_s, overran))
    except (EOFError, BrokenPipeError, ConnectionResetError):
        return  # the master is gone
    except BaseException as exc:  # noqa: BLE001 - reported to the master, then the process exits
        traceback.print_exc(file=sys.stderr)
        try:
            conn.send_bytes(b"E" + f"{type(exc).__name__}: {exc}".splitlines()[0].encode()[:2000])
        except OSError:
            pass
        sys.exit(1)
    finally:
        conn.close()
        os.close(wake.fd)


class SharedMemoryTransport:
    """Starts P worker processes and moves iterates/gradients through shared buffers (see the module docstring).

    Args:
        problem: the run's problem (sent to every worker at start).
        specs: one :class:`WorkerSpec` per worker.
        x0: an iterate like the master's (shape (d,), dtype and device of the buffers).
        start_method: ``spawn`` or ``forkserver``.

    Raises:
        WorkerLost: a worker did not come up (died, or not ready within STARTUP_TIMEOUT_S).
        RuntimeError: a worker raised (its message is included).
    """

    cuts_off_silent = True

    def __init__(self, problem, specs: list[WorkerSpec], x0: torch.Tensor, start_method: str = "spawn") -> None:
        P, d = len(specs), x0.numel()
        self.xs = torch.zeros(P, d, dtype=x0.dtype, device=x0.device)
        self.grads = torch.zeros(P, d, dtype=x0.dtype, device=x0.device)
        if x0.device.type == "cpu":
            self.xs.share_memory_()
            self.grads.share_memory_()
        self._x_slots, self._g_slots = list(self.xs.unbind(0)), list(self.grads.unbind(0))
        self.ctrl = torch.zeros(P, dtype=torch.int64).share_memory_()  # version handed to each worker
        self._version_of = self.ctrl.numpy()
        self.wakes = [_wake_channel() for _ in range(P)]
        ctx = process_context(start_method, problem)
        self.procs, self.conns = [], []
        self._owner: dict = {}  # pipe end or process sentinel -> worker id (start-up)
        self._poller = select.poll()  # the same, polled during the run (registered once: cheaper than mp_wait)
        self._fd_owner: dict[int, int] = {}
        self._closed = False
        try:
            for spec in specs:
                parent, child = ctx.Pipe(duplex=True)
                wake = _Fd(self.wakes[spec.worker][0])
                p = ctx.Process(target=_worker_main, args=(spec, problem, self.xs, self.grads, self.ctrl, wake, child),
                                name=f"apam-worker-{spec.worker}", daemon=True)
                p.start()
                child.close()
                self.procs.append(p)
                self.conns.append(parent)
                self._owner[parent] = spec.worker
                self._owner[p.sentinel] = spec.worker
                for fd in (parent.fileno(), p.sentinel):
                    self._poller.register(fd, select.POLLIN)
                    self._fd_owner[fd] = spec.worker
            self._await_ready()
        except BaseException:
            self.close()
            raise

    def _await_ready(self) -> None:
        waiting = set(range(len(self.procs)))
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while waiting:
            ready = mp_wait([self.conns[w] for w in waiting] + [self.procs[w].sentinel for w in waiting],
                            max(0.0, deadline - time.monotonic()))
            if not ready:
                raise WorkerLost(f"worker(s) {sorted(waiting)} not ready within {STARTUP_TIMEOUT_S:g} s")
            for obj in ready:
                w = self._owner[obj]
                if w not in waiting:
                    continue
                msg = self._read(w)
                if msg is None:
                    raise WorkerLost(f"worker {w} died while starting ({describe_exit(self.procs[w])})")
                if msg != b"R":
                    raise RuntimeError(f"worker {w} sent {msg[:40]!r} instead of ready")
                waiting.discard(w)

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
        """Hand worker w the iterate x (master version ``version``) and ask for one gradient."""
        self._x_slots[w].copy_(x)
        self._version_of[w] = version
        if len(self.procs) == 1:
            try:
                self.conns[w].send_bytes(b"C")
            except OSError:
                pass  # the worker is gone; its sentinel reports it
        else:
            os.write(self.wakes[w][1], _ONE)

    def wait(self, timeout: float | None) -> list:
        """Block until a gradient arrives or a worker dies (or ``timeout`` s pass); return the events."""
        ms = None if timeout is None else max(0, math.ceil(timeout * 1000))
        events, seen = [], set()
        for fd, _ in self._poller.poll(ms):
            w = self._fd_owner.get(fd)
            if w is None or w in seen:
                continue
            seen.add(w)
            msg = self._read(w, ready=fd != self.procs[w].sentinel)
            if msg is None:
                events.append(Lost(w, describe_exit(self.procs[w])))
            elif msg:
                _, version, loss, compute_s, target_s, overran = _GRAD.unpack(msg)
                events.append(Arrival(w, version, loss, compute_s, target_s, bool(overran)))
                if fd == self.procs[w].sentinel:  # it sent its last gradient, then died
                    events.append(Lost(w, describe_exit(self.procs[w])))
        return events

    def gradient(self, w: int) -> torch.Tensor:
        """Worker w's last gradient (a view of its shared slot; valid until the next ``issue`` to w)."""
        return self._g_slots[w]

    def drop(self, w: int) -> None:
        """Stop listening to worker w and kill its process (it is lost: dead, or silent too long)."""
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
        """Tell every worker to stop, wait for them (then SIGTERM, then SIGKILL), close the pipes. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            for p, conn in zip(self.procs, self.conns):
                if p.is_alive():
                    try:
                        conn.send_bytes(b"S")
                    except OSError:
                        pass
        finally:
            reap(self.procs)
            for conn in self.conns:
                conn.close()
            for fd in {fd for pair in self.wakes for fd in pair}:
                os.close(fd)

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]


def run(problem, rule, cfg, recorder):
    """Train with P worker processes on this machine; see the module docstring.

    Args:
        problem, rule, cfg, recorder: as for every engine (experiments/engines/__init__.py).

    Returns:
        EngineResult on the wall clock (``clock=wall``); status ``failed`` with a message when a lost worker ended
        the run; ``message`` names the workers lost in an async run that went on without them.

    Raises:
        ConfigError: ``engine.start_method`` is not spawn or forkserver.
        experiments.recorder.Diverged: the loss diverged.
        KeyboardInterrupt: Ctrl-C or SIGTERM (all workers are ended first).
    """
    method = cfg.engine.get("start_method") or "spawn"
    if method not in ("spawn", "forkserver"):
        raise ConfigError(f"engine.start_method={method}: must be spawn or forkserver")
    P = int(cfg.workers)
    specs = with_emulation([WorkerSpec.from_cfg(cfg, w, pin=True) for w in range(P)], cfg, problem)
    x0 = problem.init_params(cfg.seed)
    with sigterm_as_interrupt():
        transport = None
        try:
            transport = SharedMemoryTransport(problem, specs, x0, method)
            LAST_WORKER_PIDS[:] = transport.pids
            return drive(problem, rule, cfg, recorder, transport, worker_batches(cfg))
        finally:
            if transport is not None:
                transport.close()

