"""The harness's command-line parser: argparse whose errors are one line (the harness's rule for bad input), with
the program's docstring's first paragraph as its description."""

from __future__ import annotations

import argparse
import math
from pathlib import Path


class Parser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose usage errors print one line, ``error: <prog>: <message> (--help lists the
    options)``, and exit 2 (argparse prints the whole usage block first). ``doc``: a module docstring whose first
    paragraph becomes the description (``--help``)."""

    def __init__(self, prog: str, doc: str | None = None, **kw) -> None:
        if doc is not None and "description" not in kw:
            kw["description"] = " ".join(doc.split("\n\n")[0].split())
        super().__init__(prog=prog, **kw)

    def parse_args(self, args=None, namespace=None):  # noqa: D102 -- argparse's; keeps the words for error()
        import sys

        readable_streams()  # every command parses here first: before it prints a path or an error
        self._words = list(sys.argv[1:] if args is None else args)
        for action in self._actions:  # argparse keeps the last of two values silently (--file a --file b: b)
            if isinstance(action, argparse._StoreAction) and action.option_strings:  # noqa: SLF001 - its own class
                given = [w for w in self._words if _names(w, action.option_strings)]
                if len(given) > 1:
                    self.error(f"{action.option_strings[0]}: given twice ({given[0]} and {given[1]}); give it once")
        return super().parse_args(args, namespace)

    def error(self, message: str):  # noqa: D102 -- argparse's hook
        lists = [
            a.option_strings[0]
            for a in self._actions
            if a.nargs in ("*", "+") and a.option_strings and set(a.option_strings) & set(getattr(self, "_words", ()))
        ]
        if message.startswith("the following arguments are required") and lists:  # --only A B DIR took DIR too
            message += f" ({lists[0]} takes every word after it: put the folder before {lists[0]})"
        self.exit(2, f"error: {self.prog}: {message} (--help lists the options)\n")


def readable_streams() -> None:
    """Let stdout and stderr write a character their encoding lacks as an escape (``\\xfc``) instead of failing: a
    command run with ``LC_ALL=C PYTHONIOENCODING=ascii`` wrote its files and then crashed on printing their path
    (``UnicodeEncodeError``) when the path held a non-ASCII name. A stream already lenient (stderr's
    ``backslashreplace``, a C locale's ``surrogateescape``: the path's own bytes) or not a text stream of the
    standard kind (a notebook's) is left as it is."""
    import sys

    for stream in (sys.stdout, sys.stderr):
        if getattr(stream, "errors", None) == "strict" and hasattr(stream, "reconfigure"):
            try:
                stream.reconfigure(errors="backslashreplace")
            except (ValueError, OSError):  # closed, or a stream that cannot change: printed as before
                pass


def _names(word: str, options: list[str]) -> bool:
    """Whether the command-line word names one of ``options`` (``--file``, ``--file=x``, or an abbreviation argparse
    takes: ``--fi x``)."""
    name = word.split("=", 1)[0]
    return name in options or (name.startswith("--") and len(name) > 2 and any(o.startswith(name) for o in options))


def folder_arg(text: str) -> Path:
    """An argparse ``type`` for a folder's name: an empty or blank one (which would be the current folder) is
    refused as a usage error (``'': must name a folder``)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"{text!r}: must name a folder")
    return Path(text)


def count_arg(text: str) -> int:
    """An argparse ``type`` for a count: an integer >= 1 (``'0': must be an integer >= 1``)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: must be an integer >= 1")
    return value


def amount_arg(text: str) -> float:
    """An argparse ``type`` for an amount (epochs, seconds): a finite number > 0 (``'-1': must be a number > 0``)."""
    return _number(text, lambda v: 0 < v < math.inf, "a number > 0")


def seconds_arg(text: str) -> float:
    """An argparse ``type`` for a duration that may be 0 (a wait that is skipped): a finite number of seconds >= 0."""
    return _number(text, lambda v: 0 <= v < math.inf, "a number of seconds >= 0")


def _number(text: str, ok, words: str) -> float:
    """``text`` as a float that ``ok`` accepts, else argparse's usage error ``'<text>': must be <words>``."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not ok(value):
        raise argparse.ArgumentTypeError(f"{text!r}: must be {words}")
    return value


def counts_arg(text: str) -> list[int]:
    """An argparse ``type`` for comma-separated counts (``784,61706``), each an integer >= 1."""
    return [count_arg(v) for v in text.split(",")]


def file_arg(text: str) -> Path:
    """An argparse ``type`` for a file's name: an empty or blank one is refused (``'': must name a file``)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"{text!r}: must name a file")
    return Path(text)
