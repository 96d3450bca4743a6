"""The distributed engine: torch.distributed master-worker, rank 0 the master, ranks 1..P the workers.

Launch:
- ``torchrun --nproc_per_node=P+1 -m experiments.run engine=distributed workers=P ...`` (and across nodes with
  ``--nnodes``/``--rdzv-endpoint``): every rank runs the runner; rank 0 trains and writes the results, ranks >= 1
  call :func:`serve` and write nothing. Each rank builds the problem itself.
- ``python -m experiments.run engine=distributed workers=P ...``: this process is rank 0 and starts P local worker
  processes (``engine.start_method``, forkserver by default) that receive the problem at start (tensors through shared
  memory) and are pinned to their own CPUs where they fit (``engine.pin_workers``, as in shared_memory). With
  ``engine.master_addr`` on loopback (the default) the rendezvous is a file store on an anonymous in-memory file
  (nothing on disk to clean up, even when the master is killed) and gloo binds to the loopback interface: nothing
  listens beyond this machine. Otherwise a TCP store on ``master_addr:master_port`` (a free port when that one is
  taken). Start-up as in shared_memory: a worker that dies before it is ready fails the run at once
  (:mod:`experiments.engines.workers`, start-up), one that stalls or takes too long at its bound
  (:class:`experiments.engines.startup.StartupWatch`); one that dies between saying ready and joining the group is seen
  when the group's start-up timeout (300 s) ends (a stop signal ends that wait at once: dist_group.init_group).

Backend: ``engine.backend``: ``gloo``, ``nccl``, or ``auto`` = nccl for sync where the problem is on CUDA and every
rank has its own GPU, else gloo. Async needs receive-from-any-worker, which this engine builds from one receiving
thread per worker (each waits on the ``irecv(src=w)`` posted when w was handed work) feeding one queue; sync
uses the same point-to-point messages (P sends of x, P receives). Receives name their source because gloo's
receive-from-any-source does not notice a dead peer until the timeout, while a receive from that peer fails at
once (a broken connection), and the others carry on.

Messages: one flat tensor of ``HEADER + d`` entries in the problem's dtype, both ways: header (command, version,
loss, length, and for a gradient its compute seconds, target seconds, timing code (emulation.py) and the time it
was sent) then x or g.
Master -> worker: ``compute`` (x at a version), ``hold`` (the master is busy
evaluating; sent every ``timeout_s / 4`` s so that a waiting worker's receive does not time out), ``stop``.
Worker -> master: ``gradient`` (version, loss, g), ``bye`` (answer to stop: all ranks leave together), ``error``
(its message as bytes). Every send is waited on before its buffer is reused and before the end. Each side posts
the receive of the peer's next message before sending to it: gloo delivers into an already posted receive much
faster than into one posted after the message came (benchmarks/bench_engines.py).

Stops (:meth:`DistTransport.restart`, a staleness policy's ``restart``; locally started workers only: the settings
refuse stops under torchrun, whose ranks may be on other machines): the master counts every ``compute`` it sends to
worker w in a shared int64 block (``requests[w]``, shared memory with the worker), sends the new ``compute`` (no
new receive is posted: the one outstanding takes whichever reply comes first), then SIGUSR1. The worker numbers
the ``compute`` messages it receives; its handler raises only while it computes and only when ``requests[w]`` is
past the one being computed, and a ``compute`` that is already superseded when it arrives is skipped. A reply whose
version is older than the latest request's is stale: the master posts a receive for the next reply and discards
it unread. The worker blocks SIGUSR1 while the process group starts, so gloo's own threads never take it.

NCCL (sync only) uses the same code with the buffers on each rank's GPU; the tests run gloo only (they need no
GPU).

Timeouts: the process group's timeout is ``engine.timeout_s``; a receive that waits longer raises, and the run
fails with WorkerLost (a silent peer breaks gloo's whole context, so the others cannot go on); a worker whose
master is gone gets a connection error at once and exits.

The master loop (work hand-out, staleness, wall clock, lost workers) is :mod:`experiments.engines.driver`.
"""

from __future__ import annotations

import os
import queue
import signal
import threading
import time
from contextlib import contextmanager

import torch
import torch.distributed as dist

from experiments.engines.dist_group import (
    STARTUP_TIMEOUT_S,
    check_rendezvous,
    check_world,
    choose_backend,
    destroy_group,
    gloo_interface,
    init_group,
    rank_device,
    store_for_local,
    torchrun_rank,
)
from experiments.engines.dist_wire import (
    COMPUTE,
    ERROR,
    GRADIENT,
    HEADER,
    HOLD,
    INT_OF,
    STOP,
    get_header,
    get_text,
    get_time,
    put_header,
)
from experiments.engines.dist_worker import spawned_worker
from experiments.engines.driver import drive
from experiments.engines.emulation import with_emulation
from experiments.engines.processes import describe_exit, process_context, reap, sigterm_as_interrupt
from experiments.engines.startup import StartupWatch, await_ready, deliver, split_problem, start_processes
from experiments.engines.transport import Arrival, Lost, NoWorkers
from experiments.engines.workers import WorkerSpec
from experiments.errors import ConfigError, WorkerLost
from experiments.log import get_logger

log = get_logger(__name__)

LAST_WORKER_PIDS: list[int] = []  # process ids of the latest locally started workers (tests check none is left)


class DistTransport:
    """Rank 0's side: per-worker send and receive buffers, one receiving thread per worker (see module docstring).

    Args:
        P: number of workers (ranks 1..P); x0: an iterate like the master's; timeout_s: ``engine.timeout_s``;
        buf_device: where the message buffers live (CPU for gloo, this rank's GPU for nccl);
        procs: the local worker processes when this process started them (their exit codes explain a loss);
        requests: with local workers, the shared (P,) int64 count of compute messages sent to each (stops).
    """

    cuts_off_silent = False

    def __init__(
        self, P: int, x0: torch.Tensor, timeout_s: float, buf_device: torch.device, procs=(), requests=None
    ) -> None:
        d = x0.numel()
        self.P, self.timeout_s, self.procs = P, float(timeout_s), list(procs)
        self._sent = memoryview(requests.numpy()).cast("B").cast("q") if requests is not None else None
        self._latest = [0] * P  # the version of the latest compute sent to each worker
        self._posted = [0] * P  # receives posted for each worker and not yet converted

        def mk():
            return torch.zeros(HEADER + d, dtype=x0.dtype, device=buf_device)

        self.sbuf = [mk() for _ in range(P)]
        self.rbuf = [mk() for _ in range(P)]
        self.hold_buf = mk()
        put_header(self.hold_buf, HOLD)
        self.gbuf = torch.zeros(d, dtype=x0.dtype, device=x0.device) if buf_device != x0.device else None
        self.sends: list = [None] * P
        self.events: queue.SimpleQueue = queue.SimpleQueue()
        self.expect = [queue.SimpleQueue() for _ in range(P)]
        self.live = set(range(P))
        self.pending: list = []
        self._closed = False
        self.threads = [
            threading.Thread(target=self._receiver, args=(w,), daemon=True, name=f"apam-recv-{w}") for w in range(P)
        ]
        for t in self.threads:
            t.start()

    def _receiver(self, w: int) -> None:
        """Thread: wait for the receives that ``issue`` posted for worker w; report each arrival or the loss."""
        while True:
            work = self.expect[w].get()
            if work is None:
                return
            try:
                work.wait()
            except Exception as exc:  # noqa: BLE001 - a broken connection or a timeout: reported as a loss
                self.events.put(("lost", w, str(exc).splitlines()[0][-300:]))
                return
            self.events.put(("msg", w))

    def _post_recv(self, w: int) -> bool:
        """Post the receive of w's next message (before sending to w: see serve_loop) and hand it to w's thread."""
        try:
            self.expect[w].put(dist.irecv(self.rbuf[w], src=w + 1))
            self._posted[w] += 1
            return True
        except Exception as exc:  # noqa: BLE001 - the peer is gone
            self.pending.append(Lost(w, self._why(w, str(exc))))
            return False

    def _why(self, w: int, text: str) -> str:
        if self.procs:
            self.procs[w].join(1.0)
            if self.procs[w].exitcode is not None:
                return describe_exit(self.procs[w])
        return "connection lost" if ("Connection" in text or "closed" in text) else text

    def _wait_send(self, w: int) -> bool:
        """Wait for the previous send to w (its buffer is reused next); False (and a Lost event) if w is gone."""
        work, self.sends[w] = self.sends[w], None
        if work is None:
            return True
        try:
            work.wait()
            return True
        except Exception as exc:  # noqa: BLE001 - the peer is gone
            self.pending.append(Lost(w, self._why(w, str(exc))))
            return False

    def _send(self, w: int, buf: torch.Tensor) -> bool:
        try:
            self.sends[w] = dist.isend(buf, dst=w + 1)
            return True
        except Exception as exc:  # noqa: BLE001 - the peer is gone
            self.pending.append(Lost(w, self._why(w, str(exc))))
            return False

    # ------------------------------------------------------------------ transport interface
    def issue(self, w: int, x: torch.Tensor, version: int) -> None:
        """Send x (master version ``version``) to worker w and expect one gradient back."""
        buf = self._stage_compute(w, x, version)
        if buf is None:
            return
        if self._post_recv(w):
            self._send(w, buf)

    def _stage_compute(self, w: int, x: torch.Tensor, version: int) -> torch.Tensor | None:
        """Worker w's send buffer holding x (master version ``version``) under a COMPUTE header, once its previous
        send completed; counts the send. None when w cannot be sent to (its loss is reported by its receive)."""
        if not self._wait_send(w):
            return None
        buf = self.sbuf[w]
        buf[HEADER:].copy_(x)
        put_header(buf, COMPUTE, version)
        self._latest[w] = version
        if self._sent is not None:
            self._sent[w] += 1
        return buf

    def restart(self, w: int, x: torch.Tensor, version: int) -> None:
        """A stop: send worker w, busy with an older compute, x of master version ``version``, then SIGUSR1 (module
        docstring). The receive already posted for w takes whichever of its replies comes first; one is posted now
        only when none is (its old reply already taken, not yet handed to the master loop).

        Raises:
            RuntimeError: the workers were not started by this process (torchrun), so none can be interrupted.
        """
        if self._sent is None or not self.procs:
            raise RuntimeError("engine=distributed: only workers this process started can be stopped")
        buf = self._stage_compute(w, x, version)
        if buf is None:
            return
        if self._posted[w] == 0 and not self._post_recv(w):
            return
        if self._send(w, buf):
            try:
                os.kill(self.procs[w].pid, signal.SIGUSR1)
            except ProcessLookupError:
                pass  # gone: its receive reports it

    def _convert(self, item) -> Arrival | Lost | None:
        if item[0] == "lost":
            w, text = item[1], item[2]
            if "Timed out" in text:  # gloo's context is broken for every peer now: the run cannot go on
                self.drop(w)
                raise WorkerLost(f"worker {w} sent nothing within engine.timeout_s={self.timeout_s:g} s")
            return Lost(w, self._why(w, text))
        w = item[1]
        self._posted[w] -= 1
        cmd, version, loss, length = get_header(self.rbuf[w])
        if cmd == GRADIENT:
            buf = self.rbuf[w]
            timing = int(buf[:HEADER].view(INT_OF[buf.dtype])[6])
            stale = version < self._latest[w]
            arrival = Arrival(w, version, loss, float(buf[4]), float(buf[5]), timing, get_time(buf), stale)
            if stale:  # a stopped compute's reply: the new one's comes next
                self._post_recv(w)
            return arrival
        if cmd == ERROR:
            raise RuntimeError(f"worker {w} failed: {get_text(self.rbuf[w], length)}")
        return None  # a bye

    def wait(self, timeout: float | None) -> list:
        """Block until a worker's message or loss (or ``timeout`` s); return the events."""
        if self.pending:
            out, self.pending = self.pending, []
            return out
        try:
            items = [self.events.get(timeout=timeout)]
        except queue.Empty:
            return []
        while True:
            try:
                items.append(self.events.get_nowait())
            except queue.Empty:
                break
        return [e for e in map(self._convert, items) if e is not None]

    def gradient(self, w: int) -> torch.Tensor:
        """Worker w's last gradient (on the master's device; valid until the next ``issue`` to w)."""
        g = self.rbuf[w][HEADER:]
        return g if self.gbuf is None else self.gbuf.copy_(g)

    def drop(self, w: int) -> None:
        """Worker w is lost: stop sending to it (a local process is killed and reaped: no zombie while the master
        goes on)."""
        self.live.discard(w)
        self.expect[w].put(None)
        if self.procs:
            if self.procs[w].is_alive():
                self.procs[w].kill()
            self.procs[w].join(5.0)

    @contextmanager
    def hold(self):
        """While the master evaluates, send ``hold`` to every live worker each ``timeout_s / 4`` s."""
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(self.timeout_s / 4):
                for w in sorted(self.live):
                    try:
                        dist.send(self.hold_buf, dst=w + 1)
                    except Exception:  # noqa: BLE001, S110 - a lost worker is found by the receive side
                        pass

        t = threading.Thread(target=beat, daemon=True, name="apam-hold")
        t.start()
        try:
            yield
        finally:
            stop.set()
            t.join()

    def close(self) -> None:
        """Send ``stop`` to every live worker, collect each ``bye`` (within timeout_s), wait every send, end the
        receiving threads. Idempotent."""
        if self._closed:
            return
        self._closed = True
        waiting = set()
        for w in sorted(self.live):
            if not self.threads[w].is_alive() or not self._wait_send(w):
                continue
            put_header(self.sbuf[w], STOP)
            if self._post_recv(w) and self._send(w, self.sbuf[w]):
                waiting.add(w)
        deadline = time.monotonic() + self.timeout_s
        while waiting and time.monotonic() < deadline:
            try:
                item = self.events.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            waiting.discard(item[1])
        for w in range(self.P):
            self._wait_send(w)
            self.expect[w].put(None)
        for t in self.threads:
            t.join(1.0)


def run(problem, rule, settings, recorder, costs=None):
    """Train with a torch.distributed master (this process, rank 0) and P worker ranks; see the module docstring.

    Args:
        problem, rule, settings, recorder, costs: as for every engine (experiments/engines/__init__.py); ``costs``
            gives emulated compute its base seconds.

    Returns:
        EngineResult on the wall clock; status ``failed`` with a message when a lost worker ended the run.

    Raises:
        ConfigError: ``engine.backend=nccl`` where it cannot run, or a torchrun world that is not workers + 1.
        experiments.training.recorder.Diverged: the loss diverged.
        KeyboardInterrupt: Ctrl-C or SIGTERM (local workers are ended first).
    """
    e = settings.engine
    P = settings.workers
    if P == 0:  # the authors' master alone: no process to start, no message to move
        return drive(problem, rule, settings, recorder, NoWorkers())
    world = P + 1
    backend = choose_backend(settings, problem.device)
    x0 = problem.init_params(settings.seed)
    procs, conns, cleanup, transport, store, started, requests = [], [], None, None, None, False, None
    with sigterm_as_interrupt():
        try:
            rank = torchrun_rank()
            if rank is not None:
                check_world(settings)
                check_rendezvous()
                if rank != 0:
                    raise ConfigError(f"RANK={rank}: only rank 0 runs the master")
                log.info(
                    f"torchrun: rank 0 of {world} at {os.environ['MASTER_ADDR']}:{os.environ.get('MASTER_PORT', '?')}; "
                    f"waiting up to {max(e.timeout_s, STARTUP_TIMEOUT_S):.0f} s for the other ranks to join"
                )
                with gloo_interface(os.environ["MASTER_ADDR"]):
                    init_group(backend, e.timeout_s, init_method="env://", rank=0, world_size=world)
            else:
                ctx = process_context(e.start_method, problem)
                store, spec, cleanup = store_for_local(e, world)
                tensors, payload = split_problem(problem)  # the Process arguments stay small: see workers.py (start-up)
                specs = with_emulation(
                    [WorkerSpec.of(settings, w, pin=True) for w in range(P)],
                    settings,
                    *((costs.base_s, costs.xi) if costs is not None else (None, None)),
                )
                requests = torch.zeros(P, dtype=torch.int64).share_memory_()  # compute messages sent (stops)
                children = []
                for w in range(P):
                    parent, child = ctx.Pipe(duplex=True)
                    p = ctx.Process(
                        target=spawned_worker,
                        name=f"apam-rank-{w + 1}",
                        daemon=True,
                        args=(w + 1, world, spec, backend, float(e.timeout_s), tensors, specs[w], child, requests),
                    )
                    procs.append(p)
                    conns.append(parent)
                    children.append(child)
                try:
                    start_processes(procs, e.start_method, e.timeout_s)
                finally:
                    for child in children:
                        child.close()  # the master keeps no copy of the child's end: its death breaks the pipe
                LAST_WORKER_PIDS[:] = [p.pid for p in procs]
                watch = StartupWatch(procs, e.timeout_s)
                deliver(payload, [c.fileno() for c in conns], procs, watch)
                await_ready(conns, procs, watch)  # a death from here to joining waits for the group's timeout
                with gloo_interface("127.0.0.1" if spec[0] in ("file", "memfd") else spec[1]):
                    init_group(backend, e.timeout_s, store=store, rank=0, world_size=world)
            started = True
            transport = DistTransport(P, x0, float(e.timeout_s), rank_device(backend, problem.device), procs, requests)
            return drive(problem, rule, settings, recorder, transport)
        finally:
            try:
                if transport is not None:
                    transport.close()
            finally:
                for conn in conns:
                    conn.close()
                destroy_group()
                store = None  # the memfd store's descriptor closes with it
                reap(procs, grace_s=5.0 if started else 0.0)  # a failed start-up ends the workers at once
                if cleanup is not None:
                    cleanup()
