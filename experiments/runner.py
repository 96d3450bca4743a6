"""One run, top to bottom: settings, skip or go, problem and rule, costs, engine, results.

:func:`execute` is what ``python -m experiments.run`` (experiments/run.py) calls for every job of a run or a sweep,
and what the Python API (experiments/__init__.py) calls: build and check the typed settings (nothing written on bad
input); skip the run when its results exist (``force=true`` reruns); build the problem and the update rule; write
the resolved config and the provenance; resolve the costs the engine needs from the calibration; train, evaluating
at ``eval_every`` epochs (never timed); write ``trace.csv``, ``staleness.csv`` and the run's row in ``summary.csv``
-- also when the run diverged or failed.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import time
import traceback
from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf

from experiments.clock import speedprobe
from experiments.clock.calibration import calibrated_probe, used_line
from experiments.clock.predict import KINDS, predict
from experiments.clock.resolve import calibration_of, emulated_lateness, resolve
from experiments.engines import EngineResult, get_engine, warmup_updates
from experiments.engines.dist_group import torchrun_rank
from experiments.engines.emulation import COMPUTE_TIMES_COLUMNS, compute_times_rows, expected_late
from experiments.engines.timeline import TIMELINE_COLUMNS
from experiments.errors import ConfigError, Interrupted, WorkerLost
from experiments.log import get_logger
from experiments.settings.build import as_typed, build_settings, make_rule, resolved
from experiments.settings.preflight import check_device, check_writable, make_problem, resolve_device
from experiments.store import provenance
from experiments.store.inputs import fingerprints
from experiments.store.run_id import make_run_id
from experiments.store.run_lock import run_lock
from experiments.store.sink import RunSink
from experiments.store.summary import constant_columns, cores_column, summary_row
from experiments.sweeps.tuning import (
    CHOICES_FILE,
    TRIALS_DIR,
    check_choice,
    check_overrides,
    choice_row,
    fmt,
    read_choice,
    setting_key,
    tune,
    write_choice,
)
from experiments.training.recorder import Diverged, Recorder

log = get_logger(__name__)


def interrupted_message(signum: int) -> str:
    """The summary row's message of a run stopped by a signal: ``interrupted (SIGTERM)`` / ``interrupted (SIGINT)``."""
    return f"interrupted ({signal.Signals(signum).name})"


def job_event(event: str, run_id: str, settings) -> None:
    """Append one JSON line to the file ``$APAM_JOB_EVENTS`` names, when set: a job's ``start`` (after its problem is
    built, before its config is written) or ``end`` (after its summary row), with its run id, engine, clock, process
    id and ``time.time()`` in seconds. How a scheduler's behaviour is checked (wall-clock jobs never overlap
    anything); one short line per ``write`` in append mode, so jobs in several processes share the file."""
    path = os.environ.get("APAM_JOB_EVENTS")
    if path:
        line = json.dumps(
            {
                "event": event,
                "run_id": run_id,
                "experiment": settings.experiment_id,
                "engine": settings.engine.name,
                "clock": settings.engine.clock,
                "pid": os.getpid(),
                "t": time.time(),
            }
        )
        with open(path, "a") as f:
            f.write(line + "\n")


def _skip(settings, config: dict, sink: RunSink) -> bool:
    """True when the run finished with the same config (``force=true`` reruns it); a finished run whose config
    changed since (an experiment yaml edited, another tuned step) runs again."""
    if sink.finished() and not settings.force:
        changes = sink.config_changes(config)
        if not changes:
            log.info(f"[skip] {_where(sink, settings)}: finished earlier (force=true reruns)")
            _say_if_cores_changed(sink, settings)
            return True
        log.info(
            f"[rerun] {_where(sink, settings)}: finished with another config ({'; '.join(changes[:3])}"
            f"{'; ...' if len(changes) > 3 else ''})"
        )
    return False


def _say_if_cores_changed(sink: RunSink, settings) -> None:
    """A finished simulated run with ``engine.cores`` null shared the cores the machine offered then (its ``cores``
    column); when this process is offered another number (another machine, ``taskset``), a warning says the kept
    times are of the old count. It is kept, not rerun: results made elsewhere (the committed ones) pair each
    simulated time with the measured runs of the machine that made them."""
    if settings.engine.name != "simulated" or settings.engine.cores is not None:
        return
    recorded, now = str((sink.summary_row() or {}).get("cores") or ""), str(cores_column(settings))
    if recorded.isdigit() and recorded != now:
        log.warning(
            f"{_where(sink, settings)}: its simulated times are of the {recorded} cores the machine offered when it "
            f"ran (engine.cores=null); this process is offered {now}: force=true reruns it with {now}"
        )


def _where(sink: RunSink, settings) -> str:
    """The run as its messages name it: ``<experiment>/<run_id>`` (a tuning trial's ``<experiment>/tuning/...``)."""
    return (sink.run_dir.parent.parent / sink.run_id).relative_to(Path(settings.results_dir)).as_posix()


def _with_values(cfg, values: dict):
    """A copy of the composed config ``cfg`` (DictConfig or mapping) with the dotted keys of ``values`` set."""
    out = OmegaConf.create(cfg if isinstance(cfg, DictConfig) else dict(cfg))
    OmegaConf.set_struct(out, False)
    for key, value in values.items():
        OmegaConf.update(out, key, value, merge=True)
    return out


def execute(cfg, overrides: list[str]) -> str:
    """Run one job of a composed config; return its status (``ok``, ``diverged``, ``failed`` or ``skipped``;
    ``worker`` on a torchrun worker rank of engine=distributed, which writes nothing).

    With ``lr_tuning_seed`` set (experiments/sweeps/tuning.py), a job at that seed tunes its setting -- each trial a
    run below ``<experiment>/tuning/`` -- and returns ``ok`` (``failed`` when a trial failed); a job at another seed
    runs the setting at the values the tuning chose (``<experiment>/tuning.csv``). A tuning seed's job whose choice
    is already in tuning.csv while the trials' run folders are absent (a results folder that keeps only the choices,
    as the committed ones do) is skipped: the choice stands (``force=true`` tunes again).

    Args:
        cfg: the composed config (a DictConfig from Hydra, or a mapping).
        overrides: the job's command-line overrides (they name the run: :func:`experiments.store.run_id.make_run_id`).

    Raises:
        ConfigError: bad input found before any work (nothing written); a job of another seed whose setting the
            tuning seed has not tuned yet.
        Interrupted: a signal stopped the run (it is recorded first).
    """
    try:
        return _execute(cfg, overrides)
    except ConfigError as exc:  # a value the job's command line set, shown as typed (a problem's own check: 500.0)
        raise as_typed(exc, overrides) from None


def _execute(cfg, overrides: list[str]) -> str:
    """:func:`execute`, its messages as the checks word them."""
    settings = build_settings(cfg)
    check_writable(settings.results_dir)
    check_device(settings.device)
    if settings.lr_tuning_seed is None:
        return _execute_one(cfg, settings, overrides, settings.experiment_id, None)
    check_overrides(overrides, settings.lr_tuning_seed)
    if settings.engine.name == "distributed":
        raise ConfigError(
            f"lr_tuning_seed={settings.lr_tuning_seed}: tuning runs on engine=simulated or "
            "shared_memory, not distributed (its worker ranks run one job each)"
        )
    key = setting_key(overrides, settings.lr_tuning_seed)
    exp_dir = Path(settings.results_dir) / settings.experiment_id
    if settings.seed == settings.lr_tuning_seed:
        if not settings.force and read_choice(exp_dir, key) is not None and not _trials_here(exp_dir):
            log.info(
                f"[skip] {settings.experiment_id}/{key}: tuned earlier (its choice is in {CHOICES_FILE}; the trials' "
                "run folders are not here); force=true tunes it again"
            )
            return "skipped"
        return _tune(cfg, settings, overrides, key, exp_dir)
    values = read_choice(exp_dir, key)
    if values is None:
        raise ConfigError(
            f"lr_tuning_seed={settings.lr_tuning_seed}: {exp_dir / CHOICES_FILE} has no choice for "
            f"{key}: run the tuning seed first"
        )
    check_choice(values, settings.tuning, exp_dir / CHOICES_FILE)
    cfg = _with_values(cfg, values)
    return _execute_one(cfg, build_settings(cfg), overrides, settings.experiment_id, key)


def _trials_here(exp_dir: Path) -> bool:
    """Whether the tuning trials' run folders are here (``<experiment>/tuning/runs/``): a results folder that keeps
    only the choices and the trials' summary (a committed one, a fresh clone) has none, and its choices stand."""
    runs = exp_dir / TRIALS_DIR / "runs"
    return runs.is_dir() and any(runs.iterdir())


def _tune(cfg, settings, overrides: list[str], key: str, exp_dir: Path) -> str:
    """The tuning seed's job: every trial (a run of the setting with a step factor and policy size, below
    ``<experiment>/tuning/``) that :func:`experiments.sweeps.tuning.tune` asks for, skipped when finished; then the
    setting's row of tuning.csv."""
    trials_dir = f"{settings.experiment_id}/{TRIALS_DIR}"
    failed = []

    def run_trial(values: dict) -> dict:
        extra = [f"{k}={fmt(v)}" for k, v in values.items()]
        trial_cfg = _with_values(cfg, values)
        status = _execute_one(trial_cfg, build_settings(trial_cfg), overrides + extra, trials_dir, key)
        if status == "failed":
            failed.append(extra)
        run_id = make_run_id(overrides + extra, settings.seed)
        return RunSink(settings.results_dir, trials_dir, run_id).summary_row() or {"status": "failed"}

    choice = tune(settings, key, run_trial)
    write_choice(exp_dir, choice_row(choice, settings))
    log.info(
        f"[tuned] {settings.experiment_id}/{key}: lr_factor={fmt(choice.factor)}"
        + (f", {choice.policy_key}={choice.policy_value}" if choice.policy_key else "")
        + (f" (at the {choice.at_edge} edge of the factors tried)" if choice.at_edge else "")
        + f" after {choice.trials} trials"
    )
    return "failed" if failed else "ok"


def _execute_one(cfg, settings, overrides: list[str], experiment_dir: str, tuning: str | None) -> str:
    """One run into ``<results_dir>/<experiment_dir>``: skipped when finished, else trained and written (module
    docstring); ``tuning``: its setting key (summary column ``tuning_setting``) or None. The run's folder is held
    by this process meanwhile (experiments/store/run_lock.py), except on a torchrun worker rank (rank 0 holds it)."""
    sink = RunSink(settings.results_dir, experiment_dir, make_run_id(overrides, settings.seed))
    if settings.engine.name == "distributed" and (torchrun_rank() or 0) > 0:
        return _execute_held(cfg, settings, sink, tuning)
    with run_lock(sink.run_dir, _where(sink, settings)):
        return _execute_held(cfg, settings, sink, tuning)


def _execute_held(cfg, settings, sink: RunSink, tuning: str | None) -> str:
    """:func:`_execute_one` once the run's folder is held."""
    config = resolved(cfg)
    run_id = sink.run_id
    if _skip(settings, config, sink):
        return "skipped"
    torch.set_num_threads(settings.threads)
    device = resolve_device(settings.device)
    problem = make_problem(settings, device)
    rule = make_rule(settings)
    if settings.engine.name == "distributed" and (torchrun_rank() or 0) > 0:
        # a torchrun worker rank: gradients for rank 0, no files
        from experiments.engines.dist_worker import serve  # torch.distributed: imported only by runs that use it

        serve(problem, settings, resolve(settings, problem, rule))
        return "worker"
    p = settings.problem
    # f* only where it is unique and cheap to certify (l2 > 0: strongly convex); else traces leave opt_gap empty
    opt = problem.optimum() if p.kind.startswith("logreg") and p.l2 > 0 else None
    job_event("start", run_id, settings)
    fresh = not any(sink.run_dir.iterdir())  # a first try of the run: bad input found below leaves no file of it
    sink.write_config(
        OmegaConf.to_yaml(OmegaConf.create(config)),
        {**provenance.collect(settings.threads, str(device)), "inputs": fingerprints(config)},
    )
    recorder = Recorder(
        problem,
        constant_columns(settings, run_id),
        eval_every=settings.eval_every,
        total_epochs=settings.total_epochs(problem.num_train),
        f_star=opt[0] if opt is not None else None,
        clock=settings.engine.clock,
        divergence_factor=settings.divergence_factor,
        progress=settings.progress,
    )
    result, status, message, signum, probe, notes = None, "ok", "", None, (math.nan, math.nan), []
    try:
        Interrupted.raise_pending()  # a stop whose exception was swallowed on the way here (an import)
        costs = resolve(settings, problem, rule)  # before the engine starts: no engine measures anything
        if costs.used:  # which calibration, how old, how spread: on stderr and in provenance.json
            log.info(used_line(costs.used))
            sink.add_provenance({"calibration_used": costs.used})
        if settings.engine.clock == "wall":  # how fast the machine is now, against its calibration
            probe = (speedprobe.measure(), calibrated_probe(calibration_of(settings)))
        Interrupted.raise_pending()
        result = get_engine(settings.engine.name).run(problem, rule, settings, recorder, costs)
        status, message = result.status, result.message
    except Diverged as exc:
        status, message, notes = "diverged", str(exc), getattr(exc, "__notes__", [])  # notes: workers lost before
    except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM: recorded like a failure, then the sweep stops
        signum = Interrupted.signum_of(exc)
        Interrupted.PENDING.clear()
        status, message, notes = "failed", interrupted_message(signum), getattr(exc, "__notes__", [])
    except ConfigError:  # bad input found on the way (an unusable calibration file, torchrun's variables): one
        if fresh:  # line, exit 2, no row, and no file: run_lock removes the folders it made once they are empty
            for path in sink.run_dir.iterdir():
                shutil.rmtree(path) if path.is_dir() else path.unlink()
        raise
    except Exception as exc:  # noqa: BLE001 -- recorded, not hidden: the row says what happened
        if not isinstance(exc, WorkerLost):  # a lost worker is a condition the engines report, not a bug: its
            traceback.print_exc()  # one line in the run's [failed] line and row (its own stderr said why it died)
        status, message = "failed", f"{type(exc).__name__}: {exc}".splitlines()[0]
    finally:
        recorder.close()
    if result is None and recorder.master is not None:  # stopped mid-run: the summary stops where the trace does
        result, message = _partial(recorder, problem.num_train, message)
    message = "; ".join([message, *notes])
    predictions = _predictions(settings, problem, sink, result) if status == "ok" else {}
    _write(sink, settings, run_id, recorder, result, status, message, problem.num_train, probe, tuning, predictions)
    if signum is not None:
        raise Interrupted(signum, recorded=run_id)
    Interrupted.raise_pending()  # a stop swallowed after the training ended: this run stands, the sweep stops
    return status


def _time_text(row: dict, warmup: int) -> str:
    """The summary row's time for the console line: ``12.5 s (wall)``, or that none was measured (a run that
    stopped before its clock started after ``warmup`` updates, or before any evaluation)."""
    time_s, clock, updates = row["time_s"], row["clock"], row["updates"]
    if time_s is not None and not math.isnan(time_s):
        return f"{time_s:.4g} s ({clock})"
    if warmup > 0 and updates is not None and updates == updates and updates < warmup:
        return f"time not measured (the {clock} clock starts after {warmup} warm-up updates)"
    return f"time not measured ({clock} clock)"


def _partial(recorder, num_train: int, message: str) -> tuple[EngineResult, str]:
    """The result of a run stopped mid-way, as it was at its last evaluation (so that the summary row's updates
    and staleness agree with its trace), and the message saying so."""
    m, last = recorder.master, (recorder.rows[-1] if recorder.rows else {})
    message += (
        f" after {m.version} updates; trace and summary stop at the last evaluation "
        f"(update {last.get('updates', 0)}, epoch {last.get('epoch', 0.0):.3g})"
    )
    samples = round(last.get("epoch", 0.0) * num_train)
    # the samples the clock saw up to that evaluation: none when it came before the clock started (a wall clock
    # starts after warm-up updates), and then its time 0 is no measured time
    timed = samples - recorder.clock_from if recorder.clock_from is not None else 0
    result = EngineResult(
        updates=last.get("updates", 0),
        gradients=last.get("gradients", 0),
        samples=samples,
        time_s=last.get("time_s", math.nan) if timed > 0 else math.nan,
        histogram=recorder.histogram_at_last_row(),
        timed_samples=max(timed, 0),
    )
    return result, message


def _late_expected(settings, result) -> float:
    """Late wake-ups the calibrated wake-up lateness gives for a measured emulated run's targets
    (:func:`experiments.engines.emulation.expected_late`); NaN for other runs, or when the calibration has no
    lateness samples for the run's base (nothing is measured here) or cannot be read."""
    if result is None or result.late_wakeups is None or not result.compute_times:
        return math.nan
    try:
        samples = emulated_lateness(settings, calibration_of(settings), measure=False)
    except (OSError, ValueError, KeyError, ConfigError):  # an unreadable calibration file: unknown, not a failure
        return math.nan
    return expected_late([t for _, _, _, t in result.compute_times], samples or [])


def _predictions(settings, problem, sink, result) -> dict:
    """A measured run with ``engine.predict``: the simulated clock's three predictions of it
    (experiments/clock/predict.py), after writing its timeline (the twin's input); {} otherwise."""
    if settings.engine.name == "simulated" or not settings.engine.predict or result is None:
        return {}
    path = None
    if result.timeline:
        sink.write_table("timeline.csv", [dict(zip(TIMELINE_COLUMNS, r)) for r in result.timeline], TIMELINE_COLUMNS)
        path = str(sink.run_dir / "timeline.csv")
    out = {}
    for kind in KINDS:
        if kind == "twin" and path is None:
            continue
        try:
            out[kind] = predict(settings, problem, make_rule(settings), kind, timeline=path)
        except (RuntimeError, ValueError, OSError) as exc:  # the measured run stands; its prediction is missing
            log.warning(f"{settings.experiment_id}: no {kind} prediction ({str(exc).splitlines()[0]})")
    return out


def _write(
    sink, settings, run_id, recorder, result, status, message, num_train, probe, tuning, predictions: dict
) -> None:
    """Trace, staleness, compute times, timeline, predictions, provenance additions and the summary row; then one
    line on stderr."""
    sink.write_trace(recorder.rows, result.histogram if result is not None else {})
    if result is not None and (result.costs or result.provenance):
        sink.add_provenance({"costs": result.costs, **result.provenance})
    if result is not None and result.compute_times:
        sink.write_compute_times(compute_times_rows(result.compute_times), COMPUTE_TIMES_COLUMNS)
    if result is not None and result.timeline:
        sink.write_table("timeline.csv", [dict(zip(TIMELINE_COLUMNS, r)) for r in result.timeline], TIMELINE_COLUMNS)
    if predictions:
        sink.write_table(
            "predicted_staleness.csv",
            [
                {"prediction": k, "staleness": tau, "count": n}
                for k, p in predictions.items()
                for tau, n in sorted(p.histogram.items())
            ],
            ["prediction", "staleness", "count"],
        )
    row = summary_row(
        settings, run_id, recorder.rows, result, status, message, num_train, probe, _late_expected(settings, result)
    )
    for kind, p in predictions.items():
        row[f"{kind}_time_per_epoch_s"] = p.time_per_epoch_s
    if tuning is not None:
        row["tuning_setting"] = tuning  # where the other seeds look up the factor this seed chose
    sink.append_summary(row)
    job_event("end", run_id, settings)

    def num(v, fmt):
        return "--" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, fmt)

    log.info(
        f"[{status}] {_where(sink, settings)}: {num(row['updates'], '.0f')} updates, {num(row['epochs'], '.3g')} "
        f"epochs, {_time_text(row, warmup_updates(settings, num_train))}, train loss "
        f"{num(row['final_train_loss'], '.4g')}, test acc {num(row['final_test_acc'], '.4f')}, "
        f"delay={row['delay_model']} mean staleness {num(row['staleness_mean'], '.3g')}"
        + (
            f", {row['overruns']} overruns, {row['late_wakeups']} late wake-ups (calibrated: "
            f"{num(row['late_expected'], '.3g')})"
            if row["overruns"] == row["overruns"]
            else ""
        )
        + (f" -- {message}" if message else "")
    )
