"""The harness from Python: run one experiment setting, load results into pandas.

    from experiments import load, run

    result = run(["problem=logreg_fmnist", "algorithm=apam", "workers=4", "epochs=1"], results_dir="scratch")
    result.status, result.summary["time_per_epoch_s"], result.trace[["epoch", "train_loss"]]
    df = load("scratch")                      # every run's summary row, all experiments of the folder
    df.groupby("workers")["time_per_epoch_s"].mean()

``run`` takes the same ``KEY=VALUE`` overrides as ``python -m experiments.run`` (without ``-m``: one run), checks them
the same way (a bad value raises :class:`experiments.errors.ConfigError` with the one-line message, nothing written)
and writes the same files under ``results_dir``; ``load`` reads them back.
"""

from __future__ import annotations

import multiprocessing
import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from omegaconf import OmegaConf

from experiments.command_line import experiment_multirun
from experiments.errors import ConfigError
from experiments.results_folder import path_override
from experiments.runner import execute
from experiments.settings.compose import compose_jobs, precheck
from experiments.settings.fields import folder_problem
from experiments.store.run_id import make_run_id
from experiments.store.sink import RunSink
from experiments.store.table import read_summary_frame


@dataclass(frozen=True)
class RunResult:
    """One run's outcome.

    Attributes:
        status: ``ok``, ``diverged``, ``failed`` or ``skipped`` (finished earlier with the same config; ``force=true``
            reruns).
        run_id: the run's id (its folder's name).
        run_dir: the run's folder (config.yaml, provenance.json, trace.csv, staleness.csv, ...).
        summary: its row of the experiment's summary.csv (column names of docs/INTERFACES.md), values typed as
            pandas reads them (int, float, str; NaN where empty); {} when the run left no row.
        trace: its trace.csv: one row per evaluation point (epoch, updates, time_s, losses, accuracies, staleness).
    """

    status: str
    run_id: str
    run_dir: Path
    summary: dict
    trace: pd.DataFrame


def run(overrides: list[str] | tuple[str, ...] = (), results_dir: str | Path | None = None) -> RunResult:
    """Run one setting (``overrides``: Hydra ``KEY=VALUE`` strings, as on the command line) and return its result.

    Args:
        overrides: the setting, e.g. ``["workers=8", "engine=simulated_dedicated"]``; no sweeps (``a,b`` values).
        results_dir: where the run's files go (default: the config's ``results_dir``, ``results``).

    Raises:
        ConfigError: a bad key or value, or missing data (the message names it; nothing is written); overrides
            that are not a list of ``KEY=VALUE`` strings, or that ask for a sweep (``-m``: a sweep's values, an
            ``experiment=``, a launcher's or sweeper's key); a ``results_dir`` that is not a path (``5``, ``""``)
            or that Hydra cannot take even quoted (``${``: experiments/results_folder.py ``path_override``); a
            finished run's trace.csv damaged since it was judged.

    A run that fails (a worker lost, an error inside the run) is recorded and returned, ``status`` ``failed``, its
    ``summary`` naming why and its ``trace`` what it recorded before it failed (no row when that was before the first
    evaluation).
    """
    if getattr(multiprocessing.current_process(), "_inheriting", False):  # multiprocessing's own test of this case
        raise RuntimeError(
            "experiments.run() called while a worker process starts: a worker begins by running the main script "
            'again, and this script calls run() when imported; put the call under `if __name__ == "__main__":`'
        )
    if (
        isinstance(overrides, (str, bytes))
        or not isinstance(overrides, (list, tuple))
        or not all(isinstance(o, str) for o in overrides)
    ):
        raise ConfigError(f"overrides={overrides!r}: a list of KEY=VALUE strings, e.g. ['workers=8']")
    if any(o.startswith("-") for o in overrides):
        bad = next(o for o in overrides if o.startswith("-"))
        raise ConfigError(f"{bad}: experiments.run takes one setting's KEY=VALUE overrides (sweeps: the command line)")
    for o in overrides:  # a launcher or sweeper runs a sweep's jobs: here there is one job, in this process
        if (
            o.split("=", 1)[0]
            .lstrip("+~")
            .startswith(("hydra/launcher", "hydra.launcher", "hydra/sweeper", "hydra.sweeper"))
        ):
            raise ConfigError(f"{o}: run() is one run in this process; launchers and sweepers run sweeps (-m)")
    experiment_multirun(list(overrides), multirun=False)
    if results_dir is not None and (not isinstance(results_dir, (str, os.PathLike)) or not str(results_dir).strip()):
        raise ConfigError(f"results_dir={results_dir!r}: the path of a folder (or None: the config's, results)")
    # quoted as the tools pass it on: a comma (a sweep to Hydra), '=', an accent or a quote is taken as written
    overrides = list(overrides) + ([path_override("results_dir", results_dir)] if results_dir is not None else [])
    settings = precheck(overrides, multirun=False)[0]
    cfg = compose_jobs([overrides])[0]
    overrides = _as_the_job_reads_them(cfg, overrides)
    status = execute(cfg, overrides)
    run_id = make_run_id(overrides, settings.seed)
    sink = RunSink(settings.results_dir, settings.experiment_id, run_id)
    rows = load(sink.exp_dir)
    rows = rows[rows["run_id"] == run_id] if "run_id" in rows else rows.iloc[0:0]
    row = rows.iloc[[-1]].to_dict("records")[0] if len(rows) else {}
    trace_path = sink.run_dir / "trace.csv"
    why = sink.trace_damage()
    if why is not None and status != "failed":  # damaged since the run was judged (a finished run's is rerun)
        raise ConfigError(f"{trace_path}: {why}; force=true runs it again")
    try:  # a failed run's trace stops where it failed: no row at all when that was before the first evaluation
        trace = pd.read_csv(trace_path) if trace_path.exists() else pd.DataFrame()
    except (ValueError, UnicodeDecodeError):
        trace = pd.DataFrame()
    return RunResult(status, run_id, sink.run_dir, row, trace)


def _as_the_job_reads_them(cfg, overrides: list[str]) -> list[str]:
    """``overrides`` as a job of the command line reads them (Hydra's ``hydra.overrides.task``, whose interpolations
    resolve against the job's config when read: ``algorithm.lr=${algorithm.beta1}`` is ``algorithm.lr=0.9``), so the
    same input names the same run on both paths, and two values of one ``${oc.env:...}`` are two runs (the API kept
    the text: one id, and the second run replaced the first)."""
    if not any("${" in o for o in overrides):
        return overrides
    return list(OmegaConf.create({"task": overrides}, parent=cfg).task)


def load(results_dir: str | Path, experiment: str | None = None) -> pd.DataFrame:
    """Every run's summary row under ``results_dir`` as one DataFrame (columns of docs/INTERFACES.md).

    ``results_dir`` may be a results folder (``results/``: every ``<experiment>/summary.csv`` below it, one frame) or
    one experiment's folder (``results/lr_speedup``); ``experiment`` picks one experiment of a results folder. Empty
    (no columns) when there is no summary.

    Raises:
        FileNotFoundError: ``results_dir`` does not exist or is not a folder.
        experiments.errors.ConfigError: ``results_dir`` is not a path, ``experiment`` is not the name of an
            experiment folder with a summary there, or a summary is damaged (one line naming it and what is wrong).
    """
    if not isinstance(results_dir, (str, os.PathLike)) or not str(results_dir).strip():
        raise ConfigError(f"results_dir={results_dir!r}: the path of a results or experiment folder")
    root = Path(results_dir)
    if why := folder_problem(root):
        raise FileNotFoundError(f"{root}: {why}")
    if experiment is not None:
        found = sorted(p.parent.name for p in root.glob("*/summary.csv"))
        found += [root.name] if (root / "summary.csv").is_file() else []  # an experiment's folder, by its name
        if not isinstance(experiment, str) or experiment not in found:
            raise ConfigError(
                f"experiment={experiment!r}: no such experiment folder with a summary in {root} "
                f"(there: {', '.join(found) or 'none'})"
            )
    if (root / "summary.csv").exists() or (root / "summary.csv").is_symlink():
        paths = [root / "summary.csv"]
    else:  # a link to nothing is listed too (glob leaves it out): read_summary_frame names it
        paths = sorted(
            p / "summary.csv"
            for p in root.iterdir()
            if p.is_dir()
            and ((p / "summary.csv").exists() or (p / "summary.csv").is_symlink())
            and (experiment is None or p.name == experiment)
        )
    frames = [read_summary_frame(p) for p in paths]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
