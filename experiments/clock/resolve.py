"""The costs a run needs from the machine's calibration, resolved before its engine starts.

The runner (experiments/runner.py) calls :func:`resolve` once per run: the simulated engine gets its
:class:`~experiments.clock.costmodel.CostModel` (and, for the twin of an emulated run, the wake-up lateness samples);
a real engine with emulated compute and no ``engine.compute_base_s`` gets this machine's gradient cost as its base.
An entry the calibration lacks is measured here, on first use (:mod:`experiments.clock.measure`), and stored; no
engine measures anything.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from experiments.clock.calibration import (
    GRAD_ENGINE,
    TRANSPORTS,
    Calibration,
    grad_key,
    grad_times_key,
    idle_key,
    lateness_key,
    message_keys,
    round_key,
    rule_calibration_key,
    update_key,
    used_summary,
)
from experiments.clock.costmodel import COST_KEYS, CostModel
from experiments.clock.measure import (
    REPEATS,
    measure_grad_samples,
    measure_lateness_samples,
    measure_message_terms,
    measure_update_s,
    p1_run_samples,
    probe_grad_samples,
    round_samples,
)
from experiments.clock.spread import POOL_ROUNDS, SPREAD_BOUND, above_bound, rounds_pooled
from experiments.log import get_logger
from experiments.settings.schema import RunSettings

log = get_logger(__name__)


@dataclass(frozen=True)
class RunCosts:
    """What the runner resolved from the calibration for one run.

    Attributes:
        costs: the simulated engine's cost model (None on the real engines).
        lateness: seconds by which emulated waits end late, the samples the simulated twin of an emulated run draws
            from (None: real compute).
        base_s: real engines with emulated compute: the mean seconds of one gradient at ``batch_size`` (None: real
            compute).
        xi: the ``measured`` compute-time law's draws: this machine's gradient times at the run's batch size over
            their median (None under every other law).
        calibration: the calibration file these came from.
        used: what the run used of it (:func:`experiments.clock.calibration.used_summary`; {} when no entry was
            used): the runner prints its line and keeps it in the run's provenance (``calibration_used``).
    """

    costs: CostModel | None = None
    lateness: tuple[float, ...] | None = None
    base_s: float | None = None
    xi: tuple[float, ...] | None = None
    calibration: str = ""
    used: dict = field(default_factory=dict)


def calibration_of(settings: RunSettings) -> Calibration:
    """The run's calibration file: ``engine.calibration`` where the engine has one and it is set, else this
    machine's (:func:`experiments.clock.calibration.machine_path`)."""
    return Calibration(getattr(settings.engine, "calibration", None) or None)


def resolve(settings: RunSettings, problem, rule, calibration: Calibration | None = None) -> RunCosts:
    """Every cost the run's engine needs (see the module docstring), measuring entries the calibration lacks.

    An entry used whose spread is above :data:`~experiments.clock.spread.SPREAD_BOUND` is measured once more
    and its new repeats pooled with the stored ones (:meth:`~experiments.clock.calibration.Calibration.entry`), one
    line on stderr per round, until it is within the bound or has :data:`~experiments.clock.spread.POOL_ROUNDS`
    rounds; the costs are resolved again after each round. ``used`` of the answer says what was used (still above
    the bound: ``spread_above_bound``)."""
    cal = calibration or calibration_of(settings)
    cal.used.clear()
    costs = _resolve(settings, cal, problem, rule)
    for _ in range(POOL_ROUNDS - 1):  # a pass pools one round into each wide entry: never more passes than rounds
        wide = sorted(k for k, e in cal.used.items() if above_bound(k, e) and rounds_pooled(e) + 1 < POOL_ROUNDS)
        if not wide:
            break
        worst = max(wide, key=lambda k: cal.used[k]["spread"])
        log.info(
            f"calibration: {len(wide)} entr{'y' if len(wide) == 1 else 'ies'} of {cal.path} spread above the "
            f"{100 * SPREAD_BOUND:.0f}% bound (worst {100 * cal.used[worst]['spread']:.0f}%, {worst}): measuring "
            f"{REPEATS} more repeats of {'it' if len(wide) == 1 else 'each'}, pooled with the stored ones "
            f"(round {rounds_pooled(cal.used[worst]) + 2} of at most {POOL_ROUNDS})"
        )
        cal.pooling.update({k: rounds_pooled(cal.used[k]) for k in wide})
        cal.used.clear()
        try:
            costs = _resolve(settings, cal, problem, rule)
        finally:
            cal.pooling.clear()
    return replace(costs, used=used_summary(cal.path, cal.used) if cal.used else {})


def _resolve(settings: RunSettings, cal: Calibration, problem, rule) -> RunCosts:
    """:func:`resolve` without the rounds pooled into wide entries."""
    e = settings.engine
    xi = measured_law(settings, problem, cal)
    if e.name == "simulated" and e.trace is not None:  # the twin replays measured times: no cost is needed
        return RunCosts(calibration=str(cal.path))
    if e.name == "simulated":
        lateness = emulated_lateness(settings, cal)
        return RunCosts(
            costs=cost_model(settings, problem, rule, cal),
            lateness=None if lateness is None else tuple(lateness),
            xi=xi,
            calibration=str(cal.path),
        )
    if e.compute != "emulated":
        return RunCosts(calibration=str(cal.path))
    base = e.compute_base_s
    if base is None:  # this machine's gradient cost at batch_size
        b = settings.batch_size
        base = cal.entry(grad_key(problem, b), lambda: measure_grad_samples(settings, problem, b))["value"]
    return RunCosts(base_s=float(base), xi=xi, calibration=str(cal.path))


def measured_law(settings: RunSettings, problem, calibration: Calibration) -> tuple[float, ...] | None:
    """The draws of the ``measured`` compute-time law (``delay.law=measured``): every gradient time this machine's
    calibration measured at the run's largest minibatch, over their median (so the law's base is the calibrated
    median ``grad_s``); None under another law. A timing-only problem's probe gives its repeats' medians."""
    if settings.delay.model != "timing" or settings.delay.law != "measured":
        return None
    b = max(settings.worker_batches, default=settings.batch_size)
    if getattr(problem, "timing_only", False):
        samples = calibration.entry(grad_key(problem, b), lambda: probe_grad_samples(problem, [b])[b])["samples"]
    else:
        samples = calibration.entry(
            grad_times_key(problem, b), lambda: p1_run_samples(settings, GRAD_ENGINE, problem, b)[2]
        )["samples"]
    med = sorted(samples)[len(samples) // 2]
    return tuple(float(v) / med for v in samples)


def emulated_lateness(settings: RunSettings, calibration: Calibration, measure: bool = True) -> list[float] | None:
    """The wake-up lateness samples (seconds) that the simulated twin of an emulated run draws from
    (engines/simulated.py): ``[engine.costs.late_s]`` when the settings fix it, else the samples calibrated for
    ``engine.compute_base_s`` (:func:`~experiments.clock.measure.measure_lateness_samples`, measured on first use
    unless ``measure`` is False: then None when missing); None with real compute or without a base."""
    e = settings.engine
    if e.compute != "emulated":
        return None
    fixed = getattr(getattr(e, "costs", None), "late_s", None)
    if fixed is not None:
        return [float(fixed)]
    base = e.compute_base_s
    if base is None:
        return None
    if not measure:
        entry = calibration.read()["entries"].get(lateness_key(base))
        return entry["samples"] if entry else None
    return calibration.entry(lateness_key(base), lambda: measure_lateness_samples(float(base)))["samples"]


def cost_model(settings: RunSettings, problem, rule, calibration: Calibration) -> CostModel:
    """The simulated clock's costs of a run: ``engine.costs.*`` where set (``grad_s`` at ``batch_size``, other
    minibatch sizes scaled linearly from it; with ``engine.compute=emulated`` the base ``engine.compute_base_s``),
    the rest from ``calibration``, measured on first use. The message terms are those of the real engine named by
    ``engine.transport``; the gradients are priced at every minibatch size the run uses (a split sync round's
    shares).

    Raises:
        ValueError: an unknown ``engine.transport``.
    """
    e = settings.engine
    transport = e.transport
    if transport not in TRANSPORTS:
        raise ValueError(f"engine.transport={transport!r}: must be one of {', '.join(TRANSPORTS)}")
    fixed = {k: getattr(e.costs, k) for k in COST_KEYS}
    if e.compute == "emulated" and e.compute_base_s is not None:
        fixed["grad_s"] = float(e.compute_base_s)
    ref_batch = settings.batch_size
    spread, grad = {}, {}
    own = {settings.batch_size} if settings.algorithm.master_computes else set()  # the master's own gradients
    sizes = sorted(set(settings.worker_batches) | own)
    runs = {}  # (transport, b) -> the sample lists of one set of P = 1 runs (gradient, idle overhead, every time)

    def p1(t: str, b: int, h: str | None = None) -> tuple[list, list, list]:
        if (t, b, h) not in runs:
            runs[t, b, h] = p1_run_samples(settings, t, problem, b, handoff=h)
        return runs[t, b, h]

    timing_only = getattr(problem, "timing_only", False)
    probed = {}  # a timing-only problem: b -> samples of one probe of every size the calibration still lacks

    def probe(b: int) -> list[float]:
        if b not in probed:
            have = calibration.read()["entries"]
            probed.update(probe_grad_samples(problem, [s for s in sizes if s == b or grad_key(problem, s) not in have]))
        return probed[b]

    for b in sizes:
        if fixed.get("grad_s") is not None:
            grad[b] = float(fixed["grad_s"]) * b / ref_batch
        else:
            measure = (lambda b=b: probe(b)) if timing_only else (lambda b=b: p1(GRAD_ENGINE, b)[0])
            entry = calibration.entry(grad_key(problem, b), measure)
            grad[b], spread[f"grad_s|B={b}"] = entry["value"], entry["spread"]
            if not timing_only and runs.get((GRAD_ENGINE, b, None)):  # measured together: keep every gradient's time
                calibration.entry(grad_times_key(problem, b), lambda b=b: p1(GRAD_ENGINE, b)[2])
    handoff = settings.modelled_handoff()
    idle_s = fixed.get("overhead_idle_s")
    if idle_s is None and fixed.get("overhead_s") is None and not timing_only:
        b = sizes[-1]  # the largest gradient of the run: the one that pollutes the master's caches most
        entry = calibration.entry(idle_key(transport, problem, b, handoff), lambda: p1(transport, b, handoff)[1])
        idle_s, spread["overhead_idle_s"] = entry["value"], entry["spread"]
    if fixed.get("update_s") is not None:
        update_s = float(fixed["update_s"])
    else:
        key = update_key(rule_calibration_key(rule, problem.dim), problem.dim)
        entry = calibration.entry(key, lambda: [measure_update_s(rule, problem.dim) for _ in range(REPEATS)])
        update_s, spread["update_s"] = entry["value"], entry["spread"]
    lat_key, over_key = message_keys(transport, problem.dim, handoff)
    terms = {}
    for name, key in (("latency_s", lat_key), ("overhead_s", over_key)):
        if fixed.get(name) is not None:
            terms[name] = float(fixed[name])
            continue
        if key not in calibration.read()["entries"] or key in calibration.pooling:
            lat, over = [], []

            def both(lat=lat, over=over):  # measured once for both entries
                if not lat:
                    lat[:], over[:] = measure_message_terms(settings, transport, problem.dim, handoff=handoff)
                return lat, over

            calibration.entry(lat_key, lambda both=both: both()[0])
            calibration.entry(over_key, lambda both=both: both()[1])
        entry = calibration.entry(key, lambda: [])
        terms[name], spread[name] = entry["value"], entry["spread"]
    round_s = None
    P = settings.workers
    if (
        settings.algorithm.protocol == "sync"
        and settings.shared_cores() is not None
        and fixed.get("overhead_s") is None
    ):
        entry = calibration.entry(
            round_key(transport, problem.dim, P), lambda: round_samples(settings, transport, problem.dim, P)
        )
        round_s, spread["round_s"] = entry["value"], entry["spread"]
    source = "config" if all(fixed.get(k) is not None for k in ("latency_s", "overhead_s")) else transport
    return CostModel(
        grad=grad,
        update_s=update_s,
        latency_s=terms["latency_s"],
        overhead_s=terms["overhead_s"],
        transport=source,
        spread=spread,
        overhead_idle_s=None if idle_s is None else float(idle_s),
        round_s=round_s,
    )
