"""The results sink: a run's folder and the experiment's ``summary.csv`` (docs/INTERFACES.md, "Result files").

``<results_dir>/<experiment>/runs/<run_id>/`` gets ``config.yaml`` (the resolved config), ``trace.csv`` (one row
per evaluation point), ``staleness.csv`` (histogram), ``provenance.json`` and ``summary_row.json`` (the run's summary
row as written); the run's row goes into ``<results_dir>/<experiment>/summary.csv``. Every file is written whole
under a unique temporary name and renamed (experiments/store/atomic.py), and the summary is rewritten under a file
lock, so several runs finishing at once leave one header and whole rows, and a rerun replaces its old row (exactly
one row per run).

A summary that does not parse cleanly -- no ``run_id`` column, a row of another width than the header, a last row
without its newline, an empty or duplicate run id, a row whose run folder is missing, a cell the runner cannot have
written (``workers=-5``: experiments/store/table.py ``row_problem``), bytes that are not UTF-8 CSV -- is set aside
as ``summary.csv.damaged-<n>`` and rebuilt from the run folders, with one line on stderr naming it: each folder's
``summary_row.json``, else (runs written before that file existed) the folder's row if the damaged file holds it
whole; a run with neither has no row and counts as unfinished (it runs again). A summary that cannot be read at all
(permissions, not a regular file) is a :class:`experiments.errors.ConfigError` naming it.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path

import yaml
from filelock import FileLock

from experiments.log import get_logger
from experiments.store.damage import (
    has_aliases,
    provenance_problem,
    read_provenance,
    staleness_problem,
    trace_problem,
)
from experiments.store.inputs import input_changes
from experiments.store.run_id import IGNORED_IN_RUN_ID, LOOKUP_TABLES
from experiments.store.table import (
    csv_cell,
    csv_text,
    file_problem,
    parse_summary,
    row_problem,
    set_aside,
    write_atomically,
)

log = get_logger(__name__)

TRACE_COLUMNS = [
    "run_id",
    "problem",
    "algorithm",
    "engine",
    "workers",
    "delay_model",
    "max_delay",
    "batch_size",
    "seed",
    "epoch",
    "updates",
    "gradients",
    "clock",
    "time_s",
    "train_loss",
    "train_acc",
    "test_loss",
    "test_acc",
    "staleness_mean",
    "staleness_max",
    "experiment",
    "tau",
    "straggler_sigma",
    "straggler_slowdown",
    "opt_gap",
]


SUMMARY_COLUMNS = [
    "experiment",
    "run_id",
    "problem",
    "algorithm",
    "engine",
    "clock",
    "workers",
    "delay_model",
    "max_delay",
    "tau",
    "straggler_sigma",
    "straggler_slowdown",
    "batch_size",
    "seed",
    "epochs",
    "updates",
    "gradients",
    "time_s",
    "time_per_epoch_s",
    "target_loss",
    "time_to_target_s",
    "updates_to_target",
    "final_train_loss",
    "final_train_acc",
    "final_test_loss",
    "final_test_acc",
    "final_opt_gap",
    "staleness_mean",
    "staleness_max",
    "status",
    "message",
    "cost_grad_s",
    "cost_update_s",
    "cost_latency_s",
    "cost_overhead_s",
    "cost_master_s",
    "overruns",
    "master_busy_s",
    "cost_overhead_idle_s",
    "speed_probe_s",
    "cal_probe_s",
    "late_wakeups",
    "late_expected",
]


SUMMARY_ROW_FILE = "summary_row.json"


RUN_FILES = ("config.yaml", "trace.csv", "provenance.json")  # what a finished run's folder holds


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


def _read_row_file(run_dir: Path) -> dict | None:
    """A run folder's ``summary_row.json`` when it holds the row of this run (a mapping whose ``run_id`` is the
    folder's name) and the folder holds a run's files; else None."""
    path = run_dir / SUMMARY_ROW_FILE
    if file_problem(path) is not None or not path.is_file():
        return None
    try:
        row = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):  # nested deeper than the decoder recurses: damaged as well
        return None
    return row if isinstance(row, dict) and row.get("run_id") == run_dir.name else None


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
        self._lock = FileLock(str(self.summary_path) + ".lock", timeout=120)  # one object: re-entrant

    def finished(self) -> bool:
        """True when the summary already holds a finished (``ok`` or ``diverged``) row for this run, its trace
        exists and its ``config.yaml``, ``trace.csv``, ``staleness.csv`` and ``provenance.json`` read back whole; a
        damaged or missing one makes the run unfinished, with one line on stderr (it runs again and rewrites it).

        Raises:
            ConfigError: the summary cannot be read (:func:`parse_summary`).
        """
        row = self.summary_row()
        if row is None or row.get("status") not in ("ok", "diverged") or not (self.run_dir / "trace.csv").exists():
            return False
        for name, damage in (
            ("config.yaml", self.config_damage()),
            ("trace.csv", self.trace_damage()),
            ("staleness.csv", staleness_problem(self.run_dir / "staleness.csv")),
            ("provenance.json", provenance_problem(self.run_dir / "provenance.json")),
        ):
            if damage is not None:
                log.info(
                    f"[rerun] {self.exp_dir.name}/{self.run_id}: {self.run_dir / name} {damage}; the run counts "
                    "as unfinished"
                )
                return False
        return True

    def trace_damage(self) -> str | None:
        """Why the run's ``trace.csv`` cannot be read back (:func:`trace_problem`); None when whole or absent."""
        return trace_problem(self.run_dir / "trace.csv")

    def _read_config(self) -> tuple[dict | None, str | None]:
        """The run's ``config.yaml`` as a mapping, and why it is damaged (None when whole)."""
        path = self.run_dir / "config.yaml"
        why = file_problem(path)
        if why is not None:
            return None, f"cannot be read ({why})"
        try:
            raw = path.read_bytes()
        except OSError as exc:
            return None, f"cannot be read ({exc.strerror})"
        try:
            text = raw.decode("utf-8")
            if has_aliases(text):  # never written by the harness; nested ones grow to gigabytes when walked
                return None, "holds YAML aliases, which the harness never writes"
            data = yaml.safe_load(text)
        except (UnicodeDecodeError, yaml.YAMLError) as exc:
            return None, f"is not valid YAML ({' '.join(str(exc).split())[:100]})"
        if not isinstance(data, dict):
            return None, f"is not a mapping of settings (a {type(data).__name__})"
        if not raw.endswith(b"\n"):  # a YAML dump ends its last line; a file cut short mostly does not
            return None, "does not end with a newline (truncated)"
        written = self._provenance()
        want, size = written.get("config_sha256"), written.get("config_bytes")
        if want is not None and isinstance(size, int) and len(raw) < size and hashlib.sha256(raw).hexdigest() != want:
            return None, f"is shorter than written ({len(raw)} of {size} bytes: truncated)"
        return data, None

    def config_damage(self) -> str | None:
        """Why the run's ``config.yaml`` cannot be trusted (unreadable, not UTF-8 YAML, not a mapping, no final
        newline, or -- for runs that recorded them -- shorter than the ``config_bytes`` ``provenance.json`` holds and
        not the bytes of its ``config_sha256``); None when it is whole or absent. A file edited since, no shorter,
        is whole: :meth:`config_changes` compares it key by key. A run written before ``config_bytes`` was recorded
        whose file was cut exactly at a line end and still parses is not told from a whole one."""
        if not (self.run_dir / "config.yaml").exists():
            return None
        return self._read_config()[1]

    def config_changes(self, cfg: dict, ignore=IGNORED_IN_RUN_ID | LOOKUP_TABLES) -> list[str]:
        """How the resolved config ``cfg`` (a plain dict) differs from the one this run finished with
        (``config.yaml``): ``"key: old -> new"`` for every dotted key present in both whose value differs (top-level
        keys in ``ignore`` -- where results go, how they are shown -- left out). Keys added or removed since are not
        changes: a new key's default keeps the old behaviour. [] when there is no config.yaml; one entry
        ``config.yaml: <why>`` when it is damaged (:meth:`config_damage`). A file the run read (a LIBSVM data set, a
        replayed timeline) that holds other bytes now is a change too (experiments/store/inputs.py)."""
        if not (self.run_dir / "config.yaml").exists():
            return []
        old, damage = self._read_config()
        if damage is not None:
            return [f"config.yaml: {damage}"]
        a, b = _flat(old), _flat(cfg)
        return [
            f"{k}: {a[k]!r} -> {b[k]!r}"
            for k in sorted(a.keys() & b.keys())
            if k.split(".")[0] not in ignore and a[k] != b[k]
        ] + input_changes(self._provenance().get("inputs"), cfg)

    def _provenance(self) -> dict:
        """The run's ``provenance.json`` as a mapping; {} when it is missing or damaged (:meth:`finished` tells)."""
        return read_provenance(self.run_dir / "provenance.json")[0] or {}

    def summary_row(self) -> dict | None:
        """This run's row of ``summary.csv`` (column -> text), None when it has none. A damaged summary is repaired
        first (module docstring).

        Raises:
            ConfigError: the summary cannot be read.
        """
        for row in self._rows():
            if row.get("run_id") == self.run_id:
                return row
        return None

    def _rows(self) -> list[dict]:
        """The summary's rows, repaired under the lock when it does not parse cleanly."""
        header, rows, damage = parse_summary(self.summary_path, self.exp_dir / "runs")
        if damage is None:
            return [dict(zip(header, r)) for r in rows]
        with self._lock:
            return self._repaired_rows()

    def _repaired_rows(self, why: str | None = None) -> list[dict]:
        """Under the lock: the summary's rows; when it is damaged (or ``why`` names what is wrong with a summary that
        parses: :func:`restore_summary`), it is set aside (where there is one) and rebuilt first."""
        header, rows, damage = parse_summary(self.summary_path, self.exp_dir / "runs")
        damage = damage or why
        if damage is None:
            return [dict(zip(header, r)) for r in rows]
        whole = {}  # rows of the damaged file that can stand for their runs: full width, named run id
        if "run_id" in header:
            at = header.index("run_id")
            whole = {
                r[at]: dict(zip(header, r))
                for r in rows
                if len(r) == len(header) and r[at] and row_problem(header, r) is None
            }
        order = [r[header.index("run_id")] for r in rows if "run_id" in header and len(r) > header.index("run_id")]
        runs_dir = self.exp_dir / "runs"
        folders = sorted(p.name for p in runs_dir.iterdir() if p.is_dir()) if runs_dir.is_dir() else []
        rebuilt = {}
        for name in list(dict.fromkeys(order)) + folders:
            if name in rebuilt or not (runs_dir / name).is_dir():
                continue
            row = _read_row_file(runs_dir / name)
            if row is None and name in whole and all((runs_dir / name / f).exists() for f in RUN_FILES):
                row = whole[name]
            if row is not None:
                rebuilt[name] = row
        aside = set_aside(self.summary_path) if self.summary_path.exists() else None
        kept = list(rebuilt.values())
        if kept:
            write_atomically(self.summary_path, csv_text(kept, SUMMARY_COLUMNS))
        log.info(
            f"[repair] {self.summary_path}: {damage}; {f'set aside as {aside.name}, ' if aside else ''}rebuilt with "
            f"{len(kept)} row(s) from {len(folders)} run folder(s)"
        )
        return [{k: str(csv_cell(r.get(k))) for k in r} for r in kept]

    def write_config(self, config_yaml: str, provenance: dict) -> None:
        """The resolved config and the provenance (first thing a run writes, after validation); the provenance
        gains ``config_sha256`` and ``config_bytes``, the sha256 and the length of the config's UTF-8 bytes, by
        which a truncated ``config.yaml`` is told from a whole one (:meth:`config_damage`)."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        write_atomically(self.run_dir / "config.yaml", config_yaml)
        raw = config_yaml.encode("utf-8")
        provenance = {**provenance, "config_sha256": hashlib.sha256(raw).hexdigest(), "config_bytes": len(raw)}
        write_atomically(self.run_dir / "provenance.json", json.dumps(provenance, indent=1, default=str))

    def add_provenance(self, extra: dict) -> None:
        """Merge ``extra`` (e.g. the costs the run's clock used) into the run's ``provenance.json``."""
        data = {**self._provenance(), **extra}
        write_atomically(self.run_dir / "provenance.json", json.dumps(data, indent=1, default=str))

    def write_compute_times(self, rows: list[dict], columns: list[str]) -> None:
        """``compute_times.csv``: one row per gradient of a real engine (experiments/engines/emulation.py)."""
        self.write_table("compute_times.csv", rows, columns)

    def write_table(self, name: str, rows: list[dict], columns: list[str]) -> None:
        """A CSV file ``name`` in the run's folder, one row per dict, ``columns`` first."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        write_atomically(self.run_dir / name, csv_text(rows, columns))

    def write_trace(self, rows: list[dict], histogram: Counter) -> None:
        """``trace.csv`` (contract columns first) and ``staleness.csv`` (``staleness, count``)."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        write_atomically(self.run_dir / "trace.csv", csv_text(rows, TRACE_COLUMNS))
        hist = [{"staleness": k, "count": histogram[k]} for k in sorted(histogram)]
        write_atomically(self.run_dir / "staleness.csv", csv_text(hist, ["staleness", "count"]))

    def append_summary(self, row: dict) -> None:
        """Put the run's row into ``summary.csv`` (replacing an older row of the same run), under a file lock; the
        row is first kept as ``<run_dir>/summary_row.json``, from which a damaged summary is rebuilt.

        Raises:
            ConfigError: the summary cannot be read.
            OSError: a file could not be written (one line naming it; nothing half-written is left).
        """
        self.run_dir.mkdir(parents=True, exist_ok=True)
        write_atomically(self.run_dir / SUMMARY_ROW_FILE, json.dumps(row, indent=1, default=str) + "\n")
        self._replace_summary_row(row)

    def _replace_summary_row(self, row: dict | None) -> bool:
        """Under the summary's file lock: drop this run's row, then append ``row`` (None: nothing; a missing summary
        then stays missing). Returns True when a row was dropped."""
        if row is None and not self.summary_path.exists():
            return False
        with self._lock:
            rows = self._repaired_rows()
            kept = [r for r in rows if r.get("run_id") != self.run_id]
            dropped = len(kept) != len(rows)
            if row is not None:
                kept.append(row)
            if row is not None or dropped:
                write_atomically(self.summary_path, csv_text(kept, SUMMARY_COLUMNS))
            return dropped


def restore_summary(exp_dir: str | Path) -> int:
    """Rebuild the experiment folder's ``summary.csv`` when it is missing or holds its header alone while run folders
    of ``<exp_dir>/runs`` hold their ``summary_row.json``: as a damaged summary is rebuilt (module docstring), with
    one line naming it. Returns the rows written (0: nothing to do; a damaged summary is its readers' to name).

    Raises:
        ConfigError: the summary cannot be read (:func:`parse_summary`).
        OSError: a file could not be written.
    """
    exp_dir = Path(exp_dir)
    runs = exp_dir / "runs"
    if not runs.is_dir() or not any(_read_row_file(p) for p in runs.iterdir() if p.is_dir()):
        return 0
    sink = RunSink(exp_dir.parent, exp_dir.name, "-")
    header, rows, damage = parse_summary(sink.summary_path)
    if damage is not None or rows:
        return 0
    why = f"{'its header alone' if header else 'missing'}, while run folders hold their rows"
    with sink._lock:
        return len(sink._repaired_rows(why))


def remove_runs(results_dir: str | Path, experiment: str, run_ids) -> int:
    """Remove runs from the experiment folder ``<results_dir>/<experiment>``: their rows of ``summary.csv`` (rewritten
    once, under its file lock, the other rows as they were) and then their run folders. Run ids it does not hold are
    ignored. Returns the number of summary rows removed (experiments/prune.py).

    Raises:
        ConfigError: the summary cannot be read.
        OSError: a file could not be written or removed.
    """
    import shutil

    ids = set(run_ids)
    sink = RunSink(results_dir, experiment, "-")
    dropped = 0
    if sink.summary_path.exists():
        with sink._lock:
            rows = sink._repaired_rows()
            kept = [r for r in rows if r.get("run_id") not in ids]
            dropped = len(rows) - len(kept)
            if dropped:
                write_atomically(sink.summary_path, csv_text(kept, SUMMARY_COLUMNS))
    for rid in sorted(ids):
        if not rid or Path(rid).name != rid or rid in (".", ".."):  # a name, never a path out of runs/
            continue
        folder = sink.exp_dir / "runs" / rid
        if folder.is_dir() and not folder.is_symlink():
            shutil.rmtree(folder)
    return dropped
