"""Worker processes' lives, seen from the master: the start method's context (forkserver with the engines
preloaded, or spawn), how a process ended, ending workers without leaving any behind (stop, terminate, kill), the
forkserver and resource tracker stopped at exit, SIGTERM raised as KeyboardInterrupt while workers run, and SIGCONT
noted while a master runs."""

from __future__ import annotations

import atexit
import multiprocessing
import os
import select
import signal
import sys
import threading
import time
from contextlib import contextmanager
from multiprocessing import forkserver, resource_tracker, util

import torch.multiprocessing as tmp

from experiments.errors import Interrupted


def main_script_problem() -> str | None:
    """Why worker processes started from here could not start, or None: spawn and forkserver begin each child by
    running this process's main script again (multiprocessing's rule, ``spawn.get_preparation_data``), and a script
    read from standard input (``python - < script.py``) is no file a child can run: every worker died at its start
    (``worker 0 died while starting``). Checked before any process starts: the real engines' workers in the
    preflight (a ConfigError, nothing written), a calibration's measuring processes when they start (the run fails,
    recorded with this reason)."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if getattr(main, "__spec__", None) is not None or not isinstance(path, str):
        return None  # python -m, a notebook, python -c: the children import by name or need nothing
    if os.path.isfile(os.path.join(multiprocessing.process.ORIGINAL_DIR or os.getcwd(), path)):
        return None
    return (
        f"{path}: worker processes begin by running this process's main script again, and it is not a file they "
        "can read (a script given on standard input); run it from a file, with python -c or in a notebook"
    )


def process_context(method: str, problem=None):
    """The torch.multiprocessing context for ``engine.start_method`` (``spawn`` or ``forkserver``). For forkserver,
    the server (started once per master process) preloads torch, the engines and the problem's module, so that
    each worker forks from it in milliseconds.

    Raises:
        ValueError: another start method (``fork`` is refused: a forked copy of a process that already ran torch
        threads or CUDA can deadlock).
        RuntimeError: the children could not run the main script (:func:`main_script_problem`).
    """
    if method not in ("spawn", "forkserver"):
        raise ValueError(f"engine.start_method={method}: must be spawn or forkserver")
    if why := main_script_problem():
        raise RuntimeError(why)
    if multiprocessing.get_start_method(allow_none=True) not in (None, *multiprocessing.get_all_start_methods()):
        # inside a parallel launcher's loky worker the default method is 'loky', which a spawned or forked child
        # is told to set and cannot find ("cannot find context for 'loky'"): back to the platform's default
        multiprocessing.set_start_method(None, force=True)
    ctx = tmp.get_context(method)
    if method == "forkserver":
        mods = ["torch", "experiments.engines.shared_memory", "experiments.engines.distributed"]
        if problem is not None:
            mods.append(type(problem).__module__)
        ctx.set_forkserver_preload(mods)
    if not _REAP_AT_EXIT:
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
    if multiprocessing.active_children():
        return []
    reaped = [pid] if (pid := _forget_forkserver(timeout_s)) is not None else []
    rt = getattr(resource_tracker, "_resource_tracker", None)
    pid, fd = getattr(rt, "_pid", None), getattr(rt, "_fd", None)
    if pid is not None and fd is not None:
        os.close(fd)
        rt._fd, rt._pid = None, None
        if _wait_exit(pid, timeout_s):
            reaped.append(pid)
    return reaped


def _forget_forkserver(timeout_s: float) -> int | None:
    """Close the forkserver's "alive" pipe (it exits when it sees it closed), forget it (the next start makes a new
    one), wait up to ``timeout_s`` seconds for it to exit and remove its socket file. Returns its pid when reaped."""
    fs = getattr(forkserver, "_forkserver", None)
    pid, fd = getattr(fs, "_forkserver_pid", None), getattr(fs, "_forkserver_alive_fd", None)
    if pid is None or fd is None:
        return None
    address = fs._forkserver_address
    os.close(fd)
    fs._forkserver_alive_fd, fs._forkserver_pid, fs._forkserver_address = None, None, None
    reaped = _wait_exit(pid, timeout_s)
    try:
        if address and not util.is_abstract_socket_namespace(address):
            os.unlink(address)
    except OSError:
        pass
    return pid if reaped else None


def forkserver_pid() -> int | None:
    """The process id of this process's forkserver (multiprocessing's private singleton), None while there is none."""
    return getattr(getattr(forkserver, "_forkserver", None), "_forkserver_pid", None)


def child_pids(pid: int) -> set[int]:
    """The process ids of process ``pid``'s children (Linux ``/proc/PID/task/*/children``; empty elsewhere)."""
    kids = set()
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                kids |= {int(c) for c in f.read().split()}
    except (OSError, ValueError):
        pass
    return kids


def kill_forkserver(timeout_s: float = HELPER_EXIT_TIMEOUT_S) -> None:
    """End this process's forkserver at once with every process it started (SIGKILL: one may be stopped, and may be
    what the forkserver waits on), reap it and forget it: the next start makes a new one. A start waiting on it
    fails then (its request goes with the server's listening socket). For a forkserver that stalled while it
    started workers (:func:`experiments.engines.startup.start_processes`)."""
    pid = forkserver_pid()
    if pid is None:
        return
    for victim in [*child_pids(pid), pid]:
        try:
            os.kill(victim, signal.SIGKILL)
        except ProcessLookupError:
            pass
    _forget_forkserver(timeout_s)


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
    then exits 143. Later SIGTERMs are ignored until the context ends (while the run is recorded).

    Does nothing outside the main thread, or where the program handles SIGTERM with a handler of its own (the
    command line's raises once and ignores every later stop signal, so a burst of signals ends the run with the
    first one's exit status; restoring it here would arm it again while the run is recorded and at exit)."""
    if threading.current_thread() is not threading.main_thread() or callable(signal.getsignal(signal.SIGTERM)):
        yield
        return

    def _raise(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise Interrupted.stop(signum)

    previous = signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


CONTINUED: list[bool] = []
"""Holds True once this process was continued (SIGCONT: after ``kill -STOP``, or Ctrl-Z then ``fg``) inside
:func:`noting_continues`, until the master's driver takes it (experiments/engines/driver.py): its waits ran out while
it was stopped, so a worker's silence is judged again from the continue."""


@contextmanager
def noting_continues():
    """While inside, a SIGCONT appends to :data:`CONTINUED` (the previous handler comes back after). Does nothing
    outside the main thread (a signal handler can only be set there)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGCONT, lambda signum, frame: CONTINUED.append(True))
    try:
        yield
    finally:
        signal.signal(signal.SIGCONT, previous)
