"""Provenance of a run: code version, package versions, the lock file's hash and whether the environment matches
it, machine and CPU (model, feature flags, cores), threads (written beside every result).

The runner adds what the run's clock used (experiments/runner.py): ``costs`` and ``cost_spread`` (the simulated
engine), ``calibration`` (the file's path) and, when calibration entries were used, ``calibration_used``
(:func:`experiments.clock.calibration.used_summary`: the file, the oldest and newest ``measured`` times of the
entries used, the worst spread and its key, the spread bound, the keys still above it after a second measurement,
and each entry's ``measured`` time and ``spread``), and ``inputs``: the files the run read besides its config
(experiments/store/inputs.py: path, size, sha256)."""

from __future__ import annotations

import hashlib
import os
import platform
import re
import subprocess
import sys
import sysconfig
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LOCK_FILE = REPO / "requirements-lock.txt"  # made by `make lock` (pip-compile), installed by `make`
PROJECT = "apam-harness"  # the harness itself: installed from the working tree, not from the lock
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)")
PACKAGES = (
    "torch",
    "torchvision",
    "numpy",
    "scipy",
    "pandas",
    "matplotlib",
    "hydra-core",
    "omegaconf",
    "scikit-learn",
    "tqdm",
)


def git_commit(repo: Path = REPO) -> str:
    """``<sha>`` of HEAD, with ``-dirty`` when tracked files differ from it; ``unknown`` outside a git checkout.

    Files under ``results/`` and ``results-<profile>/`` (the committed reference results of each profile, rewritten
    by ``make reproduce`` itself, e.g. the long profile's reproduce_status.json between its experiments) do not
    make the code dirty: ``-dirty`` means the code or configs that produced a result are not those of the commit.
    """
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        status = [  # --no-optional-locks: git status refreshed the checkout's .git/index, a write outside results_dir
            "git",
            "--no-optional-locks",
            "status",
            "--porcelain",
            "--untracked-files=no",
            "--",
            ".",
            ":(exclude)results",
            ":(exclude)results-*",
        ]
        dirty = subprocess.run(status, cwd=repo, capture_output=True, text=True, timeout=10, check=False).stdout.strip()
        return sha + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def versions() -> dict:
    """Installed versions of the packages results depend on (``None`` when one is missing)."""
    out = {"python": sys.version.split()[0]}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def _canonical(name: str) -> str:
    """PEP 503 normalized project name (``Jinja2`` -> ``jinja2``, ``typing_extensions`` -> ``typing-extensions``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def read_lock(path: Path = LOCK_FILE) -> dict[str, str]:
    """The pins of a pip-compile lock file: normalized name -> version (``name==version`` lines; hashes ignored).

    Raises:
        FileNotFoundError: no lock file at ``path``.
    """
    pins = {}
    for line in Path(path).read_text().splitlines():
        m = _PIN.match(line.strip())
        if m:
            pins[_canonical(m.group(1))] = m.group(2)
    return pins


def installed() -> dict[str, str]:
    """Distributions installed in the running interpreter's environment (its site-packages folders, not the whole
    ``sys.path``: setuptools puts its vendored copies of packaging, wheel etc. there once imported, e.g. by
    ``torch.compile``): normalized name -> version."""
    paths = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    return {_canonical(d.metadata["Name"]): d.version for d in metadata.distributions(path=paths) if d.metadata["Name"]}


def lock_mismatches(path: Path = LOCK_FILE, env: dict[str, str] | None = None) -> list[str]:
    """How the environment differs from the lock, one line per package (empty: exactly the locked versions).

    Args:
        path: the lock file.
        env: name -> version of the environment (default: :func:`installed`); the project itself is not compared.
    """
    pins, env = read_lock(path), dict(installed() if env is None else env)
    env.pop(PROJECT, None)
    out = [
        f"{n}: locked {v}, " + (f"installed {env[n]}" if n in env else "not installed")
        for n, v in sorted(pins.items())
        if env.get(n) != v
    ]
    out += [f"{n}: installed {env[n]}, not in the lock" for n in sorted(set(env) - set(pins))]
    return out


def lock_info(path: Path = LOCK_FILE) -> dict:
    """The lock behind a run: file name, its sha256, and whether the environment holds exactly its versions
    (``mismatches``: the first 20 differences). ``sha256`` is None when there is no lock file.

    Kept in this process while the lock file and the site-packages folders are unchanged (size and modification
    times; installing or removing a distribution changes its folder's): every job of a sweep asks, and reading
    every installed distribution's metadata is the slow part of the check."""
    if not Path(path).exists():
        return {"file": Path(path).name, "sha256": None, "matches_env": False, "mismatches": ["no lock file"]}
    folders = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    key = (str(Path(path).resolve()), *((st.st_size, st.st_mtime_ns) for st in map(os.stat, [path, *folders])))
    if _LOCK_INFO.get("key") != key:
        diff = lock_mismatches(path)
        _LOCK_INFO.clear()
        _LOCK_INFO.update(
            key=key,
            info={
                "file": Path(path).name,
                "sha256": hashlib.sha256(Path(path).read_bytes()).hexdigest(),
                "matches_env": not diff,
                "mismatches": diff[:20],
            },
        )
    return dict(_LOCK_INFO["info"], mismatches=list(_LOCK_INFO["info"]["mismatches"]))


_LOCK_INFO: dict = {}  # lock_info's last answer in this process, with the file and folder stats it was made for


def cpu_info(cpuinfo: Path = Path("/proc/cpuinfo")) -> dict:
    """The CPU a result was computed on, so that a last-bit difference between machines can be traced to it.

    Returns ``{"model", "flags", "cores", "machine", "source"}``: the model name and the feature flags (sorted,
    space-separated) of the first processor in ``cpuinfo`` (Linux's ``/proc/cpuinfo``: ``model name`` and ``flags``
    on x86, ``Features`` and ``CPU part`` or ``Processor`` on ARM; ``source`` is the file), else
    ``platform.processor()`` as the model and no flags (``source`` ``platform``); ``cores`` is ``os.cpu_count()``
    (logical processors), ``machine`` ``platform.machine()``.
    """
    model = flags = None
    try:
        text = Path(cpuinfo).read_text(errors="replace")
    except OSError:
        text = None
    if text is not None:
        fields: dict[str, str] = {}
        for line in text.splitlines():
            if not line.strip():
                if fields:
                    break  # the first processor's block is enough
                continue
            key, sep, value = line.partition(":")
            if sep:
                fields.setdefault(key.strip().lower(), value.strip())
        model = (
            fields.get("model name")
            or fields.get("processor name")
            or fields.get("cpu model")
            or fields.get("cpu part")
            or None
        )
        raw = fields.get("flags") or fields.get("features")
        flags = " ".join(sorted(raw.split())) if raw else None
    source = str(cpuinfo) if model or flags else "platform"
    return {
        "model": model or platform.processor() or None,
        "flags": flags,
        "cores": os.cpu_count(),
        "machine": platform.machine(),
        "source": source,
    }


def collect(threads: int, device: str) -> dict:
    """Everything a reviewer needs to know where a number came from (the CPU: :func:`cpu_info`)."""
    import torch

    return {
        "git_commit": git_commit(),
        "versions": versions(),
        "lock": lock_info(),
        "host": platform.node(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "cpu": cpu_info(),
        "threads": threads,
        "torch_threads": torch.get_num_threads(),
        "device": device,
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "argv": sys.argv,
    }
