"""Update rules on flat parameter vectors, and their step-size schedules.

Usage (docs/INTERFACES.md, "Update rules"; ../shared/CONTRACT.md, "Python API for update rules")::

    from algorithms import build_rule, clone_state
    rule = build_rule("amsgrad", variant="torch", lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8)
    state = rule.init(x)               # x: (d,) float32/float64 tensor; state: dataclass (m, v, vhat, k)
    x, state = rule.step(x, g, state)  # g: (d,) gradient, same dtype/device; x and state updated in place
    rule.lr_at(k)                      # alpha_k of the schedule, k >= 1, for logging
    snapshot = clone_state(state)      # independent copy (engines snapshot the master's state)

Rules: ``amsgrad`` (variants ``paper`` and ``torch``, see algorithms.amsgrad) and ``sgd`` (algorithms.sgd).
Schedules: ``constant`` and ``inv_sqrt`` (algorithms.schedules). ``bounds=(lo, hi)`` clips x after every step:
the convex case's projection, exact because with a diagonal weighted norm and a box the projection is a clip.

Errors: ``build_rule`` raises ValueError subclasses: UnknownRuleError (unknown name), HyperparameterError
(unknown or missing hyperparameter, or a bad value; the message names the key and the value).

Adding a rule (one module, no other edit in this package):

1. Create ``algorithms/<your_rule>.py`` with a state dataclass (tensors + ``k``; scratch buffers declared with
   ``algorithms.state.scratch_field()``) and a subclass of ``algorithms.base.UpdateRule`` that sets ``name``,
   ``DEFAULTS`` (``{**UpdateRule.DEFAULTS, "your_key": default, ...}``; ``REQUIRED`` for no default), validates
   its own keys in ``__init__`` (helpers ``positive``, ``nonnegative``, ``unit_interval`` in algorithms.base),
   passes the common ones to ``super().__init__``, and implements ``init(x)`` and ``step(x, g, state)``
   (use ``self.schedule(k)`` for alpha_k and ``self.project(x)`` after the step).
2. Decorate the class with ``@algorithms.registry.register_rule``. Every module in this package is imported on
   the first ``build_rule`` call, so the rule is found by name.
3. Add ``conf/algorithm/<option>.yaml`` naming it, and tests in tests/algorithms/.
"""

from algorithms.base import HyperparameterError, UpdateRule
from algorithms.registry import UnknownRuleError, build_rule, register_rule, rule_names
from algorithms.schedules import SCHEDULES, Schedule, build_schedule
from algorithms.state import clone_state

__all__ = [
    "SCHEDULES",
    "HyperparameterError",
    "Schedule",
    "UnknownRuleError",
    "UpdateRule",
    "build_rule",
    "build_schedule",
    "clone_state",
    "register_rule",
    "rule_names",
]
