"""What the runs' resolved configs (``runs/<run_id>/config.yaml``) say beyond the summary's columns."""

from __future__ import annotations

import io
from collections.abc import Mapping
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from experiments.store.damage import has_aliases
from experiments.store.table import run_files


def run_config(path: Path) -> DictConfig | None:
    """A run's config.yaml at ``path`` as OmegaConf reads it; None when it cannot be read as a mapping (not a regular
    file: never opened; not UTF-8 YAML; a list; YAML aliases, :func:`has_aliases`). A damaged config is the runner's
    to name (it reruns that run); a reader of finished runs takes it as saying nothing."""
    if not Path(path).is_file():  # never opens a named pipe or a folder
        return None
    try:
        text = Path(path).read_bytes().decode("utf-8")
        cfg = None if has_aliases(text) else OmegaConf.load(io.StringIO(text))
    except Exception:  # noqa: BLE001 -- any YAML, decoding or read error: the file does not say
        return None
    return cfg if isinstance(cfg, DictConfig) else None


def step_sizes(exp_dir: Path) -> dict[str, list[float]]:
    """Each algorithm's step sizes alpha (``algorithm.lr`` x ``algorithm.lr_factor`` of every run's config.yaml),
    sorted: ``{"apam": [0.0001], "async_sgd": [0.05]}``; {} without configs. A file that is not a regular one is left
    out, named (experiments/store/table.py :func:`run_files`); one that cannot be read (:func:`run_config`) says
    nothing."""
    out: dict[str, set] = {}
    for f in run_files(exp_dir, "config.yaml"):
        alg = (run_config(f) or {}).get("algorithm")
        if not isinstance(alg, Mapping):
            continue
        try:
            alpha = float(alg["lr"]) * float(alg.get("lr_factor") or 1.0) if alg.get("name") else None
        except (KeyError, TypeError, ValueError):  # no lr, or one that is not a number: a damaged config says nothing
            alpha = None
        if alpha is not None:
            out.setdefault(str(alg["name"]), set()).add(alpha)
    return {a: sorted(v) for a, v in out.items()}
