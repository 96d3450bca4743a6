"""Staleness policies of the master: what an async master does with a gradient of staleness tau.

A policy sits between the arrival of a gradient and the update rule, so it composes with any rule (SGD or AMSGrad)
and runs on every engine (all of them feed :class:`experiments.training.master.Master`). Without a policy (``none``, the
default) the master applies every gradient on arrival with the rule's own step, as in APAM.md §1.

Notation: k = updates applied so far (the master's version), tau_k = k - the version the gradient was computed at,
alpha_k = the rule's step size from its schedule, s_k = the factor a delay-adaptive policy puts on the update.

Delay-adaptive policies (every gradient is applied, each update advances k, as in the sources' algorithms):

- ``mishchenko2022``: Mishchenko, Bach, Even, Woodworth, "Asynchronous SGD beats minibatch SGD under arbitrary
  delays", NeurIPS 2022, delay-adaptive stepsize gamma_k = min(gamma, 1 / (4 L tau_k)) with gamma = 1 / (4 L n):
  ``s_k = min(1, tau_c / tau_k)`` (default tau_c = P). The authors' code (github.com/konstmish/asynchronous_sgd,
  code.ipynb) steps ``lr * num_workers / max(num_workers, delay)``: the same factor with tau_c = n.
- ``koloskova2022``: Koloskova, Stich, Jaggi, "Sharper convergence guarantees for asynchronous SGD for distributed
  and federated learning", NeurIPS 2022 (arXiv 2206.08307; numbering of the submission text we read), Theorem 8,
  eq. (11): eta_t = eta while tau_t <= tau_C (the concurrency, here P), and any eta_t in
  [0, min(eta, 1 / (4 L tau_t))] above it, "setting eta_t = 0 is equivalent to dropping these gradients"
  (Sec. 4.3); Sec. 4.4 ("Tuning the stepsize") sets eta_t <= eta / tau_t there. So
  ``s_k = 1`` for tau_k <= tau_c, else ``0`` (``stale_step: zero``, the default: the proof sketch's choice) or
  ``1 / tau_k`` (``stale_step: inverse``). A zero-step update still advances k (Algorithm 1: every received
  gradient is an iteration t).
- ``wu2022``: Wu, Magnusson, Feyzmahdavian, Johansson, "Delay-adaptive step-sizes for asynchronous learning",
  ICML 2022 (arXiv 2202.08550). The stored copies we could search hold the paper's opening pages only, so this is
  *our reading* of its step-size principle gamma_k <= max(0, gamma' - sum_{t = k - tau_k}^{k-1} gamma_t), taken
  with equality and gamma' = alpha_k: ``s_k = max(0, 1 - sum_{t = k - tau_k}^{k-1} s_t)``, i.e. the step factors
  spent on the tau_k updates applied while the gradient was computed use up its budget of one full step (a
  constant delay tau gives one full step every tau + 1 updates; s_k = 0 still advances k).

Each of them scales either the step or the gradient (``algorithm.policy.scale``): ``step`` (default, the sources'
own choice: each writes a step size eta_t on SGD) makes the rule step with s_k * alpha_k, and on AMSGrad the
moments m, v, vhat still take the full stale gradient; ``gradient`` hands the rule s_k * g, so the moments see the
scaled gradient too. For SGD the two are the same update.

Discarding policies (a discarded gradient is not applied and does not advance k):

- ``ringmaster``: Maranjyan, Tyurin, Richtarik, "Ringmaster ASGD: the first asynchronous SGD with optimal time
  complexity", ICML 2025 (arXiv 2501.16168): the server accepts a gradient of delay delta_k only when
  ``delta_k < R`` (restated in Sadiev, Maranjyan, Ilin, Richtarik, "Ringmaster LMO", arXiv 2605.18174), so a
  gradient with ``tau >= R`` is discarded; R >= 1, default P. ``restart: true`` is the method "with stops": a
  computation whose delay reaches R is stopped and its worker restarted at the current iterate (as a public
  asynchronous-SGD simulation library's ``asynchronous/algorithm.py``, ``RingmasterASGD.step``, does: every worker
  whose delay counter reaches ``max_delay`` is reset and handed the current point; the stored copy did not name its
  repository), so no gradient with tau >= R is computed to the end, except one already sent when its delay reached
  R (the master then discards it).
- ``rennala``: Tyurin, Richtarik, "Optimal time complexities of parallel stochastic optimization methods under a
  fixed computation model", NeurIPS 2023 (Rennala SGD): the master collects S gradients computed at its current
  iterate (tau = 0), discards every other, and applies one update with the mean of the S (default S = P).
  ``restart: true`` (default) restarts, when a round's update is applied, every worker still computing at the old
  iterate at the new one, as the same library's ``RennalaSGD.step`` does (each round begins with every worker reset
  at the current point); ``false`` lets those computations run on and discards their gradients.

Stops are carried out by the engines (:attr:`Policy.stop_delay`): the simulated engine cancels the computation
(its partial compute time lost) and hands the worker the current iterate at that moment; the real engines'
master loop hands the worker the current iterate through its transport, which interrupts the worker
(experiments/engines/transport.py: ``restart``). The stopped worker recomputes on the same minibatch.

Discarded gradients are counted in :attr:`Master.discarded` (trace and summary column ``discarded``), stopped
computations in :attr:`Master.restarts` (column ``stopped``); the staleness columns and the histogram describe the
applied updates only. The formulas are written in terms of the harness's own alpha_k (the papers' constants L,
gamma, eta are unknown in practice; the base step is tuned instead).
"""

from __future__ import annotations

from typing import Any

import torch

POLICIES = ("none", "mishchenko2022", "koloskova2022", "wu2022", "ringmaster", "rennala")
DISCARDING = ("ringmaster", "rennala")
"""Policies that may drop gradients: a run of ``updates=K`` would not know how many gradients to hand out."""
OWN_KEYS = {
    "none": (),
    "mishchenko2022": ("tau_c", "scale"),
    "koloskova2022": ("tau_c", "scale", "stale_step"),
    "wu2022": ("scale",),
    "ringmaster": ("R", "restart"),
    "rennala": ("S", "restart"),
}
"""The keys of ``algorithm.policy`` each policy reads; every other key must be null (besides ``name``)."""
KEYS = ("R", "S", "tau_c", "restart", "scale", "stale_step")
SCALES = ("step", "gradient")
STALE_STEPS = ("zero", "inverse")


class PolicyError(ValueError):
    """A bad policy setting; the message names the key (``algorithm.policy.<key>``) and the value."""


def _int_at_least(key: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise PolicyError(f"algorithm.policy.{key}={value!r}: must be an integer >= {minimum}")
    return value


def _choice(key: str, value: Any, choices: tuple, default: str) -> str:
    if value is None:
        return default
    if value not in choices:
        raise PolicyError(f"algorithm.policy.{key}={value!r}: must be {' or '.join(choices)}")
    return value


def _flag(key: str, value: Any, default: bool) -> bool:
    if value is None:
        return default
    if not isinstance(value, bool):
        raise PolicyError(f"algorithm.policy.{key}={value!r}: must be true or false")
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
    ``master._apply(g, tau, worker)`` (or ``master._apply_scaled(g, s, tau, worker)``, delay-adaptive policies);
    returns True when an update was applied.

    Class attributes: ``name``; ``adaptive`` (True: the policy sets a factor s_k on each update, applied to the step
    or to the gradient as ``scale`` says). Instance attributes: ``scale`` (``step`` or ``gradient``),
    ``stop_delay`` (None, or the delay at which an engine stops an in-flight computation and restarts its worker
    at the current iterate: a computation with ``version - read_version >= stop_delay`` after an update).
    """

    name = "none"
    adaptive = False
    scale = "step"
    stop_delay: int | None = None

    @property
    def pending(self) -> int:
        """Gradients received and held, neither applied nor discarded yet (Rennala's round being collected)."""
        return 0

    def receive(self, master, g: torch.Tensor, tau: int, worker: int | None) -> bool:  # pragma: no cover
        raise NotImplementedError


class Mishchenko2022(Policy):
    """Mishchenko et al. 2022's delay-adaptive stepsize gamma_k = min(gamma, 1 / (4 L tau_k)): s_k =
    min(1, tau_c / tau_k) (dimensionless; module docstring). Scales the step (default) or the gradient.

    Args: tau_c: staleness up to which the full step is taken, >= 1; scale: ``step`` or ``gradient``.
    ``last_scale``: the s of the last update."""

    name = "mishchenko2022"
    adaptive = True

    def __init__(self, tau_c: int, scale: str = "step") -> None:
        self.tau_c, self.scale = tau_c, scale
        self.last_scale = 1.0

    def receive(self, master, g, tau, worker) -> bool:
        s = 1.0 if tau <= self.tau_c else self.tau_c / tau
        self.last_scale = s
        master._apply_scaled(g, s, tau, worker)
        return True


class Koloskova2022(Policy):
    """Koloskova, Stich, Jaggi 2022, Theorem 8, eq. (11): the full step while tau_k <= tau_c, above it s_k = 0
    (``stale_step=zero``, default) or 1 / tau_k (``inverse``, the paper's Sec. 4.4); every gradient advances k.
    Scales the step (default) or the gradient.

    Args: tau_c: the concurrency tau_C, >= 1 (default P); stale_step: ``zero`` or ``inverse``; scale: ``step`` or
    ``gradient``. ``last_scale``: the s of the last update."""

    name = "koloskova2022"
    adaptive = True

    def __init__(self, tau_c: int, stale_step: str = "zero", scale: str = "step") -> None:
        self.tau_c, self.stale_step, self.scale = tau_c, stale_step, scale
        self._inverse = stale_step == "inverse"
        self.last_scale = 1.0

    def receive(self, master, g, tau, worker) -> bool:
        s = 1.0 if tau <= self.tau_c else (1.0 / tau if self._inverse else 0.0)
        self.last_scale = s
        master._apply_scaled(g, s, tau, worker)
        return True


class Wu2022(Policy):
    """Our reading of Wu et al. 2022's step-size principle (module docstring): s_k = max(0, 1 - the sum of the s of
    the tau_k updates applied since the gradient's iterate). Keeps the running sums of s (one float per update).
    Scales the step (default) or the gradient. ``last_scale``: the s of the last update."""

    name = "wu2022"
    adaptive = True

    def __init__(self, scale: str = "step") -> None:
        self.scale = scale
        self._cum = [0.0]  # _cum[k] = s_0 + ... + s_{k-1}
        self.last_scale = 1.0

    def receive(self, master, g, tau, worker) -> bool:
        cum = self._cum
        k = len(cum) - 1
        s = max(0.0, 1.0 - (cum[k] - cum[k - tau]))
        self.last_scale = s
        master._apply_scaled(g, s, tau, worker)
        cum.append(cum[k] + s)
        return True


class Ringmaster(Policy):
    """Maranjyan et al. 2025: discard a gradient with tau >= R, apply the others with the rule's step. With
    ``restart`` the engines stop a computation whose delay reaches R (``stop_delay = R``).

    Args: R: the delay threshold, >= 1 (the largest staleness applied is R - 1); restart: the "with stops"
    variant."""

    name = "ringmaster"

    def __init__(self, R: int, restart: bool = False) -> None:
        self.R, self.restart = R, restart
        self.stop_delay = R if restart else None

    def receive(self, master, g, tau, worker) -> bool:
        if tau >= self.R:
            master._discard()
            return False
        master._apply(g, tau, worker)
        return True


class Rennala(Policy):
    """Tyurin, Richtarik 2023: collect S gradients computed at the current iterate (tau = 0), discard the others;
    one update with their mean (staleness 0, worker None). With ``restart`` the engines restart every worker still
    computing at the old iterate when the round's update is applied (``stop_delay = 1``).

    Args: S: gradients per round, >= 1 (default P); restart: restart the workers at each round's end."""

    name = "rennala"

    def __init__(self, S: int, restart: bool = True) -> None:
        self.S, self.restart = S, restart
        self.stop_delay = 1 if restart else None
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
        spec: None, a policy name, or a mapping (or the typed :class:`experiments.settings.schema.Policy`) with
            ``name`` and the policy's keys (:data:`OWN_KEYS`); a null key means the policy's default: R = S =
            tau_c = ``workers``, restart false (ringmaster) or true (rennala), scale ``step``, stale_step ``zero``.
        workers: P, the number of workers.
        protocol: ``async`` or ``sync``; a sync round has tau = 0 and takes no policy.

    Raises:
        PolicyError (a ValueError) naming ``algorithm.policy.<key>`` and the value: unknown name or key, a key of
        another policy set, a bad R, S, tau_c (integers >= 1), restart, scale or stale_step, or a policy with the
        sync protocol.
    """
    if spec is None or isinstance(spec, str):
        spec = {"name": spec or "none"}
    spec = dict(spec)
    name = spec.pop("name", "none") or "none"
    if name not in POLICIES:
        raise PolicyError(f"algorithm.policy.name={name!r}: must be one of {', '.join(POLICIES)}")
    unknown = sorted(k for k in spec if k not in KEYS)
    if unknown:
        raise PolicyError(f"algorithm.policy.{unknown[0]}: no such key (keys: name, {', '.join(KEYS)})")
    own = OWN_KEYS[name]
    stray = sorted(k for k, v in spec.items() if v is not None and k not in own)
    if stray:
        raise PolicyError(f"algorithm.policy.{stray[0]}={spec[stray[0]]!r}: not a key of policy {name!r}")
    if name == "none":
        return None
    if protocol != "async":
        raise PolicyError(
            f"algorithm.policy.name={name}: staleness policies apply to async algorithms only "
            f"(a sync round has tau = 0)"
        )

    def count(key: str) -> int:
        value = spec.get(key)
        return _int_at_least(key, workers if value is None else value, 1)

    scale = _choice("scale", spec.get("scale"), SCALES, "step")
    if name == "mishchenko2022":
        return Mishchenko2022(count("tau_c"), scale)
    if name == "koloskova2022":
        return Koloskova2022(count("tau_c"), _choice("stale_step", spec.get("stale_step"), STALE_STEPS, "zero"), scale)
    if name == "wu2022":
        return Wu2022(scale)
    if name == "ringmaster":
        return Ringmaster(count("R"), _flag("restart", spec.get("restart"), False))
    return Rennala(count("S"), _flag("restart", spec.get("restart"), True))
