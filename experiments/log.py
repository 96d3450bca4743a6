"""The harness's messages to the user: Python's ``logging``, one logger per module under ``experiments``.

Every message (progress lines, warnings, one-line errors of the entry points) goes through :func:`get_logger`'s
logger and reaches stderr as one line: an info line as its bare text, a warning after ``warning: `` and an error after
``error: `` (the formatter adds the prefix, so a call site writes the message alone; no time or logger name).
The handler writes to whatever ``sys.stderr`` is when the record is emitted, not when it was built, so a redirected
or captured stderr (pytest's ``capsys``/``capfd``, a notebook) receives the messages too.

A user who wants them elsewhere or quieter configures the ``experiments`` logger as any other: for example
``logging.getLogger("experiments").setLevel(logging.WARNING)`` keeps warnings and errors only.
"""

from __future__ import annotations

import logging
import sys

ROOT = "experiments"


class _CurrentStderr(logging.StreamHandler):
    """A StreamHandler bound to the current ``sys.stderr`` at each record (as :data:`logging.lastResort` is)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:  # StreamHandler.__init__ assigns it; the property always reads sys.stderr
        pass


class _OneLine(logging.Formatter):
    """The message, after ``warning: `` or ``error: `` by its level; a warning or an error stays one line whatever it
    quotes (a value typed with a newline, ``experiment_id=$'a\\nb'``, is shown with ``\\n``): a reader, or
    ``make reproduce``, takes the line as the whole error."""

    PREFIX = {logging.WARNING: "warning: ", logging.ERROR: "error: ", logging.CRITICAL: "error: "}

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        if record.levelno >= logging.WARNING:
            text = self.PREFIX.get(record.levelno, "") + text.replace("\r", "\\r").replace("\n", "\\n")
        return text


def _root() -> logging.Logger:
    root = logging.getLogger(ROOT)
    if not any(isinstance(h, _CurrentStderr) for h in root.handlers):
        handler = _CurrentStderr()
        handler.setFormatter(_OneLine("%(message)s"))
        root.addHandler(handler)
        root.setLevel(logging.INFO)
        root.propagate = False  # messages are the user's output: not repeated by a root logger's handlers
    return root


def get_logger(name: str) -> logging.Logger:
    """The logger of module ``name`` (``__name__``), a child of the ``experiments`` logger that prints to stderr."""
    _root()
    return logging.getLogger(name if name == ROOT or name.startswith(ROOT + ".") else f"{ROOT}.{name}")
