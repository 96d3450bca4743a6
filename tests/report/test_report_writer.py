"""The report's page: the first screen (one table, then a paragraph from the verdicts), the sections rendered from
the Jinja2 templates, the verdicts per profile, verdicts.csv's columns."""

import os

import pandas as pd
import pytest

from experiments.report.first_screen import Row, first_table, paragraph
from experiments.report.load import report_block
from experiments.report.markdown import render, table
from experiments.report.profiles import same_settings
from experiments.report.sections.base import Section
from experiments.report.verdict import (
    NOT_RUNNABLE,
    OUTSIDE,
    REPRODUCED,
    Claim,
    Verdict,
    finding,
    outside,
)
from experiments.report.writer import ORDER, VERDICT_COLUMNS, Part, judge, write_report
from helpers import FLAT, RISING, lenet, run, trace, write_summary
from mdtable import row, rows


def _claims():
    return [
        Claim(
            "apam: speed-up against the paper's",
            "nearly linear speed-up",
            Verdict(REPRODUCED, "at P = 2, 4"),
            "P=2: 2.00 vs paper 1.91",
            rule="within 25%",
            decided_by="speed-up at P = 4",
            ours="4.00",
            paper="3.63",
            timed=True,
            clock="under the cost model; model_validation ...",
        ),
        Claim(
            "apam: same loss",
            "the loss | is the same",
            outside("epochs = 20 < 100"),
            name="same loss",
            decided_by="epochs",
            ours="20",
            paper="100",
        ),
        Claim("finding: master saturation", "finding: P*", finding(), decided_by="P*", ours="6.4"),
    ]


def test_first_screen_is_one_table_of_short_cells_then_a_paragraph():
    claims = _claims()
    rws = [Row("lr_speedup", "lr_speedup", c.verdict, c) for c in claims] + [
        Row(
            "large_accuracy",
            "large_accuracy",
            Verdict(NOT_RUNNABLE),
            None,
            "accuracy of a large net",
            "problem=resnet18_cifar10: CIFAR-10 not found: no data/cifar-10-batches-py (long explanation)",
        )
    ]
    md = first_table(rws)
    cells = rows(md)
    assert cells[0] == ["section", "claim", "verdict", "decided by", "ours", "paper", "clock"]
    assert cells[1] == [
        "[lr_speedup](#lr_speedup)",
        "apam: speed-up against the paper's",
        "**reproduced**",
        "speed-up at P = 4",
        "4.00",
        "3.63",
        "prediction",
    ]
    assert cells[2][1:5] == ["same loss", "**outside regime**", "epochs", "20"]  # the short name, not the key
    assert cells[4][:3] == ["[large_accuracy](#large_accuracy)", "accuracy of a large net", "**not runnable here**"]
    assert max(len(c) for r in cells for c in r) < 60  # no paragraph in a cell
    text = paragraph(rws)
    assert text.startswith(
        "**3 claims** in 2 experiments. **Reproduced** (1): lr_speedup (apam: speed-up against the paper's)."
    )
    assert "**Outside the claim's regime** at this profile's budget (1: lr_speedup (same loss))" in text
    assert (
        "**Cannot be tested on this machine**: large_accuracy (problem=resnet18_cifar10: CIFAR-10 not found)." in text
    )
    assert "1 of the 1 claims about times rest on the simulated clock's prediction without model_validation" in text


def test_section_template_renders_claims_notes_tables_and_figures():
    part = Part(
        "lr_speedup",
        "lr_speedup: Sec. 5.1",
        "a setting",
        {"status": "ran"},
        Verdict(NOT_RUNNABLE),
        runs=3,
        runs_line="3 runs (0 diverged or failed).",
        section=Section("| a |\n|---|\n| 1 |\n", ()),
        claims=_claims(),
        note="A note.",
        paper_label="The paper's numbers",
        paper_table="| p |\n",
        bad_runs=[{"run_id": "r9", "status": "diverged", "message": "loss 3e+05"}],
        figures=["lr_speedup/figures/speedup-x.png"],
    )
    text = render("section.md.j2", part=part)
    assert text.startswith(
        '<a id="lr_speedup"></a>\n\n## lr_speedup: Sec. 5.1\n\n*Setting here:* a setting.\n\n'
        "3 runs (0 diverged or failed).\n"
    )
    assert row(text, "2") == ["2", "same loss", "**outside regime**", "epochs", "20", "100"]
    assert "the loss \\| is the same" not in text and "2. *the loss | is the same.*" in text  # notes: plain text
    assert (
        "1. *nearly linear speed-up.* Rule: within 25%. **Reproduced** (at P = 2, 4). Evidence: P=2: 2.00 vs "
        "paper 1.91. Clock: under the cost model; model_validation ...."
    ) in text
    assert "A note." in text and "<details><summary>The paper's numbers (results/paper/lr_speedup.csv)" in text
    assert "- `r9` (diverged): loss 3e+05" in text and "![speedup-x](lr_speedup/figures/speedup-x.png)" in text
    empty = Part(
        "large_accuracy",
        "large_accuracy: X",
        "",
        {"status": "skipped", "message": "data missing"},
        Verdict(NOT_RUNNABLE),
    )
    assert render("section.md.j2", part=empty).endswith("## large_accuracy: X\n\n**Not runnable here:** data missing\n")


def test_tables_are_to_markdown_with_the_reports_number_format():
    md = table(pd.DataFrame({"workers": [1, 64], "speed-up": [1.0, 6.3456], "note": ["a|b", None]}))
    assert rows(md) == [["workers", "speed-up", "note"], ["1", "1", "a|b"], ["64", "6.35", "--"]]
    assert table(pd.DataFrame()) == "_(no rows)_\n"


def test_each_experiment_names_its_title_and_setting_in_its_yaml():
    for name in ORDER:
        block = report_block(name)
        assert block["title"] and block["setting"], name
    assert report_block("lr_speedup")["title"] == "Sec. 5.1 -- logistic regression, APAM speed-up"
    assert report_block("no_such_experiment") == {}


def test_judge_carries_the_clock_the_missing_verdict_and_the_seed_count(tmp_path):
    summary = pd.DataFrame(
        [run("apam", 1, 0, 0.9, problem="a"), {**run("apam", 1, 0, 0.9, problem="b"), "clock": "wall"}]
    )
    claims = (
        Claim("k1", "speed-up on a", Verdict(REPRODUCED), "ev", timed=True, problem="a"),
        Claim("k2", "finding: where APAM stands on b", finding("APAM 2. of 5"), "ev", timed=True, problem="b"),
        Claim("k3", "accuracy", Verdict.judged(False), "ev"),
        Claim("k4", "no runs", Verdict.judged(None), "no runs", timed=True),
    )
    judged = {c.key: c for c in judge(claims, summary, tmp_path, Verdict(NOT_RUNNABLE, "data missing"))}
    assert judged["k1"].clock == "prediction" and judged["k2"].clock == ""  # b's runs are measured
    assert str(judged["k2"].verdict) == "finding (APAM 2. of 5; 1 seed in all: fewer than 3)"
    assert judged["k3"].clock == "" and judged["k3"].verdict.cls == "not reproduced"
    assert str(judged["k4"].verdict).startswith("not runnable here (data missing") and judged["k4"].clock == ""


def test_same_settings_names_the_experiments_long_does_not_scale_up():
    same = same_settings("quick", "long")
    assert "paper_timing" in same  # its long sweep is the quick one
    assert "lenet5_speedup" not in same and "artificial_delay" not in same
    assert "stragglers" not in same  # long adds sigma 0.5 to quick's sweep


def test_side_by_side_verdicts_per_profile(tmp_path):
    quick, long = tmp_path / "results", tmp_path / "results-long"
    for folder, updates, seeds, tr in ((quick, 750, 1, RISING), (long, 30000, 3, FLAT)):
        exp = folder / "lenet5_speedup"
        (exp / "runs").mkdir(parents=True)
        s = lenet(seeds=seeds, updates=updates)
        write_summary(s, exp)
        for rid in s.run_id:
            (exp / "runs" / rid).mkdir()
            trace([rid], tr).to_csv(exp / "runs" / rid / "trace.csv", index=False)
    write_report(quick, "quick", {})
    write_report(long, "long", {})
    report = (long / "REPORT.md").read_text()
    per_profile = report.split("## Verdicts per profile")[1].split("\n## ")[0]
    assert row(per_profile, "lenet5_speedup")[0] == "lenet5_speedup"
    line = next(r for r in rows(per_profile) if r[1] == "APAM more accurate than async SGD")
    assert line[2:] == [OUTSIDE, REPRODUCED]  # quick's scale cannot tell; long's can
    assert "Besides scale, the profiles differ in calibration" in per_profile  # what else a changed verdict may mean
    assert "async_methods in long tunes" not in per_profile  # named only where that experiment is
    verdicts = pd.read_csv(quick / "verdicts.csv")
    assert verdicts.columns.tolist() == VERDICT_COLUMNS
    better = verdicts.set_index("claim").loc["APAM more accurate than async SGD"]
    assert (better["verdict"], better["verdict_class"]) == (OUTSIDE, "outside_regime")
    assert better["conditions"] == "K = 750, tau = 0, 1, 4, 9, 19: P = 1 has not plateaued; 1 seed(s) < 3"
    first = report.split("\n## ")[0]  # the first screen: title, table, paragraph
    assert len(rows(first)) == 1 + len(pd.read_csv(long / "verdicts.csv")) + (len(ORDER) - 1)  # + absent experiments


@pytest.mark.parametrize(
    "damage, why",
    [
        (lambda p: p.write_bytes(b"\x98\x01garbage"), "not UTF-8 CSV ('utf-8' codec can't decode byte 0x98"),
        (lambda p: p.write_text(""), "not UTF-8 CSV (No columns to parse from file)"),
        (lambda p: p.write_text("a,b\n1,2\n"), "no column experiment, claim, verdict"),
        (lambda p: p.write_text("experiment,claim,verdict\nx,y,zzz\n"), "verdict 'zzz': no known class"),
        (lambda p: p.mkdir(), "a folder, not a regular file"),
        (lambda p: os.mkfifo(p), "a named pipe, not a regular file"),  # never opened: it would hang the report
    ],
)
def test_a_damaged_verdicts_file_of_another_profile_is_named_and_left_out(tmp_path, capsys, damage, why):
    """results/verdicts.csv is read by results-long's report for its verdicts per profile: damaged, it was a
    traceback (a named pipe hung the report). Now one warning naming it, and the long report is written without
    the quick column."""
    quick, long = tmp_path / "results", tmp_path / "results-long"
    exp = long / "lenet5_speedup"
    (exp / "runs").mkdir(parents=True)
    s = lenet(seeds=3, updates=30000)
    write_summary(s, exp)
    for rid in s.run_id:
        (exp / "runs" / rid).mkdir()
        trace([rid], FLAT).to_csv(exp / "runs" / rid / "trace.csv", index=False)
    quick.mkdir()
    damage(quick / "verdicts.csv")
    write_report(long, "long", {})
    err = capsys.readouterr().err
    assert err.count(f"warning: {quick / 'verdicts.csv'}: damaged verdicts ({why}") == 1, err
    per_profile = (long / "REPORT.md").read_text().split("## Verdicts per profile")[1].split("\n## ")[0]
    line = next(r for r in rows(per_profile) if r[1] == "APAM more accurate than async SGD")
    assert line[2:] == [REPRODUCED] and "`results/`" not in per_profile


def test_the_report_says_which_calibration_entries_were_above_the_spread_bound(tmp_path):
    """The runs' provenance names the calibration entries they used and those above the bound: the report counts
    them and names the experiments whose runs used one; runs without a calibration are not counted."""
    import json

    from experiments.report.load import calibration_spreads

    def run(exp, rid, entries, above):
        folder = tmp_path / exp / "runs" / rid
        folder.mkdir(parents=True)
        cal = {"entries": entries, "spread_bound": 0.25, "spread_above_bound": above} if entries else None
        (folder / "provenance.json").write_text(json.dumps({"git_commit": "abc", "calibration_used": cal}))

    run("lr_speedup", "a", ["grad|x", "latency|y"], ["latency|y"])
    run("lr_speedup", "b", ["grad|x"], [])
    run("tau_threshold", "c", ["grad|x", "update|z"], [])
    run("tau_threshold", "d", [], [])  # a wall-clock run: no calibration
    text = calibration_spreads(tmp_path, ["lr_speedup", "tau_threshold"])
    assert text.startswith("Calibration: 3 runs used calibrated costs (3 entries). 1 of those entries kept a spread")
    assert "used with a warning by 1 runs (lr_speedup 1)" in text
    assert calibration_spreads(tmp_path, ["tau_threshold"]) == (
        "Calibration: 1 runs used calibrated costs (2 entries). No entry they used has a spread above the 25% bound."
    )
    assert calibration_spreads(tmp_path, []) == ""
