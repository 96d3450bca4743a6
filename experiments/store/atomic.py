"""One atomic writer for every file the harness keeps (run folders, summaries, the calibration file).

A file is written whole under a temporary name in its own folder, flushed to disk (``fsync``) and renamed onto its
final name (``os.replace``), so a reader sees the old content or the new one, never a part. The temporary name is
unique per writer (``.<name>.<pid>.<random hex>.tmp``) and created with ``O_CREAT | O_EXCL | O_NOFOLLOW``: two
writers of the same file never share a temporary file, and a symlink planted at the temporary name is never
followed. ``os.replace`` replaces a symlink at the final name by the new file instead of writing through it.
On any error (a full disk included) the temporary file is removed and the error is raised again as one ``OSError``
line naming the final file (``[Errno 28] No space left on device: 'results/exp/summary.csv'``).
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

TMP_SUFFIX = ".tmp"


def temp_name(path: Path) -> Path:
    """A fresh temporary name beside ``path``: ``.<name>.<pid>.<8 random hex>.tmp``."""
    return path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}{TMP_SUFFIX}")


def atomic_write_bytes(path: str | Path, data: bytes, mode: int = 0o666) -> None:
    """Write ``data`` to ``path`` atomically (module docstring); the folder must exist.

    Args:
        path: the final file; a symlink there is replaced, not followed.
        data: the whole content.
        mode: permission bits of a new file, before the process's umask (as ``open`` creates files).

    Raises:
        OSError: the file could not be written (one line: errno, reason, the final path); nothing is left behind.
    """
    path = Path(path)
    tmp = temp_name(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(tmp, flags, mode)
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from None
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from None
        raise


def atomic_write_text(path: str | Path, text: str, encoding: str = "utf-8") -> None:
    """Write ``text`` to ``path`` atomically, encoded with ``encoding`` (:func:`atomic_write_bytes`; a path it quotes
    keeps its bytes: :func:`encoded`).

    Raises:
        OSError: the file could not be written (one line naming ``path``); nothing is left behind.
    """
    atomic_write_bytes(path, encoded(text, encoding))


def encoded(text: str, encoding: str = "utf-8") -> bytes:
    """``text`` encoded with ``encoding``, a path it quotes with the bytes it has on disk: a name the system's encoding
    could not decode (a UTF-8 name under ``LC_ALL=C``, bytes that are no text) reaches Python from the command line
    as lone surrogates (``surrogateescape``, os.fsdecode), which a strict encoder refuses (a UnicodeEncodeError after
    the work was done); here they are those bytes again."""
    return text.encode(encoding, "surrogateescape")


def write_if_changed(path: str | Path, content: str | bytes) -> bool:
    """Write ``content`` (text is UTF-8 encoded, a path it quotes with its bytes: :func:`encoded`) to ``path``
    atomically (:func:`atomic_write_bytes`) unless the file holds exactly that already: then it stays as it was, its
    modification time included (a call that changed nothing leaves the committed files untouched). Returns True when
    written.

    Raises:
        OSError: the file could not be written (one line naming ``path``); nothing is left behind.
    """
    path = Path(path)
    data = encoded(content) if isinstance(content, str) else bytes(content)
    try:
        if path.is_file() and path.read_bytes() == data:
            return False
    except OSError:
        pass  # unreadable: written anew
    atomic_write_bytes(path, data)
    return True


def writable(folder: str | Path) -> bool:
    """Whether this process can create files in the existing ``folder``: a real temporary file, removed at once
    (``os.access`` says yes to root on a read-only mount)."""
    import tempfile

    try:
        tempfile.TemporaryFile(dir=folder).close()
    except OSError:
        return False
    return True
