"""Do the calibrated costs repeat? (goal: within 10% between two ``make calibrate`` calls on a quiet machine)

Runs the calibration of the chosen experiments' simulated jobs (``python -m experiments.calibrate --only ...``)
``--calls`` times back to back, each into a fresh temporary file, and compares every entry's value (the median of
its repeats) across the calls, and with this machine's own calibration file (which the results use) and the day that
file's entry was measured. The machine file is only read, never changed.

Writes benchmarks/results/bench_calibration.csv (``key, call_1_us, ..., max_diff_pct, spread_pct, machine_us,
machine_measured, machine_diff_pct, goal_pct, meets_goal``) and prints it.

Usage: python benchmarks/bench_calibration.py [--only model_validation ...] [--calls 2] [--out PATH]
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from benchmarks.common import parser, write_csv  # noqa: E402 (after the sys.path line)
from experiments.cli import count_arg  # noqa: E402

GOAL_PCT = 10.0
COLUMNS_FIXED = (
    "key",
    "max_diff_pct",
    "spread_pct",
    "machine_us",
    "machine_measured",
    "machine_diff_pct",
    "goal_pct",
    "meets_goal",
)


def diff_pct(values: list[float]) -> float:
    """(max - min) / min of ``values``, in percent (0 for one value)."""
    lo = min(values)
    return 100.0 * (max(values) - lo) / lo if lo > 0 else float("inf")


def main(argv: list[str] | None = None) -> int:
    ap = parser(__file__, __doc__)
    ap.add_argument("--only", nargs="*", default=["model_validation"], metavar="ID")
    ap.add_argument("--profile", default="quick")
    ap.add_argument("--calls", type=count_arg, default=2)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "bench_calibration.csv")
    args = ap.parse_args(argv)
    from experiments import calibrate
    from experiments.clock.calibration import Calibration

    calls = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.calls):
            path = Path(tmp) / f"call{i}.json"
            rc = calibrate.main(["--profile", args.profile, "--file", str(path), "--only", *args.only])
            if rc:
                return rc
            calls.append(json.loads(path.read_text())["entries"])
    machine = Calibration().read()["entries"]
    rows = []
    for key in sorted(set.intersection(*(set(c) for c in calls))):
        vals = [c[key]["value"] for c in calls]
        m = machine.get(key, {})
        row = {f"call_{i + 1}_us": 1e6 * v for i, v in enumerate(vals)}
        row.update(
            key=key,
            max_diff_pct=diff_pct(vals),
            spread_pct=100.0 * statistics.median(c[key]["spread"] for c in calls),
            machine_us=1e6 * m["value"] if m else None,
            machine_measured=m.get("measured", ""),
            machine_diff_pct=(100.0 * (statistics.median(vals) - m["value"]) / m["value"]) if m else None,
            goal_pct=GOAL_PCT,
        )
        row["meets_goal"] = row["max_diff_pct"] <= GOAL_PCT
        rows.append(row)
    columns = ["key"] + [f"call_{i + 1}_us" for i in range(args.calls)] + list(COLUMNS_FIXED[1:])
    write_csv(args.out, rows, columns)
    print("\t".join(columns))
    for r in rows:
        print("\t".join(f"{r[c]:.4g}" if isinstance(r.get(c), float) else str(r.get(c, "")) for c in columns))
    met = sum(r["meets_goal"] for r in rows)
    print(f"{met} of {len(rows)} entries repeat within {GOAL_PCT:g}%; wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
