"""A results folder as the tools that start runs name it: the ``results_dir=`` override that Hydra reads back as that
very path (:func:`path_override`: experiments.reproduce, experiments.prune, the sweeps, the Python API), and the
checks of the folder that ``make reproduce`` makes before anything runs (:func:`check_results_folder`)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from experiments.errors import ConfigError
from experiments.settings.grammar import check_text

_BEFORE_QUOTE = re.compile(r"(\\*)('|\Z)")
"""A run of backslashes (maybe none) before a ``'`` or at the end of the text: what Hydra reads as escapes inside a
quoted value (any other backslash it keeps as it is)."""


def path_override(key: str, path: str | os.PathLike) -> str:
    """``key='<path>'``: ``path`` quoted as Hydra's override grammar reads a quoted value
    (https://hydra.cc/docs/advanced/override_grammar/basic, "Quoted values"), so that ``=``, ``,``, ``'``, ``\\``,
    brackets, braces, ``$``, spaces and any Unicode letter are taken as written: ``'`` is written ``\\'``, and a run of
    backslashes before a ``'`` or at the end is doubled. (Unquoted, ``new=dir`` or ``it's`` was an override Hydra
    could not read, and a comma made a sweep.)

    Raises:
        ConfigError: ``<key>=<path>: ...``, one line, when Hydra cannot take the path even quoted: it holds ``${``
            (an interpolation, resolved inside quotes too), or bytes that are not UTF-8 text.
    """
    text = os.fspath(path)
    if "${" in text:
        raise ConfigError(
            f"{key}={text}: '${{' in a folder's name is an interpolation to Hydra, even quoted; name a folder "
            "without it"
        )
    check_text(f"{key}={text}")
    return f"{key}='" + _BEFORE_QUOTE.sub(lambda m: 2 * m[1] + ("\\'" if m[2] else ""), text) + "'"


def check_results_folder(results_dir: Path, experiments: list[str]) -> None:
    """Before anything runs: ``results_dir`` is a path every run takes as its ``results_dir`` (Hydra reads it back,
    :func:`path_override`, and the runs' own check of it passes: no ``~`` left unexpanded, no ``..`` after a folder
    name), that this process can write (experiments/settings/preflight.py ``check_writable``), and the folder of each
    of ``experiments`` in it, where one exists, is a folder (or a link to one).

    Raises:
        ConfigError: one line naming the path and what is wrong with it (a sweep refused it after the report's
            files were written, or ``mkdir`` failed with a traceback).
    """
    from experiments.settings.fields import folder_problem
    from experiments.settings.preflight import check_writable
    from experiments.settings.schema import RunSettings

    path_override("results_dir", results_dir)
    try:
        RunSettings._folder(str(results_dir))  # the validator of every run's settings: its message, before any run
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    check_writable(str(results_dir))
    for experiment in experiments:
        exp_dir = results_dir / experiment
        if os.path.lexists(exp_dir) and (why := folder_problem(exp_dir)):
            raise ConfigError(f"{exp_dir}: {why} (the folder of experiment {experiment}'s results); remove it")
