"""The master logic every engine shares (APAM.md §1): it owns x and the optimizer state and applies updates.

Engines differ only in how gradients reach the master (transport) and in how time is measured (clock); the
arithmetic of an update, the protocol (async or sync) and the staleness bookkeeping live here, once.
"""

from __future__ import annotations

from collections import Counter

import torch

from experiments.training.policies import Policy, ScaledSchedule, build_policy


class Master:
    """Owns the iterate x, the update rule's state, the version counter and the staleness log.

    Protocols:
        ``async`` (APAM, async SGD): every gradient is applied on arrival, one update per gradient, in arrival order.
        ``sync`` (sync-parallel AMSGrad): the master waits for one gradient from each of the ``workers`` workers,
            all computed at the current version, applies one update with their mean, and bumps the version once.

    The staleness of an update is ``tau_k = version at apply - version the gradient was computed at`` (APAM.md §1);
    for a sync round it is 0 by construction.

    Staleness reaches the rule: a rule whose class sets ``needs_staleness = True`` is stepped as
    ``rule.step(x, g, state, tau=tau, worker=worker)`` (``worker`` None for an update that averages several
    gradients: a sync round, a Rennala round); other rules as ``rule.step(x, g, state)``, exactly as before.

    Staleness policies (async only; :mod:`experiments.training.policies`): ``policy`` decides per gradient whether it is
    applied and with what factor on the step or the gradient (delay-adaptive steps, Ringmaster's discarding,
    Rennala's rounds). Without one the async path is unchanged: every gradient applied on arrival.

    Stops (a policy with ``stop_delay``, :attr:`stop_delay`): after an update, an engine stops every in-flight
    computation whose delay ``version - read_version`` has reached ``stop_delay``, hands its worker the current
    iterate and calls :meth:`restarted`; a stopped computation's gradient that was already sent reaches the master
    anyway and is discarded by the policy (its delay is at least ``stop_delay``).

    Args:
        rule: an update rule from :func:`algorithms.build_rule` (``init``/``step``).
        x0: initial iterate, shape (d,), float32; copied.
        protocol: ``"async"`` or ``"sync"``.
        workers: number of workers P >= 1 (the sync round size; async: >= 0, the master alone computing).
        policy: None, a :class:`experiments.training.policies.Policy`, or the ``algorithm.policy`` config (name and
            keys; built with :func:`experiments.training.policies.build_policy`).

    Raises:
        ValueError: unknown protocol, P < 1, a bad policy or a policy with the sync protocol (PolicyError), a
            step-scaling policy (``scale: step``) with a rule that does not take its step from ``rule.schedule``, or
            (sync) a gradient computed at another version than the current one.
    """

    def __init__(self, rule, x0: torch.Tensor, protocol: str, workers: int, policy=None) -> None:
        if protocol not in ("async", "sync"):
            raise ValueError(f"protocol={protocol!r}: must be 'async' or 'sync'")
        if workers < (0 if protocol == "async" else 1):
            raise ValueError(f"workers={workers}: must be >= 1 (async: >= 0, the master alone computing)")
        self.rule = rule
        self.protocol = protocol
        self.workers = int(workers)
        self.x = x0.detach().clone()
        self.state = rule.init(self.x)
        self.version = 0  # number of updates applied
        self.gradients = 0  # gradients received
        self._round_sum: torch.Tensor | None = None
        self._round_count = 0
        self._window: list[int] = []  # staleness of the updates since the last ``take_staleness``
        self.histogram: Counter[int] = Counter()  # staleness -> number of updates, whole run
        self._tau_sum = [0] * self.workers  # per worker id: sum of staleness of its gradients
        self._tau_count = [0] * self.workers  # per worker id: gradients received
        self._needs_staleness = bool(getattr(rule, "needs_staleness", False))
        self._dropped = 0  # gradients a policy discarded
        self.restarts = 0  # in-flight computations stopped (their workers restarted)
        if policy is not None and not isinstance(policy, Policy):
            policy = build_policy(policy, self.workers, protocol)
        if policy is not None and protocol != "async":
            raise ValueError(f"policy {policy.name!r}: staleness policies apply to the async protocol only")
        self.policy = policy
        self.stop_delay: int | None = policy.stop_delay if policy is not None else None
        """An engine stops an in-flight computation once ``version - read_version >= stop_delay`` (None: never)."""
        self._schedule: ScaledSchedule | None = None
        self._scaled_g: torch.Tensor | None = None  # scale=gradient: s_k * g, one buffer for the run
        self._scale_gradient = policy is not None and policy.adaptive and policy.scale == "gradient"
        if policy is not None and policy.adaptive and not self._scale_gradient:
            base = getattr(rule, "schedule", None)
            if not callable(base):
                raise ValueError(
                    f"policy {policy.name!r} scales the step size, but rule {type(rule).__name__} has no "
                    f"`schedule` (alpha_k) to scale (algorithm.policy.scale=gradient scales g instead)"
                )
            self._schedule = rule.schedule = ScaledSchedule(base)

    # ------------------------------------------------------------------ updates
    def receive(self, g: torch.Tensor, read_version: int, worker: int | None = None) -> bool:
        """Take one gradient computed at version ``read_version``; return True when an update was applied.

        Args:
            g: gradient, shape (d,), same dtype/device as x. Not kept (the sync round accumulates a copy).
            read_version: the master version of the iterate the gradient was computed at (<= current version).
            worker: the sending worker's id in [0, workers), for the per-worker staleness totals (optional).

        The async path is the engines' hot loop: a few list and counter operations around ``rule.step``.
        """
        self.gradients += 1
        tau = self.version - int(read_version)
        if worker is not None:
            self._tau_sum[worker] += tau
            self._tau_count[worker] += 1
        if self.protocol == "async":
            if self.policy is None:
                self._apply(g, tau, worker)
                return True
            return self.policy.receive(self, g, tau, worker)
        if read_version != self.version:
            raise ValueError(f"sync gradient computed at version {read_version}, master is at {self.version}")
        if self._round_sum is None:  # one buffer for every round: no allocation per round
            self._round_sum = torch.empty_like(self.x)
        if self._round_count == 0:
            self._round_sum.copy_(g.detach())
        else:
            self._round_sum.add_(g)
        self._round_count += 1
        if self._round_count < self.workers:
            return False
        mean = self._round_sum if self._round_count == 1 else self._round_sum.div_(self._round_count)
        self._round_count = 0
        self._apply(mean, 0, None)
        return True

    def receive_round(self, g: torch.Tensor, read_version: int) -> bool:
        """A whole sync round at once: ``g`` is the mean of the round's ``workers`` gradients, all computed at
        ``read_version`` (:meth:`problems.base.Problem.loss_grad_mean`). Counts as one gradient from each worker
        (staleness 0) and applies one update, as ``workers`` calls of :meth:`receive` would; returns True.

        Raises ValueError with the async protocol, when a round is partly collected, or when ``read_version`` is
        not the current version."""
        if self.protocol != "sync":
            raise ValueError("receive_round is the sync protocol's; async gradients go through receive")
        if self._round_count:
            raise ValueError(f"receive_round with {self._round_count} gradients of the round already received")
        if read_version != self.version:
            raise ValueError(f"sync gradient computed at version {read_version}, master is at {self.version}")
        self.gradients += self.workers
        for w in range(self.workers):
            self._tau_count[w] += 1
        self._apply(g, 0, None)
        return True

    def set_round_size(self, workers: int) -> None:
        """Shrink the sync round after a worker is lost (async ignores it). Applies the round if already complete."""
        self.workers = max(1, int(workers))

    def _apply(self, g: torch.Tensor, tau: int, worker: int | None) -> None:
        """One update with gradient g of staleness tau (from ``worker``, None for a mean); bumps the version."""
        if self._needs_staleness:
            self.x, self.state = self.rule.step(self.x, g, self.state, tau=tau, worker=worker)
        else:
            self.x, self.state = self.rule.step(self.x, g, self.state)
        self.version += 1
        self._window.append(tau)
        self.histogram[tau] += 1

    def _apply_scaled(self, g: torch.Tensor, s: float, tau: int, worker: int | None) -> None:
        """One update with factor ``s`` (a delay-adaptive policy's s_k, dimensionless): on the step (the rule steps
        with s * alpha_k; AMSGrad's moments take g itself) or on the gradient (the rule gets s * g, in a buffer of
        the master's: ``g`` is not modified), as the policy's ``scale`` says. s = 1 applies g untouched."""
        if self._scale_gradient:
            if s != 1.0:
                if self._scaled_g is None:
                    self._scaled_g = torch.empty_like(self.x)
                g = torch.mul(g, s, out=self._scaled_g)
        else:
            self._schedule.scale = s
        self._apply(g, tau, worker)

    def _discard(self) -> None:
        """A policy dropped the gradient just received: counted, not applied, not in the staleness log."""
        self._dropped += 1

    # ------------------------------------------------------------------ stops
    def must_stop(self, read_version: int) -> bool:
        """Whether an in-flight computation at ``read_version`` is to be stopped now (its delay reached
        :attr:`stop_delay`); always False without stops."""
        return self.stop_delay is not None and self.version - int(read_version) >= self.stop_delay

    def restarted(self, worker: int, read_version: int) -> None:
        """An engine stopped ``worker``'s in-flight computation, started at ``read_version``, and handed it the
        current iterate (counted in :attr:`restarts`, the ``stopped`` column)."""
        self.restarts += 1

    def receive_stopped(self, read_version: int, worker: int | None = None) -> bool:
        """A stopped computation's gradient that had already been sent arrived (its request superseded by a stop):
        counted as received and discarded, as :meth:`receive` counts a gradient the policy discards (the policy
        discards any gradient whose delay reached :attr:`stop_delay`), without reading it. Returns False (no
        update)."""
        tau = self.version - int(read_version)
        self.gradients += 1
        if worker is not None:
            self._tau_sum[worker] += tau
            self._tau_count[worker] += 1
        self._dropped += 1
        return False

    # ------------------------------------------------------------------ bookkeeping
    @property
    def discarded(self) -> int:
        """Gradients received that no applied update has used: those a policy discarded, plus the ones a Rennala
        round holds while it is being collected (fewer than S). 0 without a policy."""
        return self._dropped + (self.policy.pending if self.policy is not None else 0)

    @property
    def per_worker(self) -> dict[int, tuple[int, int]]:
        """worker id -> (sum of the staleness of its gradients, gradients received), for workers that sent any."""
        return {w: (s, c) for w, (s, c) in enumerate(zip(self._tau_sum, self._tau_count)) if c}

    def take_staleness(self) -> tuple[float, int]:
        """Mean and max staleness of the updates since the previous call (NaN, 0 when there were none)."""
        w, self._window = self._window, []
        if not w:
            return float("nan"), 0
        return sum(w) / len(w), max(w)
