"""The simulated engine: one process, event-driven, exact staleness, a simulated clock (APAM.md §1; issue 4).

Async protocol (APAM, async SGD). P workers each hold a snapshot of the iterate. Worker w finishes a gradient
after a compute time drawn by :class:`experiments.delays.ComputeTimes`; the gradient reaches the master one
message later; the master, serving gradients in arrival order, is busy ``update_s + msg_s`` per gradient (apply,
then send the new iterate back); the worker starts its next gradient when the iterate arrives. Gradients are
computed for real, at the worker's snapshot, in arrival order, from one seeded minibatch stream; so with P = 1 the
run is exactly the serial loop. With ``delay=timing`` the staleness comes out of this event order; with an
artificial delay (``fixed``, ``uniform``) the iterate a gradient is computed at is chosen by the delay model from
a ring of the newest iterates instead, while the clock still follows the event queue.

Sync protocol (sync AMSGrad). Each round all P workers compute at the same iterate (global batch split across
them, or a full batch each: ``algorithm.sync_batch``); a round costs the P iterates sent out one after another by
the master, the slowest worker, the last gradient's message back, and one update: ``P msg + slowest + msg +
update`` -- with P = 1 exactly one async update (iterate out, gradient back), as on the real engines.

Memory: one snapshot per worker (timing), or a ring of max_delay + 1 iterates (artificial delays).
"""
from __future__ import annotations

import heapq
import math

from experiments.costmodel import Calibration, build_cost_model
from experiments.delays import ArtificialDelay, ComputeTimes, IterateRing
from experiments.engines import EngineResult
from experiments.master import Master
from experiments.sampling import BatchStream


def split_batch(batch_size: int, workers: int) -> list[int]:
    """Per-worker minibatch sizes of a global batch split across ``workers`` (sizes differ by at most one)."""
    base, extra = divmod(int(batch_size), int(workers))
    return [base + (1 if w < extra else 0) for w in range(workers)]


def _stop_rule(cfg, num_train: int):
    """``stop(master, stream) -> bool``: the run's length in updates (``updates``) or in epochs (plain numbers, so the
    hot loop never touches the config object)."""
    if cfg.get("updates"):
        k = int(cfg.updates)
        return lambda master, stream: master.version >= k
    samples = float(cfg.epochs) * num_train
    return lambda master, stream: stream.samples >= samples


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
                             rule_key=f"{cfg.algorithm.rule}-{cfg.algorithm.get('variant', '')}", ref_batch=B)
    d = cfg.delay
    times = ComputeTimes(P, law=d.get("law", "constant"), sigma=d.get("sigma", 0.0),
                         slow_workers=d.get("slow_workers", 0), slowdown=d.get("slowdown", 1.0), seed=cfg.seed + 1)
    stream = BatchStream(N, B, cfg.seed)
    master = Master(rule, problem.init_params(cfg.seed), protocol, P)
    recorder.attach(master)

    def evaluate(clock: float) -> None:
        recorder.record(master.x, stream.samples, master.version, master.gradients, clock, master.take_staleness())

    evaluate(0.0)
    if protocol == "sync":
        clock = _run_sync(problem, cfg, master, stream, batches, costs, times, recorder, evaluate)
    else:
        clock = _run_async(problem, cfg, master, stream, costs, times, recorder, evaluate)
    if recorder.rows[-1]["gradients"] != master.gradients:
        evaluate(clock)
    return EngineResult(updates=master.version, gradients=master.gradients, samples=stream.samples, time_s=clock,
                        histogram=master.histogram,
                        costs={"grad_s": costs.grad_s(batches[0]), "update_s": costs.update_s, "msg_s": costs.msg_s})


def _run_sync(problem, cfg, master, stream, batches, costs, times, recorder, evaluate) -> float:
    clock = 0.0
    P = len(batches)
    stop = _stop_rule(cfg, problem.num_train)
    while not stop(master, stream):
        slowest = max(times.draw(w, costs.grad_s(batches[w])) for w in range(P))
        version = master.version
        for w in range(P):
            loss, g = problem.loss_grad(master.x, stream.next(batches[w]))
            recorder.check_loss(loss, stream.samples / problem.num_train)
            master.receive(g, version, worker=w)
        clock += P * costs.msg_s + slowest + costs.msg_s + costs.update_s
        if recorder.due(stream.samples):
            evaluate(clock)
    return clock


def _run_async(problem, cfg, master, stream, costs, times, recorder, evaluate) -> float:
    P = int(cfg.workers)
    model = cfg.delay.model
    artificial = model in ("none", "fixed", "uniform")
    if artificial:
        delay = ArtificialDelay(model, tau=cfg.delay.get("tau", 0), max_delay=cfg.delay.get("max_delay", 0),
                                seed=cfg.seed + 2)
        ring = IterateRing(delay.window)
        ring.push(0, master.x)
    else:
        snapshots = [master.x.clone() for _ in range(P)]
        read_version = [0] * P
    grad_s = costs.grad_s(int(cfg.batch_size))
    queue = []
    for w in range(P):  # the initial iterate reaches every worker, then each starts computing
        heapq.heappush(queue, (costs.msg_s + times.draw(w, grad_s), w))
    master_free = 0.0
    clock = 0.0
    stop = _stop_rule(cfg, problem.num_train)
    while not stop(master, stream):
        finish, w = heapq.heappop(queue)
        if artificial:
            version = master.version - delay.choose(master.version)
            x_read = ring.get(version)
        else:
            version, x_read = read_version[w], snapshots[w]
        loss, g = problem.loss_grad(x_read, stream.next())
        recorder.check_loss(loss, stream.samples / problem.num_train)
        start = max(finish + costs.msg_s, master_free)
        master.receive(g, version, worker=w)
        master_free = start + costs.update_s + costs.msg_s
        clock = master_free
        if artificial:
            ring.push(master.version, master.x)
        else:
            snapshots[w].copy_(master.x)
            read_version[w] = master.version
        heapq.heappush(queue, (master_free + times.draw(w, grad_s), w))
        if recorder.due(stream.samples):
            evaluate(clock)
    return clock


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
