"""What several benchmarks share: the peak memory of a process tree sampled from /proc, and writing rows to a CSV.

Import it after putting the repository root on ``sys.path`` (each benchmark does, as it does for ``experiments``):
``from benchmarks.common import peak_memory, write_csv``.
"""

from __future__ import annotations

import csv
import os
import subprocess
import time
from pathlib import Path


def parser(script: str, doc: str | None):
    """The command line of a benchmark script (``script``: its ``__file__``): :class:`experiments.cli.Parser`, so
    that a bad value is one line naming it, exit 2; the description is the docstring's first line."""
    from experiments.cli import Parser

    return Parser(f"benchmarks/{Path(script).name}", description=(doc or "").splitlines()[0] if doc else None)


def process_tree(pid: int) -> list[int]:
    """``pid`` and every process below it now (Linux: /proc/PID/task/TID/children); a process that ended meanwhile
    is left out."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for t in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{t}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return out


def _kib(path: str, key: str) -> int:
    """The value (KiB) of the line starting with ``key`` in a /proc status-like file; 0 when it cannot be read."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def peak_memory(proc: subprocess.Popen, every_s: float = 0.2) -> dict:
    """Sample ``proc``'s whole process tree every ``every_s`` seconds until it exits.

    Returns ``{"processes", "peak_rss_mib", "peak_pss_mib"}``: the most processes seen at once, and the peaks of the
    summed RSS (shared pages counted once per process: an upper bound) and of the summed PSS (shared pages split
    between the processes that map them: what the machine spends), MiB. Linux only (/proc). A child that writes much
    to a pipe the caller reads only afterwards can block: give it a file or DEVNULL, or little output.
    """
    peak_rss = peak_pss = nproc = 0
    while proc.poll() is None:
        pids = process_tree(proc.pid)
        rss = sum(_kib(f"/proc/{p}/status", "VmRSS:") for p in pids)
        pss = sum(_kib(f"/proc/{p}/smaps_rollup", "Pss:") for p in pids)
        peak_rss, peak_pss, nproc = max(peak_rss, rss), max(peak_pss, pss), max(nproc, len(pids))
        time.sleep(every_s)
    return {"processes": nproc, "peak_rss_mib": round(peak_rss / 1024, 1), "peak_pss_mib": round(peak_pss / 1024, 1)}


def write_csv(path: Path, rows: list[dict], columns: list[str] | None = None) -> None:
    """Write ``rows`` to ``path`` (its folder made) with a header: ``columns`` in that order (default: the first
    row's keys); a missing or None value is an empty cell. Lines end in ``\\n``."""
    columns = list(columns or (rows[0] if rows else []))
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns, lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow({k: "" if r.get(k) is None else r[k] for k in columns})
