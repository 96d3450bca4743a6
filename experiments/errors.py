"""Errors the runner reports to users as one line and exit code 2, and the interrupt a signal raises."""

import signal

TERM_SIGNALS = (signal.SIGTERM,) + ((signal.SIGHUP,) if hasattr(signal, "SIGHUP") else ())
"""The stop signals besides Ctrl-C: a job scheduler's stop (SIGTERM) and a closed terminal (SIGHUP). Python's
default for either ends the process at once; the entry points take them as Ctrl-C (:class:`Interrupted`)."""
STOP_SIGNALS = (signal.SIGINT,) + TERM_SIGNALS
"""Every signal that stops a run or a call: Ctrl-C and :data:`TERM_SIGNALS`; the exit status is 128 + the signal."""


class ConfigError(ValueError):
    """A bad configuration value: the message names the key and the value (e.g. ``workers=0: must be >= 1``)."""


class CalibrationError(ConfigError):
    """The calibration file itself cannot be used: not a regular file, unreadable, unwritable (its folder, its lock),
    or damaged and not set aside (experiments/clock/calibration.py). The message starts with the file's path. A tool
    that goes on past a job's bad input (``experiments.calibrate``) stops at this one: every job shares the file."""


class WorkerLost(RuntimeError):
    """A worker process or rank stopped answering or died during a run (real engines)."""


class Interrupted(KeyboardInterrupt):
    """A run stopped by a signal: SIGINT (Ctrl-C), SIGTERM or SIGHUP. Raised in the main thread by the runner's
    handler (experiments.run) and by the real engines' (experiments.engines.processes.sigterm_as_interrupt); the
    runner records the run as ``failed`` with its partial trace, then exits ``128 + signum`` (130 for SIGINT, 143 for
    SIGTERM, 129 for SIGHUP).

    Attributes:
        signum: the signal's number (``signal.SIGINT``, ``signal.SIGTERM``, ``signal.SIGHUP``).
        recorded: the run id the runner recorded as interrupted, or None (the signal came between runs, e.g. while
            Hydra composed or started a job: no run was in flight).
    """

    PENDING: list[int] = []
    """The stop signal a handler raised this exception for, until the runner has recorded the run it stopped: some
    code catches a KeyboardInterrupt and goes on (torch's import does), and the handler ignores every later signal,
    so the run would train to its end with the stop lost. Check points (the recorder's evaluation clock, each
    calibration measurement, the start of the engine) raise it again: :meth:`raise_pending`."""

    @classmethod
    def stop(cls, signum: int) -> "Interrupted":
        """The exception a stop handler raises for ``signum``, noted in :attr:`PENDING` first."""
        cls.PENDING[:] = [int(signum)]
        return cls(signum)

    @classmethod
    def raise_pending(cls) -> None:
        """Raise the pending stop again (:attr:`PENDING`), if any: its first raise was caught by code that went on."""
        if cls.PENDING:
            raise cls(cls.PENDING[0])

    def __init__(self, signum: int = signal.SIGINT, recorded: str | None = None) -> None:
        self.signum = int(signum)
        self.recorded = recorded
        super().__init__(f"signal {signal.Signals(self.signum).name}")

    @staticmethod
    def signum_of(exc: BaseException) -> int:
        """The signal behind a KeyboardInterrupt: its ``signum``, else SIGINT (Python's own Ctrl-C)."""
        return int(getattr(exc, "signum", signal.SIGINT))

    @staticmethod
    def recorded_of(exc: BaseException) -> str | None:
        """The run id recorded as interrupted behind a KeyboardInterrupt, or None (no run was in flight)."""
        return getattr(exc, "recorded", None)
