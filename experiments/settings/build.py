"""Build the typed settings of a run from a composed config, once: the one validation layer every entry path uses.

``build_settings(cfg)`` takes what Hydra composed (a DictConfig or a plain mapping), resolves it, leaves out the
lookup tables an experiment indexes into (:data:`EXPERIMENT_KEYS`), validates every key's type and bounds and the
rules between keys (:mod:`experiments.settings.schema`), builds the update rule once (it checks its own
hyperparameters), and returns a frozen :class:`~experiments.settings.schema.RunSettings`. Any failure is one
:class:`~experiments.errors.ConfigError` line naming the key and the value.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping
from pathlib import Path

from omegaconf import DictConfig, OmegaConf
from pydantic import ValidationError

from algorithms import build_rule
from experiments.errors import ConfigError
from experiments.settings.fields import MAX_NAME
from experiments.settings.schema import RunSettings
from experiments.training.delays import ComputeTimes

EXPERIMENT_KEYS = frozenset(
    {
        "profiles",
        "points",
        "point",
        "compute_models",
        "compute_model",
        "by_kind",
        "report",
        "real_engine",
        "reference_sweep",
    }
)
"""Top-level keys an experiment yaml (conf/experiment/*.yaml) may set to compute other keys from (a sweep's
``point`` picks workers and compute mode from ``points``; ``real_engine`` holds keys the real engine options read)
or to describe itself (``report``): what a run takes from them shows in the keys they set, so they are not settings
of the run."""
TAGGED_UNIONS = {"problem", "engine", "delay"}
"""Blocks whose class is chosen by a key (problem.kind, engine.name, delay.model): pydantic's error locations name
the chosen class after the block, which is not a config key."""


def resolved(cfg) -> dict:
    """The composed config as a plain, resolved dict (interpolations evaluated).

    Raises:
        ConfigError: an interpolation that does not resolve (names the key).
    """
    if isinstance(cfg, DictConfig):
        try:
            return OmegaConf.to_container(cfg, resolve=True)
        except Exception as exc:  # noqa: BLE001 -- OmegaConf's InterpolationResolutionError and friends
            raise ConfigError(str(exc).strip().splitlines()[0]) from None
    if isinstance(cfg, Mapping):
        return dict(cfg)
    raise TypeError(f"a composed config is a DictConfig or a mapping, not {type(cfg).__name__}")


def build_settings(cfg) -> RunSettings:
    """The run's :class:`RunSettings` from a composed config (DictConfig or mapping); see the module docstring.

    Raises:
        ConfigError: the first bad key, as ``key=value: why``.
    """
    data = {k: v for k, v in resolved(cfg).items() if k not in EXPERIMENT_KEYS}
    try:
        settings = RunSettings.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(describe_first(exc.errors())) from None
    make_rule(settings)
    _check_name("problem", settings.problem.name, {"kind": settings.problem.kind})
    _check_name("algorithm", settings.algorithm.name, _identity(settings.algorithm))
    if settings.delay.model == "timing" and settings.delay.law == "replay":
        try:  # the file's columns and its workers, read once here rather than when the run starts
            ComputeTimes.of_delay(settings.workers, settings.delay, seed=0)
        except ValueError as exc:
            raise ConfigError(str(exc).splitlines()[0]) from None
    return settings


def _identity(alg) -> dict:
    """What an algorithm option is, beyond its hyperparameters and policy (a policy set on an option keeps its name):
    its protocol and update rule."""
    return {"protocol": alg.protocol, "rule": alg.rule}


@functools.cache
def _option(group: str, name: str):
    """conf/<group>/<name>.yaml as OmegaConf loads it (unresolved), None when there is none or it does not load; read
    once per process (every job of a sweep builds its settings, each asking for its problem and algorithm)."""
    from omegaconf import OmegaConf

    from experiments.settings.source import DEFAULT

    option = Path(DEFAULT.primary_dir) / group / f"{name}.yaml"
    try:
        return OmegaConf.load(option) if option.is_file() else None
    except Exception:  # noqa: BLE001 -- a name too long for a file, or an option file Hydra reports when chosen
        return None


def _check_name(group: str, name: str, identity: dict) -> None:
    """``<group>.name`` (a name of the user's choosing: a LIBSVM problem's, a variant's) is not the name of another
    option of ``group`` that is something else: ``problem=logreg_fmnist problem.name=lenet5_fmnist`` recorded a
    logistic regression as LeNet5, and the report judged it as one.

    Raises:
        ConfigError: ``<group>.name=<name>: the name of another <group> option ...``, or a name longer than
            :data:`~experiments.settings.fields.MAX_NAME` characters (a table's cell, a line of a report).
    """
    if len(name) > MAX_NAME:
        raise ConfigError(f"{group}.name={name[:20]}...: {len(name)} characters, at most {MAX_NAME}")
    other = _option(group, name)
    if other is None:
        return
    try:
        differs = [k for k, v in identity.items() if OmegaConf.select(other, k, default=v) != v]
    except Exception:  # noqa: BLE001 -- an interpolation that needs the whole config: not comparable here
        return
    if differs:
        raise ConfigError(
            f"{group}.name={name}: the name of another {group} option ({group}={name}, another "
            f"{differs[0]}); choose {group}={name}, or a name of your own"
        )


def make_rule(settings: RunSettings):
    """The run's update rule: :func:`algorithms.build_rule` with the algorithm's hyperparameters (``lr_factor``
    applied).

    Raises:
        ConfigError: a hyperparameter the rule rejects (``algorithm: <the rule's message>``).
    """
    alg = settings.algorithm
    hp = alg.hyperparameters
    if hp.get("lr_schedule") == "inv_sqrt" and hp.get("alpha_max") is None:
        raise ConfigError(
            "algorithm.alpha_max=null: lr_schedule=inv_sqrt needs its cap (alpha_k = min(lr / sqrt(k), "
            "alpha_max), the paper's Sec. 5.1 rule); without it the first step is lr itself"
        )
    scaled = [k for k in ("lr", "alpha_max") if isinstance(hp.get(k), float) and not math.isfinite(hp[k])]
    if scaled and alg.lr_factor != 1.0:  # the product overflowed: named by the factor the user gave
        raise ConfigError(f"algorithm.lr_factor={alg.lr_factor:g}: {scaled[0]} x lr_factor is not a finite number")
    try:
        return build_rule(alg.rule, **hp)
    except ValueError as exc:
        raise ConfigError(f"algorithm: {exc}") from None


# ---------------------------------------------------------------------- one line per pydantic error
_PLAIN = {
    "int_type": "must be an integer",
    "int_parsing": "must be an integer",
    "int_from_float": "must be an integer",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "finite_number": "must be a finite number",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "string_type": "must be a string",
    "string_pattern_mismatch": "must be one line of printable text (no newline, tab or other control character)",
    "extra_forbidden": "no such config key",
    "missing": "is required",
    "dict_type": "must be a mapping",
    "tuple_type": "must be a list",
    "list_type": "must be a list",
    "model_type": "must be a mapping",
}


def describe_first(errors: list[dict]) -> str:
    """One line for the first key that pydantic's ``errors`` name: :func:`describe` of its first error; a value that
    none of a union's members takes (``engine.cores``: an integer, ``dedicated`` or null) gets each member's reason,
    joined by ``or``."""
    key = _key(errors[0])
    whys = [describe(e).split(": ", 1)[1] for e in errors if _key(e) == key and e.get("type") != "value_error"]
    line = describe(errors[0])
    if len(whys) > 1:
        line = line.split(": ", 1)[0] + ": " + " or ".join(dict.fromkeys(whys))
    return line


_FIELD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _key(error: dict) -> str:
    """The key an error is about, dotted as on the command line: the member classes of a tagged union and the member
    types of a plain union (``constrained-int``, ``literal['dedicated']``, ``none``), which pydantic puts in ``loc``,
    left out."""
    loc = list(error.get("loc", ()))
    if len(loc) >= 2 and loc[0] in TAGGED_UNIONS and isinstance(loc[1], str):
        loc.pop(1)  # the class the tag chose, not a key
    loc = [p for p in loc if isinstance(p, int) or (_FIELD.match(p) and p not in UNION_MEMBER_NAMES)]
    return "".join(f"[{p}]" if isinstance(p, int) else (f".{p}" if i else str(p)) for i, p in enumerate(loc))


UNION_MEMBER_NAMES = {"int", "float", "str", "bool", "none", "list", "dict", "tuple"}
"""Names pydantic gives a plain union's member types in an error's ``loc`` (none is a field name of the schema)."""


def describe(error: dict) -> str:
    """One line for one pydantic error: ``key=value: why``, the key dotted as on the command line (:func:`_key`);
    a missing key: ``key: is required`` (its input is the mapping around it, not a value)."""
    key = _key(error)
    kind, ctx, value = error.get("type", ""), error.get("ctx") or {}, error.get("input")
    if kind == "value_error":  # our own validators name the key and the value themselves
        return re.sub(r"^Value error, ", "", error["msg"])
    if kind == "missing":
        return f"{key}: is required"
    if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        op = {"greater_than": ">", "greater_than_equal": ">=", "less_than": "<", "less_than_equal": "<="}[kind]
        bound = next(iter(ctx.values()))
        bound = f"{bound:g}" if isinstance(bound, float) else bound
        why = (
            f"must be {'an integer' if isinstance(bound, int) and isinstance(value, int) else 'a number'} {op} {bound}"
        )
    elif kind == "literal_error":
        why = f"must be {ctx.get('expected', '').replace(chr(39), '')}"
    elif kind == "union_tag_invalid":
        why = f"must be one of {ctx.get('expected_tags', '').replace(chr(39), '')}"
        value = ctx.get("tag", value)
    elif kind in ("too_long", "too_short"):
        why = f"must have {ctx.get('max_length', ctx.get('min_length'))} items"
    else:
        why = _PLAIN.get(kind, error.get("msg", "is not valid"))
        if isinstance(value, str) and kind in ("int_type", "float_type", "bool_type"):
            if _looks_typed(value):
                return f"{key}='{value}': {why}, not a quoted string"  # '4' quoted on the command line is text
            if _decimal(value) is not None:  # 02: Hydra's grammar reads a leading zero as text
                return (
                    f"{key}={value}: {why} (Hydra reads a number with a leading zero as text: write {_decimal(value)})"
                )
    return f"{key}={_show(value)}: {why}"


def _looks_typed(text: str) -> bool:
    """A string that Hydra would have read as a number or a boolean without its quotes (``'4'``, ``'true'``; not
    ``02``, which its grammar reads as text)."""
    from experiments.settings.grammar import read_value

    parsed = read_value(text)
    return parsed is not None and isinstance(parsed.value(), (bool, int, float))


def _decimal(text: str) -> str | None:
    """``text`` as the number it spells with its leading zeros dropped (``02`` -> ``2``, ``007.5`` -> ``7.5``), or
    None when it spells no number."""
    if not re.fullmatch(r"[+-]?[0-9][0-9.eE+-]*", text.strip()):
        return None  # Infinity, NaN: words float() reads
    try:
        number = float(text)
    except ValueError:
        return None
    return str(int(number)) if re.fullmatch(r"[+-]?[0-9]+", text.strip()) else repr(number)


def _show(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {_show(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_show(v) for v in value) + "]"
    return str(value)


def as_typed(exc: ConfigError, combo: list[str]) -> ConfigError:
    """A message about ``key=<value as Hydra read it>`` for a key the command line set names the value as typed:
    ``workers=2.: must be an integer`` (not ``2.0``), ``algorithm.lr=1e308`` (not ``1e+308``); an interpolation also
    says what it resolved to (``workers=${epochs} (= 0.5): ...``); a string key given what Hydra reads as another type
    (``problem.path=1e-3``, a float) says how to quote it. A problem's own message behind its name
    (``problem=logreg_rcv1like: problem.nnz_per_row=500.0: ...``, from :func:`preflight.make_problem`) too."""
    message, head = str(exc), ""
    if message.startswith("problem=") and message.partition(": ")[2].startswith("problem."):
        head, _, message = message.partition(": ")
        head += ": "
    for o in combo:
        key, _, typed = o.lstrip("+~").partition("=")
        if not message.startswith(f"{key}="):
            continue
        shown, sep, why = message[len(key) + 1 :].partition(": ")
        if "${" in typed:
            return ConfigError(f"{head}{key}={typed} (= {shown}){sep}{why}")
        if (shown == typed and why != "must be a string") or typed[:1] in ("'", '"'):  # a quoted string: as read
            return exc
        if shown != typed and shown != _as_read(typed) and shown != repr(_read_number(typed)):
            return exc  # the message says more than the value ("none with ..."), or another value
        if why == "must be a string":
            why += f" (Hydra reads {typed} as another type: quote it, {key}='{typed}')"
        return ConfigError(f"{head}{key}={typed}{sep}{why}")
    return exc


def _read_number(typed: str) -> float | None:
    """``typed`` as the float a problem's own check shows it with (``500`` -> ``500.0``), None when it is no number."""
    try:
        return float(typed)
    except ValueError:
        return None


def _as_read(typed: str) -> str | None:
    """How a message shows the value Hydra reads from ``typed`` (experiments/settings/build.py ``_show``)."""
    from experiments.settings.grammar import read_value

    parsed = read_value(typed)
    return None if parsed is None or parsed.is_sweep_override() else _show(parsed.value())
