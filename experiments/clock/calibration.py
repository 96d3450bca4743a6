"""The stored costs of this machine: one JSON file of calibration entries, and the names (keys) of its entries.

An entry is one measured cost term, ``{"value": median seconds, "samples": [...], "spread": (max - min) / median,
"measured": UTC time, "probe_s": the speed probe's seconds right after}`` (``"remeasured": k`` when ``k`` more rounds
of repeats were pooled with the first because its spread was above :data:`SPREAD_BOUND`), under a key that says what
was measured
and where (:func:`grad_key`, :func:`update_key`, :func:`message_keys`, :func:`idle_key`, :func:`lateness_key`).
Measuring is :mod:`experiments.clock.measure`; which entries a run needs is :mod:`experiments.clock.resolve`; the
model that turns them into times is :mod:`experiments.clock.costmodel`.

Where: ``$XDG_CACHE_HOME/apam-harness/calibration-<host hash>.json`` by default (:func:`machine_path`;
``$APAM_CALIBRATION`` or ``engine.calibration`` name another file), written under a file lock so that parallel
sweeps share it.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import statistics
import time
from contextlib import contextmanager
from pathlib import Path

import torch
from filelock import FileLock

from algorithms.native import cache_home
from experiments.clock import speedprobe
from experiments.clock.calshape import shape_problem
from experiments.clock.spread import (
    BOUNDED_KINDS,
    POOL_ROUNDS,
    SPREAD_BOUND,
    above_bound,
    rounds_pooled,
    spread_of,
)
from experiments.errors import CalibrationError, Interrupted
from experiments.log import get_logger
from problems.datasets.files import special_kind

log = get_logger(__name__)

GRAD_ENGINE = "shared_memory"
"""Where gradients are timed: a P = 1 run of this engine, with its :data:`HANDOFF`."""
TRANSPORTS = ("shared_memory", "distributed")
HANDOFF = {"shared_memory": "block"}
"""The hand-off gradients are timed with, and an engine's default hand-off for its message terms. shared_memory's
``block`` is what it does whenever processes outnumber cores; its ``spin`` (every process a core of its own: the
engine's ``handoff=auto`` on a quiet machine) is calibrated apart (:func:`message_keys`)."""
HANDOFFS = {"shared_memory": ("block", "spin")}
"""The hand-offs an engine has (engines without one: none)."""


def age_text(measured: str | None, now: float | None = None) -> str:
    """How long ago the UTC time ``measured`` (``%Y-%m-%dT%H:%M:%SZ``) was: ``42 s``, ``17 min``, ``5 h``, ``3 days``
    (``unknown`` when it cannot be read)."""
    import calendar

    try:
        t = calendar.timegm(time.strptime(measured, "%Y-%m-%dT%H:%M:%SZ"))
    except (TypeError, ValueError):
        return "unknown"
    s = max(0.0, (time.time() if now is None else now) - t)
    for unit, size in (("days", 86400), ("h", 3600), ("min", 60)):
        if s >= 2 * size or (unit != "days" and s >= size):
            return f"{s / size:.0f} {unit}"
    return f"{s:.0f} s"


def used_summary(path, used: dict) -> dict:
    """What a run's provenance keeps of the calibration entries it used (``used``: key -> entry): the file, the
    oldest and newest ``measured`` times, the worst spread of the bounded entries and its key, :data:`SPREAD_BOUND`,
    the bounded keys above it, and each entry's ``measured``, ``spread`` and the rounds of repeats pooled with its first
    (``remeasured``, where any)."""
    times = sorted(e.get("measured") for e in used.values() if e.get("measured"))
    bounded = {k: float(e.get("spread") or 0.0) for k, e in used.items() if k.split("|", 1)[0] in BOUNDED_KINDS}
    worst = max(bounded, key=bounded.get) if bounded else None
    return {
        "file": str(path),
        "measured_oldest": times[0] if times else None,
        "measured_newest": times[-1] if times else None,
        "spread_bound": SPREAD_BOUND,
        "worst_spread": bounded[worst] if worst else None,
        "worst_spread_key": worst,
        "spread_above_bound": sorted(k for k, e in used.items() if above_bound(k, e)),
        "entries": {
            k: {
                "measured": e.get("measured"),
                "spread": e.get("spread"),
                **({"remeasured": e["remeasured"]} if e.get("remeasured") else {}),
            }
            for k, e in sorted(used.items())
        },
    }


def used_line(summary: dict) -> str:
    """One line naming the calibration file of :func:`used_summary`, its age and the worst spread of its entries
    used, e.g. ``calibration: ~/.cache/apam-harness/calibration-ab12.json, measured 3 h ago, 6 entries used, worst
    spread 31% (grad|...) -- above the 25% bound, measured twice``."""
    n = len(summary["entries"])
    oldest, newest = summary["measured_oldest"], summary["measured_newest"]
    age = age_text(oldest) if oldest == newest else f"{age_text(newest)} to {age_text(oldest)}"
    line = f"calibration: {summary['file']}, measured {age} ago, {n} entr{'y' if n == 1 else 'ies'} used"
    if summary["worst_spread"] is not None:
        line += f", worst spread {100 * summary['worst_spread']:.0f}% ({summary['worst_spread_key']})"
    above = summary["spread_above_bound"]
    if above:
        line += (
            f" -- WARNING: {len(above)} above the {100 * SPREAD_BOUND:.0f}% bound after up to {POOL_ROUNDS} rounds "
            "of repeats "
            "(named in provenance.json calibration_used.spread_above_bound)"
        )
    return line


def _engine_label(transport: str, handoff: str | None = None) -> str:
    """``transport`` as calibration keys name it: with the hand-off it is measured with (``handoff``, default the
    engine's :data:`HANDOFF`), where it has one."""
    if transport not in HANDOFF:
        return transport
    return f"{transport}-{handoff or HANDOFF[transport]}"


def machine_id() -> dict:
    """What identifies this machine's costs: host name, architecture, CPU model and count, torch version."""
    cpu = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "host": platform.node(),
        "machine": platform.machine(),
        "cpu": cpu,
        "cpu_count": os.cpu_count(),
        "torch": torch.__version__,
    }


def machine_path() -> Path:
    """The machine's calibration file: ``$APAM_CALIBRATION`` if set, else
    ``$XDG_CACHE_HOME/apam-harness/calibration-<12 hex of sha1(machine_id)>.json`` (``~/.cache`` by default, and
    in place of a relative ``$XDG_CACHE_HOME``, which the XDG spec says to ignore: ``algorithms.native.cache_home``).

    Raises:
        CalibrationError: ``$APAM_CALIBRATION`` is set to an empty name (it silently meant the machine's own file,
            shared by every clone, where the user had meant another; unset it for that).
    """
    env = os.environ.get("APAM_CALIBRATION")
    if env is not None and not env.strip():
        raise CalibrationError(f"APAM_CALIBRATION={env!r}: must name a file (unset it for this machine's file)")
    if env:
        return Path(env)
    digest = hashlib.sha1(json.dumps(machine_id(), sort_keys=True).encode()).hexdigest()[:12]
    return cache_home() / "apam-harness" / f"calibration-{digest}.json"


class Calibration:
    """A calibration file: measured costs by key, each ``{"value": median s, "samples": [...], "spread": rel}``.

    A damaged file (not UTF-8 JSON, cut short, empty, or not of this shape: an object whose ``entries`` maps keys to
    objects with a ``value`` of seconds and, where present, a non-empty list of ``samples`` of seconds, every one
    finite and >= 0, and well-typed ``spread``, ``remeasured`` and ``measured``:
    :func:`experiments.clock.calshape.shape_problem`) is set aside as ``<name>.damaged-<n>`` under the file lock
    and read as empty (its entries are measured again), with one line on stderr naming it, when it is the harness's
    (a ``.json`` file or an object with ``entries``); any other file is refused and left alone.
    Every write goes through :func:`experiments.store.atomic.atomic_write_text`.

    Args:
        path: the JSON file (created on first write; None = :func:`machine_path`).

    Raises:
        experiments.errors.CalibrationError: (a ConfigError; from :meth:`read`, :meth:`entry`, :meth:`drop`) the
            path names something that is not a regular file (a named pipe, a folder, a device: never opened, so
            never waited on) or a file that cannot be read (permissions), a damaged file could not be set aside, or
            the file, its folder or its lock cannot be written (a read-only folder); one line naming the file.
    """

    def __init__(self, path: Path | str | None = None) -> None:
        self.path = Path(path) if path else machine_path()
        self._lock = FileLock(str(self.path) + ".lock", timeout=600)
        self.announced = False
        """Whether this object said it measures (one line, before its first new entry)."""
        self.used: dict[str, dict] = {}
        """Every entry :meth:`entry` returned, by key (what a run used: :func:`used_summary`)."""
        self.pooling: dict[str, int] = {}
        """Keys to measure once more on their next :meth:`entry`, each with the rounds its stored entry had pooled
        when it was found wide: the new repeats join the stored ones (``"remeasured"`` counts such rounds), unless
        another process pooled a round since (then the stored entry is used as it is)."""

    def check(self) -> None:
        """Raise what :meth:`read` would raise on this path, without reading it as a calibration or writing anything.

        Raises:
            CalibrationError: not a regular file, not readable, or damaged and not the harness's (:meth:`_foreign`).
        """
        self._foreign(*self._load())

    def _foreign(self, data, damage: str | None) -> None:
        """Refuse a damaged file that may not be a calibration file at all: only a ``.json`` file, or a JSON object
        with ``entries``, is set aside and rebuilt (any other file named by mistake, ``--file notes.txt``, is left
        as it is).

        Raises:
            CalibrationError: ``damage`` and neither of those.
        """
        if damage is not None and self.path.suffix != ".json" and not (isinstance(data, dict) and "entries" in data):
            raise CalibrationError(
                f"{self.path}: not a calibration file ({damage}); left as it is: name a new .json file or remove it"
            )

    def _empty(self) -> dict:
        return {"machine": machine_id(), "entries": {}}

    def _load(self) -> tuple[dict | None, str | None]:
        """The file's content and why it is damaged (``(None, None)`` when there is no file).

        Raises:
            CalibrationError: not a regular file, or not readable.
        """
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None, None
        except OSError as exc:
            raise CalibrationError(f"{self.path}: cannot read this calibration file ({exc.strerror})") from None
        if kind := special_kind(st.st_mode):
            raise CalibrationError(
                f"{self.path}: the calibration file is {kind}, not a regular file "
                "(engine.calibration / APAM_CALIBRATION must name a JSON file)"
            )
        if not os.access(self.path, os.R_OK):
            raise CalibrationError(f"{self.path}: cannot read this calibration file (permission denied)")
        try:  # O_NONBLOCK: should the file be swapped for a pipe since the check, opening it does not wait
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
            with os.fdopen(fd, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return None, None
        except OSError as exc:
            raise CalibrationError(f"{self.path}: cannot read this calibration file ({exc.strerror})") from None
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:  # nested too deep: damaged too
            return None, "empty" if not raw.strip() else f"not JSON ({' '.join(str(exc).split())[:80]})"
        return data, shape_problem(data)

    def read(self) -> dict:
        """The file's content (an empty calibration of this machine when the file does not exist or was damaged
        and has been set aside).

        Raises:
            CalibrationError: see the class docstring.
        """
        data, damage = self._load()
        if data is None and damage is None:
            return self._empty()
        if damage is None:
            return data
        self._foreign(data, damage)
        with self._locked():  # one process sets the file aside; the others then find it gone or rewritten
            data, damage = self._load()
            self._foreign(data, damage)
            if damage is None:
                return data if data is not None else self._empty()
            self._set_aside(damage)
            return self._empty()

    def _set_aside(self, damage: str) -> None:
        """Rename the damaged file to ``<name>.damaged-<n>`` (first free n), with one line on stderr."""

        n = 1
        while (dest := self.path.with_name(f"{self.path.name}.damaged-{n}")).exists() or dest.is_symlink():
            n += 1
        try:
            os.rename(self.path, dest)
        except OSError as exc:
            raise CalibrationError(
                f"{self.path}: damaged calibration file ({damage}) cannot be set aside ({exc.strerror})"
            ) from None
        log.warning(
            f"{self.path}: damaged calibration file ({damage}); set aside as {dest.name}, its entries "
            "are measured again"
        )

    @contextmanager
    def _locked(self):
        """Hold the file lock (its folder made first).

        Raises:
            CalibrationError: the folder or the lock file cannot be made (a read-only folder): one line naming the
                file.
        """
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # filelock retries a lock file it cannot open (a folder of /proc, no permission) until its timeout, as if
            # another process held it: opened here first, so that such a place is one line at once
            os.close(os.open(self._lock.lock_file, os.O_RDWR | os.O_CREAT, 0o644))
            self._lock.acquire()
        except OSError as exc:
            raise CalibrationError(f"{self.path}: cannot write this calibration file ({exc.strerror or exc})") from None
        try:
            yield
        finally:
            self._lock.release()

    def _write(self, data: dict) -> None:
        """Write ``data`` whole (experiments.store.atomic). Raises CalibrationError when it cannot be written."""
        from experiments.store.atomic import atomic_write_text

        try:
            atomic_write_text(self.path, json.dumps(data, indent=1, sort_keys=True))
        except OSError as exc:
            raise CalibrationError(f"{self.path}: cannot write this calibration file ({exc.strerror or exc})") from None

    def entry(self, key: str, measure) -> dict:
        """The entry under ``key``; ``measure()`` (returning a list of repeated samples, seconds) is called, under
        the file lock so that parallel jobs measure it once, when it is missing -- or when ``key`` is in
        :attr:`pooling`: then its samples join the stored ones (median and :func:`spread_of` of them all) and the key
        leaves :attr:`pooling`.

        Raises:
            CalibrationError: see the class docstring.
        """
        data = self.read()
        if key in data["entries"] and key not in self.pooling:
            self.used[key] = data["entries"][key]
            return data["entries"][key]
        with self._locked():
            data = self.read()
            old = data["entries"].get(key)
            rounds = self.pooling.pop(key, None)
            if old is None or rounds == rounds_pooled(old):
                if old is None and not self.announced:  # a first measurement can take minutes (an AllCNN gradient
                    self.announced = True  # on a loaded core), silent: said once per calibration in use
                    log.info(f"calibration: measuring the costs this run lacks into {self.path} (first: {key}) ...")
                new = [float(s) for s in measure()]
                Interrupted.raise_pending()  # a stop swallowed while it measured: not stored, the run stops
                samples = [float(s) for s in old.get("samples", [])] + new if old else new
                if new or old is None:
                    med = statistics.median(samples)
                    data["entries"][key] = {
                        "value": med,
                        "samples": samples,
                        "spread": spread_of(samples),
                        "measured": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                        "probe_s": speedprobe.measure(),
                    }  # the machine's speed as it measured
                    if old:
                        data["entries"][key]["remeasured"] = rounds_pooled(old) + 1
                        data["entries"][key]["first_measured"] = old.get("first_measured") or old.get("measured")
                    self._write(data)
            self.used[key] = data["entries"][key]
            return data["entries"][key]

    def drop(self, keys=None) -> None:
        """Forget ``keys`` (all entries when None): they are measured again on next use.

        Raises:
            CalibrationError: see the class docstring.
        """
        data, damage = self._load()  # an unreadable name or a file not the harness's says why, before any lock
        self._foreign(data, damage)
        if data is None and damage is None:
            return
        with self._locked():
            data = self.read()
            data["entries"] = {} if keys is None else {k: v for k, v in data["entries"].items() if k not in keys}
            self._write(data)


def calibrated_probe(calibration: Calibration) -> float:
    """The calibration's speed probe: the median ``probe_s`` of its entries, seconds per call (NaN when none has
    one). Never measured here: a reference taken now would not be the calibration's."""
    probes = [e["probe_s"] for e in calibration.read()["entries"].values() if e.get("probe_s") is not None]
    return statistics.median(probes) if probes else float("nan")


# ---------------------------------------------------------------------- keys
def rule_calibration_key(rule, dim: int) -> str:
    """The name of an update rule in calibration keys: its name, variant and the implementation that steps
    a float32 CPU vector of ``dim`` entries (``rule.impl_for`` where the rule has several; e.g.
    ``amsgrad-torch-fused``, ``sgd``): another implementation costs another time, and ``impl=auto`` shares the
    entry of the implementation it picks."""
    impl = rule.impl_for(torch.empty(dim)) if hasattr(rule, "impl_for") else None
    parts = (rule.name, getattr(rule, "variant", None), impl)
    return "-".join(str(p) for p in parts if p)


def grad_key(problem, batch_size: int) -> str:
    """The calibration key of one gradient of ``problem`` at ``batch_size``, naming where it is timed."""
    where = "probe" if getattr(problem, "timing_only", False) else _engine_label(GRAD_ENGINE)
    return f"grad|{problem.name}|n={problem.num_train}|d={problem.dim}|B={int(batch_size)}|threads=1|in={where}"


def grad_times_key(problem, batch_size: int) -> str:
    """The calibration key of every measured gradient time of ``problem`` at ``batch_size`` (the samples of the
    ``measured`` compute-time law), measured where :func:`grad_key`'s gradients are."""
    return "gradtimes|" + grad_key(problem, batch_size).split("|", 1)[1]


def round_key(transport: str, dim: int, workers: int) -> str:
    """The calibration key of one zero-cost sync round of ``workers`` workers on engine ``transport`` at ``dim``."""
    return f"round|{_engine_label(transport)}|d={int(dim)}|P={int(workers)}"


def update_key(rule_key: str, dim: int) -> str:
    return f"update|{rule_key}|d={int(dim)}|threads=1"


def message_keys(transport: str, dim: int, handoff: str | None = None) -> tuple[str, str]:
    """(latency key, overhead key) of engine ``transport`` at dimension ``dim``: no rule in them; on
    ``shared_memory`` the hand-off they were measured with (:data:`HANDOFF`)."""
    name = _engine_label(transport, handoff)
    return f"latency|{name}|d={int(dim)}|net", f"overhead|{name}|d={int(dim)}"


def idle_key(transport: str, problem, batch_size: int, handoff: str | None = None) -> str:
    """The calibration key of the master's overhead per gradient it waited for, on engine ``transport``, with the
    gradients of ``problem`` at ``batch_size`` (module docstring)."""
    return (
        f"overhead_idle|{_engine_label(transport, handoff)}|{problem.name}|n={problem.num_train}|d={problem.dim}"
        f"|B={int(batch_size)}"
    )


def lateness_key(base_s: float) -> str:
    """Calibration key of the wake-up lateness of an emulated wait of about ``base_s`` seconds."""
    return f"late|sleep|s={float(base_s):.6g}"
