"""``make reproduce``: every experiment of a profile as Hydra multiruns, then speed-up tables, figures, report.

    python -m experiments.reproduce --profile quick --results-dir results [--force] [--only ID ...] [--extended]

First an up-to-date check (:func:`unfinished_runs`): an experiment whose planned runs all finished with the configs they
compose to today starts no sweep and calibrates nothing ("nothing to run: N runs already finished"); its figures are
drawn again only when one is missing, and REPORT.md, verdicts.csv and reproduce_status.json are rewritten only when
their content changes. Resumable: each sweep skips runs that finished (``force=true`` reruns them), so a call
interrupted (Ctrl-C; SIGTERM and SIGHUP alike: the running sweeps are interrupted and awaited, exit 128 + the signal)
continues, when called again, with the unfinished runs, each from its beginning (runs are not resumed part-way).
``--jobs N`` (``make reproduce JOBS=N``, default: the cores) runs up to N jobs whose clock is simulated side by side,
after measuring the simulated clock's costs alone (``experiments.calibrate``): up to N experiments at a time, each
running its sweeps in order (experiments/sweeps/launch.py), an experiment alone giving its sweeps Hydra's joblib
launcher with N jobs (``conf/hydra/launcher/parallel.yaml``); a sweep of jobs that measure wall time (engines
``shared_memory``, ``distributed``) waits until no other sweep runs and runs its jobs one at a time with nothing beside
them. An experiment whose data is missing (or whose settings cannot run here) is skipped with the reason, and the report
says so. A figure that cannot be drawn is named with its reason in ``reproduce_status.json`` (``figures_missing``), in
the report and on stderr; every other figure and the report are still written. Exit code 0 when every experiment ran or
was skipped for a stated reason and every figure was drawn; 1 when a sweep crashed or a figure is missing; 2 when no
experiment asked for ran and a sweep refused its input (each after writing the report), or for bad input found before
anything runs. A call that reruns nothing leaves ``reproduce_status.json`` and the report byte-identical.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from experiments.cli import Parser, count_arg, folder_arg
from experiments.errors import TERM_SIGNALS, Interrupted
from experiments.figures import draw_all, figures_outdated
from experiments.log import get_logger
from experiments.results_folder import check_results_folder, path_override
from experiments.stops import as_interrupt, loaded
from experiments.store.atomic import write_if_changed
from experiments.sweeps.launch import reference_sweep, run_sweep, side_by_side

log = get_logger(__name__)

REPO = Path(__file__).resolve().parents[1]
EXPERIMENTS = [
    "lr_speedup",
    "lenet5_speedup",
    "allcnn_sync_vs_async",
    "artificial_delay",
    "large_time_per_epoch",
    "large_accuracy",
    "tau_threshold",
    "tau_threshold_lenet5",
    "stragglers",
    "model_validation",
    "paper_timing",
    "async_methods",
    "async_methods_real",
]
# Experiments a profile runs only with --extended (``make reproduce EXTENDED=1``). The long profile's own budget
# (docs/profiles.md) is the paper's accuracy, speed-up and delay claims at the scale the paper made them, plus
# tau_threshold's theorem; these add the rest (docs/profiles.md gives the times): the timing
# experiments whose long settings add real engines or nothing but seeds to quick's (large_time_per_epoch,
# model_validation, paper_timing) and the beyond-paper comparisons (stragglers, async_methods, async_methods_real).
EXTENDED = {
    "long": (
        "large_time_per_epoch",
        "paper_timing",
        "stragglers",
        "model_validation",
        "async_methods",
        "async_methods_real",
    )
}


def plan_sweeps(
    experiment: str, profile: str, results_dir: Path, extra: list[str] = ()
) -> list[tuple[list[str], bool]]:
    """An experiment's sweeps split by clock and by tuning: ``[(overrides, simulated), ...]``, in the order to run.

    An experiment yaml may name a ``reference_sweep`` per profile: one more sweep, run first, whose keys win over
    the profile's (async_methods: the serial runs that set the targets, experiments/analysis/targets.py). Each
    sweep is one sweep when every job has the same clock; otherwise one per clock, each naming its engines
    (``engine=simulated`` and ``engine=shared_memory,distributed``): the job overrides, hence the run ids, are those
    of the whole sweep. A profile's ``wall:`` block (``profiles.<p>.wall`` in conf/experiment/<id>.yaml) sets keys
    of its wall-clock sweep only: the worker counts measured on real engines, where the simulated sweep predicts
    more. With ``lr_tuning_seed`` set (experiments/sweeps/tuning.py), each of those is split again: the tuning seed's
    sweep (which tunes every setting), then the other seeds' (which run the choices). The clocks and seeds are read
    from a pairwise cover of the sweep (:func:`experiments.settings.compose.job_cover`: a clock set by one swept value
    or by two together is seen) rather than from every job; a sweep whose cover does not compose stays whole (the
    child then checks every job and reports the error).
    """
    base = [f"experiment={experiment}", f"profile={profile}", path_override("results_dir", results_dir), *extra]
    given = {o.split("=", 1)[0].lstrip("+~") for o in base}
    reference = [f"{k}={v}" for k, v in reference_sweep(experiment, profile).items() if k not in given]
    return (_plan(base + reference) if reference else []) + _plan(base)


def _plan(base: list[str]) -> list[tuple[list[str], bool]]:
    """:func:`plan_sweeps` for one sweep's command line ``base``."""
    from experiments.errors import ConfigError
    from experiments.settings.compose import compose_jobs, job_cover, profile_sweep
    from experiments.sweeps.tuning import split_sweep

    try:
        combos = job_cover(base + profile_sweep(base), strength=2)  # every pair of values of two keys, in a few jobs
        clock_of, seeds, tuning, wall = {}, set(), None, {}  # engine option -> its clock
        for combo, cfg in zip(combos, compose_jobs(combos)):
            option = next((o.split("=", 1)[1] for o in combo if o.startswith("engine=")), cfg.engine.name)
            clock_of[option] = cfg.engine.clock
            seeds.add(int(cfg.seed))
            tuning = cfg.get("lr_tuning_seed")
            wall = dict((cfg.get("profiles") or {}).get(cfg.get("profile"), {}).get("wall") or {})
    except ConfigError:
        return [(base, False)]
    clocks = sorted(set(clock_of.values()), key=lambda c: c != "simulated")
    if len(clocks) == 1:
        plan = [(base, clocks[0] == "simulated")]
    else:
        rest = [o for o in base if o.split("=", 1)[0] != "engine"]  # each key once (the precheck refuses twice)
        plan = [
            (rest + ["engine=" + ",".join(e for e in clock_of if clock_of[e] == c)], c == "simulated") for c in clocks
        ]
    if wall:  # the profile's keys for its wall-clock sweep only (e.g. the worker counts measured on this machine)
        given = {o.split("=", 1)[0] for o in base}
        extra_wall = [f"{k}={'null' if v is None else v}" for k, v in wall.items() if k not in given]
        plan = [(overrides + ([] if simulated else extra_wall), simulated) for overrides, simulated in plan]
    out = []
    for overrides, simulated in plan:
        t = tuning if simulated or "lr_tuning_seed" not in wall else wall["lr_tuning_seed"]
        if t is None:
            out.append((overrides, simulated))
        else:  # each setting tuned on the tuning seed (experiments/sweeps/tuning.py): its sweep first, then the others'
            out += [(part, simulated) for part in split_sweep(overrides, sorted(seeds), int(t))]
    return out


def unfinished_runs(
    experiment: str, profile: str, results_dir: Path, extra: list[str] = (), lacking: list[str] | None = None
) -> list[str] | None:
    """The run ids of the jobs of :func:`plan_sweeps` that its sweeps would run, as the runner decides
    (experiments/runner.py ``_skip``): those without a finished row (``ok`` or ``diverged``) in the experiment's
    summary.csv and a trace, or whose config.yaml differs from the config the job composes to now (an experiment yaml
    edited since). A tuning seed's job (``lr_tuning_seed``) counts as finished when tuning.csv holds its setting's
    choice; another seed's job is composed with that choice, as the runner does. [] when nothing would run; None
    when it cannot be told here (a job does not compose, a file cannot be read): then the sweeps run and say why.
    A job whose data set this machine lacks (experiments/settings/preflight.py ``check_data``) is not one to run: the
    sweep would skip it; its one-line reason is appended to ``lacking`` when a list is given.
    Composes every job of every experiment: the check's cost grows with the profile's job count."""
    from experiments.errors import ConfigError
    from experiments.runner import _with_values
    from experiments.settings.build import build_settings, resolved
    from experiments.settings.compose import compose_jobs, job_overrides, profile_sweep
    from experiments.settings.preflight import check_data
    from experiments.store.run_id import make_run_id
    from experiments.store.sink import RunSink
    from experiments.sweeps.tuning import read_choice, setting_key

    todo = []
    data_missing: dict[str, str | None] = {}  # problem name -> why its data is missing (None: it is there)
    try:
        for overrides, _ in plan_sweeps(experiment, profile, results_dir, list(extra)):
            combos, _ = job_overrides(overrides + profile_sweep(overrides), multirun=True)
            for combo, cfg in zip(combos, compose_jobs(combos)):
                settings = build_settings(cfg)
                rid = make_run_id(combo, settings.seed)
                if settings.lr_tuning_seed is not None:
                    exp_dir = Path(settings.results_dir) / settings.experiment_id
                    values = read_choice(exp_dir, setting_key(combo, settings.lr_tuning_seed))
                    if values is None or settings.seed == settings.lr_tuning_seed:
                        todo += [rid] if values is None else []
                        continue
                    cfg = _with_values(cfg, values)
                    settings = build_settings(cfg)
                sink = RunSink(settings.results_dir, settings.experiment_id, rid)
                if not sink.finished() or sink.config_changes(resolved(cfg)):
                    name = settings.problem.name
                    if name not in data_missing:  # each problem's data checked once (a failed download costs seconds)
                        try:
                            check_data([settings])
                            data_missing[name] = None
                        except ConfigError as exc:
                            data_missing[name] = str(exc)
                    if data_missing[name] is not None:
                        if lacking is not None:
                            lacking.append(data_missing[name])
                        continue
                    todo.append(rid)
    except (ConfigError, OSError, ValueError, KeyError):
        return None
    return todo


def run_experiment(
    experiment: str, profile: str, results_dir: Path, force: bool, jobs: int = 1, extra: list[str] = ()
) -> dict:
    """Run one experiment's sweeps (:func:`plan_sweeps`) in order: simulated-clock jobs up to ``jobs`` at a time
    (beside other experiments' simulated sweeps), wall-clock jobs one at a time with no other sweep running
    (experiments/sweeps/launch.py ``run_sweep``); return ``{status, message, wall_s}`` as ``run_sweep``, over all of
    them (``wall_s``: the seconds its sweeps ran; the first sweep that did not run decides the status)."""
    out = {"status": "ran", "message": "", "wall_s": 0.0}
    for overrides, simulated in plan_sweeps(experiment, profile, results_dir, list(extra)):
        st = run_sweep(
            experiment,
            profile,
            results_dir,
            force,
            overrides=overrides,
            jobs=jobs if simulated else 1,
            simulated=simulated,
        )
        out["wall_s"] += st["wall_s"]
        if st["status"] != "ran" and out["status"] == "ran":
            out.update(status=st["status"], message=st["message"])
    return out


def main(argv: list[str] | None = None) -> int:
    ap = Parser("python -m experiments.reproduce", __doc__)
    ap.add_argument("--profile", default="quick", choices=["smoke", "quick", "long", "paper"])
    ap.add_argument("--results-dir", type=folder_arg, help="default: results (quick), results-<profile> otherwise")
    ap.add_argument("--force", action="store_true", help="rerun runs whose results exist (and remeasure the clock)")
    ap.add_argument(
        "--keep-calibration",
        action="store_true",
        help="with --force: keep the machine's calibration (e.g. made by make calibrate just before)",
    )
    ap.add_argument("--only", nargs="*", default=None, metavar="ID", help="a subset of experiment ids")
    ap.add_argument(
        "--extended",
        action="store_true",
        help="also the experiments the profile leaves out of its budget (long: " + ", ".join(EXTENDED["long"]) + ")",
    )
    ap.add_argument(
        "--jobs",
        type=count_arg,
        default=os.cpu_count() or 1,
        metavar="N",
        help="simulated-clock jobs at a time (default: the cores); wall-clock jobs always run alone",
    )
    args = ap.parse_args(argv)
    if args.only is not None and not args.only:
        ap.error("--only: name at least one experiment id (known: " + ", ".join(EXPERIMENTS) + ")")
    if args.extended and args.profile not in EXTENDED:  # it was accepted and changed nothing
        ap.error(f"--extended: profile {args.profile} runs every experiment already ({', '.join(EXTENDED)} does not)")
    if args.keep_calibration and not args.force:
        ap.error("--keep-calibration: only with --force (without it the calibration is kept anyway)")
    from experiments.command_line import JOBS_PER_CORE, MAX_N_JOBS

    if args.jobs > MAX_N_JOBS:  # each job a process: past the cores they only share them (and their memory)
        ap.error(f"--jobs {args.jobs}: at most {MAX_N_JOBS} ({JOBS_PER_CORE} per core of this machine)")
    if args.only:
        args.only = list(dict.fromkeys(args.only))  # an id named twice is one experiment (it ran twice)
    results_dir = args.results_dir or Path("results" if args.profile == "quick" else f"results-{args.profile}")
    left_out = () if args.extended or args.only else EXTENDED.get(args.profile, ())
    experiments = args.only or [e for e in EXPERIMENTS if e not in left_out]
    unknown = [e for e in experiments if e not in EXPERIMENTS]
    if unknown:
        log.error(f"--only {unknown[0]}: unknown experiment (known: {', '.join(EXPERIMENTS)})")
        return 2
    from experiments.clock.calibration import machine_path
    from experiments.errors import ConfigError
    from experiments.report.load import other_profiles

    try:
        machine_path()  # an empty $APAM_CALIBRATION is refused before anything is written
        check_results_folder(results_dir, experiments)  # a path the runs cannot take, a file where a folder goes
        if why := other_profiles(results_dir, args.profile):  # one folder, two profiles' runs: judged as one
            raise ConfigError(f"--profile {args.profile}: {why}; give another --results-dir (or that --profile)")
        results_dir.mkdir(parents=True, exist_ok=True)
    except ConfigError as exc:
        log.error(f"{exc}")
        return 2
    except OSError as exc:
        log.error(f"--results-dir {results_dir}: {exc.strerror or exc}")
        return 2
    for sig in TERM_SIGNALS:  # as Ctrl-C: the running sweeps are stopped and awaited
        signal.signal(sig, as_interrupt)
    try:
        return _reproduce(args, results_dir, experiments, left_out)
    except ConfigError as exc:  # a damaged reproduce_status.json
        log.error(f"{exc}")
        return 2
    except KeyboardInterrupt as exc:
        log.info(
            "interrupted: runs that finished are kept; `make reproduce` again skips them and starts every "
            "unfinished run from its beginning (runs are not resumed part-way)"
        )
        return 128 + Interrupted.signum_of(exc)


def _reproduce(args, results_dir: Path, experiments: list[str], left_out) -> int:
    """:func:`main` after its arguments are checked: the up-to-date check, calibration, sweeps, figures, report."""
    t_call = time.perf_counter()
    status_path = results_dir / "reproduce_status.json"
    from experiments.report.load import statuses as read_statuses

    statuses = read_statuses(results_dir)  # a damaged file: one line (main), before anything runs
    # the up-to-date check first: an experiment whose planned runs all finished with today's configs runs nothing
    lacking = {exp: [] for exp in experiments}  # jobs whose data this machine lacks: the sweeps would skip them
    todo = {
        exp: None if args.force else unfinished_runs(exp, args.profile, results_dir, (), lacking[exp])
        for exp in experiments
    }
    to_run = [e for e in experiments if todo[e] is None or todo[e]]
    log.info(
        f"checked {len(experiments)} experiment(s) in {time.perf_counter() - t_call:.0f} s: "
        + (f"{len(to_run)} with runs to do ({', '.join(to_run)})" if to_run else "every planned run finished")
    )
    if args.force and not args.keep_calibration:
        from experiments.clock.calibration import Calibration

        cal = Calibration()  # the machine's file, shared by every results folder
        cal.drop()  # a forced rerun measures this machine's costs anew (runs measure on first use)
        log.info(f"dropped {cal.path}: the simulated clock is calibrated anew on this machine")
    if args.jobs > 1 and to_run:  # costs measured alone first: jobs side by side would measure each other's load
        calibrate = [sys.executable, "-m", "experiments.calibrate", "--profile", args.profile, "--only", *to_run]
        if subprocess.run(calibrate, cwd=REPO, stdout=subprocess.DEVNULL, check=False).returncode != 0:
            log.error(f"calibration failed: {' '.join(calibrate)}")
            return 1
    for exp in left_out:  # results of an earlier extended call stay as they are
        statuses.setdefault(
            exp,
            {
                "status": "left out",
                "profile": args.profile,
                "wall_s": 0.0,
                "message": f"outside this profile's budget: `make reproduce PROFILE={args.profile} EXTENDED=1` runs it",
            },
        )
    redraw, to_start = [], []
    for i, exp in enumerate(experiments, 1):
        old = statuses.get(exp) or {}
        exp_dir = results_dir / exp
        if exp not in to_run and lacking[exp] and not _summary_rows(exp_dir):
            # every job needs data this machine lacks: skipped as the sweep would, its earlier skip record kept
            kept = old.get("status") == "skipped"
            statuses[exp] = (
                old
                if kept
                else {"status": "skipped", "message": lacking[exp][0], "wall_s": 0.0, "profile": args.profile}
            )
            log.info(
                f"== [{i}/{len(experiments)}] {exp}: skipped, {len(lacking[exp])} runs need data this machine "
                f"lacks: {lacking[exp][0]}"
            )
            continue
        if exp not in to_run:
            finished = _summary_rows(exp_dir)
            st = {"status": "ran", "message": "", "wall_s": 0.0, "profile": args.profile}
            st.update({k: old[k] for k in ("figures", "figures_missing") if k in old})
            statuses[exp] = _keep_timing_if_unchanged(old or None, st, b"", b"")
            log.info(f"== [{i}/{len(experiments)}] {exp}: nothing to run: {finished} runs already finished")
            if figures_outdated(old, results_dir):
                redraw.append(exp)
            continue
        to_start.append(exp)
    before = {exp: _summary_bytes(results_dir / exp) for exp in to_start}
    number = {exp: i for i, exp in enumerate(experiments, 1)}

    def start(exp: str, jobs: int) -> dict:
        log.info(f"== [{number[exp]}/{len(experiments)}] {exp} (profile {args.profile})")
        return run_experiment(exp, args.profile, results_dir, args.force, jobs)

    # experiments side by side (experiments/sweeps/launch.py): simulated sweeps overlap, each wall-clock sweep alone
    for exp, st in side_by_side(to_start, start, args.jobs):
        old, exp_dir = statuses.get(exp) or {}, results_dir / exp
        st["profile"] = args.profile
        if (exp_dir / "summary.csv").exists():
            from experiments.aggregate import write_speedup

            write_speedup(exp_dir)
            redraw.append(exp)
        elif st["status"] == "skipped":
            try:
                exp_dir.rmdir()
            except OSError:
                pass
        st.update({k: old[k] for k in ("figures", "figures_missing") if k in old})  # until this call draws them
        summary_after = _summary_bytes(exp_dir)
        statuses[exp] = _keep_timing_if_unchanged(old or None, st, before[exp], summary_after)
        write_if_changed(status_path, json.dumps(statuses, indent=1, sort_keys=True))
        what = (
            f"{st['status']} in {st['wall_s']:.0f} s"
            if st["status"] != "ran" or summary_after != before[exp]
            else f"nothing new in {st['wall_s']:.0f} s: its sweeps found every run finished"
        )
        log.info(f"== {exp}: {what}" + (f" -- {st['message']}" if st["message"] else ""))
    t_draw = time.perf_counter()
    for exp, figures in zip(redraw, draw_all(redraw, results_dir, args.jobs)):
        statuses[exp] = {k: v for k, v in statuses[exp].items() if k not in ("figures", "figures_missing")} | figures
        for item in figures.get("figures_missing", []):
            log.error(f"{exp}: figure {item['figure']} not drawn: {item['reason']}")
    if redraw:
        log.info(f"drew the figures of {len(redraw)} experiment(s) ({time.perf_counter() - t_draw:.0f} s)")
    write_if_changed(status_path, json.dumps(statuses, indent=1, sort_keys=True))
    from experiments.report import write_report

    t_report = time.perf_counter()
    path = results_dir / "REPORT.md"
    before = path.read_bytes() if path.is_file() else None
    report = write_report(results_dir, args.profile, statuses)
    verb = "wrote" if report.read_bytes() != before else "left unchanged"
    log.info(
        f"{verb} {report} ({time.perf_counter() - t_report:.0f} s; whole call {time.perf_counter() - t_call:.0f} s)"
    )
    missing = [f"{e}/{m['figure']}" for e, s in statuses.items() for m in s.get("figures_missing", [])]
    if missing:
        log.error(f"{len(missing)} figure(s) not drawn (named in {report}): {', '.join(missing)}")
    refused = [e for e in to_start if statuses[e]["status"] == "skipped"]  # its sweep refused its input (exit 2)
    if refused and not any(statuses[e]["status"] == "ran" for e in experiments):  # nothing asked for ran: not a 0
        log.error(f"nothing ran: the sweeps of {', '.join(refused)} refused their input (why: above, and in {report})")
        return 2
    return 1 if missing or any(s["status"] == "crashed" for s in statuses.values()) else 0


def _summary_rows(exp_dir: Path) -> int:
    """Rows of ``exp_dir``'s summary.csv (0 without one)."""
    from experiments.store.table import read_summary_frame

    path = exp_dir / "summary.csv"
    return len(read_summary_frame(path)) if path.is_file() else 0


def _summary_bytes(exp_dir: Path) -> bytes | None:
    path = exp_dir / "summary.csv"
    return path.read_bytes() if path.exists() else None


def _keep_timing_if_unchanged(old: dict | None, new: dict, before: bytes | None, after: bytes | None) -> dict:
    """A call that reran nothing (summary.csv unchanged, same status) keeps the previous entry's ``wall_s``, even when
    it drew other figures: the status file and the report then stay byte-identical for unchanged figures, and
    ``wall_s`` is what the last call that changed the experiment's results spent on it."""
    same = old is not None and before == after and old.get("status") == new.get("status")
    return dict(new, wall_s=old["wall_s"]) if same and "wall_s" in old else new


if __name__ == "__main__":
    loaded()  # a stop signal from here on is the command's own (experiments.stops.while_loading)
    sys.exit(main())
