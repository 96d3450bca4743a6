"""Provenance of a run: code version, package versions, machine, threads (written beside every result)."""
from __future__ import annotations

import os
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("torch", "torchvision", "numpy", "scipy", "pandas", "matplotlib", "hydra-core", "omegaconf",
            "scikit-learn", "tqdm")


def git_commit(repo: Path = REPO) -> str:
    """``<sha>`` of HEAD, with ``-dirty`` when tracked files differ from it; ``unknown`` outside a git checkout.

    Files under ``results/`` (the committed reference results, rewritten by ``make reproduce`` itself) do not make
    the code dirty: ``-dirty`` means the code or configs that produced a result are not those of the commit.
    """
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True,
                             timeout=10, check=True).stdout.strip()
        status = ["git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)results"]
        dirty = subprocess.run(status, cwd=repo, capture_output=True, text=True, timeout=10).stdout.strip()
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


def collect(threads: int, device: str) -> dict:
    """Everything a reviewer needs to know where a number came from."""
    import torch

    return {
        "git_commit": git_commit(),
        "versions": versions(),
        "host": platform.node(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "threads": threads,
        "torch_threads": torch.get_num_threads(),
        "device": device,
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "argv": sys.argv,
    }
