"""The simulated engine: one process, event-driven, exact staleness, a simulated clock (APAM.md §1; issue 4).

Costs (:mod:`experiments.clock.costmodel`, measured by :mod:`experiments.clock.calibration` on the real engine named by
``engine.transport``, or fixed by ``engine.costs.*``): a gradient ``grad_s(B)`` (scaled per worker by the compute-time
law), a message in flight ``latency_s`` (delays the worker), the master's busy time per gradient
``master_s = update_s + overhead_s`` (receive, update, reply, bookkeeping) for a gradient that waited for the master,
``master_idle_s = update_s + overhead_idle_s`` for one the master waited for (it arrived after the master was free).

Async protocol (APAM, async SGD). P workers; the master hands worker w the current iterate (version v); it reaches
w one latency later and w computes one gradient there, on its next minibatch, in a compute time drawn by
:class:`experiments.training.delays.ComputeTimes`; the gradient reaches the master one latency later; the master, serving
gradients in arrival order, is busy ``master_s`` or ``master_idle_s`` per gradient (above), then the new iterate
travels back to w. The update
that applies the gradient has staleness ``tau = version at apply - v`` (``delay=timing``, the default: the staleness
comes out of this event order). Gradients are computed for real, at the iterate the worker was sent, when it is sent
(the value is the same as computing it at a copy later, and no copy of x is needed), from one seeded minibatch
stream in the order the work is handed out; so with P = 1 the run is exactly the serial loop. As on the real engines
(``engines/driver.py``) the master hands out exactly the gradients the run asks for (``updates``, or ``epochs`` x N
samples) and the run ends when the last of them is applied: none is computed and thrown away.

Artificial delays (``fixed``, ``uniform``; paper Sec. 5.4; ``none`` only with P = 1, see
:mod:`experiments.settings.validate`): the iterate a gradient is computed at is chosen by the delay model from a ring of the
newest iterates when the gradient is applied (so it is computed then, in arrival order), while the clock still
follows the event queue above.

Sync protocol (sync AMSGrad). Each round all P workers compute at the same iterate (global batch split across
them, or a full batch each: ``algorithm.sync_batch``), so the round's mean gradient is computed in one call
(``problem.loss_grad_mean``: for a model without batch statistics one pass over the P minibatches together); a round
costs ``latency + slowest + latency + overhead_idle
+ (P - 1) overhead + update`` -- with P = 1 exactly one async update, as on the real engines.

Emulated compute (``engine.compute=emulated``: the twin of a run on a real engine whose workers wait for targets):
each gradient's time is the law's draw for ``engine.compute_base_s`` plus a draw of the wait's wake-up lateness,
calibrated on this machine (:class:`EmulatedTimes`; 0.1-0.2 ms for a 2-50 ms wait here), as the emulated worker
wakes late.

Clock start (``engine.warmup_updates``, default 0): the clock starts once the warm-up updates are applied, by the
real engines' rule (:func:`experiments.engines.warmup_updates`: for async at least P, one whole round; at
most half the run), so a simulated twin of a measured run (model_validation, paper_timing: 5 on both sides) times
the same updates as the measured one. Trace times are 0 before the start.

Memory: one gradient per in-flight worker (timing), or a ring of max_delay + 1 iterates (artificial delays).
"""
from __future__ import annotations

import functools
import heapq
import math

from experiments.clock.calibration import Calibration, cost_model, emulated_lateness
from experiments.training.delays import ArtificialDelay, IterateRing, compute_times
from experiments.engines import EngineResult, warmup_updates
from experiments.training.master import Master
from experiments.training.sampling import BatchStream, split_batch
from problems.base import Problem

ARTIFICIAL_DELAYS = ("none", "fixed", "uniform")


def _limits(cfg, num_train: int) -> tuple[float, float]:
    """The run's length as plain numbers (updates, samples), one of them infinite: ``updates`` if set, else
    ``epochs`` x N samples. The loops run while ``master.version < updates and stream.samples < samples``."""
    if cfg.get("updates"):
        return int(cfg.updates), math.inf
    return math.inf, float(cfg.epochs) * num_train


class WarmupClock:
    """When the simulated clock starts: once ``warmup`` updates are applied (0: at t = 0). ``time(t)`` is the clock
    at simulated time ``t`` (0 before the start); ``samples0`` the samples applied before it."""

    def __init__(self, warmup: int) -> None:
        self.warmup, self.t0, self.samples0 = int(warmup), (0.0 if int(warmup) <= 0 else None), 0

    def updated(self, version: int, t: float, samples: int) -> None:
        """After an update: start the clock at ``t`` if this was the ``warmup``-th."""
        if self.t0 is None and version >= self.warmup:
            self.t0, self.samples0 = t, samples

    def time(self, t: float) -> float:
        return 0.0 if self.t0 is None else t - self.t0


def run(problem, rule, cfg, recorder) -> EngineResult:
    """Run one simulated training run; see the module docstring for the model.

    Args:
        problem: a :class:`problems.base.Problem`.
        rule: an update rule from :func:`algorithms.build_rule`.
        cfg: the run's resolved config (workers, seed, epochs or updates, batch_size, algorithm, delay, engine).
        recorder: the run's :class:`experiments.training.recorder.Recorder` (evaluation points).

    Returns:
        EngineResult on the simulated clock (seconds).

    Raises:
        experiments.training.recorder.Diverged: the loss diverged.
    """
    P, B, N = int(cfg.workers), int(cfg.batch_size), problem.num_train
    protocol = cfg.algorithm.protocol
    sync_split = protocol == "sync" and cfg.algorithm.get("sync_batch", "split") == "split"
    batches = split_batch(B, P) if sync_split else [B] * P
    costs = run_costs(problem, rule, cfg, batches)
    calibration = Calibration(cfg.engine.get("calibration") or None)
    times = EmulatedTimes(compute_times(cfg, seed=cfg.seed + 1), emulated_lateness(cfg.engine, calibration),
                          seed=cfg.seed + 3)
    stream = BatchStream(N, B, cfg.seed)
    master = Master(rule, problem.init_params(cfg.seed), protocol, P, policy=cfg.algorithm.get("policy"))
    recorder.attach(master)
    warm = WarmupClock(warmup_updates(cfg, P, N, sum(batches) if protocol == "sync" else B))

    def evaluate(clock: float, samples: int) -> None:
        recorder.record(master.x, samples, master.version, master.gradients, warm.time(clock),
                        master.take_staleness())

    evaluate(0.0, 0)
    if protocol == "sync":
        loop = _run_sync
    elif cfg.delay.model in ARTIFICIAL_DELAYS:
        loop = _run_artificial
    else:
        loop = _run_timing
    clock, samples = loop(problem, cfg, master, stream, batches, costs, times, recorder, evaluate, warm)
    if recorder.rows[-1]["gradients"] != master.gradients:
        evaluate(clock, samples)
    return EngineResult(updates=master.version, gradients=master.gradients, samples=samples, time_s=warm.time(clock),
                        timed_samples=samples - warm.samples0 if warm.warmup > 0 else None,
                        histogram=master.histogram,
                        costs=costs.as_dict(batches[0]),
                        provenance={"cost_source": costs.transport, "cost_spread": costs.spread,
                                    "calibration": str(calibration.path),
                                    **({"emulated_late_s_median": times.median_s} if times.samples is not None
                                       else {})})


class EmulatedTimes:
    """The compute-time model of ``times`` (:class:`experiments.training.delays.ComputeTimes`) for the simulated twin of an
    emulated run: each draw gets one draw of the wait's wake-up lateness added, from ``samples`` (seconds;
    :func:`experiments.clock.calibration.emulated_lateness`) with its own seeded generator, as a real engine's emulated
    worker computes, then sleeps until its target and wakes that late (experiments/engines/emulation.py). With no
    samples (real compute) the draws are ``times``' own."""

    def __init__(self, times, samples: list[float] | None, seed: int) -> None:
        import numpy as np

        self.times, self.samples = times, None if samples is None else np.asarray(samples, dtype=float)
        self.median_s = None if samples is None else float(np.median(self.samples))
        self._rng = np.random.default_rng(seed)
        self.draw = times.draw if samples is None else self._draw

    def _draw(self, worker: int, base_s: float) -> float:
        return self.times.draw(worker, base_s) + float(self.samples[self._rng.integers(len(self.samples))])


def run_costs(problem, rule, cfg, batches: list[int]):
    """The run's :class:`experiments.clock.costmodel.CostModel`: ``engine.costs.*`` where set, the rest from the machine's
    calibration (``engine.calibration``, default :func:`experiments.clock.calibration.machine_path`) of the engine named by
    ``engine.transport`` (default ``shared_memory``); with ``engine.compute=emulated``, ``engine.compute_base_s`` is
    the gradient cost at ``batch_size`` (as on the emulated real engines)."""
    calibration = Calibration(cfg.engine.get("calibration") or None)
    fixed = dict(cfg.engine.get("costs") or {})
    if cfg.engine.get("compute") == "emulated" and cfg.engine.get("compute_base_s") is not None:
        fixed["grad_s"] = float(cfg.engine.compute_base_s)  # the emulated real engines' base, at batch_size
    return cost_model(problem, rule, batches, fixed, calibration, algorithm_cfg=cfg.algorithm,
                      ref_batch=int(cfg.batch_size), transport=cfg.engine.get("transport") or "shared_memory")


def _run_sync(problem, cfg, master, stream, batches, costs, times, recorder, evaluate, warm) -> tuple[float, int]:
    """Sync rounds (see the module docstring). Returns (clock in seconds, samples applied)."""
    clock = 0.0
    P = len(batches)
    # optional in the Problem interface (docs/INTERFACES.md): without it, the default loop of P loss_grad calls
    round_mean = getattr(problem, "loss_grad_mean", None) or functools.partial(Problem.loss_grad_mean, problem)
    max_updates, max_samples = _limits(cfg, problem.num_train)
    while master.version < max_updates and stream.samples < max_samples:
        slowest = max(times.draw(w, costs.grad_s(batches[w])) for w in range(P))
        # every worker computes at the round's iterate: the P gradients' mean in one call (one weighted pass where
        # the problem allows it, problems.base.Problem.loss_grad_mean), the minibatches drawn in worker order
        loss, g = round_mean(master.x, [stream.next(b) for b in batches])
        recorder.check_loss(loss, stream.samples)
        master.receive_round(g, master.version)
        clock += costs.sync_round_s(slowest, P)
        warm.updated(master.version, clock, stream.samples)
        if recorder.due(stream.samples):
            evaluate(clock, stream.samples)
    return clock, stream.samples


def _run_timing(problem, cfg, master, stream, batches, costs, times, recorder, evaluate, warm) -> tuple[float, int]:
    """Async with ``delay=timing``: staleness from the event order. Returns (clock in seconds, samples applied)."""
    P, N, B = int(cfg.workers), problem.num_train, int(cfg.batch_size)
    # plain numbers and bound methods in the hot loop: the bookkeeping per gradient is a few microseconds
    # (benchmarks/bench_simulated.py measures it against the plain serial loop)
    grad_s, latency_s = costs.grad_s(B), costs.latency_s
    busy_of = costs.busy_table  # [the master waited for the gradient][it applied it]
    max_updates, max_samples = _limits(cfg, N)
    loss_grad, next_batch, draw, receive, due = problem.loss_grad, stream.next, times.draw, master.receive, recorder.due
    check_loss, heappop, heappush = recorder.check_loss, heapq.heappop, heapq.heappush
    warming = warm.t0 is None  # until the clock starts, each update checks whether it is the warm-up's last
    queue = []  # in-flight work: (arrival time at the master, worker, version it was computed at, loss, gradient)
    issued = 0

    def hand_out(w: int, start: float) -> None:
        """Send worker w the current iterate at time ``start`` (if the run needs another gradient)."""
        nonlocal issued
        if issued < max_updates and stream.samples < max_samples:
            issued += 1
            loss, g = loss_grad(master.x, next_batch())
            heappush(queue, (start + draw(w, grad_s) + latency_s, w, master.version, loss, g))

    for w in range(P):  # the initial iterate reaches every worker (one latency), then each starts computing
        hand_out(w, latency_s)
    master_free, samples = 0.0, 0
    while queue:
        arrival, w, version, loss, g = heappop(queue)
        samples += B
        check_loss(loss, samples)
        # the master starts on this gradient when it arrives or when it is free; busy: receive, update, reply
        # (no update when a staleness policy discards or holds the gradient), longer when it had been waiting
        busy = busy_of[arrival > master_free][receive(g, version, w)]
        master_free = max(arrival, master_free) + busy
        if warming:
            warm.updated(master.version, master_free, samples)
            warming = warm.t0 is None
        hand_out(w, master_free + latency_s)  # the new iterate reaches w one latency later
        if due(samples):
            evaluate(master_free, samples)
    return master_free, samples


def _run_artificial(problem, cfg, master, stream, batches, costs, times, recorder, evaluate,
                    warm) -> tuple[float, int]:
    """Async with an artificial delay: the iterate of each gradient is chosen by the delay model from a ring of the
    newest iterates when the gradient is applied. Returns (clock in seconds, samples applied)."""
    P, N = int(cfg.workers), problem.num_train
    delay = ArtificialDelay(cfg.delay.model, tau=cfg.delay.get("tau", 0), max_delay=cfg.delay.get("max_delay", 0),
                            seed=cfg.seed + 2)
    ring = IterateRing(delay.window)
    ring.push(0, master.x)
    grad_s, latency_s = costs.grad_s(int(cfg.batch_size)), costs.latency_s
    busy_of = costs.busy_table
    max_updates, max_samples = _limits(cfg, N)
    loss_grad, next_batch, draw, receive, due = problem.loss_grad, stream.next, times.draw, master.receive, recorder.due
    choose, check_loss, heappop, heappush = delay.choose, recorder.check_loss, heapq.heappop, heapq.heappush
    queue = []
    for w in range(P):  # the initial iterate reaches every worker, then each starts computing
        heappush(queue, (latency_s + draw(w, grad_s), w))
    master_free = 0.0
    while master.version < max_updates and stream.samples < max_samples:
        finish, w = heappop(queue)
        version = master.version - choose(master.version)
        loss, g = loss_grad(ring.get(version), next_batch())
        check_loss(loss, stream.samples)
        applied = receive(g, version, w)  # False when a staleness policy drops or holds it: no update, no iterate
        arrival = finish + latency_s
        master_free = max(arrival, master_free) + busy_of[arrival > master_free][applied]
        if applied:
            ring.push(master.version, master.x)
        warm.updated(master.version, master_free, stream.samples)
        heappush(queue, (master_free + latency_s + draw(w, grad_s), w))
        if due(stream.samples):
            evaluate(master_free, stream.samples)
    return master_free, stream.samples
