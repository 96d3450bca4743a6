"""Staleness policies of the master: what an async master does with a gradient of staleness tau (issue 14).

A policy sits between the arrival of a gradient and the update rule, so it composes with any rule (SGD or AMSGrad)
and runs on every engine (all of them feed :class:`experiments.training.master.Master`). Without a policy (``none``, the
default) the master applies every gradient on arrival with the rule's own step, as in APAM.md §1.

Notation: k = updates applied so far (the master's version), tau = k - the version the gradient was computed at,
alpha_k = the rule's step size from its schedule, s_k = the factor a policy puts on it (the rule steps with
s_k * alpha_k; for AMSGrad the moments m, v, vhat still take the gradient whatever s_k is).

- ``mishchenko2022``: Mishchenko, Bach, Even, Woodworth, "Asynchronous SGD beats minibatch SGD under arbitrary
  delays", NeurIPS 2022, delay-adaptive stepsize gamma_k = min(gamma, 1 / (4 L tau_k)) with gamma = 1 / (4 L n)
  (n workers), i.e. ``s_k = min(1, tau_c / tau_k)``: the full step while tau_k <= tau_c (default tau_c = n = P),
  then shrinking like 1 / tau_k. Every gradient is applied. Checked against the authors' public code
  (github.com/konstmish/asynchronous_sgd, code.ipynb, ``lr * num_workers / max(num_workers, delay)`` with delay =
  updates since the worker took its iterate): the same factor with tau_c = n.
- ``wu2022``: Wu, Magnusson, Feyzmahdavian, Johansson, "Delay-adaptive step-sizes for asynchronous learning",
  ICML 2022: their step-size principle gamma_k <= max(0, gamma' - sum_{t = k - tau_k}^{k-1} gamma_t) taken with
  equality, gamma' = alpha_k: ``s_k = max(0, 1 - sum_{t = k - tau_k}^{k-1} s_t)`` -- the steps taken while the
  gradient was computed use up its budget (a constant delay tau gives one full step every tau + 1 updates). Every
  gradient is applied (with s_k = 0 the iterate does not move, but k still advances, as in the paper).
- ``ringmaster``: Maranjyan, Tyurin, Richtarik, "Ringmaster ASGD: the first asynchronous SGD with optimal time
  complexity", ICML 2025: a gradient with ``tau > R`` is discarded (not applied; the worker gets the current
  iterate), every other one is applied with the rule's step. R is the largest staleness applied.
- ``rennala``: Tyurin, Richtarik, "Optimal time complexities of parallel stochastic optimization methods under a
  fixed computation model", NeurIPS 2023 (Rennala SGD): the master collects S gradients computed at its current
  iterate (tau = 0), discards every other gradient, and applies one update with the mean of the S (default S = P).
  Unlike the paper's method, the engines do not interrupt a worker when the round ends: a worker busy at the old
  iterate finishes its gradient (which is then discarded) before it gets the new one, so our Rennala wastes more
  compute time than the paper's (with S = P and equal workers about half the gradients are discarded).

Discarded gradients are counted in :attr:`Master.discarded` (trace and summary column ``discarded``); the staleness
columns and the histogram describe the applied updates only.

The formulas of mishchenko2022 and wu2022 are written in terms of the harness's own alpha_k (the papers' constants L
and gamma' are unknown in practice; the base step is tuned instead). mishchenko2022 agrees with the authors' code;
wu2022 is the paper's step-size principle taken with equality (its "Adaptive 1"-type policy) as we read the paper
(arXiv 2202.08550, Sec. 3): no code of the authors' was found to check it against.
"""
from __future__ import annotations

from typing import Any

import torch

POLICIES = ("none", "mishchenko2022", "wu2022", "ringmaster", "rennala")
DISCARDING = ("ringmaster", "rennala")
"""Policies that may drop gradients: a run of ``updates=K`` would not know how many gradients to hand out."""


class PolicyError(ValueError):
    """A bad policy setting; the message names the key (``algorithm.policy.<key>``) and the value."""


def _int_at_least(key: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise PolicyError(f"algorithm.policy.{key}={value!r}: must be an integer >= {minimum}")
    return value


class ScaledSchedule:
    """A rule's schedule times a factor the policy sets before each step: ``__call__(k) = scale * base(k)``."""

    def __init__(self, base) -> None:
        self.base = base
        self.scale = 1.0

    def __call__(self, k: int) -> float:
        return self.scale * self.base(k)


class Policy:
    """Base class. ``receive(master, g, tau, worker) -> bool`` decides and, to apply, calls
    ``master._apply(g, tau, worker)``; returns True when an update was applied.

    Class attributes: ``name``; ``scales_step`` (True: the master wraps the rule's schedule in a
    :class:`ScaledSchedule` and the policy sets ``self.schedule.scale``).
    """

    name = "none"
    scales_step = False
    schedule: ScaledSchedule | None = None

    @property
    def pending(self) -> int:
        """Gradients received and held, neither applied nor discarded yet (Rennala's round being collected)."""
        return 0

    def receive(self, master, g: torch.Tensor, tau: int, worker: int | None) -> bool:  # pragma: no cover
        raise NotImplementedError


class Mishchenko2022(Policy):
    """s_k = min(1, tau_c / tau_k) (module docstring). ``tau_c`` >= 1. ``last_scale``: the s of the last update."""

    name = "mishchenko2022"
    scales_step = True

    def __init__(self, tau_c: int) -> None:
        self.tau_c = tau_c
        self.last_scale = 1.0

    def receive(self, master, g, tau, worker) -> bool:
        s = 1.0 if tau <= self.tau_c else self.tau_c / tau
        self.schedule.scale = self.last_scale = s
        master._apply(g, tau, worker)
        return True


class Wu2022(Policy):
    """s_k = max(0, 1 - sum of the s of the tau_k updates applied since the gradient's iterate) (module docstring).
    Keeps the running sums of s (one float per update). ``last_scale``: the s of the last update."""

    name = "wu2022"
    scales_step = True

    def __init__(self) -> None:
        self._cum = [0.0]  # _cum[k] = s_0 + ... + s_{k-1}
        self.last_scale = 1.0

    def receive(self, master, g, tau, worker) -> bool:
        cum = self._cum
        k = len(cum) - 1
        s = max(0.0, 1.0 - (cum[k] - cum[k - tau]))
        self.schedule.scale = self.last_scale = s
        master._apply(g, tau, worker)
        cum.append(cum[k] + s)
        return True


class Ringmaster(Policy):
    """Discard a gradient with tau > R; apply the others with the rule's step. ``R`` >= 0."""

    name = "ringmaster"

    def __init__(self, R: int) -> None:
        self.R = R

    def receive(self, master, g, tau, worker) -> bool:
        if tau > self.R:
            master._discard()
            return False
        master._apply(g, tau, worker)
        return True


class Rennala(Policy):
    """Collect S gradients computed at the current iterate (tau = 0), discard the others; one update with their
    mean (staleness 0, worker None). ``S`` >= 1."""

    name = "rennala"

    def __init__(self, S: int) -> None:
        self.S = S
        self._sum: torch.Tensor | None = None
        self._count = 0

    @property
    def pending(self) -> int:
        return self._count

    def receive(self, master, g, tau, worker) -> bool:
        if tau != 0:
            master._discard()
            return False
        if self._sum is None:
            self._sum = g.detach().clone()
        elif self._count == 0:
            self._sum.copy_(g)
        else:
            self._sum.add_(g)
        self._count += 1
        if self._count < self.S:
            return False
        self._count = 0
        master._apply(self._sum.div_(self.S), 0, None)
        return True


def build_policy(spec: Any, workers: int, protocol: str = "async") -> Policy | None:
    """The policy of ``algorithm.policy``: None for ``none``.

    Args:
        spec: None, a policy name, or a mapping with ``name`` and the policy's keys (``R``, ``S``, ``tau_c``;
            None means the default: S = tau_c = ``workers``; R has no default).
        workers: P, the number of workers.
        protocol: ``async`` or ``sync``; a sync round has tau = 0 and takes no policy.

    Raises:
        PolicyError (a ValueError) naming ``algorithm.policy.<key>`` and the value: unknown name, a key of another
        policy set, a missing or bad R, S or tau_c, or a policy with the sync protocol.
    """
    if spec is None or isinstance(spec, str):
        spec = {"name": spec or "none"}
    spec = dict(spec)
    name = spec.pop("name", "none") or "none"
    if name not in POLICIES:
        raise PolicyError(f"algorithm.policy.name={name!r}: must be one of {', '.join(POLICIES)}")
    own = {"none": (), "mishchenko2022": ("tau_c",), "wu2022": (), "ringmaster": ("R",), "rennala": ("S",)}[name]
    unknown = sorted(k for k in spec if k not in ("R", "S", "tau_c"))
    if unknown:
        raise PolicyError(f"algorithm.policy.{unknown[0]}: no such key (keys: name, R, S, tau_c)")
    stray = sorted(k for k, v in spec.items() if v is not None and k not in own)
    if stray:
        raise PolicyError(f"algorithm.policy.{stray[0]}={spec[stray[0]]!r}: not a key of policy {name!r}")
    if name == "none":
        return None
    if protocol != "async":
        raise PolicyError(f"algorithm.policy.name={name}: staleness policies apply to async algorithms only "
                          f"(a sync round has tau = 0)")
    if name == "mishchenko2022":
        tau_c = spec.get("tau_c")
        return Mishchenko2022(_int_at_least("tau_c", workers if tau_c is None else tau_c, 1))
    if name == "wu2022":
        return Wu2022()
    if name == "ringmaster":
        if spec.get("R") is None:
            raise PolicyError("algorithm.policy.R=null: ringmaster needs R, the largest staleness applied")
        return Ringmaster(_int_at_least("R", spec["R"], 0))
    S = spec.get("S")
    return Rennala(_int_at_least("S", workers if S is None else S, 1))
