"""Whether a finished run's files read back whole (experiments/store/sink.py ``RunSink.finished``; the figures):
``trace.csv`` (:func:`trace_problem`), ``staleness.csv`` and ``provenance.json`` (:func:`side_file_problem`). Each
returns why a file cannot be read back, or None; a finished run with such a file counts as unfinished and runs again.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from experiments.store.table import file_problem


def trace_problem(path: Path) -> str | None:
    """Why the trace.csv at ``path`` cannot be read back (not a regular file, not UTF-8, no final newline, no row, a
    row whose field count is not the header's, an epoch / updates / time_s that is not a number); None when it reads
    whole or is absent. A finished run's trace with a problem counts as unfinished; the figures leave its curve out."""
    path = Path(path)
    if not path.exists():
        return None
    if why := file_problem(path):
        return f"cannot be read ({why})"
    try:
        text = path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return f"cannot be read ({getattr(exc, 'strerror', None) or type(exc).__name__})"
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


def side_file_problem(path: Path) -> str | None:
    """Why a finished run's ``staleness.csv`` (a header ``staleness,count``, then whole numbers) or
    ``provenance.json`` (a JSON object) at ``path`` cannot be read back: missing, not a regular file, not UTF-8,
    not of its form; None when it reads whole. Every run writes both, so a finished run lacking one counts as
    unfinished (the figures and the report read them)."""
    path = Path(path)
    if not path.exists():
        return "is missing"
    if why := file_problem(path):
        return f"cannot be read ({why})"
    try:
        text = path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return f"cannot be read ({getattr(exc, 'strerror', None) or type(exc).__name__})"
    if path.suffix == ".json":
        try:
            return None if isinstance(json.loads(text), dict) else "is not a JSON object"
        except ValueError:
            return "is not valid JSON (truncated?)"
    rows = list(csv.reader(io.StringIO(text)))
    if not text.endswith("\n") or not rows or rows[0] != ["staleness", "count"]:
        return "is not a staleness histogram (header staleness,count; a final newline)"
    if not all(len(r) == 2 and r[0].isdigit() and r[1].isdigit() for r in rows[1:]):
        return "has a row that is not two whole numbers"
    return None
