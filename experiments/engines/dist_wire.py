"""The distributed engine's messages (experiments/engines/distributed.py): one flat tensor of ``HEADER + d``
entries in the problem's dtype, both ways. Header: command, version, loss, length, and for a gradient its compute
seconds, target seconds, timing code (emulation.py) and the time it was sent; then x, g, or an error's text.
Integers and times are stored bit for bit in the float entries (a float64 time in two entries of a float32 buffer)."""

from __future__ import annotations

import torch

HEADER = 9
COMPUTE, HOLD, STOP, GRADIENT, BYE, ERROR = 1, 2, 3, 4, 5, 6
INT_OF = {
    torch.float32: torch.int32,
    torch.float64: torch.int64,
    torch.float16: torch.int16,
    torch.bfloat16: torch.int16,
}


def put_header(buf: torch.Tensor, cmd: int, version: int = 0, loss: float = 0.0, length: int = 0) -> None:
    h = buf[:HEADER].view(INT_OF[buf.dtype])
    h[0], h[1], h[3] = cmd, version, length
    buf[2] = loss


def get_header(buf: torch.Tensor) -> tuple[int, int, float, int]:
    h = buf[:HEADER].view(INT_OF[buf.dtype])
    return int(h[0]), int(h[1]), float(buf[2]), int(h[3])


def put_time(buf: torch.Tensor, t: float) -> None:
    """A ``time.perf_counter()`` reading into header words 7-8, in whole microseconds (two 31-bit halves: the
    header's integer view may be 32 bits wide)."""
    us = int(t * 1e6)
    h = buf[:HEADER].view(INT_OF[buf.dtype])
    h[7], h[8] = us >> 31, us & 0x7FFFFFFF


def get_time(buf: torch.Tensor) -> float:
    h = buf[:HEADER].view(INT_OF[buf.dtype])
    return ((int(h[7]) << 31) | int(h[8])) / 1e6


def put_text(buf: torch.Tensor, text: str) -> None:
    """An ``error`` message carrying ``text`` (UTF-8, cut to the payload's size: element size x d bytes)."""
    raw = buf[HEADER:].view(torch.uint8)
    data = torch.frombuffer(bytearray(text.encode()[: raw.numel()]), dtype=torch.uint8)
    raw[: data.numel()].copy_(data)
    put_header(buf, ERROR, length=data.numel())


def get_text(buf: torch.Tensor, length: int) -> str:
    return bytes(buf[HEADER:].view(torch.uint8)[:length].tolist()).decode(errors="replace")
