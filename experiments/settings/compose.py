"""Checks a command line before Hydra runs anything: every job of a sweep is composed and validated first.

Hydra reports an unknown option or key as a multi-line message with exit code 1, after a sweep may already have
written results. Here every combination of the overrides, however many, (command line, and in a multirun the experiment's own
sweep for the profile, see :func:`profile_sweep`) is composed with Hydra's compose API and checked by :func:`experiments.settings.validate.validate`;
then the data every job reads is checked (:func:`check_data`); the first problem becomes a :class:`ConfigError`
naming the override, so the entry point exits 2, nothing written.
"""
from __future__ import annotations

import copy
import itertools
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import OverrideType
from omegaconf import OmegaConf

from experiments.errors import ConfigError
from experiments.settings.validate import validate

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"
GROUPS = frozenset(p.name for p in CONF_DIR.iterdir() if p.is_dir())
ADDABLE = frozenset({"problem.init_std", "problem.eval_batch_size"})
"""Keys absent from conf/ that the harness reads when present (``+problem.init_std=0.01``); any other ``+key`` is
refused: it would be accepted and ignored."""
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
    """Every job of the command line (each combination of the swept values, in Hydra's order) and their count.

    Raises:
        ConfigError: an override does not parse, a sweep is given without multirun, or ``+key`` adds a key the
            harness would ignore (only :data:`ADDABLE` keys may be added).
    """
    lists = _checked(overrides, multirun)
    combos = [list(c) for c in itertools.product(*lists)] if lists else [[]]
    return combos, len(combos)


def _checked(overrides: list[str], multirun: bool) -> list[list[str]]:
    """The values of each key of the command line (:func:`_expand`), after the checks :func:`job_overrides`
    documents."""
    expanded = _expand(overrides)
    for key, values in expanded.items():
        bare = key.lstrip("+~")
        if key.startswith("+") and bare not in ADDABLE and not bare.startswith("hydra"):
            raise ConfigError(f"{values[0]}: no such config key, the harness would ignore it "
                              f"(keys that may be added with +: {', '.join(sorted(ADDABLE))})")
        if not multirun and len(values) > 1:
            raise ConfigError(f"{key}={','.join(v.split('=', 1)[1] for v in values)}: a sweep needs -m (multirun)")
    return list(expanded.values())


def job_cover(overrides: list[str], strength: int = 1) -> list[list[str]]:
    """A few jobs of a sweep that together hold every value (``strength=1``) or every pair of values of two keys
    (``strength=2``, a pairwise covering array, built greedily: each next job is the one of the full product that
    holds the most pairs not yet held) -- the jobs to compose when what is asked depends on single values (which
    clock an engine option has, which seeds a sweep has) or on pairs of them (a config error that two swept values
    make together), without composing every job of a sweep of thousands. Job overrides as in
    :func:`job_overrides`; strength 1 gives max(len(values)) jobs.

    Raises:
        ConfigError: as :func:`job_overrides`; ValueError: strength not 1 or 2.
    """
    lists = _checked(overrides, multirun=True)
    if strength not in (1, 2):
        raise ValueError(f"strength={strength}: must be 1 or 2")
    if strength == 1 or len(lists) < 2:  # fewer than two keys: no pairs, every value is the cover
        return [[vals[i % len(vals)] for vals in lists] for i in range(max((len(v) for v in lists), default=1))]
    n = len(lists)
    candidates = list(itertools.product(*(range(len(v)) for v in lists)))

    def pairs(c):
        return {(i, c[i], j, c[j]) for i in range(n) for j in range(i + 1, n)}

    held = [pairs(c) for c in candidates]
    todo = set().union(*held) if held else set()
    chosen = []
    while todo:
        k = max(range(len(candidates)), key=lambda k: len(held[k] & todo))
        todo -= held[k]
        chosen.append(candidates[k])
    return [[lists[k][i] for k, i in enumerate(c)] for c in chosen] or [[]]


def _is_group(override: str) -> bool:
    """True for an override that selects a config (``problem=...``, ``hydra/...``) or sets Hydra's own config:
    those are composed; every other override sets a value and is applied to the composed config."""
    key = override.split("=", 1)[0].lstrip("+~").split("@")[0]
    return key in GROUPS or key.startswith("hydra")


def compose_jobs(combos: list[list[str]]) -> list:
    """The resolved config of each job (Hydra compose API; also inside a running Hydra app, e.g. from a run that
    calibrates on first use); raises ConfigError naming a bad override.

    Hydra composes once per distinct choice of config groups; each job's value overrides are then applied to a copy
    with Hydra's own rules (``ConfigLoaderImpl._apply_overrides_to_config``, what ``compose`` does after choosing
    the configs), so a sweep of any size is checked job by job in about a millisecond per job."""
    from hydra.core.global_hydra import GlobalHydra

    if GlobalHydra.instance().is_initialized():
        return _resolved_all(combos)
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3", job_name="precheck"):
        return _resolved_all(combos)


def _resolved_all(combos: list[list[str]]) -> list:
    bases: dict[tuple, object] = {}
    parsed: dict[str, object] = {}
    parser = OverridesParser.create()
    out = []
    for combo in combos:
        groups = tuple(o for o in combo if _is_group(o))
        values = [o for o in combo if not _is_group(o)]
        if groups not in bases:
            bases[groups] = _composed(list(groups))
        cfg = copy.deepcopy(bases[groups])
        for o in values:
            if o not in parsed:
                parsed[o] = parser.parse_overrides([o])
            try:
                ConfigLoaderImpl._apply_overrides_to_config(parsed[o], cfg)
            except Exception as exc:
                raise _explain(o, exc) from None
        try:
            out.append(OmegaConf.create(OmegaConf.to_container(cfg, resolve=True)))
        except Exception as exc:
            raise ConfigError(f"{' '.join(combo)}: {str(exc).strip().splitlines()[0]}") from None
    return out


def _composed(combo: list[str]):
    try:
        return _compose(combo)
    except Exception as exc:
        for o in combo:  # find the override that fails on its own
            try:
                _compose([o])
            except Exception as single:
                raise _explain(o, single) from None
        raise ConfigError(f"{' '.join(combo)}: {str(exc).strip().splitlines()[0]}") from None


def _resolved(combo: list[str]):
    return _resolved_all([combo])[0]


def check_data(cfgs: list) -> None:
    """Every data set the jobs read is there and valid, each checked once (staging it when it can be got, as the
    run would; a staged set costs a read of its headers). LIBSVM files are checked to exist by validate.

    Raises:
        ConfigError: ``problem=<name>: <the data error, naming the file and how to get it>``.
    """
    from problems.data import DataError, data_root, stage

    seen = set()
    for cfg in cfgs:
        p = cfg.problem
        dataset = p.get("dataset") if p.kind in ("logreg", "cnn") else None
        if dataset is None or dataset in seen:
            continue
        seen.add(dataset)
        try:
            stage(str(dataset), data_root())
        except (DataError, ValueError, OSError) as exc:
            raise ConfigError(f"problem={p.name}: {str(exc).strip().splitlines()[0]}") from None


def precheck(overrides: list[str], multirun: bool) -> int:
    """Compose and validate every job the command line asks for, whatever their number, then check that the data
    of every job is there; return the number of jobs. Nothing is written (no results, no ``.hydra/``).

    Raises:
        ConfigError: the first bad override, value or missing data set, as one line naming it.
    """
    combos, total = job_overrides(overrides, multirun)
    cfgs = compose_jobs(combos)
    for cfg in cfgs:
        validate(cfg)
    check_data(cfgs)
    return total
