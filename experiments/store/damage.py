"""Whether a finished run's files read back whole (experiments/store/sink.py ``RunSink.finished``; the figures):
``trace.csv`` (:func:`trace_problem`), ``staleness.csv`` (:func:`staleness_problem`) and ``provenance.json``
(:func:`provenance_problem`); a ``config.yaml`` holding YAML aliases (:func:`has_aliases`). Each returns why a file
cannot be read back, or None; a finished run with such a file counts as unfinished and runs again.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import yaml

from experiments.store.table import file_problem


def trace_problem(path: Path) -> str | None:
    """Why the trace.csv at ``path`` cannot be read back (not a regular file, not UTF-8, no final newline, no row, a
    row whose field count is not the header's, an epoch / updates / time_s that is not a number); None when it reads
    whole or is absent. A finished run's trace with a problem counts as unfinished; the figures leave its curve out."""
    path = Path(path)
    if not path.exists():
        return None
    text, why = _text(path)
    if why is not None:
        return why
    if not text.endswith("\n"):
        return "does not end with a newline (truncated)"
    rows = list(csv.reader(io.StringIO(text)))
    if not rows or "epoch" not in rows[0]:
        return "is not a trace (no epoch column)"
    if len(rows) < 2:
        return "has no evaluation row (a run records one at its start)"
    if any(len(r) != len(rows[0]) for r in rows[1:]):
        return "has a row whose fields are not the header's"
    epoch = rows[0].index("epoch")
    numeric = [rows[0].index(c) for c in ("updates", "time_s") if c in rows[0]]
    try:  # the epoch always holds a number; updates and time_s one or nothing
        for r in rows[1:]:
            float(r[epoch])
            for i in numeric:
                if r[i]:
                    float(r[i])
    except ValueError:
        return "has an epoch, updates or time_s that is not a number"
    return None


def staleness_problem(path: Path) -> str | None:
    """Why a finished run's ``staleness.csv`` at ``path`` (a header ``staleness,count``, then rows of two whole
    numbers, each with its newline) cannot be read back: missing, unreadable (:func:`_text`), not of that form; None
    when it reads whole. Every run writes one, so a finished run lacking it counts as unfinished."""
    text, why = _text(Path(path))
    if why is not None:
        return why
    rows = list(csv.reader(io.StringIO(text)))
    if not text.endswith("\n") or not rows or rows[0] != ["staleness", "count"]:
        return "is not a staleness histogram (header staleness,count; a final newline)"
    if not all(len(r) == 2 and r[0].isdigit() and r[1].isdigit() for r in rows[1:]):
        return "has a row that is not two whole numbers"
    return None


def provenance_problem(path: Path) -> str | None:
    """Why a finished run's ``provenance.json`` at ``path`` (a JSON object) cannot be read back: missing, unreadable
    (:func:`_text`), not JSON or not an object; None when it reads whole. Every run writes one at its start."""
    return read_provenance(path)[1]


def read_provenance(path: Path) -> tuple[dict | None, str | None]:
    """A run's ``provenance.json`` at ``path`` as a mapping, and why it cannot be read back (as
    :func:`provenance_problem`); the mapping is None when there is a reason. The one reader of that file."""
    text, why = _text(Path(path))
    if why is not None:
        return None, why
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):  # nested deeper than the decoder recurses: damaged as well
        return None, "is not valid JSON (truncated?)"
    return (data, None) if isinstance(data, dict) else (None, "is not a JSON object")


def _text(path: Path) -> tuple[str, str | None]:
    """The UTF-8 text of the file at ``path``, and why it cannot be had (``is missing``, ``cannot be read (...)``:
    not a regular file, so a named pipe is never opened, or not UTF-8); the text is empty when there is a reason."""
    if not path.exists():  # a link to nothing included
        return "", "is missing"
    if why := file_problem(path):
        return "", f"cannot be read ({why})"
    try:
        return path.read_bytes().decode("utf-8"), None
    except (OSError, UnicodeDecodeError) as exc:
        return "", f"cannot be read ({getattr(exc, 'strerror', None) or type(exc).__name__})"


_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the C parser where PyYAML has it: faster


def has_aliases(text: str) -> bool:
    """Whether the YAML ``text`` holds an alias (``*a``). The harness never writes one (``OmegaConf.to_yaml`` writes
    every node out), and OmegaConf expands each: aliases of aliases nested a few levels deep grow to gigabytes, so a
    config holding one is damaged and never loaded. Scans the parser's events, which never expand one.

    Raises:
        yaml.YAMLError: ``text`` is not YAML.
    """
    return any(isinstance(event, yaml.AliasEvent) for event in yaml.parse(text, Loader=_LOADER))
