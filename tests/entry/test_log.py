"""The harness's messages (experiments/log.py): one line each, warnings and errors named by their prefix."""

from __future__ import annotations

from experiments.log import get_logger


def test_messages_are_prefixed_by_level_and_stay_one_line(capsys):
    log = get_logger("experiments.test_log")
    log.info("wrote results/x/speedup.csv")
    log.warning("results/x/summary.csv: damaged (a cut row); set aside")
    log.error("experiment_id=a\nb: not a plain name")
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        "wrote results/x/speedup.csv",
        "warning: results/x/summary.csv: damaged (a cut row); set aside",
        "error: experiment_id=a\\nb: not a plain name",
    ]


def test_a_logger_outside_the_harness_is_placed_under_it(capsys):
    get_logger("problems.optimum").warning("optimum cache x unreadable; recomputing")
    assert capsys.readouterr().err == "warning: optimum cache x unreadable; recomputing\n"
