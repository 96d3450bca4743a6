"""One entry point: ``python -m experiments.run KEY=VALUE ...`` (a run) or ``... -m ...`` (a Hydra multirun sweep).

Flow of a run, top to bottom: check the command line (every job of a sweep, before anything is written); compose
the config; skip the run if its results exist (``force=true`` reruns); build the problem, the update rule and the
engine; write the resolved config and provenance; train, evaluating at ``eval_every`` epochs (never timed); write
``trace.csv``, ``staleness.csv`` and the run's row in ``summary.csv`` -- also when the run diverged or failed.

Exit codes: 0 done (or diverged: recorded, not an error of the harness), 1 the run failed, 2 bad input, 130 / 143
interrupted by SIGINT / SIGTERM (the run is recorded as failed with its partial trace, in a sweep too).
"""
from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # every process pins its math threads; cfg.threads sets torch's below

import math  # noqa: E402
import sys  # noqa: E402
import traceback  # noqa: E402
from pathlib import Path  # noqa: E402

import hydra  # noqa: E402
from omegaconf import DictConfig, OmegaConf  # noqa: E402

from experiments.errors import ConfigError  # noqa: E402
from experiments.settings.validate import build_rule_from_config  # noqa: E402,F401  (also used by calibrate, benchmarks)

_HYDRA_FLAGS_WITHOUT_CHECK = ("--help", "-h", "--hydra-help", "--cfg", "-c", "--info", "-i", "--shell-completion",
                              "-sc", "--config-name", "-cn", "--config-path", "-cp", "--config-dir", "-cd",
                              "--resolve", "-p", "--package")


def interrupted_message(signum: int) -> str:
    """The summary row's message of a run stopped by a signal: ``interrupted (SIGTERM)`` / ``interrupted (SIGINT)``."""
    import signal

    return f"interrupted ({signal.Signals(signum).name})"


def resolve_device(name: str):
    """``auto`` -> CUDA where present, else CPU. Returns a torch.device."""
    import torch

    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)



def _summary_row(cfg, run_id: str, rows: list[dict], result, status: str, message: str, num_train: int,
                 probe: tuple[float, float] = (math.nan, math.nan)) -> dict:
    last = rows[-1] if rows else {}
    target = cfg.problem.get("target_loss")
    hit = next((r for r in rows if target is not None and r["train_loss"] <= target), None)
    hist = result.histogram if result is not None else {}
    n_upd = sum(hist.values())
    epochs = (result.samples / num_train) if result is not None else last.get("epoch", float("nan"))
    time_s = result.time_s if result is not None else last.get("time_s", float("nan"))
    return {
        **{k: last.get(k, v) for k, v in _constant_columns(cfg, run_id).items()},
        "clock": cfg.engine.clock, "epochs": epochs,
        "updates": result.updates if result is not None else last.get("updates"),
        "gradients": result.gradients if result is not None else last.get("gradients"),
        "time_s": time_s, "time_per_epoch_s": _time_per_epoch(result, time_s, epochs, num_train),
        "target_loss": target,
        "time_to_target_s": hit["time_s"] if hit else float("nan"),
        "updates_to_target": hit["updates"] if hit else float("nan"),
        "final_train_loss": last.get("train_loss"), "final_train_acc": last.get("train_acc"),
        "final_test_loss": last.get("test_loss"), "final_test_acc": last.get("test_acc"),
        "final_opt_gap": last.get("opt_gap"),
        "staleness_mean": sum(k * v for k, v in hist.items()) / n_upd if n_upd else float("nan"),
        "staleness_max": max(hist) if hist else float("nan"),
        "discarded": last.get("discarded", 0),  # gradients a staleness policy did not apply (issue 14)
        "status": status, "message": message,
        **{f"cost_{k}": v for k, v in (result.costs if result is not None else {}).items()},
        **({"handoff": result.handoff} if result is not None and result.handoff else {}),
        "overruns": result.overruns if result is not None and result.overruns is not None else float("nan"),
        "late_wakeups": result.late_wakeups if result is not None and result.late_wakeups is not None
        else float("nan"),
        "late_expected": _late_expected(cfg, result),
        "master_busy_s": result.master_busy_s if result is not None and result.master_busy_s is not None
        else float("nan"),
        "speed_probe_s": probe[0], "cal_probe_s": probe[1],  # wall clock: the machine's speed now and calibrated
    }


def _late_expected(cfg, result) -> float:
    """Late wake-ups the calibrated wake-up lateness gives for a measured emulated run's targets
    (:func:`experiments.engines.emulation.expected_late`); NaN for other runs, or when the calibration has no
    lateness samples for the run's base (nothing is measured here) or cannot be read. The targets of gradients that
    overran (they never waited) count too: at most ``overruns`` x the late fraction too many."""
    if result is None or result.late_wakeups is None or not result.compute_times:
        return float("nan")
    from experiments.clock.calibration import Calibration, emulated_lateness
    from experiments.engines.emulation import expected_late

    try:
        samples = emulated_lateness(cfg.engine, Calibration(cfg.engine.get("calibration") or None), measure=False)
    except (OSError, ValueError, KeyError):  # an unreadable calibration file: unknown, not a failed run
        return float("nan")
    return expected_late([t for _, _, _, t in result.compute_times], samples or [])


def _tuning_setting(cfg, overrides: list[str]) -> str | None:
    """The run's setting for step-size tuning (experiments/sweeps/tuning.py) when ``lr_tuning_seed`` is set, else None."""
    if cfg.get("lr_tuning_seed") is None:
        return None
    from experiments.sweeps.tuning import setting_key

    return setting_key(overrides, int(cfg.lr_tuning_seed))


def _time_per_epoch(result, time_s: float, epochs: float, num_train: int) -> float:
    """Seconds per epoch over the samples the clock saw (a wall clock skips the warm-up updates)."""
    timed = result.timed_samples if result is not None and result.timed_samples is not None else None
    if timed is not None:
        return time_s / (timed / num_train) if timed else float("nan")
    return time_s / epochs if epochs else float("nan")


def _constant_columns(cfg, run_id: str) -> dict:
    d = cfg.delay
    return {
        "experiment": cfg.experiment_id, "run_id": run_id, "problem": cfg.problem.name,
        "algorithm": cfg.algorithm.name, "engine": cfg.engine.name, "workers": cfg.workers,
        "delay_model": d.model,
        "max_delay": d.get("max_delay") if d.model == "uniform" else (d.get("tau") if d.model == "fixed" else 0),
        "tau": d.get("tau") if d.model == "fixed" else (0 if d.model == "none" else float("nan")),
        "straggler_sigma": d.get("sigma", 0.0) if d.model == "timing" else 0.0,
        "straggler_slowdown": d.get("slowdown", 1.0) if d.model == "timing" else 1.0,
        "batch_size": cfg.batch_size, "seed": cfg.seed,
        "policy": (cfg.algorithm.get("policy") or {}).get("name") or "none",  # issue 14
        "lr_factor": cfg.algorithm.get("lr_factor", 1.0),
        "compute_spread": d.get("spread", "equal") if d.model == "timing" else "equal",
        "compute_law": d.get("law", "constant") if d.model == "timing" else "constant",
        **_compute_columns(cfg),
    }


def _compute_columns(cfg) -> dict:
    """``compute``: how a gradient's time is made -- ``real`` (computed, as long as it takes), ``emulated`` (a real
    engine waiting for targets, or a simulated clock whose gradient time is given: ``engine.costs.grad_s``);
    ``compute_base_s``: the given base seconds (NaN when calibrated or real); ``transport``: the real engine whose
    costs the row measured or (simulated) modelled. Together they pair measured and simulated rows."""
    e = cfg.engine
    if e.name == "simulated" and e.get("compute") != "emulated":
        base = (e.get("costs") or {}).get("grad_s")
        mode = "real" if base is None else "emulated"
    else:
        mode = e.get("compute") or "real"
        base = e.get("compute_base_s") if mode == "emulated" else None
    transport = (e.get("transport") or "shared_memory") if e.name == "simulated" else e.name
    return {"compute": mode, "compute_base_s": float("nan") if base is None else float(base), "transport": transport}


def job_event(event: str, run_id: str, cfg) -> None:
    """Append one JSON line to the file ``$APAM_JOB_EVENTS`` names, when set: a job's ``start`` (after its problem is
    built, before its config is written) or ``end`` (after its summary row), with its run id, engine, clock, process
    id and ``time.time()`` in seconds. How a scheduler's behaviour is checked (wall-clock jobs never overlap
    anything); one short line per ``write`` in append mode, so jobs in several processes share the file."""
    path = os.environ.get("APAM_JOB_EVENTS")
    if path:
        import json
        import time

        line = json.dumps({"event": event, "run_id": run_id, "experiment": cfg.experiment_id,
                           "engine": cfg.engine.name, "clock": cfg.engine.clock, "pid": os.getpid(),
                           "t": time.time()})
        with open(path, "a") as f:
            f.write(line + "\n")


def execute(cfg: DictConfig, overrides: list[str]) -> str:
    """Run one job of a composed config; return its status (``ok``, ``diverged``, ``failed`` or ``skipped``; ``worker``
    on a torchrun worker rank of engine=distributed, which writes nothing).

    Raises:
        ConfigError: bad input found before any work (nothing written).
    """
    import torch

    from experiments.store import provenance
    from experiments.engines import EngineResult, get_engine
    from experiments.errors import Interrupted
    from experiments.training.recorder import Diverged, Recorder
    from experiments.store.sink import RunSink, make_run_id
    from experiments.settings.validate import validate

    cfg = OmegaConf.create(OmegaConf.to_container(cfg, resolve=True))
    validate(cfg)
    run_id = make_run_id(overrides, cfg.seed)
    sink = RunSink(cfg.results_dir, cfg.experiment_id, run_id)
    tuning = _tuning_setting(cfg, overrides)
    if tuning is not None and cfg.seed != cfg.lr_tuning_seed:
        from experiments.sweeps.tuning import tuned_factor

        best = tuned_factor(sink.summary_path, tuning, cfg.lr_tuning_seed)
        if best is None:
            raise ConfigError(f"lr_tuning_seed={cfg.lr_tuning_seed}: no finished run of that seed for "
                              f"{cfg.experiment_id}/{run_id} in {sink.summary_path}: run the tuning seed first")
        if float(cfg.algorithm.get("lr_factor", 1.0)) != best:
            retired = sink.retire()  # an earlier tuning's choice: its results must not stay beside the current one's
            print(f"[skip] {cfg.experiment_id}/{run_id}: algorithm.lr_factor={cfg.algorithm.lr_factor} is not the "
                  f"factor seed {cfg.lr_tuning_seed} chose ({best:g}; lr_tuning_seed)"
                  f"{'; its results from an earlier choice removed' if retired else ''}", file=sys.stderr)
            return "skipped"
    if sink.finished() and not cfg.force:
        changes = sink.config_changes(OmegaConf.to_container(cfg))
        if not changes:
            print(f"[skip] {cfg.experiment_id}/{run_id}: finished earlier (force=true reruns)", file=sys.stderr)
            return "skipped"
        print(f"[rerun] {cfg.experiment_id}/{run_id}: finished with another config ({'; '.join(changes[:3])}"
              f"{'; ...' if len(changes) > 3 else ''})", file=sys.stderr)
    torch.set_num_threads(int(cfg.threads))
    device = resolve_device(cfg.device)
    from problems import build_problem
    from problems.data import DataError, data_root

    try:
        problem = build_problem(cfg.problem, data_root=data_root(), device=device)
    except DataError as exc:
        raise ConfigError(f"problem={cfg.problem.name}: {exc}") from None
    if cfg.engine.name == "distributed" and int(os.environ.get("RANK", "0")) > 0:
        # a torchrun worker rank (issue 5): compute gradients for rank 0, write nothing
        from experiments.engines.distributed import serve

        serve(problem, cfg)
        return "worker"
    rule = build_rule_from_config(cfg.algorithm)
    # f* only where it is unique and cheap to certify (l2 > 0: strongly convex); else traces leave opt_gap empty
    opt = problem.optimum() if cfg.problem.kind in ("logreg", "logreg_libsvm", "logreg_rcv1like") and cfg.problem.l2 > 0 else None
    job_event("start", run_id, cfg)
    sink.write_config(OmegaConf.to_yaml(cfg), provenance.collect(int(cfg.threads), str(device)))

    engine = get_engine(cfg.engine.name)
    total = cfg.updates * cfg.batch_size / problem.num_train if cfg.get("updates") else cfg.epochs
    recorder = Recorder(problem, _constant_columns(cfg, run_id), eval_every=cfg.eval_every, total_epochs=total,
                        f_star=opt[0] if opt is not None else None, clock=cfg.engine.clock,
                        divergence_factor=cfg.divergence_factor, progress=cfg.progress)
    result, status, message, signum = None, "ok", "", None
    probe = (math.nan, math.nan)
    if cfg.engine.clock == "wall":  # how fast the machine is now, against its calibration (experiments/clock/speedprobe.py)
        from experiments.clock import speedprobe

        probe = (speedprobe.measure(), speedprobe.calibrated(cfg.engine.get("calibration") or None))
    try:
        result = engine.run(problem, rule, cfg, recorder)
        status, message = result.status, result.message
    except Diverged as exc:
        status, message = "diverged", str(exc)
    except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM: recorded like a failure, then the sweep stops
        signum = Interrupted.signum_of(exc)
        status, message = "failed", interrupted_message(signum)
    except ConfigError:  # bad input the engine found (an unusable calibration file): one line, exit 2, no row
        raise
    except Exception as exc:  # recorded, not hidden: the row says what happened
        traceback.print_exc()
        status, message = "failed", f"{type(exc).__name__}: {exc}".splitlines()[0]
    finally:
        recorder.close()
    if result is None and recorder.master is not None:  # stopped mid-run: the summary stops where the trace does
        m, last = recorder.master, (recorder.rows[-1] if recorder.rows else {})
        message += (f" after {m.version} updates; trace and summary stop at the last evaluation "
                    f"(update {last.get('updates', 0)}, epoch {last.get('epoch', 0.0):.3g})")
        # the staleness histogram as it was at that evaluation, so that the row's updates and staleness agree
        result = EngineResult(updates=last.get("updates", 0), gradients=last.get("gradients", 0),
                              samples=int(round(last.get("epoch", 0.0) * problem.num_train)),
                              time_s=last.get("time_s", math.nan), histogram=recorder.histogram_at_last_row())
    sink.write_trace(recorder.rows, result.histogram if result is not None else {})
    if result is not None and (result.costs or result.provenance):
        sink.add_provenance({"costs": result.costs, **result.provenance})
    if result is not None and result.compute_times:
        from experiments.engines.emulation import COMPUTE_TIMES_COLUMNS, compute_times_rows

        sink.write_compute_times(compute_times_rows(result.compute_times), COMPUTE_TIMES_COLUMNS)
    row = _summary_row(cfg, run_id, recorder.rows, result, status, message, problem.num_train, probe)
    if tuning is not None:
        row["tuning_setting"] = tuning  # where the other seeds look up the factor this seed chose
    sink.append_summary(row)
    job_event("end", run_id, cfg)

    def num(v, fmt):
        return "--" if v is None or v != v else format(v, fmt)

    print(f"[{status}] {cfg.experiment_id}/{run_id}: {row['updates']} updates, {num(row['epochs'], '.3g')} epochs, "
          f"{num(row['time_s'], '.4g')} s ({cfg.engine.clock}), train loss {num(row['final_train_loss'], '.4g')}, "
          f"test acc {num(row['final_test_acc'], '.4f')}, delay={row['delay_model']} mean staleness "
          f"{num(row['staleness_mean'], '.3g')}" + (
              f", {row['overruns']} overruns, {row['late_wakeups']} late wake-ups (calibrated: "
              f"{num(row['late_expected'], '.3g')})" if row['overruns'] == row['overruns'] else "")
          + (f" -- {message}" if message else ""), file=sys.stderr)
    if signum is not None:
        raise Interrupted(signum)
    return status


_SWEEP_BAR = None
_SWEEP_DIRS: set[Path] = set()  # experiment folders of a multirun's jobs: speedup.csv is refreshed when it ends


def _sweep_bar(experiment: str, in_process: bool):
    """One tqdm bar over the jobs of a multirun (the total comes from the precheck); quiet off a terminal, and
    off when a launcher runs the jobs in other processes (joblib, submitit), where no process sees them all."""
    global _SWEEP_BAR
    if _SWEEP_BAR is None:
        from tqdm.auto import tqdm

        total = int(os.environ.get("APAM_SWEEP_JOBS", "0")) or None
        _SWEEP_BAR = tqdm(total=total, unit="run", desc=f"sweep {experiment}",
                          disable=not (in_process and sys.stderr.isatty()))
    return _SWEEP_BAR


@hydra.main(config_path="../conf", config_name="config", version_base="1.3")
def _hydra_main(cfg: DictConfig) -> None:
    from hydra.core.hydra_config import HydraConfig

    hc = HydraConfig.get()
    multirun = hc.mode.name == "MULTIRUN"
    try:
        status = execute(cfg, list(hc.overrides.task))
    except ConfigError as exc:
        _report_error(exc)
        _remove_empty_dirs(Path(cfg.results_dir) / ".hydra")
        _remove_empty_dirs(Path(cfg.results_dir), recursive=False)
        sys.exit(2)
    except OSError as exc:  # a result file that cannot be written (full disk): one line naming it, exit 1
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)
    if multirun:
        in_process = str(hc.launcher.get("_target_", "")).endswith("BasicLauncher")
        _sweep_bar(cfg.experiment_id, in_process).update(1)
    if status == "failed" and not multirun:
        sys.exit(1)


def sweep_folders(overrides: list[str]) -> set[Path]:
    """The experiment folders (``<results_dir>/<experiment_id>``) the jobs of a multirun write to, from its
    overrides alone: known in this process whichever launcher runs the jobs (in this process, in joblib's worker
    processes, or on SLURM nodes). Composes one config per combination of the keys that place results.

    Raises:
        ConfigError: the overrides do not compose (the precheck names them first).
    """
    import itertools

    from experiments.settings.compose import _expand, compose_jobs

    expanded = _expand(overrides)
    placing = {"results_dir", "experiment", "experiment_id"}
    lists = [vals if k.lstrip("+~") in placing else vals[:1] for k, vals in expanded.items()]
    combos = [list(c) for c in itertools.product(*lists)] if lists else [[]]
    return {Path(cfg.results_dir) / cfg.experiment_id for cfg in compose_jobs(combos)}


def _write_speedups() -> None:
    """After a multirun: ``speedup.csv`` (speed-up and efficiency against P = 1) in each experiment folder its
    jobs wrote to, from that folder's whole ``summary.csv`` (experiments.aggregate)."""
    from experiments.aggregate import write_speedup

    for exp_dir in sorted(d for d in _SWEEP_DIRS if (d / "summary.csv").exists()):
        path = write_speedup(exp_dir)
        if path is not None:
            print(f"wrote {path}", file=sys.stderr)


def _remove_empty_dirs(top: Path, recursive: bool = True) -> None:
    """Remove ``top`` (and, ``recursive``, the folders below it) when they hold no file: Hydra's job folders after a
    job that stopped on bad input, so nothing is left behind; folders with files stay."""
    if not top.is_dir():
        return
    below = [p for p in top.rglob("*") if p.is_dir()] if recursive else []
    for folder in sorted(below, key=lambda p: len(p.parts), reverse=True) + [top]:
        try:
            folder.rmdir()
        except OSError:
            pass


def _on_signal(signum, frame) -> None:
    """SIGTERM (and SIGINT) in the runner: raise :class:`Interrupted` once, so the current run is recorded with its
    partial trace, as for Ctrl-C; a second signal while that is written is ignored."""
    import signal

    from experiments.errors import Interrupted

    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise Interrupted(signum)


def _report_error(exc: ConfigError) -> None:
    """Print the one-line error; also into ``$APAM_ERROR_FILE`` when set (how ``make reproduce`` learns why)."""
    print(f"error: {exc}", file=sys.stderr)
    if os.environ.get("APAM_ERROR_FILE"):
        Path(os.environ["APAM_ERROR_FILE"]).write_text(str(exc) + "\n")


def main() -> None:
    """Console entry: check the whole command line first, then hand it to Hydra. Exit codes: 0 done, 1 a run failed,
    2 bad input, 130 interrupted by SIGINT, 143 by SIGTERM (the current run recorded with its partial trace)."""
    import signal

    from experiments.errors import Interrupted

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    argv = sys.argv[1:]
    if not any(a.split("=")[0] in _HYDRA_FLAGS_WITHOUT_CHECK for a in argv):
        from experiments.settings.compose import precheck, profile_sweep

        multirun = any(a in ("-m", "--multirun") for a in argv)
        overrides = [a for a in argv if not a.startswith("-")]
        try:
            if multirun:
                extra = profile_sweep(overrides)
                sys.argv += extra
                overrides += extra
            os.environ["APAM_SWEEP_JOBS"] = str(precheck(overrides, multirun))
            if multirun:
                from hydra_plugins.apam_sweeper import ENV, fingerprint

                os.environ[ENV] = fingerprint(sys.argv[1:])  # every job checked: the sweeper need not compose them
                _SWEEP_DIRS.update(sweep_folders(overrides))
        except ConfigError as exc:
            _report_error(exc)
            sys.exit(2)
        except KeyboardInterrupt as exc:  # stopped while checking: nothing ran, nothing written
            signum = Interrupted.signum_of(exc)
            print(f"interrupted by {signal.Signals(signum).name} before any run", file=sys.stderr)
            sys.exit(128 + signum)
    try:
        _hydra_main()
        _write_speedups()
    except KeyboardInterrupt as exc:
        signum = Interrupted.signum_of(exc)
        print(f"interrupted by {signal.Signals(signum).name}: the current run is recorded as failed with its partial "
              "trace; rerun to resume", file=sys.stderr)
        sys.exit(128 + signum)


if __name__ == "__main__":
    main()
