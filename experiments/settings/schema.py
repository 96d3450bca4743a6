"""The typed settings of one run: every key of the composed Hydra config, its type and its bounds.

The blocks live in their own modules (fields, problem, algorithm, engine); this one holds the run and the tuning and
re-exports the blocks. The defaults live in the yaml files under ``conf/`` (one place); these classes declare what a
value may be. A field without a default is required: the yaml always sets it. The few defaults here are ``None`` for
keys that exist only in some options (``algorithm.sync_batch`` is a sync algorithm's) or that a user may add
(``+problem.init_std=``). Validation is pydantic's (strict types: ``workers=2.5`` or ``force=maybe`` are refused;
floats are finite unless a field says otherwise); the cross-field rules are the ``model_validator`` methods.
:func:`experiments.settings.build.build_settings` turns a failure into one :class:`experiments.errors.ConfigError`
line naming the key and the value.
"""

from __future__ import annotations

import math
import os
from pathlib import PurePosixPath
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from experiments.settings.algorithm import Algorithm, Policy
from experiments.settings.engine import (
    ARTIFICIAL,
    WALL_ENGINES,
    Costs,
    Delay,
    Distributed,
    Engine,
    Fault,
    FixedDelay,
    NoDelay,
    SharedMemory,
    Simulated,
    TimingDelay,
    UniformDelay,
)
from experiments.settings.fields import (
    MAX_NAME,
    MAX_THREADS,
    MAX_WORKERS,
    NAME,
    POLICIES,
    POLICY_KEYS,
    PROFILES,
    SEED_LIMIT,
    Frozen,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    machine_cores,
)
from experiments.settings.problem import Cnn, CnnTiming, LogregLibsvm, LogregRcv1like, LogregVision, Problem

__all__ = [
    "ARTIFICIAL",
    "POLICIES",
    "POLICY_KEYS",
    "PROFILES",
    "SEED_LIMIT",
    "WALL_ENGINES",
    "Algorithm",
    "Cnn",
    "CnnTiming",
    "Costs",
    "Delay",
    "Distributed",
    "Engine",
    "Fault",
    "FixedDelay",
    "LogregLibsvm",
    "LogregRcv1like",
    "LogregVision",
    "NoDelay",
    "Policy",
    "Problem",
    "RunSettings",
    "SharedMemory",
    "Simulated",
    "TimingDelay",
    "Tuning",
    "UniformDelay",
    "machine_cores",
]


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

    @model_validator(mode="after")
    def _factors_finite(self) -> Tuning:
        """The grid's widest factors, ``ratio^+-(steps + extend)``, are floats > 0 (tuning.ratio=1e308 made a factor
        of 0: "algorithm.lr_factor=0.0: must be > 0", a value the user never gave)."""
        n = self.steps + self.extend
        try:
            wide = self.ratio**n
        except OverflowError:
            wide = math.inf
        if not (math.isfinite(wide) and 1 / wide > 0 and wide < 1e300):
            raise ValueError(
                f"tuning.ratio={self.ratio:g}: its widest factors ratio^+-{n} (steps + extend) leave the float range"
            )
        return self

    @field_validator("policy_sizes")
    @classmethod
    def _distinct(cls, v: tuple[int, ...]) -> tuple[int, ...]:
        if len(set(v)) != len(v):
            raise ValueError(f"tuning.policy_sizes={list(v)}: values must be distinct")
        return tuple(sorted(v))

    def factors(self) -> list[float]:
        """The grid's factors, smallest first (exact powers of ``ratio``)."""
        return [self.ratio**k for k in range(-self.steps, self.steps + 1)]


# ---------------------------------------------------------------------------------------------------- a run
class RunSettings(Frozen):
    """Everything one run is: the top-level keys of conf/config.yaml and the blocks of its config groups."""

    experiment_id: str
    """The experiment's folder under results_dir: a plain name (letters, digits, ``._+-``), never a path, of at most
    :data:`~experiments.settings.fields.MAX_NAME` characters."""
    workers: Annotated[int, Field(ge=0, le=MAX_WORKERS)]
    """Worker processes P (0 only with ``algorithm.master_computes``: the master alone, the paper's one thread)."""
    seed: int = Field(ge=0, lt=SEED_LIMIT)
    epochs: PositiveFloat
    updates: Annotated[int, Field(ge=1, lt=SEED_LIMIT)] | None
    """The run's length in master updates (None: ``epochs``); below 2^62, the engines' 64-bit counters."""
    batch_size: PositiveInt
    eval_every: PositiveFloat
    results_dir: str
    device: Literal["auto", "cpu", "cuda"]
    threads: Annotated[int, Field(ge=1, le=MAX_THREADS)]
    force: bool
    progress: bool | None
    divergence_factor: float = Field(gt=1, allow_inf_nan=True)
    """A run diverged once its training loss exceeds this many times its initial loss (.inf: never); above 1, so
    that the initial loss itself is no divergence."""
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
        if not NAME.match(v) or v in (".", ".."):
            raise ValueError(f"experiment_id={v}: must be a plain folder name (letters, digits, '._+-'), not a path")
        if len(v) > MAX_NAME:
            raise ValueError(f"experiment_id={v[:20]}...: {len(v)} characters, at most {MAX_NAME}")
        return v

    @field_validator("results_dir")
    @classmethod
    def _folder(cls, v: str) -> str:
        if not v.strip():
            raise ValueError(f"results_dir={v!r}: must name a folder")
        parts = PurePosixPath(v).parts
        if parts[0].startswith("~"):  # quoted on the command line: the shell left it, and a folder '~' would be made
            raise ValueError(
                f"results_dir={v}: '{parts[0]}' is not expanded here (write the path out, or let the shell expand it "
                "unquoted)"
            )
        climbs = [i for i, part in enumerate(parts) if part == ".."]
        if any(parts[j] not in ("..", "/") for i in climbs for j in range(i)):
            # Hydra creates <results_dir>/.hydra before any check of ours, and creating a/x/../y creates a/x too
            raise ValueError(f"results_dir={v}: a '..' after a folder name; write the folder as {os.path.normpath(v)}")
        return v

    @field_validator("divergence_factor")
    @classmethod
    def _not_nan(cls, v: float) -> float:
        if math.isnan(v):
            raise ValueError("divergence_factor=nan: must be a number > 1 (.inf: never)")
        return v

    @model_validator(mode="after")
    def _together(self) -> RunSettings:
        """Rules that involve two blocks."""
        alg, d, e, p = self.algorithm, self.delay, self.engine, self.problem
        if self.workers == 0 and not alg.master_computes:
            raise ValueError(
                "workers=0: needs algorithm.master_computes=true (the master alone computes and applies "
                "every gradient); otherwise workers >= 1"
            )
        if alg.protocol == "sync" and alg.sync_batch == "split" and self.batch_size < self.workers:
            raise ValueError(
                f"batch_size={self.batch_size}: a split sync batch needs batch_size >= workers ({self.workers})"
            )
        if d.model in ARTIFICIAL and alg.protocol == "sync":
            raise ValueError(
                f"delay={d.model}: an artificial delay applies to async algorithms only, not "
                f"algorithm={alg.name} (use delay=none or delay=timing)"
            )
        if d.model != "timing" and e.name != "simulated" and d.model != "none":
            raise ValueError(f"delay={d.model}: artificial delays exist on engine=simulated only")
        key = {"fixed": "tau", "uniform": "max_delay"}.get(d.model)  # a delay of 0 is delay=none by another name
        lunch = "delay=none" if d.model == "none" else f"delay.{key}=0" if key and getattr(d, key) == 0 else None
        if e.name == "simulated" and alg.protocol == "async" and lunch and self.workers > 1:
            instead = f"delay.{key} >= 1 or " if key else ""
            raise ValueError(
                f"{lunch} with workers={self.workers}: every gradient at the newest iterate is a free lunch no real "
                f"system has; use {instead}delay=timing (staleness from the timing model)"
            )
        why = alg.policy.fixed_delay_problem(d.tau, self.workers) if d.model == "fixed" else None
        if why is not None:
            raise ValueError(f"delay.tau={d.tau}: {why}")
        if self.updates is not None:
            self.check_length(self.updates)
        if d.model == "timing" and d.slow_workers > self.workers:
            raise ValueError(f"delay.slow_workers={d.slow_workers}: must be <= workers ({self.workers})")
        if alg.master_computes and d.model in ARTIFICIAL:
            raise ValueError(
                f"algorithm.master_computes=true: with delay={d.model} no compute timing says when the "
                "master is idle (use delay=timing)"
            )
        if alg.policy.stops:
            self._stops_here()
        if alg.policy.name in ("ringmaster", "rennala") and self.updates is not None:
            raise ValueError(
                f"updates={self.updates}: policy {alg.policy.name} discards gradients, so a run's "
                "length must be given in epochs (gradients computed), not in updates"
            )
        if e.name in WALL_ENGINES and e.fault.kill_worker is not None and e.fault.kill_worker >= self.workers:
            raise ValueError(
                f"engine.fault.kill_worker={e.fault.kill_worker}: must be a worker id in [0, {self.workers - 1}]"
            )
        if e.name == "shared_memory" and e.colocate and (e.handoff == "spin" or self.workers != 1):
            why = (
                "engine.handoff=spin (a spinning master on its worker's CPU would take the worker's core)"
                if e.handoff == "spin"
                else f"workers={self.workers} (it puts the master on the one worker's CPU)"
            )
            raise ValueError(f"engine.colocate=true: applies to a P = 1 run with the blocking hand-off, not {why}")
        if p.kind == "cnn_timing" and e.name != "simulated" and e.compute != "emulated":
            raise ValueError(
                f"engine={e.name}: problem={p.name} is timing-only (zero-cost gradients of a net "
                "without its data): it runs on engine=simulated, or on a real engine with "
                "engine.compute=emulated"
            )
        return self

    def length_bound(self) -> bool:
        """Whether :meth:`check_length` has anything to check: a delay, a fault or a Rennala round the run's length
        must exceed (with the length in epochs, the check needs the data set's size)."""
        fault = self.engine.name in WALL_ENGINES and self.engine.fault.at_update is not None
        return self.delay.model in ("fixed", "uniform") or fault or self.algorithm.policy.name == "rennala"

    def check_length(self, updates: int) -> None:
        """The run's length in updates (``updates``, or ``epochs`` turned into updates once the problem's size is
        known: :func:`experiments.settings.preflight.make_problem`) is longer than every delay and fault it names,
        and than Rennala's round of S gradients (its length is in epochs: gradients computed).

        Raises:
            ValueError: ``delay.tau=<t>: must be below the run's <n> updates ...`` and the like (a delay or a fault
                never reached is a degenerate run).
        """
        d, e = self.delay, self.engine
        if self.algorithm.protocol == "async" and self.workers > updates:
            raise ValueError(
                f"workers={self.workers}: more workers than the run's {updates} updates; at least "
                f"{self.workers - updates} would never deliver a gradient (fewer workers, or a longer run)"
            )
        if d.model == "uniform" and 0 < d.max_delay and d.max_delay >= updates:
            raise ValueError(
                f"delay.max_delay={d.max_delay}: must be below the run's {updates} updates (a "
                "delay never reached is a degenerate run)"
            )
        if d.model == "fixed" and d.tau >= updates:
            raise ValueError(
                f"delay.tau={d.tau}: must be below the run's {updates} updates (a delay never reached is a "
                "degenerate run)"
            )
        at = e.fault.at_update if e.name in WALL_ENGINES else None
        if at is not None and at >= updates:
            raise ValueError(f"engine.fault.at_update={at}: must be below the run's {updates} updates (never fires)")
        p = self.algorithm.policy
        S = (p.S or self.workers) if p.name == "rennala" else None
        if S is not None and S > updates:  # its length is in epochs: ``updates`` counts the gradients computed
            raise ValueError(
                f"algorithm.policy.S={S}: an update averages S gradients and the run computes {updates}: it would "
                "make no update (fewer workers' gradients per round, or a longer run)"
            )

    def _stops_here(self) -> None:
        """``algorithm.policy.restart`` (stopping in-flight computations) where the engine can stop one: not with an
        artificial delay or a replayed trace (no computation runs to be stopped), not with the shared-memory
        engine's spinning hand-off (its reply row holds one reply: a stopped computation's late reply could be
        overwritten), not on torchrun ranks (a process on another machine cannot be interrupted)."""
        from experiments.engines.dist_group import under_torchrun  # torch.distributed: loaded only here

        p, d, e = self.algorithm.policy, self.delay, self.engine
        key = f"algorithm.policy.restart={'true' if p.restart else 'null'}"
        if d.model in ARTIFICIAL:
            raise ValueError(
                f"{key}: {p.name} stops computations, which needs delay=timing (delay={d.model} draws "
                "the staleness, no computation runs to be stopped); set algorithm.policy.restart=false"
            )
        if e.name == "simulated" and e.trace is not None:
            raise ValueError(
                f"{key}: a replayed trace (engine.trace) fixes every gradient's times, none can be "
                "stopped; set algorithm.policy.restart=false"
            )
        if e.name == "shared_memory" and e.handoff == "spin":
            raise ValueError(
                f"{key}: engine.handoff=spin keeps one reply per worker, a stopped computation's late "
                "reply could be overwritten; use engine.handoff=auto or block"
            )
        if e.name == "distributed" and under_torchrun():
            raise ValueError(
                f"{key}: torchrun's worker ranks may run on other machines and cannot be interrupted; "
                "stops need workers the master starts itself (python -m experiments.run) or "
                "algorithm.policy.restart=false"
            )

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
        """The run's length in updates: ``updates`` when set, else ``ceil(epochs x N / samples_per_update)``.

        Raises:
            ValueError: ``epochs`` asks for 2^62 updates or more (``epochs=1e308``), or for less than one."""
        if self.updates is not None:
            return int(self.updates)
        updates = self.epochs * num_train / self.samples_per_update
        if not updates < SEED_LIMIT:  # math.ceil(inf) is an OverflowError; the engines count in 64 bits
            raise ValueError(
                f"epochs={self.epochs:g}: more updates of {self.samples_per_update} samples than the engines' counters "
                "hold (below 2^62)"
            )
        if updates < 1:  # epochs=1e-320 ran one whole update, 10^317 times what was asked
            raise ValueError(
                f"epochs={self.epochs!r}: less than one update of {self.samples_per_update} of the {num_train} "
                f"training examples (at least epochs={self.samples_per_update / num_train:.3g})"
            )
        return math.ceil(updates)

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
