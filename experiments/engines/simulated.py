"""The simulated engine: one process, event-driven, exact staleness, a simulated clock (APAM.md §1).

Costs (:mod:`experiments.clock.costmodel`, measured by :mod:`experiments.clock.calibration` on the real engine named by
``engine.transport``, or fixed by ``engine.costs.*``): a gradient ``grad_s(B)`` (scaled per worker by the compute-time
law), a message in flight ``latency_s`` (delays the worker), the master's busy time per gradient
``master_s = update_s + overhead_s`` (receive, update, reply, bookkeeping) for a gradient that waited for the master,
``master_idle_s = update_s + overhead_idle_s`` for one the master waited for (it arrived after the master was free).

Async protocol (APAM, async SGD). P workers; the master hands worker w the current iterate (version v); it reaches
w one latency later and w computes one gradient there, on its next minibatch, in a compute time drawn by
:class:`experiments.training.delays.ComputeTimes`; the gradient reaches the master one latency later; the master,
serving gradients in arrival order, is busy ``master_s`` or ``master_idle_s`` per gradient (above), then the new iterate
travels back to w. The update
that applies the gradient has staleness ``tau = version at apply - v`` (``delay=timing``, the default: the staleness
comes out of this event order). Gradients are computed for real, at the iterate the worker was sent, when it is sent
(the value is the same as computing it at a copy later, and no copy of x is needed), from one seeded minibatch
stream in the order the work is handed out; so with P = 1 the run is exactly the serial loop. As on the real engines
(``engines/driver.py``) the master hands out exactly the gradients the run asks for (``updates``, or ``epochs`` x N
samples) and the run ends when the last of them is applied: none is computed and thrown away, except by a staleness
policy's stops (Ringmaster with ``restart``, Rennala; :func:`_run_timing_stops`, and experiments/engines/cores.py):
after an update, a computation still running whose delay reached the policy's ``stop_delay`` is cancelled (its
compute time so far lost) and its worker handed the current iterate at that moment, to compute on the same
minibatch.

Artificial delays (``fixed``, ``uniform``; paper Sec. 5.4; ``none`` only with P = 1, see
:mod:`experiments.settings.schema`): the iterate a gradient is computed at is chosen by the delay model from a ring of
the newest iterates when the gradient is applied (so it is computed then, in arrival order), while the clock still
follows the event queue above.

Sync protocol (sync AMSGrad). Each round all P workers compute at the same iterate (global batch split across
them, or a full batch each: ``algorithm.sync_batch``), so the round's mean gradient is computed in one call
(``problem.loss_grad_mean``: for a model without batch statistics one pass over the P minibatches together); a round
costs ``latency + slowest + latency + overhead_idle
+ (P - 1) overhead + update`` -- with P = 1 exactly one async update, as on the real engines.

Emulated compute (``engine.compute=emulated``: the twin of a run on a real engine whose workers wait for targets):
each gradient's time is the law's draw for ``engine.compute_base_s`` plus a draw of the wait's wake-up lateness,
calibrated on this machine (:class:`EmulatedTimes`), as the emulated worker
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

import numpy as np

from experiments.engines import EngineResult, cores, twin, warmup_updates
from experiments.training.delays import ArtificialDelay, ComputeTimes, IterateRing
from experiments.training.master import Master
from experiments.training.sampling import BatchStream
from problems.base import Problem

ARTIFICIAL_DELAYS = ("none", "fixed", "uniform")


def _master_times(settings, seed: int, xi) -> ComputeTimes:
    """The compute-time law of the authors' master's own gradients: the run's law for one agent, without the
    workers' spread or slowdown."""
    d = settings.delay
    if d.model == "timing":
        d = d.model_copy(update={"slow_workers": 0, "slowdown": 1.0, "spread": "equal"})
    return ComputeTimes.of_delay(1, d, seed=seed, xi=xi)


class WarmupClock:
    """When the simulated clock starts: once ``warmup`` updates are applied (0: at t = 0). ``time(t)`` is the clock
    at simulated time ``t`` (0 before the start); ``samples0`` the samples applied before it."""

    def __init__(self, warmup: int, recorder=None) -> None:
        self.warmup, self.t0, self.samples0 = int(warmup), (0.0 if int(warmup) <= 0 else None), 0
        self.recorder = recorder  # told when the clock starts (Recorder.clock_from)
        if recorder is not None and self.t0 is None:
            recorder.clock_from = None

    def updated(self, version: int, t: float, samples: int) -> None:
        """After an update: start the clock at ``t`` if this was the ``warmup``-th."""
        if self.t0 is None and version >= self.warmup:
            self.t0, self.samples0 = t, samples
            if self.recorder is not None:
                self.recorder.clock_from = samples

    def time(self, t: float) -> float:
        return 0.0 if self.t0 is None else t - self.t0


def run(problem, rule, settings, recorder, costs) -> EngineResult:
    """Run one simulated training run; see the module docstring for the model.

    Args:
        problem: a :class:`problems.base.Problem`.
        rule: an update rule from :func:`algorithms.build_rule`.
        settings: the run's :class:`~experiments.settings.schema.RunSettings`.
        recorder: the run's :class:`experiments.training.recorder.Recorder` (evaluation points).
        costs: the run's :class:`experiments.clock.resolve.RunCosts` (its cost model, and the wake-up lateness of
            an emulated run's waits), resolved before the run.

    Returns:
        EngineResult on the simulated clock (seconds).

    Raises:
        experiments.training.recorder.Diverged: the loss diverged.
    """
    P, B, N, seed = settings.workers, settings.batch_size, problem.num_train, settings.seed
    protocol = settings.algorithm.protocol
    model = costs.costs
    trace = settings.engine.trace is not None  # the twin replays recorded times: no law to draw from
    law = (
        ComputeTimes(P, seed=seed + 1)
        if trace
        else ComputeTimes.of_delay(P, settings.delay, seed=seed + 1, xi=costs.xi)
    )
    times = EmulatedTimes(law, costs.lateness, seed=seed + 3)
    stream = BatchStream(N, B, seed)
    master = Master(rule, problem.init_params(seed), protocol, P, policy=settings.algorithm.policy)
    recorder.attach(master)
    warm = WarmupClock(warmup_updates(settings, N), recorder)
    limits = settings.run_limits(N)

    def evaluate(clock: float, samples: int) -> None:
        recorder.record(master.x, samples, master.version, master.gradients, warm.time(clock), master.take_staleness())

    evaluate(0.0, 0)
    args = (problem, settings, limits, master, stream, model, times, recorder, evaluate, warm)
    C = settings.shared_cores()
    emulated = settings.engine.compute == "emulated"
    own = settings.algorithm.master_computes
    if trace:  # the trace-driven twin (engines/twin.py)
        timeline = twin.Timeline(settings.engine.trace, P, protocol)
        loop = twin.run_sync if protocol == "sync" else twin.run_async
        clock, samples = loop(problem, settings, limits, master, stream, timeline, recorder, evaluate, warm)
    elif protocol == "sync":
        clock, samples = _run_sync(*args) if C is None else cores.run_sync(*args, emulated, C)
    elif settings.delay.model in ARTIFICIAL_DELAYS:
        clock, samples = _run_artificial(*args)
    elif C is None and not own:
        clock, samples = _run_timing(*args) if master.stop_delay is None else _run_timing_stops(*args)
    else:
        own_times = _master_times(settings, seed + 4, costs.xi) if own else None
        clock, samples = cores.run_async(*args, emulated, C or P + 2, own_times)
    if recorder.rows[-1]["gradients"] != master.gradients:
        evaluate(clock, samples)
    short = trace and master.version < limits[0] and samples < limits[1]  # the recorded run had fewer gradients
    message = f"the timeline (engine.trace) ran out after {master.version} updates" if short else ""
    overflow = not math.isfinite(warm.time(clock))  # costs or recorded times whose sum no float holds
    if overflow:
        message = f"the simulated clock overflowed after {master.version} updates (its time is not a finite number)"
    return EngineResult(
        status="failed" if overflow else "ok",
        message=message,
        updates=master.version,
        gradients=master.gradients,
        samples=samples,
        time_s=warm.time(clock),
        timed_samples=samples - warm.samples0 if warm.warmup > 0 else None,
        histogram=master.histogram,
        costs=model.as_dict(max(model.grad)) if model is not None else {},
        provenance={
            "cost_source": model.transport if model is not None else "trace",
            "cost_spread": model.spread if model is not None else {},
            "calibration": costs.calibration,
            **({"trace": settings.engine.trace} if settings.engine.trace else {}),
            **({"emulated_late_s_median": times.median_s} if times.samples is not None else {}),
        },
    )


class EmulatedTimes:
    """The compute-time model of ``times`` (:class:`experiments.training.delays.ComputeTimes`) for the simulated twin of
    an emulated run: each draw gets one draw of the wait's wake-up lateness added, from ``samples`` (seconds;
    :func:`experiments.clock.resolve.emulated_lateness`) with its own seeded generator, as a real engine's emulated
    worker computes, then sleeps until its target and wakes that late (experiments/engines/emulation.py). With no
    samples (real compute) the draws are ``times``' own."""

    def __init__(self, times, samples: list[float] | None, seed: int) -> None:
        self.times, self.samples = times, None if samples is None else np.asarray(samples, dtype=float)
        self.median_s = None if samples is None else float(np.median(self.samples))
        self._rng = np.random.default_rng(seed)
        self.draw = times.draw if samples is None else self._draw

    def _draw(self, worker: int, base_s: float) -> float:
        return self.times.draw(worker, base_s) + float(self.samples[self._rng.integers(len(self.samples))])


def _run_sync(problem, settings, limits, master, stream, costs, times, recorder, evaluate, warm) -> tuple[float, int]:
    """Sync rounds (see the module docstring). Returns (clock in seconds, samples applied)."""
    clock = 0.0
    batches = settings.worker_batches
    P = len(batches)
    # optional in the Problem interface (docs/INTERFACES.md): without it, the default loop of P loss_grad calls
    round_mean = getattr(problem, "loss_grad_mean", None) or functools.partial(Problem.loss_grad_mean, problem)
    max_updates, max_samples = limits
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


def _run_timing(problem, settings, limits, master, stream, costs, times, recorder, evaluate, warm) -> tuple[float, int]:
    """Async with ``delay=timing``: staleness from the event order. Returns (clock in seconds, samples applied)."""
    P, B = settings.workers, settings.batch_size
    # plain numbers and bound methods in the hot loop: the bookkeeping per gradient is a few microseconds
    # (benchmarks/bench_simulated.py measures it against the plain serial loop)
    grad_s, latency_s = costs.grad_s(B), costs.latency_s
    busy_of = costs.busy_table  # [the master waited for the gradient][it applied it]
    max_updates, max_samples = limits
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


def _run_timing_stops(
    problem, settings, limits, master, stream, costs, times, recorder, evaluate, warm
) -> tuple[float, int]:
    """:func:`_run_timing` with stops (a policy's ``stop_delay``: Ringmaster with ``restart``, Rennala): after each
    update, every computation still running whose delay ``version - read version`` reached ``stop_delay`` is
    cancelled -- its compute time so far is lost, its gradient never reaches the master -- and its worker is handed
    the current iterate at that moment (the update's end, the master's reply one latency in flight), to compute on
    the same minibatch. A computation that had finished by then (its gradient in flight or queued at the master) is
    not stopped: it arrives and the policy discards it. The master's busy time per update is the cost model's; a
    stop adds no master time. Returns (clock in seconds, samples applied)."""
    P, B = settings.workers, settings.batch_size
    grad_s, latency_s = costs.grad_s(B), costs.latency_s
    busy_of = costs.busy_table  # [the master waited for the gradient][it applied it]
    max_updates, max_samples = limits
    loss_grad, next_batch, draw, receive, due = problem.loss_grad, stream.next, times.draw, master.receive, recorder.due
    check_loss, heappop, heappush, must_stop = recorder.check_loss, heapq.heappop, heapq.heappush, master.must_stop
    queue = []  # (arrival time at the master, job number, worker); a stopped job's entry is skipped
    job: dict[int, tuple] = {}  # worker -> (job number, compute end, version, minibatch, loss, gradient)
    counter = issued = 0

    def start(w: int, t: float, idx) -> None:
        """Worker w gets the current iterate at time t and computes on minibatch ``idx``."""
        nonlocal counter
        counter += 1
        loss, g = loss_grad(master.x, idx)
        end = t + draw(w, grad_s)
        job[w] = (counter, end, master.version, idx, loss, g)
        heappush(queue, (end + latency_s, counter, w))

    def hand_out(w: int, t: float) -> None:
        nonlocal issued
        if issued < max_updates and stream.samples < max_samples:
            issued += 1
            start(w, t, next_batch())

    for w in range(P):
        hand_out(w, latency_s)
    master_free, samples = 0.0, 0
    while queue:
        arrival, number, w = heappop(queue)
        current = job.get(w)
        if current is None or current[0] != number:
            continue  # a stopped computation: it never sent anything
        del job[w]
        _, _, version, _, loss, g = current
        samples += B
        check_loss(loss, samples)
        applied = receive(g, version, w)
        master_free = max(arrival, master_free) + busy_of[arrival > master_free][applied]
        if applied:
            for v, (_, end, read, idx, _, _) in list(job.items()):
                if end > master_free and must_stop(read):  # still computing, its delay reached the threshold
                    master.restarted(v, read)
                    start(v, master_free + latency_s, idx)
        if warm.t0 is None:
            warm.updated(master.version, master_free, samples)
        hand_out(w, master_free + latency_s)
        if due(samples):
            evaluate(master_free, samples)
    return master_free, samples


def _run_artificial(
    problem, settings, limits, master, stream, costs, times, recorder, evaluate, warm
) -> tuple[float, int]:
    """Async with an artificial delay: the iterate of each gradient is chosen by the delay model from a ring of the
    newest iterates when the gradient is applied. Returns (clock in seconds, samples applied)."""
    P, d = settings.workers, settings.delay
    delay = ArtificialDelay(
        d.model, tau=getattr(d, "tau", 0), max_delay=getattr(d, "max_delay", 0), seed=settings.seed + 2
    )
    ring = IterateRing(delay.window)
    ring.push(0, master.x)
    grad_s, latency_s = costs.grad_s(settings.batch_size), costs.latency_s
    busy_of = costs.busy_table
    max_updates, max_samples = limits
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
