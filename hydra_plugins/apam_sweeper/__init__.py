"""Hydra sweeper plugin ``hydra/sweeper=checked`` (registered in Hydra's ConfigStore below; the default in
conf/config.yaml): Hydra's basic sweeper, without composing every job a second time when ``python -m experiments.run``
has already composed and validated them all.

Hydra's BasicSweeper composes each job of a batch before launching it (``Sweeper.validate_batch_is_legal``: "this can
be a bit slow for large jobs", its source says); the launcher then composes each job again to run it. Our
``experiments.settings.compose`` composes and validates every job of the command line before Hydra starts (a bad value fails
with one line, nothing written), so the sweeper's pass is the same work once more: 11 s of the 25 s that a 72-job
sweep (stragglers, quick) spent before its first job, 2026-12-02. ``experiments.run`` sets ``APAM_PRECHECKED`` to
the fingerprint of the command line it checked (:func:`fingerprint`); the sweeper skips its pass only for that same
command line, and behaves exactly as BasicSweeper otherwise (e.g. when another program runs the sweep).
"""
import hashlib
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Dict, Optional

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.config_store import ConfigStore

ENV = "APAM_PRECHECKED"


def fingerprint(argv: Sequence[str]) -> str:
    """A short hash of a command line (its arguments after the program name)."""
    return hashlib.sha256("\0".join(argv).encode()).hexdigest()[:16]


class CheckedSweeper(BasicSweeper):
    """BasicSweeper whose batches are not composed before launch when ``$APAM_PRECHECKED`` is the fingerprint of this
    process's command line (experiments/run.py's precheck composed and validated them)."""

    def validate_batch_is_legal(self, batch: Sequence[Sequence[str]]) -> None:
        if os.environ.get(ENV) == fingerprint(sys.argv[1:]):
            return
        super().validate_batch_is_legal(batch)


@dataclass
class CheckedSweeperConf:
    _target_: str = "hydra_plugins.apam_sweeper.CheckedSweeper"
    max_batch_size: Optional[int] = None  # typing's spelling: OmegaConf reads these annotations, without
    params: Optional[Dict[str, Any]] = None  # `from __future__ import annotations` (Hydra imports plugins apart)


ConfigStore.instance().store(group="hydra/sweeper", name="checked", node=CheckedSweeperConf, provider="apam-harness")
