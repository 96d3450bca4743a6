"""A stop signal while a command's modules load (``python -m experiments.<tool>``, ``python -m plots``): one line and
128 + the signal, never a traceback (experiments.stops.while_loading); a process that imports the packages keeps its
own handlers, and a signal its caller ignores stays ignored."""

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO

COMMANDS = [
    ["-m", "experiments.report"],
    ["-m", "experiments.reproduce"],
    ["-m", "experiments.aggregate"],
    ["-m", "experiments.prune"],
    ["-m", "experiments.calibrate"],
    ["-m", "plots"],
]


def _catches(pid: int, sig: int) -> bool | None:
    """Whether process ``pid`` has a handler of its own for ``sig`` (``SigCgt`` of /proc/PID/status), or None when
    the process is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    caught = next((int(line.split()[1], 16) for line in status.splitlines() if line.startswith("SigCgt:")), None)
    return None if caught is None else bool(caught >> (sig - 1) & 1)


def _sigint_as_default() -> None:  # a child of a pytest-xdist worker may inherit Ctrl-C ignored
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[-1])
def test_ctrl_c_while_a_command_loads_is_one_line_and_exit_130(tmp_path, command):
    """Ctrl-C sent as soon as the loading guard is up (its SIGTERM handler shows in /proc; the tools themselves leave
    SIGTERM alone until their main runs, and the guard is first seen long before that): one line, exit 130. Before
    the guard, a KeyboardInterrupt in an import printed a traceback."""
    proc = subprocess.Popen(
        [sys.executable, *command, "--no-such-flag", str(tmp_path / "none")],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_sigint_as_default,  # noqa: PLW1509 - only a signal handler set, before exec
    )
    try:
        deadline, guarded = time.monotonic() + 60, False
        while time.monotonic() < deadline and not guarded and proc.poll() is None:
            guarded = bool(_catches(proc.pid, signal.SIGTERM))
            time.sleep(0.001)
        assert guarded, f"no loading guard seen; exit {proc.poll()}"
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert len(stderr.splitlines()) == 1 and stderr.startswith("interrupted"), stderr


def test_the_guard_keeps_an_ignored_signal_ignored_and_puts_the_handlers_back():
    """``nohup`` ignores SIGHUP: the guard leaves it so; :func:`loaded` gives Ctrl-C back to Python."""
    code = (
        "import signal\n"
        "signal.signal(signal.SIGHUP, signal.SIG_IGN)\n"
        "from experiments import stops\n"
        "stops.while_loading()\n"
        "assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN\n"
        "assert signal.getsignal(signal.SIGINT) is stops._stopped_while_loading\n"
        "assert signal.getsignal(signal.SIGTERM) is stops._stopped_while_loading\n"
        "stops.loaded()\n"
        "assert signal.getsignal(signal.SIGINT) is signal.default_int_handler\n"
        "assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL\n"
        "assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_importing_the_packages_leaves_the_importers_signal_handlers_alone():
    """Only a ``python -m`` command is guarded; a notebook or a script that imports ``experiments`` and ``plots``
    keeps Ctrl-C and SIGTERM as they were."""
    code = (
        "import signal\n"
        "before = [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)]\n"
        "import experiments, plots, experiments.report\n"
        "assert [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)] == before\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
