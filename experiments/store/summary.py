"""The columns of a run's row in ``summary.csv`` (and the constant columns of its ``trace.csv`` rows).

One row per run, written by the runner (experiments/runner.py) also when the run diverged or failed (``status``
``ok``, ``diverged`` or ``failed`` and a ``message``). docs/INTERFACES.md lists every column with its unit.
"""

from __future__ import annotations

import math

from experiments.settings.schema import machine_cores

NAN = float("nan")


def constant_columns(settings, run_id: str) -> dict:
    """The columns that describe the run's setting, the same on every trace row and in its summary row."""
    s, d = settings, settings.delay
    timing = d.model == "timing"
    return {
        "experiment": s.experiment_id,
        "run_id": run_id,
        "problem": s.problem.name,
        "algorithm": s.algorithm.name,
        "engine": s.engine.name,
        "workers": s.workers,
        "delay_model": d.model,
        "max_delay": d.max_delay if d.model == "uniform" else (d.tau if d.model == "fixed" else 0),
        "tau": d.tau if d.model == "fixed" else (0 if d.model == "none" else NAN),
        "straggler_sigma": d.sigma if timing else 0.0,
        "straggler_slowdown": d.slowdown if timing else 1.0,
        "batch_size": s.batch_size,
        "seed": s.seed,
        "policy": s.algorithm.policy.name,
        "lr_factor": s.algorithm.lr_factor,
        "policy_R": NAN if s.algorithm.policy.R is None else s.algorithm.policy.R,
        "policy_S": NAN if s.algorithm.policy.S is None else s.algorithm.policy.S,
        "compute_spread": d.spread if timing else "equal",
        "compute_law": d.law if timing else "constant",
        "master_computes": bool(s.algorithm.master_computes),
        "agents": s.agents,
        "cores": cores_column(s),
        **compute_columns(s),
    }


def cores_column(settings) -> object:
    """``cores``: the cores the run's processes shared -- a real engine's: this machine's (measured runs share what
    the machine has); the simulated clock's: ``engine.cores`` (null: this machine's, as a number), or ``dedicated``
    (every process a core of its own)."""
    e = settings.engine
    if e.name != "simulated":
        return machine_cores()
    if e.cores == "dedicated":
        return "dedicated"
    return int(e.cores) if e.cores is not None else machine_cores()


def compute_columns(settings) -> dict:
    """``compute``: how a gradient's time is made -- ``real`` (computed, as long as it takes), ``emulated`` (a real
    engine waiting for targets, or a simulated clock whose gradient time is given: ``engine.costs.grad_s``);
    ``compute_base_s``: the given base seconds (NaN when calibrated or real); ``transport``: the real engine whose
    costs the row measured or (simulated) modelled. Together they pair measured and simulated rows."""
    e = settings.engine
    if e.name == "simulated" and e.compute != "emulated":
        base = e.costs.grad_s
        mode = "real" if base is None else "emulated"
    else:
        mode = e.compute
        base = e.compute_base_s if mode == "emulated" else None
    transport = e.transport if e.name == "simulated" else e.name
    return {"compute": mode, "compute_base_s": NAN if base is None else float(base), "transport": transport}


def crossing(rows: list[dict], target: float | None, keys: tuple[str, ...] = ("time_s", "updates")) -> dict | None:
    """When a run reached ``target`` for good: ``{key: value}`` of each of ``keys`` at the crossing, or None.

    The rule (docs/INTERFACES.md, "time to target"): the run must stay at or below the target from the crossing on,
    so the crossing follows the *last* evaluation point above the target (or with a non-finite loss); a run whose
    last point is above it never reached it, however low it dipped before. Between that point (a) and the next one
    (b, at or below the target) each key is interpolated linearly in the training loss:
    ``key = key_a + (L_a - target) / (L_a - L_b) * (key_b - key_a)``. A run at or below the target from its first
    point on reached it there. Evaluation points are of the full training set (recorder.py), in the order recorded.

    Args:
        rows: the run's trace rows, in order, each with ``train_loss`` and every key of ``keys`` (numbers).
        target: the training-loss target (nats); None: no target.
        keys: the columns to interpolate (default: seconds on the run's clock and master updates).
    """
    if target is None or not rows:
        return None
    first = len(rows)  # index of the first point of the final run of points at or below the target
    for i in range(len(rows) - 1, -1, -1):
        loss = float(rows[i]["train_loss"])
        if not loss <= target:  # above, or NaN
            break
        first = i
    if first == len(rows):
        return None
    b = rows[first]
    if first == 0:
        return {k: float(b[k]) for k in keys}
    a = rows[first - 1]
    la, lb = float(a["train_loss"]), float(b["train_loss"])
    w = (la - target) / (la - lb) if math.isfinite(la) and la > lb else 1.0
    return {k: float(a[k]) + w * (float(b[k]) - float(a[k])) for k in keys}


def summary_row(
    settings,
    run_id: str,
    rows: list[dict],
    result,
    status: str,
    message: str,
    num_train: int,
    probe: tuple[float, float] = (NAN, NAN),
    late_expected: float = NAN,
) -> dict:
    """The run's summary row.

    Args:
        settings: the run's RunSettings.
        run_id: its id.
        rows: its trace rows (the recorder's), possibly none.
        result: the engine's EngineResult (None when the run stopped before the engine returned).
        status: ``ok``, ``diverged`` or ``failed``; message: what happened.
        num_train: N, samples per epoch.
        probe: (speed probe now, the calibration's), seconds; wall-clock runs only.
        late_expected: late wake-ups the calibration expects for the run's emulated targets.
    """
    last = rows[-1] if rows else {}
    target = settings.problem.target_loss
    hit = crossing(rows, target) if status != "diverged" else None  # a diverged run did not stay below
    hist = result.histogram if result is not None else {}
    n_upd = sum(hist.values())
    epochs = (result.samples / num_train) if result is not None else last.get("epoch", NAN)
    time_s = result.time_s if result is not None else last.get("time_s", NAN)

    def opt(name):
        v = getattr(result, name, None) if result is not None else None
        return NAN if v is None else v

    return {
        **{k: last.get(k, v) for k, v in constant_columns(settings, run_id).items()},
        "clock": settings.engine.clock,
        "epochs": epochs,
        "updates": result.updates if result is not None else last.get("updates"),
        "gradients": result.gradients if result is not None else last.get("gradients"),
        "time_s": time_s,
        "time_per_epoch_s": _time_per_epoch(result, time_s, epochs, num_train),
        "target_loss": target,
        "time_to_target_s": hit["time_s"] if hit else NAN,
        "updates_to_target": hit["updates"] if hit else NAN,
        "final_train_loss": last.get("train_loss"),
        "final_train_acc": last.get("train_acc"),
        "final_test_loss": last.get("test_loss"),
        "final_test_acc": last.get("test_acc"),
        "final_opt_gap": last.get("opt_gap"),
        "staleness_mean": sum(k * v for k, v in hist.items()) / n_upd if n_upd else NAN,
        "staleness_max": max(hist) if hist else NAN,
        "discarded": last.get("discarded", 0),
        "stopped": last.get("stopped", 0),
        "status": status,
        "message": message,
        **{f"cost_{k}": v for k, v in (result.costs if result is not None else {}).items()},
        **({"handoff": result.handoff} if result is not None and result.handoff else {}),
        "overruns": opt("overruns"),
        "late_wakeups": opt("late_wakeups"),
        "late_expected": late_expected,
        "master_busy_s": opt("master_busy_s"),
        "speed_probe_s": probe[0],
        "cal_probe_s": probe[1],
    }


def _time_per_epoch(result, time_s: float, epochs: float, num_train: int) -> float:
    """Seconds per epoch over the samples the clock saw (a wall clock skips the warm-up updates)."""
    timed = result.timed_samples if result is not None and result.timed_samples is not None else None
    if timed is not None:
        return time_s / (timed / num_train) if timed else NAN
    return time_s / epochs if epochs else NAN
