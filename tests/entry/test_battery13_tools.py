"""The tools' folder names and streams: a results folder named with ``=``, ``'``, brackets or accents reaches Hydra
quoted (experiments/results_folder.py), a folder Hydra cannot take or an experiment folder that is a file is one
line before anything runs, ``make reproduce`` is no 0 when every sweep refused its input, ``experiments.run --help``
into a closed pipe, ``python -m plots ''``, and a relative ``$XDG_CACHE_HOME``."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser

from conftest import REPO
from experiments import prune, reproduce
from experiments.errors import ConfigError
from experiments.results_folder import path_override

NAMES = ["new=dir", "it's", "d$x{y}", "br[a]ck", "\u00fcn\u00ef c\u00f6d\u00e9 \u2603", "x=y", "a,b", "b\\s\\", "q\\'"]
"""Folder names the tools refused ("not an override Hydra can read") or read as something else (a sweep)."""


@pytest.mark.parametrize("name", NAMES)
def test_a_folder_is_an_override_hydra_reads_back_as_written(tmp_path, name):
    from experiments.settings.compose import compose_jobs

    override = path_override("results_dir", tmp_path / name)
    assert OverridesParser.create().parse_override(override).value() == str(tmp_path / name)
    (cfg,) = compose_jobs([["experiment=lr_speedup", "profile=smoke", override]])
    assert cfg.results_dir == str(tmp_path / name)


def test_a_folder_hydra_cannot_take_is_one_line():
    with pytest.raises(ConfigError) as exc:
        path_override("results_dir", "/r/d${x}")
    assert str(exc.value) == (
        "results_dir=/r/d${x}: '${' in a folder's name is an interpolation to Hydra, even quoted; name a folder "
        "without it"
    )


def test_reproduce_plans_a_folder_named_with_an_equals_sign_and_a_quote(tmp_path):
    """The up-to-date check could not compose the sweep (None: "cannot tell"), and the sweep's child refused it."""
    plain = reproduce.unfinished_runs("lr_speedup", "smoke", tmp_path / "plain")
    assert plain is not None
    assert reproduce.unfinished_runs("lr_speedup", "smoke", tmp_path / "new=dir it's") == plain
    (sweep, _), *_ = reproduce.plan_sweeps("lr_speedup", "smoke", tmp_path / "new=dir it's")
    assert f"results_dir='{tmp_path}/new=dir it\\'s'" in sweep


@pytest.fixture
def nothing_may_run(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError(f"started: {a[:1]}")

    monkeypatch.setattr(reproduce, "run_experiment", refuse)
    monkeypatch.setattr(reproduce, "draw_all", refuse)


def test_reproduce_refuses_a_folder_hydra_cannot_take_before_anything_runs(tmp_path, nothing_may_run, capsys):
    out = tmp_path / "d${x}"
    out.mkdir()
    assert reproduce.main(["--profile", "smoke", "--results-dir", str(out), "--only", "lr_speedup", "--jobs", "1"]) == 2
    assert capsys.readouterr().err == (
        f"error: results_dir={out}: '${{' in a folder's name is an interpolation to Hydra, even quoted; name a folder "
        "without it\n"
    )
    assert list(out.iterdir()) == []


@pytest.mark.parametrize("kind", ["file", "link to nothing"])
def test_reproduce_refuses_an_experiment_folder_that_is_not_one(tmp_path, nothing_may_run, capsys, kind):
    """It was "1 with runs to do", then a FileExistsError traceback from the sweep's mkdir."""
    out = tmp_path / "res"
    out.mkdir()
    exp = out / "lr_speedup"
    if kind == "file":
        exp.write_text("x\n")
    else:
        exp.symlink_to(tmp_path / "nowhere")
    assert reproduce.main(["--profile", "smoke", "--results-dir", str(out), "--only", "lr_speedup", "--jobs", "1"]) == 2
    what = "a file" if kind == "file" else "a link to nothing"
    assert capsys.readouterr().err == (
        f"error: {exp}: {what}, not a folder (the folder of experiment lr_speedup's results); remove it\n"
    )
    assert sorted(p.name for p in out.iterdir()) == ["lr_speedup"]


def test_reproduce_is_no_0_when_every_sweep_refused_its_input(tmp_path, monkeypatch, capsys):
    """Every sweep's child exited 2 (bad input): the report said so, and the call exited 0 having run nothing."""
    why = "OMP_NUM_THREADS=abc: must be a whole number >= 1 (the threads of the math libraries)"
    outcome = {"lr_speedup": "skipped", "tau_threshold": "ran"}
    monkeypatch.setattr(reproduce, "unfinished_runs", lambda *a, **k: None)  # cannot tell: every sweep starts
    monkeypatch.setattr(
        reproduce,
        "run_experiment",
        lambda exp, *a, **k: {"status": outcome[exp], "message": why if outcome[exp] == "skipped" else "", "wall_s": 0},
    )
    out = tmp_path / "res"
    args = ["--profile", "smoke", "--results-dir", str(out), "--jobs", "1", "--only", "lr_speedup"]
    assert reproduce.main(args) == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"error: nothing ran: the sweeps of lr_speedup refused their input (why: above, and in {out / 'REPORT.md'})"
    )
    assert reproduce.main([*args, "tau_threshold"]) == 0  # one ran: the other is skipped with its reason, as before


def test_prune_reads_a_folder_named_with_a_quote(tmp_path, capsys):
    out = tmp_path / "it's [x]=y"
    shutil.copytree(REPO / "results" / "tau_threshold", out / "tau_threshold")
    assert prune.main([str(out), "--profile", "quick", "--only", "tau_threshold"]) == 0
    assert "not an override" not in capsys.readouterr().err
    bad = tmp_path / "d${x}"
    shutil.copytree(REPO / "results" / "tau_threshold", bad / "tau_threshold")
    assert prune.main([str(bad), "--profile", "quick", "--only", "tau_threshold"]) == 2
    assert capsys.readouterr().err == (
        f"error: results_dir={bad}: '${{' in a folder's name is an interpolation to Hydra, even quoted; name a folder "
        "without it\n"
    )


@pytest.mark.parametrize("flag", ["--help", "--hydra-help"])
def test_run_shows_into_a_closed_pipe_without_a_traceback(flag):
    """``experiments.run --help | head -c1``: a BrokenPipeError traceback from Hydra's print, exit 1."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "experiments.run", flag],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    proc.stdout.close()  # the reader is gone before the first line
    err = proc.stderr.read()
    assert (proc.wait(120), err) == (141, "")


def test_plots_refuses_an_empty_folder_name(tmp_path, monkeypatch, capsys):
    """``make plots RESULTS=`` passes '': it drew the experiment of whatever folder it was started in."""
    from plots.__main__ import main

    shutil.copytree(REPO / "tests" / "fixtures" / "plots" / "tau_threshold", tmp_path, dirs_exist_ok=True)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exc:
        main([""])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err == "error: python -m plots: argument path: '': must name a folder (--help lists the options)\n"
    assert not (tmp_path / "figures").exists()


def test_a_relative_cache_home_is_ignored(tmp_path, monkeypatch):
    """XDG Base Directory: a relative ``$XDG_CACHE_HOME`` is invalid and ignored; the calibration and the compiled
    kernel went below the current folder."""
    from algorithms import native
    from experiments.clock.calibration import machine_path

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("APAM_CALIBRATION", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", "relcache")
    assert machine_path().parent == tmp_path / "home" / ".cache" / "apam-harness"
    assert native._cache_dir() == tmp_path / "home" / ".cache" / "apam-harness" / "native"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "abs"))  # an absolute one is taken
    assert machine_path().parent == tmp_path / "abs" / "apam-harness"
    assert native._cache_dir() == tmp_path / "abs" / "apam-harness" / "native"
