"""The report of a results folder: ``REPORT.md`` (a first screen that answers, then one section per experiment, then
the verdicts per profile) and ``verdicts.csv`` (one row per claim), written from the folder's CSVs alone.

- :mod:`.verdict`: the :class:`Claim` and :class:`Verdict` types and the verdict classes.
- :mod:`.rules`: the regime in which the paper makes each claim and the rules that judge it (paper Sec. 3, 5).
- :mod:`.clock`: whether model_validation backs the simulated clock a time claim rests on.
- :mod:`.load`: an experiment folder's CSVs, the paper's numbers, the experiment yaml's ``report`` block.
- :mod:`.sections`: one module per section (or family of sections), each returning Markdown and claims.
- :mod:`.first_screen`, :mod:`.profiles`: the first screen and the verdicts per profile.
- :mod:`.markdown`: numbers, tables (``DataFrame.to_markdown``) and the Jinja2 templates under ``templates/``.
- :mod:`.writer`: :func:`write_report`, which puts it together.

``python -m experiments.report DIR`` (:mod:`.__main__`) writes the report of any results folder and redraws its
figures.
"""

from experiments.report.verdict import Claim, Verdict
from experiments.report.writer import write_report

__all__ = ["Claim", "Verdict", "write_report"]
