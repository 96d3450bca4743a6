"""Which clock a time claim rests on, and whether model_validation backs it.

Times on the simulated clock are labelled ``under the cost model`` unless model_validation backs the clock for
those runs (:func:`clock_backing`: over the validation pairs of the runs' own compute mode, problems, protocol and
modelled engine, the mean |error| of simulated against measured time per epoch <= ``CLOCK_TOLERANCE``, and the
pairs reach the runs' largest worker count). Measured (``wall``) times need no label.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from experiments.engines.emulation import OVERRUN_FLAG
from plots.validation import overrun_fraction, pair_clocks

CLOCK_TOLERANCE = 0.10   # model_validation backs the simulated clock when its mean |relative error| <= this
UNDER_COST_MODEL = "under the cost model"


def protocol_of(algorithms) -> list[str]:
    """``sync`` for sync AMSGrad, ``async`` for every other method, per entry of ``algorithms``."""
    return ["sync" if str(a).startswith("sync") else "async" for a in algorithms]


def validation_pairs(results_dir: str | Path) -> pd.DataFrame:
    """model_validation's measured/simulated pairs (:func:`plots.validation.pair_clocks`) without the measured runs
    whose emulated gradients overran on more than ``OVERRUN_FLAG`` of them (they do not test the clock); empty
    without the experiment."""
    path = Path(results_dir) / "model_validation" / "summary.csv"
    if not path.exists():
        return pd.DataFrame(columns=["compute", "workers", "percent_error"])
    s = pd.read_csv(path)
    s = s[s["status"] == "ok"]
    s = s[~((s["clock"] == "wall") & (overrun_fraction(s) > OVERRUN_FLAG))]
    return pair_clocks(s)


def clock_backing(results_dir: str | Path, compute: str | None = None, max_workers: int | None = None,
                  problems: list[str] | None = None) -> tuple[bool, float | None]:
    """Does model_validation back the simulated clock? (backed, mean |relative error| or None).

    Pairs each measured time per epoch of ``<results_dir>/model_validation`` (clock ``wall``) with the simulated one
    of the same problem, algorithm, workers and setting -- compute mode, emulated base seconds, the engine the clock
    modelled -- leaving out overrun-flagged runs (:func:`validation_pairs`); with ``compute`` (``real`` or
    ``emulated``) only the pairs of that compute mode count. Backed when the mean |error| <= CLOCK_TOLERANCE and, with
    ``max_workers``, the pairs reach that many workers (a curve to P = 64 is not backed by P <= 2); with ``problems``,
    only pairs of those problems count (LeNet5 curves are not backed by logistic regression). (False, None) without
    such pairs.
    """
    return _backing(validation_pairs(results_dir), compute, max_workers, problems)[:2]


def _backing(pairs: pd.DataFrame, compute, max_workers, problems, protocols=None,
             engines=None) -> tuple[bool, float | None, pd.DataFrame]:
    """:func:`clock_backing` on given validation pairs; also returns the pairs that counted. ``protocols``
    (``sync``/``async``) and ``engines`` (the measured engine = the transport a simulated run modelled), when
    given, keep only pairs of those."""
    if compute is not None and len(pairs):
        pairs = pairs[pairs["compute"] == compute]
    if problems and len(pairs):
        pairs = pairs[pairs["problem"].astype(str).isin(problems)]
    if protocols and len(pairs):
        pairs = pairs[pd.Series(protocol_of(pairs["algorithm"]), index=pairs.index).isin(protocols)]
    if engines and len(pairs):
        pairs = pairs[pairs["engine"].astype(str).isin(engines)]
    errs = pairs["percent_error"].abs().dropna() / 100.0
    if errs.empty:
        return False, None, pairs
    err = float(errs.mean())
    reach = max_workers is None or int(pairs["workers"].max()) >= int(max_workers)
    return err <= CLOCK_TOLERANCE and reach, err, pairs


def clock_label(summary: pd.DataFrame, results_dir: str | Path | None) -> str:
    """'' for measured times; for times on the simulated clock, what validates them: ``simulated clock backed by
    model_validation (...)`` when model_validation's pairs of the runs' own compute mode (``real`` unless the runs
    emulate it), problems, protocols (sync / async) and modelled engine (``transport``) are within CLOCK_TOLERANCE
    on average and reach the runs' largest worker count, else ``under the cost model`` with model_validation's error
    and worker range for those pairs, where it has any."""
    if summary.empty or "simulated" not in set(summary.get("clock", pd.Series(dtype=str)).astype(str)):
        return ""
    sim = summary[summary["clock"].astype(str) == "simulated"]
    modes = (sim["compute"].fillna("real").astype(str) if "compute" in sim else pd.Series("real", index=sim.index))
    mode = "emulated" if (modes == "emulated").all() else "real"
    top = int(pd.to_numeric(sim["workers"], errors="coerce").max())
    if results_dir is None:
        return UNDER_COST_MODEL
    problems = sorted(set(sim["problem"].astype(str))) if "problem" in sim else []
    protocols = sorted(set(protocol_of(sim["algorithm"]))) if "algorithm" in sim else None
    engines = sorted(set(sim["transport"].fillna("shared_memory").astype(str))) if "transport" in sim else None
    pairs = validation_pairs(results_dir)
    if pairs.empty:
        return UNDER_COST_MODEL
    backed, err, pairs = _backing(pairs, mode, top, problems, protocols, engines)
    where = (f"{mode} compute, {'/'.join(protocols or ['any'])} on {'/'.join(engines or ['any engine'])}, at "
             f"P <= {int(pairs['workers'].max())}: mean abs. error {100 * err:.1f}%" if err is not None else "")
    if backed:
        return f"simulated clock backed by model_validation ({where})"
    return UNDER_COST_MODEL + (f"; model_validation, {where}" if where else
                               f"; model_validation has no {mode}-compute {'/'.join(protocols or [])} row on "
                               f"{'/'.join(engines or ['any engine'])} for {', '.join(problems)}")
