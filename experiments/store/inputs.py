"""The files a run reads besides its config: a LIBSVM data set (``problem.path``, ``problem.test_path``), a replayed
``compute_times.csv`` (``delay.replay``) and a replayed ``timeline.csv`` (``engine.trace``).

A run's id names such a file by its path (experiments/store/run_id.py), not by what it holds: the runner records each
file's size and sha256 in the run's ``provenance.json`` (``inputs``, :func:`fingerprints`), and a finished run whose
file now holds other bytes runs again (:func:`input_changes`, called where a config change is looked for), as a run
whose config changed does. A run recorded before ``inputs`` existed is not compared (as a config key added since).
"""

from __future__ import annotations

from pathlib import Path

from problems.datasets.files import file_sha256

INPUT_KEYS = ("problem.path", "problem.test_path", "delay.replay", "engine.trace")
"""Dotted config keys that name a file a run reads (None or absent: the run reads none)."""


def _value(config: dict, key: str):
    """``config[a][b]`` for ``key`` ``a.b``; None when a part is missing."""
    node = config
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def fingerprint(path: str | Path) -> dict:
    """``{"path": absolute path, "bytes": size, "sha256": hex}`` of a regular file.

    Raises:
        OSError: it cannot be read (it was checked before the run: experiments/settings/preflight.py).
    """
    p = Path(path).absolute()
    return {"path": str(p), "bytes": p.stat().st_size, "sha256": file_sha256(p)}


def fingerprints(config: dict) -> dict:
    """Key -> :func:`fingerprint` for each of :data:`INPUT_KEYS` set in the resolved ``config`` (a plain dict)
    whose file is a regular file; {} for a run that reads none (the default Fashion-MNIST problem)."""
    out = {}
    for key in INPUT_KEYS:
        value = _value(config, key)
        if isinstance(value, str) and Path(value).is_file():
            out[key] = fingerprint(value)
    return out


def input_changes(recorded, config: dict) -> list[str]:
    """How the files ``config`` names differ from those a finished run recorded (``recorded``: its provenance's
    ``inputs``; anything but a mapping: nothing to compare), one ``"<key>: ..."`` line per file: other bytes, gone
    or unreadable. A key the run did not record (written before ``inputs`` existed, or a file it did not read) is no
    change."""
    if not isinstance(recorded, dict):
        return []
    out = []
    for key, old in recorded.items():
        value = _value(config, key)
        if key not in INPUT_KEYS or not isinstance(old, dict) or not isinstance(value, str):
            continue
        try:
            new = fingerprint(value)
        except OSError as exc:
            out.append(f"{key}: {value} cannot be read now ({exc.strerror or exc})")
            continue
        if new["sha256"] != old.get("sha256"):
            out.append(
                f"{key}: {value} holds other bytes than when the run read it "
                f"({old.get('bytes')} -> {new['bytes']} bytes, sha256 {str(old.get('sha256'))[:12]} -> "
                f"{new['sha256'][:12]})"
            )
    return out
