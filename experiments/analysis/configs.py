"""What the runs' resolved configs (``runs/<run_id>/config.yaml``) say beyond the summary's columns."""

from __future__ import annotations

from pathlib import Path

from omegaconf import OmegaConf

from experiments.store.table import run_files


def step_sizes(exp_dir: Path) -> dict[str, list[float]]:
    """Each algorithm's step sizes alpha (``algorithm.lr`` x ``algorithm.lr_factor`` of every run's config.yaml),
    sorted: ``{"apam": [0.0001], "async_sgd": [0.05]}``; {} without configs. A file that is not a regular one is left
    out, named (experiments/store/table.py :func:`run_files`)."""
    out: dict[str, set] = {}
    for f in run_files(exp_dir, "config.yaml"):
        alg = OmegaConf.load(f).get("algorithm") or {}
        if alg.get("name") and alg.get("lr") is not None:
            out.setdefault(str(alg["name"]), set()).add(float(alg["lr"]) * float(alg.get("lr_factor") or 1.0))
    return {a: sorted(v) for a, v in out.items()}
