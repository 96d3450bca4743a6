"""The import graph of the project's packages (experiments, plots, algorithms, problems), read with ``ast``: every
``import`` and ``from ... import`` statement, at module level and inside functions, is an edge from the importing
module to the imported one (a package import also imports its ``__init__``). Asserted:

- no import circle, of any length (a circle hidden inside a function still makes the modules depend on each other);
- the lower rooms (experiments.engines, .clock, .training, .store) never import the upper ones (experiments.run,
  experiments.reproduce, experiments.report, plots);
- no module of experiments/ is much over 400 lines (one idea per module).
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("experiments", "plots", "algorithms", "problems")
LOWER = ("experiments.engines", "experiments.clock", "experiments.training", "experiments.store")
UPPER = ("experiments.run", "experiments.reproduce", "experiments.report", "plots")
MAX_LINES = 450


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The longest prefix of dotted ``name`` that is one of ``modules`` (``pkg.mod.attr`` -> ``pkg.mod``)."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        cand = ".".join(parts[:i])
        if cand in modules:
            return cand
    return None


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules ``name`` imports anywhere in its file (TYPE_CHECKING blocks included)."""
    is_pkg = path.name == "__init__.py"
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        targets = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_pkg else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            targets = [f"{mod}.{a.name}" for a in node.names]  # X.a when a is a module, else X
        for t in targets:
            hit = _resolve(t, modules)
            if hit and hit != name:
                out.add(hit)
    # importing a.b.c runs a/__init__ and a/b/__init__ first; a package's own __init__ runs before its submodules,
    # so that implicit edge is left out for the importer's own packages (an explicit import of one stays in)
    own = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
    for m in list(out):
        parts = m.split(".")
        out.update(
            p
            for p in (".".join(parts[:i]) for i in range(1, len(parts)))
            if p in modules and p != name and p not in own
        )
    return out


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _in(name: str, rooms: tuple[str, ...]) -> bool:
    return any(name == r or name.startswith(r + ".") for r in rooms)


def test_the_graph_sees_the_project():
    graph = _graph()
    assert "experiments.engines.simulated" in graph and "plots" in graph
    assert "experiments.training.master" in graph["experiments.engines.simulated"]


def test_no_import_circles():
    cycles = _cycles(_graph())
    assert not cycles, "import circles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


@pytest.mark.parametrize("room", LOWER)
def test_lower_rooms_do_not_import_upper_ones(room):
    graph = _graph()
    bad = sorted(f"{m} -> {t}" for m, ts in graph.items() if _in(m, (room,)) for t in ts if _in(t, UPPER))
    assert not bad, "\n".join(bad)


def test_modules_of_experiments_stay_small():
    sizes = {str(p.relative_to(ROOT)): len(p.read_text().splitlines()) for p in (ROOT / "experiments").rglob("*.py")}
    big = sorted(f"{p}: {n} lines" for p, n in sizes.items() if n > MAX_LINES)
    assert not big, "split by concern:\n" + "\n".join(big)


TOP_LEVEL = {
    ".ci", ".gitignore", "CHANGELOG.md", "LICENSE", "Makefile", "README.md", "pyproject.toml",
    "requirements-lock.txt", "algorithms", "benchmarks", "conf", "docs", "experiments", "hydra_plugins", "plots",
    "problems", "results", "results-long", "tests",
}  # fmt: skip
"""The repository's top level as the user fixed its layout (plus the CI script, the lock, the docs, the changelog,
the sweeper plugin and the long profile's committed results)."""


def test_the_top_level_holds_the_layout_and_nothing_else():
    """A file committed beside the layout by mistake (a tester's scratch ``p2.txt`` once was) is named here."""
    import shutil
    import subprocess

    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    top = {line.split("/", 1)[0] for line in tracked.splitlines() if line}
    assert top <= TOP_LEVEL, f"not part of the layout: {sorted(top - TOP_LEVEL)}"
