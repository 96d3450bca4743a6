"""The results sink: a run's folder and the experiment's ``summary.csv`` (CONTRACT.md, "Results layout").

``<results_dir>/<experiment>/runs/<run_id>/`` gets ``config.yaml`` (the resolved config), ``trace.csv`` (one row
per evaluation point), ``staleness.csv`` (histogram) and ``provenance.json``; the run's row goes into
``<results_dir>/<experiment>/summary.csv``. Every file is written to a temporary name and renamed, and the summary
is rewritten under a file lock, so several runs finishing at once leave one header and whole rows, and a rerun
replaces its old row (exactly one row per run).
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import os
import re
from collections import Counter
from pathlib import Path

from filelock import FileLock

TRACE_COLUMNS = ["run_id", "problem", "algorithm", "engine", "workers", "delay_model", "max_delay", "batch_size",
                 "seed", "epoch", "updates", "gradients", "clock", "time_s", "train_loss", "train_acc", "test_loss",
                 "test_acc", "staleness_mean", "staleness_max", "experiment", "tau", "straggler_sigma",
                 "straggler_slowdown", "opt_gap"]
SUMMARY_COLUMNS = ["experiment", "run_id", "problem", "algorithm", "engine", "clock", "workers", "delay_model",
                   "max_delay", "tau", "straggler_sigma", "straggler_slowdown", "batch_size", "seed", "epochs",
                   "updates", "gradients", "time_s", "time_per_epoch_s", "target_loss", "time_to_target_s",
                   "updates_to_target", "final_train_loss", "final_train_acc", "final_test_loss", "final_test_acc",
                   "final_opt_gap", "staleness_mean", "staleness_max", "status", "message", "cost_grad_s",
                   "cost_update_s", "cost_latency_s", "cost_overhead_s", "cost_master_s",
                   "overruns", "master_busy_s", "cost_overhead_idle_s", "speed_probe_s", "cal_probe_s",
                   "late_wakeups", "late_expected"]
IGNORED_IN_RUN_ID = {"results_dir", "force", "progress", "experiment", "profile", "experiment_id", "device", "threads",
                    "lr_tuning_seed", "tuning"}
"""Top-level keys (and their sub-keys) that name no part of a run: where results go, how they are shown, how a tuning
seed searches (a run's own step factor is in its config)."""
LOOKUP_TABLES = {"profiles", "points", "compute_models", "by_kind", "real_engine", "report", "reference_sweep"}
"""Top-level tables that experiment configs index into (conf/experiment/*.yaml): what a run takes from them shows in
the keys it sets (workers, engine.compute_base_s, delay.*, epochs), so an edit elsewhere in a table is no change."""


def make_run_id(overrides: list[str], seed: int) -> str:
    """A deterministic run id from the run's command-line overrides and its seed (no timestamps).

    Overrides are sorted, keys in ``IGNORED_IN_RUN_ID`` (where results go, how they are shown) dropped, and
    ``seed=<seed>`` always included: ``['workers=4', 'algorithm=apam']`` -> ``algorithm-apam_workers-4_seed-0``.
    Ids longer than 120 characters are cut and end in a hash of the whole.
    """
    kept = []
    for o in overrides:
        key = o.split("=", 1)[0].lstrip("+~")
        if key.split(".")[0] in IGNORED_IN_RUN_ID or key.startswith("hydra.") or key == "seed":
            continue
        kept.append(o.lstrip("+~"))
    kept = sorted(kept) + [f"seed={seed}"]
    rid = "_".join(re.sub(r"[^A-Za-z0-9.+-]+", "-", o.replace("=", "-")).strip("-") for o in kept)
    if len(rid) > 120:
        rid = rid[:100] + "-" + hashlib.sha1(rid.encode()).hexdigest()[:12]
    return rid


def upsert_row(path: Path, key: str, row: dict, columns: list[str]) -> None:
    """Put ``row`` into the CSV table ``path`` (``columns`` first), replacing the row with the same ``key`` value,
    under the table's file lock (several jobs may write it at once; e.g. experiments/sweeps/tuning.py's tuning.csv)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path) + ".lock", timeout=120):
        rows = []
        if path.exists():
            with open(path, newline="") as f:
                rows = [r for r in csv.DictReader(f) if r.get(key) != str(row[key])]
        _atomic_write(path, _csv_text(rows + [row], columns))


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _csv_text(rows: list[dict], columns: list[str]) -> str:
    cols = columns + sorted({k for r in rows for k in r} - set(columns))
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: _fmt(r.get(k)) for k in cols})
    return buf.getvalue()


def _fmt(v):
    if v is None:
        return ""
    if isinstance(v, float):
        return "" if math.isnan(v) else repr(v)
    return v


def _flat(d, prefix: str = "") -> dict:
    """A nested mapping as ``{"a.b.c": leaf}`` (lists are leaves)."""
    out = {}
    for k, v in (d or {}).items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flat(v, key + "."))
        else:
            out[key] = v
    return out


class RunSink:
    """Writes one run's files and its summary row.

    Args:
        results_dir: root of all results (``results_dir`` config key).
        experiment: experiment id (folder under results_dir).
        run_id: the run's id (:func:`make_run_id`).
    """

    def __init__(self, results_dir: str | Path, experiment: str, run_id: str) -> None:
        self.exp_dir = Path(results_dir) / experiment
        self.run_dir = self.exp_dir / "runs" / run_id
        self.run_id = run_id
        self.summary_path = self.exp_dir / "summary.csv"

    def finished(self) -> bool:
        """True when the summary already holds a finished (``ok`` or ``diverged``) row for this run."""
        row = self.summary_row()
        return row is not None and row.get("status") in ("ok", "diverged") and (self.run_dir / "trace.csv").exists()

    def config_changes(self, cfg: dict, ignore=IGNORED_IN_RUN_ID | LOOKUP_TABLES) -> list[str]:
        """How the resolved config ``cfg`` (a plain dict) differs from the one this run finished with
        (``config.yaml``): ``"key: old -> new"`` for every dotted key present in both whose value differs (top-level
        keys in ``ignore`` -- where results go, how they are shown -- left out). Keys added or removed since are not
        changes: a new key's default keeps the old behaviour. [] when there is no config.yaml."""
        path = self.run_dir / "config.yaml"
        if not path.exists():
            return []
        import yaml

        old = yaml.safe_load(path.read_text()) or {}
        a, b = _flat(old), _flat(cfg)
        return [f"{k}: {a[k]!r} -> {b[k]!r}" for k in sorted(a.keys() & b.keys())
                if k.split(".")[0] not in ignore and a[k] != b[k]]

    def summary_row(self) -> dict | None:
        if not self.summary_path.exists():
            return None
        with open(self.summary_path, newline="") as f:
            for row in csv.DictReader(f):
                if row.get("run_id") == self.run_id:
                    return row
        return None

    def write_config(self, config_yaml: str, provenance: dict) -> None:
        """The resolved config and the provenance (first thing a run writes, after validation)."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        _atomic_write(self.run_dir / "config.yaml", config_yaml)
        _atomic_write(self.run_dir / "provenance.json", json.dumps(provenance, indent=1, default=str))

    def add_provenance(self, extra: dict) -> None:
        """Merge ``extra`` (e.g. the costs the run's clock used) into the run's ``provenance.json``."""
        path = self.run_dir / "provenance.json"
        data = json.loads(path.read_text()) if path.exists() else {}
        data.update(extra)
        _atomic_write(path, json.dumps(data, indent=1, default=str))

    def write_compute_times(self, rows: list[dict], columns: list[str]) -> None:
        """``compute_times.csv``: one row per gradient of a real engine (experiments/engines/emulation.py)."""
        self.write_table("compute_times.csv", rows, columns)

    def write_table(self, name: str, rows: list[dict], columns: list[str]) -> None:
        """A CSV file ``name`` in the run's folder, one row per dict, ``columns`` first."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        _atomic_write(self.run_dir / name, _csv_text(rows, columns))

    def write_trace(self, rows: list[dict], histogram: Counter) -> None:
        """``trace.csv`` (contract columns first) and ``staleness.csv`` (``staleness, count``)."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        _atomic_write(self.run_dir / "trace.csv", _csv_text(rows, TRACE_COLUMNS))
        hist = [{"staleness": k, "count": histogram[k]} for k in sorted(histogram)]
        _atomic_write(self.run_dir / "staleness.csv", _csv_text(hist, ["staleness", "count"]))

    def append_summary(self, row: dict) -> None:
        """Put the run's row into ``summary.csv`` (replacing an older row of the same run), under a file lock."""
        self.exp_dir.mkdir(parents=True, exist_ok=True)
        self._replace_summary_row(row)

    def _replace_summary_row(self, row: dict | None) -> bool:
        """Under the summary's file lock: drop this run's row, then append ``row`` (None: nothing; a missing summary
        then stays missing). Returns True when a row was dropped."""
        if row is None and not self.summary_path.exists():
            return False
        with FileLock(str(self.summary_path) + ".lock", timeout=120):
            rows = []
            if self.summary_path.exists():
                with open(self.summary_path, newline="") as f:
                    rows = list(csv.DictReader(f))
            kept = [r for r in rows if r.get("run_id") != self.run_id]
            dropped = len(kept) != len(rows)
            if row is not None:
                kept.append(row)
            if row is not None or dropped:
                _atomic_write(self.summary_path, _csv_text(kept, SUMMARY_COLUMNS))
            return dropped
