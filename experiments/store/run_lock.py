"""One process at a time per run: two identical runs started at once into one results folder (two identical sweeps,
a sweep and a single run) each trained and wrote the run, the last writer's files and row silently replacing the
first's. :func:`run_lock` holds an exclusive ``flock`` on the run's own folder while the run is judged, trained and
written; a second process waits for it (saying so), then finds the run finished and skips it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from experiments.log import get_logger

log = get_logger(__name__)


@contextlib.contextmanager
def run_lock(run_dir: Path, name: str):
    """Hold the run folder ``run_dir`` (created when absent) for this process; ``name``: how messages name the run.

    Waits, with one line (``[wait] <name>: another process runs it now; ...``), while another process holds it;
    a stop signal ends the wait as it ends a run. On leaving, a folder the run left empty (bad input found after
    the lock was taken, a run skipped) is removed again, so a refused run writes nothing. The lock is the folder's
    own ``flock`` (Linux releases it when the process ends, however it ends: no stale lock file to remove); its file
    descriptor is not inherited by child processes.
    """
    run_dir = Path(run_dir)
    created = [d for d in (run_dir, *run_dir.parents) if not d.exists()]  # the run's folder, then those above it
    run_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(run_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log.info(f"[wait] {name}: another process runs it now; this one goes on once that run ends")
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock
        for folder in created:  # only while empty: a run that wrote nothing leaves no folder
            try:
                folder.rmdir()
            except OSError:
                break
