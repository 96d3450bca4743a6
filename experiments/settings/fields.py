"""Shared pieces of the typed settings: the frozen base class, bounded number types, the names every block
checks against, and the machine's core count."""

from __future__ import annotations

import os
import re
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from problems.datasets.files import special_kind

SEED_LIMIT = 2**62
"""Seeds (plus each worker's stride, experiments/engines/workers.py) stay inside torch's 64-bit range."""
PROFILES = ("smoke", "quick", "long", "paper")
POLICIES = ("none", "mishchenko2022", "koloskova2022", "wu2022", "ringmaster", "rennala")
POLICY_KEYS = {
    "none": (),
    "mishchenko2022": ("tau_c", "scale"),
    "koloskova2022": ("tau_c", "scale", "stale_step"),
    "wu2022": ("scale",),
    "ringmaster": ("R", "restart"),
    "rennala": ("S", "restart"),
}
"""The keys each policy reads (experiments/training/policies.py:OWN_KEYS); the others must be null."""
VISION_CLASSES = {"fashion_mnist": 10, "mnist": 10, "cifar10": 10}
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")
MAX_NAME = 100
"""The longest experiment_id (a folder name: the file system takes 255 bytes; run ids are cut at 120)."""

MAX_WORKERS = 4096
"""The most workers a run takes: the simulated engine keeps a parameter snapshot per worker in flight, and a number
past it (``workers=99999999999999999999``) failed inside the engine with an OverflowError traceback."""
MAX_THREADS = 1024
"""The most math threads a process takes (``threads``): torch's pool ran out of memory at 100000."""

PositiveInt = Annotated[int, Field(ge=1)]
NonNegativeInt = Annotated[int, Field(ge=0)]
PositiveFloat = Annotated[float, Field(gt=0)]
NonNegativeFloat = Annotated[float, Field(ge=0)]
Name = Annotated[str, Field(pattern=r"^[^\x00-\x1f\x7f]*$")]
"""A name of the user's choosing (``problem.name``, ``algorithm.name``): one line, no control character (a newline
split a line of REPORT.md and a one-line message)."""
MAX_COST_S = 86400.0
"""The longest cost a simulated clock takes for one step (a gradient, an update, a message): a day. Beyond it nothing
is modelled, and sums over a run's updates may overflow to inf."""
Seconds = Annotated[float, Field(ge=0, le=MAX_COST_S)]


class Frozen(BaseModel):
    """Base of every settings block: immutable, no unknown keys, strict types, finite floats."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)


def not_blank(key: str, value, what: str):
    """``value``, unless it is an empty or blank string: a name, rule or address that names nothing
    (``algorithm.name=''`` ran, then the harness called its own summary.csv damaged, its algorithm column empty).
    A value of another type (a mapping with ``_target_``, null) is left to the field's type.

    Raises:
        ValueError: ``<key>='': must <what>``.
    """
    if isinstance(value, str) and not value.strip():
        raise ValueError(f"{key}={value!r}: must {what}")
    return value


def machine_cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS has one, else the CPU count)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def folder_problem(path) -> str | None:
    """Why ``path`` is not a folder: ``"no such folder"``, ``"a link to nothing, not a folder"``, ``"a file, not a
    folder"``, ``"a named pipe, not a folder"`` (and the other kinds of
    :func:`problems.datasets.files.special_kind`), or None when it is one."""
    if os.path.isdir(path):
        return None
    if not os.path.lexists(path):
        return "no such folder"
    if not os.path.exists(path):
        return "a link to nothing, not a folder"
    return f"{special_kind(os.stat(path).st_mode) or 'a file'}, not a folder"


def file_problem(path: str) -> str | None:
    """Why ``path`` cannot be read as a data file: ``"no such file"``, ``"a folder, not a regular file"``, ``"a named
    pipe, not a regular file"`` (and the other kinds of :func:`problems.datasets.files.special_kind`), the system's
    reason where it cannot be looked at, or None when it is a regular file (readability is checked where it is
    opened)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return "no such file"
    except OSError as exc:
        return exc.strerror or str(exc)
    kind = special_kind(st.st_mode)
    return None if kind is None else f"{kind}, not a regular file"
