"""The shared_memory engine's shared blocks and wake-ups (experiments/engines/shared_memory.py): the layout of
the control block ``ctrl`` (P, ROW) and the spinning replies block (P, ROW) int64, the pipe messages' binary
formats, the word views through which both are read and written, and the eventfd wake-up channels and the poller
the master blocks on."""

from __future__ import annotations

import os
import select
import struct
import sys

import torch

GRAD_MSG = struct.Struct("<cqddddbq")  # b"G", version, loss, compute_s, target_s, sent_s, timing code
# (emulation.py), the request's sequence number (a stopped request's late
# reply is told apart)
ROW = 8  # int64 words per worker row of ctrl and replies: 64 bytes, a cache line of its own
VERSION, SEQ = 0, 1  # words of worker w's row of the shared control block ctrl (P, ROW) int64
REPLY = struct.Struct("<qddddq")  # spin: words 0-5 of a replies row: version, loss, compute_s, target_s, sent_s,
# timing code
REPLY_DONE = 6  # spin: word of a replies row counting the gradients the worker has put there
SPIN_S = 200e-6  # how long a spinning side polls before it blocks (covers one master update)
ONE = (1).to_bytes(8, sys.byteorder)  # the 8 bytes written to an eventfd to wake its reader


def words(block: torch.Tensor) -> memoryview:
    """A flat int64 memoryview of a shared (P, ROW) int64 block: item ``w * ROW + i`` is word i of row w. An item read
    or write is one aligned 8-byte load or store (CPython moves it with an 8-byte memcpy), cheaper than a numpy
    scalar's."""
    return memoryview(block.numpy()).cast("B").cast("q")


def wake_channel() -> tuple[int, int]:
    """(read end, write end) of a wake-up channel: one eventfd where the OS has them (both ends the same fd),
    else a pipe. A wake-up is one 8-byte write, read back as 8 bytes."""
    if hasattr(os, "eventfd"):
        fd = os.eventfd(0, os.EFD_CLOEXEC)
        return fd, fd
    return os.pipe()


class ReadPoller:
    """Waits for any of a set of file descriptors to become readable: ``epoll`` where the OS has it (a wait costs the
    same whatever the number of fds, where ``poll(2)`` scans them all: 2P + 1 fds at P workers), else ``poll(2)``.
    Level-triggered, like ``poll``: a pipe with data, a closed pipe or an exited process's sentinel reads as ready until
    it is read or unregistered. ``poll(timeout_ms)`` (None: no timeout) returns ``(fd, event mask)`` pairs;
    :meth:`close` frees the epoll descriptor."""

    def __init__(self) -> None:
        self._epoll = select.epoll() if hasattr(select, "epoll") else None
        self._poll = None if self._epoll is not None else select.poll()

    def register(self, fd: int) -> None:
        if self._epoll is not None:
            self._epoll.register(fd, select.EPOLLIN)
        else:
            self._poll.register(fd, select.POLLIN)

    def unregister(self, fd: int) -> None:
        (self._epoll if self._epoll is not None else self._poll).unregister(fd)

    def poll(self, timeout_ms: int | None) -> list[tuple[int, int]]:
        if self._epoll is not None:
            return self._epoll.poll(-1 if timeout_ms is None else timeout_ms / 1000)
        return self._poll.poll(timeout_ms)

    def close(self) -> None:
        if self._epoll is not None:
            self._epoll.close()
