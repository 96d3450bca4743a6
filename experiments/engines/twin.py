"""The trace-driven twin: the simulated engine driven by a measured run's own per-gradient and per-update times.

``engine=simulated engine.trace=<run folder>/timeline.csv`` replays a real-engine run's timeline
(engines/timeline.py:TIMELINE_COLUMNS) through the simulated engine's event order: worker w's k-th gradient takes its
recorded cycle (hand-out to arrival at the master: both messages and the computation), the master's j-th gradient its
recorded service (receive, update, hand-out of the worker's next iterate, at its recorded offset), and the authors'
master its own gradients' recorded times. A gradient that came while the master was busy is known only by when the
master saw it; it arrived when it was sent (the worker's own clock reading) plus its worker's median time from sending
to being seen, over the gradients the master waited for. The costs are the measurement's, so what remains is the model's
queueing and ordering: where the twin's time differs from the measured one, the event order is wrong, not the costs. Fed
a timeline the simulated engine itself wrote, it gives that run's times exactly.

Sync rounds: round r's worker w is handed its iterate at its recorded offset from the round's start, its gradient
arrives one recorded cycle later, and the round ends its recorded tail after the last arrival (the gather and the
update).

The learning is the simulated engine's: gradients computed for real at the iterate each worker was handed.
"""

from __future__ import annotations

import csv
import functools
import heapq
import math
from collections import defaultdict, deque
from pathlib import Path

from problems.base import Problem


class Timeline:
    """A recorded timeline, split for the replay (module docstring).

    Attributes:
        cycles: worker -> deque of seconds from hand-out to arrival, in hand-out order.
        first: worker -> its first hand-out, seconds after the first hand-out of the run.
        services: deque of ``(busy, hand-out)`` per gradient the master took, in that order: its seconds on the
            gradient, and when within them it handed the worker its next iterate.
        own: deque of the seconds of the master's own gradients, in order.
        rounds: sync: list of rounds, each ``(offsets, cycles, tail)`` with a dict per worker.

    Raises:
        ValueError: the file cannot be read, lacks columns, or has no row for a worker in [0, workers).
    """

    def __init__(self, path, workers: int, protocol: str) -> None:
        try:
            with open(path, newline="") as f:
                rows = [{k: _number(k, v) for k, v in r.items()} for r in csv.DictReader(f)]
        except (OSError, ValueError, KeyError) as exc:
            raise ValueError(f"engine.trace={path}: cannot read a timeline ({exc})") from None
        if rows and not {"worker", "issued_s", "arrived_s", "start_s", "end_s"} <= rows[0].keys():
            raise ValueError(f"engine.trace={path}: not a timeline.csv (engines/timeline.py:TIMELINE_COLUMNS)")
        for line, r in enumerate(rows, 2):  # line 1 is the header
            if why := _row_problem(r):
                raise ValueError(f"engine.trace={path}: line {line} has {why} (not a timeline a run wrote)")
        missing = sorted(set(range(workers)) - {int(r["worker"]) for r in rows})
        if missing:
            raise ValueError(f"engine.trace={path}: no rows for worker(s) {missing} of the run's {workers}")
        self.path = Path(path)
        if protocol == "sync":
            self.rounds = _rounds(rows)
            return
        by_issue = sorted((r for r in rows if r["worker"] >= 0), key=lambda r: r["issued_s"])
        back = _flights_back(by_issue)
        self.cycles = defaultdict(deque)
        for r in by_issue:
            seen = r["arrived_s"] - r["issued_s"]
            w = int(r["worker"])
            sent = r.get("sent_s", float("nan"))
            cycle = seen if r.get("prompt", 1) or sent != sent else min(seen, sent - r["issued_s"] + back.get(w, 0.0))
            self.cycles[w].append(cycle)
        t0 = by_issue[0]["issued_s"] if by_issue else 0.0
        self.first = {}
        for r in by_issue:
            self.first.setdefault(int(r["worker"]), r["issued_s"] - t0)
        next_issue = {}  # id of a row -> the hand-out of its worker's next gradient (made while taking this one)
        for w in self.cycles:
            mine = [r for r in by_issue if int(r["worker"]) == w]
            for r, nxt in zip(mine, mine[1:]):
                next_issue[id(r)] = nxt["issued_s"]
        by_start = sorted(rows, key=lambda r: r["start_s"])
        self.services = deque(
            (r["end_s"] - r["start_s"], next_issue.get(id(r), r["end_s"]) - r["start_s"])
            for r in by_start
            if r["worker"] >= 0
        )
        self.own = deque(r["end_s"] - r["start_s"] for r in by_start if r["worker"] < 0)


def _number(column: str, text: str) -> float:
    """One timeline cell as a float; ``sent_s`` may be empty (NaN): the master's own gradients are not sent.

    Raises:
        ValueError: a cell that is no number.
    """
    return math.nan if column == "sent_s" and text == "" else float(text)


def _row_problem(r: dict) -> str | None:
    """What makes one timeline row one no run wrote (None when nothing does): a value that is not finite (``sent_s``
    may be NaN: the master's own gradients, a run that did not record when its gradients were sent), a fractional
    worker id, an arrival before its hand-out, an end before its start."""
    if not all(math.isfinite(v) for k, v in r.items() if k != "sent_s"):
        return "a value that is not a finite number"
    if r["worker"] != int(r["worker"]):
        return "a worker id that is not a whole number"
    if r["arrived_s"] < r["issued_s"]:
        return "arrived_s before issued_s"
    if r["end_s"] < r["start_s"]:
        return "end_s before start_s"
    return None


def _flights_back(rows: list[dict]) -> dict[int, float]:
    """Per worker, the median seconds from sending a gradient to the master seeing it, over its gradients the master
    was waiting for (``prompt``): for a gradient that came while the master was busy only the moment the master saw
    it is known, so it arrived this long after it was sent."""
    per = defaultdict(list)
    for r in rows:
        sent = r.get("sent_s", float("nan"))
        if r.get("prompt", 1) and sent == sent:
            per[int(r["worker"])].append(r["arrived_s"] - sent)
    return {w: sorted(v)[len(v) // 2] for w, v in per.items() if v}


def _rounds(rows: list[dict]) -> list:
    """Sync rows grouped by round (one ``start_s`` per round): ``(offsets, cycles, tail)`` per round."""
    groups = defaultdict(list)
    for r in rows:
        groups[r["start_s"]].append(r)
    out = []
    for start in sorted(groups):
        g = groups[start]
        offsets = {int(r["worker"]): r["issued_s"] - start for r in g}
        cycles = {int(r["worker"]): r["arrived_s"] - r["issued_s"] for r in g}
        tail = g[0]["end_s"] - max(r["arrived_s"] for r in g)
        out.append((offsets, cycles, tail))
    return out


def run_async(
    problem, settings, limits, master, stream, timeline: Timeline, recorder, evaluate, warm
) -> tuple[float, int]:
    """The async protocol replayed on ``timeline`` (module docstring). Returns (clock in seconds, samples)."""
    P, B = settings.workers, settings.batch_size
    max_updates, max_samples = limits
    cycles, services, own = timeline.cycles, timeline.services, timeline.own
    queue: list = []  # (arrival at the master, worker, version, loss, gradient)
    issued, samples, free = 0, 0, 0.0

    def more() -> bool:
        return issued < max_updates and stream.samples < max_samples

    def hand_out(w: int, t: float) -> None:
        nonlocal issued
        if more() and cycles[w]:
            issued += 1
            loss, g = problem.loss_grad(master.x, stream.next())
            heapq.heappush(queue, (t + cycles[w].popleft(), w, master.version, loss, g))

    for w in range(P):
        hand_out(w, timeline.first.get(w, 0.0))
    while queue or (own and more()):
        if own and more() and (not queue or queue[0][0] > free):  # nothing waiting: the master's own gradient
            issued += 1
            loss, g = problem.loss_grad(master.x, stream.next())
            free += own.popleft()
            master.receive(g, master.version)
        else:
            arrival, w, version, loss, g = heapq.heappop(queue)
            master.receive(g, version, w)
            start = max(arrival, free)
            busy, handed = services.popleft() if services else (0.0, 0.0)
            free = start + busy
            hand_out(w, start + handed)
        samples += B
        recorder.check_loss(loss, samples)
        if warm.t0 is None:
            warm.updated(master.version, free, samples)
        if recorder.due(samples):
            evaluate(free, samples)
    return free, samples


def run_sync(
    problem, settings, limits, master, stream, timeline: Timeline, recorder, evaluate, warm
) -> tuple[float, int]:
    """Sync rounds replayed on ``timeline`` (module docstring). Returns (clock in seconds, samples)."""
    batches = settings.worker_batches
    max_updates, max_samples = limits
    round_mean = getattr(problem, "loss_grad_mean", None) or functools.partial(Problem.loss_grad_mean, problem)
    clock, r = 0.0, 0
    while master.version < max_updates and stream.samples < max_samples and r < len(timeline.rounds):
        offsets, cycles, tail = timeline.rounds[r]
        r += 1
        loss, g = round_mean(master.x, [stream.next(b) for b in batches])
        recorder.check_loss(loss, stream.samples)
        master.receive_round(g, master.version)
        clock += max(offsets[w] + cycles[w] for w in offsets) + tail
        warm.updated(master.version, clock, stream.samples)
        if recorder.due(stream.samples):
            evaluate(clock, stream.samples)
    return clock, stream.samples
