"""What a worker of the real engines (shared_memory, distributed) needs to know and does first: its spec, its
minibatch stream's seed, the CPUs it is pinned to, its fault plan, and its process's set-up (threads, signals,
malloc). Starting and ending the processes: experiments/engines/processes.py; their start-up data:
experiments/engines/startup.py.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import time
from dataclasses import dataclass

import torch

STREAM_SEED_STRIDE = 1_000_003
"""Worker w draws its minibatches from ``BatchStream(N, b_w, seed + STREAM_SEED_STRIDE * w)``: worker 0 uses the
run's own seed, so a run with P = 1 draws exactly the batches of the serial loop (and of the simulated engine)."""


def worker_seed(seed: int, worker: int) -> int:
    """The seed of worker ``worker``'s own minibatch stream (see :data:`STREAM_SEED_STRIDE`)."""
    return int(seed) + STREAM_SEED_STRIDE * int(worker)


@dataclass(frozen=True)
class FaultPlan:
    """Fault injection for tests (``engine.fault``): worker ``kill_worker`` fails when it is handed an iterate of
    version >= ``at_update``. ``mode``: ``kill`` (the process dies by SIGKILL) or ``hang`` (it stops answering)."""

    kill_worker: int | None = None
    at_update: int | None = None
    mode: str = "kill"

    @classmethod
    def of(cls, fault) -> FaultPlan:
        """From a real engine's ``engine.fault`` settings block (``mode``, ``kill_worker``, ``at_update``)."""
        return cls(fault.kill_worker, int(fault.at_update or 0), fault.mode)

    def maybe_fail(self, worker: int, version: int) -> None:
        """Called by worker ``worker`` on receiving an iterate of ``version``; fails as planned, else returns."""
        if self.kill_worker is None or worker != self.kill_worker or version < (self.at_update or 0):
            return
        if self.mode == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        while True:  # hang: alive but silent
            time.sleep(3600)


def worker_cpus(workers: int, threads: int, enabled: bool = True) -> list[tuple[int, ...] | None]:
    """The CPUs each local worker process is pinned to: worker w gets the w-th block of ``threads`` CPUs of this
    process's allowed set, when every worker fits on its own (P x threads <= allowed CPUs); else no pinning
    (None). The master is not pinned: it runs wherever a worker waits.

    Why: unpinned, the kernel now and then moves a worker onto the other worker's core when the master wakes it,
    and the two share a core for a while, which lowers the speed-up over P = 1 (compare ``engine.pin_workers=true``
    and ``false`` with experiment=lr_speedup on the machine at hand). On a machine shared
    with other jobs pinning can hurt instead (a pinned worker cannot leave a busy core): ``engine.pin_workers=false``.
    Where CPU affinity is not available (not Linux) nothing is pinned."""
    if not enabled or not hasattr(os, "sched_getaffinity"):
        return [None] * workers
    allowed = sorted(os.sched_getaffinity(0))
    t = max(1, int(threads))
    if workers * t > len(allowed):
        return [None] * workers
    return [tuple(allowed[w * t : (w + 1) * t]) for w in range(workers)]


def cpu_times(cpus=None) -> tuple[int, int] | None:
    """(idle + iowait, total) jiffies since boot of all CPUs (the ``cpu`` line of /proc/stat) or, given ``cpus``
    (CPU numbers), summed over their ``cpuN`` lines; None where there is no /proc/stat (not Linux)."""
    names = None if cpus is None else {f"cpu{c}" for c in cpus}
    idle = total = 0
    try:
        with open("/proc/stat") as f:
            for line in f:
                if not line.startswith("cpu"):
                    break
                name, *vals = line.split()
                if (name == "cpu") if names is None else (name in names):
                    vals = [int(v) for v in vals]
                    idle, total = idle + vals[3] + vals[4], total + sum(vals)
    except (OSError, ValueError, IndexError):
        return None
    return idle, total


def busy_cpus(cpus=None, window_s: float = 0.1) -> float | None:
    """How many CPUs' worth of work ``cpus`` (CPU numbers; None: the whole machine) did over the next ``window_s``
    seconds, this process sleeping meanwhile: (1 - their idle fraction) x their number. None where /proc/stat is
    missing. Unlike the 1-minute load average it forgets a finished run at once (a finished run's spinning workers
    keep the load average above 1 for a minute, which would make the next P = 1 run of a sweep block), and it
    counts only the CPUs asked about, not the whole host."""
    n = len(cpus) if cpus is not None else (os.cpu_count() or 1)
    a = cpu_times(cpus)
    if a is None or n == 0:
        return None
    time.sleep(window_s)
    b = cpu_times(cpus)
    total = b[1] - a[1]
    if total <= 0:
        return 0.0
    return (1.0 - (b[0] - a[0]) / total) * n


@dataclass(frozen=True)
class WorkerSpec:
    """What one worker process needs besides the problem: its id, minibatch size, stream seed, math threads, the
    CPUs it is pinned to (None: not pinned) and the fault plan. Picklable (sent at spawn)."""

    worker: int
    batch: int
    seed: int
    threads: int
    fault: FaultPlan
    cpus: tuple[int, ...] | None = None
    emulation: object = None  # experiments.engines.emulation.EmulationSpec (None: real compute, only timed)

    @classmethod
    def of(cls, settings, worker: int, pin: bool = False) -> WorkerSpec:
        """Worker ``worker``'s spec from the run's :class:`~experiments.settings.schema.RunSettings`; ``pin``: pin
        it as :func:`worker_cpus` says when ``engine.pin_workers`` is set, for workers this process starts itself."""
        e = settings.engine
        threads = int(e.threads_per_worker)
        cpus = worker_cpus(settings.workers, threads, pin and e.pin_workers)[worker]
        return cls(
            worker,
            settings.worker_batches[worker],
            worker_seed(settings.seed, worker),
            threads,
            FaultPlan.of(e.fault),
            cpus,
        )


def keep_freed_memory() -> bool:
    """Ask glibc's malloc to keep freed blocks for reuse instead of returning them to the system (mallopt:
    M_MMAP_THRESHOLD 32 MiB, M_TRIM_THRESHOLD 512 MiB, M_TOP_PAD 64 MiB). In a fresh process every large
    activation buffer is otherwise mapped and unmapped anew (page faults each time), so a new worker process
    computes a LeNet5 gradient slower than the long-running runner does without this setting and as fast with it
    (measured by benchmarks/bench_engines.py). Returns False where mallopt is not available."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    m_trim_threshold, m_top_pad, m_mmap_threshold = -1, -2, -3
    ok = mallopt(m_mmap_threshold, 32 * 2**20) == 1
    ok &= mallopt(m_trim_threshold, 512 * 2**20) == 1
    ok &= mallopt(m_top_pad, 64 * 2**20) == 1
    return bool(ok)


def worker_process_setup(spec: WorkerSpec) -> None:
    """First thing in a worker process: ignore SIGINT (the master alone handles Ctrl-C and stops the workers; a
    terminal's Ctrl-C reaches the whole process group), pin the process to its CPUs and its math threads, keep
    freed memory for reuse."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if spec.cpus is not None:
        os.sched_setaffinity(0, spec.cpus)
    torch.set_num_threads(int(spec.threads))
    keep_freed_memory()
