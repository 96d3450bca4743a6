"""torchrun's environment (experiments/engines/dist_group.py): each of its variables is checked before anything is
written, one definition of "under torchrun" decides both the check of ``engine.master_addr`` and the engine's start,
and the rendezvous store of locally started workers gives way to a stop signal."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from conftest import REPO

DIST = ["engine=distributed", "workers=2", "updates=5"]
AS_RANK = "this process runs as a torchrun rank because RANK, WORLD_SIZE and MASTER_ADDR are set"


@pytest.mark.parametrize(
    ("env", "line"),
    [
        ({}, f"MASTER_PORT: not set; torchrun sets it with MASTER_ADDR ({AS_RANK})"),
        *(
            (
                {"MASTER_PORT": port},
                f"MASTER_PORT={port}: torchrun's MASTER_PORT must be a port number, 1 .. 65535 ({AS_RANK})",
            )
            for port in ("abc", "99999", "-5", "0")
        ),
        (
            {"MASTER_ADDR": " ", "MASTER_PORT": "29500"},
            f"MASTER_ADDR= : torchrun's MASTER_ADDR must name a host ({AS_RANK})",
        ),
    ],
)
def test_torchrun_s_master_address_and_port_are_checked_before_anything_is_written(tmp_path, entry_point, env, line):
    """Without MASTER_PORT the rendezvous was a traceback after an empty results folder was made; a port that is not
    one was a waiting line, a traceback and a [failed] row."""
    assert "MASTER_PORT" not in os.environ
    env = {"RANK": "1", "WORLD_SIZE": "3", "MASTER_ADDR": "127.0.0.1", **env}
    code, err = entry_point([f"results_dir={tmp_path}/res", *DIST], env=env)
    assert (code, err) == (2, f"error: {line}\n")
    assert not (tmp_path / "res").exists()


def test_stray_torchrun_variables_without_world_size_leave_the_master_address_checked(tmp_path, entry_point):
    """RANK and MASTER_ADDR without WORLD_SIZE: the check of engine.master_addr took it for torchrun and was skipped,
    the engine did not, and its store retried an unreachable address for 300 s."""
    assert "WORLD_SIZE" not in os.environ
    env = {"RANK": "0", "MASTER_ADDR": "127.0.0.1"}
    code, err = entry_point([f"results_dir={tmp_path}/res", *DIST, "engine.master_addr=192.0.2.1"], env=env)
    lines = err.splitlines()
    assert code == 2 and len(lines) == 1, err
    assert lines[0].startswith("error: engine.master_addr=192.0.2.1: not an address of this machine ("), err
    assert not (tmp_path / "res").exists()


@pytest.mark.parametrize(
    ("override", "env_line"),
    [("engine.master_addr=192.0.2.1", "MASTER_ADDR=127.0.0.1"), ("engine.master_port=29999", "MASTER_PORT=29500")],
)
def test_a_rendezvous_key_that_torchrun_overrides_is_refused_on_a_rank(tmp_path, entry_point, override, env_line):
    """Under torchrun its MASTER_ADDR and MASTER_PORT are the rendezvous: an ``engine.master_addr`` or ``master_port``
    of another value was accepted, ignored, and named the run id."""
    env = {"RANK": "0", "WORLD_SIZE": "3", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
    code, err = entry_point([f"results_dir={tmp_path}/res", *DIST, override], env=env)
    key = override.split("=")[0]
    assert (code, err) == (
        2,
        f"error: {override}: this process runs as a torchrun rank, whose rendezvous is torchrun's {env_line}; "
        f"leave {key} out (torchrun's --master_addr and --master_port set it)\n",
    )
    assert not (tmp_path / "res").exists()


def test_torchrun_variables_of_a_run_on_another_engine_are_not_read(tmp_path, entry_point):
    """A shell's stray RANK, WORLD_SIZE and MASTER_ADDR (no MASTER_PORT) do not refuse a shared_memory run."""
    env = {"RANK": "0", "WORLD_SIZE": "3", "MASTER_ADDR": "127.0.0.1"}
    code, err = entry_point(["--cfg", "job", f"results_dir={tmp_path}/res", "engine=shared_memory"], env=env)
    assert (code, err) == (0, "")


_STORE = r"""
import signal, sys, time, types
from experiments.engines.dist_group import store_for_local
signal.setitimer(signal.ITIMER_REAL, 1.0)
signal.signal(signal.SIGALRM, lambda *a: signal.default_int_handler(signal.SIGINT, None))
start = time.monotonic()
try:
    store_for_local(types.SimpleNamespace(master_addr="192.0.2.1", master_port=29517), 3)
except KeyboardInterrupt:
    print(f"interrupted after {time.monotonic() - start:.1f} s")
"""


def test_a_stop_signal_ends_the_wait_for_the_tcp_store_at_once():
    """The store's master connects to its own address, retrying for 300 s; blocked in torch's constructor, the
    process took no signal until then (SIGTERM was ignored)."""
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", _STORE], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("interrupted after 1."), proc.stdout
    assert time.monotonic() - start < 30


def test_stops_are_refused_on_a_torchrun_rank(tmp_path, entry_point):
    """Stopping a computation needs workers the master started (a torchrun rank may be on another machine); the
    settings ask the engine's one definition of "under torchrun"."""
    env = {"RANK": "0", "WORLD_SIZE": "3", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
    args = [f"results_dir={tmp_path}/res", *DIST, "algorithm.policy.name=ringmaster", "algorithm.policy.restart=true"]
    code, err = entry_point(args, env=env)
    assert code == 2 and err.startswith("error: algorithm.policy.restart=true: torchrun's worker ranks may run"), err
    assert not (tmp_path / "res").exists()
