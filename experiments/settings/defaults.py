"""The defaults of a config group's option, read from its yaml under ``conf/`` without composing a whole config.

For settings the harness builds itself from a run's own (a calibration run on another engine, the clock's
measurements): ``option("engine", "shared_memory")`` is conf/engine/shared_memory.yaml as a plain dict, resolved on
its own (an ``oc.select`` that looks outside the block takes its default), starting from the option its defaults
list names first where it has one (conf/engine/simulated_distributed.yaml extends simulated.yaml).
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import OmegaConf

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"


def option(group: str, name: str) -> dict:
    """conf/<group>/<name>.yaml as a resolved plain dict (see the module docstring).

    Raises:
        FileNotFoundError: no such option.
    """
    node = OmegaConf.load(CONF_DIR / group / f"{name}.yaml")
    parents = [d for d in node.pop("defaults", []) if isinstance(d, str) and d != "_self_"]
    if parents:
        base = OmegaConf.create(option(group, parents[0]))
        node = OmegaConf.merge(base, node)
    return OmegaConf.to_container(node, resolve=True)


def options(group: str) -> list[str]:
    """The option names of a config group (the yaml files of conf/<group>/)."""
    return sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))
