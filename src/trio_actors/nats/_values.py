"""The NATS protocol's values: the events the server's bytes parse to
(:class:`Info`, :class:`Msg`, :class:`Ping`, :class:`Pong`, :class:`Ok`,
:class:`Err`), a message's :class:`Headers` (and their bytes, both ways), and the
protocol's errors. No I/O; the parser and the frame builder are ``_protocol.py``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final, cast

from ._checks import _check_header

__all__ = [
    "Err",
    "Event",
    "Headers",
    "Info",
    "MaxPayloadExceeded",
    "Msg",
    "Ok",
    "Ping",
    "Pong",
    "ProtocolError",
]

_HEADER_VERSION: Final = b"NATS/1.0"
_CRLF: Final = b"\r\n"


class ProtocolError(Exception):
    """The server sent something that is not the NATS protocol (the message says
    what and where), or the protocol was used after that."""


class MaxPayloadExceeded(ValueError):
    """A message is larger than the server's ``max_payload``."""


class Headers(Mapping[str, str]):
    """The headers of a message: a mapping of each name to its first value, in the
    order they came; :meth:`get_all` has every value of a name (a name may repeat).
    Names are kept as sent and looked up exactly (NATS headers are case-sensitive
    on the wire; the servers' own are ``Nats-...``)."""

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, str] | list[tuple[str, str]] | None = None) -> None:
        pairs = list(items.items()) if isinstance(items, Mapping) else list(items or ())
        for name, value in pairs:
            _check_header(name, value)
        self._items: list[tuple[str, str]] = pairs

    def __getitem__(self, name: str) -> str:
        for key, value in self._items:
            if key == name:
                return value
        raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys(key for key, _ in self._items))

    def __len__(self) -> int:
        return len(dict.fromkeys(key for key, _ in self._items))

    def get_all(self, name: str) -> list[str]:
        """Every value of ``name``, in order (``[]`` if there is none)."""
        return [value for key, value in self._items if key == name]

    def items_all(self) -> list[tuple[str, str]]:
        """Every (name, value) pair, repeats included, in order."""
        return list(self._items)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Headers):
            return self._items == other._items
        return Mapping.__eq__(self, other)

    def __hash__(self) -> int:  # pragma: no cover - unhashable, as a dict
        raise TypeError("unhashable type: 'Headers'")

    def __repr__(self) -> str:
        return f"Headers({self._items!r})"


# --- events -------------------------------------------------------------------------


class Event:
    """What the server said (one of the classes below)."""

    __slots__ = ()

    def _fields(self) -> tuple[str, ...]:
        return cast(tuple[str, ...], type(self).__slots__)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and all(
            getattr(self, name) == getattr(other, name) for name in self._fields()
        )

    def __hash__(self) -> int:  # pragma: no cover - events are not keys
        raise TypeError(f"unhashable type: {type(self).__name__!r}")

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields())
        return f"{type(self).__name__}({fields})"


class Info(Event):
    """``INFO``: the server's description of itself (``options``: the JSON, as a
    dict -- ``server_id``, ``max_payload``, ``headers``, ``connect_urls``,
    ``lame_duck_mode``, ``nonce``, ...)."""

    __slots__ = ("options",)

    def __init__(self, options: dict[str, Any]) -> None:
        self.options = options


class Msg(Event):
    """``MSG`` / ``HMSG``: a message for subscription ``sid``.

    ``headers`` is ``None`` for a ``MSG``; ``status`` (an int) and ``description``
    are the header block's status line, if it has one (``503``: no responders).
    """

    __slots__ = ("data", "description", "headers", "reply", "sid", "status", "subject")

    def __init__(
        self,
        subject: str,
        sid: int,
        reply: str | None,
        data: bytes,
        headers: Headers | None = None,
        status: int | None = None,
        description: str | None = None,
    ) -> None:
        self.subject = subject
        self.sid = sid
        self.reply = reply
        self.data = data
        self.headers = headers
        self.status = status
        self.description = description


class Ping(Event):
    """``PING``: the server checks the client is alive (answer with
    :meth:`ClientProtocol.pong`)."""

    __slots__ = ()


class Pong(Event):
    """``PONG``: the answer to a ``PING`` the client sent."""

    __slots__ = ()


class Ok(Event):
    """``+OK`` (only in verbose mode, which this client does not ask for)."""

    __slots__ = ()


class Err(Event):
    """``-ERR '<message>'``: the server reports an error (some, such as
    ``Authorization Violation`` or ``Slow Consumer``, end the connection)."""

    __slots__ = ("message",)

    def __init__(self, message: str) -> None:
        self.message = message


_PING: Final = Ping()
_PONG: Final = Pong()
_OK: Final = Ok()


def _encode_headers(headers: Headers | Mapping[str, str] | None) -> bytes:
    if not isinstance(headers, Headers):
        headers = Headers(headers or {})
    lines = [_HEADER_VERSION]
    lines.extend(f"{name}: {value}".encode() for name, value in headers.items_all())
    return _CRLF.join(lines) + _CRLF + _CRLF


def _parse_headers(block: bytes) -> tuple[Headers, int | None, str | None]:
    """A header block: its headers, and the status line's code and description."""
    if not block.startswith(_HEADER_VERSION):
        raise ProtocolError(f"a header block must begin with NATS/1.0, got {block[:40]!r}")
    if not block.endswith(_CRLF + _CRLF):
        raise ProtocolError(f"a header block must end with an empty line, got ...{block[-20:]!r}")
    lines = block[:-4].split(_CRLF)
    status_line = lines[0][len(_HEADER_VERSION) :].strip()
    status: int | None = None
    description: str | None = None
    if status_line:
        code, _, text = status_line.partition(b" ")
        if not (len(code) == 3 and code.isdigit()):
            raise ProtocolError(f"a header status must be three digits, got {lines[0]!r}")
        status = int(code)
        description = text.strip().decode("utf-8", "replace") or None
    items = []
    for raw in lines[1:]:
        name, colon, value = raw.partition(b":")
        if not colon or not name.strip():
            raise ProtocolError(f"a header line must be 'Name: value', got {raw!r}")
        try:
            items.append((name.strip().decode(), value.strip().decode()))
        except UnicodeDecodeError:
            raise ProtocolError(f"a header is not UTF-8: {raw!r}") from None
    headers = Headers.__new__(Headers)
    headers._items = items  # (received: kept as the server sent them)
    return headers, status, description
