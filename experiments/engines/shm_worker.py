"""The shared_memory engine's worker process (experiments/engines/shared_memory.py): it receives the problem,
then serves the master's requests (spinning or blocking) until its pipe closes; SIGUSR1 abandons a superseded
request (a stop)."""

from __future__ import annotations

import os
import select
import signal
import time

import torch

from experiments.engines.emulation import worker_emulator
from experiments.engines.shm_layout import GRAD_MSG, ONE, REPLY, REPLY_DONE, ROW, SEQ, VERSION, words
from experiments.engines.startup import PassedFd, load_problem, receive, report_worker_error
from experiments.engines.workers import WorkerSpec, worker_process_setup
from experiments.training.sampling import BatchStream


class Stopped(Exception):
    """Raised in a worker by its SIGUSR1 handler: the master superseded the request being computed (a stop)."""


def worker_main(
    spec: WorkerSpec,
    tensors: list,
    xs: torch.Tensor,
    grads: torch.Tensor,
    ctrl: torch.Tensor,
    wake: PassedFd,
    conn,
    spin_s: float = 0.0,
    replies: torch.Tensor | None = None,
    master_wake: PassedFd | None = None,
) -> None:
    """Body of worker process ``spec.worker``: receive the rest of the problem on the pipe (its ``tensors`` came
    with the process; startup.split_problem), say ready; then wait until ``ctrl[w, SEQ]`` moves past the last request
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
        x, g_slot, ctl = xs[w], grads[w], words(ctrl)
        seq_at, version_at, row_at, done_at = w * ROW + SEQ, w * ROW + VERSION, w * ROW * 8, w * ROW + REPLY_DONE
        reply = words(replies) if replies is not None else None  # spin: this worker's row of the replies block
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
                conn.send_bytes(
                    GRAD_MSG.pack(b"G", version, float(loss), compute_s, target_s, time.perf_counter(), timing, served)
                )
            else:  # the fields, then the count the master spins on (program order; see the module docstring)
                REPLY.pack_into(
                    reply_bytes, row_at, version, float(loss), compute_s, target_s, time.perf_counter(), timing
                )
                reply[done_at] += 1
                os.write(master_wake.fd, ONE)  # wakes the master if it has stopped spinning and blocked
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
