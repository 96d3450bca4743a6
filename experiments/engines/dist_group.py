"""Joining and leaving the distributed engine's process group (experiments/engines/distributed.py): the backend,
the rendezvous store for locally started workers, gloo's network interface on loopback, torchrun's environment, and
each rank's device."""

from __future__ import annotations

import datetime
import os
import shutil
import socket
import tempfile
import threading
import weakref
from contextlib import contextmanager

import torch
import torch.distributed as dist

from experiments.engines.startup import PassedFd
from experiments.errors import ConfigError


def loopback_interface() -> str | None:
    """Name of the loopback network interface (``lo`` on Linux, ``lo0`` on macOS), or None."""
    try:
        names = [n for _, n in socket.if_nameindex()]
    except OSError:
        return None
    return next((n for n in names if n.startswith("lo")), None)


def is_loopback(host: str) -> bool:
    try:
        return socket.gethostbyname(host).startswith("127.")
    except OSError:
        return False


@contextmanager
def gloo_interface(host: str):
    """Bind gloo to the loopback interface while the process group is created, when ``host`` is a loopback
    address and the user has not chosen an interface (``GLOO_SOCKET_IFNAME``)."""
    name = loopback_interface() if is_loopback(host) and "GLOO_SOCKET_IFNAME" not in os.environ else None
    if name:
        os.environ["GLOO_SOCKET_IFNAME"] = name
    try:
        yield
    finally:
        if name:
            os.environ.pop("GLOO_SOCKET_IFNAME", None)


def choose_backend(settings, device: torch.device) -> str:
    """``engine.backend`` resolved: ``auto`` -> nccl for sync on CUDA with a GPU per rank, else gloo.

    Raises:
        ConfigError: nccl asked for an async algorithm or without enough GPUs.
    """
    backend = settings.engine.backend
    world = settings.workers + 1
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    sync = settings.algorithm.protocol == "sync"
    if backend == "auto":
        return "nccl" if sync and device.type == "cuda" and gpus >= world else "gloo"
    if backend == "nccl":
        if not sync:
            raise ConfigError("engine.backend=nccl: NCCL has no receive-from-any-worker; async needs gloo")
        if gpus < world:
            raise ConfigError(f"engine.backend=nccl: needs a GPU per rank ({world}), found {gpus}")
    return backend


STARTUP_TIMEOUT_S = 300.0  # joining the process group (process start-up, imports) may take this long


def init_group(backend: str, timeout_s: float, **kwargs) -> None:
    """Join the process group (``torch.distributed.init_process_group(backend, **kwargs)``) with a start-up timeout
    of ``max(timeout_s, STARTUP_TIMEOUT_S)`` seconds, then set the operations' timeout to ``timeout_s``.

    The join runs in a helper thread while the calling thread waits on it in steps of 0.1 s, so that a stop signal
    (Ctrl-C, or SIGTERM / SIGHUP taken as one) is raised at once: blocked in torch's rendezvous, which does not
    return to Python until a peer comes or the timeout ends, the main thread would take it only after up to
    ``STARTUP_TIMEOUT_S`` (a worker that died after saying ready, a torchrun rank that never starts). After such an
    interrupt the helper thread stays blocked until that timeout; it is a daemon and does not hold up the exit.

    Raises:
        KeyboardInterrupt: a stop signal while waiting (the group is not joined).
        RuntimeError, ValueError: what ``init_process_group`` raises (the start-up timeout, a bad store).
    """
    startup = datetime.timedelta(seconds=max(float(timeout_s), STARTUP_TIMEOUT_S))
    interruptible(lambda: dist.init_process_group(backend, timeout=startup, **kwargs), "apam-group-join")
    dist.set_timeout(datetime.timedelta(seconds=float(timeout_s)))


def interruptible(call, name: str):
    """``call()``'s result, the call made in a daemon helper thread while the calling thread waits on it in steps of
    0.1 s, so that a stop signal is raised at once (:func:`init_group` says why); the helper stays blocked after
    such an interrupt and does not hold up the exit.

    Raises:
        KeyboardInterrupt: a stop signal while waiting.
        BaseException: what ``call`` raised.
    """
    result: list = []
    failed: list[BaseException] = []

    def target() -> None:
        try:
            result.append(call())
        except BaseException as exc:  # noqa: BLE001 - re-raised in the calling thread
            failed.append(exc)

    helper = threading.Thread(target=target, name=name, daemon=True)
    helper.start()
    while helper.is_alive():
        helper.join(0.1)
    if failed:
        raise failed[0]
    return result[0]


def under_torchrun() -> bool:
    """Whether this process is a torchrun rank: ``RANK``, ``WORLD_SIZE`` and ``MASTER_ADDR`` all set."""
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ and "MASTER_ADDR" in os.environ


_AS_RANK = "this process runs as a torchrun rank because RANK, WORLD_SIZE and MASTER_ADDR are set"


def torchrun_rank() -> int | None:
    """This process's rank under torchrun (:func:`under_torchrun`), or None when it is not one.

    Raises:
        ConfigError: ``RANK`` or ``WORLD_SIZE`` is not an integer, or ``RANK`` is outside ``0 .. WORLD_SIZE - 1``
            (one line naming the variable; they were a ValueError traceback).
    """
    if not under_torchrun():
        return None
    values = {}
    for name in ("RANK", "WORLD_SIZE"):
        try:
            values[name] = int(os.environ[name])
        except ValueError:
            raise ConfigError(f"{name}={os.environ[name]}: torchrun's {name} must be an integer ({_AS_RANK})") from None
    if not 0 <= values["RANK"] < values["WORLD_SIZE"]:
        raise ConfigError(f"RANK={values['RANK']}: must be in 0 .. WORLD_SIZE - 1 (WORLD_SIZE={values['WORLD_SIZE']})")
    return values["RANK"]


def check_rendezvous() -> None:
    """torchrun's rendezvous variables of a torchrun rank (:func:`under_torchrun`): ``MASTER_ADDR`` names a host
    and ``MASTER_PORT`` is set to a port number (torchrun sets both).

    Raises:
        ConfigError: one line naming the variable (they were a traceback from the rendezvous after the run's folder
            was written, or a waiting line, a traceback and a failed row).
    """
    if not os.environ["MASTER_ADDR"].strip():
        raise ConfigError(
            f"MASTER_ADDR={os.environ['MASTER_ADDR']}: torchrun's MASTER_ADDR must name a host ({_AS_RANK})"
        )
    port = os.environ.get("MASTER_PORT")
    if port is None:
        raise ConfigError(f"MASTER_PORT: not set; torchrun sets it with MASTER_ADDR ({_AS_RANK})")
    if not (port.strip().isascii() and port.strip().isdigit() and 1 <= int(port) <= 65535):
        raise ConfigError(f"MASTER_PORT={port}: torchrun's MASTER_PORT must be a port number, 1 .. 65535 ({_AS_RANK})")


def check_world(settings) -> None:
    world = int(os.environ["WORLD_SIZE"])
    if world != settings.workers + 1:
        raise ConfigError(
            f"workers={settings.workers}: torchrun started {world} processes, needs workers + 1 = "
            f"{settings.workers + 1} (--nproc_per_node x --nnodes)"
        )


def rank_device(backend: str, problem_device: torch.device) -> torch.device:
    if backend == "nccl":
        local = int(os.environ.get("LOCAL_RANK", dist.get_rank() if dist.is_initialized() else 0))
        torch.cuda.set_device(local)
        return torch.device("cuda", local)
    return torch.device("cpu")


def destroy_group() -> None:
    if dist.is_initialized():
        try:
            dist.destroy_process_group()
        except Exception:  # noqa: BLE001, S110 - best effort on the way out
            pass


def store_for_local(engine, world: int):
    """Rank 0's rendezvous store for locally started workers: (store, spec for the workers, clean-up or None).

    On loopback: a FileStore (nothing listens on the network; a TCPStore would listen on every interface) on an
    anonymous in-memory file (Linux ``memfd_create``; the workers open it as ``/proc/self/fd/N``): nothing on disk
    that a killed master would leave behind (the master's descriptor closes with the store object). Where memfd is
    missing, a temporary ``apam-dist-*`` folder, removed by the clean-up (but left behind if the master is killed).
    Elsewhere: a TCPStore on ``master_addr:master_port`` (a free port when that one is taken), made in a helper thread
    (:func:`interruptible`): a stop signal ends the wait for it at once.

    Raises:
        KeyboardInterrupt: a stop signal while the TCPStore is made.
    """
    host = engine.master_addr
    if is_loopback(host):
        if hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd"):
            fd = os.memfd_create("apam-dist-store", os.MFD_CLOEXEC)
            try:
                store = dist.FileStore(f"/proc/self/fd/{fd}", world)
            except BaseException:
                os.close(fd)
                raise
            # closed when the store is gone, not before: a store that outlives its fd (kept by a traceback) would
            # open whatever file reuses that number
            weakref.finalize(store, os.close, fd)
            return store, ("memfd", PassedFd(fd), 0), None
        tmpdir = tempfile.mkdtemp(prefix="apam-dist-")
        path = os.path.join(tmpdir, "store")
        return dist.FileStore(path, world), ("file", path, 0), lambda: shutil.rmtree(tmpdir, ignore_errors=True)
    timeout = datetime.timedelta(seconds=STARTUP_TIMEOUT_S)

    def tcp_store(port: int):  # its master connects to itself, retrying up to the timeout: waited interruptibly
        call = lambda: dist.TCPStore(host, port, world, is_master=True, timeout=timeout, wait_for_workers=False)  # noqa: E731
        return interruptible(call, "apam-store")

    try:
        store = tcp_store(engine.master_port)
    except (RuntimeError, dist.DistNetworkError):  # the port is taken: let the system choose a free one
        store = tcp_store(0)
    return store, ("tcp", host, store.port), None
