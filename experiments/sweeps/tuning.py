"""Step sizes (and Ringmaster's R, Rennala's S) tuned per setting on a seed of their own (``lr_tuning_seed``).

With ``lr_tuning_seed`` set, a sweep's job at that seed does not run once: it tunes its setting, and every other
seed's job runs the setting at the values chosen. A *setting* is everything a job's command line sets except the
tuned keys and the seed (:func:`setting_key`): per method, problem, worker count and compute-time model.

The tuning seed's job (:func:`tune`), in trials that are ordinary runs below ``<experiment>/tuning/`` (their own
``summary.csv`` and ``runs/``, so no report or figure mixes them with the reported runs):

1. runs the step factors ``algorithm.lr_factor`` = ratio^-steps .. ratio^steps (``tuning.ratio``, ``tuning.steps``:
   conf/config.yaml; 4^-3 .. 4^3 by default, centred on the method's default step);
2. while the best factor tried is the smallest (the largest) one, runs the next factor beyond it, up to
   ``tuning.extend`` more on each side (:func:`next_exponent`); a choice still at an end is recorded as such
   (``at_edge``: ``low`` or ``high``) and the report names it;
3. for a policy with a size (Ringmaster's R, Rennala's S), after the step: at the chosen factor, the sizes
   ``tuning.policy_sizes`` capped at P (the default, P, is the step's own trial), and chooses among them.

The choice (:func:`choose`): the shortest time to the problem's ``target_loss`` (``time_to_target_s``: the run must
stay at or below it, experiments.store.summary.crossing); ties -- every trial that never reached it, or equal times
-- by the training loss reached at the end of the budget, then by the run's time; never by the size of the step
(ties to the smaller factor pushed choices to the grid's edge). A run that diverged or failed reached
nothing and no loss. Only if all of that is equal, the value nearest the default wins.

The choices land in ``<experiment>/tuning.csv`` (:data:`CHOICE_COLUMNS`, one row per setting), which the other
seeds' jobs read (:func:`read_choice`); a rerun skips finished trials, so an interrupted tuning continues where it
stopped, extension included. ``experiments.reproduce`` runs the tuning seed's sweep before the others'
(:func:`split_sweep`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from experiments.errors import ConfigError
from experiments.store.run_id import make_run_id
from experiments.store.table import read_rows, upsert_row

FACTOR_KEY = "algorithm.lr_factor"
POLICY_SIZE = {"ringmaster": "R", "rennala": "S"}
"""The size each policy's tuning varies: ``algorithm.policy.<key>``."""
TUNED_KEYS = (FACTOR_KEY, "algorithm.policy.R", "algorithm.policy.S")
TRIALS_DIR = "tuning"
"""Trials go to ``<results_dir>/<experiment>/tuning/`` (runs/ and summary.csv, as an experiment folder)."""
CHOICES_FILE = "tuning.csv"
CHOICE_COLUMNS = [
    "setting",
    "experiment",
    "problem",
    "algorithm",
    "workers",
    "straggler_sigma",
    "straggler_slowdown",
    "compute_spread",
    "compute_law",
    "tuning_seed",
    "target_loss",
    "lr_factor",
    "policy",
    "R",
    "S",
    "at_edge",
    "factors_tried",
    "policy_tried",
    "trials",
    "time_to_target_s",
    "final_train_loss",
]
"""tuning.csv: the setting, what identifies it, the tuning seed and target, the chosen ``lr_factor`` and policy size
(``R`` for Ringmaster, ``S`` for Rennala, empty when not tuned), ``at_edge`` (``low``/``high`` when the chosen factor is
the smallest / largest tried after the extension reached its limit, else empty), the factors and sizes tried
(``;``-separated), the number of trials, and the chosen trial's time to target (seconds) and final training loss
(nats)."""


def fmt(value: float) -> str:
    """A tuned value as its command-line override writes it (12 significant digits: ``0.015625``, ``64``)."""
    return format(float(value), ".12g")


def setting_key(overrides: list[str], tuning_seed: int) -> str:
    """The run id (``experiments.store.run_id.make_run_id``) of ``overrides`` without the tuned keys, at the tuning
    seed: the same string for every trial and every seed of one setting."""
    kept = [o for o in overrides if o.split("=", 1)[0].lstrip("+~") not in TUNED_KEYS]
    return make_run_id(kept, tuning_seed)


def _num(row: dict, key: str) -> float:
    try:
        v = float(row.get(key) if row.get(key) not in (None, "") else "nan")
    except (TypeError, ValueError):
        return math.nan
    return v


def time_to_target(row: dict) -> float:
    """A summary row's time to target (seconds; ``time_to_target_s``, a string or a number); infinite when the run
    did not reach it or did not end ``ok`` (a run that diverged never reached it for good)."""
    t = _num(row, "time_to_target_s")
    return t if row.get("status") == "ok" and math.isfinite(t) else math.inf


def outcome(row: dict) -> tuple[float, float, float]:
    """What a trial is judged by, smaller first: (time to target, final training loss, run time); each infinite
    when the run did not end ``ok``."""
    ok = row.get("status") == "ok"
    loss, t = _num(row, "final_train_loss"), _num(row, "time_s")
    return (
        time_to_target(row),
        loss if ok and math.isfinite(loss) else math.inf,
        t if ok and math.isfinite(t) else math.inf,
    )


def choose(trials: dict, distance: Callable[[float], float] = abs) -> object | None:
    """The value (a step factor's exponent or a policy size; ``trials`` maps it to its trial's summary row) with the
    best :func:`outcome`; all equal, the one with the smallest ``distance`` from the default, then the smaller.
    None without a trial that ended ok or diverged."""
    done = {v: r for v, r in trials.items() if r is not None and r.get("status") in ("ok", "diverged")}
    if not done:
        return None
    return min(done, key=lambda v: (*outcome(done[v]), distance(v), float(v)))


def next_exponent(tried: dict[int, dict], steps: int, extend: int) -> int | None:
    """The exponent k of the next step factor ratio^k to try, or None when the tuning of the step is done.

    ``tried`` maps the exponents tried to their trials' summary rows. First every exponent of the grid
    (-steps..steps) in order; then, while the best exponent (:func:`choose`) is the smallest or the largest tried,
    the next one beyond it, up to ``extend`` beyond each end of the grid."""
    for k in range(-steps, steps + 1):
        if k not in tried:
            return k
    best = choose(tried)  # exponents: the default step is k = 0
    if best is None:
        return None
    lo, hi = min(tried), max(tried)
    if best == hi and hi < steps + extend:
        return hi + 1
    if best == lo and lo > -(steps + extend):
        return lo - 1
    return None


@dataclass
class Choice:
    """The outcome of one setting's tuning: the chosen factor (and policy size), what was tried, the chosen trial."""

    setting: str
    factor: float
    policy_key: str = ""
    policy_value: int | None = None
    at_edge: str = ""
    factors_tried: list[float] = field(default_factory=list)
    policy_tried: list[int] = field(default_factory=list)
    trials: int = 0
    row: dict = field(default_factory=dict)

    def values(self) -> dict:
        """The config values a run of the setting takes: ``{"algorithm.lr_factor": f, "algorithm.policy.R": r}``."""
        out = {FACTOR_KEY: float(fmt(self.factor))}
        if self.policy_key and self.policy_value is not None:
            out[f"algorithm.policy.{self.policy_key}"] = int(self.policy_value)
        return out


def tune(settings, setting: str, run_trial: Callable[[dict], dict]) -> Choice:
    """Tune one setting (module docstring) through ``run_trial``, which runs one trial -- or finds it finished --
    with the given config values (``{key: value}``, the keys of :data:`TUNED_KEYS`) and returns its summary row.

    Args:
        settings: the tuning seed's RunSettings (``tuning``, ``workers``, ``algorithm.policy``).
        setting: the setting's key (:func:`setting_key`).
    """
    t = settings.tuning
    tried: dict[int, dict] = {}
    while (k := next_exponent(tried, t.steps, t.extend)) is not None:
        tried[k] = run_trial({FACTOR_KEY: float(fmt(t.ratio**k))})
    best_k = choose(tried)
    if best_k is None:
        raise RuntimeError(f"tuning {setting}: no trial ended ok or diverged")
    lo, hi = min(tried), max(tried)
    edge = "" if lo == hi else ("low" if best_k == lo else "high" if best_k == hi else "")
    factor = float(fmt(t.ratio**best_k))
    choice = Choice(
        setting,
        factor,
        at_edge=edge,
        factors_tried=[float(fmt(t.ratio**k)) for k in sorted(tried)],
        trials=len(tried),
        row=tried[best_k],
    )
    key = POLICY_SIZE.get(settings.algorithm.policy.name)
    if key and t.policy_sizes:
        default = getattr(settings.algorithm.policy, key) or settings.workers
        sizes = sorted({s for s in t.policy_sizes if s <= settings.workers} | {default})
        rows = {default: tried[best_k]}  # the step's trial ran at the default size
        for s in sizes:
            if s not in rows:
                rows[s] = run_trial({FACTOR_KEY: factor, f"algorithm.policy.{key}": s})
        chosen = choose(rows, lambda s: abs(math.log(s / default)))
        choice.policy_key, choice.policy_value, choice.policy_tried = key, int(chosen), sizes
        choice.trials += len(sizes) - 1
        choice.row = rows[chosen]
    return choice


def choice_row(choice: Choice, settings) -> dict:
    """The setting's row of tuning.csv (:data:`CHOICE_COLUMNS`)."""
    r = choice.row
    return {
        "setting": choice.setting,
        "experiment": settings.experiment_id,
        "problem": settings.problem.name,
        "algorithm": settings.algorithm.name,
        "workers": settings.workers,
        **{k: r.get(k, "") for k in ("straggler_sigma", "straggler_slowdown", "compute_spread", "compute_law")},
        "tuning_seed": settings.lr_tuning_seed,
        "target_loss": settings.problem.target_loss,
        "lr_factor": choice.factor,
        "policy": settings.algorithm.policy.name,
        **{k: choice.policy_value if choice.policy_key == k else "" for k in ("R", "S")},
        "at_edge": choice.at_edge,
        "factors_tried": ";".join(fmt(f) for f in choice.factors_tried),
        "policy_tried": ";".join(str(s) for s in choice.policy_tried),
        "trials": choice.trials,
        "time_to_target_s": r.get("time_to_target_s", ""),
        "final_train_loss": r.get("final_train_loss", ""),
    }


def write_choice(exp_dir: Path, row: dict) -> None:
    """Put the setting's row into ``<exp_dir>/tuning.csv`` (replacing an older one), under a file lock; a damaged
    file is set aside first (experiments/store/table.py :func:`read_rows`)."""
    upsert_row(Path(exp_dir) / CHOICES_FILE, "setting", row, CHOICE_COLUMNS, _choice_values)


def read_choice(exp_dir: Path, setting: str) -> dict | None:
    """The tuned values of ``setting`` from ``<exp_dir>/tuning.csv`` (``{key: value}``, as :meth:`Choice.values`),
    or None when the tuning seed has not tuned it yet. A damaged file (not a table, a choice that is no positive
    number) is set aside with a line saying so, and reads as no choice: the tuning seed's job writes it again.

    Raises:
        ConfigError: tuning.csv is a folder, a special file or unreadable.
    """
    rows = read_rows(Path(exp_dir) / CHOICES_FILE, "setting", _choice_values)
    row = next((r for r in rows if r.get("setting") == setting), None)
    return None if row is None else _choice_values(row)


def check_choice(values: dict, tuning, path: Path) -> None:
    """A choice read from tuning.csv (:func:`read_choice`) is one the tuner can make with ``tuning`` (the run's
    ``tuning`` settings): a step factor ratio^k, |k| <= steps + extend (an edited ``lr_factor=1e300`` ran the other
    seeds at it and each diverged, exit 0).

    Raises:
        ConfigError: naming the file, the value and the factors the tuner tries.
    """
    factor, reach = values[FACTOR_KEY], tuning.steps + tuning.extend
    k = math.log(factor) / math.log(tuning.ratio)
    if abs(k) > reach + 1e-9:
        raise ConfigError(
            f"{path}: lr_factor={factor:g} is not a factor the tuner tries ({tuning.ratio:g}^-{reach} .. "
            f"{tuning.ratio:g}^{reach}); a damaged or foreign row: remove it, or force=true tunes again"
        )


def _choice_values(row: dict) -> dict:
    """A tuning.csv row's tuned values; ValueError when a value is no positive finite number (a damaged file)."""
    factor = float(row["lr_factor"])
    if not (math.isfinite(factor) and factor > 0):
        raise ValueError(f"lr_factor={row['lr_factor']}: not a positive number")
    out = {FACTOR_KEY: factor}
    for key in ("R", "S"):
        if row.get(key) not in (None, ""):
            value = float(row[key])
            if not (math.isfinite(value) and value >= 1 and value == int(value)):
                raise ValueError(f"{key}={row[key]}: not a whole number >= 1")
            out[f"algorithm.policy.{key}"] = int(value)
    return out


def check_overrides(overrides: list[str], tuning_seed: int | None) -> None:
    """With a tuning seed, the tuned keys are the tuning's to set, not the command line's.

    Raises:
        ConfigError: ``algorithm.lr_factor`` (or ``algorithm.policy.R``/``S``) given with ``lr_tuning_seed``.
    """
    if tuning_seed is None:
        return
    for o in overrides:
        if o.split("=", 1)[0].lstrip("+~") in TUNED_KEYS:
            raise ConfigError(
                f"{o}: with lr_tuning_seed={tuning_seed} this key is tuned (tuning.* in "
                "conf/config.yaml: the step grid, its extension and the policy sizes), not set"
            )


def split_sweep(overrides: list[str], seeds: list[int], tuning_seed: int) -> list[list[str]]:
    """A sweep's command line as the tuning seed's sweep, then the other seeds' (one sweep when no other seed)."""
    others = [s for s in seeds if s != tuning_seed]
    rest = [o for o in overrides if o.split("=", 1)[0].lstrip("+~") != "seed"]  # each key once (the precheck)
    first = rest + [f"seed={tuning_seed}"]
    return [first] + ([rest + ["seed=" + ",".join(str(s) for s in others)]] if others else [])
