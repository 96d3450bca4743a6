"""Checks a command line before Hydra runs anything: every job of a sweep is composed and validated first.

Hydra reports an unknown option or key as a multi-line message with exit code 1, after a sweep may already have
written results. Here each combination of the overrides (command line, and in a multirun the experiment's own
sweep for the profile, see :func:`profile_sweep`) is composed with Hydra's compose API and checked by :func:`experiments.validate.validate`;
the first problem becomes a :class:`ConfigError` naming the override, so the entry point exits 2, nothing written.
"""
from __future__ import annotations

import itertools
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import OverrideType
from omegaconf import OmegaConf

from experiments.errors import ConfigError
from experiments.validate import validate

CONF_DIR = Path(__file__).resolve().parents[1] / "conf"
MAX_COMBINATIONS = 32
_PREFIX = {OverrideType.ADD: "+", OverrideType.FORCE_ADD: "++", OverrideType.DEL: "~"}


def _expand(overrides: list[str]) -> dict[str, list[str]]:
    """key -> list of ``key=value`` strings (one per swept value; one for a plain override)."""
    parser = OverridesParser.create()
    try:
        parsed = parser.parse_overrides(overrides)
    except Exception as exc:  # hydra's OverrideParseException and friends
        raise ConfigError(str(exc).splitlines()[0]) from None
    out: dict[str, list[str]] = {}
    for o in parsed:
        key = _PREFIX.get(o.type, "") + o.get_key_element()
        if o.is_sweep_override():
            out[key] = [f"{key}={v}" for v in o.sweep_string_iterator()]
        else:
            out[key] = [o.input_line]
    return out


def _compose(overrides: list[str]):
    return compose(config_name="config", overrides=overrides)


def _options(group: str) -> str:
    folder = CONF_DIR / group.split("@")[0]
    return ", ".join(sorted(p.stem for p in folder.glob("*.yaml"))) if folder.is_dir() else ""


def _explain(override: str, exc: Exception) -> ConfigError:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if first.startswith("Could not override"):
        first = "no such config key"
    key = override.split("=", 1)[0].lstrip("+~")
    opts = _options(key)
    hint = f" (options: {opts})" if opts else ""
    return ConfigError(f"{override}: {first}{hint}")


def profile_sweep(overrides: list[str]) -> list[str]:
    """The experiment's sweep for the chosen profile (``profiles.<profile>`` of conf/experiment/<id>.yaml) as
    overrides, for the keys the command line does not set itself. Empty without ``experiment=``.

    Raises:
        ConfigError: the command line does not compose.
    """
    expanded = _expand(overrides)
    if not any(k.lstrip("+~") == "experiment" for k in expanded):
        return []
    first = [vals[0] for vals in expanded.values()]
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3", job_name="precheck"):
        try:
            cfg = _compose(first)
        except Exception:
            return []  # precheck names the bad override
    sweep = (cfg.get("profiles") or {}).get(cfg.profile) or {}
    given = {k.lstrip("+~") for k in expanded}
    return [f"{k}={v}" for k, v in OmegaConf.to_container(sweep, resolve=True).items() if k not in given]


def job_overrides(overrides: list[str], multirun: bool) -> tuple[list[list[str]], int]:
    """The jobs to check and the true job count: every combination up to MAX_COMBINATIONS, beyond that every pair
    of values of every two keys (with the other keys at their first value).

    Raises:
        ConfigError: an override does not parse, or a sweep is given without multirun.
    """
    expanded = _expand(overrides)
    if not multirun:
        for key, values in expanded.items():
            if len(values) > 1:
                raise ConfigError(f"{key}={','.join(v.split('=', 1)[1] for v in values)}: a sweep needs -m (multirun)")
    lists = list(expanded.values())
    total = 1
    for vals in lists:
        total *= len(vals)
    if total <= MAX_COMBINATIONS:
        combos = [list(c) for c in itertools.product(*lists)] if lists else [[]]
    else:  # every pair of values of every two keys (the checks relate at most two keys), others at first values
        base = [vals[0] for vals in lists]
        seen, combos = set(), []
        for i, j in itertools.combinations(range(len(lists)), 2):
            for vi, vj in itertools.product(lists[i], lists[j]):
                c = list(base)
                c[i], c[j] = vi, vj
                if tuple(c) not in seen:
                    seen.add(tuple(c))
                    combos.append(c)
        if not combos:
            combos = [[v] for v in lists[0]]
    return combos, total


def compose_jobs(combos: list[list[str]]) -> list:
    """The resolved config of each job (Hydra compose API; also inside a running Hydra app, e.g. from a run that
    calibrates on first use); raises ConfigError naming a bad override."""
    from hydra.core.global_hydra import GlobalHydra

    if GlobalHydra.instance().is_initialized():
        return [_resolved(combo) for combo in combos]
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3", job_name="precheck"):
        return [_resolved(combo) for combo in combos]


def _resolved(combo: list[str]):
    try:
        cfg = _compose(combo)
    except Exception as exc:
        for o in combo:  # find the override that fails on its own
            try:
                _compose([o])
            except Exception as single:
                raise _explain(o, single) from None
        raise ConfigError(f"{' '.join(combo)}: {str(exc).strip().splitlines()[0]}") from None
    try:
        return OmegaConf.create(OmegaConf.to_container(cfg, resolve=True))
    except Exception as exc:
        raise ConfigError(f"{' '.join(combo)}: {str(exc).strip().splitlines()[0]}") from None


def precheck(overrides: list[str], multirun: bool) -> int:
    """Compose and validate every job the command line asks for; return the number of jobs.

    Raises:
        ConfigError: the first bad override or value, as one line naming it.
    """
    combos, total = job_overrides(overrides, multirun)
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3", job_name="precheck"):
        for combo in combos:
            validate(_resolved(combo))
    return total
