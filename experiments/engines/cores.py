"""The simulated clock on a machine whose C cores the master and the P workers share (``engine.cores``).

When every process has a core of its own (C >= P + 1, and no gradient computed by the master) the simulated engine
uses its dedicated-core event loops (engines/simulated.py); otherwise these loops, which play the same charges on a
machine that shares its cores as the operating system does:

- **Processor sharing.** A worker computing a real gradient is runnable: it needs ``g`` seconds of one core (drawn
  by the compute-time law). The runnable workers share the cores the master leaves free, equally: each progresses
  at rate ``min(1, (C - m) / n)`` core-seconds per second, ``n`` runnable workers, ``m = 1`` while the master is
  busy. An emulated gradient (``engine.compute=emulated``) is a wait, not a load: its worker sleeps until its
  target and takes no core.
- **The master first.** The master sleeps while it waits for a gradient; woken, it runs at once on a core of its
  own (a woken sleeper preempts a worker that has run its share, as Linux's scheduler places it), busy
  ``update_s + overhead_idle_s`` (woken) or ``update_s + overhead_s`` (the gradient was queued) per gradient, as on
  dedicated cores.
- **Messages** take ``latency_s`` in flight (the hand-off and the wake-up of the receiver), as on dedicated cores.
- **The authors' master** (``algorithm.master_computes``, RPI-OPT/APAM ``OpenMP/test/LR_APAM.cc``): when no worker
  gradient is waiting and the run needs more, the master computes a minibatch gradient itself at its current
  iterate (runnable like a worker; staleness 0) and applies it; gradients that arrive meanwhile wait for it.
- **Stops** (a staleness policy's ``stop_delay``: Ringmaster with ``restart``, Rennala): when the master ends an
  update, every worker whose computation has not finished (its iterate in flight, computing, or waiting out an
  emulated target) and whose delay reached ``stop_delay`` is stopped -- its work so far lost, it leaves the cores --
  and handed the current iterate then (one latency in flight), to compute on the same minibatch. A finished
  computation (its gradient in flight or queued) is not stopped: it arrives and the policy discards it.

Events are kept in time order; between two events every runnable process advances at its rate, so a run's clock is
exact for this model (no time step). Cost: O(P) per event.
"""

from __future__ import annotations

import functools
import heapq
import math
from collections import deque

from problems.base import Problem

INF = math.inf
MASTER = -1


class Cores:
    """C cores shared by the master (:data:`MASTER`) and workers, processor-sharing (module docstring).

    ``start(who, demand_s)`` makes a process runnable with ``demand_s`` core-seconds of work; ``next_done()`` is
    the time the first of them finishes; ``advance(t)`` moves every runnable process on to time ``t``."""

    def __init__(self, cores: int) -> None:
        self.cores = float(cores)
        self.now = 0.0
        self.left: dict[int, float] = {}  # runnable process -> core-seconds it still needs

    def _rates(self) -> tuple[float, float]:
        """(master's rate, each runnable worker's rate)."""
        master = 1.0 if MASTER in self.left else 0.0
        n = len(self.left) - (1 if MASTER in self.left else 0)
        free = max(0.0, self.cores - master)
        return min(master, self.cores), (min(1.0, free / n) if n else 0.0)

    def start(self, who: int, demand_s: float) -> None:
        self.left[who] = max(0.0, float(demand_s))

    def next_done(self) -> tuple[float, int | None]:
        """(time, process) of the first runnable process to finish; (inf, None) when none can."""
        rm, rw = self._rates()
        best, who = INF, None
        for p, left in self.left.items():
            rate = rm if p == MASTER else rw
            t = self.now + left / rate if rate > 0 else INF
            if t < best or (t == best and who is not None and p < who):
                best, who = t, p
        return best, who

    def advance(self, t: float) -> None:
        dt = t - self.now
        if dt > 0 and self.left:
            rm, rw = self._rates()
            for p in self.left:
                self.left[p] -= dt * (rm if p == MASTER else rw)
        self.now = max(self.now, t)

    def finish(self, who: int) -> None:
        del self.left[who]


def run_async(
    problem,
    settings,
    limits,
    master,
    stream,
    costs,
    times,
    recorder,
    evaluate,
    warm,
    emulated: bool,
    cores: int,
    own_times=None,
) -> tuple[float, int]:
    """Async protocol with ``delay=timing`` on ``cores`` shared cores (module docstring). ``own_times``: draws of
    the master's own gradients (the authors' master), None when the master computes none. Returns (clock in
    seconds, samples applied)."""
    P, B = settings.workers, settings.batch_size
    grad_s, latency_s = costs.grad_s(B), costs.latency_s
    busy_of = costs.busy_table  # [the master waited for the gradient][it applied it]
    max_updates, max_samples = limits
    cpu = Cores(cores)
    timers: list = []  # (time, seq, kind, worker): "iterate" reaches a worker, "gradient" reaches the master,
    seq = 0  # "wake" ends an emulated worker's wait
    held: dict[int, tuple] = {}  # worker -> (version, loss, gradient) of the gradient it is computing
    batch_of: dict[int, object] = {}  # worker -> the minibatch of that gradient (a stopped worker reuses it)
    running: dict[int, int] = {}  # worker -> seq of its "iterate" or "wake" timer while its computation is unfinished
    queue: deque = deque()  # gradients at the master, in arrival order: (worker, version, loss, gradient)
    serving: tuple | None = None  # what the master is busy with: ("gradient", worker) or ("own", version, loss, g)
    issued, samples = 0, 0
    stops = master.stop_delay is not None

    def timer(t: float, kind: str, w: int) -> int:
        nonlocal seq
        seq += 1
        heapq.heappush(timers, (t, seq, kind, w))
        return seq

    def more() -> bool:
        return issued < max_updates and stream.samples < max_samples

    def send(w: int, t: float, idx) -> None:
        """The current iterate leaves for worker w at time t, to compute on minibatch ``idx``."""
        held[w] = (master.version, *problem.loss_grad(master.x, idx))
        batch_of[w] = idx
        running[w] = timer(t + latency_s, "iterate", w)

    def hand_out(w: int, t: float) -> None:
        """The current iterate leaves for worker w at time t (if the run needs another gradient)."""
        nonlocal issued
        if more():
            issued += 1
            send(w, t, stream.next())

    def stop_stale(t: float) -> None:
        """After an update ending at t: stop every unfinished computation whose delay reached stop_delay."""
        for w in [w for w in running if master.must_stop(held[w][0])]:
            del running[w]  # its pending "iterate" or "wake" timer is void now
            cpu.left.pop(w, None)  # computing: it leaves the cores, its work so far lost
            master.restarted(w, held[w][0])
            send(w, t, batch_of[w])

    def serve_next(now: float, woken: bool) -> None:
        """The master starts on the next queued gradient, or on a gradient of its own, or sleeps."""
        nonlocal serving, issued
        if queue:
            w, version, loss, g = queue.popleft()
            applied = master.receive(g, version, w)
            serving = ("gradient", w, version, loss, applied)
            cpu.start(MASTER, busy_of[woken][applied])
        elif own_times is not None and more():
            issued += 1
            serving = ("own", master.version, *problem.loss_grad(master.x, stream.next()))
            cpu.start(MASTER, own_times.draw(0, grad_s))
        else:
            serving = None

    for w in range(P):
        hand_out(w, 0.0)
    if own_times is not None:
        serve_next(0.0, True)
    while timers or cpu.left:
        t_done, who = cpu.next_done()
        if timers and timers[0][0] <= t_done:
            t, s, kind, w = heapq.heappop(timers)
            if kind != "gradient" and running.get(w) != s:
                continue  # the timer of a stopped computation
            cpu.advance(t)
            if kind == "iterate":  # worker w starts its gradient: a load on the cores, or a wait
                if emulated:
                    running[w] = timer(t + times.draw(w, grad_s), "wake", w)
                else:
                    cpu.start(w, times.draw(w, grad_s))
            elif kind == "wake":
                del running[w]
                timer(t + latency_s, "gradient", w)
            else:  # a gradient reaches the master
                version, loss, g = held.pop(w)
                queue.append((w, version, loss, g))
                if serving is None:
                    serve_next(t, True)
            continue
        if who is None:
            break
        cpu.advance(t_done)
        cpu.finish(who)
        if who != MASTER:  # a worker's gradient is done: it travels to the master
            running.pop(who, None)
            timer(t_done + latency_s, "gradient", who)
            continue
        done, serving = serving, None
        if done[0] == "own":  # the master's own gradient, staleness 0
            _, version, loss, g = done
            samples += B
            recorder.check_loss(loss, samples)
            applied = master.receive(g, version, None)
        else:
            _, w, version, loss, applied = done
            samples += B
            recorder.check_loss(loss, samples)
        if stops and applied:
            stop_stale(t_done)
        if done[0] != "own":
            hand_out(w, t_done)
        if warm.t0 is None:
            warm.updated(master.version, t_done, samples)
        if recorder.due(samples):
            evaluate(t_done, samples)
        serve_next(t_done, False)
    return cpu.now, samples


def run_sync(
    problem, settings, limits, master, stream, costs, times, recorder, evaluate, warm, emulated: bool, cores: int
) -> tuple[float, int]:
    """Sync rounds on ``cores`` shared cores: the P gradients of a round are computed side by side on the cores
    (processor sharing; emulated ones wait and take no core), and the round costs
    :meth:`~experiments.clock.costmodel.CostModel.sync_round_s` of the last one's finish (its hand-out, gather and
    bookkeeping measured at this P on this machine where the calibration has them). Returns (clock in seconds,
    samples applied)."""
    batches = settings.worker_batches
    P = len(batches)
    max_updates, max_samples = limits
    # optional in the Problem interface (docs/INTERFACES.md): without it, the default loop of P loss_grad calls
    round_mean = getattr(problem, "loss_grad_mean", None) or functools.partial(Problem.loss_grad_mean, problem)
    clock = 0.0
    while master.version < max_updates and stream.samples < max_samples:
        demand = [times.draw(w, costs.grad_s(batches[w])) for w in range(P)]
        span = max(demand) if emulated else makespan(demand, cores)
        loss, g = round_mean(master.x, [stream.next(b) for b in batches])
        recorder.check_loss(loss, stream.samples)
        master.receive_round(g, master.version)
        clock += costs.sync_round_s(span, P)
        warm.updated(master.version, clock, stream.samples)
        if recorder.due(stream.samples):
            evaluate(clock, stream.samples)
    return clock, stream.samples


def makespan(demands: list[float], cores: int) -> float:
    """Seconds until the last of ``demands`` (core-seconds, started together) is done on ``cores`` shared cores."""
    cpu = Cores(cores)
    for w, d in enumerate(demands):
        cpu.start(w, d)
    while cpu.left:
        t, who = cpu.next_done()
        cpu.advance(t)
        cpu.finish(who)
    return cpu.now
