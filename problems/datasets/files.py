"""The data error type and small file helpers: atomic writes, HTML detection, one-line messages."""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from filelock import FileLock


class DataError(ValueError):
    """A data file is missing, unreadable or malformed.

    The message is one line; it names the file and, where it can, says how to get a good copy.
    """


def special_kind(mode: int) -> str | None:
    """What the ``st_mode`` of an ``os.stat`` names when it is not a regular file: ``"a folder"``, ``"a named pipe"``,
    ``"a socket"``, ``"a device"`` or ``"a special file"``; None for a regular file. The one wording of every
    "<path>: a named pipe, not a regular file" message (data files, calibration, summaries, status files)."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a special file"


def stat_signature(paths) -> tuple:
    """((resolved path, size, mtime_ns), ...) of ``paths`` in the order given: what a cache keyed on files compares
    to tell that one of them was rewritten (the vision data kept per process; the LIBSVM parse cache keys on bytes)."""
    out = []
    for f in paths:
        st = Path(f).stat()
        out.append((str(Path(f).resolve()), st.st_size, st.st_mtime_ns))
    return tuple(out)


def file_sha256(path) -> str:
    """The sha256 (hex) of the bytes of the file at ``path``, read in 1 MiB blocks; kept per process for a file of the
    same resolved path, inode, size and times (a sweep's jobs, the parse cache and a run's provenance hash a
    data set once). The change time is in the key too: a write moves it, and no one can set it back (the
    modification time can be, with ``touch -d``). Raises OSError when it cannot be read."""
    st = Path(path).stat()
    return _sha256(str(Path(path).resolve()), st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


@functools.lru_cache(maxsize=256)
def _sha256(path: str, inode: int, size: int, mtime_ns: int, ctime_ns: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def one_line(text: object, limit: int = 300) -> str:
    """`text` with all whitespace runs (newlines included) collapsed to one space, cut to `limit` characters."""
    s = " ".join(str(text).split())
    return s if len(s) <= limit else s[: limit - 3] + "..."


def looks_like_html(head: bytes) -> bool:
    """True when the first bytes of a file look like an HTML/XML page (what a failed download often saves)."""
    h = head.lstrip().lower()
    return h.startswith((b"<!doctype", b"<html", b"<?xml", b"<head", b"<body")) or (h[:1] == b"<" and b">" in h[:64])


@contextlib.contextmanager
def atomic_path(dest: Path) -> Iterator[Path]:
    """Yield a temporary path beside `dest`; on normal exit move it onto `dest` with `os.replace`.

    The temporary file lives in `dest`'s directory (same file system, so the replace is atomic). If the body raises,
    the temporary file is removed and `dest` is left untouched.
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.replace(tmp_path, dest)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp_path.unlink()


@contextlib.contextmanager
def staging_lock(root: Path, name: str, done: Path) -> Iterator[None]:
    """Hold the lock file ``root/name`` (concurrent stagers wait for each other) while a data set is staged under
    ``root``, creating ``root`` first. When the staging raises and ``done`` (the staged folder) does not exist, the
    data folder is left as it was: the lock file and the folders this call created are removed."""
    root = Path(root)
    made = [p for p in (root, *root.parents) if not p.exists()]  # deepest first
    root.mkdir(parents=True, exist_ok=True)
    lock = root / name
    try:
        with FileLock(str(lock)):
            yield
    except BaseException:
        if not done.exists():
            lock.unlink(missing_ok=True)
            for folder in made:
                try:
                    folder.rmdir()
                except OSError:
                    break
        raise


@contextlib.contextmanager
def scratch_dir(parent: Path, prefix: str) -> Iterator[Path]:
    """A fresh directory under `parent` (same file system as the destination), removed with everything in it."""
    parent = Path(parent)
    parent.mkdir(parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(dir=parent, prefix=prefix))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def move_into_place(src: Path, dest: Path) -> None:
    """Move `src` onto `dest` atomically: `os.replace`, or across file systems a copy beside `dest` then replace."""
    try:
        os.replace(src, dest)
    except OSError as e:
        if e.errno != errno.EXDEV:
            raise
        if Path(src).is_dir():
            with scratch_dir(Path(dest).parent, f".{Path(dest).name}.") as tmp:
                shutil.copytree(src, tmp / "copy")
                os.replace(tmp / "copy", dest)
        else:
            with atomic_path(dest) as tmp:
                shutil.copyfile(src, tmp)
