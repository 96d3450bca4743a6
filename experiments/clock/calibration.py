"""Measuring the cost model's terms on this machine, once per machine (issue 12 item 2, issue 15 item 5).

Layers: this module measures (it runs the real engines and a worker process) and stores; :mod:`experiments.clock.costmodel`
is the model in closed form; the simulated engine uses both. The real engines import neither.

What is measured, each term apart and where it occurs (repeated ``REPEATS`` times; the median is used and the
relative spread (max - min) / median is stored beside it):
- ``grad|<problem>|B=<b>|threads=1|in=shared_memory-block``: one gradient as a worker of a real run computes it: a
  short P = 1 run on shared_memory with the blocking hand-off (real compute), the medians of its workers'
  ``compute_s`` (:func:`engine_grad_samples`). A gradient timed in a hot loop is much cheaper than in a run, where
  the worker waits for its iterate in between and its caches and core go cold (logistic regression B = 64: 45 us hot,
  135 us in a run; LeNet5 B = 40: 3.9 ms hot, 5.6 ms in a run). A timing-only problem (problems/timing.py), whose
  engine gradients are free, is timed in a worker-like probe process instead (key ``in=probe``);
- ``update|<rule key>|d=<d>|threads=1``: one master update, in this process (:func:`rule_calibration_key`);
- ``overhead|<engine>|d=<d>``: the master's busy time per gradient besides the update, on the engine itself: with
  zero-cost gradients and ``SATURATE_P`` workers the master never waits, so seconds per update = update + overhead
  (async SGD, whose update is measured beside it and subtracted);
- ``latency|<engine>|d=<d>|net``: in-flight time of one message, on the engine itself: one zero-cost worker waits
  for its iterate and the master for its gradient in turn, so a P = 1 run's seconds per update less the worker's
  own time per gradient (``compute_s``) and the master's busy time per update (``master_busy_s``, measured in the
  run: engines/driver.py) is 2 latencies. (Before this key, latency was ``(T(1) - T(saturated)) / 2``, which took
  the saturated master's busy time for the waiting one's -- on gloo 231 us against 176 us -- and counted the
  zero-cost worker's 25 us in the message: it undercharged gloo's hand-off by half.);
- ``overhead_idle|<engine>|<problem>|B=<b>``: the master's busy time per gradient besides the update when it had
  been waiting for that gradient: P = 1 runs of the problem itself on the engine (real compute, async SGD with a
  vanishing step), ``master_busy_s`` less the SGD update. It is longer than the saturated ``overhead`` (the master
  returns from a blocking wait, and the worker's gradient -- the problem's data -- has meanwhile filled the caches
  with other lines: logistic regression on shared_memory 85 us against 54 us). The same runs time the gradient on
  shared_memory (``grad|...``); not measured for timing-only problems (their engine gradients are free) or when
  ``engine.costs.overhead_s`` fixes the overheads;
- ``late|sleep|s=<base>``: how late an emulated wait of ``base`` seconds ends (``time.sleep``'s wake-up; every
  sample kept): what the simulated twin of an emulated run adds to each gradient (engines/simulated.py).
Every entry also keeps ``probe_s``: a fixed piece of CPU work (experiments/clock/speedprobe.py) timed right after the
entry's samples; a measured run times the same work before it starts (summary ``speed_probe_s``, ``cal_probe_s``).
Not a cost, and not a correction: this machine switches between two speeds within a second, so the probe is a
snapshot kept for analysis (speedprobe.py says what it found).
Message terms are keyed by engine and dimension only: every update rule is timed with the same clock. On
``shared_memory`` both runs force the ``block`` hand-off (key ``shared_memory-block``): with ``auto`` the P = 1 run
spins on a quiet machine while the saturated one blocks, and their difference is then no latency at all (it gave
0-2 us, spread 190%, at d = 47,236). ``block`` is what the real engine does on this machine whenever workers and
master outnumber the cores (P >= 2 on 2 cores), so the simulated clock charges a blocking hand-off: conservative for
a machine where every worker has a core of its own and could spin.

Where: one JSON file per machine, ``~/.cache/apam-harness/calibration-<host hash>.json`` (:func:`machine_path`;
``$APAM_CALIBRATION`` or ``engine.calibration`` name another file), written under a file lock so parallel sweeps
share it. Every results folder reuses it; ``make calibrate FORCE=1`` (``python -m experiments.calibrate --force``)
measures again. Each run copies the costs it used into its ``provenance.json`` and summary row (``cost_*``), so a
committed result stays reproducible with ``engine.costs.*`` on another machine.
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import statistics
import time
from pathlib import Path

import torch
from filelock import FileLock

from experiments.clock import speedprobe
from experiments.clock.costmodel import CostModel

REPEATS = 5          # repeats of every measurement (the median is used; the spread is reported)
SATURATE_P = 4       # workers that keep a zero-cost master busy (P* of a zero-cost gradient is about 2-3)
ENGINE_UPDATES = 600  # updates per engine measurement
GRAD_BUDGET_S = 1.0   # seconds a gradient repeat may take: slower gradients are timed fewer times per repeat
GRAD_ENGINE = "shared_memory"  # where gradients are timed: a P = 1 run of this engine (hand-off: HANDOFF's)
GRAD_WARMUP = 5       # gradients of that run left out before the repeats
GRAD_PER_REPEAT = 40  # timed gradients per P = 1 run (each run's median is one sample)
TRANSPORTS = ("shared_memory", "distributed")
LATE_MAX_WAIT_S = 0.25  # longest wait the lateness of emulated waits is sampled at (measure_lateness_samples)
HANDOFF = {"shared_memory": "block"}  # the hand-off message terms and gradients are measured with (module docstring)


def _engine_label(transport: str) -> str:
    """``transport`` as calibration keys name it: with the hand-off it is measured with, where it has one."""
    return f"{transport}-{HANDOFF[transport]}" if transport in HANDOFF else transport


# ---------------------------------------------------------------------- where
def machine_id() -> dict:
    """What identifies this machine's costs: host name, architecture, CPU model and count, torch version."""
    cpu = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"host": platform.node(), "machine": platform.machine(), "cpu": cpu, "cpu_count": os.cpu_count(),
            "torch": torch.__version__}


def machine_path() -> Path:
    """The machine's calibration file: ``$APAM_CALIBRATION`` if set, else
    ``$XDG_CACHE_HOME/apam-harness/calibration-<12 hex of sha1(machine_id)>.json`` (``~/.cache`` by default)."""
    env = os.environ.get("APAM_CALIBRATION")
    if env:
        return Path(env)
    digest = hashlib.sha1(json.dumps(machine_id(), sort_keys=True).encode()).hexdigest()[:12]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "apam-harness" / f"calibration-{digest}.json"


class Calibration:
    """A calibration file: measured costs by key, each ``{"value": median s, "samples": [...], "spread": rel}``.

    A damaged file (not UTF-8 JSON, cut short, empty, or not of this shape: an object whose ``entries`` maps keys to
    objects with a numeric ``value`` and, where present, a list of numeric ``samples``) is set aside as
    ``<name>.damaged-<n>`` under the file lock and read as empty (its entries are measured again), with one line on
    stderr naming it. Every write goes through :func:`experiments.store.atomic.atomic_write_text`.

    Args:
        path: the JSON file (created on first write; None = :func:`machine_path`).

    Raises:
        experiments.errors.ConfigError: (from :meth:`read`, :meth:`entry`, :meth:`drop`) the path names something
            that is not a regular file (a named pipe, a folder, a device: never opened, so never waited on) or a
            file that cannot be read (permissions), or a damaged file could not be set aside.
    """

    def __init__(self, path: Path | str | None = None) -> None:
        self.path = Path(path) if path else machine_path()
        self._lock = FileLock(str(self.path) + ".lock", timeout=600)

    def _empty(self) -> dict:
        return {"machine": machine_id(), "entries": {}}

    def _load(self) -> tuple[dict | None, str | None]:
        """The file's content and why it is damaged (``(None, None)`` when there is no file).

        Raises:
            ConfigError: not a regular file, or not readable.
        """
        import stat as stat_mod

        from experiments.errors import ConfigError

        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None, None
        except OSError as exc:
            raise ConfigError(f"{self.path}: cannot read this calibration file ({exc.strerror})") from None
        if not stat_mod.S_ISREG(st.st_mode):
            kind = ("a folder" if stat_mod.S_ISDIR(st.st_mode) else "a named pipe" if stat_mod.S_ISFIFO(st.st_mode)
                    else "a socket" if stat_mod.S_ISSOCK(st.st_mode) else "a device or special file")
            raise ConfigError(f"{self.path}: the calibration file is {kind}, not a regular file "
                              "(engine.calibration / APAM_CALIBRATION must name a JSON file)")
        if not os.access(self.path, os.R_OK):
            raise ConfigError(f"{self.path}: cannot read this calibration file (permission denied)")
        try:  # O_NONBLOCK: should the file be swapped for a pipe since the check, opening it does not wait
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
            with os.fdopen(fd, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return None, None
        except OSError as exc:
            raise ConfigError(f"{self.path}: cannot read this calibration file ({exc.strerror})") from None
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            return None, "empty" if not raw.strip() else f"not JSON ({' '.join(str(exc).split())[:80]})"
        return data, self._shape_problem(data)

    @staticmethod
    def _shape_problem(data) -> str | None:
        """Why ``data`` is not a calibration (None when it is)."""
        def number(v) -> bool:
            return isinstance(v, (int, float)) and not isinstance(v, bool)

        if not isinstance(data, dict):
            return f"a JSON {type(data).__name__}, not an object"
        if not isinstance(data.get("entries"), dict):
            return "no 'entries' object"
        if not isinstance(data.get("machine", {}), dict):
            return "'machine' is not an object"
        for key, e in data["entries"].items():
            if not isinstance(e, dict) or not number(e.get("value")):
                return f"entry {key!r} has no numeric 'value'"
            samples = e.get("samples", [])
            if not isinstance(samples, list) or not all(number(v) for v in samples):
                return f"entry {key!r}: 'samples' is not a list of numbers"
        return None

    def read(self) -> dict:
        """The file's content (an empty calibration of this machine when the file does not exist or was damaged
        and has been set aside).

        Raises:
            ConfigError: see the class docstring.
        """
        data, damage = self._load()
        if data is None and damage is None:
            return self._empty()
        if damage is None:
            return data
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._lock:  # one process sets the file aside; the others then find it gone or rewritten
            data, damage = self._load()
            if damage is None:
                return data if data is not None else self._empty()
            self._set_aside(damage)
            return self._empty()

    def _set_aside(self, damage: str) -> None:
        """Rename the damaged file to ``<name>.damaged-<n>`` (first free n), with one line on stderr."""
        import sys

        from experiments.errors import ConfigError

        n = 1
        while (dest := self.path.with_name(f"{self.path.name}.damaged-{n}")).exists() or dest.is_symlink():
            n += 1
        try:
            os.rename(self.path, dest)
        except OSError as exc:
            raise ConfigError(f"{self.path}: damaged calibration file ({damage}) cannot be set aside "
                              f"({exc.strerror})") from None
        print(f"warning: {self.path}: damaged calibration file ({damage}); set aside as {dest.name}, its entries "
              "are measured again", file=sys.stderr)

    def _write(self, data: dict) -> None:
        from experiments.store.atomic import atomic_write_text

        atomic_write_text(self.path, json.dumps(data, indent=1, sort_keys=True))

    def entry(self, key: str, measure) -> dict:
        """The entry under ``key``; ``measure()`` (returning a list of repeated samples, seconds) is called, under
        the file lock so that parallel jobs measure it once, when it is missing.

        Raises:
            ConfigError: see the class docstring.
            OSError: the file could not be written (one line naming it).
        """
        data = self.read()
        if key in data["entries"]:
            return data["entries"][key]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._lock:
            data = self.read()
            if key not in data["entries"]:
                samples = [float(s) for s in measure()]
                med = statistics.median(samples)
                data["entries"][key] = {"value": med, "samples": samples,
                                        "spread": (max(samples) - min(samples)) / med if med > 0 else 0.0,
                                        "measured": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                        "probe_s": speedprobe.measure()}  # the machine's speed as it measured
                self._write(data)
            return data["entries"][key]

    def drop(self, keys=None) -> None:
        """Forget ``keys`` (all entries when None): they are measured again on next use.

        Raises:
            ConfigError: see the class docstring.
        """
        if not self.path.exists() and not self.path.is_symlink():
            self._load()  # a dangling or unreadable name still says why
            return
        with self._lock:
            data = self.read()
            data["entries"] = {} if keys is None else {k: v for k, v in data["entries"].items() if k not in keys}
            self._write(data)


# ---------------------------------------------------------------------- keys
def rule_calibration_key(algorithm_cfg, rule, dim: int) -> str:
    """The name of an algorithm's update rule in calibration keys: rule, variant and the implementation that steps
    a float32 CPU vector of ``dim`` entries (``rule.impl_for`` where the rule has several; e.g.
    ``amsgrad-torch-fused``, ``sgd``): another implementation costs another time, and ``impl=auto`` shares the
    entry of the implementation it picks."""
    impl = rule.impl_for(torch.empty(dim)) if hasattr(rule, "impl_for") else None
    parts = (algorithm_cfg.rule, algorithm_cfg.get("variant"), impl)
    return "-".join(str(p) for p in parts if p)


def grad_key(problem, batch_size: int) -> str:
    """The calibration key of one gradient of ``problem`` at ``batch_size``, naming where it is timed."""
    where = "probe" if getattr(problem, "timing_only", False) else _engine_label(GRAD_ENGINE)
    return f"grad|{problem.name}|n={problem.num_train}|d={problem.dim}|B={int(batch_size)}|threads=1|in={where}"


def update_key(rule_key: str, dim: int) -> str:
    return f"update|{rule_key}|d={int(dim)}|threads=1"


def message_keys(transport: str, dim: int) -> tuple[str, str]:
    """(latency key, overhead key) of engine ``transport`` at dimension ``dim``: no rule in them; on
    ``shared_memory`` the hand-off they were measured with (:data:`HANDOFF`)."""
    name = _engine_label(transport)
    return f"latency|{name}|d={int(dim)}|net", f"overhead|{name}|d={int(dim)}"


def idle_key(transport: str, problem, batch_size: int) -> str:
    """The calibration key of the master's overhead per gradient it waited for, on engine ``transport``, with the
    gradients of ``problem`` at ``batch_size`` (module docstring)."""
    return (f"overhead_idle|{_engine_label(transport)}|{problem.name}|n={problem.num_train}|d={problem.dim}"
            f"|B={int(batch_size)}")


# ---------------------------------------------------------------------- measuring
def _median_time(fn, reps: int, warmup: int = 3) -> float:
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def lateness_key(base_s: float) -> str:
    """Calibration key of the wake-up lateness of an emulated wait of about ``base_s`` seconds."""
    return f"late|sleep|s={float(base_s):.6g}"


def measure_lateness_samples(base_s: float, budget_s: float = 2.0) -> list[float]:
    """Seconds by which ``time.sleep`` of ``base_s`` seconds ends after its target, as an emulated worker's wait does
    (experiments/engines/emulation.py): ``budget_s / base_s`` waits (5 to 400), in this process with one thread.
    Every sample is kept (sorted): the simulated twin of an emulated run draws from them. A wait longer than
    ``LATE_MAX_WAIT_S`` is sampled at that length: the lateness is the timer's slack and the wake-up, not the wait
    (measured 0.11-0.26 ms for waits of 2-50 ms), and the 5 samples of large_time_per_epoch's 5.7 s gradient took
    29 s for a term 1e-4 of it."""
    wait = min(float(base_s), LATE_MAX_WAIT_S)
    n = int(min(400, max(5, budget_s / max(wait, 1e-6))))
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        time.sleep(wait)
        out.append(max(0.0, time.perf_counter() - t0 - wait))
    return sorted(out)


def emulated_lateness(engine_cfg, calibration: "Calibration", measure: bool = True) -> list[float] | None:
    """The wake-up lateness samples (seconds) that the simulated twin of an emulated run draws from
    (engines/simulated.py): ``[engine.costs.late_s]`` when the config fixes it, else the samples calibrated for
    ``engine.compute_base_s`` (:func:`measure_lateness_samples`, measured on first use unless ``measure`` is False:
    then None when missing); None with real compute or without a base."""
    if engine_cfg.get("compute") != "emulated":
        return None
    fixed = (engine_cfg.get("costs") or {}).get("late_s")
    if fixed is not None:
        return [float(fixed)]
    base = engine_cfg.get("compute_base_s")
    if base is None:
        return None
    if not measure:
        entry = calibration.read()["entries"].get(lateness_key(base))
        return entry["samples"] if entry else None
    return calibration.entry(lateness_key(base), lambda: measure_lateness_samples(float(base)))["samples"]


def measure_update_s(rule, dim: int, reps: int = 50) -> float:
    """Median seconds of one ``rule.step`` on a flat float32 vector of ``dim`` entries (this process)."""
    x = torch.zeros(dim)
    g = torch.randn(dim, generator=torch.Generator().manual_seed(0))
    state = rule.init(x)
    info = {"tau": 0, "worker": 0} if getattr(rule, "needs_staleness", False) else {}

    def step():
        nonlocal x, state
        x, state = rule.step(x, g, state, **info)

    return _median_time(step, reps)


def _grad_probe(problem, batch_sizes: list[int], reps: int, repeats: int, queue) -> None:
    """Body of the probe process: set up like an engine worker, then per batch size (in order) time ``repeats``
    medians of ``reps`` gradients (fewer calls a repeat when they would take over ``GRAD_BUDGET_S``); put
    ``{batch size: samples}`` on ``queue``."""
    from experiments.engines.workers import FaultPlan, WorkerSpec, worker_process_setup

    cpus = (min(os.sched_getaffinity(0)),) if hasattr(os, "sched_getaffinity") else None
    worker_process_setup(WorkerSpec(0, int(batch_sizes[0]), 0, 1, FaultPlan(), cpus))
    gen = torch.Generator().manual_seed(0)
    x = problem.init_params(0)
    grad = getattr(problem, "timed_loss_grad", problem.loss_grad)  # a timing-only problem's real cost
    out = {}
    for b in batch_sizes:
        idx = torch.randint(0, problem.num_train, (int(b),), generator=gen)
        t0 = time.perf_counter()
        grad(x, idx)  # first call at this size: builds its buffers; sizes the repeats
        first = time.perf_counter() - t0
        n = reps if first * reps <= GRAD_BUDGET_S else max(1, int(GRAD_BUDGET_S / first))  # a slow gradient
        out[int(b)] = []
        for _ in range(repeats):
            idx = torch.randint(0, problem.num_train, (int(b),), generator=gen)
            out[int(b)].append(_median_time(lambda: grad(x, idx), n, warmup=0 if n < 3 else 3))  # slow: warm already
    queue.put(out)


def p1_run_samples(transport: str, problem, batch_size: int, repeats: int = REPEATS) -> tuple[list, list]:
    """(gradient samples, idle-overhead samples), seconds, ``repeats`` each, from as many P = 1 runs of ``problem``
    on engine ``transport`` (with its HANDOFF), real compute, async SGD with a vanishing step (the iterate stays at
    its start), ``GRAD_WARMUP`` warm-up updates and ``GRAD_PER_REPEAT`` timed ones each: per run, the median of the
    worker's ``compute_s`` per gradient (experiments/engines/emulation.py) and the master's ``master_busy_s`` less
    the SGD update (engines/driver.py). Raises RuntimeError when a run fails."""
    upd = measure_update_s(_sgd(), problem.dim)
    grads, idle = [], []
    n = GRAD_WARMUP + GRAD_PER_REPEAT
    for _ in range(repeats):
        result = _calibration_run(transport, problem, 1, n, batch_size, lr=1e-12,
                                  extra=[f"engine.warmup_updates={GRAD_WARMUP}"])
        times = [c[2] for c in sorted(result.compute_times or [], key=lambda c: c[1])]
        if len(times) < n or result.master_busy_s is None:
            raise RuntimeError(f"timing run on engine={transport} logged {len(times)} of {n} gradients")
        grads.append(statistics.median(times[GRAD_WARMUP:]))
        idle.append(max(0.0, result.master_busy_s - upd))
    return grads, idle


def engine_grad_samples(problem, batch_size: int, repeats: int = REPEATS) -> list[float]:
    """``repeats`` medians, seconds, of ``GRAD_PER_REPEAT`` gradients each, as the worker of a real run computed
    them: P = 1 runs on GRAD_ENGINE (:func:`p1_run_samples`). Raises RuntimeError when a run fails."""
    return p1_run_samples(GRAD_ENGINE, problem, batch_size, repeats)[0]


def measure_grad_samples(problem, batch_size: int, reps: int = 15, repeats: int = REPEATS) -> list[float]:
    """``repeats`` samples, seconds, of one gradient at minibatch ``batch_size`` as a worker computes it
    (:func:`grad_key`): :func:`engine_grad_samples`; for a timing-only problem, :func:`probe_grad_samples`.
    Raises RuntimeError when the run or probe fails."""
    if not getattr(problem, "timing_only", False):
        return engine_grad_samples(problem, batch_size, repeats)
    return probe_grad_samples(problem, [batch_size], reps, repeats)[int(batch_size)]


def probe_grad_samples(problem, batch_sizes, reps: int = 15, repeats: int = REPEATS) -> dict[int, list[float]]:
    """``{b: repeats samples}``, seconds, of one gradient of timing-only ``problem`` (its ``timed_loss_grad``) at
    each minibatch size ``b``: medians of ``reps`` calls (fewer for a slow gradient, :data:`GRAD_BUDGET_S`), in one
    spawned worker-like process for all the sizes (each start imports torch and builds the net: about 10 s for
    ResNet18, 2026-12-02). Raises RuntimeError when the probe fails."""
    import torch.multiprocessing as tmp

    sizes = list(dict.fromkeys(int(b) for b in batch_sizes))
    ctx = tmp.get_context("spawn")
    queue = ctx.Queue()
    p = ctx.Process(target=_grad_probe, args=(problem, sizes, reps, repeats, queue), daemon=True)
    p.start()
    try:
        return queue.get(timeout=600 * len(sizes))
    except Exception as exc:  # noqa: BLE001 - re-raised with the reason
        raise RuntimeError(f"gradient probe process failed ({type(exc).__name__}; exit code {p.exitcode})") from None
    finally:
        p.join(10)
        if p.is_alive():
            p.kill()
            p.join()


class ZeroCostProblem:
    """A problem of dimension ``dim`` whose gradient costs nothing (a fresh zero vector): what remains of an update
    on a real engine is the transport and the master. Module-level, so worker processes can unpickle it."""

    def __init__(self, dim: int) -> None:
        self.name, self.dim, self.num_train, self.device = "zero_cost", int(dim), 1_000_000, torch.device("cpu")

    def init_params(self, seed: int) -> torch.Tensor:
        return torch.zeros(self.dim)

    def loss_grad(self, x, idx):
        return 0.0, torch.zeros(self.dim)

    def evaluate(self, x):
        return {"train_loss": 0.0, "train_acc": 0.0, "test_loss": 0.0, "test_acc": 0.0}


def engine_updates(dim: int) -> int:
    """Updates per engine measurement at dimension ``dim``: ENGINE_UPDATES, fewer for large d (each message copies
    4 d bytes: at d = 11 M, 45 MB) so that one measurement stays near a second; at least 20 (at d = 11 M an update
    takes 30-65 ms: 20 of them are 0.6-1.3 s, and the 5 repeats of both runs on both engines took 68 s with 50)."""
    return int(max(20, min(ENGINE_UPDATES, 2e8 // (4 * int(dim)))))


def seconds_per_update(transport: str, dim: int, workers: int, updates: int | None = None) -> float:
    """Wall seconds per update of async SGD on engine ``transport`` with ``workers`` zero-cost workers (real
    compute, no emulation), over the updates the engine's clock timed (``updates``: default
    :func:`engine_updates`)."""
    return _zero_cost_run(transport, dim, workers, updates)[1]


def _zero_cost_run(transport: str, dim: int, workers: int, updates: int | None) -> tuple:
    """(EngineResult, seconds per timed update) of a run of ``workers`` zero-cost workers on engine ``transport``
    (``updates``: default :func:`engine_updates`)."""
    updates = engine_updates(dim) if updates is None else updates
    result = _calibration_run(transport, ZeroCostProblem(dim), workers, updates, batch_size=1, lr=0.001)
    timed = result.timed_samples if result.timed_samples is not None else result.samples
    return result, result.time_s / max(1, timed)


def _calibration_run(transport: str, problem, workers: int, updates: int, batch_size: int, lr: float,
                     extra: tuple = ()):
    """One run of async SGD (constant step ``lr``) on real engine ``transport`` (with its HANDOFF), real compute,
    evaluated only at its start and end on nothing (a ZeroCostProblem's free metrics); returns its EngineResult.
    Raises RuntimeError when the run does not end ok."""
    from experiments.engines import get_engine
    from experiments.settings.compose import compose_jobs
    from experiments.training.recorder import Recorder

    cfg = compose_jobs([[f"engine={transport}", f"workers={workers}", f"updates={updates}", "eval_every=1000000000",
                         f"batch_size={int(batch_size)}", "algorithm=async_sgd", f"algorithm.lr={lr}",
                         "delay=timing", "algorithm.lr_schedule=constant", "device=cpu",
                         "engine.start_method=forkserver", *extra]
                        + ([f"engine.handoff={HANDOFF[transport]}"] if transport in HANDOFF else [])])[0]
    recorder = Recorder(ZeroCostProblem(problem.dim), {"run_id": "calibration"}, eval_every=1e9, total_epochs=None,
                        f_star=None, clock="wall", progress=False)
    result = get_engine(transport).run(problem, _sgd(lr), cfg, recorder)
    if result.status != "ok":
        raise RuntimeError(f"calibration run on engine={transport} failed: {result.message}")
    return result


def _sgd(lr: float = 0.001):
    from algorithms import build_rule

    return build_rule("sgd", lr=lr)


def p1_latency_s(transport: str, dim: int, updates: int | None = None) -> float:
    """One latency sample, seconds: a P = 1 run of zero-cost gradients on engine ``transport`` at ``dim``, its
    seconds per timed update less the worker's median ``compute_s`` and the master's ``master_busy_s``, halved
    (clipped at 0; see the module docstring)."""
    result, per_update = _zero_cost_run(transport, dim, 1, updates)
    compute = statistics.median(c[2] for c in result.compute_times)
    return max(0.0, (per_update - compute - result.master_busy_s) / 2)


def measure_message_terms(transport: str, dim: int, repeats: int = REPEATS) -> tuple[list[float], list[float]]:
    """(latency samples, overhead samples), seconds, each ``repeats`` long, on engine ``transport`` at ``dim``:
    ``overhead = T(SATURATE_P) - update_sgd`` (``T(P)``: the seconds per update with P zero-cost workers) and the
    latency of :func:`p1_latency_s` (see the module docstring)."""
    upd = measure_update_s(_sgd(), dim)
    lat, over = [], []
    for _ in range(repeats):
        lat.append(p1_latency_s(transport, dim))
        over.append(max(0.0, seconds_per_update(transport, dim, SATURATE_P) - upd))
    return lat, over


# ---------------------------------------------------------------------- the run's costs
def cost_model(problem, rule, batch_sizes, costs_cfg, calibration: Calibration, algorithm_cfg,
               ref_batch: int, transport: str = "shared_memory") -> CostModel:
    """The costs of a run: fixed values from ``costs_cfg`` (``grad_s``, ``update_s``, ``latency_s``,
    ``overhead_s``; None = calibrated, measured on first use and then reused from ``calibration``).

    Args:
        problem: the run's problem (for measuring gradients).
        rule: the run's update rule (for measuring master updates).
        batch_sizes: every minibatch size the run uses (a sync split uses B/P).
        costs_cfg: mapping with optional fixed costs in seconds.
        calibration: the machine's :class:`Calibration`.
        algorithm_cfg: the run's ``cfg.algorithm`` (names the rule in the update key).
        ref_batch: the batch size a fixed ``grad_s`` refers to; other sizes scale linearly from it.
        transport: the real engine whose message terms the clock models (``shared_memory`` or ``distributed``).

    Raises:
        ValueError: an unknown ``transport``.
    """
    if transport not in TRANSPORTS:
        raise ValueError(f"engine.transport={transport!r}: must be one of {', '.join(TRANSPORTS)}")
    fixed = dict(costs_cfg or {})
    spread = {}
    grad = {}
    sizes = sorted(set(int(b) for b in batch_sizes))
    runs = {}  # (transport, b) -> both sample lists of one set of P = 1 runs (gradient, idle overhead)

    def p1(t: str, b: int) -> tuple[list, list]:
        if (t, b) not in runs:
            runs[t, b] = p1_run_samples(t, problem, b)
        return runs[t, b]

    timing_only = getattr(problem, "timing_only", False)
    probed = {}  # a timing-only problem: b -> samples of one probe of every size the calibration still lacks

    def probe(b: int) -> list[float]:
        if b not in probed:
            have = calibration.read()["entries"]
            probed.update(probe_grad_samples(problem, [s for s in sizes if s == b or grad_key(problem, s) not in have]))
        return probed[b]

    for b in sizes:
        if fixed.get("grad_s") is not None:
            grad[b] = float(fixed["grad_s"]) * b / ref_batch
        else:
            measure = (lambda b=b: probe(b)) if timing_only else (lambda b=b: p1(GRAD_ENGINE, b)[0])
            e = calibration.entry(grad_key(problem, b), measure)
            grad[b], spread[f"grad_s|B={b}"] = e["value"], e["spread"]
    idle_s = fixed.get("overhead_idle_s")
    if idle_s is None and fixed.get("overhead_s") is None and not timing_only:
        b = sizes[-1]  # the largest gradient of the run: the one that pollutes the master's caches most
        e = calibration.entry(idle_key(transport, problem, b), lambda: p1(transport, b)[1])
        idle_s, spread["overhead_idle_s"] = e["value"], e["spread"]
    if fixed.get("update_s") is not None:
        update_s = float(fixed["update_s"])
    else:
        key = update_key(rule_calibration_key(algorithm_cfg, rule, problem.dim), problem.dim)
        e = calibration.entry(key, lambda: [measure_update_s(rule, problem.dim) for _ in range(REPEATS)])
        update_s, spread["update_s"] = e["value"], e["spread"]
    lat_key, over_key = message_keys(transport, problem.dim)
    terms = {}
    for name, key in (("latency_s", lat_key), ("overhead_s", over_key)):
        if fixed.get(name) is not None:
            terms[name] = float(fixed[name])
            continue
        if key not in calibration.read()["entries"]:
            lat, over = [], []

            def both():
                if not lat:
                    lat[:], over[:] = measure_message_terms(transport, problem.dim)
                return lat, over

            calibration.entry(lat_key, lambda: both()[0])
            calibration.entry(over_key, lambda: both()[1])
        e = calibration.entry(key, lambda: [])
        terms[name], spread[name] = e["value"], e["spread"]
    source = "config" if all(fixed.get(k) is not None for k in ("latency_s", "overhead_s")) else transport
    return CostModel(grad=grad, update_s=update_s, latency_s=terms["latency_s"], overhead_s=terms["overhead_s"],
                     transport=source, spread=spread, overhead_idle_s=None if idle_s is None else float(idle_s))
