"""How a real engine's run is timed (experiments/engines/driver.py, module docstring "Clock"): the wall clock
that pauses around evaluations, and the per-gradient timeline a run writes as ``timeline.csv``."""

from __future__ import annotations

import time

TIMELINE_COLUMNS = ["worker", "issued_s", "arrived_s", "compute_s", "start_s", "end_s", "prompt", "sent_s"]
"""One row per gradient the master took (a real engine's ``timeline.csv``; experiments/engines/twin.py replays it):
the worker (-1: the master's own gradient), when its iterate was handed out, when the master's wait returned with it,
the seconds the worker spent on it (emulated wait included), when the master began and ended its part (async: the
receive, the update and the hand-out of the worker's next iterate; sync: the round, from its first hand-out to its
update), seconds since the master loop began, evaluation included; and ``prompt``: 1 when the master was waiting
for it (its wait blocked and it was the first event the wait returned), so that ``arrived_s`` is when it came,
0 when it had been waiting while the master was busy; ``sent_s``: when the worker sent it (the same clock)."""


PROMPT_WAIT_S = 5e-6
"""A wait that blocked longer than this returned an event that came while the master waited."""


class WallClock:
    """Wall-clock seconds (``time.perf_counter``) since :meth:`start`, minus the paused intervals; 0 before start."""

    def __init__(self) -> None:
        self._start: float | None = None
        self._paused_at: float | None = None
        self._excluded = 0.0

    @property
    def started(self) -> bool:
        return self._start is not None

    def start(self) -> None:
        if self._start is None:
            self._start = time.perf_counter()

    def pause(self) -> None:
        if self._start is not None and self._paused_at is None:
            self._paused_at = time.perf_counter()

    def resume(self) -> None:
        if self._paused_at is not None:
            self._excluded += time.perf_counter() - self._paused_at
            self._paused_at = None

    def elapsed(self) -> float:
        if self._start is None:
            return 0.0
        now = self._paused_at if self._paused_at is not None else time.perf_counter()
        return now - self._start - self._excluded
