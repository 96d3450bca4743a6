"""Hydra's override grammar for one value: how Hydra reads the text after ``key=`` on the command line
(hydra/core/override_parser, https://hydra.cc/docs/advanced/override_grammar/basic). The run id writes a value as
Hydra reads it (experiments/store/run_id.py) and a message names a value the way it was typed
(experiments/settings/build.py); both ask here."""

from __future__ import annotations

from hydra.core.override_parser.overrides_parser import OverridesParser


def read_value(text: str):
    """Hydra's reading of ``text`` as an override's value: the ``Override`` of ``k=<text>`` (its ``value()`` is a
    bool, int, float, str, None, list, dict or a sweep), None when the grammar cannot read it unquoted."""
    try:
        return OverridesParser.create().parse_override(f"k={text}")
    except Exception:  # noqa: BLE001 -- hydra's OverrideParseException
        return None
