"""Which clock a time claim rests on, and whether model_validation backs it.

A time on the simulated clock is a prediction. It is labelled ``prediction`` with model_validation's error for
those runs, unless model_validation backs the clock for them (:func:`clock_backing`): over the validation rows of
the runs' own compute mode, problems, protocol and modelled engine, the mean |error| of the ``sitting`` prediction
(the clock with costs measured in the same sitting as the measured run, experiments/clock/predict.py) against the
measured time per epoch is <= ``CLOCK_TOLERANCE``, and the rows reach the runs' largest worker count. Measured
(``wall``) times need no label.

The validation rows (:func:`validation_rows`) are one per measured setting of model_validation: the measured time
per epoch and the three predictions of it (``pred``, ``sitting``, ``twin``; plots.validation.prediction_rows). An
older model_validation, whose predictions were separate simulated runs of the same settings, gives its pairs
(plots.validation.pair_clocks) as ``pred`` rows (the clock with the stored calibration) without ``sitting`` or
``twin``: it never backs the clock.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from plots.validation import (
    KINDS,
    ROW,
    has_predictions,
    overrun_flagged,
    pair_clocks,
    prediction_rows,
)

CLOCK_TOLERANCE = 0.10  # model_validation backs the simulated clock when its sitting mean |relative error| <= this
PREDICTION = "prediction"
"""The label of simulated times that model_validation does not back."""
ERROR_COLUMNS = [f"{k}_err" for k in KINDS]


def protocol_of(algorithms) -> list[str]:
    """``sync`` for sync AMSGrad, ``async`` for every other method, per entry of ``algorithms``."""
    return ["sync" if str(a).startswith("sync") else "async" for a in algorithms]


def validation_rows(summary: pd.DataFrame) -> pd.DataFrame:
    """model_validation's rows from its summary: :func:`plots.validation.prediction_rows` where the measured runs
    carry their predictions, else the measured/simulated pairs of an older summary (overrun-flagged measured runs
    left out) as ``pred`` rows (``pred_err`` = the pair's percent error; ``sitting_err``, ``twin_err`` NaN). Columns:
    plots.validation.ROW + ``measured_s`` + ``<kind>_s`` and ``<kind>_err`` (percent) for each kind."""
    if summary is None or summary.empty:
        return prediction_rows(None)
    if "status" in summary:
        summary = summary[summary["status"] == "ok"]
    if has_predictions(summary):
        return prediction_rows(summary)
    s = summary[~((summary["clock"] == "wall") & overrun_flagged(summary))]
    pairs = pair_clocks(s)
    out = pairs.assign(
        measured_s=pairs["measured_s"],
        pred_s=pairs["simulated_s"],
        pred_err=pairs["percent_error"],
        sitting_s=math.nan,
        sitting_err=math.nan,
        twin_s=math.nan,
        twin_err=math.nan,
    )
    return out[ROW + ["n", "measured_s"] + [f"{k}_{x}" for k in KINDS for x in ("s", "err")]]


def read_validation(results_dir: str | Path | None) -> pd.DataFrame:
    """:func:`validation_rows` of ``<results_dir>/model_validation/summary.csv``; empty without it."""
    path = Path(results_dir) / "model_validation" / "summary.csv" if results_dir is not None else None
    if path is None or not path.exists():
        return validation_rows(pd.DataFrame())
    return validation_rows(pd.read_csv(path))


def select(rows: pd.DataFrame, compute: str | None = None, problems=None, protocols=None, engines=None) -> pd.DataFrame:
    """The validation ``rows`` of a compute mode (``real``, ``emulated``), problems, protocols (``sync``/``async``)
    and measured engines (the transport a simulated run modelled); each filter only when given."""
    if rows.empty:
        return rows
    keep = pd.Series(True, index=rows.index)
    if compute is not None:
        keep &= rows["compute"].astype(str) == compute
    if problems:
        keep &= rows["problem"].astype(str).isin(list(problems))
    if protocols:
        keep &= pd.Series(protocol_of(rows["algorithm"]), index=rows.index).isin(list(protocols))
    if engines:
        keep &= rows["engine"].astype(str).isin(list(engines))
    return rows[keep]


def mean_errors(rows: pd.DataFrame) -> dict:
    """Mean |error| (fraction, not percent) of each prediction kind over ``rows``; NaN for a kind without values."""
    return {
        k: (float(rows[f"{k}_err"].abs().dropna().mean()) / 100.0 if rows[f"{k}_err"].notna().any() else math.nan)
        for k in KINDS
    }


def errors_text(rows: pd.DataFrame) -> str:
    """``mean abs. error sitting 4.1%, pred 6.0%, twin 2.0%`` over ``rows`` (a kind without values: ``--``)."""
    err = mean_errors(rows)
    return "mean abs. error " + ", ".join(
        f"{k} " + ("--" if math.isnan(err[k]) else f"{100 * err[k]:.1f}%") for k in ("sitting", "pred", "twin")
    )


def _backing(
    rows: pd.DataFrame, compute, max_workers, problems, protocols=None, engines=None
) -> tuple[bool, float | None, pd.DataFrame]:
    """:func:`clock_backing` on given validation rows; also returns the rows that counted."""
    rows = select(rows, compute, problems, protocols, engines)
    err = mean_errors(rows)["sitting"] if len(rows) else math.nan
    if math.isnan(err):
        return False, None, rows
    reach = max_workers is None or int(rows["workers"].max()) >= int(max_workers)
    return err <= CLOCK_TOLERANCE and reach, err, rows


def clock_backing(
    results_dir: str | Path,
    compute: str | None = None,
    max_workers: int | None = None,
    problems: list[str] | None = None,
) -> tuple[bool, float | None]:
    """Does model_validation back the simulated clock? (backed, the ``sitting`` mean |relative error| or None).

    Over the validation rows of ``<results_dir>/model_validation`` (:func:`read_validation`) of ``compute``
    (``real`` or ``emulated``) and ``problems`` when given: backed when the sitting prediction's mean |error| <=
    CLOCK_TOLERANCE and, with ``max_workers``, the rows reach that many workers (a curve to P = 64 is not backed by
    P <= 2). (False, None) without a row with a sitting prediction.
    """
    return _backing(read_validation(results_dir), compute, max_workers, problems)[:2]


def clock_label(summary: pd.DataFrame, results_dir: str | Path | None) -> str:
    """'' for measured times; for times on the simulated clock, what validates them: ``simulated clock backed by
    model_validation (...)`` when model_validation's rows of the runs' own compute mode (``real`` unless the runs
    emulate it), problems, protocols (sync / async) and modelled engine (``transport``) have a sitting mean |error|
    within CLOCK_TOLERANCE and reach the runs' largest worker count, else ``prediction`` with model_validation's
    errors (sitting, pred, twin) and worker range for those rows, where it has any."""
    if summary.empty or "simulated" not in set(summary.get("clock", pd.Series(dtype=str)).astype(str)):
        return ""
    sim = summary[summary["clock"].astype(str) == "simulated"]
    modes = sim["compute"].fillna("real").astype(str) if "compute" in sim else pd.Series("real", index=sim.index)
    mode = "emulated" if (modes == "emulated").all() else "real"
    top = int(pd.to_numeric(sim["workers"], errors="coerce").max())
    if results_dir is None:
        return PREDICTION
    problems = sorted(set(sim["problem"].astype(str))) if "problem" in sim else []
    protocols = sorted(set(protocol_of(sim["algorithm"]))) if "algorithm" in sim else None
    engines = sorted(set(sim["transport"].fillna("shared_memory").astype(str))) if "transport" in sim else None
    rows = read_validation(results_dir)
    if rows.empty:
        return PREDICTION
    backed, _, rows = _backing(rows, mode, top, problems, protocols, engines)
    what = f"{mode} compute, {'/'.join(protocols or ['any'])} on {'/'.join(engines or ['any engine'])}"
    if backed:
        return (
            f"simulated clock backed by model_validation ({what}, at P <= {int(rows['workers'].max())}: "
            f"{errors_text(rows)})"
        )
    if rows.empty:
        return PREDICTION + (
            f"; model_validation has no {mode}-compute {'/'.join(protocols or [])} row on "
            f"{'/'.join(engines or ['any engine'])} for {', '.join(problems)}"
        )
    return PREDICTION + f"; model_validation, {what}, at P <= {int(rows['workers'].max())}: {errors_text(rows)}"
