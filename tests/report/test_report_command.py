"""``python -m experiments.report DIR``: the report and the figures of any results folder, here a copy of a small
committed experiment folder (a folder of one's own runs: no reproduce_status.json); bad input exits 2 in one line."""

import shutil

import pandas as pd
import pytest

from conftest import REPO
from experiments.report.__main__ import main
from experiments.report.verdict import Verdict
from mdtable import row, rows

SMALL = "artificial_delay"  # 7 runs, 2 figures


@pytest.fixture
def own_runs(tmp_path):
    """A results folder holding a copy of a committed experiment folder without its figures."""
    shutil.copytree(REPO / "results" / SMALL, tmp_path / "runs" / SMALL, ignore=shutil.ignore_patterns("figures"))
    return tmp_path / "runs"


def test_report_and_figures_of_a_folder_of_ones_own_runs(own_runs, capsys):
    assert main([str(own_runs)]) == 0
    assert capsys.readouterr().out.strip() == str(own_runs / "REPORT.md")
    drawn = sorted(p.name for p in (own_runs / SMALL / "figures").glob("*.png"))
    assert drawn == sorted(p.name for p in (REPO / "results" / SMALL / "figures").glob("*.png"))  # redrawn
    report = (own_runs / "REPORT.md").read_text()
    assert report.startswith("# APAM harness: our numbers beside the paper's (profile `quick`)")  # the runs' profile
    ours = pd.read_csv(own_runs / "verdicts.csv")
    committed = pd.read_csv(REPO / "results" / "verdicts.csv")
    committed = committed[committed["experiment"] == SMALL]
    assert ours["claim"].tolist() == committed["claim"].tolist()
    assert [Verdict.parse(v).cls for v in ours["verdict"]] == [Verdict.parse(v).cls for v in committed["verdict"]]
    first = report.split("\n## ")[0]
    assert [r[0] for r in rows(first)[1:]] == [f"[{SMALL}](#{SMALL})"] * len(ours)  # only the experiment present
    assert row(report.split("## Experiments")[1], SMALL)[:3] == [SMALL, "runs found", "7"]
    assert f"![delay_sweep-lenet5_fmnist-apam-simulated-simulated-P1]({SMALL}/figures/" in report


def test_an_experiment_without_rules_gets_its_runs_means(own_runs):
    (own_runs / SMALL).rename(own_runs / "my_delays")
    assert main([str(own_runs), "--no-figures"]) == 0
    report = (own_runs / "REPORT.md").read_text()
    assert "(profile `quick`)" in report and "## my_delays: my_delays" in report
    table = report.split("## my_delays")[1]
    assert row(table, "lenet5_fmnist")[:8] == ["lenet5_fmnist", "apam", "simulated", "simulated", "1", "0", "1", "1"]
    assert len(rows(table.split("\n## ")[0])) == 1 + 7  # one line per max delay (a swept setting)
    assert pd.read_csv(own_runs / "verdicts.csv").empty  # no rules, no claims


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    assert main([str(tmp_path / "missing")]) == 2
    assert capsys.readouterr().err == f"error: {tmp_path / 'missing'}: no such folder\n"
    assert main([str(tmp_path)]) == 2
    assert capsys.readouterr().err == (
        f"error: {tmp_path}: not a results folder (no <experiment>/summary.csv below it)\n"
    )
    shutil.copytree(REPO / "results" / SMALL, tmp_path / SMALL, ignore=shutil.ignore_patterns("figures", "runs"))
    assert main([str(tmp_path / SMALL)]) == 2
    assert "an experiment folder, not a results folder: give the folder above it" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0 and "DIR/REPORT.md" in capsys.readouterr().out


SUMMARY = REPO / "results" / "tau_threshold" / "summary.csv"


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (SUMMARY.read_bytes()[:3000], "damaged summary (the last row does not end with a newline (truncated))"),
        (b"", "damaged summary (empty (no header))"),
        (b"\x98\x01garbage", "damaged summary (not UTF-8 CSV"),
        (b"run_id,status\na,ok\n", "not a summary this harness writes (no column problem, algorithm, workers, seed)"),
        (
            b"run_id,problem,algorithm,workers,seed,status\na,p,apam,1,0,ok\nb,p,apam,abc,0,ok\n",
            "damaged summary (row 3, column workers: 'abc' is not a whole number from 0 to 4096)",
        ),
        (
            b"run_id,problem,algorithm,workers,seed,status,time_per_epoch_s\na,p,apam,1,0,ok,1.5\nb,p,apam,2,0,ok,fast\n",
            "damaged summary (row 3, column time_per_epoch_s: 'fast' is not a number)",
        ),
        (
            b"run_id,problem,algorithm,workers,seed,status\na,p,apam,1,0,ok\nb,p,apam,,0,ok\n",
            "damaged summary (row 3, column workers: empty, and every run fills it)",
        ),
        (
            b"run_id,problem,algorithm,workers,seed,status\na,p,apam,1,0,ok\n../../x,p,apam,2,0,ok\n",
            "damaged summary (row 3: run id '../../x' is a path, not a run folder's name)",
        ),
        (
            b"run_id,problem,algorithm,workers,seed,status\na,p,apam,1,0,ok\nb,p,apam,-5,0,ok\n",
            "damaged summary (row 3, column workers: '-5' is not a whole number from 0 to 4096)",
        ),
        (
            b"run_id,problem,algorithm,workers,seed,status\na,p,apam,1,0,ok\nb,p,apam,2,0,weird\n",
            "damaged summary (row 3, column status: 'weird' is not one of ok, diverged, failed)",
        ),
    ],
)
def test_a_damaged_summary_is_one_line_and_exit_2_for_every_reader(tmp_path, capsys, content, why):
    """The report command, experiments.aggregate and experiments.load read a summary as the runner does
    (experiments/store/table.py ``read_summary_frame``): a damaged one is one line naming it, exit 2, nothing
    written (a truncated last row never becomes a speed-up row)."""
    from experiments import aggregate, load
    from experiments.errors import ConfigError

    exp = tmp_path / "tau_threshold"
    shutil.copytree(SUMMARY.parent, exp)
    (exp / "summary.csv").write_bytes(content)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    capsys.readouterr()
    assert main([str(tmp_path), "--no-figures"]) == 2
    assert aggregate.main([str(exp)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and all(line.startswith(f"error: {exp / 'summary.csv'}: {why}") for line in err), err
    with pytest.raises(ConfigError, match="summary.csv"):
        load(tmp_path)
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


def test_a_folder_that_cannot_be_written_is_one_line_and_exit_2(tmp_path, capsys, monkeypatch):
    """A read-only results folder (seen on a read-only mount; root ignores file modes, so the check is a real
    write, here made to fail): the report command and experiments.aggregate each say so in one line, exit 2, and
    write nothing."""
    import experiments.aggregate as aggregate
    import experiments.report.__main__ as report_main

    exp = tmp_path / "tau_threshold"
    shutil.copytree(SUMMARY.parent, exp, ignore=shutil.ignore_patterns("figures", "runs"))
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    monkeypatch.setattr(report_main, "writable", lambda folder: False)
    monkeypatch.setattr(aggregate, "writable", lambda folder: False)
    capsys.readouterr()
    assert main([str(tmp_path), "--no-figures"]) == 2
    assert aggregate.main([str(exp)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"error: {tmp_path}: not writable (REPORT.md, verdicts.csv and the figures are written there)",
        f"error: {exp}: not writable (speedup.csv is written there)",
    ]
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


@pytest.mark.timeout(300)
@pytest.mark.parametrize("damage", ["folder", "binary"])
def test_runs_without_a_trace_are_named_as_a_figure_not_drawn(tmp_path, capsys, damage):
    """A run of summary.csv whose trace.csv is gone (deleted, never copied) or damaged is left out of every curve:
    the report command says so (exit 1, the report's figures-not-drawn note), rather than drawing fewer curves
    without a word; a damaged one no longer keeps every figure of the experiment from being drawn."""
    import pandas as pd

    exp = tmp_path / "tau_threshold"
    shutil.copytree(SUMMARY.parent, exp, ignore=shutil.ignore_patterns("figures"))
    first = str(pd.read_csv(exp / "summary.csv")["run_id"].iloc[0])
    (exp / "runs" / first / "trace.csv").unlink()
    if damage == "folder":  # not a file: as good as gone (a named pipe is never opened either)
        (exp / "runs" / first / "trace.csv").mkdir()
    else:
        (exp / "runs" / first / "trace.csv").write_bytes(bytes(range(256)) * 4)
    capsys.readouterr()
    import plots.__main__ as plots_main

    line = f"have no trace.csv that is a readable file (first: {first}): their curves are not drawn"
    assert plots_main.main([str(exp)]) == 2  # plots says it too (it drew fewer curves without a word)
    assert line in capsys.readouterr().err
    assert main([str(tmp_path)]) == 1
    report = (tmp_path / "REPORT.md").read_text()
    assert line in report and (exp / "figures").is_dir() and any((exp / "figures").glob("*.png"))


@pytest.mark.timeout(300)
def test_an_experiment_whose_figures_all_need_the_missing_run_folders_says_so(tmp_path, capsys):
    """artificial_delay's figures are all drawn from traces: without its runs/ nothing was drawn, and plots said
    "no figure applies" (exit 0) while the report said nothing. Both name the reason now (exit 2 and 1)."""
    import plots.__main__ as plots_main

    exp = tmp_path / "artificial_delay"
    shutil.copytree(REPO / "results" / "artificial_delay", exp, ignore=shutil.ignore_patterns("runs"))
    figures = sorted((exp / "figures").iterdir())
    capsys.readouterr()
    assert plots_main.main([str(exp)]) == 2
    assert sorted((exp / "figures").iterdir()) == figures and figures  # the drawn ones are kept, not deleted
    why = f"{exp}: no figure drawn: its figures are drawn from the runs' trace.csv, and 7 of the 7 runs"
    assert capsys.readouterr().err.startswith(f"error: {why}")
    assert main([str(tmp_path)]) == 1
    assert why in (tmp_path / "REPORT.md").read_text()


def test_figures_read_only_the_runs_the_summary_lists(tmp_path):
    """A summary of no run (its header only) beside run folders and an older speedup.csv: no figure (plots drew the
    delay sweep from the unlisted runs' traces and the stale speed-ups while the report said "not run yet")."""
    from plots.data import load_experiment

    exp = tmp_path / "artificial_delay"
    shutil.copytree(REPO / "results" / "artificial_delay", exp, ignore=shutil.ignore_patterns("figures"))
    full = load_experiment(exp)
    assert full.traces is not None and len(full.traces) > 0
    header = (exp / "summary.csv").read_text().splitlines()[0]
    (exp / "summary.csv").write_text(header + "\n")
    empty = load_experiment(exp)
    assert empty.summary is None and empty.speedup is None and empty.traces is None


@pytest.mark.parametrize(
    "content",
    [
        b"garbage{",
        b"[1, 2]",
        b'{"tau_threshold": 3}',
        None,
        b'{"artificial_delay": {}}',  # an entry without its status (these four were a traceback of the report)
        b'{"tau_threshold": {"status": 3, "message": "", "wall_s": 1.0}}',
        b'{"tau_threshold": {"status": "ran", "message": "", "wall_s": "12"}}',
        b'{"tau_threshold": {"status": "ran", "message": "", "wall_s": 1.0, "profile": null}}',
        # values reproduce never writes: shown in the report's table ("spent -inf s on its sweep"), exit 0
        b'{"tau_threshold": {"status": "bogus", "message": "", "wall_s": 1.0}}',
        b'{"tau_threshold": {"status": "ran", "message": "", "wall_s": -Infinity}}',
        b'{"tau_threshold": {"status": "ran", "message": "", "wall_s": 1.0, "profile": "bogus"}}',
    ],
)
def test_a_damaged_status_file_is_one_line_and_exit_2_for_report_prune_and_reproduce(tmp_path, capsys, content):
    """reproduce_status.json that is not JSON, not an object of objects, a folder, or with an entry that lacks its
    status or holds a value of another kind than reproduce writes: one line naming it, exit 2, nothing written (it
    was a traceback, with exit 0 from the report)."""
    from experiments import prune, reproduce

    shutil.copytree(SUMMARY.parent, tmp_path / "tau_threshold", ignore=shutil.ignore_patterns("figures", "runs"))
    status = tmp_path / "reproduce_status.json"
    status.mkdir() if content is None else status.write_bytes(content)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    capsys.readouterr()
    assert main([str(tmp_path), "--no-figures"]) == 2
    assert prune.main([str(tmp_path), "--profile", "quick"]) == 2
    args = ["--profile", "smoke", "--results-dir", str(tmp_path), "--only", "tau_threshold"]
    assert reproduce.main(args) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 3 and all(line.startswith(f"error: {status}: damaged status file (") for line in err), err
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


def test_damaged_run_configs_do_not_stop_the_report_and_a_named_pipe_is_never_opened(tmp_path):
    """The report finds a folder's profile from its runs' config.yaml: one that is not YAML, a list, a folder or a
    named pipe says nothing (the runner reruns such a run) and the next run of the folder is read; no hang."""
    import os

    from experiments.report.load import run_profile

    exp = tmp_path / "tau_threshold"
    shutil.copytree(SUMMARY.parent, exp, ignore=shutil.ignore_patterns("figures"))
    configs = sorted(exp.glob("runs/*/config.yaml"))
    assert len(configs) >= 5
    configs[0].write_text("a: [unclosed")
    configs[1].write_text("- 1\n")
    configs[2].unlink()
    configs[2].mkdir()
    configs[3].unlink()
    os.mkfifo(configs[3])
    assert run_profile(tmp_path) == "quick"
    for f in configs[4:]:
        f.write_text("- 1\n")
    assert run_profile(tmp_path) is None
    assert main([str(tmp_path), "--no-figures"]) == 0


def test_an_experiment_whose_runs_are_gone_reads_not_run_yet_not_a_limit_of_the_machine(tmp_path):
    """reproduce_status.json says an experiment's sweep ran, but its folder is gone (removed by hand): its claims are
    ``not run yet`` with the reason (``not runnable here`` blamed the machine for a folder someone removed), while
    one skipped for a limit of the machine stays ``not runnable here``."""
    import json

    from experiments.report import write_report

    statuses = {
        "tau_threshold": {"status": "ran", "message": "", "wall_s": 1.0, "profile": "quick"},
        "lr_speedup": {"status": "skipped", "message": "needs data", "wall_s": 0.0, "profile": "quick"},
    }
    (tmp_path / "reproduce_status.json").write_text(json.dumps(statuses))
    overview = write_report(tmp_path, "quick", statuses).read_text().split("## Experiments")[1]
    assert row(overview, "tau_threshold")[1:] == [
        "ran",
        "0",
        "not run yet (its sweep ran, but its runs are not here: make reproduce runs it again)",
    ]
    assert row(overview, "lr_speedup")[1:] == ["skipped", "0", "not runnable here"]


def test_a_profile_other_than_the_runs_is_refused_and_a_minority_is_named(own_runs, capsys):
    """``--profile smoke`` over runs made with the quick profile titled them smoke and put their verdicts in the
    smoke column of the verdicts per profile: refused in one line. A folder whose runs mostly name the report's
    profile names the others in the report's first paragraph."""
    assert main([str(own_runs), "--no-figures"]) == 0
    assert "another profile" not in (own_runs / "REPORT.md").read_text()
    before = (own_runs / "REPORT.md").read_bytes()
    capsys.readouterr()
    assert main([str(own_runs), "--no-figures", "--profile", "smoke"]) == 2
    assert capsys.readouterr().err == (
        f"error: --profile smoke: the runs under {own_runs} were made with profile quick (their status file and "
        "configs say so); leave --profile out\n"
    )
    assert (own_runs / "REPORT.md").read_bytes() == before
    for name in ("a", "b"):  # two more experiments of smoke runs: smoke is the folder's profile, quick the minority
        shutil.copytree(own_runs / SMALL, own_runs / name)
        for config in (own_runs / name / "runs").glob("*/config.yaml"):
            config.write_text(config.read_text().replace("profile: quick", "profile: smoke"))
    assert main([str(own_runs), "--no-figures", "--profile", "smoke"]) == 0
    first = (own_runs / "REPORT.md").read_text().split("\n\n")[1]
    assert f"Made with another profile than smoke: {SMALL} (quick);" in first


DAMAGED, DIFFERENT = "damaged (", "not what summary.csv gives ("
HEADER = b"problem,algorithm,engine,clock,workers,basis,time_s,speedup,efficiency\n"


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (bytes(range(256)) * 2, DAMAGED),
        (b"", DAMAGED),
        (b"a,b\n1,2\n", DAMAGED),
        (HEADER + b"p,apam,e,c,1,b,1,abc,xyz\n", DAMAGED),
        (HEADER, DIFFERENT),  # its header alone: a sweep's first table, before its runs were summarized (out of date)
    ],
)
def test_a_damaged_speedup_table_is_written_again_from_the_summary(own_runs, capsys, content, said):
    """speedup.csv is derived from summary.csv: one that is not text, empty, without its columns, or its header alone
    while the summary gives rows, is written again (with a line saying why) and the report goes on (a traceback:
    UnicodeDecodeError, EmptyDataError, KeyError; the header alone was read as no speed-up at all)."""
    good = pd.read_csv(own_runs / SMALL / "speedup.csv")
    (own_runs / SMALL / "speedup.csv").write_bytes(content)
    assert main([str(own_runs), "--no-figures"]) == 0
    err = capsys.readouterr().err
    assert f"{own_runs / SMALL / 'speedup.csv'}: {said}" in err and "written again from summary.csv" in err
    assert "Traceback" not in err
    again = pd.read_csv(own_runs / SMALL / "speedup.csv")  # the committed file predates 3 columns
    pd.testing.assert_frame_equal(again[good.columns], good)


def _edit_speedup(column, value):
    """A damage of speedup.csv: ``column`` of its second row set to ``value``."""

    def edit(path):
        frame = pd.read_csv(path)
        frame.loc[1, column] = value
        path.write_text(frame.to_csv(index=False))

    return edit


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        (lambda p: p.write_bytes(p.read_bytes()[:1000]), DAMAGED),  # cut inside a row: was a TypeError in measured.py
        # cut at a line's end: whole, and behind the summary (as while a sweep runs)
        (lambda p: p.write_bytes(p.read_bytes()[: p.read_bytes().index(b"\n", 400) + 1]), DIFFERENT),
        (_edit_speedup("speedup", float("nan")), DIFFERENT),  # edits and links changed verdicts, exit 0, no word
        (_edit_speedup("speedup", float("inf")), DIFFERENT),
        (_edit_speedup("speedup", -1.0), DIFFERENT),
        (_edit_speedup("time_s", 99.0), DIFFERENT),
        (_edit_speedup("algorithm", "sync_amsgrad"), DIFFERENT),
        (lambda p: (p.unlink(), p.symlink_to(REPO / "results" / "lr_speedup" / "speedup.csv")), DAMAGED),
        (lambda p: (p.unlink(), p.symlink_to(p.parent / "gone.csv")), DAMAGED),
    ],
)
def test_a_speedup_table_other_than_the_summary_gives_is_written_again(own_runs, capsys, damage, said):
    """speedup.csv that differs from what summary.csv gives (a row cut short or left out, a number or a name edited,
    a link to another experiment's table or to nothing) is written again as a file of its own, with a line saying
    why (a whole table behind the summary is not called damaged); the link's target is left as it was."""
    path = own_runs / SMALL / "speedup.csv"
    good = pd.read_csv(path)
    other = (REPO / "results" / "lr_speedup" / "speedup.csv").read_bytes()
    damage(path)
    assert main([str(own_runs), "--no-figures"]) == 0
    err = capsys.readouterr().err
    assert f"{path}: {said}" in err and "written again from summary.csv" in err and "Traceback" not in err
    assert not path.is_symlink() and (REPO / "results" / "lr_speedup" / "speedup.csv").read_bytes() == other
    pd.testing.assert_frame_equal(pd.read_csv(path)[good.columns], good)


@pytest.mark.parametrize("results", ["results", "results-long"])
def test_no_committed_speedup_table_differs_from_its_summary(results):
    """The committed speed-up tables (some written before the newer columns) are read as they are, never rewritten."""
    from experiments.analysis.speedup import speedup_difference

    tables = sorted((REPO / results).glob("*/speedup.csv"))
    assert tables
    assert {p.parent.name: speedup_difference(p.parent, pd.read_csv(p)) for p in tables} == {
        p.parent.name: None for p in tables
    }


def test_a_speedup_table_that_is_a_folder_is_one_line(own_runs, capsys):
    (own_runs / SMALL / "speedup.csv").unlink()
    (own_runs / SMALL / "speedup.csv").mkdir()
    assert main([str(own_runs), "--no-figures"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"error: {own_runs / SMALL / 'speedup.csv'}: a folder, not a regular file; remove it "
        "(experiments.aggregate writes it again from summary.csv)"
    ]


@pytest.mark.parametrize(
    ("experiment", "name"),
    [
        ("lr_speedup", "provenance.json"),
        ("lr_speedup", "config.yaml"),
        ("artificial_delay", "trace.csv"),
        ("model_validation", "staleness.csv"),
        ("model_validation", "predicted_staleness.csv"),
    ],
)
def test_a_named_pipe_in_place_of_a_run_file_is_named_and_never_opened(tmp_path, capsys, experiment, name):
    """A run's file that is a named pipe (the report hung in open() on a provenance.json) is left out with one
    warning naming it; the report goes on."""
    import os

    exp = tmp_path / experiment
    shutil.copytree(REPO / "results" / experiment, exp, ignore=shutil.ignore_patterns("figures"))
    path = sorted(exp.glob(f"runs/*/{name}"))[0]
    path.unlink()
    os.mkfifo(path)

    assert main([str(tmp_path), "--no-figures"]) == 0  # it hung in open()
    err = capsys.readouterr().err
    assert err.count(f"{path}: a named pipe, not a regular file") == 1, err


@pytest.mark.parametrize("damage", ["removed", "header alone"])
def test_a_summary_lost_while_its_runs_are_there_is_rebuilt_from_them(tmp_path, capsys, damage):
    """summary.csv missing or its header alone while the run folders hold their summary_row.json: it is rebuilt from
    them with a line naming it (the report said "not run yet", exit 0) and the runs are reported."""
    name = "allcnn_sync_vs_async"  # every run of it has its summary_row.json
    shutil.copytree(REPO / "results" / name, tmp_path / name, ignore=shutil.ignore_patterns("figures"))
    shutil.copy(REPO / "results" / "reproduce_status.json", tmp_path)
    summary = tmp_path / name / "summary.csv"
    good = pd.read_csv(summary)
    summary.unlink() if damage == "removed" else summary.write_text(summary.read_text().splitlines()[0] + "\n")
    assert main([str(tmp_path), "--no-figures"]) == 0
    err = capsys.readouterr().err
    assert f"[repair] {summary}: {'missing' if damage == 'removed' else 'its header alone'}, while run folders" in err
    assert sorted(pd.read_csv(summary)["run_id"]) == sorted(good["run_id"])
    report = (tmp_path / "REPORT.md").read_text()
    assert row(report.split("## Experiments")[1], name)[2] == str(len(good))
    assert "Not run yet" not in report.split(f"## {name}")[-1].split("\n## ")[0]
