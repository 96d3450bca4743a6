"""The report, experiments.aggregate and python -m plots against hostile results folders: a run config holding YAML
aliases (an alias bomb) is a damaged config, never expanded; a REPORT.md or verdicts.csv that cannot be replaced is
refused before anything is written; Ctrl-C is one line and exit 130."""

import os
import shutil
import time
from pathlib import Path

import pytest

from conftest import REPO
from experiments import aggregate
from experiments.analysis.configs import run_config
from experiments.report import __main__ as report_main
from experiments.report.load import run_profile
from experiments.store.damage import has_aliases

SMALL = "artificial_delay"  # 7 runs


def _bomb() -> str:
    """Anchors nested 8 levels, each list holding 9 aliases of the one before: 9**9 leaves once expanded."""
    lines = ["a0: &a0 [1, 2, 3, 4, 5, 6, 7, 8, 9]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    return "\n".join(lines) + "\nprofile: quick\n"


@pytest.fixture
def own_runs(tmp_path):
    shutil.copytree(REPO / "results" / SMALL, tmp_path / SMALL, ignore=shutil.ignore_patterns("figures"))
    return tmp_path


def test_a_config_with_yaml_aliases_is_damaged_and_never_expanded(own_runs, capsys):
    """Every run's config.yaml an alias bomb: it says nothing (report and prune hung past 1.4 GB expanding it)."""
    from experiments import prune

    configs = sorted(own_runs.glob(f"{SMALL}/runs/*/config.yaml"))
    assert configs and run_profile(own_runs) == "quick"
    configs[0].write_text("profile: quick\nshared: &s {lr: 0.1}\nagain: *s\n")  # one alias: damaged all the same
    assert run_config(configs[0]) is None
    for f in configs:
        f.write_text(_bomb())
    start = time.perf_counter()
    assert run_profile(own_runs) is None
    assert prune.main([str(own_runs), "--profile", "long", "--only", SMALL]) == 0  # no profile said: not refused
    assert report_main.main([str(own_runs), "--no-figures"]) == 0
    assert time.perf_counter() - start < 30


def test_the_harness_writes_no_yaml_alias():
    """What the runner writes (OmegaConf.to_yaml) holds no alias even where the config shares a node, and no
    committed run config holds one: refusing aliases refuses no config of the harness."""
    from omegaconf import OmegaConf

    shared = [1, 2]
    assert not has_aliases(OmegaConf.to_yaml(OmegaConf.create({"a": shared, "b": shared, "c": {"d": shared}})))
    assert has_aliases(_bomb()) and not has_aliases("a: &x 1\n")  # an anchor alone expands nothing
    committed = sorted(REPO.glob("results*/*/runs/*/config.yaml"))
    assert committed and not [f for f in committed if has_aliases(f.read_text())]


@pytest.mark.parametrize("name", ["REPORT.md", "verdicts.csv"])
@pytest.mark.parametrize("damage", ["folder", "read-only"])
def test_an_output_that_cannot_be_replaced_is_refused_before_anything_is_written(
    own_runs, capsys, monkeypatch, name, damage
):
    """REPORT.md a folder or a file that may not be written (a read-only mode, an immutable flag: os.access says
    so, here made to): one line naming it, exit 2, and neither file written (verdicts.csv was written beside an old
    or missing REPORT.md, exit 1)."""
    path = own_runs / name
    if damage == "folder":
        path.mkdir()
        why = "a folder, not a regular file; move it away"
    else:
        path.write_text("old\n")
        real = os.access
        monkeypatch.setattr(os, "access", lambda p, mode, **kw: Path(p) != path and real(p, mode, **kw))
        why = "not writable (read-only or immutable); make it writable or move it away"
    before = {p: p.read_bytes() for p in own_runs.rglob("*") if p.is_file()}
    capsys.readouterr()
    assert report_main.main([str(own_runs), "--no-figures"]) == 2
    assert capsys.readouterr().err.splitlines() == [f"error: {path}: {why}"]
    assert {p: p.read_bytes() for p in own_runs.rglob("*") if p.is_file()} == before


def test_aggregate_refuses_a_speedup_table_it_may_not_write(own_runs, capsys, monkeypatch):
    target = own_runs / SMALL / "speedup.csv"
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: Path(p) != target and real(p, mode, **kw))
    before = target.read_bytes()
    assert aggregate.main([str(own_runs / SMALL)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"error: {target}: not writable (read-only or immutable); make it writable or move it away"
    ]
    assert target.read_bytes() == before


def _interrupt(*_args, **_kwargs):
    raise KeyboardInterrupt


def test_ctrl_c_is_one_line_and_exit_130_for_report_aggregate_and_plots(own_runs, capsys, monkeypatch):
    """Ctrl-C while the report, aggregate or plots works: one ``interrupted:`` line and exit 130 (a traceback
    before), the files as they were."""
    import plots.__main__ as plots_main

    before = {p: p.read_bytes() for p in own_runs.rglob("*") if p.is_file()}
    monkeypatch.setattr(report_main, "restore_summaries", _interrupt)
    monkeypatch.setattr(aggregate, "write_speedup", _interrupt)
    monkeypatch.setattr(plots_main, "draw_experiment", _interrupt)
    capsys.readouterr()
    assert report_main.main([str(own_runs)]) == 130
    assert aggregate.main([str(own_runs / SMALL)]) == 130
    assert plots_main.main([str(own_runs / SMALL)]) == 130
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [
        "interrupted: the files written so far are whole; run it again to finish the report and figures",
        "interrupted: each speedup.csv is written whole or left as it was; run it again for the rest",
        "interrupted: the figures drawn so far are whole; run it again to draw the rest",
    ]
    assert {p: p.read_bytes() for p in own_runs.rglob("*") if p.is_file()} == before


@pytest.mark.skipif(not Path("/proc/self/mem").exists(), reason="needs Linux's /proc/self/mem")
@pytest.mark.timeout(300)
def test_a_run_file_that_fails_to_read_is_named_not_an_unnamed_figure_error(own_runs, capsys):
    """A staleness.csv whose read fails (EIO): one warning naming it, every figure drawn, exit 0 (the report named
    a figure ``all`` not drawn for ``OSError: [Errno 5]``)."""
    path = sorted(own_runs.glob(f"{SMALL}/runs/*/staleness.csv"))[0]
    path.unlink()
    path.symlink_to("/proc/self/mem")
    assert report_main.main([str(own_runs)]) == 0
    err = capsys.readouterr().err
    assert err.count(f"warning: {path}: cannot be read (Input/output error)") == 1, err
    assert "OSError" not in (own_runs / "REPORT.md").read_text()
