"""Evaluation points of a run: the trace rows, divergence detection, progress (shared by every engine).

Engines call :meth:`Recorder.due` cheaply in their loop and :meth:`Recorder.record` at evaluation points; the
time they pass is on their own clock and excludes evaluation (a wall-clock engine pauses its timer around it).
"""

from __future__ import annotations

import math
import sys
from collections import Counter

from tqdm.auto import tqdm

from experiments.errors import Interrupted


class Diverged(RuntimeError):
    """The loss became NaN/inf or grew past ``divergence_factor`` times its initial value."""


class Recorder:
    """Collects one trace row per evaluation point.

    Args:
        problem: the run's problem (``evaluate``, ``num_train``).
        columns: constant columns of every row (run_id, problem, algorithm, engine, workers, ...).
        eval_every: epochs between evaluation points (> 0); evaluation also happens at epoch 0 and at the end.
        total_epochs: planned length of the run in epochs (for the progress bar), or None.
        f_star: the problem's optimal value, or None (then ``opt_gap`` is empty).
        clock: ``simulated`` or ``wall``.
        divergence_factor: a train loss above this times the initial one (or non-finite) marks divergence.
        progress: show a tqdm bar (``None``: only on a terminal).
    """

    def __init__(
        self,
        problem,
        columns: dict,
        eval_every: float,
        total_epochs: float | None,
        f_star: float | None,
        clock: str,
        divergence_factor: float = 1e3,
        progress: bool | None = None,
    ) -> None:
        self.problem = problem
        self.columns = dict(columns)
        # an interval past the run (eval_every=1e308) evaluates at the start and the end only; capped below 2^62
        # samples, the engines' counters (round() of an overflowed inf was an OverflowError)
        self.eval_every_samples = max(1, round(min(eval_every * problem.num_train, 2.0**62)))
        self.f_star = f_star
        self.clock = clock
        self.divergence_factor = divergence_factor
        self.rows: list[dict] = []
        self.master = None
        self.clock_from: int | None = 0
        """Samples consumed when the engine's clock started: 0 unless the engine says that its clock starts after
        warm-up updates (:func:`experiments.engines.warmup_updates`): None until then. A row taken before it has
        time 0 by convention, not a measured time; the summary of a run stopped there has none
        (experiments/runner.py)."""
        self._histogram_at_row: Counter = Counter()
        self._pending: list = []  # (x copy, row columns, histogram) of snapshots not evaluated yet
        self._pending_bytes = 0
        self._next = 0
        self._initial_loss: float | None = None
        disable = (not sys.stderr.isatty()) if progress is None else (not progress)
        self._bar = tqdm(
            total=total_epochs,
            unit="epoch",
            desc=str(columns.get("run_id", "run")),
            leave=False,
            disable=disable,
            bar_format="{l_bar}{bar}| {n:.2f}/{total_fmt} epochs [{elapsed}<{remaining}]",
        )
        self._bar_epochs = 0.0

    def attach(self, master) -> None:
        """Remember the run's master, so that its staleness histogram survives a divergence or a failure."""
        self.master = master

    def due(self, samples: int) -> bool:
        """True when ``samples`` processed samples reach the next evaluation point. Asked by every engine's master
        loop after each update: a stop signal whose exception was swallowed is raised again here
        (:meth:`experiments.errors.Interrupted.raise_pending`)."""
        Interrupted.raise_pending()
        return samples >= self._next

    def record(
        self, x, samples: int, updates: int, gradients: int, time_s: float, staleness: tuple[float, int], **extra
    ) -> dict:
        """Evaluate ``x`` on the full train and test sets and append a trace row (:meth:`snapshot`, then
        :meth:`flush`).

        Args:
            x: the master's iterate, (d,) float32.
            samples: training samples consumed so far (epoch = samples / num_train).
            updates: master updates applied; gradients: gradients received.
            time_s: seconds on the engine's clock, evaluation excluded.
            staleness: (mean, max) over the updates since the previous row.
            extra: more columns of this row (e.g. ``overruns``).

        Raises:
            Diverged: the loss is not finite or has grown past the divergence factor.
        """
        self.snapshot(x, samples, updates, gradients, time_s, staleness, **extra)
        return self.flush()[-1]

    def snapshot(
        self, x, samples: int, updates: int, gradients: int, time_s: float, staleness: tuple[float, int], **extra
    ) -> None:
        """Keep a copy of ``x`` and the row's counters for evaluation later (:meth:`flush`), so a real engine's
        master goes on at once instead of stopping its workers for an evaluation. Arguments as :meth:`record`;
        :attr:`pending_bytes` says what the copies hold."""
        columns = dict(
            epoch=samples / self.problem.num_train,
            updates=updates,
            gradients=gradients,
            clock=self.clock,
            time_s=time_s,
            staleness_mean=staleness[0],
            staleness_max=staleness[1],
            discarded=self.master.discarded if self.master is not None else 0,  # a policy's
            stopped=self.master.restarts if self.master is not None else 0,  # a policy's stops
            **extra,
        )
        hist = Counter(self.master.histogram) if self.master is not None else Counter()
        self._pending.append((x.detach().clone(), columns, hist))
        self._pending_bytes += x.numel() * x.element_size()
        while self._next <= samples:
            self._next += self.eval_every_samples
        self._bar.update(columns["epoch"] - self._bar_epochs)  # progress shows now; the loss when evaluated
        self._bar_epochs = columns["epoch"]

    @property
    def pending_bytes(self) -> int:
        """Bytes held by snapshots not evaluated yet."""
        return self._pending_bytes

    def flush(self) -> list[dict]:
        """Evaluate every pending snapshot in order and append their rows; return the rows appended.

        Raises:
            Diverged: at the first row whose loss is not finite or has grown past the divergence factor (the rows
            before it are kept, the later snapshots dropped).
        """
        out = []
        pending, self._pending, self._pending_bytes = self._pending, [], 0
        for x, columns, hist in pending:
            out.append(self._row(x, columns, hist))
        return out

    def _row(self, x, columns: dict, hist: Counter) -> dict:
        metrics = self.problem.evaluate(x)
        epoch = columns["epoch"]
        row = dict(self.columns)
        row.update(columns)
        row.update(
            train_loss=metrics["train_loss"],
            train_acc=metrics["train_acc"],
            test_loss=metrics["test_loss"],
            test_acc=metrics["test_acc"],
            opt_gap=(metrics["train_loss"] - self.f_star) if self.f_star is not None else float("nan"),
        )
        self.rows.append(row)
        self._histogram_at_row = hist  # the histogram this row's updates produced
        self._bar.set_postfix(loss=f"{metrics['train_loss']:.4g}", acc=f"{metrics['test_acc']:.3f}", refresh=False)
        loss = metrics["train_loss"]
        if getattr(self.problem, "timing_only", False):
            return row  # NaN by design (problems/timing.py): nothing to diverge
        if self._initial_loss is None:
            self._initial_loss = loss
        if not math.isfinite(loss) or loss > self.divergence_factor * max(self._initial_loss, 1e-12):
            raise Diverged(f"train loss {loss:.4g} at epoch {epoch:.3f} (initial {self._initial_loss:.4g})")
        return row

    def histogram_at_last_row(self) -> Counter:
        """The master's staleness histogram (staleness -> updates) as it was when the last trace row was recorded:
        a run stopped between evaluations is summarized over the same updates as its last row (empty before any)."""
        return Counter(self._histogram_at_row)

    def check_loss(self, loss: float, samples: int) -> None:
        """Raise :class:`Diverged` when a minibatch loss is not finite, naming the epoch (``samples`` processed /
        N). Engines call it on every gradient: a finite loss costs one comparison."""
        if not math.isfinite(loss) and not getattr(self.problem, "timing_only", False):
            raise Diverged(f"minibatch loss {loss} at epoch {samples / self.problem.num_train:.3f}")

    def close(self) -> None:
        self._bar.close()
