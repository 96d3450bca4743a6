"""speedup.csv (experiments.analysis.speedup): T(1)/T(P) per group, efficiency, failed runs left out, time-to-target
only where reached; ``python -m experiments.aggregate DIR`` writes it."""

import math

import pandas as pd
import pytest

from experiments import aggregate
from experiments.analysis.speedup import mean_speedup, speedup_table


def _row(alg, p, tpe, ttt, seed=0, status="ok", engine="simulated"):
    return {
        "experiment": "e",
        "problem": "q",
        "algorithm": alg,
        "engine": engine,
        "clock": "simulated",
        "delay_model": "timing",
        "max_delay": 0,
        "straggler_sigma": 0.0,
        "straggler_slowdown": 1.0,
        "batch_size": 64,
        "workers": p,
        "seed": seed,
        "time_per_epoch_s": tpe,
        "time_to_target_s": ttt,
        "final_train_loss": 0.3,
        "final_test_acc": 0.9,
        "status": status,
    }


def _written(rows: pd.DataFrame, exp) -> None:
    """``rows`` as ``exp/summary.csv``, a summary as the runner writes it: a run id each, and every column of the
    contract (experiments/store/table.py SUMMARY_COLUMNS; those not given empty: not measured)."""
    from experiments.store.table import SUMMARY_COLUMNS

    summary = rows.assign(run_id=[f"r{i}" for i in range(len(rows))])
    summary = summary.reindex(columns=[*SUMMARY_COLUMNS, *(c for c in summary if c not in SUMMARY_COLUMNS)])
    summary.to_csv(exp / "summary.csv", index=False)


def test_speedup_and_efficiency_against_p1_mean_over_seeds():
    rows = [
        _row("apam", 1, 8.0, 40.0),
        _row("apam", 1, 12.0, 60.0, seed=1),
        _row("apam", 4, 2.5, 12.5),
        _row("apam", 4, 2.5, 12.5, seed=1),
        _row("sync_amsgrad", 1, 10.0, 50.0),
        _row("sync_amsgrad", 4, 5.0, math.nan),
    ]
    t = speedup_table(pd.DataFrame(rows))
    a = t[(t.algorithm == "apam") & (t.basis == "time_per_epoch")].set_index("workers")
    assert a.loc[4, "speedup"] == pytest.approx(10.0 / 2.5)
    assert a.loc[4, "efficiency"] == pytest.approx(1.0)
    assert a.loc[1, "n_seeds"] == 2
    s = t[(t.algorithm == "sync_amsgrad") & (t.basis == "time_to_target")]
    assert list(s.workers) == [1]  # P = 4 never reached the target
    assert (
        t[(t.algorithm == "sync_amsgrad") & (t.basis == "time_per_epoch")].set_index("workers").loc[4, "speedup"] == 2.0
    )


def test_failed_runs_are_left_out_and_counted():
    rows = [_row("apam", 1, 8.0, 40.0), _row("apam", 2, 4.0, 20.0), _row("apam", 2, 1.0, 5.0, seed=1, status="failed")]
    t = speedup_table(pd.DataFrame(rows))
    r = t[(t.basis == "time_per_epoch") & (t.workers == 2)].iloc[0]
    assert r.speedup == 2.0 and r.n_failed == 1


def test_groups_without_p1_give_no_rows():
    assert speedup_table(pd.DataFrame([_row("apam", 2, 4.0, 20.0)])).empty


def test_mean_speedup_by_workers_and_the_aggregate_command(tmp_path, capsys):
    rows = [_row("apam", 1, 8.0, 40.0), _row("apam", 4, 2.0, 10.0), _row("apam", 4, 2.0, 10.0, engine="other")]
    sp = speedup_table(pd.DataFrame(rows))
    assert mean_speedup(sp, "apam").to_dict() == {1: 1.0, 4: 4.0}
    assert mean_speedup(sp, "sync_amsgrad").empty and mean_speedup(pd.DataFrame(), "apam").empty
    exp = tmp_path / "e"
    exp.mkdir()
    _written(pd.DataFrame(rows).assign(engine="simulated"), exp)
    assert aggregate.main([str(exp)]) == 0 and capsys.readouterr().out.strip() == str(exp / "speedup.csv")
    assert pd.read_csv(exp / "speedup.csv")["speedup"].tolist() == [1.0, 4.0, 1.0, 4.0]  # per epoch, to target
    assert aggregate.main([str(tmp_path / "missing")]) == 2 and "no such file" in capsys.readouterr().err
    (tmp_path / "odd" / "summary.csv").mkdir(parents=True)  # a folder where the summary goes: said as it is
    assert aggregate.main([str(tmp_path / "odd")]) == 2
    assert capsys.readouterr().err.strip() == f"error: {tmp_path / 'odd' / 'summary.csv'}: a folder, not a regular file"
    (exp / "speedup.csv").unlink()  # one bad folder among good ones: every folder is checked before any is written
    assert aggregate.main([str(exp), str(tmp_path / "missing")]) == 2 and not (exp / "speedup.csv").exists()


def test_the_aggregate_command_says_why_a_speedup_table_has_no_row(tmp_path, capsys):
    """A summary without a P = 1 run: speedup.csv is its header alone, and the command said nothing of it."""
    exp = tmp_path / "e"
    exp.mkdir()
    _written(pd.DataFrame([_row("apam", 4, 2.0, 10.0)]), exp)
    assert aggregate.main([str(exp)]) == 0
    out = capsys.readouterr()
    assert out.out.strip() == str(exp / "speedup.csv") and len((exp / "speedup.csv").read_text().splitlines()) == 1
    assert (
        out.err == f"warning: {exp / 'speedup.csv'}: no row: a speed-up needs a P = 1 run of the same algorithm "
        "and engine in the summary\n"
    )


def test_a_sweep_without_a_p1_run_says_why_its_speedup_table_has_no_row(tmp_path, capsys, monkeypatch):
    """The sweep's end writes speedup.csv as experiments.aggregate does, and says the same when it has no row."""
    import importlib

    import experiments

    run = importlib.import_module("experiments.run")  # the module; `from experiments import run` is the API's run()
    # importing the entry module makes it the package's attribute `run`, which would hide the API's run() from
    # `from experiments import run` in every later test of this process: the attribute goes, the module stays
    vars(experiments).pop("run", None)
    exp = tmp_path / "e"
    exp.mkdir()
    _written(pd.DataFrame([_row("apam", 4, 2.0, 10.0)]), exp)
    monkeypatch.setattr(run, "_SWEEP_DIRS", {exp})
    run._write_speedups()
    assert capsys.readouterr().err.splitlines() == [
        f"wrote {exp / 'speedup.csv'}",
        f"warning: {exp / 'speedup.csv'}: no row: a speed-up needs a P = 1 run of the same algorithm and engine in "
        "the summary",
    ]
