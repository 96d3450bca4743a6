"""What a calibration file must hold (experiments/clock/calibration.py reads it): the shape checked before any entry
is used, so that a damaged file is named and set aside, never a traceback."""

from __future__ import annotations

import math
import statistics


def shape_problem(data) -> str | None:
    """Why ``data`` is not a calibration (None when it is): an object whose ``entries`` maps keys to objects
    with a ``value`` and, where present, a non-empty list of ``samples``; every time is
    a finite number of seconds >= 0 (a gradient's > 0), ``spread`` a finite number >= 0, ``remeasured`` a whole
    number of rounds, ``measured`` a UTC time stamp that is not in the future."""

    def seconds(v) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0

    if not isinstance(data, dict):
        return f"a JSON {type(data).__name__}, not an object"
    if not isinstance(data.get("entries"), dict):
        return "no 'entries' object"
    if not isinstance(data.get("machine", {}), dict):
        return "'machine' is not an object"
    for key, e in data["entries"].items():
        if not isinstance(e, dict) or not seconds(e.get("value")):
            return f"entry {key!r}: 'value' is not a finite number of seconds >= 0"
        samples = e.get("samples", [e["value"]])
        if not isinstance(samples, list) or not samples or not all(seconds(v) for v in samples):
            return f"entry {key!r}: 'samples' is not a non-empty list of finite numbers of seconds >= 0"
        if key.split("|", 1)[0] in ("grad", "gradtimes") and (e["value"] <= 0 or statistics.median(samples) <= 0):
            return f"entry {key!r}: a gradient takes no time"
        if "spread" in e and not seconds(e["spread"]):
            return f"entry {key!r}: 'spread' is not a finite number >= 0"
        rounds = e.get("remeasured", 0)
        if not isinstance(rounds, int) or rounds < 0:
            return f"entry {key!r}: 'remeasured' is not a whole number of rounds"
        for k in ("measured", "first_measured"):
            if k in e and (why := _stamp_problem(e[k])):
                return f"entry {key!r}: '{k}' {why}"
    return None


def _stamp_problem(stamp) -> str | None:
    """Why ``stamp`` is not the UTC time an entry was measured (``%Y-%m-%dT%H:%M:%SZ``, not later than now; a
    minute allowed for clocks set apart): an age read from it would be 'unknown' or '0 s'."""
    import calendar
    import time

    try:
        t = calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ"))
    except (TypeError, ValueError):
        return "is not a UTC time stamp (%Y-%m-%dT%H:%M:%SZ)"
    return "is in the future" if t > time.time() + 60 else None
