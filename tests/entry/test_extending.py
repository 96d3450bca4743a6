"""Your own net and dataset by ``_target_`` (docs/extending.md): the worked example of the docs, copied as written
into a folder of its own (a user module and a config folder), trains from the command line with ``--config-dir``
and from the Python API with ``hydra.searchpath``; no data set to download, no edit of the harness."""

import math
import os
import re
import subprocess
import sys

import pandas as pd
import pytest

from conftest import FIXED_CLOCK, REPO

DOC = (REPO / "docs" / "extending.md").read_text()


def _block(lang: str, marker: str) -> str:
    return next(b for b in re.findall(rf"```{lang}\n(.*?)```", DOC, flags=re.DOTALL) if marker in b)


@pytest.fixture
def project(tmp_path):
    """docs/extending.md's my_project/: my_models.py and myconf/problem/tiny_blobs.yaml, as the doc writes them."""
    root = tmp_path / "my_project"
    (root / "myconf" / "problem").mkdir(parents=True)
    (root / "my_models.py").write_text(_block("python", "class TinyNet"))
    (root / "myconf" / "problem" / "tiny_blobs.yaml").write_text(_block("yaml", "_target_: my_models.TinyNet"))
    return root


def _learned(trace: pd.DataFrame) -> None:
    loss = trace["train_loss"]
    assert loss.map(math.isfinite).all() and len(loss) >= 3
    assert loss.iloc[-1] < 0.5 * loss.iloc[0], list(loss)  # the two blobs are easy: the loss falls well below log 2


def test_the_documented_user_model_trains_from_the_command_line(project, tmp_path):
    results = tmp_path / "my_results"
    cmd = [
        sys.executable,
        "-m",
        "experiments.run",
        "--config-dir",
        str(project / "myconf"),
        "problem=tiny_blobs",
        "algorithm=apam",
        "workers=4",
        "epochs=3",
        f"results_dir={results}",
        *FIXED_CLOCK,
    ]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(project), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = pd.read_csv(results / "adhoc" / "summary.csv")
    assert len(summary) == 1
    row = summary.iloc[0]
    assert (row["status"], row["problem"], row["workers"]) == ("ok", "tiny_blobs", 4)
    assert row["final_train_acc"] > 0.9
    (run_dir,) = (results / "adhoc" / "runs").iterdir()
    assert "my_models.TinyNet" in (run_dir / "config.yaml").read_text()
    _learned(pd.read_csv(run_dir / "trace.csv"))


def test_the_documented_user_model_trains_through_the_api(project, tmp_path, monkeypatch):
    from experiments import load, run

    monkeypatch.syspath_prepend(str(project))
    result = run(
        [
            f"hydra.searchpath=[file://{project / 'myconf'}]",
            "problem=tiny_blobs",
            "algorithm=async_sgd",
            "workers=2",
            "epochs=3",
            *FIXED_CLOCK,
        ],
        results_dir=tmp_path / "api",
    )
    assert result.status == "ok", result.summary.get("message")
    _learned(result.trace)
    df = load(tmp_path / "api")
    assert list(df["problem"]) == ["tiny_blobs"] and list(df["algorithm"]) == ["async_sgd"]


def test_a_target_that_cannot_be_imported_is_one_error_line(project, tmp_path, monkeypatch):
    from experiments import run
    from experiments.errors import ConfigError

    monkeypatch.syspath_prepend(str(project))
    with pytest.raises((ConfigError, ValueError), match=r"_target_=my_models\.Nope"):
        run(
            [
                f"hydra.searchpath=[file://{project / 'myconf'}]",
                "problem=tiny_blobs",
                "problem.model={_target_:my_models.Nope}",
                "workers=1",
                "epochs=1",
                *FIXED_CLOCK,
            ],
            results_dir=tmp_path / "r",
        )


BAD_NETS = """
import torch.nn as nn


def returns_none(width=4, **shape):
    return None


class NeedsArgs(nn.Module):
    def __init__(self, depth, width=4, **shape):
        super().__init__()


class NoParameters(nn.Module):
    def __init__(self, width=4, **shape):
        super().__init__()

    def forward(self, x):
        return x.flatten(1)
"""


@pytest.mark.parametrize(
    ("target", "why"),
    [
        ("returns_none", r"bad_nets\.returns_none: returned a NoneType, not a torch\.nn\.Module"),
        ("NeedsArgs", r"bad_nets\.NeedsArgs: building it failed \(TypeError: .*missing 1 required positional"),
        ("NoParameters", r"NoParameters: no parameters to train"),
        ("torch.nn.Flatten", r"_target_=torch\.nn\.Flatten: .*incorrect arguments"),  # takes no width=4
    ],
)
def test_a_target_that_is_not_a_net_is_one_error_line(project, tmp_path, monkeypatch, target, why):
    """A ``_target_`` that imports but does not build a trainable net: one line naming it, nothing written."""
    from experiments import run
    from experiments.errors import ConfigError

    (project / "bad_nets.py").write_text(BAD_NETS)
    monkeypatch.syspath_prepend(str(project))
    target = target if "." in target else f"bad_nets.{target}"
    with pytest.raises(ConfigError, match=r"problem=tiny_blobs: problem\.model " + why) as info:
        run(
            [
                f"hydra.searchpath=[file://{project / 'myconf'}]",
                "problem=tiny_blobs",
                f"problem.model._target_={target}",
                "workers=1",
                "epochs=1",
                *FIXED_CLOCK,
            ],
            results_dir=tmp_path / "r",
        )
    assert "\n" not in str(info.value) and not (tmp_path / "r").exists()


def test_a_target_that_cannot_be_imported_is_one_line_and_exit_2(project, tmp_path):
    """The documented problem without its module on the path: one line naming the ``_target_`` (Hydra's own
    multi-line log of the failed import held back), exit 2, nothing under results_dir."""
    results = tmp_path / "my_results"
    cmd = [sys.executable, "-m", "experiments.run", "--config-dir", str(project / "myconf"), "problem=tiny_blobs"]
    proc = subprocess.run(
        [*cmd, f"results_dir={results}", *FIXED_CLOCK],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr[-3000:]
    (line,) = proc.stderr.splitlines()
    assert re.fullmatch(
        r"error: problem=tiny_blobs: _target_=my_models\.\w+: cannot be imported \(No module named 'my_models'\)", line
    ), line
    assert not results.exists() or not any(results.rglob("*"))


def test_a_primary_config_in_a_config_dir_folder_is_composed_as_hydra_finds_it(tmp_path):
    """``-cd FOLDER -cn NAME`` with NAME.yaml in FOLDER: Hydra finds a primary config along the whole search path;
    the check composed it in conf/ only ("Cannot find primary config", exit 2)."""
    from experiments.settings.compose import compose_jobs
    from experiments.settings.source import Source

    (tmp_path / "mine.yaml").write_text("defaults:\n  - config\n  - _self_\nworkers: 3\n")
    source = Source(config_name="mine", search_dirs=(str(tmp_path),))
    assert source.primary_dir == str(tmp_path)
    (cfg,) = compose_jobs([["epochs=2"]], source)
    assert (cfg.workers, cfg.epochs, cfg.algorithm.name) == (3, 2, "apam")  # conf/'s defaults under the folder's own
    cmd = [sys.executable, "-m", "experiments.run", "-cd", str(tmp_path), "-cn", "mine", "--cfg", "job"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0 and "\nworkers: 3\n" in proc.stdout, proc.stderr[-2000:]
