"""The command line of ``python -m experiments.run``, read and checked before Hydra sees it: which arguments are
flags (Hydra's, and the values some take) and which are overrides, the primary config a command line names, and the
values Hydra itself would refuse with a traceback or a usage block (the launcher's, shell completion's, a flag after
the overrides or one Hydra does not have). Each refusal is a :class:`~experiments.errors.ConfigError` line.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from experiments.errors import ConfigError
from experiments.settings.fields import machine_cores
from experiments.settings.source import Source

NO_RUN_FLAGS = (
    "--help",
    "-h",
    "--hydra-help",
    "--cfg",
    "-c",
    "--info",
    "-i",
    "--shell-completion",
    "-sc",
    "--resolve",
    "-p",
    "--package",
)
"""Hydra flags with which nothing runs. Help and shell completion go to Hydra unchecked; with the flags that show a
config (:data:`SHOW_FLAGS`) the overrides are checked first, as for a run, so a bad one is one line too."""
SHOW_FLAGS = {"--cfg": True, "-c": True, "--package": True, "-p": True, "--info": None, "-i": None, "--resolve": False}
"""Flags that show a config or Hydra's information, and whether each takes a value (None: an optional one of
:data:`INFO_TOPICS`)."""
INFO_TOPICS = ("all", "config", "defaults", "defaults-tree", "plugins", "searchpath")
SOURCE_FLAGS = {
    "--config-path": "config_dir",
    "-cp": "config_dir",
    "--config-name": "config_name",
    "-cn": "config_name",
    "--config-dir": "search_dirs",
    "-cd": "search_dirs",
}
"""Hydra flags that name another primary config or add a config folder: the check composes with them too."""


def source(argv: list[str]) -> Source:
    """The primary config a command line names (:data:`SOURCE_FLAGS`), relative paths from the current folder as
    Hydra reads them for ``--config-dir`` (``--config-path`` is relative to this module, as in ``hydra.main``).

    Raises:
        ConfigError: a config folder named by ``--config-dir`` or ``--config-path`` does not exist.
    """
    kw: dict = {}
    for i, a in enumerate(argv):
        flag, _, value = a.partition("=")
        if flag in SOURCE_FLAGS:
            value = value or (argv[i + 1] if i + 1 < len(argv) else "")
            name = SOURCE_FLAGS[flag]
            if name == "config_dir":
                base = Path(__file__).resolve().parent
                kw[name] = str((base / value).resolve()) if not Path(value).is_absolute() else value
            elif name == "search_dirs":
                kw[name] = kw.get(name, ()) + (str(Path(value).resolve()),)
            else:
                kw[name] = value
            folder = kw[name][-1] if name == "search_dirs" else kw[name] if name == "config_dir" else None
            if folder is not None and not Path(folder).is_dir():
                raise ConfigError(f"{flag} {value}: no such config folder")
            if name == "config_name":
                named = f"{flag} {value or repr('')}"
    if "config_name" in kw:
        _primary_exists(named, kw["config_name"], [kw.get("config_dir", Source.config_dir), *kw.get("search_dirs", ())])
    return Source(**kw)


def _primary_exists(given: str, name: str, folders: list[str]) -> None:
    """``--config-name``/``-cn`` names a yaml file of the config folder or of a ``--config-dir`` folder (Hydra's
    message for one that is not there was blamed on the first override).

    Raises:
        ConfigError: ``-cn NAME: no such primary config (options: ...)``.
    """
    stem = name.removesuffix(".yaml")
    if stem and any((Path(f) / f"{stem}.yaml").is_file() for f in folders):
        return
    options = sorted({p.stem for f in folders if Path(f).is_dir() for p in Path(f).glob("*.yaml")})
    raise ConfigError(f"{given}: no such primary config (options: {', '.join(options) or 'none'})")


def overrides_of(argv: list[str]) -> list[str]:
    """The KEY=VALUE arguments of a command line (flags and the values of flags that take one left out).

    Raises:
        ConfigError: ``--info`` followed by a word that is no topic of it (Hydra would take the word as the topic).
    """
    out, skip = [], False
    for i, a in enumerate(argv):
        if skip:
            skip = False
            continue
        if a.startswith("-"):
            takes = SHOW_FLAGS.get(a, a in SOURCE_FLAGS)
            nxt = argv[i + 1] if i + 1 < len(argv) else None
            if takes is None and nxt is not None and not nxt.startswith("-"):
                info_topic(a, nxt)
                takes = True
            skip = bool(takes)
            continue
        out.append(a)
    return out


def info_topic(flag: str, word: str) -> None:
    """``word``, given after ``--info``/``-i`` (``flag``), is one of its topics (Hydra reads the next word as one).

    Raises:
        ConfigError: ``--info bogus: not a topic of --info ...``; an override there: ``... put it last``.
    """
    if word in INFO_TOPICS:
        return
    topics = ", ".join(INFO_TOPICS)
    if "=" in word or word.startswith(("~", "+")):  # an override: Hydra would read it as the topic
        raise ConfigError(f"{flag} {word}: {flag} takes one of {topics} or nothing; put it last")
    raise ConfigError(f"{flag} {word}: not a topic of --info; give one of {topics} (or none: all)")


JOBS_PER_CORE = 4
MAX_N_JOBS = JOBS_PER_CORE * machine_cores()
"""The most jobs the parallel launcher runs at once on this one machine: 4 per core. Past the cores the jobs only
share them, and each process imports torch (1000 on 2 cores started 220 processes in 30 s and no run finished in
200 s; joblib refuses a pre-dispatch count of 2 x n_jobs above 10^6 with a traceback)."""


JOBLIB_BACKENDS = ("loky", "multiprocessing", "threading", "sequential")
"""The backends joblib has without extra packages (joblib/parallel.py ``BACKENDS``)."""
MMAP_MODES = ("r+", "r", "w+", "c")
"""joblib's memory-mapping modes (``Parallel(mmap_mode=...)``; Hydra's launcher config types it str: no null)."""


def _launcher_value(overrides: list[str], key: str) -> str | None:
    """The value typed for ``hydra.launcher.<key>``, or None when not given."""
    return next((o.split("=", 1)[1] for o in overrides if o.split("=", 1)[0] == f"hydra.launcher.{key}"), None)


def _unquoted(value: str) -> str:
    quoted = len(value) >= 2 and value[0] == value[-1] and value[0] in "'\""
    return value[1:-1] if quoted else value


def _whole(value: str, least: int) -> bool:
    try:
        return int(value) >= least
    except ValueError:
        return False


def _pre_dispatch_ok(value: str) -> bool:
    """``all``, an integer >= 1, or joblib's arithmetic in ``n_jobs`` (``3*n_jobs``) that comes to one."""
    if value == "all":
        return True
    from joblib._utils import eval_expr

    try:  # as joblib evaluates it, with n_jobs at its smallest (1)
        return int(eval_expr(value.replace("n_jobs", "1"))) >= 1
    except (ValueError, TypeError, SyntaxError, ZeroDivisionError, OverflowError):
        return False


def _max_nbytes_ok(value: str) -> bool:
    """null, a number of bytes >= 0, or a size such as ``1M`` (K, M, G: joblib's ``memstr_to_bytes``)."""
    if value == "null" or _whole(value, 0):
        return True
    from joblib.disk import memstr_to_bytes

    try:
        return memstr_to_bytes(value) >= 0
    except ValueError:
        return False


LAUNCHER_CHECKS = {
    "n_jobs": (
        lambda v: _whole(v, 1) and int(v) <= MAX_N_JOBS or v.strip() == "-1",
        f"must be an integer from 1 to {MAX_N_JOBS} ({JOBS_PER_CORE} per core of this machine's {machine_cores()}), "
        "or -1 (every core)",
    ),
    "prefer": (lambda v: v in ("processes", "threads"), "must be processes or threads"),
    "backend": (lambda v: v in ("null", *JOBLIB_BACKENDS), f"must be null or one of {', '.join(JOBLIB_BACKENDS)}"),
    "require": (
        lambda v: v == "null",
        "must be null (sharedmem runs jobs as threads of one process: joblib refuses it with prefer=processes, and a "
        "job's signal handlers need a process of its own)",
    ),
    "verbose": (lambda v: _whole(v, 0), "must be an integer >= 0 (0: quiet)"),
    "timeout": (
        lambda v: v == "null",
        "must be null: joblib ends the whole sweep with a traceback when a job runs past it, and the job is not "
        "recorded (bound a run with updates= or epochs= instead)",
    ),
    "pre_dispatch": (_pre_dispatch_ok, "must be all, an integer >= 1 or an expression such as 2*n_jobs"),
    "batch_size": (lambda v: v == "auto" or _whole(v, 1), "must be auto or an integer >= 1"),
    "temp_folder": (lambda v: v == "null" or Path(v).is_dir(), "must be null or an existing folder"),
    "max_nbytes": (_max_nbytes_ok, "must be null, a number of bytes or a size such as 1M (K, M, G)"),
    "mmap_mode": (
        lambda v: v in MMAP_MODES,
        f"must be one of {', '.join(MMAP_MODES)} (the launcher's config takes no null)",
    ),
}
"""Each key of the parallel launcher (conf/hydra/launcher/parallel.yaml, Hydra's joblib launcher) a command line
may set: whether a value typed for it is one joblib takes (``joblib.Parallel``), and what it must be."""


def launcher_values(overrides: list[str]) -> None:
    """The launcher's own values, checked before the jobs are composed (Hydra's message for a bad one is "no such
    config key"; joblib's, a traceback when the sweep starts or, for a timeout, after a job ran past it): every key
    of :data:`LAUNCHER_CHECKS`; the slurm launcher needs SLURM's commands here.

    Raises:
        ConfigError: ``hydra.launcher.<key>=<value>: must be ...``.
    """
    launcher = next((o.split("=", 1)[1] for o in overrides if o.split("=", 1)[0] == "hydra/launcher"), "basic")
    for key, (ok, must) in LAUNCHER_CHECKS.items():
        value = _launcher_value(overrides, key)
        if value is not None and not ok(_unquoted(value)):
            raise ConfigError(f"hydra.launcher.{key}={value}: {must}")
    if launcher == "slurm" and not all(shutil.which(tool) for tool in ("sbatch", "srun")):
        raise ConfigError("hydra/launcher=slurm: SLURM's sbatch and srun are not on this machine (use a login node)")


SWEEP_KEYS = ("hydra/launcher", "hydra.launcher", "hydra/sweeper", "hydra.sweeper")
"""Keys of Hydra's launcher and sweeper: what runs a sweep's jobs (experiments/api.py refuses them too)."""


def experiment_multirun(overrides: list[str], multirun: bool) -> None:
    """``experiment=`` runs only with ``-m``: an experiment is a sweep (its profile's values, conf/experiment/); a
    single run of it ran the defaults, ignored ``profile=``, and wrote a row into the summary the experiment's
    report reads. (``--cfg job experiment=...`` still shows its config; ``experiments.run()`` of the Python API is
    not this command line.)

    With ``-m``, ``experiment=`` and ``profile=`` take one value each: the experiment's sweep is its profile's, and
    a sweep over either ran every job with the first one's values (``profile=smoke,quick``: the quick jobs were smoke's,
    then skipped as finished).

    A launcher or a sweeper (``hydra/launcher=parallel``, ``hydra.launcher.n_jobs=4``) runs a sweep's jobs: without
    ``-m`` Hydra ran the one job in this process and ignored it (the Python API refuses it too).

    Raises:
        ConfigError: ``experiment=<id>: an experiment is a sweep ...; add -m``; ``profile=a,b: ... one of each``;
            ``hydra/launcher=parallel: launchers and sweepers run sweeps; add -m ...``.
    """
    sweeping = next((o for o in overrides if o.split("=", 1)[0].lstrip("+~").startswith(SWEEP_KEYS)), None)
    if sweeping is not None and not multirun:
        raise ConfigError(f"{sweeping}: launchers and sweepers run sweeps; add -m (one run runs in this process)")
    given = next(
        (o for o in overrides if o.split("=", 1)[0].lstrip("+") == "experiment" and o != "experiment=null"), None
    )
    if given is not None and not multirun:
        raise ConfigError(
            f"{given}: an experiment is a sweep (its profile's values); add -m: python -m experiments.run -m {given} "
            "profile=..."
        )
    if given is None:
        return
    for o in overrides:  # an experiment's sweep is its profile's: a sweep over either took the first one's values
        key, _, value = o.partition("=")
        if key.lstrip("+") in ("experiment", "profile") and ("," in value or "(" in value):
            raise ConfigError(
                f"{o}: an experiment's sweep is set by the experiment and its profile, so one of each per command "
                "(run the command once per value; make reproduce --only A B runs several experiments)"
            )


def unsupported_flags(argv: list[str]) -> None:
    """Hydra flags the harness refuses. ``--shell-completion`` / ``-sc``: Hydra's completion scripts complete
    ``python app.py`` (they look for ``@hydra.main`` in the file after ``python``), never ``python -m
    experiments.run``, and its ``query=SHELL`` needs the shell's ``COMP_LINE``; every use ended in a traceback or a
    script that completes nothing. ``--experimental-rerun``: reran a pickled config of Hydra's with none of the
    harness's checks (a missing or foreign file was a traceback); a run's config is its folder's config.yaml.

    Raises:
        ConfigError: ``--shell-completion: ...`` or ``--experimental-rerun: ...`` naming what to do instead.
    """
    if any(a in ("--shell-completion", "-sc") for a in argv):
        raise ConfigError(
            "--shell-completion: Hydra completes scripts run as `python app.py`, not `python -m experiments.run`; "
            "--help lists every config group and its options"
        )
    if any(a.split("=", 1)[0] == "--experimental-rerun" for a in argv):
        raise ConfigError(
            "--experimental-rerun: not supported (it skips the harness's checks); a run is repeated from its "
            "overrides, which its folder's config.yaml records (or with force=true)"
        )


HYDRA_FLAGS = {
    **dict.fromkeys(("--help", "-h", "--hydra-help", "--version", "--resolve", "--run", "-r"), False),
    **dict.fromkeys(("--multirun", "-m", "--shell-completion", "-sc"), False),
    **dict.fromkeys(("--experimental-rerun",), True),
    **{flag: bool(takes) for flag, takes in SHOW_FLAGS.items()},
    **dict.fromkeys(SOURCE_FLAGS, True),
}
"""Every flag of Hydra's command line (hydra/_internal/utils.py ``get_args_parser``) and whether it takes a value
(``--info``'s optional topic counts as none here: :func:`overrides_of` reads it)."""


CFG_KINDS = ("job", "hydra", "all")
"""The configs ``--cfg`` shows (Hydra's choices)."""


def flag_order(argv: list[str]) -> None:
    """Every flag is one of Hydra's (``--cfg`` with one of :data:`CFG_KINDS`, ``--hydra-help`` without overrides,
    ``--package`` and ``--resolve`` only with ``--cfg``: without it Hydra ignores the one and runs the job, and fails
    on the other with a traceback),
    and no override stands after a flag that follows an override: Hydra's parser reads the overrides as one run of
    words, so ``KEY=VALUE -m KEY=VALUE`` or an unknown flag were "unrecognized arguments" and its usage block (a flag
    after all the overrides, ``KEY=VALUE --info``, is read); ``-`` alone was Hydra's LexerNoViableAltException.

    Raises:
        ConfigError: ``--bogus: not an option of python -m experiments.run ...``, ``-m: put it before the
            overrides ...`` or ``--info bogus: not a topic of --info ...`` (:func:`info_topic`).
    """
    seen_override, flag_between, skip = False, None, False
    if "--hydra-help" in argv and (given := overrides_of(argv)):
        raise ConfigError(f"--hydra-help: shows Hydra's own help and takes no overrides, not {given[0]}")
    flags = {a.split("=", 1)[0] for a in argv if a.startswith("-")}
    if flags & {"--package", "-p"} and not flags & {"--cfg", "-c"}:
        package = "--package" if "--package" in flags else "-p"
        raise ConfigError(f"{package}: picks the part of the config --cfg shows; add --cfg job (without --cfg it runs)")
    if "--resolve" in flags and not flags & {"--cfg", "-c"}:  # Hydra's ValueError traceback
        raise ConfigError("--resolve: resolves the interpolations of the config --cfg shows; add --cfg job")
    for i, a in enumerate(argv):
        if skip:
            skip = False
            continue
        if a.startswith("-"):
            flag = a.split("=", 1)[0]
            if flag not in HYDRA_FLAGS:
                raise ConfigError(f"{a}: not an option of python -m experiments.run (--help lists them)")
            if flag in ("--cfg", "-c"):
                value = a.split("=", 1)[1] if "=" in a else argv[i + 1] if i + 1 < len(argv) else None
                if value not in CFG_KINDS:
                    given = f"{flag} {value}" if value else flag
                    raise ConfigError(f"{given}: --cfg takes one of {', '.join(CFG_KINDS)}")
            if seen_override and flag_between is None:
                flag_between = a
            info = SHOW_FLAGS.get(flag, False) is None
            if info and "=" in a:  # --info=bogus: argparse's usage block
                info_topic(flag, a.split("=", 1)[1])
            elif info and i + 1 < len(argv) and not argv[i + 1].startswith("-"):
                info_topic(flag, argv[i + 1])  # Hydra reads the next word as the topic, an override too
            topic = info and i + 1 < len(argv) and argv[i + 1] in INFO_TOPICS
            skip = (HYDRA_FLAGS[flag] or topic) and "=" not in a
            continue
        if flag_between is not None:
            raise ConfigError(f"{flag_between}: put it before the overrides (the overrides after it are not read)")
        seen_override = True


def _flag_value(argv: list[str], names: tuple[str, ...]) -> str | None:
    """The value given to the first of ``names`` in ``argv`` (``--flag VALUE``, ``--flag=VALUE``); None: absent."""
    for i, a in enumerate(argv):
        flag, eq, value = a.partition("=")
        if flag in names:
            return value if eq else (argv[i + 1] if i + 1 < len(argv) else None)
    return None


def shown_package(argv: list[str], job_config) -> None:
    """``--package P`` names a node of the config ``--cfg`` shows (Hydra's ``OmegaConf.select``): checked against
    ``job_config`` (the composed job config, DictConfig) for ``--cfg job``, and for ``--cfg all`` where P is not under
    ``hydra``; with ``--cfg hydra`` P must be under ``hydra`` (what is under it is Hydra's to check). ``_global_`` is
    the whole config. Hydra printed "package 'P' not found in config" and exited 1.

    Raises:
        ConfigError: ``--package P: no such key in the job's config (its top-level keys: ...)``.
    """
    from omegaconf import OmegaConf

    package = _flag_value(argv, ("--package", "-p"))
    kind = _flag_value(argv, ("--cfg", "-c"))
    in_hydra = package is not None and package.split(".")[0] == "hydra"
    if package in (None, "", "_global_") or (in_hydra and kind != "job"):
        return
    if kind == "hydra":
        raise ConfigError(f"--package {package}: --cfg hydra shows Hydra's own config, under hydra (hydra.job, ...)")
    if OmegaConf.select(job_config, package, default=None) is None:
        raise ConfigError(
            f"--package {package}: no such key in the job's config (its top-level keys: {', '.join(job_config)})"
        )


FILE_VARIABLES = ("APAM_ERROR_FILE", "APAM_JOB_EVENTS")
"""Environment variables that name a file a run writes (experiments/run.py ``_report_error``: the one-line error
for ``make reproduce``; experiments/runner.py ``job_event``: the scheduler's event log)."""


def env_files(environ) -> None:
    """Each of :data:`FILE_VARIABLES` that is set names a file that can be written: not a folder, in a folder that
    exists, a regular file where it exists (a folder was an IsADirectoryError line after the results folder was made;
    a missing folder, a traceback after the one-line error; a named pipe, a hang; ``/dev/full``, an unnamed error).

    Raises:
        ConfigError: ``APAM_ERROR_FILE=<value>: ...`` naming the variable.
    """
    import os

    from experiments.store.table import file_problem

    for name in FILE_VARIABLES:
        value = environ.get(name)
        if not value:
            continue
        path = Path(value)
        why = (
            "a folder"
            if path.is_dir()
            else f"its folder {path.parent} does not exist"
            if not path.parent.is_dir()
            else file_problem(path)  # a named pipe (the write would block), a device, a link to nothing
            or ("not writable" if path.exists() and not os.access(path, os.W_OK) else None)
        )
        if why:
            raise ConfigError(f"{name}={value}: {why} (it names a file the harness writes)")
