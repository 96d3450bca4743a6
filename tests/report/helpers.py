"""Synthetic summaries and traces for the report's tests."""

import pandas as pd


def run(
    alg,
    p,
    seed,
    acc,
    *,
    updates=30000,
    staleness=None,
    delay="timing",
    max_delay=0,
    problem="lenet5_fmnist",
    epochs=20.0,
    loss=0.3,
    tpe=1.0,
):
    """One summary row of a finished run."""
    return {
        "experiment": "e",
        "run_id": f"{alg}-{p}-{max_delay}-{seed}",
        "problem": problem,
        "algorithm": alg,
        "engine": "simulated",
        "clock": "simulated",
        "workers": p,
        "delay_model": delay,
        "max_delay": max_delay,
        "tau": None,
        "seed": seed,
        "epochs": epochs,
        "updates": updates,
        "final_test_acc": acc,
        "final_train_loss": loss,
        "time_per_epoch_s": tpe,
        "status": "ok",
        "batch_size": 40,
        "staleness_mean": float(p - 1) if staleness is None else staleness,
        "staleness_max": float(p - 1) if staleness is None else staleness,
    }


def write_summary(summary, exp):
    """``summary`` as ``exp/summary.csv``, a summary as the runner writes it: every column of the contract
    (experiments/store/table.py SUMMARY_COLUMNS; those not given empty: not measured), and its runs the experiment's
    the folder is named for (the readers refuse another experiment's runs in it)."""
    from experiments.store.table import SUMMARY_COLUMNS

    summary = summary.assign(experiment=exp.name)
    columns = [*SUMMARY_COLUMNS, *(c for c in summary if c not in SUMMARY_COLUMNS)]
    summary.reindex(columns=columns).to_csv(exp / "summary.csv", index=False)


def trace(run_ids, accs):
    """One trace per run: test accuracy ``accs`` at epochs 1..len(accs)."""
    return pd.DataFrame(
        [{"run_id": r, "epoch": float(e + 1), "test_acc": a} for r in run_ids for e, a in enumerate(accs)]
    )


FLAT = [0.80, 0.86, 0.88, 0.890, 0.891, 0.891, 0.892, 0.892]  # gains 0.002 over the last quarter
RISING = [0.50, 0.60, 0.65, 0.70, 0.74, 0.78, 0.82, 0.86]  # gains 0.08


def lenet(seeds=3, workers=(1, 2, 5, 10, 20), updates=30000, apam=0.89, sgd=0.87):
    """A LeNet5 sweep of APAM and async SGD: every worker count and seed at the given accuracies."""
    return pd.DataFrame(
        [
            run(a, p, s, apam if a == "apam" else sgd, updates=updates)
            for a in ("apam", "async_sgd")
            for p in workers
            for s in range(seeds)
        ]
    )


def delays(K, delays=(0, 5, 20, 100, 200, 400), seeds=3, acc=0.89):
    """An artificial-delay sweep: APAM at P = 1 with uniform max delays, K updates, the same accuracy."""
    return pd.DataFrame(
        [
            run("apam", 1, s, acc, updates=K, delay="uniform", max_delay=d, staleness=min(d, K))
            for d in delays
            for s in range(seeds)
        ]
    )
