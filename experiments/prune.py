"""``python -m experiments.prune``: remove from a results folder the runs that no job of a profile makes any more
(an experiment yaml whose sweep changed since: other worker counts, other keys, fewer seeds), so that its tables,
figures and report read only the runs the profile plans.

    python -m experiments.prune results-long --profile long [--only ID ...] [--apply]

The planned runs are those of ``make reproduce`` (experiments/reproduce.py :func:`plan_sweeps`, every experiment of
the profile, the ``EXTENDED`` ones included): each job's run id, as the runner names it. In each planned experiment's
folder, a summary row or a run folder under ``runs/`` whose run id is not planned is stale. Without ``--apply`` the
stale runs are listed and nothing changes; with it, their run folders are first moved aside (a link as the link,
never its target; one that cannot be moved puts the others back and nothing changes), then their rows leave
summary.csv (rewritten once, under its lock: experiments/store/sink.py :func:`remove_runs`), speedup.csv is written
again from the summary that is left, and the folders set aside are removed, so that summary and runs/ never
disagree; an experiment left without runs loses its figures, tables and entry of
reproduce_status.json (the report then says ``not run yet``). Left alone: a tuning's trials
(``<experiment>/tuning/``), folders of experiments the profile does not plan (``adhoc/``, ...), other files.
Run ``make reproduce`` afterwards to redraw the figures and the report.

A folder whose runs were made with another profile (its reproduce_status.json, else its runs' config.yaml) is
refused: every run of it would be stale.

Exit codes: 0 done (nothing stale, or listed, or removed); 2 bad input (no such folder, a folder of another profile,
an experiment id the profile does not have, an empty --only, jobs that do not compose, a damaged status file) or a
run file that cannot be moved or removed, one line naming it; 130 Ctrl-C, one line.
"""

from __future__ import annotations

import sys
from pathlib import Path

from experiments.cli import Parser, folder_arg
from experiments.errors import ConfigError, Interrupted
from experiments.log import get_logger
from experiments.stops import loaded

log = get_logger(__name__)


def planned_run_ids(experiment: str, profile: str, results_dir: Path) -> dict[str, set[str]]:
    """Experiment folder -> the run ids ``make reproduce --profile <profile>`` plans for ``experiment`` there.

    Raises:
        ConfigError: a job does not compose or its settings do not build.
    """
    from experiments.reproduce import plan_sweeps
    from experiments.settings.build import build_settings
    from experiments.settings.compose import compose_jobs, job_overrides, profile_sweep
    from experiments.store.run_id import make_run_id

    out: dict[str, set[str]] = {}
    for overrides, _ in plan_sweeps(experiment, profile, results_dir):
        combos, _ = job_overrides(overrides + profile_sweep(overrides), multirun=True)
        for combo, cfg in zip(combos, compose_jobs(combos)):
            settings = build_settings(cfg)
            out.setdefault(settings.experiment_id, set()).add(make_run_id(combo, settings.seed))
    return out


def stale_run_ids(results_dir: Path, folder: str, planned: set[str]) -> list[str]:
    """The run ids of ``<results_dir>/<folder>`` (summary rows and run folders) that are not in ``planned``.

    Raises:
        ConfigError: the summary cannot be read.
    """
    from experiments.store.table import read_summary_frame

    exp = results_dir / folder
    summary = read_summary_frame(exp / "summary.csv")
    ids = set(summary["run_id"].astype(str)) if "run_id" in summary else set()
    runs = exp / "runs"
    ids |= {p.name for p in runs.iterdir() if p.is_dir()} if runs.is_dir() else set()
    return sorted(ids - planned)


def _no_runs(exp_dir: Path) -> bool:
    from experiments.store.table import read_summary_frame

    return read_summary_frame(exp_dir / "summary.csv").empty


def _clear(exp_dir: Path) -> None:
    """An experiment folder left without runs: what was derived from them goes too (figures/, speedup.csv, the
    header-only summary.csv and its lock, the empty runs/); other files (a tuning's, model_validation's sittings)
    stay."""
    import shutil

    shutil.rmtree(exp_dir / "figures", ignore_errors=True)
    for name in ("speedup.csv", "summary.csv", "summary.csv.lock"):
        (exp_dir / name).unlink(missing_ok=True)
    for folder in (exp_dir / "runs", exp_dir):
        try:
            folder.rmdir()
        except OSError:
            pass


def _forget_status(results_dir: Path, folder: str, whole: bool) -> None:
    """After runs of ``folder`` were removed, its entry of ``reproduce_status.json`` is forgotten: ``whole`` (no run
    left; the entry says its sweep ran) so the report calls it ``not run yet`` rather than ``not runnable here``, else
    only its list of figures, so the next ``make reproduce`` draws them again from the runs that are left."""
    import json

    from experiments.store.atomic import write_if_changed

    path = results_dir / "reproduce_status.json"
    if not path.is_file():
        return
    try:
        statuses = json.loads(path.read_text())
    except (OSError, ValueError, RecursionError):
        return
    if not isinstance(statuses, dict) or not isinstance(statuses.get(folder), dict):
        return
    if whole:
        statuses.pop(folder)
    else:
        statuses[folder].pop("figures", None)
    write_if_changed(path, json.dumps(statuses, indent=1, sort_keys=True))


def _check_writable(exp_dir: Path) -> None:
    """Raise ConfigError when ``exp_dir`` or its ``runs/`` cannot be written: checked before any of its runs is
    removed, so that its summary and its run folders never disagree."""
    from experiments.store.atomic import writable

    for folder in (exp_dir, exp_dir / "runs"):
        if folder.is_dir() and not writable(folder):
            raise ConfigError(f"{folder}: not writable (--apply removes runs there); its runs were not removed")


TRASH_PREFIX = ".pruned-"
"""The folder ``<experiment>/.pruned-<random>/`` (beside runs/, so no reader of ``runs/*`` sees it) where --apply
sets the stale run folders aside before their summary rows go, and removes them after."""


def _set_aside(exp_dir: Path, stale: list[str]) -> tuple[Path, list[str]]:
    """Rename each stale run folder of ``exp_dir/runs`` (a plain name there: a folder, or a link, moved as the link,
    never its target) into a new trash folder of ``exp_dir`` (:data:`TRASH_PREFIX`): before the summary loses their
    rows, so that a folder that cannot be moved leaves both as they were. An empty folder takes each one's place
    until its row is gone (a summary row without its run folder is a damaged summary, rebuilt: sink.py
    :func:`remove_runs` removes it with the row). Returns the trash and the ids moved.

    Raises:
        OSError: a folder could not be moved (one line naming it); those moved already are put back first.
    """
    import tempfile

    runs = exp_dir / "runs"
    trash = Path(tempfile.mkdtemp(prefix=TRASH_PREFIX, dir=exp_dir))
    moved: list[str] = []
    try:
        for rid in stale:
            folder = runs / rid
            if Path(rid).name != rid or rid in (".", "..") or not (folder.is_dir() or folder.is_symlink()):
                continue  # a summary row without its folder, or an id that is no name under runs/
            try:
                folder.rename(trash / rid)
                moved.append(rid)
                folder.mkdir()
            except OSError as exc:
                why = f"cannot move it aside ({exc.strerror}); no run removed"
                raise OSError(exc.errno, why, str(folder)) from None
    except BaseException:
        _put_back(trash, moved)
        raise
    return trash, moved


def _put_back(trash: Path, moved: list[str]) -> None:
    """Undo :func:`_set_aside`: each folder moved back into runs/ in place of its empty one, the trash removed."""
    for rid in reversed(moved):
        folder = trash.parent / "runs" / rid
        if folder.is_dir() and not folder.is_symlink() and not any(folder.iterdir()):
            folder.rmdir()
        (trash / rid).rename(folder)
    trash.rmdir()


def _delete(trash: Path, moved: list[str]) -> None:
    """Remove the run folders set aside in ``trash`` (a link as the link, never its target), then the trash.

    Raises:
        OSError: a file could not be removed (one line naming its full path; the runs already left the summary and
            runs/, what is left of them stays in ``trash`` for the user to remove).
    """
    import shutil

    def fail(_func, path, exc_info):  # rmtree names a file by its name alone: the full path, and what is left where
        exc = exc_info[1]
        raise OSError(
            getattr(exc, "errno", None),
            f"cannot be removed ({getattr(exc, 'strerror', None) or exc}); its run left summary.csv and runs/, "
            f"what is left of it is in {trash}: remove that by hand",
            str(path),
        ) from None

    for rid in moved:
        path = trash / rid
        if path.is_symlink():
            try:
                path.unlink()
            except OSError as exc:
                fail(None, path, (type(exc), exc, None))
        else:
            shutil.rmtree(path, onerror=fail)
    trash.rmdir()


def main(argv: list[str] | None = None) -> int:
    """Console entry (module docstring)."""
    from experiments.analysis.speedup import write_speedup
    from experiments.report.load import other_profiles, results_folder_problem
    from experiments.reproduce import EXPERIMENTS
    from experiments.store.sink import remove_runs

    ap = Parser("python -m experiments.prune", __doc__)
    ap.add_argument("results_dir", type=folder_arg, help="the results folder (e.g. results, results-long)")
    ap.add_argument("--profile", required=True, choices=["smoke", "quick", "long", "paper"])
    ap.add_argument("--only", nargs="*", metavar="ID", help="a subset of experiment ids (default: all)")
    ap.add_argument("--apply", action="store_true", help="remove the stale runs (default: only list them)")
    args = ap.parse_args(argv)
    if args.only is not None and not args.only:  # as experiments.reproduce: it pruned every experiment
        ap.error("--only: name at least one experiment id (known: " + ", ".join(EXPERIMENTS) + ")")
    try:
        unknown = sorted(set(args.only or ()) - set(EXPERIMENTS))
        if unknown:
            raise ConfigError(f"--only {' '.join(unknown)}: no such experiment (one of {', '.join(EXPERIMENTS)})")
        if why := results_folder_problem(args.results_dir):
            raise ConfigError(why)
        if why := other_profiles(args.results_dir, args.profile):  # every run of such a folder would be stale
            raise ConfigError(
                f"--profile {args.profile}: {why}; nothing removed: prune a folder of one profile with that profile"
            )
        total, judged = 0, 0
        for experiment in args.only or EXPERIMENTS:
            for folder, planned in planned_run_ids(experiment, args.profile, args.results_dir).items():
                if not (args.results_dir / folder).is_dir():
                    continue
                judged += 1
                stale = stale_run_ids(args.results_dir, folder, planned)
                if not stale:
                    continue
                total += len(stale)
                shown = ", ".join(stale[:3]) + (", ..." if len(stale) > 3 else "")
                if args.apply:
                    exp_dir = args.results_dir / folder
                    _check_writable(exp_dir)
                    trash, moved = _set_aside(exp_dir, stale)
                    try:
                        rows = remove_runs(args.results_dir, folder, stale)  # their folders are aside: rows only
                    except BaseException:
                        _put_back(trash, moved)
                        raise
                    try:  # the summary changed: what is derived from it follows, whatever the removal below does
                        write_speedup(exp_dir)  # speedup.csv from the summary that is left
                        whole = _no_runs(exp_dir)
                        if whole:
                            _clear(exp_dir)
                        _forget_status(args.results_dir, folder, whole)
                    finally:
                        _delete(trash, moved)
                    if whole:  # the experiment's folder, empty now that the trash is gone
                        _clear(exp_dir)
                    log.info(f"{folder}: removed {len(stale)} stale run(s) ({rows} summary row(s)): {shown}")
                else:
                    log.info(f"{folder}: {len(stale)} stale run(s), not planned by profile {args.profile}: {shown}")
    except ConfigError as exc:
        log.error(f"{exc}")
        return 2
    except OSError as exc:  # a file that could not be removed or written after the check
        log.error(f"{exc.filename or args.results_dir}: {exc.strerror or exc}")
        return 2
    except KeyboardInterrupt as exc:  # as experiments.reproduce: one line, 128 + the signal
        log.info(
            "interrupted: each experiment's summary.csv and run folders still agree (a stale run leaves both or "
            "neither); run it again to remove the rest"
        )
        return 128 + Interrupted.signum_of(exc)
    if not judged:  # only folders of one's own runs (adhoc/): none is an experiment of a profile
        log.info(f"{args.results_dir}: no experiment folder of profile {args.profile} here; nothing to remove")
    elif not total:
        log.info(f"{args.results_dir}: every run is one that profile {args.profile} plans; nothing to remove")
    elif not args.apply:
        log.info(
            f"{total} stale run(s) listed; --apply removes them (`make reproduce` then redraws report and figures)"
        )
    return 0


if __name__ == "__main__":
    loaded()  # a stop signal from here on is the command's own (experiments.stops.while_loading)
    sys.exit(main())
