"""One entry point: ``python -m experiments.run KEY=VALUE ...`` (a run) or ``... -m ...`` (a Hydra multirun sweep).

The whole command line is checked first (every job of a sweep composed and built into typed settings, its results
folder, device and data checked: experiments/settings/compose.py), then Hydra runs the jobs, each through
:func:`experiments.runner.execute`. After a sweep, ``speedup.csv`` is refreshed in every experiment folder its jobs
wrote to.

Exit codes: 0 done (a run that diverged is recorded, not an error of the harness), 1 a run failed (in a sweep: any
of its runs), 2 bad input (nothing written), 128 + the signal's number when a signal stopped it (130 SIGINT, 143
SIGTERM, 129 SIGHUP; the run in flight is recorded as failed with its partial trace, in a sweep too); 141 (128 +
SIGPIPE) when the reader of ``--help``, ``--cfg`` or ``--info`` closed the pipe before all was shown (``| head``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys


def _closed_streams_to_devnull() -> None:
    """Standard streams closed by the caller (``2>&-``, a daemon) become ``os.devnull``, before anything else opens a
    file: Python leaves ``sys.stderr`` None there (Hydra's and the recorder's writes were an AttributeError, the run
    failed), and the next file opened would take descriptor 2 (a C library's warning, a worker's output, would land
    in a results file). A closed stream is no terminal: progress bars stay off, as when it goes to a file."""
    for fd, name, flags in ((0, "stdin", os.O_RDONLY), (1, "stdout", os.O_WRONLY), (2, "stderr", os.O_WRONLY)):
        try:
            os.fstat(fd)
        except OSError:  # closed: the lowest free descriptor is this one (those below are open or were just filled)
            opened = os.open(os.devnull, flags)
            if opened != fd:
                os.dup2(opened, fd)
                os.close(opened)
        if getattr(sys, name) is None:
            setattr(sys, name, open(fd, "r" if fd == 0 else "w", closefd=False))  # noqa: SIM115 - the process's own


_closed_streams_to_devnull()

from tqdm.auto import tqdm  # noqa: E402

_BAD_THREADS: list[str] = []
"""A math library's thread count set to a value that is not a whole number >= 1: :func:`main` refuses the command
line with it (exit 2, nothing written); the variable is set to 1 meanwhile, so that OpenMP does not print its own
``Invalid value`` lines when torch loads it."""

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    _value = os.environ.setdefault(_var, "1")  # every process pins its math threads; settings.threads sets torch's
    # OpenMP also takes a list per nesting level (4,2); the others one number
    _counts = [v.strip() for v in _value.split("," if _var == "OMP_NUM_THREADS" else None)]
    if not (_counts and all(v.isascii() and v.isdigit() and int(v) >= 1 for v in _counts)):
        _BAD_THREADS.append(f"{_var}={_value}: must be a whole number >= 1 (the threads of the math libraries)")
        os.environ[_var] = "1"

import atexit  # noqa: E402

# registered before torch and Hydra are imported, so that it runs after their exit hooks (last in, first out); a
# failed import below (a missing package) ends the process before the hook exists: then it does nothing
atexit.register(lambda: globals().get("_exit_if_late", lambda: None)())

import signal  # noqa: E402

from experiments.errors import STOP_SIGNALS  # noqa: E402 - light (signal only), before torch's import

_EARLY: list[int] = []
"""Stop signals that came while this module's imports ran as the program (``python -m experiments.run``): recorded,
not raised (torch's import swallows a KeyboardInterrupt, and the run then went on as if none came); :func:`main`
exits 128 + the first one. A process that imports this module (a test, a launcher's worker) keeps its own handlers."""


def _early_signal(signum, frame) -> None:
    _EARLY.append(signum)


if __name__ == "__main__":
    for _sig in STOP_SIGNALS:
        signal.signal(_sig, _early_signal)

try:  # torch reads its own variables as it loads: a bad TORCH_LOGS or TORCH_DISTRIBUTED_DEBUG was its traceback
    import torch  # noqa: E402, F401
    import torch.distributed  # noqa: E402, F401
except Exception as _exc:  # noqa: BLE001 - any failure to load (a bad variable, ``ulimit -v``): one line, exit 2
    if __name__ != "__main__":  # imported (a test, a notebook): torch's own error, as any import of it gives
        raise
    _first = " ".join(str(_exc).split()).split(". For more info")[0] or type(_exc).__name__
    _set = " ".join(f"{k}={v}" for k, v in sorted(os.environ.items()) if k.startswith("TORCH_"))
    sys.stderr.write(f"error: torch cannot be loaded: {_first}" + (f" (set here: {_set})" if _set else "") + "\n")
    sys.exit(2)

import itertools  # noqa: E402
import logging  # noqa: E402
from pathlib import Path  # noqa: E402

import hydra  # noqa: E402
from hydra.core.hydra_config import HydraConfig  # noqa: E402
from omegaconf import DictConfig  # noqa: E402

from experiments import command_line, stops  # noqa: E402
from experiments.aggregate import write_speedup  # noqa: E402
from experiments.analysis.speedup import say_if_no_row  # noqa: E402
from experiments.errors import ConfigError, Interrupted  # noqa: E402
from experiments.log import get_logger  # noqa: E402
from experiments.runner import execute  # noqa: E402
from experiments.settings.compose import compose_jobs, expand_overrides, precheck, profile_sweep  # noqa: E402
from experiments.settings.source import Source  # noqa: E402
from experiments.stops import exit_if_late as _exit_if_late  # noqa: E402, F401 - the exit hook above calls it
from experiments.store.table import file_problem  # noqa: E402
from experiments.sweeps import OUTCOME  # noqa: E402
from hydra_plugins.apam_sweeper import ENV, fingerprint  # noqa: E402

log = get_logger(__name__)

_SWEEP_BAR = None
_SWEEP_DIRS: set[Path] = set()  # experiment folders of a multirun's jobs: speedup.csv is refreshed when it ends


def _sweep_bar(experiment: str, in_process: bool):
    """One tqdm bar over the jobs of a multirun (the total comes from the precheck); quiet off a terminal, and
    off when a launcher runs the jobs in other processes (joblib, submitit), where no process sees them all."""
    global _SWEEP_BAR
    if _SWEEP_BAR is None:
        total = int(os.environ.get("APAM_SWEEP_JOBS", "0")) or None
        _SWEEP_BAR = tqdm(
            total=total, unit="run", desc=f"sweep {experiment}", disable=not (in_process and sys.stderr.isatty())
        )
    return _SWEEP_BAR


@hydra.main(config_path="../conf", config_name="config", version_base="1.3")
def _hydra_main(cfg: DictConfig) -> str:
    hc = HydraConfig.get()
    multirun = hc.mode.name == "MULTIRUN"
    if signal.getsignal(signal.SIGTERM) is not stops.on_signal:  # a launcher's worker process: record runs on signals
        stops.WORKER.append(True)
        stops.catch_signals()
    try:
        stops.IN_FLIGHT.append(True)
        status = execute(cfg, list(hc.overrides.task))
    except KeyboardInterrupt as exc:
        if stops.WORKER:  # the run in flight is recorded: this worker ends, so the master knows (it waits for that)
            stops.worker_exit(Interrupted.signum_of(exc))
        raise
    except ConfigError as exc:
        _report_error(exc)
        _remove_empty_dirs(Path(str(cfg.results_dir)) / ".hydra")
        _remove_empty_dirs(Path(str(cfg.results_dir)), recursive=False)
        sys.exit(2)
    except OSError as exc:  # a result file that cannot be written (full disk): one line naming it, exit 1
        log.error(f"{_write_error(exc)}")
        sys.exit(1)
    finally:
        stops.IN_FLIGHT.clear()
    if multirun:
        in_process = str(hc.launcher.get("_target_", "")).endswith("BasicLauncher")
        _sweep_bar(str(cfg.get("experiment_id")), in_process).update(1)
    if status == "failed" and not multirun:
        sys.exit(1)
    return status


def sweep_folders(overrides: list[str], source: Source) -> set[Path]:
    """The experiment folders (``<results_dir>/<experiment_id>``) the jobs of a multirun write to, from its
    overrides alone: known in this process whichever launcher runs the jobs. Composes one config per combination
    of the keys that place results.

    Raises:
        ConfigError: the overrides do not compose (the precheck names them first).
    """
    expanded = expand_overrides(overrides)
    placing = {"results_dir", "experiment", "experiment_id"}
    lists = [vals if k.lstrip("+~") in placing else vals[:1] for k, vals in expanded.items()]
    combos = [list(c) for c in itertools.product(*lists)] if lists else [[]]
    return {Path(str(cfg.results_dir)) / str(cfg.experiment_id) for cfg in compose_jobs(combos, source)}


def _write_speedups() -> None:
    """After a multirun: ``speedup.csv`` (speed-up and efficiency against P = 1) in each experiment folder its
    jobs wrote to, from that folder's whole ``summary.csv`` (experiments.aggregate)."""
    for exp_dir in sorted(d for d in _SWEEP_DIRS if (d / "summary.csv").exists()):
        try:
            path = write_speedup(exp_dir)
        except ConfigError as exc:  # a summary damaged meanwhile (by hand, another tool): named, the runs stand
            log.warning(f"{exc}; speedup.csv of {exp_dir} not written")
            continue
        if path is not None:
            log.info(f"wrote {path}")
            say_if_no_row(path)


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


_RESULTS_DIRS: set[Path] = set()  # the results folders of the jobs the command line asks for


_LIMITS = {
    errno.ENOSPC: "no space left on its disk",
    errno.EDQUOT: "over the disk quota",
    errno.EFBIG: "larger than the file size limit (ulimit -f)",
}


def _write_error(exc: OSError) -> str:
    """A result file that could not be written, as one line: ``<file>: <why>`` (Python's ``[Errno 27] File too large:
    '<file>'`` said neither plainly)."""
    why = _LIMITS.get(exc.errno, exc.strerror or str(exc))
    return f"{exc.filename}: {why}" if exc.filename else why


def _report_error(exc: ConfigError) -> None:
    """Print the one-line error; also into ``$APAM_ERROR_FILE`` when set (how ``make reproduce`` learns why)."""
    log.error(f"{exc}")
    path = os.environ.get("APAM_ERROR_FILE")
    if path and file_problem(Path(path)) is None:  # never opened when not a regular file: a named pipe blocks
        with contextlib.suppress(OSError):  # a file that cannot be written is itself the error named above
            Path(path).write_text(str(exc) + "\n")


def _check_launcher(overrides: list[str], settings: list) -> None:
    """A parallel or cluster launcher runs jobs side by side: refused for wall-clock jobs (they measure time and
    must run alone)."""
    launcher = next((o.split("=", 1)[1] for o in overrides if o.split("=", 1)[0] == "hydra/launcher"), "basic")
    if launcher != "basic":
        wall = next((s for s in settings if s.engine.clock == "wall"), None)
        if wall is not None:
            raise ConfigError(
                f"hydra/launcher={launcher}: engine={wall.engine.name} measures wall-clock time and "
                "its runs must run alone (use the basic launcher, or make reproduce)"
            )


def _reader_gone() -> None:
    """Hydra's help or a config shown (``--help``, ``--cfg``, ``--info``) whose reader closed the pipe (``| head``):
    no traceback; exit 128 + SIGPIPE, as a command the shell's pipe stopped. Standard output becomes ``os.devnull``,
    so that the interpreter's last flush of what is left does not fail again (Python's documented remedy)."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(128 + signal.SIGPIPE)


def main() -> None:
    """Console entry: check the whole command line first, then hand it to Hydra. Exit codes: module docstring."""
    stops.catch_signals()
    # a closed pipe (``| head -1``) fails each later line of Hydra's and the harness's loggers: dropped, not a
    # "--- Logging error ---" traceback per line; the runs and their results go on unchanged
    logging.raiseExceptions = False
    if _BAD_THREADS:
        _report_error(ConfigError(_BAD_THREADS[0]))
        sys.exit(2)
    if _EARLY:  # a stop signal while the modules loaded: nothing ran, nothing written
        log.info(f"interrupted by {signal.Signals(_EARLY[0]).name} before any run")
        sys.exit(128 + _EARLY[0])
    argv = sys.argv[1:]
    multirun = any(a in ("-m", "--multirun") for a in argv)
    if multirun and any(a.split("=")[0] in ("--cfg", "-c", "--info", "-i") for a in argv):
        _report_error(ConfigError("--cfg and --info show one job's config: drop -m (and give one value per key)"))
        sys.exit(2)
    try:
        command_line.env_files(os.environ)
        command_line.flag_order(argv)
        command_line.unsupported_flags(argv)
    except ConfigError as exc:
        _report_error(exc)
        sys.exit(2)
    shows = any(a.split("=")[0] in command_line.SHOW_FLAGS for a in argv)
    runs = not any(a.split("=")[0] in command_line.NO_RUN_FLAGS for a in argv)
    if shows or runs:
        try:
            overrides = command_line.overrides_of(argv)
            source = command_line.source(argv)
            if not shows:
                command_line.experiment_multirun(overrides, multirun)
            extra = profile_sweep(overrides, source) if multirun else []
            sys.argv += extra
            overrides += extra
            command_line.launcher_values(overrides)
            if any(o.startswith("hydra/launcher=") for o in overrides):
                # workers a stop signal ended leave their semaphores to the resource tracker, which frees them and
                # says so in a 2-line UserWarning on stderr; nothing is lost, and the interrupt has its own line
                sys.warnoptions.append("ignore::UserWarning:multiprocessing.resource_tracker")
                sys.warnoptions.append("ignore::UserWarning:joblib.externals.loky.backend.resource_tracker")  # loky's
            try:
                settings = precheck(overrides, multirun, source)
            except ConfigError as exc:  # a key the experiment sets, not the user: said, with the user's choices
                head = str(exc).split(": ", 1)[0]  # that do not take it (engine.predict=true with engine=simulated)
                experiment = next((o for o in overrides if o.split("=")[0].lstrip("+") == "experiment"), None)
                user = [o for o in overrides if o not in extra]
                if experiment is None or "=" not in head or any(o.startswith(head.split("=")[0]) for o in user):
                    raise
                groups = ("problem", "algorithm", "engine", "delay", "profile")
                choices = " ".join(o for o in user if o.split("=")[0].lstrip("+") in groups)
                raise ConfigError(f"{exc} (set by {experiment}; with {choices or 'its own options'})") from None
            if shows and any(a.split("=")[0] in ("--package", "-p") for a in argv):
                command_line.shown_package(argv, compose_jobs([overrides], source, resolve=False)[0])
            _RESULTS_DIRS.update(Path(str(s.results_dir)) for s in settings)
            _check_launcher(overrides, settings)
            os.environ["APAM_SWEEP_JOBS"] = str(len(settings))
            if multirun:
                os.environ[ENV] = fingerprint(sys.argv[1:])  # every job checked: the sweeper need not compose them
                _SWEEP_DIRS.update(sweep_folders(overrides, source))
        except ConfigError as exc:
            _report_error(exc)
            sys.exit(2)
        except KeyboardInterrupt as exc:  # stopped while checking: nothing ran, nothing written
            signum = Interrupted.signum_of(exc)
            log.info(f"interrupted by {signal.Signals(signum).name} before any run")
            sys.exit(128 + signum)
    try:
        _hydra_main()
        _write_speedups()
        if not runs:  # what Hydra printed (help, a config) reaches the reader now, where a closed pipe is caught
            sys.stdout.flush()
    except BrokenPipeError:
        if runs:  # a pipe of the run's own (a worker's), not the reader of the output
            raise
        _reader_gone()
    except KeyboardInterrupt as exc:
        signum, recorded = Interrupted.signum_of(exc), Interrupted.recorded_of(exc)
        name = signal.Signals(signum).name
        if recorded is not None:
            log.info(
                f"interrupted by {name}: the run in flight ({recorded}) is recorded as failed with its partial "
                "trace; a rerun starts it again and skips the finished ones"
            )
        elif stops.FORWARDED:
            log.info(
                f"interrupted by {name}: the launcher's workers record their runs in flight as failed with their "
                "partial traces; a rerun starts them again and skips the finished ones"
            )
        else:
            log.info(f"interrupted by {name} between runs: no run was in flight; a rerun skips the finished ones")
        sys.exit(128 + signum)
    finally:  # Hydra's job folders (output_subdir null: always empty) go with the runs, however they ended
        for folder in _RESULTS_DIRS:
            _remove_empty_dirs(folder / ".hydra")
    stops.after_the_runs()
    if multirun and OUTCOME.get("diverged"):
        log.info(f"{OUTCOME['diverged']} of {OUTCOME['jobs']} runs diverged (recorded in summary.csv)")
    if multirun and OUTCOME.get("failed"):
        log.info(f"{OUTCOME['failed']} of {OUTCOME['jobs']} runs failed (summary.csv says why)")
        sys.exit(1)


if __name__ == "__main__":
    main()
