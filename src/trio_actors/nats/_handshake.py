"""Opening one connection to one server: the URL, TCP, the ``INFO`` / ``CONNECT`` /
``PING`` / ``PONG`` handshake, and what ``CONNECT`` carries.

:func:`open_connection` is what :func:`~trio_actors.nats.connect` and every
reconnect call; it returns a stream whose handshake is done and the protocol core
that parsed it (holding the server's ``INFO``). A refused connection (an
authorization error) fails here, as :exc:`ServerError`, not later.
"""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import attrs
import trio

from ._protocol import NEED_DATA, ClientProtocol, Err, Info, Ping, Pong

__all__ = ["ConnectionClosed", "ServerError"]

_READ_SIZE = 65_536
VERSION = "0.1.0"


class ServerError(Exception):
    """The server sent ``-ERR`` (the message is the server's)."""


class ConnectionClosed(Exception):
    """The connection is closed: nothing more can be sent or received on it."""


@attrs.frozen
class ServerAddress:
    """One server of the pool: where it is and the credentials its URL carries."""

    host: str
    port: int
    user: str | None = None
    password: str | None = None
    #: the server was announced by another server's ``INFO`` (``connect_urls``)
    discovered: bool = False

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"nats://{host}:{self.port}"


def parse_url(url: object, *, discovered: bool = False) -> ServerAddress:
    """``nats://[user[:password]@]host[:port]`` (port 4222 when left out); a bare
    ``host:port`` as ``INFO``'s ``connect_urls`` gives them."""
    if not isinstance(url, str):
        raise TypeError(f"a server URL is a str such as 'nats://127.0.0.1:4222', got {url!r}")
    text = url if "://" in url else f"nats://{url}"
    parts = urlsplit(text)
    if parts.scheme != "nats":
        raise ValueError(f"a server URL must look like nats://host:port, got {url!r}")
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"the port of {url!r} is not a number from 0 to 65535") from None
    if not parts.hostname:
        raise ValueError(f"the server URL {url!r} names no host")
    return ServerAddress(
        parts.hostname,
        4222 if port is None else port,
        None if parts.username is None else unquote(parts.username),
        None if parts.password is None else unquote(parts.password),
        discovered,
    )


@attrs.frozen
class ConnectSettings:
    """What every connection of one client sends in ``CONNECT`` (and how it
    secures the stream)."""

    name: str | None = None
    #: TLS: the context to wrap the stream in (``INFO``'s ``tls_required``, or always
    #: when given), and the name to check the server's certificate against
    tls: ssl.SSLContext | None = None
    tls_hostname: str | None = None
    #: authentication (at most one kind; a URL's ``user:password@`` is the server's own)
    token: str | None = None
    user: str | None = None
    password: str | None = None
    nkey_seed: str | Path | None = None
    credentials: str | Path | None = None

    def connect_options(self, server: ServerAddress, info: dict[str, Any]) -> dict[str, Any]:
        """The ``CONNECT`` options for ``server``, whose ``INFO`` is ``info``."""
        options: dict[str, Any] = {
            "verbose": False,
            "pedantic": False,
            "headers": True,
            "no_responders": True,
            "protocol": 1,
            "lang": "python-trio",
            "version": VERSION,
        }
        if self.name is not None:
            options["name"] = self.name
        if server.user is not None:
            options["user"] = server.user
            options["pass"] = server.password or ""
        return options


async def open_connection(
    server: ServerAddress, settings: ConnectSettings
) -> tuple[trio.abc.Stream, ClientProtocol]:
    """TCP to ``server``, then the handshake. A checkpoint. On any failure the
    stream is closed and the error raised (``OSError``, :exc:`ServerError`,
    :exc:`~trio_actors.nats.ProtocolError`, :exc:`ConnectionClosed`)."""
    stream: trio.abc.Stream = await trio.open_tcp_stream(server.host, server.port)
    protocol = ClientProtocol()
    try:
        await _handshake(stream, protocol, server, settings)
    except BaseException:
        await trio.aclose_forcefully(stream)
        raise
    return stream, protocol


async def _handshake(
    stream: trio.abc.Stream,
    protocol: ClientProtocol,
    server: ServerAddress,
    settings: ConnectSettings,
) -> None:
    """Read INFO, send CONNECT and a PING, and wait for the PONG (an ``-ERR`` on
    the way is raised as :exc:`ServerError`). A checkpoint."""
    state = "info"
    while True:
        event = protocol.next_event()
        if event is NEED_DATA:
            data = await stream.receive_some(_READ_SIZE)
            if not data:
                raise ConnectionClosed("the server closed the connection during the handshake")
            protocol.receive_data(data)
            continue
        if type(event) is Info and state == "info":
            options = settings.connect_options(server, event.options)
            await stream.send_all(protocol.connect(options) + protocol.ping())
            state = "pong"
        elif type(event) is Err:
            raise ServerError(f"the server refused the connection: {event.message}")
        elif type(event) is Pong and state == "pong":
            return
        elif type(event) is Ping:
            await stream.send_all(protocol.pong())
