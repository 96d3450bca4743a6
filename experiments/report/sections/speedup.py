"""Sections ``lr_speedup`` (paper Sec. 5.1, its table) and ``lenet5_speedup`` (Sec. 5.2): APAM's speed-up against
the paper's, where the master saturates, and whether the loss or accuracy reached depends on the worker count."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from experiments.analysis.costs import master_saturation
from experiments.report import measured as M
from experiments.report import rules as R
from experiments.report.load import Experiment
from experiments.report.markdown import table
from experiments.report.sections.accuracy import accuracy_claims
from experiments.report.sections.base import Section, target_note
from experiments.report.sections.targets import targets_table
from experiments.report.verdict import NOT_MEASURABLE, Claim, Verdict, finding, inconclusive, outside

LR_PAPER_EPOCHS = 100  # paper Sec. 5.1: the loss of every thread count is read after 100 epochs


def _agents(ok: pd.DataFrame) -> pd.Series:
    """The compute agents of each summary row (``agents``; older rows: their workers)."""
    a = pd.to_numeric(ok["agents"], errors="coerce") if "agents" in ok else pd.Series(float("nan"), index=ok.index)
    return a.fillna(pd.to_numeric(ok["workers"], errors="coerce"))


def speedup_rows(data: Experiment, algorithms: list[str], unit: str = "workers") -> str:
    """Per problem and compute-agent count (``unit``: ``threads`` where the master computes too, else ``workers``):
    the workers, the cores a measurement needs, the paper's speed-up, and per algorithm its measured speed-up (time
    per epoch, wall clock, only where every process had a core: experiments.report.measured), the dedicated-core
    clock's prediction (time per epoch, time to target), the simulated clock's on this machine's cores, final
    training loss (nats) and test accuracy (means over seeds and engines); then what "to target" means."""
    ok, sp, paper = data.ok, data.speedup, data.paper
    rows = []
    paper_sp = paper[paper["metric"] == "speedup"].set_index("workers")["value"] if not paper.empty else {}
    agents = _agents(ok)
    cores = M.machine_cores(sp)
    for prob in sorted(ok["problem"].astype(str).unique()):
        okq = ok[ok["problem"] == prob]
        spq = sp[sp["problem"] == prob] if not sp.empty else sp
        counts = {a: M.agent_counts(spq, a, cores=cores) for a in algorithms}
        targets = {a: M.agent_counts(spq, a, "time_to_target", cores=cores) for a in algorithms}
        for p in sorted(agents[okq.index].unique()):
            at = okq[agents[okq.index] == p]
            workers = int(pd.to_numeric(at["workers"]).min())
            row = {
                "problem": prob,
                unit: int(p),
                "workers": workers,
                "cores needed": workers + 1,
                "paper speed-up": paper_sp.get(p, float("nan")) if len(paper_sp) else float("nan"),
            }
            for a in algorithms:
                sel = at[at["algorithm"] == a]
                c = counts[a].get(int(p), M.Count(int(p), workers))
                row[f"{a} measured"] = c.measured if c.measurable or p == 1 else float("nan")
                row[f"{a} predicted (dedicated cores)"] = c.predicted
                row[f"{a} predicted to target"] = targets[a].get(int(p), M.Count(int(p), workers)).predicted
                if cores is not None:
                    row[f"{a} on this machine's {cores} cores"] = c.shared
                row[f"{a} train loss"] = sel["final_train_loss"].mean()
                row[f"{a} test acc"] = sel["final_test_acc"].mean()
            rows.append(row)
    df = pd.DataFrame(rows)
    df = df.drop(columns=[c for c in df.columns if c.endswith(("measured", "cores")) and df[c].isna().all()])
    note = (
        f"\nSpeed-ups are relative to one compute agent. *Measured*: wall-clock runs, only where every process "
        f"had a core ({'the master and the workers' if unit == 'workers' else 'the master and threads - 1 workers'}"
        f": `cores needed` <= this machine's {cores if cores is not None else '(not recorded)'}); *predicted*: the "
        "simulated clock on a core per process (the paper's machines)"
        + (
            "; *on this machine's cores*: the simulated clock with the processes sharing this machine's cores"
            if any(c.endswith("cores") and c != "cores needed" for c in df.columns)
            else ""
        )
        + ".\n"
    )
    return table(df) + note + target_note(ok)


def linear_claim(
    sp: pd.DataFrame,
    algorithm: str,
    max_agents: int,
    paper: pd.DataFrame,
    problem: str | None = None,
    ok: pd.DataFrame | None = None,
    validation: pd.DataFrame | None = None,
    threads: bool = False,
) -> Claim:
    """Two-sided, measured: our wall-clock speed-up (time per epoch, relative to one compute agent) against the
    paper's at each common count up to ``max_agents`` where every process had a core (experiments.report.measured),
    by :func:`experiments.report.rules.compare_to_paper`; counts are the authors' threads (workers + the master, which
    computes too; paper Sec. 5.1) with ``threads``, else workers (Sec. 5.2). Inside the claim's regime only: where the
    cost model's master saturates (P*, experiments.analysis.costs.master_saturation, from the one-agent runs of
    ``ok``) below a worker count, that count is outside it -- this machine's gradient is too cheap for its master
    there (the paper's cost per gradient is paper_timing's test).

    A count whose processes outnumber this machine's cores is not measurable here: its evidence is the dedicated-core
    clock's prediction beside model_validation's error for the problem, protocol and engine (``validation``:
    experiments.report.clock.validation_rows). When no count beyond one agent is measurable the verdict is ``not
    measurable here`` with the prediction as its number; when one is measurable but was not measured, or the cores
    were not recorded, ``inconclusive``. A simulated speed-up never gives ``reproduced`` or ``above the paper``."""
    if problem is not None and not sp.empty:
        sp = sp[sp["problem"] == problem]
    unit = "threads" if threads else "workers"
    counts = M.agent_counts(sp, algorithm)
    beyond = {a: c for a, c in counts.items() if 1 < a <= max_agents}
    on = f" on {problem}" if problem else ""
    mapping = " (the authors' threads: the workers and the master, which computes gradients too)" if threads else ""
    claim = Claim(
        key=f"{algorithm}: speed-up against the paper's{on}",
        verdict=Verdict.judged(None),
        evidence="no runs",
        name=f"{algorithm}: speed-up vs the paper's{on}",
        timed=True,
        problem=problem,
        text=f"{algorithm}: nearly linear speed-up up to {max_agents} {unit}{mapping}{on}, at this machine's gradient "
        "cost (not the paper's: see paper_timing)",
        rule=f"measured (wall-clock) speed-up within {R.PAPER_BAND:.0%} of the paper's at every common count of "
        f"{unit} where every process had a core (workers + 1 <= cores) and below the cost model's master "
        "saturation P* (above it this machine's master, not APAM, sets the speed-up: outside the claim's "
        "regime); a count needing more cores than this machine has is not measurable here (the simulated "
        "clock's prediction on a core per process stands beside model_validation's error); more than 25% "
        "above the paper: a finding",
    )
    if not beyond:
        return claim
    paper_sp = (
        paper[(paper["metric"] == "speedup") & (paper["algorithm"] == algorithm)].set_index("workers")["value"]
        if not paper.empty
        else pd.Series(dtype=float)
    )
    star = None
    if ok is not None and not ok.empty:
        o = ok[(ok["algorithm"] == algorithm) & (_agents(ok) == 1)]
        o = o[o["problem"] == problem] if problem is not None else o
        sim = o[o["clock"].astype(str) == "simulated"] if "clock" in o else o
        star = master_saturation(sim if len(sim) else o)
    judged = {a: c for a, c in beyond.items() if c.judged}
    saturated = [a for a, c in judged.items() if star is not None and c.workers > star.workers]
    too_few = [c for c in beyond.values() if c.too_few_cores]
    unmeasured = [a for a, c in beyond.items() if not c.judged and not c.too_few_cores]
    engines = M.transports(sp)
    valid = M.validation_note(
        validation,
        [problem] if problem else sorted(set(sp["problem"].astype(str))) if not sp.empty else [],
        [algorithm],
        engines,
    )
    paper_at = {a: (f" vs paper {float(paper_sp[a]):.2f}" if a in paper_sp.index else "") for a in beyond}
    predicted = "; ".join(
        f"P={a}: {M.unjudged(c)}, predicted {c.predicted:.2f}{paper_at[a]} (dedicated cores)"
        for a, c in sorted(beyond.items())
        if not c.judged
    )
    comp = R.compare_to_paper(
        pd.Series({a: c.measured for a, c in judged.items() if a not in saturated}, dtype=float), paper_sp
    )
    why = (
        f"the master saturates at P* = {star.workers:.1f}, a {star.grad_s * 1e6:.0f} us gradient against "
        f"{(star.update_s + star.overhead_s) * 1e6:.0f} us of master per update, update rule and engine overhead"
        if saturated
        else ""
    )
    if comp.verdict is not None:  # decided by measurement where it can be
        parts = [f"measured at {M.counts_text(a for a in judged if a not in saturated)}"]
        if saturated:
            parts.append(
                f"{M.counts_text(saturated)} {R.OUTSIDE_WORDS}: the master saturates at P* = {star.workers:.1f}"
            )
        if too_few:
            parts.append(f"{M.NOT_MEASURABLE_WORDS}: {M.needs_cores(too_few)}")
        if unmeasured:
            parts.append(f"no wall-clock run at {M.counts_text(unmeasured)}")
        return replace(
            claim,
            verdict=comp.verdict.qualified("; ".join(parts)),
            measured=True,
            evidence="measured "
            + comp.evidence
            + (f"; {M.counts_text(saturated)}: {why}" if why else "")
            + (f"; {predicted}; {valid}" if predicted else ""),
            decided_by=f"measured speed-up at P = {comp.at}",
            ours=f"{comp.ours:.2f}",
            paper=f"{comp.paper:.2f}",
        )
    if judged and len(saturated) == len(judged):  # every measured count is outside the claim's regime
        more = f"; {M.NOT_MEASURABLE_WORDS}: {M.needs_cores(too_few)}" if too_few else ""
        return replace(
            claim,
            verdict=outside(f"{M.counts_text(saturated)}: {why}{more}"),
            measured=True,
            evidence="measured "
            + ", ".join(f"P={a}: {c.measured:.2f}" for a, c in judged.items())
            + (f"; {predicted}; {valid}" if predicted else ""),
            decided_by="master saturation P* (workers)",
            ours=f"{star.workers:.1f}",
        )
    shown = M.pick_prediction(beyond, paper_sp)
    if too_few and not unmeasured and not judged:
        verdict = Verdict(NOT_MEASURABLE, M.needs_cores(too_few))
    else:
        verdict = inconclusive(
            "; ".join(
                x
                for x in (
                    f"no wall-clock run at {M.counts_text(unmeasured)}" if unmeasured else "",
                    "the cores were not recorded" if beyond and next(iter(beyond.values())).cores is None else "",
                    f"{M.NOT_MEASURABLE_WORDS}: {M.needs_cores(too_few)}" if too_few else "",
                )
                if x
            )
        )
    decided = (
        {
            "decided_by": f"predicted speed-up at P = {shown.agents} (dedicated cores)",
            "ours": f"{shown.predicted:.2f}",
            "paper": f"{float(paper_sp[shown.agents]):.2f}" if shown.agents in paper_sp.index else "",
        }
        if shown is not None
        else {}
    )
    return replace(claim, verdict=verdict, evidence=f"{predicted}; {valid}", **decided)


def same_loss_claim(
    ok: pd.DataFrame,
    algorithm: str,
    max_workers: int,
    what: str,
    col: str = "final_train_loss",
    tol: float = 0.10,
    relative: bool = True,
    min_epochs: float | None = None,
    name: str = "",
) -> Claim:
    """``what`` (e.g. the training loss reached is the same at every worker count): the spread of ``col``'s mean over
    the worker counts up to ``max_workers``, relative to the smallest unless ``relative`` is False, is <= ``tol``;
    with ``min_epochs``, judged only after that many epochs (the paper's budget), else outside the regime;
    inconclusive when the runs learned nothing."""
    sel = ok[(ok["algorithm"] == algorithm) & (ok["workers"] <= max_workers)].groupby("workers")[col].mean()
    rule = f"spread {'relative ' if relative else ''}<= {tol:g}" + (
        f" after >= {min_epochs:g} epochs (the paper's budget)" if min_epochs else ""
    )
    claim = Claim(
        key=f"{algorithm}: {what}",
        text=what,
        rule=rule,
        name=name,
        verdict=Verdict.judged(None),
        evidence="fewer than two worker counts",
    )
    if len(sel) < 2:
        return claim
    spread = (sel.max() - sel.min()) / (abs(sel.min()) if relative else 1.0)
    ev = ", ".join(f"P={p}: {v:.4g}" for p, v in sel.items()) + f" (spread {spread:.3g})"
    epochs = float(pd.to_numeric(ok["epochs"], errors="coerce").max())
    if min_epochs and epochs < min_epochs * 0.99:
        return replace(
            claim,
            evidence=ev,
            decided_by="epochs (the paper's budget)",
            ours=f"{epochs:.3g}",
            paper=f"{min_epochs:g}",
            verdict=outside(f"epochs = {epochs:.3g} < {min_epochs:g}, K = {float(ok['updates'].max()):.0f}"),
        )
    learned = R.learned(ok[ok["algorithm"] == algorithm], R.classes(ok))
    return replace(
        claim,
        evidence=ev,
        decided_by=f"loss spread over P (rule <= {tol:g})",
        ours=f"{spread:.3g}",
        verdict=Verdict.judged(bool(spread <= tol)) if learned else inconclusive(),
    )


def threads_mapping(ok: pd.DataFrame) -> bool:
    """Do the runs count the authors' threads (``master_computes``: the master computes gradients too, so a run's
    compute agents are its workers + 1; paper Sec. 5.1)?"""
    return "master_computes" in ok and ok["master_computes"].astype(str).str.lower().eq("true").any()


def saturation_findings(ok: pd.DataFrame, sp: pd.DataFrame, algorithm: str) -> list[Claim]:
    """Where the master saturates, per problem: predicted by the cost model (from the one-agent simulated runs' cost
    columns), P* = cycle / master_s with cycle = grad + 2 latency + update + idle overhead (a waiting master serves
    it) and master_s = update + overhead (gradients queue: experiments.clock.costmodel.saturation_workers), and seen
    on the dedicated-core clock: the first count whose efficiency is < 0.8."""
    out = []
    one = ok[(ok["algorithm"] == algorithm) & (_agents(ok) == 1)]
    if "clock" in one and (one["clock"].astype(str) == "simulated").any():
        one = one[one["clock"].astype(str) == "simulated"]
    for prob, o in one.groupby("problem"):
        star = master_saturation(o)
        if star is None:
            continue
        g, u, lat, over, idle = star.grad_s, star.update_s, star.latency_s, star.overhead_s, star.idle_s
        counts = M.agent_counts(sp[sp["problem"] == prob] if not sp.empty else sp, algorithm)
        s = pd.Series({a: c.predicted for a, c in counts.items()}, dtype=float).dropna()
        low = [int(p) for p, v in s.items() if p > 1 and v / p < 0.8]
        seen = (
            f"first P with efficiency < 0.8: {min(low)}"
            if low
            else f"efficiency >= 0.8 up to P = {int(s.index.max())}"
            if len(s)
            else "no speed-up rows"
        )
        out.append(
            Claim(
                key=f"finding: master saturation ({prob})",
                verdict=finding(),
                timed=True,
                problem=prob,
                text=f"finding ({prob}): the master saturates at P* = (grad + 2 latency + update + idle overhead) / "
                f"master = {star.workers:.1f} workers (cost model: gradient {g * 1e6:.0f} us, latency "
                f"{lat * 1e6:.0f} us, master {(u + over) * 1e6:.0f} us = update {u * 1e6:.0f} + overhead "
                f"{over * 1e6:.0f}, {(u + idle) * 1e6:.0f} us when it waited for the gradient)",
                evidence=f"seen in the simulation on a core per process: {seen}; speed-up ceiling {s.max():.2f}x"
                if len(s)
                else seen,
                decided_by="master saturation P* (workers)",
                ours=f"{star.workers:.1f}",
            )
        )
    return out


def section_lr_speedup(data: Experiment) -> Section:
    """Paper Sec. 5.1 (its table): per problem, APAM's speed-up against the paper's up to 32 threads (the authors'
    mapping where the runs have the master compute, :func:`threads_mapping`), measured where every process had a
    core and predicted elsewhere (:func:`linear_claim`), the training loss reached at every worker count (judged at
    the paper's 100 epochs), and where the master saturates."""
    ok, sp = data.ok, data.speedup
    threads = threads_mapping(ok)
    claims = []
    for prob in sorted(ok["problem"].astype(str).unique()):
        okq = ok[ok["problem"] == prob]
        claims.append(
            linear_claim(sp, "apam", 32, data.paper, problem=prob, ok=ok, validation=data.validation, threads=threads)
        )
        claims.append(
            same_loss_claim(
                okq,
                "apam",
                32,
                f"the training loss reached is the same at every worker count ({prob}; judged at the "
                "paper's budget, where its own P = 16, 32 exceed K^(1/4) too)",
                min_epochs=LR_PAPER_EPOCHS,
                name=f"apam: same training loss at every P ({prob})",
            )
        )
    claims += saturation_findings(ok, sp, "apam")
    return Section(speedup_rows(data, ["apam"], "threads" if threads else "workers"), tuple(claims))


def section_lenet5_speedup(data: Experiment) -> Section:
    """Paper Sec. 5.2: APAM's speed-up against the paper's up to 20 workers (measured where every process had a
    core, predicted elsewhere: :func:`linear_claim`), where the master saturates, the test accuracy kept at every
    worker count and APAM against async SGD (experiments.report.sections.accuracy)."""
    ok, sp = data.ok, data.speedup
    algs = [a for a in ("apam", "async_sgd", "sync_amsgrad") if a in set(data.summary["algorithm"])]
    claims = [
        linear_claim(sp, "apam", 20, data.paper, ok=ok, validation=data.validation),
        *saturation_findings(ok, sp, "apam"),
        *accuracy_claims(
            ok, data.paper, data.traces, 20, "paper: ~99.0% on MNIST after 200 epochs", data.steps, data.tuning
        ),
    ]
    return Section(speedup_rows(data, algs) + targets_table(ok, data.traces, algs), tuple(claims))
