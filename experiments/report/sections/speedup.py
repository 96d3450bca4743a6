"""Sections ``lr_speedup`` (paper Sec. 5.1, its table) and ``lenet5_speedup`` (Sec. 5.2): APAM's speed-up against
the paper's, where the master saturates, and whether the loss or accuracy reached depends on the worker count."""
from __future__ import annotations

from dataclasses import replace

import pandas as pd

from experiments.analysis.costs import master_saturation
from experiments.analysis.speedup import mean_speedup
from experiments.report import rules as R
from experiments.report.load import Experiment
from experiments.report.markdown import table
from experiments.report.sections.accuracy import accuracy_claims
from experiments.report.sections.base import Section, target_note
from experiments.report.sections.targets import targets_table
from experiments.report.verdict import Claim, Verdict, finding, inconclusive, outside

LR_PAPER_EPOCHS = 100     # paper Sec. 5.1: the loss of every thread count is read after 100 epochs


def speedup_rows(data: Experiment, algorithms: list[str]) -> str:
    """Per problem and worker count: the paper's speed-up, and per algorithm its speed-up (time per epoch, time to
    target), final training loss (nats) and test accuracy, means over seeds; then what "to target" means."""
    ok, sp, paper = data.ok, data.speedup, data.paper
    rows = []
    paper_sp = paper[paper["metric"] == "speedup"].set_index("workers")["value"] if not paper.empty else {}
    for prob in sorted(ok["problem"].astype(str).unique()):
        okq = ok[ok["problem"] == prob]
        spq = sp[sp["problem"] == prob] if not sp.empty else sp
        for p in sorted(okq["workers"].unique()):
            row = {"problem": prob, "workers": int(p),
                   "paper speed-up": paper_sp.get(p, float("nan")) if len(paper_sp) else float("nan")}
            for a in algorithms:
                sel = okq[(okq["algorithm"] == a) & (okq["workers"] == p)]
                row[f"{a} speed-up (time/epoch)"] = mean_speedup(spq, a).get(p, float("nan"))
                row[f"{a} speed-up (to target)"] = mean_speedup(spq, a, "time_to_target").get(p, float("nan"))
                row[f"{a} train loss"] = sel["final_train_loss"].mean()
                row[f"{a} test acc"] = sel["final_test_acc"].mean()
            rows.append(row)
    return table(pd.DataFrame(rows)) + target_note(ok)


def linear_claim(sp: pd.DataFrame, algorithm: str, max_workers: int, paper: pd.DataFrame, problem: str | None = None,
                 ok: pd.DataFrame | None = None) -> Claim:
    """Two-sided: our speed-up (time per epoch) against the paper's at each common worker count
    (:func:`experiments.report.rules.compare_to_paper`), inside the claim's regime: where the simulated clock's master
    saturates (the cost model's P*, experiments.analysis.costs.master_saturation, from the P = 1 runs of ``ok``)
    below a worker count, that count is outside it -- this machine's gradient is too cheap for its master there (the
    paper's cost per gradient is paper_timing's test), which says nothing about APAM's speed-up at the paper's cost."""
    if problem is not None and not sp.empty:
        sp = sp[sp["problem"] == problem]
    s = mean_speedup(sp, algorithm)
    s = s[(s.index > 1) & (s.index <= max_workers)]
    star = None
    if ok is not None:
        o = ok[(ok["algorithm"] == algorithm) & (ok["workers"] == 1)]
        star = master_saturation(o[o["problem"] == problem] if problem is not None else o)
    saturated = [int(p) for p in s.index if star is not None and p > star.workers]
    on = f" on {problem}" if problem else ""
    claim = Claim(
        key=f"{algorithm}: speed-up against the paper's{on}", verdict=Verdict.judged(None), evidence="no runs",
        name=f"{algorithm}: speed-up vs the paper's{on}", timed=True, problem=problem,
        text=f"{algorithm}: nearly linear speed-up up to {max_workers} workers{on}, at this machine's gradient cost "
             "(not the paper's: see paper_timing)",
        rule=f"speed-up within {R.PAPER_BAND:.0%} of the paper's at every common worker count up to the cost model's "
             "master saturation P* (above it this machine's master, not APAM, sets the speed-up: outside the claim's "
             "regime; more than 25% above the paper: a finding)")
    if s.empty:
        return claim
    paper_sp = paper[(paper["metric"] == "speedup") & (paper["algorithm"] == algorithm)].set_index("workers")["value"] \
        if not paper.empty else pd.Series(dtype=float)
    comp = R.compare_to_paper(s.drop(saturated), paper_sp)
    verdict, ev = comp.verdict or Verdict.judged(None), comp.evidence
    decided = {"decided_by": f"speed-up at P = {comp.at}", "ours": f"{comp.ours:.2f}",
               "paper": f"{comp.paper:.2f}"} if comp.at is not None else {}
    if saturated:
        why = (f"the master saturates at P* = {star.workers:.1f}, a {star.grad_s * 1e6:.0f} us gradient against "
               f"{(star.update_s + star.overhead_s) * 1e6:.0f} us of master per update, update rule and engine "
               "overhead")
        note = f"P = {', '.join(map(str, saturated))}: {why}"
        compared = [int(p) for p in s.index if p not in saturated and p in paper_sp.index and p != 1]
        if not compared:
            verdict = outside(note)
            decided = {"decided_by": "master saturation P* (workers)", "ours": f"{star.workers:.1f}"}
        elif comp.verdict is not None:  # judged at the unsaturated counts only: the verdict says where
            verdict = verdict.qualified(f"at P = {', '.join(map(str, compared))}; P = "
                                        f"{', '.join(map(str, saturated))} {R.OUTSIDE_WORDS}: {why}")
        ev = f"{ev}; {note}" if compared else f"{note}; all: " + R.compare_to_paper(s, paper_sp).evidence
    return replace(claim, verdict=verdict, evidence=ev, **decided)


def same_loss_claim(ok: pd.DataFrame, algorithm: str, max_workers: int, what: str, col: str = "final_train_loss",
                    tol: float = 0.10, relative: bool = True, min_epochs: float | None = None,
                    name: str = "") -> Claim:
    """``what`` (e.g. the training loss reached is the same at every worker count): the spread of ``col``'s mean over
    the worker counts up to ``max_workers``, relative to the smallest unless ``relative`` is False, is <= ``tol``;
    with ``min_epochs``, judged only after that many epochs (the paper's budget), else outside the regime;
    inconclusive when the runs learned nothing."""
    sel = ok[(ok["algorithm"] == algorithm) & (ok["workers"] <= max_workers)].groupby("workers")[col].mean()
    rule = f"spread {'relative ' if relative else ''}<= {tol:g}" + (
        f" after >= {min_epochs:g} epochs (the paper's budget)" if min_epochs else "")
    claim = Claim(key=f"{algorithm}: {what}", text=what, rule=rule, name=name, verdict=Verdict.judged(None),
                  evidence="fewer than two worker counts")
    if len(sel) < 2:
        return claim
    spread = (sel.max() - sel.min()) / (abs(sel.min()) if relative else 1.0)
    ev = ", ".join(f"P={p}: {v:.4g}" for p, v in sel.items()) + f" (spread {spread:.3g})"
    epochs = float(pd.to_numeric(ok["epochs"], errors="coerce").max())
    if min_epochs and epochs < min_epochs * 0.99:
        return replace(claim, evidence=ev, decided_by="epochs (the paper's budget)", ours=f"{epochs:.3g}",
                       paper=f"{min_epochs:g}",
                       verdict=outside(f"epochs = {epochs:.3g} < {min_epochs:g}, K = {float(ok['updates'].max()):.0f}"))
    learned = R.learned(ok[ok["algorithm"] == algorithm], R.classes(ok))
    return replace(claim, evidence=ev, decided_by=f"loss spread over P (rule <= {tol:g})", ours=f"{spread:.3g}",
                   verdict=Verdict.judged(bool(spread <= tol)) if learned else inconclusive())


def saturation_findings(ok: pd.DataFrame, sp: pd.DataFrame, algorithm: str) -> list[Claim]:
    """Where the master saturates, per problem: predicted by the cost model, P* = cycle / master_s with cycle = grad
    + 2 latency + update + idle overhead (a waiting master serves it) and master_s = update + overhead (gradients
    queue: experiments.clock.costmodel.saturation_workers), and seen: the first P whose efficiency is < 0.8."""
    out = []
    one = ok[(ok["algorithm"] == algorithm) & (ok["workers"] == 1)]
    for prob, o in one.groupby("problem"):
        star = master_saturation(o)
        if star is None:
            continue
        g, u, lat, over, idle = star.grad_s, star.update_s, star.latency_s, star.overhead_s, star.idle_s
        s = mean_speedup(sp[sp["problem"] == prob] if not sp.empty else sp, algorithm)
        low = [int(p) for p, v in s.items() if p > 1 and v / p < 0.8]
        seen = (f"first P with efficiency < 0.8: {min(low)}" if low
                else f"efficiency >= 0.8 up to P = {int(s.index.max())}" if len(s) else "no speed-up rows")
        out.append(Claim(
            key=f"finding: master saturation ({prob})", verdict=finding(), timed=True, problem=prob,
            text=f"finding ({prob}): the master saturates at P* = (grad + 2 latency + update + idle overhead) / "
                 f"master = {star.workers:.1f} workers (cost model: gradient {g * 1e6:.0f} us, latency "
                 f"{lat * 1e6:.0f} us, master {(u + over) * 1e6:.0f} us = update {u * 1e6:.0f} + overhead "
                 f"{over * 1e6:.0f}, {(u + idle) * 1e6:.0f} us when it waited for the gradient)",
            evidence=f"seen in the simulation: {seen}; speed-up ceiling {s.max():.2f}x" if len(s) else seen,
            decided_by="master saturation P* (workers)", ours=f"{star.workers:.1f}"))
    return out


def section_lr_speedup(data: Experiment) -> Section:
    """Paper Sec. 5.1 (its table): per problem, APAM's speed-up against the paper's up to 32 workers, the training
    loss reached at every worker count (judged at the paper's 100 epochs), and where the master saturates."""
    ok, sp = data.ok, data.speedup
    claims = []
    for prob in sorted(ok["problem"].astype(str).unique()):
        okq = ok[ok["problem"] == prob]
        claims.append(linear_claim(sp, "apam", 32, data.paper, problem=prob, ok=ok))
        claims.append(same_loss_claim(
            okq, "apam", 32, f"the training loss reached is the same at every worker count ({prob}; judged at the "
            "paper's budget, where its own P = 16, 32 exceed K^(1/4) too)", min_epochs=LR_PAPER_EPOCHS,
            name=f"apam: same training loss at every P ({prob})"))
    claims += saturation_findings(ok, sp, "apam")
    return Section(speedup_rows(data, ["apam"]), tuple(claims))


def section_lenet5_speedup(data: Experiment) -> Section:
    """Paper Sec. 5.2: APAM's speed-up against the paper's up to 20 workers, where the master saturates, the test
    accuracy kept at every worker count and APAM against async SGD (experiments.report.sections.accuracy)."""
    ok, sp = data.ok, data.speedup
    algs = [a for a in ("apam", "async_sgd", "sync_amsgrad") if a in set(data.summary["algorithm"])]
    claims = [linear_claim(sp, "apam", 20, data.paper, ok=ok), *saturation_findings(ok, sp, "apam"),
              *accuracy_claims(ok, data.paper, data.traces, 20, "paper: ~99.0% on MNIST after 200 epochs",
                               data.steps, data.tuning)]
    return Section(speedup_rows(data, algs) + targets_table(ok, data.traces, algs), tuple(claims))
