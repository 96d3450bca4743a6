"""The harness's command-line parser: argparse whose errors are one line (the harness's rule for bad input), with
the program's docstring's first paragraph as its description."""

from __future__ import annotations

import argparse


class Parser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose usage errors print one line, ``error: <prog>: <message> (--help lists the
    options)``, and exit 2 (argparse prints the whole usage block first). ``doc``: a module docstring whose first
    paragraph becomes the description (``--help``)."""

    def __init__(self, prog: str, doc: str | None = None, **kw) -> None:
        if doc is not None and "description" not in kw:
            kw["description"] = " ".join(doc.split("\n\n")[0].split())
        super().__init__(prog=prog, **kw)

    def error(self, message: str):  # noqa: D102 -- argparse's hook
        self.exit(2, f"error: {self.prog}: {message} (--help lists the options)\n")
