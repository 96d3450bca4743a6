"""The ``algorithm`` block: protocol, update rule, its hyperparameters and the staleness policy
(conf/algorithm/*.yaml)."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, ValidationInfo, field_validator, model_validator

from experiments.settings.fields import POLICIES, POLICY_KEYS, Frozen, Name, PositiveFloat, PositiveInt, not_blank


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

    def fixed_delay_problem(self, tau: int, workers: int) -> str | None:
        """Why a fixed delay ``tau`` leaves this policy nothing to apply after its first updates, or None. Under
        ``delay=fixed`` update k's gradient has staleness min(tau, k) (experiments/training/delays.py); the policies
        (experiments/training/policies.py) then: ringmaster discards tau_k >= R, so with tau >= R every gradient
        once k = R (k then never advances); koloskova2022 with ``stale_step`` zero steps 0 for tau_k > tau_c, so
        with tau > tau_c every update after the first tau_c + 1; rennala discards tau_k != 0, so with tau >= 1
        every gradient after its first round. (R, S, tau_c null: ``workers``.)"""
        R, tau_c, S = (workers if v is None else v for v in (self.R, self.tau_c, self.S))
        if self.name == "ringmaster" and tau >= R:
            return (
                f"at or above policy ringmaster's threshold R={R} (algorithm.policy.R; null: workers): every "
                f"gradient after the first {R} updates would be discarded (a delay.tau below R, a larger R, or "
                "delay=uniform)"
            )
        if self.name == "koloskova2022" and self.stale_step in (None, "zero") and tau > tau_c:
            return (
                f"above policy koloskova2022's threshold tau_c={tau_c} (algorithm.policy.tau_c; null: workers): every "
                f"update after the first {tau_c + 1} would take step 0 (a delay.tau <= tau_c, "
                "algorithm.policy.stale_step=inverse, or delay=uniform)"
            )
        if self.name == "rennala" and tau >= 1:
            return (
                "policy rennala applies gradients of staleness 0 only: every gradient after its first round of "
                f"S={S} would be discarded (use delay=uniform or delay=timing)"
            )
        return None

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

    name: Name
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

    @field_validator("name", "rule")
    @classmethod
    def _named(cls, v: str, info: ValidationInfo) -> str:
        if v.strip():
            return v
        if info.field_name == "rule":
            from algorithms import rule_names  # the registry, read for the message only

            return not_blank("algorithm.rule", v, f"name an update rule ({', '.join(rule_names())})")
        return not_blank(
            "algorithm.name",
            v,
            "be a name (the summary's algorithm column; leave algorithm.name out for the option's own)",
        )

    @model_validator(mode="after")
    def _protocol(self) -> Algorithm:
        if (self.model_extra or {}).get("lr") is None:  # a rule's default step would not show in config.yaml
            raise ValueError("algorithm.lr: is required (the step size alpha; a rule's own default is never used)")
        if self.protocol == "sync" and self.sync_batch is None:
            raise ValueError("algorithm.sync_batch=null: a sync algorithm needs split or full")
        if self.protocol == "async" and self.sync_batch is not None:
            raise ValueError(f"algorithm.sync_batch={self.sync_batch}: a sync algorithm's key, not {self.name}'s")
        if self.protocol == "sync" and self.master_computes:
            raise ValueError("algorithm.master_computes=true: the master computing gradients is an async setting")
        if self.protocol == "sync" and self.policy.name != "none":
            raise ValueError(
                f"algorithm.policy.name={self.policy.name}: staleness policies apply to async "
                "algorithms only (a sync round has tau = 0)"
            )
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
