"""Measuring the cost model's terms on this machine: each term apart, where it occurs, repeated.

What is measured (``REPEATS`` repeats each; the calibration keeps the samples, their median and their spread):

- one gradient as a worker of a real run computes it (:func:`p1_run_samples`): short P = 1 runs on shared_memory
  with the blocking hand-off, real compute, the median of the worker's ``compute_s`` per run. A gradient timed in a
  hot loop is cheaper than in a run, where the worker waits for its iterate in between and its caches go cold. A
  timing-only problem (problems/timing.py), whose engine gradients are free, is timed in a worker-like probe
  process instead (:func:`probe_grad_samples`);
- one master update (:func:`measure_update_s`), in this process;
- the master's busy time per gradient besides the update (``overhead``): with zero-cost gradients and
  ``SATURATE_P`` workers the master never waits, so seconds per update = update + overhead;
- the in-flight time of one message (``latency``): a P = 1 run of zero-cost gradients, its seconds per update less
  the worker's own time per gradient and the master's busy time per update, halved (:func:`p1_latency_s`);
- the master's overhead per gradient it waited for (``overhead_idle``): the same P = 1 runs as the gradients,
  ``master_busy_s`` less the update;
- how late an emulated wait ends (:func:`measure_lateness_samples`): every sample kept.

Message terms are measured with the hand-off of :data:`experiments.clock.calibration.HANDOFF`. Every engine run
here is async SGD with a constant step on settings derived from the run being calibrated (:func:`derived`), so the
clock's costs are resolved before that run's engine starts (:mod:`experiments.clock.resolve`).
"""

from __future__ import annotations

import os
import statistics
import time

import torch

from algorithms import build_rule
from experiments.clock.calibration import GRAD_ENGINE, HANDOFF
from experiments.engines import get_engine
from experiments.engines.workers import FaultPlan, WorkerSpec, worker_process_setup
from experiments.settings.defaults import option
from experiments.settings.schema import RunSettings
from experiments.training.recorder import Recorder

REPEATS = 5  # repeats of every measurement (the median is used; the spread is reported)
SATURATE_P = 4  # workers that keep a zero-cost master busy
ENGINE_UPDATES = 600  # updates per engine measurement
GRAD_BUDGET_S = 1.0  # seconds a gradient repeat may take: slower gradients are timed fewer times per repeat
GRAD_WARMUP = 5  # gradients of a timing run left out before the repeats
GRAD_PER_REPEAT = 40  # timed gradients per P = 1 run (each run's median is one sample)
LATE_MAX_WAIT_S = 0.25  # longest wait the lateness of emulated waits is sampled at


def derived(
    base: RunSettings,
    transport: str,
    workers: int,
    updates: int,
    batch_size: int,
    lr: float,
    warmup: int | None = None,
    sync: bool = False,
    handoff: str | None = None,
    compute: str = "real",
) -> RunSettings:
    """Settings of a calibration run derived from ``base`` (the run being calibrated; its problem block is kept):
    async SGD with constant step ``lr`` (``sync``: its sync form, the global batch split) on real engine
    ``transport`` at its defaults (conf/engine/), forkserver start, the hand-off ``handoff`` (default the engine's
    :data:`HANDOFF`), ``compute`` (``real``; ``emulated`` validates a timing-only problem's settings),
    ``warmup`` warm-up updates (None: the engine's), evaluated at the start and end only, on the CPU."""
    engine = option("engine", transport)
    engine.update(start_method="forkserver", compute=compute, compute_base_s=None)
    if transport in HANDOFF:
        engine["handoff"] = handoff or HANDOFF[transport]
    if warmup is not None:
        engine["warmup_updates"] = int(warmup)
    algorithm = option("algorithm", "async_sgd")
    algorithm.update(lr=float(lr), lr_schedule="constant", alpha_max=None, lr_factor=1.0)
    if sync:
        algorithm.update(protocol="sync", sync_batch="split", master_computes=None)
    data = base.model_dump()
    data.update(
        workers=int(workers),
        updates=int(updates),
        batch_size=int(batch_size),
        eval_every=1e9,
        device="cpu",
        engine=engine,
        algorithm=algorithm,
        delay=option("delay", "timing"),
        progress=False,
    )
    return RunSettings.model_validate(data)


def _median_time(fn, reps: int, warmup: int = 3) -> float:
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def measure_lateness_samples(base_s: float, budget_s: float = 2.0) -> list[float]:
    """Seconds by which ``time.sleep`` of ``base_s`` seconds ends after its target, as an emulated worker's wait does
    (experiments/engines/emulation.py): ``budget_s / base_s`` waits (5 to 400), in this process with one thread.
    Every sample is kept (sorted): the simulated twin of an emulated run draws from them. A wait longer than
    ``LATE_MAX_WAIT_S`` is sampled at that length: the lateness is the timer's slack and the wake-up, not the
    wait, and a wait of seconds would make the measurement take minutes for a term far below the gradient's."""
    wait = min(float(base_s), LATE_MAX_WAIT_S)
    n = int(min(400, max(5, budget_s / max(wait, 1e-6))))
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        time.sleep(wait)
        out.append(max(0.0, time.perf_counter() - t0 - wait))
    return sorted(out)


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
            out[int(b)].append(_median_time(lambda idx=idx: grad(x, idx), n, warmup=0 if n < 3 else 3))  # slow: warm
    queue.put(out)


def p1_run_samples(
    base: RunSettings, transport: str, problem, batch_size: int, repeats: int = REPEATS, handoff: str | None = None
) -> tuple[list, list, list]:
    """(gradient samples, idle-overhead samples, every gradient's time), seconds: the first two ``repeats`` long
    (one per run), the third ``repeats x GRAD_PER_REPEAT`` long, from as many P = 1 runs of ``problem``
    on engine ``transport`` (with its HANDOFF), real compute, async SGD with a vanishing step (the iterate stays at
    its start), ``GRAD_WARMUP`` warm-up updates and ``GRAD_PER_REPEAT`` timed ones each: per run, the median of the
    worker's ``compute_s`` per gradient (experiments/engines/emulation.py) and the master's ``master_busy_s`` less
    the SGD update (engines/driver.py). Raises RuntimeError when a run fails."""
    upd = measure_update_s(_sgd(), problem.dim)
    grads, idle, every = [], [], []
    n = GRAD_WARMUP + GRAD_PER_REPEAT
    for _ in range(repeats):
        result = _calibration_run(
            derived(base, transport, 1, n, batch_size, lr=1e-12, warmup=GRAD_WARMUP, handoff=handoff), problem
        )
        times = [c[2] for c in sorted(result.compute_times or [], key=lambda c: c[1])]
        if len(times) < n or result.master_busy_s is None:
            raise RuntimeError(f"timing run on engine={transport} logged {len(times)} of {n} gradients")
        grads.append(statistics.median(times[GRAD_WARMUP:]))
        idle.append(max(0.0, result.master_busy_s - upd))
        every.extend(times[GRAD_WARMUP:])
    return grads, idle, every


def engine_grad_samples(base: RunSettings, problem, batch_size: int, repeats: int = REPEATS) -> list[float]:
    """``repeats`` medians, seconds, of ``GRAD_PER_REPEAT`` gradients each, as the worker of a real run computed
    them: P = 1 runs on GRAD_ENGINE (:func:`p1_run_samples`). Raises RuntimeError when a run fails."""
    return p1_run_samples(base, GRAD_ENGINE, problem, batch_size, repeats)[0]


def measure_grad_samples(
    base: RunSettings, problem, batch_size: int, reps: int = 15, repeats: int = REPEATS
) -> list[float]:
    """``repeats`` samples, seconds, of one gradient at minibatch ``batch_size`` as a worker computes it
    (:func:`experiments.clock.calibration.grad_key`): :func:`engine_grad_samples`; for a timing-only problem,
    :func:`probe_grad_samples`.
    Raises RuntimeError when the run or probe fails."""
    if not getattr(problem, "timing_only", False):
        return engine_grad_samples(base, problem, batch_size, repeats)
    return probe_grad_samples(problem, [batch_size], reps, repeats)[int(batch_size)]


def probe_grad_samples(problem, batch_sizes, reps: int = 15, repeats: int = REPEATS) -> dict[int, list[float]]:
    """``{b: repeats samples}``, seconds, of one gradient of timing-only ``problem`` (its ``timed_loss_grad``) at
    each minibatch size ``b``: medians of ``reps`` calls (fewer for a slow gradient, :data:`GRAD_BUDGET_S`), in one
    spawned worker-like process for all the sizes (each start imports torch and builds the
    net). Raises RuntimeError when the probe fails."""
    import queue as queues

    import torch.multiprocessing as tmp

    from experiments.engines.processes import main_script_problem

    sizes = list(dict.fromkeys(int(b) for b in batch_sizes))
    if why := main_script_problem():
        raise RuntimeError(why)
    ctx = tmp.get_context("spawn")
    queue = ctx.Queue()
    p = ctx.Process(target=_grad_probe, args=(problem, sizes, reps, repeats, queue), daemon=True)
    p.start()
    deadline = time.monotonic() + 600 * len(sizes)
    try:
        while True:  # polled: a probe that died at its start is a failure now, not after the whole budget
            try:
                return queue.get(timeout=1.0)
            except queues.Empty:
                if time.monotonic() > deadline:
                    raise
                if not p.is_alive():
                    return queue.get(timeout=5.0)  # what it sent before it ended; Empty when it died without
    except Exception as exc:  # noqa: BLE001 - re-raised with the reason
        raise RuntimeError(f"gradient probe process failed ({type(exc).__name__}; exit code {p.exitcode})") from None
    finally:
        p.join(10)
        if p.is_alive():
            p.kill()
            p.join()


class ZeroCostProblem:
    """A problem of dimension ``dim`` (and ``num_train`` examples) whose gradient costs nothing (a fresh zero
    vector): what remains of an update on a real engine is the transport and the master; on the simulated engine,
    a run's timing without its learning (experiments/clock/predict.py). Module-level, so worker processes can
    unpickle it."""

    def __init__(self, dim: int, num_train: int = 1_000_000) -> None:
        self.name, self.dim, self.num_train, self.device = "zero_cost", int(dim), int(num_train), torch.device("cpu")

    def init_params(self, seed: int) -> torch.Tensor:
        return torch.zeros(self.dim)

    def loss_grad(self, x, idx):
        return 0.0, torch.zeros(self.dim)

    def evaluate(self, x):
        return {"train_loss": 0.0, "train_acc": 0.0, "test_loss": 0.0, "test_acc": 0.0}


def engine_updates(dim: int) -> int:
    """Updates per engine measurement at dimension ``dim``: ENGINE_UPDATES, fewer for large d (each message copies
    4 d bytes), so that one measurement stays near a second; at least 20."""
    return int(max(20, min(ENGINE_UPDATES, 2e8 // (4 * int(dim)))))


def seconds_per_update(base: RunSettings, transport: str, dim: int, workers: int, updates: int | None = None) -> float:
    """Wall seconds per update of async SGD on engine ``transport`` with ``workers`` zero-cost workers (real
    compute, no emulation), over the updates the engine's clock timed (``updates``: default
    :func:`engine_updates`)."""
    return _zero_cost_run(base, transport, dim, workers, updates)[1]


def _zero_cost_run(
    base: RunSettings, transport: str, dim: int, workers: int, updates: int | None, handoff: str | None = None
) -> tuple:
    """(EngineResult, seconds per timed update) of a run of ``workers`` zero-cost workers on engine ``transport``
    (``updates``: default :func:`engine_updates`)."""
    updates = engine_updates(dim) if updates is None else updates
    settings = derived(
        base,
        transport,
        workers,
        updates,
        batch_size=1,
        lr=0.001,
        handoff=handoff,
        compute="emulated" if base.problem.kind == "cnn_timing" else "real",
    )
    if settings.engine.compute != "real":
        # A timing-only problem runs on a real engine only with emulated compute (its net has no data); this run
        # replaces the problem by ZeroCostProblem, whose zero-cost gradients the workers compute for real.
        settings = settings.model_copy(update={"engine": settings.engine.model_copy(update={"compute": "real"})})
    result = _calibration_run(settings, ZeroCostProblem(dim))
    timed = result.timed_samples if result.timed_samples is not None else result.samples
    return result, result.time_s / max(1, timed)


def _calibration_run(settings: RunSettings, problem):
    """One calibration run (:func:`derived` settings) of ``problem``, evaluated only at its start and end on
    nothing (a ZeroCostProblem's free metrics); returns its EngineResult. Raises RuntimeError when the run does not
    end ok."""
    recorder = Recorder(
        ZeroCostProblem(problem.dim),
        {"run_id": "calibration"},
        eval_every=1e9,
        total_epochs=None,
        f_star=None,
        clock="wall",
        progress=False,
    )
    rule = build_rule("sgd", lr=settings.algorithm.hyperparameters["lr"])
    result = get_engine(settings.engine.name).run(problem, rule, settings, recorder)
    if result.status != "ok":
        raise RuntimeError(f"calibration run on engine={settings.engine.name} failed: {result.message}")
    return result


def _sgd(lr: float = 0.001):
    return build_rule("sgd", lr=lr)


def p1_latency_s(
    base: RunSettings, transport: str, dim: int, updates: int | None = None, handoff: str | None = None
) -> float:
    """One latency sample, seconds: a P = 1 run of zero-cost gradients on engine ``transport`` at ``dim``, its
    seconds per timed update less the worker's median ``compute_s`` and the master's ``master_busy_s``, halved
    (clipped at 0; see the module docstring)."""
    result, per_update = _zero_cost_run(base, transport, dim, 1, updates, handoff)
    compute = statistics.median(c[2] for c in result.compute_times)
    return max(0.0, (per_update - compute - result.master_busy_s) / 2)


def round_samples(base: RunSettings, transport: str, dim: int, workers: int, repeats: int = REPEATS) -> list[float]:
    """``repeats`` samples, seconds, of one sync round of ``workers`` zero-cost workers on engine ``transport`` at
    dimension ``dim`` (the hand-out of the iterate to every worker, their replies, the gather and the master's
    bookkeeping; the SGD update at ``dim`` subtracted), each the mean over one run's timed rounds. On a machine with
    fewer cores than processes the rounds include waking processes that wait for a core."""
    upd = measure_update_s(_sgd(), dim)
    out = []
    for _ in range(repeats):
        settings = derived(base, transport, workers, engine_updates(dim), batch_size=workers, lr=0.001, sync=True)
        result = _calibration_run(settings, ZeroCostProblem(dim))
        rounds = max(1, (result.timed_samples or 0) // settings.samples_per_update)
        out.append(max(0.0, result.time_s / rounds - upd))
    return out


def measure_message_terms(
    base: RunSettings, transport: str, dim: int, repeats: int = REPEATS, handoff: str | None = None
) -> tuple[list[float], list[float]]:
    """(latency samples, overhead samples), seconds, each ``repeats`` long, on engine ``transport`` at ``dim``: the
    latency of :func:`p1_latency_s`; the overhead ``T(SATURATE_P) - update_sgd`` (``T(P)``: the seconds per update
    with P zero-cost workers, so that gradients queue at the master). A spinning hand-off (``handoff=spin``) needs a
    core per process, so it cannot be saturated with more workers than cores: its overhead is the master's busy time
    per update of the same P = 1 runs, less the update (the master finds the gradient at once: no wake-up)."""
    upd = measure_update_s(_sgd(), dim)
    lat, over = [], []
    for _ in range(repeats):
        if handoff == "spin":
            result, per_update = _zero_cost_run(base, transport, dim, 1, None, handoff)
            compute = statistics.median(c[2] for c in result.compute_times)
            lat.append(max(0.0, (per_update - compute - result.master_busy_s) / 2))
            over.append(max(0.0, result.master_busy_s - upd))
        else:
            lat.append(p1_latency_s(base, transport, dim, handoff=handoff))
            over.append(max(0.0, seconds_per_update(base, transport, dim, SATURATE_P) - upd))
    return lat, over
