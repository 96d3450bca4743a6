"""Step sizes tuned on one seed (``lr_tuning_seed``; issue 14 item 4 within issue 13's time budget).

An experiment that sweeps a step-size grid (``algorithm.lr_factor``) and several seeds runs every factor of the grid
for the tuning seed only; every other seed runs only the factor that reached the target first on the tuning seed.
With a grid of F factors and S seeds that is F + S - 1 runs per setting instead of F x S (async_methods, long
profile: 800 runs instead of 1,440). The choice is the same as the report's (:func:`best_factor`): the shortest time to
target on the tuning seed, a run that never reached it counting as infinite, ties to the smaller factor.

A setting is everything a run's command line sets except the factor and the seed (:func:`setting_key`); the tuning
seed's runs write it in the summary's ``tuning_setting`` column, where the other seeds look it up.
``experiments.reproduce`` runs the tuning seed's sweep before the others' (:func:`split_sweep`).
"""
from __future__ import annotations

import csv
import math
from pathlib import Path

FACTOR_KEY = "algorithm.lr_factor"


def setting_key(overrides: list[str], tuning_seed: int) -> str:
    """The run id (``experiments.store.sink.make_run_id``) of ``overrides`` without the step-size factor, at the tuning
    seed: the same string for every factor and every seed of one setting."""
    from experiments.store.sink import make_run_id

    kept = [o for o in overrides if o.split("=", 1)[0].lstrip("+~") != FACTOR_KEY]
    return make_run_id(kept, tuning_seed)


def time_to_target(row: dict) -> float:
    """A summary row's time to target (seconds; ``time_to_target_s``, a string or a number); infinite when the run
    did not reach it or did not end ``ok`` (a run that diverged counts as never reaching it). The one rule for the
    tuning seed's choice and the report's (plots/async_methods.best_times)."""
    try:
        t = float(row.get("time_to_target_s") or "nan")
    except ValueError:
        t = math.nan
    return t if row.get("status") == "ok" and math.isfinite(t) else math.inf


def best_factor(rows: list[dict]) -> float | None:
    """The factor with the shortest time to target among ``rows`` (summary rows of one setting and one seed, as
    dicts of strings or numbers; ``status`` ok or diverged); ties go to the smaller factor. None without rows."""
    done = [r for r in rows if r.get("status") in ("ok", "diverged")]
    if not done:
        return None
    return min(done, key=lambda r: (time_to_target(r), float(r["lr_factor"])))["lr_factor"]


def tuned_factor(summary_path: Path, setting: str, tuning_seed: int) -> float | None:
    """The factor the tuning seed's finished runs of ``setting`` chose (:func:`best_factor`) as a float, read from
    ``summary_path`` (summary.csv); None when that seed has no finished run of the setting yet."""
    if not Path(summary_path).exists():
        return None
    with open(summary_path, newline="") as f:
        rows = [r for r in csv.DictReader(f)
                if r.get("tuning_setting") == setting and str(r.get("seed")) == str(tuning_seed)]
    best = best_factor(rows)
    return None if best is None else float(best)


def split_sweep(overrides: list[str], seeds: list[int], tuning_seed: int) -> list[list[str]]:
    """A sweep's command line as the tuning seed's sweep, then the other seeds' (one sweep when no other seed)."""
    others = [s for s in seeds if s != tuning_seed]
    first = overrides + [f"seed={tuning_seed}"]
    return [first] + ([overrides + ["seed=" + ",".join(str(s) for s in others)]] if others else [])
