"""Install a Debian dataset package (e.g. `dataset-fashion-mnist`) with apt-get, when we may."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from .files import one_line

APT_TIMEOUT_S = 900


def apt_disabled_reason() -> str | None:
    """Why apt-get may not be used here (a short phrase), or None when it may.

    apt-get is used only when the environment variable `APAM_NO_APT` is unset (or "0"/empty), we run as root, and
    `apt-get` is on PATH.
    """
    if os.environ.get("APAM_NO_APT", "") not in ("", "0"):
        return "apt-get disabled by APAM_NO_APT"
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "not root, so apt-get was not tried"
    if shutil.which("apt-get") is None:
        return "apt-get not found"
    return None


def _run(args: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    try:
        return subprocess.run(
            args,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=APT_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as e:
        return subprocess.CompletedProcess(args, 124, stdout=f"timed out after {e.timeout:.0f} s")
    except OSError as e:
        return subprocess.CompletedProcess(args, 127, stdout=str(e))


def _last_line(output: str | None) -> str:
    lines = [ln for ln in (output or "").splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("E:")]
    return one_line((errors or lines or ["no output"])[-1], 200)


def apt_install(package: str) -> str | None:
    """Run `apt-get install -y PACKAGE` non-interactively (output captured); None on success, else why not.

    If the install fails (typically: no package lists yet), runs `apt-get update` once and retries. Returns a
    one-line reason on failure (or when apt-get may not be used, see `apt_disabled_reason`); never raises.
    """
    reason = apt_disabled_reason()
    if reason is not None:
        return reason
    apt = shutil.which("apt-get") or "apt-get"
    print(f"problems.data: installing {package} with apt-get ...", file=sys.stderr, flush=True)
    r = _run([apt, "install", "-y", "-q", "--no-install-recommends", package])
    if r.returncode != 0:
        u = _run([apt, "update", "-q"])
        if u.returncode != 0:
            return (
                f"`apt-get install -y {package}` failed ({_last_line(r.stdout)}) and `apt-get update` failed "
                f"(exit {u.returncode}: {_last_line(u.stdout)})"
            )
        r = _run([apt, "install", "-y", "-q", "--no-install-recommends", package])
    if r.returncode != 0:
        return f"`apt-get install -y {package}` failed (exit {r.returncode}: {_last_line(r.stdout)})"
    return None
