"""Markdown pieces of the report: numbers, tables (``DataFrame.to_markdown``), and the Jinja2
templates of the page (package data under ``templates/``)."""

from __future__ import annotations

import math

import jinja2
import pandas as pd

NO_ROWS = "_(no rows)_\n"


def fmt(v, digits: int = 3) -> str:
    """A cell: floats to ``digits`` significant digits, NaN and None as ``--``, anything else as ``str``."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "--"
    if isinstance(v, float):
        return f"{v:.{digits}g}"
    return str(v)


def cell(v) -> str:
    """A table cell's text with its pipes escaped (a pipe would end the cell)."""
    return str(v).replace("|", "\\|")


def table(df: pd.DataFrame, digits: int = 3) -> str:
    """A GitHub Markdown table of ``df`` (floats to ``digits`` significant digits, NaN as --), one line a row.

    Cells are formatted row by row (:func:`fmt`), so a row of numbers only is formatted as pandas hands it out
    (as floats), then laid out by ``DataFrame.to_markdown`` (tabulate) without reading the text back as numbers."""
    if df.empty:
        return NO_ROWS
    rows = [[cell(fmt(r[c], digits)) for c in df.columns] for _, r in df.iterrows()]
    text = pd.DataFrame(rows, columns=[cell(c) for c in df.columns]).to_markdown(
        index=False, tablefmt="pipe", disable_numparse=True
    )
    return text + "\n"


ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("experiments.report", "templates"),
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
    undefined=jinja2.StrictUndefined,
    autoescape=False,
)  # Markdown, not HTML: the cells are escaped by :func:`cell`
ENV.filters["cell"] = cell


def render(template: str, **values) -> str:
    """``templates/<template>`` rendered with ``values``."""
    return ENV.get_template(template).render(**values)
