"""Comparisons a reviewer accepts, as the report shows them: async_methods' tables (targets set by the serial runs,
times and losses with bootstrap intervals, shared ranks, identical methods merged, the tuned values and the choices
at an edge), APAM against async SGD judged by intervals on tuned runs, the async_methods figure, and
``python -m experiments.report DIR`` on a folder of tiny tuned async_methods runs."""

import subprocess
import sys

import pandas as pd
import pytest

from conftest import HAS_FMNIST, REPO
from experiments import reproduce
from experiments.report.load import Experiment
from experiments.report.sections.accuracy import accuracy_claims
from experiments.report.sections.async_methods import section_async_methods
from experiments.report.verdict import FINDING, INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED
from helpers import FLAT, lenet, trace
from mdtable import row

needs_fmnist = pytest.mark.skipif(not HAS_FMNIST, reason="Fashion-MNIST not staged (make data)")


def _summary_and_traces():
    """P = 1 reference runs of apam, and under equal compute at P = 8 apam and apam_ringmaster identical (R = P:
    nothing discarded), async SGD slower; 5 seeds, loss curves falling linearly over 10 epochs."""
    rows, traces = [], []
    for alg, p, slope in [("apam", 1, 0.06), ("apam", 8, 0.07), ("apam_ringmaster", 8, 0.07), ("async_sgd", 8, 0.02)]:
        for s in range(5):
            rid = f"{alg}-{p}-{s}"
            curve = [1.0 - slope * (1 + 0.01 * s) * e for e in range(11)]
            rows.append(
                {
                    "run_id": rid,
                    "experiment": "async_methods",
                    "problem": "q",
                    "algorithm": alg,
                    "engine": "simulated",
                    "clock": "simulated",
                    "workers": p,
                    "seed": s,
                    "status": "ok",
                    "epochs": 10.0,
                    "batch_size": 64,
                    "final_train_loss": curve[-1],
                    "time_s": 10.0 / p,
                    "updates": 100,
                    "gradients": 100,
                    "discarded": 0,
                    "time_to_target_s": float("nan"),
                    "target_loss": 0.5,
                    "lr_factor": 4.0 if alg != "async_sgd" else 16.0,
                    "policy_R": 8.0 if alg == "apam_ringmaster" else float("nan"),
                    "compute_spread": "equal",
                    "compute_law": "constant",
                    "straggler_sigma": 0.0,
                    "straggler_slowdown": 1.0,
                    "policy": "ringmaster" if alg == "apam_ringmaster" else "none",
                }
            )
            traces += [
                {
                    "run_id": rid,
                    "epoch": float(e),
                    "time_s": e / p,
                    "updates": 10 * e,
                    "train_loss": v,
                    "test_acc": 0.5,
                    "problem": "q",
                    "algorithm": alg,
                    "engine": "simulated",
                    "clock": "simulated",
                    "workers": p,
                    "seed": s,
                }
                for e, v in enumerate(curve)
            ]
    tuning = pd.DataFrame(
        [
            {
                "setting": f"{a}-{p}",
                "problem": "q",
                "algorithm": a,
                "workers": p,
                "straggler_sigma": 0.0,
                "straggler_slowdown": 1.0,
                "compute_spread": "equal",
                "compute_law": "constant",
                "tuning_seed": 100,
                "lr_factor": f,
                k: v,
                "at_edge": e,
                "factors_tried": tried,
                "policy_tried": pt,
                "trials": n,
            }
            for a, p, f, k, v, e, tried, pt, n in [
                ("apam", 1, 4.0, "S", "", "", "0.25;1;4;16", "", 4),
                ("apam", 8, 4.0, "S", "", "", "0.25;1;4;16", "", 4),
                ("apam_ringmaster", 8, 4.0, "R", 8, "", "0.25;1;4;16", "1;2;4;8", 7),
                ("async_sgd", 8, 16.0, "S", "", "high", "1;4;16", "", 3),
            ]
        ]
    )
    return pd.DataFrame(rows), pd.DataFrame(traces), tuning


def test_async_methods_section_shows_targets_intervals_shared_ranks_merged_methods_and_edges():
    summary, traces, tuning = _summary_and_traces()
    section = section_async_methods(Experiment("async_methods", summary, given={"traces": traces, "tuning": tuning}))
    text = section.body
    # the reference's mean slope 0.06 x 1.02: 1 - 5 x 0.0612 and 1 - 9 x 0.0612
    assert "q: T(1/2) = 0.694, T(9/10) = 0.4492 (reference apam at P = 1, 5 seed(s), 10 epochs" in text
    merged = row(text, "apam = apam_ringmaster")
    assert merged[0] == "apam = apam_ringmaster" and merged[1].endswith("#1") and "[" in merged[1]
    assert merged[4:6] == ["4", "R=8"]
    assert row(text, "async_sgd")[2] == "not reached #2"  # T(9/10): async SGD never gets that far
    assert (
        "Identical runs, one row (the same losses and times to the last bit on every seed): "
        "apam = apam_ringmaster." in text
    )
    assert (
        "**Choices at an edge the extension could not leave (1; " in text
        and "q async_sgd P = 8 equal: x16 (high)" in text
    )
    [claim] = section.claims
    assert claim.verdict.cls == FINDING and claim.ours == "mean rank 1.0"
    assert "identical to apam_ringmaster" in claim.evidence


def test_apam_against_async_sgd_is_judged_by_intervals_on_tuned_runs():
    tuning = pd.DataFrame(
        [
            {"algorithm": a, "workers": p, "lr_factor": f, "tuning_seed": 100}
            for a, f in (("apam", 4.0), ("async_sgd", 0.25))
            for p in (1, 2, 5, 10, 20)
        ]
    )

    def better(ok, tuned=tuning):
        claims = accuracy_claims(
            ok,
            pd.DataFrame(),
            trace(ok[ok.workers == 1].run_id, FLAT),
            20,
            "note",
            {"apam": [4e-4], "async_sgd": [0.0125]},
            tuned,
        )
        return {c.key: c for c in claims}["APAM more accurate than async SGD"]

    ok = lenet(seeds=5)
    rng = pd.Series(range(len(ok))) % 5 * 0.002  # seeds spread by 0.008
    ok["final_test_acc"] = ok["final_test_acc"] + rng.to_numpy()
    c = better(ok)  # 0.89-0.898 against 0.87-0.878: apart at every worker count
    assert c.verdict.cls == REPRODUCED and c.ours == "4 of 4" and "(ahead)" in c.evidence
    assert "step factors tuned per worker count on seed 100: apam P=1 x4" in c.evidence
    close = ok.copy()
    close.loc[close.algorithm == "async_sgd", "final_test_acc"] += 0.018  # 0.888-0.896: the intervals overlap
    c = better(close)
    assert c.verdict.cls == INCONCLUSIVE and "overlap at 4 of 4 worker counts" in str(c.verdict)
    behind = ok.copy()
    behind.loc[behind.algorithm == "async_sgd", "final_test_acc"] += 0.05
    assert better(behind).verdict.cls == NOT_REPRODUCED
    untuned = better(ok, None)
    assert untuned.verdict.cls == REPRODUCED and "step sizes not tuned" in str(untuned.verdict)


def test_the_figure_draws_intervals_and_ranks(tmp_path):
    from plots.async_methods import draw_async_methods
    from plots.data import ExperimentData

    summary, traces, _ = _summary_and_traces()
    written = draw_async_methods(ExperimentData(path=tmp_path, name="async_methods", summary=summary, traces=traces))
    assert [p.name for p in written] == ["async_methods-q.png"] and written[0].stat().st_size > 0


@needs_fmnist
def test_report_command_on_a_folder_of_tiny_tuned_async_methods_runs(tmp_path):
    """Serial reference runs, then apam and apam_mishchenko at P = 2 (identical under equal compute), each tuned on
    seed 100 over 4^-1..4^1 on fixed simulated costs, 2 reported seeds; then ``python -m experiments.report``."""
    common = [
        "lr_tuning_seed=100",
        "tuning.steps=1",
        "tuning.extend=0",
        "compute_model=equal",
        "problem=logreg_fmnist",
        "problem.max_train=1000",
        "problem.max_test=100",
        "by_kind.epochs.logreg=1",
        "by_kind.eval_every.logreg=0.02",
        "problem.target_loss=0.45",
        "seed=0,1",
        "progress=false",
        "engine.costs.grad_s=0.001",
        "engine.costs.update_s=0.00001",
        "engine.costs.latency_s=0.00001",
        "engine.costs.overhead_s=0.00001",
    ]
    for extra in (["workers=1", "algorithm=apam"], ["workers=2", "algorithm=apam,apam_mishchenko"]):
        st = reproduce.run_experiment("async_methods", "smoke", tmp_path, False, 1, common + extra)
        assert st["status"] == "ran", st
    proc = subprocess.run(
        [sys.executable, "-m", "experiments.report", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    report = (tmp_path / "REPORT.md").read_text()
    section = report.split('<a id="async_methods"></a>')[1]
    assert "Targets, set by the runs" in section and "reference apam at P = 1, 2 seed(s)" in section
    assert "**logreg_fmnist, P = 2, equal** (2 seeds;" in section
    assert "apam = apam_mishchenko" in section  # identical runs, one row
    assert "Step sizes tuned on seed 100" in section and "The tuned values (tuning.csv)" in section
    verdicts = pd.read_csv(tmp_path / "verdicts.csv")
    assert list(verdicts["name"]) == ["finding: APAM's rank (logreg_fmnist, P=2)"]
    assert not (tmp_path / "async_methods" / "tuning" / "REPORT.md").exists()


def _replicated(faster: str | None = None):
    """The runs of :func:`_summary_and_traces` and a replication of them on seeds 5-9 (``faster``: a method whose
    replication curves fall four times as fast, which moves it up the ranking)."""
    summary, traces, tuning = _summary_and_traces()
    s2, t2 = summary.copy(), traces.copy()
    for frame in (s2, t2):
        frame["seed"] += 5
        frame["run_id"] = frame["run_id"] + "-new"
    if faster is not None:
        t2.loc[t2["algorithm"] == faster, "train_loss"] = 1.0 - 4 * (1.0 - t2["train_loss"])
        s2.loc[s2["algorithm"] == faster, "final_train_loss"] = 1.0 - 4 * (1.0 - s2["final_train_loss"])
    return pd.concat([summary, s2], ignore_index=True), pd.concat([traces, t2], ignore_index=True), tuning


@pytest.mark.parametrize("faster,holds", [(None, True), ("async_sgd", False)])
def test_a_replication_on_new_seeds_is_checked_apart_from_the_reported_seeds(faster, holds):
    """Seeds in the yaml's report.replication_seeds (async_methods: 5-9) stay out of the tables and are ranked on
    their own, with targets from their own serial runs; the goal holds when the top three keep their order."""
    summary, traces, tuning = _replicated(faster)
    section = section_async_methods(Experiment("async_methods", summary, given={"traces": traces, "tuning": tuning}))
    s0, t0, _ = _summary_and_traces()
    alone = section_async_methods(Experiment("async_methods", s0, given={"traces": t0, "tuning": tuning}))
    assert "(5 seeds;" in section.body and "10 seeds" not in section.body  # the tables: the reported seeds only
    assert section.body.split("**Replication on new seeds**")[0] == alone.body.split("\nStep sizes tuned")[0]
    goal = next(c for c in section.claims if c.name == "goal: top three kept on five new seeds")
    assert goal.verdict.cls == (REPRODUCED if holds else NOT_REPRODUCED)
    if holds:
        assert "- q, P = 8 (5 new seeds): the same top 3 in the same order (apam, apam_ringmaster, async_sgd)." in (
            section.body
        )
    else:
        assert "async_sgd" in goal.evidence or "fails" in goal.evidence
        assert "change places" in section.body
