"""Compose every job of a command line with Hydra's public compose API and check them all before anything runs.

Hydra reports an unknown option or key as a multi-line message after a sweep may already have written results.
Here every combination of the overrides (the command line's, and in a multirun the experiment's own sweep for the
profile, :func:`profile_sweep`) is composed and built into typed settings (experiments/settings/build.py); then the
results folders, the device and the data every job reads are checked (experiments/settings/preflight.py). The first
problem is one :class:`~experiments.errors.ConfigError` line naming the override, so the entry point exits 2 with
nothing written. The same jobs, in the same order, are what the sweeper launches (hydra_plugins/apam_sweeper).

A command line may name another primary config (``--config-path``/``-cp``, ``--config-name``/``-cn``) or add a
config folder (``--config-dir``/``-cd``): :class:`Source` carries them, so those jobs are checked too.
"""

from __future__ import annotations

import copy
import itertools
import math
import re
import threading
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from omegaconf import OmegaConf, open_dict

from experiments.errors import ConfigError
from experiments.settings.build import as_typed, build_settings
from experiments.settings.cover import covering
from experiments.settings.fields import MAX_NAME
from experiments.settings.grammar import check_text
from experiments.settings.hydra_own import check_plugin_keys, hydra_options
from experiments.settings.preflight import (
    check_backend,
    check_calibration,
    check_data,
    check_device,
    check_local_processes,
    check_master_addr,
    check_places,
    check_problems,
    check_traces,
    check_writable,
)
from experiments.settings.reserved import check_experiment_folder, check_key
from experiments.settings.source import DEFAULT, Source
from experiments.settings.sweep_size import check_size

ADDABLE = frozenset({"problem.init_std", "problem.eval_batch_size"})
"""Keys absent from conf/ that the harness reads when present (``+problem.init_std=0.01``); any other ``+key`` is
refused: it would be accepted and ignored."""


GRAMMAR = "https://hydra.cc/docs/advanced/override_grammar/basic"
LEXER = "LexerNoViableAltException: "


def _parse(overrides: list[str]) -> list[Override]:
    """Hydra's parse of the overrides; one that Hydra's grammar cannot read is a ConfigError naming it and where."""
    parser = OverridesParser.create()
    out = []
    for o in overrides:
        check_text(o)
        try:
            out += parser.parse_overrides([o])
        except Exception as exc:  # hydra's OverrideParseException and friends  # noqa: BLE001
            lines = str(exc).splitlines()
            why = lines[-2] if len(lines) > 2 and lines[0].startswith("Error parsing override") else lines[0]
            if lines[0].startswith(LEXER) and len(lines) > 1 and "^" in lines[1]:
                at = lines[1].index("^") - len(LEXER)
                why = f"the character {o[at]!r} cannot stand unquoted here" if 0 <= at < len(o) else "unreadable"
            raise ConfigError(
                f"{o}: not an override Hydra can read ({why}; quote such a value: key='...'; {GRAMMAR})"
            ) from None
        if _overflows(out[-1].value()) and not re.search(r"(?i)\binf\b", o.split("=", 1)[-1]):
            raise ConfigError(f"{o}: a number beyond a float's range (it would read as infinity)")
    return out


def _overflows(value) -> bool:
    """Whether a parsed override value holds an infinite float (a plain value, a list or mapping, a sweep's values or
    bounds): Hydra reads a literal such as ``1e400`` as inf, and a message would then show ``inf`` for it."""
    if isinstance(value, float):
        return math.isinf(value)
    if isinstance(value, dict):
        value = list(value.values())
    elif not isinstance(value, (list, tuple)):  # a sweep: its values (choice) or its bounds (range, interval)
        value = [getattr(value, name, None) for name in ("list", "start", "stop", "end")]
    return any(_overflows(v) for v in value if v is not None and not isinstance(v, str))


def expand_overrides(overrides: list[str]) -> dict[str, list[str]]:
    """key -> list of ``key=value`` strings (one per swept value; one for a plain override).

    Raises:
        ConfigError: an override does not parse, a sweep cannot be listed or is empty, or the sweep has more than
            :data:`~experiments.settings.sweep_size.MAX_JOBS` jobs.
    """
    out: dict[str, list[str]] = {}
    parsed = _parse(overrides)
    check_size(parsed)  # counted before any value is listed: range(1,1000000) is refused at once
    for o in parsed:  # the strings Hydra's basic sweeper makes: they name the runs (run ids)
        key = o.get_key_element()
        if o.is_sweep_override():
            try:
                values = list(o.sweep_string_iterator())
            except Exception:  # noqa: BLE001 -- glob() needs Hydra's config loader, interval() has no values
                raise ConfigError(
                    f"{o.input_line}: this sweep cannot be listed here; give the values (a,b,c), range() or choice()"
                ) from None
            if not values:
                raise ConfigError(f"{o.input_line}: an empty sweep (no value to run)")
            out[key] = [f"{key}={v}" for v in values]
        else:
            out[key] = [f"{key}={o.get_value_element_as_str()}"]
    return out


def _options(source: Source, group: str) -> str:
    """The options of config group ``group`` (its files in the config folders; Hydra's own too, for hydra/...)."""
    folders = [Path(source.config_dir) / group.split("@")[0]] + [Path(d) / group for d in source.search_dirs]
    try:
        names = {p.stem for f in folders if f.is_dir() for p in f.glob("*.yaml")}
    except OSError:  # a name too long for a file name (a mistyped key): no folder of options
        names = set()
    return ", ".join(sorted(names | (hydra_options(group) if group.startswith("hydra/") else set())))


def _explain(source: Source, override: str, exc: Exception, cfg=None) -> ConfigError:
    """One line for an override that failed to compose or apply; a key missing from a config group's option (the
    ``engine.colocate`` of ``engine=simulated``) is named with that option, as a sweep's job chose it (``cfg``)."""
    text = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    if first.startswith("Could not override") or first.startswith("Key '"):
        first = "no such config key"
        head = override.split("=", 1)[0].lstrip("+~").split(".")[0]
        name = OmegaConf.select(cfg, f"{head}.name", default=None) if cfg is not None else None
        if head in source.groups and isinstance(name, str):
            first = f"not a key of {head}={name}"
    key, sep, value = override.partition("=")
    opts = _options(source, key.lstrip("+~"))
    shown = f"{key[:20]}...{sep}{value}" if len(key) > MAX_NAME else override  # a key of 300 characters
    return ConfigError(f"{shown}: {first}{f' (options: {opts})' if opts else ''}")


def profile_sweep(overrides: list[str], source: Source = DEFAULT) -> list[str]:
    """The experiment's sweep for the chosen profile (``profiles.<profile>`` of conf/experiment/<id>.yaml) as
    overrides, for the keys the command line does not set itself. Empty without ``experiment=``.

    Raises:
        ConfigError: the command line does not parse.
    """
    expanded = expand_overrides(overrides)
    if not any(k.lstrip("+~") == "experiment" for k in expanded):
        return []
    try:
        cfg = compose_jobs([[vals[0] for vals in expanded.values()]], source, resolve=False)[0]
    except ConfigError:
        return []  # the precheck names the bad override
    sweep = (cfg.get("profiles") or {}).get(cfg.get("profile")) or {}
    given = {k.lstrip("+~") for k in expanded}
    return [
        f"{k}={v}" for k, v in OmegaConf.to_container(sweep, resolve=True).items() if k not in given and k != "wall"
    ]  # wall: the wall-clock sweep's own keys (experiments/reproduce.py)


def _checked(overrides: list[str], multirun: bool) -> list[list[str]]:
    """The values of each key of the command line (:func:`_expand`), after the checks :func:`job_overrides`
    documents."""
    seen: dict[str, str] = {}
    for o in _parse(overrides):
        bare = o.get_key_element().lstrip("+~")
        if bare in seen:
            raise ConfigError(
                f"{bare}: given twice ({seen[bare]} and {o.input_line}); give each key once (a sweep: "
                f"{bare}=a,b with -m)"
            )
        seen[bare] = o.input_line or bare
    expanded = expand_overrides(overrides)
    for key, values in expanded.items():
        bare = key.lstrip("+~")
        # deleting a value (not a config group): Hydra's "Could not delete from config", exit 1
        if key.startswith("~") and "." in bare and not bare.startswith("hydra"):
            raise ConfigError(f"{seen[bare]}: every key of a run is read; set it (null where it may be) instead")
        # Hydra: "Sweeping over Hydra's configuration is not supported", exit 1
        if bare.startswith("hydra") and len(values) > 1:
            raise ConfigError(f"{key}: Hydra's own config takes one value per command line, not a sweep")
        check_key(bare, values[0])
        if (
            key.startswith("+")
            and bare not in ADDABLE
            and not bare.startswith("hydra")
            and not _overrides_a_key(key, expanded)
        ):
            raise ConfigError(
                f"{values[0]}: no such config key, the harness would ignore it "
                f"(keys that may be added with +: {', '.join(sorted(ADDABLE))})"
            )
        if not multirun and len(values) > 1:
            raise ConfigError(f"{key}={','.join(v.split('=', 1)[1] for v in values)}: a sweep needs -m (multirun)")
    check_experiment_folder(expanded, DEFAULT.config_dir)
    if not multirun:  # a single run's task overrides are the strings as given (a sweep's, as its sweeper writes
        return [[o] for o in overrides]  # them: 1e-05 for 1e-5); they name the run (run ids)
    return list(expanded.values())


def _overrides_a_key(key: str, expanded: dict[str, list[str]]) -> bool:
    """``++key``: Hydra's add-or-override, an override of a key the config has (``++workers=2``,
    ``++problem.max_train=2000``: looked up in the config the command line composes without its ``++`` keys, the
    first value of each sweep, as :func:`profile_sweep` composes it); a key it lacks is added, and refused as
    ``+key`` is."""
    if not key.startswith("++"):
        return False
    try:
        (cfg,) = compose_jobs([[v[0] for k, v in expanded.items() if not k.startswith("++")]], resolve=False)
    except ConfigError:  # another bad override: named by the check of the command line itself
        return True
    return OmegaConf.select(cfg, key[2:], default=_ABSENT) is not _ABSENT


def job_overrides(overrides: list[str], multirun: bool) -> tuple[list[list[str]], int]:
    """Every job of the command line (each combination of the swept values, the first key varying slowest, as
    Hydra's basic sweeper orders them) and their count.

    Raises:
        ConfigError: an override does not parse, a key is given twice, a sweep is given without multirun, or
            ``+key`` adds a key the harness would ignore (only :data:`ADDABLE` keys may be added).
    """
    lists = _checked(overrides, multirun)
    combos = [list(c) for c in itertools.product(*lists)] if lists else [[]]
    return combos, len(combos)


def job_cover(overrides: list[str], strength: int = 1) -> list[list[str]]:
    """:func:`experiments.settings.cover.covering` of the command line's jobs (:func:`job_overrides`'s values): a
    few jobs that hold every value (``strength=1``) or every pair of values of two keys (``strength=2``).

    Raises:
        ConfigError: as :func:`job_overrides`; ValueError: strength not 1 or 2.
    """
    return covering(_checked(overrides, multirun=True), strength)


def compose_jobs(combos: list[list[str]], source: Source = DEFAULT, resolve: bool = True, each=None) -> list:
    """The config of each job (DictConfig; resolved unless ``resolve`` is False), or ``each(config)`` of it, job by
    job: an error ``each`` raises stops at that job, before the later ones are composed.

    Hydra composes once per distinct choice of config groups; each job's value overrides are then applied to a copy
    (:func:`apply_values`), so a sweep of thousands of jobs is composed in seconds. Works inside a running Hydra app
    too (the global Hydra is left as it was).

    Hydra's global state is one per process: compositions are serialized (:data:`_COMPOSING`), so that experiments
    run side by side in threads (experiments/sweeps/launch.py ``side_by_side``) never clear or restore it under each
    other (one of them left it initialized after both ended).

    Raises:
        ConfigError: naming a bad override.
    """
    with _COMPOSING:
        if GlobalHydra.instance().is_initialized():
            saved = GlobalHydra.instance().hydra
            GlobalHydra.instance().clear()
            try:
                return compose_jobs(combos, source, resolve, each)
            finally:
                GlobalHydra.instance().initialize(saved)
        with initialize_config_dir(
            config_dir=str(Path(source.primary_dir).absolute()), version_base="1.3", job_name="precheck"
        ):
            return _all(combos, source, resolve, each)


_COMPOSING = threading.RLock()
"""Held while :func:`compose_jobs` uses Hydra's global state (re-entrant: it calls itself once)."""


def _is_group(source: Source, override: str) -> bool:
    """True for an override that selects a config (``problem=...``, ``hydra/...``) or sets Hydra's own config:
    those are composed; every other override sets a value and is applied to the composed config."""
    key = override.split("=", 1)[0].lstrip("+~").split("@")[0]
    return key in source.groups or key.startswith("hydra")


def _all(combos: list[list[str]], source: Source, resolve: bool, each=None) -> list:
    bases: dict[tuple, object] = {}
    parsed: dict[str, Override] = {}
    out = []
    for combo in combos:
        groups = tuple(o for o in combo if _is_group(source, o))
        if groups not in bases:
            bases[groups] = _composed(list(groups), source)
        cfg = copy.deepcopy(bases[groups])
        for o in combo:
            if o in groups:
                continue
            if o not in parsed:
                parsed[o] = _parse([o])[0]
            try:
                apply_values(cfg, parsed[o])
            except Exception as exc:
                raise _explain(source, o, exc, cfg) from None
        if resolve:
            try:
                cfg = OmegaConf.create(OmegaConf.to_container(cfg, resolve=True))
            except Exception as exc:
                raise _unresolved(combo, exc) from None
        try:
            out.append(cfg if each is None else each(cfg))
        except ConfigError as exc:
            raise as_typed(exc, combo) from None
    return out


def _unresolved(combo: list[str], exc: Exception) -> ConfigError:
    """A config that does not resolve (an interpolation to a key that is not there), named by the override behind
    it: the one that sets the failing key, else one holding an interpolation or deleting a key (``~key``)."""
    msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    key = str(getattr(exc, "full_key", "") or "")
    named = next((o for o in combo if key and o.split("=", 1)[0].lstrip("+~") == key), None)
    named = named or next((o for o in combo if "${" in o or o.startswith("~")), None)
    lookup = re.search(r"Interpolation key '([^']+)' not found", msg)
    if named is None and lookup:  # a table indexed by a value the user gave: point=p99 -> points[p99].workers
        parts = [p for p in re.split(r"[.\[\]]", lookup.group(1)) if p]
        for o in combo:
            value = o.split("=", 1)[-1]
            if not o.startswith("~") and value in parts[1:]:
                table = ".".join(parts[: parts.index(value)])
                return ConfigError(f"{o}: not a key of the experiment's {table} (the config reads {key} there)")
    if named is not None:  # as the user wrote it, without the escapes of Hydra's override strings
        named = re.sub(r"\\([{}:=,\\])", r"\1", named).removesuffix("=null" if named.startswith("~") else "\0")
    if named is not None and named.startswith("~"):
        return ConfigError(f"{named}: a key the config needs ({msg.replace('Interpolation key', 'key')})")
    return ConfigError(f"{named or key or ' '.join(combo)}: {msg}")


def apply_values(cfg, override: Override) -> None:
    """Apply one value override to a composed config as Hydra does after composing: ``key=v`` changes an existing
    key, ``+key=v`` adds a new one, ``++key=v`` adds or changes, ``~key`` deletes.

    Raises:
        KeyError: ``key=v`` on a key that does not exist, ``+key=v`` on one that does, ``~key`` on a missing one.
    """
    key, value = override.key_or_group, override.value()
    exists = OmegaConf.select(cfg, key, default=_ABSENT, throw_on_missing=False) is not _ABSENT
    if override.is_delete():
        if not exists:
            raise KeyError(f"Key '{key}' is not in the config")
        parent, _, leaf = key.rpartition(".")
        with open_dict(cfg):
            del (OmegaConf.select(cfg, parent) if parent else cfg)[leaf]
    elif override.is_add() and exists and not isinstance(value, (dict, list)):
        raise KeyError(f"Key '{key}' exists: set it with {override.input_line[1:]}")
    elif override.is_add() or override.is_force_add():
        OmegaConf.update(cfg, key, value, merge=True, force_add=True)
    elif not exists:
        raise KeyError(f"Key '{key}' is not in the config")
    else:
        OmegaConf.update(cfg, key, value, merge=True)


_ABSENT = object()


def _composed(combo: list[str], source: Source):
    extra = source.extra_overrides()
    plugin = [o for o in combo if o.lstrip("+~").startswith(("hydra.launcher", "hydra.sweeper"))]
    try:  # the launcher's and sweeper's keys: Hydra adds any +key to them (hydra_own.check_plugin_keys)
        if plugin:
            kept = [o for o in combo if o not in plugin]
            check_plugin_keys(plugin, compose(source.config_name, extra + kept, return_hydra_config=True).hydra)
        return compose(config_name=source.config_name, overrides=extra + combo)
    except ConfigError:
        raise
    except Exception as exc:
        for o in combo:  # find the override that fails on its own
            try:
                compose(config_name=source.config_name, overrides=extra + [o])
            except Exception as single:
                raise _explain(source, o, single) from None
        raise ConfigError(f"{' '.join(combo) or source.config_name}: {str(exc).strip().splitlines()[0]}") from None


def group_values(overrides: list[str], source: Source = DEFAULT) -> None:
    """A config group (a folder of conf/: ``algorithm``, ``problem``, ``hydra/launcher``, ...) takes one option per
    job: Hydra merges the options of a list (``algorithm=[async_sgd,apam]``) into one config, which ran as neither.

    Raises:
        ConfigError: ``algorithm=[async_sgd,apam]: choose one option of the config group (a sweep: -m ...)``.
    """
    for o in _parse(overrides):
        if o.key_or_group.split("/")[0] not in source.groups:
            continue
        value = o.value()
        values = getattr(value, "list", None) if o.is_sweep_override() else [value]
        for v in values or []:
            if v is None and not o.is_delete():  # Hydra: "Config group override must be ... Got NoneType"
                key = o.get_key_element().lstrip("+~")
                raise ConfigError(  # ~delay is no way out: the run needs a delay option (problem, engine too)
                    f"{o.input_line}: a config group takes one of its options ({_options(source, key)}); "
                    f"leave {key}= out for its default"
                )
            if isinstance(v, list):
                key = o.get_key_element()
                raise ConfigError(
                    f"{o.input_line}: choose one option of the config group "
                    f"(a sweep: -m {key}={','.join(str(x) for x in v)})"
                )


def precheck(overrides: list[str], multirun: bool, source: Source = DEFAULT) -> list:
    """Compose every job the command line asks for and build its settings, job by job (the first bad one stops it,
    before the later ones are composed), then check the results folders, the
    device, the data, the calibration file and the master address of every job, and build each of a sweep's distinct
    problems once (preflight.check_problems: one job's bad data stops the sweep before any job runs); return the
    jobs' settings, in launch order. Nothing is written under results_dir.

    Raises:
        ConfigError: the first bad override, value, folder or missing data set, as one line naming it.
    """
    group_values(overrides, source)
    combos, _ = job_overrides(overrides, multirun)
    settings = compose_jobs(combos, source, each=build_settings)  # job by job: the first bad one stops it
    for folder in sorted({s.results_dir for s in settings}):
        check_writable(folder)
    check_places(settings, combos)
    for device in sorted({s.device for s in settings}):
        check_device(device)
    check_data(settings)
    check_calibration(settings)
    check_traces(settings)
    check_backend(settings)
    check_local_processes(settings)
    check_master_addr(settings)
    check_problems(settings)
    return settings
