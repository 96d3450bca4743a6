"""Stop signals of the entry point (``python -m experiments.run``): SIGINT, SIGTERM and SIGHUP raise
:class:`~experiments.errors.Interrupted` in the runner, so the run in flight is recorded as failed with its partial
trace; a parallel launcher's workers get the signal passed on, record their own runs and exit, and the master waits
for them; a signal after every run was recorded lets the clean-up finish and sets the exit status.

State is per process: :data:`WORKER` (this process is a launcher's worker), :data:`IN_FLIGHT` (a job runs here),
:data:`FORWARDED` (the workers a signal was passed on to), :data:`LATE` (a signal after the runs). Every command
(``python -m experiments.<tool>``, ``python -m plots``) is guarded while its modules load: :func:`while_loading`.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

from experiments.errors import STOP_SIGNALS, TERM_SIGNALS, Interrupted

WORKER: list[bool] = []  # set in a parallel launcher's worker process (it runs jobs; main() ran elsewhere)
IN_FLIGHT: list[bool] = []  # set while this process runs a job
FORWARD_WAIT_S = 60.0
"""How long the master waits for the launcher's workers it passed a stop signal to: each records its run in flight
(a partial trace, a summary row: well under a second) and exits; the master's exit would kill them part-way."""


def on_signal(signum, frame) -> None:
    """A stop signal in the runner: raise :class:`Interrupted` once, so the current run is recorded with its
    partial trace, as for Ctrl-C; further signals while that is written are ignored. A launcher's worker processes
    get the signal too (:func:`forward`), and the master waits until they have recorded their runs and exited; a
    worker without a run in flight exits at once."""
    for s in STOP_SIGNALS:
        signal.signal(s, signal.SIG_IGN)
    if WORKER and not IN_FLIGHT:
        worker_exit(signum)
    wait_for(forward(signum), FORWARD_WAIT_S)
    raise Interrupted.stop(signum)


def as_interrupt(signum, frame) -> None:
    """SIGTERM or SIGHUP (a job scheduler's stop, a closed terminal) taken as Ctrl-C by a command that waits on others
    (``make reproduce``'s sweeps, a calibration): raises :class:`Interrupted` in the main thread, so the command stops
    and awaits what it started before it exits ``128 + signum``; a second signal while it does so is ignored."""
    for s in TERM_SIGNALS:
        signal.signal(s, signal.SIG_IGN)
    raise Interrupted.stop(signum)


def worker_exit(signum: int) -> None:
    """End a launcher's worker process after a stop signal (its run, if any, recorded): its forkserver (started by a
    real engine or a calibration) is stopped and waited for first, so no process of this worker outlives it; then
    ``os._exit(128 + signum)`` (the launcher's loop would otherwise take the next job)."""
    try:
        from multiprocessing import forkserver

        forkserver._forkserver._stop()  # noqa: SLF001 - the stdlib's own way to end its forkserver (its tests use it)
    except Exception:  # noqa: BLE001 - a forkserver that is not there or already gone: nothing to stop
        pass
    hard_exit(128 + signum)


def hard_exit(status: int) -> None:
    """``os._exit(status)`` with stdout and stderr flushed first (a closed or broken stream is left as it is)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(status)


def wait_for(pids: list[int], timeout_s: float) -> None:
    """Return when every process in ``pids`` has exited (gone, or a zombie its parent has not reaped yet), or after
    ``timeout_s`` seconds."""
    deadline = time.monotonic() + timeout_s
    for pid in pids:
        while time.monotonic() < deadline:
            try:
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                break
            if state in ("Z", "X"):
                break
            time.sleep(0.02)


def catch_signals() -> None:
    for s in STOP_SIGNALS:
        signal.signal(s, on_signal)


FORWARDED: list[int] = []  # launcher worker processes a stop signal was passed on to (each records its own run)


def forward(signum: int) -> list[int]:
    """Send ``signum`` to this process's child processes that run jobs (a parallel launcher's workers), so each
    records its run in flight, and return their pids; the real engines' own worker processes are ended by their
    engine, and loky's resource tracker (which frees the workers' semaphores and shared memory) is left alone."""
    try:
        children = Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").read_text().split()
    except OSError:
        return []
    sent = []
    for pid in children:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if (b"loky" in cmdline or b"joblib" in cmdline) and b"resource_tracker" not in cmdline:
            try:
                os.kill(int(pid), signum)
                sent.append(int(pid))
            except OSError:
                pass
    FORWARDED.extend(sent)
    return sent


LATE: list[int] = []  # a stop signal that came after every run was recorded


def after_the_runs() -> None:
    """Every run is recorded: a stop signal from now on (while the process cleans up: engine helpers stopped,
    finalizers) has no run to record. It is noted, the clean-up finishes undisturbed (no exception raised inside
    it), and the process then exits with 128 + the signal's number (:func:`exit_if_late`, the last exit hook)."""

    def late(signum, frame) -> None:
        for s in STOP_SIGNALS:
            signal.signal(s, signal.SIG_IGN)
        LATE.append(signum)

    for s in STOP_SIGNALS:
        signal.signal(s, late)
    RECORDED.append(True)


RECORDED: list[bool] = []  # set once every run of this process is recorded (:func:`after_the_runs`)


def exit_if_late() -> None:
    """The last exit hook: after a late signal, its line and exit status ``128 + signum``. Otherwise, once every run
    is recorded, stop signals are ignored from here on: Python's finalization puts a handler it set back to the
    default, which killed the process with no line (and status -15) when a signal came in those last moments."""
    if not LATE and RECORDED:
        for s in STOP_SIGNALS:
            signal.signal(s, signal.SIG_IGN)
    if LATE:
        try:  # the exit status has a line that explains it
            sys.stderr.write(
                f"interrupted by {signal.Signals(LATE[0]).name} after every run was recorded: nothing was lost\n"
            )
        except (OSError, ValueError):
            pass
        hard_exit(128 + LATE[0])


_LOADING: dict[int, object] = {}  # the handlers :func:`while_loading` replaced, put back by :func:`loaded`


def while_loading() -> None:
    """Guard a command while its modules load: until it calls :func:`loaded`, a stop signal ends the process at once
    with one line and ``128 + signum``. The packages ``experiments`` and ``plots`` call it when Python imports them
    to locate a ``python -m`` command (``sys.argv[0]`` is ``"-m"`` then: Python's docs of ``-m``). Nothing has been
    written while modules load, and a KeyboardInterrupt raised there was a traceback (or was swallowed by torch's
    import, and the command went on). A signal the caller ignores (``nohup``'s SIGHUP) stays ignored."""
    if _LOADING:
        return
    for s in STOP_SIGNALS:
        previous = signal.getsignal(s)
        if previous is not signal.SIG_IGN:
            _LOADING[s] = signal.SIG_DFL if previous is None else previous
            signal.signal(s, _stopped_while_loading)


def loaded() -> None:
    """The command's modules are loaded: the handlers :func:`while_loading` replaced are put back (Python's: Ctrl-C
    raises KeyboardInterrupt, which the command's ``main`` turns into one line)."""
    for s, previous in _LOADING.items():
        signal.signal(s, previous)
    _LOADING.clear()


def _stopped_while_loading(signum, frame) -> None:
    try:
        name = signal.Signals(signum).name
        sys.stderr.write(f"interrupted by {name} while the command loaded: nothing was written\n")
    except (AttributeError, OSError, ValueError):  # no stderr, or a closed one: the exit status still says it
        pass
    hard_exit(128 + signum)
