"""Hydra's own config as a command line names it: the options of a ``hydra/...`` group (Hydra's and its plugins',
besides conf/'s), the keys of the launcher and the sweeper a job chooses, and the places of ``hydra.searchpath``.
Hydra took ``+hydra.launcher.nmjobs=4`` silently (the joblib launcher ignored it) or failed on it with its 5-line
"Error in call to target" (the basic launcher has no keys), and only warned about a search path that is not there,
then ran without it; experiments/settings/compose.py and reserved.py ask here first."""

from __future__ import annotations

import importlib.resources
import re
from pathlib import Path

from experiments.errors import ConfigError
from experiments.settings.grammar import read_value

PLUGINS = ("launcher", "sweeper")
"""Hydra's config groups whose chosen option is a class Hydra instantiates with the option's keys."""


def hydra_options(group: str) -> set[str]:
    """The options Hydra itself has for ``group`` (``hydra/launcher``: ``basic``, and each installed plugin's, such as
    ``joblib``): its package's files (pkg://hydra.conf) and the structured configs its plugins register. Empty for a
    group that is not Hydra's."""
    from hydra.core.config_store import ConfigStore
    from hydra.core.plugins import Plugins

    Plugins.instance()  # imports every installed plugin: each registers its configs as it loads
    try:
        names = set(ConfigStore.instance().list(group))
    except OSError:  # ConfigStore's "Path not found": no structured config in this group
        names = set()
    folder = importlib.resources.files("hydra.conf").joinpath(group)
    if folder.is_dir():
        names |= {f.name for f in folder.iterdir()}
    return {n.removesuffix(".yaml") for n in names if n.endswith(".yaml")}


def check_plugin_keys(given: list[str], hydra) -> None:
    """Each of ``given`` (overrides of ``hydra.launcher...`` or ``hydra.sweeper...``, as typed: ``+``, ``++``, ``~``)
    sets a key of the launcher or sweeper of ``hydra`` (Hydra's config, composed without ``given``): Hydra adds any
    ``+`` key to it, and its class either ignores the key or fails to start.

    Raises:
        ConfigError: ``+hydra.launcher.nmjobs=4: not a key of hydra/launcher=parallel (its keys: ...)``.
    """
    for o in given:
        key, _, value = o.partition("=")
        parts = key.lstrip("+~").split(".")
        if len(parts) < 2 or parts[1] not in PLUGINS:
            continue
        node = hydra[parts[1]]
        named = parts[2:3]
        if not named:  # hydra.launcher={n_jobs: 4}: the keys of the mapping
            parsed = read_value(value)
            named = list(parsed.value()) if parsed is not None and isinstance(parsed.value(), dict) else []
        bad = next((k for k in named if k not in node), None)
        if bad is not None:
            keys = sorted(k for k in node if k != "_target_")
            group = f"hydra/{parts[1]}"
            raise ConfigError(
                f"{o}: {'' if parts[2:] else bad + ' is '}not a key of {group}={hydra.runtime.choices[group]} "
                f"({'its keys: ' + ', '.join(keys) if keys else 'it has none'})"
            )


def check_searchpath(override: str) -> None:
    """Each place of a ``hydra.searchpath=[...]`` override is there: a ``file://`` folder, a ``pkg://`` package Hydra
    can read configs from (one it can import, with an ``__init__.py``, as Hydra's own test of it). Hydra only warned
    about one that is not there, twice, and ran without it.

    Raises:
        ConfigError: ``hydra.searchpath: /x/conf: no such config folder``, or ``... pkg://x.conf: no such Python
            package``.
    """
    for scheme, place in re.findall(r"(file|pkg)\\?://([^,\]'\"]+)", override):
        if scheme == "file" and not _is_dir(place):
            raise ConfigError(f"hydra.searchpath: {place}: no such config folder")
        if scheme == "pkg" and not _is_package(place):
            raise ConfigError(f"hydra.searchpath: pkg://{place}: no such Python package")


def _is_dir(path: str) -> bool:
    try:
        return Path(path).is_dir()
    except OSError:  # a name too long for the file system
        return False


def _is_package(name: str) -> bool:
    """Whether Hydra finds a package ``name`` for pkg:// (hydra's ImportlibResourcesConfigSource.available)."""
    try:
        files = importlib.resources.files(name)
        return any(f.name == "__init__.py" and f.is_file() for f in files.iterdir())
    except Exception:  # noqa: BLE001 -- no such module, not a package, or its import fails: none Hydra can read
        return False
