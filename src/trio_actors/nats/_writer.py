"""The NATS client's outgoing side: frames into the buffer or straight to the
socket, and the writer task that sends the buffer.

:func:`queue_frame` is where every frame of a client goes (a publish, a SUB, a PING,
a PONG): written through to an idle socket, or appended to the connection's buffer
for the writer; :func:`write` is the writer task ``_transport.py`` runs on each
stream. The client's three writer fields (``_wake_writer``, ``_writing``,
``_write_through``) and its ``before_writing`` callbacks are read and written
only here.
"""

from __future__ import annotations

import logging
import os
from threading import get_ident
from typing import TYPE_CHECKING

import trio

from ._connection import ConnectionState
from ._handshake import ConnectionClosed

if TYPE_CHECKING:
    from ._client import Client
    from ._transport import _Stream

__all__ = ["BufferFull"]

_CLOSED = ConnectionState.CLOSED
_log = logging.getLogger("trio_actors.nats")


class BufferFull(Exception):
    """:meth:`Client.publish` would exceed the buffer of bytes not yet sent."""


def queue_frame(client: Client, data: bytes, *, message: bool) -> bool:
    """Buffer one frame of ``client``'s for the writer, or hand it to the socket at once; return
    whether it waits in the buffer. A ``message`` (PUB/HPUB) counts against the
    buffer's limit and is kept while disconnected; any other frame is then
    dropped (reconnecting makes the SUBs and PINGs that matter again). Never a
    checkpoint.

    **Write-through**, in the manner of Nagle's algorithm: when nothing is
    buffered, the writer is not sending, and nothing was written through since
    the reader last received or the writer last sent, the frame is written to
    the socket now (one non-blocking ``os.write``; what the socket does not take
    is buffered). A request, or a reply to one, then leaves without waiting for
    the writer task's turn (measured: ``NATS-rr``, see ``docs/performance``),
    while a burst of publishes still leaves in one ``send_all``: its first frame
    is written through, the rest wait for the writer. Plain TCP only.
    """
    if get_ident() != client._thread:
        raise RuntimeError(
            "a NATS client is used from the trio thread that connected it only; from "
            "another thread, call trio.from_thread.run_sync(nc.publish, ...)"
        )
    conn = client._conn
    if conn.state is _CLOSED:
        raise ConnectionClosed("the connection is closed")
    stream = client._stream
    if not message:  # (small, and never refused: a PONG, a PING, a SUB)
        if stream is None:
            return False
    elif stream is None:
        reconnect = client._options.reconnect
        assert reconnect is not None  # (disconnected only while reconnecting)
        if conn.pending_bytes + len(data) > reconnect.buffer_bytes:
            raise BufferFull(
                f"disconnected from {client._server.url} (reconnecting): "
                f"{conn.pending_bytes} bytes wait to be sent; {len(data)} more would be "
                f"over Reconnect.buffer_bytes={reconnect.buffer_bytes}"
            )
    elif conn.pending_bytes + len(data) > client._options.max_pending_bytes:
        raise BufferFull(
            f"{conn.pending_bytes} bytes wait to be sent; {len(data)} more would be over "
            f"max_pending_bytes={client._options.max_pending_bytes}"
        )
    if (
        client._write_through
        and not conn.out
        and not client._writing
        and stream is not None
        and stream.fd is not None
    ):
        client._write_through = False
        try:
            sent = os.write(stream.fd, data)
        except OSError:  # (full: BlockingIOError; broken: the writer will find out)
            sent = 0
        if sent == len(data):
            return False
        if sent:
            # The rest of a frame the socket took in part: a bytearray, so that
            # it is never taken for a whole message to keep across a reconnect
            # (Connection.lost), even where its bytes happen to begin "PUB ".
            rest = bytearray(data[sent:])
            conn.out.append(rest)
            conn.pending_bytes += len(rest)
            client._wake_writer.set()
            return True
    conn.out.append(data)
    conn.pending_bytes += len(data)
    client._wake_writer.set()
    return True


async def write(client: Client, stream: _Stream) -> None:
    """The writer task of one stream: at each wake-up, the ``before_writing``
    callbacks publish what they held back, then everything buffered leaves in one
    ``send_all``. Runs until cancelled (the stream's end); a checkpoint at each
    wake-up and in ``send_all``."""
    conn = client._conn
    while True:
        await client._wake_writer.wait()
        for callback in tuple(client._before_writing):  # (their publishes join this write)
            try:
                callback()
            except Exception:  # (a bug of the callback's: not the connection's end)
                _log.exception("nats: a before_writing callback raised; ignored")
        client._wake_writer = trio.Event()
        out = conn.out
        if out:
            conn.out = []
            conn.pending_bytes = 0
            client._writing = True
            try:
                await stream.stream.send_all(b"".join(out))
            finally:
                client._writing = False
        client._write_through = True
