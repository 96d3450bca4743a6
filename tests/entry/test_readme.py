"""The README is a user manual that runs as written on a fresh clone: every Python command names the project's venv
(``.venv/bin/python``), every Python snippet runs, it stays short (at most 170 lines of at most 120 characters),
names no dates, commit hashes or tracker numbers, and every relative link of it and of docs/*.md resolves."""

import re
from pathlib import Path

import pytest

from conftest import REPO

README = (REPO / "README.md").read_text()
DOCS = sorted((REPO / "docs").glob("*.md"))
MANUALS = [REPO / "README.md", *DOCS]

MAX_LINES, MAX_WIDTH = 170, 120
DATE = re.compile(r"20\d\d-\d\d-\d\d")
TRACKER = re.compile(r"(?i)\bissues?\s+#?\d+|(?<![\w&/])#\d+\b")
COMMIT = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _fmnist_staged() -> bool:
    from problems.data import data_root

    return (data_root() / "FashionMNIST" / "raw").is_dir()


def _snippets(text: str) -> list[str]:
    """The README's ```python blocks, de-indented where they sit in a list item."""
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)
    return ["\n".join(line.removeprefix("  ") for line in code.splitlines()) for code in blocks]


def test_every_python_command_uses_the_venv():
    bare = [m.group(0) for m in re.finditer(r"(?<![/\w])python3? -m [\w.]+", README)]
    assert bare == [], f"use .venv/bin/python: {bare}"


@pytest.mark.parametrize("index", range(len(_snippets(README))))
def test_python_snippets_run(index):
    code = _snippets(README)[index]
    if "logreg_fmnist" in code and not _fmnist_staged():
        pytest.skip("Fashion-MNIST not staged (make data)")
    exec(compile(code, "README.md", "exec"), {})  # noqa: S102 -- the README snippet is the test


def test_the_readme_has_python_snippets_and_the_api_one_runs_a_simulated_run():
    snippets = _snippets(README)
    assert snippets and any("from experiments import" in s and "results_dir" in s for s in snippets)


def test_readme_is_short_and_narrow():
    lines = README.splitlines()
    assert len(lines) <= MAX_LINES, f"README.md has {len(lines)} lines (at most {MAX_LINES})"
    wide = [(n, len(line)) for n, line in enumerate(lines, 1) if len(line) > MAX_WIDTH]
    assert wide == [], f"README.md lines over {MAX_WIDTH} characters (line, width): {wide}"


@pytest.mark.parametrize("path", MANUALS, ids=lambda p: p.name)
def test_no_dates_tracker_numbers_or_commit_hashes(path):
    text = path.read_text()
    for what, pattern in (("date", DATE), ("tracker number", TRACKER), ("commit hash", COMMIT)):
        found = [m.group(0) for m in pattern.finditer(text)]
        assert found == [], f"{path.name}: {what}s {found}"


@pytest.mark.parametrize("path", MANUALS, ids=lambda p: p.name)
def test_every_relative_link_resolves(path):
    broken = []
    for target in LINK.findall(path.read_text()):
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # a URL (http:, mailto:) or an anchor in the same file
        file = target.split("#", 1)[0]
        if not (path.parent / file).exists():
            broken.append(target)
    assert broken == [], f"{path.relative_to(REPO)}: links to missing files {broken}"


def test_the_link_checker_sees_a_broken_link(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("[ok](page.md) [web](https://example.org/x) [gone](docs/nowhere.md#part) [here](#top)\n")
    targets = [
        t for t in LINK.findall(page.read_text()) if not re.match(r"[a-z][a-z0-9+.-]*:", t) and not t.startswith("#")
    ]
    assert [t for t in targets if not (tmp_path / t.split("#")[0]).exists()] == ["docs/nowhere.md#part"]


def test_the_patterns_catch_what_they_are_for():
    assert DATE.search("rerun 2026-12-03") and TRACKER.search("issue 16 asks") and TRACKER.search("see #12")
    assert COMMIT.search("from 834b0cd3") and not COMMIT.search("a deadbeef word") and not COMMIT.search("1000000")
    assert not TRACKER.search("[lr_speedup](#lr_speedup)") and not TRACKER.search("P = 32 &#8212;")
    assert Path(REPO / "docs" / "INTERFACES.md") in MANUALS
