"""Hydra sweeper plugin ``hydra/sweeper=checked`` (registered in Hydra's ConfigStore below; the default in
conf/config.yaml): launches exactly the jobs that ``experiments.settings.compose.job_overrides`` lists for the command
line -- the jobs ``python -m experiments.run`` has composed and checked before Hydra started -- and records how
they ended.

Built on Hydra's public plugin interface (:class:`hydra.plugins.sweeper.Sweeper`, the launcher from
:class:`hydra.core.plugins.Plugins`). Jobs are launched in batches of ``max_batch_size`` (null: all at once), in the
order of Hydra's basic sweeper (the first key varies slowest), with the same override strings, so run ids are
those of a basic sweep. When another program runs the sweep (the command line was not checked first), every
batch is composed by the base class's check before it is launched.

``experiments.sweeps.OUTCOME`` holds the counts of the last sweep in this process (``jobs``; ``failed``: jobs that
raised or returned ``failed``; ``diverged``: jobs that returned ``diverged``), which the entry point turns into its
exit code (1 when a job failed; a diverged run is a result, named in a closing line).
"""

import hashlib
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Dict, Optional  # noqa: UP035 (OmegaConf's annotations, below)

from hydra.core.config_store import ConfigStore
from hydra.core.plugins import Plugins
from hydra.core.utils import JobStatus
from hydra.plugins.sweeper import Sweeper

ENV = "APAM_PRECHECKED"


def fingerprint(argv: Sequence[str]) -> str:
    """A short hash of a command line (its arguments after the program name)."""
    return hashlib.sha256("\0".join(argv).encode()).hexdigest()[:16]


class CheckedSweeper(Sweeper):
    """See the module docstring. ``max_batch_size``: jobs per launch (None or -1: all); ``params`` is accepted for
    the basic sweeper's config shape and must be empty."""

    def __init__(self, max_batch_size: int | None = None, params: dict[str, str] | None = None) -> None:
        super().__init__()
        if params:
            raise ValueError(
                "hydra.sweeper.params: not supported by the checked sweeper; give sweeps on the command line"
            )
        self.max_batch_size = max_batch_size
        self.launcher = None

    def setup(self, *, hydra_context, task_function, config) -> None:
        self.hydra_context, self.config = hydra_context, config
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config
        )

    def sweep(self, arguments):
        from experiments.settings.compose import job_overrides  # the harness, imported when a sweep runs
        from experiments.sweeps import OUTCOME

        jobs, _ = job_overrides(list(arguments), multirun=True)
        n = len(jobs) if self.max_batch_size in (None, -1) else int(self.max_batch_size)
        checked = os.environ.get(ENV) == fingerprint(sys.argv[1:])
        returns = []
        OUTCOME.clear()
        OUTCOME.update(jobs=len(jobs), failed=0, diverged=0)
        for start in range(0, len(jobs), max(1, n)):
            batch = jobs[start : start + max(1, n)]
            if not checked:
                self.validate_batch_is_legal(batch)
            results = self.launcher.launch(batch, initial_job_idx=start)
            OUTCOME["failed"] += sum(1 for r in results if _failed(r))
            OUTCOME["diverged"] += sum(1 for r in results if not _failed(r) and r.return_value == "diverged")
            returns.append(results)
        return returns


def _failed(ret) -> bool:
    if ret.status != JobStatus.COMPLETED:
        return True
    try:
        return ret.return_value == "failed"
    except Exception:  # noqa: BLE001 - a job whose return value raises failed
        return True


@dataclass
class CheckedSweeperConf:
    _target_: str = "hydra_plugins.apam_sweeper.CheckedSweeper"
    # typing's spelling: OmegaConf reads these annotations (it has no X | None), without
    # `from __future__ import annotations` (Hydra imports plugins apart)
    max_batch_size: Optional[int] = None  # noqa: UP045
    params: Optional[Dict[str, Any]] = None  # noqa: UP006, UP045


ConfigStore.instance().store(group="hydra/sweeper", name="checked", node=CheckedSweeperConf, provider="apam-harness")
