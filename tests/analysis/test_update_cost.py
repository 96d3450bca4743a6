"""The update-cost table (experiments/analysis/update_cost.py) and the benchmark that writes it
(benchmarks/bench_update_cost.py), on a tiny dimension."""

from __future__ import annotations

import importlib.util

from conftest import REPO
from experiments.analysis.update_cost import COLUMNS, update_cost_table


def _bench():
    spec = importlib.util.spec_from_file_location("bench_update_cost", REPO / "benchmarks" / "bench_update_cost.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_benchmark_times_each_option_with_its_policy_work_and_the_table_reads_it(tmp_path):
    bench = _bench()
    assert {"apam", "apam_koloskova", "rennala_sgd", "sync_amsgrad", "ringmaster_asgd"} <= set(bench.options())
    rows = [bench.measure(a, "logreg_fmnist", 64, repeats=5) for a in ("apam", "apam_wu", "rennala_sgd")]
    assert [r["gradients_per_update"] for r in rows] == [1, 1, bench.WORKERS]  # Rennala: S = P gradients an update
    assert rows[0]["variant"] == "paper" and rows[1]["policy"] == "wu2022" and rows[1]["scale"] == "step"
    assert all(r["p10_us"] <= r["median_us"] <= r["p90_us"] for r in rows)
    out = tmp_path / "cost.csv"
    with open(out, "w") as f:
        f.write(",".join(bench.COLUMNS) + "\n")
        f.writelines(
            ",".join(str(r[c]) for c in bench.COLUMNS) + "\n" for r in rows + [dict(rows[0], d=128, median_us=9.0)]
        )
    table = update_cost_table(out, problem="logreg_fmnist", d=64)
    assert list(table.columns) == list(COLUMNS) and list(table["algorithm"]) == ["apam", "apam_wu", "rennala_sgd"]
    assert table.loc[2, "us_per_gradient"] == rows[2]["us_per_gradient"]
    wide = update_cost_table(out, wide=True)
    assert wide.set_index("algorithm").loc["apam", "median_us@128"] == 9.0
    assert update_cost_table(tmp_path / "missing.csv").empty
