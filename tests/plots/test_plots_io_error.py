"""A run file whose read fails with an I/O error (EIO: a link to ``/proc/self/mem``, a regular file whose read at
offset 0 fails) is a damaged run file: its run is left out of the figures with one line naming it, never a
traceback of ``python -m plots`` nor an unnamed ``all: OSError`` figure of the report."""

import shutil
from pathlib import Path

import pytest

from conftest import REPO
from plots.__main__ import main

SMALL = "artificial_delay"  # 7 runs, 2 figures (one of them the staleness figure)
EIO = Path("/proc/self/mem")

pytestmark = pytest.mark.skipif(not EIO.exists(), reason="needs Linux's /proc/self/mem")


@pytest.fixture
def exp(tmp_path):
    shutil.copytree(REPO / "results" / SMALL, tmp_path / SMALL, ignore=shutil.ignore_patterns("figures"))
    return tmp_path / SMALL


def _eio(path: Path) -> Path:
    path.unlink()
    path.symlink_to(EIO)
    with pytest.raises(OSError):
        path.read_bytes()
    return path


@pytest.mark.timeout(300)
def test_a_staleness_histogram_that_fails_to_read_leaves_its_run_out_named(exp, capsys):
    path = _eio(sorted(exp.glob("runs/*/staleness.csv"))[0])
    assert main([str(exp)]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err == [f"warning: {path}: cannot be read (Input/output error); its run is left out of the staleness figure"]
    assert sorted(p.name for p in (exp / "figures").glob("*.png")) == sorted(
        p.name for p in (REPO / "results" / SMALL / "figures").glob("*.png")
    )


@pytest.mark.timeout(300)
def test_a_trace_that_fails_to_read_leaves_its_curve_out_named(exp, capsys):
    """As a trace that is not CSV: its run's curve is not drawn, and the line names that run (exit 2: bad input)."""
    path = _eio(sorted(exp.glob("runs/*/trace.csv"))[0])
    assert main([str(exp)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "OSError" not in err
    assert err.splitlines()[-1] == (
        f"error: {exp}: 1 run(s) of summary.csv have no trace.csv that is a readable file (first: "
        f"{path.parent.name}): their curves are not drawn"
    )
