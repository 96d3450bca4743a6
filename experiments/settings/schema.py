"""The typed settings of one run: every key of the composed Hydra config, its type and its bounds.

The defaults live in the yaml files under ``conf/`` (one place); these classes declare what a value may be. A
field without a default is required: the yaml always sets it. The few defaults here are ``None`` for keys that
exist only in some options (``algorithm.sync_batch`` is a sync algorithm's) or that a user may add
(``+problem.init_std=``). Validation is pydantic's (strict types: ``workers=2.5`` or ``force=maybe`` are refused;
floats are finite unless a field says otherwise); the cross-field rules are the ``model_validator`` methods.
:func:`experiments.settings.build.build_settings` turns a failure into one :class:`experiments.errors.ConfigError`
line naming the key and the value.
"""
from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

SEED_LIMIT = 2**62
"""Seeds (plus each worker's stride, experiments/engines/workers.py) stay inside torch's 64-bit range."""
PROFILES = ("smoke", "quick", "long", "paper")
POLICIES = ("none", "mishchenko2022", "koloskova2022", "wu2022", "ringmaster", "rennala")
POLICY_KEYS = {"none": (), "mishchenko2022": ("tau_c", "scale"), "koloskova2022": ("tau_c", "scale", "stale_step"),
               "wu2022": ("scale",), "ringmaster": ("R", "restart"), "rennala": ("S", "restart")}
"""The keys each policy reads (experiments/training/policies.py:OWN_KEYS); the others must be null."""
VISION_CLASSES = {"fashion_mnist": 10, "mnist": 10, "cifar10": 10}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")

PositiveInt = Annotated[int, Field(ge=1)]
NonNegativeInt = Annotated[int, Field(ge=0)]
PositiveFloat = Annotated[float, Field(gt=0)]
NonNegativeFloat = Annotated[float, Field(ge=0)]
Seconds = Annotated[float, Field(ge=0)]


class Frozen(BaseModel):
    """Base of every settings block: immutable, no unknown keys, strict types, finite floats."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)


def machine_cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS has one, else the CPU count)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


# ---------------------------------------------------------------------------------------------------- problem
class ProblemBase(Frozen):
    """Keys every problem has (conf/problem/*.yaml)."""

    name: str
    batch_size: PositiveInt
    target_loss: float | None
    hparams: dict[str, dict[str, Any]] = Field(strict=False)
    """The algorithms' defaults on this problem, read by the algorithm yaml files through interpolation."""
    max_train: PositiveInt | None = None
    max_test: PositiveInt | None = None
    init_std: NonNegativeFloat | None = None
    """Standard deviation of the initial iterate's entries (``+problem.init_std=``; absent: the problem's own)."""
    eval_batch_size: PositiveInt | None = None
    """Examples per forward pass when evaluating (``+problem.eval_batch_size=``; absent: the problem's own)."""

    @property
    def spec(self) -> dict:
        """The block as a plain dict, for :func:`problems.build_problem` (keys left unset are absent)."""
        return self.model_dump(exclude_none=False)


class LogregVision(ProblemBase):
    """Binary logistic regression on two classes of an image data set."""

    kind: Literal["logreg"]
    dataset: str | Annotated[dict[str, Any], Field(strict=False)]
    """A built-in image set (fashion_mnist, mnist, cifar10) or a mapping with ``_target_`` (problems/__init__.py)."""
    classes: tuple[NonNegativeInt, NonNegativeInt] = Field(strict=False)
    row_norm: Literal["unit"] | None
    l2: NonNegativeFloat

    @model_validator(mode="after")
    def _two_classes(self) -> LogregVision:
        n = VISION_CLASSES.get(self.dataset, 10) if isinstance(self.dataset, str) else 10**9
        a, b = self.classes
        if a == b or a >= n or b >= n:
            raise ValueError(f"problem.classes={list(self.classes)}: must be two different class indices in "
                             f"0..{n - 1}")
        return self


class LogregLibsvm(ProblemBase):
    """Binary logistic regression on a LIBSVM file (sparse)."""

    kind: Literal["logreg_libsvm"]
    path: str | None
    test_path: str | None
    n_features: PositiveInt | None
    zero_based: Literal["auto"] | bool
    l2: NonNegativeFloat

    @model_validator(mode="after")
    def _files(self) -> LogregLibsvm:
        if self.path is None:
            raise ValueError("problem.path=null: required for problem=logreg_libsvm (a LIBSVM file)")
        for key in ("path", "test_path"):
            value = getattr(self, key)
            if value is not None and not Path(value).is_file():
                raise ValueError(f"problem.{key}={value}: no such file")
        return self


class LogregRcv1like(ProblemBase):
    """Logistic regression on a synthetic, seeded set with rcv1.binary's shape (problems/rcv1like.py)."""

    kind: Literal["logreg_rcv1like"]
    seed: NonNegativeInt
    n_train: PositiveInt
    n_test: PositiveInt
    n_features: PositiveInt
    nnz_per_row: PositiveFloat
    l2: NonNegativeFloat


class Cnn(ProblemBase):
    """A convolutional net on an image data set (problems/cnn.py)."""

    kind: Literal["cnn"]
    model: str | Annotated[dict[str, Any], Field(strict=False)]
    """A built-in net (lenet5, allcnn, resnet18) or a mapping with ``_target_``: your own module's net."""
    dataset: str | Annotated[dict[str, Any], Field(strict=False)]
    standardize: bool


class CnnTiming(ProblemBase):
    """A net at its true size and gradient cost without its data: time per epoch only (problems/timing.py)."""

    kind: Literal["cnn_timing"]
    model: str | Annotated[dict[str, Any], Field(strict=False)]
    image_shape: tuple[PositiveInt, PositiveInt, PositiveInt] = Field(strict=False)
    classes: PositiveInt
    num_train: PositiveInt
    pool: PositiveInt
    seed: NonNegativeInt

    @field_validator("target_loss")
    @classmethod
    def _no_target(cls, v):
        if v is not None:
            raise ValueError(f"problem.target_loss={v}: a timing-only problem has no loss to reach (null)")
        return v


Problem = Annotated[LogregVision | LogregLibsvm | LogregRcv1like | Cnn | CnnTiming, Field(discriminator="kind")]


# ---------------------------------------------------------------------------------------------------- algorithm
class Policy(Frozen):
    """The async master's staleness policy (experiments/training/policies.py). A key another policy owns must be
    null (:data:`POLICY_KEYS`); a null key of the policy's own means its default."""

    name: Literal[POLICIES]  # type: ignore[valid-type]
    R: PositiveInt | None = None
    """ringmaster: the delay threshold, gradients with tau >= R are discarded (updates; null: P)."""
    S: PositiveInt | None = None
    """rennala: fresh gradients averaged per update (null: P)."""
    tau_c: PositiveInt | None = None
    """mishchenko2022, koloskova2022: the staleness up to which the full step is taken (updates; null: P)."""
    restart: bool | None = None
    """ringmaster, rennala: stop an in-flight computation whose delay reaches R (ringmaster) or that a round's end
    made stale (rennala) and restart its worker at the current iterate (null: false for ringmaster, true for
    rennala)."""
    scale: Literal["step", "gradient"] | None = None
    """Delay-adaptive policies: the factor s_k multiplies the step (AMSGrad's moments take the full gradient) or the
    gradient (the moments see s_k g too) (null: step, the sources' choice)."""
    stale_step: Literal["zero", "inverse"] | None = None
    """koloskova2022: the step of a gradient with tau > tau_c: 0 or alpha / tau (null: zero)."""

    @model_validator(mode="after")
    def _own_keys(self) -> Policy:
        own = POLICY_KEYS[self.name]
        for key in ("R", "S", "tau_c", "restart", "scale", "stale_step"):
            value = getattr(self, key)
            if value is not None and key not in own:
                shown = str(value).lower() if isinstance(value, bool) else value
                raise ValueError(f"algorithm.policy.{key}={shown}: not a key of policy {self.name!r}")
        return self

    @property
    def stops(self) -> bool:
        """Whether the engines stop and restart in-flight computations (``restart``, with its default)."""
        if self.name == "ringmaster":
            return bool(self.restart)
        return self.name == "rennala" and self.restart is not False


class Algorithm(Frozen):
    """An algorithm: its protocol, its update rule and the rule's hyperparameters (conf/algorithm/*.yaml).

    Keys beyond the declared ones are the rule's hyperparameters; the rule checks them itself
    (:func:`algorithms.build_rule`, called by :func:`experiments.settings.build.build_settings`)."""

    model_config = ConfigDict(frozen=True, extra="allow", strict=True, allow_inf_nan=False)

    name: str
    protocol: Literal["async", "sync"]
    rule: str
    lr_factor: PositiveFloat
    """Multiplies every alpha_k (lr and alpha_max): the step-size grid of an experiment."""
    policy: Policy
    sync_batch: Literal["split", "full"] | None = None
    """Sync protocol only: ``split`` the global batch across the workers, or a ``full`` batch each."""
    master_computes: bool | None = None
    """Async protocol only: the master computes a minibatch gradient itself whenever no worker gradient is waiting
    (the authors' OpenMP code, RPI-OPT/APAM ``OpenMP/test/LR_APAM.cc``), so P workers and the master are P + 1
    compute agents, the paper's thread count."""

    @model_validator(mode="after")
    def _protocol(self) -> Algorithm:
        if self.protocol == "sync" and self.sync_batch is None:
            raise ValueError("algorithm.sync_batch=null: a sync algorithm needs split or full")
        if self.protocol == "async" and self.sync_batch is not None:
            raise ValueError(f"algorithm.sync_batch={self.sync_batch}: a sync algorithm's key, not {self.name}'s")
        if self.protocol == "sync" and self.master_computes:
            raise ValueError("algorithm.master_computes=true: the master computing gradients is an async setting")
        if self.protocol == "sync" and self.policy.name != "none":
            raise ValueError(f"algorithm.policy.name={self.policy.name}: staleness policies apply to async "
                             "algorithms only (a sync round has tau = 0)")
        return self

    @property
    def hyperparameters(self) -> dict:
        """The rule's hyperparameters with ``lr_factor`` applied to ``lr`` and ``alpha_max``."""
        hp = dict(self.model_extra or {})
        if self.lr_factor != 1.0:
            if isinstance(hp.get("lr"), (int, float)):
                hp["lr"] = hp["lr"] * self.lr_factor
            if isinstance(hp.get("alpha_max"), (int, float)):
                hp["alpha_max"] = hp["alpha_max"] * self.lr_factor
        if isinstance(hp.get("bounds"), list):
            hp["bounds"] = tuple(hp["bounds"])
        return hp


# ---------------------------------------------------------------------------------------------------- delay
class NoDelay(Frozen):
    """Every gradient at the newest iterate (tau = 0)."""

    model: Literal["none"]


class FixedDelay(Frozen):
    """Artificial fixed delay: every gradient computed at x_{k - tau} once k >= tau."""

    model: Literal["fixed"]
    tau: NonNegativeInt


class UniformDelay(Frozen):
    """The paper's artificial delay (Sec. 5.4): each gradient at one of the min(D, k+1) newest iterates, uniformly,
    D = max_delay + 1."""

    model: Literal["uniform"]
    max_delay: NonNegativeInt


class TimingDelay(Frozen):
    """Staleness from the workers' compute-time law (experiments/training/delays.py:ComputeTimes)."""

    model: Literal["timing"]
    law: Literal["constant", "exponential", "lognormal", "pareto", "replay", "measured"]
    sigma: NonNegativeFloat
    slow_workers: NonNegativeInt
    slowdown: PositiveFloat
    spread: Literal["equal", "sqrt", "linear"]
    shape: float = Field(gt=1)
    replay: str | None

    @model_validator(mode="after")
    def _replay_file(self) -> TimingDelay:
        if self.law == "replay" and (self.replay is None or not Path(self.replay).is_file()):
            raise ValueError(f"delay.replay={self.replay}: law=replay needs an existing compute_times.csv")
        return self


Delay = Annotated[NoDelay | FixedDelay | UniformDelay | TimingDelay, Field(discriminator="model")]
ARTIFICIAL = ("fixed", "uniform")


# ---------------------------------------------------------------------------------------------------- engine
class Costs(Frozen):
    """Fixed costs of the simulated clock, seconds (null: from the calibration). ``grad_s`` is at batch_size."""

    grad_s: Seconds | None
    update_s: Seconds | None
    latency_s: Seconds | None
    overhead_s: Seconds | None
    overhead_idle_s: Seconds | None
    late_s: Seconds | None


class Fault(Frozen):
    """Fault injection for tests: worker ``kill_worker`` fails (``mode``) once handed an iterate of version >=
    ``at_update``."""

    mode: Literal["kill", "hang"]
    kill_worker: NonNegativeInt | None
    at_update: NonNegativeInt | None


class EngineBase(Frozen):
    """Keys every engine has."""

    warmup_updates: NonNegativeInt
    compute: Literal["real", "emulated"]
    compute_base_s: PositiveFloat | None


class Simulated(EngineBase):
    """One process, event-driven, exact staleness, the simulated clock (experiments/engines/simulated.py)."""

    name: Literal["simulated"]
    clock: Literal["simulated"]
    transport: Literal["shared_memory", "distributed"]
    calibration: str | None
    handoff: Literal["auto", "spin", "block"]
    """The hand-off of the modelled shared_memory engine: ``auto`` as that engine does (it spins when every process
    has a core of its own, else blocks), or fixed."""
    cores: PositiveInt | Literal["dedicated"] | None
    """Cores the master and the P workers share: null = this machine's, ``dedicated`` = one per process (as many
    as it takes; the dedicated-core clock), or a number (>= P + 1 gives every process its own)."""
    costs: Costs
    trace: str | None
    """A real run's timeline.csv: the trace-driven twin replays its times (experiments/engines/twin.py)."""

    @model_validator(mode="after")
    def _emulated(self) -> Simulated:
        if self.trace is not None and not Path(self.trace).is_file():
            raise ValueError(f"engine.trace={self.trace}: no such file (a real run's timeline.csv)")
        if self.compute == "emulated":
            if self.compute_base_s is None:
                raise ValueError("engine.compute_base_s=null: engine=simulated with engine.compute=emulated needs "
                                 "the base seconds of a gradient")
            if self.costs.grad_s is not None:
                raise ValueError(f"engine.costs.grad_s={self.costs.grad_s}: set either engine.costs.grad_s or "
                                 "engine.compute_base_s, not both")
        return self


class RealEngine(EngineBase):
    """Keys of both real engines (master and P worker processes, wall clock)."""

    clock: Literal["wall"]
    threads_per_worker: PositiveInt
    pin_workers: bool
    start_method: Literal["spawn", "forkserver"]
    timeout_s: PositiveFloat
    evaluation: Literal["snapshot", "drain"]
    snapshot_mb: PositiveFloat
    on_worker_loss: Literal["continue", "fail"]
    fault: Fault
    compute_wait: Literal["sleep", "spin"]
    predict: bool
    """After the run, the simulated clock's predictions of it (experiments/clock/predict.py) in its summary row."""


class SharedMemory(RealEngine):
    """A master and P worker processes on one machine, shared buffers (experiments/engines/shared_memory.py)."""

    name: Literal["shared_memory"]
    handoff: Literal["auto", "spin", "block"]
    colocate: bool


class Distributed(RealEngine):
    """torch.distributed master (rank 0) and P worker ranks (experiments/engines/distributed.py)."""

    name: Literal["distributed"]
    backend: Literal["auto", "gloo", "nccl"]
    master_addr: str
    master_port: int = Field(ge=1, le=65535)


Engine = Annotated[Simulated | SharedMemory | Distributed, Field(discriminator="name")]
WALL_ENGINES = ("shared_memory", "distributed")


# ---------------------------------------------------------------------------------------------------- tuning
class Tuning(Frozen):
    """How the tuning seed (``lr_tuning_seed``) tunes a setting's step size and, for Ringmaster and Rennala, R or S
    (experiments/sweeps/tuning.py): the step factors ``ratio^-steps .. ratio^steps`` (``algorithm.lr_factor``
    around the method's default), then while the best factor tried is the smallest or the largest one, the next
    factor beyond it, up to ``extend`` more on each side; then, at the chosen factor, ``policy_sizes`` capped at P
    as the policy's R or S."""

    ratio: float = Field(gt=1)
    """Neighbouring factors of the grid are this far apart (e.g. 4)."""
    steps: PositiveInt
    """Factors on each side of the default (the grid has 2 steps + 1)."""
    extend: NonNegativeInt
    """Factors added at most beyond each end of the grid while the best factor is at that end."""
    policy_sizes: tuple[PositiveInt, ...] = Field(strict=False)
    """Ringmaster's R / Rennala's S tried at the chosen step (capped at P); empty: not tuned."""

    @field_validator("policy_sizes")
    @classmethod
    def _distinct(cls, v: tuple[int, ...]) -> tuple[int, ...]:
        if len(set(v)) != len(v):
            raise ValueError(f"tuning.policy_sizes={list(v)}: values must be distinct")
        return tuple(sorted(v))

    def factors(self) -> list[float]:
        """The grid's factors, smallest first (exact powers of ``ratio``)."""
        return [self.ratio ** k for k in range(-self.steps, self.steps + 1)]


# ---------------------------------------------------------------------------------------------------- a run
class RunSettings(Frozen):
    """Everything one run is: the top-level keys of conf/config.yaml and the blocks of its config groups."""

    experiment_id: str
    """The experiment's folder under results_dir: a plain name (letters, digits, ``._+-``), never a path."""
    workers: NonNegativeInt
    """Worker processes P (0 only with ``algorithm.master_computes``: the master alone, the paper's one thread)."""
    seed: int = Field(ge=0, lt=SEED_LIMIT)
    epochs: PositiveFloat
    updates: PositiveInt | None
    batch_size: PositiveInt
    eval_every: PositiveFloat
    results_dir: str
    device: Literal["auto", "cpu", "cuda"]
    threads: PositiveInt
    force: bool
    progress: bool | None
    divergence_factor: float = Field(gt=0, allow_inf_nan=True)
    lr_tuning_seed: NonNegativeInt | None
    """The seed whose runs tune each setting's step size (``tuning``); runs of other seeds use its choice."""
    tuning: Tuning
    profile: Literal[PROFILES]  # type: ignore[valid-type]
    problem: Problem
    algorithm: Algorithm
    engine: Engine
    delay: Delay

    @field_validator("experiment_id")
    @classmethod
    def _plain_name(cls, v: str) -> str:
        if not _NAME.match(v) or v in (".", ".."):
            raise ValueError(f"experiment_id={v}: must be a plain folder name (letters, digits, '._+-'), not a path")
        return v

    @field_validator("results_dir")
    @classmethod
    def _folder(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("results_dir=: must name a folder")
        return v

    @field_validator("divergence_factor")
    @classmethod
    def _not_nan(cls, v: float) -> float:
        if math.isnan(v):
            raise ValueError("divergence_factor=nan: must be a number > 0 (.inf: never)")
        return v

    @model_validator(mode="after")
    def _together(self) -> RunSettings:
        """Rules that involve two blocks."""
        alg, d, e, p = self.algorithm, self.delay, self.engine, self.problem
        if self.workers == 0 and not alg.master_computes:
            raise ValueError("workers=0: needs algorithm.master_computes=true (the master alone computes and applies "
                             "every gradient); otherwise workers >= 1")
        if alg.protocol == "sync" and alg.sync_batch == "split" and self.batch_size < self.workers:
            raise ValueError(f"batch_size={self.batch_size}: a split sync batch needs batch_size >= workers "
                             f"({self.workers})")
        if d.model in ARTIFICIAL and alg.protocol == "sync":
            raise ValueError(f"delay={d.model}: an artificial delay applies to async algorithms only, not "
                             f"algorithm={alg.name} (use delay=none or delay=timing)")
        if d.model != "timing" and e.name != "simulated" and d.model != "none":
            raise ValueError(f"delay={d.model}: artificial delays exist on engine=simulated only")
        if e.name == "simulated" and alg.protocol == "async" and d.model == "none" and self.workers > 1:
            raise ValueError(f"delay=none with workers={self.workers}: every gradient at the newest iterate is a "
                             "free lunch no real system has; use delay=timing (staleness from the timing model)")
        if d.model == "uniform" and self.updates is not None and 0 < d.max_delay and d.max_delay >= self.updates:
            raise ValueError(f"delay.max_delay={d.max_delay}: must be below the run's {self.updates} updates (a "
                             "delay never reached is a degenerate run)")
        if d.model == "timing" and d.slow_workers > self.workers:
            raise ValueError(f"delay.slow_workers={d.slow_workers}: must be <= workers ({self.workers})")
        if alg.master_computes and d.model in ARTIFICIAL:
            raise ValueError(f"algorithm.master_computes=true: with delay={d.model} no compute timing says when the "
                             "master is idle (use delay=timing)")
        if alg.policy.stops:
            self._stops_here()
        if alg.policy.name in ("ringmaster", "rennala") and self.updates is not None:
            raise ValueError(f"updates={self.updates}: policy {alg.policy.name} discards gradients, so a run's "
                             "length must be given in epochs (gradients computed), not in updates")
        if e.name in WALL_ENGINES and e.fault.kill_worker is not None and e.fault.kill_worker >= self.workers:
            raise ValueError(f"engine.fault.kill_worker={e.fault.kill_worker}: must be a worker id in "
                             f"[0, {self.workers - 1}]")
        if p.kind == "cnn_timing" and e.name != "simulated" and e.compute != "emulated":
            raise ValueError(f"engine={e.name}: problem={p.name} is timing-only (zero-cost gradients of a net "
                             "without its data): it runs on engine=simulated, or on a real engine with "
                             "engine.compute=emulated")
        return self

    def _stops_here(self) -> None:
        """``algorithm.policy.restart`` (stopping in-flight computations) where the engine can stop one: not with an
        artificial delay or a replayed trace (no computation runs to be stopped), not with the shared-memory
        engine's spinning hand-off (its reply row holds one reply: a stopped computation's late reply could be
        overwritten), not on torchrun ranks (a process on another machine cannot be interrupted)."""
        p, d, e = self.algorithm.policy, self.delay, self.engine
        key = f"algorithm.policy.restart={'true' if p.restart else 'null'}"
        if d.model in ARTIFICIAL:
            raise ValueError(f"{key}: {p.name} stops computations, which needs delay=timing (delay={d.model} draws "
                             "the staleness, no computation runs to be stopped); set algorithm.policy.restart=false")
        if e.name == "simulated" and e.trace is not None:
            raise ValueError(f"{key}: a replayed trace (engine.trace) fixes every gradient's times, none can be "
                             "stopped; set algorithm.policy.restart=false")
        if e.name == "shared_memory" and e.handoff == "spin":
            raise ValueError(f"{key}: engine.handoff=spin keeps one reply per worker, a stopped computation's late "
                             "reply could be overwritten; use engine.handoff=auto or block")
        if e.name == "distributed" and all(k in os.environ for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR")):
            raise ValueError(f"{key}: torchrun's worker ranks may run on other machines and cannot be interrupted; "
                             "stops need workers the master starts itself (python -m experiments.run) or "
                             "algorithm.policy.restart=false")

    # ------------------------------------------------------------------ derived quantities, each computed here once
    @property
    def worker_batches(self) -> list[int]:
        """Minibatch size of each worker's gradient: ``batch_size`` each (async; sync with ``sync_batch=full``), or
        the global ``batch_size`` split across the P workers as evenly as possible (sync, ``split``: the first
        ``batch_size mod P`` workers take one more)."""
        P, B = self.workers, self.batch_size
        if self.algorithm.protocol == "sync" and self.algorithm.sync_batch == "split":
            q, r = divmod(B, P)
            return [q + 1 if w < r else q for w in range(P)]
        return [B] * P

    @property
    def agents(self) -> int:
        """Compute agents: the P workers, plus the master where it computes gradients too (the paper's threads)."""
        return self.workers + (1 if self.algorithm.master_computes else 0)

    @property
    def samples_per_update(self) -> int:
        """Samples one update consumes: the round's (sync) or one gradient's (async)."""
        return sum(self.worker_batches) if self.algorithm.protocol == "sync" else self.batch_size

    def planned_updates(self, num_train: int) -> int:
        """The run's length in updates: ``updates`` when set, else ``ceil(epochs x N / samples_per_update)``."""
        if self.updates is not None:
            return int(self.updates)
        return math.ceil(self.epochs * num_train / self.samples_per_update)

    def run_limits(self, num_train: int) -> tuple[float, float]:
        """(updates, samples) the run stops at, one of them infinite: ``updates`` when set, else ``epochs`` x N
        samples."""
        if self.updates is not None:
            return float(self.updates), math.inf
        return math.inf, float(self.epochs) * num_train

    def shared_cores(self) -> int | None:
        """The cores the run's processes share, when they share them: ``engine.cores`` (null: this machine's);
        None when every process has a core of its own -- ``dedicated``, at least P + 1 cores, a real engine (its
        processes share whatever the machine has, measured), or emulated compute (a waiting worker takes no core)."""
        e = self.engine
        if e.name != "simulated" or e.cores == "dedicated" or e.compute == "emulated":
            return None
        c = int(e.cores) if e.cores is not None else machine_cores()
        return None if c >= self.workers + 1 else c

    def modelled_handoff(self) -> str | None:
        """The hand-off whose message costs the simulated clock charges: ``engine.handoff``, or for ``auto`` what the
        modelled shared_memory engine would do on the clock's cores -- ``spin`` when the P workers and the master
        each have one (``dedicated``, or at least P + 1), else ``block``; None for a transport without hand-offs."""
        e = self.engine
        if e.name != "simulated" or e.transport != "shared_memory":
            return None
        if e.handoff != "auto":
            return e.handoff
        c = e.cores if e.cores is not None else machine_cores()
        return "spin" if c == "dedicated" or int(c) >= self.workers + 1 else "block"

    def total_epochs(self, num_train: int) -> float:
        """The run's length in epochs (``updates`` x batch_size / N when the length is given in updates)."""
        if self.updates is not None:
            return self.updates * self.batch_size / num_train
        return float(self.epochs)
