"""experiments.prune: runs no job of the profile plans any more (an older config of an experiment's sweep) leave the
summary and the run folders; planned runs, other experiments and tuning trials stay; a dry run changes nothing."""

import shutil
from pathlib import Path

import pandas as pd
import pytest

from conftest import REPO
from experiments import prune
from experiments.store.sink import remove_runs

EXP = "tau_threshold"


def _folder(tmp_path, run_ids):
    """A results folder whose tau_threshold summary holds ``run_ids`` (each with a run folder), copied from rows of
    the committed quick results so that the columns are real."""
    src = pd.read_csv(REPO / "results" / EXP / "summary.csv").head(1)
    exp = tmp_path / EXP
    (exp / "runs").mkdir(parents=True)
    rows = []
    for rid in run_ids:
        row = src.iloc[0].copy()
        row["run_id"] = rid
        rows.append(row)
        (exp / "runs" / rid).mkdir()
        (exp / "runs" / rid / "trace.csv").write_text("x\n")
    pd.DataFrame(rows).to_csv(exp / "summary.csv", index=False)
    return exp


def test_remove_runs_drops_rows_then_folders_and_never_leaves_runs(tmp_path):
    exp = _folder(tmp_path, ["a", "b", "c"])
    (tmp_path / "outside").mkdir()
    assert remove_runs(tmp_path, EXP, ["b", "../../outside", "zz"]) == 1
    assert list(pd.read_csv(exp / "summary.csv")["run_id"]) == ["a", "c"]
    assert sorted(p.name for p in (exp / "runs").iterdir()) == ["a", "c"]
    assert (tmp_path / "outside").is_dir()  # a run id is a name under runs/, never a path out of it


def test_prune_lists_then_removes_only_the_runs_the_profile_does_not_plan(tmp_path, capfd):
    planned = sorted(prune.planned_run_ids(EXP, "smoke", tmp_path)[EXP])
    exp = _folder(tmp_path, planned[:2] + ["epochs-1_tau-99_seed-0"])
    (exp / "runs" / "orphan-folder").mkdir()
    (exp / "tuning" / "runs" / "trial").mkdir(parents=True)
    other = tmp_path / "adhoc" / "runs" / "x"
    other.mkdir(parents=True)
    before = (exp / "summary.csv").read_bytes()
    assert prune.main([str(tmp_path), "--profile", "smoke", "--only", EXP]) == 0
    err = capfd.readouterr().err
    assert f"{EXP}: 2 stale run(s), not planned by profile smoke: epochs-1_tau-99_seed-0, orphan-folder" in err
    assert (exp / "summary.csv").read_bytes() == before  # a dry run changes nothing
    assert prune.main([str(tmp_path), "--profile", "smoke", "--only", EXP, "--apply"]) == 0
    assert sorted(pd.read_csv(exp / "summary.csv")["run_id"]) == planned[:2]
    assert sorted(p.name for p in (exp / "runs").iterdir()) == planned[:2]
    assert (exp / "tuning" / "runs" / "trial").is_dir() and other.is_dir()
    assert prune.main([str(tmp_path), "--profile", "smoke", "--only", EXP]) == 0
    assert "nothing to remove" in capfd.readouterr().err
    shutil.rmtree(exp)


def test_prune_bad_input_is_one_line(tmp_path, capfd):
    assert prune.main([str(tmp_path / "nope"), "--profile", "smoke"]) == 2
    assert prune.main([str(tmp_path), "--profile", "smoke", "--only", "nosuch"]) == 2
    lines = [ln for ln in capfd.readouterr().err.splitlines() if ln]
    assert len(lines) == 2 and "nope: no such folder" in lines[0] and "--only nosuch: no such experiment" in lines[1]
    (tmp_path / "file").write_text("x")
    assert prune.main([str(tmp_path / "file"), "--profile", "smoke"]) == 2
    assert prune.main([str(tmp_path), "--profile", "smoke"]) == 2  # no experiment folder in it
    assert [ln.split(": ", 2)[-1] for ln in capfd.readouterr().err.splitlines() if ln] == [
        "a file, not a folder",
        "not a results folder (no <experiment>/summary.csv below it)",
    ]


def test_prune_apply_on_a_folder_it_cannot_write_removes_nothing(tmp_path, capfd, monkeypatch):
    """A runs/ folder that cannot be written (root ignores file modes, so the check is a real write, here made to
    fail): one line, exit 2, and the summary and the run folders still agree."""
    from experiments.store import atomic

    planned = sorted(prune.planned_run_ids(EXP, "smoke", tmp_path)[EXP])
    exp = _folder(tmp_path, planned[:1] + ["epochs-1_tau-99_seed-0"])
    before = (exp / "summary.csv").read_bytes()
    runs = exp / "runs"
    monkeypatch.setattr(atomic, "writable", lambda folder: folder != runs)
    assert prune.main([str(tmp_path), "--profile", "smoke", "--only", EXP, "--apply"]) == 2
    err = [ln for ln in capfd.readouterr().err.splitlines() if ln]
    assert err == [f"error: {runs}: not writable (--apply removes runs there); its runs were not removed"]
    assert (exp / "summary.csv").read_bytes() == before and (runs / "epochs-1_tau-99_seed-0").is_dir()


def test_an_experiment_left_without_runs_is_not_run_yet(tmp_path):
    """Its reproduce_status.json entry (its sweep 'ran') goes, so the report says 'not run yet', not 'not runnable
    here'; other entries stay."""
    import json

    from experiments.report.verdict import NOT_RUN_YET
    from experiments.report.writer import absent

    _folder(tmp_path, ["epochs-1_tau-99_seed-0"])
    (tmp_path / "reproduce_status.json").write_text(json.dumps({EXP: {"status": "ran"}, "other": {"status": "ran"}}))
    assert prune.main([str(tmp_path), "--profile", "smoke", "--only", EXP, "--apply"]) == 0
    statuses = json.loads((tmp_path / "reproduce_status.json").read_text())
    assert statuses == {"other": {"status": "ran"}} and not (tmp_path / EXP).exists()
    assert absent(statuses.get(EXP, {})).cls == NOT_RUN_YET


def test_prune_refuses_a_folder_of_another_profile(tmp_path, capsys):
    """Every run of a quick folder is unplanned by smoke: --profile smoke --apply removed them all without a word."""
    shutil.copytree(REPO / "results" / EXP, tmp_path / EXP, ignore=shutil.ignore_patterns("figures"))
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    assert prune.main([str(tmp_path), "--profile", "smoke", "--apply"]) == 2
    assert capsys.readouterr().err.strip() == (
        f"error: --profile smoke: the runs of {tmp_path / EXP} were made with profile quick; nothing removed: prune a "
        "folder of one profile with that profile"
    )
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
    # a folder of one profile's experiments beside another's: each experiment folder is judged by its own runs
    shutil.copytree(
        REPO / "results-long" / "lr_speedup", tmp_path / "lr_speedup", ignore=shutil.ignore_patterns("figures")
    )
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    assert prune.main([str(tmp_path), "--profile", "quick", "--apply"]) == 2
    assert f"the runs of {tmp_path / 'lr_speedup'} were made with profile long" in capsys.readouterr().err
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def test_an_experiment_with_runs_left_has_its_figures_drawn_again(tmp_path):
    """Its figures showed the removed runs: their list leaves its reproduce_status.json entry, so the next
    `make reproduce` draws them again (figures_outdated); the rest of the entry and other entries stay."""
    import json

    from experiments.figures import figures_outdated

    planned = sorted(prune.planned_run_ids(EXP, "smoke", tmp_path)[EXP])
    _folder(tmp_path, planned[:1] + ["epochs-1_tau-99_seed-0"])
    (tmp_path / EXP / "figures").mkdir()
    (tmp_path / EXP / "figures" / "a.png").write_bytes(b"png")
    entry = {"status": "ran", "figures": [f"{EXP}/figures/a.png"]}
    (tmp_path / "reproduce_status.json").write_text(json.dumps({EXP: entry, "other": entry}))
    assert not figures_outdated(entry, tmp_path)
    assert prune.main([str(tmp_path), "--profile", "smoke", "--only", EXP, "--apply"]) == 0
    statuses = json.loads((tmp_path / "reproduce_status.json").read_text())
    assert statuses == {EXP: {"status": "ran"}, "other": entry}
    assert figures_outdated(statuses[EXP], tmp_path)


def test_a_folder_of_ones_own_runs_only_is_not_called_all_planned(tmp_path, capfd):
    """A results folder whose only experiment folder is adhoc/: prune said "every run is one that profile quick
    plans", of runs no profile plans."""
    (tmp_path / "adhoc" / "runs" / "r").mkdir(parents=True)
    shutil.copy(REPO / "results" / EXP / "summary.csv", tmp_path / "adhoc" / "summary.csv")
    assert prune.main([str(tmp_path), "--profile", "quick"]) == 0
    assert capfd.readouterr().err == f"{tmp_path}: no experiment folder of profile quick here; nothing to remove\n"


STALE = ["epochs-1_tau-98_seed-0", "epochs-1_tau-99_seed-0"]


def _stale_folder(tmp_path):
    """A tau_threshold folder of one planned run and two stale ones, with a speedup.csv to be written again."""
    planned = sorted(prune.planned_run_ids(EXP, "smoke", tmp_path)[EXP])
    exp = _folder(tmp_path, planned[:1] + STALE)
    (exp / "speedup.csv").write_text("old\n")
    return exp, planned[:1]


def test_a_stale_run_that_cannot_be_removed_is_named_and_summary_and_runs_agree(tmp_path, capfd, monkeypatch):
    """A file of a stale run that cannot be removed (an immutable one: EPERM, here made to fail): the rows went
    first and the folder was half-removed, with ``error: trace.csv: ...``. Now the folders are moved aside first,
    the summary and speedup.csv are written, and the line names the file's full path and where what is left lies."""
    import os

    exp, planned = _stale_folder(tmp_path)
    real = os.unlink

    def unlink(path, *args, **kwargs):
        if Path(str(path)).name == "trace.csv" and kwargs.get("dir_fd") is not None:
            raise PermissionError(1, "Operation not permitted", str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, "unlink", unlink)
    assert prune.main([str(tmp_path), "--profile", "smoke", "--only", EXP, "--apply"]) == 2
    monkeypatch.undo()
    err = [ln for ln in capfd.readouterr().err.splitlines() if ln]
    (trash,) = exp.glob(".pruned-*")
    assert err == [
        f"error: {trash / STALE[0] / 'trace.csv'}: cannot be removed (Operation not permitted); its run left "
        f"summary.csv and runs/, what is left of it is in {trash}: remove that by hand"
    ]
    assert list(pd.read_csv(exp / "summary.csv")["run_id"]) == planned
    assert sorted(p.name for p in (exp / "runs").iterdir()) == planned
    assert (exp / "speedup.csv").read_text() != "old\n"  # written again from the summary that is left
    assert not list(exp.glob("summary.csv.damaged*"))


def _rename_fails(monkeypatch, name: str, exc: BaseException) -> None:
    """Moving the folder ``name`` raises ``exc`` (an immutable folder, a Ctrl-C); every other rename is real."""
    real = Path.rename

    def rename(self, target):
        if self.name == name:
            raise exc
        return real(self, target)

    monkeypatch.setattr(Path, "rename", rename)


def test_a_stale_run_that_cannot_be_moved_aside_leaves_every_run_in_place(tmp_path, capfd, monkeypatch):
    """The second stale folder cannot be moved (an immutable folder): the first is put back, nothing removed."""
    exp, _ = _stale_folder(tmp_path)
    before = {p: p.read_bytes() for p in exp.rglob("*") if p.is_file()}
    _rename_fails(monkeypatch, STALE[1], PermissionError(1, "Operation not permitted", str(exp / "runs" / STALE[1])))
    assert prune.main([str(tmp_path), "--profile", "smoke", "--only", EXP, "--apply"]) == 2
    err = [ln for ln in capfd.readouterr().err.splitlines() if ln]
    assert err == [f"error: {exp / 'runs' / STALE[1]}: cannot move it aside (Operation not permitted); no run removed"]
    assert {p: p.read_bytes() for p in exp.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in exp.iterdir()) == ["runs", "speedup.csv", "summary.csv"]


def test_ctrl_c_while_moving_runs_aside_puts_them_back(tmp_path, capfd, monkeypatch):
    exp, _ = _stale_folder(tmp_path)
    before = {p: p.read_bytes() for p in exp.rglob("*") if p.is_file()}
    _rename_fails(monkeypatch, STALE[1], KeyboardInterrupt())
    assert prune.main([str(tmp_path), "--profile", "smoke", "--only", EXP, "--apply"]) == 130
    assert [ln for ln in capfd.readouterr().err.splitlines() if ln] == [
        "interrupted: each experiment's summary.csv and run folders still agree (a stale run leaves both or neither); "
        "run it again to remove the rest"
    ]
    assert {p: p.read_bytes() for p in exp.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in exp.iterdir()) == ["runs", "speedup.csv", "summary.csv"]


def test_a_stale_run_folder_that_is_a_link_is_removed_as_the_link_never_its_target(tmp_path, capfd):
    """``runs/dot -> .`` and a link to a folder outside: said removed, they were left; now the links go, their
    targets stay."""
    exp, planned = _stale_folder(tmp_path)
    outside = tmp_path / "outside"
    (outside / "keep").mkdir(parents=True)
    (exp / "runs" / "dot").symlink_to(".")
    (exp / "runs" / "out").symlink_to(outside)
    assert prune.main([str(tmp_path), "--profile", "smoke", "--only", EXP, "--apply"]) == 0
    said = f"{EXP}: removed 4 stale run(s) (2 summary row(s)): dot, {STALE[0]}, {STALE[1]}, ..."
    assert said in capfd.readouterr().err
    assert sorted(p.name for p in (exp / "runs").iterdir()) == planned
    assert (outside / "keep").is_dir() and not list(exp.glob(".pruned-*"))


def test_an_empty_only_is_refused_in_one_line(tmp_path, capfd):
    """``--only --`` named no experiment and pruned every one."""
    exp, _ = _stale_folder(tmp_path)
    before = {p: p.read_bytes() for p in exp.rglob("*") if p.is_file()}
    with pytest.raises(SystemExit) as exit_:
        prune.main(["--profile", "smoke", "--apply", "--only", "--", str(tmp_path)])
    assert exit_.value.code == 2
    err = capfd.readouterr().err
    assert err.startswith("error: python -m experiments.prune: --only: name at least one experiment id (known: ")
    assert len(err.splitlines()) == 1
    assert {p: p.read_bytes() for p in exp.rglob("*") if p.is_file()} == before
