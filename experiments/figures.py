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
    nothing, curves = plots.trace_gaps(exp_dir)
    if not drawn and not missing and nothing:
        missing.append({"figure": "all", "reason": nothing})
    if curves:
        missing.append({"figure": "curves", "reason": curves})
    out = {"figures": [str(p.relative_to(results_dir)) for p in drawn]}
    if missing:
        out["figures_missing"] = missing
    return out
