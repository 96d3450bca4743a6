"""README commands run as written on a fresh clone: every Python command names the project's
venv (``.venv/bin/python``), and the Python snippet runs."""
import re

from conftest import REPO

README = (REPO / "README.md").read_text()


def test_every_python_command_uses_the_venv():
    bare = [m.group(0) for m in re.finditer(r"(?<![/\w])python3? -m [\w.]+", README)]
    assert bare == [], f"use .venv/bin/python: {bare}"


def test_python_snippets_run():
    snippets = re.findall(r"```python\n(.*?)```", README, flags=re.S)
    assert snippets
    for code in snippets:
        exec(compile("\n".join(line[2:] if line.startswith("  ") else line for line in code.splitlines()),
                     "README.md", "exec"), {})
