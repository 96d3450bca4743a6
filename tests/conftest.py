"""Shared test helpers: a tiny exact problem and Hydra config composition."""
from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MPLBACKEND", "Agg")

import pytest  # noqa: E402
import torch  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
torch.set_num_threads(1)


class QuadraticProblem:
    """f(x) = mean_i 0.5 ||x - a_i||^2 over N rows a_i (d,), minimum at mean(a); exact and fast.

    Implements the Problem interface of docs/INTERFACES.md, for engine tests that must not depend on data.
    """

    def __init__(self, n: int = 256, d: int = 8, seed: int = 0, name: str = "quadratic") -> None:
        g = torch.Generator().manual_seed(seed)
        self.a = torch.randn(n, d, generator=g)
        self.name, self.dim, self.num_train = name, d, n
        self.device = torch.device("cpu")
        self.grad_calls = 0

    def init_params(self, seed: int) -> torch.Tensor:
        return torch.full((self.dim,), 3.0) + 0.1 * torch.randn(self.dim, generator=torch.Generator().manual_seed(seed))

    def loss_grad(self, x, idx):
        self.grad_calls += 1
        diff = x.unsqueeze(0) - self.a[idx]
        return float(0.5 * (diff**2).sum(1).mean()), diff.mean(0)

    def evaluate(self, x):
        loss = float(0.5 * ((x.unsqueeze(0) - self.a) ** 2).sum(1).mean())
        return {"train_loss": loss, "train_acc": 0.0, "test_loss": loss, "test_acc": 0.0}

    def optimum(self):
        x = self.a.mean(0)
        return self.evaluate(x)["train_loss"], x


def serial_amsgrad(problem, seed: int, epochs: int, lr: float, batch_size: int = 8) -> torch.Tensor:
    """The plain single-process loop the engines must equal at P = 1: torch-variant AMSGrad on the seeded
    minibatch stream for ``epochs`` epochs; returns the final x."""
    from algorithms import build_rule
    from experiments.training.sampling import BatchStream

    rule = build_rule("amsgrad", variant="torch", lr=lr)
    x = problem.init_params(seed)
    state = rule.init(x)
    stream = BatchStream(problem.num_train, batch_size, seed)
    for _ in range(epochs * problem.num_train // batch_size):
        _, g = problem.loss_grad(x, stream.next())
        x, state = rule.step(x, g, state)
    return x


@pytest.fixture
def quadratic():
    return QuadraticProblem()


def compose_cfg(overrides: list[str]):
    """The resolved run config for ``overrides`` (Hydra compose API, as ``python -m experiments.run`` would)."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3", job_name="test"):
        cfg = compose(config_name="config", overrides=overrides)
    return OmegaConf.create(OmegaConf.to_container(cfg, resolve=True))


def settings_for(overrides: list[str]):
    """The typed settings of the run ``overrides`` describe (as ``python -m experiments.run`` builds them)."""
    from experiments.settings.build import build_settings

    return build_settings(compose_cfg(overrides))


def run_engine(problem, rule, settings, recorder, calibration=None):
    """Run one engine as the runner does: its costs resolved from the calibration first (measured when missing;
    ``calibration``: a Calibration, default the settings'), then ``engine.run``. Returns the EngineResult."""
    from experiments.clock.resolve import resolve
    from experiments.engines import get_engine

    costs = resolve(settings, problem, rule, calibration)
    return get_engine(settings.engine.name).run(problem, rule, settings, recorder, costs)


def child_pids(parent: int) -> set[int]:
    """Process ids of every child of ``parent`` (zombies included, until reaped), from /proc's per-thread
    ``children`` lists; empty when ``parent`` is gone."""
    kids = set()
    try:
        for tid in os.listdir(f"/proc/{parent}/task"):
            with open(f"/proc/{parent}/task/{tid}/children") as f:
                kids |= {int(c) for c in f.read().split()}
    except OSError:
        pass
    return kids
