"""Keys a command line may not set, or not to some values: Hydra's own keys that place files, name the job, log or
call back; a search path to a place that is not there; the options' own labels; and an ``experiment_id`` that is
another experiment's folder. Checked for every entry path by :func:`experiments.settings.compose.job_overrides`."""

from __future__ import annotations

from pathlib import Path

from experiments.errors import ConfigError
from experiments.settings.hydra_own import check_searchpath

HARNESS_HYDRA_KEYS = (
    "hydra.run",
    "hydra.sweep",
    "hydra.output_subdir",
    "hydra.job.chdir",
    "hydra.runtime",
)
"""Hydra keys that place files or change the working folder: conf/config.yaml sets them so that every file the
harness writes stays under ``results_dir``; a command line may not set them."""

HYDRA_JOB_KEYS = ("hydra.job.", "hydra.job_logging", "hydra.hydra_logging", "hydra.callbacks")
"""Hydra's job, logging and callback settings: a log file's name or folder (``hydra.job.name``, a handler's
``filename``) would write outside ``results_dir``, ``hydra.job.env_set`` would set the harness's own variables after
they were checked, and a bad logging level or callback target ended in Hydra's traceback. A logging preset is still
chosen by group (``hydra/job_logging=disabled``)."""


def check_key(bare: str, value: str) -> None:
    """``bare`` (a key without ``+``/``~``) may be set on a command line; ``value``: its override as given.

    Raises:
        ConfigError: one line naming the override and what sets the key instead (or the place of the search path
            that is not there: :func:`~experiments.settings.hydra_own.check_searchpath`).
    """
    if bare in ("engine.name", "delay.model"):  # the option's own label: "engine.clock=wall: must be simulated"
        group = bare.split(".")[0]
        raise ConfigError(f"{value}: set by the {group} option; choose it with {group}=<option>")
    if bare == "hydra.searchpath":  # Hydra only warns about a place that is not there, then runs without it
        check_searchpath(value)
    if bare == "hydra.mode":
        raise ConfigError(f"{value}: set by the command line's -m (a sweep) or its absence (one run)")
    if bare.startswith(HYDRA_JOB_KEYS):
        raise ConfigError(
            f"{value}: Hydra's job, logging and callback settings are the harness's (every file stays under "
            "results_dir); choose a logging preset with hydra/job_logging=<option>"
        )
    if any(bare == k or bare.startswith(f"{k}.") for k in HARNESS_HYDRA_KEYS):  # hydra.sweep, not hydra.sweeper
        raise ConfigError(
            f"{value}: set by the harness (Hydra's scratch folders stay under results_dir/.hydra and jobs "
            "run in the current folder); choose where results go with results_dir="
        )


def check_experiment_folder(expanded: dict[str, list[str]], config_dir: str) -> None:
    """An ``experiment_id`` that names an experiment of ``config_dir``/experiment/ is that experiment's folder: runs
    of another experiment (or of none) put there were counted and judged as its runs by the report.
    ``expanded``: each key of the command line and its overrides (``key=value``).

    Raises:
        ConfigError: ``experiment_id=lr_speedup: the folder of experiment lr_speedup ...``.
    """
    chosen = {v.split("=", 1)[1] for k, vs in expanded.items() if k.lstrip("+~") == "experiment" for v in vs}
    experiments = {p.stem for p in (Path(config_dir) / "experiment").glob("*.yaml")}  # a name is never a path here
    for override in expanded.get("experiment_id", []):
        name = override.split("=", 1)[1]
        if name in experiments and name not in chosen:
            raise ConfigError(
                f"{override}: the folder of experiment {name}, whose report would count these runs as its own; "
                "choose another name (or experiment=" + name + ")"
            )
