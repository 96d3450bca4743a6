"""``python -m plots`` on a copy of every committed results folder: it exits 0 and writes every figure
the committed folder holds, byte for byte (same CSVs, same code, same matplotlib: same PNG).

lr_speedup (whose staleness figure once failed on float rounding) runs in the fast suite, the others are slow."""

import shutil
from pathlib import Path

import pytest

from plots.__main__ import main

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "results"
COMMITTED = (
    sorted(p.name for p in RESULTS.iterdir() if p.is_dir() and p.name != "paper" and (p / "summary.csv").exists())
    if RESULTS.is_dir()
    else []
)
FAST = {"lr_speedup"}


def _copy_csvs(src: Path, dest: Path) -> Path:
    """The experiment's CSVs (summary, speedup, runs/*/trace.csv and staleness.csv), without its figures."""
    dest.mkdir(parents=True)
    for name in ("summary.csv", "speedup.csv"):
        if (src / name).exists():
            shutil.copy2(src / name, dest / name)
    for f in sorted((src / "runs").glob("*/*.csv")):
        (dest / "runs" / f.parent.name).mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, dest / "runs" / f.parent.name / f.name)
    return dest


@pytest.mark.parametrize(
    "experiment", [pytest.param(e, marks=() if e in FAST else pytest.mark.slow) for e in COMMITTED]
)
def test_plots_redraws_every_committed_figure(experiment, tmp_path, capsys):
    src = RESULTS / experiment
    exp = _copy_csvs(src, tmp_path / experiment)
    assert main([str(exp), "--paper-dir", str(RESULTS / "paper")]) == 0, capsys.readouterr().err
    written = sorted(Path(p).name for p in capsys.readouterr().out.split())
    assert written and written == sorted(p.name for p in (exp / "figures").iterdir())
    committed = sorted(p.name for p in (src / "figures").glob("*.png"))
    assert set(committed) <= set(written), f"not redrawn: {sorted(set(committed) - set(written))}"


def test_committed_results_present():
    assert "lr_speedup" in COMMITTED
