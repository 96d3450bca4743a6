"""Which speed-ups a verdict may rest on (paper Secs. 5.1-5.3: speed-up over threads or workers).

A speed-up claim is decided by measurement: wall-clock runs (speedup.csv rows of clock ``wall``, relative to one
compute agent) at a count where every process had a core of its own -- the master and P workers need P + 1 cores,
the runs' ``cores`` (this machine's, for a real engine). A count whose processes outnumber the cores is *not
measurable here*: a wall-clock run there times the sharing of cores, not the algorithm. For it the report gives the
prediction of the simulated clock on a core per process (``engine=simulated_dedicated``, ``cores`` = ``dedicated``)
beside model_validation's error for the problem, protocol and engine (experiments.report.clock). A simulated speed-up
never decides a claim.

Counts are compute agents (speedup.csv's ``agents``: the workers, plus the master where it computes gradients too,
``algorithm.master_computes`` -- the authors' threads, Sec. 5.1). Older speed-up tables without ``agents`` or
``cores`` read as workers, and their simulated rows as the dedicated-core clock (the simulated clock before it
modelled this machine's cores gave every process a core).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from experiments.report.clock import errors_text, protocol_of, select

DEDICATED = "dedicated"
NOT_MEASURABLE_WORDS = "not measurable here"
"""How a verdict's conditions name the counts whose processes outnumber this machine's cores."""


@dataclass(frozen=True)
class Count:
    """One compute-agent count of a speed-up: the measured (wall-clock) speed-up, the dedicated-core clock's
    prediction, the simulated clock's on this machine's cores (NaN where there is none), and the cores a measured run
    had (None: not recorded)."""

    agents: int
    workers: int
    measured: float = math.nan
    predicted: float = math.nan
    shared: float = math.nan
    cores: int | None = None

    @property
    def processes(self) -> int:
        """The master and the workers: the cores a measurement needs."""
        return self.workers + 1

    @property
    def measurable(self) -> bool:
        """Every process had a core (the cores are known and at least :attr:`processes`)."""
        return self.cores is not None and self.processes <= self.cores

    @property
    def too_few_cores(self) -> bool:
        """The cores are known and fewer than the processes: not measurable here."""
        return self.cores is not None and self.processes > self.cores

    @property
    def judged(self) -> bool:
        """A measured speed-up that may decide a claim: measurable, and measured."""
        return self.measurable and not math.isnan(self.measured)


def _frame(sp: pd.DataFrame) -> pd.DataFrame:
    """speed-up rows with ``agents`` (default: workers), ``clock`` (default: simulated) and ``kind``: ``measured``
    (clock wall), ``dedicated`` (simulated on a core per process, or an older simulated row without ``cores``) or
    ``shared`` (simulated on a given number of cores)."""
    d = sp.copy()
    if "agents" not in d:
        d["agents"] = d["workers"]
    d["agents"] = pd.to_numeric(d["agents"], errors="coerce").fillna(pd.to_numeric(d["workers"], errors="coerce"))
    if "clock" not in d:
        d["clock"] = "simulated"
    cores = d["cores"].astype(str) if "cores" in d else pd.Series("", index=d.index)
    wall = d["clock"].astype(str) == "wall"
    dedicated = cores.isin([DEDICATED, "", "nan", "None"])
    d["kind"] = ["measured" if w else DEDICATED if ded else "shared" for w, ded in zip(wall, dedicated)]
    d["cores_n"] = pd.to_numeric(cores, errors="coerce")
    return d


def machine_cores(sp: pd.DataFrame) -> int | None:
    """The cores a measured run had here: the most the wall-clock rows of ``sp`` record, else the simulated clock's
    own count for this machine (rows of kind ``shared``); None when neither says."""
    if sp is None or sp.empty:
        return None
    d = _frame(sp)
    for kind in ("measured", "shared"):
        n = d.loc[d["kind"] == kind, "cores_n"].dropna()
        if len(n):
            return int(n.max())
    return None


def agent_counts(
    sp: pd.DataFrame, algorithm: str, basis: str = "time_per_epoch", cores: int | None = None
) -> dict[int, Count]:
    """``algorithm``'s speed-up on ``basis`` per compute-agent count: measured, predicted (dedicated cores) and on this
    machine's cores, each the mean over the speed-up groups of that kind (e.g. two engines). ``cores``: the cores of
    a measured run (default :func:`machine_cores` of ``sp``)."""
    if sp is None or sp.empty:
        return {}
    d = _frame(sp)
    d = d[(d["algorithm"] == algorithm) & (d["basis"] == basis)]
    cores = machine_cores(sp) if cores is None else cores
    out = {}
    for a, g in d.groupby("agents"):
        mean = {
            k: float(g.loc[g["kind"] == k, "speedup"].mean()) if (g["kind"] == k).any() else math.nan
            for k in ("measured", DEDICATED, "shared")
        }
        out[int(a)] = Count(
            int(a), int(pd.to_numeric(g["workers"]).min()), mean["measured"], mean[DEDICATED], mean["shared"], cores
        )
    return out


def span(values) -> str:
    """``4-32`` or ``4`` (integers)."""
    v = sorted(int(x) for x in values)
    return f"{v[0]}" if v[0] == v[-1] else f"{v[0]}-{v[-1]}"


def counts_text(agents) -> str:
    """``P = 4, 8, 16``."""
    return "P = " + ", ".join(str(int(a)) for a in sorted(agents))


def needs_cores(counts: list[Count]) -> str:
    """``P = 4, 8 need 4-8 cores (this machine: 2)``: why these counts are not measurable here."""
    if not counts:
        return ""
    verb = "needs" if len(counts) == 1 else "need"
    return (
        f"{counts_text(c.agents for c in counts)} {verb} {span(c.processes for c in counts)} cores (this "
        f"machine: {counts[0].cores})"
    )


def transports(sp: pd.DataFrame) -> list[str]:
    """The real engines the simulated rows of ``sp`` modelled (``transport``; default shared_memory)."""
    if sp is None or sp.empty:
        return ["shared_memory"]
    d = _frame(sp)
    sim = d[d["kind"] != "measured"]
    t = sim["transport"].astype(str) if "transport" in sim else pd.Series(dtype=str)
    t = sorted({x for x in t if x not in ("", "nan", "None")})
    return t or ["shared_memory"]


def validation_note(validation: pd.DataFrame | None, problems, algorithms, engines, compute: str = "real") -> str:
    """model_validation's error for these problems, protocols and engines: ``model_validation (logreg_fmnist, async
    on shared_memory, P <= 32): mean abs. error sitting 4.1%, pred 6.0%, twin 2.0%``, or that it has no such row."""
    protocols = sorted(set(protocol_of(algorithms)))
    engines = [e for e in engines if isinstance(e, str) and e not in ("", "nan")] or ["shared_memory"]
    rows = select(validation if validation is not None else pd.DataFrame(), compute, problems, protocols, engines)
    if rows is None or rows.empty:
        return (
            f"model_validation has no {compute}-compute {'/'.join(protocols)} row on {'/'.join(engines)} for "
            f"{', '.join(sorted(problems))}"
        )
    what = f"{', '.join(sorted(problems))}, {'/'.join(protocols)} on {'/'.join(engines)}"
    return f"model_validation ({what}, P <= {int(rows['workers'].max())}): {errors_text(rows)}"


def pick_prediction(counts: dict[int, Count], paper: pd.Series) -> Count | None:
    """The count whose prediction a claim without a measured count shows: the largest with a prediction and a paper
    number, else the largest with a prediction; None without predictions."""
    have = [c for c in counts.values() if not math.isnan(c.predicted)]
    if not have:
        return None
    common = [c for c in have if c.agents in paper.index]
    return max(common or have, key=lambda c: c.agents)


def unjudged(count: Count) -> str:
    """Why a count does not decide: ``not measurable here (needs 5 cores)`` or ``no wall-clock run``."""
    return f"{NOT_MEASURABLE_WORDS} (needs {count.processes} cores)" if count.too_few_cores else "no wall-clock run"
