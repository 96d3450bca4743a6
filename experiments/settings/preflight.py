"""Checks of a run's surroundings before anything is written: the results folder, the device, the data.

The settings themselves are checked when they are built (experiments/settings/build.py); these checks look at the
machine: whether ``results_dir`` can be written, whether CUDA exists, whether every data set the jobs read is
there. Each failure is one :class:`~experiments.errors.ConfigError` line.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import torch

from experiments.errors import ConfigError
from experiments.settings.defaults import option
from experiments.store.atomic import writable
from problems import build_problem
from problems.data import DataError, data_root, stage


def check_writable(results_dir: str) -> None:
    """``results_dir`` is a folder (or can become one) that this process may write; nothing is left behind.

    Raises:
        ConfigError: it is the file system's root, it exists and is not a folder, a parent is not a folder, the
            nearest existing folder is not writable, or the path cannot be looked up (a name too long).
    """
    p = Path(str(results_dir)).absolute()
    if os.path.realpath(p) == os.path.realpath(os.sep):  # each experiment's folder would be made in /
        raise ConfigError(f"results_dir={results_dir}: the file system's root; give a folder of the results' own")
    probe = p
    try:
        dangling = p.is_symlink() and not p.exists()  # mkdir would fail with "File exists" after Hydra's checks
        while not probe.exists():
            probe = probe.parent
    except OSError as exc:  # a name too long for the file system, a loop of links
        raise ConfigError(f"results_dir={results_dir}: not a usable path ({exc.strerror or exc})") from None
    if dangling:
        target = os.readlink(p)
        raise ConfigError(f"results_dir={results_dir}: a link to nothing ({target}); remove it or make its target")
    if probe == p and not p.is_dir():
        raise ConfigError(f"results_dir={results_dir}: exists and is not a folder")
    if not probe.is_dir():
        raise ConfigError(f"results_dir={results_dir}: {probe} is not a folder")
    if not writable(probe):
        raise ConfigError(f"results_dir={results_dir}: {probe} is not writable")
    limit = os.pathconf(probe, "PC_NAME_MAX")  # the folders still to be made: a lookup stops at the first missing one
    for part in p.relative_to(probe).parts:
        if len(os.fsencode(part)) > limit:
            raise ConfigError(
                f"results_dir={results_dir}: not a usable path (a folder name of {len(os.fsencode(part))} bytes; "
                f"the file system's limit is {limit})"
            )


def check_places(settings_list, combos=None) -> None:
    """The places a run writes that already exist are of the kind it writes there: ``results_dir/.hydra`` (Hydra's
    scratch folder), the experiment's folder and its ``runs/`` are folders (or links to folders), and the summary's
    lock and the files of a run folder that a rerun rewrites are regular files, not links (each was a traceback after
    the run, or a run trained and left without its summary row).

    Raises:
        ConfigError: ``<path>: <what it is>, not <what the run writes there>; remove it``, for the first such place.

    ``combos``: each job's overrides (in the order of ``settings_list``), to check the run folders themselves.
    """
    from experiments.store.run_id import make_run_id
    from experiments.store.sink import RUN_FILES, SUMMARY_ROW_FILE

    places: dict[Path, str] = {}
    for i, s in enumerate(settings_list):
        root = Path(str(s.results_dir))
        exp = root / s.experiment_id
        places |= {root / ".hydra": "folder", exp: "folder", exp / "runs": "folder", exp / "summary.csv.lock": "file"}
        if combos is not None:  # the run's own folder, named by its job's overrides as the runner names it
            run = exp / "runs" / make_run_id(combos[i], s.seed)
            places[run] = "folder"
            if run.is_dir():  # a rerun rewrites its files: none may be a folder, a link or a special file
                places |= {run / name: "file" for name in (*RUN_FILES, SUMMARY_ROW_FILE, "staleness.csv")}
    for path, kind in places.items():
        if not path.is_symlink() and not path.exists():
            continue
        if kind == "folder" and path.is_dir():  # a link to a folder (another disk) is a folder
            continue
        if kind == "file" and path.is_file() and not path.is_symlink():  # a lock is never followed through a link
            continue
        what = (
            "a link to nothing"
            if not path.exists()
            else "a symbolic link"
            if path.is_symlink()
            else "a folder"
            if path.is_dir()
            else "a regular file"
            if path.is_file()
            else "a special file"
        )
        raise ConfigError(f"{path}: {what}, not the {kind} a run writes there; remove it")


def resolve_device(name: str) -> torch.device:
    """``device``'s value as a torch device: ``auto`` -> CUDA where present, else CPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def check_device(device: str) -> None:
    """``device=cuda`` needs CUDA on this machine. Raises ConfigError."""
    if device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device=cuda: CUDA is not available on this machine")


def check_data(settings_list) -> None:
    """Every image data set the jobs read is there and valid, each checked once (staged where it can be got, as the
    run would; a staged set costs a read of its headers). LIBSVM files are checked to exist by the settings.

    Raises:
        ConfigError: ``problem=<name>: <the data error, naming the file and how to get it>``.
    """
    seen = set()
    for s in settings_list:
        dataset = getattr(s.problem, "dataset", None)
        if not isinstance(dataset, str) or dataset in seen:  # a _target_ data set loads itself when the run starts
            continue
        seen.add(dataset)
        try:
            stage(str(dataset), data_root())
        except (DataError, ValueError, OSError) as exc:
            raise ConfigError(f"problem={s.problem.name}: {str(exc).strip().splitlines()[0]}") from None


def check_calibration(settings_list) -> None:
    """The calibration file each simulated-clock job would read (``engine.calibration``, else ``$APAM_CALIBRATION``,
    else this machine's: experiments/clock/calibration.py) is absent or a readable regular file, each checked once,
    before anything is written (a damaged one is set aside and measured again when a run uses it).

    Raises:
        ConfigError: ``<path>: the calibration file is a named pipe, not a regular file ...`` and the like.
    """
    from experiments.clock.calibration import Calibration

    paths = {getattr(s.engine, "calibration", None) for s in settings_list if s.engine.clock == "simulated"}
    for path in sorted(paths, key=lambda p: str(p or "")):
        Calibration(path).check()


def check_traces(settings_list) -> None:
    """Every timeline a trace-driven twin replays (``engine.trace``) is readable and holds rows for each of its
    job's workers, each (file, workers, protocol) read once (:class:`experiments.engines.twin.Timeline`; a file that
    is not a timeline was a traceback after the run's folder and a failed row were written).

    Raises:
        ConfigError: ``engine.trace=<path>: cannot read a timeline (...)`` and the like.
    """
    from experiments.engines.twin import Timeline

    jobs = {
        (str(s.engine.trace), s.workers, s.algorithm.protocol)
        for s in settings_list
        if s.engine.name == "simulated" and getattr(s.engine, "trace", None) is not None
    }
    for path, workers, protocol in sorted(jobs):
        try:
            Timeline(path, workers, protocol)
        except ValueError as exc:
            why = str(exc).splitlines()[0]
            raise ConfigError(why if why.startswith("engine.trace=") else f"engine.trace={path}: {why}") from None
        except Exception as exc:  # noqa: BLE001 - rows of the right columns in an order no run writes
            raise ConfigError(
                f"engine.trace={path}: not a timeline a run wrote ({type(exc).__name__}: {exc})"
            ) from None


def check_backend(settings_list) -> None:
    """``engine.backend`` of each distributed job fits the job and this machine, as the engine would resolve it at
    start (experiments/engines/dist_group.py :func:`choose_backend`): nccl only for sync, with a GPU per rank.

    Raises:
        ConfigError: ``engine.backend=nccl: <why>`` (it was found when the engine started, after the run's folder
            was written and, in a sweep, after the jobs before it ran).
    """
    from experiments.engines.dist_group import choose_backend

    for s in settings_list:
        if s.engine.name == "distributed" and s.engine.backend != "auto":
            choose_backend(s, resolve_device(s.device))


MASTER_FILES_BASE, MASTER_FILES_PER_WORKER = 16, 5
"""Open files of a real engine's master: about 14 + 4 per worker measured here (``/proc/<pid>/fd`` at P = 4 and 16,
both engines), with a margin."""
SPAWN_MIB_PER_WORKER = 275
"""Memory a ``spawn`` worker adds (its own interpreter and torch): the PSS column of docs/engines.md's start-up
table, from P = 8 to 32. A ``forkserver`` worker shares the server's pages (the same table: about flat in P)."""


def check_local_processes(settings_list) -> None:
    """A real engine started here (not under torchrun) runs its P workers as processes of this machine: the master's
    open files (:data:`MASTER_FILES_PER_WORKER` each), the user's process limit and, for ``spawn``, the memory
    available must allow them; otherwise the run died part-way (too many open files) or kept starting processes. The
    workers must be able to run the main script again (:func:`experiments.engines.processes.main_script_problem`).

    Under torchrun (:func:`~experiments.engines.dist_group.torchrun_rank`) a distributed job's ranks are torchrun's:
    its variables are checked instead (integers, WORLD_SIZE = workers + 1, a master's address and port).

    Raises:
        ConfigError: ``workers=<P>: <what does not fit>``; ``<stdin>: worker processes begin by ...``; ``RANK=abc:
            ...``, ``MASTER_PORT: not set ...``, ``workers=<P>: torchrun started <n> processes ...``.
    """
    import resource

    from experiments.engines.dist_group import check_rendezvous, check_world, torchrun_rank

    # torchrun: each node starts its own ranks (distributed jobs only: its variables are not read for the others)
    ranks = any(s.engine.name == "distributed" for s in settings_list) and torchrun_rank() is not None
    for s in settings_list:
        if ranks and s.engine.name == "distributed":
            check_world(s)
    if ranks:
        check_rendezvous()
    files = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    procs = resource.getrlimit(resource.RLIMIT_NPROC)[0]
    avail = _available_mib()
    local = [
        s for s in settings_list if s.engine.name == "shared_memory" or (s.engine.name == "distributed" and not ranks)
    ]
    if local:
        from experiments.engines.processes import main_script_problem

        if why := main_script_problem():  # a script read from standard input: no worker could start
            raise ConfigError(why)
    for s in local:
        p = s.workers
        need = MASTER_FILES_BASE + MASTER_FILES_PER_WORKER * p
        if files != resource.RLIM_INFINITY and need > files:
            raise ConfigError(
                f"workers={p}: engine={s.engine.name}'s master would hold about {need} open files; this process may "
                f"open {files} (ulimit -n)"
            )
        if procs != resource.RLIM_INFINITY and p + 3 > procs:
            raise ConfigError(f"workers={p}: {p + 3} processes; this user may run {procs} (ulimit -u)")
        if s.engine.start_method == "spawn" and avail is not None and p * SPAWN_MIB_PER_WORKER > avail:
            raise ConfigError(
                f"workers={p}: spawn workers need about {p * SPAWN_MIB_PER_WORKER} MiB "
                f"({SPAWN_MIB_PER_WORKER} each), {avail} MiB available (engine.start_method=forkserver shares it)"
            )


def _available_mib() -> int | None:
    """MemAvailable of /proc/meminfo in MiB; None where it cannot be read."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def check_master_addr(settings_list) -> None:
    """``engine.master_addr`` of each distributed job started here (not under torchrun, whose ``MASTER_ADDR`` wins)
    is an address of this machine: the master and its workers run here, and the TCP store binds to it. Checked by
    resolving it and binding a socket to it (released at once): an address that does not resolve, or belongs to
    another machine, would leave the store retrying for minutes (torch's rendezvous timeout) without an error.

    Raises:
        ConfigError: ``engine.master_addr=<addr>: <why>``.
    """
    from experiments.engines.dist_group import under_torchrun

    if under_torchrun():  # torchrun's rendezvous: its MASTER_ADDR and MASTER_PORT (as the engine decides)
        _check_torchrun_rendezvous(settings_list)
        return
    for addr in sorted({s.engine.master_addr for s in settings_list if s.engine.name == "distributed"}):
        try:
            infos = socket.getaddrinfo(addr, None, type=socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError) as exc:
            raise ConfigError(f"engine.master_addr={addr}: does not resolve ({exc})") from None
        family, _, _, _, sockaddr = infos[0]
        try:
            with socket.socket(family, socket.SOCK_STREAM) as sock:
                sock.bind((sockaddr[0], 0))
        except OSError as exc:
            raise ConfigError(
                f"engine.master_addr={addr}: not an address of this machine ({exc.strerror or exc}); the master "
                "and its workers run here (use torchrun to span machines)"
            ) from None


def _check_torchrun_rendezvous(settings_list) -> None:
    """On a torchrun rank the rendezvous is torchrun's ``MASTER_ADDR`` and ``MASTER_PORT``: an ``engine.master_addr``
    or ``engine.master_port`` other than the default (conf/engine/distributed.yaml) and other than torchrun's would be
    ignored while it names the run id, so it is refused.

    Raises:
        ConfigError: ``engine.master_addr=<addr>: ...`` or ``engine.master_port=<port>: ...``.
    """
    default = option("engine", "distributed")
    for s in settings_list:
        if s.engine.name != "distributed":
            continue
        for key, env in (("master_addr", "MASTER_ADDR"), ("master_port", "MASTER_PORT")):
            value = getattr(s.engine, key)
            if str(value) not in (str(default[key]), os.environ.get(env, "").strip()):
                raise ConfigError(
                    f"engine.{key}={value}: this process runs as a torchrun rank, whose rendezvous is torchrun's "
                    f"{env}={os.environ.get(env, '')}; leave engine.{key} out (torchrun's --master_addr and "
                    "--master_port set it)"
                )


def check_problems(settings_list) -> None:
    """In a sweep whose jobs build more than one problem, or one problem at several batch sizes, or whose length in
    epochs must be turned into updates to be checked against a delay or fault (:meth:`Settings.check_length`), every
    such problem is built once here, on the CPU, and each job checked against it, so that one job's bad data (a
    LIBSVM file whose labels are not binary, a ``max_train`` that leaves one class, a batch larger than the training
    set) or too short a run is refused before any job runs, as a single run refuses it before writing anything. A
    sweep of one problem at one batch size whose lengths need no data needs no check here: its first job finds it
    before anything is written.

    Raises:
        ConfigError: ``problem=<name>: <why>``, ``batch_size=<B>: larger than ...`` or ``delay.tau=<t>: must be
            below the run's <n> updates ...`` (:func:`make_problem`).
    """
    import json

    jobs: dict[str, list] = {}  # problem block -> the settings of its jobs
    for s in settings_list:
        jobs.setdefault(json.dumps(s.problem.spec, sort_keys=True, default=str), []).append(s)
    lengths = len(settings_list) > 1 and any(s.updates is None and s.length_bound() for s in settings_list)
    if len(jobs) < 2 and len({s.batch_size for s in settings_list}) < 2 and not lengths:
        return
    for group in jobs.values():
        largest = max(group, key=lambda s: s.batch_size)  # the one batch size that can be too large
        num_train = make_problem(largest, torch.device("cpu")).num_train
        for s in group:
            _check_length(s, num_train)


def _check_length(settings, num_train: int) -> None:
    """:meth:`Settings.check_length` of the run's planned updates, as a ConfigError."""
    try:
        settings.check_length(settings.planned_updates(num_train))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def make_problem(settings, device: torch.device):
    """The run's problem (:func:`problems.build_problem` from the settings' problem block).

    Raises:
        ConfigError: missing or bad data, or a problem setting the problem itself refuses (one line naming it).
    """
    try:
        problem = build_problem(settings.problem.spec, data_root=data_root(), device=device)
    except (DataError, ValueError) as exc:
        raise ConfigError(f"problem={settings.problem.name}: {str(exc).strip().splitlines()[0]}") from None
    if settings.batch_size > problem.num_train:
        raise ConfigError(
            f"batch_size={settings.batch_size}: larger than the {problem.num_train} training examples "
            f"of problem={settings.problem.name}"
        )
    _check_length(settings, problem.num_train)
    return problem
