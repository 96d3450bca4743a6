"""Hydra's override grammar for one value: how Hydra reads the text after ``key=`` on the command line
(hydra/core/override_parser, https://hydra.cc/docs/advanced/override_grammar/basic). The run id writes a value as
Hydra reads it (experiments/store/run_id.py) and a message names a value the way it was typed
(experiments/settings/build.py); both ask here."""

from __future__ import annotations

import re

from hydra.core.override_parser.overrides_parser import OverridesParser

from experiments.errors import ConfigError


def check_text(override) -> None:
    """An override as typed is text: bytes the locale could not decode (Python keeps them as surrogates) are refused
    before Hydra's grammar reads it.

    Raises:
        ConfigError: ``<override>: not UTF-8 text ...``, or, for UTF-8 read by an ASCII locale (``LC_ALL=C`` with
            ``PYTHONUTF8=0``), the way to run it.
    """
    if isinstance(override, str) and re.search("[\udc80-\udcff]", override):
        raw = override.encode("utf-8", "surrogateescape")
        shown = raw.decode("utf-8", "replace")
        if shown == raw.decode("utf-8", "ignore"):  # UTF-8 after all: the locale is ASCII
            raise ConfigError(f"{shown}: this process's locale reads arguments as ASCII; run it with PYTHONUTF8=1")
        raise ConfigError(f"{shown}: not UTF-8 text (the bytes shown as \ufffd); name files and values in UTF-8")


def read_value(text: str):
    """Hydra's reading of ``text`` as an override's value: the ``Override`` of ``k=<text>`` (its ``value()`` is a
    bool, int, float, str, None, list, dict or a sweep), None when the grammar cannot read it unquoted."""
    try:
        return OverridesParser.create().parse_override(f"k={text}")
    except Exception:  # noqa: BLE001 -- hydra's OverrideParseException
        return None
