"""The report's verdicts per profile: each claim's verdict in every profile whose results sit beside this one
(``results/``, ``results-long/``, ``results-paper/``), read from their verdicts.csv, so that a verdict that changes
with scale shows; and what else than scale differs between two profiles' runs."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from experiments.log import get_logger
from experiments.report.load import CONF_DIR, folder_profiles, profiles_of, report_block
from experiments.report.markdown import table
from experiments.report.verdict import FINDING, Verdict
from experiments.store.table import file_problem

log = get_logger(__name__)

PROFILE_DIRS = {"quick": "results", "long": "results-long", "paper": "results-paper"}
VERDICTS_REQUIRED = ("experiment", "claim", "verdict")
"""The columns of a verdicts.csv that the verdicts per profile read."""


def same_settings(a: str, b: str) -> list[str]:
    """The experiments whose sweeps in profiles ``a`` and ``b`` are the same (``profiles:`` of
    conf/experiment/<id>.yaml): a verdict that differs between them there comes from run-to-run spread or another
    calibration, not from scale."""
    out = []
    for path in sorted(CONF_DIR.glob("*.yaml")):
        prof = profiles_of(path.stem)
        if a in prof and b in prof and prof[a] == prof[b]:
            out.append(path.stem)
    return out


def short(row) -> str:
    """A verdicts.csv row's verdict in a few words: its class, and a finding's gist (the number it found). Reads the
    long verdict strings of older verdicts.csv files too."""
    if "verdict_class" in row and isinstance(row.get("verdict_class"), str):
        verdict = Verdict(str(row["verdict"]), "")
        gist = row.get("ours") if isinstance(row.get("ours"), str) else ""
    else:
        verdict, gist = Verdict.parse(row["verdict"]), ""  # an older file: its finding's gist is not told apart
    return f"{verdict.cls} ({gist})" if verdict.cls == FINDING and gist else verdict.cls


def sibling_verdicts(path: Path, profile: str) -> pd.DataFrame | None:
    """Another profile's verdicts.csv at ``path`` for the verdicts per profile, or None when it cannot be read (not a
    regular file, not UTF-8 CSV, no :data:`VERDICTS_REQUIRED` column, a verdict of no known class): one warning
    naming it, and that profile's column is left out. It belongs to another folder, so this folder's report is
    written all the same (a damaged one was a traceback; a named pipe there hung the report)."""
    why = file_problem(path)
    df = None
    if why is None:
        try:
            df = pd.read_csv(path, encoding="utf-8")
        except (OSError, UnicodeDecodeError, ValueError, pd.errors.ParserError) as exc:
            why = getattr(exc, "strerror", None) or f"not UTF-8 CSV ({' '.join(str(exc).split())[:80]})"
    if df is not None and (missing := [c for c in VERDICTS_REQUIRED if c not in df]):
        why = f"no column {', '.join(missing)}"
    if why is None:
        try:
            [short(r) for r in df.to_dict("records")]
        except ValueError as exc:
            why = " ".join(str(exc).split())[:120]
    if why is None:
        return df
    log.warning(
        f"{path}: damaged verdicts ({why}); the verdicts per profile leave its {profile} column out "
        f"(make reproduce PROFILE={profile} writes it again)"
    )
    return None


def side_by_side(results_dir: Path, profile: str, current: pd.DataFrame, order: list[str]) -> tuple[str, list, str]:
    """(table, folders, note) of the verdicts per profile, read from the sibling folders' verdicts.csv (this
    profile's from ``current``), rows in the experiments' ``order``; profiles never run have no column; ("", [], "")
    without any verdict."""
    frames = {}
    for prof, folder in PROFILE_DIRS.items():
        if prof == profile:
            frames[prof] = current
            continue
        path = Path(results_dir).parent / folder / "verdicts.csv"
        if (path.exists() or path.is_symlink()) and path.resolve() != (Path(results_dir) / "verdicts.csv").resolve():
            if (df := sibling_verdicts(path, prof)) is not None:
                frames[prof] = df
    if profile not in PROFILE_DIRS:
        frames[profile] = current
    names, table_ = {}, None
    for prof, df in frames.items():
        df = df.drop_duplicates(["experiment", "claim"])
        if "name" in df:
            names.update(
                {
                    (e, c): n
                    for e, c, n in zip(df["experiment"], df["claim"], df["name"])
                    if isinstance(n, str) and (e, c) not in names
                }
            )
        df = pd.DataFrame(
            {"experiment": df["experiment"], "claim": df["claim"], prof: [short(r) for r in df.to_dict("records")]}
        )
        table_ = df if table_ is None else table_.merge(df, on=["experiment", "claim"], how="outer")
    if table_ is None or table_.empty:
        return "", [], ""
    rank = {e: i for i, e in enumerate(order)}
    table_ = table_.sort_values(
        ["experiment", "claim"], key=lambda c: c.map(lambda e: rank.get(e, len(rank))) if c.name == "experiment" else c
    )
    table_["claim"] = [names.get((e, c), c) for e, c in zip(table_["experiment"], table_["claim"])]
    table_ = table_.fillna("not run")
    experiments = set(table_["experiment"])
    same = [e for e in (same_settings("quick", "long") if {"quick", "long"} <= set(frames) else []) if e in experiments]
    note = (
        f" The long profile runs the quick settings for {', '.join(same)}: a verdict of theirs that differs "
        "between the two comes from run-to-run spread, the other calibration or other code, not from scale."
        if same
        else ""
    )
    beyond = [
        f"{e} {report_block(e)['beyond_scale']}"
        for e in order
        if e in experiments and report_block(e).get("beyond_scale")
    ]
    note += (
        " Besides scale, the profiles differ in calibration (each run's provenance.json names the entries it used and "
        "when they were measured) and may differ in "
        "the code that made the runs (each report's header lists its commits)"
        + (f"; {'; '.join(beyond)}" if beyond else "")
        + "."
    )
    return table(table_), [f"`{PROFILE_DIRS.get(p, p)}/`" for p in frames], note


def other_profiles(results_dir: Path, profile: str, names: list[str], status: dict) -> str:
    """A sentence naming the experiment folders among ``names`` whose runs were made with another profile than the
    report's ``profile`` (:func:`~experiments.report.load.folder_profiles`), e.g. ``Made with another profile than
    quick: lr_speedup (smoke).``; empty when every folder's runs are of ``profile`` (a folder's verdicts are judged
    on its own runs, whatever the heading says). ``status``: reproduce_status.json's entries, as the report has them."""
    other = {n: p for n, p in folder_profiles(results_dir, status).items() if n in names and p != profile}
    if not other:
        return ""
    listed = ", ".join(f"{n} ({p})" for n, p in sorted(other.items()))
    return f"Made with another profile than {profile}: {listed}; their verdicts are judged at that profile's scale."
