"""The master loop of the real engines, written once over a transport (shared_memory, distributed).

A *transport* moves iterates to workers and gradients back; this loop decides who computes what, feeds the
gradients to :class:`experiments.training.master.Master` (which owns x, the optimizer state and the staleness log),
keeps the wall clock, calls the recorder, and handles lost workers. Engines differ only in their transport.

Work is handed out one gradient at a time: the master copies its current x (version k) to worker w and asks for
one gradient; w computes it at that copy and reports k back, so the staleness of the update that uses it is
exactly ``version at apply - k`` (APAM.md §1: "x_hat_k is exactly the iterate the master last sent to that
worker"). The master hands out exactly the gradients the run asks for (``updates`` K, or ``epochs``), so every
gradient computed reaches the master -- none is lost or thrown away, and without a staleness policy
``gradients`` equals ``updates`` (async) or P x ``updates`` (sync); a policy (experiments/training/policies.py) may
discard gradients it receives, which the ``discarded`` column counts.

Clock (``clock=wall``): ``time.perf_counter`` seconds, started after the warm-up updates
(:func:`experiments.engines.warmup_updates`: ``engine.warmup_updates``, for async at least P of them, at most half
the run's; process start-up and warm-up excluded) and paused around every evaluation. Async evaluation points
(``engine.evaluation``): ``snapshot`` (default) copies the master's x, with the clock paused for the copy only, and
evaluates the copies after the run, so the workers never stop and the staleness is that of the running system;
``drain`` (and ``snapshot`` once the pending copies would pass ``engine.snapshot_mb``) stops handing out work,
applies the gradients still being computed and evaluates with every worker waiting, so no gradient is computed while
the clock is paused -- but each drain restarts the pipeline, and after it P - 1 updates are fresher than in steady
state (a lower mean staleness when evaluations are frequent). A sync round always ends
before an evaluation. The warm-up updates count in ``updates`` and ``epoch`` but not in ``time_s``.

Stops (a staleness policy's ``stop_delay``: Ringmaster with ``restart``, Rennala; experiments/training/policies.py):
after each update, every worker whose outstanding request has a delay ``version - its version`` at or above
``stop_delay`` is handed the current iterate at once through the transport's ``restart`` (which interrupts its
computation; the worker recomputes on the same minibatch; not while draining for an evaluation). Its deadline starts
anew. A stopped computation's gradient that was already sent still arrives, with its old version (or marked
``stale`` by the transport): the master counts it (``gradients``, ``discarded``, the samples it consumed, one more
hand-out) and discards it unread, and the worker's new request stays outstanding.

Lost workers: a worker that dies (or, where the transport can cut it off, stays silent for ``engine.timeout_s``)
is dropped. Async with ``engine.on_worker_loss=continue`` goes on with the others (its unfinished gradient is
handed to another worker) and the result's ``message`` names the lost worker; sync, ``on_worker_loss=fail``, or
losing the last worker ends the run with status ``failed`` after a final evaluation of the master's x.
"""

from __future__ import annotations

import math
import time
from collections import deque

from experiments.engines import EngineResult, warmup_updates
from experiments.engines.emulation import LATE, OVERRAN, log_arrival
from experiments.engines.processes import CONTINUED, noting_continues
from experiments.engines.timeline import PROMPT_WAIT_S, WallClock
from experiments.engines.transport import Arrival, Lost
from experiments.engines.workers import worker_seed
from experiments.errors import WorkerLost
from experiments.training.master import Master
from experiments.training.recorder import Diverged
from experiments.training.sampling import BatchStream


class MasterLoop:
    """One run of the master over a transport. Use :func:`drive`.

    The transport is a :class:`experiments.engines.transport.Transport`.
    """

    def __init__(self, problem, rule, settings, recorder, transport) -> None:
        self.problem, self.recorder, self.transport = problem, recorder, transport
        self.batches = settings.worker_batches
        self.P = len(self.batches)
        self.protocol = settings.algorithm.protocol
        self.master = Master(
            rule, problem.init_params(settings.seed), self.protocol, self.P, policy=settings.algorithm.policy
        )
        recorder.attach(self.master)
        self.clock = WallClock()
        self.samples = 0
        self.samples_at_start = 0  # samples consumed before the clock started (warm-up)
        self.version_at_start = 0  # updates applied before the clock started
        self.wait_s = 0.0  # seconds the master spent waiting for arrivals while the clock ran (master_busy_s)
        e = settings.engine
        self.timeout = float(e.timeout_s)
        self.on_loss = e.on_worker_loss
        self.max_updates = settings.updates
        self.max_samples = None if self.max_updates else float(settings.epochs) * problem.num_train
        self.warmup = warmup_updates(settings, problem.num_train)
        recorder.clock_from = None  # until _applied starts the clock
        self.live = set(range(self.P))
        self.notes: list[str] = []
        self.emulated = e.compute == "emulated"
        self.compute_log: list = []  # (worker, index, compute_s, target_s) per gradient (emulation.py)
        self._counts, self.overruns, self.late_wakeups = [0] * self.P, 0, 0
        self.evaluation = e.evaluation
        self.snapshot_budget = float(e.snapshot_mb) * 2**20
        own = self.protocol == "async" and bool(settings.algorithm.master_computes)
        # the authors' master computes gradients too: its minibatches from the stream of an agent after the workers
        self.own_stream = (
            BatchStream(problem.num_train, settings.batch_size, worker_seed(settings.seed, self.P)) if own else None
        )
        self.own_gradients = 0
        self.own_batch = settings.batch_size
        self.t0 = time.perf_counter()
        self.timeline: list = []  # one row per gradient the master took: TIMELINE_COLUMNS, seconds since t0
        self._issued_at = [0.0] * self.P
        self._waited_until = 0.0
        self._prompt: int | None = None  # the worker whose gradient ended a blocking wait

    # ------------------------------------------------------------------ pieces
    def evaluate(self) -> None:
        """Evaluate the pending snapshots, then the master's x now (clock paused, workers held)."""
        m = self.master
        self.clock.pause()
        with self.transport.hold():
            self.recorder.flush()
            self.recorder.record(
                m.x, self.samples, m.version, m.gradients, self.clock.elapsed(), m.take_staleness(), **self._extra()
            )
        self.clock.resume()

    def snapshot(self) -> bool:
        """An evaluation point without stopping the workers (``engine.evaluation=snapshot``): copy the master's x
        (clock paused for the copy) for evaluation after the run. False when the copy would take the pending
        snapshots past ``engine.snapshot_mb`` (the caller then drains and evaluates)."""
        m = self.master
        if self.recorder.pending_bytes + m.x.numel() * m.x.element_size() > self.snapshot_budget:
            return False
        self.clock.pause()
        self.recorder.snapshot(
            m.x, self.samples, m.version, m.gradients, self.clock.elapsed(), m.take_staleness(), **self._extra()
        )
        self.clock.resume()
        return True

    def _extra(self) -> dict:
        return {"overruns": self.overruns, "late_wakeups": self.late_wakeups} if self.emulated else {}

    def _applied(self, samples: int) -> None:
        self.samples += samples
        if not self.clock.started and self.master.version >= self.warmup:
            self.clock.start()
            self.samples_at_start = self.recorder.clock_from = self.samples
            self.version_at_start = self.master.version

    def _arrived(self, ev: Arrival) -> None:
        """Bookkeeping of one gradient's arrival: its compute time in the log, an overrun or a late wake-up counted,
        then the loss check."""
        code = log_arrival(self.compute_log, self._counts, ev)
        if code == OVERRAN:
            self.overruns += 1
        elif code == LATE:
            self.late_wakeups += 1
        self.recorder.check_loss(ev.loss, self.samples)

    def _events(self, deadlines: dict[int, float], poll: bool = False) -> list:
        """The transport's next events (``poll``: those already there, without waiting); a worker past its deadline
        becomes a Lost event, also while the others keep answering (it is cut off within one wait of its deadline,
        not when the rest run out of work).

        ``deadlines`` (worker -> monotonic seconds) is in deadline order: every entry is ``issue time +
        engine.timeout_s`` and is inserted when its gradient is handed out (after its previous entry was deleted), so
        the first is the earliest -- O(1) per wait instead of a min over the P workers."""
        first = next(iter(deadlines.values())) if deadlines else None
        timeout = 0.0 if poll else (None if first is None else max(0.0, first - time.monotonic()))
        timed, t0 = self.clock.started, time.perf_counter()
        events = self.transport.wait(timeout)
        self._waited_until = time.perf_counter()
        self._prompt = events[0].worker if events and self._waited_until - t0 > PROMPT_WAIT_S else None
        if timed:
            self.wait_s += self._waited_until - t0
        now = time.monotonic()
        continued = bool(CONTINUED)
        CONTINUED.clear()
        if first is None or first > now:
            return events
        answered = {ev.worker for ev in events}
        if any(d <= now and w not in answered for w, d in deadlines.items()):
            # the master itself may have been stopped past their deadlines (kill -STOP, Ctrl-Z), its wait running out
            # meanwhile: what the workers sent is read first, and after a SIGCONT the others get a timeout from now
            events = events + self.transport.wait(0)
            answered = {ev.worker for ev in events}
            for w in [w for w, d in deadlines.items() if continued and d <= now and w not in answered]:
                del deadlines[w]  # re-inserted last: the deadlines stay in time order
                deadlines[w] = now + self.timeout
        silent = [
            Lost(w, f"sent no gradient within engine.timeout_s={self.timeout:g} s")
            for w, d in deadlines.items()
            if d <= now and w not in answered
        ]
        if silent and not self.transport.cuts_off_silent:
            for e in silent:
                self.transport.drop(e.worker)
            raise WorkerLost("; ".join(f"worker {e.worker} {e.reason}" for e in silent))
        return events + silent

    def _lose(self, ev: Lost) -> None:
        if ev.worker not in self.live:
            return
        self.live.discard(ev.worker)
        self.transport.drop(ev.worker)
        note = f"worker {ev.worker} lost, noticed at update {self.master.version} ({ev.reason})"
        if self.protocol == "sync":
            raise WorkerLost(f"{note}: a sync round needs all {self.P} workers")
        if self.on_loss == "fail":
            raise WorkerLost(f"{note} (engine.on_worker_loss=fail)")
        if not self.live:
            raise WorkerLost(f"{note}: no worker left")
        self.notes.append(note)

    def _log(
        self,
        worker: int,
        issued: float,
        arrived: float,
        compute_s: float,
        start: float,
        end: float,
        prompt: bool,
        sent: float = float("nan"),
    ) -> None:
        """One timeline row (:data:`TIMELINE_COLUMNS`), times in seconds since the loop began."""
        t0 = self.t0
        self.timeline.append(
            (worker, issued - t0, arrived - t0, compute_s, start - t0, end - t0, int(prompt), sent - t0)
        )

    def master_busy_s(self) -> float | None:
        """The master's mean seconds per timed update outside its waits for arrivals: receiving, the update,
        handing out work, bookkeeping (evaluation excluded, as from the clock). None before any timed update."""
        timed = self.master.version - self.version_at_start
        if not self.clock.started or timed <= 0:
            return None
        return (self.clock.elapsed() - self.wait_s) / timed

    def _finish(self) -> None:
        self.clock.pause()
        self.recorder.flush()  # the snapshots' rows first: the last may be the master's final state
        self.clock.resume()
        rows = self.recorder.rows
        if not rows or rows[-1]["gradients"] != self.master.gradients:
            self.evaluate()

    # ------------------------------------------------------------------ protocols
    def run_async(self) -> None:
        m = self.master
        idle = deque(range(self.P))
        deadlines: dict[int, float] = {}  # worker -> when it is declared silent
        issued = [0, 0]  # gradients, samples handed out
        version_of = [0] * self.P  # the version of each worker's latest request
        draining = False
        stops = m.stop_delay is not None

        def can_issue(w: int) -> bool:
            if self.max_updates is not None:
                return issued[0] < self.max_updates
            return issued[1] < self.max_samples

        def fill() -> None:
            while idle and not draining and can_issue(idle[0]):
                w = idle.popleft()
                self._issued_at[w] = time.perf_counter()
                self.transport.issue(w, m.x, m.version)
                version_of[w] = m.version
                deadlines[w] = time.monotonic() + self.timeout
                issued[0] += 1
                issued[1] += self.batches[w]

        def stop_stale() -> None:
            """After an update: hand every worker whose request's delay reached the policy's stop_delay the current
            iterate at once (its computation interrupted by the transport)."""
            if draining:
                return
            for w in [w for w in deadlines if w in self.live and m.must_stop(version_of[w])]:
                self._issued_at[w] = time.perf_counter()
                self.transport.restart(w, m.x, m.version)
                m.restarted(w, version_of[w])
                version_of[w] = m.version
                del deadlines[w]  # re-inserted last: the deadlines stay in time order
                deadlines[w] = time.monotonic() + self.timeout

        def own_gradient() -> None:
            """The authors' master: no worker gradient is waiting, so it computes one at its own iterate
            (staleness 0) and applies it."""
            start = time.perf_counter()
            loss, g = self.problem.loss_grad(m.x, self.own_stream.next())
            computed = time.perf_counter()
            issued[0] += 1
            issued[1] += self.own_batch
            self.own_gradients += 1
            self.recorder.check_loss(loss, self.samples)
            if m.receive(g, m.version) and stops:
                stop_stale()
            self._applied(self.own_batch)
            self._log(-1, start, start, computed - start, start, time.perf_counter(), True)

        self.evaluate()
        self._applied(0)
        fill()

        def own_ok() -> bool:
            return self.own_stream is not None and not draining and can_issue(0)

        while deadlines or own_ok():
            events = self._events(deadlines, poll=own_ok())
            if not events and own_ok():
                own_gradient()
                if not draining and self.recorder.due(self.samples):
                    draining = not (self.evaluation == "snapshot" and self.snapshot())
                fill()
                continue
            for ev in events:
                if isinstance(ev, Lost):
                    if ev.worker in deadlines:  # its unfinished gradient goes to another worker
                        del deadlines[ev.worker]
                        issued[0] -= 1
                        issued[1] -= self.batches[ev.worker]
                    if ev.worker in idle:
                        idle.remove(ev.worker)
                    self._lose(ev)
                    continue
                w = ev.worker
                if w not in deadlines or w not in self.live:
                    continue
                if stops and (ev.stale or ev.version < version_of[w]):  # sent before its stop: counted, unread
                    m.receive_stopped(ev.version, w)
                    issued[0] += 1  # the stop's hand-out turned out to be one more gradient
                    issued[1] += self.batches[w]
                    self._applied(self.batches[w])
                    continue
                del deadlines[w]
                start, issued_at = time.perf_counter(), self._issued_at[w]
                self._arrived(ev)
                if m.receive(self.transport.gradient(w), ev.version, worker=w) and stops:
                    stop_stale()
                self._applied(self.batches[w])
                idle.append(w)
                if not draining and self.recorder.due(self.samples):
                    draining = not (self.evaluation == "snapshot" and self.snapshot())
                fill()  # hand w its next gradient at once, before applying the other arrivals
                self._log(
                    w,
                    issued_at,
                    self._waited_until,
                    ev.compute_s,
                    start,
                    time.perf_counter(),
                    self._prompt == w,
                    ev.sent_s,
                )
            if draining and not deadlines:
                self.evaluate()
                draining = False
            fill()
        self._finish()

    def run_sync(self) -> None:
        m = self.master

        def done() -> bool:
            if self.max_updates is not None:
                return m.version >= self.max_updates
            return self.samples >= self.max_samples

        self.evaluate()
        self._applied(0)
        while not done():
            version = m.version
            deadlines = {}
            round_start = time.perf_counter()
            for w in range(self.P):
                self._issued_at[w] = time.perf_counter()
                self.transport.issue(w, m.x, version)
                deadlines[w] = time.monotonic() + self.timeout
            arrivals = []
            while deadlines:
                for ev in self._events(deadlines):
                    if isinstance(ev, Lost):
                        self._lose(ev)  # raises
                    elif ev.worker in deadlines:
                        del deadlines[ev.worker]
                        self._arrived(ev)
                        arrivals.append(
                            (ev.worker, self._waited_until, ev.compute_s, self._prompt == ev.worker, ev.sent_s)
                        )
            for w in range(self.P):  # in worker order: the round's mean does not depend on arrival order
                m.receive(self.transport.gradient(w), version, worker=w)
            self._applied(sum(self.batches))
            if self.recorder.due(self.samples):
                self.evaluate()
            end = time.perf_counter()
            for w, arrived, compute_s, prompt, sent in arrivals:
                self._log(w, self._issued_at[w], arrived, compute_s, round_start, end, prompt, sent)
        self._finish()


def drive(problem, rule, settings, recorder, transport) -> EngineResult:
    """Run the master over ``transport`` (async or sync per ``algorithm.protocol``); see the module docstring.

    Args:
        problem: a :class:`problems.base.Problem` (the master evaluates it; workers have their own copy).
        rule: the update rule (``init``/``step``); its state lives here only.
        settings: the run's :class:`~experiments.settings.schema.RunSettings` (workers' minibatch sizes:
            ``settings.worker_batches``).
        recorder: the run's :class:`experiments.training.recorder.Recorder`.
        transport: the engine's transport (:class:`experiments.engines.transport.Transport`), workers started.

    Returns:
        EngineResult on the wall clock (``time_s`` NaN when the run ended before its clock started: not measured);
        status ``failed`` with the reason when a lost worker ended the run.

    Raises:
        experiments.training.recorder.Diverged: the loss diverged. KeyboardInterrupt passes through (the caller ends the
        workers and keeps the partial trace). Either carries a note (``add_note``) per worker lost before it.
    """
    loop = MasterLoop(problem, rule, settings, recorder, transport)
    status, message = "ok", ""
    try:
        with noting_continues():
            loop.run_async() if loop.protocol == "async" else loop.run_sync()
        if loop.notes:
            message = "; ".join(loop.notes) + f"; finished with {len(loop.live)} of {loop.P} workers"
    except WorkerLost as exc:
        status, message = "failed", f"WorkerLost: {exc}"
        loop._finish()
    except BaseException as exc:  # Diverged, an interrupt: the snapshots taken so far still become trace rows
        for note in loop.notes:  # a worker lost before: the run's message keeps it (the runner reads __notes__)
            exc.add_note(note)
        try:
            recorder.flush()
        except Diverged:
            pass
        raise
    m = loop.master
    return EngineResult(
        updates=m.version,
        gradients=m.gradients,
        samples=loop.samples,
        time_s=loop.clock.elapsed() if loop.clock.started else math.nan,  # ended in its warm-up: not measured
        histogram=m.histogram,
        status=status,
        message=message,
        timed_samples=loop.samples - loop.samples_at_start if loop.clock.started else 0,
        overruns=loop.overruns if loop.emulated else None,
        late_wakeups=loop.late_wakeups if loop.emulated else None,
        compute_times=loop.compute_log,
        timeline=loop.timeline,
        master_busy_s=loop.master_busy_s(),
    )
