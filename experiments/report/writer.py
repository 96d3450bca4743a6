"""``<results>/REPORT.md`` and ``<results>/verdicts.csv``: per experiment, the paper's numbers beside ours, the
figures, and one verdict per claim, under a first screen that answers.

Every verdict is computed by the sections (experiments.report.sections) from the CSVs with the rule stated beside
it; none is written by hand. The page layout is the Jinja2 templates ``templates/report.md.j2`` and
``templates/section.md.j2``; the report depends on the CSVs (and the status file) only, so writing it again from
unchanged results gives the same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import pandas as pd

from experiments.report.clock import clock_label
from experiments.report.first_screen import Row, counts, first_table, paragraph
from experiments.report.load import (
    Experiment,
    calibration_spreads,
    load_experiment,
    report_block,
    run_commits,
)
from experiments.report.markdown import render, table
from experiments.report.profiles import other_profiles, side_by_side
from experiments.report.rules import MIN_SEEDS
from experiments.report.sections import SECTIONS, Section, section_generic
from experiments.report.verdict import (
    CAN_TEST,
    CLASSES,
    CRASHED,
    LEFT_OUT,
    NOT_RUN_YET,
    NOT_RUNNABLE,
    Claim,
    Verdict,
)
from experiments.store.atomic import write_if_changed

ORDER = list(SECTIONS)
"""The experiments a ``make reproduce`` report lists, in order (other experiment folders follow, sorted)."""
NOT_IN_CALL = {"status": "not run", "message": "not part of this call"}
VERDICT_COLUMNS = [
    "experiment",
    "claim",
    "verdict",
    "verdict_class",
    "name",
    "decided_by",
    "ours",
    "paper",
    "conditions",
    "clock",
    "evidence",
]


def absent(status: dict) -> Verdict:
    """What a claim without runs, or an experiment without a summary, is called, by the experiment's status in
    reproduce_status.json: ``not runnable here`` only when its sweep ran or was skipped on this machine (missing data,
    a problem the machine cannot run; :func:`build_part` says ``not run yet`` for one that ran and has no runs now);
    ``crashed`` when it crashed; ``not run yet`` when no ``make reproduce`` call of this profile has finished it (a
    long profile part-way), so an unfinished sweep never reads as a limit; ``left out`` when the profile runs it only
    on request (``EXTENDED=1``, experiments.reproduce.EXTENDED)."""
    return {
        "ran": Verdict(NOT_RUNNABLE),
        "skipped": Verdict(NOT_RUNNABLE),
        "crashed": Verdict(CRASHED),
        "left out": Verdict(LEFT_OUT, "EXTENDED=1 runs it"),
    }.get(status.get("status"), Verdict(NOT_RUN_YET))


def judge(claims: tuple[Claim, ...], summary: pd.DataFrame, results_dir: Path, missing: Verdict) -> list[Claim]:
    """The section's claims as the report shows them: a time claim whose number is not measured (``Claim.measured``)
    carries the clock label of its problem's runs (experiments.report.clock.clock_label), a claim without runs the
    experiment's ``missing`` verdict, and a claim judged from fewer than MIN_SEEDS seeds in all says so in its
    conditions."""
    labels: dict = {}
    seeds = int(summary["seed"].nunique()) if "seed" in summary else 0
    out = []
    for c in claims:
        verdict, clock = c.verdict, ""
        if c.timed and not c.measured and verdict.cls in CAN_TEST:
            if c.problem not in labels:  # one label per problem (each reads model_validation's pairs)
                labels[c.problem] = clock_label(
                    summary if c.problem is None else summary[summary["problem"] == c.problem], results_dir
                )
            clock = labels[c.problem]
        if verdict == Verdict(NOT_RUNNABLE):
            verdict = missing
        if 0 < seeds < MIN_SEEDS and "seed" not in f"{verdict} {c.evidence}":
            verdict = verdict.qualified(f"{seeds} seed{'s' if seeds > 1 else ''} in all: fewer than {MIN_SEEDS}")
        out.append(replace(c, verdict=verdict, clock=clock))
    return out


def scale(summary: pd.DataFrame) -> str:
    """One sentence on the runs' scale, read from the summary (so it is right for every profile)."""

    def span(col, fmt="{:.3g}"):
        if col not in summary.columns:
            return "--"
        v = pd.to_numeric(summary[col], errors="coerce").dropna()
        if v.empty:
            return "--"
        lo, hi = v.min(), v.max()
        return fmt.format(lo) if lo == hi else f"{fmt.format(lo)}-{fmt.format(hi)}"

    per_epoch = ""  # training examples per epoch = updates x batch / epochs where one update is one (global) batch
    if {"updates", "batch_size", "epochs", "algorithm"} <= set(summary.columns):
        one = summary[summary["algorithm"].isin(["apam", "async_sgd", "sync_amsgrad"])]
        n = (
            pd.to_numeric(one["updates"], errors="coerce")
            * pd.to_numeric(one["batch_size"], errors="coerce")
            / pd.to_numeric(one["epochs"], errors="coerce").where(lambda e: e > 0)
        ).dropna()
        if len(n):
            lo, hi = (f"{v:,.0f}" for v in (n.min(), n.max()))
            per_epoch = f" (about {lo if lo == hi else f'{lo}-{hi}'} training examples an epoch)"
    return (
        f"Runs here: {span('epochs')} epochs{per_epoch}, {span('updates', '{:.0f}')} updates, batch "
        f"{span('batch_size', '{:.0f}')}, workers {span('workers', '{:.0f}')}, seeds "
        f"{summary['seed'].nunique()}, clocks {', '.join(sorted(summary['clock'].astype(str).unique()))}."
    )


@dataclass
class Part:
    """One experiment's share of the report: what the section template renders and the first screen counts."""

    name: str
    heading: str
    setting: str
    status: dict
    missing: Verdict
    runs: int = 0
    n_bad: int = 0
    runs_line: str = ""
    section: Section = field(default_factory=Section)
    claims: list = field(default_factory=list)
    note: str = ""
    paper_label: str = ""
    paper_table: str = ""
    bad_runs: list = field(default_factory=list)
    figures_missing: list = field(default_factory=list)
    figures: list = field(default_factory=list)

    @property
    def anchor(self) -> str:
        """The section's anchor: the experiment id (an explicit ``<a id>`` before its heading)."""
        return self.name

    @property
    def title(self) -> str:
        return self.heading.split(": ", 1)[-1]

    @property
    def claims_table(self) -> str:
        """The section's claims, one line each: the verdict and the number that decides it (the notes below the
        table give each claim's words, rule, conditions and evidence)."""
        return table(
            pd.DataFrame(
                [
                    {
                        "#": i,
                        "claim": c.title,
                        "verdict": f"**{c.verdict.cls}**",
                        "decided by": c.decided_by,
                        "ours": c.ours,
                        "paper": c.paper,
                    }
                    for i, c in enumerate(self.claims, 1)
                ]
            )
        )


def build_part(results_dir: Path, name: str, status: dict) -> Part:
    """Read experiment ``name`` below ``results_dir``, run its section, judge its claims."""
    block = report_block(name)
    title = block.get("title") or name
    part = Part(
        name,
        f"{name}: {title}",
        block.get("setting", ""),
        status,
        absent(status),
        figures_missing=status.get("figures_missing", []),
    )
    data: Experiment = load_experiment(results_dir, name)
    summary = data.summary
    if summary.empty:
        if status.get("status") == "ran":  # its runs were removed since: a rerun makes them, no limit of this machine
            why = "its sweep ran, but its runs are not here: make reproduce runs it again"
            part.missing = Verdict(NOT_RUN_YET, why)
        return part
    part.runs, part.n_bad = len(summary), int((summary["status"] != "ok").sum())
    spent = (
        f"; the last `make reproduce` call that changed this experiment spent {status['wall_s']:.0f} s on its "
        "sweep (finished runs are skipped)"
        if status.get("wall_s") is not None
        else ""
    )
    part.runs_line = f"{part.runs} runs ({part.n_bad} diverged or failed){spent}. {scale(summary)}"
    part.section = SECTIONS.get(name, section_generic)(data)
    part.claims = judge(part.section.claims, summary, results_dir, part.missing)
    part.note = block.get("note", "")
    if not data.paper.empty:
        part.paper_label = block.get("paper_label", "The paper's numbers")
        part.paper_table = table(data.paper[["problem", "algorithm", "workers", "metric", "value", "unit"]])
    bad = summary[summary["status"] != "ok"]
    part.bad_runs = [
        {"message": "", **r} for r in bad[[c for c in ("run_id", "status", "message") if c in bad]].to_dict("records")
    ]
    part.figures = [f.relative_to(results_dir).as_posix() for f in sorted((data.folder / "figures").glob("*.png"))]
    return part


def verdict_rows(parts: list[Part]) -> pd.DataFrame:
    """verdicts.csv: one row per claim (experiment, claim key, short verdict, its class as an identifier, short name,
    the deciding number with ours and the paper's, the verdict's conditions, the clock's backing, the evidence)."""
    rows = [
        {
            "experiment": p.name,
            "claim": c.key,
            "verdict": c.verdict.cls,
            "verdict_class": c.verdict.slug,
            "name": c.title,
            "decided_by": c.decided_by,
            "ours": c.ours,
            "paper": c.paper,
            "conditions": c.verdict.conditions,
            "clock": c.clock,
            "evidence": c.evidence,
        }
        for p in parts
        for c in p.claims
    ]
    return pd.DataFrame(rows, columns=VERDICT_COLUMNS)


def overview(parts: list[Part]) -> str:
    """Per experiment: its status (``part-way`` when its sweep has not finished, figures not drawn), its runs, and
    how many verdicts of each class."""
    rows = []
    for p in parts:
        if not p.runs:
            rows.append({"experiment": p.name, "status": p.status.get("status"), "runs": 0, "verdicts": str(p.missing)})
            continue
        status = (
            p.status.get("status") if p.status.get("status") != "not run" else "part-way (its sweep has not finished)"
        )
        status += f" ({len(p.figures_missing)} figure(s) not drawn)" if p.figures_missing else ""
        rows.append(
            {"experiment": p.name, "status": status, "runs": p.runs, "verdicts": counts([c.verdict for c in p.claims])}
        )
    return table(pd.DataFrame(rows))


def first_rows(parts: list[Part]) -> list[Row]:
    """The first screen's lines: every judged claim, and each experiment without runs."""
    rows = []
    for p in parts:
        if not p.runs:
            rows.append(
                Row(p.name, p.anchor, p.missing, None, p.title, p.status.get("message") or p.status.get("status") or "")
            )
        rows += [Row(p.name, p.anchor, c.verdict, c) for c in p.claims]
    return rows


def write_report(results_dir: Path, profile: str, statuses: dict, experiments: list[str] | None = None) -> Path:
    """Write ``<results_dir>/REPORT.md`` and ``verdicts.csv`` from the experiment folders below ``results_dir``;
    return the report's path. ``statuses``: reproduce_status.json's entries (an experiment without one is "not part
    of this call"); ``experiments``: the experiments to report, in order (default: every experiment of ``make
    reproduce``, present or not)."""
    results_dir = Path(results_dir)
    names = list(experiments) if experiments is not None else ORDER
    parts = [build_part(results_dir, name, statuses.get(name, NOT_IN_CALL)) for name in names]
    verdicts = verdict_rows(parts)
    per_profile, folders, profile_note = side_by_side(results_dir, profile, verdicts, names)
    rows = first_rows(parts)
    text = render(
        "report.md.j2",
        profile=profile,
        mixed=other_profiles(results_dir, profile, names, statuses),
        results_dir=results_dir.as_posix(),
        reproduce="make reproduce" + ("" if profile == "quick" else f" PROFILE={profile}"),
        commits=run_commits(results_dir, names),
        calibration=calibration_spreads(results_dir, names),
        first_table=first_table(rows),
        paragraph=paragraph(rows),
        legend=CLASSES,
        sections=[render("section.md.j2", part=p) for p in parts],
        per_profile=per_profile,
        folders=folders,
        profile_note=profile_note,
        overview=overview(parts),
    )
    write_if_changed(results_dir / "verdicts.csv", verdicts.to_csv(index=False))
    path = results_dir / "REPORT.md"
    write_if_changed(path, text)
    return path
