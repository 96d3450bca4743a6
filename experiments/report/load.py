"""What the report reads: an experiment folder's CSVs, the paper's numbers, the experiment's own yaml, and a results
folder's bookkeeping (reproduce_status.json, the runs' provenance).

Layout (docs/INTERFACES.md, "Result files"): ``<results>/<experiment>/summary.csv`` (one row per run), ``speedup.csv``,
``runs/<run_id>/{config.yaml,trace.csv,staleness.csv,compute_times.csv,provenance.json}``, ``tuning.csv`` (the
choices of a tuning seed, whose trials lie apart in ``tuning/``); the paper's numbers are
``results/paper/<experiment>.csv`` of the repository; an experiment's title and setting are the ``report`` block of
``conf/experiment/<experiment>.yaml``.
"""

from __future__ import annotations

import functools
import json
import math
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from omegaconf import OmegaConf

from experiments.analysis import compute_times, configs, staleness
from experiments.analysis.speedup import speedup_frame
from experiments.errors import ConfigError
from experiments.log import get_logger
from experiments.report.clock import read_validation, validation_rows
from experiments.store.damage import read_provenance
from experiments.store.table import file_problem, read_experiment_summary, run_files, run_frames

REPO = Path(__file__).resolve().parents[2]
PAPER_DIR = REPO / "results" / "paper"
CONF_DIR = REPO / "conf" / "experiment"
STATUS_FILE = "reproduce_status.json"
log = get_logger(__name__)


def read_csv(path: Path) -> pd.DataFrame:
    """The CSV at ``path``; an empty frame when there is none."""
    return pd.read_csv(path) if Path(path).exists() else pd.DataFrame()


def ok_rows(summary: pd.DataFrame) -> pd.DataFrame:
    """The summary rows of runs that finished with status ``ok``."""
    return summary[summary["status"] == "ok"] if not summary.empty else summary


@dataclass(frozen=True)
class Experiment:
    """One experiment folder's data. ``summary``, ``speedup`` and ``paper`` are read at once; the per-run files
    (traces, staleness histograms, compute times, configs) when a section first asks for them. Built from frames
    alone (``folder`` None) for tests: the per-run files are then empty unless given."""

    name: str
    summary: pd.DataFrame
    speedup: pd.DataFrame = field(default_factory=pd.DataFrame)
    paper: pd.DataFrame = field(default_factory=pd.DataFrame)
    folder: Path | None = None
    given: dict = field(default_factory=dict)  # frames given instead of read: traces, hists, predicted, late,
    # steps, validation

    @property
    def ok(self) -> pd.DataFrame:
        return ok_rows(self.summary)

    def _runs(self, key, read, empty):
        if key in self.given:
            return self.given[key]
        return read(self.folder) if self.folder is not None else empty

    @functools.cached_property
    def traces(self) -> pd.DataFrame:
        """Every run's trace.csv, one frame (empty without runs; one that cannot be read whole left out, named:
        :func:`experiments.store.table.run_frames`)."""

        def read(folder):
            frames = run_frames(folder, "trace.csv", ("epoch",), ("epoch", "updates", "time_s"))
            return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

        return self._runs("traces", read, pd.DataFrame())

    @functools.cached_property
    def hists(self) -> pd.DataFrame:
        """Every run's staleness histogram (:func:`experiments.analysis.staleness.histograms`)."""
        return self._runs("hists", staleness.histograms, pd.DataFrame())

    @functools.cached_property
    def predicted(self) -> pd.DataFrame:
        """Every measured run's predicted staleness histograms (runs/<run_id>/predicted_staleness.csv): columns
        run_id, prediction, staleness (updates), count (empty when no run has one; a damaged file left out, named)."""

        def read(folder):
            columns = ("prediction", "staleness", "count")
            frames = run_frames(folder, "predicted_staleness.csv", columns, columns[1:])
            return (
                pd.concat(frames, ignore_index=True)
                if frames
                else pd.DataFrame(columns=["run_id", "prediction", "staleness", "count"])
            )

        return self._runs("predicted", read, pd.DataFrame(columns=["run_id", "prediction", "staleness", "count"]))

    @functools.cached_property
    def validation(self) -> pd.DataFrame:
        """model_validation's rows beside this experiment (``<folder>/../model_validation``; its own rows for
        model_validation itself): :func:`experiments.report.clock.validation_rows`."""
        if "validation" in self.given:
            return self.given["validation"]
        if self.folder is None:
            return validation_rows(self.summary if self.name == "model_validation" else pd.DataFrame())
        return read_validation(self.folder.parent)

    @functools.cached_property
    def late(self) -> pd.DataFrame:
        """Per measured run, its waits' lateness and real gradients' time (experiments.analysis.compute_times)."""
        return self._runs("late", compute_times.lateness, pd.DataFrame())

    @functools.cached_property
    def tuning(self) -> pd.DataFrame:
        """The tuned step factors and policy sizes, one row per setting (``tuning.csv``, experiments/sweeps/tuning.py;
        empty for an experiment without a tuning seed)."""
        return self._runs("tuning", lambda folder: read_csv(folder / "tuning.csv"), pd.DataFrame())

    @functools.cached_property
    def steps(self) -> dict:
        """Each algorithm's step sizes (:func:`experiments.analysis.configs.step_sizes`)."""
        return self._runs("steps", configs.step_sizes, {})


def experiment_folder(results_dir: Path, name: str) -> Path:
    """The folder ``<results_dir>/<name>`` of experiment ``name``, there or not (an experiment not run yet).

    Raises:
        ConfigError: something other than a folder has its name (a file, a link to nothing, a named pipe): one line
            naming it (it was read as a folder: a traceback).
    """
    from experiments.settings.fields import folder_problem

    folder = Path(results_dir) / name
    if os.path.lexists(folder) and (why := folder_problem(folder)):
        raise ConfigError(f"{folder}: {why} (experiment {name}'s runs go in a folder of that name); move it away")
    return folder


def load_experiment(results_dir: Path, name: str, paper_dir: Path = PAPER_DIR) -> Experiment:
    """The experiment folder ``<results_dir>/<name>`` (its summary empty when it has none).

    Raises:
        ConfigError: something other than a folder has its name (:func:`experiment_folder`), its summary is damaged
            or holds another experiment's runs (experiments/store/table.py :func:`read_experiment_summary`).
    """
    folder = experiment_folder(results_dir, name)
    return Experiment(
        name,
        read_experiment_summary(folder),
        speedup_frame(folder),
        read_csv(Path(paper_dir) / f"{name}.csv"),
        folder,
    )


@functools.cache
def report_block(name: str) -> dict:
    """The ``report`` block of ``conf/experiment/<name>.yaml``: ``title``, ``setting`` and optionally ``note`` (said
    after the section's tables), ``paper_label`` (what its results/paper file holds) and ``beyond_scale`` (what a
    profile changes in it besides scale); {} for an experiment without a yaml or a block."""
    path = CONF_DIR / f"{name}.yaml"
    if not path.exists():
        return {}
    return dict(OmegaConf.to_container(OmegaConf.load(path)).get("report") or {})


def profiles_of(name: str) -> dict:
    """The sweeps of each profile of experiment ``name`` (``profiles`` of its yaml; {} without)."""
    path = CONF_DIR / f"{name}.yaml"
    return (OmegaConf.to_container(OmegaConf.load(path)).get("profiles") or {}) if path.exists() else {}


ADHOC = "adhoc"
"""The folder of ad-hoc runs (``python -m experiments.run`` without ``experiment=``: conf/config.yaml's
``experiment_id``), gitignored below results/. A ``make reproduce`` folder's report never reads it (its header
does not count its runs), so an ad-hoc run leaves every committed file as it was."""


def experiment_folders(results_dir: Path) -> list[str]:
    """The experiment folders below ``results_dir``: those holding a summary.csv, sorted; the ad-hoc folder
    (:data:`ADHOC`) only where ``results_dir`` is not a ``make reproduce`` folder (no reproduce_status.json)."""
    names = sorted(p.parent.name for p in Path(results_dir).glob("*/summary.csv"))
    return [n for n in names if n != ADHOC] if (Path(results_dir) / STATUS_FILE).exists() else names


def restore_summaries(results_dir: Path) -> None:
    """Rebuild the summary.csv of each experiment folder below ``results_dir`` whose summary is missing or holds its
    header alone while its run folders hold their rows (experiments/store/sink.py :func:`restore_summary`, one line
    naming it): the summary is derived from the runs, so the report does not call them not run.

    Raises:
        ConfigError: a summary cannot be read (one line naming it).
    """
    from experiments.store.sink import restore_summary

    skip = ADHOC if (Path(results_dir) / STATUS_FILE).exists() else None
    for folder in sorted(p for p in Path(results_dir).iterdir() if p.name != skip and (p / "runs").is_dir()):
        restore_summary(folder)


def results_folder_problem(results_dir: Path) -> str | None:
    """Why ``results_dir`` is no results folder, in one line naming it (None when it is one): not a folder, an
    experiment folder (the folder above it is the results folder), or neither an experiment folder below it nor a
    ``reproduce_status.json`` in it. The report command and ``experiments.prune`` refuse such a folder."""
    from experiments.settings.fields import folder_problem

    if why := folder_problem(results_dir):
        return f"{results_dir}: {why}"
    if (Path(results_dir) / "summary.csv").exists():
        return (
            f"{results_dir}: an experiment folder, not a results folder: give the folder above it "
            f"({Path(results_dir).parent})"
        )
    if not experiment_folders(results_dir) and not (Path(results_dir) / STATUS_FILE).exists():
        return f"{results_dir}: not a results folder (no <experiment>/summary.csv below it)"
    return None


def statuses(results_dir: Path) -> dict:
    """``reproduce_status.json`` of ``results_dir`` (each experiment's last ``make reproduce`` call); {} without.

    Raises:
        ConfigError: the file is not a regular file, cannot be read, is not a JSON object of objects, or an entry
            lacks its status text or holds a value of another kind than reproduce writes (one line naming it and the
            entry: remove it and ``make reproduce`` writes it again).
    """
    path = Path(results_dir) / STATUS_FILE
    if not path.exists() and not path.is_symlink():
        return {}
    why = file_problem(path)
    try:
        data = json.loads(path.read_text()) if why is None else None
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:  # nested too deep: damaged too
        why = getattr(exc, "strerror", None) or f"not JSON ({' '.join(str(exc).split())[:60]})"
        data = None
    if why is None and not (isinstance(data, dict) and all(isinstance(v, dict) for v in data.values())):
        why = "not an object of experiments' statuses"
    if why is None:
        why = next((f"{name}: {w}" for name, entry in data.items() if (w := _status_entry_problem(entry))), None)
    if why is not None:
        raise ConfigError(f"{path}: damaged status file ({why}); remove it and `make reproduce` writes it again")
    return data


SWEEP_STATUSES = ("ran", "skipped", "crashed", "interrupted", "left out")
"""What ``make reproduce`` records of an experiment's last sweep (experiments/sweeps/launch.py ``run_sweep``,
experiments/reproduce.py)."""
PROFILES = ("smoke", "quick", "long", "paper")


def _status_entry_problem(entry: dict) -> str | None:
    """What is wrong with one experiment's entry of the status file (None when nothing): ``status`` text (always
    there), ``message`` and ``profile`` text, ``wall_s`` a number or null, ``figures`` and ``figures_missing`` lists
    of text, where the entry has them (experiments/reproduce.py writes them so)."""
    if not isinstance(entry.get("status"), str):
        return "no status text" if "status" not in entry else f"status {entry['status']!r} is not text"
    if entry["status"] not in SWEEP_STATUSES:
        return f"status {entry['status']!r} is not one of {', '.join(SWEEP_STATUSES)}"
    for key in ("message", "profile"):
        if key in entry and not isinstance(entry[key], str):
            return f"{key} {entry[key]!r} is not text"
    if entry.get("profile", "quick") not in PROFILES:
        return f"profile {entry['profile']!r} is not one of {', '.join(PROFILES)}"
    wall = entry.get("wall_s")
    if wall is not None and (isinstance(wall, bool) or not isinstance(wall, (int, float))):
        return f"wall_s {wall!r} is not a number"
    if wall is not None and not 0 <= wall < math.inf:
        return f"wall_s {wall!r} is not seconds (a finite number >= 0)"
    for key in ("figures", "figures_missing"):
        if key in entry and not (isinstance(entry[key], list) and all(isinstance(f, str) for f in entry[key])):
            return f"{key} is not a list of file names"
    return None


def _config_profile(path: Path) -> str | None:
    """The ``profile`` of a run's config.yaml; None when it has none or cannot be read as a mapping (a damaged or
    odd file is the runner's to name: it reruns such a run; :func:`experiments.analysis.configs.run_config`)."""
    profile = (configs.run_config(path) or {}).get("profile")
    return str(profile) if isinstance(profile, str) and profile else None


def folder_profiles(results_dir: Path, status: dict | None = None) -> dict[str, str]:
    """Experiment folder -> the profile its runs were made with: its entry of the status file (``status``: the file
    as :func:`statuses` read it; default: read here), else the first of its runs' config.yaml that says (every run of
    a folder shares the profile it was called with); folders that say nothing are left out.

    Raises:
        ConfigError: a damaged status file (:func:`statuses`).
    """
    status = statuses(results_dir) if status is None else status
    out = {}
    for name in experiment_folders(results_dir):
        named = (status.get(name) or {}).get("profile")
        if not named:
            named = next(
                (p for f in run_files(Path(results_dir) / name, "config.yaml") if (p := _config_profile(f))),
                None,
            )
        if named:
            out[name] = str(named)
    return out


def other_profiles(results_dir: Path, profile: str) -> str | None:
    """Why ``results_dir`` is no folder of ``profile``: the first experiment folder whose runs another profile made
    (:func:`folder_profiles`), e.g. ``the runs of results/lr_speedup were made with profile quick (3 experiment
    folders of other profiles)``; None when every folder that says is of ``profile``. A folder of two profiles' runs
    was judged as one (reproduce pooled 2-epoch smoke runs with 20-epoch quick ones into one speed-up table).

    Raises:
        ConfigError: a damaged status file (:func:`statuses`).
    """
    other = {n: p for n, p in folder_profiles(results_dir).items() if p != profile}
    if not other:
        return None
    name, made_with = sorted(other.items())[0]
    more = f" ({len(other)} experiment folders of other profiles)" if len(other) > 1 else ""
    return f"the runs of {Path(results_dir) / name} were made with profile {made_with}{more}"


def run_profile(results_dir: Path) -> str | None:
    """The profile the runs below ``results_dir`` were made with: the most common ``profile`` of the status file,
    else of the experiment folders' runs (:func:`folder_profiles`); None when neither says.

    Raises:
        ConfigError: a damaged status file (:func:`statuses`).
    """
    status = statuses(results_dir)
    named = Counter(str(s["profile"]) for s in status.values() if s.get("profile"))
    if not named:
        named = Counter(folder_profiles(results_dir, status).values())
    return named.most_common(1)[0][0] if named else None


def run_commits(results_dir: Path, names: list[str] | None = None) -> str:
    """The code commits named in the runs' provenance.json (most runs first), e.g. ```abc123` (120 runs)``: the
    report depends on its CSVs only, so redrawing it from unchanged results gives the same bytes. ``names``: the
    experiments whose runs count (default: :func:`experiment_folders`; never other folders, e.g. ad-hoc runs)."""
    counts = Counter()
    for _, prov in provenances(results_dir, names):
        counts["unreadable provenance" if prov is None else prov.get("git_commit", "unknown")] += 1
    if not counts:
        return "(no run recorded)"
    return ", ".join(f"`{c}` ({n} runs)" for c, n in sorted(counts.items(), key=lambda t: (-t[1], t[0])))


def provenances(results_dir: Path, names: list[str] | None = None):
    """``(experiment, provenance dict or None when unreadable)`` of every run of the experiments ``names`` (default:
    :func:`experiment_folders`), in path order; a provenance.json that is not a regular file is left out, named
    (experiments/store/table.py :func:`run_files`: a named pipe is never opened)."""
    names = experiment_folders(results_dir) if names is None else names
    for name in names:
        for f in run_files(Path(results_dir) / name, "provenance.json"):
            yield name, read_provenance(f)[0]


def calibration_spreads(results_dir: Path, names: list[str] | None = None) -> str:
    """One paragraph on the calibration entries the runs used (each run's ``provenance.json``
    ``calibration_used``): how many runs used calibrated costs, how many entries, and those whose spread stayed above
    the bound after the last round of repeats (experiments/clock/spread.py ``SPREAD_BOUND``), with the runs per
    experiment that used one. '' when no run used a calibration."""
    used, above, runs, runs_above, bound = set(), set(), 0, Counter(), None
    for name, prov in provenances(results_dir, names):
        cal = (prov or {}).get("calibration_used") or {}
        if not cal.get("entries"):
            continue
        runs += 1
        used.update(cal["entries"])
        bound = cal.get("spread_bound", bound)
        flagged = cal.get("spread_above_bound") or []
        above.update(flagged)
        runs_above[name] += bool(flagged)
    if not runs:
        return ""
    text = f"Calibration: {runs} runs used calibrated costs ({len(used)} entries). "
    if not above:
        return text + f"No entry they used has a spread above the {bound:.0%} bound."
    per = ", ".join(f"{n} {k}" for n, k in sorted(runs_above.items(), key=lambda t: (-t[1], t[0])) if k)
    return text + (
        f"{len(above)} of those entries kept a spread (the width of its median's confidence interval over the "
        f"median; max - min of its repeats when it has 5) above the {bound:.0%} bound when measured again, and "
        f"were used with a warning by {sum(runs_above.values())} runs ({per}); their times carry that noise. "
        "Each run's provenance.json names them "
        "(`calibration_used.spread_above_bound`); `python -m experiments.calibrate --only ID` lists every entry's "
        "spread."
    )
