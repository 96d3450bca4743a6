"""Validation of a composed config before any work is done (issue 2, item 6).

Every check raises :class:`experiments.errors.ConfigError` with a one-line message that names the key and the
value; the entry point prints it and exits with code 2, having written nothing.
"""
from __future__ import annotations

import math
import tempfile
from pathlib import Path

from experiments.errors import ConfigError

ARTIFICIAL = ("fixed", "uniform")
NOT_RULE_KEYS = ("name", "protocol", "rule", "sync_batch", "policy")  # algorithm keys that are not rule hyperparameters


def build_rule_from_config(alg):
    """The update rule of ``cfg.algorithm`` through :func:`algorithms.build_rule` (protocol keys left out).

    Raises ConfigError (``algorithm: <the rule's own message, naming the key and value>``) for a hyperparameter
    the rule rejects; :func:`validate` builds the rule once so that such a config stops before anything runs.
    """
    from omegaconf import OmegaConf

    from algorithms import build_rule

    hp = {k: v for k, v in OmegaConf.to_container(alg, resolve=True).items()
          if k not in NOT_RULE_KEYS}
    factor = hp.pop("lr_factor", 1.0)  # a step-size grid: every alpha_k times the factor (issue 14)
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not factor > 0:
        raise ConfigError(f"algorithm.lr_factor={factor}: must be a number > 0")
    if factor != 1.0:
        hp["lr"] = hp["lr"] * factor
        if hp.get("alpha_max") is not None:
            hp["alpha_max"] = hp["alpha_max"] * factor
    if hp.get("bounds") is not None:
        hp["bounds"] = tuple(hp["bounds"])
    try:
        return build_rule(alg.rule, **hp)
    except ValueError as exc:
        raise ConfigError(f"algorithm: {exc}") from None


def _num(cfg, key: str):
    node = cfg
    for part in key.split("."):
        node = node.get(part) if hasattr(node, "get") else None
    return node


def _require(cond: bool, key: str, value, why: str) -> None:
    if not cond:
        raise ConfigError(f"{key}={value}: {why}")


def _int(cfg, key: str, minimum: int, allow_none: bool = False) -> None:
    v = _num(cfg, key)
    if v is None and allow_none:
        return
    _require(isinstance(v, int) and not isinstance(v, bool) and v >= minimum, key, v, f"must be an integer >= {minimum}")


def _positive(cfg, key: str, allow_none: bool = False) -> None:
    v = _num(cfg, key)
    if v is None and allow_none:
        return
    _require(isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0, key, v, "must be a number > 0")


def _writable_dir(path) -> None:
    """``results_dir`` is a folder (or can become one) that this process may write; nothing is left behind."""
    p = Path(str(path)).absolute()
    probe = p
    while not probe.exists():
        probe = probe.parent
    if probe == p:
        _require(p.is_dir(), "results_dir", path, "exists and is not a folder")
    else:
        _require(probe.is_dir(), "results_dir", path, f"{probe} is not a folder")
    try:  # os.access says yes to root everywhere; a real (removed at once) file says whether writing works
        tempfile.TemporaryFile(dir=probe).close()
    except OSError:
        raise ConfigError(f"results_dir={path}: {probe} is not writable") from None


SEED_LIMIT = 2**62  # seeds (plus each worker's stride, experiments.engines.workers) stay inside torch's 64-bit range
NUM_CLASSES = {"fashion_mnist": 10, "mnist": 10, "cifar10": 10}
BACKENDS = ("auto", "gloo", "nccl")


def _finite_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def validate(cfg) -> None:
    """Check a resolved run config; raise ConfigError naming the first bad key and value."""
    _int(cfg, "workers", 1)
    _int(cfg, "seed", 0)
    _require(cfg.seed < SEED_LIMIT, "seed", cfg.seed, "must be an integer in [0, 2^62)")
    _int(cfg, "lr_tuning_seed", 0, allow_none=True)
    dv = cfg.get("divergence_factor")
    _require(isinstance(dv, (int, float)) and not isinstance(dv, bool) and dv > 0, "divergence_factor", dv,
             "must be a number > 0 (a train loss above it times the initial one stops the run; .inf: never)")
    _require(cfg.results_dir is not None and str(cfg.results_dir).strip() != "", "results_dir", "",
             "must name a folder")
    _int(cfg, "batch_size", 1)
    _int(cfg, "threads", 1)
    _positive(cfg, "eval_every")
    _int(cfg, "updates", 1, allow_none=True)
    if cfg.get("updates") is None:
        _positive(cfg, "epochs")
    _require(cfg.device in ("auto", "cpu", "cuda"), "device", cfg.device, "must be auto, cpu or cuda")
    if cfg.device == "cuda":
        import torch

        _require(torch.cuda.is_available(), "device", "cuda", "CUDA is not available on this machine")
    _require(cfg.profile in ("smoke", "quick", "long", "paper"), "profile", cfg.profile,
             "must be smoke, quick, long or paper")
    _writable_dir(cfg.results_dir)

    alg = cfg.algorithm
    _require(alg.protocol in ("async", "sync"), "algorithm.protocol", alg.protocol, "must be async or sync")
    _positive(cfg, "algorithm.lr")
    for beta in ("beta1", "beta2"):
        if beta in alg:
            v = alg[beta]
            _require(isinstance(v, (int, float)) and 0 <= v < 1, f"algorithm.{beta}", v, "must be in [0, 1)")
    if alg.get("eps") is not None:
        _require(alg.eps >= 0, "algorithm.eps", alg.eps, "must be >= 0")
    _require(alg.get("lr_schedule", "constant") in ("constant", "inv_sqrt"), "algorithm.lr_schedule",
             alg.get("lr_schedule"), "must be constant or inv_sqrt")
    if alg.get("lr_schedule") == "inv_sqrt":
        _positive(cfg, "algorithm.alpha_max")
    elif alg.get("alpha_max") is not None and _finite_number(alg.lr) and _finite_number(alg.alpha_max) \
            and alg.lr > alg.alpha_max:
        raise ConfigError(f"algorithm.alpha_max={alg.alpha_max}: caps only the inv_sqrt schedule; a constant step "
                          f"is lr={alg.lr} as given (set algorithm.alpha_max=null, or lr <= alpha_max)")
    if alg.get("variant") == "torch" and alg.get("eps") is not None:
        _require(alg.eps > 0, "algorithm.eps", alg.eps,
                 "must be > 0 for the torch variant (m / (sqrt(vhat) + eps) is 0/0 where a gradient is 0; "
                 "the paper variant allows 0)")
    if alg.protocol == "sync":
        _require(alg.get("sync_batch", "split") in ("split", "full"), "algorithm.sync_batch", alg.get("sync_batch"),
                 "must be split or full")
        if alg.get("sync_batch", "split") == "split":
            _require(cfg.batch_size >= cfg.workers, "batch_size", cfg.batch_size,
                     f"a split sync batch needs batch_size >= workers ({cfg.workers})")
    build_rule_from_config(alg)  # everything else the rule itself checks (variant, impl, bounds, ...)
    from experiments.training.policies import DISCARDING, build_policy

    try:
        policy = build_policy(alg.get("policy"), cfg.workers, alg.protocol)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if policy is not None and policy.name in DISCARDING and cfg.get("updates") is not None:
        raise ConfigError(f"updates={cfg.updates}: policy {policy.name} discards gradients, so a run's length must "
                          f"be given in epochs (gradients computed), not in updates")

    d = cfg.delay
    _require(d.model in ("none", "fixed", "uniform", "timing"), "delay.model", d.model,
             "must be none, fixed, uniform or timing")
    if d.model == "fixed":
        _int(cfg, "delay.tau", 0)
    if d.model == "uniform":
        _int(cfg, "delay.max_delay", 0)
        if cfg.get("updates") is not None:  # (epochs given: the report marks D >= K as degenerate instead)
            _require(d.max_delay == 0 or d.max_delay < cfg.updates, "delay.max_delay", d.max_delay,
                     f"must be below the run's {cfg.updates} updates (a delay never reached is a degenerate run)")
    if d.model in ARTIFICIAL and alg.protocol == "sync":
        raise ConfigError(f"delay={d.model}: an artificial delay applies to async algorithms only, "
                          f"not algorithm={alg.name} (use delay=none or delay=timing)")
    if d.model == "timing":
        from experiments.training.delays import LAWS, SPREADS, ComputeTimes

        _require(d.law in LAWS, "delay.law", d.law, f"must be one of {', '.join(LAWS)}")
        _require(d.get("spread", "equal") in SPREADS, "delay.spread", d.get("spread"),
                 f"must be one of {', '.join(SPREADS)}")
        _require(d.sigma >= 0, "delay.sigma", d.sigma, "must be >= 0")
        _int(cfg, "delay.slow_workers", 0)
        _require(d.slow_workers <= cfg.workers, "delay.slow_workers", d.slow_workers,
                 f"must be <= workers ({cfg.workers})")
        _positive(cfg, "delay.slowdown")
        if d.law == "replay":
            _require(d.get("replay") is not None and Path(str(d.replay)).is_file(), "delay.replay", d.get("replay"),
                     "law=replay needs an existing compute_times.csv")
        try:
            ComputeTimes.from_config(cfg.workers, d, seed=0)  # the shape, the replay file's columns and workers
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    if d.model != "timing" and cfg.engine.name != "simulated":
        _require(d.model == "none", "delay", d.model, "artificial delays exist on engine=simulated only")

    e = cfg.engine
    _require(e.name in ("simulated", "shared_memory", "distributed"), "engine", e.name,
             "must be simulated, shared_memory or distributed")
    if e.name != "simulated":
        _int(cfg, "engine.threads_per_worker", 1)
        _positive(cfg, "engine.timeout_s")
        _require(e.on_worker_loss in ("continue", "fail"), "engine.on_worker_loss", e.on_worker_loss,
                 "must be continue or fail")
        _require(e.get("evaluation", "snapshot") in ("snapshot", "drain"), "engine.evaluation", e.get("evaluation"),
                 "must be snapshot or drain")
        _positive(cfg, "engine.snapshot_mb", allow_none=True)
        _require(e.fault.get("mode", "kill") in ("kill", "hang"), "engine.fault.mode", e.fault.get("mode"),
                 "must be kill or hang")
        _require(isinstance(e.get("colocate", False), bool), "engine.colocate", e.get("colocate"), "must be true or false")
        _require(e.get("start_method", "spawn") in ("spawn", "forkserver"), "engine.start_method",
                 e.get("start_method"), "must be spawn or forkserver")
        kw = e.fault.kill_worker
        if kw is not None:
            _require(isinstance(kw, int) and 0 <= kw < cfg.workers, "engine.fault.kill_worker", kw,
                     f"must be a worker id in [0, {cfg.workers - 1}]")
    if e.name == "distributed":
        _require(e.get("backend", "auto") in BACKENDS, "engine.backend", e.get("backend"),
                 f"must be {', '.join(BACKENDS)}")
        port = e.get("master_port")
        _require(isinstance(port, int) and not isinstance(port, bool) and 1 <= port <= 65535, "engine.master_port",
                 port, "must be a TCP port in 1..65535")
    if e.name == "simulated" and alg.protocol == "async" and d.model == "none" and cfg.workers > 1:
        raise ConfigError(f"delay=none with workers={cfg.workers}: every gradient at the newest iterate is a free "
                          "lunch no real system has; use delay=timing (the default: staleness from the timing model)")
    _require(e.get("transport", "shared_memory") in ("shared_memory", "distributed"), "engine.transport",
             e.get("transport"), "must be shared_memory or distributed")
    _require(e.get("compute", "real") in ("real", "emulated"), "engine.compute", e.get("compute"),
             "must be real or emulated")
    _require(e.get("compute_wait", "sleep") in ("sleep", "spin"), "engine.compute_wait", e.get("compute_wait"),
             "must be sleep or spin")
    if e.get("compute_base_s") is not None:
        _positive(cfg, "engine.compute_base_s")
    if e.name == "simulated" and e.get("compute") == "emulated":
        _require(e.get("compute_base_s") is not None, "engine.compute_base_s", None,
                 "engine=simulated with engine.compute=emulated needs the base seconds of a gradient")
        _require((e.get("costs") or {}).get("grad_s") is None, "engine.costs.grad_s", e.costs.get("grad_s"),
                 "set either engine.costs.grad_s or engine.compute_base_s, not both")
    for k in ("grad_s", "update_s", "latency_s", "overhead_s", "overhead_idle_s", "late_s"):
        if e.get("costs") is not None:
            v = e.costs.get(k)
            _require(v is None or (isinstance(v, (int, float)) and v >= 0), f"engine.costs.{k}", v, "must be >= 0")

    p = cfg.problem
    if p.kind == "cnn_timing":  # problems/timing.py: its engine-facing gradients are free; the clock must model them
        _require(e.name == "simulated" or e.get("compute") == "emulated", "engine", e.name,
                 f"problem={p.name} is timing-only (zero-cost gradients of a net without its data): it runs on "
                 "engine=simulated, or on a real engine with engine.compute=emulated (each gradient then waits for "
                 "its emulated target)")
        _int(cfg, "problem.num_train", 1)
        _require(p.get("target_loss") is None, "problem.target_loss", p.get("target_loss"),
                 "a timing-only problem has no loss to reach (null)")
    if p.kind == "logreg_libsvm":
        _require(p.path is not None, "problem.path", None, "required for problem=logreg_libsvm (a LIBSVM file)")
        _require(Path(str(p.path)).is_file(), "problem.path", p.path, "no such file")
        if p.get("test_path") is not None:
            _require(Path(str(p.test_path)).is_file(), "problem.test_path", p.test_path, "no such file")
    if p.kind == "logreg":
        n = NUM_CLASSES.get(p.dataset, 10)
        classes = list(p.classes) if not isinstance(p.classes, (str, int, float)) else [p.classes]
        _require(len(classes) == 2 and classes[0] != classes[1]
                 and all(isinstance(c, int) and not isinstance(c, bool) and 0 <= c < n for c in classes),
                 "problem.classes", classes, f"must be two different class indices in 0..{n - 1}")
        _require(p.get("row_norm") in (None, "unit"), "problem.row_norm", p.get("row_norm"), "must be null or unit")
    if p.kind in ("logreg", "logreg_libsvm"):
        l2 = p.get("l2") if p.get("l2") is not None else 0.0
        _require(_finite_number(l2) and l2 >= 0, "problem.l2", l2, "must be a finite number >= 0")
    _int(cfg, "problem.max_train", 1, allow_none=True)
