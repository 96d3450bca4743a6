"""How a worker gets its start-up data without ever blocking the master. With the spawn start
method, multiprocessing writes a new process's pickled arguments into a pipe whose read end the master itself
still holds until the write is done: when the child dies before reading them all (more than a pipe holds: 64 KiB),
the write never fails and never ends. So the Process arguments stay small (the worker's spec, shared buffers,
file descriptors, and the problem's tensors, which travel as shared-memory handles), and the rest of the problem
(numpy arrays, Python objects) goes afterwards through the worker's own pipe, whose child end the master has
closed: :func:`deliver` writes it without blocking, watching each worker's process sentinel, and a worker that
dies is reported at once (:class:`experiments.errors.WorkerLost`, naming the worker and how it died)."""

from __future__ import annotations

import io
import os
import pickle
import select
import struct
import sys
import time
import traceback
from multiprocessing import reduction
from multiprocessing.connection import wait as mp_wait

import torch

from experiments.engines.processes import describe_exit
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
        ready = mp_wait(
            [conns[w] for w in waiting] + [procs[w].sentinel for w in waiting], max(0.0, deadline - time.monotonic())
        )
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
