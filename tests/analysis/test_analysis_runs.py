"""What experiments.analysis reads from the runs' own files: staleness histograms against the simulated twin's,
emulated waits' lateness and real gradients' time, the step sizes of the configs, the master's saturation P*."""

import math

import pandas as pd
import pytest

from experiments.analysis.compute_times import lateness
from experiments.analysis.configs import step_sizes
from experiments.analysis.costs import master_saturation
from experiments.analysis.staleness import histograms, staleness_tv


def test_staleness_tv_compares_each_measured_histogram_with_its_simulated_twin(tmp_path):
    base = {
        "problem": "q",
        "algorithm": "apam",
        "workers": 4,
        "compute": "emulated",
        "compute_base_s": 0.05,
        "status": "ok",
        "seed": 0,
    }
    ok = pd.DataFrame(
        [
            {**base, "run_id": "sim", "clock": "simulated", "engine": "simulated", "transport": "shared_memory"},
            {**base, "run_id": "shm", "clock": "wall", "engine": "shared_memory", "transport": None},
            {**base, "run_id": "gloo", "clock": "wall", "engine": "distributed", "transport": None},
        ]
    )
    hists = pd.DataFrame(
        [("sim", 3, 100), ("shm", 2, 20), ("shm", 3, 60), ("shm", 4, 20), ("gloo", 3, 10)],
        columns=["run_id", "staleness", "count"],
    )
    tv = staleness_tv(ok, hists).set_index("engine")["tau hist TV"]
    assert tv["shared_memory"] == pytest.approx(0.4)  # 0.5 * (0.2 + 0.4 + 0.2)
    assert "distributed" not in tv  # its twin would be a simulated_distributed run, which is absent
    for rid, h in hists.groupby("run_id"):  # the same histograms read from the runs' staleness.csv
        (tmp_path / "runs" / rid).mkdir(parents=True)
        h.drop(columns="run_id").to_csv(tmp_path / "runs" / rid / "staleness.csv", index=False)
    read = histograms(tmp_path)
    assert len(read) == len(hists) and set(read["run_id"]) == {"sim", "shm", "gloo"}
    assert histograms(tmp_path / "none").empty


def test_lateness_is_the_median_overshoot_of_emulated_waits_and_grad_the_real_compute_time(tmp_path):
    run = tmp_path / "runs" / "r1"
    run.mkdir(parents=True)
    (run / "compute_times.csv").write_text(
        "worker,index,compute_s,target_s\n0,0,0.0021,0.002\n0,1,0.0023,0.002\n0,2,0.0022,0.002\n"
    )
    real = tmp_path / "runs" / "r2"
    real.mkdir()
    (real / "compute_times.csv").write_text("worker,index,compute_s,target_s\n0,0,0.0001,\n")
    late = lateness(tmp_path).set_index("run_id")
    assert late.loc["r1", "late us"] == pytest.approx(200.0) and math.isnan(late.loc["r1", "grad us"])
    assert late.loc["r2", "grad us"] == pytest.approx(100.0) and math.isnan(late.loc["r2", "late us"])


def test_step_sizes_are_lr_times_lr_factor_of_each_config(tmp_path):
    for name, lr, factor in (("apam", 1e-4, 1.0), ("async_sgd", 0.05, 1.0), ("async_sgd", 0.05, 2.0)):
        run = tmp_path / "runs" / f"{name}-{factor}"
        run.mkdir(parents=True)
        (run / "config.yaml").write_text(f"algorithm:\n  name: {name}\n  lr: {lr}\n  lr_factor: {factor}\n")
    assert step_sizes(tmp_path) == {"apam": [1e-4], "async_sgd": [0.05, 0.1]}


DAMAGE = [
    (lambda p: p.write_bytes(b"\x98\x01garbage\x00"), "not UTF-8 CSV"),
    (lambda p: p.write_text(""), "not UTF-8 CSV (No columns to parse from file)"),
    (lambda p: p.write_text(p.read_text()[:-5]), "the last row does not end with a newline (truncated)"),
    (lambda p: p.write_text("a,b\n1,2\n"), "no column"),
    (lambda p: p.write_text(p.read_text().replace("0.002\n", "x\n", 1)), "holds a value that is not a number"),
    (lambda p: (p.unlink(), p.mkdir()), "a folder, not a regular file"),
]


@pytest.mark.parametrize("damage, why", DAMAGE)
@pytest.mark.parametrize(
    "name, read",
    [("compute_times.csv", lateness), ("staleness.csv", histograms)],
)
def test_a_runs_damaged_file_is_left_out_and_named_once(tmp_path, capsys, damage, why, name, read):
    """The report reads the runs' files after the runs: one that cannot be read whole (garbage, empty, cut short,
    another format, a cell that is not a number, a folder) is left out with one warning naming it; the other runs
    are read (it was a traceback, or numbers from half a file)."""
    for rid in ("r1", "r2"):
        run = tmp_path / "runs" / rid
        run.mkdir(parents=True)
        (run / "compute_times.csv").write_text("worker,index,compute_s,target_s\n0,0,0.0021,0.002\n0,1,0.0023,0.002\n")
        (run / "staleness.csv").write_text("staleness,count\n0,3\n1,0.002\n")
    bad = tmp_path / "runs" / "r2" / name
    damage(bad)
    frame = read(tmp_path)
    assert set(frame["run_id"]) == {"r1"}
    read(tmp_path)  # a second reader of the same file: not named again
    warnings = [line for line in capsys.readouterr().err.splitlines() if str(bad) in line]
    assert len(warnings) == 1 and why in warnings[0] and warnings[0].endswith("; left out"), warnings


def test_a_damaged_config_says_nothing_of_its_step_size(tmp_path):
    """A config.yaml that is not YAML, not a mapping, or whose lr is not a number: that run says nothing (it was a
    traceback); the others' step sizes stand."""
    for rid, text in [
        ("a", "algorithm: {name: apam, lr: 0.001}\n"),
        ("b", "\x00\x01: [garbage\n"),
        ("c", "- a list\n"),
        ("d", "algorithm: apam\n"),
        ("e", "algorithm: {name: apam, lr: abc}\n"),
    ]:
        (tmp_path / "runs" / rid).mkdir(parents=True)
        (tmp_path / "runs" / rid / "config.yaml").write_text(text)
    assert step_sizes(tmp_path) == {"apam": [0.001]}


def test_master_saturation_from_the_cost_columns():
    # P* = (grad + 2 latency + update + idle) / (update + overhead) = (150 + 2*5 + 5 + 35) / (5 + 35) = 5.0
    runs = pd.DataFrame([dict(cost_grad_s=150e-6, cost_update_s=5e-6, cost_latency_s=5e-6, cost_overhead_s=35e-6)])
    star = master_saturation(runs)
    assert star.workers == pytest.approx(5.0) and star.grad_s == pytest.approx(150e-6) and star.idle_s == 35e-6
    assert master_saturation(runs.drop(columns="cost_grad_s")) is None
