"""Validation of a composed config before any work is done (issue 2, item 6).

Every check raises :class:`experiments.errors.ConfigError` with a one-line message that names the key and the
value; the entry point prints it and exits with code 2, having written nothing.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

from experiments.errors import ConfigError

ARTIFICIAL = ("fixed", "uniform")


def build_rule_from_config(alg):
    """The update rule of ``cfg.algorithm`` through :func:`algorithms.build_rule` (protocol keys left out).

    Raises ConfigError (``algorithm: <the rule's own message, naming the key and value>``) for a hyperparameter
    the rule rejects; :func:`validate` builds the rule once so that such a config stops before anything runs.
    """
    from omegaconf import OmegaConf

    from algorithms import build_rule

    hp = {k: v for k, v in OmegaConf.to_container(alg, resolve=True).items()
          if k not in ("name", "protocol", "rule", "sync_batch")}
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


def validate(cfg) -> None:
    """Check a resolved run config; raise ConfigError naming the first bad key and value."""
    _int(cfg, "workers", 1)
    _int(cfg, "seed", 0)
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
    _require(cfg.profile in ("smoke", "quick", "paper"), "profile", cfg.profile, "must be smoke, quick or paper")
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
    if alg.protocol == "sync":
        _require(alg.get("sync_batch", "split") in ("split", "full"), "algorithm.sync_batch", alg.get("sync_batch"),
                 "must be split or full")
        if alg.get("sync_batch", "split") == "split":
            _require(cfg.batch_size >= cfg.workers, "batch_size", cfg.batch_size,
                     f"a split sync batch needs batch_size >= workers ({cfg.workers})")
    build_rule_from_config(alg)  # everything else the rule itself checks (variant, impl, bounds, ...)

    d = cfg.delay
    _require(d.model in ("none", "fixed", "uniform", "timing"), "delay.model", d.model,
             "must be none, fixed, uniform or timing")
    if d.model == "fixed":
        _int(cfg, "delay.tau", 0)
    if d.model == "uniform":
        _int(cfg, "delay.max_delay", 0)
    if d.model in ARTIFICIAL and alg.protocol == "sync":
        raise ConfigError(f"delay={d.model}: an artificial delay applies to async algorithms only, "
                          f"not algorithm={alg.name} (use delay=none or delay=timing)")
    if d.model == "timing":
        _require(d.law in ("constant", "exponential", "lognormal"), "delay.law", d.law,
                 "must be constant, exponential or lognormal")
        _require(d.sigma >= 0, "delay.sigma", d.sigma, "must be >= 0")
        _int(cfg, "delay.slow_workers", 0)
        _positive(cfg, "delay.slowdown")
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
        _require(e.fault.get("mode", "kill") in ("kill", "hang"), "engine.fault.mode", e.fault.get("mode"),
                 "must be kill or hang")
        _require(e.get("start_method", "spawn") in ("spawn", "forkserver"), "engine.start_method",
                 e.get("start_method"), "must be spawn or forkserver")
        kw = e.fault.kill_worker
        if kw is not None:
            _require(isinstance(kw, int) and 0 <= kw < cfg.workers, "engine.fault.kill_worker", kw,
                     f"must be a worker id in [0, {cfg.workers - 1}]")
    if e.name == "simulated" and alg.protocol == "async" and d.model == "none" and cfg.workers > 1:
        raise ConfigError(f"delay=none with workers={cfg.workers}: every gradient at the newest iterate is a free "
                          "lunch no real system has; use delay=timing (the default: staleness from the timing model)")
    _require(e.get("transport", "shared_memory") in ("shared_memory", "distributed"), "engine.transport",
             e.get("transport"), "must be shared_memory or distributed")
    _require(e.get("compute", "real") in ("real", "emulated"), "engine.compute", e.get("compute"),
             "must be real or emulated")
    if e.get("compute_base_s") is not None:
        _positive(cfg, "engine.compute_base_s")
    if e.name == "simulated" and e.get("compute") == "emulated":
        _require(e.get("compute_base_s") is not None, "engine.compute_base_s", None,
                 "engine=simulated with engine.compute=emulated needs the base seconds of a gradient")
        _require((e.get("costs") or {}).get("grad_s") is None, "engine.costs.grad_s", e.costs.get("grad_s"),
                 "set either engine.costs.grad_s or engine.compute_base_s, not both")
    for k in ("grad_s", "update_s", "latency_s", "overhead_s"):
        if e.get("costs") is not None:
            v = e.costs.get(k)
            _require(v is None or (isinstance(v, (int, float)) and v >= 0), f"engine.costs.{k}", v, "must be >= 0")

    p = cfg.problem
    if p.kind == "logreg_libsvm":
        _require(p.path is not None, "problem.path", None, "required for problem=logreg_libsvm (a LIBSVM file)")
        _require(Path(str(p.path)).is_file(), "problem.path", p.path, "no such file")
        if p.get("test_path") is not None:
            _require(Path(str(p.test_path)).is_file(), "problem.test_path", p.test_path, "no such file")
    if p.kind == "logreg":
        _require(len(p.classes) == 2 and p.classes[0] != p.classes[1], "problem.classes", list(p.classes),
                 "must be two different classes")
    _int(cfg, "problem.max_train", 1, allow_none=True)
