"""The Python API (experiments/api.py, docs/api.md): ``run`` executes one setting into a results folder and returns
its real outcome; ``load`` reads the folder's runs back as one DataFrame; bad input raises ConfigError and writes
nothing."""

import math
import os
import re
import sys

import pandas as pd
import pytest

from conftest import FIXED_CLOCK, REPO
from experiments.errors import ConfigError


def _fmnist_staged() -> bool:
    from problems.data import data_root

    return (data_root() / "FashionMNIST" / "raw").is_dir()


needs_data = pytest.mark.skipif(not _fmnist_staged(), reason="Fashion-MNIST not staged (make data)")


@needs_data
def test_run_returns_the_runs_real_outcome_and_load_reads_it_back(tmp_path):
    from experiments import load, run

    results = []
    for workers in (1, 4):
        overrides = [
            "problem=logreg_fmnist",
            "problem.max_train=2000",
            "algorithm=apam",
            f"workers={workers}",
            "epochs=1",
            "eval_every=0.25",
            "seed=3",
            *FIXED_CLOCK,
        ]
        results.append(run(overrides, results_dir=tmp_path))
    for result, workers in zip(results, (1, 4)):
        assert result.status == "ok", result.summary.get("message")
        assert result.run_dir.is_dir() and (result.run_dir / "config.yaml").is_file()
        assert result.run_dir.parent.parent == tmp_path / "adhoc"
        # summary: the summary.csv row as its text; trace: trace.csv as a DataFrame
        assert int(result.summary["workers"]) == workers and result.summary["status"] == "ok"
        assert math.isfinite(float(result.summary["final_train_loss"]))
        assert list(result.trace["epoch"]) == pytest.approx([0.0, 0.25, 0.5, 0.75, 1.0], abs=0.03)
        assert result.trace["train_loss"].map(math.isfinite).all()
        assert float(result.summary["final_train_loss"]) == pytest.approx(result.trace["train_loss"].iloc[-1])
    serial = results[0].trace["train_loss"]
    assert serial.iloc[-1] < 0.75 * serial.iloc[0]  # the serial run learned (from log 2 at x = 0)
    assert results[0].trace["staleness_mean"].iloc[1:].eq(0).all()
    assert results[1].trace["staleness_mean"].iloc[1:].gt(0).all()  # 4 workers: stale gradients

    df = load(tmp_path)
    assert isinstance(df, pd.DataFrame) and len(df) == 2
    assert sorted(df["run_id"]) == sorted(r.run_id for r in results)
    assert sorted(df["workers"]) == [1, 4] and (df["status"] == "ok").all()
    assert len(load(tmp_path / "adhoc")) == 2 and len(load(tmp_path, experiment="adhoc")) == 2

    serial_overrides = [
        "problem=logreg_fmnist",
        "problem.max_train=2000",
        "algorithm=apam",
        "workers=1",
        "epochs=1",
        "eval_every=0.25",
        "seed=3",
        *FIXED_CLOCK,
    ]
    again = run(serial_overrides, results_dir=tmp_path)
    assert again.status == "skipped" and again.run_id == results[0].run_id
    assert again.summary["final_train_loss"] == results[0].summary["final_train_loss"]
    assert len(load(tmp_path)) == 2

    # a finished run whose trace.csv is damaged counts as unfinished and runs again (the API gave the reader's
    # UnicodeDecodeError; the command line said [skip] over it)
    (results[0].run_dir / "trace.csv").write_bytes(bytes(range(256)))
    rerun = run(serial_overrides, results_dir=tmp_path)
    assert rerun.status == "ok" and rerun.run_id == results[0].run_id
    pd.testing.assert_frame_equal(rerun.trace, results[0].trace)  # the same seed: the same run
    assert len(load(tmp_path)) == 2
    header = (results[0].run_dir / "trace.csv").read_text().splitlines()[0]
    for damaged in (header + "\n", header + "\n" + ",".join("x" * len(header.split(","))) + "\n"):
        (results[0].run_dir / "trace.csv").write_text(damaged)  # no row; a row of no numbers: both were skipped
        assert run(serial_overrides, results_dir=tmp_path).status == "ok"


def test_bad_input_raises_config_error_and_writes_nothing(tmp_path):
    from experiments import run

    with pytest.raises(ConfigError, match="workers"):
        run(["workers=0", *FIXED_CLOCK], results_dir=tmp_path / "out")
    with pytest.raises(ConfigError, match=r"overrides='updates=20': a list of KEY=VALUE strings"):
        run("updates=20", results_dir=tmp_path / "out")  # a string, not a list
    with pytest.raises(ConfigError, match="overrides=\\[None\\]"):
        run([None], results_dir=tmp_path / "out")
    for bad in (None, 5, {"workers": 1}):  # not a list at all
        with pytest.raises(ConfigError, match="a list of KEY=VALUE strings"):
            run(bad, results_dir=tmp_path / "out")
    with pytest.raises(ConfigError, match="-m: experiments.run takes one setting"):
        run(["-m", "workers=1,2"], results_dir=tmp_path / "out")
    with pytest.raises(ConfigError, match="workers=1,2: a sweep needs -m"):
        run(["workers=1,2"], results_dir=tmp_path / "out")
    # an experiment is a sweep, and a launcher or sweeper runs sweeps: accepted, the run ignored them
    with pytest.raises(ConfigError, match="experiment=lr_speedup: an experiment is a sweep"):
        run(["experiment=lr_speedup", *FIXED_CLOCK], results_dir=tmp_path / "out")
    for key in ("hydra/launcher=parallel", "hydra.launcher.n_jobs=2", "hydra/sweeper=apam", "+hydra.sweeper.x=1"):
        with pytest.raises(ConfigError, match=f"{re.escape(key)}: run\\(\\) is one run in this process"):
            run([key, *FIXED_CLOCK], results_dir=tmp_path / "out")
    folder = tmp_path / "${oc.env:HOME}" / "out"  # an interpolation, even inside quotes
    with pytest.raises(ConfigError) as exc:
        run(FIXED_CLOCK, results_dir=folder)
    assert str(exc.value) == (
        f"results_dir={folder}: '${{' in a folder's name is an interpolation to Hydra, even quoted; name a folder "
        "without it"
    )
    assert not (tmp_path / "out").exists() and not folder.parent.exists()


def test_a_results_dir_is_taken_as_written(tmp_path):
    """The API passes ``results_dir`` quoted: a comma (a sweep to Hydra), an accent or ``#`` (characters its
    grammar cannot read unquoted), a quote or a backslash (quoting inside quotes: refused before) name the folder they
    spell."""
    from experiments import run

    names = ("out,x", "jos\u00e9 #2 [a]", "it's a=b\\c\\")
    for name in names:
        result = run(["updates=5", *FIXED_CLOCK], results_dir=tmp_path / name)
        assert result.status == "ok" and result.run_dir.is_relative_to(tmp_path / name), result.run_dir
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names)


def test_a_results_dir_that_is_not_a_path_is_refused(tmp_path, monkeypatch):
    """``results_dir=5`` made a folder ``5`` in the current folder; ``""`` and blanks name no folder."""
    from experiments import run

    monkeypatch.chdir(tmp_path)
    for bad in (5, 2.5, "", "  ", b"out", ["out"]):
        with pytest.raises(ConfigError, match=re.escape(f"results_dir={bad!r}: the path of a folder")):
            run(["updates=5", *FIXED_CLOCK], results_dir=bad)
    assert list(tmp_path.iterdir()) == []


def test_a_run_that_fails_before_its_first_evaluation_is_returned_failed(tmp_path, monkeypatch):
    """A run that failed before its first evaluation (here: its costs cannot be had) has a trace with no row: run()
    raised "trace.csv: has no evaluation row"; it returns the failed run, as the summary records it."""
    from experiments import run, runner

    def broken(*args, **kwargs):
        raise RuntimeError("no costs here")

    monkeypatch.setattr(runner, "resolve", broken)
    result = run(["updates=5", *FIXED_CLOCK], results_dir=tmp_path)
    assert result.status == "failed" and result.summary["status"] == "failed"
    assert result.summary["message"] == "RuntimeError: no costs here" and result.trace.empty


def test_bad_input_found_once_the_run_started_leaves_no_file(tmp_path, monkeypatch):
    """A ConfigError found after the run's config.yaml and provenance.json were written (an unusable calibration
    file, torchrun's variables): one error and nothing under results_dir; a run finished earlier keeps its files."""
    from experiments import run, runner

    def unusable(*args, **kwargs):
        raise ConfigError("/x/calibration.json: cannot read this calibration file (Not a directory)")

    monkeypatch.setattr(runner, "resolve", unusable)
    with pytest.raises(ConfigError, match="cannot read this calibration file"):
        run(["updates=5", *FIXED_CLOCK], results_dir=tmp_path / "out")
    assert not (tmp_path / "out" / "adhoc").exists()
    monkeypatch.undo()
    done = run(["updates=5", *FIXED_CLOCK], results_dir=tmp_path / "out")
    files = sorted(p.name for p in done.run_dir.iterdir())
    monkeypatch.setattr(runner, "resolve", unusable)
    with pytest.raises(ConfigError):
        run(["updates=5", "force=true", *FIXED_CLOCK], results_dir=tmp_path / "out")
    assert sorted(p.name for p in done.run_dir.iterdir()) == files


def test_a_script_read_from_standard_input_cannot_start_workers(tmp_path, monkeypatch):
    """``python - < script.py``: spawn and forkserver start each worker by running the main script again, and
    ``<stdin>`` is no file, so every worker died at its start ("worker 0 died while starting"). A real engine is
    refused before anything is written; a module run with -m, a notebook (no __file__) or a script file are not."""
    import types

    from experiments import run
    from experiments.engines.processes import main_script_problem

    script = tmp_path / "script.py"
    script.write_text("")
    for main, expected in [
        (types.SimpleNamespace(__spec__=None, __file__="<stdin>"), "<stdin>: worker processes begin by running"),
        (types.SimpleNamespace(__spec__=None, __file__=str(script)), None),
        (types.SimpleNamespace(__spec__=None), None),  # a notebook, python -c
        (types.SimpleNamespace(__spec__=types.SimpleNamespace(name="m"), __file__="<stdin>"), None),  # python -m
    ]:
        monkeypatch.setitem(sys.modules, "__main__", main)
        why = main_script_problem()
        assert (why is None) if expected is None else why.startswith(expected), why
    monkeypatch.setitem(sys.modules, "__main__", types.SimpleNamespace(__spec__=None, __file__="<stdin>"))
    with pytest.raises(ConfigError, match="<stdin>: worker processes begin by running this process's main script"):
        run(["engine=shared_memory", "workers=2", "updates=5"], results_dir=tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_run_called_while_a_worker_process_starts_says_where_the_guard_goes(tmp_path, monkeypatch):
    """A script without ``if __name__ == "__main__":`` runs again in each spawned worker; its run() waited there
    on the run the parent holds, and the run hung. multiprocessing marks that phase with ``_inheriting``."""
    import multiprocessing

    from experiments import run

    monkeypatch.setattr(multiprocessing.current_process(), "_inheriting", True, raising=False)
    with pytest.raises(
        RuntimeError, match=r'calls run\(\) when imported; put the call under `if __name__ == "__main__"'
    ):
        run(["updates=5", *FIXED_CLOCK], results_dir=tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_load_of_a_missing_folder_raises(tmp_path):
    from experiments import load

    with pytest.raises(FileNotFoundError):
        load(tmp_path / "nowhere")
    assert load(tmp_path).empty


def test_load_refuses_what_is_not_a_folder_path_or_an_experiment_there():
    """A non-path (it was pathlib's TypeError) and an experiment name that is not a folder with a summary (an empty
    frame came back for a typo, or for ``../x``) are ConfigErrors naming the value."""
    from experiments import load

    for bad in (None, 5, "", ["results"]):
        with pytest.raises(ConfigError, match=r"results_dir=.*: the path of a results or experiment folder"):
            load(bad)
    for bad in ("zzz", "../results", 3):
        with pytest.raises(ConfigError, match=r"experiment=.*: no such experiment folder with a summary in .*results"):
            load(REPO / "results", bad)
    rows = load(REPO / "results", "tau_threshold")
    assert len(rows) > 0 and set(rows["run_id"]) <= set(
        load(REPO / "results" / "tau_threshold", "tau_threshold")["run_id"]
    )


@pytest.mark.parametrize("kind", ["dangling link", "fifo", "folder"])
def test_load_names_a_summary_that_cannot_be_read(tmp_path, kind):
    """A summary.csv that is a link to nothing is named as a fifo or a folder there is (it read as no summary: an
    empty frame)."""
    from experiments import load

    summary = tmp_path / "exp" / "summary.csv"
    summary.parent.mkdir()
    {"dangling link": lambda: summary.symlink_to(tmp_path / "gone.csv"), "fifo": lambda: os.mkfifo(summary)}.get(
        kind, summary.mkdir
    )()
    for folder in (tmp_path, tmp_path / "exp"):
        with pytest.raises(ConfigError, match=r"exp/summary.csv: cannot read this summary"):
            load(folder)


@needs_data
def test_interpolated_overrides_name_the_run_as_the_command_line_does(tmp_path, monkeypatch, entry_point):
    """The command line's job reads its overrides resolved (``algorithm.lr=${algorithm.beta1}`` is
    ``algorithm.lr=0.9``); the API kept the text, so one input had two ids, and two values of one ``${oc.env:NW}``
    shared one id (the second run replaced the first)."""
    from experiments import run

    base = ["problem=logreg_fmnist", "problem.max_train=1000", "updates=10", *FIXED_CLOCK]
    lr = "algorithm.lr=${algorithm.beta1}"
    api = run([*base, lr], results_dir=tmp_path / "api")
    code, err = entry_point([*base, lr, f"results_dir={tmp_path}/cli"])
    assert code == 0, err
    assert [p.name for p in (tmp_path / "cli" / "adhoc" / "runs").iterdir()] == [api.run_id]
    assert api.run_id.startswith("algorithm.lr-0.9_")
    ids = []
    for nw in ("2", "3"):
        monkeypatch.setenv("NW", nw)
        result = run([*base, "workers='${oc.decode:${oc.env:NW}}'"], results_dir=tmp_path / "env")
        assert result.status == "ok" and int(result.summary["workers"]) == int(nw)
        ids.append(result.run_id)
    assert ids[0] != ids[1]


@needs_data
def test_a_kept_simulated_run_of_the_machine_s_cores_says_when_they_changed(tmp_path, monkeypatch, capsys):
    """engine.cores null: the clock shares the cores the machine offers. Offered another number later (``taskset``,
    another machine), the finished run is kept (committed results pair it with that machine's measured runs) and a
    warning says its times are of the old count; the same count says nothing."""
    import experiments.store.summary as summary
    from experiments import run

    clock = [c for c in FIXED_CLOCK if not c.startswith("engine=")]  # the machine's cores, not dedicated ones
    overrides = ["problem=logreg_fmnist", "problem.max_train=1000", "updates=10", "workers=4", *clock]
    first = run(overrides, results_dir=tmp_path)
    assert first.status == "ok"
    cores = int(first.summary["cores"])
    assert run(overrides, results_dir=tmp_path).status == "skipped"
    assert "warning" not in capsys.readouterr().err
    monkeypatch.setattr(summary, "machine_cores", lambda: cores + 5)
    assert run(overrides, results_dir=tmp_path).status == "skipped"
    err = capsys.readouterr().err
    assert (
        f"its simulated times are of the {cores} cores the machine offered when it ran (engine.cores=null); this "
        f"process is offered {cores + 5}: force=true reruns it with {cores + 5}"
    ) in err
