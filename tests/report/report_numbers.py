"""Compare two reports of the same results: every claim keeps its verdict class, and every number of the first
report is still in the second (per claim in verdicts.csv; per experiment section in REPORT.md). Wording may change.

    .venv/bin/python tests/report/report_numbers.py OLD_DIR NEW_DIR     # each holding REPORT.md and verdicts.csv

Used by tests/report/test_committed_reports.py on the committed results; runnable on any two folders.
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

import pandas as pd

from experiments.report.verdict import Verdict

NUMBER = re.compile(r"(?<![\w.])[-+]?\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?")
ROW_FIELDS = ("verdict", "conditions", "clock", "evidence", "ours", "paper", "decided_by")


def numbers(text) -> Counter:
    """The numbers written in ``text`` (signs and thousands separators dropped), counted."""
    return Counter(m.group(0).lstrip("+-").replace(",", "") for m in NUMBER.finditer(str(text)))


def sections(report: str) -> dict[str, str]:
    """REPORT.md's per-experiment sections (``## <experiment>: ...`` up to the next ``## ``), by experiment."""
    out = {}
    for block in re.split(r"\n(?=## )", report):
        m = re.match(r"## (\w+): ", block)
        if m:
            out[m.group(1)] = block
    return out


def compare(old_dir: Path, new_dir: Path) -> list[str]:
    """What changed from ``old_dir``'s report to ``new_dir``'s: claims gone or added, verdict classes changed,
    numbers of a claim's verdict or of an experiment's section missing in the new one; [] when nothing did."""
    problems = []
    old = pd.read_csv(Path(old_dir) / "verdicts.csv").fillna("")
    new = pd.read_csv(Path(new_dir) / "verdicts.csv").fillna("")
    o = {(r["experiment"], r["claim"]): r for r in old.to_dict("records")}
    n = {(r["experiment"], r["claim"]): r for r in new.to_dict("records")}
    problems += [f"claim gone: {k}" for k in o if k not in n] + [f"claim added: {k}" for k in n if k not in o]
    for key in o.keys() & n.keys():
        before = Verdict.parse(o[key]["verdict"])
        after = (
            Verdict.parse(n[key]["verdict"])
            if "verdict_class" not in n[key]
            else Verdict(n[key]["verdict"], str(n[key]["conditions"]))
        )
        if before.cls != after.cls:
            problems.append(f"{key}: verdict {before.cls} -> {after.cls}")
        have = numbers(" ".join(str(n[key].get(f, "")) for f in ROW_FIELDS))
        lost = numbers(" ".join(str(o[key].get(f, "")) for f in ROW_FIELDS)) - have
        if lost:
            problems.append(f"{key}: numbers missing: {sorted(lost)}")
    old_s = sections((Path(old_dir) / "REPORT.md").read_text())
    new_s = sections((Path(new_dir) / "REPORT.md").read_text())
    problems += [f"section gone: {e}" for e in old_s if e not in new_s]
    for e in old_s.keys() & new_s.keys():
        lost = numbers(old_s[e]) - numbers(new_s[e])  # as often as before (a table cell changed shows)
        if lost:
            problems.append(f"section {e}: numbers missing: {sorted(lost)[:20]}")
    return sorted(problems)


if __name__ == "__main__":
    found = compare(Path(sys.argv[1]), Path(sys.argv[2]))
    print("\n".join(found) or "same verdict classes and numbers")
    sys.exit(1 if found else 0)
