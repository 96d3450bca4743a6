"""The figures step of ``make reproduce``: draw an experiment's figures and say which could not be drawn, and tell
whether an experiment whose runs did not change needs its figures drawn again."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def figures_outdated(status: dict, results_dir: Path) -> bool:
    """True when an experiment's figures must be drawn although none of its runs changed: its status names no
    figures, or one that could not be drawn, or a figure file that is not there."""
    figures = status.get("figures")
    return not figures or bool(status.get("figures_missing")) or any(not (results_dir / f).is_file() for f in figures)


def draw_all(experiments: list[str], results_dir: Path, jobs: int = 1) -> list[dict]:
    """:func:`draw_figures` of each experiment under ``results_dir``, in order; up to ``jobs`` experiments at a
    time in spawned processes (after every run: nothing measured runs beside them)."""
    dirs = [results_dir / e for e in experiments]
    if jobs <= 1 or len(dirs) <= 1:
        return [draw_figures(d, results_dir) for d in dirs]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=min(jobs, len(dirs)), mp_context=multiprocessing.get_context("spawn")) as pool:
        return list(pool.map(draw_figures, dirs, [results_dir] * len(dirs)))


def draw_figures(exp_dir: Path, results_dir: Path) -> dict:
    """Draw every figure of ``exp_dir``; return ``{"figures": [paths relative to results_dir]}`` plus
    ``"figures_missing": [{"figure", "reason"}]`` for each figure that could not be drawn (all the others are)."""
    import plots

    try:
        drawn, missing = plots.draw_experiment(exp_dir, paper_dir=REPO / "results" / "paper"), []
    except plots.FigureError as exc:
        drawn, missing = exc.written, [{"figure": f, "reason": r} for f, r in exc.failures]
    except Exception as exc:  # noqa: BLE001 -- the experiment's data cannot be read: no figure at all, named
        text = str(exc).strip()
        drawn, missing = (
            [],
            [{"figure": "all", "reason": f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"}],
        )
    if not drawn and not missing and (why := plots.no_figure_reason(exp_dir)):
        missing.append({"figure": "all", "reason": why})
    if lost := runs_without_trace(exp_dir):
        missing.append(
            {
                "figure": "curves",
                "reason": f"{len(lost)} run(s) of summary.csv have no trace.csv (first: {lost[0]}): their curves are "
                "not drawn",
            }
        )
    out = {"figures": [str(p.relative_to(results_dir)) for p in drawn]}
    if missing:
        out["figures_missing"] = missing
    return out


def runs_without_trace(exp_dir: Path) -> list[str]:
    """Run ids of ``exp_dir``'s summary.csv, not failed, whose run folder is there without its ``trace.csv`` (deleted,
    not copied): the figures drawn from traces leave them out without a word, so the figures step names them. A
    folder of summaries alone (no run folders: tables, no curves) is not named; [] when the summary cannot be read
    (the drawing says so)."""
    from experiments.errors import ConfigError
    from experiments.store.table import read_summary_frame

    try:
        summary = read_summary_frame(exp_dir / "summary.csv")
    except ConfigError:
        return []
    if summary.empty:
        return []
    finished = summary["run_id"][summary["status"] != "failed"]  # a failed run may have stopped before its trace
    folders = [exp_dir / "runs" / str(r) for r in finished]
    return [f.name for f in folders if f.is_dir() and not (f / "trace.csv").is_file()]
