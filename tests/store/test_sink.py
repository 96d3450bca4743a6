"""The results sink: deterministic run ids, atomic files, a summary.csv that survives concurrent writers."""

import csv
import subprocess
import sys
from collections import Counter

import pytest

from conftest import REPO
from experiments.store import table
from experiments.store.run_id import make_run_id
from experiments.store.sink import SUMMARY_COLUMNS, TRACE_COLUMNS, RunSink


def test_run_id_is_deterministic_sorted_and_ignores_output_keys():
    a = make_run_id(["workers=4", "algorithm=apam", "results_dir=/tmp/x", "progress=true"], seed=3)
    b = make_run_id(["algorithm=apam", "workers=4"], seed=3)
    # Hydra's own keys name no setting (a sweep's jobs never see them; the Python API passes them on)
    assert make_run_id(["hydra/launcher=parallel", "hydra.launcher.n_jobs=2", "algorithm=apam", "workers=4"], 3) == b
    assert a == b == "algorithm-apam_workers-4_seed-3"
    assert make_run_id([], seed=0) == "seed-0"
    assert make_run_id(["seed=5"], seed=5) == "seed-5"
    long = make_run_id([f"k{i}=v{i}" for i in range(40)], seed=0)
    assert len(long) <= 113 and long != make_run_id([f"k{i}=v{i}" for i in range(41)], seed=0)


def test_trace_and_staleness_files(tmp_path):
    sink = RunSink(tmp_path, "exp", "r1")
    sink.write_trace([{"run_id": "r1", "epoch": 0.5, "train_loss": float("nan")}], Counter({0: 3, 2: 1}))
    with open(sink.run_dir / "trace.csv") as f:
        rows = list(csv.reader(f))
    assert rows[0][: len(TRACE_COLUMNS)] == TRACE_COLUMNS
    assert rows[1][TRACE_COLUMNS.index("train_loss")] == ""  # NaN written as empty
    assert (sink.run_dir / "staleness.csv").read_text() == "staleness,count\n0,3\n2,1\n"


def test_rerun_replaces_its_row_and_finished_needs_trace(tmp_path):
    sink = RunSink(tmp_path, "exp", "r1")
    sink.append_summary({"run_id": "r1", "status": "failed", "message": "boom"})
    assert not sink.finished()
    sink.append_summary({"run_id": "r1", "status": "ok"})
    RunSink(tmp_path, "exp", "r2").append_summary({"run_id": "r2", "status": "ok"})
    with open(sink.summary_path) as f:
        rows = list(csv.DictReader(f))
    assert [r["run_id"] for r in rows] == ["r1", "r2"] and rows[0]["status"] == "ok"
    assert not sink.finished()  # no trace yet
    sink.write_trace([{"run_id": "r1"}], Counter())
    assert not sink.finished()  # a trace whose row holds no epoch: damaged, the run reruns
    sink.write_trace([{"run_id": "r1", "epoch": 0.0}], Counter())
    assert not sink.finished()  # no provenance.json: a run writes it with its config, at its start
    sink.write_config("seed: 0\n", {"host": "h"})
    assert sink.finished()


WRITER = """
import sys
from experiments.store.sink import RunSink
rid = sys.argv[2]
RunSink(sys.argv[1], "exp", rid).append_summary({"run_id": rid, "status": "ok", "message": "x" * 2000 + rid})
"""


def test_eight_runs_appending_at_once_leave_one_header_and_eight_whole_rows(tmp_path):
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), f"run{i}"], cwd=REPO) for i in range(8)]
    assert all(p.wait(timeout=60) == 0 for p in procs)
    text = (tmp_path / "exp" / "summary.csv").read_text()
    assert text.count("experiment,run_id") == 1
    with open(tmp_path / "exp" / "summary.csv") as f:
        rows = list(csv.DictReader(f))
    assert sorted(r["run_id"] for r in rows) == [f"run{i}" for i in range(8)]
    assert all(r["message"] == "x" * 2000 + r["run_id"] for r in rows)
    assert list(rows[0].keys())[: len(SUMMARY_COLUMNS)] == SUMMARY_COLUMNS
    assert not list((tmp_path / "exp").glob(".*.tmp"))


def test_git_commit_is_dirty_for_code_changes_but_not_for_rewritten_results(tmp_path):
    import subprocess

    from experiments.store.provenance import git_commit

    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    for folder in ("results", "results-long"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "REPORT.md").write_text("old\n")
    (tmp_path / "results_notes.py").write_text("y = 1\n")  # code whose name starts like a results folder
    (tmp_path / "code.py").write_text("x = 1\n")
    git("add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "init")
    sha = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert git_commit(tmp_path) == sha
    (tmp_path / "results" / "REPORT.md").write_text("new\n")  # make reproduce rewrote the reference results
    (tmp_path / "results-long" / "REPORT.md").write_text("new\n")  # ... and the long profile's
    assert git_commit(tmp_path) == sha
    (tmp_path / "results_notes.py").write_text("y = 2\n")
    assert git_commit(tmp_path) == sha + "-dirty"
    (tmp_path / "results_notes.py").write_text("y = 1\n")
    (tmp_path / "code.py").write_text("x = 2\n")
    assert git_commit(tmp_path) == sha + "-dirty"
    assert git_commit(tmp_path / "results" / "nonexistent") == "unknown"


def test_git_commit_leaves_the_checkouts_index_as_it_was(tmp_path):
    """git status refreshes the index of a checkout whose files were touched (a write outside results_dir, the
    first run after a clone did it): the harness asks git not to (--no-optional-locks)."""
    import os
    import subprocess

    from experiments.store.provenance import git_commit

    def git(*args):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=tmp_path, check=True)

    (tmp_path / "code.py").write_text("x = 1\n")
    git("init", "-q")
    git("add", "-A")
    git("commit", "-q", "-m", "init")
    os.utime(tmp_path / "code.py", (2_000_000_000, 2_000_000_000))  # same bytes, a new time: the index is stale
    before = (tmp_path / ".git" / "index").read_bytes()
    assert not git_commit(tmp_path).endswith("-dirty")
    assert (tmp_path / ".git" / "index").read_bytes() == before


def test_config_changes_name_changed_values_and_ignore_tables_and_new_keys(tmp_path):
    import yaml

    from experiments.store.sink import RunSink

    sink = RunSink(tmp_path, "e", "r")
    assert sink.config_changes({"updates": 1}) == []  # no config.yaml: nothing to compare
    sink.run_dir.mkdir(parents=True)
    old = {
        "updates": 400,
        "engine": {"compute_base_s": 0.05, "handoff": "block"},
        "results_dir": "a",
        "profiles": {"quick": {"seed": 0}},
        "points": {"p1": {"workers": 1}},
    }
    (sink.run_dir / "config.yaml").write_text(yaml.safe_dump(old))
    new = {
        "updates": 416,
        "engine": {"compute_base_s": 0.05, "handoff": "block", "warmup_updates": 5},
        "results_dir": "b",
        "profiles": {"quick": {"seed": "0,1,2"}},
        "points": {"p1": {"workers": 2}},
    }
    assert sink.config_changes(new) == ["updates: 400 -> 416"]
    assert sink.config_changes(dict(new, updates=400)) == []


# ---------------------------------------------------------------- damaged summaries and configs, atomic writes
def _finished(tmp_path, rid, **row):
    """A run as the runner leaves it: config, provenance, trace, then its summary row."""
    sink = RunSink(tmp_path, "exp", rid)
    sink.write_config("problem: {name: p}\nseed: 0\n", {"host": "h"})
    sink.write_trace([{"run_id": rid, "epoch": 1.0}], Counter({0: 2}))
    sink.append_summary({"experiment": "exp", "run_id": rid, "status": "ok", "message": "", "time_s": 0.5, **row})
    return sink


def _ids(path):
    with open(path, newline="") as f:
        return [r["run_id"] for r in csv.DictReader(f)]


def _two_runs(tmp_path, **row):
    a = _finished(tmp_path, "r1", final_train_loss=0.25, **row)
    b = _finished(tmp_path, "r2", final_train_loss=0.125, **row)
    return a, b, a.summary_path.read_text()


def _damaged(sink):
    return sorted(p.name for p in sink.exp_dir.glob("summary.csv.damaged-*"))


@pytest.mark.parametrize("cut", [-1, -3, -30, -len("exp,r2,") - 40])
def test_a_truncated_last_row_is_set_aside_and_rebuilt_from_the_run_folders(tmp_path, capsys, cut):
    a, b, good = _two_runs(tmp_path)
    a.summary_path.write_text(good[:cut])  # cut inside r2's row (last case: inside its run id)
    assert a.finished() and b.finished()
    assert a.summary_path.read_text() == good  # the rebuilt file is the one the runs wrote
    assert _damaged(a) == ["summary.csv.damaged-1"]
    assert (a.exp_dir / "summary.csv.damaged-1").read_text() == good[:cut]
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(a.summary_path) in err[0] and "damaged-1" in err[0]


def test_a_header_without_run_id_is_rebuilt_not_duplicated(tmp_path):
    a, b, good = _two_runs(tmp_path)
    a.summary_path.write_text(good.replace("run_id", "runid", 1))
    b.append_summary({"experiment": "exp", "run_id": "r2", "status": "ok", "final_train_loss": 0.0625})
    with open(a.summary_path, newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["run_id"] for r in rows] == ["r1", "r2"]
    assert rows[1]["final_train_loss"] == "0.0625" and rows[0]["final_train_loss"] == "0.25"


def test_a_duplicated_row_does_not_survive_a_rerun(tmp_path):
    a, b, good = _two_runs(tmp_path)
    lines = good.splitlines(keepends=True)
    a.summary_path.write_text("".join(lines + [lines[1]]))  # r1 twice
    b.append_summary({"experiment": "exp", "run_id": "r2", "status": "ok", "final_train_loss": 0.5})  # r2 reruns
    assert _ids(a.summary_path) == ["r1", "r2"]
    assert a.summary_row()["final_train_loss"] == "0.25" and b.summary_row()["final_train_loss"] == "0.5"
    a.append_summary({"experiment": "exp", "run_id": "r1", "status": "ok", "final_train_loss": 0.75})
    assert _ids(a.summary_path) == ["r2", "r1"]  # a rerun's row replaces its old one, at the end


@pytest.mark.parametrize("garbage", [b"\x00\x01\xff\xfe garbage\n\x00", b"", b"\n\n", b'run_id\n"unclosed,\n'])
def test_garbage_summary_is_rebuilt(tmp_path, garbage):
    a, _, good = _two_runs(tmp_path)
    a.summary_path.write_bytes(garbage)
    assert a.summary_row()["final_train_loss"] == "0.25"
    assert a.summary_path.read_text() == good and _damaged(a) == ["summary.csv.damaged-1"]


def test_a_row_whose_run_folder_is_missing_is_dropped_and_a_second_damage_gets_the_next_name(tmp_path):
    import shutil

    a, b, _ = _two_runs(tmp_path)
    shutil.rmtree(b.run_dir)
    assert not b.finished() and a.finished()
    assert _ids(a.summary_path) == ["r1"]
    a.summary_path.write_text("junk\n")
    assert a.finished() and _damaged(a) == ["summary.csv.damaged-1", "summary.csv.damaged-2"]


def test_runs_without_summary_row_json_keep_their_whole_rows(tmp_path):
    """Runs written before summary_row.json: a whole row of the damaged file stands for its run; a cut one does
    not, and that run counts as unfinished (it runs again)."""
    a, b, good = _two_runs(tmp_path)
    for s in (a, b):
        (s.run_dir / "summary_row.json").unlink()
    a.summary_path.write_text(good[:-5])
    assert a.finished() and not b.finished()
    assert a.summary_path.read_text() == good.splitlines(keepends=True)[0] + good.splitlines(keepends=True)[1]


@pytest.mark.parametrize(
    ("column", "bad", "why"),
    [
        ("workers", "-5", "column workers: '-5' is not a whole number from 0 to 4096"),
        ("workers", "2.5", "column workers: '2.5' is not a whole number from 0 to 4096"),
        ("seed", "\u00b2", "column seed: '\u00b2' is not a whole number from 0 to"),
        ("time_s", "-0.5", "column time_s: '-0.5' is not a count or seconds (a finite number >= 0)"),
        ("time_s", "inf", "column time_s: 'inf' is not a count or seconds (a finite number >= 0)"),
        ("agents", "0", "column agents: '0' is not a whole number from 1 to 4097"),
        ("batch_size", "-64", "column batch_size: '-64' is not a whole number from 1 to"),
        ("final_train_acc", "1.5", "column final_train_acc: '1.5' is not an accuracy from 0 to 1"),
        ("status", "okay", "column status: 'okay' is not one of ok, diverged, failed"),
    ],
)
def test_a_value_the_runner_cannot_have_written_is_repaired_from_the_run_folder(tmp_path, capsys, column, bad, why):
    """A hand-edited cell (``workers=-5``) is damage: the runner sets the summary aside and rebuilds the row from
    the run's summary_row.json; without that file the row is dropped (the run runs again), never kept as written."""
    a, b, good = _two_runs(tmp_path, workers=2, agents=2, seed=0, batch_size=64, final_train_acc=0.5)
    header, first, second = good.splitlines(keepends=True)
    at = header.rstrip("\n").split(",").index(column)
    cells = second.rstrip("\n").split(",")
    cells[at] = bad
    a.summary_path.write_text(header + first + ",".join(cells) + "\n")
    assert table.parse_summary(a.summary_path)[2].startswith(f"row 3, {why}")
    assert a.finished() and b.finished()
    assert a.summary_path.read_text() == good and _damaged(a) == ["summary.csv.damaged-1"]
    assert why in capsys.readouterr().err
    (b.run_dir / "summary_row.json").unlink()
    a.summary_path.write_text(header + first + ",".join(cells) + "\n")
    assert a.finished() and not b.finished()
    assert _ids(a.summary_path) == ["r1"]


def test_no_summary_is_clean_and_empty_and_a_reader_sees_the_bytes_it_checked(tmp_path, monkeypatch):
    """No summary.csv (a first run) is clean and empty, not "empty (no header)" (that set a missing file aside as
    damaged); read_summary_frame opens the file once, so the frame is the text that passed the checks."""
    import builtins

    missing = tmp_path / "summary.csv"
    assert table.parse_summary(missing) == ([], [], None) and table.read_summary_frame(missing).empty
    a = _finished(tmp_path, "r1", problem="p", algorithm="apam", workers=2, seed=0)
    opened, real_open = [], builtins.open
    monkeypatch.setattr(builtins, "open", lambda f, *args, **kw: opened.append(str(f)) or real_open(f, *args, **kw))
    frame = table.read_summary_frame(a.summary_path)
    monkeypatch.undo()
    assert opened.count(str(a.summary_path)) == 1 and list(frame["run_id"]) == ["r1"] and int(frame["workers"][0]) == 2


def test_a_failed_run_whose_clock_overflowed_keeps_its_infinite_time(tmp_path, capsys):
    """The runner fails a run whose clock overflowed and writes the time it reached, inf: not damage (every later run
    set the summary aside and rebuilt it with that row again, and every reader refused it)."""
    a = _finished(tmp_path, "r1", workers=2, agents=2, seed=0, batch_size=64)
    a.append_summary({"experiment": "exp", "run_id": "r1", "status": "failed", "time_s": float("inf")})
    assert table.parse_summary(a.summary_path)[2] is None and a.summary_row()["time_s"] == "inf"
    assert _damaged(a) == [] and "[repair]" not in capsys.readouterr().err


def test_an_unreadable_summary_is_a_config_error_naming_it(tmp_path, monkeypatch):
    import os

    from experiments.errors import ConfigError
    from experiments.store import table

    a, _, _ = _two_runs(tmp_path)
    monkeypatch.setattr(table.os, "access", lambda p, mode: False)  # as for chmod 000 (root reads anyway)
    with pytest.raises(ConfigError, match=r"summary.csv: cannot read this summary \(permission denied\)"):
        a.finished()
    monkeypatch.undo()
    a.summary_path.unlink()
    os.mkfifo(a.summary_path)  # a named pipe must not block the reader
    with pytest.raises(
        ConfigError, match=r"summary.csv: cannot read this summary \(a named pipe, not a regular file\)"
    ):
        a.append_summary({"run_id": "r1", "status": "ok"})
    a.summary_path.unlink()
    a.summary_path.mkdir()
    with pytest.raises(ConfigError, match=r"a folder, not a regular file"):
        a.summary_row()


@pytest.mark.skipif(__import__("os").geteuid() == 0, reason="root reads a file whatever its mode")
def test_a_summary_without_read_permission_is_a_config_error(tmp_path):
    from experiments.errors import ConfigError

    a, _, _ = _two_runs(tmp_path)
    a.summary_path.chmod(0)
    with pytest.raises(ConfigError, match="permission denied"):
        a.finished()


@pytest.mark.parametrize(
    "text", ["problem: {name: p\n", "\x00\x01 garbage \xff", "problem: {name: p}\nseed: 0\n"[:-4], "- a list\n", ""]
)
def test_a_damaged_config_makes_a_finished_run_unfinished(tmp_path, capsys, text):
    a, b, _ = _two_runs(tmp_path)
    (a.run_dir / "config.yaml").write_text(text)
    assert not a.finished() and b.finished()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("[rerun] exp/r1: ") and "config.yaml" in err[0]
    assert a.config_changes({"seed": 0})[0].startswith("config.yaml: ")


@pytest.mark.parametrize(
    "name,damage,why",
    [
        ("staleness.csv", b"\x8f\x00garbage", "cannot be read (UnicodeDecodeError)"),
        ("staleness.csv", b"staleness,count\n0,", "is not a staleness histogram"),
        ("staleness.csv", b"staleness,count\n0,abc\n", "has a row that is not two whole numbers"),
        ("staleness.csv", None, "is missing"),
        ("staleness.csv", "fifo", "cannot be read (a named pipe, not a regular file)"),  # must not block
        ("provenance.json", b'{"host": "h"', "is not valid JSON"),
        ("provenance.json", None, "is missing"),
    ],
)
def test_a_damaged_staleness_or_provenance_makes_a_finished_run_unfinished(tmp_path, capsys, name, damage, why):
    """The figures and the report read every run's staleness.csv and provenance.json: a finished run with one
    damaged or missing runs again (it was skipped, and the figures stopped at the damaged file)."""
    import os

    a, b, _ = _two_runs(tmp_path)
    path = a.run_dir / name
    path.unlink()
    if damage == "fifo":
        os.mkfifo(path)
    elif damage is not None:
        path.write_bytes(damage)
    assert not a.finished() and b.finished()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"[rerun] exp/r1: {path} {why}"), err
    assert err[0].endswith("; the run counts as unfinished")


def test_a_config_holding_yaml_aliases_is_damaged_and_never_walked(tmp_path):
    """Aliases of aliases nested 8 deep (9 each) are 4e7 strings once walked (config_changes flattens the config):
    the runner names such a config as damaged, the run counts as unfinished, and nothing expands it."""
    a, _, _ = _two_runs(tmp_path)
    lines = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 8)]
    (a.run_dir / "config.yaml").write_text("\n".join(lines) + "\nseed: 0\n")
    assert a.config_damage() == "holds YAML aliases, which the harness never writes"
    assert a.config_changes({"seed": 0}) == ["config.yaml: holds YAML aliases, which the harness never writes"]
    assert not a.finished()


def test_a_config_cut_at_a_line_end_is_caught_by_its_recorded_length_and_an_edit_is_a_change(tmp_path):
    a, _, _ = _two_runs(tmp_path)
    path = a.run_dir / "config.yaml"
    path.write_text("problem: {name: p}\n")  # still YAML, still ends with a newline
    assert a.config_damage() == "is shorter than written (19 of 27 bytes: truncated)"
    assert not a.finished()
    path.write_text("problem: {name: q}\nseed: 0\nnote: added by hand\n")  # edited since, not shorter
    assert a.config_damage() is None and a.finished()
    assert a.config_changes({"problem": {"name": "p"}, "seed": 0}) == ["problem.name: 'q' -> 'p'"]


def test_run_id_changes_only_where_sanitising_loses_information():
    assert make_run_id(["problem.path=/d/a/b.svm"], 0) != make_run_id(["problem.path=/d/a-b.svm"], 0)
    assert make_run_id(["problem.path=/d/a_b.svm"], 0) != make_run_id(["problem.path=/d/a-b.svm"], 0)
    assert make_run_id(["problem.classes=[0,6]"], 0) != make_run_id(["problem.classes=[0.6]"], 0)
    lossy = make_run_id(["problem.path=/d/a/b.svm", "workers=2"], 0)
    assert lossy.startswith("problem.path--d-a-b.svm_workers-2_seed-0_h-") and len(lossy.split("_h-")[1]) == 10
    # ids that lose nothing are as they always were: '=' and '_' become '-'
    assert (
        make_run_id(["delay.max_delay=400", "algorithm=sync_amsgrad", "+x=-1.5"], 1)
        == "algorithm-sync-amsgrad_delay.max-delay-400_x--1.5_seed-1"
    )


@pytest.mark.parametrize("key", ["problem.name", "algorithm.name", "engine.master_addr"])
def test_a_name_of_the_users_choosing_keeps_its_underscore_apart_from_a_hyphen(key):
    """``problem.name=p_q`` and ``p-q`` are two names (a sweep of both kept one summary row and one folder): the
    one with ``_`` gets the hash suffix, the other keeps its plain id."""
    under, hyphen = make_run_id([f"{key}=p_q"], 0), make_run_id([f"{key}=p-q"], 0)
    assert under != hyphen and "_h-" in under and hyphen == f"{key.replace('_', '-')}-p-q_seed-0"


def test_free_text_keys_are_the_string_settings():
    """FREE_TEXT_KEYS are the settings typed ``str`` (not a Literal of options) that name a run: every one the
    schema has, outside the keys the id ignores and the files it names by path."""
    import typing

    from pydantic import BaseModel

    from experiments.settings.schema import RunSettings
    from experiments.store.inputs import INPUT_KEYS
    from experiments.store.run_id import FREE_TEXT_KEYS, IGNORED_IN_RUN_ID

    def strings(model, prefix=""):
        for name, field in model.model_fields.items():
            kinds = typing.get_args(field.annotation) or (field.annotation,)
            if typing.get_origin(field.annotation) is not dict and str in kinds:  # str, str | None, str | dict
                yield prefix + name
            for kind in kinds:
                if isinstance(kind, type) and issubclass(kind, BaseModel):
                    yield from strings(kind, f"{prefix}{name}.")

    found = {k for k in strings(RunSettings) if k.split(".")[0] not in IGNORED_IN_RUN_ID and k not in INPUT_KEYS}
    assert found == FREE_TEXT_KEYS


@pytest.mark.parametrize(
    "written, as_read",
    [
        ("algorithm.lr_factor=1e-3", "algorithm.lr_factor=0.001"),  # an exponent
        ("workers=+2", "workers=2"),  # a sign
        ("engine.updates=30_000", "engine.updates=30000"),  # Hydra's digit separator
        ("delay.sigma=.5", "delay.sigma=0.5"),
        ("delay.sigma=-0.0", "delay.sigma=0.0"),
        ("algorithm.lr=1e-5", "algorithm.lr=1e-05"),  # what a -m sweep's job override holds for 1e-5
        ("algorithm.lr_factor= 1.0", "algorithm.lr_factor=1.0"),  # spaces Hydra drops (the id read "--1.0")
        ("algorithm.master_computes=false", "algorithm.master_computes=False"),  # a sweep's job writes False
        ("algorithm.master_computes=FALSE", "algorithm.master_computes=False"),
        ("algorithm.bounds=NULL", "algorithm.bounds=null"),
        ("engine.cores='dedicated'", "engine.cores=dedicated"),  # quotes a plain word does not need
    ],
)
def test_a_number_names_its_run_as_hydra_reads_it(written, as_read):
    """Two spellings of one number are one run (one folder, one summary row): the id is of the value Hydra reads."""
    assert make_run_id([written, "workers=4"], 0) == make_run_id([as_read, "workers=4"], 0)
    assert make_run_id([as_read], 0) == as_read.replace("=", "-").replace("_", "-") + "_seed-0"


def test_a_list_names_its_run_as_a_sweep_writes_it():
    assert make_run_id(["algorithm.bounds=[-10, 10]"], 0) == make_run_id(["algorithm.bounds=[-10,10]"], 0)
    assert make_run_id(["algorithm.bounds=[-10,10]"], 0) != make_run_id(["algorithm.bounds=[-10,1]"], 0)


def test_numbers_that_differ_and_text_that_is_no_number_keep_their_ids():
    assert make_run_id(["epochs=2"], 0) != make_run_id(["epochs=2.0"], 0)  # an int and a float (both committed)
    assert make_run_id(["workers=02"], 0) == "workers-02_seed-0"  # no number in Hydra's grammar: a string
    assert make_run_id(["x='1e-3'"], 0) != make_run_id(["x=0.001"], 0)  # a quoted number is a string
    assert make_run_id(["problem.path=/d/1e-3"], 0) != make_run_id(["problem.path=/d/0.001"], 0)


def _old_make_run_id(overrides, seed):
    """make_run_id as it was before lossy overrides got a hash: the committed results are keyed by its ids."""
    import hashlib
    import re

    from experiments.store.run_id import IGNORED_IN_RUN_ID

    kept = []
    for o in overrides:
        key = o.split("=", 1)[0].lstrip("+~")
        if key in IGNORED_IN_RUN_ID or key.startswith("hydra.") or key == "seed":
            continue
        kept.append(o.lstrip("+~"))
    kept = sorted(kept) + [f"seed={seed}"]
    rid = "_".join(re.sub(r"[^A-Za-z0-9.+-]+", "-", o.replace("=", "-")).strip("-") for o in kept)
    if len(rid) > 120:
        rid = rid[:100] + "-" + hashlib.sha1(rid.encode()).hexdigest()[:12]
    return rid


def _overrides_of(run_id: str, config: dict) -> tuple[list[str], int] | None:
    """The overrides behind a committed run id, rebuilt with the help of its config.yaml: the id is its overrides'
    fragments joined by '_' (a fragment holds no '_'), each ``key-value`` with the key's '_' written '-'; the key is
    the longest key of the stored config (dotted, or a config group) that the fragment starts with, and the value
    the config's own text where it sanitises to the fragment's rest. None for an id cut to 120 characters."""
    import re

    from experiments.store.sink import _flat

    if re.search(r"-[0-9a-f]{12}$", run_id) and len(run_id) == 113:
        return None
    flat = _flat(config)
    keys = set(flat) | set(config) | {k.rsplit(".", 1)[0] for k in flat}
    *frags, last = run_id.split("_")
    assert last.startswith("seed-"), run_id
    out = []
    for f in frags:
        match = max((k for k in keys if f.startswith(k.replace("_", "-") + "-")), key=len, default=None)
        assert match is not None, (run_id, f)
        rest = f[len(match) + 1 :]
        value = flat.get(match)
        text = str(value) if value is not None and str(value).replace("_", "-") == rest else rest
        out.append(f"{match}={text}")
    return out, int(last[len("seed-") :])


def test_every_committed_run_id_is_reproduced_from_its_overrides():
    """The committed results under results*/ are keyed by run id: every id whose overrides can be rebuilt from
    it and its stored config comes out of make_run_id unchanged (and equal to the old make_run_id's)."""
    import glob

    import yaml

    checked = cut = 0
    for summary in sorted(glob.glob(str(REPO / "results*" / "*" / "summary.csv"))):
        with open(summary, newline="") as f:
            ids = [r["run_id"] for r in csv.DictReader(f)]
        assert ids, summary
        runs = __import__("pathlib").Path(summary).parent / "runs"
        for rid in ids:
            assert "/" not in rid and "_h-" not in rid
            config = yaml.safe_load((runs / rid / "config.yaml").read_text())
            got = _overrides_of(rid, config)
            if got is None:
                cut += 1
                continue
            overrides, seed = got
            assert make_run_id(overrides, seed) == _old_make_run_id(overrides, seed) == rid
            checked += 1
    # cut ids (async_methods' long ones, with a hash suffix) cannot be rebuilt; several hundred others are checked
    assert checked >= 500, (checked, cut)


def test_every_committed_run_keeps_its_summary_row_so_a_lost_summary_is_rebuilt_whole():
    """Every committed run folder holds its row as summary_row.json (runs older than that file had it written from
    the committed summary): the row reads back cell for cell as summary.csv holds it, so a summary cut to its header
    or lost is rebuilt with every row and no run is redone."""
    import glob
    import json
    from pathlib import Path

    from experiments.store.table import csv_cell

    rows = 0
    for summary in sorted(glob.glob(str(REPO / "results*" / "*" / "summary.csv"))):
        with open(summary, newline="") as f:
            for row in csv.DictReader(f):
                kept = json.loads((Path(summary).parent / "runs" / row["run_id"] / "summary_row.json").read_text())
                assert {k: str(csv_cell(v)) for k, v in kept.items() if csv_cell(v) != ""} == {
                    k: v for k, v in row.items() if v != ""
                }, (summary, row["run_id"])
                rows += 1
    assert rows >= 2000


def test_atomic_write_leaves_nothing_on_a_full_disk(tmp_path, monkeypatch):
    import errno
    import os

    from experiments.store import atomic
    from experiments.store.atomic import atomic_write_text

    target = tmp_path / "summary.csv"
    target.write_text("old\n")

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    for name in ("write", "replace", "fsync"):
        with monkeypatch.context() as m:
            m.setattr(atomic.os, name, full)
            with pytest.raises(OSError) as info:
                atomic_write_text(target, "new\n" * 1000)
        msg = str(info.value)
        assert info.value.errno == errno.ENOSPC and "\n" not in msg and str(target) in msg, msg
        assert os.listdir(tmp_path) == ["summary.csv"] and target.read_text() == "old\n"


def test_atomic_write_never_follows_a_symlink_and_uses_unique_temporary_names(tmp_path, monkeypatch):
    import os

    from experiments.store import atomic
    from experiments.store.atomic import atomic_write_text

    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    link = tmp_path / "out.csv"
    link.symlink_to(victim)
    atomic_write_text(link, "new\n")  # the link is replaced by a file; its target is untouched
    assert not link.is_symlink() and link.read_text() == "new\n" and victim.read_text() == "keep\n"
    names = {atomic.temp_name(link).name for _ in range(50)}
    assert len(names) == 50 and all(n.startswith(f".out.csv.{os.getpid()}.") for n in names)
    # a symlink planted at the temporary name is not followed: the write fails, naming the file
    planted = atomic.temp_name(link)
    planted.symlink_to(victim)
    monkeypatch.setattr(atomic, "temp_name", lambda p: planted)
    with pytest.raises(OSError, match="out.csv"):
        atomic_write_text(link, "evil\n")
    assert victim.read_text() == "keep\n" and link.read_text() == "new\n"


def test_every_sink_write_goes_through_the_atomic_writer(tmp_path, monkeypatch):
    import errno

    from experiments.store import atomic

    sink = _finished(tmp_path, "r1")
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    monkeypatch.setattr(atomic.os, "write", lambda *a: (_ for _ in ()).throw(OSError(errno.ENOSPC, "No space")))
    for call in (
        lambda: sink.write_config("a: 1\n", {}),
        lambda: sink.add_provenance({"x": 1}),
        lambda: sink.write_trace([], Counter()),
        lambda: sink.write_compute_times([], ["a"]),
        lambda: sink.append_summary({"run_id": "r1", "status": "ok"}),
    ):
        with pytest.raises(OSError, match="No space"):
            call()
    after = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file() and not p.name.endswith(".lock")}
    assert after == {p: b for p, b in before.items() if not p.name.endswith(".lock")}


def test_the_runner_repairs_a_damaged_summary_reruns_a_damaged_config_and_refuses_an_unreadable_summary(tmp_path):
    """Through ``python -m experiments.run``: never a traceback, one line each time."""
    import os

    data = tmp_path / "d.svm"
    data.write_text("".join(f"{1 if i % 2 else -1} 1:{(i % 7) / 7:.3f} 2:{(i % 3) / 3:.3f}\n" for i in range(32)))
    res = tmp_path / "res"
    cmd = [
        sys.executable,
        "-m",
        "experiments.run",
        "problem=logreg_libsvm",
        f"problem.path={data}",
        "epochs=1",
        "batch_size=8",
        "engine=simulated",
        "engine.costs.grad_s=0.001",
        "engine.costs.update_s=0.00001",
        "engine.costs.latency_s=0.00001",
        "engine.costs.overhead_s=0.00001",
        f"results_dir={res}",
    ]

    def run():
        p = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
        assert "Traceback" not in p.stderr, p.stderr[-3000:]
        return p.returncode, [line for line in p.stderr.splitlines() if line.startswith(("[", "error:"))]

    assert run()[0] == 0
    summary = res / "adhoc" / "summary.csv"
    good = summary.read_text()
    (rid,) = _ids(summary)
    summary.write_text(good[:-10])  # cut inside the run's row
    rc, lines = run()
    assert rc == 0 and lines[0].startswith(f"[repair] {summary}: ") and lines[1].startswith("[skip] ")
    assert summary.read_text() == good
    config = res / "adhoc" / "runs" / rid / "config.yaml"
    config.write_text("problem: [unclosed\n")
    rc, lines = run()
    assert (
        rc == 0
        and lines[0].startswith(f"[rerun] adhoc/{rid}: {config} is not valid YAML")
        and lines[1].startswith("[ok] ")
    )
    summary.unlink()
    os.mkfifo(summary)
    rc, lines = run()
    assert rc == 2 and lines == [
        (
            f"error: {summary}: cannot read this summary (a named pipe, not a regular file); fix its permissions or "
            "move it away"
        )
    ]


def test_a_run_records_the_files_it_read_and_reruns_when_one_holds_other_bytes(tmp_path):
    """The run id names a data file by its path: the bytes are in provenance.json (``inputs``), and a finished run
    whose file changed runs again; the same bytes written anew (another modification time) are no change."""
    import json

    data = tmp_path / "d.svm"
    rows = [f"{1 if i % 2 else -1} 1:{(i % 7) / 7:.3f} 2:{(i % 3) / 3:.3f}\n" for i in range(32)]
    data.write_text("".join(rows))
    res = tmp_path / "res"
    cmd = [sys.executable, "-m", "experiments.run", "problem=logreg_libsvm", f"problem.path={data}", "epochs=1"]
    cmd += ["batch_size=8", "engine=simulated", "engine.costs.grad_s=0.001", f"results_dir={res}"]

    def run():
        p = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
        assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr[-3000:]
        return [line for line in p.stderr.splitlines() if line.startswith("[")]

    assert run()[-1].startswith("[ok] ")
    (rid,) = _ids(res / "adhoc" / "summary.csv")
    recorded = json.loads((res / "adhoc" / "runs" / rid / "provenance.json").read_text())["inputs"]
    import hashlib

    assert recorded == {
        "problem.path": {
            "path": str(data),
            "bytes": data.stat().st_size,
            "sha256": hashlib.sha256(data.read_bytes()).hexdigest(),
        }
    }
    data.write_text("".join(rows))  # the same bytes again
    assert run()[0].startswith("[skip] ")
    data.write_text("".join(rows[:-1]))  # one sample fewer
    lines = run()
    assert lines[0].startswith(f"[rerun] adhoc/{rid}: finished with another config (problem.path: {data} holds other ")
    assert lines[-1].startswith("[ok] ") and len(_ids(res / "adhoc" / "summary.csv")) == 1


FULL_DISK = """
import errno, os, sys
from experiments.store import atomic
real_write = os.write
def write(fd, data):
    if os.readlink(f"/proc/self/fd/{fd}").endswith(".tmp"):
        raise OSError(errno.ENOSPC, "No space left on device")
    return real_write(fd, data)
atomic.os = type(sys)("os_full")
atomic.os.__dict__.update({k: getattr(os, k) for k in dir(os)}, write=write)
import runpy
sys.argv = ["experiments.run", *sys.argv[1:]]
runpy.run_module("experiments.run", run_name="__main__", alter_sys=True)
"""


def test_a_full_disk_ends_the_run_with_one_line_and_leaves_no_temporary_file(tmp_path):
    data = tmp_path / "d.svm"
    data.write_text("".join(f"{1 if i % 2 else -1} 1:{(i % 7) / 7:.3f}\n" for i in range(32)))
    res = tmp_path / "res"
    cmd = [
        sys.executable,
        "-c",
        FULL_DISK,
        "problem=logreg_libsvm",
        f"problem.path={data}",
        "epochs=1",
        "batch_size=8",
        "engine=simulated",
        "engine.costs.grad_s=0.001",
        "engine.costs.update_s=0.00001",
        "engine.costs.latency_s=0.00001",
        "engine.costs.overhead_s=0.00001",
        f"results_dir={res}",
    ]
    p = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr[-3000:]
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: {res}/") and last.endswith("config.yaml: no space left on its disk"), last
    assert not [
        f
        for f in res.rglob("*")
        if f.name.endswith(".tmp") or (f.is_file() and f.stat().st_size == 0 and not f.name.endswith(".lock"))
    ]


def test_provenance_names_the_cpu_model_flags_and_cores(tmp_path, monkeypatch):
    import os
    import platform

    from experiments.store import provenance

    x86 = tmp_path / "x86"
    x86.write_text(
        "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\n"
        "flags\t\t: sse2 fpu avx2 avx512f\n\nprocessor\t: 1\nmodel name\t: other\nflags\t: x\n"
    )
    assert provenance.cpu_info(x86) == {
        "model": "AMD EPYC 7B13",
        "flags": "avx2 avx512f fpu sse2",
        "cores": os.cpu_count(),
        "machine": platform.machine(),
        "source": str(x86),
    }
    arm = tmp_path / "arm"
    arm.write_text("processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd crc32\nCPU part\t: 0xd0c\n")
    assert provenance.cpu_info(arm)["flags"] == "asimd crc32 fp" and provenance.cpu_info(arm)["model"] == "0xd0c"
    monkeypatch.setattr(provenance.platform, "processor", lambda: "i386")
    info = provenance.cpu_info(tmp_path / "no-such-file")  # no /proc/cpuinfo (macOS, Windows)
    assert (info["model"], info["flags"], info["source"], info["cores"]) == ("i386", None, "platform", os.cpu_count())
    monkeypatch.undo()
    cpu = provenance.collect(1, "cpu")["cpu"]
    assert cpu["cores"] == os.cpu_count() and cpu["model"]
    if os.path.exists("/proc/cpuinfo"):
        assert cpu["source"] == "/proc/cpuinfo" and cpu["flags"]


def test_the_report_and_figures_go_through_the_atomic_writer_and_keep_unchanged_files(tmp_path, monkeypatch):
    """REPORT.md, verdicts.csv and every figure are written by the one atomic writer (unique temporary names, no
    symlink followed): a symlink at the old fixed temporary name is never written through; a second write of the same
    content leaves the file as it was (modification time included); a full disk changes no file."""
    import errno

    import matplotlib.pyplot as plt

    from experiments.report import write_report
    from experiments.store import atomic
    from plots.style import save

    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    (tmp_path / ".REPORT.md.tmp").symlink_to(victim)  # the report writer's old fixed temporary name
    report = write_report(tmp_path, "quick", {}, experiments=["tau_threshold"])
    assert victim.read_text() == "keep\n" and report.read_text().startswith("# APAM harness")
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    png = save(fig, tmp_path / "figures", "line", "png")
    stamps = {p: p.stat().st_mtime_ns for p in (report, tmp_path / "verdicts.csv", png)}
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    assert save(fig, tmp_path / "figures", "line", "png") == png
    write_report(tmp_path, "quick", {}, experiments=["tau_threshold"])
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps  # same bytes: untouched
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file() and not p.is_symlink()}
    monkeypatch.setattr(atomic.os, "write", lambda *a: (_ for _ in ()).throw(OSError(errno.ENOSPC, "No space")))
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])  # another figure under the same name
    with pytest.raises(OSError, match="line.png"):
        save(fig, tmp_path / "figures", "line", "png")
    after = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file() and not p.is_symlink()}
    assert after == before


def test_a_file_a_run_reads_is_named_by_its_absolute_normalized_path(tmp_path, monkeypatch):
    """``a_b.svm`` and ``a-b.svm`` (one fragment), or ``a.svm`` from two folders (one text), are other files: other
    ids; one file spelled ``/d/./a.svm``, ``/d//a.svm`` or ``/d/a.svm`` is one run."""
    monkeypatch.chdir(tmp_path)
    assert make_run_id(["problem.path=a_b.svm"], 0) != make_run_id(["problem.path=a-b.svm"], 0)
    here = make_run_id(["problem.path=a.svm"], 0)
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    assert make_run_id(["problem.path=a.svm"], 0) != here
    assert make_run_id(["problem.path=../a.svm"], 0).split("_h-")[1] == here.split("_h-")[1]  # the file's hash
    one = {make_run_id([f"delay.replay={p}", "workers=2"], 0) for p in ("/d/./a.csv", "/d//a.csv", "/d/a.csv")}
    assert len(one) == 1 and make_run_id(["problem.path=null"], 0) == "problem.path-null_seed-0"
    assert make_run_id(["problem.path=/d/\udcff.svm"], 0) != make_run_id(["problem.path=/d/\udcfe.svm"], 0)  # not UTF-8
