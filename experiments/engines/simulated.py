"""The simulated engine: one process, event-driven, exact staleness, a simulated clock (APAM.md §1; issue 4).

Async protocol (APAM, async SGD). P workers; the master hands worker w the current iterate (version v) and the
worker computes one gradient there, on its next minibatch, in a compute time drawn by
:class:`experiments.delays.ComputeTimes`; the gradient reaches the master one message later; the master, serving
gradients in arrival order, is busy ``update_s + msg_s`` per gradient (apply, then send the new iterate back), and
the worker starts its next gradient when the iterate arrives. The update that applies the gradient has staleness
``tau = version at apply - v`` (``delay=timing``: the staleness comes out of this event order). Gradients are
computed for real, at the iterate the worker was sent, when it is sent (the value is the same as computing it at
a copy later, and no copy of x is needed), from one seeded minibatch stream in the order the work is handed out;
so with P = 1 the run is exactly the serial loop. As on the real engines (``engines/_driver.py``) the master hands
out exactly the gradients the run asks for (``updates``, or ``epochs`` x N samples) and the run ends when the last
of them is applied: none is computed and thrown away.

Artificial delays (``none``, ``fixed``, ``uniform``; paper Sec. 5.4): the iterate a gradient is computed at is
chosen by the delay model from a ring of the newest iterates when the gradient is applied (so it is computed then,
in arrival order), while the clock still follows the event queue above.

Sync protocol (sync AMSGrad). Each round all P workers compute at the same iterate (global batch split across
them, or a full batch each: ``algorithm.sync_batch``); a round costs the P iterates sent out one after another by
the master, the slowest worker, the last gradient's message back, and one update: ``P msg + slowest + msg +
update`` -- with P = 1 exactly one async update (iterate out, gradient back), as on the real engines.

Memory: one gradient per in-flight worker (timing), or a ring of max_delay + 1 iterates (artificial delays).
"""
from __future__ import annotations

import heapq
import math

from experiments.costmodel import Calibration, build_cost_model
from experiments.delays import ArtificialDelay, ComputeTimes, IterateRing
from experiments.engines import EngineResult
from experiments.master import Master
from experiments.sampling import BatchStream

ARTIFICIAL_DELAYS = ("none", "fixed", "uniform")


def split_batch(batch_size: int, workers: int) -> list[int]:
    """Per-worker minibatch sizes of a global batch split across ``workers`` (sizes differ by at most one)."""
    base, extra = divmod(int(batch_size), int(workers))
    return [base + (1 if w < extra else 0) for w in range(workers)]


def _limits(cfg, num_train: int) -> tuple[float, float]:
    """The run's length as plain numbers (updates, samples), one of them infinite: ``updates`` if set, else
    ``epochs`` x N samples. The loops run while ``master.version < updates and stream.samples < samples``."""
    if cfg.get("updates"):
        return int(cfg.updates), math.inf
    return math.inf, float(cfg.epochs) * num_train


def run(problem, rule, cfg, recorder) -> EngineResult:
    """Run one simulated training run; see the module docstring for the model.

    Args:
        problem: a :class:`problems.base.Problem`.
        rule: an update rule from :func:`algorithms.build_rule`.
        cfg: the run's resolved config (workers, seed, epochs or updates, batch_size, algorithm, delay, engine).
        recorder: the run's :class:`experiments.recorder.Recorder` (evaluation points).

    Returns:
        EngineResult on the simulated clock (seconds).

    Raises:
        experiments.recorder.Diverged: the loss diverged.
    """
    P, B, N = int(cfg.workers), int(cfg.batch_size), problem.num_train
    protocol = cfg.algorithm.protocol
    sync_split = protocol == "sync" and cfg.algorithm.get("sync_batch", "split") == "split"
    batches = split_batch(B, P) if sync_split else [B] * P
    calibration = Calibration(cfg.engine.get("calibration") or f"{cfg.results_dir}/calibration.json")
    costs = build_cost_model(problem, rule, batches, cfg.engine.get("costs"), calibration,
                             algorithm_cfg=cfg.algorithm, ref_batch=B)
    d = cfg.delay
    times = ComputeTimes.from_config(P, d, seed=cfg.seed + 1)
    stream = BatchStream(N, B, cfg.seed)
    master = Master(rule, problem.init_params(cfg.seed), protocol, P, policy=cfg.algorithm.get("policy"))
    recorder.attach(master)

    def evaluate(clock: float, samples: int) -> None:
        recorder.record(master.x, samples, master.version, master.gradients, clock, master.take_staleness())

    evaluate(0.0, 0)
    if protocol == "sync":
        loop = _run_sync
    elif cfg.delay.model in ARTIFICIAL_DELAYS:
        loop = _run_artificial
    else:
        loop = _run_timing
    clock, samples = loop(problem, cfg, master, stream, batches, costs, times, recorder, evaluate)
    if recorder.rows[-1]["gradients"] != master.gradients:
        evaluate(clock, samples)
    return EngineResult(updates=master.version, gradients=master.gradients, samples=samples, time_s=clock,
                        histogram=master.histogram,
                        costs={"grad_s": costs.grad_s(batches[0]), "update_s": costs.update_s, "msg_s": costs.msg_s})


def _run_sync(problem, cfg, master, stream, batches, costs, times, recorder, evaluate) -> tuple[float, int]:
    """Sync rounds (see the module docstring). Returns (clock in seconds, samples applied)."""
    clock = 0.0
    P = len(batches)
    max_updates, max_samples = _limits(cfg, problem.num_train)
    while master.version < max_updates and stream.samples < max_samples:
        slowest = max(times.draw(w, costs.grad_s(batches[w])) for w in range(P))
        version = master.version
        for w in range(P):
            loss, g = problem.loss_grad(master.x, stream.next(batches[w]))
            recorder.check_loss(loss, stream.samples)
            master.receive(g, version, worker=w)
        clock += P * costs.msg_s + slowest + costs.msg_s + costs.update_s
        if recorder.due(stream.samples):
            evaluate(clock, stream.samples)
    return clock, stream.samples


def _run_timing(problem, cfg, master, stream, batches, costs, times, recorder, evaluate) -> tuple[float, int]:
    """Async with ``delay=timing``: staleness from the event order. Returns (clock in seconds, samples applied)."""
    P, N, B = int(cfg.workers), problem.num_train, int(cfg.batch_size)
    # plain numbers and bound methods in the hot loop: the bookkeeping per gradient is a few microseconds
    # (benchmarks/bench_simulated.py measures it against the plain serial loop)
    grad_s, msg_s, update_s = costs.grad_s(B), costs.msg_s, costs.update_s
    max_updates, max_samples = _limits(cfg, N)
    loss_grad, next_batch, draw, receive, due = problem.loss_grad, stream.next, times.draw, master.receive, recorder.due
    check_loss, heappop, heappush = recorder.check_loss, heapq.heappop, heapq.heappush
    queue = []  # in-flight work: (arrival time at the master, worker, version it was computed at, loss, gradient)
    issued = 0

    def hand_out(w: int, start: float) -> None:
        """Send worker w the current iterate at time ``start`` (if the run needs another gradient)."""
        nonlocal issued
        if issued < max_updates and stream.samples < max_samples:
            issued += 1
            loss, g = loss_grad(master.x, next_batch())
            heappush(queue, (start + draw(w, grad_s) + msg_s, w, master.version, loss, g))

    for w in range(P):  # the initial iterate reaches every worker (one message), then each starts computing
        hand_out(w, msg_s)
    master_free, samples = 0.0, 0
    while queue:
        arrival, w, version, loss, g = heappop(queue)
        samples += B
        check_loss(loss, samples)
        # the master starts on this gradient when it arrives or when it is free; busy: the update (none when a
        # staleness policy discards or holds the gradient), then the reply
        busy = update_s if receive(g, version, w) else 0.0
        master_free = max(arrival, master_free) + busy + msg_s
        hand_out(w, master_free)
        if due(samples):
            evaluate(master_free, samples)
    return master_free, samples


def _run_artificial(problem, cfg, master, stream, batches, costs, times, recorder, evaluate) -> tuple[float, int]:
    """Async with an artificial delay: the iterate of each gradient is chosen by the delay model from a ring of the
    newest iterates when the gradient is applied. Returns (clock in seconds, samples applied)."""
    P, N = int(cfg.workers), problem.num_train
    delay = ArtificialDelay(cfg.delay.model, tau=cfg.delay.get("tau", 0), max_delay=cfg.delay.get("max_delay", 0),
                            seed=cfg.seed + 2)
    ring = IterateRing(delay.window)
    ring.push(0, master.x)
    grad_s, msg_s, update_s = costs.grad_s(int(cfg.batch_size)), costs.msg_s, costs.update_s
    max_updates, max_samples = _limits(cfg, N)
    loss_grad, next_batch, draw, receive, due = problem.loss_grad, stream.next, times.draw, master.receive, recorder.due
    choose, check_loss, heappop, heappush = delay.choose, recorder.check_loss, heapq.heappop, heapq.heappush
    queue = []
    for w in range(P):  # the initial iterate reaches every worker, then each starts computing
        heappush(queue, (msg_s + draw(w, grad_s), w))
    master_free = 0.0
    while master.version < max_updates and stream.samples < max_samples:
        finish, w = heappop(queue)
        version = master.version - choose(master.version)
        loss, g = loss_grad(ring.get(version), next_batch())
        check_loss(loss, stream.samples)
        applied = receive(g, version, w)  # False when a staleness policy drops or holds it: no update, no iterate
        master_free = max(finish + msg_s, master_free) + (update_s if applied else 0.0) + msg_s
        if applied:
            ring.push(master.version, master.x)
        heappush(queue, (master_free + draw(w, grad_s), w))
        if due(stream.samples):
            evaluate(master_free, stream.samples)
    return master_free, stream.samples


def predicted_time_per_epoch(costs, workers: int, batch_size: int, num_train: int, protocol: str) -> float:
    """The cost model's closed form for P equal constant-time workers (seconds per epoch).

    Async: each worker's cycle is ``grad + 2 msg + update``; the master serves at most one gradient per
    ``update + msg``; so an update takes ``max(cycle / P, update + msg)`` in steady state.
    Sync (split batch): a round of ``batch_size`` samples costs ``grad(B/P) + (P + 1) msg + update``.
    """
    steps = num_train / batch_size
    if protocol == "sync":
        return steps * (costs.grad_s(math.ceil(batch_size / workers)) + (workers + 1) * costs.msg_s + costs.update_s)
    cycle = costs.grad_s(batch_size) + 2 * costs.msg_s + costs.update_s
    return steps * max(cycle / workers, costs.update_s + costs.msg_s)
