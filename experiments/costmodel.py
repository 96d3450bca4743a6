"""The simulated clock's cost model and its calibration on this machine (issue: simulated engine, item 3).

Costs, in seconds, single thread (as every worker is pinned to one math thread):
- ``grad_s(B)``: one stochastic gradient of the problem at minibatch size B;
- ``update_s``: one master update (the rule's ``step`` at the problem's dimension d);
- ``msg_s``: one message of d float32 (a gradient to the master or an iterate to a worker), measured on the
  ``shared_memory`` engine itself (:func:`measure_transport_s`), so that the simulated clock predicts that engine.

Measurements are medians of repeated calls after warm-up, cached in ``<results_dir>/calibration.json`` (written
under a file lock, so sweeps running at once share one file). ``make calibrate`` measures every problem of the
reproduce profiles up front; a run whose entry is missing measures it on first use. A config may fix any cost
(``engine.costs.grad_s`` etc.), which tests use to get a clock independent of the machine.
"""
from __future__ import annotations

import json
import os
import platform
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from filelock import FileLock


def _median_time(fn, reps: int, warmup: int = 3) -> float:
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def measure_grad_s(problem, batch_size: int, reps: int = 15, seed: int = 0) -> float:
    """Median seconds of ``problem.loss_grad`` at a random minibatch of ``batch_size`` (one thread)."""
    gen = torch.Generator().manual_seed(seed)
    x = problem.init_params(seed)
    idx = torch.randint(0, problem.num_train, (batch_size,), generator=gen)
    return _median_time(lambda: problem.loss_grad(x, idx), reps)


def measure_update_s(rule, dim: int, reps: int = 50) -> float:
    """Median seconds of one ``rule.step`` on a flat float32 vector of ``dim`` entries."""
    x = torch.zeros(dim)
    g = torch.randn(dim, generator=torch.Generator().manual_seed(0))
    state = rule.init(x)
    info = {"tau": 0, "worker": 0} if getattr(rule, "needs_staleness", False) else {}

    def step():
        nonlocal x, state
        x, state = rule.step(x, g, state, **info)

    return _median_time(step, reps)


class ZeroCostProblem:
    """A problem of dimension ``dim`` whose gradient costs nothing (a fresh zero vector): what remains of an update
    on a real engine is the transport and the master's update. Module-level, so worker processes can unpickle it."""

    def __init__(self, dim: int) -> None:
        self.name, self.dim, self.num_train, self.device = "zero_cost", int(dim), 1_000_000, torch.device("cpu")

    def init_params(self, seed: int) -> torch.Tensor:
        return torch.zeros(self.dim)

    def loss_grad(self, x, idx):
        return 0.0, torch.zeros(self.dim)

    def evaluate(self, x):
        return {"train_loss": 0.0, "train_acc": 0.0, "test_loss": 0.0, "test_acc": 0.0}


def measure_transport_s(rule, dim: int, updates: int = 300) -> float:
    """Seconds of one message of ``dim`` floats on the ``shared_memory`` engine, measured on the engine itself.

    With one worker and a zero-cost gradient, an update takes ``2 msg + update`` (iterate to the worker, gradient
    back, apply), so ``msg = (seconds per update - update_s) / 2``, where ``update_s`` is measured beside it.
    """
    from experiments.engines import shared_memory
    from experiments.precheck import compose_jobs
    from experiments.recorder import Recorder

    cfg = compose_jobs([["engine=shared_memory", "workers=1", f"updates={updates}", "eval_every=1000000000",
                         "batch_size=1", "algorithm=async_sgd", "algorithm.lr=0.001",
                         "algorithm.lr_schedule=constant"]])[0]
    problem = ZeroCostProblem(dim)
    recorder = Recorder(problem, {"run_id": "calibration"}, eval_every=1e9, total_epochs=None, f_star=None,
                        clock="wall", progress=False)
    result = shared_memory.run(problem, rule, cfg, recorder)
    timed = result.timed_samples if result.timed_samples is not None else result.samples
    per_update = result.time_s / max(1, timed)
    return max(0.0, (per_update - measure_update_s(rule, dim)) / 2)


@dataclass
class CostModel:
    """Costs of the simulated clock for one run (seconds). ``grad`` maps a minibatch size to seconds."""

    grad: dict
    update_s: float
    msg_s: float

    def grad_s(self, batch_size: int) -> float:
        """Seconds of one gradient at minibatch size ``batch_size``."""
        return self.grad[int(batch_size)]

    def as_dict(self) -> dict:
        return {"grad_s": {str(k): v for k, v in self.grad.items()}, "update_s": self.update_s, "msg_s": self.msg_s}


class Calibration:
    """The calibration file ``<results_dir>/calibration.json``: measured costs keyed by problem, batch and rule.

    Args:
        path: the JSON file (created on first write).
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = FileLock(str(self.path) + ".lock")

    def _read(self) -> dict:
        if self.path.exists():
            return json.loads(self.path.read_text())
        return {"host": platform.node(), "machine": platform.machine(), "cpu_count": os.cpu_count(),
                "torch": torch.__version__, "threads": torch.get_num_threads(), "entries": {}}

    def get_or_measure(self, key: str, measure) -> float:
        """The cost under ``key``; measured with ``measure()`` (and saved) when missing."""
        data = self._read()
        if key in data["entries"]:
            return float(data["entries"][key])
        value = measure()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._lock:
            data = self._read()
            data["entries"].setdefault(key, value)
            tmp = self.path.with_suffix(".json.tmp")
            tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
            os.replace(tmp, self.path)
            return float(data["entries"][key])


def rule_calibration_key(algorithm_cfg, rule, dim: int) -> str:
    """The name of an algorithm's update rule in calibration keys: rule, variant and the implementation that steps
    a float32 CPU vector of ``dim`` entries, as :func:`measure_update_s` does (``rule.impl_for`` where the rule has
    several; e.g. ``amsgrad-torch-fused``, ``sgd``): another implementation costs another time, and ``impl=auto``
    shares the entry of the implementation it picks."""
    impl = rule.impl_for(torch.empty(dim)) if hasattr(rule, "impl_for") else None
    parts = (algorithm_cfg.rule, algorithm_cfg.get("variant"), impl)
    return "-".join(str(p) for p in parts if p)


def build_cost_model(problem, rule, batch_sizes, costs_cfg, calibration: Calibration, algorithm_cfg,
                     ref_batch: int) -> CostModel:
    """Costs of a run: fixed values from ``costs_cfg`` (``grad_s``, ``update_s``, ``msg_s``; None = calibrated).

    Args:
        problem: the run's problem (for measuring gradients).
        rule: the run's update rule (for measuring master updates).
        batch_sizes: every minibatch size the run uses (a sync split uses B/P).
        costs_cfg: mapping with optional fixed costs in seconds.
        calibration: where measured costs are cached.
        algorithm_cfg: the run's ``cfg.algorithm`` (names the rule in calibration keys: :func:`rule_calibration_key`).
        ref_batch: the batch size a fixed ``grad_s`` refers to; other sizes scale linearly from it.
    """
    fixed = dict(costs_cfg or {})
    threads = torch.get_num_threads()
    rule_key = rule_calibration_key(algorithm_cfg, rule, problem.dim)
    grad = {}
    for b in sorted(set(int(b) for b in batch_sizes)):
        if fixed.get("grad_s") is not None:
            grad[b] = float(fixed["grad_s"]) * b / ref_batch
        else:
            grad[b] = calibration.get_or_measure(f"grad|{problem.name}|B={b}|threads={threads}",
                                                 lambda b=b: measure_grad_s(problem, b))
    if fixed.get("update_s") is not None:
        update_s = float(fixed["update_s"])
    else:
        update_s = calibration.get_or_measure(f"update|{rule_key}|d={problem.dim}|threads={threads}",
                                              lambda: measure_update_s(rule, problem.dim))
    if fixed.get("msg_s") is not None:
        msg_s = float(fixed["msg_s"])
    else:
        msg_s = calibration.get_or_measure(f"message|shared_memory|{rule_key}|d={problem.dim}",
                                           lambda: measure_transport_s(rule, problem.dim))
    return CostModel(grad=grad, update_s=update_s, msg_s=msg_s)
