"""The keyboard of ``trio-actors top``: the terminal in cbreak mode, keys read in a
thread, and the bytes of a key press decoded.

rich draws but reads no keys. The keys come from ``os.read`` on the terminal in a
worker thread (``trio.to_thread.run_sync(..., abandon_on_cancel=True)``: cancelling
the reading task abandons the thread, blocked in its read until the process ends),
not from an ``FdStream`` on stdin, which would make the terminal's file description
non-blocking for every process sharing it (the shell after us). The terminal is in
cbreak mode while ``top`` runs -- each key arrives at once, unechoed; Ctrl-C still
sends ``SIGINT`` -- and its mode is restored however ``top`` ends.
"""

from __future__ import annotations

import os
import termios
import tty
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

import trio

__all__ = ["cbreak", "decode_keys", "read_keys"]

_SEQUENCES: Final = {
    b"\x1b[A": "up",
    b"\x1b[B": "down",
    b"\x1b[C": "right",
    b"\x1b[D": "left",
    b"\x1bOA": "up",  # (the same keys in the terminal's application mode)
    b"\x1bOB": "down",
    b"\x1bOC": "right",
    b"\x1bOD": "left",
}
_SINGLE: Final = {b"\r": "enter", b"\n": "enter", b"\x1b": "escape"}


def decode_keys(data: bytes) -> list[str]:
    """The keys in ``data`` (what one read of the terminal gave): printable
    characters as themselves, the arrows as ``up``/``down``/``left``/``right``,
    ``enter``, ``escape``. Other control characters and escape sequences are
    dropped (a function key's sequence as a whole: none of its bytes is taken for
    a key)."""
    keys: list[str] = []
    at = 0
    while at < len(data):
        three = data[at : at + 3]
        if three in _SEQUENCES:
            keys.append(_SEQUENCES[three])
            at += 3
            continue
        if data[at : at + 2] in (b"\x1b[", b"\x1bO"):  # (another sequence: skip it whole)
            at += 2
            while at < len(data) and not 0x40 <= data[at] <= 0x7E:
                at += 1
            at += 1
            continue
        byte = data[at : at + 1]
        if byte in _SINGLE:
            keys.append(_SINGLE[byte])
        elif 0x20 <= byte[0] < 0x7F:
            keys.append(byte.decode())
        at += 1
    return keys


@contextmanager
def cbreak(fd: int) -> Iterator[None]:
    """The terminal ``fd`` in cbreak mode for the block, its mode restored at its
    end (also after an exception or Ctrl-C)."""
    saved = termios.tcgetattr(fd)
    try:
        tty.setcbreak(fd)
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


async def read_keys(fd: int, keys: trio.MemorySendChannel[str]) -> None:
    """Send each key pressed on ``fd`` to ``keys`` until the terminal ends (or the
    task is cancelled: a checkpoint, the thread abandoned); then close ``keys``."""
    async with keys:
        while True:
            data = await trio.to_thread.run_sync(os.read, fd, 64, abandon_on_cancel=True)
            if not data:
                return
            for key in decode_keys(data):
                await keys.send(key)
