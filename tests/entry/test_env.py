"""The environment is the lock: the venv holds exactly the locked versions, the lock satisfies pyproject.toml's
loose spec and pins every package with hashes, and every run's provenance names the lock's hash."""

from __future__ import annotations

import hashlib
import re
import tomllib

import pytest
from packaging.requirements import Requirement

from conftest import REPO
from experiments.store import provenance

LOCK = REPO / "requirements-lock.txt"


def _lock_blocks() -> dict[str, list[str]]:
    """name -> the lines of its entry (pin line and its ``--hash`` lines)."""
    blocks, name = {}, None
    for line in LOCK.read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==", line)
        if m:
            name = provenance._canonical(m.group(1))
            blocks[name] = [line]
        elif name and line.startswith("    --hash="):
            blocks[name].append(line)
        elif not line.startswith(" "):
            name = None
    return blocks


def test_the_venv_holds_exactly_the_locked_versions():
    """What `make` installed (a fresh clone included) is the lock: same names, same versions, nothing else."""
    import setuptools  # noqa: F401  (puts its vendored packages on sys.path: they are not the environment's)

    assert provenance.lock_mismatches() == [], "rebuild the venv from the lock: rm -rf .venv && make venv"
    assert len(provenance.installed()) == len(provenance.read_lock(LOCK)) + 1  # and the harness itself


def test_the_lock_satisfies_every_requirement_of_pyproject():
    """A stale lock (pyproject.toml changed, `make lock` not rerun) fails here, naming the requirement."""
    meta = tomllib.loads((REPO / "pyproject.toml").read_text())
    reqs = list(meta["project"]["dependencies"]) + list(meta["build-system"]["requires"])
    for extra in meta["project"]["optional-dependencies"].values():
        reqs += extra
    assert {"dev", "launchers"} <= set(meta["project"]["optional-dependencies"])
    pins = provenance.read_lock(LOCK)
    for text in reqs:
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate():
            continue
        name = provenance._canonical(req.name)
        assert name in pins, f"{text}: not in the lock (make lock)"
        assert req.specifier.contains(pins[name], prereleases=True), f"{text}: lock pins {pins[name]} (make lock)"


def test_every_locked_package_is_pinned_with_sha256_hashes():
    blocks = _lock_blocks()
    assert len(blocks) == len(provenance.read_lock(LOCK)) >= 60
    for name, lines in blocks.items():
        hashes = [ln for ln in lines if ln.startswith("    --hash=sha256:")]
        assert hashes, f"{name}: no hash"
        assert all(re.fullmatch(r"    --hash=sha256:[0-9a-f]{64}( \\)?", h) for h in hashes), name
    # the torch wheel on this machine's disk is among torch's hashes (what pip installs here)
    assert {
        "torch",
        "torchvision",
        "hydra-joblib-launcher",
        "hydra-submitit-launcher",
        "pip-tools",
        "pytest",
        "setuptools",
        "pip",
    } <= set(blocks)


def test_lock_mismatches_names_every_difference(tmp_path):
    lock = tmp_path / "lock.txt"
    lock.write_text("# comment\nfoo==1.0 \\\n    --hash=sha256:" + "0" * 64 + "\nBar_Baz==2.0\nqux==3\n")
    assert provenance.read_lock(lock) == {"foo": "1.0", "bar-baz": "2.0", "qux": "3"}
    env = {"foo": "1.0", "bar-baz": "2.1", "extra": "0.1", "apam-harness": "0.1.0"}
    assert provenance.lock_mismatches(lock, env) == [
        "bar-baz: locked 2.0, installed 2.1",
        "qux: locked 3, not installed",
        "extra: installed 0.1, not in the lock",
    ]
    assert provenance.lock_mismatches(lock, {"foo": "1.0", "bar-baz": "2.0", "qux": "3"}) == []


def test_provenance_names_the_lock_hash():
    info = provenance.collect(1, "cpu")["lock"]
    assert info == {
        "file": "requirements-lock.txt",
        "sha256": hashlib.sha256(LOCK.read_bytes()).hexdigest(),
        "matches_env": True,
        "mismatches": [],
    }


def test_provenance_without_a_lock_says_so(tmp_path):
    assert provenance.lock_info(tmp_path / "missing.txt") == {
        "file": "missing.txt",
        "sha256": None,
        "matches_env": False,
        "mismatches": ["no lock file"],
    }


def test_lock_info_is_kept_until_the_lock_or_the_environment_changes(tmp_path, monkeypatch):
    """Every job of a sweep asks for the lock's state: it is computed once per process, and again when the lock file
    or a site-packages folder (an install or removal) changes."""
    import os

    lock = tmp_path / "lock.txt"
    lock.write_text("foo==1.0\n")
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.setattr(provenance.sysconfig, "get_paths", lambda: {"purelib": str(site), "platlib": str(site)})
    calls = []
    monkeypatch.setattr(
        provenance, "lock_mismatches", lambda path: calls.append(path) or ["foo: locked 1.0, not installed"]
    )
    first = provenance.lock_info(lock)
    assert first["matches_env"] is False and provenance.lock_info(lock) == first and len(calls) == 1
    (site / "bar-1.0.dist-info").mkdir()  # an install: the folder changes
    os.utime(site, ns=(1, 1))
    provenance.lock_info(lock)
    lock.write_text("foo==1.1\n")  # a new lock
    info = provenance.lock_info(lock)
    assert len(calls) == 3 and info["sha256"] == hashlib.sha256(b"foo==1.1\n").hexdigest()


@pytest.mark.parametrize("target", ["venv", "lock"])
def test_the_makefile_installs_from_and_regenerates_the_lock(target):
    """`make -n` shows the commands: install with hashes from the lock, then the project without dependencies;
    `make lock` is pip-compile with hashes of both extras."""
    import subprocess

    proc = subprocess.run(
        ["make", "-n", "-B", "-f", "Makefile", target, "VENV=/nonexistent-venv"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    if target == "venv":
        assert "pip install --quiet --require-hashes -r requirements-lock.txt" in proc.stdout
        assert "/nonexistent-venv/bin/python -m piptools sync --quiet requirements-lock.txt" in proc.stdout
        assert "pip install --quiet --no-deps --no-build-isolation -e ." in proc.stdout
    else:  # pip-tools through the venv's python: a copied venv's bin/ scripts would run the original's
        assert "/nonexistent-venv/bin/python -m piptools compile" in proc.stdout and "--generate-hashes" in proc.stdout
        assert "--extra dev --extra launchers" in proc.stdout and "--output-file requirements-lock.txt" in proc.stdout


@pytest.mark.parametrize(("flag", "value"), [("FORCE", "abc"), ("FORCE", "yes"), ("EXTENDED", "2")])
def test_a_makefile_flag_that_is_not_0_or_1_stops_make(flag, value):
    """FORCE=yes and EXTENDED=2 were silently no force, no extension."""
    import subprocess

    proc = subprocess.run(
        [
            "make",
            "-n",
            "--no-print-directory",
            "-f",
            "Makefile",
            "reproduce",
            f"{flag}={value}",
            "VENV=/nonexistent-venv",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout
    assert proc.stderr.strip().endswith(f"*** {flag}={value}: must be 0 or 1.  Stop."), proc.stderr


@pytest.mark.parametrize("target", ["reproduce", "plots"])
def test_a_makefile_value_reaches_the_command_as_one_word(target):
    """RESULTS with a space was two arguments ("unrecognized arguments: space"), and RESULTS="x --force" slipped an
    option in: each value is quoted for the shell (a quote in it too)."""
    import shlex
    import subprocess

    results = "/tmp/apam test's --force"
    args = ["make", "-n", "--no-print-directory", "-f", "Makefile", target, "VENV=/nonexistent-venv"]
    proc = subprocess.run(
        [*args, f"RESULTS={results}", "PROFILE=smoke", "JOBS=1"], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    (line,) = [ln for ln in proc.stdout.splitlines() if "/nonexistent-venv/bin/python -m" in ln and target in ln]
    words = shlex.split(line)
    assert results in words and "--force" not in words
    if target == "reproduce":
        assert words[words.index("--results-dir") + 1] == results and words[words.index("--profile") + 1] == "smoke"


def test_a_missing_package_ends_a_run_with_its_import_error_alone(tmp_path):
    """A package the environment lacks (here pydantic, shadowed by a module that fails to import) ends
    ``experiments.run`` with that ImportError and exit 1: its exit hook, registered before the imports, does nothing
    rather than adding a NameError of its own."""
    import os
    import subprocess
    import sys

    (tmp_path / "pydantic.py").write_text("raise ImportError('pydantic is not installed here')\n")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO}"}
    proc = subprocess.run(
        [sys.executable, "-m", "experiments.run", "workers=1"], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 1
    assert "ImportError: pydantic is not installed here" in proc.stderr
    assert "NameError" not in proc.stderr and proc.stderr.count("Traceback") == 1
