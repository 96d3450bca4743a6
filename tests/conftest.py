"""Shared test helpers: a tiny exact problem, Hydra config composition into typed settings, engine runs, and the
command-line entry point (``python -m experiments.run``) run cheaply many times.

Tests are laid out by room (tests/settings, training, engines, clock, store, sweeps, problems, algorithms, plots,
analysis, report, entry); helpers that tests of several rooms share live here (test modules import them from
``conftest``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MPLBACKEND", "Agg")

# The user's calibration (experiments/clock/calibration.py: $APAM_CALIBRATION, else
# $XDG_CACHE_HOME/apam-harness/, ~/.cache by default) is never written by the tests: every test, and every process a
# test starts, sees a cache home of this session's own (removed at the end). It starts as a copy of the user's
# calibration file where there is one (read once, here), so the session measures only the costs that file lacks;
# costs a test needs are measured into the copy on first use. REAL_ENV keeps what the variables were, for the test
# that checks this.
# A process a test starts that imports this module (a spawned worker unpickling a test's function) inherits the
# session's cache home through APAM_TEST_SESSION_CACHE: it made a folder of its own that nothing removed (about 100
# under /tmp per `make test`), and measured costs the session then measured again.
REAL_ENV = {k: os.environ.get(k) for k in ("APAM_CALIBRATION", "XDG_CACHE_HOME", "HOME")}
_INHERITED = os.environ.get("APAM_TEST_SESSION_CACHE")
SESSION_CACHE = Path(_INHERITED) if _INHERITED else Path(tempfile.mkdtemp(prefix="apam-test-cache-"))
os.environ["APAM_TEST_SESSION_CACHE"] = str(SESSION_CACHE)
from experiments.clock.calibration import machine_path  # noqa: E402

_REAL_CALIBRATION = machine_path()
os.environ.pop("APAM_CALIBRATION", None)
os.environ["XDG_CACHE_HOME"] = str(SESSION_CACHE)
if not _INHERITED and _REAL_CALIBRATION.is_file():
    machine_path().parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(_REAL_CALIBRATION, machine_path())
# `make test` runs the suite on one pytest-xdist worker per core. Each worker (and every process its tests start) has
# a temporary folder of its own under the session's, so a test that looks for what the harness leaves in the
# temporary folder (the distributed engine's apam-dist-* stores) sees its own worker's files only.
_XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
if _XDIST_WORKER:
    (SESSION_CACHE / f"tmp-{_XDIST_WORKER}").mkdir(exist_ok=True)
    os.environ["TMPDIR"] = str(SESSION_CACHE / f"tmp-{_XDIST_WORKER}")
    tempfile.tempdir = None  # gettempdir() reads TMPDIR again

import pytest  # noqa: E402
import torch  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
torch.set_num_threads(1)
HAS_FMNIST = (REPO / "data" / "FashionMNIST" / "raw").is_dir()
needs_fmnist = pytest.mark.skipif(not HAS_FMNIST, reason="Fashion-MNIST not staged (make data)")


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


def pytest_unconfigure(config):
    if not _INHERITED:  # the session's own folder, once
        shutil.rmtree(SESSION_CACHE, ignore_errors=True)


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


def pinned(overrides: list[str]) -> list[str]:
    """``overrides`` on the clock whose numbers the engine tests compute by hand: equal, constant compute times
    (``delay.law=constant`` under ``delay=timing``) and, on the simulated engine, a core for every process
    (``engine.cores=dedicated``) -- the defaults model this machine (its measured gradient times, its cores),
    which a closed form cannot. An override that sets either key, or another delay or engine, wins."""
    keys = {o.split("=", 1)[0].lstrip("+~") for o in overrides}
    groups = {o.split("=", 1)[0]: o.split("=", 1)[1] for o in overrides if o.split("=", 1)[0] in ("delay", "engine")}
    pins = []
    if groups.get("delay", "timing") == "timing" and "delay.law" not in keys:
        pins.append("delay.law=constant")
    if groups.get("engine", "simulated").startswith("simulated") and "engine.cores" not in keys:
        pins.append("engine.cores=dedicated")
    return pins + list(overrides)


def plain_rule(settings):
    """The update rule the engine tests train with: SGD for an SGD algorithm, else torch-variant AMSGrad, at the
    settings' step size (``algorithm.lr`` with ``lr_factor`` applied) -- the rule :func:`serial_amsgrad` runs."""
    from algorithms import build_rule

    lr = settings.algorithm.hyperparameters["lr"]
    if settings.algorithm.rule == "sgd":
        return build_rule("sgd", lr=lr)
    return build_rule("amsgrad", variant="torch", lr=lr)


def recorder_for(problem, settings, clock: str, recorder_cls=None):
    """A Recorder of ``problem`` evaluating every ``settings.eval_every`` epochs, no progress bar."""
    from experiments.training.recorder import Recorder

    return (recorder_cls or Recorder)(
        problem,
        {"run_id": "t"},
        eval_every=settings.eval_every,
        total_epochs=None,
        f_star=None,
        clock=clock,
        progress=False,
    )


# the simulated clock at fixed costs on a core per process, as command-line overrides (the entry tests' runs): no
# calibration is read or measured
FIXED_CLOCK = [
    "engine=simulated_dedicated",
    "delay.law=constant",
    "engine.costs.grad_s=0.001",
    "engine.costs.update_s=1e-5",
    "engine.costs.latency_s=1e-5",
    "engine.costs.overhead_s=1e-5",
]

# the simulated engine's fixed costs in the engine tests (seconds): no calibration is read or measured
GRAD, UPD, LAT, OVER = 0.01, 0.0001, 0.0002, 0.00015
COSTS = [
    f"engine.costs.grad_s={GRAD}",
    f"engine.costs.update_s={UPD}",
    f"engine.costs.latency_s={LAT}",
    f"engine.costs.overhead_s={OVER}",
]


ASYNC_SGD = [
    "batch_size=8",
    "algorithm=async_sgd",
    "algorithm.lr=0.05",
    "algorithm.lr_schedule=constant",
    "algorithm.alpha_max=null",
]
"""The engine tests' rule: async SGD at batch 8 with a constant step 0.05, uncapped (its trajectory is easy to
reason about); :func:`run_sim` and the real-engine tests' settings start from it."""


def run_sim(tmp_path, overrides, problem=None, rule=None, delay_past_checks=None):
    """A simulated run of ``problem`` (default a QuadraticProblem) at batch 8, async SGD with constant step 0.05
    (uncapped: ``algorithm.alpha_max=null``) and the fixed COSTS on the :func:`pinned` clock, then ``overrides``;
    returns (EngineResult, Recorder, RunSettings). ``rule``: default :func:`plain_rule`. ``delay_past_checks``:
    fields of the delay settings set after the settings' checks (a setting the command line refuses, such as a fixed
    delay at a policy's threshold, to test what the engine itself does with it)."""
    problem = problem or QuadraticProblem()
    settings = settings_for(
        pinned(
            [
                f"results_dir={tmp_path}",
                *ASYNC_SGD,
                "eval_every=1",
                *COSTS,
                *overrides,
            ]
        )
    )
    if delay_past_checks:
        settings = settings.model_copy(update={"delay": settings.delay.model_copy(update=delay_past_checks)})
    rec = recorder_for(problem, settings, "simulated")
    result = run_engine(problem, rule or plain_rule(settings), settings, rec)
    return result, rec, settings


# ---------------------------------------------------------------------- the command line, many times
_ENTRY_SERVER = r"""
import json, os, runpy, sys, traceback
import experiments.run as entry  # imported once (torch, Hydra, pydantic); every request runs in a fork of this
for line in sys.stdin:
    req = json.loads(line)
    pid = os.fork()
    if pid == 0:
        code = 70
        try:
            os.chdir(req["cwd"])
            os.environ.update(req["env"])
            fd = os.open(req["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(fd, 2)
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 1)
            sys.argv = [entry.__file__, *req["argv"]]
            del sys.modules["experiments.run"]  # its imports stay: run_module executes it afresh as __main__
            try:  # as `python -m experiments.run` runs it (Hydra finds conf/ from the __main__ module's file)
                runpy.run_module("experiments.run", run_name="__main__", alter_sys=True)
                code = 0
            except SystemExit as exc:
                if exc.code is None or isinstance(exc.code, int):
                    code = exc.code or 0
                else:
                    print(exc.code, file=sys.stderr)
                    code = 1
        except BaseException:
            traceback.print_exc()
        finally:
            try:
                sys.stderr.flush()
                sys.stdout.flush()
            finally:
                os._exit(code)
    _, status = os.waitpid(pid, 0)
    print(json.dumps({"code": os.waitstatus_to_exitcode(status)}), flush=True)
"""


@pytest.fixture(scope="session")
def entry_point(tmp_path_factory):
    """``call(argv, env=None, cwd=REPO) -> (exit code, stderr)``: ``python -m experiments.run *argv``, each call in
    a fresh process forked from one interpreter that imported the entry point's modules once (a cold start costs
    seconds, a fork milliseconds). ``env``: variables to set for that call."""
    folder = tmp_path_factory.mktemp("entry")
    server = subprocess.Popen(
        [sys.executable, "-c", _ENTRY_SERVER], cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    calls = iter(range(10**9))

    def call(argv, env=None, cwd=REPO):
        err = folder / f"{next(calls)}.stderr"
        server.stdin.write(
            json.dumps({"argv": [str(a) for a in argv], "env": dict(env or {}), "cwd": str(cwd), "stderr": str(err)})
            + "\n"
        )
        server.stdin.flush()
        reply = server.stdout.readline()
        assert reply, "the entry-point server died"
        return json.loads(reply)["code"], err.read_text()

    yield call
    server.stdin.close()
    try:
        server.wait(30)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


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
