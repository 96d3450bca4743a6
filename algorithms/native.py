"""The paper-variant AMSGrad step as one C loop (``algorithms/amsgrad_kernel.c``), built by the machine's C compiler.

Why: the master applies every update, and at small d (784) the eager step's seven torch calls cost many times the
arithmetic (dispatch and cold caches); torch.compile's call overhead is of the same order below d = 2**17, and
torch's fused Adam kernel has bias correction and no vhat floor (not the paper's rule). One C loop called through
ctypes costs a few microseconds there (``benchmarks/bench_rules.py`` measures the three). Kept as plain C through
ctypes rather than ``torch.utils.cpp_extension.load_inline``: that builds a C++ extension against torch's headers
(ninja and a C++ toolchain, a build of tens of seconds per machine and per torch version, and a CPython ABI tie),
while this loop needs no torch API -- one C file, one ``cc`` call, and a fallback to the eager step without a
compiler.

The shared object is compiled once per machine with ``$CC`` (default ``cc``) and the flags in :data:`CFLAGS`
(``-march=native``: vector instructions of this CPU; ``-ffp-contract=off``: no fused multiply-add, so each operation
rounds as the eager torch ops do) into ``$XDG_CACHE_HOME/apam-harness/native/amsgrad-<hash>.so`` (``~/.cache`` by
default; the hash covers the source, the flags, the compiler's version and the CPU's feature flags, so a shared home
directory across different machines never loads another CPU's build). The file is written under a temporary name
and renamed into place, so processes that build at once never load a half-written file. ctypes releases the GIL
during the call.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from pathlib import Path

import torch

SOURCE = Path(__file__).with_name("amsgrad_kernel.c")
CFLAGS = ("-O3", "-march=native", "-ffp-contract=off", "-fno-math-errno", "-shared", "-fPIC")
DTYPES = {torch.float32: "amsgrad_paper_f32", torch.float64: "amsgrad_paper_f64"}
_ARGTYPES = [ctypes.c_void_p] * 5 + [ctypes.c_int64] + [ctypes.c_double] * 6


class NativeUnavailable(RuntimeError):
    """The C kernel cannot be built or loaded here; the message says why (no compiler, a compiler error, ...)."""


def _cpu_flags() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                return line
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cache_home() -> Path:
    """The user's cache folder: ``$XDG_CACHE_HOME`` when it is an absolute path, else ``~/.cache``. The XDG Base
    Directory spec says a relative value is invalid and to be ignored (it was taken: the files went below whatever
    folder a command was started in). The harness's files go in its ``apam-harness`` folder (this kernel's, and the
    calibration's: experiments/clock/calibration.py)."""
    env = os.environ.get("XDG_CACHE_HOME", "")
    return Path(env) if os.path.isabs(env) else Path.home() / ".cache"


def _cache_dir() -> Path:
    return cache_home() / "apam-harness" / "native"


def _build(cc: str) -> Path:
    compiler = shutil.which(cc)
    if compiler is None:
        raise NativeUnavailable(f"no C compiler {cc!r} on PATH (set CC to one)")
    try:
        version = subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise NativeUnavailable(f"C compiler {compiler} does not run: {exc}") from exc
    digest = hashlib.sha1("\0".join([SOURCE.read_text(), " ".join(CFLAGS), version, _cpu_flags()]).encode())
    target = _cache_dir() / f"amsgrad-{digest.hexdigest()[:16]}.so"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".so.tmp", dir=target.parent)
    os.close(fd)
    try:
        done = subprocess.run([compiler, *CFLAGS, str(SOURCE), "-o", tmp], capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise NativeUnavailable(f"{compiler} failed on {SOURCE.name}: {done.stderr.strip()[:500]}")
        os.replace(tmp, target)
    except (OSError, subprocess.SubprocessError) as exc:
        raise NativeUnavailable(f"building {SOURCE.name} with {compiler} failed: {exc}") from exc
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target


_LOADED: dict = {}


def kernels() -> dict[torch.dtype, ctypes._CFuncPtr]:
    """The C step for each supported dtype (float32, float64), built and loaded once per process.

    Raises NativeUnavailable when no compiler works or the build fails; the failure is remembered, so a process
    tries once.
    """
    if "fns" not in _LOADED:
        if "error" in _LOADED:
            raise NativeUnavailable(_LOADED["error"])
        try:
            lib = ctypes.CDLL(str(_build(os.environ.get("CC", "cc"))))
        except (NativeUnavailable, OSError) as exc:
            _LOADED["error"] = str(exc)
            raise NativeUnavailable(str(exc)) from exc
        fns = {}
        for dtype, name in DTYPES.items():
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = _ARGTYPES, None
            fns[dtype] = fn
        _LOADED["fns"] = fns
    return _LOADED["fns"]


def available() -> bool:
    """Whether :func:`kernels` works on this machine (builds it on the first call)."""
    try:
        kernels()
    except NativeUnavailable:
        return False
    return True


def paper_step(
    x: torch.Tensor,
    g: torch.Tensor,
    m: torch.Tensor,
    v: torch.Tensor,
    vhat: torch.Tensor,
    *,
    lr: float,
    one_minus_beta1: float,
    beta2: float,
    one_minus_beta2: float,
    vhat_floor: float,
    eps: float,
) -> None:
    """One paper-variant AMSGrad step in place on x, m, v, vhat (amsgrad_kernel.c gives the arithmetic).

    Every tensor: shape (d,), the same dtype (float32 or float64), contiguous, on the CPU, none sharing memory with
    another (the caller checks; a violation is undefined behaviour in C). Raises NativeUnavailable as
    :func:`kernels`.
    """
    kernels()[x.dtype](
        x.data_ptr(),
        g.data_ptr(),
        m.data_ptr(),
        v.data_ptr(),
        vhat.data_ptr(),
        x.numel(),
        lr,
        one_minus_beta1,
        beta2,
        one_minus_beta2,
        vhat_floor,
        eps,
    )
