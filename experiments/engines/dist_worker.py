"""The distributed engine's worker ranks (experiments/engines/distributed.py): a locally started worker process
(:func:`spawned_worker`) or a torchrun rank >= 1 (:func:`serve`) answers the master's messages until it says stop."""

from __future__ import annotations

import datetime
import os
import signal
import sys
import time
import traceback

import torch
import torch.distributed as dist

from experiments.engines.dist_group import (
    STARTUP_TIMEOUT_S,
    check_world,
    choose_backend,
    destroy_group,
    gloo_interface,
    init_group,
    rank_device,
)
from experiments.engines.dist_wire import (
    BYE,
    GRADIENT,
    HEADER,
    HOLD,
    INT_OF,
    STOP,
    get_header,
    put_header,
    put_text,
    put_time,
)
from experiments.engines.emulation import with_emulation, worker_emulator
from experiments.engines.startup import load_problem, receive, report_worker_error
from experiments.engines.workers import WorkerSpec, worker_process_setup
from experiments.training.sampling import BatchStream


class Stopped(Exception):
    """Raised in a locally started worker by its SIGUSR1 handler: the master superseded its request (a stop)."""


def serve_loop(problem, spec: WorkerSpec, buf_device: torch.device, stream, requests=None) -> None:
    """Worker rank ``spec.worker + 1``: answer ``compute`` with one gradient (next minibatch of ``stream``, drawn while
    waiting), ``hold`` with nothing, ``stop`` with ``bye``; errors go to the master as an ``error`` message, then
    raise. ``requests``: the shared (P,) int64 count of ``compute`` messages the master has sent each worker (locally
    started workers; None under torchrun): a ``compute`` it has superseded is skipped, and SIGUSR1 while computing a
    superseded one abandons it for the next message, on the same minibatch (module docstring, stops).

    The receive of the master's next message is always posted before this worker sends (two alternating
    buffers): gloo delivers a message whose receive is already posted much faster."""
    x0 = problem.init_params(0)
    emu = worker_emulator(spec)
    rbufs = [torch.zeros(HEADER + x0.numel(), dtype=x0.dtype, device=buf_device) for _ in range(2)]
    sbuf = torch.zeros_like(rbufs[0])
    i = 0
    sent = memoryview(requests.numpy()).cast("B").cast("q") if requests is not None else None
    me, received = spec.worker, 0  # compute messages received
    computing = [0]  # the number of the compute message being served; 0 while not computing

    def on_stop(signum, frame) -> None:
        current = computing[0]
        if current and sent[me] > current:
            computing[0] = 0  # raise once
            raise Stopped

    if sent is not None:
        signal.signal(signal.SIGUSR1, on_stop)
    pending = dist.irecv(rbufs[0], src=0)
    idx = stream.next()  # the next gradient's minibatch, drawn while waiting: off the round trip's critical path
    try:
        while True:
            pending.wait()
            cur, i = rbufs[i], 1 - i
            pending = dist.irecv(rbufs[i], src=0)
            cmd, version, _, _ = get_header(cur)
            if cmd == HOLD:
                continue
            if cmd == STOP:
                put_header(sbuf, BYE)
                dist.send(sbuf, dst=0)
                return
            received += 1
            spec.fault.maybe_fail(spec.worker, version)
            x = cur[HEADER:]
            if x.device != problem.device:
                x = x.to(problem.device)
            try:
                computing[0] = received  # from here a stop's SIGUSR1 raises Stopped
                if sent is not None and sent[me] > received:
                    raise Stopped  # superseded before it began
                t0 = time.perf_counter()
                loss, g = problem.loss_grad(x, idx)
                sbuf[HEADER:].copy_(g)
                timing = emu.finish(t0)
                computing[0] = 0
            except Stopped:
                computing[0] = 0
                continue  # the next compute message, on the same minibatch
            put_header(sbuf, GRADIENT, version, float(loss))
            sbuf[4], sbuf[5], sbuf[:HEADER].view(INT_OF[sbuf.dtype])[6] = timing
            put_time(sbuf, time.perf_counter())
            dist.send(sbuf, dst=0)
            idx = stream.next()
    except Exception as exc:
        if "Connection" in str(exc) or "closed" in str(exc):
            return  # the master is gone
        traceback.print_exc(file=sys.stderr)
        try:
            put_text(sbuf, f"{type(exc).__name__}: {exc}".splitlines()[0])
            dist.send(sbuf, dst=0)
        except Exception:  # noqa: BLE001, S110 - the master may be gone too
            pass
        raise


def spawned_worker(
    rank: int,
    world: int,
    store_spec: tuple,
    backend: str,
    timeout_s: float,
    tensors: list,
    spec: WorkerSpec,
    conn,
    requests=None,
) -> None:
    """Entry of a locally started worker process (rank >= 1): receive the rest of the problem on ``conn`` (its
    ``tensors`` came with the process; startup.split_problem), say ready, join the process group, serve.
    ``requests``: the shared count of compute messages per worker (stops; :func:`serve_loop`)."""
    worker_process_setup(spec)
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)  # never the default (exit) before serve_loop's handler
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})  # the group's threads start with SIGUSR1 blocked
    try:
        problem = load_problem(tensors, receive(conn.fileno()))
        stream = BatchStream(problem.num_train, spec.batch, spec.seed)  # before joining: start-up is not silence
        conn.send_bytes(b"R")
    except (EOFError, BrokenPipeError, ConnectionResetError):
        return  # the master is gone (or gave up on the start-up)
    except BaseException as exc:  # noqa: BLE001 - reported to the master, then the process exits
        report_worker_error(conn, exc)
    finally:
        conn.close()
    kind, where, port = store_spec
    with gloo_interface("127.0.0.1" if kind in ("file", "memfd") else where):
        if kind == "memfd":
            store = dist.FileStore(f"/proc/self/fd/{where.fd}", world)
        elif kind == "file":
            store = dist.FileStore(where, world)
        else:
            store = dist.TCPStore(
                where, port, world, is_master=False, timeout=datetime.timedelta(seconds=STARTUP_TIMEOUT_S)
            )
        init_group(backend, timeout_s, store=store, rank=rank, world_size=world)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGUSR1})  # this (main) thread takes the stops
    try:
        serve_loop(problem, spec, rank_device(backend, problem.device), stream, requests)
    finally:
        destroy_group()


def serve(problem, settings, costs=None) -> None:
    """Worker side under torchrun (RANK >= 1): join the process group, compute gradients until the master says
    stop, leave. Writes nothing. ``costs``: as for :func:`run` (emulated compute's base seconds).

    Raises:
        ConfigError: WORLD_SIZE is not workers + 1.
    """
    check_world(settings)
    rank = int(os.environ["RANK"])
    spec = with_emulation(
        [WorkerSpec.of(settings, rank - 1)],
        settings,
        *((costs.base_s, costs.xi) if costs is not None else (None, None)),
    )[0]
    worker_process_setup(spec)
    stream = BatchStream(problem.num_train, spec.batch, spec.seed)
    backend = choose_backend(settings, problem.device)
    with gloo_interface(os.environ["MASTER_ADDR"]):
        init_group(backend, settings.engine.timeout_s, init_method="env://", rank=rank, world_size=settings.workers + 1)
    try:
        serve_loop(problem, spec, rank_device(backend, problem.device), stream)
    finally:
        destroy_group()
